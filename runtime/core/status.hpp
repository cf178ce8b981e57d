// kiln's error codes and kiln.h's statuses, one for one: how an error crosses the C boundary
// (runtime/api), and how the kiln command, which calls the C API, turns a status back into its
// exit code.
#pragma once

#include "core/error.hpp"
#include "kiln/kiln.h"

namespace kiln {

kiln_status status_of(Errc code);
// KILN_OK, BUFFER_TOO_SMALL, OUT_OF_MEMORY and INTERNAL, which no Errc names, give Errc::internal.
Errc errc_of(kiln_status status);

}  // namespace kiln
