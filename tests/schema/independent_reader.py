#!/usr/bin/env python3
"""A second reader of the kiln archive format, written from schema/FORMAT.md alone.

It shares no code with kiln: it parses every structure FORMAT.md defines, applies the rules it
states, re-encodes what it decoded and requires the original bytes back (the writer's split of
the index, §3), finds entries from the index head down one page per level as a lazy reader does
and requires the entries the full decode gives, derives the kernel table
from kiln.toml, checks the Ed25519 signatures, and compares everything with what the kiln command
reports (`kiln digest`, `kiln inspect --json`). Any difference is a failure, with the field named:
either kiln or FORMAT.md is wrong.

    independent_reader.py --kiln KILN --archives DIR [--expect NAME.kiln ...] [--trust KEY.pub]
                          [--paged PTX KEY.key]
    independent_reader.py --self-test

Every *.kiln file in DIR is read (the test fails if DIR holds none, or lacks an --expect'ed one);
with --paged, also three archives that kiln packs here: one of 300 files (a one-level head over
several entry pages), one of about 1,160 members (a tree head, FORMAT.md §3), and
launch-edges.kiln, whose kernels use every form of kernel_args and cluster. Each one is also
tampered with (a header, page, member and signature byte, a byte appended), and the reader must
refuse every tampered copy. With --paged and --trust, each is also rewritten here as a sparse
archive (FORMAT.md §9: kiln.toml, the meta members and each kernel's first code object), which
this reader and `kiln verify --deep` must both accept with the same digest and the same members
present, and twice broken (adjacent extents unmerged, an unknown flag), which both must refuse.
Each record with a launch extension (FORMAT.md §4.1) is varied in
each way FORMAT.md refuses and in ways it allows; with --paged and --trust, launch-edges.kiln's
variants are also rebuilt into signed archives and `kiln preflight` must refuse exactly the ones
this reader refuses, and the two paged archives' members are put under other indexes (other
splits, which §3 accepts, and ones that break a rule of §3), signed again, and `kiln verify` must
refuse exactly the ones this reader refuses. Before any archive, indexes built here (every split
the writer makes at its boundaries, others, and each rule of §3 broken once) are decoded and
must be accepted or refused as §3 says; --self-test runs only those, without kiln.
Standard library only (Python 3.11+ for tomllib). zstd members are decompressed with the
`zstandard` module when it is installed (Debian: python3-zstandard), otherwise with the `zstd`
command (Debian: zstd, which ci/install-deps.sh installs). Exit status 77 (ctest's
SKIP_RETURN_CODE) when neither is available or Python is older than 3.11; 1 on any failure.
"""

import argparse
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys

SKIP = 77

try:
    import tomllib
except ImportError:  # Python < 3.11
    print("SKIP: Python 3.11+ is needed for tomllib", file=sys.stderr)
    sys.exit(SKIP)

try:
    import zstandard
except ImportError:
    zstandard = None
ZSTD_CLI = shutil.which("zstd")


class Refused(Exception):
    """The archive breaks a rule of FORMAT.md (or disagrees with kiln)."""


def need(cond, what):
    if not cond:
        raise Refused(what)


# ---- §0 conventions: little-endian integers, str16 -------------------------------------------

class Reader:
    def __init__(self, data, what):
        self.data, self.pos, self.what = data, 0, what

    def take(self, n):
        need(n <= len(self.data) - self.pos,
             f"{self.what}: needs {n} bytes at offset {self.pos}, {len(self.data) - self.pos} remain")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def u8(self):
        return self.take(1)[0]

    def u16(self):
        return struct.unpack("<H", self.take(2))[0]

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def i64(self):
        return struct.unpack("<q", self.take(8))[0]

    def str16(self):
        return self.take(self.u16())

    def remaining(self):
        return len(self.data) - self.pos

    def end(self):
        need(self.remaining() == 0, f"{self.what}: {self.remaining()} trailing bytes")


class Writer:
    def __init__(self):
        self.out = bytearray()

    def raw(self, b):
        self.out += b

    def u8(self, v):
        self.out += struct.pack("<B", v)

    def u16(self, v):
        self.out += struct.pack("<H", v)

    def u32(self, v):
        self.out += struct.pack("<I", v)

    def u64(self, v):
        self.out += struct.pack("<Q", v)

    def i64(self, v):
        self.out += struct.pack("<q", v)

    def str16(self, b):
        assert len(b) <= 0xFFFF
        self.u16(len(b))
        self.out += b


def align64(v):
    return (v + 63) // 64 * 64


def sha256(b):
    return hashlib.sha256(b).digest()


# ---- names (§3, §3.1, §3.2) ---------------------------------------------------------------

PORTABLE = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._+@=-")
LOWER_ALNUM = set(b"abcdefghijklmnopqrstuvwxyz0123456789")
ARCH_CHARS = set(b"abcdefghijklmnopqrstuvwxyz0123456789_:+-")
IDENT_FIRST = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
IDENT = IDENT_FIRST | set(b"0123456789")


def check_path(p, what):
    need(1 <= len(p) <= 1024, f"{what}: path length {len(p)} outside 1..1024")
    for part in p.split(b"/"):
        need(part not in (b"", b".", b".."), f"{what}: path {p!r} has an empty, '.' or '..' component")
        need(all(c in PORTABLE for c in part), f"{what}: path {p!r} has a character outside [A-Za-z0-9._+@=-]")


def check_package(p, what):
    need(1 <= len(p) <= 128 and p[0] in LOWER_ALNUM and all(c in LOWER_ALNUM or c in b"._-" for c in p),
         f"{what}: package {p!r} breaks the package rule")


def check_revision(r, what):
    need(1 <= len(r) <= 128 and all(c in PORTABLE or c in b":/" for c in r),
         f"{what}: kernel_revision {r!r} breaks the revision rule")


def check_arch(a, what):
    need(len(a) <= 1024, f"{what}: arch longer than 1024 bytes")
    if a:
        for tag in a.split(b","):
            need(tag and all(c in ARCH_CHARS for c in tag), f"{what}: arch {a!r} has an empty tag or a bad character")


def is_identifier(s):
    return len(s) >= 1 and s[0] in IDENT_FIRST and all(c in IDENT for c in s)


# ---- §2 header --------------------------------------------------------------------------

FILE_MAGIC = b"KILN\r\n\x1a\n"


def decode_header(data):
    need(len(data) >= 64, "header: file shorter than 64 bytes")
    r = Reader(data[:64], "header")
    need(r.take(8) == FILE_MAGIC, "header: bad magic")
    version = r.u32()
    need(version == 2, f"header: format version {version}")
    flags = r.u32()
    need(flags in (0, 1), f"header: flags {flags} has bits other than bit 0 (sparse, §9)")
    h = {"index_offset": r.u64(), "index_size": r.u64(), "signature_block_size": r.u64(),
         "index_head_size": r.u64(), "sparse": flags == 1}
    need(r.take(16) == bytes(16), "header: reserved bytes not zero")
    need(1 <= h["index_size"] <= 256 << 20, "header: index_size out of range")
    need(h["signature_block_size"] <= 1 << 20, "header: signature_block_size over 1 MiB")
    need(1 <= h["index_head_size"] <= h["index_size"], "header: index_head_size out of 1..index_size")
    need(h["index_offset"] >= 64 and h["index_offset"] % 64 == 0, "header: index_offset")
    if h["sparse"]:
        need(h["index_offset"] <= 1 << 62, "header (sparse): index_offset over 2^62")
        return h
    size = len(data)
    need(h["index_offset"] <= size, "header: index_offset")
    need(h["index_size"] <= size - h["index_offset"], "header: index runs past the file")
    need(h["signature_block_size"] == size - h["index_offset"] - h["index_size"], "header: regions do not tile the file")
    return h


class SparseView:
    """A sparse archive (§9) seen as its complete archive: a slice inside one extent gives the held
    bytes, a slice that meets none is refused as absent, one that an extent holds part of as cut."""

    def __init__(self, data, h):
        need(len(data) >= 76, "extent table: the file ends inside it")
        r = Reader(data[64:76], "extent table")
        need(r.take(8) == b"KILNSPX1", "extent table: bad magic")
        count = r.u32()
        need(1 <= count <= (1 << 20) + 1, f"extent table: count {count}")
        start = align64(76 + 16 * count)
        need(start <= len(data), "extent table: runs past the file")
        full = h["index_offset"] + h["index_size"] + h["signature_block_size"]
        r = Reader(data[76:76 + 16 * count], "extent table")
        self.extents, at = [], start
        for k in range(count):
            off, size = r.u64(), r.u64()
            need(off >= 64 and off % 64 == 0, f"extent {k}: offset {off}")
            need(size >= 1 and off + size <= full, f"extent {k}: runs past the complete archive")
            if self.extents:
                need(off > self.extents[-1][0] + self.extents[-1][1], f"extent {k}: not after the previous one's end")
            last = k + 1 == count
            need(last or (off + size) % 64 == 0, f"extent {k}: ends at {off + size}, not a multiple of 64")
            need(not last or (off + size == full and off <= h["index_offset"]),
                 f"extent {k} (the last): does not hold the index and signature block")
            self.extents.append((off, size, at))
            at += size
        need(data[76 + 16 * count:start] == bytes(start - 76 - 16 * count), "extent table: padding not zero")
        need(at == len(data), f"extent table: the extents end at {at}, the file at {len(data)}")
        self.data, self.full = data, full

    def __len__(self):
        return self.full

    def where(self, off, size):
        """The file offset of [off, off + size), None when absent; refused when cut."""
        if size == 0:
            return 0
        for o, n, at in self.extents:
            if off < o + n and o < off + size:
                need(o <= off and off + size <= o + n, f"bytes {off}..{off + size}: an extent holds part of them")
                return at + off - o
        return None

    def __getitem__(self, s):
        start, stop = s.start or 0, self.full if s.stop is None else s.stop
        at = self.where(start, stop - start)
        need(at is not None, f"bytes {start}..{stop}: absent from this sparse archive")
        return self.data[at:at + stop - start]


def encode_header(h):
    w = Writer()
    w.raw(FILE_MAGIC)
    w.u32(2)
    w.u32(1 if h.get("sparse") else 0)
    for k in ("index_offset", "index_size", "signature_block_size", "index_head_size"):
        w.u64(h[k])
    w.raw(bytes(16))
    return bytes(w.out)


# ---- §3 index ---------------------------------------------------------------------------

ROLES = {1: "manifest", 2: "code", 3: "source", 4: "ir", 5: "testdata", 6: "meta"}
BACKENDS = {0: "none", 1: "cuda", 2: "hip"}
KINDS = {0: "none", 1: "cubin", 2: "ptx", 3: "fatbin", 4: "amdgpu-elf", 5: "offload-bundle"}
COMPRESSIONS = {0: "none", 1: "zstd"}
ENTRY_FIELDS = ("path", "role", "backend", "kind", "compression", "arch", "offset", "stored_size",
                "content_size", "stored_sha256", "content_sha256")


# The index's magics (§3), the smallest structures the reference rules allow, and the writer's split.
HEAD_ONE_LEVEL, HEAD_TREE, HEAD_TABLE = b"KILNIDX2", b"KILNIDX3", b"KILNIDX4"  # the last: a tree head with
TABLE_PATH = b"kiln/kernels.bin"                                              # the kernel table's entry
REF_PAGE_MAGIC, ENTRY_PAGE_MAGIC = b"KILNREF3", b"KILNPGE2"
MIN_ENTRY = 96                 # a lower bound (FORMAT.md §3): an entry really takes 2+1, 4, 2, 24, 64 = 97
MIN_REF_PAGE = 67              # 8 + 4 + one reference of at least 4+4+4+8+32+2+1
ONE_LEVEL_REF, TREE_REF = 51, 55  # the smallest reference in each form
WRITER_PAGE_ENTRIES = 8        # §3 "How the writer splits": entries in a full entry page
WRITER_FANOUT = 16             # references in a full reference page
WRITER_HEAD = 16               # at most this many references under a head


def decode_refs(r, count, has_span, here, naming, index_size, what):
    """The references of the head or of one reference page, each checked by §3's reference rules
    in order. `here` is the level of the pages they name; `naming` is the reference that named the
    page they are in (for the head, a stand-in with "head": True, the head's size as
    "children_at", no path bound and the end offset index_offset). Returns them with what §3
    derives: the named page's position (bytes from the start of the index), its level, the
    position of its first entry, and the bounds passed down (path bound, end offset)."""
    refs, position, first_entry = [], naming["children_at"], naming["first_entry"]
    entry_page = here == 0
    for j in range(count):
        w = f"{what} reference {j}"
        ref = {"entry_count": r.u32(), "size": r.u32()}
        ref["span"] = r.u32() if has_span else ref["size"]  # a one-level head: span = size
        ref["first_offset"], ref["sha256"], ref["first_path"] = r.u64(), r.take(32), r.str16()
        ref.update(level=here, position=position, first_entry=first_entry, children_at=position + ref["size"])
        need(ref["entry_count"] >= 1 and (not entry_page or ref["entry_count"] <= 4096),
             f"{w}: entry_count {ref['entry_count']} out of 1..{4096 if entry_page else '2^32-1'} (level {here})")
        smallest = 8 + MIN_ENTRY * ref["entry_count"] if entry_page else MIN_REF_PAGE
        need(ref["size"] >= smallest, f"{w}: size {ref['size']} below the smallest page of level {here}, {smallest}")
        need(position + ref["span"] <= index_size,
             f"{w}: the page at {position} with span {ref['span']} runs past the index ({index_size} bytes)")
        if entry_page:
            need(ref["span"] == ref["size"], f"{w}: span {ref['span']} differs from size {ref['size']} (an entry page)")
        else:
            need(ref["span"] > ref["size"], f"{w}: span {ref['span']} not above size {ref['size']} (a reference page)")
        if j == 0 and naming.get("head"):
            need(ref["first_offset"] == 64, f"{w}: first_offset {ref['first_offset']} is not 64")
        elif j == 0:
            need(ref["first_path"] == naming["first_path"],
                 f"{w}: first_path {ref['first_path']!r} is not the naming reference's, {naming['first_path']!r}")
            need(ref["first_offset"] == naming["first_offset"],
                 f"{w}: first_offset {ref['first_offset']} is not the naming reference's, {naming['first_offset']}")
        else:
            need(refs[-1]["first_path"] < ref["first_path"],
                 f"{w}: first_path {ref['first_path']!r} not above the previous one's, {refs[-1]['first_path']!r}")
            need(refs[-1]["first_offset"] <= ref["first_offset"],
                 f"{w}: first_offset {ref['first_offset']} below the previous one's, {refs[-1]['first_offset']}")
        need(ref["first_offset"] <= naming["end_offset"],
             f"{w}: first_offset {ref['first_offset']} past the end offset {naming['end_offset']}")
        need(ref["first_offset"] % 64 == 0, f"{w}: first_offset {ref['first_offset']} not a multiple of 64")
        position += ref["span"]
        first_entry += ref["entry_count"]
        refs.append(ref)
    # Bounds passed down: from the next reference at the same level, the last one's from `naming`.
    for j, ref in enumerate(refs):
        nxt = refs[j + 1] if j + 1 < len(refs) else None
        ref["path_bound"] = nxt["first_path"] if nxt else naming["path_bound"]
        ref["end_offset"] = nxt["first_offset"] if nxt else naming["end_offset"]
    return refs


