#include "core/archive_semantics.hpp"

#include <algorithm>
#include <map>
#include <optional>

#include "core/archive_reader.hpp"
#include "core/compress.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"

namespace kiln {
namespace {

// A prefix of a text member, cut after its last whole line unless it is the whole member: a
// directive cut at the prefix's end ("sm_10" of "sm_100a") must not be read as another one.
std::vector<std::uint8_t> complete_lines(std::vector<std::uint8_t> prefix, std::uint64_t content_size) {
  if (prefix.size() >= content_size) return prefix;
  auto last = std::find(prefix.rbegin(), prefix.rend(), std::uint8_t{'\n'});
  prefix.resize(static_cast<std::size_t>(prefix.rend() - last));
  return prefix;
}

// What a full verification holds of a code member to tell it (verify_member_in_place); the rest
// is hashed where it lies. A cubin's header, section names and ptxas note lie in its first bytes
// and its section table in its last ones (nvcc's and Triton's cubins: within 2 KiB of either end
// for a kernel or a few; a table of more than about 60 sections is read whole, as before). A
// compressed PTX member's first block, which kiln's writer makes of its first 4 KiB of content,
// lies in its frame's first bytes (at most 4 KiB and the block's and frame's headers).
constexpr std::size_t kHeldElfHead = 4096;
constexpr std::size_t kHeldElfTail = 4096;
constexpr std::size_t kHeldFrameHead = 8192;

// A compressed PTX member's first lines, decoded from the held first bytes of its frame (checked
// against the index with it): nothing where those bytes do not hold them, where the directives
// are not in the first block, or where the first block is the whole content (whose digest a
// whole read checks); the caller then reads the member as a whole.
std::optional<std::vector<std::uint8_t>> held_ptx_prefix(const ArchiveReader& archive, const format::Entry& e,
                                                         const HeldBytes& held) {
  // A member of no more than the first block is read whole, its content digest checked, as before.
  if (e.content_size <= kZstdFirstBlock) return std::nullopt;
  const std::string label = archive.name() + ": member '" + e.path + "'";  // as the reader names it
  std::vector<std::uint8_t> prefix = zstd_decompress_prefix(held.head(), e.content_size, kZstdFirstBlock, label);
  if (prefix.size() < std::min<std::uint64_t>(kZstdFirstBlock, e.content_size)) return std::nullopt;
  if (auto p = format::nested_archive_problem(e.path, ByteView(prefix)); !p.empty()) fail(Errc::malformed, archive.name() + ": " + p);
  prefix = complete_lines(std::move(prefix), e.content_size);
  if (prefix.size() < e.content_size && (!has_ptx_directives(ByteView(prefix)) || has_binary_code_magic(ByteView(prefix)))) {
    return std::nullopt;
  }
  return prefix;
}

std::string join_targets(const std::vector<std::string>& targets) {
  std::string out;
  for (const std::string& t : targets) out += (out.empty() ? "" : ",") + t;
  return out;
}

bool backend_serves(const std::string& kernel_backend, format::Vendor b) {
  if (kernel_backend == "any") return b == format::Vendor::cuda || b == format::Vendor::hip;
  return kernel_backend == format::backend_name(b);
}

// What kiln.toml says each member is: the role it gives the file, and who named it (for messages).
struct Expected {
  format::Role role;
  std::string named_by;
};

void expect(std::map<std::string, Expected>& out, const FileRef& f, format::Role role, const std::string& named_by) {
  auto emplaced = out.emplace(f.path, Expected{role, named_by});
  Expected& earlier = emplaced.first->second;
  if (emplaced.second || earlier.role == role) return;
  // PTX is IR and code at once: named both ways, in either order, it is stored as code.
  bool code_and_ir = (earlier.role == format::Role::code && role == format::Role::ir) ||
                     (earlier.role == format::Role::ir && role == format::Role::code);
  if (code_and_ir) {
    if (role == format::Role::code) earlier = Expected{format::Role::code, named_by};
    return;
  }
  fail(Errc::integrity, "kiln.toml names '" + f.path + "' as " + format::role_name(role) + " (" + named_by + ") and as " +
                            format::role_name(earlier.role) + " (" + earlier.named_by + ")");
}

std::map<std::string, Expected> expected_members(const Manifest& m) {
  std::map<std::string, Expected> out;
  for (const KernelSpec& k : m.kernels) {
    const std::string by = "kernel '" + k.name + "'";
    for (const FileRef& f : k.sources) expect(out, f, format::Role::source, by);
    for (const FileRef& f : k.ir) expect(out, f, format::Role::ir, by);
    for (const CodeObjectRef& c : k.code) expect(out, c.file, format::Role::code, by);
    for (const VariantSpec& v : k.variants) {
      for (const CodeObjectRef& c : v.code) expect(out, c.file, format::Role::code, by + " variant '" + v.name + "'");
    }
    for (const TestSpec& t : k.tests) {
      for (const auto* list : {&t.inputs, &t.outputs}) {
        for (const auto& named : *list) expect(out, named.second, format::Role::testdata, by + " test vector");
      }
    }
  }
  for (const FileRef& f : m.extra_files) expect(out, f, format::Role::meta, "[files] extra");
  return out;
}

bool reserved(const std::string& path) {
  return path == format::kManifestPath || path.compare(0, 5, "kiln/") == 0;
}

}  // namespace

std::string code_claim_problem(const KernelSpec& k, const CodeObjectRef& ref, const CodeObjectInfo& info) {
  if (!backend_serves(k.backend, info.backend)) {
    return "'" + ref.file.path + "' is " + format::backend_name(info.backend) + " code but kernel '" + k.name +
           "' has backend " + k.backend;
  }
  for (const std::string& t : info.targets) {
    if (t == ref.arch) return "";
  }
  return "kernel '" + k.name + "' claims arch '" + ref.arch + "' for '" + ref.file.path + "' but the file is built for " +
         (info.targets.empty() ? std::string("no target") : join_targets(info.targets)) +
         (info.detail.empty() ? "" : " (" + info.detail + ")");
}

namespace {

// The index's arch field is the code object's targets joined by commas (FORMAT.md §3).
bool same_targets(const std::string& arch, const std::vector<std::string>& targets) {
  std::size_t at = 0;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (i > 0 && (at >= arch.size() || arch[at++] != ',')) return false;
    if (arch.compare(at, targets[i].size(), targets[i]) != 0) return false;
    at += targets[i].size();
  }
  return at == arch.size();
}

}  // namespace

