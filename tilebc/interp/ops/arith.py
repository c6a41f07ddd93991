"""Element-wise arithmetic, bitwise ops, comparisons and select on whole tiles.

Floats: nearest-even results use numpy in the operand type (numpy's f16 / bf16 / f8 arithmetic
rounds the exact f32 result once, which equals the correctly rounded result for +,-,*,/ and sqrt).
Directed rounding modes (zero, negative_inf, positive_inf, nearest_away) compute in float64 with an
error term and round once (`numeric_ops.round_float`); exact for operand types up to f32; f64
operands with a directed mode round to nearest (stated limitation). flush_to_zero flushes subnormal
inputs and results to signed zero. tf32 results are re-rounded to tf32.

Integers are signless bit patterns in signed storage and every integer op (arithmetic, bitwise,
shifts, min/max, cmpi) is `tilebc.numeric.intops`': results wrap, and inputs Tile IR leaves undefined get
the PTX results (division by zero: all-ones quotient, the dividend as remainder; shifts clamp). By
default the interpreter does not fault on undefined integer behaviour (padded lanes of a partial
tile often divide by zero harmlessly); `check_undefined=True` reports the first undefined element.
"""
from __future__ import annotations

import numpy as np

from ...numeric import intops
from ...numeric.convert import int_values
from ...ops.enums import ComparisonOrdering, ComparisonPredicate, IntegerOverflow, RoundingMode
from ...ops.table import by_mnemonic
from .. import numeric_ops as num
from ..errors import UndefinedError
from ..registry import implements
from ._common import element_of, output, result_dtype, rounding, tile

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


_NATIVE_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


def _native_output(tb, dtype, *operands):
    """A pooled `out=` buffer for numpy's own float arithmetic on operands of the result type
    (numpy then computes exactly what it would allocate for), else None."""
    if dtype not in _NATIVE_FLOATS or any(getattr(o, "dtype", None) != dtype for o in operands):
        return None
    return output(tb, dtype, *operands)


def _float_binary(native, exact):
    """Implementation for addf/subf/mulf/divf: `native(a, b)` rounds to nearest in the operand
    type; `exact(a64, b64, nearest)` returns (float64 result, residual) for directed modes."""
    def impl(tb, op, lhs, rhs):
        dtype = result_dtype(op)
        if op.attrs.get("flush_to_zero"):
            lhs, rhs = _flush(lhs), _flush(rhs)
        mode = rounding(op)
        if not _directed(mode) or dtype == np.float64:
            out = _native_output(tb, dtype, lhs, rhs)
            return [_finish(op, native(lhs, rhs) if out is None else native(lhs, rhs, out=out),
                            dtype)]
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


implements("addf", lanewise=True)(_float_binary(np.add, _exact_add))
implements("subf", lanewise=True)(_float_binary(np.subtract, _exact_sub))
implements("mulf", lanewise=True)(_float_binary(np.multiply, _exact_mul))
implements("divf", lanewise=True)(_float_binary(np.divide, _exact_div))


@implements("fma", lanewise=True)
def _fma(tb, op, lhs, rhs, acc):
    dtype = result_dtype(op)
    if op.attrs.get("flush_to_zero"):
        lhs, rhs, acc = _flush(lhs), _flush(rhs), _flush(acc)
    mode = rounding(op)
    if dtype == np.float64 or mode in (None, RoundingMode.NEAREST_EVEN):
        return [_finish(op, num.fused_multiply_add(lhs, rhs, acc, dtype), dtype)]
    product = np.asarray(lhs, np.float64) * np.asarray(rhs, np.float64)  # exact
    value, residual = num.two_sum(product, np.asarray(acc, np.float64))
    return [_finish(op, num.round_float(value, dtype, mode, residual), dtype)]


@implements("negf", lanewise=True)
def _negf(tb, op, source):
    return [np.negative(source)]


@implements("absf", lanewise=True)
def _absf(tb, op, source):
    return [np.abs(source)]


@implements("remf", lanewise=True)
def _remf(tb, op, lhs, rhs):
    return [tile(np.fmod(lhs, rhs), result_dtype(op))]


