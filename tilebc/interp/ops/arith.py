"""Element-wise arithmetic, bitwise ops, comparisons and select on whole tiles.

Floats: nearest-even results use numpy in the operand type (numpy's f16 / bf16 / f8 arithmetic
rounds the exact f32 result once, which equals the correctly rounded result for +,-,*,/ and sqrt).
Directed rounding modes (zero, negative_inf, positive_inf, nearest_away) compute in float64 with an
error term and round once (`numeric_ops.round_float`); exact for operand types up to f32; f64
operands with a directed mode round to nearest (stated limitation). flush_to_zero flushes subnormal
inputs and results to signed zero. tf32 results are re-rounded to tf32.

Integers are signless bit patterns in signed storage; ops with a signedness attribute read them as
unsigned when asked. Overflow flags (no_signed_wrap, ...) promise no overflow; the interpreter wraps.
Integer division or remainder by zero is undefined in the spec; the interpreter gives all-ones
(quotient) and the dividend (remainder), as PTX does, rather than fault, because padded lanes of a
partial tile often divide by zero harmlessly.
"""
from __future__ import annotations

import numpy as np

from ...ops.enums import (ComparisonOrdering, ComparisonPredicate, IntegerOverflow, RoundingMode,
                          Signedness)
from .. import numeric_ops as num
from ..registry import implements
from ._common import element_of, result_dtype, rounding, tile

# ---------------------------------------------------------------------------------- floats


def _flush(values):
    values = np.asarray(values)
    if values.dtype != np.float32:
        return values
    tiny = np.abs(values) < np.finfo(np.float32).tiny
    return np.where(tiny & (values != 0), np.copysign(np.float32(0), values), values) \
        .astype(np.float32)


def _finish(op, result, dtype):
    result = np.asarray(result, dtype=dtype)
    if element_of(op.results[0].type).name == "tf32":
        result = num.to_tf32(result)
    if op.attrs.get("flush_to_zero"):
        result = _flush(result)
    return result


def _directed(mode) -> bool:
    return mode not in (None, RoundingMode.NEAREST_EVEN, RoundingMode.APPROX, RoundingMode.FULL)


def _float_binary(native, exact):
    """Implementation for addf/subf/mulf/divf: `native(a, b)` rounds to nearest in the operand
    type; `exact(a64, b64, nearest)` returns (float64 result, residual) for directed modes."""
    def impl(tb, op, lhs, rhs):
        dtype = result_dtype(op)
        if op.attrs.get("flush_to_zero"):
            lhs, rhs = _flush(lhs), _flush(rhs)
        mode = rounding(op)
        if not _directed(mode) or dtype == np.float64:
            return [_finish(op, native(lhs, rhs), dtype)]
        a64 = np.asarray(lhs, dtype=np.float64)
        b64 = np.asarray(rhs, dtype=np.float64)
        value, residual = exact(a64, b64, np.asarray(native(lhs, rhs), dtype=dtype))
        return [_finish(op, num.round_float(value, dtype, mode, residual), dtype)]
    return impl


def _exact_add(a, b, _):
    return num.two_sum(a, b)


def _exact_sub(a, b, _):
    return num.two_sum(a, -b)


def _exact_mul(a, b, _):
    return a * b, None  # exact: the product of two <=24-bit significands fits in 53 bits


def _exact_div(a, b, nearest):
    quotient = a / b
    candidate = np.asarray(nearest, dtype=np.float64)
    # sign(a/b - candidate) = sign(a - candidate*b) * sign(b); candidate*b is exact in float64
    residual = np.sign(a - candidate * b) * np.sign(b)
    return quotient, np.where(quotient == candidate, residual, 0.0)


implements("addf")(_float_binary(np.add, _exact_add))
implements("subf")(_float_binary(np.subtract, _exact_sub))
implements("mulf")(_float_binary(np.multiply, _exact_mul))
implements("divf")(_float_binary(np.divide, _exact_div))


@implements("fma")
def _fma(tb, op, lhs, rhs, acc):
    dtype = result_dtype(op)
    if op.attrs.get("flush_to_zero"):
        lhs, rhs, acc = _flush(lhs), _flush(rhs), _flush(acc)
    if dtype == np.float64:
        # no fused f64 multiply-add in numpy: long double keeps 64 significand bits (stated bound)
        wide = np.asarray(lhs, np.longdouble) * np.asarray(rhs, np.longdouble) + \
            np.asarray(acc, np.longdouble)
        return [_finish(op, wide.astype(np.float64), dtype)]
    product = np.asarray(lhs, np.float64) * np.asarray(rhs, np.float64)  # exact
    value, residual = num.two_sum(product, np.asarray(acc, np.float64))
    mode = rounding(op)
    return [_finish(op, num.round_float(value, dtype, mode, residual), dtype)]


