"""Pointer arithmetic, pointer loads/stores, globals, scratch memory and tokens.

Tokens: every memory op takes effect when it executes, in program order, which is one valid
execution of any token ordering; token values are all the same marker object. Memory ordering
semantics and scopes (weak, relaxed, acquire, ...) therefore need no action on a machine that runs
one tile block at a time. Grid dependency control (gdc_*) has no other grid to wait for or release
on a single-device interpreter, so both ops only pass their token on.
"""
from __future__ import annotations

import numpy as np

from .. import numeric_ops as num
from ..registry import implements, refuse
from ._common import element_of, result_dtype

TOKEN = object()  # the runtime value of every token (see module docstring)


@implements("make_token")
def _make_token(tb, op):
    return [TOKEN]


@implements("join_tokens", "memory_fence_alias_tko", "gdc_launch_dependents_tko", "gdc_wait_tko",
            lanewise=True)
def _pass_token(tb, op, *_):
    return [TOKEN]


@implements("offset", lanewise=True)
def _offset(tb, op, ptr, offset):
    """ptr + offset * sizeof(pointee), wrapping at 64 bits like the device's address arithmetic."""
    pointee = element_of(op.results[0].type).pointee
    size = max(1, (pointee.bits + 7) // 8)
    delta = np.asarray(offset).astype(np.int64) * np.int64(size)
    return [(np.asarray(ptr, dtype=np.uint64) + delta.astype(np.uint64)).astype(np.uint64)]


@implements("get_global")
def _get_global(tb, op):
    name = op.attrs["name"]
    address = tb.machine.global_addresses.get(name)
    if address is None:
        tb.fail(f"no global named @{name} in the module")
    return [np.asarray(address, dtype=np.uint64)]


@implements("alloca")
def _alloca(tb, op):
    """Fresh, uninitialised scratch memory for this tile block (reads before writes fault)."""
    pointee = element_of(op.results[0].type).pointee
    size = max(1, (pointee.bits + 7) // 8) * int(op.attrs["num_elem"])
    buffer = tb.memory.allocate(size, f"alloca in tile block {tb.coords}",
                                alignment=int(op.attrs.get("alignment") or 1))
    return [np.asarray(buffer.base, dtype=np.uint64)]


def pointee_dtype(tb, pointer_type):
    element = element_of(pointer_type).pointee
    try:
        return num.memory_dtype(element)
    except TypeError as error:
        tb.fail(str(error))


@implements("load_ptr_tko", lanewise=True)
def _load_ptr(tb, op, source, mask, padding, token):
    dtype = pointee_dtype(tb, op.operands["source"].type)
    fill = 0 if padding is None else padding
    if mask is not None:
        # in a batched launch any of the three may carry the block axis (lane-wise op)
        shape = np.broadcast_shapes(np.shape(source), np.shape(mask), np.shape(fill))
        source = np.broadcast_to(source, shape)
        fill = np.broadcast_to(np.asarray(fill), shape)
        values = tb.memory.load(source, dtype, mask, tb.memory_fault, 0)
        values = np.where(np.broadcast_to(mask, np.shape(source)), values, fill)
    else:
        values = tb.memory.load(source, dtype, None, tb.memory_fault)
    return [np.asarray(values).astype(result_dtype(op), copy=False), TOKEN]


@implements("store_ptr_tko")
def _store_ptr(tb, op, destination, value, mask, token):
    dtype = pointee_dtype(tb, op.operands["destination"].type)
    tb.memory.store(destination, value, dtype, mask, tb.memory_fault)
    return [TOKEN]


_MULTIMEM = ("multimem ops reduce or broadcast across the devices of a multicast allocation; the "
             "interpreter simulates one device with no multicast memory")
refuse("multimem_load_reduce_view_tko", _MULTIMEM)
refuse("multimem_reduce_view_tko", _MULTIMEM)
refuse("multimem_store_view_tko", _MULTIMEM)
refuse("preview$call", "calls a foreign device function the interpreter cannot run")
