"""Instruction semantics, part 1: the registry, and data movement / integer / float / compare /
convert instructions. Each builder reads one parsed instruction, checks every modifier it carries
(an unknown one is refused at load time) and returns `fn(cta, mask)`, which executes the
instruction for the threads in `mask` (None: every thread of the CTA).

`BUILDERS` maps opcode -> builder; `IMPLEMENTED` documents, per opcode, the forms implemented (the
test that compares the emulator with the lowering's PTX_SUBSET reads it).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from tilebc.numeric import convert
from tilebc.ops.enums import RoundingMode as RM

from . import fp, isa_extra
from .dtypes import DTYPE, TYPES
from .registry import (FLOAT_FLAGS, HALF_TYPES, Mods, float_pipeline, implements, is_float,
                       operands, per_thread, signed_of, unsigned_of)
from .syntax import Imm, PredPair, Reg, Sym, Vec
from .state import SINT, UINT

# ------------------------------------------------------------------------------------ moves


@implements("mov", forms="mov.{pred,b/u/s16-64,f32,f64} from register, immediate, special "
                          "register or variable address; pack/unpack with {a, b} vectors")
def build_mov(ins, k):
    mods = Mods(ins, k)
    ptype = mods.type
    dst, src = operands(ins, k, 2)
    if isinstance(src, Vec):  # pack: low part first
        parts = src.items
        width = DTYPE[ptype].itemsize // len(parts)
        readers = [k.reader(ins, p, "b" + str(8 * width)) for p in parts]
        write = k.writer(ins, dst, ptype)
        big = UINT[DTYPE[ptype].itemsize]

        def fn(cta, mask):
            out = np.zeros(cta.T, big)
            for index, read in enumerate(readers):
                out |= np.asarray(read(cta)).astype(big) << big.type(8 * width * index)
            write(cta, out.view(DTYPE[ptype]), mask)
        return fn
    if isinstance(dst, Vec):  # unpack
        parts = dst.items
        width = DTYPE[ptype].itemsize // len(parts)
        read = k.reader(ins, src, "b" + str(8 * DTYPE[ptype].itemsize))
        writes = [k.writer(ins, p, "b" + str(8 * width)) for p in parts]
        big = UINT[DTYPE[ptype].itemsize]
        small = UINT[width]

        def fn(cta, mask):
            value = np.asarray(read(cta)).astype(big)
            for index, write in enumerate(writes):
                write(cta, (value >> big.type(8 * width * index)).astype(small), mask)
        return fn
    read = k.reader(ins, src, ptype)
    write = k.writer(ins, dst, ptype)
    storage = k.registers.get(src.name) if isinstance(src, Reg) else None
    if storage is not None and isinstance(dst, Reg) and k.registers.get(dst.name) == storage \
            and storage.itemsize == DTYPE[ptype].itemsize:
        # a register copy between registers of one storage type: the array itself (the
        # reader's and writer's views of it cancel out)
        source, target = src.name, dst.name

        def copy(cta, mask):
            r = cta.r
            r[target] = r[source] if mask is None else np.where(mask, r[source], r[target])
        return copy
    return lambda cta, mask: write(cta, read(cta), mask)


@implements("selp", forms="selp.T d, a, b, p for every scalar type")
def build_selp(ins, k):
    mods = Mods(ins, k)
    d, a, b, p = operands(ins, k, 4)
    ra, rb = k.reader(ins, a, mods.type), k.reader(ins, b, mods.type)
    rp = k.reader(ins, p, "pred")
    write = k.writer(ins, d, mods.type)
    return lambda cta, mask: write(cta, np.where(rp(cta), ra(cta), rb(cta)), mask)


# ---------------------------------------------------------------------------------- integer


def _wrap_binary(ptype, op):
    dtype = DTYPE[ptype]

    def compute(a, b):
        return op(np.asarray(a, dtype), np.asarray(b, dtype)).astype(dtype, copy=False)
    return compute


def _mul_hi(a, b, ptype):
    """High half of the double-width product."""
    dtype = DTYPE[ptype]
    if dtype.itemsize <= 4:
        wide = np.int64 if ptype[0] == "s" else np.uint64
        product = a.astype(wide) * b.astype(wide)
        return (product >> (8 * dtype.itemsize)).astype(dtype)
    # 64-bit: the 128-bit product from 32-bit halves, wrapping uint64 arithmetic
    ua = np.asarray(a).astype(dtype).view(np.uint64)
    ub = np.asarray(b).astype(dtype).view(np.uint64)
    low32, shift = np.uint64(0xFFFFFFFF), np.uint64(32)
    a_lo, a_hi = ua & low32, ua >> shift
    b_lo, b_hi = ub & low32, ub >> shift
    lo_lo = a_lo * b_lo
    middle = a_hi * b_lo + (lo_lo >> shift)  # < 2^64: no wrap
    middle2 = a_lo * b_hi + (middle & low32)
    high = a_hi * b_hi + (middle >> shift) + (middle2 >> shift)
    if ptype[0] == "s":  # signed high half: subtract the other operand for each negative one
        high = high - np.where(ua >> np.uint64(63), ub, np.uint64(0)) \
            - np.where(ub >> np.uint64(63), ua, np.uint64(0))
    return np.asarray(high).view(dtype).reshape(np.broadcast(a, b).shape)


def _wide(ptype):
    return {"s16": "s32", "u16": "u32", "s32": "s64", "u32": "u64"}.get(ptype)


@implements("add", "sub", forms="integer (wrapping, .sat for s32), f32/f64 (.rn/.rz/.rm/.rp, "
                                ".ftz, .sat) and f16/bf16{x2} (.rn/.rz/.rm/.rp)")
def build_add_sub(ins, k):
    mods = Mods(ins, k, FLOAT_FLAGS + ("cc",))
    ptype = mods.type
    d, a, b = operands(ins, k, 3)
    ra, rb = k.reader(ins, a, ptype), k.reader(ins, b, ptype)
    write = k.writer(ins, d, ptype)
    sub = ins.opcode == "sub"
    if mods.has("cc"):
        return isa_extra.build_carry(ins, k)
    if ptype in HALF_TYPES:
        if mods.has("cc"):
            raise k.unsupported(ins, f"{ins.opcode}.cc.{ptype}")
        return isa_extra.half_arithmetic(ins, k, mods, ptype)
    if is_float(ptype):
        if ptype not in ("f32", "f64"):
            raise k.unsupported(ins, f"{ins.opcode}.{ptype} is not emulated")
        mode = mods.rounding()

        def compute(x, y):
            x, y = np.asarray(x), np.asarray(y)
            return fp.add(x, -y if sub else y, ptype, mode)
        return float_pipeline(mods, compute, 2, (ra, rb), write)
    if mods.flags - {"sat"}:
        raise k.unsupported(ins, f"rounding/ftz modifiers on integer {ins.opcode}")
    if mods.has("sat"):
        if ptype != "s32":
            raise k.unsupported(ins, ".sat applies to s32 only")

        def fn(cta, mask):
            x, y = ra(cta).astype(np.int64), rb(cta).astype(np.int64)
            out = x - y if sub else x + y
            write(cta, np.clip(out, -2 ** 31, 2 ** 31 - 1).astype(np.int32), mask)
        return fn
    op = np.subtract if sub else np.add
    compute = _wrap_binary(ptype, op)
    return lambda cta, mask: write(cta, compute(ra(cta), rb(cta)), mask)


@implements("mul", forms="integer .lo/.hi/.wide; f32/f64 with rounding, .ftz, .sat")
def build_mul(ins, k):
    mods = Mods(ins, k, FLOAT_FLAGS + ("lo", "hi", "wide"))
    ptype = mods.type
    if ptype in HALF_TYPES and not mods.flags & {"lo", "hi", "wide"}:
        return isa_extra.half_arithmetic(ins, k, mods, ptype)
    d, a, b = operands(ins, k, 3)
    ra, rb = k.reader(ins, a, ptype), k.reader(ins, b, ptype)
    if is_float(ptype):
        if ptype not in ("f32", "f64") or mods.flags & {"lo", "hi", "wide"}:
            raise k.unsupported(ins, "unsupported float mul form")
        mode = mods.rounding()
        write = k.writer(ins, d, ptype)
        return float_pipeline(mods, lambda x, y: fp.mul(np.asarray(x), np.asarray(y), ptype,
                                                          mode), 2, (ra, rb), write)
    if mods.flags - {"lo", "hi", "wide"}:
        raise k.unsupported(ins, "rounding/ftz/sat modifiers on integer mul")
    if mods.has("wide"):
        wide = _wide(ptype)
        if wide is None:
            raise k.unsupported(ins, f"mul.wide.{ptype}")
        write = k.writer(ins, d, wide)
        wd = DTYPE[wide]
        return lambda cta, mask: write(cta, np.asarray(ra(cta)).astype(wd) *
                                       np.asarray(rb(cta)).astype(wd), mask)
    write = k.writer(ins, d, ptype)
    if mods.has("hi"):
        return lambda cta, mask: write(cta, _mul_hi(np.asarray(ra(cta)), np.asarray(rb(cta)),
                                                    ptype), mask)
    compute = _wrap_binary(ptype, np.multiply)
    return lambda cta, mask: write(cta, compute(ra(cta), rb(cta)), mask)


@implements("mad", forms="integer .lo/.hi/.wide; mad.rn.f32/f64 (= fma)")
def build_mad(ins, k):
    mods = Mods(ins, k, FLOAT_FLAGS + ("lo", "hi", "wide", "cc"))
    ptype = mods.type
    d, a, b, c = operands(ins, k, 4)
    if mods.has("cc"):
        return isa_extra.build_carry(ins, k)
    if is_float(ptype):
        return build_fma(ins, k)
    ra, rb = k.reader(ins, a, ptype), k.reader(ins, b, ptype)
    if mods.flags - {"lo", "hi", "wide"}:
        raise k.unsupported(ins, "unsupported integer mad modifiers")
    if mods.has("wide"):
        wide = _wide(ptype)
        if wide is None:
            raise k.unsupported(ins, f"mad.wide.{ptype}")
        rc = k.reader(ins, c, wide)
        write = k.writer(ins, d, wide)
        wd = DTYPE[wide]
        return lambda cta, mask: write(cta, (np.asarray(ra(cta)).astype(wd) *
                                             np.asarray(rb(cta)).astype(wd) +
                                             np.asarray(rc(cta), wd)).astype(wd), mask)
    rc = k.reader(ins, c, ptype)
    write = k.writer(ins, d, ptype)
    dtype = DTYPE[ptype]
    if mods.has("hi"):
        return lambda cta, mask: write(cta, (_mul_hi(np.asarray(ra(cta)), np.asarray(rb(cta)),
                                                     ptype) + np.asarray(rc(cta), dtype))
                                       .astype(dtype), mask)
    return lambda cta, mask: write(cta, (np.asarray(ra(cta), dtype) * np.asarray(rb(cta), dtype)
                                         + np.asarray(rc(cta), dtype)).astype(dtype, copy=False),
                                   mask)


def _int_divide(a, b, ptype, remainder: bool):
    """Truncating division. By zero, the quotient and the remainder are both all ones, signed or
    unsigned, 32 or 64 bits: what an H100 computed with operands loaded from memory."""
    dtype = DTYPE[ptype]
    a, b = np.broadcast_arrays(np.asarray(a, dtype), np.asarray(b, dtype))
    zero = b == 0
    safe = np.where(zero, dtype.type(1), b)
    if ptype[0] == "s":
        # |a| // |b| in unsigned arithmetic handles INT_MIN / -1 (it wraps)
        udt = UINT[dtype.itemsize]
        ua = np.where(a < 0, (~a.view(udt)) + udt.type(1), a.view(udt))
        ub = np.where(safe < 0, (~safe.view(udt)) + udt.type(1), safe.view(udt))
        q = (ua // ub)
        r = ua - q * ub
        negative_q = (a < 0) != (safe < 0)
        q = np.where(negative_q, (~q) + udt.type(1), q).view(dtype)
        r = np.where(a < 0, (~r) + udt.type(1), r).view(dtype)
    else:
        q = a // safe
        r = a - q * safe
    all_ones = dtype.type(-1) if ptype[0] == "s" else np.iinfo(dtype).max
    return np.where(zero, all_ones, r if remainder else q).astype(dtype)


@implements("div", forms="integer (truncating); f32 .rn/.rz/.rm/.rp/.approx/.full (+.ftz); "
                         "f64 with rounding")
def build_div(ins, k):
    mods = Mods(ins, k, FLOAT_FLAGS + ("approx", "full"))
    ptype = mods.type
    d, a, b = operands(ins, k, 3)
    ra, rb = k.reader(ins, a, ptype), k.reader(ins, b, ptype)
    write = k.writer(ins, d, ptype)
    if is_float(ptype):
        if ptype not in ("f32", "f64"):
            raise k.unsupported(ins, f"div.{ptype}")
        if (mods.has("approx") or mods.has("full")) and ptype != "f32":
            raise k.unsupported(ins, "div.approx/.full are f32 only")
        mode = mods.rounding()
        return float_pipeline(mods, lambda x, y: fp.div(np.asarray(x), np.asarray(y), ptype,
                                                          mode), 2, (ra, rb), write)
    if mods.flags:
        raise k.unsupported(ins, "float modifiers on integer div")
    return lambda cta, mask: write(cta, _int_divide(ra(cta), rb(cta), ptype, False), mask)


@implements("rem", forms="integer (sign of the dividend)")
def build_rem(ins, k):
    mods = Mods(ins, k)
    ptype = mods.type
    d, a, b = operands(ins, k, 3)
    ra, rb = k.reader(ins, a, ptype), k.reader(ins, b, ptype)
    write = k.writer(ins, d, ptype)
    if is_float(ptype):
        raise k.unsupported(ins, "rem on floats")
    return lambda cta, mask: write(cta, _int_divide(ra(cta), rb(cta), ptype, True), mask)


@implements("abs", "neg", forms="integer (wrapping) and f32/f64 (sign bit; .ftz)")
def build_abs_neg(ins, k):
    mods = Mods(ins, k, ("ftz",))
    ptype = mods.type
    d, a = operands(ins, k, 2)
    ra = k.reader(ins, a, ptype)
    write = k.writer(ins, d, ptype)
    negate = ins.opcode == "neg"
    if is_float(ptype):
        width = DTYPE[ptype].itemsize
        sign = UINT[width].type(1 << (8 * width - 1))

        def compute(x):
            bits = np.asarray(x).view(UINT[width])
            bits = bits ^ sign if negate else bits & ~sign
            return bits.view(DTYPE[ptype])
        return float_pipeline(mods, compute, 1, (ra,), write)
    if mods.flags:
        raise k.unsupported(ins, ".ftz on integer abs/neg")
    dtype = DTYPE[ptype]
    if negate:
        return lambda cta, mask: write(cta, (-np.asarray(ra(cta), dtype)).astype(dtype), mask)
    return lambda cta, mask: write(cta, np.abs(np.asarray(ra(cta), dtype)).astype(dtype), mask)


@implements("min", "max", forms="integer (signed/unsigned by type; .relu for s32: negative "
                                 "results become 0); f32/f64 (.ftz, .NaN)")
def build_min_max(ins, k):
    mods = Mods(ins, k, ("ftz", "NaN", "relu"))
    ptype = mods.type
    d, a, b = operands(ins, k, 3)
    ra, rb = k.reader(ins, a, ptype), k.reader(ins, b, ptype)
    write = k.writer(ins, d, ptype)
    is_min = ins.opcode == "min"
    if is_float(ptype):
        if mods.has("relu"):
            raise k.unsupported(ins, f"{ins.opcode}.relu on floats is not emulated")
        nan = mods.has("NaN")
        pick = fp.fmin if is_min else fp.fmax
        return float_pipeline(mods, lambda x, y: pick(*np.broadcast_arrays(
            np.asarray(x), np.asarray(y)), nan), 2, (ra, rb), write)
    relu = mods.has("relu")
    if mods.flags - {"relu"} or relu and ptype != "s32":
        raise k.unsupported(ins, "float modifiers on integer min/max (.relu is for .s32)")
    op = np.minimum if is_min else np.maximum
    dtype = DTYPE[signed_of(ptype)] if ptype[0] == "s" else DTYPE[ptype]
    if relu:
        return lambda cta, mask: write(cta, np.maximum(op(np.asarray(ra(cta), dtype),
                                                          np.asarray(rb(cta), dtype)), 0), mask)
    return lambda cta, mask: write(cta, op(np.asarray(ra(cta), dtype), np.asarray(rb(cta), dtype)),
                                   mask)


@implements("and", "or", "xor", forms="on .pred and .b16/.b32/.b64 values")
def build_logic(ins, k):
    mods = Mods(ins, k)
    ptype = mods.type
    d, a, b = operands(ins, k, 3)
    ra, rb = k.reader(ins, a, ptype), k.reader(ins, b, ptype)
    write = k.writer(ins, d, ptype)
    op = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[ins.opcode]
    return lambda cta, mask: write(cta, op(ra(cta), rb(cta)), mask)


@implements("not", "cnot", forms="on .pred and .b16/.b32/.b64 values")
def build_not(ins, k):
    mods = Mods(ins, k)
    ptype = mods.type
    d, a = operands(ins, k, 2)
    ra = k.reader(ins, a, ptype)
    write = k.writer(ins, d, ptype)
    if ins.opcode == "cnot":
        return lambda cta, mask: write(cta, (np.asarray(ra(cta)) == 0).astype(DTYPE[ptype]), mask)
    return lambda cta, mask: write(cta, np.invert(ra(cta)), mask)


@implements("shl", "shr", forms="shl.b*, shr.u*/.s*/.b* (amounts >= width give 0 or the sign)")
def build_shift(ins, k):
    mods = Mods(ins, k)
    ptype = mods.type
    d, a, b = operands(ins, k, 3)
    ra = k.reader(ins, a, ptype)
    rb = k.reader(ins, b, "u32")
    write = k.writer(ins, d, ptype)
    dtype = DTYPE[ptype]
    bits = 8 * dtype.itemsize
    arithmetic = ins.opcode == "shr" and ptype[0] == "s"
    left = ins.opcode == "shl"
    if isinstance(b, Imm):
        # an immediate amount: the clamping and the width test are decided here
        n = int(np.asarray(rb(None)).astype(np.uint64))
        amount = np.asarray(min(n, bits - 1)).astype(dtype)[()]
        if n >= bits and not arithmetic:
            zero = dtype.type(0)

            def zeros(cta, mask):
                x = np.asarray(ra(cta), dtype)
                write(cta, np.full(x.shape, zero, dtype), mask)
            return zeros
        shift = np.left_shift if left else np.right_shift

        def shift_by_immediate(cta, mask):
            x = np.asarray(ra(cta), dtype)
            write(cta, shift(x, amount).astype(dtype, copy=False), mask)
        return shift_by_immediate

    def fn(cta, mask):
        x = np.asarray(ra(cta), dtype)
        n = np.asarray(rb(cta)).astype(np.uint64)
        big = n >= bits
        amount = np.minimum(n, bits - 1).astype(dtype)
        if left:
            out = np.where(big, dtype.type(0), x << amount)
        elif arithmetic:
            out = x >> amount  # amounts >= width clamp to width-1: the sign fill
        else:
            out = np.where(big, dtype.type(0), x >> amount)
        write(cta, out.astype(dtype), mask)
    return fn


@implements("popc", "clz", "brev", forms="on .b32 and .b64 values")
def build_bits(ins, k):
    mods = Mods(ins, k)
    ptype = mods.type
    d, a = operands(ins, k, 2)
    ra = k.reader(ins, a, ptype)
    width = 8 * DTYPE[ptype].itemsize
    if ins.opcode == "brev":
        write = k.writer(ins, d, ptype)
    else:
        write = k.writer(ins, d, "u32")

    def fn(cta, mask):
        x = np.asarray(ra(cta)).astype(np.uint64)
        x = per_thread(x, cta.T)
        if ins.opcode == "popc":
            out = np.array([bin(int(v)).count("1") for v in x], np.uint32)
        elif ins.opcode == "clz":
            out = np.array([width - int(v).bit_length() for v in x], np.uint32)
        else:
            out = np.array([int(f"{int(v):0{width}b}"[::-1], 2) for v in x], np.uint64)
            out = out.astype(DTYPE[ptype])
        write(cta, out, mask)
    return fn


# ------------------------------------------------------------------------------------ float


@implements("fma", forms="f32/f64 .rn/.rz/.rm/.rp (+.ftz, .sat): one rounding of a*b+c")
def build_fma(ins, k):
    mods = Mods(ins, k, FLOAT_FLAGS)
    ptype = mods.type
    if ptype in HALF_TYPES:
        return isa_extra.half_arithmetic(ins, k, mods, ptype)
    if ptype not in ("f32", "f64"):
        raise k.unsupported(ins, f"{ins.opcode}.{ptype} is not emulated")
    if not any(mods.has(r) for r in fp.ROUNDING):
        raise k.unsupported(ins, f"{ins.opcode}.{ptype} needs a rounding modifier")
    d, a, b, c = operands(ins, k, 4)
    readers = [k.reader(ins, x, ptype) for x in (a, b, c)]
    write = k.writer(ins, d, ptype)
    mode = mods.rounding()

    def compute(x, y, z):
        x, y, z = np.asarray(x), np.asarray(y), np.asarray(z)
        if not x.shape == y.shape == z.shape:  # immediates: broadcasting costs a few us
            x, y, z = np.broadcast_arrays(x, y, z)
        return fp.fma(x, y, z, ptype, mode)
    return float_pipeline(mods, compute, 3, readers, write)


@implements("rcp", "sqrt", forms="f32 .rn/.rz/.rm/.rp/.approx (+.ftz); f64 with rounding")
def build_rcp_sqrt(ins, k):
    mods = Mods(ins, k, FLOAT_FLAGS + ("approx",))
    ptype = mods.type
    if ptype not in ("f32", "f64"):
        raise k.unsupported(ins, f"{ins.opcode}.{ptype}")
    d, a = operands(ins, k, 2)
    ra = k.reader(ins, a, ptype)
    write = k.writer(ins, d, ptype)
    mode = mods.rounding()
    if ins.opcode == "sqrt":
        compute = lambda x: fp.sqrt(np.asarray(x), ptype, mode)  # noqa: E731
    else:
        one = np.asarray(1.0, DTYPE[ptype])
        compute = lambda x: fp.div(np.broadcast_to(one, np.shape(x)).copy(),  # noqa: E731
                                   np.asarray(x), ptype, mode)
    return float_pipeline(mods, compute, 1, (ra,), write)


@implements("rsqrt", "sin", "cos", "ex2", "lg2", "tanh",
            forms=".approx.f32 (+.ftz), rsqrt.approx.f64: float64 evaluation rounded to nearest "
                  "(error <= 0.5 ulp; see fp.py)")
def build_approx(ins, k):
    mods = Mods(ins, k, ("approx", "ftz"))
    ptype = mods.type
    if not mods.has("approx"):
        raise k.unsupported(ins, f"{ins.opcode} needs .approx")
    if ptype != "f32" and not (ins.opcode == "rsqrt" and ptype == "f64"):
        raise k.unsupported(ins, f"{ins.opcode}.approx.{ptype}")
    d, a = operands(ins, k, 2)
    ra = k.reader(ins, a, ptype)
    write = k.writer(ins, d, ptype)
    compute = fp.APPROX[ins.opcode]
    return float_pipeline(mods, compute, 1, (ra,), write)


@implements("copysign", forms="copysign.f32/f64 d, a, b: |b| with a's sign")
def build_copysign(ins, k):
    mods = Mods(ins, k)
    ptype = mods.type
    d, a, b = operands(ins, k, 3)
    ra, rb = k.reader(ins, a, ptype), k.reader(ins, b, ptype)
    write = k.writer(ins, d, ptype)
    width = DTYPE[ptype].itemsize
    u = UINT[width]
    sign = u.type(1 << (8 * width - 1))

    def fn(cta, mask):
        sa = np.asarray(ra(cta)).view(u) & sign
        bits = (np.asarray(rb(cta)).view(u) & ~sign) | sa
        write(cta, bits.view(DTYPE[ptype]), mask)
    return fn


@implements("testp", forms="testp.{finite,infinite,number,notanumber,normal,subnormal} on .f32/.f64")
def build_testp(ins, k):
    tests = {"finite": np.isfinite, "infinite": np.isinf,
             "number": lambda x: ~np.isnan(x), "notanumber": np.isnan,
             "normal": lambda x: np.isfinite(x) & (np.abs(x) >= np.finfo(x.dtype).tiny),
             "subnormal": lambda x: (x != 0) & (np.abs(x) < np.finfo(x.dtype).tiny)}
    mods = Mods(ins, k, tuple(tests))
    if len(mods.flags) != 1:
        raise k.unsupported(ins, "testp needs exactly one test")
    test = tests[next(iter(mods.flags))]
    d, a = operands(ins, k, 2)
    ra = k.reader(ins, a, mods.type)
    write = k.writer(ins, d, "pred")
    return lambda cta, mask: write(cta, test(np.asarray(ra(cta))), mask)


# ---------------------------------------------------------------------------------- compare

_INT_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal,
            "hi": np.greater, "hs": np.greater_equal}
_FLOAT_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
              "gt": np.greater, "ge": np.greater_equal}
_BOOL_OPS = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


def _comparison(cmp: str, ptype: str):
    if is_float(ptype):
        if cmp in _FLOAT_CMP:  # ordered: false when either is NaN
            op = _FLOAT_CMP[cmp]
            return lambda a, b: op(a, b) & ~(np.isnan(a) | np.isnan(b))
        if cmp.endswith("u") and cmp[:-1] in _FLOAT_CMP:
            op = _FLOAT_CMP[cmp[:-1]]
            return lambda a, b: op(a, b) | np.isnan(a) | np.isnan(b)
        if cmp == "num":
            return lambda a, b: ~(np.isnan(a) | np.isnan(b))
        if cmp == "nan":
            return lambda a, b: np.isnan(a) | np.isnan(b)
        return None
    if cmp not in _INT_CMP:
        return None
    if cmp in ("lo", "ls", "hi", "hs") or ptype[0] in "ub":
        dtype = DTYPE[unsigned_of(ptype)]
    else:
        dtype = DTYPE[ptype]
    op = _INT_CMP[cmp]
    # (setp passes arrays: .ndim instead of np.ndim, a Python-level call)
    return lambda a, b: op(a.view(dtype) if a.ndim else a.astype(dtype),
                           b.view(dtype) if b.ndim else b.astype(dtype))


CMP_NAMES = set(_INT_CMP) | set(_FLOAT_CMP) | {c + "u" for c in _FLOAT_CMP} | {"num", "nan"}


@implements("setp", forms="setp.cmp[.and/.or/.xor].T p[|q], a, b[, c] for int and float types "
                          "(ordered and unordered float comparisons, .ftz)")
def build_setp(ins, k):
    mods = Mods(ins, k, tuple(CMP_NAMES) + tuple(_BOOL_OPS) + ("ftz",))
    ptype = mods.type
    cmps = [f for f in mods.flags if f in CMP_NAMES]
    bools = [f for f in mods.flags if f in _BOOL_OPS]
    if len(cmps) != 1 or len(bools) > 1:
        raise k.unsupported(ins, "setp needs one comparison and at most one boolean operation")
    compare = _comparison(cmps[0], ptype)
    if compare is None:
        raise k.unsupported(ins, f"comparison .{cmps[0]} on .{ptype}")
    ops = ins.operands
    if len(ops) not in (3, 4) or (bools and len(ops) != 4):
        raise k.unsupported(ins, "setp takes p[|q], a, b[, c]")
    dst = ops[0]
    ra, rb = k.reader(ins, ops[1], ptype), k.reader(ins, ops[2], ptype)
    rc = k.reader(ins, ops[3], "pred") if bools else None
    combine = _BOOL_OPS[bools[0]] if bools else None
    flush = mods.has("ftz")
    if isinstance(dst, PredPair):
        write_p, write_q = k.writer(ins, dst.first, "pred"), k.writer(ins, dst.second, "pred")
    else:
        write_p, write_q = k.writer(ins, dst, "pred"), None

    def fn(cta, mask):
        a, b = np.asarray(ra(cta)), np.asarray(rb(cta))
        if flush:
            a, b = fp.ftz(a), fp.ftz(b)
        t = compare(a, b)
        c = rc(cta) if combine is not None else None
        write_p(cta, t if c is None else combine(t, c), mask)
        if write_q is not None:  # the complement only when there is a q to write
            write_q(cta, ~t if c is None else combine(~t, c), mask)
    return fn


# ---------------------------------------------------------------------------------- convert

_ELEMENT = {"f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64", "tf32": "tf32",
            "s8": "i8", "u8": "i8", "b8": "i8", "s16": "i16", "u16": "i16", "b16": "i16",
            "s32": "i32", "u32": "i32", "b32": "i32", "s64": "i64", "u64": "i64", "b64": "i64"}
_FP8 = {"e4m3x2": ml_dtypes.float8_e4m3fn, "e5m2x2": ml_dtypes.float8_e5m2}


def _float_storage(values, ptype):
    """Values of a float PTX type as the storage tilebc.numeric.convert expects."""
    return np.asarray(values).view(DTYPE[ptype]) if ptype != "bf16" else \
        np.asarray(values).view(ml_dtypes.bfloat16)


def _satfinite(out: np.ndarray) -> np.ndarray:
    finfo = ml_dtypes.finfo(out.dtype) if out.dtype == ml_dtypes.bfloat16 else np.finfo(out.dtype)
    big = out.dtype.type(finfo.max)
    return np.where(np.isinf(out.astype(np.float64)),
                    np.where(out.astype(np.float64) > 0, big, -big), out).astype(out.dtype)


@implements("cvt", forms="int<->int (wrap or .sat), int->float and float->float with .rn/.rz/.rm/"
                         "/.rp/.rna, float->int with .rni/.rzi/.rmi/.rpi (saturating, NaN -> 0), "
                         "float->same float .rni/.rzi/.rmi/.rpi, .ftz, .sat, .satfinite, .relu, "
                         "tf32, f16x2<-e4m3x2/e5m2x2 and e4m3x2/e5m2x2<-f32 pairs or f16x2; all through "
                         "tilebc.numeric.convert")
def build_cvt(ins, k):
    type_set = TYPES | set(_FP8)
    mods = Mods(ins, k, ("rn", "rz", "rm", "rp", "rna", "rni", "rzi", "rmi", "rpi", "ftz",
                         "sat", "satfinite", "relu"), types=(2,), type_set=type_set)
    dtype_name, atype = mods.types
    flush, sat = mods.has("ftz"), mods.has("sat")
    relu, satfinite = mods.has("relu"), mods.has("satfinite")
    int_mode = [fp.INT_ROUNDING[f] for f in mods.flags if f in fp.INT_ROUNDING]
    float_mode = [fp.ROUNDING[f] for f in mods.flags if f in fp.ROUNDING]
    ops = ins.operands
    # -- packed fp8 forms -----------------------------------------------------------------
    if atype in _FP8:
        if dtype_name != "f16x2" or len(ops) != 2:
            raise k.unsupported(ins, f"cvt from .{atype} needs an .f16x2 destination")
        ra = k.reader(ins, ops[1], "b16")
        write = k.writer(ins, ops[0], "b32")
        fp8 = _FP8[atype]

        def fn(cta, mask):
            pair = np.asarray(ra(cta)).astype(np.uint16)
            low = (pair & 0xFF).astype(np.uint8).view(fp8).astype(np.float16)
            high = (pair >> 8).astype(np.uint8).view(fp8).astype(np.float16)
            if relu:
                low, high = (np.where(v < 0, np.float16(0), v) for v in (low, high))
            out = low.view(np.uint16).astype(np.uint32) | \
                (high.view(np.uint16).astype(np.uint32) << np.uint32(16))
            write(cta, out, mask)
        return fn
    if dtype_name in _FP8:
        pair_source = atype == "f16x2" and len(ops) == 2
        if not (atype == "f32" and len(ops) == 3 or pair_source) or not satfinite:
            raise k.unsupported(ins, f"cvt to .{dtype_name} needs .rn.satfinite and two .f32 "
                                     f"or one .f16x2")
        target = "f8E4M3FN" if dtype_name == "e4m3x2" else "f8E5M2"
        write = k.writer(ins, ops[0], "b16")
        if pair_source:  # the .f16x2's upper half -> the upper byte
            rp = k.reader(ins, ops[1], "b32")

            def halves(cta):
                word = np.asarray(rp(cta)).astype(np.uint32)
                return ((word >> np.uint32(16)).astype(np.uint16).view(np.float16),
                        (word & np.uint32(0xFFFF)).astype(np.uint16).view(np.float16))
        else:
            ra, rb = k.reader(ins, ops[1], "f32"), k.reader(ins, ops[2], "f32")

            def halves(cta):
                return ra(cta), rb(cta)

        def to_byte(values):
            values = np.asarray(values, np.float32)  # f16 values are exact in f32
            if relu:
                values = np.where(values < 0, np.float32(0), values)
            bits = convert.round_float64(values.astype(np.float64), target, RM.NEAREST_EVEN)
            if target == "f8E5M2":  # satfinite: no Inf (NaN stays NaN)
                mag = bits & 0x7F
                bits = np.where(mag == 0x7C, (bits & 0x80) | 0x7B, bits)
            return bits.astype(np.uint16) & np.uint16(0xFF)

        def fn(cta, mask):
            high, low = (to_byte(v) for v in halves(cta))  # a -> upper byte, b -> lower
            write(cta, (high << np.uint16(8)) | low, mask)
        return fn
    if dtype_name in ("f16x2", "bf16x2"):
        # cvt.{rn,rz}{.relu}{.satfinite}.f16x2.f32 d, a, b: a -> upper half, b -> lower half
        if atype != "f32" or len(ops) != 3 or int_mode or flush or sat:
            raise k.unsupported(ins, f"cvt to .{dtype_name} reads two .f32 with .rn/.rz")
        half = dtype_name[:-2]
        mode = float_mode[0] if float_mode else None
        if mode is None:
            raise k.unsupported(ins, f"cvt to .{dtype_name} needs a rounding modifier")
        ra, rb = k.reader(ins, ops[1], "f32"), k.reader(ins, ops[2], "f32")
        write = k.writer(ins, ops[0], "b32")

        def to_bits(values):
            x = np.atleast_1d(np.asarray(values, np.float32))
            out = _float_storage(convert.float_to_float(x, "f32", _ELEMENT[half], mode), half)
            if relu:
                out = np.where(out.astype(np.float64) < 0, out.dtype.type(0), out) \
                    .astype(out.dtype)
            if satfinite:
                out = _satfinite(out)
            return out.view(np.uint16).astype(np.uint32)

        def fn(cta, mask):
            write(cta, (to_bits(ra(cta)) << np.uint32(16)) | to_bits(rb(cta)), mask)
        return fn
    if len(ops) != 2:
        raise k.unsupported(ins, "cvt takes d, a")
    d, a = ops
    if dtype_name == "tf32":
        if atype != "f32":
            raise k.unsupported(ins, "cvt to .tf32 reads .f32")
        ra = k.reader(ins, a, "f32")
        write = k.writer(ins, d, "b32")
        mode = float_mode[0] if float_mode else RM.NEAREST_AWAY

        def fn(cta, mask):
            x = np.asarray(ra(cta), np.float32)
            out = convert.float_to_float(np.atleast_1d(x), "f32", "tf32", mode)
            write(cta, np.asarray(out, np.float32).view(np.uint32), mask)
        return fn
    ra = k.reader(ins, a, atype)
    write = k.writer(ins, d, dtype_name)
    src_float, dst_float = is_float(atype), is_float(dtype_name)
    dst_dtype = DTYPE[dtype_name]

    if not src_float and not dst_float:
        if float_mode or int_mode or flush:
            raise k.unsupported(ins, "rounding/ftz on an integer cvt")
        info = np.iinfo(dst_dtype)

        def fn(cta, mask):
            x = np.asarray(ra(cta))
            if sat:
                x = np.clip(x.astype(object) if x.dtype.itemsize == 8 else x.astype(np.int64),
                            info.min, info.max)
                x = np.asarray([int(v) for v in np.atleast_1d(x)]).astype(dst_dtype) \
                    if x.dtype == object else x
            write(cta, np.asarray(x).astype(dst_dtype), mask)
        return fn

    if not src_float:  # int -> float
        mode = float_mode[0] if float_mode else None
        if mode is None:
            raise k.unsupported(ins, "int -> float cvt needs a rounding modifier")
        signed = atype[0] == "s"
        src_elem, dst_elem = _ELEMENT[atype], _ELEMENT[dtype_name]

        def fn(cta, mask):
            x = np.atleast_1d(np.asarray(ra(cta))).view(SINT[DTYPE[atype].itemsize])
            out = convert.int_to_float(x, src_elem, dst_elem, signed, mode)
            out = _float_storage(out, dtype_name)
            if flush:
                out = fp.ftz(out)
            if sat:
                out = fp.saturate(out)
            write(cta, out, mask)
        return fn

    if not dst_float:  # float -> int: always saturating in PTX
        if not int_mode:
            raise k.unsupported(ins, "float -> int cvt needs .rni/.rzi/.rmi/.rpi")
        mode = int_mode[0]
        signed = dtype_name[0] == "s"
        src_elem, dst_elem = _ELEMENT[atype], _ELEMENT[dtype_name]

        def fn(cta, mask):
            x = _float_storage(np.atleast_1d(np.asarray(ra(cta))), atype)
            if flush:
                x = fp.ftz(x)
            out = convert.float_to_int(x, src_elem, dst_elem, signed, mode, saturating=True)
            write(cta, np.asarray(out).view(dst_dtype) if np.asarray(out).dtype.itemsize ==
                  dst_dtype.itemsize else np.asarray(out).astype(dst_dtype), mask)
        return fn

    # float -> float
    if atype == dtype_name:
        if not int_mode:
            if float_mode or not (flush or sat):
                raise k.unsupported(ins, "same-type float cvt needs .rni/.rzi/.rmi/.rpi")
            rounder = lambda x: x  # noqa: E731  (cvt.ftz / cvt.sat only)
        else:
            rounder = {RM.NEAREST_EVEN: np.rint, RM.ZERO: np.trunc, RM.NEGATIVE_INF: np.floor,
                       RM.POSITIVE_INF: np.ceil}[int_mode[0]]

        def fn(cta, mask):
            x = _float_storage(np.asarray(ra(cta)), atype)
            if flush:
                x = fp.ftz(x)
            out = rounder(x).astype(x.dtype)
            if flush:
                out = fp.ftz(out)
            if sat:
                out = fp.saturate(out)
            write(cta, out, mask)
        return fn
    if int_mode:
        raise k.unsupported(ins, "integer rounding on a float -> float cvt")
    widening = DTYPE[dtype_name].itemsize > DTYPE[atype].itemsize
    mode = float_mode[0] if float_mode else (RM.NEAREST_EVEN if widening else None)
    if mode is None:
        raise k.unsupported(ins, "narrowing float cvt needs a rounding modifier")
    src_elem, dst_elem = _ELEMENT[atype], _ELEMENT[dtype_name]

    def fn(cta, mask):
        x = _float_storage(np.atleast_1d(np.asarray(ra(cta))), atype)
        if flush and atype == "f32":
            x = fp.ftz(x)
        out = convert.float_to_float(x, src_elem, dst_elem, mode)
        out = _float_storage(out, dtype_name)
        if relu:
            out = np.where(out.astype(np.float64) < 0, out.dtype.type(0), out).astype(out.dtype)
        if satfinite:
            out = _satfinite(out)
        if flush and dtype_name == "f32":
            out = fp.ftz(out)
        if sat:
            out = fp.saturate(out)
        write(cta, out, mask)
    return fn

