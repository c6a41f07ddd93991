"""Global memory of the abstract machine: host numpy buffers mapped at simulated 64-bit addresses.

Every kernel array, module global and `alloca` scratch buffer is registered here at an address of
its own (256-byte aligned, with an unmapped gap between buffers), so pointer values, `offset`,
`ptr_to_int` / `int_to_ptr` and pointer tiles behave as on the device while all data stays in the
caller's numpy arrays. Accesses are whole tiles of addresses: one vectorised lookup per access.

With checking on (the default) every access is validated: the address must fall inside one
registered buffer, be aligned to the element size, and (for scratch memory and arrays the caller
marked uninitialised) read only bytes written before. A fault names the op, tile block and address.
"""
from __future__ import annotations

import bisect
from typing import Callable, Dict, List, NamedTuple, Optional

import numpy as np

BASE_ADDRESS = 0x7F00_0000_0000  # looks like a device address; never a host pointer
ALIGNMENT = 256
GAP = 4096  # unmapped bytes between buffers, so off-by-a-little accesses fault


def overlapping_pairs(views):
    """The pairs (i, j), i < j, of `views` that have a byte in common. A view is a numpy array,
    or (address, shape, byte strides, itemsize) for memory this process cannot read (a device
    array): nothing is read either way. Views whose byte ranges interleave without sharing a
    byte (the two halves of a tensor's last dimension) do not overlap; views too intricate for
    numpy's bounded search count as overlapping."""
    arrays = [_described(view) for view in views]
    spans = sorted((np.lib.array_utils.byte_bounds(a), index) for index, a in enumerate(arrays)
                   if a.size)
    found = []
    for position, ((low, high), first) in enumerate(spans):
        for (other_low, _), second in spans[position + 1:]:
            if other_low >= high:
                break  # sorted by their first byte: no later view reaches back into this one
            if _share_a_byte(arrays[first], arrays[second]):
                found.append(tuple(sorted((first, second))))
    return found


class _Interface:
    """An array interface over an address, for numpy's overlap test (which reads no data)."""

    def __init__(self, address: int, shape, strides, itemsize: int):
        self.__array_interface__ = {"version": 3, "data": (address, True), "shape": tuple(shape),
                                    "strides": tuple(strides), "typestr": f"|V{itemsize}"}


def _described(view):
    if isinstance(view, np.ndarray):
        return view
    address, shape, strides, itemsize = view
    return np.asarray(_Interface(address, shape, strides, itemsize))


def _share_a_byte(first: np.ndarray, second: np.ndarray) -> bool:
    too_hard = getattr(getattr(np, "exceptions", np), "TooHardError")
    try:
        return bool(np.shares_memory(first, second, max_work=1 << 20))
    except too_hard:
        return True


class Buffer:
    """One mapped region: `data` is a flat uint8 view of the host memory it stands for."""

    __slots__ = ("base", "nbytes", "data", "name", "initialised", "_typed", "readonly")

    def __init__(self, base: int, data: np.ndarray, name: str, initialised: bool = True,
                 readonly: bool = False):
        self.base = base
        self.data = data
        self.nbytes = data.size
        self.name = name
        # per-byte "written" flags; None when the whole buffer counts as initialised
        self.initialised: Optional[np.ndarray] = None if initialised else \
            np.zeros(data.size, dtype=np.bool_)
        self._typed: Dict[np.dtype, np.ndarray] = {}
        self.readonly = readonly

    @property
    def end(self) -> int:
        return self.base + self.nbytes

    def typed(self, dtype: np.dtype) -> np.ndarray:
        """The buffer as a flat array of `dtype` (the tail shorter than one element is cut)."""
        view = self._typed.get(dtype)
        if view is None:
            usable = self.nbytes - self.nbytes % dtype.itemsize
            view = self.data[:usable].view(dtype)
            self._typed[dtype] = view
        return view


def host_bytes(array: np.ndarray) -> np.ndarray:
    """A flat uint8 view of the memory an array occupies (its full byte extent, gaps included
    for non-contiguous arrays), sharing memory with the array."""
    if array.size == 0:
        return np.zeros(0, dtype=np.uint8)
    if array.flags.c_contiguous or array.flags.f_contiguous:
        return array.reshape(-1, order="A").view(np.uint8)
    low, high = np.lib.array_utils.byte_bounds(array)

    class _Extent:  # exposes [low, high) through the array interface; `keep` holds the owner
        keep = array
        __array_interface__ = {"shape": (high - low,), "typestr": "|u1",
                               "data": (low, not array.flags.writeable), "version": 3}
    return np.asarray(_Extent())


