#include "core/file_io.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "core/error.hpp"

namespace kiln {
namespace {

using Fd = FileDescriptor;


std::uint64_t regular_size(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(Errc::io, path + ": " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) fail(Errc::invalid_argument, path + ": not a regular file");
  return static_cast<std::uint64_t>(st.st_size);
}

std::vector<std::uint8_t> read_opened(int fd, const std::string& path, std::uint64_t max_size) {
  std::uint64_t size = regular_size(fd, path);
  if (size > max_size) {
    fail(Errc::limit, path + ": " + std::to_string(size) + " bytes is over the limit of " +
                          std::to_string(max_size) + " bytes");
  }
  std::vector<std::uint8_t> out(static_cast<std::size_t>(size));
  read_exact(fd, out.data(), out.size(), path);
  return out;
}

std::string directory_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

std::string errno_text(int err) { return std::strerror(err); }

namespace {

// The names in the folder open as `fd` (taken: closed here), without "." and "..", sorted.
std::vector<std::string> names_in(int fd, const std::string& shown) {
  DIR* listing = ::fdopendir(fd);
  if (listing == nullptr) {
    int err = errno;
    ::close(fd);
    fail(Errc::io, shown + ": cannot list the folder: " + errno_text(err));
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(listing)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  ::closedir(listing);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

std::vector<std::string> list_directory_at(int dir, const std::string& name, const std::string& shown) {
  int fd = ::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) fail(Errc::io, shown + ": cannot open the folder: " + errno_text(errno));
  return names_in(fd, shown);
}

std::string remove_tree_at(int dir, const std::string& name, const std::string& shown) {
  int fd = ::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return "";
    if (errno != ENOTDIR && errno != ELOOP) return shown + ": cannot open to remove: " + errno_text(errno);
    if (::unlinkat(dir, name.c_str(), 0) != 0) return shown + ": cannot remove: " + errno_text(errno);
    return "";
  }
  // The folder stays open (a second descriptor) while its entries go, so that every removal is
  // relative to it and not to a path that could be swapped; names first, removal after, since a
  // folder changed while it is read may skip entries.
  Fd held(::dup(fd));
  std::vector<std::string> names;
  try {
    names = names_in(fd, shown);
  } catch (const Failure& e) {
    return e.what();
  }
  if (held.get() < 0) return shown + ": cannot hold the folder open to remove it: " + errno_text(errno);
  std::string problem;
  for (const std::string& n : names) {
    std::string p = remove_tree_at(held.get(), n, shown + "/" + n);
    if (problem.empty()) problem = p;
  }
  if (::unlinkat(dir, name.c_str(), AT_REMOVEDIR) != 0 && problem.empty()) {
    problem = shown + ": cannot remove: " + errno_text(errno);
  }
  return problem;
}

std::vector<std::string> list_directory(const std::string& dir, bool missing_is_empty) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    if (missing_is_empty && errno == ENOENT) return {};
    fail(Errc::io, dir + ": cannot list the folder: " + errno_text(errno));
  }
  return names_in(fd, dir);
}

// Every open for reading is O_NONBLOCK: a FIFO or device given as a path opens at once instead
// of waiting for a writer forever, and the fstat that follows refuses it as not a regular file.
std::string read_small_file(const std::string& path, std::uint64_t max_size) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) fail(Errc::io, path + ": cannot open: " + errno_text(errno));
  auto bytes = read_opened(fd.get(), path, max_size);
  return std::string(bytes.begin(), bytes.end());
}

