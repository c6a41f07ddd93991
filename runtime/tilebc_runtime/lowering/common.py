"""Helpers the op-family modules share (they import from here and the leaf modules dtypes,
intdiv, layout, ptx, softfloat, never from each other): the lowered forms of values (Tile,
Token, views, frames), immediates, predicates, memory-op ordering, and the element-wise map over
slots. Nothing here imports a family module or the lowerer, so the lowering package's import
graph has no cycle (runtime/tests/test_rt_lowering_imports.py)."""
from __future__ import annotations

from collections.abc import Callable

from ..lazy_numpy import np

from tilebc.ir.types import TileType, TokenType
from tilebc.ops.enums import MemoryScope, RoundingMode
from tilebc.ops.table import by_mnemonic
from tilebc.record import Struct  # not dataclasses: start-up time

from . import dtypes
from .layout import UNIFORM

_BROADCAST = by_mnemonic({"broadcast": True}, "broadcasts rebuilt in a consumer's layout")


class Tile:
    """A tile value: one register per slot (a scalar has one register shared by all slots).
    `layout` None is the Cyclic distribution (lowerer.py); others are layout.py's (the same register
    may then appear in several slots)."""

    __slots__ = ("type", "regs", "layout")

    def __init__(self, type: TileType, regs: list[str], layout=None):
        self.type = type
        self.regs = regs
        self.layout = layout

    @property
    def element(self):
        return self.type.element

    @property
    def count(self) -> int:
        return self.type.num_elements

    def slot(self, k: int) -> str:
        return self.regs[0] if len(self.regs) == 1 else self.regs[k]

    @property
    def scalar(self) -> str:
        return self.regs[0]


class Token:
    """A token's only run-time meaning for the JIT: whether it follows an earlier memory op, and
    `barriers`: the writer's bar.sync count when that op's code was written (None: unknown, so a
    barrier is always due), which lets a later bar.sync settle it (see needs_barrier)."""

    __slots__ = ("after_memory", "barriers")

    def __init__(self, after_memory: bool, barriers: int | None = None):
        self.after_memory = after_memory
        self.barriers = barriers


FRESH = Token(False)
AFTER_MEMORY = Token(True)


class TensorView(Struct):
    _fields = ("type", "base", "shape", "strides", "narrow_strides", "base_align", "shape_div",
               "stride_div", "narrow_shape")

    def __init__(self, type: object, base: str, shape: list[str], strides: list[str],
                 narrow_strides: list[str | None] | None = None, base_align: int = 1,
                 shape_div: list[int] | None = None, stride_div: list[int] | None = None,
                 narrow_shape: list[str | None] | None = None):
        self.type = type  # TensorViewType
        self.base = base  # .b64 register
        self.shape = shape  # .b64 registers (static dims are materialised once)
        self.strides = strides  # .b64 registers, in elements
        # per stride: a .b32 register (or immediate) holding it when it fits in s32, else None;
        # lets index * stride be one mul.wide.s32 instead of a 64-bit multiply
        self.narrow_strides = narrow_strides
        # what is known at compile time, for vector accesses: the base address's alignment in
        # bytes, and per dim the power of two the extent and the stride (elements) are
        # multiples of
        self.base_align = base_align
        self.shape_div = shape_div
        self.stride_div = stride_div
        # per extent: a .b32 register (or immediate) holding it when it fits in s32, else None;
        # lets bounds checks run in 32 bits
        self.narrow_shape = narrow_shape


class SubView(Struct):
    _fields = ("type", "tensor")

    def __init__(self, type: object, tensor: TensorView):
        self.type = type  # PartitionViewType / StridedViewType / GatherScatterViewType
        self.tensor = tensor


class Frame(Struct):
    """An enclosing construct terminators refer to."""

    _fields = ("kind", "results", "end", "carried", "latch", "on_yield", "on_continue",
               "on_latch")

    def __init__(self, kind: str, results: list[list[str]] | None = None,
                 end: str | None = None, carried: list[list[str]] | None = None,
                 latch: str | None = None, on_yield: Callable | None = None,
                 on_continue: Callable | None = None, on_latch: Callable | None = None):
        self.kind = kind  # "branch" | "loop body" | "region"
        self.results = [] if results is None else results  # result registers per value
        self.end = end  # label after the construct
        self.carried = [] if carried is None else carried  # loop: carried registers per value
        self.latch = latch  # loop: where `continue` goes
        self.on_yield = on_yield  # region: receives the yielded tiles
        self.on_continue = on_continue  # unrolled loop: receives the continued values
        self.on_latch = on_latch  # rolled loop: emits what `continue` moves besides the values


