// Launch expressions of range shapes: `cdiv(n, 128)`, `m % 16 == 0`. kiln.toml holds them as
// text; the packer compiles each one once into a small postfix bytecode (schema/FORMAT.md §4.1,
// "Expressions"), the kernel record stores the bytecode, and the runtime evaluates it at every
// launch with a fixed-size stack and 64-bit checked arithmetic: no parsing and no allocation on
// the launch path. Any arithmetic fault (overflow, division by zero) means "this shape does not
// match this call", never a wrapped value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/manifest.hpp"

namespace kiln {

// Opcodes (FORMAT.md §4.1). Binary operators pop b then a and push `a op b`.
namespace op {
constexpr std::uint8_t konst = 0x01;  // then i64 little-endian
constexpr std::uint8_t param = 0x02;  // then u16 little-endian: index into the kernel's params
constexpr std::uint8_t addr = 0x03;   // then u16 little-endian: a pointer parameter, read as its address
constexpr std::uint8_t add = 0x10, sub = 0x11, mul = 0x12, div = 0x13, mod = 0x14, neg = 0x15, cdiv = 0x16,
                       min = 0x17, max = 0x18;
constexpr std::uint8_t eq = 0x20, ne = 0x21, lt = 0x22, le = 0x23, gt = 0x24, ge = 0x25, land = 0x26, lor = 0x27;
}  // namespace op

constexpr std::size_t kMaxExprText = 256;   // characters of one expression in kiln.toml
constexpr int kMaxExprDepth = 32;           // nesting of the parse tree (parentheses count)
constexpr std::size_t kMaxExprCode = 4096;  // bytes of one compiled expression
constexpr int kMaxExprStack = 64;           // evaluation stack; depth 32 needs at most 33

enum class ExprKind { integer, condition };

// A compile error: what went wrong and at which character (0-based) of the text.
struct ExprProblem {
  std::string message;
  std::size_t offset = 0;
};

// Compiles `text` against the kernel's parameters. Returns false and fills `problem` when the
// text is not a valid expression of `kind` (conditions allow comparisons, && and ||, and
// `addr(p)`, the address of pointer parameter p, so that a condition can ask for alignment;
// integer expressions allow none of these: a launch computed from an address would differ per
// allocation).
bool compile_expr(std::string_view text, const std::vector<KernelParam>& params, ExprKind kind, ExprCode* out,
                  ExprProblem* problem);
// The bytecode of an integer literal (how an integer grid/block/shared_mem element is stored).
ExprCode constant_expr(std::int64_t v);

// Checks decoded bytecode: known opcodes, complete operands, parameter indices naming integer
// scalars (`addr`: pointers, and only in conditions), operand types, stack depth within
// kMaxExprStack, one result of `kind`. Returns an empty string when valid, else the problem.
std::string expr_code_problem(const ExprCode& code, const std::vector<KernelParam>& params, ExprKind kind);

enum class ExprFault : std::uint8_t { none, overflow, division_by_zero };
const char* expr_fault_text(ExprFault f);

// Reads integer scalar argument `index` of a call (as the runtime's args array gives it; a
// pointer argument is the 64-bit address it points at).
struct ExprArgs {
  void* const* args = nullptr;
  const ScalarType* types = nullptr;  // one per kernel parameter
};

// Reads a scalar argument as a signed 64-bit value (unsigned types zero-extended, u64 above
// 2^63-1 wraps to negative, as FORMAT.md says for values).
std::int64_t read_scalar_integer(const void* p, ScalarType type);

// The values read_scalar_integer can give for a type (u64: every int64).
void scalar_type_bounds(ScalarType type, std::int64_t* lo, std::int64_t* hi);
// The values a computed kernel argument (kernel_args `value`) may take to be passed as `type`:
// the type's own range, computed in signed 64-bit arithmetic, so u64 is 0..2^63-1 (a negative
// result is a mistake such as "0 - 1", never 2^64-1).
void computed_value_bounds(ScalarType type, std::int64_t* lo, std::int64_t* hi);

// Valid bytecode decoded once into fixed-width instructions, so that evaluation at each launch
// reads no variable-length operands and looks up no parameter types.
struct ExprInstr {
  std::int64_t imm = 0;      // op::konst: the value
  std::uint16_t param = 0;   // op::param, op::addr: the parameter's index
  std::uint8_t op = 0;
  ScalarType type = ScalarType::i64;  // op::param: the parameter's type
};
std::vector<ExprInstr> decode_expr(const ExprCode& code, const std::vector<KernelParam>& params);

// Evaluates decoded instructions (from valid bytecode). Conditions give 0 or 1. Every operand is
// evaluated (no short-circuit), so a fault anywhere is a fault of the whole expression.
// Allocates nothing: the launch path.
ExprFault eval_instrs(const ExprInstr* code, std::size_t size, void* const* args, std::int64_t* result);

// The same on valid bytecode, decoding it first (allocates: for kiln pack and tests).
ExprFault eval_expr(const std::uint8_t* code, std::size_t size, const ExprArgs& args, std::int64_t* result);

// The pointer parameters whose address valid bytecode reads (`addr`), added to `out` once each.
void expr_addresses(const ExprCode& code, std::vector<std::size_t>* out);

// The expression as readable text for `kiln inspect`, with the parentheses precedence needs.
std::string expr_text(const ExprCode& code, const std::vector<KernelParam>& params);

// An upper bound of an integer expression over every call the shape's `values` and `ranges`
// allow (interval arithmetic; `where` is ignored, which only widens the bound). Parameters the
// shape does not constrain range over their type. Results a call could only reach through an
// overflow are left out: such a call matches no shape. Returns false when the expression can
// take no value at all (e.g. always divides by zero).
bool expr_upper_bound(const ExprCode& code, const std::vector<KernelParam>& params, const ShapeSpec& shape,
                      std::int64_t* hi);
// Both bounds, the same way: every value a call the shape allows can give lies in [*lo, *hi].
// So a value range outside [*lo, *hi] proves that no call can reach it (kiln pack's refusal of
// launches and computed arguments no call can make valid).
bool expr_bounds(const ExprCode& code, const std::vector<KernelParam>& params, const ShapeSpec& shape,
                 std::int64_t* lo, std::int64_t* hi);

}  // namespace kiln
