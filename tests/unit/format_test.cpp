// The name rules and the canonical encodings of format v1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/format.hpp"

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

// What a path must also be to extract the same on Linux, macOS and Windows.
TEST(MemberPath, RefusesNamesSomeFileSystemCannotHoldAsIs) {
  struct Case {
    std::string path;
    const char* reason;
  } cases[] = {
      {"src/" + std::string(256, 'a'), "has a component of 256 bytes, over 255"},
      {"notes.", "has a component ending in '.' ('notes.'"},
      {"a../b", "has a component ending in '.' ('a..'"},
      {"nul", "has the component 'nul', a Windows device name"},
      {"src/NUL.txt", "has the component 'NUL.txt', a Windows device name"},
      {"Aux.h", "has the component 'Aux.h', a Windows device name"},
      {"con/x.cu", "has the component 'con', a Windows device name"},
      {"prn.tar.gz", "has the component 'prn.tar.gz', a Windows device name"},
      {"include/com1.h", "has the component 'com1.h', a Windows device name"},
      {"LPT9", "has the component 'LPT9', a Windows device name"},
      {"kiln/evil.sh", "is inside the reserved folder 'kiln/'"},
      {"kiln/kernels/a/b", "is inside the reserved folder 'kiln/'"},
      {"kiln/kernels/9lives", "is inside the reserved folder 'kiln/'"},
      {"kiln/kernels.bin.sig", "is inside the reserved folder 'kiln/'"},
      {"KILN/evil.sh", "is inside the reserved folder 'kiln/'"},
      {"Kiln/kernels.bin", "is inside the reserved folder 'kiln/'"},
  };
  for (const Case& c : cases) {
    std::string problem = member_path_problem(c.path);
    EXPECT_NE(problem.find(c.reason), std::string::npos) << "path '" << c.path << "' gave: " << problem;
  }
  for (const std::string& ok : {"src/" + std::string(255, 'a'), std::string("console.cu"), std::string("com10"),
                               std::string("lpt"), std::string("nul_x.cu"), std::string(".nul"), std::string("a.b/c"),
                               std::string("kiln/kernels.bin"), std::string("kiln/kernels/matmul_relu"),
                               std::string("kiln/observed-toolchain.toml"), std::string("kiln.toml"),
                               std::string("src/kiln/x.cu"), std::string("kilns/x")}) {
    EXPECT_EQ(member_path_problem(ok), "") << ok;
  }
}

std::vector<Entry> entries_at(std::vector<std::string> paths) {
  std::sort(paths.begin(), paths.end());
  std::vector<Entry> entries(paths.size());
  for (std::size_t i = 0; i < paths.size(); ++i) entries[i].path = paths[i];
  return entries;
}

// FORMAT.md §3.1 and §3.2 written out again, plainly and slowly, as the spec states them: the
// reader's checks (a fast one-pass acceptance, then the detailed rules that name a refusal) must
// give the same verdict on every string.
bool spec_accepts_path(const std::string& path) {
  if (path.empty() || path.size() > 1024) return false;
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      parts.push_back(path.substr(start, i - start));
      start = i + 1;
    }
  }
  auto lower = [](std::string t) {
    for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return t;
  };
  for (const std::string& part : parts) {
    if (part.empty() || part == "." || part == ".." || part.size() > 255 || part.back() == '.') return false;
    for (char c : part) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && std::string("._+@=-").find(c) == std::string::npos) return false;
    }
    const std::string stem = lower(part.substr(0, part.find('.')));
    for (const char* device : {"con", "prn", "aux", "nul"}) {
      if (stem == device) return false;
    }
    if (stem.size() == 4 && (stem.rfind("com", 0) == 0 || stem.rfind("lpt", 0) == 0) && std::isdigit(static_cast<unsigned char>(stem[3]))) {
      return false;
    }
  }
  if (parts.size() > 1 && lower(parts[0]) == "kiln") {
    if (path == "kiln/kernels.bin" || path == "kiln/observed-toolchain.toml") return true;
    if (parts.size() != 3 || parts[0] != "kiln" || parts[1] != "kernels") return false;
    const std::string& name = parts[2];
    if (std::isdigit(static_cast<unsigned char>(name[0]))) return false;
    for (char c : name) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
    }
  }
  return true;
}

bool spec_accepts_arch(const std::string& arch) {
  if (arch.size() > 1024) return false;
  if (arch.empty()) return true;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= arch.size(); ++i) {
    if (i < arch.size() && arch[i] != ',') continue;
    if (i == start) return false;
    for (std::size_t j = start; j < i; ++j) {
      const char c = arch[j];
      if (!std::islower(static_cast<unsigned char>(c)) && !std::isdigit(static_cast<unsigned char>(c)) &&
          std::string("_:+-").find(c) == std::string::npos) {
        return false;
      }
    }
    start = i + 1;
  }
  return true;
}

