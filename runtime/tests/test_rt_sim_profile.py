"""The emulator's opt-in instrumentation (sim.profile) on small hand-written PTX: exact counts of
warp-instructions by class, global sectors against the ideal, shared-memory wavefronts against the
ideal, barriers, a rolled loop, divergence and CTA sampling. The expectations follow from the
hardware rules the profile documents (32-byte sectors; 32 banks of 4 bytes), not from the code."""
import numpy as np
import pytest

from tilebc.interp.memory import GlobalMemory, host_bytes
from tilebc_runtime import sim
from tilebc_runtime.sim import Profile

HEADER = """.version 7.8
.target sm_80
.address_size 64
"""


def profiled(body, *arrays, threads=32, grid=(1,), sample=None, shared=4096, params=None):
    """Run `body` with %rd0.. = the arrays' addresses (256-byte aligned), %r0 = %tid.x,
    %rd9 = 4*tid; returns the Profile. The prologue (ld.param × arrays, mov, mul.wide) and the
    final ret are part of the counts."""
    names = ", ".join(f".param .u64 p{i}" for i in range(len(arrays)))
    loads = "\n".join(f"ld.param.u64 %rd{i}, [p{i}];" for i in range(len(arrays)))
    ptx = f"""{HEADER}
.visible .entry k({names})
.maxntid {threads}, 1, 1
{{
.reg .pred %p<16>; .reg .b32 %r<40>; .reg .b64 %rd<40>; .reg .f32 %f<16>;
.shared .align 16 .b8 smem[{shared}];
{loads}
mov.u32 %r0, %tid.x;
mul.wide.u32 %rd9, %r0, 4;
{body}
ret;
}}
"""
    memory = GlobalMemory()
    addresses = [memory.map(host_bytes(a), f"array {i}", alignment=256).base
                 for i, a in enumerate(arrays)]
    profile = Profile(sample=sample)
    sim.emulate(ptx, "k", grid, addresses, memory=memory, profile=profile, source="test.ptx",
                check=False)  # the shared tests read words nobody wrote
    return profile


def test_coalesced_warp_load_and_store():
    """32 lanes read and write consecutive f32: 128 bytes = 4 sectors each, the ideal."""
    x = np.arange(32, dtype=np.float32)
    out = np.zeros(32, np.float32)
    p = profiled("""add.s64 %rd2, %rd0, %rd9; ld.global.f32 %f1, [%rd2];
add.f32 %f2, %f1, %f1;
add.s64 %rd3, %rd1, %rd9; st.global.f32 [%rd3], %f2;""", x, out)
    assert np.array_equal(out, 2 * x)
    r = p.report()
    assert r["global_ld_sectors"] == 4 and r["global_ld_ideal_sectors"] == 4
    assert r["global_st_sectors"] == 4 and r["global_st_ideal_sectors"] == 4
    assert r["global_ld_bytes"] == 128 and r["global_st_bytes"] == 128
    assert r["footprint_read_bytes"] == 128 and r["footprint_written_bytes"] == 128
    counts = r["instructions"]
    # ld.param ×2 (constant), mov, ret: other/const; mul.wide, add.s64 ×2: int
    assert counts["const_ld"] == 2
    assert counts["int"] == 3
    assert counts["fp32"] == 1
    assert counts["global_ld"] == 1 and counts["global_st"] == 1
    assert counts["other"] == 1 and counts["branch"] == 1
    assert r["total_instructions"] == 10


def test_strided_warp_load():
    """Lane i reads element 32*i (stride 128 bytes): 32 sectors where 4 would do."""
    x = np.zeros(32 * 32, np.float32)
    p = profiled("""mul.wide.u32 %rd4, %r0, 128; add.s64 %rd2, %rd0, %rd4;
ld.global.f32 %f1, [%rd2];""", x)
    r = p.report()
    assert r["global_ld_sectors"] == 32
    assert r["global_ld_ideal_sectors"] == 4
    assert r["footprint_read_bytes"] == 32 * 32


