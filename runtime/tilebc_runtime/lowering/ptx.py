"""A small PTX writer: virtual registers by class, labels, and a line -> Tile IR op map for diagnostics.

The lowering emits a deliberately restricted, regular subset of PTX so that a PTX emulator (issue 8) can
run it. `PTX_SUBSET` is the one place that lists it; `check_subset` rejects anything else we emit.
"""
from __future__ import annotations

import re

# Register classes: the only register kinds the lowering uses.
REG_PREFIX = {"pred": "%p", "b16": "%h", "b32": "%r", "b64": "%rd", "f32": "%f", "f64": "%fd"}
REG_DECL = {"pred": ".pred", "b16": ".b16", "b32": ".b32", "b64": ".b64", "f32": ".f32", "f64": ".f64"}

# The PTX instruction set the lowering emits (opcode -> what we use it for). Modifiers seen in the
# output: types (.s/.u/.b/.f 8-64, .pred, .f16/.bf16/.e4m3x2/.e5m2x2), rounding (.rn/.rz/.rm/.rp/.rni/
# .rzi/.rmi/.rpi), .approx/.full/.ftz/.sat/.satfinite, .lo/.hi, comparison operators, state spaces
# (.global/.shared/.local/.const/.param), memory orderings (.relaxed/.acquire/.release/.acq_rel) with
# scopes (.cta/.gpu/.sys), and mma.sync.aligned shapes.
PTX_SUBSET = {
    # data movement
    "mov": "copy / immediates / special registers (%tid, %ctaid, %nctaid) / shared symbol address",
    "ld": "global, shared, const, param loads (optionally .relaxed/.acquire with a scope); with no "
          "state space (generic address) in kernels that contain an alloca; ld.const.f32 reads the "
          "f32 decode tables of software float formats (softfloat.py); ld.global.v2/.v4 for "
          "view loads proven aligned (vectors.vector_width)",
    "st": "global, shared, local stores (optionally .relaxed/.release with a scope); generic (no "
          "state space) in kernels that contain an alloca; st.global.v2/.v4 as for ld",
    "cvt": "integer widen/narrow, int<->float, float<->float incl. bf16 and fp8 pairs; cvt.u16.u32 / "
           "cvt.u32.u64 truncate to the low bits",
    "cvta": "local -> generic address for vprintf argument buffers; shared -> generic for alloca "
            "scratch; global -> generic for module globals",
    "selp": "select", "setp": "compare into a predicate",
    # integer
    "add": "", "sub": "", "mul": ".lo/.hi/.wide", "mad": ".lo", "div": "", "rem": "", "abs": "",
    "neg": "", "min": "", "max": "", "and": "", "or": "", "xor": "", "not": "", "shl": "", "shr": "",
    # float
    "fma": "", "rcp": "", "sqrt": "", "rsqrt": "", "sin": ".approx", "cos": ".approx",
    "ex2": ".approx", "lg2": ".approx", "tanh": ".approx (sm_75+)", "testp": "",
    "copysign": "",
    # control
    "bra": "uniform, or divergent around straight-line code that reconverges (f32 trig huge-argument path)", "ret": "", "trap": "assert failure", "bar": "bar.sync 0",
    "call": "vprintf only", "membar": "", "fence": "acq_rel/sc fences for orderings; "
                                                 "fence.proxy.async.shared::cta before wgmma "
                                                 "reads what st.shared / cp.async wrote; "
                                                 "fence.mbarrier_init after TMA barriers' init; "
                                                 "fence.proxy.async (all spaces) before TMA",
    # memory model / atomics
    "atom": "global atomics (rmw, cas); generic in kernels with an alloca",
    "red": "global reductions; generic in kernels with an alloca",
    # warp
    "shfl": "shfl.sync.bfly.b32 d, a, offset, 31, -1: d = a of lane (laneid ^ offset) (reduce "
            "trees); shfl.sync.idx.b32 d, a, lane, 31, -1: d = a of lane `lane` (register or "
            "immediate; gathers from tiles of <= 32 elements, lowerer.gather); shfl.sync.up.b32 "
            "d, a, delta, 0, -1 / shfl.sync.down.b32 d, a, delta, 31, -1: lane laneid -/+ delta "
            "(log-step scans within a warp). All 32 lanes of "
            "the warp take part (every warp is fully active there)",
    # tensor core
    "mma": "mma.sync.aligned on sm_80+ (matmul.py): m16n8k16 for f16/bf16 (fp8 widened to f16) "
           "operands with an f16/bf16/f32 accumulator, m16n8k8 tf32, m16n8k32 s8/u8 with an s32 "
           "accumulator, m8n8k4 f64; accumulators stay in fragment registers (layout.MmaAcc)",
    "wgmma": "sm_90a (matmul._wgmma): wgmma.fence, wgmma.mma_async.sync.aligned.m64nNk16.f32."
             "{f16,bf16} from shared-memory descriptors (128-byte swizzle or none), commit_group, "
             "wait_group 0/1",
    "ldmatrix": "ldmatrix.sync.aligned.m8n8.x2/x4(.trans).shared.b16: mma operand fragments from "
                "padded shared memory (matmul.py)",
    "cp": "cp.async.{ca,cg}.shared.global 4/8/16 bytes (src-size 0 zero-fills past the tensor), "
          "cp.async.commit_group, cp.async.wait_group: mma operands staged without registers "
          "where alignment is proven (matmul.py); sm_90: cp.async.bulk.tensor.{1..5}d.shared::cluster"
          ".global.tile.mbarrier::complete_tx::bytes from a tensor-map parameter (lowering/tma.py)",
    "mbarrier": "sm_90 TMA stages (lowering/tma.py): init, arrive.expect_tx, try_wait.parity, "
                "inval, on shared::cta b64 barriers",
    "griddepcontrol": "gdc ops on sm_90+",
    "redux": "redux.sync.add.s32 / and,or,xor.b32: a whole-warp integer reduction (sm_80+)",
}


