"""Element types and the outside world: the data-layout table, DLPack, numpy/ml_dtypes, torch, and the
dtype names of cuTile, TIRx, hidet, numpy and torch.

`DATA_LAYOUT` is the semantics seed's data-layout table (section 6.3.1) completed from DLPack 1.1: one
row per Tile IR element type, with the DLPack (code, bits, lanes) that describes one element in an
allocation, the numpy/ml_dtypes dtype that holds it, and the torch dtype name. `FOREIGN_KINDS` lists the
DLPack kinds that have no Tile IR element type (fp6, other fp8 flavours, complex, handles).

Storage (what `tilebc.numeric.numerics` and `tilebc.numeric.convert` expect in numpy arrays):
  * i1 is numpy bool_ (one byte per element, DLPack kDLBool/8 bits);
  * i4 is ml_dtypes.int4 (one byte per element in numpy; DLPack packs two per byte);
  * i8..i64 are the signed numpy integers: integers are signless, an unsigned reading is a view;
  * tf32 is a float32 whose low 13 mantissa bits are zero (4 bytes, 4-byte aligned);
  * f8E4M3FN, f8E5M2, f8E8M0FNU, f4E2M1FN, bf16 are the ml_dtypes types of the same name;
  * fnv8E5M3FNU has no numpy type: its raw bit patterns are held in uint8.

`resolve(name)` turns any supported dtype name (string, numpy dtype, cuTile DType) into a `Resolved`
Tile IR type: an element type, a pointer (hidet `~f32`) or a 1-d tile for vector dtypes (`float32x4` is
`tile<4xf32>`). Names that Tile IR cannot represent (complex, void, nested or untyped pointers, fp6, …)
raise `DtypeError` saying why.
"""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Dict, Optional, Tuple, Union

import ml_dtypes
import numpy as np

from ..errors import TilebcError
from ..ir.types import ELEMENT_TYPES, ElementType, PointerType, TileType, Type


class DtypeError(TilebcError):
    """A dtype name or DLPack kind that has no Tile IR type, or an unsupported interop combination."""


class DLDataTypeCode(enum.IntEnum):
    """DLPack 1.1 `DLDataTypeCode` values."""

    kDLInt = 0
    kDLUInt = 1
    kDLFloat = 2
    kDLOpaqueHandle = 3
    kDLBfloat = 4
    kDLComplex = 5
    kDLBool = 6
    kDLFloat8_e3m4 = 7
    kDLFloat8_e4m3 = 8
    kDLFloat8_e4m3b11fnuz = 9
    kDLFloat8_e4m3fn = 10
    kDLFloat8_e4m3fnuz = 11
    kDLFloat8_e5m2 = 12
    kDLFloat8_e5m2fnuz = 13
    kDLFloat8_e8m0fnu = 14
    kDLFloat6_e2m3fn = 15
    kDLFloat6_e3m2fn = 16
    kDLFloat4_e2m1fn = 17


@dataclass(frozen=True)
class Layout:
    """One row of the data-layout table."""

    element: ElementType
    dl_code: Optional[DLDataTypeCode]  # None: DLPack has no kind for it
    dl_bits: int
    dl_lanes: int
    numpy: np.dtype
    torch: Optional[str]  # torch dtype name, None where torch has none
    raw_storage: bool = False  # numpy holds raw bit patterns, not values

    @property
    def storage_bytes(self) -> int:
        """Bytes per element in a numpy array (sub-byte types take a byte each there)."""
        return self.numpy.itemsize


