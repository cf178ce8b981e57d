/* Compiled as C99 with -Wall -Wextra -pedantic -Werror: the public header must be plain C. */
#include "kiln/kiln.h"

int main(void) {
  kiln_runtime_options options;
  kiln_stats stats;
  kiln_route route = KILN_ROUTE_NATIVE;
  kiln_reason reason = KILN_REASON_MATCH;
  (void)route;
  (void)reason;
  (void)stats;
  return kiln_runtime_options_init(&options, sizeof options) == KILN_OK && KILN_VERSION_NUMBER == kiln_version() ? 0 : 1;
}
