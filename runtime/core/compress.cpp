#include "core/compress.hpp"

// ZSTD_getFrameHeader (the window size) is in zstd's stable-but-static section; libzstd.so exports it.
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include <algorithm>
#include <memory>
#include <string>

#include "core/error.hpp"

namespace kiln {
namespace {

struct DCtxDeleter {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

// 2^27 = 128 MiB is zstd's own default limit; stating it keeps the bound ours.
constexpr int kMaxWindowLog = 27;

}  // namespace

std::vector<std::uint8_t> zstd_compress(ByteView content, int level) {
  ZstdCompressor compressor;
  std::vector<std::uint8_t> out;
  out.resize(compressor.compress(content, level, out));
  return out;
}

ZstdCompressor::ZstdCompressor() : cctx_(ZSTD_createCCtx()) {
  if (cctx_ == nullptr) fail(Errc::internal, "zstd: cannot allocate a compression context");
}

ZstdCompressor::~ZstdCompressor() { ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(cctx_)); }

std::size_t ZstdCompressor::compress(ByteView content, int level, std::vector<std::uint8_t>& out) {
  auto* cctx = static_cast<ZSTD_CCtx*>(cctx_);
  ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 0);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_windowLog, 0);
  ZSTD_CCtx_setPledgedSrcSize(cctx, content.size);
  // The flush ends a block after the first bytes (and costs one more block header).
  std::size_t bound = ZSTD_compressBound(content.size) + 3;  // 3: a block header (RFC 8878 §3.1.1.2)
  if (out.size() < bound) out.resize(bound);
  ZSTD_outBuffer dst{out.data(), bound, 0};
  auto run = [&](std::size_t from, std::size_t to, ZSTD_EndDirective mode) {
    ZSTD_inBuffer src{content.data + from, to - from, 0};
    for (;;) {
      std::size_t left = ZSTD_compressStream2(cctx, &dst, &src, mode);
      if (ZSTD_isError(left)) fail(Errc::internal, std::string("zstd: compression failed: ") + ZSTD_getErrorName(left));
      if (left == 0 && src.pos == src.size) return;
      if (dst.pos == dst.size) fail(Errc::internal, "zstd: the frame outgrew its bound");
    }
  };
  const std::size_t first = std::min<std::size_t>(content.size, kZstdFirstBlock);
  if (first < content.size) run(0, first, ZSTD_e_flush);
  run(first < content.size ? first : 0, content.size, ZSTD_e_end);
  return dst.pos;
}

namespace {

// The header's rules (FORMAT.md §4), on a header zstd has read from signed bytes.
void check_frame_header(const ZSTD_frameHeader& header, std::uint64_t content_size, const std::string& what) {
  if (header.frameType != ZSTD_frame) fail(Errc::malformed, what + ": not a zstd data frame");
  if (header.frameContentSize == ZSTD_CONTENTSIZE_UNKNOWN) {
    fail(Errc::malformed, what + ": the zstd frame does not declare its content size");
  }
  if (header.frameContentSize != content_size) {
    fail(Errc::malformed, what + ": the zstd frame declares " + std::to_string(header.frameContentSize) +
                              " bytes but the index says " + std::to_string(content_size));
  }
  if (header.dictID != 0) fail(Errc::malformed, what + ": the zstd frame needs a dictionary; kiln archives use none");
  // A single-segment frame's window is its whole content: a 1 GiB member in one segment needs
  // a 1 GiB window, which is what the limit exists to refuse (FORMAT.md §4).
  if (header.windowSize > (1ull << kMaxWindowLog)) {
    fail(Errc::limit, what + ": the zstd frame needs a " + std::to_string(header.windowSize) +
                          "-byte window, over the format's limit of 2^" + std::to_string(kMaxWindowLog));
  }
}

}  // namespace

void check_zstd_frame(ByteView stored, std::uint64_t content_size, const std::string& what) {
  std::size_t frame = ZSTD_findFrameCompressedSize(stored.data, stored.size);
  if (ZSTD_isError(frame)) fail(Errc::malformed, what + ": not a valid zstd frame");
  if (frame != stored.size) fail(Errc::malformed, what + ": bytes follow the zstd frame; exactly one frame is allowed");
  ZSTD_frameHeader header{};
  if (ZSTD_getFrameHeader(&header, stored.data, stored.size) != 0) fail(Errc::malformed, what + ": not a zstd data frame");
  check_frame_header(header, content_size, what);
}

bool check_zstd_frame_held(ByteView first, const ZstdLayout& layout, std::uint64_t stored_size, std::uint64_t content_size,
                           const std::string& what) {
  // Only a frame that check_zstd_frame would find exactly this way is judged here: the walk saw
  // the header zstd sees and ended where the bytes end. Anything else is judged from a whole copy.
  if (!layout.followed || layout.end != stored_size) return false;
  ZSTD_frameHeader header{};
  if (ZSTD_getFrameHeader(&header, first.data, first.size) != 0) return false;
  if (header.headerSize != layout.header_size || (header.checksumFlag != 0) != layout.checksum) return false;
  check_frame_header(header, content_size, what);
  return true;
}

