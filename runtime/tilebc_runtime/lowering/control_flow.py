"""Structured control flow: if / for / loop with carried values in registers, and the terminators
yield / continue / break / return. Conditions and bounds are scalars every thread holds, so every
branch here is uniform across the CTA (barriers inside the bodies are safe)."""
from __future__ import annotations

from tilebc.ir.types import TileType

from . import dtypes
from .anchors import carried_mma_layout
from .common import AFTER_MEMORY, Frame, Tile
from .registry import lowers


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
    frame = Frame("if", results=results, end=end)
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


@lowers("for")
def lower_for(lw, op):
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
        if layout is not None:
            cls = dtypes.reg_class(value.type.element)
            carried[index] = Tile(value.type, [w.reg(cls) for _ in range(layout.slots)], layout)
    _carried(lw, carried, op.operands["initValues"])
    head, latch, exit_ = w.label("for"), w.label("latch"), w.label("endfor")
    w.place(head)
    done = w.reg("pred")
    w(f"setp.ge.{kind} {done}, {iv}, {upper.scalar}")
    w(f"@{done} bra.uni {exit_}")
    lw.set(body.args[0], Tile(body.args[0].type, [iv]))
    for arg, tile in zip(body.args[1:], carried):
        lw.set(arg, tile)
    lw.frames.append(Frame("loop", carried=carried, latch=latch, end=exit_))
    try:
        lw.lower_block(body)
    finally:
        lw.frames.pop()
    w.place(latch)
    w(f"add.{kind} {iv}, {iv}, {step.scalar}")
    w(f"bra.uni {head}")
    w.place(exit_)
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
    lw.frames.append(Frame("loop", carried=carried, latch=head, end=exit_, results=results))
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
    frame = _innermost(lw, op, ("loop",))
    _carried(lw, frame.carried, op.operand_values)
    lw.w(f"bra.uni {frame.latch}")


@lowers("break")
def lower_break(lw, op):
    frame = _innermost(lw, op, ("loop",))
    _assign(lw, frame.results, [lw.get(v) for v in op.operand_values])
    lw.w(f"bra.uni {frame.end}")


@lowers("yield")
def lower_yield(lw, op):
    frame = _innermost(lw, op, ("if", "region"))
    values = [lw.get(v) for v in op.operand_values]
    if frame.kind == "region":
        frame.on_yield(values)
        return
    _assign(lw, frame.results, values)
    lw.w(f"bra.uni {frame.end}")


@lowers("return")
def lower_return(lw, op):
    lw.w(f"bra.uni {lw.exit_label}")
