#include "core/archive_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "core/compress.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"

namespace kiln {

ByteView MemberInput::bytes() const {
  if (file) fail(Errc::internal, "member '" + path + "' is read from " + file->path + " when it is packed; it holds no bytes before");
  return mapped ? mapped->bytes() : ByteView(content);
}

namespace {

// A member is kept raw when zstd saves less than 1/32 of it (cubins full of already dense
// machine code often do not pay for the decompression at load time), or less than 512 bytes:
// decoding a zstd frame has a fixed cost (its tables are rebuilt per frame: a few microseconds,
// measured on the GPU host) that the runtime pays on every open for the kernel table and every
// kernel record it reads, to save a hundred bytes each.
constexpr std::size_t kMinCompressionSaving = 512;
bool compression_pays(std::size_t content, std::size_t compressed) {
  return compressed < content && content - compressed > std::max(content / 32, kMinCompressionSaving - 1);
}

// Machine code (a cubin, a fatbin, an AMD code object) of at most 16 KiB is kept raw without
// trying zstd. The runtime reads a code object on every kernel's first load; stored raw, that is
// one read and one SHA-256, where a frame adds its decoder's per-frame set-up (6-8 us for the
// 1 KiB frame of a 3.7 KiB cubin on the GPU host, whose driver loads that cubin in ~9 us), a
// second digest, and zstd's per-thread context (~96 KiB of heap) in a process that needs no
// other frame. At this size the bytes compression would save are at most a few KiB per object.
// PTX is not machine code: it compresses several times over and is JIT-compiled, so its frame's
// cost does not show.
constexpr std::size_t kRawMachineCodeMax = 16 * 1024;
bool kept_raw_unconditionally(const format::Entry& e) {
  return e.role == format::Role::code && e.kind != format::CodeKind::ptx && e.kind != format::CodeKind::none &&
         e.content_size <= kRawMachineCodeMax;
}

// Where the bytes go: each piece written at its offset, from any thread (members are written
// by the workers that compress them, in whatever order their offsets become known).
class Sink {
 public:
  virtual ~Sink() = default;
  // `pieces` one after another from `offset`.
  virtual void write_at(std::uint64_t offset, const std::vector<ByteView>& pieces) = 0;
  void write_at(std::uint64_t offset, const std::uint8_t* data, std::size_t size) {
    write_at(offset, std::vector<ByteView>{ByteView(data, size)});
  }
};

class MemorySink : public Sink {
 public:
  using Sink::write_at;
  void write_at(std::uint64_t offset, const std::vector<ByteView>& pieces) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const ByteView& p : pieces) {
      if (out.size() < offset + p.size) out.resize(static_cast<std::size_t>(offset + p.size));
      std::copy(p.data, p.data + p.size, out.begin() + static_cast<long>(offset));
      offset += p.size;
    }
  }
  std::vector<std::uint8_t> out;

 private:
  std::mutex mutex_;
};

class FileSink : public Sink {
 public:
  explicit FileSink(AtomicFileWriter& file) : file_(file) {}
  using Sink::write_at;
  void write_at(std::uint64_t offset, const std::vector<ByteView>& pieces) override {
    file_.pwritev_at(offset, pieces);
    std::uint64_t size = 0;
    for (const ByteView& p : pieces) size += p.size;
    // Every 16 MiB, the disk is asked to start on what is written so far, so that it writes
    // while the workers compress and the final fsync waits only for the tail.
    std::uint64_t before = written_.fetch_add(size);
    if ((before + size) / kWritebackStep != before / kWritebackStep) file_.start_writeback(0, 0);
  }

 private:
  static constexpr std::uint64_t kWritebackStep = 16ull << 20;
  AtomicFileWriter& file_;
  std::atomic<std::uint64_t> written_{0};
};

