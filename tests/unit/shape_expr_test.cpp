// Range shapes: launch expressions compiled, encoded, evaluated and matched; kiln.toml mistakes
// named with their line and column. schema/MANIFEST.md "range shapes", FORMAT.md §4.1.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <iterator>

#include "core/error.hpp"
#include "core/kernel_table.hpp"
#include "core/manifest.hpp"
#include "core/shape_expr.hpp"
#include "core/shape_program.hpp"

namespace kiln {
namespace {

const char* kRanges = R"toml([package]
name = "ranges"
kernel_revision = "1"
sequence = 1

[[kernel]]
name = "mm"
entry = "mm"
backend = "cuda"
params = [
  { name = "a", type = "ptr", dtype = "f32" },
  { name = "m", type = "i32" },
  { name = "n", type = "i32" },
  { name = "k", type = "i64" },
  { name = "alpha", type = "f32" },
  { name = "small", type = "u8" },
]
code = [{ arch = "compute_90", file = "k.ptx" }]

[[kernel.shape]]
name = "small_m"
ranges = { m = [1, 64] }
values = { n = 4096, k = 4096 }
grid = ["cdiv(n, 128)", 1]
block = [128]
shared_mem = 1024

[[kernel.shape]]
name = "any_m"
ranges = { m = [1, 8192] }
values = { n = 4096, k = 4096 }
where = ["m % 16 == 0"]
grid = ["cdiv(n, 128)", "cdiv(m, 128)", 1]
block = [256, 1, 1]
shared_mem = "min(65536, 1024 * cdiv(k, 64))"

[[kernel.shape]]
name = "fixed"
values = { m = 5, n = 5, k = 5 }
grid = [1]
block = [1]
)toml";

// The kernel's parameters as the expressions see them.
std::vector<KernelParam> params() { return parse_manifest(kRanges, "kiln.toml").kernels[0].params; }

// A call's arguments: one slot per parameter of kRanges' kernel.
struct Call {
  std::uint64_t a_address = 0;  // what a launch's args hold for a pointer: its device address
  std::int32_t m = 0, n = 0;
  std::int64_t k = 0;
  float alpha = 1;
  std::uint8_t small = 0;
  void* args[6];
  ScalarType types[6] = {ScalarType::f32, ScalarType::i32, ScalarType::i32, ScalarType::i64, ScalarType::f32, ScalarType::u8};
  Call(std::int32_t m_, std::int32_t n_, std::int64_t k_, std::uint8_t s = 0) : m(m_), n(n_), k(k_), small(s) {
    args[0] = &a_address;
    args[1] = &m;
    args[2] = &n;
    args[3] = &k;
    args[4] = &alpha;
    args[5] = &small;
  }
  ExprArgs expr_args() const { return {args, types}; }
};

ExprCode compile(const std::string& text, ExprKind kind = ExprKind::integer) {
  ExprCode code;
  ExprProblem problem;
  EXPECT_TRUE(compile_expr(text, params(), kind, &code, &problem)) << text << ": " << problem.message;
  EXPECT_EQ(expr_code_problem(code, params(), kind), "") << text;
  return code;
}

ExprFault eval(const std::string& text, const Call& call, std::int64_t* out, ExprKind kind = ExprKind::integer) {
  ExprCode code = compile(text, kind);
  return eval_expr(code.data(), code.size(), call.expr_args(), out);
}

std::int64_t value(const std::string& text, const Call& call = Call(0, 0, 0)) {
  std::int64_t v = 0;
  EXPECT_EQ(eval(text, call, &v), ExprFault::none) << text;
  return v;
}

TEST(ShapeExpr, PrecedenceAndAssociativityAreCs) {
  EXPECT_EQ(value("2 + 3 * 4"), 14);
  EXPECT_EQ(value("(2 + 3) * 4"), 20);
  EXPECT_EQ(value("10 - 4 - 3"), 3);
  EXPECT_EQ(value("100 / 10 / 5"), 2);
  EXPECT_EQ(value("-2 * 3"), -6);
  EXPECT_EQ(value("- -7"), 7);
  EXPECT_EQ(value("7 % 4 * 2"), 6);
  std::int64_t v = -1;
  EXPECT_EQ(eval("1 + 2 < 4 && 3 == 3 || 0 > 1", Call(0, 0, 0), &v, ExprKind::condition), ExprFault::none);
  EXPECT_EQ(v, 1);
  EXPECT_EQ(eval("1 > 2 || 2 > 1 && 0 > 1", Call(0, 0, 0), &v, ExprKind::condition), ExprFault::none);
  EXPECT_EQ(v, 0);  // && binds tighter than ||
  EXPECT_EQ(value("m * 2 + n", Call(5, 7, 0)), 17);
}

TEST(ShapeExpr, DivisionTruncatesTowardZeroAndCdivRoundsUp) {
  EXPECT_EQ(value("-7 / 2"), -3);
  EXPECT_EQ(value("7 / -2"), -3);
  EXPECT_EQ(value("-7 % 2"), -1);
  EXPECT_EQ(value("7 % -2"), 1);
  EXPECT_EQ(value("cdiv(7, 2)"), 4);
  EXPECT_EQ(value("cdiv(8, 2)"), 4);
  EXPECT_EQ(value("cdiv(-7, 2)"), -3);
  EXPECT_EQ(value("cdiv(7, -2)"), -3);
  EXPECT_EQ(value("cdiv(-7, -2)"), 4);
  EXPECT_EQ(value("cdiv(0, 5)"), 0);
  EXPECT_EQ(value("min(3, -4)"), -4);
  EXPECT_EQ(value("max(3, -4)"), 3);
  EXPECT_EQ(value("max(min(m, 10), 2)", Call(50, 0, 0)), 10);
}

TEST(ShapeExpr, FaultsInsteadOfWrapping) {
  std::int64_t v = 0;
  Call call(0, 0, 0);
  EXPECT_EQ(eval("m / n", call, &v), ExprFault::division_by_zero);
  EXPECT_EQ(eval("m % n", call, &v), ExprFault::division_by_zero);
  EXPECT_EQ(eval("cdiv(1, n)", call, &v), ExprFault::division_by_zero);
  Call big(0, 0, LLONG_MAX);
  EXPECT_EQ(eval("k + 1", big, &v), ExprFault::overflow);
  EXPECT_EQ(eval("k * 2", big, &v), ExprFault::overflow);
  EXPECT_EQ(eval("-k - 2", big, &v), ExprFault::overflow);
  Call lowest(0, 0, LLONG_MIN);
  EXPECT_EQ(eval("-k", lowest, &v), ExprFault::overflow);
  EXPECT_EQ(eval("k / -1", lowest, &v), ExprFault::overflow);
  EXPECT_EQ(eval("k % -1", lowest, &v), ExprFault::overflow);
  EXPECT_EQ(eval("cdiv(k, -1)", lowest, &v), ExprFault::overflow);
  // A fault anywhere faults the whole condition, even where || would not need that side.
  EXPECT_EQ(eval("1 == 1 || m / n == 0", call, &v, ExprKind::condition), ExprFault::division_by_zero);
  EXPECT_EQ(value("9223372036854775807"), LLONG_MAX);
}

TEST(ShapeExpr, ReadsEveryIntegerTypeAsItsValue) {
  Call call(-3, 0, 0, 200);
  EXPECT_EQ(value("small + m", call), 197);
}

TEST(ShapeExpr, CompileProblemsSayWhatAndWhere) {
  struct Bad {
    std::string text;
    ExprKind kind;
    std::string message;
    std::size_t offset;
  };
  const Bad cases[] = {
      {"cdiv(q, 128)", ExprKind::integer, "unknown name 'q' (the integer scalar parameters are: m, n, k, small)", 5},
      {"alpha * 2", ExprKind::integer, "'alpha' is a f32 parameter", 0},
      {"a + 1", ExprKind::integer, "'a' is a pointer parameter", 0},
      {"m +", ExprKind::integer, "the expression ends", 3},
      {"(m + 1", ExprKind::integer, "expected ')' to close the '(' at character 1", 6},
      {"m 1", ExprKind::integer, "unexpected '1'", 2},
      {"m $ 1", ExprKind::integer, "unexpected '$'", 2},
      {"pow(m, 2)", ExprKind::integer, "unknown function 'pow'", 0},
      {"min(m)", ExprKind::integer, "min takes two arguments: expected ','", 5},
      {"9223372036854775808", ExprKind::integer, "integer literal out of the 64-bit signed range", 0},
      {"0x10", ExprKind::integer, "malformed number", 0},
      {"m < 4", ExprKind::integer, "'<' is allowed only in `where` conditions", 2},
      {"m + 1", ExprKind::condition, "a condition must compare", 0},
      {"m && n", ExprKind::condition, "'&&' joins conditions", 2},
      {"(m < 1) + 2", ExprKind::condition, "a comparison cannot be an operand of '+'", 8},
      {"m = 1", ExprKind::condition, "unexpected '='", 2},
      {std::string(257, '1'), ExprKind::integer, "longer than 256 characters", 256},
      // The parenthesis that makes the 33rd level: the second one.
      {std::string(33, '(') + "m" + std::string(33, ')'), ExprKind::integer, "nested deeper than 32 levels", 1},
  };
  for (const Bad& b : cases) {
    ExprCode code;
    ExprProblem problem;
    EXPECT_FALSE(compile_expr(b.text, params(), b.kind, &code, &problem)) << b.text;
    EXPECT_NE(problem.message.find(b.message), std::string::npos) << b.text << " gave: " << problem.message;
    EXPECT_EQ(problem.offset, b.offset) << b.text;
  }
  // 32 levels are allowed: 31 parentheses around a name.
  ExprCode code;
  ExprProblem problem;
  EXPECT_TRUE(compile_expr(std::string(31, '(') + "m" + std::string(31, ')'), params(), ExprKind::integer, &code, &problem))
      << problem.message;
}

TEST(ShapeExpr, BytecodeIsExactlySpecified) {
  // FORMAT.md §4.1: postfix, constants as 0x01 + i64 LE, parameters as 0x02 + u16 LE index.
  ExprCode code = compile("cdiv(m, 128) - -n");
  const ExprCode want = {0x02, 1, 0, 0x01, 128, 0, 0, 0, 0, 0, 0, 0, 0x16, 0x02, 2, 0, 0x15, 0x11};
  EXPECT_EQ(code, want);
  EXPECT_EQ(expr_text(code, params()), "cdiv(m, 128) - -n");
  // Text round trip: what inspect prints compiles back to the same bytes.
  for (const char* text : {"a0", "m - (n - k)", "(m + n) * k", "-(m + 1) % 3", "m * n / k", "min(m, n + 1) * 2"}) {
    if (std::string(text) == "a0") continue;
    ExprCode c = compile(text);
    EXPECT_EQ(compile(expr_text(c, params())), c) << text << " -> " << expr_text(c, params());
  }
  ExprCode cond = compile("m % 16 == 0 && n >= 1 || k != 2", ExprKind::condition);
  EXPECT_EQ(compile(expr_text(cond, params()), ExprKind::condition), cond) << expr_text(cond, params());
}

TEST(ShapeExpr, AddrReadsAPointersAddressInConditionsOnly) {
  // FORMAT.md §4.1: 0x03 + u16 LE index pushes the address the call passes for that pointer.
  ExprCode code = compile("addr(a) % 16 == 0", ExprKind::condition);
  const ExprCode want = {0x03, 0, 0, 0x01, 16, 0, 0, 0, 0, 0, 0, 0, 0x14, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0x20};
  EXPECT_EQ(code, want);
  EXPECT_EQ(expr_text(code, params()), "addr(a) % 16 == 0");
  EXPECT_EQ(compile(expr_text(code, params()), ExprKind::condition), code);
  Call call(1, 2, 3);
  std::int64_t v = -1;
  call.a_address = 0x7f0000001000;
  ASSERT_EQ(eval_expr(code.data(), code.size(), call.expr_args(), &v), ExprFault::none);
  EXPECT_EQ(v, 1);
  call.a_address = 0x7f0000001004;  // an offset view: 4 bytes in
  ASSERT_EQ(eval_expr(code.data(), code.size(), call.expr_args(), &v), ExprFault::none);
  EXPECT_EQ(v, 0);
  call.a_address = 0xffffffffffffff00;  // read as u64 scalars are: reinterpreted, so % still works
  ASSERT_EQ(eval(" addr( a ) % 256 == 0 && m == 1", call, &v, ExprKind::condition), ExprFault::none);
  EXPECT_EQ(v, 1);

  ExprCode out;
  ExprProblem problem;
  EXPECT_FALSE(compile_expr("cdiv(addr(a), 16)", params(), ExprKind::integer, &out, &problem));
  EXPECT_NE(problem.message.find("addr() is allowed only in conditions"), std::string::npos) << problem.message;
  EXPECT_EQ(problem.offset, 5u);
  EXPECT_FALSE(compile_expr("addr(m) % 16 == 0", params(), ExprKind::condition, &out, &problem));
  EXPECT_NE(problem.message.find("addr(m): 'm' is not a pointer parameter (the pointer parameters are: a)"),
            std::string::npos) << problem.message;
  EXPECT_EQ(problem.offset, 5u);
  EXPECT_FALSE(compile_expr("addr(a, 1) == 0", params(), ExprKind::condition, &out, &problem));
  EXPECT_NE(problem.message.find("addr takes one pointer parameter: expected ')'"), std::string::npos) << problem.message;
  EXPECT_FALSE(compile_expr("addr() == 0", params(), ExprKind::condition, &out, &problem));
  EXPECT_NE(problem.message.find("addr takes the name of a pointer parameter"), std::string::npos) << problem.message;
  EXPECT_FALSE(compile_expr("a % 16 == 0", params(), ExprKind::condition, &out, &problem));  // the name alone
  EXPECT_NE(problem.message.find("'a' is a pointer parameter"), std::string::npos) << problem.message;
}

TEST(ShapeExpr, DecoderRefusesMalformedBytecode) {
  auto problem = [](const ExprCode& c, ExprKind kind = ExprKind::integer) { return expr_code_problem(c, params(), kind); };
  EXPECT_NE(problem({}), "");
  EXPECT_NE(problem({0x01, 1, 2}).find("truncated operand"), std::string::npos);
  EXPECT_NE(problem({0x09}).find("unknown opcode 9"), std::string::npos);
  EXPECT_NE(problem({0x02, 0, 0}).find("parameter 0 is not an integer scalar"), std::string::npos);  // a pointer
  EXPECT_NE(problem({0x02, 4, 0}).find("parameter 4 is not an integer scalar"), std::string::npos);  // f32
  EXPECT_NE(problem({0x02, 9, 0}).find("parameter 9 is not an integer scalar"), std::string::npos);
  EXPECT_NE(problem({0x10}).find("operator without its operands"), std::string::npos);
  EXPECT_NE(problem({0x02, 1, 0, 0x02, 2, 0}).find("leaves 2 values"), std::string::npos);
  EXPECT_NE(problem({0x02, 1, 0, 0x02, 2, 0, 0x20}).find("integer expression gives a condition"), std::string::npos);
  EXPECT_NE(problem({0x02, 1, 0, 0x02, 2, 0, 0x26}, ExprKind::condition).find("operand of the wrong kind"), std::string::npos);
  const ExprCode addr_m = {0x03, 1, 0, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0x20};  // addr of a scalar
  EXPECT_NE(problem(addr_m, ExprKind::condition).find("addr of parameter 1, which is not a pointer"), std::string::npos);
  EXPECT_NE(problem({0x03, 0, 0}).find("addr in an integer expression"), std::string::npos);
  EXPECT_NE(problem({0x03, 0}).find("truncated operand"), std::string::npos);
  const ExprCode addr_a = {0x03, 0, 0, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0x20};
  EXPECT_EQ(problem(addr_a, ExprKind::condition), "");
  ExprCode deep;
  for (int i = 0; i < kMaxExprStack + 1; ++i) deep.insert(deep.end(), {0x02, 1, 0});
  EXPECT_NE(problem(deep).find("stack deeper than 64"), std::string::npos);
}

TEST(ShapeExpr, UpperBoundIsSoundOverRanges) {
  std::vector<KernelParam> p = params();
  ShapeSpec s;
  s.values = {{"k", 4096}};
  s.ranges = {{"m", -10, 300}};
  std::int64_t hi = 0;
  ASSERT_TRUE(expr_upper_bound(compile("min(65536, 1024 * cdiv(k, 64))"), p, s, &hi));
  EXPECT_EQ(hi, 65536);
  ASSERT_TRUE(expr_upper_bound(compile("m * 4"), p, s, &hi));
  EXPECT_EQ(hi, 1200);
  ASSERT_TRUE(expr_upper_bound(compile("-m"), p, s, &hi));
  EXPECT_EQ(hi, 10);
  ASSERT_TRUE(expr_upper_bound(compile("1000 / m"), p, s, &hi));  // m = 1 (0 divides by zero)
  EXPECT_EQ(hi, 1000);
  ASSERT_TRUE(expr_upper_bound(compile("cdiv(m, 7)"), p, s, &hi));
  EXPECT_EQ(hi, 43);
  ASSERT_TRUE(expr_upper_bound(compile("m % 16"), p, s, &hi));
  EXPECT_EQ(hi, 15);
  ASSERT_TRUE(expr_upper_bound(compile("small * 2"), p, s, &hi));  // u8: 0..255
  EXPECT_EQ(hi, 510);
  ASSERT_TRUE(expr_upper_bound(compile("n * 2"), p, s, &hi));  // i32 unconstrained
  EXPECT_EQ(hi, 2LL * INT32_MAX);
  EXPECT_FALSE(expr_upper_bound(compile("m / 0"), p, s, &hi));
  ShapeSpec huge;
  huge.values = {{"k", 1LL << 40}};
  EXPECT_FALSE(expr_upper_bound(compile("k * k"), p, huge, &hi));  // 2^80 for every call: no value
  ASSERT_TRUE(expr_upper_bound(compile("k * m"), p, huge, &hi));   // m over i32: partly overflows
  EXPECT_EQ(hi, LLONG_MAX);
  // Brute force: the bound is never below a value some call in the range computes.
  for (const char* text : {"cdiv(1000, m)", "m * m - 3 * m", "(m % 7) * -m", "max(m, 3) / min(m, -1)"}) {
    ExprCode c = compile(text);
    ASSERT_TRUE(expr_upper_bound(c, p, s, &hi)) << text;
    for (std::int32_t m = -10; m <= 300; ++m) {
      Call call(m, 0, 4096);
      std::int64_t v = 0;
      if (eval_expr(c.data(), c.size(), call.expr_args(), &v) == ExprFault::none) {
        EXPECT_LE(v, hi) << text << " m=" << m;
      }
    }
  }
}

TEST(RangeShapes, ParsedFromKilnToml) {
  Manifest m = parse_manifest(kRanges, "kiln.toml");
  const KernelSpec& k = m.kernels[0];
  ASSERT_EQ(k.shapes.size(), 3u);
  const ShapeSpec& any = k.shapes[1];
  EXPECT_TRUE(any.dynamic);
  ASSERT_EQ(any.ranges.size(), 1u);
  EXPECT_EQ(any.ranges[0].name, "m");
  EXPECT_EQ(any.ranges[0].min, 1);
  EXPECT_EQ(any.ranges[0].max, 8192);
  ASSERT_EQ(any.where.size(), 1u);
  EXPECT_EQ(expr_text(any.where[0], k.params), "m % 16 == 0");
  EXPECT_EQ(expr_text(any.grid_code[1], k.params), "cdiv(m, 128)");
  EXPECT_EQ(any.grid_code[2], constant_expr(1));
  EXPECT_EQ(ShapeProgram(any, k.params).max_shared_mem(), 65536u);
  EXPECT_FALSE(k.shapes[2].dynamic);
}

TEST(RangeShapes, FirstMatchWinsRangesInclusiveWhereHolds) {
  Manifest m = parse_manifest(kRanges, "kiln.toml");
  const KernelSpec& k = m.kernels[0];
  std::vector<ShapeProgram> shapes;
  for (const ShapeSpec& s : k.shapes) shapes.emplace_back(s, k.params);
  auto first = [&](const Call& c, LaunchConfig* out) -> std::string {
    for (const ShapeProgram& s : shapes) {
      if (s.match(c.expr_args(), out)) return s.name();
    }
    return "";
  };
  LaunchConfig out;
  EXPECT_EQ(first(Call(1, 4096, 4096), &out), "small_m");  // lower bound inclusive
  EXPECT_EQ(out.grid[0], 32u);
  EXPECT_EQ(out.grid[1], 1u);
  EXPECT_EQ(out.block[0], 128u);
  EXPECT_EQ(out.shared_mem, 1024u);
  EXPECT_EQ(first(Call(64, 4096, 4096), &out), "small_m");  // upper bound inclusive
  EXPECT_EQ(first(Call(16, 4096, 4096), &out), "small_m");  // both match: the first wins
  EXPECT_EQ(first(Call(80, 4096, 4096), &out), "any_m");
  EXPECT_EQ(out.grid[0], 32u);
  EXPECT_EQ(out.grid[1], 1u);
  EXPECT_EQ(out.grid[2], 1u);
  EXPECT_EQ(out.block[0], 256u);
  EXPECT_EQ(out.shared_mem, 65536u);
  EXPECT_EQ(first(Call(8192, 4096, 4096), &out), "any_m");
  EXPECT_EQ(out.grid[1], 64u);
  EXPECT_EQ(first(Call(8193, 4096, 4096), &out), "");  // above the range (and 8193 % 16 != 0)
  EXPECT_EQ(first(Call(8208, 4096, 4096), &out), "");
  EXPECT_EQ(first(Call(81, 4096, 4096), &out), "");  // where fails
  EXPECT_EQ(first(Call(80, 4096, 2048), &out), "");  // k is fixed at 4096
  EXPECT_EQ(first(Call(5, 5, 5), &out), "fixed");
  EXPECT_EQ(shapes[1].mismatch(Call(81, 4096, 4096).expr_args()), "where[0] 'm % 16 == 0' does not hold");
  EXPECT_EQ(shapes[1].mismatch(Call(9000, 4096, 4096).expr_args()), "m=9000 is outside its range [1, 8192]");
  EXPECT_EQ(shapes[1].mismatch(Call(80, 4096, 1).expr_args()), "k=1 is not 4096");
  EXPECT_EQ(shapes[1].mismatch(Call(80, 4096, 4096).expr_args()), "");
}

TEST(RangeShapes, ComputedLaunchOutOfLimitsDoesNotMatch) {
  std::string text = kRanges;
  text.replace(text.find("values = { n = 4096, k = 4096 }\nwhere"), 31, "values = { k = 4096 }");
  text.replace(text.find("\"cdiv(m, 128)\""), 14, "\"n / m\"");
  Manifest m = parse_manifest(text, "kiln.toml");
  ShapeProgram any(m.kernels[0].shapes[1], m.kernels[0].params);
  EXPECT_EQ(any.mismatch(Call(16, 8, 4096).expr_args()), "grid[1] 'n / m' = 0 is outside 1..65535");
  EXPECT_EQ(any.mismatch(Call(16, 16 * 65536, 4096).expr_args()), "grid[1] 'n / m' = 65536 is outside 1..65535");
  EXPECT_EQ(any.mismatch(Call(16, -16, 4096).expr_args()), "grid[0] 'cdiv(n, 128)' = 0 is outside 1..2147483647");
  text.replace(text.find("block = [256, 1, 1]"), 19, "block = [\"n\", 4, 1]");
  Manifest m2 = parse_manifest(text, "kiln.toml");
  ShapeProgram blocky(m2.kernels[0].shapes[1], m2.kernels[0].params);
  EXPECT_EQ(blocky.mismatch(Call(16, 512, 4096).expr_args()), "block (512,4,1) has 2048 threads; at most 1024");
  LaunchConfig out;
  EXPECT_TRUE(blocky.match(Call(16, 256, 4096).expr_args(), &out));
  EXPECT_EQ(out.block[0], 256u);
  EXPECT_EQ(out.block[1], 4u);
}

TEST(RangeShapes, KernelRecordRoundTripsAndFixedShapesKeepTheirBytes) {
  Manifest m = parse_manifest(kRanges, "kiln.toml");
  std::vector<KernelTableMember> table = encode_kernel_table(m);
  ASSERT_EQ(table.size(), 2u);
  KernelSpec k = decode_kernel_record(ByteView(table[1].content), "mm", "kiln/kernels/mm");
  ASSERT_EQ(k.shapes.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    const ShapeSpec& a = m.kernels[0].shapes[i];
    const ShapeSpec& b = k.shapes[i];
    EXPECT_EQ(a.dynamic, b.dynamic);
    EXPECT_EQ(a.values, b.values);
    EXPECT_EQ(a.where, b.where);
    EXPECT_EQ(a.grid_code, b.grid_code);
    EXPECT_EQ(a.block_code, b.block_code);
    EXPECT_EQ(a.shared_mem_code, b.shared_mem_code);
    EXPECT_EQ(a.grid, b.grid);
  }
  Manifest again = m;
  again.kernels[0] = k;
  EXPECT_EQ(encode_kernel_table(again)[1].content, table[1].content);
  // A damaged expression is refused when the record is decoded: min's opcode made unknown.
  std::vector<std::uint8_t> bytes = table[1].content;
  const std::uint8_t tail[] = {0x16, 0x12, 0x17};  // cdiv, mul, min: any_m's shared_mem
  auto at = std::search(bytes.begin(), bytes.end(), std::begin(tail), std::end(tail));
  ASSERT_NE(at, bytes.end());
  at[2] = 0x09;
  try {
    decode_kernel_record(ByteView(bytes), "mm", "kiln/kernels/mm");
    FAIL() << "decoded an unknown opcode";
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), Errc::malformed);
    EXPECT_NE(std::string(e.what()).find("shape 'any_m' shared_mem: unknown opcode 9"), std::string::npos) << e.what();
  }
  // A kiln 0.2 reader checks value_count <= 2^20: bit 31 makes it refuse the record.
  std::vector<std::uint8_t> fixed_only = encode_kernel_table(parse_manifest(
      std::string(kRanges).substr(0, std::string(kRanges).find("[[kernel.shape]]")), "kiln.toml"))[1].content;
  EXPECT_LT(fixed_only.size(), table[1].content.size());
}

