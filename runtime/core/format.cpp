#include "core/format.hpp"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "core/error.hpp"
#include "core/format_detail.hpp"

namespace kiln::format {

using detail::expect_magic;
using detail::quoted;

const char* role_name(Role r) {
  switch (r) {
    case Role::manifest: return "manifest";
    case Role::code: return "code";
    case Role::source: return "source";
    case Role::ir: return "ir";
    case Role::testdata: return "testdata";
    case Role::meta: return "meta";
  }
  return "?";
}

const char* backend_name(Vendor b) {
  switch (b) {
    case Vendor::none: return "none";
    case Vendor::cuda: return "cuda";
    case Vendor::hip: return "hip";
  }
  return "?";
}

const char* code_kind_name(CodeKind k) {
  switch (k) {
    case CodeKind::none: return "none";
    case CodeKind::cubin: return "cubin";
    case CodeKind::ptx: return "ptx";
    case CodeKind::fatbin: return "fatbin";
    case CodeKind::amdgpu_elf: return "amdgpu-elf";
    case CodeKind::offload_bundle: return "offload-bundle";
  }
  return "?";
}

const char* compression_name(Compression c) { return c == Compression::zstd ? "zstd" : "none"; }

bool parse_role(const std::string& s, Role* out) {
  for (Role r : {Role::manifest, Role::code, Role::source, Role::ir, Role::testdata, Role::meta}) {
    if (s == role_name(r)) {
      *out = r;
      return true;
    }
  }
  return false;
}

bool parse_backend(const std::string& s, Vendor* out) {
  for (Vendor b : {Vendor::cuda, Vendor::hip}) {
    if (s == backend_name(b)) {
      *out = b;
      return true;
    }
  }
  return false;
}

long Index::find(const std::string& path) const {
  std::size_t lo = 0, hi = entries.size();
  while (lo < hi) {
    std::size_t mid = (lo + hi) / 2;
    int c = entries[mid].path.compare(path);
    if (c == 0) return static_cast<long>(mid);
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return -1;
}

std::uint64_t align_up(std::uint64_t v) { return (v + kMemberAlignment - 1) & ~(kMemberAlignment - 1); }

// ---- header ---------------------------------------------------------------------------

std::vector<std::uint8_t> encode_header(const Header& h) {
  ByteWriter w;
  w.bytes(kFileMagic.data(), kFileMagic.size());
  w.u32(kFormatVersion);
  w.u32(h.sparse ? kFlagSparse : 0);
  w.u64(h.index_offset);
  w.u64(h.index_size);
  w.u64(h.signature_block_size);
  w.u64(h.index_head_size);
  for (int i = 0; i < 16; ++i) w.u8(0);
  return std::move(w.buffer());
}

Header decode_header(ByteView bytes) {
  if (bytes.size < kHeaderSize) {
    fail(Errc::malformed, "header: the file has " + std::to_string(bytes.size) +
                              " bytes, fewer than the 64-byte header; not a kiln archive");
  }
  ByteReader r(bytes.sub(0, kHeaderSize), "header");
  expect_magic(r, kFileMagic, "a kiln archive");
  std::uint32_t version = r.u32();
  if (version != kFormatVersion) {
    r.fail_here("format version " + std::to_string(version) + " is not supported (this kiln reads version " +
                std::to_string(kFormatVersion) + (version == 1 ? "; repack version-1 archives with this kiln" : "") + ")");
  }
  std::uint32_t flags = r.u32();
  if ((flags & ~kFlagSparse) != 0) {
    r.fail_here("flags " + std::to_string(flags) + " set bits this kiln does not know (it knows bit 0, sparse)");
  }
  Header h;
  h.sparse = (flags & kFlagSparse) != 0;
  h.index_offset = r.u64();
  h.index_size = r.u64();
  h.signature_block_size = r.u64();
  h.index_head_size = r.u64();
  for (int i = 0; i < 16; ++i) {
    if (r.u8() != 0) r.fail_here("reserved bytes must be zero");
  }
  return h;
}

}  // namespace kiln::format
