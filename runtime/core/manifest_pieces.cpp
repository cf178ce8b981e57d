#include "core/manifest_pieces.hpp"

#include <algorithm>

#include "core/parallel.hpp"

namespace kiln {
namespace {

// A large kiln.toml is thousands of [[kernel]] tables, and toml++ parses one document on one
// thread. split_at_kernels() cuts the text at the lines that are [[kernel]] headers, so that
// runs of kernels can be parsed on their own, each as a document of its own that starts with
// the newlines before it (toml++'s lines and columns stay the file's). Cut this way, the pieces
// mean what the whole file means: a [[kernel]] header starts a new table and what follows it,
// up to the next one, belongs to it. So the cut is made only where that holds, and anything
// else gives up (false) and the whole file is parsed at once: a header other than [[kernel]],
// [kernel.*] or [[kernel.*]] after the first kernel, a kernel header before it, a header with
// quotes, a string or bracket left open. A scanner of TOML's strings, comments and brackets
// finds the header lines: a line whose first character is '[' outside any string or bracket.
struct KernelRun {
  std::size_t begin;  // offset of its first [[kernel]] line
  std::size_t end;
  std::size_t line;   // 1-based line of `begin`
};

bool split_at_kernels(std::string_view text, std::size_t* preamble_end, std::vector<KernelRun>* runs) {
  enum class Mode { none, comment, basic, literal, ml_basic, ml_literal };
  Mode mode = Mode::none;
  std::size_t line = 1, depth = 0, line_begin = 0;
  bool line_start = true;
  const std::size_t n = text.size();
  auto starts = [&](std::size_t i, std::string_view what) { return text.compare(i, what.size(), what) == 0; };
  for (std::size_t i = 0; i < n; ++i) {
    char c = text[i];
    if (c == '\n') {
      if (mode == Mode::basic || mode == Mode::literal) return false;
      if (mode == Mode::comment) mode = Mode::none;
      ++line;
      line_begin = i + 1;
      if (mode == Mode::none) line_start = true;
      continue;
    }
    switch (mode) {
      case Mode::comment: continue;
      case Mode::basic:
        if (c == '\\') {
          if (i + 1 < n && text[i + 1] == '\n') return false;
          ++i;
        } else if (c == '"') {
          mode = Mode::none;
        }
        continue;
      case Mode::literal:
        if (c == '\'') mode = Mode::none;
        continue;
      case Mode::ml_basic:
      case Mode::ml_literal: {
        char quote = mode == Mode::ml_basic ? '"' : '\'';
        if (mode == Mode::ml_basic && c == '\\') {
          if (i + 1 < n && text[i + 1] == '\n') {
            ++line;
            line_begin = i + 2;
          }
          ++i;
          continue;
        }
        if (c != quote) continue;
        std::size_t run = 0;
        while (i + run < n && text[i + run] == quote) ++run;
        if (run >= 3) {
          if (run > 5) return false;
          mode = Mode::none;
        }
        i += run - 1;
        continue;
      }
      case Mode::none: break;
    }
    if (c == ' ' || c == '\t' || c == '\r') continue;
    bool at_line_start = line_start;
    line_start = false;
    if (c == '#') {
      mode = Mode::comment;
    } else if (c == '"' || c == '\'') {
      bool triple = starts(i, std::string(3, c));
      mode = c == '"' ? (triple ? Mode::ml_basic : Mode::basic) : (triple ? Mode::ml_literal : Mode::literal);
      if (triple) i += 2;
    } else if (c == '[' && at_line_start && depth == 0) {
      std::size_t close = text.find(']', i);
      std::size_t eol = text.find('\n', i);
      if (close == std::string_view::npos || close > eol) return false;
      std::string_view header = text.substr(i, close - i);
      if (header.find_first_of("\"'") != std::string_view::npos) return false;
      bool kernel_start = starts(i, "[[kernel]]");
      bool kernel_part = starts(i, "[kernel.") || starts(i, "[[kernel.");
      if (kernel_start) {
        // The piece starts at the line's start, so that toml++'s columns are the file's.
        if (runs->empty()) *preamble_end = line_begin;
        if (!runs->empty()) runs->back().end = line_begin;
        runs->push_back({line_begin, n, line});
      } else if (kernel_part ? runs->empty() : !runs->empty()) {
        return false;  // a kernel's part before any kernel, or another table among the kernels
      }
      i = starts(close, "]]") ? close + 1 : close;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      if (depth == 0) return false;
      --depth;
    }
  }
  return mode == Mode::none || mode == Mode::comment ? depth == 0 && !runs->empty() : false;
}

}  // namespace

// Parses kiln.toml as a preamble (everything before the first [[kernel]]) and groups of
// kernels on `threads` threads, or returns false where the split does not apply or any piece
// does not parse (the caller then parses the whole file, which reports the error).
bool parse_manifest_in_pieces(std::string_view text, const std::string& source_name, unsigned threads, toml::table* preamble,
                     std::vector<toml::table>* groups) {
  std::size_t preamble_end = 0;
  std::vector<KernelRun> runs;
  if (!split_at_kernels(text, &preamble_end, &runs)) return false;
  // One piece per thread: each piece starts with the newlines before it, which toml++ reads too.
  std::size_t group_count = std::min<std::size_t>(runs.size(), threads);
  groups->resize(group_count);
  std::vector<char> ok(group_count + 1, 0);
  parallel_for(group_count + 1, threads, [&](std::size_t g) {
    try {
      if (g == group_count) {
        *preamble = toml::parse(text.substr(0, preamble_end), source_name);
      } else {
        const KernelRun& first = runs[g * runs.size() / group_count];
        const KernelRun& last = runs[(g + 1) * runs.size() / group_count - 1];
        std::string piece(first.line - 1, '\n');
        piece.append(text.substr(first.begin, last.end - first.begin));
        (*groups)[g] = toml::parse(piece, source_name);
      }
      ok[g] = 1;
    } catch (...) {
    }
  });
  // A missing [package] is reported at the root table's position: left to the whole parse.
  if (std::find(ok.begin(), ok.end(), 0) != ok.end() || preamble->contains("kernel") || !preamble->contains("package")) {
    return false;
  }
  for (const toml::table& g : *groups) {
    if (g.size() != 1 || !g.contains("kernel") || !g.get("kernel")->is_array_of_tables()) return false;
  }
  return true;
}


}  // namespace kiln
