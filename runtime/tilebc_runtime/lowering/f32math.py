"""Accurate f32 math for the JIT within CUDA's documented ulp bounds: sin, cos, tan (f32 with an
f64 table reduction for huge arguments) and exp, log, log2, sinh, cosh, tanh, pow (f32, see
"exp / log" below).

The PTX `.approx` instructions are fast but loose: sin/cos.approx.f32 carry an absolute error of
about 2^-20.9 inside [-pi, pi] (hundreds of ulps near a zero of the function, and nothing useful
once the argument needs reducing). CUDA's sinf/cosf promise 2 ulp and tanf 4 ulp over the whole
f32 range, so these sequences use only IEEE instructions (fma, mul, add, div.rn, conversions):

  reduction   x = q*(pi/2) + r with |r| <= ~pi/4:
              |x| <= 105615: three-term Cody-Waite in f32 (the first fma is exact for |q| < 2^17,
              see `_cody_waite`);
              larger finite |x|: a Payne-Hanek style table reduction in f64, taken on a (divergent)
              branch so ordinary arguments never pay for it (see `_huge_reduction`).
  kernels     sin r = r + r^3*P(r^2), cos r = 1 + r^2*Q(r^2): Taylor coefficients up to r^9 / r^10
              (truncation < 0.05 ulp on |r| <= pi/4), evaluated with fma in f32.
  quadrant    q mod 4 picks +-sin r or +-cos r; tan r = sin r / cos r (or -cos r / sin r).

Tiny |x| (< 2^-12) returns x for sin and tan: the correctly rounded answer, and it keeps -0.
"""
from __future__ import annotations

import math
import struct
from functools import lru_cache

from ..lazy_numpy import np

from . import dtypes

# Arguments up to here take the f32 Cody-Waite path (|q| <= 67238 < 2^17, see _cody_waite).
CODY_WAITE_LIMIT = 105615.0
_HUGE_MIN_EXPONENT_FIELD = 143           # the f32 exponent field of 2^16 (< CODY_WAITE_LIMIT)
_PART_BITS = 28                          # f64 table parts: 28 bits each, so m * part is exact
_PARTS = 4


def _f32(value: float) -> float:
    """`value` rounded to f32 (ties to even, as a C cast), without importing numpy."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


def _imm(value: float) -> str:
    return dtypes.float_immediate(value, "f32")


def _imm64(value: float) -> str:
    return dtypes.float_immediate(value, "f64")


# ------------------------------------------------------------------------- constants
@lru_cache(maxsize=None)
def two_over_pi_scaled(bits: int) -> int:
    """floor(2/pi * 2^bits), from Machin's formula in integer arithmetic (guard bits included)."""
    guard = 64
    one = 1 << (bits + 2 + guard)

    def arctan_inverse(n: int) -> int:  # atan(1/n) * one, alternating series
        total, term, k, n2 = 0, one // n, 1, n * n
        while term:
            total += term // k if (k // 2) % 2 == 0 else -(term // k)
            term //= n2
            k += 2
        return total
    pi_scaled = 16 * arctan_inverse(5) - 4 * arctan_inverse(239)   # pi * 2^(bits+2+guard)
    return ((2 * one) << bits) // pi_scaled


def _pio2_split_f32():
    """pi/2 as three f32 pieces C1 + C2 + C3 (each the f32 rounding of what remains)."""
    pio2 = _pio2_scaled(200)
    pieces, rest = [], pio2
    for _ in range(3):
        piece = _f32(rest / (1 << 200))
        pieces.append(piece)
        rest -= int(round(piece * (1 << 200)))  # piece is a dyadic rational: exact
    return tuple(pieces)


@lru_cache(maxsize=None)
def _pio2_scaled(bits: int) -> int:
    """round(pi/2 * 2^bits)."""
    # 2/pi * 2^(2*bits) / 2^bits inverted: pi/2 * 2^bits = 2^(2*bits) / (2/pi * 2^bits)
    return (1 << (2 * bits + 80)) // two_over_pi_scaled(bits + 80)


PIO2_F32 = _pio2_split_f32()
PIO2_F64 = _pio2_scaled(200) / float(1 << 200)


@lru_cache(maxsize=None)
def huge_reduction_table() -> bytes:
    """Per f32 exponent field e >= 143: (2^(e-150) * 2/pi) mod 4 as four f64 parts of 28 bits
    (part k holds the bits from 2^(1-28k) down to 2^(-26-28k)); little-endian f64 rows of 32 bytes.
    A finite f32 |x| = m * 2^(e-150) with an integer m < 2^24, and m * (T mod 4) = m*T mod 4, so
    x * 2/pi mod 4 = sum of m * part_k, each product exact in f64."""
    fraction_bits = 26 + _PART_BITS * (_PARTS - 1)        # T's bits below the binary point
    rows = []
    for field in range(_HUGE_MIN_EXPONENT_FIELD, 255):
        # floor(2^(field-150) * 2/pi * 2^fraction_bits) mod 4*2^fraction_bits (exponent >= 3)
        value = two_over_pi_scaled(field - 150 + fraction_bits) % (4 << fraction_bits)
        for k in range(_PARTS):
            low = fraction_bits - 26 - _PART_BITS * k         # bit index of part k's last bit
            chunk = (value >> low) & ((1 << _PART_BITS) - 1)
            rows.append(math.ldexp(chunk, -26 - _PART_BITS * k))
    return np.asarray(rows, dtype="<f8").tobytes()


