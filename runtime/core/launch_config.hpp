// How a kernel is launched: grid, block and dynamic shared memory, as a declared shape gives
// them. The same for every backend.
#pragma once

namespace kiln {

struct LaunchConfig {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared_mem = 0;  // dynamic shared memory, bytes
};

}  // namespace kiln
