// kiln attest verify: checks an attestation that `kiln verify --run --attest` wrote.
#include <CLI/CLI.hpp>
#include <ctime>
#include <iostream>
#include <memory>

#include "attestation.hpp"
#include "cli_common.hpp"
#include "commands.hpp"
#include "core/archive_reader.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/json.hpp"

namespace kiln::cli {

void add_attest_command(CLI::App& app) {
  struct Options {
    std::string file, trust, archive;
    unsigned threshold = 1;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* attest = app.add_subcommand("attest", "Check attestations of GPU runs (kiln verify --run --attest writes them)");
  attest->require_subcommand(1);
  CLI::App* cmd = attest->add_subcommand("verify", "Check an attestation's signatures and what it attests");
  cmd->add_option("file", o->file, "The attestation (a DSSE envelope)")->required();
  cmd->add_option("--trust,-t", o->trust, "Trusted PEM public key, or a folder of *.pub / *.pem keys")->required();
  cmd->add_option("--threshold", o->threshold, "Distinct trusted signers required")->check(CLI::Range(1u, 64u));
  cmd->add_option("--archive", o->archive, "The archive it must attest: its digest must be the attestation's subject");
  cmd->add_flag("--json", o->json, "Print what it attests as JSON");
  cmd->callback([o] {
    std::string text = read_regular_file_text_nofollow(o->file, kMaxAttestationBytes);
    AttestationFacts f = verify_attestation(text, TrustSet::load(o->trust, kAttestationRole), o->threshold, o->file);
    if (!o->archive.empty()) {
      std::unique_ptr<ArchiveReader> archive = ArchiveReader::open_file(o->archive, ReadOptions{});
      std::string digest = digest_string(archive->digest());
      if (digest != f.subject_digest) {
        fail(Errc::refused, o->file + " attests " + f.subject_digest + ", not " + o->archive + " (" + digest + ")");
      }
    }
    if (o->json) {
      json::Writer w;
      w.begin_object().field("subject", f.subject_digest).field("package", f.package);
      w.field("kernel_revision", f.kernel_revision).field("sequence", f.sequence).field("device", f.device_name);
      w.field("arch", f.arch).field("compute_capability", f.compute_capability).field("driver", f.driver);
      w.field("ran_at", f.ran_at).field("tests_run", f.tests_run).field("tests_passed", f.tests_passed);
      w.field("passed", f.passed).key("signed_by").begin_array();
      for (const std::string& k : f.signed_by) w.value(k);
      w.end_array().end_object();
      std::cout << w.str() << "\n";
    } else {
      std::cout << o->file << "\n"
                << "  subject     " << f.subject_digest << "  (" << f.package << " " << f.kernel_revision << ", sequence "
                << f.sequence << ")\n"
                << "  ran on      " << f.device_name << " (" << f.arch
                << (f.compute_capability.empty() ? "" : ", cc " + f.compute_capability) << ", driver " << f.driver << ")\n"
                << "  tests       " << f.tests_passed << " of " << f.tests_run << " passed\n"
                << "  signed by   ";
      for (std::size_t i = 0; i < f.signed_by.size(); ++i) std::cout << (i ? ", " : "") << "key " << f.signed_by[i];
      std::cout << "\n" << (f.passed ? "attested" : "NOT attested: not every test passed") << "\n";
    }
    if (!f.passed) fail(Errc::refused, o->file + ": the attested run did not pass every test");
  });
}

}  // namespace kiln::cli
