// kiln diag show DIR: a diagnostic bundle (written by libkiln when a load or launch failed)
// in a readable form, with every file it holds and its digest.
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <vector>

#include "cli_common.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/sha256.hpp"

namespace kiln::cli {

void add_diag_command(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  CLI::App* diag = app.add_subcommand("diag", "Read diagnostic bundles written when a load or launch failed");
  diag->require_subcommand(1);
  CLI::App* show = diag->add_subcommand("show", "Print a bundle: what failed, where, on which device, and its files");
  show->add_option("dir", *dir, "The bundle folder (kiln-diag-...)")->required();
  show->callback([dir] {
    std::string report = read_small_file(*dir + "/report.toml", 4 << 20);
    std::printf("diagnostic bundle %s\n", dir->c_str());
    std::size_t pos = 0;
    bool in_files = false;  // the report's own [files] table is shown below, with sizes and digests
    while (pos < report.size()) {
      std::size_t nl = report.find('\n', pos);
      std::string line = report.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
      pos = nl == std::string::npos ? report.size() : nl + 1;
      if (line.empty() || line[0] == '#') continue;
      if (line[0] == '[') {
        in_files = line == "[files]";
        if (!in_files) std::printf("%s\n", line.substr(1, line.size() - 2).c_str());
        continue;
      }
      if (in_files) continue;
      std::size_t eq = line.find(" = ");
      if (eq == std::string::npos) continue;
      std::string value = line.substr(eq + 3);
      if (value.size() >= 2 && value.front() == '"') value = value.substr(1, value.size() - 2);
      std::printf("  %-20s %s\n", line.substr(0, eq).c_str(), value.c_str());
    }
    std::vector<std::string> names = list_directory(*dir);
    names.erase(std::remove(names.begin(), names.end(), "report.toml"), names.end());
    std::printf("files\n");
    for (const std::string& n : names) {
      std::string bytes = read_small_file(*dir + "/" + n, 1ull << 30);
      std::printf("  %-40s %10s  sha256:%s\n", n.c_str(), human_size(bytes.size()).c_str(),
                  sha256_hex(sha256(bytes.data(), bytes.size())).c_str());
    }
  });
}

}  // namespace kiln::cli
