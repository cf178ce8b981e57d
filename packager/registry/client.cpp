#include "registry/client.hpp"

#include "core/error.hpp"
#include "core/json.hpp"
#include "core/sha256.hpp"

namespace kiln::registry {
namespace {

// What a manifest GET accepts: the kiln artifact's type, and the others only so that the reply
// says what is there (read_artifact_manifest then names it) instead of a bare 404.
constexpr const char* kManifestAccept =
    "Accept: application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json, "
    "application/vnd.docker.distribution.manifest.v2+json, application/vnd.docker.distribution.manifest.list.v2+json";

// The distribution spec's error body, {"errors":[{"code":..., "message":...}]}, as one line;
// anything else (a proxy's HTML page) is summarised by its size only.
std::string error_summary(const std::string& body) {
  if (body.empty()) return "";
  try {
    json::Value v = json::parse(body, "the registry's error reply");
    const json::Value* errors = v.get("errors");
    std::string out;
    if (errors != nullptr && errors->type == json::Value::Type::array) {
      for (const json::Value& e : errors->array) {
        const std::string* code = e.get_string("code");
        const std::string* message = e.get_string("message");
        if (!out.empty()) out += "; ";
        out += (code ? *code : std::string("?")) + (message ? ": " + *message : std::string());
      }
    }
    // The registry's words reach a terminal: no escape sequence or line break of theirs survives.
    if (!out.empty()) return " (" + escape_control(out.substr(0, 512)) + ")";
  } catch (const Failure&) {
  }
  return " (a " + std::to_string(body.size()) + "-byte reply that is not a registry error)";
}

// A value kiln puts in a header line must not be able to start another one.
bool header_safe(const std::string& s) { return s.find_first_of("\r\n") == std::string::npos; }

}  // namespace

HttpOptions http_options_for(const Reference& ref, bool insecure_http, bool tls, HttpOptions base) {
  base.allow_plain_http = insecure_http || (ref.is_loopback() && !tls);
  base.insecure_http = insecure_http;
  return base;
}

Client::Client(const Reference& ref, const HttpOptions& options)
    : ref_(ref), http_(options), base_((options.allow_plain_http ? "http://" : "https://") + ref.registry),
      insecure_http_(options.insecure_http) {}

[[noreturn]] void Client::refuse(const HttpResponse& reply, const std::string& what) const {
  Errc code = reply.status == 404 ? Errc::not_found : reply.status == 401 || reply.status == 403 ? Errc::refused : Errc::io;
  fail(code, ref_.name() + ": " + what + ": HTTP " + std::to_string(reply.status) + error_summary(reply.body));
}

void Client::answer_challenge(const HttpResponse& reply, const std::string& what) {
  std::optional<Challenge> c = parse_challenge(reply.header("www-authenticate"));
  if (!credentials_loaded_) {
    credentials_ = docker_credentials(ref_.registry);
    credentials_loaded_ = true;
  }
  std::string where_creds = credentials_ ? " (credentials from " + credentials_->source + ")" : "";
  if (!c) refuse(reply, what + ": the registry asks for authentication without a usable WWW-Authenticate challenge");
  if (c->scheme == "basic") {
    if (!credentials_) {
      refuse(reply, what + ": the registry asks for a user and password, and the docker config ($DOCKER_CONFIG/config.json "
                           "or ~/.docker/config.json) has none for " + ref_.registry);
    }
    authorization_ = "Authorization: Basic " + base64_encode(credentials_->user + ":" + credentials_->password);
    return;
  }
  if (c->scheme != "bearer") refuse(reply, what + ": authentication scheme '" + c->scheme + "' is not supported");
  // The token flow: GET realm?service=..&scope=.., with the user's credentials if there are any.
  const std::string& realm = c->params["realm"];
  std::string scheme = url_scheme(realm);
  if (scheme != "https" && scheme != "http") refuse(reply, what + ": the Bearer challenge's realm '" + realm + "' is not a URL");
  std::string token_url = realm;
  char sep = realm.find('?') == std::string::npos ? '?' : '&';
  for (const char* key : {"service", "scope"}) {
    if (c->params.count(key)) {
      token_url += sep + std::string(key) + "=" + url_encode(c->params[key]);
      sep = '&';
    }
  }
  HttpRequest r;
  r.url = token_url;
  r.max_body = 1u << 20;
  r.follow_redirects = true;
  // The password goes to a token realm only over TLS (as Docker's client), or over plain http to
  // the registry's own loopback host, or when --insecure-http names the risk: a registry must not
  // be able to have it sent in the clear to any host it names.
  std::string realm_host = url_host(realm);
  bool may_send = scheme == "https" || insecure_http_ || (ref_.is_loopback() && realm_host == ref_.host());
  if (credentials_ && may_send) {
    r.headers.push_back("Authorization: Basic " + base64_encode(credentials_->user + ":" + credentials_->password));
  } else if (credentials_) {
    where_creds = " (credentials from " + credentials_->source + " withheld: the realm is plain http on " + realm_host +
                  ", not the registry's own loopback host; kiln sends them to a token realm only over https, or "
                  "with --insecure-http)";
  }
  HttpResponse got = http_.perform(r);
  if (got.status != 200) {
    fail(Errc::refused, ref_.name() + ": " + what + ": the token server " + realm + " answered HTTP " +
                            std::to_string(got.status) + where_creds + error_summary(got.body));
  }
  json::Value v = json::parse(got.body, "the token server's reply (" + realm + ")");
  const std::string* token = v.get_string("token");
  if (token == nullptr || token->empty()) token = v.get_string("access_token");
  if (token == nullptr || token->empty() || !header_safe(*token)) {
    fail(Errc::malformed, ref_.name() + ": the token server " + realm + " sent no usable token");
  }
  authorization_ = "Authorization: Bearer " + *token;
}

HttpResponse Client::send(HttpRequest request, const std::string& what) {
  const std::size_t base_headers = request.headers.size();
  for (int attempt = 0;; ++attempt) {
    request.headers.resize(base_headers);
    // Credentials go to the registry's own host only, never to a host an upload Location names.
    if (!authorization_.empty() && url_authority(request.url) == ref_.registry) request.headers.push_back(authorization_);
    HttpResponse reply;
    try {
      reply = http_.perform(request);
    } catch (const Failure& e) {
      fail(e.code(), ref_.name() + ": " + what + ": " + e.what());
    }
    if (reply.status != 401) return reply;
    if (attempt == 1) {
      refuse(reply, what + ": refused with the credentials given" +
                        (credentials_ ? " (from " + credentials_->source + ")" : std::string(" (anonymous)")));
    }
    answer_challenge(reply, what);
  }
}

bool Client::has_blob(const store::BlobRef& blob) {
  HttpRequest r;
  r.method = "HEAD";
  r.url = url("/blobs/" + blob.digest);
  r.follow_redirects = true;
  HttpResponse reply = send(r, "HEAD blob " + blob.digest);
  if (reply.status == 200) return true;
  if (reply.status == 404) return false;
  refuse(reply, "HEAD blob " + blob.digest);
}

void Client::upload_blob(const store::BlobRef& blob, const BlobSource& read) {
  std::string what = "upload of blob " + blob.digest + " (" + std::to_string(blob.size) + " bytes)";
  HttpRequest start;
  start.method = "POST";
  start.url = url("/blobs/uploads/");
  HttpResponse opened = send(start, what + ": POST");
  if (opened.status != 202) refuse(opened, what + ": POST");
  std::string location = opened.header("location");
  if (location.empty() || !header_safe(location)) fail(Errc::malformed, ref_.name() + ": " + what + ": no Location for the upload");
  if (location.front() == '/') location = base_ + location;
  else if (url_scheme(location) != "https" && url_scheme(location) != "http") {
    fail(Errc::malformed, ref_.name() + ": " + what + ": the upload Location '" + location + "' is not a URL");
  }
  HttpRequest put;
  put.method = "PUT";
  put.url = location + (location.find('?') == std::string::npos ? "?" : "&") + "digest=" + url_encode(blob.digest);
  put.headers.push_back("Content-Type: application/octet-stream");
  put.source = read;
  put.source_size = blob.size;
  HttpResponse done = send(put, what + ": PUT");
  if (done.status != 201) refuse(done, what + ": PUT");
}

void Client::upload_blob(const store::BlobRef& blob, const std::string& bytes) {
  upload_blob(blob, [&bytes](std::uint64_t offset, char* buf, std::size_t n) {
    std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(n, bytes.size() - std::min<std::uint64_t>(offset, bytes.size())));
    std::copy_n(bytes.data() + offset, k, buf);
    return k;
  });
}

