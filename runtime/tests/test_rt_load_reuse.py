"""Loads of persistent loops. A view load that reads what an earlier one read takes its tile
(memory._same_load): NVIDIA's persistent RMSNorm reads each row twice, once for its sum of
squares and once to scale it; with no write between them, the second read is the first one's
registers. A write between them keeps the second read, whatever its token says, so the JIT reads
what the interpreter reads. And the row is read an iteration ahead (memory._Prefetch): the
prologue reads the first, each iteration the next (the emulator runs the fixture's case, a block
with no row included, in test_rt_sim_families)."""
import re
from pathlib import Path

import numpy as np
import pytest

import tilebc
from tilebc.text import parse_module
from tilebc_runtime import sim
from tilebc_runtime.compiler import compile as jit_compile

ROOT = Path(__file__).resolve().parents[2]
PERSISTENT = ROOT / "fixtures" / "bytecode" / "nn_rms_norm_persistent" / \
    "nn_rms_norm_persistent-13.5.tilebc"

VIEW = "partition_view<tile=(16), tensor_view<?xf32, strides=[1]>>"
# x[0:16] loaded, doubled and stored back, loaded again (after the store by its token, or not)
# and stored to y
KERNEL = f"""entry @k(%x: tile<ptr<f32>>, %n: tile<i32>, %xs: tile<i32>, %y: tile<ptr<f32>>, \
%yn: tile<i32>, %ys: tile<i32>) optimization_hints=<default = {{}}> {{
  %token = make_token : token
  %z = constant <i32: 0> : tile<i32>
  %vx = make_tensor_view %x, shape = [%n], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
  %vy = make_tensor_view %y, shape = [%yn], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
  %px = make_partition_view %vx : {VIEW}
  %py = make_partition_view %vy : {VIEW}
  %a, %ta = load_view_tko weak %px[%z] token = %token : {VIEW}, tile<i32> -> tile<16xf32>, token
  %b = addf %a, %a : tile<16xf32>
  %ts = store_view_tko weak %b, %px[%z] token = %token : tile<16xf32>, {VIEW}, tile<i32> -> token
  %c, %tc = load_view_tko weak %px[%z] token = TOKEN : {VIEW}, tile<i32> -> tile<16xf32>, token
  %s = store_view_tko weak %c, %py[%z] token = %token : tile<16xf32>, {VIEW}, tile<i32> -> token
  return
}}
"""


def test_the_persistent_rms_norm_reads_each_row_once_and_an_iteration_ahead():
    module = tilebc.load(PERSISTENT.read_bytes())
    whole_rows = module.functions[1].name  # a row a tile: both column loops run once
    for arch in ("sm_80", "sm_90"):
        ptx = jit_compile(module, whole_rows, arch, emit="ptx").ptx
        loop = ptx[re.search(r"^\$L_for_\d+:", ptx, re.M).start():]
        # a block's 2 x 256 f16 row tile over 128 threads: one vector of 4 halves each, read
        # once though the kernel loads it twice, and an iteration ahead: the first row before
        # the loop, the next one in it, moved into the current one's registers at its latch
        before = ptx[:len(ptx) - len(loop)]
        assert re.findall(r"ld\.global\S*", loop) == ["ld.global.v4.b16"]
        assert re.findall(r"ld\.global\S*", before[before.index("// for offset"):]) == \
            ["ld.global.v4.b16"]
        latch = loop[:loop.index("bra.uni $L_latch")]
        assert len(re.findall(r"mov\.b16 %h\d+, %h\d+;\n", latch[-400:])) == 4


@pytest.mark.parametrize("token", ["%ts", "%token"])
def test_a_write_between_two_loads_keeps_the_second(token):
    module = parse_module(KERNEL.replace("TOKEN", token))
    ptx = jit_compile(module, "k", "sm_90", emit="ptx").ptx
    assert len(re.findall(r"ld\.global", ptx)) == 2
    results = []
    for runner in (tilebc.interp.run, lambda *a: sim.run(*a, arch="sm_90")):
        x, y = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
        runner(module, "k", (1,), x, y)
        results.append(y)
    np.testing.assert_array_equal(results[0], 2 * np.arange(16, dtype=np.float32))
    np.testing.assert_array_equal(results[1], results[0])


