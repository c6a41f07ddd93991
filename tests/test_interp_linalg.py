"""The linalg fixture kernels (fixtures/kernels/linalg.py) on the interpreter, against numpy
references written from the kernels' Python source. Problem sizes are deliberately ragged (M, N, K
not multiples of the tile sizes) so padding, masked stores and masked atomics are exercised.

Tolerances follow tests/test_interp_fixtures.py: exact for integer and data-movement kernels, f32
chains rtol 1e-5, f16 / bf16 outputs about one unit in the last place of the output dtype.
runtime/tests/test_rt_sim_linalg.py runs the same cases on the PTX emulator.
"""
import ml_dtypes
import numpy as np
import pytest

from fixture_cases import case_registry, f64, cdiv, run
from test_interp_fixtures import check, entry, module, versions

RNG = np.random.default_rng(20260101)
CASES, case = case_registry()


def uniform(shape, dtype, low=-1.0, high=1.0):
    return RNG.uniform(low, high, size=shape).astype(dtype)


def tf32(a):
    """Round f32 to tf32 (10 mantissa bits, nearest even), as the mma operand conversion does."""
    bits = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0xFFF + ((bits >> 13) & 1)) >> 13) << 13
    return rounded.astype(np.uint32).view(np.float32).astype(np.float64)


# ---------------------------------------------------------------------------------- GEMMs


@case("la_gemm_bias_relu")
def _gemm_bias_relu(mod):
    m, n, k, tm, tn = 80, 64, 40, 32, 32            # 3 x 2 tiles; ragged M and K
    a, b = uniform((m, k), np.float16), uniform((k, n), np.float16)
    bias = uniform(n, np.float16, -0.5, 0.5)
    c = np.zeros((m, n), np.float16)
    run(mod, entry(mod), (cdiv(m, tm) * cdiv(n, tn),), a, b, bias, c)
    expected = np.maximum(f64(a) @ f64(b) + f64(bias)[None, :], 0.0)
    check(c, expected, rtol=1e-2, atol=1e-3)


@case("la_gemm_alpha_beta")
def _gemm_alpha_beta(mod):
    m, n, k = 32, 48, 20
    alpha, beta = np.float32(1.5), np.float32(-0.75)
    # entry 0: f32 operands rounded to tf32, f32 accumulator and output
    a, b, c0 = uniform((m, k), np.float32), uniform((k, n), np.float32), uniform((m, n), np.float32)
    c = c0.copy()
    run(mod, entry(mod, 0), (2, 3), a, b, c, alpha, beta)
    check(c, 1.5 * (tf32(a) @ tf32(b)) - 0.75 * f64(c0), rtol=1e-5, atol=1e-5)
    # entry 1: bf16 in and out
    bf = ml_dtypes.bfloat16
    a, b, c0 = uniform((m, k), bf), uniform((k, n), bf), uniform((m, n), bf)
    c = c0.copy()
    run(mod, entry(mod, 1), (2, 3), a, b, c, alpha, beta)
    check(c, 1.5 * (f64(a) @ f64(b)) - 0.75 * f64(c0), rtol=1e-2, atol=1e-2)


@case("la_gemm_int8_requant")
def _gemm_int8_requant(mod):
    m, n, k = 32, 32, 50                            # K_TILES=2 x TK=32 covers K=50 with padding
    a = RNG.integers(-100, 101, (m, k)).astype(np.int8)
    b = RNG.integers(-100, 101, (k, n)).astype(np.int8)
    out = np.zeros((m, n), np.int8)
    scale, zero_point = np.float32(1 / 150), np.int32(-3)
    run(mod, entry(mod), (2, 2), a, b, out, scale, zero_point)
    acc = a.astype(np.int64) @ b.astype(np.int64)
    scaled = acc.astype(np.float32) * scale
    q = np.floor(scaled + np.float32(0.5)).astype(np.int64) + zero_point
    expected = np.clip(q, -128, 127).astype(np.int8)
    assert (q < -128).any() and (q > 127).any(), "inputs should saturate on both sides"
    check(out, expected)


