#include "cli_common.hpp"

#include <pwd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <thread>

#include "core/manifest_toml.hpp"

namespace kiln::cli {

int exit_code_for(Errc code) {
  switch (code) {
    case Errc::malformed:
    case Errc::integrity:
    case Errc::signature:
    case Errc::limit: return kExitRefused;
    case Errc::manifest:
    case Errc::code_object:
    case Errc::invalid_argument:
    case Errc::not_found:
    case Errc::unsupported: return kExitBadInput;
    case Errc::refused:
    case Errc::driver:
    case Errc::reference_failed: return kExitRefused;
    case Errc::io: return kExitIo;
    case Errc::internal: return kExitInternal;
  }
  return kExitInternal;
}

std::string human_size(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}


namespace {

bool parse_seconds(const std::string& s, std::uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

}  // namespace

std::uint64_t signature_time(const std::string& created_option) {
  std::uint64_t t = 0;
  if (!created_option.empty()) {
    if (created_option == "now") return static_cast<std::uint64_t>(std::time(nullptr));
    if (!parse_seconds(created_option, &t)) {
      fail(Errc::invalid_argument, "--created takes 'now' or seconds since the Unix epoch, not '" + created_option + "'");
    }
    return t;
  }
  if (const char* env = std::getenv("SOURCE_DATE_EPOCH")) {
    if (!parse_seconds(env, &t)) {
      fail(Errc::invalid_argument, std::string("SOURCE_DATE_EPOCH must be seconds since the Unix epoch, not '") + env + "'");
    }
  }
  return t;
}

std::string default_signer_name(const std::string& key_path) {
  std::string base = key_path.substr(key_path.rfind('/') == std::string::npos ? 0 : key_path.rfind('/') + 1);
  auto dot = base.rfind('.');
  if (dot != std::string::npos && dot > 0) base = base.substr(0, dot);
  std::string clean;
  for (char c : base) clean += (c >= 0x20 && c <= 0x7e) ? c : '_';
  return clean.empty() ? "unnamed" : clean.substr(0, 128);
}

unsigned default_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

std::string store_dir(const std::string& option) {
  if (!option.empty()) return option;
  if (const char* env = std::getenv("KILN_STORE")) return env;
  fail(Errc::invalid_argument, "no store: pass --store DIR or set KILN_STORE");
}

std::string actor_name(const std::string& option) {
  if (!option.empty()) return option;
  const char* user = std::getenv("USER");
  if (user != nullptr && user[0] != '\0') return user;
  // No $USER (cron, containers, a chroot): the account the process runs as, as `id -un` names it.
  if (const struct passwd* pw = ::getpwuid(::geteuid()); pw != nullptr && pw->pw_name != nullptr && pw->pw_name[0] != '\0') {
    return pw->pw_name;
  }
  return "uid " + std::to_string(::geteuid());
}

int usage_error(const CLI::App& app, const CLI::ParseError& e) {
  // The deepest command the line reached, and the words it could not place.
  const CLI::App* at = &app;
  std::string path = "kiln";
  for (;;) {
    std::vector<const CLI::App*> subs = at->get_subcommands([](const CLI::App* c) { return c->parsed(); });
    if (subs.empty()) break;
    at = subs.front();
    path += " " + at->get_name();
  }
  std::string hint;
  std::vector<std::string> left = at->remaining();
  std::vector<const CLI::App*> commands = at->get_subcommands([](const CLI::App*) { return true; });
  if (!left.empty() && !commands.empty() && !left.front().empty() && left.front()[0] != '-') {
    const std::string& word = left.front();
    std::string best;
    std::size_t best_distance = 3;  // further than two edits is not a typo
    for (const CLI::App* c : commands) {
      std::size_t d = manifest_toml::key_distance(word, c->get_name());
      if (d < best_distance) best_distance = d, best = c->get_name();
    }
    hint = "'" + word + "' is not a command of " + path + (best.empty() ? "" : "; did you mean '" + best + "'?");
  }
  std::cerr << path << ": " << (hint.empty() ? std::string(e.what()) : hint) << "\nRun '" << path
            << " --help' for its commands and options.\n";
  return kExitUsage;
}

}  // namespace kiln::cli