# ------------------------------------------------------------------------- reduction
def _cody_waite(w, x: str):
    """(r, q) with x = q*pi/2 + r, r an f32 register and q an s32 register.
    With |x| <= CODY_WAITE_LIMIT, |q| < 2^17, so x - q*C1 (bits down to 2^-23, |.| < 1) is exact
    in the first fma; the next two add pi/2's lower pieces with one rounding each."""
    qf, r, q = w.reg("f32"), w.reg("f32"), w.reg("b32")
    w(f"mul.rn.f32 {qf}, {x}, {_imm(2 / math.pi)}")
    w(f"cvt.rni.f32.f32 {qf}, {qf}")
    c1, c2, c3 = PIO2_F32
    w(f"fma.rn.f32 {r}, {qf}, {_imm(-c1)}, {x}")
    r2, r3 = w.reg("f32"), w.reg("f32")
    w(f"fma.rn.f32 {r2}, {qf}, {_imm(-c2)}, {r}")
    w(f"fma.rn.f32 {r3}, {qf}, {_imm(-c3)}, {r2}")
    w(f"cvt.rni.s32.f32 {q}, {qf}")
    return r3, q


def _huge_reduction(w, x: str):
    """(r, q) for finite |x| >= 2^16 from the f64 table (see huge_reduction_table): the f64
    sum keeps ~2^-80 absolute accuracy in quadrant units, enough for any f32 argument (the
    closest f32 to a multiple of pi/2 is still ~2^-30 away from it)."""
    bits, mag, field, man, idx = (w.reg("b32") for _ in range(5))
    w(f"mov.b32 {bits}, {x}")
    w(f"and.b32 {mag}, {bits}, 2147483647")
    w(f"shr.u32 {field}, {mag}, 23")
    w(f"and.b32 {man}, {mag}, 8388607")
    w(f"or.b32 {man}, {man}, 8388608")
    w(f"sub.s32 {idx}, {field}, {_HUGE_MIN_EXPONENT_FIELD}")
    w(f"min.s32 {idx}, {idx}, {254 - _HUGE_MIN_EXPONENT_FIELD}")
    w(f"max.s32 {idx}, {idx}, 0")
    symbol = w.const_table("f32math_pio2_table", huge_reduction_table())
    base, offset, address = w.reg("b64"), w.reg("b64"), w.reg("b64")
    w(f"mov.u64 {base}, {symbol}")
    w(f"mul.wide.u32 {offset}, {idx}, {8 * _PARTS}")
    w(f"add.s64 {address}, {base}, {offset}")
    parts = []
    for k in range(_PARTS):
        part = w.reg("f64")
        w(f"ld.const.f64 {part}, [{address}+{8 * k}]")
        parts.append(part)
    m = w.reg("f64")
    w(f"cvt.rn.f64.u32 {m}, {man}")
    p0, quarter, i0, p1, s, qd, f = (w.reg("f64") for _ in range(7))
    w(f"mul.rn.f64 {p0}, {m}, {parts[0]}")                 # exact: 24 x 28 bits
    w(f"mul.rn.f64 {quarter}, {p0}, {_imm64(0.25)}")
    w(f"cvt.rmi.f64.f64 {quarter}, {quarter}")
    w(f"fma.rn.f64 {i0}, {quarter}, {_imm64(-4.0)}, {p0}")  # p0 mod 4, exact
    w(f"mul.rn.f64 {p1}, {m}, {parts[1]}")                 # exact
    w(f"add.rn.f64 {s}, {i0}, {p1}")
    w(f"cvt.rni.f64.f64 {qd}, {s}")
    w(f"sub.rn.f64 {f}, {i0}, {qd}")                       # exact (both on the 2^-26 grid)
    f1, f2, f3, r64 = (w.reg("f64") for _ in range(4))
    w(f"add.rn.f64 {f1}, {f}, {p1}")
    w(f"fma.rn.f64 {f2}, {m}, {parts[2]}, {f1}")
    w(f"fma.rn.f64 {f3}, {m}, {parts[3]}, {f2}")
    w(f"mul.rn.f64 {r64}, {f3}, {_imm64(PIO2_F64)}")
    r, neg_r, q, neg_q = w.reg("f32"), w.reg("f32"), w.reg("b32"), w.reg("b32")
    w(f"cvt.rn.f32.f64 {r}, {r64}")
    w(f"cvt.rni.s32.f64 {q}, {qd}")
    # the table reduced |x|: a negative x mirrors r and the quadrant
    negative = w.reg("pred")
    w(f"setp.lt.s32 {negative}, {bits}, 0")
    w(f"neg.f32 {neg_r}, {r}")
    w(f"neg.s32 {neg_q}, {q}")
    out_r, out_q = w.reg("f32"), w.reg("b32")
    w(f"selp.f32 {out_r}, {neg_r}, {r}, {negative}")
    w(f"selp.b32 {out_q}, {neg_q}, {q}, {negative}")
    return out_r, out_q


