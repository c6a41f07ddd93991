"""Views and memory: tensor/partition/strided/gather-scatter views, view loads and stores with bounds
masks and padding, pointer-tile loads and stores, pointer offsets, module globals.

Every thread loads and stores the elements of its own slots (adjacent threads touch adjacent elements
of a row, so accesses along a stride-1 dimension coalesce). Memory ops ordered after earlier memory
ops by a token get a bar.sync first, because another thread of the CTA may own the element, unless
a bar.sync already stands after those ops in straight-line code (common.order_after_token).
"""
from __future__ import annotations


from tilebc.ir.types import GatherScatterViewType, StridedViewType, TensorViewType
from tilebc.ops.enums import MemoryOrderingSemantics, PaddingValue
from tilebc.ops.spec import Exit

from . import dtypes, intdiv
from .anchors import (LOADS, STORES, _ROLES, flow_is_layout_free, is_mma, load_layout,
                      writes_memory)
from .common import (AFTER_MEMORY, SubView, TensorView, Tile, and_predicates as _and,
                     LaterIteration, immediate, order_after_token, set_result_token,
                     is_loop, steps_by_the_grid, vector_access)
from .layout import UNIFORM, Blocked, MmaAcc, Rows, distinct_slots
from .registry import deferred, lowers, pipelines
from .vectors import (PARTITION_VIEW, TENSOR_VIEW, VIEW_MAKERS, divisibility, pointer_layout,
                      qualifiers, vector_width, view_dims)

@lowers("make_tensor_view")
def lower_make_tensor_view(lw, op):
    view_type: TensorViewType = op.results[0].type
    base = lw.get(op.operands["base"]).scalar
    dynamic_shape = iter(op.operands["dynamicShape"])
    dynamic_strides = iter(op.operands["dynamicStrides"])
    base_align, shape_div, stride_div = divisibility(lw, op)

    shape, narrow_shape = [], []
    for static in view_type.shape:
        if static is not None:
            shape.append(lw.const_b64(static))
            narrow_shape.append(str(static) if 0 <= static < 2**31 else None)
            continue
        tile = lw.get(next(dynamic_shape))
        shape.append(lw.scalar_s64(tile))
        narrow_shape.append(_narrow_s32(tile))
    strides, narrow = [], []
    for static in view_type.strides:
        if static is not None:
            strides.append(lw.const_b64(static))
            narrow.append(str(static) if -2**31 <= static < 2**31 else None)
            continue
        tile = lw.get(next(dynamic_strides))
        strides.append(lw.scalar_s64(tile))
        narrow.append(_narrow_s32(tile))
    lw.set(op.results[0], TensorView(view_type, base, shape, strides, narrow, base_align,
                                     shape_div, stride_div, narrow_shape))


def _narrow_s32(tile: Tile) -> str | None:
    """The .b32 register holding a signed integer scalar of at most 32 bits (sign-extended, as
    tiles keep them), or None for i64 / i1 / pointers."""
    element = tile.element
    if getattr(element, "is_float", False) or dtypes.name_of(element) in ("i64", "i1", "ptr"):
        return None
    return tile.scalar


@lowers("make_partition_view", "make_strided_view", "make_gather_scatter_view")
def lower_make_view(lw, op):
    lw.set(op.results[0], SubView(op.results[0].type, lw.get(op.operands["tensor_view"])))


def _shape_results(lw, op, values: list[str]):
    w = lw.w
    for result, reg in zip(op.results, values):
        if result.type.element.name == "i64":
            lw.set(result, Tile(result.type, [reg]))
        else:
            narrow = w.reg("b32")
            w(f"cvt.u32.u64 {narrow}, {reg}")
            lw.set(result, Tile(result.type, [narrow]))


@lowers("get_tensor_shape")
def lower_get_tensor_shape(lw, op):
    view = lw.get(op.operands["src"])
    tensor = view.tensor if isinstance(view, SubView) else view
    _shape_results(lw, op, tensor.shape)


def _div_s64_by(lw, reg: str, divisor: int) -> str:
    """reg / divisor (s64, truncating) for a constant divisor: ptxas expands a 64-bit div into a
    long subroutine even for constants, so this is a shift or a multiply-high (intdiv.py)."""
    if divisor == 0 or not -(1 << 63) <= divisor < (1 << 63):
        out = lw.w.reg("b64")
        lw.w(f"div.s64 {out}, {reg}, {divisor}")
        return out
    return intdiv.sdiv(lw.w, reg, divisor, 64)


@lowers("get_index_space_shape")
def lower_get_index_space_shape(lw, op):
    w = lw.w
    view: SubView = lw.get(op.operands["src"])
    vt = view.type
    counts = []
    for i, tile_dim in enumerate(vt.tile_shape):
        size = view.tensor.shape[view_dims(vt)[i]]
        if isinstance(vt, GatherScatterViewType):
            # indexed by element (dense dims) or by row (the sparse dim): one index per element
            counts.append(size)
            continue
        out = w.reg("b64")
        if isinstance(vt, StridedViewType):
            # tiles start every traversal stride; the last one starts before the end
            stride = vt.traversal_strides[i]
            over, more = w.reg("b64"), w.reg("pred")
            w(f"sub.s64 {over}, {size}, {tile_dim}")
            w(f"add.s64 {over}, {over}, {stride - 1}")
            over = _div_s64_by(lw, over, stride)
            w(f"add.s64 {out}, {over}, 1")
            w(f"setp.le.s64 {more}, {size}, {tile_dim}")
            w(f"selp.b64 {out}, 1, {out}, {more}")
        else:
            total = w.reg("b64")
            w(f"add.s64 {total}, {size}, {tile_dim - 1}")
            out = _div_s64_by(lw, total, tile_dim)
        counts.append(out)
    _shape_results(lw, op, counts)


