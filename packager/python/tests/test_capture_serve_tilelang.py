"""kiln.capture and kiln.serve for TileLang's cache, on a machine without TileLang or a GPU: a
TileLang cache entry laid out as TileLang 0.1.15 writes it (its host library embedding a real sm_90a
cubin, compiled here by Triton), packaged, sealed with the kiln command and served in fresh
processes up to the moment TileLang would read it. TileLang itself compiling, loading and running
what kiln serves is ci/gpu-app-boot.sh's, on the H200."""
import json
import os
import subprocess

import pytest

pytest.importorskip("triton")
from test_capture_serve import _python, enable_error  # noqa: E402
from test_export import kiln_cli  # noqa: E402

from kiln.jit import package, tilelang_keys  # noqa: E402

VERSION = "0.1.15"
BUILD = tilelang_keys.compiler_build(VERSION, "libtilelang.so:" + "ab" * 32)
TARGET = '{"arch":"sm_90a","kind":"cuda"}'
DEVICE_CODE = 'extern "C" __global__ void __launch_bounds__(128, 1) add_kernel(float* __restrict__ x) { }\n'


def _components(name="add_kernel", func="f" * 64, target=TARGET, build=BUILD, out_idx=(-1,)):
    data = tilelang_keys.key_data(func, list(out_idx), (), target, '{"kind":"c"}', "tvm_ffi", {}, None,
                                  {"version": VERSION, "platform": "x86_64"})
    key = tilelang_keys.key_of(data)
    return key, tilelang_keys.components(name, data, key, build, VERSION)


def _entry_files(cubin, library=None):
    return {"executable.so": library if library is not None else b"\x7fELF" + bytes(60) + cubin + b"host code",
            "params.json": b"[]", "manifest.json": b'{"files": {}, "version": 1}',
            "device_kernel.cu": DEVICE_CODE.encode(), "host_kernel.cu": b"// host code\n"}


def _write_capture(root, cubin, entries):
    """A capture folder as kiln.capture leaves it: TileLang's cache under .work/tilelang and the
    components of each key under tilelang-keys/."""
    binary = root / ".work" / "tilelang" / VERSION / "cuda-binaries" / ("c" * 64)
    binary.mkdir(parents=True)
    (binary / "kernel.cubin").write_bytes(cubin)
    for key, components, files in entries:
        folder = root / ".work" / "tilelang" / VERSION / "linux-x86_64" / "kernels" / key
        folder.mkdir(parents=True)
        for name, data in files.items():
            (folder / name).write_bytes(data)
        (root / "tilelang-keys").mkdir(exist_ok=True)
        (root / "tilelang-keys" / f"{key}.json").write_text(json.dumps(components))


def _pack(cli, root, folder, archive):
    subprocess.run([cli, "pack", str(folder / "kiln.toml"), "--key", str(root / "release.key"), "-o", str(archive),
                    "-q"], check=True, capture_output=True)
    return archive


@pytest.fixture(scope="module")
def tl(tmp_path_factory):
    from jit_app import kernels
    root = tmp_path_factory.mktemp("tilelang")
    cubin = kernels.compile_add().asm["cubin"]
    key, components = _components()
    app = root / "app"
    _write_capture(app, cubin, [(key, components, _entry_files(cubin))])
    summary = package.write(str(app), package="tl-app")
    cli = kiln_cli()
    subprocess.run([cli, "keygen", "--out", str(root / "release")], check=True, capture_output=True)
    archive = _pack(cli, root, app, root / "app.kiln")
    return {"root": root, "dir": app, "archive": archive, "trust": root / "release.pub", "cli": cli, "key": key,
            "components": components, "cubin": cubin, "summary": summary}


def test_a_tilelang_entry_becomes_an_ordinary_kernel_with_its_embedded_cubin(tl):
    assert tl["summary"]["tilelang"] == 1 and tl["summary"]["archs"] == ["sm_90a"], tl["summary"]
    toml = (tl["dir"] / "kiln.toml").read_text()
    name = f"add_kernel__{tl['key'][:12]}"
    assert f'name = "{name}"' in toml and 'entry = "add_kernel"' in toml and 'framework = "tilelang"' in toml
    index = json.loads((tl["dir"] / "capture.json").read_text())
    entry = index["tilelang"][tl["key"]]
    assert entry["kernel"] == name and entry["library"] == "executable.so" and entry["arch"] == "sm_90a"
    assert (tl["dir"] / entry["cubin"]).read_bytes() == tl["cubin"]
    import kiln
    opened = kiln.Runtime(trust=str(tl["trust"])).open(str(tl["archive"]))
    routes = {t: {k["kernel"]: k["route"] for k in opened.preflight(target=t)["kernels"]} for t in ("sm_90", "sm_80")}
    assert routes == {"sm_90": {name: "native"}, "sm_80": {name: "reference"}}, routes


