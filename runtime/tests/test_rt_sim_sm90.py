"""sm_90 instructions on the PTX emulator beside wgmma: mbarrier phases and transaction counts,
cp.async.bulk and cp.async.mbarrier.arrive, elect.sync, stmatrix, setmaxnreg, one-CTA cluster
special registers, and the errors for what is refused or undefined (hand-written kernels)."""
import numpy as np
import pytest

from tilebc.interp.memory import GlobalMemory, host_bytes
from tilebc_runtime import sim
from tilebc_runtime.sim import isa_sm90


@pytest.fixture
def quick_deadlock(monkeypatch):
    """A wait that can never complete is reported after far fewer failed waits than the default
    limit: the same report, without spinning through 20,000 of them (seconds per launch)."""
    monkeypatch.setattr(isa_sm90, "STALL_LIMIT", 200)


def kernel(body, params="", threads=128, shared=""):
    return f""".version 8.0
.target sm_90a
.address_size 64
.visible .entry k({params})
.reqntid {threads}
{{
  .reg .b32 %r<64>;
  .reg .b64 %rd<32>;
  .reg .pred %p<16>;
  .shared .align 8 .b64 bar;
  .shared .align 128 .b8 smem[1024];
  {shared}
  mov.u32 %r0, %tid.x;
{body}
  ret;
}}
"""


def launch(ptx, *arrays, grid=1, scalars=()):
    memory = GlobalMemory()
    bases = [memory.map(host_bytes(a), f"a{i}").base for i, a in enumerate(arrays)]
    sim.emulate(ptx, "k", grid, bases + list(scalars), memory=memory)


def store_u32(reg, stride, index=0, slot="%r0", param="pout"):
    """Store `reg` to out[slot * stride + index] (u32 words)."""
    return f"""  ld.param.u64 %rd20, [{param}];
  mad.lo.s32 %r60, {slot}, {stride}, {index};
  mul.wide.u32 %rd21, %r60, 4;
  add.s64 %rd22, %rd20, %rd21;
  st.global.u32 [%rd22], {reg};"""


INIT = """  setp.ne.u32 %p0, %r0, 0;
  @%p0 bra $inited;
  mov.u32 %r1, {count};
  mbarrier.init.shared::cta.b64 [bar], %r1;
$inited:
  fence.mbarrier_init.release.cluster;
  bar.sync 0;"""


def test_mbarrier_phase_parity_and_state_tokens():
    body = INIT.format(count=128) + """
  mbarrier.test_wait.parity.shared.b64 %p1, [bar], 0;
  mbarrier.arrive.shared.b64 %rd1, [bar];
  mbarrier.test_wait.parity.shared.b64 %p2, [bar], 0;
  mbarrier.test_wait.parity.shared.b64 %p3, [bar], 1;
  mbarrier.test_wait.shared.b64 %p4, [bar], %rd1;
  mbarrier.arrive.release.cta.shared.b64 %rd2, [bar], 1;
  mbarrier.test_wait.shared.b64 %p5, [bar], %rd2;
  selp.u32 %r2, 1, 0, %p1;
  selp.u32 %r3, 1, 0, %p2;
  selp.u32 %r4, 1, 0, %p3;
  selp.u32 %r5, 1, 0, %p4;
  selp.u32 %r6, 1, 0, %p5;
""" + "\n".join(store_u32(f"%r{2 + i}", 5, i) for i in range(5))
    out = np.full((128, 5), 7, np.uint32)
    launch(kernel(body, ".param .u64 pout"), out)
    # before any arrival phase 0 is open; 128 arrivals complete it (parity 0 done, parity 1 =
    # the open phase 1); the token of phase 0 is done, phase 1's (one more round) is not yet
    assert (out == [0, 1, 0, 1, 1]).all()


