"""Per-CTA state of the emulator: the register file (one numpy array of shape [threads] per
register), shared memory with race and initialisation tracking, per-thread local memory, and the
address windows of generic addressing.

Addresses. Global memory is `tilebc.interp.memory.GlobalMemory`, so kernel arrays sit at the same
simulated 64-bit addresses as in the CPU interpreter. Shared variables start at SHARED_BASE (the
first 1 KiB of a CTA's shared window is reserved on sm_80+, as on the device); local variables start
at 0 in each thread's local space. A generic address of shared/local data or of a kernel parameter
(cvta) is the state-space address plus SHARED_WINDOW / LOCAL_WINDOW / PARAM_WINDOW; every other
generic address is global.

Races (shared memory, between two bar.sync): a write to a byte another thread wrote with a
different value (write-write), a read of a byte another thread wrote (read-after-write), and a
write to a byte another thread read (write-after-read) are reported. Two threads storing the same
value to one byte is accepted as benign (the JIT's exchanges do it when several threads hold copies
of one element). Reading a shared byte no thread has written in this CTA is an error too.
"""
from __future__ import annotations

from typing import Callable, Dict, Optional

import numpy as np

SHARED_BASE = 0x400
SHARED_WINDOW = 0x1000_0000_0000
LOCAL_WINDOW = 0x2000_0000_0000
PARAM_WINDOW = 0x3000_0000_0000  # kernel parameters (cvta.param): read-only
WINDOW_SIZE = 1 << 32

UINT = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
        8: np.dtype(np.uint64)}
SINT = {1: np.dtype(np.int8), 2: np.dtype(np.int16), 4: np.dtype(np.int32),
        8: np.dtype(np.int64)}

Fault = Callable[..., None]  # fault(message, address=None, thread=None, race=False)


_BYTES = {size: np.arange(size, dtype=np.int64) for size in (1, 2, 4, 8, 16)}
_INT64_MAX = np.iinfo(np.int64).max


def _byte_indices(offsets: np.ndarray, size: int) -> np.ndarray:
    step = _BYTES.get(size)
    if step is None:
        step = np.arange(size, dtype=np.int64)
    return offsets.astype(np.int64, copy=False)[:, None] + step


