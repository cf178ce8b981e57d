// Registry credentials and challenges: the docker config's "auths" entries (what `docker login`
// and `skopeo login` write), and the WWW-Authenticate header a registry answers 401 with
// (Basic, or Bearer: realm, service, scope for the token server).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "core/base64.hpp"

namespace kiln::registry {

struct Credentials {
  std::string user, password;
  std::string source;  // the config file they came from, for messages
};

// $DOCKER_CONFIG/config.json, else ~/.docker/config.json: the "auths" entry whose key names
// `registry` (as "host[:port]", or a URL such as "https://host[:port]/v1/"), its "auth" field
// base64 of "user:password". None when there is no file or no entry; a file that is there but
// malformed is an error naming it. Credential helpers (credsStore, credHelpers) are not run.
std::optional<Credentials> docker_credentials(const std::string& registry);

struct Challenge {
  std::string scheme;                         // lowercased: "basic", "bearer"
  std::map<std::string, std::string> params;  // realm, service, scope (keys lowercased)
};

// Parses one WWW-Authenticate value; nullopt when it is not `scheme param="value", ...`.
std::optional<Challenge> parse_challenge(const std::string& header);

using kiln::base64_decode;  // runtime/core/base64.hpp
using kiln::base64_encode;

}  // namespace kiln::registry
