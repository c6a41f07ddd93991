"""Decode warnings: deviations from the format that NVIDIA's reader accepts, and so do we.

By default (`strict=False`) the reader reads such bytes with the meaning tileirdisasm gives them
(format_spec.md §16 lists each class and why it is harmless) and records one DecodeWarning per
deviation on `Module.decode_warnings`, so nothing is accepted silently. `strict=True` turns every
one of them back into the DecodeError it names: a lint for producers.
"""
from __future__ import annotations


from ..errors import Location
from ..record import Record


class DecodeWarning(Record):
    """A deviation the reader accepted: the strict reader's message, what was done, and where."""

    _fields = ("message", "offset", "action", "file", "category")

    # message: exactly the DecodeError message `strict=True` raises; offset: absolute byte offset
    # in the file; action: how the bytes were read instead (tileirdisasm's reading).
    def __init__(self, message: str, offset: int, action: str, file: str | None = None,
                 category: str = "lenient"):
        _set = object.__setattr__
        _set(self, "message", message)
        _set(self, "offset", offset)
        _set(self, "action", action)
        _set(self, "file", file)
        _set(self, "category", category)

    @property
    def location(self) -> Location:
        return Location(self.file, self.offset)

    def __str__(self) -> str:
        return f"{self.location}: warning: {self.message}; {self.action}"


class WarningLog:
    """The warnings of one decode, each (message, offset) once: the fast decoder may read a body
    and hand it back to the careful one, which then meets the same deviations again."""

    __slots__ = ("warnings", "_seen", "file")

    def __init__(self, file: str | None):
        self.warnings: list[DecodeWarning] = []
        self._seen: set[tuple[str, int]] = set()
        self.file = file

    def add(self, message: str, offset: int, action: str) -> None:
        key = (message, offset)
        if key not in self._seen:
            self._seen.add(key)
            self.warnings.append(DecodeWarning(message, offset, action, self.file))
