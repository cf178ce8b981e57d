"""kiln.capture and kiln.serve on real Triton kernels, cross-compiled on a machine without a GPU:
a capture recorded and sealed with the kiln command, then served in fresh processes, each lookup
answered from the verified archive up to the moment Triton receives it. The GPU half (an HF model
under torch.compile, autotune, launches) is ci/gpu-app-boot.sh's, on the H200."""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("triton")
from test_export import kiln_cli  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent


def _python(script, env=None, check=True):
    """Runs `script` in a fresh interpreter (a capture or serve session is one per process) and
    returns the JSON it prints last."""
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE)] + sys.path), **(env or {}))
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, env=full_env,
                       timeout=600)
    if check and r.returncode != 0:
        raise AssertionError(f"exit {r.returncode}\n{r.stdout}\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1]) if r.stdout.strip() else {"exit": r.returncode,
                                                                                    "stderr": r.stderr}


def enable_error(archive, trust):
    """What kiln.serve.enable raises for `archive` (a ValueError's text) in a fresh process; None
    where it enabled."""
    r = _python(f"""
        import json, kiln.serve
        try:
            kiln.serve.enable({str(archive)!r}, trust={str(trust)!r}, target="sm_90")
            print(json.dumps({{"error": None}}))
        except ValueError as e:
            print(json.dumps({{"error": str(e)}}))
    """)
    return r["error"]


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    """One capture: add_kernel for sm_90 (and, by --target, sm_80), scale_kernel, a host module;
    packed and signed with a key made here."""
    root = tmp_path_factory.mktemp("capture")
    cli = kiln_cli()
    out = root / "app"
    ran = _python(f"""
        import json, os, kiln.capture
        with kiln.capture.capture({str(out)!r}, targets=["sm_80"], package="test-app") as c:
            from jit_app import kernels
            kernels.compile_add()
            kernels.compile_scale()
            kernels.build_probe()
            triton_cache_dir = os.environ.get("TRITON_CACHE_DIR")
        print(json.dumps(dict(c.summary, triton_cache_dir=triton_cache_dir)))
    """)
    subprocess.run([cli, "keygen", "--out", str(root / "release")], check=True, capture_output=True)
    subprocess.run([cli, "keygen", "--out", str(root / "stranger")], check=True, capture_output=True)
    archive = root / "app.kiln"
    subprocess.run([cli, "pack", str(out / "kiln.toml"), "--key", str(root / "release.key"), "-o", str(archive), "-q"],
                   check=True, capture_output=True)
    return {"root": root, "dir": out, "archive": archive, "trust": root / "release.pub", "cli": cli,
            "triton_cache_dir": ran["triton_cache_dir"]}


_SERVE = """
    import json, os, kiln.serve
    from kiln.jit.served import KilnServeMiss
    events = []
    import sys
    sys.addaudithook(lambda e, a: events.append(e) if e in ("subprocess.Popen", "os.exec", "os.posix_spawn",
                                                           "os.system", "os.spawn", "os.fork") else None)
    session = kiln.serve.enable({archive!r}, trust={trust!r}, policy={policy!r}, target={target!r})
    from jit_app import kernels
    result = {{}}
    def attempt(name, fn):
        try:
            out = fn()
            result[name] = {{"ok": True, "cubin": out.asm["cubin"].hex() if hasattr(out, "asm") else None}}
        except KilnServeMiss as e:
            result[name] = {{"ok": False, "reason": e.reason, "message": str(e)}}
        except Exception as e:
            result[name] = {{"ok": False, "error": type(e).__name__, "message": str(e)}}
"""


def _serve(captured, body, policy="refuse", target="sm_90", archive=None, trust=None):
    script = textwrap.dedent(_SERVE.format(archive=str(archive or captured["archive"]),
                                           trust=str(trust or captured["trust"]), policy=policy, target=target)) + \
        textwrap.dedent(body) + \
        "\nresult['report'] = kiln.serve.report(); result['programs'] = events\nprint(json.dumps(result))\n"
    return _python(script)


def _repack(captured, folder, archive):
    """Seals `folder` (a changed copy of the capture) with the release key into `archive`."""
    subprocess.run([captured["cli"], "pack", str(folder / "kiln.toml"), "--key", str(captured["root"] / "release.key"),
                    "-o", str(archive), "-q"], check=True, capture_output=True)
    return archive


def test_capture_is_an_ordinary_package_of_every_specialisation(captured):
    import tomllib
    manifest = tomllib.loads((captured["dir"] / "kiln.toml").read_text())
    archs = sorted(c["arch"] for k in manifest["kernel"] for c in k["code"])
    assert archs == ["sm_80", "sm_80", "sm_90a", "sm_90a"]  # add and scale, native and --target sm_80
    index = json.loads((captured["dir"] / "capture.json").read_text())
    kinds = sorted(e["kind"] for e in index["triton"].values())
    assert kinds == ["kernel"] * 4 + ["module"]
    add = [e for e in index["triton"].values() if e["kind"] == "kernel" and e["components"]["source"]["name"] == "add_kernel"]
    assert {e["components"]["arch"] for e in add} == {80, 90} and all(e["components"]["compiler_build"] for e in add)
    assert index["ptxas"]["90"]["version"].startswith("ptxas") and len(index["ptxas"]["90"]["sha256"]) == 64
    # Where Inductor looks a cubin up to launch it statically and bundle it into torch.compile's
    # artifacts (TRITON_CACHE_DIR/<KEY>/<name>.cubin) is where the capture wrote it.
    for key, e in index["triton"].items():
        if e["kind"] == "kernel":
            name = e["group"][:-len(".json")] + ".cubin"
            assert (pathlib.Path(captured["triton_cache_dir"]) / key / name).read_bytes() == \
                (captured["dir"] / e["files"][name]).read_bytes()
    # the kiln command sees the captured kernels like any other: judged for an sm_90 fleet
    r = subprocess.run([captured["cli"], "preflight", str(captured["archive"]), "--trust", str(captured["trust"]),
                        "--target", "sm_90", "--json"], capture_output=True, text=True, check=True)
    routes = {k["kernel"]: (k["route"], k["reason"]) for t in json.loads(r.stdout)["targets"] for k in t["kernels"]}
    assert len(routes) == 4
    assert sorted(routes.values()) == [("native", "match")] * 2 + [("reference", "arch-mismatch")] * 2  # sm_80 code


def test_a_served_lookup_is_the_captured_bytes_and_runs_no_program(captured):
    r = _serve(captured, """
        attempt("add", kernels.compile_add)
        attempt("scale", kernels.compile_scale)
        probe = kernels.build_probe()
        result["probe"] = probe.ANSWER
    """)
    index = json.loads((captured["dir"] / "capture.json").read_text())
    served = {e["components"]["arch"]: captured["dir"] / e["files"]["add_kernel.cubin"]
              for e in index["triton"].values() if e["kind"] == "kernel" and "add_kernel.cubin" in e["files"]}
    assert r["add"]["ok"] and bytes.fromhex(r["add"]["cubin"]) == served[90].read_bytes()
    assert r["scale"]["ok"]
    assert r["probe"] == 42  # the host module, loaded from the verified archive: no C compiler ran
    report = r["report"]
    assert report["served"] == 3 and report["compiled"] == 0 and report["refused"] == 0
    assert report["triton_compilations"] == 0 and report["triton_cache_hits"] == 2
    assert r["programs"] == [] and report["programs"] == []  # no ptxas --version, gcc or `file`: nothing ran


