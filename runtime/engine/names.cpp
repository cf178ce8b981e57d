// The library version and the static names of statuses, routes and reasons. Part of the C API (declared in kiln.h),
// kept here because the engine's own messages use them too.
#include "kiln/kiln.h"

extern "C" {

unsigned kiln_version(void) { return KILN_VERSION_NUMBER; }

const char* kiln_version_string(void) {
#define KILN_STR2(x) #x
#define KILN_STR(x) KILN_STR2(x)
  return KILN_STR(KILN_VERSION_MAJOR) "." KILN_STR(KILN_VERSION_MINOR) "." KILN_STR(KILN_VERSION_PATCH);
}

const char* kiln_status_string(kiln_status status) {
  switch (status) {
    case KILN_OK: return "ok";
    case KILN_ERR_INVALID_ARGUMENT: return "invalid argument";
    case KILN_ERR_IO: return "I/O error";
    case KILN_ERR_MALFORMED: return "malformed archive";
    case KILN_ERR_INTEGRITY: return "integrity check failed";
    case KILN_ERR_SIGNATURE: return "signature check failed";
    case KILN_ERR_MANIFEST: return "invalid manifest";
    case KILN_ERR_CODE_OBJECT: return "code object mismatch";
    case KILN_ERR_LIMIT: return "limit exceeded";
    case KILN_ERR_UNSUPPORTED: return "unsupported";
    case KILN_ERR_NOT_FOUND: return "not found";
    case KILN_ERR_REFUSED: return "refused: no fitting kernel and no usable reference";
    case KILN_ERR_DRIVER: return "GPU driver error";
    case KILN_ERR_REFERENCE_FAILED: return "the reference function failed";
    case KILN_ERR_BUFFER_TOO_SMALL: return "buffer too small";
    case KILN_ERR_OUT_OF_MEMORY: return "out of memory";
    case KILN_ERR_INTERNAL: return "internal error";
  }
  return "unknown status";
}

const char* kiln_route_string(kiln_route route) {
  switch (route) {
    case KILN_ROUTE_NATIVE: return "native";
    case KILN_ROUTE_PTX_JIT: return "ptx-jit";
    case KILN_ROUTE_REFERENCE: return "reference";
    case KILN_ROUTE_REFUSED: return "refused";
  }
  return "unknown";
}

const char* kiln_reason_string(kiln_reason reason) {
  switch (reason) {
    case KILN_REASON_MATCH: return "match";
    case KILN_REASON_NO_DRIVER: return "no-driver";
    case KILN_REASON_NO_DEVICE: return "no-device";
    case KILN_REASON_ARCH_MISMATCH: return "arch-mismatch";
    case KILN_REASON_DRIVER_TOO_OLD: return "driver-too-old";
    case KILN_REASON_LOAD_FAILED: return "load-failed";
    case KILN_REASON_UNDECLARED_SHAPE: return "undeclared-shape";
    case KILN_REASON_BACKEND_UNAVAILABLE: return "backend-unavailable";
    case KILN_REASON_DEVICE_FEATURE: return "device-feature";
    case KILN_REASON_UNATTESTED: return "unattested";
  }
  return "unknown";
}

}  // extern "C"
