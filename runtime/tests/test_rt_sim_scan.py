"""scan on the emulator (lowering/reductions.py `_scan`, log-step Hillis-Steele) gives the
interpreter's bits: float combiners, including a non-associative one that exposes any change of
combine order, forward and reverse, along every dimension of 1-3-d tiles, with lines inside a
warp (shuffles), across warps (shared memory) and in a Lines layout (a run of positions per
thread, shuffles across lanes), tiles smaller and larger than the CTA, and a
two-operand scan; on every arch the JIT emits for. The code is log-step: no loop per element.
Integer scans with one commutative op take the Lines layout path (same bits in any order)."""
import numpy as np
import pytest

from tilebc.interp import run as interpret
from tilebc.ir import PointerType, f32, i32, scalar
from tilebc.ir.builder import new_function, new_module
from tilebc.ops.enums import ComparisonPredicate, Signedness

from tilebc_runtime import sim
from tilebc_runtime.compiler import compile as jit_compile
from tilebc_runtime.lowering.layout import Lines

ARCHS = ("sm_80", "sm_90", "sm_100", "sm_120")
_GT, _SIGNED = ComparisonPredicate.GREATER_THAN, Signedness.SIGNED

# (shape, dim, reverse, threads per CTA or None for the JIT's choice)
CASES = [
    ((32,), 0, False, None), ((32,), 0, True, None), ((8,), 0, False, None),
    ((64,), 0, False, None), ((64,), 0, True, None), ((1024,), 0, False, 128),
    ((1024,), 0, True, 256), ((4, 8), 1, False, None), ((4, 8), 0, True, None),
    ((8, 4, 2), 1, False, None), ((8, 4, 2), 1, True, 64), ((2, 4, 8), 2, True, None),
    ((16, 64), 1, False, 128), ((64, 16), 0, False, 128), ((128, 2), 0, True, 64),
    # lines held by the lanes of a warp, a run per thread (_lines_hillis)
    ((4, 64), 0, False, 128), ((8, 32), 0, True, 128), ((2, 256), 1, True, 128),
    ((512,), 0, False, 64), ((16, 4, 8), 0, False, 64), ((2, 128), 1, False, 64),
]


def _kernel(shape, dim, reverse, pair):
    """out = scan(x) along `dim` with combine(l, r) = l * 0.75 + r (not associative, so the
    combine order shows in the bits); `pair` adds an i32 max scan of y as a second operand."""
    count = int(np.prod(shape))
    module = new_module("13.5")
    params = [scalar(PointerType(f32)), scalar(i32), scalar(i32)] * 2
    if pair:
        params += [scalar(PointerType(i32)), scalar(i32), scalar(i32)] * 2
    b = new_function(module, "scan_kernel", params)
    token = b.make_token()
    bid = b.get_tile_block_id()[0]

    def tiles(group):
        pointer, length, stride = b.args[3 * group:3 * group + 3]
        return b.partition_view(b.tensor_view(pointer, [length], [stride]), (count,))
    x, _ = b.load(tiles(0), [bid], token=token)
    operands, identities = [b.reshape(x, shape)], [0.0]
    if pair:
        y, _ = b.load(tiles(2), [bid], token=token)
        operands.append(b.reshape(y, shape))
        identities.append(-(1 << 31))

    def combine(inner, *args):
        scaled = inner.mulf(args[0], inner.constant(0.75, "f32"))
        out = [inner.addf(scaled, args[1])]
        if pair:
            greater = inner.cmpi(args[2], args[3], comparison_predicate=_GT,
                                 signedness=_SIGNED)
            out.append(inner.select(greater, args[2], args[3]))
        return out
    results = b.scan(operands, dim, identities, combine, reverse=reverse)
    results = results if isinstance(results, tuple) else (results,)
    token = b.store(b.reshape(results[0], (count,)), tiles(1), [bid], token=token)
    if pair:
        b.store(b.reshape(results[1], (count,)), tiles(3), [bid], token=token)
    b.return_([])
    return module


def _inputs(count, blocks, pair, rng):
    x = rng.standard_normal(count * blocks).astype(np.float32)
    arrays = [x, np.zeros_like(x)]
    if pair:
        y = rng.integers(-1000, 1000, count * blocks).astype(np.int32)
        arrays += [y, np.zeros_like(y)]
    return arrays


@pytest.mark.parametrize("shape,dim,reverse,threads", CASES,
                         ids=[f"{'x'.join(map(str, s))}-d{d}{'-rev' if r else ''}"
                              f"{'-t' + str(t) if t else ''}" for s, d, r, t in CASES])
