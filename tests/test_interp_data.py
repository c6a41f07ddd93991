"""Interpreter tests for data movement (broadcast, reshape, permute, cat, extract, insert, iota,
pack, unpack, select, offset), get_tensor_shape, padding values, view tiles over strided and
partial memory (the strided fast path and its fallbacks), and assume checks."""
import numpy as np
import pytest

import tilebc
from tilebc.interp import AssumptionError, MemoryCheckError, Pointer, run
from tilebc.interp.numeric_ops import memory_dtype
from tilebc.ir import (BoundedAttr, DenseElementsAttr, Module, PartitionViewType, PointerType,
                       TensorViewType, scalar, tile, token)
from tilebc.ir.attrs import DivByAttr, SameElementsAttr
from tilebc.ir.builder import new_function
from tilebc.ir.types import ELEMENT_TYPES
from tilebc.ops import MemoryOrderingSemantics
from tilebc.ops.enums import PaddingValue
from tilebc.verify import diagnostics

from test_interp_ops import run_op

WEAK = {"memory_ordering_semantics": MemoryOrderingSemantics.WEAK}
I32 = ELEMENT_TYPES["i32"]
RNG = np.random.default_rng(23)
DYNAMIC = None  # a dynamic dimension in a TensorViewType


def _constant(b, value, element="i32"):
    el = ELEMENT_TYPES[element]
    return b.op("constant", [], [scalar(el)],
                {"value": DenseElementsAttr(scalar(el),
                                            np.asarray(value, memory_dtype(el)).tobytes())})


def _no_errors(module):
    errors = diagnostics(module, warnings=False)
    assert not errors, "; ".join(map(str, errors))
    return module


# ------------------------------------------------------------------------- data movement

def test_broadcast_reshape_permute():
    x = RNG.standard_normal((1, 4)).astype(np.float32)
    (out,) = run_op("broadcast", [(x, "f32")], ["f32"], result_shape=(4, 4))
    np.testing.assert_array_equal(out, np.broadcast_to(x, (4, 4)))
    y = RNG.standard_normal((4, 4)).astype(np.float32)
    (out,) = run_op("reshape", [(y, "f32")], ["f32"], result_shape=(2, 8))
    np.testing.assert_array_equal(out, y.reshape(2, 8))  # row-major order is kept
    z = RNG.standard_normal((2, 4, 8)).astype(np.float32)
    for permutation in [(2, 0, 1), (1, 2, 0), (0, 2, 1)]:
        (out,) = run_op("permute", [(z, "f32")], ["f32"], {"permutation": permutation},
                        result_shape=tuple(z.shape[p] for p in permutation))
        np.testing.assert_array_equal(out, np.transpose(z, permutation))


@pytest.mark.parametrize("dim", [0, 1])
def test_cat_along_each_dimension(dim):
    a = RNG.integers(-9, 9, (2, 4)).astype(np.int32)
    b = RNG.integers(-9, 9, (2, 4)).astype(np.int32)
    shape = (4, 4) if dim == 0 else (2, 8)
    (out,) = run_op("cat", [(a, "i32"), (b, "i32")], ["i32"], {"dim": dim}, result_shape=shape)
    np.testing.assert_array_equal(out, np.concatenate([a, b], axis=dim))


def test_iota_counts_from_zero_in_the_result_type():
    for element, dtype in [("i32", np.int32), ("i8", np.int8), ("i64", np.int64)]:
        (out,) = run_op("iota", [], [element], result_shape=(16,))
        np.testing.assert_array_equal(out, np.arange(16, dtype=dtype))


def test_select_picks_per_element():
    cond = np.array([True, False, True, True, False, False, True, False])
    a = np.arange(8, dtype=np.float32)
    b = -np.arange(8, dtype=np.float32)
    (out,) = run_op("select", [(cond, "i1"), (a, "f32"), (b, "f32")], ["f32"])
    np.testing.assert_array_equal(out, np.where(cond, a, b))


