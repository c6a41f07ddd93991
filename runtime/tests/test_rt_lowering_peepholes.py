"""Cheaper code for common patterns, each checked on the PTX emulator against numpy and on the PTX:
gathers whose sources are known at compile time (constant shared addresses, vector reads,
immediate shuffle lanes), selects decided by an enclosing comparison, unused loads dropped,
small constant-trip loops unrolled, i64 arithmetic on values widened from 32 bits done in 32
bits, 1 / x as a reciprocal, and atomics whose old values nobody reads as reductions."""
import re

import numpy as np
import pytest

import tilebc
from tilebc.text import parse_module

from tilebc_runtime import sim
from tilebc_runtime.compiler import compile


def _module(text):
    module = parse_module(text, "peephole.mlir")
    module.version = tilebc.Version(13, 5)
    return module


def _ptx(module, threads=128):
    return compile(module, arch="sm_90", emit="ptx", threads=threads).ptx


def _count(ptx, pattern):
    return len(re.findall(pattern, ptx))


# out[r, c] = x[r]: a loaded (not compile-time) column broadcast along the rows.
BROADCAST = """
entry @bcast(%px: tile<ptr<i32>>, %x0: tile<i32>, %x1: tile<i32>,
    %po: tile<ptr<i32>>, %o0: tile<i32>, %o1: tile<i32>, %o2: tile<i32>, %o3: tile<i32>) {
  %t0 = make_token : token
  %zero = constant <i32: 0> : tile<i32>
  %vx = make_tensor_view %px, shape = [ROWS], strides = [1] : tensor_view<ROWSxi32, strides=[1]>
  %qx = make_partition_view %vx : partition_view<tile=(ROWS), tensor_view<ROWSxi32, strides=[1]>>
  %x, %t1 = load_view_tko weak %qx[%zero] token = %t0 : partition_view<tile=(ROWS), tensor_view<ROWSxi32, strides=[1]>>, tile<i32> -> tile<ROWSxi32>, token
  %col = reshape %x : tile<ROWSxi32> -> tile<ROWSx1xi32>
  %b = broadcast %col : tile<ROWSx1xi32> -> tile<ROWSx128xi32>
  %vo = make_tensor_view %po, shape = [ROWS, 128], strides = [128, 1] : tensor_view<ROWSx128xi32, strides=[128,1]>
  %qo = make_partition_view %vo : partition_view<tile=(ROWSx128), tensor_view<ROWSx128xi32, strides=[128,1]>>
  %t2 = store_view_tko weak %b, %qo[%zero, %zero] token = %t1 : tile<ROWSx128xi32>, partition_view<tile=(ROWSx128), tensor_view<ROWSx128xi32, strides=[128,1]>>, tile<i32> -> token
  return
}
"""


@pytest.mark.parametrize("rows", [16, 64])
def test_broadcast_of_a_loaded_column_reads_each_element_once(rows):
    module = _module(BROADCAST.replace("ROWS", str(rows)))
    x = np.arange(rows, dtype=np.int32) * 7 - 100
    out = np.zeros((rows, 128), np.int32)
    sim.run(module, "bcast", (1,), x, out, threads=128)
    np.testing.assert_array_equal(out, np.broadcast_to(x[:, None], (rows, 128)))
    ptx = _ptx(module)
    if rows == 16:
        # a source whole in every warp: one shuffle per element, from an immediate lane
        assert _count(ptx, r"shfl\.sync\.idx\.b32 %r\d+, %r\d+, \d+,") == rows
        assert "ld.shared" not in ptx
    else:
        # every thread reads rows in the same order: 4 elements per ld.shared.v4, no others
        assert _count(ptx, r"ld\.shared\.v4") == rows // 4
        assert _count(ptx, r"ld\.shared") == rows // 4