def test_expect_tx_and_bulk_copy_complete_the_phase():
    body = INIT.format(count=1) + """
  @%p0 bra $issued;
  mbarrier.arrive.expect_tx.shared.b64 _, [bar], 256;
  mbarrier.test_wait.parity.shared.b64 %p6, [bar], 0;
  selp.u32 %r7, 1, 0, %p6;
  ld.param.u64 %rd3, [psrc];
  mov.u32 %r8, smem;
  cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r8], [%rd3], 256, [bar];
  """ + store_u32("%r7", 2, 1) + """
$issued:
$wait:
  mbarrier.try_wait.parity.shared::cta.b64 %p7, [bar], 0, 1000;
  @!%p7 bra $wait;
  mul.lo.u32 %r9, %r0, 2;
  mov.u32 %r10, smem;
  add.u32 %r11, %r10, %r9;
  ld.shared.u16 %r12, [%r11];
""" + store_u32("%r12", 2)
    src = np.arange(128, dtype=np.uint16) * 3 + 1
    out = np.zeros((128, 2), np.uint32)
    launch(kernel(body, ".param .u64 psrc, .param .u64 pout"), src, out)
    np.testing.assert_array_equal(out[:, 0], src)
    assert out[0, 1] == 0  # the arrival alone left 256 transaction bytes outstanding


def test_a_bulk_copy_lands_when_its_mbarrier_is_waited_on():
    """A bulk copy lands at the latest moment the ISA allows, the next wait on its mbarrier: the
    issuing thread reading the destination before it waits reads the old contents (as the
    hardware may), and the new ones after the wait."""
    body = INIT.format(count=1) + """
  mov.u32 %r8, smem;
  @%p0 bra $issued;
  mov.u32 %r13, 48879;
  st.shared.u32 [%r8], %r13;
  mbarrier.arrive.expect_tx.shared.b64 _, [bar], 256;
  ld.param.u64 %rd3, [psrc];
  cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r8], [%rd3], 256, [bar];
  ld.shared.u32 %r14, [%r8];
  """ + store_u32("%r14", 1, 1) + """
$wait:
  mbarrier.try_wait.parity.shared::cta.b64 %p7, [bar], 0, 1000;
  @!%p7 bra $wait;
  ld.shared.u32 %r15, [%r8];
  """ + store_u32("%r15", 1, 0) + """
$issued:"""
    src = np.arange(64, dtype=np.uint32) + 7
    out = np.zeros(2, np.uint32)
    launch(kernel(body, ".param .u64 psrc, .param .u64 pout"), src, out)
    assert out[1] == 48879 and out[0] == src[0]


COPY_IN_FLIGHT = INIT.format(count=1) + """
  @%p0 bra $issued;
  mbarrier.arrive.expect_tx.shared.b64 _, [bar], 256;
  ld.param.u64 %rd3, [psrc];
  mov.u32 %r8, smem;
  cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r8], [%rd3], 256, [bar];
  {after}
$issued:"""


@pytest.mark.parametrize("verb", ["init", "inval"])
def test_an_mbarrier_reset_with_copies_in_flight_is_refused(verb):
    after = ("mov.u32 %r1, 1;\n  mbarrier.init.shared::cta.b64 [bar], %r1;" if verb == "init"
             else "mbarrier.inval.shared::cta.b64 [bar];")
    src = np.arange(64, dtype=np.uint32)
    with pytest.raises(sim.SimExecutionError, match="still complete on this mbarrier"):
        launch(kernel(COPY_IN_FLIGHT.replace("{after}", after), ".param .u64 psrc"), src)


def test_a_copy_never_waited_for_is_reported_in_our_code():
    """Our code must wait for every copy it issues (tileiras's is not judged by it)."""
    from tilebc_runtime.sim.machine import load_kernel
    ptx = kernel(COPY_IN_FLIGHT.replace("{after}", ""), ".param .u64 psrc")
    src = np.arange(64, dtype=np.uint32)
    image = load_kernel(ptx, "k")
    image.serialize_wgmma = False
    with pytest.raises(sim.SimExecutionError, match="no thread waited for on their mbarrier"):
        launch(image, src)
    launch(ptx, src)


