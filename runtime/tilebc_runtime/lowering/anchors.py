"""Layout choice at anchors (view loads): a loaded tile gets a layout other than Cyclic only when
every op its value flows into handles any layout, so the choice never adds a conversion.

Ops that handle any layout: the element-wise ops lowered by elementwise.map_slots (every hook
of elementwise.py and casts.py but fpowi), reshape, assume, broadcast, reduce (its result is a
sliced layout; whatever uses it converts as the general reduction would have) and view stores.
The other operands of an element-wise op must be in the same layout: values of the same flow,
splats, or reductions of the flow broadcast back.
"""
from __future__ import annotations

from typing import Dict, List

from tilebc.ir.types import GatherScatterViewType, TileType
from tilebc.ops.table import by_mnemonic

# What the ops other than element-wise ones do with a flowing value (see the module doc).
LITERAL = "literal"        # a constant: a splat if its value is
KEEPS = "keeps"            # the result is the operand's elements (reshape, assume)
BROADCASTS = "broadcasts"  # copies the operand's elements along new dimensions
REDUCES = "reduces"        # a reduction: its result has a sliced layout
STORES = "stores"          # a view store: takes the tile in any layout
LOADS = "loads"            # a view load: its result's layout is chosen for the load
CYCLIC_ONLY = "cyclic"     # an element-wise hook lowered slot by slot from Cyclic operands
_ROLES = by_mnemonic({"constant": LITERAL, "reshape": KEEPS, "assume": KEEPS,
                      "broadcast": BROADCASTS, "reduce": REDUCES, "store_view_tko": STORES,
                      "load_view_tko": LOADS, "fpowi": CYCLIC_ONLY}, "layout anchor roles")


def _layout_free(op) -> bool:
    from .registry import LOWERINGS
    hook = LOWERINGS.get(op.name)
    if hook is None or _ROLES.get(op.name) == CYCLIC_ONLY or op.regions or len(op.results) != 1:
        return False
    return hook.__module__.rsplit(".", 1)[-1] in ("elementwise", "casts")


def _uses(lw) -> Dict[object, List[object]]:
    key = ("uses",)
    if key not in lw._cache:
        uses: Dict[object, List[object]] = {}
        for op in lw.function.walk():
            if op in lw.dead:
                continue
            for value in op.operand_values:
                uses.setdefault(lw.forward.get(value, value), []).append(op)
        lw._cache[key] = uses
    return lw._cache[key]


def unused(lw, value) -> bool:
    """No live op reads `value`."""
    return not _uses(lw).get(lw.forward.get(value, value))


def _splat(lw, value) -> bool:
    """A value every element of which is the same scalar (a splat constant, or a scalar
    reshaped / broadcast)."""
    seen = 0
    while seen < 16:
        seen += 1
        value = lw.forward.get(value, value)
        if isinstance(value.type, TileType) and value.type.num_elements == 1:
            return True
        op = value.owner
        if not hasattr(op, "attrs"):  # a block argument
            return False
        role = _ROLES.get(op.name)
        if role == LITERAL:
            return op.attrs["value"].is_splat
        if role not in (KEEPS, BROADCASTS):
            return False
        value = op.operand_values[0]
    return False


def _outside_sources(lw, value, shape, depth=0):
    """The ops to build in a flow's layout so that `value` (an operand from outside the flow)
    comes out in it: broadcasts, view loads of the flow's shape read by nothing else, reached
    through reshapes and element-wise ops of such values and splats. None when there is no such
    way."""
    value = lw.forward.get(value, value)
    if _splat(lw, value):
        return []
    op = value.owner
    if depth > 8 or not hasattr(op, "attrs"):
        return None
    if _ROLES.get(op.name) == LOADS and value is op.results[0] \
            and tuple(value.type.shape) == shape and len(_uses(lw).get(value, ())) == 1 \
            and not isinstance(op.operands["view"].type, GatherScatterViewType):
        return [op]
    if len(op.results) != 1:
        return None
    role = _ROLES.get(op.name)
    if role == BROADCASTS:
        return [op]
    if role != KEEPS and not _layout_free(op):
        return None
    found = []
    for operand in op.operand_values:
        more = _outside_sources(lw, operand, shape, depth + 1)
        if more is None:
            return None
        found += more
    return found


