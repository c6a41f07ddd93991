"""Which math functions may run in numpy's float32 directly for f32 tiles.

The exact path (interp/ops/math.py) evaluates every function in float64 and rounds once: the
correctly rounded result except in rare double-rounding cases. numpy's float32 versions are ~10x
faster (SIMD, no widening) but not correctly rounded. The device is not either: the CUDA
programming guide bounds each single-precision function by a maximum distance, in ulps, from the
correctly rounded result. A function runs in float32 when numpy's float32 version stays within
that device bound (`DEVICE_ULPS`), so the interpreter's answer is one the device may give.

numpy picks its float32 kernels by CPU (AVX512, AVX2, baseline), so the bound is measured on the
running machine: the first use of a function compares numpy's float32 result with the float64
result rounded to float32 on a fixed sample (`SAMPLE_SIZE` inputs: a grid over the function's
useful range plus random bit patterns) and keeps the exact path when any input is off by more than
the bound. tests/test_interp_speed.py measures the same over ~1 million inputs.
Measured on the development machine (numpy 2.4, AVX512_SKX), max ulps from the float64-rounded
result over every 97th float32 bit pattern: exp 2, sin 1, cos 1, tanh 1, sinh 1, cosh 2 (and, not
eligible because over the device bound: exp2 3, log 3, log2 2, tan 4).

`Options(exact_math=True)` (`run(..., exact_math=True)`) keeps every function on the exact path.
"""
from __future__ import annotations

import threading
from typing import Callable, Dict

import numpy as np

from ..ops.table import by_mnemonic

# CUDA programming guide, single-precision functions: max ulps from the correctly rounded result.
DEVICE_ULPS: Dict[str, int] = by_mnemonic({"exp": 2, "sin": 2, "cos": 2, "tanh": 2, "sinh": 3,
                                            "cosh": 2}, "device ulp bounds")
FUNCTIONS: Dict[str, Callable] = by_mnemonic({"exp": np.exp, "sin": np.sin, "cos": np.cos,
                                              "tanh": np.tanh, "sinh": np.sinh, "cosh": np.cosh},
                                             "float32 math functions")
SAMPLE_SIZE = 1 << 16

_verdicts: Dict[str, bool] = {}
_lock = threading.Lock()


def ulp_distance(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in float32 ulps (steps between adjacent floats; +0 and -0 are one value).
    Both must be float32; NaN positions must match (checked by the caller)."""
    def ordered(values):
        bits = values.view(np.int32).astype(np.int64)
        return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)
    return np.abs(ordered(got) - ordered(want))


def max_ulps(name: str, inputs: np.ndarray) -> int:
    """Largest distance of numpy's float32 `name` from the float64 result rounded to float32
    over `inputs` (float32); a NaN or infinity where the other has none counts as unbounded."""
    with np.errstate(all="ignore"):
        want = getattr(np, name)(inputs.astype(np.float64)).astype(np.float32)
        got = FUNCTIONS[name](inputs)
    if not np.array_equal(np.isnan(got), np.isnan(want)):
        return np.iinfo(np.int64).max
    numbers = ~np.isnan(want)
    return int(ulp_distance(got[numbers], want[numbers]).max(initial=0))


def sample() -> np.ndarray:
    """The self-check's inputs: a dense grid over [-100, 100] (where exp and the hyperbolic
    functions leave and re-enter the finite range) and random bit patterns of every magnitude."""
    grid = np.linspace(-100, 100, SAMPLE_SIZE // 2, dtype=np.float32)
    bits = np.random.default_rng(2024).integers(0, 1 << 32, SAMPLE_SIZE // 2, dtype=np.uint64)
    return np.concatenate([grid, bits.astype(np.uint32).view(np.float32)])


def float32_ok(name: str) -> bool:
    """Whether numpy's float32 `name` meets the device bound on this machine (cached)."""
    verdict = _verdicts.get(name)
    if verdict is None:
        if name not in DEVICE_ULPS:
            verdict = False
        else:
            verdict = max_ulps(name, sample()) <= DEVICE_ULPS[name]
        with _lock:
            _verdicts[name] = verdict
    return verdict
