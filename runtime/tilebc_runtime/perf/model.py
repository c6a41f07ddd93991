"""An H100-class throughput/latency model turning the emulator's counts into an estimated time.

    hw = Hardware.h100_sxm()                      # or Hardware.h100_sxm().with_(sms=114, ...)
    counts = launch_counts(profile, facts)         # sim.profile.Profile + perf.static.SassFacts
    est = estimate(counts, hw)                     # at the launch's grid
    big = estimate(counts, hw, grid=hw.sms * 64)   # "at scale": same per-CTA work, many waves
    est.time_us, est.bound, est.bounds

Every figure is an ESTIMATE. Four knobs (the per-launch cost, the CTA launch rate, the L2 hit
latency and latency hiding by resident warps) were fitted to ten GPU-filling launches timed on an
H100 (benchmarks/results/gpu_scale.md), the tensor and L2 terms checked against GEMMs timed there
(benchmarks/results/gpu_only.md); the assumptions, the public figures, the fit and the blind
spots are written down in benchmarks/MODEL.md.

The kernel's time combines the largest throughput bound of
- SM-side throughput on the busiest SM (it runs ceil(grid / SMs) CTAs): issue (all SASS
  instructions, `issue_per_clk` per SM), each pipe (FP32, FP16, FP64, INT, SFU, conversions,
  shuffles, load/store unit) at its warp-instructions per clock, L1/shared (shared wavefronts
  plus global and local sectors at `l1_sectors_per_clk`; TMA's sectors skip L1, its shared
  writes are wavefronts), and tensor cores (mma.sync flops at the
  mma.sync rate for the element type, plus the launch's L1/shared time: an mma.sync K loop
  alternates ldmatrix and mma rather than overlapping them; wgmma flops at the peak rate times
  `wgmma_efficiency`, plus the launch's issue time: wgmma reads shared memory itself, but a
  warpgroup waiting on its group issues nothing, and what it issues between groups (attention's
  softmax) needs the group's result);
- memory: DRAM (the unique footprint at the achievable HBM bandwidth), L2 (every sector a warp
  access touches: those it needs at 32 bytes, scattered ones beyond them at
  `l2_scattered_sector_bytes`, at the L2 bandwidth, and per active SM at
  `l2_bytes_per_clk_per_sm`);
- CTA launch: the GPU starts `cta_launch_per_clk` CTAs per clock over all SMs (not on the SM:
  see below);
with
- latency: waves of resident CTAs (ceil(CTAs per SM / occupancy)) times one warp's critical path
  (`critical_path_per_warp`: issue over the executed basic blocks with a latency per
  instruction class; global loads at `l2_latency` when the launch's footprint fits in L2, else
  `memory_latency`), which decides small grids and low occupancy. Without a profile (counts made
  by hand) a flat `cpi_dependent` per instruction plus a load latency per round of loads.
On the SM, latency and the largest throughput bound overlap only as far as resident warps hide
one behind the other: the smaller of the two is added in the fraction 1 - resident warps /
`full_overlap_warps`, where a warp counts by its share of the busiest warp's instructions (idle
warps hide nothing). The CTA launch bound is not in that overlap: each CTA's latency hides
behind the starts of the CTAs after it, so it bounds the kernel as the last start plus one
CTA's path. Each launch adds `launch_overhead_us`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Dict, Optional


# classes that go through the load/store unit (one warp-instruction per clock per SM)
LSU = ("global_ld", "global_st", "global_atom", "shared_ld", "shared_st", "shared_atom",
       "local_ld", "local_st")


@dataclass(frozen=True)
class Hardware:
    """A GPU description; every field is a knob (see benchmarks/MODEL.md for the sources)."""

    name: str = "H100 SXM5 (estimate)"
    sms: int = 132
    clock_ghz: float = 1.83
    issue_per_clk: float = 4.0          # warp-instructions per SM per clock (4 schedulers)
    # pipe throughputs, warp-instructions per SM per clock (lanes per clock / 32)
    rates: Dict[str, float] = field(default_factory=lambda: {
        "fp32": 4.0, "fp16": 4.0, "fp64": 2.0, "int": 2.0, "sfu": 0.5, "conversion": 0.5,
        "shuffle": 1.0, "lsu": 1.0})
    # tensor-core flops per SM per clock with mma.sync (wgmma peak x mma_sync_efficiency)
    tensor_flops_per_clk: Dict[str, float] = field(default_factory=lambda: {
        "f16": 4096.0, "tf32": 2048.0, "int8": 8192.0, "fp8": 8192.0, "f64": 256.0})
    mma_sync_efficiency: float = 0.6
    # wgmma (sm_90) runs at the peak rate above (MODEL.md, "sm_90 comparison": the wgmma term)
    wgmma_efficiency: float = 1.0
    l1_sectors_per_clk: float = 4.0     # 128 bytes per SM per clock (shared: 1 wavefront)
    shared_wavefronts_per_clk: float = 1.0
    l2_bytes_per_s: float = 12e12       # full-line traffic (MODEL.md, Calibration: GEMMs)
    l2_bytes_per_clk_per_sm: float = 64.0
    # L2 bandwidth a sector beyond an access's ideal takes (scattered sectors travel alone
    # in a 64-byte slot: they move at half the full-line byte rate)
    l2_scattered_sector_bytes: float = 64.0
    dram_bytes_per_s: float = 3.35e12
    dram_efficiency: float = 0.85
    # occupancy
    max_warps_per_sm: int = 64
    max_ctas_per_sm: int = 32
    registers_per_sm: int = 65536
    reg_alloc_unit: int = 256           # registers per warp are allocated in these units
    shared_per_sm: int = 228 * 1024
    smem_reserved_per_cta: int = 1024
    # latency
    cpi_dependent: float = 4.0          # (fallback without a profile) cycles per instruction
    memory_latency: float = 600.0       # cycles of a global load that misses L2 (DRAM)
    l2_latency: float = 250.0           # cycles of a global load that hits L2 (fitted, MODEL.md)
    l2_bytes: float = 50e6              # a launch whose footprint fits here loads from L2
    barrier_latency: float = 20.0
    # result latency in cycles per PTX instruction class (global loads: memory_latency)
    latencies: Dict[str, float] = field(default_factory=lambda: {
        "fp32": 4.0, "fp16": 4.0, "int": 4.0, "fp64": 8.0, "sfu": 18.0, "conversion": 8.0,
        "tensor": 32.0, "shared_ld": 30.0, "shared_atom": 60.0, "local_ld": 200.0,
        "const_ld": 4.0, "shuffle": 24.0, "other": 4.0, "branch": 4.0})
    # fitted on an H100 (MODEL.md, Calibration): back-to-back launches of one stream
    launch_overhead_us: float = 3.5     # per launch: grid start, drain and the next launch
    cta_launch_per_clk: float = 1.0     # CTAs started per clock, all SMs together
    full_overlap_warps: int = 64        # resident warps per SM that hide latency completely
    reorder_within_blocks: bool = True  # critical path: a block's independent work overlaps

    @staticmethod
    def h100_sxm() -> "Hardware":
        return Hardware()

    @staticmethod
    def h100_pcie() -> "Hardware":
        return Hardware(name="H100 PCIe (estimate)", sms=114, clock_ghz=1.755,
                        dram_bytes_per_s=2.0e12)

    def with_(self, **changes) -> "Hardware":
        return replace(self, **changes)


@dataclass
class LaunchCounts:
    """Per-launch counts scaled to the whole grid (from a Profile and the SASS facts)."""

    grid_ctas: int
    threads: int
    instructions: Dict[str, float]      # dynamic SASS (or PTX when no SASS) per class
    sass: bool                          # instruction counts are SASS counts
    tensor_flops: Dict[str, float]
    global_sectors: float
    global_ideal_sectors: float
    local_sectors: float
    shared_wavefronts: float
    shared_ideal_wavefronts: float
    dram_bytes: float
    barriers: float
    load_rounds_per_warp: float         # rounds of global loads one warp waits for (per CTA)
    critical_cycles_per_warp: Optional[float] = None  # dependence-chain latency of one warp
    # the same with global loads at DRAM latency (used when the footprint exceeds L2)
    critical_cycles_per_warp_dram: Optional[float] = None
    registers: int = 0
    spill_bytes: int = 0
    shared_bytes: int = 0
    # warps of a CTA weighted by their share of the busiest warp's instructions: a warp that
    # exits at once (a 128-thread CTA over a 32-element tile) hides no latency (None: all work)
    working_warps: Optional[float] = None
    # global sectors moved by TMA (in global_sectors too): L2 traffic that bypasses L1
    tma_sectors: float = 0.0
    # the part of tensor_flops issued by wgmma (per element type): the wgmma tensor term
    wgmma_flops: Dict[str, float] = field(default_factory=dict)

    @property
    def warps(self) -> int:
        return -(-self.threads // 32)

    @property
    def total_instructions(self) -> float:
        return sum(self.instructions.values())


def _load_rounds(profile) -> float:
    """Rounds of global loads per warp per CTA: executions of basic blocks holding a global
    load (loads in one block are assumed to overlap), averaged over the warps run."""
    image = profile.image
    code = image.code
    rounds = 0
    for start, end in _blocks(image):
        has_load = False
        for entry in code[start:end]:
            ins = entry[4]
            if ins is not None and ((ins.opcode in ("ld", "ldu") and "shared" not in
                                     ins.modifiers and "param" not in ins.modifiers
                                     and "local" not in ins.modifiers) or
                                    (ins.opcode == "cp" and "async" in ins.modifiers)):
                has_load = True
                break
        if has_load:
            rounds += int(profile.per_line[start:end].max())
    warps_run = max(1, profile.ctas_run * profile.warps)
    return rounds / warps_run


_NO_DESTINATION = {"st", "red", "bar", "barrier", "bra", "ret", "exit", "membar", "fence", "cp",
                   "trap", "call", "prefetch", "griddepcontrol", "nanosleep", "stmatrix",
                   "brx", "pmevent"}


def _blocks(image):
    """[start, end) index ranges of the basic blocks of the kernel's code."""
    code = image.code
    leaders = {0}
    for index, entry in enumerate(code):
        ins = entry[4]
        if ins is None:
            continue
        if ins.opcode in ("bra", "ret", "exit", "brx", "call") or entry[0] != 0:
            leaders.add(index + 1)
    leaders.update(image.kernel.labels.values())
    leaders = sorted(i for i in leaders if i < len(code))
    return list(zip(leaders, leaders[1:] + [len(code)]))


