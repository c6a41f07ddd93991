"""Per-op interpreter tests on kernels built with tilebc's builder, memory-check tests with planted
faults, and the table-coverage check (every body op is implemented or explicitly refused)."""
import itertools
from fractions import Fraction

import types

import numpy as np
import pytest

from op_checklist import gaps, interpreter_gap

import tilebc
from tilebc.interp import AssumptionError, MemoryCheckError, Pointer, UnsupportedError, run
from tilebc.interp.numeric_ops import memory_dtype
from tilebc.interp.registry import IMPLEMENTATIONS, REFUSALS
from tilebc.ir import (BoundedAttr, DenseElementsAttr, Module, PartitionViewType, PointerType,
                       TensorViewType, scalar, tile, token)
from tilebc.ir.builder import new_function
from tilebc.ir.types import ELEMENT_TYPES, i64
from tilebc.ops import MemoryOrderingSemantics, RoundingMode, Signedness
from tilebc.ops.table import BODY_OPS

WEAK = {"memory_ordering_semantics": MemoryOrderingSemantics.WEAK}
RNG = np.random.default_rng(7)


def test_every_body_op_is_implemented_or_refused():
    missing = gaps(BODY_OPS, [interpreter_gap])
    assert not missing, "\n".join(missing)
    for mnemonic, reason in REFUSALS.items():
        assert len(reason) > 20, f"refusal of {mnemonic} must say why"


def _load(b, pointer, tile_type):
    view_type = TensorViewType(tile_type.element, tile_type.shape,
                               tuple(int(np.prod(tile_type.shape[d + 1:])) for d in
                                     range(len(tile_type.shape))))
    view = b.op("make_tensor_view", [pointer, [], []], [view_type])
    part = b.op("make_partition_view", [view],
                [PartitionViewType(tile_type.shape, view_type, tuple(range(tile_type.rank)))])
    zeros = [_i32(b, 0) for _ in tile_type.shape]
    value, _ = b.op("load_view_tko", [part, zeros, None], [tile_type, token], WEAK)
    return value, part, zeros


def _i32(b, value):
    return b.op("constant", [], [scalar(ELEMENT_TYPES["i32"])],
                {"value": DenseElementsAttr(scalar(ELEMENT_TYPES["i32"]),
                                            int(value & 0xFFFFFFFF).to_bytes(4, "little"))})


def op_kernel(mnemonic, input_types, result_types, attrs=None):
    """A module whose entry loads each input tile from an array, applies one op and stores each
    result into an array: parameters are one pointer per input, then one per result."""
    module = Module(version=tilebc.Version(13, 5))
    params, pointer_index = [], []
    for t in list(input_types) + list(result_types):
        # cuTile's array convention: pointer, then shape and strides (unused: the views are static)
        pointer_index.append(len(params))
        params += [scalar(PointerType(t.element))] + [scalar(ELEMENT_TYPES["i32"])] * (2 * t.rank)
    b = new_function(module, "k", params)
    pointers = [b.block.args[i] for i in pointer_index]
    inputs = [_load(b, pointers[i], t)[0] for i, t in enumerate(input_types)]
    results = b.op(mnemonic, inputs, list(result_types), attrs)
    results = results if isinstance(results, tuple) else (results,)
    for k, (value, result_type) in enumerate(zip(results, result_types)):
        _, part, zeros = _load(b, pointers[len(input_types) + k], result_type)
        b.op("store_view_tko", [value, part, zeros, None], [token], WEAK)
    b.op("return", [[]])
    return module


def run_op(mnemonic, inputs, result_elements, attrs=None, result_shape=None):
    """Apply one op to numpy inputs through the interpreter; returns the result arrays."""
    input_types = [tile(x.shape, ELEMENT_TYPES[name]) for x, name in inputs]
    shape = result_shape if result_shape is not None else inputs[0][0].shape
    result_types = [tile(shape, ELEMENT_TYPES[name]) for name in result_elements]
    module = op_kernel(mnemonic, input_types, result_types, attrs)
    outputs = [np.zeros(shape, memory_dtype(t.element)) for t in result_types]
    run(module, "k", (1,), *[np.ascontiguousarray(x) for x, _ in inputs], *outputs)
    return outputs


