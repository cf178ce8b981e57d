#include "transfer.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <vector>

#include "archive_reader.hpp"
#include "attestation_facts.hpp"
#include "error.hpp"
#include "oci_attestation.hpp"
#include "sha256.hpp"

namespace kiln::registry {
namespace {

// Opens and checks an archive the way `kiln verify` does: signatures first (with a trust set),
// then every member's digest and the archive's own consistency rules.
std::unique_ptr<Archive> open_verified(const std::string& path, const TrustSet* trust, unsigned threshold, bool follow_links) {
  ReadOptions options;
  if (trust != nullptr) options.policy = TrustPolicy{trust, threshold};
  options.follow_links = follow_links;
  std::unique_ptr<Archive> a = Archive::open_file(path, options);
  a->verify_all(2, false, nullptr);
  return a;
}

store::ArchiveInfo info_of(const Archive& a) {
  return store::ArchiveInfo{digest_string(a.digest()), a.package(), a.kernel_revision(), a.sequence(), a.file_size()};
}

std::size_t pread_some(int fd, std::uint64_t offset, char* buf, std::size_t n, const std::string& what) {
  for (;;) {
    ssize_t got = ::pread(fd, buf, n, static_cast<off_t>(offset));
    if (got >= 0) return static_cast<std::size_t>(got);
    if (errno != EINTR) fail(Errc::io, what + ": cannot read: " + errno_text(errno));
  }
}

// The referrers index the tag schema keeps for `manifest_digest` ("sha256-<hex>"); none when the
// tag is absent.
std::vector<store::Referrer> tag_schema_referrers(Client& client, const std::string& manifest_digest) {
  std::string tag_name = store::referrers_tag(manifest_digest);
  try {
    std::string held_digest;
    return store::read_referrers_index(client.get_manifest(tag_name, &held_digest), client.reference().name() + ":" + tag_name);
  } catch (const Error& e) {
    if (e.code() != Errc::not_found) throw;
  }
  return {};
}

}  // namespace

PushResult push_archive(Client& client, const std::string& file, const std::string& tag, const TrustSet* trust,
                        unsigned threshold, const std::vector<std::string>& attestations,
                        const std::vector<std::string>& names, bool keep_tags) {
  PushResult r;
  r.archive = info_of(*open_verified(file, trust, threshold, true));
  for (std::size_t i = 0; i < attestations.size(); ++i) {
    std::string name = i < names.size() ? names[i] : "attestation " + std::to_string(i + 1);
    AttestationFacts f = read_attestation(attestations[i], name);
    if (f.subject_digest != r.archive.digest) {
      fail(Errc::invalid_argument, name + " attests " + f.subject_digest + ", not " + file + " (" + r.archive.digest + ")");
    }
  }
  r.tag = tag.empty() ? r.archive.kernel_revision : tag;
  if (!is_valid_tag(r.tag)) {
    fail(Errc::invalid_argument, file + ": its kernel_revision '" + r.archive.kernel_revision +
                                     "' is not a valid OCI tag, so it cannot be the default; name one: " +
                                     client.reference().name() + ":TAG");
  }
  r.kiln_tag = store::kiln_digest_tag(r.archive.digest);
  // What the tag names now: another kiln archive means this push moves it (a second release
  // under the same kernel_revision), which is said, or refused when asked.
  try {
    std::string held;
    std::string bytes = client.get_manifest(r.tag, &held);
    store::ArtifactClaims claims = store::read_artifact_manifest(bytes, client.reference().name() + ":" + r.tag, 1ull << 62);
    if (claims.kiln_digest != r.archive.digest) r.moved_from = claims.kiln_digest;
  } catch (const Error& e) {
    if (e.code() != Errc::not_found && e.code() != Errc::malformed && e.code() != Errc::unsupported) throw;
  }
  if (keep_tags && !r.moved_from.empty()) {
    fail(Errc::refused, client.reference().name() + ":" + r.tag + " names kiln archive " + r.moved_from + "; pushing " +
                            r.archive.digest + " there would move it (--keep-tags); give the release its own "
                            "kernel_revision, or another tag");
  }
  // The layer is the whole file: hashed here, uploaded from the same descriptor. If the file
  // changes in between, the registry refuses the upload (its bytes no longer hash to the digest).
  FileDescriptor fd = open_regular_file(file, true);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail(Errc::io, file + ": " + errno_text(errno));
  r.layer.size = static_cast<std::uint64_t>(st.st_size);
  Sha256Stream hash;
  std::vector<char> piece(1 << 20);
  for (std::uint64_t at = 0; at < r.layer.size;) {
    std::size_t n = pread_some(fd.get(), at, piece.data(), piece.size(), file);
    if (n == 0) fail(Errc::io, file + ": shrank while being hashed");
    hash.update(piece.data(), n);
    at += n;
  }
  r.layer.digest = digest_string(hash.finish());
  const std::string manifest = store::artifact_manifest(r.archive, r.layer);
  r.manifest_digest = digest_string(sha256(manifest.data(), manifest.size()));

  const store::BlobRef config = store::empty_config_blob();
  if (client.has_blob(config)) {
    ++r.blobs_present;
  } else {
    client.upload_blob(config, std::string(store::kOciEmptyConfig));
    ++r.blobs_uploaded;
  }
  if (client.has_blob(r.layer)) {
    ++r.blobs_present;
  } else {
    int raw = fd.get();
    client.upload_blob(r.layer, [raw, &file](std::uint64_t offset, char* buf, std::size_t n) {
      return pread_some(raw, offset, buf, n, file);
    });
    ++r.blobs_uploaded;
  }
  // Blobs first, then the manifests that name them (a registry refuses a manifest whose blobs
  // it lacks): the human tag, then the kiln-digest tag `kiln pull @kiln:` looks for.
  client.put_manifest(r.tag, manifest, r.manifest_digest);
  if (r.kiln_tag != r.tag) client.put_manifest(r.kiln_tag, manifest, r.manifest_digest);
  r.manifest_size = manifest.size();
  if (attestations.empty()) return r;

  // Each attestation as its own artifact, its subject the archive's manifest (OCI 1.1).
  const store::BlobRef subject{r.manifest_digest, r.manifest_size};
  std::vector<store::Referrer> pushed;
  bool indexed = true;  // every PUT answered with the subject: the registry lists referrers itself
  for (const std::string& envelope : attestations) {
    store::BlobRef blob{digest_string(sha256(envelope.data(), envelope.size())), envelope.size()};
    if (!client.has_blob(blob)) client.upload_blob(blob, envelope);
    std::string m = store::attestation_manifest(subject, r.archive.digest, blob);
    std::string digest = digest_string(sha256(m.data(), m.size()));
    indexed = client.put_manifest(digest, m, digest) == r.manifest_digest && indexed;
    pushed.push_back({{digest, m.size()}, store::kAttestationArtifactType});
    ++r.attestations;
  }
  if (indexed) {
    r.referrers = "the registry's referrers API";
    return r;
  }
  // The tag schema (OCI distribution 1.1, for registries without the referrers API): an index of
  // the subject's referrers under "sha256-<hex>", the entries already there kept.
  std::string tag_name = store::referrers_tag(r.manifest_digest);
  std::vector<store::Referrer> listed = tag_schema_referrers(client, r.manifest_digest);
  for (const store::Referrer& p : pushed) {
    bool known = false;
    for (const store::Referrer& l : listed) known = known || l.manifest.digest == p.manifest.digest;
    if (!known) listed.push_back(p);
  }
  std::string index = store::referrers_index(listed);
  client.put_manifest(tag_name, index, digest_string(sha256(index.data(), index.size())), store::kOciIndexType);
  r.referrers = "the tag " + tag_name;
  return r;
}

FetchedAttestations fetch_attestations(Client& client, const std::string& manifest_digest, const std::string& kiln_digest) {
  FetchedAttestations out;
  std::string where = client.reference().name();
  std::optional<std::string> api = client.get_referrers(manifest_digest);
  std::vector<store::Referrer> listed = api ? store::read_referrers_index(*api, where + " referrers of " + manifest_digest)
                                            : tag_schema_referrers(client, manifest_digest);
  std::size_t read = 0;
  for (const store::Referrer& l : listed) {
    if (l.artifact_type != store::kAttestationArtifactType) continue;  // another tool's referrer: not ours to read
    if (++read > kMaxAttestationsFetched) {
      out.ignored.push_back(where + ": more than " + std::to_string(kMaxAttestationsFetched) +
                            " attestations listed; the rest not fetched");
      break;
    }
    std::string at = where + "@" + l.manifest.digest;
    try {
      std::string got;
      store::AttestationArtifact a = store::read_attestation_manifest(client.get_manifest(l.manifest.digest, &got), at);
      if (a.subject.digest != manifest_digest) fail(Errc::integrity, at + ": its subject is " + a.subject.digest);
      std::string envelope;
      client.get_blob(a.envelope, [&envelope](const char* data, std::size_t n) { envelope.append(data, n); });
      AttestationFacts f = read_attestation(envelope, at);
      if (f.subject_digest != kiln_digest) fail(Errc::integrity, at + " attests " + f.subject_digest + ", not " + kiln_digest);
      out.envelopes.push_back(std::move(envelope));
    } catch (const Error& e) {
      out.ignored.push_back(e.what());  // a registry may list anything; the policy needs only good ones
    }
  }
  return out;
}

FetchResult fetch_archive(Client& client, const Reference& ref, AtomicFileWriter& out, const FetchOptions& options) {
  FetchResult r;
  if (ref.digest.empty() && ref.kiln_digest.empty() && ref.tag.empty()) {
    fail(Errc::invalid_argument, ref.str() + ": name what to pull: " + ref.str() + ":TAG, " + ref.str() +
                                     "@sha256:<manifest digest> or " + ref.str() + "@kiln:sha256:<kiln digest>");
  }
  std::string asked = !ref.digest.empty()        ? ref.digest
                      : !ref.kiln_digest.empty() ? store::kiln_digest_tag(ref.kiln_digest)
                                                 : ref.tag;
  std::string bytes;
  try {
    bytes = client.get_manifest(asked, &r.manifest_digest);
  } catch (const Error& e) {
    if (e.code() != Errc::not_found || ref.kiln_digest.empty()) throw;
    fail(e.code(), std::string(e.what()) + " (kiln push tags every archive it pushes " + asked +
                       "; an archive pushed another way is pulled by its tag or manifest digest)");
  }
  std::string where = ref.name() + "@" + r.manifest_digest;
  store::ArtifactClaims claims = store::read_artifact_manifest(bytes, where, options.max_blob);
  if (!ref.kiln_digest.empty() && claims.kiln_digest != ref.kiln_digest) {
    fail(Errc::integrity, where + " (tag " + asked + ") names kiln digest " + claims.kiln_digest + ", not " +
                              ref.kiln_digest + "; refused");
  }
  r.layer = claims.layer;
  client.get_blob(claims.layer, [&out](const char* data, std::size_t n) { out.write(data, n); });

  // The bytes are the layer the manifest names. Now the archive itself: what the manifest
  // claims about it is unsigned, so each claim must match what the archive says.
  std::unique_ptr<Archive> a;
  try {
    a = open_verified(out.temp_path(), options.trust, options.threshold, false);
  } catch (const Error& e) {
    // Name the blob, not the temporary file (removed as this unwinds).
    std::string what = e.what();
    for (std::size_t at; (at = what.find(out.temp_path())) != std::string::npos;) {
      what.replace(at, out.temp_path().size(), "the downloaded archive");
    }
    fail(e.code(), where + ": blob " + claims.layer.digest + ": " + what);
  }
  r.archive = info_of(*a);
  auto differs = [&](const char* what, const std::string& archive, const std::string& claimed) {
    if (archive != claimed) {
      fail(Errc::integrity, where + ": the archive's " + what + " is " + archive + "; the manifest claims " + claimed +
                                "; refused");
    }
  };
  differs("kiln digest", r.archive.digest, claims.kiln_digest);
  differs("package", r.archive.package, claims.package);
  differs("kernel_revision", r.archive.kernel_revision, claims.kernel_revision);
  differs("sequence", std::to_string(r.archive.sequence), std::to_string(claims.sequence));
  if (options.trust != nullptr) r.trusted_signers = a->trust_report().distinct_trusted_signers;
  return r;
}

}  // namespace kiln::registry
