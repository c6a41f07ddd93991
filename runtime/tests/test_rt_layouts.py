"""Distributed layouts (lowering/layout.py) and the reductions built on them: the layout tables,
register-only conversions, and reductions run in the source's layout (in-thread, shuffle
butterflies, one shared-memory step across warps) whose results broadcast back without moving
data; every kernel's emulator run equals the interpreter's, bit for bit."""
import numpy as np
import pytest

from tilebc.interp import run as interpret
from tilebc.ir import PointerType, f32, i32, scalar
from tilebc.ir.builder import new_function, new_module
from tilebc.ops.enums import ComparisonPredicate, Signedness
from tilebc_runtime import sim
from tilebc_runtime.compiler import compile as jit_compile
from tilebc_runtime.lowering.layout import Blocked, Cyclic, Sliced, distinct_slots, register_map
from tilebc_runtime.lowering.ptx import check_subset


def test_cyclic_table_is_the_default_distribution():
    table = Cyclic(8, 4).table(4)
    assert table.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    # fewer elements than threads: copies
    assert Cyclic(2, 4).table(4).tolist() == [[0, 1, 0, 1]]


def test_blocked_table_gives_each_thread_runs_of_vec_elements():
    table = Blocked(16, 2, 4).table(2)
    assert table[:, 0].tolist() == [0, 1, 2, 3, 8, 9, 10, 11]
    assert table[:, 1].tolist() == [4, 5, 6, 7, 12, 13, 14, 15]
    with pytest.raises(ValueError):
        Blocked(8, 4, 4)


def test_sliced_table_projects_the_reduced_dimension_away():
    # [4, 8] over 8 threads, cyclic: slot k of thread t holds row (8k + t) // 8 = k
    sliced = Sliced(Cyclic(32, 8), (4, 8), 1)
    assert sliced.count == 4
    assert sliced.table(8).tolist() == [[k] * 8 for k in range(4)]
    columns = Sliced(Cyclic(32, 8), (4, 8), 0)
    assert columns.table(8).tolist() == [list(range(8))] * 4


def test_lines_table_gives_each_thread_a_run_of_one_line():
    from tilebc_runtime.lowering.layout import Lines
    # [32, 16] scanned along dim 0 over 128 threads in groups of 8: thread t holds line
    # (column) t // 8, positions 4*(t % 8) .. 4*(t % 8) + 3, i.e. elements 16 apart
    layout = Lines((32, 16), 0, 128, 8)
    table = layout.table(128)
    assert table.shape == (4, 128)
    assert sorted(table.ravel().tolist()) == list(range(512))
    t = 13
    assert table[:, t].tolist() == [(4 * 5 + i) * 16 + 1 for i in range(4)]
    # fewer lines than groups side by side: the later groups hold copies
    small = Lines((8, 2), 0, 64, 4).table(64)
    assert (small[:, 0] == small[:, 8]).all() and small[:, 4].tolist() == [1, 3]
    with pytest.raises(ValueError):
        Lines((24, 4), 0, 128, 16)  # the group must divide the scanned length


def test_register_map_finds_same_thread_sources_only():
    parent = Cyclic(32, 8)
    sliced = Sliced(parent, (4, 8), 1)
    # broadcasting the row results back over the rows needs no other thread
    mapping = register_map(sliced, parent, 8, sliced.project)
    assert mapping == [0, 1, 2, 3]
    # the same 4 results in the cyclic layout of a 4-element tile are in threads 0..3 only
    assert register_map(sliced, Cyclic(4, 8), 8) is None
    assert distinct_slots(sliced, 8) == [0, 1, 2, 3]
    assert distinct_slots(Sliced(parent, (4, 8), 0), 8) == [0]


