#!/usr/bin/env python3
"""A second reader of the kiln archive format, written from schema/FORMAT.md alone.

It shares no code with kiln: it parses every structure FORMAT.md defines, applies the rules it
states, re-encodes what it decoded and requires the original bytes back, derives the kernel table
from kiln.toml, checks the Ed25519 signatures, and compares everything with what the kiln command
reports (`kiln digest`, `kiln inspect --json`). Any difference is a failure, with the field named:
either kiln or FORMAT.md is wrong.

    independent_reader.py --kiln KILN --archives DIR [--expect NAME.kiln ...] [--trust KEY.pub]
                          [--paged PTX KEY.key]

Every *.kiln file in DIR is read (the test fails if DIR holds none, or lacks an --expect'ed one);
with --paged, also an archive of 300 files that kiln packs here (several index pages). Each one
is also tampered with (a header, page, member and signature byte, a byte appended), and the
reader must refuse every tampered copy.
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
    need(r.u32() == 0, "header: flags not zero")
    h = {"index_offset": r.u64(), "index_size": r.u64(), "signature_block_size": r.u64(),
         "index_head_size": r.u64()}
    need(r.take(16) == bytes(16), "header: reserved bytes not zero")
    size = len(data)
    need(1 <= h["index_size"] <= 256 << 20, "header: index_size out of range")
    need(h["signature_block_size"] <= 1 << 20, "header: signature_block_size over 1 MiB")
    need(h["index_offset"] >= 64 and h["index_offset"] % 64 == 0 and h["index_offset"] <= size,
         "header: index_offset")
    need(h["index_size"] <= size - h["index_offset"], "header: index runs past the file")
    need(h["signature_block_size"] == size - h["index_offset"] - h["index_size"], "header: regions do not tile the file")
    need(1 <= h["index_head_size"] <= h["index_size"], "header: index_head_size out of 1..index_size")
    return h


def encode_header(h):
    w = Writer()
    w.raw(FILE_MAGIC)
    w.u32(2)
    w.u32(0)
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


def decode_head(head, index_size, index_offset):
    r = Reader(head, "index head")
    need(r.take(8) == b"KILNIDX2", "index head: bad magic")
    out = {"entry_count": r.u32()}
    need(1 <= out["entry_count"] <= 1 << 20, "index head: entry_count out of range")
    out["sequence"] = r.u64()
    out["package"] = r.str16()
    check_package(out["package"], "index head")
    out["kernel_revision"] = r.str16()
    check_revision(out["kernel_revision"], "index head")
    page_count = r.u32()
    need(page_count >= 1 and page_count * 51 <= r.remaining(), "index head: page_count cannot fit")
    pages, position, entries = [], len(head), 0
    for i in range(page_count):
        p = {"entry_count": r.u32(), "size": r.u32(), "first_offset": r.u64(), "sha256": r.take(32),
             "first_path": r.str16(), "position": position, "first_entry": entries}
        need(1 <= p["entry_count"] <= 4096, f"page {i}: entry_count out of 1..4096")
        need(8 + 96 * p["entry_count"] <= p["size"] <= index_size - position, f"page {i}: size")
        if i == 0:
            need(p["first_offset"] == 64, "page 0: first_offset is not 64")
        else:
            need(pages[-1]["first_path"] < p["first_path"], f"page {i}: first paths not increasing")
            need(pages[-1]["first_offset"] < p["first_offset"], f"page {i}: first offsets not increasing")
        need(p["first_offset"] < index_offset and p["first_offset"] % 64 == 0, f"page {i}: first_offset")
        position += p["size"]
        entries += p["entry_count"]
        pages.append(p)
    r.end()
    need(position == index_size, "index head: pages do not fill the index")
    need(entries == out["entry_count"], "index head: page entry counts do not add up")
    out["pages"] = pages
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


def decode_page(data, head, i, index_offset):
    ref = head["pages"][i]
    need(sha256(data) == ref["sha256"], f"page {i}: SHA-256 differs from the head's")
    r = Reader(data, f"page {i}")
    need(r.take(8) == b"KILNPGE2", f"page {i}: bad magic")
    last = i + 1 == len(head["pages"])
    next_path = None if last else head["pages"][i + 1]["first_path"]
    end = index_offset if last else head["pages"][i + 1]["first_offset"]
    entries, offset = [], ref["first_offset"]
    for k in range(ref["entry_count"]):
        e = decode_entry(r, ref["first_entry"] + k)
        if k == 0:
            need(e["path"] == ref["first_path"], f"page {i}: first entry is not first_path")
        else:
            need(entries[-1]["path"] < e["path"], f"page {i}: paths not strictly increasing")
        need(next_path is None or e["path"] < next_path, f"page {i}: path not below the next page's first path")
        need(e["offset"] == offset, f"entry {e['path']!r}: offset {e['offset']}, expected {offset}")
        offset = align64(e["offset"] + e["stored_size"])
        need(offset <= end, f"entry {e['path']!r}: runs past {end}")
        entries.append(e)
    r.end()
    need(offset == end, f"page {i}: members end at {offset}, not {end}")
    return entries


def encode_entry(w, e):
    w.str16(e["path"])
    for k in ("role", "backend", "kind", "compression"):
        w.u8(e[k])
    w.str16(e["arch"])
    for k in ("offset", "stored_size", "content_size"):
        w.u64(e[k])
    w.raw(e["stored_sha256"])
    w.raw(e["content_sha256"])


def encode_index(head, entries):
    """Head then pages, as the writer lays them out: 128 entries a page (§3)."""
    pages = []
    for first in range(0, len(entries), 128):
        w = Writer()
        w.raw(b"KILNPGE2")
        for e in entries[first:first + 128]:
            encode_entry(w, e)
        pages.append((entries[first:first + 128], bytes(w.out)))
    w = Writer()
    w.raw(b"KILNIDX2")
    w.u32(len(entries))
    w.u64(head["sequence"])
    w.str16(head["package"])
    w.str16(head["kernel_revision"])
    w.u32(len(pages))
    for page_entries, data in pages:
        w.u32(len(page_entries))
        w.u32(len(data))
        w.u64(page_entries[0]["offset"])
        w.raw(sha256(data))
        w.str16(page_entries[0]["path"])
    return bytes(w.out) + b"".join(data for _, data in pages)


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

SCALAR_TYPES = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64"]
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
        if op in (0x01, 0x02):
            n = 8 if op == 0x01 else 2
            need(size - i - 1 >= n, f"{what}: truncated operand")
            arg = int.from_bytes(code[i + 1:i + 1 + n], "little", signed=(op == 0x01))
            if op == 0x02:
                need(arg < len(params) and integer_scalar(params[arg]), f"{what}: parameter {arg} is not an integer scalar")
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
        elif op == 0x02:
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


def decode_kernels_bin(data):
    r = Reader(data, "kiln/kernels.bin")
    need(r.take(8) == b"KILNKTB2", "kiln/kernels.bin: bad magic")
    t = {"package": r.str16(), "kernel_revision": r.str16(), "sequence": r.u64()}
    t["toolchain"] = [(r.str16(), r.str16()) for _ in range(count(r, "toolchain"))]
    t["kernel_count"] = r.u32()
    need(t["kernel_count"] <= 1 << 20, "kiln/kernels.bin: bad kernel count")
    r.end()
    return t


def encode_kernels_bin(t):
    w = Writer()
    w.raw(b"KILNKTB2")
    w.str16(t["package"])
    w.str16(t["kernel_revision"])
    w.u64(t["sequence"])
    w.u32(len(t["toolchain"]))
    for key, value in t["toolchain"]:
        w.str16(key)
        w.str16(value)
    w.u32(t["kernel_count"])
    return bytes(w.out)


def decode_record(data, name):
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
    k["code"] = [(r.str16(), r.str16()) for _ in range(count(r, "code"))]
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
    for arch, file in k["code"]:
        w.str16(arch)
        w.str16(file)
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
    return bytes(w.out)


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
        records[enc(k["name"])] = {
            "entry": enc(k["entry"]), "backend": enc(k["backend"]),
            "fallback": {"reference": 0, "refuse": 1}[k.get("fallback", "reference")],
            "sources": [enc(s) for s in k.get("sources", [])], "ir": [enc(s) for s in k.get("ir", [])],
            "params": params, "code": [(enc(c["arch"]), enc(c["file"])) for c in k["code"]], "shapes": shapes,
            "rtol": double_bits(tol.get("rtol", 1e-5)), "atol": double_bits(tol.get("atol", 1e-6))}
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


def read_archive(data, trusted_keys):
    """Reads and checks one archive per FORMAT.md; returns what it decoded. Raises Refused."""
    h = decode_header(data)
    need(encode_header(h) == data[:64], "header: does not re-encode to its bytes")
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

    entries = []
    for i, ref in enumerate(head["pages"]):
        entries += decode_page(data[io + ref["position"]:io + ref["position"] + ref["size"]], head, i, io)
    need(encode_index(head, entries) == data[io:io + isz], "index: does not re-encode to its bytes")
    by_path = {e["path"]: e for e in entries}
    need(b"kiln.toml" in by_path and by_path[b"kiln.toml"]["role"] == 1, "index: no kiln.toml with role manifest")

    # Padding: zero from each member's end to the next member (or the index).
    for i, e in enumerate(entries):
        end = e["offset"] + e["stored_size"]
        nxt = entries[i + 1]["offset"] if i + 1 < len(entries) else io
        need(data[end:nxt] == bytes(nxt - end), f"member {e['path']!r}: padding not zero")

    contents = {e["path"]: member_content(data, e) for e in entries}

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
            records[name] = decode_record(contents[e["path"]], name)
            need(encode_record(records[name]) == contents[e["path"]], f"{e['path']!r}: does not re-encode to its bytes")
    need(len(records) == table["kernel_count"], "kernel_count differs from the number of kernel records")

    manifest = tomllib.loads(contents[b"kiln.toml"].decode("ascii"))
    derived_table, derived_records = table_from_manifest(manifest)
    need(derived_table == table, "kiln/kernels.bin differs from what kiln.toml derives: " +
         first_difference(table, derived_table, "table"))
    need(derived_records == records, "the kernel records differ from what kiln.toml derives: " +
         first_difference(records, derived_records, "kernel"))
    for name, rec in derived_records.items():
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

    return {"header": h, "digest": digest, "head": head, "entries": entries, "signatures": signatures,
            "valid_keys": valid, "table": table, "records": records, "manifest": manifest, "size": len(data)}


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
    # The toolchain in kernels.bin's order, which must be the order kiln itself uses.
    same("toolchain", [(k.decode(), v.decode()) for k, v in a["table"]["toolchain"]], list(j["toolchain"].items()))


# ---- tampering: the reader must refuse what FORMAT.md refuses -----------------------------

def must_refuse(data, keys, what):
    try:
        read_archive(bytes(data), keys)
    except Refused:
        return
    raise Refused(f"self-check: the reader accepted an archive with {what}")


def tamper_checks(data, a, keys):
    io = a["header"]["index_offset"]
    first_page = io + a["head"]["pages"][0]["position"]
    flips = {
        "a reserved header byte set": 60,
        "a changed page byte": first_page + 20,
        "a changed member byte": 64,
        "a changed signature byte": len(data) - 1,
    }
    for what, offset in flips.items():
        if what == "a changed signature byte" and not (a["signatures"] and a["valid_keys"]):
            continue
        bad = bytearray(data)
        bad[offset] ^= 0x01
        must_refuse(bad, keys, what)
    must_refuse(data + b"\0", keys, "a byte appended")


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
                    decode_record(encode_record(bad), name)
                except Refused:
                    continue
                raise Refused(f"self-check: the reader accepted kernel {name!r} shape {i} with {what}")
            ok = dict(rec, shapes=[dict(x) for x in rec["shapes"]])
            ok["shapes"][i]["grid"] = [[(0x02, scalar)]] + list(s["grid"][1:])
            decode_record(encode_record(ok), name)  # the same change, valid: accepted
            return True
    return False


def pack_paged_archive(kiln, ptx, key, folder):
    """Packs, with kiln, a package of 300 extra files: more than two index pages (§3), members
    stored raw (incompressible, empty) and compressed, empty ones across a page boundary (but
    never a whole page of them: see FORMAT.md §3 on first offsets)."""
    shutil.copy(ptx, os.path.join(folder, "scale.ptx"))
    names = []
    for i in range(300):
        name = f"f{i:03d}.bin"
        if i % 7 == 0 or i in (126, 127, 128):
            content = b""
        elif i % 2:
            content = b"".join(hashlib.sha256(f"{i}:{j}".encode()).digest() for j in range(i))  # raw
        else:
            content = (f"line {i}\n" * (i + 1)).encode()  # compresses
        open(os.path.join(folder, name), "wb").write(content)
        names.append(name)
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
    out = os.path.join(folder, "paged.kiln")
    run = subprocess.run([kiln, "pack", os.path.join(folder, "kiln.toml"), "--key", key, "-o", out, "-q"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    if run.returncode != 0:
        raise Refused("kiln pack of the paged archive failed: " + run.stderr.decode(errors="replace"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--archives", required=True)
    ap.add_argument("--expect", nargs="*", default=[], help="archive file names that must be present")
    ap.add_argument("--trust", help="a .pub key file (FORMAT.md §5.3) the archives are signed with")
    ap.add_argument("--paged", nargs=2, metavar=("PTX", "KEY"),
                    help="also pack (with kiln, this PTX and private key) and read an archive of several index pages")
    args = ap.parse_args()
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
    scratch = None
    if args.paged:
        import tempfile
        scratch = tempfile.TemporaryDirectory(prefix="kiln-independent-reader-")
        try:
            paths.append(pack_paged_archive(args.kiln, args.paged[0], args.paged[1], scratch.name))
        except Refused as e:
            print(f"FAIL: {e}", file=sys.stderr)
            return 1
    failures = 0
    for path in paths:
        n = os.path.basename(path)
        data = open(path, "rb").read()
        try:
            a = read_archive(data, keys)
            if keys:
                need(a["valid_keys"], "no signature by the trusted key verifies")
            compare_with_kiln(args.kiln, path, a)
            tamper_checks(data, a, keys)
            if n == "table-edges.kiln":
                need(expression_checks(a), "table-edges.kiln has no range shape to check")
        except Refused as e:
            print(f"FAIL {n}: {e}", file=sys.stderr)
            failures += 1
            continue
        kinds = sorted({KINDS[e["kind"]] for e in a["entries"] if e["kind"]})
        zstd = sum(e["compression"] for e in a["entries"])
        print(f"ok   {n}: {a['digest']}, {len(a['entries'])} members in {len(a['head']['pages'])} page(s) ({zstd} zstd; "
              f"code {', '.join(kinds)}), {len(a['records'])} kernels, {len(a['signatures'])} signature(s), "
              f"{len(a['valid_keys'])} verified")
    print(f"{len(paths) - failures} of {len(paths)} archives read as FORMAT.md says"
          f" (zstd via {'the zstandard module' if zstandard else ZSTD_CLI})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
