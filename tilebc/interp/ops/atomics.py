"""Atomic read-modify-write, compare-and-swap, and atomic reduction into a view.

Tile blocks run one at a time, so an atomic op is a read followed by a write. Within one op, lanes
that hit the same address are applied one after another in row-major lane order (each lane sees the
previous lanes' updates), which is one valid order of the device's per-element atomics. Lanes with
distinct addresses are applied in one vectorised step.
"""
from __future__ import annotations

import numpy as np

from ...ops.enums import AtomicRMWMode
from .. import numeric_ops as num
from ..registry import implements
from .memory import TOKEN, pointee_dtype
from .views import view_access


def _apply(mode: AtomicRMWMode, old, value):
    if mode is AtomicRMWMode.AND:
        return old & value
    if mode is AtomicRMWMode.OR:
        return old | value
    if mode is AtomicRMWMode.XOR:
        return old ^ value
    if mode in (AtomicRMWMode.ADD, AtomicRMWMode.ADDF):
        return old + value
    if mode is AtomicRMWMode.MAX:
        return np.maximum(old, value)
    if mode is AtomicRMWMode.MIN:
        return np.minimum(old, value)
    if mode is AtomicRMWMode.UMAX:
        return num.as_signed(np.maximum(num.as_unsigned(old), num.as_unsigned(value)), old.dtype)
    if mode is AtomicRMWMode.UMIN:
        return num.as_signed(np.minimum(num.as_unsigned(old), num.as_unsigned(value)), old.dtype)
    if mode is AtomicRMWMode.XCHG:
        return value
    raise ValueError(mode)


def _update(tb, addresses, dtype, mask, compute):
    """Run `compute(old) -> new` lane by lane semantics; returns the old values (tile-shaped)."""
    addresses = np.asarray(addresses, dtype=np.uint64)
    shape = addresses.shape
    flat = addresses.reshape(-1)
    active = np.ones(flat.size, np.bool_) if mask is None else \
        np.broadcast_to(np.asarray(mask, np.bool_), shape).reshape(-1).copy()
    old = np.zeros(flat.size, dtype=dtype)
    lanes = np.nonzero(active)[0]
    if lanes.size == 0:
        return old.reshape(shape)
    targets = flat[lanes]
    if np.unique(targets).size == targets.size:
        current = tb.memory.load(targets, dtype, None, tb.memory_fault)
        new = compute(current, lanes)
        tb.memory.store(targets, new, dtype, None, tb.memory_fault)
        old[lanes] = current
    else:
        for lane in lanes:  # duplicate addresses: one lane at a time, in lane order
            target = flat[lane:lane + 1]
            current = tb.memory.load(target, dtype, None, tb.memory_fault)
            new = compute(current, np.asarray([lane]))
            tb.memory.store(target, new, dtype, None, tb.memory_fault)
            old[lane] = current[0]
    return old.reshape(shape)


@implements("atomic_rmw_tko")
def _atomic_rmw(tb, op, pointers, arg, mask, token):
    dtype = pointee_dtype(tb, op.operands["pointers"].type)
    mode = AtomicRMWMode(op.attrs["mode"])
    values = np.broadcast_to(np.asarray(arg, dtype=dtype), np.shape(pointers)).reshape(-1)
    old = _update(tb, pointers, dtype, mask,
                  lambda current, lanes: np.asarray(_apply(mode, current, values[lanes]), dtype))
    return [old, TOKEN]


@implements("atomic_cas_tko")
def _atomic_cas(tb, op, pointers, cmp, val, mask, token):
    dtype = pointee_dtype(tb, op.operands["pointers"].type)
    shape = np.shape(pointers)
    expected = np.broadcast_to(np.asarray(cmp, dtype=dtype), shape).reshape(-1)
    desired = np.broadcast_to(np.asarray(val, dtype=dtype), shape).reshape(-1)
    bits = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[dtype.itemsize]

    def compute(current, lanes):
        # compare bit patterns, as the hardware does (so NaN payloads and -0.0 compare exactly)
        same = np.ascontiguousarray(current).view(bits) == \
            np.ascontiguousarray(expected[lanes]).view(bits)
        return np.where(same, desired[lanes], current)
    return [_update(tb, pointers, dtype, mask, compute), TOKEN]


@implements("atomic_red_view_tko")
def _atomic_red_view(tb, op, view, indices, value, token):
    tiled, addresses, mask = view_access(tb, op, view, indices)
    dtype = tiled.tensor.dtype
    mode = AtomicRMWMode(op.attrs["mode"])
    values = np.broadcast_to(np.asarray(value, dtype=dtype), addresses.shape).reshape(-1)
    _update(tb, addresses, dtype, None if mask.all() else mask,
            lambda current, lanes: np.asarray(_apply(mode, current, values[lanes]), dtype))
    return [TOKEN]