def test_a_report_says_which_of_kilns_triton_knobs_the_app_replaced(captured):
    """kiln serves through Triton's cache manager and counts through its compilation listener, both
    knobs an app may set itself after kiln did: the report then says what it no longer saw."""
    r = _serve(captured, """
        attempt("add", kernels.compile_add)
        result["before"] = kiln.serve.report()
        import triton
        from triton.runtime.cache import FileCacheManager
        triton.knobs.compilation.listener = lambda **kwargs: None  # the app's own
        triton.knobs.cache.manager_class = FileCacheManager
        attempt("scale", kernels.compile_scale)
    """)
    assert r["add"]["ok"] and r["scale"]["ok"], r
    assert r["before"]["triton_cache_hits"] == 1 and r["before"]["notes"] == [], r["before"]
    report = r["report"]
    assert report["served"] == 1 and report["triton_cache_hits"] == 1, report  # scale never reached kiln
    notes = report["notes"]
    assert any(n.startswith("the app replaced Triton's compilation listener") for n in notes), notes
    assert any(n.startswith("the app replaced Triton's cache manager") for n in notes), notes


def test_an_app_listener_that_calls_kilns_leaves_the_report_whole_and_unnoted(captured):
    """An app that sets its own compilation listener and calls the one it replaced (kiln's), as the
    boot benchmark's app does, still lets kiln count every compilation: the report counts on and
    notes nothing about the listener."""
    r = _serve(captured, """
        attempt("add", kernels.compile_add)
        import triton
        previous = triton.knobs.compilation.listener
        def chained(**kwargs):
            previous(**kwargs)
        triton.knobs.compilation.listener = chained
        attempt("scale", kernels.compile_scale)
    """)
    assert r["add"]["ok"] and r["scale"]["ok"], r
    report = r["report"]
    assert report["served"] == 2 and report["triton_cache_hits"] == 2, report
    assert not any("listener" in n for n in report["notes"]), report["notes"]


def test_a_statically_launched_kernel_is_admitted_only_as_the_archive_holds_it(captured):
    """Inductor loads the kernels of its cache entries without asking Triton (cubins bundled in
    torch.compile's artifact, launched statically). kiln admits one only where the archive holds
    its entry and libkiln accepts that cubin for the device, and then writes the archive's cubin
    where Inductor reads it; a kernel it does not admit is left to Triton's lookup. Judged here for
    sm_90 and sm_80 with the captured add_kernel's own hashes (Inductor's shape of the call)."""
    index = json.loads((captured["dir"] / "capture.json").read_text())
    adds = {e["components"]["arch"]: (key, json.loads((captured["dir"] / e["files"][e["group"]]).read_text())["hash"],
                                      (captured["dir"] / e["files"]["add_kernel.cubin"]).read_bytes())
            for key, e in index["triton"].items() if e["kind"] == "kernel" and "add_kernel.cubin" in e["files"]}
    body = """
        from kiln.jit import triton_keys
        s = kiln.serve.session()
        here = s.served.dir
        for arch, h in {hashes!r}.items():
            result[arch] = s.admit_static_kernel(h, "add_kernel", here, triton_keys.base32, 0)
            path = os.path.join(here, triton_keys.base32(h), "add_kernel.cubin")
            result[arch + "-file"] = open(path, "rb").read().hex() if os.path.exists(path) else None
        result["unknown"] = s.admit_static_kernel("ab" * 32, "add_kernel", here, triton_keys.base32, 0)
        result["not-hex"] = s.admit_static_kernel("../x", "add_kernel", here, triton_keys.base32, 0)
        result["climbing"] = s.admit_static_kernel({h90!r}, "../add_kernel", here, triton_keys.base32, 0)
        import tempfile
        moved = tempfile.mkdtemp()  # the app set TRITON_CACHE_DIR itself: a stale file lies there
        stale = os.path.join(moved, triton_keys.base32({h90!r}), "add_kernel.cubin")
        os.makedirs(os.path.dirname(stale))
        open(stale, "wb").write(b"not the archive's cubin")
        result["other-dir"] = s.admit_static_kernel({h90!r}, "add_kernel", moved, triton_keys.base32, 0)
        result["other-dir-file"] = open(stale, "rb").read().hex()
        blocked = tempfile.mkdtemp()  # where the cubin would go, a folder: kiln cannot write it (even as root)
        os.makedirs(os.path.join(blocked, triton_keys.base32({h90!r}), "add_kernel.cubin"))
        try:
            s._place_for_inductor(triton_keys.base32({h90!r}), "add_kernel.cubin", blocked)
            result["unwritable"] = None
        except ValueError as e:
            result["unwritable"] = str(e)
        result["TRITON_CACHE_DIR"] = os.environ["TRITON_CACHE_DIR"] == here
    """.format(hashes={str(a): h for a, (_, h, _) in adds.items()}, h90=adds[90][1])
    on90 = _serve(captured, body, target="sm_90")
    on80 = _serve(captured, body, target="sm_80")
    assert on90["90"] is True and bytes.fromhex(on90["90-file"]) == adds[90][2]  # the archive's own cubin
    # Another major's code (CUDA's rule, libkiln's verdict): left to Triton, nothing written.
    assert on90["80"] is False and on90["80-file"] is None
    assert on80["90"] is False and on80["90-file"] is None
    assert on80["80"] is True and bytes.fromhex(on80["80-file"]) == adds[80][2]
    assert on90["unknown"] is False and on90["TRITON_CACHE_DIR"] is True
    # Where Inductor reads from another folder, the archive's cubin is written there over what lay there.
    assert on90["other-dir"] is True and bytes.fromhex(on90["other-dir-file"]) == adds[90][2]
    assert "cannot write the verified cubin of add_kernel.cubin" in on90["unwritable"], on90["unwritable"]
    assert on90["not-hex"] is False and on90["climbing"] is False  # names from the artifact, not matched: refused
    served = {(e["key"], e["what"]) for e in on90["report"]["events"] if e["outcome"] == "served"}
    assert served == {(adds[90][0], "statically launched kernel")} and on90["report"]["refused"] == 0
    assert any("not kiln's folder" in n and "replacing whatever lay there" in n for n in on90["report"]["notes"])


def test_a_statically_launched_kernel_whose_entry_names_no_kernel_is_left_to_triton(captured, tmp_path):
    """A signed capture.json whose entry names a manifest kernel the archive lacks: libkiln cannot
    judge it, so Inductor is not handed it; the Triton lookup it is left to refuses it."""
    changed = tmp_path / "changed"
    shutil.copytree(captured["dir"], changed)
    index = json.loads((changed / "capture.json").read_text())
    key, entry = next((k, e) for k, e in index["triton"].items()
                      if e["kind"] == "kernel" and e["components"]["arch"] == 90 and "add_kernel.cubin" in e["files"])
    entry["kernel"] = "no_such_kernel"
    (changed / "capture.json").write_text(json.dumps(index))
    archive = _repack(captured, changed, tmp_path / "changed.kiln")
    h = json.loads((changed / entry["files"][entry["group"]]).read_text())["hash"]
    r = _serve(captured, f"""
        from kiln.jit import triton_keys
        s = kiln.serve.session()
        result["admitted"] = s.admit_static_kernel({h!r}, "add_kernel", s.served.dir, triton_keys.base32, 0)
        result["file"] = os.path.exists(os.path.join(s.served.dir, {key!r}, "add_kernel.cubin"))
        attempt("add", kernels.compile_add)
    """, archive=archive)
    assert r["admitted"] is False and r["file"] is False
    assert r["add"]["ok"] is False and r["add"]["reason"] == "arch", r["add"]
    assert "no_such_kernel" in r["add"]["message"], r["add"]


