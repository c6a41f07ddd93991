"""Mutations of real bytecode for fuzzing the reader.

Each mutator takes the bytes of a valid file, a random source (`random.Random`, or hypothesis's
`st.randoms()` so hypothesis drives and shrinks the choices) and the corpus (for splices), and
returns new bytes. The mutators know the container's framing (sections, their length varints,
the header's version bytes) so they reach past the first checks instead of only breaking the magic.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "bytecode"
MAGIC = b"\x7fTileIR\x00"
VERSIONS = ((13, 1), (13, 2), (13, 3), (13, 4), (13, 5))


def corpus(max_size: int = 1 << 20) -> List[Tuple[str, bytes]]:
    """(name, bytes) of every stored cuTile fixture, smallest first."""
    files = sorted(FIXTURES.glob("*/*.tilebc"), key=lambda p: (p.stat().st_size, p.name))
    found = [(p.stem, p.read_bytes()) for p in files if p.stat().st_size <= max_size]
    if not found:
        raise RuntimeError(f"no fixtures under {FIXTURES}")
    return found


# ---- an independent walk of the container framing -----------------------------------------------

@dataclass
class Span:
    id: int
    start: int      # offset of the section id byte
    length_at: int  # offset of the length varint
    payload: int    # first payload byte
    end: int        # one past the payload


def read_varint(data: bytes, pos: int) -> Tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def sections(data: bytes) -> List[Span]:
    """The sections of a well-formed file (not the end marker); [] if the framing is broken."""
    spans, pos = [], 12
    try:
        while data[pos] & 0x7F:
            start, byte = pos, data[pos]
            length, pos = read_varint(data, pos + 1)
            length_at = start + 1
            if byte & 0x80:
                alignment, pos = read_varint(data, pos)
                pos += (-pos) % alignment if alignment else 0
            spans.append(Span(byte & 0x7F, start, length_at, pos, pos + length))
            pos += length
    except (IndexError, ZeroDivisionError):
        return []
    return spans


def varint_positions(data: bytes, start: int, end: int) -> List[int]:
    """Offsets in data[start:end] where a varint could start (after a byte < 0x80)."""
    return [i for i in range(max(start, 1), end) if data[i - 1] < 0x80]


# ---- mutators ------------------------------------------------------------------------------------

def flip_bits(data: bytes, rng: random.Random, pool) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def set_bytes(data: bytes, rng: random.Random, pool) -> bytes:
    out = bytearray(data)
    interesting = (0x00, 0x01, 0x7F, 0x80, 0xFF, 0xCB, rng.randrange(256))
    for _ in range(rng.randint(1, 3)):
        out[rng.randrange(len(out))] = rng.choice(interesting)
    return bytes(out)


def truncate(data: bytes, rng: random.Random, pool) -> bytes:
    return data[:rng.randrange(len(data))]


def insert_delete(data: bytes, rng: random.Random, pool) -> bytes:
    out = bytearray(data)
    position = rng.randrange(len(out))
    if rng.random() < 0.5:
        out[position:position] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    else:
        del out[position:position + rng.randint(1, 8)]
    return bytes(out)


def splice_section(data: bytes, rng: random.Random, pool) -> bytes:
    """Replace one section's payload with the same section of another file (any version)."""
    mine = sections(data)
    _, other = rng.choice(pool)
    theirs = {s.id: s for s in sections(other)}
    candidates = [s for s in mine if s.id in theirs]
    if not candidates:
        return flip_bits(data, rng, pool)
    target = rng.choice(candidates)
    source = theirs[target.id]
    payload = other[source.payload:source.end]
    # New length varint; if its size changes, the padding that follows is now off (also a test).
    _, after_length = read_varint(data, target.length_at)
    head = data[:target.length_at] + varint(len(payload)) + data[after_length:target.payload]
    return head + payload + data[target.end:]


