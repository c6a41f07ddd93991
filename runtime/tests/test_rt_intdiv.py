"""Division by compile-time constants (lowering/intdiv.py): the plans are exact for every dividend
and divisor at 8 bits (the derivation does not depend on the width), and divi/remi by constants
lowered to multiply-high and shifts agree bit for bit with the interpreter on the emulator for
many divisors and dividends (edge values, multiples of the divisor and their neighbours, random),
i32 and i64, signed and unsigned, every divi rounding mode, on every arch the JIT emits for.
The PTX holds no div/rem instruction for them."""
import numpy as np
import pytest

from tilebc.interp import run as interpret
from tilebc.ir import PointerType, i32, i64, scalar
from tilebc.ir.builder import new_function, new_module
from tilebc.ops.enums import RoundingMode, Signedness

from tilebc_runtime import sim
from tilebc_runtime.compiler import compile as jit_compile
from tilebc_runtime.lowering.intdiv import signed_plan, unsigned_plan

TILE = 256
ARCHS = ("sm_80", "sm_90", "sm_100", "sm_120")


def _trunc_div(x: int, d: int) -> int:
    q = abs(x) // abs(d)
    return q if (x < 0) == (d < 0) else -q


def test_unsigned_plans_exact_for_every_8_bit_dividend_and_divisor():
    for divisor in range(1, 256):
        plan = unsigned_plan(divisor, 8)
        assert [plan.evaluate(x, 8) for x in range(256)] == [x // divisor for x in range(256)]


def test_bounded_unsigned_plans_exact_below_their_bound():
    for bound in (5, 63, 100, 200, 255):
        for divisor in range(1, 256):
            plan = unsigned_plan(divisor, 8, bound)
            assert all(plan.evaluate(x, 8) == x // divisor for x in range(bound + 1))


def test_signed_plans_exact_for_every_8_bit_dividend_and_divisor():
    for divisor in range(-128, 128):
        if divisor == 0:
            continue
        plan = signed_plan(divisor, 8)
        for x in range(-128, 128):
            if x == -128 and divisor == -1:
                continue  # overflow: undefined in Tile IR
            assert plan.evaluate(x, 8) == _trunc_div(x, divisor), (divisor, x)


def test_plans_need_no_wider_multiplier_for_common_divisors():
    # the 33-bit fix-up is only for odd divisors whose magic needs it (7 is the classic one)
    assert unsigned_plan(7, 32).add
    assert not unsigned_plan(3, 32).add and not unsigned_plan(14, 32).add
    assert unsigned_plan(14, 32).pre_shift == 1
    assert unsigned_plan(8, 32).multiplier == 0  # a shift


# -- on the emulator ---------------------------------------------------------------------------
DIVISORS = {
    "signed": [1, -1, 2, -2, 3, -3, 5, 6, 7, -7, 8, -8, 10, 12, 14, 25, 100, -100, 125, 641,
               1000, 4096, 65537, 1 << 20, -(1 << 20), 0x7FFFFFFF, -0x7FFFFFFF, -(1 << 31)],
    "unsigned": [1, 2, 3, 5, 6, 7, 8, 10, 12, 14, 25, 100, 125, 641, 1000, 4096, 65537,
                 0x7FFFFFFF, 1 << 31, 0x80000001, 0xFFFFFFFE, 0xFFFFFFFF],
}
WIDE = {"signed": [(1 << 32) + 1, 3 << 40, -(10 ** 12) - 7, -(1 << 63), (1 << 63) - 1],
        "unsigned": [(1 << 32) + 1, 10 ** 12 + 7, (1 << 63), (1 << 64) - 1, (1 << 63) + 3]}
OPS = {"signed": [("divi", RoundingMode.ZERO), ("divi", RoundingMode.NEGATIVE_INF),
                  ("divi", RoundingMode.POSITIVE_INF), ("remi", None)],
       "unsigned": [("divi", RoundingMode.ZERO), ("divi", RoundingMode.POSITIVE_INF),
                    ("remi", None)]}  # unsigned floor division is rejected (it is zero's)


def _divisors(element, signedness):
    values = list(DIVISORS[signedness])
    if element is i64:
        values += WIDE[signedness]
    return values


def _dividends(element, signedness, divisors, rng):
    bits = 64 if element is i64 else 32
    low, high = (0, (1 << bits) - 1) if signedness == "unsigned" else \
        (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    values = {0, 1, 2, 3, low, low + 1, high, high - 1, high // 2, high // 2 + 1}
    for divisor in divisors:
        for base in (divisor, high // divisor * divisor, low // divisor * divisor if low else 0):
            values.update(base + delta for delta in (-1, 0, 1))
    values = sorted(v for v in values if low <= v <= high)
    rng.shuffle(values)
    while len(values) % TILE:
        values.append(int(rng.integers(low, high, endpoint=True, dtype=np.int64 if
                                       signedness == "signed" or bits == 32 else np.uint64)))
    dtype = {(32, "signed"): np.int32, (32, "unsigned"): np.uint32,
             (64, "signed"): np.int64, (64, "unsigned"): np.uint64}[bits, signedness]
    return np.array(values, dtype=dtype)


def _kernel(element, signedness, divisors):
    """out[j, :] = op_j(x, constant divisor_j) for every (divisor, op) pair j."""
    module = new_module("13.5")
    sign = Signedness.UNSIGNED if signedness == "unsigned" else Signedness.SIGNED
    params = [scalar(PointerType(element)), scalar(i32), scalar(i32),
              scalar(PointerType(element))] + [scalar(i32)] * 4
    b = new_function(module, "divide_by_constants", params)
    x_ptr, x_len, x_stride, out_ptr, rows, cols, row_stride, col_stride = b.args
    token = b.make_token()
    bid = b.get_tile_block_id()[0]
    x_tiles = b.partition_view(b.tensor_view(x_ptr, [x_len], [x_stride]), (TILE,))
    out_tiles = b.partition_view(b.tensor_view(out_ptr, [rows, cols], [row_stride, col_stride]),
                                 (1, TILE))
    x, _ = b.load(x_tiles, [bid], token=token)
    row = 0
    for divisor in divisors:
        raw = divisor if signedness == "signed" else divisor - (1 << 64 if divisor >> 63 else 0)
        if element is i32 and signedness == "unsigned":
            raw = divisor - (1 << 32) if divisor >> 31 else divisor
        constant = b.constant(raw, element, (TILE,))
        for name, rounding in OPS[signedness]:
            attrs = {"signedness": sign}
            if rounding is not None:
                attrs["rounding"] = rounding
            result = getattr(b, name)(x, constant, **attrs)
            token = b.store(b.reshape(result, (1, TILE)), out_tiles,
                            [b.constant(row, "i32"), bid], token=token)
            row += 1
    b.return_([])
    return module


def _expected(x, divisor, name, rounding, dtype):
    out = []
    for value in (int(v) for v in x):
        q = _trunc_div(value, divisor)
        r = value - q * divisor
        if name == "remi":
            out.append(r)
            continue
        if r and rounding is RoundingMode.NEGATIVE_INF and (r < 0) != (divisor < 0):
            q -= 1
        if r and rounding is RoundingMode.POSITIVE_INF and (r < 0) == (divisor < 0):
            q += 1
        out.append(q)
    return np.array(out, dtype=object).astype(dtype)


@pytest.mark.parametrize("element", [i32, i64], ids=["i32", "i64"])
@pytest.mark.parametrize("signedness", ["signed", "unsigned"])
def test_divide_by_constants_on_emulator_matches_interpreter(element, signedness):
    rng = np.random.default_rng(17)
    divisors = _divisors(element, signedness)
    x = _dividends(element, signedness, divisors, rng)
    if signedness == "signed":  # min / -1 overflows (undefined): keep it out of x
        bits = 64 if element is i64 else 32
        x[x == -(1 << (bits - 1))] = 5
    module = _kernel(element, signedness, divisors)
    rows = len(divisors) * len(OPS[signedness])
    grid = (len(x) // TILE,)
    reference = np.zeros((rows, len(x)), x.dtype)
    interpret(module, "divide_by_constants", grid, x, reference)
    for row, (divisor, (name, rounding)) in enumerate(
            (d, o) for d in divisors for o in OPS[signedness]):
        np.testing.assert_array_equal(reference[row], _expected(x, divisor, name, rounding,
                                                                x.dtype),
                                      err_msg=f"{name} {rounding} by {divisor}")
    for arch in ARCHS:
        ptx = jit_compile(module, entry="divide_by_constants", arch=arch, emit="ptx").ptx
        assert not [line for line in ptx.splitlines()
                    if line.strip().startswith(("div.", "rem."))], arch
        out = np.zeros_like(reference)
        sim.run(module, "divide_by_constants", grid, x, out, arch=arch)
        np.testing.assert_array_equal(out, reference, err_msg=arch)
