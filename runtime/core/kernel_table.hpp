// kiln/kernels.bin: the manifest's kernels in a canonical binary form that the packer
// derives from kiln.toml. The runtime reads this table instead of parsing TOML, so opening
// an archive of thousands of kernels costs a directory read, and one kernel is decoded only
// when it is asked for. A full verification re-derives the table from kiln.toml and
// refuses the archive unless the bytes are identical. schema/FORMAT.md §4.1 specifies it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "manifest.hpp"

namespace kiln {

constexpr const char* kKernelTablePath = "kiln/kernels.bin";

// Kernels sorted by name; positions in the manifest (line, column) are not kept.
std::vector<std::uint8_t> encode_kernel_table(const Manifest& manifest);

class KernelTable {
 public:
  KernelTable() = default;
  // Checks the header and the directory (names sorted and unique, every record inside the
  // table); records are checked when decoded. Throws Errc::malformed naming `what`.
  static KernelTable decode(std::vector<std::uint8_t> bytes, const std::string& what);

  const std::string& package() const { return package_; }
  const std::string& kernel_revision() const { return revision_; }
  std::uint64_t sequence() const { return sequence_; }
  const std::vector<std::pair<std::string, std::string>>& toolchain() const { return toolchain_; }
  const std::string* toolchain_value(const std::string& key) const;

  std::size_t size() const { return names_.size(); }
  const std::string& name(std::size_t i) const { return names_[i]; }
  long find(const std::string& name) const;  // position or -1
  KernelSpec kernel(std::size_t i) const;    // decoded on demand
  const std::vector<std::uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<std::uint8_t> bytes_;
  std::string what_;
  std::string package_, revision_;
  std::uint64_t sequence_ = 0;
  std::vector<std::pair<std::string, std::string>> toolchain_;
  std::vector<std::string> names_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> records_;  // offset, size of each kernel
};

}  // namespace kiln