# select(a != b, select(a == b, a + b, a), b) is a whatever a and b are; b is then not loaded.
SELECTS = """
entry @sel(%pa: tile<ptr<i32>>, %a0: tile<i32>, %a1: tile<i32>,
    %pb: tile<ptr<i32>>, %b0: tile<i32>, %b1: tile<i32>,
    %po: tile<ptr<i32>>, %o0: tile<i32>, %o1: tile<i32>) {
  %t0 = make_token : token
  %zero = constant <i32: 0> : tile<i32>
  %va = make_tensor_view %pa, shape = [64], strides = [1] : tensor_view<64xi32, strides=[1]>
  %vb = make_tensor_view %pb, shape = [64], strides = [1] : tensor_view<64xi32, strides=[1]>
  %vo = make_tensor_view %po, shape = [64], strides = [1] : tensor_view<64xi32, strides=[1]>
  %qa = make_partition_view %va : partition_view<tile=(64), tensor_view<64xi32, strides=[1]>>
  %qb = make_partition_view %vb : partition_view<tile=(64), tensor_view<64xi32, strides=[1]>>
  %qo = make_partition_view %vo : partition_view<tile=(64), tensor_view<64xi32, strides=[1]>>
  %a, %ta = load_view_tko weak %qa[%zero] token = %t0 : partition_view<tile=(64), tensor_view<64xi32, strides=[1]>>, tile<i32> -> tile<64xi32>, token
  %b, %tb = load_view_tko weak %qb[%zero] token = %t0 : partition_view<tile=(64), tensor_view<64xi32, strides=[1]>>, tile<i32> -> tile<64xi32>, token
  %eq = cmpi equal %a, %b, signed : tile<64xi32> -> tile<64xi1>
  %sum = addi %a, %b : tile<64xi32>
  %inner = select %eq, %sum, %a : tile<64xi1>, tile<64xi32>
  %ne = cmpi not_equal %b, %a, signed : tile<64xi32> -> tile<64xi1>
  %r = select %ne, %inner, %b : tile<64xi1>, tile<64xi32>
  %t1 = store_view_tko weak %r, %qo[%zero] token = %t0 : tile<64xi32>, partition_view<tile=(64), tensor_view<64xi32, strides=[1]>>, tile<i32> -> token
  return
}
"""


def test_selects_decided_by_their_comparison_fold_and_the_unused_load_goes():
    module = _module(SELECTS)
    a = np.arange(64, dtype=np.int32) % 5 - 2
    b = np.arange(64, dtype=np.int32) % 3 - 1       # equal to a in some lanes
    out = np.zeros(64, np.int32)
    sim.run(module, "sel", (1,), a, b, out)
    np.testing.assert_array_equal(out, a)
    ptx = _ptx(module)
    assert _count(ptx, r"\bld\.global") == 1
    assert "selp" not in ptx and "setp.eq" not in ptx and "setp.ne" not in ptx


def test_a_select_its_condition_does_not_decide_is_kept():
    text = SELECTS.replace("%ne = cmpi not_equal %b, %a, signed", "%ne = cmpi less_than %b, %a, signed")
    module = _module(text)
    a = np.arange(64, dtype=np.int32) % 5 - 2
    b = np.arange(64, dtype=np.int32) % 3 - 1
    out = np.zeros(64, np.int32)
    sim.run(module, "sel", (1,), a, b, out)
    # b < a excludes a == b, so the inner select is a there; elsewhere b
    np.testing.assert_array_equal(out, np.where(b < a, a, b))
    assert _count(_ptx(module), r"\bld\.global") == 2


