"""Element-wise arithmetic, comparisons and math: each slot of the result from the same slot of the
operands, so no data moves between threads.

Precision (what each math op promises; narrow floats are computed in f32 and rounded once):
  add/sub/mul/div/fma/sqrt: IEEE with the op's rounding mode (div/sqrt `approx` use the .approx forms).
  f32 (f32math.py, within CUDA's documented ulp bounds, measured in benchmarks/results/
  jit-math-accuracy.md): sin/cos/tan: three-step reduction, table-driven f64 reduction for huge |x|,
  then polynomials (1-3 ulp); exp/log/log2/sinh/cosh/tanh/pow: f32 range reductions and FMA
  polynomials (1-2 ulp; pow's log2 as an f32 pair from a 128-entry table); exp2: ex2.approx
  (2 ulp); exp/tanh with the `approx` rounding mode keep the .approx forms. atan2: degree-8
  minimax polynomial (~2 ulp). fpowi / fpowf by a splat exponent of 0 or 2: 1 and x·x (exact).
  remf: x - trunc(x/y)·y (exact only while the quotient fits the significand).
  f64: add/sub/mul/div/fma/sqrt are exact IEEE; exp/exp2/log/log2/sin/cos/tan/sinh/cosh/tanh/
  pow/fpowi/atan2 run in double precision (f64math.py: within CUDA's double ulp bounds, C99
  special values).
"""
from __future__ import annotations

import math

from ..lazy_numpy import np

from tilebc.ops.enums import ComparisonOrdering, ComparisonPredicate, RoundingMode, Signedness

from . import dtypes, f32math, intdiv
from .folding import uniform_float, uniform_int
from .common import ROUND, Tile, map_slots
from .registry import lowers

ATAN_COEFFS = (0.999999988082299, -0.33333120742995825, 0.1999371506313169, -0.14213185680470414,
               0.1068137263560257, -0.07596691502272468, 0.04385401862071097,
               -0.01682636167773477, 0.0030496670689966615)


def _float_math(lw, op, compute, *, keep_f64=False, f64=False) -> None:
    """Run `compute(w, cls, regs) -> reg` on f32 (or f64 when keep_f64) registers and round back;
    `f64`: f64 operands are computed in double precision instead, by f64math's builder for the op
    (imported only then: its exact constants take ~4 ms to derive)."""
    w = lw.w
    element = op.operand_values[0].type.element
    rounding = ROUND.get(op.attrs.get("rounding_mode"), "rn")

    def per_slot(regs):
        if element.name == "f64":
            builder = _f64_builder(op) if f64 else None
            if builder is not None:
                return builder(w, *regs)
            if keep_f64:
                return compute(w, "f64", regs)
            narrow = []
            for reg in regs:
                f = w.reg("f32")
                w(f"cvt.rn.f32.f64 {f}, {reg}")
                narrow.append(f)
            out = w.reg("f64")
            w(f"cvt.f64.f32 {out}, {compute(w, 'f32', narrow)}")
            return out
        wide = [dtypes.to_f32(w, r, element) for r in regs]
        return dtypes.from_f32(w, compute(w, "f32", wide), element, rounding)
    map_slots(lw, op, per_slot)


def _f64_builder(op):
    """f64math's double-precision builder for `op`, or None (then computed through f32)."""
    from .f64math import F64_MATH
    return F64_MATH.get(op.name)


def _ftz(op, cls):
    return ".ftz" if op.attrs.get("flush_to_zero") and cls == "f32" else ""


def _binary_float(ptx_op):
    def lower(lw, op):
        mode = ROUND.get(op.attrs.get("rounding_mode"), "rn")

        def compute(w, cls, regs):
            out = w.reg(cls)
            w(f"{ptx_op}.{mode}{_ftz(op, cls)}.{cls} {out}, {regs[0]}, {regs[1]}")
            return out
        _float_math(lw, op, compute, keep_f64=True)
    return lower


lowers("addf")(_binary_float("add"))
lowers("subf")(_binary_float("sub"))
lowers("mulf")(_binary_float("mul"))


def _is_splat_one(lw, value) -> bool:
    """`value` is a splat of the float 1.0 (a constant, possibly reshaped or broadcast)."""
    from .anchors import BROADCASTS, KEEPS, LITERAL, _ROLES
    from .common import element_bytes
    for _ in range(16):
        value = lw.forward.get(value, value)
        op = value.owner
        role = _ROLES.get(getattr(op, "name", None))
        if role == LITERAL:
            attr = op.attrs["value"]
            if not attr.is_splat and value.type.num_elements != 1:
                return False
            size = dtypes.byte_size(value.type.element)
            raw = element_bytes(attr)[:size]
            from tilebc.numeric.numerics import NUMPY_DTYPES  # numpy: only when a literal is read
            return float(np.frombuffer(raw, NUMPY_DTYPES[dtypes.name_of(
                value.type.element)])[0]) == 1.0
        if role not in (KEEPS, BROADCASTS):
            return False
        value = op.operand_values[0]
    return False


