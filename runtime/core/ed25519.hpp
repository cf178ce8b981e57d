// Ed25519 keys and signatures through OpenSSL 3 (one-shot EVP_DigestSign/Verify, NULL digest).
// Keys travel as PEM: PKCS#8 for private keys, SubjectPublicKeyInfo for public keys.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct evp_pkey_st;  // OpenSSL's EVP_PKEY

namespace kiln {

using Ed25519Signature = std::array<std::uint8_t, 64>;
using Ed25519PublicRaw = std::array<std::uint8_t, 32>;

class PublicKey {
 public:
  static PublicKey from_pem(const std::string& pem, const std::string& origin);
  static PublicKey from_raw(const Ed25519PublicRaw& raw);
  const Ed25519PublicRaw& raw() const { return raw_; }
  // First 16 bytes of SHA-256 over the raw 32-byte key, as 32 lowercase hex characters.
  const std::string& key_id() const { return key_id_; }
  std::string to_pem() const;
  bool verify(const std::uint8_t* message, std::size_t size, const Ed25519Signature& signature) const;

 private:
  Ed25519PublicRaw raw_{};
  std::string key_id_;
  // OpenSSL's key object, made once per key: rebuilding it for every verification cost
  // more than the verification itself in the cold-start benchmark.
  std::shared_ptr<::evp_pkey_st> pkey_;
  // A verification context started once with this key, which each verification copies
  // (ed25519.cpp says why).
  struct VerifyTemplate;
  std::shared_ptr<VerifyTemplate> verify_template_;
};

class PrivateKey {
 public:
  PrivateKey(PrivateKey&&) noexcept;
  PrivateKey& operator=(PrivateKey&&) noexcept;
  ~PrivateKey();
  static PrivateKey generate();
  static PrivateKey from_pem(const std::string& pem, const std::string& origin);
  static PrivateKey load_file(const std::string& path);
  std::string to_pem() const;
  PublicKey public_key() const;
  Ed25519Signature sign(const std::uint8_t* message, std::size_t size) const;

 private:
  PrivateKey() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
