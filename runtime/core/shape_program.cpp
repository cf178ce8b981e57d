#include "core/shape_program.hpp"

namespace kiln {
namespace {

const char* const kLaunchNames[7] = {"grid[0]", "grid[1]", "grid[2]", "block[0]", "block[1]", "block[2]", "shared_mem"};

}  // namespace

ShapeProgram::ShapeProgram(const ShapeSpec& shape, const std::vector<KernelParam>& params)
    : name_(shape.name), dynamic_(shape.dynamic) {
  auto index_of = [&](const std::string& name) {
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (params[i].name == name) return i;
    }
    return params.size();  // not reached for a valid shape
  };
  for (const auto& [name, value] : shape.values) {
    std::size_t i = index_of(name);
    if (i < params.size()) fixed_.push_back({i, params[i].type, value, name});
  }
  if (!dynamic_) {
    for (int d = 0; d < 3; ++d) {
      config_.grid[d] = shape.grid[static_cast<std::size_t>(d)];
      config_.block[d] = shape.block[static_cast<std::size_t>(d)];
    }
    config_.shared_mem = shape.shared_mem;
    for (int d = 0; d < 3; ++d) config_.cluster[d] = shape.has_cluster ? shape.cluster[static_cast<std::size_t>(d)] : 0;
    max_shared_mem_ = shape.shared_mem;
    return;
  }
  for (int d = 0; d < 3; ++d) cluster_[d] = shape.has_cluster ? shape.cluster[static_cast<std::size_t>(d)] : 0;
  for (const ShapeRange& r : shape.ranges) {
    std::size_t i = index_of(r.name);
    if (i < params.size()) ranges_.push_back({i, params[i].type, r.min, r.max, r.name});
  }
  params_ = params;
  where_ = shape.where;
  for (int d = 0; d < 3; ++d) {
    launch_[d] = shape.grid_code[static_cast<std::size_t>(d)];
    launch_[3 + d] = shape.block_code[static_cast<std::size_t>(d)];
  }
  launch_[6] = shape.shared_mem_code;
  for (const ExprCode& c : where_) where_run_.push_back(decode_expr(c, params));
  for (int i = 0; i < 7; ++i) launch_run_[i] = decode_expr(launch_[i], params);
  std::int64_t hi = 0;
  if (expr_upper_bound(shape.shared_mem_code, params, shape, &hi)) {
    max_shared_mem_ = static_cast<std::uint32_t>(hi < 0 ? 0 : (hi > kMaxSharedMem ? kMaxSharedMem : hi));
  }
}

bool ShapeProgram::run(const ExprArgs& args, LaunchConfig* out, std::string* why) const {
  auto value_text = [](const std::string& name, std::int64_t v) { return name + "=" + std::to_string(v); };
  for (const Fixed& f : fixed_) {
    std::int64_t v = read_scalar_integer(args.args[f.param], f.type);
    if (v != f.value) {
      if (why) *why = value_text(f.name, v) + " is not " + std::to_string(f.value);
      return false;
    }
  }
  if (!dynamic_) {
    *out = config_;
    return true;
  }
  for (const Range& r : ranges_) {
    std::int64_t v = read_scalar_integer(args.args[r.param], r.type);
    if (v < r.min || v > r.max) {
      if (why) {
        *why = value_text(r.name, v) + " is outside its range [" + std::to_string(r.min) + ", " +
               std::to_string(r.max) + "]";
      }
      return false;
    }
  }
  for (std::size_t i = 0; i < where_.size(); ++i) {
    std::int64_t v = 0;
    ExprFault f = eval_instrs(where_run_[i].data(), where_run_[i].size(), args.args, &v);
    if (f != ExprFault::none || v == 0) {
      if (why) {
        *why = "where[" + std::to_string(i) + "] '" + expr_text(where_[i], params_) + "' " +
               (f != ExprFault::none ? std::string("faults: ") + expr_fault_text(f) : std::string("does not hold"));
      }
      return false;
    }
  }
  std::int64_t v[7];
  for (int i = 0; i < 7; ++i) {
    // Integer elements (block = [256, 1, 1]) are single constants: no evaluation needed.
    const std::vector<ExprInstr>& code = launch_run_[i];
    ExprFault f = ExprFault::none;
    if (code.size() == 1 && code[0].op == op::konst) {
      v[i] = code[0].imm;
    } else {
      f = eval_instrs(code.data(), code.size(), args.args, &v[i]);
    }
    if (f != ExprFault::none) {
      if (why) *why = std::string(kLaunchNames[i]) + " '" + expr_text(launch_[i], params_) + "' faults: " + expr_fault_text(f);
      return false;
    }
    std::int64_t lo = i == 6 ? 0 : 1;
    std::int64_t hi = i == 0 ? kMaxGridX : (i < 3 ? kMaxGridYZ : (i < 6 ? kMaxBlockThreads : kMaxSharedMem));
    if (v[i] < lo || v[i] > hi) {
      if (why) {
        *why = std::string(kLaunchNames[i]) + " '" + expr_text(launch_[i], params_) + "' = " + std::to_string(v[i]) +
               " is outside " + std::to_string(lo) + ".." + std::to_string(hi);
      }
      return false;
    }
  }
  // Each block dimension is at most 1024 here, so the product cannot overflow.
  std::int64_t threads = v[3] * v[4] * v[5];
  if (threads > kMaxBlockThreads) {
    if (why) *why = "block (" + std::to_string(v[3]) + "," + std::to_string(v[4]) + "," + std::to_string(v[5]) + ") has " +
                    std::to_string(threads) + " threads; at most 1024";
    return false;
  }
  if (v[6] > static_cast<std::int64_t>(max_shared_mem_)) {
    // Cannot happen when the bound is sound; refusing keeps the load-time attribute honest.
    if (why) *why = "shared_mem " + std::to_string(v[6]) + " exceeds its bound " + std::to_string(max_shared_mem_);
    return false;
  }
  for (int d = 0; d < 3; ++d) {
    if (cluster_[d] > 1 && v[d] % cluster_[d] != 0) {
      if (why) {
        *why = std::string(kLaunchNames[d]) + " '" + expr_text(launch_[d], params_) + "' = " + std::to_string(v[d]) +
               " is not a multiple of the cluster's " + std::to_string(cluster_[d]);
      }
      return false;
    }
  }
  for (int d = 0; d < 3; ++d) {
    out->grid[d] = static_cast<unsigned>(v[d]);
    out->block[d] = static_cast<unsigned>(v[3 + d]);
    out->cluster[d] = cluster_[d];
  }
  out->shared_mem = static_cast<unsigned>(v[6]);
  return true;
}

bool ShapeProgram::match(const ExprArgs& args, LaunchConfig* out) const { return run(args, out, nullptr); }

std::string ShapeProgram::mismatch(const ExprArgs& args) const {
  std::string why;
  LaunchConfig ignored;
  run(args, &ignored, &why);
  return why;
}

}  // namespace kiln