def test_an_entry_without_the_cubin_in_its_library_is_left_out_saying_why(tl, tmp_path):
    key, components = _components(func="e" * 64)
    _write_capture(tmp_path, tl["cubin"], [(key, components, _entry_files(tl["cubin"], library=b"\x7fELF other"))])
    with pytest.raises(package.CaptureError, match="no Triton or TileLang kernel"):
        package.write(str(tmp_path))
    found, skipped = package.scan_tilelang(str(tmp_path), set())
    assert found == [] and skipped[0]["key"] == f"tilelang:{key}" and "is embedded in its executable.so" in \
        skipped[0]["why"], skipped


_SERVE = """
    import json, os, kiln.serve
    from kiln.jit.served import KilnServeMiss
    session = kiln.serve.enable({archive!r}, trust={trust!r}, policy={policy!r}, target={target!r})
    root = session.served.tilelang_cache_root()
    result = {{"root": root, "env": os.environ["TILELANG_CACHE_DIR"]}}
    def where(key):
        return os.path.join(root, "0.1.15", "linux-x86_64", "kernels", key)
    def lookup(label, key, components, path=None):
        session.on_tilelang_key(key, components)
        try:
            result[label] = {{"served": session.tilelang_lookup(key, path or where(key))}}
        except KilnServeMiss as e:
            result[label] = {{"served": False, "reason": e.reason, "message": str(e)}}
        except ValueError as e:
            result[label] = {{"served": False, "error": str(e)}}
"""


def _serve(tl, body, policy="refuse", target="sm_90", archive=None):
    import textwrap
    script = textwrap.dedent(_SERVE.format(archive=str(archive or tl["archive"]), trust=str(tl["trust"]),
                                           policy=policy, target=target)) + textwrap.dedent(body) + \
        "\nresult['report'] = kiln.serve.report()\nprint(json.dumps(result))\n"
    return _python(script)


def test_a_served_entry_is_the_captured_bytes_in_a_private_folder_where_tilelang_reads(tl):
    r = _serve(tl, f"""
        lookup("hit", {tl['key']!r}, {tl['components']!r})
        folder = where({tl['key']!r})
        result["files"] = {{f: open(os.path.join(folder, f), "rb").read().hex() for f in sorted(os.listdir(folder))}}
        result["modes"] = [oct(os.stat(root).st_mode & 0o777)] + sorted({{oct(os.stat(os.path.join(folder, f)).st_mode
                                                                          & 0o777) for f in os.listdir(folder)}})
    """)
    assert r["hit"] == {"served": True} and r["env"] == r["root"], r
    expected = {f: data.hex() for f, data in _entry_files(tl["cubin"]).items()}
    assert r["files"] == dict(sorted(expected.items())), "served bytes differ from the captured entry"
    assert r["modes"] == ["0o700", "0o600"], r["modes"]
    assert r["report"]["served"] == 1 and r["report"]["by_kernel"] == {"add_kernel": {"served": 1}}, r["report"]


def test_every_tilelang_miss_is_refused_with_the_component_that_differs(tl):
    other_source = _components(func="0" * 64)
    other_build = dict(tl["components"], compiler_build=tilelang_keys.compiler_build(VERSION, "libtilelang.so:00"))
    other_target = _components(target='{"arch":"sm_100a","kind":"cuda"}')
    other_idx = _components(out_idx=(0,))
    unknown = _components(name="softmax_kernel", func="2" * 64)
    unseen = "9" * 64
    r = _serve(tl, f"""
        lookup("source", {other_source[0]!r}, {other_source[1]!r})
        lookup("build", {tl['key']!r}, {other_build!r})
        lookup("arch", {other_target[0]!r}, {other_target[1]!r})
        lookup("specialisation", {other_idx[0]!r}, {other_idx[1]!r})
        lookup("not-captured", {unknown[0]!r}, {unknown[1]!r})
        lookup("unseen", {unseen!r}, None)
    """)
    for label, reason in (("source", "source"), ("build", "compiler-build"), ("arch", "arch"),
                          ("specialisation", "specialisation"), ("not-captured", "not-captured"),
                          ("unseen", "not-captured")):
        assert r[label]["served"] is False and r[label]["reason"] == reason, (label, r[label])
        assert "TileLang cache key" in r[label]["message"] and "policy 'refuse'" in r[label]["message"]
    assert "a changed compiler is never served" in r["build"]["message"]
    assert "softmax_kernel" in r["not-captured"]["message"]
    assert r["report"]["refused"] == 6 and r["report"]["served"] == 0, r["report"]
    assert not os.path.exists(os.path.join(r["root"], VERSION)), "nothing may be written for a refused key"


