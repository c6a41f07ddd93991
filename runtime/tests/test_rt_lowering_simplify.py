"""Forwarding and dead-op removal before lowering (lowering/simplify.py): permutes that undo each
other and extracts that take back a cat operand move no data, and unused pure ops emit nothing.
Each kernel runs on the PTX emulator against the CPU interpreter."""
import numpy as np
import pytest

import tilebc
from tilebc.interp import run as interpret
from tilebc.text import parse_module

from tilebc_runtime import sim
from tilebc_runtime.compiler import compile

VIEW = "tensor_view<8x16xf32, strides=[16,1]>"
PART = f"partition_view<tile=(8x16), {VIEW}>"

# out = extract(cat(x*2, {second}), [{index}, 0]): with index 1 and second = permute(permute(x)),
# the stored tile is x itself.
KERNEL = """
entry @k(%px: tile<ptr<f32>>, %x0: tile<i32>, %x1: tile<i32>, %x2: tile<i32>, %x3: tile<i32>,
    %po: tile<ptr<f32>>, %o0: tile<i32>, %o1: tile<i32>, %o2: tile<i32>, %o3: tile<i32>) {{
  %t0 = make_token : token
  %zero = constant <i32: 0> : tile<i32>
  %which = constant <i32: {index}> : tile<i32>
  %vx = make_tensor_view %px, shape = [8, 16], strides = [16, 1] : {view}
  %qx = make_partition_view %vx : {part}
  %x, %t1 = load_view_tko weak %qx[%zero, %zero] token = %t0 : {part}, tile<i32> -> tile<8x16xf32>, token
  %two = constant <f32: 2.0> : tile<8x16xf32>
  %dbl = mulf %x, %two : tile<8x16xf32>
  %p1 = permute %x [1, 0] : tile<8x16xf32> -> tile<16x8xf32>
  %p2 = permute %p1 [{perm}] : tile<16x8xf32> -> tile<8x16xf32>
  %c = cat %dbl, {second} dim = 0 : tile<8x16xf32>, tile<8x16xf32> -> tile<16x16xf32>
  %e = extract %c[%which, %zero] : tile<16x16xf32> -> tile<8x16xf32>
  %vo = make_tensor_view %po, shape = [8, 16], strides = [16, 1] : {view}
  %qo = make_partition_view %vo : {part}
  %t2 = store_view_tko weak %e, %qo[%zero, %zero] token = %t0 : tile<8x16xf32>, {part}, tile<i32> -> token
  return
}}
"""


def _module(index, second, perm="1, 0"):
    text = KERNEL.format(index=index, second=second, perm=perm, view=VIEW, part=PART)
    module = parse_module(text, "simplify.mlir")
    module.version = tilebc.Version(13, 5)
    return module


CASES = {"undone permute": (1, "%p2", lambda x: x), "first operand": (0, "%p2", lambda x: 2 * x)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_forwarded_kernels_on_the_emulator_match_the_interpreter(case):
    index, second, expected = CASES[case]
    module = _module(index, second)
    x = np.arange(128, dtype=np.float32).reshape(8, 16) - 40.5
    ours, reference = np.zeros_like(x), np.zeros_like(x)
    sim.run(module, "k", (1,), x, ours)
    interpret(module, "k", (1,), x, reference)
    np.testing.assert_array_equal(reference, expected(x))
    np.testing.assert_array_equal(ours, expected(x))


def _body(module):
    return compile(module, arch="sm_90", emit="ptx").ptx.split(".visible .entry")[1]


def test_undone_shape_ops_and_their_dead_inputs_emit_nothing():
    ptx = _body(_module(1, "%p2"))
    # the stored tile is x: no exchange, and the unused x*2 is not computed
    assert "st.shared" not in ptx and "shfl.sync" not in ptx and "bar.sync" not in ptx
    assert "mul.rn.f32" not in ptx


def test_live_operands_are_still_computed():
    # extracting the x*2 half forwards to the multiply, which stays
    assert "mul.rn.f32" in _body(_module(0, "%p2"))


PERMUTES = """
entry @p(%px: tile<ptr<f32>>) {{
  %i = iota : tile<24xi32>
  %x = reshape %i : tile<24xi32> -> tile<2x3x4xi32>
  %a = permute %x [2, 0, 1] : tile<2x3x4xi32> -> tile<4x2x3xi32>
  %b = permute %a [{perm}] : tile<4x2x3xi32> -> tile<{shape}xi32>
  return
}}
"""


@pytest.mark.parametrize("perm,shape,cancels", [("1, 2, 0", "2x3x4", True),
                                                ("2, 0, 1", "3x4x2", False),
                                                ("0, 2, 1", "4x3x2", False)])
def test_only_permutes_that_compose_to_the_identity_are_forwarded(perm, shape, cancels):
    from tilebc_runtime.lowering.lowerer import Lowerer
    module = parse_module(PERMUTES.format(perm=perm, shape=shape), "permutes.mlir")
    module.version = tilebc.Version(13, 5)
    function = module.functions[0]
    lw = Lowerer(module, function, threads=32, arch=90)
    ops = list(function.walk())  # iota, reshape (x), permute (a), permute (b), return
    source, result = ops[1].results[0], ops[3].results[0]
    assert (lw.forward.get(result) is source) is cancels