def _float_extreme(pick_nan, pick_number, prefer_negative_zero):
    def impl(tb, op, lhs, rhs):
        dtype = result_dtype(op)
        if op.attrs.get("flush_to_zero"):
            lhs, rhs = _flush(lhs), _flush(rhs)
        chooser = pick_nan if op.attrs.get("propagate_nan") else pick_number
        out = _native_output(tb, dtype, lhs, rhs)
        result = np.asarray(chooser(lhs, rhs) if out is None else chooser(lhs, rhs, out=out))
        if not np.count_nonzero(result == 0):  # cheap common case: no signed-zero pair to settle
            return [tile(result, dtype)]
        both_zero = (np.asarray(lhs) == 0) & (np.asarray(rhs) == 0)
        if np.any(both_zero):
            signs = (np.signbit(lhs) | np.signbit(rhs)) if prefer_negative_zero else \
                (np.signbit(lhs) & np.signbit(rhs))
            zero = np.where(signs, -0.0, 0.0).astype(dtype)
            result = np.where(both_zero, zero, result)
        return [tile(result, dtype)]
    return impl


implements("maxf", lanewise=True)(_float_extreme(np.maximum, np.fmax, prefer_negative_zero=False))
implements("minf", lanewise=True)(_float_extreme(np.minimum, np.fmin, prefer_negative_zero=True))

# -------------------------------------------------------------------------------- integers
#
# Every integer op is tilebc.numeric.intops' (exhaustively tested semantics on signless storage). With
# check_undefined the op also asks intops which elements are undefined behaviour (an overflow flag's
# promise broken, a zero divisor, signed min / -1, a shift amount >= the width) and faults on the
# first one, naming the op, the tile block and the element.


def _integer(tb, op, *operands):
    attrs = op.attrs
    try:
        if tb.options.check_undefined:
            mask = intops.undefined(op.name, operands, attrs)
            if np.any(mask):
                _report_undefined(tb, op, operands, mask)
        return [intops.evaluate(op.name, operands, attrs)]
    except intops.IntegerOpError as error:
        tb.fail(str(error))


# Integer ops whose undefined behaviour is not only an overflow flag broken: divisions (what is
# undefined), and shifts (whether an overflow flag can be broken too).
_DIVISIONS = by_mnemonic({"divi": "division by zero or signed overflow (min / -1)",
                          "remi": "division by zero"}, "undefined integer divisions")
_SHIFTS = by_mnemonic({"shli": True, "shri": False}, "undefined integer shifts")


def _what(op, operands) -> str:
    if op.name in _DIVISIONS:
        return _DIVISIONS[op.name]
    flag = IntegerOverflow(op.attrs.get("overflow", IntegerOverflow.NONE))
    broken = f"overflow breaking the {flag.keyword} flag"
    if op.name in _SHIFTS:
        return "shift amount >= the bit width" + (f" or {broken}" if _SHIFTS[op.name] and
                                                  flag is not IntegerOverflow.NONE else "")
    return broken


def _report_undefined(tb, op, operands, mask):
    """Fault on the first undefined element. A batched run's operands carry a leading tile-block
    axis: `tb.locate_element` splits an index into the tile block and the element in its tile."""
    arrays = np.broadcast_arrays(*[np.asarray(a) for a in operands])
    first = tuple(int(i) for i in np.argwhere(mask)[0]) if mask.ndim else ()
    block, element = tb.locate_element(first)
    element_type = intops.element_of(arrays[0])
    shown = ", ".join(str(int(int_values(a[first], element_type, True))) for a in arrays)
    tb.fail(f"undefined behaviour: {_what(op, operands)} at element {element} with operand(s) "
            f"{shown} (signed reading); {int(np.count_nonzero(mask))} element(s) undefined", kind=UndefinedError, block_id=block)


for _name in intops.MNEMONICS:
    implements(_name, lanewise=True)(_integer)


# ----------------------------------------------------------------------------- comparisons

_PREDICATES = {
    ComparisonPredicate.EQUAL: np.equal, ComparisonPredicate.NOT_EQUAL: np.not_equal,
    ComparisonPredicate.LESS_THAN: np.less, ComparisonPredicate.LESS_THAN_OR_EQUAL: np.less_equal,
    ComparisonPredicate.GREATER_THAN: np.greater,
    ComparisonPredicate.GREATER_THAN_OR_EQUAL: np.greater_equal,
}


@implements("cmpf", lanewise=True)
def _cmpf(tb, op, lhs, rhs):
    predicate = _PREDICATES[ComparisonPredicate(op.attrs["comparison_predicate"])]
    unordered = np.isnan(lhs) | np.isnan(rhs)
    result = predicate(lhs, rhs)
    if np.count_nonzero(unordered):  # cheaper than np.any on small arrays
        wanted = op.attrs["comparison_ordering"] == ComparisonOrdering.UNORDERED
        result = np.where(unordered, wanted, result)
    return [np.asarray(result, dtype=np.bool_)]


@implements("select", lanewise=True)
def _select(tb, op, cond, if_true, if_false):
    return [tile(np.where(cond, if_true, if_false), result_dtype(op))]


