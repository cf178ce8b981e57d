"""A small serving app as people write them, for the capture/serve run on the H200: an HF
`transformers` Llama built from a small random config (no download) under torch.compile, whose
logits go through two explicit Triton kernels, one of them autotuned, and a TileLang GEMM + ReLU
(the seed's kernel) where TileLang is installed. Nothing here knows kiln.

    python app.py --out OUT.pt

Prints `BOOT {json}` last: seconds from process start to the first output, and the first compiled
forward's, first Triton calls' and first TileLang call's share of it. With KILN_APP_AUDIT=FILE, a Python audit hook installed
before anything else writes every program the process started (subprocess, exec, spawn, system).
"""
import json
import os
import sys
import time

_programs = []
if os.environ.get("KILN_APP_AUDIT"):
    def _audit(event, args):
        if event in ("subprocess.Popen", "os.exec", "os.posix_spawn", "os.system", "os.spawn"):
            _programs.append({"event": event, "args": repr(args)[:300]})
    sys.addaudithook(_audit)


def process_age():
    """Seconds since this process started (from /proc: the kernel's own record)."""
    with open("/proc/self/stat") as f:
        start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return uptime - start_ticks / os.sysconf("SC_CLK_TCK")


t_imports = time.perf_counter()
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402
try:
    import tilelang  # noqa: E402
    import tilelang.language as T  # noqa: E402
except ImportError:
    tilelang = None
imports_s = time.perf_counter() - t_imports

# Compilations in this process, from Triton's own listener (chained to one already set).
_compiles = [0]
_previous_listener = triton.knobs.compilation.listener


def _listener(*, src, metadata, metadata_group, times, cache_hit):
    _compiles[0] += 0 if cache_hit else 1
    if _previous_listener is not None:
        _previous_listener(src=src, metadata=metadata, metadata_group=metadata_group, times=times, cache_hit=cache_hit)


triton.knobs.compilation.listener = _listener


@triton.autotune(configs=[triton.Config({"BLOCK": 256}, num_warps=4), triton.Config({"BLOCK": 512}, num_warps=8),
                          triton.Config({"BLOCK": 1024}, num_warps=8)], key=["n_cols"])
@triton.jit
def softmax_rows(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc_max = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc_max = tl.maximum(acc_max, tl.load(x_ptr + row * stride + offs, mask=offs < n_cols,
                                              other=float("-inf")).to(tl.float32))
    m = tl.max(acc_max, 0)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + offs, mask=offs < n_cols, other=float("-inf")).to(tl.float32)
        acc += tl.exp(x - m)
    total = tl.sum(acc, 0)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + offs, mask=offs < n_cols, other=float("-inf")).to(tl.float32)
        tl.store(y_ptr + row * stride + offs, tl.exp(x - m) / total, mask=offs < n_cols)


@triton.jit
def scaled_residual(x_ptr, r_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    r = tl.load(r_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * alpha + r, mask=mask)


if tilelang is not None:
    @tilelang.jit
    def matmul_relu(A, B, block_M: int = 128, block_N: int = 128, block_K: int = 32):
        M, N, K = T.const("M, N, K")
        A: T.Tensor((M, K), T.float16)
        B: T.Tensor((K, N), T.float16)
        C = T.empty((M, N), T.float16)
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            B_shared = T.alloc_shared((block_K, block_N), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)
            T.copy(C_local, C[by * block_M, bx * block_N])
        return C


def main():
    out = sys.argv[sys.argv.index("--out") + 1]
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=2048, hidden_size=256, intermediate_size=688, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    model = LlamaForCausalLM(config).to("cuda", torch.float16).eval()
    compiled = torch.compile(model)
    ids = torch.randint(0, config.vocab_size, (2, 64), device="cuda")
    profile = None
    if os.environ.get("KILN_APP_PROFILE"):  # where the first forward's time goes (cProfile, cumulative)
        import cProfile
        profile = cProfile.Profile()
        profile.enable()
    t0 = time.perf_counter()
    with torch.no_grad():
        logits = compiled(input_ids=ids).logits.float().reshape(-1, config.vocab_size).contiguous()
    torch.cuda.synchronize()
    forward_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    probs = torch.empty_like(logits)
    softmax_rows[(logits.shape[0],)](logits, probs, logits.shape[1], logits.stride(0))
    mixed = torch.empty_like(probs)
    n = probs.numel()
    scaled_residual[(triton.cdiv(n, 1024),)](probs, logits, mixed, n, 0.5, BLOCK=1024)
    torch.cuda.synchronize()
    triton_s = time.perf_counter() - t1
    outputs = {"logits": logits, "probs": probs, "mixed": mixed}
    tilelang_s = 0.0
    if tilelang is not None:
        t2 = time.perf_counter()
        weight = torch.randn((mixed.shape[1], 256), device="cuda", dtype=torch.float16, generator=torch.Generator(
            device="cuda").manual_seed(1)) * 0.05
        outputs["projected"] = matmul_relu(mixed.half(), weight)
        torch.cuda.synchronize()
        tilelang_s = time.perf_counter() - t2
    first_output_s = process_age()
    if profile is not None:
        import io
        import pstats
        profile.disable()
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(70)
        with open(os.environ["KILN_APP_PROFILE"], "w") as f:
            f.write(text.getvalue())
    torch.save({k: v.cpu() for k, v in outputs.items()}, out)
    # Where torch.compile's part of the first forward went, by torch's own phase timers, and how
    # Inductor got its kernels (statically launched from its cache entries, or loaded from source).
    phases, inductor = {}, {}
    try:
        from torch._dynamo.utils import compile_times, counters
        names, values = compile_times(repr="csv", aggregate=True)
        phases = {n: round(float(v), 3) for n, v in zip(names, values) if float(v) >= 0.005}
        inductor = {k: v for k, v in counters["inductor"].items()
                    if k.startswith(("triton_bundler", "async_compile", "fxgraph_cache"))}
    except Exception as e:  # diagnostics only: a torch without them still boots the app
        phases = {"unavailable": repr(e)[:200]}
    print("BOOT " + json.dumps({"first_output_s": round(first_output_s, 3), "imports_s": round(imports_s, 3),
                                "first_forward_s": round(forward_s, 3), "first_triton_calls_s": round(triton_s, 3),
                                "first_tilelang_call_s": round(tilelang_s, 3), "tilelang": tilelang is not None,
                                "compilations_in_process": _compiles[0], "programs": _programs,
                                "torch_phases_s": phases, "inductor_counters": inductor}), flush=True)


if __name__ == "__main__":
    main()
