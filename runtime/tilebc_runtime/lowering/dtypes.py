"""How each Tile IR element type lives in PTX registers and memory, and conversions through f32.

Register forms (the invariant every lowering keeps):
  i1 -> .pred;  i8/i16/i32 -> .b32 holding the value sign-extended to 32 bits;  i64 and pointers -> .b64;
  f16/bf16 -> .b16 bit pattern;  f8/f4/e5m3 codes -> .b16 with the code in the low bits;  f32/tf32 -> .f32
  (tf32 kept as an f32 value);  f64 -> .f64.
Narrow float arithmetic runs in f32 and rounds back once (exact for add/sub/mul/div/sqrt: f32 has more
than twice the precision of f16/bf16 plus two bits).
"""
from __future__ import annotations

import struct

from tilebc.errors import TilebcError
from tilebc.ir.types import ElementType, PointerType

from . import softfloat

REG_CLASS = {"i1": "pred", "i8": "b32", "i16": "b32", "i32": "b32", "i64": "b64", "f16": "b16",
             "bf16": "b16", "f32": "f32", "tf32": "f32", "f64": "f64", "f8E4M3FN": "b16",
             "f8E5M2": "b16", "f8E8M0FNU": "b16", "f4E2M1FN": "b16", "fnv8E5M3FNU": "b16"}
# Memory access type for ld/st/param (i1 is stored as a byte).
MEM_TYPE = {"i1": "u8", "i8": "s8", "i16": "s16", "i32": "b32", "i64": "b64", "f16": "b16",
            "bf16": "b16", "f32": "f32", "tf32": "f32", "f64": "f64", "f8E4M3FN": "b8",
            "f8E5M2": "b8", "f8E8M0FNU": "b8", "f4E2M1FN": "b8", "fnv8E5M3FNU": "b8"}
BYTES = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "f16": 2, "bf16": 2, "f32": 4, "tf32": 4,
         "f64": 8, "f8E4M3FN": 1, "f8E5M2": 1, "f8E8M0FNU": 1, "f4E2M1FN": 1, "fnv8E5M3FNU": 1}
NARROW_FLOATS = ("f16", "bf16", "f8E4M3FN", "f8E5M2", "f8E8M0FNU", "f4E2M1FN", "fnv8E5M3FNU")
# One-byte float codes: loaded and stored as u8 (f4E2M1FN: one code per byte, in the low nibble).
BYTE_FLOATS = ("f8E4M3FN", "f8E5M2", "f8E8M0FNU", "f4E2M1FN", "fnv8E5M3FNU")
# fp8 element -> its PTX type (mma.sync operands; cvt takes pairs, `.e4m3x2`)
FP8_PTX = {"f8E4M3FN": "e4m3", "f8E5M2": "e5m2"}


def name_of(element) -> str:
    return "ptr" if isinstance(element, PointerType) else element.name


def check_supported(element, where=None) -> str:
    name = name_of(element)
    if name != "ptr" and name not in REG_CLASS:
        raise TilebcError(f"element type {name} is not supported by the JIT yet"
                          + (f" ({where})" if where else ""))
    return name


def reg_class(element) -> str:
    name = name_of(element)
    return "b64" if name == "ptr" else REG_CLASS[check_supported(element)]


def mem_type(element) -> str:
    name = name_of(element)
    return "b64" if name == "ptr" else MEM_TYPE[check_supported(element)]


def byte_size(element) -> int:
    name = name_of(element)
    return 8 if name == "ptr" else BYTES[check_supported(element)]


def int_bits(element) -> int:
    return {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64}[element.name]


def mov_type(cls: str) -> str:
    return {"pred": "pred", "b16": "b16", "b32": "b32", "b64": "b64", "f32": "f32", "f64": "f64"}[cls]


def float_immediate(value: float, cls: str) -> str:
    if cls == "f64":
        return "0d%016X" % struct.unpack("<Q", struct.pack("<d", value))[0]
    return "0f%08X" % struct.unpack("<I", struct.pack("<f", value))[0]


def f32_bits_immediate(bits: int) -> str:
    return "0f%08X" % (bits & 0xFFFFFFFF)


