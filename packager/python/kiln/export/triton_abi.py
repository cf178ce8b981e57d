"""The kernel's real parameter list (`kernel_args`) from what Triton compiled, derived exactly as
Triton's own launcher (triton/backends/nvidia/driver.py) expands it, and checked against the PTX
entry:

  * a host TensorDescriptor lowered to TMA (the compiled kernel's `tensordesc_meta` has an entry
    for it) becomes a CUtensorMap recipe, then its shape as i32 and its strides as i64, encoded
    like Triton's `fill_tma_descriptor` (element type and swizzle from the metadata, box = its
    block_size, dims and byte strides innermost first, L2 promotion 128B, OOB fill NaN for
    padding="nan" else zero);
  * a descriptor not lowered to TMA (e.g. compiled for sm_80) becomes its base pointer, shape and
    strides as i64, the padding flag as i8, then shape as i32 and strides as i64;
  * constexpr parameters vanish; `global_scratch` and `profile_scratch` follow, as kiln scratch
    entries sized from the metadata;
  * num_ctas > 1 launches clusters of num_ctas x 1 x 1 (grid x multiplied by num_ctas).

Also the launch (block, shared memory, cluster) Triton's metadata asks for.
"""
import re

from .declare import DTYPES, INTEGER_TYPES, Scalar, Tensor
from .errors import ExportError
from .expr import names_in, paren

# Triton type names -> kiln dtype of the same bits
TRITON_TO_KILN = {"fp16": "f16", "bf16": "bf16", "fp32": "f32", "fp64": "f64", "i8": "i8", "u8": "u8", "i16": "i16",
                  "u16": "u16", "i32": "i32", "u32": "u32", "i64": "i64", "u64": "u64", "i1": "i8", "u1": "u8",
                  "f32": "f32", "fp8e4nv": "f8e4m3", "fp8e5": "f8e5m2"}
# CUtensorMapDataType (host numbering, after Triton's TMA_DTYPE_DEVICE_TO_HOST) -> kiln's word
TMA_DTYPES = {0: "u8", 1: "u16", 2: "u32", 3: "i32", 4: "u64", 5: "i64", 6: "f16", 7: "f32", 8: "f64", 9: "bf16",
              10: "f32_ftz", 11: "tf32", 12: "tf32_ftz"}
SWIZZLES = {0: "none", 1: "32B", 2: "64B", 3: "128B"}  # the 128B_ATOM_* kinds are refused


