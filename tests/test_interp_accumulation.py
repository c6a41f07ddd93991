"""The interpreter's dot products and fused multiply-adds do not depend on numpy, BLAS or batching.

mmaf/mmaf_scaled give acc + lhs @ rhs exactly, rounded once to f32 (f64 for f64 operands); `fma`
is correctly rounded. The reference here is Python's Fraction arithmetic, never numpy's matmul.
"""
from fractions import Fraction

import numpy as np
import pytest

from tilebc.interp import numeric_ops as num
from tilebc.interp.ops.shape import exact_dot


def _exact_fma(a, b, c, dtype):
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    return _round_fraction(exact, dtype)


def _round_fraction(exact: Fraction, dtype):
    """Nearest-even rounding of an exact rational to float32/float64 (finite, normal range)."""
    dtype = np.dtype(dtype)
    nearest = np.array(float(exact), dtype=np.float64).astype(dtype)  # a candidate, fixed below
    candidates = [nearest, np.nextafter(nearest, dtype.type(np.inf)),
                  np.nextafter(nearest, dtype.type(-np.inf))]

    def key(value):
        distance = abs(Fraction(float(value)) - exact)
        odd = int(np.asarray(value).view(np.uint32 if dtype == np.float32 else np.uint64)) & 1
        return distance, odd
    return min(candidates, key=key)


def test_f32_fma_is_correctly_rounded():
    rng = np.random.default_rng(1)
    a = rng.standard_normal(4000).astype(np.float32)
    b = rng.standard_normal(4000).astype(np.float32)
    c = (rng.standard_normal(4000) * 1e-3).astype(np.float32)
    got = num.fused_multiply_add(a, b, c, np.float32)
    expected = np.array([_exact_fma(x, y, z, np.float32) for x, y, z in zip(a, b, c)],
                        dtype=np.float32)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))


def test_f32_fma_has_no_double_rounding():
    """(1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 is halfway between two f32 values; + 2^-80 puts the exact
    sum just above it (rounds up). Rounding to float64 first lands on the halfway point, and the
    tie then goes to even (down): one ulp wrong."""
    a = np.float32([1 + 2.0 ** -12, 1 + 2.0 ** -12])
    c = np.float32([2.0 ** -80, -2.0 ** -80])
    got = num.fused_multiply_add(a, a, c, np.float32)
    assert got[0] == np.float32(1 + 2.0 ** -11 + 2.0 ** -23)
    assert got[1] == np.float32(1 + 2.0 ** -11)
    naive = (a.astype(np.float64) * a.astype(np.float64) + c.astype(np.float64)).astype(np.float32)
    assert naive[0] != got[0]


def test_f64_fma_is_correctly_rounded():
    rng = np.random.default_rng(3)
    a = rng.standard_normal(3000)
    b = rng.standard_normal(3000)
    c = rng.standard_normal(3000) * np.float64(2.0) ** rng.integers(-60, 10, 3000)
    # cancellation: c = -a*b rounded, so the result is the product's rounding error
    c[:500] = -(a[:500] * b[:500])
    got = num.fused_multiply_add(a, b, c, np.float64)
    expected = np.array([_exact_fma(x, y, z, np.float64) for x, y, z in zip(a, b, c)])
    assert np.array_equal(got.view(np.uint64), expected.view(np.uint64))
    # the plain float64 expression loses the cancelled cases entirely
    assert np.count_nonzero(a[:500] * b[:500] + c[:500]) == 0
    assert np.count_nonzero(got[:500]) > 450


def test_fma_signed_zeros_and_specials():
    for dtype in (np.float32, np.float64):
        zero = dtype(0.0)
        got = num.fused_multiply_add(np.array([-zero, zero, np.inf, np.nan, 1.0], dtype),
                                     np.array([zero, zero, 1.0, 1.0, np.inf], dtype),
                                     np.array([-zero, -zero, -np.inf, 1.0, 1.0], dtype), dtype)
        assert np.signbit(got[0]) and got[0] == 0      # -0*0 + -0 = -0
        assert not np.signbit(got[1]) and got[1] == 0  # 0*0 + -0 = +0
        assert np.isnan(got[2]) and np.isnan(got[3])
        assert got[4] == np.inf


