// Writing the sparse form of an archive (schema/FORMAT.md §9): the complete archive's header with
// the sparse flag, the extent table, then the bytes of each extent in order. A registry pull
// fills the extents from ranged downloads; a store keeps what two sparse copies hold between them.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/archive_reader.hpp"
#include "core/file_io.hpp"
#include "core/sparse.hpp"

namespace kiln {

// Produces one extent's bytes, in order, through `write`; exactly extent.size of them.
using ExtentWrite = std::function<void(const std::uint8_t* data, std::size_t size)>;
using ExtentFill = std::function<void(const format::Extent& extent, const ExtentWrite& write)>;

// Writes the sparse archive of the complete archive whose header is `complete`, holding
// `extents` (format::extents_for), each filled by `fill`, to `out` (a file, or memory). Throws
// Errc::internal if a fill writes more or fewer bytes than its extent.
void write_sparse(const ExtentWrite& out, format::Header complete, const std::vector<format::Extent>& extents,
                  const ExtentFill& fill);

// A sparse copy of `sources` (one archive, complete or sparse, or several sparse copies of the
// same one) holding every member flagged in `keep` (index order), each taken from the first source
// that holds it (Errc::not_found if none does). The bytes are copied unchecked: the caller
// verifies what it wrote before using it.
void write_sparse_copy(const std::vector<const ArchiveReader*>& sources, const std::vector<bool>& keep, AtomicFileWriter& out);

}  // namespace kiln
