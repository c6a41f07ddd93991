"""The store log of a batched run (batch.py): stores are checked when issued and performed at the
end in the sequential schedule's order; reads and writes are checked against each other."""
from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np

from .memory import Buffer


class BatchFallback(Exception):
    """The launch cannot run batched with sequential results; `reason` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class MemoryLog:
    """The memory accesses of a batched run: stores are checked when issued and performed by
    `apply` at the end; reads and writes are checked against each other so that the run's
    results are the sequential schedule's.

    Rules (anything else raises BatchFallback, before any memory is written):

    * writes: the sequential schedule leaves in an element the last write of the highest block
      that wrote it; performing the log in issue order does the same as long as the writers of
      each element, in issue order, never go down in block number (within one store, lanes are
      in block order). `owners` holds the highest writer of each element so far.
    * reads: stores are deferred, so no element may be read after it was written; and an element
      some block writes may be read only by that block (`readers`: the one block that read each
      element, -2 for several). Reads whose lanes are known (strided view loads) are tracked per
      element, lazily: only a buffer that is also written materialises them. Other reads (pointer
      loads, padded or gathered tiles) count for their whole buffer, which then cannot be
      written.

    Owner and reader arrays are per element of the first access's size; a buffer accessed with
    two element sizes gives up."""

    def __init__(self):
        self.actions: List = []
        self.first_write: Dict[Buffer, Tuple[int, object]] = {}
        self.owners: Dict[Buffer, Tuple[int, np.ndarray]] = {}
        self.tracked_reads: Dict[Buffer, List[Tuple[int, object]]] = {}
        self.readers: Dict[Buffer, Tuple[int, np.ndarray]] = {}
        self.opaque_reads: set = set()

    # observer of GlobalMemory: accesses that bring no lane information
    def observe(self, buffer: Buffer, verb: str) -> None:
        if verb == "load":
            if buffer in self.first_write:
                raise BatchFallback(f"tile blocks read {buffer.name} after tile blocks wrote it")
            self.opaque_reads.add(buffer)
        elif verb == "plan":
            if buffer in self.opaque_reads:
                raise BatchFallback(f"tile blocks both read and write {buffer.name}")
        elif verb != "tracked":
            raise BatchFallback("a store would bypass the batched store log")

    @staticmethod
    def _sized(table, buffer: Buffer, itemsize: int) -> np.ndarray:
        size, array = table[buffer]
        if size != itemsize:
            raise BatchFallback(f"{buffer.name} is accessed with elements of different sizes")
        return array

    def _owners(self, buffer: Buffer, itemsize: int) -> np.ndarray:
        if buffer not in self.owners:
            size, lanes = self.first_write[buffer]
            owners = np.full(buffer.nbytes // size, -1, dtype=np.int64)
            index, blocks = lanes()
            owners[index] = blocks
            self.owners[buffer] = (size, owners)
        return self._sized(self.owners, buffer, itemsize)

    def _readers(self, buffer: Buffer, itemsize: int) -> np.ndarray:
        if buffer not in self.readers:
            readers = np.full(buffer.nbytes // itemsize, -1, dtype=np.int64)
            self.readers[buffer] = (itemsize, readers)
            for size, lanes in self.tracked_reads.pop(buffer, ()):
                self._mark_read(buffer, size, *lanes())
        return self._sized(self.readers, buffer, itemsize)

    def _mark_read(self, buffer: Buffer, itemsize: int, index, blocks) -> None:
        readers = self._readers(buffer, itemsize)
        before = readers[index]
        # repeated indices keep the last assignment: reversed lanes leave the lowest reading
        # block of each element, in-order lanes the highest
        readers[index[::-1]] = blocks[::-1]
        lowest = readers[index]
        readers[index] = blocks
        several = ((before != -1) & (before != blocks)) | (lowest != blocks)
        readers[index[several]] = -2

    def read(self, buffer: Buffer, itemsize: int, lanes) -> None:
        """A read whose lanes() = (element indices, reading blocks) are known."""
        if buffer in self.first_write:
            index, blocks = lanes()
            if np.any(self._owners(buffer, itemsize)[index] != -1):
                raise BatchFallback(f"tile blocks read elements of {buffer.name} after they "
                                    f"were written")
            self._mark_read(buffer, itemsize, index, blocks)
        elif buffer in self.readers:
            self._mark_read(buffer, itemsize, *lanes())
        else:
            self.tracked_reads.setdefault(buffer, []).append((itemsize, lanes))

    def record(self, buffer: Buffer, itemsize: int, lanes, action) -> None:
        """A write: `lanes()` gives (element indices, writing blocks) in performing order;
        `action()` performs it."""
        if buffer in self.opaque_reads:
            raise BatchFallback(f"tile blocks both read and write {buffer.name}")
        read = buffer in self.tracked_reads or buffer in self.readers
        first = buffer not in self.first_write
        if first:
            self.first_write[buffer] = (itemsize, lanes)
        if read or not first:
            index, blocks = lanes()
            if read:
                readers = self._readers(buffer, itemsize)[index]
                if np.any((readers != -1) & (readers != blocks)):
                    raise BatchFallback(f"tile blocks write elements of {buffer.name} that "
                                        f"other tile blocks read")
            if not first:
                owners = self._owners(buffer, itemsize)
                if np.any(blocks < owners[index]):
                    raise BatchFallback(f"tile blocks write the same elements of {buffer.name} "
                                        f"in an order the batched run cannot reproduce")
                owners[index] = blocks
        self.actions.append(action)

    def clear(self) -> None:
        """Forget every access (the run is over)."""
        self.actions.clear()
        self.first_write.clear()
        self.owners.clear()
        self.tracked_reads.clear()
        self.readers.clear()
        self.opaque_reads.clear()

    def apply(self) -> None:
        for action in self.actions:
            action()
