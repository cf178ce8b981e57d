#include "core/verification_cache.hpp"

#include <cstring>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "core/sha256.hpp"

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
  // The keys in the order they came, as a ring: once full, `next` is the oldest, evicted first.
  // Grown one key at a time (a deque took a 512-byte block at the process's first open).
  std::vector<std::array<std::uint8_t, 32>> order;
  std::size_t next = 0;
};

// Never destroyed: archives may be opened from other static destructors' threads at exit.
Memo& memo() {
  static Memo* m = new Memo;
  return *m;
}

}  // namespace

VerificationKey verification_key(const Ed25519PublicRaw& key, const Ed25519Signature& signature,
                                 const std::uint8_t* message, std::size_t size) {
  // Fixed-size fields first, so that no two input triples share an encoding. Through sha256(),
  // whose SHA-256 is fetched once per process: EVP_sha256() here made OpenSSL look the
  // implementation up again at every open, memo hit or not.
  VerificationKey out{};
  out.bytes = sha256({{key.data(), key.size()}, {signature.data(), signature.size()}, {message, size}});
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
  if (m.order.size() < kVerificationCacheCapacity) {
    m.order.push_back(key.bytes);
    return;
  }
  m.known.erase(m.order[m.next]);
  m.order[m.next] = key.bytes;
  m.next = (m.next + 1) % m.order.size();
}

void clear_verification_cache() {
  Memo& m = memo();
  std::lock_guard<std::mutex> lock(m.mutex);
  m.known.clear();
  m.order.clear();
  m.next = 0;
}

}  // namespace kiln
