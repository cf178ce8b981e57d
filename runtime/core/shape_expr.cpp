#include "core/shape_expr.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <limits>

namespace kiln {
namespace {

bool integer_type(ScalarType t) { return !is_float_type(t); }

void put_i64(ExprCode& c, std::int64_t v) {
  auto u = static_cast<std::uint64_t>(v);
  for (int i = 0; i < 8; ++i) c.push_back(static_cast<std::uint8_t>(u >> (8 * i)));
}
std::int64_t get_i64(const std::uint8_t* p) {
  std::uint64_t u = 0;
  for (int i = 0; i < 8; ++i) u |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return static_cast<std::int64_t>(u);
}
std::uint16_t get_u16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }

// What each opcode takes and gives: operand count, operand kind, result kind.
struct OpInfo {
  int arity = -1;  // -1: not an opcode
  bool takes_condition = false;
  bool gives_condition = false;
  const char* text = "";
  int precedence = 0;  // for expr_text: 1 || ... 7 unary, 8 primary
};
OpInfo op_info(std::uint8_t o) {
  switch (o) {
    case op::konst: case op::param: case op::addr: return {0, false, false, "", 8};
    case op::add: return {2, false, false, "+", 5};
    case op::sub: return {2, false, false, "-", 5};
    case op::mul: return {2, false, false, "*", 6};
    case op::div: return {2, false, false, "/", 6};
    case op::mod: return {2, false, false, "%", 6};
    case op::neg: return {1, false, false, "-", 7};
    case op::cdiv: return {2, false, false, "cdiv", 8};
    case op::min: return {2, false, false, "min", 8};
    case op::max: return {2, false, false, "max", 8};
    case op::eq: return {2, false, true, "==", 3};
    case op::ne: return {2, false, true, "!=", 3};
    case op::lt: return {2, false, true, "<", 4};
    case op::le: return {2, false, true, "<=", 4};
    case op::gt: return {2, false, true, ">", 4};
    case op::ge: return {2, false, true, ">=", 4};
    case op::land: return {2, true, true, "&&", 2};
    case op::lor: return {2, true, true, "||", 1};
    default: return {};
  }
}

// ---- compiling: recursive descent straight to postfix -------------------------------------

class Compiler {
 public:
  Compiler(std::string_view text, const std::vector<KernelParam>& params, ExprCode* out)
      : text_(text), params_(params), out_(out) {}

  // Each parse function returns the height of the subtree it parsed and sets `cond_` to whether
  // it is a condition. Problems throw Failure (caught in compile_expr; it never leaves this file).
  struct Failure {
    ExprProblem problem;
  };

  int parse_top(ExprKind kind) {
    kind_ = kind;
    skip();
    int h = parse_or();
    if (pos_ < text_.size()) fail("unexpected '" + std::string(1, text_[pos_]) + "'", pos_);
    return h;
  }
  bool condition() const { return cond_; }

 private:
  [[noreturn]] void fail(const std::string& message, std::size_t at) { throw Failure{{message, at}}; }

  void skip() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  bool eat(std::string_view token) {
    if (text_.substr(pos_, token.size()) != token) return false;
    // `<` must not eat the first half of `<=`, nor `=` start anything on its own.
    if (token.size() == 1 && (token == "<" || token == ">") && pos_ + 1 < text_.size() && text_[pos_ + 1] == '=') {
      return false;
    }
    pos_ += token.size();
    skip();
    return true;
  }
  int checked(int height, std::size_t at) {
    if (height > kMaxExprDepth) fail("nested deeper than " + std::to_string(kMaxExprDepth) + " levels", at);
    return height;
  }
  void want_integer(bool cond, std::size_t at, const char* what) {
    if (cond) fail(std::string("a comparison cannot be an operand of ") + what, at);
  }
  void want_condition_kind(std::size_t at, const char* token) {
    if (kind_ != ExprKind::condition) {
      fail(std::string("'") + token + "' is allowed only in `where` conditions; grid, block and shared_mem are integers",
           at);
    }
  }