std::vector<std::uint8_t> zstd_decompress_prefix(ByteView stored, std::uint64_t content_size, std::size_t limit,
                                                 const std::string& what) {
  // Fed in small pieces, so that decoding stops about where the prefix is complete: zstd decodes a
  // block only once all of it has come, so a piece much larger than the prefix could bring in a
  // whole 128 KiB block beyond it.
  const std::size_t kPiece = limit <= 8192 ? 1024 : 16 * 1024;
  std::vector<std::uint8_t> prefix;
  prefix.reserve(limit);
  ZstdStreamDecoder decoder(content_size, what);
  for (std::size_t at = 0; at < stored.size && prefix.size() < limit; at += kPiece) {
    decoder.feed(ByteView(stored.data + at, std::min(kPiece, stored.size - at)), [&](ByteView out) {
      std::size_t take = std::min(out.size, limit - prefix.size());
      prefix.insert(prefix.end(), out.data, out.data + take);
    });
  }
  return prefix;
}

namespace {

ZSTD_DCtx* thread_dctx() {
  // One context per thread, its session reset before each frame (a frame abandoned by an
  // exception leaves one half-read): creating one costs more than decompressing a small member
  // does. Its one parameter is set once; nothing here changes it.
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxDeleter> dctx;
  if (!dctx) {
    dctx.reset(ZSTD_createDCtx());
    if (!dctx || ZSTD_isError(ZSTD_DCtx_setParameter(dctx.get(), ZSTD_d_windowLogMax, kMaxWindowLog))) {
      dctx.reset();
      fail(Errc::internal, "zstd: cannot allocate a decompression context");
    }
  }
  ZSTD_DCtx_reset(dctx.get(), ZSTD_reset_session_only);
  return dctx.get();
}

// The output block a decoder hands its sink, one per thread like the context: a fresh, zeroed
// 128 KiB per member costs more than decoding a PTX member's first block does.
std::vector<std::uint8_t>& thread_output() {
  thread_local std::vector<std::uint8_t> out(ZSTD_DStreamOutSize());
  return out;
}

}  // namespace

std::vector<std::uint8_t> zstd_decompress_exact(ByteView stored, std::uint64_t content_size, const std::string& what) {
  std::vector<std::uint8_t> out;
  zstd_decompress_exact_into(stored, content_size, what, out);
  out.resize(static_cast<std::size_t>(content_size));
  return out;
}

ByteView zstd_decompress_exact_into(ByteView stored, std::uint64_t content_size, const std::string& what,
                                    std::vector<std::uint8_t>& out) {
  check_zstd_frame(stored, content_size, what);
  ZSTD_DCtx* dctx = thread_dctx();
  // zstd is given exactly the declared size, which the caller has already bounded; it cannot
  // write past it whatever the frame says, so a lying frame ends in an error, not a bomb.
  if (out.size() < content_size) out.resize(static_cast<std::size_t>(content_size));
  std::size_t n = ZSTD_decompressDCtx(dctx, out.data(), static_cast<std::size_t>(content_size), stored.data, stored.size);
  if (ZSTD_isError(n)) fail(Errc::malformed, what + ": zstd refused the frame: " + ZSTD_getErrorName(n));
  if (n != content_size) {
    fail(Errc::malformed, what + ": the zstd frame produced " + std::to_string(n) + " bytes, not " +
                              std::to_string(content_size));
  }
  return ByteView(out.data(), static_cast<std::size_t>(content_size));
}

ZstdStreamDecoder::ZstdStreamDecoder(std::uint64_t content_size, std::string what)
    : content_size_(content_size), what_(std::move(what)), dctx_(thread_dctx()), out_(thread_output()) {}

void ZstdStreamDecoder::feed(ByteView in, const std::function<void(ByteView)>& sink) {
  ZSTD_inBuffer input{in.data, in.size, 0};
  while (input.pos < input.size) {
    if (finished_) fail(Errc::malformed, what_ + ": bytes follow the zstd frame; exactly one frame is allowed");
    ZSTD_outBuffer output{out_.data(), out_.size(), 0};
    std::size_t r = ZSTD_decompressStream(static_cast<ZSTD_DCtx*>(dctx_), &output, &input);
    if (ZSTD_isError(r)) fail(Errc::malformed, what_ + ": zstd refused the frame: " + ZSTD_getErrorName(r));
    produced_ += output.pos;
    if (produced_ > content_size_) {
      fail(Errc::malformed, what_ + ": the zstd frame produces more than the " + std::to_string(content_size_) +
                                " bytes the index declares");
    }
    if (output.pos > 0) sink(ByteView(out_.data(), output.pos));
    if (r == 0) finished_ = true;
  }
}

void ZstdStreamDecoder::finish() {
  if (!finished_) fail(Errc::malformed, what_ + ": the zstd frame ends early");
  if (produced_ != content_size_) {
    fail(Errc::malformed, what_ + ": the zstd frame produced " + std::to_string(produced_) + " bytes, not " +
                              std::to_string(content_size_));
  }
}

}  // namespace kiln
