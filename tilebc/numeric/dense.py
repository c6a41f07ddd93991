"""Sizes and splat tests of dense constant buffers: what the codec and the printer need to know
about a constant's bytes without reading its values (so they need no numpy; tilebc.numeric.numerics
re-exports these beside the functions that do read values)."""
from __future__ import annotations

from ..ir.types import ElementType, PointerType, TileType


def storage_bytes(element) -> int:
    """Bytes one element takes in a dense constant buffer (bit width rounded up to whole bytes)."""
    if isinstance(element, PointerType):
        return 8
    return (element.bits + 7) // 8


def dense_expected_sizes(tile_type: TileType):
    """(splat size, full size) in bytes of a dense buffer for this tile type."""
    element = tile_type.element
    count = tile_type.num_elements
    if isinstance(element, ElementType) and element.name == "i1":
        return 1, (count + 7) // 8
    width = storage_bytes(element)
    return width, width * count


def dense_is_splat(tile_type: TileType, data: bytes) -> bool:
    splat_size, full_size = dense_expected_sizes(tile_type)
    element = tile_type.element
    if tile_type.num_elements == 1:
        return True
    if isinstance(element, ElementType) and element.name == "i1":
        # MLIR's bool encoding: one byte of 0x00 / 0xFF is a splat, anything else is bit-packed.
        return len(data) == 1 and data[0] in (0x00, 0xFF)
    return len(data) == splat_size and splat_size != full_size


def dense_is_uniform(tile_type: TileType, data: bytes) -> bool:
    """A splat, or a full buffer whose elements are all the same bits: MLIR makes a splat of
    either (DenseElementsAttr detects equal elements), so tileirdisasm prints both as one value."""
    if dense_is_splat(tile_type, data):
        return True
    element = tile_type.element
    count = tile_type.num_elements
    if isinstance(element, ElementType) and element.name == "i1":
        bits = int.from_bytes(data, "little") & ((1 << count) - 1)
        return bits in (0, (1 << count) - 1)
    width = storage_bytes(element)
    return len(data) == width * count and data == data[:width] * count


def dense_size_ok(tile_type: TileType, data: bytes) -> bool:
    splat_size, full_size = dense_expected_sizes(tile_type)
    return len(data) in (splat_size, full_size)
