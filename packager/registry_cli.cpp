#include "registry_cli.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "cli_common.hpp"
#include "kiln/kiln.hpp"
#include "kiln/kiln_experimental.hpp"
#include "preflight_targets.hpp"

namespace kiln::cli {

void RegistryCli::add_to(CLI::App* c) {
  c->add_flag("--insecure-http", insecure_http,
              "Speak plain http to this registry (no TLS: anyone on the path can read and change the traffic; "
              "127.0.0.1, ::1 and localhost get plain http without it)");
  c->add_flag("--tls", tls, "Use https with certificate verification for a loopback registry too (127.0.0.1, ::1 and "
                           "localhost otherwise get plain http; every other registry always gets https)")
      ->excludes("--insecure-http");
  c->add_option("--ca-file", ca_file, "A PEM bundle of CA certificates to verify the registry with (default: the system's)");
  c->add_option("--timeout", timeout_s, "Seconds one request may take in all (default 0: no limit; a transfer "
                                        "stalled under 1 KiB/s for 30 s is abandoned anyway)")
      ->check(CLI::Range(0L, 86400L));
  c->add_option("--max-blob-size", max_blob, "The largest archive accepted from the registry, in bytes (default 16 GiB)")
      ->transform(CLI::AsSizeValue(false));
  c->add_flag("--stats", stats, "Print the requests made and bytes moved on stderr when done");
}

registry::HttpOptions RegistryCli::http(const registry::Reference& ref) const {
  registry::HttpOptions o;
  o.ca_file = ca_file;
  o.total_timeout_s = timeout_s;
  return registry::http_options_for(ref, insecure_http, tls, o);
}

void RegistryCli::report(const registry::Client& client) const {
  if (!stats) return;
  std::cout.flush();  // after the command's own report, in this order, even when both go to one file
  const registry::HttpStats& s = client.stats();
  std::fprintf(stderr, "kiln-registry-stats requests=%llu get=%llu head=%llu post=%llu put=%llu bytes_received=%llu bytes_sent=%llu\n",
               static_cast<unsigned long long>(s.requests), static_cast<unsigned long long>(s.get),
               static_cast<unsigned long long>(s.head), static_cast<unsigned long long>(s.post),
               static_cast<unsigned long long>(s.put), static_cast<unsigned long long>(s.bytes_received),
               static_cast<unsigned long long>(s.bytes_sent));
}

void OptionalTrust::add_to(CLI::App* c, const std::string& trust_help) {
  c->add_option("--trust,-t", path, trust_help);
  c->add_option("--threshold", threshold, "Distinct trusted signers required (with --trust)")->check(CLI::Range(1u, 64u));
}

std::unique_ptr<TrustSet> OptionalTrust::load() const {
  return path.empty() ? nullptr : std::make_unique<TrustSet>(TrustSet::load(path));
}

void SparseCli::add_to(CLI::App* c, bool with_target) {
  if (with_target) c->add_option("--target", targets, kTargetHelp);
  c->add_flag("--device", device, "Fetch only the code this host's GPUs' routes use (with --target: theirs too)");
  c->add_option("--driver", driver, "With --target: the CUDA driver version those GPUs have (as kiln preflight --driver)")
      ->needs("--target");
  c->add_flag("--tests", tests, "With --target or --device: also every test vector (for kiln verify --run)");
}

void SparseCli::check() const {
  // --tests alone would change nothing (a whole pull holds them): said, not ignored.
  if (tests && !wanted()) fail(Errc::invalid_argument, "--tests goes with --target or --device (a whole pull holds every test vector)");
}

registry::MemberChoice SparseCli::choice(const std::string& trust_path, unsigned threshold,
                                         std::shared_ptr<std::vector<std::string>> said) const {
  std::vector<FleetTarget> described = targets_from_list(targets, driver);
  const bool host = device, with_tests = tests;
  return [=](std::vector<std::uint8_t> partial) {
    // Judged by libkiln on the partial archive (its index and signatures, no code yet), as a
    // runtime with these keys would judge it.
    std::vector<std::size_t> out;
    through_the_api([&] {
      kiln::RuntimeOptions options;
      options.trust_path(trust_path).signature_threshold(threshold);
      kiln::Runtime runtime(options);
      kiln::Archive archive = kiln::Archive::from_memory(runtime, partial.data(), partial.size());
      const std::vector<kiln::experimental::Member> members = kiln::experimental::members(archive);
      auto take = [&](const std::string& who, const std::vector<std::size_t>& chosen) {
        std::uint64_t bytes = 0;
        for (std::size_t i : chosen) bytes += members.at(i).stored_size;
        said->push_back(who + ": " + std::to_string(chosen.size()) + " code object(s), " + human_size(bytes));
        out.insert(out.end(), chosen.begin(), chosen.end());
      };
      for (const FleetTarget& t : described) take(t.target, kiln::experimental::plan_target(archive, t.target, t.driver));
      if (host) {
        kiln::experimental::HostPlan plan = kiln::experimental::plan_host(archive);
        std::string names;
        for (const std::string& d : plan.devices) names += (names.empty() ? "" : ", ") + d;
        take("this host (" + names + ")", plan.members);
      }
      if (with_tests) {
        std::size_t count = 0;
        for (std::size_t i = 0; i < members.size(); ++i) {
          if (members[i].role == "testdata") out.push_back(i), ++count;
        }
        said->push_back("test vectors: " + std::to_string(count));
      }
    });
    return out;
  };
}

void print_sparse_outcome(const registry::FetchResult& r, const std::vector<std::string>& said) {
  if (!r.whole_because.empty()) {
    std::cout << "  whole            " << r.whole_because << "; pulled the whole archive\n";
    return;
  }
  if (!r.archive.sparse) return;
  std::cout << "  sparse           " << human_size(r.archive.size) << " of the archive's " << human_size(r.archive.complete_size)
            << " (the same digest and signatures; the members of other targets absent)\n";
  for (const std::string& line : said) std::cout << "    " << line << "\n";
}

}  // namespace kiln::cli