def reduce_pio2(w, x: str):
    """(r, q): x = q*pi/2 + r for any f32 x (inf and NaN give a NaN r)."""
    r, q = w.reg("f32"), w.reg("b32")
    cw_r, cw_q = _cody_waite(w, x)
    w(f"mov.f32 {r}, {cw_r}")
    w(f"mov.b32 {q}, {cw_q}")
    ax, huge, finite = w.reg("f32"), w.reg("pred"), w.reg("pred")
    w(f"abs.f32 {ax}, {x}")
    w(f"setp.gt.f32 {huge}, {ax}, {_imm(CODY_WAITE_LIMIT)}")
    w(f"setp.lt.f32 {finite}, {ax}, 0f7F800000")
    w(f"and.pred {huge}, {huge}, {finite}")
    skip = w.label("f32math_small")
    w(f"@!{huge} bra {skip}")        # divergent: only lanes with a huge argument take the table
    big_r, big_q = _huge_reduction(w, x)
    w(f"mov.f32 {r}, {big_r}")
    w(f"mov.b32 {q}, {big_q}")
    w.place(skip)
    return r, q


# ------------------------------------------------------------------------- kernels
SIN_COEFFS = tuple(((-1) ** k) / math.factorial(2 * k + 1) for k in range(1, 5))   # r^3 .. r^9
COS_COEFFS = tuple(((-1) ** k) / math.factorial(2 * k) for k in range(1, 6))       # r^2 .. r^10


def _sin_kernel(w, r: str, s: str) -> str:
    """sin r for |r| <= ~pi/4 (s = r*r): r + r*s*P(s)."""
    p = w.reg("f32")
    w(f"mov.f32 {p}, {_imm(SIN_COEFFS[-1])}")
    for coeff in reversed(SIN_COEFFS[:-1]):
        nxt = w.reg("f32")
        w(f"fma.rn.f32 {nxt}, {p}, {s}, {_imm(coeff)}")
        p = nxt
    rs, out = w.reg("f32"), w.reg("f32")
    w(f"mul.rn.f32 {rs}, {r}, {s}")
    w(f"fma.rn.f32 {out}, {rs}, {p}, {r}")
    return out


def _cos_kernel(w, s: str) -> str:
    """cos r for |r| <= ~pi/4 (s = r*r): 1 + s*Q(s)."""
    p = w.reg("f32")
    w(f"mov.f32 {p}, {_imm(COS_COEFFS[-1])}")
    for coeff in reversed(COS_COEFFS[:-1]):
        nxt = w.reg("f32")
        w(f"fma.rn.f32 {nxt}, {p}, {s}, {_imm(coeff)}")
        p = nxt
    out = w.reg("f32")
    w(f"fma.rn.f32 {out}, {p}, {s}, 0f3F800000")
    return out


def _kernels(w, x: str):
    r, q = reduce_pio2(w, x)
    s = w.reg("f32")
    w(f"mul.rn.f32 {s}, {r}, {r}")
    odd, second_half = w.reg("pred"), w.reg("pred")
    bit = w.reg("b32")
    w(f"and.b32 {bit}, {q}, 1")
    w(f"setp.ne.u32 {odd}, {bit}, 0")
    bit2 = w.reg("b32")
    w(f"and.b32 {bit2}, {q}, 2")
    w(f"setp.ne.u32 {second_half}, {bit2}, 0")
    return _sin_kernel(w, r, s), _cos_kernel(w, s), odd, second_half


def _keep_tiny(w, x: str, value: str) -> str:
    """x itself where |x| < 2^-12 (the rounded sin / tan there, and -0 stays -0)."""
    ax, tiny, out = w.reg("f32"), w.reg("pred"), w.reg("f32")
    w(f"abs.f32 {ax}, {x}")
    w(f"setp.lt.f32 {tiny}, {ax}, 0f39800000")
    w(f"selp.f32 {out}, {x}, {value}, {tiny}")
    return out


def sin_f32(w, x: str) -> str:
    sin_r, cos_r, odd, second_half = _kernels(w, x)
    pick, neg, out = w.reg("f32"), w.reg("f32"), w.reg("f32")
    w(f"selp.f32 {pick}, {cos_r}, {sin_r}, {odd}")
    w(f"neg.f32 {neg}, {pick}")
    w(f"selp.f32 {out}, {neg}, {pick}, {second_half}")
    return _keep_tiny(w, x, out)


