// zstd, used only on bytes whose SHA-256 has already been checked against the index.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/bytes.hpp"
#include "core/zstd_layout.hpp"

namespace kiln {

// What the writer puts in a frame's first block alone: a reader telling a member by its first
// bytes (a PTX member's .version and .target) then decodes this much, not a whole block of up to
// 128 KiB (FORMAT.md §4).
constexpr std::size_t kZstdFirstBlock = 4096;

// One frame, content size recorded, no checksum (SHA-256 covers it), single-threaded so
// that the output depends only on the input and the level; its first kZstdFirstBlock bytes of
// content are a block of their own.
std::vector<std::uint8_t> zstd_compress(ByteView content, int level);

// The same frames, from one context kept for many members: creating a context and its tables
// for every member costs more than compressing a small one. The output is the same bytes as
// zstd_compress's (the context is reset, parameters included, before each frame).
class ZstdCompressor {
 public:
  ZstdCompressor();
  ~ZstdCompressor();
  ZstdCompressor(const ZstdCompressor&) = delete;
  ZstdCompressor& operator=(const ZstdCompressor&) = delete;
  // Compresses `content` into `out` (grown to ZSTD_compressBound, never shrunk) and returns
  // the frame's size: the frame is out[0, size).
  std::size_t compress(ByteView content, int level, std::vector<std::uint8_t>& out);

 private:
  void* cctx_;  // ZSTD_CCtx
};

// The frame's own header against the index, without decompressing: exactly one frame filling
// `stored`, its content size declared and equal to `content_size`, no dictionary, a window of
// at most 2^27 bytes (FORMAT.md §4). Cheap; what verification without --deep checks.
void check_zstd_frame(ByteView stored, std::uint64_t content_size, const std::string& what);
// The same rules for a frame of `stored_size` bytes of which only the first bytes (`first`, at
// least the header) and the block headers were held privately, walked into `layout`: refuses as
// check_zstd_frame does and returns true, or returns false (nothing judged) where the walk does
// not settle it the way zstd would (the caller then checks a whole copy with check_zstd_frame).
bool check_zstd_frame_held(ByteView first, const ZstdLayout& layout, std::uint64_t stored_size, std::uint64_t content_size,
                           const std::string& what);
// The first `limit` bytes of the content of the frame whose first bytes are `stored` (the whole
// frame, or any part of it from its start), or fewer where those bytes run out first: what telling
// a member by its first bytes needs. The caller has checked the frame (check_zstd_frame or _held).
std::vector<std::uint8_t> zstd_decompress_prefix(ByteView stored, std::uint64_t content_size, std::size_t limit,
                                                 const std::string& what);

// Decompresses exactly one frame into exactly `content_size` bytes. Refuses a frame whose
// header declares another size, that would write more than content_size, that needs a
// window above 128 MiB, or that is followed by anything. `what` names the member.
std::vector<std::uint8_t> zstd_decompress_exact(ByteView stored, std::uint64_t content_size, const std::string& what);
// The same into `out` (grown when smaller, never shrunk), returning the content as a view of it:
// a caller decoding many members reuses one buffer.
ByteView zstd_decompress_exact_into(ByteView stored, std::uint64_t content_size, const std::string& what,
                                    std::vector<std::uint8_t>& out);

// Decompresses one frame fed in pieces, handing the content to `sink` in pieces: memory is the
// window (at most 128 MiB, refused above) plus one output block (128 KiB), whatever the member's
// size. The caller checks the frame's header first (check_zstd_frame), so the window limit
// holds before any memory is claimed. Uses this thread's context: one decoder per thread at a time.
class ZstdStreamDecoder {
 public:
  ZstdStreamDecoder(std::uint64_t content_size, std::string what);
  void feed(ByteView in, const std::function<void(ByteView)>& sink);
  void finish();  // throws unless exactly one whole frame of exactly content_size bytes came

 private:
  std::uint64_t content_size_;
  std::string what_;
  void* dctx_;  // ZSTD_DCtx, this thread's
  std::vector<std::uint8_t>& out_;  // this thread's output block
  std::uint64_t produced_ = 0;
  bool finished_ = false;
};

}  // namespace kiln