class Write(NamedTuple):
    """One checked, not yet performed part of a store: `values` go to elements `index` (of
    `dtype`) of `buffer`; `lanes` are their positions in the store's flattened tile and `offsets`
    their byte offsets in the buffer."""

    buffer: Buffer
    dtype: np.dtype
    index: np.ndarray
    values: np.ndarray
    lanes: np.ndarray
    offsets: np.ndarray


class GlobalMemory:
    """The machine's address space (see module docstring).

    `observer`, when set, is called as observer(buffer, verb) for every buffer an access reaches,
    before the access: verb "load", "store" or "plan" (a store checked by `plan_store` and
    performed later). The batched runner uses it to keep tile blocks from communicating."""

    def __init__(self, checks: bool = True):
        self.checks = checks
        self.observer: Optional[Callable[[Buffer, str], None]] = None
        self.buffers: List[Buffer] = []
        self._bases: List[int] = []
        self._next = BASE_ADDRESS

    # ----------------------------------------------------------------- mapping

    def map(self, data: np.ndarray, name: str, *, initialised: bool = True,
            alignment: int = ALIGNMENT) -> Buffer:
        """Register a flat uint8 host buffer; returns the Buffer with its simulated base address."""
        alignment = max(ALIGNMENT, int(alignment or 1))
        base = (self._next + alignment - 1) // alignment * alignment
        buffer = Buffer(base, data, name, initialised)
        self._next = base + max(data.size, 1) + GAP
        index = bisect.bisect(self._bases, base)
        self._bases.insert(index, base)
        self.buffers.insert(index, buffer)
        self._bases_array = None
        return buffer

    def allocate(self, nbytes: int, name: str, alignment: int = ALIGNMENT) -> Buffer:
        """Fresh scratch memory (alloca): uninitialised until written."""
        return self.map(np.zeros(int(nbytes), dtype=np.uint8), name, initialised=False,
                        alignment=alignment)

    def buffer_at(self, address: int) -> Optional[Buffer]:
        index = bisect.bisect(self._bases, int(address)) - 1
        if index >= 0 and address < self.buffers[index].end:
            return self.buffers[index]
        return None

    def window(self, low: int, high: int, itemsize: int, writing: bool,
               verb: Optional[str] = None) -> Optional[Buffer]:
        """The buffer a strided tile access may use without per-element checks, or None.

        [low, high + itemsize) is the byte span of the access. It qualifies when one buffer holds
        all of it, `low` is element-aligned (so is every element: tile strides are whole elements),
        the buffer is fully initialised and, for a write, writable. Anything else returns None and
        the caller takes the per-element path, which reports the fault exactly."""
        buffer = self.buffer_at(low)
        if buffer is None or high + itemsize > buffer.end or (low - buffer.base) % itemsize:
            return None
        if buffer.initialised is not None or (writing and buffer.readonly):
            return None
        if self.observer is not None:
            self.observer(buffer, verb or ("store" if writing else "load"))
        return buffer

    # ------------------------------------------------------------------ access

    def _locate(self, addresses: np.ndarray, itemsize: int, fault: Callable, verb: str):
        """Group flat uint64 addresses by buffer: (buffer, positions, byte offsets) per group.
        `verb` is "load", "store" or "plan" (a store checked now, performed later)."""
        action = "store" if verb == "plan" else verb
        low = int(addresses.min())
        high = int(addresses.max())
        buffer = self.buffer_at(low)
        if buffer is not None and high + itemsize <= buffer.end:
            groups = [(buffer, None, addresses)]
        else:
            bases = np.asarray(self._bases, dtype=np.uint64)
            which = np.searchsorted(bases, addresses, side="right").astype(np.int64) - 1
            ends = np.asarray([b.end for b in self.buffers], dtype=np.uint64)
            outside = (which < 0) | (addresses + np.uint64(itemsize)
                                     > ends[np.maximum(which, 0)] if len(ends) else True)
            if np.any(outside):
                bad = int(np.asarray(addresses)[np.argmax(outside)])
                near = self._describe_near(bad)
                fault(f"{action} of {itemsize} byte(s) outside every array bound to the kernel"
                      f"{near}", bad)
            groups = []
            for index in np.unique(which):
                positions = np.nonzero(which == index)[0]
                groups.append((self.buffers[int(index)], positions, addresses[positions]))
        result = []
        for buffer, positions, group in groups:
            if self.observer is not None:
                self.observer(buffer, verb)
            offsets = group - np.uint64(buffer.base)
            if self.checks and itemsize > 1:
                misaligned = (group % np.uint64(itemsize)) != 0
                if np.count_nonzero(misaligned):  # cheaper than np.any on small arrays
                    bad = int(group[np.argmax(misaligned)])
                    fault(f"misaligned {action}: address is not a multiple of {itemsize}", bad)
            result.append((buffer, positions, offsets))
        return result

    def _describe_near(self, address: int) -> str:
        index = bisect.bisect(self._bases, address) - 1
        if index >= 0:
            buffer = self.buffers[index]
            return f" ({address - buffer.end} bytes past the end of {buffer.name})" \
                if address >= buffer.end else ""
        return ""

    def load(self, addresses, dtype: np.dtype, mask, fault: Callable, fill=0) -> np.ndarray:
        """Read one element of `dtype` per address where `mask` is true (others get `fill`)."""
        addresses = np.asarray(addresses, dtype=np.uint64)
        shape = addresses.shape
        flat = addresses.reshape(-1)
        result = np.empty(flat.size, dtype=dtype)
        active = None
        if mask is not None:
            active = np.broadcast_to(np.asarray(mask, dtype=np.bool_), shape).reshape(-1)
            result[:] = fill
            flat_active = flat[active]
        else:
            flat_active = flat
        if flat_active.size:
            values = np.empty(flat_active.size, dtype=dtype)
            for buffer, positions, offsets in self._locate(flat_active, dtype.itemsize, fault,
                                                           "load"):
                element_index = (offsets // np.uint64(dtype.itemsize)).astype(np.intp)
                if self.checks and buffer.initialised is not None:
                    self._check_initialised(buffer, offsets, dtype.itemsize, fault)
                gathered = buffer.typed(dtype)[element_index]
                if positions is None:
                    values = gathered
                else:
                    values[positions] = gathered
            if active is None:
                result = values
            else:
                result[active] = values
        return result.reshape(shape)

    def store(self, addresses, values, dtype: np.dtype, mask, fault: Callable) -> None:
        """Write one element per address where `mask` is true; later lanes win on duplicates."""
        for write in self.plan_store(addresses, values, dtype, mask, fault, verb="store"):
            self.perform(write)

    def plan_store(self, addresses, values, dtype: np.dtype, mask, fault: Callable,
                   verb: str = "plan") -> List[Write]:
        """Check a store as `store` does (bounds, alignment, read-only) and return its Writes
        without performing them."""
        addresses = np.asarray(addresses, dtype=np.uint64)
        shape = addresses.shape
        flat = addresses.reshape(-1)
        values = np.broadcast_to(np.asarray(values, dtype=dtype), shape).reshape(-1)
        lanes = np.arange(flat.size)
        if mask is not None:
            active = np.broadcast_to(np.asarray(mask, dtype=np.bool_), shape).reshape(-1)
            flat, values, lanes = flat[active], values[active], lanes[active]
        if not flat.size:
            return []
        writes = []
        for buffer, positions, offsets in self._locate(flat, dtype.itemsize, fault, verb):
            if buffer.readonly:
                fault(f"store into read-only {buffer.name}", int(offsets[0]) + buffer.base)
            element_index = (offsets // np.uint64(dtype.itemsize)).astype(np.intp)
            if positions is None:
                writes.append(Write(buffer, dtype, element_index, values, lanes, offsets))
            else:
                writes.append(Write(buffer, dtype, element_index, values[positions],
                                    lanes[positions], offsets))
        return writes

    @staticmethod
    def perform(write: Write) -> None:
        """Carry out a planned write (numpy assigns repeated indices in order: the last wins)."""
        buffer = write.buffer
        buffer.typed(write.dtype)[write.index] = write.values
        if buffer.initialised is not None:
            spans = write.offsets.astype(np.intp)[:, None] + np.arange(write.dtype.itemsize)
            buffer.initialised[spans.reshape(-1)] = True

    def _check_initialised(self, buffer: Buffer, offsets, itemsize: int, fault) -> None:
        spans = offsets.astype(np.intp)[:, None] + np.arange(itemsize)
        written = buffer.initialised[spans].all(axis=1)
        if not written.all():
            bad = int(offsets[np.argmax(~written)]) + buffer.base
            fault(f"load of uninitialised memory in {buffer.name}", bad)
