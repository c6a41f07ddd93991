"""Opt-in instrumentation of the emulator: what a launch asks of the hardware, counted per warp.

    from tilebc_runtime.sim import Profile, emulate
    profile = Profile()                       # or Profile(sample=8): run only 8 of the grid's CTAs
    emulate(ptx, entry, grid, params, memory=memory, profile=profile)
    profile.report()                          # dict of the counts below

Nothing here runs unless a Profile is passed: the execution loop tests `profile is None` once per
step and otherwise does exactly what it did before.

What is counted (all per *warp*, as the hardware issues them; a CTA of T threads has ceil(T/32)
warps and lane t belongs to warp t // 32):

- `instructions[class]`: warp-instructions issued. An instruction is issued for a warp when at
  least one of its threads reaches it, whether or not its guard predicate holds (a predicated-off
  instruction still takes an issue slot). `per_line[pc]` keeps the same count per PTX instruction
  (index into the kernel's instruction list) so that static SASS expansions can be applied later;
  `per_warp_line[pc, w]` splits it by warp index within the CTA (summed over the CTAs run), so
  that the model can follow the slowest warp of a CTA rather than the average one.
  Classes: see CLASSES and `classify`.
- global memory: for every warp-level access (ld/st/atom/red/cp.async source on .global or a
  generic address that resolves to global memory), the 32-byte sectors its active lanes touch
  (`global_sectors`) against the ideal for the distinct bytes they request, ceil(bytes / 32)
  (`global_ideal_sectors`); loads and stores separately; and the unique footprint (distinct
  sectors read / written over the launch).
- shared memory: wavefronts per warp access (`shared_wavefronts`) against the ideal
  (`shared_ideal_wavefronts`). Banks are 32 × 4 bytes. A thread access of b bytes (vector width
  included) is split into phases of 32 / max(1, b / 4) lanes (8-byte accesses: half-warps,
  16-byte: quarter-warps); a phase takes as many wavefronts as the largest number of *distinct*
  4-byte words any bank must deliver (the same word to many lanes is one broadcast). The ideal is
  ceil(distinct bytes / 128) per warp. ldmatrix: each 8×8 matrix (8 rows of 16 bytes) is one phase.
  cp.async counts its shared store the same way. wgmma.mma_async: its shared operands once per
  warpgroup, 128 bytes a wavefront (the canonical layouts have no bank conflicts), and its
  flops in `mma_flops`.
- local memory: warp accesses and sectors, counted as ceil(active lanes × bytes / 32) (local
  memory is interleaved by thread, so a uniform local access is coalesced).
- `barriers`: bar.sync / barrier executions per CTA (the warp-level issues are in the
  "barrier" class).
- TMA (cp.async.bulk.tensor, sm_90): one copy per issuing thread, counted by the copy itself
  (isa_sm90 calls `tma`): the box's elements inside the tensor as global sectors and bytes
  (loads or stores; the ideal is ceil(bytes / 32)) and in the footprint, the whole box (zero fill
  included) as shared wavefronts at 128 bytes each (the TMA unit writes or reads whole swizzled
  lines: no bank conflicts), and separately in `tma_*` so the model can keep them off L1.
- mbarrier waits (try_wait / test_wait): warp-level waits in `mbarrier_waits`. A failed wait
  on the emulator is a schedule artefact (its threads loop back and try again; the GPU suspends
  the warp in try_wait), so each failed try is counted in `mbarrier_retries` and its spin loop
  (the wait's block, branching back to itself) is taken back off the instruction counts.
- `wgmma_serialized`: instructions that touched an accumulator of a wgmma still in flight and so
  landed its result first (isa_sm90.py), where ptxas serialises the wgmma pipeline.

Sampling: `Profile(sample=N)` runs N CTAs spread evenly over the grid (first and last included)
and `report()` scales every count by grid / N (`scale`); the footprint is scaled the same way,
which assumes CTAs touch disjoint data as the sampled ones do. Outputs of a sampled launch are
incomplete, so use it for counting, not for checking results.
"""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from ..perf.banks import distinct, ideal_wavefronts, lanes_per_phase, shared_wavefronts
from ..perf.ptx_classes import (CLASS_INDEX, CLASSES, access_width, classify, mma_flops,
                                 mma_kind, space_of, types_of, wgmma_wavefronts)
from .syntax import Imm, Vec
from .state import LOCAL_WINDOW, SHARED_WINDOW, WINDOW_SIZE

_COMPACT_AT = 2_000_000  # pending sector ids that start a merge of the read/written lists


