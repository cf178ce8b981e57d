// kiln inspect.
#include <CLI/CLI.hpp>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>

#include "archive_reader.hpp"
#include "cli_common.hpp"
#include "commands.hpp"

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

std::string shape_text(const ShapeSpec& s) {
  std::ostringstream out;
  out << s.name << " grid(" << s.grid[0] << "," << s.grid[1] << "," << s.grid[2] << ") block(" << s.block[0] << ","
      << s.block[1] << "," << s.block[2] << ") smem " << s.shared_mem;
  return out.str();
}

void print_json(const Archive& a, bool checked) {
  const format::Index& index = a.index();
  std::ostringstream out;
  out << "{\"file\":" << json_string(a.name()) << ",\"digest\":" << json_string(digest_string(a.digest()))
      << ",\"size\":" << a.file_size() << ",\"package\":" << json_string(index.package)
      << ",\"kernel_revision\":" << json_string(index.kernel_revision) << ",\"sequence\":" << index.sequence
      << ",\"signatures_checked\":" << (checked ? "true" : "false") << ",\"signatures\":[";
  for (std::size_t i = 0; i < a.signatures().size(); ++i) {
    const auto& s = a.signatures()[i].attributes;
    out << (i ? "," : "") << "{\"key_id\":" << json_string(s.key_id) << ",\"signer\":" << json_string(s.signer)
        << ",\"created\":" << s.created;
    if (checked) out << ",\"status\":" << json_string(signature_status_name(a.trust_report().checks[i].status));
    out << "}";
  }
  out << "],\"members\":[";
  for (std::size_t i = 0; i < index.entries.size(); ++i) {
    const format::Entry& e = index.entries[i];
    out << (i ? "," : "") << "{\"path\":" << json_string(e.path) << ",\"role\":" << json_string(format::role_name(e.role))
        << ",\"backend\":" << json_string(format::backend_name(e.backend)) << ",\"kind\":" << json_string(format::code_kind_name(e.kind))
        << ",\"arch\":" << json_string(e.arch) << ",\"compression\":" << json_string(format::compression_name(e.compression))
        << ",\"offset\":" << e.offset << ",\"stored_size\":" << e.stored_size << ",\"content_size\":" << e.content_size
        << ",\"stored_sha256\":" << json_string(sha256_hex(e.stored_sha256))
        << ",\"content_sha256\":" << json_string(sha256_hex(e.content_sha256)) << "}";
  }
  out << "],\"kernels\":[";
  const Manifest& m = a.manifest();
  for (std::size_t i = 0; i < m.kernels.size(); ++i) {
    const KernelSpec& k = m.kernels[i];
    out << (i ? "," : "") << "{\"name\":" << json_string(k.name) << ",\"entry\":" << json_string(k.entry)
        << ",\"backend\":" << json_string(k.backend)
        << ",\"fallback\":" << json_string(k.fallback == FallbackPolicy::reference ? "reference" : "refuse") << ",\"code\":[";
    for (std::size_t j = 0; j < k.code.size(); ++j) {
      out << (j ? "," : "") << "{\"arch\":" << json_string(k.code[j].arch) << ",\"file\":" << json_string(k.code[j].file.path) << "}";
    }
    out << "],\"shapes\":[";
    for (std::size_t j = 0; j < k.shapes.size(); ++j) out << (j ? "," : "") << json_string(k.shapes[j].name);
    out << "]}";
  }
  out << "],\"toolchain\":{";
  for (std::size_t i = 0; i < m.toolchain.size(); ++i) {
    out << (i ? "," : "") << json_string(m.toolchain[i].first) << ":" << json_string(m.toolchain[i].second);
  }
  out << "}}\n";
  std::cout << out.str();
}

void print_human(const Archive& a, bool checked) {
  const format::Index& index = a.index();
  const Manifest& m = a.manifest();
  std::cout << a.name() << "  (" << human_size(a.file_size()) << ")\n"
            << "  digest     " << digest_string(a.digest()) << "\n"
            << "  package    " << index.package << "  revision " << index.kernel_revision << "  sequence " << index.sequence << "\n";
  if (!m.description.empty()) std::cout << "             " << m.description << "\n";
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
    for (const ShapeSpec& s : k.shapes) std::cout << "      shape  " << shape_text(s) << "\n";
  }
  std::cout << "  members\n";
  for (const format::Entry& e : index.entries) {
    std::cout << "    " << std::left << std::setw(9) << format::role_name(e.role) << std::setw(20)
              << (e.role == format::Role::code ? std::string(format::code_kind_name(e.kind)) + " " + e.arch : "")
              << std::right << std::setw(10) << human_size(e.content_size) << " "
              << std::left << std::setw(5) << (e.compression == format::Compression::zstd ? "zstd" : "raw") << " " << e.path << "\n";
  }
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  struct Options {
    std::string file, trust;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("inspect", "Show an archive's package, signatures, kernels and members");
  cmd->add_option("file", o->file, "The archive")->required();
  cmd->add_option("--trust,-t", o->trust, "Check signatures against these keys too");
  cmd->add_flag("--json", o->json, "Print JSON on stdout");
  cmd->callback([o] {
    ReadOptions options;
    TrustSet trust;
    if (!o->trust.empty()) {
      trust = TrustSet::load(o->trust);
      options.policy = TrustPolicy{&trust, 1};
    }
    std::unique_ptr<Archive> archive = Archive::open_file(o->file, options);
    if (o->json) print_json(*archive, !o->trust.empty());
    else print_human(*archive, !o->trust.empty());
  });
}

}  // namespace kiln::cli
