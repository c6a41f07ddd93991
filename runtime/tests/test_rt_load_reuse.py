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
