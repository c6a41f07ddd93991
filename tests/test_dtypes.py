"""Data-layout table and dtype-name resolution, checked against ml_dtypes/numpy, cuTile and the seeds."""
import re

import ml_dtypes
import numpy as np
import pytest

from conftest import SHARED
from tilebc.numeric import dtypes
from tilebc.numeric.dtypes import DATA_LAYOUT, DLDataTypeCode, DtypeError, Resolved, resolve
from tilebc.ir.types import ELEMENT_TYPES, PointerType, TileType, f16, f32, i8, tf32

SEED_FILES = ("002_d95ef6345bccb177.txt", "003_516bb4b17a7fc5a7.txt", "004_869edcfc861549ea.txt")


def test_table_covers_every_element_type_once():
    assert sorted(row.element.name for row in DATA_LAYOUT) == sorted(ELEMENT_TYPES)


@pytest.mark.parametrize("row", DATA_LAYOUT, ids=lambda r: r.element.name)
def test_layout_rows_agree_with_numpy_and_widths(row):
    element = row.element
    if row.raw_storage:
        assert row.numpy == np.dtype(np.uint8) and row.dl_code is None
        return
    if element.name == "i1":  # a byte per element
        assert (row.dl_code, row.dl_bits, row.numpy.itemsize) == (DLDataTypeCode.kDLBool, 8, 1)
    elif element.name == "tf32":  # 19 bits held in 4 bytes
        assert (row.dl_bits, row.numpy.itemsize, element.bits) == (32, 4, 19)
    else:
        assert row.dl_bits == element.bits
        assert row.numpy.itemsize * 8 >= element.bits
    kind = row.numpy.kind
    assert (kind in "iub") == element.is_integer or row.numpy == np.dtype(ml_dtypes.int4)


@pytest.mark.parametrize("row", [r for r in DATA_LAYOUT if r.dl_code is not None],
                         ids=lambda r: r.element.name)
def test_dlpack_round_trip(row):
    code, bits, lanes = dtypes.dlpack_type(row.element)
    back = dtypes.from_dlpack(code, bits, lanes)
    expected = "f32" if row.element.name == "tf32" else row.element.name  # DLPack calls tf32 float32
    assert back.type.name == expected
    if row.element.is_integer and row.element.name != "i1":
        unsigned = dtypes.from_dlpack(*dtypes.dlpack_type(row.element, signed=False))
        assert unsigned.type == row.element and unsigned.signed is False


def test_dlpack_foreign_kinds_and_vectors():
    for code in dtypes.FOREIGN_KINDS:
        with pytest.raises(DtypeError, match="is not representable in Tile IR"):
            dtypes.from_dlpack(int(code), 8, 1)
    assert dtypes.from_dlpack(2, 32, 4).type == TileType((4,), f32)
    with pytest.raises(DtypeError, match="power of two"):
        dtypes.from_dlpack(2, 32, 3)
    with pytest.raises(DtypeError, match="no element type has that kind and width"):
        dtypes.from_dlpack(2, 8, 1)
    with pytest.raises(DtypeError, match="unknown DLPack type code 99"):
        dtypes.from_dlpack(99, 8, 1)


@pytest.mark.parametrize("row", DATA_LAYOUT, ids=lambda r: r.element.name)
def test_numpy_dtypes_resolve_back(row):
    if row.raw_storage or row.element.name == "tf32":
        return
    assert resolve(row.numpy).element == row.element


def test_cutile_dtypes_resolve():
    ct = pytest.importorskip("cuda.tile")
    from cuda.tile._datatype import DType
    from cuda.tile._datatype import dtype_simple_bytecode_type
    from cuda.tile._bytecode.type import SimpleType
    tags = {"I1": "i1", "I8": "i8", "I16": "i16", "I32": "i32", "I64": "i64", "F16": "f16",
            "BF16": "bf16", "F32": "f32", "TF32": "tf32", "F64": "f64", "F8E4M3FN": "f8E4M3FN",
            "F8E5M2": "f8E5M2", "F8E8M0FNU": "f8E8M0FNU", "F4E2M1FN": "f4E2M1FN",
            "FNV8E5M3FNU": "fnv8E5M3FNU"}
    for name in dir(ct):
        value = getattr(ct, name)
        if not isinstance(value, DType):
            continue
        simple = dtype_simple_bytecode_type(value)
        expected = tags[SimpleType(simple).name]
        assert resolve(value).element.name == expected, name
        assert resolve(f"cuda.tile.{name}").element.name == expected, name
        if name.startswith("uint"):
            assert resolve(value).signed is False