FileDescriptor open_regular_file(const std::string& path, bool follow_links) {
  int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | (follow_links ? 0 : O_NOFOLLOW);
  Fd fd(::open(path.c_str(), flags));
  if (fd.get() < 0) {
    int err = errno;
    if (err == ELOOP) fail(Errc::invalid_argument, path + ": is a symbolic link; refused");
    if (err == ENOENT) fail(Errc::not_found, path + ": cannot open: " + errno_text(err));
    fail(Errc::io, path + ": cannot open: " + errno_text(err));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail(Errc::io, path + ": " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) fail(Errc::invalid_argument, path + ": is not a regular file; refused");
  // Reads block from here on: O_NONBLOCK was only for the open.
  int fl = ::fcntl(fd.get(), F_GETFL);
  if (fl >= 0) ::fcntl(fd.get(), F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

std::string read_regular_file_text_nofollow(const std::string& path, std::uint64_t max_size) {
  Fd fd = open_regular_file(path, false);
  auto bytes = read_opened(fd.get(), path, max_size);
  return std::string(bytes.begin(), bytes.end());
}

std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  std::size_t done = 0;
  while (done < bytes) {
    ssize_t n = ::getrandom(raw.data() + done, bytes - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(Errc::io, "getrandom failed: " + errno_text(errno));
    done += static_cast<std::size_t>(n);
  }
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

namespace {

Fd open_pack_input(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (fd.get() < 0) {
    if (errno == ELOOP) fail(Errc::invalid_argument, path + ": is a symbolic link; kiln packs only regular files");
    fail(Errc::io, path + ": cannot open: " + errno_text(errno));
  }
  return fd;
}

}  // namespace

std::vector<std::uint8_t> read_regular_file_nofollow(const std::string& path, std::uint64_t max_size) {
  Fd fd = open_pack_input(path);
  return read_opened(fd.get(), path, max_size);
}

std::uint64_t regular_file_size_nofollow(const std::string& path, std::uint64_t max_size) {
  Fd fd = open_pack_input(path);
  std::uint64_t size = regular_size(fd.get(), path);
  if (size > max_size) {
    fail(Errc::limit, path + ": " + std::to_string(size) + " bytes is over the limit of " + std::to_string(max_size) + " bytes");
  }
  return size;
}

void read_regular_file_exact_nofollow(const std::string& path, std::uint64_t size, std::vector<std::uint8_t>& out) {
  Fd fd = open_pack_input(path);
  std::uint64_t now = regular_size(fd.get(), path);
  if (now != size) {
    fail(Errc::io, path + ": changed while kiln pack read it: " + std::to_string(size) + " bytes when first opened, " +
                       std::to_string(now) + " now; pack again once nothing writes it");
  }
  out.resize(static_cast<std::size_t>(size));
  read_exact(fd.get(), out.data(), out.size(), path);
}

MappedFile::MappedFile(const std::string& path, bool follow_links) {
  Fd fd;
  if (follow_links) {
    fd = Fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (fd.get() < 0) fail(Errc::io, path + ": cannot open: " + errno_text(errno));
  } else {
    fd = open_regular_file(path, false);
  }
  open_fd(fd.get(), path, true);
  if (lazy_) fd_ = fd.release();  // for read_at() and the mapping made on first use
}

ByteView MappedFile::bytes() const {
  if (lazy_) std::call_once(mapped_once_, [this] { map_now(); });
  return ByteView(data_, size_);
}

void MappedFile::read_at(std::uint64_t offset, std::size_t size, std::uint8_t* out, std::size_t tail_size,
                         std::uint8_t* tail_out) const {
  if (tail_size == 0) return read_at(offset, size, out);
  if (offset > size_ || size > size_ - offset || tail_size > size_ - offset - size) {
    fail(Errc::internal, path_ + ": read past the end of the file");
  }
  if (fd_ < 0) {
    std::memcpy(out, bytes().data + offset, size);
    std::memcpy(tail_out, bytes().data + offset + size, tail_size);
    return;
  }
  preadv_exact(fd_, out, size, tail_out, tail_size, offset, path_);
}

void MappedFile::read_at(std::uint64_t offset, std::size_t size, std::uint8_t* out) const {
  if (offset > size_ || size > size_ - offset) fail(Errc::internal, path_ + ": read past the end of the file");
  if (size == 0) return;
  if (fd_ < 0) {
    std::memcpy(out, bytes().data + offset, size);
    return;
  }
  pread_exact(fd_, out, size, offset, path_);
}

std::shared_ptr<const MappedFile> MappedFile::open_regular_nofollow(const std::string& path, std::uint64_t max_size) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (fd.get() < 0) {
    if (errno == ELOOP) fail(Errc::invalid_argument, path + ": is a symbolic link; kiln packs only regular files");
    fail(Errc::io, path + ": cannot open: " + errno_text(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail(Errc::io, path + ": " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) fail(Errc::invalid_argument, path + ": not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) > max_size) {
    fail(Errc::limit, path + ": " + std::to_string(st.st_size) + " bytes is over the limit of " + std::to_string(max_size) + " bytes");
  }
  std::shared_ptr<MappedFile> file(new MappedFile);
  file->open_fd(fd.get(), path, false);  // pack inputs are mapped now: page cache, not a second copy
  return file;
}

void MappedFile::open_fd(int fd, const std::string& path, bool opened_by_path) {
  path_ = path;
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(Errc::io, path + ": " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) fail(Errc::invalid_argument, path + ": not a regular file");
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ == 0) return;  // mmap of length 0 fails; an empty view is parsed and refused
  constexpr std::size_t kReadInsteadOfMap = 256 << 10;
  if (opened_by_path && size_ <= kReadInsteadOfMap) {
    copy_.resize(size_);
    pread_exact(fd, copy_.data(), size_, 0, path);
    data_ = copy_.data();
    return;
  }
  if (opened_by_path) {
    lazy_ = true;  // the caller keeps fd as fd_; bytes() maps it when first asked
    return;
  }
  fd_ = fd;
  map_now();
  fd_ = -1;  // the caller closes fd; this file is read from its mapping only
}

namespace {
constexpr std::size_t kReadAheadWorthIt = 2 << 20;
}  // namespace

void MappedFile::map_now() const {
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
  if (p == MAP_FAILED) fail(Errc::io, path_ + ": cannot map: " + errno_text(errno));
  // A hint that kiln reads files front to back; for a small file (most pack inputs) it would
  // only take the memory-map lock once more, with nothing to read ahead.
  if (size_ >= kReadAheadWorthIt) ::madvise(p, size_, MADV_SEQUENTIAL);
  data_ = static_cast<const std::uint8_t*>(p);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr && copy_.empty()) ::munmap(const_cast<std::uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
}

AtomicFileWriter::AtomicFileWriter(const std::string& path, unsigned mode) : path_(path) {
  // 128 random bits: a name nobody can plant a link or a FIFO at in advance. O_EXCL and
  // O_NOFOLLOW refuse whatever is there anyway (a collision is retried, not opened).
  int err = 0;
  for (int attempt = 0; attempt < 4 && fd_ < 0; ++attempt) {
    temp_path_ = path + ".tmp-" + random_hex(16);
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    err = errno;
    if (fd_ < 0 && err != EEXIST) break;
  }
  if (fd_ < 0) {
    temp_path_.clear();  // nothing of ours to remove
    fail(Errc::io, path + ": cannot create a temporary file beside it: " + errno_text(err));
  }
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
}

void AtomicFileWriter::write(const void* data, std::size_t size) {
  pwrite_at(position_, data, size);
  position_ += size;
}

void AtomicFileWriter::pwrite_at(std::uint64_t offset, const void* data, std::size_t size) {
  pwrite_all(fd_, data, size, offset, path_);
}

void AtomicFileWriter::pwritev_at(std::uint64_t offset, const std::vector<ByteView>& pieces) {
  std::vector<iovec> iov;
  iov.reserve(pieces.size());
  for (const ByteView& p : pieces) {
    if (p.size > 0) iov.push_back({const_cast<std::uint8_t*>(p.data), p.size});
  }
  std::size_t first = 0;
  while (first < iov.size()) {
    int count = static_cast<int>(std::min<std::size_t>(iov.size() - first, IOV_MAX));
    ssize_t n = ::pwritev(fd_, iov.data() + first, count, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(Errc::io, path_ + ": write failed: " + errno_text(errno));
    if (n == 0) fail(Errc::io, path_ + ": write failed: the system wrote nothing");
    offset += static_cast<std::uint64_t>(n);
    // A short write (a signal, a full disk about to say so) resumes inside the piece it stopped in.
    auto left = static_cast<std::size_t>(n);
    while (first < iov.size() && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (left > 0) {
      iov[first].iov_base = static_cast<std::uint8_t*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
}

void AtomicFileWriter::start_writeback(std::uint64_t offset, std::uint64_t size) {
#ifdef __linux__
  ::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(size), SYNC_FILE_RANGE_WRITE);
#else
  (void)offset;
  (void)size;
#endif
}

void AtomicFileWriter::commit(const Step& step) {
  if (step) step("written, not synced");
  if (::fsync(fd_) != 0) fail(Errc::io, path_ + ": fsync failed: " + errno_text(errno));
  if (::close(fd_) != 0) {
    fd_ = -1;
    fail(Errc::io, path_ + ": close failed: " + errno_text(errno));
  }
  fd_ = -1;
  if (step) step("synced, not renamed");
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    fail(Errc::io, path_ + ": cannot rename the finished file into place: " + errno_text(errno));
  }
  committed_ = true;
  if (step) step("renamed, folder not synced");
  sync_directory(directory_of(path_));
  if (step) step("done");
}

void sync_directory(const std::string& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() >= 0) ::fsync(fd.get());
}

void replace_file_durably(const std::string& path, const std::string& content, unsigned mode,
                          const AtomicFileWriter::Step& step) {
  AtomicFileWriter out(path, mode);
  constexpr std::size_t kPiece = 64 * 1024;  // each piece a point where a crash leaves a partial temporary file
  for (std::size_t done = 0; done < content.size();) {
    std::size_t n = std::min(kPiece, content.size() - done);
    out.write(content.data() + done, n);
    done += n;
    if (done < content.size() && step) step("partial write");
  }
  out.commit(step);
}

FileLock::FileLock(const std::string& path)
    : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644)) {
  if (fd_.get() < 0) {
    if (errno == ELOOP) fail(Errc::invalid_argument, path + ": the lock is a symbolic link; refused (remove it: kiln makes a plain file)");
    fail(Errc::io, path + ": cannot open the lock: " + errno_text(errno));
  }
  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0) fail(Errc::io, path + ": " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) fail(Errc::invalid_argument, path + ": the lock is not a regular file; refused");
  while (::flock(fd_.get(), LOCK_EX) != 0) {
    if (errno != EINTR) fail(Errc::io, path + ": flock failed: " + errno_text(errno));
  }
}

FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) ::close(fd_);
}

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  std::swap(fd_, other.fd_);
  return *this;
}

