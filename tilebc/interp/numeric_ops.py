"""Element storage and numeric conversions of the interpreter, in one place.

NOTE: `tilebc/convert.py` (exact conversions, being written separately) is meant to replace the
conversion functions here; every cast, rounding-mode and constant decode of the interpreter goes
through this module so the swap touches nothing else. Until then we use numpy / ml_dtypes plus the
directed-rounding helper below.

Storage: each element type is held in the numpy dtype of `tilebc.numerics.NUMPY_DTYPES`; pointers are
uint64 addresses; integers are held in the signed dtype of their width (the IR's integers are
signless: ops that read them as unsigned view the bits). `tf32` is held in float32 with the low 13
mantissa bits zero. `fnv8E5M3FNU` has no ml_dtypes type; it is held in float32 rounded to its grid
(our reading of the name: 5 exponent bits, bias 15, 3 mantissa bits, no sign, no infinity, all-ones
is NaN; not checked against NVIDIA's hardware).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..ir.types import ElementType, PointerType
from ..numerics import NUMPY_DTYPES
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

_E5M3_MAX = 2.0 ** 16 * 1.75


def e5m3_decode(codes: np.ndarray) -> np.ndarray:
    codes = codes.astype(np.int64)
    exponent = codes >> 3
    mantissa = codes & 7
    normal = np.ldexp(1.0 + mantissa / 8.0, exponent - 15)
    subnormal = np.ldexp(mantissa / 8.0, -14)
    values = np.where(exponent == 0, subnormal, normal)
    return np.where(codes == 0xFF, np.nan, values).astype(np.float32)


def _round_to_grid(x64: np.ndarray, mantissa_bits: int, min_exponent: int) -> np.ndarray:
    """Round float64 values to `mantissa_bits` fraction bits (nearest even), with subnormals
    below 2**min_exponent. No overflow handling."""
    with np.errstate(all="ignore"):
        _, exponent = np.frexp(x64)
        exponent = np.maximum(exponent - 1, min_exponent)
        quantum = np.ldexp(1.0, exponent - mantissa_bits)
        return np.where(np.isfinite(x64), np.rint(x64 / quantum) * quantum, x64)


def to_e5m3(x) -> np.ndarray:
    x64 = np.asarray(x, dtype=np.float64)
    rounded = _round_to_grid(x64, 3, -14)
    rounded = np.where(rounded > _E5M3_MAX, np.nan, rounded)
    return np.where((x64 < 0) | np.isnan(x64), np.nan, rounded).astype(np.float32)


def to_tf32(x) -> np.ndarray:
    """float32 values rounded (nearest even) to tf32's 10 fraction bits."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    finite = (bits & 0x7F800000) != 0x7F800000
    rounded = (bits + 0xFFF + ((bits >> 13) & 1)) & np.uint32(0xFFFFE000)
    return np.where(finite, rounded, bits).astype(np.uint32).view(np.float32)


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
    if dtype == E5M3_DTYPE and mode is None:
        return to_e5m3(exact64)
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


# ------------------------------------------------------------------------------- conversions


def convert_float(values, dst_element, mode=None) -> np.ndarray:
    """ftof: float to float, nearest-even unless `mode` says otherwise."""
    dtype = np_dtype(dst_element)
    values = np.asarray(values)
    name = dst_element.name
    if name == "tf32":
        rounded = round_float(values.astype(np.float64), np.dtype(np.float32), mode)
        return to_tf32(rounded)
    if name == "fnv8E5M3FNU":
        return to_e5m3(values)
    if mode in (None, RoundingMode.NEAREST_EVEN) and values.dtype != np.float64 \
            or name == "f64":
        return values.astype(dtype)
    return round_float(values.astype(np.float64), dtype, mode)


_INT_ROUNDING = {
    RoundingMode.NEAREST_INT_TO_ZERO: np.trunc, RoundingMode.ZERO: np.trunc,
    RoundingMode.NEAREST_EVEN: np.rint, RoundingMode.NEGATIVE_INF: np.floor,
    RoundingMode.POSITIVE_INF: np.ceil,
    RoundingMode.NEAREST_AWAY: lambda v: np.trunc(v + np.copysign(0.5, v)),
}


