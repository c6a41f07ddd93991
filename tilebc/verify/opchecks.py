"""Per-op constraints too specific for the generic building blocks (mma, views, reduce, …).

Facts come from the Tile IR spec and NVIDIA's public op definitions (cuda-tile Ops.td and its
verifiers); each function checks one op family and reports the first problem it finds.
"""
from __future__ import annotations

import re

from ..ir.attrs import (BoolAttr, BoundedAttr, DenseElementsAttr, DivByAttr, FloatAttr,
                        IntegerAttr, SameElementsAttr)
from ..ir.types import (ELEMENT_TYPES, GatherScatterViewType, PartitionViewType, PointerType,
                        StridedViewType, TensorViewType, TileType, scalar)
from ..ops.enums import (AtomicRMWMode, MemoryOrderingSemantics as Order, MemoryScope,
                         MultimemReductionKind, PtrAttr, RoundingMode as RM,
                         Signedness)
from ..numeric.formats import FLOAT_FORMATS
from ..ops.table import by_mnemonic
from .diagnostics import WARNING
from .constraints import INT, context_tail, element_bits, role, shape_text, value

i1, i8, i32, i64 = (ELEMENT_TYPES[n] for n in ("i1", "i8", "i32", "i64"))
f16, bf16, f32, f64 = (ELEMENT_TYPES[n] for n in ("f16", "bf16", "f32", "f64"))
tf32 = ELEMENT_TYPES["tf32"]
f8e4m3, f8e5m2 = ELEMENT_TYPES["f8E4M3FN"], ELEMENT_TYPES["f8E5M2"]
f8e8m0, f4 = ELEMENT_TYPES["f8E8M0FNU"], ELEMENT_TYPES["f4E2M1FN"]
# Ops whose result is the literal an attribute holds, by that attribute's name.
_LITERALS = by_mnemonic({"constant": "value"}, "verifier literal ops")
# Combiners: whether each result keeps the combined dimension (a running scan) or drops it.
_KEEPS_DIM = by_mnemonic({"reduce": False, "scan": True}, "verifier combiners")


def _shape(t) -> str:
    return shape_text(t)


# ---- shapes of data-movement ops ---------------------------------------------------------------

def broadcast(ctx, op) -> bool:
    source, result = op.operands["source"].type, op.results[0].type
    for src, res in zip(source.shape, result.shape):
        if src != res and src != 1:
            return ctx.report("shape.broadcast", op, f"source shape {_shape(source)} cannot "
                              f"broadcast to {_shape(result)}; only size-1 dimensions may grow")
    return True


def cat(ctx, op) -> bool:
    lhs, rhs = op.operands["lhs"].type, op.operands["rhs"].type
    result = op.results[0].type
    dim = op.attrs["dim"]
    if not 0 <= dim < lhs.rank:
        return ctx.report("attr.dim", op, f"dim {dim} is outside [0, {lhs.rank})")
    for axis in range(lhs.rank):
        want = lhs.shape[axis] + rhs.shape[axis] if axis == dim else lhs.shape[axis]
        if axis != dim and rhs.shape[axis] != lhs.shape[axis]:
            return ctx.report("shape.cat", op, f"lhs and rhs shapes {_shape(lhs)} and "
                              f"{_shape(rhs)} differ outside dim {dim}")
        if result.shape[axis] != want:
            return ctx.report("shape.cat", op, f"result shape {_shape(result)} should be "
                              f"{want} along dim {axis}")
    return True


def reshape(ctx, op) -> bool:
    source, result = op.operands["source"].type, op.results[0].type
    if source.num_elements != result.num_elements:
        return ctx.report("shape.reshape", op, f"reshape from {_shape(source)} to "
                          f"{_shape(result)} changes the number of elements")
    return True


def permute(ctx, op) -> bool:
    source, result = op.operands["source"].type, op.results[0].type
    permutation = list(op.attrs["permutation"])
    prefix = f"'cuda_tile.{op.name}' op "
    if source.rank < 2:
        return ctx.report("shape.permute", op, f"{prefix}expects at least rank 2, but got: "
                                               f"{source.rank} (the source's rank)")
    ours = f"permutation {permutation} must be a permutation of 0..{source.rank - 1}"
    if len(permutation) != source.rank:
        return ctx.report("attr.permutation", op, f"{prefix}expect permutation size "
                                                  f"({len(permutation)}) to equal the rank of the "
                                                  f"source ({source.rank}) ({ours})")
    for index, element in enumerate(permutation):
        if not 0 <= element < source.rank:
            return ctx.report("attr.permutation", op, f"{prefix}permutation element at index "
                                                      f"{index} ({element}) is out of bound "
                                                      f"[0, {source.rank}) ({ours})")
    if len(set(permutation)) != len(permutation):
        return ctx.report("attr.permutation", op, f"{prefix}expect permutation elements to be "
                                                  f"unique ({ours})")
    expected = tuple(source.shape[p] for p in permutation)
    for index, (want, got) in enumerate(zip(expected, result.shape)):
        if want != got:
            return ctx.report("shape.permute", op, f"{prefix}result shape invalid at index "
                                                   f"{index}, expected: {want}, but got: {got} "
                                                   f"(result shape {_shape(result)} should be "
                                                   f"{'x'.join(map(str, expected))})")
    return True


def _tile_indices(ctx, op, big, small, indices, what: str) -> bool:
    for axis, (outer, inner) in enumerate(zip(big.shape, small.shape)):
        if outer % inner:
            return ctx.report("shape.subtile", op, f"{what} dimension {axis} size {inner} does "
                              f"not divide {outer}")
    if len(indices) != big.rank:
        return ctx.report("operand.count", op, f"expected {big.rank} indices, got {len(indices)}")
    for position, index in enumerate(indices):
        if index.type != scalar(i32):
            return ctx.report("type.operand", op, f"index {position} must be tile<i32>, got "
                                                  f"{index.type}")
        _index_bounds(ctx, op, big, small, position, index)
    return True


def _index_bounds(ctx, op, big, small, position: int, index) -> None:
    known = _constant_i32(index)
    last = big.shape[position] // small.shape[position] - 1
    if known is not None and not 0 <= known <= last:
        # undefined behaviour at run time, but NVIDIA's verifier only warns
        ctx.report("index.bounds", op, f"index {position} is {known}, outside the "
                                       f"{last + 1} sub-tiles along dimension {position}",
                   "warning")


