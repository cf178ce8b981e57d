// The format's naming rules (FORMAT.md §3.1-3.2): member paths and the set of them, arch tags,
// package names, revisions, signers. Each returns "" or why the name is refused.
#include <algorithm>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "core/error.hpp"
#include "core/format.hpp"
#include "core/format_detail.hpp"

namespace kiln::format {

using detail::quoted;

namespace {

// A set of bytes as a table: every byte of every path and arch tag of every index page read is
// looked up in one.
struct CharSet {
  bool allowed[256] = {};
  constexpr CharSet(bool upper, std::string_view extra) {
    for (int c = 'a'; c <= 'z'; ++c) allowed[c] = true;
    for (int c = 'A'; upper && c <= 'Z'; ++c) allowed[c] = true;
    for (int c = '0'; c <= '9'; ++c) allowed[c] = true;
    for (char c : extra) allowed[static_cast<unsigned char>(c)] = true;
  }
  constexpr bool contains(char c) const { return allowed[static_cast<unsigned char>(c)]; }
};
constexpr CharSet kPortableNameChars(true, "._-+@=");  // a path component's bytes (FORMAT.md §3.1)
constexpr CharSet kArchChars(false, "_:+-,");           // arch tags and the ',' between them (§3.2)

bool is_portable_name_char(char c) { return kPortableNameChars.contains(c); }

}  // namespace

namespace {

char fold_ascii(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// Windows opens a device, not a file, for these names in any folder and with any extension
// ("nul.txt", "Com1.tar.gz"), so such a member would extract differently there.
bool is_windows_device_name(std::string_view component) {
  std::string_view stem = component.substr(0, component.find('.'));
  if (stem.size() != 3 && stem.size() != 4) return false;  // most components leave here
  char folded[4];
  for (std::size_t i = 0; i < stem.size(); ++i) folded[i] = fold_ascii(stem[i]);
  std::string_view f(folded, stem.size());
  if (f == "con" || f == "prn" || f == "aux" || f == "nul") return true;
  return f.size() == 4 && (f.substr(0, 3) == "com" || f.substr(0, 3) == "lpt") && f[3] >= '0' && f[3] <= '9';
}

bool is_identifier(std::string_view s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

// The kiln/ folder holds only what kiln writes, so a signer cannot slip a file in beside the
// kernel table that a reader (or a person) might take for kiln's own.
bool is_kiln_owned_path(std::string_view path) {
  constexpr std::string_view records = "kiln/kernels/";
  if (path == kKernelTablePath || path == "kiln/observed-toolchain.toml") return true;
  return path.substr(0, records.size()) == records && is_identifier(path.substr(records.size()));
}

}  // namespace

namespace {

// True when `path` obeys every rule of member_path_problem, in one pass over its bytes; false
// when it may not, and then member_path_problem says why. Every entry of every index page read
// passes here, so the common case is kept to a table lookup and two compares per byte.
bool path_plainly_acceptable(std::string_view path) {
  if (path.empty() || path.size() > kMaxPathLength) return false;
  std::size_t start = 0, first_dot = std::string_view::npos;
  for (std::size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      const std::size_t length = i - start;
      if (length == 0 || length > kMaxPathComponentLength || path[i - 1] == '.') return false;  // also "." and ".."
      const std::size_t stem = first_dot == std::string_view::npos ? length : first_dot - start;
      if ((stem == 3 || stem == 4) && is_windows_device_name(path.substr(start, length))) return false;
      start = i + 1;
      first_dot = std::string_view::npos;
    } else if (!is_portable_name_char(path[i])) {
      return false;
    } else if (path[i] == '.' && first_dot == std::string_view::npos) {
      first_dot = i;
    }
  }
  // Any case of "kiln/" is the reserved folder (member_path_problem says which names it holds).
  return !(path.size() > 5 && path[4] == '/' && fold_ascii(path[0]) == 'k' && fold_ascii(path[1]) == 'i' &&
           fold_ascii(path[2]) == 'l' && fold_ascii(path[3]) == 'n') ||
         is_kiln_owned_path(path);
}

bool arch_plainly_acceptable(std::string_view arch) {
  if (arch.size() > kMaxArchLength) return false;
  if (arch.empty()) return true;
  if (arch.front() == ',' || arch.back() == ',') return false;
  for (std::size_t i = 0; i < arch.size(); ++i) {
    if (!kArchChars.contains(arch[i])) return false;
    if (arch[i] == ',' && arch[i + 1] == ',') return false;  // not the last byte: checked above
  }
  return true;
}

}  // namespace

std::string member_path_problem(std::string_view path) {
  if (path_plainly_acceptable(path)) return "";
  if (path.empty()) return "the path is empty";
  if (path.size() > kMaxPathLength) return "the path is longer than " + std::to_string(kMaxPathLength) + " bytes";
  if (path.front() == '/') return "the path " + quoted(path) + " is absolute";
  // Component by component without copying: every index entry passes through here.
  std::size_t start = 0;
  while (start <= path.size()) {
    // One pass finds the component's end and checks its characters ('/' is not portable).
    std::size_t end = start;
    while (end < path.size() && is_portable_name_char(path[end])) ++end;
    if (end < path.size() && path[end] != '/') {
      if (path[end] == '\\') return "the path " + quoted(path) + " contains a backslash";
      return "the path " + quoted(path) +
             " has a character outside [A-Za-z0-9._+@=-] (non-ASCII names are refused because "
             "two byte strings can name one file after Unicode normalisation)";
    }
    std::string_view part(path.data() + start, end - start);
    if (part.empty()) return "the path " + quoted(path) + " has an empty component";
    if (part == "." || part == "..") return "the path " + quoted(path) + " has a '" + std::string(part) + "' component";
    // NAME_MAX on Linux, macOS and Windows alike: a longer name cannot be created anywhere.
    if (part.size() > kMaxPathComponentLength) {
      return "the path " + quoted(path) + " has a component of " + std::to_string(part.size()) + " bytes, over " +
             std::to_string(kMaxPathComponentLength);
    }
    if (part.back() == '.') {
      return "the path " + quoted(path) + " has a component ending in '.' ('" + std::string(part) +
             "'; Windows drops trailing dots, so there it would name another file)";
    }
    if (is_windows_device_name(part)) {
      return "the path " + quoted(path) + " has the component '" + std::string(part) +
             "', a Windows device name (CON, PRN, AUX, NUL, COM0-9, LPT0-9, with or without an extension)";
    }
    start = end + 1;
  }
  // Any case of "kiln/": a case-insensitive file system puts "KILN/x" in the same folder.
  bool in_kiln_folder = path.size() > 5 && path[4] == '/';
  for (std::size_t i = 0; in_kiln_folder && i < 4; ++i) in_kiln_folder = fold_ascii(path[i]) == "kiln"[i];
  if (in_kiln_folder && !is_kiln_owned_path(path)) {
    return "the path " + quoted(path) +
           " is inside the reserved folder 'kiln/', which holds only kiln/kernels.bin, kiln/kernels/<name> and "
           "kiln/observed-toolchain.toml";
  }
  return "";
}

// Every path names a file and each of its proper prefixes that ends before a '/' names a
// folder. Two names the same after case folding must be the same bytes (case-insensitive file
// systems merge them) and the same kind (a file cannot also be a folder). The paths are sorted
// bytewise and all paths below one folder are contiguous in that order, so each folder is
// recorded once, when its run begins.
std::string member_set_problem(const std::vector<Entry>& entries) {
  struct Seen {
    std::string_view name;   // the file or folder, a prefix of `member`
    const std::string* member;
    bool is_file;
  };
  std::unordered_map<std::string, Seen> seen;
  seen.reserve(entries.size() * 2);
  auto record = [&](const Seen& now) -> std::string {
    std::string folded(now.name);
    for (char& c : folded) c = fold_ascii(c);
    auto [it, inserted] = seen.emplace(std::move(folded), now);
    if (inserted) return "";
    const Seen& before = it->second;
    const std::string first = quoted(*before.member), second = quoted(*now.member);
    if (before.name != now.name) {
      std::string names = before.name == *before.member && now.name == *now.member
                              ? " differ"
                              : " use the names " + quoted(std::string(before.name)) + " and " +
                                    quoted(std::string(now.name)) + ", which differ";
      return "the member paths " + first + " and " + second + names +
             " only in ASCII case (one name on case-insensitive file systems)";
    }
    if (before.is_file && now.is_file) return "the member path " + second + " is given twice";
    if (before.is_file != now.is_file) {
      const Seen& file = before.is_file ? before : now;
      const Seen& folder = before.is_file ? now : before;
      return "the member path " + quoted(*file.member) + " is a file, but " + quoted(*folder.member) +
             " needs a folder of that name";
    }
    return "";
  };
  const std::string* previous = nullptr;
  for (const Entry& e : entries) {
    const std::string& path = e.path;
    for (std::size_t slash = path.find('/'); slash != std::string::npos; slash = path.find('/', slash + 1)) {
      // A folder the previous path also passed through (same bytes up to the same '/') is
      // recorded already: its members form one run in bytewise order.
      bool known = previous != nullptr && previous->size() > slash && (*previous)[slash] == '/' &&
                   previous->compare(0, slash, path, 0, slash) == 0;
      if (known) continue;
      if (auto p = record(Seen{std::string_view(path).substr(0, slash), &path, false}); !p.empty()) return p;
    }
    if (auto p = record(Seen{path, &path, true}); !p.empty()) return p;
    previous = &path;
  }
  return "";
}

std::string package_name_problem(const std::string& name) {
  if (name.empty() || name.size() > kMaxPackageLength) {
    return "a package name has 1 to " + std::to_string(kMaxPackageLength) + " characters";
  }
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(name.front())) return "a package name starts with a lowercase letter or digit: " + quoted(name);
  for (char c : name) {
    if (!alnum(c) && c != '-' && c != '_' && c != '.') {
      return "a package name uses only [a-z0-9._-]: " + quoted(name);
    }
  }
  return "";
}

std::string revision_problem(const std::string& revision) {
  if (revision.empty() || revision.size() > kMaxRevisionLength) {
    return "a kernel_revision has 1 to " + std::to_string(kMaxRevisionLength) + " characters";
  }
  for (char c : revision) {
    if (!is_portable_name_char(c) && c != ':' && c != '/') {
      return "a kernel_revision uses only [A-Za-z0-9._+@=:/-]: " + quoted(revision);
    }
  }
  return "";
}

std::string nested_archive_problem(std::string_view path, ByteView content) {
  if (content.size < kFileMagic.size() || std::memcmp(content.data, kFileMagic.data(), kFileMagic.size()) != 0) {
    return "";
  }
  return "member '" + std::string(path) + "' is itself a kiln archive; archives are not nested (ship it as its own archive)";
}

std::string arch_tags_problem(std::string_view arch) {
  if (arch_plainly_acceptable(arch)) return "";
  if (arch.size() > kMaxArchLength) return "the arch tags are longer than " + std::to_string(kMaxArchLength) + " bytes";
  if (arch.empty()) return "";
  std::size_t start = 0;
  while (start <= arch.size()) {
    std::size_t end = arch.find(',', start);
    if (end == std::string::npos) end = arch.size();
    if (end == start) return "the arch tags " + quoted(arch) + " have an empty tag";
    for (std::size_t i = start; i < end; ++i) {
      char c = arch[i];
      bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == ':' || c == '+' || c == '-';
      if (!ok) return "the arch tags " + quoted(arch) + " have a character outside [a-z0-9_:+-]";
    }
    start = end + 1;
  }
  return "";
}

std::string signer_problem(const std::string& signer) {
  if (signer.empty() || signer.size() > kMaxSignerLength) {
    return "a signer name has 1 to " + std::to_string(kMaxSignerLength) + " characters";
  }
  for (char c : signer) {
    if (c < 0x20 || c > 0x7e) return "a signer name uses printable ASCII only: " + quoted(signer);
  }
  return "";
}

}  // namespace kiln::format
