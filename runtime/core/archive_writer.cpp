#include "archive_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "compress.hpp"
#include "error.hpp"
#include "file_io.hpp"

namespace kiln {
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

// Where the bytes go: appended in order, and the header patched in place at the end
// (its offsets are known only once every member has been written).
class Sink {
 public:
  virtual ~Sink() = default;
  virtual void append(const std::uint8_t* data, std::size_t size) = 0;
  virtual void patch(std::uint64_t offset, const std::uint8_t* data, std::size_t size) = 0;
};

class MemorySink : public Sink {
 public:
  void append(const std::uint8_t* data, std::size_t size) override { out.insert(out.end(), data, data + size); }
  void patch(std::uint64_t offset, const std::uint8_t* data, std::size_t size) override {
    std::copy(data, data + size, out.begin() + static_cast<long>(offset));
  }
  std::vector<std::uint8_t> out;
};

class FileSink : public Sink {
 public:
  explicit FileSink(AtomicFileWriter& file) : file_(file) {}
  void append(const std::uint8_t* data, std::size_t size) override { file_.write(data, size); }
  void patch(std::uint64_t offset, const std::uint8_t* data, std::size_t size) override { file_.pwrite_at(offset, data, size); }

 private:
  AtomicFileWriter& file_;
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
    if (auto p = format::nested_archive_problem(m.path, m.bytes()); !p.empty()) bad(p);
    bool is_code = m.role == format::Role::code;
    if (is_code != (m.kind != format::CodeKind::none) || is_code != (m.backend != format::Backend::none) ||
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

// Compresses members on `threads` workers while the calling thread writes each one, in
// index order, as soon as it and every member before it are done. Writing overlaps
// compression, and each member's buffers are released once written.
class MemberPipeline {
 public:
  MemberPipeline(std::vector<MemberInput>& members, format::Index& index, const WriteOptions& options)
      : members_(members), index_(index), options_(options), stored_(members.size()), done_(members.size(), false) {
    for (const auto& m : members) total_ += m.bytes().size;
  }

  void run(Sink& sink) {
    unsigned n = std::max(1u, std::min<unsigned>(options_.threads, static_cast<unsigned>(members_.size())));
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < n; ++t) workers.emplace_back([this] { work(); });
    try {
      write_in_order(sink);
    } catch (...) {
      stop_with_error_from_writer();
      for (auto& w : workers) w.join();
      throw;
    }
    for (auto& w : workers) w.join();
  }

 private:
  void work() {
    for (;;) {
      std::size_t i = next_.fetch_add(1);
      if (i >= members_.size() || failed_.load()) return;
      try {
        compress_one(i);
      } catch (const Error& e) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!failed_.exchange(true)) {
          error_ = e.what();
          error_code_ = e.code();
        }
        ready_.notify_all();
        return;
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        done_[i] = true;
      }
      ready_.notify_all();
    }
  }

  void compress_one(std::size_t i) {
    MemberInput& m = members_[i];
    ByteView content = m.bytes();
    format::Entry& e = index_.entries[i];
    e.content_size = content.size;
    e.content_sha256 = sha256(content.data, content.size);
    std::vector<std::uint8_t> packed = zstd_compress(content, options_.level);
    Stored& out = stored_[i];
    if (compression_pays(content.size, packed.size())) {
      e.compression = format::Compression::zstd;
      e.stored_sha256 = sha256(packed.data(), packed.size());
      out.owned = std::move(packed);
      out.view = ByteView(out.owned);
      m.content = {};
      m.mapped.reset();
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

  void write_in_order(Sink& sink) {
    static const std::uint8_t zeros[format::kMemberAlignment] = {};
    std::uint64_t offset = format::kHeaderSize;
    for (std::size_t i = 0; i < members_.size(); ++i) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [&] { return done_[i] || failed_.load(); });
        if (failed_) fail(error_code_, error_);
      }
      index_.entries[i].offset = offset;
      sink.append(stored_[i].view.data, stored_[i].view.size);
      std::uint64_t end = offset + stored_[i].view.size;
      sink.append(zeros, static_cast<std::size_t>(format::align_up(end) - end));
      offset = format::align_up(end);
      stored_[i] = Stored{};  // release what was written
      members_[i].content = {};
      members_[i].mapped.reset();
    }
  }

  void stop_with_error_from_writer() {
    failed_.store(true);
    next_.store(members_.size());
  }

  std::vector<MemberInput>& members_;
  format::Index& index_;
  const WriteOptions& options_;
  struct Stored {
    std::vector<std::uint8_t> owned;  // the zstd frame, when compressed
    ByteView view;                    // what to write: the frame, or the input itself
  };
  std::vector<Stored> stored_;
  std::vector<bool> done_;  // guarded by mutex_
  std::uint64_t total_ = 0;
  std::atomic<std::uint64_t> progress_{0};
  std::atomic<std::size_t> next_{0};
  std::atomic<bool> failed_{false};
  std::mutex mutex_;
  std::condition_variable ready_;
  std::string error_;
  Errc error_code_ = Errc::internal;
};

// Writes [header][members][index][signatures] to `sink` and returns the digest.
Sha256 write_archive(const PackageIdentity& id, std::vector<MemberInput>& members, const std::vector<Signer>& signers,
                     const WriteOptions& options, Sink& sink) {
  format::Index index = plan_index(id, members);
  std::vector<std::uint8_t> placeholder(format::kHeaderSize, 0);
  sink.append(placeholder.data(), placeholder.size());
  MemberPipeline(members, index, options).run(sink);

  format::EncodedIndex encoded = format::encode_index(index);
  const std::vector<std::uint8_t>& index_bytes = encoded.bytes;
  if (index_bytes.size() > format::kMaxIndexSize) fail(Errc::limit, "the index would exceed 256 MiB");
  Sha256 digest = sha256(index_bytes.data(), static_cast<std::size_t>(encoded.head_size));  // the head: §3.3
  std::vector<std::uint8_t> sig_block = format::encode_signature_block(sign_all(digest, id, signers));
  const format::Entry& last = index.entries.back();
  format::Header header;
  header.index_offset = format::align_up(last.offset + last.stored_size);
  header.index_size = index_bytes.size();
  header.index_head_size = encoded.head_size;
  header.signature_block_size = sig_block.size();
  sink.append(index_bytes.data(), index_bytes.size());
  sink.append(sig_block.data(), sig_block.size());
  std::vector<std::uint8_t> header_bytes = format::encode_header(header);
  sink.patch(0, header_bytes.data(), header_bytes.size());
  return digest;
}

}  // namespace

std::vector<MemberInput> kernel_table_inputs(const Manifest& manifest) {
  std::vector<MemberInput> out;
  for (KernelTableMember& t : encode_kernel_table(manifest)) {
    MemberInput m;
    m.path = std::move(t.path);
    m.role = format::Role::meta;
    m.content = std::move(t.content);
    out.push_back(std::move(m));
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
  file.commit();
  return digest;
}

format::SignatureRecord add_signature_to_file(const std::string& path, const Signer& signer, unsigned threads) {
  ReadOptions read_options;  // unauthenticated: the signer is the one deciding to trust it
  std::unique_ptr<Archive> archive = Archive::open_file(path, read_options);
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