def _wgmma_wavefronts(ins) -> int:
    return wgmma_wavefronts(ins, a_in_registers=len(ins.operands) > 1 and
                            isinstance(ins.operands[1], Vec))


def _spin_loops(code) -> Dict[int, tuple]:
    """pc of each mbarrier try_wait / test_wait that spins in a loop of its own -> [lo, hi) of
    that loop (its branch back goes to lo, at most 4 instructions above the wait, and comes at
    most 3 after it)."""
    loops = {}
    for pc, entry in enumerate(code):
        ins = entry[4]
        if ins is None or ins.opcode != "mbarrier" or not \
                {"try_wait", "test_wait"} & set(ins.modifiers):
            continue
        for later in range(pc + 1, min(pc + 4, len(code))):
            branch = code[later][4]
            target = getattr(code[later][3], "target", None)
            if branch is not None and branch.opcode == "bra" and target is not None:
                if pc - 4 <= target <= pc:
                    loops[pc] = (target, later + 1)
                break
    return loops


class _MemSpec:
    """How to find the addresses of one memory instruction."""

    __slots__ = ("kind", "space", "size", "count", "get", "get2", "store")

    def __init__(self, kind, space, size, count, get, get2=None, store=False):
        self.kind, self.space, self.size, self.count = kind, space, size, count
        self.get, self.get2, self.store = get, get2, store


def _mem_spec(ins, image) -> Optional[_MemSpec]:
    op, mods = ins.opcode, ins.modifiers
    try:
        if op in ("ld", "st", "ldu"):
            space = space_of(ins)
            if space in ("param", "const"):
                return None
            types = types_of(ins)
            if not types:
                return None
            size, count = access_width(ins)
            operand = ins.operands[1] if op != "st" else ins.operands[0]
            return _MemSpec("ld" if op != "st" else "st", space, size, count,
                            image.address(ins, operand), store=op == "st")
        if op in ("atom", "red"):
            size = access_width(ins)[0]
            operand = ins.operands[1] if op == "atom" else ins.operands[0]
            return _MemSpec("atom", space_of(ins), size, 1, image.address(ins, operand), store=True)
        if op == "cp" and "async" in mods and ("ca" in mods or "cg" in mods):
            size = ins.operands[2]
            size = int(size.value) if isinstance(size, Imm) else 16
            return _MemSpec("cp", "global", size, 1, image.address(ins, ins.operands[1]),
                            image.address(ins, ins.operands[0]))
        if op == "ldmatrix":
            return _MemSpec("ldmatrix", "shared", *access_width(ins),
                            image.address(ins, ins.operands[1]))
    except Exception:  # an operand form the image cannot address: count the issue only
        return None
    return None