  int parse_or() {
    std::size_t start = pos_;
    int h = parse_and();
    while (true) {
      std::size_t at = pos_;
      if (!eat("||")) return h;
      want_condition_kind(at, "||");
      bool left = cond_;
      int r = parse_and();
      if (!left || !cond_) fail("'||' joins conditions (comparisons), not integers", at);
      out_->push_back(op::lor);
      h = checked(std::max(h, r) + 1, start);
      cond_ = true;
    }
  }
  int parse_and() {
    std::size_t start = pos_;
    int h = parse_eq();
    while (true) {
      std::size_t at = pos_;
      if (!eat("&&")) return h;
      want_condition_kind(at, "&&");
      bool left = cond_;
      int r = parse_eq();
      if (!left || !cond_) fail("'&&' joins conditions (comparisons), not integers", at);
      out_->push_back(op::land);
      h = checked(std::max(h, r) + 1, start);
      cond_ = true;
    }
  }
  int parse_eq() {
    std::size_t start = pos_;
    int h = parse_rel();
    while (true) {
      std::size_t at = pos_;
      std::uint8_t o;
      const char* token;
      if (eat("==")) o = op::eq, token = "==";
      else if (eat("!=")) o = op::ne, token = "!=";
      else return h;
      want_condition_kind(at, token);
      want_integer(cond_, at, token);
      int r = parse_rel();
      want_integer(cond_, at, token);
      out_->push_back(o);
      h = checked(std::max(h, r) + 1, start);
      cond_ = true;
    }
  }
  int parse_rel() {
    std::size_t start = pos_;
    int h = parse_add();
    while (true) {
      std::size_t at = pos_;
      std::uint8_t o;
      const char* token;
      if (eat("<=")) o = op::le, token = "<=";
      else if (eat(">=")) o = op::ge, token = ">=";
      else if (eat("<")) o = op::lt, token = "<";
      else if (eat(">")) o = op::gt, token = ">";
      else return h;
      want_condition_kind(at, token);
      want_integer(cond_, at, token);
      int r = parse_add();
      want_integer(cond_, at, token);
      out_->push_back(o);
      h = checked(std::max(h, r) + 1, start);
      cond_ = true;
    }
  }
  int parse_add() {
    std::size_t start = pos_;
    int h = parse_mul();
    while (true) {
      std::size_t at = pos_;
      std::uint8_t o;
      if (eat("+")) o = op::add;
      else if (eat("-")) o = op::sub;
      else return h;
      want_integer(cond_, at, o == op::add ? "'+'" : "'-'");
      int r = parse_mul();
      want_integer(cond_, at, o == op::add ? "'+'" : "'-'");
      out_->push_back(o);
      h = checked(std::max(h, r) + 1, start);
    }
  }
  int parse_mul() {
    std::size_t start = pos_;
    int h = parse_unary();
    while (true) {
      std::size_t at = pos_;
      std::uint8_t o;
      const char* token;
      if (eat("*")) o = op::mul, token = "'*'";
      else if (eat("/")) o = op::div, token = "'/'";
      else if (eat("%")) o = op::mod, token = "'%'";
      else return h;
      want_integer(cond_, at, token);
      int r = parse_unary();
      want_integer(cond_, at, token);
      out_->push_back(o);
      h = checked(std::max(h, r) + 1, start);
    }
  }
  int parse_unary() {
    std::size_t at = pos_;
    if (eat("-")) {
      int h = parse_unary();
      want_integer(cond_, at, "unary '-'");
      out_->push_back(op::neg);
      return checked(h + 1, at);
    }
    return parse_primary();
  }
  int parse_primary() {
    std::size_t at = pos_;
    if (pos_ >= text_.size()) fail("expected a number, a parameter, a function or '(' but the expression ends", at);
    char c = text_[pos_];
    if (c == '(') {
      eat("(");
      int h = parse_or();
      if (!eat(")")) fail("expected ')' to close the '(' at character " + std::to_string(at + 1), pos_);
      return checked(h + 1, at);
    }
    if (c >= '0' && c <= '9') {
      std::uint64_t v = 0;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        v = v * 10 + static_cast<std::uint64_t>(text_[pos_] - '0');
        if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
          fail("integer literal out of the 64-bit signed range", at);
        }
        ++pos_;
      }
      if (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
        fail("malformed number (only decimal integers are allowed)", at);
      }
      skip();
      out_->push_back(op::konst);
      put_i64(*out_, static_cast<std::int64_t>(v));
      cond_ = false;
      return 1;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t end = pos_;
      while (end < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[end])) || text_[end] == '_')) ++end;
      std::string name(text_.substr(pos_, end - pos_));
      pos_ = end;
      skip();
      if (eat("(")) return call(name, at);
      return parameter(name, at);
    }
    fail("unexpected '" + std::string(1, c) + "' (expected a number, a parameter, a function or '(')", at);
  }
  int call(const std::string& name, std::size_t at) {
    if (name == "addr") return address(at);
    std::uint8_t o;
    if (name == "cdiv") o = op::cdiv;
    else if (name == "min") o = op::min;
    else if (name == "max") o = op::max;
    else fail("unknown function '" + name + "' (the functions are cdiv, min, max and, in conditions, addr)", at);
    std::size_t a_at = pos_;
    int a = parse_or();
    want_integer(cond_, a_at, name.c_str());
    if (!eat(",")) fail(name + " takes two arguments: expected ','", pos_);
    std::size_t b_at = pos_;
    int b = parse_or();
    want_integer(cond_, b_at, name.c_str());
    if (!eat(")")) fail(name + " takes two arguments: expected ')'", pos_);
    out_->push_back(o);
    cond_ = false;
    return checked(std::max(a, b) + 1, at);
  }
  // addr(p): the device address a call passes for pointer parameter p, so that a condition can
  // ask for alignment (`addr(a) % 16 == 0`). Conditions only: a launch computed from an address
  // would change with every allocation.
  int address(std::size_t at) {
    if (kind_ != ExprKind::condition) {
      fail("addr() is allowed only in conditions (`where`, a variant's `when`); grid, block and shared_mem are "
           "integers of the scalar parameters", at);
    }
    std::size_t name_at = pos_;
    std::size_t end = pos_;
    while (end < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[end])) || text_[end] == '_')) ++end;
    std::string name(text_.substr(pos_, end - pos_));
    pos_ = end;
    skip();
    if (name.empty()) fail("addr takes the name of a pointer parameter", name_at);
    if (!eat(")")) fail("addr takes one pointer parameter: expected ')'", pos_);
    std::size_t i = 0;
    while (i < params_.size() && params_[i].name != name) ++i;
    if (i == params_.size() || !params_[i].is_pointer) {
      std::string known;
      for (const KernelParam& p : params_) {
        if (p.is_pointer) known += (known.empty() ? "" : ", ") + p.name;
      }
      fail("addr(" + name + "): '" + name + "' is not a pointer parameter (the pointer parameters are: " +
               (known.empty() ? "none" : known) + ")", name_at);
    }
    if (i > 0xffff) fail("'" + name + "' is parameter " + std::to_string(i) + "; expressions reach the first 65536", name_at);
    out_->push_back(op::addr);
    out_->push_back(static_cast<std::uint8_t>(i & 0xff));
    out_->push_back(static_cast<std::uint8_t>(i >> 8));
    cond_ = false;
    return 2;  // the call and its argument
  }
  int parameter(const std::string& name, std::size_t at) {
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const KernelParam& p = params_[i];
      if (p.name != name) continue;
      if (p.is_pointer) fail("'" + name + "' is a pointer parameter; expressions use integer scalar parameters", at);
      if (!integer_type(p.type)) {
        fail("'" + name + "' is a " + scalar_type_name(p.type) +
                 " parameter; expressions use integer scalar parameters only", at);
      }
      if (i > 0xffff) fail("'" + name + "' is parameter " + std::to_string(i) + "; expressions reach the first 65536", at);
      out_->push_back(op::param);
      out_->push_back(static_cast<std::uint8_t>(i & 0xff));
      out_->push_back(static_cast<std::uint8_t>(i >> 8));
      cond_ = false;
      return 1;
    }
    std::string known;
    for (const KernelParam& p : params_) {
      if (!p.is_pointer && integer_type(p.type)) known += (known.empty() ? "" : ", ") + p.name;
    }
    fail("unknown name '" + name + "' (the integer scalar parameters are: " + (known.empty() ? "none" : known) + ")",
         at);
  }

  std::string_view text_;
  const std::vector<KernelParam>& params_;
  ExprCode* out_;
  std::size_t pos_ = 0;
  bool cond_ = false;
  ExprKind kind_ = ExprKind::integer;
};