def test_cp_async_mbarrier_arrive_noinc_orders_shared_memory():
    """Each thread copies its word with cp.async and arrives (noinc); once the phase completes
    every thread reads its neighbour's word (no bar.sync: the mbarrier orders it)."""
    body = INIT.format(count=128) + """
  ld.param.u64 %rd3, [psrc];
  mul.wide.u32 %rd4, %r0, 4;
  add.s64 %rd5, %rd3, %rd4;
  mov.u32 %r8, smem;
  shl.b32 %r9, %r0, 2;
  add.u32 %r10, %r8, %r9;
  cp.async.ca.shared.global [%r10], [%rd5], 4;
  cp.async.mbarrier.arrive.noinc.shared.b64 [bar];
{wait}
  add.u32 %r11, %r0, 1;
  and.b32 %r11, %r11, 127;
  shl.b32 %r12, %r11, 2;
  add.u32 %r13, %r8, %r12;
  ld.shared.u32 %r14, [%r13];
""" + store_u32("%r14", 1)
    wait = """$wait:
  mbarrier.try_wait.parity.shared.b64 %p7, [bar], 0;
  @!%p7 bra $wait;"""
    src = np.arange(128, dtype=np.uint32) + 1000
    out = np.zeros(128, np.uint32)
    launch(kernel(body.replace("{wait}", wait), ".param .u64 psrc, .param .u64 pout"), src, out)
    np.testing.assert_array_equal(out, np.roll(src, -1))
    # without the arrival nothing waits for the copy, so it never lands: the read finds nothing
    body = body.replace("cp.async.mbarrier.arrive.noinc.shared.b64 [bar];", "")
    with pytest.raises(sim.SimMemoryError, match="no thread of this CTA has written"):
        launch(kernel(body.replace("{wait}", ""), ".param .u64 psrc, .param .u64 pout"), src,
               np.zeros(128, np.uint32))


def test_bulk_copy_shared_to_global():
    body = """  mov.u32 %r8, smem;
  shl.b32 %r9, %r0, 2;
  add.u32 %r10, %r8, %r9;
  mul.lo.u32 %r11, %r0, 7;
  st.shared.u32 [%r10], %r11;
  fence.proxy.async.shared::cta;
  bar.sync 0;
  setp.ne.u32 %p0, %r0, 0;
  @%p0 bra $done;
  ld.param.u64 %rd3, [pout];
  cp.async.bulk.global.shared::cta.bulk_group [%rd3], [%r8], 512;
  cp.async.bulk.commit_group;
  cp.async.bulk.wait_group.read 0;
$done:"""
    out = np.zeros(128, np.uint32)
    launch(kernel(body, ".param .u64 pout"), out)
    np.testing.assert_array_equal(out, np.arange(128, dtype=np.uint32) * 7)


def test_wait_that_can_never_complete_is_a_deadlock(quick_deadlock):
    body = INIT.format(count=1000) + """
  mbarrier.arrive.shared.b64 %rd1, [bar];
$wait:
  mbarrier.try_wait.parity.shared.b64 %p7, [bar], 0;
  @!%p7 bra $wait;"""
    with pytest.raises(sim.SimExecutionError, match="deadlock"):
        launch(kernel(body))


@pytest.mark.parametrize("body,message", [
    ("  mbarrier.arrive.shared.b64 %rd1, [bar];", "no initialised mbarrier"),
    (INIT.format(count=4) + "\n  @%p0 bra $one;\n  mbarrier.arrive.shared.b64 %rd1, [bar], 8;"
     "\n$one:", "more arrivals"),
    ("  mov.u32 %r1, 4;\n  mbarrier.init.shared.b64 [smem+4], %r1;", "8-byte aligned"),
])
def test_mbarrier_misuse_is_reported(body, message):
    with pytest.raises(sim.SimExecutionError, match=message):
        launch(kernel(body))


def test_elect_sync_picks_the_lowest_member_lane():
    body = """  and.b32 %r1, %r0, 31;
  setp.lt.u32 %p1, %r1, 5;
  @%p1 bra $skip;
  elect.sync %r2|%p2, 0xFFFFFFE0;
  selp.u32 %r3, 1, 0, %p2;
""" + store_u32("%r2", 2, 0) + "\n" + store_u32("%r3", 2, 1) + """
$skip:"""
    out = np.full((64, 2), 99, np.uint32)
    launch(kernel(body, ".param .u64 pout", threads=64), out)
    lanes = np.arange(64) % 32
    np.testing.assert_array_equal(out[lanes >= 5, 0], 5)
    np.testing.assert_array_equal(out[:, 1], np.where(lanes == 5, 1, np.where(lanes < 5, 99, 0)))