def decode_head(head, index_size, index_offset):
    """The head, any form (§3 "Head rules", in order). A one-level head is a tree head of
    height 1 whose references have span = size; a KILNIDX4 head is a tree head that also carries
    kiln/kernels.bin's entry ("kernel_table" in what this returns, None in the other forms)."""
    r = Reader(head, "index head")
    magic = r.take(8)
    need(magic in (HEAD_ONE_LEVEL, HEAD_TREE, HEAD_TABLE), f"index head: bad magic {magic!r}")
    tree = magic in (HEAD_TREE, HEAD_TABLE)
    out = {"form": "tree" if tree else "one-level", "entry_count": r.u32(), "kernel_table": None}
    need(1 <= out["entry_count"] <= 1 << 20, f"index head: entry_count {out['entry_count']} out of 1..1048576")
    out["sequence"] = r.u64()
    need(1 <= out["sequence"] < 1 << 63, f"index head: sequence {out['sequence']} out of 1..2^63-1")
    out["package"] = r.str16()
    check_package(out["package"], "index head")
    out["kernel_revision"] = r.str16()
    check_revision(out["kernel_revision"], "index head")
    out["height"] = r.u8() if tree else 1
    need(1 <= out["height"] <= 8, f"index head: height {out['height']} out of 1..8")
    if magic == HEAD_TABLE:
        t = out["kernel_table"] = decode_entry(r, "in the index head (the kernel table's)")
        need(t["path"] == TABLE_PATH and t["role"] == 6,
             f"index head: its kernel table entry is {t['path']!r} with role {t['role']}, not kiln/kernels.bin (meta)")
        need(64 <= t["offset"] and t["offset"] % 64 == 0 and t["offset"] + t["stored_size"] <= index_offset,
             f"index head: its kernel table entry places the member at {t['offset']}..{t['offset'] + t['stored_size']}, "
             f"not at a 64-byte boundary among the members (64..{index_offset})")
    ref_count = r.u32()
    need(ref_count >= 1 and ref_count * (TREE_REF if tree else ONE_LEVEL_REF) <= r.remaining(),
         f"index head: ref_count {ref_count} is 0 or cannot fit in {r.remaining()} bytes")
    naming = {"head": True, "children_at": len(head), "first_entry": 0, "path_bound": None, "end_offset": index_offset}
    out["refs"] = decode_refs(r, ref_count, tree, out["height"] - 1, naming, index_size, "index head")
    r.end()
    spans = sum(ref["span"] for ref in out["refs"])
    need(spans == index_size - len(head), f"index head: the spans add up to {spans}, not {index_size - len(head)}")
    entries = sum(ref["entry_count"] for ref in out["refs"])
    need(entries == out["entry_count"], f"index head: the entry counts add up to {entries}, not {out['entry_count']}")
    return out


def decode_entry(r, n):
    e = {"path": r.str16()}
    check_path(e["path"], f"entry {n}")
    e["role"], e["backend"], e["kind"], e["compression"] = r.u8(), r.u8(), r.u8(), r.u8()
    need(e["role"] in ROLES and e["backend"] in BACKENDS and e["kind"] in KINDS and e["compression"] in COMPRESSIONS,
         f"entry {n}: unknown enum value")
    code = e["role"] == 2
    need(code == (e["backend"] != 0) and code == (e["kind"] != 0), f"entry {n}: backend/kind vs role")
    need(e["role"] != 1 or e["path"] == b"kiln.toml", f"entry {n}: role manifest on {e['path']!r}")
    e["arch"] = r.str16()
    check_arch(e["arch"], f"entry {n}")
    need(code == (e["arch"] != b""), f"entry {n}: arch vs role")
    e["offset"], e["stored_size"], e["content_size"] = r.u64(), r.u64(), r.u64()
    need(e["stored_size"] <= 1 << 62, f"entry {n}: stored_size over 2^62")
    e["stored_sha256"], e["content_sha256"] = r.take(32), r.take(32)
    if e["compression"] == 0:
        need(e["stored_size"] == e["content_size"] and e["stored_sha256"] == e["content_sha256"],
             f"entry {n}: raw member with different stored and content size or digest")
    return e


def page_bytes(index, ref):
    return index[ref["position"]:ref["position"] + ref["size"]]


def decode_ref_page(data, ref, index_size):
    """A reference page (§3), used only once its bytes match the reference's SHA-256."""
    what = f"reference page at {ref['position']} (level {ref['level']})"
    need(sha256(data) == ref["sha256"], f"{what}: SHA-256 differs from its reference's")
    r = Reader(data, what)
    need(r.take(8) == REF_PAGE_MAGIC, f"{what}: bad magic")
    count = r.u32()
    need(1 <= count <= 4096 and count * TREE_REF <= r.remaining(),
         f"{what}: ref_count {count} out of 1..4096 or cannot fit in {r.remaining()} bytes")
    refs = decode_refs(r, count, True, ref["level"] - 1, ref, index_size, what)
    r.end()
    spans = ref["size"] + sum(x["span"] for x in refs)
    need(spans == ref["span"], f"{what}: its size and its references' spans add up to {spans}, not its span {ref['span']}")
    entries = sum(x["entry_count"] for x in refs)
    need(entries == ref["entry_count"], f"{what}: the entry counts add up to {entries}, not {ref['entry_count']}")
    return refs


def decode_entry_page(data, ref):
    """An entry page (§3), with the bounds passed down to its reference."""
    what = f"entry page at {ref['position']}"
    need(sha256(data) == ref["sha256"], f"{what}: SHA-256 differs from its reference's")
    r = Reader(data, what)
    need(r.take(8) == ENTRY_PAGE_MAGIC, f"{what}: bad magic")
    entries, offset, end = [], ref["first_offset"], ref["end_offset"]
    for k in range(ref["entry_count"]):
        e = decode_entry(r, ref["first_entry"] + k)
        if k == 0:
            need(e["path"] == ref["first_path"], f"{what}: first entry {e['path']!r} is not first_path {ref['first_path']!r}")
        else:
            need(entries[-1]["path"] < e["path"], f"{what}: paths not strictly increasing at {e['path']!r}")
        need(ref["path_bound"] is None or e["path"] < ref["path_bound"],
             f"{what}: path {e['path']!r} not below the path bound {ref['path_bound']!r}")
        need(e["offset"] == offset, f"entry {e['path']!r}: offset {e['offset']}, expected {offset}")
        offset = align64(e["offset"] + e["stored_size"])
        need(offset <= end, f"entry {e['path']!r}: runs past the end offset {end}")
        entries.append(e)
    need(offset == end, f"{what}: members end at {offset}, not at the end offset {end}")
    r.end()
    return entries


def decode_index(index, head):
    """Every page, from the head down, depth-first pre-order: (entries in index order, the
    references to every page in the order they lie in the index)."""
    entries, pages = [], []

    def visit(ref):
        pages.append(ref)
        data = page_bytes(index, ref)
        if ref["level"] == 0:
            entries.extend(decode_entry_page(data, ref))
        else:
            for child in decode_ref_page(data, ref, len(index)):
                visit(child)

    for ref in head["refs"]:
        visit(ref)
    # What the rules imply (§3): the pages, so reached, tile the index after the head exactly.
    at = pages[0]["position"]
    for ref in pages:
        need(ref["position"] == at, f"index: a page at {ref['position']}, expected one at {at} (the rules are inconsistent)")
        at += ref["size"]
    need(at == len(index), "index: the pages do not fill the index (the rules are inconsistent)")
    # A KILNIDX4 head's copy of kiln/kernels.bin's entry is the index's, field by field (§3).
    if head["kernel_table"] is not None:
        need([e for e in entries if e["path"] == TABLE_PATH] == [head["kernel_table"]],
             "index head: its kernel table entry is not the index's entry of kiln/kernels.bin")
    return entries, pages


def lookup(index, head, path=None, position=None):
    """§3's lookup, one page per level: the entry with this path (the last reference whose
    first_path is bytewise <= the path, level by level) or at this position (by entry counts);
    None when there is none. Returns (entry, pages decoded)."""
    refs, decoded = head["refs"], 0
    while True:
        if path is not None:
            below = [ref for ref in refs if ref["first_path"] <= path]
        else:
            below = [ref for ref in refs if ref["first_entry"] <= position < ref["first_entry"] + ref["entry_count"]]
        if not below:
            return None, decoded
        ref = below[-1]
        decoded += 1
        if ref["level"] > 0:
            refs = decode_ref_page(page_bytes(index, ref), ref, len(index))
            continue
        for n, e in enumerate(decode_entry_page(page_bytes(index, ref), ref)):
            if (path is not None and e["path"] == path) or (path is None and ref["first_entry"] + n == position):
                return e, decoded
        return None, decoded


