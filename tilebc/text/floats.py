"""Float literals exactly as MLIR prints them (llvm::APFloat::toString and MLIR's printFloatValue).

MLIR first tries 6 significant digits in scientific form (`1.500000e+00`: the seventh printed
digit is padding); if that does not parse back to the same bits it prints the shortest
"natural precision" form APFloat picks (`3.14159274`, `9.99999993E-9`); if that has no decimal
point it falls back to the raw bits in hex (`0x4B800000`). Inf and NaN are always hex.
"""
from __future__ import annotations

import math
from functools import lru_cache

from ..ir.types import ElementType
from ..numeric.ieee import float_from_bits, float_to_bits

# Significand precision (bits, implicit bit included) of each float type, as APFloat defines it.
_PRECISION = {"f16": 11, "bf16": 8, "f32": 24, "tf32": 11, "f64": 53, "f8E4M3FN": 4,
              "f8E5M2": 3, "f8E8M0FNU": 1, "f4E2M1FN": 2, "fnv8E5M3FNU": 4}


def _adjust_digits(digits: str, exp: int, precision: int):
    """APFloat's AdjustToPrecision on a decimal digit string (most significant first):
    round half up on the first dropped digit, then strip trailing zeros."""
    if len(digits) <= precision:
        return digits, exp
    dropped = len(digits) - precision
    kept = digits[:precision]
    if digits[precision] < "5":
        stripped = kept.rstrip("0")
        return stripped, exp + dropped + (len(kept) - len(stripped))
    value = int(kept) + 1
    text = str(value)
    if len(text) > len(kept):  # carried through: exactly one significant digit
        return "1", exp + dropped + len(kept)
    stripped = text.rstrip("0")
    return stripped, exp + dropped + (len(text) - len(stripped))


def apfloat_to_string(value: float, semantics_precision: int, format_precision: int = 0,
                      format_max_padding: int = 3, truncate_zero: bool = True) -> str:
    """Port of llvm::IEEEFloat::toString for finite values."""
    negative = math.copysign(1.0, value) < 0
    sign = "-" if negative else ""
    if value == 0:
        if not format_max_padding:
            if truncate_zero:
                return sign + "0.0E+0"
            return sign + "0.0" + "0" * max(format_precision - 1, 0) + "e+00"
        return sign + "0"
    if not format_precision:
        format_precision = 2 + semantics_precision * 59 // 196
    numerator, denominator = abs(value).as_integer_ratio()
    exp2 = -(denominator.bit_length() - 1)
    significand = numerator
    # Trailing binary zeros do not count.
    while significand % 2 == 0:
        significand //= 2
        exp2 += 1
    if exp2 >= 0:
        significand <<= exp2
        exp = 0
    else:
        significand *= 5 ** (-exp2)
        exp = exp2
    # APFloat first drops whole decimal digits it knows it will not need (by bit count) ...
    bits = significand.bit_length()
    bits_required = (format_precision * 196 + 58) // 59
    if bits > bits_required:
        removable = (bits - bits_required) * 59 // 196
        if removable:
            significand //= 10 ** removable
            exp += removable
    digits = str(significand)
    stripped = digits.rstrip("0")
    exp += len(digits) - len(stripped)
    # ... then rounds the remaining digits half up.
    digits, exp = _adjust_digits(stripped, exp, format_precision)
    count = len(digits)
    if not format_max_padding:
        scientific = True
    elif exp >= 0:
        scientific = exp > format_max_padding or count + exp > format_precision
    else:
        msd = exp + count - 1
        scientific = msd < 0 and -msd > format_max_padding
    if scientific:
        exp += count - 1
        mantissa = digits[0] + "." + (digits[1:] if count > 1 or not truncate_zero else "0")
        if not truncate_zero and format_precision > count - 1:
            mantissa += "0" * (format_precision - count + 1)
        exponent = str(abs(exp))
        if not truncate_zero and len(exponent) < 2:
            exponent = "0" + exponent
        return f"{sign}{mantissa}{'E' if truncate_zero else 'e'}{'+' if exp >= 0 else '-'}{exponent}"
    if exp >= 0:
        return sign + digits + "0" * exp
    whole = exp + count
    if whole > 0:
        return sign + digits[:whole] + "." + digits[whole:]
    return sign + "0." + "0" * (-whole) + digits


@lru_cache(maxsize=1 << 16)  # constants repeat; each costs big-integer digit work
def format_float(bits: int, element: ElementType) -> str:
    """MLIR's printFloatValue for a float of type `element` given by its bit pattern."""
    value = float_from_bits(bits, element)
    if math.isfinite(value):
        precision = _PRECISION[element.name]
        text = apfloat_to_string(value, precision, 6, 0, False)
        if float_to_bits(float(text), element) == bits:
            return text
        text = apfloat_to_string(value, precision)
        if "." in text:
            return text
    return "0x%X" % bits


def constant_name_part(bits: int, element: ElementType):
    """The `_N` part MLIR's ConstantOp naming adds for a float splat: the value if it converts to a
    64-bit unsigned integer exactly (toward zero), 'NaN' for NaN, otherwise nothing."""
    value = float_from_bits(bits, element)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value) or value < 0 or (value == 0 and math.copysign(1.0, value) < 0):
        return None
    if value != int(value) or value >= 2 ** 64:
        return None
    return str(int(value))
