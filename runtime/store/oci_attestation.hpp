// Attestations as OCI artifacts beside the archive they attest (schema/STORE.md, "Attestations
// in a registry"): one image manifest per attestation, its layer the DSSE envelope, its
// `subject` the archive's manifest (OCI 1.1 referrers), and the referrers index a registry
// without the referrers API is given under the tag schema's tag. No I/O here.
#pragma once

#include <string>
#include <vector>

#include "store/oci_manifest.hpp"

namespace kiln::store {

constexpr const char* kAttestationArtifactType = "application/vnd.kiln.attestation.v1+json";
constexpr const char* kDsseEnvelopeType = "application/vnd.dsse.envelope.v1+json";
constexpr std::size_t kMaxReferrers = 256;  // entries read from a referrers index

// The manifest of one attestation of the archive whose manifest is `subject`.
std::string attestation_manifest(const BlobRef& subject, const std::string& kiln_digest, const BlobRef& envelope);

struct AttestationArtifact {
  BlobRef subject, envelope;
  std::string kiln_digest;
};
// Reads an attestation manifest strictly (Errc::malformed naming `where`): an OCI image manifest
// of the kiln attestation artifact type, the empty config, exactly one layer of the DSSE media
// type of at most kMaxAttestationBytes, a subject, and the dev.kiln.digest annotation.
AttestationArtifact read_attestation_manifest(const std::string& bytes, const std::string& where);

struct Referrer {
  BlobRef manifest;
  std::string artifact_type;
};
// An OCI image index of referrers, as the referrers API returns it and as the tag schema stores it.
std::string referrers_index(const std::vector<Referrer>& referrers);
// Its entries (at most kMaxReferrers), each a manifest descriptor; Errc::malformed naming `where`.
std::vector<Referrer> read_referrers_index(const std::string& bytes, const std::string& where);
// The tag schema's tag for a subject manifest digest: "sha256-<64 hex>".
std::string referrers_tag(const std::string& manifest_digest);

}  // namespace kiln::store