@pytest.mark.parametrize("trans", [False, True])
def test_stmatrix_stores_what_ldmatrix_loads(trans):
    """Lane l holds 0x(l)(l+100) halves; stmatrix.x2 writes two 8x8 tiles (rows 16 B apart),
    plain loads read them back in row order."""
    suffix = ".trans" if trans else ""
    body = f"""  and.b32 %r1, %r0, 31;
  add.u32 %r2, %r1, 100;
  shl.b32 %r3, %r2, 16;
  or.b32 %r4, %r3, %r1;
  add.u32 %r5, %r4, 0x00400040;
  and.b32 %r6, %r1, 15;
  shl.b32 %r7, %r6, 4;
  mov.u32 %r8, smem;
  add.u32 %r9, %r8, %r7;
  stmatrix.sync.aligned.m8n8.x2{suffix}.shared.b16 [%r9], {{%r4, %r5}};
  bar.sync 0;
  shl.b32 %r10, %r1, 3;
  add.u32 %r11, %r8, %r10;
  ld.shared.v2.u32 {{%r12, %r13}}, [%r11];
""" + store_u32("%r12", 2, 0) + "\n" + store_u32("%r13", 2, 1)
    out = np.zeros((32, 2), np.uint32)
    launch(kernel(body, ".param .u64 pout", threads=32), out)
    stored = out.view(np.uint16).reshape(16, 8)  # 16 rows of 8 halves = two tiles
    lane = np.arange(32)
    want = np.zeros((2, 8, 8), np.uint16)
    for matrix, add in ((0, 0), (1, 0x40)):
        want[matrix, lane // 4, 2 * (lane % 4)] = lane + add
        want[matrix, lane // 4, 2 * (lane % 4) + 1] = lane + 100 + add
        if trans:
            want[matrix] = want[matrix].T.copy()
    np.testing.assert_array_equal(stored, want.reshape(16, 8))


def test_cluster_special_registers_of_one_cta_clusters():
    body = """  mov.u32 %r1, %clusterid.x;
  mov.u32 %r2, %nclusterid.y;
  mov.u32 %r3, %cluster_ctarank;
  mov.u32 %r4, %cluster_nctaid.x;
  mov.u32 %r5, %ctaid.x;
  mov.u32 %r6, %ctaid.y;
  mad.lo.u32 %r7, %r6, 3, %r5;
  setmaxnreg.inc.sync.aligned.u32 240;
""" + "\n".join(store_u32(f"%r{1 + i}", 4, i, slot="%r7") for i in range(4))
    out = np.full((6, 4), 9, np.uint32)
    launch(kernel(body, ".param .u64 pout", threads=32), out, grid=(3, 2))
    np.testing.assert_array_equal(out, [[x, 2, 0, 1] for _ in range(2) for x in range(3)])


@pytest.mark.parametrize("line,message", [
    ("cp.async.bulk.tensor.3d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes "
     "[smem], [%rd1, {%r1, %r2, %r3}], [bar];", "im2col"),
    ("setmaxnreg.inc.sync.aligned.u32 20;", "multiple of 8"),
    ("mbarrier.pending_count.b64 %r1, %rd1;", "pending_count"),
])
def test_refused_sm90_forms_name_the_instruction(line, message):
    with pytest.raises(sim.UnsupportedInstruction, match=message) as error:
        sim.load_kernel(kernel("  " + line), "k")
    assert error.value.line is not None


def test_clusters_of_several_ctas_are_refused():
    ptx = kernel("").replace(".reqntid 128", ".reqntid 128\n.reqnctapercluster 2, 1, 1")
    with pytest.raises(sim.UnsupportedInstruction, match="clusters of 2x1x1"):
        sim.load_kernel(ptx, "k")


PRODUCER_CONSUMER = INIT.format(count=32) + """
  shr.u32 %r1, %r0, 5;
  mov.u32 %r8, smem;
  and.b32 %r2, %r0, 31;
  shl.b32 %r3, %r2, 2;
  add.u32 %r4, %r8, %r3;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra $producer;
$wait:
  mbarrier.try_wait.parity.shared.b64 %p2, [bar], 0;
  @!%p2 bra $wait;
  ld.shared.u32 %r5, [%r4];
""" + store_u32("%r5", 1, slot="%r2") + """
  bra $end;
$producer:
  mul.lo.u32 %r6, %r2, 11;
  st.shared.u32 [%r4], %r6;
  {named}
  mbarrier.arrive.release.cta.shared.b64 _, [bar];
$end:"""


def test_warp_specialised_consumer_waits_for_the_producer_warp():
    """Warp 0 (consumer) waits at a lower program counter than warp 1 (producer) arrives:
    the failed waits let the producer run."""
    out = np.zeros(32, np.uint32)
    ptx = kernel(PRODUCER_CONSUMER.replace("{named}", "barrier.sync 1, 32;"), ".param .u64 pout",
                 threads=64)
    launch(ptx, out)
    np.testing.assert_array_equal(out, np.arange(32, dtype=np.uint32) * 11)


def test_named_barrier_needs_its_threads_together(quick_deadlock):
    ptx = kernel(PRODUCER_CONSUMER.replace("{named}", "barrier.sync 1, 32;"), ".param .u64 pout",
                 threads=96)
    with pytest.raises(sim.SimExecutionError, match="barrier 1 for 32 threads reached by 64"):
        launch(ptx, np.zeros(32, np.uint32))
    # the producer warp waits for 64 threads; the consumer warp waits on the mbarrier
    ptx = kernel(PRODUCER_CONSUMER.replace("{named}", "barrier.sync 1, 64;"), ".param .u64 pout",
                 threads=64)
    with pytest.raises(sim.SimExecutionError, match="deadlock"):
        launch(ptx, np.zeros(32, np.uint32))
    # nobody arrives: every live thread ends up waiting
    ptx = kernel(PRODUCER_CONSUMER.replace("{named}", "bra $end;"), ".param .u64 pout",
                 threads=64)
    with pytest.raises(sim.SimExecutionError, match="deadlock"):
        launch(ptx, np.zeros(32, np.uint32))


def test_inline_asm_scope_registers_without_percent():
    """tileiras's inline asm declares `.reg .pred p;` in a `{ }` scope and uses it bare (as a
    guard too); an outer `p` elsewhere is a different register."""
    body = """  and.b32 %r1, %r0, 1;
  {
  .reg .pred p;
  setp.ne.b32 p, %r1, 0;
  selp.u32 %r2, 10, 20, p;
  @p add.u32 %r2, %r2, 1;
  @!p add.u32 %r2, %r2, 2;
  }
""" + store_u32("%r2", 1)
    out = np.zeros(32, np.uint32)
    launch(kernel(body, ".param .u64 pout", threads=32), out)
    np.testing.assert_array_equal(out, np.where(np.arange(32) % 2, 11, 22))


def test_named_barrier_hands_over_from_arriving_producers_to_syncing_consumers():
    """Warp 0 (consumer) syncs on barrier 1 for 64 threads before the producer warp has
    written; the producer's bar.arrive completes it, then the consumer reads. A consumer alone
    (no producer arrival) can never be released."""
    body = """  shr.u32 %r1, %r0, 5;
  and.b32 %r2, %r0, 31;
  mov.u32 %r8, smem;
  shl.b32 %r3, %r2, 2;
  add.u32 %r4, %r8, %r3;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra $producer;
  barrier.sync 1, 64;
  ld.shared.u32 %r5, [%r4];
""" + store_u32("%r5", 1, slot="%r2") + """
  bra $end;
$producer:
  mul.lo.u32 %r6, %r2, 13;
  st.shared.u32 [%r4], %r6;
  {arrive}
$end:"""
    out = np.zeros(32, np.uint32)
    launch(kernel(body.replace("{arrive}", "bar.arrive 1, 64;"), ".param .u64 pout",
                  threads=64), out)
    np.testing.assert_array_equal(out, np.arange(32, dtype=np.uint32) * 13)
    with pytest.raises(sim.SimExecutionError, match="named barrier that no running thread"):
        launch(kernel(body.replace("{arrive}", ""), ".param .u64 pout", threads=64),
               np.zeros(32, np.uint32))
    # without the barrier the consumer reads before the producer has written: an error
    with pytest.raises(sim.SimMemoryError):
        launch(kernel(body.replace("{arrive}", "").replace("  barrier.sync 1, 64;\n", ""),
                      ".param .u64 pout", threads=64), np.zeros(32, np.uint32))
