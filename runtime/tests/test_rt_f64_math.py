"""f64 transcendentals of the JIT (lowering/f64math.py) are double precision: run on the PTX
emulator over thousands of inputs (random ranges, specials, overflow/underflow edges, the
worst inputs of past sweeps) and held to CUDA's documented maximum ulp errors for double
(CUDA C++ Programming Guide, double-precision mathematical functions). The error is the real
one, |got - exact| / ulp(exact), with the exact value from numpy's long double (64-bit
significand on x86: ~2^-11 ulp of double); CUDA's own figure is the distance in ulps from the
correctly rounded result, which this bound implies. Before f64math the JIT went through f32
and was ~1e9 ulps off.

Run as a script for a larger sweep (benchmarks/results/jit-math-accuracy.md, f64 section):
    PYTHONPATH=.:runtime python runtime/tests/test_rt_f64_math.py [ops] [n] [seed]
"""
import sys
import zlib

import numpy as np
import pytest

from tilebc.ir import PointerType, f64, i32, scalar
from tilebc.ir.builder import new_function, new_module
from tilebc.version import MAX_VERSION

from tilebc_runtime import sim
from tilebc_runtime.compiler import compile

TILE = 64
INF, NAN = np.inf, np.nan
CUDA_ULPS = {"exp": 1, "exp2": 1, "log": 1, "log2": 1, "sin": 1, "cos": 1, "tan": 2, "sinh": 1,
             "cosh": 1, "tanh": 1, "pow": 2, "fpowi": 2, "atan2": 2}
EXTENDED = np.finfo(np.longdouble).nmant >= 63
# the accuracy tests measure against long double
needs_extended = pytest.mark.skipif(not EXTENDED,
                                    reason="numpy long double is no wider than double")


def elementwise_kernel(mnemonic: str, elements):
    """out[i] = op(in0[i], in1[i], ...) over TILE-element tiles; arrays are (ptr, size, stride)."""
    module = new_module(MAX_VERSION)
    params = []
    for element in (*elements, f64):
        params += [scalar(PointerType(element)), scalar(i32), scalar(i32)]
    b = new_function(module, f"{mnemonic}_f64", params)
    a = b.args
    token = b.make_token()
    bid = b.get_tile_block_id()[0]
    views = [b.partition_view(b.tensor_view(a[3 * i], [a[3 * i + 1]], [a[3 * i + 2]]), (TILE,))
             for i in range(len(elements) + 1)]
    operands = [b.load(view, [bid], token=token)[0] for view in views[:-1]]
    b.store(getattr(b, mnemonic)(*operands), views[-1], [bid], token=token)
    b.return_([])
    return module


