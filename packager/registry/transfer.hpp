// Moving one archive to and from a registry as the kiln OCI artifact (oci_manifest.hpp):
// push uploads what is missing and tags it; fetch downloads into a temporary file and leaves it
// there only once every check has passed (schema/STORE.md, "Pushing to and pulling from a
// registry", lists them in order).
#pragma once

#include <cstdint>
#include <string>

#include "client.hpp"
#include "file_io.hpp"
#include "store.hpp"
#include "trust.hpp"

namespace kiln::registry {

struct PushResult {
  store::ArchiveInfo archive;  // the kiln digest, package, revision, sequence, file size
  std::string manifest_digest;
  store::BlobRef layer;
  std::string tag, kiln_tag;
  unsigned blobs_uploaded = 0, blobs_present = 0;
};

// Verifies the archive (every member; with `trust`, its signatures too, at `threshold`) and
// pushes it under `tag` (empty: the archive's kernel_revision, which must then be a valid tag)
// and under store::kiln_digest_tag().
PushResult push_archive(Client& client, const std::string& file, const std::string& tag, const TrustSet* trust,
                        unsigned threshold);

struct FetchOptions {
  const TrustSet* trust = nullptr;  // null: signatures are not checked (the caller says so)
  unsigned threshold = 1;
  std::uint64_t max_blob = 16ull << 30;
};

struct FetchResult {
  store::ArchiveInfo archive;
  std::string manifest_digest;
  store::BlobRef layer;
  unsigned trusted_signers = 0;  // 0 without FetchOptions::trust
};

// Resolves the reference to a manifest, checks it, streams the archive into `out` (hash and
// size checked against the layer's descriptor while it arrives), then opens the written file
// and checks every member, the kiln digest, package, revision and sequence the manifest claims,
// and with `trust` the signatures. On return the bytes in out.temp_path() passed every check;
// the caller commits them (kiln pull) or adds them to a store (kiln store pull). Any failure
// throws, and `out` removes its temporary file as it is destroyed.
FetchResult fetch_archive(Client& client, const Reference& ref, AtomicFileWriter& out, const FetchOptions& options);

}  // namespace kiln::registry