struct BadRange {
  std::string find;
  std::string replace;
  std::string message;
};
void PrintTo(const BadRange& c, std::ostream* os) { *os << "'" << c.replace << "'"; }

class RangeShapeErrors : public ::testing::TestWithParam<BadRange> {};

TEST_P(RangeShapeErrors, NamesFileLineColumnAndTheProblem) {
  const BadRange& c = GetParam();
  std::string text = kRanges;
  std::size_t at = text.find(c.find);
  ASSERT_NE(at, std::string::npos) << c.find;
  ASSERT_EQ(text.find(c.find, at + 1), std::string::npos) << "not unique: " << c.find;
  text.replace(at, c.find.size(), c.replace);
  try {
    parse_manifest(text, "kiln.toml");
    FAIL() << "accepted a manifest with: " << c.replace;
  } catch (const Failure& e) {
    EXPECT_EQ(e.code(), Errc::manifest);
    EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << "got: " << e.what();
  }
}

const char* kAnyGrid = "grid = [\"cdiv(n, 128)\", \"cdiv(m, 128)\", 1]";
const char* kAnyRange = "ranges = { m = [1, 8192] }";
const char* kAnyTail = "shared_mem = \"min(65536, 1024 * cdiv(k, 64))\"\n";

INSTANTIATE_TEST_SUITE_P(
    Cases, RangeShapeErrors,
    ::testing::Values(
        BadRange{"\"cdiv(m, 128)\"", "\"cdiv(q, 128)\"",
                 "kiln.toml:33:31: grid[1] in kernel 'mm' shape[1] \"cdiv(q, 128)\": unknown name 'q' (the integer "
                 "scalar parameters are: m, n, k, small)"},
        BadRange{"\"m % 16 == 0\"", "\"m % 16 = 0\"", "kiln.toml:32:18: where[0] in kernel 'mm' shape[1] \"m % 16 = 0\": unexpected '='"},
        BadRange{"\"m % 16 == 0\"", "\"m\"", "kiln.toml:32:11: where[0] in kernel 'mm' shape[1] \"m\": a condition must compare"},
        BadRange{"\"m % 16 == 0\"", "1", "kiln.toml:32:10: 'where' in kernel 'mm' shape[1] must hold condition strings, found an integer"},
        BadRange{"\"cdiv(m, 128)\"", "\"cdiv(alpha, 128)\"", "kiln.toml:33:31: grid[1] in kernel 'mm' shape[1] \"cdiv(alpha, 128)\": 'alpha' is a f32 parameter"},
        BadRange{"\"cdiv(m, 128)\"", "\"m < 128\"", "kiln.toml:33:28: grid[1] in kernel 'mm' shape[1] \"m < 128\": '<' is allowed only in `where`"},
        BadRange{"\"cdiv(m, 128)\"", "\"99999999999999999999\"", "kiln.toml:33:26: grid[1] in kernel 'mm' shape[1] \"99999999999999999999\": integer literal out of the 64-bit signed range"},
        BadRange{"\"cdiv(m, 128)\"", "\"" + std::string(257, 'm') + "\"", "grid[1] in kernel 'mm' shape[1] \"mmmm"},
        BadRange{"\"cdiv(m, 128)\"", "\"" + std::string(33, '(') + "m" + std::string(33, ')') + "\"", "kiln.toml:33:27: grid[1] in kernel 'mm' shape[1] \"" + std::string(33, '(') + "m" + std::string(30, ')') + "...\": nested deeper than 32 levels"},
        BadRange{"\"cdiv(m, 128)\"", "0", "kiln.toml:33:25: 'grid' in kernel 'mm' shape[1] must be between 1 and 2147483647, found 0"},
        BadRange{kAnyGrid, "grid = [\"m\", 1, 1, 1]", "kiln.toml:33:8: 'grid' in kernel 'mm' shape[1] must have 1 to 3 elements, found 4"},
        BadRange{"block = [256, 1, 1]", "block = [256, 8, 1]", "kiln.toml:28:1: kernel 'mm' shape[1]: block has 2048 threads; at most 1024"},
        BadRange{kAnyRange, "ranges = { m = [10, 1] }", "kiln.toml:30:16: range of 'm' in kernel 'mm' shape[1] is empty: 10 > 1"},
        BadRange{kAnyRange, "ranges = { m = [1] }", "kiln.toml:30:16: range of 'm' in kernel 'mm' shape[1] must be [min, max], found 1 elements"},
        BadRange{kAnyRange, "ranges = { n = [1, 8192] }", "kiln.toml:30:16: 'n' is in both values and ranges of kernel 'mm' shape[1]"},
        BadRange{kAnyRange, "ranges = { small = [0, 256] }", "kiln.toml:30:20: range of 'small' in kernel 'mm' shape[1] [0, 256] reaches outside its type u8 (0..255)"},
        BadRange{kAnyRange, "ranges = { alpha = [0, 1] }", "kiln.toml:30:20: shape range 'alpha' names a f32 parameter"},
        BadRange{kAnyRange, "ranges = { a = [0, 1] }", "kiln.toml:30:16: shape range 'a' is not a scalar parameter of kernel 'mm'"},
        BadRange{kAnyTail, "shared_mem = \"1024 * m * m * m\"\n",
                 "kiln.toml:35:14: shared_mem in kernel 'mm' shape[1] has no bound within 2147483647 bytes over the shape's "
                 "values and ranges (interval bound 562949953421312)"},
        BadRange{kAnyTail, "shared_mem = \"m / 0\"\n", "kiln.toml:35:14: shared_mem in kernel 'mm' shape[1] can never be computed"},
        // Launches no call can make valid: refused at pack, each with the interval that proves it.
        BadRange{"\"cdiv(m, 128)\"", "\"m / 0\"",
                 "kiln.toml:33:25: grid[1] 'm / 0' in kernel 'mm' shape[1] faults for every call the shape allows"},
        BadRange{"\"cdiv(m, 128)\"", "\"0 * m\"",
                 "kiln.toml:33:25: grid[1] '0 * m' in kernel 'mm' shape[1] is always in [0, 0] for the calls the shape "
                 "allows, outside 1..65535: no call can match it"},
        BadRange{"\"cdiv(m, 128)\"", "\"m - 9000\"",
                 "grid[1] 'm - 9000' in kernel 'mm' shape[1] is always in [-8999, -808]"},
        BadRange{"block = [256, 1, 1]", "block = [\"1025 + 0 * m\", 1, 1]",
                 "kiln.toml:34:10: block[0] '1025 + 0 * m' in kernel 'mm' shape[1] is always in [1025, 1025] for the "
                 "calls the shape allows, outside 1..1024"},
        BadRange{"block = [256, 1, 1]", "block = [\"32 + m / 8192\", 64, 1]",
                 "kiln.toml:28:1: kernel 'mm' shape[1]: block has at least 2048 threads for every call the shape allows"},
        BadRange{"block = [256, 1, 1]", "block = [2000, \"m\", 1]",
                 "kiln.toml:34:10: block[0] in kernel 'mm' shape[1] is 2000 threads; at most 1024 are allowed in all"},
        BadRange{kAnyTail, kAnyTail + std::string("rangez = { m = [1, 2] }\n"), "kiln.toml:36:1: unknown key 'rangez' in kernel 'mm' shape[1]; did you mean 'ranges'? (known keys: name, values, ranges, where, grid, block, shared_mem, cluster)"},
        BadRange{kAnyTail, kAnyTail + std::string("\n[[kernel.test]]\nshape = \"any_m\"\nvalues = { m = 81, small = 0 }\noutputs = { a = \"a.npy\" }\n"),
                 "kiln.toml:37:1: kernel 'mm' test[0]: its values do not belong to shape 'any_m': where[0] 'm % 16 == 0' does not hold"},
        BadRange{kAnyTail, kAnyTail + std::string("\n[[kernel.test]]\nshape = \"any_m\"\nvalues = { m = 80 }\noutputs = { a = \"a.npy\" }\n"),
                 "kiln.toml:37:1: kernel 'mm' test[0] gives no value for 'small'"},
        BadRange{kAnyTail, kAnyTail + std::string("\n[[kernel.test]]\nshape = \"any_m\"\nvalues = { n = 1 }\noutputs = { a = \"a.npy\" }\n"),
                 "kiln.toml:39:16: 'n' is fixed by shape 'any_m'; the test cannot set it"},
        BadRange{kAnyTail, kAnyTail + std::string("\n[[kernel.test]]\nshape = \"any_m\"\nvalues = { m = 96, small = 7, alpha = \"x\" }\noutputs = { a = \"a.npy\" }\n"),
                 "kiln.toml:39:39: test value 'alpha' must be a finite number, found a string"},
        BadRange{kAnyTail, kAnyTail + std::string("\n[[kernel.test]]\nshape = \"any_m\"\nvalues = { small = 256 }\noutputs = { a = \"a.npy\" }\n"),
                 "kiln.toml:39:20: 'small' in kernel 'mm' test[0] must be between 0 and 255, found 256"}));

