"""Run the `features` fixture kernels (fixtures/kernels/features.py) on the interpreter and
compare with numpy references written here from the kernels' Python source.

Tolerances follow tests/test_interp_fixtures.py: exact for integer, data-movement and
comparison kernels; f32 chains rtol 1e-5; f16 / bf16 results 1e-2 / 4e-2.  Inputs are small
so the PTX emulator can run the same cases (runtime/tests/test_rt_sim_families.py swaps `run`
for the emulator's).  Checks of interpreter-only behaviour (undefined-behaviour detection)
call `interp_run`, which the emulator test leaves alone.
"""
import io

import ml_dtypes
import numpy as np
import pytest

from fixture_cases import case_registry, f64, cdiv, run
from test_interp_fixtures import check, entry, module, versions
from tilebc.interp import KernelAssertionError, UndefinedError
from tilebc.interp import run as interp_run

BF16 = ml_dtypes.bfloat16
RNG = np.random.default_rng(20240917)
CASES, case = case_registry()
GELU_C = np.sqrt(2.0 / np.pi)


def randn(shape, dtype=np.float32, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(dtype)


def activation(x, act):
    if act == 1:
        return 0.5 * x * (1.0 + np.tanh(GELU_C * (x + 0.044715 * x ** 3)))
    if act == 2:
        return x / (1.0 + np.exp(-x))
    if act == 3:
        return np.maximum(x, 0.0)
    return x


# ------------------------------------------------------------------- kernel options


@case("ft_matmul_grouped")
def _matmul_grouped(mod):
    # (entry, in dtype, out dtype, M, K, N, TM, TN, act, tolerance); M, N not multiples of
    # the tiles so the grouped order's last group is short and edge tiles are partial.
    for index, dtype, out_dtype, m, k, n, tm, tn, act, tol in (
            (0, np.float16, np.float16, 40, 48, 36, 16, 16, 1, 1e-2),
            (1, BF16, np.float32, 40, 40, 20, 32, 16, 2, 1e-5)):
        a, b = randn((m, k), dtype), randn((k, n), dtype)
        c = np.full((m, n), 3, out_dtype)
        run(mod, entry(mod, index), (cdiv(m, tm) * cdiv(n, tn),), a, b, c)
        check(c, activation(f64(a) @ f64(b), act), rtol=tol, atol=tol)


@case("ft_gated_act")
def _gated_act(mod):
    for index, dtype, act, tm, tn, tol in ((0, np.float16, 1, 4, 32, 1e-2),
                                           (1, np.float32, 2, 8, 16, 1e-5),
                                           (2, BF16, 3, 4, 16, 4e-2)):
        gate, up = randn((10, 40), dtype, 2.0), randn((10, 40), dtype)
        out = np.zeros((10, 40), dtype)
        run(mod, entry(mod, index), (cdiv(10, tm), cdiv(40, tn)), gate, up, out)
        ref = np.clip(activation(f64(gate), act) * f64(up), -60000.0, 60000.0)
        check(out, ref, rtol=tol, atol=tol)


# --------------------------------------------------------------------- control flow


@case("ft_first_above")
def _first_above(mod):
    m, n, tile, thresh = 5, 40, 16, np.float32(2.5)
    x = RNG.uniform(-1, 2, (m, n)).astype(np.float32)
    x[0, 5] = x[0, 30] = 3        # found in the first tile (the later hit is ignored)
    x[1, 37] = 4                  # only in the last, partial tile
    x[3, 20] = 2.5                # equal is not above: row 3 has no hit
    x[4, 17] = 9
    out, visited = np.full(m + 1, -7, np.int32), np.full(m + 1, -7, np.int32)
    # 4 blocks of 2 rows: block 2 returns at row 5, block 3 at once; the canary at
    # position m (past the rows) must stay.
    run(mod, entry(mod), (4,), x, out[:m], visited[:m], thresh)
    above = x > thresh
    ref = np.where(above.any(axis=1), above.argmax(axis=1), -1)
    ref_visited = np.where(ref >= 0, ref // tile + 1, cdiv(n, tile))
    check(out, np.append(ref, -7).astype(np.int32))
    check(visited, np.append(ref_visited, -7).astype(np.int32))


@case("ft_newton_rsqrt")
def _newton_rsqrt(mod):
    x = RNG.uniform(0.5, 4.0, 70).astype(np.float32)
    y, iters = np.zeros(70, np.float32), np.zeros(3, np.int32)
    tol = np.float32(1e-6)
    run(mod, entry(mod), (3,), x, y, iters, tol)
    check(y, 1 / np.sqrt(f64(x)), rtol=1e-6)
    # The iteration count per tile, replayed in f32 with the kernel's operation order.
    ref_iters = []
    for start in range(0, 96, 32):
        xt = np.ones(32, np.float32)
        part = x[start:start + 32]
        xt[:len(part)] = part
        yt = np.float32(1) / (np.float32(1) + np.float32(0.5) * xt)
        it = 0
        while it < 20:
            nxt = yt * (np.float32(1.5) - np.float32(0.5) * xt * yt * yt)
            err = np.abs(nxt - yt).max()
            yt, it = nxt, it + 1
            if err < tol:
                break
        ref_iters.append(it)
    check(iters, np.array(ref_iters, np.int32))
    assert all(2 < it < 20 for it in ref_iters)  # the loop really iterates and converges


# ----------------------------------------------------------------- tuple parameters


@case("ft_weighted_sum3")
def _weighted_sum3(mod):
    xs = (randn(70, np.float16), randn(70, np.float32), randn(70, BF16))
    weights = (np.float32(1.5), np.int32(-2), np.float64(0.25), np.float32(0.125))
    y = np.zeros(70, np.float32)
    run(mod, entry(mod, 0), (3,), xs, weights, y)
    ref = sum(f64(x) * float(w) for x, w in zip(xs, weights[:3])) + 0.125
    check(y, ref, rtol=1e-6, atol=1e-6)

    xs = tuple(randn(40) for _ in range(3))
    weights = tuple(np.float32(w) for w in (0.5, -1.0, 2.0, 100.0))
    y = np.zeros(40, np.float16)
    run(mod, entry(mod, 1), (3,), xs, weights, y)
    ref = sum(f64(x) * float(w) for x, w in zip(xs, weights[:3]))   # no bias
    check(y, ref, rtol=1e-2, atol=1e-2)


# ------------------------------------------------------------- 3-D / 4-D, 3-D grids


@case("ft_bhsd_to_bshd")
def _bhsd_to_bshd(mod):
    x = randn((2, 3, 20, 16), np.float16)
    y = np.zeros((2, 20, 3, 16), np.float16)
    run(mod, entry(mod), (3, 3, 2), x, y)
    check(y, x.transpose(0, 2, 1, 3))


@case("ft_batched_gemv")
def _batched_gemv(mod):
    a, x = randn((3, 20, 40)), randn((3, 40), np.float16)
    y = np.zeros((3, 20), np.float32)
    # Two blocks along z for three batches: block z=0 takes batches 0 and 2.
    run(mod, entry(mod), (3, 1, 2), a, x, y)
    check(y, np.einsum("bmk,bk->bm", f64(a), f64(x)), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ int64 indexing


@case("ft_gather_rows_i64")
def _gather_rows_i64(mod):
    src = randn((10, 40))
    base = 2 ** 40 + 12345                      # ids only fit in 64 bits
    rows = np.array([3, 0, 9, 9, 4, 7], np.int64)
    dst = np.zeros((6, 40), np.float32)
    run(mod, entry(mod), (6,), src, rows + base, dst, np.int64(base))
    check(dst, src[rows])


# -------------------------------------------------------------- constant layouts


@case("ft_transpose_colmajor")
def _transpose_colmajor(mod):
    x = np.asfortranarray(randn((24, 16)))      # strides (1, 24) elements, as compiled
    y, colsum = np.zeros((16, 24), np.float32), np.zeros(16, np.float32)
    run(mod, entry(mod), (3, 4), x, y, colsum)
    check(y, x.T)
    check(colsum, f64(x).sum(axis=0), rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------- numerics


@case("ft_mixed_precision")
def _mixed_precision(mod):
    h, bf, f, d = (randn(40, np.float16, 4.0), randn(40, BF16, 4.0), randn(40, np.float32, 4.0),
                   randn(40, np.float64, 4.0))
    out64, out32 = np.zeros(40, np.float64), np.zeros(40, np.float32)
    run(mod, entry(mod), (2,), h, bf, f, d, out64, out32)
    # h*f in f32; bf*d in f64; h/3.0 stays f16 (a Python float takes the tile's dtype).
    third = (f64(h) / 3.0).astype(np.float16)
    ref = f64(h.astype(np.float32) * f) + f64(bf) * d - f64(third)
    check(out64, ref, rtol=1e-15, atol=1e-15)
    hf = h.astype(np.float32)
    lo, hi = np.minimum(f, hf), np.maximum(f, hf)
    check(out32, np.where(ref > hi, hi, np.where(ref < lo, lo, ref.astype(np.float32))))


@case("ft_nan_compare")
def _nan_compare(mod):
    special = [np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, 11.0, -11.0, 1.5, -2.5]
    for index, dtype in ((0, np.float32), (1, np.float16)):
        x = np.concatenate([special, RNG.uniform(-20, 20, 10)]).astype(dtype)
        y, flags = np.zeros(20, dtype), np.full(20, -1, np.int32)
        fill = np.float32(-0.5)
        run(mod, entry(mod, index), (2,), x, y, flags, fill)
        ref_flags = ((x > 0).astype(np.int32) | ((x >= 0).astype(np.int32) << 1) |
                     ((x == x).astype(np.int32) << 2) | ((x != x).astype(np.int32) << 3) |
                     (np.isnan(x).astype(np.int32) << 4))
        check(flags, ref_flags)
        with np.errstate(invalid="ignore"):
            ref = np.where(np.isnan(x), fill, np.clip(f64(x), -10, 10)).astype(dtype)
        check(y, ref)


def _floor_div_mod(a, b):
    # numpy's // and % on integers already follow Python's floor semantics.
    return a // b, a % b


@case("ft_int_divmod")
def _int_divmod(mod):
    for index, dtype in ((0, np.int32), (1, np.int64)):
        info = np.iinfo(dtype)
        a = RNG.integers(-1000, 1000, 40).astype(dtype)
        b = RNG.integers(1, 10, 40).astype(dtype) * RNG.choice([-1, 1], 40).astype(dtype)
        a[:6] = [info.min, info.min, info.max, -7, 7, -1]
        b[:6] = [2, -3, -1, 2, -2, 7]
        q, r, s = (np.full(40, 5, dtype) for _ in range(3))
        run(mod, entry(mod, index), (2,), a, b, q, r, s)
        ref_q, ref_r = _floor_div_mod(a, b)
        check(q, ref_q)
        check(r, ref_r)
        sh = np.concatenate([np.arange(32), np.arange(8)]).astype(dtype)  # lane within tile
        check(s, np.left_shift(a, sh) ^ np.right_shift(a, sh))


@case("ft_shift_scalar")
def _shift_scalar(mod):
    for index, dtype in ((0, np.int32), (1, np.uint32)):
        x = RNG.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, 16, dtype=dtype)
        for amount in (0, 1, 13, 31):
            y = np.zeros(16, dtype)
            run(mod, entry(mod, index), (1,), x, y, dtype(amount))
            check(y, np.left_shift(x, dtype(amount)) | np.right_shift(x, dtype(amount)))
        # A shift by the bit width or more is undefined; the checked interpreter says so.
        with pytest.raises(UndefinedError, match="shi"):
            interp_run(mod, entry(mod, index), (1,), x, np.zeros(16, dtype), dtype(32),
                       check_undefined=True)


# ---------------------------------------------------------------------- debugging


@case("ft_checked_scale")
def _checked_scale(mod):
    x = RNG.integers(-50, 50, 40).astype(np.float32)   # integral: sums print exactly
    y = np.zeros(40, np.float32)
    stream = io.StringIO()
    run(mod, entry(mod), (3,), x, y, np.int32(3), np.float32(0.5), print_stream=stream)
    check(y, x * np.float32(0.5))
    lines = stream.getvalue().splitlines()
    tiles = [np.concatenate([x[i:i + 16], np.zeros(max(0, i + 16 - 40), np.float32)])
             for i in range(0, 48, 16)]
    expected = ["blk %3d of %d: n=%d sum=%.3f max=%e hex=%x"
                % (i, 3, 3 * 10 ** 9, t.sum(), t.max(), 3) for i, t in enumerate(tiles)]
    assert sorted(lines) == expected
    with pytest.raises(KernelAssertionError, match="n must be positive"):
        run(mod, entry(mod), (3,), x, y, np.int32(0), np.float32(0.5), print_stream=stream)
    x[33] = -2000
    with pytest.raises(KernelAssertionError, match="input below -1000"):
        run(mod, entry(mod), (3,), x, y, np.int32(3), np.float32(0.5), print_stream=stream)


# -------------------------------------------------------------- odd tile shapes


def _tiles(a, tm, tn):
    """Zero-pad a 2-D array to whole (tm, tn) tiles (the kernel's ZERO padding)."""
    out = np.zeros((cdiv(a.shape[0], tm) * tm, cdiv(a.shape[1], tn) * tn))
    out[:a.shape[0], :a.shape[1]] = a
    return out


@case("ft_outer_normalize")
def _outer_normalize(mod):
    m, n = 10, 40
    x, rowv, colv = randn((m, n)), randn((1, n)), randn((m, 1))
    for index, tm, tn in ((0, 4, 32), (1, 16, 2)):
        y = np.zeros((m, n), np.float32)
        run(mod, entry(mod, index), (cdiv(m, tm), cdiv(n, tn)), x, rowv, colv, y)
        # Per-tile max/min include the padded lanes, whose value is x*r + c with zeros.
        t = _tiles(f64(x), tm, tn) * _tiles(f64(rowv), 1, tn)[:1] + _tiles(f64(colv), tm, 1)[:, :1]
        ref = np.empty_like(t)
        for i in range(0, t.shape[0], tm):
            for j in range(0, t.shape[1], tn):
                blk = t[i:i + tm, j:j + tn]
                ref[i:i + tm, j:j + tn] = (blk - blk.max(axis=1, keepdims=True)
                                           + blk.min(axis=0, keepdims=True))
        check(y, ref[:m, :n], rtol=1e-5, atol=1e-5)


@case("ft_column_cumsum")
def _column_cumsum(mod):
    x = randn((20, 5))
    y, carry = np.zeros((20, 5), np.float32), np.zeros((1, 5), np.float32)
    run(mod, entry(mod), (5,), x, y, carry)
    check(y, np.cumsum(f64(x), axis=0), rtol=1e-5, atol=1e-5)
    check(carry, f64(x).sum(axis=0, keepdims=True), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------ more numerics


def _round_to_bits(v, bits):
    """Round f64 values once, to nearest-even, to `bits` significant bits (normal range)."""
    mant, exp = np.frexp(v)
    return np.ldexp(np.rint(np.ldexp(mant, bits)), exp - bits)


@case("ft_float_divmod")
def _float_divmod(mod):
    for index, dtype in ((0, np.float32), (1, np.float64)):
        x = RNG.uniform(-50, 50, 20).astype(dtype)
        y = RNG.uniform(0.5, 7, 20).astype(dtype) * RNG.choice([-1, 1], 20).astype(dtype)
        x[:6] = [-7, 7, -7, 7.5, -0.0, 3]
        y[:6] = [2, -2, -2, 2.5, 3, 1]
        if dtype == np.float64:
            # Just above the f16 / bf16 rounding midpoints: a detour through f32 would make
            # them exact ties and round them down to even.
            x[6:10] = [1 + 2.0 ** -11 + 2.0 ** -40, 1 + 2.0 ** -8 + 2.0 ** -40,
                       -(1 + 3 * 2.0 ** -11 + 2.0 ** -45), -(1 + 3 * 2.0 ** -8 + 2.0 ** -45)]
            y[6:10] = 1
        q, r = np.zeros(20, dtype), np.zeros(20, dtype)
        narrow, bnarrow = np.zeros(20, np.float16), np.zeros(20, BF16)
        run(mod, entry(mod, index), (2,), x, y, q, r, narrow, bnarrow)
        check(q, np.floor(x / y))
        check(r, np.mod(x, y))                  # Python's %: the divisor's sign
        quotient = f64(x / y)
        check(narrow, _round_to_bits(quotient, 11).astype(np.float16))
        check(bnarrow, _round_to_bits(quotient, 8).astype(BF16))


@case("ft_f64_math")
def _f64_math(mod):
    x, y = RNG.uniform(-3, 3, 24), RNG.uniform(-3, 3, 24)
    out = np.full((12, 24), np.nan)
    run(mod, entry(mod), (2,), x, y, out)
    ax = np.abs(x) + 0.25
    ref = [np.exp(x), np.log(ax), np.sqrt(ax), np.tanh(x), np.sin(x * 3), np.cos(x * 3),
           ax ** y, np.arctan2(x, y), 1 / np.sqrt(ax), np.exp2(y), np.log2(ax), np.sinh(x)]
    # Double precision: a few ulp, in the interpreter and in the JIT's PTX on the emulator
    # (which swaps `run`; runtime/tilebc_runtime/lowering/f64math.py, <= 2 ulp each).
    rtol = 5e-16
    for row, expected in enumerate(ref):
        np.testing.assert_allclose(out[row], expected, rtol=rtol, atol=rtol * 0.1,
                                   err_msg=f"row {row}")


def _c_hex_float(v):
    """C's %a for a normal, nonzero double (glibc spelling, the same as float.hex)."""
    return float(v).hex()


@case("ft_printf_formats")
def _printf_formats(mod):
    i8 = np.array([-5, 100], np.int8)
    u16 = np.array([65535, 42], np.uint16)
    i64 = np.array([2 ** 40, -7], np.int64)
    h = np.array([1.5, -0.0999], np.float16)
    d = np.array([123456.789, -2.5e-3])
    n = -3
    stream = io.StringIO()
    run(mod, entry(mod), (2,), i8, u16, i64, h, d, np.int32(n), print_stream=stream)
    # Narrow integers are sign-extended into vprintf's 32-bit slot (tileiras: cvt.s32.s16), so
    # the u16 65535 prints as 0xFFFFFFFF under %o / %X.
    u16_slot = u16.view(np.int16).astype(np.int64) % 2 ** 32
    expected = []
    for bid in range(2):
        expected += [
            "[%-4d|%+d|%05d] u=%u o=%o X=%#X" % (i8[bid], n, bid, n % 2 ** 32, u16_slot[bid],
                                                 u16_slot[bid]),
            "i64=%d %d g=%g E=%.2E a=%s %%done" % (i64[bid], i64[bid] * -3, h[bid], d[bid],
                                                 _c_hex_float(d[bid])),
            "f=%8.3f e=%e G=%G" % (h[bid], d[bid], d[bid] * 1e-7)]
    assert stream.getvalue().splitlines() == expected


@case("ft_atomic_minmax_hist")
def _atomic_minmax_hist(mod):
    for index, dtype in ((0, np.int32), (1, np.int64)):
        x = RNG.integers(-1000, 1000, 45).astype(dtype)
        keys = RNG.integers(-2, 11, 45).astype(np.int32)
        keys[:3] = [0, 7, 8]
        info = np.iinfo(dtype)
        hist, last = np.zeros(8, np.int32), np.zeros(8, np.int32)
        vmax, vmin = np.full(8, info.min, dtype), np.full(8, info.max, dtype)
        run(mod, entry(mod, index), (3,), x, keys, hist, vmax, vmin, last)
        ok = (keys >= 0) & (keys < 8)
        check(hist, np.bincount(keys[ok], minlength=8).astype(np.int32))
        for b in range(8):
            hit = ok & (keys == b)
            check(vmax[b], x[hit].max() if hit.any() else info.min)
            check(vmin[b], x[hit].min() if hit.any() else info.max)
            writers = {i // 16 + 1 for i in np.flatnonzero(hit)}
            assert (last[b] in writers) if writers else last[b] == 0, (b, last[b], writers)


def _to_f32_exact(values):
    """Round unsigned integers to float32 once (numpy's u64 -> f32 goes through f64)."""
    out = []
    for v in map(int, values):
        shift = max(v.bit_length() - 24, 0)
        q, rem = divmod(v, 1 << shift)
        half = (1 << shift) >> 1
        if shift and (rem > half or (rem == half and q & 1)):
            q += 1
        out.append(np.float32(q << shift))
    return np.array(out, np.float32)


@case("ft_unsigned_ops")
def _unsigned_ops(mod):
    for index, dtype in ((0, np.uint32), (1, np.uint64)):
        top = np.iinfo(dtype).max
        a = RNG.integers(0, top, 40, dtype=dtype, endpoint=True)
        b = RNG.integers(0, top, 40, dtype=dtype, endpoint=True)
        a[:4] = [top, 2 ** 31 + 5, 3, 0]
        b[:4] = [2 ** 31 + 1, 7, top, 5]
        out, fl = np.zeros(40, dtype), np.zeros(40, np.float32)
        run(mod, entry(mod, index), (3,), a, b, out, fl)
        safe_b = np.where(b == 0, 1, b).astype(dtype)
        check(out, np.where(a > safe_b, a % safe_b, safe_b - a))
        check(fl, _to_f32_exact(a) - _to_f32_exact(safe_b))


PARAMS = [(name, version) for name in sorted(CASES) for version in versions(name)]


# Each case runs against its numpy reference in tests/test_interp_batch.py, batched and one block
# at a time (a test here that ran it once more, batched, would repeat that check).


def test_printf_integers_follow_the_device_vararg_rules():
    """Regression: the interpreter printed an i16 0xFFFF under %u/%o/%x as 65535 (its own width,
    zero-extended) and an i64 under a plain %d whole; tileiras sign-extends narrow integers into
    vprintf's 32-bit slot and %d reads 32 bits (ft_printf_formats checks the JIT agrees)."""
    from tilebc.interp.ops.debug import format_print
    minus_one16 = np.array(-1, np.int16)
    assert format_print("%u %o %x %d", [minus_one16] * 4) == "4294967295 37777777777 ffffffff -1"
    big = np.array(2 ** 40 + 5, np.int64)
    assert format_print("%d %ld %lld %lu", [big] * 4) == f"5 {2 ** 40 + 5} {2 ** 40 + 5} {2 ** 40 + 5}"
    assert format_print("%d %lu", [np.array(-2, np.int64)] * 2) == f"-2 {2 ** 64 - 2}"
    assert format_print("%hhd %hu %hx", [np.array(300, np.int32), np.array(-1, np.int32),
                                         np.array(0x12345, np.int32)]) == "44 65535 2345"
    assert format_print("%u", [np.array(True)]) == "1"
