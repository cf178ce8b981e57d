#!/usr/bin/env python3
"""The exporters' GPU check, for ci/gpu-export-run.sh: each package exported with kiln.export (the
documented API only) is held against its framework's own launch on the same inputs (the package's
own test vectors), and the kiln.torch_op custom op is run natively and on the reference route,
eagerly and under torch.compile.

    gpu_export_check.py KEY.pub WORK ENTRY...      ENTRY = framework:FILE.py:KERNEL:PACKAGE_DIR

For each entry: the archive WORK/<name>.kiln opened through the Python bindings (route must be
native), each of the package's tests run by kiln and by the framework (Triton: fn[grid](...)
built from the export spec; TileLang: the jit program's own kernel), outputs compared with
torch.equal. Prints one line per check and exits 1 if one fails."""
import importlib.util
import pathlib
import sys
import tomllib

import numpy as np
import torch

import kiln
import kiln.export as kx
from kiln.export.expr import evaluate

trust, work = sys.argv[1], pathlib.Path(sys.argv[2])
failures = []


def report(ok, what):
    print(f"{'PASS' if ok else 'FAIL'}  {what}", flush=True)
    if not ok:
        failures.append(what)


def load(path):
    path = pathlib.Path(path)
    sys.path.insert(0, str(path.resolve().parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def call_of(package, manifest, test):
    """The call (name -> CUDA tensor / number) of one test: inputs from the package's .npy files,
    written tensors NaN-filled (an element a launch leaves unwritten then differs)."""
    k = manifest["kernel"][0]
    shape = next(s for s in k["shape"] if s["name"] == test["shape"])
    values = {**shape.get("values", {}), **test.get("values", {})}
    call = {}
    for p in k["params"]:
        if p["type"] != "ptr":
            call[p["name"]] = values[p["name"]]
        elif p["name"] in test.get("inputs", {}):
            call[p["name"]] = torch.from_numpy(np.load(package / test["inputs"][p["name"]])).cuda()
        else:
            expected = np.load(package / test["outputs"][p["name"]])
            call[p["name"]] = torch.full(expected.shape, float("nan"), dtype=torch.from_numpy(expected).dtype,
                                         device="cuda")
    return call


def triton_launch(fn, spec, call):
    """fn[grid](...) as a Triton user writes it, from the export spec (args, grid, constexprs, options)."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    ints = {k: v for k, v in call.items() if isinstance(v, int)}
    args = []
    for kp in fn.params:
        if kp.is_constexpr:
            continue
        a = spec.get("args", {}).get(kp.name)
        if a is None:
            a = kp.name if kp.name in call else kp.name[:-4]
        if isinstance(a, kx.Desc):
            args.append(TensorDescriptor.from_tensor(call[a.tensor], a.block))
        elif isinstance(a, str) and a in call:
            args.append(call[a])
        else:
            args.append(evaluate(a, ints))
    grid = tuple(evaluate(g, ints) for g in spec["grid"])
    fn[grid](*args, **spec.get("constexprs", {}), **spec.get("options", {}))


def check_package(framework, source, kernel_name, package):
    module = load(source)
    spec = getattr(module, f"kiln_{kernel_name}")
    manifest = tomllib.loads((package / "kiln.toml").read_text())
    k = manifest["kernel"][0]
    rt = kiln.Runtime(trust)
    archive = rt.open(str(package) + ".kiln")
    kernel = archive.kernel(k["name"], 0)
    report(kernel.route == "native", f"{package.name}: route {kernel.route} ({kernel.reason_text})")
    jit = getattr(module, kernel_name)
    tl_kernel = jit(*spec["args"]) if framework == "tilelang" else None
    for i, test in enumerate(k.get("test", [])):
        ours, theirs = call_of(package, manifest, test), None
        theirs = {n: (v.clone() if torch.is_tensor(v) else v) for n, v in ours.items()}
        route = kernel(*[ours[p["name"]] for p in k["params"]])
        if framework == "triton":
            triton_launch(jit, spec, theirs)
        else:
            tl_kernel(*[theirs[p["name"]] for p in k["params"] if p["type"] == "ptr"])
        torch.cuda.synchronize()
        written = [p["name"] for p in k["params"] if p["type"] == "ptr" and p["name"] in test["outputs"]]
        same = all(torch.equal(ours[n], theirs[n]) for n in written)
        report(same and route == "native", f"{package.name} test {i} ({test['shape']} {test.get('values', {})}): "
                                           f"kiln ({route}) and {framework}'s own launch bit-identical: {same}")


def check_torch_op(native_package, reference_package):
    """softmax as a torch op: the sm_90a archive (native here) and the sm_80-only one (which has
    no code for this GPU: the reference route), eager and under torch.compile."""
    def torch_reference(y, x, m, n):
        y.copy_(torch.softmax(x.double(), dim=1).to(y.dtype))

    ops = {}
    for label, package in (("native", native_package), ("reference", reference_package)):
        archive = kiln.Runtime(trust).open(str(package) + ".kiln")
        ops[label] = kiln.torch_op.custom_op(f"kiln_gpu::softmax_{label}", archive, "softmax", torch_reference)

    class Model(torch.nn.Module):
        def __init__(self, op):
            super().__init__()
            self.op = op

        def forward(self, x):
            h = torch.tanh(x) * 3
            y = torch.empty_like(h)
            self.op(y, h, h.shape[0], h.shape[1])
            return y @ x.T

    torch.manual_seed(0)
    x = torch.randn(512, 1000, device="cuda")
    results = {}
    for label, op in ops.items():
        for compiled in (False, True):
            model = Model(op)
            run = torch.compile(model, fullgraph=True) if compiled else model
            results[(label, compiled)] = run(x)
    torch.cuda.synchronize()
    report(ops["native"].routes["native"] >= 2 and ops["native"].routes["reference"] == 0,
           f"torch op on the sm_90a archive: routes {dict(ops['native'].routes)}")
    report(ops["reference"].routes["reference"] >= 2 and ops["reference"].routes["native"] == 0,
           f"torch op on the sm_80-only archive: routes {dict(ops['reference'].routes)}")
    base = results[("native", False)]
    for key, value in results.items():
        diff = (value - base).abs().max().item()
        report(torch.allclose(value, base, rtol=1e-4, atol=1e-4),
               f"torch op {key[0]} {'torch.compile' if key[1] else 'eager'}: max |diff| vs native eager {diff:.3g}")


for entry in sys.argv[3:]:
    framework, source, kernel_name, package = entry.split(":")
    try:
        check_package(framework, source, kernel_name, pathlib.Path(package))
    except Exception as e:
        report(False, f"{package}: {type(e).__name__}: {e}")
try:
    import kiln.torch_op  # noqa: F401
    check_torch_op(work / "softmax", work / "softmax-sm80")
except Exception as e:
    report(False, f"torch op: {type(e).__name__}: {e}")
print(f"{len(failures)} failed" if failures else "every check passed")
sys.exit(1 if failures else 0)
