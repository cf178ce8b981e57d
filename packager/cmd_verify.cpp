// kiln verify, kiln digest.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <sstream>

#include "archive_reader.hpp"
#include "cli_common.hpp"
#include "commands.hpp"
#include "progress.hpp"

namespace kiln::cli {
namespace {

std::string signatures_json(const TrustReport& report) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < report.checks.size(); ++i) {
    const SignatureCheck& c = report.checks[i];
    out << (i ? "," : "") << "{\"key_id\":" << json_string(c.key_id) << ",\"signer\":" << json_string(c.signer)
        << ",\"created\":" << c.created << ",\"status\":" << json_string(signature_status_name(c.status))
        << ",\"detail\":" << json_string(c.detail) << "}";
  }
  out << "]";
  return out.str();
}

}  // namespace

void add_verify_command(CLI::App& app) {
  struct Options {
    std::string file, trust;
    unsigned threshold = 1;
    unsigned threads = default_threads();
    bool deep = false, json = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("verify", "Check an archive's signatures and every member's digest");
  cmd->add_option("file", o->file, "The archive")->required();
  cmd->add_option("--trust,-t", o->trust, "Trusted PEM public key, or a folder of *.pub / *.pem keys")->required();
  cmd->add_option("--threshold", o->threshold, "Distinct trusted signers required")->check(CLI::Range(1u, 64u));
  cmd->add_option("--threads,-j", o->threads, "Members hashed in parallel")->check(CLI::Range(1u, 1024u));
  cmd->add_flag("--deep", o->deep, "Also decompress every member and check its content digest");
  cmd->add_flag("--json", o->json, "Print a JSON report on stdout");
  cmd->callback([o] {
    TrustSet trust = TrustSet::load(o->trust);
    ReadOptions options;
    options.policy = TrustPolicy{&trust, o->threshold};
    std::unique_ptr<Archive> archive;
    try {
      archive = Archive::open_file(o->file, options);
      std::uint64_t total = 0;
      for (const auto& e : archive->index().entries) total += e.stored_size;
      ProgressBar bar("verifying", total);
      archive->verify_all(o->threads, o->deep, bar.callback());
    } catch (const Error& e) {
      if (o->json) {
        std::cout << "{\"file\":" << json_string(o->file) << ",\"ok\":false,\"error\":{\"code\":"
                  << json_string(errc_name(e.code())) << ",\"message\":" << json_string(e.what()) << "}}\n";
      }
      throw;
    }
    const format::Index& index = archive->index();
    std::uint64_t stored = 0;
    for (const auto& e : index.entries) stored += e.stored_size;
    const TrustReport& report = archive->trust_report();
    if (o->json) {
      std::cout << "{\"file\":" << json_string(o->file) << ",\"ok\":true,\"digest\":" << json_string(digest_string(archive->digest()))
                << ",\"package\":" << json_string(index.package) << ",\"kernel_revision\":" << json_string(index.kernel_revision)
                << ",\"sequence\":" << index.sequence << ",\"signatures\":" << signatures_json(report)
                << ",\"trusted_signers\":" << report.distinct_trusted_signers << ",\"threshold\":" << report.threshold
                << ",\"members_checked\":" << index.entries.size() << ",\"bytes_checked\":" << stored
                << ",\"deep\":" << (o->deep ? "true" : "false") << "}\n";
      return;
    }
    std::cout << o->file << "\n"
              << "  digest      " << digest_string(archive->digest()) << "\n"
              << "  package     " << index.package << "  revision " << index.kernel_revision << "  sequence " << index.sequence << "\n"
              << "  signatures  " << report.distinct_trusted_signers << " distinct trusted signer(s), " << report.threshold
              << " required\n";
    for (const SignatureCheck& c : report.checks) {
      std::cout << "    " << (c.status == SignatureStatus::valid ? "ok        " : "not used  ") << "key " << c.key_id
                << "  signer '" << c.signer << "'";
      if (c.status != SignatureStatus::valid) std::cout << "  (" << c.detail << ")";
      std::cout << "\n";
    }
    std::cout << "  members     " << index.entries.size() << " checked, " << human_size(stored) << " stored"
              << (o->deep ? ", content digests checked too" : "") << "\n"
              << "verified\n";
  });
}

void add_digest_command(CLI::App& app) {
  auto file = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("digest", "Print the archive's identity, sha256:<hex>, and nothing else");
  cmd->add_option("file", *file, "The archive")->required();
  cmd->callback([file] {
    std::unique_ptr<Archive> archive = Archive::open_file(*file, ReadOptions{});
    std::cout << digest_string(archive->digest()) << "\n";
  });
}

}  // namespace kiln::cli
