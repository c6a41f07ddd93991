"""Every (body op, enum attribute, value) of the op table on the interpreter.

`test_every_enum_attribute_has_a_case` walks the op table: each enum attribute of a body op must
have a case below (or a documented entry in EXCEPTIONS). A case is run once per value of the
attribute's enum, so every value is exercised: the case builds a kernel with that value and either
runs it and checks the result against an independent reference, or (when the value is not allowed
on that op) checks that tilebc's verifier rejects the kernel *because of that attribute value*.
Every case must run at least one value.
"""
import math
from fractions import Fraction

import numpy as np
import pytest

import tilebc
from tilebc.interp import Pointer, UnsupportedError, fastmath, run
from tilebc.interp.numeric_ops import memory_dtype
from tilebc.ir import DenseElementsAttr, Module, PartitionViewType, PointerType, TensorViewType, \
    scalar, tile, token
from tilebc.ir.builder import new_function
from tilebc.ir.types import ELEMENT_TYPES
from tilebc.ops import (AtomicRMWMode, ComparisonOrdering, ComparisonPredicate,
                        MemoryOrderingSemantics, MemoryScope, RoundingMode, Signedness)
from tilebc.ops.enums import IntegerOverflow
from tilebc.ops.table import BODY_OPS
from tilebc.verify import diagnostics

from test_interp_ops import _round_exact, op_kernel

RNG = np.random.default_rng(11)
I32 = ELEMENT_TYPES["i32"]
WEAK = MemoryOrderingSemantics.WEAK


class Rejected(Exception):
    """The verifier refused the kernel for the attribute value under test (checked by `build`)."""


def build(module, attr, value):
    """`module` if it verifies; raises Rejected if the verifier's errors name `attr` and `value`,
    and fails the test if it rejects the kernel for any other reason (a broken case)."""
    errors = [d for d in diagnostics(module, warnings=False)]
    if not errors:
        return module
    text = "; ".join(str(d) for d in errors)
    # the attribute's name, or its telling word ("view reductions take scope ...")
    named = attr in text or any(word in text for word in attr.split("_") if word != "memory")
    assert named and value.keyword in text, f"kernel rejected for another reason: {text}"
    raise Rejected(text)


def apply(mnemonic, inputs, result_elements, attrs, attr, value, result_shape=None, **options):
    """Run one op on numpy 1-d or 2-d inputs ([(array, element name)]); returns the result arrays.
    1-d inputs are padded (repeating their first element) to a power-of-two length, as tiles
    must be, and the results cut back."""
    length = inputs[0][0].shape[0] if inputs[0][0].ndim == 1 else None
    if length is not None and result_shape is None:
        padded = 1 << max(0, (length - 1).bit_length())
        inputs = [(np.concatenate([x, np.repeat(x[:1], padded - length)]), name)
                  for x, name in inputs]
        return [out[:length] for out in apply(mnemonic, inputs, result_elements, attrs, attr,
                                                value, result_shape=(padded,), **options)]
    input_types = [tile(x.shape, ELEMENT_TYPES[name]) for x, name in inputs]
    shape = result_shape if result_shape is not None else inputs[0][0].shape
    result_types = [tile(shape, ELEMENT_TYPES[name]) for name in result_elements]
    module = build(op_kernel(mnemonic, input_types, result_types, attrs), attr, value)
    outputs = [np.zeros(shape, memory_dtype(t.element)) for t in result_types]
    run(module, "k", (1,), *[np.ascontiguousarray(x) for x, _ in inputs], *outputs, **options)
    return outputs


CASES = {}


def case(*keys):
    def register(fn):
        for key in keys:
            CASES[key] = fn
        return fn
    return register


# ------------------------------------------------------------------------- float rounding

_FRACTION_OPS = {"addf": lambda a, b: a + b, "subf": lambda a, b: a - b,
                 "mulf": lambda a, b: a * b, "divf": lambda a, b: a / b,
                 "fma": lambda a, b, c: a * b + c}


def _round_fraction(exact: Fraction, mode) -> np.float32:
    """Correct f32 rounding of a rational; nearest_away differs from nearest-even only on ties."""
    if mode in (RoundingMode.APPROX, RoundingMode.FULL):
        mode = RoundingMode.NEAREST_EVEN  # the interpreter's documented (accurate) choice
    if mode is RoundingMode.NEAREST_AWAY:
        below = _round_exact(exact, RoundingMode.ZERO)
        gap = abs(exact - Fraction(float(below)))
        step = abs(Fraction(float(np.nextafter(below, np.float32(math.copysign(np.inf,
                                                                               float(exact))))))
                   - Fraction(float(below)))
        if gap * 2 == step:
            return np.nextafter(below, np.float32(math.copysign(np.inf, float(exact))))
        mode = RoundingMode.NEAREST_EVEN
    return _round_exact(exact, mode)


