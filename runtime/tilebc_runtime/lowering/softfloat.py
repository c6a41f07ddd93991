"""Narrow float formats without (usable) PTX conversions, done with integer arithmetic.

Covers f4E2M1FN, fnv8E5M3FNU and f8E8M0FNU everywhere, and f8E4M3FN / f8E5M2 below sm_89 (no
cvt .e4m3x2/.e5m2x2 there). PTX's e2m1x2/ue8m0x2 conversions exist only on the arch-specific
sm_100a/sm_120a targets, which the JIT does not emit, so these paths are used on every target.

Semantics are tilebc.numeric.convert's (and the format parameters are tilebc.numeric.numerics' FloatFormat):
  encode  - round an exact f64 value to the format's grid with the requested rounding (ties to the
            even code), clamp to +-MAX (saturating formats: Inf and overflow give MAX), unsigned
            formats map negatives to their smallest code, formats without subnormals (e8m0) map
            everything below their range to the smallest code, NaN gives the format's NaN (or +MAX
            for the NaN-less / nan_to_max formats).
  decode  - a table of f32 bit patterns per code, built with tilebc.numeric.convert and placed in .const.

Working in f64 keeps every f32 (subnormals included) a normal number, so the true exponent is the
f64 exponent field, and f64 sources round once (no double rounding through f32).
"""
from __future__ import annotations

from ..lazy_numpy import np

from tilebc.numeric.formats import FloatFormat, float_format

# Formats that always take the software path, and the ones that do below sm_89.
ALWAYS_SOFT = ("f4E2M1FN", "fnv8E5M3FNU", "f8E8M0FNU")
HW_FP8 = ("f8E4M3FN", "f8E5M2")
FP8_MIN_ARCH = 89


def is_soft(name: str, arch: int) -> bool:
    return name in ALWAYS_SOFT or (name in HW_FP8 and arch < FP8_MIN_ARCH)


def decode_table(name: str) -> bytes:
    """f32 bit patterns (little-endian) of every code of the format, in code order."""
    from tilebc.numeric.convert import float_to_float  # numpy: only soft-float kernels load it
    from tilebc.numeric.numerics import from_bits
    fmt = float_format(name)
    codes = np.arange(1 << fmt.bits, dtype=np.uint64)
    values = float_to_float(from_bits(codes, name), name, "f32")
    return np.asarray(values, dtype=np.float32).view(np.uint32).astype("<u4").tobytes()