def _all_index_bounds(ctx, op, big, small, indices) -> bool:
    """_tile_indices' warnings alone, for indices whose types and count it found right."""
    for position, index in enumerate(indices):
        _index_bounds(ctx, op, big, small, position, index)
    return True


def _constant_i32(value_):
    """The value of a scalar i32 defined by `constant`, else None."""
    owner = value_.owner
    literal = _LITERALS.get(getattr(getattr(owner, "spec", None), "mnemonic", None))
    if literal is None:
        return None
    dense = owner.attrs.get(literal)
    if not isinstance(dense, DenseElementsAttr) or len(dense.data) != 4:
        return None
    return int.from_bytes(dense.data, "little", signed=True)


def _extract_bounds(ctx, op) -> bool:
    return _all_index_bounds(ctx, op, op.operands["source"].type, op.results[0].type,
                             op.operands["indices"])


def _insert_bounds(ctx, op) -> bool:
    return _all_index_bounds(ctx, op, op.operands["destination"].type,
                             op.operands["source"].type, op.operands["indices"])


@context_tail(_extract_bounds)  # reads the defining ops of its indices
def extract(ctx, op) -> bool:
    return _tile_indices(ctx, op, op.operands["source"].type, op.results[0].type,
                         op.operands["indices"], "result")


@context_tail(_insert_bounds)  # reads the defining ops of its indices
def insert(ctx, op) -> bool:
    return _tile_indices(ctx, op, op.operands["destination"].type, op.operands["source"].type,
                         op.operands["indices"], "source")


def iota(ctx, op) -> bool:
    result = op.results[0].type
    prefix = f"'cuda_tile.{op.name}' op "
    if result.rank != 1:
        return ctx.report("shape.iota", op, f"{prefix}expects result type to be 1-d tile "
                                            f"(got {result}, of rank {result.rank})")
    if result.element.bits < 64 and result.shape[0] > (1 << result.element.bits):
        return ctx.report("shape.iota", op, f"{prefix}the number of elements {result.shape[0]} "
                                            f"exceeds the maximum value of element type "
                                            f"'{result.element}' ({result.shape[0]} elements "
                                            f"exceed the range of {result.element})")
    return True


def _packed_bits(t) -> int:
    return element_bits(t.element) * t.num_elements


def pack_unpack(ctx, op) -> bool:
    source, result = op.operands["source"].type, op.results[0].type
    if element_bits(source.element) == element_bits(result.element):
        return ctx.report("type.pack", op, f"source and result element widths must differ, "
                                           f"both are {element_bits(source.element)} bits")
    if _packed_bits(source) % 8 or _packed_bits(result) % 8:
        return ctx.report("type.pack", op, "source and result tiles must fill whole bytes")
    if _packed_bits(source) != _packed_bits(result):
        return ctx.report("type.pack", op, f"source is {_packed_bits(source) // 8} bytes but "
                                           f"result is {_packed_bits(result) // 8} bytes")
    return True


# ---- conversions -------------------------------------------------------------------------------

def int_width(grow: bool):
    def check(ctx, op) -> bool:
        source, target = op.operands["from"].type.element, op.results[0].type.element
        prefix = f"'cuda_tile.{op.name}' op "
        if grow and target.bits <= source.bits:
            return ctx.report("type.width", op, f"{prefix}extending to smaller or identical "
                                                f"integer (exti must widen: {source} to {target})")
        if not grow and target.bits >= source.bits:
            return ctx.report("type.width", op, f"{prefix}truncating to larger or identical "
                                                f"integer (trunci must narrow: {source} to "
                                                f"{target})")
        return True
    return check


def bitcast(ctx, op) -> bool:
    source, result = op.operands["source"].type.element, op.results[0].type.element
    if source.bits != result.bits:
        return ctx.report("type.width", op, f"'cuda_tile.{op.name}' op types must be equal "
                          f"width (bitcast needs equal widths, {source} is {source.bits} bits "
                          f"and {result} is {result.bits} bits)")
    return True


# (largest exponent, smallest normal exponent, mantissa bits) of each float type: a conversion is
# widening (exact, so any rounding mode will do) when the target covers all three. f8E8M0FNU spans
# 2^-127..2^127, below the normal range of bf16/f32; fnv8E5M3FNU's all-ones exponent is finite.
_FLOAT_RANGE = {name: ((f.max_bits >> f.man_bits) - f.bias, f.emin, f.man_bits)
                for name, f in FLOAT_FORMATS.items()}
_IEEE = (RM.NEAREST_EVEN, RM.ZERO, RM.NEGATIVE_INF, RM.POSITIVE_INF)
_LOW_PRECISION = ("f8E4M3FN", "f8E5M2", "f4E2M1FN", "fnv8E5M3FNU")
# Narrowing conversions with their own set of modes (hardware conversions that take them).
_SPECIAL_NARROWING = {("f32", "tf32"): (RM.NEAREST_EVEN, RM.ZERO, RM.NEAREST_AWAY),
                      ("f64", "f32"): _IEEE}


def _widening(source, target) -> bool:
    src, dst = _FLOAT_RANGE.get(source.name), _FLOAT_RANGE.get(target.name)
    return bool(src and dst and dst[0] >= src[0] and dst[1] <= src[1] and dst[2] >= src[2])


def ftof_rounding_modes(source, target) -> tuple:
    """Rounding modes NVIDIA's tileiras 13.5 accepts for ftof, in the order it decides (probed
    over every pair of float types and mode, see tests/test_verify_differential.py; the public
    cuda-tile 13.3 verifier is stricter: nearest_even only, zero/positive_inf into f8E8M0FNU)."""
    if target.name == "f8E8M0FNU":
        return (RM.ZERO, RM.POSITIVE_INF)
    if target.name in _LOW_PRECISION:
        return (RM.NEAREST_EVEN,)  # even when exact (f4E2M1FN to f8E4M3FN)
    special = _SPECIAL_NARROWING.get((source.name, target.name))
    if special is not None:
        return special
    if _widening(source, target):
        return _IEEE + (RM.NEAREST_AWAY,)
    return (RM.NEAREST_EVEN, RM.ZERO)