def test_every_miss_is_refused_with_the_component_that_differs(captured):
    r = _serve(captured, """
        attempt("specialisation", lambda: kernels.compile_add(block=256))
        attempt("options", lambda: kernels.compile_add(num_warps=8))
        attempt("arch", lambda: kernels.compile_add(arch=100))
        import jit_app.kernels_changed as changed
        attempt("source", lambda: kernels.compile_add(fn=changed.add_kernel))
        attempt("not-captured", kernels.compile_neg)
        attempt("host-module-source", lambda: kernels.build_probe(answer=43))  # another C source
        import triton.backends.nvidia.compiler as nvidia
        pinned = nvidia.get_ptxas_version
        nvidia.get_ptxas_version = lambda arch=80: "ptxas: NVIDIA (R) Ptx optimizing assembler\\nBuild cuda_12.4.r12.4"
        attempt("ptxas", kernels.compile_add)
        nvidia.get_ptxas_version = pinned
        from triton.runtime.cache import get_cache_manager
        attempt("autotune-configs", lambda: get_cache_manager("ab" * 32).get_file("softmax_rows.autotune.json"))
        import triton.runtime.build as build
        build.platform_key = lambda: "riscv64,Linux,64bit,ELF"  # the host modules were built for x86-64
        attempt("platform", kernels.build_probe)
    """)
    expected = {"specialisation": "constexprs", "options": "num_warps=8", "arch": "target arch 100",
                "source": "source differs", "not-captured": "never compiled kernel 'neg_kernel'",
                "host-module-source": "kiln_probe's C source differs", "ptxas": "cuda_12.4",
                "autotune-configs": "no autotune results for 'softmax_rows'", "platform": "riscv64"}
    for name, words in expected.items():
        assert r[name]["ok"] is False and r[name].get("reason") == name, r[name]
        assert words in r[name]["message"], r[name]
    assert r["report"]["refused"] == 9 and r["report"]["served"] == 0


def test_a_changed_compiler_or_environment_is_refused_and_compile_policy_counts(captured):
    r = _serve(captured, """
        os.environ["MLIR_ENABLE_TIMING"] = "1"
        attempt("env", kernels.compile_add)
        del os.environ["MLIR_ENABLE_TIMING"]
        import triton.runtime.cache as cache
        real = cache.triton_key
        cache.triton_key = lambda: "3.6.1" + real()[5:]
        attempt("compiler-build", kernels.compile_add)
        cache.triton_key = real
        attempt("arch86", lambda: kernels.compile_scale(arch=86))
    """, policy="compile")
    assert r["env"]["ok"] and r["compiler-build"]["ok"]  # compiled, as the policy says
    reasons = {e["reason"] for e in r["report"]["events"] if e["outcome"] == "compiled"}
    assert {"env", "compiler-build", "arch"} <= reasons, r["report"]["events"]
    assert r["report"]["compiled"] >= 3 and r["report"]["triton_compilations"] >= 3
    detail = [e["detail"] for e in r["report"]["events"] if e["reason"] == "compiler-build"][0]
    assert "version 3.6.1" in detail and "never served" in detail


