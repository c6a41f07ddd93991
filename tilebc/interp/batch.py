"""Batched execution: every tile block of a launch at once, as numpy arrays with a block axis.

Running blocks one by one costs the Python dispatch of every op once per block; for grids of many
small blocks that dominates. The batched run interprets the entry once. A value that differs
between blocks ("varying") carries a leading axis of length B (the number of blocks, in flattened
id order: x fastest); a value that is the same in every block ("uniform": parameters, constants,
views, anything computed from those alone) has no block axis and is computed once. Ops run as:

* uniform operands only: the op's ordinary implementation, once;
* lane-wise ops (registry.LANEWISE: element-wise arithmetic, conversions, mma, pointer loads):
  the ordinary implementation once, numpy broadcasting the block axis;
* shape-aware ops, control flow, view loads and all stores: the batched implementations below;
* anything else: the ordinary implementation once per block on that block's slices, stacked.

Results are identical to running the blocks one after another (`Machine.launch`'s schedule), and
the run gives up (raises BatchFallback, before any memory is written) whenever they might not be:

* control flow must be uniform: an `if` condition, `for` bounds (and so every `break`) must be
  the same in every block;
* blocks must not communicate through memory: no buffer is both read and written during the
  launch, and stores are held in a log and performed only at the end, in the sequential order.
  An element written by several blocks keeps the last write of the highest block, as in the
  sequential schedule; when the log cannot reproduce that order the run gives up;
* atomics, print (its output order), alloca (scratch per block) and unsupported ops are refused
  up front; a view or other non-array value that differs between blocks gives up at run time.

Every access is still checked (bounds, alignment, initialisation, read-only): a fault, failed
assert or other error stops the batched run with memory untouched, and `Machine.launch` reruns the
launch one block at a time so the error names the block and op the sequential schedule reaches.

Memory: a batched value holds every block's tile, so the run's memory grows with the grid. A launch
therefore runs in chunks of consecutive tile blocks (`chunk_boxes`: whole z-planes, else whole rows,
else runs of one row) whose estimated working set fits `Options.batch_memory` (default
DEFAULT_BATCH_MEMORY, 512 MiB; the TILEBC_BATCH_MEMORY environment variable or `run(...,
batch_memory=)` change it). The estimate (`block_bytes`) is per tile block: the bytes of every tile
result of the entry (nested regions included), plus 24 bytes per element of its largest tile for
the temporaries of one op (int64 addresses and block numbers of a store, f64 widening). Each chunk
is a batched run of its own, applied before the next starts, which is the sequential schedule's
order; when a chunk cannot run batched, the launch goes on one block at a time from that chunk's
first block, so results are bit for bit those of the unchunked and the sequential runs.
"""
from __future__ import annotations

import weakref
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..ir.module import Block, Function, Region
from ..ops.spec import Arity, Effects, Exit, OpSpec
from .errors import ExecutionError, MemoryCheckError
from .registry import IMPLEMENTATIONS, LANEWISE, Signal
from .arena import Scratch
from .memory import Write
from .ops._common import output, result_dtype, result_shape
from .ops.memory import TOKEN, pointee_dtype
from .ops.shape import _window
from .ops.views import as_tiled, view_access
from .views import overlaps
from .fusion import FUSED_UFUNCS, Deferred, fusible_ops
from .storelog import BatchFallback, MemoryLog


# Effects (op table) of the ops a batched run refuses before it starts, with the reason.
REFUSED_EFFECTS = {
    Effects.ATOMIC: "atomics let tile blocks communicate",
    Effects.OUTPUT: "prints must appear in tile-block order",
    Effects.ALLOC: "scratch memory belongs to one tile block",
}
# id(function) -> (weak reference, reason): IR functions compare by value, so not a dict key
_REFUSALS: Dict[int, Tuple[weakref.ref, Optional[str]]] = {}


def refusal(function: Function) -> Optional[str]:
    """Why `function` cannot run batched whatever its arguments, or None."""
    cached = _REFUSALS.get(id(function))
    if cached is not None and cached[0]() is function:
        return cached[1]
    reason = None
    stack: List[Block] = [function.body]
    while stack and reason is None:
        for op in stack.pop().ops:
            if op.spec.effects in REFUSED_EFFECTS:
                reason = f"{op.name}: {REFUSED_EFFECTS[op.spec.effects]}"
                break
            if op.name not in IMPLEMENTATIONS:
                reason = f"{op.name} has no interpreter implementation"
                break
            for region in op.regions:
                stack.extend(region.blocks)
    _REFUSALS[id(function)] = (weakref.ref(function), reason)
    return reason


