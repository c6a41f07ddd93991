"""Memory ops ordered by a token after a memory op of another thread need a bar.sync between them,
unless one already stands on every path since that op (code is straight-line from the last label):
the exchange that shares an atomic's old values, or an earlier op's own barrier."""
import re

import numpy as np

import tilebc
from tilebc.text import parse_module

from tilebc_runtime import sim
from tilebc_runtime.compiler import compile

# (each array argument is its pointer, extent and stride; unused here)
# 64 elements over 128 threads: element i's owner is thread i, the other threads hold copies.
# x[i] += 1 atomically; the old value goes to olds[i] and again to olds[64 + i], both stores
# ordered after the atomic; then ys[i] = x[63 - i], ordered after the first store only.
ATOMIC_THEN_STORES = """
entry @k(%x: tile<ptr<i32>>, %n0: tile<i32>, %s0: tile<i32>, %olds: tile<ptr<i32>>,
         %n1: tile<i32>, %s1: tile<i32>, %ys: tile<ptr<i32>>, %n2: tile<i32>, %s2: tile<i32>) {
  %0 = make_token : token
  %i = iota : tile<64xi32>
  %one = constant <i32: 1> : tile<64xi32>
  %rx = reshape %x : tile<ptr<i32>> -> tile<1xptr<i32>>
  %bx = broadcast %rx : tile<1xptr<i32>> -> tile<64xptr<i32>>
  %px = offset %bx, %i : tile<64xptr<i32>>, tile<64xi32> -> tile<64xptr<i32>>
  %old, %t1 = atomic_rmw_tko relaxed device %px, add, %one token=%0 : tile<64xptr<i32>>, tile<64xi32> -> tile<64xi32>, token
  %ro = reshape %olds : tile<ptr<i32>> -> tile<1xptr<i32>>
  %bo = broadcast %ro : tile<1xptr<i32>> -> tile<64xptr<i32>>
  %po = offset %bo, %i : tile<64xptr<i32>>, tile<64xi32> -> tile<64xptr<i32>>
  %t2 = store_ptr_tko weak %po, %old token=%t1 : tile<64xptr<i32>>, tile<64xi32> -> token
  %c64 = constant <i32: 64> : tile<64xi32>
  %i2 = addi %i, %c64 : tile<64xi32>
  %po2 = offset %bo, %i2 : tile<64xptr<i32>>, tile<64xi32> -> tile<64xptr<i32>>
  %t3 = store_ptr_tko weak %po2, %old token=%t1 : tile<64xptr<i32>>, tile<64xi32> -> token
  %c63 = constant <i32: 63> : tile<64xi32>
  %j = subi %c63, %i : tile<64xi32>
  %pj = offset %bx, %j : tile<64xptr<i32>>, tile<64xi32> -> tile<64xptr<i32>>
  %v, %t4 = load_ptr_tko weak %pj token=%t2 : tile<64xptr<i32>> -> tile<64xi32>, token
  %ry = reshape %ys : tile<ptr<i32>> -> tile<1xptr<i32>>
  %by = broadcast %ry : tile<1xptr<i32>> -> tile<64xptr<i32>>
  %py = offset %by, %i : tile<64xptr<i32>>, tile<64xi32> -> tile<64xptr<i32>>
  %t5 = store_ptr_tko weak %py, %v token=%0 : tile<64xptr<i32>>, tile<64xi32> -> token
  return
}
"""

# xs[i] = 7 for every i; then in an `if` on the block id: a load of xs reversed after the store
# (barrier inside the branch); after the `if` another load ordered after the store: the
# branch's barrier may not have run, so it needs its own.
STORE_IF_LOAD = """
entry @k(%xs: tile<ptr<i32>>, %n0: tile<i32>, %s0: tile<i32>, %ys: tile<ptr<i32>>,
         %n1: tile<i32>, %s1: tile<i32>, %zs: tile<ptr<i32>>, %n2: tile<i32>, %s2: tile<i32>) {
  %0 = make_token : token
  %i = iota : tile<64xi32>
  %seven = constant <i32: 7> : tile<64xi32>
  %rx = reshape %xs : tile<ptr<i32>> -> tile<1xptr<i32>>
  %bx = broadcast %rx : tile<1xptr<i32>> -> tile<64xptr<i32>>
  %px = offset %bx, %i : tile<64xptr<i32>>, tile<64xi32> -> tile<64xptr<i32>>
  %t1 = store_ptr_tko weak %px, %seven token=%0 : tile<64xptr<i32>>, tile<64xi32> -> token
  %c63 = constant <i32: 63> : tile<64xi32>
  %j = subi %c63, %i : tile<64xi32>
  %pj = offset %bx, %j : tile<64xptr<i32>>, tile<64xi32> -> tile<64xptr<i32>>
  %bid, %by, %bz = get_tile_block_id : tile<i32>
  %zero = constant <i32: 0> : tile<i32>
  %first = cmpi equal %bid, %zero, signed : tile<i32> -> tile<i1>
  if %first {
    %v, %t2 = load_ptr_tko weak %pj token=%t1 : tile<64xptr<i32>> -> tile<64xi32>, token
    %ry = reshape %ys : tile<ptr<i32>> -> tile<1xptr<i32>>
    %bys = broadcast %ry : tile<1xptr<i32>> -> tile<64xptr<i32>>
    %py = offset %bys, %i : tile<64xptr<i32>>, tile<64xi32> -> tile<64xptr<i32>>
    %t3 = store_ptr_tko weak %py, %v token=%0 : tile<64xptr<i32>>, tile<64xi32> -> token
    yield
  }
  %w, %t4 = load_ptr_tko weak %pj token=%t1 : tile<64xptr<i32>> -> tile<64xi32>, token
  %rz = reshape %zs : tile<ptr<i32>> -> tile<1xptr<i32>>
  %bzs = broadcast %rz : tile<1xptr<i32>> -> tile<64xptr<i32>>
  %pz = offset %bzs, %i : tile<64xptr<i32>>, tile<64xi32> -> tile<64xptr<i32>>
  %t5 = store_ptr_tko weak %pz, %w token=%0 : tile<64xptr<i32>>, tile<64xi32> -> token
  return
}
"""


