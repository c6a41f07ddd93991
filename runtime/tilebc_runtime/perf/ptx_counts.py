"""What one CTA of a lowered kernel asks of the hardware, read from its PTX text alone (no
emulator, no ptxas, no launch), so that the compiler can ask the model (model.py) which of two
lowerings of a kernel is faster before it links either.

    counts = ptx_counts(lines, threads=128, shared_bytes=24576)
    faster = cheaper([(lines_a, 256, smem_a), (lines_b, 128, smem_b)])   # index of the faster

Instructions are classified as the emulator's profile classifies them (ptx_classes.py); every
warp of the CTA is taken to issue every instruction once per pass. A loop (a label that a later
`bra` goes back to) runs `trip` passes for each pass of what encloses it, except an mbarrier wait
spinning on itself, which counts once: the GPU suspends the warp there. Memory: each access is
taken as coalesced and free of bank conflicts (the lowering's layouts are swizzled for that):
ceil(bytes a warp moves / 32) global sectors and ceil(bytes / 128) shared wavefronts per warp
access; ldmatrix / stmatrix one wavefront a matrix; a wgmma's shared operands once per
warpgroup; a TMA load the bytes its mbarrier expects, once per CTA. The DRAM footprint is left
out: both lowerings of a kernel read and write the same tensors.

What this cannot see (the emulator's counts can): trip counts, branches taken by some warps only,
bank conflicts and uncoalesced accesses. Two lowerings of the same kernel share the first two,
which is why this is used to rank lowerings and never to predict a time. Nor registers (ptxas
allocates them after this): occupancy is reckoned from threads and shared memory alone, which
flatters a lowering that needs many registers a thread (wgmma's accumulators with one warpgroup).
"""
from __future__ import annotations

import re
from typing import Dict, List, Sequence, Tuple

from .model import Hardware, LaunchCounts, estimate, scale_grid
from .ptx_classes import access_width, classify, mma_flops, mma_kind, space_of, split_top, \
    wgmma_wavefronts

TRIP = 8  # passes of a loop whose trip count the text does not give
_LABEL = re.compile(r"^([$%\w.]+):$")


class _Instruction:
    __slots__ = ("opcode", "modifiers", "text", "_operands")

    def __init__(self, opcode: str, modifiers: List[str], text: str):
        self.opcode, self.modifiers, self.text, self._operands = opcode, modifiers, text, None

    @property
    def operands(self) -> List[str]:  # split on demand: few instructions need them
        if self._operands is None:
            self._operands = split_top(self.text)
        return self._operands


def _statements(lines: Sequence[str]):
    """('label', name) and ('ins', (opcode with modifiers, operand text)) in program order;
    guards, directives, declarations and scope braces dropped."""
    for line in lines:
        for part in line.split("//", 1)[0].split(";"):
            # a scope's braces open or close a statement; a vector operand's come after the opcode
            part = part.strip().lstrip("{}").strip()
            if not part or not (part[0].isalpha() or part[0] in "@$_%"):
                continue  # directives, declarations, the parameter list's ")"
            label = _LABEL.match(part)
            if label:
                yield "label", label.group(1)
                continue
            fields = part.split(None, 1)
            if part.startswith("@"):  # the guard
                fields = fields[1].split(None, 1) if len(fields) > 1 else []
            if fields:
                yield "ins", (fields[0], fields[1] if len(fields) > 1 else "")


def _weights(code: List[_Instruction], labels: Dict[str, int], trip: int) -> List[float]:
    """Passes of each instruction per CTA: `trip` for every loop around it. A loop is a label
    and the last branch back to it (a `continue` is another branch back to the same head)."""
    loops: Dict[int, int] = {}  # head -> last instruction of the loop
    for at, ins in enumerate(code):
        if ins.opcode != "bra" or not ins.operands:
            continue
        start = labels.get(ins.operands[0])
        if start is not None and start <= at:  # a branch back
            loops[start] = max(at, loops.get(start, at))
    depth = [0] * len(code)
    for start, end in loops.items():
        body = code[start:end + 1]
        if len(body) <= 8 and any(i.opcode == "mbarrier" and
                                  {"try_wait", "test_wait"} & set(i.modifiers) for i in body):
            continue  # a wait spinning on itself
        for inner in range(start, end + 1):
            depth[inner] += 1
    return [float(trip) ** d for d in depth]


def _tail_int(text: str) -> int:
    try:
        return int(text, 0)
    except ValueError:
        return 0


