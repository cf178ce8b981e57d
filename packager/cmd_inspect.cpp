// kiln inspect.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli_common.hpp"
#include "commands.hpp"
#include "core/archive_reader.hpp"
#include "core/json.hpp"
#include "core/launch_features.hpp"
#include "core/shape_expr.hpp"
#include "core/shape_program.hpp"
#include "store/store.hpp"

namespace kiln::cli {
namespace {

// A signature's time in words: packs are reproducible, so unless SOURCE_DATE_EPOCH or --created
// set one, no clock was read and the field is 0; saying "created 0" would look like a fault.
std::string created_text(std::uint64_t seconds) {
  if (seconds == 0) return "no time recorded";
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm utc{};
  char text[32];
  if (!gmtime_r(&t, &utc) || !std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &utc))
    return "created " + std::to_string(seconds);
  return std::string("created ") + text;
}

// A range shape's launch element: the expression as text, or its number when it is one.
std::string launch_element(const ExprCode& code, const KernelSpec& k) { return expr_text(code, k.params); }

std::string shape_text(const ShapeSpec& s, const KernelSpec& k) {
  std::ostringstream out;
  if (!s.dynamic) {
    out << s.name << " grid(" << s.grid[0] << "," << s.grid[1] << "," << s.grid[2] << ") block(" << s.block[0] << ","
        << s.block[1] << "," << s.block[2] << ") smem " << s.shared_mem;
    if (s.has_cluster) out << " cluster(" << s.cluster[0] << "," << s.cluster[1] << "," << s.cluster[2] << ")";
    return out.str();
  }
  out << s.name << "  (range shape)";
  for (const auto& [name, v] : s.values) out << " " << name << "=" << v;
  for (const ShapeRange& r : s.ranges) out << " " << r.name << " in [" << r.min << ", " << r.max << "]";
  for (const ExprCode& c : s.where) out << " where " << expr_text(c, k.params);
  out << "\n               grid(" << launch_element(s.grid_code[0], k) << ", " << launch_element(s.grid_code[1], k) << ", "
      << launch_element(s.grid_code[2], k) << ") block(" << launch_element(s.block_code[0], k) << ", "
      << launch_element(s.block_code[1], k) << ", " << launch_element(s.block_code[2], k) << ") smem "
      << launch_element(s.shared_mem_code, k) << " (at most " << ShapeProgram(s, k.params).max_shared_mem() << ")";
  if (s.has_cluster) out << " cluster(" << s.cluster[0] << "," << s.cluster[1] << "," << s.cluster[2] << ")";
  return out.str();
}

// In JSON, a launch element that is a plain integer is a number, as kiln.toml wrote it.
void launch_json(json::Writer& w, const ExprCode& code, const KernelSpec& k) {
  if (code.size() == 9 && code[0] == op::konst) {
    w.value(static_cast<std::int64_t>(std::stoll(expr_text(code, k.params))));
  } else {
    w.value(expr_text(code, k.params));
  }
}

void shape_json(json::Writer& w, const ShapeSpec& s, const KernelSpec& k) {
  w.begin_object().field("name", s.name).field("range", s.dynamic);
  if (s.has_cluster) w.key("cluster").begin_array().value(s.cluster[0]).value(s.cluster[1]).value(s.cluster[2]).end_array();
  w.key("values").begin_object();
  for (const auto& [name, v] : s.values) w.key(name).value(v);
  w.end_object();
  if (!s.dynamic) {
    w.key("grid").begin_array();
    for (auto v : s.grid) w.value(v);
    w.end_array().key("block").begin_array();
    for (auto v : s.block) w.value(v);
    w.end_array().key("shared_mem").value(s.shared_mem);
    w.key("max_shared_mem").value(s.shared_mem);
    w.end_object();
    return;
  }
  w.key("ranges").begin_object();
  for (const ShapeRange& r : s.ranges) w.key(r.name).begin_array().value(r.min).value(r.max).end_array();
  w.end_object().key("where").begin_array();
  for (const ExprCode& c : s.where) w.value(expr_text(c, k.params));
  w.end_array().key("grid").begin_array();
  for (const ExprCode& c : s.grid_code) launch_json(w, c, k);
  w.end_array().key("block").begin_array();
  for (const ExprCode& c : s.block_code) launch_json(w, c, k);
  w.end_array().key("shared_mem");
  launch_json(w, s.shared_mem_code, k);
  w.key("max_shared_mem").value(ShapeProgram(s, k.params).max_shared_mem());
  w.end_object();
}

// How the index is laid out (FORMAT.md §3): a one-level head (KILNIDX2) or a tree (KILNIDX3, or
// KILNIDX4 where the head carries the kernel table's entry).
std::string index_form_text(const ArchiveReader& a) {
  const std::size_t count = a.index_head_references();
  std::string refs = std::to_string(count) + (count == 1 ? " reference" : " references");
  if (!a.index_is_tree()) return "one level (KILNIDX2): a head of " + refs + " to entry pages";
  const unsigned levels = a.index_height();
  return std::string(a.index_head_has_table_entry() ? "tree (KILNIDX4, with the kernel table's entry)" : "tree (KILNIDX3)") +
         ": a head of " + refs + ", " + std::to_string(levels) + (levels == 1 ? " level" : " levels") + " of pages below it";
}

// The attestations a store keeps for the archive (`--store`), or none asked (null).
using Kept = std::vector<store::StoredAttestation>;

void print_json(const ArchiveReader& a, bool checked, const Kept* kept) {
  const format::Index& index = a.index();
  json::Writer w;
  w.begin_object()
      .field("file", a.name())
      .field("digest", digest_string(a.digest()))
      .field("size", a.file_size())
      .field("sparse", a.sparse())
      .field("complete_size", a.complete_size())
      .field("package", index.package)
      .field("kernel_revision", index.kernel_revision)
      .field("sequence", index.sequence)
      .field("signatures_checked", checked);
  w.key("index")
      .begin_object()
      .field("form", a.index_is_tree() ? "tree" : "one-level")
      .field("levels", static_cast<std::uint64_t>(a.index_height()))
      .field("head_references", static_cast<std::uint64_t>(a.index_head_references()))
      .field("kernel_table_entry", a.index_head_has_table_entry())
      .field("members", static_cast<std::uint64_t>(a.member_count()))
      .end_object();
  w.key("signatures").begin_array();
  for (std::size_t i = 0; i < a.signatures().size(); ++i) {
    const auto& s = a.signatures()[i].attributes;
    w.begin_object().field("key_id", s.key_id).field("signer", s.signer).field("created", s.created);
    if (checked) w.field("status", signature_status_name(a.trust_report().checks[i].status));
    w.end_object();
  }
  w.end_array().key("members").begin_array();
  for (std::size_t i = 0; i < index.entries.size(); ++i) {
    const format::Entry& e = index.entries[i];
    w.begin_object()
        .field("path", e.path)
        .field("present", a.member_present(i))
        .field("role", format::role_name(e.role))
        .field("backend", format::backend_name(e.backend))
        .field("kind", format::code_kind_name(e.kind))
        .field("arch", e.arch)
        .field("compression", format::compression_name(e.compression))
        .field("offset", e.offset)
        .field("stored_size", e.stored_size)
        .field("content_size", e.content_size)
        .field("stored_sha256", sha256_hex(e.stored_sha256))
        .field("content_sha256", sha256_hex(e.content_sha256))
        .end_object();
  }
  w.end_array().key("kernels").begin_array();
  const Manifest& m = a.manifest();
  for (const KernelSpec& k : m.kernels) {
    w.begin_object()
        .field("name", k.name)
        .field("entry", k.entry)
        .field("backend", k.backend)
        .field("fallback", k.fallback == FallbackPolicy::reference ? "reference" : "refuse");
    w.key("code").begin_array();
    for (const auto& c : k.code) w.begin_object().field("arch", c.arch).field("file", c.file.path).end_object();
    w.end_array();
    if (!k.variants.empty()) {  // absent without variants
      w.key("variants").begin_array();
      for (const VariantSpec& v : k.variants) {
        w.begin_object().field("name", v.name).key("when").begin_array();
        for (const ExprCode& c : v.when) w.value(expr_text(c, k.params));
        w.end_array().key("code").begin_array();
        for (const auto& c : v.code) w.begin_object().field("arch", c.arch).field("file", c.file.path).end_object();
        w.end_array();
        if (v.has_kernel_args) {  // absent: the kernel's own
          w.key("kernel_args").begin_array();
          for (const KernelArg& arg : v.kernel_args) kernel_arg_json(w, arg, k);
          w.end_array();
        }
        w.end_object();
      }
      w.end_array();
    }
    w.key("shapes").begin_array();
    for (const ShapeSpec& s : k.shapes) w.value(s.name);
    // The shapes in full (0.3): "shapes" stays a list of names for existing readers.
    w.end_array().key("shape_specs").begin_array();
    for (const ShapeSpec& s : k.shapes) shape_json(w, s, k);
    // The kernel's own parameters when they are not the call's (absent otherwise).
    w.end_array();
    if (!k.kernel_args.empty()) {
      w.key("kernel_args").begin_array();
      for (const KernelArg& arg : k.kernel_args) kernel_arg_json(w, arg, k);
      w.end_array();
    }
    w.end_object();
  }
  w.end_array().key("toolchain").begin_object();
  for (const auto& [tool, version] : m.toolchain) w.field(tool, version);
  w.end_object();
  if (kept != nullptr) {
    w.key("attestations").begin_array();
    for (const store::StoredAttestation& s : *kept) {
      w.begin_object().field("history", s.record.number).field("time", s.record.time).field("envelope", s.envelope_digest);
      w.field("what", s.record.reason.size() > 72 ? s.record.reason.substr(72) : "").field("file", s.path).end_object();
    }
    w.end_array();
  }
  w.end_object();
  std::cout << w.str() << "\n";
}

void print_human(const ArchiveReader& a, bool checked, const Kept* kept) {
  const format::Index& index = a.index();
  const Manifest& m = a.manifest();
  std::cout << a.name() << "  (" << human_size(a.file_size()) << " file"
            << (a.sparse() ? ", sparse: the archive is " + human_size(a.complete_size()) : std::string()) << ")\n"
            << "  digest     " << digest_string(a.digest()) << "\n"
            << "  package    " << index.package << "  revision " << index.kernel_revision << "  sequence " << index.sequence << "\n";
  if (!m.description.empty()) std::cout << "             " << m.description << "\n";
  std::cout << "  index      " << a.member_count() << " members; " << index_form_text(a) << "\n";
  if (!m.toolchain.empty()) {
    std::cout << "  toolchain ";
    for (const auto& kv : m.toolchain) std::cout << " " << kv.first << "=" << kv.second;
    std::cout << "\n";
  }
  std::cout << "  signatures " << a.signatures().size()
            << (checked ? "" : "  (not checked: pass --trust KEYS to check them)") << "\n";
  for (std::size_t i = 0; i < a.signatures().size(); ++i) {
    const auto& s = a.signatures()[i].attributes;
    std::cout << "    key " << s.key_id << "  signer '" << s.signer << "'  " << created_text(s.created);
    if (checked) std::cout << "  " << signature_status_name(a.trust_report().checks[i].status);
    std::cout << "\n";
  }
  std::cout << "  kernels\n";
  for (const KernelSpec& k : m.kernels) {
    std::cout << "    " << k.name << "  entry " << k.entry << "  backend " << k.backend << "  fallback "
              << (k.fallback == FallbackPolicy::reference ? "reference" : "refuse") << "\n";
    for (const CodeObjectRef& c : k.code) std::cout << "      code   " << std::left << std::setw(24) << c.arch << " " << c.file.path << "\n";
    if (!k.variants.empty()) {
      std::cout << "      variants (a call takes the first whose conditions hold, else the code above):\n";
      for (const VariantSpec& v : k.variants) {
        std::string when;
        for (const ExprCode& c : v.when) when += (when.empty() ? "" : " && ") + expr_text(c, k.params);
        std::cout << "        " << v.name << "  when " << when << "\n";
        for (const CodeObjectRef& c : v.code) std::cout << "          code " << std::left << std::setw(22) << c.arch << " " << c.file.path << "\n";
        if (v.has_kernel_args) {
          std::cout << "          takes its own parameters:\n";
          for (const KernelArg& arg : v.kernel_args) std::cout << "            " << kernel_arg_text(arg, k) << "\n";
        }
      }
    }
    if (!k.kernel_args.empty()) {
      std::cout << "      kernel takes (libkiln builds it from the call):\n";
      for (const KernelArg& arg : k.kernel_args) std::cout << "        " << kernel_arg_text(arg, k) << "\n";
    }
    for (const ShapeSpec& s : k.shapes) std::cout << "      shape  " << shape_text(s, k) << "\n";
  }
  std::cout << "  members\n";
  auto code_text = [](const format::Entry& e) {
    return e.role == format::Role::code ? std::string(format::code_kind_name(e.kind)) + " " + e.arch : std::string();
  };
  // As wide as the longest kind and targets (an offload bundle for "gfx90a:xnack-" is 28), so
  // that sizes and paths stay in their columns.
  std::size_t code_width = 20;
  for (const format::Entry& e : index.entries) code_width = std::max(code_width, code_text(e).size() + 1);
  for (std::size_t i = 0; i < index.entries.size(); ++i) {
    const format::Entry& e = index.entries[i];
    std::cout << "    " << std::left << std::setw(9) << format::role_name(e.role)
              << std::setw(static_cast<int>(code_width)) << code_text(e) << std::right << std::setw(10)
              << human_size(e.content_size) << " " << std::left << std::setw(5) << (e.compression == format::Compression::zstd ? "zstd" : "raw") << " " << e.path
              << (a.member_present(i) ? "" : "  (absent)") << "\n";
  }
  if (kept != nullptr) {
    std::cout << "  attestations kept by the store: " << kept->size() << "\n";
    for (const store::StoredAttestation& s : *kept) std::cout << "    #" << s.record.number << "  " << s.record.reason << "\n";
  }
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  struct Options {
    std::string file, trust, store;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("inspect", "Show an archive's package, signatures, kernels and members");
  cmd->add_option("file", o->file, "The archive")->required();
  cmd->add_option("--trust,-t", o->trust, "Check signatures against these keys too");
  cmd->add_flag("--json", o->json, "Print JSON on stdout");
  cmd->add_option("--store,-s", o->store, "Also list the attestations this store keeps for the archive (kiln store attest)");
  cmd->callback([o] {
    ReadOptions options;
    TrustSet trust;
    if (!o->trust.empty()) {
      trust = TrustSet::load(o->trust);
      options.policy = TrustPolicy{&trust, 1};
    }
    std::unique_ptr<ArchiveReader> archive = ArchiveReader::open_file(o->file, options);
    Kept kept;
    if (!o->store.empty()) kept = store::Store(o->store).attestations(digest_string(archive->digest()));
    const Kept* listed = o->store.empty() ? nullptr : &kept;
    if (o->json) print_json(*archive, !o->trust.empty(), listed);
    else print_human(*archive, !o->trust.empty(), listed);
  });
}

}  // namespace kiln::cli
