"""Element storage and numeric conversions of the interpreter, in one place.

Conversions (ftof, itof, ftoi, exti, trunci, bitcast, tf32 / e5m3 rounding) are tilebc.numeric.convert's;
this module bridges the interpreter's storage to it. Arithmetic with a directed rounding mode rounds
here (`round_float`), from a float64 result plus its error term.

Storage: each element type is held in the numpy dtype of `tilebc.numeric.numerics.NUMPY_DTYPES`; pointers are
uint64 addresses; integers are held in the signed dtype of their width (the IR's integers are
signless: ops that read them as unsigned view the bits). `tf32` is held in float32 with the low 13
mantissa bits zero. `fnv8E5M3FNU` has no ml_dtypes type; it is held in float32 rounded to its grid
(our reading of the name: 5 exponent bits, bias 15, 3 mantissa bits, no sign, no infinity, all-ones
is NaN; not checked against NVIDIA's hardware).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..numeric import convert
from ..ir.types import ElementType, PointerType
from ..numeric.numerics import NUMPY_DTYPES
from ..ops.enums import RoundingMode

POINTER_DTYPE = np.dtype(np.uint64)
E5M3_DTYPE = np.dtype(np.float32)  # value-level stand-in for fnv8E5M3FNU
_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_SIGNED = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}


def np_dtype(element) -> np.dtype:
    """numpy dtype holding values of an element (or pointer) type."""
    if isinstance(element, PointerType):
        return POINTER_DTYPE
    if element.name == "fnv8E5M3FNU":
        return E5M3_DTYPE
    return NUMPY_DTYPES[element.name]


def memory_dtype(element) -> np.dtype:
    """dtype of one element as laid out in global memory (the seed's data-layout table)."""
    if isinstance(element, PointerType):
        return POINTER_DTYPE
    if element.name in ("i4", "f4E2M1FN", "fnv8E5M3FNU"):
        raise TypeError(f"{element.name} has no global-memory layout the interpreter supports")
    return np_dtype(element)


def is_unsigned_int(dtype: np.dtype) -> bool:
    return dtype.kind == "u"


def as_unsigned(values):
    """Integer bits reinterpreted as unsigned (bool and unsigned pass through)."""
    values = np.asarray(values)
    if values.dtype.kind != "i":
        return values
    if values.dtype == ml_dtypes.int4:
        return (values.astype(np.int8) & 0xF).astype(np.uint8)
    return values.view(_UNSIGNED[values.dtype.itemsize])


def as_signed(values, dtype: np.dtype):
    """Unsigned or wider integers back into the signed storage dtype (wrapping)."""
    values = np.asarray(values)
    if dtype == np.bool_:
        return (values & 1).astype(np.bool_)
    if dtype == ml_dtypes.int4:
        nibble = values.astype(np.int64) & 0xF
        return np.where(nibble >= 8, nibble - 16, nibble).astype(dtype)
    return values.astype(_UNSIGNED[dtype.itemsize], copy=False).view(dtype) \
        if values.dtype.kind == "u" and values.dtype.itemsize == dtype.itemsize \
        else values.astype(np.uint64 if values.dtype.kind == "u" else np.int64) \
        .astype(_UNSIGNED[dtype.itemsize]).view(dtype)


def int_width(dtype: np.dtype) -> int:
    if dtype == np.bool_:
        return 1
    if dtype == ml_dtypes.int4:
        return 4
    return dtype.itemsize * 8


# ---------------------------------------------------------------------------------- constants


def dense_to_array(attr, element) -> np.ndarray:
    """The value of a DenseElementsAttr as a tile array (splats broadcast to the full shape)."""
    shape = attr.type.shape
    data = attr.data
    dtype = np_dtype(element)
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    name = getattr(element, "name", "ptr")
    if name == "i1":
        if len(data) == 1 and count != 1 and data[0] in (0, 0xFF):
            flat = np.full(count, bool(data[0]))
        else:
            flat = np.unpackbits(np.frombuffer(data, np.uint8), bitorder="little")[:count] \
                .astype(np.bool_)
    elif name == "tf32":  # 3 bytes per element: the top 19 bits of an f32
        raw = np.frombuffer(data, np.uint8).reshape(-1, 3).astype(np.uint32)
        bits = (raw[:, 0] | (raw[:, 1] << 8) | (raw[:, 2] << 16)) << 13
        flat = bits.view(np.float32)
    elif name in ("i4", "f4E2M1FN"):
        codes = np.frombuffer(data, np.uint8) & 0xF
        flat = _decode_nibbles(codes, name)
    elif name == "fnv8E5M3FNU":
        flat = e5m3_decode(np.frombuffer(data, np.uint8))
    else:
        flat = np.frombuffer(data, memory_dtype(element) if name != "ptr" else POINTER_DTYPE)
    flat = np.asarray(flat, dtype=dtype)
    if flat.size == 1 and count != 1:
        return np.full(shape, flat[0], dtype=dtype)
    return flat.reshape(shape).copy()


def _decode_nibbles(codes: np.ndarray, name: str) -> np.ndarray:
    if name == "i4":
        signed = np.where(codes >= 8, codes.astype(np.int8) - 16, codes.astype(np.int8))
        return signed.astype(ml_dtypes.int4)
    return _f4_from_codes(codes)


def _f4_from_codes(codes: np.ndarray) -> np.ndarray:
    magnitude = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=np.float32)[codes & 7]
    values = np.where(codes & 8, -magnitude, magnitude)
    return values.astype(ml_dtypes.float4_e2m1fn)


