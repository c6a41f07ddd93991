"""TMA tensor maps as the emulator models them, and the element placement of tile-mode bulk tensor
copies (cp.async.bulk.tensor, isa_sm90.py).

A tensor map (CUtensorMap) is a 128-byte object the driver encodes (cuTensorMapEncodeTiled); its
byte layout is not documented, so the emulator never reads or writes map bytes. A map is a
TensorMap object bound to the kernel parameter that holds it (`emulate(tensor_maps=...)`); the
copy instructions find it through the parameter's address (a .param symbol, or the generic
address cvta.param gives). Instructions that would read or rewrite map bytes (tensormap.replace,
ld of a map parameter) are refused.

How tileiras's kernels get theirs (issue 18). tileiras's sm_90 PTX declares, after the kernel's
own parameters, one `.hidden .param .align 64 .b8 name[128]` per tensor it moves with TMA, and
never writes them: the code only takes their address (`mov.b64 %rd, param; cvta.param.u64`) for
`prefetch.tensormap` and `cp.async.bulk.tensor` (no tensormap.replace, no
tensormap.cp_fenceproxy / fence.proxy.tensormap, no map in global memory). The maps come with
the cubin instead: tileiras marks the kernel EIATTR_LANGUAGE TILEIR and embeds in `.nv.host` an
x86-64 ELF, host code the driver runs at launch to encode the hidden maps from the ordinary
parameter values (base pointer, shapes, strides) into the parameter buffer. So a launcher that
passes only the kernel's own arguments (cuLaunchKernel with the Tile IR parameters) runs it
correctly, and the encoding (box sizes, swizzle) is tileiras's choice, not visible in the PTX.
sim/nvidia.py rebuilds the maps from the Tile IR module (see `nvidia.tensor_maps`).

Placement (PTX ISA, "Tensor copy" / tiled mode). Dimension 0 is the contiguous one. A copy at
coordinates c moves the box of elements c .. c + box - 1; in shared memory the box is dense,
dimension 0 fastest, rows of box[0] elements. Elements outside the tensor (any coordinate < 0 or
>= its dimension) are read as zero and not written. With a swizzle of W bytes (32, 64, 128) the
16-byte unit of each shared address is XORed with the address bits 7 and up: bits [4, 4+b) ^=
bits [7, 7+b), b = log2(W / 16), the same pattern as wgmma's swizzled operands. Modelled only where
a row is exactly W bytes (the only case the rows-and-XOR reading pins down), with the box in
shared memory aligned to the 8 x W bytes the pattern repeats over (16 bytes without swizzle:
tileiras places 1-d boxes 16-byte aligned).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from .errors import SimExecutionError

SWIZZLES = (0, 32, 64, 128)
MAX_RANK = 5


@dataclass(frozen=True)
class TensorMap:
    """A tiled-mode tensor map. Sizes are in elements, strides in bytes, dimension 0 first (the
    contiguous one: its stride is the element size)."""

    address: int  # global address of element (0, ..., 0)
    element_size: int  # bytes
    dims: Tuple[int, ...]  # elements per dimension
    strides: Tuple[int, ...]  # byte strides of dimensions 1 .. rank-1
    box: Tuple[int, ...]  # elements per dimension the copy moves
    swizzle: int = 0  # 0 (none), 32, 64 or 128 bytes

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def box_bytes(self) -> int:
        return int(np.prod(self.box)) * self.element_size

    def problem(self) -> Optional[str]:
        """Why the map is not one cuTensorMapEncodeTiled accepts (or the emulator models)."""
        if not 1 <= self.rank <= MAX_RANK:
            return f"rank {self.rank} (1 to {MAX_RANK})"
        if len(self.box) != self.rank or len(self.strides) != self.rank - 1:
            return "box and strides do not match the rank"
        if self.element_size not in (1, 2, 4, 8):
            return f"element size {self.element_size}"
        if self.address % 16:
            return "the global address is not 16-byte aligned"
        if any(not 1 <= d < 2 ** 32 for d in self.dims):
            return "a dimension outside 1 .. 2^32-1"
        if any(s % 16 or not 0 < s < 2 ** 40 for s in self.strides):
            return "a stride that is not a positive multiple of 16 below 2^40"
        if any(not 1 <= b <= 256 for b in self.box):
            return "a box size outside 1 .. 256"
        row = self.box[0] * self.element_size
        if row % 16:
            return f"box rows of {row} bytes (a multiple of 16)"
        if self.swizzle not in SWIZZLES:
            return f"swizzle {self.swizzle}"
        if self.swizzle and row != self.swizzle:
            return (f"{self.swizzle}-byte swizzle on {row}-byte box rows (modelled for rows of "
                    "exactly the swizzle width)")
        return None

    def validate(self) -> None:
        problem = self.problem()
        if problem:
            raise SimExecutionError(f"tensor map not modelled: {problem} ({self})")

    def box_elements(self, coords) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For a copy at `coords` (one per dimension, dimension 0 first): the global address of
        each box element, whether it lies inside the tensor, and its byte offset in the dense
        box (before swizzling), all in shared-memory order."""
        if len(coords) != self.rank:
            raise SimExecutionError(f"{len(coords)} coordinates for a rank-{self.rank} map")
        # indices [box[-1], ..., box[0]]: the last axis is dimension 0
        grids = np.indices(tuple(reversed(self.box)), dtype=np.int64).reshape(self.rank, -1)
        index = grids[::-1] + np.asarray(coords, np.int64)[:, None]
        inside = np.all((index >= 0) & (index < np.asarray(self.dims, np.int64)[:, None]), 0)
        steps = np.asarray((self.element_size,) + tuple(self.strides), np.int64)
        offsets = np.where(inside, index, 0) * steps[:, None]
        addresses = (np.uint64(self.address) + offsets.sum(0).astype(np.uint64))
        dense = np.arange(index.shape[1], dtype=np.int64) * self.element_size
        return addresses, inside, dense

    def shared_addresses(self, base: int, dense: np.ndarray) -> np.ndarray:
        """Shared addresses of the box's elements (their first bytes) placed at `base`."""
        address = np.int64(base) + dense
        if self.swizzle:
            bits = self.swizzle // 16 - 1
            address = address ^ (((address >> 7) & bits) << 4)
        return address.astype(np.uint64)

    def shared_alignment(self) -> int:
        return 8 * self.swizzle if self.swizzle else 16
