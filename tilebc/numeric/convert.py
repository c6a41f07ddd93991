"""Exact element conversions: the semantics of ftof, itof, ftoi, exti, trunci and bitcast.

Every function takes and returns numpy arrays in the storage `tilebc.numeric.numerics` defines:

  * i1 is numpy bool_; i4 is ml_dtypes.int4; i8/i16/i32/i64 are the signed numpy integers. Integers are
    signless: the bits are what counts, and `signed=False` reads them as unsigned (200 stored in an i8
    array is int8(-56)).
  * f16 is float16; bf16, f8E4M3FN, f8E5M2, f8E8M0FNU, f4E2M1FN are the ml_dtypes types (one byte per
    fp8/fp4 element); f32/f64 are float32/float64.
  * tf32 is float32 with the low 13 mantissa bits zero (4 bytes per element, the data-layout rule).
  * fnv8E5M3FNU has no numpy type: its bit patterns are held in uint8.

    float_to_float(array, src, dst, rounding)            ftof
    int_to_float(array, src, dst, signed, rounding)      itof
    float_to_int(array, src, dst, signed, rounding, saturating)   ftoi
    ext_int(array, src, dst, signed)                     exti
    trunc_int(array, src, dst)                           trunci  (trunc_int_violations: overflow flags)
    bitcast(array, src, dst)                             bitcast

Element types are ElementType objects or their names ("f32"); rounding is a RoundingMode or its keyword.

Rounding. NEAREST_EVEN, ZERO, NEGATIVE_INF, POSITIVE_INF and NEAREST_AWAY are computed exactly (every
source value is exact in float64, or is pre-rounded to odd at 53 bits for 64-bit integers, which keeps the
final rounding correct). APPROX and FULL are accepted where an op takes them and round to nearest-even.
Which (op, source, target, rounding) combinations a bytecode version accepts is `rounding_supported`.

Special values follow the type-system seed (5.1.3): IEEE and IEEE-like targets (f16, bf16, f32, tf32,
f64) round and may overflow to Inf (directed modes overflow to ±MAX where IEEE 754 says so); NaN stays NaN
with its sign and leading payload bits (numpy's rule: a payload that truncates to zero becomes 1).
Saturating targets never produce Inf: e5m2 clamps to ±MAX_NORM and keeps NaN; e4m3 clamps and maps NaN
to +MAX_NORM. The other satfinite targets, which the seed does not tabulate, follow PTX's satfinite
conversions: e2m1 (no NaN) maps NaN to +MAX_NORM; e8m0 and e5m3 (unsigned) keep NaN as 0xFF and clamp
negative values and values below their range to their smallest value (e8m0 has no zero: 2^-127).

Float to integer rounds toward zero (NEAREST_INT_TO_ZERO; the other modes are honoured), then clamps to
the target range with NaN giving 0 - the saturating ftoi of 13.4 and PTX's cvt.rzi behaviour. Without
`saturating`, out-of-range inputs are undefined behaviour in Tile IR; `float_to_int_undefined` marks them.
"""
from __future__ import annotations

import functools
from typing import Optional, Union

import numpy as np

from ..errors import TilebcError
from ..ir.types import ELEMENT_TYPES, ElementType
from .numerics import (NUMPY_DTYPES, FloatFormat, check_storage, decode_bits, encode_exact,
                       float_format, from_bits, to_bits)
from ..ops.enums import IntegerOverflow, RoundingMode
from ..ops.table import by_mnemonic
from ..version import V13_1, V13_2, V13_3, V13_4, Version


class ConversionError(TilebcError):
    """A conversion that Tile IR does not define (wrong kinds, widths or rounding mode)."""


RM = RoundingMode
ElementLike = Union[ElementType, str]


def _element(element: ElementLike) -> ElementType:
    if isinstance(element, ElementType):
        return element
    try:
        return ELEMENT_TYPES[element]
    except KeyError:
        raise ConversionError(f"unknown element type {element!r}") from None


def _rounding(rounding) -> RoundingMode:
    if isinstance(rounding, RoundingMode):
        return rounding
    try:
        return RoundingMode.from_keyword(str(rounding))
    except KeyError:
        raise ConversionError(f"unknown rounding mode {rounding!r}") from None