def ftof(ctx, op) -> bool:
    source, target = op.operands["from"].type, op.results[0].type
    if source == target:
        return ctx.report("type.noop", op, f"'cuda_tile.{op.name}' op converting tiles must "
                                           f"not be a no-op (converting {target} to itself)")
    allowed = ftof_rounding_modes(source.element, target.element)
    mode = op.attrs["rounding_mode"]
    if mode not in allowed:
        why = (" (exact, but into a low-precision type)"
               if target.element.name in _LOW_PRECISION and _widening(source.element, target.element)
               else "")
        return ctx.report("attr.rounding", op, f"'cuda_tile.{op.name}' op "
                          f"{_ftof_rounding_words(source.element, target.element, allowed)} "
                          f"(rounding_mode {mode.keyword} is not allowed for {source.element} to "
                          f"{target.element}{why})")
    return True


def _ftof_rounding_words(source, target, allowed) -> str:
    """What tileiras 13.5 says of a rounding mode `ftof_rounding_modes` refuses (each case of
    that function has its own sentence there)."""
    quoted = [f"'{m.keyword}'" for m in allowed]
    listed = " and ".join(quoted) if len(quoted) < 3 else \
        ", ".join(quoted[:-1]) + ", and " + quoted[-1]
    verb = "is" if len(quoted) == 1 else "are"
    if target.name == "f8E8M0FNU":
        return f"invalid rounding mode specified for conversion to f8E8M0FNU. Only {listed} {verb} supported"
    if target.name in _LOW_PRECISION:
        return (f"invalid rounding mode specified for conversion to low-precision type. Only "
                f"{listed} {verb} supported")
    if (source.name, target.name) in _SPECIAL_NARROWING:
        return (f"invalid rounding mode specified for conversion from {source.name} to "
                f"{target.name}. Only {listed} {verb} supported")
    if _widening(source, target):
        return (f"invalid rounding mode specified for widening conversion. Only IEEE float "
                f"rounding modes are supported: {', '.join(quoted)}")
    return (f"invalid rounding mode specified. Only {listed} {verb} supported for narrowing "
            f"conversions to standard types")


def pointer_cast(source_name: str, result_name: str):
    """int_to_ptr / ptr_to_int / ptr_to_ptr keep the shape."""
    def check(ctx, op) -> bool:
        source, result = value(op, source_name).type, value(op, result_name).type
        if source.shape != result.shape:
            return ctx.report("shape.mismatch", op, f"result shape {_shape(result)} does not "
                                                    f"match source shape {_shape(source)}")
        return True
    return check


# ---- matrix multiply ---------------------------------------------------------------------------

# lhs/rhs element -> accumulator elements mmaf accepts (cuda-tile MmaFOp::verify; f4E2M1FN inputs
# only go through mmaf_scaled: tileiras refuses them here)
MMAF_TYPES = {f8e4m3: (f16, f32), f8e5m2: (f16, f32), f16: (f16, f32),
              bf16: (f32,), tf32: (f32,), f32: (f32,), f64: (f64,)}


def mma_shapes(ctx, op) -> bool:
    lhs, rhs, acc = (op.operands[n].type for n in ("lhs", "rhs", "acc"))
    if lhs.rank not in (2, 3) or rhs.rank != lhs.rank or acc.rank != lhs.rank:
        return ctx.report("shape.mma", op, f"lhs, rhs and acc must all be 2-d or all 3-d, got "
                          f"{_shape(lhs)}, {_shape(rhs)} and {_shape(acc)}")
    batch = lhs.rank - 2
    if batch and not lhs.shape[0] == rhs.shape[0] == acc.shape[0]:
        return ctx.report("shape.mma", op, f"batch sizes of lhs {_shape(lhs)}, rhs "
                          f"{_shape(rhs)} and acc {_shape(acc)} differ")
    m, k = lhs.shape[batch:]
    k2, n = rhs.shape[batch:]
    if k != k2:
        return ctx.report("shape.mma", op, f"lhs {_shape(lhs)} and rhs {_shape(rhs)} disagree "
                                           f"on K ({k} vs {k2})")
    if acc.shape[batch:] != (m, n):
        return ctx.report("shape.mma", op, f"acc shape {_shape(acc)} should be {m}x{n} for lhs "
                                           f"{_shape(lhs)} and rhs {_shape(rhs)}")
    return True


def mmaf_types(ctx, op) -> bool:
    element = op.operands["lhs"].type.element
    acc = op.operands["acc"].type.element
    allowed = MMAF_TYPES.get(element)
    if allowed is None:
        return ctx.report("type.mma", op, f"mmaf does not take {element} inputs")
    if acc not in allowed:
        return ctx.report("type.mma", op, f"{element} inputs need a "
                          f"{' or '.join(map(str, allowed))} accumulator, got {acc}")
    return True


def mmaf_scaled(ctx, op) -> bool:
    lhs, rhs, lhs_scale, rhs_scale = (op.operands[n].type
                                      for n in ("lhs", "rhs", "lhs_scale", "rhs_scale"))
    batch = lhs.rank - 2
    if lhs_scale.rank != lhs.rank or rhs_scale.rank != lhs.rank:
        return ctx.report("shape.mma", op, "scales must have the rank of lhs and rhs")
    if batch and not (lhs.shape[0] == lhs_scale.shape[0] and rhs.shape[0] == rhs_scale.shape[0]):
        return ctx.report("shape.mma", op, "scale batch sizes must match lhs and rhs")
    if lhs.shape[batch] != lhs_scale.shape[batch] or rhs.shape[batch + 1] != rhs_scale.shape[batch + 1]:
        return ctx.report("shape.mma", op, f"scale shapes {_shape(lhs_scale)} and "
                          f"{_shape(rhs_scale)} must keep M of lhs and N of rhs")
    k, scale_k = lhs.shape[batch + 1], lhs_scale.shape[batch + 1]
    if scale_k != rhs_scale.shape[batch]:
        return ctx.report("shape.mma", op, f"lhs_scale and rhs_scale disagree on K blocks "
                                           f"({scale_k} vs {rhs_scale.shape[batch]})")
    if k % scale_k:
        return ctx.report("shape.mma", op, f"K blocks of the scales ({scale_k}) must divide "
                                           f"K ({k})")
    element, scale = lhs.element, lhs_scale.element
    if scale == f8e4m3 and element != f4:
        return ctx.report("type.mma", op, f"f8E4M3FN scales need f4E2M1FN inputs, got {element}")
    block = k // scale_k
    allowed_blocks = {(f8e4m3, f8e8m0): (32,), (f8e5m2, f8e8m0): (32,), (f4, f8e4m3): (16,),
                      (f4, f8e8m0): (16, 32)}.get((element, scale), ())
    if block not in allowed_blocks:
        return ctx.report("shape.mma", op, f"{element} inputs with {scale} scales need a scale "
                          f"block of {' or '.join(map(str, allowed_blocks))} elements, got {block}")
    return True


