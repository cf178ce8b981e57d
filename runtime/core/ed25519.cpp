#include "core/ed25519.hpp"

#include <cstring>
#include <mutex>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/openssl_handles.hpp"
#include "core/sha256.hpp"
#include "core/verification_cache.hpp"

namespace kiln {
namespace {

std::string bio_to_string(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(n));
}

Ed25519PublicRaw raw_public(EVP_PKEY* key, const std::string& origin) {
  Ed25519PublicRaw raw{};
  std::size_t len = raw.size();
  if (EVP_PKEY_get_raw_public_key(key, raw.data(), &len) != 1 || len != raw.size()) {
    fail(Errc::invalid_argument, origin + ": could not read the Ed25519 public key");
  }
  return raw;
}

}  // namespace

// Starting a verification (EVP_DigestVerifyInit) looks the Ed25519 implementation up by name
// and makes its context: ~2.8 us, as much as hashing 10 KiB, on every archive's open. Copying
// a context started once (EVP_MD_CTX_copy_ex duplicates the provider's context and takes a
// reference to the key) costs ~0.25 us and verifies the same way. The mutex keeps copies of
// the one template from different threads apart: OpenSSL does not promise that duplicating a
// context is safe while another thread duplicates it.
struct PublicKey::VerifyTemplate {
  std::mutex mutex;
  MdCtxPtr ctx;
};

PublicKey PublicKey::from_raw(const Ed25519PublicRaw& raw) {
  PublicKey k;
  k.raw_ = raw;
  Sha256 h = sha256(raw.data(), raw.size());
  k.key_id_ = to_hex(h.data(), 16);
  EVP_PKEY* key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, raw.data(), raw.size());
  if (key == nullptr) fail(Errc::internal, "OpenSSL could not make an Ed25519 key object");
  k.pkey_.reset(key, [](EVP_PKEY* p) { EVP_PKEY_free(p); });
  // Started here, where keys are loaded (once, at a runtime's creation), and kept: OpenSSL
  // fetches the Ed25519 implementation (once per process) and hands the key to it (once per
  // key), and each archive's open copies the context instead of starting one.
  auto verify_template = std::make_shared<VerifyTemplate>();
  verify_template->ctx.reset(EVP_MD_CTX_new());
  if (!verify_template->ctx || EVP_DigestVerifyInit(verify_template->ctx.get(), nullptr, nullptr, nullptr, key) != 1) {
    fail(Errc::internal, "OpenSSL could not set up Ed25519 verification");
  }
  // One copy made and dropped here as well: what OpenSSL sets up on a first copy (and the
  // blocks a copy takes, freed for the next) is paid at load, not by the first archive's open.
  MdCtxPtr first(EVP_MD_CTX_new());
  if (first) (void)EVP_MD_CTX_copy_ex(first.get(), verify_template->ctx.get());
  k.verify_template_ = std::move(verify_template);
  return k;
}

namespace {

// An Ed25519 SubjectPublicKeyInfo is always these 12 DER bytes and then the 32-byte key
// (RFC 8410). Reading it directly skips OpenSSL's generic decoder, which took ~0.2 ms per
// key; anything else goes through OpenSSL for a precise error.
bool raw_from_spki_pem(const std::string& pem, Ed25519PublicRaw* out) {
  static const char kBegin[] = "-----BEGIN PUBLIC KEY-----";
  static const char kEnd[] = "-----END PUBLIC KEY-----";
  static const unsigned char kPrefix[12] = {0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00};
  std::size_t begin = pem.find(kBegin), end = pem.find(kEnd);
  if (begin == std::string::npos || end == std::string::npos || end < begin) return false;
  std::string body;
  for (std::size_t i = begin + sizeof kBegin - 1; i < end; ++i) {
    char c = pem[i];
    if (c != '\n' && c != '\r' && c != ' ' && c != '\t') body += c;
  }
  if (body.size() != 60) return false;  // base64 of 44 DER bytes
  unsigned char der[48];
  if (EVP_DecodeBlock(der, reinterpret_cast<const unsigned char*>(body.data()), static_cast<int>(body.size())) != 45) {
    return false;  // 60 base64 chars decode to 45 bytes including one padding byte
  }
  if (std::memcmp(der, kPrefix, sizeof kPrefix) != 0) return false;
  std::memcpy(out->data(), der + sizeof kPrefix, 32);
  return true;
}

}  // namespace

