// Helpers shared by the unit tests: keys, small real-looking archives, and a builder for
// hostile archives that the real writer would refuse to produce.
#pragma once

#include "temp_dirs.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/archive_reader.hpp"
#include "core/archive_writer.hpp"
#include "core/ed25519.hpp"
#include "core/format.hpp"
#include "core/manifest.hpp"

namespace kiln::test {

std::vector<std::uint8_t> bytes_of(const std::string& s);

// A kiln.toml given as text, parsed as the packer parses one (its errors name "kiln.toml").
Manifest parse_kiln_toml(const std::string& text);

// A manifest whose identity matches `id`, with one kernel naming `code_path`.
// `extra_files` are named under [files] extra after tests/vector.bin.
std::string small_manifest(const PackageIdentity& id, const std::string& code_path = "k.ptx",
                           const std::vector<std::string>& extra_files = {});

PackageIdentity default_identity();

// A small PTX file (real syntax, made up here, so tests need no nvcc).
std::string small_ptx(const std::string& target = "sm_90");

// A cubin as nvcc lays one out, made up here: the ELF header (EM_CUDA, ELF ABI v8, e_flags
// naming sm_<sm>), section names and a .note.nv.tkinfo whose ptxas command line says `noted_arch`
// in its first bytes, `filler` bytes of code, and the section table after them (at the end), or,
// with `table_after` > 0, that many filler bytes after the table (so the table lies in between).
std::vector<std::uint8_t> synthetic_cubin(unsigned sm, const std::string& noted_arch, std::size_t filler,
                                          std::size_t table_after = 0);

// Members of a small archive: kiln.toml, one PTX code member, a source and a test blob.
std::vector<MemberInput> small_members(const PackageIdentity& id);
// small_members plus `extra` (stored with role meta), each named under [files] extra in a
// kiln.toml and kernel table rebuilt to match: an archive whose parts agree.
std::vector<MemberInput> small_members_with(const PackageIdentity& id, std::vector<MemberInput> extra);

std::vector<std::uint8_t> build_signed(const std::vector<const PrivateKey*>& keys,
                                       const PackageIdentity& id = default_identity(), int threads = 1);

TrustSet trust_of(const std::vector<const PrivateKey*>& keys);

// Opens, authenticates (threshold 1 unless given) and deep-verifies `bytes`; throws what
// the reader throws.
std::unique_ptr<ArchiveReader> open_and_verify(const std::vector<std::uint8_t>& bytes, const TrustSet& trust,
                                         unsigned threshold = 1);

// Lays out header, members, index and signatures from parts, with no validation at all,
// so a test can present exactly the malformed structure it is about.
struct RawArchive {
  format::Index index;
  std::vector<std::vector<std::uint8_t>> stored;  // per entry; offsets are recomputed
  std::vector<Signer> signers;
  std::vector<format::SignatureRecord> extra_records;  // appended after the signers' records
  // Members made from the entries (kernel records, MemberInput::derive), by path: assemble makes
  // each again from the entries as assembled, stored raw. A test that forges one erases it here.
  std::map<std::string, decltype(MemberInput::derive)> derived;
  // The index head's copy of kiln/kernels.bin's entry (FORMAT.md §3), as assemble writes it:
  // changed by `forge_head_table_entry` (given the index as assembled) where set, or left out (a
  // KILNIDX3 head, what writers before 0.7.3 wrote) where `head_without_table_entry`.
  std::function<void(format::Entry&, const format::Index&)> forge_head_table_entry;
  bool head_without_table_entry = false;
};
std::vector<std::uint8_t> assemble(RawArchive raw);

// A RawArchive holding `members` stored raw (no compression), ready to be tampered with.
RawArchive raw_from_members(const PackageIdentity& id, std::vector<MemberInput> members);  // sorted by path

std::string read_text_file(const std::string& path);
// Writes `bytes` to `path`, replacing what is there (the file itself: a link is replaced, not followed).
void write_file(const std::string& path, const std::vector<std::uint8_t>& bytes);

}  // namespace kiln::test
