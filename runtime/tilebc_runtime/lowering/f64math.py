"""Double-precision transcendentals as PTX on f64 registers (fma.rn.f64 polynomials), so f64
kernels get f64 answers instead of an f32 detour.

Each builder takes the PtxWriter and f64 register names and returns the f64 result register.
Accuracy: within CUDA's documented double bounds (1 ulp; tan, pow, atan2 2) as real error
against a long-double reference (maxima per op in benchmarks/results/jit-math-accuracy.md: 0.57-0.89
ulp, pow 1.25),
special values (±0, ±inf, NaN, subnormals, overflow/underflow edges) as C99/numpy give them.
Methods (errors measured on the PTX emulator):
  exp, exp2: Cody-Waite reduction by a two-part ln2 to |r| <= ln2/2, degree-13 Taylor polynomial,
    scale by 2^k in two steps (2^(k/2) twice) so results near overflow and in the subnormal range
    round once.
  log, log2: x = m·2^e with m in [sqrt(1/2), sqrt(2)), f = m-1, s = f/(2+f) and the atanh series
    log(1+f) = f - (f²/2 - s·(f²/2 + R(s²)))  (subnormals pre-scaled by 2^54); log2 keeps
    f - f²/2 as a double-double and multiplies by 1/ln2 in double-double.
  sin, cos, tan: r + r_lo = x - q·π/2 (a double-double), q = round(x·2/π): for |x| < 2^40
    (REDUCTION_LIMIT) by Cody-Waite with a three-part π/2 (x - q·P1 exact); above, Payne-Hanek:
    x·2/π mod 4 from eight 24-bit chunks of a 2/π table (.const), each product exact as a
    double-double, summed in double-double. Taylor polynomials on |r| <= π/4 give sin and cos
    as double-doubles, quadrant from q mod 4; tan divides them as double-doubles. The hardest
    double for the reduction (5.319372648326541e255, reduced argument ~2^-61) stays at 0.36 ulp
    (tan) against long double.
  sinh, cosh: below |x| = 22, e^|x| and e^-|x| as double-doubles, halved sum or difference
    (sinh below 1 by its Taylor series); above, e^|x|/2 with the exponent lowered by one so they
    do not overflow early. tanh: its Taylor series below |x| = 0.8 (coefficients from Bernoulli
    numbers), 1 - 2/(e^2|x| + 1) above with e^2|x| and the quotient as double-doubles.
  pow: log|x| in double-double (s = f/(2+f) with its remainder), y·log in double-double, exp of
    the pair; C99 special cases (pow(x, ±0) = 1, pow(1, y) = 1, pow(-1, ±inf) = 1, odd-integer
    signs, NaN for negative x with non-integer y).
  atan2: atan(t) by Taylor series on |t| <= tan(π/8) after reducing the ratio min/max through
    atan(a) = π/4 + atan((a-1)/(a+1)), t as a double-double, then octant constants j·π/4 in
    double-double.
"""
from __future__ import annotations

import struct
from decimal import Decimal, localcontext
from fractions import Fraction
from functools import lru_cache
from math import factorial

from tilebc.ops.table import by_mnemonic

from . import dtypes, intdiv


# -- constants, derived from 60-digit decimals so each split is exact -----------------------
def _split(value: Decimal, parts: int):
    """value as `parts` doubles whose sum carries parts·53 bits."""
    rest, out = Fraction(value), []
    for _ in range(parts):
        out.append(float(rest))
        rest -= Fraction(out[-1])
    return out


with localcontext() as _ctx:  # 60 digits without touching the caller's decimal context
    _ctx.prec = 60
    _PI = Decimal("3.14159265358979323846264338327950288419716939937510582097494459")
    _LN2 = Decimal(2).ln()
    LN2_HI, LN2_LO = _split(_LN2, 2)                  # for fma reductions (x - k·LN2_HI is exact)
    LN2_HI_SHORT = 6.93147180369123816490e-01         # 0x3FE62E42FEE00000: e·LN2_HI_SHORT is exact
    LN2_LO_SHORT = float(Fraction(_LN2) - Fraction(LN2_HI_SHORT))
    INV_LN2 = float(1 / _LN2)
    INV_LN2_HI, INV_LN2_LO = _split(1 / _LN2, 2)
    PIO2 = _split(_PI / 2, 3)
    TWO_OVER_PI = float(2 / _PI)
    PIO4_MULTIPLES = [_split(_PI * j / 4, 2) for j in range(5)]   # 0, π/4, π/2, 3π/4, π
    TAN_PI_8 = float(Decimal(2).sqrt() - 1)
    SQRT2 = float(Decimal(2).sqrt())
    TWO_THIRDS = _split(Decimal(2) / 3, 2)

REDUCTION_LIMIT = 2.0 ** 40   # Cody-Waite below, Payne-Hanek (table of 2/π) from here on


