"""Integer op semantics (tilebc.numeric.intops) against exact Python-int references.

i1 and i8: every pair of operands, every flag combination. i16/i32/i64: all pairs of edge values plus
random pairs. The reference works on unbounded Python ints (numpy object arrays) and wraps at the end,
so it shares no arithmetic with the implementation.
"""
from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest

from tilebc.numeric import intops
from tilebc.numeric.intops import IntegerOpError, IntegerUndefinedError
from tilebc.numeric.numerics import to_bits
from tilebc.ops.enums import ComparisonPredicate, IntegerOverflow, RoundingMode

STORAGE = {1: np.bool_, 8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
NAMES = {1: "i1", 8: "i8", 16: "i16", 32: "i32", 64: "i64"}
OF = IntegerOverflow
RM = RoundingMode


# The operand lists are the same for every case of a width: their storage and readings are made
# once per list (read-only, so no case can change another's inputs).

def _frozen(array):
    array.setflags(write=False)
    return array


@functools.lru_cache(maxsize=None)
def storage(bits, width):
    """Storage array of unsigned bit patterns (a tuple of Python ints)."""
    bits = np.array([int(b) for b in bits], dtype=np.uint64)
    if width == 1:
        return _frozen(bits.astype(np.bool_))
    return _frozen(bits.astype(np.dtype(f"u{width // 8}")).view(STORAGE[width]))


@functools.lru_cache(maxsize=None)
def readings(bits, width):
    """(signed, unsigned) Python-int object arrays of bit patterns (a tuple of Python ints)."""
    unsigned = np.array([int(b) for b in bits], dtype=object)
    signed = np.array([b - (1 << width) if b >> (width - 1) else b for b in unsigned], dtype=object)
    return _frozen(signed), _frozen(unsigned)


def wrap(values, width):
    return np.array([int(v) % (1 << width) for v in values], dtype=object)


def fits_signed(values, width):
    low, high = -(1 << (width - 1)), (1 << (width - 1)) - 1
    return np.array([low <= v <= high for v in values], dtype=bool)


def fits_unsigned(values, width):
    return np.array([0 <= v < (1 << width) for v in values], dtype=bool)


def flag_breaks(flag, exact_signed, exact_unsigned, width):
    broken = np.zeros(len(exact_signed), bool)
    if flag in (OF.NO_SIGNED_WRAP, OF.NO_WRAP):
        broken |= ~fits_signed(exact_signed, width)
    if flag in (OF.NO_UNSIGNED_WRAP, OF.NO_WRAP):
        broken |= ~fits_unsigned(exact_unsigned, width)
    return broken


def trunc_div(a, b):
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def reference(mnemonic, a_bits, b_bits, width, attrs):
    """(result bit patterns, undefined mask) from first principles."""
    sa, ua = readings(a_bits, width)
    sb, ub = readings(b_bits, width)
    n = len(sa)
    none = np.zeros(n, bool)
    flag = attrs.get("overflow", OF.NONE)
    signed = attrs.get("signedness", "signed") == "signed"
    if mnemonic in ("addi", "subi", "muli"):
        fn = {"addi": lambda x, y: x + y, "subi": lambda x, y: x - y,
              "muli": lambda x, y: x * y}[mnemonic]
        es, eu = fn(sa, sb), fn(ua, ub)
        return wrap(eu, width), flag_breaks(flag, es, eu, width)
    if mnemonic == "negi":
        return wrap(-ua, width), flag_breaks(flag, -sa, -ua, width)
    if mnemonic == "absi":
        return wrap(np.array([abs(v) for v in sa], dtype=object), width), none
    if mnemonic == "mulhii":
        return np.array([(x * y) >> width for x, y in zip(ua, ub)], dtype=object), none
    if mnemonic == "shli":
        result, bad = [], []
        for s, u, amount in zip(sa, ua, ub):
            if amount >= width:
                result.append(0)
                bad.append(True)
                continue
            es, eu = s << amount, u << amount
            result.append(eu % (1 << width))
            bad.append(bool(flag_breaks(flag, [es], [eu], width)[0]))
        return np.array(result, dtype=object), np.array(bad)
    if mnemonic == "shri":
        result = []
        for s, u, amount in zip(sa, ua, ub):
            if signed:
                result.append((s >> min(amount, width)) % (1 << width))
            else:
                result.append(u >> amount if amount < width else 0)
        return np.array(result, dtype=object), np.array([a >= width for a in ub])
    if mnemonic == "divi":
        mode = attrs.get("rounding", RM.ZERO)
        result, bad = [], []
        for x, y in zip(sa, sb) if signed else zip(ua, ub):
            if y == 0:
                result.append((1 << width) - 1)
                bad.append(True)
                continue
            q = {RM.ZERO: trunc_div(x, y), RM.NEGATIVE_INF: x // y, RM.POSITIVE_INF: -((-x) // y)}[mode]
            bad.append(signed and not fits_signed([q], width)[0])
            result.append(q % (1 << width))
        return np.array(result, dtype=object), np.array(bad)
    if mnemonic == "remi":
        result = []
        for x, y in zip(sa, sb) if signed else zip(ua, ub):
            result.append(x % (1 << width) if y == 0 else (x - trunc_div(x, y) * y) % (1 << width))
        return np.array(result, dtype=object), np.array([y == 0 for y in ub])
    if mnemonic in ("maxi", "mini"):
        pick = max if mnemonic == "maxi" else min
        pairs = zip(sa, sb) if signed else zip(ua, ub)
        return wrap(np.array([pick(x, y) for x, y in pairs], dtype=object), width), none
    if mnemonic in ("andi", "ori", "xori"):
        fn = {"andi": lambda x, y: x & y, "ori": lambda x, y: x | y, "xori": lambda x, y: x ^ y}
        return np.array([fn[mnemonic](x, y) for x, y in zip(ua, ub)], dtype=object), none
    if mnemonic == "cmpi":
        fn = {ComparisonPredicate.EQUAL: lambda x, y: x == y,
              ComparisonPredicate.NOT_EQUAL: lambda x, y: x != y,
              ComparisonPredicate.LESS_THAN: lambda x, y: x < y,
              ComparisonPredicate.LESS_THAN_OR_EQUAL: lambda x, y: x <= y,
              ComparisonPredicate.GREATER_THAN: lambda x, y: x > y,
              ComparisonPredicate.GREATER_THAN_OR_EQUAL: lambda x, y: x >= y,
              }[attrs["comparison_predicate"]]
        pairs = zip(sa, sb) if signed else zip(ua, ub)
        return np.array([int(fn(x, y)) for x, y in pairs], dtype=object), none
    raise AssertionError(mnemonic)


def cases():
    """(mnemonic, attrs) for every op and every accepted flag combination."""
    for op in ("addi", "subi", "muli", "shli"):
        for flag in OF:
            yield op, {"overflow": flag}
    for flag in (OF.NONE, OF.NO_SIGNED_WRAP, OF.NO_WRAP):
        yield "negi", {"overflow": flag}
    yield "absi", {}
    yield "mulhii", {}
    for op in ("andi", "ori", "xori"):
        yield op, {}
    for sign in ("signed", "unsigned"):
        for op in ("remi", "shri", "maxi", "mini"):
            yield op, {"signedness": sign}
        for mode in (RM.ZERO, RM.POSITIVE_INF) + ((RM.NEGATIVE_INF,) if sign == "signed" else ()):
            yield "divi", {"signedness": sign, "rounding": mode}
        for predicate in ComparisonPredicate:
            yield "cmpi", {"signedness": sign, "comparison_predicate": predicate}


CASES = list(cases())
UNARY = ("negi", "absi")


def case_id(case):
    op, attrs = case
    return "-".join([op] + [getattr(v, "keyword", str(v)) for v in attrs.values()])


def check(width, a_bits, b_bits, op, attrs):
    a, b = storage(a_bits, width), storage(b_bits, width)
    operands = (a,) if op in UNARY else (a, b)
    result = intops.evaluate(op, operands, attrs)
    mask = intops.undefined(op, operands, attrs)
    expected, expected_mask = reference(op, a_bits, b_bits, width, attrs)
    if op == "cmpi":
        assert result.dtype == np.bool_
        got = result.astype(np.uint64)
    else:
        assert result.dtype == STORAGE[width]
        got = to_bits(result, NAMES[width])
    wrong = np.flatnonzero(got != expected.astype(np.uint64))
    assert wrong.size == 0, (f"{op} {attrs} {NAMES[width]}: {wrong.size} wrong, e.g. "
                             f"{a_bits[wrong[0]]:#x}, {b_bits[wrong[0]]:#x} -> {int(got[wrong[0]]):#x}, "
                             f"expected {int(expected[wrong[0]]):#x}")
    wrong = np.flatnonzero(mask != expected_mask)
    assert wrong.size == 0, (f"{op} {attrs} {NAMES[width]}: undefined mask wrong for "
                             f"{a_bits[wrong[0]]:#x}, {b_bits[wrong[0]]:#x}")


@functools.lru_cache(maxsize=None)
def all_pairs(width):
    values = range(1 << width)
    pairs = list(itertools.product(values, values))
    return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("width", [1, 8])
def test_exhaustive(width, case):
    a_bits, b_bits = all_pairs(width)
    check(width, a_bits, b_bits, *case)


def edge_values(width):
    top = 1 << width
    values = {0, 1, 2, 3, top - 1, top - 2, top >> 1, (top >> 1) - 1, (top >> 1) + 1,
              int("55" * (width // 8), 16), int("AA" * (width // 8), 16)}
    values |= {width - 1, width, width + 1, 1 << (width // 2), (1 << (width // 2)) - 1}
    return sorted(v % top for v in values)


@functools.lru_cache(maxsize=None)
def sampled_pairs(width, seed):
    edges = edge_values(width)
    a_bits = [a for a in edges for _ in edges]
    b_bits = [b for _ in edges for b in edges]
    rng = np.random.default_rng(seed)
    for _ in range(1500):
        a_bits.append(int(rng.integers(0, 1 << 63)) * 2 % (1 << width) + int(rng.integers(0, 2)))
        b_bits.append(int(rng.integers(0, 1 << 63)) * 2 % (1 << width) + int(rng.integers(0, 2)))
    for _ in range(300):  # small magnitudes (and shift amounts in range), either sign
        a_bits.append(int(rng.integers(-300, 300)) % (1 << width))
        b_bits.append(int(rng.integers(0, width + 2)))
    return tuple(a_bits), tuple(b_bits)


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("width", [16, 32, 64])
def test_sampled(width, case):
    a_bits, b_bits = sampled_pairs(width, seed=width)
    check(width, a_bits, b_bits, *case)


def test_documented_examples():
    # remi examples of the spec, mulhii example (2^31 * 2), negi example
    r = intops.remi(np.array([7, 7, -7, -7], np.int32), np.array([3, -3, 3, -3], np.int32))
    assert r.tolist() == [1, 1, -1, -1]
    assert intops.mulhii(np.array([-2**31], np.int32), np.array([2], np.int32)).tolist() == [1]
    assert intops.muli(np.array([-2**31], np.int32), np.array([2], np.int32)).tolist() == [0]
    assert intops.negi(np.array([0, 1, 2, 3], np.int16)).tolist() == [0, -1, -2, -3]
    # unsigned reading of the same bits: 200 // 3 = 66; signed -56 // 3 = -18 (trunc)
    a, b = np.array([-56], np.int8), np.array([3], np.int8)
    assert intops.divi(a, b, signed=False).tolist() == [66]
    assert intops.divi(a, b).tolist() == [-18]
    assert intops.divi(a, b, rounding="negative_inf").tolist() == [-19]
    assert intops.divi(a, b, signed=False, rounding="positive_inf").tolist() == [67]


def test_scalars_and_broadcasting():
    a = np.array(-5, np.int32)
    assert intops.absi(a).shape == () and int(intops.absi(a)) == 5
    row = np.array([[1, 2, 3]], np.int16)
    col = np.array([[10], [20]], np.int16)
    assert intops.addi(row, col).tolist() == [[11, 12, 13], [21, 22, 23]]


def test_check_raises_with_details():
    a = np.array([[1, 2], [3, 4]], np.int8)
    b = np.array([[1, 0], [1, 1]], np.int8)
    with pytest.raises(IntegerUndefinedError) as info:
        intops.divi(a, b, check=True)
    assert "division by zero" in str(info.value) and "(0, 1)" in str(info.value)
    assert info.value.mask.tolist() == [[False, True], [False, False]]
    with pytest.raises(IntegerUndefinedError, match="overflow"):
        intops.addi(np.array([127], np.int8), np.array([1], np.int8), "no_signed_wrap", check=True)
    # the same sum is fine without the promise, and for the unsigned promise
    assert intops.addi(np.array([127], np.int8), np.array([1], np.int8), "no_unsigned_wrap",
                       check=True).tolist() == [-128]


@pytest.mark.parametrize("call, message", [
    (lambda: intops.negi(np.array([1], np.int32), "no_unsigned_wrap"), "no_unsigned_wrap"),
    (lambda: intops.divi(np.array([1], np.int32), np.array([1], np.int32), False, "negative_inf"),
     "negative_inf"),
    (lambda: intops.divi(np.array([1], np.int32), np.array([1], np.int32), True, "nearest_even"),
     "nearest_even"),
    (lambda: intops.addi(np.array([1], np.int32), np.array([1], np.int64)), "same element type"),
    (lambda: intops.addi(np.array([1], np.uint8), np.array([1], np.uint8)), "uint8"),
    (lambda: intops.addi(np.array([1.0]), np.array([1.0])), "float64"),
    (lambda: intops.evaluate("addf", (np.array([1], np.int8),) * 2), "not an integer op"),
    (lambda: intops.evaluate("addi", (np.array([1], np.int8),)), "2 operand"),
    (lambda: intops.addi(np.array([1], np.int8), np.array([1], np.int8), "sometimes"), "overflow"),
])
def test_rejects(call, message):
    with pytest.raises(IntegerOpError, match=message):
        call()


def test_i4_is_not_an_arithmetic_type():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    four = np.array([1], ml_dtypes.int4)
    with pytest.raises(IntegerOpError, match="i1, i8, i16, i32 or i64"):
        intops.addi(four, four)


def test_evaluate_takes_an_op_attribute_dict():
    """The interpreter passes op.attrs whole: enum values and unrelated keys."""
    a, b = np.array([-8], np.int8), np.array([3], np.int8)
    attrs = {"signedness": 1, "rounding": RM.NEGATIVE_INF, "unrelated": 5}
    assert intops.evaluate("divi", (a, b), attrs).tolist() == [-3]