def test_two_warps_vector_load():
    """64 threads, ld.v4.f32 each (16 bytes): every warp reads 512 contiguous bytes, 16 sectors,
    the ideal; 2 warp-instructions."""
    x = np.zeros(256, np.float32)
    p = profiled("""mul.wide.u32 %rd4, %r0, 16; add.s64 %rd2, %rd0, %rd4;
ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd2];""", x, threads=64)
    r = p.report()
    assert r["instructions"]["global_ld"] == 2
    assert r["global_ld_sectors"] == 32 and r["global_ld_ideal_sectors"] == 32


def test_broadcast_load_is_one_sector():
    x = np.zeros(8, np.float32)
    p = profiled("ld.global.f32 %f1, [%rd0];", x)
    r = p.report()
    assert r["global_ld_sectors"] == 1 and r["global_ld_ideal_sectors"] == 1


def test_shared_conflict_free_and_conflicted():
    """Lane i stores word i (one wavefront, ideal); then reads word 32*i: every lane in bank 0,
    32 distinct words -> 32 wavefronts where 1 would do."""
    p = profiled("""mov.u32 %r1, smem; add.u32 %r2, %r1, %r0; shl.b32 %r3, %r0, 2;
add.u32 %r4, %r1, %r3; st.shared.u32 [%r4], %r0;
shl.b32 %r5, %r0, 7; add.u32 %r6, %r1, %r5; ld.shared.u32 %r7, [%r6];""")
    r = p.report()
    assert r["instructions"]["shared_st"] == 1 and r["instructions"]["shared_ld"] == 1
    assert r["shared_wavefronts"] == 1 + 32
    assert r["shared_ideal_wavefronts"] == 1 + 1


def test_shared_two_way_conflict_and_broadcast():
    """Stride 2 words: lanes i and i+16 share a bank with different words -> 2 wavefronts.
    Every lane reading the same word is a broadcast: 1 wavefront."""
    p = profiled("""mov.u32 %r1, smem; shl.b32 %r3, %r0, 3; add.u32 %r4, %r1, %r3;
ld.shared.u32 %r7, [%r4];
ld.shared.u32 %r8, [%r1];""")
    r = p.report()
    assert r["shared_wavefronts"] == 2 + 1
    assert r["shared_ideal_wavefronts"] == 1 + 1


def test_shared_vector_phases():
    """ld.shared.v4.u32 at 16*lane: 512 bytes, quarter-warp phases, no conflict: 4 wavefronts,
    the ideal. ld.shared.v2.u32 at 8*lane: half-warp phases: 2 wavefronts."""
    p = profiled("""mov.u32 %r1, smem; shl.b32 %r3, %r0, 4; add.u32 %r4, %r1, %r3;
ld.shared.v4.u32 {%r10, %r11, %r12, %r13}, [%r4];
shl.b32 %r5, %r0, 3; add.u32 %r6, %r1, %r5;
ld.shared.v2.u32 {%r14, %r15}, [%r6];""")
    r = p.report()
    assert r["shared_wavefronts"] == 4 + 2
    assert r["shared_ideal_wavefronts"] == 4 + 2


def test_ldmatrix_wavefronts():
    """ldmatrix.x4 with rows 16 bytes apart (a 128-byte contiguous 8x8 tile per matrix):
    4 wavefronts. Rows 128 bytes apart (an unswizzled 64-half row pitch): the 8 rows of a
    matrix hit the same 4 banks -> 8 wavefronts per matrix."""
    p = profiled("""mov.u32 %r1, smem; shl.b32 %r3, %r0, 4; add.u32 %r4, %r1, %r3;
ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r10, %r11, %r12, %r13}, [%r4];
shl.b32 %r5, %r0, 7; and.b32 %r5, %r5, 1023; add.u32 %r6, %r1, %r5;
ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r14, %r15, %r16, %r17}, [%r6];""")
    r = p.report()
    assert r["shared_wavefronts"] == 4 + 32
    assert r["shared_ideal_wavefronts"] == 4 + 4


