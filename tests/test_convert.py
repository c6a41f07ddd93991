"""Conversions, bit-exact: exhaustive for sources of at most 16 bits, edge + random values for wider ones.

The reference rounds by searching a sorted table of every finite value of the target format (taken from
ml_dtypes/numpy where they have the type), so it shares no arithmetic with tilebc.numeric.convert. RN results are
also checked against ml_dtypes/numpy casts, and special values against the type-system seed's table.
"""
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from tilebc.numeric import convert
from tilebc.numeric.convert import ConversionError
from tilebc.ir.types import ELEMENT_TYPES
from tilebc.numeric.numerics import FLOAT_FORMATS, storage_dtype
from tilebc.ops.enums import IntegerOverflow, RoundingMode as RM
from tilebc.version import V13_1, V13_2, V13_3, V13_4, V13_5

pytestmark = [pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")]

FLOATS = sorted(FLOAT_FORMATS)
SMALL_FLOATS = [name for name in FLOATS if FLOAT_FORMATS[name].bits <= 16]
MODES = [RM.NEAREST_EVEN, RM.ZERO, RM.NEGATIVE_INF, RM.POSITIVE_INF, RM.NEAREST_AWAY]
# Formats ml_dtypes/numpy model, and the bit width of their storage.
REFERENCE_DTYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32,
                    "f64": np.float64, "f8E4M3FN": ml_dtypes.float8_e4m3fn,
                    "f8E5M2": ml_dtypes.float8_e5m2, "f8E8M0FNU": ml_dtypes.float8_e8m0fnu,
                    "f4E2M1FN": ml_dtypes.float4_e2m1fn}
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def all_patterns(name):
    """Every bit pattern of a ≤16-bit float format, as (storage array, uint64 bits)."""
    fmt = FLOAT_FORMATS[name]
    bits = np.arange(1 << fmt.bits, dtype=np.uint64)
    dtype = storage_dtype(name)
    return bits.astype(UINT[dtype.itemsize]).view(dtype), bits


def reference_values(name, bits):
    """float64 values of bit patterns, from ml_dtypes/numpy where possible."""
    if name in REFERENCE_DTYPES:
        dtype = np.dtype(REFERENCE_DTYPES[name])
        return bits.astype(UINT[dtype.itemsize]).view(dtype).astype(np.float64)
    if name == "tf32":
        return (bits << np.uint64(13)).astype(np.uint32).view(np.float32).astype(np.float64)
    assert name == "fnv8E5M3FNU"  # unsigned e5m3, bias 15, only 0xFF is NaN
    values = []
    for pattern in bits.tolist():
        exponent, mantissa = pattern >> 3, pattern & 7
        if pattern == 0xFF:
            values.append(math.nan)
        elif exponent == 0:
            values.append(math.ldexp(mantissa / 8, -14))
        else:
            values.append(math.ldexp(1 + mantissa / 8, exponent - 15))
    return np.array(values)


class Table:
    """Sorted finite values of a target format with their bit patterns and mantissa parity."""

    def __init__(self, name):
        fmt = FLOAT_FORMATS[name]
        self.fmt = fmt
        bits = np.arange(1 << fmt.bits, dtype=np.uint64)
        values = reference_values(name, bits)
        keep = np.isfinite(values) & ~((values == 0) & np.signbit(values))
        order = np.argsort(values[keep], kind="stable")
        self.values = values[keep][order]
        self.bits = bits[keep][order]
        self.max = self.values[-1]
        self.min = self.values[0]
        # ulp at the top: the spacing between the two largest values.
        self.top_ulp = self.values[-1] - self.values[-2]
        self.pattern_of = dict(zip(values[keep].tolist(), bits[keep].tolist()))

    def parity(self, index):
        return int(self.bits[index]) & 1

    def extended(self):
        """The values with the next value of the unbounded-exponent format at each end, and their
        mantissa parity; made once per format (a tf32 table has 2**19 entries and the reference
        rounds one value at a time in the wide-integer tests)."""
        if not hasattr(self, "_extended"):
            beyond = self.max + self.top_ulp
            beyond_parity = int(round(beyond / self.top_ulp)) % 2
            signed = self.fmt.signed
            ext = np.concatenate([[-beyond] if signed else [], self.values, [beyond]])
            parity = np.concatenate([[beyond_parity] if signed else [], self.bits & np.uint64(1),
                                     [beyond_parity]]).astype(np.int64)
            self._extended = ext, parity
        return self._extended