// Validates and sorts the members and fills in everything about each entry that does not
// depend on compression.
format::Index plan_index(const PackageIdentity& id, std::vector<MemberInput>& members) {
  auto bad = [](const std::string& why) { fail(Errc::invalid_argument, why); };
  if (auto p = format::package_name_problem(id.package); !p.empty()) bad(p);
  if (auto p = format::revision_problem(id.kernel_revision); !p.empty()) bad(p);
  if (members.size() > format::kMaxEntries) bad("too many members (" + std::to_string(members.size()) + ")");
  std::sort(members.begin(), members.end(), [](const MemberInput& a, const MemberInput& b) { return a.path < b.path; });

  format::Index index;
  index.package = id.package;
  index.kernel_revision = id.kernel_revision;
  index.sequence = id.sequence;
  index.entries.resize(members.size());
  bool has_manifest = false;
  for (std::size_t i = 0; i < members.size(); ++i) {
    const MemberInput& m = members[i];
    if (auto p = format::member_path_problem(m.path); !p.empty()) bad("member: " + p);
    if (i > 0 && members[i - 1].path == m.path) bad("member '" + m.path + "' is given twice");
    if (auto p = format::arch_tags_problem(m.arch); !p.empty()) bad("member '" + m.path + "': " + p);
    if (int(m.file.has_value()) + int(m.mapped != nullptr) + int(!m.content.empty()) + int(bool(m.derive)) > 1) {
      bad("member '" + m.path + "' is given more than one content");
    }
    bool is_code = m.role == format::Role::code;
    if (is_code != (m.kind != format::CodeKind::none) || is_code != (m.backend != format::Vendor::none) ||
        is_code == m.arch.empty()) {
      bad("member '" + m.path + "': backend, kind and arch are set exactly for code members");
    }
    if ((m.role == format::Role::manifest) != (m.path == format::kManifestPath)) {
      bad("member '" + m.path + "': exactly the member 'kiln.toml' has role manifest");
    }
    has_manifest = has_manifest || m.role == format::Role::manifest;
    format::Entry& e = index.entries[i];
    e.path = m.path;
    e.role = m.role;
    e.backend = m.backend;
    e.kind = m.kind;
    e.arch = m.arch;
  }
  if (!has_manifest) bad("an archive needs its 'kiln.toml' member");
  // The same rules between paths a reader applies (format.cpp), so kiln never writes an
  // archive it would then refuse.
  if (auto p = format::member_set_problem(index.entries); !p.empty()) bad(p);
  return index;
}

std::vector<format::SignatureRecord> sign_all(const Sha256& digest, const PackageIdentity& id,
                                              const std::vector<Signer>& signers) {
  std::vector<format::SignatureRecord> records;
  for (const Signer& s : signers) {
    records.push_back(make_signature(digest, id.package, id.sequence, s));
    for (std::size_t i = 0; i + 1 < records.size(); ++i) {
      if (records[i].attributes.key_id == records.back().attributes.key_id) {
        fail(Errc::invalid_argument, "key " + records.back().attributes.key_id + " is given twice");
      }
    }
  }
  return records;
}

// Compresses, hashes and writes the members on `threads` workers; no thread only writes.
// A member's offset is the previous member's offset plus its stored size rounded up to 64, so
// it is known once every member before it is compressed: workers take members in index order,
// and whichever worker finishes the member at the frontier assigns offsets as far as members
// are done and queues them for writing. A worker that finds members queued and nobody writing
// becomes the writer: it takes the whole queue (consecutive members, so consecutive bytes) and
// writes it with one pwritev per 1,024 pieces, then whatever was queued meanwhile, until the queue
// is empty; the others go on compressing. One writer at a time: a buffered write holds the file's
// inode lock, and sixteen workers each writing their own members spun on it (tests/bench/RESULTS.md).
// The output is the same for any -j.
//
// Memory: each worker holds one compression context and one output buffer of
// ZSTD_compressBound(largest member it compressed). Compressed members wait in memory until
// written; a worker starts no new member while those add up to options.max_held_bytes (64 MiB)
// or more, so the heap holds at most that plus one member's frame per worker, whatever the
// archive's size. (The writer thread this replaced bounded nothing: workers ran ahead of it.)
// Members stored raw are written straight from their input mapping and hold no heap; those read
// from a file (InputFile) are copied out of the worker's buffer and count as held.
//
// Inputs: kiln pack hands small files over unread (InputFile): each worker reads them with
// read(2) into one buffer it reuses. Mapped, thousands of small inputs cost a page fault each
// and made every worker wait for the process's memory-map lock, and every munmap sent the other
// workers' CPUs a TLB shootdown: at -j 16 on a 16-core host, 4-5 s of system time against zstd's
// 0.8 s (perf: osq_lock, rwsem spinning, IPIs; tests/bench/RESULTS.md). The mappings that remain
// (large files) are released only once every worker has finished, by the calling thread; kept
// until the end, they cost no heap: their pages are the page cache's, clean and reclaimable.
class MemberPipeline {
 public:
  MemberPipeline(std::vector<MemberInput>& members, format::Index& index, const WriteOptions& options)
      : members_(members), index_(index), options_(options), stored_(members.size()), done_(members.size(), 0) {
    for (const auto& m : members) total_ += m.size();
  }