def test_a_tampered_member_is_refused_before_triton_reads_it(captured, tmp_path):
    data = bytearray(captured["archive"].read_bytes())
    index = json.loads((captured["dir"] / "capture.json").read_text())
    member = next(e["files"]["add_kernel.cubin"] for e in index["triton"].values()
                  if e["kind"] == "kernel" and e["components"]["arch"] == 90 and "add_kernel.cubin" in e["files"])
    listing = subprocess.run([captured["cli"], "inspect", str(captured["archive"]), "--json"], capture_output=True,
                             text=True, check=True)
    stored = next(m for m in json.loads(listing.stdout)["members"] if m["path"] == member)
    data[stored["offset"] + stored["stored_size"] // 2] ^= 0x01  # one byte of the sm_90a cubin's stored bytes
    bad = tmp_path / "tampered.kiln"
    bad.write_bytes(bytes(data))
    r = _serve(captured, """
        attempt("add", kernels.compile_add)
        attempt("scale", kernels.compile_scale)
    """, archive=bad)
    assert r["add"]["ok"] is False and r["add"]["error"] == "KilnError", r["add"]
    assert "integrity" in r["add"]["message"] and member in r["add"]["message"], r["add"]["message"]
    # A described target is judged for the whole archive at once (kiln_archive_preflight_target):
    # the changed member refuses the other kernel's lookup too, with the same reason.
    assert r["scale"]["ok"] is False and member in r["scale"]["message"]
    assert r["report"]["triton_compilations"] == 0  # the changed kernel was neither served nor compiled


def test_an_untrusted_archive_or_a_wrong_arch_entry_never_reaches_triton(captured):
    r = _python(f"""
        import json, kiln.serve
        try:
            kiln.serve.enable({str(captured['archive'])!r}, trust={str(captured['root'] / 'stranger.pub')!r})
            print(json.dumps({{"enabled": True}}))
        except Exception as e:
            print(json.dumps({{"enabled": False, "error": str(e)}}))
    """)
    assert r["enabled"] is False and "signature" in r["error"]
    # The sm_80 entry asked for on an sm_90 device: in the index, but its cubin cannot run there
    # (cc 8.x code on cc 9.0), and libkiln's resolver says so before Triton is given a byte.
    r = _serve(captured, 'attempt("add", lambda: kernels.compile_add(arch=80))', target="sm_90")
    assert r["add"]["ok"] is False and r["add"]["reason"] == "arch", r["add"]
    assert "libkiln refuses" in r["add"]["message"] and "runs on cc 8.0 up to 8.x" in r["add"]["message"]
    # ... and served on the fleet it was cross-compiled for (--target sm_80 at capture).
    r = _serve(captured, 'attempt("add", lambda: kernels.compile_add(arch=80))', target="sm_86")
    index = json.loads((captured["dir"] / "capture.json").read_text())
    sm80 = next(captured["dir"] / e["files"]["add_kernel.cubin"] for e in index["triton"].values()
                if e["kind"] == "kernel" and e["components"]["arch"] == 80 and "add_kernel.cubin" in e["files"])
    assert r["add"]["ok"] and bytes.fromhex(r["add"]["cubin"]) == sm80.read_bytes()


def test_capture_and_serve_commands_run_an_app_unchanged(captured, tmp_path):
    app = tmp_path / "app.py"
    app.write_text("from jit_app import kernels\nkernels.compile_add()\nprint('app done')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE)] + sys.path), KILN_CLI=captured["cli"])
    out = tmp_path / "cap"
    r = subprocess.run([sys.executable, "-m", "kiln.capture", "-o", str(out), "--pack", str(captured["root"] / "release.key"),
                        "--", sys.executable, str(app)], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "app done" in r.stdout and "1 kernel specialisation(s) for sm_90a" in r.stdout
    report = tmp_path / "boot-{pid}.json"
    r = subprocess.run([sys.executable, "-m", "kiln.serve", str(out) + ".kiln", "--trust", str(captured["trust"]),
                        "--target", "sm_90", "--report", str(report), "--", sys.executable, str(app)],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0 and "app done" in r.stdout, r.stderr
    reports = [json.loads(p.read_text()) for p in tmp_path.glob("boot-*.json")]
    assert len(reports) == 1 and reports[0]["served"] == 1 and reports[0]["triton_compilations"] == 0
    # A bad archive stops the app before it starts, with the reason.
    r = subprocess.run([sys.executable, "-m", "kiln.serve", str(out) + ".kiln", "--trust",
                        str(captured["root"] / "stranger.pub"), "--", sys.executable, str(app)],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 1 and "app done" not in r.stdout and "signature" in r.stderr
    assert "the app was not started" in r.stderr and "Traceback" not in r.stderr, r.stderr
    # One trusted signature where two are required: refused the same way, before the app starts.
    r = subprocess.run([sys.executable, "-m", "kiln.serve", str(out) + ".kiln", "--trust", str(captured["trust"]),
                        "--threshold", "2", "--", sys.executable, str(app)],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 1 and "app done" not in r.stdout and "the app was not started" in r.stderr, r.stderr
    assert "1 distinct trusted signer(s), 2 required" in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-m", "kiln.serve", str(out) + ".kiln", "--trust", str(captured["trust"]),
                        "--threshold", "0", "--", sys.executable, str(app)],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 2 and "--threshold is '0': give the number of distinct trusted signers required, 1 to 64" \
        in r.stderr, r.stderr


_WORKERS_APP = """
import multiprocessing


def work(i, barrier):
    from jit_app import kernels
    barrier.wait()
    kernels.compile_add()  # the same specialisation in both workers at once
    (kernels.compile_scale if i == 0 else kernels.compile_neg)()


if __name__ == "__main__":
    spawn = multiprocessing.get_context("spawn")
    barrier = spawn.Barrier(2)
    workers = [spawn.Process(target=work, args=(i, barrier)) for i in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    print("exit codes", [w.exitcode for w in workers])
"""


def _assert_each_worker_served(folder):
    """The boot reports in `folder` (boot-<pid>.json): each of the two workers had its two kernels
    served, and no process compiled or was refused anything."""
    reports = [json.loads(p.read_text()) for p in folder.glob("boot-*.json")]
    workers = [rep for rep in reports if rep["served"]]
    assert len(workers) == 2 and {rep["served"] for rep in workers} == {2}, reports
    assert all(rep["refused"] == 0 and rep["compiled"] == 0 and rep["triton_compilations"] == 0 for rep in reports)


def test_kernels_compiled_in_worker_processes_are_captured_and_served_in_each(captured, tmp_path):
    """An app whose kernels are compiled in spawned worker processes, as a serving engine's workers
    compile theirs, two of them the same kernel at the same moment: the capture holds what every
    process compiled, and a served boot answers each worker's lookups from the archive."""
    app = tmp_path / "app.py"
    app.write_text(_WORKERS_APP)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE)] + sys.path), KILN_CLI=captured["cli"])
    out = tmp_path / "cap"
    r = subprocess.run([sys.executable, "-m", "kiln.capture", "-o", str(out), "--pack", str(captured["root"] / "release.key"),
                        "--", sys.executable, str(app)], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0 and "exit codes [0, 0]" in r.stdout, r.stdout + r.stderr
    assert "3 kernel specialisation(s) for sm_90a" in r.stdout, r.stdout
    report = tmp_path / "boot-{pid}.json"
    r = subprocess.run([sys.executable, "-m", "kiln.serve", str(out) + ".kiln", "--trust", str(captured["trust"]),
                        "--target", "sm_90", "--report", str(report), "--", sys.executable, str(app)],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0 and "exit codes [0, 0]" in r.stdout, r.stdout + r.stderr
    _assert_each_worker_served(tmp_path)


def test_worker_processes_of_an_app_that_captures_and_serves_in_code_are_captured_and_served(captured, tmp_path):
    """The same app, with capture and serve started in its own code (kiln.capture.capture,
    kiln.serve.enable) instead of by the commands: its spawned workers capture and serve too."""
    body = _WORKERS_APP.split('if __name__ == "__main__":\n')
    main = body[1]  # the app's main block, indented under its `if`
    cap, report = tmp_path / "cap", tmp_path / "boot-{pid}.json"
    capturing = body[0] + f"if __name__ == '__main__':\n    import kiln.capture\n" \
        f"    with kiln.capture.capture({str(cap)!r}) as c:\n{textwrap.indent(main, '    ')}" \
        "    print('kernels', c.summary['kernels'])\n"
    serving = body[0] + f"if __name__ == '__main__':\n    import kiln.serve\n" \
        f"    kiln.serve.enable({str(cap) + '.kiln'!r}, trust={str(captured['trust'])!r}, target='sm_90', " \
        f"report={str(report)!r})\n{main}"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE)] + sys.path))
    for name, text in (("capturing.py", capturing), ("serving.py", serving)):
        (tmp_path / name).write_text(text)
    r = subprocess.run([sys.executable, str(tmp_path / "capturing.py")], capture_output=True, text=True, env=env,
                       timeout=600)
    assert r.returncode == 0 and "exit codes [0, 0]" in r.stdout and "kernels 3" in r.stdout, r.stdout + r.stderr
    index = json.loads((cap / "capture.json").read_text())  # recorded by kiln in the workers, key components too
    assert all(e["components"] for e in index["triton"].values() if e["kind"] == "kernel"), index["triton"]
    _repack(captured, cap, tmp_path / "cap.kiln")
    r = subprocess.run([sys.executable, str(tmp_path / "serving.py")], capture_output=True, text=True, env=env,
                       timeout=600)
    assert r.returncode == 0 and "exit codes [0, 0]" in r.stdout, r.stdout + r.stderr
    _assert_each_worker_served(tmp_path)


_FORKING_APP = """
import multiprocessing, os, sys
from jit_app import kernels
from kiln.jit import hooks


def work(i):
    (kernels.compile_add if i == 0 else kernels.compile_scale)()


if __name__ == "__main__":
    kernels.compile_add()
    workers = [multiprocessing.get_context("fork").Process(target=work, args=(i,)) for i in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    pid = os.fork()
    if pid == 0:  # a plain fork that exits normally (atexit runs in it)
        sys.exit(0)
    os.waitpid(pid, 0)
    print("served folder kept", os.path.isdir(hooks.session().served.dir))
    kernels.compile_scale()
    print("exit codes", [w.exitcode for w in workers])
"""


