// kiln extract: writes verified members under a folder, never through a symbolic link
// and never over an existing file.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <iostream>
#include <memory>

#include "archive_reader.hpp"
#include "cli_common.hpp"
#include "commands.hpp"
#include "file_io.hpp"

namespace kiln::cli {
namespace {

using DirFd = FileDescriptor;

// Member paths were validated by the reader (relative, no '..', portable characters), and
// every step below refuses to follow a link, so nothing lands outside `root`.
void write_member(int root, const std::string& root_name, const std::string& path, const std::vector<std::uint8_t>& data) {
  DirFd dir(::dup(root));
  std::size_t start = 0;
  for (std::size_t slash = path.find('/'); slash != std::string::npos; slash = path.find('/', start)) {
    std::string part = path.substr(start, slash - start);
    if (::mkdirat(dir.get(), part.c_str(), 0755) != 0 && errno != EEXIST) {
      fail(Errc::io, root_name + "/" + path.substr(0, slash) + ": cannot create folder: " + errno_text(errno));
    }
    int next = ::openat(dir.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) {
      fail(Errc::io, root_name + "/" + path.substr(0, slash) + ": not a plain folder (a symbolic link?): " + errno_text(errno));
    }
    dir = DirFd(next);
    start = slash + 1;
  }
  std::string leaf = path.substr(start);
  DirFd file(::openat(dir.get(), leaf.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (file.get() < 0) {
    if (errno == EEXIST) fail(Errc::io, root_name + "/" + path + ": already exists; kiln extract never overwrites");
    fail(Errc::io, root_name + "/" + path + ": cannot create: " + errno_text(errno));
  }
  write_all(file.get(), data.data(), data.size(), root_name + "/" + path);
}

}  // namespace

void add_extract_command(CLI::App& app) {
  struct Options {
    std::string file, dir, trust;
    std::vector<std::string> members;
    bool skip_signatures = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("extract", "Write an archive's members, each checked against its digest, into a folder");
  cmd->add_option("file", o->file, "The archive")->required();
  cmd->add_option("-C,--directory", o->dir, "Folder to extract into (created if missing)")->required();
  cmd->add_option("--trust,-t", o->trust, "Trusted PEM public key or folder of keys");
  cmd->add_option("--member,-m", o->members, "Extract only this member (repeatable)");
  cmd->add_flag("--skip-signatures", o->skip_signatures, "Extract without checking signatures (members are still digest-checked)");
  cmd->callback([o] {
    if (o->trust.empty() && !o->skip_signatures) {
      fail(Errc::invalid_argument, "extract checks signatures: pass --trust KEYS, or --skip-signatures to extract an unauthenticated archive");
    }
    ReadOptions options;
    TrustSet trust;
    if (!o->trust.empty()) {
      trust = TrustSet::load(o->trust);
      options.policy = TrustPolicy{&trust, 1};
    }
    std::unique_ptr<Archive> archive = Archive::open_file(o->file, options);
    if (::mkdir(o->dir.c_str(), 0755) != 0 && errno != EEXIST) fail(Errc::io, o->dir + ": cannot create: " + errno_text(errno));
    DirFd root(::open(o->dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (root.get() < 0) fail(Errc::io, o->dir + ": not a folder: " + errno_text(errno));
    std::vector<std::size_t> chosen;
    if (o->members.empty()) {
      for (std::size_t i = 0; i < archive->index().entries.size(); ++i) chosen.push_back(i);
    } else {
      for (const std::string& m : o->members) {
        long i = archive->index().find(m);
        if (i < 0) fail(Errc::invalid_argument, o->file + ": no member named '" + m + "'");
        chosen.push_back(static_cast<std::size_t>(i));
      }
    }
    std::uint64_t bytes = 0;
    for (std::size_t i : chosen) {
      std::vector<std::uint8_t> data = archive->read_member(i);
      write_member(root.get(), o->dir, archive->index().entries[i].path, data);
      bytes += data.size();
    }
    std::cout << "extracted " << chosen.size() << " member(s), " << human_size(bytes) << ", into " << o->dir
              << (o->skip_signatures && o->trust.empty() ? " (signatures NOT checked)" : "") << "\n";
  });
}

}  // namespace kiln::cli