  // Returns where the members end (aligned to 64): the index's offset.
  std::uint64_t run(Sink& sink) {
    unsigned n = std::max(1u, std::min<unsigned>(options_.threads, static_cast<unsigned>(members_.size())));
    std::vector<std::thread> workers;
    for (unsigned t = 1; t < n; ++t) workers.emplace_back([this, &sink] { work(sink); });
    work(sink);  // the calling thread is one of the n workers
    for (auto& w : workers) w.join();
    retired_.clear();  // one thread now: no lock contention, no other CPU to shoot down
    if (failed_) fail(error_code_, error_);
    return end_offset_;
  }

 private:
  struct Scratch {
    std::unique_ptr<ZstdCompressor> compressor;  // made by the first compress_one (it may throw)
    std::vector<std::uint8_t> frame;             // reused for every member this worker compresses
    std::vector<std::uint8_t> input;             // every InputFile this worker reads, in turn
  };

  void work(Sink& sink) {
    Scratch scratch;
    for (;;) {
      std::size_t job = 0;
      std::vector<std::size_t> run;  // consecutive members to write, when this worker is the writer
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [&] {
          return failed_ || (!to_write_.empty() && !writing_) || frontier_ == members_.size() ||
                 (next_ < members_.size() && may_start());
        });
        if (failed_) return;
        if (!to_write_.empty() && !writing_) {
          writing_ = true;
          run.assign(to_write_.begin(), to_write_.end());
          to_write_.clear();
        } else if (next_ < members_.size() && may_start()) {
          job = next_++;
        } else {
          return;  // every member compressed; what is still queued, the writer writes
        }
      }
      const bool write = !run.empty();
      try {
        if (write) {
          write_queued(std::move(run), sink);
        } else {
          compress_one(job, scratch);
        }
      } catch (const Failure& e) {
        record_failure(e.code(), e.what());
        return;
      } catch (const std::exception& e) {
        record_failure(Errc::internal, e.what());
        return;
      }
      if (!write) finish_compressed(job);
    }
  }

  // Whether a worker may start compressing another member (mutex_ held). With nothing held
  // it always may, so a bound of 0 still makes progress.
  bool may_start() const { return held_ == 0 || held_ < options_.max_held_bytes; }

  // Keeps an input's mapping (if this was its last user) for run() to release after the workers.
  void retire(std::shared_ptr<const MappedFile> mapped) {
    if (!mapped) return;
    std::lock_guard<std::mutex> lock(retired_mutex_);
    retired_.push_back(std::move(mapped));
  }

  void record_failure(Errc code, const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failed_) {
      failed_ = true;
      error_ = what;
      error_code_ = code;
    }
    ready_.notify_all();
  }

  void compress_one(std::size_t i, Scratch& scratch) {
    MemberInput& m = members_[i];
    ByteView content;
    if (m.file) {
      read_regular_file_exact_nofollow(m.file->path, m.file->size, scratch.input);
      content = ByteView(scratch.input);
    } else {
      content = m.bytes();
    }
    // Here rather than at planning, where a file input's bytes are not read yet.
    if (auto p = format::nested_archive_problem(m.path, content); !p.empty()) fail(Errc::invalid_argument, p);
    format::Entry& e = index_.entries[i];
    e.content_size = content.size;
    e.content_sha256 = sha256(content.data, content.size);
    if (m.file && m.file->checked && *m.file->checked != e.content_sha256) {
      fail(Errc::io, m.file->path + ": changed while kiln pack read it: its bytes are not the ones checked when it was "
                                    "first read; pack again once nothing writes it");
    }
    const bool try_zstd = !kept_raw_unconditionally(e) && !m.derive;  // a derived member is rewritten in place
    std::size_t packed = 0;
    if (try_zstd) {
      if (!scratch.compressor) scratch.compressor = std::make_unique<ZstdCompressor>();
      packed = scratch.compressor->compress(content, options_.level, scratch.frame);
    }
    Stored& out = stored_[i];
    if (try_zstd && compression_pays(content.size, packed)) {
      e.compression = format::Compression::zstd;
      e.stored_sha256 = sha256(scratch.frame.data(), packed);
      // Kept with its zero padding, so that it is written in one call.
      out.owned.assign(static_cast<std::size_t>(format::align_up(packed)), 0);
      std::copy(scratch.frame.data(), scratch.frame.data() + packed, out.owned.begin());
      out.view = ByteView(out.owned.data(), packed);
      m.content = {};
      retire(std::move(m.mapped));
    } else if (m.file) {
      // Stored raw from the worker's buffer, which the next member reuses: a copy, padded.
      e.compression = format::Compression::none;
      e.stored_sha256 = e.content_sha256;
      out.owned.assign(static_cast<std::size_t>(format::align_up(content.size)), 0);
      std::copy(content.data, content.data + content.size, out.owned.begin());
      out.view = ByteView(out.owned.data(), content.size);
    } else {
      // Stored raw: written straight from the input, which stays alive until then.
      e.compression = format::Compression::none;
      e.stored_sha256 = e.content_sha256;
      out.view = content;
    }
    e.stored_size = out.view.size;
    std::uint64_t now = progress_.fetch_add(e.content_size) + e.content_size;
    if (options_.progress) options_.progress(now, total_);
  }

  // Marks member i compressed; assigns offsets to every member it completes the prefix of.
  void finish_compressed(std::size_t i) {
    std::lock_guard<std::mutex> lock(mutex_);
    done_[i] = 1;
    held_ += stored_[i].owned.size();
    bool queued = false;
    while (frontier_ < members_.size() && done_[frontier_]) {
      format::Entry& e = index_.entries[frontier_];
      e.offset = end_offset_;
      end_offset_ = format::align_up(end_offset_ + e.stored_size);
      to_write_.push_back(frontier_++);
      queued = true;
    }
    if (queued || frontier_ == members_.size()) ready_.notify_all();
  }

  // The writer's loop: writes `run`, then what was queued meanwhile, until nothing is queued.
  void write_queued(std::vector<std::size_t> run, Sink& sink) {
    for (;;) {
      std::uint64_t freed = write_run(run, sink);
      std::lock_guard<std::mutex> lock(mutex_);
      held_ -= freed;
      run.assign(to_write_.begin(), to_write_.end());
      to_write_.clear();
      if (run.empty()) writing_ = false;
      ready_.notify_all();
      if (run.empty()) return;
    }
  }

  // Writes members that follow each other in the file (offsets assigned in index order leave
  // no gap between them but their padding) and releases them; returns the heap bytes freed.
  std::uint64_t write_run(const std::vector<std::size_t>& run, Sink& sink) {
    static const std::uint8_t zeros[format::kMemberAlignment] = {};
    std::vector<ByteView> pieces;
    pieces.reserve(run.size() * 2);
    const std::uint64_t start = index_.entries[run.front()].offset;
    std::uint64_t at = start;
    for (std::size_t i : run) {
      const format::Entry& e = index_.entries[i];
      if (e.offset != at) fail(Errc::internal, "member '" + e.path + "' is not where the one before it ends");
      const Stored& s = stored_[i];
      if (!s.owned.empty()) {
        pieces.emplace_back(s.owned.data(), s.owned.size());  // the stored bytes and their padding
        at += s.owned.size();
      } else {
        pieces.push_back(s.view);
        std::uint64_t end = at + s.view.size;
        std::size_t pad = static_cast<std::size_t>(format::align_up(end) - end);
        if (pad > 0) pieces.emplace_back(zeros, pad);
        at = end + pad;
      }
    }
    sink.write_at(start, pieces);
    std::uint64_t freed = 0;
    for (std::size_t i : run) {
      freed += stored_[i].owned.size();
      stored_[i] = Stored{};  // release what was written
      members_[i].content = {};
      retire(std::move(members_[i].mapped));
    }
    return freed;
  }

  std::vector<MemberInput>& members_;
  format::Index& index_;
  const WriteOptions& options_;
  struct Stored {
    std::vector<std::uint8_t> owned;  // the stored bytes and their zero padding, where copied
    ByteView view;                    // the stored bytes: the frame, a copy, or the input itself
  };
  std::vector<Stored> stored_;
  std::uint64_t total_ = 0;
  std::atomic<std::uint64_t> progress_{0};
  // Guarded by mutex_:
  std::vector<char> done_;
  std::size_t next_ = 0;              // the next member to compress
  std::size_t frontier_ = 0;          // the first member not yet compressed: offsets known below it
  std::uint64_t end_offset_ = format::kHeaderSize;  // where the member at the frontier goes
  std::uint64_t held_ = 0;            // bytes of compressed members not yet written
  std::deque<std::size_t> to_write_;  // members whose offset is known, waiting to be written
  bool writing_ = false;              // a worker is writing (write_queued): the queue is its
  bool failed_ = false;
  std::string error_;
  Errc error_code_ = Errc::internal;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::mutex retired_mutex_;  // apart from mutex_: retiring never waits for the scheduling lock
  std::vector<std::shared_ptr<const MappedFile>> retired_;
};

