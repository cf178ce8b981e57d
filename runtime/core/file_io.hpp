// File access for the core: bounded reads, read-only mappings, and atomic replacement.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/bytes.hpp"

namespace kiln {

// An open file descriptor, closed when the object goes; movable, not copyable.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd = -1) : fd_(fd) {}
  ~FileDescriptor();
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  // Gives the descriptor up: the caller closes it.
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

// The one place kiln's reads and writes retry: a call a signal interrupts (EINTR) is made again,
// a short read or write resumes where it stopped, and any other failure throws Errc::io naming
// `what` (the file) and the system's reason.
//
// One read(2)/pread(2): the bytes it gave, 0 at the end of the file. "<what>: cannot read: ..."
std::size_t read_some(int fd, void* buf, std::size_t size, const std::string& what);
std::size_t pread_some(int fd, void* buf, std::size_t size, std::uint64_t offset, const std::string& what);
// Exactly `size` bytes at the descriptor's position or at `offset`; a file that ends first
// throws "<what>: shrank while being read".
void read_exact(int fd, void* out, std::size_t size, const std::string& what);
void pread_exact(int fd, void* out, std::size_t size, std::uint64_t offset, const std::string& what);
// The same for `size` bytes into `out` and the `tail_size` bytes after them into `tail_out`, in
// one preadv(2) where the file gives them at once: a caller reading a member and the few bytes
// after it makes one call, not two.
void preadv_exact(int fd, void* out, std::size_t size, void* tail_out, std::size_t tail_size, std::uint64_t offset,
                  const std::string& what);
// All of `data`, at the descriptor's position or at `offset`. "<what>: write failed: ..."
void write_all(int fd, const void* data, std::size_t size, const std::string& what);
void pwrite_all(int fd, const void* data, std::size_t size, std::uint64_t offset, const std::string& what);

// Reads a whole regular file of at most max_size bytes (keys, manifests, sources).
std::string read_small_file(const std::string& path, std::uint64_t max_size);

// Opens `path` for reading only if it is a regular file: O_NONBLOCK (a FIFO opens at once
// instead of waiting for a writer) and, unless follow_links, O_NOFOLLOW; then fstat. A link is
// refused with "<path>: is a symbolic link; refused", anything else that is not a regular file
// (FIFO, device, folder, socket) with "<path>: is not a regular file; refused" (Errc::invalid_argument).
// A missing file is Errc::not_found; other failures Errc::io. What a folder someone else can
// write holds (the store) is opened only through this.
FileDescriptor open_regular_file(const std::string& path, bool follow_links);

// read_small_file for a path whose link must not be followed (open_regular_file's refusals).
std::string read_regular_file_text_nofollow(const std::string& path, std::uint64_t max_size);

// A random hex string of 2 * bytes characters from getrandom(2): names nobody can predict
// (temporary files beside a target, a store being built).
std::string random_hex(std::size_t bytes);

// Reads a file that must be a regular file and not a symbolic link (what `kiln pack`
// takes in: a link could smuggle /etc/shadow into an archive).
std::vector<std::uint8_t> read_regular_file_nofollow(const std::string& path, std::uint64_t max_size);

// The same refusals, for an input kiln pack reads later: returns the file's size, reading nothing.
std::uint64_t regular_file_size_nofollow(const std::string& path, std::uint64_t max_size);

// Reads the regular file at `path` (not a symbolic link) into `out`, resized to `size`: the size
// the caller saw when it opened the file before. A file that is no longer `size` bytes is refused
// with Errc::io ("<path>: changed while kiln pack read it: N bytes when first opened, M now; pack
// again once nothing writes it").
void read_regular_file_exact_nofollow(const std::string& path, std::uint64_t size, std::vector<std::uint8_t>& out);

// A whole file, read-only: a private mapping. Opened by path (archives), a file of at most
// 256 KiB is read into memory instead: mapping, faulting and unmapping cost more than reading it,
// and a copy cannot change under the reader. The bytes are only as trustworthy as the checks
// applied to them: callers hash what they use.
class MappedFile {
 public:
  // follow_links = false: open_regular_file's refusals (a store's archives).
  explicit MappedFile(const std::string& path, bool follow_links = true);
  // For files kiln packs: refuses a symbolic link, a device or a FIFO, and a file over
  // max_size, then maps it (no copy, no zero-filled pages: packing 1 GiB maps 1 GiB).
  static std::shared_ptr<const MappedFile> open_regular_nofollow(const std::string& path, std::uint64_t max_size);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::size_t size() const { return size_; }
  // The whole file. A large file opened by path is mapped here, on the first call (thread-safe;
  // Errc::io if the mapping fails), not when it is opened: a runtime that reads a few KiB of a
  // large archive with read_at() never pays for mapping and unmapping it.
  ByteView bytes() const;
  // Copies bytes [offset, offset + size) into `out`: with pread from the file where it was
  // opened by path and not read whole, so that reading a few KiB of a gigabyte archive faults in
  // no page of a mapping (each fault maps a whole page-cache folio, and costs most in a VM);
  // otherwise from memory. Throws Errc::io if the file shrank underneath.
  void read_at(std::uint64_t offset, std::size_t size, std::uint8_t* out) const;
  // The same, and the `tail_size` bytes after them into `tail_out`, in one read.
  void read_at(std::uint64_t offset, std::size_t size, std::uint8_t* out, std::size_t tail_size, std::uint8_t* tail_out) const;