@case("la_gemm_fp8_scaled")
def _gemm_fp8_scaled(mod):
    m, n, k = 32, 32, 80
    e4m3 = ml_dtypes.float8_e4m3fn
    a = uniform((m, k), np.float32, -2, 2).astype(e4m3)
    b = uniform((k, n), np.float32, -2, 2).astype(e4m3)
    c = np.zeros((m, n), ml_dtypes.bfloat16)
    run(mod, entry(mod), (2, 2), a, b, c, np.float32(0.25), np.float32(3.0))
    check(c, (f64(a) @ f64(b)) * 0.75, rtol=8e-3, atol=1e-6)


@case("la_bmm_transposed_b")
def _bmm_transposed_b(mod):
    batch, m, n, k = 3, 32, 16, 24
    a, b = uniform((batch, m, k), np.float16), uniform((batch, n, k), np.float16)
    c = np.zeros((batch, m, n), np.float32)
    run(mod, entry(mod), (2, 1, batch), a, b, c)
    check(c, f64(a) @ f64(b).transpose(0, 2, 1), rtol=1e-5, atol=1e-6)


@case("la_bmm_aligned_tile")
def _bmm_aligned_tile(mod):
    batch, m, n, k = 2, 128, 128, 96                # 2 x 1 output tiles a batch, K ragged
    a, b = uniform((batch, m, k), np.float16), uniform((batch, n, k), np.float16)
    c = np.zeros((batch, m, n), np.float32)
    run(mod, entry(mod), (2, 1, batch), a, b, c)
    check(c, f64(a) @ f64(b).transpose(0, 2, 1), rtol=1e-5, atol=1e-5)


@case("la_gemm_split_k")
def _gemm_split_k(mod):
    m, n, k, t, splits = 40, 32, 80, 16, 3          # 5 K tiles over 3 splits: 2 + 2 + 1
    a, b = uniform((m, k), np.float16), uniform((k, n), np.float16)
    c = np.zeros((m, n), np.float32)
    run(mod, entry(mod), (cdiv(m, t), cdiv(n, t), splits), a, b, c)
    check(c, f64(a) @ f64(b), rtol=1e-5, atol=1e-5)


@case("la_gemm_persistent")
def _gemm_persistent(mod):
    m, n, k = 48, 32, 40                            # 6 output tiles over 4 blocks
    bf = ml_dtypes.bfloat16
    a, b = uniform((m, k), bf), uniform((k, n), bf)
    c = np.full((m, n), np.nan, np.float32)         # every element must be written
    run(mod, entry(mod, 0), (4,), a, b, c)
    check(c, f64(a) @ f64(b), rtol=1e-5, atol=1e-5)
    # entry 1: production tiles (128 x 128, K steps of 64) on contiguous f16 arrays: 4 output
    # tiles over 3 blocks, 6 K steps each (a persistent K loop's stages all filled)
    m, n, k = 256, 256, 384
    a, b = uniform((m, k), np.float16), uniform((k, n), np.float16)
    c = np.full((m, n), np.nan, np.float16)
    run(mod, entry(mod, 1), (3,), a, b, c)
    check(c, f64(a) @ f64(b), rtol=2e-3, atol=2e-3)


# ------------------------------------------------------------------------ data movement


@case("la_transpose")
def _transpose(mod):
    # entry 2: contiguous aligned arrays (extents multiples of 16), ragged against 64x64 tiles
    for index, dtype, shape, grid in ((0, np.float32, (20, 13), (2, 2)),
                                      (1, np.float16, (9, 30), (2, 2)),
                                      (2, np.float16, (80, 144), (2, 3))):
        x = uniform(shape, dtype)
        y = np.zeros(shape[::-1], dtype)
        run(mod, entry(mod, index), grid, x, y)
        check(y, x.T)


# ------------------------------------------------------------------------------- GEMV


@case("la_gemv")
def _gemv(mod):
    m, k = 40, 70
    a, x = uniform((m, k), np.float16), uniform(k, np.float16)
    y = np.zeros(m, np.float32)
    run(mod, entry(mod), (cdiv(m, 16),), a, x, y, np.float32(-2.0))
    check(y, -2.0 * (f64(a) @ f64(x)), rtol=1e-5, atol=1e-5)