# acc = x; for i in [0, TRIPS): acc = acc * 3 + i  (i32, wrapping)
LOOP = """
entry @loop(%px: tile<ptr<i32>>, %x0: tile<i32>, %x1: tile<i32>,
    %po: tile<ptr<i32>>, %o0: tile<i32>, %o1: tile<i32>) {
  %t0 = make_token : token
  %zero = constant <i32: 0> : tile<i32>
  %lo = constant <i32: 0> : tile<i32>
  %hi = constant <i32: TRIPS> : tile<i32>
  %step = constant <i32: 1> : tile<i32>
  %three = constant <i32: 3> : tile<32xi32>
  %vx = make_tensor_view %px, shape = [32], strides = [1] : tensor_view<32xi32, strides=[1]>
  %vo = make_tensor_view %po, shape = [32], strides = [1] : tensor_view<32xi32, strides=[1]>
  %qx = make_partition_view %vx : partition_view<tile=(32), tensor_view<32xi32, strides=[1]>>
  %qo = make_partition_view %vo : partition_view<tile=(32), tensor_view<32xi32, strides=[1]>>
  %x, %t1 = load_view_tko weak %qx[%zero] token = %t0 : partition_view<tile=(32), tensor_view<32xi32, strides=[1]>>, tile<i32> -> tile<32xi32>, token
  %r = for %i in (%lo to %hi, step %step) : tile<i32> iter_values(%acc = %x) -> (tile<32xi32>) {
    %i1 = reshape %i : tile<i32> -> tile<1xi32>
    %ib = broadcast %i1 : tile<1xi32> -> tile<32xi32>
    %m = muli %acc, %three : tile<32xi32>
    %n = addi %m, %ib : tile<32xi32>
    continue %n : tile<32xi32>
  }
  %t2 = store_view_tko weak %r, %qo[%zero] token = %t1 : tile<32xi32>, partition_view<tile=(32), tensor_view<32xi32, strides=[1]>>, tile<i32> -> token
  return
}
"""


@pytest.mark.parametrize("trips,unrolled", [(0, True), (3, True), (8, True), (9, False)])
def test_small_constant_trip_loops_are_unrolled(trips, unrolled):
    module = _module(LOOP.replace("TRIPS", str(trips)))
    x = (np.arange(32, dtype=np.int64) * 1234567 - 2**30).astype(np.int32)
    out = np.zeros(32, np.int32)
    sim.run(module, "loop", (1,), x, out, threads=32)
    want = x.astype(np.int64)
    for i in range(trips):
        want = (want * 3 + i) % 2**32
    np.testing.assert_array_equal(out, want.astype(np.uint32).view(np.int32))
    ptx = _ptx(module, threads=32)
    assert ("$L_for" not in ptx) == unrolled
    if unrolled:
        assert _count(ptx, r"mul\.lo\.s32") == trips


# out[i] = (x[i] as i64 * y[i] as i64 < lim as i64, unsigned) ? x * y : -1, through i64 pointers
WIDE = """
entry @wide(%px: tile<ptr<i32>>, %x0: tile<i32>, %x1: tile<i32>,
    %py: tile<ptr<i32>>, %y0: tile<i32>, %y1: tile<i32>,
    %po: tile<ptr<i64>>, %o0: tile<i32>, %o1: tile<i32>, %lim: tile<i32>) {
  %t0 = make_token : token
  %zero = constant <i32: 0> : tile<i32>
  %vx = make_tensor_view %px, shape = [32], strides = [1] : tensor_view<32xi32, strides=[1]>
  %vy = make_tensor_view %py, shape = [32], strides = [1] : tensor_view<32xi32, strides=[1]>
  %vo = make_tensor_view %po, shape = [32], strides = [1] : tensor_view<32xi64, strides=[1]>
  %qx = make_partition_view %vx : partition_view<tile=(32), tensor_view<32xi32, strides=[1]>>
  %qy = make_partition_view %vy : partition_view<tile=(32), tensor_view<32xi32, strides=[1]>>
  %qo = make_partition_view %vo : partition_view<tile=(32), tensor_view<32xi64, strides=[1]>>
  %x, %t1 = load_view_tko weak %qx[%zero] token = %t0 : partition_view<tile=(32), tensor_view<32xi32, strides=[1]>>, tile<i32> -> tile<32xi32>, token
  %y, %t2 = load_view_tko weak %qy[%zero] token = %t0 : partition_view<tile=(32), tensor_view<32xi32, strides=[1]>>, tile<i32> -> tile<32xi32>, token
  %xw = exti %x signed : tile<32xi32> -> tile<32xi64>
  %yw = exti %y signed : tile<32xi32> -> tile<32xi64>
  %p = muli %xw, %yw : tile<32xi64>
  %l1 = reshape %lim : tile<i32> -> tile<1xi32>
  %lb = broadcast %l1 : tile<1xi32> -> tile<32xi32>
  %lw = exti %lb signed : tile<32xi32> -> tile<32xi64>
  %ok = cmpi less_than %xw, %lw, unsigned : tile<32xi64> -> tile<32xi1>
  %m1 = constant <i64: -1> : tile<32xi64>
  %r = select %ok, %p, %m1 : tile<32xi1>, tile<32xi64>
  %t3 = store_view_tko weak %r, %qo[%zero] token = %t0 : tile<32xi64>, partition_view<tile=(32), tensor_view<32xi64, strides=[1]>>, tile<i32> -> token
  return
}
"""