// The code member's entry at `path` in `index` (sorted by path): what a derived member copies.
CodeEntryLookup code_entries_of(const format::Index& index) {
  return [&index](const std::string& path) -> const format::Entry& {
    auto it = std::lower_bound(index.entries.begin(), index.entries.end(), path,
                               [](const format::Entry& e, const std::string& p) { return e.path < p; });
    if (it == index.entries.end() || it->path != path || it->role != format::Role::code) {
      fail(Errc::invalid_argument, "a kernel names '" + path + "', which is not a code member of the archive");
    }
    return *it;
  };
}

// Writes [header][members][index][signatures] to `sink` and returns the digest. A derived
// member is planned at its size, written as planned with the others, then made again from the
// entries as written and written over itself; its digests are the second one's.
Sha256 write_archive(const PackageIdentity& id, std::vector<MemberInput>& members, const std::vector<Signer>& signers,
                     const WriteOptions& options, Sink& sink) {
  format::Index index = plan_index(id, members);
  const CodeEntryLookup entries = code_entries_of(index);
  std::vector<std::pair<std::size_t, decltype(MemberInput::derive)>> derived;
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (!members[i].derive) continue;
    members[i].content = members[i].derive(entries);
    derived.emplace_back(i, members[i].derive);  // kept in the member too: the pipeline stores it raw
  }
  std::uint64_t index_offset = MemberPipeline(members, index, options).run(sink);
  for (const auto& [i, derive] : derived) {
    format::Entry& e = index.entries[i];
    std::vector<std::uint8_t> bytes = derive(entries);
    if (bytes.size() != e.content_size || e.compression != format::Compression::none) {
      fail(Errc::internal, "member '" + e.path + "' was planned at " + std::to_string(e.content_size) + " raw bytes but made " +
                               std::to_string(bytes.size()) + (e.compression != format::Compression::none ? " (and compressed)" : ""));
    }
    e.content_sha256 = e.stored_sha256 = sha256(bytes.data(), bytes.size());
    sink.write_at(e.offset, bytes.data(), bytes.size());
  }

  format::EncodedIndex encoded = format::encode_index(index);
  const std::vector<std::uint8_t>& index_bytes = encoded.bytes;
  if (index_bytes.size() > format::kMaxIndexSize) fail(Errc::limit, "the index would exceed 256 MiB");
  Sha256 digest = sha256(index_bytes.data(), static_cast<std::size_t>(encoded.head_size));  // the head: §3.3
  std::vector<std::uint8_t> sig_block = format::encode_signature_block(sign_all(digest, id, signers));
  format::Header header;
  header.index_offset = index_offset;  // the last member's end rounded up to 64
  header.index_size = index_bytes.size();
  header.index_head_size = encoded.head_size;
  header.signature_block_size = sig_block.size();
  sink.write_at(index_offset, index_bytes.data(), index_bytes.size());
  sink.write_at(index_offset + index_bytes.size(), sig_block.data(), sig_block.size());
  std::vector<std::uint8_t> header_bytes = format::encode_header(header);
  sink.write_at(0, header_bytes.data(), header_bytes.size());  // last: it needs the offsets
  return digest;
}

}  // namespace