# ---------------------------------------------------------------------------------------------------
# Which rounding modes each conversion accepts, per version. Facts from NVIDIA's verifier (13.1-13.3)
# and cuTile's ftof table (13.4 opened directed and nearest-away rounding to more targets).

_FLOATS = ("f64", "f32", "tf32", "f16", "bf16", "f8E5M2", "f8E8M0FNU", "f8E4M3FN", "f4E2M1FN",
           "fnv8E5M3FNU")
_NOT_FROM_FOR_E8M0_EARLY = ("f64", "f8E5M2", "f8E4M3FN")


def _ftof_rules():
    """{(src, dst): {rounding: first version}} for ftof."""
    rules = {}

    def allow(sources, target, rounding, since):
        for source in sources:
            if source != target:
                rules.setdefault((source, target), {})[rounding] = since

    everyone = _FLOATS
    for target in ("f64", "f32", "tf32", "bf16", "f16", "f8E4M3FN", "f8E5M2", "f4E2M1FN"):
        allow(everyone, target, RM.NEAREST_EVEN, V13_1)
    allow(everyone, "fnv8E5M3FNU", RM.NEAREST_EVEN, V13_4)
    for target in ("f64", "f32", "tf32", "f16", "bf16"):
        allow(everyone, target, RM.ZERO, V13_4)
    for mode in (RM.ZERO, RM.POSITIVE_INF):
        allow([s for s in everyone if s not in _NOT_FROM_FOR_E8M0_EARLY], "f8E8M0FNU", mode, V13_2)
        allow(_NOT_FROM_FOR_E8M0_EARLY, "f8E8M0FNU", mode, V13_4)
    narrow = ("f64", "f32", "tf32", "f8E8M0FNU", "fnv8E5M3FNU")
    for mode in (RM.NEGATIVE_INF, RM.POSITIVE_INF):
        allow(everyone, "f64", mode, V13_4)
        allow([s for s in everyone if s != "f8E8M0FNU"], "f32", mode, V13_4)
        allow([s for s in everyone if s not in narrow], "f16", mode, V13_4)
    allow(everyone, "f64", RM.NEAREST_AWAY, V13_4)
    allow([s for s in everyone if s not in ("f64", "f8E8M0FNU")], "f32", RM.NEAREST_AWAY, V13_4)
    allow([s for s in everyone if s not in ("f64", "f8E8M0FNU")], "tf32", RM.NEAREST_AWAY, V13_4)
    allow([s for s in everyone if s not in narrow], "f16", RM.NEAREST_AWAY, V13_4)
    return rules


FTOF_ROUNDING = _ftof_rules()


def rounding_supported(op: str, src: ElementLike, dst: ElementLike, rounding,
                       version: Version) -> bool:
    """Whether `op` (ftof, itof, ftoi) accepts this rounding mode for src -> dst at `version`."""
    src, dst, rounding = _element(src), _element(dst), _rounding(rounding)
    rule = _ROUNDING_RULES.get(op)
    if rule is not None:
        return rule(src, dst, rounding, version)
    raise ConversionError(f"{op} takes no rounding mode")


def _ftof_rounding(src: ElementType, dst: ElementType, rounding, version: Version) -> bool:
    since = FTOF_ROUNDING.get((src.name, dst.name), {}).get(rounding)
    return since is not None and version >= since


# The ops with a rounding mode: whether they accept one for src -> dst at a version.
_ROUNDING_RULES = by_mnemonic({
    "ftof": _ftof_rounding,
    "itof": lambda src, dst, rounding, version: dst.name != "f8E8M0FNU" and rounding is RM.NEAREST_EVEN,
    "ftoi": lambda src, dst, rounding, version: rounding is RM.NEAREST_INT_TO_ZERO,
}, "conversion rounding rules")


# ---------------------------------------------------------------------------------------------------
# Rounding exact float64 values to a format.

_MAGNITUDE_MODES = (RM.NEAREST_EVEN, RM.ZERO, RM.NEGATIVE_INF, RM.POSITIVE_INF, RM.NEAREST_AWAY,
                    RM.APPROX, RM.FULL)


