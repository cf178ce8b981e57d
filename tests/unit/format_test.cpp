// The name rules and the canonical encodings of format v1.
#include <gtest/gtest.h>

#include "error.hpp"
#include "format.hpp"

namespace kiln {
namespace {

using namespace format;

TEST(MemberPath, AcceptsPortableRelativePaths) {
  for (const char* ok : {"kiln.toml", "a/b/c.cubin", "k.sm_90a.cubin", "src/x+y@z=1-2_3.cu"}) {
    EXPECT_EQ(member_path_problem(ok), "") << ok;
  }
}

TEST(MemberPath, RefusesEveryEscapeAndAmbiguity) {
  struct Case {
    std::string path;
    const char* reason;
  } cases[] = {
      {"", "empty"},
      {"/etc/passwd", "absolute"},
      {"../x", "'..'"},
      {"a/../../x", "'..'"},
      {"a/./b", "'.'"},
      {"a//b", "empty component"},
      {"a/", "empty component"},
      {"a\\b", "backslash"},
      {std::string("a\0b", 3), "character outside"},
      {"caf\xc3\xa9.cu", "Unicode normalisation"},
      {"a:b", "character outside"},
      {std::string(1025, 'a'), "longer than"},
  };
  for (const Case& c : cases) {
    std::string problem = member_path_problem(c.path);
    EXPECT_NE(problem.find(c.reason), std::string::npos) << "path '" << c.path << "' gave: " << problem;
  }
}

TEST(PackageName, Rules) {
  EXPECT_EQ(package_name_problem("matmul-relu"), "");
  EXPECT_NE(package_name_problem("Matmul"), "");
  EXPECT_NE(package_name_problem("-x"), "");
  EXPECT_NE(package_name_problem(""), "");
  EXPECT_NE(package_name_problem("a b"), "");
}

TEST(Header, RoundTripsAndRefusesNonZeroReservedBytes) {
  Header h{128, 300, 200, 120};
  std::vector<std::uint8_t> bytes = encode_header(h);
  ASSERT_EQ(bytes.size(), kHeaderSize);
  Header back = decode_header(ByteView(bytes));
  EXPECT_EQ(back.index_offset, 128u);
  EXPECT_EQ(back.index_size, 300u);
  EXPECT_EQ(back.signature_block_size, 200u);
  EXPECT_EQ(back.index_head_size, 120u);
  for (std::size_t i = 48; i < 64; ++i) {
    auto copy = bytes;
    copy[i] = 1;
    EXPECT_THROW(decode_header(ByteView(copy)), Error) << "reserved byte " << i;
  }
  auto wrong_version = bytes;
  wrong_version[8] = 3;
  try {
    decode_header(ByteView(wrong_version));
    FAIL() << "version 3 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("format version 3 is not supported"), std::string::npos) << e.what();
  }
  // A version-1 archive (before the paged index) is refused with what to do about it.
  wrong_version[8] = 1;
  try {
    decode_header(ByteView(wrong_version));
    FAIL() << "version 1 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("repack version-1 archives"), std::string::npos) << e.what();
  }
}

TEST(SignedAttributes, CanonicalFormOnly) {
  SignedAttributes a;
  a.archive_digest.fill(0xab);
  a.package = "p";
  a.sequence = 3;
  a.key_id = std::string(32, 'c');
  a.signer = "release bot";
  a.created = 1700000000;
  std::string text = encode_attributes(a);
  SignedAttributes back = decode_attributes(text);
  EXPECT_EQ(back.signer, "release bot");
  EXPECT_EQ(back.sequence, 3u);
  // Leading zeros, reordered lines, trailing bytes and uppercase hex are all refused:
  // one set of attributes has exactly one encoding.
  std::string leading_zero = text;
  leading_zero.replace(leading_zero.find("sequence: 3"), 11, "sequence: 03");
  EXPECT_THROW(decode_attributes(leading_zero), Error);
  EXPECT_THROW(decode_attributes(text + "x"), Error);
  std::string upper = text;
  upper.replace(upper.find("abab"), 4, "ABAB");
  EXPECT_THROW(decode_attributes(upper), Error);
  std::string swapped = text;
  std::size_t p = swapped.find("package:");
  std::size_t s = swapped.find("sequence:");
  std::string pkg_line = swapped.substr(p, s - p);
  swapped.erase(p, s - p);
  swapped.insert(swapped.find("key-id:"), pkg_line);
  EXPECT_THROW(decode_attributes(swapped), Error);
}

}  // namespace
}  // namespace kiln