class SharedMemory:
    """One CTA's shared memory (`size` bytes at SHARED_BASE) with per-byte access tracking."""

    def __init__(self, size: int, check: bool = True):
        self.size = size
        self.check = check
        self.data = np.zeros(size, np.uint8)
        self.written = np.zeros(size, np.bool_)
        self.epoch = 0  # barrier intervals since the CTA started
        self.w_thread = np.full(size, -1, np.int64)
        self.w_epoch = np.full(size, -1, np.int64)
        self.r_epoch = np.full(size, -1, np.int64)
        self.r_min = np.zeros(size, np.int64)  # smallest / largest reader thread this epoch
        self.r_max = np.zeros(size, np.int64)
        self._scratch = None  # for _distinct
        # per byte, how many wgmma.mma_async's still in flight read it (the JIT's own code only;
        # None until one is issued): a store to such a byte is refused
        self.async_reads: np.ndarray | None = None
        self.async_live = 0  # how many read records of wgmma's in flight hold counts there

    def barrier(self) -> None:
        self.epoch += 1

    def read_in_flight(self, offsets: np.ndarray):
        """The index in `offsets` (byte offsets inside this memory) of the first byte that a
        wgmma.mma_async still in flight reads, or None."""
        if not self.async_live:
            return None
        busy = self.async_reads[offsets] > 0
        return int(np.argmax(busy)) if busy.any() else None

    def _offsets(self, addresses: np.ndarray, itemsize: int, fault: Fault, tids, verb: str):
        if addresses.dtype.itemsize == 8 and addresses.dtype.kind in "iu" and \
                itemsize <= self.size and itemsize in _BYTES:
            # one unsigned comparison covers both bounds (a negative offset wraps to a huge
            # one), one AND the alignment (SHARED_BASE is 16-aligned); any fault is reported
            # by the exact checks below
            wrapped = addresses.view(np.uint64) - np.uint64(SHARED_BASE)
            if not np.count_nonzero(wrapped > self.size - itemsize) and \
                    not np.count_nonzero(wrapped & (itemsize - 1)):
                return wrapped.view(np.int64)  # = addresses.astype(np.int64) - SHARED_BASE
        offsets = addresses.astype(np.int64) - SHARED_BASE
        bad = (offsets < 0) | (offsets + itemsize > self.size)
        if bad.any():
            k = int(np.argmax(bad))
            fault(f"shared-memory {verb} of {itemsize} byte(s) outside the CTA's {self.size} "
                  f"bytes of shared variables", address=int(addresses[k]), thread=int(tids[k]))
        misaligned = offsets % itemsize != 0
        if misaligned.any():
            k = int(np.argmax(misaligned))
            fault(f"misaligned shared-memory {verb}: address is not a multiple of {itemsize}",
                  address=int(addresses[k]), thread=int(tids[k]))
        return offsets

    def load(self, addresses: np.ndarray, tids: np.ndarray, dtype: np.dtype,
             fault: Fault) -> np.ndarray:
        size = dtype.itemsize
        offsets = self._offsets(addresses, size, fault, tids, "load")
        idx = _byte_indices(offsets, size)
        if self.check:
            # count_nonzero instead of .any()/.all(): a fraction of their cost on small arrays
            written = self.written[idx]
            if np.count_nonzero(written) != written.size:
                unwritten = ~written.all(axis=1)
                k = int(np.argmax(unwritten))
                fault("read of shared memory that no thread of this CTA has written",
                      address=int(addresses[k]), thread=int(tids[k]))
            this_epoch = self.w_epoch[idx] == self.epoch
            if np.count_nonzero(this_epoch):
                raced = (this_epoch & (self.w_thread[idx] != tids[:, None])).any(axis=1)
                if np.count_nonzero(raced):
                    k = int(np.argmax(raced))
                    writer = int(self.w_thread[idx[k]][self.w_epoch[idx[k]] == self.epoch][0])
                    fault(f"shared-memory race: thread {int(tids[k])} reads a byte thread "
                          f"{writer} wrote with no bar.sync in between",
                          address=int(addresses[k]), thread=int(tids[k]), race=True)
            flat = idx.reshape(-1)
            threads = tids.astype(np.int64, copy=False).repeat(size)
            stale = self.r_epoch[flat] != self.epoch
            if np.count_nonzero(stale):
                self.r_min[flat[stale]] = _INT64_MAX
                self.r_max[flat[stale]] = -1
                self.r_epoch[flat] = self.epoch
            if len(tids) and not np.count_nonzero(tids != tids[0]):
                # one reader (a bulk or wgmma operand read): a plain assignment gives a
                # repeated byte the same value, so no ufunc.at is needed
                reader = threads[0]
                self.r_min[flat] = np.minimum(self.r_min[flat], reader)
                self.r_max[flat] = np.maximum(self.r_max[flat], reader)
            else:
                np.minimum.at(self.r_min, flat, threads)
                np.maximum.at(self.r_max, flat, threads)
        return self.data[idx].reshape(-1).view(dtype).copy()

    def _distinct(self, flat: np.ndarray) -> bool:
        """Whether no byte offset occurs twice in `flat`: each position stamps its own index
        into a scratch array, a repeated offset keeps only its last stamp."""
        scratch = self._scratch
        if scratch is None:
            scratch = self._scratch = np.empty(self.size, np.int64)
        order = np.arange(flat.size)
        scratch[flat] = order
        return not np.count_nonzero(scratch[flat] != order)

    def store(self, addresses: np.ndarray, tids: np.ndarray, values: np.ndarray,
              fault: Fault) -> None:
        values = np.ascontiguousarray(values)
        size = values.dtype.itemsize
        offsets = self._offsets(addresses, size, fault, tids, "store")
        idx = _byte_indices(offsets, size)
        new = values.view(np.uint8).reshape(-1, size)
        busy = self.read_in_flight(idx.reshape(-1))
        if busy is not None:
            fault("overwrites shared memory that a wgmma.mma_async still in flight reads "
                  "(undefined: the hardware may read it until a wgmma.wait_group retires the "
                  "wgmma)", address=int(idx.reshape(-1)[busy]) + SHARED_BASE,
                  thread=int(tids.reshape(-1).repeat(size)[busy]))
        if self.check:
            flat, newflat = idx.reshape(-1), new.reshape(-1)
            threads = tids.astype(np.int64, copy=False).repeat(size)
            # two lanes of this instruction writing different values to one byte (only
            # possible when some byte is written twice)
            if not self._distinct(flat):
                order = np.argsort(flat, kind="stable")
                sf, sv, st = flat[order], newflat[order], threads[order]
                clash = (sf[1:] == sf[:-1]) & (sv[1:] != sv[:-1]) & (st[1:] != st[:-1])
                if clash.any():
                    k = int(np.argmax(clash))
                    fault(f"shared-memory race: threads {int(st[k])} and {int(st[k + 1])} "
                          f"write different values to one byte in the same instruction",
                          address=int(sf[k]) + SHARED_BASE, thread=int(st[k + 1]), race=True)
            same_epoch = self.w_epoch[flat] == self.epoch
            if np.count_nonzero(same_epoch):
                ww = same_epoch & (self.w_thread[flat] != threads) & (self.data[flat] != newflat)
                if ww.any():
                    k = int(np.argmax(ww))
                    fault(f"shared-memory race: thread {int(threads[k])} overwrites a byte "
                          f"thread {int(self.w_thread[flat[k]])} wrote (different value) with "
                          f"no bar.sync in between", address=int(flat[k]) + SHARED_BASE,
                          thread=int(threads[k]), race=True)
            read = self.r_epoch[flat] == self.epoch
            if np.count_nonzero(read):
                war = read & ((self.r_min[flat] != threads) | (self.r_max[flat] != threads))
                if war.any():
                    k = int(np.argmax(war))
                    reader = int(self.r_min[flat[k]]) if self.r_min[flat[k]] != threads[k] \
                        else int(self.r_max[flat[k]])
                    fault(f"shared-memory race: thread {int(threads[k])} writes a byte thread "
                          f"{reader} read with no bar.sync in between", address=int(flat[k]) +
                          SHARED_BASE, thread=int(threads[k]), race=True)
            self.w_thread[flat] = threads
            self.w_epoch[flat] = self.epoch
        self.data[idx] = new
        self.written[idx] = True


