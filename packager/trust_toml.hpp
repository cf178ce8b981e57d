// The source of a trust file, as an operator writes it (schema/SECURITY.md, "Trust files"):
//
//   version = 2
//   expires = 2027-06-01T00:00:00Z        # a TOML date-time with its offset
//   [root]
//   threshold = 2
//   keys = ["root-a.pub", "root-b.pub", "root-c.pub"]   # PEM files, relative to this file
//   [[key]]
//   public_key = "release-2026.pub"
//   roles = ["release"]                   # and/or "attestation"
//   not_before = 2026-01-01T00:00:00Z     # optional
//   not_after = 2027-01-01T00:00:00Z      # optional
//   [[revoked]]
//   key_id = "049b1b45f966f0347bc6f0f56068a47b"
//   reason = "laptop stolen 2026-11-30"
//
// `kiln trust sign` reads it into a TrustDocument and signs that with the root's private keys.
#pragma once

#include <string>

#include "core/trust_file.hpp"

namespace kiln::cli {

// Throws Errc::invalid_argument naming the file, line and key.
TrustDocument read_trust_source(const std::string& path);

}  // namespace kiln::cli
