#include "shape_match.hpp"

#include <cstring>

namespace kiln::engine {

std::int64_t read_integer(const void* p, ScalarType type) {
  switch (type) {
    case ScalarType::i8: { std::int8_t v; std::memcpy(&v, p, 1); return v; }
    case ScalarType::i16: { std::int16_t v; std::memcpy(&v, p, 2); return v; }
    case ScalarType::i32: { std::int32_t v; std::memcpy(&v, p, 4); return v; }
    case ScalarType::i64: { std::int64_t v; std::memcpy(&v, p, 8); return v; }
    case ScalarType::u8: { std::uint8_t v; std::memcpy(&v, p, 1); return v; }
    case ScalarType::u16: { std::uint16_t v; std::memcpy(&v, p, 2); return v; }
    case ScalarType::u32: { std::uint32_t v; std::memcpy(&v, p, 4); return v; }
    case ScalarType::u64: { std::uint64_t v; std::memcpy(&v, p, 8); return static_cast<std::int64_t>(v); }
    default: return 0;  // float parameters cannot fix a shape (the manifest parser refuses it)
  }
}

ShapeTable::ShapeTable(const KernelSpec& kernel) {
  for (std::size_t i = 0; i < kernel.params.size(); ++i) {
    const KernelParam& p = kernel.params[i];
    if (!p.is_pointer) scalars_.push_back({i, {p.name, p.type}});
  }
  for (const ShapeSpec& s : kernel.shapes) {
    Shape shape;
    shape.name = s.name;
    for (int d = 0; d < 3; ++d) {
      shape.config.grid[d] = s.grid[static_cast<std::size_t>(d)];
      shape.config.block[d] = s.block[static_cast<std::size_t>(d)];
    }
    shape.config.shared_mem = s.shared_mem;
    for (const auto& [name, value] : s.values) {
      for (std::size_t i = 0; i < kernel.params.size(); ++i) {
        if (kernel.params[i].name == name) shape.conditions.push_back({i, kernel.params[i].type, value});
      }
    }
    shapes_.push_back(std::move(shape));
  }
}

const LaunchConfig* ShapeTable::match(void* const* args) const {
  for (const Shape& s : shapes_) {
    bool all = true;
    for (const Condition& c : s.conditions) {
      if (read_integer(args[c.param], c.type) != c.value) {
        all = false;
        break;
      }
    }
    if (all) return &s.config;
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

unsigned ShapeTable::max_shared_mem() const {
  unsigned m = 0;
  for (const Shape& s : shapes_) m = s.config.shared_mem > m ? s.config.shared_mem : m;
  return m;
}

}  // namespace kiln::engine
