#include "registry/auth.hpp"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "core/base64.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/json.hpp"

namespace kiln::registry {
namespace {

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