TEST(MemberPath, AgreesWithTheSpecOnEveryShortStringOfItsAwkwardBytes) {
  // Strings over the bytes the rules turn on (separators, dots, case, device-name and kiln/
  // letters, a byte outside the set), every one up to 4 bytes and 200,000 random ones up to 16.
  const std::string alphabet = "/.aKkInlLcoNmu1_\\ ";
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  std::size_t checked = 0;
  auto check = [&](const std::string& p) {
    ASSERT_EQ(format::member_path_problem(p).empty(), spec_accepts_path(p)) << "'" << p << "'";
    ++checked;
  };
  std::vector<std::string> level = {""};
  for (int length = 0; length <= 4; ++length) {
    std::vector<std::string> longer;
    for (const std::string& p : level) {
      check(p);
      if (length < 4) {
        for (char c : alphabet) longer.push_back(p + c);
      }
    }
    level = std::move(longer);
  }
  for (const char* p : {"kiln/kernels/abc", "kiln/kernels/1abc", "KILN/kernels.bin", "kiln/kernels.bin", "con.txt/a",
                        "a/lpt9", "a/lpt", "com1", "nul.", "src/x.cu", "kiln/observed-toolchain.toml", "kiln/x"}) {
    check(p);
  }
  for (int i = 0; i < 200000; ++i) {
    std::string p(next() % 17, ' ');
    for (char& c : p) c = alphabet[next() % alphabet.size()];
    if (next() % 4 == 0) p = "kiln/kernels/" + p;
    check(p);
  }
  EXPECT_GT(checked, 200000u);
}

TEST(ArchTags, AgreeWithTheSpecOnEveryShortStringOfItsAwkwardBytes) {
  const std::string alphabet = ",sm_90a:+-XA ";
  std::vector<std::string> level = {""};
  for (int length = 0; length <= 5; ++length) {
    std::vector<std::string> longer;
    for (const std::string& a : level) {
      ASSERT_EQ(format::arch_tags_problem(a).empty(), spec_accepts_arch(a)) << "'" << a << "'";
      if (length < 5) {
        for (char c : alphabet) longer.push_back(a + c);
      }
    }
    level = std::move(longer);
  }
  EXPECT_FALSE(format::arch_tags_problem(std::string(1025, 'a')).empty());
  EXPECT_TRUE(format::arch_tags_problem(std::string(1024, 'a')).empty());
}

TEST(MemberSet, RefusesNamesThatDifferOnlyInCaseAndFilesWhereFoldersMustBe) {
  struct Case {
    std::vector<std::string> paths;
    const char* reason;
  } cases[] = {
      {{"A.cu", "a.cu"}, "the member paths 'A.cu' and 'a.cu' differ only in ASCII case"},
      {{"k.ptx", "src/X.CU", "src/x.cu"}, "the member paths 'src/X.CU' and 'src/x.cu' differ only in ASCII case"},
      {{"Src/a.cu", "src/b.cu"}, "the member paths 'Src/a.cu' and 'src/b.cu' use the names 'Src' and 'src', which differ only"},
      {{"SRC", "src/a.cu"}, "use the names 'SRC' and 'src', which differ only in ASCII case"},
      {{"src", "src/a.cu"}, "the member path 'src' is a file, but 'src/a.cu' needs a folder of that name"},
      {{"a", "a-b", "a.c", "a/b"}, "the member path 'a' is a file, but 'a/b' needs a folder of that name"},
      {{"x/a", "x/a-1", "x/a/b/c"}, "the member path 'x/a' is a file, but 'x/a/b/c' needs a folder of that name"},
      {{"dup", "dup"}, "the member path 'dup' is given twice"},
  };
  for (const Case& c : cases) {
    std::string problem = member_set_problem(entries_at(c.paths));
    EXPECT_NE(problem.find(c.reason), std::string::npos) << c.paths.front() << "... gave: " << problem;
  }
  // Siblings, folders revisited after other names, and a folder beside a file with a longer name.
  EXPECT_EQ(member_set_problem(entries_at({"a/b", "a-b", "a/c/d", "a/c/e", "a.c", "ab", "b/a", "kiln/kernels.bin",
                                           "kiln/kernels/x", "kiln.toml"})),
            "");
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
    EXPECT_THROW(decode_header(ByteView(copy)), Failure) << "reserved byte " << i;
  }
  auto wrong_version = bytes;
  wrong_version[8] = 3;
  try {
    decode_header(ByteView(wrong_version));
    FAIL() << "version 3 accepted";
  } catch (const Failure& e) {
    EXPECT_NE(std::string(e.what()).find("format version 3 is not supported"), std::string::npos) << e.what();
  }
  // A version-1 archive (before the paged index) is refused with what to do about it.
  wrong_version[8] = 1;
  try {
    decode_header(ByteView(wrong_version));
    FAIL() << "version 1 accepted";
  } catch (const Failure& e) {
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
  EXPECT_THROW(decode_attributes(leading_zero), Failure);
  EXPECT_THROW(decode_attributes(text + "x"), Failure);
  std::string upper = text;
  upper.replace(upper.find("abab"), 4, "ABAB");
  EXPECT_THROW(decode_attributes(upper), Failure);
  std::string swapped = text;
  std::size_t p = swapped.find("package:");
  std::size_t s = swapped.find("sequence:");
  std::string pkg_line = swapped.substr(p, s - p);
  swapped.erase(p, s - p);
  swapped.insert(swapped.find("key-id:"), pkg_line);
  EXPECT_THROW(decode_attributes(swapped), Failure);
}

}  // namespace
}  // namespace kiln
