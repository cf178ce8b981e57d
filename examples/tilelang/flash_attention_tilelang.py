"""FlashAttention forward in TileLang, Q, K, V and O laid out [batch, seq_len, heads, dim]
(bshd), float16 in and out, float32 accumulation and an online softmax in base 2.

Source note: this follows TileLang's own example examples/flash_attention/example_mha_fwd_bshd.py
(tile-ai/tilelang, MIT licence): the same algorithm (per 128-row block of queries: stream K and V
in 128-row blocks through shared memory with T.Pipelined, S = Q K^T with T.gemm(transpose_B),
running max / rescale / sum in register fragments, O += P V, divide by the row sums at the end),
the configuration its main() runs (block_M = block_N = 128, num_stages = 1, 128 threads, batch 8,
heads 32, seq_len 4096, dim 128, non-causal) and its pass configuration (TL_ENABLE_FAST_MATH).
Adapted for kiln, written out here rather than copied: no autotuner, one function instead of
T.macro helpers, and the output is a parameter the caller passes (no out_idx), so that TileLang's
own launch and kiln's take the same four tensors. TileLang's default Hopper lowering applies:
every T.copy between global and shared memory becomes a TMA copy through a CUtensorMap."""
import tilelang
import tilelang.language as T

LOG2E = 1.44269504


@tilelang.jit(pass_configs={tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True})
def flashattn(batch, heads, seq_len, dim, is_causal, block_M=128, block_N=128, num_stages=1, threads=128):
    scale = (1.0 / dim) ** 0.5 * LOG2E  # softmax(x / sqrt(d)) computed with exp2
    shape = [batch, seq_len, heads, dim]
    dtype, accum = "float16", "float"

    @T.prim_func
    def flash_attention_fwd(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
                            O: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            q_tile = T.alloc_shared([block_M, dim], dtype)
            k_tile = T.alloc_shared([block_N, dim], dtype)
            v_tile = T.alloc_shared([block_N, dim], dtype)
            o_tile = T.alloc_shared([block_M, dim], dtype)
            s = T.alloc_fragment([block_M, block_N], accum)
            p = T.alloc_fragment([block_M, block_N], dtype)
            o = T.alloc_fragment([block_M, dim], accum)
            row_max = T.alloc_fragment([block_M], accum)
            row_max_prev = T.alloc_fragment([block_M], accum)
            rescale = T.alloc_fragment([block_M], accum)
            block_sum = T.alloc_fragment([block_M], accum)
            row_sum = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_tile)
            T.fill(o, 0)
            T.fill(row_sum, 0)
            T.fill(row_max, -T.infinity(accum))
            if is_causal:
                blocks = T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
            else:
                blocks = T.ceildiv(seq_len, block_N)

            for kb in T.Pipelined(blocks, num_stages=num_stages):
                # S = Q K^T for this block of keys (masked above the diagonal when causal)
                T.copy(K[bz, kb * block_N:(kb + 1) * block_N, by, :], k_tile)
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        s[i, j] = T.if_then_else(bx * block_M + i >= kb * block_N + j, 0, -T.infinity(accum))
                else:
                    T.clear(s)
                T.gemm(q_tile, k_tile, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                # online softmax: new running max, rescale factor, exponentials, row sums
                T.copy(row_max, row_max_prev)
                T.fill(row_max, -T.infinity(accum))
                T.reduce_max(s, row_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    rescale[i] = T.exp2(row_max_prev[i] * scale - row_max[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.exp2(s[i, j] * scale - row_max[i] * scale)
                T.reduce_sum(s, block_sum, dim=1)
                for i in T.Parallel(block_M):
                    row_sum[i] = row_sum[i] * rescale[i] + block_sum[i]
                T.copy(s, p)
                for i, j in T.Parallel(block_M, dim):
                    o[i, j] *= rescale[i]
                # O += P V
                T.copy(V[bz, kb * block_N:(kb + 1) * block_N, by, :], v_tile)
                T.gemm(p, v_tile, o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                o[i, j] /= row_sum[i]
            T.copy(o, o_tile)
            T.copy(o_tile, O[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return flash_attention_fwd


# The configuration TileLang's example runs by default.
SIZES = dict(batch=8, heads=32, seq_len=4096, dim=128, is_causal=False)
TILES = dict(block_M=128, block_N=128, num_stages=1, threads=128)


def reference(Q, K, V, O):
    """softmax(Q K^T / sqrt(d)) V per batch and head, float64, rounded to float16 (PyTorch or NumPy);
    tensors are [batch, seq_len, heads, dim]."""
    if hasattr(Q, "double"):
        q, k, v = (t.double().transpose(1, 2) for t in (Q, K, V))  # b h s d
        p = (q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5).softmax(dim=-1)
        O.copy_((p @ v).transpose(1, 2).half())
    else:
        import numpy as np
        q, k, v = (t.astype("f8").transpose(0, 2, 1, 3) for t in (Q, K, V))
        s = q @ k.transpose(0, 1, 3, 2) / q.shape[-1] ** 0.5
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        O[...] = (p @ v).transpose(0, 2, 1, 3)


# kiln.export.tilelang's arguments (python -m kiln.export tilelang flash_attention_tilelang.py:flashattn):
# a configuration small enough for test vectors (batch 1, 8 heads, 1024 tokens, dim 128: 2 MiB a
# tensor); SIZES above is TileLang's benchmark configuration.
import kiln.export as kx  # noqa: E402

TEST_SIZES = dict(batch=1, heads=8, seq_len=1024, dim=128, is_causal=False)
kiln_flashattn = dict(args=tuple(TEST_SIZES.values()), name="flash_attention_fwd", package="flash-attention-tilelang",
                      description="FlashAttention forward, bshd float16, batch 1, heads 8, seq 1024, dim 128, "
                                  "TileLang's default Hopper lowering (TMA)",
                      reference=reference, tests=[kx.Test("fixed")], tolerance={"rtol": 1e-2, "atol": 1e-2},
                      targets=["sm_90a"])