_D = DLDataTypeCode
# Tile IR type, DLPack code, bits, lanes, numpy dtype, torch name. i1 is a byte (kDLBool, 8 bits); tf32
# is held in 4 bytes, which DLPack and torch can only call float32.
DATA_LAYOUT: Tuple[Layout, ...] = tuple(
    Layout(ELEMENT_TYPES[name], code, bits, lanes, np.dtype(dtype), torch, raw)
    for name, code, bits, lanes, dtype, torch, raw in (
        ("i1", _D.kDLBool, 8, 1, np.bool_, "torch.bool", False),
        ("i4", _D.kDLInt, 4, 1, ml_dtypes.int4, None, False),
        ("i8", _D.kDLInt, 8, 1, np.int8, "torch.int8", False),
        ("i16", _D.kDLInt, 16, 1, np.int16, "torch.int16", False),
        ("i32", _D.kDLInt, 32, 1, np.int32, "torch.int32", False),
        ("i64", _D.kDLInt, 64, 1, np.int64, "torch.int64", False),
        ("f16", _D.kDLFloat, 16, 1, np.float16, "torch.float16", False),
        ("f32", _D.kDLFloat, 32, 1, np.float32, "torch.float32", False),
        ("tf32", _D.kDLFloat, 32, 1, np.float32, "torch.float32", False),
        ("f64", _D.kDLFloat, 64, 1, np.float64, "torch.float64", False),
        ("bf16", _D.kDLBfloat, 16, 1, ml_dtypes.bfloat16, "torch.bfloat16", False),
        ("f8E4M3FN", _D.kDLFloat8_e4m3fn, 8, 1, ml_dtypes.float8_e4m3fn, "torch.float8_e4m3fn", False),
        ("f8E5M2", _D.kDLFloat8_e5m2, 8, 1, ml_dtypes.float8_e5m2, "torch.float8_e5m2", False),
        ("f8E8M0FNU", _D.kDLFloat8_e8m0fnu, 8, 1, ml_dtypes.float8_e8m0fnu, "torch.float8_e8m0fnu",
         False),
        ("f4E2M1FN", _D.kDLFloat4_e2m1fn, 4, 1, ml_dtypes.float4_e2m1fn, None, False),
        ("fnv8E5M3FNU", None, 8, 1, np.uint8, None, True),
    ))

LAYOUT: Dict[str, Layout] = {row.element.name: row for row in DATA_LAYOUT}

# DLPack kinds with no Tile IR element type, and why.
FOREIGN_KINDS: Dict[DLDataTypeCode, str] = {
    _D.kDLOpaqueHandle: "an opaque handle has no pointee type; Tile IR pointers are ptr<E>",
    _D.kDLComplex: "Tile IR has no complex element types",
    _D.kDLFloat8_e3m4: "fp8 e3m4 is not a Tile IR element type",
    _D.kDLFloat8_e4m3: "fp8 e4m3 with infinities is not a Tile IR element type (f8E4M3FN is)",
    _D.kDLFloat8_e4m3b11fnuz: "fp8 e4m3b11fnuz is not a Tile IR element type",
    _D.kDLFloat8_e4m3fnuz: "fp8 e4m3fnuz is not a Tile IR element type (f8E4M3FN is)",
    _D.kDLFloat8_e5m2fnuz: "fp8 e5m2fnuz is not a Tile IR element type (f8E5M2 is)",
    _D.kDLFloat6_e2m3fn: "fp6 e2m3 is not a Tile IR element type",
    _D.kDLFloat6_e3m2fn: "fp6 e3m2 is not a Tile IR element type",
}


def layout(element: Union[ElementType, str]) -> Layout:
    """The data-layout row of an element type."""
    name = element if isinstance(element, str) else element.name
    row = LAYOUT.get(name)
    if row is None:
        raise DtypeError(f"unknown element type {name!r}")
    return row


def numpy_dtype(element: Union[ElementType, str]) -> np.dtype:
    """The numpy dtype that holds an element type (see the module docstring for storage rules)."""
    return layout(element).numpy


def dlpack_type(element: Union[ElementType, str], *, signed: bool = True) -> Tuple[int, int, int]:
    """(code, bits, lanes) of one element in DLPack; `signed=False` reads an integer as kDLUInt."""
    row = layout(element)
    if row.dl_code is None:
        raise DtypeError(f"{row.element.name} has no DLPack data type")
    code = row.dl_code
    if code is _D.kDLInt and not signed:
        code = _D.kDLUInt
    return int(code), row.dl_bits, row.dl_lanes


# ---------------------------------------------------------------------------------------------------
# Resolution


@dataclass(frozen=True)
class Resolved:
    """What a dtype name means in Tile IR.

    `type` is an ElementType, a PointerType (`~f32`) or a 1-d TileType (vector dtypes). `signed` is the
    integer reading the name implies (False for uint8, True for int8, None for floats and bool), which
    callers pass as the signedness flag of ops such as exti, itof, divi and cmpi.
    """

    type: Type
    signed: Optional[bool] = None

    @property
    def element(self) -> ElementType:
        base = self.type.element if isinstance(self.type, TileType) else self.type
        if isinstance(base, PointerType):
            raise DtypeError(f"{self.type} is a pointer, not an element type")
        return base