_TABLES = {}


def table(name):
    if name not in _TABLES:
        _TABLES[name] = Table(name)
    return _TABLES[name]


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.keyword)
@pytest.mark.parametrize("dst", FLOATS)
@pytest.mark.parametrize("src", SMALL_FLOATS)
def test_ftof_exhaustive_small_sources(src, dst, mode):
    if src == dst:
        with pytest.raises(ConversionError, match=f"^ftof from {src} to {dst} is not defined"):
            convert.float_to_float(all_patterns(src)[0], src, dst, mode)
        return
    array, bits = all_patterns(src)
    values = reference_values(src, bits)
    result = convert.float_to_float(array, src, dst, mode)
    from tilebc.numeric.numerics import to_bits
    got_bits = to_bits(result, dst)
    got = reference_values(dst, got_bits)
    if FLOAT_FORMATS[dst].bits > 16:
        # Wider targets hold every ≤16-bit value exactly, whatever the rounding mode.
        finite = np.isfinite(values)
        assert np.array_equal(got[finite], values[finite])
        assert np.array_equal(np.signbit(got[finite]), np.signbit(values[finite]))
        assert np.array_equal(np.isinf(got), np.isinf(values))
        assert np.isnan(got[np.isnan(values)]).all()
        return
    _compare_vectorised(values, got, dst, mode)


def reference_round(values, dst, mode):
    """Vectorised reference: round float64 values to `dst` by locating them between neighbouring
    table values. Midpoints of neighbours are exact in float64, so every comparison is exact."""
    fmt = FLOAT_FORMATS[dst]
    tab = table(dst)
    ext, parity = tab.extended()
    beyond = ext[-1]  # next value of the unbounded-exponent format
    finite = np.isfinite(values)
    x = np.where(finite, values, 0.0)
    x = np.clip(x, ext[0], ext[-1])
    found = np.searchsorted(ext, x, side="left")
    hit = ext[np.minimum(found, len(ext) - 1)] == x
    position = np.clip(found, 1, len(ext) - 1)
    below, above = ext[position - 1], ext[position]
    middle = below / 2 + above / 2
    negative = np.signbit(values)
    nearer_low = x < middle
    tie = x == middle
    even_low = parity[position - 1] == 0
    if mode is RM.ZERO:
        pick_high = negative
    elif mode is RM.NEGATIVE_INF:
        pick_high = np.zeros(x.shape, bool)
    elif mode is RM.POSITIVE_INF:
        pick_high = np.ones(x.shape, bool)
    elif mode is RM.NEAREST_AWAY:
        pick_high = ~nearer_low & ~(tie & negative)
    else:
        pick_high = ~nearer_low & ~(tie & even_low)
    result = np.where(hit, x, np.where(pick_high, above, below))
    # the clip above keeps far values inside [-beyond, beyond]; their rounding is the overflow rule
    result = np.where(values > beyond, beyond, np.where(values < -beyond, -beyond, result))
    result = np.where(np.isinf(values), np.copysign(np.inf, values), result)
    over = np.abs(result) > tab.max
    if fmt.saturating:
        result = np.where(over, np.copysign(tab.max, result), result)
    else:
        to_max = {RM.ZERO: np.ones(x.shape, bool), RM.POSITIVE_INF: negative,
                  RM.NEGATIVE_INF: ~negative}.get(mode, np.zeros(x.shape, bool))
        result = np.where(over, np.copysign(np.where(to_max & ~np.isinf(values), tab.max, np.inf),
                                            result), result)
    result = np.where((result == 0) & negative & fmt.signed, -0.0, result)
    if not fmt.signed:
        result = np.where(negative | (values < tab.min), tab.min, result)
    nan_result = tab.max if fmt.nan_to_max else np.nan
    return np.where(np.isnan(values), nan_result, result)