def _pi_fixed(bits: int) -> int:
    """floor(π·2^bits) by Machin's formula in integers (plus guard bits)."""
    guard = bits + 32
    one = 1 << guard

    def arctan_inv(n):
        total, term, k, sign = 0, one // n, 1, 1
        while term:
            total += sign * (term // k)
            term //= n * n
            k += 2
            sign = -sign
        return total
    return (16 * arctan_inv(5) - 4 * arctan_inv(239)) >> 32


# 2/π in 24-bit chunks: CHUNK[j] = bits [24j, 24j + 24) after the binary point, enough for the
# largest double (x·2/π mod 4 needs the chunks from about exponent - 24 on: eight reach
# 2^-140, below what the closest double to a multiple of π/2 (fraction ~2^-61) needs)
CHUNK_BITS, CHUNK_COUNT, CHUNK_TERMS = 24, 50, 8
_PI_BITS = CHUNK_BITS * CHUNK_COUNT + 64
_TWO_OVER_PI_FIXED = (2 << (CHUNK_BITS * CHUNK_COUNT + _PI_BITS)) // _pi_fixed(_PI_BITS)
TWO_OVER_PI_CHUNKS = [(_TWO_OVER_PI_FIXED >> (CHUNK_BITS * (CHUNK_COUNT - 1 - j))) & 0xFFFFFF
                      for j in range(CHUNK_COUNT)]

EXP_TAYLOR = [1 / factorial(n) for n in range(13, -1, -1)]          # e^r, highest first


def _bernoulli(count: int):
    """B_0 .. B_{count-1} as fractions (the Akiyama-Tanigawa recurrence)."""
    numbers, row = [], []
    for m in range(count):
        row.append(Fraction(1, m + 1))
        for j in range(m, 0, -1):
            row[j - 1] = j * (row[j - 1] - row[j])
        numbers.append(row[0])
    return numbers


# tanh x = x + x·z·P(z), z = x², from tanh's Taylor series 2^2n (2^2n - 1) B_2n x^(2n-1) / (2n)!:
# below TANH_SERIES_LIMIT each term is at most 0.26 of the one before, so 32 reach 2^-62
TANH_SERIES_LIMIT = 0.8


@lru_cache(maxsize=None)  # on first use: the exact Bernoulli numbers take ~10 ms to build
def tanh_series():
    numbers = _bernoulli(68)
    return [float(Fraction(4 ** n * (4 ** n - 1)) * numbers[2 * n] / factorial(2 * n))
            for n in range(33, 1, -1)]


SINH_SERIES_LIMIT = 1.0   # sinh x = x + x·z·P(z) below: the tail stays under 18 % of x
SINH_TAYLOR = [1 / factorial(2 * n + 1) for n in range(10, 0, -1)]  # (sinh x - x) / x³
SIN_TAYLOR = [(-1) ** n / factorial(2 * n + 1) for n in range(9, 0, -1)]   # (sin r - r) / r³
COS_TAYLOR = [(-1) ** n / factorial(2 * n) for n in range(9, 0, -1)]       # (cos r - 1) / r²
LOG_SERIES = [2 / (2 * k + 1) for k in range(10, 0, -1)]            # 2·atanh(s) = 2s + s·z·P(z)
# pow's double-double log needs ~2^-66 relative (y·log x reaches 745): three more terms, as
# the truncated s^23 term is 2^-60.5 of the log at s = 3 - 2·sqrt(2) (4 ulp in pow)
LOG_SERIES_DD = [2 / (2 * k + 1) for k in range(13, 1, -1)]         # 2s⁵/5 + 2s⁷/7 + ...
ATAN_SERIES = [(-1) ** n / (2 * n + 1) for n in range(21, 0, -1)]   # (atan t - t) / t³


def imm(value: float) -> str:
    return dtypes.float_immediate(float(value), "f64")


class _Emit:
    """Terse helpers over the PtxWriter: every result goes to a fresh register."""

    def __init__(self, w):
        self.w = w

    def f(self):
        return self.w.reg("f64")

    def op(self, text: str, cls: str = "f64"):
        out = self.w.reg(cls)
        self.w(text.format(out=out))
        return out

    def fma(self, a, b, c):
        return self.op(f"fma.rn.f64 {{out}}, {a}, {b}, {c}")

    def mul(self, a, b):
        return self.op(f"mul.rn.f64 {{out}}, {a}, {b}")

    def add(self, a, b):
        return self.op(f"add.rn.f64 {{out}}, {a}, {b}")

    def sub(self, a, b):
        return self.op(f"sub.rn.f64 {{out}}, {a}, {b}")

    def div(self, a, b):
        return self.op(f"div.rn.f64 {{out}}, {a}, {b}")

    def neg(self, a):
        return self.op(f"neg.f64 {{out}}, {a}")

    def abs(self, a):
        return self.op(f"abs.f64 {{out}}, {a}")

    def sel(self, a, b, pred):
        return self.op(f"selp.f64 {{out}}, {a}, {b}, {pred}")

    def setp(self, cmp, a, b, cls="f64"):
        return self.op(f"setp.{cmp}.{cls} {{out}}, {a}, {b}", "pred")

    def pred(self, op, a, b):
        return self.op(f"{op}.pred {{out}}, {a}, {b}", "pred")

    def clamp(self, x, lo, hi):
        low = self.op(f"max.f64 {{out}}, {x}, {imm(lo)}")
        return self.op(f"min.f64 {{out}}, {low}, {imm(hi)}")

    def horner(self, x, coeffs):
        p = self.op(f"mov.f64 {{out}}, {imm(coeffs[0])}")
        for c in coeffs[1:]:
            p = self.fma(p, x, imm(c))
        return p

    def round_int(self, x):
        """round-to-nearest integer value, with -0 turned into +0 (keeps fma(-q, c, ±0) = ±0)."""
        q = self.op(f"cvt.rni.f64.f64 {{out}}, {x}")
        return self.add(q, imm(0.0))

    def to_s32(self, x):
        return self.op(f"cvt.rni.s32.f64 {{out}}, {x}", "b32")

    def pow2(self, k):
        """2^k for an s32 register k in [-1022, 1023], built from the exponent bits."""
        wide = self.op(f"cvt.s64.s32 {{out}}, {k}", "b64")
        biased = self.op(f"add.s64 {{out}}, {wide}, 1023", "b64")
        bits = self.op(f"shl.b64 {{out}}, {biased}, 52", "b64")
        return self.op(f"mov.b64 {{out}}, {bits}")

    def scale(self, v, k, offset: int = 0):
        """v·2^(k+offset) with one rounding for k in [-2044, 2046]: two exact-range factors."""
        if offset:
            k = self.op(f"add.s32 {{out}}, {k}, {offset}", "b32")
        half = self.op(f"shr.s32 {{out}}, {k}, 1", "b32")
        rest = self.op(f"sub.s32 {{out}}, {k}, {half}", "b32")
        return self.mul(self.mul(v, self.pow2(half)), self.pow2(rest))

    def nan_through(self, out, *inputs):
        """NaN inputs give NaN (clamps with min/max would otherwise swallow them)."""
        any_nan = self.setp("nan", inputs[0], inputs[-1])
        passed = self.add(inputs[0], inputs[-1])
        return self.sel(passed, out, any_nan)


# -- exp family ----------------------------------------------------------------------------
def _exp_reduce(e: _Emit, x, lo=-746.0, hi=711.0):
    """x = k·ln2 + r with |r| <= ln2/2 (plus rounding), x clamped to [lo, hi]."""
    xc = e.clamp(x, lo, hi)
    q = e.round_int(e.mul(xc, imm(INV_LN2)))
    nq = e.neg(q)
    r = e.fma(nq, imm(LN2_LO), e.fma(nq, imm(LN2_HI), xc))
    return r, e.to_s32(q)


def _exp_with(e: _Emit, x, extra=None, offset: int = 0):
    r, k = _exp_reduce(e, x)
    if extra is not None:
        r = e.add(r, extra)
    return e.scale(e.horner(r, EXP_TAYLOR), k, offset)


def exp_f64(w, x):
    e = _Emit(w)
    return e.nan_through(_exp_with(e, x), x)


def exp2_f64(w, x):
    e = _Emit(w)
    xc = e.clamp(x, -1080.0, 1030.0)
    q = e.round_int(xc)
    r = e.sub(xc, q)                       # exact: |r| <= 1/2
    rh = e.mul(r, imm(LN2_HI))             # r·ln2 as rh + rl
    rl = e.fma(r, imm(LN2_LO), e.fma(r, imm(LN2_HI), e.neg(rh)))
    p = e.horner(rh, EXP_TAYLOR)
    p = e.fma(p, rl, p)
    return e.nan_through(e.scale(p, e.to_s32(q)), x)


def _exp_dd(e: _Emit, ax):
    """e^ax = (m + m_lo)·2^k for 0 <= ax <= 40, m + m_lo within ~0.2 ulp: ax = k·ln2 + r with r
    exact (ax - k·LN2_HI fits 53 bits once k >= 1) plus k·LN2_LO, e^r as (1 + r) + r²·Q(r)
    with both sums' rounding errors kept. Returns (m, m_lo, k as s32)."""
    q = e.round_int(e.mul(ax, imm(INV_LN2)))
    nq = e.neg(q)
    r = e.fma(nq, imm(LN2_HI), ax)
    r_lo = e.mul(nq, imm(LN2_LO))
    z = e.mul(r, r)
    z_lo = e.fma(r, r, e.neg(z))
    tail = e.horner(r, EXP_TAYLOR[:-2])               # (e^r - 1 - r) / r²
    v = e.mul(z, tail)
    a = e.add(imm(1.0), r)
    a_err = e.add(e.sub(imm(1.0), a), r)
    b = e.add(a, v)
    b_err = e.add(e.sub(a, b), v)
    lo = e.fma(r_lo, b, e.fma(z_lo, tail, e.add(a_err, b_err)))
    m = e.add(b, lo)
    return m, e.sub(lo, e.sub(m, b)), e.to_s32(q)


def _exp_pair(e: _Emit, ax):
    """(e^ax, e^-ax) as double-doubles for 0 <= ax <= 22, e^-ax = 2^-k / m by one division and
    its remainder."""
    m, m_lo, k = _exp_dd(e, ax)
    up = e.pow2(k)
    down = e.pow2(e.op(f"neg.s32 {{out}}, {k}", "b32"))
    inv = e.div(down, m)
    remainder = e.fma(e.neg(inv), m, down)            # exact
    inv_lo = e.mul(e.fma(e.neg(inv), m_lo, remainder), e.mul(inv, up))
    return (e.mul(m, up), e.mul(m_lo, up)), (inv, inv_lo)


def _half_sum(e: _Emit, big, small, sign: float):
    """(big + sign·small) / 2 for double-doubles with |big| >= |small|, one final rounding."""
    b, b_lo = big
    s, s_lo = small
    if sign < 0:
        s, s_lo = e.neg(s), e.neg(s_lo)
    hi = e.add(b, s)
    err = e.add(e.sub(b, hi), s)
    return e.mul(imm(0.5), e.add(hi, e.add(err, e.add(b_lo, s_lo))))


def sinh_f64(w, x):
    e = _Emit(w)
    ax = e.abs(x)
    # e^|x|/2 - e^-|x|/2 from double-double exponentials below 22, the series below 1
    grown, shrunk = _exp_pair(e, e.op(f"min.f64 {{out}}, {ax}, {imm(22.0)}"))
    near = _half_sum(e, grown, shrunk, -1.0)
    z = e.mul(ax, ax)
    series = e.fma(e.mul(ax, z), e.horner(z, SINH_TAYLOR), ax)
    near = e.sel(series, near, e.setp("lt", ax, imm(SINH_SERIES_LIMIT)))
    far = _exp_with(e, ax, offset=-1)                 # e^|x| / 2 without early overflow
    big = e.setp("ge", ax, imm(22.0))
    out = e.op(f"copysign.f64 {{out}}, {x}, {e.sel(far, near, big)}")
    return e.nan_through(out, x)


def cosh_f64(w, x):
    e = _Emit(w)
    ax = e.abs(x)
    grown, shrunk = _exp_pair(e, e.op(f"min.f64 {{out}}, {ax}, {imm(22.0)}"))
    near = _half_sum(e, grown, shrunk, 1.0)
    far = _exp_with(e, ax, offset=-1)
    big = e.setp("ge", ax, imm(22.0))
    return e.nan_through(e.sel(far, near, big), x)


def tanh_f64(w, x):
    e = _Emit(w)
    ax = e.abs(x)
    # |x| < 0.8: the series; above, 1 - 2/(e^2|x| + 1) with e^2|x|, the denominator and the
    # quotient as double-doubles (a rounded e^2|x| costs up to 1.03 ulp); 2|x| >= 40 gives 1
    z = e.mul(ax, ax)
    series = e.fma(e.mul(ax, z), e.horner(z, tanh_series()), ax)
    m, m_lo, k = _exp_dd(e, e.op(f"min.f64 {{out}}, {e.mul(ax, imm(2.0))}, {imm(40.0)}"))
    up = e.pow2(k)
    grown, grown_lo = e.mul(m, up), e.mul(m_lo, up)
    den = e.add(grown, imm(1.0))                      # e^2|x| >= 4.9 > 1 here
    den_lo = e.add(e.add(e.sub(grown, den), imm(1.0)), grown_lo)
    q = e.div(imm(2.0), den)
    q_lo = e.mul(e.fma(e.neg(q), den_lo, e.fma(e.neg(q), den, imm(2.0))), e.mul(q, imm(0.5)))
    one_minus = e.sub(imm(1.0), q)
    err = e.sub(e.sub(imm(1.0), one_minus), q)        # exact: 1 >= q
    above = e.add(one_minus, e.sub(err, q_lo))
    small = e.setp("lt", ax, imm(TANH_SERIES_LIMIT))
    out = e.op(f"copysign.f64 {{out}}, {x}, {e.sel(series, above, small)}")
    return e.nan_through(out, x)


# -- log family ----------------------------------------------------------------------------
def _log_split(e: _Emit, x):
    """For x > 0: (exponent as f64, f = m - 1) with x = (1+f)·2^e, 1+f in [sqrt(1/2), sqrt(2))."""
    tiny = e.setp("lt", x, imm(2.0 ** -1022))
    xs = e.sel(e.mul(x, imm(2.0 ** 54)), x, tiny)
    bits = e.op(f"mov.b64 {{out}}, {xs}", "b64")
    biased = e.op(f"shr.u64 {{out}}, {bits}, 52", "b64")
    mant = e.op(f"and.b64 {{out}}, {bits}, 4503599627370495", "b64")     # 2^52 - 1
    one_mant = e.op(f"or.b64 {{out}}, {mant}, 4607182418800017408", "b64")  # exponent of 1.0
    m = e.op(f"mov.b64 {{out}}, {one_mant}")
    exponent = e.op(f"cvt.rn.f64.s64 {{out}}, {biased}")
    exponent = e.sub(exponent, e.sel(imm(1023.0 + 54), imm(1023.0), tiny))
    high = e.setp("gt", m, imm(SQRT2))
    m = e.sel(e.mul(m, imm(0.5)), m, high)
    exponent = e.add(exponent, e.sel(imm(1.0), imm(0.0), high))
    return exponent, e.sub(m, imm(1.0))


def _log_series(e: _Emit, f):
    """s = f/(2+f) and R = 2·atanh(s) - 2s - ... arranged as z·P(z), z = s²."""
    s = e.div(f, e.add(imm(2.0), f))
    z = e.mul(s, s)
    return s, e.mul(z, e.horner(z, LOG_SERIES))


def _log1p_parts(e: _Emit, f):
    """log(1+f) for |f| < 0.42 as f - (hfsq - s·(hfsq + R)), fdlibm's arrangement."""
    s, r = _log_series(e, f)
    hfsq = e.mul(e.mul(imm(0.5), f), f)
    return s, r, hfsq


def _log_specials(e: _Emit, x, out):
    out = e.sel(imm(float("inf")), out, e.setp("eq", x, imm(float("inf"))))
    out = e.sel(imm(float("-inf")), out, e.setp("eq", x, imm(0.0)))
    return e.sel(imm(float("nan")), out, e.setp("ltu", x, imm(0.0)))


def log_f64(w, x):
    e = _Emit(w)
    k, f = _log_split(e, x)
    s, r, hfsq = _log1p_parts(e, f)
    inner = e.fma(k, imm(LN2_LO_SHORT), e.mul(s, e.add(hfsq, r)))
    out = e.fma(k, imm(LN2_HI_SHORT), e.sub(f, e.sub(hfsq, inner)))
    return _log_specials(e, x, out)


def log2_f64(w, x):
    """k + log(1+f)/ln2 with log(1+f) as hi + lo (f - f²/2 and its rounding error kept) and the
    product by 1/ln2 as a double-double: one rounding at the end (rounding log(1+f) first and
    scaling it after reached 2 ulp)."""
    e = _Emit(w)
    k, f = _log_split(e, x)
    s, r = _log_series(e, f)
    half_f = e.mul(f, imm(0.5))
    hfsq = e.mul(half_f, f)
    hfsq_lo = e.fma(half_f, f, e.neg(hfsq))           # f²/2 = hfsq + hfsq_lo exactly
    hi = e.sub(f, hfsq)
    err = e.sub(e.sub(f, hi), hfsq)                   # exact: |f| > f²/2
    lo = e.fma(s, e.add(hfsq, r), e.sub(err, hfsq_lo))
    p = e.mul(hi, imm(INV_LN2_HI))
    p_lo = e.fma(hi, imm(INV_LN2_HI), e.neg(p))
    tail = e.fma(lo, imm(INV_LN2_HI), e.fma(hi, imm(INV_LN2_LO), p_lo))
    top = e.add(k, p)                                 # |p| <= 1/2 <= |k| unless k = 0
    tail = e.add(e.add(e.sub(k, top), p), tail)
    return _log_specials(e, x, e.add(top, tail))


def _dd_div(e: _Emit, num, num_lo, den, den_lo):
    """(num + num_lo) / (den + den_lo) as a double-double: the rounded quotient and its
    correction from the exact remainder of the division."""
    q = e.div(num, den)
    remainder = e.fma(e.neg(q), den, num)            # exact
    return q, e.div(e.fma(e.neg(q), den_lo, e.add(remainder, num_lo)), den)


def _two_sum(e: _Emit, a, b):
    """a + b = hi + err exactly (Knuth's TwoSum)."""
    hi = e.add(a, b)
    bb = e.sub(hi, a)
    return hi, e.add(e.sub(a, e.sub(hi, bb)), e.sub(b, bb))


def _log_dd(e: _Emit, ax):
    """log(ax) for ax > 0 as a double-double (hi, lo), ~2^-64 relative."""
    k, f = _log_split(e, ax)
    d = e.add(imm(2.0), f)
    dl = e.add(e.sub(imm(2.0), d), f)                 # 2 + f = d + dl exactly
    s = e.div(f, d)
    ns = e.neg(s)
    residual = e.fma(ns, dl, e.fma(ns, d, f))         # f - s·(d + dl)
    sl = e.div(residual, d)
    # 2s³/3 in double-double (it is up to 1% of the result), the rest of the series in double
    z = e.mul(s, s)
    zl = e.fma(s, s, e.neg(z))
    cube = e.mul(z, s)
    cube_l = e.fma(zl, s, e.fma(z, s, e.neg(cube)))
    third = e.mul(cube, imm(TWO_THIRDS[0]))
    third_l = e.fma(cube, imm(TWO_THIRDS[0]), e.neg(third))
    third_l = e.fma(cube, imm(TWO_THIRDS[1]), e.fma(cube_l, imm(TWO_THIRDS[0]), third_l))
    rest = e.mul(e.mul(cube, z), e.horner(z, LOG_SERIES_DD))
    a = e.mul(k, imm(LN2_HI_SHORT))                   # exact
    s2 = e.mul(s, imm(2.0))
    hi, err = _two_sum(e, a, s2)
    hi, err2 = _two_sum(e, hi, third)
    small = e.fma(k, imm(LN2_LO_SHORT), e.add(rest, third_l))
    small = e.fma(e.mul(z, sl), imm(2.0), small)      # d(2s³/3) from the low part of s
    lo = e.add(e.add(err, err2), e.fma(sl, imm(2.0), small))
    top = e.add(hi, lo)
    bottom = e.sub(lo, e.sub(top, hi))
    return top, bottom


def pow_f64(w, x, y):
    e = _Emit(w)
    ax = e.abs(x)
    lh, ll = _log_dd(e, ax)
    zero = e.setp("eq", ax, imm(0.0))
    inf = e.setp("eq", ax, imm(float("inf")))
    lh = e.sel(imm(float("-inf")), e.sel(imm(float("inf")), lh, inf), zero)
    ll = e.sel(imm(0.0), ll, e.pred("or", zero, inf))
    ph = e.mul(y, lh)
    pl = e.fma(y, ll, e.fma(y, lh, e.neg(ph)))
    pl = e.sel(pl, imm(0.0), e.setp("lt", e.abs(ph), imm(2048.0)))
    out = _exp_with(e, ph, extra=pl)
    # signs and C99 special cases
    yi = e.op(f"cvt.rzi.f64.f64 {{out}}, {y}")
    integral = e.setp("eq", yi, y)
    half = e.mul(y, imm(0.5))
    odd = e.pred("and", integral, e.setp("ne", e.op(f"cvt.rzi.f64.f64 {{out}}, {half}"), half))
    xbits = e.op(f"mov.b64 {{out}}, {x}", "b64")
    negative = e.setp("lt", xbits, "0", "s64")
    out = e.sel(e.neg(out), out, e.pred("and", negative, odd))
    below = e.pred("and", e.setp("lt", x, imm(0.0)), e.setp("gt", x, imm(float("-inf"))))
    fractional = e.op(f"not.pred {{out}}, {integral}", "pred")
    out = e.sel(imm(float("nan")), out, e.pred("and", below, fractional))
    out = e.nan_through(out, x, y)
    unit_inf = e.pred("and", e.setp("eq", ax, imm(1.0)),
                      e.setp("eq", e.abs(y), imm(float("inf"))))
    out = e.sel(imm(1.0), out, unit_inf)
    out = e.sel(imm(1.0), out, e.setp("eq", x, imm(1.0)))
    return e.sel(imm(1.0), out, e.setp("eq", y, imm(0.0)))


# -- trigonometry --------------------------------------------------------------------------
def _reduce_pio2(e: _Emit, x):
    """x = q·π/2 + (r + r_lo), |r| <= π/4 (+ rounding), r + r_lo a double-double; returns
    (r, r_lo, q mod 4 as s32). x - q·P1 is exact (both are multiples of ulp(x) or 2^-53
    and the difference is below 1), so only the q·(P2 + P3) tail is rounded."""
    q = e.round_int(e.mul(x, imm(TWO_OVER_PI)))
    nq = e.neg(q)
    t = e.fma(nq, imm(PIO2[0]), x)
    w = e.mul(q, imm(PIO2[1]))
    w_lo = e.fma(q, imm(PIO2[1]), e.neg(w))          # q·P2 = w + w_lo exactly
    r, err = _two_sum(e, t, e.neg(w))
    lo = e.fma(nq, imm(PIO2[2]), e.sub(err, w_lo))
    r_hi = e.add(r, lo)
    r_lo = e.sub(lo, e.sub(r_hi, r))
    r_hi = e.sel(x, r_hi, e.setp("eq", q, imm(0.0)))  # keeps -0 (the additions give +0)
    # q mod 4 from the low bits of a 64-bit integer (q < 2^40 here)
    quadrant = e.op(f"cvt.rni.s64.f64 {{out}}, {q}", "b64")
    low = e.op(f"cvt.u32.u64 {{out}}, {quadrant}", "b32")
    return r_hi, r_lo, e.op(f"and.b32 {{out}}, {low}, 3", "b32")


def _mod4(e: _Emit, v):
    """v - 4·floor(v/4): exact for any double."""
    fours = e.op(f"cvt.rmi.f64.f64 {{out}}, {e.mul(v, imm(0.25))}")
    return e.fma(fours, imm(-4.0), v)


def _reduce_payne_hanek(e: _Emit, x):
    """(r, q mod 4) for |x| >= 2^40: |x| = M·2^E with an integer M < 2^53, and x·2/π mod 4 from
    the eight 24-bit chunks of 2/π that can reach below 4 (each M·chunk product is exact as a
    double-double), summed as a double-double; r = fraction·π/2."""
    w = e.w
    ax = e.abs(x)
    bits = e.op(f"mov.b64 {{out}}, {ax}", "b64")
    biased = e.op(f"shr.u64 {{out}}, {bits}, 52", "b64")
    exponent = e.op(f"cvt.u32.u64 {{out}}, {biased}", "b32")
    exponent = e.op(f"sub.s32 {{out}}, {exponent}, 1075", "b32")         # E: ax = M·2^E
    mant = e.scale(ax, e.op(f"neg.s32 {{out}}, {exponent}", "b32"))      # M, exact
    # first chunk whose terms are not all multiples of 4: j0 = floor((E - 2) / 24)
    shifted = e.op(f"add.s32 {{out}}, {exponent}, 22", "b32")
    shifted = e.op(f"max.s32 {{out}}, {shifted}, 0", "b32")
    first = intdiv.udiv(w, shifted, 24, bound=2047 + 22)  # shifted is in [0, 2069]
    first = e.op(f"sub.s32 {{out}}, {first}, 1", "b32")
    first = e.op(f"max.s32 {{out}}, {first}, 0", "b32")
    first = e.op(f"min.s32 {{out}}, {first}, {CHUNK_COUNT - CHUNK_TERMS}", "b32")
    table = w.const_table("two_over_pi_chunks",
                          b"".join(struct.pack("<d", float(c)) for c in TWO_OVER_PI_CHUNKS))
    base = e.op(f"mov.u64 {{out}}, {table}", "b64")
    offset = e.op(f"mul.wide.u32 {{out}}, {first}, 8", "b64")
    address = e.op(f"add.s64 {{out}}, {base}, {offset}", "b64")
    # term i has weight 2^(E - 24·(j0 + i + 1))
    weight = e.op(f"mul.lo.s32 {{out}}, {first}, -24", "b32")
    weight = e.op(f"add.s32 {{out}}, {weight}, {exponent}", "b32")
    highs, lows = [], []
    for index in range(CHUNK_TERMS):
        chunk = e.op(f"ld.const.f64 {{out}}, [{address}+{8 * index}]")
        step = e.op(f"add.s32 {{out}}, {weight}, {-CHUNK_BITS * (index + 1)}", "b32")
        scale = e.pow2(step)
        high = e.mul(mant, chunk)
        low = e.fma(mant, chunk, e.neg(high))
        high, low = e.mul(high, scale), e.mul(low, scale)
        # the first term reaches 2^78 (its low part too can exceed 4), the third stays < 2^30
        highs.append(_mod4(e, high) if index < 3 else high)
        lows.append(_mod4(e, low) if index == 0 else low)
    order = [highs[0], highs[1], highs[2], lows[0]]
    for index in range(3, CHUNK_TERMS):
        order += [lows[index - 2], highs[index]]
    order += lows[-2:]
    top, bottom = order[0], imm(0.0)
    for piece in order[1:]:
        top, err = _two_sum(e, top, piece)
        bottom = e.add(bottom, err)
    q = e.round_int(top)
    frac = e.sub(top, q)                               # exact, |frac| <= 1/2
    f_hi = e.add(frac, bottom)
    f_lo = e.sub(bottom, e.sub(f_hi, frac))
    r_hi = e.mul(f_hi, imm(PIO2[0]))
    r_lo = e.fma(f_hi, imm(PIO2[0]), e.neg(r_hi))
    r_lo = e.fma(f_lo, imm(PIO2[0]), e.fma(f_hi, imm(PIO2[1]), r_lo))
    r = e.add(r_hi, r_lo)
    r_lo = e.sub(r_lo, e.sub(r, r_hi))               # exact: |r_hi| >= |r_lo|
    quadrant = e.op(f"cvt.rni.s32.f64 {{out}}, {q}", "b32")
    # odd symmetry: x < 0 reduces to -(r) with quadrant -q
    negative = e.setp("lt", x, imm(0.0))
    r = e.sel(e.neg(r), r, negative)
    r_lo = e.sel(e.neg(r_lo), r_lo, negative)
    flipped = e.op(f"neg.s32 {{out}}, {quadrant}", "b32")
    quadrant = e.op(f"selp.b32 {{out}}, {flipped}, {quadrant}, {negative}", "b32")
    return r, r_lo, e.op(f"and.b32 {{out}}, {quadrant}, 3", "b32")


def _reduce(e: _Emit, x):
    """Cody-Waite below REDUCTION_LIMIT, Payne-Hanek above: (r, r_lo, quadrant)."""
    r, r_lo, n = _reduce_pio2(e, x)
    r_big, r_lo_big, n_big = _reduce_payne_hanek(e, x)
    big = e.setp("ge", e.abs(x), imm(REDUCTION_LIMIT))
    return (e.sel(r_big, r, big), e.sel(r_lo_big, r_lo, big),
            e.op(f"selp.b32 {{out}}, {n_big}, {n}, {big}", "b32"))


def _sin_cos_dd(e: _Emit, r, r_lo):
    """sin and cos of r + r_lo (|r| <= π/4) as double-doubles ((s, s_lo), (c, c_lo)), each
    within ~0.1 ulp before its final rounding: r_lo enters to first order, cos keeps 1 - r²/2
    exact (fdlibm's arrangement) with the rounding error of r² carried."""
    z = e.mul(r, r)
    z_lo = e.fma(r, r, e.neg(z))
    # sin(r + r_lo) = r + r³·S(z) + r_lo·(1 - z/2)
    half_z = e.mul(z, imm(0.5))
    tail = e.fma(e.mul(r, z), e.horner(z, SIN_TAYLOR), e.fma(r_lo, e.neg(half_z), r_lo))
    s = e.add(r, tail)
    s_lo = e.sub(tail, e.sub(s, r))
    s = e.sel(r, s, e.setp("eq", r, imm(0.0)))       # sin(-0) = -0 (the sum would give +0)
    # cos(r + r_lo) = (1 - z/2) + z²·C(z) - z_lo/2 - r·r_lo
    w = e.sub(imm(1.0), half_z)
    w_err = e.sub(e.sub(imm(1.0), w), half_z)
    small = e.sub(w_err, e.fma(r, r_lo, e.mul(z_lo, imm(0.5))))
    rest = e.fma(e.mul(z, z), e.horner(z, COS_TAYLOR[:-1]), small)
    c = e.add(w, rest)
    c_lo = e.sub(rest, e.sub(c, w))
    return (s, s_lo), (c, c_lo)


def _bit(e: _Emit, n, mask):
    bits = e.op(f"and.b32 {{out}}, {n}, {mask}", "b32")
    return e.setp("ne", bits, "0", "s32")


def _trig_guard(e: _Emit, x, out):
    """NaN for ±inf and NaN inputs."""
    ok = e.setp("lt", e.abs(x), imm(float("inf")))
    return e.sel(out, imm(float("nan")), ok)


def sin_f64(w, x):
    e = _Emit(w)
    r, r_lo, n = _reduce(e, x)
    (sin, _), (cos, _) = _sin_cos_dd(e, r, r_lo)
    v = e.sel(cos, sin, _bit(e, n, 1))
    v = e.sel(e.neg(v), v, _bit(e, n, 2))
    return _trig_guard(e, x, v)


def cos_f64(w, x):
    e = _Emit(w)
    r, r_lo, n = _reduce(e, x)
    (sin, _), (cos, _) = _sin_cos_dd(e, r, r_lo)
    v = e.sel(sin, cos, _bit(e, n, 1))
    n1 = e.op(f"add.s32 {{out}}, {n}, 1", "b32")
    v = e.sel(e.neg(v), v, _bit(e, n1, 2))
    return _trig_guard(e, x, v)


def tan_f64(w, x):
    """sin/cos (or -cos/sin in odd quadrants) divided as double-doubles: one rounding of the
    quotient plus ~0.2 ulp from the two kernels (the plain quotient of rounded sin and cos
    reached 3 ulp next to ±π/2)."""
    e = _Emit(w)
    r, r_lo, n = _reduce(e, x)
    (s, s_lo), (c, c_lo) = _sin_cos_dd(e, r, r_lo)
    odd = _bit(e, n, 1)
    num, num_lo = e.sel(c, s, odd), e.sel(c_lo, s_lo, odd)
    den, den_lo = e.sel(s, c, odd), e.sel(s_lo, c_lo, odd)
    q, q_lo = _dd_div(e, num, num_lo, den, den_lo)
    v = e.add(q, q_lo)
    v = e.sel(e.neg(v), v, odd)
    v = e.sel(r, v, e.setp("eq", r, imm(0.0)))       # tan(±0) = ±0
    return _trig_guard(e, x, v)


def atan2_f64(w, y, x):
    """atan2(y, x): the angle of the point (x, y)."""
    e = _Emit(w)
    ax, ay = e.abs(x), e.abs(y)
    # both infinite -> treat as (1, 1); one infinite -> (1, 0) or (0, 1)
    big = e.op(f"max.f64 {{out}}, {ax}, {ay}")
    infinite = e.setp("eq", big, imm(float("inf")))
    ax = e.sel(e.sel(imm(1.0), imm(0.0), e.setp("eq", ax, imm(float("inf")))), ax, infinite)
    ay = e.sel(e.sel(imm(1.0), imm(0.0), e.setp("eq", ay, imm(float("inf")))), ay, infinite)
    # keep small + big finite
    huge = e.setp("gt", e.op(f"max.f64 {{out}}, {ax}, {ay}"), imm(2.0 ** 1020))
    ax = e.sel(e.mul(ax, imm(0.25)), ax, huge)
    ay = e.sel(e.mul(ay, imm(0.25)), ay, huge)
    big = e.op(f"max.f64 {{out}}, {ax}, {ay}")
    small = e.op(f"min.f64 {{out}}, {ax}, {ay}")
    reduced = e.setp("gt", small, e.mul(big, imm(TAN_PI_8)))
    # t + t_lo = num/den with the roundings of s - b, s + b and the quotient kept: rounding t
    # alone cost up to 1.5 ulp relative, 2.1 ulp at the end
    diff, diff_lo = _two_sum(e, small, e.neg(big))
    total, total_lo = _two_sum(e, small, big)
    num, num_lo = e.sel(diff, small, reduced), e.sel(diff_lo, imm(0.0), reduced)
    den, den_lo = e.sel(total, big, reduced), e.sel(total_lo, imm(0.0), reduced)
    t, t_lo = _dd_div(e, num, num_lo, den, den_lo)
    degenerate = e.setp("eq", big, imm(0.0))
    t = e.sel(imm(0.0), t, degenerate)
    t_lo = e.sel(imm(0.0), t_lo, degenerate)
    z = e.mul(t, t)
    # atan(t + t_lo) = t + t³·P(z) + t_lo/(1 + z)
    tail = e.fma(e.mul(t, z), e.horner(z, ATAN_SERIES), e.fma(t_lo, e.neg(z), t_lo))
    atan = e.add(t, tail)
    atan_lo = e.sub(tail, e.sub(atan, t))
    # angle = C + sign·atan(t) with C = j·π/4
    swap = e.setp("gt", ay, ax)
    xbits = e.op(f"mov.b64 {{out}}, {x}", "b64")
    left = e.setp("lt", xbits, "0", "s64")
    off = e.op(f"selp.s32 {{out}}, 1, 0, {reduced}", "b32")
    two_minus = e.op(f"sub.s32 {{out}}, 2, {off}", "b32")
    four_minus = e.op(f"sub.s32 {{out}}, 4, {off}", "b32")
    two_plus = e.op(f"add.s32 {{out}}, 2, {off}", "b32")
    j_right = e.op(f"selp.s32 {{out}}, {two_minus}, {off}, {swap}", "b32")
    j_left = e.op(f"selp.s32 {{out}}, {two_plus}, {four_minus}, {swap}", "b32")
    j = e.op(f"selp.s32 {{out}}, {j_left}, {j_right}, {left}", "b32")
    minus = e.pred("xor", swap, left)
    signed = e.sel(e.neg(atan), atan, minus)
    signed_lo = e.sel(e.neg(atan_lo), atan_lo, minus)
    c_hi, c_lo = imm(0.0), imm(0.0)
    for index in range(1, 5):
        hit = e.setp("eq", j, str(index), "s32")
        c_hi = e.sel(imm(PIO4_MULTIPLES[index][0]), c_hi, hit)
        c_lo = e.sel(imm(PIO4_MULTIPLES[index][1]), c_lo, hit)
    angle = e.add(c_hi, signed)                       # |c_hi| >= π/4 > |signed| or c_hi = 0
    angle_err = e.add(e.sub(c_hi, angle), signed)
    angle = e.add(angle, e.add(angle_err, e.add(c_lo, signed_lo)))
    out = e.op(f"copysign.f64 {{out}}, {y}, {angle}")
    return e.nan_through(out, x, y)


# mnemonic -> builder over f64 registers (operands in Tile IR order)
F64_MATH = by_mnemonic({"exp": exp_f64, "exp2": exp2_f64, "log": log_f64, "log2": log2_f64,
                        "sin": sin_f64, "cos": cos_f64, "tan": tan_f64, "sinh": sinh_f64,
                        "cosh": cosh_f64, "tanh": tanh_f64, "fpowf": pow_f64,
                        "atan2": atan2_f64}, "f64 math builders")
