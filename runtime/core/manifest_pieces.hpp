// kiln.toml parsed in pieces on several threads, for the packer: a manifest of thousands of
// kernels is one toml++ document, which toml++ parses on one thread. Internal to kiln's core;
// the archive reader never uses it (it parses kiln.toml whole, on one thread).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/manifest_toml.hpp"

namespace kiln {

// Parses `text` as a preamble (everything before the first [[kernel]]) into `preamble` and runs
// of [[kernel]] tables into `groups` (each a table holding one `kernel` array), on `threads`
// threads; toml++'s lines and columns stay the file's. Returns false where the cut does not
// apply or any piece does not parse: the caller then parses the whole text, which reports the
// error as a whole parse would.
bool parse_manifest_in_pieces(std::string_view text, const std::string& source_name, unsigned threads,
                              toml::table* preamble, std::vector<toml::table>* groups);

}  // namespace kiln