std::string Client::put_manifest(const std::string& tag, const std::string& bytes, const std::string& digest,
                                 const char* media_type) {
  HttpRequest r;
  r.method = "PUT";
  r.url = url("/manifests/" + tag);
  r.headers.push_back(std::string("Content-Type: ") + media_type);
  r.body = bytes;
  std::string what = "PUT manifest " + digest + " as " + tag;
  HttpResponse reply = send(r, what);
  if (reply.status != 201) refuse(reply, what);
  std::string stored = reply.header("docker-content-digest");
  if (!stored.empty() && stored != digest) {
    fail(Errc::integrity, ref_.name() + ": " + what + ": the registry stored it as " + escape_control(stored) +
                              " (it changed the bytes)");
  }
  return reply.header("oci-subject");
}

std::optional<std::string> Client::get_referrers(const std::string& digest) {
  HttpRequest r;
  r.url = url("/referrers/" + digest);
  r.headers.push_back(kManifestAccept);
  r.max_body = store::kMaxOciManifest;
  std::string what = "GET referrers of " + digest;
  HttpResponse reply = send(r, what);
  if (reply.status == 404) return std::nullopt;
  if (reply.status != 200) refuse(reply, what);
  return std::move(reply.body);
}

std::string Client::get_manifest(const std::string& ref, std::string* digest) {
  HttpRequest r;
  r.url = url("/manifests/" + ref);
  r.headers.push_back(kManifestAccept);
  r.max_body = store::kMaxOciManifest;
  r.follow_redirects = true;  // as blob reads: a registry may serve its manifests from elsewhere
  std::string what = "GET manifest " + ref;
  HttpResponse reply = send(r, what);
  if (reply.status != 200) refuse(reply, what);
  *digest = digest_string(sha256(reply.body.data(), reply.body.size()));
  bool by_digest = ref.rfind("sha256:", 0) == 0;
  if (by_digest && *digest != ref) {
    fail(Errc::integrity, ref_.name() + ": " + what + ": the registry served bytes that hash to " + *digest + "; refused");
  }
  std::string stated = reply.header("docker-content-digest");
  if (!stated.empty() && stated != *digest) {
    fail(Errc::integrity, ref_.name() + ": " + what + ": the registry states digest " + escape_control(stated) +
                              " for bytes that hash to " +
                              *digest + "; refused");
  }
  return std::move(reply.body);
}

