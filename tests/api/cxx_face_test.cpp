// The C++ face (include/kiln/kiln.hpp) on the build's test archives: owners and the kernel view,
// kiln::Error with the statuses kiln.h documents and libkiln's messages, the "size query, then
// fill" buffers as strings and vectors, and references as C++ callables. The runtimes load no CUDA
// driver (they are pointed at a library that does not exist), so every kernel takes the
// reference route on any machine, GPU or not.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "api_test_env.hpp"
#include "cxx_test_support.hpp"
#include "kiln/kiln.hpp"

namespace {

using kiln_test::archives;
using kiln_test::keys;

static_assert(!std::is_copy_constructible_v<kiln::Runtime> && !std::is_copy_assignable_v<kiln::Runtime>);
static_assert(!std::is_copy_constructible_v<kiln::Archive> && !std::is_copy_assignable_v<kiln::Archive>);
static_assert(!std::is_copy_constructible_v<kiln::Package> && !std::is_copy_assignable_v<kiln::Package>);
static_assert(std::is_nothrow_move_constructible_v<kiln::Runtime> && std::is_nothrow_move_assignable_v<kiln::Runtime>);
static_assert(std::is_nothrow_move_constructible_v<kiln::Archive> && std::is_nothrow_move_assignable_v<kiln::Archive>);
static_assert(std::is_nothrow_move_constructible_v<kiln::Package> && std::is_nothrow_move_assignable_v<kiln::Package>);
static_assert(std::is_trivially_copyable_v<kiln::Kernel>, "a borrowed kernel is a view: copying it owns nothing");
static_assert(std::is_base_of_v<std::runtime_error, kiln::Error>);
static_assert(KILN_HPP_VERSION_NUMBER <= KILN_VERSION_NUMBER);

using kiln_test::driverless_options;
using kiln_test::kNoDriver;

std::string scale_path() { return archives() + "/scale.kiln"; }

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

using kiln_test::contains;
using kiln_test::error_from;

// A reference callable holding `token`, so that its use count says how many such are alive.
kiln::ReferenceFunction holding(const std::shared_ptr<int>& token) {
  return [token](const kiln_call_info&, void* const*, std::size_t, void*) { return *token; };
}

TEST(CxxFace, VersionOfTheLoadedLibraryIsTheHeaders) {
  EXPECT_EQ(kiln::version(), static_cast<unsigned>(KILN_VERSION_NUMBER));
  EXPECT_EQ(kiln::version_string(), std::to_string(KILN_VERSION_MAJOR) + "." + std::to_string(KILN_VERSION_MINOR) + "." +
                                        std::to_string(KILN_VERSION_PATCH));
  EXPECT_STREQ(kiln::to_string(KILN_ERR_SIGNATURE), kiln_status_string(KILN_ERR_SIGNATURE));
}

TEST(CxxFace, OpensAGoodArchiveFromPathAndMemory) {
  kiln::Runtime rt(driverless_options());
  ASSERT_TRUE(rt);
  kiln::Archive archive(rt, scale_path());
  ASSERT_TRUE(archive);
  EXPECT_EQ(archive.digest().rfind("sha256:", 0), 0u) << archive.digest();
  EXPECT_EQ(archive.package(), "scale");
  EXPECT_EQ(archive.revision(), "test-1");
  EXPECT_EQ(archive.sequence(), 4u);
  EXPECT_EQ(archive.kernel_names(), (std::vector<std::string>{"scale", "scale_strict"}));
  EXPECT_THROW(archive.kernel_name(2), std::out_of_range);

  std::vector<char> bytes = read_file(scale_path());
  kiln::Archive from_memory = kiln::Archive::from_memory(rt, bytes.data(), bytes.size());
  bytes.assign(bytes.size(), 0);  // libkiln copied them
  EXPECT_EQ(from_memory.digest(), archive.digest());
  EXPECT_EQ(rt.stats().archives_opened, 2u);
}

TEST(CxxFace, AKernelWithoutADriverTakesTheReferenceRouteAndSaysWhy) {
  kiln::Runtime rt(driverless_options());
  kiln::Archive archive(rt, scale_path());
  kiln::Kernel kernel = archive.kernel("scale", 0);
  ASSERT_TRUE(kernel);
  EXPECT_EQ(kernel.route(), KILN_ROUTE_REFERENCE);
  EXPECT_EQ(kernel.reason(), KILN_REASON_NO_DRIVER);
  EXPECT_TRUE(contains(kernel.reason_text(), kNoDriver)) << kernel.reason_text();
  EXPECT_EQ(kernel.target(), "");
  EXPECT_EQ(kernel.name(), "scale");
  EXPECT_EQ(kernel.archive_digest(), archive.digest());
  EXPECT_EQ(kernel.package(), "scale");
  EXPECT_EQ(kernel.revision(), "test-1");
  EXPECT_EQ(archive.kernel("scale", 0).get(), kernel.get()) << "one resolution per device, lent again";

  const std::vector<kiln::Param> params = kernel.params();
  ASSERT_EQ(params.size(), 4u);
  EXPECT_EQ(params[0].name, "y");
  EXPECT_TRUE(params[0].is_pointer);
  EXPECT_EQ(params[0].dtype, KILN_DTYPE_F32);
  EXPECT_EQ(params[0].access, kiln::Access::write);
  EXPECT_EQ(params[1].access, kiln::Access::read);
  EXPECT_EQ(params[3].name, "n");
  EXPECT_FALSE(params[3].is_pointer);
  EXPECT_EQ(params[3].dtype, KILN_DTYPE_U32);
  kiln::Error past_end = error_from([&] { kernel.param(4); });
  EXPECT_EQ(past_end.status(), KILN_ERR_INVALID_ARGUMENT);

  kiln::Error missing = error_from([&] { archive.kernel("no_such_kernel"); });
  EXPECT_EQ(missing.status(), KILN_ERR_NOT_FOUND);
  EXPECT_TRUE(contains(missing.what(), "no_such_kernel")) << missing.what();
}

TEST(CxxFace, AMissingArchiveIsAnIoErrorNamingItsPath) {
  kiln::Runtime rt(driverless_options());
  const std::string path = archives() + "/no-such-archive-for-the-cxx-face.kiln";
  kiln::Error e = error_from([&] { kiln::Archive opened(rt, path); });
  EXPECT_EQ(e.status(), KILN_ERR_IO);
  EXPECT_TRUE(contains(e.what(), path)) << e.what();
  // The runtime's own record of it agrees (read on this thread, which made the call).
  EXPECT_EQ(rt.last_error(), e.what());
  EXPECT_EQ(rt.stats().archive_open_failures, 1u);
}

TEST(CxxFace, AFailedRuntimeCreationThrowsWhatLibkilnSaid) {
  const std::string trust = keys() + "/no-such-key-for-the-cxx-face.pub";
  kiln::Error unreadable = error_from([&] { kiln::Runtime(kiln::RuntimeOptions().trust_path(trust)); });
  EXPECT_EQ(unreadable.status(), KILN_ERR_IO);
  EXPECT_TRUE(contains(unreadable.what(), trust)) << unreadable.what();
  kiln::Error no_trust = error_from([] { kiln::Runtime{kiln::RuntimeOptions()}; });
  EXPECT_EQ(no_trust.status(), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(no_trust.what(), "trust_path")) << no_trust.what();
  kiln::Error unsigned_ok = error_from([] { kiln::Runtime(driverless_options().signature_threshold(0)); });
  EXPECT_EQ(unsigned_ok.status(), KILN_ERR_INVALID_ARGUMENT);
}

TEST(CxxFace, TamperedAndUnsignedArchivesAreRefusedWithTheirStatus) {
  kiln::Runtime rt(driverless_options());
  const std::vector<char> good = read_file(scale_path());
  ASSERT_GT(good.size(), 200u);
  std::uint64_t index_offset = 0, index_size = 0;
  std::memcpy(&index_offset, good.data() + 16, 8);  // header fields, little-endian (FORMAT.md §2)
  std::memcpy(&index_size, good.data() + 24, 8);
  ASSERT_LT(index_offset + index_size, good.size());

  // A byte of the index head changes the digest, so the signature no longer covers it.
  std::vector<char> head_changed = good;
  head_changed[index_offset + 30] ^= 1;
  kiln::Error head = error_from([&] { kiln::Archive::from_memory(rt, head_changed.data(), head_changed.size()); });
  EXPECT_EQ(head.status(), KILN_ERR_SIGNATURE);
  EXPECT_TRUE(contains(head.what(), "signature check failed")) << head.what();

  // A byte of the index page that holds the kernel's record no longer matches the digest the head
  // holds for it: the open reads no index page (FORMAT.md §3), the kernel's lookup refuses it.
  std::vector<char> page_changed = good;
  const std::size_t at = std::string(good.begin(), good.end()).rfind("kiln/kernels/scale");
  ASSERT_NE(at, std::string::npos);
  ASSERT_GT(at, index_offset);
  page_changed[at + 5] ^= 1;
  kiln::Archive changed = kiln::Archive::from_memory(rt, page_changed.data(), page_changed.size());
  kiln::Error page = error_from([&] { changed.kernel("scale"); });
  EXPECT_EQ(page.status(), KILN_ERR_INTEGRITY);
  EXPECT_TRUE(contains(page.what(), "its bytes do not match the SHA-256 its reference gives")) << page.what();

  // The same archive with its signature block replaced by an empty one (FORMAT.md §5: count 0,
  // well formed, an unsigned archive).
  std::vector<char> unsigned_archive(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(index_offset + index_size));
  const char block[12] = {'K', 'I', 'L', 'N', 'S', 'I', 'G', '1', 0, 0, 0, 0};
  unsigned_archive.insert(unsigned_archive.end(), block, block + sizeof block);
  const std::uint64_t block_size = sizeof block;
  std::memcpy(unsigned_archive.data() + 32, &block_size, 8);
  kiln::Error none = error_from([&] { kiln::Archive::from_memory(rt, unsigned_archive.data(), unsigned_archive.size()); });
  EXPECT_EQ(none.status(), KILN_ERR_SIGNATURE);
  EXPECT_TRUE(contains(none.what(), "no signature")) << none.what();

  EXPECT_EQ(rt.stats().archive_open_failures, 2u);
  EXPECT_EQ(rt.stats().archives_opened, 1u);
}

// libkiln keeps every live handle in a registry and ignores a destroy of one it no longer knows,
// so neither a double destroy nor a leaked handle shows under ASan or LeakSanitizer. What shows
// is a moved-from owner holding NULL, and a runtime's destruction: it releases the references
// set on it, so a callable's captures say when (the owners share one template).
TEST(CxxFace, MovedFromOwnersHoldNothingAndTheKernelViewFollowsTheHandle) {
  auto token = std::make_shared<int>(0);
  kiln::Runtime first(driverless_options());
  kiln_runtime* const raw_runtime = first.get();
  kiln::Runtime rt(driverless_options());
  rt.set_reference("scale", holding(token));
  EXPECT_EQ(token.use_count(), 2);
  rt = std::move(first);  // destroys the runtime rt held, and with it the reference
  EXPECT_EQ(token.use_count(), 1);
  EXPECT_EQ(first.get(), nullptr);  // its destructor now destroys NULL, which kiln.h allows
  EXPECT_FALSE(first);
  EXPECT_EQ(rt.get(), raw_runtime);
  {
    kiln::Runtime scoped(driverless_options());
    scoped.set_reference("scale", holding(token));
    kiln::Runtime taken(std::move(scoped));
    EXPECT_EQ(token.use_count(), 2) << "a move destroys nothing";
  }
  EXPECT_EQ(token.use_count(), 1) << "the runtime was destroyed once its last owner went";

  kiln::Archive opened(rt, scale_path());
  kiln_archive* const raw_archive = opened.get();
  kiln::Kernel kernel = opened.kernel("scale");
  kiln::Archive moved = std::move(opened);
  EXPECT_EQ(opened.get(), nullptr);
  EXPECT_EQ(moved.get(), raw_archive);
  EXPECT_EQ(kernel.route(), KILN_ROUTE_REFERENCE) << "the view lives as long as the archive, not its first owner";

  // A moved-from owner passes NULL on: the getters answer "" and 0 (kiln.h's rule for NULL
  // handles), the calls that return a status throw.
  EXPECT_EQ(opened.digest(), "");
  EXPECT_EQ(opened.kernel_count(), 0u);
  EXPECT_EQ(error_from([&] { opened.kernel("scale"); }).status(), KILN_ERR_INVALID_ARGUMENT);

  // Assigning over an owner destroys what it held.
  kiln::Archive other(rt, scale_path());
  other = std::move(moved);
  EXPECT_EQ(other.get(), raw_archive);
  EXPECT_EQ(moved.get(), nullptr);
  kiln::Archive& self = other;
  other = std::move(self);
  EXPECT_EQ(other.get(), raw_archive) << "a self-move keeps the handle";

  // Owners move about in a container that grows.
  std::vector<kiln::Archive> many;
  for (int i = 0; i < 9; ++i) many.emplace_back(rt, scale_path());
  for (const kiln::Archive& a : many) EXPECT_EQ(a.digest(), other.digest());

  // release() hands the handle to C, which then destroys it.
  kiln_archive* released = other.release();
  EXPECT_EQ(released, raw_archive);
  EXPECT_FALSE(other);
  EXPECT_EQ(kiln_archive_kernel_count(released), 2u);
  kiln_archive_destroy(released);
  // reset() adopts one.
  kiln_archive* adopted = nullptr;
  ASSERT_EQ(kiln_archive_open(rt.get(), scale_path().c_str(), &adopted), KILN_OK);
  other.reset(adopted);
  EXPECT_EQ(other.kernel_count(), 2u);
}

TEST(CxxFace, MembersAndReportsComeThroughTheTwoCallWrappers) {
  kiln::Runtime rt(driverless_options());
  kiln::Archive archive(rt, scale_path());

  const std::string manifest = archive.read_member_text("kiln.toml");
  std::size_t size = 0;
  ASSERT_EQ(kiln_archive_read_member(archive.get(), "kiln.toml", nullptr, 0, &size), KILN_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(manifest.size(), size);
  EXPECT_TRUE(contains(manifest, "[package]")) << manifest;
  EXPECT_TRUE(contains(manifest, "name = \"scale\"")) << manifest;
  const std::vector<std::uint8_t> bytes = archive.read_member("kiln.toml");
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), manifest);
  EXPECT_TRUE(contains(archive.read_member_text("scale.ptx"), ".entry scale_f32"));
  kiln::Error missing = error_from([&] { archive.read_member("no/such/member"); });
  EXPECT_EQ(missing.status(), KILN_ERR_NOT_FOUND);
  EXPECT_TRUE(contains(missing.what(), "no member named 'no/such/member'")) << missing.what();

