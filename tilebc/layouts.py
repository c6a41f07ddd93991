"""Memory layouts as Tile IR views: hidet layouts and cuTile arrays -> tensor_view / partition_view types.

A Tile IR tensor view addresses element [i0, ..., in] at base + sum(i_m * stride_m) (type-system seed,
5.3.2); its shape and strides may be static or dynamic (None here, `?` in text). Layouts that are one
stride per dimension (hidet's `row_major`, `column_major`, `strided_layout`, any cuTile array) map to a
tensor view of the same rank. A composed hidet layout `f * g` splits every dimension into an outer
coordinate (c / shape_g, laid out by f, scaled by size(g)) and an inner one (c mod shape_g, laid out by
g); in general that is not one stride per dimension, so it maps to a tensor view of higher rank, one
view dimension per factor, with adjacent factors merged where their strides line up.

Partition views tile a tensor view into a grid (seed 5.3.3): the index space has ceildiv(S, T) tiles per
dimension; `dim_map[i]` is the view dimension that tile dimension i runs along (cuTile's `order`: "C"
is the identity, "F" reverses, a tuple is used as given). Padding values fill the parts of edge tiles
outside the view when loading; `padding_bits` gives the element bit pattern of each, where the element
type can represent it (integers take only `zero`, as NVIDIA's verifier requires).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import product
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

from .errors import TilebcError
from .ir.types import (ELEMENT_TYPES, Dim, ElementType, PartitionViewType, TensorViewType)
from .numeric.numerics import FLOAT_FORMATS, from_bits
from .ops.enums import PaddingValue, PtrAttr


class LayoutError(TilebcError):
    """A layout, view or padding request Tile IR cannot express."""


def _positive(values: Sequence[int], what: str) -> Tuple[int, ...]:
    values = tuple(int(v) for v in values)
    if any(v <= 0 for v in values):
        raise LayoutError(f"{what} must be positive integers, got {list(values)}")
    return values


# ---------------------------------------------------------------------------------------------------
# Layouts

# One factor of a dimension: (extent, stride). A dimension's coordinate is the mixed-radix number of
# its factors, most significant first.
Factor = Tuple[int, int]


class Layout:
    """Maps an n-d coordinate to a linear element index (hidet's layout semantics)."""

    shape: Tuple[int, ...]

    def factors(self) -> Tuple[Tuple[Factor, ...], ...]:
        """Per dimension, its (extent, stride) factors, most significant first."""
        raise NotImplementedError

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __call__(self, *coord: int) -> int:
        if len(coord) != self.rank:
            raise LayoutError(f"a rank-{self.rank} layout needs {self.rank} coordinates, got "
                              f"{len(coord)}")
        index = 0
        for c, extent, dim_factors in zip(coord, self.shape, self.factors()):
            if not 0 <= c < extent:
                raise LayoutError(f"coordinate {list(coord)} is outside shape {list(self.shape)}")
            for factor_extent, stride in reversed(dim_factors):
                index += (c % factor_extent) * stride
                c //= factor_extent
        return index

    def __mul__(self, inner: "Layout") -> "ComposedLayout":
        return ComposedLayout(self, inner)

    @property
    def strides(self) -> Optional[Tuple[int, ...]]:
        """One stride per dimension, or None when some dimension needs several factors."""
        merged = [_merge(f) for f in self.factors()]
        if any(len(f) != 1 for f in merged):
            return None
        return tuple(f[0][1] for f in merged)


@dataclass(frozen=True, eq=False)
class StridedLayout(Layout):
    shape: Tuple[int, ...]
    stride_values: Tuple[int, ...]

    def __post_init__(self):
        if len(self.shape) != len(self.stride_values):
            raise LayoutError(f"shape {list(self.shape)} and strides {list(self.stride_values)} "
                              f"differ in rank")

    def factors(self):
        return tuple(((extent, stride),) for extent, stride in zip(self.shape, self.stride_values))

    def __repr__(self) -> str:
        return f"StridedLayout(shape={list(self.shape)}, strides={list(self.stride_values)})"


@dataclass(frozen=True, eq=False)
class ComposedLayout(Layout):
    """h(c) = outer(c // inner.shape) * inner.size + inner(c % inner.shape)."""

    outer: Layout
    inner: Layout

    def __post_init__(self):
        if self.outer.rank != self.inner.rank:
            raise LayoutError(f"composed layouts need equal ranks, got {self.outer.rank} and "
                              f"{self.inner.rank}")

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(a * b for a, b in zip(self.outer.shape, self.inner.shape))

    def factors(self):
        scale = self.inner.size
        return tuple(tuple((e, s * scale) for e, s in outer) + tuple(inner)
                     for outer, inner in zip(self.outer.factors(), self.inner.factors()))

    def __repr__(self) -> str:
        return f"({self.outer!r} * {self.inner!r})"


def strided_layout(shape: Sequence[int], ranks: Sequence[int]) -> StridedLayout:
    """hidet's strided_layout: `ranks` orders the dimensions from slowest (0) to fastest."""
    shape = _positive(shape, "layout shape")
    ranks = tuple(int(r) for r in ranks)
    if sorted(ranks) != list(range(len(shape))):
        raise LayoutError(f"ranks {list(ranks)} must be a permutation of 0..{len(shape) - 1}")
    strides = tuple(math.prod(shape[e] for e in range(len(shape)) if ranks[e] > ranks[d])
                    for d in range(len(shape)))
    return StridedLayout(shape, strides)


def row_major(*shape: int) -> StridedLayout:
    return strided_layout(shape, range(len(shape)))


def column_major(*shape: int) -> StridedLayout:
    return strided_layout(shape, range(len(shape) - 1, -1, -1))


def _merge(factors: Sequence[Factor]) -> List[Factor]:
    """Drop extent-1 factors and join neighbours whose strides continue each other."""
    kept = [f for f in factors if f[0] != 1] or [(1, factors[-1][1] if factors else 1)]
    merged = [kept[0]]
    for extent, stride in kept[1:]:
        outer_extent, outer_stride = merged[-1]
        if outer_stride == stride * extent:
            merged[-1] = (outer_extent * extent, stride)
        else:
            merged.append((extent, stride))
    return merged


# ---------------------------------------------------------------------------------------------------
# Layouts and arrays -> tensor views


@dataclass(frozen=True)
class ViewMapping:
    """A tensor view type for a layout, and for each layout dimension the view dimensions it splits
    into (most significant first): coordinate c of that dimension is the mixed-radix number of its
    view coordinates."""

    type: TensorViewType
    dims: Tuple[Tuple[int, ...], ...]

    def view_coordinate(self, coord: Sequence[int]) -> Tuple[int, ...]:
        result = [0] * self.type.rank
        for c, dims in zip(coord, self.dims):
            for d in reversed(dims):
                extent = self.type.shape[d]
                result[d] = c % extent
                c //= extent
        return tuple(result)


def _element(element) -> ElementType:
    if isinstance(element, ElementType):
        return element
    try:
        return ELEMENT_TYPES[element]
    except KeyError:
        raise LayoutError(f"unknown element type {element!r}") from None


def layout_view(layout: Layout, element, ptr_attr: PtrAttr = PtrAttr.NONE) -> ViewMapping:
    """The static tensor view that addresses the same elements as `layout` (strides in elements)."""
    element = _element(element)
    shape: List[int] = []
    strides: List[int] = []
    dims = []
    for dim_factors in layout.factors():
        merged = _merge(dim_factors)
        dims.append(tuple(range(len(shape), len(shape) + len(merged))))
        shape += [e for e, _ in merged]
        strides += [s for _, s in merged]
    return ViewMapping(TensorViewType(element, tuple(shape), tuple(strides), ptr_attr), tuple(dims))


def tensor_view_type(element, shape: Sequence[Optional[int]], strides: Sequence[Optional[int]],
                     ptr_attr: PtrAttr = PtrAttr.NONE) -> TensorViewType:
    """A cuTile array (shape + element strides; None for a value known only at run time) as a
    tensor view type. Static extents must be positive and static strides non-negative."""
    if len(shape) != len(strides):
        raise LayoutError(f"array shape {list(shape)} and strides {list(strides)} differ in rank")
    for name, values, low in (("shape", shape, 1), ("stride", strides, 0)):
        for v in values:
            if v is not None and (int(v) != v or v < low):
                raise LayoutError(f"array {name} {v} must be an integer >= {low} (or None: dynamic)")
    return TensorViewType(_element(element), tuple(None if d is None else int(d) for d in shape),
                          tuple(None if s is None else int(s) for s in strides), ptr_attr)


def array_view_type(array, dynamic: bool = True) -> TensorViewType:
    """The tensor view of a numpy array (or anything with shape, strides in bytes and a dtype):
    fully dynamic like cuTile's kernels (`dynamic=True`) or with its static shape and strides."""
    from .numeric.dtypes import element_type
    array = np.asarray(array) if not hasattr(array, "strides") else array
    element = element_type(array.dtype)
    itemsize = np.dtype(array.dtype).itemsize
    if any(s % itemsize for s in array.strides) or any(s < 0 for s in array.strides):
        raise LayoutError(f"array strides {array.strides} are not non-negative multiples of the "
                          f"element size {itemsize}")
    if dynamic:
        return tensor_view_type(element, [None] * array.ndim, [None] * array.ndim)
    return tensor_view_type(element, array.shape, [s // itemsize for s in array.strides])


# ---------------------------------------------------------------------------------------------------
# Partition views


def order_dim_map(order: Union[str, Sequence[int]], rank: int) -> Tuple[int, ...]:
    """cuTile's `order` of load/store as a partition view dim_map."""
    if order == "C":
        return tuple(range(rank))
    if order == "F":
        return tuple(range(rank - 1, -1, -1))
    if isinstance(order, str):
        raise LayoutError(f"order {order!r}: expected 'C', 'F' or a permutation tuple")
    dim_map = tuple(int(o) for o in order)
    if sorted(dim_map) != list(range(rank)):
        raise LayoutError(f"order {list(dim_map)} is not a permutation of 0..{rank - 1}")
    return dim_map


def partition_view_type(view: TensorViewType, tile_shape: Sequence[int],
                        order: Union[str, Sequence[int]] = "C",
                        padding_value: Optional[PaddingValue] = None) -> PartitionViewType:
    """A partition view of `view` into tiles of `tile_shape` (powers of two)."""
    tile_shape = _positive(tile_shape, "tile shape")
    if len(tile_shape) != view.rank:
        raise LayoutError(f"tile shape {list(tile_shape)} has rank {len(tile_shape)}, the view "
                          f"{view} has rank {view.rank}")
    bad = [t for t in tile_shape if t & (t - 1)]
    if bad:
        raise LayoutError(f"tile dimensions must be powers of two, got {list(tile_shape)}")
    if isinstance(padding_value, str):
        padding_value = PaddingValue.from_keyword(padding_value)
    if padding_value is not None:
        padding_bits(padding_value, view.element)  # raises where the element type cannot hold it
    return PartitionViewType(tile_shape, view, order_dim_map(order, view.rank), padding_value)


def ceildiv(a: int, b: int) -> int:
    return -(-a // b)


def index_space_shape(view: PartitionViewType,
                      shape: Optional[Sequence[int]] = None) -> Tuple[Dim, ...]:
    """Tiles per tile dimension: ceildiv(S[dim_map[i]], T[i]). `shape` gives the tensor view's
    run-time shape; without it, dynamic dimensions give None."""
    sizes = tuple(view.tensor_view.shape) if shape is None else tuple(int(s) for s in shape)
    if len(sizes) != view.tensor_view.rank:
        raise LayoutError(f"shape {list(sizes)} does not match {view.tensor_view}")
    return tuple(None if sizes[d] is None else ceildiv(sizes[d], t)
                 for t, d in zip(view.tile_shape, view.dim_map))


def tile_elements(view: PartitionViewType, index: Sequence[int],
                  shape: Optional[Sequence[int]] = None):
    """For the tile at `index`: (tensor-view coordinates of each tile element, in-bounds mask), as
    arrays of shape tile_shape + (rank,) and tile_shape. Out-of-bounds elements are the ones a load
    pads and a store skips."""
    sizes = tuple(view.tensor_view.shape) if shape is None else tuple(int(s) for s in shape)
    if any(s is None for s in sizes):
        raise LayoutError("tile_elements needs the run-time shape of a dynamic view")
    space = index_space_shape(view, sizes)
    if len(index) != len(space) or any(not 0 <= i < n for i, n in zip(index, space)):
        raise LayoutError(f"index {list(index)} is outside the index space {list(space)} "
                          f"(undefined behaviour in Tile IR)")
    grids = np.indices(view.tile_shape)
    coords = np.zeros(tuple(view.tile_shape) + (len(sizes),), dtype=np.int64)
    for i, d in enumerate(view.dim_map):
        coords[..., d] = index[i] * view.tile_shape[i] + grids[i]
    inside = np.all(coords < np.array(sizes), axis=-1)
    return coords, inside


# ---------------------------------------------------------------------------------------------------
# Padding values


def padding_bits(padding: PaddingValue, element) -> int:
    """The element bit pattern a padding value stands for, or LayoutError where the element type
    has no such value (integers: only zero; formats without NaN, infinities or a sign)."""
    padding = PaddingValue(padding) if not isinstance(padding, str) else \
        PaddingValue.from_keyword(padding)
    element = _element(element)
    if element.is_integer:
        if padding is not PaddingValue.ZERO:
            raise LayoutError(f"padding_value {padding.keyword} needs a float element type; "
                              f"{element.name} takes only zero")
        return 0
    fmt = FLOAT_FORMATS[element.name]
    exp_all = ((1 << fmt.exp_bits) - 1) << fmt.man_bits
    if padding is PaddingValue.ZERO:
        if not fmt.subnormals:
            raise LayoutError(f"{element.name} has no zero")
        return 0
    if padding in (PaddingValue.NEG_ZERO, PaddingValue.NEG_INF) and not fmt.signed:
        raise LayoutError(f"{element.name} is unsigned: no {padding.keyword}")
    if padding is PaddingValue.NEG_ZERO:
        return fmt.sign_bit
    if padding is PaddingValue.NAN:
        if fmt.canonical_nan is None:
            raise LayoutError(f"{element.name} has no NaN")
        return fmt.canonical_nan
    if not fmt.inf:
        raise LayoutError(f"{element.name} has no infinity")
    return exp_all | (fmt.sign_bit if padding is PaddingValue.NEG_INF else 0)


def padding_array(padding: PaddingValue, element, shape: Sequence[int] = ()) -> np.ndarray:
    """A storage array (tilebc.numeric.numerics) filled with the padding value."""
    bits = padding_bits(padding, element)
    return from_bits(np.full(tuple(shape), bits, dtype=np.uint64), _element(element))


def legal_paddings(element) -> Tuple[PaddingValue, ...]:
    """The padding values an element type can hold."""
    legal = []
    for padding in PaddingValue:
        try:
            padding_bits(padding, element)
        except LayoutError:
            continue
        legal.append(padding)
    return tuple(legal)


def all_coordinates(shape: Sequence[int]):
    """Every coordinate of a shape, row-major (for exhaustive checks)."""
    return product(*(range(s) for s in shape))