def element_bytes(attr) -> bytes:
    """Dense constant payload as one little-endian storage unit per element (i1: one byte each)."""
    tile_type = attr.type
    count = tile_type.num_elements
    name = dtypes.name_of(tile_type.element)
    if name == "i1":
        if attr.is_splat:
            return bytes([1 if attr.data[0] else 0]) * count
        bits = np.unpackbits(np.frombuffer(attr.data, np.uint8), bitorder="little")[:count]
        return bits.astype(np.uint8).tobytes()
    size = dtypes.byte_size(tile_type.element)
    if attr.is_splat:
        return bytes(attr.data[:size]) * count
    return bytes(attr.data)


def immediate(lw, element, raw: bytes) -> str:
    """A fresh register holding one element given by its little-endian storage bytes."""
    w = lw.w
    name = dtypes.name_of(element)
    cls = dtypes.reg_class(element)
    value = int.from_bytes(raw, "little")
    reg = w.reg(cls)
    if cls == "pred":
        w(f"setp.ne.u32 {reg}, {lw.const_u32(value & 1)}, 0")
    elif cls == "b16":
        w(f"mov.b16 {reg}, {value & 0xFFFF}")
    elif cls == "b32" and name != "ptr":
        w(f"mov.b32 {reg}, {int.from_bytes(raw, 'little', signed=True)}")
    elif cls == "b64":
        w(f"mov.b64 {reg}, {int.from_bytes(raw, 'little', signed=True)}")
    elif cls == "f32":
        w(f"mov.f32 {reg}, 0f{value & 0xFFFFFFFF:08X}")
    elif cls == "f64":
        w(f"mov.f64 {reg}, 0d{value:016X}")
    return reg


def and_predicates(lw, a, b):
    """a and b (either may be None: always true)."""
    if a is None:
        return b
    if b is None:
        return a
    out = lw.w.reg("pred")
    lw.w(f"and.pred {out}, {a}, {b}")
    return out


SCOPE = {MemoryScope.TL_BLK: "cta", MemoryScope.DEVICE: "gpu", MemoryScope.SYS: "sys"}


def needs_barrier(lw, token) -> bool:
    """Whether a memory op ordered after `token` (a Value) needs a bar.sync first: the token
    follows a memory op and no barrier on every path since then has ordered it already."""
    lowered = lw.get(token)
    if not getattr(lowered, "after_memory", False):
        return False
    return lowered.barriers is None or not lw.w.barrier_since(lowered.barriers)


def order_after_token(lw, op) -> None:
    if lw.chunk is not None:
        return  # in a chunked region's loop: the barrier stands before the loop (chunks.emit)
    token = op.operands.get("token")
    if token is not None and needs_barrier(lw, token):
        lw.barrier()


def set_result_token(lw, op, barriers: int | None = None) -> None:
    """Mark the op's token results as following its memory access, written when the writer's
    barrier count was `barriers` (default: now; pass the count from before any barrier the
    lowering wrote after the access itself)."""
    token = Token(True, lw.w.barriers if barriers is None else barriers)
    for result in op.results:
        if isinstance(result.type, TokenType):
            lw.set(result, token)


ROUND = {RoundingMode.NEAREST_EVEN: "rn", RoundingMode.ZERO: "rz", RoundingMode.NEGATIVE_INF: "rm",
         RoundingMode.POSITIVE_INF: "rp", RoundingMode.NEAREST_INT_TO_ZERO: "rn",
         RoundingMode.NEAREST_AWAY: "rn", RoundingMode.FULL: "rn", RoundingMode.APPROX: "rn"}