@case(("addf", "rounding_mode"), ("subf", "rounding_mode"), ("mulf", "rounding_mode"),
      ("divf", "rounding_mode"), ("fma", "rounding_mode"))
def _float_arith_rounding(mnemonic, attr, mode):
    arity = 3 if mnemonic == "fma" else 2
    operands = [(RNG.standard_normal(32) * 10.0 ** RNG.integers(-3, 4, 32)).astype(np.float32)
                for _ in range(arity)]
    if mnemonic in ("addf", "subf"):  # exact ties: 2^24 + 1 is halfway between two f32 values
        operands[0][:2] = [2.0 ** 24, -(2.0 ** 24)]
        operands[1][:2] = [1.0, -1.0] if mnemonic == "addf" else [-1.0, 1.0]
    (out,) = apply(mnemonic, [(x, "f32") for x in operands], ["f32"], {attr: mode}, attr, mode)
    fn = _FRACTION_OPS[mnemonic]
    expected = [_round_fraction(fn(*(Fraction(float(v)) for v in values)), mode)
                for values in zip(*operands)]
    np.testing.assert_array_equal(out, np.array(expected, np.float32))


@case(("sqrt", "rounding_mode"))
def _sqrt_rounding(mnemonic, attr, mode):
    x = (np.abs(RNG.standard_normal(32)) + 0.01).astype(np.float32)
    (root,) = apply("sqrt", [(x, "f32")], ["f32"], {attr: mode}, attr, mode)
    for value, got in zip(x, root):
        exact, below = Fraction(float(value)), Fraction(float(got)) ** 2
        above = Fraction(float(np.nextafter(got, np.float32(np.inf)))) ** 2
        lower = Fraction(float(np.nextafter(got, np.float32(0)))) ** 2
        if mode is RoundingMode.POSITIVE_INF:
            assert lower < exact <= below
        elif mode in (RoundingMode.ZERO, RoundingMode.NEGATIVE_INF):
            assert below <= exact < above
        else:
            assert got == np.float32(np.sqrt(np.float64(value)))


@case(("exp", "rounding_mode"), ("tanh", "rounding_mode"))
def _transcendental_rounding(mnemonic, attr, mode):
    x = RNG.uniform(-4, 4, 32).astype(np.float32)
    reference = getattr(np, mnemonic)(x.astype(np.float64)).astype(np.float32)
    (exact,) = apply(mnemonic, [(x, "f32")], ["f32"], {attr: mode}, attr, mode, exact_math=True)
    np.testing.assert_array_equal(exact, reference)  # accurate to 0.5 ulp (+ double rounding)
    # by default numpy's float32 kernel, within the device's documented bound (fastmath.py)
    (out,) = apply(mnemonic, [(x, "f32")], ["f32"], {attr: mode}, attr, mode)
    assert fastmath.ulp_distance(out, reference).max() <= fastmath.DEVICE_ULPS[mnemonic]


# ------------------------------------------------------------------------------ conversions

@case(("ftof", "rounding_mode"))
def _ftof_rounding(mnemonic, attr, mode):
    x = (RNG.standard_normal(64) * 10.0 ** RNG.integers(-2, 3, 64)).astype(np.float32)
    x[:4] = [1 + 2.0 ** -11, -(1 + 2.0 ** -11), 1 + 3 * 2.0 ** -11, 70000.0]  # f16 ties, overflow
    (out,) = apply("ftof", [(x, "f32")], ["f16"], {attr: mode}, attr, mode)
    with np.errstate(over="ignore"):  # numpy's f16 cast of 70000 overflows to inf, as it should
        _check_f16_rounding(x, out, mode)