def _compare_vectorised(values, got, dst, mode):
    want = reference_round(values, dst, mode)
    same = ((got == want) & (np.signbit(got) == np.signbit(want))) | (np.isnan(got) & np.isnan(want))
    if not same.all():
        index = int(np.flatnonzero(~same)[0])
        raise AssertionError(f"{values[index]!r} -> {dst} {mode.keyword}: got {got[index]!r}, "
                             f"want {want[index]!r} ({int((~same).sum())} mismatches)")


def test_rounding_table_follows_versions():
    assert convert.rounding_supported("ftof", "f32", "f16", RM.NEAREST_EVEN, V13_1)
    assert not convert.rounding_supported("ftof", "f32", "f32", RM.NEAREST_EVEN, V13_5)
    assert not convert.rounding_supported("ftof", "f32", "f16", RM.ZERO, V13_3)
    assert convert.rounding_supported("ftof", "f32", "f16", RM.ZERO, V13_4)
    assert convert.rounding_supported("ftof", "f32", "f8E8M0FNU", RM.POSITIVE_INF, V13_2)
    assert not convert.rounding_supported("ftof", "f32", "f8E8M0FNU", RM.NEAREST_EVEN, V13_5)


def edge_and_random_values(rng, count=3000):
    """float64 values around every format's edges plus random f32/f64 bit patterns."""
    edges = [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, -5e-324, 1e308, -1e308]
    for fmt_name in FLOATS:
        tab = table(fmt_name) if FLOAT_FORMATS[fmt_name].bits <= 19 else None
        if tab is None:
            continue
        top, ulp = tab.max, tab.top_ulp
        positive = tab.values[tab.values > 0]
        smallest = positive[0]
        for value in (top, top + ulp / 2, top + ulp / 4, top + ulp, smallest, smallest / 2,
                      smallest * 0.75, smallest * 1.5, positive[1] if len(positive) > 1 else 1.0):
            edges += [value, -value, math.nextafter(value, 0), math.nextafter(value, math.inf)]
    random32 = rng.integers(0, 1 << 32, size=count, dtype=np.uint64).astype(np.uint32)
    random64 = rng.integers(0, 1 << 63, size=count, dtype=np.uint64) | (
        rng.integers(0, 2, size=count, dtype=np.uint64) << np.uint64(63))
    # Values near the small formats' ranges are where rounding happens: scale random mantissas.
    near = rng.standard_normal(count) * np.exp2(rng.integers(-30, 20, size=count))
    return np.concatenate([np.array(edges), random32.view(np.float32).astype(np.float64),
                           random64.view(np.float64), near])


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.keyword)
@pytest.mark.parametrize("dst", [n for n in FLOATS if FLOAT_FORMATS[n].bits <= 19])
@pytest.mark.parametrize("src", ["f32", "f64"])
def test_ftof_wide_sources_edges_and_random(src, dst, mode):
    rng = np.random.default_rng(1234)
    values = edge_and_random_values(rng)
    source = values.astype(storage_dtype(src))
    exact = source.astype(np.float64)
    result = convert.float_to_float(source, src, dst, mode)
    from tilebc.numeric.numerics import to_bits
    got = reference_values(dst, to_bits(result, dst))
    _compare_vectorised(exact, got, dst, mode)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.keyword)
