"""TMA on the PTX emulator (hand-written kernels): tile-mode cp.async.bulk.tensor through a tensor
map bound to a kernel parameter (sim/tensormap.py): zero fill outside the tensor, swizzled
placement in shared memory, the box's bytes completing the mbarrier, stores clipped to the tensor,
and the errors for map bytes and unbound maps."""
import numpy as np
import pytest

from tilebc.interp.memory import GlobalMemory, host_bytes
from tilebc_runtime import sim
from tilebc_runtime.sim.tensormap import TensorMap

from test_rt_sim_sm90 import quick_deadlock  # noqa: F401 (a fixture)


def kernel(body, threads=32):
    return f""".version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 pin, .param .u64 pout, .param .align 64 .b8 tmap[128])
.reqntid {threads}
{{
  .reg .b32 %r<64>;
  .reg .b64 %rd<32>;
  .reg .pred %p<16>;
  .shared .align 8 .b64 bar;
  .shared .align 1024 .b8 smem[2048];
  mov.u32 %r0, %tid.x;
  setp.ne.u32 %p0, %r0, 0;
  @%p0 bra $inited;
  mov.u32 %r1, 1;
  mbarrier.init.shared::cta.b64 [bar], %r1;
$inited:
  fence.mbarrier_init.release.cluster;
  bar.sync 0;
{body}
  ret;
}}
"""


def load_box(x, y, expect, issue="[tmap, {%r2, %r3}]", extra="", words=16):
    """Thread 0 copies the box at (x, y) into smem and arrives expecting `expect` bytes; every
    thread waits for the phase, then thread i < `words` stores smem's u32 word i to out."""
    return f"""  @%p0 bra $issued;
  mov.u32 %r2, {x};
  mov.u32 %r3, {y};
{extra}
  cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
      [smem], {issue}, [bar];
  mbarrier.arrive.expect_tx.shared.b64 %rd1, [bar], {expect};
$issued:
$wait:
  mbarrier.try_wait.parity.shared.b64 %p1, [bar], 0;
  @!%p1 bra $wait;
  setp.ge.u32 %p2, %r0, {words};
  @%p2 bra $end;
  mul.wide.u32 %rd2, %r0, 4;
  mov.u32 %r4, smem;
  cvt.u64.u32 %rd3, %r4;
  add.s64 %rd3, %rd3, %rd2;
  ld.shared.u32 %r5, [%rd3];
  ld.param.u64 %rd4, [pout];
  add.s64 %rd5, %rd4, %rd2;
  st.global.u32 [%rd5], %r5;
$end:"""


def launch(ptx, source, out, tensor_map):
    memory = GlobalMemory()
    base = memory.map(host_bytes(source), "in").base
    out_base = memory.map(host_bytes(out), "out").base
    placed = TensorMap(base, source.itemsize, tuple(reversed(source.shape)),
                       tuple(reversed(source.strides[:-1])), *tensor_map)
    sim.emulate(ptx, "k", 1, [base, out_base, placed], memory=memory)


def test_load_fills_outside_the_tensor_with_zeros():
    # a 5 x 40 u16 tensor, box 4 rows x 8 elements at (x=36, y=3): columns 36..39 of rows 3, 4
    source = np.arange(1, 201, dtype=np.uint16).reshape(5, 40)
    out = np.full(32, 0xDEAD, np.uint32)
    launch(kernel(load_box(36, 3, 64)), source, out, ((8, 4), 0))
    want = np.zeros((4, 8), np.uint16)
    want[:2, :4] = source[3:5, 36:40]
    np.testing.assert_array_equal(out[:16].view(np.uint16).reshape(4, 8), want)


@pytest.mark.parametrize("address", ["  mov.u64 %rd7, tmap;",  # its .param-space address
                                     "  mov.u64 %rd6, tmap;\n  cvta.param.u64 %rd7, %rd6;"])
def test_negative_coordinates_and_the_map_through_a_register(address):
    source = np.arange(1, 201, dtype=np.uint16).reshape(5, 40)
    out = np.full(32, 0xDEAD, np.uint32)
    launch(kernel(load_box(-2, -1, 64, "[%rd7, {%r2, %r3}]", address)), source, out,
           ((8, 4), 0))
    want = np.zeros((4, 8), np.uint16)
    want[1:, 2:] = source[0:3, 0:6]
    np.testing.assert_array_equal(out[:16].view(np.uint16).reshape(4, 8), want)


