"""Where a tile staged in shared memory for an exchange (`Lowerer.gather`) puts its elements.

Unpadded, element i sits at i. An exchange that reads down columns (a transpose, a permute) then
has every lane of a warp in the same 4-byte bank: a [64, 64] f16 transpose serializes each
shared load 32 ways. `Padded(shift, pad)` leaves `pad` unused elements after every 2**shift
elements, so successive rows start in successive banks. `choose_placement` counts, at compile
time, the shared-memory wavefronts of the exchange's actual writes and reads under each
candidate and keeps the cheapest (unpadded on a tie, and never more than an eighth larger).
"""
from __future__ import annotations

from tilebc.record import Record

from ..lazy_numpy import np
from ..perf.banks import WARP, access_wavefronts

MAX_GROWTH = 8    # a padded buffer is at most 1/MAX_GROWTH larger than the unpadded one
PAD_BYTES = (4, 8, 16)


class Padded(Record):
    """Element i at i + (i >> shift) * pad."""
    _fields = ("shift", "pad")

    def __init__(self, shift: int, pad: int):
        object.__setattr__(self, "shift", shift)
        object.__setattr__(self, "pad", pad)

    def position(self, index):
        """Positions (in elements) of linear indices: an int or a numpy array."""
        return index + (index >> self.shift) * self.pad

    def buffer_elements(self, count: int) -> int:
        return int(self.position(count - 1)) + 1 if count else 0

    def emit(self, w, index: str) -> str:
        """u32 register holding the position of the element whose index is in `index`."""
        rows, position = w.reg("b32"), w.reg("b32")
        w(f"shr.u32 {rows}, {index}, {self.shift}")
        w(f"mad.lo.u32 {position}, {rows}, {self.pad}, {index}")
        return position


def position(place: Padded | None, index):
    return index if place is None else place.position(index)


def buffer_bytes(place: Padded | None, count: int, size: int) -> int:
    return (count if place is None else place.buffer_elements(count)) * size


def wavefronts(positions, size: int) -> int:
    """Shared-memory wavefronts of warp-wide accesses of `size` bytes at element positions
    `positions` ((accesses, threads)), as the emulator's profile counts them (perf/banks.py)."""
    return access_wavefronts(positions, size)


def choose_placement(count: int, size: int, writes, reads, vector: int = 1,
                     read_vector: int = 1) -> Padded | None:
    """The placement of a `count`-element buffer of `size`-byte elements with the fewest
    wavefronts over `writes` and `reads` (each (accesses, threads) arrays of linear indices, either
    may have no rows); None (unpadded) unless a padding is strictly cheaper. With `vector` (or
    `read_vector`) > 1 the writes (reads) are vector accesses of that many elements, the array
    holding each one's first index, so only paddings that keep every vector whole and aligned
    are candidates."""
    groups = [(np.asarray(r, np.int64), width) for r, width in ((writes, vector),
                                                                (reads, read_vector)) if len(r)]
    vector = max(vector, read_vector)
    if count <= 1 or not groups:
        return None

    def cost(place):
        return sum(wavefronts(position(place, r), size * width) for r, width in groups)
    best, best_cost = None, cost(None)
    floor = sum(r.shape[0] * -(-r.shape[1] // WARP) * max(1, size * width // 4)
                for r, width in groups)
    if best_cost <= floor:
        return None
    limit = count + count // MAX_GROWTH
    shift = max(1, vector.bit_length() - 1)
    while (1 << shift) < count:
        for pad_bytes in PAD_BYTES:
            if pad_bytes % (size * vector):
                continue
            place = Padded(shift, pad_bytes // size)
            if place.buffer_elements(count) > limit:
                continue
            candidate = cost(place)
            if candidate < best_cost:
                best, best_cost = place, candidate
                if best_cost <= floor:  # nothing does better than no conflicts
                    return best
        shift += 1
    return best
