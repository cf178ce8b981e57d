// The signature half of the cold-start baseline (kiln_runtime_bench, kiln_cold_anatomy): what a
// competent engineer shipping signed cubins writes. One Ed25519 key is made beforehand and the
// cubin's SHA-256 signed with it; the public half is loaded from its raw bytes, as a server
// holding its trusted key does. Each cold start then hashes the bytes it read and verifies one
// signature over the digest (EVP_Digest, EVP_DigestVerify), as kiln does over its index head.
#pragma once

#include <openssl/evp.h>

#include <cstddef>
#include <stdexcept>
#include <vector>

namespace kiln_bench {

class SignedBaseline {
 public:
  // Signs `cubin`; throws std::runtime_error where OpenSSL cannot.
  explicit SignedBaseline(const std::vector<char>& cubin) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned digest_size = 0;
    unsigned char raw_public[32];
    std::size_t raw_public_size = sizeof raw_public;
    EVP_PKEY* key = nullptr;
    EVP_PKEY_CTX* keygen = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr);
    EVP_MD_CTX* sign = EVP_MD_CTX_new();
    bool ok = keygen != nullptr && EVP_PKEY_keygen_init(keygen) == 1 && EVP_PKEY_keygen(keygen, &key) == 1 &&
              EVP_PKEY_get_raw_public_key(key, raw_public, &raw_public_size) == 1 &&
              EVP_Digest(cubin.data(), cubin.size(), digest, &digest_size, EVP_sha256(), nullptr) == 1 &&
              sign != nullptr && EVP_DigestSignInit(sign, nullptr, nullptr, nullptr, key) == 1 &&
              EVP_DigestSign(sign, signature_, &signature_size_, digest, digest_size) == 1;
    if (ok) trusted_ = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, raw_public, raw_public_size);
    EVP_MD_CTX_free(sign);
    EVP_PKEY_free(key);
    EVP_PKEY_CTX_free(keygen);
    if (trusted_ == nullptr) throw std::runtime_error("OpenSSL: cannot make the baseline's Ed25519 key and signature");
  }
  ~SignedBaseline() { EVP_PKEY_free(trusted_); }
  SignedBaseline(const SignedBaseline&) = delete;
  SignedBaseline& operator=(const SignedBaseline&) = delete;

  // The per-cold-start work: SHA-256 of the bytes read, one Ed25519 verification over it.
  bool verify(const std::vector<char>& cubin) const {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned digest_size = 0;
    if (EVP_Digest(cubin.data(), cubin.size(), digest, &digest_size, EVP_sha256(), nullptr) != 1) return false;
    EVP_MD_CTX* context = EVP_MD_CTX_new();
    bool ok = context != nullptr && EVP_DigestVerifyInit(context, nullptr, nullptr, nullptr, trusted_) == 1 &&
              EVP_DigestVerify(context, signature_, signature_size_, digest, digest_size) == 1;
    EVP_MD_CTX_free(context);
    return ok;
  }

 private:
  EVP_PKEY* trusted_ = nullptr;
  unsigned char signature_[64] = {};
  std::size_t signature_size_ = sizeof signature_;
};

}  // namespace kiln_bench