def test_rolled_loop_counts_iterations_times_body():
    """A loop of 10 iterations whose body is 4 instructions (add, add, setp, bra): 40 warp-
    instructions from the loop, beside the straight-line ones; one load per iteration, 4 sectors
    each; the footprint is the 10 distinct 128-byte rows."""
    x = np.zeros(32 * 10, np.float32)
    p = profiled("""mov.u32 %r1, 0; add.s64 %rd2, %rd0, %rd9;
LOOP:
ld.global.f32 %f1, [%rd2];
add.s64 %rd2, %rd2, 128;
add.u32 %r1, %r1, 1;
setp.lt.u32 %p1, %r1, 10;
@%p1 bra LOOP;""", x)
    r = p.report()
    counts = r["instructions"]
    assert counts["global_ld"] == 10
    assert counts["branch"] == 10 + 1  # the loop's bra, then ret
    # mul.wide, add.s64 (setup), then per iteration add.s64, add.u32, setp
    assert counts["int"] == 2 + 10 * 3
    assert r["total_instructions"] == 1 + 1 + 2 + 1 + 10 * 5 + 1  # ld.param, mov, ..., ret
    assert r["global_ld_sectors"] == 40 and r["global_ld_ideal_sectors"] == 40
    assert r["footprint_read_bytes"] == 10 * 128
    # per PTX instruction: the load is executed 10 times by the one warp
    load = next(i for i, entry in enumerate(p.image.code)
                if entry[4] is not None and entry[4].opcode == "ld" and "global" in
                entry[4].modifiers)
    assert p.per_line[load] == 10


def test_predicated_off_still_issues_and_divergence_counts_warps():
    """64 threads; only warp 1's lanes take the branch. The guarded store is issued by both
    warps but only warp 1 stores; the branch target's body is issued by warp 1 only."""
    out = np.zeros(64, np.float32)
    p = profiled("""setp.ge.u32 %p1, %r0, 32;
@%p1 bra TAKEN;
bra.uni DONE;
TAKEN:
add.s64 %rd2, %rd0, %rd9; st.global.f32 [%rd2], %f1;
DONE:
@%p1 st.global.f32 [%rd0], %f1;""", out, threads=64)
    r = p.report()
    counts = r["instructions"]
    assert counts["global_st"] == 1 + 2  # the branch body by warp 1; the guarded store by both
    assert r["global_st_sectors"] == 4 + 1


def test_barrier_counts():
    p = profiled("bar.sync 0; bar.sync 0;", threads=128)
    r = p.report()
    assert r["barriers"] == 2
    assert r["instructions"]["barrier"] == 2 * 4


def test_sampled_grid_scales_counts():
    """A grid of 100 CTAs sampled at 5: counts are scaled by 20 and equal the full run's."""
    x = np.zeros(32 * 100, np.float32)
    body = """mov.u32 %r1, %ctaid.x; mul.wide.u32 %rd4, %r1, 128; add.s64 %rd2, %rd0, %rd4;
add.s64 %rd2, %rd2, %rd9; ld.global.f32 %f1, [%rd2];"""
    full = profiled(body, x, grid=(100,)).report()
    sampled = profiled(body, x, grid=(100,), sample=5)
    assert sampled.ctas_run == 5
    r = sampled.report()
    assert r["total_instructions"] == full["total_instructions"]
    assert r["global_ld_sectors"] == full["global_ld_sectors"] == 400
    assert r["footprint_read_bytes"] == full["footprint_read_bytes"] == 100 * 128