@lowers("divf")
def lower_divf(lw, op):
    mode = op.attrs.get("rounding_mode")
    # 1 / x correctly rounded is the correctly rounded reciprocal (specials alike): rcp.rn
    reciprocal = mode in (None, RoundingMode.NEAREST_EVEN) and \
        _is_splat_one(lw, op.operand_values[0])

    def compute(w, cls, regs):
        out = w.reg(cls)
        if reciprocal:
            w(f"rcp.rn{_ftz(op, cls)}.{cls} {out}, {regs[1]}")
        elif mode is RoundingMode.APPROX and cls == "f32":
            w(f"div.approx{_ftz(op, cls)}.f32 {out}, {regs[0]}, {regs[1]}")
        elif mode is RoundingMode.FULL and cls == "f32":
            w(f"div.full{_ftz(op, cls)}.f32 {out}, {regs[0]}, {regs[1]}")
        else:
            w(f"div.{ROUND.get(mode, 'rn')}{_ftz(op, cls)}.{cls} {out}, {regs[0]}, {regs[1]}")
        return out
    _float_math(lw, op, compute, keep_f64=True)


@lowers("fma")
def lower_fma(lw, op):
    mode = ROUND.get(op.attrs.get("rounding_mode"), "rn")

    def compute(w, cls, regs):
        out = w.reg(cls)
        w(f"fma.{mode}{_ftz(op, cls)}.{cls} {out}, {regs[0]}, {regs[1]}, {regs[2]}")
        return out
    _float_math(lw, op, compute, keep_f64=True)


def _unary_float(ptx_text, keep_f64=True):
    def lower(lw, op):
        def compute(w, cls, regs):
            out = w.reg(cls)
            w(ptx_text.format(cls=cls, out=out, a=regs[0], ftz=_ftz(op, cls)))
            return out
        _float_math(lw, op, compute, keep_f64=keep_f64)
    return lower


lowers("absf")(_unary_float("abs{ftz}.{cls} {out}, {a}"))
lowers("negf")(_unary_float("neg{ftz}.{cls} {out}, {a}"))
lowers("ceil")(_unary_float("cvt.rpi.{cls}.{cls} {out}, {a}"))
lowers("floor")(_unary_float("cvt.rmi.{cls}.{cls} {out}, {a}"))


@lowers("sqrt")
def lower_sqrt(lw, op):
    mode = op.attrs.get("rounding_mode")

    def compute(w, cls, regs):
        out = w.reg(cls)
        if mode is RoundingMode.APPROX and cls == "f32":
            w(f"sqrt.approx{_ftz(op, cls)}.f32 {out}, {regs[0]}")
        else:
            w(f"sqrt.{ROUND.get(mode, 'rn')}{_ftz(op, cls)}.{cls} {out}, {regs[0]}")
        return out
    _float_math(lw, op, compute, keep_f64=True)


@lowers("rsqrt")
def lower_rsqrt(lw, op):
    def compute(w, cls, regs):
        root, out = w.reg(cls), w.reg(cls)
        w(f"sqrt.rn{_ftz(op, cls)}.{cls} {root}, {regs[0]}")
        w(f"rcp.rn{_ftz(op, cls)}.{cls} {out}, {root}")
        return out
    _float_math(lw, op, compute, keep_f64=True)


def _fmin_max(name):
    def lower(lw, op):
        nan = ".NaN" if op.attrs.get("propagate_nan") else ""

        def compute(w, cls, regs):
            out = w.reg(cls)
            if nan and cls == "f64":  # max.NaN has no f64 form: propagate by hand
                plain, either = w.reg("f64"), w.reg("pred")
                w(f"{name}.f64 {plain}, {regs[0]}, {regs[1]}")
                w(f"testp.notanumber.f64 {either}, {regs[0]}")
                w(f"selp.f64 {plain}, {regs[0]}, {plain}, {either}")
                w(f"testp.notanumber.f64 {either}, {regs[1]}")
                w(f"selp.f64 {out}, {regs[1]}, {plain}, {either}")
                return out
            w(f"{name}{_ftz(op, cls)}{nan}.{cls} {out}, {regs[0]}, {regs[1]}")
            return out
        _float_math(lw, op, compute, keep_f64=True)
    return lower


lowers("maxf")(_fmin_max("max"))
lowers("minf")(_fmin_max("min"))


