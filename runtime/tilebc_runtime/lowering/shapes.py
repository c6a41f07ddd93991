"""Constants, iota and shape ops. Reshape is free (the distribution depends only on the element
count); broadcast of a scalar is free; shape ops whose integer result is known at compile time
(iota-based indices) are computed per thread (folding.py); everything else moves elements between
threads (shuffles or shared memory, Lowerer.gather)."""
from __future__ import annotations

from ..lazy_numpy import np

from tilebc.ir.module import Op
from tilebc.ir.types import TileType
from tilebc.ops.enums import Signedness
from tilebc.ops.table import by_mnemonic

from . import dtypes
from .common import AFTER_MEMORY, FRESH, Tile, Token, element_bytes, immediate
from .anchors import pointer_anchors, scan_anchors
from .folding import fold_shape_op
from .layout import UNIFORM
from .registry import deferred, lowers


@lowers("constant")
def lower_constant(lw, op):
    attr = op.attrs["value"]
    result_type: TileType = op.results[0].type
    element = result_type.element
    size = 1 if dtypes.name_of(element) == "i1" else dtypes.byte_size(element)
    payload = element_bytes(attr)
    if attr.is_splat or result_type.num_elements == 1:
        lw.set(op.results[0], Tile(result_type, [immediate(lw, element, payload[:size])],
                                   UNIFORM if result_type.num_elements > 1 else None))
        return
    # A non-splat constant lives in the constant bank; each slot loads its element.
    name = f"{lw.prefix}_const{len(lw.const_arrays)}"
    lw.const_arrays.append((name, payload))
    w = lw.w
    base = w.reg("b64")
    w(f"mov.u64 {base}, {name}")
    regs = []
    for k in range(lw.slots(result_type.num_elements)):
        index = lw.elem_index(result_type.num_elements, k)
        offset, address = w.reg("b64"), w.reg("b64")
        w(f"mul.wide.u32 {offset}, {index}, {size}")
        w(f"add.s64 {address}, {base}, {offset}")
        regs.append(lw.load("const", address, element))
    lw.set(op.results[0], Tile(result_type, regs))


@lowers("iota")
def lower_iota(lw, op):
    from .anchors import broadcast_layout
    from .vectors import pointer_layout
    result_type = op.results[0].type
    layout = None
    if result_type.num_elements > 1:
        layout = pointer_layout(lw, result_type.shape) or broadcast_layout(lw, op.results[0])
    _iota_in(lw, op, layout)


def _iota_in(lw, op, layout):
    """The iota's tile in `layout` (None: Cyclic)."""
    w = lw.w
    result_type = op.results[0].type
    element = result_type.element
    regs = []
    made = {}
    for k in range(lw.slots(result_type.num_elements) if layout is None else layout.slots):
        if layout is None:
            index = lw.elem_index(result_type.num_elements, k)
        else:
            index = lw.per_thread(layout.table(lw.T)[k],
                                  lambda k=k: layout.emit_index(lw, k))
            if index in made:  # a copy of an earlier slot (same values in every thread)
                regs.append(made[index])
                continue
        regs.append(iota_value(lw, index, element))
        made[index] = regs[-1]
    lw.set(op.results[0], Tile(result_type, regs, layout))


def iota_value(lw, index: str, element) -> str:
    """The iota element of u32 linear index `index` in its element type's register."""
    w = lw.w
    if element.name == "i64":
        wide = w.reg("b64")
        w(f"cvt.u64.u32 {wide}, {index}")
        return wide
    if element.name in ("i8", "i16"):
        return lw.normalize_int(index, element)
    return index


@lowers("reshape")
def lower_reshape(lw, op):
    staged = deferred(lw, op, lambda: _reshaped(lw, op))
    lw.set(op.results[0], staged if staged is not None else _reshaped(lw, op))


def _reshaped(lw, op) -> Tile:
    # layouts place linear indices, which a reshape keeps
    source = lw.get(op.operand_values[0], any_layout=True)
    return Tile(op.results[0].type, source.regs, source.layout)


@lowers("assume")
def lower_assume(lw, op):
    lw.set(op.results[0], lw.get(op.operand_values[0], any_layout=True))


@lowers("make_token", "join_tokens")
def lower_token(lw, op):
    # Tokens order memory operations; the JIT emits memory operations in program order and only
    # needs to know whether a barrier is due (see memory.order_after_token).
    tokens = [lw.get(v) for v in op.operand_values]
    after = [t for t in tokens if getattr(t, "after_memory", False)]
    if not after:
        lw.set(op.results[0], FRESH)
    elif any(t.barriers is None for t in after):
        lw.set(op.results[0], AFTER_MEMORY)
    else:  # settled once the latest of the joined accesses is
        lw.set(op.results[0], Token(True, max(t.barriers for t in after)))