def padding_register(lw, element, padding: PaddingValue | None) -> str:
    value = {None: 0.0, PaddingValue.ZERO: 0.0, PaddingValue.NEG_ZERO: -0.0,
             PaddingValue.NAN: float("nan"), PaddingValue.POS_INF: float("inf"),
             PaddingValue.NEG_INF: float("-inf")}[padding]
    size = 1 if dtypes.name_of(element) == "i1" else dtypes.byte_size(element)
    # +0.0 is all zero bits in every float format: the common case needs no numpy
    zero = padding in (None, PaddingValue.ZERO)
    if dtypes.name_of(element) == "ptr" or not element.is_float or zero:
        return immediate(lw, element, bytes(size))
    from tilebc.numeric.convert import float_to_bits  # numpy: imported when a constant needs it
    return immediate(lw, element, float_to_bits(value, element).to_bytes(size, "little"))


def view_addresses(lw, op, view: SubView, indices, tile_shape, layout=None, slots=None,
                   shift=None):
    """Per slot of the accessed tile (held in `layout`, default Cyclic; only the slots listed
    in `slots` when given): (.b64 address, in-bounds predicate or None). `shift`: per tile dim, a
    .b64 register (or None) added to the tile's start, for one chunk of a chunked region."""
    w = lw.w
    vt = view.type
    tensor = view.tensor
    element_size = dtypes.byte_size(tensor.type.element)
    rank = len(tensor.shape)
    inbounds = list(op.attrs.get("inbounds") or ())
    count = 1
    for d in tile_shape:
        count *= d
    # Start coordinate of the tile along each tensor dimension (tile dims map through dim_map).
    index_tiles = [lw.get(v) for v in indices]
    starts = [None] * rank
    start_parts = {}  # dim -> (.b32 tile index, step) where start = index * step
    sparse = vt.sparse_dim if isinstance(vt, GatherScatterViewType) else None
    sparse_tile = None
    for i, (index_tile, dim) in enumerate(zip(index_tiles, view_dims(vt))):
        if i == sparse:
            sparse_tile = index_tile
            continue
        if sparse is not None:
            # a gather/scatter view's dense indices are element offsets, not tile numbers
            starts[dim] = lw.scalar_s64(index_tile)
            continue
        step = (vt.traversal_strides[i] if isinstance(vt, StridedViewType) else vt.tile_shape[i])
        start = w.reg("b64")
        narrow_index = _narrow_s32(index_tile)
        if narrow_index is not None and -2**31 <= step < 2**31:  # exact: both fit in s32
            w(f"mul.wide.s32 {start}, {narrow_index}, {step}")
            start_parts[dim] = (narrow_index, step, indices[i])
        else:
            w(f"mul.lo.s64 {start}, {lw.scalar_s64(index_tile)}, {step}")
        starts[dim] = start
    dims = view_dims(vt)
    for i, moved in enumerate(shift or ()):
        if moved is not None:
            start = w.reg("b64")
            w(f"add.s64 {start}, {starts[dims[i]]}, {moved}")
            starts[dims[i]] = start
            start_parts.pop(dims[i], None)  # the start is no longer index * step
    checked = [not (i < len(inbounds) and inbounds[i]) for i in range(len(dims))]
    if sparse_tile is not None:
        # the same index tile read by several accesses (a gather and the scatter back) is
        # shuffled once: the coordinates depend on the index tile and the tile shape only
        index_value = indices[sparse]
        key = ("sparse coords", lw.forward.get(index_value, index_value), tuple(tile_shape), sparse)
        sparse_coords = lw.scoped(key, lambda: _gather_sparse(lw, sparse_tile, tile_shape, sparse))
        return _gather_addresses(lw, tensor, dims, checked, starts, sparse, sparse_coords,
                                 tile_shape, element_size)
    deltas = lw.slot_deltas(tile_shape, layout)
    first = None  # slot 0's (address, per-dim coordinates, per-dim predicates)
    byte_strides = {}
    result = []
    if slots is None:
        slots = range(lw.slots(count) if layout is None else layout.slots)
    # Along a dim whose stride fits in 32 bits, (start + i) * stride = start * stride (the same
    # for every slot: added to the base once) + i * stride (one widening multiply per slot, as
    # the in-tile index i is small).
    narrow = tensor.narrow_strides or [None] * rank
    split = [narrow[dim] is not None for dim in dims]
    tile_base = None
    small, always = _narrow_checks(lw, tensor, dims, checked, start_parts, starts, tile_shape)
    for k in slots:
        if first is not None and deltas[k] is not None and deltas[first[4]] is not None:
            delta = tuple(a - b for a, b in zip(deltas[k], deltas[first[4]]))
            result.append(_shifted_address(lw, tensor, dims, checked, first, delta,
                                           byte_strides, element_size))
            continue
        if tile_base is None:
            tile_base = tensor.base
            for i, dim in enumerate(dims):
                if split[i]:
                    scaled, nxt = w.reg("b64"), w.reg("b64")
                    if dim in start_parts:  # index * stride, then * step * size
                        index32, step, _ = start_parts[dim]
                        w(f"mul.wide.s32 {scaled}, {index32}, {narrow[dim]}")
                        w(f"mad.lo.s64 {nxt}, {scaled}, {step * element_size}, {tile_base}")
                    else:
                        w(f"mul.lo.s64 {scaled}, {starts[dim]}, {tensor.strides[dim]}")
                        w(f"mad.lo.s64 {nxt}, {scaled}, {element_size}, {tile_base}")
                    tile_base = nxt
        mi = lw.multi_index(tile_shape, k, layout)
        address = tile_base
        coords, oks = [], []
        offset = None  # sum of i * stride over the split dims (elements)
        for i, dim in enumerate(dims):
            coord = None
            ok = None
            if i in small:
                if tile_shape[i] > 1:  # start + in-tile index, 32 bits (see _narrow_checks)
                    coord, ok = w.reg("b32"), w.reg("pred")
                    w(f"add.s32 {coord}, {small[i]}, {mi[i]}")
                    w(f"setp.lt.u32 {ok}, {coord}, {tensor.narrow_shape[dim]}")
            elif checked[i] or not split[i]:
                if tile_shape[i] == 1:  # the in-tile index is 0
                    coord = starts[dim]
                else:
                    coord = w.reg("b64")
                    w(f"cvt.u64.u32 {coord}, {mi[i]}")
                    w(f"add.s64 {coord}, {coord}, {starts[dim]}")
                if checked[i]:
                    ok = w.reg("pred")
                    w(f"setp.lt.u64 {ok}, {coord}, {tensor.shape[dim]}")  # negatives fail
            if not split[i] and i in small:  # the address needs the 64-bit coordinate
                wide = starts[dim]
                if tile_shape[i] > 1:
                    wide = w.reg("b64")
                    w(f"cvt.u64.u32 {wide}, {mi[i]}")
                    w(f"add.s64 {wide}, {wide}, {starts[dim]}")
            else:
                wide = coord
            coords.append(coord)
            oks.append(ok)
            if split[i]:
                if tile_shape[i] == 1:  # the in-tile index is 0
                    continue
                nxt = w.reg("b64")
                if offset is None:
                    w(f"mul.wide.s32 {nxt}, {mi[i]}, {narrow[dim]}")
                else:
                    w(f"mad.wide.s32 {nxt}, {mi[i]}, {narrow[dim]}, {offset}")
                offset = nxt
                continue
            scaled, nxt = w.reg("b64"), w.reg("b64")
            w(f"mul.lo.s64 {scaled}, {wide}, {tensor.strides[dim]}")
            w(f"mad.lo.s64 {nxt}, {scaled}, {element_size}, {address}")
            address = nxt
        if offset is not None:
            nxt = w.reg("b64")
            w(f"mad.lo.s64 {nxt}, {offset}, {element_size}, {address}")
            address = nxt
        in_bounds = always
        for ok in oks:
            in_bounds = _and(lw, in_bounds, ok)
        if first is None:
            first = (address, coords, oks, {}, k, small, always)
        result.append((address, in_bounds))
    return result


