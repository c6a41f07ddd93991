"""Layouts -> views (tilebc.layouts): hidet's layout tables, composition, cuTile arrays and orders,
partition index spaces and padding values."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import tilebc
from tilebc import layouts as L
from tilebc.ir import ELEMENT_TYPES, PointerType, scalar
from tilebc.ir.builder import module_entry, new_module
from tilebc.numeric.numerics import FLOAT_FORMATS, decode_bits, to_bits
from tilebc.ops.enums import PaddingValue
from tilebc.verify import diagnostics
from tilebc.verify.typesys import FLOAT_ONLY_PADDING

from conftest import FIXTURE_DIR

# The coordinate -> index tables of the hidet type-system seed (004), as printed there.
SEED_TABLES = {
    "strided_layout([2,2,2], ranks=[0,2,1])": (
        lambda: L.strided_layout([2, 2, 2], [0, 2, 1]),
        {(0, 0, 0): 0, (0, 1, 0): 1, (0, 0, 1): 2, (0, 1, 1): 3,
         (1, 0, 0): 4, (1, 1, 0): 5, (1, 0, 1): 6, (1, 1, 1): 7}),
    "row_major(2,1) * row_major(2,2)": (
        lambda: L.row_major(2, 1) * L.row_major(2, 2),
        {(0, 0): 0, (0, 1): 1, (1, 0): 2, (1, 1): 3, (2, 0): 4, (2, 1): 5, (3, 0): 6, (3, 1): 7}),
    "row_major(2,1) * column_major(2,2)": (
        lambda: L.row_major(2, 1) * L.column_major(2, 2),
        {(0, 0): 0, (1, 0): 1, (0, 1): 2, (1, 1): 3, (2, 0): 4, (3, 0): 5, (2, 1): 6, (3, 1): 7}),
}


@pytest.mark.parametrize("name", sorted(SEED_TABLES))
def test_seed_tables(name):
    make, table = SEED_TABLES[name]
    layout = make()
    assert {c: layout(*c) for c in table} == table
    mapping = L.layout_view(layout, "f32")
    base = np.array(mapping.type.strides)
    for coord, index in table.items():
        assert int(np.dot(mapping.view_coordinate(coord), base)) == index


def test_seed_shapes_and_views():
    e = L.row_major(2, 1) * L.row_major(2, 2) * L.column_major(2, 2)
    assert e.shape == (8, 4)
    # row-major over a row-major stays one stride per dim; with a column-major inner it cannot
    assert L.layout_view(L.row_major(2, 1) * L.row_major(2, 2), "f32").type.strides == (2, 1)
    split = L.layout_view(L.row_major(2, 1) * L.column_major(2, 2), "f32")
    assert split.type.rank == 3 and split.dims == ((0, 1), (2,))
    assert str(L.layout_view(L.row_major(1024, 1024), "f16").type) == \
        "tensor_view<1024x1024xf16, strides=[1024,1]>"
    assert str(L.layout_view(L.strided_layout([32, 16, 32], [0, 2, 1]), "f16").type) == \
        "tensor_view<32x16x32xf16, strides=[512,1,16]>"  # the type-system seed's example
    assert L.column_major(3, 5).strides == (1, 3)


def _random_layout(rng, rank, depth):
    shape = [int(rng.integers(1, 4)) for _ in range(rank)]
    ranks = list(rng.permutation(rank))
    layout = L.strided_layout(shape, ranks)
    if depth:
        layout = layout * _random_layout(rng, rank, depth - 1)
    return layout


@pytest.mark.parametrize("seed", range(40))
def test_views_address_like_the_layout(seed):
    """Any (composed) layout: the tensor view's address formula gives the layout's index for every
    coordinate, and the layout is a bijection onto 0..size-1."""
    rng = np.random.default_rng(seed)
    layout = _random_layout(rng, int(rng.integers(1, 4)), int(rng.integers(0, 3)))
    mapping = L.layout_view(layout, "i8")
    indices = []
    for coord in L.all_coordinates(layout.shape):
        view_coord = mapping.view_coordinate(coord)
        assert all(0 <= v < n for v, n in zip(view_coord, mapping.type.shape))
        index = sum(v * s for v, s in zip(view_coord, mapping.type.strides))
        assert index == layout(*coord)
        indices.append(index)
    assert sorted(indices) == list(range(layout.size))
    if layout.strides is not None:
        assert mapping.type.rank == layout.rank


@pytest.mark.parametrize("shape, order", [((3, 4), "C"), ((3, 4), "F"), ((2, 3, 4), "C"),
                                          ((5,), "C")])
def test_numpy_arrays(shape, order):
    array = np.zeros(shape, dtype=np.float32, order=order)
    static = L.array_view_type(array, dynamic=False)
    assert static.shape == shape
    # numpy's own address arithmetic agrees with the view's
    for coord in L.all_coordinates(shape):
        assert sum(c * s for c, s in zip(coord, static.strides)) * 4 == \
            sum(c * s for c, s in zip(coord, array.strides))
    dynamic = L.array_view_type(array)
    assert dynamic.shape == (None,) * len(shape) and dynamic.strides == (None,) * len(shape)
    sliced = L.array_view_type(np.zeros((8, 8), np.int16)[::2, 1::3], dynamic=False)
    assert sliced.shape == (4, 3) and sliced.strides == (16, 3)


def test_cutile_fixture_views_match():
    """cuTile arrays are fully dynamic views; its `order` is the partition view's dim_map."""
    for name, order, tile_shape in (("load_store_order", (1, 0), (32, 16)),
                                    ("load_store_order", "F", (32, 16)),
                                    ("load_store_3d_order", (2, 0, 1), (2, 8, 8))):
        module = tilebc.load(FIXTURE_DIR / name / f"{name}-13.5.tilebc")
        views = [op.results[0].type for op in module.walk() if op.name == "make_partition_view"]
        element = views[0].tensor_view.element
        tensor = L.tensor_view_type(element, [None] * len(tile_shape), [None] * len(tile_shape))
        assert tensor == views[0].tensor_view
        assert L.partition_view_type(tensor, tile_shape, order) in views