def _round_magnitude(scaled: np.ndarray, negative: np.ndarray, mode: RoundingMode) -> np.ndarray:
    """Round non-negative `scaled` to an integer as `mode` rounds a value of the given sign."""
    if mode in (RM.NEAREST_EVEN, RM.APPROX, RM.FULL):
        return np.rint(scaled)
    if mode is RM.NEAREST_AWAY:
        whole = np.floor(scaled)
        return whole + (scaled - whole >= 0.5)  # the fraction is exact; scaled + 0.5 may not be
    if mode is RM.ZERO:
        return np.floor(scaled)
    if mode is RM.POSITIVE_INF:
        return np.where(negative, np.floor(scaled), np.ceil(scaled))
    if mode is RM.NEGATIVE_INF:
        return np.where(negative, np.ceil(scaled), np.floor(scaled))
    raise ConversionError(f"rounding mode {mode.keyword} does not apply to float results")


def _overflows_to_inf(negative: np.ndarray, mode: RoundingMode) -> np.ndarray:
    """IEEE 754 7.4: which overflowing results become Inf (the rest become ±MAX)."""
    if mode is RM.ZERO:
        return np.zeros(negative.shape, bool)
    if mode is RM.POSITIVE_INF:
        return ~negative
    if mode is RM.NEGATIVE_INF:
        return negative
    return np.ones(negative.shape, bool)


def round_float64(values: np.ndarray, dst: ElementLike, rounding=RM.NEAREST_EVEN,
                  nan_bits: Optional[np.ndarray] = None) -> np.ndarray:
    """Bit patterns (uint64) of float64 `values` rounded to `dst` under the conversion rules.

    `nan_bits`, where given, are the NaN results to use for NaN inputs of IEEE targets (payload
    propagation); otherwise the target's canonical quiet NaN with the input's sign is used."""
    fmt = float_format(_element(dst))
    mode = _rounding(rounding)
    if mode not in _MAGNITUDE_MODES:
        raise ConversionError(f"rounding mode {mode.keyword} does not apply to float results")
    with np.errstate(over="ignore", invalid="ignore"):
        return _round_float64(np.asarray(values, dtype=np.float64), fmt, mode, nan_bits)


def float_to_bits(value: float, element: ElementType) -> int:
    """The bit pattern of `value` rounded to the element type (nearest-even, the conversion rules
    above: IEEE targets may give Inf, fp8/fp4 targets saturate)."""
    return int(round_float64(np.array([value], dtype=np.float64), element)[0])


def _round_float64(values, fmt: FloatFormat, mode: RoundingMode, nan_bits) -> np.ndarray:
    negative = np.signbit(values)
    nan = np.isnan(values)
    inf = np.isinf(values)
    magnitude = np.where(nan | inf, 0.0, np.abs(values))
    if fmt.name == "f64":
        rounded = magnitude
    else:
        _, exp2 = np.frexp(magnitude)
        quantum = np.maximum(exp2.astype(np.int64) - 1, fmt.emin) - fmt.man_bits
        scaled = np.ldexp(magnitude, -quantum)
        integral = _round_magnitude(scaled, negative, mode)
        if fmt.man_bits == 0 and mode in (RM.NEAREST_EVEN, RM.APPROX, RM.FULL):
            # No mantissa (e8m0): a tie goes to the even exponent field.
            odd_field = (quantum + fmt.bias) % 2 == 1
            integral = np.where(scaled == 1.5, np.where(odd_field, 2.0, 1.0), integral)
        rounded = np.ldexp(integral, quantum)
    max_value = fmt.max_value
    over = rounded > max_value
    if fmt.saturating:
        rounded = np.where(over | inf, max_value, rounded)
    else:
        to_inf = _overflows_to_inf(negative, mode)
        rounded = np.where(over, np.where(to_inf, np.inf, max_value), rounded)
        rounded = np.where(inf, np.inf, rounded)
    if not fmt.subnormals:
        # e8m0 has no zero: everything below 2^-127 becomes the smallest value.
        rounded = np.maximum(rounded, np.ldexp(1.0, fmt.emin))
    signed_values = np.where(negative, -rounded, rounded)
    if not fmt.signed:
        smallest = 0.0 if fmt.subnormals else np.ldexp(1.0, fmt.emin)
        signed_values = np.where(negative, smallest, signed_values)
    bits = encode_exact(signed_values, fmt)
    return np.where(nan, _nan_result(fmt, negative, nan_bits), bits).astype(np.uint64)


