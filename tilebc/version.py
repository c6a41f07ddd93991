"""Bytecode versions: one type, one supported range, one named constant per format change."""
from __future__ import annotations

import re

from .errors import VersionError
from .record import Record


class Version(Record):
    """A bytecode version, ordered as (major, minor) (a frozen record, tilebc/record.py)."""

    _fields = ("major", "minor")

    def __init__(self, major: int, minor: int):
        object.__setattr__(self, "major", major)
        object.__setattr__(self, "minor", minor)
        # the order's key, made once: the readers compare versions for every op, type and enum
        object.__setattr__(self, "_order", (major, minor))

    def __lt__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._order < other._order

    def __le__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._order <= other._order

    def __gt__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._order > other._order

    def __ge__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._order >= other._order

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @classmethod
    def parse(cls, value: VersionLike) -> Version:
        """Accept a Version, a "13.3" string or a (13, 3) tuple."""
        if isinstance(value, Version):
            return value
        if isinstance(value, tuple) and len(value) == 2:
            return cls(int(value[0]), int(value[1]))
        if isinstance(value, str):
            match = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", value)
            if match:
                return cls(int(match.group(1)), int(match.group(2)))
        raise VersionError(f"cannot parse bytecode version {value!r}; expected a string like '13.3'")


VersionLike = Version | str | tuple

V13_1 = Version(13, 1)
V13_2 = Version(13, 2)
V13_3 = Version(13, 3)
V13_4 = Version(13, 4)
V13_5 = Version(13, 5)

MIN_VERSION = V13_1
MAX_VERSION = V13_5
ALL_VERSIONS = (V13_1, V13_2, V13_3, V13_4, V13_5)

# Format-wide changes (per-op and per-type changes live in the op and type tables).
UNIFIED_OPTIONAL_BITFIELD = V13_3  # types with optional params lead with an optFlags varint
GLOBAL_VISIBILITY_AND_CONSTANT = V13_3  # global records gain visibility + constant varints
PRODUCER_SECTION = V13_3
POINTER_ATTR = V13_4  # ptr / tensor_view gain optFlags + optional ptr_attr
ENTRY_ARG_ATTRS = V13_5  # function entries always carry hints and a tagged arg-attrs array
DISUBPROGRAM_FLAGS = V13_5  # DISubprogram gains a trailing flags varint
PREVIEW_TAG = V13_5  # header tag bit 0 marks public-preview bytecode


def check_supported(version: Version, *, what: str = "bytecode version") -> Version:
    if not (MIN_VERSION <= version <= MAX_VERSION):
        raise VersionError(
            f"unsupported {what} {version}; tilebc supports [{MIN_VERSION} - {MAX_VERSION}]")
    return version