# ------------------------------------------------------------------------ float rounding


def _round_exact(exact: Fraction, mode: RoundingMode) -> np.float32:
    """Round a rational to f32 by brute force (no float64 shortcuts)."""
    guess = np.float32(float(exact))
    candidates = [np.nextafter(guess, np.float32(-np.inf)), guess,
                  np.nextafter(guess, np.float32(np.inf))]
    below = max((c for c in candidates if Fraction(float(c)) <= exact), key=float)
    above = min((c for c in candidates if Fraction(float(c)) >= exact), key=float)
    if below == above:
        return below
    if mode is RoundingMode.ZERO:
        return below if exact > 0 else above
    if mode is RoundingMode.NEGATIVE_INF:
        return below
    if mode is RoundingMode.POSITIVE_INF:
        return above
    low_gap, high_gap = exact - Fraction(float(below)), Fraction(float(above)) - exact
    if low_gap != high_gap:
        return below if low_gap < high_gap else above
    return below if (below.view(np.uint32) & 1) == 0 else above


_EXACT = {"addf": lambda a, b: a + b, "subf": lambda a, b: a - b, "mulf": lambda a, b: a * b,
          "divf": lambda a, b: a / b}
_MODES = [RoundingMode.NEAREST_EVEN, RoundingMode.ZERO, RoundingMode.NEGATIVE_INF,
          RoundingMode.POSITIVE_INF]


@pytest.mark.parametrize("mnemonic,mode", list(itertools.product(_EXACT, _MODES)),
                         ids=lambda v: getattr(v, "keyword", v))
def test_float_binary_rounding_modes_are_exact(mnemonic, mode):
    a = (RNG.standard_normal(64) * 10.0 ** RNG.integers(-3, 4, 64)).astype(np.float32)
    b = (RNG.standard_normal(64) * 10.0 ** RNG.integers(-3, 4, 64)).astype(np.float32)
    (out,) = run_op(mnemonic, [(a, "f32"), (b, "f32")], ["f32"], {"rounding_mode": mode})
    expected = [_round_exact(_EXACT[mnemonic](Fraction(float(x)), Fraction(float(y))), mode)
                for x, y in zip(a, b)]
    np.testing.assert_array_equal(out, np.array(expected, np.float32))


@pytest.mark.parametrize("mode", _MODES, ids=lambda m: m.keyword)
def test_fma_and_sqrt_rounding_modes_are_exact(mode):
    a, b, c = (RNG.standard_normal(64).astype(np.float32) for _ in range(3))
    (out,) = run_op("fma", [(a, "f32"), (b, "f32"), (c, "f32")], ["f32"], {"rounding_mode": mode})
    expected = [_round_exact(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)), mode)
                for x, y, z in zip(a, b, c)]
    np.testing.assert_array_equal(out, np.array(expected, np.float32))
    positive = np.abs(a) + np.float32(0.1)
    (root,) = run_op("sqrt", [(positive, "f32")], ["f32"], {"rounding_mode": mode})
    for value, got in zip(positive, root):
        exact = Fraction(float(value))
        # got is the right rounding iff exact lies on the right side of got^2
        if mode is RoundingMode.POSITIVE_INF:
            assert Fraction(float(got)) ** 2 >= exact > Fraction(float(np.nextafter(got, 0))) ** 2
        elif mode in (RoundingMode.ZERO, RoundingMode.NEGATIVE_INF):
            assert Fraction(float(got)) ** 2 <= exact < \
                Fraction(float(np.nextafter(got, np.float32(np.inf)))) ** 2
        else:
            assert got == np.float32(np.sqrt(np.float64(value)))


def test_flush_to_zero_flushes_subnormal_inputs_and_results():
    tiny = np.array([1e-40, -1e-40, 1e-30, 2.0], np.float32)
    one = np.ones(4, np.float32)
    (out,) = run_op("mulf", [(tiny, "f32"), (one, "f32")], ["f32"], {"flush_to_zero": True})
    np.testing.assert_array_equal(out, np.array([0.0, -0.0, 1e-30, 2.0], np.float32))
    assert np.signbit(out[1])
    (plain,) = run_op("mulf", [(tiny, "f32"), (one, "f32")], ["f32"])
    np.testing.assert_array_equal(plain, tiny)


