#include "core/verification_cache.hpp"

#include <cstring>
#include <deque>
#include <mutex>
#include <unordered_set>

#include <openssl/evp.h>

#include "core/error.hpp"

namespace kiln {
namespace {

struct KeyHash {
  std::size_t operator()(const std::array<std::uint8_t, 32>& k) const {
    std::size_t h;
    std::memcpy(&h, k.data(), sizeof h);  // already a SHA-256: any 8 bytes spread evenly
    return h;
  }
};

struct Memo {
  std::mutex mutex;
  std::unordered_set<std::array<std::uint8_t, 32>, KeyHash> known;
  std::deque<std::array<std::uint8_t, 32>> order;  // oldest first, for eviction
};

// Never destroyed: archives may be opened from other static destructors' threads at exit.
Memo& memo() {
  static Memo* m = new Memo;
  return *m;
}

}  // namespace

VerificationKey verification_key(const Ed25519PublicRaw& key, const Ed25519Signature& signature,
                                 const std::uint8_t* message, std::size_t size) {
  // Fixed-size fields first, so that no two input triples share an encoding.
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  VerificationKey out{};
  unsigned int len = 0;
  bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 &&
            EVP_DigestUpdate(ctx, key.data(), key.size()) == 1 &&
            EVP_DigestUpdate(ctx, signature.data(), signature.size()) == 1 &&
            EVP_DigestUpdate(ctx, message, size) == 1 && EVP_DigestFinal_ex(ctx, out.bytes.data(), &len) == 1 &&
            len == out.bytes.size();
  EVP_MD_CTX_free(ctx);
  if (!ok) fail(Errc::internal, "OpenSSL SHA-256 failed");
  return out;
}

bool verified_before(const VerificationKey& key) {
  Memo& m = memo();
  std::lock_guard<std::mutex> lock(m.mutex);
  return m.known.count(key.bytes) != 0;
}

void remember_verified(const VerificationKey& key) {
  Memo& m = memo();
  std::lock_guard<std::mutex> lock(m.mutex);
  if (!m.known.insert(key.bytes).second) return;
  m.order.push_back(key.bytes);
  if (m.order.size() > kVerificationCacheCapacity) {
    m.known.erase(m.order.front());
    m.order.pop_front();
  }
}

void clear_verification_cache() {
  Memo& m = memo();
  std::lock_guard<std::mutex> lock(m.mutex);
  m.known.clear();
  m.order.clear();
}

}  // namespace kiln