def _check_f16_rounding(x, out, mode):
    for value, got in zip(x, out):
        exact = Fraction(float(value))
        candidates = sorted({float(np.float16(value)),
                             float(np.nextafter(np.float16(value), np.float16(np.inf))),
                             float(np.nextafter(np.float16(value), np.float16(-np.inf)))})
        finite = [c for c in candidates if math.isfinite(c)]
        low = max((c for c in finite if Fraction(c) <= exact), default=-math.inf)
        high = min((c for c in finite if Fraction(c) >= exact), default=math.inf)
        if mode is RoundingMode.NEAREST_EVEN:
            assert float(got) == float(np.float16(value))  # numpy's cast rounds to nearest even
        elif mode is RoundingMode.ZERO:
            assert float(got) == (low if value > 0 else high) or abs(float(got)) == 65504.0
        elif mode is RoundingMode.NEGATIVE_INF:
            assert float(got) == low or (math.isinf(high) and float(got) == 65504.0)
        elif mode is RoundingMode.POSITIVE_INF:
            assert float(got) == high
        elif mode is RoundingMode.NEAREST_AWAY:
            tie = Fraction(low) + Fraction(high) == 2 * exact if math.isfinite(high) else False
            if tie:
                assert abs(float(got)) == max(abs(low), abs(high))
            else:
                assert float(got) == float(np.float16(value))


@case(("itof", "rounding_mode"), ("itof", "signedness"))
def _itof(mnemonic, attr, value):
    x = np.array([0, 1, -1, 2 ** 24 + 1, -(2 ** 24 + 3), 2 ** 31 - 1, -2 ** 31, 12345], np.int32)
    attrs = {"signedness": Signedness.SIGNED, "rounding_mode": RoundingMode.NEAREST_EVEN}
    attrs[attr] = value
    (out,) = apply("itof", [(x, "i32")], ["f32"], attrs, attr, value)
    ints = x.astype(np.int64) if attrs["signedness"] is Signedness.SIGNED else \
        x.view(np.uint32).astype(np.int64)
    mode = attrs["rounding_mode"]
    expected = [_round_fraction(Fraction(int(v)), mode) for v in ints]
    np.testing.assert_array_equal(out, np.array(expected, np.float32))


@case(("ftoi", "rounding_mode"), ("ftoi", "signedness"))
def _ftoi(mnemonic, attr, value):
    x = np.array([2.5, -2.5, 3.7, -3.2, 1e10, -1e10, np.nan, 0.5, 3e9, -0.7], np.float32)
    attrs = {"signedness": Signedness.SIGNED, "rounding_mode": RoundingMode.NEAREST_INT_TO_ZERO,
             "saturating": True}
    attrs[attr] = value
    (out,) = apply("ftoi", [(x, "f32")], ["i32"], attrs, attr, value)
    fn = {RoundingMode.NEAREST_INT_TO_ZERO: math.trunc, RoundingMode.ZERO: math.trunc,
          RoundingMode.NEAREST_EVEN: round, RoundingMode.NEGATIVE_INF: math.floor,
          RoundingMode.POSITIVE_INF: math.ceil,
          RoundingMode.NEAREST_AWAY: lambda v: int(math.copysign(math.floor(abs(v) + 0.5), v))}
    signed = attrs["signedness"] is Signedness.SIGNED
    low, high = (-2 ** 31, 2 ** 31 - 1) if signed else (0, 2 ** 32 - 1)
    expected = [0 if math.isnan(v) else max(low, min(high, fn[attrs["rounding_mode"]](float(v))))
                for v in x]
    got = out.astype(np.int64) if signed else out.view(np.uint32).astype(np.int64)
    np.testing.assert_array_equal(got, expected)


@case(("exti", "signedness"))
def _exti(mnemonic, attr, value):
    x = np.array([0, 1, -1, 127, -128, 77], np.int8)
    (out,) = apply("exti", [(x, "i8")], ["i32"], {attr: value}, attr, value)
    expected = x.astype(np.int32) if value is Signedness.SIGNED else \
        x.view(np.uint8).astype(np.int32)
    np.testing.assert_array_equal(out, expected)


# --------------------------------------------------------------------------------- integers

def _wrap32(values):
    return np.array([((int(v) + 2 ** 31) % 2 ** 32) - 2 ** 31 for v in values], np.int32)


_INT_BINARY = {"addi": lambda a, b: a + b, "subi": lambda a, b: a - b,
               "muli": lambda a, b: a * b, "shli": lambda a, b: a << b}


@case(("addi", "overflow"), ("subi", "overflow"), ("muli", "overflow"), ("shli", "overflow"),
      ("negi", "overflow"))