def _nan_result(fmt: FloatFormat, negative: np.ndarray, nan_bits) -> np.ndarray:
    if fmt.nan_to_max:
        return np.full(negative.shape, fmt.max_bits, dtype=np.uint64)
    if nan_bits is not None:
        return nan_bits
    canonical = np.uint64(fmt.canonical_nan)
    if not fmt.signed:
        return np.full(negative.shape, canonical, dtype=np.uint64)
    return np.where(negative, canonical | np.uint64(fmt.sign_bit), canonical)


def _propagated_nan(bits: np.ndarray, src: FloatFormat, dst: FloatFormat) -> Optional[np.ndarray]:
    """NaN patterns carrying the source's sign and leading payload bits into an IEEE-NaN target."""
    if dst.nan != "ieee" or src.nan != "ieee" or dst.nan_to_max:
        return None
    payload = bits & np.uint64((1 << src.man_bits) - 1)
    shift = src.man_bits - dst.man_bits
    if shift >= 0:
        payload = payload >> np.uint64(shift)
    else:
        payload = payload << np.uint64(-shift)
    payload = np.where(payload == 0, np.uint64(1), payload)
    exponent = np.uint64(((1 << dst.exp_bits) - 1) << dst.man_bits)
    negative = (bits & np.uint64(src.sign_bit)) != 0
    return np.where(negative, np.uint64(dst.sign_bit), np.uint64(0)) | exponent | payload


# ---------------------------------------------------------------------------------------------------
# ftof


# ftof pairs whose nearest-even result numpy's (ml_dtypes') cast gives bit for bit on every value
# but NaN: exact widenings, and narrowings between IEEE formats with subnormals, where the
# correctly rounded result is unique (and overflow gives Inf, as above). True: a narrowing.
_NATIVE_FTOF = {("f16", "f32"): False, ("bf16", "f32"): False, ("f16", "f64"): False,
                ("bf16", "f64"): False, ("f32", "f64"): False,
                ("f32", "f16"): True, ("f32", "bf16"): True, ("f64", "f32"): True}
@functools.lru_cache(maxsize=None)
def _magnitude_limits(src: str, dst: str):
    """(unsigned dtype of `src`'s bits, magnitude mask, +Inf's bits, the bits of the smallest
    magnitude normal in both formats), from the formats' FloatFormat."""
    fmt, other = float_format(src), float_format(dst)
    inf = ((1 << fmt.exp_bits) - 1) << fmt.man_bits
    floor = (max(fmt.emin, other.emin) + fmt.bias) << fmt.man_bits  # 2^e, mantissa 0
    return np.dtype(f"u{fmt.bits // 8}").type, fmt.sign_bit - 1, inf, floor


def _native_cast_exact(array: np.ndarray, src: ElementType, dst: ElementType) -> bool:
    """True where the CPU's cast gives the rounding rules' bits: no NaN (payloads follow the rules
    above; NaN is a magnitude above Inf, read from the bits, as isnan would raise the invalid flag
    on signalling NaNs) and no nonzero magnitude below the normal range of either format: there
    the CPU's cast would follow its flush-to-zero / denormals-are-zero modes, which a library
    may set."""
    unsigned, mask, inf, floor = _magnitude_limits(src.name, dst.name)
    magnitude = array.view(unsigned) & unsigned(mask)
    if (magnitude > unsigned(inf)).any():
        return False
    return not ((magnitude < unsigned(floor)) & (magnitude != 0)).any()


