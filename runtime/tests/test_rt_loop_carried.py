"""Loop-carried values at a continue: one parallel assignment (Lowerer.parallel_copy). Targets
that read each other (a swap, a rotation) go through one temporary per cycle; the others are
plain moves. Each kernel runs on the emulator against the interpreter. The loop runs 5 times
(an odd count: a swap shows), its bounds from a parameter, so it stays a loop."""
import re

import numpy as np
import pytest

import tilebc
from tilebc.text import parse_module
from tilebc_runtime import sim
from tilebc_runtime.compiler import compile as jit_compile

KERNEL = """entry @k(%x: tile<ptr<f32>>, %n: tile<i32>, %xs: tile<i32>, %y: tile<ptr<f32>>, \
%yn: tile<i32>, %ys: tile<i32>) optimization_hints=<default = {}> {
  %token = make_token : token
  %z = constant <i32: 0> : tile<i32>
  %one = constant <i32: 1> : tile<i32>
  %two = constant <i32: 2> : tile<i32>
  %five = constant <i32: 5> : tile<i32>
  %step = divi %yn, %five signed rounding<positive_inf> : tile<i32>
  %k = constant <f32: 2.5> : TILE
  %vx = make_tensor_view %x, shape = [%n], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
  %vy = make_tensor_view %y, shape = [%yn], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
  %px = make_partition_view %vx : VIEW
  %py = make_partition_view %vy : VIEW
  %a, %ta = load_view_tko weak %px[%z] token = %token : VIEW, tile<i32> -> TILE, token
  %b, %tb = load_view_tko weak %px[%one] token = %token : VIEW, tile<i32> -> TILE, token
  %c, %tc = load_view_tko weak %px[%two] token = %token : VIEW, tile<i32> -> TILE, token
  %r:3 = for %i in (%z to %yn, step %step) : tile<i32> iter_values(%p = %a, %q = %b, %s = %c) -> (TILE, TILE, TILE) {
BODY
  }
  %t0 = store_view_tko weak %r#0, %py[%z] token = %token : TILE, VIEW, tile<i32> -> token
  %t1 = store_view_tko weak %r#1, %py[%one] token = %token : TILE, VIEW, tile<i32> -> token
  %t2 = store_view_tko weak %r#2, %py[%two] token = %token : TILE, VIEW, tile<i32> -> token
  return
}
"""
BODIES = {
    "unchanged": "    continue %p, %q, %s : TILE, TILE, TILE",
    "swap": "    continue %q, %p, %s : TILE, TILE, TILE",
    "rotation": "    continue %q, %s, %p : TILE, TILE, TILE",
    # one value to two targets, one of them read by another move: an order that writes %p
    # before %s takes it leaves %s wrong from the second iteration on
    "one value to two": "    continue %s, %s, %p : TILE, TILE, TILE",
    "a constant and a swap": "    continue %q, %p, %k : TILE, TILE, TILE",
    "new values and a swap": "    %d = addf %p, %s : TILE\n    continue %d, %s, %q : TILE, TILE, TILE",
}
SIZES = (16, 1024)  # one register a thread, and several


def _kernel(body: str, size: int):
    tile = f"tile<{size}xf32>"
    view = f"partition_view<tile=({size}), tensor_view<?xf32, strides=[1]>>"
    return parse_module(KERNEL.replace("BODY", BODIES[body]).replace("TILE", tile)
                        .replace("VIEW", view))


def _latch_moves(ptx: str) -> list:
    """The register moves between the loop's continue and its latch label."""
    body = ptx[ptx.rindex("// continue"):ptx.index("$L_latch")]
    return re.findall(r"^\s*mov\.\w+ (%\w+), (%\w+);", body, re.M)


def _run(runner, body: str, size: int):
    x = np.arange(3 * size, dtype=np.float32)
    y = np.zeros(3 * size, np.float32)
    runner(_kernel(body, size), "k", (1,), x, y)
    return y


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("body", sorted(BODIES))
def test_carried_values_take_their_continue_values(body, size):
    expected = _run(tilebc.interp.run, body, size)
    np.testing.assert_array_equal(_run(lambda *a: sim.run(*a, arch="sm_90"), body, size),
                                  expected)
    if body != "unchanged":  # the case moves values: a lowering that did not would differ
        assert not np.array_equal(expected, _run(tilebc.interp.run, "unchanged", size))


def test_a_swap_takes_one_temporary_per_register_pair_and_nothing_else():
    result = jit_compile(_kernel("swap", 1024), "k", "sm_90", emit="ptx")
    registers = 1024 // result.kernels["k"].threads_per_cta  # of each tile, in each thread
    moves = _latch_moves(result.ptx)
    assert registers > 1 and len(moves) == 3 * registers, moves  # temp <- p, p <- q, q <- temp
    written = [target for target, _ in moves]
    assert len(set(written)) == len(written), "a register written twice"
    unchanged = jit_compile(_kernel("unchanged", 1024), "k", "sm_90", emit="ptx").ptx
    assert _latch_moves(unchanged) == []