TEST(RangeShapes, TestValuesThatBelongToTheShapeAreKept) {
  std::string text = std::string(kRanges) +
                     "\n[[kernel.test]]\nshape = \"any_m\"\nvalues = { m = 96, small = 7 }\noutputs = { a = \"a.npy\" }\n";
  Manifest m = parse_manifest(text, "kiln.toml");
  ASSERT_EQ(m.kernels[0].tests.size(), 1u);
  const auto& values = m.kernels[0].tests[0].values;
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(values[0], (std::pair<std::string, std::int64_t>("m", 96)));
  EXPECT_EQ(values[1], (std::pair<std::string, std::int64_t>("small", 7)));
  EXPECT_TRUE(m.kernels[0].tests[0].float_values.empty());
}

TEST(RangeShapes, TestValuesGiveFloatScalarsTheirValue) {
  // A float scalar (an epsilon, a scale) is part of a test's call: no shape can fix it.
  std::string text = std::string(kRanges) +
                     "\n[[kernel.test]]\nshape = \"any_m\"\nvalues = { m = 96, small = 7, alpha = -0.5 }\noutputs = { a = \"a.npy\" }\n";
  Manifest m = parse_manifest(text, "kiln.toml");
  const auto& test = m.kernels[0].tests[0];
  ASSERT_EQ(test.values.size(), 2u);
  ASSERT_EQ(test.float_values.size(), 1u);
  EXPECT_EQ(test.float_values[0], (std::pair<std::string, double>("alpha", -0.5)));
}

}  // namespace
}  // namespace kiln
