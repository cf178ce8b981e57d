// Finds the declared shape a call's arguments belong to, by the values of the scalar
// parameters the shape fixes. Runs on every launch, so it reads arguments in place.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "launch_config.hpp"
#include "manifest.hpp"

namespace kiln::engine {

class ShapeTable {
 public:
  ShapeTable() = default;
  explicit ShapeTable(const KernelSpec& kernel);

  // The launch configuration of the first declared shape the arguments match, or null.
  // `args` holds one pointer per parameter, each at a value of the parameter's type.
  const LaunchConfig* match(void* const* args) const;
  // "m=300 n=256 k=256": the scalar values a call had, for the undeclared-shape reason.
  std::string describe_call(void* const* args) const;
  unsigned max_shared_mem() const;

 private:
  struct Condition {
    std::size_t param = 0;
    ScalarType type = ScalarType::i32;
    std::int64_t value = 0;
  };
  struct Shape {
    std::string name;
    std::vector<Condition> conditions;
    LaunchConfig config;
  };
  std::vector<Shape> shapes_;
  std::vector<std::pair<std::size_t, std::pair<std::string, ScalarType>>> scalars_;  // for describe_call
};

// Reads a scalar argument as a signed 64-bit value (unsigned types zero-extended).
std::int64_t read_integer(const void* p, ScalarType type);

}  // namespace kiln::engine
