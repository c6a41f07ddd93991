"""What a decoded file holds beyond its module's value: the order of every table, entries nobody
refers to, the order and alignment of its sections. `dump` at the file's own version lays the file
out this way again while the module still fits it, so an unmodified file re-encodes to the same
bytes (the rule is in format_spec.md, "Table order")."""
from __future__ import annotations

import struct

from .container import SectionId

# Tables whose entries the writer interns, with their offset width and alignment.
OFFSET_TABLES = {SectionId.STRING: (4, 4), SectionId.TYPE: (4, 4), SectionId.CONSTANT: (8, 8)}


class LayoutMismatch(Exception):
    """The module no longer fits its file's layout (it was edited): write it in canonical order."""


class FileLayout:
    """Recorded by the reader for a file read without lenient deviations; kept on `Module.layout`.

    The file's bytes are kept, not copies of its tables: the tables are sliced again when the
    module is written (while debug locations are still undecoded the reader holds the bytes anyway).
    """

    __slots__ = ("version", "preview", "data", "sections", "function_slots", "func_tail", "used")

    def __init__(self, version, preview: bool, data: bytes,
                 sections: tuple[tuple[SectionId, int, int, int], ...],
                 function_slots: tuple[int, ...], func_tail: bytes, used: dict[SectionId, bytes]):
        self.version = version
        self.preview = preview
        self.data = data
        # (section id, alignment (0: none), payload offset, payload length) in file order.
        self.sections = sections
        # Each entry's debug-function index (0: the entry has no debug info).
        self.function_slots = function_slots
        # Bytes after the last entry in the function section (NVIDIA's C++ writer pads there).
        self.func_tail = func_tail
        # Per string/type/constant table: byte i is 1 when the module read from the file uses
        # entry i. Entries at 0 were written unused (cuTile's i1, ...) and may stay unused.
        self.used = used

    def payload(self, section_id: SectionId) -> bytes | None:
        for found, _, offset, length in self.sections:
            if found == section_id:
                return self.data[offset:offset + length]
        return None

    def table(self, section_id: SectionId) -> list[bytes]:
        """The entries of a string, type or constant table, in file order."""
        payload = self.payload(section_id)
        if payload is None:
            return []
        width, alignment = OFFSET_TABLES[section_id]
        count, pos = _varint(payload, 0)
        return _blobs(payload, pos + -pos % alignment, count, width)

    def debug(self) -> tuple[list[bytes], set]:
        """(debug attribute entries in file order, the indices the functions' runs hold)."""
        payload = self.payload(SectionId.DEBUG)
        if payload is None:
            return [], set()
        functions, pos = _varint(payload, 0)
        count, pos = _varint(payload, pos + -pos % 4 + 4 * functions)
        pos += -pos % 8
        roots = set(struct.unpack_from(f"<{count}Q", payload, pos))
        attrs, pos = _varint(payload, pos + 8 * count)
        return _blobs(payload, pos + -pos % 4, attrs, 4), roots


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it) of a varint the reader has already checked."""
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _blobs(payload: bytes, start: int, count: int, width: int) -> list[bytes]:
    offsets = list(struct.unpack_from(f"<{count}{'I' if width == 4 else 'Q'}", payload, start))
    data = payload[start + width * count:]
    return [data[a:b] for a, b in zip(offsets, offsets[1:] + [len(data)])]


def used_bitmap(size: int, indices) -> bytes:
    used = bytearray(size)
    for index in indices:
        used[index] = 1
    return bytes(used)
