"""A verified kiln archive as Triton's and TileLang's cache.

The archive is opened through libkiln (signatures checked), capture.json and every member it
serves are read through kiln_archive_read_member (each member's digests checked against the signed
index before a byte is returned), and each kernel's cubin is judged for the device by libkiln's
resolver (kiln_archive_get_kernel on a real device, kiln_archive_preflight_target for a described
one) before Triton is given anything. What Triton receives are files written from those verified
bytes into a private folder of this process (mode 0700): nothing outside the archive is read as a
compiled kernel, host module, autotune result or torch artifact. TileLang (which reads a folder)
is given a private folder of this process, TILELANG_CACHE_DIR, into which each entry is written from
verified bytes right before TileLang reads it, once libkiln has judged its cubin for the device and
that cubin has been found inside the entry's host library (the code the driver will load).

A lookup the archive cannot answer is a miss. By policy it is refused (KilnServeMiss, naming the
kernel and the key component that differs) or compiled as usual and counted; either way once per
key, with its reason, in the boot report.
"""
import atexit
import collections
import json
import os
import re
import shutil
import sys
import tempfile
import time

from .. import _forks
from . import audit, tilelang_keys, triton_keys
from .files import safe_name, write_atomic

POLICIES = ("refuse", "compile")
_HEX64 = re.compile(r"[0-9a-f]{64}")


class KilnServeMiss(RuntimeError):
    """A compiler lookup the archive cannot serve, under policy 'refuse': the message names the
    kernel (or host module), the reason and the component that differs."""

    def __init__(self, reason, message):
        super().__init__(message)
        self.reason = reason


class Report:
    """Counts of served / compiled / refused lookups, by kernel and reason: the proof of 'zero JIT'."""

    def __init__(self, archive_digest, policy):
        self.archive = archive_digest
        self.policy = policy
        self.started = time.time()
        self.pid = os.getpid()      # the process whose lookups it counts
        self._lock = _forks.Lock()
        self.counts = collections.Counter()
        self.events = []            # one per key: {"what", "name", "key", "outcome", "reason", "detail"}
        self._seen = set()
        self.compilations = collections.Counter()   # Triton's listener: cache_hit False / True
        self.tilelang_compilations = 0              # TileLang lookups that ended in a compile
        self.notes = []
        self._noted = set()         # note_once's tags
        self.lookup_seconds = 0.0   # time spent answering lookups (verification, arch check, files)

    def add_time(self, seconds):
        with self._lock:
            self.lookup_seconds += seconds

    def record(self, outcome, what, name, key, reason=None, detail=None):
        with self._lock:
            if (key, outcome) in self._seen:
                return
            self._seen.add((key, outcome))
            self.counts[outcome] += 1
            self.events.append({"outcome": outcome, "what": what, "name": name, "key": key, "reason": reason,
                                "detail": detail})

    def note_once(self, tag, text):
        """A note, once per `tag` however often its situation recurs."""
        with self._lock:
            if tag in self._noted:
                return
            self._noted.add(tag)
            self.notes.append(text)

    def as_dict(self):
        with self._lock:
            by_kernel = collections.defaultdict(collections.Counter)
            by_reason = collections.Counter()
            for e in self.events:
                by_kernel[e["name"] or "?"][e["outcome"]] += 1
                if e["reason"]:
                    by_reason[f"{e['outcome']}:{e['reason']}"] += 1
            return {"archive": self.archive, "policy": self.policy, "pid": os.getpid(),
                    "served": self.counts["served"], "compiled": self.counts["compiled"],
                    "refused": self.counts["refused"], "lookup_seconds": round(self.lookup_seconds, 4),
                    "triton_compilations": self.compilations[False], "triton_cache_hits": self.compilations[True],
                    "tilelang_compilations": self.tilelang_compilations,
                    "by_kernel": {k: dict(v) for k, v in sorted(by_kernel.items())},
                    "by_reason": dict(sorted(by_reason.items())), "events": list(self.events),
                    "programs": list(audit.programs), "notes": list(self.notes)}


