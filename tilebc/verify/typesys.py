"""Well-formedness of types on their own (spec section 5), independent of the op that uses them."""
from __future__ import annotations

from functools import lru_cache

from ..ir.types import (PTR_ATTR_SINCE, TYPE_KIND_SINCE, ElementType, FunctionType,
                        GatherScatterViewType, PartitionViewType, PointerType, StridedViewType,
                        TensorViewType, TileType, TokenType, Type, f4E2M1FN)
from ..ops.enums import PaddingValue, PtrAttr
from ..version import V13_1, Version

# NVIDIA's dialect caps a tile at 2**24 elements (cuda-tile Types.h, maxTileNumElements).
MAX_TILE_ELEMENTS = 1 << 24
# Only `zero` padding is meaningful for integers; the others name float values.
FLOAT_ONLY_PADDING = frozenset({PaddingValue.NEG_ZERO, PaddingValue.NAN, PaddingValue.POS_INF,
                                PaddingValue.NEG_INF})

Problem = tuple[str, str]  # (rule id, message)


def _is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def _dims(shape) -> str:
    return "x".join("?" if d is None else str(d) for d in shape) or "()"


def _tile_problems(shape, element) -> tuple[Problem, ...]:
    count = 1
    for dim in shape:
        if not isinstance(dim, int) or dim <= 0:
            return (("type.tile_shape", f"tile dimensions must be positive, got {_dims(shape)}"),)
        if not _is_power_of_two(dim):
            return (("type.tile_shape",
                     f"tile dimensions must be powers of two, got {_dims(shape)}"),)
        count *= dim
    if count > MAX_TILE_ELEMENTS:
        return (("type.tile_shape", f"tile {_dims(shape)} has {count} elements, more than the "
                                    f"maximum of {MAX_TILE_ELEMENTS}"),)
    if element == f4E2M1FN and (not shape or all(d % 2 for d in shape)):
        # two f4 values share a byte, so a tile of them needs an even element count
        return (("type.tile_shape",
                 f"f4E2M1FN tiles must have an even number of elements, got {_dims(shape)}"),)
    return ()


def _tensor_view_problems(view: TensorViewType) -> tuple[Problem, ...]:
    if len(view.shape) != len(view.strides):
        return (("type.tensor_view", f"tensor_view shape rank {len(view.shape)} does not match "
                                     f"stride rank {len(view.strides)}"),)
    if any(d is not None and d <= 0 for d in view.shape):
        return (("type.tensor_view",
                 f"tensor_view dimensions must be positive or dynamic, got {_dims(view.shape)}"),)
    if any(s is not None and s <= 0 for s in view.strides):
        return (("type.tensor_view",
                 f"tensor_view strides must be positive or dynamic, got [{_dims(view.strides)}]"),)
    return ()


def _subview_problems(kind: str, tile_shape, view: TensorViewType, padding) -> tuple[Problem, ...]:
    problems = _tensor_view_problems(view)
    if problems:
        return problems
    if not tile_shape:
        return ((f"type.{kind}", f"{kind} tile shape must not be empty"),)
    if len(tile_shape) != view.rank:
        return ((f"type.{kind}", f"{kind} tile rank {len(tile_shape)} does not match "
                                 f"tensor_view rank {view.rank}"),)
    problems = _tile_problems(tile_shape, view.element)
    if problems:
        return problems
    if padding is not None and padding in FLOAT_ONLY_PADDING and not view.element.is_float:
        return ((f"type.{kind}", f"padding_value {padding.keyword} needs a float element type, "
                                 f"got {view.element}"),)
    return ()


def _dim_map_problems(kind: str, dim_map, rank: int) -> tuple[Problem, ...]:
    if sorted(dim_map) != list(range(rank)):
        return ((f"type.{kind}", f"dim_map {list(dim_map)} must be a permutation of "
                                 f"0..{rank - 1}"),)
    return ()


@lru_cache(maxsize=4096)
def type_problems(type_: Type) -> tuple[Problem, ...]:
    """Problems of a type on its own (cached: types are immutable and compared structurally)."""
    if isinstance(type_, TileType):
        element = type_.element
        if not isinstance(element, (ElementType, PointerType)):
            return (("type.tile_element", f"tile element must be an element or pointer type, "
                                          f"got {element}"),)
        return _tile_problems(type_.shape, element)
    if isinstance(type_, TensorViewType):
        return _tensor_view_problems(type_)
    if isinstance(type_, PartitionViewType):
        return (_subview_problems("partition_view", type_.tile_shape, type_.tensor_view,
                                  type_.padding_value)
                or _dim_map_problems("partition_view", type_.dim_map, len(type_.tile_shape)))
    if isinstance(type_, StridedViewType):
        problems = (_subview_problems("strided_view", type_.tile_shape, type_.tensor_view,
                                      type_.padding_value)
                    or _dim_map_problems("strided_view", type_.dim_map, len(type_.tile_shape)))
        if problems:
            return problems
        if len(type_.traversal_strides) != len(type_.tile_shape):
            return (("type.strided_view", f"expected {len(type_.tile_shape)} traversal strides, "
                                          f"got {len(type_.traversal_strides)}"),)
        if any(s <= 0 for s in type_.traversal_strides):
            return (("type.strided_view", "traversal strides must be positive, got "
                                          f"{list(type_.traversal_strides)}"),)
        return ()
    if isinstance(type_, GatherScatterViewType):
        problems = _subview_problems("gather_scatter_view", type_.tile_shape, type_.tensor_view,
                                     type_.padding_value)
        if problems:
            return problems
        if not 0 <= type_.sparse_dim < len(type_.tile_shape):
            return (("type.gather_scatter_view", f"sparse_dim {type_.sparse_dim} is outside "
                                                 f"[0, {len(type_.tile_shape)})"),)
        return ()
    if isinstance(type_, (TokenType, PointerType, ElementType, FunctionType)):
        return ()
    return (("type.unknown", f"{type_!r} is not a Tile IR type"),)


@lru_cache(maxsize=4096)
def type_since(type_: Type) -> tuple[Version, str]:
    """The first version that can express `type_`, and the part of it that needs that version."""
    need, why = V13_1, ""

    def bump(since: Version, what: str):
        nonlocal need, why
        if since > need:
            need, why = since, what

    seen = set()  # function types may share their parts: visit each distinct type once

    def visit(node):
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, ElementType):
            bump(node.since, f"element type {node}")
            return
        bump(TYPE_KIND_SINCE.get(type(node), V13_1), type(node).__name__)
        if isinstance(node, (PointerType, TensorViewType)) and node.ptr_attr != PtrAttr.NONE:
            bump(max(PTR_ATTR_SINCE, node.ptr_attr.since), f"ptr_attr {node.ptr_attr.keyword}")
        if isinstance(node, PointerType):
            visit(node.pointee)
        elif isinstance(node, (TileType, TensorViewType)):
            visit(node.element)
        elif isinstance(node, (PartitionViewType, StridedViewType, GatherScatterViewType)):
            if node.padding_value is not None:
                bump(node.padding_value.since, f"padding_value {node.padding_value.keyword}")
            visit(node.tensor_view)
        elif isinstance(node, FunctionType):
            for inner in node.inputs + node.results:
                visit(inner)

    visit(type_)
    return need, why