def _exact_dot(lhs, rhs, acc, dtype):
    m, k = lhs.shape
    out = np.empty((m, rhs.shape[1]), dtype)
    for i in range(m):
        for j in range(rhs.shape[1]):
            exact = Fraction(float(acc[i, j])) + sum(
                Fraction(float(lhs[i, index])) * Fraction(float(rhs[index, j])) for index in range(k))
            out[i, j] = _round_fraction(exact, dtype)
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dot_product_is_exact_then_rounded_once(dtype):
    rng = np.random.default_rng(4)
    lhs = rng.standard_normal((6, 9)).astype(dtype)
    rhs = rng.standard_normal((9, 5)).astype(dtype)
    acc = rng.standard_normal((6, 5)).astype(dtype)
    lhs[0] *= np.float64(2.0) ** 40  # large terms that cancel: a summed float64 would lose the rest
    rhs[:, 0] = 1.0
    lhs[0, 1] = -lhs[0, 0]
    got = exact_dot(lhs, rhs, acc, np.dtype(dtype))
    assert np.array_equal(got, _exact_dot(lhs, rhs, acc, dtype))


def test_dot_product_of_f16_operands_is_exact():
    """f16 products in f32 work: the sum of 64 products of mixed scale, rounded once."""
    rng = np.random.default_rng(6)
    lhs = (rng.standard_normal((4, 64)) * 2.0 ** rng.integers(-14, 14, (4, 64))).astype(np.float16)
    rhs = rng.standard_normal((64, 4)).astype(np.float16)
    acc = np.zeros((4, 4), np.float32)
    got = exact_dot(lhs.astype(np.float32), rhs.astype(np.float32), acc, np.dtype(np.float32))
    assert np.array_equal(got, _exact_dot(lhs.astype(np.float32), rhs.astype(np.float32), acc,
                                          np.float32))


def test_dot_product_does_not_depend_on_batching():
    """One block at a time and all blocks stacked give the same bits (np.matmul does not promise
    it: its summation order depends on the shape and the BLAS)."""
    rng = np.random.default_rng(5)
    lhs = rng.standard_normal((16, 32, 64)).astype(np.float32)
    rhs = rng.standard_normal((16, 64, 32)).astype(np.float32)
    acc = rng.standard_normal((16, 32, 32)).astype(np.float32)
    batched = exact_dot(lhs, rhs, acc, np.dtype(np.float32))
    for block in range(16):
        single = exact_dot(lhs[block], rhs[block], acc[block], np.dtype(np.float32))
        assert np.array_equal(batched[block].view(np.uint32), single.view(np.uint32))
    shared = exact_dot(lhs, rhs[0], acc, np.dtype(np.float32))
    repeated = exact_dot(lhs, np.broadcast_to(rhs[0], rhs.shape), acc, np.dtype(np.float32))
    assert np.array_equal(shared.view(np.uint32), repeated.view(np.uint32))
    # the order of the terms does not matter either
    permutation = rng.permutation(64)
    permuted = exact_dot(lhs[..., permutation], rhs[..., permutation, :], acc, np.dtype(np.float32))
    assert np.array_equal(permuted.view(np.uint32), batched.view(np.uint32))


def test_dot_product_paths_agree_on_wide_ranges():
    """The sliced path (finite f32 operands) and the step-by-step path (taken when an operand is
    not finite) give the same bits on the finite results; values span 2^-120 .. 2^100."""
    rng = np.random.default_rng(7)
    lhs = (rng.standard_normal((8, 32)) * 2.0 ** rng.integers(-120, 100, (8, 32))).astype(np.float32)
    rhs = (rng.standard_normal((32, 8)) * 2.0 ** rng.integers(-20, 20, (32, 8))).astype(np.float32)
    acc = rng.standard_normal((8, 8)).astype(np.float32)
    sliced = exact_dot(lhs, rhs, acc, np.dtype(np.float32))
    assert np.array_equal(sliced, _exact_dot(lhs, rhs, acc, np.float32))
    with_inf = np.concatenate([lhs, np.full((1, 32), np.inf, np.float32)])
    stepped = exact_dot(with_inf, rhs, np.concatenate([acc, acc[:1]]), np.dtype(np.float32))
    assert np.array_equal(stepped[:8], sliced)
    assert not np.isfinite(stepped[8]).any()
