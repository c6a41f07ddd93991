"""Loading a kernel (every instruction compiled to a numpy closure up front) and running a grid.

Execution model: CTAs run one after another in flattened-id order (x fastest), as the CPU
interpreter runs tile blocks. Inside a CTA all threads run together: every register is a numpy
array of shape [threads] and each instruction is one vectorised step over the active threads.

Control flow: while the CTA is converged there is one program counter and an `alive` mask (threads
that have not returned). A branch that splits the active threads switches to per-thread program
counters; the emulator then always runs the instruction with the smallest program counter for the
threads waiting there (the others wait), which reconverges structured code at the first common
instruction after both paths. When every live thread is at one program counter again the CTA is
converged. `bra.uni` that would diverge, and `bar.sync` reached by only part of the live threads,
are errors (undefined behaviour on the device).

Named barriers with a thread count (`barrier.sync id, count`, `bar.arrive id, count`) and
mbarrier waits may hold threads back: a thread that syncs on a named barrier before `count`
threads have arrived, or whose mbarrier wait failed, is passed over by the scheduler until the
barrier completes (or some mbarrier arrival happens), so the other threads run on. Threads that
can never be released are reported as a deadlock.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import ml_dtypes
import numpy as np

from tilebc.gcpause import collection_paused
from tilebc.interp.memory import GlobalMemory

from .dtypes import DTYPE, TYPES  # noqa: F401  (TYPES re-exported)
from .errors import (SharedRaceError, SimExecutionError, SimMemoryError, SimTrap,
                     UnsupportedInstruction)
from .parser import parse_ptx
from .registry import BUILDERS, KERNEL_PASSES
from .state import (LOCAL_WINDOW, SHARED_BASE, SHARED_WINDOW, SINT, UINT, WINDOW_SIZE, Cta)
from .syntax import Addr, Imm, Instruction, Kernel, Not, Program, Reg, Sym, Vec
from .tensormap import TensorMap

NORMAL, BRANCH, RETURN, BARRIER, TRAP = range(5)
EXITED = np.iinfo(np.int64).max


@dataclass
class Control:
    """A control instruction the execution loop handles itself."""

    kind: int
    target: Optional[int] = None
    uniform: bool = False  # bra.uni
    threads: Optional[int] = None  # a barrier's thread count (None: the whole CTA)
    barrier: int = 0  # the named barrier's number
    arrive: bool = False  # bar.arrive: count the arrival, do not wait


class KernelImage:
    """A kernel ready to run: compiled instructions, register storage types, symbol layout."""

    def __init__(self, program: Program, kernel: Kernel):
        # thousands of closures per kernel and no garbage cycles: collections while they are
        # made would rescan them again and again
        with collection_paused():
            self._build(program, kernel)

    def _build(self, program: Program, kernel: Kernel) -> None:
        self.program = program
        self.kernel = kernel
        self.source = program.source
        # an instruction touching an accumulator of a wgmma in flight: lands it first, as
        # ptxas serialises there (False: an error; the runner checks the JIT's own code so)
        self.serialize_wgmma = True
        self.registers: Dict[str, np.dtype] = {}
        for name, rtype in kernel.registers.items():
            self.registers[name] = np.dtype(np.bool_) if rtype == "pred" else \
                UINT[DTYPE[rtype].itemsize]
        # parameters: byte offsets in the kernel's parameter buffer
        self.param_offsets: Dict[str, Tuple[int, str]] = {}
        offset = 0
        for param in kernel.params:
            offset = -(-offset // param.align) * param.align
            self.param_offsets[param.name] = (offset, param.type)
            offset += param.size
        self.param_size = offset
        # shared and local variables
        self.symbols: Dict[str, Tuple[str, int]] = {}  # name -> (space, address)
        shared, local = SHARED_BASE, 0
        self.call_params = set()
        for var in kernel.variables:
            if var.space == "shared":
                shared = -(-shared // var.align) * var.align
                self.symbols[var.name] = ("shared", shared)
                shared += var.size
            elif var.space == "local":
                local = -(-local // var.align) * var.align
                self.symbols[var.name] = ("local", local)
                local += var.size
            else:  # call-sequence .param declarations
                self.call_params.add(var.name)
        # dynamic shared memory follows the static variables (as the driver places it); a
        # kernel's own variable of the same name shadows a module-level extern
        dynamic_align = max([16] + [var.align for var in program.dynamic_shared])
        shared = -(-shared // dynamic_align) * dynamic_align
        for var in program.dynamic_shared:
            self.symbols.setdefault(var.name, ("shared", shared))
        self.shared_size = shared - SHARED_BASE  # static bytes (with the alignment padding)
        self.local_size = local
        for name in self.param_offsets:
            self.symbols[name] = ("param", self.param_offsets[name][0])
        for var in program.globals:
            self.symbols[var.name] = (var.space, None)  # bound to addresses at launch
        self.threads = kernel.block_size
        cluster = kernel.directives.get("reqnctapercluster", ())
        if int(np.prod(cluster or (1,))) > 1:
            raise UnsupportedInstruction(f"kernel {kernel.name} asks for clusters of "
                                         f"{'x'.join(map(str, cluster))} CTAs (.reqnctapercluster);"
                                         " the emulator runs clusters of one CTA only",
                                         file=self.source, line=kernel.line)
        self.code: List[tuple] = []
        for ins in kernel.instructions:
            builder = BUILDERS.get(ins.opcode)
            if builder is None:
                raise self.unsupported(ins, f"the emulator does not implement `{ins.opcode}`")
            action = builder(ins, self)
            guard = ins.guard
            if guard is not None and guard[0] not in self.registers:
                raise self.unsupported(ins, f"undeclared predicate {guard[0]}")
            if isinstance(action, Control):
                self.code.append((action.kind, None, guard, action, ins))
            else:
                self.code.append((NORMAL, action, guard, None, ins))
        self.code.append((RETURN, None, None, Control(RETURN), None))  # falling off the end
        for kernel_pass in KERNEL_PASSES:
            kernel_pass(self.code)

    # -- errors at load time -------------------------------------------------------------------
    def unsupported(self, ins: Instruction, message: str) -> UnsupportedInstruction:
        return UnsupportedInstruction(f"{message}: `{ins.text}`", file=self.source, line=ins.line,
                                      column=ins.column)

    def label(self, ins: Instruction, name: str) -> int:
        try:
            return self.kernel.labels[name]
        except KeyError:
            raise self.unsupported(ins, f"branch to unknown label {name}") from None

    # -- operand access (compiled once per instruction) -----------------------------------------
    def reader(self, ins: Instruction, operand, ptype: str) -> Callable:
        """cta -> the operand's value as an array (or scalar) of PTX type `ptype`."""
        dtype = DTYPE[ptype]
        if isinstance(operand, Reg):
            name = operand.name
            if name in self.registers:
                storage = self.registers[name]
                if storage == np.bool_ or dtype == np.bool_:
                    if storage != dtype:
                        raise self.unsupported(ins, f"{name} used as .{ptype}")
                    return lambda cta: cta.r[name]
                if storage.itemsize == dtype.itemsize:  # the common case: one step
                    if storage == dtype:
                        return lambda cta: cta.r[name]
                    return lambda cta: cta.r[name].view(dtype)
                return _converter(lambda cta: cta.r[name], storage.itemsize, dtype, ptype)
            if name in CLOCKS:
                width, high = CLOCKS[name]
                return _converter(lambda cta: cta.launch.clock_read(cta.T, width, high), width,
                                  dtype, ptype)
            if name.startswith("%") and "." in name or name in _SPECIALS:
                if name not in _SPECIALS:
                    raise self.unsupported(ins, f"special register {name} is not emulated")
                return _converter(lambda cta: cta.special[name], 4, dtype, ptype)
            raise self.unsupported(ins, f"undeclared register {name}")
        if isinstance(operand, Not):
            inner = self.reader(ins, operand.operand, "pred")
            return lambda cta: ~inner(cta)
        if isinstance(operand, Imm):
            value = immediate(operand, ptype)
            if value is None:
                raise self.unsupported(ins, f"immediate {operand} does not fit .{ptype}")
            return lambda cta: value
        if isinstance(operand, Sym):
            name = operand.name
            if name not in self.symbols:
                raise self.unsupported(ins, f"unknown symbol {name}")
            space, address = self.symbols[name]
            if space in ("shared", "local", "param"):
                value = np.asarray(address, dtype)
                return lambda cta: value
            return lambda cta: np.asarray(cta.launch.global_address(name), dtype)
        raise self.unsupported(ins, f"operand {operand} cannot be read as .{ptype}")

    def writer(self, ins: Instruction, operand, ptype: str) -> Callable:
        """(cta, value, mask) -> None: store `value` (PTX type `ptype`) into the operand."""
        if isinstance(operand, Sym) and operand.name == "_":
            return lambda cta, value, mask: None
        if not isinstance(operand, Reg) or operand.name not in self.registers:
            raise self.unsupported(ins, f"destination {operand} is not a declared register")
        name = operand.name
        storage = self.registers[name]
        dtype = DTYPE[ptype]
        T_signed = ptype.startswith("s")
        if storage == np.bool_ or dtype == np.bool_:
            if storage != dtype:
                raise self.unsupported(ins, f"{name} written as .{ptype}")
            convert = None
        elif storage.itemsize == dtype.itemsize:
            convert = None if dtype == storage else (lambda v: v.view(storage))
        elif storage.itemsize > dtype.itemsize:
            wide = SINT[storage.itemsize] if T_signed else UINT[storage.itemsize]
            narrow = SINT[dtype.itemsize] if T_signed else UINT[dtype.itemsize]
            convert = lambda v: v.view(narrow).astype(wide).view(storage)  # noqa: E731
        else:
            convert = lambda v: v.view(UINT[dtype.itemsize]).astype(storage)  # noqa: E731

        def put(cta, value, mask):
            if value.__class__ is not np.ndarray or value.dtype is not dtype and \
                    value.dtype != dtype:  # (`is`: the usual case, without the comparison)
                value = np.asarray(value, dtype)
            if value.shape != (cta.T,):
                value = np.full(cta.T, value, dtype)
            if convert is not None:
                value = convert(value)
            r = cta.r
            r[name] = value if mask is None else np.where(mask, value, r[name])
        return put

    def address(self, ins: Instruction, operand: Addr, width: str = "u64") -> Callable:
        """cta -> uint64 addresses (array or scalar) of an [base+offset] operand."""
        if not isinstance(operand, Addr):
            raise self.unsupported(ins, f"expected an address operand, got {operand}")
        offset = np.uint64(operand.offset & (2 ** 64 - 1))
        if operand.base is None:
            return lambda cta: offset
        if isinstance(operand.base, Reg):
            name = operand.base.name
            storage = self.registers.get(name)
            if storage is None or storage == np.bool_:
                raise self.unsupported(ins, f"address register {name} is not an integer register")
            base = self.reader(ins, operand.base, "u64" if storage.itemsize == 8 else "u32")
            return lambda cta: base(cta).astype(np.uint64) + offset
        base = self.reader(ins, operand.base, "u64")
        return lambda cta: np.uint64(base(cta)) + offset


