#!/usr/bin/env python3
"""Exports the Triton TMA matmul (matmul_tma_triton.py: host TensorDescriptors, fp16) as a kiln
package folder: kiln.toml, the cubin, the PTX, Triton's IR stages, the source and Triton's
metadata, with the kernel's real ABI (CUtensorMaps, their shape and stride scalars, the scratch
pointers) in `kernel_args` and the call (a, b_t, c, m, n, k) in `params`.

    export_triton_tma.py OUT_DIR [--arch sm_90] [--no-tests]

Without --arch it compiles for the GPU in front of it, as Triton's own launch would; with
--arch it needs no GPU (Triton and ptxas run on the CPU), for the same code when the Triton
version is the same. Test vectors (.npy, made with NumPy or else PyTorch) are written for two small calls."""
import argparse
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import kiln_triton as kt  # noqa: E402
import matmul_tma_triton as source  # noqa: E402

BM, BN, BK = source.BLOCKS["BLOCK_M"], source.BLOCKS["BLOCK_N"], source.BLOCKS["BLOCK_K"]

# The call a kiln user makes: C = A x B with B given transposed (N x K), all row-major.
PARAMS = [
    kt.tensor("a", "f16", ["m", "k"], access="read"),
    kt.tensor("b_t", "f16", ["n", "k"], access="read"),
    kt.tensor("c", "f16", ["m", "n"], access="write"),
    kt.scalar("m", "i32"), kt.scalar("n", "i32"), kt.scalar("k", "i32"),
]
# What each of the kernel's (non-constexpr) parameters is, in terms of the call: the
# descriptors TensorDescriptor.from_tensor makes (source.descriptors), and the sizes.
ARGS = {"a_desc": kt.desc("a", [BM, BK]), "b_desc": kt.desc("b_t", [BN, BK]), "c_desc": kt.desc("c", [BM, BN]),
        "M": "m", "N": "n", "K": "k"}
GRID = [f"cdiv(m, {BM}) * cdiv(n, {BN})"]  # source.grid
# Triton specialises N and K on divisibility by 16 (M is do_not_specialize): the sample call's
# values decide the compiled specialisation, which then becomes a `where` of every range shape.
SAMPLE = {"m": 8192, "n": 8192, "k": 8192}
SHAPES = [
    kt.Shape("m8192n8192k8192", values={"m": 8192, "n": 8192, "k": 8192}),
    kt.Shape("m256n256k256", values={"m": 256, "n": 256, "k": 256}),
    kt.Shape("any_m", ranges={"m": [1, 8192]}, values={"n": 8192, "k": 8192}),
    kt.Shape("general", ranges={"m": [1, 65536], "n": [16, 65536], "k": [16, 65536]}),
]
TOLERANCE = {"rtol": 1e-2, "atol": 1e-2}  # fp16 out: one ulp of |c| <= 64 is 0.03


def write_npy(path, descr, shape, raw):
    """A NumPy .npy file (format 1.0, C order) from raw little-endian bytes."""
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, "".join(f"{d}, " for d in shape))
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + raw)


def test_vectors(out, name, m, n, k, seed):
    """Inputs in [-1, 1] and the float64 product rounded to fp16 (NumPy, else PyTorch on the
    CPU); returns the inputs and outputs tables of the test."""
    try:
        import numpy as np
        rng = np.random.default_rng(seed)
        a = (rng.random((m, k)) * 2 - 1).astype(np.float16)
        b_t = (rng.random((n, k)) * 2 - 1).astype(np.float16)
        c = (a.astype(np.float64) @ b_t.astype(np.float64).T).astype(np.float16)
        raw = {key: np.ascontiguousarray(x).astype("<f2").tobytes() for key, x in (("a", a), ("b_t", b_t), ("c", c))}
    except ImportError:
        import torch
        g = torch.Generator().manual_seed(seed)
        a = (torch.rand(m, k, generator=g, dtype=torch.float64) * 2 - 1).half()
        b_t = (torch.rand(n, k, generator=g, dtype=torch.float64) * 2 - 1).half()
        c = (a.double() @ b_t.double().T).half()
        raw = {key: bytes(x.contiguous().view(torch.uint8).flatten().tolist())
               for key, x in (("a", a), ("b_t", b_t), ("c", c))}
    files = {"a": f"{name}.a.npy", "b_t": f"{name}.b_t.npy", "c": f"{name}.c.expected.npy"}
    shapes = {"a": (m, k), "b_t": (n, k), "c": (m, n)}
    for key in files:
        write_npy(out / files[key], "<f2", shapes[key], raw[key])
    return {"a": files["a"], "b_t": files["b_t"]}, {"c": files["c"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--arch", help="compile for this target without a GPU, e.g. sm_90 (default: the GPU here)")
    ap.add_argument("--no-tests", action="store_true", help="no test vectors")
    ap.add_argument("--sequence", type=int, default=1)
    args = ap.parse_args()
    target = None
    if args.arch:
        target = (int(args.arch.removeprefix("sm_").rstrip("af")), 32)
    args.out.mkdir(parents=True, exist_ok=True)
    tests = []
    if not args.no_tests:
        try:
            inputs, outputs = test_vectors(args.out, "m256n256k256", 256, 256, 256, seed=1)
            tests.append(kt.Test("m256n256k256", inputs, outputs))
            inputs, outputs = test_vectors(args.out, "general_m100n272k80", 100, 272, 80, seed=2)
            tests.append(kt.Test("general", inputs, outputs, values={"m": 100, "n": 272, "k": 80}))
        except Exception as e:  # neither NumPy nor PyTorch: the package is still worth having
            print(f"export: WARNING: no test vectors ({type(e).__name__}: {e})", file=sys.stderr)
            tests = []
    try:
        compiled, _ = kt.export(
            args.out, package="matmul-tma-triton", kernel_name="matmul_tma", fn=source.matmul_tma_kernel,
            params=PARAMS, args=ARGS, constexprs=source.BLOCKS, options=source.OPTIONS, sample=SAMPLE, grid=GRID,
            shapes=SHAPES, tests=tests, tolerance=TOLERANCE, target=target, sequence=args.sequence,
            description="C = A x B, B given as B^T (N x K): fp16, fp32 accumulation, host TensorDescriptors (TMA)",
            sources=[source.__file__])
    except kt.ExportError as e:
        sys.exit(f"export: {e}")
    md = compiled.metadata
    print(f"exported {md.name} (hash {md.hash[:16]}, {md.num_warps} warps, {md.num_stages} stages, "
          f"{md.shared} B shared, {len(getattr(md, 'tensordesc_meta', None) or [])} tensor maps) to {args.out}")


if __name__ == "__main__":
    main()
