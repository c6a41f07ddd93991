"""Construct schemas for the container: header, section framing and the offset-indexed tables.

Every schema both parses and builds; `tests/test_container.py` checks build(parse(b)) == b.
"""
from __future__ import annotations

import enum
import operator
from typing import List, Optional, Tuple

import construct as cs
from construct import this

from ..errors import DecodeError
from .primitives import PADDING_BYTE

MAGIC = b"\x7fTileIR\x00"


class SectionId(enum.IntEnum):
    END = 0
    STRING = 1
    FUNC = 2
    DEBUG = 3
    CONSTANT = 4
    TYPE = 5
    GLOBAL = 6
    PRODUCER = 7


# Alignment the reader insists on (None: no alignment flag required) and writers advertise.
SECTION_ALIGNMENT = {
    SectionId.STRING: 4, SectionId.FUNC: 8, SectionId.DEBUG: 8, SectionId.CONSTANT: 8,
    SectionId.TYPE: 4, SectionId.GLOBAL: None, SectionId.PRODUCER: None,
}
REQUIRED_SECTIONS = (SectionId.STRING, SectionId.FUNC)
PREVIEW_TAG_BIT = 0x0001


class AbsolutePadding(cs.Construct):
    """0xCB bytes up to a multiple of `alignment`, measured from the start of the stream (the file)."""

    def __init__(self, alignment):
        super().__init__()
        self.alignment = alignment

    def _pad(self, stream, context, path) -> int:
        alignment = self.alignment(context) if callable(self.alignment) else self.alignment
        if alignment <= 0 or alignment & (alignment - 1):
            raise cs.ValidationError(f"alignment {alignment} is not a power of two", path=path)
        return (-cs.stream_tell(stream, path)) % alignment

    def _parse(self, stream, context, path):
        pad = self._pad(stream, context, path)
        data = cs.stream_read(stream, pad, path)
        bad = [i for i, byte in enumerate(data) if byte != PADDING_BYTE]
        if bad:
            raise cs.ValidationError(
                f"padding byte is 0x{data[bad[0]]:02x}, expected 0x{PADDING_BYTE:02X}", path=path)
        return pad

    def _build(self, obj, stream, context, path):
        pad = self._pad(stream, context, path)
        cs.stream_write(stream, bytes([PADDING_BYTE]) * pad, pad, path)
        return pad

    def _sizeof(self, context, path):
        raise cs.SizeofError(path=path)


Header = cs.Struct(
    "magic" / cs.Const(MAGIC),
    "major" / cs.Int8ul,
    "minor" / cs.Int8ul,
    "tag" / cs.Int16ul,
)

Section = cs.Struct(
    "header" / cs.BitStruct("aligned" / cs.Flag, "id" / cs.BitsInteger(7)),
    "length" / cs.If(this.header.id != SectionId.END, cs.VarInt),
    "alignment" / cs.If(this.header.aligned, cs.VarInt),
    "padding" / cs.If(this.header.aligned, AbsolutePadding(this.alignment)),
    "payload" / cs.If(this.header.id != SectionId.END, cs.Bytes(this.length)),
)


def OffsetTable(offset_width: int, alignment: int) -> cs.Struct:
    """`count`, padding, `count` offsets, then the concatenated blobs (string/type/constant tables).

    Offsets are kept as raw bytes so a large table costs one slice, not one construct call per entry.
    """
    return cs.Struct(
        "count" / cs.VarInt,
        "padding" / AbsolutePadding(alignment),
        "offsets" / cs.Bytes(this.count * offset_width),
        "data" / cs.GreedyBytes,
    )


StringTable = OffsetTable(4, 4)
TypeTable = OffsetTable(4, 4)
ConstantTable = OffsetTable(8, 8)


def parse_construct(schema: cs.Construct, data: bytes, *, base: int, what: str,
                    file: Optional[str]):
    """Parse `data` (found at absolute offset `base`) with `schema`, translating construct's errors.

    Alignment inside a payload is relative to the payload start; sections are aligned at least as
    strictly as anything inside them, so relative and absolute alignment agree.
    """
    import io
    stream = io.BytesIO(data)
    try:
        return schema.parse_stream(stream)
    except cs.ConstructError as error:
        detail = str(error).split("\n")[-1]
        detail = detail.split(") ", 1)[-1] if detail.startswith("(") else detail
        raise DecodeError(f"malformed {what}: {detail}", file=file,
                          offset=base + stream.tell()) from None


def split_blobs(offsets: List[int], data: bytes, *, what: str, base: int,
                file: Optional[str]) -> List[bytes]:
    """Blob i runs from offsets[i] to offsets[i+1] (the last one to the end of the data)."""
    blobs = []
    previous = 0
    for index, start in enumerate(offsets):
        stop = offsets[index + 1] if index + 1 < len(offsets) else len(data)
        if not (previous <= start <= stop <= len(data)):
            raise DecodeError(f"{what} entry {index} has offset {start}, outside 0..{len(data)} "
                              "or out of order", file=file, offset=base)
        blobs.append(data[start:stop])
        previous = start
    return blobs


class BlobTable:
    """Entries of an offset-indexed table, sliced on first use: table[i] -> (file offset, bytes).

    The offsets are validated up front exactly as `split_blobs` does (it reports the first bad
    entry), but with one pass in C instead of a Python loop per entry.
    """

    __slots__ = ("offsets", "data", "base")

    def __init__(self, offsets: List[int], data: bytes, *, what: str, base: int,
                 file: Optional[str]):
        in_order = all(map(operator.le, offsets, offsets[1:]))
        if not in_order or (offsets and offsets[-1] > len(data)):
            split_blobs(offsets, data, what=what, base=base, file=file)  # raises, naming the entry
        self.offsets = offsets
        self.data = data
        self.base = base

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, index: int) -> Tuple[int, bytes]:
        offsets = self.offsets
        start = offsets[index]
        stop = offsets[index + 1] if index + 1 < len(offsets) else len(self.data)
        return self.base + start, self.data[start:stop]