def test_each_forked_worker_writes_its_own_boot_report(captured, tmp_path):
    """Workers forked by multiprocessing end with os._exit, past atexit: each still writes its boot
    report, counting only what it looked up after the fork, and a forked child that exits normally
    leaves its parent's served folder in place."""
    app = tmp_path / "app.py"
    app.write_text(_FORKING_APP)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE)] + sys.path))
    r = subprocess.run([sys.executable, "-m", "kiln.serve", str(captured["archive"]), "--trust", str(captured["trust"]),
                        "--target", "sm_90", "--report", str(tmp_path / "boot-{pid}.json"), "--", sys.executable,
                        str(app)], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0 and "exit codes [0, 0]" in r.stdout, r.stdout + r.stderr
    assert "served folder kept True" in r.stdout, r.stdout
    reports = {rep["pid"]: rep for rep in (json.loads(p.read_text()) for p in tmp_path.glob("boot-*.json"))}
    forked = [rep for rep in reports.values() if any(n.startswith("forked from process") for n in rep["notes"])]
    parents = [rep for rep in reports.values() if rep not in forked]
    assert len(parents) == 1 and parents[0]["served"] == 2, reports  # add before the forks, scale after
    parent = parents[0]["pid"]
    # The two multiprocessing workers (one lookup each) and the plain fork (none).
    assert sorted(rep["served"] for rep in forked) == [0, 1, 1], reports
    assert all(f"forked from process {parent}" in rep["notes"][0] for rep in forked), forked
    assert all(rep["refused"] == 0 and rep["compiled"] == 0 and rep["programs"] == [] for rep in reports.values())


def test_serving_and_capturing_leave_the_order_of_the_apps_imports_alone(captured, tmp_path):
    """Importing multiprocessing registers the main module in sys.modules as __mp_main__, and
    pickle finds an object with no __module__ (torch.contiguous_format, in every tensor's metadata)
    through the first module that has it: where __mp_main__ came before torch's own modules, every
    key Inductor hashed its graphs under changed, and a served boot found none of the captured
    graphs. Neither command imports multiprocessing for the app; a served app that imports it
    still gets its forked workers' reports (the test above)."""
    probe = ("import json, sys\n"
             "print(json.dumps({'mp': sorted(m for m in ('multiprocessing', '__mp_main__') if m in sys.modules)}))\n")
    app = tmp_path / "probe.py"
    app.write_text(probe)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE)] + sys.path))
    plain = subprocess.run([sys.executable, str(app)], capture_output=True, text=True, env=env, timeout=600)
    served = subprocess.run([sys.executable, "-m", "kiln.serve", str(captured["archive"]), "--trust",
                             str(captured["trust"]), "--target", "sm_90", "--", sys.executable, str(app)],
                            capture_output=True, text=True, env=env, timeout=600)
    capturing = subprocess.run([sys.executable, "-m", "kiln.capture", "-o", str(tmp_path / "cap"), "--",
                                sys.executable, str(app)], capture_output=True, text=True, env=env, timeout=600)
    seen = [json.loads(r.stdout.strip().splitlines()[0])["mp"] if r.stdout.strip() else r.stderr
            for r in (plain, served, capturing)]
    assert seen[1:] == [seen[0], seen[0]], seen


def test_a_fork_while_other_threads_hold_kilns_locks_leaves_the_child_free_to_look_up(captured):
    """A thread of the app holds kiln's locks when another forks (as while kiln hashes TileLang's
    libraries, or while Inductor's threads load kernels through the archive): the fork waits for a
    lookup in progress in libkiln to end, and the child, which has no such thread, takes each lock
    and serves its first lookup instead of waiting forever."""
    r = _python(f"""
        import json, os, threading, time
        import kiln.serve
        from kiln.jit import audit, hooks, tilelang_hooks
        session = kiln.serve.enable({str(captured["archive"])!r}, trust={str(captured["trust"])!r}, target="sm_90")
        served = session.served
        key, entry = next((k, e) for k, e in sorted(served.entries.items()) if e.get("files"))
        filename = sorted(entry["files"])[0]
        python_held, archive_held, done = threading.Event(), threading.Event(), threading.Event()

        def hold_python_locks():  # held across the fork, released only after it
            with hooks._lock, tilelang_hooks._lock, audit._lock, session.report._lock:
                python_held.set()
                done.wait()

        lookup = {{"finished": False}}

        def hold_the_archive():  # as a lookup inside libkiln, which the fork waits for
            with served._lock:
                archive_held.set()
                time.sleep(0.5)
                lookup["finished"] = True

        for target, event in ((hold_python_locks, python_held), (hold_the_archive, archive_held)):
            threading.Thread(target=target, daemon=True).start()
            event.wait()
        pid = os.fork()
        if pid == 0:
            if not lookup["finished"]:
                os._exit(4)  # forked in the middle of a call into libkiln
            hooks.deactivate(object())
            audit.install()
            with tilelang_hooks._lock:
                pass
            session.report.record("served", "kernel", "probe", "probe-key")
            path = served.materialise(key, filename)
            os._exit(0 if os.path.getsize(path) > 0 else 3)
        done.set()
        deadline, status = time.monotonic() + 20, None
        while time.monotonic() < deadline:
            got, raw = os.waitpid(pid, os.WNOHANG)
            if got:
                status = os.waitstatus_to_exitcode(raw)
                break
            time.sleep(0.05)
        if status is None:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        print(json.dumps({{"child": "still waiting after 20 s" if status is None else status}}))
    """)
    assert r["child"] == 0, r


def test_recording_ends_with_the_capture_block_however_it_ends(tmp_path):
    """After `with kiln.capture.capture(...)` the process is the app's again: a kernel compiled later
    is not recorded, Triton's knobs and the variables capture set are back (a process started then
    is not armed; a knob the app set meanwhile keeps the app's value), and a block that raises
    stops recording as well, leaving no package."""
    out, failed, own = tmp_path / "cap", tmp_path / "failed", tmp_path / "apps-own-triton-cache"
    r = _python(f"""
        import json, os, subprocess, sys
        os.environ["TRITON_CACHE_DIR"] = {str(own)!r}
        import triton.knobs as knobs
        import kiln.capture
        from jit_app import kernels
        before = dict(os.environ)
        def state(folder):
            keys = os.path.join(folder, "keys")
            child = subprocess.run([sys.executable, "-c", "import os, json; print(json.dumps(sorted("
                                    "k for k in os.environ if k.startswith(('KILN_', 'TRITON_')))))"],
                                   capture_output=True, text=True, check=True)
            return {{"keys": sorted(os.listdir(keys)) if os.path.isdir(keys) else [],
                    "package": os.path.exists(os.path.join(folder, "kiln.toml")),
                    "env_changed": sorted(k for k in set(os.environ) | set(before) if os.environ.get(k) != before.get(k)),
                    "child_env": json.loads(child.stdout),
                    "expected_child_env": sorted(k for k in before if k.startswith(("KILN_", "TRITON_"))),
                    "manager": getattr(knobs.cache.manager_class, "__name__", None),
                    "listener": getattr(knobs.compilation.listener, "__name__", None)}}
        def apps_listener(**kwargs):
            pass
        with kiln.capture.capture({str(out)!r}, package="t"):
            kernels.compile_add()
            inside = {{"manager": knobs.cache.manager_class.__name__, "cache_dir": os.environ["TRITON_CACHE_DIR"]}}
        after_block = state({str(out)!r})
        kernels.compile_scale()
        later = state({str(out)!r})
        try:
            with kiln.capture.capture({str(failed)!r}):
                kernels.compile_neg()
                knobs.compilation.listener = apps_listener  # the app's own, set while kiln records
                raise RuntimeError("the app failed")
        except RuntimeError:
            pass
        after_failure = state({str(failed)!r})
        kernels.compile_add(block=256)
        print(json.dumps({{"inside": inside, "after_block": after_block, "later": later,
                          "after_failure": after_failure, "after_failure_later": state({str(failed)!r}),
                          "own_cache": sorted(os.listdir({str(own)!r}))}}))
    """)
    assert r["inside"]["manager"] == "CaptureCacheManager" and r["inside"]["cache_dir"] != str(own), r["inside"]
    assert r["after_block"]["package"] and r["after_block"]["keys"], r["after_block"]
    # Nothing compiled after the block reached the capture: the same keys as when it ended.
    assert r["later"]["keys"] == r["after_block"]["keys"]
    for name in ("after_block", "later", "after_failure", "after_failure_later"):
        state = r[name]
        assert state["env_changed"] == [], (name, state["env_changed"])
        assert state["child_env"] == state["expected_child_env"], (name, state["child_env"])  # the app's own only
        assert state["manager"] is None, (name, state)
        # Triton's listener: none before the second block; the app's own, set inside it, kept.
        assert state["listener"] == ("apps_listener" if "failure" in name else None), (name, state)
    # The app's own cache folder got what was compiled outside the blocks.
    assert r["own_cache"], r
    # The failed block recorded until it raised, wrote no package, and recorded nothing afterwards.
    assert r["after_failure"]["keys"] and not r["after_failure"]["package"], r["after_failure"]
    assert r["after_failure_later"]["keys"] == r["after_failure"]["keys"]


