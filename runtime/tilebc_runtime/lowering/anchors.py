"""Layout choice at anchors (view loads): a loaded tile gets a layout other than Cyclic only when
every op its value flows into handles any layout, so the choice never adds a conversion.

Ops that handle any layout: the element-wise ops lowered by elementwise.map_slots (every hook
of elementwise.py and casts.py but fpowi), reshape, assume, broadcast, reduce (its result is a
sliced layout; whatever uses it converts as the general reduction would have), view stores,
and permute (its exchange reads the source from any layout that holds each element once).
The other operands of an element-wise op must be in the same layout: values of the same flow,
splats, or reductions of the flow broadcast back.
"""
from __future__ import annotations


from tilebc.ir.types import GatherScatterViewType, TileType
from tilebc.ops.spec import Effects, Exit
from tilebc.ops.table import by_mnemonic

# What the ops other than element-wise ones do with a flowing value (see the module doc).
LITERAL = "literal"        # a constant: a splat if its value is
KEEPS = "keeps"            # the result is the operand's elements (reshape, assume)
BROADCASTS = "broadcasts"  # copies the operand's elements along new dimensions
REDUCES = "reduces"        # a reduction: its result has a sliced layout
STORES = "stores"          # a view store: takes the tile in any layout
LOADS = "loads"            # a view load: its result's layout is chosen for the load
MMA = "mma"                # mmaf / mmai: the result may be made in the accumulator layout
CYCLIC_ONLY = "cyclic"     # an element-wise hook lowered slot by slot from Cyclic operands
SCANS = "scans"            # a scan: takes its source in any layout (anchors.scan_anchors)
OFFSETS = "offsets"        # pointer + offset, slot by slot in any layout
POINTER_LOADS = "pointer loads"    # load_ptr_tko: any layout its pointers come in
POINTER_STORES = "pointer stores"  # store_ptr_tko: stores from its pointers' layout
MOVES = "moves"            # permute: reads its source in any layout held once (Lowerer.gather)
_ROLES = by_mnemonic({"scan": SCANS, "offset": OFFSETS, "load_ptr_tko": POINTER_LOADS,
                      "store_ptr_tko": POINTER_STORES, "constant": LITERAL, "reshape": KEEPS, "assume": KEEPS,
                      "broadcast": BROADCASTS, "reduce": REDUCES, "store_view_tko": STORES,
                      "load_view_tko": LOADS, "permute": MOVES, "fpowi": CYCLIC_ONLY, "mmaf": MMA, "mmai": MMA}, "layout anchor roles")


def is_mma(op) -> bool:
    """An mmaf / mmai (by its anchor role)."""
    return _ROLES.get(getattr(op, "name", None)) == MMA


_WRITING = (Effects.MEMORY, Effects.ATOMIC, Effects.CALL)


def writes_memory(op) -> bool:
    """Whether `op` itself may write memory: by the op table's effects, memory ops, atomics and
    calls, except the memory ops that only read (view and pointer loads, by their roles)."""
    return op.spec.effects in _WRITING and _ROLES.get(op.name) not in (LOADS, POINTER_LOADS)


def _layout_free(op) -> bool:
    from .registry import LOWERINGS
    hook = LOWERINGS.get(op.name)
    if hook is None or _ROLES.get(op.name) == CYCLIC_ONLY or op.regions or len(op.results) != 1:
        return False
    return hook.__module__.rsplit(".", 1)[-1] in ("elementwise", "casts")


def _uses(lw) -> dict[object, list[object]]:
    key = ("uses",)
    if key not in lw._cache:
        uses: dict[object, list[object]] = {}
        for op in lw.ops:
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
    if role not in (KEEPS, OFFSETS) and not _layout_free(op):
        return None
    found = []
    for operand in op.operand_values:
        more = _outside_sources(lw, operand, shape, depth + 1)
        if more is None:
            return None
        found += more
    return found


