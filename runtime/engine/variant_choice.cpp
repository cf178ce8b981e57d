#include "engine/variant_choice.hpp"

namespace kiln::engine {

VariantChoice::VariantChoice(const KernelSpec& kernel) {
  for (const VariantSpec& v : kernel.variants) {
    std::vector<std::vector<ExprInstr>> conditions;
    std::vector<std::string> texts;
    for (const ExprCode& c : v.when) {
      conditions.push_back(decode_expr(c, kernel.params));
      texts.push_back(expr_text(c, kernel.params));
    }
    when_.push_back(std::move(conditions));
    names_.push_back(v.name);
    texts_.push_back(std::move(texts));
  }
}

bool VariantChoice::holds(std::size_t i, void* const* args) const {
  for (const std::vector<ExprInstr>& c : when_[i]) {
    std::int64_t result = 0;
    if (eval_instrs(c.data(), c.size(), args, &result) != ExprFault::none || result != 1) return false;
  }
  return true;
}

std::string VariantChoice::describe(std::size_t i) const {
  std::string out = names_[i] + " (";
  for (std::size_t c = 0; c < texts_[i].size(); ++c) out += (c ? " && " : "") + texts_[i][c];
  return out + ")";
}

std::string VariantChoice::mismatch(std::size_t i, void* const* args) const {
  for (std::size_t c = 0; c < when_[i].size(); ++c) {
    std::int64_t result = 0;
    ExprFault fault = eval_instrs(when_[i][c].data(), when_[i][c].size(), args, &result);
    if (fault != ExprFault::none) return "'" + texts_[i][c] + "' faults: " + expr_fault_text(fault);
    if (result != 1) return "'" + texts_[i][c] + "' does not hold";
  }
  return "";
}

}  // namespace kiln::engine
