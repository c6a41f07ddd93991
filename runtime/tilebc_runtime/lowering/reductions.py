"""reduce and scan with a combiner region.

reduce operands first go to shared memory (every thread writes its slots at their linear index).

reduce: groups of P lanes (P a power of two <= 32, inside one warp) each own a work item - one
output, or with S > 1 one of S segments of an output's reduced dimension. Lane p of a group walks
its contiguous chunk of the segment in a uniform loop, then the group combines its lanes in a
tree of shfl.sync.down steps; every combine keeps the lower lane's value on the left, so
the combiner is applied in element order (any parenthesisation of it; Tile IR reduction order is
unspecified, and this stays exact for associative non-commutative combiners). A single output
computed by one warp is then read from the group's first lane by every thread; otherwise lane 0
of each group writes its value to shared memory and each thread combines the S partials of its
own result slots, in order.
P and S come from a small cost model (serial steps + shuffle steps per thread).

scan: log-step (Hillis-Steele) in the interpreter's exact combine order, one step per power of two
below the scanned length: shfl.sync.up/down when every scanned line sits inside a warp, else an
exchange through two alternating shared-memory buffers (one barrier per step). A combiner that
gives the same bits in any order (one commutative integer op) instead runs along any dimension
in a Lines layout (layout.py): a serial scan of each thread's run, log-step shuffles across the
lanes of a line, one pass across warps through shared memory. A cyclic tile whose lines' lanes
would all read one bank moves in and back out through a padded buffer (_lines_padding).

Ordered reductions whose layout has no cheap plan move once into a Lines layout along the
reduced dimension (runs of neighbours, lanes in element order) rather than walking shared memory.
"""
from __future__ import annotations

from ..lazy_numpy import np

from tilebc.ir.types import TileType
from tilebc.ops.table import by_mnemonic

from . import dtypes, intdiv
from .layout import UNIFORM, Sliced, register_map
from .common import Frame, Tile, immediate
from .registry import lowers


# combiners a full-warp butterfly can hand to one redux.sync (sm_80+; 32-bit integers)
_REDUX = by_mnemonic({"addi": "add.s32", "andi": "and.b32", "ori": "or.b32", "xori": "xor.b32"},
                     "warp reductions in one redux.sync")


def _redux(lw, op, sources, masks):
    """The redux.sync form for a commutative reduction whose butterflies span the whole warp, or
    None."""
    if lw.arch < 80 or len(sources) != 1 or sorted(masks) != [1, 2, 4, 8, 16]:
        return None
    if dtypes.name_of(sources[0].element) != "i32":  # narrower ints wrap at their width
        return None
    return _REDUX.get(op.regions[0].blocks[0].ops[0].name)


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


def _scan(lw, op):
    """Hillis-Steele: for step = 1, 2, 4, ... < length, every element at position p >= step
    (reverse: p + step < length) becomes combine(element p - step (reverse: p + step),
    element p), both read before the step; the others keep their value. This is the
    interpreter's order (tilebc.interp.ops.shape._scan), so float results agree bit for bit."""
    w = lw.w
    tiles = [lw.get(v) for v in op.operand_values]
    elements = [t.element for t in tiles]
    dim = op.attrs["dim"]
    shape = tiles[0].type.shape
    length = shape[dim]
    inner = 1
    for d in shape[dim + 1:]:
        inner *= d
    count = tiles[0].count
    reverse = bool(op.attrs.get("reverse"))
    slots = lw.slots(count)
    values = [[t.slot(k) for k in range(slots)] for t in tiles]
    # shuffles when every scanned line (length x inner elements, a divisor of 32) lies in one
    # warp, slot by slot: lane l holds element (k*T + l) mod count of a warp-aligned block
    shuffles = lw.T % 32 == 0 and 32 % (length * inner) == 0 and \
        (count % 32 == 0 or 32 % count == 0)
    offsets = None
    if not shuffles and length > 1:
        sizes = [lw.smem_size_of(t.type) for t in tiles]
        offsets = lw.reserve_smem(sizes + sizes)  # two buffers: one barrier per step
    step, parity = 1, 0
    while step < length:
        delta = step * inner
        if not shuffles:
            buffers = offsets[parity * len(tiles):(parity + 1) * len(tiles)]
            for regs, tile, offset in zip(values, tiles, buffers):
                lw.smem_write(Tile(tile.type, regs), offset)
            lw.barrier()
        new_values = [[] for _ in tiles]
        for k in range(slots):
            position = lw.multi_index(shape, k)[dim]
            valid = w.reg("pred")
            if reverse:
                w(f"setp.lt.u32 {valid}, {position}, {length - step}")
            else:
                w(f"setp.ge.u32 {valid}, {position}, {step}")
            mine = [regs[k] for regs in values]
            if shuffles:
                others = [lw.shuffle(reg, element, "down" if reverse else "up", delta)
                          for reg, element in zip(mine, elements)]
            else:
                e = lw.elem_index(count, k)
                moved, index = w.reg("b32"), w.reg("b32")
                w(f"{'add' if reverse else 'sub'}.u32 {moved}, {e}, {delta}")
                w(f"selp.b32 {index}, {moved}, {e}, {valid}")  # in range: own element
                others = [lw.smem_read(offset, index, element)
                          for offset, element in zip(buffers, elements)]
            combined = _combine(lw, op, others, mine)
            for i, (old, new, element) in enumerate(zip(mine, combined, elements)):
                new_values[i].append(lw.select(valid, new, old, element))
        values = new_values
        step, parity = step * 2, 1 - parity
    if offsets is not None:
        lw.barrier()  # the buffers are free for the next op's exchange
    for result, regs in zip(op.results, values):
        lw.set(result, Tile(result.type, regs))


