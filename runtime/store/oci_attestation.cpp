#include "store/oci_attestation.hpp"

#include "core/attestation_facts.hpp"
#include "core/error.hpp"
#include "core/json.hpp"

namespace kiln::store {

std::string attestation_manifest(const BlobRef& subject, const std::string& kiln_digest, const BlobRef& envelope) {
  json::Writer w;
  w.begin_object().field("schemaVersion", 2).field("mediaType", kOciManifestType).field("artifactType", kAttestationArtifactType);
  w.key("config");
  write_descriptor(w, kOciEmptyType, empty_config_blob(), {});
  w.key("layers").begin_array();
  write_descriptor(w, kDsseEnvelopeType, envelope, {});
  w.end_array().key("subject");
  write_descriptor(w, kOciManifestType, subject, {});
  w.key("annotations").begin_object().field("dev.kiln.digest", kiln_digest).end_object().end_object();
  return w.str();
}

AttestationArtifact read_attestation_manifest(const std::string& bytes, const std::string& where) {
  json::Value m = json::parse(bytes, where);
  auto bad = [&](const std::string& why) { fail(Errc::malformed, where + ": " + why); };
  const std::int64_t* version = m.get_number("schemaVersion");
  const std::string* type = m.get_string("mediaType");
  const std::string* artifact = m.get_string("artifactType");
  if (version == nullptr || *version != 2 || type == nullptr || *type != kOciManifestType) bad("not an OCI image manifest");
  if (artifact == nullptr || *artifact != kAttestationArtifactType) bad("not a kiln attestation artifact");
  const json::Value* config = m.get("config");
  if (config == nullptr || config->get_string("mediaType") == nullptr || *config->get_string("mediaType") != kOciEmptyType) {
    bad("its config is not the empty descriptor");
  }
  BlobRef c = read_descriptor(*config, where + " config", 2);
  if (c.digest != empty_config_blob().digest) bad("its config is not the empty descriptor");
  const json::Value* layers = m.get("layers");
  if (layers == nullptr || layers->type != json::Value::Type::array || layers->array.size() != 1) bad("needs exactly one layer");
  const std::string* layer_type = layers->array[0].get_string("mediaType");
  if (layer_type == nullptr || *layer_type != kDsseEnvelopeType) bad(std::string("its layer is not a ") + kDsseEnvelopeType);
  AttestationArtifact a;
  a.envelope = read_descriptor(layers->array[0], where + " layer", kMaxAttestationBytes);
  const json::Value* subject = m.get("subject");
  if (subject == nullptr) bad("has no subject");
  a.subject = read_descriptor(*subject, where + " subject", kMaxOciManifest);
  const json::Value* annotations = m.get("annotations");
  const std::string* kiln = annotations != nullptr ? annotations->get_string("dev.kiln.digest") : nullptr;
  if (kiln == nullptr) bad("annotation dev.kiln.digest missing");
  a.kiln_digest = *kiln;
  return a;
}

std::string referrers_index(const std::vector<Referrer>& referrers) {
  json::Writer w;
  w.begin_object().field("schemaVersion", 2).field("mediaType", kOciIndexType).key("manifests").begin_array();
  for (const Referrer& r : referrers) {
    w.begin_object().field("mediaType", kOciManifestType).field("digest", r.manifest.digest).field("size", r.manifest.size);
    w.field("artifactType", r.artifact_type).end_object();
  }
  w.end_array().end_object();
  return w.str();
}

std::vector<Referrer> read_referrers_index(const std::string& bytes, const std::string& where) {
  json::Value index = json::parse(bytes, where);
  const std::string* type = index.get_string("mediaType");
  const json::Value* manifests = index.get("manifests");
  if (type == nullptr || *type != kOciIndexType || manifests == nullptr || manifests->type != json::Value::Type::array) {
    fail(Errc::malformed, where + ": not an OCI image index");
  }
  if (manifests->array.size() > kMaxReferrers) {
    fail(Errc::limit, where + ": " + std::to_string(manifests->array.size()) + " referrers, over the " +
                          std::to_string(kMaxReferrers) + " read");
  }
  std::vector<Referrer> out;
  for (std::size_t i = 0; i < manifests->array.size(); ++i) {
    const json::Value& d = manifests->array[i];
    Referrer r;
    r.manifest = read_descriptor(d, where + " manifests[" + std::to_string(i) + "]", kMaxOciManifest);
    const std::string* artifact = d.get_string("artifactType");
    r.artifact_type = artifact != nullptr ? *artifact : "";
    out.push_back(std::move(r));
  }
  return out;
}

std::string referrers_tag(const std::string& manifest_digest) { return "sha256-" + manifest_digest.substr(7); }

}  // namespace kiln::store