def critical_path_per_warp(profile, hw: "Hardware", memory_latency: Optional[float] = None
                           ) -> float:
    """Cycles one warp spends on dependence chains: per basic block, instructions issue one per
    cycle at most, each when its source registers are ready (a result is ready
    `hw.latencies[class]` cycles after its instruction issues; global loads `memory_latency`, by
    default `hw.l2_latency`); a waiting instruction holds up only those that need its result, as
    ptxas hoists a block's loads above their uses (`hw.reorder_within_blocks` False: PTX order),
    and nothing moves above a barrier. The block waits for all its results before the next block
    starts (no overlap across blocks: conservative for software-pipelined loops); times the
    block's executions by
    each warp index of the CTA (averaged over the CTAs run), for the slowest warp: a CTA ends
    with its last warp, so warps that idle while one warp works (a single-warp loop of atomics)
    must not dilute that warp's path. Without per-warp counts, the average over all warps."""
    import numpy as np  # here: the compiler imports this module for `estimate` alone

    from ..sim.profile import CLASSES
    from ..sim.syntax import registers_of
    load_latency = hw.l2_latency if memory_latency is None else memory_latency
    image = profile.image
    code = image.code
    per_warp = getattr(profile, "per_warp_line", None)
    totals = np.zeros(per_warp.shape[1] if per_warp is not None else 1)
    for start, end in _blocks(image):
        executed = int(profile.per_line[start:end].max()) if end > start else 0
        if not executed:
            continue
        ready: Dict[str, float] = {}
        finish_all = 0.0
        clock = 0.0  # issue slot: one instruction per cycle
        last = 0.0   # latest issue so far
        fence = 0.0  # nothing moves above a barrier
        for index in range(start, end):
            ins = code[index][4]
            if ins is None:
                clock += 1.0
                continue
            cls = CLASSES[int(profile.classes[index])]
            if cls in ("global_ld", "global_atom"):
                latency = load_latency
            elif cls == "barrier":
                latency = hw.barrier_latency
            else:
                latency = hw.latencies.get(cls, 4.0)
            operands = ins.operands
            writes = [] if ins.opcode in _NO_DESTINATION or not operands else \
                registers_of(operands[0])
            reads = [name for operand in (operands[1:] if writes else operands)
                     for name in registers_of(operand)]
            if ins.guard is not None:
                reads.append(ins.guard[0])
            clock += 1.0
            if hw.reorder_within_blocks:  # as ptxas schedules: waiting stalls only dependants
                issue = max([clock, fence] + [ready.get(name, 0.0) for name in reads])
            else:  # PTX order: a wait stalls everything after it
                clock = issue = max([clock] + [ready.get(name, 0.0) for name in reads])
            if cls == "barrier":
                fence = issue
            last = max(last, issue)
            done = issue + latency
            for name in writes:
                ready[name] = done
            finish_all = max(finish_all, done if writes or cls == "barrier" else issue)
        path = max(finish_all, last)
        if per_warp is not None:
            totals += path * per_warp[start:end].max(axis=0)
        else:
            totals[0] += path * executed / max(1, profile.warps)
    return float(totals.max()) / max(1, profile.ctas_run)