def flow_is_layout_free(lw, value, reductions=None, broadcasts=None, stores=None) -> bool:
    """Whether every use of `value`, and of the values computed from it element-wise, handles
    any layout (see the module doc). `reductions`, a list, receives the flow's reduce ops, and
    `stores`, a list, its view stores. With
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
                if stores is not None:
                    stores.append(op)
                continue
            if role == MOVES:
                continue  # its result is a new value, laid out on its own
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
    along = [op for op in reductions if tuple(op.operand_values[0].type.shape) == shape
             and op.attrs["dim"] == len(shape) - 1]
    if not along:
        return None  # and the reductions family need not be imported (families.ON_DEMAND)
    from .reductions import commutative
    # ordered combiners over whole-warp rows take the general tree (through shared memory)
    # either way: then the layout gains nothing
    if lanes == 32 and not any(commutative(op) for op in along):
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


# operand element -> the mma.sync input type it is fed as (f16 holds every fp8 value exactly)
MMA_INPUT = {"f16": "f16", "bf16": "bf16", "f8E4M3FN": "f16", "f8E5M2": "f16"}


def tensor_core_kind(lw, op):
    """The mma.sync input type ("f16" / "bf16") when mmaf `op` takes the f16 / bf16 tensor-core
    path (fp8 widened to f16), else None."""
    if _ROLES.get(op.name) != MMA:
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
    handles: f16 / bf16 with m16n8k16, fp8 with m16n8k32 (.e4m3 / .e5m2, f32 accumulators) on
    sm_89+ where K % 32 == 0, else as f16 with m16n8k16, tf32 with m16n8k8 (f32 result), i8 with
    m16n8k32 (s8 / u8 by the signedness attributes, i32 result), f64 with m8n8k4; else None."""
    from tilebc.ops.enums import Signedness
    from . import dtypes
    kind = tensor_core_kind(lw, op)
    if kind is not None:
        fp8 = [dtypes.FP8_PTX.get(op.operands[n].type.element.name) for n in ("lhs", "rhs")]
        if None not in fp8 and lw.arch >= 89 and op.operands["lhs"].type.shape[-1] % 32 == 0:
            return fp8[0], fp8[1], 32
        return kind, kind, 16
    if _ROLES.get(op.name) != MMA or lw.arch < 80 or lw.T % 32:
        return None
    lhs, rhs = (op.operands[n].type for n in ("lhs", "rhs"))
    result = op.results[0].type
    k_dim = lhs.shape[-1]
    names = (lhs.element.name, rhs.element.name, result.element.name)
    if len(result.shape) not in (2, 3) or result.shape[-2] % 8 or result.shape[-1] % 8:
        return None
    if names == ("f64", "f64", "f64") and k_dim % 4 == 0:
        return "f64", "f64", 4  # m8n8k4: 8x8 blocks
    if result.shape[-2] % 16:
        return None
    if names == ("tf32", "tf32", "f32") and k_dim % 8 == 0:
        return "tf32", "tf32", 8
    if names == ("i8", "i8", "i32") and k_dim % 32 == 0:
        sign = {Signedness.UNSIGNED: "u8"}
        return (sign.get(op.attrs["signedness_lhs"], "s8"),
                sign.get(op.attrs["signedness_rhs"], "s8"), 32)
    return None


_WGMMA_OPS = by_mnemonic({"mmaf": True}, "wgmma on sm_90")


