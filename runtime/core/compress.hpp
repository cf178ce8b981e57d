// zstd, used only on bytes whose SHA-256 has already been checked against the index.
#pragma once

#include <cstdint>
#include <vector>

#include "bytes.hpp"

namespace kiln {

// One frame, content size recorded, no checksum (SHA-256 covers it), single-threaded so
// that the output depends only on the input and the level.
std::vector<std::uint8_t> zstd_compress(ByteView content, int level);

// Decompresses exactly one frame into exactly `content_size` bytes. Refuses a frame whose
// header declares another size, that would write more than content_size, that needs a
// window above 128 MiB, or that is followed by anything. `what` names the member.
std::vector<std::uint8_t> zstd_decompress_exact(ByteView stored, std::uint64_t content_size, const std::string& what);

}  // namespace kiln