def flow_is_layout_free(lw, value, reductions=None, broadcasts=None) -> bool:
    """Whether every use of `value`, and of the values computed from it element-wise, handles
    any layout (see the module doc). `reductions`, a list, receives the flow's reduce ops. With
    `broadcasts`, a list, other operands may also come from outside the flow as broadcasts (a
    weight row over the rows, an iota over a reduction's rows), other view loads of the same
    shape (x + residual), or element-wise results of those: the list receives the broadcast and
    load ops, which are then built straight in the flow's layout."""
    uses = _uses(lw)
    flow = {value}
    reduced = set()  # reduction results of the flow and their reshapes
    work = [value]
    pending = []  # element-wise ops whose other operands are checked at the end
    while work:
        current = work.pop()
        for op in uses.get(current, ()):
            role = _ROLES.get(op.name)
            if role == KEEPS:
                target = reduced if current in reduced else flow
                if op.results[0] not in target:
                    target.add(op.results[0])
                    work.append(op.results[0])
                continue
            if current in reduced:
                if role == BROADCASTS and op.results[0] not in flow:
                    flow.add(op.results[0])
                    work.append(op.results[0])
                continue  # any other use converts, as it would after the general reduction
            if role == REDUCES:
                pending.append(op)
                if reductions is not None:
                    reductions.append(op)
                for result in op.results:
                    if result not in reduced:
                        reduced.add(result)
                        work.append(result)
                continue
            if role == STORES:
                view = op.operands["view"]
                if op.operands["tile"] is not current and \
                        lw.forward.get(op.operands["tile"], op.operands["tile"]) is not current:
                    return False
                if isinstance(view.type, GatherScatterViewType):
                    return False
                continue
            if _layout_free(op):
                pending.append(op)
                if op.results[0] not in flow:
                    flow.add(op.results[0])
                    work.append(op.results[0])
                continue
            return False
    for op in pending:
        for operand in op.operand_values:
            operand = lw.forward.get(operand, operand)
            if operand in flow or _splat(lw, operand):
                continue
            found = None
            if broadcasts is not None:
                found = _outside_sources(lw, operand, tuple(value.type.shape))
            if found is None or any(o.results[0] in flow or o.results[0] in reduced
                                    for o in found):
                return False
            broadcasts += found
    return True


def divisor(lw, value) -> int:
    """The largest power of two `value` (an integer or pointer scalar) is known to be a multiple
    of, from `assume div_by` on it (1 when nothing is known)."""
    from tilebc.ir.attrs import DivByAttr
    known = 1
    for _ in range(16):
        value = lw.forward.get(value, value)
        op = value.owner
        if not hasattr(op, "attrs") or not op.spec.forwards:
            break
        predicate = op.attrs.get("predicate")
        if isinstance(predicate, DivByAttr) and (predicate.every or 1) == 1:
            known = max(known, predicate.divisor & -predicate.divisor)
        value = op.operand_values[0]
    return known


