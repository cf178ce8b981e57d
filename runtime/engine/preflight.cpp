// The preflight report: every kernel of an archive resolved for one device, or judged for a
// described target, as JSON. Built here only, so kiln_archive_preflight, its _target sibling and
// `kiln preflight --json` cannot drift apart.
#include "archive.hpp"
#include "described_target.hpp"
#include "json.hpp"
#include "launch_features.hpp"
#include "runtime.hpp"

namespace kiln::engine {

namespace {

// One kernel's object in a report.
void kernel_report(kiln::json::Writer& w, const std::string& name, const Kernel& k) {
  w.begin_object()
      .field("kernel", name)
      .field("route", kiln_route_string(k.route()))
      .field("reason", kiln_reason_string(k.reason()))
      .field("target", k.target())
      .field("detail", k.reason_text());
  // What the launch needs of the device beyond the code, and the parameters libkiln builds.
  kiln::LaunchFeatures needs = kiln::launch_features(k.spec());
  w.key("needs").begin_array();
  if (needs.tensor_map) w.value("tensor_map");
  if (needs.cluster) w.value("cluster");
  if (needs.scratch) w.value("scratch");
  w.end_array();
  if (!k.spec().kernel_args.empty()) {
    w.key("kernel_args").begin_array();
    for (const kiln::KernelArg& arg : k.spec().kernel_args) kiln::kernel_arg_json(w, arg, k.spec());
    w.end_array();
  }
  w.end_object();
}

}  // namespace

std::string Archive::preflight_json(int device) {
  kiln::json::Writer w;
  w.begin_object().field("digest", digest_).field("device", device).key("kernels").begin_array();
  for (const std::string& name : reader_->kernel_names()) kernel_report(w, name, *kernel(name, device));
  w.end_array().end_object();
  return w.str();
}

std::string Archive::preflight_target_json(const std::string& target, const std::string& driver) {
  DescribedTarget described = parse_described_target(target, driver);
  DescribedBackends backends = described_backends(described);
  kiln::json::Writer w;
  w.begin_object().field("digest", digest_).field("target", target);
  if (driver.empty()) {
    w.key("driver").null();
  } else {
    w.field("driver", driver);
  }
  w.key("kernels").begin_array();
  for (const std::string& name : reader_->kernel_names()) {
    kiln::KernelSpec spec = reader_->kernel(name);
    bool reference_allowed = runtime_.policy() == KILN_POLICY_FALLBACK && spec.fallback == kiln::FallbackPolicy::reference;
    Kernel k(*this, std::move(spec), 0, reference_allowed);
    resolve(k, *backends.cuda, *backends.hip);
    kernel_report(w, name, k);
  }
  w.end_array().end_object();
  return w.str();
}

}  // namespace kiln::engine