  const std::string preflight = archive.preflight(0);
  EXPECT_TRUE(contains(preflight, "\"digest\":\"" + archive.digest() + "\"")) << preflight;
  EXPECT_TRUE(contains(preflight, "\"kernel\":\"scale_strict\"")) << preflight;
  const std::string described = archive.preflight_target("sm_90", "12.4");
  EXPECT_TRUE(contains(described, "\"target\":\"sm_90\"")) << described;
  EXPECT_TRUE(contains(described, "compute_80")) << described;
  kiln::Error no_gpu = error_from([&] { archive.preflight_target("sm_999"); });
  EXPECT_EQ(no_gpu.status(), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(no_gpu.what(), "sm_999")) << no_gpu.what();
  EXPECT_EQ(rt.last_error(), no_gpu.what());

  const std::string prometheus = rt.stats_prometheus();
  EXPECT_TRUE(contains(prometheus, "kiln_archives_opened_total 1\n")) << prometheus;
  EXPECT_EQ(prometheus.back(), '\n') << "the terminating NUL is not part of the string";
}

struct Scale {
  float y = 0, x = 3, a = 2;
  unsigned n = 1024;  // a declared shape, so only the missing driver sends the call to the reference
  float* yp = &y;
  float* xp = &x;
};

int plain_reference(const kiln_call_info*, void* const* args, size_t, void*, void*) {
  **static_cast<float**>(args[0]) = -1;
  return 0;
}

