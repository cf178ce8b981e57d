// libFuzzer target: an archive opened and verified the way `kiln inspect` (no trust set) and
// libkiln (a trust set, one signer required) do. Whatever the bytes, the reader must answer
// with a kiln::Failure or success: any other exception, crash or sanitizer report is a bug.
//
// No fuzzer forges Ed25519, so a mutated archive almost never passes the signature check and
// the authenticated path (the one libkiln takes) would stay shallow. So every input that the
// unauthenticated reader accepts as far as its index is re-signed here with a key this process
// made, its signature block replaced, and opened again against that key: the fuzzer then
// explores what a *validly signed* hostile archive can do, which is what a stolen or careless
// signing key would let an attacker ship.
// KILN_FUZZ_TRUST also names a public key (the tests' test.pub) for the archives as given.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/archive_reader.hpp"
#include "core/archive_writer.hpp"
#include "core/ed25519.hpp"
#include "core/error.hpp"
#include "core/format.hpp"
#include "core/trust.hpp"

namespace {

const kiln::TrustSet* given_trust_set() {
  static std::optional<kiln::TrustSet> trust = []() -> std::optional<kiln::TrustSet> {
    const char* path = std::getenv("KILN_FUZZ_TRUST");
    if (path == nullptr) return std::nullopt;
    return kiln::TrustSet::load(path);
  }();
  return trust ? &*trust : nullptr;
}

struct ResigningKey {
  kiln::PrivateKey key = kiln::PrivateKey::generate();
  kiln::TrustSet trust;
  ResigningKey() { trust.add(key.public_key(), "fuzz re-signing key"); }
};

const ResigningKey& resigning_key() {
  static const ResigningKey k;
  return k;
}

// Opens and verifies; returns the archive's bytes re-signed by the fuzz key when the
// unauthenticated open got as far as a digest, package and sequence, else nothing.
std::optional<std::vector<std::uint8_t>> open_and_verify(const std::uint8_t* data, std::size_t size,
                                                         const kiln::TrustSet* trust) {
  kiln::ReadOptions options;
  options.policy = kiln::TrustPolicy{trust, 1};
  options.max_member_size = 64u << 20;  // keeps each run fast; the cap itself is under test too
  std::unique_ptr<kiln::ArchiveReader> archive;
  try {
    archive = kiln::ArchiveReader::open_memory(data, size, options);
  } catch (const kiln::Failure&) {
    return std::nullopt;  // refused with a reason: the expected outcome for nearly every input
  }
  std::optional<std::vector<std::uint8_t>> resigned;
  if (trust == nullptr) try {
    const kiln::format::Header& h = archive->header();
    const std::size_t signed_end = static_cast<std::size_t>(h.index_offset + h.index_size);
    kiln::Signer signer{&resigning_key().key, "fuzz", 0};
    kiln::format::SignatureRecord record =
        kiln::make_signature(archive->digest(), archive->index().package, archive->index().sequence, signer);
    std::vector<std::uint8_t> block = kiln::format::encode_signature_block({record});
    kiln::format::Header header = h;
    header.signature_block_size = block.size();
    std::vector<std::uint8_t> out = kiln::format::encode_header(header);
    out.insert(out.end(), data + out.size(), data + signed_end);
    out.insert(out.end(), block.begin(), block.end());
    resigned = std::move(out);
  } catch (const kiln::Failure&) {
    // make_signature refuses what the writer would never sign; the reader let it through
  }
  try {
    // What the runtime decodes: every kernel's record (through the paged index), and its code as
    // the record's copies of the entries give it (FORMAT.md §4.1), then what a full verification
    // checks.
    for (const std::string& name : archive->kernel_names()) {
      const kiln::KernelSpec k = archive->kernel(name);
      for (const kiln::CodeObjectRef& c : k.code) {
        try {
          if (c.member) (void)archive->read_member(*c.member);
        } catch (const kiln::Failure&) {
        }
      }
    }
  } catch (const kiln::Failure&) {
  }
  try {
    // Both levels, one per input (its size's parity), so that each costs one verification: the
    // default one reads code objects from the bytes it holds of them and walks compressed frames,
    // --deep decodes every member.
    archive->verify_all(1, size % 2 == 0, nullptr);
    (void)archive->manifest();
  } catch (const kiln::Failure&) {
  }
  return resigned;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<std::vector<std::uint8_t>> resigned = open_and_verify(data, size, nullptr);
  if (const kiln::TrustSet* trust = given_trust_set()) open_and_verify(data, size, trust);
  if (resigned) open_and_verify(resigned->data(), resigned->size(), &resigning_key().trust);
  return 0;
}