def _torch_graphs():
    """(graphs Inductor found in its cache, graphs it generated) in this process, from its counters;
    (0, 0) where torch.compile never ran."""
    utils = sys.modules.get("torch._dynamo.utils")
    counters = getattr(utils, "counters", {}).get("inductor", {}) if utils is not None else {}
    return counters.get("fxgraph_cache_hit", 0), counters.get("fxgraph_cache_miss", 0)


_REPLACED_WHILE_SERVING = {
    "manager_class": "the app replaced Triton's cache manager after kiln set its own: Triton's lookups after "
                     "that did not reach the archive, so 'served', 'compiled' and 'refused' do not count them "
                     "(triton_compilations does, while kiln's listener is in place)",
    "autotuning_cache": "the app turned Triton's autotuning cache off after kiln turned it on: autotuned kernels "
                        "after that benchmark their configs again instead of using the captured results",
    "listener": "the app replaced Triton's compilation listener after kiln chained its own: triton_compilations "
                "and triton_cache_hits count only the compilations before that ('compiled' and 'refused', "
                "counted at each lookup, are whole)"}


def _index_error(digest):
    def bad(where, what):
        raise ValueError(f"{digest}: capture.json {where}: {what}")
    return bad


def _check_files(entry, where, digest, bad):
    """An entry's 'files': {plain file name: member path}."""
    files = entry.get("files")
    if not isinstance(files, dict) or not all(isinstance(f, str) and isinstance(m, str) for f, m in files.items()):
        bad(where, "'files' must map file names to member paths")
    for name in files:
        safe_name(name, f"{digest}: capture.json {where} file")
    return files


def _check_tilelang_entries(entries, digest, bad):
    if not isinstance(entries, dict):
        bad("'tilelang'", "must be an object of TileLang cache keys")
    for key, entry in entries.items():
        where = f"TileLang entry {key}"
        if not isinstance(key, str) or not _HEX64.fullmatch(key):
            bad(where, "a TileLang key is 64 lower-case hex digits")
        if not isinstance(entry, dict) or entry.get("kind") != "tilelang":
            bad(where, "must be an object whose kind is tilelang")
        files = _check_files(entry, where, digest, bad)
        for field in ("kernel", "cubin", "library"):
            if not isinstance(entry.get(field), str):
                bad(where, f"'{field}' must be a string")
        if entry["library"] not in files:
            bad(where, f"its library {entry['library']!r} is not among its files")
        components = entry.get("components")
        if components is not None and (not isinstance(components, dict) or components.get("kind") != "tilelang" or
                                       not isinstance(components.get("name"), str) or
                                       not isinstance(components.get("key_data"), dict) or
                                       not isinstance(components.get("compiler_build"), str)):
            bad(where, "'components' must be null or a tilelang object with name, key_data and compiler_build")


def _check_triton_entries(entries, digest, bad):
    for key, entry in entries.items():
        safe_name(key, f"{digest}: capture.json key")
        where = f"entry {key}"
        if not isinstance(entry, dict) or entry.get("kind") not in ("kernel", "module", "autotune"):
            bad(where, "must be an object whose kind is kernel, module or autotune")
        files = _check_files(entry, where, digest, bad)
        if entry["kind"] == "kernel":
            if not isinstance(entry.get("kernel"), str) or not isinstance(entry.get("group"), str):
                bad(where, "a kernel entry needs 'kernel' and 'group' strings")
            if f"__grp__{entry['group']}" not in files:
                bad(where, f"its group file __grp__{entry['group']} is not among its files")
        components = entry.get("components")
        if components is not None and (not isinstance(components, dict) or
                                       components.get("kind") != ("module" if entry["kind"] == "module" else "kernel")):
            bad(where, "'components' must be null or an object of the entry's kind")


