"""Chunked regions: per-element work on a large tile as one PTX loop over register chunks.

A tile of N elements over T threads normally takes N/T registers per thread, and every op is
unrolled over them (lowerer.py), so PTX size and ptxas time grow with N. A region of per-element
work on tiles over CHUNK_THRESHOLD elements per thread -- loads and stores through views or
pointer tiles, ops the op table marks `per_element` (element-wise, compares, casts, select,
pointer offsets), iota, reading splat constants and scalar broadcasts -- whose values nothing
else reads, is lowered once instead, as the body of a loop: iteration i handles the elements
i*C*T + k*T + t (slot k < C of thread t), so each tile takes C registers and the code is emitted
once, whatever N. runtime/LAYOUTS.md, "Chunked regions".
"""
from __future__ import annotations


from tilebc.ir.module import Function, Op, Value
from tilebc.ir.types import GatherScatterViewType, TileType, TokenType
from tilebc.ops.table import by_mnemonic
from tilebc.record import Struct  # not dataclasses: start-up time

from .common import Tile, Token, needs_barrier

# Elements per thread above which a region is chunked (two chunks' worth stay unrolled). No
# fixture has a chunkable region over 16 per thread, so every kernel we carry keeps its code;
# the H100 model puts a chunked 16K-element copy-and-compute at the unrolled one's time.
CHUNK_THRESHOLD = 32
# Slots per chunk (registers per tile per thread in the loop body): large enough to keep the
# loop overhead small, small enough that a chain of ops stays far from 255 registers.
CHUNK_SLOTS = 16

# What each op other than a per-element one is to a region: its memory ends, or (when it makes a
# tile of one value everywhere) a source the loop body reads as it is.
_ROLES = by_mnemonic({"load_view_tko": "load", "store_view_tko": "store",
                      "load_ptr_tko": "load_ptr", "store_ptr_tko": "store_ptr", "iota": "indices",
                      "constant": "splat", "broadcast": "spread", "reshape": "spread"},
                     "chunked regions")
_MEMORY = ("load", "store", "load_ptr", "store_ptr")
_MEMBERS = _MEMORY + ("indices",)


class Region(Struct):
    _fields = ("ops", "shape", "count", "slots")

    def __init__(self, ops: list[Op], shape: tuple, count: int, slots: int):
        self.ops = ops  # in block order; the last is where the loop is emitted
        self.shape = shape  # of its large tiles
        self.count = count  # elements of its large tiles
        self.slots = slots  # C: slots per thread per chunk


class Chunk(Struct):
    """The chunk being lowered: tiles of `count` elements have `slots` slots per thread."""

    _fields = ("count", "slots", "shift", "base")

    def __init__(self, count: int, slots: int, shift: list[str | None], base: str):
        self.count = count
        self.slots = slots
        self.shift = shift  # per tile dim: .b64 start of this chunk (None: always 0)
        self.base = base  # u32: the chunk's first linear element index


def role(op: Op) -> str | None:
    """What an op a region may hold is to it: "map" (per element), "indices" (iota) or a memory op
    ("load", "store" through views, "load_ptr", "store_ptr" through pointer tiles); None for
    other ops."""
    if op.spec.per_element:
        return "map"
    kind = _ROLES.get(op.name)
    return kind if kind in _MEMBERS else None


def _elements(op, canon) -> tuple:
    """What identifies the elements a memory op touches (same value: the same elements)."""
    if role(op) in ("load", "store"):
        return (canon(op.operands["view"]),) + tuple(canon(v) for v in op.operands["index"])
    pointers = op.operands["source"] if role(op) == "load_ptr" else op.operands["destination"]
    return (canon(pointers),)


def _producer(value: Value) -> Op | None:
    """The op that makes `value` (None for a block or function argument)."""
    return value.owner if isinstance(value.owner, Op) else None


def _is_uniform(op: Op | None, canon) -> bool:
    """The op makes a tile holding one value in every element (lowered as one register)."""
    kind = _ROLES.get(op.name) if op is not None else None
    if kind == "splat":
        return bool(op.attrs["value"].is_splat)
    if kind == "spread":  # a scalar broadcast or reshaped to the tile
        source = canon(op.operand_values[0])
        return isinstance(source.type, TileType) and source.type.num_elements == 1
    return False


def plan(function: Function, threads: int, forward=None, dead=(), ops=None) -> dict[Op, Region]:
    """Every op lowered as part of a chunked region, with its region. `ops`: the function's
    ops in pre-order, where the caller has them."""
    forward = forward or {}

    def canon(value: Value) -> Value:
        return forward.get(value, value)
    ops = list(function.walk()) if ops is None else ops
    blocks = [function.body]
    for op in ops:
        blocks.extend(block for region in op.regions for block in region.blocks)
    if not _any_large(ops, blocks, threads):
        return {}  # the usual case: no tile to chunk, so no need to trace uses
    users: dict[Value, list[Op]] = {}
    for op in ops:
        if op in dead:
            continue
        for value in op.operand_values:
            users.setdefault(canon(value), []).append(op)
    planned: dict[Op, Region] = {}
    for block in blocks:
        planned.update(_plan_block(block, threads, canon, users, dead))
    return planned