def lookup_checks(index, head, entries, sample=16):
    """Entries found from the head down, one page per level, are the ones the full decode gives."""
    step = max(1, len(entries) // sample)
    for n in list(range(0, len(entries), step)) + [len(entries) - 1]:
        e = entries[n]
        for key in ({"path": e["path"]}, {"position": n}):
            got, decoded = lookup(index, head, **key)
            need(got == e, f"index: looking up {key} from the head finds {got and got['path']!r}, not {e['path']!r}")
            need(decoded == head["height"], f"index: looking up {key} decoded {decoded} pages, height {head['height']}")
    paths = {e["path"] for e in entries}
    for absent in (b"\x00", entries[0]["path"] + b"0", entries[-1]["path"] + b"0", b"\x7f"):
        if absent not in paths:
            need(lookup(index, head, path=absent)[0] is None, f"index: looking up absent {absent!r} finds an entry")
    need(lookup(index, head, position=len(entries))[0] is None, "index: an entry past the last position")


def encode_entry(w, e):
    w.str16(e["path"])
    for k in ("role", "backend", "kind", "compression"):
        w.u8(e[k])
    w.str16(e["arch"])
    for k in ("offset", "stored_size", "content_size"):
        w.u64(e[k])
    w.raw(e["stored_sha256"])
    w.raw(e["content_sha256"])


def writer_pages(entries, per_page=WRITER_PAGE_ENTRIES):
    """The writer's entry pages (§3): at most 8 entries a page, and a new page at kiln.toml and
    right after kiln/kernels.bin."""
    pages, current = [], []
    for e in entries:
        if current and (len(current) == per_page or e["path"] == b"kiln.toml" or current[-1]["path"] == b"kiln/kernels.bin"):
            pages.append(current)
            current = []
        current.append(e)
    if current:
        pages.append(current)
    return pages


def writer_tree(entries, per_page=WRITER_PAGE_ENTRIES, fanout=WRITER_FANOUT, head=None):
    """The writer's split (§3): reference pages of 16 references (the last takes the rest) over
    the entry pages, level by level, until at most 16 pages remain, under a tree head; where there
    are at most 16 entry pages, none, under a tree head of height 1 when the index has
    kiln/kernels.bin (a KILNIDX4 head) and a one-level head otherwise. Returns (tree form?,
    height, the head's pages), each page a node {"level", "name", "entries" or "children"}. Other
    values of `per_page`, `fanout` and `head` give other splits, which a reader accepts too
    (`head` defaults to 16 with the writer's page sizes, to the fanout otherwise)."""
    if head is None:
        head = WRITER_HEAD if (per_page, fanout) == (WRITER_PAGE_ENTRIES, WRITER_FANOUT) else fanout
    nodes = [{"level": 0, "name": f"L0#{i}", "entries": p} for i, p in enumerate(writer_pages(entries, per_page))]
    if len(nodes) <= head:
        return table_entry(entries) is not None, 1, nodes
    isolate = (per_page, fanout) == (WRITER_PAGE_ENTRIES, WRITER_FANOUT)  # the writer's own split
    height = 1
    while len(nodes) > head:
        groups, current = [], []
        for node in nodes:
            # A reference page ends after `fanout` references and, in the writer's split, around
            # the page whose first path is kiln.toml (§3): that page gets a reference page alone.
            if current and (len(current) == fanout or (isolate and (node_first_path(node) == b"kiln.toml" or
                                                                    node_first_path(current[-1]) == b"kiln.toml"))):
                groups.append(current)
                current = []
            current.append(node)
        groups.append(current)
        nodes = [{"level": height, "name": f"L{height}#{i}", "children": g} for i, g in enumerate(groups)]
        height += 1
    return True, height, nodes


def table_entry(entries):
    """kiln/kernels.bin's entry where the index has one with role meta: the writer then writes a
    KILNIDX4 head carrying it (§3)."""
    found = [e for e in entries if e["path"] == TABLE_PATH and e["role"] == 6]
    return found[0] if found else None


def node_first_path(node):
    while "children" in node:
        node = node["children"][0]
    return node["entries"][0]["path"]


def encode_ref(w, ref, has_span):
    w.u32(ref["entry_count"])
    w.u32(ref["size"])
    if has_span:
        w.u32(ref["span"])
    w.u64(ref["first_offset"])
    w.raw(ref["sha256"])
    w.str16(ref["first_path"])


def seal(node, tweak=None):
    """Encodes a page and, first, the pages under it; sets node["data"], node["span"] (its bytes
    and every page's under it) and node["ref"], the reference that names it. `tweak(node)`, when
    given, may then change either (the hostile checks): the page that names it holds what the
    tweak leaves, and its SHA-256 covers that."""
    w = Writer()
    if node["level"] == 0:
        w.raw(ENTRY_PAGE_MAGIC)
        for e in node["entries"]:
            encode_entry(w, e)
        first, count, below = node["entries"][0], len(node["entries"]), 0
    else:
        for child in node["children"]:
            seal(child, tweak)
        w.raw(REF_PAGE_MAGIC)
        w.u32(len(node["children"]))
        for child in node["children"]:
            encode_ref(w, child["ref"], True)
        first, count, below = node["children"][0]["first"], sum(c["count"] for c in node["children"]), \
            sum(c["span"] for c in node["children"])
    node.update(data=bytes(w.out), first=first, count=count)
    node["span"] = len(node["data"]) + below
    node["ref"] = {"entry_count": count, "size": len(node["data"]), "span": node["span"], "first_offset": first["offset"],
                   "sha256": sha256(node["data"]), "first_path": first["path"]}
    if tweak:
        tweak(node)


def set_page_bytes(node, data):
    """A tweak's helper: other bytes for a page, its reference (and the spans above) kept consistent."""
    node["span"] += len(data) - len(node["data"])
    node["data"] = data
    node["ref"].update(size=len(data), span=node["span"], sha256=sha256(data))


def preorder(nodes):
    for n in nodes:
        yield n
        yield from preorder(n.get("children") or [])


def encode_tree(head, tree, height, roots, tweak=None, fields=None, table=None):
    """The head over `roots` and the pages in depth-first pre-order: (head bytes, pages bytes).
    `table`, kiln/kernels.bin's entry, makes a tree head a KILNIDX4 head carrying it. `fields`
    overrides head fields (magic, entry_count, sequence, height, ref_count)."""
    for n in roots:
        seal(n, tweak)
    magic = (HEAD_TABLE if table is not None else HEAD_TREE) if tree else HEAD_ONE_LEVEL
    f = {"magic": magic, "entry_count": sum(n["count"] for n in roots),
         "sequence": head["sequence"], "height": height, "ref_count": len(roots), **(fields or {})}
    w = Writer()
    w.raw(f["magic"])
    w.u32(f["entry_count"])
    w.u64(f["sequence"])
    w.str16(head["package"])
    w.str16(head["kernel_revision"])
    if tree:
        w.u8(f["height"])
    if tree and table is not None:
        encode_entry(w, table)
    w.u32(f["ref_count"])
    for n in roots:
        encode_ref(w, n["ref"], tree)
    return bytes(w.out), b"".join(n["data"] for n in preorder(roots))


def encode_index(head, entries):
    """The index as the writer splits and lays it out (§3): (its bytes, index_head_size)."""
    head_bytes, pages = encode_tree(head, *writer_tree(entries), table=table_entry(entries))
    return head_bytes + pages, len(head_bytes)


def describe_split(form, height, pages):
    """`pages`: the entry counts of the pages, level 0 only. For failure messages."""
    runs = []
    for n in pages:
        if runs and runs[-1][0] == n:
            runs[-1][1] += 1
        else:
            runs.append([n, 1])
    return (f"{form} head, height {height}, {len(pages)} entry pages of " +
            " ".join(f"{n}" if k == 1 else f"{n}x{k}" for n, k in runs))


# ---- §4 members -------------------------------------------------------------------------

def zstd_frame_content_size(frame, what):
    """Checks the frame against §4 from its header and block headers (RFC 8878), without
    decompressing; returns the declared content size."""
    r = Reader(frame, what + " (zstd frame)")
    need(r.take(4) == b"\x28\xb5\x2f\xfd", f"{what}: not a zstd frame")
    fhd = r.u8()
    fcs_flag, single_segment, checksum, dict_flag = fhd >> 6, (fhd >> 5) & 1, (fhd >> 2) & 1, fhd & 3
    need((fhd >> 3) & 1 == 0, f"{what}: zstd reserved bit set")
    window = None
    if not single_segment:
        wd = r.u8()
        exponent, mantissa = wd >> 3, wd & 7
        base = 1 << (10 + exponent)
        window = base + base // 8 * mantissa
    dict_id = int.from_bytes(r.take((0, 1, 2, 4)[dict_flag]), "little")
    need(dict_id == 0, f"{what}: the frame needs dictionary {dict_id}")
    fcs_len = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    need(fcs_len > 0, f"{what}: the frame does not declare its content size")
    fcs = int.from_bytes(r.take(fcs_len), "little") + (256 if fcs_len == 2 else 0)
    if window is None:
        window = fcs
    need(window <= 1 << 27, f"{what}: window {window} over 2^27")
    while True:
        bh = int.from_bytes(r.take(3), "little")
        last, block_type, block_size = bh & 1, (bh >> 1) & 3, bh >> 3
        need(block_type != 3, f"{what}: reserved zstd block type")
        r.take(1 if block_type == 1 else block_size)
        if last:
            break
    if checksum:
        r.take(4)
    need(r.remaining() == 0, f"{what}: {r.remaining()} bytes follow the zstd frame")
    return fcs


_decompressed = {}  # frame SHA-256 -> content: the tamper checks re-read every archive


def zstd_decompress(frame, size):
    key = sha256(frame)
    if key not in _decompressed:
        _decompressed[key] = _zstd_decompress(frame, size)
    return _decompressed[key]


def _zstd_decompress(frame, size):
    if zstandard is not None:
        return zstandard.ZstdDecompressor().decompress(frame, max_output_size=size)
    out = subprocess.run([ZSTD_CLI, "-d", "-q", "-c"], input=frame, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, check=False)
    need(out.returncode == 0, "zstd refused a frame: " + out.stderr.decode(errors="replace"))
    return out.stdout


def member_content(data, e):
    what = f"member {e['path'].decode()}"
    stored = data[e["offset"]:e["offset"] + e["stored_size"]]
    need(sha256(stored) == e["stored_sha256"], f"{what}: stored SHA-256 differs from the index")
    if e["compression"] == 0:
        content = stored
    else:
        need(zstd_frame_content_size(stored, what) == e["content_size"], f"{what}: frame content size differs")
        content = zstd_decompress(stored, e["content_size"])
        need(len(content) == e["content_size"], f"{what}: decompressed to {len(content)} bytes")
    need(sha256(content) == e["content_sha256"], f"{what}: content SHA-256 differs from the index")
    need(not content.startswith(FILE_MAGIC), f"{what}: is itself a kiln archive")
    return content


# ---- §4.1 kernel table ------------------------------------------------------------------

SCALAR_TYPES = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64", "f8e4m3", "f8e5m2"]
ACCESS = ["read", "write", "read_write"]


def count(r, what):
    n = r.u32()
    need(n <= 1 << 20 and 2 * n <= r.remaining(), f"{r.what}: bad {what} count {n}")
    return n


# Range shapes (§4.1 "Expressions"): postfix bytecode, checked as FORMAT.md says.
RANGE_FLAG = 1 << 31
INT_OPS = {0x10: "+", 0x11: "-", 0x12: "*", 0x13: "/", 0x14: "%", 0x16: "cdiv", 0x17: "min", 0x18: "max"}
CMP_OPS = {0x20: "==", 0x21: "!=", 0x22: "<", 0x23: "<=", 0x24: ">", 0x25: ">="}
LOGIC_OPS = {0x26: "&&", 0x27: "||"}


def integer_scalar(param):
    return param[1] == 0 and param[2] <= 7


def decode_expr(r, params, condition, what):
    size = r.u16()
    need(1 <= size <= 4096, f"{what}: bad expression size {size}")
    code = r.take(size)
    ops, i, kinds = [], 0, []  # kinds: the stack, True for a condition
    while i < size:
        op = code[i]
        if op in (0x01, 0x02, 0x03):
            n = 8 if op == 0x01 else 2
            need(size - i - 1 >= n, f"{what}: truncated operand")
            arg = int.from_bytes(code[i + 1:i + 1 + n], "little", signed=(op == 0x01))
            if op == 0x02:
                need(arg < len(params) and integer_scalar(params[arg]), f"{what}: parameter {arg} is not an integer scalar")
            if op == 0x03:  # addr: a pointer parameter's address, in conditions only
                need(condition and arg < len(params) and params[arg][1] == 1, f"{what}: bad addr of parameter {arg}")
            kinds.append(False)
            need(len(kinds) <= 64, f"{what}: stack deeper than 64")
            ops.append((op, arg))
            i += 1 + n
            continue
        if op == 0x15:
            need(kinds and kinds[-1] is False, f"{what}: bad operand of neg")
        elif op in INT_OPS or op in CMP_OPS or op in LOGIC_OPS:
            takes = op in LOGIC_OPS
            need(len(kinds) >= 2 and kinds[-1] is takes and kinds[-2] is takes, f"{what}: bad operands of opcode {op}")
            kinds.pop()
            kinds[-1] = op in CMP_OPS or op in LOGIC_OPS
        else:
            need(False, f"{what}: unknown opcode {op}")
        ops.append((op, None))
        i += 1
    need(kinds == [condition], f"{what}: the code does not leave one {'condition' if condition else 'integer'}")
    return ops


def encode_expr(w, ops):
    code = bytearray()
    for op, arg in ops:
        code.append(op)
        if op == 0x01:
            code += struct.pack("<q", arg)
        elif op in (0x02, 0x03):
            code += struct.pack("<H", arg)
    w.u16(len(code))
    w.raw(bytes(code))


def compile_expr(text, params, condition):
    """kiln.toml's expression text -> ops, the canonical postfix of FORMAT.md §4.1."""
    tokens, i = [], 0
    while i < len(text):
        c = text[i]
        if c in " \t":
            i += 1
        elif c.isdigit():
            j = i
            while j < len(text) and text[j].isdigit():
                j += 1
            tokens.append(("num", int(text[i:j])))
            i = j
        elif c.isalpha() or c == "_":
            j = i
            while j < len(text) and (text[j].isalnum() or text[j] == "_"):
                j += 1
            tokens.append(("name", text[i:j]))
            i = j
        else:
            two = text[i:i + 2]
            if two in ("==", "!=", "<=", ">=", "&&", "||"):
                tokens.append(("op", two))
                i += 2
            else:
                tokens.append(("op", c))
                i += 1
    pos = [0]
    out = []
    peek = lambda: tokens[pos[0]] if pos[0] < len(tokens) else (None, None)

    def binary(levels, level):
        if level == len(levels):
            return unary()
        binary(levels, level + 1)
        while peek()[0] == "op" and peek()[1] in levels[level]:
            op = levels[level][peek()[1]]
            pos[0] += 1
            binary(levels, level + 1)
            out.append((op, None))

    def unary():
        if peek() == ("op", "-"):
            pos[0] += 1
            unary()
            out.append((0x15, None))
            return
        kind, v = peek()
        pos[0] += 1
        if kind == "num":
            out.append((0x01, v))
        elif kind == "name" and v == "addr" and peek() == ("op", "("):
            pos[0] += 1
            name = peek()[1]
            pos[0] += 1
            need(peek() == ("op", ")"), f"expression {text!r}: addr takes one name")
            pos[0] += 1
            out.append((0x03, [p[0] for p in params].index(name.encode())))
        elif kind == "name" and peek() == ("op", "("):
            pos[0] += 1
            top()
            need(peek() == ("op", ","), f"expression {text!r}: expected ','")
            pos[0] += 1
            top()
            need(peek() == ("op", ")"), f"expression {text!r}: expected ')'")
            pos[0] += 1
            out.append(({"cdiv": 0x16, "min": 0x17, "max": 0x18}[v], None))
        elif kind == "name":
            index = [p[0] for p in params].index(v.encode())
            out.append((0x02, index))
        else:
            need((kind, v) == ("op", "("), f"expression {text!r}: unexpected {v!r}")
            top()
            need(peek() == ("op", ")"), f"expression {text!r}: expected ')'")
            pos[0] += 1

    levels = [{"||": 0x27}, {"&&": 0x26}, {"==": 0x20, "!=": 0x21}, {"<": 0x22, "<=": 0x23, ">": 0x24, ">=": 0x25},
              {"+": 0x10, "-": 0x11}, {"*": 0x12, "/": 0x13, "%": 0x14}]
    top = lambda: binary(levels, 0)
    top()
    need(pos[0] == len(tokens), f"expression {text!r}: trailing tokens")
    return out


def launch_ops(value, params):
    return compile_expr(value, params, False) if isinstance(value, str) else [(0x01, value)]


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def eval_ops(ops, args):
    """Runs bytecode (§4.1 "Arithmetic") with `args` as the parameters' values: the integer, or
    None for a fault (overflow, division by zero)."""
    stack = []
    for op, arg in ops:
        if op == 0x01:
            stack.append(arg)
            continue
        if op in (0x02, 0x03):  # a pointer's value in `args` is its address
            stack.append(args[arg])
            continue
        if op == 0x15:
            a = stack.pop()
            stack.append(None if a is None else -a)
        else:
            b, a = stack.pop(), stack.pop()
            if a is None or b is None:
                stack.append(None)
            elif op in (0x13, 0x14, 0x16) and (b == 0 or (a == INT64_MIN and b == -1)):
                stack.append(None)  # INT64_MIN div, mod and cdiv -1 fault (§4.1)
            else:
                q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1) if op in (0x13, 0x14, 0x16) else 0
                rem = a - q * b
                stack.append({0x10: lambda: a + b, 0x11: lambda: a - b, 0x12: lambda: a * b, 0x13: lambda: q, 0x14: lambda: rem,
                              0x16: lambda: q + 1 if rem != 0 and (rem < 0) == (b < 0) else q,
                              0x17: lambda: min(a, b), 0x18: lambda: max(a, b), 0x20: lambda: int(a == b),
                              0x21: lambda: int(a != b), 0x22: lambda: int(a < b), 0x23: lambda: int(a <= b),
                              0x24: lambda: int(a > b), 0x25: lambda: int(a >= b), 0x26: lambda: int(a and b),
                              0x27: lambda: int(a or b)}[op]())
        if stack[-1] is not None and not INT64_MIN <= stack[-1] <= INT64_MAX:
            stack[-1] = None
    return stack[0]


def decode_kernels_bin(data):
    r = Reader(data, "kiln/kernels.bin")
    magic = r.take(8)
    need(magic in (b"KILNKTB2", b"KILNKTB3"), "kiln/kernels.bin: bad magic")
    # KILNKTB3: each record's code references carry their members' index entries (§4.1).
    t = {"code_entries": magic == b"KILNKTB3", "package": r.str16(), "kernel_revision": r.str16(), "sequence": r.u64()}
    t["toolchain"] = [(r.str16(), r.str16()) for _ in range(count(r, "toolchain"))]
    t["kernel_count"] = r.u32()
    need(t["kernel_count"] <= 1 << 20, "kiln/kernels.bin: bad kernel count")
    r.end()
    return t


def encode_kernels_bin(t):
    w = Writer()
    w.raw(b"KILNKTB3" if t["code_entries"] else b"KILNKTB2")
    w.str16(t["package"])
    w.str16(t["kernel_revision"])
    w.u64(t["sequence"])
    w.u32(len(t["toolchain"]))
    for key, value in t["toolchain"]:
        w.str16(key)
        w.str16(value)
    w.u32(t["kernel_count"])
    return bytes(w.out)


def decode_code_refs(r, n, with_entries, what):
    """n code references: (arch, path) each, and with_entries (a KILNKTB3 table) the code member's
    index entry in place of the path (§4.1), returned beside them (None without)."""
    code, entries = [], [] if with_entries else None
    for i in range(n):
        arch = r.str16()
        if not with_entries:
            code.append((arch, r.str16()))
            continue
        e = decode_entry(r, f"{what} code entry {i}")
        need(e["role"] == 2, f"{what} code entry {i}: not a code member's entry")
        need(e["offset"] >= 64 and e["offset"] % 64 == 0, f"{what} code entry {i}: offset {e['offset']} is not a member's")
        code.append((arch, e["path"]))
        entries.append(e)
    return code, entries


def encode_code_refs(w, code, entries):
    for i, (arch, file) in enumerate(code):
        w.str16(arch)
        if entries is None:
            w.str16(file)
        else:
            encode_entry(w, entries[i])


def without_code_entries(rec):
    """The record as kiln.toml derives it: its code references without the entries' copies."""
    rec = dict(rec, code_entries=None)
    if rec["launch"] is not None:
        rec["launch"] = dict(rec["launch"], variants=[dict(v, code_entries=None) for v in rec["launch"]["variants"]])
    return rec


def decode_record(data, name, with_entries=False):
    r = Reader(data, f"kiln/kernels/{name.decode()}")
    need(is_identifier(name), f"kernel name {name!r} is not an identifier")
    k = {"entry": r.str16(), "backend": r.str16(), "fallback": r.u8()}
    need(k["fallback"] in (0, 1), "bad fallback")
    k["sources"] = [r.str16() for _ in range(count(r, "source"))]
    k["ir"] = [r.str16() for _ in range(count(r, "ir"))]
    k["params"] = []
    for _ in range(count(r, "param")):
        p = (r.str16(), r.u8(), r.u8(), r.u8())
        need(p[1] in (0, 1) and p[2] < len(SCALAR_TYPES) and p[3] < len(ACCESS), "bad parameter")
        k["params"].append(p)
    k["code"], k["code_entries"] = decode_code_refs(r, count(r, "code"), with_entries, r.what)
    k["shapes"] = []
    for _ in range(count(r, "shape")):
        s = {"name": r.str16()}
        word = r.u32()
        s["range"] = bool(word & RANGE_FLAG)
        n = word & ~RANGE_FLAG
        need(n <= 1 << 20 and 2 * n <= r.remaining(), f"{r.what}: bad value count {n}")
        s["values"] = [(r.str16(), r.i64()) for _ in range(n)]
        if not s["range"]:
            s["grid"] = [r.u32() for _ in range(3)]
            s["block"] = [r.u32() for _ in range(3)]
            s["shared_mem"] = r.u32()
        else:
            what = f"{r.what} shape {s['name'].decode()}"
            s["ranges"] = []
            for _ in range(count(r, "range")):
                name, lo, hi = r.str16(), r.i64(), r.i64()
                need(any(p[0] == name and integer_scalar(p) for p in k["params"]) and lo <= hi, f"{what}: bad range {name!r}")
                s["ranges"].append((name, lo, hi))
            s["where"] = [decode_expr(r, k["params"], True, what + " where") for _ in range(count(r, "where"))]
            s["grid"] = [decode_expr(r, k["params"], False, what + " grid") for _ in range(3)]
            s["block"] = [decode_expr(r, k["params"], False, what + " block") for _ in range(3)]
            s["shared_mem"] = decode_expr(r, k["params"], False, what + " shared_mem")
        k["shapes"].append(s)
    k["rtol"], k["atol"] = r.u64(), r.u64()
    k["launch"] = decode_launch(r, k) if r.remaining() else None
    r.end()
    return k


def encode_record(k):
    w = Writer()
    w.str16(k["entry"])
    w.str16(k["backend"])
    w.u8(k["fallback"])
    for key in ("sources", "ir"):
        w.u32(len(k[key]))
        for s in k[key]:
            w.str16(s)
    w.u32(len(k["params"]))
    for name, is_pointer, type_, access in k["params"]:
        w.str16(name)
        w.u8(is_pointer)
        w.u8(type_)
        w.u8(access)
    w.u32(len(k["code"]))
    encode_code_refs(w, k["code"], k.get("code_entries"))
    w.u32(len(k["shapes"]))
    for s in k["shapes"]:
        w.str16(s["name"])
        w.u32(len(s["values"]) | (RANGE_FLAG if s["range"] else 0))
        for name, value in s["values"]:
            w.str16(name)
            w.i64(value)
        if not s["range"]:
            for v in s["grid"] + s["block"]:
                w.u32(v)
            w.u32(s["shared_mem"])
            continue
        w.u32(len(s["ranges"]))
        for name, lo, hi in s["ranges"]:
            w.str16(name)
            w.i64(lo)
            w.i64(hi)
        w.u32(len(s["where"]))
        for ops in s["where"] + s["grid"] + s["block"] + [s["shared_mem"]]:
            encode_expr(w, ops)
    w.u64(k["rtol"])
    w.u64(k["atol"])
    if k["launch"] is not None:
        encode_launch(w, k["launch"])
    return bytes(w.out)