def _extract_insert_kernel(index):
    """entry(src 4x8 f32, small 2x4 f32, out_extract 2x4, out_insert 4x8): extract the 2x4
    sub-tile at `index` of src, and insert `small` into src at `index`."""
    from test_interp_ops import _load
    module = Module(version=tilebc.Version(13, 5))
    f32 = ELEMENT_TYPES["f32"]
    b = new_function(module, "k", [scalar(PointerType(f32))] * 4)
    big, small, out_small, out_big = b.block.args
    big_tile, _, _ = _load(b, big, tile((4, 8), f32))
    small_tile, _, _ = _load(b, small, tile((2, 4), f32))
    indices = [_constant(b, i) for i in index]
    extracted = b.op("extract", [big_tile, indices], [tile((2, 4), f32)])
    inserted = b.op("insert", [small_tile, big_tile, indices], [tile((4, 8), f32)])
    for value, pointer, shape in [(extracted, out_small, (2, 4)), (inserted, out_big, (4, 8))]:
        _, view, zeros = _load(b, pointer, tile(shape, f32))
        b.op("store_view_tko", [value, view, zeros, None], [token], WEAK)
    b.op("return", [[]])
    return module


@pytest.mark.parametrize("index", [(0, 0), (1, 1), (0, 1), (1, 0)])
def test_extract_and_insert_work_in_result_tile_units(index):
    module = _no_errors(_extract_insert_kernel(index))
    big = RNG.standard_normal((4, 8)).astype(np.float32)
    small = RNG.standard_normal((2, 4)).astype(np.float32)
    got_small, got_big = np.zeros((2, 4), np.float32), np.zeros((4, 8), np.float32)
    run(module, "k", (1,), Pointer(big), Pointer(small), Pointer(got_small), Pointer(got_big))
    window = (slice(index[0] * 2, index[0] * 2 + 2), slice(index[1] * 4, index[1] * 4 + 4))
    np.testing.assert_array_equal(got_small, big[window])
    expected = big.copy()
    expected[window] = small
    np.testing.assert_array_equal(got_big, expected)


@pytest.mark.parametrize("element", ["f16", "bf16", "i16", "f32", "i32", "f8E4M3FN"])
def test_pack_and_unpack_are_the_little_endian_bytes(element):
    dtype = memory_dtype(ELEMENT_TYPES[element])
    values = RNG.standard_normal(8).astype(np.float32).astype(dtype) if dtype.kind != "i" \
        else RNG.integers(-1000, 1000, 8).astype(dtype)
    count = 8 * dtype.itemsize
    (packed,) = run_op("pack", [(values, element)], ["i8"], result_shape=(count,))
    np.testing.assert_array_equal(packed.view(np.uint8), values.view(np.uint8))
    (back,) = run_op("unpack", [(packed, "i8")], [element], result_shape=(8,))
    np.testing.assert_array_equal(back.view(np.uint8), values.view(np.uint8))


def test_offset_steps_by_the_pointee_size():
    """gather x[idx] through offset pointers (i16 and f64 pointees: 2- and 8-byte steps)."""
    for element in ["i16", "f64"]:
        el = ELEMENT_TYPES[element]
        ptype = PointerType(el)
        module = Module(version=tilebc.Version(13, 5))
        b = new_function(module, "k", [scalar(ptype), scalar(PointerType(I32)), scalar(ptype)])
        source, indices, out = b.block.args

        def pointers(base, element_type, offsets):
            one = b.op("reshape", [base], [tile((1,), PointerType(element_type))])
            many = b.op("broadcast", [one], [tile((8,), PointerType(element_type))])
            return b.op("offset", [many, offsets], [tile((8,), PointerType(element_type))])
        iota = b.op("iota", [], [tile((8,), I32)])
        index_tile, _ = b.op("load_ptr_tko", [pointers(indices, I32, iota), None, None, None],
                             [tile((8,), I32), token], WEAK)
        gathered, _ = b.op("load_ptr_tko", [pointers(source, el, index_tile), None, None, None],
                           [tile((8,), el), token], WEAK)
        b.op("store_ptr_tko", [pointers(out, el, iota), gathered, None, None], [token], WEAK)
        b.op("return", [[]])
        _no_errors(module)
        x = np.arange(100, 132).astype(memory_dtype(el))
        idx = RNG.integers(0, 32, 8).astype(np.int32)
        got = np.zeros(8, x.dtype)
        run(module, "k", (1,), Pointer(x), Pointer(idx), Pointer(got))
        np.testing.assert_array_equal(got, x[idx])


