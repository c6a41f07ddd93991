"""The parameters of every float element format, readable without numpy (the verifier uses them
for its conversion-range checks; numerics.py builds the numpy conversions on them)."""
from __future__ import annotations

import math

from ..errors import TilebcError
from ..record import Record  # not dataclasses: start-up time

# Float formats: the parameters every conversion and constant encoder reads.


class FloatFormat(Record):
    """An IEEE-like binary format. `nan` is "ieee" (all-ones exponent with a non-zero mantissa),
    "all_ones" (only the all-ones pattern, per sign) or "none"; `saturating` formats convert with
    satfinite semantics (type-system seed 5.1.3): they never produce Inf and clamp to ±MAX_NORM.
    `nan_to_max`: a NaN source converts to +MAX_NORM (e4m3, and e2m1 which has no NaN)."""

    _fields = ("name", "exp_bits", "man_bits", "bias", "signed", "inf", "nan", "subnormals",
               "saturating", "nan_to_max")

    def __init__(self, name: str, exp_bits: int, man_bits: int, bias: int, signed: bool = True,
                 inf: bool = True, nan: str = "ieee", subnormals: bool = True,
                 saturating: bool = False, nan_to_max: bool = False):
        for field, value in zip(self._fields, (name, exp_bits, man_bits, bias, signed, inf, nan,
                                               subnormals, saturating, nan_to_max)):
            object.__setattr__(self, field, value)

    @property
    def bits(self) -> int:
        return int(self.signed) + self.exp_bits + self.man_bits

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal value (subnormals share it)."""
        return 1 - self.bias if self.subnormals else -self.bias

    @property
    def max_exp_field(self) -> int:
        top = (1 << self.exp_bits) - 1
        return top - 1 if self.nan == "ieee" or self.inf else top

    @property
    def max_man_field(self) -> int:
        top = (1 << self.man_bits) - 1
        if self.nan == "all_ones" and self.max_exp_field == (1 << self.exp_bits) - 1:
            return top - 1 if self.man_bits else top  # e8m0: 0xFF is NaN, so 0xFE (m=0) is max
        return top

    @property
    def max_bits(self) -> int:
        """Bit pattern of +MAX_NORM."""
        if self.man_bits == 0 and self.nan == "all_ones":
            return self.max_exp_field - 1
        return (self.max_exp_field << self.man_bits) | self.max_man_field

    @property
    def max_value(self) -> float:
        # +MAX_NORM is a normal number: (1 + m / 2^man_bits) * 2^(e - bias)
        exponent, mantissa = self.max_bits >> self.man_bits, self.max_bits & ((1 << self.man_bits) - 1)
        return math.ldexp(1 + mantissa / (1 << self.man_bits), exponent - self.bias)

    @property
    def sign_bit(self) -> int:
        return 1 << (self.bits - 1) if self.signed else 0

    @property
    def canonical_nan(self) -> int | None:
        if self.nan == "none":
            return None
        if self.nan == "all_ones":
            return (1 << (self.exp_bits + self.man_bits)) - 1
        return (((1 << self.exp_bits) - 1) << self.man_bits) | (1 << (self.man_bits - 1))


FLOAT_FORMATS: dict[str, FloatFormat] = {f.name: f for f in (
    FloatFormat("f16", 5, 10, 15),
    FloatFormat("bf16", 8, 7, 127),
    FloatFormat("f32", 8, 23, 127),
    FloatFormat("tf32", 8, 10, 127),
    FloatFormat("f64", 11, 52, 1023),
    FloatFormat("f8E4M3FN", 4, 3, 7, inf=False, nan="all_ones", saturating=True, nan_to_max=True),
    FloatFormat("f8E5M2", 5, 2, 15, saturating=True),
    FloatFormat("f8E8M0FNU", 8, 0, 127, signed=False, inf=False, nan="all_ones", subnormals=False,
                saturating=True),
    FloatFormat("f4E2M1FN", 2, 1, 1, inf=False, nan="none", saturating=True, nan_to_max=True),
    FloatFormat("fnv8E5M3FNU", 5, 3, 15, signed=False, inf=False, nan="all_ones", saturating=True),
)}


def float_format(element) -> FloatFormat:
    name = element if isinstance(element, str) else element.name
    fmt = FLOAT_FORMATS.get(name)
    if fmt is None:
        raise TilebcError(f"{name} is not a float element type")
    return fmt