// ---- checked arithmetic shared by evaluation ---------------------------------------------

constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

// One binary or unary step. Returns a fault or none with *r set.
ExprFault apply(std::uint8_t o, std::int64_t a, std::int64_t b, std::int64_t* r) {
  switch (o) {
    case op::add: return __builtin_add_overflow(a, b, r) ? ExprFault::overflow : ExprFault::none;
    case op::sub: return __builtin_sub_overflow(a, b, r) ? ExprFault::overflow : ExprFault::none;
    case op::mul: return __builtin_mul_overflow(a, b, r) ? ExprFault::overflow : ExprFault::none;
    case op::neg: return __builtin_sub_overflow(std::int64_t{0}, a, r) ? ExprFault::overflow : ExprFault::none;
    case op::div:
    case op::mod:
    case op::cdiv: {
      if (b == 0) return ExprFault::division_by_zero;
      // The quotient of INT64_MIN by -1 does not fit; C leaves / and % undefined there.
      if (a == kMin && b == -1) return ExprFault::overflow;
      std::int64_t q = a / b, m = a % b;
      if (o == op::div) *r = q;
      else if (o == op::mod) *r = m;
      else *r = (m != 0 && ((m < 0) == (b < 0))) ? q + 1 : q;  // |q| < |a| when m != 0: no overflow
      return ExprFault::none;
    }
    case op::min: *r = a < b ? a : b; return ExprFault::none;
    case op::max: *r = a > b ? a : b; return ExprFault::none;
    case op::eq: *r = a == b; return ExprFault::none;
    case op::ne: *r = a != b; return ExprFault::none;
    case op::lt: *r = a < b; return ExprFault::none;
    case op::le: *r = a <= b; return ExprFault::none;
    case op::gt: *r = a > b; return ExprFault::none;
    case op::ge: *r = a >= b; return ExprFault::none;
    case op::land: *r = (a != 0) && (b != 0); return ExprFault::none;
    case op::lor: *r = (a != 0) || (b != 0); return ExprFault::none;
    default: return ExprFault::overflow;  // unreachable for validated code
  }
}

}  // namespace

