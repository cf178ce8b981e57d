#include "store/oci.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/json.hpp"
#include "core/sha256.hpp"

namespace kiln::store {
namespace {

constexpr const char* kManifestType = kOciManifestType;
constexpr const char* kIndexType = kOciIndexType;
constexpr std::uint64_t kMaxManifest = kMaxOciManifest;

// Every file of the layout is written beside its name and renamed onto it: a link planted at
// the name is replaced, never written through.
void write_file(const std::string& path, const std::string& content) { replace_file_durably(path, content, 0644); }

// A folder of the layout: made if missing; a link or anything else planted there is refused,
// so that no blob lands where the link points.
void plain_folder(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) fail(Errc::invalid_argument, path + ": is a symbolic link; refused (kiln never writes through a link)");
    if (!S_ISDIR(st.st_mode)) fail(Errc::invalid_argument, path + ": is not a folder; refused");
    return;
  }
  if (errno != ENOENT) fail(Errc::io, path + ": " + errno_text(errno));
  if (::mkdir(path.c_str(), 0755) != 0) fail(Errc::io, path + ": cannot create: " + errno_text(errno));
}

bool exists_nofollow(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// Copies a parsed JSON value into a writer (earlier index entries, kept on export).
void write_value(json::Writer& w, const json::Value& v) {
  switch (v.type) {
    case json::Value::Type::null: w.null(); break;
    case json::Value::Type::boolean: w.value(v.boolean); break;
    case json::Value::Type::number: w.value(v.number); break;
    case json::Value::Type::real: w.value(v.real); break;
    case json::Value::Type::string: w.value(v.string); break;
    case json::Value::Type::array:
      w.begin_array();
      for (const json::Value& e : v.array) write_value(w, e);
      w.end_array();
      break;
    case json::Value::Type::object:
      w.begin_object();
      for (const auto& [k, e] : v.object) write_value(w.key(k), e);
      w.end_object();
      break;
  }
}

// The manifests an existing layout's index.json lists: kept by an export into it. A layout
// whose index kiln cannot read is refused, not overwritten.
std::vector<json::Value> existing_manifests(const std::string& dir) {
  std::string layout_path = dir + "/oci-layout";
  json::Value layout = json::parse(read_regular_file_text_nofollow(layout_path, 4096), layout_path);
  const std::string* version = layout.get_string("imageLayoutVersion");
  if (version == nullptr || *version != "1.0.0") {
    fail(Errc::unsupported, layout_path + ": not an OCI image layout 1.0.0; refusing to write into it");
  }
  std::string index_path = dir + "/index.json";
  if (!exists_nofollow(index_path)) return {};
  std::string text = read_regular_file_text_nofollow(index_path, kMaxManifest);  // a link is refused, not read
  json::Value index;
  try {
    index = json::parse(text, index_path);
  } catch (const Failure& e) {
    fail(Errc::malformed, std::string(e.what()) + "; refusing to export into this layout (its index would be lost)");
  }
  const json::Value* manifests = index.get("manifests");
  if (manifests == nullptr || manifests->type != json::Value::Type::array) {
    fail(Errc::malformed, index_path + ": no manifests array; refusing to export into this layout (its index would be lost)");
  }
  return manifests->array;
}

// Stores a blob under its digest and returns the descriptor fields.
std::string put_blob(const std::string& dir, const std::string& bytes) {
  std::string digest = digest_string(sha256(bytes.data(), bytes.size()));
  write_file(dir + "/blobs/sha256/" + digest.substr(7), bytes);
  return digest;
}

void write_descriptor(json::Writer& w, const std::string& media_type, const std::string& digest, std::uint64_t size,
                      const Annotations& annotations) {
  w.begin_object().field("mediaType", media_type).field("digest", digest).field("size", size);
  if (!annotations.empty()) {
    w.key("annotations").begin_object();
    for (const auto& [name, value] : annotations) w.field(name, value);
    w.end_object();
  }
  w.end_object();
}

// OCI's digest grammar for the only algorithm kiln accepts: sha256 and 64 lowercase hex.
std::string checked_digest(const json::Value& d, const std::string& where) {
  const std::string* digest = d.get_string("digest");
  Sha256 parsed{};
  if (digest == nullptr || !parse_digest_string(*digest, &parsed)) {
    fail(Errc::malformed, where + ": descriptor digest is not sha256:<64 lowercase hex>");
  }
  return *digest;
}

// Size first (from the descriptor and the file), then the hash, then the bytes may be used.
std::string read_blob(const std::string& dir, const json::Value& d, std::uint64_t max, const std::string& where) {
  std::string digest = checked_digest(d, where);
  const std::int64_t* size = d.get_number("size");
  if (size == nullptr || *size < 0 || static_cast<std::uint64_t>(*size) > max) {
    fail(Errc::malformed, where + ": descriptor size missing or over " + std::to_string(max));
  }
  std::string path = dir + "/blobs/sha256/" + digest.substr(7);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) fail(Errc::io, path + ": missing blob");
  if (static_cast<std::int64_t>(st.st_size) != *size) {
    fail(Errc::integrity, path + ": " + std::to_string(st.st_size) + " bytes, the descriptor says " + std::to_string(*size));
  }
  std::string bytes = read_regular_file_text_nofollow(path, max);
  if (digest_string(sha256(bytes.data(), bytes.size())) != digest) {
    fail(Errc::integrity, path + ": content does not hash to " + digest);
  }
  return bytes;
}

}  // namespace

