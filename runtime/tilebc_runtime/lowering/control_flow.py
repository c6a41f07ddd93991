"""Structured control flow: if / for / loop with carried values in registers, and the terminators
yield / continue / break / return. Conditions and bounds are scalars every thread holds, so every
branch here is uniform across the CTA (barriers inside the bodies are safe)."""
from __future__ import annotations

from tilebc.ir.types import TileType
from tilebc.ops.table import by_mnemonic

from . import dtypes
from .anchors import carried_mma_layout, carried_row_layout
from .vectors import pointer_layout
from .common import AFTER_MEMORY, Frame, Tile
from .folding import trip_count
from .registry import BEFORE_LOOP, loop_pipeline, lowers


# Frame kinds: for / loop, which continue / break refer to; if, whose yield ends a branch.
LOOP_FRAME, BRANCH_FRAME = "loop body", "branch"


def _fresh(lw, type):
    """Registers for a value that several places assign (loop-carried, branch results)."""
    return lw.new_tile(type) if isinstance(type, TileType) else AFTER_MEMORY


def _assign(lw, targets, values):
    tiles = [(t, v) for t, v in zip(targets, values) if isinstance(t, Tile)]
    lw.parallel_copy([t.regs for t, _ in tiles], [v for _, v in tiles])


def _carried(lw, targets, values):
    """Assign loop-carried `values` (Values) to `targets`, each converted to its target's layout
    (Cyclic unless the loop keeps an mma accumulator, see lower_for)."""
    tiles = []
    for target, value in zip(targets, values):
        if isinstance(target, Tile) and target.layout is not None:
            tiles.append(lw.convert(lw.get(value, any_layout=True), target.layout))
        else:
            tiles.append(lw.get(value))
    _assign(lw, targets, tiles)


def _ends_with_terminator(block) -> bool:
    return bool(block.ops) and block.ops[-1].spec.terminator


@lowers("if")
def lower_if(lw, op):
    w = lw.w
    condition = lw.get(op.operands["condition"]).scalar
    results = [_fresh(lw, r.type) for r in op.results]
    end, other = w.label("endif"), w.label("else")
    frame = Frame(BRANCH_FRAME, results=results, end=end)
    w(f"@!{condition} bra.uni {other}")
    lw.frames.append(frame)
    try:
        for index, region in enumerate(op.regions):
            if index == 1:
                w.place(other)
            for block in region.blocks:
                lw.lower_block(block)
                if not _ends_with_terminator(block):
                    w(f"bra.uni {end}")
        if len(op.regions) < 2:
            w.place(other)
    finally:
        lw.frames.pop()
    w.place(end)
    for result, tile in zip(op.results, results):
        lw.set(result, tile)


# A `for` with compile-time bounds of at most UNROLL_TRIPS iterations and at most UNROLL_OPS
# ops in all copies of its body is lowered unrolled: no loop control, the induction variable a
# constant in each copy, and a copy's loads in one straight-line block with the next copy's.
UNROLL_TRIPS = 8
UNROLL_OPS = 320
# What an op in a loop body means for unrolling: tensor-core loops keep their register budget;
# loop exits must be the body's last op (exits of nested loops are theirs).
_KEEP, _NEXT, _BREAK, _LOOP = "keeps it rolled", "next iteration", "leaves", "nested"
_UNROLL_ROLES = by_mnemonic({"mmaf": _KEEP, "mmai": _KEEP, "mmaf_scaled": _KEEP,
                             "continue": _NEXT, "break": _BREAK, "for": _LOOP, "loop": _LOOP},
                            "loop unrolling")


def _unrollable(lw, op):
    """(first, step, trips) when `op` is unrolled (see UNROLL_TRIPS), else None: the body ends
    with its only `continue` and holds no break."""
    trip = trip_count(lw, op)
    if trip is None or trip[2] > UNROLL_TRIPS:
        return None
    body = op.regions[0].blocks[0]
    if not body.ops or _UNROLL_ROLES.get(body.ops[-1].name) != _NEXT:
        return None
    count = 0
    stack = [(o, 0) for o in body.ops]
    while stack:
        inner, depth = stack.pop()
        count += 1
        role = _UNROLL_ROLES.get(inner.name)
        if role == _KEEP:
            return None
        if role in (_NEXT, _BREAK) and depth == 0 and inner is not body.ops[-1]:
            return None
        nested = depth + (1 if role == _LOOP else 0)
        for region in inner.regions:
            for block in region.blocks:
                stack.extend((o, nested) for o in block.ops)
    if count * trip[2] > UNROLL_OPS:
        return None
    return trip


def _lower_for_unrolled(lw, op, first, step, trips):
    w = lw.w
    body = op.regions[0].blocks[0]
    element = op.operands["lowerBound"].type.element
    cls = dtypes.reg_class(element)
    values = [lw.get(v) for v in op.operands["initValues"]]
    for i in range(trips):
        iv = w.reg(cls)
        value = (first + i * step) % (2**64 if cls == "b64" else 2**32)
        w(f"mov.{dtypes.mov_type(cls)} {iv}, {value}")
        lw.set(body.args[0], Tile(body.args[0].type, [iv]))
        for arg, tile in zip(body.args[1:], values):
            lw.set(arg, tile)
        out = []
        lw.frames.append(Frame(LOOP_FRAME, on_continue=out.extend))
        try:
            lw.lower_block(body)
        finally:
            lw.frames.pop()
        values = out
    for result, tile in zip(op.results, values):
        lw.set(result, tile)