def cos_f32(w, x: str) -> str:
    sin_r, cos_r, odd, second_half = _kernels(w, x)
    pick, neg, out = w.reg("f32"), w.reg("f32"), w.reg("f32")
    w(f"selp.f32 {pick}, {sin_r}, {cos_r}, {odd}")
    w(f"neg.f32 {neg}, {pick}")
    flip = w.reg("pred")
    w(f"xor.pred {flip}, {odd}, {second_half}")      # quadrants 1 (-sin) and 2 (-cos)
    w(f"selp.f32 {out}, {neg}, {pick}, {flip}")
    return out


def tan_f32(w, x: str) -> str:
    sin_r, cos_r, odd, _ = _kernels(w, x)
    even_value, odd_value, neg_cos = w.reg("f32"), w.reg("f32"), w.reg("f32")
    w(f"div.rn.f32 {even_value}, {sin_r}, {cos_r}")
    w(f"neg.f32 {neg_cos}, {cos_r}")
    w(f"div.rn.f32 {odd_value}, {neg_cos}, {sin_r}")
    out = w.reg("f32")
    w(f"selp.f32 {out}, {odd_value}, {even_value}, {odd}")
    return _keep_tiny(w, x, out)


# ------------------------------------------------------------------------- exp / log
# exp, log, log2, sinh, cosh, tanh and pow are f32 sequences of FMAs around exact range
# reductions (CUDA: expf 2 ulp, logf/log2f 1, sinhf 3, coshf 2, tanhf 2, powf 4; see
# benchmarks/results/jit-math-accuracy.md). They avoid ex2/lg2.approx: lg2.approx's absolute
# error 2^-22 is millions of ulps next to x = 1, and ex2.approx's 2 ulp leave no room for the
# reduction's rounding within expf's bound; polynomials cost a few FMAs instead of one MUFU op.
# sinh and cosh take e^|x| / 2 straight from the exponent (finite up to |x| = 89.4).
LN2 = math.log(2)


def _log_specials(w, x32: str, value: str) -> str:
    """C's log at the edges: log(+-0) = -inf, log(x < 0) = NaN, log(inf) = inf, NaN stays."""
    zero, negative, inf, nan = (w.reg("pred") for _ in range(4))
    a, b, c, out = (w.reg("f32") for _ in range(4))
    w(f"setp.eq.f32 {zero}, {x32}, 0f00000000")
    w(f"selp.f32 {a}, 0fFF800000, {value}, {zero}")
    w(f"setp.lt.f32 {negative}, {x32}, 0f00000000")
    w(f"selp.f32 {b}, 0f7FC00000, {a}, {negative}")
    w(f"setp.eq.f32 {inf}, {x32}, 0f7F800000")
    w(f"selp.f32 {c}, 0f7F800000, {b}, {inf}")
    w(f"setp.nan.f32 {nan}, {x32}, {x32}")
    w(f"selp.f32 {out}, {x32}, {c}, {nan}")
    return out


# -- exp, log, log2, tanh in f32 ---------------------------------------------------------------
# ln 2 with 16 significant bits: k * LN2_HI is exact for |k| < 2^8, and LN2_LO carries the rest.
LN2_HI = 45426.0 / 65536.0
LN2_LO = _f32(LN2 - LN2_HI)
LOG2E_HI = _f32(1 / LN2)
LOG2E_LO = _f32(1 / LN2 - LOG2E_HI)
# (log1p(t) - t) / t^2 on t in [-0.25, 0.5]: Chebyshev fit, f32 coefficients (low degree
# first); relative error 2^-26.2 with the coefficients rounded to f32
LOG1P_TAIL = (-0.5, 0.3333333134651184, -0.25000011920928955, 0.20000290870666504,
              -0.16666266322135925, 0.14271873235702515, -0.12487159669399261,
              0.11346079409122467, -0.10602347552776337, 0.08290209621191025,
              -0.03396051749587059)
# (tanh(x) - x) / x^3 as a polynomial in u = x^2 on [0, 0.3025] (|x| < 0.55): 2^-24.9 relative
TANH_TAIL = (-0.3333333432674408, 0.1333332508802414, -0.05396474525332451,
             0.0218188539147377, -0.008527866564691067, 0.002528421115130186)
TANH_SMALL = 0.55  # below: the odd polynomial; above: 1 - 2e/(1+e), e = exp(-2|x|) <= 0.333


def _horner(w, t: str, coefficients) -> str:
    """sum c_i t^i by fma, highest degree first."""
    acc = _imm(coefficients[-1])
    for c in reversed(coefficients[:-1]):
        out = w.reg("f32")
        w(f"fma.rn.f32 {out}, {acc}, {t}, {_imm(c)}")
        acc = out
    return acc


