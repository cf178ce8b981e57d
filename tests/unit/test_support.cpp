#include "test_support.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/kernel_table.hpp"
#include "core/sha256.hpp"
#include "core/trust.hpp"

namespace kiln::test {

std::vector<std::uint8_t> bytes_of(const std::string& s) { return std::vector<std::uint8_t>(s.begin(), s.end()); }

Manifest parse_kiln_toml(const std::string& text) { return parse_manifest(text, "kiln.toml"); }

PackageIdentity default_identity() { return PackageIdentity{"demo-pkg", "rev-1", 7}; }

std::string small_manifest(const PackageIdentity& id, const std::string& code_path,
                           const std::vector<std::string>& extra_files) {
  std::ostringstream m;
  m << "[package]\nname = \"" << id.package << "\"\nkernel_revision = \"" << id.kernel_revision
    << "\"\nsequence = " << id.sequence << "\n\n"
    << "[[kernel]]\nname = \"add\"\nentry = \"add_f32\"\nbackend = \"cuda\"\n"
    << "params = [{ name = \"x\", type = \"ptr\", dtype = \"f32\" }, { name = \"n\", type = \"i32\" }]\n"
    << "sources = [\"src/add.cu\"]\n"
    << "code = [{ arch = \"compute_90\", file = \"" << code_path << "\" }]\n\n"
    << "[files]\nextra = [\"tests/vector.bin\"";
  for (const std::string& f : extra_files) m << ", \"" << f << "\"";
  m << "]\n";
  return m.str();
}

std::vector<std::uint8_t> synthetic_cubin(unsigned sm, const std::string& noted_arch, std::size_t filler,
                                          std::size_t table_after) {
  auto put = [](std::vector<std::uint8_t>& b, std::size_t at, std::uint64_t v, int n) {
    for (int k = 0; k < n; ++k) b[at + k] = static_cast<std::uint8_t>(v >> (8 * k));
  };
  const std::string names = std::string("\0.shstrtab\0.note.nv.tkinfo\0", 27);
  const std::string note = "-arch " + noted_arch + " -m64 --generate-line-info";
  std::vector<std::uint8_t> b(64);
  const std::size_t names_at = b.size();
  b.insert(b.end(), names.begin(), names.end());
  const std::size_t note_at = b.size();
  b.insert(b.end(), note.begin(), note.end());
  b.resize(b.size() + filler, 0x5a);
  const std::size_t table_at = (b.size() + 63) / 64 * 64;
  b.resize(table_at + 3 * 64, 0);
  b.resize(b.size() + table_after, 0xa5);
  std::memcpy(b.data(), "\x7f" "ELF", 4);
  b[4] = 2;       // 64-bit
  b[5] = 1;       // little-endian
  b[6] = 1;
  b[7] = 65;      // ELFOSABI_CUDA
  b[8] = 8;       // ELF ABI v8: the SM in bits 8-15
  put(b, 16, 2, 2);    // ET_EXEC
  put(b, 18, 190, 2);  // EM_CUDA
  put(b, 40, table_at, 8);
  put(b, 48, static_cast<std::uint64_t>(sm) << 8, 4);
  put(b, 58, 64, 2);
  put(b, 60, 3, 2);  // null, .shstrtab, .note.nv.tkinfo
  put(b, 62, 1, 2);
  auto section = [&](int i, std::uint32_t name, std::uint32_t type, std::size_t offset, std::size_t size) {
    const std::size_t h = table_at + 64 * static_cast<std::size_t>(i);
    put(b, h, name, 4);
    put(b, h + 4, type, 4);
    put(b, h + 24, offset, 8);
    put(b, h + 32, size, 8);
  };
  section(1, 1, 3, names_at, names.size());  // SHT_STRTAB
  section(2, 11, 7, note_at, note.size());   // SHT_NOTE
  return b;
}

std::string small_ptx(const std::string& target) {
  return "//\n// Generated for a kiln test\n//\n\n.version 8.0\n.target " + target +
         "\n.address_size 64\n\n.visible .entry add_f32(\n\t.param .u64 add_f32_param_0,\n"
         "\t.param .u32 add_f32_param_1\n)\n{\n\tret;\n}\n";
}

std::vector<MemberInput> small_members(const PackageIdentity& id) {
  std::vector<MemberInput> members;
  MemberInput manifest;
  manifest.path = "kiln.toml";
  manifest.role = format::Role::manifest;
  manifest.content = bytes_of(small_manifest(id));
  members.push_back(manifest);

  for (MemberInput& table : kernel_table_inputs(parse_manifest(small_manifest(id), "kiln.toml"))) {
    members.push_back(std::move(table));
  }

  MemberInput code;
  code.path = "k.ptx";
  code.role = format::Role::code;
  code.backend = format::Vendor::cuda;
  code.kind = format::CodeKind::ptx;
  code.arch = "compute_90";
  code.content = bytes_of(small_ptx());
  members.push_back(code);

  MemberInput source;
  source.path = "src/add.cu";
  source.role = format::Role::source;
  source.content = bytes_of("extern \"C\" __global__ void add_f32(float* x, int n) {}\n");
  members.push_back(source);

  // Incompressible bytes, so the archive has a raw member as well as zstd ones.
  MemberInput blob;
  blob.path = "tests/vector.bin";
  blob.role = format::Role::meta;  // [files] extra
  std::uint32_t state = 12345;
  for (int i = 0; i < 300; ++i) {
    state = state * 1664525u + 1013904223u;
    blob.content.push_back(static_cast<std::uint8_t>(state >> 24));
  }
  members.push_back(blob);
  return members;
}

std::vector<std::uint8_t> build_signed(const std::vector<const PrivateKey*>& keys, const PackageIdentity& id, int threads) {
  std::vector<Signer> signers;
  for (std::size_t i = 0; i < keys.size(); ++i) signers.push_back(Signer{keys[i], "signer-" + std::to_string(i), 1700000000});
  WriteOptions options;
  options.threads = static_cast<unsigned>(threads);
  return build_archive(id, small_members(id), signers, options);
}

std::vector<MemberInput> small_members_with(const PackageIdentity& id, std::vector<MemberInput> extra) {
  std::vector<std::string> names;
  for (MemberInput& m : extra) {
    m.role = format::Role::meta;
    names.push_back(m.path);
  }
  const std::string manifest = small_manifest(id, "k.ptx", names);
  std::vector<MemberInput> members;
  for (MemberInput& m : small_members(id)) {
    if (m.path == "kiln.toml") m.content = bytes_of(manifest);
    if (m.path.rfind("kiln/", 0) != 0) members.push_back(std::move(m));  // the table is rebuilt below
  }
  for (MemberInput& table : kernel_table_inputs(parse_manifest(manifest, "kiln.toml"))) members.push_back(std::move(table));
  for (MemberInput& m : extra) members.push_back(std::move(m));
  return members;
}

TrustSet trust_of(const std::vector<const PrivateKey*>& keys) {
  TrustSet t;
  for (const PrivateKey* k : keys) t.add(k->public_key(), "test key " + k->public_key().key_id());
  return t;
}

std::unique_ptr<ArchiveReader> open_and_verify(const std::vector<std::uint8_t>& bytes, const TrustSet& trust, unsigned threshold) {
  ReadOptions options;
  options.policy = TrustPolicy{&trust, threshold};
  std::unique_ptr<ArchiveReader> a = ArchiveReader::open_memory(bytes.data(), bytes.size(), options);
  a->verify_all(1, true, nullptr);
  return a;
}

namespace {

// Makes the derived members again from the entries, stored raw, until their sizes (and so the
// offsets after them) no longer change.
void derive_members(RawArchive& raw) {
  // A path the index lacks (a hostile kiln.toml naming a missing file) gets a made-up code entry,
  // as a signer writing such a record by hand would have to give one.
  std::map<std::string, format::Entry> made_up;
  const CodeEntryLookup lookup = [&raw, &made_up](const std::string& path) -> const format::Entry& {
    for (const format::Entry& e : raw.index.entries) {
      if (e.path == path) return e;
    }
    format::Entry& e = made_up[path];
    e.path = path;
    e.role = format::Role::code;
    e.backend = format::Vendor::cuda;
    e.kind = format::CodeKind::ptx;
    e.arch = "compute_90";
    e.offset = format::kHeaderSize;
    return e;
  };
  for (int pass = 0; pass < 3; ++pass) {
    std::uint64_t offset = format::kHeaderSize;
    for (std::size_t i = 0; i < raw.index.entries.size(); ++i) {
      raw.index.entries[i].offset = offset;
      offset = format::align_up(offset + raw.stored[i].size());
    }
    bool resized = false;
    for (std::size_t i = 0; i < raw.index.entries.size(); ++i) {
      format::Entry& e = raw.index.entries[i];
      auto d = raw.derived.find(e.path);
      if (d == raw.derived.end()) continue;
      std::vector<std::uint8_t> bytes = d->second(lookup);
      resized = resized || bytes.size() != raw.stored[i].size();
      e.compression = format::Compression::none;
      e.stored_size = e.content_size = bytes.size();
      e.stored_sha256 = e.content_sha256 = sha256(bytes.data(), bytes.size());
      raw.stored[i] = std::move(bytes);
    }
    if (!resized) return;
  }
}

}  // namespace

RawArchive raw_from_members(const PackageIdentity& id, std::vector<MemberInput> members) {
  std::sort(members.begin(), members.end(), [](const MemberInput& a, const MemberInput& b) { return a.path < b.path; });
  RawArchive raw;
  raw.index.package = id.package;
  raw.index.kernel_revision = id.kernel_revision;
  raw.index.sequence = id.sequence;
  for (const MemberInput& m : members) {
    format::Entry e;
    e.path = m.path;
    e.role = m.role;
    e.backend = m.backend;
    e.kind = m.kind;
    e.arch = m.arch;
    e.compression = format::Compression::none;
    e.stored_size = e.content_size = m.content.size();
    e.stored_sha256 = e.content_sha256 = sha256(m.content.data(), m.content.size());
    raw.index.entries.push_back(e);
    raw.stored.push_back(m.content);
    if (m.derive) raw.derived[m.path] = m.derive;
  }
  derive_members(raw);
  return raw;
}

namespace {

// The encoded index with its KILNIDX4 head's copy of the kernel table's entry changed by `forge`,
// or dropped (magic KILNIDX3) when `forge` is empty. Pages do not move: their positions follow
// from the head's size and the spans (FORMAT.md §3), and the head's size goes into the header.
format::EncodedIndex rewrite_head_table_entry(const format::EncodedIndex& encoded, std::uint64_t index_offset,
                                              const format::Index& index,
                                              const std::function<void(format::Entry&, const format::Index&)>& forge) {
  const ByteView head(encoded.bytes.data(), encoded.head_size);
  const format::IndexHead decoded = format::decode_index_head(head, encoded.bytes.size(), index_offset);
  if (!decoded.kernel_table) throw std::runtime_error("the head carries no kernel table entry to rewrite");
  // Where the copy starts and ends: after magic, counts, identity and height; before ref_count.
  const std::size_t at = 8 + 4 + 8 + 2 + decoded.package.size() + 2 + decoded.kernel_revision.size() + 1;
  ByteWriter original;
  format::encode_entry(original, *decoded.kernel_table);
  const std::size_t end = at + original.buffer().size();
  std::vector<std::uint8_t> copy;
  if (forge) {
    format::Entry forged = *decoded.kernel_table;
    forge(forged, index);
    ByteWriter w;
    format::encode_entry(w, forged);
    copy = w.buffer();
  }
  format::EncodedIndex out;
  out.bytes.assign(encoded.bytes.begin(), encoded.bytes.begin() + static_cast<long>(at));
  if (!forge) std::copy(format::kIndexTreeMagic.begin(), format::kIndexTreeMagic.end(), out.bytes.begin());
  out.bytes.insert(out.bytes.end(), copy.begin(), copy.end());
  out.bytes.insert(out.bytes.end(), encoded.bytes.begin() + static_cast<long>(end), encoded.bytes.end());
  out.head_size = encoded.head_size - (end - at) + copy.size();
  return out;
}

}  // namespace

std::vector<std::uint8_t> assemble(RawArchive raw) {
  derive_members(raw);
  std::vector<std::uint8_t> body;
  std::uint64_t offset = format::kHeaderSize;
  for (std::size_t i = 0; i < raw.index.entries.size(); ++i) {
    raw.index.entries[i].offset = offset;
    body.insert(body.end(), raw.stored[i].begin(), raw.stored[i].end());
    std::uint64_t end = offset + raw.stored[i].size();
    body.resize(body.size() + (format::align_up(end) - end), 0);
    offset = format::align_up(end);
  }
  format::EncodedIndex encoded = format::encode_index(raw.index);
  if (raw.forge_head_table_entry || raw.head_without_table_entry) {
    encoded = rewrite_head_table_entry(encoded, offset, raw.index,
                                       raw.head_without_table_entry ? nullptr : raw.forge_head_table_entry);
  }
  const std::vector<std::uint8_t>& index = encoded.bytes;
  Sha256 digest = sha256(index.data(), static_cast<std::size_t>(encoded.head_size));
  std::vector<format::SignatureRecord> records;
  for (const Signer& s : raw.signers) records.push_back(make_signature(digest, raw.index.package, raw.index.sequence, s));
  records.insert(records.end(), raw.extra_records.begin(), raw.extra_records.end());
  std::vector<std::uint8_t> sigs = format::encode_signature_block(records);
  format::Header h{offset, index.size(), sigs.size(), encoded.head_size};
  std::vector<std::uint8_t> out = format::encode_header(h);
  out.insert(out.end(), body.begin(), body.end());
  out.insert(out.end(), index.begin(), index.end());
  out.insert(out.end(), sigs.begin(), sigs.end());
  return out;
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  ::unlink(path.c_str());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out.flush()) throw std::runtime_error("cannot write " + path);
}

}  // namespace kiln::test