def _narrow_checks(lw, tensor, dims, checked, start_parts, starts, tile_shape):
    """The checked tile dims whose bounds check can run in 32 bits: the start is index * step
    with both in s32 and the extent in [0, 2^31). The index is clamped (u32, so negatives too)
    to M = ceil(2^31 / step): below M the 32-bit product is the exact start; at M it is at least
    2^31, out of bounds as the exact start is. start + in-tile index then stays below 2^32, so
    each slot compares 32 bits. Returns ({tile dim: .b32 start}, AND of the checks of dims
    whose tile extent is 1, which hold for every slot, or None)."""
    w = lw.w
    narrow_shape = tensor.narrow_shape or [None] * len(tensor.shape)
    small, always = {}, None
    for i, dim in enumerate(dims):
        if not checked[i] or dim not in start_parts or narrow_shape[dim] is None:
            continue
        index32, step, value = start_parts[dim]
        if not 0 < step < 2**30 or tile_shape[i] >= 2**30:
            continue
        if step == 1 and tile_shape[i] == 1:
            start32 = index32  # the sign-extended compare equals the u32 one
        else:
            def clamp(index32=index32, step=step):
                clamped, start32 = w.reg("b32"), w.reg("b32")
                w(f"min.u32 {clamped}, {index32}, {-(-2**31 // step)}")
                w(f"mul.lo.u32 {start32}, {clamped}, {step}")
                return start32
            # the same index tile and step in several accesses (a load and its store) share it
            start32 = lw.scoped(("clamped start", lw.forward.get(value, value), step), clamp)
        small[i] = start32
        if tile_shape[i] == 1:
            ok = w.reg("pred")
            w(f"setp.lt.u32 {ok}, {start32}, {narrow_shape[dim]}")
            always = _and(lw, always, ok)
    return small, always


def _shifted_address(lw, tensor, dims, checked, first, delta, byte_strides, element_size):
    """(address, predicate) of a slot whose multi-index is slot 0's plus the constant `delta`:
    slot 0's address plus delta * stride per moved dim; only moved dims are re-checked."""
    w = lw.w
    address, coords, oks, fixed, _, small, always = first
    moved = [i for i, d in enumerate(delta) if d]
    for i in moved:
        dim = dims[i]
        if dim not in byte_strides:
            reg = w.reg("b64")
            narrow = (tensor.narrow_strides or [None] * len(tensor.strides))[dim]
            static = tensor.type.strides[dim]
            if static is not None and -2**63 <= static * element_size < 2**63:
                w(f"mov.b64 {reg}, {static * element_size}")
            elif narrow is not None:  # an s32 stride times the element size: one widening multiply
                w(f"mul.wide.s32 {reg}, {narrow}, {element_size}")
            else:
                w(f"mul.lo.s64 {reg}, {tensor.strides[dim]}, {element_size}")
            byte_strides[dim] = reg
        nxt = w.reg("b64")
        w(f"mad.lo.s64 {nxt}, {byte_strides[dim]}, {delta[i]}, {address}")
        address = nxt
    # the predicates of the dims that did not move are combined once and shared by all slots
    still = tuple(i for i in range(len(dims)) if checked[i] and i not in moved)
    if still not in fixed:
        combined = always
        for i in still:
            combined = _and(lw, combined, oks[i])
        fixed[still] = combined
    in_bounds = fixed[still]
    for i in moved:
        if i in small:
            coord, ok = w.reg("b32"), w.reg("pred")
            w(f"add.s32 {coord}, {coords[i]}, {delta[i]}")
            w(f"setp.lt.u32 {ok}, {coord}, {tensor.narrow_shape[dims[i]]}")
            in_bounds = _and(lw, in_bounds, ok)
        elif checked[i]:
            coord, ok = w.reg("b64"), w.reg("pred")
            w(f"add.s64 {coord}, {coords[i]}, {delta[i]}")
            w(f"setp.lt.u64 {ok}, {coord}, {tensor.shape[dims[i]]}")
            in_bounds = _and(lw, in_bounds, ok)
    return address, in_bounds


