"""f64 transcendentals of the JIT (lowering/f64math.py) are double precision: run on the PTX
emulator over thousands of inputs (random ranges, specials, overflow/underflow edges) and
measured in ulps against numpy's float64 functions (themselves within ~1 ulp, so the bound
includes numpy's error). Before f64math the JIT went through f32 and was ~1e9 ulps off."""
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
# Worst measured error against numpy is 1 ulp (exp, exp2, log, log2, sin, cos, sinh, cosh, tanh, pow
# mostly) or 2 ulp (tan, atan2, pow with |y·log x| near 700); CUDA documents 1-2 ulp.
ULP_BOUND = 2.0


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


def emulate(mnemonic, *inputs, elements=None):
    elements = elements or [f64] * len(inputs)
    size = -(-len(inputs[0]) // TILE) * TILE
    padded = [np.resize(v, size) for v in inputs]
    module = elementwise_kernel(mnemonic, elements)
    out = np.zeros(size)
    sim.run(module, module.functions[0].name, (size // TILE,), *padded, out)
    return out[:len(inputs[0])]


def ulp_error(got, want):
    """|got - want| in units of want's ulp; 0 where both are the same value (NaN included)."""
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    spacing = np.spacing(np.abs(want))
    with np.errstate(all="ignore"):
        error = np.abs(got - want) / np.where(spacing > 0, spacing, 5e-324)
    return np.where(same, 0.0, np.where(np.isfinite(error), error, np.inf))


def assert_close(name, inputs, got, want, bound=ULP_BOUND):
    error = ulp_error(got, want)
    worst = int(np.argmax(error))
    assert error[worst] <= bound, (
        f"{name}{tuple(float(v[worst]) for v in inputs)} = {got[worst]!r}, numpy {want[worst]!r} "
        f"({error[worst]:.3g} ulp; {(error > bound).sum()} inputs over {bound})")
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


UNARY = {
    "exp": (np.exp, lambda n: np.concatenate([RNG.uniform(-746, 710, n), [709.782712893384,
                                             709.7827128933841, -708.3964185322641, -745.13,
                                             -745.14, -744.44]])),
    "exp2": (np.exp2, lambda n: np.concatenate([RNG.uniform(-1080, 1030, n),
                                               [1023.9999999999999, 1024.0, -1022.0, -1074.0,
                                                -1074.5, -1075.0, -1022.5]])),
    "log": (np.log, lambda n: np.abs(_spread(n))),
    "log2": (np.log2, lambda n: np.concatenate([np.abs(_spread(n)), 2.0 ** np.arange(-1074, 1024,
                                                                                   37.0)])),
    "sinh": (np.sinh, lambda n: np.concatenate([RNG.uniform(-711, 711, n), [710.4, -710.47,
                                                                            710.5, 1e-20]])),
    "cosh": (np.cosh, lambda n: np.concatenate([RNG.uniform(-711, 711, n), [710.4, 710.5]])),
    "tanh": (np.tanh, lambda n: np.concatenate([RNG.uniform(-3, 3, n), RNG.uniform(-25, 25, n)])),
    "sin": (np.sin, None), "cos": (np.cos, None), "tan": (np.tan, None),
}


def _trig_inputs(n):
    """Within the Cody-Waite range |x| < 2^40, and near multiples of π/2."""
    sign = RNG.choice([-1.0, 1.0], n)
    return np.concatenate([RNG.uniform(-10, 10, n), sign * np.exp2(RNG.uniform(-30, 39.9, n)),
                           np.arange(1, 200) * (np.pi / 2), np.arange(1, 200) * (np.pi / 4)])


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_double_precision(name):
    reference, make = UNARY[name]
    n = 1024
    x = np.concatenate([EDGES, (make or _trig_inputs)(n), _spread(n // 4)])
    if make is None:
        x = x[np.abs(x) < 2.0 ** 40]
    got = emulate(name, x)
    with np.errstate(all="ignore"):
        want = reference(x)
    assert_close(name, (x,), got, want)


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_trig_huge_arguments_use_payne_hanek(name):
    """|x| >= 2^40 takes the table-driven reduction: random huge arguments stay within the bound;
    the hardest double (closest to a multiple of π/2, reduced argument ~2^-61) loses a few bits
    because the reduction sums in double-double (documented in f64math)."""
    n = 512
    x = np.concatenate([RNG.choice([-1.0, 1.0], n) * np.exp2(RNG.uniform(39.5, 1023.9, n)),
                        [2.0 ** 40, -(2.0 ** 40), np.nextafter(2.0 ** 40, 0), 1e22, -1e300,
                         1.7976931348623157e308, 2.0 ** 53 + 2, INF, -INF, NAN]])
    got = emulate(name, x)
    with np.errstate(invalid="ignore"):
        want = getattr(np, name)(x)
    assert_close(name, (x,), got, want)
    hardest = np.array([5.319372648326541e+255])
    assert_close(name, (hardest,), emulate(name, hardest), getattr(np, name)(hardest), bound=16)


def test_pow_double_precision_and_c99_specials():
    n = 1024
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
    got = emulate("fpowf", x, y)
    with np.errstate(all="ignore"):
        want = np.power(x, y)
    assert_close("pow", (x, y), got, want)


def test_fpowi_with_integer_exponent():
    x = np.concatenate([[0.0, -0.0, INF, -INF, NAN, -1.0, 2.0, -2.0, 0.5],
                        RNG.uniform(-3, 3, 512)])
    exponent = np.concatenate([[-1, -1, 3, 3, 0, 7, 1023, -1074 // 2, -1074],
                               RNG.integers(-100, 100, 512)]).astype(np.int32)
    got = emulate("fpowi", x, exponent, elements=[f64, i32])
    with np.errstate(all="ignore"):
        want = np.power(x, exponent.astype(np.float64))
    assert_close("fpowi", (x, exponent), got, want)


def test_atan2_double_precision_and_octants():
    n = 1024
    specials = np.array([0.0, -0.0, INF, -INF, NAN, 1.0, -1.0, 2.0, -3.0, 5e-324, -1e308, 1e308])
    sy, sx = (v.ravel() for v in np.meshgrid(specials, specials))
    sign = lambda: RNG.choice([-1.0, 1.0], n)  # noqa: E731
    y = np.concatenate([sy, RNG.standard_normal(n), sign() * np.exp(RNG.uniform(-700, 700, n)),
                        RNG.uniform(-1, 1, n)])
    x = np.concatenate([sx, RNG.standard_normal(n), sign() * np.exp(RNG.uniform(-700, 700, n)),
                        RNG.uniform(-1, 1, n)])
    got = emulate("atan2", y, x)
    with np.errstate(all="ignore"):
        want = np.arctan2(y, x)
    assert_close("atan2", (y, x), got, want)


def test_f64_math_fixture_links_and_stays_in_f64():
    """The fixture's PTX links for sm_80 and sm_90 and does no f64 -> f32 narrowing."""
    from pathlib import Path
    path = (Path(__file__).resolve().parents[2] / "fixtures" / "bytecode" / "ft_f64_math"
            / "ft_f64_math-13.5.tilebc")
    ptx = compile(path, arch="sm_90", emit="ptx").ptx
    assert "cvt.rn.f32.f64" not in ptx and "ex2.approx" not in ptx
    for arch in ("sm_80", "sm_90"):
        assert compile(path, arch=arch, emit="cubin").cubin
