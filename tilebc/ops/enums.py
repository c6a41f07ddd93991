"""Enumerations of the format. Values are frozen wire values; each value records the version it appeared in."""
from __future__ import annotations

import enum
import functools

from ..version import V13_1, V13_4, V13_5, Version


class WireEnum(enum.IntEnum):
    """An enum whose members carry their text keyword and the first version that has them."""

    @functools.cached_property  # kept in the member: Enum's `name` costs a descriptor call
    def keyword(self) -> str:
        return self.name.lower()

    @functools.cached_property  # the table is fixed; the decoders ask for every member they read
    def since(self) -> Version:
        return _VALUE_SINCE.get((type(self).__name__, int(self)), V13_1)

    @classmethod
    def keywords(cls) -> dict[str, "WireEnum"]:
        """keyword -> member (the first member of a keyword), built on first use: the parser
        looks up every enum keyword it reads. Not to be changed."""
        table = cls.__dict__.get("_by_keyword")
        if table is None:
            table = {}
            for member in cls:
                table.setdefault(member.keyword, member)
            setattr(cls, "_by_keyword", table)
        return table

    @classmethod
    def from_keyword(cls, keyword: str) -> "WireEnum":
        return cls.keywords()[keyword]


class Signedness(WireEnum):
    UNSIGNED = 0
    SIGNED = 1


class IntegerOverflow(WireEnum):
    NONE = 0
    NO_SIGNED_WRAP = 1
    NO_UNSIGNED_WRAP = 2
    NO_WRAP = 3


class RoundingMode(WireEnum):
    NEAREST_EVEN = 0
    ZERO = 1
    NEGATIVE_INF = 2
    POSITIVE_INF = 3
    APPROX = 4
    FULL = 5
    NEAREST_INT_TO_ZERO = 6
    NEAREST_AWAY = 7


class ComparisonPredicate(WireEnum):
    EQUAL = 0
    NOT_EQUAL = 1
    LESS_THAN = 2
    LESS_THAN_OR_EQUAL = 3
    GREATER_THAN = 4
    GREATER_THAN_OR_EQUAL = 5


class ComparisonOrdering(WireEnum):
    UNORDERED = 0
    ORDERED = 1


class AtomicRMWMode(WireEnum):
    AND = 0
    OR = 1
    XOR = 2
    ADD = 3
    ADDF = 4
    MAX = 5
    MIN = 6
    UMAX = 7
    UMIN = 8
    XCHG = 9


class MemoryOrderingSemantics(WireEnum):
    WEAK = 0
    RELAXED = 1
    ACQUIRE = 2
    RELEASE = 3
    ACQ_REL = 4


class MemoryScope(WireEnum):
    TL_BLK = 0
    DEVICE = 1
    SYS = 2


class PaddingValue(WireEnum):
    ZERO = 0
    NEG_ZERO = 1
    NAN = 2
    POS_INF = 3
    NEG_INF = 4


class SymbolVisibility(WireEnum):
    PUBLIC = 0
    PRIVATE = 1


class PtrAttr(WireEnum):
    NONE = 0
    UNICAST = 1
    MULTICAST = 2


class MultimemReductionKind(WireEnum):
    ADD = 0
    MIN = 1
    MAX = 2
    AND = 3
    OR = 4
    XOR = 5
    UMIN = 6
    UMAX = 7


# Values newer than 13.1 (both NVIDIA's writer and its 13.5 reader check these).
_VALUE_SINCE = {
    ("RoundingMode", 7): V13_4,
    **{("PtrAttr", int(m)): V13_4 for m in PtrAttr},
    **{("MultimemReductionKind", int(m)): V13_5 for m in MultimemReductionKind},
}

ALL_ENUMS = (Signedness, IntegerOverflow, RoundingMode, ComparisonPredicate, ComparisonOrdering,
             AtomicRMWMode, MemoryOrderingSemantics, MemoryScope, PaddingValue, SymbolVisibility,
             PtrAttr, MultimemReductionKind)