# ------------------------------------------------------------------------- e5m3 (value level)

def e5m3_decode(codes: np.ndarray) -> np.ndarray:
    codes = codes.astype(np.int64)
    exponent = codes >> 3
    mantissa = codes & 7
    normal = np.ldexp(1.0 + mantissa / 8.0, exponent - 15)
    subnormal = np.ldexp(mantissa / 8.0, -14)
    values = np.where(exponent == 0, subnormal, normal)
    return np.where(codes == 0xFF, np.nan, values).astype(np.float32)


# ----------------------------------------------------------------------------- float rounding


def _step(values: np.ndarray, upward: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The next representable value of `dtype` above (upward=True) or below each value."""
    width = dtype.itemsize
    bits = values.view(_UNSIGNED[width]).astype(np.int64)
    # e8m0 has no sign bit: every code is a magnitude
    sign_bit = 0 if dtype == ml_dtypes.float8_e8m0fnu else 1 << (width * 8 - 1)
    negative = (bits & sign_bit) != 0 if sign_bit else np.zeros(bits.shape, np.bool_)
    if not sign_bit:
        new_bits = np.where(upward, bits + 1, bits - 1)
        return new_bits.astype(_UNSIGNED[width]).view(dtype)
    magnitude = bits & (sign_bit - 1)
    zero = magnitude == 0
    # moving away from zero increases the magnitude bits; toward zero decreases them
    away = np.where(negative, ~upward, upward)
    new_magnitude = np.where(away, magnitude + 1, magnitude - 1)
    new_bits = np.where(negative, new_magnitude | sign_bit, new_magnitude)
    smallest = np.where(upward, 1, 1 | sign_bit)  # stepping off zero: smallest subnormal
    new_bits = np.where(zero, smallest, new_bits)
    return new_bits.astype(_UNSIGNED[width]).view(dtype)


def round_float(exact64, dtype: np.dtype, mode: RoundingMode, residual=None):
    """Round float64 values to `dtype` under `mode`.

    `exact64` is the result computed in float64 and `residual` (optional) the sign-carrying error
    of that float64 result (true = exact64 + residual), so directed modes round the true value.
    """
    exact64 = np.asarray(exact64, dtype=np.float64)
    nearest = exact64.astype(dtype)
    if mode in (None, RoundingMode.NEAREST_EVEN, RoundingMode.APPROX, RoundingMode.FULL):
        return nearest
    if dtype == np.float64:
        return nearest  # directed modes on f64 results: the residual is not tracked (documented)
    with np.errstate(all="ignore"):
        nearest64 = nearest.astype(np.float64)  # compare in f64: e8m0 cannot even hold 0
        difference = exact64 - nearest64
        if residual is not None:
            difference = np.where(difference == 0, residual, difference)
        if mode is RoundingMode.NEAREST_AWAY:
            # ties (exact halfway) go away from zero; nearest-even already settles the rest
            up = np.abs(_step(nearest, exact64 > nearest, dtype).astype(np.float64) - exact64)
            tie = (np.abs(difference) == up) & (difference != 0)
            away = tie & (np.abs(exact64) > np.abs(nearest64))
            stepped = _step(nearest, difference > 0, dtype)
            return np.where(away, stepped, nearest)
        finite_input = np.isfinite(exact64)
        if mode is RoundingMode.ZERO:
            move = ((nearest64 > 0) & (difference < 0)) | ((nearest64 < 0) & (difference > 0))
            upward = difference > 0
        elif mode is RoundingMode.NEGATIVE_INF:
            move = difference < 0
            upward = np.zeros_like(move)
        elif mode is RoundingMode.POSITIVE_INF:
            move = difference > 0
            upward = np.ones_like(move)
        else:
            raise ValueError(f"rounding mode {mode.keyword} does not apply to floats")
        move = move & finite_input & ~np.isnan(nearest64)
        if not np.any(move):
            return nearest
        return np.where(move, _step(np.asarray(nearest), np.asarray(upward), dtype), nearest)


def two_sum(a64, b64):
    """(a + b rounded, its exact error): float64 error-free transformation (Knuth)."""
    total = a64 + b64
    b_virtual = total - a64
    a_virtual = total - b_virtual
    return total, (a64 - a_virtual) + (b64 - b_virtual)


def round_to_odd(total, error):
    """total + error (an exact float64 pair) rounded to float64 toward odd: an inexact result
    whose last significand bit is 0 steps one ulp toward the error. A later rounding to a format
    at least two bits narrower then rounds the exact value correctly (no double rounding)."""
    # count_nonzero: the cheapest truth test of a small bool array (np.any reduces through ufunc
    # machinery); != is a quiet comparison, raising no floating-point flag to silence
    inexact = np.not_equal(error, 0)
    if not np.count_nonzero(inexact):  # an exact pair (the common case) needs no bit tests
        return total
    with np.errstate(all="ignore"):
        even = (total.view(np.uint64) & np.uint64(1)) == 0
        move = inexact & even & np.isfinite(total)
        if not np.count_nonzero(move):
            return total
        return np.where(move, np.nextafter(total, np.where(error > 0, np.inf, -np.inf)), total)


_SPLIT = 134217729.0  # 2^27 + 1: Dekker's split of a float64 significand


def two_product(a64, b64):
    """(a * b rounded, its exact error) in float64 (Dekker), barring overflow and underflow."""
    product = a64 * b64
    a_big = _SPLIT * a64
    a_high = a_big - (a_big - a64)
    a_low = a64 - a_high
    b_big = _SPLIT * b64
    b_high = b_big - (b_big - b64)
    b_low = b64 - b_high
    error = ((a_high * b_high - product) + a_high * b_low + a_low * b_high) + a_low * b_low
    return product, error


def fused_multiply_add(a, b, c, dtype) -> np.ndarray:
    """a * b + c rounded once to `dtype` (float32 or float64), nearest-even, as PTX fma.rn does.

    float32 (and narrower inputs widened to it): the product is exact in float64 and the sum is
    rounded to odd before the final rounding, so the result is the correctly rounded one.
    float64: Boldo and Melquiond's emulation (exact product as a pair, sum, error summed with
    rounding to odd); lanes where that pair is not exact (overflow, products near the underflow
    threshold, non-finite values) take the plain a * b + c.
    """
    with np.errstate(all="ignore"):
        a64, b64, c64 = (np.asarray(x, dtype=np.float64) for x in (a, b, c))
        if np.dtype(dtype) != np.float64:
            total, error = two_sum(a64 * b64, c64)
            return round_to_odd(total, error).astype(dtype)
        product, product_error = two_product(a64, b64)
        high, low = two_sum(c64, product)
        low_sum, low_error = two_sum(low, product_error)
        result = np.where((low_sum == 0) & (low_error == 0), high,
                          high + round_to_odd(low_sum, low_error))  # keeps -0 + -0 = -0
        plain = a64 * b64 + c64
        exact_pair = np.isfinite(result) & (np.abs(product) >= 2.0 ** -960) & \
            (np.abs(product) < 2.0 ** 1000)
        return np.where(exact_pair | (product == 0), result, plain)


# ------------------------------------------------------------------------------- conversions
#
# Every conversion is tilebc.numeric.convert's (exact, exhaustively tested). The interpreter's storage is
# convert's storage except for fnv8E5M3FNU, held here as float32 values (convert: uint8 codes);
# `_to_storage` / `_from_storage` translate at the boundary, exactly.


def _to_storage(values, element) -> np.ndarray:
    values = np.asarray(values)
    if element.name == "fnv8E5M3FNU":
        return convert.float_to_float(values.astype(np.float32), "f32", "fnv8E5M3FNU")
    expected = NUMPY_DTYPES[element.name]
    return values if values.dtype == expected else values.astype(expected)


def _from_storage(values, element) -> np.ndarray:
    if element.name == "fnv8E5M3FNU":
        return e5m3_decode(values)
    return values


def convert_float(values, src_element, dst_element, mode=None) -> np.ndarray:
    """ftof: float to float, nearest-even unless `mode` says otherwise."""
    if src_element.name == dst_element.name:
        return np.asarray(values)
    mode = RoundingMode.NEAREST_EVEN if mode is None else mode
    return _from_storage(convert.float_to_float(_to_storage(values, src_element), src_element,
                                                dst_element, mode), dst_element)


def float_to_int(values, src_element, dst_element, signed: bool, mode: RoundingMode):
    """ftoi: round by `mode`, saturate to the destination range, NaN -> 0 (PTX cvt semantics)."""
    return convert.float_to_int(_to_storage(values, src_element), src_element, dst_element,
                                signed, mode, saturating=True)


def int_to_float(values, src_element, dst_element, signed: bool, mode=None) -> np.ndarray:
    """itof: integers (signed or unsigned reading) to a float type."""
    mode = RoundingMode.NEAREST_EVEN if mode is None else mode
    return _from_storage(convert.int_to_float(_to_storage(values, src_element), src_element,
                                              dst_element, signed, mode), dst_element)


def extend_int(values, src_element, dst_element, signed: bool) -> np.ndarray:
    return convert.ext_int(_to_storage(values, src_element), src_element, dst_element, signed)


def truncate_int(values, src_element, dst_element) -> np.ndarray:
    return convert.trunc_int(_to_storage(values, src_element), src_element, dst_element)


def bitcast(values, src_element, dst_element) -> np.ndarray:
    """Same-width reinterpretation of non-pointer element types."""
    return _from_storage(convert.bitcast(_to_storage(values, src_element), src_element,
                                         dst_element), dst_element)


def to_tf32(x) -> np.ndarray:
    """float32 values rounded (nearest even) to tf32's 10 fraction bits."""
    return convert.float_to_float(np.asarray(x, dtype=np.float32), "f32", "tf32")


def tf32_operand(x) -> np.ndarray:
    """A tf32 mma operand as the tensor cores read it: the top 19 bits of its f32 pattern (the low
    13 dropped, NaN and Inf patterns included). tileiras gives words loaded from a tf32 array to
    mma unconverted, and on H100/H200 the product is that of the truncated values."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    return bits.view(np.float32)


def cast_value(value, element):
    """A Python / numpy scalar converted to a 0-d tile of `element` (kernel scalar arguments)."""
    dtype = np_dtype(element)
    if isinstance(element, ElementType) and element.is_integer and dtype != np.bool_:
        as_int = int(value)
        width = int_width(dtype)
        as_int &= (1 << width) - 1
        if as_int >= 1 << (width - 1):
            as_int -= 1 << width
        return np.asarray(as_int, dtype=np.int64).astype(dtype)
    if isinstance(element, ElementType) and element.name == "tf32":
        return to_tf32(np.float32(value))
    return np.asarray(value).astype(dtype)