def _gather_addresses(lw, tensor, dims, checked, starts, sparse, sparse_coords, tile_shape,
                      element_size):
    """view_addresses for a gather/scatter view: per slot, the dense dims' part of the address
    and bounds (shared by the slots whose dense coordinates are slot 0's, e.g. every slot of a
    [R, C] tile when C divides the thread count) plus the row read from the index tile."""
    w = lw.w
    count = 1
    for d in tile_shape:
        count *= d
    deltas = lw.slot_deltas(tile_shape)
    dense_parts = {}  # dense-dim offset from slot 0 (or the slot, if not constant) -> (address, ok)
    sparse_dim = dims[sparse]
    narrow_stride = (tensor.narrow_strides or [None] * len(dims))[sparse_dim]
    result = []
    for k in range(lw.slots(count)):
        delta = deltas[k]
        key = (tuple(d for i, d in enumerate(delta) if i != sparse) if delta is not None
               else ("slot", k))
        if key not in dense_parts:
            mi = lw.multi_index(tile_shape, k)
            address, ok = tensor.base, None
            for i, dim in enumerate(dims):
                if i == sparse:
                    continue
                coord, scaled, nxt = w.reg("b64"), w.reg("b64"), w.reg("b64")
                w(f"cvt.u64.u32 {coord}, {mi[i]}")
                w(f"add.s64 {coord}, {coord}, {starts[dim]}")
                if checked[i]:
                    in_dim = w.reg("pred")
                    w(f"setp.lt.u64 {in_dim}, {coord}, {tensor.shape[dim]}")
                    ok = _and(lw, ok, in_dim)
                w(f"mul.lo.s64 {scaled}, {coord}, {tensor.strides[dim]}")
                w(f"mad.lo.s64 {nxt}, {scaled}, {element_size}, {address}")
                address = nxt
            dense_parts[key] = (address, ok)
        dense_address, ok = dense_parts[key]
        coord, narrow = sparse_coords[k]
        if checked[sparse]:
            in_dim = w.reg("pred")
            w(f"setp.lt.u64 {in_dim}, {coord}, {tensor.shape[sparse_dim]}")  # negatives fail
            ok = _and(lw, ok, in_dim)
        scaled, address = w.reg("b64"), w.reg("b64")
        if narrow is not None and narrow_stride is not None:
            # both fit in s32: their exact product is one widening multiply
            w(f"mul.wide.s32 {scaled}, {narrow}, {narrow_stride}")
        else:
            w(f"mul.lo.s64 {scaled}, {coord}, {tensor.strides[sparse_dim]}")
        w(f"mad.lo.s64 {address}, {scaled}, {element_size}, {dense_address}")
        result.append((address, ok))
    return result


def _gather_sparse(lw, index_tile: Tile, tile_shape, sparse: int) -> list[tuple]:
    """Per slot: the tensor coordinate along the sparse dim, read from the index tile, as
    (.b64 register, .b32 register holding it when the index type is at most 32 bits, else None)."""
    w = lw.w
    count = 1
    for d in tile_shape:
        count *= d
    scalar_type = index_tile.type.__class__((), index_tile.element)

    def coordinate(reg):
        scalar = Tile(scalar_type, [reg])
        return lw.scalar_s64(scalar), _narrow_s32(scalar)
    if index_tile.count == 1:
        return [coordinate(index_tile.scalar)] * lw.slots(count)
    coords = []
    if lw.T % 32 == 0 and index_tile.count <= 32 and 32 % index_tile.count == 0:
        # the index tile is whole in every warp (lane e holds element e): read it by shuffle
        for k in range(lw.slots(count)):
            mi = lw.multi_index(tile_shape, k)
            coords.append(coordinate(lw.shuffle(index_tile.scalar, index_tile.element, "idx",
                                                mi[sparse])))
        return coords
    [offset] = lw.reserve_smem([lw.smem_size_of(index_tile.type)])
    lw.smem_write(index_tile, offset)
    lw.barrier()
    for k in range(lw.slots(count)):
        mi = lw.multi_index(tile_shape, k)
        coords.append(coordinate(lw.smem_read(offset, mi[sparse], index_tile.element)))
    lw.barrier()
    return coords


# element types whose registers and memory type are the same width (ld/st.v need that)
def _vector_guards(lw, op, view, vec, addresses):
    """Per run of `vec` slots: (predicate for the vector access or None, predicate for the
    element-by-element tail or None). The run is wholly inside or wholly outside the tensor
    when the last dim is unchecked or its extent a multiple of vec; else the vector access
    needs its last element inside and the rest goes element by element."""
    w = lw.w
    last = view_dims(view.type)[-1]
    inbounds = list(op.attrs.get("inbounds") or ())
    checked = not (len(inbounds) >= len(view_dims(view.type)) and inbounds[-1])
    whole = not checked or view.tensor.shape_div[last] % vec == 0
    guards = []
    for start in range(0, len(addresses), vec):
        first_ok = addresses[start][1]
        if whole:
            guards.append((first_ok, None))
            continue
        all_in = addresses[start + vec - 1][1]
        tail = w.reg("pred")
        w(f"not.pred {tail}, {all_in}")
        guards.append((all_in, tail))
    return guards


def _guarded(lw, addresses, guard):
    """view_addresses' pairs with `guard` (a predicate register or None) and-ed in."""
    if guard is None:
        return addresses
    return [(address, _and(lw, ok, guard)) for address, ok in addresses]


def _vector_load(lw, op, view, result_type, padding, vec, indices, guard=None):
    from .layout import Blocked
    w = lw.w
    element = result_type.element
    layout = Blocked(result_type.num_elements, lw.T, vec)
    addresses = _guarded(lw, view_addresses(lw, op, view, indices, result_type.shape, layout),
                         guard)
    cls = dtypes.reg_class(element)
    memtype = dtypes.mem_type(element)
    space = lw.space_suffix()
    regs = []
    for (ok, tail), start in zip(_vector_guards(lw, op, view, vec, addresses),
                                 range(0, len(addresses), vec)):
        run = [w.reg(cls) for _ in range(vec)]
        if ok is not None:
            for reg in run:
                w(f"mov.{dtypes.mov_type(cls)} {reg}, {padding}")
        guard = f"@{ok} " if ok is not None else ""
        vector_access(w, "ld", space, memtype, run, addresses[start][0], guard)
        if tail is not None:
            for j, reg in enumerate(run):
                address, element_ok = addresses[start + j]
                both = _and(lw, tail, element_ok)
                w(f"@{both} ld{space}.{memtype} {reg}, [{address}]")
        regs += run
    return Tile(result_type, regs, layout)