def test_i64_products_and_compares_of_widened_i32_use_32_bit_instructions():
    module = _module(WIDE)
    x = np.array([2**31 - 1, -2**31, -1, 0, 1, 7, -7, 65536] * 4, np.int32)
    y = np.array([2**31 - 1, -2**31, 2**31 - 1, -5, -1, 3, 9, 65536] * 4, np.int32)
    out = np.zeros(32, np.int64)
    lim = np.int32(8)
    sim.run(module, "wide", (1,), x, y, out, lim)
    product = x.astype(np.int64) * y.astype(np.int64)
    # unsigned i64 order of sign-extended values: negatives are above every non-negative
    below = x.astype(np.int64).astype(np.uint64) < np.uint64(8)
    np.testing.assert_array_equal(out, np.where(below, product, -1))
    ptx = _ptx(module, threads=32)
    assert "mul.wide.s32" in ptx and "mul.lo.s64" not in ptx
    # the comparison of x with lim (the views' own bounds checks compare with their static extent)
    assert _count(ptx, r"setp\.lt\.u32 %p\d+, %r\d+, %r\d+") == 1


# out[r, c] = (c - 3 as i64 < lim as i64, unsigned) ? (c - 3) * lim : -1, c - 3 a folded i64
# iota broadcast over 2 rows
IOTA64 = """
entry @iota64(%po: tile<ptr<i64>>, %o0: tile<i32>, %o1: tile<i32>, %o2: tile<i32>, %o3: tile<i32>,
    %lim: tile<i32>) {
  %t0 = make_token : token
  %zero = constant <i32: 0> : tile<i32>
  %vo = make_tensor_view %po, shape = [2, 16], strides = [16, 1] : tensor_view<2x16xi64, strides=[16,1]>
  %qo = make_partition_view %vo : partition_view<tile=(2x16), tensor_view<2x16xi64, strides=[16,1]>>
  %i = iota : tile<16xi32>
  %iw = exti %i signed : tile<16xi32> -> tile<16xi64>
  %three = constant <i64: 3> : tile<16xi64>
  %x1 = subi %iw, %three : tile<16xi64>
  %x2 = reshape %x1 : tile<16xi64> -> tile<1x16xi64>
  %x = broadcast %x2 : tile<1x16xi64> -> tile<2x16xi64>
  %l1 = reshape %lim : tile<i32> -> tile<1x1xi32>
  %lb = broadcast %l1 : tile<1x1xi32> -> tile<2x16xi32>
  %lw = exti %lb signed : tile<2x16xi32> -> tile<2x16xi64>
  %ok = cmpi less_than %x, %lw, unsigned : tile<2x16xi64> -> tile<2x16xi1>
  %p = muli %x, %lw : tile<2x16xi64>
  %m1 = constant <i64: -1> : tile<2x16xi64>
  %r = select %ok, %p, %m1 : tile<2x16xi1>, tile<2x16xi64>
  %t1 = store_view_tko weak %r, %qo[%zero, %zero] token = %t0 : tile<2x16xi64>, partition_view<tile=(2x16), tensor_view<2x16xi64, strides=[16,1]>>, tile<i32> -> token
  return
}
"""


@pytest.mark.parametrize("lim", [20, -2**31, 2**31 - 1])
def test_i64_constant_tiles_that_fit_in_s32_are_computed_in_32_bits(lim):
    module = _module(IOTA64)
    out = np.zeros((2, 16), np.int64)
    sim.run(module, "iota64", (1,), out, np.int32(lim), threads=32)
    x = np.broadcast_to(np.arange(16, dtype=np.int64) - 3, (2, 16))
    below = x.astype(np.uint64) < np.int64(lim).astype(np.uint64)
    np.testing.assert_array_equal(out, np.where(below, x * lim, -1))
    ptx = _ptx(module, threads=32)
    # c - 3 is built in 32 bits and sign-extended once: its product and compare stay narrow
    assert "mul.lo.s64" not in ptx and "mul.wide.s32" in ptx
    assert _count(ptx, r"setp\.lt\.u32 %p\d+, %r\d+, %r\d+") == 1