def test_under_policy_compile_a_miss_is_left_to_tilelang_and_counted(tl):
    other = _components(func="1" * 64)
    r = _serve(tl, f"""
        lookup("miss", {other[0]!r}, {other[1]!r})
        session.tilelang_not_loaded({other[0]!r}, False)
    """, policy="compile")
    assert r["miss"] == {"served": False}, r
    assert r["report"]["compiled"] == 1 and r["report"]["tilelang_compilations"] == 1, r["report"]
    assert r["report"]["by_reason"] == {"compiled:source": 1}, r["report"]


def test_a_wrong_arch_entry_never_reaches_tilelang(tl):
    r = _serve(tl, f"""lookup("hit", {tl['key']!r}, {tl['components']!r})""", target="sm_80")
    assert r["hit"]["reason"] == "arch" and "libkiln refuses kernel add_kernel__" in r["hit"]["message"], r
    assert not os.path.exists(os.path.join(r["root"], VERSION))


def test_a_cache_folder_other_than_kilns_is_refused(tl, tmp_path):
    elsewhere = str(tmp_path / "user-cache" / VERSION / "linux-x86_64" / "kernels" / tl["key"])
    r = _serve(tl, f"""lookup("moved", {tl['key']!r}, {tl['components']!r}, path={elsewhere!r})""")
    assert "outside kiln's private cache folder" in r["moved"]["error"], r
    assert not os.path.exists(elsewhere)


def test_a_signed_entry_whose_library_lacks_the_checked_cubin_is_refused(tl, tmp_path):
    """A signer's archive whose executable.so is not the code the arch check judged: refused before a
    byte of it is written where TileLang would load it."""
    import shutil
    bad = tmp_path / "bad"
    shutil.copytree(tl["dir"], bad)
    index = json.loads((bad / "capture.json").read_text())
    entry = index["tilelang"][tl["key"]]
    (bad / entry["files"]["executable.so"]).write_bytes(b"\x7fELF" + bytes(200) + b"other device code")
    archive = _pack(tl["cli"], tl["root"], bad, tmp_path / "bad.kiln")
    r = _serve(tl, f"""lookup("hit", {tl['key']!r}, {tl['components']!r})""", archive=archive)
    assert "does not embed the cubin" in r["hit"]["error"] and "refused" in r["hit"]["error"], r
    assert not os.path.exists(os.path.join(r["root"], VERSION, "linux-x86_64", "kernels", tl["key"]))


@pytest.mark.parametrize("change, message", [
    (lambda e, k: e.__setitem__("tilelang", {"../" + k[3:]: e["tilelang"][k]}), "a TileLang key is 64 lower-case hex"),
    (lambda e, k: e["tilelang"][k]["files"].__setitem__("../escape.so", "tilelang/x"), "is not a plain file name"),
    (lambda e, k: e["tilelang"][k].__setitem__("library", "kernel_lib.so"), "its library 'kernel_lib.so' is not among"),
    (lambda e, k: e["tilelang"][k].__setitem__("components", {"kind": "kernel"}), "'components' must be null or a "
                                                                                  "tilelang object"),
])
def test_a_tilelang_index_of_the_wrong_shape_is_refused_by_name(tl, tmp_path, change, message):
    import shutil
    bad = tmp_path / "bad"
    shutil.copytree(tl["dir"], bad)
    index = json.loads((bad / "capture.json").read_text())
    change(index, tl["key"])
    (bad / "capture.json").write_text(json.dumps(index))
    error = enable_error(_pack(tl["cli"], tl["root"], bad, tmp_path / "bad.kiln"), tl["trust"])
    assert error is not None and message in error, error


def test_an_entry_without_a_build_pin_is_refused_not_served_unchecked(tl, tmp_path):
    """TileLang's key leaves its build out; an entry whose capture recorded none cannot be checked."""
    import shutil
    bad = tmp_path / "nopin"
    shutil.copytree(tl["dir"], bad)
    index = json.loads((bad / "capture.json").read_text())
    index["tilelang"][tl["key"]]["components"] = None
    (bad / "capture.json").write_text(json.dumps(index))
    archive = _pack(tl["cli"], tl["root"], bad, tmp_path / "nopin.kiln")
    r = _serve(tl, f"""lookup("hit", {tl['key']!r}, {tl['components']!r})""", archive=archive)
    assert r["hit"]["reason"] == "compiler-build" and "recorded no TileLang build" in r["hit"]["message"], r
    assert not os.path.exists(os.path.join(r["root"], VERSION))
