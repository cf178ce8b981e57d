// One declared shape, prepared for matching calls: the fixed values to compare, the ranges to
// check, the conditions and launch expressions to evaluate. Built once (when a kernel is
// resolved, or when kiln pack checks a test vector); matching allocates nothing, so the
// runtime can run it on every launch. Explaining a mismatch allocates, and is only done on the
// undeclared-shape path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/launch_config.hpp"
#include "core/manifest.hpp"
#include "core/shape_expr.hpp"

namespace kiln {

// The launch limits a computed launch must obey (the fixed rules of MANIFEST.md, plus the
// CUDA/HIP limit of 65535 on grid y and z that a computed value can easily pass).
constexpr std::int64_t kMaxGridX = 0x7fffffff;
constexpr std::int64_t kMaxGridYZ = 65535;
constexpr std::int64_t kMaxBlockThreads = 1024;
constexpr std::int64_t kMaxSharedMem = 0x7fffffff;

class ShapeProgram {
 public:
  // `shape` must be valid for `params` (as parse_manifest or decode_kernel_record leave it).
  ShapeProgram(const ShapeSpec& shape, const std::vector<KernelParam>& params);

  // True when the call belongs to this shape; `out` then holds its launch. No allocation.
  bool match(const ExprArgs& args, LaunchConfig* out) const;
  // Why match() is false for this call: "m=9000 is outside its range [1, 8192]". Empty when it
  // matches.
  std::string mismatch(const ExprArgs& args) const;

  const std::string& name() const { return name_; }
  bool dynamic() const { return dynamic_; }
  // The largest dynamic shared memory any call can get from this shape (FORMAT.md §4.1: the
  // interval bound of the expression over values and ranges, at least 0).
  std::uint32_t max_shared_mem() const { return max_shared_mem_; }

 private:
  struct Fixed {
    std::size_t param;
    ScalarType type;
    std::int64_t value;
    std::string name;  // for mismatch()
  };
  struct Range {
    std::size_t param;
    ScalarType type;
    std::int64_t min, max;
    std::string name;
  };
  // True and `out` set when the call matches; otherwise false and, when `why` is given, the
  // first reason. With `why` null it builds no text (the launch path).
  bool run(const ExprArgs& args, LaunchConfig* out, std::string* why) const;

  std::string name_;
  bool dynamic_ = false;
  std::vector<Fixed> fixed_;
  std::vector<Range> ranges_;
  // Decoded expressions: where_ conditions, then launch_ (grid x y z, block x y z, shared_mem);
  // the bytecode is kept for mismatch() texts.
  std::vector<std::vector<ExprInstr>> where_run_;
  std::vector<ExprInstr> launch_run_[7];
  std::vector<ExprCode> where_;
  ExprCode launch_[7];
  LaunchConfig config_;  // a fixed shape's launch
  unsigned cluster_[3] = {0, 0, 0};  // a range shape's cluster; 0: none
  std::uint32_t max_shared_mem_ = 0;
  // A range shape's copy of the parameters, for the expressions' text in mismatch(); empty for
  // a fixed shape (a kernel may declare thousands of those).
  std::vector<KernelParam> params_;
};

}  // namespace kiln
