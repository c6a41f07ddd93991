"""Float conversions through the JIT's PTX on the emulator are bit-identical to the CPU interpreter
(tilebc.numeric.convert) on adversarial inputs: random bit patterns (NaNs with payloads, infinities,
subnormals), exact ties of the target format and values next to them.

The fixture kernels (cast_*) run with such inputs, and hand-built ftof kernels cover the pairs and
rounding modes no fixture has (f32 -> tf32 with each mode, f64 -> f16/bf16/tf32/f8, which must
round once from the f64 value)."""
import re
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from tilebc.interp import run as interpret
from tilebc.ir import PointerType, i32, scalar
from tilebc.ir.builder import new_function, new_module
from tilebc.ir.types import ELEMENT_TYPES

from tilebc_runtime import sim
from tilebc_runtime.compiler import compile as jit_compile

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
import test_interp_fixtures as reference  # noqa: E402

N = 64 * 16
RNG = np.random.default_rng(13)


def _edge_f64(n=N):
    """f64 values: specials, random patterns, values on and around f32/tf32/f16/bf16/f8 ties."""
    values = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 5e-324, 1e-310, 1e300, -1e300,
              65504.0, 65520.0, 65519.99, 3.4028235e38, 3.5e38, 448.0, 464.0, 57344.0, 61440.0]
    out = np.empty(n, np.float64)
    out[:len(values)] = values
    k = len(values)
    rest = n - k
    quarter = rest // 4
    # random f64 bit patterns
    out[k:k + quarter] = RNG.integers(0, 2 ** 64, quarter, dtype=np.uint64).view(np.float64)
    # random values in a wide normal range
    out[k + quarter:k + 2 * quarter] = np.ldexp(RNG.uniform(1, 2, quarter),
                                                RNG.integers(-140, 130, quarter)) * \
        RNG.choice([-1.0, 1.0], quarter)
    # exact ties of formats with 10, 7, 3 and 2 fraction bits, and one f64 ulp either side
    count = rest - 2 * quarter
    fraction_bits = RNG.choice([10, 7, 3, 2, 23], count)
    mantissa = RNG.integers(0, 2 ** 20, count).astype(np.float64)
    ties = np.ldexp(1.0 + (np.floor(mantissa / np.exp2(20 - fraction_bits)) + 0.5) /
                    np.exp2(fraction_bits), RNG.integers(-20, 20, count))
    nudge = RNG.choice([-1, 0, 1], count)
    ties = np.where(nudge == 0, ties, np.nextafter(ties, np.where(nudge > 0, np.inf, -np.inf)))
    out[k + 2 * quarter:] = ties * RNG.choice([-1.0, 1.0], count)
    return out


