"""fpowi by a compile-time constant exponent of 0 or 2, and fpowf by a splat 0.0 or 2.0 (cuTile's
`x ** 2`, as in NVIDIA's layer norm sample: fpowi from bytecode 13.4 on, fpowf before), lower to
1 and x*x instead of the pow expansion: bit for bit what the interpreter computes (pow correctly
rounded), special values included, for f32, f16 and bf16 on sm_80 and sm_90; another constant
exponent keeps the pow expansion."""
import ml_dtypes
import numpy as np
import pytest

from tilebc.interp import run as interpret
from tilebc.text import parse_module

from tilebc_runtime import sim
from tilebc_runtime.compiler import compile as jit_compile

ARCHS = ("sm_80", "sm_90")
OUTPUTS = (1, 2, 3, 4, 5)  # x ** 2, x ** 0, x ** 3 (fpowi); x ** 2.0, x ** 0.0 (fpowf)
TYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


def _kernel(element: str) -> str:
    view = f"tensor_view<?x{element}, strides=[?]>"
    part = f"partition_view<tile=(64), {view}>"
    lines = [f"entry @square(%arg0: tile<ptr<{element}>>, %arg1: tile<i32>, %arg2: tile<i32>, "
             + ", ".join(f"%arg{3 * k}: tile<ptr<{element}>>, %arg{3 * k + 1}: tile<i32>, "
                         f"%arg{3 * k + 2}: tile<i32>" for k in OUTPUTS)
             + ") optimization_hints=<default = {}> {",
             "  %token = make_token : token",
             "  %two = constant <i32: 2> : tile<64xi32>",
             "  %zero = constant <i32: 0> : tile<64xi32>",
             "  %three = constant <i32: 3> : tile<64xi32>",
             f"  %ftwo = constant <{element}: 2.000000e+00> : tile<64x{element}>",
             f"  %fzero = constant <{element}: 0.000000e+00> : tile<64x{element}>",
             "  %bid, %bid_y, %bid_z = get_tile_block_id : tile<i32>"]
    for k in (0,) + OUTPUTS:
        lines += [f"  %view{k} = make_tensor_view %arg{3 * k}, shape = [%arg{3 * k + 1}], "
                  f"strides = [%arg{3 * k + 2}] : tile<i32> -> {view}",
                  f"  %part{k} = make_partition_view %view{k} : {part}"]
    lines.append(f"  %x, %t = load_view_tko weak %part0[%bid] token = %token : {part}, tile<i32> "
                 f"-> tile<64x{element}>, token")
    for k, exponent in ((1, "two"), (2, "zero"), (3, "three"), (4, "ftwo"), (5, "fzero")):
        op = "fpowf" if exponent.startswith("f") else "fpowi"
        types = f"tile<64x{element}>" + (", tile<64xi32>" if op == "fpowi" else "")
        lines += [f"  %r{k} = {op} %x, %{exponent} : {types}",
                  f"  %s{k} = store_view_tko weak %r{k}, %part{k}[%bid] token = %token : "
                  f"tile<64x{element}>, {part}, tile<i32> -> token"]
    return "\n".join(lines + ["  return", "}"]) + "\n"


def _inputs(dtype) -> np.ndarray:
    info = ml_dtypes.finfo(dtype) if dtype is ml_dtypes.bfloat16 else np.finfo(dtype)
    special = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, float(info.max), -float(info.max),
               float(info.tiny), float(info.smallest_subnormal), -float(info.smallest_subnormal),
               float(np.sqrt(float(info.max))) * 1.001, 1.5, -3.25]
    rest = np.random.default_rng(3).standard_normal(64 - len(special)) * 50
    return np.array(special + list(rest)).astype(dtype)


def _same(actual: np.ndarray, expected: np.ndarray) -> bool:
    nan = np.isnan(expected.astype(np.float64))
    if not np.array_equal(np.isnan(actual.astype(np.float64)), nan):
        return False
    bits = f"u{expected.dtype.itemsize}"
    return np.array_equal(actual[~nan].view(bits), expected[~nan].view(bits))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("element", sorted(TYPES))
def test_constant_exponents_match_the_interpreter_bit_for_bit(element, arch):
    dtype = TYPES[element]
    module = parse_module(_kernel(element))
    x = _inputs(dtype)
    expected = [np.zeros(64, dtype) for _ in OUTPUTS]
    interpret(module, "square", (1,), x, *expected)
    actual = [np.zeros(64, dtype) for _ in OUTPUTS]
    sim.run(module, "square", (1,), x, *actual, arch=arch)
    names = ("x ** 2", "x ** 0", "x ** 3", "x ** 2.0", "x ** 0.0")
    for name, got, want in zip(names, actual, expected):
        if name == "x ** 3":  # the pow expansion: within its ulp bound, not exact
            finite = np.isfinite(want.astype(np.float64))
            assert np.allclose(got[finite].astype(np.float64), want[finite].astype(np.float64),
                               rtol=1e-2 if element != "f32" else 1e-6), name
            continue
        assert _same(got, want), (name, got, want)
    assert np.all(expected[1] == 1) and np.all(expected[4] == 1)  # pow(x, 0) is 1 for NaN too


@pytest.mark.parametrize("element", sorted(TYPES))
def test_square_is_one_multiply_and_another_exponent_keeps_pow(element):
    ptx = jit_compile(parse_module(_kernel(element)), "square", "sm_90", emit="ptx").ptx
    squares = [line for line in ptx.splitlines() if line.strip().startswith("mul.rn.f32")]
    assert squares and all(line.split()[2].rstrip(",") == line.split()[3].rstrip(";")
                           for line in squares[:1]), squares[:2]
    lone = parse_module(_kernel(element).replace("%r3 = fpowi %x, %three", "%r3 = fpowi %x, %two"))
    fewer = jit_compile(lone, "square", "sm_90", emit="ptx").ptx
    # with x ** 3 gone, no pow expansion (its FMA polynomial) is left
    assert "fma.rn.f32" in ptx and "fma.rn.f32" not in fewer
