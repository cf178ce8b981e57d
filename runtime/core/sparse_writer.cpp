#include "core/sparse_writer.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"

namespace kiln {

void write_sparse(const ExtentWrite& out, format::Header complete, const std::vector<format::Extent>& extents,
                  const ExtentFill& fill) {
  complete.sparse = true;
  std::vector<std::uint8_t> header = format::encode_header(complete);
  out(header.data(), header.size());
  std::vector<std::uint8_t> table = format::encode_extent_table(extents);
  out(table.data(), table.size());
  for (const format::Extent& x : extents) {
    std::uint64_t written = 0;
    fill(x, [&](const std::uint8_t* data, std::size_t size) {
      if (size > x.size - written) {
        fail(Errc::internal, "sparse archive: more bytes than extent " + std::to_string(x.offset) + " +" + std::to_string(x.size));
      }
      out(data, size);
      written += size;
    });
    if (written != x.size) {
      fail(Errc::internal, "sparse archive: " + std::to_string(written) + " bytes for extent " + std::to_string(x.offset) +
                               " +" + std::to_string(x.size));
    }
  }
}

void write_sparse_copy(const std::vector<const ArchiveReader*>& sources, const std::vector<bool>& keep, AtomicFileWriter& out) {
  const ArchiveReader& first = *sources.front();
  const std::vector<format::Entry>& entries = first.index().entries;
  // Which source holds each kept member (its slot, padding included, is copied from there).
  std::vector<const ArchiveReader*> from(entries.size(), nullptr);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (!keep[i]) continue;
    for (const ArchiveReader* a : sources) {
      if (a->member_present(i)) {
        from[i] = a;
        break;
      }
    }
    if (from[i] == nullptr) {
      fail(Errc::not_found, first.name() + ": member '" + entries[i].path + "' is in none of the copies at hand");
    }
  }
  const format::Header& h = first.header();
  const std::vector<format::Extent> extents = format::extents_for(entries, keep, h);
  write_sparse([&out](const std::uint8_t* data, std::size_t size) { out.write(data, size); }, h, extents, [&](const format::Extent& x, const ExtentWrite& write) {
    // Slot by slot: each from the source that holds it; the index and signatures from the first.
    std::uint64_t at = x.offset;
    std::size_t i = static_cast<std::size_t>(
        std::lower_bound(entries.begin(), entries.end(), at, [](const format::Entry& e, std::uint64_t o) { return e.offset < o; }) -
        entries.begin());
    while (at < x.end()) {
      const ArchiveReader* source = &first;
      std::uint64_t end = x.end();
      if (at < h.index_offset) {
        while (i < entries.size() && entries[i].offset < at) ++i;
        // The slot beginning here: the first member at this offset with bytes, or the last empty one.
        std::size_t m = i;
        while (m + 1 < entries.size() && entries[m + 1].offset == at) ++m;
        end = m + 1 < entries.size() ? entries[m + 1].offset : h.index_offset;
        for (std::size_t k = i; k <= m; ++k) {
          if (from[k] != nullptr) source = from[k];
        }
        i = m + 1;
      }
      std::vector<std::uint8_t> bytes = source->unchecked_bytes(at, end - at);
      write(bytes.data(), bytes.size());
      at = end;
    }
  });
}

}  // namespace kiln
