#include "core/verification_cache.hpp"

#include <algorithm>
#include <array>
#include <mutex>
#include <vector>

#include "core/sha256.hpp"

namespace kiln {
namespace {

using Key = std::array<std::uint8_t, 32>;

struct Memo {
  std::mutex mutex;
  // The keys sorted (looked up by binary search), and the same keys in the order they came, as
  // a ring: once full, `next` is the oldest, evicted first. Two arrays of 32-byte keys hold a
  // process's first verification in two small blocks where a hash set took four (its buckets,
  // a node, a rehash). At the capacity an insertion moves up to 256 KiB in all (an erase and an
  // insert in `sorted`), once per signature not seen before, whose Ed25519 check costs more.
  std::vector<Key> sorted;
  std::vector<Key> order;
  std::size_t next = 0;

  bool contains(const Key& k) const { return std::binary_search(sorted.begin(), sorted.end(), k); }
  void insert_sorted(const Key& k) { sorted.insert(std::lower_bound(sorted.begin(), sorted.end(), k), k); }
  void erase_sorted(const Key& k) {
    auto at = std::lower_bound(sorted.begin(), sorted.end(), k);
    if (at != sorted.end() && *at == k) sorted.erase(at);
  }
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
  return m.contains(key.bytes);
}

void remember_verified(const VerificationKey& key) {
  Memo& m = memo();
  std::lock_guard<std::mutex> lock(m.mutex);
  if (m.contains(key.bytes)) return;
  if (m.order.size() < kVerificationCacheCapacity) {
    m.insert_sorted(key.bytes);
    m.order.push_back(key.bytes);
    return;
  }
  m.erase_sorted(m.order[m.next]);
  m.insert_sorted(key.bytes);
  m.order[m.next] = key.bytes;
  m.next = (m.next + 1) % m.order.size();
}

void clear_verification_cache() {
  Memo& m = memo();
  std::lock_guard<std::mutex> lock(m.mutex);
  m.sorted.clear();
  m.order.clear();
  m.next = 0;
}

}  // namespace kiln
