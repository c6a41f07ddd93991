"""Run the `sci` fixture kernels (fixtures/kernels/sci.py) on the interpreter and compare with
numpy references written here from the kernels' Python source, in f64 unless the kernel's own
f32 rounding decides a discrete outcome (floor of a coordinate, a hit test), where the reference
repeats the kernel's f32 steps.

Tolerances follow tests/test_interp_fixtures.py: exact for integer and data-movement kernels;
f32 chains rtol 1e-5 (1e-4 where long sums or exp/log are involved); f16 / bf16 results 1e-2 /
4e-2.  Inputs are small so the PTX emulator can run the same cases
(runtime/tests/test_rt_sim_families.py swaps `run` for the emulator's).
"""
import ml_dtypes
import numpy as np
import pytest

from fixture_cases import case_registry, f64, cdiv, run
from test_interp_fixtures import check, entry, module, versions

BF16 = ml_dtypes.bfloat16
RNG = np.random.default_rng(20240923)
CASES, case = case_registry()


def randn(shape, dtype=np.float32, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(dtype)


# ------------------------------------------------------------------------ convolution


def _conv2d_nhwc(x, w, stride, pad):
    n, h, wd, c = x.shape
    kh, kw, _, k = w.shape
    xp = np.zeros((n, h + 2 * pad, wd + 2 * pad, c))
    xp[:, pad:pad + h, pad:pad + wd] = f64(x)
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, oh, ow, k))
    for dy in range(kh):
        for dx in range(kw):
            patch = xp[:, dy:dy + stride * oh:stride, dx:dx + stride * ow:stride]
            y += patch @ f64(w[dy, dx])
    return y


@case("sci_conv2d_igemm")
def _conv2d(mod):
    # (entry, dtype, out dtype, N, H, W, C, K, kernel, stride, pad, TILE_P, TILE_K, tol):
    # C = 20 leaves a partial channel tile; pixel counts are not multiples of TILE_P.
    for index, dtype, out_dtype, n, h, wd, c, k, ks, stride, pad, tp, tk, tol in (
            (0, np.float16, np.float16, 1, 5, 6, 20, 16, 3, 1, 1, 16, 16, 1e-2),
            (1, BF16, np.float32, 2, 6, 7, 16, 24, 2, 2, 0, 32, 16, 1e-5)):
        x, w = randn((n, h, wd, c), dtype), randn((ks, ks, c, k), dtype, 0.3)
        ref = _conv2d_nhwc(x, w, stride, pad)
        y = np.full(ref.shape, 5, out_dtype)
        pixels = ref.shape[0] * ref.shape[1] * ref.shape[2]
        run(mod, entry(mod, index), (cdiv(pixels, tp), cdiv(k, tk)), x, w, y)
        check(y, ref, rtol=tol, atol=tol)


def _pool_reference(x, ks, stride, pad, is_max):
    n, h, w, c = x.shape
    oh, ow = (h + 2 * pad - ks) // stride + 1, (w + 2 * pad - ks) // stride + 1
    out = np.zeros((n, oh, ow, c))
    for i in range(oh):
        for j in range(ow):
            y0, x0 = i * stride - pad, j * stride - pad
            win = f64(x)[:, max(y0, 0):y0 + ks, max(x0, 0):x0 + ks]
            out[:, i, j] = win.max(axis=(1, 2)) if is_max else win.mean(axis=(1, 2))
    return out


@case("sci_pool2d")
def _pool2d(mod):
    # (entry, dtype, shape, kernel, stride, pad, max?, TILE_P, TILE_C, tol)
    for index, dtype, shape, ks, stride, pad, is_max, tp, tc, tol in (
            (0, np.float16, (1, 7, 6, 12), 3, 2, 1, True, 16, 8, 0),
            (1, np.float32, (2, 4, 6, 4), 2, 2, 0, False, 16, 4, 1e-6),
            (2, np.float32, (1, 3, 5, 6), 3, 1, 1, False, 8, 4, 1e-6)):
        x = randn(shape, dtype)
        ref = _pool_reference(x, ks, stride, pad, is_max)
        y = np.full(ref.shape, 9, dtype)
        pixels = ref.shape[0] * ref.shape[1] * ref.shape[2]
        run(mod, entry(mod, index), (cdiv(pixels, tp), cdiv(shape[3], tc)), x, y)
        check(y, ref.astype(dtype) if tol == 0 else ref, rtol=tol, atol=tol)


# ------------------------------------------------------------------------------ image


