// Finds the declared shape a call's arguments belong to: fixed shapes by the values of the
// scalar parameters they fix, range shapes by their values, ranges and where conditions, with
// the launch computed from the call (runtime/core/shape_program.hpp). Runs on every launch, so
// it reads arguments in place and allocates nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/launch_config.hpp"
#include "core/manifest.hpp"
#include "core/shape_program.hpp"

namespace kiln::engine {

class ShapeTable {
 public:
  ShapeTable() = default;
  explicit ShapeTable(const KernelSpec& kernel);
  // Not copied or moved: the memo of the last match points into shapes_ and is keyed by id_.
  ShapeTable(const ShapeTable&) = delete;
  ShapeTable& operator=(const ShapeTable&) = delete;

  // The first declared shape the arguments match, with its launch in `out`; null when none.
  // `args` holds one pointer per parameter, each at a value of the parameter's type.
  const ShapeProgram* match(void* const* args, LaunchConfig* out) const;
  // "m=300 n=256 k=256": the scalar values a call had, for the undeclared-shape reason.
  std::string describe_call(void* const* args) const;
  // Why each range shape refused the call ("any_m: m=9000 is outside its range [1, 8192]"),
  // joined by "; "; empty when the kernel has none. Allocates: the undeclared path only.
  std::string range_mismatches(void* const* args) const;
  // The largest dynamic shared memory any declared shape can launch with: a fixed shape's
  // value, a range shape's interval bound (FORMAT.md §4.1). Set once at load.
  unsigned max_shared_mem() const;

 private:
  // The match is a pure function of the call's integer scalars, so each thread remembers its
  // last one (table, values, result): a server repeating a call skips the expressions. Tables
  // are told apart by an id no other table ever gets (an address could be reused).
  static constexpr std::size_t kMemoScalars = 8;
  static constexpr std::size_t kMemoMinFixedShapes = 4;
  std::uint64_t id_ = 0;
  // What a match depends on: the integer scalars, and the pointers a `where` reads with addr().
  std::vector<std::pair<std::size_t, ScalarType>> memo_scalars_;
  bool memo_ = false;
  const ShapeProgram* scan(void* const* args, LaunchConfig* out) const;

  std::vector<ShapeProgram> shapes_;
  std::vector<ScalarType> types_;  // one per parameter, for ExprArgs
  std::vector<std::pair<std::size_t, std::pair<std::string, ScalarType>>> scalars_;  // for describe_call
};

// Reads a scalar argument as a signed 64-bit value (unsigned types zero-extended).
std::int64_t read_integer(const void* p, ScalarType type);

}  // namespace kiln::engine
