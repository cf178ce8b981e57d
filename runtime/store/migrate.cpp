// `kiln store migrate`: format 1 (state files whose history has no hash chain) to format 2.
// Each format-1 history is replayed under the rules and chained as it stands; one that breaks
// the rules, or whose state lines disagree with it, is refused rather than blessed. The state
// files are converted first and store.toml last, each by a durable replace, so a migrate killed
// part-way leaves a format-1 store with some format-2 state files, which a second migrate
// (and nothing else) accepts and finishes.
#include <sstream>

#include "core/error.hpp"
#include "core/file_io.hpp"
#include "store/layout.hpp"
#include "store/store.hpp"

namespace kiln::store {
namespace {

struct Format1 {
  std::string package, active;
  std::uint64_t highest = 0;
  std::vector<HistoryEntry> history;
};

std::uint64_t number(const std::string& s, const std::string& where) {
  if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos) {
    fail(Errc::malformed, where + ": '" + s + "' is not a number");
  }
  return std::stoull(s);
}

// The format-1 reader, kept only for this: "kiln-store-state\t1", package, active, highest, then
// "history\t<n>\t<time>\t<action>\t<digest>\t<sequence>\t<who>\t<reason>" lines.
Format1 read_format1(const std::string& text, const std::string& where) {
  Format1 s;
  std::istringstream in(text);
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    std::vector<std::string> f;
    for (std::size_t pos = 0;;) {
      std::size_t tab = line.find('\t', pos);
      f.push_back(line.substr(pos, tab == std::string::npos ? std::string::npos : tab - pos));
      if (tab == std::string::npos) break;
      pos = tab + 1;
    }
    std::string at = where + ":" + std::to_string(line_no);
    if (line_no == 1) {
      if (f.size() != 2 || f[0] != "kiln-store-state" || f[1] != "1") fail(Errc::malformed, at + ": not a format-1 state file");
    } else if (f[0] == "package" && f.size() == 2) {
      s.package = f[1];
    } else if (f[0] == "active" && f.size() == 2) {
      s.active = f[1] == "-" ? "" : f[1];
    } else if (f[0] == "highest" && f.size() == 2) {
      s.highest = number(f[1], at);
    } else if (f[0] == "history" && f.size() == 8) {
      HistoryEntry h = decision(number(f[2], at), f[3], f[4] == "-" ? "" : f[4], number(f[5], at), f[6], f[7]);
      h.number = number(f[1], at);
      s.history.push_back(h);
    } else {
      fail(Errc::malformed, at + ": unexpected line");
    }
  }
  return s;
}

}  // namespace

std::vector<std::string> Store::migrate(const std::string& dir) {
  std::string header;
  try {
    header = read_regular_file_text_nofollow(dir + "/" + kStoreFile, 4096);
  } catch (const Failure& e) {
    if (e.code() != Errc::not_found) throw;
    fail(Errc::invalid_argument, dir + ": not a kiln store (no " + kStoreFile + ")");
  }
  if (header == kStoreHeader) return {};  // format 2 already
  if (header != kFormat1Header) fail(Errc::malformed, dir + "/" + kStoreFile + ": not a format-1 kiln store; nothing to migrate");
  FileLock lock(dir + "/lock");
  std::vector<std::string> converted;
  for (const std::string& name : list_directory(dir + "/packages", true)) {
    if (name.size() <= 6 || name.compare(name.size() - 6, 6, ".state") != 0) continue;
    std::string package = name.substr(0, name.size() - 6);
    std::string path = dir + "/packages/" + name;
    std::string text = read_regular_file_text_nofollow(path, kMaxStateFile);
    if (text.compare(0, 19, "kiln-store-state\t2\n") == 0) {
      decode_state(text, package, path);  // converted by a migrate that was stopped: check it
      continue;
    }
    Format1 old = read_format1(text, path);
    if (old.package != package) fail(Errc::malformed, path + ": names package '" + old.package + "'; not migrated");
    PackageState s;
    s.package = package;
    for (const HistoryEntry& h : old.history) {
      try {
        append_record(s, h);
      } catch (const Failure& e) {
        fail(Errc::integrity, path + ": history record " + std::to_string(h.number) + " cannot be chained (" + e.what() +
                                  "); the history was edited: repair or remove this file, then migrate again");
      }
    }
    if (s.active != old.active || s.highest_sequence != old.highest) {
      fail(Errc::integrity, path + ": its state (active " + (old.active.empty() ? "-" : old.active) + ", highest " +
                                std::to_string(old.highest) + ") disagrees with its history (active " +
                                (s.active.empty() ? "-" : s.active) + ", highest " + std::to_string(s.highest_sequence) +
                                "); the file was edited: repair or remove it, then migrate again");
    }
    replace_file_durably(path, encode_state(s), 0644, crash_point);
    converted.push_back(package);
  }
  replace_file_durably(dir + "/" + kStoreFile, kStoreHeader, 0644, crash_point);
  return converted;
}

}  // namespace kiln::store