def _kernel(shape, dim, combiner, element, center):
    """out = reduce(x) along `dim`, stored flat; with `center`, out = x - broadcast(reduce(x))
    (the result broadcast back over the reduced dimension)."""
    count = int(np.prod(shape))
    module = new_module("13.5")
    b = new_function(module, "k", [scalar(PointerType(element)), scalar(i32), scalar(i32)] * 2)
    token = b.make_token()
    bid = b.get_tile_block_id()[0]
    out_count = count if center else count // shape[dim]

    def view(group, size):
        pointer, length, stride = b.args[3 * group:3 * group + 3]
        return b.partition_view(b.tensor_view(pointer, [length], [stride]), (size,))
    x, _ = b.load(view(0, count), [bid], token=token)
    x = b.reshape(x, shape)
    name, identity = combiner

    def combine(inner, lhs, rhs):
        if name == "ordered":  # associative, not commutative (the last nonzero): general path
            zero = inner.constant(0, "i32")
            nonzero = inner.cmpi(rhs, zero, comparison_predicate=ComparisonPredicate.NOT_EQUAL,
                                 signedness=Signedness.SIGNED)
            return [inner.select(nonzero, rhs, lhs)]
        extra = {"signedness": "signed"} if name == "maxi" else {}
        return [getattr(inner, name)(lhs, rhs, **extra)]
    reduced = b.reduce([x], dim, [identity], combine)
    if center:
        kept = tuple(1 if d == dim else s for d, s in enumerate(shape))
        wide = b.broadcast(b.reshape(reduced, kept), shape)
        sub = "subf" if element is f32 else "subi"
        result = getattr(b, sub)(x, wide)
        result = b.reshape(result, (count,))
    else:
        result = b.reshape(reduced, (out_count,)) if out_count > 1 else b.reshape(reduced, (1,))
    b.store(result, view(1, out_count), [bid], token=token)
    b.return_([])
    return module, count, out_count


CASES = [
    # (shape, dim, threads)
    ((16, 64), 1, 128), ((64, 16), 1, 128), ((16, 256), 1, 128), ((256,), 0, 128),
    ((64, 16), 0, 128), ((8, 4, 8), 1, 64), ((32, 32), 0, 96), ((4, 8), 1, None),
    ((64,), 0, 128), ((2, 1024), 1, 256), ((128, 2), 0, 64),
    ((8, 1), 1, None), ((1, 8), 0, None), ((1,), 0, None),  # reduced dims of length 1
]
COMBINERS = [(("addi", 0), i32), (("xori", 0), i32), (("maxi", -(1 << 31)), i32),
             (("maxf", float("-inf")), f32), (("addf", 0.0), f32), (("ordered", 0), i32)]


def _inputs(element, count, blocks, rng):
    if element is f32:
        # small integers: every order of the sum is exact, so bits must agree
        return rng.integers(-64, 64, count * blocks).astype(np.float32)
    values = rng.integers(-(1 << 20), 1 << 20, count * blocks).astype(np.int32)
    values[::3] = 0  # the last nonzero is not always the last element
    return values


@pytest.mark.parametrize("center", [False, True], ids=["store", "center"])
@pytest.mark.parametrize("combiner,element", COMBINERS, ids=[c[0][0] for c in COMBINERS])
@pytest.mark.parametrize("shape,dim,threads", CASES,
                         ids=[f"{'x'.join(map(str, s))}-d{d}-t{t}" for s, d, t in CASES])
def test_reduction_on_emulator_matches_interpreter(shape, dim, threads, combiner, element, center):
    module, count, out_count = _kernel(shape, dim, combiner, element, center)
    blocks = 2
    x = _inputs(element, count, blocks, np.random.default_rng(count + dim))
    dtype = np.float32 if element is f32 else np.int32
    expected = np.zeros(out_count * blocks, dtype)
    interpret(module, "k", (blocks,), x, expected)
    # sm_80 output too for a sample (the lowering does not depend on the arch here)
    archs = ("sm_80", "sm_90") if shape in ((16, 64), (64, 16), (8, 4, 8)) else ("sm_90",)
    for arch in archs:
        out = np.zeros_like(expected)
        sim.run(module, "k", (blocks,), x.copy(), out, threads=threads, arch=arch)
        assert out.view(np.uint32).tolist() == expected.view(np.uint32).tolist(), arch


def _ptx(shape, dim, combiner, element, center, threads):
    module, _, _ = _kernel(shape, dim, combiner, element, center)
    return jit_compile(module, entry="k", arch="sm_90", emit="ptx", threads=threads).ptx


