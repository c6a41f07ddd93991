"""Loop-carried values at a continue: one parallel assignment (Lowerer.parallel_copy). Targets
that read each other (a swap, a rotation) go through one temporary per cycle; the others are
plain moves. Each kernel runs on the emulator against the interpreter; the trip count (5) is a
parameter, so the loop stays a loop."""
import re

import numpy as np
import pytest

import tilebc
from tilebc.text import parse_module
from tilebc_runtime import sim
from tilebc_runtime.compiler import compile as jit_compile

VIEW = "partition_view<tile=(16), tensor_view<?xf32, strides=[1]>>"
KERNEL = f"""entry @k(%x: tile<ptr<f32>>, %n: tile<i32>, %xs: tile<i32>, %y: tile<ptr<f32>>, \
%yn: tile<i32>, %ys: tile<i32>) optimization_hints=<default = {{}}> {{
  %token = make_token : token
  %z = constant <i32: 0> : tile<i32>
  %one = constant <i32: 1> : tile<i32>
  %two = constant <i32: 2> : tile<i32>
  %ten = constant <i32: 10> : tile<i32>
  %vx = make_tensor_view %x, shape = [%n], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
  %vy = make_tensor_view %y, shape = [%yn], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
  %px = make_partition_view %vx : {VIEW}
  %py = make_partition_view %vy : {VIEW}
  %a, %ta = load_view_tko weak %px[%z] token = %token : {VIEW}, tile<i32> -> tile<16xf32>, token
  %b, %tb = load_view_tko weak %px[%one] token = %token : {VIEW}, tile<i32> -> tile<16xf32>, token
  %c, %tc = load_view_tko weak %px[%two] token = %token : {VIEW}, tile<i32> -> tile<16xf32>, token
  %r:3 = for %i in (%z to %yn, step %ten) : tile<i32> iter_values(%p = %a, %q = %b, %s = %c) -> (tile<16xf32>, tile<16xf32>, tile<16xf32>) {{
BODY
  }}
  %t0 = store_view_tko weak %r#0, %py[%z] token = %token : tile<16xf32>, {VIEW}, tile<i32> -> token
  %t1 = store_view_tko weak %r#1, %py[%one] token = %token : tile<16xf32>, {VIEW}, tile<i32> -> token
  %t2 = store_view_tko weak %r#2, %py[%two] token = %token : tile<16xf32>, {VIEW}, tile<i32> -> token
  return
}}
"""
TYPES = "tile<16xf32>, tile<16xf32>, tile<16xf32>"
BODIES = {
    "unchanged": f"    continue %p, %q, %s : {TYPES}",
    "swap": f"    continue %q, %p, %s : {TYPES}",
    "rotation": f"    continue %q, %s, %p : {TYPES}",
    "one value to two": f"    continue %q, %q, %p : {TYPES}",
    "new values and a swap": f"    %d = addf %p, %s : tile<16xf32>\n    continue %d, %s, %q : {TYPES}",
}


def _latch_moves(ptx: str) -> list:
    """The moves between the loop's continue and its latch label."""
    body = ptx[ptx.rindex("// continue"):ptx.index("$L_latch")]
    return re.findall(r"^\s*mov\.\w+ (%\w+), (%\w+);", body, re.M)


@pytest.mark.parametrize("name", sorted(BODIES))
def test_carried_values_take_their_continue_values(name):
    module = parse_module(KERNEL.replace("BODY", BODIES[name]))
    results = []
    for runner in (tilebc.interp.run, lambda *a: sim.run(*a, arch="sm_90")):
        x, y = np.arange(48, dtype=np.float32), np.zeros(48, np.float32)
        runner(module, "k", (1,), x, y)
        results.append(y)
    np.testing.assert_array_equal(results[1], results[0])
    assert results[0].any()


def test_a_swap_takes_one_temporary_per_register_pair_and_nothing_else():
    ptx = jit_compile(parse_module(KERNEL.replace("BODY", BODIES["swap"])), "k", "sm_90",
                      emit="ptx").ptx
    moves = _latch_moves(ptx)
    slots = len(moves) // 3  # per register pair: temp <- p, p <- q, q <- temp
    assert slots >= 1 and len(moves) == 3 * slots, moves
    written = [target for target, _ in moves]
    assert len(set(written)) == len(written), "a register written twice"
    unchanged = jit_compile(parse_module(KERNEL.replace("BODY", BODIES["unchanged"])), "k",
                            "sm_90", emit="ptx").ptx
    assert _latch_moves(unchanged) == []
