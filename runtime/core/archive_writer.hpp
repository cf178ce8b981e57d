// Writes archive format v2, and adds signatures to an existing archive. The only writer
// of the format: the packager and the tests both come through here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/archive_reader.hpp"
#include "core/ed25519.hpp"
#include "core/file_io.hpp"
#include "core/format.hpp"

namespace kiln {

// A file the worker that packs its member reads, whole, into a buffer it reuses (what kiln pack
// does with small files). Mapped instead, thousands of small inputs cost a page fault each
// and made every worker wait for the process's memory-map lock (tests/bench/RESULTS.md).
// The file is opened again by path when it is read: it must still be a regular file, not a
// symbolic link, of `size` bytes, and, where `checked` is set, hold the bytes with that digest,
// or the pack fails with Errc::io naming it.
struct InputFile {
  std::string path;
  std::uint64_t size = 0;
  // The SHA-256 of the bytes the caller read and checked before (a code object's targets, a
  // test vector's dtype): what is packed must be what was checked.
  std::optional<Sha256> checked;
};

struct MemberInput {
  std::string path;
  format::Role role = format::Role::meta;
  format::Vendor backend = format::Vendor::none;
  format::CodeKind kind = format::CodeKind::none;
  std::string arch;
  // The content, exactly one of: bytes held here; a mapped input file (large files, so that
  // packing a gigabyte does not first copy a gigabyte); a file read when it is packed.
  std::vector<std::uint8_t> content;
  std::shared_ptr<const MappedFile> mapped;
  std::optional<InputFile> file;
  // Or made from other members' index entries (a kernel record copies its code members'):
  // called once with the entries as planned, before anything is written (offsets, sizes and
  // digests still zero), which fixes its size, and once more after every other member is
  // written, for the bytes written in its place. It is stored raw, and both calls must give the
  // same number of bytes (Errc::internal otherwise).
  std::function<std::vector<std::uint8_t>(const CodeEntryLookup& entries)> derive;

  std::uint64_t size() const { return file ? file->size : bytes().size; }
  // The held or mapped bytes; Errc::internal for a member given as `file` (read it instead).
  ByteView bytes() const;
};

struct PackageIdentity {
  std::string package;
  std::string kernel_revision;
  std::uint64_t sequence = 0;
};

struct Signer {
  const PrivateKey* key = nullptr;
  std::string name;
  std::uint64_t created = 0;  // seconds since the epoch; 0 unless SOURCE_DATE_EPOCH or a clock asked
};

// What a write_archive_file took, for kiln pack --timings.
struct WriteStats {
  double sync_seconds = 0;  // the fsync of the finished file (the rename and the folder's fsync after it not included)
};

struct WriteOptions {
  int level = 9;          // zstd level for every member
  unsigned threads = 1;   // workers compressing, hashing and writing members. The output does not depend on it
  ProgressFn progress;    // called from worker threads with (bytes compressed, total)
  WriteStats* stats = nullptr;  // filled in by write_archive_file when given
  // Compressed members wait in memory until every member before them is compressed (their
  // offset depends on it); no worker starts a member while they hold this many bytes or more.
  // The heap then holds at most this plus one frame per worker. The output does not depend on it.
  std::uint64_t max_held_bytes = 64ull << 20;
};

// The kernel table members derived from `manifest` (kiln/kernels.bin and one record per
// kernel, FORMAT.md §4.1), ready to add to an archive's members: a KILNKTB3 table, each record
// derived from its code members' entries as written.
std::vector<MemberInput> kernel_table_inputs(const Manifest& manifest);

// Builds the archive in memory. Members are sorted by path; a duplicate, an invalid path
// or a missing kiln.toml is refused with Errc::invalid_argument.
std::vector<std::uint8_t> build_archive(const PackageIdentity& id, std::vector<MemberInput> members,
                                        const std::vector<Signer>& signers, const WriteOptions& options);

// Same, written atomically to `path` (temporary file, fsync, rename).
Sha256 write_archive_file(const std::string& path, const PackageIdentity& id, std::vector<MemberInput> members,
                          const std::vector<Signer>& signers, const WriteOptions& options);

format::SignatureRecord make_signature(const Sha256& digest, const std::string& package, std::uint64_t sequence,
                                       const Signer& signer);

// Adds one signature to the archive at `path`, replacing the file atomically. The digest
// does not change. Every member's stored digest is checked first (a signer vouches for
// what they sign), and a key that already signed is refused.
format::SignatureRecord add_signature_to_file(const std::string& path, const Signer& signer, unsigned threads);

}  // namespace kiln