def launch_counts(profile, facts=None, footprint_cap: Optional[float] = None,
                  hw: Optional["Hardware"] = None) -> LaunchCounts:
    """Counts of one profiled launch (scaled to the grid). With `facts` (SassFacts of the same
    PTX) the instruction counts are dynamic SASS counts; without, PTX warp-instructions.
    `footprint_cap` (e.g. the bytes of the launch's arrays) bounds the extrapolated DRAM
    footprint of a sampled launch."""
    from .static import dynamic_sass  # ptxas's facts: not needed by the compiler's estimates

    report = profile.report()
    dram = report["footprint_read_bytes"] + report["footprint_written_bytes"]
    if footprint_cap is not None:
        dram = min(dram, footprint_cap)
    scale = report["scale"]
    if facts is not None and facts.sass_count:
        instructions = {k: v * scale for k, v in dynamic_sass(profile, facts).items()}
        sass = True
    else:
        instructions = {k: float(v) for k, v in report["instructions"].items() if v}
        sass = False
    hw = hw or Hardware()
    return LaunchCounts(
        grid_ctas=profile.ctas, threads=profile.threads, instructions=instructions, sass=sass,
        tensor_flops={k: float(v) for k, v in report["mma_flops"].items()},
        global_sectors=report["global_ld_sectors"] + report["global_st_sectors"],
        global_ideal_sectors=report["global_ld_ideal_sectors"] +
        report["global_st_ideal_sectors"],
        local_sectors=report["local_sectors"],
        shared_wavefronts=report["shared_wavefronts"],
        shared_ideal_wavefronts=report["shared_ideal_wavefronts"],
        dram_bytes=dram,
        barriers=report["barriers"], load_rounds_per_warp=_load_rounds(profile),
        critical_cycles_per_warp=critical_path_per_warp(profile, hw),
        critical_cycles_per_warp_dram=critical_path_per_warp(profile, hw, hw.memory_latency),
        registers=facts.registers if facts else 0,
        spill_bytes=facts.spill_bytes if facts else 0,
        shared_bytes=facts.shared_bytes if facts else 0,
        working_warps=_working_warps(profile), tma_sectors=report.get("tma_sectors", 0),
        wgmma_flops={k: float(v) for k, v in report.get("wgmma_flops", {}).items()})


