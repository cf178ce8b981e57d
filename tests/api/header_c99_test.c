/* Compiled as C99 with -Wall -Wextra -pedantic -Werror: the public headers must be plain C. */
#include "kiln/kiln.h"
#include "kiln/kiln_experimental.h"

int main(void) {
  kiln_runtime_options options;
  kiln_stats stats;
  kiln_x_member_info member;
  kiln_x_device_info device;
  kiln_route route = KILN_ROUTE_NATIVE;
  kiln_reason reason = KILN_REASON_MATCH;
  (void)route;
  (void)reason;
  (void)stats;
  if (kiln_x_member_info_init(&member, sizeof member) != KILN_OK || kiln_x_device_info_init(&device, sizeof device) != KILN_OK) {
    return 1;
  }
  return kiln_runtime_options_init(&options, sizeof options) == KILN_OK && KILN_VERSION_NUMBER == kiln_version() ? 0 : 1;
}
