"""Small helpers shared by the op families."""
from __future__ import annotations

import numpy as np

from ...ir.types import TileType
from ...ops.enums import RoundingMode
from ..numeric_ops import np_dtype


def element_of(type_) :
    return type_.element if isinstance(type_, TileType) else type_


def result_dtype(op, index: int = 0) -> np.dtype:
    return np_dtype(element_of(op.results[index].type))


def result_shape(op, index: int = 0):
    return op.results[index].type.shape


def operand_element(op, name: str):
    return element_of(op.operands[name].type)


def tile(values, dtype: np.dtype, shape=None) -> np.ndarray:
    """`values` as an ndarray of `dtype` (0-d numpy scalars become 0-d arrays)."""
    array = np.asarray(values)
    if array.dtype != dtype:
        array = array.astype(dtype)
    if shape is not None and array.shape != tuple(shape):
        array = np.broadcast_to(array, shape)
    return array


def rounding(op, name: str = "rounding_mode"):
    mode = op.attrs.get(name)
    return RoundingMode(mode) if mode is not None else None


def output(tb, dtype: np.dtype, *operands):
    """A reusable buffer for an element-wise result of `dtype` shaped like the broadcast of
    `operands` (numpy's `out=`), or None to let numpy allocate."""
    if getattr(tb, "scratch", None) is None:
        return None
    return tb.scratch.output(np.broadcast_shapes(*(np.shape(o) for o in operands)), dtype)


def scratch(tb, shape, dtype: np.dtype):
    """A reusable buffer of `shape` and `dtype` for a result (numpy's `out=`), or None to let
    numpy allocate. Batched runs pool big results across launches (interp/arena.py); one-block
    runs and small tiles allocate."""
    pool = getattr(tb, "scratch", None)
    return None if pool is None else pool.output(tuple(shape), dtype)