def test_rows_within_a_warp_reduce_by_shuffles_alone():
    # [32, 32] over 128 threads: slot k of warp w holds row 4k + w, one element per lane: 5
    # butterflies per row, and the centred result needs no exchange at all
    ptx = _ptx((32, 32), 1, ("addf", 0.0), f32, True, 128)
    assert "bar.sync" not in ptx
    assert ptx.count("shfl.sync.bfly") == 5 * 8
    # commutative: no lane-order fix-up (selp) around the butterflies
    assert "selp.f32" not in ptx


def test_rows_across_warps_take_one_shared_memory_step():
    # [16, 64]: a row spans 2 warps; [4, 256]: all 4, two slots of a thread in the same row
    for shape, bflys in (((16, 64), 5 * 8), ((4, 256), 5 * 4)):
        ptx = _ptx(shape, 1, ("addf", 0.0), f32, True, 128)
        assert ptx.count("bar.sync") == 2, shape  # the warp partials written, then read back
        assert ptx.count("shfl.sync.bfly") == bflys, shape


def test_ordered_combiners_keep_lane_order_in_the_same_plan():
    # the last-nonzero combiner does not commute: [4, 32] rows lie one per warp, so the same
    # five steps run as a down tree (the lower lane's value on the left, no lane-order
    # selects: the combiner's own select per step only), one shuffle brings the result from
    # the row's first lane, and it is stored from the sliced layout: no shared memory at all
    ptx = _ptx((4, 32), 1, ("ordered", 0), i32, False, 128)
    assert ptx.count("shfl.sync.down") == 5 and ptx.count("shfl.sync.idx") == 1
    assert "shfl.sync.bfly" not in ptx
    assert ptx.count("selp.b32") == 5
    assert "bar.sync" not in ptx and "st.shared" not in ptx


def test_ordered_combiners_on_cyclic_tiles_move_into_lines_not_the_walk():
    # [64, 16] reduced along dim 0 from the default layout: no plan keeps the element order
    # cheaply there, so the tile moves once into a Lines layout (a run of neighbours per
    # thread, lanes in element order) and reduces by a down tree: no walk loop over shared
    # memory, one exchange (two barriers)
    ptx = _ptx((64, 16), 0, ("ordered", 0), i32, False, 128)
    assert "$L_reduce" not in ptx
    assert ptx.count("shfl.sync.down") == 3
    assert ptx.count("bar.sync") == 2


def _scale_kernel(tile, element, *, align, stride_div, shape_div, reduce_rows=False,
                  transpose=False):
    """y = x * 3 + 1 (or, with reduce_rows, y = x - rowmax(x)) over a 2-D tensor of dynamic
    shape and row stride, column stride 1, in tiles of `tile`; `align`, `stride_div` and
    `shape_div` are the assume div_by facts given for the base pointers, the row stride and
    the extents (None: no assumption)."""
    from tilebc.ir.attrs import DivByAttr
    module = new_module("13.5")
    # per array: pointer, rows, columns, row stride, column stride (unused: the view's column
    # stride is the static 1)
    b = new_function(module, "k", [scalar(PointerType(element))] + [scalar(i32)] * 4 +
                     [scalar(PointerType(element))] + [scalar(i32)] * 4)
    token = b.make_token()
    bid = b.get_tile_block_id()

    def assume(value, divisor):
        return value if divisor is None else b.assume(value, predicate=DivByAttr(divisor))

    def view(group):
        pointer, rows, cols, stride, _ = b.args[5 * group:5 * group + 5]
        tensor = b.tensor_view(assume(pointer, align), [assume(rows, shape_div),
                                                        assume(cols, shape_div)],
                               [assume(stride, stride_div), 1])
        return b.partition_view(tensor, tile)
    x, _ = b.load(view(0), [bid[0], bid[1]], token=token)
    if reduce_rows:
        def combine(inner, lhs, rhs):
            return [inner.maxf(lhs, rhs)]
        top = b.reduce([x], 1, [float("-inf")], combine)
        y = b.subf(x, b.broadcast(b.reshape(top, (tile[0], 1)), tile))
    else:
        kind = "f" if element is f32 else "i"
        three = b.constant(3, element.name, tile)
        one = b.constant(1, element.name, tile)
        y = getattr(b, "add" + kind)(getattr(b, "mul" + kind)(x, three), one)
    if transpose:  # a square tile, transposed
        y = b.permute(y, (1, 0))
    b.store(y, view(1), [bid[0], bid[1]], token=token)
    b.return_([])
    return module