def _f32_ops(w):
    def op(text, *args, cls="f32"):
        out = w.reg(cls)
        w(f"{text} {out}, {', '.join(args)}")
        return out
    return op


def _log_reduce(w, x: str):
    """x = 2^e * (1 + t), t in [-0.25, 0.5) exact, for positive finite x (subnormals scaled
    by 2^23 first): (e as f32, t)."""
    op = _f32_ops(w)
    sub = w.reg("pred")
    w(f"setp.lt.f32 {sub}, {x}, 0f00800000")
    scaled = op("selp.f32", op("mul.rn.f32", x, "0f4B000000"), x, sub)
    bits = op("mov.b32", scaled, cls="b32")
    exponent = op("shr.s32", op("sub.s32", bits, "0x3F400000", cls="b32"), "23", cls="b32")
    mantissa = op("mov.b32", op("sub.s32", bits, op("shl.b32", exponent, "23", cls="b32"),
                                cls="b32"))
    exponent = op("sub.s32", exponent, op("selp.b32", "23", "0", sub, cls="b32"), cls="b32")
    t = op("add.rn.f32", mantissa, _imm(-1.0))  # exact (Sterbenz)
    return op("cvt.rn.f32.s32", exponent), t


def _log_sum(w, head: str, middle: str, small: str) -> str:
    """head + middle + small with one significant rounding: head + middle as an exact pair
    (|head| >= |middle| or head = 0, so the fast two-sum is exact), the small parts first."""
    op = _f32_ops(w)
    s = op("add.rn.f32", head, middle)
    err = op("add.rn.f32", op("sub.rn.f32", head, s), middle)
    return op("add.rn.f32", s, op("add.rn.f32", small, err))


def _log_tail(w, t: str, scale: float) -> str:
    """t^2 * Q(t) * scale, t^2 split exactly (t*t and its fma residue)."""
    op = _f32_ops(w)
    coefficients = LOG1P_TAIL if scale == 1.0 else tuple(
        float(np.float32(c * scale)) for c in LOG1P_TAIL)
    q = _horner(w, t, coefficients)
    t2 = op("mul.rn.f32", t, t)
    t2_low = op("fma.rn.f32", t, t, op("neg.f32", t2))
    return op("fma.rn.f32", t2, q, op("mul.rn.f32", t2_low, q))


def log_f32(w, x: str) -> str:
    """ln x = e ln2 + log1p(t) in f32 (<= 1 ulp): e*LN2_HI + t as an exact pair, the small
    terms (e*LN2_LO, t^2 Q(t)) added to its low part before the final rounding."""
    op = _f32_ops(w)
    e, t = _log_reduce(w, x)
    small = op("fma.rn.f32", e, _imm(LN2_LO), _log_tail(w, t, 1.0))
    return _log_specials(w, x, _log_sum(w, op("mul.rn.f32", e, _imm(LN2_HI)), t, small))


def log2_f32(w, x: str) -> str:
    """log2 x = e + t log2(e) + t^2 Q(t) log2(e) (<= 1 ulp): t log2(e) as an exact pair."""
    op = _f32_ops(w)
    e, t = _log_reduce(w, x)
    p = op("mul.rn.f32", t, _imm(LOG2E_HI))
    p_low = op("fma.rn.f32", t, _imm(LOG2E_LO), op("fma.rn.f32", t, _imm(LOG2E_HI),
                                                   op("neg.f32", p)))
    small = op("add.rn.f32", p_low, _log_tail(w, t, 1 / LN2))
    return _log_specials(w, x, _log_sum(w, e, p, small))


def _exp_scaled(w, x: str, low: float, high: float, shift: int) -> str:
    """e^x / 2^shift (see exp_f32), x clamped to [low, high] first; NaN passes through."""
    op = _f32_ops(w)
    clamped = op("min.f32", op("max.f32", x, _imm(low)), _imm(high))
    k = op("cvt.rni.f32.f32", op("mul.rn.f32", clamped, _imm(1 / LN2)))
    r = op("fma.rn.f32", k, _imm(-LN2_HI), clamped)
    r = op("fma.rn.f32", k, _imm(-LN2_LO), r)
    p = _horner(w, r, tuple(1.0 / math.factorial(i) for i in range(8)))
    ki = op("cvt.rzi.s32.f32", k, cls="b32")
    if shift:
        ki = op("sub.s32", ki, str(shift), cls="b32")
    half = op("shr.s32", ki, "1", cls="b32")
    rest = op("sub.s32", ki, half, cls="b32")
    scale1 = op("mov.b32", op("shl.b32", op("add.s32", half, "127", cls="b32"), "23", cls="b32"))
    scale2 = op("mov.b32", op("shl.b32", op("add.s32", rest, "127", cls="b32"), "23", cls="b32"))
    value = op("mul.rn.f32", op("mul.rn.f32", p, scale1), scale2)
    nan = w.reg("pred")
    w(f"setp.nan.f32 {nan}, {x}, {x}")
    return op("selp.f32", x, value, nan)


