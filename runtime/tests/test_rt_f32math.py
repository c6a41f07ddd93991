"""f32 math through the JIT's PTX on the emulator stays within CUDA's documented ulp bounds
(CUDA C programming guide, single-precision functions, non-fast-math), measured against the
float64 result rounded to f32 over fixed samples: random bit patterns of every magnitude, a
dense range, arguments next to multiples of pi/2, huge arguments and the IEEE specials.

The emulator evaluates `.approx` instructions almost exactly (sim/fp.py), which would hide their
error; `documented_approx_error` makes each one return an answer off by the PTX ISA's documented
bound instead (sign from a hash of the input), so sequences built on them are measured honestly.

Run as a script to print the per-op max-ulp table (benchmarks/results/jit-math-accuracy.md):
    PYTHONPATH=.:runtime python runtime/tests/test_rt_f32math.py
"""
from __future__ import annotations

import contextlib
import functools
import math

import numpy as np
import pytest

from tilebc.interp.fastmath import ulp_distance
from tilebc.ir import PointerType, f32, i32, scalar
from tilebc.ir.builder import new_function, new_module
from tilebc.oracles import tool_path
from tilebc.version import MAX_VERSION

from tilebc_runtime import sim
from tilebc_runtime.sim import fp as sim_fp

TILE = 256

# CUDA C programming guide, max ulp error of the single-precision functions (full range).
CUDA_ULPS = {"sin": 2, "cos": 2, "tan": 4, "exp": 2, "exp2": 2, "log": 1, "log2": 1,
             "sinh": 3, "cosh": 2, "tanh": 2, "pow": 4, "atan2": 3, "sqrt": 0, "rsqrt": 2}
REFERENCE = {"sin": np.sin, "cos": np.cos, "tan": np.tan, "exp": np.exp, "exp2": np.exp2,
             "log": np.log, "log2": np.log2, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
             "pow": np.power, "atan2": np.arctan2, "sqrt": np.sqrt,
             "rsqrt": lambda x: 1.0 / np.sqrt(x)}
BINARY = ("pow", "atan2")


# --------------------------------------------------------------------------- approx model
def _signs(a) -> np.ndarray:
    """+-1 per input, from a hash of its bits (deterministic, both signs well mixed)."""
    bits = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    return np.where(((bits * 2654435761) >> 13) & 1, 1.0, -1.0)


def _model(function, error):
    def apply(a):
        with np.errstate(all="ignore"):
            exact = function(np.asarray(a, np.float64))
            off = exact + _signs(a) * error(exact)
            return np.where(np.isfinite(off), off, exact).astype(np.asarray(a).dtype)
    return apply


def _steps(function, ulps):
    """`function` rounded to f32, then moved `ulps` representable steps (an ulp bound)."""
    def apply(a):
        with np.errstate(all="ignore"):
            exact = function(np.asarray(a, np.float64)).astype(np.float32)
        bits = exact.view(np.int32).astype(np.int64)
        moved = (bits + (_signs(a) * ulps).astype(np.int64) * np.where(bits < 0, -1, 1))
        off = np.clip(moved, -(1 << 31), (1 << 31) - 1).astype(np.int32).view(np.float32)
        keep = ~np.isfinite(exact) | (exact == 0) | (np.signbit(off) != np.signbit(exact))
        return np.where(keep | ~np.isfinite(off), exact, off)
    return apply


DOCUMENTED_APPROX = {
    "sin": _model(np.sin, lambda v: 2.0 ** -20.9),           # absolute, in [-pi, pi]
    "cos": _model(np.cos, lambda v: 2.0 ** -20.9),
    "ex2": _steps(np.exp2, 2),                                 # 2 ulp
    "lg2": _model(np.log2, lambda v: 2.0 ** -22 * np.maximum(1.0, np.abs(v))),
    "tanh": _model(np.tanh, lambda v: 2.0 ** -10.987 * np.abs(v)),
    "rsqrt": _steps(lambda x: 1.0 / np.sqrt(x), 1),
    "rcp": _steps(lambda x: 1.0 / x, 1),
    "sqrt": _steps(np.sqrt, 1),
}


@contextlib.contextmanager
def documented_approx_error():
    """Emulate .approx instructions with their documented worst-case error (see module doc)."""
    saved = dict(sim_fp.APPROX)
    sim_fp.APPROX.update(DOCUMENTED_APPROX)
    try:
        yield
    finally:
        sim_fp.APPROX.clear()
        sim_fp.APPROX.update(saved)


