// kiln extract: all or nothing. The archive is verified in full first (signatures, every
// member's digests, kiln.toml against the kernel table); the chosen members are then written
// into a temporary folder beside the destination, each read back and compared, and that
// folder is renamed into place only when every member is there. On any failure the temporary
// folder is removed and the destination is left as it was. Nothing is ever overwritten and no
// link is followed (StagedFolder).
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <set>

#include "cli_common.hpp"
#include "commands.hpp"
#include "core/archive_reader.hpp"
#include "core/error.hpp"
#include "staged_folder.hpp"

namespace kiln::cli {
namespace {

// Member paths were validated by the reader (relative, no '..', portable characters, no two
// equal but for case, no file where a folder must go), so each lands where it says.
std::uint64_t write_members(const ArchiveReader& archive, const std::vector<std::size_t>& chosen, StagedFolder& folder) {
  std::uint64_t bytes = 0;
  for (std::size_t i : chosen) {
    const format::Entry& e = archive.index().entries[i];
    std::vector<std::uint8_t> data = archive.read_member(i);  // content digest checked again
    folder.write_file(e.path, ByteView(data), e.content_sha256);
    bytes += data.size();
  }
  return bytes;
}

}  // namespace

void add_extract_command(CLI::App& app) {
  struct Options {
    std::string file, dir, trust;
    std::vector<std::string> members;
    bool skip_signatures = false;
    unsigned threads = default_threads();
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "extract", "Write an archive's members, each checked against its digest, into a new folder (all or nothing)");
  cmd->add_option("file", o->file, "The archive")->required();
  cmd->add_option("-C,--directory", o->dir, "Folder to create (it may exist if it is empty)")->required();
  cmd->add_option("--trust,-t", o->trust, "Trusted PEM public key or folder of keys");
  cmd->add_option("--member,-m", o->members, "Extract only this member (repeatable)");
  cmd->add_option("--threads,-j", o->threads, "Members verified in parallel")->check(CLI::Range(1u, 1024u));
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
    std::unique_ptr<ArchiveReader> archive = ArchiveReader::open_file(o->file, options);
    std::vector<std::size_t> chosen;
    try {
      // Everything kiln verify --deep checks, before a single byte is written.
      archive->verify_all(o->threads, /*deep=*/true, nullptr);
      if (o->members.empty()) {
        for (std::size_t i = 0; i < archive->index().entries.size(); ++i) chosen.push_back(i);
      } else {
        std::set<std::size_t> seen;  // a member named twice is written once
        for (const std::string& m : o->members) {
          long i = archive->index().find(m);
          if (i < 0) fail(Errc::invalid_argument, o->file + ": no member named '" + m + "'");
          if (seen.insert(static_cast<std::size_t>(i)).second) chosen.push_back(static_cast<std::size_t>(i));
        }
      }
      // A sparse archive: what it lacks is refused by name, before anything is written.
      std::size_t absent = 0;
      std::string first;
      for (std::size_t i : chosen) {
        if (archive->member_present(i)) continue;
        if (absent++ == 0) first = archive->index().entries[i].path;
      }
      if (absent > 0) {
        fail(Errc::not_found, o->file + ": member '" + first + "'" +
                                  (absent > 1 ? " and " + std::to_string(absent - 1) + " other(s) asked for are" : " is") +
                                  " absent from this sparse archive; extract the members it holds (--member, kiln inspect "
                                  "marks the absent ones), or pull the archive whole");
      }
    } catch (const Failure& e) {
      fail(e.code(), std::string(e.what()) + "; kiln extract wrote nothing (the archive was refused before any member was written)");
    }

    StagedFolder folder(o->dir);
    std::uint64_t bytes = 0;
    try {
      bytes = write_members(*archive, chosen, folder);
      folder.commit();
    } catch (const Failure& e) {
      std::string left = folder.discard();
      fail(e.code(), std::string(e.what()) + "; kiln extract wrote nothing: " +
                         (left.empty() ? "the temporary folder " + folder.temporary() + " was removed and " + o->dir +
                                             " was left as it was"
                                       : "but the temporary folder could not be removed: " + left));
    }
    std::cout << "extracted " << chosen.size() << " member(s), " << human_size(bytes) << ", into " << o->dir
              << (o->skip_signatures && o->trust.empty() ? " (signatures NOT checked)" : "") << "\n";
  });
}

}  // namespace kiln::cli