# The launch extension (§4.1): kernel_args and shape clusters, after the tolerance.
ARG_KINDS = ["param", "value", "tensor_map", "scratch"]
SCALAR_SIZES = [1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8, 1, 1]  # SCALAR_TYPES' element sizes
TMAP_DTYPES = ["u8", "u16", "u32", "i32", "u64", "i64", "f16", "f32", "f64", "bf16", "f32_ftz", "tf32", "tf32_ftz"]
TMAP_SIZES = [1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4]
INTERLEAVE = ["none", "16B", "32B"]
SWIZZLE = ["none", "32B", "64B", "128B"]
L2_PROMOTION = ["none", "64B", "128B", "256B"]
OOB_FILL = ["zero", "nan"]
SCRATCH_PER = ["program", "launch"]


def decode_launch(r, k):
    params, what = k["params"], f"{r.what} launch extension"
    args = decode_args(r, params, what)
    cluster_count = r.u32()
    need(cluster_count <= len(k["shapes"]), f"{what}: cluster_count {cluster_count} over shape_count {len(k['shapes'])}")
    clusters = []
    for _ in range(cluster_count):
        c = (r.u32(), r.u32(), r.u32(), r.u32())
        need(c[0] < len(k["shapes"]) and (not clusters or clusters[-1][0] < c[0]),
             f"{what}: cluster shape indices not strictly ascending below shape_count")
        need(min(c[1:]) >= 1 and c[1] * c[2] * c[3] <= 8, f"{what}: cluster {c[1:]} of shape {c[0]}")
        clusters.append(c)
    # The variant extension follows when bytes remain (FORMAT.md §4.1).
    variants = decode_variants(r, k, what) if r.remaining() else []
    need(args or clusters or variants, f"{what}: arg_count and cluster_count both 0")
    return {"args": args, "clusters": clusters, "variants": variants}


def decode_variants(r, k, what):
    n = r.u32()
    need(1 <= n <= 64, f"{what}: variant_count {n} out of 1..64")
    variants, names = [], set()
    for _ in range(n):
        v = {"name": r.str16()}
        need(v["name"] and v["name"] not in names, f"{what}: variant name {v['name']!r} empty or repeated")
        names.add(v["name"])
        w = f"{what} variant {v['name'].decode()}"
        when_count = r.u32()
        need(1 <= when_count <= 16, f"{w}: when_count {when_count} out of 1..16")
        v["when"] = [decode_expr(r, k["params"], True, w + " when") for _ in range(when_count)]
        code_count = r.u32()
        need(code_count == len(k["code"]), f"{w}: code_count {code_count}, the record has {len(k['code'])}")
        v["code"], v["code_entries"] = decode_code_refs(r, code_count, k["code_entries"] is not None, w)
        need(all(v["code"][i][0] == k["code"][i][0] for i in range(code_count)), f"{w}: code archs not the record's, in order")
        own = r.u8()
        need(own in (0, 1), f"{w}: own_args {own}")
        v["args"] = decode_args(r, k["params"], w) if own else None
        need(v["args"] is None or len(v["args"]) > 0, f"{w}: own kernel_args with arg_count 0")
        variants.append(v)
    return variants


def decode_args(r, params, what):
    arg_count = r.u32()
    need(arg_count <= 256, f"{what}: arg_count {arg_count} over 256")
    args = []
    for i in range(arg_count):
        a = {"kind": r.u8()}
        need(a["kind"] < len(ARG_KINDS), f"{what}: entry {i} has kind {a['kind']}")
        a["name"] = r.str16()
        w = f"{what} entry {i} ({ARG_KINDS[a['kind']]})"
        if a["kind"] == 0:
            a["param"] = r.u16()
            need(a["param"] < len(params), f"{w}: parameter index {a['param']} past {len(params)}")
        elif a["kind"] == 1:
            a["type"] = r.u8()
            need(a["type"] <= 7, f"{w}: type {a['type']} is not an integer scalar type")
            a["value"] = decode_expr(r, params, False, w + " value")
        elif a["kind"] == 2:
            a["pointer"], a["dtype"], rank = r.u16(), r.u8(), r.u8()
            need(a["pointer"] < len(params) and params[a["pointer"]][1] == 1, f"{w}: pointer {a['pointer']} is not a pointer parameter")
            need(a["dtype"] < len(TMAP_DTYPES), f"{w}: dtype {a['dtype']} out of 0..12")
            need(TMAP_SIZES[a["dtype"]] == SCALAR_SIZES[params[a["pointer"]][2]],
                 f"{w}: dtype {TMAP_DTYPES[a['dtype']]} is not of the pointer's element size")
            need(1 <= rank <= 5, f"{w}: rank {rank} out of 1..5")
            a["dims"] = [decode_expr(r, params, False, w + " dims") for _ in range(rank)]
            a["strides"] = [decode_expr(r, params, False, w + " strides") for _ in range(rank - 1)]
            a["box"] = [r.u32() for _ in range(rank)]
            need(all(1 <= b <= 256 for b in a["box"]), f"{w}: box {a['box']} out of 1..256")
            a["element_strides"] = [r.u32() for _ in range(rank)]
            need(all(1 <= e <= 8 for e in a["element_strides"]), f"{w}: element_strides {a['element_strides']} out of 1..8")
            a["interleave"], a["swizzle"], a["l2_promotion"], a["oob_fill"] = r.u8(), r.u8(), r.u8(), r.u8()
            for field, names in (("interleave", INTERLEAVE), ("swizzle", SWIZZLE), ("l2_promotion", L2_PROMOTION),
                                 ("oob_fill", OOB_FILL)):
                need(a[field] < len(names), f"{w}: {field} {a[field]} out of 0..{len(names) - 1}")
        else:
            a["bytes"] = decode_expr(r, params, False, w + " bytes")
            a["align"], a["per"] = r.u32(), r.u8()
            need(1 <= a["align"] <= 4096 and a["align"] & (a["align"] - 1) == 0, f"{w}: align {a['align']}")
            need(a["per"] < len(SCRATCH_PER), f"{w}: per {a['per']} out of 0..1")
        args.append(a)
    need(sum(a["kind"] == 2 for a in args) <= 16, f"{what}: more than 16 tensor maps")
    need(sum(a["kind"] == 3 for a in args) <= 4, f"{what}: more than 4 scratch entries")
    return args


def encode_launch(w, launch):
    encode_args(w, launch["args"])
    w.u32(len(launch["clusters"]))
    for c in launch["clusters"]:
        for v in c:
            w.u32(v)
    if launch.get("variants"):
        w.u32(len(launch["variants"]))
        for v in launch["variants"]:
            w.str16(v["name"])
            w.u32(len(v["when"]))
            for ops in v["when"]:
                encode_expr(w, ops)
            w.u32(len(v["code"]))
            encode_code_refs(w, v["code"], v.get("code_entries"))
            w.u8(0 if v["args"] is None else 1)
            if v["args"] is not None:
                encode_args(w, v["args"])


def encode_args(w, args):
    w.u32(len(args))
    for a in args:
        w.u8(a["kind"])
        w.str16(a["name"])
        if a["kind"] == 0:
            w.u16(a["param"])
        elif a["kind"] == 1:
            w.u8(a["type"])
            encode_expr(w, a["value"])
        elif a["kind"] == 2:
            w.u16(a["pointer"])
            w.u8(a["dtype"])
            w.u8(len(a["dims"]))
            for ops in a["dims"] + a["strides"]:
                encode_expr(w, ops)
            for v in a["box"] + a["element_strides"]:
                w.u32(v)
            for field in ("interleave", "swizzle", "l2_promotion", "oob_fill"):
                w.u8(a[field])
        elif a["kind"] == 3:
            encode_expr(w, a["bytes"])
            w.u32(a["align"])
            w.u8(a["per"])


def launch_from_manifest(k, params):
    """The launch extension kiln.toml's `kernel_args`, shape `cluster` and `variant` keys derive
    (MANIFEST.md)."""
    clusters = [(i, *(list(s["cluster"]) + [1] * (3 - len(s["cluster"]))))
                for i, s in enumerate(k.get("shape", [])) if "cluster" in s]
    variants = []
    for v in k.get("variant", []):
        by_arch = {c["arch"]: c["file"] for c in v["code"]}
        need(sorted(by_arch) == sorted(c["arch"] for c in k["code"]), f"variant {v['name']}: archs not the kernel's")
        variants.append({"name": v["name"].encode(), "when": [compile_expr(c, params, True) for c in v["when"]],
                         "code": [(c["arch"].encode(), by_arch[c["arch"]].encode()) for c in k["code"]],
                         "code_entries": None,
                         "args": args_from_manifest(v["kernel_args"], params) if "kernel_args" in v else None})
    return {"args": args_from_manifest(k.get("kernel_args", []), params), "clusters": clusters, "variants": variants}


def args_from_manifest(entries, params):
    """kernel_args entries as kiln.toml writes them, in the record's form."""
    names = [p[0] for p in params]
    index = lambda name, what: (need(name.encode() in names, f"kernel_args: {what} {name!r} is not a parameter"),
                                names.index(name.encode()))[1]
    args = []
    for e in entries:
        if isinstance(e, str):
            e = {"name": e}
        a = {"name": e["name"].encode()}
        if "tensor_map" in e:
            t = e["tensor_map"]
            a["kind"], a["pointer"] = 2, index(t["pointer"], "pointer")
            if "dtype" in t:
                a["dtype"] = TMAP_DTYPES.index(t["dtype"])
            else:
                own = SCALAR_TYPES[params[a["pointer"]][2]]
                need(own in TMAP_DTYPES, f"kernel_args {e['name']}: pointer dtype {own} has no default tensor map dtype")
                a["dtype"] = TMAP_DTYPES.index(own)
            rank = len(t["dims"])
            a["dims"] = [launch_ops(v, params) for v in t["dims"]]
            a["strides"] = [launch_ops(v, params) for v in t.get("strides", [])]
            a["box"] = list(t["box"])
            a["element_strides"] = list(t.get("element_strides", [1] * rank))
            a["interleave"] = INTERLEAVE.index(t.get("interleave", "none"))
            a["swizzle"] = SWIZZLE.index(t.get("swizzle", "none"))
            a["l2_promotion"] = L2_PROMOTION.index(t.get("l2_promotion", "none"))
            a["oob_fill"] = OOB_FILL.index(t.get("oob_fill", "zero"))
        elif "scratch" in e:
            t = e["scratch"]
            a["kind"], a["bytes"] = 3, launch_ops(t["bytes"], params)
            a["align"], a["per"] = t.get("align", 256), SCRATCH_PER.index(t.get("per", "program"))
        elif "value" in e:
            a["kind"], a["type"], a["value"] = 1, SCALAR_TYPES.index(e["type"]), launch_ops(e["value"], params)
        else:
            a["kind"], a["param"] = 0, index(e["name"], "name")
        args.append(a)
    return args


def double_bits(x):
    return struct.unpack("<Q", struct.pack("<d", float(x)))[0]


def table_from_manifest(m):
    """The kernel table FORMAT.md §4.1 derives from kiln.toml (parsed by tomllib)."""
    enc = lambda s: s.encode("utf-8")
    pkg = m["package"]
    table = {"package": enc(pkg["name"]), "kernel_revision": enc(pkg["kernel_revision"]), "sequence": pkg["sequence"],
             "toolchain": sorted((enc(k), enc(v)) for k, v in m.get("toolchain", {}).items()),
             "kernel_count": len(m["kernel"])}
    records = {}
    for k in m["kernel"]:
        params = []
        for p in k.get("params", []):
            if p["type"] == "ptr":
                params.append((enc(p["name"]), 1, SCALAR_TYPES.index(p["dtype"]), ACCESS.index(p.get("access", "read_write"))))
            else:
                params.append((enc(p["name"]), 0, SCALAR_TYPES.index(p["type"]), 0))
        shapes = []
        for s in k.get("shape", []):
            pad = lambda dims: list(dims) + [1] * (3 - len(dims))
            values = sorted((enc(n), v) for n, v in s.get("values", {}).items())
            strings = any(isinstance(v, str) for v in list(s["grid"]) + list(s["block"]) + [s.get("shared_mem", 0)])
            if not (s.get("ranges") or s.get("where") or strings):
                shapes.append({"name": enc(s["name"]), "range": False, "values": values,
                               "grid": pad(s["grid"]), "block": pad(s["block"]), "shared_mem": s.get("shared_mem", 0)})
                continue
            shapes.append({"name": enc(s["name"]), "range": True, "values": values,
                           "ranges": sorted((enc(n), lo, hi) for n, (lo, hi) in s.get("ranges", {}).items()),
                           "where": [compile_expr(c, params, True) for c in s.get("where", [])],
                           "grid": [launch_ops(v, params) for v in pad(s["grid"])],
                           "block": [launch_ops(v, params) for v in pad(s["block"])],
                           "shared_mem": launch_ops(s.get("shared_mem", 0), params)})
        tol = k.get("tolerance", {})
        launch = None
        if "kernel_args" in k or "variant" in k or any("cluster" in s for s in k.get("shape", [])):
            launch = launch_from_manifest(k, params)
        records[enc(k["name"])] = {
            "entry": enc(k["entry"]), "backend": enc(k["backend"]),
            "fallback": {"reference": 0, "refuse": 1}[k.get("fallback", "reference")],
            "sources": [enc(s) for s in k.get("sources", [])], "ir": [enc(s) for s in k.get("ir", [])],
            "params": params, "code": [(enc(c["arch"]), enc(c["file"])) for c in k["code"]], "code_entries": None, "shapes": shapes,
            "rtol": double_bits(tol.get("rtol", 1e-5)), "atol": double_bits(tol.get("atol", 1e-6)),
            "launch": launch}
    return table, records


# ---- §5 signature block -----------------------------------------------------------------

ATTRIBUTE_KEYS = ["kiln-signature", "archive", "package", "sequence", "key-id", "signer", "created"]
HEX = set(b"0123456789abcdef")


def decimal(v, what):
    need(1 <= len(v) <= 20 and all(c in b"0123456789" for c in v) and (v == b"0" or v[0] != ord("0")),
         f"signed attributes: bad {what}")
    n = int(v)
    need(n < 1 << 64, f"signed attributes: {what} over 2^64-1")
    return n


def decode_attributes(text):
    values, pos = [], 0
    for key in ATTRIBUTE_KEYS:
        prefix = key.encode() + b": "
        need(text[pos:pos + len(prefix)] == prefix, f"signed attributes: expected '{key}: '")
        pos += len(prefix)
        nl = text.find(b"\n", pos)
        need(nl >= 0, f"signed attributes: line '{key}' has no LF")
        values.append(text[pos:nl])
        pos = nl + 1
    need(pos == len(text), "signed attributes: bytes after the created line")
    a = dict(zip(ATTRIBUTE_KEYS, values))
    need(a["kiln-signature"] == b"1", "signed attributes: version")
    need(len(a["archive"]) == 71 and a["archive"].startswith(b"sha256:") and all(c in HEX for c in a["archive"][7:]),
         "signed attributes: archive")
    check_package(a["package"], "signed attributes")
    a["sequence"] = decimal(a["sequence"], "sequence")
    need(len(a["key-id"]) == 32 and all(c in HEX for c in a["key-id"]), "signed attributes: key-id")
    need(1 <= len(a["signer"]) <= 128 and all(0x20 <= c <= 0x7E for c in a["signer"]), "signed attributes: signer")
    a["created"] = decimal(a["created"], "created")
    return a


def encode_attributes(a):
    return b"".join(key.encode() + b": " + (str(a[key]).encode() if isinstance(a[key], int) else a[key]) + b"\n"
                    for key in ATTRIBUTE_KEYS)


def decode_signatures(data):
    need(len(data) <= 1 << 20, "signature block: over 1 MiB")
    r = Reader(data, "signature block")
    need(r.take(8) == b"KILNSIG1", "signature block: bad magic")
    n = r.u32()
    need(n <= 64, "signature block: more than 64 signatures")
    records = []
    for _ in range(n):
        text = r.str16()
        need(len(text) <= 2048, "signature block: attributes over 2048 bytes")
        a = decode_attributes(text)
        need(encode_attributes(a) == text, "signed attributes: not canonical")
        records.append({"text": text, "attributes": a, "signature": r.take(64)})
    r.end()
    return records