def _check_index(index, digest):
    """capture.json is signed, but its signer is trusted with bytes, not with a shape this reader
    would trip on: every field is checked (schema/CAPTURE.md) before anything is looked up, and a
    bad one named with its key."""
    bad = _index_error(digest)
    if not isinstance(index.get("triton"), dict):
        bad("'triton'", "must be an object of cache keys")
    if not isinstance(index.get("torch", []), list) or not all(isinstance(m, str) for m in index.get("torch", [])):
        bad("'torch'", "must be a list of member paths")
    if not isinstance(index.get("ptxas", {}), dict):
        bad("'ptxas'", "must be an object")
    _check_tilelang_entries(index.get("tilelang", {}), digest, bad)
    _check_triton_entries(index["triton"], digest, bad)


class ServedArchive:
    """The archive, its capture index and the private folder Triton reads verified files from."""

    def __init__(self, archive, target=None, driver=None):
        self.archive = archive
        self.target, self.driver = target, driver
        try:
            index = json.loads(archive.read("capture.json"))
        except Exception as e:
            raise ValueError(f"{archive.digest}: not a captured app (no readable capture.json: {e})") from None
        if index.get("format") != "kiln-jit-capture/1":
            raise ValueError(f"{archive.digest}: capture.json has format {index.get('format')!r}, "
                             "this kiln reads kiln-jit-capture/1")
        _check_index(index, archive.digest)
        self.index = index
        self.entries = index["triton"]
        self.tilelang = index.get("tilelang", {})
        self.by_name = collections.defaultdict(list)
        for e in list(self.entries.values()) + list(self.tilelang.values()):
            c = e.get("components")
            if c:
                self.by_name[(c["kind"], c["source"]["name"] if c["kind"] == "kernel" else c["name"])].append(c)
        self._tilelang_dir = None
        self.dir = tempfile.mkdtemp(prefix="kiln-serve-")  # 0700, this process's own
        self._owner = os.getpid()
        atexit.register(self._remove_folders)
        # Held around every call into libkiln for this archive: a fork waits for it (kiln/_forks.py).
        self._lock = _forks.Lock(fork_waits=True)
        self._materialised = {}
        self._arch = {}
        self._described = None

    def arch_verdict(self, kernel, device):
        """(ok, reason text) of libkiln's resolver for `kernel` on this process's device (or the
        described target): ok when the route is native (a cubin that fits)."""
        cache_key = (kernel, device)
        with self._lock:
            if cache_key in self._arch:
                return self._arch[cache_key]
            if self.target is not None:
                if self._described is None:
                    report = self.archive.preflight(target=self.target, driver=self.driver)
                    self._described = {k["kernel"]: k for k in report["kernels"]}
                k = self._described.get(kernel, {"route": "refused", "detail": "not in the archive"})
                verdict = (k["route"] == "native", f"{k['route']}: {k.get('detail', '')}")
            else:
                handle = self.archive.kernel(kernel, device=device)
                verdict = (handle.route == "native", f"{handle.route}: {handle.reason_text}")
            self._arch[cache_key] = verdict
            return verdict

    def read(self, member):
        """The verified bytes of `member` (libkiln checks its digests first)."""
        with self._lock:
            return self.archive.read(member)

    def materialise(self, key, filename):
        """The path of a verified copy of member triton/<key>/<filename>, written once."""
        # The names come from Triton or from the signed archive's group file: a signer is trusted
        # with bytes, not with paths, so both are plain names before anything is looked up.
        target = os.path.join(self.dir, safe_name(key, "Triton cache key"), safe_name(filename, "Triton cache file"))
        member = self.entries[key]["files"][filename]
        with self._lock:
            path = self._materialised.get(target)
            if path is None:
                data = self.archive.read(member)   # digests checked by libkiln first
                path = write_atomic(target, data, mode=0o600)
                self._materialised[target] = path
            return path


    def place(self, key, filename, folder):
        """The verified member triton/<key>/<filename> at folder/<key>/<filename>: kiln's own copy
        where `folder` is kiln's folder, else written there as well (an app that set
        TRITON_CACHE_DIR itself has Inductor read cubins from its folder, and whatever lies there
        is replaced by the archive's bytes). Returns the path."""
        own = self.materialise(key, filename)
        if os.path.realpath(folder) == os.path.realpath(self.dir):
            return own
        with open(own, "rb") as f:  # kiln's own copy (0600 in its 0700 folder): verified once, not twice
            data = f.read()
        return write_atomic(os.path.join(folder, safe_name(key, "Triton cache key"),
                                         safe_name(filename, "Triton cache file")), data, mode=0o600)

    def _remove_folders(self):
        if os.getpid() != self._owner:  # a forked child exiting: the folders are its parent's
            return
        for folder in (self.dir, self._tilelang_dir):
            if folder:
                shutil.rmtree(folder, ignore_errors=True)

    def tilelang_cache_root(self):
        """TILELANG_CACHE_DIR while serving: this process's own folder (0700), holding only what kiln
        wrote there and what TileLang compiled in this process after a miss, never another cache."""
        with self._lock:
            if self._tilelang_dir is None:
                self._tilelang_dir = os.path.realpath(tempfile.mkdtemp(prefix="kiln-serve-tilelang-"))
            return self._tilelang_dir

    def materialise_tilelang(self, key, cache_path):
        """Writes TileLang entry `key` into `cache_path` (TileLang's own folder for that key, inside
        this process's private cache folder) from verified members, once its cubin has been found
        byte for byte inside the entry's host library: the code object libkiln judged is the one
        the driver will be handed. Refused (ValueError) where it is not."""
        entry = self.tilelang[key]
        with self._lock:
            if self._materialised.get(cache_path) and os.path.isdir(cache_path):
                return cache_path
            data = {name: self.archive.read(member) for name, member in entry["files"].items()}  # digests checked
            device = self.archive.read(entry["cubin"])
            if not device or device not in data[entry["library"]]:
                raise ValueError(f"kiln serve: archive {self.archive.digest}: TileLang entry {key} "
                                 f"({entry['kernel']}): its {entry['library']} does not embed the cubin "
                                 f"{entry['cubin']} that was checked for this device; refused")
            os.makedirs(os.path.dirname(cache_path), mode=0o700, exist_ok=True)
            staging = tempfile.mkdtemp(prefix=".kiln-", dir=os.path.dirname(cache_path))
            try:
                for name, content in data.items():
                    write_atomic(os.path.join(staging, safe_name(name, "TileLang cache file")), content, mode=0o600)
                if os.path.isdir(cache_path):  # left by a load TileLang gave up on: replaced, never merged
                    shutil.rmtree(cache_path)
                os.rename(staging, cache_path)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
            self._materialised[cache_path] = True
            return cache_path