# ---- views -------------------------------------------------------------------------------------

def make_tensor_view(ctx, op) -> bool:
    view = op.results[0].type
    pointee = op.operands["base"].type.element.pointee
    if pointee != view.element:
        return ctx.report("type.view", op, f"base points to {pointee} but the tensor_view holds "
                                           f"{view.element}")
    base_attr = op.operands["base"].type.element.ptr_attr
    if base_attr != view.ptr_attr:
        return ctx.report("type.view", op, f"base ptr_attr {base_attr.keyword} does not match the "
                                           f"tensor_view's {view.ptr_attr.keyword}")
    for name, dims in (("dynamicShape", view.shape), ("dynamicStrides", view.strides)):
        wanted = sum(1 for d in dims if d is None)
        given = op.operands[name]
        if len(given) != wanted:
            return ctx.report("operand.count", op, f"expected {wanted} {name} operands (one per "
                              f"'?' in {view}), got {len(given)}")
    dynamic = list(op.operands["dynamicShape"]) + list(op.operands["dynamicStrides"])
    for v in dynamic:
        if v.type != dynamic[0].type:
            return ctx.report("type.mismatch", op, f"dynamic shape and stride operands must share "
                              f"one type, got {dynamic[0].type} and {v.type}")
    return True


def make_subview(ctx, op) -> bool:
    given, view = op.operands["tensor_view"].type, op.results[0].type
    if view.tensor_view != given:
        return ctx.report("type.view", op, f"operand tensor_view type {given} does not match the "
                                           f"result's {view.tensor_view}")
    return True


def view_tile_type(view) -> TileType:
    return TileType(tuple(view.tile_shape), view.tensor_view.element)


def _view_indices(ctx, op, view, indices) -> bool:
    if len(indices) != len(view.tile_shape):
        return ctx.report("operand.count", op, f"expected {len(view.tile_shape)} index operands "
                                               f"for {view}, got {len(indices)}")
    scalars = list(enumerate(indices))
    if isinstance(view, GatherScatterViewType):
        sparse = view.sparse_dim
        gather = indices[sparse].type
        wanted = TileType((view.tile_shape[sparse],), gather.element) if isinstance(gather, TileType) else None
        if wanted is None or gather.element not in INT or gather != wanted:
            return ctx.report("type.index", op, f"index {sparse} (the sparse dimension) must be a "
                              f"1-d integer tile of {view.tile_shape[sparse]} elements, got {gather}")
        scalars = [(i, v) for i, v in scalars if i != sparse]
    for position, index in scalars:
        t = index.type
        if not isinstance(t, TileType) or t.rank != 0 or t.element not in INT:
            return ctx.report("type.index", op, f"index {position} must be a scalar integer tile, "
                                                f"got {t}")
        if t != scalars[0][1].type:
            return ctx.report("type.index", op, f"index {position} type {t} differs from index "
                                                f"{scalars[0][0]} type {scalars[0][1].type}")
    return True


def _inbounds(ctx, op, count: int) -> bool:
    # One flag per index, even when all are false: NVIDIA refuses an empty array as well
    # ("inbounds size (0) must match the number of index dimensions"), at 13.4 and 13.5.
    flags = op.attrs.get("inbounds")
    if flags is not None and len(flags) != count:
        return ctx.report("attr.inbounds", op, f"inbounds has {len(flags)} entries for "
                                               f"{count} indices")
    return True


def view_access(tile_name: str):
    """load_view_tko / store_view_tko / multimem ops: indices and tile agree with the view."""
    def check(ctx, op) -> bool:
        view = op.operands["view"].type
        indices = op.operands["index"]
        if not _view_indices(ctx, op, view, indices):
            return False
        wanted, got = view_tile_type(view), value(op, tile_name).type
        if got != wanted:
            return ctx.report("type.view_tile", op, f"{role(op, tile_name)} must be {wanted} for "
                                                    f"{view}, got {got}")
        return _inbounds(ctx, op, len(indices))
    return check


def atomic_red_view(ctx, op) -> bool:
    view = op.operands["view"].type
    if isinstance(view, GatherScatterViewType):
        return ctx.report("type.view", op, "atomic reductions take a partition_view or "
                                           "strided_view, not a gather_scatter_view")
    if view.padding_value is not None:
        return ctx.report("type.view", op, "atomic reductions do not take a view with a "
                                           "padding_value")
    return view_access("value")(ctx, op)


def multicast_view(ctx, op) -> bool:
    view = op.operands["view"].type
    if not isinstance(view, PartitionViewType) and not isinstance(view, StridedViewType):
        return ctx.report("type.view", op, f"multimem ops take a partition or strided view, "
                                           f"got {view}")
    if view.tensor_view.ptr_attr != PtrAttr.MULTICAST:
        return ctx.report("type.view", op, "multimem ops need a view over a multicast "
                                           "tensor_view (ptr_attr multicast)")
    return True


def _shape_result_count(ctx, op, rank: int, why: str) -> bool:
    if len(op.results) == rank:
        return True
    # MLIR's custom parser makes the results from the type, then binds the names given
    if op.text_pos is not None and not getattr(op, "generic_form", False):
        return ctx.report("result.count", op, f"operation defines {rank} results but was provided "
                                              f"{len(op.results)} to bind")
    return ctx.report("result.count", op, f"'cuda_tile.{op.name}' op expected {rank} results due "
                                          f"to {why}, but got {len(op.results)}")


