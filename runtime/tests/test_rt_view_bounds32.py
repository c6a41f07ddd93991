"""View loads and stores whose i32 tile indices and extents let the bounds checks run in 32 bits
(memory._narrow_checks): on the PTX emulator against the interpreter at the edges where a
32-bit check could go wrong (negative indices, index * tile size past 2^31, the last partial
tile, one past it), and on the PTX (no 64-bit compares left for such views)."""
import re

import numpy as np
import pytest

import tilebc
from tilebc.interp import run as interp_run
from tilebc.interp.api import Pointer
from tilebc.text import parse_module

from tilebc_runtime import sim
from tilebc_runtime.compiler import compile

VIEW = "tensor_view<?x?xf32, strides=[?,1]>"
PART = f"partition_view<tile=(ROWSx8), padding_value = zero, {VIEW}>"
OUT_VIEW = "tensor_view<ROWSx8xf32, strides=[8,1]>"
OUT_PART = f"partition_view<tile=(ROWSx8), {OUT_VIEW}>"

# out = x's tile (i, j) (zero outside x); then that tile is stored back into y at (i, j).
KERNEL = f"""
entry @tile_at(%px: tile<ptr<f32>>, %m: tile<i32>, %n: tile<i32>, %s: tile<i32>,
    %py: tile<ptr<f32>>, %po: tile<ptr<f32>>, %i: tile<i32>, %j: tile<i32>) {{
  %t0 = make_token : token
  %zero = constant <i32: 0> : tile<i32>
  %vx = make_tensor_view %px, shape = [%m, %n], strides = [%s, 1] : tile<i32> -> {VIEW}
  %vy = make_tensor_view %py, shape = [%m, %n], strides = [%s, 1] : tile<i32> -> {VIEW}
  %vo = make_tensor_view %po, shape = [ROWS, 8], strides = [8, 1] : {OUT_VIEW}
  %qx = make_partition_view %vx : {PART}
  %qy = make_partition_view %vy : {PART}
  %qo = make_partition_view %vo : {OUT_PART}
  %x, %t1 = load_view_tko weak %qx[%i, %j] token = %t0 : {PART}, tile<i32> -> tile<ROWSx8xf32>, token
  %t2 = store_view_tko weak %x, %qo[%zero, %zero] token = %t1 : tile<ROWSx8xf32>, {OUT_PART}, tile<i32> -> token
  %t3 = store_view_tko weak %x, %qy[%i, %j] token = %t2 : tile<ROWSx8xf32>, {PART}, tile<i32> -> token
  return
}}
"""


def _module(rows):
    module = parse_module(KERNEL.replace("ROWS", str(rows)), "bounds32.mlir")
    module.version = tilebc.Version(13, 5)
    return module


EDGES = [0, 1, 2, -1, 2**31 - 1, -2**31, 2**28, 2**28 + 1, 2**29, 2**30 - 1, -2**28]


@pytest.mark.parametrize("rows", [1, 4])
@pytest.mark.parametrize("i", EDGES)
def test_edge_indices_match_the_interpreter(rows, i):
    module = _module(rows)
    m, n = 9, 19                       # the last row tile and column tile are partial
    rng = np.random.default_rng(abs(i) % 1000 + rows)
    x = rng.uniform(1.0, 2.0, (m, n + 3)).astype(np.float32)   # stride 22 > n
    for j in (0, 2, 3, -1, 2**31 - 1, 2**29):
        outs = []
        for runner in (interp_run, sim.run):
            y = np.zeros_like(x)
            out = np.full((rows, 8), -7.0, np.float32)
            runner(module, "tile_at", (1,), Pointer(x), np.int32(m), np.int32(n), np.int32(n + 3),
                   Pointer(y), Pointer(out), np.int32(i), np.int32(j))
            outs.append((y, out))
        (y0, o0), (y1, o1) = outs
        np.testing.assert_array_equal(o1, o0, err_msg=f"load at ({i}, {j})")
        np.testing.assert_array_equal(y1, y0, err_msg=f"store at ({i}, {j})")
        if i == 1 and j == 2:   # columns 16..18 of 16..23 are inside: the test sees data
            assert o0[:, :3].all() and not o0[:, 3:].any()


def test_checks_are_32_bit():
    ptx = compile(_module(4), arch="sm_90", emit="ptx").ptx
    assert not re.findall(r"\bsetp\.\w+\.u64\b", ptx)
    assert re.findall(r"\bsetp\.lt\.u32\b", ptx)
