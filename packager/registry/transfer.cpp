#include "registry/transfer.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <memory>
#include <vector>

#include "core/archive_reader.hpp"
#include "core/attestation_facts.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/sha256.hpp"
#include "core/sparse.hpp"
#include "core/sparse_writer.hpp"
#include "store/oci_attestation.hpp"

namespace kiln::registry {
namespace {

// Opens and checks an archive the way `kiln verify` does: signatures first (with a trust set),
// then every member's digest and the archive's own consistency rules.
std::unique_ptr<ArchiveReader> open_verified(const std::string& path, const TrustSet* trust, unsigned threshold, bool follow_links) {
  ReadOptions options;
  if (trust != nullptr) options.policy = TrustPolicy{trust, threshold};
  options.follow_links = follow_links;
  std::unique_ptr<ArchiveReader> a = ArchiveReader::open_file(path, options);
  a->verify_all(2, false, nullptr);
  return a;
}

// The referrers index the tag schema keeps for `manifest_digest` ("sha256-<hex>"); none when the
// tag is absent.
std::vector<store::Referrer> tag_schema_referrers(Client& client, const std::string& manifest_digest) {
  std::string tag_name = store::referrers_tag(manifest_digest);
  try {
    std::string held_digest;
    return store::read_referrers_index(client.get_manifest(tag_name, &held_digest), client.reference().name() + ":" + tag_name);
  } catch (const Failure& e) {
    if (e.code() != Errc::not_found) throw;
  }
  return {};
}

}  // namespace

PushResult push_archive(Client& client, const std::string& file, const std::string& tag, const TrustSet* trust,
                        unsigned threshold, const std::vector<std::string>& attestations,
                        const std::vector<std::string>& names, bool keep_tags) {
  PushResult r;
  r.archive = store::archive_info(*open_verified(file, trust, threshold, true));
  if (r.archive.sparse) {
    fail(Errc::invalid_argument, file + " is a sparse archive (it holds " + std::to_string(r.archive.size) + " of " +
                                     std::to_string(r.archive.complete_size) + " bytes); a registry holds archives whole, "
                                     "for any target to be pulled from: push the complete archive");
  }
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
  } catch (const Failure& e) {
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
    std::size_t n = pread_some(fd.get(), piece.data(), piece.size(), at, file);
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
      return pread_some(raw, buf, n, offset, file);
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
    } catch (const Failure& e) {
      out.ignored.push_back(e.what());  // a registry may list anything; the policy needs only good ones
    }
  }
  return out;
}