def ptx_counts(lines: Sequence[str], threads: int, shared_bytes: int = 0,
               trip: int = TRIP) -> LaunchCounts:
    """One CTA's counts (grid_ctas = 1) of the kernel whose PTX lines are `lines`."""
    code: List[_Instruction] = []
    classes: List[str] = []
    labels: Dict[str, int] = {}
    known: Dict[str, tuple] = {}  # opcode with modifiers -> (opcode, modifiers, class)
    for kind, item in _statements(lines):
        if kind == "label":
            labels[item] = len(code)
            continue
        head, rest = item
        shape = known.get(head)
        if shape is None:
            opcode, *modifiers = head.split(".")
            shape = known[head] = (opcode, modifiers,
                                   classify(_Instruction(opcode, modifiers, "")))
        code.append(_Instruction(shape[0], shape[1], rest))
        classes.append(shape[2])
    weights = _weights(code, labels, trip)
    # basic blocks (as the profile's load rounds count them): from labels and after branches
    block_starts = set(labels.values()) | {at + 1 for at, ins in enumerate(code)
                                           if ins.opcode in ("bra", "brx", "call", "ret", "exit")}
    warps = -(-threads // 32)
    instructions: Dict[str, float] = {}
    flops: Dict[str, float] = {}
    wgmma: Dict[str, float] = {}
    sectors = wavefronts = tma = barriers = rounds = 0.0
    block_loads = set()
    block = 0
    for at, (ins, weight, cls) in enumerate(zip(code, weights, classes)):
        if at in block_starts:
            block = at
        if cls == "global_ld":  # ld.global, cp.async, a TMA load: a round of loads to wait for
            block_loads.add(block)
        passes = weight * warps  # warp-instructions
        instructions[cls] = instructions.get(cls, 0.0) + passes
        op, mods = ins.opcode, ins.modifiers
        if op == "mma":
            kind = mma_kind(ins)
            flops[kind] = flops.get(kind, 0.0) + passes * mma_flops(ins)
        elif op == "wgmma" and "mma_async" in mods:
            kind = mma_kind(ins)
            issued = passes * mma_flops(ins) / 4  # a warpgroup's four warps issue one
            flops[kind] = flops.get(kind, 0.0) + issued
            wgmma[kind] = wgmma.get(kind, 0.0) + issued
            in_registers = len(ins.operands) > 1 and ins.operands[1].startswith("{")
            wavefronts += passes / 4 * wgmma_wavefronts(ins, in_registers)
        elif op in ("ldmatrix", "stmatrix"):
            wavefronts += passes * access_width(ins)[1]  # a matrix: 8 rows of 16 bytes
        elif op == "mbarrier" and "expect_tx" in mods and ins.operands:
            moved = _tail_int(ins.operands[-1]) * weight  # once per CTA: one thread expects
            sectors += moved / 32
            tma += moved / 32
            wavefronts += moved / 128
        elif op == "cp" and "async" in mods and "bulk" not in mods and len(ins.operands) >= 3:
            moved = 32 * _tail_int(ins.operands[2])
            sectors += passes * -(-moved // 32)
            wavefronts += passes * -(-moved // 128)
        elif op in ("ld", "st", "atom", "red"):
            size, count = access_width(ins)
            moved = 32 * size * count
            space = space_of(ins)
            if space == "shared":
                wavefronts += passes * -(-moved // 128)
            elif space in ("global", "generic"):
                sectors += passes * -(-moved // 32)
        elif cls == "barrier" and op in ("bar", "barrier") and "arrive" not in mods:
            barriers += weight
    for start in block_loads:
        rounds += weights[start]
    return LaunchCounts(
        grid_ctas=1, threads=threads, instructions=instructions, sass=False,
        tensor_flops=flops, global_sectors=sectors, global_ideal_sectors=sectors,
        local_sectors=0.0, shared_wavefronts=wavefronts, shared_ideal_wavefronts=wavefronts,
        dram_bytes=0.0, barriers=barriers, load_rounds_per_warp=rounds,
        shared_bytes=shared_bytes, tma_sectors=tma, wgmma_flops=wgmma)


def cheaper(candidates: Sequence[Tuple[Sequence[str], int, int]],
            hw: Hardware = Hardware(), trip: int = TRIP) -> Tuple[int, List[float]]:
    """(index of the candidate the model estimates fastest, each estimate in µs) over
    candidates (PTX lines, threads, shared bytes) of one kernel, at scale (many waves of CTAs);
    the first wins a tie."""
    times = [estimate(ptx_counts(lines, threads, shared, trip), hw, grid=scale_grid(hw)).time_us
             for lines, threads, shared in candidates]
    return min(range(len(times)), key=lambda i: (times[i], i)), times