def ptx_entry_params(ptx, entry):
    """[(bytes, align, is_pointer)] of `.entry entry(...)` in the PTX (the check that the ABI
    derived from Triton's metadata is the code's)."""
    m = re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\((.*?)\)", ptx, re.S)
    if not m:
        raise ExportError(f"no .entry {entry} in the PTX")
    out = []
    for line in m.group(1).split(","):
        line = line.strip()
        if not line:
            continue
        arr = re.search(r"\.align\s+(\d+)\s+\.b8\s+\w+\[(\d+)\]", line)
        if arr:
            out.append((int(arr.group(2)), int(arr.group(1)), False))
            continue
        t = re.search(r"\.param\s+\.[usbf](\d+)", line)
        if not t:
            raise ExportError(f"PTX parameter not understood: {line!r}")
        out.append((int(t.group(1)) // 8, int(t.group(1)) // 8, ".ptr" in line))
    return out


def _device_to_host_dtype(t):
    return {8: 10, 9: 8, 10: 9}.get(t, t)  # triton/backends/nvidia/driver.py TMA_DTYPE_DEVICE_TO_HOST


def kernel_abi(compiled, fn, params, args, signature, attrs, ones=()):
    """The kernel_args entries (dicts, in order) and the `where` conditions the compiled
    specialisation needs, checked against the PTX entry. `ones`: parameters compiled as the
    constant 1 (a variant's), which the kernel no longer takes."""
    md = compiled.metadata
    by_name = {p.name: p for p in params}
    metas = list(getattr(md, "tensordesc_meta", None) or [])
    n_descs = sum(1 for v in signature.values() if isinstance(v, str) and v.startswith("tensordesc"))
    if metas and len(metas) != n_descs:
        raise ExportError(f"{len(metas)} tensordesc_meta entries for {n_descs} descriptors")
    entries, conditions, expected = [], [], []  # expected: (bytes, what) per PTX parameter
    desc_i = 0

    def computed(name, type_, value):
        # A computed entry must not take a call parameter's name (kernel_args names are unique
        # and a pass-through entry is named by its parameter): such a kernel parameter gets "_arg".
        label = name
        while label in by_name or any(e["name"] == label for e in entries if isinstance(e, dict)):
            label += "_arg"
        entries.append({"name": label, "type": type_, "value": str(value)})
        expected.append((DTYPES[type_][0], label))

    def passed(call_name, bytes_):
        entries.append({"name": call_name})
        expected.append((bytes_, call_name))

    for kp in fn.params:
        ty = signature[kp.name]
        if ty == "constexpr":
            if not kp.is_constexpr and names_in(str(args[kp.name])) and kp.name not in ones:
                raise ExportError(f"Triton specialised {kp.name!r} to a constant for the sample call (it equals 1): "
                                  f"give a sample value other than 1, or declare it do_not_specialize")
            continue  # a constexpr, or an argument given as the constant 1 (a unit stride): folded into the code
        a = args[kp.name]
        if isinstance(ty, str) and ty.startswith("tensordesc"):
            t = by_name[a.tensor]
            meta = metas[desc_i] if metas else None
            desc_i += 1
            rank = len(t.shape)
            m = re.match(r"tensordesc<([^[>]*)\[([^]]*)\]", ty)
            if TRITON_TO_KILN.get(m.group(1)) != t.dtype:
                raise ExportError(f"{kp.name}: Triton typed the descriptor {m.group(1)}, the tensor is {t.dtype}")
            if meta is None:  # not lowered to TMA: base pointer, shape, strides, padding, shape, strides
                passed(t.name, 8)
                for i in range(rank):
                    computed(f"{kp.name}_shape{i}_i64", "i64", t.shape[i])
                for i in range(rank):
                    computed(f"{kp.name}_stride{i}_i64", "i64", t.strides[i])
                computed(f"{kp.name}_padding_nan", "i8", 1 if a.padding == "nan" else 0)
            else:
                if meta.get("fp4_padded"):
                    raise ExportError(f"{kp.name}: fp4-padded descriptors are not supported")
                elem = TMA_DTYPES.get(_device_to_host_dtype(meta["elem_type"]))
                swizzle = SWIZZLES.get(meta["swizzle"])
                if elem is None or swizzle is None:
                    raise ExportError(f"{kp.name}: TMA element type {meta['elem_type']} / swizzle {meta['swizzle']} "
                                      f"has no kiln spelling")
                if meta["elem_size"] != DTYPES[t.dtype][0]:
                    raise ExportError(f"{kp.name}: element size {meta['elem_size']} for a {t.dtype} tensor")
                if t.strides[-1] != "1":
                    raise ExportError(f"{kp.name}: the last dimension of {t.name} must be contiguous")
                block = list(meta["block_size"])
                if len(block) != rank:
                    raise ExportError(f"{kp.name}: block {block} for a rank-{rank} tensor")
                size = meta["elem_size"]
                tmap = {"pointer": t.name, "dtype": elem, "dims": list(reversed(t.shape)),
                        "strides": [f"{paren(s)} * {size}" for s in reversed(t.strides[:-1])],
                        "box": list(reversed(block)), "swizzle": swizzle, "l2_promotion": "128B",
                        "oob_fill": "nan" if a.padding == "nan" else "zero"}
                entries.append({"name": kp.name, "tensor_map": tmap})
                expected.append((128, kp.name))
            for i in range(rank):
                computed(f"{kp.name}_shape{i}", "i32", t.shape[i])
            for i in range(rank):
                computed(f"{kp.name}_stride{i}", "i64", t.strides[i])
        elif isinstance(ty, str) and ty.startswith("*"):
            if not isinstance(by_name.get(a), Tensor):
                raise ExportError(f"kernel parameter {kp.name} is a pointer ({ty}); args must map it to a tensor of "
                                  f"the call, not {a!r}")
            t = by_name[a]
            if TRITON_TO_KILN.get(ty.lstrip("*k")) != t.dtype:
                raise ExportError(f"kernel parameter {kp.name}: Triton typed it {ty}, the tensor {t.name} is {t.dtype}")
            if any(e.get("name") == a and len(e) == 1 for e in entries):
                raise ExportError(f"kernel parameter {kp.name}: the tensor {a} is already passed to an earlier "
                                  "parameter; kiln passes each call pointer once (declare a second tensor)")
            passed(a, 8)
        elif isinstance(ty, str) and ty in TRITON_TO_KILN:
            kiln_type = TRITON_TO_KILN[ty]
            bytes_ = 1 if ty in ("i1", "u1") else DTYPES[kiln_type][0]
            p = by_name.get(a)
            if isinstance(p, Scalar) and p.type != kiln_type and p.integer and kiln_type in INTEGER_TYPES:
                # e.g. an i64 size that Triton typed i32 for the sample: passed converted, and a call
                # whose value does not fit the kernel's type is refused at launch by libkiln
                computed(kp.name, kiln_type, a)
            elif isinstance(p, Scalar):
                if p.type != kiln_type:
                    raise ExportError(f"kernel parameter {kp.name}: Triton passes {ty}, the call's {a} is {p.type}")
                if any(e.get("name") == a and len(e) == 1 for e in entries):
                    if not p.integer:
                        raise ExportError(f"kernel parameter {kp.name}: the float scalar {a} is already passed; "
                                          "kiln passes a float call parameter once")
                    computed(kp.name, kiln_type, a)  # the same scalar again, e.g. n as a stride and a size
                else:
                    passed(a, bytes_)
            elif kiln_type.startswith(("f", "bf")):
                raise ExportError(f"kernel parameter {kp.name} is {ty}: map it to a float scalar of the call "
                                  f"(kiln computes integer expressions only), not {a!r}")
            else:
                computed(kp.name, kiln_type, a)
            for attr in attrs.get(kp.name, []):
                if attr[0] == "tt.divisibility":
                    conditions.append(f"{paren(a)} % {attr[1]} == 0")
                else:
                    raise ExportError(f"{kp.name}: specialisation {attr} has no kiln condition")
        else:
            raise ExportError(f"kernel parameter {kp.name}: Triton type {ty!r} is not supported")
    for kind in ("global_scratch", "profile_scratch"):
        entries.append({"name": kind, "scratch": {"bytes": int(getattr(md, f"{kind}_size", 0) or 0),
                                                  "align": max(1, int(getattr(md, f"{kind}_align", 1) or 1))}})
        expected.append((8, kind))
    found = ptx_entry_params(compiled.asm["ptx"], md.name)
    if len(found) == len(expected) - 1 and entries[-1]["name"] == "profile_scratch":
        entries.pop(), expected.pop()  # a Triton without profile scratch
    if [f[0] for f in found] != [e[0] for e in expected]:
        raise ExportError("the PTX entry's parameters (bytes " + str([f[0] for f in found]) +
                          ") are not what Triton's launcher passes (" +
                          ", ".join(f"{w}:{n}" for w, n in expected) + ")")
    return entries, conditions


def launch_config(compiled):
    """(block, shared_mem, cluster or None, num_ctas) from Triton's metadata; refuses launch
    attributes kiln does not set."""
    md = compiled.metadata
    for key in ("launch_cooperative_grid", "launch_pdl"):
        if getattr(md, key, False):
            raise ExportError(f"the kernel needs {key}, which kiln does not set")
    num_ctas = int(getattr(md, "num_ctas", 1) or 1)
    cluster = tuple(getattr(md, "cluster_dims", None) or (num_ctas, 1, 1))
    if cluster[0] != num_ctas or cluster[1:] != (1, 1):
        raise ExportError(f"cluster_dims {cluster} with num_ctas {num_ctas}: Triton's launcher uses num_ctas x 1 x 1")
    return [md.num_warps * 32, 1, 1], int(md.shared), (list(cluster) if num_ctas > 1 else None), num_ctas