class ServeSession:
    kind = "serve"

    @property
    def cache_manager_class(self):
        from .triton_cache import ServeCacheManager
        return ServeCacheManager

    def __init__(self, served, policy="refuse", report_path=None):
        if policy not in POLICIES:
            raise ValueError(f"kiln serve: policy {policy!r} is not one of {', '.join(POLICIES)}")
        self.served = served
        self.policy = policy
        self.report = Report(served.archive.digest, policy)
        self.report_path = report_path
        self.asked = {}          # key -> components, noted by the hooks before each lookup
        self.asked_tilelang = {}
        self.tilelang_build = None  # set by tilelang_hooks.install: this process's TileLang build pin
        self.fallback_dir = None
        self._graph_gpu_hint = None

    # -- hooks ---------------------------------------------------------------------------------
    def installed(self):
        import atexit
        from .boot_hook import when_imported
        atexit.register(self.write_report)
        os.register_at_fork(after_in_child=self._forked)
        # A worker forked by multiprocessing ends with os._exit, past atexit; its own exit
        # finalizers do run (registered in each such child, after multiprocessing clears those
        # inherited from the parent). Registered once the app imports multiprocessing, never by
        # importing it here: importing it puts the app's main module in sys.modules as
        # __mp_main__, and where that comes before torch's own modules, pickle finds objects that
        # have no __module__ (torch.contiguous_format) through it, which changes every key
        # Inductor hashes its graphs under, so that no captured graph would be found.
        when_imported("multiprocessing", self._watch_multiprocessing_workers)

    def _watch_multiprocessing_workers(self):
        import multiprocessing.util
        multiprocessing.util.register_after_fork(self, ServeSession._report_at_worker_exit)

    def _forked(self):
        """In a forked child: the report counts this process's lookups from here on (the parent's
        stay the parent's), and says where it came from."""
        parent = self.report.pid
        self.report = Report(self.served.archive.digest, self.policy)
        self.report.notes.append(f"forked from process {parent}: this report counts what this process looked up "
                                 "after the fork (compiled kernels it inherited need no lookup)")
        audit.programs.clear()

    @staticmethod
    def _report_at_worker_exit(session):
        import multiprocessing.util
        multiprocessing.util.Finalize(None, session.write_report, exitpriority=0)

    def on_key(self, name, components, **_):
        self.asked[name] = components

    def on_compiled(self, src, metadata, cache_hit):
        self.report.compilations[bool(cache_hit)] += 1

    def on_tilelang_key(self, key, components):
        self.asked_tilelang[key] = components

    def note(self, text):
        self.report.notes.append(text)

    # -- TileLang ------------------------------------------------------------------------------
    def _tilelang_device(self):
        if self.served.target is not None:
            return 0
        import sys
        torch = sys.modules.get("torch")
        try:
            return torch.cuda.current_device() if torch is not None else 0
        except Exception:
            return 0

    def tilelang_lookup(self, key, cache_path):
        """Before TileLang reads its cache entry `key` at `cache_path`: the entry written there from
        the archive (True), or a miss refused (KilnServeMiss) or left to TileLang to compile (False)."""
        started = time.perf_counter()
        try:
            return self._tilelang_lookup(key, cache_path)
        finally:
            self.report.add_time(time.perf_counter() - started)

    def _tilelang_lookup(self, key, cache_path):
        entry = self.served.tilelang.get(key)
        asked = self.asked_tilelang.get(key)
        name = (asked or (entry or {}).get("components") or {}).get("name") or "?"
        private = self.served.tilelang_cache_root()
        if os.path.commonpath([os.path.realpath(cache_path), private]) != private:
            raise ValueError(f"kiln serve: TileLang looks kernel {name!r} up in {cache_path}, outside kiln's private "
                             f"cache folder {private}: TILELANG_CACHE_DIR was changed after kiln serve started, and "
                             "TileLang would read entries kiln has not verified")
        if entry is None:
            reason, detail = tilelang_keys.explain_miss(asked, self.served.by_name.get(("tilelang", name), []))
            self._miss("TileLang kernel", name, key, reason, detail, cache="TileLang")  # raises under 'refuse'
            return False
        # TileLang's key leaves its build out: kiln's pin is checked here, on every hit.
        have = entry.get("components")
        current = self.tilelang_build() if self.tilelang_build else (asked or {}).get("compiler_build")
        if have is None or current is None or current != have["compiler_build"]:
            if have is None or current is None:
                detail = ("the capture recorded no TileLang build for this entry" if have is None else
                          "this process's TileLang build is unknown") + ", so kiln cannot check that this TileLang is " \
                                                                      "the one that compiled it"
            else:
                detail = (f"TileLang build differs (this process {current[:16]}..., captured "
                          f"{have['compiler_build'][:16]}... version {have['tilelang_version']}): a changed compiler "
                          "is never served")
            self._miss("TileLang kernel", name, key, "compiler-build", detail, cache="TileLang")
            return False
        ok, verdict = self.served.arch_verdict(entry["kernel"], self._tilelang_device())
        if not ok:
            self._miss("TileLang kernel", name, key, "arch", f"libkiln refuses kernel {entry['kernel']} here: {verdict}",
                       cache="TileLang")
            return False
        self.served.materialise_tilelang(key, cache_path)
        self.report.record("served", "TileLang kernel", name, key)
        return True

    def tilelang_not_loaded(self, key, served):
        """TileLang found nothing it could load under `key` and compiles it now: counted, and, for an
        entry kiln had served, refused under policy 'refuse' (TileLang could not load verified bytes)."""
        name = (self.asked_tilelang.get(key) or {}).get("name") or "?"
        if served:
            self._miss("TileLang kernel", name, key, "load-failed",
                       "TileLang could not load the served entry (its runtime differs from the capture's?)",
                       cache="TileLang")
        self.report.tilelang_compilations += 1

    def tilelang_cache_disabled(self, name):
        """A TileLang compile with its cache turned off: it would compile without any lookup."""
        self._miss("TileLang kernel", name, f"tilelang-cache-off:{name}", "cache-disabled",
                   "TileLang's kernel cache is off in this process (tilelang.disable_cache() or "
                   "TILELANG_DISABLE_CACHE), so nothing can be served to it", cache="TileLang")
        self.report.tilelang_compilations += 1

    # -- Inductor's statically launched kernels -------------------------------------------------
    def admit_static_kernel(self, kernel_hash, name, cache_dir, path_key, device):
        """Before Inductor loads a kernel from torch.compile's artifacts as statically launchable
        (its cubin bundled in the artifact, launched without asking Triton): True once the archive's
        Triton entry for it has been found, libkiln's resolver has accepted that entry's cubin for
        `device`, and the verified cubin lies where Inductor reads it (`cache_dir`/<KEY>/<name>.cubin).
        False otherwise, and Inductor then loads the kernel through Triton, where kiln answers or
        refuses it, with its reason, as any lookup."""
        started = time.perf_counter()
        try:
            # The hash and name come from a signed artifact, but a signer is trusted with bytes, not
            # with names: anything kiln cannot match to an entry's own file is left to Triton.
            try:
                key = path_key(kernel_hash)
                entry = self.served.entries.get(key)
                filename = f"{name}.cubin"
                if entry is None or entry.get("kind") != "kernel" or filename not in entry["files"]:
                    return False
                ok, _ = self.served.arch_verdict(entry["kernel"], device)
                if not ok:
                    return False
                self._place_for_inductor(key, filename, cache_dir)
            except Exception as e:  # the Triton lookup this leaves the kernel to meets it again and says so
                self.report.note_once(f"static:{kernel_hash!r}",
                                      f"Inductor's statically launched kernel {name!r} (hash {kernel_hash!r}) is left "
                                      f"to Triton's lookup: {e}")
                return False
            components = entry.get("components") or {}
            name = (components.get("source") or {}).get("name") or entry["kernel"]
            self.report.record("served", "statically launched kernel", name, key)
            return True
        finally:
            self.report.add_time(time.perf_counter() - started)

    def _place_for_inductor(self, key, filename, folder):
        """The archive's cubin where Inductor will read it: Inductor launches a kernel statically
        from the file it finds at TRITON_CACHE_DIR/<KEY>/<name>.cubin, not from the bytes Triton
        was handed, so that file is kiln's whichever folder the app has made TRITON_CACHE_DIR."""
        if os.path.realpath(folder) != os.path.realpath(self.served.dir):
            self.report.note_once("moved-dir",
                                  f"TRITON_CACHE_DIR is {folder}, not kiln's folder {self.served.dir} (the app set it "
                                  "after kiln serve started): kiln writes there the verified cubin of each kernel "
                                  "Inductor may launch from it, replacing whatever lay there")
        try:
            return self.served.place(key, filename, folder)
        except OSError as e:
            raise ValueError(f"kiln serve: Inductor launches kernels from the cubins in {folder} (TRITON_CACHE_DIR) "
                             f"and kiln cannot write the verified cubin of {filename} there ({e}); make that folder "
                             "writable, or leave TRITON_CACHE_DIR to kiln serve") from None

    def _inductor_triton_dir(self):
        """The folder Inductor reads cubins from for this process's device (torch's own
        triton_cache_dir, as it will compute it), or None where Inductor is not loaded."""
        for module in ("torch._inductor.runtime.cache_dir_utils", "torch._inductor.runtime.runtime_utils"):
            utils = sys.modules.get(module)
            if utils is not None and hasattr(utils, "triton_cache_dir"):
                return utils.triton_cache_dir(self._device())
        return None

    # -- lookups -------------------------------------------------------------------------------
    def _device(self):
        if self.served.target is not None:
            return 0
        from triton.runtime import driver
        return driver.active.get_current_device()

    def lookup(self, key, filename, group):
        started = time.perf_counter()
        try:
            return self._lookup(key, filename, group)
        finally:
            self.report.add_time(time.perf_counter() - started)

    def _lookup(self, key, filename, group):
        compiled = self._compiled_here(key, filename, group)
        if compiled is not None:
            return compiled
        entry = self.served.entries.get(key)
        what, name = self._describe(key, filename, entry)
        if entry is None or (filename not in entry["files"] and
                             (not group or entry.get("kind") != "kernel")):
            asked = self.asked.get(key)
            if filename.endswith(".autotune.json"):
                reason, detail = "autotune-configs", (f"no autotune results for {name!r} under this key (its configs, "
                                                      "tuning key, Triton build or ptxas differ from the capture's)")
            else:
                candidates = self.served.by_name.get((asked["kind"], name), []) if asked else []
                reason, detail = triton_keys.explain_miss(asked, candidates)
            return self._miss(what, name, key, reason, detail)
        if group:
            if entry.get("kind") != "kernel" or filename != entry.get("group"):
                return self._miss(what, name, key, "not-captured", f"the archive's entry has no group {filename!r}")
            ok, verdict = self.served.arch_verdict(entry["kernel"], self._device())
            if not ok:
                return self._miss(what, name, key, "arch", f"libkiln refuses kernel {entry['kernel']} here: {verdict}")
            with open(self.served.materialise(key, f"__grp__{filename}")) as f:
                group_names = json.load(f).get("child_paths", {})
            unknown = sorted(set(group_names) - set(entry["files"]))
            if unknown:  # a signed archive whose group names files its entry lacks: refused, never guessed
                raise ValueError(f"kiln serve: archive {self.served.archive.digest}: the group of {name!r} "
                                 f"(key {key}) names {unknown}, which its entry in capture.json does not hold")
            paths = {child: self.served.materialise(key, child) for child in group_names}
            inductor_dir = self._inductor_triton_dir()
            if inductor_dir is not None and os.path.realpath(inductor_dir) != os.path.realpath(self.served.dir):
                for child in group_names:
                    if child.endswith(".cubin"):
                        self._place_for_inductor(key, child, inductor_dir)
            self.report.record("served", what, name, key)
            return paths
        path = self.served.materialise(key, filename)
        self.report.record("served", what, name, key)
        return path

    def _describe(self, key, filename, entry):
        if filename.endswith(".autotune.json"):
            return "autotune", filename[:-len(".autotune.json")]
        asked = self.asked.get(key) or (entry or {}).get("components") or {}
        if asked.get("kind") == "module":
            return "module", asked["name"]
        if asked.get("kind") == "kernel":
            return "kernel", asked["source"]["name"]
        return "file", filename.rsplit(".", 1)[0]

    def _graph_gpu(self):
        """Where torch.compile's artifacts were captured on another GPU model than this process's:
        a line saying so (noted once in the report), else ''. Inductor keys its graphs by the GPU's
        name, so there it compiles them again and their kernels are misses, whatever --target
        cross-compiled. Read from torch only once it has initialised CUDA itself."""
        if self._graph_gpu_hint is None:
            hint = ""
            captured = (self.served.index.get("toolchain") or {}).get("capture_gpu")
            torch = sys.modules.get("torch")
            if self.served.index.get("torch") and captured and torch is not None and self.served.target is None:
                try:
                    here = torch.cuda.get_device_name(torch.cuda.current_device()) \
                        if torch.cuda.is_initialized() else None
                except Exception:  # no answer from torch: no hint, the miss still says what differs
                    here = None
                if here is None:
                    return ""  # asked again at the next miss, once torch may have a device
                if here != captured:
                    hint = (f"torch.compile's graphs were captured on {captured} and this GPU is {here}: Inductor keys "
                            "its graphs by the GPU's name and compiles them again here, so their kernels are not in "
                            "the archive (capture the app on each GPU model it runs on)")
                    self.note(hint)
            self._graph_gpu_hint = hint
        return self._graph_gpu_hint

    def _miss(self, what, name, key, reason, detail, cache="Triton"):
        if what == "kernel" and cache == "Triton" and self._graph_gpu():
            detail = f"{detail}; {self._graph_gpu()}"
        message = (f"kiln serve: {what} {name!r} ({cache} cache key {key}) is not in archive "
                   f"{self.served.archive.digest}: {reason}: {detail}")
        if self.policy == "refuse":
            self.report.record("refused", what, name, key, reason, detail)
            raise KilnServeMiss(reason, message + " (policy 'refuse'; serve with policy 'compile' to compile it)")
        self.report.record("compiled", what, name, key, reason, detail)
        return None

    def _compiled_here(self, key, filename, group):
        """What this process compiled itself after a miss (policy 'compile'), found again."""
        if self.fallback_dir is None:
            return None
        folder = os.path.join(self.fallback_dir, safe_name(key, "key"))
        if not group:
            path = os.path.join(folder, safe_name(filename, "file"))
            return path if os.path.exists(path) else None
        grp = os.path.join(folder, f"__grp__{safe_name(filename, 'file')}")
        if not os.path.exists(grp):
            return None
        with open(grp) as f:
            names = json.load(f)["child_paths"]
        return {n: os.path.join(folder, safe_name(p, "file")) for n, p in names.items()}

    def store(self, key, data, filename):
        """Where Triton puts what it compiled after a miss (policy 'compile'): this process's own
        folder, never the archive's files."""
        if self.fallback_dir is None:
            self.fallback_dir = tempfile.mkdtemp(prefix="kiln-serve-compiled-")
        return write_atomic(os.path.join(self.fallback_dir, safe_name(key, "key"), safe_name(filename, "file")),
                            data if isinstance(data, bytes) else str(data))

    def report_dict(self):
        """The report as a dict, noting each Triton knob the app has set since kiln set it (what kiln
        then no longer saw), with torch.compile's graphs found in the captured caches and generated
        again (Inductor's own counters: a graph generated again asks Triton only for kernels it
        already has, so no other count shows it)."""
        from .hooks import replaced_knobs
        for knob in replaced_knobs(self):
            self.report.note_once(knob, _REPLACED_WHILE_SERVING[knob])
        report = self.report.as_dict()
        loaded, generated = _torch_graphs()
        report.update(torch_graphs_loaded=loaded, torch_graphs_generated=generated)
        if generated:
            report["notes"].append(f"torch.compile generated {generated} graph(s) again instead of loading the "
                                   "captured one(s): Inductor's key for them differed from the capture's (another "
                                   "torch, GPU, Inductor config or input shape, or the app's imports in another "
                                   "order); the kernels they asked for are in the lookup counts")
        return report

    def write_report(self):
        if not self.report_path:
            return None
        path = self.report_path.replace("{pid}", str(os.getpid()))
        write_atomic(path, json.dumps(self.report_dict(), indent=1, sort_keys=True))
        return path