def _module(text):
    module = parse_module(text, "k.mlir")
    module.version = tilebc.Version(13, 5)
    return module


def _code(ptx):
    return [line.strip() for line in ptx.splitlines()
            if line.strip() and not line.strip().startswith("//")]


def test_a_barrier_since_the_atomic_orders_the_ops_after_it():
    lines = _code(compile(_module(ATOMIC_THEN_STORES), arch="sm_90", emit="ptx",
                          threads=128).ptx)
    atom = next(i for i, line in enumerate(lines) if "atom." in line)
    stores = [i for i, line in enumerate(lines) if re.search(r"\bst\.global", line)]
    load = next(i for i, line in enumerate(lines) if re.search(r"\bld\.global", line))
    barriers = [i for i, line in enumerate(lines) if line == "bar.sync 0;"]
    # the two of the exchange sharing the old values, then one before the load (it follows the
    # store, which comes after them); none before the stores of the old values
    assert len(barriers) == 3
    assert atom < barriers[0] < barriers[1] < stores[0] < stores[1] < barriers[2] < load
    x = np.arange(64, dtype=np.int32) * 10
    olds, ys = np.full(128, -1, np.int32), np.full(64, -1, np.int32)
    sim.run(_module(ATOMIC_THEN_STORES), "k", (1,), x, olds, ys, threads=128)
    np.testing.assert_array_equal(olds, np.tile(np.arange(64) * 10, 2))
    np.testing.assert_array_equal(x, np.arange(64) * 10 + 1)
    np.testing.assert_array_equal(ys, (np.arange(64) * 10 + 1)[::-1])


def test_a_barrier_in_a_branch_does_not_order_what_follows_the_branch():
    lines = _code(compile(_module(STORE_IF_LOAD), arch="sm_90", emit="ptx", threads=128).ptx)
    loads = [i for i, line in enumerate(lines) if re.search(r"\bld\.global", line)]
    barriers = [i for i, line in enumerate(lines) if line == "bar.sync 0;"]
    assert len(loads) == 2 and len(barriers) == 2
    assert barriers[0] < loads[0] < barriers[1] < loads[1]
    xs = np.zeros(64, np.int32)
    ys, zs = np.full(64, -1, np.int32), np.full(64, -1, np.int32)
    sim.run(_module(STORE_IF_LOAD), "k", (1,), xs, ys, zs, threads=128)
    np.testing.assert_array_equal(ys, np.full(64, 7))
    np.testing.assert_array_equal(zs, np.full(64, 7))


# y[i] = x[127 - i] and z[i] = x[127 - i]: both stores follow the load; the second store follows
# the load (`{after}` = %t1) or the first store (`{after}` = %t2)
REVERSE_TWICE = """
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


def _reverse_twice(after):
    module = parse_module(REVERSE_TWICE.format(after=after), "k.mlir")
    module.version = tilebc.Version(13, 5)
    return module


def _reverse_twice_barriers(after):
    ptx = compile(_reverse_twice(after), entry="k", arch="sm_90", emit="ptx", threads=128).ptx
    return ptx.count("bar.sync")


def _run_reverse_twice(after):
    x = np.arange(128, dtype=np.float32) * 0.5
    y, z = np.zeros(128, np.float32), np.zeros(128, np.float32)
    sim.run(_reverse_twice(after), "k", (1,), x, y, z, threads=128)
    assert np.array_equal(y, x[::-1]) and np.array_equal(z, x[::-1])


def test_two_stores_after_one_load_share_a_barrier():
    assert _reverse_twice_barriers("%t1") == 1
    _run_reverse_twice("%t1")


def test_a_store_after_a_store_gets_its_own_barrier():
    assert _reverse_twice_barriers("%t2") == 2
    _run_reverse_twice("%t2")
