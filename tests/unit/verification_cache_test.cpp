// The process-wide memo of successful Ed25519 verifications (verification_cache.hpp): a hit only
// for the exact inputs that verified, and never a way around a changed archive.
#include <gtest/gtest.h>

#include <cstring>

#include "core/error.hpp"
#include "core/verification_cache.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

std::vector<std::uint8_t> message(const char* text) { return std::vector<std::uint8_t>(text, text + std::strlen(text)); }

TEST(VerificationCache, RemembersOnlyTheExactInputsThatVerified) {
  clear_verification_cache();
  PrivateKey signer = PrivateKey::generate(), other = PrivateKey::generate();
  std::vector<std::uint8_t> m = message("archive digest and attributes");
  Ed25519Signature sig = signer.sign(m.data(), m.size());
  const PublicKey pub = signer.public_key();

  EXPECT_FALSE(verified_before(verification_key(pub.raw(), sig, m.data(), m.size())));
  ASSERT_TRUE(pub.verify(m.data(), m.size(), sig));
  EXPECT_TRUE(verified_before(verification_key(pub.raw(), sig, m.data(), m.size())));
  EXPECT_TRUE(pub.verify(m.data(), m.size(), sig));  // answered from the memo, same answer

  // Any other input is a miss, verified for real, and a failure is not remembered.
  Ed25519Signature flipped = sig;
  flipped[10] ^= 0x40;
  EXPECT_FALSE(pub.verify(m.data(), m.size(), flipped));
  EXPECT_FALSE(verified_before(verification_key(pub.raw(), flipped, m.data(), m.size())));
  std::vector<std::uint8_t> m2 = m;
  m2.back() ^= 1;
  EXPECT_FALSE(pub.verify(m2.data(), m2.size(), sig));
  EXPECT_FALSE(other.public_key().verify(m.data(), m.size(), sig));
  EXPECT_FALSE(verified_before(verification_key(other.public_key().raw(), sig, m.data(), m.size())));

  clear_verification_cache();
  EXPECT_FALSE(verified_before(verification_key(pub.raw(), sig, m.data(), m.size())));
}

TEST(VerificationCache, KeyEncodingKeepsFieldsApart) {
  // The same bytes split differently between signature and message must not collide.
  Ed25519PublicRaw key{};
  Ed25519Signature a{}, b{};
  b[63] = 1;
  std::vector<std::uint8_t> m1 = {1, 2}, m2 = {2};
  std::vector<std::uint8_t> with_one = {1};
  EXPECT_NE(verification_key(key, a, m1.data(), m1.size()).bytes, verification_key(key, b, m2.data(), m2.size()).bytes);
  EXPECT_NE(verification_key(key, a, m1.data(), 1).bytes, verification_key(key, a, m1.data(), 2).bytes);
}

TEST(VerificationCache, HoldsAtMostItsCapacityOldestGoingFirst) {
  clear_verification_cache();
  Ed25519PublicRaw key{};
  Ed25519Signature sig{};
  auto nth = [&](std::size_t i) { return verification_key(key, sig, reinterpret_cast<const std::uint8_t*>(&i), sizeof i); };
  for (std::size_t i = 0; i <= kVerificationCacheCapacity; ++i) remember_verified(nth(i));
  EXPECT_FALSE(verified_before(nth(0)));
  EXPECT_TRUE(verified_before(nth(1)));
  EXPECT_TRUE(verified_before(nth(kVerificationCacheCapacity)));
  // Round the ring once more: each new key evicts the oldest left, nothing else.
  for (std::size_t i = kVerificationCacheCapacity + 1; i <= 2 * kVerificationCacheCapacity + 1; ++i) {
    remember_verified(nth(i));
  }
  EXPECT_FALSE(verified_before(nth(kVerificationCacheCapacity)));
  EXPECT_FALSE(verified_before(nth(kVerificationCacheCapacity + 1)));
  EXPECT_TRUE(verified_before(nth(kVerificationCacheCapacity + 2)));
  EXPECT_TRUE(verified_before(nth(2 * kVerificationCacheCapacity + 1)));
  remember_verified(nth(2 * kVerificationCacheCapacity + 1));  // known: changes nothing
  EXPECT_TRUE(verified_before(nth(kVerificationCacheCapacity + 2)));
  clear_verification_cache();
}

// An archive opened (and so verified) once, then changed: the second open must refuse it as a
// first open would. The memo can only ever skip work that would have succeeded.
TEST(VerificationCache, ASecondOpenOfAChangedArchiveIsStillRefused) {
  clear_verification_cache();
  PrivateKey k = PrivateKey::generate();
  TrustSet trust = test::trust_of({&k});
  std::vector<std::uint8_t> bytes = test::build_signed({&k});
  ASSERT_NO_THROW(test::open_and_verify(bytes, trust, 1));
  ASSERT_NO_THROW(test::open_and_verify(bytes, trust, 1));  // the memo answers, same verdict

  std::vector<std::uint8_t> bad_signature = bytes;
  bad_signature[bad_signature.size() - 1] ^= 0x01;  // last byte of the Ed25519 signature
  try {
    test::open_and_verify(bad_signature, trust, 1);
    ADD_FAILURE() << "a changed signature was accepted after the archive had verified once";
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), Errc::signature) << e.what();
  }
  // A byte of the index head changed (its digest no longer matches the signed one).
  std::unique_ptr<ArchiveReader> a = ArchiveReader::open_memory(bytes.data(), bytes.size(), ReadOptions{});
  std::vector<std::uint8_t> changed_head = bytes;
  changed_head[a->header().index_offset + 12] ^= 0x01;  // inside entry_count / sequence
  EXPECT_THROW(test::open_and_verify(changed_head, trust, 1), Failure);
  // And another trust set never benefits from what this one verified.
  PrivateKey stranger = PrivateKey::generate();
  EXPECT_THROW(test::open_and_verify(bytes, test::trust_of({&stranger}), 1), Failure);
  clear_verification_cache();
}

}  // namespace
}  // namespace kiln
