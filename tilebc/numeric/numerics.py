"""Element storage and bit-level helpers shared by the binary layer, interpreter and runtime."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional

import numpy as np

from ..errors import TilebcError
from .dtypes import DATA_LAYOUT
from .dense import (dense_expected_sizes, dense_is_splat, dense_is_uniform,  # noqa: F401
                    dense_size_ok, storage_bytes)
from ..ir.types import ELEMENT_TYPES, ElementType

# numpy dtypes that hold each element type (tf32 in float32; fnv8E5M3FNU as raw uint8 bit patterns).
NUMPY_DTYPES = {row.element.name: row.numpy for row in DATA_LAYOUT}
_UINT_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _name(element) -> str:
    return element if isinstance(element, str) else element.name


def storage_dtype(element) -> np.dtype:
    """The numpy dtype arrays of this element type use (see tilebc.numeric.dtypes for the rules)."""
    try:
        return NUMPY_DTYPES[_name(element)]
    except KeyError:
        raise TilebcError(f"no numpy storage for element type {_name(element)!r}") from None


def check_storage(array, element, what: str = "array") -> np.ndarray:
    """`array` as a numpy array, or a TilebcError if its dtype is not the element type's storage."""
    array = np.asarray(array)
    if array.dtype is NUMPY_DTYPES.get(element if isinstance(element, str) else element.name):
        return array  # the common case, without the checks' lookups (called per op)
    expected = storage_dtype(element)
    if array.dtype != expected:
        raise TilebcError(f"{what} of {_name(element)} must have numpy dtype {expected}, "
                          f"got {array.dtype}")
    return array


def to_bits(array, element) -> np.ndarray:
    """The element bit patterns (uint64, low `bits` bits) of an array in storage form."""
    name = _name(element)
    array = np.asarray(array)
    if array.dtype is not NUMPY_DTYPES.get(name):
        array = check_storage(array, element)
    if name == "i1":
        return array.astype(np.uint64)
    raw = array.view(_UINT_OF_SIZE[array.dtype.itemsize]).astype(np.uint64)
    if name == "tf32":
        return raw >> np.uint64(13)
    return raw


def from_bits(bits, element) -> np.ndarray:
    """Storage array of bit patterns (the inverse of `to_bits`; high bits beyond the width are dropped)."""
    name = _name(element)
    dtype = storage_dtype(element)
    bits = np.asarray(bits, dtype=np.uint64)
    if name == "i1":
        return (bits & np.uint64(1)).astype(np.bool_)
    if name == "tf32":
        return ((bits & np.uint64(0x7FFFF)) << np.uint64(13)).astype(np.uint32).view(np.float32)
    width = ELEMENT_TYPES[name].bits
    mask = np.uint64((1 << width) - 1) if width < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    return (bits & mask).astype(_UINT_OF_SIZE[dtype.itemsize]).view(dtype)


def float_from_bits(bits: int, element: ElementType) -> float:
    """The value of a float attribute's bit pattern (tf32: the 19-bit pattern)."""
    fmt = float_format(element)
    mask = (1 << fmt.bits) - 1
    return float(decode_bits(np.array([bits & mask], dtype=np.uint64), fmt)[0])


# ---------------------------------------------------------------------------------------------------
from .formats import FLOAT_FORMATS, FloatFormat, float_format  # noqa: F401,E402


def decode_bits(bits: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """float64 values of bit patterns (exact for every format but f64, whose patterns are viewed)."""
    bits = np.asarray(bits, dtype=np.uint64)
    if fmt.name == "f64":
        return bits.view(np.float64).copy()
    man = (bits & np.uint64((1 << fmt.man_bits) - 1)).astype(np.float64)
    exp = ((bits >> np.uint64(fmt.man_bits)) & np.uint64((1 << fmt.exp_bits) - 1)).astype(np.int64)
    negative = (bits & np.uint64(fmt.sign_bit)) != 0 if fmt.signed else np.zeros(bits.shape, bool)
    scale = float(1 << fmt.man_bits)
    if fmt.subnormals:
        normal = np.ldexp(1.0 + man / scale, exp - fmt.bias)
        value = np.where(exp == 0, np.ldexp(man / scale, fmt.emin), normal)
    else:
        value = np.ldexp(1.0 + man / scale, exp - fmt.bias)
    top = (1 << fmt.exp_bits) - 1
    if fmt.nan == "ieee":
        value = np.where(exp == top, np.where(man == 0, np.inf, np.nan), value)
    elif fmt.nan == "all_ones":
        value = np.where((exp == top) & (man == (1 << fmt.man_bits) - 1), np.nan, value)
    return np.where(negative, -value, value)


def encode_exact(values: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """Bit patterns (uint64) of float64 values that the format represents exactly (or ±Inf)."""
    values = np.asarray(values, dtype=np.float64)
    if fmt.name == "f64":
        return values.view(np.uint64).copy()
    magnitude = np.abs(values)
    _, exp2 = np.frexp(magnitude)
    exponent = exp2.astype(np.int64) - 1
    normal = magnitude >= np.ldexp(1.0, fmt.emin)
    field = np.where(normal, exponent + fmt.bias, 0)
    man = np.where(normal, np.ldexp(magnitude, fmt.man_bits - np.where(normal, exponent, 0))
                   - float(1 << fmt.man_bits), np.ldexp(magnitude, fmt.man_bits - fmt.emin))
    field = np.where(magnitude == 0, 0, field)
    man = np.where(magnitude == 0, 0, man)
    inf = np.isinf(magnitude)
    field = np.where(inf, (1 << fmt.exp_bits) - 1, field)
    man = np.where(inf, 0, man)
    bits = (field.astype(np.uint64) << np.uint64(fmt.man_bits)) | np.nan_to_num(man).astype(np.uint64)
    if fmt.signed:
        bits = np.where(np.signbit(values), bits | np.uint64(fmt.sign_bit), bits)
    return bits.astype(np.uint64)