@implements("negf")
def _negf(tb, op, source):
    return [np.negative(source)]


@implements("absf")
def _absf(tb, op, source):
    return [np.abs(source)]


@implements("remf")
def _remf(tb, op, lhs, rhs):
    return [tile(np.fmod(lhs, rhs), result_dtype(op))]


def _float_extreme(pick_nan, pick_number, prefer_negative_zero):
    def impl(tb, op, lhs, rhs):
        dtype = result_dtype(op)
        if op.attrs.get("flush_to_zero"):
            lhs, rhs = _flush(lhs), _flush(rhs)
        chooser = pick_nan if op.attrs.get("propagate_nan") else pick_number
        result = np.asarray(chooser(lhs, rhs))
        both_zero = (np.asarray(lhs) == 0) & (np.asarray(rhs) == 0)
        if np.any(both_zero):
            signs = (np.signbit(lhs) | np.signbit(rhs)) if prefer_negative_zero else \
                (np.signbit(lhs) & np.signbit(rhs))
            zero = np.where(signs, -0.0, 0.0).astype(dtype)
            result = np.where(both_zero, zero, result)
        return [tile(result, dtype)]
    return impl


implements("maxf")(_float_extreme(np.maximum, np.fmax, prefer_negative_zero=False))
implements("minf")(_float_extreme(np.minimum, np.fmin, prefer_negative_zero=True))

# -------------------------------------------------------------------------------- integers


def _unsigned(op, name="signedness") -> bool:
    return op.attrs.get(name) == Signedness.UNSIGNED


def _wrap(op, values):
    return num.as_signed(values, result_dtype(op))


def _as_int(values):
    """Bools and int4 widened so numpy integer arithmetic applies."""
    values = np.asarray(values)
    if values.dtype == np.bool_ or values.dtype.itemsize < 1 or values.dtype.name == "int4":
        return values.astype(np.int64)
    return values


def _int_binary(fn):
    def impl(tb, op, lhs, rhs):
        return [_wrap(op, fn(_as_int(lhs), _as_int(rhs)))]
    return impl


implements("addi")(_int_binary(np.add))
implements("subi")(_int_binary(np.subtract))
implements("muli")(_int_binary(np.multiply))


@implements("andi", "ori", "xori")
def _bitwise(tb, op, lhs, rhs):
    fn = {"andi": np.bitwise_and, "ori": np.bitwise_or, "xori": np.bitwise_xor}[op.name]
    dtype = result_dtype(op)
    if dtype == np.bool_:
        return [tile(fn(lhs, rhs), dtype)]
    return [_wrap(op, fn(_as_int(lhs), _as_int(rhs)))]


@implements("negi")
def _negi(tb, op, source):
    return [_wrap(op, np.negative(_as_int(source)))]


@implements("absi")
def _absi(tb, op, source):
    return [_wrap(op, np.abs(_as_int(source)))]


def _operands_for(op, lhs, rhs, signedness="signedness"):
    if _unsigned(op, signedness):
        return num.as_unsigned(lhs), num.as_unsigned(rhs)
    return _as_int(lhs), _as_int(rhs)


@implements("maxi", "mini")
def _int_extreme(tb, op, lhs, rhs):
    a, b = _operands_for(op, lhs, rhs)
    fn = np.maximum if op.name == "maxi" else np.minimum
    return [_wrap(op, fn(a, b))]


@implements("divi")
def _divi(tb, op, lhs, rhs):
    a, b = _operands_for(op, lhs, rhs)
    zero = b == 0
    safe = np.where(zero, 1, b).astype(b.dtype)
    floor = np.floor_divide(a, safe)
    remainder = a - floor * safe
    mode = RoundingMode(op.attrs.get("rounding", RoundingMode.ZERO))
    if mode is RoundingMode.ZERO:
        quotient = floor + ((remainder != 0) & ((a < 0) != (safe < 0)))
    elif mode is RoundingMode.POSITIVE_INF:
        quotient = floor + (remainder != 0)
    elif mode is RoundingMode.NEGATIVE_INF:
        quotient = floor
    else:
        tb.fail(f"divi rounding {mode.keyword} is not defined for integers")
    quotient = np.where(zero, -1, quotient) if quotient.dtype.kind == "i" else \
        np.where(zero, np.iinfo(quotient.dtype).max, quotient)
    return [_wrap(op, quotient)]