TEST(CxxFace, AReferenceCallableRunsAndLibkilnReleasesIt) {
  kiln::Runtime rt(driverless_options());
  kiln::Archive archive(rt, scale_path());
  kiln::Kernel kernel = archive.kernel("scale");
  Scale s;

  auto token = std::make_shared<int>(0);
  std::string reason_seen;
  rt.set_reference("scale", [token, &reason_seen](const kiln_call_info& info, void* const* args, std::size_t n, void*) {
    EXPECT_EQ(n, 4u);
    reason_seen = info.reason_text;
    **static_cast<float**>(args[0]) = *static_cast<float*>(args[2]) * **static_cast<float**>(args[1]);
    return 0;
  });
  EXPECT_EQ(token.use_count(), 2);
  EXPECT_EQ(kernel.launch({&s.yp, &s.xp, &s.a, &s.n}), KILN_ROUTE_REFERENCE);
  EXPECT_EQ(s.y, 6);
  EXPECT_TRUE(contains(reason_seen, kNoDriver)) << reason_seen;
  void* args[] = {&s.yp, &s.xp, &s.a, &s.n};
  const std::size_t sizes[] = {8, 8, 4, 4};
  EXPECT_EQ(kernel.launch_checked(args, sizes, 4), KILN_ROUTE_REFERENCE);
  const std::size_t wrong[] = {8, 8, 4, 8};
  kiln::Error checked = error_from([&] { kernel.launch_checked(args, wrong, 4); });
  EXPECT_EQ(checked.status(), KILN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(checked.what(), "'n'")) << checked.what();
  EXPECT_TRUE(contains(kernel.explain(args, 4), "reference")) << kernel.explain(args, 4);

  // Replacing it releases the first callable (and what it captured) through libkiln.
  rt.set_reference("scale", [](const kiln_call_info&, void* const*, std::size_t, void*) -> int {
    throw std::runtime_error("the host's reference gave up");
  });
  EXPECT_EQ(token.use_count(), 1);
  kiln::Error failed = error_from([&] { kernel.launch(args); });
  EXPECT_EQ(failed.status(), KILN_ERR_REFERENCE_FAILED);
  EXPECT_TRUE(contains(failed.what(), "the host's reference gave up")) << failed.what();

  rt.remove_reference("scale");
  EXPECT_EQ(error_from([&] { kernel.launch(args, 4); }).status(), KILN_ERR_REFUSED);
  rt.register_reference("scale", plain_reference, nullptr);
  EXPECT_EQ(kernel.launch(args), KILN_ROUTE_REFERENCE);
  EXPECT_EQ(s.y, -1);
  EXPECT_EQ(error_from([&] { kernel.launch(args, 3); }).status(), KILN_ERR_INVALID_ARGUMENT);

  const kiln_stats stats = rt.stats();
  EXPECT_EQ(stats.launches_reference, 3u);
  EXPECT_EQ(stats.launches_refused, 1u);
}

