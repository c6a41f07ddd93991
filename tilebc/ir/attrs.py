"""Self-contained (tagged) attributes, plus the dense-elements payload used by constants and globals."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from .types import ElementType, TileType, Type


class Attribute:
    """Base of tagged attributes."""

    __slots__ = ()


@dataclass(frozen=True)
class IntegerAttr(Attribute):
    type: ElementType
    value: int  # signed interpretation (i1: 0/1)


@dataclass(frozen=True)
class FloatAttr(Attribute):
    type: ElementType
    bits: int  # raw IEEE-like bit pattern; exact for every float type

    @property
    def value(self) -> float:
        from ..numerics import float_from_bits
        return float_from_bits(self.bits, self.type)


@dataclass(frozen=True)
class BoolAttr(Attribute):
    value: bool


@dataclass(frozen=True)
class TypeAttr(Attribute):
    value: Type


@dataclass(frozen=True)
class StringAttr(Attribute):
    value: str


@dataclass(frozen=True)
class ArrayAttr(Attribute):
    elements: Tuple[Attribute, ...]


@dataclass(frozen=True)
class DenseElementsAttr(Attribute):
    """Raw little-endian element buffer; one element means splat; i1 non-splat is bit-packed."""

    type: TileType
    data: bytes

    @property
    def is_splat(self) -> bool:
        from .. import numerics
        return numerics.dense_is_splat(self.type, self.data)


@dataclass(frozen=True)
class DivByAttr(Attribute):
    divisor: int
    every: Optional[int] = None
    along: Optional[int] = None


@dataclass(frozen=True)
class SameElementsAttr(Attribute):
    values: Tuple[int, ...]


@dataclass(frozen=True)
class DictionaryAttr(Attribute):
    entries: Tuple[Tuple[str, Attribute], ...]

    def get(self, key: str, default=None):
        for name, value in self.entries:
            if name == key:
                return value
        return default


@dataclass(frozen=True)
class OptimizationHintsAttr(Attribute):
    """Per-architecture hint dictionaries: (("sm_90", DictionaryAttr(...)), ...)."""

    entries: Tuple[Tuple[str, DictionaryAttr], ...]


@dataclass(frozen=True)
class BoundedAttr(Attribute):
    lower: Optional[int] = None
    upper: Optional[int] = None
