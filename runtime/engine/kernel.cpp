#include "kernel.hpp"

#include "archive.hpp"
#include "error.hpp"
#include "runtime.hpp"

using kiln::Errc;
using kiln::Error;

kiln_route kiln_kernel::launch(void* const* args, std::size_t arg_count, void* stream) {
  if (arg_count != spec.params.size()) {
    throw Error(Errc::invalid_argument, "kernel '" + spec.name + "' takes " + std::to_string(spec.params.size()) +
                                            " arguments, the launch passed " + std::to_string(arg_count));
  }
  if (args == nullptr && arg_count > 0) throw Error(Errc::invalid_argument, "kernel '" + spec.name + "': args is NULL");
  kiln_runtime& rt = archive->runtime();
  if (route == KILN_ROUTE_NATIVE || route == KILN_ROUTE_PTX_JIT) {
    if (const kiln::cuda::LaunchConfig* config = shapes.match(args)) {
      if (hip_code.loaded()) {
        int hr = rt.hip().launch(hip_code, *config, stream, const_cast<void**>(args));
        if (hr != 0) {
          kiln::engine::Stats::bump(rt.stats().launch_failures);
          throw Error(Errc::driver, "kernel '" + spec.name + "' (" + target + ") on AMD device " + std::to_string(device) +
                                        ": hipModuleLaunchKernel failed: " + rt.hip().describe(hr));
        }
        kiln::engine::Stats::bump(rt.stats().launches_native);
        return route;
      }
      kiln::cuda::CUresult r = rt.cuda().launch(*cuda_device, code, *config, stream, const_cast<void**>(args));
      if (r != kiln::cuda::CUDA_SUCCESS) {
        kiln::engine::Stats::bump(rt.stats().launch_failures);
        std::string call = shapes.describe_call(args) + " grid(" + std::to_string(config->grid[0]) + "," +
                           std::to_string(config->grid[1]) + "," + std::to_string(config->grid[2]) + ") block(" +
                           std::to_string(config->block[0]) + "," + std::to_string(config->block[1]) + "," +
                           std::to_string(config->block[2]) + ") smem " + std::to_string(config->shared_mem);
        archive->diagnose(*this, "launch", target, "", r, rt.cuda().driver()->describe(r), call);
        throw Error(Errc::driver, "kernel '" + spec.name + "' (" + target + ") on device " + std::to_string(device) +
                                      ": cuLaunchKernel failed: " + rt.cuda().driver()->describe(r));
      }
      kiln::engine::Stats::bump(route == KILN_ROUTE_NATIVE ? rt.stats().launches_native : rt.stats().launches_ptx_jit);
      return route;
    }
    kiln::engine::Stats::bump(rt.stats().undeclared_shape_calls);
    std::string declared;
    for (const kiln::ShapeSpec& s : spec.shapes) declared += (declared.empty() ? "" : ", ") + s.name;
    return run_reference(KILN_REASON_UNDECLARED_SHAPE,
                         "the call (" + shapes.describe_call(args) + ") matches no declared shape of kernel '" +
                             spec.name + "' (declared: " + (declared.empty() ? "none" : declared) + ")",
                         args, arg_count, stream);
  }
  return run_reference(reason, reason_text, args, arg_count, stream);
}

kiln_route kiln_kernel::run_reference(kiln_reason why, const std::string& why_text, void* const* args,
                                      std::size_t arg_count, void* stream) {
  kiln_runtime& rt = archive->runtime();
  if (!reference_allowed) {
    kiln::engine::Stats::bump(rt.stats().launches_refused);
    throw Error(Errc::refused, "kernel '" + spec.name + "' cannot run on device " + std::to_string(device) + ": " +
                                   why_text +
                                   (rt.policy() == KILN_POLICY_STRICT ? " (the runtime's policy is strict)"
                                                                      : " (the manifest says fallback = \"refuse\")"));
  }
  kiln_runtime::Reference ref = rt.reference(spec.name);
  if (ref.fn == nullptr) {
    kiln::engine::Stats::bump(rt.stats().launches_refused);
    throw Error(Errc::refused, "kernel '" + spec.name + "' routes to its reference (" + why_text +
                                   ") but no reference is registered for it (kiln_runtime_register_reference)");
  }
  kiln_call_info info{};
  info.size = sizeof(info);
  info.kernel = spec.name.c_str();
  info.device = device;
  info.reason = why;
  info.reason_text = why_text.c_str();
  info.archive_digest = archive->digest().c_str();
  int rc = ref.fn(&info, args, arg_count, stream, ref.user);
  if (rc != 0) {
    kiln::engine::Stats::bump(rt.stats().launch_failures);
    throw Error(Errc::reference_failed, "the reference for kernel '" + spec.name + "' returned " + std::to_string(rc));
  }
  kiln::engine::Stats::bump(rt.stats().launches_reference);
  return KILN_ROUTE_REFERENCE;
}
