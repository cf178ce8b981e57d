// The rules that tie an archive's four descriptions of itself together: kiln.toml, the kernel
// table (kiln/kernels.bin and kiln/kernels/<name>), the index (each member's role, backend,
// kind and arch tags) and the code objects' own bytes. A signature proves who sealed an
// archive, not that its parts agree; these rules do, the same way in every place that looks:
// the packer before writing, `kiln verify` and `kiln store add` (every rule), and the runtime
// (the rules of the one kernel it resolves, without parsing kiln.toml: see FORMAT.md §8).
#pragma once

#include <string>

#include "core/code_object.hpp"
#include "core/format.hpp"
#include "core/manifest.hpp"

namespace kiln {

class ArchiveReader;

// Kernel `k` lists `ref`; `info` is what the file's bytes say. "" when the file is code of
// the kernel's backend built for the arch the manifest claims; else why not.
std::string code_claim_problem(const KernelSpec& k, const CodeObjectRef& ref, const CodeObjectInfo& info);

// "" when the index entry says of a code member exactly what its bytes say (backend, kind and
// every target, in the file's order, joined by ','); else why not.
std::string code_entry_problem(const format::Entry& e, const CodeObjectInfo& info);

// "" when the member kernel `k` names through `ref` is fit to be its code as the index
// describes it: role code, the kernel's backend (either for backend "any"), the claimed arch
// among its tags; else why not. Reads only the index.
std::string code_reference_problem(const KernelSpec& k, const CodeObjectRef& ref, const format::Entry& e);

// "" when variant `v`'s code entry `i` (indexed as `variant_code`) is the same kind of code for
// the same targets as the kernel's own code entry `i` (indexed as `kernel_code`): a variant is a
// specialised build of the same code, so a device that runs the one runs the other; else why not.
std::string variant_code_problem(const KernelSpec& k, const VariantSpec& v, std::size_t i, const format::Entry& kernel_code,
                                 const format::Entry& variant_code);

// Every rule, on an archive whose members' stored digests are to be checked too: kiln.toml
// and the kernel table agree (ArchiveReader::manifest), every file kiln.toml names is a member with
// the role it gives it and every member but kiln.toml and kiln/ is named by it, and each code
// member's bytes (read, verified and decompressed, `threads` at a time) say what its index
// entry and the kernels that use it claim. Throws Errc::integrity naming the member.
void check_archive_semantics(const ArchiveReader& archive, unsigned threads);

}  // namespace kiln
