// File access for the core: bounded reads, read-only mappings, and atomic replacement.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bytes.hpp"

namespace kiln {

// Reads a whole regular file of at most max_size bytes (keys, manifests, sources).
std::string read_small_file(const std::string& path, std::uint64_t max_size);

// Reads a file that must be a regular file and not a symbolic link (what `kiln pack`
// takes in: a link could smuggle /etc/shadow into an archive).
std::vector<std::uint8_t> read_regular_file_nofollow(const std::string& path, std::uint64_t max_size);

// A whole file, read-only: a private mapping. Opened by path (archives), a file of at most
// 256 KiB is read into memory instead: mapping, faulting and unmapping cost more than reading it,
// and a copy cannot change under the reader. The bytes are only as trustworthy as the checks
// applied to them: callers hash what they use.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  // For files kiln packs: refuses a symbolic link, a device or a FIFO, and a file over
  // max_size, then maps it (no copy, no zero-filled pages: packing 1 GiB maps 1 GiB).
  static std::shared_ptr<const MappedFile> open_regular_nofollow(const std::string& path, std::uint64_t max_size);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ByteView bytes() const { return ByteView(data_, size_); }
  // Copies bytes [offset, offset + size) into `out`: with pread from the file where it was
  // opened by path and mapped, so that reading a few KiB of a gigabyte archive faults in no
  // page of the mapping (each fault maps a whole page-cache folio, and costs most in a VM);
  // otherwise from memory. Throws Errc::io if the file shrank underneath.
  void read_at(std::uint64_t offset, std::size_t size, std::uint8_t* out) const;

 private:
  MappedFile() = default;
  void map(int fd, const std::string& path, bool opened_by_path);
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  std::vector<std::uint8_t> copy_;  // the bytes of a small file read by path; empty when mapped
  int fd_ = -1;                     // kept open for read_at() when mapped by path
  std::string path_;
};

// Writes a new file next to `path` and renames it over `path` only on commit(): readers
// see the old file or the whole new one, never a half-written one.
class AtomicFileWriter {
 public:
  AtomicFileWriter(const std::string& path, unsigned mode);
  ~AtomicFileWriter();  // removes the temporary file unless committed
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  void write(const void* data, std::size_t size);
  void pwrite_at(std::uint64_t offset, const void* data, std::size_t size);
  std::uint64_t position() const { return position_; }
  void commit();  // fsync, rename, fsync the directory

 private:
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  std::uint64_t position_ = 0;
  bool committed_ = false;
};

// Creates `path` with `mode`, refusing to replace an existing file.
void write_new_file(const std::string& path, const std::string& content, unsigned mode);

// The names in a folder, without "." and "..", sorted. A folder that cannot be listed is an
// Errc::io error naming it, except a missing one when `missing_is_empty` (then: no names).
std::vector<std::string> list_directory(const std::string& dir, bool missing_is_empty = false);

std::string errno_text(int err);

}  // namespace kiln
