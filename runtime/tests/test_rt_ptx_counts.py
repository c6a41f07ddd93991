"""Counts the compiler reads off PTX text for the performance model (perf/ptx_counts.py), against
the emulator's counts of the same code, and the compile-time choice of wgmma or mma.sync that
they feed."""
import functools

import numpy as np
import pytest

from tilebc.interp.memory import GlobalMemory, host_bytes
from tilebc_runtime import sim
from tilebc_runtime.compiler import compile as jit_compile
from tilebc_runtime.perf import ptx_counts
from tilebc_runtime.perf.model import Hardware, launch_counts
from tilebc_runtime.perf.ptx_counts import TRIP, cheaper

from test_rt_perf_model import LOOP
from test_rt_sim_mma import FIXTURES, RNG, _pipelined_k_loop_kernel, mmaf_kernel


def test_a_loop_counts_as_the_emulator_runs_it_at_that_trip_count():
    """LOOP runs its body 7 times: read with a trip count of 7, the text gives the emulator's
    PTX instruction counts, sectors and load rounds for one CTA of two warps."""
    x = np.ones(64 * 7, np.float32)
    memory = GlobalMemory()
    base = memory.map(host_bytes(x), "x", alignment=256).base
    profile = sim.Profile()
    sim.emulate(LOOP, "k", (1,), [base], memory=memory, profile=profile)
    emulated = launch_counts(profile)
    static = ptx_counts.ptx_counts(LOOP.splitlines(), threads=64, trip=7)
    assert static.instructions == emulated.instructions
    assert static.instructions["fp32"] == 2 * 7 and static.instructions["global_st"] == 2
    assert static.global_sectors == emulated.global_sectors == 2 * 7 * 4 + 2 * 4
    assert static.load_rounds_per_warp == emulated.load_rounds_per_warp == 7
    assert ptx_counts.ptx_counts(LOOP.splitlines(), threads=64, trip=3) \
        .instructions["fp32"] == 2 * 3


@pytest.mark.parametrize("wgmma", [False, True])
def test_a_k_loop_of_the_nominal_trip_count_has_the_emulators_flops(wgmma):
    """The pipelined K loop (cp.async stages, 128 threads, one CTA) run TRIP times on the
    emulator: its mma.sync / wgmma flops and tensor instructions are what the text gives."""
    m = n = 64
    k = 32
    module = _pipelined_k_loop_kernel(m, n, k)
    result = jit_compile(module, entry="k", arch="sm_90", emit="ptx", threads=128,
                         wgmma=wgmma, tma=False)
    a = RNG.uniform(-1, 1, (m, k * TRIP)).astype(np.float16)
    b = RNG.uniform(-1, 1, (k * TRIP, n)).astype(np.float16)
    c = np.zeros((m, n), np.float32)
    profile = sim.Profile()
    sim.run(module, "k", (1, 1), a, b, c, np.int32(TRIP), arch="sm_90", threads=128,
            wgmma=wgmma, tma=False, profile=profile)
    emulated = launch_counts(profile)
    static = ptx_counts.ptx_counts(result.ptx.splitlines(), threads=128)
    assert static.tensor_flops == emulated.tensor_flops == {"f16": 2 * m * n * k * TRIP}
    assert static.wgmma_flops == emulated.wgmma_flops
    assert bool(static.wgmma_flops) == wgmma
    assert static.instructions["tensor"] == emulated.instructions["tensor"]


def test_a_spinning_wait_counts_once_and_tma_bytes_come_from_expect_tx():
    lines = """
    mov.u32 %r1, 0;
    $L_for:
    mbarrier.arrive.expect_tx.shared::cta.b64 %rd1, [%r2], 8192;
    cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r3], [%rd2, {%r4, %r5}], [%r2];
    $L_wait:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r2], %r6;
    @!%p1 bra $L_wait;
    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r7, %r8, %r9, %r10}, [%r11];
    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1, %f2, %f3, %f4}, {%r7, %r8, %r9, %r10}, {%r12, %r13}, {%f1, %f2, %f3, %f4};
    bar.sync 0;
    add.s32 %r1, %r1, 1;
    setp.lt.s32 %p2, %r1, 5;
    @%p2 bra $L_for;
    ret;
    """.splitlines()
    counts = ptx_counts.ptx_counts(lines, threads=64, trip=5)
    assert counts.load_rounds_per_warp == 5  # the TMA load's block, each pass
    # two warps; the body 5 times, the wait inside it too (once a pass, not spinning)
    assert counts.instructions["tensor"] == 2 * 5
    assert counts.tensor_flops == {"f16": 2 * 5 * 2 * 16 * 8 * 16}
    assert counts.tma_sectors == 5 * 8192 / 32
    assert counts.shared_wavefronts == 5 * 8192 / 128 + 2 * 5 * 4  # TMA lines, 4 matrices
    assert counts.barriers == 5 and counts.instructions["barrier"] == 2 * 5
    assert counts.total_instructions == 2 * (1 + 5 * 10 + 1)  # mov, the body, ret


