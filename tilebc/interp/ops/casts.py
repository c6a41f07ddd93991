"""Conversions: integer extension/truncation, float<->float, float<->int, bitcast, pointer casts,
pack/unpack. Numeric conversions are tilebc.numeric.convert's, reached through `numeric_ops`."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ...numeric.convert import ConversionError
from ...ops.enums import RoundingMode, Signedness
from .. import numeric_ops as num
from ..registry import implements
from ._common import element_of, result_dtype, result_shape, rounding


def _signed(op) -> bool:
    return op.attrs.get("signedness", Signedness.SIGNED) != Signedness.UNSIGNED


def _elements(op):
    source = op.operands[op.spec.operands[0].name]  # "from" or "source", by op
    return element_of(source.type), element_of(op.results[0].type)


def _converting(tb, convert, *args):
    """Run a tilebc.numeric.convert-backed conversion; a conversion it does not define becomes an
    ExecutionError naming the op (the verifier normally rejects such IR first)."""
    try:
        return [convert(*args)]
    except ConversionError as error:
        tb.fail(str(error))


@implements("exti", lanewise=True)
def _exti(tb, op, source):
    return _converting(tb, num.extend_int, source, *_elements(op), _signed(op))


@implements("trunci", lanewise=True)
def _trunci(tb, op, source):
    return _converting(tb, num.truncate_int, source, *_elements(op))


@implements("ftof", lanewise=True)
def _ftof(tb, op, source):
    return _converting(tb, num.convert_float, source, *_elements(op), rounding(op))


@implements("ftoi", lanewise=True)
def _ftoi(tb, op, source):
    mode = rounding(op)
    if mode is None:  # (an `or` default would swallow NEAREST_EVEN, whose value is 0)
        mode = RoundingMode.NEAREST_INT_TO_ZERO
    return _converting(tb, num.float_to_int, source, *_elements(op), _signed(op), mode)


@implements("itof", lanewise=True)
def _itof(tb, op, source):
    return _converting(tb, num.int_to_float, source, *_elements(op), _signed(op), rounding(op))


@implements("bitcast", lanewise=True)
def _bitcast(tb, op, source):
    return _converting(tb, num.bitcast, source, *_elements(op))


def _pointer_cast(op, source, wide):
    # pointers are uint64 addresses; i64 holds the same 64 bits
    return [np.asarray(source).astype(wide) if np.asarray(source).dtype.itemsize == 8 else
            np.asarray(source).astype(np.int64).astype(result_dtype(op))]


@implements("int_to_ptr", "ptr_to_ptr", lanewise=True)
def _to_pointer(tb, op, source):
    return _pointer_cast(op, source, np.uint64)


@implements("ptr_to_int", lanewise=True)
def _to_integer(tb, op, source):
    return _pointer_cast(op, source, np.int64)


# ------------------------------------------------------------------------------ pack / unpack


def _codes(values, element) -> np.ndarray:
    """Storage codes of each element: bytes per element for whole-byte types, nibbles for 4-bit."""
    name = element.name
    values = np.asarray(values).reshape(-1)
    if name == "f4E2M1FN":
        return values.view(np.uint8) & 0xF
    if name == "i4":
        return (values.astype(np.int8) & 0xF).astype(np.uint8)
    if name == "fnv8E5M3FNU":
        return _e5m3_encode(values)
    if name == "tf32":
        raise TypeError("pack of tf32 tiles is not supported by the interpreter")
    return np.ascontiguousarray(values.astype(num.np_dtype(element))).view(np.uint8)


def _e5m3_encode(values: np.ndarray) -> np.ndarray:
    v = values.astype(np.float64)
    with np.errstate(all="ignore"):
        exponent = np.floor(np.log2(np.where(v > 0, v, 1.0)))
        normal = exponent >= -14
        mantissa = np.rint((v / np.exp2(exponent) - 1.0) * 8)
        code_normal = ((exponent + 15).astype(np.int64) << 3) | mantissa.astype(np.int64)
        code_sub = np.rint(v / 2.0 ** -17).astype(np.int64)
    codes = np.where(normal, code_normal, code_sub)
    return np.where(np.isnan(v), 0xFF, np.where(v == 0, 0, codes)).astype(np.uint8)


def _from_codes(codes: np.ndarray, element) -> np.ndarray:
    name = element.name
    if name == "f4E2M1FN":
        return num._f4_from_codes(codes & 0xF)
    if name == "i4":
        nibble = codes.astype(np.int8) & 0xF
        return np.where(nibble >= 8, nibble - 16, nibble).astype(ml_dtypes.int4)
    if name == "fnv8E5M3FNU":
        return num.e5m3_decode(codes)
    return np.ascontiguousarray(codes).view(num.np_dtype(element))


@implements("pack")
def _pack(tb, op, source):
    element = element_of(op.operands["source"].type)
    try:
        codes = _codes(source, element)
    except TypeError as error:
        tb.fail(str(error))
    if element.bits == 4:  # two elements per byte, the first in the low nibble
        codes = (codes[0::2] | (codes[1::2] << 4)).astype(np.uint8)
    return [codes.view(np.int8).reshape(result_shape(op))]


@implements("unpack")
def _unpack(tb, op, source):
    element = element_of(op.results[0].type)
    raw = np.ascontiguousarray(np.asarray(source).reshape(-1)).view(np.uint8)
    if element.bits == 4:
        raw = np.stack([raw & 0xF, raw >> 4], axis=1).reshape(-1)
    return [_from_codes(raw, element).reshape(result_shape(op))]
