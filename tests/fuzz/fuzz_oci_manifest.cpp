// libFuzzer target: the reader of OCI manifests a registry or a layout served (kiln pull, store
// pull), and what it accepts turned back into a manifest, which must read back with the same
// digests, sizes and sequence (the free-text claims may differ: the writer replaces bytes that
// are not UTF-8, and pull compares them with the archive's own anyway).
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "store/oci_manifest.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    kiln::store::ArtifactClaims c = kiln::store::read_artifact_manifest(bytes, "fuzz.json", 1ull << 40);
    kiln::store::ArchiveInfo a{c.kiln_digest, c.package, c.kernel_revision, c.sequence, c.layer.size};
    kiln::store::ArtifactClaims again =
        kiln::store::read_artifact_manifest(kiln::store::artifact_manifest(a, c.layer), "rebuilt", 1ull << 40);
    if (again.kiln_digest != c.kiln_digest || again.layer.digest != c.layer.digest || again.layer.size != c.layer.size ||
        again.sequence != c.sequence) {
      __builtin_trap();  // what kiln accepts, kiln must write back the same
    }
  } catch (const kiln::Failure&) {
  }
  return 0;
}