# -- transcendental building blocks on f32 registers ------------------------------------------
def f32_const(w, value: float) -> str:
    reg = w.reg("f32")
    w(f"mov.f32 {reg}, {dtypes.float_immediate(value, 'f32')}")
    return reg


def exp_f32(w, x: str, ftz: str = "") -> str:
    """e^x: n = rint(x·log2 e), r = x - n·ln2 (two-term), e^x = 2^n · 2^(r·log2 e)."""
    n, r, t, p1, p2, out = (w.reg("f32") for _ in range(6))
    # Clamp to [-110, 100] first: e^x is already 0 / inf in f32 there, and the reduction below
    # would turn ±inf into inf - inf = NaN (exp(-inf) must be 0 for masked softmax).  setp is
    # false for NaN, so NaN passes through unclamped (min/max would replace it).
    clamped, low, high = w.reg("f32"), w.reg("pred"), w.reg("pred")
    w(f"setp.lt.f32 {low}, {x}, {dtypes.float_immediate(-110.0, 'f32')}")
    w(f"selp.f32 {clamped}, {dtypes.float_immediate(-110.0, 'f32')}, {x}, {low}")
    w(f"setp.gt.f32 {high}, {x}, {dtypes.float_immediate(100.0, 'f32')}")
    w(f"selp.f32 {clamped}, {dtypes.float_immediate(100.0, 'f32')}, {clamped}, {high}")
    x = clamped
    w(f"mul.rn.f32 {t}, {x}, {dtypes.float_immediate(1 / math.log(2), 'f32')}")
    w(f"cvt.rni.f32.f32 {n}, {t}")
    w(f"fma.rn.f32 {r}, {n}, {dtypes.float_immediate(-0.693145751953125, 'f32')}, {x}")
    w(f"fma.rn.f32 {r}, {n}, {dtypes.float_immediate(-1.428606765330187e-06, 'f32')}, {r}")
    w(f"mul.rn.f32 {r}, {r}, {dtypes.float_immediate(1 / math.log(2), 'f32')}")
    w(f"ex2.approx{ftz}.f32 {p1}, {r}")
    # split 2^n in two halves so n up to ±254 neither overflows nor flushes early
    half = w.reg("f32")
    w(f"mul.rn.f32 {half}, {n}, 0f3F000000")
    w(f"cvt.rmi.f32.f32 {half}, {half}")
    w(f"ex2.approx{ftz}.f32 {p2}, {half}")
    rest = w.reg("f32")
    w(f"sub.rn.f32 {rest}, {n}, {half}")
    p3 = w.reg("f32")
    w(f"ex2.approx{ftz}.f32 {p3}, {rest}")
    w(f"mul.rn.f32 {out}, {p1}, {p2}")
    w(f"mul.rn.f32 {out}, {out}, {p3}")
    return out


def reduce_2pi(w, x: str) -> str:
    q, r = w.reg("f32"), w.reg("f32")
    w(f"mul.rn.f32 {q}, {x}, {dtypes.float_immediate(1 / (2 * math.pi), 'f32')}")
    w(f"cvt.rni.f32.f32 {q}, {q}")
    w(f"fma.rn.f32 {r}, {q}, {dtypes.float_immediate(-6.28125, 'f32')}, {x}")
    w(f"fma.rn.f32 {r}, {q}, {dtypes.float_immediate(-(2 * math.pi - 6.28125), 'f32')}, {r}")
    return r


def _math(build):
    """The lowering of a one-operand float math op from its f32 builder; f64 operands take the
    op's builder in f64math.F64_MATH."""
    def lower(lw, op):
        def compute(w, cls, regs):
            return build(w, op, *regs)
        _float_math(lw, op, compute, f64=True)
    return lower


@lowers("exp", expands=True)
@_math
def _exp(w, op, x):
    if op.attrs.get("rounding_mode") is RoundingMode.APPROX:
        return exp_f32(w, x)
    return f32math.exp_f32(w, x)


@lowers("exp2", expands=True)
@_math
def _exp2(w, op, x):
    out = w.reg("f32")
    w(f"ex2.approx{_ftz(op, 'f32')}.f32 {out}, {x}")
    return out


@lowers("log2", expands=True)
@_math
def _log2(w, op, x):
    return f32math.log2_f32(w, x)


@lowers("log", expands=True)
@_math
def _log(w, op, x):
    return f32math.log_f32(w, x)


@lowers("sin", expands=True)
@_math
def _sin(w, op, x):
    return f32math.sin_f32(w, x)


@lowers("cos", expands=True)
@_math
def _cos(w, op, x):
    return f32math.cos_f32(w, x)


@lowers("tan", expands=True)
@_math
def _tan(w, op, x):
    return f32math.tan_f32(w, x)