class PtxWriter:
    """Collects the body of one kernel. Registers are never reused, so each is written by one
    instruction, except loop-carried and branch-result registers (written by `mov` only)."""

    def __init__(self):
        self.counts: dict[str, int] = {cls: 0 for cls in REG_PREFIX}
        self.preamble: list[str] = []
        self.body: list[str] = []
        self.origin: list[object | None] = []  # the Tile IR op behind each body line
        self.preamble_origin: list[object | None] = []
        self.current_op = None
        self.labels = 0
        self.in_preamble = False
        self.arch = 90  # the Lowerer sets the real target
        self.const_table = None  # the Lowerer's .const table registry (softfloat decode tables)
        # bar.sync lines written so far, and their number when the last label was placed: a
        # barrier written after the last label runs on every path to the current line
        self.barriers = 0
        self.barriers_at_label = 0

    def reg(self, cls: str) -> str:
        number = self.counts[cls]
        self.counts[cls] = number + 1
        return f"{REG_PREFIX[cls]}{number}"

    def label(self, hint: str = "L") -> str:
        self.labels += 1
        return f"$L_{hint}_{self.labels}"

    def __call__(self, text: str) -> None:
        """Emit one instruction (without the trailing semicolon)."""
        if self.in_preamble:
            self.preamble.append(f"\t{text};")
            self.preamble_origin.append(self.current_op)
            return
        self.body.append(f"\t{text};")
        self.origin.append(self.current_op)
        if text.startswith("bar.sync"):
            self.barriers += 1

    def place(self, label: str) -> None:
        self.body.append(f"{label}:")
        self.origin.append(self.current_op)
        self.barriers_at_label = self.barriers

    def barrier_since(self, barriers: int) -> bool:
        """Whether every path to the current line passes a bar.sync written after the moment
        `self.barriers` was `barriers`: the last one is after that moment and after the last
        label (code is straight-line from a label on, so nothing can jump past it)."""
        return self.barriers > max(barriers, self.barriers_at_label)

    def declarations(self) -> list[str]:
        return [f"\t.reg {REG_DECL[cls]} \t{REG_PREFIX[cls]}<{count}>;"
                for cls, count in self.counts.items() if count]


def op_of_line(lines: list[str], origin_by_line: dict[int, object], line: int):
    """The Tile IR op that produced PTX line `line` (1-based), or None."""
    return origin_by_line.get(line)


_OPCODE = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][a-z0-9_]*)")


def opcodes_used(ptx: str) -> set:
    """PTX opcodes appearing in instruction lines of `ptx` (for the subset check)."""
    used = set()
    in_body = False
    for line in ptx.splitlines():
        stripped = line.strip()
        if stripped == "{":
            in_body = True
            continue
        if not in_body or not stripped or stripped.startswith((".", "//", "$", "}", "{", ")")):
            continue
        match = _OPCODE.match(stripped)
        if match:
            used.add(match.group(1))
    return used


def check_subset(ptx: str) -> tuple[str, ...]:
    """Opcodes in `ptx` outside PTX_SUBSET (empty when the kernel stays inside it)."""
    return tuple(sorted(opcodes_used(ptx) - set(PTX_SUBSET)))
