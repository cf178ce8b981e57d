// The one OCI artifact a kiln archive travels as, built and read in one place: the image layout
// that `kiln store export --oci` writes and the manifests `kiln push` puts in a registry are the
// same bytes, and `kiln pull` reads them back with the checks below (schema/STORE.md, "OCI
// distribution"). No I/O here: the caller hashes the archive file and moves the bytes.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/json.hpp"
#include "store/store.hpp"

namespace kiln::store {

constexpr const char* kArchiveMediaType = "application/vnd.kiln.archive.v2";
constexpr const char* kOciManifestType = "application/vnd.oci.image.manifest.v1+json";
constexpr const char* kOciIndexType = "application/vnd.oci.image.index.v1+json";
constexpr const char* kOciEmptyType = "application/vnd.oci.empty.v1+json";
constexpr const char* kOciEmptyConfig = "{}";  // the empty config's bytes (OCI image spec 1.1)
constexpr std::uint64_t kMaxOciManifest = 4u << 20;  // OCI's recommended manifest bound

struct BlobRef {
  std::string digest;  // sha256:<64 lowercase hex>
  std::uint64_t size = 0;
};

using Annotations = std::vector<std::pair<std::string, std::string>>;

// What an artifact says about its archive: the title, the kiln digest, package, revision and
// sequence, in this order (manifest and layer carry the same set).
Annotations artifact_annotations(const ArchiveInfo& archive);

BlobRef empty_config_blob();

// One OCI descriptor {mediaType, digest, size, annotations?} written into `w`.
void write_descriptor(json::Writer& w, const std::string& media_type, const BlobRef& blob, const Annotations& annotations);
// A descriptor's digest and size read back: the digest grammar first, the size non-negative and
// at most `max` (Errc::limit above it), each refusal naming `where`.
BlobRef read_descriptor(const json::Value& d, const std::string& where, std::uint64_t max);

// The manifest's exact bytes for an archive whose file is `layer` (the SHA-256 of the whole
// .kiln file and its size). Deterministic: the same archive always gives the same manifest digest.
std::string artifact_manifest(const ArchiveInfo& archive, const BlobRef& layer);

// What a manifest served by someone else says, once checked.
struct ArtifactClaims {
  BlobRef config, layer;
  std::string kiln_digest;  // dev.kiln.digest
  std::string package, kernel_revision;
  std::uint64_t sequence = 0;
};

// Reads a manifest a registry or a layout served (`where` names it in every error): an OCI image
// manifest, schemaVersion 2, the empty config, exactly one layer of the kiln archive media type
// (at most `max_layer` bytes), every digest sha256:<64 lowercase hex>, and the dev.kiln.*
// annotations present, well formed and equal on the manifest and the layer. Anything else is
// refused (Errc::malformed, or Errc::unsupported for another kind of artifact), naming what.
// The caller bounds the bytes (kMaxOciManifest) and, when it asked by digest, hashes them first.
ArtifactClaims read_artifact_manifest(const std::string& bytes, const std::string& where, std::uint64_t max_layer);

// The tag `kiln push` also writes for each archive, so that `kiln pull REPO@kiln:sha256:<hex>`
// finds it without listing tags: "kiln-<64 hex of the kiln digest>" (69 characters, a valid tag).
std::string kiln_digest_tag(const std::string& kiln_digest);

}  // namespace kiln::store