@lowers("sinh", expands=True)
@_math
def _sinh(w, op, x):
    return f32math.sinh_f32(w, x)


@lowers("cosh", expands=True)
@_math
def _cosh(w, op, x):
    return f32math.cosh_f32(w, x)


@lowers("tanh", expands=True)
@_math
def _tanh(w, op, x):
    out = w.reg("f32")
    if op.attrs.get("rounding_mode") is RoundingMode.APPROX:
        w(f"tanh.approx.f32 {out}, {x}")
        return out
    return f32math.tanh_f32(w, x)


def pow_f32(w, x, y):
    """x^y for f32 registers: 2^(y·log2|x|), negative x allowed for integral y. Ordinary
    operands (0 < x < inf, |y log2 x| <= 200) take a path free of special-value fix-ups; the
    others branch (divergently, rarely taken) to the full sequence."""
    fast, ordinary = f32math.pow_ordinary_f32(w, x, y)
    out = w.reg("f32")
    w(f"mov.f32 {out}, {fast}")
    done = w.label("pow_ordinary")
    w(f"@{ordinary} bra {done}")
    w(f"mov.f32 {out}, {_pow_full_f32(w, x, y)}")
    w.place(done)
    return out


def _pow_full_f32(w, x, y):
    """pow_f32 for any operands, C99 / numpy special values included."""
    ax = w.reg("f32")
    w(f"abs.f32 {ax}, {x}")
    out = f32math.pow_magnitude_f32(w, ax, y)
    yi, half, hf = w.reg("f32"), w.reg("f32"), w.reg("f32")
    is_int, neg, odd, nan = w.reg("pred"), w.reg("pred"), w.reg("pred"), w.reg("pred")
    w(f"cvt.rzi.f32.f32 {yi}, {y}")
    w(f"setp.eq.f32 {is_int}, {yi}, {y}")
    w(f"mul.rn.f32 {half}, {y}, 0f3F000000")
    w(f"cvt.rzi.f32.f32 {hf}, {half}")
    w(f"setp.ne.f32 {odd}, {hf}, {half}")
    # The sign of an odd power follows x's sign bit (pow(-0, -3) = -inf, pow(-0, 3) = -0).
    x_bits, negated, flip = w.reg("b32"), w.reg("f32"), w.reg("pred")
    w(f"mov.b32 {x_bits}, {x}")
    w(f"setp.lt.s32 {neg}, {x_bits}, 0")
    w(f"neg.f32 {negated}, {out}")
    w(f"and.pred {flip}, {neg}, {odd}")
    w(f"and.pred {flip}, {flip}, {is_int}")   # y / 2 has a fraction for non-integral y too
    w(f"selp.f32 {out}, {negated}, {out}, {flip}")
    # A negative finite base with a non-integral exponent has no real power; -inf has
    # (C: +inf for y > 0, +0 for y < 0, which the exp2 path already gives).
    finite = w.reg("pred")
    w(f"setp.lt.f32 {neg}, {x}, 0f00000000")
    w(f"setp.ne.f32 {finite}, {x}, 0fFF800000")
    w(f"and.pred {neg}, {neg}, {finite}")
    w(f"not.pred {is_int}, {is_int}")
    w(f"and.pred {nan}, {neg}, {is_int}")
    w(f"selp.f32 {out}, 0f7FC00000, {out}, {nan}")
    # pow(x, ±0) = 1, pow(1, y) = 1 even for NaN y, pow(-1, ±inf) = 1 (C99 / numpy), where
    # y·log2|x| is NaN.
    one, unit, inf_y, ay = w.reg("pred"), w.reg("pred"), w.reg("pred"), w.reg("f32")
    w(f"setp.eq.f32 {one}, {y}, 0f00000000")
    w(f"setp.eq.f32 {unit}, {x}, 0f3F800000")
    w(f"or.pred {one}, {one}, {unit}")
    w(f"abs.f32 {ay}, {y}")
    w(f"setp.eq.f32 {inf_y}, {ay}, 0f7F800000")
    w(f"setp.eq.f32 {unit}, {x}, 0fBF800000")
    w(f"and.pred {inf_y}, {inf_y}, {unit}")
    w(f"or.pred {one}, {one}, {inf_y}")
    w(f"selp.f32 {out}, 0f3F800000, {out}, {one}")
    return out


def _square(w, x: str) -> str:
    out = w.reg("f32")
    w(f"mul.rn.f32 {out}, {x}, {x}")
    return out


