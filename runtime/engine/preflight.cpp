// The preflight report: every kernel of an archive resolved for one device, or judged for a
// described target, as JSON. Built here only, so kiln_archive_preflight, its _target sibling and
// `kiln preflight --json` cannot drift apart.
#include <algorithm>

#include "core/json.hpp"
#include "core/launch_features.hpp"
#include "engine/archive.hpp"
#include "engine/backends.hpp"
#include "engine/described_target.hpp"
#include "engine/runtime.hpp"

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
  backend::BackendList backends = described_backends(described);
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
    resolve(k, backends);
    kernel_report(w, name, k);
  }
  w.end_array().end_object();
  return w.str();
}

namespace {

void sort_unique(std::vector<std::size_t>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

}  // namespace

std::vector<std::size_t> Archive::planned_code(const backend::BackendList& backends, int device) {
  std::vector<std::size_t> out;
  for (const std::string& name : reader_->kernel_names()) {
    Kernel k(*this, reader_->kernel(name), device, true);
    k.planning_ = true;
    resolve(k, backends);
    out.insert(out.end(), k.planned_.begin(), k.planned_.end());
  }
  sort_unique(out);
  return out;
}

std::vector<std::size_t> Archive::code_for_target(const std::string& target, const std::string& driver) {
  DescribedTarget described = parse_described_target(target, driver);
  backend::BackendList backends = described_backends(described);
  return planned_code(backends, 0);
}

std::vector<std::size_t> Archive::code_for_host(std::vector<std::string>* found) {
  std::vector<std::size_t> out;
  std::string why_none;
  for (int d = 0; d < 64; ++d) {
    bool any = false;
    std::string why;
    for (const auto& b : runtime_.backends()) {
      kiln_reason reason = KILN_REASON_NO_DEVICE;
      std::string b_why;
      if (const backend::DeviceInfo* info = b->device(d, &reason, &b_why)) {
        found->push_back(info->describe);
        any = true;
      } else {
        why += std::string(why.empty() ? "" : "; ") + b->vendor() + ": " + b_why;
      }
    }
    if (!any) {
      why_none = why;
      break;
    }
    std::vector<std::size_t> more = planned_code(runtime_.backends(), d);
    out.insert(out.end(), more.begin(), more.end());
  }
  if (found->empty()) throw kiln::Failure(kiln::Errc::not_found, "this host has no GPU kiln can use (" + why_none + ")");
  sort_unique(out);
  return out;
}

}  // namespace kiln::engine
