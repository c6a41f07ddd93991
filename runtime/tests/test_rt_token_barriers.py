"""Token ordering: a memory op ordered after an earlier one gets a bar.sync unless one already
stands after that op in straight-line code (PtxWriter.barrier_since)."""
import numpy as np

import tilebc
from tilebc.text import parse_module

from tilebc_runtime import sim
from tilebc_runtime.compiler import compile
from tilebc_runtime.lowering.ptx import PtxWriter

# y[i] = x[127 - i] and z[i] = x[127 - i]: both stores follow the load; the second store follows
# the load (`{after}` = %t1) or the first store (`{after}` = %t2)
KERNEL = """
entry @k(%x: tile<ptr<f32>>, %nx: tile<i32>, %sx: tile<i32>, %y: tile<ptr<f32>>,
         %ny: tile<i32>, %sy: tile<i32>, %z: tile<ptr<f32>>, %nz: tile<i32>, %sz: tile<i32>) {{
  %0 = make_token : token
  %i = iota : tile<128xi32>
  %c = constant <i32: 127> : tile<128xi32>
  %r = subi %c, %i : tile<128xi32>
  %xr = reshape %x : tile<ptr<f32>> -> tile<1xptr<f32>>
  %xb = broadcast %xr : tile<1xptr<f32>> -> tile<128xptr<f32>>
  %px = offset %xb, %r : tile<128xptr<f32>>, tile<128xi32> -> tile<128xptr<f32>>
  %v, %t1 = load_ptr_tko weak %px token=%0 : tile<128xptr<f32>> -> tile<128xf32>, token
  %yr = reshape %y : tile<ptr<f32>> -> tile<1xptr<f32>>
  %yb = broadcast %yr : tile<1xptr<f32>> -> tile<128xptr<f32>>
  %py = offset %yb, %i : tile<128xptr<f32>>, tile<128xi32> -> tile<128xptr<f32>>
  %t2 = store_ptr_tko weak %py, %v token=%t1 : tile<128xptr<f32>>, tile<128xf32> -> token
  %zr = reshape %z : tile<ptr<f32>> -> tile<1xptr<f32>>
  %zb = broadcast %zr : tile<1xptr<f32>> -> tile<128xptr<f32>>
  %pz = offset %zb, %i : tile<128xptr<f32>>, tile<128xi32> -> tile<128xptr<f32>>
  %t3 = store_ptr_tko weak %pz, %v token={after} : tile<128xptr<f32>>, tile<128xf32> -> token
  return
}}
"""


def _module(after):
    module = parse_module(KERNEL.format(after=after), "k.mlir")
    module.version = tilebc.Version(13, 5)
    return module


def _barriers(after):
    ptx = compile(_module(after), entry="k", arch="sm_90", emit="ptx", threads=128).ptx
    return ptx.count("bar.sync")


def _run(after):
    x = np.arange(128, dtype=np.float32) * 0.5
    y, z = np.zeros(128, np.float32), np.zeros(128, np.float32)
    sim.run(_module(after), "k", (1,), x, y, z, threads=128)
    assert np.array_equal(y, x[::-1]) and np.array_equal(z, x[::-1])


def test_two_stores_after_one_load_share_a_barrier():
    assert _barriers("%t1") == 1
    _run("%t1")


def test_a_store_after_a_store_gets_its_own_barrier():
    assert _barriers("%t2") == 2
    _run("%t2")


def test_barrier_since_needs_straight_line_code():
    w = PtxWriter()
    w("ld.global.f32 %f0, [%rd0]")
    mark = len(w.body)
    assert not w.barrier_since(mark)  # nothing after the op yet
    w("add.f32 %f1, %f0, %f0")
    w("bar.sync 0")
    assert w.barrier_since(mark)
    assert not w.barrier_since(None)  # an op whose position is unknown
    w("@%p0 bra $L_x_1")
    assert not w.barrier_since(mark)  # a branch since: a path may leave and come back
    w = PtxWriter()
    w("bar.sync 0")
    w.place("$L_y_1")
    assert not w.barrier_since(0)  # a label: a path may enter past the barrier
    w = PtxWriter()
    w("@%p0 bar.sync 0")
    assert not w.barrier_since(0)  # a predicated barrier is not every thread's