def _source_coords(out_size, in_size):
    """The kernel's f32 coordinate arithmetic: clamp((o + 0.5) * scale - 0.5, 0), floor."""
    scale = np.float32(in_size) / np.float32(out_size)
    s = np.maximum((np.arange(out_size, dtype=np.float32) + np.float32(0.5)) * scale
                   - np.float32(0.5), np.float32(0))
    i0 = np.floor(s).astype(np.int64)
    return i0, np.minimum(i0 + 1, in_size - 1), f64(s - i0.astype(np.float32))


@case("sci_resize_bilinear")
def _resize_bilinear(mod):
    for index, dtype, in_shape, out_hw, tile_w in ((0, np.float32, (5, 7, 3), (8, 12), 16),
                                                   (1, np.uint8, (6, 10, 3), (3, 5), 8)):
        if dtype == np.uint8:
            x = RNG.integers(0, 256, in_shape).astype(np.uint8)
        else:
            x = randn(in_shape)
        y = np.full(out_hw + (3,), -1, np.float32)
        run(mod, entry(mod, index), (out_hw[0], cdiv(out_hw[1], tile_w)), x, y)
        y0, y1, ly = _source_coords(out_hw[0], in_shape[0])
        x0, x1, lx = _source_coords(out_hw[1], in_shape[1])
        xf = f64(x)
        ly, lx = ly[:, None, None], lx[None, :, None]
        top = xf[y0][:, x0] * (1 - lx) + xf[y0][:, x1] * lx
        bottom = xf[y1][:, x0] * (1 - lx) + xf[y1][:, x1] * lx
        check(y, top * (1 - ly) + bottom * ly, rtol=1e-5, atol=1e-4)


MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


@case("sci_rgb_normalize")
def _rgb_normalize(mod):
    img = RNG.integers(0, 256, (70, 3)).astype(np.uint8)
    out = np.full((3, 70), 7, np.float32)
    run(mod, entry(mod), (cdiv(70, 32),), img, MEAN, STD, out)
    check(out, ((f64(img) / 255 - f64(MEAN)) / f64(STD)).T, rtol=1e-5, atol=1e-5)


@case("sci_rgb_denormalize")
def _rgb_denormalize(mod):
    for index, dtype, pixels, tile in ((0, np.float32, 50, 32), (1, np.float16, 40, 16)):
        # Normalised values spanning beyond [0, 255] after denormalising: both saturations.
        planar = RNG.uniform(-3.5, 3.5, (3, pixels)).astype(dtype)
        img = np.full((pixels, 3), 77, np.uint8)
        run(mod, entry(mod, index), (cdiv(pixels, tile),), planar, MEAN, STD, img)
        v = ((f64(planar) * f64(STD)[:, None] + f64(MEAN)[:, None]) * 255).T
        ref = np.clip(np.floor(v + 0.5), 0, 255)
        # The kernel's f32 rounding may move a value lying within 1e-3 of a .5 tie.
        near_tie = np.abs(v - np.floor(v) - 0.5) < 1e-3
        assert np.all(np.abs(f64(img) - ref) <= near_tie)
        assert (ref == 0).any() and (ref == 255).any()


# ---------------------------------------------------------------------------- stencil