def get_tensor_shape(ctx, op) -> bool:
    return _shape_result_count(ctx, op, op.operands["src"].type.rank, "tensor rank")


def get_index_space_shape(ctx, op) -> bool:
    return _shape_result_count(ctx, op, len(op.operands["src"].type.tile_shape),
                               "view index space rank")


# ---- pointers and memory -----------------------------------------------------------------------

def pointee_matches(pointers: str, data: str, nvidia: bool = False):
    """A pointer tile and the data tile it loads/stores: same shape, pointee = element.
    `nvidia`: the op's generated verifier words the mismatch (load_ptr_tko, store_ptr_tko)."""
    def check(ctx, op) -> bool:
        ptrs, tile = value(op, pointers).type, value(op, data).type
        words = (f"'cuda_tile.{op.name}' op failed to verify that `{pointers}` type is expected a "
                 f"pointer type of `{data}` type (" if nvidia else "")
        close = ")" if nvidia else ""
        if ptrs.shape != tile.shape:
            return ctx.report("shape.mismatch", op, f"{words}{role(op, data)} shape "
                              f"{_shape(tile)} does not match {role(op, pointers)} shape "
                              f"{_shape(ptrs)}{close}")
        if ptrs.element.pointee != tile.element:
            return ctx.report("type.pointee", op, f"{words}{role(op, pointers)} points to "
                              f"{ptrs.element.pointee} but {role(op, data)} holds "
                              f"{tile.element}{close}")
        return True
    return check


def mask_like(mask: str, like: str, nvidia: str | None = None):
    """`nvidia`: the generated verifier's words for the mismatch, where NVIDIA has them."""
    def check(ctx, op) -> bool:
        given = value(op, mask)
        if given is not None and given.type.shape != value(op, like).type.shape:
            ours = (f"{role(op, mask)} shape {_shape(given.type)} does not match "
                    f"{role(op, like)} shape {_shape(value(op, like).type)}")
            if nvidia:
                ours = f"'cuda_tile.{op.name}' op failed to verify that {nvidia} ({ours})"
            return ctx.report("shape.mismatch", op, ours)
        return True
    return check


def padding_operand(ctx, op) -> bool:
    padding = op.operands.get("paddingValue")
    if padding is not None and padding.type != op.results[0].type:
        return ctx.report("type.mismatch", op, f"'cuda_tile.{op.name}' op failed to verify "
                                               f"that type of 'paddingValue' must match the type "
                                               f"of 'result' (paddingValue type {padding.type} "
                                               f"does not match result type "
                                               f"{op.results[0].type})")
    return True


LOAD_ORDERS = (Order.WEAK, Order.RELAXED, Order.ACQUIRE)
STORE_ORDERS = (Order.WEAK, Order.RELAXED, Order.RELEASE)
ATOMIC_ORDERS = (Order.RELAXED, Order.ACQUIRE, Order.RELEASE, Order.ACQ_REL)


def ordering(allowed, *, scoped_optional: bool):
    """Memory ordering is one of `allowed`; for ops with an optional scope, weak accesses carry
    no scope and every stronger ordering needs one (spec memory model)."""
    listing = ", ".join(o.keyword for o in allowed)

    # NVIDIA's words for plain loads and stores (its verifyMemoryModelLoad/Store)
    access = {tuple(LOAD_ORDERS): "load", tuple(STORE_ORDERS): "store"}.get(tuple(allowed))
    nvidia_listing = ", ".join(o.keyword for o in allowed[:-1]) + f", or {allowed[-1].keyword}"

    def check(ctx, op) -> bool:
        order = op.attrs["memory_ordering_semantics"]
        prefix = f"'cuda_tile.{op.name}' op "
        if order not in allowed:
            ours = f"memory ordering {order.keyword} is not allowed; expected one of {listing}"
            if access:
                ours = f"{prefix}expect one of: {nvidia_listing}, but got: {order.keyword} ({ours})"
            return ctx.report("memory.ordering", op, ours)
        if scoped_optional:
            scope = op.attrs.get("memory_scope")
            if order == Order.WEAK and scope is not None:
                ours = f"a weak access takes no memory scope, got {scope.keyword}"
                if access:
                    ours = f"{prefix}weak {access} must not have memory scope ({ours})"
                return ctx.report("memory.scope", op, ours)
            if order != Order.WEAK and scope is None:
                ours = f"a {order.keyword} access needs a memory scope"
                if access:
                    ours = f"{prefix}memory scope is required for {order.keyword} {access} ({ours})"
                return ctx.report("memory.scope", op, ours)
        return True
    return check


def no_sys_scope(ctx, op) -> bool:
    if op.attrs.get("memory_scope") == MemoryScope.SYS:
        return ctx.report("memory.scope", op, "view reductions take scope tl_blk or device, "
                                              "not sys")
    return True


INT_RMW = (AtomicRMWMode.AND, AtomicRMWMode.OR, AtomicRMWMode.XOR, AtomicRMWMode.ADD,
           AtomicRMWMode.MAX, AtomicRMWMode.MIN, AtomicRMWMode.UMAX, AtomicRMWMode.UMIN)


def rmw_mode(data: str, *, allow_xchg: bool = True):
    def check(ctx, op) -> bool:
        mode = op.attrs["mode"]
        element = value(op, data).type.element
        if mode in INT_RMW and element not in (i32, i64):
            return ctx.report("atomic.mode", op, f"atomic mode {mode.keyword} works on i32 and "
                                                 f"i64 only, got {element}")
        if mode == AtomicRMWMode.ADDF and element not in (f16, bf16, f32, f64):
            return ctx.report("atomic.mode", op, f"atomic mode addf works on f16, bf16, f32 and "
                                                 f"f64 only, got {element}")
        if mode == AtomicRMWMode.XCHG:
            if not allow_xchg:
                return ctx.report("atomic.mode", op, "atomic mode xchg is not allowed here")
            if (element_bits(element) not in (32, 64) or element == tf32
                    or isinstance(element, PointerType)):
                return ctx.report("atomic.mode", op, f"atomic mode xchg works on 32- and 64-bit "
                                                     f"values only, got {element}")
        return True
    return check


