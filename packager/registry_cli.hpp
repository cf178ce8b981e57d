// The options every registry command shares (kiln push, kiln pull, kiln store pull): transport
// security, bounds, and the --stats line the fleet benchmark counts requests with.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/trust.hpp"
#include "registry/client.hpp"
#include "registry/transfer.hpp"

namespace CLI {
class App;
}

namespace kiln::cli {

struct RegistryCli {
  bool insecure_http = false;
  bool tls = false;  // https for a loopback registry too
  std::string ca_file;
  long timeout_s = 0;
  std::uint64_t max_blob = 16ull << 30;
  bool stats = false;

  void add_to(CLI::App* command);
  registry::HttpOptions http(const registry::Reference& ref) const;
  // With --stats: one line on stderr, "kiln-registry-stats requests=N get=N head=N post=N put=N
  // bytes_received=N bytes_sent=N" (bodies only, every request including token fetches).
  void report(const registry::Client& client) const;
};

// --trust KEYS and --threshold N where checking signatures is optional (kiln push, kiln pull):
// without --trust nothing is loaded and load() gives null.
struct OptionalTrust {
  std::string path;
  unsigned threshold = 1;

  void add_to(CLI::App* command, const std::string& trust_help);
  std::unique_ptr<TrustSet> load() const;
};

// --target LIST, --device, --driver, --tests (kiln pull, kiln store pull): a sparse pull (FORMAT.md
// §9) of the code those GPUs' routes use, chosen by libkiln's own resolver as `kiln preflight`
// judges it, plus every test vector with --tests.
struct SparseCli {
  static constexpr const char* kTargetHelp =
      "Fetch only the code these GPUs' routes use (sm_90, gfx942:xnack-, comma-separated or repeated), as kiln "
      "preflight --target judges it: a sparse archive with the same digest and signatures";
  std::vector<std::string> targets;
  std::string driver;
  bool device = false;
  bool tests = false;

  // `with_target` false: the command has its own --target (kiln store pull's, shared with
  // --require-attestation), whose values the caller puts in `targets`.
  void add_to(CLI::App* command, bool with_target = true);
  bool wanted() const { return !targets.empty() || device; }
  // Refuses what would be silently ignored (--tests without a target).
  void check() const;
  // The choice, made on the partial archive authenticated with the keys at `trust_path`; `said`
  // receives one line per target or device (what it chose).
  registry::MemberChoice choice(const std::string& trust_path, unsigned threshold,
                                std::shared_ptr<std::vector<std::string>> said) const;
};

// The lines a sparse pull prints (what it holds, for which GPUs), or why it pulled whole.
void print_sparse_outcome(const registry::FetchResult& r, const std::vector<std::string>& said);

}  // namespace kiln::cli
