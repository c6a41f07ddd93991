"""Chunked regions (lowering/chunks.py): per-element work on large tiles lowered as one loop over
register chunks. Small kernels run with a forced low threshold on the PTX emulator and on the CPU
interpreter, which must store the same bits; real-size kernels check that the PTX no longer grows
with the tile and that nvJitLink links a 1M-element tile."""
import importlib.util
import time
from pathlib import Path

import numpy as np
import pytest

import tilebc
from tilebc.interp import Pointer, run as interpret
from tilebc.ir import PointerType, f16, f32, i32, scalar
from tilebc.ir.builder import module_entry, new_module
from tilebc.ops.enums import ComparisonOrdering, ComparisonPredicate
from tilebc_runtime import compiler, sim
from tilebc_runtime.lowering import chunks
from tilebc_runtime.lowering.lowerer import LoweringError
from tilebc_runtime.sim import runner

RNG = np.random.default_rng(17)
LOOP = "$L_chunk_"


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunk anything over 2 elements per thread, 4 slots at a time (fast to emulate)."""
    monkeypatch.setattr(chunks, "CHUNK_THRESHOLD", 2)
    monkeypatch.setattr(chunks, "CHUNK_SLOTS", 4)
    monkeypatch.setattr(runner, "_IMAGES", {})  # no PTX lowered under the real threshold


def _load_bench():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_compile_scaling.py"
    spec = importlib.util.spec_from_file_location("bench_compile_scaling", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# the compile-scaling benchmark's kernel: one f32 tile of `elements`, y = x, then `ops`
# alternating y + x and y * x, stored in place over a view of dynamic length
chain_kernel = _load_bench().elementwise_module


def mixed_2d_kernel(tile_shape=(32, 64)) -> tilebc.ir.Module:
    """out[f16] = x > 0 ? x * 2 + f32(y) : bias, tile by tile of a row-major 2-d view
    (tileiras-style: shape and row stride dynamic, masked at the edges), with a splat constant,
    a scalar argument broadcast, a compare, a select and casts both ways."""
    module = new_module(tilebc.Version(13, 5))
    b = module_entry(module, "mixed", [scalar(PointerType(f32)), scalar(PointerType(f16)),
                                       scalar(PointerType(f16)), scalar(i32), scalar(i32),
                                       scalar(f32)])
    x_ptr, y_ptr, out_ptr, rows, cols, bias = b.args
    token = b.make_token()

    def tiles(pointer):
        view = b.tensor_view(pointer, shape=[rows, cols], strides=[cols, 1])
        return b.partition_view(view, tile_shape)
    bx, by, _ = b.get_tile_block_id()
    x, _ = b.load(tiles(x_ptr), [bx, by], token=token)
    y, _ = b.load(tiles(y_ptr), [bx, by], token=token)
    two = b.constant(2.0, "f32", tile_shape)
    zero = b.constant(0.0, "f32", tile_shape)
    value = b.addf(b.mulf(x, two), b.ftof(y, f32))
    positive = b.cmpf(x, zero, comparison_predicate=ComparisonPredicate.GREATER_THAN,
                      comparison_ordering=ComparisonOrdering.ORDERED)
    chosen = b.select(positive, value, b.splat(bias, tile_shape))
    b.store(b.ftof(chosen, f16), tiles(out_ptr), [bx, by], token=token)
    b.return_()
    return module


def in_place_ordered_kernel(elements: int, other_index: bool) -> tilebc.ir.Module:
    """x = x * x - 1 with the store ordered after the load by its token; `other_index` stores
    into the next tile instead (then chunking could reorder a store before a load)."""
    module = new_module(tilebc.Version(13, 5))
    b = module_entry(module, "ordered", [scalar(PointerType(f32)), scalar(i32)])
    x_ptr, size = b.args
    tiles = b.partition_view(b.tensor_view(x_ptr, shape=[size], strides=[1]), (elements,))
    block, _, _ = b.get_tile_block_id()
    x, loaded = b.load(tiles, [block], token=b.make_token())
    y = b.subf(b.mulf(x, x), b.constant(1.0, "f32", (elements,)))
    target = b.addi(block, b.constant(1, "i32")) if other_index else block
    b.store(y, tiles, [target], token=loaded)
    b.return_()
    return module


def _ptx(module, arch="sm_90"):
    return compiler.compile(tilebc.dump(module), arch=arch, emit="ptx").ptx


def _both(module, grid, *arguments):
    """Run on the interpreter and on the emulator, arrays passed as bare pointers; return the
    arrays of each run."""
    on_interpreter = [a.copy() for a in arguments]
    on_emulator = [a.copy() for a in arguments]
    for runner, values in ((interpret, on_interpreter), (sim.run, on_emulator)):
        runner(module, None, grid, *[Pointer(a) if a.ndim else a for a in values])
    return on_interpreter, on_emulator


def _same_bits(expected, actual):
    assert expected.dtype == actual.dtype
    np.testing.assert_array_equal(expected.view(np.uint8), actual.view(np.uint8))


def test_chain_with_a_masked_edge_agrees_with_the_interpreter(small_chunks):
    module = chain_kernel(1024, 5)  # 8 slots per thread: two chunks of 4
    assert _ptx(module).count(LOOP) == 2  # its label and its back edge
    n = 2500  # the third tile is cut at 452 elements
    x = RNG.uniform(-2, 2, 3 * 1024).astype(np.float32)
    (interp, _), (emulated, _) = _both(module, (3,), x[:n].copy(), np.int32(n))
    _same_bits(interp, emulated)
    expected = x[:n].copy()
    y = expected.copy()
    for index in range(5):
        y = y + expected if index % 2 == 0 else y * expected
    np.testing.assert_array_equal(emulated, y)


@pytest.mark.parametrize("tile_shape,rows,cols", [
    ((32, 64), 70, 100),  # 16 slots per thread: chunks of 512 elements move down the rows
    ((4, 1024), 10, 2500),  # 32 slots: a chunk is half a row, so both coordinates move
])
def test_2d_casts_select_constants_and_broadcast_agree_with_the_interpreter(
        small_chunks, tile_shape, rows, cols):
    module = mixed_2d_kernel(tile_shape)
    ptx = _ptx(module)
    assert ptx.count(LOOP) == 2
    # the last row and column tiles are cut
    x = RNG.uniform(-3, 3, (rows, cols)).astype(np.float32)
    y = RNG.uniform(-3, 3, (rows, cols)).astype(np.float16)
    out = np.full((rows, cols), np.float16(7), np.float16)
    bias = np.array(-0.625, np.float32)
    grid = (-(-rows // tile_shape[0]), -(-cols // tile_shape[1]))
    interp, emulated = _both(module, grid, x, y, out, np.int32(rows), np.int32(cols), bias)
    _same_bits(interp[2], emulated[2])
    expected = np.where(x > 0, x * np.float32(2) + y.astype(np.float32), bias).astype(np.float16)
    np.testing.assert_array_equal(emulated[2], expected)


def test_a_store_ordered_after_its_own_load_is_chunked(small_chunks):
    module = in_place_ordered_kernel(512, other_index=False)
    assert LOOP in _ptx(module)
    x = RNG.uniform(-1, 1, 1024).astype(np.float32)
    (interp, _), (emulated, _) = _both(module, (2,), x, np.int32(x.size))
    _same_bits(interp, emulated)
    np.testing.assert_array_equal(emulated, x * x - np.float32(1))


def test_an_ordered_store_elsewhere_keeps_the_unrolled_code(small_chunks):
    # the store (into another tile) must follow every load of the tile; chunk by chunk it would
    # follow only the loads of its own chunk, so such a region is not chunked
    assert LOOP not in _ptx(in_place_ordered_kernel(512, other_index=True))


def test_a_large_tile_that_cannot_be_chunked_is_refused_saying_so():
    data = tilebc.dump(in_place_ordered_kernel(1 << 16, other_index=True))
    with pytest.raises(LoweringError, match=r"over the JIT's bound of 256 elements per thread; .*"
                                            r"not lowered as a loop over register chunks \(its "
                                            r"shape or its memory order rule that out\)$"):
        compiler.compile(data, arch="sm_90", emit="ptx")


def test_values_read_by_a_whole_tile_op_keep_the_unrolled_code(small_chunks):
    module = new_module(tilebc.Version(13, 5))
    b = module_entry(module, "perm", [scalar(PointerType(f32)), scalar(i32)])
    x_ptr, size = b.args
    view = b.tensor_view(x_ptr, shape=[size, size], strides=[size, 1])
    tiles = b.partition_view(view, (16, 16))
    token = b.make_token()
    x, _ = b.load(tiles, [b.constant(0, "i32"), b.constant(0, "i32")], token=token)
    b.store(b.permute(b.addf(x, x), (1, 0)), tiles, [b.constant(0, "i32"), b.constant(0, "i32")],
            token=token)
    b.return_()
    assert LOOP not in _ptx(module)
    x = RNG.uniform(-1, 1, (16, 16)).astype(np.float32)
    (interp, _), (emulated, _) = _both(module, (1,), x, np.int32(16))
    _same_bits(interp, emulated)
    np.testing.assert_array_equal(emulated, (x + x).T)


def test_small_tiles_keep_todays_code():
    # up to the real threshold nothing changes: 4K elements is 32 per thread, one slot each
    assert chunks.CHUNK_THRESHOLD == 32
    ptx = _ptx(chain_kernel(1 << 12, 4))
    assert LOOP not in ptx
    assert ptx.count("add.rn.f32") == 2 * 32
    ptx = _ptx(chain_kernel(1 << 13, 4))  # 64 per thread: chunked
    assert ptx.count(LOOP) == 2
    assert ptx.count("add.rn.f32") == 2 * chunks.CHUNK_SLOTS


def test_ptx_grows_with_ops_not_with_elements():
    sizes = {}
    for elements in (1 << 13, 1 << 16, 1 << 20):
        for ops in (4, 16):
            ptx = _ptx(chain_kernel(elements, ops))
            assert ptx.count(LOOP) == 2
            # instructions and declarations (comments and labels aside)
            sizes[elements, ops] = sum(line.endswith(";") for line in ptx.splitlines())
    for ops in (4, 16):
        assert sizes[1 << 13, ops] == sizes[1 << 16, ops] == sizes[1 << 20, ops]
    # each op is one chunk of CHUNK_SLOTS instructions
    assert sizes[1 << 20, 16] - sizes[1 << 20, 4] == 12 * chunks.CHUNK_SLOTS


def test_a_64k_tile_on_the_emulator_agrees_with_the_interpreter():
    module = chain_kernel(1 << 16, 3)  # real threshold: 512 per thread, 32 chunks of 16
    x = RNG.uniform(-2, 2, 1 << 16).astype(np.float32)
    (interp, _), (emulated, _) = _both(module, (1,), x, np.int32(x.size))
    _same_bits(interp, emulated)
    np.testing.assert_array_equal(emulated, (x + x) * x + x)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_a_1m_element_tile_links(arch):
    """Before chunking this kernel was refused (8192 elements per thread); with the bound lifted
    nvJitLink ran over a minute on it."""
    data = tilebc.dump(chain_kernel(1 << 20, 4))
    compiler.compile(data, arch=arch, emit="ptx")  # imports paid: time lowering + link
    started = time.perf_counter()
    result = compiler.compile(data, arch=arch, emit="cubin")
    seconds = time.perf_counter() - started
    assert result.cubin[:4] == b"\x7fELF"
    assert seconds < 10, seconds  # the target for 1M elements


# The cuTile fixtures that hold a chunkable region once every tile over one element per thread is
# chunked (at the real threshold none does, so their code is unchanged): element-wise ops of
# every float and integer width, casts (fp8, fp4 included), compares, masked and padded views,
# transposed dim_maps, static shapes, pointer tiles, regions inside loops and after early returns.
FIXTURES = ["atan2_f32", "bitcast", "cast_float_int", "cast_float_widths", "cast_fp4", "cast_fp8",
            "cast_fp8_e5m3", "cast_fp8_e8m0", "cast_int_widths", "cast_rounding", "compare_f32",
            "compare_i32_u64", "early_return", "elementwise_bf16", "elementwise_f16",
            "elementwise_f32", "elementwise_f32_flags", "elementwise_f64", "exp_approx",
            "grid_2d_persistent", "int_math_i32", "int_math_i64", "int_math_i8_u16",
            "int_math_u32", "load_store_inbounds", "load_store_order", "load_store_padding",
            "load_store_static_shape", "raw_memory", "scalar_params", "tiled_view", "tuple_params"]


@pytest.mark.parametrize("name", FIXTURES)
def test_fixtures_with_forced_chunks_match_the_interpreters_references(name, small_chunks,
                                                                       monkeypatch):
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
    import test_interp_fixtures as reference
    monkeypatch.setattr(chunks, "CHUNK_THRESHOLD", 0)
    module = reference.module(name, reference.versions(name)[-1])
    assert any(chunks.plan(f, compiler.choose_threads(module, f, 90)[0])
               for f in module.functions)
    monkeypatch.setattr(reference, "run", sim.run)
    reference.CASES[name](module)


def pointer_tile_kernel(elements: int) -> tilebc.ir.Module:
    """Through pointer tiles, masked at n: out[i] = x[i] * 3 - i for i < n, where the pointers
    are a broadcast base plus an iota of the block's elements (load_ptr / store_ptr)."""
    from tilebc.ir import tile, token
    module = new_module(tilebc.Version(13, 5))
    b = module_entry(module, "pointers", [scalar(PointerType(f32)), scalar(PointerType(f32)),
                                          scalar(i32)])
    x_ptr, out_ptr, n = b.args
    start = b.make_token()
    block, _, _ = b.get_tile_block_id()
    first = b.muli(block, b.constant(elements, "i32"))
    index = b.addi(b.iota(result_types=[tile((elements,), i32)]), b.splat(first, (elements,)))
    inside = b.cmpi(index, b.splat(n, (elements,)), comparison_predicate="less_than",
                    signedness="signed")
    values, _ = b.load_ptr_tko(b.offset(b.splat(x_ptr, (elements,)), index), inside,
                               token=start, memory_ordering_semantics="weak",
                               result_types=[tile((elements,), f32), token])
    result = b.subf(b.mulf(values, b.constant(3.0, "f32", (elements,))), b.itof(index, f32))
    b.store_ptr_tko(b.offset(b.splat(out_ptr, (elements,)), index), result, inside,
                    token=start, memory_ordering_semantics="weak")
    b.return_()
    return module


def test_pointer_tiles_with_iota_and_masks_agree_with_the_interpreter(small_chunks):
    module = pointer_tile_kernel(1024)
    assert _ptx(module).count(LOOP) == 2
    n = 2900
    x = RNG.uniform(-2, 2, 3 * 1024).astype(np.float32)
    out = np.full(3 * 1024, np.float32(5), np.float32)
    (interp, interp_out, _), (emulated, emulated_out, _) = _both(module, (3,), x, out,
                                                                 np.int32(n))
    _same_bits(interp_out, emulated_out)
    expected = out.copy()
    expected[:n] = x[:n] * np.float32(3) - np.arange(n, dtype=np.float32)
    np.testing.assert_array_equal(emulated_out, expected)