void Client::get_blob(const store::BlobRef& blob, const std::function<void(const char*, std::size_t)>& sink) {
  std::string what = "GET blob " + blob.digest;
  Sha256Stream hash;
  std::uint64_t received = 0;
  HttpRequest r;
  r.url = url("/blobs/" + blob.digest);
  r.follow_redirects = true;
  r.sink = [&](const char* data, std::size_t n) {
    if (received + n > blob.size) {
      // send() puts the registry, repository and digest in front.
      fail(Errc::integrity, "more than the descriptor's " + std::to_string(blob.size) + " bytes; refused");
    }
    hash.update(data, n);
    sink(data, n);
    received += n;
  };
  HttpResponse reply = send(r, what);
  if (reply.status != 200) refuse(reply, what);
  if (received != blob.size) {
    fail(Errc::integrity, ref_.name() + ": " + what + ": " + std::to_string(received) + " bytes, the descriptor says " +
                              std::to_string(blob.size) + "; refused");
  }
  std::string got = digest_string(hash.finish());
  if (got != blob.digest) {
    fail(Errc::integrity, ref_.name() + ": " + what + ": the bytes served hash to " + got + ", not " + blob.digest +
                              " (tampered or corrupted in the registry); refused");
  }
}

bool Client::get_blob_range(const store::BlobRef& blob, std::uint64_t offset, std::uint64_t size,
                            const std::function<void(const char*, std::size_t)>& sink) {
  const std::uint64_t last = offset + size - 1;
  std::string what = "GET blob " + blob.digest + " bytes " + std::to_string(offset) + "-" + std::to_string(last);
  if (size == 0 || offset > blob.size || size > blob.size - offset) {
    fail(Errc::invalid_argument, ref_.name() + ": " + what + ": outside the blob's " + std::to_string(blob.size) + " bytes");
  }
  std::uint64_t received = 0;
  HttpRequest r;
  r.url = url("/blobs/" + blob.digest);
  r.follow_redirects = true;
  r.sink_only_partial = true;
  r.headers.push_back("Range: bytes=" + std::to_string(offset) + "-" + std::to_string(last));
  r.sink = [&](const char* data, std::size_t n) {
    if (received + n > size) fail(Errc::integrity, "more than the " + std::to_string(size) + " bytes asked for; refused");
    sink(data, n);
    received += n;
  };
  HttpResponse reply = send(r, what);
  if (reply.status == 200) return false;
  if (reply.status != 206) refuse(reply, what);
  const std::string want = "bytes " + std::to_string(offset) + "-" + std::to_string(last) + "/" + std::to_string(blob.size);
  const std::string range = reply.header("content-range");
  if (range != want) {
    fail(Errc::integrity, ref_.name() + ": " + what + ": the registry answered with Content-Range '" + escape_control(range) +
                              "', not '" + want + "'; refused");
  }
  if (received != size) {
    fail(Errc::integrity, ref_.name() + ": " + what + ": " + std::to_string(received) + " bytes came, not " +
                              std::to_string(size) + "; refused");
  }
  return true;
}

}  // namespace kiln::registry