def encode_f64(w, value: str, name: str, rounding: str = "rn") -> str:
    """A .b16 register with the code of f64 register `value` converted to format `name`.
    `rounding` is a PTX rounding keyword: rn (ties to even), rz, rm, rp."""
    fmt: FloatFormat = float_format(name)
    man = fmt.man_bits
    emin_biased = fmt.emin + 1023  # the f64 exponent field of the format's smallest exponent
    r = lambda cls: w.reg(cls)  # noqa: E731
    bits, mag, field, frac, sig = r("b64"), r("b64"), r("b64"), r("b64"), r("b64")
    w(f"mov.b64 {bits}, {value}")
    w(f"and.b64 {mag}, {bits}, 9223372036854775807")
    w(f"shr.u64 {field}, {mag}, 52")
    w(f"and.b64 {frac}, {mag}, 4503599627370495")
    # significand with the implicit bit (f64 subnormals are far below every narrow format)
    normal = r("pred")
    w(f"setp.ne.u64 {normal}, {field}, 0")
    with_bit = r("b64")
    w(f"or.b64 {with_bit}, {frac}, 4503599627370496")
    w(f"selp.b64 {sig}, {with_bit}, {frac}, {normal}")
    e1, eq = r("b32"), r("b32")
    w(f"cvt.u32.u64 {e1}, {field}")
    w(f"max.u32 {e1}, {e1}, 1")
    # the grid step is 2^(max(E, emin) - man): shift the significand right by that much
    w(f"max.s32 {eq}, {e1}, {emin_biased}")
    shift = r("b32")
    w(f"sub.s32 {shift}, {eq}, {e1}")
    w(f"add.s32 {shift}, {shift}, {52 - man}")
    w(f"min.s32 {shift}, {shift}, 63")
    trunc, one, mask, rem, half = r("b64"), r("b64"), r("b64"), r("b64"), r("b64")
    w(f"shr.u64 {trunc}, {sig}, {shift}")
    w(f"shl.b64 {one}, 1, {shift}")
    w(f"sub.s64 {mask}, {one}, 1")
    w(f"and.b64 {rem}, {sig}, {mask}")
    w(f"shr.u64 {half}, {one}, 1")
    # code = ((max(E, emin) + bias - 1) << man) + significand on the grid (carries bump the exponent)
    base, code = r("b32"), r("b32")
    w(f"add.s32 {base}, {eq}, {fmt.bias - 1 - 1023}")
    w(f"shl.b32 {base}, {base}, {man}")
    low = r("b32")
    w(f"cvt.u32.u64 {low}, {trunc}")  # at most 2^(man+1): fits
    w(f"add.s32 {code}, {base}, {low}")
    negative = r("pred")
    w(f"setp.lt.s64 {negative}, {bits}, 0")
    inexact = r("pred")
    w(f"setp.ne.u64 {inexact}, {rem}, 0")
    up = None
    if rounding == "rn":
        above, tie, odd = r("pred"), r("pred"), r("pred")
        parity = r("b32")
        w(f"setp.gt.u64 {above}, {rem}, {half}")
        w(f"setp.eq.u64 {tie}, {rem}, {half}")
        w(f"and.b32 {parity}, {code}, 1")
        w(f"setp.ne.u32 {odd}, {parity}, 0")
        w(f"and.pred {tie}, {tie}, {odd}")
        up = r("pred")
        w(f"or.pred {up}, {above}, {tie}")
    elif rounding in ("rp", "rm"):
        toward = r("pred")
        if rounding == "rp":
            w(f"not.pred {toward}, {negative}")
        else:
            w(f"mov.pred {toward}, {negative}")
        up = r("pred")
        w(f"and.pred {up}, {inexact}, {toward}")
    if up is not None:
        bump = r("b32")
        w(f"selp.u32 {bump}, 1, 0, {up}")
        w(f"add.s32 {code}, {code}, {bump}")
    # saturate: overflow and Inf give MAX; below-range values of subnormal-free formats the minimum
    w(f"min.s32 {code}, {code}, {fmt.max_bits}")
    w(f"max.s32 {code}, {code}, 0")
    if fmt.signed:
        signed = r("b32")
        w(f"or.b32 {signed}, {code}, {fmt.sign_bit}")
        w(f"selp.b32 {code}, {signed}, {code}, {negative}")
    else:
        w(f"selp.b32 {code}, 0, {code}, {negative}")
    is_nan = r("pred")
    w(f"setp.gt.u64 {is_nan}, {mag}, 9218868437227405312")  # above the f64 Inf pattern
    if fmt.nan_to_max or fmt.canonical_nan is None:
        w(f"selp.b32 {code}, {fmt.max_bits}, {code}, {is_nan}")
    elif fmt.signed:
        nan = r("b32")
        w(f"selp.b32 {nan}, {fmt.canonical_nan | fmt.sign_bit}, {fmt.canonical_nan}, {negative}")
        w(f"selp.b32 {code}, {nan}, {code}, {is_nan}")
    else:
        w(f"selp.b32 {code}, {fmt.canonical_nan}, {code}, {is_nan}")
    out = r("b16")
    w(f"cvt.u16.u32 {out}, {code}")
    return out


def decode_f32(w, reg: str, name: str) -> str:
    """An f32 register with the value of code register `reg` (.b16) of format `name`."""
    symbol = w.const_table(f"decode_{name}", decode_table(name))
    fmt = float_format(name)
    code, address, offset = w.reg("b32"), w.reg("b64"), w.reg("b64")
    w(f"cvt.u32.u16 {code}, {reg}")
    w(f"and.b32 {code}, {code}, {(1 << fmt.bits) - 1}")
    base = w.reg("b64")
    w(f"mov.u64 {base}, {symbol}")
    w(f"mul.wide.u32 {offset}, {code}, 4")
    w(f"add.s64 {address}, {base}, {offset}")
    out = w.reg("f32")
    w(f"ld.const.f32 {out}, [{address}]")
    return out
