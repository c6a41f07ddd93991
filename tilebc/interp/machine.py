"""The abstract machine of the semantics seed (section 6.1): a module, a grid of tile blocks, a
register file per tile block, a global memory of scalars, and memory operations ordered by tokens.

Execution model (documented choices where the seed leaves freedom):

* Tile blocks run one after another, in flattened-id order (x fastest, then y, then z:
  id = x + y*X + z*X*Y), or in a seeded random order with `shuffle=True`. Each runs to completion
  before the next starts; that is one schedule the seed's "unspecified scheduling" admits.
* Memory operations take effect immediately, in program order. Tokens are carried as values but
  impose nothing more: program order is one valid execution of any token ordering (seed 6.8.3).
* Globals are mapped and initialised once per machine, before the first tile block.
"""
from __future__ import annotations

import random
import weakref
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from ..ir.module import Block, Function, Module, Op, Region, Value
from ..ops.spec import Arity, Exit
from . import numeric_ops
from ..errors import TilebcError
from .errors import ExecutionError, MemoryCheckError, UnsupportedError
from .memory import GlobalMemory
from .registry import IMPLEMENTATIONS, PURE, REFUSALS, Signal



# Execution plans by id(block), shared by every Machine: a plan depends only on the IR. The weak
# reference drops the entry with its block (and guards against a reused id).
_PLANS: Dict[int, Tuple[weakref.ref, list]] = {}


class LaunchReport(NamedTuple):
    """What `Machine.launch` (and `run`) did: `batched` is True when all tile blocks ran batched
    (batch.py; in chunks under the memory budget, `progress` is called after each); otherwise
    `reason` says why they (or the blocks after the chunks that did) ran one at a time."""

    blocks: int
    batched: bool
    reason: Optional[str]


class Options:
    """Interpreter switches (see `run`)."""

    def __init__(self, check_memory: bool = True, check_assumptions: bool = False,
                 shuffle: bool = False, seed: int = 0, print_stream=None, progress=None,
                 check_undefined: bool = False, batch="auto", exact_math: bool = False,
                 max_iterations: Optional[int] = None, batch_memory: Optional[int] = None):
        self.check_memory = check_memory
        self.batch_memory = batch_memory  # bytes per batched chunk (None: the default budget)
        self.max_iterations = max_iterations
        self.exact_math = exact_math
        self.check_assumptions = check_assumptions
        self.check_undefined = check_undefined
        self.batch = batch
        self.shuffle = shuffle
        self.seed = seed
        self.print_stream = print_stream
        self.progress = progress


