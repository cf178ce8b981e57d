// Quoting text for the machine-readable outputs (JSON reports, TOML diagnostic reports, OCI
// manifests): one escaping rule for all of them. JSON's escapes are also valid in TOML's basic
// strings.
#pragma once

#include <string>

namespace kiln {

std::string json_quote(const std::string& s);  // "..." with \" \\ \n \r \t and \u00XX escapes (controls, DEL)

}  // namespace kiln