def rows_layout(lw, value):
    """A Rows layout for a loaded tile whose flow reduces it along its last dimension, when that
    keeps rows that Cyclic would spread over several warps inside one warp, or lets a thread
    hold several elements of one row; else None. Broadcasts from outside the flow that its
    element-wise ops or reductions read are recorded (`Lowerer.wanted`) to be lowered straight
    into the layout."""
    from .layout import Rows
    from . import dtypes
    shape = tuple(value.type.shape)
    count = value.type.num_elements
    warps = lw.T // 32
    if len(shape) < 2 or count % lw.T or lw.T % 32 or warps & (warps - 1):
        return None
    row = shape[-1]
    rows = count // row
    # fewest lanes per row (more of a row in-thread) that keep every lane's run a whole number
    # of 32-byte sectors (the same coalescing as Cyclic) and fill the warps with rows
    size = max(1, dtypes.byte_size(value.type.element))
    lanes = None
    for candidate in (1, 2, 4, 8, 16, 32):
        if candidate * size < 32 and candidate < 32:
            continue
        if row % candidate or rows % (warps * (32 // candidate)):
            continue
        lanes = candidate
        break
    if lanes is None or (lanes == 32 and (row <= 32 or warps == 1)):
        return None  # Cyclic already keeps each row in one warp
    reductions, broadcasts = [], []
    if not flow_is_layout_free(lw, value, reductions, broadcasts):
        return None
    from .reductions import commutative
    along = [op for op in reductions if tuple(op.operand_values[0].type.shape) == shape
             and op.attrs["dim"] == len(shape) - 1]
    # ordered combiners over whole-warp rows take the general tree (through shared memory)
    # either way: then the layout gains nothing
    if not along or (lanes == 32 and not any(commutative(op) for op in along)):
        return None
    layout = Rows(count, lw.T, row, lanes)
    for op in broadcasts:
        lw.wanted[op.results[0]] = layout
    return layout


def load_layout(lw, value):
    """The layout a view load's result takes without vector accesses: the one another load's
    choice asked for (it is read in that load's flow), else rows_layout's."""
    wanted = lw.wanted.get(lw.forward.get(value, value))
    if wanted is not None and wanted.count == value.type.num_elements:
        return wanted
    return rows_layout(lw, value)


def _uniform(lw, value, depth: int = 0) -> bool:
    """A splat (see `_splat`), or an element-wise op of splats: lowered as one register."""
    if _splat(lw, value):
        return True
    value = lw.forward.get(value, value)
    op = value.owner
    if depth > 8 or not hasattr(op, "attrs") or not _layout_free(op):
        return False
    return all(_uniform(lw, v, depth + 1) for v in op.operand_values)


def broadcast_layout(lw, value):
    """A layout for an index tile (an iota) whose flow only feeds broadcasts that copy it along one
    dimension of a larger tile: the broadcast result's Cyclic layout sliced along that
    dimension, so the values are computed where the larger tile needs them and each broadcast
    is register moves (no shuffle or shared-memory exchange). None when any use of the flow
    needs another layout, the broadcasts disagree, or the sliced layout holds many more
    distinct values per thread than Cyclic would."""
    from .layout import Cyclic, Sliced, distinct_slots
    uses = _uses(lw)
    flow = {value}
    work = [value]
    pending = []
    chosen = None
    while work:
        current = work.pop()
        for op in uses.get(current, ()):
            role = _ROLES.get(op.name)
            if role == KEEPS or (_layout_free(op) and role != BROADCASTS):
                if role != KEEPS:
                    pending.append(op)
                if op.results[0] not in flow:
                    flow.add(op.results[0])
                    work.append(op.results[0])
                continue
            if role != BROADCASTS:
                return None
            source, shape = tuple(current.type.shape), tuple(op.results[0].type.shape)
            dims = [d for d, (s, r) in enumerate(zip(source, shape)) if s != r]
            if len(source) != len(shape) or len(dims) != 1:
                return None
            layout = Sliced(Cyclic(op.results[0].type.num_elements, lw.T), shape, dims[0])
            if chosen is not None and layout != chosen:
                return None
            chosen = layout
    if chosen is None or chosen.count != value.type.num_elements:
        return None
    for op in pending:
        for operand in op.operand_values:
            operand = lw.forward.get(operand, operand)
            if operand not in flow and not _uniform(lw, operand):
                return None
    cyclic = Cyclic(value.type.num_elements, lw.T)
    if len(distinct_slots(chosen, lw.T)) > 2 * cyclic.slots:
        return None
    return chosen