@pytest.mark.parametrize("mnemonic", ["maxf", "minf"])
def test_maxf_minf_nan_handling(mnemonic):
    a = np.array([np.nan, 1.0, -0.0, 3.0], np.float32)
    b = np.array([2.0, np.nan, 0.0, 1.0], np.float32)
    (quiet,) = run_op(mnemonic, [(a, "f32"), (b, "f32")], ["f32"])
    (loud,) = run_op(mnemonic, [(a, "f32"), (b, "f32")], ["f32"], {"propagate_nan": True})
    pick = np.fmax if mnemonic == "maxf" else np.fmin
    np.testing.assert_array_equal(quiet[[0, 1, 3]], pick(a, b)[[0, 1, 3]])
    assert np.signbit(quiet[2]) == (mnemonic == "minf")
    assert np.isnan(loud[0]) and np.isnan(loud[1]) and loud[3] == pick(a, b)[3]


# comparisons: every predicate, ordering and signedness is in test_interp_attrs.py


# --------------------------------------------------------------------------------- integers


@pytest.mark.parametrize("rounding", [RoundingMode.ZERO, RoundingMode.NEGATIVE_INF,
                                      RoundingMode.POSITIVE_INF], ids=lambda m: m.keyword)
def test_divi_signed_roundings_and_remi(rounding):
    a = np.array([7, -7, 7, -7, 6, 0], np.int32)
    b = np.array([2, 2, -2, -2, 3, 5], np.int32)
    (out,) = run_op("divi", [(a, "i32"), (b, "i32")], ["i32"],
                    {"signedness": Signedness.SIGNED, "rounding": rounding})
    exact = [Fraction(int(x), int(y)) for x, y in zip(a, b)]
    import math
    fn = {RoundingMode.ZERO: lambda q: int(q), RoundingMode.NEGATIVE_INF: math.floor,
          RoundingMode.POSITIVE_INF: math.ceil}[rounding]
    np.testing.assert_array_equal(out, [fn(q) for q in exact])
    (rem,) = run_op("remi", [(a, "i32"), (b, "i32")], ["i32"], {"signedness": Signedness.SIGNED})
    np.testing.assert_array_equal(rem, [int(math.fmod(int(x), int(y))) for x, y in zip(a, b)])