def _overflow_flags(mnemonic, attr, flag):
    """The flags promise no overflow; on inputs that keep the promise the result is exact, and
    without a promise (none) overflowing results wrap."""
    small_a = np.array([3, 100, 7, 0, 12], np.int32)
    small_b = np.array([4, 5, 2, 9, 3], np.int32)
    wide = flag is IntegerOverflow.NONE
    a = np.concatenate([small_a, [2 ** 31 - 1, -2 ** 31, 65536]]).astype(np.int32) if wide \
        else small_a
    b = np.concatenate([small_b, [1, 1, 65536 if mnemonic != "shli" else 16]]).astype(np.int32) \
        if wide else small_b
    if mnemonic == "negi":
        (out,) = apply("negi", [(a, "i32")], ["i32"], {attr: flag}, attr, flag)
        np.testing.assert_array_equal(out, _wrap32(-a.astype(np.int64)))
        return
    (out,) = apply(mnemonic, [(a, "i32"), (b, "i32")], ["i32"], {attr: flag}, attr, flag)
    fn = _INT_BINARY[mnemonic]
    np.testing.assert_array_equal(out, _wrap32([fn(int(x), int(y)) for x, y in zip(a, b)]))


@case(("trunci", "overflow"))
def _trunci(mnemonic, attr, flag):
    keeps = {IntegerOverflow.NONE: [5, -3, 70000, -70000, 255],
             IntegerOverflow.NO_SIGNED_WRAP: [5, -3, 127, -128, 0],
             IntegerOverflow.NO_UNSIGNED_WRAP: [5, 200, 255, 0, 1],
             IntegerOverflow.NO_WRAP: [5, 0, 127, 1, 100]}[flag]
    x = np.array(keeps, np.int32)
    (out,) = apply("trunci", [(x, "i32")], ["i8"], {attr: flag}, attr, flag)
    np.testing.assert_array_equal(out, (x & 0xFF).astype(np.uint8).view(np.int8))


def _as(values, signedness):
    return values.astype(np.int64) if signedness is Signedness.SIGNED else \
        values.view(np.uint32).astype(np.int64)


@case(("divi", "signedness"), ("divi", "rounding"))
def _divi(mnemonic, attr, value):
    a = np.array([7, -7, 7, -7, 6, 0, -1, 2 ** 31 - 1], np.int32)
    b = np.array([2, 2, -2, -2, 3, 5, 3, -7], np.int32)
    attrs = {"signedness": Signedness.SIGNED, "rounding": RoundingMode.ZERO}
    attrs[attr] = value
    (out,) = apply("divi", [(a, "i32"), (b, "i32")], ["i32"], attrs, attr, value)
    sign = attrs["signedness"]
    fn = {RoundingMode.ZERO: lambda q: math.trunc(q), RoundingMode.NEGATIVE_INF: math.floor,
          RoundingMode.POSITIVE_INF: math.ceil}[attrs["rounding"]]
    expected = [fn(Fraction(int(x), int(y))) for x, y in zip(_as(a, sign), _as(b, sign))]
    np.testing.assert_array_equal(_as(out, sign), expected)


@case(("remi", "signedness"))
def _remi(mnemonic, attr, sign):
    a = np.array([7, -7, 7, -7, 6, -1], np.int32)
    b = np.array([2, 2, -2, -2, 4, 3], np.int32)
    (out,) = apply("remi", [(a, "i32"), (b, "i32")], ["i32"], {attr: sign}, attr, sign)
    expected = [int(math.fmod(int(x), int(y))) for x, y in zip(_as(a, sign), _as(b, sign))]
    np.testing.assert_array_equal(_as(out, sign), expected)


@case(("maxi", "signedness"), ("mini", "signedness"))
def _maxi_mini(mnemonic, attr, sign):
    a = np.array([-1, 5, -7, 0], np.int32)
    b = np.array([1, -5, 3, 0], np.int32)
    (out,) = apply(mnemonic, [(a, "i32"), (b, "i32")], ["i32"], {attr: sign}, attr, sign)
    pick = max if mnemonic == "maxi" else min
    np.testing.assert_array_equal(_as(out, sign),
                                  [pick(x, y) for x, y in zip(_as(a, sign), _as(b, sign))])


@case(("shri", "signedness"))
def _shri(mnemonic, attr, sign):
    a = np.array([-16, 16, -1, 2 ** 30], np.int32)
    b = np.array([2, 3, 31, 4], np.int32)
    (out,) = apply("shri", [(a, "i32"), (b, "i32")], ["i32"], {attr: sign}, attr, sign)
    np.testing.assert_array_equal(_as(out, sign),
                                  [int(x) >> int(y) for x, y in zip(_as(a, sign), b)])