_SPECIALS = {"%tid.x", "%tid.y", "%tid.z", "%ntid.x", "%ntid.y", "%ntid.z", "%laneid", "%warpid",
             "%nwarpid", "%smid", "%nsmid", "%ctaid.x", "%ctaid.y", "%ctaid.z", "%nctaid.x",
             "%nctaid.y", "%nctaid.z", "%lanemask_eq", "%lanemask_lt", "%lanemask_le",
             # clusters (sm_90): a launch without cluster dimensions makes each CTA its own
             # cluster of one, so tileiras's %clusterid is the CTA id
             "%clusterid.x", "%clusterid.y", "%clusterid.z", "%nclusterid.x", "%nclusterid.y",
             "%nclusterid.z", "%cluster_ctaid.x", "%cluster_ctaid.y", "%cluster_ctaid.z",
             "%cluster_nctaid.x", "%cluster_nctaid.y", "%cluster_nctaid.z", "%cluster_ctarank",
             "%cluster_nctarank"}


# Clock registers -> (bytes, high word?). They read a fake clock, the same for %clock* and
# %globaltimer*: nanoseconds since the launch, advancing CLOCK_STEP_NS at every read, so it is
# monotonic and busy-wait loops (tileiras's assert waits 0.5 ms before trap) end quickly.
CLOCKS = {"%globaltimer": (8, False), "%globaltimer_lo": (4, False),
          "%globaltimer_hi": (4, True), "%clock64": (8, False), "%clock": (4, False)}
