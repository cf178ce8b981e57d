"""ctypes.util.find_library without running a program, for served boots.

On Linux, Python's find_library(name) runs `/sbin/ldconfig -p` (then gcc, then ld) and returns
the first soname of the form lib<name>.* that the dynamic linker's cache lists for this
machine's ABI. Libraries an app imports call it at boot (TileLang's stack does), so a served boot
would start a program for every one. The same answer comes from reading the cache file that
`ldconfig -p` prints, /etc/ld.so.cache (glibc's "glibc-ld.so.cache1.1" format), which is what this
module does; where that file is absent, in another format, or holds no match, the original
find_library runs as before (and the boot report lists the program it starts).
"""
import ctypes.util
import os
import re
import struct

CACHE = "/etc/ld.so.cache"
_MAGIC = b"glibc-ld.so.cache1.1"
_HEADER = struct.Struct("<20sII")          # magic+version, entry count, string table length
_HEADER_SIZE = 20 + 4 + 4 + 1 + 3 + 4 + 12  # ... flags, padding, extension offset, unused
_ENTRY = struct.Struct("<iIIIQ")          # flags, key offset, value offset, osversion, hwcap
_ELF_LIBC6 = 0x0003
# The ABI flag of 64-bit libraries for the machines where ldconfig marks one
# (glibc's sysdeps/generic/ldconfig.h); Python matches '(libc6,x86-64' on x86_64.
_ABI = {"x86_64": 0x0300, "aarch64": 0x0A00}
_original = ctypes.util.find_library


def _entries(path=CACHE):
    """[(flags, soname)] of the linker's cache in its own order, or None where it cannot be read."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if len(data) < _HEADER_SIZE or not data.startswith(_MAGIC):
        return None
    _, count, strings = _HEADER.unpack_from(data, 0)
    if _HEADER_SIZE + count * _ENTRY.size > len(data):
        return None
    found = []
    for i in range(count):
        flags, key, _, _, _ = _ENTRY.unpack_from(data, _HEADER_SIZE + i * _ENTRY.size)
        end = data.find(b"\0", key)
        if key >= len(data) or end < 0:
            return None
        found.append((flags, data[key:end].decode("utf-8", "replace")))
    return found


def lookup(name, path=CACHE, machine=None):
    """The soname find_library(name) would return from `ldconfig -p`, read from the cache file;
    None where the file cannot answer (then the original runs)."""
    abi = _ABI.get(machine or os.uname().machine)
    entries = _entries(path) if abi is not None else None
    if not entries:
        return None
    pattern = re.compile(r"lib%s\.\S+" % re.escape(name))
    for flags, soname in entries:
        if flags & 0xFF == _ELF_LIBC6 and flags & 0xFF00 == abi and pattern.fullmatch(soname):
            return soname
    return None


def find_library(name):
    return lookup(name) or _original(name)


def install():
    """Makes ctypes.util.find_library read the cache file in this process (served boots only)."""
    ctypes.util.find_library = find_library