class BatchSignal(Signal):
    """A region's end in a batched run: the Signal plus whether each value is varying."""

    __slots__ = ("flags",)

    def __init__(self, terminator: OpSpec, values, flags):
        super().__init__(terminator, values)
        self.flags = flags


# id(block) -> (weak reference, BatchBlock.plan's steps), shared by every launch
_BATCH_PLANS: Dict[int, Tuple[weakref.ref, list]] = {}


# --------------------------------------------------------------------------------- the block


class BatchBlock:
    """The tile blocks of one chunk of a launch (a box of the grid at `origin`, by default the
    whole grid): the register file holds each value once, with a leading block axis (the chunk's
    blocks in flattened-id order) when it is varying. Offers the TileBlock interface the op
    implementations use; `grid` is the launch's whole grid."""

    def __init__(self, machine, grid: Tuple[int, int, int], log: MemoryLog,
                 origin: Tuple[int, int, int] = (0, 0, 0),
                 box: Optional[Tuple[int, int, int]] = None):
        self.machine = machine
        self.grid = grid
        self.origin = origin
        self.box = tuple(grid) if box is None else box
        self.count = self.box[0] * self.box[1] * self.box[2]
        self.coords = None  # no single block: errors from here are re-reported sequentially
        self.memory = machine.memory
        self.options = machine.options
        self.registers: Dict = {}
        self.varying: set = set()
        self.current_op = None
        self.log = log
        self._blocks: Optional[list] = None
        self._coords = None
        self._local = None
        self.scratch = Scratch()  # pooled result buffers (ops/_common.output), freed at the end
        self._affine: Dict[int, tuple] = {}  # id(index array) -> (array, coefficients or None)
        self.entry_body = None  # set by run_batched, with the ids of its fusible ops
        self.fusible = frozenset()

    # ---------------------------------------------------------------------------- errors

    def fail(self, message: str, *, address=None, kind=ExecutionError, op=None, block_id=None):
        raise kind(message, op=op or self.current_op, block_id=block_id, address=address,
                   file=self.machine.module.source)

    def memory_fault(self, message: str, address: int):
        self.fail(message, address=address, kind=MemoryCheckError)

    def block_coords(self, flat: int) -> Tuple[int, int, int]:
        """The grid coordinates of the chunk's block number `flat`."""
        bx, by, _ = self.box
        ox, oy, oz = self.origin
        return ox + flat % bx, oy + (flat // bx) % by, oz + flat // (bx * by)

    def local_coords(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(x, y, z) of every block relative to the chunk's origin, in flattened-id order."""
        if self._local is None:
            flat = np.arange(self.count, dtype=np.int64)
            bx, by, _ = self.box
            self._local = (flat % bx, (flat // bx) % by, flat // (bx * by))
        return self._local

    def flat_coords(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(x, y, z) grid coordinates of every block, in flattened-id order."""
        if self._coords is None:
            self._coords = tuple(local + start
                                 for local, start in zip(self.local_coords(), self.origin))
        return self._coords

    def affine_index(self, value, varying: bool):
        """(c, cx, cy, cz) with value == c + cx*x + cy*y + cz*z in every block (x, y, z its
        coordinates relative to the chunk's origin), or None when the value is not such a
        function (or not a scalar). Computed once per array and chunk; block ids are seeded by
        get_tile_block_id."""
        if not varying:
            scalar = np.asarray(value)
            return (int(scalar), 0, 0, 0) if scalar.ndim == 0 and scalar.dtype.kind in "iu" \
                else None
        known = self._affine.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        array = np.asarray(value)
        coefficients = None
        if array.shape == (self.count,) and array.dtype.kind in "iu":
            values = array.astype(np.int64)
            gx, gy, gz = self.box
            constant = int(values[0])
            coefficients = (constant, int(values[1]) - constant if gx > 1 else 0,
                            int(values[gx]) - constant if gy > 1 else 0,
                            int(values[gx * gy]) - constant if gz > 1 else 0)
            x, y, z = self.local_coords()
            if not np.array_equal(values, constant + coefficients[1] * x +
                                  coefficients[2] * y + coefficients[3] * z):
                coefficients = None
        self._affine[id(value)] = (value, coefficients)
        return coefficients

    def locate_element(self, index):
        """An index into a varying value: (its tile block, the element index in the tile)."""
        return self.block_coords(int(index[0])), tuple(index[1:])

    # ------------------------------------------------------------------------- execution

    def lift(self, value, varying: bool) -> np.ndarray:
        """`value` with the block axis (a broadcast view when it is uniform)."""
        value = np.asarray(value)
        return value if varying else np.broadcast_to(value, (self.count,) + value.shape)

    def tile_block(self, flat: int):
        """The ordinary TileBlock of block `flat`, for ops run once per block."""
        if self._blocks is None:
            self._blocks = [self.machine.tile_block(self.block_coords(b), self.grid)
                            for b in range(self.count)]
            for block in self._blocks:
                block.memory = self.memory
        return self._blocks[flat]

    def run_region(self, region: Region, arguments: Sequence, flags=None):
        return self.run_block(region.blocks[0], arguments, flags)

    def run_block(self, block: Block, arguments: Sequence, flags=None):
        registers, varying = self.registers, self.varying
        if flags is None:
            flags = (False,) * len(arguments)
        for value, argument, flag in zip(block.args, arguments, flags):
            registers[value] = argument
            if flag:
                varying.add(value)
            else:
                varying.discard(value)
        for op, impl, layout, results, special, lanewise, fused in self.plan(block):
            self.current_op = op
            groups, group_flags, any_varying = [], [], False
            for arity, operand in layout:
                if arity is Arity.VARIADIC:
                    groups.append(tuple(registers[v] for v in operand))
                    these = tuple(v in varying for v in operand)
                    any_varying = any_varying or any(these)
                    group_flags.append(these)
                elif operand is None:
                    groups.append(None)
                    group_flags.append(False)
                else:
                    groups.append(registers[operand])
                    flag = operand in varying
                    any_varying = any_varying or flag
                    group_flags.append(flag)
            if fused and any_varying:
                values, result_flags = [self.defer(op, groups, group_flags)], (True,)
            elif special is not None:
                outcome = special(self, op, impl, groups, group_flags)
                if isinstance(outcome, Signal):
                    return outcome
                values, result_flags = outcome
            elif not any_varying:
                values = impl(self, op, *groups) or ()
                result_flags = (False,) * len(results)
            elif lanewise:
                values = impl(self, op, *groups)
                result_flags = tuple(isinstance(v, np.ndarray) for v in values)
            else:
                values, result_flags = self.per_block(op, impl, groups, group_flags)
            for value, result, flag in zip(results, values, result_flags):
                registers[value] = result
                if flag:
                    varying.add(value)
                else:
                    varying.discard(value)
        return None

    def plan(self, block: Block) -> list:
        """The machine's steps for `block`, each with its batched form (BATCHED), whether it is
        LANEWISE and whether it runs deferred (fusible_ops); computed once per block."""
        cached = _BATCH_PLANS.get(id(block))
        if cached is not None and cached[0]() is block:
            return cached[1]
        fusible = self.fusible if block is self.entry_body else frozenset()
        steps = [(op, impl, layout, results, BATCHED.get(op.name), op.name in LANEWISE,
                  id(op) in fusible)
                 for op, impl, layout, results, _ in self.machine.compile_block(block)]
        key = id(block)
        _BATCH_PLANS[key] = (weakref.ref(block, lambda _, key=key: _BATCH_PLANS.pop(key, None)),
                             steps)
        return steps

    def defer(self, op, groups, flags):
        """A fusible op's result: Deferred when its operands are numpy arrays of its type, else
        computed now."""
        dtype = result_dtype(op)
        lhs, rhs = groups
        if getattr(lhs, "dtype", None) != dtype or getattr(rhs, "dtype", None) != dtype:
            return IMPLEMENTATIONS[op.name](self, op, lhs, rhs)[0]
        return Deferred(FUSED_UFUNCS[op.name], (lhs, rhs), tuple(flags), dtype,
                        (self.count,) + tuple(result_shape(op)))

    def per_block(self, op, impl, groups, flags):
        """Run the ordinary implementation once per block on the block's slices; stack the
        array results (varying); other results must agree across blocks (uniform)."""
        outcomes = []
        for flat in range(self.count):
            arguments = []
            for group, flag in zip(groups, flags):
                if isinstance(flag, tuple):
                    arguments.append(tuple(g[flat] if f else g for g, f in zip(group, flag)))
                else:
                    arguments.append(group[flat] if flag else group)
            block = self.tile_block(flat)
            block.current_op = op
            outcome = impl(block, op, *arguments)
            if isinstance(outcome, Signal):
                raise BatchFallback(f"{op.name} ends a region per tile block")
            outcomes.append(outcome or [])
        values, result_flags = [], []
        for per_block in zip(*outcomes):
            first = per_block[0]
            if isinstance(first, (np.ndarray, np.generic)):
                values.append(np.stack([np.asarray(v) for v in per_block]))
                result_flags.append(True)
            elif all(v is first or v == first for v in per_block):
                values.append(first)
                result_flags.append(False)
            else:
                raise BatchFallback(f"{op.name} gives tile blocks different "
                                    f"{type(first).__name__} values")
        return values, result_flags


# ------------------------------------------------------------------------- batched op forms

BATCHED: Dict[str, object] = {}


def batched(*mnemonics: str):
    def register(fn):
        for mnemonic in mnemonics:
            BATCHED[mnemonic] = fn
        return fn
    return register


def _uniform(bb: BatchBlock, value, varying: bool, what: str):
    """The one value every block has, or BatchFallback when blocks disagree."""
    if not varying:
        return value
    first = value[0]
    if not np.all(value == first):
        raise BatchFallback(f"{what} of {bb.current_op.name} differs between tile blocks")
    return first


@batched("yield", "continue", "break", "return")
def _terminator(bb, op, impl, groups, flags):
    return BatchSignal(op.spec, groups[0], flags[0])


@batched("if")
def _if(bb, op, impl, groups, flags):
    condition = _uniform(bb, groups[0], flags[0], "the condition")
    region = op.regions[0] if bool(condition) else op.regions[1] if len(op.regions) > 1 else None
    if region is None or not region.blocks:
        return [], []
    signal = bb.run_region(region, (), ())
    bb.current_op = op
    if signal is None:
        return [], []
    if signal.exit is Exit.VALUES:
        return list(signal.values), list(signal.flags)
    return signal


def _loop_body(bb, op, body, leading, leading_flags, carried, carried_flags):
    """One iteration: (None, carried, flags), or (Exit.LEAVE_LOOP / LEAVE_KERNEL, signal, None)."""
    signal = bb.run_region(body, leading + carried, leading_flags + carried_flags)
    bb.current_op = op
    if signal is None:
        return None, carried, carried_flags
    if signal.exit is Exit.NEXT:
        return None, list(signal.values), list(signal.flags)
    if signal.exit in (Exit.LEAVE_LOOP, Exit.LEAVE_KERNEL):
        return signal.exit, signal, None
    bb.fail(f"{op.name} body ended with {signal.kind}")


@batched("for")
def _for(bb, op, impl, groups, flags):
    lower, upper, step, init_values = groups
    lower = _uniform(bb, lower, flags[0], "the lower bound")
    upper = _uniform(bb, upper, flags[1], "the upper bound")
    step = _uniform(bb, step, flags[2], "the step")
    dtype = np.asarray(lower).dtype
    width = dtype.itemsize * 8

    def as_int(value):
        number = int(np.asarray(value))
        return number % (1 << width) if op.attrs.get("unsignedCmp") else number
    index, end, stride = as_int(lower), as_int(upper), as_int(step)
    if stride <= 0 and index < end:
        bb.fail(f"for loop step must be positive, got {stride}")
    carried, carried_flags = list(init_values), list(flags[3])
    while index < end:
        bb.machine.count_iteration(bb)
        kind, carried, carried_flags = _loop_body(
            bb, op, op.regions[0], [np.asarray(index).astype(dtype)], [False], carried,
            carried_flags)
        if kind is Exit.LEAVE_LOOP:
            return list(carried.values), list(carried.flags)
        if kind is Exit.LEAVE_KERNEL:
            return carried
        index += stride
    return carried, carried_flags


@batched("loop")
def _loop(bb, op, impl, groups, flags):
    carried, carried_flags = list(groups[0]), list(flags[0])
    while True:
        bb.machine.count_iteration(bb)
        kind, carried, carried_flags = _loop_body(bb, op, op.regions[0], [], [], carried,
                                                  carried_flags)
        if kind is Exit.LEAVE_LOOP:
            return list(carried.values), list(carried.flags)
        if kind is Exit.LEAVE_KERNEL:
            return carried


@batched("get_tile_block_id")
def _tile_block_id(bb, op, impl, groups, flags):
    ids = [c.astype(result_dtype(op, i)) for i, c in enumerate(bb.flat_coords())]
    for axis, value in enumerate(ids):  # the coordinates themselves: affine by definition
        bb._affine[id(value)] = (value, (bb.origin[axis],) +
                                 tuple(int(a == axis) for a in range(3)))
    return ids, [True] * 3


@batched("reduce", "scan")
def _reduce_or_scan(bb, op, impl, groups, flags):
    if not any(flags[0]):
        values = impl(bb, op, groups[0])
        return values, [False] * len(values)
    operands = [bb.lift(x, f) for x, f in zip(groups[0], flags[0])]
    values = impl(bb, op, operands, lead=1)
    return values, [True] * len(values)


@batched("assume")
def _assume(bb, op, impl, groups, flags):
    if flags[0]:
        if bb.options.check_assumptions:
            for flat in range(bb.count):
                impl(bb.tile_block(flat), op, groups[0][flat])
        return [groups[0]], [True]
    return impl(bb, op, groups[0]), [False]


def _shape_op(form):
    """A shape-aware op: ordinary when its operands are uniform, `form` when one varies."""
    def special(bb, op, impl, groups, flags):
        if not any(f if isinstance(f, bool) else any(f) for f in flags):
            values = impl(bb, op, *groups)
            return values, [False] * len(values)
        return form(bb, op, impl, groups, flags)
    return special


@batched("broadcast")
@_shape_op
def _broadcast(bb, op, impl, groups, flags):
    source = groups[0]
    shape = tuple(result_shape(op))
    inner = source.shape[1:]
    source = source.reshape((bb.count,) + (1,) * (len(shape) - len(inner)) + inner)
    return [np.broadcast_to(source, (bb.count,) + shape)], [True]


@batched("reshape")
@_shape_op
def _reshape(bb, op, impl, groups, flags):
    return [np.reshape(groups[0], (bb.count,) + tuple(result_shape(op)))], [True]


@batched("permute")
@_shape_op
def _permute(bb, op, impl, groups, flags):
    axes = (0,) + tuple(int(p) + 1 for p in op.attrs["permutation"])
    return [np.transpose(groups[0], axes)], [True]


@batched("cat")
@_shape_op
def _cat(bb, op, impl, groups, flags):
    lhs, rhs = (bb.lift(g, f) for g, f in zip(groups, flags))
    return [np.concatenate([lhs, rhs], axis=int(op.attrs["dim"]) + 1)], [True]


@batched("extract")
@_shape_op
def _extract(bb, op, impl, groups, flags):
    if any(flags[-1]):  # the indices vary: each block picks its own window
        return bb.per_block(op, impl, groups, flags)
    source, indices = groups[0], groups[-1]
    window = _window(indices, result_shape(op))
    for part, size in zip(window, source.shape[1:]):
        if part.start < 0 or part.stop > size:
            bb.fail(f"{op.name} index out of range: window {part.start}:{part.stop} of {size}")
    return [source[(slice(None),) + window]], [True]


@batched("insert")
@_shape_op
def _insert(bb, op, impl, groups, flags):
    if any(flags[-1]):  # the indices vary: each block picks its own window
        return bb.per_block(op, impl, groups, flags)
    source, destination, indices = groups[0], groups[1], groups[-1]
    window = _window(indices, np.shape(source)[1 if flags[0] else 0:])
    result = np.array(bb.lift(destination, flags[1]), copy=True)
    for part, size in zip(window, result.shape[1:]):
        if part.start < 0 or part.stop > size:
            bb.fail(f"{op.name} index out of range: window {part.start}:{part.stop} of {size}")
    result[(slice(None),) + window] = source
    return [result], [True]


# -------------------------------------------------------------------------- memory accesses


def affine_region(bb: BatchBlock, view, indices, flags, writing: bool):
    """All blocks' tiles of a partition / strided view as one strided numpy view of the bound
    buffer, shaped (grid z, grid y, grid x) + tile shape, or None.

    Applies when every block's tile lies fully inside the tensor and the tile origins are an
    affine function of the block's grid coordinates (cuTile's `index=(bid(0), ...)` and
    arithmetic on it), so the grid axes get strides of their own. One bounds, alignment,
    initialisation and read-only check covers the whole span (`GlobalMemory.window`).
    Returns (buffer, strided view, element index of its first element, shape, element strides)."""
    tiled = as_tiled(view)
    tensor = tiled.tensor
    rank = len(tiled.tile_shape)
    if tiled.kind == "gather_scatter" or len(indices) != rank or rank != tensor.rank or \
            sorted(tiled.dim_map) != list(range(rank)):
        return None
    grid = bb.box  # the chunk's blocks; affine_index is relative to its origin
    first = 0
    axis_steps = [0, 0, 0]  # element offset per grid step along x, y, z
    for k in range(rank):
        coefficients = bb.affine_index(indices[k], bool(flags[k]) if flags else False)
        if coefficients is None:
            return None
        dim = tiled.dim_map[k]
        step, stride = int(tiled.steps[k]), int(tensor.strides[dim])
        constant, per_axis = coefficients[0] * step, [c * step for c in coefficients[1:]]
        # the tile origins are affine in the coordinates: their extremes lie at grid corners
        low = constant + sum(min(0, c * (n - 1)) for c, n in zip(per_axis, grid))
        high = constant + sum(max(0, c * (n - 1)) for c, n in zip(per_axis, grid))
        if low < 0 or high + tiled.tile_shape[k] > int(tensor.shape[dim]):
            return None  # a partial tile: the per-block path pads / drops its elements
        first += constant * stride
        for axis in range(3):
            axis_steps[axis] += per_axis[axis] * stride
    gx, gy, gz = grid
    steps = (axis_steps[2], axis_steps[1], axis_steps[0])
    shape = (gz, gy, gx) + tuple(tiled.tile_shape)
    strides = steps + tuple(int(tensor.strides[tiled.dim_map[k]]) for k in range(rank))
    if writing and overlaps(shape, strides):
        return None  # blocks' lanes share elements: the element path orders them
    low = high = first
    for n, stride in zip(shape, strides):
        reach = (n - 1) * stride
        if reach < 0:
            low += reach
        else:
            high += reach
    itemsize = tensor.dtype.itemsize
    buffer = bb.memory.window(tensor.base + low * itemsize, tensor.base + high * itemsize,
                              itemsize, writing, verb="plan" if writing else "tracked")
    if buffer is None:
        return None
    start = (tensor.base - buffer.base) // itemsize + first
    # a strided array over the buffer's memory (the constructor takes ml_dtypes element types
    # and checks the span against the buffer; ~10x cheaper than as_strided)
    strided = np.ndarray(shape, tensor.dtype, buffer.typed(np.dtype(f"u{itemsize}")),
                         start * itemsize, tuple(s * itemsize for s in strides))
    return buffer, strided, start, shape, strides


def _region_lanes(bb: BatchBlock, start: int, shape, strides):
    """(element indices, writing blocks) of a region store, in C order."""
    def lanes():
        index = np.full(shape, start, dtype=np.int64)
        for axis, (n, s) in enumerate(zip(shape, strides)):
            index = index + (np.arange(n, dtype=np.int64) * s).reshape(
                (1,) * axis + (n,) + (1,) * (len(shape) - axis - 1))
        blocks = np.broadcast_to(np.arange(bb.count, dtype=np.int64).reshape(shape[:3] +
                                 (1,) * (len(shape) - 3)), shape)
        return index.reshape(-1), blocks.reshape(-1)
    return lanes


def _log_writes(bb: BatchBlock, writes: List[Write], lanes_per_block: int) -> None:
    perform = bb.memory.perform
    for write in writes:
        blocks = write.lanes // max(1, lanes_per_block)
        bb.log.record(write.buffer, write.dtype.itemsize,
                      lambda w=write, b=blocks: (w.index, b), lambda w=write: perform(w))


@batched("load_view_tko")
def _load_view(bb, op, impl, groups, flags):
    view, indices, token = groups
    if not any(flags[1]):
        values = impl(bb, op, view, indices, token)
        return values, [False, False]
    found = affine_region(bb, view, indices, flags[1], writing=False)
    if found is None:
        return bb.per_block(op, impl, groups, flags)
    buffer, strided, start, shape, strides = found
    bb.log.read(buffer, strided.dtype.itemsize, _region_lanes(bb, start, shape, strides))
    tile = tuple(as_tiled(view).tile_shape)
    # a view, not a copy: no buffer a batched run reads is written before the run ends
    values = strided.reshape((bb.count,) + tile).astype(result_dtype(op), copy=False)
    return [values, TOKEN], [True, False]


@batched("store_view_tko")
def _store_view(bb, op, impl, groups, flags):
    tile_value, view, indices, token = groups
    tiled = as_tiled(view)
    dtype = tiled.tensor.dtype
    tile = tuple(tiled.tile_shape)
    if not indices and view is not tiled:
        indices = (0,) * len(tile)
    if type(tile_value) is Deferred:
        found = affine_region(bb, view, indices, flags[2], writing=True) if any(flags[2]) \
            else None
        if found is not None and tile_value.dtype == dtype and not any(
                np.may_share_memory(operand, buffer.data) for buffer in bb.log.first_write
                for operand in tile_value.operands):
            buffer, strided, start, shape, strides = found
            operands = tuple(np.reshape(x, shape) if f else x
                             for x, f in zip(tile_value.operands, tile_value.flags))
            ufunc = tile_value.ufunc
            bb.log.record(buffer, dtype.itemsize, _region_lanes(bb, start, shape, strides),
                          lambda: ufunc(*operands, out=strided))
            return [TOKEN], [False]
        tile_value = tile_value.compute(output(bb, tile_value.dtype, *tile_value.operands))
    values = np.broadcast_to(np.asarray(tile_value).astype(dtype, copy=False),
                             (bb.count,) + tile)  # uniform values: every block stores them
    found = affine_region(bb, view, indices, flags[2], writing=True) if any(flags[2]) else None
    if found is not None:
        buffer, strided, start, shape, strides = found
        source = values.reshape(shape)
        bb.log.record(buffer, dtype.itemsize, _region_lanes(bb, start, shape, strides),
                      lambda: strided.__setitem__(Ellipsis, source))
        return [TOKEN], [False]
    # the element path: every block's addresses and mask, one checked store plan
    addresses, masks = [], []
    for flat in range(bb.count):
        block_indices = tuple(np.asarray(i)[flat] if f else i for i, f in zip(indices, flags[2])) \
            if flags[2] else indices
        block = bb.tile_block(flat)
        block.current_op = op
        _, block_addresses, mask = view_access(block, op, view, block_indices)
        addresses.append(block_addresses)
        masks.append(mask)
    mask = np.stack(masks)
    writes = bb.memory.plan_store(np.stack(addresses), values, dtype,
                                  None if mask.all() else mask, bb.memory_fault)
    _log_writes(bb, writes, int(np.prod(tile)))
    return [TOKEN], [False]


@batched("store_ptr_tko")
def _store_ptr(bb, op, impl, groups, flags):
    destination, value, mask, token = groups
    dtype = pointee_dtype(bb, op.operands["destination"].type)
    addresses = bb.lift(destination, flags[0])
    writes = bb.memory.plan_store(addresses, np.broadcast_to(value, addresses.shape), dtype,
                                  None if mask is None else np.broadcast_to(mask, addresses.shape),
                                  bb.memory_fault)
    _log_writes(bb, writes, int(np.prod(addresses.shape[1:], dtype=np.int64)))
    return [TOKEN], [False]


# ----------------------------------------------------------------------------------- the run


DEFAULT_BATCH_MEMORY = 512 << 20
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """'512M', '2G', '1048576' -> bytes (K, M, G, T are powers of 1024; a trailing B is allowed).
    ValueError for anything else."""
    spelled = text.strip().lower().removesuffix("ib").removesuffix("b")
    unit = spelled[-1:] if spelled[-1:] in _SIZE_UNITS else ""
    number = float(spelled[:len(spelled) - len(unit)])
    if not number > 0 or number == float("inf"):
        raise ValueError(f"expected a positive size, got {text!r}")
    return int(number * _SIZE_UNITS[unit])


def default_batch_memory() -> int:
    """The batch memory budget: TILEBC_BATCH_MEMORY (e.g. 2G) when set, else 512 MiB."""
    import os
    text = os.environ.get("TILEBC_BATCH_MEMORY")
    if not text:
        return DEFAULT_BATCH_MEMORY
    try:
        return parse_size(text)
    except ValueError:
        raise ExecutionError(f"TILEBC_BATCH_MEMORY={text!r} is not a size (expected bytes, or "
                             "a number with K, M or G, e.g. 512M)") from None


# id(function) -> (weak reference, estimated bytes per tile block)
_BLOCK_BYTES: Dict[int, Tuple[weakref.ref, int]] = {}


def block_bytes(function: Function) -> int:
    """An estimate (an upper bound for the ops we know) of one tile block's working set in a
    batched run: the bytes of every tile result of `function`'s ops, nested regions included
    (registers live until the run ends), plus 24 bytes per element of the largest tile for one
    op's temporaries."""
    cached = _BLOCK_BYTES.get(id(function))
    if cached is not None and cached[0]() is function:
        return cached[1]
    from ..ir.types import PointerType, TileType
    total, largest = 0, 0
    stack: List[Block] = [function.body]
    while stack:
        for op in stack.pop().ops:
            for result in op.results:
                kind = result.type
                if isinstance(kind, TileType):
                    elements = kind.num_elements
                    width = 8 if isinstance(kind.element, PointerType) else \
                        max(1, (kind.element.bits + 7) // 8)
                    total += elements * width
                    largest = max(largest, elements)
            for region in op.regions:
                stack.extend(region.blocks)
    estimate = max(1, total + 24 * largest)
    _BLOCK_BYTES[id(function)] = (weakref.ref(function), estimate)
    return estimate


def chunk_boxes(grid: Tuple[int, int, int], per_chunk: int):
    """(origin, box) chunks of at most `per_chunk` tile blocks (at least one) covering `grid` in
    flattened-id order (x fastest): each chunk is whole z-planes, else whole rows of one plane,
    else a run of one row, so its blocks have consecutive flat ids."""
    gx, gy, gz = grid
    per_chunk = max(1, per_chunk)
    plane = gx * gy
    if per_chunk >= plane * gz:
        yield (0, 0, 0), (gx, gy, gz)
    elif per_chunk >= plane:
        step = per_chunk // plane
        for z in range(0, gz, step):
            yield (0, 0, z), (gx, gy, min(step, gz - z))
    elif per_chunk >= gx:
        step = per_chunk // gx
        for z in range(gz):
            for y in range(0, gy, step):
                yield (0, y, z), (gx, min(step, gy - y), 1)
    else:
        for z in range(gz):
            for y in range(gy):
                for x in range(0, gx, per_chunk):
                    yield (x, y, z), (min(per_chunk, gx - x), 1, 1)


def run_batched(machine, function: Function, grid: Tuple[int, int, int], arguments,
                origin: Tuple[int, int, int] = (0, 0, 0),
                box: Optional[Tuple[int, int, int]] = None) -> None:
    """Run `function` batched over `grid`, or over the chunk `box` of it at `origin`;
    BatchFallback (memory untouched) when it cannot give the sequential schedule's results, any
    other error likewise before memory is written."""
    reason = refusal(function)
    if reason is not None:
        raise BatchFallback(reason)
    log = MemoryLog()
    memory = machine.memory
    memory.observer = log.observe
    block = BatchBlock(machine, grid, log, origin, box)
    block.entry_body, block.fusible = function.body, fusible_ops(function)
    try:
        try:
            signal = block.run_block(function.body, arguments)
            if signal is not None and signal.exit is not Exit.LEAVE_KERNEL:
                block.fail(f"entry body ended with {signal.kind}, expected return")
        finally:
            memory.observer = None
        log.apply()
    finally:
        # nothing of the run outlives it: drop every reference before the buffers are reused.
        # The log's lane closures refer to the block, which refers to the log: without breaking
        # that cycle each chunk's arrays would wait for the garbage collector.
        block.registers.clear()
        block._affine.clear()
        block._blocks = None
        block.log = None
        log.clear()
        block.scratch.release()
