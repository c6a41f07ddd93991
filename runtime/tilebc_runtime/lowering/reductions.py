"""reduce and scan with a combiner region.

First version (correct, not fast): operands go to shared memory; each thread then walks the reduced
dimension for each of its result slots in a uniform PTX loop, running the lowered combiner region on
scalars. Scan uses the same loop and keeps the combined value only up to its own position (a select,
so control stays uniform). Warp-shuffle trees are the planned faster path.
"""
from __future__ import annotations

from tilebc.ir.types import TileType

from . import dtypes
from .lowerer import Frame, Tile
from .registry import lowers
from .shapes import immediate


def _identity_register(lw, attr, element):
    """A fresh register initialised to an identity attribute (IntegerAttr / FloatAttr)."""
    size = 1 if dtypes.name_of(element) == "i1" else dtypes.byte_size(element)
    if hasattr(attr, "bits"):
        raw = attr.bits.to_bytes(size, "little")
    else:
        raw = (attr.value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
    return immediate(lw, element, raw)


def _combine(lw, op, accumulators, loaded):
    """Lower the combiner region once with (acc..., x...) and return the yielded tiles."""
    block = op.regions[0].blocks[0]
    n = len(accumulators)
    scalar_types = [arg.type for arg in block.args]
    # combiner arguments: (lhs_0, rhs_0, lhs_1, rhs_1, ...)
    for i in range(n):
        lw.set(block.args[2 * i], Tile(scalar_types[2 * i], [accumulators[i]]))
        lw.set(block.args[2 * i + 1], Tile(scalar_types[2 * i + 1], [loaded[i]]))
    yielded = []
    lw.frames.append(Frame("region", on_yield=yielded.extend))
    try:
        lw.lower_block(block)
    finally:
        lw.frames.pop()
    return [t.scalar for t in yielded]


def _walk(lw, op, *, scan: bool):
    w = lw.w
    sources = [lw.get(v) for v in op.operand_values]
    dim = op.attrs["dim"]
    shape = sources[0].type.shape
    length = shape[dim]
    inner = 1
    for d in shape[dim + 1:]:
        inner *= d
    offsets = lw.reserve_smem([lw.smem_size_of(s.type) for s in sources])
    for source, offset in zip(sources, offsets):
        lw.smem_write(source, offset)
    lw.barrier()
    result_types = [r.type for r in op.results]
    out_shape = result_types[0].shape
    identities = list(op.attrs["identities"])
    outputs = [[] for _ in sources]
    reverse = bool(op.attrs.get("reverse"))
    for k in range(lw.slots(result_types[0].num_elements)):
        mi = lw.multi_index(out_shape, k)
        if scan:
            position = mi[dim]
            base_mi = list(mi)
            base_mi[dim] = lw.const_u32(0)
        else:
            position = None
            base_mi = list(mi[:dim]) + [lw.const_u32(0)] + list(mi[dim:])
        base = lw.linear_index(base_mi, shape)
        accs = [_identity_register(lw, ident, s.element) for ident, s in zip(identities, sources)]
        j = w.reg("b32")
        w(f"mov.u32 {j}, 0")
        top = w.label("walk")
        w.place(top)
        step_index = j
        if reverse:
            step_index = w.reg("b32")
            w(f"sub.u32 {step_index}, {length - 1}, {j}")
        index = w.reg("b32")
        w(f"mad.lo.u32 {index}, {step_index}, {inner}, {base}")
        loaded = [lw.smem_read(off, index, s.element) for off, s in zip(offsets, sources)]
        combined = _combine(lw, op, accs, loaded)
        keep = None
        if scan:  # forward: include j <= position; reverse: include (length-1-j) >= position
            keep = w.reg("pred")
            w(f"setp.{'ge' if reverse else 'le'}.u32 {keep}, {step_index}, {position}")
        for acc, new, source in zip(accs, combined, sources):
            cls = dtypes.reg_class(source.element)
            if keep is None:
                w(f"mov.{dtypes.mov_type(cls)} {acc}, {new}")
            else:
                chosen = lw.select(keep, new, acc, source.element)
                w(f"mov.{dtypes.mov_type(cls)} {acc}, {chosen}")
        w(f"add.u32 {j}, {j}, 1")
        again = w.reg("pred")
        w(f"setp.lt.u32 {again}, {j}, {length}")
        w(f"@{again} bra.uni {top}")
        for i, acc in enumerate(accs):
            outputs[i].append(acc)
    lw.barrier()
    for result, regs in zip(op.results, outputs):
        lw.set(result, Tile(result.type, regs))


@lowers("reduce")
def lower_reduce(lw, op):
    _walk(lw, op, scan=False)


@lowers("scan")
def lower_scan(lw, op):
    _walk(lw, op, scan=True)