@lowers("fpowf", expands=True)
def lower_fpowf(lw, op):
    # A splat exponent of 2 or 0 (cuTile's `x ** 2` below bytecode 13.4): x*x and 1, as fpowi.
    exponent = uniform_float(op.operand_values[1]) \
        if op.operand_values[0].type.element.name != "f64" else None
    if exponent == 2.0:
        _float_math(lw, op, lambda w, cls, regs: _square(w, regs[0]))
    elif exponent == 0.0:  # -0.0 too: pow(x, ±0) = 1 for every x, NaN included
        _float_math(lw, op, lambda w, cls, regs: f32_const(w, 1.0))
    else:
        _float_math(lw, op, lambda w, cls, regs: pow_f32(w, regs[0], regs[1]), f64=True)


@lowers("fpowi", expands=True)
def lower_fpowi(lw, op):
    w = lw.w
    base, exponent = (lw.get(v) for v in op.operand_values)
    element = base.element
    rounding = "rn"
    # x^0 = 1 (NaN included) and x^2 = x*x, rounded once: a narrow float's square is exact in
    # f32, so these equal pow correctly rounded, without pow's ~60 instructions a slot (f64 keeps
    # its pow: its square is not exact in any wider type here).
    constant = uniform_int(lw, op.operand_values[1]) if element.name != "f64" else None

    def per_slot(k):
        x = base.slot(k)
        if constant == 0:
            return dtypes.from_f32(w, f32_const(w, 1.0), element, rounding)
        if constant == 2:
            return dtypes.from_f32(w, _square(w, dtypes.to_f32(w, x, element)), element, rounding)
        bits = 64 if exponent.element.name == "i64" else 32
        if element.name == "f64":  # an i64 exponent beyond 2^53 rounds; pow is 0/inf/±1 there
            yd = w.reg("f64")
            w(f"cvt.rn.f64.s{bits} {yd}, {exponent.slot(k)}")
            from . import f64math
            return f64math.pow_f64(w, x, yd)
        xf = dtypes.to_f32(w, x, element)
        yf = w.reg("f32")
        w(f"cvt.rn.f32.s{bits} {yf}, {exponent.slot(k)}")
        out = pow_f32(w, xf, yf)
        return dtypes.from_f32(w, out, element, rounding)
    result_type = op.results[0].type
    lw.set(op.results[0], Tile(result_type, [per_slot(k) for k in range(lw.slots(result_type.num_elements))]))


@lowers("atan2", expands=True)
def lower_atan2(lw, op):
    def compute(w, cls, regs):
        y, x = regs  # numpy order: atan2(first, second) is the angle of (second, first)
        ax, ay, big, small, a, s, p, r = (w.reg("f32") for _ in range(8))
        w(f"abs.f32 {ax}, {x}")
        w(f"abs.f32 {ay}, {y}")
        w(f"max.f32 {big}, {ax}, {ay}")
        w(f"min.f32 {small}, {ax}, {ay}")
        w(f"div.rn.f32 {a}, {small}, {big}")
        w(f"mul.rn.f32 {s}, {a}, {a}")
        w(f"mov.f32 {p}, {dtypes.float_immediate(ATAN_COEFFS[-1], 'f32')}")
        for coeff in reversed(ATAN_COEFFS[:-1]):
            w(f"fma.rn.f32 {p}, {p}, {s}, {dtypes.float_immediate(coeff, 'f32')}")
        w(f"mul.rn.f32 {r}, {p}, {a}")
        swap, neg_x, zero = w.reg("pred"), w.reg("pred"), w.reg("pred")
        both_inf, any_nan = w.reg("pred"), w.reg("pred")
        alt, x_bits = w.reg("f32"), w.reg("b32")
        w(f"setp.gt.f32 {swap}, {ay}, {ax}")
        w(f"sub.rn.f32 {alt}, {dtypes.float_immediate(math.pi / 2, 'f32')}, {r}")
        w(f"selp.f32 {r}, {alt}, {r}, {swap}")
        # C's special cases, where small / big is 0/0 or inf/inf: both zero gives 0 (then pi
        # for a negative x, -0 included); both infinite gives pi/4 (then 3 pi/4).
        w(f"setp.eq.f32 {zero}, {big}, 0f00000000")
        w(f"selp.f32 {r}, 0f00000000, {r}, {zero}")
        w(f"setp.eq.f32 {both_inf}, {small}, 0f7F800000")
        w(f"selp.f32 {r}, {dtypes.float_immediate(math.pi / 4, 'f32')}, {r}, {both_inf}")
        w(f"mov.b32 {x_bits}, {x}")
        w(f"setp.lt.s32 {neg_x}, {x_bits}, 0")   # sign bit, so that x = -0 counts as negative
        w(f"sub.rn.f32 {alt}, {dtypes.float_immediate(math.pi, 'f32')}, {r}")
        w(f"selp.f32 {r}, {alt}, {r}, {neg_x}")
        out = w.reg("f32")
        w(f"copysign.f32 {out}, {y}, {r}")
        w(f"setp.nan.f32 {any_nan}, {x}, {y}")
        w(f"selp.f32 {out}, 0f7FC00000, {out}, {any_nan}")
        return out
    _float_math(lw, op, compute, f64=True)


