#include "core/sha256.hpp"

#include <openssl/evp.h>

#include <memory>

#include "core/bytes.hpp"
#include "core/error.hpp"
#include "core/openssl_handles.hpp"

namespace kiln {
namespace {

// Fetching the implementation once avoids a provider lookup per call; EVP_MD objects
// are immutable and safe to share between threads.
const EVP_MD* sha256_md() {
  static EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  if (md == nullptr) fail(Errc::internal, "OpenSSL has no SHA-256 implementation");
  return md;
}

}  // namespace

Sha256 sha256(std::initializer_list<Sha256Piece> pieces) {
  // One context per thread, re-initialised for each digest: EVP_Digest allocates and frees a
  // context per call, which costs as much as hashing a small index page or kernel record.
  thread_local MdCtxPtr ctx(EVP_MD_CTX_new());
  Sha256 out{};
  unsigned int len = 0;
  bool ok = ctx && EVP_DigestInit_ex(ctx.get(), sha256_md(), nullptr) == 1;
  for (const Sha256Piece& p : pieces) ok = ok && EVP_DigestUpdate(ctx.get(), p.data, p.size) == 1;
  if (!ok || EVP_DigestFinal_ex(ctx.get(), out.data(), &len) != 1 || len != out.size()) {
    fail(Errc::internal, "OpenSSL SHA-256 failed");
  }
  return out;
}

Sha256 sha256(const void* data, std::size_t size) { return sha256({Sha256Piece{data, size}}); }

std::string sha256_hex(const Sha256& digest) { return to_hex(digest.data(), digest.size()); }

std::string digest_string(const Sha256& digest) { return "sha256:" + sha256_hex(digest); }

bool parse_digest_string(const std::string& text, Sha256* out) {
  static const std::string prefix = "sha256:";
  if (text.size() != prefix.size() + 64 || text.compare(0, prefix.size(), prefix) != 0) return false;
  for (std::size_t i = 0; i < 32; ++i) {
    int v = 0;
    for (int half = 0; half < 2; ++half) {
      char c = text[prefix.size() + 2 * i + half];
      int d;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else return false;  // uppercase refused: one spelling per digest
      v = v * 16 + d;
    }
    (*out)[i] = static_cast<std::uint8_t>(v);
  }
  return true;
}

bool is_digest_string(const std::string& text) {
  Sha256 parsed{};
  return parse_digest_string(text, &parsed);
}

struct Sha256Stream::Impl {
  EVP_MD_CTX* ctx = nullptr;
};

Sha256Stream::Sha256Stream() : impl_(new Impl) {
  impl_->ctx = EVP_MD_CTX_new();
  if (impl_->ctx == nullptr || EVP_DigestInit_ex(impl_->ctx, sha256_md(), nullptr) != 1) {
    EVP_MD_CTX_free(impl_->ctx);
    impl_->ctx = nullptr;
    fail(Errc::internal, "OpenSSL SHA-256 init failed");
  }
}

Sha256Stream::~Sha256Stream() { EVP_MD_CTX_free(impl_->ctx); }

void Sha256Stream::update(const void* data, std::size_t size) {
  if (EVP_DigestUpdate(impl_->ctx, data, size) != 1) fail(Errc::internal, "OpenSSL SHA-256 update failed");
}

Sha256 Sha256Stream::finish() {
  Sha256 out{};
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(impl_->ctx, out.data(), &len) != 1) fail(Errc::internal, "OpenSSL SHA-256 final failed");
  return out;
}

}  // namespace kiln
