"""Element storage and bit-level helpers shared by the binary layer, interpreter and runtime."""
from __future__ import annotations

import struct

import ml_dtypes
import numpy as np

from .ir.types import ElementType, PointerType, TileType

# numpy dtypes that hold each element type's values exactly (tf32 is held in float32).
NUMPY_DTYPES = {
    "i1": np.dtype(np.bool_), "i4": np.dtype(ml_dtypes.int4), "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16), "i32": np.dtype(np.int32), "i64": np.dtype(np.int64),
    "f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16), "f32": np.dtype(np.float32),
    "tf32": np.dtype(np.float32), "f64": np.dtype(np.float64),
    "f8E4M3FN": np.dtype(ml_dtypes.float8_e4m3fn), "f8E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "f8E8M0FNU": np.dtype(ml_dtypes.float8_e8m0fnu), "f4E2M1FN": np.dtype(ml_dtypes.float4_e2m1fn),
}


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


def dense_size_ok(tile_type: TileType, data: bytes) -> bool:
    splat_size, full_size = dense_expected_sizes(tile_type)
    return len(data) in (splat_size, full_size)


def float_from_bits(bits: int, element: ElementType) -> float:
    """The value of a float attribute's bit pattern."""
    name = element.name
    if name == "f32":
        return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]
    if name == "f64":
        return struct.unpack("<d", struct.pack("<Q", bits & 0xFFFFFFFFFFFFFFFF))[0]
    if name == "tf32":  # 19-bit pattern: sign, 8 exponent, 10 mantissa = top of an f32
        return struct.unpack("<f", struct.pack("<I", (bits & 0x7FFFF) << 13))[0]
    dtype = NUMPY_DTYPES[name]
    raw = np.array([bits], dtype=np.uint64).astype({1: np.uint8, 2: np.uint16}[dtype.itemsize])
    return float(raw.view(dtype)[0])


def float_to_bits(value: float, element: ElementType) -> int:
    """The bit pattern of `value` rounded to the element type (nearest-even)."""
    name = element.name
    if name == "f32":
        return struct.unpack("<I", struct.pack("<f", value))[0]
    if name == "f64":
        return struct.unpack("<Q", struct.pack("<d", value))[0]
    if name == "tf32":
        bits32 = struct.unpack("<I", struct.pack("<f", value))[0]
        rounded = bits32 + 0xFFF + ((bits32 >> 13) & 1)  # round to nearest even at bit 13
        if (bits32 & 0x7F800000) == 0x7F800000:
            rounded = bits32  # keep inf / nan as they are
        return (rounded >> 13) & 0x7FFFF
    dtype = NUMPY_DTYPES[name]
    array = np.array([value], dtype=np.float64).astype(dtype)
    return int(array.view({1: np.uint8, 2: np.uint16}[dtype.itemsize])[0])