def float_to_float(array, src: ElementLike, dst: ElementLike, rounding=RM.NEAREST_EVEN) -> np.ndarray:
    """ftof: convert a float array of element type `src` to `dst` with `rounding`."""
    src, dst = _element(src), _element(dst)
    _require(src.is_float and dst.is_float and src != dst, float_to_float, src, dst,
             "two different float types")
    array = check_storage(array, src, "ftof source")
    narrowing = _NATIVE_FTOF.get((src.name, dst.name))
    if (narrowing is not None and _rounding(rounding) is RM.NEAREST_EVEN
            and _native_cast_exact(array, src, dst)):
        if narrowing:
            with np.errstate(over="ignore"):  # overflow to Inf is the result, as below
                result = array.astype(NUMPY_DTYPES[dst.name])
        else:
            result = array.astype(NUMPY_DTYPES[dst.name])
        return result[()] if result.ndim == 0 else result  # a 0-d result is a scalar, as below
    bits = to_bits(array, src)
    src_fmt, dst_fmt = float_format(src), float_format(dst)
    values = decode_bits(bits, src_fmt)
    result = round_float64(values, dst, rounding, _propagated_nan(bits, src_fmt, dst_fmt))
    return from_bits(result, dst)


def _require(condition: bool, function, src: ElementType, dst: ElementType, expected: str) -> None:
    """ConversionError unless `condition`; `function` is the conversion, named by its op."""
    if not condition:
        op = _OP_OF[function.__name__]
        raise ConversionError(f"{op} from {src.name} to {dst.name} is not defined; expected {expected}")


# ---------------------------------------------------------------------------------------------------
# Integers: values of signless storage


def int_range(element: ElementLike, signed: bool):
    """(min, max) of an integer type read as signed or unsigned (i1 signed is [-1, 0])."""
    bits = _element(element).bits
    if signed:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


# Storage of the byte-multiple integers -> its unsigned view: their readings and stores are plain
# numpy casts (sign extension, truncation), the fast path of the integer ops.
_WHOLE_INTS = {name: (NUMPY_DTYPES[name], np.dtype(f"u{NUMPY_DTYPES[name].itemsize}"))
               for name in ("i8", "i16", "i32", "i64")}


def int_values(array, element: ElementLike, signed: bool) -> np.ndarray:
    """Integer values of signless storage: int64 when signed, uint64 when unsigned."""
    element = _element(element)
    whole = _WHOLE_INTS.get(element.name)
    if whole is not None:
        array = np.asarray(array)
        if array.dtype is whole[0]:
            if not signed:
                return array.view(whole[1]).astype(np.uint64)
            values = array.astype(np.int64)
            # a 0-d reading is a numpy scalar below 64 bits, as the general path gives
            return values[()] if values.ndim == 0 and element.bits < 64 else values
    bits = to_bits(check_storage(array, element), element)
    if not signed:
        return bits
    width = element.bits
    if width == 64:
        return bits.view(np.int64)
    sign = np.uint64(1 << (width - 1))
    return (bits ^ sign).astype(np.int64) - np.int64(1 << (width - 1))


def int_from_values(values, element: ElementLike) -> np.ndarray:
    """Storage array holding the low bits of integer values (int64 or uint64 arrays)."""
    values = np.asarray(values)
    whole = _WHOLE_INTS.get(element if isinstance(element, str) else element.name)
    if whole is not None and values.dtype.kind in "iu":
        stored = values.astype(whole[0])  # keeps the low bits, as from_bits does
        return stored[()] if stored.ndim == 0 else stored
    return from_bits(values.astype(np.int64).view(np.uint64) if values.dtype.kind == "i"
                     else values.astype(np.uint64), element)


def _bit_length(magnitude: np.ndarray) -> np.ndarray:
    """Exact bit lengths of uint64 values."""
    length = np.zeros(magnitude.shape, dtype=np.int64)
    rest = magnitude.copy()
    for step in (32, 16, 8, 4, 2, 1):
        wide = rest >= (np.uint64(1) << np.uint64(step))
        length += np.where(wide, step, 0)
        rest = np.where(wide, rest >> np.uint64(step), rest)
    return length + (rest > 0)


def _round_to_odd_53(magnitude: np.ndarray) -> np.ndarray:
    """uint64 magnitudes as float64 after rounding to odd at 53 bits: exact below 2^53, and a later
    rounding to at most 51 bits gives the correctly rounded result."""
    shift = np.maximum(_bit_length(magnitude) - 53, 0).astype(np.uint64)
    kept = magnitude >> shift
    lost = magnitude & ((np.uint64(1) << shift) - np.uint64(1))
    kept = np.where(lost != 0, kept | np.uint64(1), kept)
    return np.ldexp(kept.astype(np.float64), shift.astype(np.int64))


