#include "registry_cli.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

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

}  // namespace kiln::cli