# ------------------------------------------------------------- dynamic tensor views, tiles

def _copy_kernel(tile_shape, element="f32", padding=None, dim_map=None, out_tile=None):
    """entry(src array, dst array) in cuTile's convention (pointer, shape..., strides...): the tile
    at (bid.x, bid.y) of a partition view of src (with `padding`, `dim_map`) is stored to the
    tile at the same index of dst (tile shape `out_tile`, default the same)."""
    rank = len(tile_shape)
    el = ELEMENT_TYPES[element]
    module = Module(version=tilebc.Version(13, 5))
    params = ([scalar(PointerType(el))] + [scalar(I32)] * (2 * rank)) * 2
    b = new_function(module, "k", params)
    args = b.block.args
    view_type = TensorViewType(el, (DYNAMIC,) * rank, (DYNAMIC,) * rank)
    bid = b.op("get_tile_block_id", [], [scalar(I32)] * 3)
    indices = list(bid[:rank])
    loaded = None
    for k, (shape, pad, order) in enumerate([(tile_shape, padding, dim_map),
                                             (out_tile or tile_shape, None, None)]):
        base = k * (1 + 2 * rank)
        tensor = b.op("make_tensor_view", [args[base], list(args[base + 1:base + 1 + rank]),
                                           list(args[base + 1 + rank:base + 1 + 2 * rank])],
                      [view_type])
        part = b.op("make_partition_view", [tensor],
                    [PartitionViewType(tuple(shape), view_type,
                                       tuple(order or range(rank)), pad)])
        if k == 0:
            loaded, _ = b.op("load_view_tko", [part, indices, None], [tile(shape, el), token],
                             WEAK)
        else:
            b.op("store_view_tko", [loaded, part, indices, None], [token], WEAK)
    b.op("return", [[]])
    return _no_errors(module)


@pytest.mark.parametrize("make_source", [
    lambda a: a, lambda a: a[::-1], lambda a: a[:, ::-2], lambda a: a.T, lambda a: a[1:, 3:],
    lambda a: np.asfortranarray(a)], ids=["contiguous", "reversed", "negative-step", "transposed",
                                          "offset-slice", "fortran"])
