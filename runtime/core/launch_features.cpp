#include "core/launch_features.hpp"

#include "core/shape_expr.hpp"

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

namespace {

const char* const kInterleave[] = {"none", "16B", "32B"};
const char* const kSwizzle[] = {"none", "32B", "64B", "128B"};
const char* const kL2[] = {"none", "64B", "128B", "256B"};
const char* const kOob[] = {"zero", "nan"};
// Stored values are checked when a record is decoded; this keeps a bad one from indexing past.
const char* pick(const char* const* names, std::size_t count, std::uint8_t v) { return v < count ? names[v] : "?"; }

std::string exprs_text(const std::vector<ExprCode>& codes, const KernelSpec& k) {
  std::string out;
  for (const ExprCode& c : codes) out += (out.empty() ? "" : ", ") + expr_text(c, k.params);
  return out;
}

std::string call_param_name(std::uint16_t index, const KernelSpec& k) {
  return index < k.params.size() ? k.params[index].name : "?";
}

}  // namespace

std::string kernel_arg_text(const KernelArg& a, const KernelSpec& k) {
  switch (a.kind) {
    case KernelArgKind::param:
      return call_param_name(a.param, k);
    case KernelArgKind::value:
      return a.name + " = " + scalar_type_name(a.type) + "(" + expr_text(a.value, k.params) + ")";
    case KernelArgKind::tensor_map: {
      const TensorMapRecipe& r = a.tensor_map;
      std::string box, es;
      for (std::uint32_t v : r.box) box += (box.empty() ? "" : ", ") + std::to_string(v);
      for (std::uint32_t v : r.element_strides) es += (es.empty() ? "" : ", ") + std::to_string(v);
      return a.name + " = tensor_map(" + call_param_name(r.pointer, k) + ", " + tensor_map_dtype_name(r.dtype) + ", dims(" +
             exprs_text(r.dims, k) + "), strides(" + exprs_text(r.strides, k) + "), box(" + box + "), element_strides(" + es +
             "), interleave " + pick(kInterleave, 3, r.interleave) + ", swizzle " + pick(kSwizzle, 4, r.swizzle) + ", l2 " +
             pick(kL2, 4, r.l2_promotion) + ", oob " + pick(kOob, 2, r.oob_fill) + ")";
    }
    case KernelArgKind::scratch:
      return a.name + " = scratch(" + expr_text(a.scratch.bytes, k.params) + " bytes" +
             (a.scratch.per_program ? " per program" : " per launch") + ", align " + std::to_string(a.scratch.align) + ")";
  }
  return a.name;
}

void kernel_arg_json(json::Writer& w, const KernelArg& a, const KernelSpec& k) {
  static const char* const kinds[] = {"param", "value", "tensor_map", "scratch"};
  w.begin_object().field("name", a.name).field("kind", kinds[static_cast<int>(a.kind)]);
  switch (a.kind) {
    case KernelArgKind::param:
      w.field("param", call_param_name(a.param, k));
      break;
    case KernelArgKind::value:
      w.field("type", scalar_type_name(a.type)).field("value", expr_text(a.value, k.params));
      break;
    case KernelArgKind::tensor_map: {
      const TensorMapRecipe& r = a.tensor_map;
      w.field("pointer", call_param_name(r.pointer, k)).field("dtype", tensor_map_dtype_name(r.dtype));
      w.key("dims").begin_array();
      for (const ExprCode& c : r.dims) w.value(expr_text(c, k.params));
      w.end_array().key("strides").begin_array();
      for (const ExprCode& c : r.strides) w.value(expr_text(c, k.params));
      w.end_array().key("box").begin_array();
      for (std::uint32_t v : r.box) w.value(v);
      w.end_array().key("element_strides").begin_array();
      for (std::uint32_t v : r.element_strides) w.value(v);
      w.end_array()
          .field("interleave", pick(kInterleave, 3, r.interleave))
          .field("swizzle", pick(kSwizzle, 4, r.swizzle))
          .field("l2_promotion", pick(kL2, 4, r.l2_promotion))
          .field("oob_fill", pick(kOob, 2, r.oob_fill));
      break;
    }
    case KernelArgKind::scratch:
      w.field("bytes", expr_text(a.scratch.bytes, k.params))
          .field("per", a.scratch.per_program ? "program" : "launch")
          .field("align", a.scratch.align);
      break;
  }
  w.end_object();
}

}  // namespace kiln