def _wgmma_product(op, threads: int) -> bool:
    """The op-only half of wgmma_fits: an mmaf of f16 or bf16 operands with an f32 [M, N] result,
    N a multiple of 8 up to 256, K % 16 == 0, and M a multiple of 64 per warpgroup of `threads`
    with at most 128 f32 accumulators a thread (registers)."""
    if op.name not in _WGMMA_OPS:
        return False
    lhs, rhs, result = op.operands["lhs"].type, op.operands["rhs"].type, op.results[0].type
    names = {lhs.element.name, rhs.element.name}
    if len(names) != 1 or names.pop() not in ("f16", "bf16") or result.element.name != "f32" \
            or len(result.shape) != 2:
        return False
    m, n = result.shape
    return m % (threads // 2) == 0 and n % 8 == 0 and 8 <= n <= 256 \
        and lhs.shape[-1] % 16 == 0 and m * n <= 128 * threads


def wgmma_fits(lw, op) -> bool:
    """Whether mmaf `op` runs as sm_90 warpgroup MMA (wgmma.mma_async, matmul._wgmma): a product
    _wgmma_product takes (not widened fp8) and one or two warpgroups (128 or 256 threads), each
    taking 64 of every 64 x warpgroups rows. Its accumulator fragment is the MmaAcc layout of a
    1 x warps x 1 warp grid (warp w: rows 16 (w mod 4) of its warpgroup's 64)."""
    if lw.arch != 90 or lw.portable or not lw.wgmma or lw.T not in (128, 256) \
            or lw.chunk is not None:
        return False
    return _wgmma_product(op, lw.T) and tensor_core_kind(lw, op) is not None


def takes_two_warpgroups(op) -> bool:
    """Whether sm_90 should run mmaf `op` with two warpgroups (256 threads, 64 of every 128
    rows each): a wgmma product (_wgmma_product) with M a multiple of 128 (attention's
    128-query-row tiles, 128-row GEMM tiles). Each thread then holds half the accumulators, so
    ptxas has room for two CTAs an SM, and one warpgroup's softmax or epilogue overlaps the
    other's tensor-core work (tileiras takes 256 threads for these; timed on an H100,
    benchmarks/results/gpu_only.md)."""
    return _wgmma_product(op, 256)


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
    if batches == 1 and rows % warps == 0 and height == 16 and _row_statistics(lw, op, m):
        # each warp whole rows: a row's max / sum stays within a lane quad (matmul keeps the
        # product in its fragments, see _stays_in_fragments); wgmma's layout is one such
        layout = MmaAcc(1, m, n, lw.T, (1, warps, 1), height)
        _broadcasts_wanted_in(lw, op.results[0], layout)
        return layout
    if wgmma_fits(lw, op):
        return MmaAcc(1, m, n, lw.T, (1, warps, 1), 16)
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


def _broadcasts_wanted_in(lw, value, layout) -> None:
    """Once per mma: the broadcasts that element-wise ops of its product read, directly or
    through element-wise ops of broadcasts and splats (attention's causal mask), are built
    straight in the product's layout (`Lowerer.wanted`), so the product never leaves it."""
    key = ("broadcasts wanted", value)
    if key in lw._cache:
        return
    lw._cache[key] = True
    uses = _uses(lw)
    shape = tuple(value.type.shape)
    flow, work = {value}, [value]
    while work:
        for op in uses.get(work.pop(), ()):
            if not (_ROLES.get(op.name) == KEEPS or _layout_free(op)) \
                    or tuple(op.results[0].type.shape) != shape:
                continue
            for operand in op.operand_values:
                operand = lw.forward.get(operand, operand)
                if operand in flow:
                    continue
                for source in _outside_sources(lw, operand, shape) or ():
                    if _ROLES.get(source.name) == BROADCASTS:
                        lw.wanted.setdefault(source.results[0], layout)
            if op.results[0] not in flow:
                flow.add(op.results[0])
                work.append(op.results[0])


def _row_statistics(lw, op, m: int) -> bool:
    """Whether mma `op` is attention's first product (reduced along its rows, see
    reduced_along_rows) or its second, whose A is computed from such a product of the same rows
    (then both keep whole rows in each warp, and the rows' statistics scale its accumulator in
    registers)."""
    key = ("row statistics", op)
    if key not in lw._cache:
        lw._cache[key] = False  # a product feeding its own A (through a loop) is not one
        found = reduced_along_rows(lw, op.results[0])
        if not found:
            lhs = op.operands["lhs"]
            found = any(is_mma(p) and p is not op and p.results[0].type.shape[-2] == m
                        and len(p.results[0].type.shape) == 2 and _row_statistics(lw, p, m)
                        for p in _producers(lw, lhs))
        lw._cache[key] = found
    return lw._cache[key]


def carried_mma_layout(lw, body, index):
    """The accumulator layout for loop-carried value `index` (of a `for` body): the one the body's
    mmaf produces when that mmaf takes the carried value as its accumulator and its result is
    what `continue` carries on; else None (the value stays Cyclic)."""
    if not body.ops or body.ops[-1].spec.exit is not Exit.NEXT:
        return None
    value = body.ops[-1].operand_values[index]
    value = lw.forward.get(value, value)
    op = value.owner
    if not hasattr(op, "name") or _ROLES.get(op.name) != MMA or op in lw.dead:
        return None
    if not _scaled_carry(lw, op.operands["acc"], body.args[1 + index], op.results[0].type.shape):
        return None
    return mma_layout(lw, op)


def _row_statistic(lw, statistics, found: list, value, depth: int) -> bool:
    """Whether `value` is carried_row_layout's kind of row statistic; the reductions it goes
    through are added to `found`."""
    value = lw.forward.get(value, value)
    if value in statistics or _splat(lw, value):
        return True
    op = value.owner
    if depth > 8 or not hasattr(op, "name") or op in lw.dead:
        return False
    role = _ROLES.get(op.name)
    if role == REDUCES:
        found.append(op)
        return True
    if role == KEEPS or _layout_free(op):
        return all(_row_statistic(lw, statistics, found, v, depth + 1) for v in op.operand_values)
    return False


def carried_row_layout(lw, body, index):
    """The layout for loop-carried value `index` (of a `for` body) when `continue` carries on a
    row statistic of an mma product kept in fragments (attention's running max and sum): an
    element-wise function, through reshapes, of carried values like it, splats and reductions
    along the rows of the product, whose accumulator layout gives every warp whole rows. That is the
    reductions' Sliced layout, so the statistic never goes through shared memory; else None."""
    from .layout import MmaAcc, Sliced
    if not body.ops or body.ops[-1].spec.exit is not Exit.NEXT:
        return None
    carried = body.args[1 + index]
    # the loop's other statistics of the same shape (the sum reads the running max)
    statistics = {arg for arg in body.args[1:] if arg.type == carried.type}
    found = []
    if not _row_statistic(lw, statistics, found, body.ops[-1].operand_values[index], 0) \
            or not found:
        return None
    layouts = {}
    for reduce_op in found:
        source = lw.forward.get(reduce_op.operand_values[0], reduce_op.operand_values[0])
        shape = tuple(source.type.shape)
        mmas = [op for op in _producers(lw, source) if is_mma(op)]
        if len(mmas) != 1 or reduce_op.attrs.get("dim") != len(shape) - 1:
            return None
        layout = mma_layout(lw, mmas[0])
        if not isinstance(layout, MmaAcc) or layout.grid != (1, lw.T // 32, 1) \
                or tuple(mmas[0].results[0].type.shape) != shape:
            return None
        sliced = Sliced(layout, shape, len(shape) - 1)
        layouts[sliced.key()] = sliced
    if len(layouts) != 1:
        return None
    [sliced] = layouts.values()
    return sliced if sliced.count == carried.type.num_elements else None


def _producers(lw, value, depth=0) -> list:
    """The ops `value` is computed from through element-wise ops and reshapes (itself included),
    stopping at ops of other kinds."""
    value = lw.forward.get(value, value)
    op = value.owner
    if depth > 8 or not hasattr(op, "name"):
        return []
    if _ROLES.get(op.name) == KEEPS or _layout_free(op):
        return [op] + [p for v in op.operand_values for p in _producers(lw, v, depth + 1)]
    return [op]


def _scaled_carry(lw, value, carried, shape, depth=0) -> bool:
    """Whether `value` is the carried value, or an element-wise function of it whose other
    operands are splats or broadcasts (the online-softmax `acc * alpha`): those are rebuilt in
    the accumulator layout (elementwise.map_slots), so the carried value can stay in it instead
    of going through shared memory twice per iteration."""
    value = lw.forward.get(value, value)
    if value is carried:
        return True
    op = value.owner
    if depth > 4 or not hasattr(op, "attrs") or not _layout_free(op) \
            or tuple(value.type.shape) != tuple(shape):
        return False
    found = False
    for operand in op.operand_values:
        if _scaled_carry(lw, operand, carried, shape, depth + 1):
            found = True
        elif _outside_sources(lw, operand, tuple(shape)) is None:
            return False
    return found


def reductions_reached(lw, value) -> list:
    """The reductions of `value`, or of values computed from it by element-wise ops, reshapes
    or broadcasts."""
    uses = _uses(lw)
    seen, work, found = {value}, [value], []
    while work:
        for op in uses.get(work.pop(), ()):
            role = _ROLES.get(op.name)
            if role == REDUCES:
                found.append(op)
                continue
            if role in (KEEPS, BROADCASTS) or _layout_free(op):
                for result in op.results:
                    if result not in seen:
                        seen.add(result)
                        work.append(result)
    return found


def reaches_reduction(lw, value) -> bool:
    """Whether `value`, or a value computed from it by element-wise ops, reshapes or
    broadcasts, is reduced."""
    return bool(reductions_reached(lw, value))


def reduced_along_rows(lw, value) -> bool:
    """Whether `value` (an [m, n] product) reaches reductions, each along its last dim only, of
    tiles shaped like it (the online softmax of attention: a row's max and sum)."""
    found = reductions_reached(lw, value)
    shape = tuple(value.type.shape)
    return bool(found) and len(shape) == 2 and all(
        op.attrs.get("dim") == len(shape) - 1
        and all(tuple(v.type.shape) == shape for v in op.operand_values) for op in found)


def _first_call(lw, what: str) -> bool:
    """True the first time `what` is asked for in this function's lowering, False after."""
    key = (what,)
    if key in lw._cache:
        return False
    lw._cache[key] = True
    return True


def scan_anchors(lw) -> None:
    """Once per function: a scan that would take the Lines path (reductions._lines_scan) within
    warps, whose source is made element-wise from broadcasts and splats, gets those broadcasts
    recorded (`Lowerer.wanted`) to be built straight in its Lines layout, so the source arrives
    in it and the scan needs no exchange through shared memory in or out. Only where every value
    between the broadcasts and the scan is read by ops that handle any layout."""
    if not _first_call(lw, "scan anchors") or lw.T % 32:
        return
    scans = [op for op in lw.ops if op not in lw.dead and _ROLES.get(op.name) == SCANS
             and len(op.operand_values) == 1]
    if not scans:
        return  # and the reductions family need not be imported (families.ON_DEMAND)
    from .layout import Lines
    from .reductions import _exact_any_order, _lines_group
    for op in scans:
        if not _exact_any_order(op):
            continue
        source = lw.forward.get(op.operand_values[0], op.operand_values[0])
        shape, dim = tuple(source.type.shape), op.attrs["dim"]
        if source.type.num_elements % lw.T or shape[dim] % 32:
            continue  # shorter lines share warps: their reductions across lines cost more
        chosen = _lines_group(lw, shape, dim, source.type.element)
        if chosen is None or chosen[1] > 32:
            continue
        found = _outside_sources(lw, source, shape)
        if not found or any(_ROLES.get(o.name) != BROADCASTS or o.results[0] in lw.wanted
                            for o in found):
            continue
        if not _cone_free(lw, [source], found, (KEEPS, REDUCES, STORES, SCANS)):
            continue
        # lanes along the scanned dim (run 1 where it fits a warp): the flow's other ops then
        # find a line's elements in one warp and the other dims across slots and warps
        try:
            layout = Lines(shape, dim, lw.T, min(shape[dim], 32))
        except ValueError:
            continue
        for o in found:
            lw.wanted[o.results[0]] = layout


def _cone_free(lw, ends, found, roles) -> bool:
    """Every value from the ops `found` (built in a chosen layout) to the values `ends` is read
    only by ops of `roles` or element-wise ones, so building them in that layout adds no
    conversion."""
    uses = _uses(lw)
    starts = {o.results[0] for o in found}
    cone, work = set(), list(ends)
    while work:
        value = work.pop()
        value = lw.forward.get(value, value)
        if value in cone or value in starts or _splat(lw, value):
            continue
        cone.add(value)
        for user in uses.get(value, ()):
            if not (_ROLES.get(user.name) in roles or _layout_free(user)):
                return False
        work += list(value.owner.operand_values)
    return True


def pointer_anchors(lw) -> None:
    """Once per function: a gather straight into a scatter (a load_ptr_tko whose value only a
    store_ptr_tko stores), every pointer, mask and padding tile of both made from broadcasts
    (index tiles), splats and element-wise ops, is built in Rows(row, 32 / size lanes): a warp
    covers 32 / lanes rows of one sector each. Accesses along the row touch as many sectors as
    Cyclic's; accesses down the columns (a transposing scatter) touch fewer."""
    if not _first_call(lw, "pointer anchors"):
        return
    from .layout import Cyclic, Rows
    from . import dtypes
    if lw.T % 32:
        return
    uses = _uses(lw)
    for op in lw.ops:
        if op in lw.dead or _ROLES.get(op.name) != POINTER_LOADS:
            continue
        value = op.results[0]
        readers = uses.get(value, ())
        if len(readers) != 1 or _ROLES.get(readers[0].name) != POINTER_STORES:
            continue
        store = readers[0]
        if lw.forward.get(store.operands["value"], store.operands["value"]) is not value:
            continue
        shape = tuple(value.type.shape)
        count = value.type.num_elements
        size = dtypes.byte_size(value.type.element)
        if len(shape) < 2 or count % lw.T or size > 32:
            continue
        lanes = 32 // size
        try:
            layout = Rows(count, lw.T, shape[-1], lanes)
        except ValueError:
            continue
        if (layout.table(lw.T) == Cyclic(count, lw.T).table(lw.T)).all():
            continue
        ends = [op.operands.get(name) for name in ("source", "mask", "paddingValue")]
        ends += [store.operands.get(name) for name in ("destination", "mask")]
        ends = [v for v in ends if v is not None]
        found = []
        for end in ends:
            more = _outside_sources(lw, end, shape)
            if more is None:
                found = None
                break
            found += more
        if not found or any(_ROLES.get(o.name) != BROADCASTS or o.results[0] in lw.wanted
                            for o in found):
            continue
        if not _cone_free(lw, ends, found, (KEEPS, OFFSETS, POINTER_LOADS, POINTER_STORES)):
            continue
        for o in found:
            lw.wanted[o.results[0]] = layout