# runtime divisors: floor / ceil / truncating divi and remi of the same operands
DIVS = """
entry @divs(%px: tile<ptr<SS>>, %x0: tile<i32>, %x1: tile<i32>,
    %py: tile<ptr<SS>>, %y0: tile<i32>, %y1: tile<i32>,
    %po: tile<ptr<SS>>, %o0: tile<i32>, %o1: tile<i32>, %o2: tile<i32>, %o3: tile<i32>) {
  %t0 = make_token : token
  %zero = constant <i32: 0> : tile<i32>
  %vx = make_tensor_view %px, shape = [32], strides = [1] : tensor_view<32xSS, strides=[1]>
  %vy = make_tensor_view %py, shape = [32], strides = [1] : tensor_view<32xSS, strides=[1]>
  %vo = make_tensor_view %po, shape = [4, 32], strides = [32, 1] : tensor_view<4x32xSS, strides=[32,1]>
  %qx = make_partition_view %vx : partition_view<tile=(32), tensor_view<32xSS, strides=[1]>>
  %qy = make_partition_view %vy : partition_view<tile=(32), tensor_view<32xSS, strides=[1]>>
  %qo = make_partition_view %vo : partition_view<tile=(1x32), tensor_view<4x32xSS, strides=[32,1]>>
  %x, %t1 = load_view_tko weak %qx[%zero] token = %t0 : partition_view<tile=(32), tensor_view<32xSS, strides=[1]>>, tile<i32> -> tile<32xSS>, token
  %y, %t2 = load_view_tko weak %qy[%zero] token = %t0 : partition_view<tile=(32), tensor_view<32xSS, strides=[1]>>, tile<i32> -> tile<32xSS>, token
  %f = divi %x, %y SIGN rounding<negative_inf> : tile<32xSS>
  %c = divi %x, %y SIGN rounding<positive_inf> : tile<32xSS>
  %q = divi %x, %y SIGN : tile<32xSS>
  %r = remi %x, %y SIGN : tile<32xSS>
  %one = constant <i32: 1> : tile<i32>
  %two = constant <i32: 2> : tile<i32>
  %three = constant <i32: 3> : tile<i32>
  ROWS
  return
}
"""


@pytest.mark.parametrize("element,sign", [("i32", "signed"), ("i64", "signed"),
                                          ("i32", "unsigned")])