def test_unsigned_integer_ops_read_bits_as_unsigned():
    a = np.array([-2, 10, -1], np.int32)
    b = np.array([3, -3, 2], np.int32)
    ua, ub = a.view(np.uint32).astype(np.uint64), b.view(np.uint32).astype(np.uint64)
    unsigned = {"signedness": Signedness.UNSIGNED}
    (div,) = run_op("divi", [(a, "i32"), (b, "i32")], ["i32"], dict(unsigned))
    np.testing.assert_array_equal(div.view(np.uint32), ua // ub)
    (rem,) = run_op("remi", [(a, "i32"), (b, "i32")], ["i32"], dict(unsigned))
    np.testing.assert_array_equal(rem.view(np.uint32), ua % ub)
    (high,) = run_op("mulhii", [(a, "i32"), (b, "i32")], ["i32"])
    np.testing.assert_array_equal(high.view(np.uint32), (ua * ub) >> np.uint64(32))
    (mx,) = run_op("maxi", [(a, "i32"), (b, "i32")], ["i32"], dict(unsigned))
    np.testing.assert_array_equal(mx.view(np.uint32), np.maximum(ua, ub))
    (shifted,) = run_op("shri", [(a, "i32"), (np.array([1, 40, 31], np.int32), "i32")], ["i32"],
                        dict(unsigned))
    np.testing.assert_array_equal(shifted.view(np.uint32), [ua[0] >> 1, 0, ua[2] >> 31])


@pytest.mark.parametrize("rounding", [RoundingMode.NEAREST_INT_TO_ZERO, RoundingMode.NEAREST_EVEN,
                                      RoundingMode.NEGATIVE_INF, RoundingMode.POSITIVE_INF,
                                      RoundingMode.NEAREST_AWAY], ids=lambda m: m.keyword)
def test_ftoi_rounding_modes_and_saturation(rounding):
    x = np.array([2.5, -2.5, 3.7, -3.2, 1e10, -1e10, np.nan, 0.5], np.float32)
    (out,) = run_op("ftoi", [(x, "f32")], ["i32"],
                    {"signedness": Signedness.SIGNED, "rounding_mode": rounding,
                     "saturating": True})
    import math
    fn = {RoundingMode.NEAREST_INT_TO_ZERO: math.trunc, RoundingMode.NEAREST_EVEN: round,
          RoundingMode.NEGATIVE_INF: math.floor, RoundingMode.POSITIVE_INF: math.ceil,
          RoundingMode.NEAREST_AWAY: lambda v: int(math.copysign(math.floor(abs(v) + 0.5), v))}
    expected = [0 if math.isnan(v) else max(-2 ** 31, min(2 ** 31 - 1, fn[rounding](float(v))))
                for v in x]
    np.testing.assert_array_equal(out, expected)


# ------------------------------------------------------------------------- unsupported ops


def test_multimem_ops_are_refused_with_a_reason():
    from handbuilt import multimem_ops
    module, _ = multimem_ops()
    x = np.zeros(64, np.float32)
    with pytest.raises(UnsupportedError, match="multimem_load_reduce_view_tko is not supported"):
        run(module, "multimem_ops", (1,), Pointer(x))


# ------------------------------------------------------------------------- memory checking


def _pointer_kernel(build_address, element="f32", count=1):
    """entry(ptr) { p = build_address(b, ptr); load p; }"""
    module = Module(version=tilebc.Version(13, 5))
    element_type = ELEMENT_TYPES[element]
    b = new_function(module, "k", [scalar(PointerType(element_type))])
    pointer = build_address(b, b.block.args[0])
    b.op("load_ptr_tko", [pointer, None, None, None], [scalar(element_type), token], WEAK)
    b.op("return", [[]])
    return module


def test_out_of_bounds_load_names_op_block_and_address():
    def past_end(b, pointer):
        return b.op("offset", [pointer, _i32(b, 16)], [scalar(PointerType(ELEMENT_TYPES["f32"]))])
    module = _pointer_kernel(past_end)
    x = np.zeros(16, np.float32)
    with pytest.raises(MemoryCheckError) as error:
        run(module, "k", (2,), Pointer(x))
    assert error.value.op.name == "load_ptr_tko"
    assert error.value.block_id == (0, 0, 0)
    assert "outside every array" in str(error.value) and "0 bytes past the end" in str(error.value)
    assert f"address 0x{error.value.address:x}" in str(error.value)


def test_misaligned_load_is_reported():
    def misalign(b, pointer):
        as_int = b.op("ptr_to_int", [pointer], [scalar(i64)])
        two = b.op("constant", [], [scalar(i64)],
                   {"value": DenseElementsAttr(scalar(i64), (2).to_bytes(8, "little"))})
        moved = b.op("addi", [as_int, two], [scalar(i64)])
        return b.op("int_to_ptr", [moved], [scalar(PointerType(ELEMENT_TYPES["f32"]))])
    module = _pointer_kernel(misalign)
    with pytest.raises(MemoryCheckError, match="misaligned load"):
        run(module, "k", (1,), Pointer(np.zeros(4, np.float32)))
    run(module, "k", (1,), Pointer(np.zeros(4, np.float32)), check_memory=False)  # checks off: no report


def test_uninitialised_scratch_read_is_reported():
    module = Module(version=tilebc.Version(13, 5))
    f32 = ELEMENT_TYPES["f32"]
    b = new_function(module, "k", [])
    scratch = b.op("alloca", [], [scalar(PointerType(f32))], {"num_elem": 4, "alignment": 16})
    b.op("load_ptr_tko", [scratch, None, None, None], [scalar(f32), token], WEAK)
    b.op("return", [[]])
    with pytest.raises(MemoryCheckError, match="uninitialised memory in alloca"):
        run(module, "k", (1,))


def test_uninitialised_argument_read_is_reported_on_a_fixture():
    path = "fixtures/bytecode/raw_memory/raw_memory-13.5.tilebc"
    x, y = np.ones(100, np.float32), np.zeros(100, np.float32)
    with pytest.raises(MemoryCheckError, match="uninitialised") as error:
        run(path, "raw_memory", (1,), x, y, 10, uninitialized=[0])
    assert error.value.offset is not None  # the op's byte offset in the file
    assert "raw_memory-13.5.tilebc" in str(error.value)
    run(path, "raw_memory", (1,), x, y, 10, uninitialized=[1])  # only written: fine


def test_unchecked_gather_past_the_end_is_caught_on_a_fixture():
    path = "fixtures/bytecode/gather_scatter/gather_scatter-13.5.tilebc"
    x = np.ones(64, np.float32)
    idx = np.arange(64, dtype=np.int32)  # idx + 1 reaches x[64]: the unchecked gather faults
    y = np.zeros(128, np.float32)
    with pytest.raises(MemoryCheckError) as error:
        run(path, "gather_scatter", (1,), x, idx, y, 64)
    assert error.value.op.name == "load_ptr_tko"
    assert "past the end of argument 0" in str(error.value)


def test_assume_is_checked_only_when_asked():
    module = Module(version=tilebc.Version(13, 5))
    i32 = ELEMENT_TYPES["i32"]
    b = new_function(module, "k", [scalar(i32)])
    b.op("assume", [b.block.args[0]], [scalar(i32)], {"predicate": BoundedAttr(0, None)})
    b.op("return", [[]])
    run(module, "k", (1,), -5)
    with pytest.raises(AssumptionError, match="below the lower bound 0"):
        run(module, "k", (1,), -5, check_assumptions=True)


# ----------------------------------------------------------------------------------- CLI


def test_cli_runs_a_fixture_and_writes_npz(tmp_path):
    from tilebc.cli import main
    x = np.arange(100, dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out.npz"
    code = main(["run", "fixtures/bytecode/tiled_view/tiled_view-13.5.tilebc", "--entry",
                 "tiled_view_basic", "--grid", "4", "--arg", str(tmp_path / "x.npy"),
                 "--arg", "zeros:float32:100", "--out", str(out)])
    assert code == 0
    np.testing.assert_array_equal(np.load(out)["arg1"], x + 4)


def test_cli_reports_a_fault_and_fails(tmp_path, capsys):
    from tilebc.cli import main
    code = main(["run", "fixtures/bytecode/gather_scatter/gather_scatter-13.5.tilebc",
                 "--grid", "1", "--arg", "zeros:float32:64", "--arg", "zeros:int32:64",
                 "--arg", "zeros:float32:64", "--arg", "64"])
    assert code == 0  # idx all zero: every access in bounds
    code = main(["run", "fixtures/bytecode/gather_scatter/gather_scatter-13.5.tilebc",
                 "--grid", "1", "--arg", "zeros:float32:1", "--arg", "zeros:int32:64",
                 "--arg", "zeros:float32:64", "--arg", "64"])
    assert code == 1
    assert "outside every array bound to the kernel" in capsys.readouterr().err


def test_cli_run_errors_name_the_file_and_read_stdin(tmp_path, capsys, monkeypatch):
    import io
    import sys
    from tilebc.cli import main
    path = "fixtures/bytecode/gather_scatter/gather_scatter-13.5.tilebc"
    assert main(["run", path, "--grid", "1", "--arg", "zeros:float32:64"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"tilebc run: error: {path}: ") and "arguments" in err
    assert main(["run", path, "--arg", "rand:nonsense:4"]) == 2
    assert capsys.readouterr().err.startswith("tilebc run: error: ")
    data = open(path, "rb").read()
    monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(buffer=io.BytesIO(data)))
    assert main(["run", "-", "--grid", "1", "--arg", "zeros:float32:64", "--arg",
                 "zeros:int32:64", "--arg", "zeros:float32:64", "--arg", "64"]) == 0
    monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(buffer=io.BytesIO(data[:50])))
    assert main(["run", "-", "--grid", "1"]) == 1
    assert capsys.readouterr().err.startswith("tilebc run: error: <stdin>: offset 0x")