@lowers("broadcast")
def lower_broadcast(lw, op):
    scan_anchors(lw)  # layouts asked of broadcasts, before any is built (or folded)
    pointer_anchors(lw)
    if fold_shape_op(lw, op):
        return
    source = lw.get(op.operand_values[0], any_layout=True)
    result_type = op.results[0].type
    if source.count == 1 or source.layout is UNIFORM:
        lw.set(op.results[0], Tile(result_type, [source.scalar], UNIFORM))
        return
    src_shape = source.type.shape
    wanted = lw.wanted.get(op.results[0])  # a load's (or scan's) layout whose flow reads it
    free = _broadcast_in_registers(lw, source, result_type, wanted)
    if free is not None:
        lw.set(op.results[0], free)
        return
    widened = _broadcast_widened(lw, op, wanted)
    if widened is not None:
        lw.set(op.results[0], widened)
        return
    source = lw.get(op.operand_values[0])

    def index(k, mi):
        picked = [lw.const_u32(0) if s == 1 else m for s, m in zip(src_shape, mi)]
        return 0, lw.linear_index(picked, src_shape)

    def static(linear):
        return 0, _broadcast_source(linear, src_shape, tuple(result_type.shape))
    lw.set(op.results[0], lw.gather([source], result_type, index, static, wanted))


_WIDENING = by_mnemonic({"exti": "extend"}, "broadcast of an extended tile")


def _broadcast_widened(lw, op, wanted):
    """broadcast(exti(x)) to i64 of an x of at most 32 bits, built as exti(broadcast(x)): half
    the data moves between threads, and the result is recorded as widened (i64 compares and
    multiplies of it stay 32-bit). None for any other broadcast that moves data."""
    value = op.operand_values[0]
    producer = lw.forward.get(value, value).owner
    result_type = op.results[0].type
    if not isinstance(producer, Op) or _WIDENING.get(producer.name) != "extend" or \
            dtypes.int_bits(result_type.element) != 64:
        return None
    narrow = producer.operand_values[0]
    element = narrow.type.element
    if dtypes.name_of(element) not in ("i8", "i16", "i32"):
        return None
    source = lw.get(narrow)
    if source.count == 1 or source.layout is UNIFORM:
        return None
    src_shape = source.type.shape

    def index(k, mi):
        picked = [lw.const_u32(0) if s == 1 else m for s, m in zip(src_shape, mi)]
        return 0, lw.linear_index(picked, src_shape)

    def static(linear):
        return 0, _broadcast_source(linear, src_shape, tuple(result_type.shape))
    moved = lw.gather([source], TileType(tuple(result_type.shape), element), index, static,
                      wanted)
    unsigned = producer.attrs["signedness"] is Signedness.UNSIGNED
    kind = "u" if unsigned else "s"
    done, regs = {}, []
    for reg in moved.regs:
        if reg not in done:
            low = lw.zero_extended(reg, element) if unsigned else reg
            out = lw.w.reg("b64")
            lw.w(f"cvt.{kind}64.{kind}32 {out}, {low}")
            lw.widened[out] = (kind, low)
            done[reg] = out
        regs.append(done[reg])
    return Tile(result_type, regs, moved.layout)


def _broadcast_source(linear, src_shape, shape):
    """Source linear indices of a broadcast's result linear indices."""
    index = np.unravel_index(linear, shape)
    picked = [np.zeros_like(i) if s == 1 else i for s, i in zip(src_shape, index)]
    return np.ravel_multi_index(picked, src_shape)


def _broadcast_in_registers(lw, source, result_type, wanted=None):
    """The broadcast as register moves when every thread already holds the source elements its
    result slots need: into the source's parent layout when the source is a reduction's result
    (softmax's row maximum back over the row), else into `wanted` (when given) or Cyclic (e.g. a
    [1, C] row over [R, C] when C divides the thread count). None when data would have to move
    between threads."""
    from .layout import Cyclic, Sliced, register_map
    src_shape, shape = tuple(source.type.shape), tuple(result_type.shape)

    def to_source(linear):
        return _broadcast_source(linear, src_shape, shape)
    layout = lw.layout_of(source)
    candidates = []
    if isinstance(layout, Sliced) and layout.parent.count == result_type.num_elements:
        candidates.append(layout.parent)
    if wanted is not None:
        candidates.append(wanted)
    else:
        candidates.append(Cyclic(result_type.num_elements, lw.T))
    for target in candidates:
        mapping = register_map(layout, target, lw.T, to_source)
        if mapping is not None:
            return Tile(result_type, [source.regs[k] for k in mapping],
                        None if isinstance(target, Cyclic) else target)
    return None


@lowers("permute")
def lower_permute(lw, op):
    if fold_shape_op(lw, op):
        return
    staged = deferred(lw, op, lambda: _permuted(lw, op))
    if staged is not None:  # the mma stages the source as its transposed B
        lw.set(op.results[0], staged)
        return
    lw.set(op.results[0], _permuted(lw, op))