@lowers("remf", expands=True)
def lower_remf(lw, op):
    def compute(w, cls, regs):
        q, out = w.reg(cls), w.reg(cls)
        w(f"div.rn.{cls} {q}, {regs[0]}, {regs[1]}")
        w(f"cvt.rzi.{cls}.{cls} {q}, {q}")
        w(f"neg.{cls} {q}, {q}")
        w(f"fma.rn.{cls} {out}, {q}, {regs[1]}, {regs[0]}")
        w(f"copysign.{cls} {out}, {regs[0]}, {out}")
        return out
    _float_math(lw, op, compute, keep_f64=True)


# -- comparisons and select --------------------------------------------------------------------
CMP = {ComparisonPredicate.EQUAL: "eq", ComparisonPredicate.NOT_EQUAL: "ne",
       ComparisonPredicate.LESS_THAN: "lt", ComparisonPredicate.LESS_THAN_OR_EQUAL: "le",
       ComparisonPredicate.GREATER_THAN: "gt", ComparisonPredicate.GREATER_THAN_OR_EQUAL: "ge"}


@lowers("cmpf")
def lower_cmpf(lw, op):
    w = lw.w
    element = op.operand_values[0].type.element
    cmp = CMP[op.attrs["comparison_predicate"]]
    if op.attrs["comparison_ordering"] is ComparisonOrdering.UNORDERED:
        cmp += "u"
    cls = "f64" if element.name == "f64" else "f32"

    def compute(regs):
        if cls == "f32":
            regs = [dtypes.to_f32(w, r, element) for r in regs]
        out = w.reg("pred")
        w(f"setp.{cmp}.{cls} {out}, {regs[0]}, {regs[1]}")
        return out
    map_slots(lw, op, compute)


def int_type(element, unsigned: bool) -> str:
    bits = 64 if element.name in ("i64",) or dtypes.name_of(element) == "ptr" else 32
    return f"{'u' if unsigned else 's'}{bits}"


def as_int_regs(lw, regs, element, unsigned):
    """Operands ready for a 32/64-bit integer instruction of the given signedness."""
    if dtypes.name_of(element) == "i1":
        out = []
        for reg in regs:
            wide = lw.w.reg("b32")
            lw.w(f"selp.b32 {wide}, {1 if unsigned else -1}, 0, {reg}")
            out.append(wide)
        return out
    if unsigned and dtypes.name_of(element) in ("i8", "i16"):
        return [lw.zero_extended(r, element) for r in regs]
    return list(regs)


@lowers("cmpi")
def lower_cmpi(lw, op):
    w = lw.w
    element = op.operand_values[0].type.element
    unsigned = op.attrs["signedness"] is Signedness.UNSIGNED
    cmp = CMP[op.attrs["comparison_predicate"]]
    kind = "u32" if dtypes.name_of(element) == "i1" else int_type(element, unsigned)

    def compute(regs):
        regs = as_int_regs(lw, regs, element, unsigned)
        out = w.reg("pred")
        narrow = [lw.widened.get(r) for r in regs] if kind.endswith("64") else [None]
        if all(narrow) and narrow[0][0] == narrow[1][0]:
            # i64 values both extended alike from 32 bits compare as those 32 bits do: sign
            # extension keeps both the signed and the unsigned order, zero extension keeps the
            # unsigned order and makes the signed one unsigned
            narrow_kind = ("u" if unsigned or narrow[0][0] == "u" else "s") + "32"
            w(f"setp.{cmp}.{narrow_kind} {out}, {narrow[0][1]}, {narrow[1][1]}")
            return out
        w(f"setp.{cmp}.{kind} {out}, {regs[0]}, {regs[1]}")
        return out
    map_slots(lw, op, compute)


@lowers("select")
def lower_select(lw, op):
    element = op.results[0].type.element
    floor_mod = lw.floor_mods.get(op)
    if floor_mod is not None:  # x mod 2^k (floor), see simplify.floor_mods
        x, mask = floor_mod
        tile = lw.get(x, any_layout=True)
        width = 64 if dtypes.int_bits(element) == 64 else 32
        regs, done = [], {}
        for reg in tile.regs:
            if reg not in done:
                done[reg] = lw.w.reg(f"b{width}")
                lw.w(f"and.b{width} {done[reg]}, {reg}, {mask}")
            regs.append(done[reg])
        lw.set(op.results[0], Tile(op.results[0].type, regs, tile.layout))
        return
    map_slots(lw, op, lambda regs: lw.select(regs[0], regs[1], regs[2], element))