def test_ftof_f64_to_f32_edges_and_random(mode):
    rng = np.random.default_rng(99)
    values = edge_and_random_values(rng)
    result = convert.float_to_float(values, "f64", "f32", mode)
    nearest = values.astype(np.float32)
    for value, have, near in zip(values.tolist(), result.tolist(), nearest.tolist()):
        if math.isnan(value):
            assert math.isnan(have)
            continue
        want = _f32_reference(value, near, mode)
        assert have == want and math.copysign(1, have) == math.copysign(1, want), (value, mode)


def _f32_reference(value, near, mode):
    """f32 rounding from numpy's nearest cast plus its neighbours (np.nextafter)."""
    if math.isinf(value):
        return value
    if mode in (RM.NEAREST_EVEN,):
        return near
    candidates = {near, float(np.nextafter(np.float32(near), np.float32(-np.inf))),
                  float(np.nextafter(np.float32(near), np.float32(np.inf)))}
    top = float(np.finfo(np.float32).max)
    below = max((c for c in candidates if c <= value), default=-math.inf)
    above = min((c for c in candidates if c >= value), default=math.inf)
    if math.isinf(near) and abs(value) <= top:
        below, above = (top, math.inf) if value > 0 else (-math.inf, -top)
    if mode is RM.ZERO:
        result = below if value > 0 else above
        return math.copysign(min(abs(result), top), value) if not math.isinf(value) else result
    if mode is RM.NEGATIVE_INF:
        return below if below != -math.inf or value < -top else -top
    if mode is RM.POSITIVE_INF:
        return above if above != math.inf or value > top else top
    # nearest-away: differs from nearest-even only on exact ties
    exact, low, high = Fraction(value), Fraction(below) if not math.isinf(below) else None, (
        Fraction(above) if not math.isinf(above) else None)
    if low is not None and high is not None and exact - low == high - exact:
        return above if value > 0 else below
    return near


def test_ftof_nearest_matches_ml_dtypes_in_range():
    """Inside every target's finite range, nearest-even equals ml_dtypes/numpy casts bit for bit."""
    rng = np.random.default_rng(7)
    values = edge_and_random_values(rng).astype(np.float32)
    from tilebc.numeric.numerics import to_bits
    for dst, dtype in REFERENCE_DTYPES.items():
        if dst in ("f32", "f64"):
            continue
        top = table(dst).max
        keep = np.isfinite(values) & (np.abs(values) <= top)
        if dst == "f8E8M0FNU":
            continue  # Tile IR rounds to e8m0 only toward zero or +inf; ml_dtypes rounds to nearest
        ours = to_bits(convert.float_to_float(values[keep], "f32", dst), dst)
        theirs = values[keep].astype(dtype).view(UINT[np.dtype(dtype).itemsize]).astype(np.uint64)
        assert np.array_equal(ours, theirs), dst


@pytest.mark.parametrize("src, dst, normal, below", [
    ("f32", "f64", 2.0 ** -126, 2.0 ** -140),   # a subnormal source
    ("f64", "f32", 2.0 ** -126, 2.0 ** -130),   # a normal source whose result is subnormal
    ("f32", "f16", 2.0 ** -14, 2.0 ** -20),
    ("f16", "f32", 2.0 ** -14, 2.0 ** -20),
])
def test_ftof_takes_the_cpu_cast_only_above_both_normal_ranges(src, dst, normal, below):
    """Subnormals go through the rounding rules, not the CPU's cast, which a library that sets
    flush-to-zero / denormals-are-zero would turn into zeros."""
    dtype = np.dtype(REFERENCE_DTYPES.get(src, src.replace("f", "float")))
    assert convert._native_cast_exact(np.array([0.0, -normal, 3.0], dtype), ELEMENT_TYPES[src],
                                      ELEMENT_TYPES[dst])
    assert not convert._native_cast_exact(np.array([3.0, below], dtype), ELEMENT_TYPES[src],
                                          ELEMENT_TYPES[dst])
    expected = np.array([below], np.float64).astype(REFERENCE_DTYPES.get(dst, dst.replace("f", "float")))
    assert convert.float_to_float(np.array([below], dtype), src, dst).tolist() == expected.tolist()