namespace {

// What a sparse pull holds in memory to choose (kiln.toml and the kernel table): at most this.
constexpr std::uint64_t kMaxHeldForChoice = 256ull << 20;

// Bytes [offset, offset + size) of the layer, or nothing (false) when the registry ignores Range.
bool get_range(Client& client, const store::BlobRef& layer, std::uint64_t offset, std::uint64_t size,
               std::vector<std::uint8_t>* out) {
  out->clear();
  out->reserve(static_cast<std::size_t>(size));
  return client.get_blob_range(layer, offset, size, [out](const char* data, std::size_t n) {
    out->insert(out->end(), reinterpret_cast<const std::uint8_t*>(data), reinterpret_cast<const std::uint8_t*>(data) + n);
  });
}

// The sparse pull (FORMAT.md §9) into `out`; false, with nothing written, when the registry does
// not serve ranges. Nothing fetched is parsed before the digest it must hash to (the manifest's
// claim, which the archive must then match) and, with a trust set, the signatures over it hold.
bool fetch_sparse(Client& client, const store::BlobRef& layer, const std::string& where, const std::string& claimed_digest,
                  AtomicFileWriter& out, const FetchOptions& options) {
  std::vector<std::uint8_t> bytes;
  if (!get_range(client, layer, 0, std::min<std::uint64_t>(format::kHeaderSize, layer.size), &bytes)) return false;
  format::Header h;
  try {
    h = format::decode_header(ByteView(bytes));
    if (h.sparse) fail(Errc::malformed, "the blob is itself a sparse archive (a registry holds archives whole)");
    format::check_sparse_header(h);  // the bounds; the file they tile is the layer
  } catch (const Failure& e) {
    fail(Errc::malformed, where + ": blob " + layer.digest + ": " + e.what());
  }
  if (format::complete_size(h) != layer.size) {
    fail(Errc::malformed, where + ": blob " + layer.digest + ": its header describes an archive of " +
                              std::to_string(format::complete_size(h)) + " bytes, the layer has " + std::to_string(layer.size));
  }
  // The index and the signature block, the last extent of every sparse archive.
  const std::uint64_t tail_size = format::complete_size(h) - h.index_offset;
  std::map<std::uint64_t, std::vector<std::uint8_t>> held;  // ranges of the archive fetched, by offset
  if (!get_range(client, layer, h.index_offset, tail_size, &bytes)) return false;
  const Sha256 digest = sha256(bytes.data(), static_cast<std::size_t>(h.index_head_size));
  if (digest_string(digest) != claimed_digest) {
    fail(Errc::integrity, where + ": the archive's index head hashes to " + digest_string(digest) + "; the manifest claims " +
                              claimed_digest + "; refused");
  }
  if (options.trust != nullptr) {
    std::vector<format::SignatureRecord> records;
    try {
      records = format::decode_signature_block(ByteView(bytes).sub(h.index_size, h.signature_block_size));
    } catch (const Failure& e) {
      fail(Errc::malformed, where + ": " + e.what());
    }
    TrustReport report = evaluate_signatures(records, digest, TrustPolicy{options.trust, options.threshold});
    if (!report.satisfied) fail(Errc::signature, where + ": signature check failed for " + claimed_digest + ": " + report.failure);
  }
  format::Index index;
  try {
    index = format::decode_index(ByteView(bytes).sub(0, h.index_size), h.index_head_size, h.index_offset);
  } catch (const Failure& e) {
    fail(e.code(), where + ": " + e.what());
  }
  held[h.index_offset] = std::move(bytes);
  const std::vector<format::Entry>& entries = index.entries;

  // kiln.toml and the kernel table (kiln/: the table, the records) come first and are held in
  // memory: the choice is made on them. They are bounded, so that an archive cannot make a pull
  // hold gigabytes before it has chosen anything; the other meta members ([files] extra) are
  // kept too, fetched with the code.
  std::vector<bool> keep(entries.size(), false);
  std::uint64_t table_bytes = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    keep[i] = entries[i].role == format::Role::manifest ||
              (entries[i].role == format::Role::meta && entries[i].path.rfind("kiln/", 0) == 0);
    if (keep[i]) table_bytes += entries[i].stored_size;
  }
  if (table_bytes > kMaxHeldForChoice) {
    fail(Errc::limit, where + ": kiln.toml and the kernel table take " + std::to_string(table_bytes) +
                          " bytes, over the " + std::to_string(kMaxHeldForChoice) + " a sparse pull holds to choose; refused");
  }
  for (const format::Extent& x : format::extents_for(entries, keep, h)) {
    // The index, held already, ends the last extent (alone, or after the members just before it).
    const std::uint64_t end = std::min(x.end(), h.index_offset);
    if (end <= x.offset) continue;
    if (!get_range(client, layer, x.offset, end - x.offset, &bytes)) {
      fail(Errc::integrity, where + ": the registry served ranges, then ignored one; refused");
    }
    held[x.offset] = std::move(bytes);
  }
  // Writes the sparse archive of `extents`: the ranges held from memory, the rest fetched now.
  auto write_extents = [&](const std::vector<format::Extent>& extents, const ExtentWrite& sink) {
    write_sparse(sink, h, extents, [&](const format::Extent& x, const ExtentWrite& write) {
      for (std::uint64_t at = x.offset; at < x.end();) {
        auto it = held.lower_bound(at);
        if (it != held.end() && it->first == at) {
          write(it->second.data(), it->second.size());
          at += it->second.size();
          continue;
        }
        std::uint64_t to = it == held.end() ? x.end() : std::min(it->first, x.end());
        bool ranged = client.get_blob_range(layer, at, to - at, [&write](const char* data, std::size_t n) {
          write(reinterpret_cast<const std::uint8_t*>(data), n);
        });
        if (!ranged) fail(Errc::integrity, where + ": the registry served ranges, then ignored one; refused");
        at = to;
      }
    });
  };
  std::vector<std::uint8_t> partial;
  write_extents(format::extents_for(entries, keep, h), [&partial](const std::uint8_t* data, std::size_t n) {
    partial.insert(partial.end(), data, data + n);
  });
  for (std::size_t i = 0; i < entries.size(); ++i) keep[i] = keep[i] || entries[i].role == format::Role::meta;
  for (std::size_t i : options.choose(std::move(partial))) {
    if (i >= entries.size()) fail(Errc::internal, "a sparse pull chose member " + std::to_string(i) + " of " + std::to_string(entries.size()));
    keep[i] = true;
  }
  write_extents(format::extents_for(entries, keep, h), [&out](const std::uint8_t* data, std::size_t n) { out.write(data, n); });
  return true;
}

}  // namespace

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
  } catch (const Failure& e) {
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
  bool sparse = false;
  if (options.choose) {
    sparse = fetch_sparse(client, claims.layer, where, claims.kiln_digest, out, options);
    if (!sparse) r.whole_because = ref.registry + " does not serve range requests (it answered one with the whole blob)";
  }
  if (!sparse) client.get_blob(claims.layer, [&out](const char* data, std::size_t n) { out.write(data, n); });
  // The bytes are the layer the manifest names (or, sparse, its ranges). Now the archive itself:
  // what the manifest claims about it is unsigned, so each claim must match what the archive says.
  std::unique_ptr<ArchiveReader> a;
  try {
    a = open_verified(out.temp_path(), options.trust, options.threshold, false);
  } catch (const Failure& e) {
    // Name the blob, not the temporary file (removed as this unwinds).
    std::string what = e.what();
    for (std::size_t at; (at = what.find(out.temp_path())) != std::string::npos;) {
      what.replace(at, out.temp_path().size(), "the downloaded archive");
    }
    fail(e.code(), where + ": blob " + claims.layer.digest + ": " + what);
  }
  r.archive = store::archive_info(*a);
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