def stretch_varint(data: bytes, rng: random.Random, pool) -> bytes:
    """Re-encode one varint with extra 0x80 continuation bytes (non-minimal, possibly over 10 bytes)."""
    spans = sections(data)
    if spans and rng.random() < 0.5:
        position = rng.choice(spans).length_at
    else:
        position = rng.choice(varint_positions(data, 12, len(data)) or [12])
    try:
        value, end = read_varint(data, position)
    except IndexError:
        return flip_bits(data, rng, pool)
    extra = rng.choice((1, 2, 5, 9, 10))
    groups = []
    while True:
        groups.append(value & 0x7F)
        value >>= 7
        if not value:
            break
    groups += [0] * extra
    encoded = bytes(g | 0x80 for g in groups[:-1]) + bytes([groups[-1]])
    return data[:position] + encoded + data[end:]


def inflate_count(data: bytes, rng: random.Random, pool) -> bytes:
    """Replace a varint (a count, index or length) with a much larger value."""
    spans = sections(data)
    if spans and rng.random() < 0.3:
        span = rng.choice(spans)
        position = span.length_at if rng.random() < 0.5 else span.payload
    else:
        position = rng.choice(varint_positions(data, 12, len(data)) or [12])
    try:
        value, end = read_varint(data, position)
    except IndexError:
        return flip_bits(data, rng, pool)
    big = rng.choice((value + 1, value * 2 + 1, 127, 128, 255, 1 << 14, 1 << 21, 1 << 31,
                      1 << 40, (1 << 63) - 1, (1 << 64) - 1))
    return data[:position] + varint(big) + data[end:]


def relabel_version(data: bytes, rng: random.Random, pool) -> bytes:
    """Give a file another version's header (13.1-13.5, rarely an unsupported one or a preview tag)."""
    out = bytearray(data)
    if len(out) < 12:
        return bytes(out)
    major, minor = rng.choice(VERSIONS + ((13, 0), (13, 6), (12, 9)))
    out[8], out[9] = major, minor
    if rng.random() < 0.15:
        out[10] ^= 1  # the public-preview tag bit
    return bytes(out)


def table_word(data: bytes, rng: random.Random, pool) -> bytes:
    """Overwrite an aligned 32-bit word inside a table section (string, debug, constant, type):
    table offsets, debug function ranges and location indices are fixed-width, not varints."""
    spans = [s for s in sections(data) if s.id in (1, 3, 4, 5) and s.end - s.payload >= 8]
    if not spans:
        return flip_bits(data, rng, pool)
    span = rng.choice(spans)
    position = span.payload + 4 * rng.randrange((span.end - span.payload) // 4)
    old = int.from_bytes(data[position:position + 4], "little")
    # Small values, neighbours, extremes, and the section's own first byte values (counts:
    # making a range start where the indices end empties it).
    counts = [data[p] for p in range(span.payload, min(span.payload + 16, span.end))]
    new = rng.choice((0, 1, 2, old + 1, max(old - 1, 0), old * 2, 0xFFFFFFFF, rng.randrange(1 << 16),
                      rng.choice(counts)))
    return data[:position] + (new & 0xFFFFFFFF).to_bytes(4, "little") + data[position + 4:]


MUTATORS: Dict[str, Callable[[bytes, random.Random, Sequence], bytes]] = {
    "table_word": table_word,
    "flip": flip_bits,
    "set": set_bytes,
    "truncate": truncate,
    "insert_delete": insert_delete,
    "splice": splice_section,
    "stretch_varint": stretch_varint,
    "inflate_count": inflate_count,
    "relabel_version": relabel_version,
}


def mutate(data: bytes, rng: random.Random, pool, rounds: int = 0) -> Tuple[bytes, List[str]]:
    """Apply 1-3 random mutators (or `rounds` of them); returns (bytes, mutator names)."""
    names = []
    for _ in range(rounds or rng.choice((1, 1, 1, 2, 3))):
        if not data:
            break
        name = rng.choice(sorted(MUTATORS))
        data = MUTATORS[name](data, rng, pool)
        names.append(name)
    return data, names
