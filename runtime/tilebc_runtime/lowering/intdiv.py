"""Integer division and remainder by a compile-time constant, without `div`/`rem`.

ptxas (13.5) expands `div.u32 x, 7` into ~14 SASS instructions (a reciprocal and corrections) and
`div.s64 x, 7` into ~65 even though the divisor is an immediate, so the lowering emits the
strength-reduced forms itself (2-5 instructions):

  powers of two   unsigned: a shift or a mask; signed (truncating toward zero): add divisor - 1
                  to negative dividends (the sign smeared, shifted down) and shift arithmetically.
  other divisors  multiply-high by a "magic" reciprocal m ~ 2^p / d and shift (Granlund and
                  Montgomery, "Division by invariant integers using multiplication", 1994):

    unsigned, x <= X:  q = floor(x * m / 2^(N+s)) with m = ceil(2^(N+s) / d) is exact when
                       e * X < 2^(N+s), e = m*d - 2^(N+s). When the smallest such m needs N+1
                       bits, an even divisor first shifts x right by its trailing zeros; an odd
                       one multiplies by m - 2^N and adds x back in halves (no overflow).
    signed, N bits:    with m = floor(2^(N+s) / |d|) + 1 (e = m*|d| - 2^(N+s) in (0, |d|)),
                       floor(x * m / 2^(N+s)) is floor(x / |d|) for x >= 0 and one less than
                       ceil(x / |d|) for x < 0 whenever e * 2^(N-1) <= 2^(N+s) (s = ceil(log2
                       |d|) - 1 always qualifies, with m < 2^N); adding the sign bit of x
                       truncates toward zero, negating handles d < 0. m >= 2^(N-1) is used as
                       the negative N-bit value m - 2^N, and x is added to the high product.

  remainders      x - q*d as one `mad.lo` (q from above); unsigned powers of two as a mask.

Division by zero is not handled here (callers keep the hardware instruction for it).
"""
from __future__ import annotations


from tilebc.record import Record  # not dataclasses: start-up time


def is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


class UnsignedPlan(Record):
    """q = ((x >> pre_shift) * multiplier) >> (bits + shift), as N-bit instructions; `add`:
    the multiplier is 2^bits + multiplier (the add-and-halve fix-up); multiplier 0: a shift."""

    _fields = ("pre_shift", "multiplier", "add", "shift")

    def __init__(self, pre_shift: int, multiplier: int, add: bool, shift: int):
        for name, value in zip(self._fields, (pre_shift, multiplier, add, shift)):
            object.__setattr__(self, name, value)

    def evaluate(self, x: int, bits: int) -> int:
        """The quotient the emitted instructions compute (a reference for tests)."""
        mask = (1 << bits) - 1
        x >>= self.pre_shift
        if not self.multiplier:
            return x >> self.shift
        high = (x * self.multiplier) >> bits
        if self.add:
            return ((((x - high) & mask) >> 1) + high) >> (self.shift - 1)
        return high >> self.shift


class SignedPlan(Record):
    """See the module docstring: `power` set: |d| = 2^power; else the multiplier (as a signed
    N-bit value), whether x is added to the high product, and the arithmetic shift."""

    _fields = ("negate", "power", "multiplier", "add", "shift")

    def __init__(self, negate: bool, power: int | None, multiplier: int, add: bool,
                 shift: int):
        for name, value in zip(self._fields, (negate, power, multiplier, add, shift)):
            object.__setattr__(self, name, value)

    def evaluate(self, x: int, bits: int) -> int:
        """The quotient the emitted instructions compute (signed values; a reference for tests)."""
        mask = (1 << bits) - 1

        def signed(value):
            value &= mask
            return value - (1 << bits) if value >> (bits - 1) else value
        if self.power is not None:
            bias = ((signed(x >> (bits - 1)) & mask) >> (bits - self.power)) if self.power else 0
            q = signed(x + bias) >> self.power
        else:
            high = (x * self.multiplier) >> bits
            if self.add:
                high = signed(high + x)
            q = signed((high >> self.shift) + ((x & mask) >> (bits - 1)))
        return signed(-q) if self.negate else q


