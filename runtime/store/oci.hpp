// OCI image layout export and import (oci-layout, index.json, blobs/sha256/...), so archives
// travel by digest through the registries and tools a fleet already runs (oras, skopeo).
// Each archive is one artifact: a manifest with artifactType application/vnd.kiln.archive.v2,
// the empty config, and the .kiln file as its one layer. Import follows OCI's rules: the digest
// grammar is checked, the size before hashing, the hash before any use; descriptors of media
// types kiln does not know are skipped and reported, not refused.
#pragma once

#include <string>
#include <vector>

#include "store/oci_attestation.hpp"
#include "store/oci_manifest.hpp"
#include "store/store.hpp"

namespace kiln::store {

// Writes the store's archives (all, or those named) as an OCI layout at `dir` (new or empty).
std::vector<std::string> export_oci(const Store& store, const std::string& dir, const std::vector<std::string>& digests);

struct ImportResult {
  std::vector<ArchiveInfo> imported;
  std::size_t attestations = 0;  // kept beside the archives they attest (Store::attest)
  std::vector<std::string> skipped;  // what was not imported, and why
};
// Reads the OCI layout at `dir` and adds every kiln archive in it to the store (each verified
// against the store's keys, as `kiln store add` does).
ImportResult import_oci(Store& store, const std::string& dir);

}  // namespace kiln::store
