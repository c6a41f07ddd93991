"""Gather/scatter view addressing (lowering/memory.py): a load and a store through the same index
tile share its shuffled rows, slots with the same dense coordinates share their address part,
and 32-bit rows times 32-bit strides are one widening multiply; the emulator still computes what
the interpreter does, rows past either end included."""
import re
from pathlib import Path

import numpy as np

import tilebc
from tilebc.interp import run as interpret
from tilebc.ir.module import Block
from tilebc_runtime import sim
from tilebc_runtime.compiler import compile
from tilebc_runtime.lowering.lowerer import Lowerer

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "bytecode" / "advanced_indexing" / "advanced_indexing-13.5.tilebc"


def _ptx():
    return compile(FIXTURE, arch="sm_90", emit="ptx").ptx


def test_gather_then_scatter_shuffle_the_index_tile_once():
    # load_view_tko and store_view_tko both index a 16x16 tile with the same 16-row index tile;
    # 256 elements over 128 threads are 2 slots, so 2 shuffles (4 before the rows were shared)
    ptx = _ptx()
    assert len(re.findall(r"\bshfl\.sync\.idx\.b32\b", ptx)) == 2
    # each slot's row offset (i32 row x i32 stride) is one mul.wide.s32 per access
    rows = set(re.findall(r"shfl\.sync\.idx\.b32 (%r\d+),", ptx))
    by_row = re.findall(r"\bmul\.wide\.s32 %rd\d+, (%r\d+),", ptx)
    assert len([r for r in by_row if r in rows]) == 4
    # the column part is computed once per view: the two slots share their column
    # bounds: per access one column check and one per slot's row (the index tile's load, an
    # i32-indexed partition view, checks in 32 bits)
    assert len(re.findall(r"\bsetp\.lt\.u64\b", ptx)) == 2 * (1 + 2)
    assert len(re.findall(r"\bsetp\.lt\.u32\b", ptx)) >= 1


def test_rows_outside_the_tensor_match_the_interpreter():
    module = tilebc.load(FIXTURE)
    name = module.functions[0].name
    rng = np.random.default_rng(7)
    x = rng.uniform(0.5, 2.0, (20, 40)).astype(np.float32)
    # negative rows, rows past the end, repeated rows; columns 35.. run past the last column
    rows = np.array([-1, 0, 19, 20, 3, -2147483648, 2147483647, 7, 7, 11, 25, 1, 2, 18, -5, 9],
                    np.int32)
    results = []
    for runner in (interpret, sim.run):
        y = np.zeros((20, 40), np.float32)
        runner(module, name, (1,), x, rows, y, 35)
        results.append(y)
    expected = np.zeros((20, 40), np.float32)
    for row in rows:
        if 0 <= row < 20:
            expected[row, 35:40] = x[row, 35:40] * 2
    np.testing.assert_array_equal(results[0], expected)
    np.testing.assert_array_equal(results[1], expected)


def test_scoped_values_are_reused_only_where_they_dominate():
    module = tilebc.load(FIXTURE)
    lw = Lowerer(module, module.functions[0], threads=128, arch=90)
    made = iter(range(100))
    seen = []

    def lower_op(op):  # stands in for the op lowerings: "get" asks for the shared value
        if op == "get":
            seen.append(lw.scoped("key", lambda: next(made)))
        else:
            lw.lower_block(op)
    lw.lower_op = lower_op
    then_block, else_block = Block(ops=["get", "get"]), Block(ops=["get"])
    lw.lower_block(Block(ops=[then_block, else_block, then_block, "get", "get", Block(ops=["get"])]))
    # then: made once, reused inside; else (a sibling): its own; then again (a second lowering of
    # the block): its own; the outer block after them: its own, reused by the outer block and by a
    # block nested in it
    assert seen == [0, 0, 1, 2, 2, 3, 3, 3]


# out[r, c] = exti(v[r]) + c over an 8x16 i64 tile: the broadcast moves v's 32-bit elements (one
# shuffle per slot, not two halves of each i64) and extends them where they land.
WIDENED = """
entry @k(%pv: tile<ptr<{t}>>, %nv: tile<i32>, %sv: tile<i32>, %po: tile<ptr<i64>>,
         %no: tile<i32>, %so: tile<i32>) {{
  %t0 = make_token : token
  %i = iota : tile<8xi32>
  %rv = reshape %pv : tile<ptr<{t}>> -> tile<1xptr<{t}>>
  %bv = broadcast %rv : tile<1xptr<{t}>> -> tile<8xptr<{t}>>
  %qv = offset %bv, %i : tile<8xptr<{t}>>, tile<8xi32> -> tile<8xptr<{t}>>
  %v, %t1 = load_ptr_tko weak %qv token=%t0 : tile<8xptr<{t}>> -> tile<8x{t}>, token
  %v2 = reshape %v : tile<8x{t}> -> tile<8x1x{t}>
  %w = exti %v2 {signedness} : tile<8x1x{t}> -> tile<8x1xi64>
  %b = broadcast %w : tile<8x1xi64> -> tile<8x16xi64>
  %c = iota : tile<16xi32>
  %c2 = reshape %c : tile<16xi32> -> tile<1x16xi32>
  %cw = exti %c2 signed : tile<1x16xi32> -> tile<1x16xi64>
  %cb = broadcast %cw : tile<1x16xi64> -> tile<8x16xi64>
  %sum = addi %b, %cb : tile<8x16xi64>
  %flat = reshape %sum : tile<8x16xi64> -> tile<128xi64>
  %j = iota : tile<128xi32>
  %ro = reshape %po : tile<ptr<i64>> -> tile<1xptr<i64>>
  %bo = broadcast %ro : tile<1xptr<i64>> -> tile<128xptr<i64>>
  %qo = offset %bo, %j : tile<128xptr<i64>>, tile<128xi32> -> tile<128xptr<i64>>
  %t2 = store_ptr_tko weak %qo, %flat token=%t0 : tile<128xptr<i64>>, tile<128xi64> -> token
  return
}}
"""


def test_broadcast_of_an_extended_tile_moves_the_narrow_elements():
    from tilebc.text import parse_module
    for element, signedness in (("i32", "signed"), ("i32", "unsigned"), ("i16", "signed"),
                                ("i16", "unsigned")):
        module = parse_module(WIDENED.format(t=element, signedness=signedness), "w.mlir")
        module.version = tilebc.Version(13, 5)
        ptx = compile(module, arch="sm_90", emit="ptx", threads=256).ptx
        # 128 elements over 256 threads: one slot, one 32-bit shuffle
        assert len(re.findall(r"\bshfl\.sync\.idx\.b32\b", ptx)) == 1, (element, signedness)
        dtype = np.dtype(f"int{element[1:]}")
        v = np.array([-5, 7, np.iinfo(dtype).min, np.iinfo(dtype).max, 0, -1, 3, 100], dtype)
        out = np.zeros(128, np.int64)
        sim.run(module, "k", (1,), v, out, threads=256)
        extended = v.astype(np.int64) if signedness == "signed" else \
            v.astype(np.int64) & ((1 << (8 * dtype.itemsize)) - 1)
        np.testing.assert_array_equal(out.reshape(8, 16),
                                      extended[:, None] + np.arange(16)[None, :])
