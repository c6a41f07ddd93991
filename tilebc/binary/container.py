"""Construct schemas for the container: header, section framing and the offset-indexed tables.

Every schema both parses and builds; `tests/test_container.py` checks build(parse(b)) == b.
The schemas (and construct) load on first use: the reader frames a well-formed file with the
plain readers below and turns to a schema only to report (or leniently read) a malformed one.
"""
from __future__ import annotations

import enum
import operator
import re

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


_SCHEMA_NAMES = ("AbsolutePadding", "Header", "Section", "OffsetTable", "StringTable",
                 "TypeTable", "ConstantTable")


def _build_schemas() -> dict:
    import construct as cs
    from construct import this

    class AbsolutePadding(cs.Construct):
        """0xCB bytes up to a multiple of `alignment`, measured from the start of the stream
        (the file)."""

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
            start = cs.stream_tell(stream, path)
            data = cs.stream_read(stream, pad, path)
            bad = [i for i, byte in enumerate(data) if byte != PADDING_BYTE]
            if bad:
                message = f"padding byte is 0x{data[bad[0]]:02x}, expected 0x{PADDING_BYTE:02X}"
                # A lenient parse passes a list to collect (stream position, message) in, and
                # goes on.
                sink = context._params.get("padding_sink")
                if sink is None:
                    raise cs.ValidationError(message, path=path)
                sink.append((start + bad[0], message))
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
        """`count`, padding, `count` offsets, then the concatenated blobs (string/type/constant
        tables). Offsets are kept as raw bytes so a large table costs one slice, not one
        construct call per entry.
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
    return {name: value for name, value in locals().items() if name in _SCHEMA_NAMES}


def __getattr__(name):
    # the construct schemas, built once on first access (module attributes from then on)
    if name in _SCHEMA_NAMES:
        globals().update(_build_schemas())
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def construct_detail(error, what: str) -> str:
    """construct's error message, said in the format's terms."""
    detail = str(error).split("\n")[-1]
    detail = detail.split(") ", 1)[-1] if detail.startswith("(") else detail
    short = re.match(r"stream read less than specified amount, expected (\d+), found (\d+)",
                     detail)
    if short:
        return f"truncated: {short[1]} bytes needed here, only {short[2]} left in the {what}"
    return detail


def parse_construct(schema, data: bytes, *, base: int, what: str,
                    file: str | None, padding_sink: list | None = None):
    """Parse `data` (found at absolute offset `base`) with `schema`, translating construct's errors.

    Alignment inside a payload is relative to the payload start; sections are aligned at least as
    strictly as anything inside them, so relative and absolute alignment agree. With a
    `padding_sink` list, padding bytes other than 0xCB are appended to it as (position in `data`,
    message) instead of failing.
    """
    import io

    import construct as cs
    stream = io.BytesIO(data)
    try:
        return schema.parse_stream(stream, padding_sink=padding_sink)
    except cs.ConstructError as error:
        detail = construct_detail(error, what)
        raise DecodeError(f"malformed {what}: {detail}", file=file,
                          offset=base + stream.tell()) from None


def _uleb(data: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it) of the LEB128 varint at `pos`; (-1, pos) when it runs past the
    data or over 10 bytes (the schema's reading reports that)."""
    value = shift = 0
    for index in range(pos, min(pos + 10, len(data))):
        byte = data[index]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, index + 1
        shift += 7
    return -1, pos


def _is_padding(data: bytes, pos: int, pad: int) -> bool:
    chunk = data[pos:pos + pad]
    return len(chunk) == pad and chunk.count(PADDING_BYTE) == pad


def plain_section(data: bytes, start: int):
    """The section whose header is at `start` as (id, aligned, length, alignment, payload, end),
    read without construct; None when anything is unusual (short data, a padding byte other than
    0xCB, an alignment not a power of two), for `Section` to report or read leniently. `alignment`
    is None when the section is not aligned, `end` the position after it."""
    id_byte = data[start]
    section_id, aligned = id_byte & 0x7F, bool(id_byte & 0x80)
    pos = start + 1
    length = alignment = None
    if section_id != SectionId.END:
        length, pos = _uleb(data, pos)
        if length < 0:
            return None
    if aligned:
        alignment, pos = _uleb(data, pos)
        if alignment <= 0 or alignment & (alignment - 1):
            return None
        pad = -pos % alignment
        if not _is_padding(data, pos, pad):
            return None
        pos += pad
    payload = None
    if section_id != SectionId.END:
        if pos + length > len(data):
            return None
        payload = data[pos:pos + length]
        pos += length
    return section_id, aligned, length, alignment, payload, pos


def plain_table(payload: bytes, offset_width: int, alignment: int):
    """An offset table's (count, offsets bytes, data bytes), read as `OffsetTable` reads it but
    without construct; None when it is not well formed (the schema reports it)."""
    count, pos = _uleb(payload, 0)
    if count < 0:
        return None
    pad = -pos % alignment
    if not _is_padding(payload, pos, pad):
        return None
    pos += pad
    stop = pos + count * offset_width
    if stop > len(payload):
        return None
    return count, payload[pos:stop], payload[stop:]


