// libkiln through its C API, from C++: options, errors and their messages, tampering, and
// routing on a machine without a driver (pointed at a missing library, so it holds on any
// machine, GPU or not).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "core/archive_reader.hpp"
#include "core/sparse_writer.hpp"
#include "api_test_env.hpp"
#include "kiln/kiln.h"

namespace {

using kiln_test::archives;
using kiln_test::env_or;
using kiln_test::keys;

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string last_error(kiln_runtime* rt) {
  char buf[2048];
  kiln_runtime_last_error(rt, buf, sizeof buf, nullptr);
  return buf;
}

class RuntimeApi : public ::testing::Test {
 protected:
  void SetUp() override {
    kiln_runtime_options o;
    ASSERT_EQ(kiln_runtime_options_init(&o, sizeof o), KILN_OK);
    o.trust_path = trust.c_str();
    o.cuda_driver_path = "libcuda-absent-for-this-test.so.1";
    ASSERT_EQ(kiln_runtime_create(&rt, &o), KILN_OK);
  }
  void TearDown() override { kiln_runtime_destroy(rt); }
  std::string trust = keys() + "/test.pub";
  kiln_runtime* rt = nullptr;
};

TEST(Options, DefaultsAndVersion) {
  kiln_runtime_options o;
  ASSERT_EQ(kiln_runtime_options_init(&o, sizeof o), KILN_OK);
  EXPECT_EQ(o.size, sizeof o);
  EXPECT_EQ(o.signature_threshold, 1u);
  EXPECT_EQ(o.policy, static_cast<uint32_t>(KILN_POLICY_FALLBACK));
  EXPECT_EQ(o.max_member_size, 4ull << 30);
  EXPECT_EQ(o.log_fn, nullptr);
  EXPECT_EQ(kiln_version(), static_cast<unsigned>(KILN_VERSION_NUMBER));
  EXPECT_STREQ(kiln_version_string(), "0.7.3");
  EXPECT_EQ(kiln_runtime_options_init(nullptr, sizeof o), KILN_ERR_INVALID_ARGUMENT);
}

TEST(Options, NewerCallerWithNonZeroUnknownBytesIsRefused) {
  struct Bigger {
    kiln_runtime_options known;
    uint64_t future_field;
  } big;
  ASSERT_EQ(kiln_runtime_options_init(&big.known, sizeof big), KILN_OK);
  std::string trust = keys() + "/test.pub";
  big.known.trust_path = trust.c_str();
  big.future_field = 0;
  kiln_runtime* rt = nullptr;
  EXPECT_EQ(kiln_runtime_create(&rt, &big.known), KILN_OK);  // unknown bytes are zero: fine
  kiln_runtime_destroy(rt);
  big.future_field = 7;  // a request this library cannot honour must not be ignored
  rt = nullptr;
  EXPECT_EQ(kiln_runtime_create(&rt, &big.known), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rt, nullptr);
}

TEST(Options, OlderShorterCallerGetsDefaults) {
  // A caller compiled when the struct ended before log_level. Its memory past `size` is not
  // its struct (here: garbage a library that ignored `size` would take as options): a log
  // callback at the most verbose level, and a 1-byte member limit that no archive passes.
  const std::size_t known = offsetof(kiln_runtime_options, log_level);
  std::vector<std::string> lines;
  kiln_runtime_options o;
  ASSERT_EQ(kiln_runtime_options_init(&o, sizeof o), KILN_OK);
  std::string trust = keys() + "/test.pub";
  o.trust_path = trust.c_str();
  o.size = static_cast<uint32_t>(known);
  o.log_level = KILN_LOG_DEBUG;
  o.log_fn = [](kiln_log_level, const char* message, void* user) {
    static_cast<std::vector<std::string>*>(user)->push_back(message);
  };
  o.log_user = &lines;
  o.max_member_size = 1;
  o.diag_dir = "/nonexistent-kiln-diag-dir";
  ASSERT_NE(o.log_fn, nullptr);
  kiln_runtime* rt = nullptr;
  ASSERT_EQ(kiln_runtime_create(&rt, &o), KILN_OK);
  kiln_archive* a = nullptr;
  // The default member limit (4 GiB), not the 1 byte past `size`.
  ASSERT_EQ(kiln_archive_open(rt, (archives() + "/scale.kiln").c_str(), &a), KILN_OK) << last_error(rt);
  kiln_kernel* k = nullptr;
  ASSERT_EQ(kiln_archive_get_kernel(a, "scale", 0, &k), KILN_OK) << last_error(rt);
  // The default log (none), not the callback past `size`: choosing the route logs at INFO.
  EXPECT_TRUE(lines.empty()) << lines.size() << " line(s), the first: " << lines.front();
  kiln_archive_destroy(a);
  kiln_runtime_destroy(rt);

  // The same bytes with `size` covering them: now the callback and the limit are honoured,
  // so the two checks above can tell the difference.
  o.size = sizeof o;
  ASSERT_EQ(kiln_runtime_create(&rt, &o), KILN_OK);
  EXPECT_NE(kiln_archive_open(rt, (archives() + "/scale.kiln").c_str(), &a), KILN_OK);
  EXPECT_FALSE(lines.empty());
  kiln_runtime_destroy(rt);
}

TEST(Options, CreateFailureIsExplainedInTheCallersBuffer) {
  kiln_runtime_options o;
  kiln_runtime_options_init(&o, sizeof o);
  o.trust_path = "/nonexistent/keys.pub";
  char why[512] = {};
  o.error_buffer = why;
  o.error_buffer_size = sizeof why;
  kiln_runtime* rt = nullptr;
  EXPECT_EQ(kiln_runtime_create(&rt, &o), KILN_ERR_IO);
  EXPECT_NE(std::string(why).find("/nonexistent/keys.pub"), std::string::npos) << why;
  o.trust_path = nullptr;
  EXPECT_EQ(kiln_runtime_create(&rt, &o), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(why).find("trust_path is required"), std::string::npos) << why;
}

TEST_F(RuntimeApi, OpensFromPathAndMemoryWithTheSameDigest) {
  kiln_archive* from_path = nullptr;
  ASSERT_EQ(kiln_archive_open(rt, (archives() + "/scale.kiln").c_str(), &from_path), KILN_OK) << last_error(rt);
  std::vector<char> bytes = read_file(archives() + "/scale.kiln");
  kiln_archive* from_memory = nullptr;
  ASSERT_EQ(kiln_archive_open_memory(rt, bytes.data(), bytes.size(), &from_memory), KILN_OK) << last_error(rt);
  bytes.assign(bytes.size(), 0);  // the library copied what it needs
  EXPECT_STREQ(kiln_archive_digest(from_path), kiln_archive_digest(from_memory));
  EXPECT_STREQ(kiln_archive_kernel_name(from_memory, 1), "scale_strict");
  EXPECT_EQ(kiln_archive_kernel_name(from_memory, 2), nullptr);
  kiln_archive_destroy(from_path);
  kiln_archive_destroy(from_memory);
}

// An archive whose index is a tree (FORMAT.md §3, tests/data/tree/make_package.py), opened from
// its path (read through pread, never mapped) and from memory: every kernel listed and resolved.
TEST_F(RuntimeApi, AnArchiveWithATreeIndexListsAndResolvesEveryKernel) {
  const std::string path = archives() + "/tree-index.kiln";
  if (!std::ifstream(path)) GTEST_SKIP() << path << " was not built (no Python 3 at configure time)";
  std::vector<char> bytes = read_file(path);
  kiln_archive* from_path = nullptr;
  kiln_archive* from_memory = nullptr;
  ASSERT_EQ(kiln_archive_open(rt, path.c_str(), &from_path), KILN_OK) << last_error(rt);
  ASSERT_EQ(kiln_archive_open_memory(rt, bytes.data(), bytes.size(), &from_memory), KILN_OK) << last_error(rt);
  EXPECT_STREQ(kiln_archive_digest(from_path), kiln_archive_digest(from_memory));
  for (kiln_archive* a : {from_path, from_memory}) {
    ASSERT_EQ(kiln_archive_kernel_count(a), 8u);
    for (std::size_t i = 0; i < 8; ++i) {
      char name[8];
      std::snprintf(name, sizeof name, "k%03zu", i);
      EXPECT_STREQ(kiln_archive_kernel_name(a, i), name);
      kiln_kernel* k = nullptr;
      ASSERT_EQ(kiln_archive_get_kernel(a, name, 0, &k), KILN_OK) << name << ": " << last_error(rt);
      EXPECT_EQ(kiln_kernel_route(k), KILN_ROUTE_REFERENCE);  // no driver here
    }
    kiln_kernel* missing = nullptr;
    EXPECT_EQ(kiln_archive_get_kernel(a, "k999", 0, &missing), KILN_ERR_NOT_FOUND);
  }
  kiln_archive_destroy(from_path);
  kiln_archive_destroy(from_memory);
}

TEST_F(RuntimeApi, TamperedArchivesAreRefusedWithTheirStatusAndMessage) {
  std::vector<char> good = read_file(archives() + "/scale.kiln");
  ASSERT_GT(good.size(), 200u);
  // A byte of the index head (what the digest covers) breaks the signature.
  std::uint64_t index_offset = 0;
  std::memcpy(&index_offset, good.data() + 16, 8);  // header field, little-endian (FORMAT.md §2)
  std::vector<char> head_changed = good;
  head_changed[index_offset + 30] ^= 1;
  kiln_archive* a = nullptr;
  EXPECT_EQ(kiln_archive_open_memory(rt, head_changed.data(), head_changed.size(), &a), KILN_ERR_SIGNATURE);
  EXPECT_EQ(a, nullptr);
  EXPECT_NE(last_error(rt).find("signature check failed"), std::string::npos) << last_error(rt);
  // A byte of the index page that holds the kernel's record no longer matches the page's digest
  // in the head. Opening reads no index page (the head carries kiln/kernels.bin's entry, FORMAT.md
  // §3); the kernel's lookup reads that page and refuses it. Its entry's path is the last
  // "kiln/kernels/scale" in the file (the head names pages by their first paths only).
  std::vector<char> page_changed = good;
  const std::string record_path = "kiln/kernels/scale";
  std::size_t at = std::string(good.begin(), good.end()).rfind(record_path);
  ASSERT_NE(at, std::string::npos);
  ASSERT_GT(at, index_offset);
  page_changed[at + 5] ^= 1;
  ASSERT_EQ(kiln_archive_open_memory(rt, page_changed.data(), page_changed.size(), &a), KILN_OK) << last_error(rt);
  kiln_kernel* k = nullptr;
  EXPECT_EQ(kiln_archive_get_kernel(a, "scale", 0, &k), KILN_ERR_INTEGRITY);
  EXPECT_EQ(k, nullptr);
  EXPECT_NE(last_error(rt).find("its bytes do not match the SHA-256 its reference gives"), std::string::npos)
      << last_error(rt);
  kiln_archive_destroy(a);
  a = nullptr;
  // A truncated file is malformed.
  EXPECT_EQ(kiln_archive_open_memory(rt, good.data(), good.size() - 1, &a), KILN_ERR_MALFORMED);
  EXPECT_NE(last_error(rt).find("truncated"), std::string::npos) << last_error(rt);
  // Not an archive at all.
  EXPECT_EQ(kiln_archive_open_memory(rt, "hello", 5, &a), KILN_ERR_MALFORMED);
  EXPECT_EQ(kiln_archive_open(rt, "/nonexistent.kiln", &a), KILN_ERR_IO);
  EXPECT_NE(last_error(rt).find("/nonexistent.kiln"), std::string::npos);
  kiln_stats s{};
  s.size = sizeof s;
  ASSERT_EQ(kiln_runtime_stats(rt, &s), KILN_OK);
  EXPECT_EQ(s.archive_open_failures, 4u);  // head, truncated, not an archive, missing
}

// kiln_archive_read_member (0.3): the verified content of a member, a size query that reads
// nothing, and each refusal with its status: unknown, over the bound (the size query too, so no
// caller sizes a buffer from a hostile length), changed bytes.
TEST_F(RuntimeApi, ReadMemberGivesVerifiedContentAndRefusesWithTheReason) {
  kiln_archive* a = nullptr;
  ASSERT_EQ(kiln_archive_open(rt, (archives() + "/scale.kiln").c_str(), &a), KILN_OK) << last_error(rt);
  std::size_t size = 0;
  ASSERT_EQ(kiln_archive_read_member(a, "kiln.toml", nullptr, 0, &size), KILN_ERR_BUFFER_TOO_SMALL);
  ASSERT_GT(size, 100u);
  std::string manifest(size, '\0');
  ASSERT_EQ(kiln_archive_read_member(a, "kiln.toml", manifest.data(), manifest.size(), &size), KILN_OK) << last_error(rt);
  EXPECT_NE(manifest.find("[package]"), std::string::npos) << manifest;
  EXPECT_EQ(manifest.size(), size);
  EXPECT_EQ(kiln_archive_read_member(a, "kiln.toml", manifest.data(), manifest.size() - 1, &size), KILN_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(kiln_archive_read_member(a, "no/such/member", manifest.data(), manifest.size(), &size), KILN_ERR_NOT_FOUND);
  EXPECT_NE(last_error(rt).find("no member named 'no/such/member'"), std::string::npos) << last_error(rt);
  EXPECT_EQ(kiln_archive_read_member(a, nullptr, nullptr, 0, &size), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_archive_read_member(a, "kiln.toml", nullptr, 8, &size), KILN_ERR_INVALID_ARGUMENT);
  kiln_archive_destroy(a);

  // A member over the runtime's bound: refused on its declared size, the size query included.
  kiln_runtime_options o;
  kiln_runtime_options_init(&o, sizeof o);
  const std::string trust = keys() + "/test.pub";
  o.trust_path = trust.c_str();
  o.max_member_size = 64;
  kiln_runtime* small = nullptr;
  ASSERT_EQ(kiln_runtime_create(&small, &o), KILN_OK);
  std::vector<char> bytes = read_file(archives() + "/scale.kiln");
  if (kiln_archive_open_memory(small, bytes.data(), bytes.size(), &a) == KILN_OK) {
    EXPECT_EQ(kiln_archive_read_member(a, "kiln.toml", nullptr, 0, &size), KILN_ERR_LIMIT);
    EXPECT_NE(last_error(small).find("over the reader's limit of 64"), std::string::npos) << last_error(small);
    kiln_archive_destroy(a);
  }
  kiln_runtime_destroy(small);

  // A changed byte in a member's stored bytes: refused before any byte reaches the buffer.
  const std::string text(bytes.begin(), bytes.end());
  // The PTX member is stored raw and holds the kernel's name; its last mention in the file is there
  // (kiln.toml is compressed, and the index and signatures name no entry).
  std::size_t at = text.rfind(".entry scale_f32");
  ASSERT_EQ(kiln_archive_open_memory(rt, bytes.data(), bytes.size(), &a), KILN_OK) << last_error(rt);
  std::size_t ptx_size = 0;
  ASSERT_EQ(kiln_archive_read_member(a, "scale.ptx", nullptr, 0, &ptx_size), KILN_ERR_BUFFER_TOO_SMALL) << last_error(rt);
  kiln_archive_destroy(a);
  ASSERT_NE(at, std::string::npos);
  {
    bytes[at + 8] ^= 1;
    ASSERT_EQ(kiln_archive_open_memory(rt, bytes.data(), bytes.size(), &a), KILN_OK) << last_error(rt);
    std::string ptx(ptx_size, 'x');
    EXPECT_EQ(kiln_archive_read_member(a, "scale.ptx", ptx.data(), ptx.size(), &size), KILN_ERR_INTEGRITY);
    EXPECT_NE(last_error(rt).find("member 'scale.ptx': stored bytes do not match the index"), std::string::npos)
        << last_error(rt);
    EXPECT_EQ(ptx, std::string(ptx_size, 'x'));  // nothing was written
    kiln_archive_destroy(a);
  }
}

// A sparse archive (0.7, FORMAT.md §9: what `kiln pull --target` writes) opens with the complete
// archive's digest; a member it lacks is refused by name, and a kernel whose code is absent routes
// with a reason naming it.
TEST_F(RuntimeApi, ASparseArchiveOpensWithItsDigestAndNamesWhatItLacks) {
  std::vector<char> whole = read_file(archives() + "/scale.kiln");
  std::unique_ptr<kiln::ArchiveReader> reader = kiln::ArchiveReader::open_memory(
      reinterpret_cast<const std::uint8_t*>(whole.data()), whole.size(), kiln::ReadOptions{});
  const std::vector<kiln::format::Entry>& entries = reader->index().entries;
  std::vector<bool> keep(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) keep[i] = entries[i].role == kiln::format::Role::manifest ||
                                                             entries[i].role == kiln::format::Role::meta;
  std::vector<char> sparse;
  kiln::write_sparse([&sparse](const std::uint8_t* d, std::size_t n) { sparse.insert(sparse.end(), d, d + n); },
                     reader->header(), kiln::format::extents_for(entries, keep, reader->header()),
                     [&whole](const kiln::format::Extent& x, const kiln::ExtentWrite& write) {
                       write(reinterpret_cast<const std::uint8_t*>(whole.data()) + x.offset, x.size);
                     });
  kiln_archive* full = nullptr;
  kiln_archive* a = nullptr;
  ASSERT_EQ(kiln_archive_open_memory(rt, whole.data(), whole.size(), &full), KILN_OK) << last_error(rt);
  ASSERT_EQ(kiln_archive_open_memory(rt, sparse.data(), sparse.size(), &a), KILN_OK) << last_error(rt);
  EXPECT_STREQ(kiln_archive_digest(a), kiln_archive_digest(full));
  std::size_t size = 0;
  EXPECT_EQ(kiln_archive_read_member(a, "kiln.toml", nullptr, 0, &size), KILN_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(kiln_archive_read_member(a, "scale.ptx", nullptr, 0, &size), KILN_ERR_NOT_FOUND);
  EXPECT_NE(last_error(rt).find("member 'scale.ptx' is absent from this sparse archive"), std::string::npos) << last_error(rt);
  char json[8192];
  ASSERT_EQ(kiln_archive_preflight_target(a, "sm_90", "13.0", json, sizeof json, nullptr), KILN_OK) << last_error(rt);
  EXPECT_NE(std::string(json).find("'scale.ptx' (absent from this sparse archive)"), std::string::npos) << json;
  EXPECT_NE(std::string(json).find("\"reason\":\"arch-mismatch\""), std::string::npos) << json;
  kiln_archive_destroy(a);
  kiln_archive_destroy(full);
}

// kiln_archive_preflight_target (0.3): a described GPU judged without one, as `kiln preflight
// --target` does; a target that is not one is refused by name.
TEST_F(RuntimeApi, PreflightForADescribedTargetNeedsNoGpu) {
  kiln_archive* a = nullptr;
  ASSERT_EQ(kiln_archive_open(rt, (archives() + "/scale.kiln").c_str(), &a), KILN_OK) << last_error(rt);
  std::size_t needed = 0;
  ASSERT_EQ(kiln_archive_preflight_target(a, "sm_90", "13.0", nullptr, 0, &needed), KILN_ERR_BUFFER_TOO_SMALL);
  std::string json(needed, '\0');
  ASSERT_EQ(kiln_archive_preflight_target(a, "sm_90", "13.0", json.data(), json.size(), nullptr), KILN_OK) << last_error(rt);
  EXPECT_NE(json.find("\"target\":\"sm_90\",\"driver\":\"13.0\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"kernel\":\"scale\""), std::string::npos) << json;
  EXPECT_EQ(json.find("no-driver"), std::string::npos) << json;  // judged for the described GPU, not this host
  EXPECT_EQ(kiln_archive_preflight_target(a, "not-a-gpu", nullptr, json.data(), json.size(), nullptr),
            KILN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error(rt).find("not-a-gpu"), std::string::npos) << last_error(rt);
  EXPECT_EQ(kiln_archive_preflight_target(a, nullptr, nullptr, json.data(), json.size(), nullptr), KILN_ERR_INVALID_ARGUMENT);
  kiln_archive_destroy(a);
}

// signature_threshold is 1 to 64 (kiln.h): 0 would turn authentication off, and is refused.
TEST(Options, SignatureThresholdOutsideOneTo64IsRefused) {
  kiln_runtime_options o;
  kiln_runtime_options_init(&o, sizeof o);
  EXPECT_EQ(o.signature_threshold, 1u);
  const std::string trust = keys() + "/test.pub";
  o.trust_path = trust.c_str();
  for (std::uint32_t bad : {0u, 65u, 0xffffffffu}) {
    o.signature_threshold = bad;
    kiln_runtime* rt = nullptr;
    EXPECT_EQ(kiln_runtime_create(&rt, &o), KILN_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_EQ(rt, nullptr);
    char why[512] = {};
    kiln_last_error(why, sizeof why, nullptr);
    EXPECT_NE(std::string(why).find("signature_threshold must be 1 to 64, not " + std::to_string(bad)), std::string::npos)
        << why;
  }
  for (std::uint32_t good : {1u, 64u}) {
    o.signature_threshold = good;
    kiln_runtime* rt = nullptr;
    EXPECT_EQ(kiln_runtime_create(&rt, &o), KILN_OK) << good;
    kiln_runtime_destroy(rt);
  }
}

TEST_F(RuntimeApi, UntrustedSignerIsRefused) {
  kiln_runtime_options o;
  kiln_runtime_options_init(&o, sizeof o);
  // The archives are signed by keys/test.key; trusting only a fresh key must refuse them.
  std::string other = keys() + "/other-for-runtime-test";
  std::remove((other + ".key").c_str());
  std::remove((other + ".pub").c_str());
  ASSERT_EQ(std::system((env_or("KILN_BINARY", KILN_BINARY) + " keygen --out " + other + " >/dev/null").c_str()), 0);
  std::string pub = other + ".pub";
  o.trust_path = pub.c_str();
  kiln_runtime* strict = nullptr;
  ASSERT_EQ(kiln_runtime_create(&strict, &o), KILN_OK);
  kiln_archive* a = nullptr;
  EXPECT_EQ(kiln_archive_open(strict, (archives() + "/scale.kiln").c_str(), &a), KILN_ERR_SIGNATURE);
  EXPECT_NE(last_error(strict).find("0 distinct trusted signer(s), 1 required"), std::string::npos) << last_error(strict);
  kiln_runtime_destroy(strict);
}

struct Seen {
  int calls = 0;
  std::vector<const void*> args;
  void* stream = nullptr;
  unsigned reason = 0;
  std::string text;
  std::string digest;
};

int record_reference(const kiln_call_info* info, void* const* args, size_t n, void* stream, void* user) {
  auto* seen = static_cast<Seen*>(user);
  seen->calls++;
  seen->args.assign(args, args + n);
  seen->stream = stream;
  seen->reason = info->reason;
  seen->text = info->reason_text;
  seen->digest = info->archive_digest;
  return 0;
}

int failing_reference(const kiln_call_info*, void* const*, size_t, void*, void*) { return 42; }

TEST_F(RuntimeApi, NoDriverRoutesEveryCallToTheReferenceWithTheSameArguments) {
  kiln_archive* a = nullptr;
  ASSERT_EQ(kiln_archive_open(rt, (archives() + "/scale.kiln").c_str(), &a), KILN_OK);
  ASSERT_EQ(kiln_archive_warm(a, 0), KILN_OK) << last_error(rt);
  kiln_kernel* k = nullptr;
  ASSERT_EQ(kiln_archive_get_kernel(a, "scale", 0, &k), KILN_OK);
  EXPECT_EQ(kiln_kernel_route(k), KILN_ROUTE_REFERENCE);
  EXPECT_EQ(kiln_kernel_reason(k), KILN_REASON_NO_DRIVER);
  EXPECT_STREQ(kiln_kernel_target(k), "");
  EXPECT_STREQ(kiln_kernel_archive_digest(k), kiln_archive_digest(a));
  EXPECT_STREQ(kiln_kernel_package(k), "scale");
  kiln_kernel* again = nullptr;
  ASSERT_EQ(kiln_archive_get_kernel(a, "scale", 0, &again), KILN_OK);
  EXPECT_EQ(again, k) << "a kernel is resolved once per device and reused";

  Seen seen;
  ASSERT_EQ(kiln_runtime_register_reference(rt, "scale", record_reference, &seen), KILN_OK);
  float y = 0, x = 0, a_value = 2;
  unsigned n = 1024;  // a declared shape: the reason is the device's (an undeclared one is tested apart)
  float* yp = &y;
  float* xp = &x;
  void* args[] = {&yp, &xp, &a_value, &n};
  int stream = 0;
  kiln_route taken = KILN_ROUTE_NATIVE;
  ASSERT_EQ(kiln_kernel_launch(k, args, 4, &stream, &taken), KILN_OK) << last_error(rt);
  EXPECT_EQ(taken, KILN_ROUTE_REFERENCE);
  EXPECT_EQ(seen.calls, 1);
  ASSERT_EQ(seen.args.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(seen.args[static_cast<size_t>(i)], args[i]);
  EXPECT_EQ(seen.stream, &stream);
  EXPECT_EQ(seen.reason, static_cast<unsigned>(KILN_REASON_NO_DRIVER));
  EXPECT_EQ(seen.digest, kiln_archive_digest(a));

  ASSERT_EQ(kiln_runtime_register_reference(rt, "scale", failing_reference, nullptr), KILN_OK);
  EXPECT_EQ(kiln_kernel_launch(k, args, 4, nullptr, nullptr), KILN_ERR_REFERENCE_FAILED);
  EXPECT_NE(last_error(rt).find("returned 42"), std::string::npos);
  ASSERT_EQ(kiln_runtime_register_reference(rt, "scale", nullptr, nullptr), KILN_OK);  // removed
  EXPECT_EQ(kiln_kernel_launch(k, args, 4, nullptr, nullptr), KILN_ERR_REFUSED);
  // the same kernel resolved for device 5: its calls are counted for that device too
  kiln_kernel* k5 = nullptr;
  ASSERT_EQ(kiln_archive_get_kernel(a, "scale", 5, &k5), KILN_OK);
  ASSERT_EQ(kiln_runtime_register_reference(rt, "scale", record_reference, &seen), KILN_OK);
  ASSERT_EQ(kiln_kernel_launch(k5, args, 4, nullptr, nullptr), KILN_OK) << last_error(rt);
  ASSERT_EQ(kiln_kernel_launch(k5, args, 4, nullptr, nullptr), KILN_OK) << last_error(rt);
  // an ordinal past the per-device counters (64 and up) counts in the totals alone
  kiln_kernel* k70 = nullptr;
  ASSERT_EQ(kiln_archive_get_kernel(a, "scale", 70, &k70), KILN_OK);
  ASSERT_EQ(kiln_kernel_launch(k70, args, 4, nullptr, nullptr), KILN_OK) << last_error(rt);
  kiln_stats stats;
  kiln_stats_init(&stats, sizeof stats);
  ASSERT_EQ(kiln_runtime_stats(rt, &stats), KILN_OK);
  EXPECT_EQ(stats.launches_reference, 4u);
  EXPECT_EQ(stats.launches_refused, 1u);
  EXPECT_EQ(stats.launch_failures, 1u);
  EXPECT_EQ(stats.launches_native, 0u);

  char prom[8192];
  size_t needed = 0;
  ASSERT_EQ(kiln_runtime_stats_prometheus(rt, prom, sizeof prom, &needed), KILN_OK);
  std::string text = prom;
  EXPECT_NE(text.find("kiln_launches_total{route=\"reference\"} 4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("kiln_launch_failures_total 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("kiln_launches_total{route=\"refused\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("kiln_device_launches_total{device=\"0\",route=\"reference\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("kiln_device_launches_total{device=\"0\",route=\"refused\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("kiln_device_launch_failures_total{device=\"0\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("kiln_device_launches_total{device=\"5\",route=\"reference\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("kiln_device_launch_failures_total{device=\"5\"} 0\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("device=\"1\""), std::string::npos) << "a device with no calls is not listed";
  EXPECT_EQ(text.find("device=\"70\""), std::string::npos) << "ordinals from 64 up have no counters of their own";
  char tiny[8];
  EXPECT_EQ(kiln_runtime_stats_prometheus(rt, tiny, sizeof tiny, &needed), KILN_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(needed, text.size() + 1);
  kiln_archive_destroy(a);
}

int counting_reference(const kiln_call_info*, void* const* args, size_t, void*, void* user) {
  static_cast<std::atomic<int>*>(user)->fetch_add(1);
  float* y = *static_cast<float**>(args[0]);
  *y = *static_cast<float*>(args[2]);  // each thread's own output
  return 0;
}

TEST_F(RuntimeApi, ManyThreadsResolveAndLaunchTheSameKernelAtOnce) {
  kiln_archive* a = nullptr;
  ASSERT_EQ(kiln_archive_open(rt, (archives() + "/scale.kiln").c_str(), &a), KILN_OK);
  std::atomic<int> calls{0};
  ASSERT_EQ(kiln_runtime_register_reference(rt, "scale", counting_reference, &calls), KILN_OK);
  constexpr int kThreads = 8, kLaunches = 500;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  std::vector<kiln_kernel*> seen(kThreads, nullptr);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      kiln_kernel* k = nullptr;
      if (kiln_archive_get_kernel(a, "scale", 0, &k) != KILN_OK) {
        failures++;
        return;
      }
      seen[static_cast<size_t>(t)] = k;
      float y = 0, x = 0, value = static_cast<float>(t);
      unsigned n = 1;
      float* yp = &y;
      float* xp = &x;
      void* args[] = {&yp, &xp, &value, &n};
      for (int i = 0; i < kLaunches; ++i) {
        if (kiln_kernel_launch(k, args, 4, nullptr, nullptr) != KILN_OK || y != value) failures++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(calls.load(), kThreads * kLaunches);
  for (kiln_kernel* k : seen) EXPECT_EQ(k, seen[0]) << "one resolution, shared by every thread";
  kiln_stats s{};
  s.size = sizeof s;
  kiln_runtime_stats(rt, &s);
  EXPECT_EQ(s.launches_reference, static_cast<uint64_t>(kThreads * kLaunches));
  kiln_archive_destroy(a);
}

TEST_F(RuntimeApi, ParametersAreDescribedForBindings) {
  kiln_archive* a = nullptr;
  ASSERT_EQ(kiln_archive_open(rt, (archives() + "/scale.kiln").c_str(), &a), KILN_OK);
  kiln_kernel* k = nullptr;
  ASSERT_EQ(kiln_archive_get_kernel(a, "scale", 0, &k), KILN_OK);
  const struct {
    const char* name;
    uint32_t is_pointer, dtype, access;
  } expected[] = {{"y", 1, KILN_DTYPE_F32, 1}, {"x", 1, KILN_DTYPE_F32, 0}, {"a", 0, KILN_DTYPE_F32, 2}, {"n", 0, KILN_DTYPE_U32, 2}};
  ASSERT_EQ(kiln_kernel_param_count(k), 4u);
  for (size_t i = 0; i < 4; ++i) {
    kiln_param_info info{};
    info.size = sizeof info;
    ASSERT_EQ(kiln_kernel_param(k, i, &info), KILN_OK);
    EXPECT_STREQ(info.name, expected[i].name);
    EXPECT_EQ(info.is_pointer, expected[i].is_pointer);
    EXPECT_EQ(info.dtype, expected[i].dtype);
    if (info.is_pointer) EXPECT_EQ(info.access, expected[i].access) << info.name;
  }
  kiln_param_info info{};
  info.size = sizeof info;
  EXPECT_EQ(kiln_kernel_param(k, 4, &info), KILN_ERR_INVALID_ARGUMENT);
  kiln_archive_destroy(a);
}

TEST_F(RuntimeApi, PreflightReportsEveryKernelAsJson) {
  kiln_archive* a = nullptr;
  ASSERT_EQ(kiln_archive_open(rt, (archives() + "/scale.kiln").c_str(), &a), KILN_OK);
  size_t needed = 0;
  EXPECT_EQ(kiln_archive_preflight(a, 0, nullptr, 0, &needed), KILN_ERR_BUFFER_TOO_SMALL);  // a size query
  ASSERT_GT(needed, 10u);
  std::string buf(needed, '\0');
  ASSERT_EQ(kiln_archive_preflight(a, 0, &buf[0], buf.size(), nullptr), KILN_OK);
  EXPECT_NE(buf.find("{\"kernel\":\"scale\",\"route\":\"reference\",\"reason\":\"no-driver\""), std::string::npos) << buf;
  EXPECT_NE(buf.find("{\"kernel\":\"scale_strict\",\"route\":\"refused\""), std::string::npos) << buf;
  char small[16];
  EXPECT_EQ(kiln_archive_preflight(a, 0, small, sizeof small, nullptr), KILN_ERR_BUFFER_TOO_SMALL);
  kiln_archive_destroy(a);
}

TEST_F(RuntimeApi, AmdKernelsWithoutAnAmdGpuRouteToTheReferenceWithTheReason) {
  std::string path = archives() + "/scale-amd.kiln";
  if (!std::ifstream(path)) GTEST_SKIP() << "scale-amd.kiln needs hipcc at build time";
  kiln_archive* a = nullptr;
  ASSERT_EQ(kiln_archive_open(rt, path.c_str(), &a), KILN_OK) << last_error(rt);
  kiln_kernel* k = nullptr;
  ASSERT_EQ(kiln_archive_get_kernel(a, "scale", 0, &k), KILN_OK);
  std::printf("scale (hip): route %s (%s): %s\n", kiln_route_string(kiln_kernel_route(k)),
              kiln_reason_string(kiln_kernel_reason(k)), kiln_kernel_reason_text(k));
  EXPECT_EQ(kiln_kernel_route(k), KILN_ROUTE_REFERENCE);
  // With Debian's HIP runtime installed and no AMD GPU: no-device; without the runtime: no-driver.
  EXPECT_TRUE(kiln_kernel_reason(k) == KILN_REASON_NO_DEVICE || kiln_kernel_reason(k) == KILN_REASON_NO_DRIVER);
  ASSERT_EQ(kiln_archive_get_kernel(a, "scale_cuda", 0, &k), KILN_OK);  // the CUDA kernel of the mixed archive
  EXPECT_EQ(kiln_kernel_reason(k), KILN_REASON_NO_DRIVER);
  kiln_archive_destroy(a);
}

// Redirects file descriptors 1 and 2 into a temporary file until stop(), which restores them
// and returns what was written there (by anyone in the process: printf, std::cerr, write(2)).
class StdoutStderrCapture {
 public:
  StdoutStderrCapture() {
    std::fflush(stdout);
    std::fflush(stderr);
    file_ = std::tmpfile();
    saved_[0] = ::dup(1);
    saved_[1] = ::dup(2);
    ok_ = file_ != nullptr && saved_[0] >= 0 && saved_[1] >= 0 && ::dup2(fileno(file_), 1) >= 0 &&
          ::dup2(fileno(file_), 2) >= 0;
  }
  ~StdoutStderrCapture() { stop(); }
  bool ok() const { return ok_; }
  std::string stop() {
    std::string written;
    if (saved_[0] < 0 && saved_[1] < 0) return written;
    std::fflush(stdout);
    std::fflush(stderr);
    for (int fd : {1, 2}) {
      if (saved_[fd - 1] >= 0) {
        ::dup2(saved_[fd - 1], fd);
        ::close(saved_[fd - 1]);
        saved_[fd - 1] = -1;
      }
    }
    if (file_ != nullptr) {
      std::rewind(file_);
      char buf[4096];
      std::size_t n = 0;
      while ((n = std::fread(buf, 1, sizeof buf, file_)) > 0) written.append(buf, n);
      std::fclose(file_);
      file_ = nullptr;
    }
    return written;
  }

 private:
  std::FILE* file_ = nullptr;
  int saved_[2] = {-1, -1};
  bool ok_ = false;
};

TEST(StdoutStderrCaptureSelfTest, SeesWhatIsWrittenToFd1And2) {
  StdoutStderrCapture capture;
  ASSERT_TRUE(capture.ok());
  std::printf("to stdout;");
  std::fprintf(stderr, "to stderr;");
  ASSERT_EQ(::write(2, "raw fd 2", 8), 8);
  std::string written = capture.stop();  // stdout is flushed by stop(), so it may come last
  EXPECT_EQ(written.size(), std::string("to stdout;to stderr;raw fd 2").size()) << written;
  for (const char* part : {"to stdout;", "to stderr;", "raw fd 2"}) EXPECT_NE(written.find(part), std::string::npos) << written;
}

TEST_F(RuntimeApi, LoggingGoesToTheCallbackOnly) {
  std::vector<std::string> lines;
  kiln_runtime_options o;
  kiln_runtime_options_init(&o, sizeof o);
  o.trust_path = trust.c_str();
  o.cuda_driver_path = "libcuda-absent-for-this-test.so.1";
  o.log_level = KILN_LOG_DEBUG;
  o.log_user = &lines;
  o.log_fn = [](kiln_log_level, const char* message, void* user) {
    static_cast<std::vector<std::string>*>(user)->push_back(message);
  };
  // Every call that logs runs with fds 1 and 2 captured; the assertions come after they are
  // restored (gtest itself prints to stdout).
  StdoutStderrCapture capture;
  ASSERT_TRUE(capture.ok());
  kiln_runtime* logged = nullptr;
  kiln_status created = kiln_runtime_create(&logged, &o);
  kiln_archive* a = nullptr;
  kiln_status opened = created == KILN_OK ? kiln_archive_open(logged, (archives() + "/scale.kiln").c_str(), &a) : created;
  kiln_kernel* k = nullptr;
  kiln_status got = opened == KILN_OK ? kiln_archive_get_kernel(a, "scale", 0, &k) : opened;
  kiln_archive* missing = nullptr;  // a failure, too, is told to the callback only
  kiln_status refused = created == KILN_OK ? kiln_archive_open(logged, "/nonexistent/kiln-test.kiln", &missing) : created;
  kiln_archive_destroy(a);
  kiln_runtime_destroy(logged);
  std::string written = capture.stop();

  ASSERT_EQ(created, KILN_OK);
  ASSERT_EQ(opened, KILN_OK);
  ASSERT_EQ(got, KILN_OK);
  EXPECT_EQ(refused, KILN_ERR_IO);
  ASSERT_FALSE(lines.empty());
  bool routed = false;
  for (const std::string& line : lines) routed = routed || line.find("kernel 'scale' routes to reference") != std::string::npos;
  EXPECT_TRUE(routed) << lines.back();
  EXPECT_EQ(written, "") << "libkiln wrote to stdout/stderr while a log callback was set";
}

TEST(Strings, EveryStatusRouteAndReasonHasAName) {
  for (int s = KILN_OK; s <= KILN_ERR_INTERNAL; ++s) EXPECT_STRNE(kiln_status_string(static_cast<kiln_status>(s)), "unknown status");
  for (int r = KILN_ROUTE_NATIVE; r <= KILN_ROUTE_REFUSED; ++r) EXPECT_STRNE(kiln_route_string(static_cast<kiln_route>(r)), "unknown");
  for (int r = KILN_REASON_MATCH; r <= KILN_REASON_DEVICE_FEATURE; ++r) {
    EXPECT_STRNE(kiln_reason_string(static_cast<kiln_reason>(r)), "unknown");
  }
}

TEST(NullHandles, AreRefusedNotDereferenced) {
  kiln_archive* a = nullptr;
  kiln_kernel* k = nullptr;
  EXPECT_EQ(kiln_archive_open(nullptr, "x", &a), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_archive_get_kernel(nullptr, "x", 0, &k), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_kernel_launch(nullptr, nullptr, 0, nullptr, nullptr), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_runtime_register_reference(nullptr, "x", nullptr, nullptr), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kiln_kernel_route(nullptr), KILN_ROUTE_REFUSED);
  EXPECT_STREQ(kiln_archive_digest(nullptr), "");  // string getters: "" for NULL, like the kernel's
}

}  // namespace
