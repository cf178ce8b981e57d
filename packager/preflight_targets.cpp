#include "preflight_targets.hpp"

#include <cstdio>
#include <iostream>

#include "cli_common.hpp"
#include "core/attestation_facts.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/json.hpp"
#include "core/manifest_toml.hpp"
#include "kiln/kiln.hpp"

namespace kiln::cli {

std::vector<FleetTarget> read_fleet_file(const std::string& path) {
  toml::table doc;
  try {
    doc = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    throw Failure(Errc::invalid_argument, path + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) + ": " +
                                            std::string(e.description()));
  }
  const toml::array* fleet = doc["fleet"].as_array();
  if (fleet == nullptr || fleet->empty()) {
    throw Failure(Errc::invalid_argument, path + ": no [[fleet]] entries (each: target = \"sm_80\", optional name and driver)");
  }
  std::vector<FleetTarget> out;
  for (std::size_t i = 0; i < fleet->size(); ++i) {
    const toml::table* t = (*fleet)[i].as_table();
    std::string where = path + ": fleet[" + std::to_string(i) + "]";
    if (t == nullptr) throw Failure(Errc::invalid_argument, where + " must be a table");
    FleetTarget f;
    for (auto&& [key, value] : *t) {
      std::string k(key.str());
      if (k != "name" && k != "target" && k != "driver") {
        throw Failure(Errc::invalid_argument, where + ": unknown key '" + k + "' (known: name, target, driver)");
      }
      if (!value.is_string()) throw Failure(Errc::invalid_argument, where + ": '" + k + "' must be a string");
      std::string v = *value.value<std::string>();
      (k == "name" ? f.name : k == "target" ? f.target : f.driver) = v;
    }
    if (f.target.empty()) throw Failure(Errc::invalid_argument, where + " has no target (e.g. target = \"sm_90\")");
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<FleetTarget> targets_from_list(const std::vector<std::string>& lists, const std::string& driver) {
  std::vector<FleetTarget> out;
  for (const std::string& list : lists) {
    std::size_t start = 0;
    while (start <= list.size()) {
      std::size_t comma = list.find(',', start);
      if (comma == std::string::npos) comma = list.size();
      std::string item = list.substr(start, comma - start);
      if (item.empty()) throw Failure(Errc::invalid_argument, "--target '" + list + "' has an empty item");
      out.push_back({"", item, driver});
      start = comma + 1;
    }
  }
  return out;
}

int preflight_targets(const std::string& file, const std::string& trust, bool strict, bool json,
                      const AttestationsGiven& attestations, const std::vector<FleetTarget>& targets) {
  // The C API's defaults, as `kiln preflight` has them.
  kiln::RuntimeOptions options;
  options.trust_path(trust).policy(strict ? KILN_POLICY_STRICT : KILN_POLICY_FALLBACK);
  if (!attestations.keys.empty()) options.attestation_trust_path(attestations.keys);
  options.attestation_threshold(attestations.threshold);
  kiln::Runtime runtime;
  kiln::Archive archive;
  through_the_api([&] {
    runtime = kiln::Runtime(options);
    archive = kiln::Archive(runtime, file);
  });
  for (const std::string& f : attestations.files) {
    std::string envelope = read_small_file(f, kMaxAttestationBytes);
    through_the_api([&] { archive.add_attestation(envelope.data(), envelope.size()); }, f);
  }
  int off_device = 0;
  kiln::json::Writer w;
  w.begin_object().field("file", file).field("digest", archive.digest()).key("targets").begin_array();
  if (!json) {
    std::cout << file << " (" << archive.digest() << "), judged for " << targets.size()
              << " target(s) from the archive alone (no GPU used):\n";
    std::printf("  %-22s %-20s %-9s %-18s %s\n", "target", "kernel", "route", "reason", "detail");
  }
  for (const FleetTarget& t : targets) {
    std::string report;
    through_the_api([&] { report = archive.preflight_target(t.target, t.driver); });
    kiln::json::Value doc = kiln::json::parse(report, "the preflight report");
    std::string label = t.name.empty() ? t.target : t.name + " (" + t.target + ")";
    for (const kiln::json::Value& k : doc.get("kernels")->array) {
      const std::string& route = *k.get_string("route");
      if (route != "native" && route != "ptx-jit") ++off_device;
      if (!json) {
        std::printf("  %-22s %-20s %-9s %-18s %s\n", label.c_str(), k.get_string("kernel")->c_str(), route.c_str(),
                    k.get_string("reason")->c_str(), k.get_string("detail")->c_str());
      }
    }
    if (json) {
      // the report as libkiln wrote it, with the fleet entry's name first where it has one
      w.embed(t.name.empty() ? report : "{\"name\":" + kiln::json::quote(t.name) + "," + report.substr(1));
    }
  }
  w.end_array().end_object();
  if (json) {
    std::cout << w.str() << "\n";
  } else {
    std::fflush(stdout);
  }
  return off_device;
}

}  // namespace kiln::cli
