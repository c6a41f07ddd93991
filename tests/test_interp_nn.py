"""Run the `nn` fixture kernels (fixtures/kernels/nn.py) on the interpreter and compare with
numpy references written here from the kernels' Python source, in f64.

Tolerances follow tests/test_interp_fixtures.py: f32 chains rtol 1e-5; results stored as f16
rtol/atol 1e-2, bf16 4e-2; approximate math (tanh, exp2 with flush-to-zero, approx division)
1e-3 relative on top.  Inputs are small so the PTX emulator can run the same cases
(runtime/tests/test_rt_sim_nn.py swaps `run` for the emulator's).
"""
import ml_dtypes
import numpy as np
import pytest

from fixture_cases import case_registry, f64, run
from test_interp_fixtures import check, entry, module, versions

BF16 = ml_dtypes.bfloat16
RNG = np.random.default_rng(20240611)
CASES, case = case_registry()


def randn(shape, dtype=np.float32, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(dtype)


# ----------------------------------------------------------------------------- norms


@case("nn_layer_norm_fwd")
def _layer_norm(mod):
    for index, dtype, rows, cols, tol in ((0, np.float16, 3, 80, 1e-2), (1, BF16, 2, 100, 4e-2)):
        x = randn((rows, cols), dtype, 2.0) + dtype(1.5)
        w, b = randn(cols, dtype), randn(cols, dtype)
        y = np.zeros_like(x)
        mean, rstd = np.zeros(rows, np.float32), np.zeros(rows, np.float32)
        eps = np.float32(1e-5)
        run(mod, entry(mod, index), (rows,), x, w, b, y, mean, rstd, eps)
        xf = f64(x)
        ref_mean = xf.mean(axis=1)
        ref_rstd = 1 / np.sqrt(((xf - ref_mean[:, None]) ** 2).mean(axis=1) + float(eps))
        check(mean, ref_mean, rtol=1e-5, atol=1e-6)
        check(rstd, ref_rstd, rtol=1e-5)
        ref_y = (xf - ref_mean[:, None]) * ref_rstd[:, None] * f64(w) + f64(b)
        check(y, ref_y, rtol=tol, atol=tol)


def _rms_reference(x, w, eps):
    xf = f64(x)
    rstd = 1 / np.sqrt((xf * xf).mean(axis=1) + eps)
    return xf * rstd[:, None] * f64(w), rstd


@case("nn_rms_norm_tiled")
def _rms_norm_tiled(mod):
    for index, dtype, eps, tol in ((0, np.float16, 1e-6, 1e-2), (1, np.float32, 1e-5, 1e-5)):
        x, w = randn((3, 50), dtype), randn(50, dtype)
        y, rstd = np.zeros_like(x), np.zeros(3, np.float32)
        run(mod, entry(mod, index), (3,), x, w, y, rstd)
        ref_y, ref_rstd = _rms_reference(x, w, eps)
        check(rstd, ref_rstd, rtol=1e-5)
        check(y, ref_y, rtol=tol, atol=tol)


@case("nn_rms_norm_gather")
def _rms_norm_gather(mod):
    x, w = randn((2, 70), np.float16), randn(70, np.float16)
    # Canaries past the row ends: the gathered tail lanes are out of bounds and must be
    # neither read into the sum nor written.
    y, rstd = np.full((2, 70), 7, np.float16), np.zeros(2, np.float32)
    run(mod, entry(mod), (2,), x, w, y, rstd, np.float32(1e-5))
    ref_y, ref_rstd = _rms_reference(x, w, 1e-5)
    check(rstd, ref_rstd, rtol=1e-5)
    check(y, ref_y, rtol=1e-2, atol=1e-2)
    # entry 1: contiguous aligned rows of 1008 (the last 512-element chunk masked)
    x, w = randn((16, 1008), np.float16), randn(1008, np.float16)
    y, rstd = np.zeros_like(x), np.zeros(16, np.float32)
    run(mod, entry(mod, 1), (16,), x, w, y, rstd, np.float32(1e-5))
    ref_y, ref_rstd = _rms_reference(x, w, 1e-5)
    check(rstd, ref_rstd, rtol=1e-5)
    check(y, ref_y, rtol=1e-2, atol=1e-2)


@case("nn_add_rms_norm")
def _add_rms_norm(mod):
    x, res, w = randn((6, 64), BF16), randn((6, 64), BF16), randn(64, BF16)
    y = np.zeros_like(x)
    h = f64(x) + f64(res)
    run(mod, entry(mod), (2,), x, res, w, y, np.float32(1e-6))
    check(res, h.astype(BF16))
    ref = h * (1 / np.sqrt((h * h).mean(axis=1, keepdims=True) + 1e-6)) * f64(w)
    check(y, ref, rtol=4e-2, atol=4e-2)


# --------------------------------------------------------------------------- softmax


def _softmax(x):
    xf = f64(x)
    e = np.exp(xf - xf.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@case("nn_softmax_rows")
def _softmax_rows(mod):
    # 10 rows in tiles of 4 on 2 blocks: the grid-stride loop gives block 0 two row tiles and
    # the last tile is half outside the array.
    for index, dtype, shape, tol in ((0, np.float16, (10, 50), 1e-2),
                                     (1, np.float32, (5, 32), 1e-5)):
        x = randn(shape, dtype, 3.0)
        y = np.full(shape, -1, dtype)
        run(mod, entry(mod, index), (2,), x, y)
        check(y, _softmax(x), rtol=tol, atol=tol * 1e-2)


@case("nn_softmax_online")
def _softmax_online(mod):
    for index, dtype, shape, tol in ((0, np.float32, (3, 100), 1e-5),
                                     (1, np.float16, (2, 40), 1e-2)):
        x = randn(shape, dtype, 4.0)
        y = np.zeros(shape, dtype)
        run(mod, entry(mod, index), (shape[0],), x, y)
        check(y, _softmax(x), rtol=tol, atol=tol * 1e-2)


# ------------------------------------------------------------------------- attention


def _attention(q, k, v, scale, causal):
    s = np.einsum("bhmd,bhnd->bhmn", f64(q), f64(k)) * scale
    if causal:
        m, n = s.shape[-2:]
        s = np.where(np.arange(m)[:, None] >= np.arange(n)[None, :], s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.einsum("bhmn,bhnd->bhmd", p / p.sum(axis=-1, keepdims=True), f64(v))


@case("nn_flash_attention")
def _flash_attention(mod):
    # (entry, dtype, out dtype, seq_q, seq_k, causal, tolerance): P is rounded to the input
    # dtype before P.V, as in the kernel, so the tolerance is that of f16 / bf16.
    for index, dtype, out_dtype, seq_q, seq_k, causal, tol in (
            (0, np.float16, np.float16, 32, 32, True, 1e-2),
            (1, BF16, np.float32, 32, 48, False, 3e-2)):
        q = randn((1, 2, seq_q, 16), dtype)
        k = randn((1, 2, seq_k, 16), dtype)
        v = randn((1, 2, seq_k, 16), dtype)
        out = np.zeros((1, 2, seq_q, 16), out_dtype)
        scale = np.float32(0.25)
        run(mod, entry(mod, index), (seq_q // 16, 2), q, k, v, out, scale)
        check(out, _attention(q, k, v, float(scale), causal), rtol=tol, atol=tol)


@case("nn_flash_attention_tile")
def _flash_attention_tile(mod):
    # production tiles: at head dim 64, 2 query tiles of 64 rows over 128 keys (causal) and one
    # of 128 rows over 192 keys (non-causal; the kernel masks no ragged key tile, so whole
    # ones); at head dim 128, 64 rows over two key tiles of 128 (Q held in registers by the loop)
    for index, dtype, tile_m, seq_q, seq_k, dim, causal, tol in (
            (0, np.float16, 64, 128, 128, 64, True, 1e-2),
            (1, BF16, 128, 128, 192, 64, False, 3e-2),
            (2, np.float16, 64, 64, 256, 128, False, 1e-2)):
        q, k, v = (randn((1, 2, seq, dim), dtype) for seq in (seq_q, seq_k, seq_k))
        out = np.zeros((1, 2, seq_q, dim), dtype)
        scale = np.float32(dim ** -0.5)
        run(mod, entry(mod, index), (seq_q // tile_m, 2), q, k, v, out, scale)
        check(out, _attention(q, k, v, float(scale), causal), rtol=tol, atol=tol)


@case("nn_attention_gqa")
def _attention_gqa(mod):
    # 4 query heads on 2 K/V heads, queries at positions 8..39 of a 40-token K/V (not a multiple
    # of the 16-token tile); Dqk = 32, Dv = 16.
    heads, group, seq_q, seq_k, input_pos = 4, 2, 32, 40, 8
    for index, out_dtype, causal in ((0, np.float16, True), (1, np.float32, False)):
        q = randn((1, heads, seq_q, 32), np.float16, 0.5)
        k = randn((1, heads // group, seq_k, 32), np.float16, 0.5)
        v = randn((1, heads // group, seq_k, 16), np.float16)
        out = np.zeros((1, heads, seq_q, 16), out_dtype)
        scale = np.float32(32 ** -0.5)
        run(mod, entry(mod, index), (seq_q // 16, heads), q, k, v, out, scale, input_pos)
        s = np.einsum("hmd,hnd->hmn", f64(q[0]), np.repeat(f64(k[0]), group, axis=0)) * float(scale)
        if causal:
            allowed = (input_pos + np.arange(seq_q))[:, None] >= np.arange(seq_k)[None, :]
            s = np.where(allowed, s, -np.inf)
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        ref = np.einsum("hmn,hnd->hmd", p / p.sum(axis=-1, keepdims=True),
                        np.repeat(f64(v[0]), group, axis=0))
        check(out[0], ref, rtol=1e-2, atol=1e-2)


@case("nn_paged_decode")
def _paged_decode(mod):
    batch, heads, group, page, dim = 2, 4, 2, 8, 32
    k_cache = randn((6, page, heads // group, dim), np.float16, 0.5)
    v_cache = randn((6, page, heads // group, dim), np.float16)
    table = np.array([[4, 1, 5], [0, 3, 2]], np.int32)
    seq_lens = np.array([20, 13], np.int32)
    q = randn((batch, heads, dim), np.float16)
    out = np.zeros((batch, heads, dim), np.float16)
    scale = np.float32(dim ** -0.5)
    run(mod, entry(mod), (batch, heads), q, k_cache, v_cache, table, seq_lens, out, scale)
    for b in range(batch):
        tokens = np.arange(seq_lens[b])
        pages, rows = table[b, tokens // page], tokens % page
        for h in range(heads):
            keys = f64(k_cache[pages, rows, h // group])          # (seq_len, D)
            values = f64(v_cache[pages, rows, h // group])
            s = keys @ f64(q[b, h]) * float(scale)
            p = np.exp(s - s.max())
            check(out[b, h], p @ values / p.sum(), rtol=1e-2, atol=1e-2)


@case("nn_rope")
def _rope(mod):
    for index, dtype, table_dtype, heads, dim, tol in ((0, np.float16, np.float32, 4, 16, 1e-2),
                                                       (1, BF16, BF16, 2, 32, 4e-2)):
        seq, half = 3, dim // 2
        angles = np.arange(seq)[:, None] * 10000.0 ** (-np.arange(half) / half)[None, :]
        cos, sin = np.cos(angles).astype(table_dtype), np.sin(angles).astype(table_dtype)
        x = randn((seq, heads, dim), dtype)
        x1, x2 = f64(x[..., :half]), f64(x[..., half:])
        c, s = f64(cos)[:, None, :], f64(sin)[:, None, :]
        expected = np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)
        run(mod, entry(mod, index), (seq,), x, cos, sin)
        check(x, expected, rtol=tol, atol=tol)


# ----------------------------------------------------------------------- activations


def _silu(x):
    return x / (1 + np.exp(-x))


@case("nn_swiglu")
def _swiglu(mod):
    for index, dtype, out_dtype, rows, f, grid, tol in (
            (0, np.float16, np.float16, 6, 64, (2, 2), 1e-2),
            (1, BF16, np.float32, 3, 32, (2, 2), 1e-5)):
        gate_up = randn((rows, 2 * f), dtype, 2.0)
        out = np.zeros((rows, f), out_dtype)
        run(mod, entry(mod, index), grid, gate_up, out)
        g, u = f64(gate_up[:, :f]), f64(gate_up[:, f:])
        check(out, _silu(g) * u, rtol=tol, atol=tol)


@case("nn_bias_act")
def _bias_act(mod):
    def gelu_tanh(x):
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))

    for index, dtype, act, tol in ((0, np.float16, gelu_tanh, 1e-2),
                                   (1, np.float32, _silu, 1e-5),
                                   (2, BF16, lambda x: np.maximum(x, 0), 4e-2)):
        x, bias = randn((5, 40), dtype, 2.0), randn(40, dtype)
        y = np.zeros_like(x)
        run(mod, entry(mod, index), (2, 2), x, bias, y)
        check(y, act(f64(x) + f64(bias)), rtol=tol, atol=tol)


# ---------------------------------------------------------------- lookup and losses


@case("nn_embedding")
def _embedding(mod):
    for index, id_dtype, dtype, tokens, dim, tile, tol in (
            (0, np.int32, np.float16, 12, 32, 8, 1e-2),
            (1, np.int64, np.float32, 10, 16, 4, 1e-6)):
        vocab = 50
        ids = RNG.integers(0, vocab, tokens).astype(id_dtype)
        table, pos = randn((vocab, dim), dtype), randn((tokens, dim), dtype)
        out = np.zeros((tokens, dim), dtype)
        scale = np.float32(np.sqrt(dim))
        run(mod, entry(mod, index), (-(-tokens // tile),), ids, table, pos, out, scale)
        check(out, f64(table)[ids] * float(scale) + f64(pos), rtol=tol, atol=tol)


@case("nn_cross_entropy")
def _cross_entropy(mod):
    for index, dtype, tgt_dtype, rows, vocab, tol in ((0, np.float32, np.int64, 4, 100, 1e-5),
                                                      (1, np.float16, np.int32, 3, 130, 1e-3)):
        logits = randn((rows, vocab), dtype, 3.0)
        targets = RNG.integers(0, vocab, rows).astype(tgt_dtype)
        targets[1] = -100
        loss, total = np.full(rows, -1, np.float32), np.zeros(1, np.float32)
        run(mod, entry(mod, index), (rows,), logits, targets, loss, total, tgt_dtype(-100))
        lf = f64(logits)
        lse = np.log(np.exp(lf - lf.max(axis=1, keepdims=True)).sum(axis=1)) + lf.max(axis=1)
        ref = np.where(targets == -100, 0.0, lse - lf[np.arange(rows), np.maximum(targets, 0)])
        check(loss, ref, rtol=tol, atol=1e-5)
        check(total, [ref.sum() / rows], rtol=tol)


# ------------------------------------------------------------------------ statistics


@case("nn_batch_stats")
def _batch_stats(mod):
    for index, dtype, shape, tile in ((0, np.float32, (8, 32), (4, 16)),
                                      (1, np.float16, (16, 64), (8, 32))):
        x = randn(shape, dtype, 2.0)
        grid = (shape[0] // tile[0], shape[1] // tile[1])
        col_sum, col_sq = np.zeros((1, shape[1]), np.float32), np.zeros((1, shape[1]), np.float32)
        tile_mean = np.zeros((shape[0], grid[1]), np.float32)
        tile_var = np.zeros_like(tile_mean)
        run(mod, entry(mod, index), grid, x, col_sum, col_sq, tile_mean, tile_var)
        xf = f64(x)
        check(col_sum, xf.sum(axis=0, keepdims=True), rtol=1e-5, atol=1e-5)
        check(col_sq, (xf * xf).sum(axis=0, keepdims=True), rtol=1e-5)
        parts = xf.reshape(shape[0], grid[1], tile[1])
        check(tile_mean, parts.mean(axis=2), rtol=1e-5, atol=1e-6)
        check(tile_var, parts.var(axis=2), rtol=1e-5)


# ------------------------------------------------------------------- more norms


@case("nn_layer_norm_bwd")
def _layer_norm_bwd(mod):
    rows, cols, groups = 7, 50, 4
    x, dy, w = randn((rows, cols), np.float16), randn((rows, cols), np.float16), \
        randn(cols, np.float16)
    xf, dyf, wf = f64(x), f64(dy), f64(w)
    mean = xf.mean(axis=1).astype(np.float32)
    rstd = (1 / np.sqrt(xf.var(axis=1) + 1e-5)).astype(np.float32)
    dx = np.zeros_like(x)
    dw, db = np.zeros((groups, cols), np.float32), np.zeros((groups, cols), np.float32)
    locks = np.zeros(groups, np.int32)
    run(mod, entry(mod), (rows,), dx, dy, dw, db, x, w, mean, rstd, locks)
    xhat = (xf - f64(mean)[:, None]) * f64(rstd)[:, None]
    wdy = wf * dyf
    c1 = (xhat * wdy).mean(axis=1, keepdims=True)
    c2 = wdy.mean(axis=1, keepdims=True)
    check(dx, (wdy - (xhat * c1 + c2)) * f64(rstd)[:, None], rtol=1e-2, atol=1e-2)
    group_of_row = np.arange(rows) % groups
    ref_dw = np.stack([(dyf * xhat)[group_of_row == g].sum(axis=0) for g in range(groups)])
    ref_db = np.stack([dyf[group_of_row == g].sum(axis=0) for g in range(groups)])
    check(dw, ref_dw, rtol=1e-5, atol=1e-5)
    check(db, ref_db, rtol=1e-5, atol=1e-5)
    check(locks, np.zeros(groups, np.int32))  # every lock released


@case("nn_rms_norm_persistent")
def _rms_norm_persistent(mod):
    x, w = randn((10, 64), np.float16), randn(64, np.float16)
    y = np.zeros_like(x)
    run(mod, entry(mod, 0), (2,), x, y, w, np.float32(1e-6))
    check(y, _rms_reference(x, w, 1e-6)[0], rtol=1e-2, atol=1e-2)
    # entry 1 (contiguous arrays: rows a multiple of 16): rows of 256 in tiles of 2 whole rows,
    # 8 row tiles over 3 blocks (3, 3, 2), then over 9 (one block has no tile)
    x, w = randn((16, 256), np.float16), randn(256, np.float16)
    for blocks in (3, 9):
        y = np.zeros_like(x)
        run(mod, entry(mod, 1), (blocks,), x, y, w, np.float32(1e-6))
        check(y, _rms_reference(x, w, 1e-6)[0], rtol=1e-2, atol=1e-2)


@case("nn_welford")
def _welford(mod):
    # a large common offset is where the naive sum-of-squares formula loses everything
    x = (100 + randn((6, 50), np.float32, 0.5)).astype(np.float16)
    mean, var = np.zeros(6, np.float32), np.zeros(6, np.float32)
    run(mod, entry(mod), (2,), x, mean, var)
    check(mean, f64(x).mean(axis=1), rtol=1e-6)
    check(var, f64(x).var(axis=1), rtol=1e-4)


# --------------------------------------------------------------- linear layers


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


@case("nn_linear_bias_gelu")
def _linear_bias_gelu(mod):
    # (entry, input dtype, bias/output dtype, out_features, tile N, tolerance): the epilogue
    # uses tanh.approx (relative error ~2^-11), the f16 output rounds further.
    for index, dtype, out_dtype, n, tile_n, tol in ((0, np.float16, np.float16, 24, 16, 1e-2),
                                                    (1, BF16, np.float32, 40, 32, 2e-3)):
        a, w = randn((20, 40), dtype, 0.5), randn((n, 40), dtype, 0.5)
        bias = randn(n, out_dtype)
        c = np.zeros((20, n), out_dtype)
        run(mod, entry(mod, index), (2, -(-n // tile_n)), a, w, bias, c)
        check(c, _gelu_tanh(f64(a) @ f64(w).T + f64(bias)), rtol=tol, atol=tol)


@case("nn_quantize_int8")
def _quantize_int8(mod):
    x = randn((6, 32), np.float16, 3.0)
    x[2] = 0  # an all-zero row takes the 1e-8 floor of the scale
    q, scale = np.zeros((6, 32), np.int8), np.zeros((6, 1), np.float32)
    run(mod, entry(mod), (2,), x, q, scale)
    xf = x.astype(np.float32)
    ref_scale = np.maximum(np.abs(xf).max(axis=1, keepdims=True), np.float32(1e-8)) / \
        np.float32(127)
    check(scale, ref_scale)
    ref_q = np.clip(np.floor(xf / ref_scale + np.float32(0.5)), -127, 127).astype(np.int8)
    check(q, ref_q)


@case("nn_int8_linear")
def _int8_linear(mod):
    a = RNG.integers(-127, 128, (20, 64)).astype(np.int8)
    b = RNG.integers(-127, 128, (64, 24)).astype(np.int8)
    sa, sb = RNG.uniform(1e-3, 1e-2, (20, 1)).astype(np.float32), \
        RNG.uniform(1e-3, 1e-2, (1, 24)).astype(np.float32)
    c = np.zeros((20, 24), np.float16)
    run(mod, entry(mod), (2, 2), a, b, sa, sb, c)
    acc = a.astype(np.int64) @ b.astype(np.int64)
    check(c, acc * f64(sa) * f64(sb), rtol=1e-2, atol=1e-4)


@case("nn_greedy_argmax")
def _greedy_argmax(mod):
    for index, dtype, shape in ((0, np.float32, (3, 100)), (1, BF16, (2, 130))):
        logits = randn(shape, dtype)
        logits[0, [40, 70]] = 9   # tie across tiles: the first one wins
        logits[1, [3, 5]] = 9     # tie inside a tile
        out = np.full(shape[0], -1, np.int32)
        run(mod, entry(mod, index), (shape[0],), logits, out)
        check(out, np.argmax(f64(logits), axis=1).astype(np.int32))


PARAMS = [(name, version) for name in sorted(CASES) for version in versions(name)]


# Each case runs against its numpy reference in tests/test_interp_batch.py, batched and one block
# at a time (a test here that ran it once more, batched, would repeat that check).
