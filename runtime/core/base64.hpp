// Base64 (RFC 4648, the standard alphabet with padding), for the texts kiln exchanges with other
// tools: registry credentials, DSSE envelopes.
#pragma once

#include <optional>
#include <string>

namespace kiln {

std::string base64_encode(const std::string& bytes);
// Strict: padding required, nothing outside the alphabet, no whitespace; nullopt otherwise.
std::optional<std::string> base64_decode(const std::string& text);

}  // namespace kiln
