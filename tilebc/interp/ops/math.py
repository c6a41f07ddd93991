"""Math functions on float tiles.

Accuracy: every function is evaluated in float64 with numpy and rounded once to the result type,
so results are within 1 ulp of the exact value for all types up to f32 (f64: numpy's libm
accuracy, typically < 1 ulp). Exception, for speed: f32 exp, sin, cos, tanh, sinh and cosh run in
numpy's float32 kernels when those stay within the CUDA device's documented ulp bound on this
machine (`tilebc.interp.fastmath`: at most 2 ulps from the correctly rounded result for exp);
`exact_math=True` keeps them on the float64 path. The device's full-precision versions are within a few ulp of the
exact value; its `approx` modes (exp, tanh, and the hardware ex2/lg2/rsqrt/sin/cos approximations)
are allowed larger errors (PTX documents about 2 ulp for ex2.approx.f32 and a maximum relative error
of 2^-10.7 (~6e-4) for tanh.approx.f32). The interpreter always returns the accurate value, so a
kernel that relies on `approx` matches the device within those bounds. sqrt honours directed
rounding modes exactly for operand types up to f32.
"""
from __future__ import annotations

import numpy as np

from ...ops.enums import RoundingMode
from ...ops.table import by_mnemonic
from .. import fastmath
from .. import numeric_ops as num
from ..registry import implements
from .arith import _directed, _finish, _flush
from ._common import output, result_dtype, rounding

_UNARY = by_mnemonic({
    "ceil": np.ceil, "floor": np.floor, "cos": np.cos, "cosh": np.cosh, "sin": np.sin,
    "sinh": np.sinh, "tan": np.tan, "tanh": np.tanh, "exp": np.exp, "exp2": np.exp2,
    "log": np.log, "log2": np.log2, "rsqrt": lambda v: 1.0 / np.sqrt(v),
}, "float64 math functions")


def _unary(tb, op, source):
    dtype = result_dtype(op)
    if op.attrs.get("flush_to_zero"):
        source = _flush(source)
    if dtype == np.float32 and not tb.options.exact_math and \
            np.asarray(source).dtype == np.float32 and fastmath.float32_ok(op.name):
        function = fastmath.FUNCTIONS[op.name]
        out = output(tb, dtype, source)
        value = function(source) if out is None else function(source, out=out)
        return [_finish(op, value, dtype)]
    value = _UNARY[op.name](np.asarray(source, dtype=np.float64))
    return [_finish(op, value.astype(dtype), dtype)]


for _name in _UNARY:
    implements(_name, lanewise=True)(_unary)


@implements("sqrt", lanewise=True)
def _sqrt(tb, op, source):
    dtype = result_dtype(op)
    if op.attrs.get("flush_to_zero"):
        source = _flush(source)
    mode = rounding(op)
    if dtype == np.float64 or not _directed(mode):
        return [_finish(op, np.sqrt(source), dtype)]
    a64 = np.asarray(source, dtype=np.float64)
    root = np.sqrt(a64)
    candidate = root.astype(dtype).astype(np.float64)
    residual = np.sign(a64 - candidate * candidate)  # candidate^2 is exact in float64
    return [_finish(op, num.round_float(root, dtype, mode, np.where(root == candidate, residual,
                                                                        0.0)), dtype)]


@implements("fpowf", lanewise=True)
def _fpowf(tb, op, source, exponent):
    dtype = result_dtype(op)
    value = np.power(np.asarray(source, np.float64), np.asarray(exponent, np.float64))
    return [_finish(op, value.astype(dtype), dtype)]


@implements("fpowi", lanewise=True)
def _fpowi(tb, op, source, exponent):
    dtype = result_dtype(op)
    value = np.power(np.asarray(source, np.float64), np.asarray(exponent, np.float64))
    return [_finish(op, value.astype(dtype), dtype)]


@implements("atan2", lanewise=True)
def _atan2(tb, op, x, y):
    """atan2 x, y = the angle of the point (y, x): x is the numerator (cuTile's x1)."""
    dtype = result_dtype(op)
    value = np.arctan2(np.asarray(x, np.float64), np.asarray(y, np.float64))
    return [_finish(op, value.astype(dtype), dtype)]


_ = RoundingMode
