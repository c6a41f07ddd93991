"""What decides a view access's vector width (ld/st.v2/v4): the view's divisibility facts, read
from the IR, so that a value's producer can know, before the store's view is lowered, that the
store will take vectors (a permute then makes its result in Blocked)."""
from __future__ import annotations

from tilebc.ir.types import PartitionViewType, TensorViewType
from tilebc.ops.enums import MemoryOrderingSemantics
from tilebc.ops.table import by_mnemonic

from . import dtypes
from .anchors import divisor, flow_is_layout_free
from .common import SCOPE, SubView, TensorView


def qualifiers(op, *, store: bool) -> str:
    """ld/st memory-ordering qualifiers for the op's ordering and scope attributes."""
    ordering = op.attrs.get("memory_ordering_semantics")
    scope = SCOPE.get(op.attrs.get("memory_scope"), "gpu")
    if ordering in (None, MemoryOrderingSemantics.WEAK):
        return ""
    if ordering is MemoryOrderingSemantics.RELAXED:
        return f".relaxed.{scope}"
    if ordering is MemoryOrderingSemantics.ACQUIRE:
        return f".acquire.{scope}"
    if ordering is MemoryOrderingSemantics.RELEASE:
        return f".release.{scope}"
    return f".{'release' if store else 'acquire'}.{scope}"  # acq_rel on a plain load/store


def view_dims(view_type):
    """The tensor dim each tile dim of a view runs along."""
    return list(getattr(view_type, "dim_map", None) or range(len(view_type.tile_shape)))


def divisibility(lw, op) -> tuple[int, list[int], list[int]]:
    """A make_tensor_view's (base alignment, shape divisors, stride divisors): powers of two
    known from static sizes and `assume div_by` (the IR alone, so they are known before the view
    is lowered)."""
    view_type: TensorViewType = op.results[0].type

    def power(static, values):
        if static is not None:
            return static & -static if static else 1 << 30
        return divisor(lw, next(values))
    shape_values = iter(op.operands["dynamicShape"])
    stride_values = iter(op.operands["dynamicStrides"])
    shape_div = [power(d, shape_values) for d in view_type.shape]
    stride_div = [power(d, stride_values) for d in view_type.strides]
    return divisor(lw, op.operands["base"]), shape_div, stride_div


VECTOR_TYPES = ("f16", "bf16", "f32", "f64", "i32", "i64")


def vector_width(lw, op, view: SubView, tile_shape, element, quals: str) -> int:
    """Elements per vector access (ld/st.v2/v4, at most 16 bytes) that this view access is
    proven to allow: a partition view whose last tile dim runs along a stride-1 tensor dim, an
    aligned base, other strides multiples of the vector, and a blocked layout that fits the
    tile (1: scalar accesses)."""
    vt = view.type
    tensor = view.tensor
    if not isinstance(vt, PartitionViewType) or quals or tensor.stride_div is None:
        return 1
    if dtypes.name_of(element) not in VECTOR_TYPES or not tile_shape:
        return 1
    size = dtypes.byte_size(element)
    dims = view_dims(vt)
    last = dims[-1]
    if tensor.type.strides[last] != 1:
        return 1
    count = 1
    for d in tile_shape:
        count *= d
    vec = min(4, 16 // size, tile_shape[-1])
    while vec > 1 and (count % (vec * lw.T) or tensor.base_align % (vec * size)
                       or any(tensor.stride_div[d] % vec for d in dims if d != last)):
        vec //= 2
    return vec


# how a view store's view is made, for planned_store_width
_PARTITION, _TENSOR = "partition view", "tensor view"
_VIEW_MAKERS = by_mnemonic({"make_partition_view": _PARTITION, "make_tensor_view": _TENSOR},
                           "view makers of planned stores")


def planned_store_width(lw, op) -> int:
    """vector_width of a view store (`op`) from the IR, before its view is lowered: a partition
    view of a make_tensor_view (1 for views made any other way)."""
    view = lw.forward.get(op.operands["view"], op.operands["view"])
    maker = view.owner
    if _VIEW_MAKERS.get(getattr(maker, "name", None)) != _PARTITION:
        return 1
    tensor_value = lw.forward.get(maker.operands["tensor_view"], maker.operands["tensor_view"])
    if _VIEW_MAKERS.get(getattr(tensor_value.owner, "name", None)) != _TENSOR:
        return 1
    base_align, shape_div, stride_div = divisibility(lw, tensor_value.owner)
    tensor = TensorView(tensor_value.type, None, [], [], None, base_align, shape_div, stride_div)
    tile = op.operands["tile"].type
    return vector_width(lw, op, SubView(view.type, tensor), tile.shape, tile.element,
                        qualifiers(op, store=True))


def flow_vector_width(lw, value) -> int:
    """The vector width (elements) with which every view store that `value`'s flow reaches can
    store it, where that flow handles any layout (anchors.flow_is_layout_free): `value` may then
    be made in Blocked(vec) and stored with st.v. 1 when there is no such store or width."""
    stores = []
    if not flow_is_layout_free(lw, value, stores=stores) or not stores:
        return 1
    return min(planned_store_width(lw, store) for store in stores)


