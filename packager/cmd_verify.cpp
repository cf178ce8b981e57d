// kiln verify, kiln digest.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <cstdio>
#include <ctime>
#include <optional>

#include "attestation.hpp"
#include "cli_common.hpp"
#include "commands.hpp"
#include "core/archive_reader.hpp"
#include "core/file_io.hpp"
#include "core/json.hpp"
#include "progress.hpp"
#include "verify_run.hpp"

namespace kiln::cli {
namespace {

// Why --run ran nothing, in the words that lead to the fix: no vectors in the archive (a GPU
// would not help), or kernels with vectors that do not run natively here (the route and the
// resolver's reason, device or no device).
std::string nothing_ran_reason(const std::vector<TestResult>& results, int device) {
  const std::string where = "device " + std::to_string(device) + " of this host";
  const TestResult* routed = nullptr;
  for (const TestResult& r : results) {
    if (!r.test.empty()) {
      routed = &r;
      break;
    }
  }
  if (routed == nullptr) {
    return "no kernel of this archive declares a test vector ([[kernel.test]] in kiln.toml), so --run had nothing to "
           "run on " + where + ": add vectors to the package (kiln.export writes them from a reference) and pack it again";
  }
  return "no test vector ran natively on " + where + ", so --run proves nothing here: kernel '" + routed->kernel +
         "' routes to " + routed->route + " (" + routed->reason + "); run it on a GPU its code objects fit";
}

void write_signatures(json::Writer& w, const TrustReport& report) {
  w.begin_array();
  for (const SignatureCheck& c : report.checks) {
    w.begin_object()
        .field("key_id", c.key_id)
        .field("signer", c.signer)
        .field("created", c.created)
        .field("status", signature_status_name(c.status))
        .field("detail", c.detail)
        .end_object();
  }
  w.end_array();
}

}  // namespace

void add_verify_command(CLI::App& app) {
  struct Options {
    std::string file, trust, attest_key, attest_out;
    unsigned threshold = 1;
    unsigned threads = default_threads();
    bool deep = false, json = false, run = false;
    int device = 0, repeat = 20;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("verify", "Check an archive's signatures and every member's digest");
  cmd->add_option("file", o->file, "The archive")->required();
  cmd->add_option("--trust,-t", o->trust, "Trusted PEM public key, or a folder of *.pub / *.pem keys")->required();
  cmd->add_option("--threshold", o->threshold, "Distinct trusted signers required")->check(CLI::Range(1u, 64u));
  cmd->add_option("--threads,-j", o->threads, "Members hashed in parallel")->check(CLI::Range(1u, 1024u));
  cmd->add_flag("--deep", o->deep, "Also decompress every member and check its content digest");
  cmd->add_flag("--json", o->json, "Print a JSON report on stdout");
  cmd->add_flag("--run", o->run, "Then run every test vector on this host's GPU and compare (see kiln preflight)");
  cmd->add_option("--device", o->device, "CUDA device for --run")->check(CLI::Range(0, 1023));
  cmd->add_option("--repeat", o->repeat, "Timed launches per test for --run")->check(CLI::Range(1, 100000));
  cmd->add_option("--attest", o->attest_key,
                  "With --run: when every test passed, sign an attestation of the run with this PEM private key "
                  "(an in-toto Statement in a DSSE envelope; schema/ATTESTATION.md)");
  cmd->add_option("--output,-o", o->attest_out, "Where --attest writes it (default: ARCHIVE.<arch>.attestation.json; "
                                               "an existing file is refused)");
  cmd->callback([o] {
    if (!o->attest_key.empty() && !o->run) fail(Errc::invalid_argument, "--attest needs --run: it attests a run of the test vectors");
    if (!o->attest_out.empty() && o->attest_key.empty()) fail(Errc::invalid_argument, "--output is where --attest writes: give --attest KEY");
    std::optional<PrivateKey> attest_key;
    if (!o->attest_key.empty()) attest_key = PrivateKey::load_file(o->attest_key);  // a bad key fails before the run
    TrustSet trust = TrustSet::load(o->trust);
    ReadOptions options;
    options.policy = TrustPolicy{&trust, o->threshold};
    std::unique_ptr<ArchiveReader> archive;
    try {
      archive = ArchiveReader::open_file(o->file, options);
      std::uint64_t total = 0;
      for (const auto& e : archive->index().entries) total += e.stored_size;
      ProgressBar bar("verifying", total);
      archive->verify_all(o->threads, o->deep, bar.callback());
    } catch (const Failure& e) {
      if (o->json) {
        json::Writer w;
        w.begin_object().field("file", o->file).field("ok", false).key("error").begin_object();
        w.field("code", errc_name(e.code())).field("message", e.what()).end_object().end_object();
        std::cout << w.str() << "\n";
      }
      throw;
    }
    const format::Index& index = archive->index();
    // A sparse archive's absent members are not in the file: only what it holds was checked.
    std::uint64_t stored = 0;
    std::size_t held = 0;
    for (std::size_t i = 0; i < index.entries.size(); ++i) {
      if (!archive->member_present(i)) continue;
      stored += index.entries[i].stored_size;
      ++held;
    }
    const TrustReport& report = archive->trust_report();
    std::vector<TestResult> results;
    RunDevice device;
    bool ran_any = false, all_passed = true;
    if (o->run) {
      results = run_test_vectors(RunOptions{o->file, o->trust, o->threshold, o->device, o->repeat}, &device);
      for (const TestResult& r : results) {
        ran_any = ran_any || r.ran;
        all_passed = all_passed && (!r.ran || r.passed);
      }
    }
    bool ok = !o->run || (ran_any && all_passed);
    if (o->json) {
      json::Writer w;
      w.begin_object()
          .field("file", o->file)
          .field("ok", ok)
          .field("digest", digest_string(archive->digest()))
          .field("package", index.package)
          .field("kernel_revision", index.kernel_revision)
          .field("sequence", index.sequence);
      write_signatures(w.key("signatures"), report);
      w.field("trusted_signers", report.distinct_trusted_signers)
          .field("threshold", report.threshold)
          .field("members_checked", held)
          .field("bytes_checked", stored)
          .field("sparse", archive->sparse())
          .field("members_absent", index.entries.size() - held)
          .field("deep", o->deep);
      if (o->run) {
        w.field("device", o->device).key("run").begin_array();
        for (const TestResult& r : results) {
          w.begin_object()
              .field("kernel", r.kernel)
              .field("test", r.test)
              .field("route", r.route)
              .field("target", r.target)
              .field("variant", r.variant)
              .field("ran", r.ran)
              .field("passed", r.passed)
              .field("max_abs_error", r.max_abs_error)
              .field("max_rel_error", r.max_rel_error)
              .field("elements", r.elements)
              .field("mismatches", r.mismatches)
              .field("unwritten", r.unwritten)
              .field("median_us", r.median_us)
              .field("reason", r.reason)
              .field("detail", r.detail);
          if (!r.unreached_variants.empty()) {
            w.key("unreached_variants").begin_array();
            for (const std::string& v : r.unreached_variants) w.value(v);
            w.end_array();
          }
          w.end_object();
        }
        w.end_array();
      }
      w.end_object();
      std::cout << w.str() << "\n";
    } else {
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
      std::cout << "  members     " << held << " checked, " << human_size(stored) << " stored"
                << (o->deep ? ", content digests checked too" : "") << "\n";
      if (archive->sparse()) {
        std::cout << "  sparse      " << index.entries.size() - held << " member(s) absent (" << human_size(archive->file_size())
                  << " held of the archive's " << human_size(archive->complete_size()) << "): what this copy was pulled "
                  << "for runs; asked for anything else, kiln refuses by name\n";
      }
      if (o->run) {
        std::printf("  test vectors on device %d:\n    %-16s %-16s %-9s %-12s %10s %10s %9s %10s  %s\n", o->device, "kernel",
                    "test", "route", "target", "max abs", "max rel", "unwritten", "median", "result");
        for (const TestResult& r : results) {
          std::string verdict = !r.ran ? "not run" : r.passed ? "PASS" : "FAIL";
          std::string target = r.target.empty() ? "-" : r.target + (r.variant.empty() ? "" : " " + r.variant);
          if (!r.ran) {  // no figures for a test that did not run: dashes, not zeros that read as results
            std::printf("    %-16s %-16s %-9s %-12s %10s %10s %9s %11s  %s\n", r.kernel.c_str(),
                        r.test.empty() ? "-" : r.test.c_str(), r.route.c_str(), target.c_str(), "-", "-", "-", "-",
                        verdict.c_str());
          } else {
            std::printf("    %-16s %-16s %-9s %-12s %10.3g %10.3g %9llu %8.1f us  %s\n", r.kernel.c_str(),
                        r.test.empty() ? "-" : r.test.c_str(), r.route.c_str(), target.c_str(), r.max_abs_error,
                        r.max_rel_error, r.unwritten, r.median_us, verdict.c_str());
          }
          if (!r.unreached_variants.empty()) {
            std::string names;
            for (const std::string& v : r.unreached_variants) names += (names.empty() ? "" : ", ") + v;
            std::printf("      variants of '%s' no test vector's call took (their code was not run here): %s\n",
                        r.kernel.c_str(), names.c_str());
          }
          if (!r.detail.empty()) std::printf("      %s\n", r.detail.c_str());
          if (!r.ran) std::printf("      reason: %s\n", r.reason.c_str());
        }
        std::fflush(stdout);
      }
      std::cout << (ok ? "verified" : "NOT verified") << "\n";
    }
    if (o->run && !ran_any) fail(Errc::refused, nothing_ran_reason(results, o->device));
    if (!ok) fail(Errc::refused, "test vectors failed on device " + std::to_string(o->device) + (attest_key ? "; no attestation written" : ""));
    if (attest_key) {
      std::string path = o->attest_out.empty() ? o->file + "." + device.arch + ".attestation.json" : o->attest_out;
      std::string statement = gpu_run_statement(*archive, device, results, static_cast<std::uint64_t>(std::time(nullptr)));
      write_new_file(path, dsse_envelope_json(kInTotoPayloadType, statement, {&*attest_key}) + "\n", 0644);
      (o->json ? std::cerr : std::cout) << "attested: " << path << " (key " << attest_key->public_key().key_id() << ", "
                                        << device.name << " " << device.arch << ", driver " << device.driver << ")\n";
    }
  });
}

void add_digest_command(CLI::App& app) {
  auto file = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("digest", "Print the archive's identity, sha256:<hex>, and nothing else");
  cmd->add_option("file", *file, "The archive")->required();
  cmd->callback([file] {
    std::unique_ptr<ArchiveReader> archive = ArchiveReader::open_file(*file, ReadOptions{});
    std::cout << digest_string(archive->digest()) << "\n";
  });
}

}  // namespace kiln::cli