def to_f32(w, reg: str, element: ElementType) -> str:
    """An f32 register with the value of `reg` (a narrow float or f32)."""
    name = element.name
    if name in ("f32", "tf32"):
        return reg
    if softfloat.is_soft(name, w.arch) and name != "f8E8M0FNU":
        return softfloat.decode_f32(w, reg, name)
    out = w.reg("f32")
    if name == "f16":
        w(f"cvt.f32.f16 {out}, {reg}")
    elif name == "bf16":
        wide = w.reg("b32")
        w(f"cvt.u32.u16 {wide}, {reg}")
        w(f"shl.b32 {wide}, {wide}, 16")
        w(f"mov.b32 {out}, {wide}")
    elif name in FP8_PTX:
        pair = w.reg("b32")
        low, high = w.reg("b16"), w.reg("b16")
        w(f"cvt.rn.f16x2.{FP8_PTX[name]}x2 {pair}, {reg}")
        w(f"mov.b32 {{{low}, {high}}}, {pair}")
        w(f"cvt.f32.f16 {out}, {low}")
    elif name == "f8E8M0FNU":
        # value 2^(e-127): the byte is an f32 exponent field; 0xFF is NaN, 0 is 2^-127 (subnormal).
        wide, bits = w.reg("b32"), w.reg("b32")
        is_nan, is_zero = w.reg("pred"), w.reg("pred")
        w(f"cvt.u32.u16 {wide}, {reg}")
        w(f"and.b32 {wide}, {wide}, 255")
        w(f"shl.b32 {bits}, {wide}, 23")
        w(f"setp.eq.u32 {is_nan}, {wide}, 255")
        w(f"setp.eq.u32 {is_zero}, {wide}, 0")
        w(f"selp.b32 {bits}, 2143289344, {bits}, {is_nan}")
        w(f"selp.b32 {bits}, 4194304, {bits}, {is_zero}")
        w(f"mov.b32 {out}, {bits}")
    else:
        raise TilebcError(f"cannot convert {name} to f32")
    return out


def from_f32(w, reg: str, element: ElementType, rounding: str = "rn") -> str:
    """`reg` (f32) rounded to `element` (a narrow float or f32)."""
    name = element.name
    if name == "f32":
        return reg
    if softfloat.is_soft(name, w.arch):
        wide = w.reg("f64")
        w(f"cvt.f64.f32 {wide}, {reg}")
        return softfloat.encode_f64(w, wide, name, rounding)
    if name == "tf32":
        return round_tf32(w, reg, rounding)
    out = w.reg("b16")
    if name == "f16":
        w(f"cvt.{rounding}.f16.f32 {out}, {reg}")
    elif name == "bf16":
        w(f"cvt.{rounding}.bf16.f32 {out}, {reg}")
    elif name in FP8_PTX:
        zero = w.reg("f32")
        w(f"mov.f32 {zero}, 0f00000000")
        w(f"cvt.rn.satfinite.{FP8_PTX[name]}x2.f32 {out}, {zero}, {reg}")
    else:
        raise TilebcError(f"cannot convert f32 to {name}")
    return out


def tf32_operand(w, reg: str) -> str:
    """`reg` (f32) as an mma reads a .tf32 operand: its low 13 bits dropped (one `and`)."""
    bits, out = w.reg("b32"), w.reg("f32")
    w(f"mov.b32 {bits}, {reg}")
    w(f"and.b32 {bits}, {bits}, -8192")
    w(f"mov.b32 {out}, {bits}")
    return out


# Integer increments that round the low 13 mantissa bits away (tf32 keeps 10 of f32's 23).
_TF32_INCREMENT = {"rn": None, "rna": 0x1000, "rz": 0}


def round_tf32(w, reg: str, rounding: str = "rn") -> str:
    """`reg` (f32) rounded to tf32 (an f32 whose low 13 mantissa bits are zero), as tilebc.numeric.convert
    does: rn = nearest even, rna = nearest away, rz = toward zero. Done on the bit pattern so it
    works on every target (cvt.rn.tf32.f32 needs sm_90, and there is no rz form); a NaN keeps its
    sign and leading payload bits, with payload bit 13 set when those are all zero."""
    if rounding not in _TF32_INCREMENT:
        raise TilebcError(f"rounding .{rounding} to tf32 is not supported by the lowering")
    bits, summed, rounded = w.reg("b32"), w.reg("b32"), w.reg("b32")
    w(f"mov.b32 {bits}, {reg}")
    increment = _TF32_INCREMENT[rounding]
    if increment is None:  # + 0xFFF, + 1 more when the kept lsb is odd: ties go to even
        shifted, odd, biased = w.reg("b32"), w.reg("b32"), w.reg("b32")
        w(f"shr.u32 {shifted}, {bits}, 13")
        w(f"and.b32 {odd}, {shifted}, 1")
        w(f"add.u32 {biased}, {bits}, {odd}")
        w(f"add.u32 {summed}, {biased}, 4095")
    else:
        w(f"add.u32 {summed}, {bits}, {increment}")
    w(f"and.b32 {rounded}, {summed}, -8192")
    # NaN: truncate the payload instead, keeping it non-zero
    truncated, payload, fix, nan_bits, is_nan, empty = (w.reg("b32"), w.reg("b32"), w.reg("b32"),
                                                        w.reg("b32"), w.reg("pred"), w.reg("pred"))
    w(f"and.b32 {truncated}, {bits}, -8192")
    w(f"and.b32 {payload}, {truncated}, 8388607")
    w(f"setp.eq.u32 {empty}, {payload}, 0")
    w(f"selp.b32 {fix}, 8192, 0, {empty}")
    w(f"or.b32 {nan_bits}, {truncated}, {fix}")
    w(f"testp.notanumber.f32 {is_nan}, {reg}")
    out_bits, out = w.reg("b32"), w.reg("f32")
    w(f"selp.b32 {out_bits}, {nan_bits}, {rounded}, {is_nan}")
    w(f"mov.b32 {out}, {out_bits}")
    return out