bool compile_expr(std::string_view text, const std::vector<KernelParam>& params, ExprKind kind, ExprCode* out,
                  ExprProblem* problem) {
  out->clear();
  if (text.size() > kMaxExprText) {
    *problem = {"longer than " + std::to_string(kMaxExprText) + " characters", kMaxExprText};
    return false;
  }
  Compiler c(text, params, out);
  try {
    c.parse_top(kind);
  } catch (const Compiler::Failure& f) {
    *problem = f.problem;
    out->clear();
    return false;
  }
  if (kind == ExprKind::condition && !c.condition()) {
    *problem = {"a condition must compare (==, !=, <, <=, >, >=), found an integer expression", 0};
    out->clear();
    return false;
  }
  if (out->size() > kMaxExprCode) {
    *problem = {"compiles to more than " + std::to_string(kMaxExprCode) + " bytes", 0};
    out->clear();
    return false;
  }
  return true;
}

ExprCode constant_expr(std::int64_t v) {
  ExprCode c{op::konst};
  put_i64(c, v);
  return c;
}

std::string expr_code_problem(const ExprCode& code, const std::vector<KernelParam>& params, ExprKind kind) {
  if (code.empty() || code.size() > kMaxExprCode) return "expression of " + std::to_string(code.size()) + " bytes";
  bool cond[kMaxExprStack];
  int depth = 0;
  for (std::size_t i = 0; i < code.size();) {
    std::uint8_t o = code[i];
    OpInfo info = op_info(o);
    std::string at = " at byte " + std::to_string(i) + " of an expression";
    if (info.arity < 0) return "unknown opcode " + std::to_string(o) + at;
    if (o == op::konst || o == op::param || o == op::addr) {
      std::size_t need = o == op::konst ? 8 : 2;
      if (code.size() - i - 1 < need) return "truncated operand" + at;
      if (o == op::param) {
        std::size_t index = get_u16(&code[i + 1]);
        if (index >= params.size() || params[index].is_pointer || !integer_type(params[index].type)) {
          return "parameter " + std::to_string(index) + " is not an integer scalar" + at;
        }
      }
      if (o == op::addr) {
        std::size_t index = get_u16(&code[i + 1]);
        if (index >= params.size() || !params[index].is_pointer) {
          return "addr of parameter " + std::to_string(index) + ", which is not a pointer" + at;
        }
        if (kind != ExprKind::condition) return "addr in an integer expression" + at;
      }
      if (depth == kMaxExprStack) return "stack deeper than " + std::to_string(kMaxExprStack) + at;
      cond[depth++] = false;
      i += 1 + need;
      continue;
    }
    if (depth < info.arity) return "operator without its operands" + at;
    for (int k = 1; k <= info.arity; ++k) {
      if (cond[depth - k] != info.takes_condition) return "operand of the wrong kind" + at;
    }
    depth -= info.arity;
    cond[depth++] = info.gives_condition;
    ++i;
  }
  if (depth != 1) return "expression leaves " + std::to_string(depth) + " values";
  if (cond[0] != (kind == ExprKind::condition)) {
    return kind == ExprKind::condition ? "condition gives an integer" : "integer expression gives a condition";
  }
  return "";
}

