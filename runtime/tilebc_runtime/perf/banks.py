"""Shared-memory bank conflicts: how many wavefronts a warp's shared access takes. One count for
the emulator's profile (sim/profile.py) and the lowering's choice of exchange buffers
(lowering/staging.py), so what the lowering minimises is what the model charges.

Banks are 32 x 4 bytes. A thread access of b bytes runs in phases of 32 / min(b / 4, 4) lanes
(8-byte: half-warps, 16-byte: quarter-warps); a phase takes as many wavefronts as the largest
number of distinct 4-byte words any bank must deliver (one word to many lanes is a broadcast).
Sorting, not np.unique: numpy 2.4's np.unique is ~50x slower on large arrays."""
from __future__ import annotations

from ..lazy_numpy import np

BANKS = 32
WARP = 32


def distinct(values):
    """The sorted distinct values of a 1-D integer array."""
    ordered = np.sort(values, kind="stable")
    if ordered.size < 2:
        return ordered
    keep = np.empty(ordered.size, np.bool_)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def _runs(ordered):
    """(start of each run of equal values, its length) in a sorted 1-D array."""
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    return starts, np.diff(np.append(starts, ordered.size))


def lanes_per_phase(access_bytes: int) -> int:
    return WARP // max(1, min(access_bytes // 4, 4)) if access_bytes >= 4 else WARP


def shared_wavefronts(group, words) -> int:
    """Wavefronts of shared accesses: words[i] is the 4-byte word element i touches, group[i]
    its (access, warp, phase) number. Per group the largest count of distinct words in one
    bank, summed over the groups."""
    if words.size == 0:
        return 0
    keys = distinct((group.astype(np.int64) << 32) | words.astype(np.int64))
    banks = np.sort(((keys >> 32) << 5) | (keys & (BANKS - 1)))
    starts, counts = _runs(banks)
    group_of = banks[starts] >> 5
    firsts = np.flatnonzero(np.concatenate(([True], group_of[1:] != group_of[:-1])))
    return int(np.maximum.reduceat(counts, firsts).sum())


def ideal_wavefronts(warp, words) -> int:
    """ceil(distinct bytes / 128) per warp, at least 1 per warp that accesses."""
    keys = distinct((warp.astype(np.int64) << 32) | words.astype(np.int64))
    _, per_warp = _runs(keys >> 32)
    return int(np.maximum(1, -(-(per_warp * 4) // 128)).sum())


def access_wavefronts(positions, access_bytes: int) -> int:
    """Wavefronts of warp-wide accesses given as `positions`, an (accesses, threads) array of
    the byte offset / access_bytes of each thread's access (an element or vector index)."""
    pos = np.asarray(positions, np.int64)
    accesses, threads = pos.shape
    words_each = max(1, -(-access_bytes // 4))
    lane = np.arange(threads)
    byte = pos * access_bytes
    words = (byte[:, :, None] // 4 + np.arange(words_each)).reshape(-1)
    phase = (lane % WARP) // lanes_per_phase(access_bytes)
    group = (np.arange(accesses)[:, None] * (threads // WARP + 1) + lane // WARP) * WARP + phase
    group = np.repeat(group.reshape(-1), words_each)
    return shared_wavefronts(group, words)
