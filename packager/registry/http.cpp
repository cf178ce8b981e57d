#include "registry/http.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <exception>
#include <mutex>

#include "core/error.hpp"

namespace kiln::registry {
namespace {

void global_init() {
  static std::once_flag once;
  static CURLcode result = CURLE_OK;
  std::call_once(once, [] { result = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (result != CURLE_OK) fail(Errc::internal, std::string("libcurl could not start: ") + curl_easy_strerror(result));
}

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  std::size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  std::size_t b = s.find_last_not_of(" \t\r\n");
  return s.substr(a, b - a + 1);
}

// One transfer's state, reached from libcurl's callbacks (C code: nothing may be thrown
// through it, so a failure is kept here and rethrown after curl_easy_perform returns).
struct Transfer {
  const HttpRequest* request = nullptr;
  HttpResponse* response = nullptr;
  long status = 0;               // of the reply being received (a redirect starts another)
  std::uint64_t read_at = 0;     // upload position
  std::uint64_t received = 0;    // body bytes of the final reply
  bool over_limit = false;
  bool range_ignored = false;    // sink_only_partial, and a 2xx reply other than 206 came
  std::exception_ptr failure;
  bool to_sink() const {
    return request->sink && status >= 200 && status < 300 && (!request->sink_only_partial || status == 206);
  }
};

std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::size_t n = size * count;
  std::string line(data, n);
  if (line.rfind("HTTP/", 0) == 0) {  // a new reply (after a redirect or a 100 Continue)
    t->response->headers.clear();
    t->response->body.clear();
    t->received = 0;
    std::size_t sp = line.find(' ');
    t->status = sp == std::string::npos ? 0 : std::strtol(line.c_str() + sp + 1, nullptr, 10);
    return n;
  }
  std::size_t colon = line.find(':');
  if (colon != std::string::npos) {
    t->response->headers.emplace_back(lowercase(trim(line.substr(0, colon))), trim(line.substr(colon + 1)));
  }
  return n;
}

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::size_t n = size * count;
  if (t->status >= 300 && t->status < 400) return n;  // a redirect's body: libcurl follows it
  if (t->request->sink_only_partial && t->status >= 200 && t->status < 300 && t->status != 206) {
    t->range_ignored = true;
    return 0;  // the whole body is coming: abandoned here, before it costs a download
  }
  if (t->to_sink()) {
    try {
      t->request->sink(data, n);
    } catch (...) {
      t->failure = std::current_exception();
      return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
    }
    t->received += n;
    return n;
  }
  // An error reply is kept for its message even with a sink, but bounded all the same.
  std::uint64_t bound = t->request->sink ? std::min<std::uint64_t>(t->request->max_body, 64 * 1024) : t->request->max_body;
  if (t->received + n > bound) {
    t->over_limit = true;
    return 0;
  }
  t->response->body.append(data, n);
  t->received += n;
  return n;
}

std::size_t on_read(char* buf, std::size_t size, std::size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const HttpRequest& r = *t->request;
  std::size_t want = size * count;
  std::size_t got = 0;
  try {
    if (r.source) {
      std::uint64_t left = r.source_size - std::min(r.source_size, t->read_at);
      got = r.source(t->read_at, buf, static_cast<std::size_t>(std::min<std::uint64_t>(want, left)));
    } else {
      std::uint64_t left = r.body.size() - std::min<std::uint64_t>(r.body.size(), t->read_at);
      got = static_cast<std::size_t>(std::min<std::uint64_t>(want, left));
      std::copy_n(r.body.data() + t->read_at, got, buf);
    }
  } catch (...) {
    t->failure = std::current_exception();
    return CURL_READFUNC_ABORT;
  }
  t->read_at += got;
  return got;
}

int on_seek(void* user, curl_off_t offset, int origin) {
  auto* t = static_cast<Transfer*>(user);
  if (origin != SEEK_SET || offset < 0) return CURL_SEEKFUNC_CANTSEEK;
  t->read_at = static_cast<std::uint64_t>(offset);
  return CURL_SEEKFUNC_OK;
}

}  // namespace

std::string HttpResponse::header(const std::string& name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return "";
}

struct Http::Handle {
  CURL* curl = nullptr;
  ~Handle() {
    if (curl != nullptr) curl_easy_cleanup(curl);
  }
};