def test_ftof_nan_payload_matches_numpy():
    patterns = np.array([0x7FC00000, 0xFFC00001, 0x7F800001, 0x7FFFFFFF], dtype=np.uint32)
    source = patterns.view(np.float32)
    ours = convert.float_to_float(source, "f32", "f16").view(np.uint16)
    assert np.array_equal(ours, source.astype(np.float16).view(np.uint16))


def test_special_values_follow_the_seed_table():
    """Type-system seed 5.1.3: IEEE targets give ±Inf/NaN; e5m2 ±MAX_NORM/NaN; e4m3 ±MAX_NORM and
    NaN -> +MAX_NORM."""
    source = np.array([1e300, -1e300, np.inf, -np.inf, np.nan], dtype=np.float64)
    for dst in ("f16", "bf16", "tf32", "f32"):
        out = convert.float_to_float(source, "f64", dst).astype(np.float64)
        assert out[0] == math.inf and out[1] == -math.inf and out[2] == math.inf
        assert out[3] == -math.inf and math.isnan(out[4])
    e5m2 = convert.float_to_float(source, "f64", "f8E5M2").astype(np.float64)
    assert list(e5m2[:4]) == [57344.0, -57344.0, 57344.0, -57344.0] and math.isnan(e5m2[4])
    e4m3 = convert.float_to_float(source, "f64", "f8E4M3FN").astype(np.float64)
    assert list(e4m3) == [448.0, -448.0, 448.0, -448.0, 448.0]


# ---------------------------------------------------------------------------------------------------
# itof

SMALL_INTS = ["i1", "i4", "i8", "i16"]


def all_int_patterns(name):
    width = ELEMENT_TYPES[name].bits
    bits = np.arange(1 << width, dtype=np.uint64)
    from tilebc.numeric.numerics import from_bits
    return from_bits(bits, name), bits


def int_value(pattern, width, signed):
    if signed and pattern >> (width - 1):
        return pattern - (1 << width)
    return pattern


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.keyword)
@pytest.mark.parametrize("dst", FLOATS)
@pytest.mark.parametrize("src", SMALL_INTS)
@pytest.mark.parametrize("signed", [True, False], ids=["signed", "unsigned"])
def test_itof_exhaustive_small_sources(src, dst, mode, signed):
    array, bits = all_int_patterns(src)
    width = ELEMENT_TYPES[src].bits
    values = np.array([float(int_value(p, width, signed)) for p in bits.tolist()])
    result = convert.int_to_float(array, src, dst, signed=signed, rounding=mode)
    from tilebc.numeric.numerics import to_bits
    got = reference_values(dst, to_bits(result, dst))
    if dst in ("f32", "f64"):  # hold every ≤16-bit integer exactly
        assert np.array_equal(got, values)
        return
    _compare_vectorised(values, got, dst, mode)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.keyword)
@pytest.mark.parametrize("dst", ["f16", "bf16", "f8E4M3FN", "tf32", "f32", "f64"])
@pytest.mark.parametrize("src", ["i32", "i64"])
@pytest.mark.parametrize("signed", [True, False], ids=["signed", "unsigned"])
def test_itof_wide_sources_edges_and_random(src, dst, mode, signed):
    width = ELEMENT_TYPES[src].bits
    rng = np.random.default_rng(5)
    patterns = [0, 1, (1 << width) - 1, 1 << (width - 1), (1 << (width - 1)) - 1,
                (1 << 24) + 1, (1 << 53) + 1, (1 << 53) + 3, (1 << 54) - 1, (1 << 62) + (1 << 9) + 1,
                65504, 65519, 65520, 65536 + 16, 3 << 40]
    patterns += rng.integers(0, 1 << 62, size=400, dtype=np.uint64).tolist()
    patterns += (rng.integers(0, 1 << 62, size=200, dtype=np.uint64) >> rng.integers(
        0, 60, size=200, dtype=np.uint64)).tolist()
    patterns = [p & ((1 << width) - 1) for p in patterns]
    from tilebc.numeric.numerics import from_bits, to_bits
    array = from_bits(np.array(patterns, dtype=np.uint64), src)
    result = convert.int_to_float(array, src, dst, signed=signed, rounding=mode)
    got = to_bits(result, dst)
    exacts = [int_value(pattern, width, signed) for pattern in patterns]
    # reference_values and reference_round are element-wise: one call for all the values
    haves = reference_values(dst, got).tolist()
    for exact, have, want in zip(exacts, haves, _round_int_references(exacts, dst, mode)):
        assert have == want, (exact, dst, mode.keyword, have, want)


