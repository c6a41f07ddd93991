"""Kernels built with tilebc.ir.builder for the lowering hooks no cuTile fixture reaches
(get_global, get_tensor_shape, memory_fence_alias_tko, mulhii, ptr_to_int, ptr_to_ptr, alloca) and
for gather/scatter view shapes: each runs through the JIT's PTX on the emulator and through the
CPU interpreter, and both must store bit-identical results that also match numpy.

`HANDBUILT` (name -> module builder) is read by test_rt_sim_coverage, which checks that the
fixtures plus these kernels reach every lowering hook.
"""
import numpy as np
import pytest

import tilebc
from tilebc.verify import verify
from tilebc.interp import run as interpret
from tilebc.ir import (DenseElementsAttr, Global, GatherScatterViewType, PointerType, f32, i32,
                       i64, scalar, tile, token)
from tilebc.ir.builder import new_function, new_module

from tilebc_runtime import sim

RNG = np.random.default_rng(8)
VERSION = "13.5"


def _array_params(element, rank=1):
    """An array parameter group as cuTile passes it: pointer, shape, strides (i32 each)."""
    return [scalar(PointerType(element))] + [scalar(i32)] * (2 * rank)


def _view(b, params, rank=1):
    pointer, rest = params[0], params[1:]
    return b.tensor_view(pointer, rest[:rank], rest[rank:])


def _store_scalar(b, value, tiles, slot: int, after):
    """Store a 0-d tile into element `slot` of a (1,)-tiled partition view."""
    index = b.constant(slot, "i32")
    return b.store(b.reshape(value, (1,)), tiles, [index], token=after)


def integer_and_pointer_ops():
    """mulhii on loaded tiles; ptr_to_int / ptr_to_ptr on an argument pointer (a float view of
    int bits); get_tensor_shape of dynamic 1-d and 2-d views; get_index_space_shape of a
    gather/scatter view (one index per element along every dimension)."""
    module = new_module(VERSION)
    params = (_array_params(i32) * 2 + _array_params(i32) + _array_params(f32) +
              _array_params(i32) + _array_params(i64) + _array_params(f32, rank=2))
    b = new_function(module, "integer_and_pointer_ops", params)
    args = b.args
    x, y, out, as_float, meta, address, matrix = (args[0:3], args[3:6], args[6:9], args[9:12],
                                                  args[12:15], args[15:18], args[18:23])
    start = b.make_token()
    bid = b.get_tile_block_id()[0]
    x_view = _view(b, x)
    a, _ = b.load(b.partition_view(x_view, (64,)), [bid], token=start)
    c, _ = b.load(b.partition_view(_view(b, y), (64,)), [bid], token=start)
    high = b.mulhii(a, c)
    done = b.store(high, b.partition_view(_view(b, out), (64,)), [bid], token=start)
    # the same bytes read through a pointer cast to f32
    floats = b.ptr_to_ptr(x[0], result_types=[scalar(PointerType(f32))])
    reread = b.tensor_view(floats, [x[1]], [x[2]])
    bits, _ = b.load(b.partition_view(reread, (64,)), [bid], token=start)
    done = b.store(bits, b.partition_view(_view(b, as_float), (64,)), [bid], token=done)
    # shapes: of x's view, of the 2-d view, and the gather/scatter index space of the 2-d view
    meta_tiles = b.partition_view(_view(b, meta), (1,))
    (length,) = (b.get_tensor_shape(x_view, result_types=[scalar(i32)]),)
    done = _store_scalar(b, length, meta_tiles, 0, done)
    matrix_view = _view(b, matrix, rank=2)
    rows, cols = b.get_tensor_shape(matrix_view, result_types=[scalar(i32)] * 2)
    done = _store_scalar(b, rows, meta_tiles, 1, done)
    done = _store_scalar(b, cols, meta_tiles, 2, done)
    gather = b.make_gather_scatter_view(
        matrix_view, result_types=[GatherScatterViewType((4, 8), matrix_view.type, 0)])
    space = b.get_index_space_shape(gather, result_types=[scalar(i32)] * 2)
    done = _store_scalar(b, space[0], meta_tiles, 3, done)
    done = _store_scalar(b, space[1], meta_tiles, 4, done)
    where = b.ptr_to_int(x[0], result_types=[scalar(i64)])
    _store_scalar(b, where, b.partition_view(_view(b, address), (1,)), 0, done)
    b.return_([])
    return module


def global_table_and_fence():
    """get_global: a module global read through a view; memory_fence_alias_tko: a store through
    one view of `out`, the fence, then a load of other threads' elements through a second view of
    the same array (tiles of 32) written back over its first half."""
    module = new_module(VERSION)
    values = (np.arange(64, dtype=np.float32) * np.float32(0.75) - 20).astype(np.float32)
    module.globals.append(Global("table", DenseElementsAttr(tile((64,), f32), values.tobytes()),
                                 alignment=16))
    b = new_function(module, "global_table_and_fence", _array_params(f32))
    out = b.args
    start = b.make_token()
    zero, one = b.constant(0, "i32"), b.constant(1, "i32")
    table = b.get_global(name="table", result_types=[scalar(PointerType(f32))])
    loaded, _ = b.load(b.partition_view(b.tensor_view(table, [64], [1]), (64,)), [zero],
                       token=start)
    wrote = b.store(loaded, b.partition_view(_view(b, out), (64,)), [zero], token=start)
    fenced = b.memory_fence_alias_tko(wrote)
    halves = b.partition_view(b.tensor_view(out[0], [out[1]], [out[2]]), (32,))
    upper, after = b.load(halves, [one], token=fenced)
    b.store(upper, halves, [zero], token=after)
    b.return_([])
    return module, values


