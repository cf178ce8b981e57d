#include "transfer.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <vector>

#include "archive_reader.hpp"
#include "error.hpp"
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

}  // namespace

PushResult push_archive(Client& client, const std::string& file, const std::string& tag, const TrustSet* trust,
                        unsigned threshold) {
  PushResult r;
  r.archive = info_of(*open_verified(file, trust, threshold, true));
  r.tag = tag.empty() ? r.archive.kernel_revision : tag;
  if (!is_valid_tag(r.tag)) {
    fail(Errc::invalid_argument, file + ": its kernel_revision '" + r.archive.kernel_revision +
                                     "' is not a valid OCI tag, so it cannot be the default; name one: " +
                                     client.reference().name() + ":TAG");
  }
  r.kiln_tag = store::kiln_digest_tag(r.archive.digest);
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
  return r;
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
