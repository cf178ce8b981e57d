#include "staged_folder.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "core/error.hpp"

namespace kiln::cli {
namespace {

// Renames without replacing anything. Where the kernel or the file system lacks
// RENAME_NOREPLACE, a plain rename of a folder still never loses data: it replaces only an
// empty folder, and fails on a folder holding anything or on a file.
int rename_noreplace(int dir, const char* from, const char* to) {
#ifdef RENAME_NOREPLACE
  if (::renameat2(dir, from, dir, to, RENAME_NOREPLACE) == 0) return 0;
  if (errno != ENOSYS && errno != EINVAL) return -1;
#endif
  return ::renameat(dir, from, dir, to);
}

}  // namespace

StagedFolder::StagedFolder(const std::string& destination) : destination_(destination) {
  std::string path = destination;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  std::size_t slash = path.rfind('/');
  parent_ = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  name_ = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name_.empty() || name_ == "." || name_ == ".." || name_ == "/") {
    fail(Errc::invalid_argument, destination + ": name a folder to create (or an empty one), not '" + name_ + "'");
  }
  parent_fd_ = FileDescriptor(::open(parent_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (parent_fd_.get() < 0) fail(Errc::io, parent_ + ": cannot open the folder to extract into: " + errno_text(errno));

  struct stat st {};
  if (::fstatat(parent_fd_.get(), name_.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      fail(Errc::io, destination + ": already exists and is not a folder (a file or a link); kiln extract never overwrites");
    }
    if (!list_directory_at(parent_fd_.get(), name_, destination).empty()) {
      fail(Errc::io, destination + ": already exists and is not empty; kiln extract never overwrites (name a new or empty folder)");
    }
    replace_empty_ = true;
    mode_ = st.st_mode & 07777;  // the empty folder is replaced by one that looks the same
  } else if (errno == ENOENT) {
    mode_t mask = ::umask(0);  // read and restored at once: kiln is one thread here
    ::umask(mask);
    mode_ = 0755 & ~static_cast<unsigned>(mask);
  } else {
    fail(Errc::io, destination + ": cannot check: " + errno_text(errno));
  }

  // Beside the destination, so that the final rename stays on one file system; hidden, and
  // named after it so that a leftover (after a crash) says what it was.
  std::string tmpl = "." + name_.substr(0, 64) + ".kiln-extract-XXXXXX";
  std::string full = (parent_ == "/" ? "/" : parent_ + "/") + tmpl;
  std::vector<char> buffer(full.begin(), full.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr) fail(Errc::io, full + ": cannot create a temporary folder: " + errno_text(errno));
  temporary_ = buffer.data();
  temp_name_ = temporary_.substr(temporary_.size() - tmpl.size());
  root_ = FileDescriptor(::openat(parent_fd_.get(), temp_name_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (root_.get() < 0) {
    int err = errno;
    discard();
    fail(Errc::io, temporary_ + ": cannot open the temporary folder: " + errno_text(err));
  }
}

StagedFolder::~StagedFolder() {
  if (!done_) discard();
}

void StagedFolder::write_file(const std::string& path, ByteView data, const Sha256& digest) {
  const std::string shown = destination_ + "/" + path;
  FileDescriptor dir(::dup(root_.get()));
  std::size_t start = 0;
  for (std::size_t slash = path.find('/'); slash != std::string::npos; slash = path.find('/', start)) {
    std::string part = path.substr(start, slash - start);
    if (::mkdirat(dir.get(), part.c_str(), 0755) != 0 && errno != EEXIST) {
      fail(Errc::io, destination_ + "/" + path.substr(0, slash) + ": cannot create folder: " + errno_text(errno));
    }
    int next = ::openat(dir.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) {
      fail(Errc::io, destination_ + "/" + path.substr(0, slash) + ": not a plain folder (a file or a link): " + errno_text(errno));
    }
    dir = FileDescriptor(next);
    folders_.insert(path.substr(0, slash));
    start = slash + 1;
  }
  std::string leaf = path.substr(start);
  FileDescriptor file(::openat(dir.get(), leaf.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (file.get() < 0) {
    if (errno == EEXIST) fail(Errc::io, shown + ": already exists; kiln extract never overwrites");
    fail(Errc::io, shown + ": cannot create: " + errno_text(errno));
  }
  write_all(file.get(), data.data, data.size, shown);
  if (::fsync(file.get()) != 0) fail(Errc::io, shown + ": cannot fsync: " + errno_text(errno));

  // Read back what the file system holds now, so that a short or corrupted write is caught
  // before the folder is put in place.
  Sha256Stream hash;
  // One read for a small file (the common case), 1 MiB at a time for a large one.
  std::vector<std::uint8_t> buf(std::min<std::size_t>(std::size_t{1} << 20, data.size + 1));
  std::uint64_t total = 0;
  for (;;) {
    std::size_t n = pread_some(file.get(), buf.data(), buf.size(), total, shown + " (read back)");
    if (n == 0) break;
    hash.update(buf.data(), n);
    total += n;
  }
  Sha256 got = hash.finish();
  if (total != data.size || got != digest) {
    fail(Errc::integrity, shown + ": the " + std::to_string(total) + " bytes read back after writing are not the " +
                              std::to_string(data.size) + " bytes the archive holds (sha256:" + sha256_hex(got) +
                              ", expected sha256:" + sha256_hex(digest) + ")");
  }
}

void StagedFolder::commit() {
  // Best effort, as sync_directory: some file systems refuse a folder's fsync.
  for (const std::string& folder : folders_) {
    FileDescriptor fd(::openat(root_.get(), folder.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (fd.get() >= 0) ::fsync(fd.get());
  }
  if (::fchmod(root_.get(), mode_) != 0) fail(Errc::io, temporary_ + ": cannot set its mode: " + errno_text(errno));
  ::fsync(root_.get());
  int rc = replace_empty_ ? ::renameat(parent_fd_.get(), temp_name_.c_str(), parent_fd_.get(), name_.c_str())
                          : rename_noreplace(parent_fd_.get(), temp_name_.c_str(), name_.c_str());
  if (rc != 0) {
    int err = errno;
    if (err == EEXIST || err == ENOTEMPTY || err == ENOTDIR) {
      fail(Errc::io, destination_ + ": " + (replace_empty_ ? "is no longer an empty folder" : "appeared while extracting") +
                         "; kiln extract never overwrites");
    }
    fail(Errc::io, destination_ + ": cannot move " + temporary_ + " into place: " + errno_text(err));
  }
  done_ = true;
  ::fsync(parent_fd_.get());
}

std::string StagedFolder::discard() {
  if (done_) return "";
  done_ = true;
  root_ = FileDescriptor();
  return remove_tree_at(parent_fd_.get(), temp_name_, temporary_);
}

}  // namespace kiln::cli
