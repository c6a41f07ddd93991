"""The JIT's f32 pow and atan2 on C99's special values (NaN, ±0, ±inf, ±1), run on the PTX
emulator through the sci fixtures sci_gamma_correct (f32 entry: Out = X ** gamma per channel)
and sci_complex_polar (atan2(im, re)), against the interpreter, which follows C / numpy.

Regressions: pow(±1, ±inf) and pow(1, NaN) were NaN, pow(-0, odd < 0) was +inf, pow(-inf, 0.5)
was NaN; atan2 ignored NaN operands, gave 0 for atan2(±0, -0) and NaN for atan2(±inf, ±inf)."""
import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from test_interp_fixtures import entry, module  # noqa: E402

from tilebc.interp import run as interp_run  # noqa: E402
from tilebc_runtime.sim import run as sim_run  # noqa: E402

SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -3.0]


def same(actual, expected):
    """Bitwise for non-finite and zero results (sign of zero included), 1e-5 relative else."""
    a, e = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    exact = ~np.isfinite(e) | (e == 0)
    with np.errstate(invalid="ignore"):  # inf - inf in the branch np.where does not take
        close = np.abs(a - e) <= 1e-5 * np.abs(e)
    return np.where(exact, ((a == e) & (np.signbit(a) == np.signbit(e))) | (np.isnan(a) & np.isnan(e)),
                    close)


@pytest.mark.parametrize("gamma", SPECIALS)
def test_pow_specials_match_interpreter(gamma):
    mod = module("sci_gamma_correct", "13.5")
    x = np.array([[v] * 3 for v in SPECIALS + [-8.0, 1e-30]], np.float32)
    g = np.full(3, gamma, np.float32)
    expected, actual = np.zeros_like(x), np.zeros_like(x)
    interp_run(mod, entry(mod, 1), (1,), x, g, expected)
    sim_run(mod, entry(mod, 1), (1,), x, g, actual)
    ok = same(actual, expected)
    assert ok.all(), [(float(x[i, 0]), float(actual[i, 0]), float(expected[i, 0]))
                      for i in np.nonzero(~ok.all(axis=1))[0]]


def test_atan2_specials_match_interpreter():
    mod = module("sci_complex_polar", "13.5")
    z = np.array(list(itertools.product(SPECIALS, SPECIALS)), np.float32)   # (re, im) rows
    expected, actual = np.zeros_like(z), np.zeros_like(z)
    interp_run(mod, entry(mod), (len(z) // 16 + 1,), z, expected)
    sim_run(mod, entry(mod), (len(z) // 16 + 1,), z, actual)
    assert same(expected[:, 1], np.arctan2(z[:, 1], z[:, 0])).all()
    ok = same(actual[:, 1], expected[:, 1])
    assert ok.all(), [(z[i].tolist(), float(actual[i, 1]), float(expected[i, 1]))
                      for i in np.nonzero(~ok)[0]]