std::vector<MemberInput> kernel_table_inputs(const Manifest& manifest) {
  std::vector<MemberInput> out;
  out.reserve(manifest.kernels.size() + 1);
  MemberInput table;
  table.path = kKernelTablePath;
  table.role = format::Role::meta;
  table.content = encode_kernel_table_head(manifest, true);
  out.push_back(std::move(table));
  for (const KernelSpec& k : manifest.kernels) {
    MemberInput record;
    record.path = kernel_record_path(k.name);
    record.role = format::Role::meta;
    record.derive = [kernel = std::make_shared<const KernelSpec>(k)](const CodeEntryLookup& entries) {
      return encode_kernel_record(*kernel, &entries);
    };
    out.push_back(std::move(record));
  }
  return out;
}

format::SignatureRecord make_signature(const Sha256& digest, const std::string& package, std::uint64_t sequence,
                                       const Signer& signer) {
  if (signer.key == nullptr) fail(Errc::invalid_argument, "no signing key given");
  if (auto p = format::signer_problem(signer.name); !p.empty()) fail(Errc::invalid_argument, p);
  format::SignatureRecord rec;
  rec.attributes.archive_digest = digest;
  rec.attributes.package = package;
  rec.attributes.sequence = sequence;
  rec.attributes.key_id = signer.key->public_key().key_id();
  rec.attributes.signer = signer.name;
  rec.attributes.created = signer.created;
  rec.attributes_text = format::encode_attributes(rec.attributes);
  rec.signature = signer.key->sign(reinterpret_cast<const std::uint8_t*>(rec.attributes_text.data()),
                                   rec.attributes_text.size());
  return rec;
}