def cas_element(ctx, op) -> bool:
    element = op.operands["val"].type.element
    if element.bits not in (32, 64) or element.name == "tf32":
        return ctx.report("atomic.mode", op, f"compare-and-swap works on 32- and 64-bit values "
                                             f"only, got {element}")
    return True


FLOAT_MIN_MAX = (MultimemReductionKind.MIN, MultimemReductionKind.MAX)


def multimem_reduction(tile_name: str, *, in_memory: bool):
    """Float multimem reductions (as NVIDIA's tileiras 13.5 checks them): reducing into memory
    takes only add; load-reduce also takes min/max, but for f16 and bf16 only. Integers take every
    kind."""
    def check(ctx, op) -> bool:
        kind = op.attrs["reduction"]
        element = value(op, tile_name).type.element
        if not element.is_float or kind == MultimemReductionKind.ADD:
            return True
        if in_memory:
            return ctx.report("multimem.reduction", op, f"reduction {kind.keyword} is not "
                              f"supported for {element}; float reductions into memory take add")
        if kind not in FLOAT_MIN_MAX or element not in (f16, bf16):
            return ctx.report("multimem.reduction", op, f"reduction {kind.keyword} is not "
                              f"supported for {element}; floats take add, and min/max on f16 "
                              f"or bf16 only")
        return True
    return check