class Machine:
    """One module loaded into a global memory; `launch` runs an entry over a grid."""

    def __init__(self, module: Module, options: Optional[Options] = None,
                 memory: Optional[GlobalMemory] = None):
        self.module = module
        self.options = options or Options()
        self.memory = memory or GlobalMemory(checks=self.options.check_memory)
        self.global_addresses: Dict[str, int] = {}
        self._plans: Dict[int, list] = {}
        self.invariant_results: Dict[int, list] = {}  # per launch: id(op) -> results
        self.iterations = 0  # loop iterations run by the current launch (Options.max_iterations)
        for item in module.globals:
            data = numeric_ops.dense_to_array(item.value, item.type.element)
            storage = np.ascontiguousarray(data).reshape(-1).view(np.uint8).copy()
            buffer = self.memory.map(storage, f"global @{item.name}", alignment=item.alignment)
            buffer.readonly = bool(item.constant)
            self.global_addresses[item.name] = buffer.base

    def launch(self, function: Function, grid: Tuple[int, int, int], arguments: Sequence,
               may_alias: bool = False) -> LaunchReport:
        """Run `function` once per tile block of `grid` with the given parameter values: all
        blocks at once when `options.batch` allows and the kernel can (see batch.py), else one
        after another. `may_alias`: array arguments may share memory (never batched)."""
        gx, gy, gz = grid
        total = gx * gy * gz
        progress = self.options.progress
        self.invariant_results = {}
        self.iterations = 0
        self.compile_block(function.body, set(function.body.args))
        reason, done = self._batched(function, grid, arguments, may_alias)
        if reason is None:
            return LaunchReport(total, True, None)
        self.iterations = 0  # the one-by-one run starts its own count
        # blocks before `done` ran batched, chunk by chunk, in the sequential schedule's order
        order = list(range(done, total))
        if self.options.shuffle:
            random.Random(self.options.seed).shuffle(order)
        with np.errstate(all="ignore"):
            for count, flat in enumerate(order, done):
                coords = (flat % gx, (flat // gx) % gy, flat // (gx * gy))
                block = TileBlock(self, coords, grid)
                block.run_function(function, arguments)
                if progress is not None:
                    progress(count + 1, total)
        return LaunchReport(total, False, reason)

    def _batched(self, function: Function, grid, arguments,
                 may_alias: bool) -> Tuple[Optional[str], int]:
        """Try the batched run, in chunks under the memory budget (batch.py): (None, all blocks)
        when every chunk ran, else (why the rest must run one by one, the blocks that ran)."""
        from .batch import (BatchFallback, block_bytes, chunk_boxes, default_batch_memory,
                            run_batched)
        mode = self.options.batch
        if mode is False:
            return "batch=False", 0
        done = 0
        if self.options.shuffle:
            reason = "shuffle=True runs the tile blocks in a chosen order"
        elif may_alias:
            reason = "array arguments may alias"
        else:
            budget = self.options.batch_memory or default_batch_memory()
            total = grid[0] * grid[1] * grid[2]
            progress = self.options.progress
            try:
                for origin, box in chunk_boxes(grid, budget // block_bytes(function)):
                    with np.errstate(all="ignore"):
                        run_batched(self, function, grid, arguments, origin, box)
                    done += box[0] * box[1] * box[2]
                    if progress is not None:
                        progress(done, total)
                return None, total
            except BatchFallback as fallback:
                reason = fallback.reason
            except TilebcError as error:
                # this chunk left memory untouched: the sequential run from its first block
                # reports the error in schedule order
                return (f"the batched run stopped on an error "
                        f"({error.reason if hasattr(error, 'reason') else error})"), done
            # Anything else is a defect of the batched interpreter and propagates: falling back
            # quietly would hide it (BatchFallback is the one "cannot batch" signal).
        if mode is True:
            raise ExecutionError(f"batch=True, but the launch cannot run batched: {reason}"
                                 + (f" (after {done} tile blocks ran batched)" if done else ""),
                                 file=self.module.source)
        return reason, done

    def tile_block(self, coords: Tuple[int, int, int], grid) -> "TileBlock":
        """A sequential TileBlock of this launch (the batched run asks for these, so batch.py
        needs no import of this module)."""
        return TileBlock(self, coords, grid)

    def count_iteration(self, block) -> None:
        """Count one loop iteration of the launch; `block` (a TileBlock or the batched run) fails
        with ExecutionError once Options.max_iterations is exceeded, so a kernel whose loop
        never ends (or runs for billions of trips) stops with an error instead of hanging."""
        self.iterations += 1
        limit = self.options.max_iterations
        if limit is not None and self.iterations > limit:
            block.fail(f"the launch ran more than {limit} loop iterations (max_iterations)")

    # Per-block execution plans, computed once per block of the IR: one step per op.
    def compile_block(self, block: Block, invariant: Optional[set] = None) -> list:
        """Steps (op, impl, operand layout, results, invariant) for the ops of `block`.

        `invariant` (entry bodies only) holds the values that are the same in every tile block:
        the entry's parameters, then the results of PURE ops whose operands are all invariant.
        Such an op runs once per launch, in the first tile block that reaches it (so its errors
        name the block and order they always would); later blocks reuse its results."""
        steps = self._plans.get(id(block))
        if steps is not None:
            return steps
        cached = _PLANS.get(id(block))
        if cached is not None and cached[0]() is block:
            self._plans[id(block)] = cached[1]
            if invariant is not None:  # the entry body: its hoisted results stay invariant
                for _, _, _, results, hoist in cached[1]:
                    if hoist:
                        invariant.update(results)
            return cached[1]
        steps = []
        for op in block.ops:
            impl = IMPLEMENTATIONS.get(op.name)
            layout = tuple((spec.arity, op.operands.get(spec.name)) for spec in op.spec.operands)
            hoist = False
            if invariant is not None and op.name in PURE and not op.regions:
                used = [v for _, operand in layout if operand is not None
                        for v in (operand if isinstance(operand, (list, tuple)) else (operand,))]
                hoist = all(v in invariant for v in used)
                if hoist:
                    invariant.update(op.results)
            steps.append((op, impl, layout, tuple(op.results), hoist))
        self._plans[id(block)] = steps
        key = id(block)
        _PLANS[key] = (weakref.ref(block, lambda _, key=key: _PLANS.pop(key, None)), steps)
        return steps

class TileBlock:
    """One tile block: its grid coordinates and register file."""

    __slots__ = ("machine", "coords", "grid", "registers", "memory", "options", "current_op")

    def __init__(self, machine: Machine, coords: Tuple[int, int, int], grid):
        self.machine = machine
        self.coords = coords
        self.grid = grid
        self.registers: Dict[Value, object] = {}
        self.memory = machine.memory
        self.options = machine.options
        self.current_op: Optional[Op] = None

    # ------------------------------------------------------------------ errors

    def fail(self, message: str, *, address: Optional[int] = None, kind=ExecutionError,
             op: Optional[Op] = None, block_id=None):
        raise kind(message, op=op or self.current_op, block_id=block_id or self.coords,
                   address=address, file=self.machine.module.source)

    def locate_element(self, index: Tuple[int, ...]):
        """(tile block, element index within the tile) of an index into a value of this block."""
        return self.coords, index

    def memory_fault(self, message: str, address: int):
        self.fail(message, address=address, kind=MemoryCheckError)

    # --------------------------------------------------------------- execution

    def run_function(self, function: Function, arguments: Sequence) -> None:
        signal = self.run_block(function.body, arguments)
        if signal is not None and signal.exit is not Exit.LEAVE_KERNEL:
            self.fail(f"entry body ended with {signal.kind}, expected return")

    def run_region(self, region: Region, arguments: Sequence) -> Optional[Signal]:
        return self.run_block(region.blocks[0], arguments)

    def run_block(self, block: Block, arguments: Sequence) -> Optional[Signal]:
        """Execute the ops of a block; returns the Signal of its terminator (or of a nested
        region that left early: break / continue / return)."""
        registers = self.registers
        for value, argument in zip(block.args, arguments):
            registers[value] = argument
        machine = self.machine
        steps = machine._plans.get(id(block)) or machine.compile_block(block)
        remembered = machine.invariant_results
        for op, impl, layout, results, hoist in steps:
            if hoist:
                outcome = remembered.get(id(op))
                if outcome is not None:
                    for value, result in zip(results, outcome):
                        registers[value] = result
                    continue
            self.current_op = op
            groups = []
            for arity, operand in layout:
                if arity is Arity.ONE:
                    groups.append(registers[operand])
                elif arity is Arity.VARIADIC:
                    groups.append(tuple(registers[v] for v in operand))
                else:
                    groups.append(None if operand is None else registers[operand])
            if impl is None:
                reason = REFUSALS.get(op.name, "no interpreter implementation")
                self.fail(f"{op.name} is not supported on the CPU interpreter: {reason}",
                          kind=UnsupportedError)
            outcome = impl(self, op, *groups)
            if type(outcome) is Signal:
                return outcome
            if outcome is not None:
                if hoist:
                    remembered[id(op)] = outcome
                for value, result in zip(results, outcome):
                    registers[value] = result
        return None

    def value_of(self, value: Value):
        return self.registers[value]


def flatten_grid(grid) -> Tuple[int, int, int]:
    """A 1-3 element grid as (x, y, z), each at least 1."""
    if isinstance(grid, int):
        grid = (grid,)
    grid = tuple(int(g) for g in grid)
    if not 1 <= len(grid) <= 3 or any(g < 1 for g in grid):
        raise ValueError(f"grid must have 1 to 3 positive dimensions, got {grid}")
    return grid + (1,) * (3 - len(grid))


def entry_results(function: Function) -> List:
    return list(function.type.results)