@pytest.mark.parametrize("sizes, tiles, expected", [
    ((64, 256), (128, 128), (1, 2)),      # the seed's example: partial tiles count
    ((8192, 128), (128, 4), (64, 32)),    # the seed's 64x32 grid
    ((16, 16), (32, 32), (1, 1)),
    ((100,), (16,), (7,)),
])
def test_index_space(sizes, tiles, expected):
    view = L.partition_view_type(L.tensor_view_type("f32", sizes, L.row_major(*sizes).strides),
                                 tiles)
    assert L.index_space_shape(view) == expected
    dynamic = L.partition_view_type(L.tensor_view_type("f32", [None] * len(sizes),
                                                       [None] * len(sizes)), tiles)
    assert L.index_space_shape(dynamic) == (None,) * len(sizes)
    assert L.index_space_shape(dynamic, sizes) == expected


def test_tile_elements_cover_the_view_once():
    view = L.partition_view_type(L.tensor_view_type("f32", [5, 6], [6, 1]), (2, 4), order="F")
    space = L.index_space_shape(view)
    assert space == (3, 2)  # tile dim 0 (2) runs along view dim 1 (6), tile dim 1 (4) along dim 0 (5)
    seen = np.zeros((5, 6), int)
    for index in itertools.product(*(range(n) for n in space)):
        coords, inside = L.tile_elements(view, index)
        for c in coords[inside]:
            seen[tuple(c)] += 1
        assert (~inside).sum() == (coords >= np.array([5, 6])).any(axis=-1).sum()
    assert (seen == 1).all()
    with pytest.raises(L.LayoutError, match="outside the index space"):
        L.tile_elements(view, (0, 2))


EXPECTED_VALUE = {PaddingValue.ZERO: 0.0, PaddingValue.NEG_ZERO: -0.0, PaddingValue.POS_INF: np.inf,
                  PaddingValue.NEG_INF: -np.inf}


@pytest.mark.parametrize("element", sorted(ELEMENT_TYPES))
def test_padding_values(element):
    """Generated from the element table and float formats: each legal padding decodes to the value
    it names; the rest raise. Integers take exactly what NVIDIA's verifier (typesys) allows."""
    element = ELEMENT_TYPES[element]
    legal = L.legal_paddings(element)
    if element.is_integer:
        assert legal == tuple(p for p in PaddingValue if p not in FLOAT_ONLY_PADDING)
        assert L.padding_array(PaddingValue.ZERO, element, (3,)).tolist() in ([0] * 3, [False] * 3)
        return
    fmt = FLOAT_FORMATS[element.name]
    for padding in legal:
        bits = L.padding_bits(padding, element)
        value = float(decode_bits(np.array([bits], np.uint64), fmt)[0])
        if padding is PaddingValue.NAN:
            assert np.isnan(value)
        else:
            assert value == EXPECTED_VALUE[padding]
            assert np.signbit(value) == np.signbit(EXPECTED_VALUE[padding])
        storage = L.padding_array(padding, element, (2,))
        assert to_bits(storage, element).tolist() == [bits, bits]
    assert (PaddingValue.POS_INF in legal) == fmt.inf
    assert (PaddingValue.NAN in legal) == (fmt.nan != "none")
    assert (PaddingValue.NEG_ZERO in legal) == fmt.signed


def test_views_from_layouts_verify():
    """A kernel whose views come from layouts passes the verifier."""
    module = new_module("13.5")
    f32 = ELEMENT_TYPES["f32"]
    b = module_entry(module, "k", [scalar(PointerType(f32))])
    (base,) = b.args
    mapping = L.layout_view(L.column_major(64, 32), f32)
    view = b.tensor_view(base, mapping.type.shape, mapping.type.strides)
    assert view.type == mapping.type
    parts = b.partition_view(view, (16, 8), padding_value="nan")
    assert parts.type == L.partition_view_type(mapping.type, (16, 8), padding_value="nan")
    b.return_()
    assert [d for d in diagnostics(module) if d.severity == "error"] == []


@pytest.mark.parametrize("call, message", [
    (lambda: L.strided_layout([2, 2], [0, 0]), "permutation"),
    (lambda: L.row_major(2, 0), "positive"),
    (lambda: L.row_major(2) * L.row_major(2, 2), "equal ranks"),
    (lambda: L.row_major(2, 2)(2, 0), "outside"),
    (lambda: L.tensor_view_type("f32", [4], [1, 1]), "differ in rank"),
    (lambda: L.tensor_view_type("f32", [0], [1]), ">= 1"),
    (lambda: L.partition_view_type(L.tensor_view_type("f32", [8], [1]), (3,)), "powers of two"),
    (lambda: L.partition_view_type(L.tensor_view_type("i32", [8], [1]), (4,), padding_value="nan"),
     "needs a float"),
    (lambda: L.padding_bits(PaddingValue.NAN, "f4E2M1FN"), "no NaN"),
    (lambda: L.padding_bits(PaddingValue.NEG_ZERO, "f8E8M0FNU"), "unsigned"),
    (lambda: L.order_dim_map((0, 0), 2), "permutation"),
    (lambda: L.order_dim_map("K", 2), "expected 'C', 'F'"),
])
def test_rejects(call, message):
    with pytest.raises(L.LayoutError, match=message):
        call()
