#include "registry/reference.hpp"

#include <arpa/inet.h>

#include <cctype>

#include "core/error.hpp"
#include "core/sha256.hpp"

namespace kiln::registry {
namespace {

bool lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// One path component: [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)* (the distribution spec's grammar).
bool is_component(const std::string& s) {
  if (s.empty() || !lower_alnum(s.front()) || !lower_alnum(s.back())) return false;
  for (std::size_t i = 0; i < s.size();) {
    if (lower_alnum(s[i])) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < s.size() && !lower_alnum(s[j])) ++j;
    std::string sep = s.substr(i, j - i);
    bool dashes = sep.find_first_not_of('-') == std::string::npos;
    if (!(sep == "." || sep == "_" || sep == "__" || dashes)) return false;
    i = j;
  }
  return true;
}

bool is_repository(const std::string& repo) {
  if (repo.empty() || repo.size() > 255) return false;
  std::size_t start = 0;
  for (;;) {
    std::size_t slash = repo.find('/', start);
    if (!is_component(repo.substr(start, slash == std::string::npos ? std::string::npos : slash - start))) return false;
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

// host[:port] or [ipv6][:port]: letters, digits, '.', '-', and a numeric port.
bool is_registry(const std::string& r) {
  if (r.empty() || r.size() > 255) return false;
  std::string host = r, port;
  if (r.front() == '[') {
    std::size_t close = r.find(']');
    if (close == std::string::npos) return false;
    for (char c : r.substr(1, close - 1)) {
      if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.') return false;
    }
    std::string rest = r.substr(close + 1);
    if (!rest.empty() && rest[0] != ':') return false;
    port = rest.empty() ? "" : rest.substr(1);
    if (!rest.empty() && port.empty()) return false;
    host = "x";
  } else if (std::size_t colon = r.find(':'); colon != std::string::npos) {
    host = r.substr(0, colon);
    port = r.substr(colon + 1);
    if (port.empty()) return false;
  }
  if (host.empty()) return false;
  for (char c : host) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') return false;
  }
  if (port.size() > 5) return false;
  for (char c : port) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

bool is_digest(const std::string& s) {
  Sha256 d{};
  return parse_digest_string(s, &d);
}

}  // namespace

bool is_valid_tag(const std::string& tag) {
  if (tag.empty() || tag.size() > 128) return false;
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  if (!word(tag[0])) return false;
  for (char c : tag) {
    if (!word(c) && c != '.' && c != '-') return false;
  }
  return true;
}

std::string Reference::str() const {
  std::string s = name();
  if (!kiln_digest.empty()) return s + "@kiln:" + kiln_digest;
  if (!digest.empty()) return s + "@" + digest;
  if (!tag.empty()) return s + ":" + tag;
  return s;
}

std::string Reference::host() const {
  if (!registry.empty() && registry.front() == '[') return registry.substr(1, registry.find(']') - 1);
  return registry.substr(0, registry.find(':'));
}

bool Reference::is_loopback() const {
  // A numeric address only: a name such as 127.example.com can point anywhere.
  std::string h = host();
  in_addr v4{};
  if (::inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  return h == "localhost" || h == "::1";
}

Reference parse_reference(const std::string& text) {
  auto bad = [&](const std::string& why) -> void {
    fail(Errc::invalid_argument, "'" + text + "' is not a registry reference: " + why +
                                     " (expected REGISTRY/REPO[:TAG], REGISTRY/REPO@sha256:<hex> or "
                                     "REGISTRY/REPO@kiln:sha256:<hex>)");
  };
  Reference r;
  std::size_t slash = text.find('/');
  if (slash == std::string::npos) bad("no registry: name it, e.g. registry.example.com/" + text);
  r.registry = text.substr(0, slash);
  for (char& c : r.registry) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!is_registry(r.registry)) bad("'" + r.registry + "' is not a host[:port]");
  std::string rest = text.substr(slash + 1);
  if (std::size_t at = rest.find('@'); at != std::string::npos) {
    std::string digest = rest.substr(at + 1);
    rest = rest.substr(0, at);
    if (digest.rfind("kiln:", 0) == 0) {
      r.kiln_digest = digest.substr(5);
      if (!is_digest(r.kiln_digest)) bad("the kiln digest is not sha256:<64 lowercase hex>");
    } else {
      r.digest = digest;
      if (!is_digest(r.digest)) bad("the digest is not sha256:<64 lowercase hex> (a kiln digest is written @kiln:sha256:<hex>)");
    }
  }
  if (std::size_t colon = rest.rfind(':'); colon != std::string::npos) {
    if (!r.digest.empty() || !r.kiln_digest.empty()) bad("both a tag and a digest");
    r.tag = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
    if (!is_valid_tag(r.tag)) bad("'" + r.tag + "' is not a tag ([A-Za-z0-9_][A-Za-z0-9._-], at most 128)");
  }
  r.repository = rest;
  if (!is_repository(r.repository)) {
    bad("'" + r.repository + "' is not a repository (lowercase letters and digits, separated by . _ __ - or /)");
  }
  return r;
}

}  // namespace kiln::registry