def exp_f32(w, x: str) -> str:
    """e^x in f32 (<= 1 ulp): k = rint(x log2 e), r = x - k ln2 (two-part Cody-Waite, the first
    step exact), e^r by its degree-7 Taylor polynomial (truncation 2^-27 on |r| <= 0.35), times
    2^k as two exact powers of two so a subnormal result is rounded once. x is clamped to
    [-104, 89] first (results 0 and inf there); NaN passes through."""
    return _exp_scaled(w, x, -104.0, 89.0, 0)


# sinh(x) - x over x^3 as a polynomial in u = x^2 (Taylor, |x| < 1: truncation below 2^-33)
SINH_TAIL = tuple(1.0 / math.factorial(2 * k + 3) for k in range(6))


def _half_exp_pair(w, x: str):
    """(h, q) = (e^|x| / 2, e^-|x| / 2) in f32; h is exact in its scaling (no overflow before
    cosh/sinh do: |x| is clamped at 90.5, where h is already inf)."""
    op = _f32_ops(w)
    h = _exp_scaled(w, op("abs.f32", x), 0.0, 90.5, 1)
    # 1/h by rcp.approx (1 ulp) and a Newton step; h is capped at 2^100 first (beyond, e^-|x|/2
    # is far below half an ulp of h, and rcp(inf) = 0 would make the Newton step NaN)
    capped = op("min.f32", h, _imm(2.0 ** 100))
    inverse = op("rcp.approx.f32", capped)
    residue = op("fma.rn.f32", op("neg.f32", capped), inverse, _imm(1.0))
    inverse = op("fma.rn.f32", inverse, residue, inverse)
    return h, op("mul.rn.f32", inverse, _imm(0.25))


def cosh_f32(w, x: str) -> str:
    """e^|x|/2 + e^-|x|/2 in f32 (<= 2 ulp): two positive terms, no cancellation."""
    op = _f32_ops(w)
    h, q = _half_exp_pair(w, x)
    return op("add.rn.f32", h, q)


def sinh_f32(w, x: str) -> str:
    """sinh in f32 (<= 3 ulp): |x| < 1: x + x^3 S(x^2); else e^|x|/2 - e^-|x|/2 (cancels at most
    a factor 1.31 at |x| = 1) with x's sign; |x| < 2^-12 returns x (keeps -0)."""
    op = _f32_ops(w)
    h, q = _half_exp_pair(w, x)
    large = op("copysign.f32", x, op("sub.rn.f32", h, q))
    u = op("mul.rn.f32", x, x)
    odd = op("fma.rn.f32", op("mul.rn.f32", u, x), _horner(w, u, SINH_TAIL), x)
    small = w.reg("pred")
    w(f"setp.lt.f32 {small}, {op('abs.f32', x)}, {_imm(1.0)}")
    return _keep_tiny(w, x, op("selp.f32", odd, large, small))


def tanh_f32(w, x: str) -> str:
    """tanh in f32 (<= 2 ulp; 1 measured): |x| < 0.55: x + x^3 T(x^2); else 1 - 2e/(1 + e) with
    e = exp(-2|x|) <= 0.333 (the correction is at most 0.5, so its error stays below an ulp of
    the result), x's sign copied; |x| < 2^-12 returns x. exp's clamp gives e = 0 for large |x|."""
    op = _f32_ops(w)
    ax = op("abs.f32", x)
    u = op("mul.rn.f32", x, x)
    odd = op("fma.rn.f32", op("mul.rn.f32", u, x), _horner(w, u, TANH_TAIL), x)
    e = exp_f32(w, op("mul.rn.f32", ax, _imm(-2.0)))
    # 2e / (1 + e): the denominator is in [1, 1.34], so rcp.approx (1 ulp) and one Newton step
    # give 1/(1 + e) to about half an ulp without div.rn's subnormal/overflow slow path
    denominator = op("add.rn.f32", e, _imm(1.0))
    inverse = op("rcp.approx.f32", denominator)
    residue = op("fma.rn.f32", op("neg.f32", denominator), inverse, _imm(1.0))
    inverse = op("fma.rn.f32", inverse, residue, inverse)
    correction = op("mul.rn.f32", op("add.rn.f32", e, e), inverse)
    large = op("copysign.f32", x, op("sub.rn.f32", _imm(1.0), correction))
    small = w.reg("pred")
    w(f"setp.lt.f32 {small}, {ax}, {_imm(TANH_SMALL)}")
    return _keep_tiny(w, x, op("selp.f32", odd, large, small))


