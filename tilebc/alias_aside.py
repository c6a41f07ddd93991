"""`tilebc dis -g` of a large module: the child that verifies it (verify_aside.py) also names its
locations, while the parent prints.

Every location of the `-g` text is a reference to an alias (`loc(#loc12)`), numbered over the
whole module before the first is printed, and the aliases' definitions end the text. Naming them
means decoding every location and walking them all, about a third of the parent's work, and
nothing the printer does needs it. So the parent gives each op its location's debug-table index
instead of decoding it (lazyloc.locations_as_indices) and prints a MARK for each location,
keeping the indices in print order; the child, which decodes every location to verify them,
names them as the printer would (in the order the printer visits them: each entry's own, then
its ops' in pre-order) and sends each index's reference text and the definitions
(`location_texts`). Once the child found the module valid, the parent puts the texts in place of
the marks (`MarkedLocations.pieces`).

Anything unusual gives the usual path's answer: a module whose locations are no longer pending
is printed as usual; a report that is missing or does not fit (another count of marks, an index
it does not name) has the parent print again from a fresh decode.
"""
from __future__ import annotations

import struct
from array import array
from itertools import chain

from . import speedups

MARK = "\x00"  # where a location's text goes; escaped wherever else the text could hold it
_HEADER = struct.Struct("<QQQ")  # indices, bytes of their texts, bytes of the definitions


def _encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def location_texts(module) -> bytes:
    """In the verifying child: each debug-table index the module's locations use (0: none) and
    its reference text, and the aliases' definitions, as MarkedLocations.pieces reads them;
    b"" where the locations were already decoded."""
    from .binary.lazyloc import pending_indices
    from .text.debuginfo import LocationAliases
    walks = [[0] * len(module.globals)]  # a global prints the unknown location
    reader = None
    for function in module.functions:
        found = pending_indices(function)
        if found is None:
            return b""
        reader = found[0] or reader
        walks.append(found[2])
    indices = list(dict.fromkeys(chain.from_iterable(walks)))  # first uses, in print order
    if reader is None:
        locations = [None] * len(indices)
    else:  # decoded as the verifier reads them (the reader keeps one object per index)
        locations = reader.op_locations(indices, 0, len(indices), 0)
    aliases = LocationAliases()
    aliases.visit_distinct(locations)  # one object per index (the reader keeps them)
    aliases.finish()
    texts = "\n".join(aliases.refs(locations))
    definitions = aliases.definitions_text()
    numbers = array("q", indices).tobytes()
    texts_bytes, definitions_bytes = _encoded(texts), _encoded(definitions)
    return (_HEADER.pack(len(indices), len(texts_bytes), len(definitions_bytes)) + numbers
            + texts_bytes + definitions_bytes)


def _read_report(report: bytes | None):
    """({index: reference text}, definitions) from location_texts' bytes, or None."""
    if not report or len(report) < _HEADER.size:
        return None
    count, texts_size, definitions_size = _HEADER.unpack_from(report)
    numbers_end = _HEADER.size + 8 * count
    if numbers_end + texts_size + definitions_size != len(report):
        return None
    indices = array("q")
    indices.frombytes(report[_HEADER.size:numbers_end])
    texts = report[numbers_end:numbers_end + texts_size].decode("utf-8", "surrogateescape")
    texts = texts.split("\n") if count else []
    if len(texts) != count:
        return None
    table = dict(zip(indices, texts))
    if 0 in table:
        table[None] = table[0]  # an op of an entry without debug info has no location
    return table, report[numbers_end + texts_size:].decode("utf-8", "surrogateescape")


class MarkedLocations:
    """The parent's side: the aliases a printer is given (module_text_pieces(aliases=...)) for
    a module whose locations are debug-table indices."""

    def __init__(self):
        self.order: list = []  # the index of each location printed, in print order
        # what the C printer (print_ops) reads instead of a text cache: it does what ref() does
        self._known = (self.order, MARK)

    @classmethod
    def of(cls, module) -> MarkedLocations | None:
        """Those of `module`, its locations made indices; None (nothing changed) where one of its
        entries has no pending locations."""
        from .binary.lazyloc import locations_as_indices, pending_indices
        found = [pending_indices(function) for function in module.functions]
        if None in found:
            return None
        for function, (_, ops, indices) in zip(module.functions, found):
            locations_as_indices(function, ops, indices)
        return cls()

    def ref(self, loc) -> str:
        self.order.append(loc)
        return MARK

    def definitions(self) -> list[str]:
        return []  # the child's

    def definitions_text(self) -> str:
        return ""

    def pieces(self, printed: list[str], report: bytes | None):
        """`printed` with each MARK replaced by its location's text from the child's `report`,
        and the definitions after it, piece by piece; None where the report is missing or does
        not fit (checked before the first piece is made)."""
        read = _read_report(report)
        if read is None:
            return None
        table, definitions = read
        order = self.order
        fill_marks = speedups.fill_marks
        if fill_marks is None and sum(piece.count(MARK) for piece in printed) != len(order):
            return None
        try:
            texts = list(map(table.__getitem__, order))
        except (KeyError, TypeError):
            return None
        if fill_marks is not None:  # in C: one pass, each piece made at once
            filled = fill_marks(printed, texts, MARK)
            return None if filled is None else chain(filled, (definitions,))
        return _substituted(printed, texts, definitions)


def _substituted(printed: list[str], texts: list[str], definitions: str):
    start = 0
    for piece in printed:
        parts = piece.split(MARK)
        marks = len(parts) - 1
        if marks:
            joined = [""] * (2 * marks + 1)
            joined[::2] = parts
            joined[1::2] = texts[start:start + marks]
            start += marks
            piece = "".join(joined)
        yield piece
    yield definitions
