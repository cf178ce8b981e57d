#include "engine/shape_match.hpp"

#include <atomic>
#include <cstring>

#include "core/shape_expr.hpp"

namespace kiln::engine {

std::int64_t read_integer(const void* p, ScalarType type) { return read_scalar_integer(p, type); }

namespace {

std::atomic<std::uint64_t> g_next_table_id{1};

bool integer_type(ScalarType t) { return static_cast<int>(t) <= static_cast<int>(ScalarType::u64); }

struct LastMatch {
  std::uint64_t table = 0;  // 0: none
  std::int64_t values[8] = {};
  const ShapeProgram* shape = nullptr;
  LaunchConfig config;
};
thread_local LastMatch t_last_match;

}  // namespace

ShapeTable::ShapeTable(const KernelSpec& kernel) : id_(g_next_table_id.fetch_add(1, std::memory_order_relaxed)) {
  for (std::size_t i = 0; i < kernel.params.size(); ++i) {
    const KernelParam& p = kernel.params[i];
    types_.push_back(p.type);
    if (!p.is_pointer) scalars_.push_back({i, {p.name, p.type}});
    if (!p.is_pointer && integer_type(p.type)) memo_scalars_.push_back({i, p.type});
  }
  // A `where` that reads a tensor's address makes the match depend on it: the memo compares the
  // address too (read as the 64-bit value the condition reads).
  std::vector<std::size_t> addressed;
  for (const ShapeSpec& s : kernel.shapes) {
    for (const ExprCode& c : s.where) expr_addresses(c, &addressed);
  }
  for (std::size_t i : addressed) memo_scalars_.push_back({i, ScalarType::u64});
  // Worth it where matching costs more than remembering: a range shape, or many fixed shapes to
  // scan. One or a few fixed shapes match in a few comparisons, less than the memo's own upkeep.
  bool any_range = false;
  for (const ShapeSpec& s : kernel.shapes) any_range = any_range || s.dynamic;
  memo_ = (any_range || kernel.shapes.size() > kMemoMinFixedShapes) && memo_scalars_.size() <= kMemoScalars;
  // Everything a shape needs at launch is prepared here, when the kernel is resolved (warm-up
  // resolves every kernel): the first launch of a shape does no more work than the next.
  shapes_.reserve(kernel.shapes.size());
  for (const ShapeSpec& s : kernel.shapes) shapes_.emplace_back(s, kernel.params);
}

const ShapeProgram* ShapeTable::match(void* const* args, LaunchConfig* out) const {
  if (!memo_) return scan(args, out);
  std::int64_t values[kMemoScalars];
  const std::size_t n = memo_scalars_.size();
  for (std::size_t i = 0; i < n; ++i) values[i] = read_scalar_integer(args[memo_scalars_[i].first], memo_scalars_[i].second);
  LastMatch& last = t_last_match;
  if (last.table == id_ && std::memcmp(last.values, values, n * sizeof values[0]) == 0) {
    *out = last.config;
    return last.shape;
  }
  const ShapeProgram* shape = scan(args, out);
  last.table = id_;
  std::memcpy(last.values, values, n * sizeof values[0]);
  last.shape = shape;
  last.config = *out;
  return shape;
}

const ShapeProgram* ShapeTable::scan(void* const* args, LaunchConfig* out) const {
  ExprArgs a{args, types_.data()};
  for (const ShapeProgram& s : shapes_) {
    if (s.match(a, out)) return &s;
  }
  return nullptr;
}

std::string ShapeTable::describe_call(void* const* args) const {
  std::string out;
  for (const auto& [index, named] : scalars_) {
    if (is_float_type(named.second)) continue;
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