def choose_tree(threads: int, outputs: int, length: int):
    """(P lanes per group, S segments per output) minimising serial + shuffle steps per thread."""
    best = None
    warps = threads // 32
    for log_p in range(6):
        lanes = 1 << log_p
        segment_options = [1] if lanes < 32 else [1 << i for i in range(warps.bit_length())
                                                  if (1 << i) <= warps]
        for segments in segment_options:
            groups = threads // lanes
            items = outputs * segments
            if segments > 1 and items > groups:
                continue
            rounds = -(-items // groups)
            chunk = -(-length // (lanes * segments))
            cost = rounds * (chunk + 2 * log_p) + (-(-outputs // threads)) * (segments - 1)
            if segments > 1 or (outputs > 1 and lanes > 1):
                cost += 4  # the shared-memory round trip and barrier
            key = (cost, -lanes, segments)
            if best is None or key < best[0]:
                best = (key, lanes, segments)
    return best[1], best[2]


def shuffle_xor(lw, reg: str, element, offset: int) -> str:
    """The value of `reg` in lane (laneid ^ offset) of the warp (all 32 lanes take part)."""
    return lw.shuffle(reg, element, "bfly", offset)


def _u32_div(lw, reg: str, divisor: int) -> str:
    return intdiv.udiv(lw.w, reg, divisor)


def _u32_rem(lw, reg: str, divisor: int) -> str:
    return intdiv.urem(lw.w, reg, divisor)


def _tree_buffers(lw, op):
    """Bytes of the shared-memory buffers _tree_reduce takes: the operands' copies, then (where
    groups of lanes leave partials) one partial per work item and operand."""
    length = op.operand_values[0].type.shape[op.attrs["dim"]]
    outputs = op.results[0].type.num_elements
    segments = choose_tree(lw.T, outputs, length)[1]
    sizes = [lw.smem_size_of(v.type) for v in op.operand_values]
    if not (outputs == 1 and segments == 1):
        sizes += [outputs * segments * dtypes.byte_size(v.type.element)
                  for v in op.operand_values]
    return sizes


def _tree_reduce(lw, op):
    w = lw.w
    # the walk reads shared memory: sources are written there from the layout they are in
    sources = [lw.get(v, any_layout=True) for v in op.operand_values]
    elements = [s.element for s in sources]
    dim = op.attrs["dim"]
    shape = sources[0].type.shape
    length = shape[dim]
    inner = 1
    for d in shape[dim + 1:]:
        inner *= d
    result_types = [r.type for r in op.results]
    outputs = result_types[0].num_elements
    lanes, segments = choose_tree(lw.T, outputs, length)
    items = outputs * segments
    groups = lw.T // lanes
    rounds = -(-items // groups)
    chunk = -(-length // (lanes * segments))
    share = not (outputs == 1 and segments == 1)
    offsets = lw.reserve_smem(_tree_buffers(lw, op))
    for source, offset in zip(sources, offsets):
        lw.smem_write(source, offset)
    lw.barrier()
    identities = list(op.attrs["identities"])
    tid = lw.tid()
    lane = _u32_rem(lw, tid, lanes) if lanes > 1 else lw.const_u32(0)
    group = _u32_div(lw, tid, lanes)
    finals = None
    for round_ in range(rounds):
        item = w.reg("b32")
        w(f"add.u32 {item}, {group}, {round_ * groups}")
        owner = None
        if (round_ + 1) * groups > items:  # some groups have no item this round: redo the last
            owner = w.reg("pred")
            w(f"setp.lt.u32 {owner}, {item}, {items}")
            w(f"min.u32 {item}, {item}, {items - 1}")
        output = _u32_div(lw, item, segments)
        segment = _u32_rem(lw, item, segments) if segments > 1 else None
        # first element of the output: (output / inner) * length * inner + output % inner
        base = w.reg("b32")
        if inner == 1:
            w(f"mul.lo.u32 {base}, {output}, {length}")
        else:
            w(f"mad.lo.u32 {base}, {_u32_div(lw, output, inner)}, {length * inner}, "
              f"{_u32_rem(lw, output, inner)}")
        start = w.reg("b32")
        if segment is not None:
            w(f"mad.lo.u32 {start}, {segment}, {lanes}, {lane}")
            w(f"mul.lo.u32 {start}, {start}, {chunk}")
        else:
            w(f"mul.lo.u32 {start}, {lane}, {chunk}")
        accs = [_identity_register(lw, ident, e) for ident, e in zip(identities, elements)]
        j = w.reg("b32")
        w(f"mov.u32 {j}, 0")
        top = w.label("reduce")
        w.place(top)
        position, valid, clamped, index = w.reg("b32"), w.reg("pred"), w.reg("b32"), w.reg("b32")
        w(f"add.u32 {position}, {start}, {j}")
        w(f"setp.lt.u32 {valid}, {position}, {length}")
        w(f"min.u32 {clamped}, {position}, {length - 1}")
        w(f"mad.lo.u32 {index}, {clamped}, {inner}, {base}")
        loaded = [lw.smem_read(off, index, e) for off, e in zip(offsets, elements)]
        combined = _combine(lw, op, accs, loaded)
        for acc, new, element in zip(accs, combined, elements):
            chosen = lw.select(valid, new, acc, element)
            w(f"mov.{dtypes.mov_type(dtypes.reg_class(element))} {acc}, {chosen}")
        w(f"add.u32 {j}, {j}, 1")
        again = w.reg("pred")
        w(f"setp.lt.u32 {again}, {j}, {chunk}")
        w(f"@{again} bra.uni {top}")
        values = accs
        offset = lanes // 2
        while offset:  # a down tree: the group's first lane ends with the whole segment
            others = [lw.shuffle(v, e, "down", offset) for v, e in zip(values, elements)]
            values = _combine(lw, op, values, others)
            offset //= 2
        if not share:
            if lanes > 1:
                source = w.reg("b32")
                w(f"and.b32 {source}, {tid}, {31 & ~(lanes - 1)}")
                values = [lw.shuffle(v, e, "idx", source) for v, e in zip(values, elements)]
            finals = values
            continue
        write = w.reg("pred")
        w(f"setp.eq.u32 {write}, {lane}, 0")
        if owner is not None:
            w(f"and.pred {write}, {write}, {owner}")
        for value, element, off in zip(values, elements, offsets[len(sources):]):
            lw.store("shared", lw.smem_address(off, item, element), value, element,
                     predicate=write)
    if share:
        lw.barrier()
        finals = [[] for _ in sources]
        for k in range(lw.slots(outputs)):
            e = lw.elem_index(outputs, k)
            first = w.reg("b32")
            w(f"mul.lo.u32 {first}, {e}, {segments}")
            accs = [lw.smem_read(off, first, el) for off, el in zip(offsets[len(sources):], elements)]
            for s_index in range(1, segments):
                index = w.reg("b32")
                w(f"add.u32 {index}, {first}, {s_index}")
                more = [lw.smem_read(off, index, el)
                        for off, el in zip(offsets[len(sources):], elements)]
                accs = _combine(lw, op, accs, more)
            for i, acc in enumerate(accs):
                finals[i].append(acc)
    else:
        finals = [[v] for v in finals]
    lw.barrier()
    for result, regs in zip(op.results, finals):
        lw.set(result, Tile(result.type, regs))


def commutative(op) -> bool:
    """The combiner region is one commutative op of its two arguments, yielded."""
    if len(op.operand_values) != 1:
        return False
    block = op.regions[0].blocks[0]
    if len(block.ops) != 2 or len(block.args) != 2:
        return False
    body, end = block.ops
    return (body.spec.commutative and end.spec.terminator
            and sorted(map(id, body.operand_values)) == sorted(map(id, block.args))
            and list(end.operand_values) == [body.results[0]])


# _plan's answers by (layout key, shape, dim, threads, ordered): a pure function of those, asked
# again for every architecture a kernel is lowered for; callers only read the plans
_PLANS: dict[tuple, tuple | None] = {}
_PLANS_KEPT = 256


def _plan(layout, shape, dim, threads, ordered):
    """_work_out_plan's answer, memoised (the layout's key names its table)."""
    key = (layout.key(), tuple(shape), dim, threads, ordered)
    try:
        return _PLANS[key]
    except KeyError:
        pass
    plan = _work_out_plan(layout, shape, dim, threads, ordered)
    if len(_PLANS) >= _PLANS_KEPT:
        _PLANS.clear()
    _PLANS[key] = plan
    return plan


def _work_out_plan(layout, shape, dim, threads, ordered):
    """How a reduction along `dim` of a tile held in `layout` runs in three stages, or None when
    the layout does not allow it with code that is the same for every thread:
    (groups: per output slot group the source slots combined in-thread, in element order,
     masks: xor lane masks of the shuffle butterflies (with `ordered`, the lane whose mask bit
     is clear holds the earlier elements),
     warp_masks: bits of the warp index over which the shared-memory step combines (none: no
     step; with `ordered` lower warps hold earlier elements),
     slot_group: per source slot, its group).
    Worked out on arrays: parts[g, t] holds the sorted element indices partial g of thread t
    combines so far (the same count everywhere, or the plan is rejected)."""
    from .layout import Sliced
    table = layout.table(threads)
    out = Sliced(layout, shape, dim).table(threads)
    length = shape[dim]
    inner = int(np.prod(shape[dim + 1:], dtype=np.int64))
    # in-thread: slots with the same output in every thread (copies of a slot are dropped)
    groups, slot_group, seen_rows, by_output = [], [], {}, {}
    for k in range(table.shape[0]):
        row = table[k].tobytes()
        if row in seen_rows:
            slot_group.append(slot_group[seen_rows[row]])
            continue
        seen_rows[row] = k
        g = by_output.setdefault(out[k].tobytes(), len(groups))
        if g == len(groups):
            groups.append([])
        groups[g].append(k)
        slot_group.append(g)
    if len({len(members) for members in groups}) != 1:
        return None
    outputs = out[[members[0] for members in groups]]  # [groups, threads]
    if len(groups) > 1 and (np.diff(np.sort(outputs, axis=0), axis=0) == 0).any():
        return None  # two groups feed one output in some thread: grouping differs by thread
    for members in groups:
        order = np.argsort(table[members], axis=0, kind="stable")
        if not (order == order[:, :1]).all():
            return None  # the element order of a thread's slots differs between threads
        members[:] = [members[i] for i in order[:, 0]]
    parts = np.stack([table[members].T for members in groups])  # [groups, threads, n]
    if (np.diff(parts, axis=2) == 0).any():
        return None  # a copy in some threads only

    def span(values):  # positions along the reduced dim: last - first + 1
        positions = (values // inner) % length
        return positions[..., -1] - positions[..., 0] + 1
    if ordered and (span(parts) != parts.shape[2]).any():
        return None  # a thread's slots of one output must be a run of neighbours
    lanes = np.arange(threads)

    def step(partner):
        """Combine each partial with the partner thread's: True (combined), False (copies or
        other outputs: nothing to do), None (not possible)."""
        nonlocal parts
        if not (outputs == outputs[:, partner]).all():
            return False
        other = parts[:, partner, :]
        if (parts == other).all():
            return False
        joined = np.sort(np.concatenate([parts, other], axis=2), axis=2)
        if (np.diff(joined, axis=2) == 0).any():
            return None  # overlapping parts
        if ordered:
            lower = (lanes < partner)[None, :]
            left = np.where(lower, parts[..., -1], other[..., -1])
            right = np.where(lower, other[..., 0], parts[..., 0])
            if (left >= right).any() or (span(joined) != joined.shape[2]).any():
                return None
        parts = joined
        return True
    masks = []
    for mask in (1, 2, 4, 8, 16):
        done = step(lanes ^ mask)
        if done is None:
            return None
        if done:
            masks.append(mask)
    if parts.shape[2] == length:
        return groups, masks, [], slot_group
    # across warps, the same way over the bits of the warp index: the warps whose parts make
    # up an output differ in those bits only; each warp's part of each output goes to one
    # shared-memory cell, so within a warp all holders of an output must hold the same part
    keys = ((lanes // 32)[None, :] * (int(outputs.max()) + 1) + outputs).ravel()
    flat = parts.reshape(-1, parts.shape[2])
    order = np.argsort(keys, kind="stable")
    same = keys[order][1:] == keys[order][:-1]
    if (flat[order][1:][same] != flat[order][:-1][same]).any():
        return None
    warp_masks, mask = [], 1
    while mask < threads // 32:
        partner = lanes ^ (32 * mask)
        if partner.max() >= threads:
            return None  # warps not a power of two
        done = step(partner)
        if done is None:
            return None
        if done:
            warp_masks.append(mask)
        mask *= 2
    if parts.shape[2] != length:
        return None
    return groups, masks, warp_masks, slot_group


def _plan_cost(plan, operands: int) -> int:
    """Serial steps per thread of an ordered layout plan (per shuffle step a combine and a
    shuffle per operand; without a step across warps, a shuffle per operand to bring the
    result from the group's first lane), in choose_tree's units."""
    groups, masks, warp_masks, _ = plan
    shuffles = -(-operands // 2)
    per_group = max(len(m) for m in groups) - 1 + len(masks) * (1 + shuffles)
    if masks and not warp_masks:
        per_group += shuffles
    return len(groups) * (per_group + (1 << len(warp_masks)) - 1) + (4 if warp_masks else 0)


def _tree_cost(threads: int, outputs: int, length: int) -> int:
    """The same for the general tree: choose_tree's cost plus its shared-memory round trips."""
    lanes, segments = choose_tree(threads, outputs, length)
    groups = threads // lanes
    rounds = -(-outputs * segments // groups)
    chunk = -(-length // (lanes * segments))
    # + the sources' trip through shared memory and the walk's set-up (measured on the model:
    # a [4, 32] argmax is faster in its layout, an [8, 32] one through the tree)
    cost = rounds * (chunk + 2 * (lanes.bit_length() - 1)) + 12
    return cost + (4 if outputs > 1 or segments > 1 else 0)


def _tree(lw, op, values):
    """Combine a list of partials (each a list of registers, one per operand) pairwise,
    neighbours first, so the element order is kept and independent combines come first."""
    while len(values) > 1:
        paired = [_combine(lw, op, a, b) for a, b in zip(values[::2], values[1::2])]
        values = paired + ([values[-1]] if len(values) % 2 else [])
    return values[0]


def _lines_reduce(lw, op) -> bool:
    """An ordered reduction whose operands' layout has no cheap plan: the operands moved into
    a Lines layout along the reduced dimension (each thread a run of neighbours, the lanes of
    a group in element order, a group inside a warp), where the ordered plan is an in-thread
    run and a down tree of shuffles. False when that costs more than the general tree."""
    from .layout import Lines
    from .common import broadcast_into
    if lw.T % 32:
        return False
    first = op.operand_values[0].type
    shape, dim = tuple(first.shape), op.attrs["dim"]
    outputs = op.results[0].type.num_elements
    best = None
    group = 32
    while group > 1:
        try:
            layout = Lines(shape, dim, lw.T, group)
        except ValueError:
            group //= 2
            continue
        if layout.slots * lw.T <= 1 << 14:
            plan = _plan(layout, shape, dim, lw.T, True)
            if plan is not None:
                cost = _plan_cost(plan, len(op.operand_values))
                if best is None or cost < best[0]:
                    best = (cost, layout, plan)
        group //= 2
    if best is None:
        return False
    cost, layout, plan = best
    tiles = [lw.get(v, any_layout=True) for v in op.operand_values]
    moved = sum(1 for t in tiles if t.layout is not UNIFORM and t.count > 1)
    # the general tree also shuffles every operand at each of its levels, and sends the
    # operands through shared memory as the conversion does
    lanes, _ = choose_tree(lw.T, outputs, shape[dim])
    levels = lanes.bit_length() - 1
    tree = _tree_cost(lw.T, outputs, shape[dim]) + levels * -(-len(tiles) // 2)
    if cost + 4 * moved > tree + 4 * moved:
        return False
    sources, moving = [], []
    for i, (value, tile) in enumerate(zip(op.operand_values, tiles)):
        if tile.count == 1 or tile.layout is UNIFORM or tile.layout == layout:
            sources.append(tile)
            continue
        rebuilt = broadcast_into(lw, value, layout)
        if rebuilt is None and register_map(lw.layout_of(tile), layout, lw.T) is not None:
            rebuilt = lw.convert(tile, layout)
        sources.append(rebuilt)
        if rebuilt is None:
            moving.append(i)
    for i, tile in zip(moving, _exchange(lw, [tiles[i] for i in moving], layout)):
        sources[i] = tile
    return _layout_reduce(lw, op, held=(sources, layout))


def _exchange(lw, tiles, layout):
    """`tiles` in the Lines layout `layout` through shared memory, all with one barrier pair;
    a thread's run of neighbours (inner 1) of 32-bit elements is read as vectors."""
    from .layout import distinct_slots
    if not tiles:
        return []
    w = lw.w
    offsets = lw.reserve_smem([lw.smem_size_of(t.type) for t in tiles])
    for tile, offset in zip(tiles, offsets):
        source = lw.layout_of(tile)
        for k in distinct_slots(source, lw.T):
            if tile.layout is None:
                address = lw.slot_address(offset, tile.count, k, tile.element)
                guard = lw.owner(tile.count, k)
            else:
                address = lw.smem_address(offset, source.emit_index(lw, k), tile.element)
                guard = None
            lw.store("shared", address, tile.regs[k], tile.element, predicate=guard)
    lw.barrier()
    out = []
    for tile, offset in zip(tiles, offsets):
        element = tile.element
        size = dtypes.byte_size(element)
        vec = 1
        if layout.inner == 1 and size == 4:
            vec = min(4, layout.run)
            while layout.run % vec:
                vec //= 2
        regs = []
        for k in range(0, layout.slots, vec):
            address = lw.smem_address(offset, layout.emit_index(lw, k), element)
            if vec == 1:
                regs.append(lw.load("shared", address, element))
                continue
            run = [w.reg(dtypes.reg_class(element)) for _ in range(vec)]
            w(f"ld.shared.v{vec}.{dtypes.mem_type(element)} {{{', '.join(run)}}}, [{address}]")
            regs += run
        out.append(Tile(tile.type, regs, layout))
    lw.barrier()
    return out


def _general_path_fits(lw, op) -> bool:
    """Whether the general path's buffers fit in a CTA's shared memory on the target, above what
    the kernel holds there for good (its floor)."""
    from ..targets import max_shared_per_block
    return lw.smem_floor + sum(-(-size // 16) * 16 for size in _tree_buffers(lw, op)) \
        <= max_shared_per_block(lw.arch)


def _layout_reduce(lw, op, held=None) -> bool:
    """A reduction on the source's own layout: in-thread, shuffle butterflies (a down tree,
    lower lane on the left, for combiners that need not commute), then at most one shared-memory step
    across warps; the result stays in the sliced layout (in every thread that holds a part of
    its row). False when the plan does not apply. `held`: (sources, layout) already moved
    into a layout by _lines_reduce."""
    from .layout import Sliced
    w = lw.w
    if held is not None:
        sources, layout = held
        shape, dim = tuple(op.operand_values[0].type.shape), op.attrs["dim"]
        ordered = True
        plan = _plan(layout, shape, dim, lw.T, ordered)
        if plan is None:
            return False
    else:
        sources = [lw.get(v, any_layout=True) for v in op.operand_values]
        layouts = {s.layout for s in sources if s.layout is not UNIFORM}
        if len(layouts) > 1:
            sources = [lw.get(v) for v in op.operand_values]
        elif not layouts:
            return False  # splats only
        source = next(s for s in sources if s.layout is not UNIFORM)
        if source.count == 1 or lw.T % 32:
            return False
        layout = lw.layout_of(source)
        shape, dim = tuple(source.type.shape), op.attrs["dim"]
        if layout.slots * lw.T > 1 << 14 and (layout.slots * lw.T > 1 << 18 or
                                               _general_path_fits(lw, op)):
            # planning time grows with elements x slots: larger tiles take the general path
            # where their copy fits in shared memory (a 32 x 1024 f32 tile, 128 KiB, does not on
            # sm_120)
            return False
        ordered = not commutative(op)
        plan = _plan(layout, shape, dim, lw.T, ordered)
        if plan is None:
            return ordered and (_split_reduce(lw, op, sources, layout, shape, dim)
                                or _lines_reduce(lw, op))
        outputs = op.results[0].type.num_elements
        if ordered and _plan_cost(plan, len(sources)) > _tree_cost(lw.T, outputs, shape[dim]):
            return _lines_reduce(lw, op)
    groups, masks, warp_masks, slot_group = plan
    outputs = op.results[0].type.num_elements
    elements = [s.element for s in sources]
    partial = [_tree(lw, op, [[s.slot(k) for s in sources] for k in members])
               for members in groups]
    tid = lw.tid()
    redux = None if ordered else _redux(lw, op, sources, masks)
    if redux is not None:  # every lane gets the warp's combination, as from the butterflies
        stepped = []
        for [value] in partial:
            out = w.reg("b32")
            w(f"redux.sync.{redux} {out}, {value}, -1")
            stepped.append([out])
        partial = stepped
    for mask in masks if redux is None else ():
        stepped = []
        for values in partial:
            if ordered:
                # a down tree: the lane with the mask bit clear holds the earlier elements and
                # takes its partner's (lane + mask) on the right; lanes with a bit of the masks
                # so far set compute values nobody reads
                others = [lw.shuffle(v, e, "down", mask) for v, e in zip(values, elements)]
            else:
                others = [shuffle_xor(lw, v, e, mask) for v, e in zip(values, elements)]
            stepped.append(_combine(lw, op, values, others))
        partial = stepped
    span = 0
    for mask in masks:
        span |= mask
    if ordered and span and not warp_masks:
        # only the group's first lane holds the result: every lane reads it from there
        def make_source():
            reg = w.reg("b32")
            w(f"and.b32 {reg}, {tid}, {31 & ~span}")
            return reg
        source = lw._cached(("reduce-source", span), make_source)
        partial = [[lw.shuffle(v, e, "idx", source) for v, e in zip(values, elements)]
                   for values in partial]
    result_types = [r.type for r in op.results]
    sliced = Sliced(layout, shape, dim)
    if warp_masks:
        sizes = [dtypes.byte_size(e) for e in elements]
        offsets = lw.reserve_smem([(lw.T // 32) * outputs * size for size in sizes])

        def make_warp():
            reg = w.reg("b32")
            w(f"shr.u32 {reg}, {tid}, 5")
            return reg
        warp = lw._cached(("warp",), make_warp)
        leader = None
        if span:  # one lane of each butterfly group writes
            bits = w.reg("b32")
            leader = w.reg("pred")
            w(f"and.b32 {bits}, {tid}, {span}")
            w(f"setp.eq.u32 {leader}, {bits}, 0")
        for g, members in enumerate(groups):
            index = w.reg("b32")
            w(f"mad.lo.u32 {index}, {warp}, {outputs}, {sliced.emit_index(lw, members[0])}")
            for value, element, offset in zip(partial[g], elements, offsets):
                lw.store("shared", lw.smem_address(offset, index, element), value, element,
                         predicate=leader)
        lw.barrier()
        # every thread combines the warps' parts in increasing warp order, so all copies of an
        # output are equal bit for bit (and the element order is kept)
        warp_span = 0
        for mask in warp_masks:
            warp_span |= mask
        first = w.reg("b32")
        w(f"and.b32 {first}, {warp}, {~warp_span & 0xFFFFFFFF}")
        choices = [c for c in range(warp_span + 1) if not c & ~warp_span]
        combined = []
        for g, members in enumerate(groups):
            cell = w.reg("b32")
            w(f"mad.lo.u32 {cell}, {first}, {outputs}, {sliced.emit_index(lw, members[0])}")
            addresses = [lw.smem_address(0, cell, element) for element in elements]
            value = None
            for choice in choices:  # warp `first | choice`: a constant offset from warp `first`
                part = [lw.load("shared", f"{address}+{offset + choice * outputs * size}",
                                element)
                        for address, offset, element, size in zip(addresses, offsets, elements,
                                                                  sizes)]
                value = part if value is None else _combine(lw, op, value, part)
            combined.append(value)
        lw.barrier()
        partial = combined
    for i, (result, result_type) in enumerate(zip(op.results, result_types)):
        if outputs == 1:
            lw.set(result, Tile(result_type, [partial[0][i]]))
        else:
            lw.set(result, Tile(result_type, [partial[slot_group[k]][i]
                                              for k in range(layout.slots)], sliced))
    return True


def _split_plan(layout, shape, dim, threads):
    """For an ordered combiner whose thread holds several elements of a row that are not
    neighbours (Rows with fewer than 32 lanes: a thread's elements are `lanes` apart): each slot
    runs its own down tree over the lanes, then the thread combines its slots' results in
    element order. (groups: per output the slots in element order, masks, slot_group) or None
    when the rows are not whole inside warps this way."""
    from .layout import Sliced
    table = layout.table(threads)
    out = Sliced(layout, shape, dim).table(threads)
    length = shape[dim]
    inner = int(np.prod(shape[dim + 1:], dtype=np.int64))
    if inner != 1:
        return None
    slots = list(range(table.shape[0]))
    if len({row.tobytes() for row in table}) != len(slots):
        return None  # copies: not a loaded layout
    parts = table[:, :, None]  # [slots, threads, n]
    lanes = np.arange(threads)
    masks = []
    for mask in (1, 2, 4, 8, 16):
        partner = lanes ^ mask
        if not (out == out[:, partner]).all():
            continue
        other = parts[:, partner, :]
        lower = (lanes < partner)[None, :]
        left = np.where(lower, parts[..., -1], other[..., -1])
        right = np.where(lower, other[..., 0], parts[..., 0])
        if (right - left != 1).any():
            return None  # the partner's run does not follow on
        parts = np.sort(np.concatenate([parts, other], axis=2), axis=2)
        masks.append(mask)
    # per output, the slots whose runs follow each other make the whole row
    groups, slot_group, by_output = [], [0] * len(slots), {}
    for k in slots:
        g = by_output.setdefault(out[k].tobytes(), len(groups))
        if g == len(groups):
            groups.append([])
        groups[g].append(k)
        slot_group[k] = g
    for members in groups:
        members.sort(key=lambda k: parts[k, 0, 0])
        runs = parts[members]  # [members, threads, n]
        if (np.diff(runs[:, :, 0], axis=0) != runs.shape[2]).any() \
                or runs.shape[0] * runs.shape[2] != length:
            return None
    return groups, masks, slot_group


def _split_reduce(lw, op, sources, layout, shape, dim) -> bool:
    """An ordered reduction by _split_plan (False when it does not apply or costs more than the
    general tree)."""
    if any(s.layout is not None and s.layout != layout and s.layout is not UNIFORM
           for s in sources):
        return False
    plan = _split_plan(layout, shape, dim, lw.T)
    if plan is None:
        return False
    groups, masks, slot_group = plan
    outputs = op.results[0].type.num_elements
    shuffles = -(-len(sources) // 2)
    per_thread = layout.slots * len(masks) * (1 + shuffles) + layout.slots - len(groups) \
        + len(groups) * shuffles
    if per_thread > _tree_cost(lw.T, outputs, shape[dim]):
        return False
    w = lw.w
    elements = [s.element for s in sources]
    partial = {k: [s.slot(k) for s in sources] for k in range(layout.slots)}
    for mask in masks:  # down trees: the lane with the mask bit clear holds the earlier run
        for k, values in partial.items():
            others = [lw.shuffle(v, e, "down", mask) for v, e in zip(values, elements)]
            partial[k] = _combine(lw, op, values, others)
    span = 0
    for mask in masks:
        span |= mask
    tid = lw.tid()
    source = None
    if span:
        def make_source():
            reg = w.reg("b32")
            w(f"and.b32 {reg}, {tid}, {31 & ~span}")
            return reg
        source = lw._cached(("reduce-source", span), make_source)
    finals = []
    for members in groups:
        value = partial[members[0]]
        for k in members[1:]:  # in element order
            value = _combine(lw, op, value, partial[k])
        if source is not None:
            value = [lw.shuffle(v, e, "idx", source) for v, e in zip(value, elements)]
        finals.append(value)
    sliced = Sliced(layout, shape, dim)
    for i, result in enumerate(op.results):
        if outputs == 1:
            lw.set(result, Tile(result.type, [finals[0][i]]))
        else:
            lw.set(result, Tile(result.type, [finals[slot_group[k]][i]
                                              for k in range(layout.slots)], sliced))
    return True


@lowers("reduce")
def lower_reduce(lw, op):
    if op.operand_values[0].type.num_elements == 1:
        # one element: the reduction is that element (the combiner never runs)
        for value, result in zip(op.operand_values, op.results):
            lw.set(result, Tile(result.type, [lw.get(value).scalar]))
        return
    if not _layout_reduce(lw, op):
        _tree_reduce(lw, op)


def _exact_any_order(op) -> bool:
    """The combiner gives the same bits in any order and grouping: one commutative op of its
    two integer arguments (integer add/mul/min/max/and/or/xor wrap exactly)."""
    if not commutative(op):
        return False
    element = op.operand_values[0].type.element
    return dtypes.name_of(element)[0] in "iu"


def _hillis_cost(lw, count: int, length: int, inner: int) -> int:
    """Issue slots per thread of _scan (per step and slot: index, select, exchange, combine)."""
    steps = (length - 1).bit_length()
    slots = lw.slots(count)
    shuffles = lw.T % 32 == 0 and 32 % (length * inner) == 0
    return steps * (slots * 5 + (0 if shuffles else slots + 16))


def _bank_ways(layout, element) -> int:
    """The most distinct shared-memory words one bank serves when a warp reads a slot of
    `layout` from a tile stored at its linear indices (the conversion into it): lines
    across the inner dimension put positions a multiple of 32 words apart in one bank."""
    size = dtypes.byte_size(element)
    words = layout.table(32) * size // 4
    ways = 1
    for row in words:
        distinct = np.unique(row)
        ways = max(ways, int(np.bincount(distinct % 32, minlength=32).max()))
    return ways


def _lines_group(lw, shape, dim, element):
    """(cost, group) of the cheapest Lines layout for a scan along `dim`, or None."""
    from .layout import Lines
    length = shape[dim]
    best = None
    group = 1
    while group <= min(length, lw.T):
        try:
            layout = Lines(shape, dim, lw.T, group)
        except ValueError:
            group *= 2
            continue
        lanes = min(group, 32)
        warps = group // 32
        # serial scan + fix-up, shuffle steps (shuffle, combine, select), the exclusive shuffle,
        # the warp totals' trip through shared memory
        per_round = 2 * layout.run + 3 * (lanes.bit_length() - 1) + 2 \
            + (warps + 20 if warps > 1 else 0)
        cost = layout.rounds * per_round
        ways = _bank_ways(layout, element)
        if ways > 8:  # measured on the model: up to 8-way the exchange is not what bounds
            cost += layout.slots * ways
        if layout.inner == 1 and layout.run > 1 and _as_blocked(layout, lw.T) is None:
            # a thread's run of neighbours, not as vectors: every global access of the
            # result touches `run` times the sectors
            group *= 2
            continue
        if best is None or cost < best[0]:
            best = (cost, group)
        group *= 2
    return best


def _as_blocked(layout, threads):
    """The Blocked layout placing elements as `layout` does (a single line over all threads:
    vector loads and stores know it), or None."""
    from .layout import Blocked
    try:
        blocked = Blocked(layout.count, threads, layout.run)
    except ValueError:
        return None
    if blocked.slots == layout.slots and (blocked.table(threads) == layout.table(threads)).all():
        return blocked
    return None


def _lines_scan(lw, op) -> bool:
    """A scan whose combiner gives the same bits in any order, in a Lines layout: each thread
    scans its run serially, the lanes of a group scan the run totals with log-step shuffles,
    warps of a group add the totals of the warps before them (one shared-memory pass), and each
    thread combines its run with the total before it. The result stays in the Lines layout.
    False when it does not apply or costs more than _scan."""
    from .layout import Lines
    if lw.T % 32 or not _exact_any_order(op):
        return False
    source = lw.get(op.operand_values[0], any_layout=True)
    shape, dim = tuple(source.type.shape), op.attrs["dim"]
    length = shape[dim]
    if length == 1 or source.count == 1:
        return False
    inner = int(np.prod(shape[dim + 1:], dtype=np.int64))
    held = source.layout
    if isinstance(held, Lines) and held.key() == Lines(shape, dim, lw.T, held.group).key():
        chosen = (0, held.group)  # made in lines for this scan (anchors.scan_anchors): no moves
    else:
        chosen = _lines_group(lw, shape, dim, source.element)
    if chosen is None:
        return False
    # moving into the layout and out again: two exchanges through shared memory
    cost = chosen[0] + 2 * (lw.slots(source.count) + 12)
    if source.layout is not None and source.layout is not UNIFORM:
        cost = chosen[0] + lw.slots(source.count) + 12
    if cost >= _hillis_cost(lw, source.count, length, inner):
        return False
    layout = Lines(shape, dim, lw.T, chosen[1])
    layout = _as_blocked(layout, lw.T) or layout
    value = lw.forward.get(op.operand_values[0], op.operand_values[0])
    padding = _lines_padding(lw, source, layout)
    if padding is not None:
        tile = lw.scoped(("scan padded lines of", value, layout.key()),
                         lambda: _padded_exchange(lw, source, layout, padding, True))
    else:
        tile = lw.scoped(("scan lines of", value, layout.key()),
                         lambda: lw.convert(source, layout))
    if not isinstance(layout, Lines):
        layout = Lines(shape, dim, lw.T, chosen[1])  # the same placement, by lines
    element = tile.element
    reverse = bool(op.attrs.get("reverse"))
    w = lw.w
    run, group = layout.run, layout.group
    lanes, warps = min(group, 32), group // 32
    q = layout.emit_position(lw)
    combine = lambda a, b: _combine(lw, op, [a], [b])[0]  # noqa: E731

    def lane_pred(name, make):
        return lw._cached(("lines pred", name, group), make)

    def compare(kind, reg, value):
        def make():
            pred = w.reg("pred")
            w(f"setp.{kind}.u32 {pred}, {reg}, {value}")
            return pred
        return make
    lane = q
    if warps > 1:
        lane = lw._cached(("lines lane", group), lambda: _u32_rem(lw, q, 32))
    offset = None
    if warps > 1:
        [offset] = lw.reserve_smem([layout.lines * warps * dtypes.byte_size(element)])
    out = list(tile.regs)
    totals, runs = [], []
    for j in range(layout.rounds):
        regs = out[j * run:(j + 1) * run]
        order = range(run - 1, -1, -1) if reverse else range(run)
        previous = None
        for i in order:  # in-thread serial scan of the run
            if previous is not None:
                regs[i] = combine(previous, regs[i])
            previous = regs[i]
        runs.append(regs)
        totals.append(previous)
    # the run totals, scanned across the lanes of a group (inclusive)
    step = 1
    while step < lanes:
        if reverse:
            valid = lane_pred(("lt", lanes - step), compare("lt", lane, lanes - step))
        else:
            valid = lane_pred(("ge", step), compare("ge", lane, step))
        for j, total in enumerate(totals):
            other = lw.shuffle(total, element, "down" if reverse else "up", step)
            totals[j] = lw.select(valid, combine(other, total), total, element)
        step *= 2
    # before each run: the inclusive total of the lane before (after, reversed) it
    befores, have = [], None
    if lanes > 1:
        if reverse:
            have = lane_pred(("lt", lanes - 1), compare("lt", lane, lanes - 1))
        else:
            have = lane_pred(("ge", 1), compare("ge", lane, 1))
        befores = [lw.shuffle(total, element, "down" if reverse else "up", 1)
                   for total in totals]
    if warps > 1:
        # each warp's total of each line (the group's last lane, reversed the first) goes to
        # shared memory; a thread combines the totals of the warps before (after) its own
        warp = lw._cached(("lines warp", group), lambda: _u32_div(lw, q, 32))
        leader = lane_pred(("leader", reverse),
                           compare("eq", lane, 0 if reverse else lanes - 1))
        cells = []
        for j, total in enumerate(totals):
            cell = w.reg("b32")
            w(f"mad.lo.u32 {cell}, {layout.emit_line(lw, j)}, {warps}, {warp}")
            lw.store("shared", lw.smem_address(offset, cell, element), total, element,
                     predicate=leader)
            cells.append(cell)
        lw.barrier()
        size = dtypes.byte_size(element)
        for j in range(layout.rounds):
            first = w.reg("b32")
            w(f"sub.u32 {first}, {cells[j]}, {warp}")
            address = lw.smem_address(0, first, element)
            parts = [lw.load("shared", f"{address}+{offset + c * size}", element)
                     for c in range(warps)]
            # prefix[c]: the combined totals of warps 0..c-1 (reversed: c+1..warps-1)
            chain = list(range(warps)) if not reverse else list(range(warps - 1, -1, -1))
            acc, sums = None, {}
            for c in chain[:-1]:
                acc = parts[c] if acc is None else combine(acc, parts[c])
                sums[chain[chain.index(c) + 1]] = acc
            before_warps = None
            for c, value in sums.items():
                pick = lane_pred(("warp", c), compare("eq", warp, c))
                before_warps = value if before_warps is None else \
                    lw.select(pick, value, before_warps, element)
            edge = lane_pred(("edge warp", reverse),
                             compare("eq", warp, warps - 1 if reverse else 0))
            # lanes >= warps > 1: the lane before in the warp, then the warps before; the
            # first warp (reversed the last) has no warps before
            joined = lw.select(have, combine(before_warps, befores[j]), before_warps, element)
            befores[j] = lw.select(edge, befores[j], joined, element)
            runs_have = w.reg("pred")
            w(f"not.pred {runs_have}, {edge}")
            w(f"or.pred {runs_have}, {runs_have}, {have}")
            runs[j] = [lw.select(runs_have, combine(befores[j], r), r, element)
                       for r in runs[j]]
        lw.barrier()  # the cells are free for the next op's exchange
    elif lanes > 1:
        for j in range(layout.rounds):
            runs[j] = [lw.select(have, combine(befores[j], r), r, element) for r in runs[j]]
    regs = [r for rs in runs for r in rs]
    result = Tile(op.results[0].type, regs, tile.layout)
    if padding is not None:  # back to the source's layout through the same padded buffer
        result = _padded_exchange(lw, result, layout, padding, False)
    lw.set(op.results[0], result)
    return True


def _lines_hillis_cost(lw, layout, operands: int) -> int:
    """Issue slots per thread of _lines_hillis, the exchanges in and out included."""
    run, length = layout.run, layout.length
    per_round, step = 0, 1
    while step < length:
        moved = min(step, run)  # registers taken from another lane at this step
        per_round += 2 * moved + run + moved
        step *= 2
    exchanges = 2 * (layout.slots + 12)
    return operands * (layout.rounds * per_round + exchanges)


def _lines_hillis(lw, op) -> bool:
    """A scan of any combiner (floats, several operands) in a Lines layout whose group fits in a
    warp: the interpreter's log-step order exactly (see _scan), each thread holding a run of
    consecutive positions, so a step takes its partner from its own registers or by a shuffle
    instead of a shared-memory round trip with a barrier. False when it does not apply or
    costs more than _scan."""
    from .layout import Lines
    if lw.T % 32:
        return False
    sources = [lw.get(v, any_layout=True) for v in op.operand_values]
    shape, dim = tuple(sources[0].type.shape), op.attrs["dim"]
    length = shape[dim]
    count = sources[0].count
    inner = int(np.prod(shape[dim + 1:], dtype=np.int64))
    if length == 1 or count == 1 or length & (length - 1):
        return False
    if 32 % (length * inner) == 0:
        return False  # _scan shuffles already
    try:
        layout = Lines(shape, dim, lw.T, min(length, 32))
    except ValueError:
        return False
    steps = (length - 1).bit_length()
    smem = _hillis_cost(lw, count, length, inner) + \
        (len(sources) - 1) * steps * lw.slots(count) * 4
    placed = _as_blocked(layout, lw.T) or layout
    # a run of neighbours not as vectors touches `run` times the sectors when stored: back to
    # the source's layout then
    back = placed is layout and layout.inner == 1 and layout.run > 1
    cost = _lines_hillis_cost(lw, layout, len(sources))
    if back:
        cost += len(sources) * (lw.slots(count) + 12)
    if cost >= smem:
        return False
    tiles = []
    for value, source in zip(op.operand_values, sources):
        value = lw.forward.get(value, value)
        tiles.append(lw.scoped(("scan lines of", value, layout.key()),
                               lambda source=source: lw.convert(source, placed)))
    elements = [t.element for t in tiles]
    reverse = bool(op.attrs.get("reverse"))
    w = lw.w
    run, group = layout.run, layout.group
    q = layout.emit_position(lw)

    def lane_pred(kind, bound):
        def make():
            pred = w.reg("pred")
            w(f"setp.{kind}.u32 {pred}, {q}, {bound}")
            return pred
        return lw._cached(("lines pred", (kind, bound), group), make)
    out = [[] for _ in tiles]
    for j in range(layout.rounds):
        values = [list(t.regs[j * run:(j + 1) * run]) for t in tiles]
        step = 1
        while step < length:
            # position p = q * run + i takes its partner p - step (reversed p + step)
            new = [list(regs) for regs in values]
            for i in range(run):
                if step < run:
                    near = i - step if not reverse else i + step
                    if 0 <= near < run:  # in this thread, always in range
                        others, valid = [regs[near] for regs in values], None
                    else:  # the neighbouring lane's run
                        near = near % run
                        others = [lw.shuffle(regs[near], e, "down" if reverse else "up", 1)
                                  for regs, e in zip(values, elements)]
                        valid = lane_pred("lt", group - 1) if reverse else lane_pred("ge", 1)
                else:
                    lanes = step // run
                    others = [lw.shuffle(regs[i], e, "down" if reverse else "up", lanes)
                              for regs, e in zip(values, elements)]
                    valid = lane_pred("lt", group - lanes) if reverse \
                        else lane_pred("ge", lanes)
                combined = _combine(lw, op, others, [regs[i] for regs in values])
                for n, (c, e) in enumerate(zip(combined, elements)):
                    new[n][i] = c if valid is None else lw.select(valid, c, values[n][i], e)
            values = new
            step *= 2
        for n, regs in enumerate(values):
            out[n].extend(regs)
    for result, regs, tile, source in zip(op.results, out, tiles, sources):
        scanned = Tile(result.type, regs, tile.layout)
        lw.set(result, lw.convert(scanned, source.layout) if back else scanned)
    return True


def _lines_padding(lw, source, layout):
    """(shift, pad) of a padded shared buffer for moving a cyclic tile into `layout` (Lines) and
    back, or None. The lanes of a group read positions run * inner elements apart: with that a
    multiple of 32 words every lane of a group hits one bank. `pad` words after every
    2**shift = run * inner elements spread them over the banks; one shift and multiply-add per
    thread and round keeps every slot an immediate offset (a run never crosses a padded block,
    and neither does a cyclic slot's block of T)."""
    from .layout import Lines
    if not isinstance(layout, Lines) or source.layout is not None or source.count % lw.T:
        return None
    if dtypes.byte_size(source.element) != 4 or layout.group > 32 or lw.T % 32:
        return None
    block = layout.run * layout.inner
    per_warp = 32 // layout.group  # lines side by side in a warp
    if block & (block - 1) or block < 32 or lw.T % block or layout.inner % per_warp \
            or layout.lines % layout.side:
        return None
    return block.bit_length() - 1, per_warp


def _padded_index(lw, index, shift, pad):
    w = lw.w
    high, out = w.reg("b32"), w.reg("b32")
    w(f"shr.u32 {high}, {index}, {shift}")
    w(f"mad.lo.u32 {out}, {high}, {pad}, {index}")
    return out


def _padded_exchange(lw, tile, layout, padding, into):
    """`tile` from the cyclic layout into `layout` (Lines; `into`) or back, through a buffer
    padded as _lines_padding says (element e at e + pad * (e >> shift))."""
    shift, pad = padding
    T, size = lw.T, 4
    count = tile.count
    [offset] = lw.reserve_smem([(count + pad * (count >> shift)) * size])
    cyclic = lw._cached(("padded cyclic", shift, pad),
                        lambda: lw.smem_address(0, _padded_index(lw, lw.tid(), shift, pad),
                                                tile.element))

    def cyclic_at(k):
        e = k * T
        return f"{cyclic}+{offset + (e + pad * (e >> shift)) * size}"

    def lines_index(j):
        if layout.lines > layout.inner:
            return _padded_index(lw, layout.emit_index(lw, j * layout.run), shift, pad)
        # every line within one block of inner elements: the padded run start is
        # line + q * (run * inner + pad), as cheap as the unpadded one
        reg = lw.w.reg("b32")
        lw.w(f"mad.lo.u32 {reg}, {layout.emit_position(lw)}, {(1 << shift) + pad}, "
             f"{layout.emit_line(lw, j)}")
        return reg

    def lines_at(k):
        j, i = divmod(k, layout.run)
        base = lw._cached(("padded lines", layout.key(), j, shift, pad),
                          lambda: lw.smem_address(0, lines_index(j), tile.element))
        return f"{base}+{offset + i * layout.inner * size}"
    source_at, target_at = (cyclic_at, lines_at) if into else (lines_at, cyclic_at)
    for k, reg in enumerate(tile.regs):
        lw.store("shared", source_at(k), reg, tile.element)
    lw.barrier()
    slots = layout.slots if into else lw.slots(count)
    out = [lw.load("shared", target_at(k), tile.element) for k in range(slots)]
    lw.barrier()
    return Tile(tile.type, out, layout if into else None)


@lowers("scan")
def lower_scan(lw, op):
    if not _lines_scan(lw, op) and (_exact_any_order(op) or not _lines_hillis(lw, op)):
        _scan(lw, op)