PublicKey PublicKey::from_pem(const std::string& pem, const std::string& origin) {
  Ed25519PublicRaw raw{};
  if (raw_from_spki_pem(pem, &raw)) return from_raw(raw);
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) fail(Errc::internal, "OpenSSL could not allocate a buffer");
  PkeyPtr key(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
  if (!key) {
    fail(Errc::invalid_argument,
         origin + ": not a PEM public key (expected '-----BEGIN PUBLIC KEY-----', as `kiln keygen` writes)");
  }
  if (EVP_PKEY_get_base_id(key.get()) != EVP_PKEY_ED25519) {
    fail(Errc::invalid_argument, origin + ": the public key is not an Ed25519 key");
  }
  return from_raw(raw_public(key.get(), origin));
}

std::string PublicKey::to_pem() const {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PUBKEY(bio.get(), pkey_.get()) != 1) {
    fail(Errc::internal, "OpenSSL could not encode a public key");
  }
  return bio_to_string(bio.get());
}

bool PublicKey::verify(const std::uint8_t* message, std::size_t size, const Ed25519Signature& signature) const {
  // These exact inputs verified before in this process: verifying again would say the same
  // (verification_cache.hpp says why that is safe).
  VerificationKey memo_key = verification_key(raw_, signature, message, size);
  if (verified_before(memo_key)) return true;
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx) fail(Errc::internal, "OpenSSL could not allocate a verification context");
  bool copied = false;
  if (verify_template_) {
    std::lock_guard<std::mutex> lock(verify_template_->mutex);
    copied = EVP_MD_CTX_copy_ex(ctx.get(), verify_template_->ctx.get()) == 1;
  }
  // A provider that cannot duplicate its context: started afresh, as the template was.
  if (!copied && (EVP_MD_CTX_reset(ctx.get()) != 1 || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, pkey_.get()) != 1)) {
    fail(Errc::internal, "OpenSSL could not start an Ed25519 verification");
  }
  if (EVP_DigestVerify(ctx.get(), signature.data(), signature.size(), message, size) != 1) return false;
  remember_verified(memo_key);
  return true;
}

struct PrivateKey::Impl {
  PkeyPtr key;
};

PrivateKey::PrivateKey(PrivateKey&&) noexcept = default;
PrivateKey& PrivateKey::operator=(PrivateKey&&) noexcept = default;
PrivateKey::~PrivateKey() = default;

PrivateKey PrivateKey::generate() {
  PrivateKey k;
  k.impl_.reset(new Impl);
  k.impl_->key.reset(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
  if (!k.impl_->key) fail(Errc::internal, "OpenSSL could not generate an Ed25519 key");
  return k;
}

PrivateKey PrivateKey::from_pem(const std::string& pem, const std::string& origin) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) fail(Errc::internal, "OpenSSL could not allocate a buffer");
  PrivateKey k;
  k.impl_.reset(new Impl);
  // A NULL password callback with an empty user string refuses encrypted keys rather
  // than prompting on the terminal: a library must never read stdin.
  k.impl_->key.reset(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, const_cast<char*>("")));
  if (!k.impl_->key) {
    fail(Errc::invalid_argument,
         origin + ": not an unencrypted PEM private key (expected '-----BEGIN PRIVATE KEY-----', as `kiln keygen` writes)");
  }
  if (EVP_PKEY_get_base_id(k.impl_->key.get()) != EVP_PKEY_ED25519) {
    fail(Errc::invalid_argument, origin + ": the private key is not an Ed25519 key");
  }
  return k;
}

PrivateKey PrivateKey::load_file(const std::string& path) {
  return from_pem(read_small_file(path, 64 * 1024), path);
}

std::string PrivateKey::to_pem() const {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), impl_->key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    fail(Errc::internal, "OpenSSL could not encode a private key");
  }
  return bio_to_string(bio.get());
}

PublicKey PrivateKey::public_key() const { return PublicKey::from_raw(raw_public(impl_->key.get(), "private key")); }

Ed25519Signature PrivateKey::sign(const std::uint8_t* message, std::size_t size) const {
  MdCtxPtr ctx(EVP_MD_CTX_new());
  Ed25519Signature sig{};
  std::size_t len = sig.size();
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, impl_->key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), sig.data(), &len, message, size) != 1 || len != sig.size()) {
    fail(Errc::internal, "OpenSSL could not make an Ed25519 signature");
  }
  return sig;
}

}  // namespace kiln
