#include "engine/kernel.hpp"

#include "core/error.hpp"
#include "engine/archive.hpp"
#include "engine/runtime.hpp"

namespace kiln::engine {

namespace {
thread_local CallContext* t_current_call = nullptr;

// Makes `call` this thread's current reference call for a scope; a reference that launches
// another kernel whose reference runs nests, and the outer call is current again after.
class CurrentCall {
 public:
  explicit CurrentCall(CallContext* call) : previous_(t_current_call) { t_current_call = call; }
  ~CurrentCall() { t_current_call = previous_; }
  CurrentCall(const CurrentCall&) = delete;
  CurrentCall& operator=(const CurrentCall&) = delete;

 private:
  CallContext* previous_;
};
}  // namespace

CallContext* CallContext::current() { return t_current_call; }

using kiln::Errc;
using kiln::Failure;

Kernel::Kernel(Archive& archive, kiln::KernelSpec spec, int device, bool reference_allowed)
    : archive_(&archive),
      spec_(std::move(spec)),
      device_(device),
      reference_allowed_(reference_allowed),
      shapes_(spec_),
      abi_(spec_),
      variants_(spec_) {
  for (const kiln::VariantSpec& v : spec_.variants) {
    if (!v.has_kernel_args) {
      variant_abi_.emplace_back();
      continue;
    }
    kiln::KernelSpec own = spec_;  // the variant's parameters with the kernel's call, for its KernelAbi
    own.kernel_args = v.kernel_args;
    own.variants.clear();
    variant_abi_.push_back(std::make_unique<KernelAbi>(own));
  }
}

const std::string& Kernel::code_path(int variant) const {
  static const std::string none;
  if (variant < 0) return code_path_;
  std::size_t v = static_cast<std::size_t>(variant);
  return v < variant_paths_.size() ? variant_paths_[v] : none;
}

int Kernel::variant_for(void* const* args) const {
  for (std::size_t i = 0; i < variant_code_.size(); ++i) {
    if (variant_code_[i] && variants_.holds(i, args)) return static_cast<int>(i);
  }
  return -1;
}

void Kernel::check_arguments(void* const* args, std::size_t arg_count, const std::size_t* arg_sizes) const {
  if (arg_count != spec_.params.size()) {
    throw Failure(Errc::invalid_argument, "kernel '" + spec_.name + "' takes " + std::to_string(spec_.params.size()) +
                                            " arguments, the launch passed " + std::to_string(arg_count));
  }
  if (args == nullptr && arg_count > 0) throw Failure(Errc::invalid_argument, "kernel '" + spec_.name + "': args is NULL");
  for (std::size_t i = 0; i < arg_count; ++i) {
    const kiln::KernelParam& p = spec_.params[i];
    if (args[i] == nullptr) {
      throw Failure(Errc::invalid_argument, "kernel '" + spec_.name + "': argument " + std::to_string(i) + " '" + p.name +
                                              "' is NULL (each entry points at the argument's value)");
    }
    if (arg_sizes == nullptr) continue;
    std::size_t want = p.is_pointer ? sizeof(std::uint64_t) : kiln::scalar_type_size(p.type);
    if (arg_sizes[i] != want) {
      throw Failure(Errc::invalid_argument,
                  "kernel '" + spec_.name + "': argument " + std::to_string(i) + " '" + p.name + "' is " +
                      (p.is_pointer ? std::string("a pointer") : std::string(kiln::scalar_type_name(p.type))) + " (" +
                      std::to_string(want) + " bytes); the launch passed " + std::to_string(arg_sizes[i]) + " bytes");
    }
  }
}

namespace {

std::string launch_text(const kiln::LaunchConfig& c) {
  return "grid(" + std::to_string(c.grid[0]) + "," + std::to_string(c.grid[1]) + "," + std::to_string(c.grid[2]) +
         ") block(" + std::to_string(c.block[0]) + "," + std::to_string(c.block[1]) + "," + std::to_string(c.block[2]) +
         ") smem " + std::to_string(c.shared_mem) +
         (c.has_cluster() ? " cluster(" + std::to_string(c.cluster[0]) + "," + std::to_string(c.cluster[1]) + "," +
                                std::to_string(c.cluster[2]) + ")"
                          : "");
}

}  // namespace

std::string Kernel::undeclared_shape_text(void* const* args) const {
  std::string declared;
  for (const kiln::ShapeSpec& s : spec_.shapes) declared += (declared.empty() ? "" : ", ") + s.name;
  std::string ranges = shapes_.range_mismatches(args);
  return "the call (" + shapes_.describe_call(args) + ") matches no declared shape of kernel '" + spec_.name +
         "' (declared: " + (declared.empty() ? "none" : declared) + ")" + (ranges.empty() ? "" : " [" + ranges + "]");
}

kiln_route Kernel::launch(void* const* args, std::size_t arg_count, void* stream, const std::size_t* arg_sizes) {
  check_arguments(args, arg_count, arg_sizes);
  Runtime& rt = archive_->runtime();
  if (runs_on_device()) {
    kiln::LaunchConfig launch_config;
    if (shapes_.match(args, &launch_config) != nullptr) {
      const kiln::LaunchConfig* config = &launch_config;
      int variant = variant_code_.empty() ? -1 : variant_for(args);
      const backend::Code& code = variant < 0 ? *code_ : *variant_code_[static_cast<std::size_t>(variant)];
      const KernelAbi& abi = variant >= 0 && variant_abi_[static_cast<std::size_t>(variant)]
                                 ? *variant_abi_[static_cast<std::size_t>(variant)]
                                 : abi_;
      int r;
      if (abi.passes_call()) {
        r = code.launch(*config, stream, const_cast<void**>(args));
      } else {
        // Tensor maps, computed scalars, scratch: built on this thread's stack for this call.
        KernelAbi::Frame frame;
        if (unsigned encoded = abi.build(args, *config, stream, code, backend_, &frame)) {
          kiln::engine::Stats::bump(rt.stats().tensor_map_encodes, encoded);
        }
        r = code.launch(*config, stream, frame.args);
      }
      if (r != 0) {
        rt.stats().count(device_, Stats::Outcome::failure);
        std::string error = backend_->describe_error(r);
        std::string call = shapes_.describe_call(args) + " " + launch_text(*config);
        archive_->diagnose(*this, "launch", target_, "", r, error, call);
        std::string which = variant < 0 ? "" : ", variant '" + spec_.variants[static_cast<std::size_t>(variant)].name + "'";
        throw Failure(Errc::driver, "kernel '" + spec_.name + "' (" + target_ + which + ") on " + device_info_->describe + ": " +
                                      backend_->launch_call() + " failed: " + error);
      }
      rt.stats().count(device_, route_ == KILN_ROUTE_NATIVE ? Stats::Outcome::native : Stats::Outcome::ptx_jit);
      return route_;
    }
    kiln::engine::Stats::bump(rt.stats().undeclared_shape_calls);
    return run_reference(KILN_REASON_UNDECLARED_SHAPE, undeclared_shape_text(args), args, arg_count, stream);
  }
  // The reference route checks the call against the declared shapes as the native route does:
  // a call no shape declares is counted and says so, whatever the device.
  kiln::LaunchConfig computed;
  const kiln::ShapeProgram* shape = spec_.shapes.empty() ? nullptr : shapes_.match(args, &computed);
  if (!spec_.shapes.empty() && shape == nullptr) {
    kiln::engine::Stats::bump(rt.stats().undeclared_shape_calls);
    return run_reference(KILN_REASON_UNDECLARED_SHAPE, undeclared_shape_text(args) + "; and on this device: " + reason_text_,
                         args, arg_count, stream);
  }
  if (shape != nullptr && shape->dynamic()) {
    // A range shape's launch depends on the call; the reference is told what the kernel would
    // have launched, so that a reference (or a test without a GPU) can check it.
    return run_reference(reason_, reason_text_ + "; shape '" + shape->name() + "' computes " + launch_text(computed), args,
                         arg_count, stream);
  }
  return run_reference(reason_, reason_text_, args, arg_count, stream);
}

std::string Kernel::explain_call(void* const* args, std::size_t arg_count) const {
  check_arguments(args, arg_count, nullptr);
  kiln::LaunchConfig config;
  const kiln::ShapeProgram* shape = spec_.shapes.empty() ? nullptr : shapes_.match(args, &config);
  if (!spec_.shapes.empty() && shape == nullptr) return "reference: " + undeclared_shape_text(args);
  std::string out = shape == nullptr ? std::string("the call (no shapes declared)")
                                     : "shape '" + shape->name() + "' (" + launch_text(config) + ")";
  if (!runs_on_device()) return out + "; " + kiln_route_string(route_) + ": " + reason_text_;
  std::string skipped;
  for (std::size_t i = 0; i < variants_.size(); ++i) {
    bool loaded = i < variant_code_.size() && variant_code_[i];
    std::string why = loaded ? variants_.mismatch(i, args) : std::string("its code did not load");
    if (why.empty()) {
      return out + "; " + kiln_route_string(route_) + " " + target_ + ", variant " + variants_.describe(i) +
             (skipped.empty() ? "" : " [" + skipped + "]");
    }
    skipped += (skipped.empty() ? "" : "; ") + spec_.variants[i].name + ": " + why;
  }
  return out + "; " + kiln_route_string(route_) + " " + target_ + ", the kernel's own code" +
         (skipped.empty() ? "" : " [" + skipped + "]");
}

kiln_route Kernel::run_reference(kiln_reason why, const std::string& why_text, void* const* args,
                                      std::size_t arg_count, void* stream) {
  Runtime& rt = archive_->runtime();
  if (!reference_allowed_) {
    rt.stats().count(device_, Stats::Outcome::refused);
    throw Failure(Errc::refused, "kernel '" + spec_.name + "' cannot run on device " + std::to_string(device_) + ": " +
                                   why_text +
                                   (rt.policy() == KILN_POLICY_STRICT ? " (the runtime's policy is strict)"
                                                                      : " (the manifest says fallback = \"refuse\")"));
  }
  std::shared_ptr<const Runtime::Reference> ref = rt.reference(spec_.name);  // held for the whole call
  if (ref == nullptr) {
    rt.stats().count(device_, Stats::Outcome::refused);
    throw Failure(Errc::refused, "kernel '" + spec_.name + "' routes to its reference (" + why_text +
                                   ") but no reference is registered for it (kiln_runtime_register_reference)");
  }
  kiln::engine::CallContext call;
  call.info.size = sizeof(call.info);
  call.info.kernel = spec_.name.c_str();
  call.info.device = device_;
  call.info.reason = why;
  call.info.reason_text = why_text.c_str();
  call.info.archive_digest = archive_->digest().c_str();
  int rc;
  {
    CurrentCall scope(&call);
    rc = ref->fn(&call.info, args, arg_count, stream, ref->user);
  }
  if (rc != 0) {
    rt.stats().count(device_, Stats::Outcome::failure);
    throw Failure(Errc::reference_failed, "the reference for kernel '" + spec_.name + "' returned " + std::to_string(rc) +
                                            (call.error.empty() ? "" : ": " + call.error));
  }
  rt.stats().count(device_, Stats::Outcome::reference);
  return KILN_ROUTE_REFERENCE;
}

}  // namespace kiln::engine