def test_tiles_of_strided_arrays_copy_exactly(make_source):
    module = _copy_kernel((4, 8))
    base = RNG.standard_normal((20, 24)).astype(np.float32)
    source = make_source(base)
    # a transposed, every-other-column destination: neither layout is contiguous
    destination = np.full((source.shape[1] * 2, source.shape[0]), np.nan, np.float32).T[:, ::2]
    grid = (-(-source.shape[0] // 4), -(-source.shape[1] // 8))
    run(module, "k", grid, source, destination)  # partial edge tiles: loads pad, stores drop
    np.testing.assert_array_equal(destination, source)


@pytest.mark.parametrize("padding", [None] + list(PaddingValue), ids=lambda p: getattr(
    p, "keyword", "none"))
def test_padding_values_fill_elements_past_the_tensor(padding):
    module = _copy_kernel((8,), padding=padding)
    source = RNG.standard_normal(13).astype(np.float32)
    out = np.full(16, 7.0, np.float32)
    run(module, "k", (2,), source, out)
    np.testing.assert_array_equal(out[:13], source)
    fill = {None: 0.0, PaddingValue.ZERO: 0.0, PaddingValue.NEG_ZERO: -0.0,
            PaddingValue.NAN: np.nan, PaddingValue.POS_INF: np.inf,
            PaddingValue.NEG_INF: -np.inf}[padding]
    np.testing.assert_array_equal(out[13:], np.full(3, fill, np.float32))
    assert np.all(np.signbit(out[13:]) == np.signbit(np.float32(fill)))


def test_dim_map_reads_the_tensor_transposed():
    module = _copy_kernel((4, 8), dim_map=(1, 0), out_tile=(4, 8))
    source = RNG.standard_normal((16, 8)).astype(np.float32)  # tile dim 0 walks array axis 1
    out = np.zeros((8, 16), np.float32)
    run(module, "k", (2, 2), source, out)
    np.testing.assert_array_equal(out, source.T)


def test_a_tile_past_a_lying_shape_faults_with_the_address():
    """The kernel is told the array is bigger than it is: the tile's span leaves the buffer, so
    the strided path declines it and the per-element path reports the first bad address."""
    module = _copy_kernel((8,))
    source, out = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    with pytest.raises(MemoryCheckError, match="outside every array") as error:
        run(module, "k", (3,), (Pointer(source), 24, 1), out)
    assert error.value.op.name == "load_view_tko" and error.value.block_id == (2, 0, 0)
    assert error.value.address is not None


def test_a_tile_whose_lanes_alias_stores_the_last_lane():
    module = _copy_kernel((8,))
    source, target = np.arange(8, dtype=np.float32), np.zeros(4, np.float32)
    run(module, "k", (1,), source, (Pointer(target), 8, 0))  # stride 0: every lane is target[0]
    np.testing.assert_array_equal(target, [7.0, 0.0, 0.0, 0.0])


def test_uninitialised_memory_is_still_checked_per_element():
    module = _copy_kernel((8,))
    source, out = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    with pytest.raises(MemoryCheckError, match="uninitialised"):
        run(module, "k", (2,), source, out, uninitialized=[0])
    run(module, "k", (2,), source, out, uninitialized=[1])  # written before read: fine
    np.testing.assert_array_equal(out, source)


def test_get_tensor_shape_returns_the_dynamic_shape():
    el = ELEMENT_TYPES["f32"]
    module = Module(version=tilebc.Version(13, 5))
    b = new_function(module, "k", [scalar(PointerType(el))] + [scalar(I32)] * 4 +
                     [scalar(PointerType(I32))])
    pointer, n, m, s0, s1, out = b.block.args
    view_type = TensorViewType(el, (DYNAMIC, DYNAMIC), (DYNAMIC, DYNAMIC))
    tensor = b.op("make_tensor_view", [pointer, [n, m], [s0, s1]], [view_type])
    dims = b.op("get_tensor_shape", [tensor], [scalar(I32)] * 2)
    second = b.op("offset", [out, _constant(b, 1)], [scalar(PointerType(I32))])
    for value, where in zip(dims, [out, second]):
        b.op("store_ptr_tko", [where, value, None, None], [token], WEAK)
    b.op("return", [[]])
    _no_errors(module)
    got = np.zeros(2, np.int32)
    run(module, "k", (1,), np.zeros((5, 3), np.float32), Pointer(got))
    np.testing.assert_array_equal(got, [5, 3])


# ----------------------------------------------------------------------------------- assume

def _assume_kernel(predicate, shape, element="i32"):
    """entry(x array, out array): out = assume(predicate, load(x))."""
    from test_interp_ops import op_kernel
    el = ELEMENT_TYPES[element]
    return op_kernel("assume", [tile(shape, el)], [tile(shape, el)], {"predicate": predicate})


def _holds(predicate, values):
    module = _assume_kernel(predicate, values.shape)
    out = np.zeros_like(values)
    run(module, "k", (1,), values, out)  # unchecked: never faults
    np.testing.assert_array_equal(out, values)
    try:
        run(module, "k", (1,), values, out, check_assumptions=True)
        return True
    except AssumptionError as error:
        assert error.op.name == "assume"
        return False


def test_div_by_plain():
    assert _holds(DivByAttr(4), np.array([16, 24, 8, 4, 12, 12, 0, -16], np.int32))
    assert not _holds(DivByAttr(4), np.array([16, 24, 8, 4, 12, 13, 0, 16], np.int32))


def test_div_by_every_along_groups_consecutive_values():
    # one-dimensional groups of 4: leader divisible by 1 (anything), then +1 steps
    assert _holds(DivByAttr(1, every=4, along=0),
                  np.array([7, 8, 9, 10, 23, 24, 25, 26], np.int32))
    assert not _holds(DivByAttr(1, every=4, along=0),
                      np.array([7, 8, 9, 11, 23, 24, 25, 26], np.int32))
    rows = np.array([[4, 5, 6, 7, 12, 13, 14, 15], [8, 9, 10, 11, 24, 25, 26, 27],
                     [24, 25, 26, 27, 64, 65, 66, 67], [0, 1, 2, 3, 4, 5, 6, 7]], np.int32)
    assert _holds(DivByAttr(4, every=4, along=1), rows)
    leader_off = rows.copy()
    leader_off[3, 4:] += 1  # [5, 6, 7, 8]: consecutive, but 5 is not a multiple of 4
    assert not _holds(DivByAttr(4, every=4, along=1), leader_off)
    assert not _holds(DivByAttr(4, every=4, along=0), rows)  # columns are not consecutive
    assert _holds(DivByAttr(4, every=1, along=0), rows * 4)  # every 1: the plain form


def test_div_by_on_pointers_steps_by_the_pointee_size():
    """Pointer groups advance by the pointee's byte width: offset(p, iota) over f32 is one group
    of 8 pointers 4 bytes apart, and its leader is 16-byte aligned (arrays map at 256 bytes)."""
    f32 = ELEMENT_TYPES["f32"]
    ptype = PointerType(f32)
    for every, holds in [(8, True), (4, True), (1, False)]:
        module = Module(version=tilebc.Version(13, 5))
        b = new_function(module, "k", [scalar(ptype)])
        one = b.op("reshape", [b.block.args[0]], [tile((1,), ptype)])
        many = b.op("broadcast", [one], [tile((8,), ptype)])
        pointers = b.op("offset", [many, b.op("iota", [], [tile((8,), I32)])],
                        [tile((8,), ptype)])
        b.op("assume", [pointers], [tile((8,), ptype)],
             {"predicate": DivByAttr(16, every=every, along=0)})
        b.op("return", [[]])
        x = np.zeros(8, np.float32)
        if holds:
            run(module, "k", (1,), Pointer(x), check_assumptions=True)
        else:  # every 1: each pointer would have to be 16-byte aligned
            with pytest.raises(AssumptionError, match="not divisible by 16"):
                run(module, "k", (1,), Pointer(x), check_assumptions=True)


def test_bounded_and_same_elements():
    values = np.array([0, 3, 9, 2], np.int32)
    assert _holds(BoundedAttr(0, 9), values)
    assert _holds(BoundedAttr(0, None), values)
    assert not _holds(BoundedAttr(1, None), values)
    assert not _holds(BoundedAttr(None, 8), values)
    grouped = np.array([[1, 1, 5, 5], [1, 1, 5, 5]], np.int32)
    assert _holds(SameElementsAttr((2, 2)), grouped)
    assert _holds(SameElementsAttr((1, 2)), grouped)
    assert not _holds(SameElementsAttr((1, 4)), grouped)


def test_overlap_check_looks_at_bytes_not_ranges():
    """interp.run's aliasing check: interleaved views sharing no byte are independent arrays;
    views sharing one are not, wherever they sort in address order."""
    from tilebc.interp.memory import overlapping_pairs
    buffer = np.zeros((4, 64), np.float32)
    assert overlapping_pairs([buffer[:, :32], buffer[:, 32:]]) == []
    assert overlapping_pairs([buffer[:, :32], buffer[:, 16:48]]) == [(0, 1)]
    assert overlapping_pairs([buffer, buffer[0, 2:4], buffer[3, 8:16]]) == [(0, 1), (0, 2)]
    assert overlapping_pairs([buffer[0::2], buffer[1::2], buffer[:0]]) == []