def _scalar_names() -> Dict[str, Tuple[str, Optional[bool]]]:
    """Every spelling of a scalar dtype: name -> (Tile IR element name, signedness)."""
    names: Dict[str, Tuple[str, Optional[bool]]] = {}

    def add(element: str, signed: Optional[bool], *spellings: str) -> None:
        for spelling in spellings:
            names[spelling] = (element, signed)

    # Tile IR's own names.
    for name in ELEMENT_TYPES:
        add(name, True if ELEMENT_TYPES[name].is_integer and name != "i1" else None, name)
    # cuTile / numpy / TIRx / torch long names, then hidet short names.
    add("i1", None, "bool_", "bool", "b1")
    for bits in (8, 16, 32, 64):
        add(f"i{bits}", True, f"int{bits}", f"i{bits}", f"s{bits}")
        add(f"i{bits}", False, f"uint{bits}", f"u{bits}")
    add("i4", True, "int4")
    add("i4", False, "uint4", "u4")
    add("f16", None, "float16", "half", "f16")
    add("f32", None, "float32", "float", "f32")
    add("f64", None, "float64", "double", "f64")
    add("bf16", None, "bfloat16", "bf16", "bf")
    add("tf32", None, "tfloat32", "tf32", "tensorfloat32")
    add("f8E4M3FN", None, "float8_e4m3fn", "f8e4m3fn", "f8e4m3", "e4m3")
    add("f8E5M2", None, "float8_e5m2", "f8e5m2", "e5m2")
    add("f8E8M0FNU", None, "float8_e8m0fnu", "f8e8m0fnu", "f8e8m0", "e8m0")
    add("f4E2M1FN", None, "float4_e2m1fn", "f4e2m1fn", "f4e2m1", "e2m1")
    add("fnv8E5M3FNU", None, "float8_e5m3fnu", "f8e5m3fnu", "e5m3")
    return names


SCALAR_NAMES = _scalar_names()

# Names every system uses for things Tile IR cannot hold, and why.
UNREPRESENTABLE: Dict[str, str] = {
    **{name: "Tile IR has no complex element types"
       for name in ("complex64", "complex128", "c64", "c128", "complex", "cfloat", "cdouble",
                    "complex32", "chalf")},
    "void": "void is not a value type",
    "handle": "an untyped pointer (handle) has no pointee; Tile IR pointers are ptr<E>, e.g. '~f32'",
    "float8_e4m3": "fp8 e4m3 with infinities is not a Tile IR element type (float8_e4m3fn is)",
    "float8_e4m3fnuz": "fp8 e4m3fnuz is not a Tile IR element type (float8_e4m3fn is)",
    "float8_e4m3b11fnuz": "fp8 e4m3b11fnuz is not a Tile IR element type",
    "float8_e5m2fnuz": "fp8 e5m2fnuz is not a Tile IR element type (float8_e5m2 is)",
    "float8_e3m4": "fp8 e3m4 is not a Tile IR element type",
    "float6_e2m3fn": "fp6 e2m3 is not a Tile IR element type",
    "float6_e3m2fn": "fp6 e3m2 is not a Tile IR element type",
    "int2": "2-bit integers are not a Tile IR element type",
    "uint2": "2-bit integers are not a Tile IR element type",
    "uint1": "use bool / i1 for 1-bit values",
    "int1": "use bool / i1 for 1-bit values",
    "str": "strings are not a Tile IR element type",
    "object": "Python objects are not a Tile IR element type",
}

_PREFIXES = ("cuda.tile.", "ct.", "torch.", "numpy.", "np.", "ml_dtypes.", "hidet.", "T.", "tvm.")
_VECTOR = re.compile(r"(?P<base>[A-Za-z_][A-Za-z0-9_]*?)x(?P<lanes>\d+)")


def _strip(name: str) -> str:
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def _scalar(name: str) -> Optional[Resolved]:
    entry = SCALAR_NAMES.get(name) or SCALAR_NAMES.get(name.lower())
    if entry is None:
        return None
    element, signed = entry
    return Resolved(ELEMENT_TYPES[element], signed)


def _not_representable(name: str, original) -> DtypeError:
    reason = UNREPRESENTABLE.get(name) or UNREPRESENTABLE.get(name.lower())
    if reason:
        return DtypeError(f"dtype {original!r} is not representable in Tile IR: {reason}")
    return DtypeError(f"unknown dtype {original!r}; expected a cuTile, TIRx, hidet, numpy/ml_dtypes "
                      f"or torch dtype name such as 'float32', 'f16', 'int8x4' or '~f32'")