def float_to_int(values, dst_dtype: np.dtype, signed: bool, mode: RoundingMode) -> np.ndarray:
    """ftoi: round by `mode`, saturate to the destination range, NaN -> 0 (PTX cvt semantics)."""
    rounded = _INT_ROUNDING[mode](np.asarray(values, dtype=np.float64))
    width = int_width(dst_dtype)
    if signed:
        low, high = -(2 ** (width - 1)), 2 ** (width - 1) - 1
    else:
        low, high = 0, 2 ** width - 1
    clipped = np.clip(np.nan_to_num(rounded, nan=0.0), low, high)
    if width == 64:
        # float64 cannot hold 2**63-1 exactly; clip in the integer domain
        result = np.where(clipped >= 2.0 ** 63, np.iinfo(np.uint64).max if not signed
                          else np.iinfo(np.int64).max, 0)
        small = np.where(clipped >= 2.0 ** 63, 0, clipped)
        ints = small.astype(np.int64) if signed else small.astype(np.uint64)
        ints = np.where(clipped >= 2.0 ** 63, result.astype(ints.dtype), ints)
        return as_signed(ints, dst_dtype)
    ints = clipped.astype(np.int64)
    return as_signed(ints, dst_dtype)


def int_to_float(values, signed: bool, dst_element, mode=None) -> np.ndarray:
    """itof: integers (signed or unsigned reading) to a float type."""
    values = np.asarray(values)
    source = values if signed else as_unsigned(values)
    if values.dtype == np.bool_:
        source = values.astype(np.int8) * (-1 if signed else 1)
    dtype = np_dtype(dst_element)
    if dst_element.name in ("tf32", "fnv8E5M3FNU"):
        return convert_float(source.astype(np.float64), dst_element, mode)
    if mode in (None, RoundingMode.NEAREST_EVEN):
        if source.dtype.itemsize == 8 and dtype.itemsize < 4:
            return source.astype(np.float32).astype(dtype)  # via f32: double rounding is exact here
        return source.astype(dtype)
    wide = source.astype(np.float64)
    residual = None
    if source.dtype.itemsize == 8:
        back = wide.astype(source.dtype)
        residual = (source > back) * 1.0 - (source < back) * 1.0
    return round_float(wide, dtype, mode, residual)


def extend_int(values, dst_dtype: np.dtype, signed: bool) -> np.ndarray:
    values = np.asarray(values)
    if values.dtype == np.bool_:
        return (values.astype(np.int64) * (-1 if signed else 1)).astype(dst_dtype) \
            if signed else values.astype(dst_dtype)
    source = values if signed else as_unsigned(values)
    if values.dtype == ml_dtypes.int4:
        source = values.astype(np.int8) if signed else as_unsigned(values)
    return as_signed(source.astype(np.int64 if signed else np.uint64), dst_dtype)


def truncate_int(values, dst_dtype: np.dtype) -> np.ndarray:
    values = np.asarray(values)
    if dst_dtype == np.bool_:
        return (values.astype(np.int64) & 1).astype(np.bool_)
    return as_signed(as_unsigned(values).astype(np.uint64), dst_dtype)


def bitcast(values, src_element, dst_element) -> np.ndarray:
    """Same-width reinterpretation; pointers and i64 share the uint64 storage width."""
    values = np.asarray(values)
    dtype = np_dtype(dst_element)
    if getattr(src_element, "name", None) in ("fnv8E5M3FNU", "tf32") or \
            getattr(dst_element, "name", None) in ("fnv8E5M3FNU", "tf32"):
        raise TypeError("bitcast of tf32 / fnv8E5M3FNU is not supported by the interpreter")
    if values.dtype == np.bool_ or dtype == np.bool_:
        return values.astype(dtype)
    if values.dtype.itemsize != dtype.itemsize:
        raise TypeError(f"bitcast between widths {values.dtype.itemsize} and {dtype.itemsize}")
    return np.ascontiguousarray(values).view(dtype)


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
