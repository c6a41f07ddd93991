"""Runtime values of the view types and the element addresses one tile of a view covers.

A tensor view is (base address, shape, strides in elements). Sub-views pick tiles out of it:

* partition view: tile index i along tile dimension k covers tensor dimension dim_map[k] at
  elements i*tile[k] ... i*tile[k]+tile[k]-1 (cuTile's `order` lands in dim_map: tile dimension k
  reads array axis order[k]);
* strided view: the same, with tile origins i*traversal_strides[k] (tiles may overlap or leave gaps);
* gather/scatter view: along `sparse_dim` the index operand is a 1-d tile of element indices, one
  per tile row; every other dimension's index is an element offset (cuTile's `Slice(start, n)`).

Elements outside the tensor view's shape are masked: loads fill them with the padding value, stores
drop them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Optional, Tuple

import numpy as np

from ..ops.enums import PaddingValue


@dataclass(frozen=True)
class TensorView:
    base: int
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]
    element: object
    dtype: np.dtype

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class TiledView:
    """partition_view / strided_view / gather_scatter_view (kind says which)."""

    kind: str  # "partition" | "strided" | "gather_scatter"
    tensor: TensorView
    tile_shape: Tuple[int, ...]
    dim_map: Tuple[int, ...]
    steps: Tuple[int, ...]  # element distance between tile origins per tile dimension
    padding: Optional[PaddingValue]
    sparse_dim: int = -1

    def index_space_shape(self) -> Tuple[int, ...]:
        """Number of tiles along each tile dimension (every tile whose origin is in bounds)."""
        if self.kind == "gather_scatter":
            return tuple(int(d) for d in self.tensor.shape)
        return tuple(-(-int(self.tensor.shape[self.dim_map[k]]) // self.steps[k])
                     for k in range(len(self.tile_shape)))


def padding_fill(padding: Optional[PaddingValue], dtype: np.dtype, poison: bool = False):
    """The scalar that fills out-of-bounds elements of a load. Undetermined padding reads as 0,
    or with `poison` (check_undefined) as NaN in a float tile, so that a result depending on it
    shows: compilers fill it as they like (tileiras's TMA loads can give NaN there)."""
    if padding is None and poison and dtype.kind == "f":
        return np.asarray(np.nan).astype(dtype)
    if padding is None or padding is PaddingValue.ZERO:
        return np.zeros((), dtype=dtype)
    value = {PaddingValue.NEG_ZERO: -0.0, PaddingValue.NAN: np.nan,
             PaddingValue.POS_INF: np.inf, PaddingValue.NEG_INF: -np.inf}[padding]
    if dtype.kind not in "fV" and dtype.kind != "f":
        try:
            return np.asarray(value).astype(dtype)
        except (TypeError, ValueError):
            return np.zeros((), dtype=dtype)
    return np.asarray(value).astype(dtype)


def tile_elements(view: TiledView, indices) -> Tuple[np.ndarray, np.ndarray]:
    """(addresses, in-bounds mask) of the tile of `view` at `indices`, both of the tile's shape."""
    tensor = view.tensor
    shape = view.tile_shape
    rank = len(shape)
    coords = [None] * tensor.rank
    for k in range(rank):
        along = np.arange(shape[k], dtype=np.int64)
        if view.kind == "gather_scatter":
            index = np.asarray(indices[k]).astype(np.int64)
            coordinate = index.reshape(-1) if k == view.sparse_dim else int(index) + along
            dim = k
        else:
            coordinate = int(np.asarray(indices[k])) * view.steps[k] + along
            dim = view.dim_map[k]
        expand = [1] * rank
        expand[k] = shape[k]
        coords[dim] = coordinate.reshape(expand)
    offset = np.zeros((1,) * rank, dtype=np.int64)
    mask = np.ones((1,) * rank, dtype=np.bool_)
    for dim in range(tensor.rank):
        coordinate = coords[dim]
        offset = offset + coordinate * int(tensor.strides[dim])
        mask = mask & (coordinate >= 0) & (coordinate < int(tensor.shape[dim]))
    offset = np.broadcast_to(offset, shape)
    mask = np.broadcast_to(mask, shape)
    addresses = (np.int64(tensor.base) + offset * tensor.dtype.itemsize).astype(np.uint64)
    return addresses, mask


class TileWindow(NamedTuple):
    """The in-bounds part of a partition/strided tile as a box of the tile: `box[k]` is the slice
    of tile dimension k inside the tensor, `offset` the element offset (from the tensor's base) of
    the box's first element and `strides` the element strides of the tile dimensions."""

    box: Tuple[slice, ...]
    offset: int
    strides: Tuple[int, ...]
    full: bool  # the box is the whole tile (nothing is padded or dropped)

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(s.stop - s.start for s in self.box)

    def span(self) -> Tuple[int, int]:
        """(lowest, highest) element offset the box touches; the box must be non-empty."""
        low = high = self.offset
        for extent, stride in zip(self.shape, self.strides):
            reach = (extent - 1) * stride
            low, high = (low + reach, high) if reach < 0 else (low, high + reach)
        return low, high

    def overlaps_itself(self) -> bool:
        """Whether two elements of the box share an address (a zero or interleaving stride)."""
        return overlaps(self.shape, self.strides)


def overlaps(shape, strides) -> bool:
    """Whether two elements of a strided box (extents `shape`, element `strides`) share an
    address: some stride is smaller than the span of the smaller-stride dimensions before it."""
    extent = 1  # elements spanned by the dimensions checked so far, smallest stride first
    for stride, length in sorted((abs(s), n) for n, s in zip(shape, strides) if n > 1):
        if stride < extent:
            return True
        extent = stride * (length - 1) + extent
    return False


def tile_window(view: TiledView, indices) -> Optional[TileWindow]:
    """The TileWindow of the tile at `indices`, or None for gather/scatter views (whose tiles are
    not boxes) and tiles that do not cover every tensor dimension once."""
    tensor = view.tensor
    rank = len(view.tile_shape)
    if view.kind == "gather_scatter" or rank != tensor.rank or \
            sorted(view.dim_map) != list(range(rank)):
        return None
    box, strides, offset, full = [], [], 0, True
    for k in range(rank):
        dim = view.dim_map[k]
        origin = int(indices[k]) * view.steps[k]
        length = view.tile_shape[k]
        start = min(max(0, -origin), length)
        stop = max(min(length, int(tensor.shape[dim]) - origin), start)
        full = full and start == 0 and stop == length
        stride = int(tensor.strides[dim])
        box.append(slice(start, stop))
        strides.append(stride)
        offset += (origin + start) * stride
    return TileWindow(tuple(box), offset, tuple(strides), full)
