// A folder filled out of sight and put in place whole, or not at all: what lets `kiln extract`
// leave either every member or nothing. The files go into a fresh temporary folder beside
// the destination (same file system, so the final step is one rename); each file is written
// exclusively, never through a link, read back and compared with what was meant, and fsynced.
// commit() renames the folder into place without replacing anything that holds files; if
// commit() is never reached, the temporary folder and everything in it are removed.
#pragma once

#include <set>
#include <string>

#include "core/file_io.hpp"
#include "core/sha256.hpp"

namespace kiln::cli {

class StagedFolder {
 public:
  // Refuses (Errc::io) a destination that exists and is anything but an empty folder (a file,
  // a link, a folder holding anything): nothing there is ever overwritten. Then creates the
  // temporary folder in the destination's parent.
  explicit StagedFolder(const std::string& destination);
  ~StagedFolder();  // removes the temporary folder unless committed
  StagedFolder(const StagedFolder&) = delete;
  StagedFolder& operator=(const StagedFolder&) = delete;

  // Writes `data` at the relative `path` (validated by the archive reader: no '..', no
  // absolute path), creating its folders; throws Errc::io naming the destination path if
  // anything is already there or a write fails, and Errc::integrity if the bytes read back
  // do not have `digest`.
  void write_file(const std::string& path, ByteView data, const Sha256& digest);
  // fsyncs the folders, then renames the temporary folder to the destination: with
  // RENAME_NOREPLACE where the destination did not exist (one that appeared meanwhile is left
  // alone and the commit fails), with a plain rename over the empty folder that was there
  // (which the kernel refuses once that folder holds anything).
  void commit();
  // Removes the temporary folder now. Returns "" or why it could not be removed (said in the
  // caller's error, so nothing is left behind unmentioned).
  std::string discard();

  const std::string& destination() const { return destination_; }
  const std::string& temporary() const { return temporary_; }

 private:
  std::string destination_;
  std::string parent_;
  std::string name_;          // the destination's last component
  std::string temporary_;     // parent_/.name_.kiln-extract-XXXXXX
  std::string temp_name_;     // its last component, for renameat and removal
  FileDescriptor parent_fd_;
  FileDescriptor root_;       // the temporary folder
  bool replace_empty_ = false;
  unsigned mode_ = 0755;
  std::set<std::string> folders_;  // relative folders created, fsynced at commit
  bool done_ = false;
};

}  // namespace kiln::cli