def _edge_f32(n=N):
    with np.errstate(over="ignore", invalid="ignore"):
        values = _edge_f64(n).astype(np.float32)
    values[-n // 4:] = RNG.integers(0, 2 ** 32, n // 4, dtype=np.uint64).astype(np.uint32) \
        .view(np.float32)
    return values


def _same_bits(expected, actual, inputs):
    expected_bits = expected.view(f"u{expected.dtype.itemsize}")
    actual_bits = actual.view(f"u{actual.dtype.itemsize}")
    bad = np.nonzero(expected_bits != actual_bits)[0]
    assert len(bad) == 0, (f"{len(bad)} results differ, e.g. input {inputs[bad[:4]]!r} "
                           f"({inputs.view(f'u{inputs.dtype.itemsize}')[bad[:4]]}): interpreter "
                           f"{expected_bits[bad[:4]]}, emulator {actual_bits[bad[:4]]}")


def _run_both(module, entry, grid, *arrays):
    mine = [a.copy() for a in arrays]
    theirs = [a.copy() for a in arrays]
    interpret(module, entry, grid, *theirs)
    sim.run(module, entry, grid, *mine)
    return theirs, mine


# ------------------------------------------------------------------------- fixture kernels

FIXTURE_CASES = [
    # (fixture, entry index, input dtype, output dtypes)
    ("cast_fp4", 0, np.float32, [np.float32]),
    ("cast_fp8_e5m3", 0, np.float32, [np.float32]),
    ("cast_fp8_e8m0", 0, np.float32, [ml_dtypes.float8_e8m0fnu, np.float32]),
    ("cast_fp8", 0, np.float32, [ml_dtypes.float8_e4m3fn, np.float32]),
    ("cast_rounding", 0, np.float32, [np.float16]),
    ("cast_float_widths", 0, np.float32, [np.float16]),
    ("cast_float_widths", 2, np.float32, [ml_dtypes.bfloat16]),
    ("cast_float_widths", 3, np.float64, [np.float32]),
    ("cast_float_widths", 5, np.float32, [np.float32]),  # f32 -> tf32 array
]


@pytest.mark.parametrize("name,index,source,outputs", FIXTURE_CASES,
                         ids=[f"{c[0]}-{c[1]}" for c in FIXTURE_CASES])
def test_fixture_conversions_match_the_interpreter_bit_for_bit(name, index, source, outputs):
    module = reference.module(name, reference.versions(name)[-1])
    with np.errstate(over="ignore", invalid="ignore"):
        x = (_edge_f64() if source == np.float64 else _edge_f32()).astype(source)
    arrays = [x] + [np.zeros(N, dtype) for dtype in outputs]
    theirs, mine = _run_both(module, reference.entry(module, index), (N // 64,), *arrays)
    for expected, actual in zip(theirs[1:], mine[1:]):
        _same_bits(expected, actual, x)


# ----------------------------------------------------------------------- hand-built ftof

def _convert_kernel(name: str, source: str, target: str, convert, version: str):
    """Function `name`: dst[i] = convert(builder, src tile, dst element type), 64 per block."""
    module = new_module(version)
    src, dst = ELEMENT_TYPES[source], ELEMENT_TYPES[target]
    params = [scalar(PointerType(src)), scalar(i32), scalar(i32),
              scalar(PointerType(dst)), scalar(i32), scalar(i32)]
    b = new_function(module, name, params)
    a = b.args
    start = b.make_token()
    bid = b.get_tile_block_id()[0]
    tiles_in = b.partition_view(b.tensor_view(a[0], [a[1]], [a[2]]), (64,))
    tiles_out = b.partition_view(b.tensor_view(a[3], [a[4]], [a[5]]), (64,))
    x, _ = b.load(tiles_in, [bid], token=start)
    b.store(convert(b, x, dst), tiles_out, [bid], token=start)
    b.return_([])
    return module


def ftof_kernel(source: str, target: str, rounding: str, version="13.5"):
    """dst[i] = ftof(src[i]) with `rounding` (a tf32 array holds f32 patterns in memory)."""
    return _convert_kernel(f"ftof_{source}_{target}_{rounding}", source, target,
                           lambda b, x, dst: b.ftof(x, dst, rounding_mode=rounding), version)


_NUMPY = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
          "tf32": np.float32, "f8E4M3FN": ml_dtypes.float8_e4m3fn,
          "f8E5M2": ml_dtypes.float8_e5m2}

FTOF_CASES = [
    ("f32", "tf32", "nearest_even"), ("f32", "tf32", "zero"), ("f32", "tf32", "nearest_away"),
    ("f64", "tf32", "nearest_even"), ("f64", "tf32", "zero"),
    ("f64", "f16", "nearest_even"), ("f64", "bf16", "nearest_even"),
    ("f64", "f16", "zero"), ("f64", "f8E4M3FN", "nearest_even"),
    ("f64", "f8E5M2", "nearest_even"), ("f16", "tf32", "nearest_even"),
]


@pytest.mark.parametrize("source,target,rounding", FTOF_CASES,
                         ids=["-".join(c) for c in FTOF_CASES])
def test_ftof_matches_the_interpreter_bit_for_bit(source, target, rounding):
    module = ftof_kernel(source, target, rounding)
    with np.errstate(over="ignore", invalid="ignore"):
        x = (_edge_f64() if source == "f64" else _edge_f32()).astype(_NUMPY[source])
    (_, expected), (_, actual) = _run_both(module, None, (N // 64,), x,
                                           np.zeros(N, _NUMPY[target]))
    _same_bits(expected, actual, x)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_conversion_sequences_assemble(arch):
    # the bit-pattern tf32 rounding and the round-to-odd f64 step are plain sm_80 PTX
    for source, target, rounding in [("f32", "tf32", "nearest_even"), ("f64", "f16", "nearest_even"),
                                     ("f32", "tf32", "nearest_away")]:
        result = jit_compile(ftof_kernel(source, target, rounding), arch=arch, emit="cubin")
        assert result.cubin[:4] == b"\x7fELF"


# ----------------------------------------------------------------------- hand-built ftoi

def ftoi_kernel(source: str, target: str, signedness: str, rounding: str, version="13.5"):
    """dst[i] = ftoi(src[i]) (saturating) with `signedness` and `rounding`."""
    return _convert_kernel(
        f"ftoi_{source}_{target}_{signedness}_{rounding}", source, target,
        lambda b, x, dst: b.ftoi(x, dst, signedness=signedness, rounding_mode=rounding), version)


FTOI_CASES = [(source, target, signedness, rounding)
              for source in ("f32", "f64") for target in ("i8", "i16")
              for signedness in ("signed", "unsigned")
              for rounding in ("nearest_int_to_zero", "nearest_even")]


@pytest.mark.parametrize("source,target,signedness,rounding", FTOI_CASES,
                         ids=["-".join(c) for c in FTOI_CASES])
def test_narrow_ftoi_saturates_like_the_interpreter(source, target, signedness, rounding):
    # one saturating cvt to the narrow type (no clamp sequence); results bit-identical
    module = ftoi_kernel(source, target, signedness, rounding)
    ptx = jit_compile(module, arch="sm_90", emit="ptx").ptx
    bits = target[1:]
    kind = "u" if signedness == "unsigned" else "s"
    converted = re.search(rf"\tcvt\.r[nz]i\.{kind}{bits}\.{source} (%r\d+),", ptx)
    assert converted
    assert not re.search(rf"\t(min|max)\.[su]32 %r\d+, {converted.group(1)},", ptx)
    scale = {"i8": 300.0, "i16": 70000.0}[target]
    with np.errstate(over="ignore", invalid="ignore"):
        x = np.concatenate([
            np.array([np.nan, np.inf, -np.inf, -0.0, 0.5, 1.5, -0.5, -1.5, 127.5, 128.0, -128.5,
                      -129.0, 255.5, 256.0, 32767.5, 32768.0, -32768.5, 65535.5, 65536.0, 1e30]),
            RNG.uniform(-scale, scale, N - 20)]).astype(_NUMPY[source])
    (_, expected), (_, actual) = _run_both(module, None, (N // 64,), x,
                                           np.zeros(N, f"int{bits}"))
    _same_bits(expected, actual, x)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_narrow_ftoi_assembles(arch):
    # ptxas takes the saturating f32/f64 -> 8/16-bit cvt into a 32-bit register
    for source, target, signedness in [("f32", "i8", "unsigned"), ("f64", "i16", "signed"),
                                       ("f64", "i8", "unsigned")]:
        module = ftoi_kernel(source, target, signedness, "nearest_int_to_zero")
        assert jit_compile(module, arch=arch, emit="cubin").cubin[:4] == b"\x7fELF"