# Kernels where taking an earlier tile, or reading an iteration ahead, would read other values
# than the interpreter: each must run as the interpreter runs it. x and y are f32[N] (16-element
# tiles); BODY sits after the views.
FRAME = f"""entry @k(%x: tile<ptr<f32>>, %n: tile<i32>, %xs: tile<i32>, %y: tile<ptr<f32>>, \
%yn: tile<i32>, %ys: tile<i32>) optimization_hints=<default = {{}}> {{
  %token = make_token : token
  %z = constant <i32: 0> : tile<i32>
  %one = constant <i32: 1> : tile<i32>
  %four = constant <i32: 4> : tile<i32>
  %bid, %by, %bz = get_tile_block_id : tile<i32>
  %nb, %nby, %nbz = get_num_tile_blocks : tile<i32>
  %vx = make_tensor_view %x, shape = [%n], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
  %vy = make_tensor_view %y, shape = [%yn], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
  %px = make_partition_view %vx : {VIEW}
  %py = make_partition_view %vy : {VIEW}
BODY
  return
}}
"""
LOAD = f"load_view_tko weak %px[{{}}] token = %token : {VIEW}, tile<i32> -> tile<16xf32>, token"
STORE = "store_view_tko weak {}, %p{}[{}] token = %token : tile<16xf32>, " + VIEW + \
    ", tile<i32> -> token"
STRIDED = "strided_view<tile=(16), traversal_strides=[16], tensor_view<?xf32, strides=[1]>>"
CASES = {
    # the loop writes x[0:16] after reading it: its next iteration must read the new values
    "a loop rewrites what it read": f"""
  %a, %ta = {LOAD.format('%z')}
  for %i in (%z to %four, step %one) : tile<i32> {{
    %c, %tc = {LOAD.format('%z')}
    %b = addf %c, %c : tile<16xf32>
    %ts = {STORE.format('%b', 'x', '%z')}
    continue
  }}
  %s = {STORE.format('%a', 'y', '%z')}""",
    # a loop that runs once, but skips its load (x has 80 elements): the later load must read
    # for itself (the reduction keeps the skipped load in the code)
    "a run-once loop may skip its load": f"""
  %eighty = constant <i32: 80> : tile<i32>
  %skip = cmpi equal %n, %eighty, signed : tile<i32> -> tile<i1>
  for %i in (%z to %one, step %one) : tile<i32> {{
    if %skip {{
      continue
    }}
    %a, %ta = {LOAD.format('%bid')}
    %f = reduce %a dim=0 identities=[0.000000e+0 : f32] : tile<16xf32> -> tile<f32>
    (%e0: tile<f32>, %e1: tile<f32>) {{
      %s0 = addf %e0, %e1 : tile<f32>
      yield %s0 : tile<f32>
    }}
    continue
  }}
  %two = constant <i32: 2> : tile<i32>
  %later = addi %bid, %two : tile<i32>
  %c, %tc = {LOAD.format('%bid')}
  %t = {STORE.format('%c', 'y', '%later')}""",
    # a persistent loop whose first iteration continues early: later loads still move on
    "a persistent loop continues early": f"""
  for %i in (%bid to %four, step %nb) : tile<i32> {{
    %first = cmpi equal %i, %z, signed : tile<i32> -> tile<i1>
    if %first {{
      continue
    }}
    %a, %ta = {LOAD.format('%i')}
    %s = {STORE.format('%a', 'y', '%i')}
    continue
  }}""",
}
# A persistent loop (one block) writes the row its next iteration reads: through x's own
# partition view, a strided view of its tensor view, or a second tensor view of its pointer.
WRITE_BACK = """{views}
  for %i in (%bid to %four, step %nb) : tile<i32> {{
    %a, %ta = """ + LOAD.format('%i') + """
    %i1 = addi %i, %one : tile<i32>
    %a2 = addf %a, %a : tile<16xf32>
    %s = {store}
    continue
  }}"""
CASES.update({
    "a persistent loop reads what it wrote": WRITE_BACK.format(
        views="", store=STORE.format('%a2', 'x', '%i1')),
    "a persistent loop reads what it wrote through a strided view": WRITE_BACK.format(
        views=f"  %sx = make_strided_view %vx : {STRIDED}",
        store=f"store_view_tko weak %a2, %sx[%i1] token = %token : tile<16xf32>, {STRIDED}, "
              "tile<i32> -> token"),
    "a persistent loop reads what it wrote through another tensor view": WRITE_BACK.format(
        views="  %vx2 = make_tensor_view %x, shape = [%n], strides = [1] : tile<i32> -> "
              f"tensor_view<?xf32, strides=[1]>\n  %px2 = make_partition_view %vx2 : {VIEW}",
        store=STORE.format('%a2', 'x2', '%i1')),
})


@pytest.mark.parametrize("name", sorted(CASES))
def test_loads_read_what_the_interpreter_reads(name):
    module = parse_module(FRAME.replace("BODY", CASES[name]))
    jit_compile(module, "k", "sm_90", emit="cubin")  # ptxas takes it
    results = []
    for runner in (tilebc.interp.run, lambda *a: sim.run(*a, arch="sm_90")):
        x, y = np.arange(80, dtype=np.float32), np.zeros(80, np.float32)
        runner(module, "k", (1 if "what it wrote" in name else 2,), x, y)
        results.append((x, y))
    (x0, y0), (x1, y1) = results
    np.testing.assert_array_equal(x1, x0)
    np.testing.assert_array_equal(y1, y0)