def alloca(ctx, op) -> bool:
    alignment, count = op.attrs["alignment"], op.attrs["num_elem"]
    pointee = op.results[0].type.element.pointee
    if count < 0:
        return ctx.report("attr.value", op, f"num_elem must not be negative, got {count}")
    if alignment <= 0 or alignment & (alignment - 1):
        return ctx.report("attr.alignment", op, f"alignment must be a power of two, got "
                                                f"{alignment}")
    natural = max(1, element_bits(pointee) // 8)
    if alignment < natural:
        return ctx.report("attr.alignment", op, f"alignment {alignment} is below the {natural}-byte "
                                                f"size of {pointee}")
    return True


# ---- constants, assumptions, printing ----------------------------------------------------------

def constant(ctx, op) -> bool:
    dense = op.attrs["value"]
    result = op.results[0].type
    if not isinstance(dense, DenseElementsAttr):
        return ctx.report("attr.value", op, f"value must be dense elements, got {dense!r}")
    if dense.type != result:
        return ctx.report("type.mismatch", op, f"value type {dense.type} does not match result "
                                               f"type {result}")
    return True


# The largest div_by divisor NVIDIA's verifier takes (a limit of its implementation).
MAX_DIV_BY = 1 << 62


def assume(ctx, op) -> bool:
    predicate = op.attrs["predicate"]
    t = op.operands["value"].type
    is_tile = isinstance(t, TileType)
    integer_like = is_tile and (t.element in INT or isinstance(t.element, PointerType))
    if isinstance(predicate, DivByAttr):
        divisor = predicate.divisor
        if divisor <= 0 or divisor & (divisor - 1):
            return ctx.report("assume.predicate", op, f"div_by divisor must be a power of two, "
                                                      f"got {divisor}")
        if (predicate.every is None) != (predicate.along is None):
            return ctx.report("assume.predicate", op, "div_by 'every' and 'along' go together")
        if divisor > MAX_DIV_BY:
            return ctx.report("assume.predicate", op, f"div_by divisor {divisor} is too large; "
                                                      f"at most 2^62 ({MAX_DIV_BY})")
        if isinstance(t, TensorViewType):
            if predicate.every is not None:
                return ctx.report("assume.predicate", op, "div_by on a tensor_view takes no "
                                                          "'every'/'along'")
            return True
        if not integer_like:
            return ctx.report("assume.predicate", op, f"div_by applies to integer or pointer "
                                                      f"tiles and tensor_views, got {t}")
        if predicate.every is None:
            return True
        if t.rank == 0:
            return ctx.report("assume.predicate", op, "div_by on a 0-d tile takes no "
                                                      "'every'/'along'")
        if not 0 <= predicate.along < t.rank:
            return ctx.report("assume.predicate", op, f"div_by along {predicate.along} is outside "
                                                      f"[0, {t.rank})")
        size = t.shape[predicate.along]
        if not 0 <= predicate.every <= size:
            return ctx.report("assume.predicate", op, f"div_by every {predicate.every} is outside "
                              f"[0, {size}], the size of dimension {predicate.along}")
        return True
    if isinstance(predicate, SameElementsAttr):
        if not integer_like:
            return ctx.report("assume.predicate", op, f"same_elements applies to integer or "
                                                      f"pointer tiles, got {t}")
        if len(predicate.values) != t.rank:
            return ctx.report("assume.predicate", op, f"same_elements needs {t.rank} values, got "
                                                      f"{len(predicate.values)}")
        for axis, (count, dim) in enumerate(zip(predicate.values, t.shape)):
            if not 0 <= count <= dim:
                return ctx.report("assume.predicate", op, f"same_elements value {axis} ({count}) "
                                                          f"is outside [0, {dim}]")
        return True
    if isinstance(predicate, BoundedAttr):
        if not is_tile or t.element not in INT:
            return ctx.report("assume.predicate", op, f"bounded applies to integer tiles, got {t}")
        bits = t.element.bits
        low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        if bits == 1:
            low, high = -1, 1  # i1 bounds are written as 0/1 or -1
        for name, bound in (("lower", predicate.lower), ("upper", predicate.upper)):
            if bound is not None and not low <= bound <= high:
                return ctx.report("assume.predicate", op, f"bounded {name} bound {bound} is "
                                                          f"outside the range of {t.element}")
        if None not in (predicate.lower, predicate.upper) and predicate.lower > predicate.upper:
            return ctx.report("assume.predicate", op, f"bounded lower bound {predicate.lower} "
                                                      f"exceeds upper bound {predicate.upper}")
        return True
    return ctx.report("assume.predicate", op, f"predicate must be div_by, same_elements or "
                                              f"bounded, got {type(predicate).__name__}")


# NUL ends a conversion too: NVIDIA finds the conversion character with a C string search, which
# also matches the terminating NUL (so "first=%\0" takes one argument and is not unterminated).
_CONVERSIONS = "diuoxXeEfFgGaAcsSpn%\0"


# The interpreter's bound on a conversion's width and precision (tilebc/interp/ops/debug.py has the
# same number; a test ties them). tileiras accepts any: the host's C printf formats device output.
PRINT_MAX_WIDTH = 4096
_WIDTH_PRECISION = r"%[-+ #0]*(\d*)(?:\.(\d*))?"  # compiled on first use, by re's cache


def _print_width_warning(ctx, op, conversion: str) -> None:
    match = re.match(_WIDTH_PRECISION, conversion)
    numbers = [group.lstrip("0") for group in match.groups() if group] if match else []
    if any(len(number) > 4 and int(number[:12]) > PRINT_MAX_WIDTH for number in numbers):
        ctx.report("print.format", op, f"conversion {conversion[:40]!r} asks for a width or "
                   f"precision above {PRINT_MAX_WIDTH}, which the CPU interpreter refuses", WARNING)


def print_format(ctx, op) -> bool:
    text = op.attrs["str"]
    expected, position = 0, 0
    while position < len(text):
        if text[position] != "%":
            position += 1
            continue
        end = position + 1
        while end < len(text) and text[end] not in _CONVERSIONS:
            end += 1
        if end >= len(text):
            return ctx.report("print.format", op, f"unterminated format at character {position} "
                                                  f"of {text!r}")
        if text[end] == "%" and end > position + 1:
            # A `%` inside an open conversion ends it and starts the next one (NVIDIA counts
            # "% %f" as two arguments).
            expected += 1
            position = end
            continue
        if text[position:end + 1] != "%%":
            expected += 1
            _print_width_warning(ctx, op, text[position:end + 1])
        position = end + 1
    given = len(op.operands["args"])
    if given != expected:
        return ctx.report("print.format", op, f"format {text!r} takes {expected} arguments, "
                                              f"got {given}")
    return True


# ---- control flow and combiner regions ---------------------------------------------------------

_VIEW_TYPES = (TensorViewType, PartitionViewType, StridedViewType, GatherScatterViewType)


def no_view_results(ctx, op) -> bool:
    for index, result in enumerate(op.results):
        if isinstance(result.type, _VIEW_TYPES):
            return ctx.report("type.view_value", op, f"result {index} is a view ({result.type}); "
                                                     f"views cannot leave control flow")
    return True


def _block(op, index: int = 0):
    region = op.regions[index] if index < len(op.regions) else None
    return region.blocks[0] if region is not None and len(region.blocks) == 1 else None


def _region_args(ctx, op, expected) -> bool:
    block = _block(op)
    if block is None:
        return True  # region shape is reported by the structure check
    got = [a.type for a in block.args]
    if got != list(expected):
        return ctx.report("region.args", op, f"region arguments ({', '.join(map(str, got))}) "
                          f"should be ({', '.join(map(str, expected))})")
    return True


def _loop_region_args(ctx, op) -> bool:
    inits = [v.type for v in op.operands["initValues"]]
    induction = op.operands.get("lowerBound")  # a counted loop's region takes its index first
    if induction is not None:
        return _region_args(ctx, op, [induction.type] + inits)
    return _region_args(ctx, op, inits)


@context_tail(_loop_region_args)  # reads regions
def loop_carried(ctx, op) -> bool:
    """for: results are the carried values (same types as the inits). loop: results are what its
    `break`s yield, independent of the carried values (NVIDIA's Ops.td example returns f32 from an
    i32-carrying loop; tileirdisasm/tileiras 13.5 accept it). Neither carries nor returns views."""
    inits = [v.type for v in op.operands["initValues"]]
    results = [r.type for r in op.results]
    if op.spec.result_like and inits != results:  # for: results like the carried values
        return ctx.report("type.mismatch", op, f"result types ({', '.join(map(str, results))}) "
                          f"do not match init types ({', '.join(map(str, inits))})")
    for index, t in enumerate(inits):
        if isinstance(t, _VIEW_TYPES):
            return ctx.report("type.view_value", op, f"loop-carried value {index} is a view "
                                                     f"({t}); views cannot be carried")
    for index, t in enumerate(results):
        if isinstance(t, _VIEW_TYPES):
            return ctx.report("type.view_value", op, f"result {index} is a view ({t}); a loop "
                                                     f"cannot return views")
    return _loop_region_args(ctx, op)


def _identity_type(identity):
    """The element type of a reduce/scan identity: typed integer and float attributes carry one,
    a bool is i1; anything else has none (NVIDIA: "got 'none'", or it crashes on a type)."""
    if isinstance(identity, (IntegerAttr, FloatAttr)):
        return identity.type
    if isinstance(identity, BoolAttr):
        return i1
    return None


def _quoted(t) -> str:
    """A type as MLIR's diagnostics quote it: '!cuda_tile.tile<1xf32>', 'f32'."""
    return f"'!cuda_tile.{t}'" if isinstance(t, TileType) else f"'{t}'"


def _combiner_body(ctx, op) -> bool:
    return _combiner_region(ctx, op, list(op.operands["operands"]), f"'cuda_tile.{op.name}' op ")


@context_tail(_combiner_body)  # reads regions
def combiner(ctx, op) -> bool:
    """reduce / scan, in the order NVIDIA's verifier checks them (the attribute and shape
    constraints, the op, then its combiner region), each in its words and ours after them."""
    prefix = f"'cuda_tile.{op.name}' op "
    operands = list(op.operands["operands"])
    if not operands:
        return ctx.report("operand.count", op, f"{prefix}expect at least 1 operand")
    dim = op.attrs["dim"]
    if dim < 0:
        return ctx.report("attr.dim", op, f"{prefix}attribute 'dim' failed to satisfy constraint: "
                                          f"32-bit signless integer attribute whose value is "
                                          f"non-negative (dim {dim} is negative)")
    first = operands[0].type
    for index, v in enumerate(operands):
        if v.type.shape != first.shape:
            return ctx.report("shape.mismatch", op, f"{prefix}requires the same shape for all "
                                                    f"operands (operand {index} shape "
                                                    f"{_shape(v.type)} does not match operand 0 "
                                                    f"shape {_shape(first)})")
    if len(op.results) != len(operands):
        return ctx.report("result.count", op, f"{prefix}expect same number of operands and "
                                              f"results (expected {len(operands)} results, one "
                                              f"per operand, got {len(op.results)})")
    identities = op.attrs["identities"]
    elements = identities.elements if hasattr(identities, "elements") else tuple(identities)
    if len(elements) != len(operands):
        return ctx.report("attr.identities", op, f"{prefix}expect identities to match the number "
                                                 f"of operands but got: {len(operands)} operands "
                                                 f"and {len(elements)} identities")
    for index, (identity, v) in enumerate(zip(elements, operands)):
        kind = _identity_type(identity)
        if kind is None:
            return ctx.report("attr.identities", op, f"{prefix}expect same type for operand at "
                              f"index: {index} and identity at index: {index} but got: "
                              f"'{v.type.element}' and 'none' (identity {index} must be an "
                              f"integer, float or bool value, got {type(identity).__name__})")
        # NVIDIA lets f16 and bf16 identities stand in for each other (tileirdisasm 13.5, probed)
        if kind != v.type.element and {kind, v.type.element} != {f16, bf16}:
            return ctx.report("attr.identities", op, f"{prefix}expect same type for operand at "
                                                     f"index: {index} and identity at index: "
                                                     f"{index} but got: '{v.type.element}' and "
                                                     f"'{kind}'")
    if dim >= first.rank:
        return ctx.report("attr.dim", op, f"{prefix}dimension ({dim}) is out of bound [0, "
                                          f"{first.rank}) (dim {dim} is outside [0, "
                                          f"{first.rank}))")
    scan = _KEEPS_DIM[op.spec.mnemonic]
    wanted = [v.type if scan else
              TileType(v.type.shape[:dim] + v.type.shape[dim + 1:], v.type.element)
              for v in operands]
    got = [r.type for r in op.results]
    if got != wanted:
        if scan:
            index = next(i for i, (w, g) in enumerate(zip(wanted, got)) if w != g)
            return ctx.report("type.mismatch", op, f"{prefix}expect same type for operand at "
                                                   f"index: {index} and result at index: {index} "
                                                   f"(result {index} must be {wanted[index]}, got "
                                                   f"{got[index]})")
        # reduce infers its result types; MLIR reports the mismatch, then the failed inference
        ctx.report("type.mismatch", op, f"{prefix}inferred type(s) "
                   f"{', '.join(map(_quoted, wanted))} are incompatible with return type(s) of "
                   f"operation {', '.join(map(_quoted, got))}")
        return ctx.report("type.mismatch", op, f"{prefix}failed to infer returned types")
    return _combiner_body(ctx, op)


def _combiner_region(ctx, op, operands, prefix: str) -> bool:
    region = op.regions[0] if op.regions else None
    block = _block(op)
    if block is None or (not block.args and not block.ops):
        count = len(region.blocks) if region is not None and (block is None or block.ops) else 0
        return ctx.report("region.blocks", op, f"{prefix}region #0 ('body') failed to verify "
                                               f"constraint: region with 1 blocks (the combiner "
                                               f"region has {count} blocks)")
    args = [a.type for a in block.args]
    if len(args) != 2 * len(operands):
        return ctx.report("region.args", op, f"{prefix}expect {2 * len(operands)} block "
                                             f"arguments but got: {len(args)}")
    for index, t in enumerate(args):
        if not (isinstance(t, TileType) and t.rank == 0):
            return ctx.report("region.args", op, f"{prefix}expect 0-rank tile type at index: "
                                                 f"{index} but got: {_quoted(t)}")
    for index in range(0, len(args), 2):
        if args[index].element != args[index + 1].element:
            return ctx.report("region.args", op, f"{prefix}expect same element type for block "
                                                 f"argument at index: {index} and {index + 1} but "
                                                 f"got: '{args[index].element}' and "
                                                 f"'{args[index + 1].element}'")
    for index, v in enumerate(operands):
        if v.type.element != args[2 * index].element:
            return ctx.report("region.args", op, f"{prefix}expect same type for operand at "
                                                 f"index: {index} and block argument at index: "
                                                 f"{2 * index} but got: '{v.type.element}' and "
                                                 f"'{args[2 * index].element}'")
    last = block.ops[-1] if block.ops else None
    if last is None or not last.spec.terminator or op.spec.mnemonic not in last.spec.ends:
        return True  # the structure check names the missing terminator
    yielded = [v.type for v in last.operands["operands"]]
    if len(yielded) != len(operands):
        return ctx.report("terminator.types", op, f"{prefix}expect number of terminators "
                                                  f"operands ({len(yielded)}) to match number of "
                                                  f"operands ({len(operands)})")
    for index, (v, t) in enumerate(zip(operands, yielded)):
        element = t.element if isinstance(t, TileType) else t
        if v.type.element != element or not (isinstance(t, TileType) and t.rank == 0):
            return ctx.report("terminator.types", op, f"{prefix}expect same type for operand at "
                                                      f"index: {index} and terminator argument at "
                                                      f"index: {index} but got: "
                                                      f"'{v.type.element}' and '{element}' (yield "
                                                      f"operand {index} must be "
                                                      f"{scalar(v.type.element)}, got {t})")
    return True


def itof_target(ctx, op) -> bool:
    target = op.results[0].type.element
    if target == f8e8m0:
        return ctx.report("type.operand", op, f"'cuda_tile.{op.name}' op integer to f8E8M0FNU "
                                              f"conversion is not supported, please first "
                                              f"convert to another float type")
    return True


def signedness_unsigned(op) -> bool:
    return op.attrs.get("signedness") == Signedness.UNSIGNED


def not_f4(name: str):
    """Sub-byte f4E2M1FN tiles cannot be selected element-wise."""
    def check(ctx, op) -> bool:
        if value(op, name).type.element == f4:
            return ctx.report("type.operand", op, f"{role(op, name)} cannot be a f4E2M1FN tile")
        return True
    return check


def join_tokens(ctx, op) -> bool:
    if len(op.operands["tokens"]) < 2:
        return ctx.report("operand.count", op, f"'cuda_tile.{op.name}' op expect two or more "
                                               f"tokens (join_tokens needs two or more tokens, "
                                               f"got {len(op.operands['tokens'])})")
    return True