def broadcast_into(lw, value, layout) -> Tile | None:
    """`value`, when a broadcast computed it, rebuilt in `layout` from the broadcast's (smaller)
    source: register moves when every thread holds what it needs, else a gather of the source.
    None for any other value."""
    from .layout import register_map
    value = lw.forward.get(value, value)
    op = value.owner
    if getattr(op, "name", None) not in _BROADCAST:
        return None

    def make():
        source = lw.get(op.operand_values[0], any_layout=True)
        result_type = op.results[0].type
        if source.count == 1 or source.layout is UNIFORM:
            return Tile(result_type, [source.scalar], UNIFORM)
        src_shape, shape = tuple(source.type.shape), tuple(result_type.shape)

        def to_source(linear):
            index = np.unravel_index(linear, shape)
            picked = [np.zeros_like(i) if s == 1 else i for s, i in zip(src_shape, index)]
            return np.ravel_multi_index(picked, src_shape)
        mapping = register_map(lw.layout_of(source), layout, lw.T, to_source)
        if mapping is not None:
            return Tile(result_type, [source.regs[k] for k in mapping], layout)
        source = lw.get(op.operand_values[0])

        def index(k, mi):
            picked = [lw.const_u32(0) if s == 1 else m for s, m in zip(src_shape, mi)]
            return 0, lw.linear_index(picked, src_shape)
        return lw.gather([source], result_type, index, lambda linear: (0, to_source(linear)),
                         layout=layout)
    return lw.scoped(("broadcast into", value, layout.key()), make)


def _into_anchor(lw, op, operands, layouts):
    """Operands all in the one mma accumulator layout among `layouts` (the others rebuilt from
    their broadcasts, e.g. a bias row), or None when some operand is no broadcast."""
    from .layout import MmaAcc
    anchors = [layout for layout in layouts if isinstance(layout, MmaAcc)]
    if len(anchors) != 1:
        return None
    target = anchors[0]
    out = []
    for value, tile in zip(op.operand_values, operands):
        if tile.count == 1 or tile.layout is UNIFORM or tile.layout == target:
            out.append(tile)
            continue
        rebuilt = broadcast_into(lw, value, target)
        if rebuilt is None:
            return None
        out.append(rebuilt)
    return target, out


def map_slots(lw, op, compute) -> None:
    """Result slot k = compute([operand slot k ...]) for an op with one tile result. The result
    keeps the operands' layout when they agree (else all go to Cyclic, except that broadcasts
    meeting an mma accumulator are rebuilt in its layout); a slot whose operand registers equal
    an earlier slot's (copies in a sliced layout) reuses its result."""
    operands = [lw.get(v, any_layout=True) for v in op.operand_values]
    result_type = op.results[0].type
    layouts = {t.layout for t in operands if t.count > 1 and t.layout is not UNIFORM}
    if not layouts and result_type.num_elements > 1 and any(t.layout is UNIFORM for t in operands):
        layouts = {UNIFORM}  # splats in, a splat out
    if len(layouts) > 1:
        anchored = _into_anchor(lw, op, operands, layouts)
        if anchored is not None:
            layouts, operands = {anchored[0]}, anchored[1]
    layout = layouts.pop() if len(layouts) == 1 else None
    if layout is None:
        operands = [lw.get(v) for v in op.operand_values]
    slots = layout.slots if layout is not None else lw.slots(result_type.num_elements)
    done = {}
    regs = []
    for k in range(slots):
        inputs = tuple(t.slot(k) for t in operands)
        if inputs not in done:
            done[inputs] = compute(list(inputs))
        regs.append(done[inputs])
    lw.set(op.results[0], Tile(result_type, regs, layout))


# PTX vectors have at most 4 elements; 16 bytes of 2-byte elements move as .v4.b32 of pairs
MAX_VECTOR_BYTES = 16