# log2 table for pow: 128 rows of (invc, -log2(invc) high, low, 0) as f32; row j covers the
# reduced mantissas m in [0.75, 1.5) whose bits are 0x3F400000 + j*2^16 + (0 .. 2^16 - 1).
# invc ~ 1/m with 8 significant bits, so r = m*invc - 1 is exact in f32 (|r| <= 2^-7). The two
# rows around 1 ([1 - 2^-8, 1 + 2^-7)) take invc = 1: there log2 m is tiny, and head + r log2(e)
# would cancel to it, leaving the tail's f32 rounding (~2^-39) as a large relative error that
# pow(x ~ 1, huge y) multiplies by y (thousands of ulps); with r = m - 1 it stays ~2^-24 |r|.
# -log2(invc) is split as head + low with head a multiple of 2^-HEAD_BITS: e + head is then
# exact in f32 for every exponent e of a finite f32 (|e| <= 149 < 2^8, 8 + 15 bits), and low
# (|low| < 2^-16) is rounded to f32 (error < 2^-40, 2^-32 relative to log2 m off the unit rows).
UNIT_ROWS = (63, 64)
HEAD_BITS = 15
# log2(1 + r) = r log2(e) + r^2 L(r): L's Taylor terms to r^3 (r^5 of log2), truncation
# 2^-37 relative on |r| <= 2^-7
LOG2_TAIL = tuple(_f32(((-1) ** (k + 1)) / (k + 2) / LN2) for k in range(4))
# 2^f on |f| <= 0.5005 (pow's reduced range), degree 6: a minimax fit (Lawson's weighted least
# squares in relative error, each coefficient rounded to f32 before the next is fitted), relative
# error 2^-28.3 with these f32 coefficients (below the degree-7 Taylor series of e^(f ln2))
EXP2_POLY = (1.0, 0.6931471824645996, 0.24022647738456726, 0.05550359562039375,
             0.009618503041565418, 0.0013390997191891074, 0.00015327839355450124)


def _round_to_bits(value: float, bits: int) -> float:
    step = 2.0 ** (math.floor(math.log2(value)) - bits + 1)
    return round(value / step) * step


@lru_cache(maxsize=None)
def log2_table() -> bytes:
    rows = []
    for j in range(128):
        low, high = (float(np.array([0x3F400000 + (i << 16)], np.uint32).view(np.float32)[0])
                     for i in (j, j + 1))
        invc = 1.0 if j in UNIT_ROWS else _round_to_bits(2.0 / (low + high), 8)
        value = -math.log2(invc)
        head = round(value * 2 ** HEAD_BITS) / 2 ** HEAD_BITS
        rows += [invc, head, float(np.float32(value - head)), 0.0]
    return np.array(rows, "<f4").tobytes()


def _log2_pair(w, ax: str):
    """log2(ax) as an unevaluated f32 pair for positive finite ax (relative error below
    2^-30: pow multiplies it by |y log2 ax| <= ~150)."""
    op = _f32_ops(w)
    e, t = _log_reduce(w, ax)
    m = op("add.rn.f32", t, _imm(1.0))  # exact: t came from m - 1
    index = op("shr.u32", op("sub.s32", op("mov.b32", m, cls="b32"), "0x3F400000", cls="b32"),
               "16", cls="b32")
    symbol = w.const_table("f32math_log2_table", log2_table())
    base, offset, address = w.reg("b64"), w.reg("b64"), w.reg("b64")
    w(f"mov.u64 {base}, {symbol}")
    w(f"mul.wide.u32 {offset}, {index}, 16")
    w(f"add.s64 {address}, {base}, {offset}")
    invc, head, low = (w.reg("f32") for _ in range(3))
    w(f"ld.const.f32 {invc}, [{address}]")
    w(f"ld.const.f32 {head}, [{address}+4]")
    w(f"ld.const.f32 {low}, [{address}+8]")
    r = op("fma.rn.f32", m, invc, _imm(-1.0))  # exact (see log2_table)
    p = op("mul.rn.f32", r, _imm(LOG2E_HI))
    p_low = op("fma.rn.f32", r, _imm(LOG2E_LO), op("fma.rn.f32", r, _imm(LOG2E_HI),
                                                   op("neg.f32", p)))
    tail = op("mul.rn.f32", op("mul.rn.f32", r, r), _horner(w, r, LOG2_TAIL))
    s1 = op("add.rn.f32", e, head)  # exact (see HEAD_BITS)
    # s1 + p as an exact pair by the fast two-sum: |s1| >= |p| or s1 = 0 (|e + head| > 0.5
    # for e != 0; off the unit rows |head| is at least twice the largest |r log2 e| of its row)
    s2 = op("add.rn.f32", s1, p)
    e2 = op("sub.rn.f32", p, op("sub.rn.f32", s2, s1))
    small = op("add.rn.f32", op("add.rn.f32", op("add.rn.f32", tail, p_low), low), e2)
    high = op("add.rn.f32", s2, small)
    return high, op("sub.rn.f32", small, op("sub.rn.f32", high, s2))


