#include "attestation.hpp"

#include "core/error.hpp"
#include "core/json.hpp"
#include "core/sha256.hpp"
#include "kiln/kiln.h"

namespace kiln::cli {

namespace {

std::string hex_of(const Sha256& d) { return digest_string(d).substr(7); }  // without "sha256:"

const format::Entry* entry_named(const ArchiveReader& archive, const std::string& path) {
  for (const format::Entry& e : archive.index().entries) {
    if (e.path == path) return &e;
  }
  return nullptr;
}

}  // namespace

std::string gpu_run_statement(const ArchiveReader& archive, const RunDevice& device, const std::vector<TestResult>& results,
                              std::uint64_t unix_time) {
  const format::Index& index = archive.index();
  json::Writer w;
  w.begin_object().field("_type", kInTotoStatementType).key("subject").begin_array();
  w.begin_object().field("name", index.package + ".kiln").key("digest").begin_object();
  w.field("sha256", hex_of(archive.digest())).end_object().end_object();
  w.end_array().field("predicateType", kGpuRunPredicateType).key("predicate").begin_object();
  w.field("kiln", kiln_version_string()).field("ran_at", unix_time);
  w.key("archive").begin_object().field("package", index.package).field("kernel_revision", index.kernel_revision);
  w.field("sequence", index.sequence).end_object();
  w.key("device").begin_object().field("vendor", device.vendor).field("name", device.name).field("arch", device.arch);
  w.field("compute_capability", device.compute_capability).field("driver", device.driver);
  w.field("memory_bytes", device.memory_bytes).end_object();
  bool passed = true;
  w.key("results").begin_array();
  for (const TestResult& r : results) {
    if (!r.ran) continue;
    passed = passed && r.passed;
    w.begin_object().field("kernel", r.kernel).field("test", r.test).field("route", r.route).field("target", r.target);
    w.field("variant", r.variant).key("code").begin_object().field("path", r.code_path);
    const format::Entry* e = entry_named(archive, r.code_path);
    w.field("sha256", e != nullptr ? hex_of(e->content_sha256) : std::string()).end_object();
    w.field("passed", r.passed).field("elements", r.elements).field("mismatches", r.mismatches);
    w.field("unwritten", r.unwritten).field("max_abs_error", r.max_abs_error).field("max_rel_error", r.max_rel_error);
    w.field("median_us", r.median_us).end_object();
  }
  w.end_array().field("passed", passed).end_object().end_object();
  return w.str();
}

}  // namespace kiln::cli
