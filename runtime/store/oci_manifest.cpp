#include "store/oci_manifest.hpp"

#include "core/error.hpp"
#include "core/json.hpp"
#include "core/sha256.hpp"

namespace kiln::store {

void write_descriptor(json::Writer& w, const std::string& media_type, const BlobRef& blob, const Annotations& annotations) {
  w.begin_object().field("mediaType", media_type).field("digest", blob.digest).field("size", blob.size);
  if (!annotations.empty()) {
    w.key("annotations").begin_object();
    for (const auto& [name, value] : annotations) w.field(name, value);
    w.end_object();
  }
  w.end_object();
}

BlobRef read_descriptor(const json::Value& d, const std::string& where, std::uint64_t max) {
  if (d.type != json::Value::Type::object) fail(Errc::malformed, where + ": not a descriptor (a JSON object)");
  const std::string* digest = d.get_string("digest");
  if (digest == nullptr || !is_digest_string(*digest)) fail(Errc::malformed, where + ": digest is not sha256:<64 lowercase hex>");
  const std::int64_t* size = d.get_number("size");
  if (size == nullptr || *size < 0) fail(Errc::malformed, where + ": size missing or negative");
  if (static_cast<std::uint64_t>(*size) > max) {
    fail(Errc::limit, where + ": " + *digest + " is " + std::to_string(*size) + " bytes, over the limit of " +
                          std::to_string(max));
  }
  return BlobRef{*digest, static_cast<std::uint64_t>(*size)};
}

namespace {

// Unsigned decimal as the store writes it: no sign, no leading zero, at most 20 digits, fits 64 bits.
bool parse_sequence(const std::string& s, std::uint64_t* out) {
  if (s.empty() || s.size() > 20 || (s.size() > 1 && s[0] == '0')) return false;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  *out = v;
  return true;
}

const std::string& required_string(const json::Value* annotations, const char* name, const std::string& where) {
  const std::string* s = annotations == nullptr ? nullptr : annotations->get_string(name);
  if (s == nullptr) fail(Errc::malformed, where + ": annotation " + name + " missing");
  return *s;
}

}  // namespace

Annotations artifact_annotations(const ArchiveInfo& a) {
  return {{"org.opencontainers.image.title", a.package + ".kiln"},
          {"dev.kiln.digest", a.digest},
          {"dev.kiln.package", a.package},
          {"dev.kiln.kernel_revision", a.kernel_revision},
          {"dev.kiln.sequence", std::to_string(a.sequence)}};
}

BlobRef empty_config_blob() {
  std::string bytes = kOciEmptyConfig;
  return BlobRef{digest_string(sha256(bytes.data(), bytes.size())), bytes.size()};
}

std::string artifact_manifest(const ArchiveInfo& archive, const BlobRef& layer) {
  const Annotations notes = artifact_annotations(archive);
  json::Writer m;
  m.begin_object().field("schemaVersion", 2).field("mediaType", kOciManifestType).field("artifactType", kArchiveMediaType);
  write_descriptor(m.key("config"), kOciEmptyType, empty_config_blob(), {});
  write_descriptor(m.key("layers").begin_array(), kArchiveMediaType, layer, notes);
  m.end_array().key("annotations").begin_object();
  for (const auto& [name, value] : notes) m.field(name, value);
  m.end_object().end_object();
  return m.str();
}

ArtifactClaims read_artifact_manifest(const std::string& bytes, const std::string& where, std::uint64_t max_layer) {
  if (bytes.size() > kMaxOciManifest) {
    fail(Errc::limit, where + ": manifest of " + std::to_string(bytes.size()) + " bytes, over the limit of " +
                          std::to_string(kMaxOciManifest));
  }
  json::Value m = json::parse(bytes, where);
  if (m.type != json::Value::Type::object) fail(Errc::malformed, where + ": not a JSON object");
  const std::int64_t* version = m.get_number("schemaVersion");
  if (version == nullptr || *version != 2) fail(Errc::malformed, where + ": schemaVersion is not 2");
  const std::string* type = m.get_string("mediaType");
  if (type == nullptr || *type != kOciManifestType) {
    fail(Errc::unsupported, where + ": media type " + (type ? "'" + *type + "'" : std::string("(none)")) + " is not " +
                                kOciManifestType + " (an image index or a Docker manifest is not a kiln artifact)");
  }
  const std::string* artifact_type = m.get_string("artifactType");
  if (artifact_type != nullptr && *artifact_type != kArchiveMediaType) {
    fail(Errc::unsupported, where + ": artifactType '" + *artifact_type + "' is not " + kArchiveMediaType);
  }
  ArtifactClaims c;
  const json::Value* config = m.get("config");
  if (config == nullptr) fail(Errc::malformed, where + ": no config descriptor");
  c.config = read_descriptor(*config, where + " config", kMaxOciManifest);
  const std::string* config_type = config->get_string("mediaType");
  if (config_type == nullptr || *config_type != kOciEmptyType) {
    fail(Errc::unsupported, where + ": config media type is not " + kOciEmptyType + " (not a kiln artifact)");
  }
  BlobRef empty = empty_config_blob();
  if (c.config.digest != empty.digest || c.config.size != empty.size) {
    fail(Errc::malformed, where + ": the config is not the empty blob " + empty.digest + " of 2 bytes");
  }
  const json::Value* layers = m.get("layers");
  if (layers == nullptr || layers->type != json::Value::Type::array) fail(Errc::malformed, where + ": no layers array");
  const json::Value* layer = nullptr;
  for (std::size_t i = 0; i < layers->array.size(); ++i) {
    const std::string* lt = layers->array[i].get_string("mediaType");
    if (lt == nullptr || *lt != kArchiveMediaType) continue;
    if (layer != nullptr) fail(Errc::malformed, where + ": more than one layer of media type " + kArchiveMediaType);
    layer = &layers->array[i];
  }
  if (layer == nullptr) fail(Errc::unsupported, where + ": no layer of media type " + std::string(kArchiveMediaType));
  c.layer = read_descriptor(*layer, where + " layer", max_layer);
  // The claims, from the manifest's annotations; the layer's must say the same.
  const json::Value* notes = m.get("annotations");
  const json::Value* layer_notes = layer->get("annotations");
  for (const char* name : {"dev.kiln.digest", "dev.kiln.package", "dev.kiln.kernel_revision", "dev.kiln.sequence"}) {
    const std::string& value = required_string(notes, name, where);
    if (layer_notes != nullptr && layer_notes->get(name) != nullptr && required_string(layer_notes, name, where) != value) {
      fail(Errc::malformed, where + ": annotation " + name + " differs between the manifest ('" + value +
                                "') and its layer ('" + required_string(layer_notes, name, where) + "')");
    }
  }
  c.kiln_digest = required_string(notes, "dev.kiln.digest", where);
  if (!is_digest_string(c.kiln_digest)) fail(Errc::malformed, where + ": annotation dev.kiln.digest is not sha256:<64 lowercase hex>");
  c.package = required_string(notes, "dev.kiln.package", where);
  c.kernel_revision = required_string(notes, "dev.kiln.kernel_revision", where);
  if (!parse_sequence(required_string(notes, "dev.kiln.sequence", where), &c.sequence)) {
    fail(Errc::malformed, where + ": annotation dev.kiln.sequence is not an unsigned decimal number");
  }
  return c;
}

std::string kiln_digest_tag(const std::string& kiln_digest) {
  if (!is_digest_string(kiln_digest)) fail(Errc::invalid_argument, "'" + kiln_digest + "' is not a digest (expected sha256:<64 lowercase hex>)");
  return "kiln-" + kiln_digest.substr(7);
}

}  // namespace kiln::store
