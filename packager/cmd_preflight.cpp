// kiln preflight: for this host, without launching anything, which kernels run natively, via
// PTX-JIT, via the reference, or are refused, and why.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>

#include "archive.hpp"
#include "cli_common.hpp"
#include "commands.hpp"
#include "kernel.hpp"
#include "runtime.hpp"

namespace kiln::cli {

void add_preflight_command(CLI::App& app) {
  struct Options {
    std::string file, trust;
    int device = 0;
    bool json = false, strict = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("preflight", "Say, for this host, the route every kernel will take and why");
  cmd->add_option("file", o->file, "The archive")->required();
  cmd->add_option("--trust,-t", o->trust, "Trusted PEM public key, or a folder of keys")->required();
  cmd->add_option("--device", o->device, "CUDA device")->check(CLI::Range(0, 1023));
  cmd->add_flag("--strict", o->strict, "Judge under the strict policy (no reference fallback)");
  cmd->add_flag("--json", o->json, "Print JSON on stdout");
  cmd->callback([o] {
    kiln_runtime_options ro{};
    ro.size = sizeof ro;
    ro.signature_threshold = 1;
    ro.trust_path = o->trust.c_str();
    ro.policy = o->strict ? KILN_POLICY_STRICT : KILN_POLICY_FALLBACK;
    ro.log_level = KILN_LOG_WARN;
    ro.max_member_size = 4ull << 30;
    kiln_runtime rt(ro);
    kiln_archive archive(rt, o->file);
    const std::vector<std::string>& names = archive.reader().kernel_names();
    if (o->json) std::cout << "{\"file\":" << json_string(o->file) << ",\"digest\":" << json_string(archive.digest())
                           << ",\"device\":" << o->device << ",\"kernels\":[";
    else std::cout << o->file << " (" << archive.digest() << ") on device " << o->device << ":\n";
    for (std::size_t i = 0; i < names.size(); ++i) {
      // Resolving loads the chosen code object (PTX is JIT-compiled) but launches nothing.
      kiln_kernel* k = archive.kernel(names[i], o->device);
      if (o->json) {
        std::cout << (i ? "," : "") << "{\"kernel\":" << json_string(names[i])
                  << ",\"route\":" << json_string(kiln_route_string(k->route))
                  << ",\"reason\":" << json_string(kiln_reason_string(k->reason)) << ",\"target\":" << json_string(k->target)
                  << ",\"detail\":" << json_string(k->reason_text) << "}";
      } else {
        std::printf("  %-20s %-9s %-18s %s\n", names[i].c_str(), kiln_route_string(k->route),
                    kiln_reason_string(k->reason), k->reason_text.c_str());
      }
    }
    if (o->json) std::cout << "]}\n";
    std::fflush(stdout);
  });
}

}  // namespace kiln::cli