std::vector<std::string> export_oci(const Store& store, const std::string& dir, const std::vector<std::string>& digests) {
  std::vector<ArchiveInfo> chosen;  // everything checked before the layout is touched
  if (digests.empty()) chosen = store.archives();
  else for (const std::string& d : digests) chosen.push_back(store.info(d));
  for (const ArchiveInfo& a : chosen) {
    if (a.sparse) {
      fail(Errc::invalid_argument, store.dir() + ": " + a.digest + " is held sparse (" + std::to_string(a.size) + " of " +
                                       std::to_string(a.complete_size) + " bytes); an OCI layout carries archives whole: "
                                       "export from a store that holds it whole, or name the digests to export");
    }
  }
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) fail(Errc::io, dir + ": cannot create: " + errno_text(errno));
  // Into an existing layout: its index entries are kept (an entry for a manifest written again
  // is replaced). Into a folder holding something else: refused.
  std::vector<json::Value> earlier;
  if (exists_nofollow(dir + "/oci-layout")) {
    earlier = existing_manifests(dir);
  } else if (!list_directory(dir).empty()) {
    fail(Errc::invalid_argument, dir + ": not empty and not an OCI image layout (no oci-layout); refusing to write into it");
  } else {
    write_file(dir + "/oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}");
  }
  for (const char* sub : {"/blobs", "/blobs/sha256"}) plain_folder(dir + sub);
  put_blob(dir, kOciEmptyConfig);
  std::vector<std::string> written;  // manifest digests of this export
  json::Writer index;
  index.begin_object().field("schemaVersion", 2).field("mediaType", kIndexType).key("manifests").begin_array();
  std::vector<std::string> exported;
  for (const ArchiveInfo& a : chosen) {
    std::string bytes = read_regular_file_text_nofollow(store.archive_path(a.digest), 1ull << 40);
    std::string layer = put_blob(dir, bytes);
    const Annotations notes = artifact_annotations(a);
    const std::string manifest = artifact_manifest(a, BlobRef{layer, bytes.size()});  // what `kiln push` sends too
    std::string manifest_digest = put_blob(dir, manifest);
    Annotations ref = {{"org.opencontainers.image.ref.name", a.package + "-" + a.kernel_revision}};
    ref.insert(ref.end(), notes.begin(), notes.end());
    write_descriptor(index, kManifestType, manifest_digest, manifest.size(), ref);
    written.push_back(manifest_digest);
    exported.push_back(a.digest);
    // Its attestations, each an artifact whose subject is the archive's manifest, as `kiln push`
    // sends them (STORE.md, "Attestations in a registry"), listed in the index too.
    for (const StoredAttestation& s : store.attestations(a.digest)) {
      BlobRef envelope{put_blob(dir, s.envelope), s.envelope.size()};
      const std::string m = attestation_manifest(BlobRef{manifest_digest, manifest.size()}, a.digest, envelope);
      std::string m_digest = put_blob(dir, m);
      write_descriptor(index, kManifestType, m_digest, m.size(), {{"dev.kiln.digest", a.digest}});
      written.push_back(m_digest);
    }
  }
  for (const json::Value& e : earlier) {
    const std::string* d = e.get_string("digest");
    if (d != nullptr && std::find(written.begin(), written.end(), *d) != written.end()) continue;
    write_value(index, e);
  }
  index.end_array().end_object();
  write_file(dir + "/index.json", index.str());
  return exported;
}