CLOCK_STEP_NS = 1000


def _converter(get: Callable, width: int, dtype: np.dtype, ptype: str) -> Callable:
    """Read a register of `width` bytes as `dtype`: same width is a view; a narrower type reads
    the low bits; a wider type extends (sign-extends for .s types)."""
    if width == dtype.itemsize:
        return lambda cta: get(cta).view(dtype)
    if width > dtype.itemsize:
        narrow = UINT[dtype.itemsize]
        return lambda cta: get(cta).astype(narrow).view(dtype)
    if ptype.startswith("s"):
        small, big = SINT[width], SINT[dtype.itemsize]
        return lambda cta: get(cta).view(small).astype(big).view(dtype)
    big = UINT[dtype.itemsize]
    return lambda cta: get(cta).astype(big).view(dtype)


def immediate(operand: Imm, ptype: str):
    """A numpy scalar of `ptype` for an immediate (ints wrap to the width; 0f/0d are bits)."""
    dtype = DTYPE[ptype]
    if operand.bits is not None:
        raw = np.array(operand.bits, UINT[operand.width // 8]).view(
            np.float32 if operand.width == 32 else np.float64)
        if dtype.kind == "f" or dtype == ml_dtypes.bfloat16:
            return raw.astype(dtype)[()]
        if dtype.itemsize * 8 == operand.width:
            return np.array(operand.bits, UINT[dtype.itemsize]).view(dtype)[()]
        return None
    value = operand.value
    if dtype == np.bool_:
        return np.bool_(bool(value))
    if dtype.kind == "f" or dtype == ml_dtypes.bfloat16:
        return np.asarray(value, np.float64).astype(dtype)[()]
    if isinstance(value, float):
        return None
    bits = int(value) & ((1 << (8 * dtype.itemsize)) - 1)
    return np.array(bits, UINT[dtype.itemsize]).view(dtype)[()]


# ------------------------------------------------------------------------------------ launch


class Launch:
    """One grid launch: global memory, parameter values, module data, options."""

    def __init__(self, image: KernelImage, grid, threads: int, memory: GlobalMemory,
                 params: bytes, check: bool, print_stream, max_steps: int,
                 global_symbols: Optional[Dict[str, int]] = None, dynamic_shared_bytes: int = 0,
                 profile=None):
        self.image = image
        self.profile = profile  # a sim.profile.Profile, or None (no counting)
        self.grid = grid
        self.T = threads
        self.memory = memory
        self.params = params
        self.check = check
        self.print_stream = print_stream
        self.max_steps = max_steps
        self.shared_size = image.shared_size + dynamic_shared_bytes
        self.local_size = image.local_size
        self.clock_ns = 0  # the fake clock (see CLOCKS)
        self.tensor_maps: Dict[int, TensorMap] = {}  # parameter offset -> the map it holds
        self.globals: Dict[str, int] = dict(global_symbols or {})
        for var in image.program.globals:
            if var.name in self.globals:
                continue
            data = np.frombuffer(var.init or bytes(var.size), np.uint8).copy()
            buffer = memory.map(data, f"PTX {var.space} {var.name}", alignment=var.align)
            buffer.readonly = var.space == "const"
            self.globals[var.name] = buffer.base

    def clock_read(self, threads: int, width: int, high: bool) -> np.ndarray:
        """One read of the fake clock by every thread (all see the same time); then it ticks."""
        self.clock_ns += CLOCK_STEP_NS
        value = self.clock_ns >> 32 if high else self.clock_ns & ((1 << 8 * width) - 1)
        return np.full(threads, value, UINT[width])

    def global_address(self, name: str) -> int:
        return self.globals[name]

    # -- running ---------------------------------------------------------------------------
    def run(self) -> None:
        gx, gy, gz = self.grid
        flats = range(gx * gy * gz)
        if self.profile is not None:
            flats = self.profile.attach(self.image, self.grid, self.T)
        with np.errstate(all="ignore"):
            for flat in flats:
                ctaid = (flat % gx, (flat // gx) % gy, flat // (gx * gy))
                cta = Cta(self, ctaid, self.T, self.image.registers)
                self.run_cta(cta)
                if cta.wgmma_groups or cta.wgmma_open:
                    raise self.error(cta, None, "the CTA finished with wgmma.mma_async results "
                                     "no wgmma.commit_group + wait_group retired (they never "
                                     "land in the registers)", SimExecutionError)
                if not self.image.serialize_wgmma and any(
                        bar.in_flight for bar in cta.mbarriers.values()):
                    raise self.error(cta, None, "the CTA finished with bulk or tensor copies to "
                                     "shared memory no thread waited for on their mbarrier",
                                     SimExecutionError)
                if self.profile is not None:
                    self.profile.ctas_run += 1

    def run_cta(self, cta: Cta) -> None:
        code = self.image.code
        T = self.T
        pc = 0
        alive = None  # None: every thread is alive; else a bool mask
        pcs = None  # per-thread program counters while divergent
        steps = 0
        limit = self.max_steps
        r = cta.r
        prof = self.profile  # None unless counting: one test per step
        while True:
            steps += 1
            if steps > limit:
                raise self.error(cta, code[pc if pcs is None else 0][4],
                                 f"CTA did not finish within {limit} instructions "
                                 f"(max_steps); an endless loop?", SimExecutionError)
            if pcs is None:
                kind, fn, guard, control, ins = code[pc]
                mask = alive
                if guard is not None:
                    g = r[guard[0]]
                    if guard[1]:
                        g = ~g
                    if alive is not None:
                        g = g & alive
                    count = np.count_nonzero(g)
                    if count == 0:
                        if prof is not None:
                            prof.step(pc, cta, alive, False)
                        pc += 1
                        continue
                    if count != (T if alive is None else np.count_nonzero(alive)):
                        mask = g
                if prof is not None:
                    prof.step(pc, cta, alive, mask)
                if kind == NORMAL:
                    fn(cta, mask)
                    pc += 1
                elif kind == BRANCH:
                    if mask is alive:
                        pc = control.target
                    else:
                        if control.uniform:
                            raise self.error(cta, ins, "bra.uni with a predicate that differs "
                                             "between the CTA's active threads", SimExecutionError)
                        pcs = np.full(T, pc + 1, np.int64)
                        pcs[mask] = control.target
                        if alive is not None:
                            pcs[~alive] = EXITED
                elif kind == RETURN:
                    if mask is alive:
                        return
                    alive = ~mask if alive is None else alive & ~mask
                    pc += 1
                elif kind == BARRIER:
                    if prof is not None:
                        prof.barrier()
                    if control.threads is not None and (control.threads < T or control.arrive):
                        arriving = mask if mask is not None else np.ones(T, np.bool_)
                        if not self.named_barrier(cta, ins, control, arriving):
                            # the arrivals wait: the other live threads run on without them
                            pcs = np.full(T, pc + 1, np.int64)
                            if alive is not None:
                                pcs[~alive] = EXITED
                        pc += 1
                        continue
                    if mask is not alive:
                        raise self.error(cta, ins, "bar.sync under a predicate that only part "
                                         "of the CTA satisfies", SimExecutionError)
                    cta.shared.barrier()
                    pc += 1
                else:
                    self.trap(cta, ins, mask)
                continue
            # divergent: run the smallest program counter's threads, passing over threads
            # whose mbarrier wait failed until some arrival happens
            current = int(pcs.min())
            if current == EXITED:
                return
            if cta.any_blocked or cta.any_barrier_wait:
                live = pcs != EXITED
                runnable = live & ~cta.blocked & ~cta.barrier_wait
                if not runnable.any() and cta.any_blocked:
                    # all mbarrier waits failed: retry them (isa_sm90 counts the stalls)
                    cta.blocked[:] = False
                    cta.any_blocked = False
                    runnable = live & ~cta.barrier_wait
                if not runnable.any():
                    waiting = int(np.argmax(cta.barrier_wait))
                    raise self.error(cta, code[int(pcs[waiting]) - 1][4], "deadlock: threads "
                                     "wait at a named barrier that no running thread can "
                                     "complete", SimExecutionError, thread=waiting)
                current = int(pcs[runnable].min())
            here = pcs == current
            if cta.any_barrier_wait:
                here &= ~cta.barrier_wait
            live = pcs != EXITED
            if np.array_equal(here, live):
                pcs = None
                pc = current
                alive = None if live.all() else live
                continue
            kind, fn, guard, control, ins = code[current]
            mask = here
            if guard is not None:
                g = r[guard[0]]
                mask = here & (~g if guard[1] else g)
            if prof is not None:
                prof.step(current, cta, here, mask if mask.any() else False)
            if kind == NORMAL:
                if mask.any():
                    fn(cta, mask)
                pcs[here] = current + 1
            elif kind == BRANCH:
                if control.uniform and mask.any() and not np.array_equal(mask, here):
                    raise self.error(cta, ins, "bra.uni with a predicate that differs between "
                                     "the active threads", SimExecutionError)
                pcs[here] = current + 1
                pcs[mask] = control.target
            elif kind == RETURN:
                pcs[here] = current + 1
                pcs[mask] = EXITED
            elif kind == BARRIER:
                if control.threads is None:
                    raise self.error(cta, ins, "bar.sync in divergent code (not every live "
                                     "thread of the CTA reaches this barrier together)",
                                     SimExecutionError)
                if prof is not None:
                    prof.barrier()
                pcs[here] = current + 1
                if mask.any():
                    self.named_barrier(cta, ins, control, mask)
            else:
                if mask.any():
                    self.trap(cta, ins, mask)
                pcs[here] = current + 1

    def named_barrier(self, cta: Cta, ins: Instruction, control: Control, arriving) -> bool:
        """`arriving` threads arrive at named barrier `control.barrier` (of `control.threads`
        threads). Returns whether they go on: the barrier completed (its waiting threads are
        released, and shared memory is ordered) or they only arrive (bar.arrive); otherwise
        they are marked as waiting for it."""
        number, count = control.barrier, control.threads
        arrived = cta.named_barriers.get(number)
        if arrived is None:
            arrived = np.zeros(cta.T, np.bool_)
        if np.any(arrived & arriving):
            raise self.error(cta, ins, f"a thread arrives twice at barrier {number} before it "
                             f"completes", SimExecutionError,
                             thread=int(np.argmax(arrived & arriving)))
        arrived = arrived | arriving
        total = int(np.count_nonzero(arrived))
        if total > count:
            raise self.error(cta, ins, f"barrier {number} for {count} threads reached by "
                             f"{total} threads", SimExecutionError)
        if total == count:
            cta.named_barriers.pop(number, None)
            if cta.any_barrier_wait:
                cta.barrier_wait &= ~arrived
                cta.any_barrier_wait = bool(cta.barrier_wait.any())
            cta.shared.barrier()
            return True
        cta.named_barriers[number] = arrived
        if control.arrive:
            return True
        cta.barrier_wait |= arriving
        cta.any_barrier_wait = True
        return False

    def trap(self, cta: Cta, ins: Instruction, mask) -> None:
        printed = "".join(cta.printed).strip()
        message = f"trap: {printed}" if printed else "trap executed"
        raise self.error(cta, ins, message, SimTrap, thread=_first(cta, mask))

    # -- errors -----------------------------------------------------------------------------
    def error(self, cta: Cta, ins: Optional[Instruction], message: str, kind=SimExecutionError,
              thread=None, address=None):
        return kind(message, file=self.image.source, line=ins.line if ins else None,
                    column=ins.column if ins else None, cta=cta.ctaid, thread=thread,
                    address=address, text=ins.text if ins else None)

    def fault_for(self, cta: Cta, ins: Instruction):
        """The fault callback memory accesses use: raises a located SimMemoryError."""
        def fault(message, address=None, thread=None, race=False):
            raise self.error(cta, ins, message, SharedRaceError if race else SimMemoryError,
                             thread=thread, address=address)
        return fault


def _first(cta: Cta, mask) -> int:
    return 0 if mask is None else int(np.argmax(mask))


# ------------------------------------------------------------------------------ public entry


def load_kernel(ptx, entry: Optional[str] = None, source: Optional[str] = None) -> KernelImage:
    """Parse PTX (text or a parsed Program) and compile one kernel for the emulator. Raises
    UnsupportedInstruction naming the first instruction the emulator does not implement."""
    program = ptx if isinstance(ptx, Program) else parse_ptx(ptx, source)
    return KernelImage(program, program.kernel(entry))


def pack_params(image: KernelImage, values: Sequence) -> bytes:
    """The kernel's parameter buffer from one value per .param (ints, floats, numpy scalars).
    Floats are converted to the parameter's type; integers wrap to its width; numpy values of
    the parameter's width are taken bit for bit."""
    params = [param for param in image.kernel.params if not param.hidden]
    if len(values) != len(params):
        raise SimExecutionError(f"kernel {image.kernel.name} takes {len(params)} parameters, "
                                f"got {len(values)}", file=image.source)
    buffer = bytearray(image.param_size)  # .hidden parameters (tensor maps) stay zero
    for param, value in zip(params, values):
        offset, ptype = image.param_offsets[param.name]
        dtype = DTYPE[ptype]
        array = np.asarray(value)
        if array.dtype.itemsize == dtype.itemsize and array.dtype.kind in "iub":
            raw = array.astype(array.dtype).tobytes()
        elif array.dtype.kind == "f" or array.dtype == ml_dtypes.bfloat16:
            if dtype.kind == "f":
                raw = array.astype(dtype).tobytes()
            elif array.dtype.itemsize == dtype.itemsize:
                raw = array.tobytes()  # f16/bf16 bits in a .b16 parameter
            else:
                raise SimExecutionError(f"parameter {param.name} (.{ptype}) got a "
                                        f"{array.dtype} value", file=image.source)
        else:
            bits = int(array) & ((1 << (8 * dtype.itemsize)) - 1)
            raw = bits.to_bytes(dtype.itemsize, "little")
        buffer[offset:offset + len(raw)] = raw
    return bytes(buffer)


def emulate(ptx, entry: Optional[str], grid, params: Sequence, *,
            memory: Optional[GlobalMemory] = None, threads: Optional[int] = None,
            check: bool = True, print_stream=None, max_steps: int = 50_000_000,
            global_symbols: Optional[Dict[str, int]] = None, source: Optional[str] = None,
            dynamic_shared_bytes: int = 0, profile=None,
            tensor_maps: Optional[Dict[str, TensorMap]] = None):
    """Run a PTX kernel over `grid` (1-3 ints) with one value per kernel parameter (the
    `.hidden` ones excepted).

    `memory` is the global address space (a `tilebc.interp.memory.GlobalMemory` whose buffers
    hold the kernel's arrays); pointer parameters are addresses in it. `threads` defaults to the
    kernel's .reqntid / .maxntid. `global_symbols` binds PTX .global variables to existing
    addresses (others are mapped fresh with their initialisers). `dynamic_shared_bytes` sizes
    the `.extern .shared` arrays, as a launch's shared-memory size does. `profile` (a
    `sim.profile.Profile`) counts what the launch asks of the hardware (and may run only a
    sample of the CTAs). A TMA tensor map parameter (`.param .align 64 .b8 name[128]`) takes a
    sim.tensormap.TensorMap as its value; `tensor_maps` gives those of `.hidden` parameters
    (tileiras's), by name. Returns the KernelImage."""
    if dynamic_shared_bytes < 0:
        raise SimExecutionError(f"dynamic_shared_bytes must be >= 0, got {dynamic_shared_bytes}")
    image = ptx if isinstance(ptx, KernelImage) else load_kernel(ptx, entry, source)
    threads = threads or image.threads
    if not threads:
        raise SimExecutionError("threads per CTA unknown: pass threads= or declare .maxntid",
                                file=image.source)
    if isinstance(grid, int):
        grid = (grid,)
    grid = tuple(int(g) for g in grid) + (1,) * (3 - len(tuple(grid)))
    memory = memory if memory is not None else GlobalMemory(checks=check)
    tensor_maps = dict(tensor_maps or {})
    visible = [param for param in image.kernel.params if not param.hidden]
    params = list(params)
    for index, (param, value) in enumerate(zip(visible, params)):
        if isinstance(value, TensorMap):  # a CUtensorMap passed by value (__grid_constant__)
            tensor_maps[param.name] = value
            params[index] = 0
    launch = Launch(image, grid, threads, memory, pack_params(image, params), check,
                    print_stream, max_steps, global_symbols, dynamic_shared_bytes, profile)
    for name, tensor_map in tensor_maps.items():
        if name not in image.param_offsets:
            raise SimExecutionError(f"tensor map for {name}: the kernel has no such parameter",
                                    file=image.source)
        offset, _ = image.param_offsets[name]
        size = next(param.size for param in image.kernel.params if param.name == name)
        if size != 128 or offset % 64:
            raise SimExecutionError(f"tensor map for {name}: a tensor map parameter is 128 "
                                    "bytes, 64-byte aligned", file=image.source)
        tensor_map.validate()
        launch.tensor_maps[offset] = tensor_map
    launch.run()
    return image