def unsigned_plan(divisor: int, bits: int, bound: int | None = None) -> UnsignedPlan:
    """The cheapest exact sequence for x // divisor over 0 <= x <= bound (default 2^bits - 1)."""
    if not 0 < divisor < (1 << bits):
        raise ValueError(f"unsigned divisor {divisor} out of range for {bits} bits")
    limit = (1 << bits) - 1 if bound is None else min(bound, (1 << bits) - 1)
    if is_power_of_two(divisor):
        return UnsignedPlan(0, 0, False, divisor.bit_length() - 1)
    found = _unsigned_magic(divisor, bits, limit)
    if found is not None:
        return UnsignedPlan(0, found[0], False, found[1])
    zeros = (divisor & -divisor).bit_length() - 1
    if zeros:
        found = _unsigned_magic(divisor >> zeros, bits, limit >> zeros)
        if found is not None:
            return UnsignedPlan(zeros, found[0], False, found[1])
    shift = (divisor - 1).bit_length()  # ceil(log2 d): e < d <= 2^shift always suffices
    multiplier = -(-(1 << (bits + shift)) // divisor)
    return UnsignedPlan(0, multiplier - (1 << bits), True, shift)


def _unsigned_magic(divisor: int, bits: int, limit: int):
    """(m, s) with m < 2^bits and the smallest s that is exact for x <= limit, or None."""
    if divisor == 1:
        return None
    for shift in range(bits + 1):
        power = 1 << (bits + shift)
        multiplier = -(-power // divisor)
        if (multiplier * divisor - power) * limit < power:
            return (multiplier, shift) if multiplier < (1 << bits) else None
    return None


def signed_plan(divisor: int, bits: int) -> SignedPlan:
    """The exact truncating sequence for x / divisor over all signed `bits`-bit x."""
    if divisor == 0 or not -(1 << (bits - 1)) <= divisor < (1 << (bits - 1)):
        raise ValueError(f"signed divisor {divisor} out of range for {bits} bits")
    magnitude = abs(divisor)
    negate = divisor < 0
    if is_power_of_two(magnitude):
        return SignedPlan(negate, magnitude.bit_length() - 1, 0, False, 0)
    for shift in range(bits):
        power = 1 << (bits + shift)
        multiplier = power // magnitude + 1
        if (multiplier * magnitude - power) << (bits - 1) <= power:
            break
    add = multiplier >= (1 << (bits - 1))
    return SignedPlan(negate, None, multiplier - (1 << bits) if add else multiplier, add, shift)


# -- emitting PTX -----------------------------------------------------------------------------
def _cls(bits: int) -> str:
    return "b64" if bits == 64 else "b32"


def _hex(value: int, bits: int) -> str:
    return f"0x{value & ((1 << bits) - 1):0{bits // 4}X}"


def udiv(w, x: str, divisor: int, bits: int = 32, bound: int | None = None) -> str:
    """Register holding x // divisor (x an unsigned `bits`-bit register, divisor > 0)."""
    plan = unsigned_plan(divisor, bits, bound)
    cls, kind = _cls(bits), f"u{bits}"

    def emit(text, *args):
        out = w.reg(cls)
        w(f"{text} {out}, {', '.join(args)}")
        return out
    if not plan.multiplier:
        return emit(f"shr.{kind}", x, str(plan.shift)) if plan.shift else x
    value = emit(f"shr.{kind}", x, str(plan.pre_shift)) if plan.pre_shift else x
    high = emit(f"mul.hi.{kind}", value, _hex(plan.multiplier, bits))
    if plan.add:
        half = emit(f"shr.{kind}", emit(f"sub.{kind}", value, high), "1")
        high = emit(f"add.{kind}", half, high)
        return emit(f"shr.{kind}", high, str(plan.shift - 1)) if plan.shift > 1 else high
    return emit(f"shr.{kind}", high, str(plan.shift)) if plan.shift else high


def urem(w, x: str, divisor: int, bits: int = 32, bound: int | None = None,
         quotient: str | None = None) -> str:
    """Register holding x % divisor (unsigned); `quotient` reuses an x // divisor at hand."""
    out = w.reg(_cls(bits))
    if is_power_of_two(divisor):
        w(f"and.b{bits} {out}, {x}, {_hex(divisor - 1, bits)}")
        return out
    if quotient is None:
        quotient = udiv(w, x, divisor, bits, bound)
    w(f"mad.lo.s{bits} {out}, {quotient}, {-divisor}, {x}")
    return out


def sdiv(w, x: str, divisor: int, bits: int = 32) -> str:
    """Register holding x / divisor truncated toward zero (signed `bits`-bit x, divisor != 0)."""
    plan = signed_plan(divisor, bits)
    cls, kind = _cls(bits), f"s{bits}"

    def emit(text, *args):
        out = w.reg(cls)
        w(f"{text} {out}, {', '.join(args)}")
        return out
    if plan.power is not None:
        q = x
        if plan.power:
            sign = emit(f"shr.{kind}", x, str(bits - 1))
            bias = emit(f"shr.u{bits}", sign, str(bits - plan.power))
            q = emit(f"shr.{kind}", emit(f"add.{kind}", x, bias), str(plan.power))
    else:
        high = emit(f"mul.hi.{kind}", x, str(plan.multiplier))
        if plan.add:
            high = emit(f"add.{kind}", high, x)
        if plan.shift:
            high = emit(f"shr.{kind}", high, str(plan.shift))
        q = emit(f"add.{kind}", high, emit(f"shr.u{bits}", x, str(bits - 1)))
    return emit(f"neg.{kind}", q) if plan.negate else q


def srem(w, x: str, divisor: int, bits: int = 32, quotient: str | None = None) -> str:
    """Register holding x - trunc(x / divisor) * divisor (the sign of x), divisor != 0."""
    if quotient is None:
        quotient = sdiv(w, x, divisor, bits)
    out = w.reg(_cls(bits))
    negated = -divisor
    if negated >= 1 << (bits - 1):  # divisor = min: -divisor wraps to itself
        negated -= 1 << bits
    w(f"mad.lo.s{bits} {out}, {quotient}, {negated}, {x}")
    return out
