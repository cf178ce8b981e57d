#include "core/status.hpp"

namespace kiln {

kiln_status status_of(Errc code) {
  switch (code) {
    case Errc::invalid_argument: return KILN_ERR_INVALID_ARGUMENT;
    case Errc::io: return KILN_ERR_IO;
    case Errc::malformed: return KILN_ERR_MALFORMED;
    case Errc::integrity: return KILN_ERR_INTEGRITY;
    case Errc::signature: return KILN_ERR_SIGNATURE;
    case Errc::manifest: return KILN_ERR_MANIFEST;
    case Errc::code_object: return KILN_ERR_CODE_OBJECT;
    case Errc::limit: return KILN_ERR_LIMIT;
    case Errc::unsupported: return KILN_ERR_UNSUPPORTED;
    case Errc::not_found: return KILN_ERR_NOT_FOUND;
    case Errc::refused: return KILN_ERR_REFUSED;
    case Errc::driver: return KILN_ERR_DRIVER;
    case Errc::reference_failed: return KILN_ERR_REFERENCE_FAILED;
    case Errc::internal: return KILN_ERR_INTERNAL;
  }
  return KILN_ERR_INTERNAL;
}

Errc errc_of(kiln_status status) {
  switch (status) {
    case KILN_ERR_INVALID_ARGUMENT: return Errc::invalid_argument;
    case KILN_ERR_IO: return Errc::io;
    case KILN_ERR_MALFORMED: return Errc::malformed;
    case KILN_ERR_INTEGRITY: return Errc::integrity;
    case KILN_ERR_SIGNATURE: return Errc::signature;
    case KILN_ERR_MANIFEST: return Errc::manifest;
    case KILN_ERR_CODE_OBJECT: return Errc::code_object;
    case KILN_ERR_LIMIT: return Errc::limit;
    case KILN_ERR_UNSUPPORTED: return Errc::unsupported;
    case KILN_ERR_NOT_FOUND: return Errc::not_found;
    case KILN_ERR_REFUSED: return Errc::refused;
    case KILN_ERR_DRIVER: return Errc::driver;
    case KILN_ERR_REFERENCE_FAILED: return Errc::reference_failed;
    case KILN_OK:
    case KILN_ERR_BUFFER_TOO_SMALL:
    case KILN_ERR_OUT_OF_MEMORY:
    case KILN_ERR_INTERNAL: break;
  }
  return Errc::internal;
}

}  // namespace kiln