def resolve(dtype) -> Resolved:
    """Resolve a dtype name (or numpy dtype / cuTile DType / ElementType) to its Tile IR type."""
    if isinstance(dtype, Resolved):
        return dtype
    if isinstance(dtype, ElementType):
        return Resolved(dtype, True if dtype.is_integer and dtype.name != "i1" else None)
    if isinstance(dtype, (np.dtype, type)) and not isinstance(dtype, str):
        try:
            dtype = np.dtype(dtype).name
        except TypeError:
            dtype = getattr(dtype, "__name__", str(dtype))
    text = str(dtype).strip()
    return _resolve_text(text, dtype)


def _resolve_text(text: str, original) -> Resolved:
    # hidet pointers: ~T, ~(~T) (parentheses allowed around any operand).
    while text.startswith("(") and text.endswith(")"):
        text = text[1:-1].strip()
    if text.startswith("~"):
        inner = text[1:].strip()
        while inner.startswith("(") and inner.endswith(")"):
            inner = inner[1:-1].strip()
        if inner.startswith("~"):
            raise DtypeError(f"dtype {original!r} is not representable in Tile IR: nested pointers "
                             f"are not supported (ptr<E> takes an element type)")
        pointee = _resolve_text(inner, original)
        if not isinstance(pointee.type, ElementType):
            raise DtypeError(f"dtype {original!r} is not representable in Tile IR: a pointer's "
                             f"pointee must be an element type, not {pointee.type}")
        return Resolved(PointerType(pointee.type), None)
    name = _strip(text)
    scalar = _scalar(name)
    if scalar is not None:
        return scalar
    if name in UNREPRESENTABLE or name.lower() in UNREPRESENTABLE:
        raise _not_representable(name, original)
    match = _VECTOR.fullmatch(name)
    if match:
        base = _scalar(match.group("base"))
        if base is None:
            raise _not_representable(match.group("base"), original)
        lanes = int(match.group("lanes"))
        if lanes < 1 or lanes & (lanes - 1):
            raise DtypeError(f"dtype {original!r} has {lanes} lanes; a Tile IR tile dimension must "
                             f"be a power of two")
        return Resolved(TileType((lanes,), base.type), base.signed)
    raise _not_representable(name, original)


def element_type(dtype) -> ElementType:
    """Resolve a scalar dtype name to its element type (vectors and pointers are errors)."""
    resolved = resolve(dtype)
    if not isinstance(resolved.type, ElementType):
        raise DtypeError(f"dtype {dtype!r} is {resolved.type}, not a scalar element type")
    return resolved.type


def from_dlpack(code: int, bits: int, lanes: int = 1) -> Resolved:
    """The Tile IR type of a DLPack (code, bits, lanes); lanes > 1 gives a 1-d tile."""
    try:
        kind = DLDataTypeCode(code)
    except ValueError:
        raise DtypeError(f"unknown DLPack type code {code}") from None
    if kind in FOREIGN_KINDS:
        raise DtypeError(f"DLPack type ({kind.name}, {bits}, {lanes}) is not representable in "
                         f"Tile IR: {FOREIGN_KINDS[kind]}")
    wanted = _D.kDLInt if kind is _D.kDLUInt else kind
    matches = [row for row in DATA_LAYOUT
               if row.dl_code is wanted and row.dl_bits == bits and row.element.name != "tf32"]
    if not matches:
        raise DtypeError(f"DLPack type ({kind.name}, {bits}, {lanes}) is not representable in "
                         f"Tile IR: no element type has that kind and width")
    element = matches[0].element
    signed = None
    if element.is_integer and element.name != "i1":
        signed = kind is not _D.kDLUInt
    if lanes == 1:
        return Resolved(element, signed)
    if lanes < 1 or lanes & (lanes - 1):
        raise DtypeError(f"DLPack type with {lanes} lanes: a tile dimension must be a power of two")
    return Resolved(TileType((lanes,), element), signed)


def torch_dtype_name(element: Union[ElementType, str]) -> str:
    """The torch dtype name for an element type, or DtypeError where torch has none."""
    row = layout(element)
    if row.torch is None:
        raise DtypeError(f"{row.element.name} has no torch dtype")
    return row.torch
