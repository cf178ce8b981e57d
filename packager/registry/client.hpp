// The OCI Distribution API, as much of it as moving kiln archives needs: blobs (HEAD, monolithic
// POST + PUT upload, GET streamed and checked), manifests (PUT by tag, GET by tag or digest,
// bounded and checked), and the registry's authentication (anonymous, Basic, the Bearer token
// flow). Every error names the registry, the repository, what was asked and the HTTP status.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "registry/auth.hpp"
#include "registry/http.hpp"
#include "registry/reference.hpp"
#include "store/oci_manifest.hpp"

namespace kiln::registry {

// Over http:// when `insecure_http` is set, or when the registry is on the loopback interface and
// `tls` is not; otherwise https:// with the certificate verified (and http refused, redirects included).
HttpOptions http_options_for(const Reference& ref, bool insecure_http, bool tls, HttpOptions base);

class Client {
 public:
  Client(const Reference& ref, const HttpOptions& options);

  bool has_blob(const store::BlobRef& blob);
  // `read` fills buf from the blob's offset; called again from 0 if the upload is retried.
  using BlobSource = std::function<std::size_t(std::uint64_t offset, char* buf, std::size_t n)>;
  void upload_blob(const store::BlobRef& blob, const BlobSource& read);
  void upload_blob(const store::BlobRef& blob, const std::string& bytes);
  // PUTs a manifest (an OCI image manifest, or `media_type`) under `tag` (or its digest); checks
  // the digest the registry reports, if it does. Returns the OCI-Subject header the registry
  // answers with ("" when none: a registry without the referrers API).
  std::string put_manifest(const std::string& tag, const std::string& bytes, const std::string& digest,
                           const char* media_type = store::kOciManifestType);
  // The referrers API (OCI 1.1): the index of manifests whose subject is `digest`, or nothing
  // when the registry does not offer the API (404); bounded as manifests are.
  std::optional<std::string> get_referrers(const std::string& digest);
  // GETs a manifest by tag or digest, at most store::kMaxOciManifest bytes. Asked by digest, the
  // bytes must hash to it; asked by tag, they must hash to the Docker-Content-Digest the registry
  // states, if it states one. Returns the bytes; `digest` receives their SHA-256.
  std::string get_manifest(const std::string& tag_or_digest, std::string* digest);
  // Streams the blob to `sink`, hashing as it goes; refused (nothing more passed on) as soon as
  // it runs past blob.size, and at the end unless size and SHA-256 are the descriptor's.
  void get_blob(const store::BlobRef& blob, const std::function<void(const char*, std::size_t)>& sink);

  // Streams bytes [offset, offset + size) of the blob to `sink` with a Range request: the reply
  // must be a 206 whose Content-Range is exactly that range of a blob of blob.size bytes, and
  // carry exactly `size` bytes (nothing more is passed on). Returns false, having passed nothing,
  // when the registry answers 200 (it does not serve ranges). The bytes are not hashed here: the
  // caller checks them against the digests the archive's index holds.
  bool get_blob_range(const store::BlobRef& blob, std::uint64_t offset, std::uint64_t size,
                      const std::function<void(const char*, std::size_t)>& sink);

  const HttpStats& stats() const { return http_.stats(); }
  const Reference& reference() const { return ref_; }

 private:
  // Sends with the registry's credentials (to the registry's own host only); on a 401, answers
  // its challenge once (Basic from the docker config, or a Bearer token) and sends again.
  HttpResponse send(HttpRequest request, const std::string& what);
  void answer_challenge(const HttpResponse& reply, const std::string& what);
  [[noreturn]] void refuse(const HttpResponse& reply, const std::string& what) const;
  std::string url(const std::string& path) const { return base_ + "/v2/" + ref_.repository + path; }

  Reference ref_;
  Http http_;
  std::string base_;           // scheme://registry
  std::string authorization_;  // the Authorization header for the registry, once known
  std::optional<Credentials> credentials_;
  bool credentials_loaded_ = false;
  bool insecure_http_ = false;
};

}  // namespace kiln::registry
