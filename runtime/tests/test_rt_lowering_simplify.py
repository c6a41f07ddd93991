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


# x % d with Python's sign rule, as cuTile writes it: the truncating remainder and a fix-up.
FLOOR_MOD = """
entry @k(%px: tile<ptr<{t}>>, %nx: tile<i32>, %sx: tile<i32>, %po: tile<ptr<{t}>>,
         %no: tile<i32>, %so: tile<i32>) {{
  %t0 = make_token : token
  %i = iota : tile<64xi32>
  %rx = reshape %px : tile<ptr<{t}>> -> tile<1xptr<{t}>>
  %bx = broadcast %rx : tile<1xptr<{t}>> -> tile<64xptr<{t}>>
  %qx = offset %bx, %i : tile<64xptr<{t}>>, tile<64xi32> -> tile<64xptr<{t}>>
  %x, %t1 = load_ptr_tko weak %qx token=%t0 : tile<64xptr<{t}>> -> tile<64x{t}>, token
  %d = constant <{t}: {d}> : tile<64x{t}>
  %d2 = constant <{t}: {d}> : tile<64x{t}>
  %z = constant <{t}: 0> : tile<64x{t}>
  %r = remi %x, %d signed : tile<64x{t}>
  %neg = cmpi less_than %r, %z, signed : tile<64x{t}> -> tile<64xi1>
  %dneg = cmpi less_than %d2, %z, signed : tile<64x{t}> -> tile<64xi1>
  %flip = xori %neg, %dneg : tile<64xi1>
  %nz = cmpi not_equal %r, %z, signed : tile<64x{t}> -> tile<64xi1>
  %fix = andi %flip, %nz : tile<64xi1>
  %up = addi %r, %d2 : tile<64x{t}>
  %m = select %fix, %up, %r : tile<64xi1>, tile<64x{t}>
  %ro = reshape %po : tile<ptr<{t}>> -> tile<1xptr<{t}>>
  %bo = broadcast %ro : tile<1xptr<{t}>> -> tile<64xptr<{t}>>
  %qo = offset %bo, %i : tile<64xptr<{t}>>, tile<64xi32> -> tile<64xptr<{t}>>
  %t2 = store_ptr_tko weak %qo, %m token=%t0 : tile<64xptr<{t}>>, tile<64x{t}> -> token
  return
}}
"""


@pytest.mark.parametrize("element,d", [("i32", 4), ("i64", 8), ("i16", 2), ("i8", 1),
                                       ("i32", 6), ("i32", -4)])
def test_floor_modulo_by_a_power_of_two_is_one_and(element, d):
    module = parse_module(FLOOR_MOD.format(t=element, d=d), "floor_mod.mlir")
    module.version = tilebc.Version(13, 5)
    ptx = compile(module, arch="sm_90", emit="ptx").ptx
    code = [line.strip() for line in ptx.splitlines() if not line.strip().startswith("//")]
    rewritten = d > 0 and d & (d - 1) == 0
    assert any(line.startswith("and.b") and line.endswith(f", {d - 1};") for line in code) \
        == rewritten
    assert (not any(line.startswith(("rem.", "xor.pred")) for line in code)) == rewritten
    dtype = np.dtype(f"int{element[1:]}")
    info = np.iinfo(dtype)
    x = np.concatenate([[info.min, info.min + 1, info.max, -1, 0, 1, -d, d],
                        np.random.default_rng(3).integers(info.min, info.max, 56)]).astype(dtype)
    out = np.zeros(64, dtype)
    sim.run(module, "k", (1,), x, out)
    np.testing.assert_array_equal(out, np.mod(x.astype(np.int64), d).astype(dtype))


# An extract whose window is the whole source takes the source, whatever its index value (only
# 0 is in bounds): NVIDIA's persistent RMSNorm extracts its weight row at a run-once loop's
# induction variable. Here the index is a kernel argument (0 at launch).
WHOLE = f"""
entry @k(%px: tile<ptr<f32>>, %x0: tile<i32>, %x1: tile<i32>, %x2: tile<i32>, %x3: tile<i32>,
    %po: tile<ptr<f32>>, %o0: tile<i32>, %o1: tile<i32>, %o2: tile<i32>, %o3: tile<i32>,
    %at: tile<i32>) {{
  %t0 = make_token : token
  %zero = constant <i32: 0> : tile<i32>
  %vx = make_tensor_view %px, shape = [8, 16], strides = [16, 1] : {VIEW}
  %qx = make_partition_view %vx : {PART}
  %x, %t1 = load_view_tko weak %qx[%zero, %zero] token = %t0 : {PART}, tile<i32> -> tile<8x16xf32>, token
  %e = extract %x[%at, %at] : tile<8x16xf32> -> tile<8x16xf32>
  %vo = make_tensor_view %po, shape = [8, 16], strides = [16, 1] : {VIEW}
  %qo = make_partition_view %vo : {PART}
  %t2 = store_view_tko weak %e, %qo[%zero, %zero] token = %t0 : tile<8x16xf32>, {PART}, tile<i32> -> token
  return
}}
"""


def test_an_extract_of_the_whole_source_moves_nothing():
    module = parse_module(WHOLE, "whole.mlir")
    module.version = tilebc.Version(13, 5)
    body = _body(module)
    assert "shared" not in body  # no exchange: the stored tile is the loaded one
    x = np.arange(128, dtype=np.float32).reshape(8, 16) - 40.5
    ours, reference = np.zeros_like(x), np.zeros_like(x)
    sim.run(module, "k", (1,), x, ours, np.int32(0))
    interpret(module, "k", (1,), x, reference, np.int32(0))
    np.testing.assert_array_equal(reference, x)
    np.testing.assert_array_equal(ours, x)