def test_scan_on_emulator_matches_interpreter_bits(shape, dim, reverse, threads):
    rng = np.random.default_rng(5)
    count = int(np.prod(shape))
    pair = len(shape) > 1
    module = _kernel(shape, dim, reverse, pair)
    blocks = 2
    reference = _inputs(count, blocks, pair, rng)
    inputs = [a.copy() for a in reference]
    interpret(module, "scan_kernel", (blocks,), *reference)
    archs = ARCHS if shape in ((64,), (8, 4, 2)) else ("sm_90",)
    for arch in archs:
        out = [a.copy() for a in inputs]
        sim.run(module, "scan_kernel", (blocks,), *out, arch=arch, threads=threads)
        assert out[1].view(np.uint32).tolist() == reference[1].view(np.uint32).tolist(), arch
        if pair:
            np.testing.assert_array_equal(out[3], reference[3])
    result = jit_compile(module, entry="scan_kernel", arch="sm_90", emit="ptx", threads=threads)
    cta = result.kernels["scan_kernel"].threads_per_cta
    slots = {1 if count <= cta else -(-count // cta)}
    try:  # or the slots of the Lines layout _lines_hillis scans in
        slots.add(Lines(shape, dim, cta, min(shape[dim], 32)).slots)
    except ValueError:
        pass
    # log-step: one combine (one mul.rn.f32) per step and slot, straight-line (no walk loop)
    steps = (shape[dim] - 1).bit_length()
    assert result.ptx.count("mul.rn.f32") in {steps * n for n in slots}
    assert [line.strip() for line in result.ptx.splitlines() if "bra" in line] == \
        ["bra.uni $L_exit_1;"]


# integer scans with one commutative op run in a Lines layout (serial runs, lane shuffles, one
# pass across warps): (shape, dim, reverse, threads, op)
INT_CASES = [
    ((32, 16), 0, False, 128, "addi"), ((32, 16), 0, True, 128, "maxi"),
    ((16, 8), 0, False, None, "addi"), ((1024,), 0, False, 128, "addi"),
    ((1024,), 0, True, 256, "xori"), ((64, 16), 0, False, 128, "mini"),
    ((128, 2), 0, True, 64, "addi"), ((8, 4, 2), 1, False, 64, "addi"),
    ((4, 256), 1, True, 128, "muli"), ((2, 512, 2), 1, False, 64, "maxi"),
    ((256, 4), 0, False, 128, "andi"), ((8, 3), 0, False, 32, "addi"),
]


def _int_kernel(shape, dim, reverse, name):
    count = int(np.prod(shape))
    module = new_module("13.5")
    b = new_function(module, "iscan", [scalar(PointerType(i32)), scalar(i32), scalar(i32)] * 2)
    token = b.make_token()
    bid = b.get_tile_block_id()[0]

    def tiles(group):
        pointer, length, stride = b.args[3 * group:3 * group + 3]
        return b.partition_view(b.tensor_view(pointer, [length], [stride]), (count,))
    x, _ = b.load(tiles(0), [bid], token=token)
    identity = {"addi": 0, "xori": 0, "muli": 1, "maxi": -(1 << 31), "mini": (1 << 31) - 1,
                "andi": -1}[name]
    extra = {"maxi": {"signedness": _SIGNED}, "mini": {"signedness": _SIGNED}}.get(name, {})

    def combine(inner, lhs, rhs):
        return [getattr(inner, name)(lhs, rhs, **extra)]
    result = b.scan([b.reshape(x, shape)], dim, [identity], combine, reverse=reverse)
    result = result[0] if isinstance(result, tuple) else result
    b.store(b.reshape(result, (count,)), tiles(1), [bid], token=token)
    b.return_([])
    return module


@pytest.mark.parametrize("shape,dim,reverse,threads,name", INT_CASES,
                         ids=[f"{'x'.join(map(str, s))}-d{d}{'-rev' if r else ''}-t{t}-{n}"
                              for s, d, r, t, n in INT_CASES])
def test_integer_scan_in_lines_layout_matches_interpreter(shape, dim, reverse, threads, name):
    rng = np.random.default_rng(7)
    count = int(np.prod(shape))
    module = _int_kernel(shape, dim, reverse, name)
    blocks = 2
    low, high = (-3, 4) if name == "muli" else (-1000, 1000)
    x = rng.integers(low, high, count * blocks).astype(np.int32)
    if name == "andi":
        x = ~rng.integers(0, 1 << 20, count * blocks).astype(np.int32)
    reference = [x.copy(), np.zeros_like(x)]
    interpret(module, "iscan", (blocks,), *reference)
    out = [x.copy(), np.zeros_like(x)]
    sim.run(module, "iscan", (blocks,), *out, arch="sm_90", threads=threads)
    np.testing.assert_array_equal(out[1], reference[1])


@pytest.mark.parametrize("shape,reverse", [((32, 16), False), ((64, 16), True)])
def test_lines_exchange_is_free_of_bank_conflicts(shape, reverse):
    # a scan along dim 0 of a row-major tile: the lanes of a line read elements run * inner
    # words apart (a multiple of 32 words: one bank); the padded buffer spreads them
    count = int(np.prod(shape))
    module = _int_kernel(shape, 0, reverse, "addi")
    x = np.random.default_rng(3).integers(-1000, 1000, count).astype(np.int32)
    reference = [x.copy(), np.zeros_like(x)]
    interpret(module, "iscan", (1,), *reference)
    out = [x.copy(), np.zeros_like(x)]
    profile = sim.Profile()
    sim.run(module, "iscan", (1,), *out, arch="sm_90", threads=128, profile=profile)
    np.testing.assert_array_equal(out[1], reference[1])
    report = profile.report()
    assert report["shared_wavefronts"] > 0
    assert report["shared_wavefronts"] == report["shared_ideal_wavefronts"]