def test_a_capture_notes_the_triton_knobs_the_app_replaced(tmp_path):
    """kiln compiles each kernel again for the other targets when Triton's listener reports it, and
    records through Triton's cache manager: an app that replaces either stops that, and the
    capture's summary says so."""
    r = _python(f"""
        import json, triton, kiln.capture
        from triton.runtime.cache import FileCacheManager
        from jit_app import kernels
        with kiln.capture.capture({str(tmp_path / "cap")!r}, targets=["sm_80"]) as c:
            kernels.compile_add()
            triton.knobs.compilation.listener = lambda **kwargs: None  # the app's own
            triton.knobs.cache.manager_class = FileCacheManager
            kernels.compile_scale()
        print(json.dumps(c.summary))
    """)
    notes = r["notes"]
    assert any(n.startswith("the app replaced Triton's compilation listener") and "other targets" in n
               for n in notes), notes
    assert any(n.startswith("the app replaced Triton's cache manager") for n in notes), notes
    # add for sm_90a and, by --target, sm_80; scale for sm_90a only, written by Triton's own manager
    # into the capture's folder (TRITON_CACHE_DIR), so still recorded, but not compiled for sm_80.
    assert r["kernels"] == 3, r


def test_a_hostile_signed_capture_cannot_write_outside_its_folder(captured, tmp_path):
    """A signer is not trusted with paths: a group file naming '../' files, or files its entry lacks,
    is refused by name, and nothing is written outside the serving process's private folder."""
    import shutil
    evil = tmp_path / "evil"
    shutil.copytree(captured["dir"], evil)
    index = json.loads((evil / "capture.json").read_text())
    key, entry = next((k, e) for k, e in index["triton"].items()
                      if e["kind"] == "kernel" and e["components"]["arch"] == 90
                      and e["components"]["source"]["name"] == "add_kernel")
    group = evil / entry["files"][f"__grp__{entry['group']}"]
    # The group's children as Triton's files, plus one that climbs out; the entry maps it to a member.
    children = json.loads(group.read_text())["child_paths"]
    children["../../kiln-escape.txt"] = "../../kiln-escape.txt"
    entry["files"]["../../kiln-escape.txt"] = entry["files"]["add_kernel.json"]
    group.write_text(json.dumps({"child_paths": children}))
    (evil / "capture.json").write_text(json.dumps(index))
    archive = _repack(captured, evil, tmp_path / "evil.kiln")
    r = _python(f"""
        import json, kiln.serve
        try:
            kiln.serve.enable({str(archive)!r}, trust={str(captured['trust'])!r}, target="sm_90")
            from jit_app import kernels
            kernels.compile_add()
            print(json.dumps({{"refused": False}}))
        except ValueError as e:
            print(json.dumps({{"refused": True, "error": str(e)}}))
    """)
    assert r["refused"] and "is not a plain file name" in r["error"] and "kiln-escape" in r["error"], r
    assert not pathlib.Path("/tmp/kiln-escape.txt").exists()  # where the name would land from the private folder
    # A group naming a file its entry does not hold.
    del entry["files"]["../../kiln-escape.txt"]
    children.pop("../../kiln-escape.txt")
    children["add_kernel.extra"] = "add_kernel.extra"
    group.write_text(json.dumps({"child_paths": children}))
    (evil / "capture.json").write_text(json.dumps(index))
    _repack(captured, evil, archive)
    r = _serve(captured, 'attempt("add", kernels.compile_add)', archive=archive)
    assert r["add"]["ok"] is False and "names ['add_kernel.extra'], which its entry" in r["add"]["message"], r["add"]


def test_a_capture_index_of_the_wrong_shape_is_refused_by_name(captured, tmp_path):
    import shutil
    bad = tmp_path / "bad"
    shutil.copytree(captured["dir"], bad)
    index = json.loads((bad / "capture.json").read_text())
    key = next(k for k, e in index["triton"].items() if e["kind"] == "kernel")
    index["triton"][key]["files"] = ["add_kernel.cubin"]
    (bad / "capture.json").write_text(json.dumps(index))
    error = enable_error(_repack(captured, bad, tmp_path / "bad.kiln"), captured["trust"])
    assert error is not None and f"capture.json entry {key}: 'files' must map file names" in error, error


def test_a_served_file_name_is_a_plain_name_even_past_the_index_check(tmp_path):
    """The second layer on its own: materialise() refuses a name with a '/', whatever let it through."""
    from kiln.jit.served import ServedArchive

    class Archive:
        digest = "sha256:test"

        def read(self, member):
            return b"bytes"
    served = ServedArchive.__new__(ServedArchive)
    served.archive, served.dir = Archive(), str(tmp_path / "private")
    served._lock, served._materialised = __import__("threading").Lock(), {}
    served.entries = {"KEY": {"files": {"../escape.txt": "m", "ok.json": "m"}}}
    assert open(served.materialise("KEY", "ok.json"), "rb").read() == b"bytes"
    with pytest.raises(ValueError, match="is not a plain file name"):
        served.materialise("KEY", "../escape.txt")
    assert not (tmp_path / "escape.txt").exists()


def test_the_served_cache_named_without_a_session_refuses_instead_of_compiling():
    r = _python("""
        import json
        from jit_app import kernels
        try:
            kernels.compile_add()
            print(json.dumps({"compiled": True}))
        except RuntimeError as e:
            print(json.dumps({"compiled": False, "error": str(e)}))
    """, env={"TRITON_CACHE_MANAGER": "kiln.jit.triton_cache:ServeCacheManager"})
    assert r["compiled"] is False and "no serve session is active in this process" in r["error"], r