const char* expr_fault_text(ExprFault f) {
  switch (f) {
    case ExprFault::none: return "no fault";
    case ExprFault::overflow: return "64-bit overflow";
    case ExprFault::division_by_zero: return "division by zero";
  }
  return "?";
}

std::int64_t read_scalar_integer(const void* p, ScalarType type) {
  switch (type) {
    case ScalarType::i8: { std::int8_t v; std::memcpy(&v, p, 1); return v; }
    case ScalarType::i16: { std::int16_t v; std::memcpy(&v, p, 2); return v; }
    case ScalarType::i32: { std::int32_t v; std::memcpy(&v, p, 4); return v; }
    case ScalarType::i64: { std::int64_t v; std::memcpy(&v, p, 8); return v; }
    case ScalarType::u8: { std::uint8_t v; std::memcpy(&v, p, 1); return v; }
    case ScalarType::u16: { std::uint16_t v; std::memcpy(&v, p, 2); return v; }
    case ScalarType::u32: { std::uint32_t v; std::memcpy(&v, p, 4); return v; }
    case ScalarType::u64: { std::uint64_t v; std::memcpy(&v, p, 8); return static_cast<std::int64_t>(v); }
    default: return 0;  // float parameters never reach here (the manifest parser refuses them)
  }
}

std::vector<ExprInstr> decode_expr(const ExprCode& code, const std::vector<KernelParam>& params) {
  std::vector<ExprInstr> out;
  for (std::size_t i = 0; i < code.size();) {
    ExprInstr in;
    in.op = code[i];
    if (in.op == op::konst) {
      in.imm = get_i64(&code[i + 1]);
      i += 9;
    } else if (in.op == op::param) {
      in.param = get_u16(&code[i + 1]);
      in.type = params[in.param].type;
      i += 3;
    } else if (in.op == op::addr) {
      in.param = get_u16(&code[i + 1]);
      i += 3;
    } else {
      ++i;
    }
    out.push_back(in);
  }
  return out;
}

ExprFault eval_instrs(const ExprInstr* code, std::size_t size, void* const* args, std::int64_t* result) {
  std::int64_t stack[kMaxExprStack];
  int depth = 0;
  ExprFault fault = ExprFault::none;
  for (std::size_t i = 0; i < size; ++i) {
    const ExprInstr& in = code[i];
    if (in.op == op::konst) {
      stack[depth++] = in.imm;
    } else if (in.op == op::param) {
      stack[depth++] = read_scalar_integer(args[in.param], in.type);
    } else if (in.op == op::addr) {
      stack[depth++] = read_scalar_integer(args[in.param], ScalarType::u64);  // a 64-bit device address
    } else if (in.op == op::neg) {
      ExprFault f = apply(in.op, stack[depth - 1], 0, &stack[depth - 1]);
      if (fault == ExprFault::none) fault = f;
    } else {
      std::int64_t r = 0;
      ExprFault f = apply(in.op, stack[depth - 2], stack[depth - 1], &r);
      // The first fault is the one reported; evaluation goes on (with 0) so that the result
      // does not depend on where a fault happened.
      if (fault == ExprFault::none) fault = f;
      stack[depth - 2] = f == ExprFault::none ? r : 0;
      --depth;
    }
  }
  *result = stack[0];
  return fault;
}