def scratch_exchange():
    """alloca: every thread stores its slots into tile-block scratch, then reads the slots of the
    mirrored threads (element 63 - i) back: the scratch is shared by the whole tile block."""
    module = new_module(VERSION)
    b = new_function(module, "scratch_exchange", _array_params(f32))
    out = b.args
    start = b.make_token()
    zero = b.constant(0, "i32")
    base = b.alloca(num_elem=64, alignment=16, result_types=[scalar(PointerType(f32))])
    lanes = b.iota(result_types=[tile((64,), i32)])
    pointers = b.splat(base, (64,))
    here = b.offset(pointers, lanes)
    stored = b.store_ptr_tko(here, b.itof(lanes, f32), token=start,
                             memory_ordering_semantics="weak")
    mirrored = b.offset(pointers, b.subi(b.constant(63, "i32", (64,)), lanes))
    values, after = b.load_ptr_tko(mirrored, token=stored, memory_ordering_semantics="weak",
                                   result_types=[tile((64,), f32), token])
    b.store(values, b.partition_view(_view(b, out), (64,)), [zero], token=after)
    b.return_([])
    return module


HANDBUILT = {"integer_and_pointer_ops": integer_and_pointer_ops,
             "global_table_and_fence": lambda: global_table_and_fence()[0],
             "scratch_exchange": scratch_exchange}


def _both(module, entry, grid, *arrays):
    """Run on the interpreter and on the emulator with copies of `arrays`; return both copies."""
    on_interpreter = [a.copy() for a in arrays]
    on_emulator = [a.copy() for a in arrays]
    interpret(module, entry, grid, *on_interpreter)
    sim.run(module, entry, grid, *on_emulator)
    return on_interpreter, on_emulator


def _same_bits(expected, actual):
    assert expected.dtype == actual.dtype
    np.testing.assert_array_equal(expected.view(np.uint8), actual.view(np.uint8))


def test_every_handbuilt_kernel_verifies_and_round_trips():
    for build in HANDBUILT.values():
        module = build()
        verify(module)
        again = tilebc.load(tilebc.dump(module, module.version))
        assert [f.name for f in again.functions] == [f.name for f in module.functions]


def test_integer_and_pointer_ops():
    module = integer_and_pointer_ops()
    n = 128
    x = RNG.integers(-2 ** 31, 2 ** 31, n).astype(np.int32)
    y = RNG.integers(-2 ** 31, 2 ** 31, n).astype(np.int32)
    x[:4] = [-1, -1, 0x7FFFFFFF, -2 ** 31]
    y[:4] = [-1, 2, 0x7FFFFFFF, -2 ** 31]
    out = np.zeros(n, np.int32)
    as_float = np.zeros(n, np.float32)
    meta = np.zeros(5, np.int32)
    address = np.zeros(1, np.int64)
    matrix = np.zeros((6, 40), np.float32)
    interp, emulated = _both(module, None, (2,), x, y, out, as_float, meta, address, matrix)
    for expected, actual in zip(interp, emulated):
        _same_bits(expected, actual)
    out, as_float, meta, address = emulated[2:6]
    # mulhii reads its operands as unsigned (PTX mul.hi.u32)
    product = x.view(np.uint32).astype(np.uint64) * y.view(np.uint32).astype(np.uint64)
    np.testing.assert_array_equal(out.view(np.uint32), (product >> np.uint64(32)).astype(np.uint32))
    np.testing.assert_array_equal(as_float.view(np.int32), x)
    assert meta.tolist() == [n, 6, 40, 6, 40]
    assert address[0] != 0 and address[0] % 4 == 0


def test_global_table_and_fence():
    module, table = global_table_and_fence()
    out = np.zeros(64, np.float32)
    (interp,), (emulated,) = _both(module, None, (1,), out)
    _same_bits(interp, emulated)
    np.testing.assert_array_equal(emulated, np.concatenate([table[32:], table[32:]]))


def test_scratch_exchange_between_threads():
    module = scratch_exchange()
    out = np.full(64, -1.0, np.float32)
    (interp,), (emulated,) = _both(module, None, (3,), out)
    _same_bits(interp, emulated)
    np.testing.assert_array_equal(emulated, np.arange(63, -1, -1, dtype=np.float32))


@pytest.mark.parametrize("threads", [32, 64, 128])
def test_scratch_exchange_for_every_cta_size(threads):
    # fewer threads than elements: each thread owns several slots of the scratch
    module = scratch_exchange()
    out = np.zeros(64, np.float32)
    sim.run(module, None, (1,), out, threads=threads)
    np.testing.assert_array_equal(out, np.arange(63, -1, -1, dtype=np.float32))
