// libFuzzer target: an archive opened and verified the way `kiln inspect` (no trust set) and
// libkiln (a trust set, one signer required) do. Whatever the bytes, the reader must answer
// with a kiln::Error or success: any other exception, crash or sanitizer report is a bug.
// KILN_FUZZ_TRUST names the public key for the authenticated pass (the tests' test.pub).
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>

#include "archive_reader.hpp"
#include "error.hpp"
#include "trust.hpp"

namespace {

const kiln::TrustSet* trust_set() {
  static std::optional<kiln::TrustSet> trust = []() -> std::optional<kiln::TrustSet> {
    const char* path = std::getenv("KILN_FUZZ_TRUST");
    if (path == nullptr) return std::nullopt;
    return kiln::TrustSet::load(path);
  }();
  return trust ? &*trust : nullptr;
}

void open_and_verify(const std::uint8_t* data, std::size_t size, const kiln::TrustSet* trust) {
  kiln::ReadOptions options;
  options.policy = kiln::TrustPolicy{trust, 1};
  options.max_member_size = 64u << 20;  // keeps each run fast; the cap itself is under test too
  try {
    std::unique_ptr<kiln::Archive> archive = kiln::Archive::open_memory(data, size, options);
    archive->verify_all(1, true, nullptr);
  } catch (const kiln::Error&) {
    // refused with a reason: the expected outcome for nearly every input
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  open_and_verify(data, size, nullptr);
  if (const kiln::TrustSet* trust = trust_set()) open_and_verify(data, size, trust);
  return 0;
}
