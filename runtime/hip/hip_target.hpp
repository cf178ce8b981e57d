// AMD target IDs (LLVM AMDGPUUsage): <processor>(:<feature>(+|-))*, features sramecc and
// xnack. A feature left out of a code object's ID means "any": it runs with the device set
// either way; '+' or '-' runs only where the device has that setting. Pure functions: the HIP
// backend and the tests use them.
#pragma once

#include <string>
#include <vector>

namespace kiln::hip {

enum class Feature { any, on, off };

struct TargetId {
  std::string processor;  // gfx90a
  Feature sramecc = Feature::any;
  Feature xnack = Feature::any;
  std::string text;
};

bool parse_target_id(const std::string& text, TargetId* out);

// The processors a generic target (gfx9-generic, gfx11-generic, ...) runs on; empty otherwise.
std::vector<std::string> generic_family(const std::string& generic);

struct Judgement {
  bool fits = false;
  int rank = 0;      // more specific (more features pinned to the device's setting) first
  std::string why;
};

// A device reports its own ID with every feature it supports set (gfx90a:sramecc-:xnack+).
Judgement judge(const TargetId& code, const TargetId& device);

}  // namespace kiln::hip
