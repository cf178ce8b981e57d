#include "compress.hpp"

#include <zstd.h>

#include <memory>
#include <string>

#include "error.hpp"

namespace kiln {
namespace {

struct CCtxDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxDeleter {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

// 2^27 = 128 MiB is zstd's own default limit; stating it keeps the bound ours.
constexpr int kMaxWindowLog = 27;

}  // namespace

std::vector<std::uint8_t> zstd_compress(ByteView content, int level) {
  std::unique_ptr<ZSTD_CCtx, CCtxDeleter> cctx(ZSTD_createCCtx());
  if (!cctx) fail(Errc::internal, "zstd: cannot allocate a compression context");
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 0);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_contentSizeFlag, 1);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_windowLog, 0);
  std::vector<std::uint8_t> out(ZSTD_compressBound(content.size));
  std::size_t n = ZSTD_compress2(cctx.get(), out.data(), out.size(), content.data, content.size);
  if (ZSTD_isError(n)) fail(Errc::internal, std::string("zstd: compression failed: ") + ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

std::vector<std::uint8_t> zstd_decompress_exact(ByteView stored, std::uint64_t content_size, const std::string& what) {
  std::size_t frame = ZSTD_findFrameCompressedSize(stored.data, stored.size);
  if (ZSTD_isError(frame)) fail(Errc::malformed, what + ": not a valid zstd frame");
  if (frame != stored.size) fail(Errc::malformed, what + ": bytes follow the zstd frame; exactly one frame is allowed");
  unsigned long long declared = ZSTD_getFrameContentSize(stored.data, stored.size);
  if (declared == ZSTD_CONTENTSIZE_ERROR || declared == ZSTD_CONTENTSIZE_UNKNOWN) {
    fail(Errc::malformed, what + ": the zstd frame does not declare its content size");
  }
  if (declared != content_size) {
    fail(Errc::malformed, what + ": the zstd frame declares " + std::to_string(declared) +
                              " bytes but the index says " + std::to_string(content_size));
  }
  if (ZSTD_getDictID_fromFrame(stored.data, stored.size) != 0) {
    fail(Errc::malformed, what + ": the zstd frame needs a dictionary; kiln archives use none");
  }
  // One context per thread, reset before each frame: creating one costs more than
  // decompressing a small member (a kernel record, the kernel table) does.
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxDeleter> dctx;
  if (!dctx) {
    dctx.reset(ZSTD_createDCtx());
    if (!dctx) fail(Errc::internal, "zstd: cannot allocate a decompression context");
  }
  ZSTD_DCtx_reset(dctx.get(), ZSTD_reset_session_and_parameters);
  ZSTD_DCtx_setParameter(dctx.get(), ZSTD_d_windowLogMax, kMaxWindowLog);
  // The buffer is the declared size, which the caller has already bounded; zstd cannot
  // write past it whatever the frame says, so a lying frame ends in an error, not a bomb.
  std::vector<std::uint8_t> out(static_cast<std::size_t>(content_size));
  std::size_t n = ZSTD_decompressDCtx(dctx.get(), out.data(), out.size(), stored.data, stored.size);
  if (ZSTD_isError(n)) fail(Errc::malformed, what + ": zstd refused the frame: " + ZSTD_getErrorName(n));
  if (n != content_size) {
    fail(Errc::malformed, what + ": the zstd frame produced " + std::to_string(n) + " bytes, not " +
                              std::to_string(content_size));
  }
  return out;
}

}  // namespace kiln