Http::Http(HttpOptions options) : handle_(std::make_unique<Handle>()), options_(std::move(options)) {
  global_init();
  handle_->curl = curl_easy_init();
  if (handle_->curl == nullptr) fail(Errc::internal, "libcurl could not make a handle");
}

Http::~Http() = default;

HttpResponse Http::perform(const HttpRequest& request) {
  CURL* c = handle_->curl;
  curl_easy_reset(c);  // options cleared; the connection is kept for the next request
  HttpResponse response;
  Transfer t;
  t.request = &request;
  t.response = &response;
  char error[CURL_ERROR_SIZE] = {0};
  const char* protocols = options_.allow_plain_http ? "http,https" : "https";
  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, protocols);
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, protocols);  // no redirect from https down to http
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!options_.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, options_.ca_file.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "kiln");
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, options_.connect_timeout_s);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, options_.stall_timeout_s);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, options_.total_timeout_s);
  // Redirects only where asked, at most 5; libcurl drops an Authorization header on a redirect
  // to another host (CURLOPT_UNRESTRICTED_AUTH stays off).
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, request.follow_redirects ? 1L : 0L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
  curl_easy_setopt(c, CURLOPT_READDATA, &t);
  curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, on_seek);
  curl_easy_setopt(c, CURLOPT_SEEKDATA, &t);
  curl_off_t upload_size = static_cast<curl_off_t>(request.source ? request.source_size : request.body.size());
  if (request.method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    ++stats_.head;
  } else if (request.method == "GET") {
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    ++stats_.get;
  } else if (request.method == "PUT") {
    curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, upload_size);
    ++stats_.put;
  } else if (request.method == "POST") {
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, upload_size);
    ++stats_.post;
  } else {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    ++stats_.other;
  }
  ++stats_.requests;
  curl_slist* headers = nullptr;
  for (const std::string& h : request.headers) headers = curl_slist_append(headers, h.c_str());
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip before each upload
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  CURLcode rc = curl_easy_perform(c);
  curl_slist_free_all(headers);
  curl_off_t down = 0, up = 0;
  curl_easy_getinfo(c, CURLINFO_SIZE_DOWNLOAD_T, &down);
  curl_easy_getinfo(c, CURLINFO_SIZE_UPLOAD_T, &up);
  stats_.bytes_received += static_cast<std::uint64_t>(down);
  stats_.bytes_sent += static_cast<std::uint64_t>(up);
  if (t.failure) std::rethrow_exception(t.failure);
  if (t.range_ignored) {
    response.status = t.status;
    return response;
  }
  if (t.over_limit) {
    fail(Errc::limit, request.method + " " + request.url + ": the reply is over the limit of " +
                          std::to_string(request.sink ? 64 * 1024 : request.max_body) + " bytes; refused");
  }
  if (rc != CURLE_OK) {
    std::string detail = error[0] != '\0' ? error : curl_easy_strerror(rc);
    if (rc == CURLE_UNSUPPORTED_PROTOCOL && !options_.allow_plain_http && url_scheme(request.url) == "http") {
      detail += " (plain http is refused except for 127.0.0.1, ::1 and localhost; --insecure-http allows it)";
    }
    fail(Errc::io, request.method + " " + request.url + ": " + detail);
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

std::string url_scheme(const std::string& url) {
  std::size_t at = url.find("://");
  return at == std::string::npos ? "" : lowercase(url.substr(0, at));
}

std::string url_authority(const std::string& url) {
  std::size_t at = url.find("://");
  if (at == std::string::npos) return "";
  std::size_t start = at + 3;
  std::size_t end = url.find_first_of("/?#", start);
  std::string authority = url.substr(start, end == std::string::npos ? std::string::npos : end - start);
  std::size_t userinfo = authority.rfind('@');
  if (userinfo != std::string::npos) authority = authority.substr(userinfo + 1);
  return lowercase(authority);
}

std::string escape_control(const std::string& text) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string url_host(const std::string& url) {
  std::string authority = url_authority(url);
  if (!authority.empty() && authority.front() == '[') return authority.substr(1, authority.find(']') - 1);
  return authority.substr(0, authority.find(':'));
}

std::string url_encode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace kiln::registry