# -- integer arithmetic ------------------------------------------------------------------------
def _int_op(lw, op, build, *, unsigned=False):
    """`build(w, type_suffix, regs) -> reg` on 32/64-bit registers, then re-normalise i8/i16."""
    w = lw.w
    element = op.results[0].type.element

    def compute(regs):
        regs = as_int_regs(lw, regs, op.operand_values[0].type.element, unsigned)
        if dtypes.name_of(element) == "i1":
            raw = build(w, "s32", regs)
            out = w.reg("pred")
            w(f"and.b32 {raw}, {raw}, 1")
            w(f"setp.ne.u32 {out}, {raw}, 0")
            return out
        return lw.normalize_int(build(w, int_type(element, unsigned), regs), element)
    map_slots(lw, op, compute)


def _simple_int(ptx_op):
    def lower(lw, op):
        def build(w, kind, regs):
            out = w.reg("b64" if kind.endswith("64") else "b32")
            narrow = [lw.widened.get(r) for r in regs] if ptx_op == "mul.lo" and \
                kind.endswith("64") and len(regs) == 2 else [None]
            if all(narrow) and narrow[0][0] == narrow[1][0]:
                # both factors are 32-bit values extended alike: one widening multiply is exact
                w(f"mul.wide.{narrow[0][0]}32 {out}, {narrow[0][1]}, {narrow[1][1]}")
                return out
            w(f"{ptx_op}.{kind} {out}, {', '.join(regs)}")
            return out
        _int_op(lw, op, build)
    return lower


lowers("addi")(_simple_int("add"))
lowers("subi")(_simple_int("sub"))
lowers("muli")(_simple_int("mul.lo"))
lowers("absi")(_simple_int("abs"))
lowers("negi")(_simple_int("neg"))


@lowers("mulhii")
def lower_mulhii(lw, op):
    def build(w, kind, regs):
        out = w.reg("b64" if kind.endswith("64") else "b32")
        w(f"mul.hi.{kind} {out}, {regs[0]}, {regs[1]}")
        return out
    _int_op(lw, op, build, unsigned=True)


def _signed_int(ptx_op, *, floor_fix=False):
    def lower(lw, op):
        unsigned = op.attrs.get("signedness") is Signedness.UNSIGNED
        divisor = _constant_divisor(lw, op, unsigned) if ptx_op in ("div", "rem") else None

        def build(w, kind, regs):
            cls = "b64" if kind.endswith("64") else "b32"
            bits = int(kind[1:])
            remainder = None
            if divisor is not None and ptx_op == "div" and not unsigned and floor_fix and \
                    divisor > 1 and divisor & (divisor - 1) == 0 and \
                    op.attrs.get("rounding") is RoundingMode.NEGATIVE_INF:
                # floor division by 2^k is the arithmetic shift right by k
                out = w.reg(cls)
                w(f"shr.s{bits} {out}, {regs[0]}, {divisor.bit_length() - 1}")
                return out
            if divisor is not None and ptx_op == "div":
                if unsigned:
                    out = intdiv.udiv(w, regs[0], divisor, bits)
                    remainder = lambda: intdiv.urem(w, regs[0], divisor, bits,  # noqa: E731
                                                    quotient=out)
                else:
                    out = intdiv.sdiv(w, regs[0], divisor, bits)
                    remainder = lambda: intdiv.srem(w, regs[0], divisor, bits,  # noqa: E731
                                                    quotient=out)
            elif divisor is not None:
                out = (intdiv.urem(w, regs[0], divisor, bits) if unsigned
                       else intdiv.srem(w, regs[0], divisor, bits))
            elif ptx_op in ("div", "rem"):
                # a runtime divisor: one truncating division per (dividend, divisor), shared by
                # the divi and a later remi of the same operands; a remainder is x - q * d from
                # it (a rem instruction costs ptxas the same division again); a remi with no
                # division before it stays one rem
                key = ("truncating quotient", kind, regs[0], regs[1])
                quotient = lw.scoped_hit(key)
                if ptx_op == "rem" and quotient is None:
                    out = w.reg(cls)
                    w(f"rem.{kind} {out}, {regs[0]}, {regs[1]}")
                    return out
                out = quotient = lw.scoped(key, lambda: _divide(w, kind, cls, regs))
                remainder = lambda: _remainder_from(w, kind, cls, regs, quotient)  # noqa: E731
                if ptx_op == "rem":
                    return remainder()
            else:
                out = w.reg(cls)
                w(f"{ptx_op}.{kind} {out}, {regs[0]}, {regs[1]}")
            if floor_fix:
                out = _div_rounding(w, op, kind, cls, regs, out, unsigned, remainder)
            return out
        _int_op(lw, op, build, unsigned=unsigned)
    return lower


