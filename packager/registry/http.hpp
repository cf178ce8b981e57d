// HTTP for the registry client, through libcurl: one connection kept per client, TLS with
// certificate verification, and every bound a registry that misbehaves could push against
// (reply size, time to connect, a stalled transfer, redirects). Only the kiln command links
// this: libkiln stays free of libcurl.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kiln::registry {

struct HttpOptions {
  bool allow_plain_http = false;   // http:// at all (loopback registries, or --insecure-http)
  bool insecure_http = false;      // --insecure-http: plain http anywhere, credentials included
  std::string ca_file;             // extra CA bundle (--ca-file); empty: the system's
  long connect_timeout_s = 15;
  long stall_timeout_s = 30;       // a transfer moving under 1 KiB/s this long is abandoned
  long total_timeout_s = 0;        // whole request; 0: none (archives can be large)
};

// Counted by the client, for `--stats` and the fleet benchmark.
struct HttpStats {
  std::uint64_t requests = 0, get = 0, head = 0, post = 0, put = 0, other = 0;
  std::uint64_t bytes_received = 0, bytes_sent = 0;  // bodies only
};

struct HttpResponse {
  long status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lowercased, of the last reply
  std::string body;                                          // empty when the request had a sink
  std::string header(const std::string& lowercase_name) const;  // "" when absent
};

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  // The request body: `body` when short; otherwise `source` reads `source_size` bytes from an
  // offset (a retry after a 401 starts again from 0).
  std::string body;
  std::function<std::size_t(std::uint64_t offset, char* buf, std::size_t n)> source;
  std::uint64_t source_size = 0;
  // The reply body: kept in HttpResponse::body up to max_body bytes (more is refused), or, with a
  // sink, handed to it piece by piece (only for a 2xx reply; other bodies are kept, bounded, for
  // the error message). A sink throws to abandon the transfer.
  std::function<void(const char* data, std::size_t n)> sink;
  std::uint64_t max_body = 1u << 20;
  // A ranged GET: only a 206 reply goes to the sink. Any other 2xx reply (a server that ignores
  // the Range header and sends the whole body) is abandoned at its first byte and returned with
  // its status, for the caller to fall back.
  bool sink_only_partial = false;
  bool follow_redirects = false;  // GET/HEAD of blobs: registries redirect to their storage
};

class Http {
 public:
  explicit Http(HttpOptions options);
  ~Http();
  Http(const Http&) = delete;
  Http& operator=(const Http&) = delete;
  // Performs the request. A transport failure (refused connection, TLS, timeout, a reply over
  // its bound, the connection dropped) throws kiln::Failure naming the URL; any HTTP status is
  // returned for the caller to judge. An exception a sink throws is rethrown as it was.
  HttpResponse perform(const HttpRequest& request);
  const HttpStats& stats() const { return stats_; }
  const HttpOptions& options() const { return options_; }

 private:
  struct Handle;
  std::unique_ptr<Handle> handle_;
  HttpOptions options_;
  HttpStats stats_;
};

// "https://host/path?q" -> "host" with its port if any: decides where credentials may go.
std::string url_authority(const std::string& url);
// Text a registry sent, safe to print: control bytes (escape sequences, line breaks) and DEL
// become \xNN, so it cannot rewrite the terminal or print a line of its own.
std::string escape_control(const std::string& text);
// The authority's host alone, without port or brackets: "http://[::1]:5000/x" -> "::1".
std::string url_host(const std::string& url);
std::string url_scheme(const std::string& url);
// Percent-encodes a query value (RFC 3986 unreserved characters kept).
std::string url_encode(const std::string& s);

}  // namespace kiln::registry