def test_a_capture_of_an_app_that_compiled_nothing_says_so(tmp_path):
    app = tmp_path / "idle.py"
    app.write_text("import triton\nprint('idle')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE)] + sys.path))
    r = subprocess.run([sys.executable, "-m", "kiln.capture", "-o", str(tmp_path / "cap"), "--", sys.executable, str(app)],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 3 and "no Triton or TileLang kernel was compiled while the app ran" in r.stderr, r.stderr
    assert not (tmp_path / "cap" / "kiln.toml").exists()


def _gpu_torch():
    """Skips unless torch with a CUDA GPU is here (asked in a fresh process: CUDA is never
    initialised in the test runner)."""
    pytest.importorskip("torch")
    r = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"], capture_output=True,
                       text=True, timeout=300)
    if r.stdout.strip() != "True":
        pytest.skip("needs torch with a CUDA GPU (torch.compile's graphs are compiled for a device)")


_COMPILED = ("import sys, torch\n"
             "f = torch.compile(lambda x: torch.sin(x) * {scale} + 1)\n"
             "print('RESULT', float(f(torch.ones(1000, device='cuda')).sum()))\n")


class _TorchApp:
    """A torch.compile'd function captured with `python -m kiln.capture` in `root`, a signing key,
    and the commands to pack the capture and to serve a script from an archive."""

    def __init__(self, root, script=_COMPILED.format(scale=2)):
        _gpu_torch()
        self.root, self.cli, self.cap = root, kiln_cli(), root / "cap"
        self.env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), TRITON_CACHE_DIR=str(root / "t"),
                        TORCHINDUCTOR_CACHE_DIR=str(root / "i"))
        self.captured = subprocess.run([sys.executable, "-m", "kiln.capture", "-o", str(self.cap), "--",
                                        sys.executable, self._file(script)], capture_output=True, text=True,
                                       env=self.env, timeout=600)
        assert self.captured.returncode == 0, (self.captured.stdout + self.captured.stderr)[-5000:]
        subprocess.run([self.cli, "keygen", "--out", str(root / "k")], check=True, capture_output=True)
        self.index = json.loads((self.cap / "capture.json").read_text())

    def pack(self, name):
        archive = self.root / f"{name}.kiln"
        subprocess.run([self.cli, "pack", str(self.cap / "kiln.toml"), "--key", str(self.root / "k.key"), "-o",
                        str(archive), "-q"], check=True, capture_output=True)
        return archive

    def _file(self, script):
        """The script as a file (Triton reads a @triton.jit function's source from it), the same file
        for the same script, as an app is the same file at every boot."""
        import hashlib
        path = self.root / f"app-{hashlib.sha256(script.encode()).hexdigest()[:12]}.py"
        path.write_text(script)
        return str(path)

    def serve(self, archive, script, options=(), env=None):
        return subprocess.run([sys.executable, "-m", "kiln.serve", str(archive), "--trust", str(self.root / "k.pub"),
                               *options, "--", sys.executable, self._file(script)], capture_output=True, text=True,
                              env=dict(self.env, **(env or {})), timeout=600)


def _results(output):
    return [line for line in output.splitlines() if line.startswith("RESULT ")]


def test_a_torch_compile_miss_says_on_which_gpu_the_graphs_were_captured(tmp_path):
    """Inductor keys its graphs by the GPU's name: served on another GPU model, it compiles them
    again and their kernels are misses whatever --target cross-compiled. The miss says so, naming
    both GPUs, where the archive's pinned capture GPU is not this one; not where it is."""
    app = _TorchApp(tmp_path)
    assert app.index["torch"] and app.index["toolchain"]["capture_gpu"]
    outs = {}
    for tag, gpu in (("same", app.index["toolchain"]["capture_gpu"]), ("other", "NVIDIA A100-SXM4-80GB")):
        app.index["toolchain"]["capture_gpu"] = gpu
        (app.cap / "capture.json").write_text(json.dumps(app.index))
        r = app.serve(app.pack(tag), _COMPILED.format(scale=3))  # a graph the capture never compiled: a miss
        outs[tag] = (r.returncode, r.stdout + r.stderr)
    code, text = outs["other"]
    assert code != 0 and "is not in archive" in text, text[-3000:]
    assert "graphs were captured on NVIDIA A100-SXM4-80GB and this GPU is" in text, text[-3000:]
    code, text = outs["same"]
    assert code != 0 and "is not in archive" in text and "graphs were captured on" not in text, text[-3000:]


def test_an_app_that_moves_triton_cache_dir_still_launches_only_the_archives_cubins(tmp_path):
    """Inductor launches a kernel statically from the cubin file it finds under TRITON_CACHE_DIR, not
    from the bytes Triton was handed. An app that sets TRITON_CACHE_DIR itself, to a folder where a
    file of the same name holds something else, still runs the archive's code: kiln writes the
    verified cubin there before Inductor reads it (without that, the planted bytes are loaded)."""
    app = _TorchApp(tmp_path)
    moved = tmp_path / "apps-own-triton-cache"
    planted = []
    for key, e in app.index["triton"].items():
        for name in (n for n in e["files"] if n.endswith(".cubin")):
            path = moved / key / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"\x7fELF not the archive's cubin")
            planted.append((path, (app.cap / e["files"][name]).read_bytes()))
    assert planted
    r = app.serve(app.pack("app"), f"import os\nos.environ['TRITON_CACHE_DIR'] = {str(moved)!r}\n" +
                  _COMPILED.format(scale=2))
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert _results(r.stdout) == _results(app.captured.stdout) and _results(r.stdout), r.stdout  # the captured run's
    assert any(path.read_bytes() == good for path, good in planted)  # replaced by the archive's bytes


# An app unlike the one the boot benchmark runs: another model family in bfloat16 under
# max-autotune (Inductor benchmarks GEMM templates and compiles the winners) with CUDA graphs,
# three input shapes (the second makes Dynamo recompile with dynamic shapes), and a Triton kernel
# with heuristics under an autotuner that prunes its configs and is keyed by a size that changes.
_MAX_AUTOTUNE_APP = """
import hashlib, sys
programs = []
sys.addaudithook(lambda e, a: programs.append(e) if e in ("subprocess.Popen", "os.exec", "os.posix_spawn",
                                                         "os.system", "os.spawn") else None)
import torch, triton, triton.language as tl
from transformers import Qwen2Config, Qwen2ForCausalLM

compiles = [0]
def listener(*, src, metadata, metadata_group, times, cache_hit):
    compiles[0] += 0 if cache_hit else 1
triton.knobs.compilation.listener = listener

def prune(configs, named_args, **kwargs):
    return [c for c in configs if c.kwargs["BLOCK"] <= max(256, triton.next_power_of_2(named_args["n"]))]

@triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b, w in ((128, 2), (256, 4), (1024, 8))],
                 key=["n"], prune_configs_by={"early_config_prune": prune})
@triton.heuristics({"EVEN": lambda a: a["n"] % a["BLOCK"] == 0})
@triton.jit
def gelu(x_ptr, y_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        x = tl.load(x_ptr + offs).to(tl.float32)
    else:
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    y = (0.5 * x * (1 + tl.erf(x * 0.7071067811865476))).to(y_ptr.dtype.element_ty)
    if EVEN:
        tl.store(y_ptr + offs, y)
    else:
        tl.store(y_ptr + offs, y, mask=offs < n)

torch.manual_seed(0)
config = Qwen2Config(vocab_size=1024, hidden_size=128, intermediate_size=352, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
model = Qwen2ForCausalLM(config).to("cuda", torch.bfloat16).eval()
compiled = torch.compile(model, mode="max-autotune")
digest = hashlib.sha256()
with torch.no_grad():
    for batch, seq in ((1, 16), (2, 40), (3, 24)):
        ids = torch.randint(0, config.vocab_size, (batch, seq), device="cuda")
        logits = compiled(input_ids=ids).logits.clone()
        y = torch.empty_like(logits)
        gelu[lambda m: (triton.cdiv(logits.numel(), m["BLOCK"]),)](logits, y, logits.numel())
        digest.update(logits.float().cpu().numpy().tobytes() + y.float().cpu().numpy().tobytes())
print("RESULT", digest.hexdigest())
print("COUNTS", compiles[0], len(programs))
"""