def _divide(w, kind, cls, regs):
    out = w.reg(cls)
    w(f"div.{kind} {out}, {regs[0]}, {regs[1]}")
    return out


def _remainder_from(w, kind, cls, regs, quotient):
    product, out = w.reg(cls), w.reg(cls)
    w(f"mul.lo.{kind} {product}, {quotient}, {regs[1]}")
    w(f"sub.{kind} {out}, {regs[0]}, {product}")
    return out


def _constant_divisor(lw, op, unsigned):
    """The divisor of a divi/remi as a Python int when it is one nonzero compile-time constant
    for every element (unsigned ops: its unsigned value), else None (i1: the hardware op)."""
    bits = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}.get(
        dtypes.name_of(op.operand_values[1].type.element))
    if bits is None:
        return None
    value = uniform_int(lw, op.operand_values[1])
    if value is None:
        return None
    if unsigned:
        value &= (1 << bits) - 1
    return value or None


def _div_rounding(w, op, kind, cls, regs, quotient, unsigned, remainder=None):
    """Adjust a truncating quotient for divi's floor (negative_inf) / ceil (positive_inf) modes;
    `remainder()`, when given, emits the remainder (constant divisors: no rem instruction)."""
    mode = op.attrs.get("rounding", RoundingMode.ZERO)
    if mode not in (RoundingMode.NEGATIVE_INF, RoundingMode.POSITIVE_INF):
        return quotient
    if unsigned and mode is RoundingMode.NEGATIVE_INF:
        return quotient
    if remainder is not None:
        rem = remainder()
    else:
        rem = w.reg(cls)
        w(f"rem.{kind} {rem}, {regs[0]}, {regs[1]}")
    inexact, adjust = w.reg("pred"), w.reg("pred")
    w(f"setp.ne.{kind} {inexact}, {rem}, 0")
    out = w.reg(cls)
    if unsigned:
        w(f"add.{kind} {out}, {quotient}, 1")
        w(f"selp.{kind.replace('u', 'b')} {out}, {out}, {quotient}, {inexact}")
        return out
    signs, neg = w.reg(cls), w.reg("pred")
    w(f"xor.b{kind[1:]} {signs}, {rem}, {regs[1]}")
    w(f"setp.lt.{kind} {neg}, {signs}, 0")
    if mode is RoundingMode.POSITIVE_INF:
        w(f"not.pred {neg}, {neg}")
    w(f"and.pred {adjust}, {inexact}, {neg}")
    delta = -1 if mode is RoundingMode.NEGATIVE_INF else 1
    w(f"add.{kind} {out}, {quotient}, {delta}")
    w(f"selp.b{kind[1:]} {out}, {out}, {quotient}, {adjust}")
    return out


lowers("divi")(_signed_int("div", floor_fix=True))
lowers("remi")(_signed_int("rem"))
lowers("maxi")(_signed_int("max"))
lowers("mini")(_signed_int("min"))


@lowers("shli")
def lower_shli(lw, op):
    def build(w, kind, regs):
        out = w.reg("b64" if kind.endswith("64") else "b32")
        amount = _shift_amount(w, regs[1], kind)
        w(f"shl.b{kind[1:]} {out}, {regs[0]}, {amount}")
        return out
    _int_op(lw, op, build)


@lowers("shri")
def lower_shri(lw, op):
    unsigned = op.attrs.get("signedness") is Signedness.UNSIGNED

    def build(w, kind, regs):
        out = w.reg("b64" if kind.endswith("64") else "b32")
        amount = _shift_amount(w, regs[1], kind)
        w(f"shr.{kind} {out}, {regs[0]}, {amount}")
        return out
    _int_op(lw, op, build, unsigned=unsigned)


def _shift_amount(w, reg, kind):
    """PTX shift amounts are .u32 registers."""
    if not kind.endswith("64"):
        return reg
    amount = w.reg("b32")
    w(f"cvt.u32.u64 {amount}, {reg}")
    return amount


def _bitwise(ptx_op):
    def lower(lw, op):
        w = lw.w
        element = op.results[0].type.element

        def compute(regs):
            cls = dtypes.reg_class(element)
            out = w.reg(cls)
            suffix = {"pred": "pred", "b64": "b64"}.get(cls, "b32")
            w(f"{ptx_op}.{suffix} {out}, {regs[0]}, {regs[1]}")
            return out
        map_slots(lw, op, compute)
    return lower


lowers("andi")(_bitwise("and"))
lowers("ori")(_bitwise("or"))
lowers("xori")(_bitwise("xor"))
