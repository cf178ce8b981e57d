// Which of a kernel's variants a call takes (MANIFEST.md, variant entries): the first, in file
// order, whose `when` conditions all hold for the call's integer scalars (a fault means a
// condition does not hold), else none and the kernel's own code. Runs on every launch of a
// kernel with variants, so it reads arguments in place and allocates nothing.
#pragma once

#include <string>
#include <vector>

#include "core/manifest.hpp"
#include "core/shape_expr.hpp"

namespace kiln::engine {

class VariantChoice {
 public:
  VariantChoice() = default;
  explicit VariantChoice(const KernelSpec& kernel);

  bool empty() const { return when_.empty(); }
  std::size_t size() const { return when_.size(); }
  // True when every condition of variant `i` holds for the call.
  bool holds(std::size_t i, void* const* args) const;
  // "k16 (k % 16 == 0)": a variant and its conditions as kiln.toml writes them.
  std::string describe(std::size_t i) const;
  // Why variant `i` does not take the call: "'k % 16 == 0' does not hold" or "'n / m' faults:
  // division by zero"; empty when it holds. Allocates: for explanations only.
  std::string mismatch(std::size_t i, void* const* args) const;

 private:
  std::vector<std::vector<std::vector<ExprInstr>>> when_;  // per variant, per condition
  std::vector<std::string> names_;
  std::vector<std::vector<std::string>> texts_;
};

}  // namespace kiln::engine
