// Trust: which signatures count, and what is refused.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/verification_cache.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

std::string refusal(const std::vector<std::uint8_t>& bytes, const TrustSet& trust, unsigned threshold = 1) {
  try {
    test::open_and_verify(bytes, trust, threshold);
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), Errc::signature) << e.what();
    return e.what();
  }
  return "";
}

TEST(Signatures, UnknownKeyIsRefusedAndNamed) {
  PrivateKey signer = PrivateKey::generate(), other = PrivateKey::generate();
  std::string why = refusal(test::build_signed({&signer}), test::trust_of({&other}));
  EXPECT_NE(why.find("0 distinct trusted signer(s), 1 required"), std::string::npos) << why;
  // The key that did sign, and its signer name, are named: a missing trust key is told from a stranger.
  EXPECT_NE(why.find("signed by key " + signer.public_key().key_id() + " (signer 'signer-0'), not in the trust set"),
            std::string::npos) << why;
}

TEST(Signatures, NoSignatureIsRefused) {
  PrivateKey k = PrivateKey::generate();
  std::string why = refusal(test::build_signed({}), test::trust_of({&k}));
  EXPECT_NE(why.find("carries no signature"), std::string::npos) << why;
}

TEST(Signatures, WrongSignatureBytesWithATrustedKeyIdAreRefused) {
  PrivateKey k = PrivateKey::generate();
  std::vector<std::uint8_t> bytes = test::build_signed({&k});
  bytes[bytes.size() - 1] ^= 0x01;  // last byte of the Ed25519 signature
  std::string why = refusal(bytes, test::trust_of({&k}));
  EXPECT_NE(why.find("does not verify with trusted key " + k.public_key().key_id()), std::string::npos) << why;
}

TEST(Signatures, SignatureCopiedFromAnotherArchiveIsRefused) {
  PrivateKey k = PrivateKey::generate();
  PackageIdentity id = test::default_identity();
  // A genuine signature over another archive of the same package and sequence.
  PackageIdentity other_id = id;
  other_id.kernel_revision = "rev-2";
  std::vector<MemberInput> other_members = test::small_members(other_id);
  std::vector<std::uint8_t> other = build_archive(other_id, other_members, {Signer{&k, "s", 0}}, {});
  std::unique_ptr<ArchiveReader> other_archive = ArchiveReader::open_memory(other.data(), other.size(), ReadOptions{});
  format::SignatureRecord stolen = other_archive->signatures().at(0);

  test::RawArchive raw = test::raw_from_members(id, test::small_members(id));
  raw.extra_records.push_back(stolen);
  std::string why = refusal(test::assemble(raw), test::trust_of({&k}));
  EXPECT_NE(why.find("the index was altered, or the signature belongs to another archive"), std::string::npos) << why;
}

TEST(Signatures, OneKeySigningTwiceCountsOnce) {
  PrivateKey a = PrivateKey::generate(), b = PrivateKey::generate();
  PackageIdentity id = test::default_identity();
  test::RawArchive raw = test::raw_from_members(id, test::small_members(id));
  raw.signers = {Signer{&a, "first", 1}, Signer{&a, "again", 2}};
  std::vector<std::uint8_t> bytes = test::assemble(raw);
  TrustSet trust = test::trust_of({&a, &b});
  std::string why = refusal(bytes, trust, 2);
  EXPECT_NE(why.find("1 distinct trusted signer(s), 2 required"), std::string::npos) << why;
  EXPECT_NE(why.find("a key counts once"), std::string::npos) << why;
  // With the second key's signature added, the threshold of two is met.
  raw.signers.push_back(Signer{&b, "second", 3});
  EXPECT_EQ(refusal(test::assemble(raw), trust, 2), "");
}

// The archive digest (SHA-256 of the index head) `raw` will have once assembled: what a
// signer signs. The index offsets are those assemble() computes.
Sha256 digest_of(const test::RawArchive& raw) {
  format::Index index = raw.index;
  std::uint64_t offset = format::kHeaderSize;
  for (std::size_t i = 0; i < index.entries.size(); ++i) {
    index.entries[i].offset = offset;
    offset = format::align_up(offset + raw.stored[i].size());
  }
  format::EncodedIndex encoded = format::encode_index(index);
  return sha256(encoded.bytes.data(), static_cast<std::size_t>(encoded.head_size));
}

// What the reader says of a record that names another release (FORMAT.md §5.2, last rule).
std::string binding_refusal(const PrivateKey& k, const std::string& package, std::uint64_t sequence,
                            const PackageIdentity& archive) {
  return "a signature by key " + k.public_key().key_id() + " names package '" + package + "' sequence " +
         std::to_string(sequence) + " but the archive is '" + archive.package + "' sequence " +
         std::to_string(archive.sequence);
}

// Real Ed25519 signatures over this archive's own digest whose signed attributes name another
// package or sequence (FORMAT.md §5): each must be refused, with the message naming the
// binding, not accepted as approval of this release.
TEST(Signatures, SignatureNamingAnotherSequenceIsRefused) {
  PrivateKey k = PrivateKey::generate();
  PackageIdentity id = test::default_identity();
  test::RawArchive raw = test::raw_from_members(id, test::small_members(id));
  ASSERT_NE(id.sequence, 99u);
  raw.extra_records.push_back(make_signature(digest_of(raw), id.package, 99, Signer{&k, "s", 0}));
  try {
    test::open_and_verify(test::assemble(raw), test::trust_of({&k}));
    FAIL() << "accepted";
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), Errc::signature) << e.what();
    EXPECT_NE(std::string(e.what()).find(binding_refusal(k, id.package, 99, id)), std::string::npos) << e.what();
  }
}

