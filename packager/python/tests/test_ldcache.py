"""kiln.jit.ldcache: ctypes.util.find_library answered from /etc/ld.so.cache, as `ldconfig -p`
would answer it, with no program started; anything it cannot read falls back to Python's own."""
import ctypes.util
import os
import struct
import subprocess

import pytest

from kiln.jit import ldcache

NAMES = ["c", "m", "z", "ssl", "crypto", "zstd", "stdc++", "dl", "pthread", "gcc_s", "ffi", "lzma", "bz2", "expat",
         "cuda", "no_such_library_kiln"]

pytestmark = pytest.mark.skipif(not os.path.exists(ldcache.CACHE) or os.uname().machine not in ("x86_64", "aarch64"),
                                reason="no glibc linker cache on this machine")


def test_the_same_answers_as_pythons_find_library():
    assert [ldcache.find_library(n) for n in NAMES] == [ldcache._original(n) for n in NAMES]


def test_a_library_in_the_cache_is_found_without_starting_a_program(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"a program was started: {args[0]!r}")
    monkeypatch.setattr(subprocess, "Popen", refuse)
    assert ldcache.lookup("c") == "libc.so.6" and ldcache.lookup("z") == "libz.so.1"


def _cache_file(path, entries, count=None, magic=ldcache._MAGIC):
    strings = b""
    offsets = []
    base = ldcache._HEADER_SIZE + len(entries) * ldcache._ENTRY.size
    for soname in entries:
        offsets.append(base + len(strings))
        strings += soname.encode() + b"\0"
    header = struct.pack("<20sIIB3sI12s", magic, len(entries) if count is None else count, len(strings), 0, b"", 0, b"")
    body = b"".join(ldcache._ENTRY.pack(0x0303, off, off, 0, 0) for off in offsets)
    path.write_bytes(header + body + strings)
    return str(path)


def test_the_first_soname_of_the_cache_order_is_the_answer(tmp_path):
    path = _cache_file(tmp_path / "ld.so.cache", ["libfoo.so.2", "libfoo.so.1", "libfoobar.so.1"])
    assert ldcache.lookup("foo", path, "x86_64") == "libfoo.so.2"
    assert ldcache.lookup("foobar", path, "x86_64") == "libfoobar.so.1"
    assert ldcache.lookup("foo", path, "riscv64") is None  # a machine whose ABI flag kiln does not know


@pytest.mark.parametrize("make", [
    lambda p: p.write_bytes(b"ld.so-1.7.0\0" + bytes(64)) and str(p),             # the old format
    lambda p: p.write_bytes(ldcache._MAGIC + bytes(4)) and str(p),                  # truncated header
    lambda p: _cache_file(p, ["libfoo.so.1"], count=1 << 20),                       # more entries than bytes
    lambda p: str(p / "missing"),                                                   # no file
])
def test_a_cache_file_it_cannot_read_answers_nothing(tmp_path, make):
    assert ldcache.lookup("foo", make(tmp_path / "ld.so.cache"), "x86_64") is None