std::vector<std::uint8_t> build_archive(const PackageIdentity& id, std::vector<MemberInput> members,
                                        const std::vector<Signer>& signers, const WriteOptions& options) {
  MemorySink sink;
  write_archive(id, members, signers, options, sink);
  return std::move(sink.out);
}

Sha256 write_archive_file(const std::string& path, const PackageIdentity& id, std::vector<MemberInput> members,
                          const std::vector<Signer>& signers, const WriteOptions& options) {
  AtomicFileWriter file(path, 0644);
  FileSink sink(file);
  Sha256 digest = write_archive(id, members, signers, options, sink);
  // The fsync is the product's durability promise (a crash after kiln pack returns leaves the
  // whole archive or the old file) and zstd's CLI makes none: it waits for every byte to reach
  // the disk, about the archive's size over the disk's write speed (--timings prints it).
  std::chrono::steady_clock::time_point synced_from{};
  file.commit([&](const char* where) {
    std::string_view w(where);
    if (w == "written, not synced") synced_from = std::chrono::steady_clock::now();
    if (w == "synced, not renamed" && options.stats != nullptr) {
      options.stats->sync_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - synced_from).count();
    }
  });
  return digest;
}

format::SignatureRecord add_signature_to_file(const std::string& path, const Signer& signer, unsigned threads) {
  ReadOptions read_options;  // unauthenticated: the signer is the one deciding to trust it
  std::unique_ptr<ArchiveReader> archive = ArchiveReader::open_file(path, read_options);
  if (archive->sparse()) {
    fail(Errc::invalid_argument, path + " is a sparse archive: sign the complete archive (a sparse copy pulled after "
                                        "that carries the new signature too)");
  }
  archive->verify_all(threads, false, nullptr);
  std::string key_id = signer.key->public_key().key_id();
  for (const auto& rec : archive->signatures()) {
    if (rec.attributes.key_id == key_id) {
      fail(Errc::invalid_argument, path + ": already signed by key " + key_id + " (signer '" + rec.attributes.signer + "')");
    }
  }
  if (archive->signatures().size() >= format::kMaxSignatures) {
    fail(Errc::limit, path + ": already carries the maximum of " + std::to_string(format::kMaxSignatures) + " signatures");
  }
  std::vector<format::SignatureRecord> records = archive->signatures();
  records.push_back(make_signature(archive->digest(), archive->package(), archive->sequence(), signer));
  std::vector<std::uint8_t> block = format::encode_signature_block(records);

  format::Header header = archive->header();
  header.signature_block_size = block.size();
  std::uint64_t signed_end = header.index_offset + header.index_size;
  const std::uint8_t* base = archive->unchecked_file_bytes().data;

  AtomicFileWriter out(path, 0644);
  std::vector<std::uint8_t> header_bytes = format::encode_header(header);
  out.write(header_bytes.data(), header_bytes.size());
  out.write(base + format::kHeaderSize, static_cast<std::size_t>(signed_end - format::kHeaderSize));
  out.write(block.data(), block.size());
  archive.reset();
  out.commit();
  return records.back();
}

}  // namespace kiln