ExprFault eval_expr(const std::uint8_t* code, std::size_t size, const ExprArgs& args, std::int64_t* result) {
  // Decoding needs the types, which ExprArgs carries one per parameter.
  std::vector<ExprInstr> instrs;
  for (std::size_t i = 0; i < size;) {
    ExprInstr in;
    in.op = code[i];
    if (in.op == op::konst) {
      in.imm = get_i64(code + i + 1);
      i += 9;
    } else if (in.op == op::param) {
      in.param = get_u16(code + i + 1);
      in.type = args.types[in.param];
      i += 3;
    } else if (in.op == op::addr) {
      in.param = get_u16(code + i + 1);
      i += 3;
    } else {
      ++i;
    }
    instrs.push_back(in);
  }
  return eval_instrs(instrs.data(), instrs.size(), args.args, result);
}

void expr_addresses(const ExprCode& code, std::vector<std::size_t>* out) {
  for (std::size_t i = 0; i < code.size();) {
    std::uint8_t o = code[i];
    if (o == op::addr) {
      std::size_t index = get_u16(&code[i + 1]);
      if (std::find(out->begin(), out->end(), index) == out->end()) out->push_back(index);
    }
    i += o == op::konst ? 9 : (o == op::param || o == op::addr) ? 3 : 1;
  }
}

std::string expr_text(const ExprCode& code, const std::vector<KernelParam>& params) {
  if (!expr_code_problem(code, params, ExprKind::integer).empty() &&
      !expr_code_problem(code, params, ExprKind::condition).empty()) {
    return "<invalid expression>";
  }
  std::vector<std::pair<std::string, int>> stack;  // text, precedence
  for (std::size_t i = 0; i < code.size();) {
    std::uint8_t o = code[i];
    OpInfo info = op_info(o);
    if (o == op::konst) {
      std::int64_t v = get_i64(&code[i + 1]);
      stack.push_back({std::to_string(v), v < 0 ? 7 : 8});
      i += 9;
      continue;
    }
    if (o == op::param || o == op::addr) {
      const std::string& name = params[get_u16(&code[i + 1])].name;
      stack.push_back({o == op::addr ? "addr(" + name + ")" : name, 8});
      i += 3;
      continue;
    }
    ++i;
    if (info.arity == 1) {
      auto a = stack.back();
      stack.back() = {"-" + (a.second < 7 ? "(" + a.first + ")" : a.first), 7};
      continue;
    }
    auto b = stack.back();
    stack.pop_back();
    auto a = stack.back();
    if (o == op::cdiv || o == op::min || o == op::max) {
      stack.back() = {std::string(info.text) + "(" + a.first + ", " + b.first + ")", 8};
      continue;
    }
    // Left-associative: the right operand needs parentheses at equal precedence too.
    std::string left = a.second < info.precedence ? "(" + a.first + ")" : a.first;
    std::string right = b.second <= info.precedence ? "(" + b.first + ")" : b.first;
    stack.back() = {left + " " + info.text + " " + right, info.precedence};
  }
  return stack.back().first;
}

