"""Store fusion in a batched run (batch.py).

A whole-grid element-wise result that only feeds a store would be computed into a temporary and
copied into the destination when the deferred stores are performed. For the float arithmetic
below the run instead keeps the operation itself (`Deferred`) and, when the store is one strided
region, performs it at the end straight into the destination (`out=` the strided view): one
pass over memory instead of two. Performing it later is exact only if its operands still hold
what they held when the op ran: stores performed earlier in the log must not touch them.
"""
from __future__ import annotations

import weakref
from typing import Dict, Tuple

import numpy as np

from ..ir.module import Function
from ..ops.enums import RoundingMode
from ..ops.table import by_mnemonic
from .ops._common import result_dtype, rounding

FUSED_UFUNCS = by_mnemonic({"addf": np.add, "subf": np.subtract, "mulf": np.multiply,
                            "divf": np.divide}, "fused ufuncs")
# Stores whose stored tile a fused op may write directly, by the stored operand's name.
_STORES = by_mnemonic({"store_view_tko": "tile"}, "fused stores")
_NATIVE_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
_FUSIBLE: Dict[int, Tuple[weakref.ref, frozenset]] = {}


def fusible_ops(function: Function) -> frozenset:
    """ids of the ops of `function`'s body that may run deferred: FUSED_UFUNCS ops rounding to
    nearest without flush_to_zero whose result's one use is the stored tile of a store_view_tko
    of the same block."""
    cached = _FUSIBLE.get(id(function))
    if cached is not None and cached[0]() is function:
        return cached[1]
    uses: Dict = {}
    for top in function.body.ops:
        for op in top.walk():
            for value in op.operand_values:
                uses[value] = uses.get(value, 0) + 1
    stored = {op.operands[_STORES[op.name]] for op in function.body.ops if op.name in _STORES}
    found = set()
    for op in function.body.ops:
        if op.name in FUSED_UFUNCS and not op.attrs.get("flush_to_zero") and \
                rounding(op) in (None, RoundingMode.NEAREST_EVEN) and \
                op.results[0] in stored and uses.get(op.results[0]) == 1 and \
                result_dtype(op) in _NATIVE_FLOATS:
            found.add(id(op))
    found = frozenset(found)
    _FUSIBLE[id(function)] = (weakref.ref(function), found)
    return found


class Deferred:
    """An element-wise float op not yet performed: `ufunc(lhs, rhs)` of `dtype`, the operands
    with the block axis when `flags` say so."""

    __slots__ = ("ufunc", "operands", "flags", "dtype", "shape")

    def __init__(self, ufunc, operands, flags, dtype, shape):
        self.ufunc, self.operands, self.flags, self.dtype, self.shape = \
            ufunc, operands, flags, dtype, shape

    def compute(self, out=None):
        return self.ufunc(*self.operands) if out is None else self.ufunc(*self.operands, out=out)
