#include "launch_features.hpp"

namespace kiln {

LaunchFeatures launch_features(const KernelSpec& kernel) {
  LaunchFeatures f;
  for (const KernelArg& a : kernel.kernel_args) {
    if (a.kind == KernelArgKind::tensor_map && f.tensor_map == nullptr) f.tensor_map = &a;
    if (a.kind == KernelArgKind::scratch && f.scratch == nullptr) f.scratch = &a;
  }
  for (const ShapeSpec& s : kernel.shapes) {
    if (s.has_cluster && f.cluster == nullptr) f.cluster = &s;
  }
  return f;
}

static std::string cluster_text(const ShapeSpec& s) {
  return std::to_string(s.cluster[0]) + "x" + std::to_string(s.cluster[1]) + "x" + std::to_string(s.cluster[2]);
}

std::string describe_first_feature(const LaunchFeatures& f) {
  if (f.tensor_map) return "kernel_args entry '" + f.tensor_map->name + "' (a tensor map)";
  if (f.cluster) return "shape '" + f.cluster->name + "' (" + cluster_text(*f.cluster) + " clusters)";
  if (f.scratch) return "kernel_args entry '" + f.scratch->name + "' (scratch memory)";
  return "";
}

}  // namespace kiln