@case(("cmpi", "comparison_predicate"), ("cmpi", "signedness"))
def _cmpi(mnemonic, attr, value):
    a = np.array([-1, 1, 5, -7, 0], np.int32)
    b = np.array([1, 1, -5, -7, 3], np.int32)
    others = {"comparison_predicate": list(ComparisonPredicate), "signedness": list(Signedness)}
    other_attr = "signedness" if attr == "comparison_predicate" else "comparison_predicate"
    for other in others[other_attr]:
        attrs = {attr: value, other_attr: other}
        (out,) = apply("cmpi", [(a, "i32"), (b, "i32")], ["i1"], attrs, attr, value)
        sign, predicate = attrs["signedness"], attrs["comparison_predicate"]
        compare = _PYTHON_COMPARE[predicate.keyword]
        np.testing.assert_array_equal(
            out, [compare(x, y) for x, y in zip(_as(a, sign), _as(b, sign))])


_PYTHON_COMPARE = {"equal": lambda x, y: x == y, "not_equal": lambda x, y: x != y,
                   "less_than": lambda x, y: x < y, "less_than_or_equal": lambda x, y: x <= y,
                   "greater_than": lambda x, y: x > y,
                   "greater_than_or_equal": lambda x, y: x >= y}


@case(("cmpf", "comparison_predicate"), ("cmpf", "comparison_ordering"))
def _cmpf(mnemonic, attr, value):
    a = np.array([1.0, 2.0, np.nan, 3.0, np.nan, -0.0, np.inf], np.float32)
    b = np.array([2.0, 2.0, 1.0, 1.0, np.nan, 0.0, np.inf], np.float32)
    others = {"comparison_predicate": list(ComparisonPredicate),
              "comparison_ordering": list(ComparisonOrdering)}
    other_attr = "comparison_ordering" if attr == "comparison_predicate" else \
        "comparison_predicate"
    for other in others[other_attr]:
        attrs = {attr: value, other_attr: other}
        (out,) = apply("cmpf", [(a, "f32"), (b, "f32")], ["i1"], attrs, attr, value)
        unordered = attrs["comparison_ordering"] is ComparisonOrdering.UNORDERED
        compare = _PYTHON_COMPARE[attrs["comparison_predicate"].keyword]
        expected = [unordered if math.isnan(x) or math.isnan(y) else compare(float(x), float(y))
                    for x, y in zip(a, b)]
        np.testing.assert_array_equal(out, expected)


@case(("mmai", "signedness_lhs"), ("mmai", "signedness_rhs"))
def _mmai(mnemonic, attr, value):
    lhs = RNG.integers(-128, 128, (4, 8)).astype(np.int8)
    rhs = RNG.integers(-128, 128, (8, 4)).astype(np.int8)
    acc = RNG.integers(-1000, 1000, (4, 4)).astype(np.int32)
    other = "signedness_rhs" if attr == "signedness_lhs" else "signedness_lhs"
    for other_value in Signedness:
        attrs = {attr: value, other: other_value}
        (out,) = apply("mmai", [(lhs, "i8"), (rhs, "i8"), (acc, "i32")], ["i32"], attrs, attr,
                       value, result_shape=(4, 4))
        read = {Signedness.SIGNED: lambda v: v.astype(np.int64),
                Signedness.UNSIGNED: lambda v: v.view(np.uint8).astype(np.int64)}
        expected = read[attrs["signedness_lhs"]](lhs) @ read[attrs["signedness_rhs"]](rhs) + acc
        np.testing.assert_array_equal(out, _wrap32(expected.reshape(-1)).reshape(4, 4))


# ---------------------------------------------------------------- memory orderings and scopes

def _ordering_attrs(attr, value, op_name):
    """An op's ordering/scope attributes with `attr` set to `value`: atomics default to relaxed
    device scope; plain loads and stores to weak (which takes no scope)."""
    atomic = op_name.startswith("atomic")
    attrs = {"memory_ordering_semantics": MemoryOrderingSemantics.RELAXED if atomic or
             attr == "memory_scope" else WEAK}
    attrs[attr] = value
    if atomic or attrs["memory_ordering_semantics"] is not WEAK:  # weak loads take no scope
        attrs.setdefault("memory_scope", MemoryScope.DEVICE)
    return attrs


def _pointer_tile(b, pointer, element, count):
    """count consecutive pointers starting at `pointer` (reshape, broadcast, offset by iota)."""
    ptype = PointerType(ELEMENT_TYPES[element])
    one = b.op("reshape", [pointer], [tile((1,), ptype)])
    many = b.op("broadcast", [one], [tile((count,), ptype)])
    index = b.op("iota", [], [tile((count,), I32)])
    return b.op("offset", [many, index], [tile((count,), ptype)])


def _pointer_module(body):
    """entry(src: ptr<f32>, dst: ptr<f32>) with `body(b, src, dst)` building the ops."""
    module = Module(version=tilebc.Version(13, 5))
    f32ptr = scalar(PointerType(ELEMENT_TYPES["f32"]))
    b = new_function(module, "k", [f32ptr, f32ptr])
    body(b, *b.block.args)
    b.op("return", [[]])
    return module


