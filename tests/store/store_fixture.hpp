// The store tests' fixture: three archives of package `scale` (sequences 1, 2, 3), each with
// a 2 MB member so that writing one into a store takes many crash points.
#pragma once

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../unit/temp_dirs.hpp"
#include "core/archive_writer.hpp"
#include "core/kernel_table.hpp"

namespace kiln {

const std::string kKeys = KILN_TEST_KEYS;

// Packs a one-kernel archive of package `scale` at `sequence`, signed with the test key.
// A file's bytes, and writing them back: the store tests edit state files as an attacker would.
inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
inline void spit(const std::string& path, const std::string& content) { std::ofstream(path, std::ios::binary) << content; }
inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

struct CliRun {
  int rc;
  std::string output;  // stdout and stderr
};
// Runs the kiln command under `timeout 20`: a hang shows as rc 124, not a stuck suite.
inline CliRun kiln(const std::string& args, const std::string& env = "") {
  std::string cmd = env + " timeout 20 " + std::string(KILN_BINARY) + " " + args + " 2>&1";
  CliRun r{-1, ""};
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  std::size_t n;
  while (p != nullptr && (n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int status = p != nullptr ? ::pclose(p) : -1;
  if (WIFSIGNALED(status)) r.rc = -WTERMSIG(status);
  else if (WIFEXITED(status)) r.rc = WEXITSTATUS(status) == 128 + SIGKILL ? -SIGKILL : WEXITSTATUS(status);
  return r;
}


inline std::string make_archive(const std::string& dir, std::uint64_t sequence) {
  std::string manifest = "[package]\nname = \"scale\"\nkernel_revision = \"v" + std::to_string(sequence) +
                         "\"\nsequence = " + std::to_string(sequence) +
                         "\n[[kernel]]\nname = \"k\"\nentry = \"k\"\nbackend = \"cuda\"\ncode = [{ arch = \"compute_80\", file = \"k.ptx\" }]\n"
                         "[files]\nextra = [\"bulk.bin\"]\n";
  std::string ptx = ".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k() { ret; }\n";
  std::vector<MemberInput> members(3);
  members[0].path = "kiln.toml", members[0].role = format::Role::manifest, members[0].content.assign(manifest.begin(), manifest.end());
  members[1].path = "k.ptx", members[1].role = format::Role::code, members[1].backend = format::Vendor::cuda,
  members[1].kind = format::CodeKind::ptx, members[1].arch = "compute_80", members[1].content.assign(ptx.begin(), ptx.end());
  // Bulk, so that writing the archive into the store takes many crash points.
  members[2].path = "bulk.bin", members[2].role = format::Role::meta;
  for (int i = 0; i < 2000000; ++i) members[2].content.push_back(static_cast<std::uint8_t>(i * 2654435761u >> 24));
  for (MemberInput& table : kernel_table_inputs(parse_manifest(manifest, "kiln.toml"))) members.push_back(std::move(table));
  PrivateKey key = PrivateKey::load_file(kKeys + "/test.key");
  std::string path = dir + "/v" + std::to_string(sequence) + ".kiln";
  Sha256 digest = write_archive_file(path, {"scale", "v" + std::to_string(sequence), sequence}, members,
                                     {Signer{&key, "test", 0}}, {});
  return path + " " + digest_string(digest);
}

struct Fixture {
  std::string dir, store;
  std::string v1, v2, v3, d1, d2, d3;
  Fixture() {
    dir = kiln::test::make_temp_dir("kiln-store-test");
    store = dir + "/store";
    auto split = [](const std::string& s, std::string* path, std::string* digest) {
      *path = s.substr(0, s.find(' '));
      *digest = s.substr(s.find(' ') + 1);
    };
    split(make_archive(dir, 1), &v1, &d1);
    split(make_archive(dir, 2), &v2, &d2);
    split(make_archive(dir, 3), &v3, &d3);
  }
  ~Fixture() { std::system(("rm -rf '" + dir + "'").c_str()); }  // the crash test makes ~150 stores
};

}  // namespace kiln