std::size_t read_some(int fd, void* buf, std::size_t size, const std::string& what) {
  for (;;) {
    ssize_t n = ::read(fd, buf, size);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno != EINTR) fail(Errc::io, what + ": cannot read: " + errno_text(errno));
  }
}

std::size_t pread_some(int fd, void* buf, std::size_t size, std::uint64_t offset, const std::string& what) {
  for (;;) {
    ssize_t n = ::pread(fd, buf, size, static_cast<off_t>(offset));
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno != EINTR) fail(Errc::io, what + ": cannot read: " + errno_text(errno));
  }
}

void read_exact(int fd, void* out, std::size_t size, const std::string& what) {
  auto* p = static_cast<std::uint8_t*>(out);
  for (std::size_t done = 0; done < size;) {
    std::size_t n = read_some(fd, p + done, size - done, what);
    if (n == 0) fail(Errc::io, what + ": shrank while being read");
    done += n;
  }
}

void pread_exact(int fd, void* out, std::size_t size, std::uint64_t offset, const std::string& what) {
  auto* p = static_cast<std::uint8_t*>(out);
  for (std::size_t done = 0; done < size;) {
    std::size_t n = pread_some(fd, p + done, size - done, offset + done, what);
    if (n == 0) fail(Errc::io, what + ": shrank while being read");
    done += n;
  }
}