@case(("load_ptr_tko", "memory_ordering_semantics"), ("load_ptr_tko", "memory_scope"),
      ("store_ptr_tko", "memory_ordering_semantics"), ("store_ptr_tko", "memory_scope"))
def _pointer_load_store_orderings(mnemonic, attr, value):
    f32x8 = tile((8,), ELEMENT_TYPES["f32"])
    load_attrs = _ordering_attrs(attr, value, mnemonic) if mnemonic == "load_ptr_tko" else \
        {"memory_ordering_semantics": WEAK}
    store_attrs = _ordering_attrs(attr, value, mnemonic) if mnemonic == "store_ptr_tko" else \
        {"memory_ordering_semantics": WEAK}

    def body(b, src, dst):
        loaded, _ = b.op("load_ptr_tko", [_pointer_tile(b, src, "f32", 8), None, None, None],
                         [f32x8, token], load_attrs)
        b.op("store_ptr_tko", [_pointer_tile(b, dst, "f32", 8), loaded, None, None], [token],
             store_attrs)
    module = build(_pointer_module(body), attr, value)
    src, dst = RNG.standard_normal(8).astype(np.float32), np.zeros(8, np.float32)
    run(module, "k", (1,), Pointer(src), Pointer(dst))
    np.testing.assert_array_equal(dst, src)


def _view_module(body, shape=(4, 8), element="f32"):
    """entry(src, dst) with one static partition view over each (tile = whole array)."""
    module = Module(version=tilebc.Version(13, 5))
    el = ELEMENT_TYPES[element]
    b = new_function(module, "k", [scalar(PointerType(el))] * 2)
    strides = tuple(int(np.prod(shape[d + 1:])) for d in range(len(shape)))
    view_type = TensorViewType(el, shape, strides)
    views = []
    for pointer in b.block.args:
        tensor = b.op("make_tensor_view", [pointer, [], []], [view_type])
        views.append(b.op("make_partition_view", [tensor],
                          [PartitionViewType(shape, view_type, tuple(range(len(shape))))]))
    zeros = [_constant(b, 0) for _ in shape]
    body(b, views, zeros, tile(shape, el))
    b.op("return", [[]])
    return module


def _constant(b, value, element="i32"):
    el = ELEMENT_TYPES[element]
    dtype = memory_dtype(el)
    return b.op("constant", [], [scalar(el)],
                {"value": DenseElementsAttr(scalar(el), np.asarray(value, dtype).tobytes())})


@case(("load_view_tko", "memory_ordering_semantics"), ("load_view_tko", "memory_scope"),
      ("store_view_tko", "memory_ordering_semantics"), ("store_view_tko", "memory_scope"))
def _view_load_store_orderings(mnemonic, attr, value):
    load_attrs = _ordering_attrs(attr, value, mnemonic) if mnemonic == "load_view_tko" else \
        {"memory_ordering_semantics": WEAK}
    store_attrs = _ordering_attrs(attr, value, mnemonic) if mnemonic == "store_view_tko" else \
        {"memory_ordering_semantics": WEAK}

    def body(b, views, zeros, tile_type):
        loaded, _ = b.op("load_view_tko", [views[0], zeros, None], [tile_type, token], load_attrs)
        b.op("store_view_tko", [loaded, views[1], zeros, None], [token], store_attrs)
    module = build(_view_module(body), attr, value)
    src, dst = RNG.standard_normal((4, 8)).astype(np.float32), np.zeros((4, 8), np.float32)
    run(module, "k", (1,), Pointer(src), Pointer(dst))
    np.testing.assert_array_equal(dst, src)


# ------------------------------------------------------------------------------------ atomics

ATOMIC_ELEMENTS = ["i32", "i64", "f32", "f16", "bf16", "f64"]


def _atomic_reference(mode, old, value):
    """The new memory value, computed on Python numbers (integers read per the mode's sign)."""
    if mode is AtomicRMWMode.XCHG:
        return value
    if mode in (AtomicRMWMode.ADD, AtomicRMWMode.ADDF):
        return old + value
    if mode in (AtomicRMWMode.MAX, AtomicRMWMode.UMAX):
        return max(old, value)
    if mode in (AtomicRMWMode.MIN, AtomicRMWMode.UMIN):
        return min(old, value)
    return {AtomicRMWMode.AND: old & value, AtomicRMWMode.OR: old | value,
            AtomicRMWMode.XOR: old ^ value}[mode]


