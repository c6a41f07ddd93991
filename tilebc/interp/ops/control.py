"""Structured control flow with carried values, terminators, and the tile block's grid queries.

A region ends in a terminator, which becomes a `Signal`: `yield` ends an `if` branch or a combiner,
`continue` / `break` end a loop iteration or the loop, `return` ends the entry. An `if` whose branch
ends in continue / break / return passes that signal on to the enclosing op.
"""
from __future__ import annotations

import numpy as np

from ...ops.spec import Exit
from ..registry import Signal, implements
from ._common import result_dtype


@implements("yield", "continue", "break", "return")
def _terminator(tb, op, values):
    return Signal(op.spec, values)


@implements("get_tile_block_id", per_block=True)
def _tile_block_id(tb, op):
    return [np.asarray(c).astype(result_dtype(op, i)) for i, c in enumerate(tb.coords)]


@implements("get_num_tile_blocks")
def _num_tile_blocks(tb, op):
    return [np.asarray(g).astype(result_dtype(op, i)) for i, g in enumerate(tb.grid)]


@implements("if")
def _if(tb, op, condition):
    region = op.regions[0] if bool(condition) else op.regions[1] if len(op.regions) > 1 else None
    if region is None or not region.blocks:
        return []
    signal = tb.run_region(region, ())
    tb.current_op = op
    if signal is None:
        return []
    if signal.exit is Exit.VALUES:
        return list(signal.values)
    return signal  # continue / break / return leave the enclosing loop or entry


@implements("for")
def _for(tb, op, lower, upper, step, init_values):
    dtype = np.asarray(lower).dtype
    unsigned = bool(op.attrs.get("unsignedCmp"))
    width = dtype.itemsize * 8

    def as_int(value):
        number = int(np.asarray(value))
        return number % (1 << width) if unsigned else number
    index, end, stride = as_int(lower), as_int(upper), as_int(step)
    if stride <= 0 and index < end:
        tb.fail(f"for loop step must be positive, got {stride}")
    carried = list(init_values)
    body = op.regions[0]
    while index < end:
        tb.machine.count_iteration(tb)
        signal = tb.run_region(body, [np.asarray(index).astype(dtype)] + carried)
        tb.current_op = op
        if signal is None or signal.exit is Exit.NEXT:
            carried = list(signal.values) if signal is not None else carried
        elif signal.exit is Exit.LEAVE_LOOP:
            return list(signal.values)
        elif signal.exit is Exit.LEAVE_KERNEL:
            return signal
        else:
            tb.fail(f"for body ended with {signal.kind}")
        index += stride
    return carried


@implements("loop")
def _loop(tb, op, init_values):
    carried = list(init_values)
    body = op.regions[0]
    while True:
        tb.machine.count_iteration(tb)
        signal = tb.run_region(body, carried)
        tb.current_op = op
        if signal is None or signal.exit is Exit.NEXT:
            carried = list(signal.values) if signal is not None else carried
        elif signal.exit is Exit.LEAVE_LOOP:
            return list(signal.values)
        elif signal.exit is Exit.LEAVE_KERNEL:
            return signal
        else:
            tb.fail(f"loop body ended with {signal.kind}")