void preadv_exact(int fd, void* out, std::size_t size, void* tail_out, std::size_t tail_size, std::uint64_t offset,
                  const std::string& what) {
  iovec parts[2] = {{out, size}, {tail_out, tail_size}};
  iovec* next = parts;
  int left = tail_size > 0 ? 2 : 1;
  std::uint64_t at = offset;
  while (left > 0) {
    if (next->iov_len == 0) {
      ++next, --left;
      continue;
    }
    ssize_t n = ::preadv(fd, next, left, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(Errc::io, what + ": cannot read: " + errno_text(errno));
    if (n == 0) fail(Errc::io, what + ": shrank while being read");
    at += static_cast<std::uint64_t>(n);
    // A short read resumes inside the part it stopped in.
    for (std::size_t got = static_cast<std::size_t>(n); got > 0 && left > 0;) {
      const std::size_t take = std::min(got, next->iov_len);
      next->iov_base = static_cast<std::uint8_t*>(next->iov_base) + take;
      next->iov_len -= take;
      got -= take;
      if (next->iov_len == 0) ++next, --left;
    }
  }
}

void write_all(int fd, const void* data, std::size_t size, const std::string& what) {
  auto* p = static_cast<const std::uint8_t*>(data);
  for (std::size_t done = 0; done < size;) {
    ssize_t n = ::write(fd, p + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(Errc::io, what + ": write failed: " + errno_text(errno));
    done += static_cast<std::size_t>(n);
  }
}

void pwrite_all(int fd, const void* data, std::size_t size, std::uint64_t offset, const std::string& what) {
  auto* p = static_cast<const std::uint8_t*>(data);
  for (std::size_t done = 0; done < size;) {
    ssize_t n = ::pwrite(fd, p + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(Errc::io, what + ": write failed: " + errno_text(errno));
    done += static_cast<std::size_t>(n);
  }
}

void write_new_file(const std::string& path, const std::string& content, unsigned mode) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
  if (fd.get() < 0) {
    if (errno == EEXIST) fail(Errc::io, path + ": already exists; kiln will not overwrite it");
    fail(Errc::io, path + ": cannot create: " + errno_text(errno));
  }
  // The umask may have narrowed the mode; a private key must end up exactly as asked.
  if (::fchmod(fd.get(), mode) != 0) fail(Errc::io, path + ": cannot set its mode: " + errno_text(errno));
  write_all(fd.get(), content.data(), content.size(), path);
  if (::fsync(fd.get()) != 0) fail(Errc::io, path + ": fsync failed: " + errno_text(errno));
}

}  // namespace kiln
