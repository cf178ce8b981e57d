#include "auth.hpp"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "error.hpp"
#include "file_io.hpp"
#include "json.hpp"

namespace kiln::registry {
namespace {

constexpr const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// "https://host:port/v1/" -> "host:port"; "host:port" stays.
std::string config_key_registry(std::string key) {
  if (std::size_t at = key.find("://"); at != std::string::npos) key = key.substr(at + 3);
  key = key.substr(0, key.find('/'));
  for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return key;
}

std::string config_path() {
  if (const char* dir = std::getenv("DOCKER_CONFIG"); dir != nullptr && *dir != '\0') return std::string(dir) + "/config.json";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') return std::string(home) + "/.docker/config.json";
  return "";
}

}  // namespace

std::optional<std::string> base64_decode(const std::string& text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < text.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      char c = text[i + static_cast<std::size_t>(k)];
      if (c == '=' && i + 4 == text.size() && k >= 2) {
        v[k] = 0;
        ++pad;
        continue;
      }
      if (pad > 0) return std::nullopt;  // data after padding
      v[k] = sextet(c);
      if (v[k] < 0) return std::nullopt;
    }
    unsigned n = (static_cast<unsigned>(v[0]) << 18) | (static_cast<unsigned>(v[1]) << 12) |
                 (static_cast<unsigned>(v[2]) << 6) | static_cast<unsigned>(v[3]);
    out += static_cast<char>((n >> 16) & 0xff);
    if (pad < 2) out += static_cast<char>((n >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(n & 0xff);
  }
  return out;
}

std::string base64_encode(const std::string& bytes) {
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    unsigned n = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) n |= static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

std::optional<Credentials> docker_credentials(const std::string& registry) {
  std::string path = config_path();
  if (path.empty()) return std::nullopt;
  if (::access(path.c_str(), F_OK) != 0 && errno == ENOENT) return std::nullopt;  // no config: anonymous
  std::string text = read_small_file(path, 1u << 20);
  json::Value config = json::parse(text, path);
  const json::Value* auths = config.get("auths");
  if (auths == nullptr || auths->type != json::Value::Type::object) return std::nullopt;
  for (const auto& [key, entry] : auths->object) {
    if (config_key_registry(key) != registry) continue;
    const std::string* auth = entry.get_string("auth");
    if (auth == nullptr || auth->empty()) continue;  // an entry kept for a credential helper
    std::optional<std::string> decoded = base64_decode(*auth);
    std::size_t colon = decoded ? decoded->find(':') : std::string::npos;
    if (colon == std::string::npos) {
      fail(Errc::invalid_argument, path + ": auths[\"" + key + "\"].auth is not base64 of user:password");
    }
    return Credentials{decoded->substr(0, colon), decoded->substr(colon + 1), path};
  }
  return std::nullopt;
}

std::optional<Challenge> parse_challenge(const std::string& header) {
  std::size_t i = 0;
  auto skip = [&] {
    while (i < header.size() && (header[i] == ' ' || header[i] == '\t')) ++i;
  };
  skip();
  Challenge c;
  while (i < header.size() && header[i] != ' ') c.scheme += static_cast<char>(std::tolower(static_cast<unsigned char>(header[i++])));
  if (c.scheme.empty()) return std::nullopt;
  while (true) {
    skip();
    if (i >= header.size()) return c;
    std::string key;
    while (i < header.size() && header[i] != '=' && header[i] != ' ' && header[i] != ',') {
      key += static_cast<char>(std::tolower(static_cast<unsigned char>(header[i++])));
    }
    if (key.empty() || i >= header.size() || header[i] != '=') return std::nullopt;
    ++i;
    std::string value;
    if (i < header.size() && header[i] == '"') {
      ++i;
      while (i < header.size() && header[i] != '"') {
        if (header[i] == '\\' && i + 1 < header.size()) ++i;
        value += header[i++];
      }
      if (i >= header.size()) return std::nullopt;  // unterminated
      ++i;
    } else {
      while (i < header.size() && header[i] != ',' && header[i] != ' ') value += header[i++];
    }
    c.params[key] = value;
    skip();
    if (i < header.size() && header[i] == ',') ++i;
  }
}

}  // namespace kiln::registry
