#include "core/error.hpp"

namespace kiln {

const char* errc_name(Errc code) noexcept {
  switch (code) {
    case Errc::invalid_argument: return "invalid argument";
    case Errc::io: return "I/O error";
    case Errc::malformed: return "malformed archive";
    case Errc::integrity: return "integrity check failed";
    case Errc::signature: return "signature check failed";
    case Errc::manifest: return "invalid manifest";
    case Errc::code_object: return "code object mismatch";
    case Errc::limit: return "limit exceeded";
    case Errc::unsupported: return "unsupported";
    case Errc::not_found: return "not found";
    case Errc::refused: return "refused";
    case Errc::driver: return "driver error";
    case Errc::reference_failed: return "reference failed";
    case Errc::internal: return "internal error";
  }
  return "unknown error";
}

}  // namespace kiln