def _round_int_exact(magnitude: np.ndarray, negative: np.ndarray, mode: RoundingMode) -> np.ndarray:
    """uint64 magnitudes rounded to 53 significant bits by `mode` (for f64 targets)."""
    big = magnitude >= np.uint64(1 << 53)
    result = magnitude.astype(np.float64)  # exact where not big
    for index in np.flatnonzero(big):
        value = int(magnitude.flat[index])
        shift = value.bit_length() - 53
        kept, lost = value >> shift, value & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        up = {RM.ZERO: False,
              RM.NEAREST_AWAY: lost >= half,
              RM.POSITIVE_INF: lost != 0 and not negative.flat[index],
              RM.NEGATIVE_INF: lost != 0 and bool(negative.flat[index])}.get(
                  mode, lost > half or (lost == half and kept & 1 == 1))
        result.flat[index] = float((kept + int(up)) << shift)
    return result


def int_to_float(array, src: ElementLike, dst: ElementLike, signed: bool = True,
                 rounding=RM.NEAREST_EVEN) -> np.ndarray:
    """itof: convert a (signless) integer array to floats, reading it as `signed` or unsigned."""
    src, dst = _element(src), _element(dst)
    _require(src.is_integer and dst.is_float, int_to_float, src, dst, "integer -> float")
    mode = _rounding(rounding)
    values = int_values(array, src, signed)
    if src.bits <= 32 and dst.name in ("f32", "f64") and mode is RM.NEAREST_EVEN:
        # |value| < 2^32: numpy's int64 cast is one correctly rounded conversion (exact for f64)
        result = np.asarray(values).astype(np.int64).astype(NUMPY_DTYPES[dst.name])
        return result[()] if result.ndim == 0 else result  # a 0-d result is a scalar, as below
    if values.dtype == np.int64:
        negative = values < 0
        magnitude = np.where(negative, (~values.view(np.uint64)) + np.uint64(1),
                             values.view(np.uint64))
    else:
        negative = np.zeros(values.shape, bool)
        magnitude = values
    if dst.name == "f64":
        exact = _round_int_exact(magnitude, negative, mode)
    else:
        exact = _round_to_odd_53(magnitude)
    exact = np.where(negative, -exact, exact)
    return from_bits(round_float64(exact, dst, mode), dst)


_INT_ROUNDING = {RM.NEAREST_INT_TO_ZERO: np.trunc, RM.ZERO: np.trunc, RM.NEAREST_EVEN: np.rint,
                 RM.NEGATIVE_INF: np.floor, RM.POSITIVE_INF: np.ceil}


def _float_integral(array, src: ElementType, rounding) -> np.ndarray:
    mode = _rounding(rounding)
    if mode is RM.NEAREST_AWAY:
        def rounder(values):
            whole = np.floor(np.abs(values))
            return np.copysign(whole + (np.abs(values) - whole >= 0.5), values)
    else:
        rounder = _INT_ROUNDING.get(mode)
    if rounder is None:
        raise ConversionError(f"rounding mode {mode.keyword} does not apply to integer results")
    values = decode_bits(to_bits(check_storage(array, src, "ftoi source"), src), float_format(src))
    return rounder(values)