def test_a_max_autotune_app_of_another_model_boots_served_with_no_compiler_and_nothing_compiled(tmp_path):
    """Captured once, served in a fresh process with no compiler reachable (PATH names no folder):
    the same outputs, bit for bit, no Triton compilation, no program started, every lookup served."""
    app = _TorchApp(tmp_path, _MAX_AUTOTUNE_APP)
    captured = [line for line in app.captured.stdout.splitlines() if line.startswith(("RESULT ", "COUNTS "))]
    assert len(captured) == 2 and captured[1] != "COUNTS 0 0", app.captured.stdout[-3000:]  # the capture compiled
    report = tmp_path / "report-{pid}.json"
    r = app.serve(app.pack("app"), _MAX_AUTOTUNE_APP, options=("--report", str(report)),
                  env={"PATH": str(tmp_path / "no-such-folder"), "TRITON_CACHE_DIR": str(tmp_path / "t2"),
                       "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "i2")})
    assert r.returncode == 0, (r.stdout + r.stderr)[-5000:]
    assert _results(r.stdout) == [captured[0]], (r.stdout + r.stderr)[-3000:]
    assert "COUNTS 0 0" in r.stdout.splitlines(), r.stdout[-3000:]
    reports = [json.loads(p.read_text()) for p in tmp_path.glob("report-*.json")]
    assert reports and sum(rep["served"] for rep in reports) > 0, reports
    assert all(rep["compiled"] == 0 and rep["refused"] == 0 for rep in reports), reports
    # Inductor's kernels name the capture's Inductor cache folder (removed after the capture), and
    # tuning results are read and written beside them: a served boot uses its own folder instead.
    assert not (app.cap / ".work").exists()


def test_a_statically_launched_kernel_is_tuned_from_the_served_inductor_folder():
    """The path a pickled autotuner names in the capture's Inductor folder is moved, shard and file
    name kept, into the served one, where the captured tuning results were loaded."""
    from kiln.jit.inductor_serve import relocate

    class Kernel:
        filename = "/build/cap/.work/inductor/c4/c4xuq3mwt.py"
    kernel = Kernel()
    relocate(kernel, "/tmp/kiln-serve-inductor-x")
    assert kernel.filename == "/tmp/kiln-serve-inductor-x/c4/c4xuq3mwt.py"

    # The file the kernel's autotune cache saves a result to goes with it (its cache object kept).
    class AutotuneCache:
        local_cache = ("the local cache", "/build/cap/.work/inductor/c4/" + "6e" * 32 + ".best_config")
    tuned = Kernel()
    tuned.autotune_cache = AutotuneCache()
    relocate(tuned, "/tmp/kiln-serve-inductor-x")
    assert tuned.filename == "/tmp/kiln-serve-inductor-x/c4/c4xuq3mwt.py"
    assert tuned.autotune_cache.local_cache == ("the local cache",
                                                "/tmp/kiln-serve-inductor-x/c4/" + "6e" * 32 + ".best_config")
    # Without a local cache (autotune_local_cache off), or without an autotune cache: nothing else.
    for cache in (None, type("NoLocal", (), {"local_cache": None})()):
        plain = Kernel()
        plain.autotune_cache = cache
        relocate(plain, "/tmp/kiln-serve-inductor-x")
        assert plain.filename == "/tmp/kiln-serve-inductor-x/c4/c4xuq3mwt.py"
        assert getattr(plain.autotune_cache, "local_cache", None) is None


_CPU_COMPILED = """
import os, sys
if len(sys.argv) > 2:  # the app keeps torch.compile's caches in a folder of its own, set in code
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = sys.argv[2]
from jit_app import kernels
kernels.compile_add()
import torch
f = torch.compile(lambda x: torch.sin(x) * float(sys.argv[1]) + 1)
print("RESULT", float(f(torch.ones(1000)).sum()))
from torch._dynamo.utils import counters
print("FXGRAPH", "hit", counters["inductor"]["fxgraph_cache_hit"], "miss", counters["inductor"]["fxgraph_cache_miss"])
"""


def test_an_app_that_moves_torchinductor_cache_dir_is_captured_and_served_from_its_own_graphs(captured, tmp_path):
    """Inductor reads its graphs (pickles) from TORCHINDUCTOR_CACHE_DIR, which apps set in code to
    keep their caches. Here that folder holds, under the key of the app's graph, the compiled graph
    of another computation (a plain run of the app loads it and prints the other result). Captured,
    the app compiles its own graph anyway (nothing of that folder is sealed); served, it computes
    what its capture did, from the captured graph (Inductor finds it under the key the capture
    computed); both say the folder was not used. Runs on the CPU wherever torch and its C++
    compiler are."""
    pytest.importorskip("torch")
    app = tmp_path / "app.py"
    app.write_text(_CPU_COMPILED)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE)] + sys.path), KILN_CLI=captured["cli"],
               CUDA_VISIBLE_DEVICES="")

    def run(*args, cache=None, prefix=(), lines="RESULT "):
        r = subprocess.run([*prefix, sys.executable, str(app), *args], capture_output=True, text=True, timeout=600,
                           env=dict(env, **({"TORCHINDUCTOR_CACHE_DIR": str(cache)} if cache else {})))
        assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
        return [line for line in r.stdout.splitlines() if line.startswith(lines)]

    own, other = tmp_path / "apps-own-inductor-cache", tmp_path / "other"
    try:
        expected, unexpected = run("2", cache=own), run("3", cache=other)
    except AssertionError as e:
        if "CppCompileError" in str(e) or "InvalidCxxCompiler" in str(e):
            pytest.skip("torch.compile on the CPU needs a C++ compiler")
        raise
    graphs = [sorted((folder / "fxgraph").glob("*/*/*")) for folder in (own, other)]
    assert [len(g) for g in graphs] == [1, 1], graphs
    graphs[0][0].write_bytes(graphs[1][0].read_bytes())        # the other graph under this one's key
    assert run("2", cache=own) == unexpected != expected     # loaded unchecked by a plain run

    cap = tmp_path / "cap"
    r = subprocess.run([sys.executable, "-m", "kiln.capture", "-o", str(cap), "--pack", str(captured["root"] / "release.key"),
                        "--", sys.executable, str(app), "2", str(own)], capture_output=True, text=True, timeout=600,
                       env=env)
    assert r.returncode == 0 and "1 torch.compile artifact file(s)" in r.stdout, r.stdout + r.stderr
    assert _results(r.stdout) == expected, r.stdout  # compiled afresh, not loaded from the app's folder
    assert f"note: the app set TORCHINDUCTOR_CACHE_DIR to {own}" in r.stderr, r.stderr
    report = tmp_path / "boot.json"
    served = run("2", str(own), prefix=(sys.executable, "-m", "kiln.serve", str(cap) + ".kiln", "--trust",
                                        str(captured["trust"]), "--target", "sm_90", "--report", str(report), "--"),
                 lines=("RESULT ", "FXGRAPH "))
    assert served == expected + ["FXGRAPH hit 1 miss 0"], served
    served_report = json.loads(report.read_text())
    assert (served_report["torch_graphs_loaded"], served_report["torch_graphs_generated"]) == (1, 0), served_report
    notes = served_report["notes"]
    assert any(f"the app set TORCHINDUCTOR_CACHE_DIR to {own}" in n for n in notes), notes