def _any_large(ops, blocks, threads) -> bool:
    """Whether any op result or block argument (every value an op can read, forwarded or not)
    is a tile of over CHUNK_THRESHOLD elements per thread."""
    bound = CHUNK_THRESHOLD * threads  # ceil(n / threads) > CHUNK_THRESHOLD <=> n > bound
    for values in [op.results for op in ops] + [block.args for block in blocks]:
        for value in values:
            if isinstance(value.type, TileType) and value.type.num_elements > bound:
                return True
    return False


def _plan_block(block, threads, canon, users, dead) -> dict[Op, Region]:
    position = {op: i for i, op in enumerate(block.ops)}
    top = {}  # every op nested in this block -> its ancestor in this block
    for op in block.ops:
        for inner in op.walk():
            top[inner] = op

    def large(value) -> bool:
        t = value.type
        return (isinstance(t, TileType) and t.num_elements > 1
                and -(-t.num_elements // threads) > CHUNK_THRESHOLD)

    def view_ok(op) -> bool:
        return not isinstance(canon(op.operands["view"]).type, GatherScatterViewType)

    members = {}
    for op in block.ops:
        if op in dead:
            continue
        kind = role(op)
        if kind == "load" and large(op.results[0]) and view_ok(op):
            members[op] = kind
        elif kind == "store" and large(canon(op.operands["tile"])) and view_ok(op):
            members[op] = kind
        elif kind in ("map", "indices", "load_ptr") and any(large(v) for v in op.results):
            members[op] = kind
        elif kind == "store_ptr" and large(canon(op.operands["value"])):
            members[op] = kind
    parent = {op: op for op in members}

    def find(op):
        while parent[op] is not op:
            parent[op] = parent[parent[op]]
            op = parent[op]
        return op
    bad = set()
    for op in members:
        for value in map(canon, op.operand_values):
            if not large(value):
                continue
            producer = _producer(value)
            if producer in members:
                parent[find(op)] = find(producer)
            elif not _is_uniform(producer, canon):
                bad.add(op)  # a large tile made another way (iota, reduce, block argument)
        for value in op.results:
            if large(value) and any(user not in members for user in users.get(value, ())):
                bad.add(op)  # read by something that needs the whole tile
    groups: dict[Op, list[Op]] = {}
    for op in members:
        groups.setdefault(find(op), []).append(op)
    regions = []
    for ops in groups.values():
        ops.sort(key=position.get)
        region = _region(ops, threads, canon, large)
        if region is not None and not bad.intersection(ops):
            regions.append(region)
    # each region's loop stands where its last op stood: what it reads must be lowered before
    # that, and nothing before it may read what the region makes (its tokens)
    changed = True
    while changed:
        changed = False
        anchors = {op: position[r.ops[-1]] for r in regions for op in r.ops}
        for region in list(regions):
            if not _placeable(region, position, top, anchors, canon, users):
                regions.remove(region)
                changed = True
    return {op: region for region in regions for op in region.ops}


def _region(ops, threads, canon, large) -> Region | None:
    shapes = set()
    for op in ops:
        for value in list(op.results) + [canon(v) for v in op.operand_values]:
            if large(value):
                shapes.add(tuple(value.type.shape))
    if len(shapes) != 1:
        return None
    shape = shapes.pop()
    count = 1
    for dim in shape:
        if dim & (dim - 1):
            return None  # the chunk's start is unravelled with shifts and masks
        count *= dim
    if count % threads or count >= 1 << 31:
        return None
    slots = CHUNK_SLOTS
    while (count // threads) % slots:
        slots //= 2
    by_op = set(ops)
    for op in ops:
        token = op.operands.get("token") if role(op) in _MEMORY else None
        producer = _producer(canon(token)) if token is not None else None
        if producer in by_op:
            # ordered after a memory op of the region: safe only on the very same elements,
            # which this thread reads and writes in the same iteration
            if role(producer) not in _MEMORY \
                    or _elements(producer, canon) != _elements(op, canon):
                return None
    return Region(ops, shape, count, slots)


def _placeable(region, position, top, anchors, canon, users) -> bool:
    anchor = position[region.ops[-1]]
    inside = set(region.ops)
    for op in region.ops:
        for value in map(canon, op.operand_values):
            producer = _producer(value)
            if producer is None or producer in inside:
                continue
            if anchors.get(producer, -1) > anchor:
                return False  # made by another region's loop, which comes later
        for value in op.results:
            for user in users.get(value, ()):
                if user not in inside and position.get(top.get(user), anchor + 1) <= anchor:
                    return False
    return True


def emit(lw, region: Region) -> None:
    """The region's loop; each member op is lowered in it by lw.lower_op with lw.chunk set."""
    w = lw.w
    members = [op for op in region.ops if op not in lw.dead]
    inside = set(members)
    # memory ops ordered after earlier memory ops outside the region: one barrier before the loop
    for op in members:
        token = op.operands.get("token") if role(op) in _MEMORY else None
        if token is not None and _producer(lw.forward.get(token, token)) not in inside \
                and needs_barrier(lw, token):
            lw.barrier()
            break
    step = region.slots * lw.T
    base = w.reg("b32")
    w(f"mov.u32 {base}, 0")
    head = w.label("chunk")
    w.place(head)
    shift = []
    inner = region.count
    for dim in region.shape:
        inner //= dim
        if dim == 1 or inner * dim <= step:
            shift.append(None)  # this coordinate's bits lie below the chunk size: always 0
            continue
        narrow = base
        if inner > 1:
            narrow = w.reg("b32")
            w(f"shr.u32 {narrow}, {base}, {inner.bit_length() - 1}")
        if inner * dim < region.count:  # not the outermost dim: keep its bits only
            masked = w.reg("b32")
            w(f"and.b32 {masked}, {narrow}, {dim - 1}")
            narrow = masked
        wide = w.reg("b64")
        w(f"cvt.u64.u32 {wide}, {narrow}")
        shift.append(wide)
    lw.chunk = Chunk(region.count, region.slots, shift, base)
    try:
        with lw.fresh_scope():
            for op in members:
                lw.lower_op(op)
    finally:
        lw.chunk = None
    more = w.reg("pred")
    w(f"add.u32 {base}, {base}, {step}")
    w(f"setp.lt.u32 {more}, {base}, {region.count}")
    w(f"@{more} bra.uni {head}")
    after_loop = Token(True, w.barriers)  # every access of the loop is written before here
    for op in members:
        for value in op.results:
            if isinstance(value.type, TokenType):
                lw.set(value, after_loop)


def lower_load(lw, op) -> None:
    """One chunk of a view load (no barrier: see emit)."""
    from .memory import padding_register, qualifiers, view_addresses
    view = lw.get(op.operands["view"])
    result_type = op.results[0].type
    element = result_type.element
    padding = padding_register(lw, element, getattr(view.type, "padding_value", None))
    quals = qualifiers(op, store=False)
    regs = []
    for address, ok in view_addresses(lw, op, view, op.operands["index"], result_type.shape,
                                      slots=range(lw.chunk.slots), shift=lw.chunk.shift):
        regs.append(lw.load(lw.pointer_space, address, element, quals, predicate=ok,
                            default=padding))
    lw.set(op.results[0], Tile(result_type, regs))


def lower_store(lw, op) -> None:
    """One chunk of a view store (tiles here fill whole rounds of threads: no owner guard)."""
    from .memory import qualifiers, view_addresses
    tile = lw.get(op.operands["tile"])
    view = lw.get(op.operands["view"])
    quals = qualifiers(op, store=True)
    addresses = view_addresses(lw, op, view, op.operands["index"], tile.type.shape,
                               slots=range(lw.chunk.slots), shift=lw.chunk.shift)
    for k, (address, ok) in enumerate(addresses):
        lw.store(lw.pointer_space, address, tile.slot(k), tile.element, quals, predicate=ok)


def lower_iota(lw, op) -> None:
    """One chunk of an iota: the chunk's base plus the slot's index within the chunk."""
    from .shapes import iota_value
    w = lw.w
    result_type = op.results[0].type
    regs = []
    for k in range(lw.chunk.slots):
        index = w.reg("b32")
        w(f"add.u32 {index}, {lw.elem_index(result_type.num_elements, k)}, {lw.chunk.base}")
        regs.append(iota_value(lw, index, result_type.element))
    lw.set(op.results[0], Tile(result_type, regs))


# chunk lowerings of their own; the other members' hooks lower them over Lowerer.slots (C) slots
HOOKS = {"load": lower_load, "store": lower_store, "indices": lower_iota}


def obstacle(function: Function, threads: int, op: Op) -> Op | None:
    """An op that keeps `op`'s large tiles from being chunked: one that makes or reads such a
    tile as a whole (reduce, reshape, permute, mma, ...), found through the per-element ops and
    memory ops connected to `op`; None when there is none (the tile's shape or memory order is
    what keeps it whole)."""
    users: dict[Value, list[Op]] = {}
    for inner in function.walk():
        for value in inner.operand_values:
            users.setdefault(value, []).append(inner)

    def large(value) -> bool:
        t = value.type
        return (isinstance(t, TileType) and t.num_elements > 1
                and -(-t.num_elements // threads) > CHUNK_THRESHOLD)
    seen, pending = {op}, [op]
    while pending:
        current = pending.pop()
        if role(current) is None and current is not op:
            return current
        values = [v for v in list(current.results) + current.operand_values if large(v)]
        for value in values:
            producer = _producer(value)
            neighbours = list(users.get(value, ()))
            if producer is not None and not _is_uniform(producer, lambda v: v):
                neighbours.append(producer)
            for other in neighbours:
                if other not in seen:
                    seen.add(other)
                    pending.append(other)
    return None