def _round_int_references(exacts, dst, mode):
    """`_round_int_reference` of each value; the table's rounding of all in one call."""
    wants = [_round_int_reference(exact, dst, mode) for exact in exacts]
    if FLOAT_FORMATS[dst].bits <= 19:  # every value still goes through the table
        wants = reference_round(np.array(wants, dtype=np.float64), dst, mode).tolist()
    return wants


def _round_int_reference(exact, dst, mode):
    """Round a Python int by exact comparison with the target's neighbours (for targets of at
    most 19 bits, rounded to the target's precision only: the table applies the range rules)."""
    fmt = FLOAT_FORMATS[dst]
    if fmt.bits <= 19 and float(exact) == exact:
        return float(exact)
    precision = fmt.man_bits + 1
    magnitude = abs(exact)
    if magnitude.bit_length() <= precision:
        return float(exact)
    shift = magnitude.bit_length() - precision
    kept, lost = magnitude >> shift, magnitude & ((1 << shift) - 1)
    half = 1 << (shift - 1)
    negative = exact < 0
    if mode is RM.ZERO:
        up = False
    elif mode is RM.POSITIVE_INF:
        up = lost != 0 and not negative
    elif mode is RM.NEGATIVE_INF:
        up = lost != 0 and negative
    elif mode is RM.NEAREST_AWAY:
        up = lost >= half
    else:
        up = lost > half or (lost == half and kept & 1)
    value = float((kept + int(up)) << shift)
    return -value if negative else value


# ---------------------------------------------------------------------------------------------------
# ftoi


@pytest.mark.parametrize("dst", ["i1", "i4", "i8", "i16", "i32", "i64"])
@pytest.mark.parametrize("src", SMALL_FLOATS)
@pytest.mark.parametrize("signed", [True, False], ids=["signed", "unsigned"])
def test_ftoi_exhaustive_small_sources(src, dst, signed):
    array, bits = all_patterns(src)
    values = reference_values(src, bits)
    width = ELEMENT_TYPES[dst].bits
    low, high = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    result = convert.float_to_int(array, src, dst, signed=signed, saturating=True)
    undefined = convert.float_to_int_undefined(array, src, dst, signed=signed)
    got = convert.int_values(result, dst, signed).astype(object)
    truncated = np.array([0 if math.isnan(v) else (high + 1 if v == math.inf else low - 1)
                          if math.isinf(v) else math.trunc(v) for v in values.tolist()], dtype=object)
    want = np.minimum(np.maximum(truncated, low), high)
    assert (got == want).all(), (src, dst, signed)
    in_range = ~np.isnan(values) & (truncated >= low).astype(bool) & (truncated <= high).astype(bool)
    assert np.array_equal(undefined, ~in_range)


def test_ftoi_wide_edges():
    values = np.array([2.0 ** 63, -2.0 ** 63, 2.0 ** 64, 2.0 ** 63 - 1024, -1.5, 1e300, -0.0, np.nan])
    signed = convert.int_values(convert.float_to_int(values, "f64", "i64", signed=True), "i64", True)
    assert signed.tolist() == [2 ** 63 - 1, -2 ** 63, 2 ** 63 - 1, 2 ** 63 - 1024, -1, 2 ** 63 - 1, 0, 0]
    unsigned = convert.int_values(convert.float_to_int(values, "f64", "i64", signed=False), "i64",
                                  False)
    assert unsigned.tolist() == [2 ** 63, 0, 2 ** 64 - 1, 2 ** 63 - 1024, 0, 2 ** 64 - 1, 0, 0]