def most_elements(element) -> int:
    """The most elements of type `element` one vector access moves: 16 bytes, eight 2-byte
    elements held in .b16 registers going as pairs (vector_access)."""
    size = dtypes.byte_size(element)
    if size == 2 and dtypes.reg_class(element) == "b16":
        return 8
    return min(4, MAX_VECTOR_BYTES // size)


def vector_access(w, kind: str, space: str, memtype: str, regs, address: str,
                  guard: str = "") -> None:
    """One ld/st{space}.v of `regs` at `address` (`kind` "ld" or "st"). Eight 2-byte elements
    go as .v4.b32, each b32 a pair (the lower address in the low half, as little-endian memory
    has it). A guarded load leaves `regs` as the caller set them where the guard is off."""
    if len(regs) == 1:
        operands = f"{regs[0]}, [{address}]" if kind == "ld" else f"[{address}], {regs[0]}"
        w(f"{guard}{kind}{space}.{memtype} {operands}")
        return
    if len(regs) <= 4:
        vector = f"{{{', '.join(regs)}}}"
        operands = f"{vector}, [{address}]" if kind == "ld" else f"[{address}], {vector}"
        w(f"{guard}{kind}{space}.v{len(regs)}.{memtype} {operands}")
        return
    pairs = [w.reg("b32") for _ in range(len(regs) // 2)]
    if kind == "st" and not all(reg.startswith("%") for reg in regs):
        regs = list(regs)  # an immediate element: through a register, as a pair takes those
        for i, reg in enumerate(regs):
            if not reg.startswith("%"):
                regs[i] = w.reg("b16")
                w(f"mov.b16 {regs[i]}, {reg}")
    halves = [f"{{{regs[2 * i]}, {regs[2 * i + 1]}}}" for i in range(len(pairs))]
    if kind == "st" or guard:
        for pair, half in zip(pairs, halves):
            w(f"mov.b32 {pair}, {half}")
    if kind == "st":
        w(f"{guard}st{space}.v{len(pairs)}.b32 [{address}], {{{', '.join(pairs)}}}")
        return
    w(f"{guard}ld{space}.v{len(pairs)}.b32 {{{', '.join(pairs)}}}, [{address}]")
    for pair, half in zip(pairs, halves):
        w(f"mov.b32 {half}, {pair}")


_LOOP_KINDS: dict[str, bool] = {}


def is_loop(op) -> bool:
    """Whether `op` is a loop (the op table: its region ends in a terminator that goes on to the
    next iteration)."""
    if not op.regions:
        return False
    found = _LOOP_KINDS.get(op.name)
    if found is None:
        from tilebc.ops.spec import Exit
        from tilebc.ops.table import closing_terminator
        found = _LOOP_KINDS[op.name] = closing_terminator(op.name).exit is Exit.NEXT
    return found


class LaterIteration:
    """Stands in a view load's indices for a loop's induction variable (or an inner loop's) at
    another iteration (its own key, so nothing computed from it is reused for the current
    iteration)."""
    __slots__ = ()


_GRID_SIZE = by_mnemonic({"get_num_tile_blocks": True}, "persistent loops")


def traced_to(lw, value, wanted, through=None, steps: int = 8):
    """The op in `wanted` (mnemonics) that makes `value`, following first operands back through
    ops in `through` (mnemonics), or with `through` None through the ops that pass an operand on
    unchanged (the op table's `forwards`: assume); at most `steps` of them. None if none."""
    value = lw.forward.get(value, value)
    for _ in range(steps + 1):
        owner = value.owner
        if owner is None or not hasattr(owner, "spec"):
            return None
        if owner.name in wanted:
            return owner
        if through is None:
            if not owner.spec.forwards:
                return None
            value = owner.operands[owner.spec.forwards]
        elif owner.name in through:
            value = owner.operand_values[0]
        else:
            return None
        value = lw.forward.get(value, value)
    return None


def steps_by_the_grid(lw, for_op) -> bool:
    """Whether `for_op` steps by the grid's size (get_num_tile_blocks): the persistent form,
    where each CTA works through several tiles (such grids are sized to the SMs)."""
    return is_loop(for_op) and "step" in for_op.operands and \
        traced_to(lw, for_op.operands["step"], _GRID_SIZE) is not None


def strides_by_the_grid(lw, loop_op) -> bool:
    """Whether a `for` around `loop_op` steps by the grid's size (steps_by_the_grid)."""
    trail, stack = {}, [(op, None) for op in lw.function.body.ops]
    while stack:  # (an op, the op around it): a walk without a recursive closure
        op, around = stack.pop()
        trail[op] = around
        if op is loop_op:
            break
        for region in op.regions:
            for block in region.blocks:
                stack.extend((inner, op) for inner in block.ops)
    around = trail.get(loop_op)
    while around is not None:
        if steps_by_the_grid(lw, around):
            return True
        around = trail.get(around)
    return False
