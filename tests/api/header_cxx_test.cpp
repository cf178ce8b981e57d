// Compiled as C++17 with -Wall -Wextra -pedantic -Werror: the header must be clean C++ too.
#include "kiln/kiln.h"

int main() {
  kiln_runtime_options options{};
  return kiln_runtime_options_init(&options, sizeof options) == KILN_OK ? 0 : 1;
}