std::string code_entry_problem(const format::Entry& e, const CodeObjectInfo& info) {
  // Every code object a runtime loads and verify reads passes here: the texts are built only
  // for a mismatch.
  if (e.backend == info.backend && e.kind == info.kind && same_targets(e.arch, info.targets)) return "";
  std::string found = std::string(format::backend_name(info.backend)) + " " + format::code_kind_name(info.kind) + " for " +
                      (info.targets.empty() ? std::string("no target") : join_targets(info.targets));
  std::string indexed = std::string(format::backend_name(e.backend)) + " " + format::code_kind_name(e.kind) + " for " + e.arch;
  return "member '" + e.path + "' is indexed as " + indexed + " but its bytes are " + found;
}

std::string code_reference_problem(const KernelSpec& k, const CodeObjectRef& ref, const format::Entry& e) {
  auto what = [&] { return "kernel '" + k.name + "' names '" + ref.file.path + "' as code"; };  // for a problem only
  if (e.role != format::Role::code) return what() + ", but the member has role " + format::role_name(e.role);
  if (!backend_serves(k.backend, e.backend)) {
    return what() + ", but the member is indexed as " + format::backend_name(e.backend) +
           " code and the kernel's backend is " + k.backend;
  }
  std::size_t start = 0;
  while (start <= e.arch.size()) {
    std::size_t comma = e.arch.find(',', start);
    if (comma == std::string::npos) comma = e.arch.size();
    if (e.arch.compare(start, comma - start, ref.arch) == 0 && comma - start == ref.arch.size()) return "";
    start = comma + 1;
  }
  return what() + " for arch '" + ref.arch + "', but the member is indexed for " + e.arch;
}

