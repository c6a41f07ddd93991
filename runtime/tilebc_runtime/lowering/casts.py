"""Conversions: integer widening/narrowing, int<->float, float<->float, bit casts, pointer casts."""
from __future__ import annotations

from tilebc.ops.enums import RoundingMode, Signedness

from . import dtypes, softfloat
from .common import ROUND, map_slots
from .registry import lowers


def _int_kind(element, unsigned):
    return f"{'u' if unsigned else 's'}{64 if element.name == 'i64' else 32}"


@lowers("exti")
def lower_exti(lw, op):
    w = lw.w
    source = op.operand_values[0].type.element
    target = op.results[0].type.element
    unsigned = op.attrs["signedness"] is Signedness.UNSIGNED

    def compute(regs):
        reg = regs[0]
        if source.name == "i1":
            cls = dtypes.reg_class(target)
            out = w.reg(cls)
            w(f"selp.b{64 if cls == 'b64' else 32} {out}, {1 if unsigned else -1}, 0, {reg}")
            return lw.normalize_int(out, target) if cls == "b32" else out
        if unsigned:
            reg = lw.zero_extended(reg, source)
        if target.name == "i64":
            out = w.reg("b64")
            w(f"cvt.{'u' if unsigned else 's'}64.{'u' if unsigned else 's'}32 {out}, {reg}")
            lw.widened[out] = ("u" if unsigned else "s", reg)
            return out
        return lw.normalize_int(reg, target) if unsigned else reg
    map_slots(lw, op, compute)


@lowers("trunci")
def lower_trunci(lw, op):
    w = lw.w
    source = op.operand_values[0].type.element
    target = op.results[0].type.element

    def compute(regs):
        reg = regs[0]
        if source.name == "i64":
            narrow = w.reg("b32")
            w(f"cvt.u32.u64 {narrow}, {reg}")
            reg = narrow
        if target.name == "i1":
            bit, out = w.reg("b32"), w.reg("pred")
            w(f"and.b32 {bit}, {reg}, 1")
            w(f"setp.ne.u32 {out}, {bit}, 0")
            return out
        return lw.normalize_int(reg, target)
    map_slots(lw, op, compute)


def float_to_float(lw, reg, source, target, rounding="rn"):
    w = lw.w
    if source.name == target.name:
        return reg
    if source.name == "f64":
        if softfloat.is_soft(target.name, lw.arch):  # round once, from the exact f64 value
            return softfloat.encode_f64(w, reg, target.name, rounding)
        if target.name == "f32":
            out = w.reg("f32")
            w(f"cvt.{rounding}.f32.f64 {out}, {reg}")
            return out
        return dtypes.from_f32(w, _f64_to_f32_for_narrowing(w, reg, rounding), target, rounding)
    wide = dtypes.to_f32(w, reg, source)
    if target.name == "f64":
        out = w.reg("f64")
        w(f"cvt.f64.f32 {out}, {wide}")
        return out
    return dtypes.from_f32(w, wide, target, rounding)


def _f64_to_f32_for_narrowing(w, reg, rounding):
    """f64 -> f32 as the first of two roundings toward a narrower type. Round-to-nearest modes
    go through round-to-odd (truncate, then set the lsb when anything was dropped): f32 keeps at
    least two more bits than every narrower target, so the second rounding then equals a single
    rounding of the f64 value (no double-rounding error at near-ties). Directed modes compose."""
    narrow = w.reg("f32")
    if rounding not in ("rn", "rna"):
        w(f"cvt.{rounding}.f32.f64 {narrow}, {reg}")
        return narrow
    back, inexact = w.reg("f64"), w.reg("pred")
    bits, sticky, chosen, odd = w.reg("b32"), w.reg("b32"), w.reg("b32"), w.reg("f32")
    w(f"cvt.rz.f32.f64 {narrow}, {reg}")
    w(f"cvt.f64.f32 {back}, {narrow}")
    w(f"setp.neu.f64 {inexact}, {back}, {reg}")
    w(f"mov.b32 {bits}, {narrow}")
    w(f"or.b32 {sticky}, {bits}, 1")
    w(f"selp.b32 {chosen}, {sticky}, {bits}, {inexact}")
    w(f"mov.b32 {odd}, {chosen}")
    return odd


