#include "shape_match.hpp"

#include "shape_expr.hpp"

namespace kiln::engine {

std::int64_t read_integer(const void* p, ScalarType type) { return read_scalar_integer(p, type); }

ShapeTable::ShapeTable(const KernelSpec& kernel) {
  for (std::size_t i = 0; i < kernel.params.size(); ++i) {
    const KernelParam& p = kernel.params[i];
    types_.push_back(p.type);
    if (!p.is_pointer) scalars_.push_back({i, {p.name, p.type}});
  }
  // Everything a shape needs at launch is prepared here, when the kernel is resolved (warm-up
  // resolves every kernel): the first launch of a shape does no more work than the next.
  shapes_.reserve(kernel.shapes.size());
  for (const ShapeSpec& s : kernel.shapes) shapes_.emplace_back(s, kernel.params);
}

const ShapeProgram* ShapeTable::match(void* const* args, LaunchConfig* out) const {
  ExprArgs a{args, types_.data()};
  for (const ShapeProgram& s : shapes_) {
    if (s.match(a, out)) return &s;
  }
  return nullptr;
}

std::string ShapeTable::describe_call(void* const* args) const {
  std::string out;
  for (const auto& [index, named] : scalars_) {
    if (named.second == ScalarType::f16 || named.second == ScalarType::bf16 || named.second == ScalarType::f32 ||
        named.second == ScalarType::f64) {
      continue;
    }
    out += (out.empty() ? "" : " ") + named.first + "=" + std::to_string(read_integer(args[index], named.second));
  }
  return out;
}

std::string ShapeTable::range_mismatches(void* const* args) const {
  ExprArgs a{args, types_.data()};
  std::string out;
  int listed = 0;
  for (const ShapeProgram& s : shapes_) {
    if (!s.dynamic()) continue;
    // A kernel may declare many range shapes; the first few say enough.
    if (++listed > 8) {
      out += "; ...";
      break;
    }
    out += (out.empty() ? "" : "; ") + s.name() + ": " + s.mismatch(a);
  }
  return out;
}

unsigned ShapeTable::max_shared_mem() const {
  unsigned m = 0;
  for (const ShapeProgram& s : shapes_) m = s.max_shared_mem() > m ? s.max_shared_mem() : m;
  return m;
}

}  // namespace kiln::engine
