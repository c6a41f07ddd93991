"""Bit patterns of f64, f32 and f16 values with Python's struct, not numpy: the text parser and
printer convert one constant at a time, where a numpy call on a one-element array costs tens of
microseconds (and numpy's import, a tenth of a second, is not needed at all). struct rounds to
nearest even as tilebc.numeric.convert does; every other format, a value that rounds to
infinity, and NaN go to convert/numerics, which decide them."""
from __future__ import annotations

import math
import struct

_PACKERS = {"f64": struct.Struct("<d"), "f32": struct.Struct("<f"), "f16": struct.Struct("<e")}
_F32 = _PACKERS["f32"]
# bf16 is the top half of an f32: (exponent bits, mantissa bits) for the integer rounding below
_ROUNDED = {"bf16": (8, 7)}


def float_to_bits(value: float, element) -> int:
    """tilebc.numeric.convert.float_to_bits (nearest even)."""
    name = element.name
    if value == value:  # NaN: convert's canonical NaN
        packer = _PACKERS.get(name)
        if packer is not None:
            try:
                return int.from_bytes(packer.pack(value), "little")
            except OverflowError:  # rounds to infinity: convert knows whether it becomes one
                pass
        elif name in _ROUNDED:
            bits = _round_finite(value, *_ROUNDED[name])
            if bits is not None:
                return bits
    from .convert import float_to_bits as exact
    return exact(value, element)


def _round_finite(value: float, exp_bits: int, man_bits: int):
    """The bits of finite `value` rounded to nearest even in an IEEE-style binary format with
    subnormals; None for infinities and values that round past the largest finite one."""
    if not math.isfinite(value):
        return None
    sign = (1 << (exp_bits + man_bits)) if math.copysign(1.0, value) < 0 else 0
    magnitude = abs(value)
    if magnitude == 0.0:
        return sign
    fraction, exponent = math.frexp(magnitude)  # magnitude = fraction * 2**exponent, exactly
    significand = int(fraction * (1 << 53))      # 53-bit integer: magnitude = it * 2**(exponent-53)
    bias = (1 << (exp_bits - 1)) - 1
    quantum = max(exponent - 1, 1 - bias) - man_bits  # the target's unit in the last place
    shift = quantum - (exponent - 53)
    if shift <= 0:
        rounded = significand << -shift
    else:
        rounded, rest = significand >> shift, significand & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        if rest > half or (rest == half and rounded & 1):
            rounded += 1
    if rounded >> (man_bits + 1):  # a carry into a new binade
        rounded >>= 1
        quantum += 1
    if rounded >> man_bits:  # normal
        field = quantum + man_bits + bias
        if field >= (1 << exp_bits) - 1:
            return None
        return sign | (field << man_bits) | (rounded - (1 << man_bits))
    return sign | rounded  # subnormal (or rounded to zero)


def float_from_bits(bits: int, element) -> float:
    """tilebc.numeric.numerics.float_from_bits (bits past the format's width ignored)."""
    name = element.name
    packer = _PACKERS.get(name)
    if packer is not None:
        size = packer.size
        return packer.unpack((bits & ((1 << (8 * size)) - 1)).to_bytes(size, "little"))[0]
    if name == "bf16":
        return _F32.unpack(((bits & 0xFFFF) << 16).to_bytes(4, "little"))[0]
    from .numerics import float_from_bits as exact
    return exact(bits, element)