def test_off_by_default_runs_unchanged():
    """Without a profile the emulator runs every CTA and computes the same result."""
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    ptx = HEADER + """
.visible .entry k(.param .u64 a, .param .u64 b)
.maxntid 64, 1, 1
{
.reg .b32 %r<4>; .reg .b64 %rd<8>; .reg .f32 %f<4>;
ld.param.u64 %rd0, [a]; ld.param.u64 %rd1, [b];
mov.u32 %r0, %tid.x; mul.wide.u32 %rd2, %r0, 4;
add.s64 %rd3, %rd0, %rd2; ld.global.f32 %f1, [%rd3]; add.s64 %rd4, %rd1, %rd2;
st.global.f32 [%rd4], %f1;
ret;
}
"""
    memory = GlobalMemory()
    a = memory.map(host_bytes(x), "x").base
    b = memory.map(host_bytes(out), "out").base
    sim.emulate(ptx, "k", (1,), [a, b], memory=memory)
    assert np.array_equal(out, x)


@pytest.mark.parametrize("kernel", ["mov", "selp"])
def test_classify_basics(kernel):
    from tilebc_runtime.sim.profile import classify
    from tilebc_runtime.sim.parser import parse_ptx
    program = parse_ptx(HEADER + """
.visible .entry k()
{
.reg .pred %p<2>; .reg .b32 %r<4>; .reg .f32 %f<4>; .reg .f64 %fd<2>;
mov.u32 %r1, 3; selp.b32 %r2, %r1, %r1, %p1; fma.rn.f32 %f1, %f2, %f3, %f1;
setp.lt.f32 %p1, %f1, %f2; ex2.approx.ftz.f32 %f1, %f1; cvt.rn.f32.f64 %f1, %fd1;
add.f64 %fd1, %fd1, %fd1; shfl.sync.bfly.b32 %r1, %r1, 1, 31, -1;
ret;
}
""")
    got = [classify(ins) for ins in program.kernels["k"].instructions]
    assert got == ["other", "int", "fp32", "fp32", "sfu", "conversion", "fp64", "shuffle",
                   "branch"]


def test_cp_async_counts_global_sectors_and_shared_store():
    """32 lanes copy 16 contiguous bytes each: 512 bytes = 16 sectors (ideal) read from global,
    and a shared store in quarter-warp phases: 4 wavefronts (ideal)."""
    x = np.zeros(128, np.float32)
    p = profiled("""mul.wide.u32 %rd4, %r0, 16; add.s64 %rd2, %rd0, %rd4;
mov.u32 %r1, smem; shl.b32 %r3, %r0, 4; add.u32 %r4, %r1, %r3;
cp.async.cg.shared.global [%r4], [%rd2], 16;
cp.async.wait_all;""", x)
    r = p.report()
    assert r["instructions"]["global_ld"] == 1
    assert r["global_ld_sectors"] == 16 and r["global_ld_ideal_sectors"] == 16
    assert r["shared_wavefronts"] == 4 and r["shared_ideal_wavefronts"] == 4


def test_sector_sets_merge_a_logarithmic_number_of_times(monkeypatch):
    # a working set of 8 M distinct sectors arriving 20,000 at a time: the merge threshold grows
    # with what stays after each merge (it used to merge everything again on every access past
    # 2 M: quadratic), and the merged set is the same as numpy's
    from tilebc_runtime.sim import profile as module
    merges = []
    distinct = module.distinct
    monkeypatch.setattr(module, "distinct", lambda values: merges.append(values.size)
                        or distinct(values))
    p = Profile()
    for i in range(400):
        p._read.append(np.arange(i * 20000, (i + 1) * 20000, dtype=np.uint64))
        p._pending += 20000
        if p._pending > p._compact_at:
            p._compact()
    assert 1 <= len(merges) <= 3
    p._compact()
    assert np.array_equal(p._read[0], np.arange(8_000_000, dtype=np.uint64))
    shuffled = np.random.default_rng(2).integers(0, 1 << 40, 50_000).astype(np.uint64)
    assert np.array_equal(distinct(np.concatenate([shuffled, shuffled[::3]])),
                          np.unique(shuffled))