@case("sci_jacobi3d")
def _jacobi3d(mod):
    nz, ny, nx = 4, 6, 13
    u = randn((nz, ny, nx))
    v = np.full_like(u, 99)
    omega = np.float32(0.8)
    run(mod, entry(mod), (nz, cdiv(ny, 4)), u, v, omega)
    uf = f64(u)
    ref = uf.copy()
    nb = (uf[:-2, 1:-1, 1:-1] + uf[2:, 1:-1, 1:-1] + uf[1:-1, :-2, 1:-1] + uf[1:-1, 2:, 1:-1] +
          uf[1:-1, 1:-1, :-2] + uf[1:-1, 1:-1, 2:])
    ref[1:-1, 1:-1, 1:-1] = (1 - float(omega)) * uf[1:-1, 1:-1, 1:-1] + float(omega) * nb / 6
    check(v, ref, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- n-body


@case("sci_nbody")
def _nbody(mod):
    n, eps2 = 40, np.float32(0.01)
    pos = randn((n, 4))
    pos[:, 3] = RNG.uniform(0.5, 2.0, n)
    p = f64(pos)
    d = p[None, :, :3] - p[:, None, :3]                    # d[i, j] = x_j - x_i
    inv_r = 1 / np.sqrt((d * d).sum(axis=2) + float(eps2))
    acc = np.einsum("ij,ijk->ik", p[None, :, 3] * inv_r ** 3, d)
    potential = -(p[None, :, 3] * inv_r).sum(axis=1)
    ref = np.concatenate([acc, potential[:, None]], axis=1)
    for index, tile_i in ((0, 16), (1, 8)):
        out = np.zeros((n, 4), np.float32)
        run(mod, entry(mod, index), (cdiv(n, tile_i),), pos, out, eps2)
        check(out, ref, rtol=1e-4, atol=1e-3)


# ------------------------------------------------------------------------- finance


def _cnd(d):
    k = 1 / (1 + 0.2316419 * np.abs(d))
    poly = k * (0.31938153 + k * (-0.356563782 + k * (1.781477937 +
                                                      k * (-1.821255978 + k * 1.330274429))))
    c = 0.3989422804014327 * np.exp(-0.5 * d * d) * poly
    return np.where(d > 0, 1 - c, c)


@case("sci_black_scholes")
def _black_scholes(mod):
    rate, vol = np.float32(0.02), np.float32(0.3)
    for index, dtype, n, tile in ((0, np.float32, 50, 32), (1, np.float16, 40, 16)):
        s = RNG.uniform(10, 50, n).astype(dtype)
        k = RNG.uniform(10, 50, n).astype(dtype)
        t = RNG.uniform(0.25, 2, n).astype(dtype)
        call, put = np.full(n, -1, np.float32), np.full(n, -1, np.float32)
        run(mod, entry(mod, index), (cdiv(n, tile),), s, k, t, call, put, rate, vol)
        sf, kf, tf, r, v = f64(s), f64(k), f64(t), float(rate), float(vol)
        d1 = (np.log(sf / kf) + (r + 0.5 * v * v) * tf) / (v * np.sqrt(tf))
        d2 = d1 - v * np.sqrt(tf)
        disc = kf * np.exp(-r * tf)
        check(call, sf * _cnd(d1) - disc * _cnd(d2), rtol=1e-4, atol=1e-4)
        check(put, disc * (1 - _cnd(d2)) - sf * (1 - _cnd(d1)), rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------ Monte Carlo


def _pcg_hash(v):
    state = v * np.uint32(747796405) + np.uint32(2891336453)
    word = ((state >> ((state >> np.uint32(28)) + np.uint32(4))) ^ state) * np.uint32(277803737)
    return (word >> np.uint32(22)) ^ word


@case("sci_monte_carlo_pi")
def _monte_carlo_pi(mod):
    blocks, iters, tile = 3, 4, 64
    for seed in (np.uint32(12345), np.uint32(0xDEADBEEF)):
        count = np.zeros(1, np.int32)
        run(mod, entry(mod), (blocks,), count, seed)
        with np.errstate(over="ignore"):
            ctr = np.arange(blocks * iters * tile, dtype=np.uint32)
            hx = _pcg_hash(ctr ^ seed)
            hy = _pcg_hash(hx + seed)
        x = (hx >> np.uint32(8)).astype(np.float32) * np.float32(2.0 ** -24)
        y = (hy >> np.uint32(8)).astype(np.float32) * np.float32(2.0 ** -24)
        # A compiler may contract x*x + y*y into an fma (tileiras does): squares of 24-bit
        # fractions are exact in f64, so both roundings are computed and the count must lie
        # between the points inside under both and under either.
        xx, yy = f64(x) ** 2, f64(y) ** 2
        plain = (x * x + y * y) <= 1
        fused = ((xx + f64(y * y)).astype(np.float32) <= 1) | ((yy + f64(x * x)).astype(np.float32) <= 1)
        low, high = np.count_nonzero(plain & fused), np.count_nonzero(plain | fused)
        assert low <= count[0] <= high and high - low <= 2
        assert abs(4 * count[0] / x.size - np.pi) < 0.15


# --------------------------------------------------------------------------- complex


@case("sci_complex_mul")
def _complex_mul(mod):
    for index, dtype, n, tile, conj in ((0, np.float32, 40, 16, False),
                                        (1, np.float16, 40, 32, True)):
        a, b = randn((n, 2), dtype), randn((n, 2), dtype)
        c = np.zeros((n, 2), np.float32)
        run(mod, entry(mod, index), (cdiv(n, tile),), a, b, c)
        za = f64(a[:, 0]) + 1j * f64(a[:, 1])
        zb = f64(b[:, 0]) + 1j * f64(b[:, 1])
        zc = za * (np.conj(zb) if conj else zb)
        check(c, np.stack([zc.real, zc.imag], axis=1), rtol=1e-5, atol=1e-6)


def _butterfly(z, half):
    out = z.copy()
    for k in range(len(z) // 2):
        j = k % half
        i0 = (k // half) * 2 * half + j
        w = np.exp(-1j * np.pi * j / half)
        out[i0], out[i0 + half] = z[i0] + w * z[i0 + half], z[i0] - w * z[i0 + half]
    return out


@case("sci_fft_stage")
def _fft_stage(mod):
    n = 64
    z = randn(n) + 1j * randn(n)
    # Single stages at three widths, then the whole transform: log2(n) stages on
    # bit-reversed input give numpy's FFT.
    for half in (1, 8, 32):
        src = np.stack([z.real, z.imag], axis=1).astype(np.float32).ravel()
        dst = np.zeros_like(src)
        run(mod, entry(mod), (cdiv(n // 2, 16),), src, dst, np.int32(half))
        ref = _butterfly(f64(src[0::2]) + 1j * f64(src[1::2]), half)
        check(dst.reshape(n, 2), np.stack([ref.real, ref.imag], axis=1), rtol=1e-5, atol=1e-5)
    bits = int(np.log2(n))
    rev = [int(format(i, f"0{bits}b")[::-1], 2) for i in range(n)]
    buf = np.stack([z[rev].real, z[rev].imag], axis=1).astype(np.float32).ravel()
    for stage in range(bits):
        nxt = np.zeros_like(buf)
        run(mod, entry(mod), (cdiv(n // 2, 16),), buf, nxt, np.int32(1 << stage))
        buf = nxt
    ref = np.fft.fft(z)
    check(buf.reshape(n, 2), np.stack([ref.real, ref.imag], axis=1), rtol=1e-4, atol=1e-4)



@case("sci_complex_polar")
def _complex_polar(mod):
    z = randn((40, 2))
    z[:4] = [[-1, 0], [-1, -0.0], [0, 0], [0, -2]]   # branch cut and axes
    polar = np.zeros((40, 2), np.float32)
    run(mod, entry(mod), (cdiv(40, 16),), z, polar)
    zf = f64(z)
    check(polar, np.stack([np.hypot(zf[:, 0], zf[:, 1]), np.arctan2(zf[:, 1], zf[:, 0])], axis=1),
          rtol=2e-6, atol=1e-6)


@case("sci_gamma_correct")
def _gamma_correct(mod):
    gamma = np.array([2.2, 1 / 2.2, 1.0], np.float32)
    img = RNG.integers(0, 256, (70, 3)).astype(np.uint8)
    img[:3] = [[0, 0, 0], [255, 255, 255], [1, 128, 254]]
    out = np.full_like(img, 9)
    run(mod, entry(mod, 0), (cdiv(70, 32),), img, gamma, out)
    v = (f64(img) / 255) ** f64(gamma) * 255
    near_tie = np.abs(v - np.floor(v) - 0.5) < 1e-3
    assert np.all(np.abs(f64(out) - np.clip(np.floor(v + 0.5), 0, 255)) <= near_tie)
    x = RNG.uniform(0, 4, (20, 3)).astype(np.float32)
    y = np.zeros_like(x)
    run(mod, entry(mod, 1), (cdiv(20, 16),), x, gamma, y)
    check(y, f64(x) ** f64(gamma), rtol=1e-5, atol=1e-6)

# ------------------------------------------------------------------ stream compaction


@case("sci_stream_compact")
def _stream_compact(mod):
    n, tile = 100, 32
    x = randn(n)
    out, out_idx = np.full(n, -7, np.float32), np.full(n, -1, np.int32)
    count = np.zeros(1, np.int32)
    run(mod, entry(mod), (cdiv(n, tile),), x, out, out_idx, count, np.float32(0.3))
    kept = np.nonzero(x > np.float32(0.3))[0]
    total = int(count[0])
    assert total == len(kept)
    # Blocks may reserve their ranges in any order; each range keeps its block's order.
    check(np.sort(out_idx[:total]), kept.astype(np.int32))
    check(out[:total], x[out_idx[:total]])
    for block in range(cdiv(n, tile)):
        ranks = out_idx[:total][(out_idx[:total] // tile) == block]
        assert np.all(np.diff(ranks) > 0)
    assert np.all(out[total:] == -7) and np.all(out_idx[total:] == -1)


# ------------------------------------------------------------------- matrix functions


@case("sci_matrix_power")
def _matrix_power(mod):
    a = (np.eye(16) * 0.6 + randn((3, 16, 16), scale=0.08)).astype(np.float32)
    p = np.array([0, 5, 13], np.int32)   # no bit, bits 0+2, bits 0+2+3
    out = np.full_like(a, 3)
    run(mod, entry(mod), (3,), a, p, out)
    ref = np.stack([np.linalg.matrix_power(f64(a[i]), int(p[i])) for i in range(3)])
    check(out, ref, rtol=1e-4, atol=1e-5)


def _expm_reference(a):
    """Taylor series of A / 2^8 to 20 terms, then 8 squarings (error far below f32)."""
    x = a / 256
    total, term = np.eye(len(a)), np.eye(len(a))
    for k in range(1, 21):
        term = term @ x / k
        total = total + term
    for _ in range(8):
        total = total @ total
    return total


@case("sci_matrix_exp")
def _matrix_exp(mod):
    a = randn((2, 16, 16), scale=0.3)
    out = np.zeros_like(a)
    run(mod, entry(mod), (2,), a, out)
    check(out, np.stack([_expm_reference(f64(m)) for m in a]), rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------- scalar reductions


@case("sci_dot_atomic")
def _dot_atomic(mod):
    # 300 elements in tiles of 64 on 2 blocks: the grid-stride loop runs 3 and 2 times.
    for index, dtype, n, blocks in ((0, np.float16, 300, 2), (1, BF16, 100, 3)):
        x, y = randn(n, dtype), randn(n, dtype)
        out = np.zeros(1, np.float32)
        run(mod, entry(mod, index), (blocks,), x, y, out)
        check(out, [np.dot(f64(x), f64(y))], rtol=1e-5, atol=1e-4)


@case("sci_l2_norm_sq")
def _l2_norm_sq(mod):
    for index, dtype, shape, tiles in ((0, np.float32, (10, 20), (8, 16)),
                                       (1, np.float16, (6, 40), (4, 32))):
        x = randn(shape, dtype)
        out = np.zeros(1, np.float32)
        run(mod, entry(mod, index), (cdiv(shape[0], tiles[0]), cdiv(shape[1], tiles[1])), x, out)
        check(out, [(f64(x) ** 2).sum()], rtol=1e-5)


# ---------------------------------------------------------------- index arithmetic


@case("sci_roll_reflect")
def _roll_reflect(mod):
    x = randn((10, 13))
    for sy, sx in ((-3, 17), (4, -1), (-21, -13)):
        rolled = np.full_like(x, 5)
        reflected = np.full((14, 17), 5, np.float32)
        run(mod, entry(mod), (cdiv(14, 8), cdiv(17, 8)), x, rolled, reflected,
            np.int32(sy), np.int32(sx))
        check(rolled, np.roll(x, (sy, sx), axis=(0, 1)))
        check(reflected, np.pad(x, 2, mode="symmetric"))


# -------------------------------------------------------------------------------- ODE


@case("sci_rk4_f64")
def _rk4_f64(mod):
    state = RNG.uniform(-1, 1, (40, 2))
    h, k, c, steps = 0.01, 4.0, 0.1, 25
    ref_x, ref_v = state[:, 0].copy(), state[:, 1].copy()
    for _ in range(steps):
        def f(x, v):
            return v, -k * x - c * v
        k1x, k1v = f(ref_x, ref_v)
        k2x, k2v = f(ref_x + 0.5 * h * k1x, ref_v + 0.5 * h * k1v)
        k3x, k3v = f(ref_x + 0.5 * h * k2x, ref_v + 0.5 * h * k2v)
        k4x, k4v = f(ref_x + h * k3x, ref_v + h * k3v)
        ref_x = ref_x + h / 6 * (k1x + 2 * k2x + 2 * k3x + k4x)
        ref_v = ref_v + h / 6 * (k1v + 2 * k2v + 2 * k3v + k4v)
    run(mod, entry(mod), (cdiv(40, 16),), state, np.float64(h), np.float64(k), np.float64(c),
        np.int32(steps))
    check(state, np.stack([ref_x, ref_v], axis=1), rtol=1e-12, atol=1e-14)


PARAMS = [(name, version) for name in sorted(CASES) for version in versions(name)]


# Each case runs against its numpy reference in tests/test_interp_batch.py, batched and one block
# at a time (a test here that ran it once more, batched, would repeat that check).