def _seed_names():
    """Every dtype name the three seeds mention (none without a shared folder)."""
    if not SHARED.is_dir():
        return []
    seeds = SHARED / "seeds"
    missing = [name for name in SEED_FILES if not (seeds / name).exists()]
    if missing:  # the shared folder is here but incomplete: an error, not a silent skip
        raise FileNotFoundError(f"{seeds} lacks {', '.join(missing)}")
    data_model, names_seed, aliases_seed = ((seeds / name).read_text() for name in SEED_FILES)
    names = {f"cuda.tile.{n}" for n in re.findall(r"cuda\.tile\.(\w+)#", data_model)} - {
        "cuda.tile.DType", "cuda.tile.RoundingMode", "cuda.tile.PaddingMode"}
    names |= set(re.findall(r'"((?:float|int|uint|bfloat|bool|handle)\w*)"', names_seed))
    names |= {"float32x4", "float4_e2m1fn", "float8_e4m3fn", "handle", "bool"}
    names |= set(re.findall(r"\b((?:i|f|bf|tf|c)\d+(?:x\d+)?|u?int\d+(?:x\d+)?|"
                            r"(?:b?t?)float\d+(?:x\d+)?|complex\d+|bool|void)\b", aliases_seed))
    names |= set(re.findall(r"(~\(~\w+\)|~\w+)", aliases_seed))
    return sorted(names)


NOT_REPRESENTABLE = re.compile(r"^(~\(~\w+\)|~void|void|c64|c128|complex64|complex128|handle)$")


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"no shared folder at {SHARED}")
@pytest.mark.parametrize("name", _seed_names())
def test_every_seed_name_resolves_or_errors(name):
    if NOT_REPRESENTABLE.match(name):
        with pytest.raises(DtypeError, match=r"is not representable in Tile IR: \w"):
            resolve(name)
        return
    resolved = resolve(name)
    assert isinstance(resolved.type, (type(f32), TileType, PointerType))


@pytest.mark.parametrize("name, expected", [
    ("float32", f32), ("f16", f16), ("tf32", tf32), ("tfloat32", tf32), ("int8", i8), ("i8", i8),
    ("bool", ELEMENT_TYPES["i1"]), ("bool_", ELEMENT_TYPES["i1"]), ("torch.bfloat16", ELEMENT_TYPES["bf16"]),
    ("float16x2", TileType((2,), f16)), ("float32x4", TileType((4,), f32)), ("f32x4", TileType((4,), f32)),
    ("i8x4", TileType((4,), i8)), ("int8x4", TileType((4,), i8)), ("~f32", PointerType(f32)),
    ("~i32", PointerType(ELEMENT_TYPES["i32"])), ("np.float8_e4m3fn", ELEMENT_TYPES["f8E4M3FN"]),
    ("float8_e5m3fnu", ELEMENT_TYPES["fnv8E5M3FNU"]), ("uint16", ELEMENT_TYPES["i16"]),
])
def test_named_dtypes(name, expected):
    assert resolve(name).type == expected


@pytest.mark.parametrize("name, message", [
    ("c64", "complex"), ("complex128", "complex"), ("~(~f16)", "nested pointers"), ("void", "void"),
    ("~void", "void"), ("handle", "untyped pointer"), ("float6_e2m3fn", "fp6"),
    ("float8_e4m3fnuz", "e4m3fnuz"), ("float32x3", "power of two"), ("torch.complex64", "complex"),
])
def test_unrepresentable_names(name, message):
    with pytest.raises(DtypeError, match=message):
        resolve(name)


def test_unknown_name_says_what_is_expected():
    with pytest.raises(DtypeError, match="^unknown dtype 'fp99'; expected a cuTile, TIRx, hidet"):
        resolve("fp99")


def test_signedness_and_torch_names():
    assert resolve("uint8") == Resolved(i8, False) and resolve("int8") == Resolved(i8, True)
    assert dtypes.torch_dtype_name("bf16") == "torch.bfloat16"
    with pytest.raises(DtypeError, match="fnv8E5M3FNU has no torch dtype"):
        dtypes.torch_dtype_name("fnv8E5M3FNU")
    with pytest.raises(DtypeError, match="fnv8E5M3FNU has no DLPack data type"):
        dtypes.dlpack_type("fnv8E5M3FNU")