@case("la_gemv_t")
def _gemv_t(mod):
    k, n = 20, 40
    a, x = uniform((k, n), np.float32), uniform(k, np.float32)
    y = np.zeros(n, np.float32)
    run(mod, entry(mod), (cdiv(n, 16),), a, x, y)
    check(y, f64(a).T @ f64(x), rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------- histogram and scans


@case("la_histogram")
def _histogram(mod):
    lo, hi, bins = np.float32(-1.5), np.float32(2.5), 16
    values = uniform(200, np.float32, -2.5, 3.5)    # some below lo, some at or above hi
    values[:3] = (lo, hi, np.nextafter(hi, np.float32(0)))
    hist = np.zeros(bins, np.int32)
    run(mod, entry(mod), (cdiv(values.size, 64),), values, hist, lo, hi)
    inside = values[(values >= lo) & (values < hi)]
    index = ((inside - lo) * (np.float32(bins) / (hi - lo))).astype(np.int32)
    expected = np.bincount(np.clip(index, 0, bins - 1), minlength=bins).astype(np.int32)
    check(hist, expected)


@case("la_cumsum_rows")
def _cumsum_rows(mod):
    x = uniform((8, 40), np.float16)
    y = np.zeros((8, 40), np.float32)
    run(mod, entry(mod), (2,), x, y)
    check(y, np.cumsum(f64(x), axis=1), rtol=1e-5, atol=1e-5)


@case("la_cumsum_exclusive")
def _cumsum_exclusive(mod):
    n, tile = 100, 32
    x = RNG.integers(-1000, 1000, n).astype(np.int32)
    y = np.zeros(n, np.int32)
    totals = np.zeros(cdiv(n, tile), np.int32)
    run(mod, entry(mod), (cdiv(n, tile),), x, y, totals)
    padded = np.zeros(cdiv(n, tile) * tile, np.int64)
    padded[:n] = x
    tiles = padded.reshape(-1, tile)
    exclusive = np.cumsum(tiles, axis=1) - tiles
    check(y, exclusive.reshape(-1)[:n].astype(np.int32))
    check(totals, tiles.sum(axis=1).astype(np.int32))


@case("la_argmax_rows")
def _argmax_rows(mod):
    x = uniform((8, 45), np.float32)
    x[0, 3] = x[0, 20] = 5.0                        # tie across column tiles: the first wins
    x[1, 5] = x[1, 7] = 5.0                         # tie inside one tile
    x[2, 44] = 6.0                                  # maximum in the ragged last tile
    x[3, 17] = x[3, 40] = -5.0                      # argmin tie across tiles
    imax, imin = np.zeros(8, np.int32), np.zeros(8, np.int32)
    run(mod, entry(mod), (2,), x, imax, imin)
    check(imax, np.argmax(x, axis=1).astype(np.int32))
    check(imin, np.argmin(x, axis=1).astype(np.int32))


# ---------------------------------------------------------------------------- stencils


@case("la_conv1d")
def _conv1d(mod):
    n, taps = 70, 5
    x, w = uniform(n, np.float32), uniform(taps, np.float32)
    y = np.zeros(n, np.float32)
    run(mod, entry(mod), (cdiv(n, 32),), x, w, y)
    padded = np.concatenate([np.zeros(2), f64(x), np.zeros(2)])
    expected = sum(f64(w)[k] * padded[k:k + n] for k in range(taps))
    check(y, expected, rtol=1e-5, atol=1e-6)


@case("la_stencil_2d")
def _stencil_2d(mod):
    m, n = 12, 20
    x = uniform((m, n), np.float32)
    y = np.zeros((m, n), np.float32)
    run(mod, entry(mod), (2, 3), x, y, np.float32(0.5), np.float32(0.125))
    p = np.zeros((m + 2, n + 2))
    p[1:-1, 1:-1] = x
    around = p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:]
    check(y, 0.5 * f64(x) + 0.125 * around, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------ strides and scalar params


@case("la_column_norms_strided")
def _column_norms_strided(mod):
    m, n = 20, 12
    for index, dtype in ((0, np.float32), (1, np.float16)):
        # column-major (transposed) storage: strides (1, m) in elements
        storage = uniform((n, m), dtype)
        a = storage.T
        norms = np.zeros(n, np.float32)
        run(mod, entry(mod, index), (cdiv(n, 8),), a, norms)
        check(norms, np.sqrt((f64(a) ** 2).sum(axis=0)), rtol=1e-5)
    # a row-sliced view (dynamic strides only): every other row of a taller matrix
    tall = uniform((2 * m, n), np.float32)
    norms = np.zeros(n, np.float32)
    run(mod, entry(mod, 0), (cdiv(n, 8),), tall[::2], norms)
    check(norms, np.sqrt((f64(tall[::2]) ** 2).sum(axis=0)), rtol=1e-5)


@case("la_axpby_mixed_scalars")
def _axpby_mixed(mod):
    n, offset = 100, 5
    x, y = uniform(n, np.float32, -2, 2), uniform(n, np.float32, -2, 2)
    for use_abs in (False, True):
        out = np.full(n, 7.0, np.float32)
        run(mod, entry(mod), (4,), x, y, out, np.float32(0.5), np.float64(-1.25), np.int32(-3),
            np.int64(offset), np.uint16(2), use_abs)
        r = (np.float32(0.5) * x[offset:] +
             (np.float64(-1.25) * y[offset:].astype(np.float64)).astype(np.float32))
        r = r * np.float32(4) + np.float32(-3)
        if use_abs:
            r = np.abs(r)
        expected = np.concatenate([np.full(offset, 7.0, np.float32), r])
        check(out, expected, rtol=1e-6)


# -------------------------------------------------------------------- second batch


@case("la_gemm_tn_f16_acc")
def _gemm_tn_f16_acc(mod):
    m, n, k = 32, 32, 40
    at, b = uniform((k, m), np.float16, -0.5, 0.5), uniform((k, n), np.float16, -0.5, 0.5)
    c = np.zeros((m, n), np.float16)
    run(mod, entry(mod), (2, 2), at, b, c)
    # f16 accumulator: three rounded partial sums, each within an f16 ulp of the exact value
    check(c, f64(at).T @ f64(b), rtol=1e-2, atol=4e-3)


@case("la_syrk_lower")
def _syrk_lower(mod):
    m, k = 40, 20
    a = uniform((m, k), np.float32)
    c = np.full((m, m), 9.0, np.float32)            # blocks above the diagonal stay untouched
    run(mod, entry(mod), (3, 3), a, c)
    expected = np.tril(f64(a) @ f64(a).T)
    t = 16
    for bm in range(3):
        for bn in range(bm + 1, 3):
            expected[bm * t:(bm + 1) * t, bn * t:(bn + 1) * t] = 9.0
    check(c, expected, rtol=1e-5, atol=1e-5)


@case("la_argmax_tuple_reduce")
def _argmax_tuple_reduce(mod):
    x = uniform((8, 27), np.float32)                # 27 columns: the tile is padded with -inf
    x[0, 4] = x[0, 9] = 3.0                         # tie: the smaller column wins
    values = np.zeros((8, 1), np.float32)
    indices = np.zeros((8, 1), np.int32)
    run(mod, entry(mod), (2,), x, values, indices)
    check(values[:, 0], x.max(axis=1))
    check(indices[:, 0], np.argmax(x, axis=1).astype(np.int32))


@case("la_segmented_cumsum")
def _segmented_cumsum(mod):
    n, tile = 75, 32
    x = uniform(n, np.float32)
    flags = (RNG.random(n) < 0.15).astype(np.int32)
    y = np.zeros(n, np.float32)
    run(mod, entry(mod), (cdiv(n, tile),), x, flags, y)
    expected = np.zeros(n)
    for start in range(0, n, tile):                 # each tile scans on its own
        running = 0.0
        for j in range(start, min(start + tile, n)):
            running = x[j] if (flags[j] or j == start) else running + x[j]
            expected[j] = running
    check(y, expected, rtol=1e-5, atol=1e-6)


@case("la_trsv_lower")
def _trsv_lower(mod):
    systems, n, tile = 3, 6, 8                      # n < tile: the tail of the tile stays 0
    lower = np.tril(uniform((systems, n, n), np.float32, -0.5, 0.5))
    lower[:, np.arange(n), np.arange(n)] = uniform((systems, n), np.float32, 1.0, 2.0)
    b = uniform((systems, n), np.float32)
    x = np.full((systems, n), np.nan, np.float32)
    run(mod, entry(mod), (systems,), lower, b, x)
    expected = np.stack([np.linalg.solve(f64(lower[s]), f64(b[s])) for s in range(systems)])
    check(x, expected, rtol=1e-5, atol=1e-5)


@case("la_dot_amax")
def _dot_amax(mod):
    n = 300
    x, y = uniform(n, np.float16, -2, 2), uniform(n, np.float16)
    result = np.zeros(1, np.float32)
    amax = np.zeros(1, np.int32)
    run(mod, entry(mod), (cdiv(n, 64),), x, y, result, amax)
    check(result, [f64(x) @ f64(y)], rtol=1e-5, atol=1e-5)
    check(amax.view(np.float32), [np.abs(f64(x)).max()])


@case("la_histogram_u8")
def _histogram_u8(mod):
    pixels = RNG.integers(0, 256, 1000).astype(np.uint8)
    pixels[:20] = 255                               # high bins: unsigned extension matters
    hist = np.zeros(256, np.int32)
    run(mod, entry(mod), (cdiv(pixels.size, 64),), pixels, hist)
    check(hist, np.bincount(pixels, minlength=256).astype(np.int32))


@case("la_embedding_bag")
def _embedding_bag(mod):
    vocab, dim, rows, bag = 50, 16, 6, 4
    table = uniform((vocab, dim), ml_dtypes.bfloat16)
    ids = RNG.integers(0, vocab, (rows, bag)).astype(np.int64)
    ids[1, 2:] = -1                                 # padding slots
    ids[4, 0] = vocab - 1
    weights = uniform((rows, bag), np.float32)
    out = np.zeros((rows, dim), np.float32)
    run(mod, entry(mod), (rows,), table, ids, weights, out)
    rows_f = np.where(ids[..., None] >= 0, f64(table)[np.maximum(ids, 0)], 0.0)
    check(out, (rows_f * f64(weights)[..., None]).sum(axis=1), rtol=1e-5, atol=1e-6)


@case("la_newton_rsqrt")
def _newton_rsqrt(mod):
    n = 70
    x = uniform(n, np.float32, 0.0, 1.5)            # 1 + x in [1, 2.5]: converges from 0.5
    y = np.zeros(n, np.float32)
    run(mod, entry(mod), (cdiv(n, 32),), x, y)
    check(y, 1 / np.sqrt(1.0 + f64(x)), rtol=1e-6)


def _gemm_64x128_tiles(mod, m, n, k):
    """relu(A @ B + bias) in f16 over 64x128 output tiles."""
    a, b = uniform((m, k), np.float16), uniform((k, n), np.float16)
    bias = uniform(n, np.float16, -0.5, 0.5)
    c = np.zeros((m, n), np.float16)
    run(mod, entry(mod), (cdiv(m, 64) * cdiv(n, 128),), a, b, bias, c)
    expected = np.maximum(f64(a) @ f64(b) + f64(bias)[None, :], 0.0)
    check(c, expected, rtol=1e-2, atol=1e-3)


@case("la_gemm_large_tile")
def _gemm_large_tile(mod):
    _gemm_64x128_tiles(mod, 64, 128, 100)           # one output tile, ragged K over two K tiles


@case("la_gemm_aligned_tile")
def _gemm_aligned_tile(mod):
    _gemm_64x128_tiles(mod, 128, 256, 96)           # 2x2 output tiles, K ragged over the tile


# ------------------------------------------------------------------------------- tests

PARAMS = [(name, version) for name in sorted(CASES) for version in versions(name)]


# Each case runs against its numpy reference in tests/test_interp_batch.py, batched and one block
# at a time (a test here that ran it once more, batched, would repeat that check).


def test_every_linalg_fixture_has_a_reference():
    from test_interp_fixtures import MANIFEST
    family = {name for name in MANIFEST["fixtures"] if name.startswith("la_")}
    assert family == set(CASES)