def emulate(mnemonic, *inputs, elements=None, run=None):
    """The op over `inputs` on the PTX emulator (or through `run`, tilebc.interp.run's signature:
    scripts/gpu_checks.py launches the same kernel on a GPU)."""
    elements = elements or [f64] * len(inputs)
    size = -(-len(inputs[0]) // TILE) * TILE
    padded = [np.resize(v, size) for v in inputs]
    module = elementwise_kernel(mnemonic, elements)
    out = np.zeros(size)
    (run or sim.run)(module, module.functions[0].name, (size // TILE,), *padded, out)
    return out[:len(inputs[0])]


def ulp_error(got, exact):
    """|got - exact| in ulps of `exact` (a long double array): the spacing of doubles at its
    binade, 2^-1074 below the normal range. Where either side is not finite (or the exact value
    rounds to an infinity) only the identical value (NaN included) counts as exact."""
    exact = np.asarray(exact, np.longdouble)
    with np.errstate(all="ignore"):
        rounded = exact.astype(np.float64)
        exponent = np.frexp(np.abs(exact))[1].astype(np.int64)
        ulp = np.ldexp(np.ones_like(exact), np.maximum(exponent - 53, -1074))
        error = (np.abs(got.astype(np.longdouble) - exact) / ulp).astype(np.float64)
    same = (got == rounded) | (np.isnan(got) & np.isnan(rounded))
    finite = np.isfinite(got) & np.isfinite(rounded)
    return np.where(finite, error, np.where(same, 0.0, np.inf))


def exact(function, *inputs):
    with np.errstate(all="ignore"):
        return function(*(np.asarray(v).astype(np.longdouble) for v in inputs))


def assert_close(name, inputs, got, want):
    bound = CUDA_ULPS[name]
    error = ulp_error(got, want)
    worst = int(np.argmax(error))
    assert error[worst] <= bound, (
        f"{name}{tuple(float(v[worst]) for v in inputs)} = {got[worst]!r}, exact "
        f"{want[worst]!r} ({error[worst]:.3g} ulp; {(error > bound).sum()} inputs over {bound})")
    # signed zeros must keep their sign (exact zeros compare equal above)
    zeros = (want == 0) & (got == 0)
    assert np.array_equal(np.signbit(got[zeros]), np.signbit(want[zeros])), f"{name}: sign of zero"


RNG = np.random.default_rng(20261121)


@pytest.fixture(autouse=True)
def _inputs_of_its_own(request):
    """Each test draws from a generator seeded by its name, so its inputs do not depend on which
    tests ran before it in the same worker."""
    global RNG
    RNG = np.random.default_rng([20261121, zlib.crc32(request.node.name.encode())])
EDGES = np.array([0.0, -0.0, INF, -INF, NAN, 5e-324, -5e-324, 1e-310, -2.5e-308, 1e-300, 1.0,
                  -1.0, 0.5, 2.0, 3.0, 1e-8, -1e-8, 0.34657359027997264, 0.6931471805599453,
                  22.0, -22.0, 21.999999999999996, 1.0000000000000002, 0.9999999999999999])


def _spread(n):
    """Random values across scales: moderate, tiny and huge magnitudes, both signs."""
    sign = RNG.choice([-1.0, 1.0], n)
    return np.concatenate([RNG.uniform(-20, 20, n), RNG.standard_normal(n) * 1e-3,
                           sign * np.exp(RNG.uniform(-700, 700, n))])


def _near(n, low, high):
    """The ranges where sinh and cosh take their double-double exponentials and series."""
    return np.concatenate([RNG.uniform(-low, low, n // 4), RNG.uniform(-high, high, n // 4)])


UNARY = {
    "exp": (np.exp, lambda n: np.concatenate([RNG.uniform(-746, 710, n), [709.782712893384,
                                             709.7827128933841, -708.3964185322641, -745.13,
                                             -745.14, -744.44]])),
    "exp2": (np.exp2, lambda n: np.concatenate([RNG.uniform(-1080, 1030, n),
                                               [1023.9999999999999, 1024.0, -1022.0, -1074.0,
                                                -1074.5, -1075.0, -1022.5]])),
    "log": (np.log, lambda n: np.abs(_spread(n))),
    "log2": (np.log2, lambda n: np.concatenate([np.abs(_spread(n)), RNG.uniform(0.7, 1.42, n),
                                                2.0 ** np.arange(-1074, 1024, 37.0)])),
    "sinh": (np.sinh, lambda n: np.concatenate([RNG.uniform(-711, 711, n), _near(n, 1, 22),
                                                [710.4, -710.47, 710.5, 1e-20]])),
    "cosh": (np.cosh, lambda n: np.concatenate([RNG.uniform(-711, 711, n), _near(n, 1, 22),
                                                [710.4, 710.5]])),
    "tanh": (np.tanh, lambda n: np.concatenate([RNG.uniform(-3, 3, n), RNG.uniform(-25, 25, n)])),
    "sin": (np.sin, None), "cos": (np.cos, None), "tan": (np.tan, None),
}
# the worst inputs of past sweeps, the first of each from a 262k-input GPU sweep (before the
# double-double kernels: tan 2.6-3 ulp, log2 1.4, sinh 1.35, cosh 1.2, tanh 1.03, sin 1.2,
# cos 1.4, atan2 2.1, pow 4)
PINNED = {
    "tan": [-1.63340643076927, 249549359895.3299, -385329499912.0034, -8.681677886079322],
    "log2": [1.3994242119377809, 1.371579296472241, 1.4092807447478322],
    "sinh": [-0.4766622803872025, -0.4662662188127342, 1.1579978572479377, 12.184942167910444,
             -12.940359708249616],
    "cosh": [12.15277010764663, 0.9968036531044893, -8.696433629770809],
    "sin": [4663315051.127087], "cos": [-8.106241751731284], "tanh": [0.8757625554060369],
    "atan2": [(0.49044016513440075, 1.0298411399752914),
              (0.22984887435200993, 0.5018951259874819)],
    "pow": [(1.411780458684447, 2030.0153329979075), (1.4120166528579847, -1866.5397611667968),
            (0.708058186090743, -2019.542995212429), (0.7019543295651479, -1742.3310440072855)],
}
MNEMONIC = {"pow": "fpowf"}
REFERENCE = {**{name: function for name, (function, _) in UNARY.items()},
             "pow": np.power, "atan2": np.arctan2}


def _trig_inputs(n):
    """Within the Cody-Waite range |x| < 2^40, and near multiples of π/2."""
    sign = RNG.choice([-1.0, 1.0], n)
    return np.concatenate([RNG.uniform(-10, 10, n), sign * np.exp2(RNG.uniform(-30, 39.9, n)),
                           np.arange(1, 200) * (np.pi / 2), np.arange(1, 200) * (np.pi / 4)])


def unary_inputs(name, n):
    x = np.concatenate([EDGES, (UNARY[name][1] or _trig_inputs)(n), _spread(n // 4)])
    return (x[np.abs(x) < 2.0 ** 40] if UNARY[name][1] is None else x,)


def pow_inputs(n):
    specials = np.array([0.0, -0.0, INF, -INF, NAN, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0,
                         5e-324, 1e308, -1e308])
    sx, sy = (v.ravel() for v in np.meshgrid(specials, specials))
    base = np.exp(RNG.uniform(-3, 3, n))
    target = RNG.uniform(-740, 705, n)            # y·log x across the whole exp range
    x = np.concatenate([sx, np.exp(RNG.uniform(-5, 5, n)), base, RNG.uniform(0.9, 1.1, n),
                        -np.exp(RNG.uniform(-3, 3, n // 4)), np.exp(RNG.uniform(-700, 700, n))])
    y = np.concatenate([sy, RNG.uniform(-30, 30, n), target / np.log(base),
                        RNG.uniform(-3000, 3000, n), RNG.integers(-200, 200, n // 4) * 1.0,
                        RNG.uniform(-1, 1, n)])
    return x, y


def atan2_inputs(n):
    specials = np.array([0.0, -0.0, INF, -INF, NAN, 1.0, -1.0, 2.0, -3.0, 5e-324, -1e308, 1e308])
    sy, sx = (v.ravel() for v in np.meshgrid(specials, specials))
    sign = lambda: RNG.choice([-1.0, 1.0], n)  # noqa: E731
    y = np.concatenate([sy, RNG.standard_normal(n), sign() * np.exp(RNG.uniform(-700, 700, n)),
                        RNG.uniform(-1, 1, n)])
    x = np.concatenate([sx, RNG.standard_normal(n), sign() * np.exp(RNG.uniform(-700, 700, n)),
                        RNG.uniform(-1, 1, n)])
    return y, x


def inputs(name, n):
    return {"pow": pow_inputs, "atan2": atan2_inputs}.get(name, lambda n: unary_inputs(name, n))(n)


def check(name, args):
    got = emulate(MNEMONIC.get(name, name), *args)
    assert_close(name, args, got, exact(REFERENCE[name], *args))


@needs_extended
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_double_precision(name):
    check(name, inputs(name, 1024))


@needs_extended
@pytest.mark.parametrize("name", sorted(PINNED))
def test_worst_inputs_of_past_sweeps(name):
    args = tuple(np.array(v, np.float64) for v in zip(*(
        p if isinstance(p, tuple) else (p,) for p in PINNED[name])))
    check(name, args)


@needs_extended
@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_trig_huge_arguments_use_payne_hanek(name):
    """|x| >= 2^40 takes the table-driven reduction: random huge arguments and the hardest double
    (closest to a multiple of π/2, reduced argument ~2^-61) stay within the bound."""
    n = 512
    x = np.concatenate([RNG.choice([-1.0, 1.0], n) * np.exp2(RNG.uniform(39.5, 1023.9, n)),
                        [2.0 ** 40, -(2.0 ** 40), np.nextafter(2.0 ** 40, 0), 1e22, -1e300,
                         1.7976931348623157e308, 2.0 ** 53 + 2, INF, -INF, NAN]])
    check(name, (x,))
    check(name, (np.array([5.319372648326541e+255]),))


@needs_extended
def test_pow_double_precision_and_c99_specials():
    check("pow", pow_inputs(1024))


@needs_extended
def test_fpowi_with_integer_exponent():
    x = np.concatenate([[0.0, -0.0, INF, -INF, NAN, -1.0, 2.0, -2.0, 0.5],
                        RNG.uniform(-3, 3, 512)])
    exponent = np.concatenate([[-1, -1, 3, 3, 0, 7, 1023, -1074 // 2, -1074],
                               RNG.integers(-100, 100, 512)]).astype(np.int32)
    got = emulate("fpowi", x, exponent, elements=[f64, i32])
    assert_close("fpowi", (x, exponent), got, exact(np.power, x, exponent))


@needs_extended
def test_atan2_double_precision_and_octants():
    check("atan2", atan2_inputs(1024))


def test_f64_math_fixture_links_and_stays_in_f64():
    """The fixture's PTX links for sm_80 and sm_90 and does no f64 -> f32 narrowing."""
    from pathlib import Path
    path = (Path(__file__).resolve().parents[2] / "fixtures" / "bytecode" / "ft_f64_math"
            / "ft_f64_math-13.5.tilebc")
    ptx = compile(path, arch="sm_90", emit="ptx").ptx
    assert "cvt.rn.f32.f64" not in ptx and "ex2.approx" not in ptx
    for arch in ("sm_80", "sm_90"):
        assert compile(path, arch=arch, emit="cubin").cubin


if __name__ == "__main__":
    names = sys.argv[1].split(",") if len(sys.argv) > 1 else [*UNARY, "pow", "atan2"]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 16
    RNG = np.random.default_rng(int(sys.argv[3]) if len(sys.argv) > 3 else 20261126)
    print("| op | CUDA bound | inputs | max ulp | worst input | over 1 ulp |")
    for name in names:
        args = inputs(name, count)
        error = ulp_error(emulate(MNEMONIC.get(name, name), *args),
                          exact(REFERENCE[name], *args))
        worst = int(np.argmax(error))
        where = ", ".join(repr(float(v[worst])) for v in args)
        print(f"| {name} | {CUDA_ULPS[name]} | {len(args[0])} | {error[worst]:.3f} | {where} | "
              f"{int((error > 1).sum())} |", flush=True)
