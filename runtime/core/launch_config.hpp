// How a kernel is launched: grid, block and dynamic shared memory, as a declared shape gives
// them. The same for every backend.
#pragma once

#include <cstdint>

namespace kiln {

struct TensorMapRecipe;

struct LaunchConfig {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared_mem = 0;  // dynamic shared memory, bytes
  // Thread block cluster dimensions; all 0 for a launch without clusters (cuLaunchKernel).
  unsigned cluster[3] = {0, 0, 0};
  bool has_cluster() const { return cluster[0] != 0; }
};

// What a tensor map is encoded from at one launch: the stored recipe and the call's values.
struct TensorMapRequest {
  const TensorMapRecipe* recipe = nullptr;
  std::uint64_t address = 0;      // the pointer argument
  std::uint64_t dims[5] = {};     // recipe->dims evaluated, rank of them
  std::uint64_t strides[4] = {};  // recipe->strides evaluated, rank - 1 of them
};

}  // namespace kiln