def test_a_loop_with_a_continue_and_a_held_a_operand():
    """Two branches back to one head are one loop (a `continue` and the latch), not two nested
    ones; a wgmma whose A is a register vector reads only B from shared memory (as the profile
    counts it), and the entry's parameter list is no instruction."""
    lines = """
    .visible .entry k(
        .param .u64 k_param_0
    )
    {
    $L_head:
    @%p1 bra.uni $L_head;
    wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%f1, %f2}, %rd1, %rd2, 1, 1, 1, 0, 1;
    wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%f1, %f2}, {%r1, %r2, %r3, %r4}, %rd2, 1, 1, 1, 1;
    @%p2 bra $L_head;
    ret;
    }
    """.splitlines()
    counts = ptx_counts.ptx_counts(lines, threads=128, trip=4)
    assert counts.total_instructions == 4 * (1 + 4 * 4)  # four warps: ret, and the body 4 times
    b_bytes, a_bytes = 64 * 16 * 2, 64 * 16 * 2
    per_pass = ((b_bytes + a_bytes) // 128 + b_bytes // 128)  # once per warpgroup
    assert counts.shared_wavefronts == 4 * per_pass
    assert counts.wgmma_flops == {"f16": 4 * 2 * 2 * 64 * 64 * 16}


def _choice(ptx: str) -> str:
    return "wgmma" if "wgmma.mma_async" in ptx else "mma.sync"


def test_sm90_default_takes_the_kind_the_model_estimates_faster():
    """compile's default lowers a kernel with a product wgmma fits both ways and keeps the
    faster by the model: wgmma where cp.async or TMA stages the operands (2x faster than
    mma.sync on an H100), mma.sync where wgmma's operands would go through st.shared (1.45x
    slower there; results/gpu_only.md). The log says what was estimated."""
    by_stores = mmaf_kernel("f16", 64, 64, 16)
    copied = _pipelined_k_loop_kernel(128, 128, 64)
    default = jit_compile(by_stores, arch="sm_90", emit="ptx", threads=128)
    assert _choice(default.ptx) == "mma.sync" and "estimate: mma.sync" in default.log
    default = jit_compile(copied, entry="k", arch="sm_90", emit="ptx", threads=128)
    assert _choice(default.ptx) == "wgmma" and "estimate: wgmma" in default.log
    assert "cp.async.bulk.tensor" in default.ptx  # aligned views: TMA fills the stages
    assert _choice(jit_compile(by_stores, arch="sm_90", emit="ptx", threads=128,
                               wgmma=True).ptx) == "wgmma"
    assert _choice(jit_compile(copied, entry="k", arch="sm_90", emit="ptx", threads=128,
                               wgmma=False).ptx) == "mma.sync"
    copies = jit_compile(copied, entry="k", arch="sm_90", emit="ptx", threads=128, tma=False).ptx
    assert _choice(copies) == "wgmma" and "cp.async.cg.shared.global" in copies
    assert "wgmma" not in jit_compile(copied, entry="k", arch="sm_80", emit="ptx",
                                      threads=128).ptx


def test_a_kernel_refused_at_256_threads_still_gets_the_models_choice(monkeypatch):
    """The 128-row attention takes two warpgroups on wgmma; where the lowering refuses 256
    threads, wgmma with one warpgroup and mma.sync are compared at 128."""
    from tilebc.errors import TilebcError
    from tilebc_runtime import compiler
    original = compiler.check_code_size

    def refuse_256(module, function, threads):
        if threads == 256:
            raise TilebcError("refused at 256 threads")
        return original(module, function, threads)
    path = FIXTURES / "nn_flash_attention_tile" / "nn_flash_attention_tile-13.5.tilebc"
    assert 256 in [k.threads_per_cta for k in jit_compile(path, arch="sm_90",
                                                          emit="ptx").kernels.values()]
    monkeypatch.setattr(compiler, "check_code_size", refuse_256)
    result = jit_compile(path, arch="sm_90", emit="ptx")
    assert [k.threads_per_cta for k in result.kernels.values()] == [128, 128, 128]
    estimates = [line for line in result.log.splitlines() if "estimate" in line]
    assert len(estimates) == 3 and all("wgmma (128 threads)" in line for line in estimates)


def test_the_choice_follows_the_models_knobs(monkeypatch):
    """The same kernel with the model's wgmma rate cut to a tenth: the compiler takes mma.sync.
    And the candidates it compares are the two lowerings compile gives when forced."""
    copied = _pipelined_k_loop_kernel(128, 128, 64)
    seen = []

    def slow_wgmma(candidates, hw=Hardware(), trip=TRIP):
        seen.append([(list(lines), threads) for lines, threads, _ in candidates])
        return cheaper(candidates, hw.with_(wgmma_efficiency=0.1), trip)
    monkeypatch.setattr(ptx_counts, "cheaper", slow_wgmma)
    result = jit_compile(copied, entry="k", arch="sm_90", emit="ptx", threads=128)
    assert _choice(result.ptx) == "mma.sync" and "estimate: mma.sync" in result.log
    [[(wgmma_lines, wgmma_threads), (sync_lines, sync_threads)]] = seen
    assert wgmma_threads == sync_threads == 128
    for lines, forced in ((wgmma_lines, True), (sync_lines, False)):
        ptx = jit_compile(copied, entry="k", arch="sm_90", emit="ptx", threads=128,
                          wgmma=forced).ptx
        assert "\n".join(lines) in ptx
    monkeypatch.setattr(ptx_counts, "cheaper", functools.partial(cheaper, trip=TRIP))
    assert _choice(jit_compile(copied, entry="k", arch="sm_90", emit="ptx",
                               threads=128).ptx) == "wgmma"
