"""View construction, view queries, and tile loads/stores through views."""
from __future__ import annotations

import numpy as np

from ...ir.types import GatherScatterViewType, PartitionViewType, StridedViewType, TensorViewType
from .. import numeric_ops as num
from ..registry import implements
from ..views import TensorView, TiledView, padding_fill, tile_elements, tile_window
from ._common import element_of, result_dtype
from .memory import TOKEN


def _dims(static, dynamic):
    dynamic = iter(dynamic)
    return tuple(int(next(dynamic)) if d is None else int(d) for d in static)


@implements("make_tensor_view")
def _make_tensor_view(tb, op, base, shape_values, stride_values):
    view_type: TensorViewType = op.results[0].type
    shape = _dims(view_type.shape, shape_values)
    strides = _dims(view_type.strides, stride_values)
    if any(d < 0 for d in shape):
        tb.fail(f"tensor view shape {shape} has a negative dimension")
    return [TensorView(int(base), shape, strides, view_type.element,
                       num.memory_dtype(view_type.element))]


@implements("make_partition_view", "make_strided_view", "make_gather_scatter_view")
def _make_tiled_view(tb, op, tensor):
    view_type = op.results[0].type
    if isinstance(view_type, PartitionViewType):
        view = TiledView("partition", tensor, tuple(view_type.tile_shape),
                         tuple(view_type.dim_map), tuple(view_type.tile_shape),
                         view_type.padding_value)
    elif isinstance(view_type, StridedViewType):
        view = TiledView("strided", tensor, tuple(view_type.tile_shape), tuple(view_type.dim_map),
                         tuple(view_type.traversal_strides), view_type.padding_value)
    elif isinstance(view_type, GatherScatterViewType):
        rank = len(view_type.tile_shape)
        view = TiledView("gather_scatter", tensor, tuple(view_type.tile_shape),
                         tuple(range(rank)), (1,) * rank, view_type.padding_value,
                         sparse_dim=int(view_type.sparse_dim))
    else:
        tb.fail(f"{op.name} cannot make a {view_type}")
    return [view]


def as_tiled(view) -> TiledView:
    """A tensor view read as one tile covering all of it (its index space is rank 0)."""
    if isinstance(view, TiledView):
        return view
    rank = view.rank
    return TiledView("partition", view, tuple(view.shape), tuple(range(rank)), tuple(view.shape),
                     None)


@implements("get_tensor_shape")
def _get_tensor_shape(tb, op, source):
    tensor = source.tensor if isinstance(source, TiledView) else source
    return [np.asarray(d).astype(result_dtype(op, i)) for i, d in enumerate(tensor.shape)]


@implements("get_index_space_shape")
def _get_index_space_shape(tb, op, source):
    return [np.asarray(d).astype(result_dtype(op, i))
            for i, d in enumerate(as_tiled(source).index_space_shape())]


def view_access(tb, op, view, indices):
    """(tiled view, addresses, in-bounds mask) of one access, checking `inbounds` promises."""
    tiled = as_tiled(view)
    if len(indices) != len(tiled.tile_shape) and not (len(indices) == 0 and view is not tiled):
        tb.fail(f"{len(indices)} indices for a view of rank {len(tiled.tile_shape)}")
    if not indices:
        indices = (0,) * len(tiled.tile_shape)
    addresses, mask = tile_elements(tiled, indices)
    promised = op.attrs.get("inbounds") or ()
    if tb.options.check_memory and any(promised) and not mask.all():
        bad = int(addresses[~mask].reshape(-1)[0])
        tb.memory_fault("access declared inbounds reaches outside the tensor view", bad)
    return tiled, addresses, mask


def strided_access(tb, op, view, indices, writing: bool):
    """Fast path of a view access: (tiled view, window, memory) where `memory` is a numpy view of
    the bound buffer over the tile's in-bounds box (None when the box is empty). One bounds,
    alignment and initialisation check covers the whole box (`GlobalMemory.window`).

    Returns None whenever the per-element path must run instead: gather/scatter views, a box the
    window check rejects (that path then reports the exact fault), a broken `inbounds` promise,
    or a store whose elements alias one another (that path applies "the later lane wins")."""
    tiled = as_tiled(view)
    if not indices and view is not tiled:
        indices = (0,) * len(tiled.tile_shape)
    if len(indices) != len(tiled.tile_shape):
        return None
    window = tile_window(tiled, indices)
    if window is None:
        return None
    if not window.full and any(op.attrs.get("inbounds") or ()):
        return None
    shape = window.shape
    if 0 in shape:
        return tiled, window, None
    if writing and window.overlaps_itself():
        return None
    tensor = tiled.tensor
    itemsize = tensor.dtype.itemsize
    low, high = window.span()
    memory = tb.memory.window(tensor.base + low * itemsize, tensor.base + high * itemsize,
                              itemsize, writing)
    if memory is None:
        return None
    byte_offset = tensor.base - memory.base + window.offset * itemsize
    region = np.ndarray(shape, dtype=tensor.dtype, buffer=memory.data, offset=byte_offset,
                        strides=tuple(s * itemsize for s in window.strides))
    return tiled, window, region


@implements("load_view_tko")
def _load_view(tb, op, view, indices, token):
    fast = strided_access(tb, op, view, indices, writing=False)
    dtype = result_dtype(op)
    if fast is not None:
        tiled, window, region = fast
        if window.full:
            return [np.array(region, dtype=dtype), TOKEN]
        values = np.empty(tiled.tile_shape, dtype=tiled.tensor.dtype)
        values[...] = padding_fill(tiled.padding, tiled.tensor.dtype,
                                   tb.options.check_undefined)
        if region is not None:
            values[window.box] = region
        return [values.astype(dtype, copy=False), TOKEN]
    tiled, addresses, mask = view_access(tb, op, view, indices)
    fill = padding_fill(tiled.padding, tiled.tensor.dtype, tb.options.check_undefined)
    values = tb.memory.load(addresses, tiled.tensor.dtype, None if mask.all() else mask,
                            tb.memory_fault, fill)
    return [values.astype(dtype, copy=False), TOKEN]


@implements("store_view_tko")
def _store_view(tb, op, tile_value, view, indices, token):
    fast = strided_access(tb, op, view, indices, writing=True)
    if fast is not None:
        tiled, window, region = fast
        if region is not None:
            values = np.broadcast_to(np.asarray(tile_value).astype(tiled.tensor.dtype, copy=False),
                                     tiled.tile_shape)
            region[...] = values[window.box]
        return [TOKEN]
    tiled, addresses, mask = view_access(tb, op, view, indices)
    tb.memory.store(addresses, tile_value, tiled.tensor.dtype, None if mask.all() else mask,
                    tb.memory_fault)
    return [TOKEN]


_ = element_of