def _permuted(lw, op) -> Tile:
    """The permuted tile, read from the source in its own layout (a vector load's) and made in
    Blocked where every store its value reaches takes vectors (vectors.flow_vector_width)."""
    from .layout import Blocked
    from .vectors import flow_vector_width
    source = lw.get(op.operand_values[0], any_layout=True)
    result_type = op.results[0].type
    vec = flow_vector_width(lw, op.results[0])
    layout = Blocked(result_type.num_elements, lw.T, vec) if vec > 1 else None
    perm = list(op.attrs["permutation"])
    if source.count == 1:
        return Tile(result_type, [source.scalar])

    def index(k, mi):
        src_mi = [None] * len(perm)
        for d, p in enumerate(perm):
            src_mi[p] = mi[d]
        return 0, lw.linear_index(src_mi, source.type.shape)

    def static(linear):
        index = np.unravel_index(linear, tuple(result_type.shape))
        src = [None] * len(perm)
        for d, p in enumerate(perm):
            src[p] = index[d]
        return 0, np.ravel_multi_index(src, tuple(source.type.shape))
    return lw.gather([source], result_type, index, static, layout)


@lowers("cat")
def lower_cat(lw, op):
    if fold_shape_op(lw, op):
        return
    w = lw.w
    lhs, rhs = (lw.get(v) for v in op.operand_values)
    dim = op.attrs["dim"]
    result_type = op.results[0].type
    split = lhs.type.shape[dim]

    def index(k, mi):
        first = w.reg("pred")
        w(f"setp.lt.u32 {first}, {mi[dim]}, {split}")
        shifted = w.reg("b32")
        w(f"sub.u32 {shifted}, {mi[dim]}, {split}")
        in_b = list(mi)
        in_b[dim] = shifted
        in_a = lw.linear_index(mi, lhs.type.shape)
        in_b_lin = lw.linear_index(in_b, rhs.type.shape)
        zero = lw.const_u32(0)
        a = w.reg("b32")
        b = w.reg("b32")
        w(f"selp.b32 {a}, {in_a}, {zero}, {first}")
        w(f"selp.b32 {b}, {zero}, {in_b_lin}, {first}")
        return first, a, b, None

    def static(linear):
        index = list(np.unravel_index(linear, tuple(result_type.shape)))
        second = index[dim] >= split
        in_a = np.ravel_multi_index(index, tuple(lhs.type.shape), mode="clip")
        index[dim] = index[dim] - split * second
        in_b = np.ravel_multi_index(index, tuple(rhs.type.shape), mode="clip")
        return second.astype(np.int64), np.where(second, in_b, in_a)
    lw.set(op.results[0], lw.gather([lhs, rhs], result_type, index, static))


def _u32_indices(lw, tiles):
    regs = []
    for tile in tiles:
        reg = tile.scalar
        if tile.element.name == "i64":
            narrow = lw.w.reg("b32")
            lw.w(f"cvt.u32.u64 {narrow}, {reg}")
            reg = narrow
        regs.append(reg)
    return regs


@lowers("extract")
def lower_extract(lw, op):
    if fold_shape_op(lw, op):
        return
    w = lw.w
    source = lw.get(op.operands["source"])
    result_type = op.results[0].type
    starts = []
    for reg, size in zip(_u32_indices(lw, [lw.get(v) for v in op.operands["indices"]]),
                         result_type.shape):
        start = w.reg("b32")
        w(f"mul.lo.u32 {start}, {reg}, {size}")
        starts.append(start)

    def index(k, mi):
        src_mi = []
        for start, m in zip(starts, mi):
            reg = w.reg("b32")
            w(f"add.u32 {reg}, {start}, {m}")
            src_mi.append(reg)
        return 0, lw.linear_index(src_mi, source.type.shape)
    if source.count == 1:
        lw.set(op.results[0], Tile(result_type, [source.scalar]))
        return
    lw.set(op.results[0], lw.gather([source], result_type, index))


@lowers("insert")
def lower_insert(lw, op):
    w = lw.w
    source = lw.get(op.operands["source"])
    dest = lw.get(op.operands["destination"])
    result_type = op.results[0].type
    starts = []
    for reg, size in zip(_u32_indices(lw, [lw.get(v) for v in op.operands["indices"]]),
                         source.type.shape):
        start = w.reg("b32")
        w(f"mul.lo.u32 {start}, {reg}, {size}")
        starts.append(start)

    def index(k, mi):
        inside = None
        local = []
        for start, m, size in zip(starts, mi, source.type.shape):
            offset, ok = w.reg("b32"), w.reg("pred")
            w(f"sub.u32 {offset}, {m}, {start}")
            w(f"setp.lt.u32 {ok}, {offset}, {size}")  # unsigned: also rejects m < start
            local.append(offset)
            if inside is None:
                inside = ok
            else:
                both = w.reg("pred")
                w(f"and.pred {both}, {inside}, {ok}")
                inside = both
        src = w.reg("b32")
        w(f"selp.b32 {src}, {lw.linear_index(local, source.type.shape)}, 0, {inside}")
        return inside, src, lw.linear_index(mi, dest.type.shape), None
    lw.set(op.results[0], lw.gather([source, dest], result_type, index))