def pow_ordinary_f32(w, x: str, y: str):
    """(x^y, ordinary) for f32 registers: x^y computed as pow_magnitude_f32 does but with none of
    its special-value selects, and the predicate under which that is pow's exact answer:
    0 < x < inf with |y log2 x| <= 200 (so y is finite, nothing is clamped and no NaN arises;
    y = 0 and x = 1 give exactly 1 here, as C wants), or x = +0 with y finite (+0 for y > 0,
    +inf for y < 0, and 1 for y = 0, where the finite log2 of 0's reduction times 0 is 0).
    Elsewhere the caller takes the full path."""
    op = _f32_ops(w)
    high, low = _log2_pair(w, x)
    t, value = _exp2_pair(w, y, high, low)
    bits = op("mov.b32", x, cls="b32")
    positive, zero, ordinary, on_zero = (w.reg("pred") for _ in range(4))
    w(f"setp.lt.u32 {positive}, {op('add.s32', bits, '-1', cls='b32')}, 0x7F7FFFFF")
    w(f"setp.le.and.f32 {ordinary}, {op('abs.f32', t)}, {_imm(200.0)}, {positive}")
    w(f"setp.eq.b32 {zero}, {bits}, 0")               # +0 only: -0 takes the full path
    w(f"setp.lt.and.f32 {on_zero}, {op('abs.f32', y)}, 0f7F800000, {zero}")
    w(f"or.pred {ordinary}, {ordinary}, {on_zero}")
    up, nonzero = w.reg("pred"), w.reg("pred")
    w(f"setp.gt.f32 {up}, {y}, 0f00000000")
    w(f"setp.ne.and.f32 {nonzero}, {y}, 0f00000000, {zero}")
    return op("selp.f32", op("selp.f32", "0f00000000", "0f7F800000", up), value, nonzero), ordinary


def _exp2_pair(w, y: str, high: str, low: str):
    """(t, 2^(y (high + low))) with t = y high rounded; 2^t = 2^f 2^n, 2^f by EXP2_POLY and 2^n
    by two exact scalings (t is clamped to [-200, 200] first)."""
    op = _f32_ops(w)
    t = op("mul.rn.f32", y, high)
    t_low = op("fma.rn.f32", y, low, op("fma.rn.f32", y, high, op("neg.f32", t)))
    clamped = op("min.f32", op("max.f32", t, _imm(-200.0)), _imm(200.0))
    n = op("cvt.rni.f32.f32", clamped)
    f = op("add.rn.f32", op("sub.rn.f32", clamped, n), t_low)
    p = _horner(w, f, EXP2_POLY)
    ni = op("cvt.rzi.s32.f32", n, cls="b32")
    half = op("shr.s32", ni, "1", cls="b32")
    rest = op("sub.s32", ni, half, cls="b32")
    scale1 = op("mov.b32", op("shl.b32", op("add.s32", half, "127", cls="b32"), "23", cls="b32"))
    scale2 = op("mov.b32", op("shl.b32", op("add.s32", rest, "127", cls="b32"), "23", cls="b32"))
    return t, op("mul.rn.f32", op("mul.rn.f32", p, scale1), scale2)


def pow_magnitude_f32(w, ax: str, y: str) -> str:
    """|x|^y = 2^(y log2|x|) for f32 registers in f32 (<= 2 ulp; the sign and C's special
    cases are the caller's): log2|x| as an f32 pair from a 128-entry table, y times it as an
    exact pair, t = n + f with n = rint(t), 2^f by a degree-6 polynomial, times
    2^n as two powers of two (one rounding for subnormal results). |x| = 0 / inf / NaN give
    log2 = -inf / inf / NaN; |t| > 200 is 0 or inf."""
    op = _f32_ops(w)
    high, low = _log2_pair(w, ax)
    zero, inf, nan = w.reg("pred"), w.reg("pred"), w.reg("pred")
    w(f"setp.eq.f32 {zero}, {ax}, 0f00000000")
    w(f"setp.eq.f32 {inf}, {ax}, 0f7F800000")
    w(f"setp.nan.f32 {nan}, {ax}, {ax}")
    high = op("selp.f32", "0fFF800000", high, zero)
    high = op("selp.f32", "0f7F800000", high, inf)
    high = op("selp.f32", ax, high, nan)
    t, value = _exp2_pair(w, y, high, low)
    over, under, undefined = w.reg("pred"), w.reg("pred"), w.reg("pred")
    w(f"setp.gt.f32 {over}, {t}, {_imm(200.0)}")
    w(f"setp.lt.f32 {under}, {t}, {_imm(-200.0)}")
    w(f"setp.nan.f32 {undefined}, {t}, {t}")
    value = op("selp.f32", "0f7F800000", value, over)
    value = op("selp.f32", "0f00000000", value, under)
    return op("selp.f32", t, value, undefined)
