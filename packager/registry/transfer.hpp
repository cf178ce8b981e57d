// Moving one archive to and from a registry as the kiln OCI artifact (oci_manifest.hpp):
// push uploads what is missing and tags it; fetch downloads into a temporary file and leaves it
// there only once every check has passed (schema/STORE.md, "Pushing to and pulling from a
// registry", lists them in order).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>
#include <string>

#include "core/file_io.hpp"
#include "core/trust.hpp"
#include "registry/client.hpp"
#include "store/store.hpp"

namespace kiln::registry {

struct PushResult {
  store::ArchiveInfo archive;  // the kiln digest, package, revision, sequence, file size
  std::string manifest_digest;
  std::uint64_t manifest_size = 0;
  store::BlobRef layer;
  std::string tag, kiln_tag;
  unsigned blobs_uploaded = 0, blobs_present = 0;
  unsigned attestations = 0;
  std::string moved_from;  // the kiln digest `tag` named before this push, when another one
  std::string referrers;  // how the attestations are found: "the referrers API" or the tag schema's tag
};

// Verifies the archive (every member; with `trust`, its signatures too, at `threshold`) and
// pushes it under `tag` (empty: the archive's kernel_revision, which must then be a valid tag)
// and under store::kiln_digest_tag(). Then each attestation (the envelopes' bytes, `names` what
// to call them in errors), whose subject must be this archive (checked before anything is
// uploaded), as an artifact whose OCI subject is the archive's manifest; a registry that does not
// answer with OCI-Subject also gets the referrers index under store::referrers_tag().
// A tag that names another kiln archive is moved (said in moved_from), or with `keep_tags` refused
// before anything is uploaded.
PushResult push_archive(Client& client, const std::string& file, const std::string& tag, const TrustSet* trust,
                        unsigned threshold, const std::vector<std::string>& attestations = {},
                        const std::vector<std::string>& names = {}, bool keep_tags = false);

// The attestations a registry holds for the archive whose manifest is `manifest_digest`: found
// through the referrers API, else the tag schema's index; each listed manifest of the kiln
// attestation type read strictly (its subject that manifest), its envelope fetched and checked
// against its descriptor, and kept only if it is kiln's attestation of `kiln_digest` (its
// signatures are the store's policy's to judge). The others are listed in `ignored`, with why.
constexpr std::size_t kMaxAttestationsFetched = 16;  // each up to kMaxAttestationBytes
struct FetchedAttestations {
  std::vector<std::string> envelopes;
  std::vector<std::string> ignored;
};
FetchedAttestations fetch_attestations(Client& client, const std::string& manifest_digest, const std::string& kiln_digest);

// A sparse pull's choice (FORMAT.md §9): given the archive fetched so far (a sparse archive
// holding its index, its signatures, kiln.toml and every meta member: the kernel table), the
// index positions of the other members to fetch.
using MemberChoice = std::function<std::vector<std::size_t>(std::vector<std::uint8_t> partial)>;

struct FetchOptions {
  const TrustSet* trust = nullptr;  // null: signatures are not checked (the caller says so)
  unsigned threshold = 1;
  std::uint64_t max_blob = 16ull << 30;
  MemberChoice choose;  // set: a sparse pull with HTTP range requests; empty: the whole archive
};

struct FetchResult {
  store::ArchiveInfo archive;  // archive.sparse: what was written is a sparse archive
  std::string manifest_digest;
  store::BlobRef layer;
  unsigned trusted_signers = 0;  // 0 without FetchOptions::trust
  // A sparse pull the registry could not serve (it ignores Range): why it downloaded the whole.
  std::string whole_because;
};

// Resolves the reference to a manifest, checks it, streams the archive into `out` (hash and
// size checked against the layer's descriptor while it arrives), then opens the written file
// and checks every member, the kiln digest, package, revision and sequence the manifest claims,
// and with `trust` the signatures. With options.choose, it fetches with range requests only the
// header, the index and signatures (their digest and signatures checked before the index is
// parsed), the meta members and the members chosen, and writes a sparse archive, checked the
// same way (every member it holds); a registry that ignores Range gets a whole download. On return the bytes in out.temp_path() passed every check;
// the caller commits them (kiln pull) or adds them to a store (kiln store pull). Any failure
// throws, and `out` removes its temporary file as it is destroyed.
FetchResult fetch_archive(Client& client, const Reference& ref, AtomicFileWriter& out, const FetchOptions& options);

}  // namespace kiln::registry