def _atomic_inputs(element, count):
    dtype = memory_dtype(ELEMENT_TYPES[element])
    if dtype.kind == "i":
        info = np.iinfo(dtype)
        values = RNG.integers(info.min // 4, info.max // 4, count, dtype=np.int64)
        return values.astype(dtype)
    return (RNG.standard_normal(count) * 4).astype(dtype)


def _python_numbers(array, mode):
    if array.dtype.kind == "i":
        unsigned = mode in (AtomicRMWMode.UMAX, AtomicRMWMode.UMIN)
        bits = array.dtype.itemsize * 8
        return [int(v) % (1 << bits) if unsigned else int(v) for v in array]
    return [Fraction(float(v)) for v in array]


def _atomic_check(mode, element, old_memory, operand, new_memory, returned=None):
    dtype = old_memory.dtype
    expected = []
    for old, value in zip(_python_numbers(old_memory, mode), _python_numbers(operand, mode)):
        result = _atomic_reference(mode, old, value)
        if isinstance(result, Fraction):
            expected.append(np.asarray(float(result)).astype(dtype))  # rounded once
        else:
            bits = dtype.itemsize * 8
            expected.append(np.asarray(((result + (1 << (bits - 1))) % (1 << bits))
                                       - (1 << (bits - 1))).astype(dtype))
    np.testing.assert_array_equal(new_memory, np.array(expected, dtype))
    if returned is not None:
        np.testing.assert_array_equal(returned, old_memory)


@case(("atomic_rmw_tko", "mode"), ("atomic_rmw_tko", "memory_ordering_semantics"),
      ("atomic_rmw_tko", "memory_scope"))
def _atomic_rmw(mnemonic, attr, value):
    """Every mode on every element type (the verifier says which pairs exist); orderings and scopes
    on an i32 add. Returns whether any variant ran."""
    variants = [(value, e) for e in ATOMIC_ELEMENTS] if attr == "mode" else \
        [(AtomicRMWMode.ADD, "i32")]
    ran = False
    for mode, element in variants:
        attrs = _ordering_attrs("mode", mode, mnemonic)
        attrs[attr] = value
        el = ELEMENT_TYPES[element]
        count = 8
        module = Module(version=tilebc.Version(13, 5))
        b = new_function(module, "k", [scalar(PointerType(el))] * 3)
        memory, operand, returned = b.block.args
        operand_tile = b.op("load_ptr_tko", [_pointer_tile(b, operand, element, count), None,
                                             None, None], [tile((count,), el), token],
                            {"memory_ordering_semantics": WEAK})[0]
        old, _ = b.op("atomic_rmw_tko", [_pointer_tile(b, memory, element, count), operand_tile,
                                         None, None], [tile((count,), el), token], attrs)
        b.op("store_ptr_tko", [_pointer_tile(b, returned, element, count), old, None, None],
             [token], {"memory_ordering_semantics": WEAK})
        b.op("return", [[]])
        try:
            build(module, attr, value) if attr != "mode" else build(module, "mode", mode)
        except Rejected:
            continue
        start = _atomic_inputs(element, count)
        memory_array, operands = start.copy(), _atomic_inputs(element, count)
        out = np.zeros_like(start)
        run(module, "k", (1,), Pointer(memory_array), Pointer(operands), Pointer(out))
        _atomic_check(mode, element, start, operands, memory_array, out)
        ran = True
    if not ran:
        raise Rejected(f"{attr}={value.keyword}: no element type accepts it")


@case(("atomic_cas_tko", "memory_ordering_semantics"), ("atomic_cas_tko", "memory_scope"))
def _atomic_cas(mnemonic, attr, value):
    attrs = _ordering_attrs(attr, value, mnemonic)
    el = ELEMENT_TYPES["i32"]
    module = Module(version=tilebc.Version(13, 5))
    b = new_function(module, "k", [scalar(PointerType(el))] * 2)
    memory, returned = b.block.args
    seven = b.op("broadcast", [b.op("reshape", [_constant(b, 7)], [tile((1,), el)])],
                 [tile((8,), el)])
    nine = b.op("broadcast", [b.op("reshape", [_constant(b, 9)], [tile((1,), el)])],
                [tile((8,), el)])
    old, _ = b.op("atomic_cas_tko", [_pointer_tile(b, memory, "i32", 8), seven, nine, None, None],
                  [tile((8,), el), token], attrs)
    b.op("store_ptr_tko", [_pointer_tile(b, returned, "i32", 8), old, None, None], [token],
         {"memory_ordering_semantics": WEAK})
    b.op("return", [[]])
    build(module, attr, value)
    start = np.array([7, 1, 7, 7, 0, -7, 7, 8], np.int32)
    memory_array, out = start.copy(), np.zeros(8, np.int32)
    run(module, "k", (1,), Pointer(memory_array), Pointer(out))
    np.testing.assert_array_equal(memory_array, np.where(start == 7, 9, start))
    np.testing.assert_array_equal(out, start)


@case(("atomic_red_view_tko", "mode"), ("atomic_red_view_tko", "memory_ordering_semantics"),
      ("atomic_red_view_tko", "memory_scope"))
def _atomic_red_view(mnemonic, attr, value):
    variants = [(value, e) for e in ATOMIC_ELEMENTS] if attr == "mode" else \
        [(AtomicRMWMode.ADD, "i32")]
    ran = False
    for mode, element in variants:
        attrs = _ordering_attrs("mode", mode, mnemonic)
        attrs[attr] = value

        def body(b, views, zeros, tile_type):
            loaded, _ = b.op("load_view_tko", [views[1], zeros, None], [tile_type, token],
                             {"memory_ordering_semantics": WEAK})
            b.op("atomic_red_view_tko", [views[0], zeros, loaded, None], [token], attrs)
        module = _view_module(body, shape=(8,), element=element)
        try:
            build(module, attr, value) if attr != "mode" else build(module, "mode", mode)
        except Rejected:
            continue
        start = _atomic_inputs(element, 8)
        memory_array, operands = start.copy(), _atomic_inputs(element, 8)
        run(module, "k", (1,), Pointer(memory_array), Pointer(operands))
        _atomic_check(mode, element, start, operands, memory_array)
        ran = True
    if not ran:
        raise Rejected(f"{attr}={value.keyword}: no element type accepts it")


# ------------------------------------------------------------------------------------ multimem

@case(("multimem_load_reduce_view_tko", "reduction"),
      ("multimem_load_reduce_view_tko", "memory_ordering_semantics"),
      ("multimem_load_reduce_view_tko", "memory_scope"),
      ("multimem_reduce_view_tko", "reduction"),
      ("multimem_reduce_view_tko", "memory_ordering_semantics"),
      ("multimem_reduce_view_tko", "memory_scope"),
      ("multimem_store_view_tko", "memory_ordering_semantics"),
      ("multimem_store_view_tko", "memory_scope"))
def _multimem(mnemonic, attr, value):
    """multimem ops have no single-device meaning: refused with the reason, whatever the value."""
    from handbuilt import multimem_ops
    module, _ = multimem_ops()
    function = module.functions[0]
    ops = [op for op in function.walk() if op.name == mnemonic]
    assert ops, f"handbuilt.multimem_ops has no {mnemonic}"
    for op in ops:
        op.attrs[attr] = value
    first = next(op for op in function.walk() if op.name.startswith("multimem"))
    with pytest.raises(UnsupportedError, match=f"{first.name} is not supported.*multicast"):
        run(module, function.name, (1,), Pointer(np.zeros(64, np.float32)))


# ------------------------------------------------------------------------------ the matrix

# (op, attribute) pairs with no case here, and why.
EXCEPTIONS = {}


def _table_enum_attributes():
    return [(spec.mnemonic, attr.name, attr.enum) for spec in BODY_OPS for attr in spec.attrs
            if attr.enum is not None]


def test_every_enum_attribute_has_a_case():
    missing = [(op, attr) for op, attr, _ in _table_enum_attributes()
               if (op, attr) not in CASES and (op, attr) not in EXCEPTIONS]
    assert not missing, f"enum attributes with no interpreter test: {missing}"
    stale = [key for key in list(CASES) + list(EXCEPTIONS)
             if key not in {(op, attr) for op, attr, _ in _table_enum_attributes()}]
    assert not stale, f"cases for attributes the table does not have: {stale}"


@pytest.mark.parametrize("mnemonic,attr,enum",
                         [pytest.param(*row, id=f"{row[0]}-{row[1]}")
                          for row in _table_enum_attributes()])
def test_every_enum_attribute_value(mnemonic, attr, enum):
    if (mnemonic, attr) in EXCEPTIONS:
        pytest.skip(EXCEPTIONS[(mnemonic, attr)])
    ran, rejected = [], []
    for value in enum:
        try:
            CASES[(mnemonic, attr)](mnemonic, attr, value)
            ran.append(value.keyword)
        except Rejected:
            rejected.append(value.keyword)
    assert ran, f"every value of {mnemonic} {attr} was rejected by the verifier: {rejected}"