def _run_scale(module, rows, cols, grid, threads, element, arch="sm_90"):
    """Run on both; the arrays are column windows of rows padded to a multiple of 4 elements,
    so the row stride keeps the kernel's div_by 4 promise whatever `cols` is."""
    dtype = np.float32 if element is f32 else np.int32
    rng = np.random.default_rng(rows * cols)
    pitch = -(-cols // 4) * 4
    x = rng.integers(-1000, 1000, (rows, pitch)).astype(dtype)[:, :cols]
    results = []
    for runner, extra in ((interpret, {}), (sim.run, {"threads": threads, "arch": arch})):
        y = np.zeros((rows, pitch), dtype)[:, :cols]
        runner(module, "k", grid, x, y, **extra)
        results.append(y)
    assert results[1].view(np.uint32).tolist() == results[0].view(np.uint32).tolist()
    return results[0]


@pytest.mark.parametrize("element", [f32, i32], ids=["f32", "i32"])
@pytest.mark.parametrize("rows,cols,shape_div", [(16, 64, 16), (13, 61, None), (16, 60, 4)],
                         ids=["whole", "tails", "div4"])
def test_vector_accesses_on_emulator_match_interpreter(rows, cols, shape_div, element):
    tile = (8, 32)
    module = _scale_kernel(tile, element, align=16, stride_div=4, shape_div=shape_div)
    grid = (-(-rows // tile[0]), -(-cols // tile[1]))
    for arch in ("sm_80", "sm_90"):
        y = _run_scale(module, rows, cols, grid, 64, element, arch)
        assert y.any()
    ptx = jit_compile(module, entry="k", arch="sm_90", emit="ptx", threads=64).ptx
    kind = "f32" if element is f32 else "b32"
    assert ptx.count(f"ld.global.v4.{kind}") == 1 and ptx.count(f"st.global.v4.{kind}") == 1
    # a run partly outside the tensor goes element by element; none can be when the extent
    # is a multiple of the vector
    assert (f"ld.global.{kind}" in ptx) == (shape_div is None)
    assert "bar.sync" not in ptx
    assert check_subset(ptx) == ()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_vector_accesses_link(arch):
    module = _scale_kernel((8, 32), f32, align=16, stride_div=4, shape_div=None)
    result = jit_compile(module, entry="k", arch=arch, emit="cubin", threads=64)
    assert result.cubin[:4] == b"\x7fELF" and "ld.global.v4.f32" in result.ptx


def test_vector_accesses_need_their_proofs():
    # without the base alignment, or with a row stride not known to be a multiple of 4, or a
    # tile too small to give every thread a whole vector: scalar accesses as before
    for facts, tile in ((dict(align=None, stride_div=4), (8, 32)),
                        (dict(align=16, stride_div=None), (8, 32)),
                        (dict(align=16, stride_div=4), (2, 32))):
        module = _scale_kernel(tile, f32, shape_div=16, **facts)
        ptx = jit_compile(module, entry="k", arch="sm_90", emit="ptx", threads=64).ptx
        assert ".v4." not in ptx and ".v2." not in ptx, (facts, tile)
        _run_scale(module, 16, 64, (2, 2), 64, f32)


def test_vector_loads_feed_row_reductions_in_their_layout():
    # each thread's 4-element run is reduced in-thread before the butterflies; the row maximum
    # goes back over the row in registers and the result is stored as vectors again
    module = _scale_kernel((8, 64), f32, align=16, stride_div=4, shape_div=16, reduce_rows=True)
    ptx = jit_compile(module, entry="k", arch="sm_90", emit="ptx", threads=64).ptx
    assert ptx.count("ld.global.v4.f32") == 2 and ptx.count("st.global.v4.f32") == 2
    assert "bar.sync" not in ptx
    _run_scale(module, 16, 128, (2, 2), 64, f32)


def test_rows_table_keeps_rows_in_warps_and_lanes_on_neighbours():
    from tilebc_runtime.lowering.layout import Rows
    table = Rows(256, 128, 64).table(128)  # [4, 64] over 4 warps
    rows = table // 64
    assert (rows == np.arange(128)[None, :] // 32).all()  # warp w holds row w
    assert (np.diff(table, axis=1)[:, :31] == 1).all()  # lanes on consecutive elements
    assert sorted(table.ravel().tolist()) == list(range(256))
    with pytest.raises(ValueError):
        Rows(256, 96, 64)


def test_rows_table_with_fewer_lanes_per_row():
    from tilebc_runtime.lowering.layout import Rows
    layout = Rows(256, 128, 32, 16)  # [8, 32] over 4 warps: 16 lanes per row, 2 rows a warp
    table = layout.table(128)
    assert layout.slots == 2 and sorted(table.ravel().tolist()) == list(range(256))
    t = np.arange(128)
    assert (table // 32 == (t // 16)[None, :]).all()  # both slots of a thread in one row
    assert (table[1] - table[0] == 16).all()  # a thread's slots 16 apart along its row
    assert (np.diff(table, axis=1)[:, :15] == 1).all()  # 16 lanes on neighbours (64 bytes)
    with pytest.raises(ValueError):
        Rows(256, 128, 32, 8)  # 4 rows a warp x 4 warps > 8 rows


def test_row_reductions_with_short_rows_take_fewer_shuffles():
    # [8, 32] f32 over 128 threads: Cyclic puts two rows in every thread (2 x 5 butterflies);
    # 16 lanes per row leave one combine in-thread and 4 butterflies
    module = _scale_kernel((8, 32), f32, align=None, stride_div=None, shape_div=None,
                           reduce_rows=True)
    ptx = jit_compile(module, entry="k", arch="sm_90", emit="ptx", threads=128).ptx
    assert "bar.sync" not in ptx and ptx.count("shfl.sync.bfly") == 4
    _run_scale(module, 19, 61, (3, 2), 128, f32)


def test_argmax_with_an_iota_broadcast_stays_in_the_rows_layout():
    # reduce_rows: sums, extrema and arg-extrema (the index operand is a broadcast iota, lowered
    # straight into the loaded tile's layout) of [8, 32] tiles, 16 lanes a row, all without
    # shared memory: the four single-op reductions combine in-thread, then 4 butterflies; each
    # arg-extremum (an ordered combiner: a thread's two elements of a row are 16 apart) runs a
    # down tree per slot (elements 0-15, 16-31), combines the two in order, and reads the
    # result from the row's first lane
    from pathlib import Path
    import tilebc
    root = Path(__file__).resolve().parents[2] / "fixtures" / "bytecode" / "reduce_rows"
    module = tilebc.load(str(sorted(root.glob("*13.5.tilebc"))[0]))
    entry = module.functions[0].name
    ptx = jit_compile(module, entry=entry, arch="sm_90", emit="ptx", threads=128).ptx
    assert "bar.sync" not in ptx and "st.shared" not in ptx
    assert ptx.count("shfl.sync.bfly") == 4 * 4
    assert ptx.count("shfl.sync.down") == 2 * (2 * 4 * 2)  # reductions x slots x steps x operands
    assert ptx.count("shfl.sync.idx") == 2 * 2
    x = np.random.default_rng(7).standard_normal((16, 32)).astype(np.float32)
    x[3, 5] = x[3, 9] = x[3].max() + 1  # a tie: the lower index wins
    outs = [np.zeros(16, np.float32) for _ in range(4)] + [np.zeros(16, np.int32)]
    expected = [o.copy() for o in outs]
    interpret(module, entry, (2,), x, *expected)
    sim.run(module, entry, (2,), x, *outs, threads=128)
    for index in (1, 2, 4):  # max, min, argmax + argmin: exact
        assert outs[index].view(np.uint32).tolist() == expected[index].view(np.uint32).tolist()
    for index in (0, 3):  # sum, product: reassociated (Tile IR leaves the order open)
        np.testing.assert_allclose(outs[index], expected[index], rtol=1e-5)


def test_a_second_load_and_a_weight_row_join_the_rows_layout():
    # nn_add_rms_norm: x + residual (two [4, 64] bf16 loads) squared and summed along rows, then
    # scaled by a [64] weight row broadcast over the rows: the residual load takes x's Rows
    # layout, the weight row is gathered once into it (its only shared-memory use), and each
    # row's sum is 2 slots in-thread and 5 butterflies
    from pathlib import Path
    import tilebc
    root = Path(__file__).resolve().parents[2] / "fixtures" / "bytecode" / "nn_add_rms_norm"
    module = tilebc.load(str(sorted(root.glob("*13.5.tilebc"))[0]))
    ptx = jit_compile(module, entry=module.functions[0].name, arch="sm_90", emit="ptx",
                      threads=128).ptx
    assert ptx.count("st.shared") == 1 and ptx.count("ld.shared") == 2
    assert ptx.count("shfl.sync.bfly") == 5


@pytest.mark.parametrize("tile,threads", [((4, 64), 128), ((8, 128), 64), ((2, 256), 64)])
def test_row_reductions_of_loaded_tiles_stay_in_their_warps(tile, threads):
    # no vector proof here (no alignment facts): the load picks the Rows layout because its
    # flow reduces along rows, so the centred result needs no shared memory at all
    module = _scale_kernel(tile, f32, align=None, stride_div=None, shape_div=None,
                           reduce_rows=True)
    ptx = jit_compile(module, entry="k", arch="sm_90", emit="ptx", threads=threads).ptx
    assert "bar.sync" not in ptx and ".v4." not in ptx
    _run_scale(module, 2 * tile[0] + 1, 2 * tile[1] - 3, (3, 2), threads, f32)


def test_a_load_feeding_a_permute_takes_vectors():
    # the loaded tile reaches a permute, whose exchange reads any layout that holds each element
    # once: the load takes vector accesses (Blocked), and so does the store of the permuted
    # tile, which the permute makes in Blocked (lowering/vectors.flow_vector_width)
    module = _scale_kernel((32, 32), f32, align=16, stride_div=4, shape_div=16, transpose=True)
    ptx = jit_compile(module, entry="k", arch="sm_90", emit="ptx", threads=128).ptx
    assert ptx.count("ld.global.v4.f32") == ptx.count("st.global.v4.f32") == 2
    rows = cols = 64
    dtype = np.float32
    x = np.random.default_rng(3).integers(-1000, 1000, (rows, cols)).astype(dtype)
    outs = []
    for runner, extra in ((interpret, {}), (sim.run, {"threads": 128})):
        y = np.zeros((rows, cols), dtype)
        runner(module, "k", (2, 2), x, y, **extra)
        outs.append(y)
    np.testing.assert_array_equal(outs[1], outs[0])
    tiles = (x * 3 + 1).reshape(2, 32, 2, 32).transpose(0, 2, 3, 1).transpose(0, 2, 1, 3)
    np.testing.assert_array_equal(outs[0], tiles.reshape(rows, cols))


def test_a_tile_whose_shared_memory_copy_does_not_fit_reduces_in_its_layout():
    """[32, 1024] f32 summed along dim 0 (a layer-norm backward's dW reduction): the general
    path copies the 128 KiB tile to shared memory, which sm_90 has and sm_120 (99 KiB) has
    not. There the reduction plans on the tile's own layout instead: no shared memory, and the
    emulator's sm_120 result equals the interpreter's (sm_90 keeps the general path)."""
    module, count, out_count = _kernel((32, 1024), 0, ("addf", 0.0), f32, False)
    on_120 = jit_compile(module, entry="k", arch="sm_120", emit="ptx", threads=128)
    on_90 = jit_compile(module, entry="k", arch="sm_90", emit="ptx", threads=128)
    assert on_120.kernels["k"].dynamic_shared_bytes == on_120.kernels["k"].shared_memory_bytes == 0
    assert on_90.kernels["k"].dynamic_shared_bytes >= count * 4
    x = _inputs(f32, count, 1, np.random.default_rng(3))
    expected = np.zeros(out_count, np.float32)
    interpret(module, "k", (1,), x, expected)
    out = np.zeros_like(expected)
    sim.run(module, "k", (1,), x.copy(), out, threads=128, arch="sm_120")
    assert out.view(np.uint32).tolist() == expected.view(np.uint32).tolist()
