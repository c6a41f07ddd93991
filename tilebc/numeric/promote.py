"""cuTile's arithmetic promotion (cuTile data model, "Arithmetic Promotion").

`promote(a, b)` gives the common dtype of two operands. Operands are cuTile dtype names ("int8",
"float8_e4m3fn", …), or loosely typed constants: Python int/float/bool values or `Loose("int")` /
`Loose("float")`. Rules, in order:

1. both loosely typed: the result is a loosely typed constant of the higher category;
2. a loose constant becomes concrete: floats are float32, integers int32, int64 or uint64 by value;
3. with one (formerly) loose operand, a higher category (boolean < integral < floating-point) wins,
   and in the same category the other operand's dtype wins;
4. two concrete dtypes: `PROMOTION_TABLE`, where None means the pair does not promote implicitly
   (PromotionError); the table also covers mixed categories (bool_ + tfloat32 does not promote).

`to_element(dtype)` maps a cuTile dtype to its Tile IR element type and signedness via tilebc.numeric.dtypes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple, Union

from .dtypes import Resolved, resolve
from ..errors import TilebcError


class PromotionError(TilebcError):
    """Two dtypes with no implicit common dtype."""


# Row and column order of the table; short names as the data-model seed prints them.
DTYPES: Tuple[str, ...] = ("bool_", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32",
                           "int64", "float16", "float32", "float64", "bfloat16", "tfloat32",
                           "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "float4_e2m1fn")
SHORT_NAMES: Dict[str, str] = dict(zip(DTYPES, (
    "b1", "u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64", "f16", "f32", "f64", "bf", "tf32",
    "f8e4m3fn", "f8e5m2", "f8e8m0fnu", "f4e2m1fn")))
_LONG = {short: long for long, short in SHORT_NAMES.items()}

# The seed's table, one row per left operand, columns in DTYPES order ("-" is ERR).
_ROWS = """
b1   : b1  u8  u16 u32 u64 i8  i16 i32 i64 f16 f32 f64 bf  -   -   -   -   -
u8   : u8  u8  u16 u32 u64 -   -   -   -   f16 f32 f64 bf  -   -   -   -   -
u16  : u16 u16 u16 u32 u64 -   -   -   -   f16 f32 f64 bf  -   -   -   -   -
u32  : u32 u32 u32 u32 u64 -   -   -   -   f16 f32 f64 bf  -   -   -   -   -
u64  : u64 u64 u64 u64 u64 -   -   -   -   f16 f32 f64 bf  -   -   -   -   -
i8   : i8  -   -   -   -   i8  i16 i32 i64 f16 f32 f64 bf  -   -   -   -   -
i16  : i16 -   -   -   -   i16 i16 i32 i64 f16 f32 f64 bf  -   -   -   -   -
i32  : i32 -   -   -   -   i32 i32 i32 i64 f16 f32 f64 bf  -   -   -   -   -
i64  : i64 -   -   -   -   i64 i64 i64 i64 f16 f32 f64 bf  -   -   -   -   -
f16  : f16 f16 f16 f16 f16 f16 f16 f16 f16 f16 f32 f64 -   -   -   -   -   -
f32  : f32 f32 f32 f32 f32 f32 f32 f32 f32 f32 f32 f64 f32 -   -   -   -   -
f64  : f64 f64 f64 f64 f64 f64 f64 f64 f64 f64 f64 f64 f64 -   -   -   -   -
bf   : bf  bf  bf  bf  bf  bf  bf  bf  bf  -   f32 f64 bf  -   -   -   -   -
tf32 : -   -   -   -   -   -   -   -   -   -   -   -   -   tf32 -  -   -   -
f8e4m3fn  : - - - - - - - - - - - - - - f8e4m3fn - - -
f8e5m2    : - - - - - - - - - - - - - - - f8e5m2 - -
f8e8m0fnu : - - - - - - - - - - - - - - - - f8e8m0fnu -
f4e2m1fn  : - - - - - - - - - - - - - - - - - f4e2m1fn
"""


def _parse_rows() -> Dict[Tuple[str, str], Optional[str]]:
    table = {}
    for line in _ROWS.strip().splitlines():
        left, cells = line.split(":")
        cells = cells.split()
        if len(cells) != len(DTYPES):
            raise RuntimeError(f"promotion row {left.strip()} has {len(cells)} cells")
        for column, cell in zip(DTYPES, cells):
            table[(_LONG[left.strip()], column)] = None if cell == "-" else _LONG[cell]
    return table


PROMOTION_TABLE: Dict[Tuple[str, str], Optional[str]] = _parse_rows()

_CATEGORY = {"bool_": 0, **{name: 1 for name in DTYPES[1:9]}, **{name: 2 for name in DTYPES[9:]}}


@dataclass(frozen=True)
class Loose:
    """A loosely typed constant: kind "int" or "float", with its value when known."""

    kind: str
    value: Union[int, float, None] = None


def _canonical(dtype) -> str:
    """A cuTile dtype name from any spelling tilebc.numeric.dtypes understands (uint8 stays uint8)."""
    text = str(dtype).strip()
    for prefix in ("cuda.tile.", "ct."):
        if text.startswith(prefix):
            text = text[len(prefix):]
    if text in _CATEGORY:
        return text
    text = _LONG.get(text, text)
    if text in _CATEGORY:
        return text
    resolved = resolve(text)
    element = resolved.element.name
    by_element = {"i1": "bool_", "f16": "float16", "f32": "float32", "f64": "float64",
                  "bf16": "bfloat16", "tf32": "tfloat32", "f8E4M3FN": "float8_e4m3fn",
                  "f8E5M2": "float8_e5m2", "f8E8M0FNU": "float8_e8m0fnu",
                  "f4E2M1FN": "float4_e2m1fn"}
    if element in by_element:
        return by_element[element]
    if element in ("i8", "i16", "i32", "i64"):
        return ("int" if resolved.signed else "uint") + element[1:]
    raise PromotionError(f"dtype {dtype!r} takes no part in cuTile arithmetic promotion")


def _loose(operand) -> Optional[Loose]:
    if isinstance(operand, Loose):
        return operand
    if isinstance(operand, bool):
        return None  # Python bools are concrete bool_ constants
    if isinstance(operand, int):
        return Loose("int", operand)
    if isinstance(operand, float):
        return Loose("float", operand)
    return None


def concrete_dtype(constant: Loose) -> str:
    """The dtype a loose constant takes: float32, or int32/int64/uint64 by value."""
    if constant.kind == "float":
        return "float32"
    value = 0 if constant.value is None else int(constant.value)
    if -(1 << 31) <= value < (1 << 31):
        return "int32"
    if -(1 << 63) <= value < (1 << 63):
        return "int64"
    if 0 <= value < (1 << 64):
        return "uint64"
    raise PromotionError(f"integer constant {value} does not fit in int64 or uint64")


def promote(a, b) -> Union[str, Loose]:
    """The common dtype of two operands (see the module docstring); a Loose when both are loose."""
    loose_a, loose_b = _loose(a), _loose(b)
    if loose_a is not None and loose_b is not None:
        kind = "float" if "float" in (loose_a.kind, loose_b.kind) else "int"
        return Loose(kind)
    left = concrete_dtype(loose_a) if loose_a else ("bool_" if isinstance(a, bool) else _canonical(a))
    right = concrete_dtype(loose_b) if loose_b else ("bool_" if isinstance(b, bool) else _canonical(b))
    if loose_a is not None or loose_b is not None:
        if _CATEGORY[left] != _CATEGORY[right]:
            return left if _CATEGORY[left] > _CATEGORY[right] else right
        return right if loose_a is not None else left
    # Two concrete dtypes: the table decides, across categories too (bool_ + tfloat32 is an error).
    result = PROMOTION_TABLE[(left, right)]
    if result is None:
        raise PromotionError(f"implicit promotion of {left} and {right} is not supported; "
                             f"cast one operand explicitly")
    return result


def to_element(dtype) -> Resolved:
    """Tile IR element type and signedness of a cuTile dtype name."""
    return resolve(_canonical(dtype))
