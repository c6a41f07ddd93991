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
CYCLIC_ONLY = "cyclic"     # an element-wise hook lowered slot by slot from Cyclic operands
_ROLES = by_mnemonic({"constant": LITERAL, "reshape": KEEPS, "assume": KEEPS,
                      "broadcast": BROADCASTS, "reduce": REDUCES, "store_view_tko": STORES,
                      "fpowi": CYCLIC_ONLY}, "layout anchor roles")


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


def _broadcast_source(lw, value):
    """The broadcast op that makes `value` (through reshapes), else None."""
    for _ in range(16):
        value = lw.forward.get(value, value)
        op = value.owner
        if not hasattr(op, "attrs"):
            return None
        role = _ROLES.get(op.name)
        if role == BROADCASTS:
            return op
        if role != KEEPS:
            return None
        value = op.operand_values[0]
    return None


def flow_is_layout_free(lw, value, reductions=None, broadcasts=None) -> bool:
    """Whether every use of `value`, and of the values computed from it element-wise, handles
    any layout (see the module doc). `reductions`, a list, receives the flow's reduce ops. With
    `broadcasts`, a list, other operands may also be broadcasts of values from outside the flow
    (a weight row over the rows, an iota over a reduction's rows): the list receives those
    broadcast ops, which the caller lowers straight into the flow's layout."""
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
            source = _broadcast_source(lw, operand) if broadcasts is not None else None
            if source is None or source.results[0] in flow or source.results[0] in reduced:
                return False
            broadcasts.append(source)
    return True


def divisor(lw, value) -> int:
    """The largest power of two `value` (an integer or pointer scalar) is known to be a multiple
    of, from `assume div_by` on it (1 when nothing is known)."""
    from tilebc.ir.attrs import DivByAttr
    known = 1
    for _ in range(16):
        value = lw.forward.get(value, value)
        op = value.owner
        if not hasattr(op, "attrs") or op.name != "assume":
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
    if not any(tuple(op.operand_values[0].type.shape) == shape
               and op.attrs["dim"] == len(shape) - 1 for op in reductions):
        return None
    layout = Rows(count, lw.T, row, lanes)
    for op in broadcasts:
        lw.wanted[op.results[0]] = layout
    return layout