# --------------------------------------------------------------------------- samples
def samples(name: str, count: int, seed: int = 7) -> tuple:
    """Inputs for `name` (one or two float32 arrays of `count` elements, a multiple of TILE)."""
    rng = np.random.default_rng(seed)
    quarter = count // 4
    random_bits = rng.integers(0, 1 << 32, quarter, dtype=np.uint64).astype(np.uint32)
    anything = random_bits.view(np.float32)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, 1.2e-38,
                         1e30, -1e30, 3.4e38, -3.4e38, 1.0, -1.0, 0.5, 2.0, 1e-7, 105615.0,
                         105616.0, 65536.0, 1e5, 1e6, 1e10], np.float32)
    if name in ("sin", "cos", "tan"):
        k = rng.integers(-200000, 200000, quarter)
        near_zeros = (k * (np.pi / 2)).astype(np.float32)   # the hardest reductions
        dense = rng.uniform(-20, 20, quarter).astype(np.float32)
        wide = (rng.uniform(-1, 1, quarter) * 10.0 ** rng.uniform(0, 38, quarter)).astype(np.float32)
        parts = [specials, near_zeros, dense, wide, anything]
    elif name in ("log", "log2"):
        near_one = (1 + rng.uniform(-0.3, 0.3, quarter)).astype(np.float32)
        tiny_step = (1 + rng.integers(-2000, 2000, quarter) * 2.0 ** -23).astype(np.float32)
        parts = [specials, near_one, tiny_step, np.abs(anything), anything]
    elif name in ("exp", "exp2", "sinh", "cosh", "tanh"):
        dense = rng.uniform(-105, 105, quarter).astype(np.float32)
        small = rng.uniform(-1, 1, quarter).astype(np.float32)
        parts = [specials, dense, small, anything, (small * 1e-3).astype(np.float32)]
    elif name in BINARY:
        y_any = rng.integers(0, 1 << 32, count, dtype=np.uint64).astype(np.uint32).view(np.float32)
        base = np.concatenate([rng.uniform(0, 4, count // 2),
                               rng.uniform(-1, 1, count - count // 2) * 10.0 ** rng.uniform(-30, 30, count - count // 2)])
        expo = np.concatenate([rng.uniform(-30, 30, count // 2), rng.uniform(-3, 3, count - count // 2)])
        if name == "pow":
            expo[::7] = np.rint(expo[::7])
            expo[::11] = y_any[::11].astype(np.float64)
        x, y = base.astype(np.float32), expo.astype(np.float32)
        if name == "pow":
            # x next to 1 with a huge y (y log2 x up to +-120): log2 x must be accurate
            # relative to itself, not only to 1, since y multiplies its error
            near = slice(2 * len(specials), None, 5)
            size = len(x[near])
            step = rng.integers(-300000, 300000, size)
            x[near] = (1 + np.where(step == 0, 1, step) * 2.0 ** -23).astype(np.float32)
            with np.errstate(all="ignore"):
                y[near] = (rng.uniform(-120, 120, size)
                           / np.log2(x[near].astype(np.float64))).astype(np.float32)
        x[: len(specials)] = specials
        y[len(specials): 2 * len(specials)] = specials
        return x, y
    else:
        parts = [specials, np.abs(anything), anything, rng.uniform(0, 10, quarter).astype(np.float32)]
    values = np.concatenate(parts)
    values = np.resize(values, count) if len(values) < count else values[:count]
    values[: len(specials)] = specials
    return (values.astype(np.float32),)


# --------------------------------------------------------------------------- kernels
def math_kernel(name: str, arity: int):
    """dst[i] = name(src0[i] [, src1[i]]) over TILE-element f32 tiles (pointer, size, stride)."""
    module = new_module(MAX_VERSION)
    params = [scalar(PointerType(f32)), scalar(i32), scalar(i32)] * (arity + 1)
    b = new_function(module, f"{name}_f32", params)
    a = b.args
    token = b.make_token()
    bid = b.get_tile_block_id()[0]
    loaded = []
    for k in range(arity):
        view = b.partition_view(b.tensor_view(a[3 * k], [a[3 * k + 1]], [a[3 * k + 2]]), (TILE,))
        value, _ = b.load(view, [bid], token=token)
        loaded.append(value)
    out_view = b.partition_view(b.tensor_view(a[3 * arity], [a[3 * arity + 1]],
                                              [a[3 * arity + 2]]), (TILE,))
    b.store(getattr(b, name)(*loaded), out_view, [bid], token=token)
    b.return_([])
    return module


def emulate(name: str, inputs: tuple) -> np.ndarray:
    module = math_kernel(name, len(inputs))
    out = np.zeros_like(inputs[0])
    sim.run(module, module.functions[0].name, (len(out) // TILE,), *inputs, out)
    return out


def reference(name: str, inputs: tuple) -> np.ndarray:
    with np.errstate(all="ignore"):
        return REFERENCE[name](*(x.astype(np.float64) for x in inputs)).astype(np.float32)


def max_ulps(name: str, inputs: tuple, got: np.ndarray):
    """(max ulp distance over the inputs where the reference is a number, the input there, and
    the number of NaN mismatches)."""
    want = reference(name, inputs)
    nan_mismatch = int(np.count_nonzero(np.isnan(got) != np.isnan(want)))
    numbers = ~np.isnan(want) & ~np.isnan(got)
    distance = ulp_distance(got[numbers], want[numbers])
    if not distance.size:
        return 0, None, nan_mismatch
    worst = int(np.argmax(distance))
    where = tuple(float(x[numbers][worst]) for x in inputs)
    return int(distance[worst]), where, nan_mismatch


# --------------------------------------------------------------------------- tests
ACCURATE = ("sin", "cos", "tan", "exp", "exp2", "log", "log2", "sinh", "cosh", "tanh", "pow",
            "atan2", "sqrt", "rsqrt")


@pytest.mark.parametrize("name", ACCURATE)
def test_within_cuda_ulp_bound(name):
    inputs = samples(name, 8 * TILE)
    with documented_approx_error():
        got = emulate(name, inputs)
    worst, where, nan_mismatch = max_ulps(name, inputs, got)
    assert nan_mismatch == 0
    assert worst <= CUDA_ULPS[name], f"{name}: {worst} ulp at {where}"


@pytest.mark.parametrize("name", [n for n in ACCURATE if n not in BINARY])
def test_specials(name):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-40, 1e30, -1e30, 3.4028235e38],
                 np.float32)
    inputs = (np.resize(x, TILE).astype(np.float32),)
    got = emulate(name, inputs)
    want = reference(name, inputs)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.signbit(got[:2]), np.signbit(want[:2])) or name == "cos"
    assert ulp_distance(got[~np.isnan(want)], want[~np.isnan(want)]).max() <= CUDA_ULPS[name]


def _least_squares_fit(function, low, high, degree, nodes=4000):
    """Coefficients (low degree first, rounded to f32) of the polynomial fit to `function` on
    [low, high]: least squares in relative error at Chebyshev nodes (how the fitted tails in
    f32math were made)."""
    k = np.arange(nodes)
    x = (low + high) / 2 + (high - low) / 2 * np.cos(np.pi * (k + 0.5) / nodes)
    y = function(x)
    scaled = np.vander(x, degree + 1, increasing=True) / np.abs(y)[:, None]
    coefficients = np.linalg.lstsq(scaled, np.sign(y), rcond=None)[0]
    return coefficients.astype(np.float32).astype(np.float64)


def _relative_error(coefficients, function, x) -> float:
    """log2 of the largest relative error of the polynomial against `function` over x."""
    got = np.polynomial.polynomial.polyval(x, np.asarray(coefficients, np.float64))
    want = function(x)
    return float(np.log2(np.max(np.abs(got - want) / np.abs(want))))


def test_polynomials_reach_their_stated_accuracy():
    """Each polynomial of f32math, with its coefficients as f32, is as accurate as its comment
    says on its interval (float64 evaluation, so only the fit and the coefficients count), and
    the fitted ones are reproduced by a plain numpy least-squares fit of the same degree."""
    from tilebc_runtime.lowering import f32math
    ln2 = math.log(2)

    def log1p_tail(t):
        return (np.log1p(t) - t) / (t * t)

    def tanh_tail(u):
        x = np.sqrt(u)
        return (np.tanh(x) - x) / (x * u)

    t = np.linspace(-0.25, 0.5, 100001)
    t = t[t != 0]
    assert _relative_error(f32math.LOG1P_TAIL, log1p_tail, t) < -26
    assert _relative_error(_least_squares_fit(log1p_tail, -0.25, 0.5, 10), log1p_tail, t) < -26
    u = np.linspace(1e-4, f32math.TANH_SMALL ** 2, 100001)  # float64 tanh(x) - x is noisy below
    assert _relative_error(f32math.TANH_TAIL, tanh_tail, u) < -24.8
    assert _relative_error(_least_squares_fit(tanh_tail, 0, f32math.TANH_SMALL ** 2, 5),
                           tanh_tail, u) < -24.5
    # exp's degree-7 Taylor polynomial on the reduced range |r| <= ln2/2
    r = np.linspace(-0.3466, 0.3466, 100001)
    taylor = [1 / math.factorial(i) for i in range(8)]
    assert _relative_error(taylor, np.exp, r) < -27
    # pow's 2^f, degree 6, on |f| <= 0.5005; all its coefficients are f32 and the first is 1
    f = np.linspace(-0.5005, 0.5005, 200001)
    assert _relative_error(f32math.EXP2_POLY, np.exp2, f) < -28.2
    assert all(float(np.float32(c)) == c for c in f32math.EXP2_POLY)
    assert f32math.EXP2_POLY[0] == 1.0
    # sinh below |x| = 1: x + x^3 S(x^2)
    x = np.linspace(1e-4, 1, 100001)
    sinh_odd = np.zeros(2 * len(f32math.SINH_TAIL) + 2)
    sinh_odd[1], sinh_odd[3::2] = 1.0, f32math.SINH_TAIL
    assert _relative_error(sinh_odd, np.sinh, x) < -33
    # pow's log2(1 + r) = r log2(e) + r^2 L(r) for |r| <= 2^-7 (the table's reduced range)
    r = np.linspace(-2 ** -7, 2 ** -7, 100001)
    r = r[r != 0]
    log2_poly = [0.0, 1 / ln2, *f32math.LOG2_TAIL]
    assert _relative_error(log2_poly, lambda v: np.log1p(v) / ln2, r) < -34


def test_log2_table_reduction_is_exact():
    """For every reduced mantissa m in [0.75, 1.5), pow's r = m*invc - 1 is an f32 (the fma
    that computes it is exact) with |r| <= 2^-7, and head + low is -log2(invc). e + head is an
    f32 for every exponent e, and s1 + r log2(e) is a fast two-sum (|head| >= |r log2(e)| in
    every row but the unit ones, where head = 0)."""
    from tilebc_runtime.lowering import f32math
    rows = np.frombuffer(f32math.log2_table(), "<f4").reshape(-1, 4).astype(np.float64)
    bits = np.arange(0x3F400000, 0x3F400000 + (128 << 16), dtype=np.uint32)
    m = bits.view(np.float32).astype(np.float64)
    row = (bits - 0x3F400000) >> 16
    r = m * rows[row, 0] - 1.0  # exact in float64 (24 x 8 bits)
    assert np.array_equal(r.astype(np.float32).astype(np.float64), r)
    assert np.abs(r).max() <= 2.0 ** -7
    assert np.abs(rows[:, 1] + rows[:, 2] + np.log2(rows[:, 0])).max() < 2.0 ** -40
    assert all(rows[j, 0] == 1.0 and rows[j, 1] == 0.0 for j in f32math.UNIT_ROWS)
    e = np.arange(-150, 129, dtype=np.float64)[:, None]
    sums = e + rows[None, :, 1]
    assert np.array_equal(sums.astype(np.float32).astype(np.float64), sums)
    p = np.abs((r.astype(np.float32) * np.float32(f32math.LOG2E_HI)).astype(np.float64))
    largest = np.zeros(128)
    np.maximum.at(largest, row, p)
    off_unit = [j for j in range(128) if j not in f32math.UNIT_ROWS]
    assert np.all(np.abs(rows[off_unit, 1]) >= largest[off_unit])


def test_huge_reduction_table_matches_float64_reduction():
    """The table's x*2/pi mod 4 for exact powers of two agrees with a long-integer computation."""
    from tilebc_runtime.lowering import f32math
    table = np.frombuffer(f32math.huge_reduction_table(), "<f8").reshape(-1, 4)
    for row, field in ((0, 143), (40, 183), (111, 254)):
        exponent = field - 150
        exact = (f32math.two_over_pi_scaled(exponent + 200) % (4 << 200)) / 2.0 ** 200
        assert math.isclose(float(np.sum(table[row][::-1])), exact, rel_tol=0, abs_tol=2 ** -100)


def table(names, count):
    rows = []
    for name in names:
        inputs = samples(name, count)
        with documented_approx_error():
            got = emulate(name, inputs)
        worst, where, nans = max_ulps(name, inputs, got)
        rows.append((name, worst, CUDA_ULPS[name], where, nans))
    return rows


def cost(name: str, arch: str = "sm_90") -> dict:
    """Instructions per element of `name` (f32): PTX, PTX on f64, SASS (ptxas for `arch`) and
    SASS FP64 (D* arithmetic and conversions to or from F64). The kernel's loads, stores and
    addressing are taken out by subtracting the same kernel with negf."""
    mine, base = _counts(name, arch), _counts("negf", arch)
    return dict(zip(("ptx", "ptx_f64", "sass", "sass_fp64"), (a - b for a, b in zip(mine, base))))


@functools.lru_cache(maxsize=None)  # the negf baseline is shared by every op's cost
def _counts(op: str, arch: str) -> tuple:
    import re
    import subprocess
    import tempfile
    from pathlib import Path

    from tilebc.oracles import require_tool
    from tilebc_runtime.compiler import compile as jit_compile

    arity = 2 if op in BINARY else 1
    result = jit_compile(math_kernel(op, arity), arch=arch, emit="ptx")
    ptx = [line.strip() for line in result.ptx.splitlines()]
    body = [line for line in ptx if line and not line.startswith(("//", ".", "{", "}", "$"))
            and line.endswith(";") and not line.startswith("ret")]
    ptx_f64 = sum(1 for line in body if ".f64" in line.split()[0] or "%fd" in line)
    with tempfile.TemporaryDirectory(prefix="tilebc-f32math-") as work:
        source, cubin = Path(work) / "k.ptx", Path(work) / "k.cubin"
        source.write_text(result.ptx)
        subprocess.run([require_tool("ptxas"), f"-arch={arch}", "-o", str(cubin),
                        str(source)], check=True, capture_output=True, timeout=600)
        dump = subprocess.run([require_tool("cuobjdump"), "-sass", str(cubin)], check=True,
                              capture_output=True, text=True, timeout=600).stdout
    opcodes = [m.group(1) for m in re.finditer(
        r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", dump)]
    opcodes = [o for o in opcodes if not o.startswith("NOP")]
    fp64 = sum(1 for o in opcodes if re.match(r"D(ADD|MUL|FMA|SETP|MNMX|SET)\b", o)
               or ".F64" in o)
    per_thread = TILE // getattr(result, "threads_per_cta", 128)
    return tuple(n / per_thread for n in (len(body), ptx_f64, len(opcodes), fp64))


if __name__ == "__main__":
    import sys
    if sys.argv[1:2] == ["--cost"]:
        print("| op | PTX | PTX f64 | SASS | SASS FP64 |  (per element, sm_90)")
        for name in (sys.argv[2].split(",") if len(sys.argv) > 2 else list(CUDA_ULPS)):
            c = cost(name)
            print(f"| {name} | {c['ptx']:g} | {c['ptx_f64']:g} | {c['sass']:g} | "
                  f"{c['sass_fp64']:g} |", flush=True)
        sys.exit(0)
    names = sys.argv[1].split(",") if len(sys.argv) > 1 else list(CUDA_ULPS)
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 15
    for name, worst, bound, where, nans in table(names, count):
        print(f"| {name} | {worst} | {bound} | {where} | {nans} |", flush=True)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_math_ptx_links_with_nvjitlink(arch):
    """Every f32 math sequence (the f64 table, the divergent branch included) is PTX that
    nvJitLink accepts and turns into a cubin."""
    from tilebc_runtime.compiler import compile as jit_compile
    for name in ("sin", "tan", "log", "pow", "tanh"):
        module = math_kernel(name, 2 if name in BINARY else 1)
        result = jit_compile(module, arch=arch, emit="cubin")
        assert result.cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("name", ["exp", "log", "log2", "sinh", "cosh", "tanh", "pow"])
def test_f32_math_needs_no_f64(name):
    """These stay in f32 (FP64 is 1/64 rate on consumer GPUs): no f64 register or instruction."""
    from tilebc_runtime.compiler import compile as jit_compile
    ptx = jit_compile(math_kernel(name, 2 if name in BINARY else 1), arch="sm_90",
                      emit="ptx").ptx
    assert ".f64" not in ptx and "%fd" not in ptx


@pytest.mark.skipif(tool_path("ptxas") is None or tool_path("cuobjdump") is None,
                    reason="ptxas/cuobjdump not installed")
@pytest.mark.parametrize("name", ["exp", "log", "pow", "tanh"])
def test_f32_math_sass_has_no_fp64(name):
    """ptxas adds no FP64 of its own either, and the sequences stay short (bounds ~2x today's)."""
    counts = cost(name)
    assert counts["sass_fp64"] == 0 and counts["ptx_f64"] == 0
    assert 0 < counts["sass"] <= {"exp": 40, "log": 75, "pow": 220, "tanh": 100}[name], counts
