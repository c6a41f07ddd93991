"""The datamove fixture kernels (fixtures/kernels/datamove.py) on the interpreter, against numpy
references written from the kernels' Python source.  Sizes are ragged (not multiples of the
tiles) so padding, masks and out-of-range gather/scatter indices are exercised.

Data movement, integer and bit-manipulation results are compared exactly; f32 chains rtol 1e-5;
f16 / bf16 outputs about one unit in their last place.  Where blocks race (atomics whose returned
value picks a slot) the reference checks what every order must give.
runtime/tests/test_rt_sim_families.py runs the same cases on the PTX emulator.
"""
import ml_dtypes
import numpy as np
import pytest

from fixture_cases import case_registry, f64, cdiv, run
from test_interp_fixtures import check, entry, module, versions

BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn
E5M2 = ml_dtypes.float8_e5m2
RNG = np.random.default_rng(20260322)
CASES, case = case_registry()
INT32_MIN = np.iinfo(np.int32).min


def randn(shape, dtype=np.float32, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(dtype)


# ------------------------------------------------------------------------------------ MoE


@case("dm_moe_router")
def _moe_router(mod):
    # (entry, logits dtype, weights dtype, tokens, experts, tile, k, renormalise, tolerance)
    for index, dtype, wdtype, T, E, tile, K, renorm, tol in (
            (0, np.float16, np.float32, 13, 8, 8, 2, True, 1e-5),
            (1, BF16, BF16, 6, 16, 4, 4, False, 1e-2)):
        logits = randn((T, E), dtype, 2.0)
        weights, ids = np.zeros((T, K), wdtype), np.full((T, K), -1, np.int32)
        counts = np.zeros(E, np.int32)
        run(mod, entry(mod, index), (cdiv(T, tile),), logits, weights, ids, counts)
        x = f64(logits)
        p = np.exp(x - x.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        ref_ids = np.argsort(-p, axis=1, kind="stable")[:, :K]
        ref_w = np.take_along_axis(p, ref_ids, axis=1)
        if renorm:
            ref_w /= ref_w.sum(axis=1, keepdims=True)
        check(ids, ref_ids.astype(np.int32))
        check(weights, ref_w, rtol=tol, atol=tol * 1e-2)
        check(counts, np.bincount(ref_ids.ravel(), minlength=E).astype(np.int32))


@case("dm_moe_align")
def _moe_align(mod):
    counts = np.array([5, 0, 3, 9, 1, 0, 4, 2], np.int32)
    offsets, block_expert = np.full(8, -7, np.int32), np.full(16, -7, np.int32)
    num_padded = np.zeros(1, np.int32)
    run(mod, entry(mod), (1,), counts, offsets, block_expert, num_padded)
    padded = cdiv(counts, 4) * 4
    ends = np.cumsum(padded)
    check(offsets, (ends - padded).astype(np.int32))
    check(num_padded, [ends[-1]])
    owner = np.repeat(np.arange(8), padded // 4)[:16]
    check(block_expert, np.concatenate([owner, np.full(16 - len(owner), -1)]).astype(np.int32))


@case("dm_moe_permute")
def _moe_permute(mod):
    T, K, E, D = 5, 2, 4, 16
    ids = np.array([[0, 2], [2, 3], [0, 1], [3, 2], [2, 0]], np.int32)
    counts = np.bincount(ids.ravel(), minlength=E)
    starts = (np.cumsum(counts) - counts).astype(np.int32)
    cursor = starts.copy()
    sorted_tok = np.full(T * K, -1, np.int32)
    x = randn((T, D), np.float16)
    x_sorted = np.zeros((T * K, D), np.float16)
    run(mod, entry(mod), (cdiv(T * K, 8),), ids, cursor, sorted_tok, x, x_sorted)
    check(cursor, starts + counts)
    # Rows within an expert's segment may come in any order; the segment's set may not.
    for e in range(E):
        seg = slice(starts[e], starts[e] + counts[e])
        check(np.sort(sorted_tok[seg]), np.sort(np.nonzero(ids == e)[0]).astype(np.int32))
    check(x_sorted, x[sorted_tok])


# -------------------------------------------------------------------------------- sorting


@case("dm_bitonic_sort")
def _bitonic_sort(mod):
    keys = randn((3, 16))
    vals = np.tile(np.arange(16, dtype=np.int32), (3, 1))
    out_k, out_v = np.zeros_like(keys), np.full_like(vals, -1)
    run(mod, entry(mod, 0), (2,), keys, vals, out_k, out_v)
    order = np.argsort(keys, axis=1)
    check(out_k, np.take_along_axis(keys, order, axis=1))
    check(out_v, order.astype(np.int32))

    keys = np.stack([RNG.permutation(8) * 3 - 10 for _ in range(4)]).astype(np.int32)
    vals = keys * 100 + 1
    out_k, out_v = np.zeros_like(keys), np.zeros_like(vals)
    run(mod, entry(mod, 1), (1,), keys, vals, out_k, out_v)
    check(out_k, -np.sort(-keys, axis=1))
    check(out_v, -np.sort(-keys, axis=1) * 100 + 1)


# --------------------------------------------------------------------------------- sparse


def _random_csr(rows, cols, max_len):
    lengths = RNG.integers(0, max_len + 1, rows)
    lengths[1] = 0                      # an empty row
    lengths[-1] = max_len               # the longest row in the last (partial) block
    row_ptr = np.concatenate([[0], np.cumsum(lengths)])
    col = np.concatenate([RNG.choice(cols, n, replace=False) for n in lengths])
    return row_ptr, col


@case("dm_csr_spmv")
def _csr_spmv(mod):
    for index, itype, vtype, rows, cols, max_len, tile_r, tol in (
            (0, np.int32, np.float32, 7, 24, 19, 4, 1e-5),
            (1, np.int64, np.float16, 5, 40, 35, 2, 1e-3)):
        row_ptr, col = _random_csr(rows, cols, max_len)
        vals, x = randn(len(col), vtype), randn(cols, vtype)
        y = np.full(rows, 99, np.float32)
        run(mod, entry(mod, index), (cdiv(rows, tile_r),), row_ptr.astype(itype),
            col.astype(itype), vals, x, y, np.float32(1.5))
        ref = np.array([1.5 * np.dot(f64(vals[a:b]), f64(x[col[a:b]]))
                        for a, b in zip(row_ptr[:-1], row_ptr[1:])])
        check(y, ref, rtol=tol, atol=tol)


# ------------------------------------------------------------------------------- KV cache


def _cache_reference(cache, key, slots):
    ref = cache.copy()
    bs = cache.shape[1]
    for t, slot in enumerate(slots):
        if slot >= 0:
            ref[slot // bs, slot % bs] = key[t].astype(cache.dtype)
    return ref


@case("dm_kv_cache_append")
def _kv_cache_append(mod):
    for index, dtype, stype, H, D in ((0, np.float16, np.int64, 2, 16),
                                      (1, BF16, np.int32, 4, 8)):
        T = 5
        key, value = randn((T, H, D), dtype), randn((T, H, D), dtype)
        k_cache = np.full((3, 4, H, D), 7, dtype)
        v_cache = np.full((3, 4, H, D), -7, dtype)
        slots = np.array([9, -1, 0, 5, 11], stype)
        ref_k = _cache_reference(k_cache, key, slots)
        ref_v = _cache_reference(v_cache, value, slots)
        run(mod, entry(mod, index), (T,), key, value, k_cache, v_cache, slots)
        check(k_cache, ref_k)
        check(v_cache, ref_v)


@case("dm_kv_cache_scatter")
def _kv_cache_scatter(mod):
    for index, dtype, ctype, stype, T, H, D, tile in (
            (0, np.float16, np.float16, np.int64, 6, 2, 16, 4),
            (1, np.float32, BF16, np.int32, 3, 4, 8, 2)):
        key = randn((T, H, D), dtype)
        cache = np.full((2, 4, H, D), 7, ctype)
        slots = RNG.permutation(8)[:T].astype(stype)
        slots[1] = -1
        ref = _cache_reference(cache, key, slots)
        run(mod, entry(mod, index), (cdiv(T, tile),), key, cache, slots)
        check(cache, ref)


@case("dm_paged_kv_gather")
def _paged_kv_gather(mod):
    cache = randn((6, 4, 2, 16), np.float16)
    table = np.array([[4, 0, 2], [5, 1, 3]], np.int32)
    ctx = np.array([9, 4], np.int32)
    out = np.full((2, 12, 2, 16), 3, np.float16)
    run(mod, entry(mod), (2, 3), cache, table, ctx, out)
    ref = cache[table].reshape(2, 12, 2, 16)
    ref[np.arange(12)[None, :] >= ctx[:, None]] = 0
    check(out, ref)


# --------------------------------------------------------------------------- quantisation


@case("dm_int4_dequant")
def _int4_dequant(mod):
    # (entry, packed dtype, nibbles per word, group, scale/out dtype, packed rows, tile_p, tol)
    for index, ptype, pack, group, dtype, prow, tile_p, tol in (
            (0, np.int32, 8, 8, np.float16, 4, 2, 0),
            (1, np.uint8, 2, 4, BF16, 8, 4, 0)):
        info = np.iinfo(ptype)
        packed = RNG.integers(info.min, info.max, (prow, 32), endpoint=True).astype(ptype)
        K = prow * pack
        scales = RNG.uniform(0.01, 0.1, (K // group, 32)).astype(dtype)
        out = np.zeros((K, 32), dtype)
        run(mod, entry(mod, index), (prow // tile_p, 2), packed, scales, out)
        words = packed.astype(np.int64) & ((1 << (8 * packed.itemsize)) - 1)
        nib = (words[:, None, :] >> (4 * np.arange(pack))[None, :, None]) & 0xF
        ref = (nib.reshape(K, 32) - 8) * f64(np.repeat(scales, group, axis=0))
        check(out, ref.astype(np.float32).astype(dtype))


def _fp8_reference(x, block, fp8_max, qtype):
    xf = x.astype(np.float32).reshape(x.shape[0], -1, block)
    scale = np.maximum(np.abs(xf).max(axis=2, keepdims=True), np.float32(1e-10)) / np.float32(fp8_max)
    q = np.clip(xf / scale, -fp8_max, fp8_max).astype(qtype)
    return q.reshape(x.shape), scale[..., 0]


@case("dm_fp8_quant")
def _fp8_quant(mod):
    for index, dtype, qtype, fp8_max, M, N, tile_m, block in (
            (0, BF16, E4M3, 448.0, 6, 64, 4, 32), (1, np.float16, E5M2, 57344.0, 3, 32, 2, 16)):
        x = randn((M, N), dtype, 3.0)
        x[0, :block] = 0                  # an all-zero block: the scale floor keeps it finite
        x[1, 3] = 200                     # an outlier
        q, scales = np.zeros((M, N), qtype), np.zeros((M, N // block), np.float32)
        run(mod, entry(mod, index), (cdiv(M, tile_m), N // block), x, q, scales)
        ref_q, ref_s = _fp8_reference(x, block, fp8_max, qtype)
        check(scales, ref_s)
        check(q.view(np.uint8), ref_q.view(np.uint8))


@case("dm_fp8_dequant")
def _fp8_dequant(mod):
    for index, qtype, dtype, M, N, block, tile_m in ((0, E4M3, BF16, 6, 64, 32, 4),
                                                      (1, E5M2, np.float32, 3, 32, 16, 2)):
        q = randn((M, N), np.float32, 50.0).astype(qtype)
        scales = RNG.uniform(0.01, 2.0, (M, N // block)).astype(np.float32)
        out = np.zeros((M, N), dtype)
        run(mod, entry(mod, index), (cdiv(M, tile_m), N // block), q, scales, out)
        ref = q.astype(np.float32) * np.repeat(scales, block, axis=1)
        check(out, ref.astype(dtype))


# ------------------------------------------------------------------------------------ RNG


def _philox(counter, key0, key1, rounds):
    """Philox-4x32 word 0 for counters (idx, 0, 0x2A, 0), in uint64 arithmetic."""
    mask = np.uint64(0xFFFFFFFF)
    c0 = counter.astype(np.uint64)
    c1 = np.zeros_like(c0)
    c2 = np.full_like(c0, 0x2A)
    c3 = np.zeros_like(c0)
    k0, k1 = np.uint64(key0), np.uint64(key1)
    for _ in range(rounds):
        p0, p1 = c0 * np.uint64(0xD2511F53), c2 * np.uint64(0xCD9E8D57)
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & mask,
                          (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & mask)
        k0, k1 = (k0 + np.uint64(0x9E3779B9)) & mask, (k1 + np.uint64(0xBB67AE85)) & mask
    return c0.astype(np.uint32)


@case("dm_philox_dropout")
def _philox_dropout(mod):
    for index, dtype, n, tile, rounds in ((0, np.float32, 70, 32, 10), (1, BF16, 40, 16, 7)):
        x = randn(n, dtype)
        out, mask = np.full(n, 9, dtype), np.full(n, 9, np.uint8)
        p, seed = np.float32(0.3), (np.uint32(0x12345678), np.uint32(0xCAFEF00D))
        run(mod, entry(mod, index), (cdiv(n, tile),), x, out, mask, seed[0], seed[1], p)
        bits = _philox(np.arange(n), seed[0], seed[1], rounds)
        u = (bits >> 8).astype(np.float32) * np.float32(1 / 16777216)
        keep = u >= p
        scale = np.float32(1) / (np.float32(1) - p)
        check(mask, keep.astype(np.uint8))
        check(out, np.where(keep, x.astype(np.float32) * scale, 0).astype(dtype))
        assert 0.1 < 1 - keep.mean() < 0.5          # the stream is not degenerate


# ----------------------------------------------------------------------------- optimizers


@case("dm_adam_step")
def _adam_step(mod):
    for index, gtype, n, tile in ((0, BF16, 70, 32), (1, np.float32, 20, 16)):
        p = randn(n)
        g = randn(n, gtype)
        m, v = randn(n, scale=0.1), np.abs(randn(n, scale=0.1))
        lr, b1, b2, eps, wd, step = 1e-2, 0.9, 0.999, 1e-8, 0.01, 3
        pf, gf, mf, vf = f64(p), f64(g), f64(m), f64(v)
        pf = pf * (1 - lr * wd)
        mf = b1 * mf + (1 - b1) * gf
        vf = b2 * vf + (1 - b2) * gf * gf
        pf = pf - lr / (1 - b1 ** step) * mf / (np.sqrt(vf / (1 - b2 ** step)) + eps)
        p_bf16 = np.zeros(n, BF16)
        run(mod, entry(mod, index), (cdiv(n, tile),), p, g, m, v, p_bf16,
            *(np.float32(s) for s in (lr, b1, b2, eps, wd)), np.int32(step))
        check(m, mf, rtol=1e-5, atol=1e-7)
        check(v, vf, rtol=1e-4, atol=1e-9)
        check(p, pf, rtol=1e-5, atol=1e-6)
        check(p_bf16, p.astype(BF16))


@case("dm_sgd_momentum")
def _sgd_momentum(mod):
    for index, ptype, nesterov, tol in ((0, np.float32, False, 1e-5), (1, np.float16, True, 1e-3)):
        p, g = randn((6, 20), ptype), randn((6, 20), ptype)
        buf = randn((6, 20), scale=0.5)
        lr, mom, damp, wd = 0.1, 0.9, 0.1, 1e-3
        gf = f64(g) + wd * f64(p)
        bf = mom * f64(buf) + (1 - damp) * gf
        step = gf + mom * bf if nesterov else bf
        ref_p = f64(p) - lr * step
        run(mod, entry(mod, index), (2, 2), p, g, buf,
            *(np.float32(s) for s in (lr, mom, damp, wd)))
        check(buf, bf, rtol=1e-5, atol=1e-6)
        check(p, ref_p, rtol=tol, atol=tol)


# ------------------------------------------------------------------------- gather/scatter


@case("dm_masked_gather_scatter")
def _masked_gather_scatter(mod):
    for index, itype, tile in ((0, np.int32, 16), (1, np.int64, 8)):
        src = randn(10)
        idx = RNG.permutation(np.arange(-5, 15)).astype(itype)   # 20 distinct, 10 out of range
        upd = randn(20)
        gathered = np.zeros(cdiv(20, tile) * tile, np.float32)[:20]
        dst = np.full(10, 42, np.float32)
        run(mod, entry(mod, index), (cdiv(20, tile),), src, idx, gathered, dst, upd,
            np.float32(-5))
        in_range = (idx >= 0) & (idx < 10)
        check(gathered, np.where(in_range, src[np.clip(idx, 0, 9)], -5).astype(np.float32))
        ref = np.full(10, 42, np.float32)
        hit = in_range & (upd > 0)
        ref[idx[hit]] = upd[hit]
        check(dst, ref)


@case("dm_index_select")
def _index_select(mod):
    for index, dtype, itype, V, D, T, tile_t, tile_d in ((0, np.float16, np.int64, 10, 32, 7, 4, 16),
                                                          (1, np.int8, np.int32, 5, 16, 9, 8, 8)):
        table = (randn((V, D), np.float32, 20)).astype(dtype)
        idx = RNG.integers(-2, V + 2, T).astype(itype)
        idx[0], idx[1] = -1, V
        out = np.full((T, D), 3, dtype)
        run(mod, entry(mod, index), (cdiv(T, tile_t), D // tile_d), table, idx, out)
        ok = (idx >= 0) & (idx < V)
        check(out, np.where(ok[:, None], table[np.clip(idx, 0, V - 1)], 0).astype(dtype))


# --------------------------------------------------------------------------------- layout


@case("dm_nchw_to_nhwc")
def _nchw_to_nhwc(mod):
    for index, dtype, shape, tile_h in ((0, np.float16, (2, 4, 5, 8), 2), (1, np.uint8, (1, 8, 4, 4), 4)):
        x = RNG.integers(0, 200, shape).astype(dtype)
        y = np.zeros((shape[0], shape[2], shape[3], shape[1]), dtype)
        run(mod, entry(mod, index), (shape[0], cdiv(shape[2], tile_h)), x, y)
        check(y, x.transpose(0, 2, 3, 1))


@case("dm_cat_split_heads")
def _cat_split_heads(mod):
    for index, atype, btype, qtype, T, CA, CB, H, DH, tile in (
            (0, np.float16, np.float32, np.float16, 6, 8, 8, 2, 8, 4),
            (1, np.int32, np.int8, BF16, 3, 16, 16, 4, 4, 2)):
        a = RNG.integers(-50, 50, (T, CA)).astype(atype)
        b = RNG.integers(-50, 50, (T, CB)).astype(btype)
        ab = np.zeros((T, CA + CB), atype)
        qkv = randn((T, 3 * H * DH), qtype)
        q, k, v = (np.zeros((H, T, DH), qtype) for _ in range(3))
        run(mod, entry(mod, index), (cdiv(T, tile),), a, b, ab, qkv, q, k, v)
        check(ab, np.concatenate([a, b.astype(atype)], axis=1))
        heads = qkv.reshape(T, 3, H, DH).transpose(1, 2, 0, 3)
        for part, got in zip(heads, (q, k, v)):
            check(got, part)


# ----------------------------------------------------------------------------- reductions


def _float_from_key(keys):
    bits = np.where(keys >= 0, keys, keys ^ 0x7FFFFFFF).astype(np.int32)
    return bits.view(np.float32)


@case("dm_reduce_mid_axes")
def _reduce_mid_axes(mod):
    for index, dtype, shape, tile_n in ((0, np.float32, (3, 4, 16), 8), (1, np.int32, (3, 8, 4), 4)):
        if dtype == np.float32:
            x = randn(shape) - 3          # mostly negative: zero padding rows must not win the max
        else:
            x = RNG.integers(-1000, -1, shape).astype(np.int32)
        B, M, N = shape
        s = np.zeros((B, 1, N), dtype)
        mx = np.full((M, N), INT32_MIN, np.int32)
        cum, rev = np.zeros(shape, dtype), np.zeros(shape, dtype)
        run(mod, entry(mod, index), (cdiv(B, 2), N // tile_n), x, s, mx, cum, rev)
        tol = 1e-5 if dtype == np.float32 else 0
        check(s, f64(x).sum(axis=1, keepdims=True), rtol=tol, atol=tol)
        check(_float_from_key(mx) if dtype == np.float32 else mx, x.max(axis=0))
        check(cum, np.cumsum(f64(x), axis=1), rtol=tol, atol=tol)
        check(rev, np.cumsum(f64(x)[:, ::-1], axis=1)[:, ::-1], rtol=tol, atol=tol)


@case("dm_reduce_4d")
def _reduce_4d(mod):
    x = RNG.uniform(0.5, 1.5, (2, 4, 6, 8)).astype(np.float16)
    x[1, 2] *= -1                         # a channel of negative values
    chan_sum = np.zeros((2, 4), np.float32)
    chan_max = np.full((2, 4), INT32_MIN, np.int32)
    prod = np.zeros((2, 4, 6, 8), np.float32)
    run(mod, entry(mod), (2, 3), x, chan_sum, chan_max, prod)
    xf = f64(x)
    check(chan_sum, xf.sum(axis=(2, 3)), rtol=1e-5)
    check(_float_from_key(chan_max), xf.max(axis=(2, 3)))
    tiles = xf.reshape(2, 4, 3, 2, 8)            # cumprod restarts in every TILE_H=2 row tile
    check(prod, np.cumprod(tiles, axis=3).reshape(2, 4, 6, 8), rtol=1e-6)


# -------------------------------------------------------------------------- integer tricks


def _random_graph(nodes, max_degree):
    degree = RNG.integers(0, max_degree + 1, nodes)
    row_ptr = np.concatenate([[0], np.cumsum(degree)]).astype(np.int32)
    cols = np.concatenate([RNG.choice(nodes, d, replace=False) for d in degree]).astype(np.int32)
    return row_ptr, cols


@case("dm_bfs_expand")
def _bfs_expand(mod):
    nodes, level = 40, 2
    row_ptr, cols = _random_graph(nodes, 7)
    frontier = RNG.choice(nodes, 6, replace=False).astype(np.int32)
    seen = set(RNG.choice(nodes, 12, replace=False).tolist()) | set(frontier.tolist())
    visited = np.zeros(2, np.uint32)
    for v in seen:
        visited[v >> 5] |= np.uint32(1 << (v & 31))
    dist = np.where(np.isin(np.arange(nodes), list(seen)), 1, -1).astype(np.int32)
    nxt, count = np.full(nodes, -1, np.int32), np.zeros(1, np.int32)
    before_dist = dist.copy()
    run(mod, entry(mod), (2,), row_ptr, cols, frontier, visited, dist, nxt, count,
        np.int32(level))
    fresh = sorted({int(c) for f in frontier for c in cols[row_ptr[f]:row_ptr[f + 1]]} - seen)
    assert fresh, "the graph must reach new nodes"
    check(count, [len(fresh)])
    check(np.sort(nxt[:len(fresh)]), np.array(fresh, np.int32))
    check(nxt[len(fresh):], np.full(nodes - len(fresh), -1, np.int32))
    ref_dist = before_dist.copy()
    ref_dist[fresh] = level + 1
    check(dist, ref_dist)
    ref_visited = np.zeros(2, np.uint32)
    for v in seen | set(fresh):
        ref_visited[v >> 5] |= np.uint32(1 << (v & 31))
    check(visited, ref_visited)


def _fmix32(h):
    h = h.astype(np.uint64)
    mask = np.uint64(0xFFFFFFFF)
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x85EBCA6B)) & mask
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(0xC2B2AE35)) & mask
    h ^= h >> np.uint64(16)
    return h.astype(np.uint32)


@case("dm_hash_partition")
def _hash_partition(mod):
    for index, ktype, n, tile in ((0, np.uint32, 70, 32), (1, np.int32, 40, 16)):
        info = np.iinfo(ktype)
        keys = RNG.integers(info.min, info.max, n, endpoint=True).astype(ktype)
        seed, buckets = np.uint32(0x9747B28C), np.uint32(7)
        hashes, bucket = np.zeros(n, np.uint32), np.full(n, -1, np.int32)
        hist, unit = np.zeros(7, np.int32), np.zeros(n, np.float32)
        run(mod, entry(mod, index), (cdiv(n, tile),), keys, hashes, bucket, hist, unit, seed,
            buckets)
        ref_h = _fmix32(keys.view(np.uint32) ^ seed)
        assert (ref_h > 0x7FFFFFFF).any()   # unsigned ops matter
        check(hashes, ref_h)
        check(bucket, (ref_h % buckets).astype(np.int32))
        check(hist, np.bincount(ref_h % buckets, minlength=7).astype(np.int32))
        check(unit, ref_h.astype(np.float32) * np.float32(2.0 ** -32))


@case("dm_radix_digits")
def _radix_digits(mod):
    for index, dtype, utype, n, tile, radix, shift in ((0, np.float32, np.uint32, 70, 32, 16, 28),
                                                      (1, np.float16, np.uint16, 40, 16, 8, 12)):
        keys = randn(n, dtype, 10.0)
        keys[:4] = [0.0, -0.0, np.inf, -np.inf]
        digits, ranks = np.full(n, -1, np.int32), np.full(n, -1, np.int32)
        hist = np.zeros(radix, np.int32)
        run(mod, entry(mod, index), (cdiv(n, tile),), keys, digits, ranks, hist, np.int32(shift))
        bits = keys.view(utype)
        top = utype(1 << (8 * bits.itemsize - 1))
        sortable = np.where(bits & top, ~bits, bits | top).astype(utype)
        ref_digit = ((sortable >> utype(shift)) & utype(radix - 1)).astype(np.int32)
        check(digits, ref_digit)
        check(hist, np.bincount(ref_digit, minlength=radix).astype(np.int32))
        ref_rank = np.array([np.sum(ref_digit[i - i % tile:i] == ref_digit[i]) for i in range(n)])
        check(ranks, ref_rank.astype(np.int32))


@case("dm_segmented_cumsum")
def _segmented_cumsum(mod):
    for index, dtype, ftype, shape, tile_r, tol in ((0, np.float32, np.int8, (3, 16), 2, 1e-5),
                                                   (1, np.int32, np.uint8, (5, 8), 4, 0)):
        x = randn(shape) if dtype == np.float32 else RNG.integers(-100, 100, shape).astype(dtype)
        starts = (RNG.random(shape) < 0.3).astype(ftype)
        y = np.zeros(shape, dtype)
        run(mod, entry(mod, index), (cdiv(shape[0], tile_r),), x, starts, y)
        ref = f64(x).copy()
        for j in range(1, shape[1]):
            ref[:, j] = np.where(starts[:, j] != 0, ref[:, j], ref[:, j - 1] + ref[:, j])
        check(y, ref, rtol=tol, atol=tol)


@case("dm_zigzag_delta")
def _zigzag_delta(mod):
    enc = RNG.integers(0, 1 << 16, (10, 16)).astype(np.uint16)
    out = np.zeros((10, 16), np.int32)
    run(mod, entry(mod), (2,), enc, out)
    u = enc.astype(np.int64)
    check(out, np.cumsum((u >> 1) ^ -(u & 1), axis=0).astype(np.int32))


@case("dm_global_argmax")
def _global_argmax(mod):
    for index, dtype, n, tile in ((0, np.float32, 100, 32), (1, BF16, 50, 16)):
        x = randn(n, dtype) - 5
        x[[n - 13, 37]] = 3                 # a tie across blocks: the smaller index wins
        best = np.full(1, np.iinfo(np.int64).min, np.int64)
        run(mod, entry(mod, index), (cdiv(n, tile),), x, best)
        check(np.int64(0x7FFFFFFF) - (best & 0xFFFFFFFF), [37])
        check((best >> 32).astype(np.int32).view(np.float32), [3.0])


@case("dm_pixel_shuffle")
def _pixel_shuffle(mod):
    for index, dtype, (n, c, h, w), r, tile_h, tile_w in ((0, np.float16, (2, 3, 4, 4), 2, 4, 8),
                                                         (1, np.float32, (1, 2, 3, 2), 3, 2, 4)):
        x = randn((n, c * r * r, h, w), dtype)
        y = np.full((n, c, h * r, w * r), 5, dtype)
        run(mod, entry(mod, index), (n * c, cdiv(h * r, tile_h), cdiv(w * r, tile_w)), x, y)
        ref = x.reshape(n, c, r, r, h, w).transpose(0, 1, 4, 2, 5, 3).reshape(n, c, h * r, w * r)
        check(y, ref)


# ----------------------------------------------------------------------- ragged and paged


@case("dm_varlen_pad_pool")
def _varlen_pad_pool(mod):
    for index, dtype, itype, pdtype, D, tol in ((0, np.float16, np.int32, np.float32, 16, 1e-5),
                                               (1, BF16, np.int64, BF16, 8, 1e-2)):
        lengths = np.array([3, 0, 9, 5])
        cu = np.concatenate([[0], np.cumsum(lengths)]).astype(itype)
        x = randn((int(cu[-1]), D), dtype)
        padded = np.full((4, 9, D), 7, dtype)
        pooled = np.full((4, D), 7, pdtype)
        run(mod, entry(mod, index), (4,), x, cu, padded, pooled)
        ref = np.zeros((4, 9, D), dtype)
        for b in range(4):
            ref[b, :lengths[b]] = x[cu[b]:cu[b + 1]]
        check(padded, ref)
        check(pooled, f64(ref).sum(axis=1) / np.maximum(lengths, 1)[:, None], rtol=tol, atol=tol)


@case("dm_paged_rows_advanced")
def _paged_rows_advanced(mod):
    # Slots written and blocks read never overlap, so block order cannot matter.
    for index, dtype, itype, bs, D, tile_d, blocks, table, slots in (
            (0, np.float16, np.int32, 4, 32, 16, 6, [4, 2, 3], [21, 7, 22, 1]),
            (1, np.float32, np.int64, 8, 16, 8, 4, [3, 1], [0, 17, 5, 16, 23, 2, 20, 6])):
        cache = randn((blocks * bs, D), dtype)
        new = randn((bs, D), dtype)
        table, slots = np.array(table, itype), np.array(slots, itype)
        out = np.zeros((len(table) * bs, D), dtype)
        ref_out = cache.reshape(blocks, bs, D)[table].reshape(-1, D).copy()
        ref_cache = cache.copy()
        ref_cache[slots] = new
        run(mod, entry(mod, index), (len(table), D // tile_d), cache, table, new, slots, out)
        check(cache, ref_cache)
        check(out, ref_out)



@case("dm_scatter_reduce")
def _scatter_reduce(mod):
    for index, itype, tile in ((0, np.int32, 16), (1, np.int64, 32)):
        n, buckets = 50, 7
        values = randn(n)
        idx = RNG.integers(-2, buckets + 2, n).astype(itype)
        sums, counts = np.zeros(buckets, np.float64), np.zeros(buckets, np.int64)
        first = np.full(buckets, np.iinfo(np.int32).max, np.int32)
        max_bits = np.zeros(buckets, np.uint32)
        run(mod, entry(mod, index), (cdiv(n, tile),), values, idx, sums, counts, first, max_bits)
        ok = (idx >= 0) & (idx < buckets)
        ref_sum = np.zeros(buckets)
        np.add.at(ref_sum, idx[ok], f64(values[ok]))
        check(sums, ref_sum, rtol=1e-12, atol=1e-12)
        check(counts, np.bincount(idx[ok], minlength=buckets))
        ref_first = np.full(buckets, np.iinfo(np.int32).max, np.int32)
        ref_max = np.zeros(buckets, np.float32)
        for p in np.nonzero(ok)[0][::-1]:
            ref_first[idx[p]] = p
            ref_max[idx[p]] = max(ref_max[idx[p]], abs(values[p]))
        check(first, ref_first)
        check(max_bits.view(np.float32), ref_max)


PARAMS = [(name, version) for name in sorted(CASES) for version in versions(name)]


# Each case runs against its numpy reference in tests/test_interp_batch.py, batched and one block
# at a time (a test here that ran it once more, batched, would repeat that check).