def encode_signatures(records):
    w = Writer()
    w.raw(b"KILNSIG1")
    w.u32(len(records))
    for rec in records:
        w.str16(encode_attributes(rec["attributes"]))
        w.raw(rec["signature"])
    return bytes(w.out)


# ---- §5.3 key files, and Ed25519 verification (RFC 8032 §5.1.7) ---------------------------

SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")


def read_public_key(path):
    import base64
    text = open(path, "rb").read().decode("ascii")
    begin, end = "-----BEGIN PUBLIC KEY-----", "-----END PUBLIC KEY-----"
    need(begin in text and end in text, f"{path}: not a PEM public key")
    body = "".join(text.split(begin, 1)[1].split(end, 1)[0].split())
    der = base64.b64decode(body, validate=True)
    need(len(der) == 44 and der.startswith(SPKI_PREFIX), f"{path}: not an Ed25519 SubjectPublicKeyInfo")
    return der[12:]


def key_id(raw):
    return sha256(raw)[:16].hex().encode()


P = 2**255 - 19
L = 2**252 + 27742317777372353535851937790883648493
D = -121665 * pow(121666, P - 2, P) % P
SQRT_M1 = pow(2, (P - 1) // 4, P)


def point_add(a, b):
    (x1, y1, z1, t1), (x2, y2, z2, t2) = a, b
    aa, bb = (y1 - x1) * (y2 - x2) % P, (y1 + x1) * (y2 + x2) % P
    cc, dd = 2 * D * t1 * t2 % P, 2 * z1 * z2 % P
    e, f, g, h = bb - aa, dd - cc, dd + cc, bb + aa
    return (e * f % P, g * h % P, f * g % P, e * h % P)


def scalar_mult(k, pt):
    acc = (0, 1, 1, 0)
    while k:
        if k & 1:
            acc = point_add(acc, pt)
        pt = point_add(pt, pt)
        k >>= 1
    return acc


def decode_point(b):
    y = int.from_bytes(b, "little") & ((1 << 255) - 1)
    sign = b[31] >> 7
    if y >= P:
        return None
    u, v = (y * y - 1) % P, (D * y * y + 1) % P
    x = u * pow(v, 3, P) * pow(u * pow(v, 7, P), (P - 5) // 8, P) % P
    if v * x * x % P == (-u) % P:
        x = x * SQRT_M1 % P
    elif v * x * x % P != u:
        return None
    if x == 0 and sign:
        return None
    if x & 1 != sign:
        x = P - x
    return (x, y, 1, x * y % P)


def encode_point(pt):
    x, y, z, _ = pt
    zi = pow(z, P - 2, P)
    x, y = x * zi % P, y * zi % P
    return (y | (x & 1) << 255).to_bytes(32, "little")


BASE_Y = 4 * pow(5, P - 2, P) % P
BASE = decode_point(BASE_Y.to_bytes(32, "little"))


def ed25519_verify(public, message, signature):
    a = decode_point(public)
    s = int.from_bytes(signature[32:], "little")
    if a is None or s >= L:
        return False
    k = int.from_bytes(hashlib.sha512(signature[:32] + public + message).digest(), "little") % L
    minus_a = ((P - a[0]) % P, a[1], a[2], (P - a[3]) % P)
    return encode_point(point_add(scalar_mult(s, BASE), scalar_mult(k, minus_a))) == signature[:32]


def ed25519_scalar(seed):
    h = hashlib.sha512(seed).digest()
    return (int.from_bytes(h[:32], "little") & ((1 << 254) - 8)) | (1 << 254)


def ed25519_sign(seed, message):
    """RFC 8032 §5.1.6: for the records the launch checks show kiln (rebuild_archive)."""
    h = hashlib.sha512(seed).digest()
    a = ed25519_scalar(seed)
    public = encode_point(scalar_mult(a, BASE))
    r = int.from_bytes(hashlib.sha512(h[32:] + message).digest(), "little") % L
    big_r = encode_point(scalar_mult(r, BASE))
    k = int.from_bytes(hashlib.sha512(big_r + public + message).digest(), "little") % L
    return big_r + ((r + k * a) % L).to_bytes(32, "little")


def read_private_seed(path):
    """§5.3: the 48-byte PKCS#8 OneAsymmetricKey kiln keygen writes; its last 32 bytes are the seed."""
    import base64
    text = open(path, "rb").read().decode("ascii")
    begin, end = "-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----"
    need(begin in text and end in text, f"{path}: not a PEM private key")
    der = base64.b64decode("".join(text.split(begin, 1)[1].split(end, 1)[0].split()), validate=True)
    need(len(der) == 48 and der.startswith(bytes.fromhex("302e020100300506032b657004220420")), f"{path}: not kiln's Ed25519 key layout")
    return der[16:]


# ---- the whole archive ------------------------------------------------------------------

def first_difference(got, want, where):
    """Names the first place where two decoded structures differ, for the failure message."""
    if isinstance(got, dict) and isinstance(want, dict):
        for k in sorted(set(got) | set(want), key=repr):
            if got.get(k) != want.get(k):
                return first_difference(got.get(k), want.get(k), f"{where}[{k!r}]")
    if isinstance(got, (list, tuple)) and isinstance(want, (list, tuple)) and len(got) == len(want):
        for i, (g, w) in enumerate(zip(got, want)):
            if g != w:
                return first_difference(g, w, f"{where}[{i}]")
    return f"{where}: the archive holds {got!r}, kiln.toml derives {want!r}"


def read_archive(data, trusted_keys, canonical=True):
    """Reads and checks one archive per FORMAT.md; returns what it decoded. Raises Refused.
    `canonical`: also require the index to be the writer's (§3 "How the writer splits"), as it is
    in every archive kiln writes; a reader accepts any other split that obeys the rules."""
    h = decode_header(data)
    need(encode_header(h) == data[:64], "header: does not re-encode to its bytes")
    size = len(data)
    if h["sparse"]:
        data = SparseView(data, h)
    io, isz = h["index_offset"], h["index_size"]
    head_bytes = data[io:io + h["index_head_size"]]
    digest = "sha256:" + hashlib.sha256(head_bytes).hexdigest()

    sig_bytes = data[io + isz:]
    signatures = decode_signatures(sig_bytes)
    need(encode_signatures(signatures) == sig_bytes, "signature block: does not re-encode to its bytes")
    valid = set()
    for rec in signatures:
        a = rec["attributes"]
        need(a["archive"].decode() == digest, f"signature by {a['key-id']}: names another archive")
        key = trusted_keys.get(a["key-id"])
        if key is not None:
            need(ed25519_verify(key, rec["text"], rec["signature"]), f"signature by {a['key-id']}: does not verify")
            valid.add(a["key-id"])

    head = decode_head(head_bytes, isz, io)
    for rec in signatures:
        a = rec["attributes"]
        need(a["package"] == head["package"] and a["sequence"] == head["sequence"],
             "a signature names another package or sequence")

    index = data[io:io + isz]
    entries, pages = decode_index(index, head)
    lookup_checks(index, head, entries)
    if canonical:
        form = lambda tree, height, roots: describe_split(
            "tree" if tree else "one-level", height, [len(n["entries"]) for n in preorder(roots) if n["level"] == 0])
        need(encode_index(head, entries)[0] == index,
             "index: does not re-encode to its bytes; it has a " + describe_split(
                 head["form"], head["height"], [p["entry_count"] for p in pages if p["level"] == 0]) +
             "; the writer's split (§3) gives a " + form(*writer_tree(entries)))
    by_path = {e["path"]: e for e in entries}
    need(b"kiln.toml" in by_path and by_path[b"kiln.toml"]["role"] == 1, "index: no kiln.toml with role manifest")

    # A sparse archive (§9): every extent begins at a member's offset or the index, and ends at one
    # or at the end; each member is then held whole (its padding too) or absent.
    present = {e["path"] for e in entries}
    if h["sparse"]:
        edges = {e["offset"] for e in entries}
        for o, n, _ in data.extents:
            need(o in edges or o == io, f"extent at {o}: begins inside a member's slot")
            need(o + n in edges or o + n == len(data), f"extent at {o}: ends inside a member's slot")
        present = {e["path"] for e in entries if data.where(e["offset"], e["stored_size"]) is not None}

    # Padding: zero from each member's end to the next member (or the index).
    for i, e in enumerate(entries):
        if e["path"] not in present:
            continue
        end = e["offset"] + e["stored_size"]
        nxt = entries[i + 1]["offset"] if i + 1 < len(entries) else io
        need(data[end:nxt] == bytes(nxt - end), f"member {e['path']!r}: padding not zero")

    contents = {e["path"]: member_content(data, e) for e in entries if e["path"] in present}
    for e in entries:
        need(e["path"] in present or (e["role"] not in (1, 6)), f"{e['path']!r}: absent, but kiln.toml and meta members "
             "are read by a full verification")

    # §4.1: the table, decoded, re-encoded byte for byte, and derived from kiln.toml.
    need(b"kiln/kernels.bin" in by_path and by_path[b"kiln/kernels.bin"]["role"] == 6, "no kiln/kernels.bin (meta)")
    table_bytes = contents[b"kiln/kernels.bin"]
    table = decode_kernels_bin(table_bytes)
    need(encode_kernels_bin(table) == table_bytes, "kiln/kernels.bin: does not re-encode to its bytes")
    for k in ("package", "kernel_revision", "sequence"):
        need(table[k] == head[k], f"kiln/kernels.bin: {k} differs from the index")
    records = {}
    for e in entries:
        if e["path"].startswith(b"kiln/kernels/"):
            name = e["path"][len(b"kiln/kernels/"):]
            need(b"/" not in name and e["role"] == 6, f"{e['path']!r} is not a kernel record")
            records[name] = decode_record(contents[e["path"]], name, table["code_entries"])
            need(encode_record(records[name]) == contents[e["path"]], f"{e['path']!r}: does not re-encode to its bytes")
    need(len(records) == table["kernel_count"], "kernel_count differs from the number of kernel records")

    manifest = tomllib.loads(contents[b"kiln.toml"].decode("ascii"))
    derived_table, derived_records = table_from_manifest(manifest)
    derived_table["code_entries"] = table["code_entries"]  # the form is the writer's choice; both derive alike
    need(derived_table == table, "kiln/kernels.bin differs from what kiln.toml derives: " +
         first_difference(table, derived_table, "table"))
    plain = {name: without_code_entries(rec) for name, rec in records.items()}
    need(derived_records == plain, "the kernel records differ from what kiln.toml derives: " +
         first_difference(plain, derived_records, "kernel"))
    # A KILNKTB3 record's copies are the index's entries of those paths, field for field (§4.1).
    for name, rec in records.items():
        copies = [(rec["code"], rec["code_entries"])]
        copies += [(v["code"], v["code_entries"]) for v in (rec["launch"] or {}).get("variants", [])]
        for code, copied in copies:
            for (_, file), copy in zip(code, copied or []):
                need(file in by_path and copy == by_path[file], f"kernel {name!r}: its copy of {file!r}'s entry is not the index's")
    for name, rec in derived_records.items():
        if table["code_entries"]:
            rec = dict(records[name])  # the derived record with the copies, which were just checked
        need(encode_record(rec) == contents[b"kiln/kernels/" + name], f"kernel {name!r}: derived record bytes differ")

    # The table names members of the right roles and backends (§3).
    backend_of = {b"cuda": {1}, b"hip": {2}, b"any": {1, 2}}
    for name, rec in records.items():
        for _, file in rec["code"]:
            need(file in by_path and by_path[file]["role"] == 2, f"kernel {name!r}: code {file!r} is not a code member")
            need(by_path[file]["backend"] in backend_of[rec["backend"]], f"kernel {name!r}: {file!r} has another backend")
        for file in rec["sources"]:
            need(by_path.get(file, {}).get("role") == 3, f"kernel {name!r}: source {file!r} is not a source member")
        for file in rec["ir"]:
            need(by_path.get(file, {}).get("role") in (2, 4), f"kernel {name!r}: ir {file!r} is not an ir member")

    return {"header": h, "digest": digest, "head": head, "entries": entries, "pages": pages, "signatures": signatures,
            "valid_keys": valid, "table": table, "records": records, "manifest": manifest, "size": size,
            "present": present}


# ---- comparison with what kiln reports --------------------------------------------------

def compare_with_kiln(kiln, path, a):
    def run(*args):
        out = subprocess.run([kiln, *args, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
        need(out.returncode == 0, f"kiln {' '.join(args)} failed: {out.stderr.decode(errors='replace')}")
        return out.stdout.decode()

    got = run("digest").strip()
    need(got == a["digest"], f"digest: kiln says {got}, FORMAT.md gives {a['digest']}")
    j = json.loads(run("inspect", "--json"))

    def same(field, mine, kilns):
        need(mine == kilns, f"{field}: this reader decodes {mine!r}, kiln inspect says {kilns!r}")

    same("digest", a["digest"], j["digest"])
    same("size", a["size"], j["size"])
    for k in ("package", "kernel_revision"):
        same(k, a["head"][k].decode(), j[k])
    same("sequence", a["head"]["sequence"], j["sequence"])
    same("signature count", len(a["signatures"]), len(j["signatures"]))
    for rec, js in zip(a["signatures"], j["signatures"]):
        at = rec["attributes"]
        same("signature", (at["key-id"].decode(), at["signer"].decode(), at["created"]),
             (js["key_id"], js["signer"], js["created"]))
    same("member count", len(a["entries"]), len(j["members"]))
    same("sparse", a["header"]["sparse"], j["sparse"])
    same("members present", [e["path"] in a["present"] for e in a["entries"]], [m["present"] for m in j["members"]])
    names = {"role": ROLES, "backend": BACKENDS, "kind": KINDS, "compression": COMPRESSIONS}
    for e, je in zip(a["entries"], j["members"]):
        for f in ENTRY_FIELDS:
            v = e[f]
            if f in names:
                v = names[f][v]
            elif f.endswith("sha256"):
                v = v.hex()
            elif isinstance(v, bytes):
                v = v.decode()
            same(f"member {e['path'].decode()} {f}", v, je[f])
    # kiln lists kernels in kiln.toml's order; the table is sorted by name.
    same("kernel names", sorted(n.decode() for n in a["records"]), sorted(k["name"] for k in j["kernels"]))
    for jk in j["kernels"]:
        rec = a["records"][jk["name"].encode()]
        same(f"kernel {jk['name']}", (rec["entry"].decode(), rec["backend"].decode(), ["reference", "refuse"][rec["fallback"]],
                                      [{"arch": c.decode(), "file": f.decode()} for c, f in rec["code"]],
                                      [s["name"].decode() for s in rec["shapes"]]),
             (jk["entry"], jk["backend"], jk["fallback"], jk["code"], jk["shapes"]))
        compare_launch_with_kiln(same, jk, rec)
    # The toolchain in kernels.bin's order, which must be the order kiln itself uses.
    same("toolchain", [(k.decode(), v.decode()) for k, v in a["table"]["toolchain"]], list(j["toolchain"].items()))


def compare_launch_with_kiln(same, jk, rec):
    """The launch extension as kiln inspect shows it: the fields by name, each expression (which
    kiln prints as text) by its values at a few calls, compiled here from kiln's text."""
    what = f"kernel {jk['name']}"
    launch = rec["launch"] or {"args": [], "clusters": []}
    clusters = {c[0]: list(c[1:]) for c in launch["clusters"]}
    same(f"{what} clusters", [clusters.get(i) for i in range(len(rec["shapes"]))],
         [s.get("cluster") for s in jk["shape_specs"]])
    same(f"{what} kernel_args count", len(launch["args"]), len(jk.get("kernel_args", [])))
    same(f"{what} variants (name, files)",
         [(v["name"].decode(), [f.decode() for _, f in v["code"]]) for v in launch.get("variants", [])],
         [(v["name"], [c["file"] for c in v["code"]]) for v in jk.get("variants", [])])
    params = rec["params"]
    scalars = [i for i, p in enumerate(params) if integer_scalar(p)]
    calls = [{i: [3, 64, 1000, -9, 0][(n + j) % 5] for j, i in enumerate(scalars)} for n in range(5)]
    for n, c in enumerate(calls):  # pointers at aligned and misaligned addresses, for addr()
        c.update({i: [1 << 40, (1 << 40) + 4, (1 << 40) + 16][(n + i) % 3] for i, p in enumerate(params) if p[1] == 1})

    def same_expr(field, ops, text):
        theirs = launch_ops(text, params) if isinstance(text, str) else [(0x01, text)]
        same(field, [eval_ops(ops, c) for c in calls], [eval_ops(theirs, c) for c in calls])

    for i, (a, ja) in enumerate(zip(launch["args"], jk.get("kernel_args", []))):
        w = f"{what} kernel_args[{i}]"
        same(f"{w} name, kind", (a["name"].decode(), ARG_KINDS[a["kind"]]), (ja["name"], ja["kind"]))
        if a["kind"] == 0:
            same(f"{w} param", params[a["param"]][0].decode(), ja["param"])
        elif a["kind"] == 1:
            same(f"{w} type", SCALAR_TYPES[a["type"]], ja["type"])
            same_expr(f"{w} value", a["value"], ja["value"])
        elif a["kind"] == 2:
            same(f"{w} tensor map", (params[a["pointer"]][0].decode(), TMAP_DTYPES[a["dtype"]], a["box"], a["element_strides"],
                                     INTERLEAVE[a["interleave"]], SWIZZLE[a["swizzle"]], L2_PROMOTION[a["l2_promotion"]],
                                     OOB_FILL[a["oob_fill"]], len(a["dims"]), len(a["strides"])),
                 (ja["pointer"], ja["dtype"], ja["box"], ja["element_strides"], ja["interleave"], ja["swizzle"],
                  ja["l2_promotion"], ja["oob_fill"], len(ja["dims"]), len(ja["strides"])))
            for d, (ops, text) in enumerate(zip(a["dims"] + a["strides"], ja["dims"] + ja["strides"])):
                same_expr(f"{w} dims/strides[{d}]", ops, text)
        else:
            same(f"{w} scratch", (a["align"], SCRATCH_PER[a["per"]]), (ja["align"], ja["per"]))
            same_expr(f"{w} bytes", a["bytes"], ja["bytes"])


# ---- the index alone: synthetic indexes, every split and each rule of §3 broken once --------

SYNTHETIC_HEAD = {"sequence": 7, "package": b"synthetic", "kernel_revision": b"r1"}


def synthetic_entries(n):
    """n entries as a writer would index them, with no archive behind them: kiln.toml and
    kiln/kernels.bin, sources before and after them, and a run of empty members (entries 40..109)
    so that several pages in a row begin at one offset. Returns (entries, index_offset)."""
    paths = sorted([b"kiln.toml", b"kiln/kernels.bin"] + [b"a/%05d.cu" % i for i in range(n // 2 - 1)] +
                   [b"z/%05d.cu" % i for i in range(n - n // 2 - 1)])
    entries, offset = [], 64
    for i, path in enumerate(paths):
        size = 0 if i % 5 == 0 or 40 <= i < 110 else 1 + (i * 37) % 200
        digest = sha256(path)
        entries.append({"path": path, "role": 1 if path == b"kiln.toml" else 6 if path.startswith(b"kiln/") else 3,
                        "backend": 0, "kind": 0, "compression": 0, "arch": b"", "offset": offset, "stored_size": size,
                        "content_size": size, "stored_sha256": digest, "content_sha256": digest})
        offset = align64(offset + size)
    return entries, offset


def breadth_first(nodes):
    while nodes:
        yield from nodes
        nodes = [c for n in nodes for c in n.get("children") or []]


def other_index(head, entries, per_page=WRITER_PAGE_ENTRIES, fanout=WRITER_FANOUT, form=None, tweak=None, fields=None,
                head_extra=b"", extra=b"", layout=preorder, table="writer"):
    """An index over `entries`: the writer's split, or (per_page, fanout) another; `form`
    "tree-1" puts a tree head of height 1 over the entry pages, "one-level" a one-level head;
    a tree head carries kiln/kernels.bin's entry where the entries have it (KILNIDX4), or
    `table` (an entry, or None for a KILNIDX3 head); `tweak` (seal), `fields` (encode_tree),
    `head_extra`, `extra` (bytes after the head, after the pages) and `layout` (the order of the
    pages) break it. Returns (index, index_head_size, roots)."""
    tree, height, roots = writer_tree(entries, per_page, fanout)
    if form is not None:
        tree, height, roots = form == "tree-1", 1, [n for n in preorder(roots) if n["level"] == 0]
    table = table_entry(entries) if table == "writer" else table
    head_bytes, _ = encode_tree(head, tree, height, roots, tweak, fields, table=table if tree else None)
    return head_bytes + head_extra + b"".join(n["data"] for n in layout(roots)) + extra, len(head_bytes) + len(head_extra), roots


def at(name, change):
    """A tweak (seal) that changes the page `name` ("L<level>#<index in level>") or its reference."""
    return lambda node: change(node) if node["name"] == name else None


def set_ref(**fields):
    """A change (for `at`) to a page's reference: each field a value, or a function of the reference."""
    return lambda node: node["ref"].update({k: v(node["ref"]) if callable(v) else v for k, v in fields.items()})


def set_page(change):
    """A change (for `at`) to a page's bytes, its reference kept consistent."""
    return lambda node: set_page_bytes(node, change(node["data"]))


def last_leaf(node):
    while node["level"]:
        node = node["children"][-1]
    return node


def synthetic_index_checks():
    """Indexes built here, decoded here: the writer's split at its boundaries and other splits are
    accepted (the same entries back, every lookup agreeing), and each rule of §3 broken once is
    refused, with the rule named. Returns the number of indexes checked."""
    def decode(index, head_size, index_offset):
        head = decode_head(index[:head_size], len(index), index_offset)
        return (head, *decode_index(index, head))

    checked = 0

    def accept(what, entries, index_offset, want_form, want_height, **kw):
        nonlocal checked
        index, head_size, roots = other_index(SYNTHETIC_HEAD, entries, **kw)
        try:
            head, got, pages = decode(index, head_size, index_offset)
            need(got == entries, "it decodes other entries")
            need((head["form"], head["height"]) == (want_form, want_height),
                 f"a {head['form']} head of height {head['height']}")
            lookup_checks(index, head, entries)
            if not kw:
                need(encode_index(SYNTHETIC_HEAD, got) == (index, head_size), "it does not re-encode to its bytes")
        except Refused as e:
            raise Refused(f"self-check: the reader refused a synthetic index with {what} "
                          f"({want_form}, height {want_height}): {e}")
        checked += 1
        return roots

    # The writer's split on each side of WRITER_HEAD entry pages (of at most WRITER_PAGE_ENTRIES
    # entries): one level of pages at WRITER_HEAD (under a KILNIDX4 head: the entries have
    # kiln/kernels.bin), a tree at one more, its reference pages of at most WRITER_FANOUT
    # references, the kiln.toml page alone in one.
    def page_count(n):
        return -(-(n // 2 - 1) // WRITER_PAGE_ENTRIES) + 1 + -(-(n - n // 2 - 1) // WRITER_PAGE_ENTRIES)
    n65 = next(n for n in range(4, 4096) if page_count(n) == WRITER_HEAD + 1)
    entries, io = synthetic_entries(n65 - 1)
    accept(f"{WRITER_HEAD} entry pages", entries, io, "tree", 1)
    accept(f"{WRITER_HEAD} entry pages, no kiln/kernels.bin", [e for e in entries if e["path"] != TABLE_PATH], io,
           "one-level", 1)
    entries, io = synthetic_entries(n65)
    roots = accept(f"{WRITER_HEAD + 1} entry pages", entries, io, "tree", 2)
    sizes = [len(n["children"]) for n in roots]
    alone = [len(n["children"]) for n in roots if node_first_path(n) == b"kiln.toml"]
    need(sum(sizes) == WRITER_HEAD + 1 and max(sizes) <= WRITER_FANOUT and alone == [1] and len(roots) <= 3,
         f"self-check: {WRITER_HEAD + 1} entry pages not under reference pages of at most {WRITER_FANOUT}, the "
         f"kiln.toml page alone: {sizes}")

    entries, io = synthetic_entries(200)
    accept("the writer's split", entries, io, "tree", 2)
    accept("a tree head of height 1", entries, io, "tree", 1, form="tree-1")
    accept("a tree head without the kernel table's entry (KILNIDX3)", entries, io, "tree", 1, form="tree-1", table=None)
    accept("the writer's split with no kiln/kernels.bin", [e for e in entries if e["path"] != TABLE_PATH], io,
           "tree", 2)
    accept("a one-level head over 101 pages of 2 entries", entries, io, "one-level", 1, per_page=2, form="one-level")
    accept("pages of 2 entries, 3 references", entries, io, "tree", 5, per_page=2, fanout=3)
    accept("pages of 1 entry, 2 references: height 8", entries, io, "tree", 8, per_page=1, fanout=2)

    # Each rule broken once, on a tree of height 3: head -> L2#0..3 -> L1#0..12 -> L0#0..50.
    base_kw = {"per_page": 4, "fanout": 4}
    _, _, roots = other_index(SYNTHETIC_HEAD, entries, **base_kw)
    nodes = {n["name"]: n for n in preorder(roots)}
    ref = lambda name: nodes[name]["ref"]
    assert [n["name"] for n in roots] == ["L2#0", "L2#1", "L2#2", "L2#3"]
    end_leaf = last_leaf(nodes["L2#2"])  # its last member is not empty: the end offset case below
    assert end_leaf["entries"][-1]["stored_size"] > 0 and ref("L0#1")["first_offset"] > 64

    update, page = set_ref, set_page
    one_level_kw = {"per_page": 32, "fanout": 32, "form": "one-level"}
    one_level = {n["name"]: n for n in other_index(SYNTHETIC_HEAD, entries, **one_level_kw)[2]}
    hostile = [
        ("a head reference's span one less", {"tweak": at("L2#0", update(span=lambda r: r["span"] - 1))}, "spans add up"),
        ("a head reference's span one more", {"tweak": at("L2#0", update(span=lambda r: r["span"] + 1))},
         "runs past the index"),
        ("a span one more in a reference page", {"tweak": at("L1#1", update(span=lambda r: r["span"] + 1))}, "spans add up"),
        ("a last head reference's span past the index", {"tweak": at("L2#3", update(span=lambda r: r["span"] + 10**6))},
         "runs past the index"),
        ("a head reference's entry_count one less", {"tweak": at("L2#1", update(entry_count=lambda r: r["entry_count"] - 1))},
         "entry counts add up"),
        ("an entry_count one less in a reference page",
         {"tweak": at("L0#5", update(entry_count=lambda r: r["entry_count"] - 1))}, "entry counts add up"),
        ("an entry page's entry_count of 4097", {"tweak": at("L0#2", update(entry_count=4097))}, "entry_count 4097"),
        ("a reference page's entry_count of 0", {"tweak": at("L1#2", update(entry_count=0))}, "entry_count 0"),
        ("a reference page's span equal to its size", {"tweak": at("L1#2", update(span=lambda r: r["size"]))},
         "not above size"),
        ("an entry page's span above its size", {"tweak": at("L0#3", update(span=lambda r: r["size"] + 64))},
         "differs from size"),
        ("an entry page's size below 8 + 96 x entry_count",
         {"tweak": at("L0#0", update(size=lambda r: 8 + 96 * r["entry_count"] - 1))}, "below the smallest"),
        ("a reference page's size of 66", {"tweak": at("L1#0", update(size=66))}, "below the smallest"),
        ("the head's first first_offset 128", {"tweak": at("L2#0", update(first_offset=128))}, "is not 64"),
        ("a first reference with another first_path than the reference naming its page",
         {"tweak": at("L1#4", update(first_path=lambda r: r["first_path"] + b"0"))}, "not the naming reference's"),
        ("a first reference with another first_offset than the reference naming its page",
         {"tweak": at("L1#4", update(first_offset=lambda r: r["first_offset"] + 64))}, "not the naming reference's"),
        ("a first_path equal to the previous one's", {"tweak": at("L0#1", update(first_path=ref("L0#0")["first_path"]))},
         "not above the previous"),
        ("a first_offset below the previous one's",
         {"tweak": at("L0#2", update(first_offset=ref("L0#1")["first_offset"] - 64))}, "below the previous"),
        ("a first_offset not a multiple of 64", {"tweak": at("L0#2", update(first_offset=lambda r: r["first_offset"] + 1))},
         "multiple of 64"),
        ("a last reference's first_offset past the end offset of the reference naming its page",
         {"tweak": at("L1#3", update(first_offset=ref("L2#1")["first_offset"] + 64))}, "past the end offset"),
        ("a path bound passed down two levels from the head",
         {"tweak": at("L2#1", update(first_path=last_leaf(nodes["L2#0"])["entries"][-1]["path"]))},
         "not below the path bound"),
        ("an end offset passed down two levels from the head",
         {"tweak": at("L2#3", update(first_offset=end_leaf["entries"][-1]["offset"]))}, "runs past the end offset"),
        ("a byte after a reference page's references", {"tweak": at("L1#0", page(lambda d: d + b"\0"))}, "trailing"),
        ("a byte after an entry page's entries", {"tweak": at("L0#0", page(lambda d: d + b"\0"))}, "trailing"),
        ("a reference page's ref_count of 0", {"tweak": at("L1#0", page(lambda d: d[:8] + bytes(4) + d[12:]))},
         "ref_count 0"),
        ("a reference page's ref_count that cannot fit",
         {"tweak": at("L1#0", page(lambda d: d[:8] + struct.pack("<I", (len(d) - 12) // 55 + 1) + d[12:]))},
         "cannot fit"),
        ("a reference page with an entry page's magic", {"tweak": at("L1#0", page(lambda d: ENTRY_PAGE_MAGIC + d[8:]))},
         "bad magic"),
        ("an entry page with a reference page's magic", {"tweak": at("L0#0", page(lambda d: REF_PAGE_MAGIC + d[8:]))},
         "bad magic"),
        ("a changed byte in an entry page", {"tweak": at("L0#7", lambda n: n.update(data=n["data"][:-1] + b"\1"))},
         "SHA-256 differs"),
        ("pages breadth-first", {"layout": breadth_first}, "SHA-256 differs"),
        ("a head of height 4 over 3 levels", {"fields": {"height": 4}}, "not above size"),
        ("a head of height 2 over 3 levels", {"fields": {"height": 2}}, "below the smallest"),
        ("a head of height 0", {"fields": {"height": 0}}, "height 0"),
        ("a head of height 9", {"fields": {"height": 9}}, "height 9"),
        ("a head's entry_count one more", {"fields": {"entry_count": len(entries) + 1}}, "entry counts add up"),
        ("a head's entry_count of 0", {"fields": {"entry_count": 0}}, "entry_count 0"),
        ("a head's entry_count over 2^20", {"fields": {"entry_count": (1 << 20) + 1}}, "out of 1..1048576"),
        ("a head's ref_count of 0", {"fields": {"ref_count": 0}}, "ref_count 0"),
        ("a head's ref_count that cannot fit", {"fields": {"ref_count": 1000}}, "cannot fit"),
        ("a head's sequence of 0", {"fields": {"sequence": 0}}, "sequence 0"),
        ("a head's sequence of 2^63", {"fields": {"sequence": 1 << 63}}, "sequence"),
        ("a head's magic KILNREF3", {"fields": {"magic": REF_PAGE_MAGIC}}, "bad magic"),
        ("a one-level magic over a tree head", {"fields": {"magic": HEAD_ONE_LEVEL}}, ""),
        ("a byte after the head's references", {"head_extra": b"\0"}, "trailing"),
        ("a byte after the last page", {"extra": b"\0"}, "spans add up"),
        ("a tree of height 9", {"per_page": 1, "fanout": 2, "entries": synthetic_entries(300)}, "height 9"),
        ("one-level: a ref_count that cannot fit", dict(one_level_kw, fields={"ref_count": 1000}), "cannot fit"),
        ("one-level: a first first_offset of 128", dict(one_level_kw, tweak=at("L0#0", update(first_offset=128))),
         "is not 64"),
        ("one-level: an entry_count of 4097", dict(one_level_kw, tweak=at("L0#1", update(entry_count=4097))),
         "entry_count 4097"),
        ("one-level: an entry_count one less",
         dict(one_level_kw, tweak=at("L0#1", update(entry_count=lambda r: r["entry_count"] - 1))),
         "entry counts add up"),
        ("one-level: a size one less", dict(one_level_kw, tweak=at("L0#4", update(size=lambda r: r["size"] - 1))),
         "spans add up"),
        ("one-level: a path bound",
         dict(one_level_kw, tweak=at("L0#2", update(first_path=one_level["L0#1"]["entries"][-1]["path"]))),
         "not below the path bound"),
    ]
    for what, kw, expected in hostile:
        kw = dict(base_kw, **kw)
        es, io = kw.pop("entries", (entries, synthetic_entries(200)[1]))
        index, head_size, _ = other_index(SYNTHETIC_HEAD, es, **kw)
        try:
            decode(index, head_size, io)
        except Refused as e:
            need(expected in str(e), f"self-check: a synthetic index with {what} is refused for another rule: {e}")
            checked += 1
            continue
        raise Refused(f"self-check: the reader accepted a synthetic index with {what}")
    return checked


# ---- tampering: the reader must refuse what FORMAT.md refuses -----------------------------

def must_refuse(data, keys, what):
    try:
        read_archive(bytes(data), keys)
    except Refused:
        return
    raise Refused(f"self-check: the reader accepted an archive with {what}")


def tamper_checks(data, a, keys):
    io = a["header"]["index_offset"]
    first_page, last_page = (io + a["pages"][k]["position"] for k in (0, -1))
    flips = {
        "a reserved header byte set": 60,
        "a changed byte in the first page": first_page + 20,
        "a changed byte in the last page": last_page + 20,
        "a changed member byte": 64,
        "a changed signature byte": len(data) - 1,
    }
    ref_pages = [p for p in a["pages"] if p["level"] > 0]
    if ref_pages:
        flips["a changed byte in a reference page"] = io + ref_pages[-1]["position"] + ref_pages[-1]["size"] - 1
    for what, offset in flips.items():
        if what == "a changed signature byte" and not (a["signatures"] and a["valid_keys"]):
            continue
        bad = bytearray(data)
        bad[offset] ^= 0x01
        must_refuse(bad, keys, what)
    must_refuse(data + b"\0", keys, "a byte appended")


def sparse_copy(data, a, keep, merge=True):
    """A sparse archive (§9) of `data` holding the members whose paths are in `keep`, written from
    §9 alone; merge=False writes adjacent slots as separate extents, which §9 refuses."""
    entries, io = a["entries"], a["header"]["index_offset"]
    extents = []

    def add(o, end):
        if end == o:
            return
        if merge and extents and extents[-1][0] + extents[-1][1] == o:
            extents[-1][1] += end - o
        else:
            extents.append([o, end - o])
    for i, e in enumerate(entries):
        if e["path"] in keep:
            add(e["offset"], entries[i + 1]["offset"] if i + 1 < len(entries) else io)
    add(io, len(data))
    table = b"KILNSPX1" + struct.pack("<I", len(extents)) + b"".join(struct.pack("<QQ", o, n) for o, n in extents)
    table += bytes(align64(64 + len(table)) - 64 - len(table))
    return data[:12] + struct.pack("<I", 1) + data[16:64] + table + b"".join(data[o:o + n] for o, n in extents)


def sparse_checks(kiln, data, a, keys, trust, folder):
    """A sparse copy holding kiln.toml, the meta members and each kernel's first code object: this
    reader and kiln read it alike (the same digest, the same members present, `kiln verify --deep`
    passing), and both refuse it with adjacent extents unmerged or an unknown flag."""
    keep = {e["path"] for e in a["entries"] if e["role"] in (1, 6)}
    keep |= {rec["code"][0][1] for rec in a["records"].values() if rec["code"]}
    sparse = sparse_copy(data, a, keep)
    s = read_archive(sparse, keys)
    need(s["digest"] == a["digest"], "sparse copy: another digest")
    want = keep | {e["path"] for e in a["entries"] if e["stored_size"] == 0}
    need(s["present"] == want, f"sparse copy: holds {sorted(s['present'])}, not {sorted(want)}")
    path = os.path.join(folder, "sparse.kiln")

    def kiln_verify(b):
        with open(path, "wb") as f:
            f.write(b)
        return subprocess.run([kiln, "verify", path, "--deep", "--trust", trust], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, check=False)
    out = kiln_verify(sparse)
    need(out.returncode == 0, "kiln verify refused the sparse copy: " + out.stderr.decode(errors="replace"))
    compare_with_kiln(kiln, path, s)
    refused = {"adjacent extents unmerged": sparse_copy(data, a, keep, merge=False),
               "flags 3": sparse[:12] + struct.pack("<I", 3) + sparse[16:]}
    for what, bad in refused.items():
        if bad == sparse:
            continue
        must_refuse(bad, keys, what)
        need(kiln_verify(bad).returncode != 0, f"kiln verify accepted a sparse copy with {what}")


def expression_checks(a):
    """A range shape's bytecode: each way FORMAT.md §4.1 says to refuse it is refused."""
    for name, rec in a["records"].items():
        for i, s in enumerate(rec["shapes"]):
            if not s.get("range"):
                continue
            scalar = next(j for j, p in enumerate(rec["params"]) if integer_scalar(p))
            pointer = [j for j, p in enumerate(rec["params"]) if p[1] == 1]
            bad_codes = {
                "an unknown opcode": [(0x01, 1), (0x09, None)],
                "two values left": [(0x01, 1), (0x01, 2)],
                "an operator without operands": [(0x10, None)],
                "a condition where an integer belongs": [(0x01, 1), (0x01, 2), (0x20, None)],
                "a parameter index past the end": [(0x02, len(rec["params"]))],
            }
            if pointer:
                bad_codes["a pointer parameter"] = [(0x02, pointer[0])]
            for what, ops in bad_codes.items():
                bad = dict(rec, shapes=[dict(x) for x in rec["shapes"]])
                bad["shapes"][i]["grid"] = [ops] + list(s["grid"][1:])
                try:
                    decode_record(encode_record(bad), name, bad["code_entries"] is not None)
                except Refused:
                    continue
                raise Refused(f"self-check: the reader accepted kernel {name!r} shape {i} with {what}")
            ok = dict(rec, shapes=[dict(x) for x in rec["shapes"]])
            ok["shapes"][i]["grid"] = [[(0x02, scalar)]] + list(s["grid"][1:])
            decode_record(encode_record(ok), name, ok["code_entries"] is not None)  # the same change, valid: accepted
            return True
    return False


def launch_checks(a):
    """The launch extension: each way FORMAT.md §4.1 says to refuse it is refused, and entries
    of every kind that keep its rules are accepted. Returns the cases, (kernel, what, record
    bytes, refused), or None when no kernel of the archive has a launch extension."""
    checked = None
    for name, rec in a["records"].items():
        if rec["launch"] is None:
            continue
        checked = checked or []
        params, shapes = rec["params"], rec["shapes"]
        pointer = next((i for i, p in enumerate(params) if p[1] == 1), None)
        scalar = next((i for i, p in enumerate(params) if integer_scalar(p)), None)
        others = [i for i, p in enumerate(params) if not integer_scalar(p)]
        args, clusters = rec["launch"]["args"], rec["launch"]["clusters"]
        base = [x for x in args if x["kind"] < 2]  # the entries below add tensor maps and scratch to these
        value = {"kind": 1, "name": b"v", "type": 3, "value": [(0x01, 7)]}
        scratch = {"kind": 3, "name": b"s", "bytes": [(0x01, 0)], "align": 1, "per": 1}
        good = {"a value": [value], "4 scratch entries": [scratch] * 4, "256 entries": [value] * (256 - len(base))}
        if params:
            good["a pass-through of the last parameter"] = [{"kind": 0, "name": b"p", "param": len(params) - 1}]
        bad = {
            "kind 4": [dict(value, kind=4)],
            "a value of type f16": [dict(value, type=8)],
            "a value that is a condition": [dict(value, value=[(0x01, 1), (0x01, 1), (0x20, None)])],
            "a scratch align of 0": [dict(scratch, align=0)],
            "a scratch align of 3": [dict(scratch, align=3)],
            "a scratch align of 8192": [dict(scratch, align=8192)],
            "a scratch per of 2": [dict(scratch, per=2)],
            "5 scratch entries": [scratch] * 5,
            "257 entries": [value] * (257 - len(base)),
            "a pass-through past the parameters": [{"kind": 0, "name": b"p", "param": len(params)}],
        }
        if scalar is not None:
            good["a value over a parameter"] = [dict(value, value=[(0x02, scalar), (0x15, None)])]
        for i in others:
            bad[f"an expression over parameter {i}, not an integer scalar"] = [dict(value, value=[(0x02, i)])]
        if pointer is not None:
            size = SCALAR_SIZES[params[pointer][2]]
            tmap = {"kind": 2, "name": b"t", "pointer": pointer, "dtype": TMAP_SIZES.index(size), "dims": [[(0x01, 64)]] * 2,
                    "strides": [[(0x01, 256)]], "box": [1, 256], "element_strides": [8, 1], "interleave": 2, "swizzle": 3,
                    "l2_promotion": 3, "oob_fill": 1}
            good["a tensor map"] = [tmap]
            good["16 tensor maps"] = [tmap] * 16
            good["a rank-5 tensor map"] = [dict(tmap, dims=[[(0x01, 1)]] * 5, strides=[[(0x01, 16)]] * 4, box=[1] * 5,
                                                element_strides=[1] * 5)]
            bad.update({
                "17 tensor maps": [tmap] * 17,
                "a tensor map of rank 0": [dict(tmap, dims=[], strides=[], box=[], element_strides=[])],
                "a tensor map of rank 6": [dict(tmap, dims=[[(0x01, 1)]] * 6, strides=[[(0x01, 16)]] * 5, box=[1] * 6,
                                                element_strides=[1] * 6)],
                "a box of 0": [dict(tmap, box=[0, 1])],
                "a box of 257": [dict(tmap, box=[1, 257])],
                "an element stride of 0": [dict(tmap, element_strides=[0, 1])],
                "an element stride of 9": [dict(tmap, element_strides=[1, 9])],
                "interleave 3": [dict(tmap, interleave=3)],
                "swizzle 4": [dict(tmap, swizzle=4)],
                "l2_promotion 4": [dict(tmap, l2_promotion=4)],
                "oob_fill 2": [dict(tmap, oob_fill=2)],
                "dtype 13": [dict(tmap, dtype=13)],
                "a dtype of another element size": [dict(tmap, dtype=TMAP_SIZES.index(2 if size != 2 else 4))],
                "a dims expression that is a condition": [dict(tmap, dims=[[(0x01, 1), (0x01, 1), (0x22, None)]] * 2)],
            })
            for i in others:
                if i != pointer and params[i][1] == 0:
                    bad[f"a tensor map of scalar parameter {i}"] = [dict(tmap, pointer=i)]
            if scalar is not None:
                bad["a tensor map of an integer scalar"] = [dict(tmap, pointer=scalar)]
        bad_clusters = {
            "both counts 0": ([], []),
            "a cluster past the shapes": (args, [(len(shapes), 1, 1, 1)]),
            "more clusters than shapes": (args, [(i, 1, 1, 1) for i in range(len(shapes) + 1)]),
            "a cluster dimension of 0": (args, [(0, 2, 0, 1)]),
            "a cluster of 9 blocks": (args, [(0, 3, 3, 1)]),
        }
        if len(shapes) >= 2:
            bad_clusters["cluster shapes out of order"] = (args, [(1, 1, 1, 1), (0, 1, 1, 1)])
            bad_clusters["a shape clustered twice"] = (args, [(1, 1, 1, 1), (1, 1, 1, 1)])
        for what, extra in bad.items():
            bad_clusters[what] = (base + extra, clusters)
        for what, (bad_args, bad_cl) in bad_clusters.items():
            data = encode_record(dict(rec, launch={"args": bad_args, "clusters": bad_cl}))
            try:
                decode_record(data, name, rec["code_entries"] is not None)
            except Refused:
                checked.append((name, what, data, True))
                continue
            raise Refused(f"self-check: the reader accepted kernel {name!r} with {what} in its launch extension")
        goods = {what: (base + extra, clusters) for what, extra in good.items()}
        if shapes:
            goods["8-block clusters"] = (args, [(i, 2, 2, 2) for i in range(len(shapes))])
            goods["clusters alone"] = ([], [(len(shapes) - 1, 8, 1, 1)])
        goods["kernel_args alone"] = (base + [value], [])
        for what, (good_args, good_cl) in goods.items():
            record = dict(rec, launch={"args": good_args, "clusters": good_cl})
            data = encode_record(record)
            try:
                need(encode_record(decode_record(data, name, rec["code_entries"] is not None)) == data, "does not re-encode to its bytes")
            except Refused as e:
                raise Refused(f"self-check: the reader refused kernel {name!r} with {what} in its launch extension: {e}")
            checked.append((name, what, data, False))
    return checked


def rebuild_archive(data, a, replace, seed):
    """The archive again, with the members in `replace` swapped in, every member raw, signed
    with `seed`: what the writer would produce for those bytes (§3, §5), to show kiln records
    it has never seen."""
    out, entries = bytearray(64), []
    for e in a["entries"]:
        c = replace.get(e["path"]) or member_content(data, e)
        entries.append(dict(e, offset=len(out), stored_size=len(c), content_size=len(c), compression=0,
                            stored_sha256=sha256(c), content_sha256=sha256(c)))
        out += c + bytes(align64(len(out) + len(c)) - len(out) - len(c))
    return signed_archive(bytes(out[64:]), *encode_index(a["head"], entries), a["head"], seed)


def signed_archive(members, index, head_size, head, seed):
    """Header, the member bytes (from offset 64), the index and one signature by `seed` (§2, §5)."""
    public = encode_point(scalar_mult(ed25519_scalar(seed), BASE))
    attributes = {"kiln-signature": b"1", "archive": b"sha256:" + hashlib.sha256(index[:head_size]).hexdigest().encode(),
                  "package": head["package"], "sequence": head["sequence"], "key-id": key_id(public),
                  "signer": b"independent reader", "created": 0}
    signatures = encode_signatures([{"attributes": attributes, "signature": ed25519_sign(seed, encode_attributes(attributes))}])
    header = encode_header({"index_offset": 64 + len(members), "index_size": len(index),
                            "signature_block_size": len(signatures), "index_head_size": head_size})
    return header + members + index + signatures


def kiln_decodes_like_this_reader(kiln, data, a, cases, seed, trust, folder):
    """kiln's own decoder (through `kiln preflight`, which reads every kernel record and no
    kiln.toml) refuses exactly the launch extensions this reader refuses."""
    path = os.path.join(folder, "launch-case.kiln")
    for name, what, record, refused in cases:
        open(path, "wb").write(rebuild_archive(data, a, {b"kiln/kernels/" + name: record}, seed))
        run = subprocess.run([kiln, "preflight", "--trust", trust, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=dict(os.environ, CUDA_VISIBLE_DEVICES=""), check=False)
        need((run.returncode != 0) == refused,
             f"kernel {name.decode()} with {what}: this reader {'refuses' if refused else 'accepts'} it, kiln preflight "
             f"{'accepts it' if run.returncode == 0 else 'says: ' + run.stderr.decode(errors='replace').strip()}")
    return len(cases)


def index_variants(a):
    """Other indexes over an archive's members, and whether §3 refuses each: (what, other_index
    arguments, refused). Other splits, which a reader accepts; and the writer's tree (or, for a
    one-level archive, one of entry pages of 3 under reference pages of 4) with one rule broken."""
    head, entries = a["head"], a["entries"]
    cases = [("a tree head of height 1 over the writer's entry pages", {"form": "tree-1"}, False),
             ("entry pages of 3 under reference pages of 4", {"per_page": 3, "fanout": 4}, False),
             ("a one-level head over entry pages of 5", {"per_page": 5, "form": "one-level"}, False)]
    if head["form"] == "tree":
        cases.append(("a one-level head over the writer's entry pages", {"form": "one-level"}, False))
    table = table_entry(entries)
    if table is not None:
        # The head's copy of kiln/kernels.bin's entry: absent (KILNIDX3, read through the index), or
        # not the index's entry (refused: at open by its digest or path, by full verification).
        forged = dict(table, stored_sha256=sha256(b"other"), content_sha256=sha256(b"other"))
        cases += [("a tree head without the kernel table's entry (KILNIDX3)", {"table": None}, False),
                  ("a kernel table entry in the head with another digest", {"table": forged}, True),
                  ("kiln.toml's entry as the head's kernel table entry",
                   {"table": next(e for e in entries if e["path"] == b"kiln.toml")}, True)]
    base = {} if head["height"] >= 2 else {"per_page": 3, "fanout": 4}
    roots = other_index(head, entries, **base)[2]
    cases += [(what, dict(base, **kw), True) for what, kw in [
        ("an entry page's span 64 over its size", {"tweak": at("L0#1", set_ref(span=lambda r: r["span"] + 64))}),
        ("an entry_count one less in a reference page",
         {"tweak": at("L0#1", set_ref(entry_count=lambda r: r["entry_count"] - 1))}),
        ("a head reference's span 64 more", {"tweak": at(roots[0]["name"], set_ref(span=lambda r: r["span"] + 64))}),
        ("a head reference's entry_count one less",
         {"tweak": at(roots[-1]["name"], set_ref(entry_count=lambda r: r["entry_count"] - 1))}),
        ("the pages breadth-first", {"layout": breadth_first}),
    ]]
    if len(roots) >= 2:
        cases.append(("the head's second first_path at the last path under its first (the path bound passed down)",
                      dict(base, tweak=at(roots[1]["name"], set_ref(first_path=last_leaf(roots[0])["entries"][-1]["path"]))),
                      True))
    return cases


def kiln_reads_indexes_like_this_reader(kiln, data, a, keys, seed, trust, folder):
    """The archive's members under other indexes, each signed again: `kiln verify` accepts exactly
    the ones this reader (and FORMAT.md §3) accepts."""
    path = os.path.join(folder, "index-case.kiln")
    cases = index_variants(a)
    io = a["header"]["index_offset"]
    for what, kw, refused in cases:
        index, head_size, _ = other_index(a["head"], a["entries"], **kw)
        variant = signed_archive(data[64:io], index, head_size, a["head"], seed)
        try:
            read_archive(variant, keys, canonical=False)
            mine = None
        except Refused as e:
            mine = str(e)
        need((mine is not None) == refused, f"an index with {what}: FORMAT.md §3 {'refuses' if refused else 'accepts'} it, "
             f"this reader {'accepts it' if mine is None else 'refuses it: ' + mine}")
        open(path, "wb").write(variant)
        run = subprocess.run([kiln, "verify", "--trust", trust, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             check=False)
        need((run.returncode != 0) == refused,
             f"an index with {what}: FORMAT.md §3 and this reader {'refuse' if refused else 'accept'} it, kiln verify "
             f"{'accepts it' if run.returncode == 0 else 'says: ' + run.stderr.decode(errors='replace').strip()}")
    return len(cases)

def pack_paged_archive(kiln, ptx, key, folder):
    """Packs, with kiln, a package of 300 extra files: several entry pages under a one-level head
    (§3), members stored raw (incompressible, empty) and compressed, and a run of 130 empty members
    (f126 .. f255), so that several pages in a row begin at one offset (FORMAT.md §3 on first
    offsets), and kiln.u, which sorts between kiln.toml and kiln/kernels.bin."""
    shutil.copy(ptx, os.path.join(folder, "scale.ptx"))
    names = []
    for i in range(300):
        name = f"f{i:03d}.bin"
        if i % 7 == 0 or 126 <= i < 256:
            content = b""
        elif i % 2:
            content = b"".join(hashlib.sha256(f"{i}:{j}".encode()).digest() for j in range(i))  # raw
        else:
            content = (f"line {i}\n" * (i + 1)).encode()  # compresses
        open(os.path.join(folder, name), "wb").write(content)
        names.append(name)
    # kiln.u sorts between kiln.toml and kiln/kernels.bin: the page that begins at kiln.toml
    # and ends after kiln/kernels.bin (§3) then holds three entries.
    open(os.path.join(folder, "kiln.u"), "wb").write(b"between kiln.toml and kiln/kernels.bin\n")
    names.append("kiln.u")
    manifest = f"""[package]
name = "paged"
kernel_revision = "300-files"
sequence = 1
[files]
extra = [{", ".join('"' + n + '"' for n in names)}]
[[kernel]]
name = "scale"
entry = "scale_f32"
backend = "cuda"
code = [{{ arch = "compute_80", file = "scale.ptx" }}]
"""
    open(os.path.join(folder, "kiln.toml"), "w").write(manifest)
    return kiln_pack(kiln, key, folder, "paged")


def kiln_pack(kiln, key, folder, name):
    """Packs FOLDER/kiln.toml with kiln into FOLDER/NAME.kiln; returns its path."""
    out = os.path.join(folder, name + ".kiln")
    run = subprocess.run([kiln, "pack", os.path.join(folder, "kiln.toml"), "--key", key, "-o", out, "-q"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    if run.returncode != 0:
        raise Refused(f"kiln pack of the {name} archive failed: " + run.stderr.decode(errors="replace"))
    return out


def pack_tree_archive(kiln, ptx, key, folder, kernels=128, empty=900):
    """Packs, with kiln, a package of 128 kernels, each with its own code member (a copy of the
    PTX), and 900 empty files: about 1,160 members, 65 entry pages before kiln.toml's, so more than
    64 in all and a tree head of height 2 over reference pages of 32 references and the rest (§3).
    Members 128 .. 1,027 are empty, so the second reference page begins at the offset where the
    first one's last entry pages begin and end."""
    folder = os.path.join(folder, "tree")
    for sub in ("code", "empty"):
        os.makedirs(os.path.join(folder, sub))
    names = []
    for i in range(empty):
        names.append(f"empty/e{i:04d}.bin")
        open(os.path.join(folder, names[-1]), "wb").close()
    manifest = [f"""[package]
name = "tree"
kernel_revision = "{kernels}-kernels"
sequence = 1
[files]
extra = [{", ".join('"' + n + '"' for n in names)}]
"""]
    for i in range(kernels):
        shutil.copy(ptx, os.path.join(folder, "code", f"k{i:04d}.ptx"))
        manifest.append(f"""[[kernel]]
name = "k{i:04d}"
entry = "scale_f32"
backend = "cuda"
code = [{{ arch = "compute_80", file = "code/k{i:04d}.ptx" }}]
""")
    open(os.path.join(folder, "kiln.toml"), "w").write("".join(manifest))
    return kiln_pack(kiln, key, folder, "tree")


# Every form kernel_args and cluster take in kiln.toml (MANIFEST.md), with every default left out
# somewhere and given somewhere: the launch extension (FORMAT.md §4.1) derived from each.
LAUNCH_EDGES_MANIFEST = """[package]
name = "launch-edges"
kernel_revision = "edges-1"
sequence = 1

[[kernel]]
name = "every_form"
entry = "scale_f32"
backend = "cuda"
params = [
  { name = "a8", type = "ptr", dtype = "i8", access = "read" },
  { name = "h", type = "ptr", dtype = "bf16" },
  { name = "w", type = "ptr", dtype = "u16", access = "write" },
  { name = "d", type = "ptr", dtype = "f64", access = "read" },
  { name = "m", type = "i32" },
  { name = "k", type = "u64" },
  { name = "s", type = "f32" },
]
kernel_args = [
  "s",
  { name = "m" },
  { name = "a8_map", tensor_map = { pointer = "a8", dtype = "u8", dims = [256, "m", 4], strides = [256, "256 * m"], box = [16, 8, 1], element_strides = [1, 2, 1], interleave = "16B", swizzle = "32B", l2_promotion = "64B" } },
  { name = "h_map", tensor_map = { pointer = "h", dims = ["k"], box = [64], swizzle = "128B", l2_promotion = "128B", oob_fill = "zero" } },
  { name = "w_map", tensor_map = { pointer = "w", dims = [1024, 4294967296], strides = [2048], box = [8, 256], interleave = "none", swizzle = "none", l2_promotion = "none" } },
  { name = "d_map", tensor_map = { pointer = "d", dtype = "i64", dims = ["cdiv(k, 2)", "-(-m)"], strides = ["max(16, 8 * k)"], box = [2, 2], oob_fill = "nan" } },
  { name = "neg", type = "i8", value = -128 },
  { name = "big", type = "u64", value = 9223372036854775807 },
  { name = "lda", type = "u32", value = "(k + 1) * 2 - m % 3" },
  { name = "scr_launch", scratch = { bytes = 0, per = "launch" } },
  { name = "scr_default", scratch = { bytes = 4096 } },
  { name = "scr_expr", scratch = { bytes = "min(m, 1024) * 8", align = 1, per = "program" } },
  { name = "scr_4096", scratch = { bytes = 2147483647, align = 4096 } },
  "k",
]
code = [{ arch = "compute_80", file = "scale.ptx" }]

[[kernel.shape]]
name = "plain"
values = { m = 4 }
grid = [4]
block = [256]

[[kernel.shape]]
name = "x2"
values = { m = 8 }
grid = [4, 2]
block = [128]
cluster = [2]

[[kernel.shape]]
name = "xy"
ranges = { m = [1, 64] }
grid = ["2 * m", 4]
block = [64]
cluster = [2, 4]

[[kernel.shape]]
name = "xyz"
values = { m = 16 }
grid = [2, 2, 2]
block = [32]
cluster = [2, 2, 2]

[[kernel]]
name = "cluster_only"
entry = "scale_f32"
backend = "cuda"
params = [{ name = "n", type = "u32" }]
code = [{ arch = "compute_80", file = "scale.ptx" }]

[[kernel.shape]]
name = "n8"
values = { n = 8 }
grid = [8]
block = [32]
cluster = [8, 1, 1]

[[kernel]]
name = "args_only"
entry = "scale_f32"
backend = "cuda"
params = [{ name = "n", type = "u32" }, { name = "p", type = "ptr", dtype = "f32" }]
kernel_args = ["p"]
code = [{ arch = "compute_80", file = "scale.ptx" }]

[[kernel.shape]]
name = "n8"
values = { n = 8 }
grid = [8]
block = [32]

[[kernel]]
name = "plain"
entry = "scale_f32"
backend = "cuda"
params = [{ name = "n", type = "u32" }]
code = [{ arch = "compute_80", file = "scale.ptx" }]
"""


def pack_launch_edges_archive(kiln, ptx, key, folder):
    folder = os.path.join(folder, "launch-edges")
    os.makedirs(folder)
    shutil.copy(ptx, os.path.join(folder, "scale.ptx"))
    open(os.path.join(folder, "kiln.toml"), "w").write(LAUNCH_EDGES_MANIFEST)
    out = os.path.join(folder, "launch-edges.kiln")
    run = subprocess.run([kiln, "pack", os.path.join(folder, "kiln.toml"), "--key", key, "-o", out, "-q"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    if run.returncode != 0:
        raise Refused("kiln pack of the launch-edges archive failed: " + run.stderr.decode(errors="replace"))
    return out


# Archives whose kernels must have a launch extension (kernel_args, clusters), when present.
LAUNCH_ARCHIVES = ("tma-pair-sum.kiln", "scale-kernel-args.kiln", "launch-edges.kiln", "scale-variants.kiln")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln")
    ap.add_argument("--archives")
    ap.add_argument("--expect", nargs="*", default=[], help="archive file names that must be present")
    ap.add_argument("--trust", help="a .pub key file (FORMAT.md §5.3) the archives are signed with")
    ap.add_argument("--paged", nargs=2, metavar=("PTX", "KEY"),
                    help="also pack (with kiln, this PTX and private key) and read archives of many index pages")
    ap.add_argument("--self-test", action="store_true",
                    help="only the checks of indexes built here (FORMAT.md §3), without kiln or archives")
    args = ap.parse_args()
    if not args.self_test and not (args.kiln and args.archives):
        ap.error("--kiln and --archives are required (or --self-test)")
    try:
        checked = synthetic_index_checks()
    except Refused as e:
        print(f"FAIL synthetic indexes: {e}", file=sys.stderr)
        return 1
    print(f"ok   synthetic indexes: {checked} built and decoded here, each split accepted and each broken rule refused")
    if args.self_test:
        return 0
    if zstandard is None and ZSTD_CLI is None:
        print("SKIP: neither the Python zstandard module nor the zstd command is available", file=sys.stderr)
        return SKIP

    keys = {}
    if args.trust:
        raw = read_public_key(args.trust)
        keys[key_id(raw)] = raw
    names = sorted(n for n in os.listdir(args.archives) if n.endswith(".kiln")) if os.path.isdir(args.archives) else []
    missing = [n for n in args.expect if n not in names]
    if not names or missing:
        print(f"FAIL: {args.archives} lacks archives (found {names}, missing {missing})", file=sys.stderr)
        return 1
    paths = [os.path.join(args.archives, n) for n in names]
    scratch = edges = tree = None
    packed = []
    if args.paged:
        import tempfile
        scratch = tempfile.TemporaryDirectory(prefix="kiln-independent-reader-")
        try:
            packed.append(pack_paged_archive(args.kiln, args.paged[0], args.paged[1], scratch.name))
            tree = pack_tree_archive(args.kiln, args.paged[0], args.paged[1], scratch.name)
            packed.append(tree)
            edges = pack_launch_edges_archive(args.kiln, args.paged[0], args.paged[1], scratch.name)
            paths += packed + [edges]
        except Refused as e:
            print(f"FAIL: {e}", file=sys.stderr)
            return 1
    failures = 0
    for path in paths:
        n = os.path.basename(path)
        data = open(path, "rb").read()
        index_cases = None
        try:
            if path == tree:
                h = decode_header(data)
                magic = data[h["index_offset"]:h["index_offset"] + 8]
                need(magic == HEAD_TABLE, f"its head's magic is {magic!r}: kiln wrote no tree head with the kernel "
                     "table's entry (KILNIDX4) for an index of more than 64 entry pages (FORMAT.md §3, How the writer splits)")
            a = read_archive(data, keys)
            if path == tree:
                need(a["head"]["height"] >= 2, f"a tree head of height {a['head']['height']}, not 2 or more")
            if keys:
                need(a["valid_keys"], "no signature by the trusted key verifies")
            compare_with_kiln(args.kiln, path, a)
            tamper_checks(data, a, keys)
            if args.trust and scratch is not None:
                sparse_checks(args.kiln, data, a, keys, args.trust, scratch.name)
            if n == "table-edges.kiln":
                need(expression_checks(a), "table-edges.kiln has no range shape to check")
            cases = launch_checks(a)
            need(cases is not None or n not in LAUNCH_ARCHIVES, f"{n} has no kernel with a launch extension")
            if path == edges and args.trust:
                kiln_decodes_like_this_reader(args.kiln, data, a, cases, read_private_seed(args.paged[1]), args.trust,
                                              scratch.name)
            if path in packed and args.trust:
                index_cases = kiln_reads_indexes_like_this_reader(args.kiln, data, a, keys, read_private_seed(args.paged[1]),
                                                                  args.trust, scratch.name)
        except Refused as e:
            print(f"FAIL {n}: {e}", file=sys.stderr)
            failures += 1
            continue
        kinds = sorted({KINDS[e["kind"]] for e in a["entries"] if e["kind"]})
        zstd = sum(e["compression"] for e in a["entries"])
        ref_pages = sum(p["level"] > 0 for p in a["pages"])
        split = f"{len(a['pages']) - ref_pages} entry page(s) under a {a['head']['form']} head" + (
            f" of height {a['head']['height']}, {ref_pages} reference page(s)" if a["head"]["form"] == "tree" else "")
        print(f"ok   {n}: {a['digest']}, {len(a['entries'])} members in {split} ({zstd} zstd; "
              f"code {', '.join(kinds)}), {len(a['records'])} kernels, {len(a['signatures'])} signature(s), "
              f"{len(a['valid_keys'])} verified" + (f"; {len(cases)} launch extension variants" if cases else "") +
              (" (kiln preflight agrees on each)" if path == edges and args.trust else "") +
              (f"; {index_cases} other indexes, kiln verify agrees on each" if index_cases else ""))
    print(f"{len(paths) - failures} of {len(paths)} archives read as FORMAT.md says"
          + (", each also as a sparse copy (§9) that kiln reads alike" if args.trust and scratch is not None else "") +
          f" (zstd via {'the zstandard module' if zstandard else ZSTD_CLI})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
