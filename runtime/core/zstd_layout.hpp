// Where a zstd frame's header and block headers lie (RFC 8878 §3.1.1), found by kiln's own reading
// of those few bytes. A full verification walks a compressed member's frame so while it hashes the
// member where it lies in the file: only the headers are copied privately, not the compressed
// blocks between them. zstd is given the headers only once the member's digest has matched.
#pragma once

#include <cstdint>
#include <functional>

#include "core/bytes.hpp"

namespace kiln {

struct ZstdLayout {
  bool followed = false;  // a frame's magic, then blocks up to the last one (and its checksum) within the bytes
  std::size_t header_size = 0;
  bool checksum = false;
  std::uint64_t end = 0;  // where the frame ends, when followed
};

// Walks the frame at the start of `size` bytes: `first` is at least their first 18 bytes (or all of
// them), `block_header(offset)` returns the 3 bytes at `offset` as a little-endian number. Reads
// nothing else; the caller makes each read a private copy, so that once the bytes' digest matches,
// everything the walk went by was signed. Never throws for what it finds: a walk that cannot be
// followed, or would read more than `max_blocks` block headers, says so (`followed` false) and the
// caller checks the frame another way.
ZstdLayout walk_zstd_frame(std::uint64_t size, ByteView first, std::size_t max_blocks,
                           const std::function<std::uint32_t(std::uint64_t)>& block_header);

}  // namespace kiln