def float_to_int(array, src: ElementLike, dst: ElementLike, signed: bool = True,
                 rounding=RM.NEAREST_INT_TO_ZERO, saturating: bool = False) -> np.ndarray:
    """ftoi: convert floats to integers (rounded toward zero by default), clamped to the target's
    signed or unsigned range, NaN giving 0. `saturating` only documents intent: without it, the
    out-of-range elements are undefined in Tile IR (see `float_to_int_undefined`)."""
    src, dst = _element(src), _element(dst)
    _require(src.is_float and dst.is_integer, float_to_int, src, dst, "float -> integer")
    integral = _float_integral(array, src, rounding)
    integral = np.where(np.isnan(integral), 0.0, integral)
    width = dst.bits
    if signed:
        limit = 2.0 ** (width - 1)  # exact; float64(2^63 - 1) would round up to it
        clipped = np.clip(integral, -limit, np.nextafter(limit, 0.0))
        result = np.where(integral >= limit, (1 << (width - 1)) - 1, clipped.astype(np.int64))
        return int_from_values(result.astype(np.int64), dst)
    limit = 2.0 ** width
    clipped = np.clip(integral, 0.0, np.nextafter(limit, 0.0))
    high_half = clipped >= 2.0 ** 63
    low_part = np.where(high_half, clipped - 2.0 ** 63, clipped).astype(np.int64).view(np.uint64)
    result = np.where(high_half, low_part + np.uint64(1 << 63), low_part)
    result = np.where(integral >= limit, np.uint64((1 << width) - 1), result)
    return int_from_values(result.astype(np.uint64), dst)


def float_to_int_undefined(array, src: ElementLike, dst: ElementLike, signed: bool = True,
                           rounding=RM.NEAREST_INT_TO_ZERO) -> np.ndarray:
    """Mask of elements whose non-saturating ftoi is undefined: NaN, Inf, or out of range."""
    src, dst = _element(src), _element(dst)
    integral = _float_integral(array, src, rounding)
    low, high = int_range(dst, signed)
    with np.errstate(invalid="ignore"):
        return ~((integral >= float(low)) & (integral < float(high) + 1))


# ---------------------------------------------------------------------------------------------------
# exti, trunci, bitcast


def ext_int(array, src: ElementLike, dst: ElementLike, signed: bool = True) -> np.ndarray:
    """exti: sign-extend (`signed`) or zero-extend to a strictly wider integer type."""
    src, dst = _element(src), _element(dst)
    _require(src.is_integer and dst.is_integer and dst.bits > src.bits, ext_int, src, dst,
             "a strictly wider integer type")
    return int_from_values(int_values(array, src, signed), dst)


def trunc_int(array, src: ElementLike, dst: ElementLike) -> np.ndarray:
    """trunci: keep the low bits of each integer (a strictly narrower integer type)."""
    src, dst = _element(src), _element(dst)
    _require(src.is_integer and dst.is_integer and dst.bits < src.bits, trunc_int, src, dst,
             "a strictly narrower integer type")
    return from_bits(to_bits(check_storage(array, src, "trunci source"), src), dst)


def trunc_int_violations(array, src: ElementLike, dst: ElementLike,
                         overflow=IntegerOverflow.NONE) -> np.ndarray:
    """Elements that break trunci's overflow promise: no_signed_wrap needs the dropped bits to equal
    the result's sign bit, no_unsigned_wrap needs them to be zero (violations are undefined)."""
    src, dst = _element(src), _element(dst)
    overflow = IntegerOverflow(overflow)
    result = trunc_int(array, src, dst)
    broken = np.zeros(np.shape(result), bool)
    if overflow in (IntegerOverflow.NO_SIGNED_WRAP, IntegerOverflow.NO_WRAP):
        broken |= int_values(array, src, True) != int_values(result, dst, True)
    if overflow in (IntegerOverflow.NO_UNSIGNED_WRAP, IntegerOverflow.NO_WRAP):
        broken |= int_values(array, src, False) != int_values(result, dst, False)
    return broken


def bitcast(array, src: ElementLike, dst: ElementLike) -> np.ndarray:
    """bitcast: reinterpret each element's bits as another non-pointer type of the same width
    (tf32 counts as its 19-bit pattern's width; use ptr_to_int/int_to_ptr for pointers)."""
    src, dst = _element(src), _element(dst)
    _require(src.bits == dst.bits, bitcast, src, dst, f"a type of the same width ({src.bits} bits)")
    return from_bits(to_bits(check_storage(array, src, "bitcast source"), src), dst)


# The op each conversion function implements.
CONVERSIONS = by_mnemonic({"ftof": float_to_float, "itof": int_to_float, "ftoi": float_to_int,
                           "exti": ext_int, "trunci": trunc_int, "bitcast": bitcast},
                          "conversion functions")
_OP_OF = {function.__name__: op for op, function in CONVERSIONS.items()}
