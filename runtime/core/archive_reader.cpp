#include "archive_reader.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <thread>

#include "compress.hpp"
#include "error.hpp"
#include "file_io.hpp"

namespace kiln {

Archive::~Archive() = default;

std::unique_ptr<Archive> Archive::open_file(const std::string& path, const ReadOptions& options) {
  std::unique_ptr<Archive> a(new Archive);
  a->name_ = path;
  a->mapping_ = std::make_unique<MappedFile>(path);
  a->bytes_ = a->mapping_->bytes();
  a->parse(options);
  return a;
}

std::unique_ptr<Archive> Archive::open_memory(const std::uint8_t* data, std::size_t size, const ReadOptions& options,
                                              const std::string& name) {
  std::unique_ptr<Archive> a(new Archive);
  a->name_ = name;
  a->bytes_ = ByteView(data, size);
  a->parse(options);
  return a;
}

std::string Archive::member_label(std::size_t i) const { return name_ + ": member '" + index_.entries[i].path + "'"; }

void Archive::parse(const ReadOptions& options) {
  max_member_size_ = options.max_member_size;
  auto refuse = [&](const std::string& why) { fail(Errc::malformed, name_ + ": " + why); };

  try {
    header_ = format::decode_header(bytes_);
  } catch (const Error& e) {
    refuse(e.what());
  }
  // The three regions must tile the file exactly: [header][members][index][signatures].
  const std::uint64_t size = bytes_.size;
  if (header_.index_size == 0 || header_.index_size > format::kMaxIndexSize) {
    refuse("header: index size " + std::to_string(header_.index_size) + " is outside 1.." +
           std::to_string(format::kMaxIndexSize));
  }
  if (header_.signature_block_size > format::kMaxSignatureBlockSize) {
    refuse("header: signature block size " + std::to_string(header_.signature_block_size) + " is over 1 MiB");
  }
  if (header_.index_offset < format::kHeaderSize || header_.index_offset % format::kMemberAlignment != 0 ||
      header_.index_offset > size || header_.index_size > size - header_.index_offset ||
      header_.signature_block_size != size - header_.index_offset - header_.index_size) {
    refuse("header: index at " + std::to_string(header_.index_offset) + " (+" + std::to_string(header_.index_size) +
           ") and signature block of " + std::to_string(header_.signature_block_size) + " bytes do not tile a file of " +
           std::to_string(size) + " bytes (truncated or extended?)");
  }

  ByteView index_bytes = bytes_.sub(header_.index_offset, header_.index_size);
  digest_ = sha256(index_bytes.data, index_bytes.size);

  try {
    signatures_ = format::decode_signature_block(bytes_.sub(header_.index_offset + header_.index_size, header_.signature_block_size));
  } catch (const Error& e) {
    refuse(e.what());
  }

  if (options.policy.trust != nullptr) {
    trust_report_ = evaluate_signatures(signatures_, digest_, options.policy);
    if (!trust_report_.satisfied) {
      fail(Errc::signature, name_ + ": signature check failed for " + digest_string(digest_) + ": " + trust_report_.failure);
    }
    authenticated_ = true;
  }

  try {
    index_ = format::decode_index(index_bytes);
  } catch (const Error& e) {
    refuse(e.what());
  }
  const format::Entry& last = index_.entries.back();
  if (format::align_up(last.offset + last.stored_size) != header_.index_offset) {
    refuse("the index starts at " + std::to_string(header_.index_offset) + " but its members end at " +
           std::to_string(last.offset + last.stored_size));
  }
  verified_.reset(new std::atomic<bool>[index_.entries.size()]);
  for (std::size_t i = 0; i < index_.entries.size(); ++i) verified_[i].store(false, std::memory_order_relaxed);

  // A signature binds the package and sequence as well as the digest, so that it cannot
  // be presented as approval of another release of the same bytes' package.
  for (const format::SignatureRecord& rec : signatures_) {
    if (rec.attributes.package != index_.package || rec.attributes.sequence != index_.sequence) {
      fail(Errc::signature, name_ + ": a signature by key " + rec.attributes.key_id + " names package '" +
                                rec.attributes.package + "' sequence " + std::to_string(rec.attributes.sequence) +
                                " but the archive is '" + index_.package + "' sequence " + std::to_string(index_.sequence));
    }
  }

  // The kernel table is what the runtime reads: checked, decoded, and bound to the index.
  long table = index_.find(kKernelTablePath);
  if (table < 0 || index_.entries[static_cast<std::size_t>(table)].role != format::Role::meta) {
    refuse(std::string("index: no '") + kKernelTablePath + "' member with role meta");
  }
  kernel_table_ = KernelTable::decode(read_member(static_cast<std::size_t>(table)), name_ + ": " + kKernelTablePath);
  if (kernel_table_.package() != index_.package || kernel_table_.kernel_revision() != index_.kernel_revision ||
      kernel_table_.sequence() != index_.sequence) {
    fail(Errc::integrity, name_ + ": the index says package '" + index_.package + "' revision '" + index_.kernel_revision +
                              "' sequence " + std::to_string(index_.sequence) + " but " + kKernelTablePath + " says '" +
                              kernel_table_.package() + "' '" + kernel_table_.kernel_revision() + "' " +
                              std::to_string(kernel_table_.sequence()));
  }
}

const Manifest& Archive::manifest() const {
  std::call_once(manifest_once_, [this] {
    std::size_t position = static_cast<std::size_t>(index_.find(format::kManifestPath));
    std::vector<std::uint8_t> bytes = read_member(position);
    Manifest m = parse_manifest(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                                name_ + ":kiln.toml");
    if (m.package != index_.package || m.kernel_revision != index_.kernel_revision || m.sequence != index_.sequence) {
      fail(Errc::integrity, name_ + ": the index says package '" + index_.package + "' revision '" +
                                index_.kernel_revision + "' sequence " + std::to_string(index_.sequence) +
                                " but kiln.toml says '" + m.package + "' '" + m.kernel_revision + "' " +
                                std::to_string(m.sequence));
    }
    // The packer derives the table from kiln.toml; a signer who shipped two descriptions
    // that disagree gets the archive refused rather than one of them believed.
    if (encode_kernel_table(m) != kernel_table_.bytes()) {
      fail(Errc::integrity, name_ + ": kiln.toml and " + kKernelTablePath +
                                " describe different kernels (the table was not derived from this manifest)");
    }
    manifest_ = std::move(m);
  });
  return manifest_;
}

ByteView Archive::unchecked_stored_bytes(std::size_t i) const {
  const format::Entry& e = index_.entries.at(i);
  return bytes_.sub(e.offset, e.stored_size);
}

void Archive::verify_member(std::size_t i) const {
  if (verified_[i].load(std::memory_order_acquire)) return;
  const format::Entry& e = index_.entries.at(i);
  ByteView stored = unchecked_stored_bytes(i);
  Sha256 got = sha256(stored.data, stored.size);
  if (got != e.stored_sha256) {
    fail(Errc::integrity, member_label(i) + ": stored bytes do not match the index (expected sha256:" +
                              sha256_hex(e.stored_sha256) + ", found sha256:" + sha256_hex(got) + ")");
  }
  verified_[i].store(true, std::memory_order_release);
}

std::vector<std::uint8_t> Archive::read_member(std::size_t i) const {
  const format::Entry& e = index_.entries.at(i);
  if (e.content_size > max_member_size_) {
    fail(Errc::limit, member_label(i) + ": declares " + std::to_string(e.content_size) +
                          " bytes of content, over the reader's limit of " + std::to_string(max_member_size_));
  }
  ByteView mapped = unchecked_stored_bytes(i);
  std::vector<std::uint8_t> stored(mapped.data, mapped.data + mapped.size);
  Sha256 got = sha256(stored.data(), stored.size());
  if (got != e.stored_sha256) {
    fail(Errc::integrity, member_label(i) + ": stored bytes do not match the index (expected sha256:" +
                              sha256_hex(e.stored_sha256) + ", found sha256:" + sha256_hex(got) + ")");
  }
  verified_[i].store(true, std::memory_order_release);
  std::vector<std::uint8_t> content;
  if (e.compression == format::Compression::none) {
    content = std::move(stored);
  } else {
    content = zstd_decompress_exact(ByteView(stored), e.content_size, member_label(i));
    Sha256 content_hash = sha256(content.data(), content.size());
    if (content_hash != e.content_sha256) {
      fail(Errc::integrity, member_label(i) + ": decompressed content does not match the index (expected sha256:" +
                                sha256_hex(e.content_sha256) + ", found sha256:" + sha256_hex(content_hash) + ")");
    }
  }
  if (auto p = format::nested_archive_problem(e.path, ByteView(content)); !p.empty()) fail(Errc::malformed, name_ + ": " + p);
  return content;
}

std::vector<std::uint8_t> Archive::read_member(const std::string& path) const {
  long i = index_.find(path);
  if (i < 0) fail(Errc::invalid_argument, name_ + ": no member named '" + path + "'");
  return read_member(static_cast<std::size_t>(i));
}

void Archive::verify_all(unsigned threads, bool deep, const ProgressFn& progress) const {
  manifest();  // parses kiln.toml and checks it against the index and the kernel table
  const auto& entries = index_.entries;
  // Padding between members is covered by no digest, so it must be zero to leave no byte
  // of the file free for an attacker to change unnoticed.
  for (std::size_t i = 0; i < entries.size(); ++i) {
    std::uint64_t end = entries[i].offset + entries[i].stored_size;
    std::uint64_t next = i + 1 < entries.size() ? entries[i + 1].offset : header_.index_offset;
    for (std::uint64_t p = end; p < next; ++p) {
      if (bytes_.data[p] != 0) {
        fail(Errc::integrity, member_label(i) + ": padding byte at offset " + std::to_string(p) + " is not zero");
      }
    }
  }

  std::uint64_t total = 0;
  for (const auto& e : entries) total += e.stored_size;
  std::atomic<std::uint64_t> done{0};
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::string first_error;
  Errc first_code = Errc::internal;
  std::mutex error_mutex;

  // Largest members first, so that one big member does not start last and leave the
  // other threads idle; ties keep index order so errors are reported deterministically.
  std::vector<std::size_t> order(entries.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return entries[a].stored_size > entries[b].stored_size; });

  auto worker = [&] {
    for (;;) {
      std::size_t k = next.fetch_add(1);
      if (k >= order.size() || failed.load()) return;
      std::size_t i = order[k];
      try {
        if (deep) read_member(i);
        else verify_member(i);
      } catch (const Error& e) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!failed.exchange(true)) {
          first_error = e.what();
          first_code = e.code();
        }
        return;
      }
      std::uint64_t now = done.fetch_add(entries[i].stored_size) + entries[i].stored_size;
      if (progress) progress(now, total);
    }
  };
  unsigned n = std::max(1u, std::min<unsigned>(threads, static_cast<unsigned>(entries.size())));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < n; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (failed) fail(first_code, first_error);
}

}  // namespace kiln