TEST(CxxFace, TheStrictKernelIsRefusedWithItsStatus) {
  kiln::Runtime rt(driverless_options());
  kiln::Archive archive(rt, scale_path());
  kiln::Kernel strict = archive.kernel("scale_strict");
  EXPECT_EQ(strict.route(), KILN_ROUTE_REFUSED);
  Scale s;
  rt.set_reference("scale_strict", [](const kiln_call_info&, void* const*, std::size_t, void*) { return 0; });
  kiln::Error e = error_from([&] { strict.launch({&s.yp, &s.xp, &s.a, &s.n}); });
  EXPECT_EQ(e.status(), KILN_ERR_REFUSED);
}

// kiln.h states no particular status for a store that is not there; what matters here is that
// the constructor throws what libkiln said rather than leaving an empty owner behind.
TEST(CxxFace, APackageOfAMissingStoreThrowsNamingTheStore) {
  kiln::Runtime rt(driverless_options());
  const std::string store = archives() + "/no-such-store-for-the-cxx-face";
  kiln::Error e = error_from([&] { kiln::Package package(rt, store, "scale", 0); });
  EXPECT_NE(e.status(), KILN_OK);
  EXPECT_TRUE(contains(e.what(), store)) << e.what();
  kiln::Error witness = error_from([&] { kiln::Package package(rt, store, "scale", 0, "not-a-head"); });
  EXPECT_EQ(witness.status(), KILN_ERR_INVALID_ARGUMENT) << witness.what();
}

}  // namespace
