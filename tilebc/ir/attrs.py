"""Self-contained (tagged) attributes, plus the dense-elements payload used by constants and globals.

Arrays and dictionaries nest and may share elements: hashes are cached and equality compares each
pair of nested values once (tilebc/ir/shared.py)."""
from __future__ import annotations


from ..record import Record
from .shared import cached_hash, shared_node
from .types import ElementType, TileType, Type


class Attribute:
    """Base of tagged attributes (each a frozen record, tilebc/record.py)."""

    __slots__ = ()


@cached_hash
class IntegerAttr(Attribute, Record):
    _fields = ("type", "value")

    # value: signed interpretation (i1: 0/1)
    def __init__(self, type: ElementType, value: int):
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "value", value)


@cached_hash
class FloatAttr(Attribute, Record):
    _fields = ("type", "bits")

    # bits: raw IEEE-like bit pattern; exact for every float type
    def __init__(self, type: ElementType, bits: int):
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "bits", bits)

    @property
    def value(self) -> float:
        from ..numeric.numerics import float_from_bits
        return float_from_bits(self.bits, self.type)


@cached_hash
class BoolAttr(Attribute, Record):
    _fields = ("value",)

    def __init__(self, value: bool):
        object.__setattr__(self, "value", value)


@cached_hash
class TypeAttr(Attribute, Record):
    _fields = ("value",)

    def __init__(self, value: Type):
        object.__setattr__(self, "value", value)


@cached_hash
class StringAttr(Attribute, Record):
    _fields = ("value",)

    def __init__(self, value: str):
        object.__setattr__(self, "value", value)


@shared_node
class ArrayAttr(Attribute, Record):
    _fields = ("elements",)

    def __init__(self, elements: tuple[Attribute, ...]):
        object.__setattr__(self, "elements", elements)


@cached_hash
class DenseElementsAttr(Attribute, Record):
    """Raw little-endian element buffer; one element means splat; i1 non-splat is bit-packed."""

    _fields = ("type", "data")

    def __init__(self, type: TileType, data: bytes):
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "data", data)

    @property
    def is_splat(self) -> bool:
        from ..numeric.dense import dense_is_splat  # numerics would import numpy
        return dense_is_splat(self.type, self.data)


@cached_hash
class DivByAttr(Attribute, Record):
    _fields = ("divisor", "every", "along")

    def __init__(self, divisor: int, every: int | None = None, along: int | None = None):
        object.__setattr__(self, "divisor", divisor)
        object.__setattr__(self, "every", every)
        object.__setattr__(self, "along", along)


@cached_hash
class SameElementsAttr(Attribute, Record):
    _fields = ("values",)

    def __init__(self, values: tuple[int, ...]):
        object.__setattr__(self, "values", values)


@shared_node
class DictionaryAttr(Attribute, Record):
    _fields = ("entries",)

    def __init__(self, entries: tuple[tuple[str, Attribute], ...]):
        object.__setattr__(self, "entries", entries)

    def get(self, key: str, default=None):
        for name, value in self.entries:
            if name == key:
                return value
        return default


@shared_node
class OptimizationHintsAttr(Attribute, Record):
    """Per-architecture hint dictionaries: (("sm_90", DictionaryAttr(...)), ...)."""

    _fields = ("entries",)

    def __init__(self, entries: tuple[tuple[str, DictionaryAttr], ...]):
        object.__setattr__(self, "entries", entries)


@cached_hash
class BoundedAttr(Attribute, Record):
    _fields = ("lower", "upper")

    def __init__(self, lower: int | None = None, upper: int | None = None):
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)