namespace {

struct Interval {
  __int128 lo = 0, hi = 0;
  bool empty = false;
};

Interval clamp(__int128 lo, __int128 hi) {
  // Values outside int64 are overflows, and a call that overflows matches no shape.
  Interval r;
  r.lo = std::max<__int128>(lo, kMin);
  r.hi = std::min<__int128>(hi, kMax);
  r.empty = r.lo > r.hi;
  return r;
}

Interval type_interval(ScalarType t) {
  switch (t) {
    case ScalarType::i8: return {-128, 127};
    case ScalarType::i16: return {-32768, 32767};
    case ScalarType::i32: return {std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max()};
    case ScalarType::u8: return {0, 255};
    case ScalarType::u16: return {0, 65535};
    case ScalarType::u32: return {0, std::numeric_limits<std::uint32_t>::max()};
    default: return {kMin, kMax};  // i64, and u64 read as a signed value
  }
}

__int128 trunc_div(__int128 a, __int128 b) { return a / b; }
__int128 ceil_div(__int128 a, __int128 b) {
  __int128 q = a / b, m = a % b;
  return (m != 0 && ((m < 0) == (b < 0))) ? q + 1 : q;
}

// a op b over the box a × [bl, bh] where [bl, bh] does not contain 0: both / and cdiv are
// monotone in each argument while b keeps its sign, so the extremes lie at the corners.
Interval divide_part(std::uint8_t o, Interval a, __int128 bl, __int128 bh) {
  if (o == op::mod) {
    __int128 m = std::max(bl < 0 ? -bl : bl, bh < 0 ? -bh : bh) - 1;  // |a % b| <= |b| - 1
    __int128 lo = a.lo >= 0 ? 0 : std::max(a.lo, -m);
    __int128 hi = a.hi <= 0 ? 0 : std::min(a.hi, m);
    return clamp(lo, hi);
  }
  auto f = o == op::div ? trunc_div : ceil_div;
  __int128 c[4] = {f(a.lo, bl), f(a.lo, bh), f(a.hi, bl), f(a.hi, bh)};
  return clamp(*std::min_element(c, c + 4), *std::max_element(c, c + 4));
}

Interval join(Interval x, Interval y) {
  if (x.empty) return y;
  if (y.empty) return x;
  return {std::min(x.lo, y.lo), std::max(x.hi, y.hi), false};
}

Interval interval_op(std::uint8_t o, Interval a, Interval b) {
  if (a.empty || b.empty) return {0, 0, true};
  switch (o) {
    case op::add: return clamp(a.lo + b.lo, a.hi + b.hi);
    case op::sub: return clamp(a.lo - b.hi, a.hi - b.lo);
    case op::neg: return clamp(-a.hi, -a.lo);
    case op::mul: {
      __int128 c[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
      return clamp(*std::min_element(c, c + 4), *std::max_element(c, c + 4));
    }
    case op::div:
    case op::mod:
    case op::cdiv: {
      // Division by zero matches nothing: only the nonzero parts of b count.
      Interval r{0, 0, true};
      if (b.lo < 0) r = join(r, divide_part(o, a, b.lo, std::min<__int128>(b.hi, -1)));
      if (b.hi > 0) r = join(r, divide_part(o, a, std::max<__int128>(b.lo, 1), b.hi));
      return r;
    }
    case op::min: return {std::min(a.lo, b.lo), std::min(a.hi, b.hi), false};
    case op::max: return {std::max(a.lo, b.lo), std::max(a.hi, b.hi), false};
    default: return {0, 1, false};  // comparisons and logic
  }
}

}  // namespace

void scalar_type_bounds(ScalarType type, std::int64_t* lo, std::int64_t* hi) {
  Interval i = type_interval(type);
  *lo = static_cast<std::int64_t>(i.lo);
  *hi = static_cast<std::int64_t>(i.hi);
}

void computed_value_bounds(ScalarType type, std::int64_t* lo, std::int64_t* hi) {
  scalar_type_bounds(type, lo, hi);
  if (type == ScalarType::u64) *lo = 0;
}

bool expr_upper_bound(const ExprCode& code, const std::vector<KernelParam>& params, const ShapeSpec& shape,
                      std::int64_t* hi) {
  std::int64_t lo = 0;
  return expr_bounds(code, params, shape, &lo, hi);
}

bool expr_bounds(const ExprCode& code, const std::vector<KernelParam>& params, const ShapeSpec& shape,
                 std::int64_t* lo, std::int64_t* hi) {
  std::vector<Interval> stack;
  for (std::size_t i = 0; i < code.size();) {
    std::uint8_t o = code[i];
    if (o == op::konst) {
      __int128 v = get_i64(&code[i + 1]);
      stack.push_back({v, v, false});
      i += 9;
    } else if (o == op::param) {
      const KernelParam& p = params[get_u16(&code[i + 1])];
      Interval v = type_interval(p.type);
      for (const auto& [name, value] : shape.values) {
        if (name == p.name) v = {value, value, false};
      }
      for (const ShapeRange& r : shape.ranges) {
        if (r.name == p.name) v = clamp(std::max<__int128>(v.lo, r.min), std::min<__int128>(v.hi, r.max));
      }
      stack.push_back(v);
      i += 3;
    } else if (o == op::addr) {
      stack.push_back(type_interval(ScalarType::u64));  // any address (conditions only)
      i += 3;
    } else if (o == op::neg) {
      stack.back() = interval_op(o, stack.back(), stack.back());
      ++i;
    } else {
      Interval b = stack.back();
      stack.pop_back();
      stack.back() = interval_op(o, stack.back(), b);
      ++i;
    }
  }
  if (stack.size() != 1 || stack[0].empty) return false;
  *lo = static_cast<std::int64_t>(stack[0].lo);
  *hi = static_cast<std::int64_t>(stack[0].hi);
  return true;
}

}  // namespace kiln