ImportResult import_oci(Store& store, const std::string& dir) {
  json::Value layout = json::parse(read_small_file(dir + "/oci-layout", 4096), dir + "/oci-layout");
  const std::string* version = layout.get_string("imageLayoutVersion");
  if (version == nullptr || *version != "1.0.0") fail(Errc::unsupported, dir + "/oci-layout: not an OCI image layout 1.0.0");
  json::Value index = json::parse(read_small_file(dir + "/index.json", kMaxManifest), dir + "/index.json");
  const json::Value* manifests = index.get("manifests");
  if (manifests == nullptr || manifests->type != json::Value::Type::array) fail(Errc::malformed, dir + "/index.json: no manifests array");
  ImportResult result;
  std::vector<std::pair<std::string, std::string>> attestations;  // where, manifest bytes: taken once archives are in
  for (std::size_t i = 0; i < manifests->array.size(); ++i) {
    const json::Value& d = manifests->array[i];
    std::string where = dir + "/index.json manifests[" + std::to_string(i) + "]";
    const std::string* type = d.get_string("mediaType");
    if (type == nullptr || *type != kManifestType) {
      result.skipped.push_back(where + ": media type " + (type ? *type : "(none)") + " is not an image manifest; skipped");
      continue;
    }
    std::string bytes = read_blob(dir, d, kMaxManifest, where);
    json::Value manifest = json::parse(bytes, where + " manifest");
    const std::string* artifact = manifest.get_string("artifactType");
    if (artifact != nullptr && *artifact == kAttestationArtifactType) {
      attestations.emplace_back(where, std::move(bytes));
      continue;
    }
    const json::Value* layers = manifest.get("layers");
    if (layers == nullptr || layers->type != json::Value::Type::array) {
      result.skipped.push_back(where + ": manifest has no layers; skipped");
      continue;
    }
    for (std::size_t j = 0; j < layers->array.size(); ++j) {
      const json::Value& layer = layers->array[j];
      std::string lwhere = where + " layers[" + std::to_string(j) + "]";
      const std::string* ltype = layer.get_string("mediaType");
      if (ltype == nullptr || *ltype != kArchiveMediaType) {
        result.skipped.push_back(lwhere + ": media type " + (ltype ? *ltype : "(none)") + " is not a kiln archive; skipped");
        continue;
      }
      checked_digest(layer, lwhere);
      read_blob(dir, layer, 1ull << 36, lwhere);  // size and hash checked before the store sees it
      result.imported.push_back(store.add(dir + "/blobs/sha256/" + layer.get_string("digest")->substr(7)));
    }
  }
  for (const auto& [where, bytes] : attestations) {
    try {
      AttestationArtifact a = read_attestation_manifest(bytes, where);
      json::Value layer = json::parse("{\"digest\":" + json::quote(a.envelope.digest) + ",\"size\":" +
                                          std::to_string(a.envelope.size) + "}", where);
      std::string envelope = read_blob(dir, layer, kMaxAttestationBytes, where + " envelope");
      AttestationFacts f = read_attestation(envelope, where);
      if (f.subject_digest != a.kiln_digest) fail(Errc::integrity, where + " attests " + f.subject_digest + ", not " + a.kiln_digest);
      store.attest(f.subject_digest, envelope, attestation_summary(f), "kiln store import");  // not_found if the archive is not here
      ++result.attestations;
    } catch (const Failure& e) {
      result.skipped.push_back(std::string(e.what()) + "; attestation skipped");
    }
  }
  return result;
}

}  // namespace kiln::store
