// The kernel table: the manifest's kernels in a canonical binary form that the packer derives
// from kiln.toml, so that the runtime never parses TOML. `kiln/kernels.bin` holds the package
// identity, the toolchain and the kernel count; each kernel's record is its own member,
// `kiln/kernels/<name>`, found through the paged index. Opening an archive of thousands of
// kernels therefore reads one small member, and a kernel costs one index page and one record
// when it is asked for. A full verification re-derives every one of these members from
// kiln.toml and refuses the archive unless the bytes are identical. schema/FORMAT.md §4.1.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/bytes.hpp"
#include "core/manifest.hpp"

namespace kiln {

using format::kKernelTablePath;
constexpr const char* kKernelRecordPrefix = "kiln/kernels/";

inline std::string kernel_record_path(const std::string& kernel) { return kKernelRecordPrefix + kernel; }

struct KernelTableMember {
  std::string path;
  std::vector<std::uint8_t> content;
};

// The index entry of the code member at a path (the archive's, or the writer's as planned);
// throws when there is none.
using CodeEntryLookup = std::function<const format::Entry&(const std::string& path)>;

// kiln/kernels.bin first, then one record member per kernel, sorted by name (the order the
// index keeps). Positions in the manifest (line, column) are not kept. With `entries`, a
// KILNKTB3 table: each record carries its code members' index entries as `entries` gives them
// (a record's size depends on their paths and arch tags alone, not on their offsets, sizes or
// digests). Without, a KILNKTB2 table, whose records name their code by path.
std::vector<KernelTableMember> encode_kernel_table(const Manifest& manifest, const CodeEntryLookup* entries = nullptr);

// The two kinds of member one at a time: kiln/kernels.bin (KILNKTB3 when `code_entries`), and
// one kernel's record (with its code members' entries when `entries` is given). A full
// verification compares thousands of records one at a time, without holding them all.
std::vector<std::uint8_t> encode_kernel_table_head(const Manifest& manifest, bool code_entries);
std::vector<std::uint8_t> encode_kernel_record(const KernelSpec& kernel, const CodeEntryLookup* entries);

// kiln/kernels.bin: identity, toolchain and the kernel count.
class KernelTable {
 public:
  KernelTable() = default;
  // Throws Errc::malformed naming `what`, a literal (kept as a pointer, not copied).
  static KernelTable decode(ByteView bytes, const char* what);

  const std::string& package() const { return package_; }
  const std::string& kernel_revision() const { return revision_; }
  std::uint64_t sequence() const { return sequence_; }
  const std::vector<std::pair<std::string, std::string>>& toolchain() const { return toolchain_; }
  const std::string* toolchain_value(const std::string& key) const;
  std::size_t size() const { return kernel_count_; }
  // A KILNKTB3 table: its records carry their code members' index entries.
  bool code_entries() const { return code_entries_; }

 private:
  std::string package_, revision_;
  std::uint64_t sequence_ = 0;
  std::vector<std::pair<std::string, std::string>> toolchain_;
  std::uint32_t kernel_count_ = 0;
  bool code_entries_ = false;
};

// One kernel's record (the member kernel_record_path(name)), of a KILNKTB3 table when
// `code_entries` (each code reference's `member` set). Throws Errc::malformed naming `what`.
KernelSpec decode_kernel_record(ByteView bytes, const std::string& name, const std::string& what,
                                bool code_entries = false);

}  // namespace kiln
