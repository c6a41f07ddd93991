"""Scalar atomics: only the owner warp runs them (the others branch around the atomic and its
latency), and a result nobody reads is not shared through shared memory."""
import numpy as np

import tilebc
from tilebc.text import parse_module

from tilebc_runtime import sim
from tilebc_runtime.compiler import compile

# each array argument is its pointer, extent and stride (unused here)
COUNTER = """
entry @count(%arg0: tile<ptr<f32>>, %n0: tile<i32>, %s0: tile<i32>, %arg1: tile<ptr<f32>>,
             %n1: tile<i32>, %s1: tile<i32>) {{
  %0 = make_token : token
  %one = constant <f32: 1.000000e+00> : tile<f32>
  %old, %t = atomic_rmw_tko relaxed device %arg0, addf, %one token=%0 : tile<ptr<f32>>, tile<f32> -> tile<f32>, token
  {use}
  return
}}
"""
# the old value, stored by every thread at out[block] (all copies must agree)
USE = ("%bid, %by, %bz = get_tile_block_id : tile<i32>\n"
       "  %q = offset %arg1, %bid : tile<ptr<f32>>, tile<i32> -> tile<ptr<f32>>\n"
       "  %t2 = store_ptr_tko weak %q, %old token=%t : tile<ptr<f32>>, tile<f32> -> token")


def _module(use):
    module = parse_module(COUNTER.format(use=use), "count.mlir")
    module.version = tilebc.Version(13, 5)
    return module


def test_unread_result_skips_the_exchange_and_other_warps_skip_the_atomic():
    ptx = compile(_module(""), entry="count", arch="sm_90", emit="ptx", threads=128).ptx
    lines = [line.strip() for line in ptx.splitlines()]
    atom = next(i for i, line in enumerate(lines)
                if line.startswith("@") and ("atom." in line or "red." in line))
    assert lines[atom - 1].startswith("@!") and " bra " in lines[atom - 1]
    assert "st.shared" not in ptx and "bar.sync" not in ptx
    counter = np.zeros(1, np.float32)
    sim.run(_module(""), "count", (5,), counter, np.zeros(5, np.float32), threads=128)
    assert counter[0] == 5.0  # one atomic per block, not one per warp or thread


def test_read_result_reaches_every_thread():
    ptx = compile(_module(USE), entry="count", arch="sm_90", emit="ptx", threads=128).ptx
    assert "st.shared" in ptx and "bar.sync" in ptx
    counter = np.zeros(1, np.float32)
    olds = np.full(6, -1.0, np.float32)
    sim.run(_module(USE), "count", (6,), counter, olds, threads=128)
    assert counter[0] == 6.0
    assert sorted(olds.tolist()) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