class LocalMemory:
    """Each thread's private local memory (`size` bytes from address 0)."""

    def __init__(self, size: int, threads: int):
        self.size = size
        self.data = np.zeros((threads, size), np.uint8)
        self.written = np.zeros((threads, size), np.bool_)

    def _offsets(self, addresses, itemsize, fault, tids, verb):
        offsets = addresses.astype(np.int64)
        bad = (offsets < 0) | (offsets + itemsize > self.size)
        if bad.any():
            k = int(np.argmax(bad))
            fault(f"local-memory {verb} of {itemsize} byte(s) outside the thread's {self.size} "
                  f"bytes of local variables", address=int(addresses[k]), thread=int(tids[k]))
        return offsets

    def load(self, addresses, tids, dtype, fault):
        offsets = self._offsets(addresses, dtype.itemsize, fault, tids, "load")
        idx = _byte_indices(offsets, dtype.itemsize)
        rows = tids.astype(np.int64)[:, None]
        if not self.written[rows, idx].all():
            k = int(np.argmax(~self.written[rows, idx].all(axis=1)))
            fault("read of local memory the thread has not written", address=int(addresses[k]),
                  thread=int(tids[k]))
        return self.data[rows, idx].reshape(-1).view(dtype).copy()

    def store(self, addresses, tids, values, fault):
        values = np.ascontiguousarray(values)
        size = values.dtype.itemsize
        offsets = self._offsets(addresses, size, fault, tids, "store")
        idx = _byte_indices(offsets, size)
        rows = tids.astype(np.int64)[:, None]
        self.data[rows, idx] = values.view(np.uint8).reshape(-1, size)
        self.written[rows, idx] = True


