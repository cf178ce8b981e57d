// SHA-256 through OpenSSL's EVP interface (SHA-NI where the CPU has it).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

namespace kiln {

using Sha256 = std::array<std::uint8_t, 32>;

Sha256 sha256(const void* data, std::size_t size);
// The digest of several byte ranges one after another, as if they were one buffer.
struct Sha256Piece {
  const void* data;
  std::size_t size;
};
Sha256 sha256(std::initializer_list<Sha256Piece> pieces);
std::string sha256_hex(const Sha256& digest);
std::string digest_string(const Sha256& digest);  // "sha256:<64 lowercase hex>"
// Parses "sha256:<64 lowercase hex>" exactly; returns false on anything else.
bool parse_digest_string(const std::string& text, Sha256* out);
bool is_digest_string(const std::string& text);  // parse_digest_string would accept it

// Incremental hashing, for members hashed while they are written.
class Sha256Stream {
 public:
  Sha256Stream();
  ~Sha256Stream();
  Sha256Stream(const Sha256Stream&) = delete;
  Sha256Stream& operator=(const Sha256Stream&) = delete;
  void update(const void* data, std::size_t size);
  Sha256 finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
