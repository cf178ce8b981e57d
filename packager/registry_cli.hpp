// The options every registry command shares (kiln push, kiln pull, kiln store pull): transport
// security, bounds, and the --stats line the fleet benchmark counts requests with.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "client.hpp"
#include "trust.hpp"

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

}  // namespace kiln::cli