def test_128_byte_swizzle_moves_each_16_byte_unit_of_row_r_to_unit_xor_r_mod_8():
    # 8 rows x 64 u16 (128-byte rows): unit j of row r lands at unit j ^ (r % 8) of that row
    source = np.arange(8 * 64, dtype=np.uint16).reshape(8, 64)
    store = "st.global.u32 [%rd5], %r5;"
    body = load_box(0, 0, 1024, words=32).replace(store, store + """
  add.s64 %rd3, %rd3, 128;
  add.s64 %rd5, %rd5, 128;
  ld.shared.u32 %r5, [%rd3];
  st.global.u32 [%rd5], %r5;""")
    # only 2 x 32 words come back: rows 0 and 1 of smem
    out = np.zeros(64, np.uint32)
    launch(kernel(body), source, out, ((64, 8), 128))
    got = out.view(np.uint16).reshape(2, 64)
    for r in range(2):
        for j in range(8):
            np.testing.assert_array_equal(got[r, 8 * (j ^ r):8 * (j ^ r) + 8],
                                          source[r, 8 * j:8 * j + 8])
    assert not np.array_equal(got[1], source[1])  # row 1 really moved


def test_the_phase_waits_for_the_box_bytes(quick_deadlock):
    # expecting 16 bytes more than the box brings: the phase never completes
    source = np.arange(1, 201, dtype=np.uint16).reshape(5, 40)
    out = np.zeros(32, np.uint32)
    with pytest.raises(sim.SimExecutionError, match="deadlock: mbarrier waits failed 200 times"):
        launch(kernel(load_box(0, 0, 80)), source, out, ((8, 4), 0))


def test_store_writes_only_the_elements_inside_the_tensor():
    # threads fill the 4 x 8 u16 box with 1..32, thread 0 stores it at (x=36, y=3) of 5 x 40
    body = """  add.u32 %r6, %r0, 1;
  mul.wide.u32 %rd2, %r0, 2;
  mov.u32 %r4, smem;
  cvt.u64.u32 %rd3, %r4;
  add.s64 %rd3, %rd3, %rd2;
  cvt.u16.u32 %rs1, %r6;
  st.shared.u16 [%rd3], %rs1;
  fence.proxy.async.shared::cta;
  bar.sync 0;
  @%p0 bra $done;
  mov.u32 %r2, 36;
  mov.u32 %r3, 3;
  cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [tmap, {%r2, %r3}], [smem];
  cp.async.bulk.commit_group;
  cp.async.bulk.wait_group.read 0;
$done:"""
    ptx = kernel(body).replace(".reg .pred", ".reg .b16 %rs<4>;\n  .reg .pred")
    target = np.full((5, 40), 7, np.uint16)
    out = np.zeros(32, np.uint32)
    memory = GlobalMemory()
    base = memory.map(host_bytes(target), "in").base
    out_base = memory.map(host_bytes(out), "out").base
    sim.emulate(ptx, "k", 1, [base, out_base, TensorMap(base, 2, (40, 5), (80,), (8, 4))],
                memory=memory)
    want = np.full((5, 40), 7, np.uint16)
    box = np.arange(1, 33, dtype=np.uint16).reshape(4, 8)
    want[3:5, 36:40] = box[:2, :4]
    np.testing.assert_array_equal(target, want)


def test_reading_map_bytes_or_an_unbound_map_is_an_error():
    source = np.arange(1, 201, dtype=np.uint16).reshape(5, 40)
    out = np.zeros(32, np.uint32)
    with pytest.raises(sim.SimMemoryError, match="tensor-map parameter"):
        launch(kernel("  ld.param.u32 %r9, [tmap+8];"), source, out, ((8, 4), 0))
    memory = GlobalMemory()
    with pytest.raises(sim.SimExecutionError, match="no tensor map"):
        sim.emulate(kernel(load_box(0, 0, 64)), "k", 1, [0, 0, 0], memory=memory)


def test_map_forms_not_modelled_are_refused():
    with pytest.raises(sim.SimExecutionError, match="swizzle"):
        TensorMap(0, 2, (64, 8), (128,), (32, 8), 128).validate()  # 64-byte rows, 128 swizzle
    with pytest.raises(sim.UnsupportedInstruction, match="tensormap"):
        sim.load_kernel(kernel("  tensormap.replace.tile.global_address.shared::cta.b1024.b64 "
                               "[smem], %rd1;"), "k")


def test_a_box_lands_when_its_mbarrier_is_waited_on():
    """A tensor copy lands at the latest moment the ISA allows, the next wait on its mbarrier:
    read before the wait, the destination still holds what it held (as on the hardware it may)."""
    source = np.arange(1, 201, dtype=np.uint16).reshape(5, 40)
    out = np.full(32, 0xDEAD, np.uint32)
    before = """  mov.u32 %r9, smem;
  mov.u32 %r10, 48879;
  st.shared.u32 [%r9], %r10;"""
    body = load_box(0, 0, 64, extra=before).replace("$issued:\n", """  ld.shared.u32 %r11, [%r9];
  ld.param.u64 %rd8, [pout];
  st.global.u32 [%rd8+64], %r11;
$issued:
""", 1)
    launch(kernel(body), source, out, ((8, 4), 0))
    assert out[16] == 48879  # thread 0's read before its wait
    np.testing.assert_array_equal(out[:16].view(np.uint16).reshape(4, 8), source[:4, :8])