std::string variant_code_problem(const KernelSpec& k, const VariantSpec& v, std::size_t i, const format::Entry& kernel_code,
                                 const format::Entry& variant_code) {
  if (kernel_code.backend == variant_code.backend && kernel_code.kind == variant_code.kind &&
      kernel_code.arch == variant_code.arch) {
    return "";
  }
  auto text = [](const format::Entry& e) {
    return std::string(format::backend_name(e.backend)) + " " + format::code_kind_name(e.kind) + " for " + e.arch;
  };
  return "variant '" + v.name + "' of kernel '" + k.name + "' gives '" + variant_code.path + "' (" + text(variant_code) +
         ") for arch '" + v.code[i].arch + "', where the kernel's own code '" + kernel_code.path + "' is " + text(kernel_code) +
         " (a variant must be the same kind of code for the same targets)";
}

void check_archive_semantics(const ArchiveReader& archive, unsigned threads) {
  const std::string where = archive.name() + ": ";
  const Manifest& m = archive.manifest();  // kiln.toml parsed, the kernel table checked against it
  const format::Index& index = archive.index();
  std::map<std::string, Expected> expected;
  try {
    expected = expected_members(m);
  } catch (const Failure& e) {
    fail(Errc::integrity, where + e.what());
  }

  for (const format::Entry& e : index.entries) {
    if (reserved(e.path)) continue;  // kiln.toml and the kernel table: checked by manifest()
    auto it = expected.find(e.path);
    if (it == expected.end()) fail(Errc::integrity, where + "member '" + e.path + "' is not named by kiln.toml");
    if (e.role != it->second.role) {
      fail(Errc::integrity, where + "member '" + e.path + "' has role " + format::role_name(e.role) + " but kiln.toml names it as " +
                                format::role_name(it->second.role) + " (" + it->second.named_by + ")");
    }
    if ((e.role == format::Role::code) != (e.kind != format::CodeKind::none)) {
      fail(Errc::integrity, where + "member '" + e.path + "' has role " + format::role_name(e.role) + " and kind " +
                                format::code_kind_name(e.kind) + ": code, and only code, has a kind");
    }
  }
  for (const auto& [path, what] : expected) {
    if (index.find(path) < 0) {
      fail(Errc::integrity, where + what.named_by + " names '" + path + "', which is not a member of the archive");
    }
  }

  // Each code member's bytes, read once whichever kernels share it, against its index entry. A
  // sparse archive's absent code is judged on its index entry alone (rule 5), as a runtime judges
  // code before reading it; its bytes are checked by whoever holds them.
  std::vector<std::size_t> code_members;
  std::vector<bool> held(index.entries.size(), false);
  for (std::size_t i = 0; i < index.entries.size(); ++i) {
    if (index.entries[i].role == format::Role::code && archive.member_present(i)) {
      code_members.push_back(i);
      held[i] = true;
    }
  }
  std::vector<CodeObjectInfo> infos(index.entries.size());
  parallel_for_or_fail(code_members.size(), threads, [&](std::size_t n) {
    std::size_t i = code_members[n];
    const format::Entry& e = index.entries[i];
    // PTX is told by its directives, in its first 64 KiB (inspect_ptx reads no further): a
    // compressed PTX member is decompressed to its first 4 KiB, where compilers write them (and
    // which kiln's writer makes a zstd block of their own), and to 64 KiB only when they are not
    // there. A raw cubin or AMDGPU ELF is told from its held ends (below). Anything else (a
    // fatbin, an offload bundle, compressed machine code, a cubin whose section table lies beyond
    // its held ends), or PTX whose first bytes are another format's magic, is read whole.
    // Whole members are decoded through two buffers per thread (thousands of cubins are
    // otherwise as many allocations of fresh, zeroed pages), their stored bytes checked against
    // the signed index and their content's own digest left to --deep, as the format's levels
    // say (FORMAT.md §8).
    thread_local std::vector<std::uint8_t> buffer, stored;
    thread_local HeldBytes held_bytes;
    constexpr std::size_t kKeptBuffer = 8u << 20;
    const std::string what = "member '" + e.path + "'";
    auto refused = [&](const Failure& error) {
      fail(Errc::integrity, where + error.what() + " (indexed as " + format::code_kind_name(e.kind) + " for " + e.arch + ")");
    };
    // Most code is told from a few of its bytes: those are held privately, and the rest of the
    // member is only hashed where it lies in the file (ArchiveReader::verify_member_in_place). A
    // member whose telling needs bytes that were not held is read again, whole, below.
    const bool ptx_frame = e.kind == format::CodeKind::ptx && e.compression == format::Compression::zstd;
    const bool raw_elf = (e.kind == format::CodeKind::cubin || e.kind == format::CodeKind::amdgpu_elf) &&
                         e.compression == format::Compression::none;
    if ((ptx_frame || raw_elf) && archive.verify_member_in_place(i, ptx_frame ? kHeldFrameHead : kHeldElfHead, kHeldElfTail, held_bytes)) {
      std::optional<CodeObjectInfo> info;
      if (ptx_frame) {
        if (std::optional<std::vector<std::uint8_t>> prefix = held_ptx_prefix(archive, e, held_bytes)) {
          try {
            info = inspect_code_object(ByteView(*prefix), what);
          } catch (const Failure& error) {
            refused(error);
          }
        }
      } else {
        if (auto p = format::nested_archive_problem(e.path, held_bytes.head()); !p.empty()) fail(Errc::malformed, archive.name() + ": " + p);
        try {
          info = inspect_held_code_object(held_bytes, what);
        } catch (const Failure& error) {
          refused(error);
        }
      }
      if (info) {
        if (std::string p = code_entry_problem(e, *info); !p.empty()) fail(Errc::integrity, where + p);
        infos[i] = std::move(*info);
        return;
      }
    }
    std::vector<std::uint8_t> prefix;
    ByteView bytes;
    if (ptx_frame) {
      prefix = complete_lines(archive.read_member_prefix(i, kZstdFirstBlock, stored), e.content_size);
      if (prefix.size() < e.content_size && !has_ptx_directives(ByteView(prefix))) {
        prefix = complete_lines(archive.read_member_prefix(i, kPtxDirectivesWithin, stored), e.content_size);
      }
      bytes = ByteView(prefix);
      if (prefix.size() < e.content_size && has_binary_code_magic(bytes)) bytes = archive.decode_member_into(i, buffer, stored);
    } else {
      bytes = archive.decode_member_into(i, buffer, stored);
    }
    try {
      infos[i] = inspect_code_object(bytes, what);
    } catch (const Failure& error) {
      refused(error);
    }
    // A buffer grown for an unusually large member is not kept for the thread's lifetime.
    if (buffer.capacity() > kKeptBuffer) std::vector<std::uint8_t>().swap(buffer);
    if (stored.capacity() > kKeptBuffer) std::vector<std::uint8_t>().swap(stored);
    if (std::string p = code_entry_problem(e, infos[i]); !p.empty()) fail(Errc::integrity, where + p);
  });
  for (const KernelSpec& k : m.kernels) {
    for (const CodeObjectRef& ref : k.code) {
      std::size_t i = static_cast<std::size_t>(index.find(ref.file.path));
      if (std::string p = code_reference_problem(k, ref, index.entries[i]); !p.empty()) fail(Errc::integrity, where + p);
      if (!held[i]) continue;
      if (std::string p = code_claim_problem(k, ref, infos[i]); !p.empty()) fail(Errc::integrity, where + p);
    }
    for (const VariantSpec& v : k.variants) {
      for (std::size_t c = 0; c < v.code.size(); ++c) {
        const format::Entry& own = index.entries[static_cast<std::size_t>(index.find(k.code[c].file.path))];
        std::size_t i = static_cast<std::size_t>(index.find(v.code[c].file.path));
        if (std::string p = code_reference_problem(k, v.code[c], index.entries[i]); !p.empty()) fail(Errc::integrity, where + p);
        if (held[i]) {
          if (std::string p = code_claim_problem(k, v.code[c], infos[i]); !p.empty()) fail(Errc::integrity, where + p);
        }
        if (std::string p = variant_code_problem(k, v, c, own, index.entries[i]); !p.empty()) fail(Errc::integrity, where + p);
      }
    }
  }
}

}  // namespace kiln
