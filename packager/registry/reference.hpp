// Where an archive lives in a registry: REGISTRY/REPO[:TAG], REGISTRY/REPO@sha256:<hex> (an OCI
// manifest digest) or REGISTRY/REPO@kiln:sha256:<hex> (a kiln digest). The registry is always
// named (no default registry: an archive never goes somewhere the user did not write down).
#pragma once

#include <string>

namespace kiln::registry {

struct Reference {
  std::string registry;    // host[:port], as written (lowercased)
  std::string repository;  // OCI's path grammar: lowercase components separated by '/'
  std::string tag;         // set when given as :TAG
  std::string digest;      // set when given as @sha256:<hex>
  std::string kiln_digest; // set when given as @kiln:sha256:<hex>
  std::string str() const;      // as the user would write it
  std::string name() const { return registry + "/" + repository; }
  // The registry's host without port or brackets.
  std::string host() const;
  // 127.0.0.1, ::1 (and the rest of 127/8), localhost: where plain http is allowed by default.
  bool is_loopback() const;
};

// Parses a reference; Errc::invalid_argument naming the part that is wrong.
Reference parse_reference(const std::string& text);

// OCI's tag grammar: [A-Za-z0-9_][A-Za-z0-9._-]{0,127}.
bool is_valid_tag(const std::string& tag);

}  // namespace kiln::registry
