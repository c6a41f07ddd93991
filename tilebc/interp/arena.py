"""Result buffers reused across launches.

A batched run computes whole-grid tiles (a 2^20-element vadd result is 4 MiB). Freshly allocated,
each such array costs a page fault per 4 KiB page on every launch: glibc maps big blocks anew and
hands them back to the kernel when freed. The arena keeps freed result arrays, keyed by shape and
dtype, and gives them to the next launch that asks for the same kind, so element-wise ops write
(numpy's `out=`) into memory that is already mapped.

Ownership: a launch `take`s buffers while it runs and gives all of them `back` when it ends (after
its deferred stores are performed, or when it gives up), so no value of one launch is ever visible
to another. Only arrays of at least `MIN_BYTES` are pooled (numpy's own small-block cache serves
the rest), and at most `LIMIT_BYTES` sit idle in the pool; the oldest go first.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import List, Tuple

import numpy as np

MIN_BYTES = 1 << 16
LIMIT_BYTES = 256 << 20

_lock = threading.Lock()
# (shape, dtype) -> free arrays of that kind; insertion order = age, for eviction
_free: "OrderedDict[Tuple[tuple, np.dtype], List[np.ndarray]]" = OrderedDict()
_idle_bytes = 0


def take(shape: tuple, dtype: np.dtype) -> np.ndarray:
    """A writable C-contiguous array of `shape` and `dtype` with arbitrary contents."""
    key = (shape, dtype)
    global _idle_bytes
    with _lock:
        stack = _free.get(key)
        if stack:
            array = stack.pop()
            _idle_bytes -= array.nbytes
            return array
    return np.empty(shape, dtype)


def give_back(arrays: List[np.ndarray]) -> None:
    """Return arrays from `take` to the pool; the caller must hold no view of them any more."""
    global _idle_bytes
    with _lock:
        for array in arrays:
            key = (array.shape, array.dtype)
            _free.setdefault(key, []).append(array)
            _free.move_to_end(key)
            _idle_bytes += array.nbytes
        while _idle_bytes > LIMIT_BYTES and _free:
            key, stack = next(iter(_free.items()))
            _idle_bytes -= stack.pop(0).nbytes
            if not stack:
                del _free[key]


def clear() -> None:
    """Drop every idle buffer (frees their memory)."""
    global _idle_bytes
    with _lock:
        _free.clear()
        _idle_bytes = 0


class Scratch:
    """The buffers one launch took; `output` is what op implementations call (via
    `_common.output`), `release` ends the launch's use of them."""

    __slots__ = ("taken",)

    def __init__(self):
        self.taken: List[np.ndarray] = []

    def output(self, shape: tuple, dtype) -> np.ndarray | None:
        """A buffer for a result of `shape` / `dtype`, or None when numpy should allocate."""
        dtype = np.dtype(dtype)
        size = dtype.itemsize
        for n in shape:
            size *= n
        if size < MIN_BYTES:
            return None
        array = take(tuple(shape), dtype)
        self.taken.append(array)
        return array

    def release(self) -> None:
        taken, self.taken = self.taken, []
        give_back(taken)