@implements("remi")
def _remi(tb, op, lhs, rhs):
    a, b = _operands_for(op, lhs, rhs)
    zero = b == 0
    safe = np.where(zero, 1, b).astype(b.dtype)
    remainder = np.fmod(a, safe) if a.dtype.kind == "i" else np.remainder(a, safe)
    return [_wrap(op, np.where(zero, a, remainder))]


@implements("mulhii")
def _mulhii(tb, op, x, y):
    """High half of the full product, reading the operands as unsigned (like PTX mul.hi.u*)."""
    dtype = result_dtype(op)
    width = num.int_width(dtype)
    a = num.as_unsigned(x)
    b = num.as_unsigned(y)
    if width <= 32:
        high = (a.astype(np.uint64) * b.astype(np.uint64)) >> np.uint64(width)
        return [num.as_signed(high, dtype)]
    # 64-bit: split into 32-bit halves
    mask = np.uint64(0xFFFFFFFF)
    shift = np.uint64(32)
    a_low, a_high = a & mask, a >> shift
    b_low, b_high = b & mask, b >> shift
    low_low = a_low * b_low
    middle1 = a_high * b_low + (low_low >> shift)
    middle2 = a_low * b_high + (middle1 & mask)
    high = a_high * b_high + (middle1 >> shift) + (middle2 >> shift)
    return [num.as_signed(high, dtype)]


@implements("shli")
def _shli(tb, op, lhs, rhs):
    dtype = result_dtype(op)
    width = num.int_width(dtype)
    amount = num.as_unsigned(rhs).astype(np.uint64)
    value = num.as_unsigned(lhs).astype(np.uint64)
    shifted = value << np.minimum(amount, np.uint64(63))
    return [num.as_signed(np.where(amount >= width, np.uint64(0), shifted), dtype)]


@implements("shri")
def _shri(tb, op, lhs, rhs):
    dtype = result_dtype(op)
    width = num.int_width(dtype)
    amount = np.minimum(num.as_unsigned(rhs).astype(np.uint64), np.uint64(width - 1 if
                                                                          not _unsigned(op)
                                                                          else 63))
    if _unsigned(op):
        shifted = num.as_unsigned(lhs).astype(np.uint64) >> amount
        shifted = np.where(num.as_unsigned(rhs).astype(np.uint64) >= width, 0, shifted)
        return [num.as_signed(shifted.astype(np.uint64), dtype)]
    return [num.as_signed(_as_int(lhs).astype(np.int64) >> amount.astype(np.int64), dtype)]


# ----------------------------------------------------------------------------- comparisons

_PREDICATES = {
    ComparisonPredicate.EQUAL: np.equal, ComparisonPredicate.NOT_EQUAL: np.not_equal,
    ComparisonPredicate.LESS_THAN: np.less, ComparisonPredicate.LESS_THAN_OR_EQUAL: np.less_equal,
    ComparisonPredicate.GREATER_THAN: np.greater,
    ComparisonPredicate.GREATER_THAN_OR_EQUAL: np.greater_equal,
}


@implements("cmpf")
def _cmpf(tb, op, lhs, rhs):
    predicate = _PREDICATES[ComparisonPredicate(op.attrs["comparison_predicate"])]
    unordered = np.isnan(lhs) | np.isnan(rhs)
    result = predicate(lhs, rhs)
    if np.any(unordered):
        wanted = op.attrs["comparison_ordering"] == ComparisonOrdering.UNORDERED
        result = np.where(unordered, wanted, result)
    return [np.asarray(result, dtype=np.bool_)]


@implements("cmpi")
def _cmpi(tb, op, lhs, rhs):
    predicate = _PREDICATES[ComparisonPredicate(op.attrs["comparison_predicate"])]
    a, b = _operands_for(op, lhs, rhs)
    if np.asarray(lhs).dtype == np.bool_ and not _unsigned(op):
        a, b = -a, -b  # signed i1: true is -1
    return [np.asarray(predicate(a, b), dtype=np.bool_)]


@implements("select")
def _select(tb, op, cond, if_true, if_false):
    return [tile(np.where(cond, if_true, if_false), result_dtype(op))]


_ = IntegerOverflow  # overflow flags are promises only (see module docstring)
