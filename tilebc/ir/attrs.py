"""Self-contained (tagged) attributes, plus the dense-elements payload used by constants and globals.

Arrays and dictionaries nest and may share elements: hashes are cached and equality compares each
pair of nested values once (tilebc/ir/shared.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from .shared import cached_hash, shared_node
from .types import ElementType, TileType, Type


class Attribute:
    """Base of tagged attributes."""

    __slots__ = ()


@cached_hash
@dataclass(frozen=True)
class IntegerAttr(Attribute):
    type: ElementType
    value: int  # signed interpretation (i1: 0/1)


@cached_hash
@dataclass(frozen=True)
class FloatAttr(Attribute):
    type: ElementType
    bits: int  # raw IEEE-like bit pattern; exact for every float type

    @property
    def value(self) -> float:
        from ..numeric.numerics import float_from_bits
        return float_from_bits(self.bits, self.type)


@cached_hash
@dataclass(frozen=True)
class BoolAttr(Attribute):
    value: bool


@cached_hash
@dataclass(frozen=True)
class TypeAttr(Attribute):
    value: Type


@cached_hash
@dataclass(frozen=True)
class StringAttr(Attribute):
    value: str


@shared_node
@dataclass(frozen=True)
class ArrayAttr(Attribute):
    elements: Tuple[Attribute, ...]


@cached_hash
@dataclass(frozen=True)
class DenseElementsAttr(Attribute):
    """Raw little-endian element buffer; one element means splat; i1 non-splat is bit-packed."""

    type: TileType
    data: bytes

    @property
    def is_splat(self) -> bool:
        from ..numeric import numerics
        return numerics.dense_is_splat(self.type, self.data)


@cached_hash
@dataclass(frozen=True)
class DivByAttr(Attribute):
    divisor: int
    every: Optional[int] = None
    along: Optional[int] = None


@cached_hash
@dataclass(frozen=True)
class SameElementsAttr(Attribute):
    values: Tuple[int, ...]


@shared_node
@dataclass(frozen=True)
class DictionaryAttr(Attribute):
    entries: Tuple[Tuple[str, Attribute], ...]

    def get(self, key: str, default=None):
        for name, value in self.entries:
            if name == key:
                return value
        return default


@shared_node
@dataclass(frozen=True)
class OptimizationHintsAttr(Attribute):
    """Per-architecture hint dictionaries: (("sm_90", DictionaryAttr(...)), ...)."""

    entries: Tuple[Tuple[str, DictionaryAttr], ...]


@cached_hash
@dataclass(frozen=True)
class BoundedAttr(Attribute):
    lower: Optional[int] = None
    upper: Optional[int] = None