def _working_warps(profile) -> Optional[float]:
    """Sum over a CTA's warps of (its instructions / the busiest warp's), from the profile."""
    per_warp = getattr(profile, "per_warp_line", None)
    if per_warp is None or not per_warp.size:
        return None
    totals = per_warp.sum(axis=0).astype(float)
    busiest = totals.max()
    return float(totals.sum() / busiest) if busiest > 0 else None


@dataclass
class Estimate:
    """An estimated time (microseconds) and the bounds behind it."""

    time_us: float
    bound: str
    bounds: Dict[str, float]            # microseconds each
    ctas_per_sm: int
    occupancy_limiter: str
    grid_ctas: int
    exposed: float = 0.0                # fraction of the smaller of latency / throughput added
    launch_us: float = 0.0              # the per-launch cost included in time_us

    def __str__(self) -> str:
        return f"~{self.time_us:.2f} us (estimate; {self.bound}-bound)"


def occupancy(threads: int, registers: int, shared_bytes: int, hw) -> Dict[str, int]:
    """CTAs per SM and what limits it: warps, registers (allocated per warp in units of
    `hw.reg_alloc_unit` registers), shared memory (plus `hw.smem_reserved_per_cta`), CTA slots."""
    warps = -(-threads // 32)
    regs = max(1, registers)
    per_warp = -(-(regs * 32) // hw.reg_alloc_unit) * hw.reg_alloc_unit
    limits = {
        "cta_slots": hw.max_ctas_per_sm,
        "warps": hw.max_warps_per_sm // warps,
        "registers": hw.registers_per_sm // (per_warp * warps),
        "shared": (hw.shared_per_sm // (shared_bytes + hw.smem_reserved_per_cta)
                   if shared_bytes else hw.max_ctas_per_sm),
    }
    ctas = max(0, min(limits.values()))
    limiter = min(limits, key=lambda name: limits[name])
    return {"ctas_per_sm": ctas, "limiter": limiter, "warps_per_sm": ctas * warps, **{
        f"limit_{k}": v for k, v in limits.items()}}


def estimate(counts: LaunchCounts, hw: Hardware = Hardware(), grid: Optional[int] = None,
             shared_bytes: Optional[int] = None) -> Estimate:
    """The estimated time of the launch at its own grid, or at `grid` CTAs with the same
    per-CTA work (counts per CTA are the launch's averages)."""
    G = max(1, counts.grid_ctas)
    target = G if grid is None else int(grid)
    per = 1.0 / G  # per-CTA factor
    smem = counts.shared_bytes if shared_bytes is None else shared_bytes
    occ = occupancy(counts.threads, counts.registers or 32, smem, hw)
    ctas_per_sm = max(1, occ["ctas_per_sm"])
    clock = hw.clock_ghz * 1e3  # cycles per microsecond
    per_sm = math.ceil(target / hw.sms)          # CTAs on the busiest SM
    ins = counts.instructions
    cycles: Dict[str, float] = {}
    cycles["issue"] = counts.total_instructions * per / hw.issue_per_clk
    for pipe in ("fp32", "fp16", "fp64", "int", "sfu", "conversion", "shuffle"):
        if ins.get(pipe):
            cycles[pipe] = ins[pipe] * per / hw.rates[pipe]
    lsu = sum(ins.get(c, 0) for c in LSU)
    if lsu:
        cycles["lsu"] = lsu * per / hw.rates["lsu"]
    wgmma = counts.wgmma_flops
    # mma.sync flops: the rest
    sync = {kind: flops - wgmma.get(kind, 0.0) for kind, flops in counts.tensor_flops.items()}
    tensor = sum(flops / (hw.tensor_flops_per_clk.get(kind, 4096.0) * hw.mma_sync_efficiency)
                 for kind, flops in sync.items() if flops > 0)
    tensor_wgmma = sum(flops / (hw.tensor_flops_per_clk.get(kind, 4096.0) * hw.wgmma_efficiency)
                       for kind, flops in wgmma.items())
    if tensor or tensor_wgmma:
        cycles["tensor"] = (tensor + tensor_wgmma) * per
    cycles["l1_shared"] = (counts.shared_wavefronts / hw.shared_wavefronts_per_clk +
                           (counts.global_sectors - counts.tma_sectors + counts.local_sectors) /
                           hw.l1_sectors_per_clk) * per
    if tensor:  # mma.sync takes its operands from registers that ldmatrix fills from shared
        # memory: a K loop alternates the two (MODEL.md, Calibration: GEMMs)
        cycles["tensor"] += cycles["l1_shared"]
    if tensor_wgmma:  # wgmma reads shared memory itself; its warpgroup issues nothing while it
        # waits for the group, and attention's softmax needs the group's result (MODEL.md, sm_90)
        cycles["tensor"] += cycles["issue"]
    bounds = {name: per_sm * c / clock for name, c in cycles.items()}
    # L2 traffic per CTA: the sectors an access needs at 32 bytes, those it touches beyond
    # them (scattered) at `l2_scattered_sector_bytes`; hand-made counts without an ideal
    # count every sector as needed
    ideal = min(counts.global_sectors, counts.global_ideal_sectors or counts.global_sectors)
    l2_bytes = (32.0 * (ideal + counts.local_sectors) +
                hw.l2_scattered_sector_bytes * (counts.global_sectors - ideal)) * per
    bounds["l2"] = max(l2_bytes * target / hw.l2_bytes_per_s * 1e6,
                       per_sm * l2_bytes / hw.l2_bytes_per_clk_per_sm / clock)
    footprint = counts.dram_bytes * per * target
    bounds["dram"] = footprint / (hw.dram_bytes_per_s * hw.dram_efficiency) * 1e6
    # the GPU starts CTAs at a fixed rate: this bounds grids of many short CTAs
    bounds["cta_launch"] = target / hw.cta_launch_per_clk / clock
    # latency: one CTA's critical path, once per wave of resident CTAs on the busiest SM; loads
    # hit L2 when the launch's data fits there (back-to-back launches on the same arrays)
    from_l2 = footprint <= hw.l2_bytes
    if counts.critical_cycles_per_warp is not None:
        critical = counts.critical_cycles_per_warp
        if not from_l2 and counts.critical_cycles_per_warp_dram is not None:
            critical = counts.critical_cycles_per_warp_dram
    else:  # no profile of the code: a flat cost per instruction and per round of loads
        per_warp = counts.total_instructions * per / counts.warps
        critical = (per_warp * hw.cpi_dependent +
                    counts.load_rounds_per_warp * (hw.l2_latency if from_l2 else
                                                   hw.memory_latency) +
                    counts.barriers * per * hw.barrier_latency)
    waves = math.ceil(per_sm / ctas_per_sm)
    latency = waves * critical / clock
    on_sm_bounds = [name for name in bounds if name != "cta_launch"]
    throughput = max(bounds[name] for name in on_sm_bounds)
    bounds["latency"] = latency
    # on the SM, resident warps hide latency behind throughput (and the reverse) only in part:
    # the smaller term shows in the fraction of the SM's warp slots left empty
    working = counts.warps if counts.working_warps is None else min(counts.warps, counts.working_warps)
    resident = min(per_sm, ctas_per_sm) * working
    exposed = max(0.0, 1.0 - resident / hw.full_overlap_warps)
    on_sm = max(throughput, latency) + exposed * min(throughput, latency)
    # the dispatcher: a CTA's latency overlaps the starts of the CTAs after it, whatever its
    # warps, so beyond the last start only the last CTA's own path shows
    chain = bounds["cta_launch"] + critical / clock
    kernel = max(on_sm, chain)
    bound = "cta_launch" if chain > on_sm else max(on_sm_bounds + ["latency"],
                                                   key=lambda name: bounds[name])
    return Estimate(kernel + hw.launch_overhead_us, bound, bounds, occ["ctas_per_sm"],
                    occ["limiter"], target, exposed, hw.launch_overhead_us)


def scale_grid(hw: Hardware) -> int:
    """The grid of the "at scale" estimate: 64 CTAs per SM (many waves at any occupancy)."""
    return hw.sms * 64