@lowers("load_view_tko")
def lower_load_view(lw, op):
    order_after_token(lw, op)
    earlier = _same_load(lw, op)
    if earlier is not None and isinstance(lw.values.get(earlier.results[0]), Tile):
        lw.set(op.results[0], lw.get(earlier.results[0], any_layout=True))
        set_result_token(lw, op)
        return
    view: SubView = lw.get(op.operands["view"])
    prefetch = lw._cache.get(("prefetched", op))
    if prefetch is not None:  # loaded an iteration ahead (_Prefetch)
        lw.set(op.results[0], prefetch.take(op, view))
        set_result_token(lw, op)
        return
    staged = deferred(lw, op, lambda: _load_now(lw, op, view))
    if staged is not None:  # the tensor-core mma reading it copies it to its staging (cp.async)
        lw.set(op.results[0], staged)
        for result in op.results[1:]:  # the token: the copy is written later, by the mma
            lw.set(result, AFTER_MEMORY)
        return
    lw.set(op.results[0], _load_now(lw, op, view))
    set_result_token(lw, op)


def _load_now(lw, op, view, indices=None, guard=None) -> Tile:
    """The tile `op` loads, at `indices` (default its own index operands); `guard`: a predicate
    register that must hold for any element to be read."""
    result_type = op.results[0].type
    element = result_type.element
    indices = op.operands["index"] if indices is None else indices
    padding = padding_register(lw, element, getattr(view.type, "padding_value", None))
    quals = qualifiers(op, store=False)
    vec = vector_width(lw, op, view, result_type.shape, element, quals)
    if vec > 1 and flow_is_layout_free(lw, op.results[0]):
        return _vector_load(lw, op, view, result_type, padding, vec, indices, guard)
    layout = None
    if not isinstance(view.type, GatherScatterViewType):
        layout = load_layout(lw, op.results[0])
    regs = []
    for address, ok in _guarded(lw, view_addresses(lw, op, view, indices, result_type.shape,
                                                   layout), guard):
        regs.append(lw.load(lw.pointer_space, address, element, quals, predicate=ok, default=padding))
    return Tile(result_type, regs, layout)


def _vector_store(lw, op, view, tile, vec, quals):
    w = lw.w
    addresses = view_addresses(lw, op, view, op.operands["index"], tile.type.shape, tile.layout)
    memtype = dtypes.mem_type(tile.element)
    space = lw.space_suffix()
    for (ok, tail), start in zip(_vector_guards(lw, op, view, vec, addresses),
                                 range(0, len(addresses), vec)):
        run = tile.regs[start:start + vec]
        guard = f"@{ok} " if ok is not None else ""
        vector_access(w, "st", space, memtype, run, addresses[start][0], guard)
        if tail is not None:
            for j, reg in enumerate(run):
                address, element_ok = addresses[start + j]
                both = _and(lw, tail, element_ok)
                w(f"@{both} st{space}.{memtype} [{address}], {reg}")


def _first_warps(lw, threads: int) -> str:
    """Predicate: this thread is one of the first `threads`."""
    def make():
        reg = lw.w.reg("pred")
        lw.w(f"setp.lt.u32 {reg}, {lw.tid()}, {threads}")
        return reg
    return lw._cached(("first threads", threads), make)