TEST(Signatures, SignatureNamingAnotherPackageIsRefused) {
  PrivateKey k = PrivateKey::generate();
  PackageIdentity id = test::default_identity();
  test::RawArchive raw = test::raw_from_members(id, test::small_members(id));
  const std::string other = id.package + "-other";
  raw.extra_records.push_back(make_signature(digest_of(raw), other, id.sequence, Signer{&k, "s", 0}));
  std::vector<std::uint8_t> bytes = test::assemble(raw);
  try {
    test::open_and_verify(bytes, test::trust_of({&k}));
    FAIL() << "accepted";
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), Errc::signature) << e.what();
    EXPECT_NE(std::string(e.what()).find(binding_refusal(k, other, id.sequence, id)), std::string::npos) << e.what();
  }
  // The same archive with the record naming its own package is accepted: what was refused
  // above is the package alone (the signature itself is good).
  test::RawArchive honest = test::raw_from_members(id, test::small_members(id));
  honest.extra_records.push_back(make_signature(digest_of(honest), id.package, id.sequence, Signer{&k, "s", 0}));
  EXPECT_NO_THROW(test::open_and_verify(test::assemble(honest), test::trust_of({&k})));
}

// The binding is checked for every record, whether or not its key is trusted or the archive
// is authenticated at all (§5.2): a trusted signer's valid record does not excuse another
// record that names another package.
TEST(Signatures, AnyRecordNamingAnotherPackageIsRefusedEvenBesideAValidOne) {
  PrivateKey trusted = PrivateKey::generate(), stranger = PrivateKey::generate();
  PackageIdentity id = test::default_identity();
  test::RawArchive raw = test::raw_from_members(id, test::small_members(id));
  raw.signers = {Signer{&trusted, "release", 0}};
  const std::string other = id.package + "-other";
  raw.extra_records.push_back(make_signature(digest_of(raw), other, id.sequence, Signer{&stranger, "s", 0}));
  std::vector<std::uint8_t> bytes = test::assemble(raw);
  const std::string expected = binding_refusal(stranger, other, id.sequence, id);
  try {
    test::open_and_verify(bytes, test::trust_of({&trusted}));
    FAIL() << "accepted";
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), Errc::signature) << e.what();
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
  try {
    ArchiveReader::open_memory(bytes.data(), bytes.size(), ReadOptions{});  // no trust set: not authenticated
    FAIL() << "accepted without a trust set";
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), Errc::signature) << e.what();
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST(TrustSetLoading, DirectoryOfKeysAndClearErrors) {
  std::string dir = test::make_temp_dir();
  PrivateKey a = PrivateKey::generate(), b = PrivateKey::generate();
  write_new_file(dir + "/a.pub", a.public_key().to_pem(), 0644);
  write_new_file(dir + "/b.pem", b.public_key().to_pem(), 0644);
  write_new_file(dir + "/notes.txt", "not a key", 0644);
  TrustSet set = TrustSet::load(dir);
  EXPECT_EQ(set.size(), 2u);
  EXPECT_NE(set.find(a.public_key().key_id()), nullptr);

  std::string empty = test::make_temp_dir();
  try {
    TrustSet::load(empty);
    FAIL();
  } catch (const Failure& e) {
    EXPECT_NE(std::string(e.what()).find("holds no *.pub or *.pem key"), std::string::npos);
  }
  write_new_file(dir + "/broken.pub", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", 0644);
  try {
    TrustSet::load(dir);
    FAIL();
  } catch (const Failure& e) {
    EXPECT_NE(std::string(e.what()).find("broken.pub: not a PEM public key"), std::string::npos) << e.what();
  }
}

TEST(Keys, PemRoundTripAndPrivateKeyIsNotAPublicKey) {
  PrivateKey k = PrivateKey::generate();
  PrivateKey back = PrivateKey::from_pem(k.to_pem(), "mem");
  EXPECT_EQ(back.public_key().key_id(), k.public_key().key_id());
  EXPECT_EQ(PublicKey::from_pem(k.public_key().to_pem(), "mem").raw(), k.public_key().raw());
  EXPECT_THROW(PublicKey::from_pem(k.to_pem(), "mem"), Failure);
  EXPECT_THROW(PrivateKey::from_pem(k.public_key().to_pem(), "mem"), Failure);
}

// Each verification copies a context the key started once: a copy must judge its own inputs
// only, whatever was verified before with the same key, on any thread.
TEST(Keys, EachVerificationJudgesItsOwnSignature) {
  PrivateKey k = PrivateKey::generate();
  const PublicKey key = k.public_key();
  const std::vector<std::uint8_t> message = {'k', 'i', 'l', 'n', 0, 1, 2, 3};
  const Ed25519Signature good = k.sign(message.data(), message.size());
  Ed25519Signature bad = good;
  bad[7] ^= 0x10;
  std::vector<std::uint8_t> other = message;
  other.back() ^= 1;
  for (int round = 0; round < 3; ++round) {
    clear_verification_cache();  // every call verifies, none is answered from the memo
    EXPECT_TRUE(key.verify(message.data(), message.size(), good));
    EXPECT_FALSE(key.verify(message.data(), message.size(), bad));
    EXPECT_FALSE(key.verify(other.data(), other.size(), good));
    clear_verification_cache();
    EXPECT_TRUE(key.verify(message.data(), message.size(), good));
  }
  // Copies of the same key's template taken on eight threads at once.
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const bool want = (t + i) % 2 == 0;
        if (key.verify(message.data(), message.size(), want ? good : bad) != want) ++wrong;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace kiln