class Profile:
    """Counters for one launch (see the module docstring). Pass to `emulate(..., profile=)`,
    `sim.run(..., profile=)` or `sim.nvidia.run(..., profile=)`."""

    def __init__(self, sample: Optional[int] = None):
        self.sample = sample
        self.image = None
        self.grid = (1, 1, 1)
        self.threads = 0
        self.ctas_run = 0
        self.barriers = 0
        self.global_ld_sectors = 0
        self.global_st_sectors = 0
        self.global_ld_ideal = 0
        self.global_st_ideal = 0
        self.global_ld_bytes = 0
        self.global_st_bytes = 0
        self.shared_wavefronts = 0
        self.shared_ideal_wavefronts = 0
        self.local_sectors = 0
        self.mma_flops: Dict[str, int] = {}
        self.wgmma_flops: Dict[str, int] = {}  # the part of mma_flops wgmma.mma_async issues
        self.tma_loads = 0
        self.tma_stores = 0
        self.tma_sectors = 0
        self.tma_shared_bytes = 0
        self.mbarrier_waits = 0
        self.mbarrier_retries = 0
        self.wgmma_serialized = 0  # instructions that landed in-flight wgmma results first
        self._pc = 0
        self._read: List[np.ndarray] = []
        self._written: List[np.ndarray] = []
        self._pending = 0
        self._compact_at = _COMPACT_AT

    # -- set-up by the launch ----------------------------------------------------------------
    def attach(self, image, grid, threads: int) -> List[int]:
        """Called by the launch: prepare the per-instruction tables; returns the flat CTA ids
        to run (all of them, or the sample)."""
        if self.image is not None and self.image is not image:
            raise ValueError("a Profile counts one kernel; make a new one per kernel")
        self.image = image
        self.grid = tuple(grid)
        self.threads = threads
        self.warps = -(-threads // 32)
        code = image.code
        self.per_line = np.zeros(len(code), np.int64)
        self.per_warp_line = np.zeros((len(code), self.warps), np.int64)
        self.classes = np.zeros(len(code), np.int64)
        self.mem: List[Optional[_MemSpec]] = [None] * len(code)
        self.flops: List[int] = [0] * len(code)
        self.mma_kinds: List[str] = [""] * len(code)
        self.wgmma_wavefronts: List[int] = [0] * len(code)
        self.is_wgmma: List[bool] = [False] * len(code)  # wgmma.mma_async lines
        for index, entry in enumerate(code):
            ins = entry[4]
            if ins is None:
                self.classes[index] = CLASS_INDEX["branch"]
                continue
            self.classes[index] = CLASS_INDEX[classify(ins)]
            self.mem[index] = _mem_spec(ins, image)
            if ins.opcode == "mma":
                self.flops[index] = mma_flops(ins)
                self.mma_kinds[index] = mma_kind(ins)
            elif ins.opcode == "wgmma" and "mma_async" in ins.modifiers:
                self.flops[index] = mma_flops(ins) // 4  # a warpgroup's 4 warps issue it
                self.mma_kinds[index] = mma_kind(ins)
                self.wgmma_wavefronts[index] = _wgmma_wavefronts(ins)
                self.is_wgmma[index] = True
        self.spin_loops = _spin_loops(code)
        self.class_counts = np.zeros(len(CLASSES), np.int64)
        total = grid[0] * grid[1] * grid[2]
        if self.sample is None or self.sample >= total:
            return list(range(total))
        picks = np.unique(np.linspace(0, total - 1, max(1, self.sample)).round().astype(int))
        return [int(p) for p in picks]

    # -- called by the execution loop, before the instruction runs ------------------------------
    def step(self, pc: int, cta, active, executing) -> None:
        """`active`: threads at this instruction (None: all); `executing`: those whose guard
        holds (None: all, False: none)."""
        self._pc = pc
        if active is None:
            warps = self.warps
            self.per_warp_line[pc] += 1
        else:
            present = self._by_warp(active).any(axis=1)
            warps = int(np.count_nonzero(present))
            self.per_warp_line[pc] += present
        self.per_line[pc] += warps
        spec = self.mem[pc]
        cls = self.classes[pc]
        if spec is not None and executing is not False:
            cls = self._memory(spec, cta, executing, cls)
        self.class_counts[cls] += warps
        if self.flops[pc]:
            kind = self.mma_kinds[pc]
            self.mma_flops[kind] = self.mma_flops.get(kind, 0) + warps * self.flops[pc]
            if self.is_wgmma[pc]:
                self.wgmma_flops[kind] = self.wgmma_flops.get(kind, 0) + warps * self.flops[pc]
            if self.wgmma_wavefronts[pc] and executing is not False:
                # a warpgroup reads its shared operands once (counted a quarter per warp)
                share = warps * self.wgmma_wavefronts[pc] // 4
                self.shared_wavefronts += share
                self.shared_ideal_wavefronts += share

    def barrier(self) -> None:
        self.barriers += 1

    # -- called by sm_90 instructions as they run ---------------------------------------------
    def mbarrier_wait(self, lanes: np.ndarray, done: np.ndarray) -> None:
        """An mbarrier try_wait / test_wait at the last stepped pc: `lanes` waited, `done[lane]`
        whether each one's phase had completed."""
        warps = np.unique(lanes // 32)
        failed = np.unique(lanes[~done[lanes]] // 32)
        self.mbarrier_waits += warps.size - failed.size
        if not failed.size:
            return
        self.mbarrier_retries += failed.size
        loop = self.spin_loops.get(self._pc)
        if loop is not None:  # the try that follows repeats the loop: not an issue on the GPU
            lo, hi = loop
            self.per_line[lo:hi] -= failed.size
            np.subtract.at(self.per_warp_line, (slice(lo, hi), failed), 1)
            np.subtract.at(self.class_counts, self.classes[lo:hi], failed.size)

    def tma(self, addresses: np.ndarray, size: int, box_bytes: int, store: bool) -> None:
        """One cp.async.bulk.tensor copy: `addresses` of its elements inside the tensor (the
        others are zero-filled or not written), `size` bytes each, `box_bytes` moved to or from
        shared memory."""
        sectors = distinct(addresses >> np.uint64(5))
        nbytes = int(addresses.size) * size
        ideal = -(-nbytes // 32)
        if store:
            self.tma_stores += 1
            self.global_st_sectors += sectors.size
            self.global_st_ideal += ideal
            self.global_st_bytes += nbytes
            self._written.append(sectors)
        else:
            self.tma_loads += 1
            self.global_ld_sectors += sectors.size
            self.global_ld_ideal += ideal
            self.global_ld_bytes += nbytes
            self._read.append(sectors)
        self.tma_sectors += sectors.size
        self.tma_shared_bytes += box_bytes
        waves = -(-box_bytes // 128)
        self.shared_wavefronts += waves
        self.shared_ideal_wavefronts += waves
        self._pending += sectors.size
        if self._pending > self._compact_at:
            self._compact()

    def _by_warp(self, mask: np.ndarray) -> np.ndarray:
        pad = self.warps * 32 - mask.size
        if pad:
            mask = np.concatenate([mask, np.zeros(pad, np.bool_)])
        return mask.reshape(self.warps, 32)

    # -- memory ----------------------------------------------------------------------------------
    def _memory(self, spec: _MemSpec, cta, executing, cls: int) -> int:
        lanes = cta.tids if executing is None else np.nonzero(executing)[0]
        if lanes.size == 0:
            return cls
        if spec.kind == "ldmatrix":
            self._ldmatrix(spec, cta, executing)
            return cls
        base = np.broadcast_to(np.asarray(spec.get(cta), np.uint64), (cta.T,))[lanes]
        if spec.kind == "cp":
            self._global(lanes, base, spec.size, 1, store=False)
            dst = np.broadcast_to(np.asarray(spec.get2(cta), np.uint64), (cta.T,))[lanes]
            self._shared(lanes, dst, spec.size, 1)
            return cls
        space = spec.space
        if space == "generic":
            in_shared = (base >= SHARED_WINDOW) & (base < SHARED_WINDOW + WINDOW_SIZE)
            in_local = (base >= LOCAL_WINDOW) & (base < LOCAL_WINDOW + WINDOW_SIZE)
            in_global = ~(in_shared | in_local)
            if in_shared.any():
                self._shared(lanes[in_shared], base[in_shared] - np.uint64(SHARED_WINDOW),
                             spec.size, spec.count)
            if in_local.any():
                self._local(lanes[in_local], spec.size, spec.count)
            if in_global.any():
                self._global(lanes[in_global], base[in_global], spec.size, spec.count,
                             spec.store)
            # the class follows where most lanes went
            where = max((np.count_nonzero(in_global), "global"),
                        (np.count_nonzero(in_shared), "shared"),
                        (np.count_nonzero(in_local), "local"))[1]
            suffix = "atom" if spec.kind == "atom" and where != "local" else \
                "st" if spec.store else "ld"
            return CLASS_INDEX[f"{where}_{suffix}"]
        if space == "global":
            self._global(lanes, base, spec.size, spec.count, spec.store)
        elif space == "shared":
            self._shared(lanes, base, spec.size, spec.count)
        elif space == "local":
            self._local(lanes, spec.size, spec.count)
        return cls

    def _global(self, lanes, base, size, count, store) -> None:
        if count > 1:
            addresses = (base[:, None] + np.arange(count, dtype=np.uint64) *
                         np.uint64(size)).reshape(-1)
            lanes = np.repeat(lanes, count)
        else:
            addresses = base
        warp = (lanes // 32).astype(np.uint64)
        sectors = addresses >> np.uint64(5)
        touched = np.unique((sectors << np.uint64(6)) | warp).size
        requested = np.unique((addresses << np.uint64(6)) | warp)
        per_warp = np.bincount((requested & np.uint64(63)).astype(np.int64))
        ideal = int(np.sum(-(-(per_warp[per_warp > 0] * size) // 32)))
        unique_sectors = np.unique(sectors)
        if store:
            self.global_st_sectors += touched
            self.global_st_ideal += ideal
            self.global_st_bytes += int(requested.size) * size
            self._written.append(unique_sectors)
        else:
            self.global_ld_sectors += touched
            self.global_ld_ideal += ideal
            self.global_ld_bytes += int(requested.size) * size
            self._read.append(unique_sectors)
        self._pending += unique_sectors.size
        if self._pending > self._compact_at:
            self._compact()

    def _compact(self) -> None:
        for name in ("_read", "_written"):
            parts = getattr(self, name)
            if len(parts) > 1:
                setattr(self, name, [distinct(np.concatenate(parts))])
        self._pending = sum(p.size for p in self._read + self._written)
        # what stays after merging counts toward the next merge: without the doubling, a working
        # set over the threshold merged it all again on every access (quadratic in the accesses)
        self._compact_at = max(_COMPACT_AT, 2 * self._pending)

    def _shared(self, lanes, base, size, count) -> None:
        per_thread = size * count
        phase_lanes = lanes_per_phase(per_thread)
        words_per_element = max(1, -(-size // 4))
        offsets = (np.arange(count, dtype=np.uint64) * np.uint64(size))
        addresses = (base[:, None] + offsets[None, :]).reshape(-1)
        lane_of = np.repeat(lanes, count)
        if words_per_element > 1:
            addresses = (addresses[:, None] + np.arange(words_per_element, dtype=np.uint64)
                         * np.uint64(4)).reshape(-1)
            lane_of = np.repeat(lane_of, words_per_element)
        words = (addresses >> np.uint64(2)) & np.uint64(0xFFFFFFFF)
        warp = lane_of // 32
        phase = (lane_of % 32) // phase_lanes
        self.shared_wavefronts += shared_wavefronts(warp * 32 + phase, words)
        self.shared_ideal_wavefronts += ideal_wavefronts(warp, words)

    def _ldmatrix(self, spec: _MemSpec, cta, executing) -> None:
        T = cta.T
        addresses = np.broadcast_to(np.asarray(spec.get(cta), np.uint64), (T,))
        active = np.ones(T, np.bool_) if executing is None else executing
        warps = np.nonzero(self._by_warp(active).any(axis=1))[0]
        matrices = np.arange(spec.count)
        # row-start lanes: 8 per matrix (lanes 8m .. 8m+7 of each warp)
        rows = (32 * warps[:, None, None] + 8 * matrices[None, :, None] +
                np.arange(8)[None, None, :])
        starts = addresses[rows] >> np.uint64(2)
        words = (starts[..., None] + np.arange(4, dtype=np.uint64)).reshape(-1)  # 16 B a row
        group = np.broadcast_to((warps[:, None] * 32 + matrices[None, :])[..., None, None],
                                rows.shape + (4,)).reshape(-1)
        self.shared_wavefronts += shared_wavefronts(group, words & np.uint64(0xFFFFFFFF))
        self.shared_ideal_wavefronts += len(warps) * spec.count

    def _local(self, lanes, size, count) -> None:
        per_warp = np.bincount(lanes // 32)
        self.local_sectors += int(np.sum(-(-(per_warp[per_warp > 0] * size * count) // 32)))

    # -- results ---------------------------------------------------------------------------------
    @property
    def ctas(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def scale(self) -> float:
        """grid CTAs / CTAs run (1.0 unless sampled)."""
        return self.ctas / self.ctas_run if self.ctas_run else 0.0

    def footprint(self):
        """(distinct sectors read, distinct sectors written) over the CTAs run."""
        self._compact()
        read = self._read[0].size if self._read else 0
        written = self._written[0].size if self._written else 0
        return read, written

    def report(self, scaled: bool = True) -> dict:
        """Every count as a plain dict; `scaled` multiplies by `scale` (grid / CTAs run)."""
        s = self.scale if scaled else 1.0

        def sc(value):
            return int(round(value * s))
        read, written = self.footprint()
        return {
            "grid": self.grid, "threads": self.threads, "ctas_run": self.ctas_run,
            "scale": s,
            "instructions": {name: sc(self.class_counts[i]) for i, name in enumerate(CLASSES)},
            "total_instructions": sc(int(self.class_counts.sum())),
            "global_ld_sectors": sc(self.global_ld_sectors),
            "global_ld_ideal_sectors": sc(self.global_ld_ideal),
            "global_st_sectors": sc(self.global_st_sectors),
            "global_st_ideal_sectors": sc(self.global_st_ideal),
            "global_ld_bytes": sc(self.global_ld_bytes),
            "global_st_bytes": sc(self.global_st_bytes),
            "footprint_read_bytes": sc(32 * read), "footprint_written_bytes": sc(32 * written),
            "shared_wavefronts": sc(self.shared_wavefronts),
            "shared_ideal_wavefronts": sc(self.shared_ideal_wavefronts),
            "local_sectors": sc(self.local_sectors),
            "barriers": sc(self.barriers),
            "mma_flops": {k: sc(v) for k, v in self.mma_flops.items()},
            "wgmma_flops": {k: sc(v) for k, v in self.wgmma_flops.items()},
            "tma_loads": sc(self.tma_loads), "tma_stores": sc(self.tma_stores),
            "tma_sectors": sc(self.tma_sectors), "tma_shared_bytes": sc(self.tma_shared_bytes),
            "mbarrier_waits": sc(self.mbarrier_waits),
            "mbarrier_retries": sc(self.mbarrier_retries),
            "wgmma_serialized": sc(self.wgmma_serialized),
        }