# ---------------------------------------------------------------------------------------------------
# exti, trunci, bitcast

INTS = ["i1", "i4", "i8", "i16", "i32", "i64"]


@pytest.mark.parametrize("src", SMALL_INTS)
def test_exti_and_trunci_exhaustive(src):
    array, bits = all_int_patterns(src)
    width = ELEMENT_TYPES[src].bits
    for dst in INTS:
        dst_width = ELEMENT_TYPES[dst].bits
        if dst_width > width:
            for signed in (True, False):
                got = convert.int_values(convert.ext_int(array, src, dst, signed), dst, signed)
                want = [int_value(p, width, signed) for p in bits.tolist()]
                assert got.tolist() == want, (src, dst, signed)
        elif dst_width < width:
            got = convert.int_values(convert.trunc_int(array, src, dst), dst, False)
            assert got.tolist() == [p & ((1 << dst_width) - 1) for p in bits.tolist()]
            nsw = convert.trunc_int_violations(array, src, dst, IntegerOverflow.NO_SIGNED_WRAP)
            nuw = convert.trunc_int_violations(array, src, dst, IntegerOverflow.NO_UNSIGNED_WRAP)
            for pattern, signed_broken, unsigned_broken in zip(bits.tolist(), nsw, nuw):
                low = pattern & ((1 << dst_width) - 1)
                assert signed_broken == (int_value(pattern, width, True)
                                         != int_value(low, dst_width, True))
                assert unsigned_broken == (pattern != low)
        else:
            with pytest.raises(ConversionError, match="^exti from"):
                convert.ext_int(array, src, dst)


def test_exti_wide_values():
    values = np.array([-1, -2 ** 31, 2 ** 31 - 1, 0], dtype=np.int32)
    assert convert.ext_int(values, "i32", "i64", True).tolist() == [-1, -2 ** 31, 2 ** 31 - 1, 0]
    assert convert.ext_int(values, "i32", "i64", False).tolist() == [2 ** 32 - 1, 2 ** 31, 2 ** 31 - 1, 0]
    assert convert.trunc_int(np.array([2 ** 40 + 5], dtype=np.int64), "i64", "i32").tolist() == [5]


def test_bitcast_matches_numpy_views():
    rng = np.random.default_rng(3)
    same_width = {}
    for name, element in ELEMENT_TYPES.items():
        same_width.setdefault(element.bits, []).append(name)
    from tilebc.numeric.numerics import from_bits, to_bits
    for width, names in same_width.items():
        patterns = rng.integers(0, 1 << min(width, 63), size=256, dtype=np.uint64)
        for src in names:
            for dst in names:
                out = convert.bitcast(from_bits(patterns, src), src, dst)
                assert np.array_equal(to_bits(out, dst), patterns), (src, dst)
    f32 = np.array([1.0, -2.5], dtype=np.float32)
    assert np.array_equal(convert.bitcast(f32, "f32", "i32"), f32.view(np.int32))
    with pytest.raises(ConversionError, match="^bitcast from f32 to i16 is not defined"):
        convert.bitcast(f32, "f32", "i16")


def test_wrong_storage_and_kinds_are_clear_errors():
    with pytest.raises(Exception, match="must have numpy dtype float32"):
        convert.float_to_float(np.zeros(2, np.float64), "f32", "f16")
    with pytest.raises(ConversionError, match="^itof from f32 to f16"):
        convert.int_to_float(np.zeros(2, np.float32), "f32", "f16")
    with pytest.raises(ConversionError, match="rounding mode nearest_int_to_zero"):
        convert.float_to_float(np.zeros(2, np.float32), "f32", "f16", RM.NEAREST_INT_TO_ZERO)
