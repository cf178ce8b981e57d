// The preflight report: every kernel of an archive resolved for one device, as JSON. Built here
// only, so kiln_archive_preflight and `kiln preflight --json` cannot drift apart.
#include "archive.hpp"
#include "json.hpp"
#include "launch_features.hpp"

namespace kiln::engine {

std::string Archive::preflight_json(int device) {
  kiln::json::Writer w;
  w.begin_object().field("digest", digest_).field("device", device).key("kernels").begin_array();
  for (const std::string& name : reader_->kernel_names()) {
    const Kernel* k = kernel(name, device);
    w.begin_object()
        .field("kernel", name)
        .field("route", kiln_route_string(k->route()))
        .field("reason", kiln_reason_string(k->reason()))
        .field("target", k->target())
        .field("detail", k->reason_text());
    // What the launch needs of the device beyond the code, and the parameters libkiln builds.
    kiln::LaunchFeatures needs = kiln::launch_features(k->spec());
    w.key("needs").begin_array();
    if (needs.tensor_map) w.value("tensor_map");
    if (needs.cluster) w.value("cluster");
    if (needs.scratch) w.value("scratch");
    w.end_array();
    if (!k->spec().kernel_args.empty()) {
      w.key("kernel_args").begin_array();
      for (const kiln::KernelArg& arg : k->spec().kernel_args) kiln::kernel_arg_json(w, arg, k->spec());
      w.end_array();
    }
    w.end_object();
  }
  w.end_array().end_object();
  return w.str();
}

}  // namespace kiln::engine
