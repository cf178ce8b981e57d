// Exhaustive tampering: every single-byte change and every truncation of a small signed
// archive must be refused by open + full verification, with a kiln::Error (never a crash
// and never a different exception).
#include <gtest/gtest.h>

#include "error.hpp"
#include "test_support.hpp"

namespace kiln {
namespace {

class Tamper : public ::testing::Test {
 protected:
  void SetUp() override {
    bytes = test::build_signed({&key});
    trust = test::trust_of({&key});
  }
  // Returns "" when refused, or a description of what was accepted.
  std::string accepted(const std::vector<std::uint8_t>& candidate) {
    try {
      test::open_and_verify(candidate, trust);
    } catch (const Error&) {
      return "";
    }
    return "accepted";
  }
  PrivateKey key = PrivateKey::generate();
  std::vector<std::uint8_t> bytes;
  TrustSet trust;
};

TEST_F(Tamper, UnmodifiedArchiveVerifies) { EXPECT_EQ(accepted(bytes), "accepted"); }

TEST_F(Tamper, EverySingleByteChangeAtEveryOffsetIsRefused) {
  ASSERT_GT(bytes.size(), 1000u);
  // Three different changes per offset: the lowest bit, the highest bit, and every bit.
  const std::uint8_t flips[] = {0x01, 0x80, 0xff};
  std::size_t refused = 0;
  for (std::size_t offset = 0; offset < bytes.size(); ++offset) {
    for (std::uint8_t flip : flips) {
      std::vector<std::uint8_t> copy = bytes;
      copy[offset] ^= flip;
      ASSERT_EQ(accepted(copy), "") << "changing byte " << offset << " by xor 0x" << std::hex << int(flip)
                                    << " was not noticed";
      ++refused;
    }
  }
  EXPECT_EQ(refused, bytes.size() * 3);
}

TEST_F(Tamper, EveryTruncationIsRefused) {
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    std::vector<std::uint8_t> copy(bytes.begin(), bytes.begin() + static_cast<long>(length));
    ASSERT_EQ(accepted(copy), "") << "truncation to " << length << " bytes was accepted";
  }
}

TEST_F(Tamper, AppendedBytesAreRefused) {
  for (std::uint8_t extra : {0x00, 0x41}) {
    std::vector<std::uint8_t> copy = bytes;
    copy.push_back(extra);
    EXPECT_EQ(accepted(copy), "");
  }
}

TEST_F(Tamper, ChangedMemberIsNamedInTheError) {
  std::unique_ptr<Archive> a = test::open_and_verify(bytes, trust);
  const format::Entry& code = a->index().entries.at(static_cast<std::size_t>(a->index().find("k.ptx")));
  std::vector<std::uint8_t> copy = bytes;
  copy[code.offset + 3] ^= 0x20;
  try {
    test::open_and_verify(copy, trust);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::integrity);
    EXPECT_NE(std::string(e.what()).find("member 'k.ptx'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
