"""Floating-point semantics of PTX arithmetic: IEEE rounding modes, .ftz, .sat, min/max rules and
the .approx functions.

Exactness. f32 results are computed in float64 and rounded once: a sum or a product of two f32
values is exact in float64 up to a known error term (TwoSum / the exact 48-bit product), and the
pair (result, error) is first rounded to odd at 53 bits, which makes the final rounding to f32
correct for every IEEE mode (53 >= 24 + 2). The final rounding is `tilebc.numeric.convert.round_float64`,
the same code the interpreter's conversions use. f64 results with an error term use exact rational
arithmetic (fractions) where numpy cannot round correctly (fma, directed modes).

Approximations (.approx, div.full, and ex2/lg2/sin/cos/rsqrt/tanh, which PTX only defines as
approximate): the emulator evaluates them in float64 and rounds to nearest f32, so its error is at
most 0.5 ulp (plus the float64 evaluation error, < 1e-15 relative). The device's documented bounds
are looser (PTX ISA: ex2.approx.f32 max 2 ulp; lg2.approx.f32 2^-22 absolute/relative; sin/cos
.approx.f32 2^-20.9 absolute in [-pi, pi]; rsqrt.approx.f32 / rcp.approx.f32 1 ulp-ish; tanh.approx
.f32 2^-10.987 relative; div.full.f32 2 ulp), so checks against the emulator must use tolerances
that admit the device's error, as the interpreter's fixture tests do.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from tilebc.numeric.convert import round_float64
from tilebc.interp import numeric_ops
from tilebc.ops.enums import RoundingMode as RM

ROUNDING = {"rn": RM.NEAREST_EVEN, "rz": RM.ZERO, "rm": RM.NEGATIVE_INF, "rp": RM.POSITIVE_INF,
            "rna": RM.NEAREST_AWAY}
INT_ROUNDING = {"rni": RM.NEAREST_EVEN, "rzi": RM.ZERO, "rmi": RM.NEGATIVE_INF,
                "rpi": RM.POSITIVE_INF}

_F32_MIN_NORMAL = np.float32(2.0 ** -126)


def ftz(x: np.ndarray) -> np.ndarray:
    """Flush f32 subnormals to sign-preserving zero (the .ftz rule for inputs and results)."""
    x = np.asarray(x)
    if x.dtype != np.float32:
        return x
    sub = (np.abs(x) < _F32_MIN_NORMAL) & (x != 0)
    if not sub.any():
        return x
    return np.where(sub, np.copysign(np.float32(0), x), x).astype(np.float32)


def saturate(x: np.ndarray) -> np.ndarray:
    """.sat on floats: clamp to [0, 1]; NaN gives +0."""
    x = np.asarray(x)
    out = np.clip(x, x.dtype.type(0), x.dtype.type(1))
    return np.where(np.isnan(x), x.dtype.type(0), out).astype(x.dtype)


# error-free float64 transformations: the interpreter's (Knuth's sum, Dekker's product)
two_sum = numeric_ops.two_sum
two_prod = numeric_ops.two_product


def _round_to_odd(hi, lo):
    """hi + lo (|lo| below hi's half-ulp) rounded to odd at 53 bits: inexact results get an odd
    last bit, so a second rounding to <= 51 bits is correct in every mode."""
    inexact = (lo != 0) & np.isfinite(hi)
    if not inexact.any():
        return hi
    bits = hi.view(np.uint64)
    even = (bits & np.uint64(1)) == 0
    toward = np.where(lo > 0, np.inf, -np.inf)
    return np.where(inexact & even, np.nextafter(hi, toward), hi)


def round_f32(hi, lo=None, mode=RM.NEAREST_EVEN) -> np.ndarray:
    """The f32 rounding of the exact value hi + lo (float64 pair) under `mode`."""
    hi = np.asarray(hi, dtype=np.float64)
    if lo is not None:
        hi = _round_to_odd(hi, np.asarray(lo, dtype=np.float64))
    if mode is RM.NEAREST_EVEN:
        with np.errstate(all="ignore"):
            return hi.astype(np.float32)
    bits = round_float64(hi, "f32", mode)
    return bits.astype(np.uint32).view(np.float32).reshape(np.shape(hi))


def round_f64(hi, lo, mode) -> np.ndarray:
    """hi = float64 nearest of an exact value, lo its exact error: apply a directed mode."""
    if mode is RM.NEAREST_EVEN or lo is None:
        return hi
    up = lo > 0
    down = lo < 0
    if mode is RM.POSITIVE_INF:
        step = np.where(up, np.nextafter(hi, np.inf), hi)
    elif mode is RM.NEGATIVE_INF:
        step = np.where(down, np.nextafter(hi, -np.inf), hi)
    elif mode is RM.ZERO:
        toward_zero = (up & (hi < 0)) | (down & (hi > 0))
        step = np.where(toward_zero, np.nextafter(hi, 0.0), hi)
    else:
        raise ValueError(mode)
    return np.where(np.isfinite(hi), step, hi)


def _exact_f64(values, mode):
    """Round exact Fractions (None for non-finite lanes) to float64 under `mode`."""
    out = np.empty(len(values), np.float64)
    for i, value in enumerate(values):
        try:
            nearest = float(value)
        except OverflowError:
            nearest = np.inf if value > 0 else -np.inf
        if mode is not RM.NEAREST_EVEN and np.isfinite(nearest):
            diff = value - Fraction(nearest)
            if diff > 0 and mode in (RM.POSITIVE_INF,) or diff > 0 and mode is RM.ZERO \
                    and nearest < 0:
                nearest = float(np.nextafter(nearest, np.inf))
            elif diff < 0 and mode in (RM.NEGATIVE_INF,) or diff < 0 and mode is RM.ZERO \
                    and nearest > 0:
                nearest = float(np.nextafter(nearest, -np.inf))
        out[i] = nearest
    return out


# --------------------------------------------------------------------------- arithmetic


def add(a, b, ftype: str, mode=RM.NEAREST_EVEN):
    if ftype == "f32":
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        if mode is RM.NEAREST_EVEN:
            return (a64 + b64).astype(np.float32)  # exact in f64 up to one rounding: innocuous
        return round_f32(*two_sum(a64, b64), mode)
    if mode is RM.NEAREST_EVEN:
        return a + b
    return round_f64(*two_sum(a, b), mode)


def mul(a, b, ftype: str, mode=RM.NEAREST_EVEN):
    if ftype == "f32":
        product = a.astype(np.float64) * b.astype(np.float64)  # exact: 48-bit product
        return round_f32(product, None, mode)
    if mode is RM.NEAREST_EVEN:
        return a * b
    return round_f64(*two_prod(a, b), mode)


def fma(a, b, c, ftype: str, mode=RM.NEAREST_EVEN):
    """a * b + c with a single rounding."""
    if ftype == "f32":
        product = a.astype(np.float64) * b.astype(np.float64)
        return round_f32(*two_sum(product, c.astype(np.float64)), mode)
    a, b, c = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64),
                                  np.asarray(c, np.float64))
    fast = a * b + c
    finite = np.isfinite(a) & np.isfinite(b) & np.isfinite(c) & np.isfinite(fast)
    if mode is RM.NEAREST_EVEN:
        # products/sums without rounding error need no exact path
        p, p_err = two_prod(a, b)
        s, s_err = two_sum(p, c)
        need = finite & ((p_err != 0) | (s_err != 0))
    else:
        need = finite
    if not need.any():
        return np.where(finite, fast if mode is RM.NEAREST_EVEN else fast, a * b + c)
    out = fast.copy()
    idx = np.nonzero(need)[0]
    exact = [_exact_fma(float(a[i]), float(b[i]), float(c[i])) for i in idx]
    out[idx] = _exact_f64(exact, mode)
    return out


def _exact_fma(a: float, b: float, c: float) -> Fraction:
    """a * b + c as an exact Fraction (finite operands), normalised once rather than after
    each Fraction operation."""
    na, da = a.as_integer_ratio()
    nb, db = b.as_integer_ratio()
    nc, dc = c.as_integer_ratio()
    return Fraction(na * nb * dc + nc * da * db, da * db * dc)


def div(a, b, ftype: str, mode=RM.NEAREST_EVEN):
    if ftype == "f32":
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        with np.errstate(all="ignore"):
            q = a64 / b64
            if mode is RM.NEAREST_EVEN:
                return q.astype(np.float32)  # division: double rounding 53 -> 24 is innocuous
            ph, pl = two_prod(q, b64)
            residual = (a64 - ph) - pl  # sign of a - q*b
            # only the sign of the error matters for rounding q to odd
            return round_f32(q, np.where(np.isfinite(q), np.sign(residual) * np.sign(b64), 0.0),
                             mode)
    with np.errstate(all="ignore"):
        q = a / b
    if mode is RM.NEAREST_EVEN:
        return q
    finite = np.isfinite(q) & (b != 0)
    out = q.copy()
    for i in np.nonzero(finite)[0]:
        out[i] = _exact_f64([Fraction(float(a[i])) / Fraction(float(b[i]))], mode)[0]
    return out


def sqrt(a, ftype: str, mode=RM.NEAREST_EVEN):
    with np.errstate(all="ignore"):
        if ftype == "f32":
            r = np.sqrt(a.astype(np.float64))
            if mode is RM.NEAREST_EVEN:
                return r.astype(np.float32)
            ph, pl = two_prod(r, r)
            residual = (a.astype(np.float64) - ph) - pl
            return round_f32(r, np.sign(residual), mode)
        r = np.sqrt(a)
        if mode is RM.NEAREST_EVEN:
            return r
        ph, pl = two_prod(r, r)
        return round_f64(r, (a - ph) - pl, mode)


def fmin(a, b, nan_propagating: bool = False):
    """PTX min: a NaN operand is ignored (both NaN: NaN); -0 < +0. `.NaN`: any NaN gives NaN."""
    with np.errstate(all="ignore"):
        out = np.fmin(a, b)
        zeros = (a == 0) & (b == 0)
        out = np.where(zeros, np.where(np.signbit(a) | np.signbit(b), -abs(a), abs(a)), out)
        out = _canonical_nan(out.astype(a.dtype), (np.isnan(a) | np.isnan(b)) if nan_propagating
                             else (np.isnan(a) & np.isnan(b)))
    return out


def _canonical_nan(out, where):
    """PTX min/max give the canonical NaN (all bits but the sign set: 0x7fffffff for f32), never
    an operand's payload."""
    if not where.any():
        return out
    bits = out.view(f"u{out.dtype.itemsize}").copy()
    bits[np.broadcast_to(where, bits.shape)] = (1 << (8 * out.dtype.itemsize - 1)) - 1
    return bits.view(out.dtype)


def fmax(a, b, nan_propagating: bool = False):
    with np.errstate(all="ignore"):
        out = np.fmax(a, b)
        zeros = (a == 0) & (b == 0)
        out = np.where(zeros, np.where(np.signbit(a) & np.signbit(b), -abs(a), abs(a)), out)
        out = _canonical_nan(out.astype(a.dtype), (np.isnan(a) | np.isnan(b)) if nan_propagating
                             else (np.isnan(a) & np.isnan(b)))
    return out


# ------------------------------------------------------------------------ approximations

def _approx(function):
    def apply(a):
        with np.errstate(all="ignore"):
            return function(np.asarray(a, np.float64)).astype(np.asarray(a).dtype)
    return apply


APPROX = {
    "ex2": _approx(np.exp2),
    "lg2": _approx(np.log2),
    "sin": _approx(np.sin),
    "cos": _approx(np.cos),
    "tanh": _approx(np.tanh),
    "rsqrt": _approx(lambda x: 1.0 / np.sqrt(x)),
    "rcp": _approx(lambda x: 1.0 / x),
    "sqrt": _approx(np.sqrt),
}
