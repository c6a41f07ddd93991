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


def flow_is_layout_free(lw, value, reductions=None) -> bool:
    """Whether every use of `value`, and of the values computed from it element-wise, handles
    any layout (see the module doc). `reductions`, a list, receives the flow's reduce ops."""
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
            if operand not in flow and not _splat(lw, operand):
                return False
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
    keeps rows that Cyclic would spread over several warps inside one warp; else None."""
    from .layout import Rows
    shape = tuple(value.type.shape)
    count = value.type.num_elements
    warps = lw.T // 32
    if len(shape) < 2 or shape[-1] <= 32 or shape[-1] % 32 or count % lw.T \
            or lw.T % 32 or warps & (warps - 1) or warps == 1 or (count // shape[-1]) % warps:
        return None
    reductions = []
    if not flow_is_layout_free(lw, value, reductions):
        return None
    if not any(tuple(op.operand_values[0].type.shape) == shape
               and op.attrs["dim"] == len(shape) - 1 for op in reductions):
        return None
    return Rows(count, lw.T, shape[-1])


# operand element -> the mma.sync input type it is fed as (f16 holds every fp8 value exactly)
MMA_INPUT = {"f16": "f16", "bf16": "bf16", "f8E4M3FN": "f16", "f8E5M2": "f16"}


def tensor_core_kind(lw, op):
    """The mma.sync input type ("f16" / "bf16") when mmaf `op` takes the f16 / bf16 tensor-core
    path (fp8 widened to f16), else None."""
    if op.name != "mmaf":
        return None
    lhs, rhs = (op.operands[n].type for n in ("lhs", "rhs"))
    result = op.results[0].type
    if (len(result.shape) not in (2, 3) or result.element.name not in ("f16", "bf16", "f32")
            or lw.arch < 80 or lw.T % 32):
        return None
    kinds = {MMA_INPUT.get(lhs.element.name), MMA_INPUT.get(rhs.element.name)}
    if len(kinds) != 1 or None in kinds:
        return None
    m, n = result.shape[-2:]
    return kinds.pop() if m % 16 == 0 and n % 8 == 0 and lhs.shape[-1] % 16 == 0 else None


def mma_form(lw, op):
    """(A type, B type, K of one mma.sync) for an mmaf / mmai the accumulator-layout path
    handles: f16 / bf16 / fp8 (as f16) with m16n8k16, tf32 with m16n8k8 (f32 result), i8 with
    m16n8k32 (s8 / u8 by the signedness attributes, i32 result), f64 with m8n8k4; else None."""
    from tilebc.ops.enums import Signedness
    kind = tensor_core_kind(lw, op)
    if kind is not None:
        return kind, kind, 16
    if op.name not in ("mmaf", "mmai") or lw.arch < 80 or lw.T % 32:
        return None
    lhs, rhs = (op.operands[n].type for n in ("lhs", "rhs"))
    result = op.results[0].type
    k_dim = lhs.shape[-1]
    names = (lhs.element.name, rhs.element.name, result.element.name)
    if len(result.shape) not in (2, 3) or result.shape[-2] % 8 or result.shape[-1] % 8:
        return None
    if op.name == "mmaf" and names == ("f64", "f64", "f64") and k_dim % 4 == 0:
        return "f64", "f64", 4  # m8n8k4: 8x8 blocks
    if result.shape[-2] % 16:
        return None
    if op.name == "mmaf" and names == ("tf32", "tf32", "f32") and k_dim % 8 == 0:
        return "tf32", "tf32", 8
    if op.name == "mmai" and names == ("i8", "i8", "i32") and k_dim % 32 == 0:
        sign = {Signedness.UNSIGNED: "u8"}
        return (sign.get(op.attrs["signedness_lhs"], "s8"),
                sign.get(op.attrs["signedness_rhs"], "s8"), 32)
    return None


def mma_layout(lw, op):
    """The accumulator layout mmaf / mmai `op` produces its result in (layout.MmaAcc), or None
    when it takes another path. The warp grid minimises the mma a warp issues (all warps work
    when the blocks allow; with fewer blocks than warps, warps repeat the grid's work as
    copies), then the ldmatrix per K step (one .x4 per block row for A, one per two block
    columns for B), over the grids that divide the blocks exactly."""
    from .layout import MmaAcc
    form = mma_form(lw, op)
    if form is None:
        return None
    height = 8 if form[0] == "f64" else 16
    shape = tuple(op.results[0].type.shape)
    batches = shape[0] if len(shape) == 3 else 1
    m, n = shape[-2:]
    rows, cols, warps = m // height, n // 8, lw.T // 32
    best = None
    for size in range(1, warps + 1):  # grids of `size` warps; the other warps hold copies
        if warps % size:
            continue
        for wb in range(1, size + 1):
            if size % wb or batches % wb:
                continue
            for wm in range(1, size // wb + 1):
                wn = size // wb // wm
                if (size // wb) % wm or rows % wm or cols % wn:
                    continue
                # the mma a warp issues first, then its ldmatrix per K step
                cost = (batches * rows * cols // size,
                        (batches // wb) * (rows // wm + -(-(cols // wn) // 2)))
                if best is None or cost < best[0]:
                    best = (cost, (wb, wm, wn))
    return None if best is None else MmaAcc(batches, m, n, lw.T, best[1], height)


def carried_mma_layout(lw, body, index):
    """The accumulator layout for loop-carried value `index` (of a `for` body): the one the body's
    mmaf produces when that mmaf takes the carried value as its accumulator and its result is
    what `continue` carries on; else None (the value stays Cyclic)."""
    if not body.ops or body.ops[-1].name != "continue":
        return None
    value = body.ops[-1].operand_values[index]
    value = lw.forward.get(value, value)
    op = value.owner
    if not hasattr(op, "name") or op.name not in ("mmaf", "mmai") or op in lw.dead:
        return None
    acc = op.operands["acc"]
    if lw.forward.get(acc, acc) is not body.args[1 + index]:
        return None
    return mma_layout(lw, op)


def reaches_reduction(lw, value) -> bool:
    """Whether `value`, or a value computed from it by element-wise ops, reshapes or
    broadcasts, is reduced."""
    uses = _uses(lw)
    seen, work = {value}, [value]
    while work:
        for op in uses.get(work.pop(), ()):
            role = _ROLES.get(op.name)
            if role == REDUCES:
                return True
            if role in (KEEPS, BROADCASTS) or _layout_free(op):
                for result in op.results:
                    if result not in seen:
                        seen.add(result)
                        work.append(result)
    return False
