"""Targeted accuracy sweeps of the JIT's f32 math on the PTX emulator, beyond the 131,072-input
table of runtime/tests/test_rt_f32math.py (same harness: `.approx` instructions at their
documented worst case). Results: benchmarks/results/jit-math-accuracy.md.

    PYTHONPATH=.:runtime python benchmarks/f32math_sweeps.py [NAME,...]

NAMEs: log, exp, tanh, sinhcosh, pow, pow_near_one, pow_edges (default: all).

`log` runs every f32 in [0.5, 2) through log and log2 (2 x 16.8M inputs: tens of CPU minutes).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime" / "tests"))
import test_rt_f32math as harness  # noqa: E402

CHUNK = 1 << 20


def run(name, values, label):
    """Print the max ulp of `name` over `values` (an array, or a tuple for pow), in chunks."""
    arrays = values if isinstance(values, tuple) else (values,)
    worst, where, nans = 0, None, 0
    start_time = time.time()
    for start in range(0, len(arrays[0]), CHUNK):
        inputs = []
        for array in arrays:
            part = array[start:start + CHUNK]
            pad = (-len(part)) % harness.TILE
            inputs.append(np.concatenate([part, np.ones(pad, np.float32)]) if pad else part)
        inputs = tuple(inputs)
        with harness.documented_approx_error():
            got = harness.emulate(name, inputs)
        ulps, at, mismatched = harness.max_ulps(name, inputs, got)
        nans += mismatched
        if ulps > worst:
            worst, where = ulps, at
    print(f"{name} {label}: {len(arrays[0])} inputs, max {worst} ulp at {where}, "
          f"nan mismatches {nans}, {time.time() - start_time:.0f}s", flush=True)


def every_f32(low: float, high: float) -> np.ndarray:
    """Every f32 in [low, high) for 0 < low < high."""
    first, last = (int(np.array([v], np.float32).view(np.uint32)[0]) for v in (low, high))
    return np.arange(first, last, dtype=np.uint32).view(np.float32)


def sweep_log():
    values = every_f32(0.5, 2.0)
    run("log", values, "every f32 in [0.5, 2)")
    run("log2", values, "every f32 in [0.5, 2)")


def sweep_exp():
    rng = np.random.default_rng(123)
    run("exp", rng.uniform(-104, 89, 1 << 20).astype(np.float32), "1M uniform in [-104, 89]")
    run("exp", every_f32(87.0, 89.0), "every f32 in [87, 89)")
    run("exp", -every_f32(87.0, 104.0)[::4], "every 4th f32 in (-104, -87]")


def sweep_tanh():
    run("tanh", every_f32(0.5, 1.0)[::4], "every 4th f32 in [0.5, 1)")


def sweep_sinhcosh():
    rng = np.random.default_rng(123)
    values = rng.uniform(-90, 90, 1 << 19).astype(np.float32)
    run("sinh", values, "512K uniform in [-90, 90]")
    run("cosh", values, "512K uniform in [-90, 90]")
    values = every_f32(0.5, 2.0)[::16]
    run("sinh", values, "every 16th f32 in [0.5, 2)")
    run("cosh", values, "every 16th f32 in [0.5, 2)")


def sweep_pow():
    rng = np.random.default_rng(123)
    n = 1 << 20
    x = np.exp2(rng.uniform(-20, 20, n)).astype(np.float32)
    y = rng.uniform(-6, 6, n).astype(np.float32)
    run("pow", (x, y), "1M x=2^U(-20,20), y=U(-6,6)")
    x = (1 + rng.uniform(-0.1, 0.1, n)).astype(np.float32)
    y = rng.uniform(-1400, 1400, n).astype(np.float32)
    run("pow", (x, y), "1M x=1+U(-0.1,0.1), y=U(-1400,1400)")


def sweep_pow_near_one():
    """y = t / log2 x, so that the result stays finite while y grows as x nears 1."""
    rng = np.random.default_rng(5)
    n = 1 << 15

    def check(label, x, t_max=120):
        y = (rng.uniform(-t_max, t_max, n) / np.log2(x.astype(np.float64))).astype(np.float32)
        run("pow", (x, y), f"{label}, |y log2 x| <= {t_max}")
    k = rng.integers(-256, 256, n)
    k[k == 0] = 1
    check("x = 1 + k 2^-23, |k| <= 256", (1 + k * 2.0 ** -23).astype(np.float32))
    check("x within 1% of 1", (1 + rng.uniform(-0.01, 0.01, n)).astype(np.float32))
    check("x within 3% of 1", (1 + rng.uniform(-0.03, 0.03, n)).astype(np.float32))
    check("x in [0.5, 2)", rng.uniform(0.5, 2, n).astype(np.float32))
    check("x in [0.5, 2)", rng.uniform(0.5, 2, n).astype(np.float32), 150)
    check("x over all binades", np.exp2(rng.uniform(-126, 127, n)).astype(np.float32), 150)


def sweep_pow_edges():
    rng = np.random.default_rng(11)
    n = 1 << 15
    x = rng.integers(1, 0x800000, n).astype(np.uint32).view(np.float32)
    lx = np.log2(x.astype(np.float64))
    run("pow", (x, (rng.uniform(-150, 128, n) / lx).astype(np.float32)),
        "subnormal x, y log2 x in [-150, 128]")
    x = np.exp2(rng.uniform(-30, 30, n)).astype(np.float32)
    lx = np.log2(x.astype(np.float64))
    run("pow", (x, (rng.uniform(-152, -120, n) / lx).astype(np.float32)),
        "results near underflow")
    run("pow", (x, (rng.uniform(124, 128.5, n) / lx).astype(np.float32)),
        "results near overflow")
    x = -np.exp2(rng.uniform(-10, 10, n)).astype(np.float32)
    run("pow", (x, np.rint(rng.uniform(-40, 40, n)).astype(np.float32)),
        "negative x, integral y")


SWEEPS = {"log": sweep_log, "exp": sweep_exp, "tanh": sweep_tanh, "sinhcosh": sweep_sinhcosh,
          "pow": sweep_pow, "pow_near_one": sweep_pow_near_one, "pow_edges": sweep_pow_edges}

if __name__ == "__main__":
    chosen = sys.argv[1].split(",") if len(sys.argv) > 1 else list(SWEEPS)
    unknown = [name for name in chosen if name not in SWEEPS]
    if unknown:
        sys.exit(f"f32math_sweeps: unknown sweep {', '.join(unknown)}; "
                 f"choose from {', '.join(SWEEPS)}")
    with np.errstate(all="ignore"):
        for name in chosen:
            SWEEPS[name]()