class PipelinedLoop:
    """What a loop pipeline (registry.LOOP_PIPELINES) sees of a rolled `for`: the induction
    variable, bound and step registers, the compare type (s32, u64, ...) and the constant trip
    count or None."""

    def __init__(self, iv, upper, step, kind, trips):
        self.iv, self.upper, self.step, self.kind, self.trips = iv, upper, step, kind, trips


@lowers("for")
def lower_for(lw, op):
    unrolled = _unrollable(lw, op)
    if unrolled is not None:
        _lower_for_unrolled(lw, op, *unrolled)
        return
    w = lw.w
    lower = lw.get(op.operands["lowerBound"])
    upper = lw.get(op.operands["upperBound"])
    step = lw.get(op.operands["step"])
    kind = ("u" if op.attrs.get("unsignedCmp") else "s") + (
        "64" if lower.element.name == "i64" else "32")
    cls = dtypes.reg_class(lower.element)
    iv = w.reg(cls)
    w(f"mov.{dtypes.mov_type(cls)} {iv}, {lower.scalar}")
    body = op.regions[0].blocks[0]
    carried = [_fresh(lw, v.type) for v in op.operands["initValues"]]
    for index, value in enumerate(op.operands["initValues"]):
        # an mmaf accumulator carried from iteration to iteration stays in its fragments
        layout = carried_mma_layout(lw, body, index)
        if layout is None:  # a row statistic of such a product stays in its reductions' layout
            layout = carried_row_layout(lw, body, index)
        if layout is None and getattr(value.type, "shape", None):  # around vector pointer accesses
            layout = pointer_layout(lw, value.type.shape)
        if layout is not None:
            cls = dtypes.reg_class(value.type.element)
            carried[index] = Tile(value.type, [w.reg(cls) for _ in range(layout.slots)], layout)
    _carried(lw, carried, op.operands["initValues"])
    for hook in BEFORE_LOOP:  # loop-invariant operands, loaded once before the loop
        hook(lw, op)
    lw.set(body.args[0], Tile(body.args[0].type, [iv]))
    for arg, tile in zip(body.args[1:], carried):
        lw.set(arg, tile)
    trip = trip_count(lw, op)
    pipeline = loop_pipeline(lw, op, PipelinedLoop(iv, upper.scalar, step.scalar, kind,
                                                   None if trip is None else trip[2]))
    if pipeline is not None:  # its first stages are in flight before the first iteration
        pipeline.prologue()
    head, latch, exit_ = w.label("for"), w.label("latch"), w.label("endfor")
    w.place(head)
    done = w.reg("pred")
    w(f"setp.ge.{kind} {done}, {iv}, {upper.scalar}")
    w(f"@{done} bra.uni {exit_}")
    lw.frames.append(Frame(LOOP_FRAME, carried=carried, latch=latch, end=exit_,
                           on_latch=getattr(pipeline, "latch", None)))
    try:
        lw.lower_block(body)
    finally:
        lw.frames.pop()
    w.place(latch)
    w(f"add.{kind} {iv}, {iv}, {step.scalar}")
    w(f"bra.uni {head}")
    w.place(exit_)
    if pipeline is not None:
        pipeline.finish()
    for result, tile in zip(op.results, carried):
        lw.set(result, tile)


@lowers("loop")
def lower_loop(lw, op):
    w = lw.w
    carried = [_fresh(lw, v.type) for v in op.operands["initValues"]]
    _assign(lw, carried, [lw.get(v) for v in op.operands["initValues"]])
    results = [_fresh(lw, r.type) for r in op.results]
    head, exit_ = w.label("loop"), w.label("endloop")
    w.place(head)
    body = op.regions[0].blocks[0]
    for arg, tile in zip(body.args, carried):
        lw.set(arg, tile)
    lw.frames.append(Frame(LOOP_FRAME, carried=carried, latch=head, end=exit_, results=results))
    try:
        lw.lower_block(body)
        if not _ends_with_terminator(body):
            w(f"bra.uni {head}")
    finally:
        lw.frames.pop()
    w.place(exit_)
    for result, tile in zip(op.results, results):
        lw.set(result, tile)


def _innermost(lw, op, kinds):
    for frame in reversed(lw.frames):
        if frame.kind in kinds:
            return frame
    raise lw.error(op, f"{op.name} outside of any {'/'.join(kinds)}")


@lowers("continue")
def lower_continue(lw, op):
    frame = _innermost(lw, op, (LOOP_FRAME,))
    if frame.on_continue is not None:  # the last op of an unrolled copy: values flow on
        frame.on_continue([lw.get(v, any_layout=True) for v in op.operand_values])
        return
    _carried(lw, frame.carried, op.operand_values)
    if frame.on_latch is not None:
        frame.on_latch()
    lw.w(f"bra.uni {frame.latch}")


@lowers("break")
def lower_break(lw, op):
    frame = _innermost(lw, op, (LOOP_FRAME,))
    _assign(lw, frame.results, [lw.get(v) for v in op.operand_values])
    lw.w(f"bra.uni {frame.end}")


@lowers("yield")
def lower_yield(lw, op):
    frame = _innermost(lw, op, (BRANCH_FRAME, "region"))
    values = [lw.get(v) for v in op.operand_values]
    if frame.kind == "region":
        frame.on_yield(values)
        return
    _assign(lw, frame.results, values)
    lw.w(f"bra.uni {frame.end}")


@lowers("return")
def lower_return(lw, op):
    lw.w(f"bra.uni {lw.exit_label}")
