#include "archive_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "compress.hpp"
#include "error.hpp"
#include "file_io.hpp"

namespace kiln {
namespace {

struct Prepared {
  format::Index index;
  std::vector<std::vector<std::uint8_t>> stored;  // per entry, in index order
};

// A member is kept raw when zstd saves less than 1/32 of it: cubins full of already
// dense machine code often do not pay for the decompression at load time.
bool compression_pays(std::size_t content, std::size_t compressed) { return compressed < content - content / 32; }

void compress_members(std::vector<MemberInput>& members, Prepared& out, const WriteOptions& options) {
  std::uint64_t total = 0;
  for (const auto& m : members) total += m.content.size();
  std::atomic<std::uint64_t> done{0};
  std::atomic<std::size_t> next{0};
  std::mutex error_mutex;
  std::string error;
  Errc error_code = Errc::internal;

  auto worker = [&] {
    for (;;) {
      std::size_t i = next.fetch_add(1);
      if (i >= members.size()) return;
      try {
        MemberInput& m = members[i];
        format::Entry& e = out.index.entries[i];
        e.content_size = m.content.size();
        e.content_sha256 = sha256(m.content.data(), m.content.size());
        std::vector<std::uint8_t> packed = zstd_compress(ByteView(m.content), options.level);
        if (compression_pays(m.content.size(), packed.size())) {
          e.compression = format::Compression::zstd;
          e.stored_sha256 = sha256(packed.data(), packed.size());
          out.stored[i] = std::move(packed);
          std::vector<std::uint8_t>().swap(m.content);
        } else {
          e.compression = format::Compression::none;
          e.stored_sha256 = e.content_sha256;
          out.stored[i] = std::move(m.content);
        }
        e.stored_size = out.stored[i].size();
        std::uint64_t now = done.fetch_add(e.content_size) + e.content_size;
        if (options.progress) options.progress(now, total);
      } catch (const Error& e) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (error.empty()) {
          error = e.what();
          error_code = e.code();
        }
      }
    }
  };
  unsigned n = std::max(1u, std::min<unsigned>(options.threads, static_cast<unsigned>(members.size())));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < n; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (!error.empty()) fail(error_code, error);
}

Prepared prepare(const PackageIdentity& id, std::vector<MemberInput>& members, const WriteOptions& options) {
  auto bad = [](const std::string& why) { fail(Errc::invalid_argument, why); };
  if (auto p = format::package_name_problem(id.package); !p.empty()) bad(p);
  if (auto p = format::revision_problem(id.kernel_revision); !p.empty()) bad(p);
  if (members.size() > format::kMaxEntries) bad("too many members (" + std::to_string(members.size()) + ")");
  std::sort(members.begin(), members.end(), [](const MemberInput& a, const MemberInput& b) { return a.path < b.path; });

  Prepared out;
  out.index.package = id.package;
  out.index.kernel_revision = id.kernel_revision;
  out.index.sequence = id.sequence;
  out.index.entries.resize(members.size());
  out.stored.resize(members.size());
  bool has_manifest = false;
  for (std::size_t i = 0; i < members.size(); ++i) {
    const MemberInput& m = members[i];
    if (auto p = format::member_path_problem(m.path); !p.empty()) bad("member: " + p);
    if (i > 0 && members[i - 1].path == m.path) bad("member '" + m.path + "' is given twice");
    if (auto p = format::arch_tags_problem(m.arch); !p.empty()) bad("member '" + m.path + "': " + p);
    bool is_code = m.role == format::Role::code;
    if (is_code != (m.kind != format::CodeKind::none) || is_code != (m.backend != format::Backend::none) ||
        is_code == m.arch.empty()) {
      bad("member '" + m.path + "': backend, kind and arch are set exactly for code members");
    }
    if ((m.role == format::Role::manifest) != (m.path == format::kManifestPath)) {
      bad("member '" + m.path + "': exactly the member 'kiln.toml' has role manifest");
    }
    has_manifest = has_manifest || m.role == format::Role::manifest;
    format::Entry& e = out.index.entries[i];
    e.path = m.path;
    e.role = m.role;
    e.backend = m.backend;
    e.kind = m.kind;
    e.arch = m.arch;
  }
  if (!has_manifest) bad("an archive needs its 'kiln.toml' member");

  compress_members(members, out, options);
  std::uint64_t offset = format::kHeaderSize;
  for (format::Entry& e : out.index.entries) {
    e.offset = offset;
    offset = format::align_up(offset + e.stored_size);
  }
  return out;
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

// Writes [header][members][index][signatures] through `sink(offset, bytes, size)`.
template <typename Sink>
Sha256 emit(const PackageIdentity& id, Prepared& prepared, const std::vector<Signer>& signers, Sink&& sink) {
  std::vector<std::uint8_t> index_bytes = format::encode_index(prepared.index);
  if (index_bytes.size() > format::kMaxIndexSize) fail(Errc::limit, "the index would exceed 256 MiB");
  Sha256 digest = sha256(index_bytes.data(), index_bytes.size());
  std::vector<std::uint8_t> sig_block = format::encode_signature_block(sign_all(digest, id, signers));

  format::Header header;
  const format::Entry& last = prepared.index.entries.back();
  header.index_offset = format::align_up(last.offset + last.stored_size);
  header.index_size = index_bytes.size();
  header.signature_block_size = sig_block.size();
  std::vector<std::uint8_t> header_bytes = format::encode_header(header);

  static const std::uint8_t zeros[format::kMemberAlignment] = {};
  std::uint64_t pos = 0;
  auto put = [&](const std::uint8_t* p, std::size_t n) {
    sink(p, n);
    pos += n;
  };
  put(header_bytes.data(), header_bytes.size());
  for (std::size_t i = 0; i < prepared.index.entries.size(); ++i) {
    put(prepared.stored[i].data(), prepared.stored[i].size());
    put(zeros, static_cast<std::size_t>(format::align_up(pos) - pos));
    std::vector<std::uint8_t>().swap(prepared.stored[i]);  // release as we go
  }
  put(index_bytes.data(), index_bytes.size());
  put(sig_block.data(), sig_block.size());
  return digest;
}

}  // namespace

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
  Prepared prepared = prepare(id, members, options);
  std::vector<std::uint8_t> out;
  emit(id, prepared, signers, [&](const std::uint8_t* p, std::size_t n) { out.insert(out.end(), p, p + n); });
  return out;
}

Sha256 write_archive_file(const std::string& path, const PackageIdentity& id, std::vector<MemberInput> members,
                          const std::vector<Signer>& signers, const WriteOptions& options) {
  Prepared prepared = prepare(id, members, options);
  AtomicFileWriter file(path, 0644);
  Sha256 digest = emit(id, prepared, signers, [&](const std::uint8_t* p, std::size_t n) { file.write(p, n); });
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
  records.push_back(make_signature(archive->digest(), archive->index().package, archive->index().sequence, signer));
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
