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
    out = np.zeros_like(expected)
    sim.run(module, "k", (blocks,), x.copy(), out, threads=threads)
    assert out.view(np.uint32).tolist() == expected.view(np.uint32).tolist()


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
    # butterflies run, each with the lane-order fix-up (the upper lane's partner goes left);
    # only the result's move to the Cyclic layout for the store goes through shared memory
    ptx = _ptx((4, 32), 1, ("ordered", 0), i32, False, 128)
    assert ptx.count("shfl.sync.bfly") == 5
    assert ptx.count("selp.b32") >= 2 * 5
    assert ptx.count("bar.sync") == 2
