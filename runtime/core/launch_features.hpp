// What a kernel's launch needs beyond loading its code: tensor maps, scratch memory, clusters.
// Each backend decides from this whether a device can serve the kernel (CUDA: cuda_features.hpp).
#pragma once

#include <string>

#include "core/json.hpp"
#include "core/manifest.hpp"

namespace kiln {

struct LaunchFeatures {
  const KernelArg* tensor_map = nullptr;  // the first tensor map entry, if any
  const KernelArg* scratch = nullptr;     // the first scratch entry, if any
  const ShapeSpec* cluster = nullptr;     // the first shape launched with a cluster, if any
  bool any() const { return tensor_map || scratch || cluster; }
};

LaunchFeatures launch_features(const KernelSpec& kernel);

// "kernel_args entry 'a_desc' (a tensor map)", "shape 'big' (2x1x1 clusters)": what the first
// feature present is, for refusal reasons. Empty when there is none.
std::string describe_first_feature(const LaunchFeatures& f);

// One kernel_args entry as `kiln inspect` shows it: "in_map = tensor_map(in, f32, dims(cols,
// rows), strides(cols * 4), box(32, 32), swizzle none, l2 none, oob zero)", "out", "lda = i64(k)",
// "ws = scratch(1024 bytes per program, align 256)".
std::string kernel_arg_text(const KernelArg& arg, const KernelSpec& kernel);
// The same as JSON: {"name", "kind", ...} with every recipe field (inspect --json, preflight).
void kernel_arg_json(json::Writer& w, const KernelArg& arg, const KernelSpec& kernel);

}  // namespace kiln