def test_runtime_divisors_divide_once_per_operand_pair(element, sign):
    rows = "\n  ".join(
        f"%s{i} = reshape %{v} : tile<32x{element}> -> tile<1x32x{element}>\n  "
        f"%u{i} = store_view_tko weak %s{i}, %qo[%{idx}, %zero] token = %t2 : tile<1x32x{element}>, "
        f"partition_view<tile=(1x32), tensor_view<4x32x{element}, strides=[32,1]>>, tile<i32> -> token"
        for i, (v, idx) in enumerate([("f", "zero"), ("c", "one"), ("q", "two"), ("r", "three")]))
    text = DIVS.replace("ROWS", rows).replace("SS", element).replace("SIGN", sign)
    if sign == "unsigned":   # unsigned floor division is rejected: it is the truncating one
        text = text.replace("rounding<negative_inf>", "")
    module = _module(text)
    dtype = np.int64 if element == "i64" else np.int32
    if sign == "unsigned":
        dtype = np.uint32
        x = np.array([0, 1, 7, 2**32 - 1, 2**31, 100, 5, 6] * 4, np.uint32)
        y = np.array([1, 7, 2, 3, 2**32 - 1, 10, 5, 4] * 4, np.uint32)
    else:
        big = np.iinfo(dtype)
        x = np.array([7, -7, 7, -7, 0, big.max, big.min, 6] * 4, dtype)
        y = np.array([2, 2, -2, -2, 3, 5, 7, -4] * 4, dtype)
    out = np.zeros((4, 32), dtype)
    sim.run(module, "divs", (1,), x.view(dtype), y.view(dtype), out, threads=32)
    xs, ys = x.astype(object), y.astype(object)
    floor = [a // b for a, b in zip(xs, ys)]
    ceil = [-(-a // b) for a, b in zip(xs, ys)]
    trunc = [abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1) for a, b in zip(xs, ys)]
    rem = [a - t * b for a, t, b in zip(xs, trunc, ys)]
    want = np.array([floor, ceil, trunc, rem], dtype=object).astype(np.int64).astype(dtype)
    np.testing.assert_array_equal(out, want)
    ptx = _ptx(module, threads=32)
    assert _count(ptx, r"\bdiv\.[su]\d\d\b") == 1 and _count(ptx, r"\brem\.") == 0


RECIPROCAL = """
entry @recip(%px: tile<ptr<f32>>, %x0: tile<i32>, %x1: tile<i32>,
    %po: tile<ptr<f32>>, %o0: tile<i32>, %o1: tile<i32>) {
  %t0 = make_token : token
  %zero = constant <i32: 0> : tile<i32>
  %vx = make_tensor_view %px, shape = [32], strides = [1] : tensor_view<32xf32, strides=[1]>
  %vo = make_tensor_view %po, shape = [32], strides = [1] : tensor_view<32xf32, strides=[1]>
  %qx = make_partition_view %vx : partition_view<tile=(32), tensor_view<32xf32, strides=[1]>>
  %qo = make_partition_view %vo : partition_view<tile=(32), tensor_view<32xf32, strides=[1]>>
  %x, %t1 = load_view_tko weak %qx[%zero] token = %t0 : partition_view<tile=(32), tensor_view<32xf32, strides=[1]>>, tile<i32> -> tile<32xf32>, token
  %one = constant <f32: NUMERATOR> : tile<f32>
  %o1r = reshape %one : tile<f32> -> tile<1xf32>
  %ob = broadcast %o1r : tile<1xf32> -> tile<32xf32>
  %r = divf %ob, %x : tile<32xf32>
  %t2 = store_view_tko weak %r, %qo[%zero] token = %t1 : tile<32xf32>, partition_view<tile=(32), tensor_view<32xf32, strides=[1]>>, tile<i32> -> token
  return
}
"""


@pytest.mark.parametrize("numerator,reciprocal", [("1.000000e+00", True), ("2.000000e+00", False)])
def test_one_over_x_is_a_correctly_rounded_reciprocal(numerator, reciprocal):
    module = _module(RECIPROCAL.replace("NUMERATOR", numerator))
    x = np.array([1.0, -0.0, 0.0, np.inf, -np.inf, np.nan, 3.0, 1e-40, -7e-39, 3e38, 0.1, 1.7]
                 + [float(v) for v in np.linspace(-5, 5, 20)], np.float32)
    out = np.zeros(32, np.float32)
    sim.run(module, "recip", (1,), x, out, threads=32)
    with np.errstate(divide="ignore", over="ignore"):
        want = np.float32(float(numerator)) / x
    np.testing.assert_array_equal(out.view(np.uint32)[~np.isnan(want)],
                                  want.view(np.uint32)[~np.isnan(want)])
    assert np.isnan(out[np.isnan(want)]).all()
    ptx = _ptx(module, threads=32)
    assert ("rcp.rn.f32" in ptx) == reciprocal and ("div.rn.f32" in ptx) != reciprocal


# counts[idx[i]] += 1 for 64 indices with repeats; ORDERING decides whether red may be used
ATOMIC = """
entry @count(%pi: tile<ptr<i32>>, %i0: tile<i32>, %i1: tile<i32>,
    %pc: tile<ptr<i32>>, %c0: tile<i32>, %c1: tile<i32>) {
  %t0 = make_token : token
  %zero = constant <i32: 0> : tile<i32>
  %one = constant <i32: 1> : tile<64xi32>
  %vi = make_tensor_view %pi, shape = [64], strides = [1] : tensor_view<64xi32, strides=[1]>
  %qi = make_partition_view %vi : partition_view<tile=(64), tensor_view<64xi32, strides=[1]>>
  %idx, %t1 = load_view_tko weak %qi[%zero] token = %t0 : partition_view<tile=(64), tensor_view<64xi32, strides=[1]>>, tile<i32> -> tile<64xi32>, token
  %w = exti %idx signed : tile<64xi32> -> tile<64xi64>
  %p1 = reshape %pc : tile<ptr<i32>> -> tile<1xptr<i32>>
  %pb = broadcast %p1 : tile<1xptr<i32>> -> tile<64xptr<i32>>
  %ptrs = offset %pb, %w : tile<64xptr<i32>>, tile<64xi64> -> tile<64xptr<i32>>
  %old, %t2 = atomic_rmw_tko ORDERING device %ptrs, add, %one token=%t1 : tile<64xptr<i32>>, tile<64xi32> -> tile<64xi32>, token
  return
}
"""


@pytest.mark.parametrize("ordering,red", [("relaxed", True), ("release", True), ("acq_rel", False)])
def test_atomics_whose_old_values_are_unused_reduce(ordering, red):
    module = _module(ATOMIC.replace("ORDERING", ordering))
    idx = (np.arange(64, dtype=np.int32) * 5) % 7
    counts = np.zeros(8, np.int32)
    sim.run(module, "count", (1,), idx, counts, threads=64)
    np.testing.assert_array_equal(counts, np.bincount(idx, minlength=8))
    ptx = _ptx(module, threads=64)
    assert ("red." in ptx) == red and ("atom." in ptx) != red


FLOOR_DIV = """
entry @fdiv(%px: tile<ptr<ELEM>>, %x0: tile<i32>, %x1: tile<i32>,
    %po: tile<ptr<ELEM>>, %o0: tile<i32>, %o1: tile<i32>) {
  %t0 = make_token : token
  %zero = constant <i32: 0> : tile<i32>
  %d = constant <ELEM: DIVISOR> : tile<32xELEM>
  %vx = make_tensor_view %px, shape = [32], strides = [1] : tensor_view<32xELEM, strides=[1]>
  %vo = make_tensor_view %po, shape = [32], strides = [1] : tensor_view<32xELEM, strides=[1]>
  %qx = make_partition_view %vx : partition_view<tile=(32), tensor_view<32xELEM, strides=[1]>>
  %qo = make_partition_view %vo : partition_view<tile=(32), tensor_view<32xELEM, strides=[1]>>
  %x, %t1 = load_view_tko weak %qx[%zero] token = %t0 : partition_view<tile=(32), tensor_view<32xELEM, strides=[1]>>, tile<i32> -> tile<32xELEM>, token
  %q = divi %x, %d signed rounding<negative_inf> : tile<32xELEM>
  %t2 = store_view_tko weak %q, %qo[%zero] token = %t1 : tile<32xELEM>, partition_view<tile=(32), tensor_view<32xELEM, strides=[1]>>, tile<i32> -> token
  return
}
"""


@pytest.mark.parametrize("element,dtype,divisor,shift", [
    ("i32", np.int32, 8, True), ("i64", np.int64, 2, True), ("i32", np.int32, -4, False),
    ("i32", np.int32, 6, False)])
def test_floor_division_by_a_power_of_two_is_a_shift(element, dtype, divisor, shift):
    text = FLOOR_DIV.replace("ELEM", element).replace("DIVISOR", str(divisor))
    module = _module(text)
    info = np.iinfo(dtype)
    x = np.array([info.min, info.min + 1, info.max, -1, 0, 1, -7, 7, -8, 8, -9, 9] + list(
        range(-40, 60, 5)), dtype)
    out = np.zeros(32, dtype)
    sim.run(module, "fdiv", (1,), x, out, threads=32)
    with np.errstate(over="ignore"):
        want = np.floor_divide(x, dtype(divisor))
    np.testing.assert_array_equal(out, want)
    ptx = _ptx(module, threads=32)
    bits = np.dtype(dtype).itemsize * 8
    assert (f"shr.s{bits} %{'rd' if bits == 64 else 'r'}" in ptx and "selp" not in ptx) == shift