class Cta:
    """One CTA being executed: registers, memories, and the special registers' values."""

    def __init__(self, launch, ctaid, threads: int, registers: Dict[str, np.dtype]):
        self.launch = launch
        self.ctaid = ctaid
        self.T = threads
        template = getattr(launch, "_cta_template", None)
        if template is None or template[0] is not registers or template[1] != threads:
            template = launch._cta_template = _launch_template(launch, registers, threads)
        _, _, zero_registers, self.tids, fixed_specials = template
        # registers are replaced, never written in place (a mov already shares its source's
        # array), so every CTA may start from the same zero arrays
        self.r: Dict[str, np.ndarray] = dict(zero_registers)
        self.shared = SharedMemory(launch.shared_size, launch.check)
        self.local = LocalMemory(launch.local_size, threads)
        self.call_params: Dict[str, np.ndarray] = {}
        self.printed: list = []  # what this CTA printed (the message of a later trap)
        self.mbarriers: Dict[int, object] = {}  # shared address -> isa_sm90.MBarrier
        self.stalled_waits = 0  # failed mbarrier waits since the last arrival (deadlocks)
        # threads whose last mbarrier wait failed: divergent scheduling passes them over
        # until an arrival (so a consumer's wait loop lets the producer warps run)
        self.blocked = np.zeros(threads, np.bool_)
        self.any_blocked = False
        # named barriers: number -> threads arrived so far; threads waiting for one to complete
        self.named_barriers: Dict[int, np.ndarray] = {}
        self.barrier_wait = np.zeros(threads, np.bool_)
        self.any_barrier_wait = False
        # wgmma results in flight: register -> (value, mask) newest; the uncommitted group and
        # the committed ones, oldest first, each register -> (writer, value, mask)
        self.wgmma_pending: Dict[str, tuple] = {}
        self.wgmma_open: Dict[str, tuple] = {}
        self.wgmma_groups: list = []
        self.special = dict(fixed_specials)
        for axis, k in (("x", 0), ("y", 1), ("z", 2)):
            self.special[f"%ctaid.{axis}"] = self.special[f"%clusterid.{axis}"] = \
                np.full(threads, ctaid[k], np.uint32)


def _launch_template(launch, registers: Dict[str, np.dtype], threads: int) -> tuple:
    """What every CTA of a launch starts with: (registers, threads, zero register values,
    thread ids, the special registers that do not depend on the CTA id)."""
    zeros: Dict[np.dtype, np.ndarray] = {}
    zero_registers = {name: zeros.setdefault(dtype, np.zeros(threads, dtype))
                      for name, dtype in registers.items()}
    specials = _specials(threads, launch.grid, (0, 0, 0))
    for axis in "xyz":
        del specials[f"%ctaid.{axis}"], specials[f"%clusterid.{axis}"]
    tids = np.arange(threads, dtype=np.int64)
    # shared by every CTA of the launch: a write into one in place would change them all, so
    # such a write fails loudly instead
    for value in (*zeros.values(), *specials.values(), tids):
        value.setflags(write=False)
    return registers, threads, zero_registers, tids, specials


def _specials(T: int, grid, ctaid) -> Dict[str, np.ndarray]:
    """The special registers' values in a CTA of `T` threads (`ctaid`) of `grid`."""
    tid = np.arange(T, dtype=np.uint32)
    zeros = np.zeros(T, np.uint32)
    values = {"%tid.x": tid, "%tid.y": zeros, "%tid.z": zeros,
              "%ntid.x": np.full(T, T, np.uint32), "%ntid.y": np.ones(T, np.uint32),
              "%ntid.z": np.ones(T, np.uint32), "%laneid": tid % 32,
              "%warpid": tid // 32, "%nwarpid": np.full(T, -(-T // 32), np.uint32),
              "%smid": zeros, "%nsmid": np.ones(T, np.uint32),
              "%lanemask_eq": (np.uint32(1) << (tid % 32)).astype(np.uint32),
              "%lanemask_lt": ((np.uint64(1) << (tid % 32).astype(np.uint64))
                               - np.uint64(1)).astype(np.uint32),
              "%lanemask_le": ((np.uint64(1) << (tid % 32 + 1).astype(np.uint64))
                               - np.uint64(1)).astype(np.uint32)}
    ones = np.ones(T, np.uint32)
    for axis, k in (("x", 0), ("y", 1), ("z", 2)):
        values[f"%ctaid.{axis}"] = np.full(T, ctaid[k], np.uint32)
        values[f"%nctaid.{axis}"] = np.full(T, grid[k], np.uint32)
        # clusters of one CTA (a launch without cluster dimensions)
        values[f"%clusterid.{axis}"] = values[f"%ctaid.{axis}"]
        values[f"%nclusterid.{axis}"] = values[f"%nctaid.{axis}"]
        values[f"%cluster_ctaid.{axis}"] = zeros
        values[f"%cluster_nctaid.{axis}"] = ones
    values["%cluster_ctarank"] = zeros
    values["%cluster_nctarank"] = ones
    return values