def first_misplaced_entry(offsets: list[int], size: int) -> tuple[int, str] | None:
    """(index, message) of the first entry that does not run from offsets[i] to offsets[i+1] (the
    last one to `size`) inside the data, or None when every entry does."""
    previous = 0
    for index, start in enumerate(offsets):
        stop = offsets[index + 1] if index + 1 < len(offsets) else size
        if not (previous <= start <= stop <= size):
            return index, f"entry {index} has offset {start}, outside 0..{size} or out of order"
        previous = start
    return None


def split_blobs(offsets: list[int], data: bytes, *, what: str, base: int,
                file: str | None) -> list[bytes]:
    """Blob i runs from offsets[i] to offsets[i+1] (the last one to the end of the data)."""
    bad = first_misplaced_entry(offsets, len(data))
    if bad is not None:
        raise DecodeError(f"{what} {bad[1]}", file=file, offset=base)
    return [data[start:stop] for start, stop in zip(offsets, offsets[1:] + [len(data)])]


# How a lenient reader slices a table whose offsets are out of order, as tileirdisasm does
# (measured with crafted files, format_spec.md §16): strings clamp (an entry whose next offset is
# smaller than its own, or past the data, runs to the end of the data; one that starts past the end
# is empty); type and debug-attribute entries are read only when used, and one used whose slice is
# not inside the data fails then. (Constants are checked up front by NVIDIA too: strict only.)
EXACT, CLAMPED, CHECKED_ON_USE = "exact", "clamped", "checked on use"


class BlobTable:
    """Entries of an offset-indexed table, sliced on first use: table[i] -> (file offset, bytes).

    The offsets are validated up front exactly as `split_blobs` does (it reports the first bad
    entry), but with one pass in C instead of a Python loop per entry. With `slicing` other than
    EXACT, offsets out of order are not an error: `on_disorder(message, offset)` is told once, and
    entries are sliced as that mode says.
    """

    __slots__ = ("offsets", "data", "base", "what", "file", "slicing", "budget", "max_overlap")

    def __init__(self, offsets: list[int], data: bytes, *, what: str, base: int,
                 file: str | None, slicing: str = EXACT, on_disorder=None,
                 max_overlap: int = 1 << 26):
        self.offsets = offsets
        self.data = data
        self.base = base
        self.what = what
        self.file = file
        self.slicing = EXACT
        # Entries of a disordered table may overlap: without a bound, a file of n bytes could make
        # the reader copy (and keep, decoded) n entries of n bytes each.
        self.max_overlap = max_overlap
        self.budget = len(data) + max_overlap
        in_order = all(map(operator.le, offsets, offsets[1:]))
        if not in_order or (offsets and offsets[-1] > len(data)):
            if slicing is EXACT:
                split_blobs(offsets, data, what=what, base=base, file=file)  # raises, naming it
            _, message = first_misplaced_entry(offsets, len(data))
            on_disorder(f"{what} {message}", base)
            self.slicing = slicing

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, index: int) -> tuple[int, bytes]:
        offsets = self.offsets
        start = offsets[index]
        size = len(self.data)
        stop = offsets[index + 1] if index + 1 < len(offsets) else size
        if self.slicing is not EXACT:
            if self.slicing is CLAMPED:
                if stop < start:
                    stop = size
            elif not start <= stop <= size:
                raise DecodeError(f"{self.what} entry {index} has offset {start}, outside "
                                  f"0..{size} or out of order", file=self.file, offset=self.base)
            self.budget -= max(0, min(stop, size) - start)
            if self.budget < 0:
                raise DecodeError(f"limit exceeded: the entries read from the {self.what}, whose "
                                  f"offsets are out of order, overlap by more than "
                                  f"max_overlap_bytes={self.max_overlap}", file=self.file,
                                  offset=self.base)
        return self.base + start, self.data[start:stop]


def entry_hint(data: bytes) -> tuple[int, str | None] | None:
    """(number of entry functions, the name of the only one or None) read from the framing and the
    string table alone, or None when anything is unusual or out of range. Not a validation: a
    cubin-cache lookup by the runtime's `tilebc compile` uses it to skip the decoder (the cache key
    hashes the bytes, so a hit is bytes that decoded and verified before); a miss decodes fully."""
    if len(data) < 12 or data[:8] != MAGIC:
        return None
    sections, start = {}, 12
    while True:
        found = plain_section(data, start) if start < len(data) else None
        if found is None:
            return None
        section_id, payload, start = found[0], found[4], found[5]
        if section_id == SectionId.END:
            break
        sections[section_id] = payload  # a duplicate: the last one counts, as for the reader
    strings, functions = sections.get(SectionId.STRING), sections.get(SectionId.FUNC)
    if strings is None or functions is None:
        return None
    count, pos = _uleb(functions, 0)
    if count != 1:
        return None if count < 0 else (count, None)
    index, _ = _uleb(functions, pos)
    table = plain_table(strings, 4, 4)
    if index < 0 or table is None or index >= table[0]:
        return None
    offsets = [int.from_bytes(table[1][i:i + 4], "little") for i in (4 * index, 4 * index + 4)]
    stop = offsets[1] if index + 1 < table[0] else len(table[2])
    if not offsets[0] <= stop <= len(table[2]):
        return None
    return 1, table[2][offsets[0]:stop].decode("utf-8", "surrogateescape")