 private:
  MappedFile() = default;
  void open_fd(int fd, const std::string& path, bool opened_by_path);
  void map_now() const;
  mutable std::once_flag mapped_once_;
  mutable const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  std::vector<std::uint8_t> copy_;  // the bytes of a small file read by path; empty otherwise
  int fd_ = -1;                     // kept open for read_at() and the lazy mapping (by path)
  bool lazy_ = false;               // mapped on the first bytes() call
  std::string path_;
};

// Writes a new file next to `path` and renames it over `path` only on commit(): readers
// see the old file or the whole new one, never a half-written one. The temporary file is
// "<path>.tmp-<32 random hex>", created O_CREAT|O_EXCL|O_NOFOLLOW: nobody can predict its name,
// and a link or file planted there is never opened or truncated. The rename replaces whatever
// name is at `path` (a planted link included) and never writes through it. Any way out other
// than a finished commit() removes the temporary file.
class AtomicFileWriter {
 public:
  AtomicFileWriter(const std::string& path, unsigned mode);
  ~AtomicFileWriter();  // removes the temporary file unless committed
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  void write(const void* data, std::size_t size);
  void pwrite_at(std::uint64_t offset, const void* data, std::size_t size);
  // Writes the pieces one after another from `offset`, in as few pwritev(2) calls as IOV_MAX allows.
  void pwritev_at(std::uint64_t offset, const std::vector<ByteView>& pieces);
  // Asks the kernel to start writing [offset, offset + size) to the disk now, without waiting
  // (sync_file_range SYNC_FILE_RANGE_WRITE): commit()'s fsync then has less left to wait for.
  // A hint: no durability on its own, errors ignored (the fsync reports them).
  void start_writeback(std::uint64_t offset, std::uint64_t size);
  std::uint64_t position() const { return position_; }
  const std::string& temp_path() const { return temp_path_; }
  // Names another target in the same folder (`kiln store add` knows the name, the digest, only
  // once it has verified what it wrote).
  void set_target(const std::string& path) { path_ = path; }
  // fsync, rename, fsync the directory. `step` (may be empty) is called before each of those
  // and after the last with where it stands: the store's crash tests stop the process there.
  using Step = std::function<void(const char* where)>;
  void commit(const Step& step = {});

 private:
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  std::uint64_t position_ = 0;
  bool committed_ = false;
};

// Replaces `path` with `content` so that a crash at any moment leaves the old file or the whole
// new one (AtomicFileWriter), writing 64 KiB at a time with `step("partial write")` between the
// pieces, then committing with `step`.
void replace_file_durably(const std::string& path, const std::string& content, unsigned mode,
                          const AtomicFileWriter::Step& step = {});

// fsync of a folder, so that names created, renamed or removed in it survive a crash. Best
// effort: some filesystems refuse a folder's fsync.
void sync_directory(const std::string& dir);

// An exclusive flock on `path` (created if missing, O_NOFOLLOW: a symbolic link planted there is
// refused, never followed; it must be a regular file) for the object's life. The kernel drops it
// when the descriptor closes, the holder being killed included: a dead holder blocks no one.
class FileLock {
 public:
  explicit FileLock(const std::string& path);
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  FileDescriptor fd_;
};

// Creates `path` with `mode`, refusing to replace an existing file.
void write_new_file(const std::string& path, const std::string& content, unsigned mode);

// The names in a folder, without "." and "..", sorted. A folder that cannot be listed is an
// Errc::io error naming it, except a missing one when `missing_is_empty` (then: no names).
std::vector<std::string> list_directory(const std::string& dir, bool missing_is_empty = false);
// The same for folder `name` under the open folder `dir`, never through a link (a file or a link
// there is an Errc::io error too), named `shown` in errors: for callers that hold a folder open
// so that a path changed meanwhile cannot redirect them (kiln extract's staged folder).
std::vector<std::string> list_directory_at(int dir, const std::string& name, const std::string& shown);
// Removes `name` under the open folder `dir` and everything in it, never following a link (a
// link is removed, not what it points to). Returns "" or the first reason something stayed.
std::string remove_tree_at(int dir, const std::string& name, const std::string& shown);

std::string errno_text(int err);

}  // namespace kiln