@lowers("ftof")
def lower_ftof(lw, op):
    source = op.operand_values[0].type.element
    target = op.results[0].type.element
    mode = op.attrs.get("rounding_mode")
    rounding = ROUND.get(mode, "rn")
    if target.name == "tf32" and mode is RoundingMode.NEAREST_AWAY:
        rounding = "rna"  # tf32 is the one narrow target with a nearest-away conversion
    map_slots(lw, op, lambda regs: float_to_float(lw, regs[0], source, target, rounding))


NARROW_INTS = ("i8", "i16")


@lowers("ftoi")
def lower_ftoi(lw, op):
    w = lw.w
    source = op.operand_values[0].type.element
    target = op.results[0].type.element
    unsigned = op.attrs["signedness"] is Signedness.UNSIGNED
    mode = {RoundingMode.NEAREST_INT_TO_ZERO: "rzi", RoundingMode.ZERO: "rzi",
            RoundingMode.NEAREST_EVEN: "rni", RoundingMode.NEGATIVE_INF: "rmi",
            RoundingMode.POSITIVE_INF: "rpi"}.get(op.attrs.get("rounding_mode"), "rzi")

    def compute(regs):
        reg = regs[0]
        cls = "f64" if source.name == "f64" else "f32"
        if cls == "f32":
            reg = dtypes.to_f32(w, reg, source)
        if target.name == "i64":
            out = w.reg("b64")
            w(f"cvt.{mode}.{'u' if unsigned else 's'}64.{cls} {out}, {reg}")
            return out
        if target.name == "i1":
            out = w.reg("pred")
            w(f"setp.ne.{cls} {out}, {reg}, {dtypes.float_immediate(0.0, cls)}")
            return out
        out = w.reg("b32")
        # saturates to the destination type's range (NaN -> 0); a narrow type is widened into
        # the 32-bit register, sign-extended for .s8/.s16 (the form i8/i16 registers keep)
        bits = dtypes.int_bits(target) if target.name in NARROW_INTS else 32
        w(f"cvt.{mode}.{'u' if unsigned else 's'}{bits}.{cls} {out}, {reg}")
        return lw.normalize_int(out, target) if unsigned else out
    map_slots(lw, op, compute)


@lowers("itof")
def lower_itof(lw, op):
    w = lw.w
    source = op.operand_values[0].type.element
    target = op.results[0].type.element
    unsigned = op.attrs["signedness"] is Signedness.UNSIGNED
    rounding = ROUND.get(op.attrs.get("rounding_mode"), "rn")

    def compute(regs):
        reg = regs[0]
        if source.name == "i1":
            wide = w.reg("b32")
            w(f"selp.b32 {wide}, {1 if unsigned else -1}, 0, {reg}")
            reg = wide
        elif unsigned:
            reg = lw.zero_extended(reg, source)
        kind = _int_kind(source, unsigned)
        if target.name == "f64":
            out = w.reg("f64")
            w(f"cvt.{rounding}.f64.{kind} {out}, {reg}")
            return out
        out = w.reg("f32")
        w(f"cvt.{rounding}.f32.{kind} {out}, {reg}")
        return dtypes.from_f32(w, out, target, rounding)
    map_slots(lw, op, compute)


@lowers("bitcast")
def lower_bitcast(lw, op):
    w = lw.w
    source = op.operand_values[0].type.element
    target = op.results[0].type.element
    src_cls, dst_cls = dtypes.reg_class(source), dtypes.reg_class(target)

    def compute(regs):
        reg = regs[0]
        if src_cls == dst_cls:
            return lw.normalize_int(reg, target) if dst_cls == "b32" else reg
        out = w.reg(dst_cls)
        if src_cls == "b32" and dst_cls == "b16":
            w(f"cvt.u16.u32 {out}, {reg}")
        elif src_cls == "b16" and dst_cls == "b32":
            w(f"cvt.s32.s{dtypes.int_bits(target)} {out}, {reg}" if target.name != "i8"
              else f"cvt.s32.s8 {out}, {reg}")
        elif src_cls == "pred" or dst_cls == "pred":
            if src_cls == "pred":
                w(f"selp.b16 {out}, 1, 0, {reg}")
            else:
                w(f"setp.ne.b16 {out}, {reg}, 0")
        else:
            w(f"mov.b{64 if '64' in dst_cls else 32} {out}, {reg}")
            if dst_cls == "b32":
                out = lw.normalize_int(out, target)
        return out
    map_slots(lw, op, compute)


def _same_register(lw, op):
    map_slots(lw, op, lambda regs: regs[0])


lowers("ptr_to_ptr")(_same_register)
lowers("int_to_ptr")(_same_register)  # i64 and pointers are both .b64
lowers("ptr_to_int")(_same_register)