@lowers("store_view_tko")
def lower_store_view(lw, op):
    order_after_token(lw, op)
    tile: Tile = lw.get(op.operands["tile"], any_layout=True)
    view: SubView = lw.get(op.operands["view"])
    quals = qualifiers(op, store=True)
    if tile.layout is not None and tile.layout is not UNIFORM \
            and not isinstance(view.type, GatherScatterViewType):
        # stored from the layout it is held in: each distinct slot once; copies of an element
        # in other threads store the same value
        vec = vector_width(lw, op, view, tile.type.shape, tile.element, quals)
        if vec > 1 and tile.layout == Blocked(tile.count, lw.T, vec):
            _vector_store(lw, op, view, tile, vec, quals)
            set_result_token(lw, op)
            return
        owner = None
        if isinstance(tile.layout, MmaAcc) and tile.layout.copies > 1:
            owner = _first_warps(lw, lw.T // tile.layout.copies)  # the copies' warps skip it
        elif vec > 1 and isinstance(tile.layout, MmaAcc):
            # slots 2j, 2j+1 of an mma accumulator are two neighbours in a row (even column)
            _vector_store(lw, op, view, tile, 2, quals)
            set_result_token(lw, op)
            return
        slots = distinct_slots(tile.layout, lw.T)
        addresses = view_addresses(lw, op, view, op.operands["index"], tile.type.shape,
                                   tile.layout, slots)
        for k, (address, ok) in zip(slots, addresses):
            lw.store(lw.pointer_space, address, tile.regs[k], tile.element, quals,
                     predicate=_and(lw, owner, ok))
        set_result_token(lw, op)
        return
    tile = lw.get(op.operands["tile"])
    addresses = view_addresses(lw, op, view, op.operands["index"], tile.type.shape)
    for k, (address, ok) in enumerate(addresses):
        guard = _and(lw, lw.owner(tile.count, k), ok)
        lw.store(lw.pointer_space, address, tile.slot(k), tile.element, quals, predicate=guard)
    set_result_token(lw, op)


def _same_layout(lw, values):
    """The operand tiles (None stays None) and their layout when all are in one Rows layout
    (anchors.pointer_anchors built them so) or one Blocked layout (vectors.pointer_layout) or
    splats, else all Cyclic and None. Other layouts (a reduction's result used as offsets) go to
    Cyclic, where no element has copies."""
    tiles = [lw.get(v, any_layout=True) if v is not None else None for v in values]
    layouts = {t.layout for t in tiles if t is not None and t.count > 1
               and t.layout is not UNIFORM}
    if len(layouts) == 1 and isinstance(next(iter(layouts)), (Rows, Blocked)):
        return tiles, layouts.pop()
    return [lw.get(v) if v is not None else None for v in values], None


def _vector_runs(lw, op, layout) -> int:
    """Elements per ld/st.v of a pointer access whose tiles are in `layout`: the Blocked layout
    vectors.pointer_layout chose for them (1: element by element)."""
    if not isinstance(layout, Blocked):
        return 1
    shape = op.operands["source" if "source" in op.operands else "destination"].type.shape
    if pointer_layout(lw, shape) is not layout:
        return 1
    return layout.vec


@lowers("load_ptr_tko")
def lower_load_ptr(lw, op):
    order_after_token(lw, op)
    (pointers, mask, pad), layout = _same_layout(
        lw, [op.operands["source"], op.operands.get("mask"), op.operands.get("paddingValue")])
    result_type = op.results[0].type
    element = result_type.element
    zero = padding_register(lw, element, None) if pad is None else None
    quals = qualifiers(op, store=False)
    regs = []
    vec = _vector_runs(lw, op, layout)
    if vec > 1:  # each run of vec slots: consecutive aligned elements under one mask bit
        cls, memtype = dtypes.reg_class(element), dtypes.mem_type(element)
        for start in range(0, layout.slots, vec):
            run = [lw.w.reg(cls) for _ in range(vec)]
            predicate = mask.slot(start) if mask is not None else None
            guard = ""
            if predicate is not None:
                guard = f"@{predicate} "
                for j, reg in enumerate(run):
                    default = pad.slot(start + j) if pad is not None else zero
                    lw.w(f"mov.{dtypes.mov_type(cls)} {reg}, {default}")
            vector_access(lw.w, "ld", lw.space_suffix(), memtype, run, pointers.slot(start),
                          guard)
            regs += run
        lw.set(op.results[0], Tile(result_type, regs, layout))
        set_result_token(lw, op)
        return
    for k in range(layout.slots if layout is not None else lw.slots(result_type.num_elements)):
        predicate = mask.slot(k) if mask is not None else None
        default = pad.slot(k) if pad is not None else zero
        regs.append(lw.load(lw.pointer_space, pointers.slot(k), element, quals, predicate=predicate,
                            default=default if predicate else None))
    lw.set(op.results[0], Tile(result_type, regs, layout))
    set_result_token(lw, op)


@lowers("store_ptr_tko")
def lower_store_ptr(lw, op):
    order_after_token(lw, op)
    (pointers, value, mask), layout = _same_layout(
        lw, [op.operands["destination"], op.operands["value"], op.operands.get("mask")])
    quals = qualifiers(op, store=True)
    vec = _vector_runs(lw, op, layout)
    if vec > 1 and pointers.layout is layout and value.layout in (layout, UNIFORM):
        memtype = dtypes.mem_type(value.element)
        for start in range(0, layout.slots, vec):
            guard = f"@{mask.slot(start)} " if mask is not None else ""
            run = [value.slot(start + j) for j in range(vec)]
            vector_access(lw.w, "st", lw.space_suffix(), memtype, run, pointers.slot(start), guard)
        set_result_token(lw, op)
        return
    if layout is not None and pointers.layout is layout:
        # stored from the layout it is held in: each distinct slot once (copies hold equal
        # values at equal addresses)
        for k in distinct_slots(layout, lw.T):
            lw.store(lw.pointer_space, pointers.regs[k], value.slot(k), value.element, quals,
                     predicate=mask.slot(k) if mask is not None else None)
        set_result_token(lw, op)
        return
    pointers = lw.get(op.operands["destination"])
    value = lw.get(op.operands["value"])
    mask = op.operands.get("mask")
    mask = lw.get(mask) if mask is not None else None
    for k in range(lw.slots(value.count)):
        guard = _and(lw, lw.owner(value.count, k), mask.slot(k) if mask is not None else None)
        lw.store(lw.pointer_space, pointers.slot(k), value.slot(k), value.element, quals, predicate=guard)
    set_result_token(lw, op)


@lowers("offset")
def lower_offset(lw, op):
    w = lw.w
    (pointers, offsets), layout = _same_layout(lw, [op.operands["ptr"], op.operands["offset"]])
    result_type = op.results[0].type
    size = dtypes.byte_size(result_type.element.pointee)
    regs = []
    for k in range(layout.slots if layout is not None else lw.slots(result_type.num_elements)):
        out = w.reg("b64")
        if offsets.element.name == "i64":
            w(f"mad.lo.s64 {out}, {offsets.slot(k)}, {size}, {pointers.slot(k)}")
        else:
            wide = w.reg("b64")
            w(f"mul.wide.s32 {wide}, {offsets.slot(k)}, {size}")
            w(f"add.s64 {out}, {wide}, {pointers.slot(k)}")
        regs.append(out)
    lw.set(op.results[0], Tile(result_type, regs, layout))


@lowers("get_global")
def lower_get_global(lw, op):
    name = op.attrs["name"]
    try:
        lw.module_global(name)
    except KeyError:
        raise lw.error(op, f"no module global named {name!r}")
    w = lw.w
    address, generic = w.reg("b64"), w.reg("b64")
    w(f"mov.u64 {address}, {lw.global_symbol(name)}")
    w(f"cvta.global.u64 {generic}, {address}")
    lw.set(op.results[0], Tile(op.results[0].type, [generic]))


@lowers("memory_fence_alias_tko")
def lower_fence_alias(lw, op):
    # Aliasing views may be touched by different threads of the CTA: order through a CTA barrier.
    lw.barrier()
    set_result_token(lw, op)


@lowers("gdc_launch_dependents_tko", "gdc_wait_tko")
def lower_gdc(lw, op):
    if lw.arch >= 90:
        lw.w("griddepcontrol.launch_dependents" if op.name.startswith("gdc_launch")
             else "griddepcontrol.wait")
    set_result_token(lw, op)


ALLOCA_LIMIT = 48 * 1024  # static shared memory per CTA without opting in to more


@lowers("alloca")
def lower_alloca(lw, op):
    """Scratch memory private to the tile block: a .shared buffer of the kernel, handed out as a
    generic address (the kernel then addresses all pointers generically). The `global` flag is
    honoured only in that the buffer lives as long as the tile block; it is still on-chip."""
    pointee = op.results[0].type.element.pointee
    size = max(1, dtypes.byte_size(pointee)) * int(op.attrs["num_elem"])
    alignment = max(int(op.attrs.get("alignment") or 1), dtypes.byte_size(pointee), 1)
    if alignment & (alignment - 1):
        raise lw.error(op, f"alignment {alignment} is not a power of two")
    # allocas are static .shared buffers (the exchange area moves to dynamic shared memory when
    # both do not fit in 48 KiB together, see compiler.py), so only allocas count here
    used = lw.alloca_bytes()
    if used + size > ALLOCA_LIMIT:
        raise lw.error(op, f"{size} bytes of tile-block scratch (with {used} bytes already used) "
                           f"exceed the {ALLOCA_LIMIT}-byte static shared memory the JIT places "
                           "allocas in")
    symbol = f"{lw.prefix}_alloca{len(lw.allocas)}"
    lw.allocas.append((symbol, alignment, size))
    w = lw.w
    address, generic = w.reg("b64"), w.reg("b64")
    w(f"mov.u64 {address}, {symbol}")
    w(f"cvta.shared.u64 {generic}, {address}")
    lw.set(op.results[0], Tile(op.results[0].type, [generic]))


# -- a view load that reads what an earlier one read ---------------------------------------------
_LEAVING = (Exit.NEXT, Exit.LEAVE_LOOP, Exit.LEAVE_KERNEL)  # continue, break, return


def _exits_early(op) -> bool:
    """Whether a break, return or continue inside `op` (a loop) is anything but the last op of
    a loop body: code after it in the body may not run."""
    ends = {inner.regions[0].blocks[0].ops[-1] for inner in op.walk()
            if is_loop(inner) and inner.regions[0].blocks[0].ops}
    return any(inner.spec.exit in _LEAVING and inner not in ends for inner in op.walk())


def _same_load(lw, op):
    """An earlier view load whose tile `op` may take instead of reading memory again: the same
    token, the same view (or a partition view of the same tensor view with the same type), the
    same indices (the same value, or equal constants, counting the induction variable of a loop
    that runs once as its start), the same attributes but hints, in straight-line code before
    `op` (every op around it up to a block that also holds `op` is a loop that runs once, with
    no early exit), and no op between the two that may write memory (the same token would let
    `op` miss such a write, but the interpreter and the other paths read after it). NVIDIA's
    persistent RMSNorm loads each row twice, in two such loops: once for its sum of squares,
    once to scale it. None where there is no such load."""
    return _same_loads(lw).found.get(op)


def _same_loads(lw) -> "_SameLoads":
    """The function's _SameLoads, made once."""
    key = ("same loads",)
    if key not in lw._cache:
        lw._cache[key] = _SameLoads(lw)
    return lw._cache[key]


class _SameLoads:
    """_same_load's answer for a whole function, in one walk: `found` (later load -> earlier),
    `once` (induction variable of a loop that runs once -> its start) and `once_loops`. A class,
    not nested functions (a recursive closure is a reference cycle, and lowering must free the
    module without the collector); it keeps no reference to the lowerer once made."""

    def __init__(self, lw):
        self.found, self.once, self.once_loops = {}, {}, set()
        self.lw, self.forward = lw, lw.forward
        self.visit(lw.function.body, {})
        self.lw = self.forward = None

    def runs_once(self, loop) -> bool:
        from .folding import trip_count
        if "lowerBound" not in loop.operands:
            return False
        trip = trip_count(self.lw, loop)
        body = loop.regions[0].blocks[0]
        if trip is None or trip[2] != 1 or not body.ops or _exits_early(loop):
            return False
        self.once[body.args[0]] = trip[0]
        self.once_loops.add(loop)
        return True

    @staticmethod
    def may_write(op) -> bool:
        return any(writes_memory(inner) for inner in op.walk())

    def index_key(self, value):
        from .folding import constant_array
        value = self.forward.get(value, value)
        if value in self.once:
            return ("constant", self.once[value])
        found = constant_array(self.lw, value)
        if found is not None and found.size == 1:
            return ("constant", int(found.flat[0]) if found.dtype.kind in "iub"
                    else float(found.flat[0]))
        return value

    def load_key(self, load):
        token = load.operands.get("token")
        attrs = tuple(sorted((name, repr(v)) for name, v in load.attrs.items()
                             if name != "optimization_hints"))
        view = self.forward.get(load.operands["view"], load.operands["view"])
        return (None if token is None else self.forward.get(token, token),
                _tensor_of(self.lw, view), str(view.type),
                tuple(self.index_key(v) for v in load.operands["index"]),
                str(load.results[0].type), attrs)

    def visit(self, block, seen) -> None:
        """`seen`: key -> load, for the weak loads whose tiles stand in straight-line code here
        with no write since."""
        for inner in block.ops:
            if _ROLES.get(inner.name) == LOADS and not self.lw.chunked.get(inner) and \
                    inner.attrs.get("memory_ordering_semantics") is MemoryOrderingSemantics.WEAK:
                key = self.load_key(inner)
                if key in seen:
                    self.found[inner] = seen[key]
                else:
                    seen[key] = inner
            loop = is_loop(inner)
            once = loop and self.runs_once(inner)
            for region in inner.regions:
                for nested in region.blocks:
                    if once:
                        self.visit(nested, seen)  # its loads stay valid after it
                    elif not loop:
                        self.visit(nested, dict(seen))  # an if's: its loads may not run
                    else:  # a loop may write later in its body, before its next iteration
                        self.visit(nested, {})
            if self.may_write(inner):
                seen.clear()  # a later load reads after the write


# -- loads an iteration ahead in persistent loops -------------------------------------------------
def _memory_of(lw, view):
    """The entry parameter whose memory `view` reads or writes: back through the views it is
    made from (the makers' tensor_view operand), make_tensor_view's base and ops that pass an
    operand on (the op table's `forwards`); None where the chain ends elsewhere (a pointer
    computed in the kernel may point anywhere)."""
    value = lw.forward.get(view, view)
    for _ in range(16):
        owner = value.owner
        if owner is lw.function.body:
            return value
        if owner is None or not hasattr(owner, "spec"):
            return None
        operands = owner.operands
        if "tensor_view" in operands:
            value = operands["tensor_view"]
        elif VIEW_MAKERS.get(owner.name) == TENSOR_VIEW:
            value = operands["base"]
        elif owner.spec.forwards:
            value = operands[owner.spec.forwards]
        else:
            return None
        value = lw.forward.get(value, value)
    return None


def _tensor_of(lw, view):
    """The tensor view a partition view is made from (else the view itself)."""
    owner = view.owner
    if owner is not None and hasattr(owner, "spec") and \
            VIEW_MAKERS.get(owner.name) == PARTITION_VIEW:
        tensor = owner.operand_values[0]
        return lw.forward.get(tensor, tensor)
    return view


@pipelines
def _prefetch_loads(lw, op, loop):
    """A _Prefetch for persistent `for` op `op` (it steps by the grid size, so one CTA an SM runs
    it and no other CTA hides a load's latency) whose body ends in its only `continue` and holds
    no mma: its view loads whose view and token come from before the loop and whose indices
    are the induction variable, values from before the loop or the induction variables of
    loops inside it that run once (those loads are in straight-line code), except loads that
    take an earlier load's tile (_same_load) and loads of a parameter's memory the loop writes;
    None if there is none, or if the loop writes memory other than through a view of a
    parameter (_memory_of)."""
    if lw.chunk is not None or not steps_by_the_grid(lw, op):
        return None
    body = op.regions[0].blocks[0]
    if not body.ops or not body.ops[-1].spec.terminator:
        return None
    if _exits_early(op):
        return None  # a continue before the last op would skip the moves of later loads
    inside, written = set(), set()  # written: the parameters whose memory the loop writes
    for inner in op.walk():
        if is_mma(inner):
            return None
        if inner is not op:
            inside.update(inner.results)
        if writes_memory(inner):
            memory = _memory_of(lw, inner.operands["view"]) \
                if _ROLES.get(inner.name) == STORES else None
            if memory is None:
                return None  # a write to memory not known: every load stays in its place
            written.add(memory)
        for region in inner.regions:
            for block in region.blocks:
                inside.update(block.args)
    reuse = _same_loads(lw)
    loads = {}
    forward = lw.forward
    outer = body.args[0]

    blocks = [(body, {})]  # straight-line blocks: the body, loops inside it that run once
    while blocks:
        block, ivs = blocks.pop()
        for inner in block.ops:
            if _ROLES.get(inner.name) == LOADS and inner not in reuse.found and \
                    not lw.chunked.get(inner):
                view, token = inner.operands["view"], inner.operands.get("token")
                memory = _memory_of(lw, view)
                if memory is None or memory in written:
                    continue  # it may read what an iteration writes: in order, as written
                if forward.get(view, view) not in inside and (
                        token is None or forward.get(token, token) not in inside) and all(
                        forward.get(v, v) is outer or forward.get(v, v) in ivs or
                        forward.get(v, v) not in inside for v in inner.operands["index"]):
                    loads[inner] = dict(ivs)
            elif inner in reuse.once_loops:
                nested = inner.regions[0].blocks[0]
                blocks.append((nested, {**ivs, nested.args[0]: reuse.once[nested.args[0]]}))
    return _Prefetch(lw, loop, outer, loads) if loads else None


class _Prefetch:
    """Each listed view load of a persistent loop's body, issued one iteration ahead into
    registers: the prologue loads iteration 0's tiles; in each iteration the load takes the
    registers loaded before and issues the next iteration's tile into fresh ones, which
    `continue` moves into the first ones. Accesses past the loop's bound are predicated off (a
    branch around them would end the straight-line code that overlaps the load with the
    iteration's work). So a load's latency overlaps the previous iteration's work: cuTile's weak
    view loads whose token comes from before the loop are ordered with nothing it writes."""

    def __init__(self, lw, loop, outer, loads):
        self.lw, self.loop, self.outer, self.loads = lw, loop, outer, loads
        self.current, self.pending = {}, []
        self.within = {}  # induction register -> the predicate that it is before the bound
        self.later = None  # the next iteration's induction register, made by the first take

    def _indices(self, load, iv: str):
        """`load`'s index operands with the induction variable at register `iv` and those of
        the loops inside that run once at their one value."""
        lw = self.lw
        out = []
        for value in load.operands["index"]:
            found = lw.forward.get(value, value)
            if found is self.outer or found in self.loads[load]:
                stand = LaterIteration()
                if found is self.outer:
                    reg = iv
                else:
                    cls = dtypes.reg_class(value.type.element)
                    reg = lw.w.reg(cls)
                    lw.w(f"mov.{dtypes.mov_type(cls)} {reg}, {self.loads[load][found]}")
                lw.set(stand, Tile(value.type, [reg]))
                value = stand
            out.append(value)
        return out

    def _issue(self, load, view, iv: str) -> Tile:
        w = self.lw.w
        within = self.within.get(iv)
        if within is None:  # once for all of an iteration's loads (they are straight-line code)
            within = self.within[iv] = w.reg("pred")
            w(f"setp.lt.{self.loop.kind} {within}, {iv}, {self.loop.upper}")
        with self.lw.fresh_scope():  # computed for another iteration: not reused for this one
            return _load_now(self.lw, load, view, self._indices(load, iv), within)

    def prologue(self) -> None:
        lw = self.lw
        for load in self.loads:
            order_after_token(lw, load)  # its token's writes (before the loop) come first
            self.current[load] = self._issue(load, lw.get(load.operands["view"]), self.loop.iv)
            lw._cache[("prefetched", load)] = self

    def take(self, load, view) -> Tile:
        """The tile loaded for this iteration; issues the next iteration's."""
        lw = self.lw
        w = lw.w
        if self.later is None:
            self.later = w.reg("b64" if self.loop.kind.endswith("64") else "b32")
            w(f"add.{self.loop.kind} {self.later}, {self.loop.iv}, {self.loop.step}")
        current, following = self.current[load], self._issue(load, view, self.later)
        if following.layout != current.layout or len(following.regs) != len(current.regs):
            raise lw.error(load, "a load issued an iteration ahead changed its layout")
        self.pending.append((current, following))
        return current

    def latch(self) -> None:
        """At `continue`: the next iteration's tiles become the current ones."""
        w = self.lw.w
        for current, following in self.pending:
            cls = dtypes.reg_class(current.element)
            for now, later in zip(current.regs, following.regs):
                w(f"mov.{dtypes.mov_type(cls)} {now}, {later}")

    def finish(self) -> None:
        for load in self.loads:
            del self.lw._cache[("prefetched", load)]
