"""Interpreter time vs numpy for vadd, row softmax and a 512x512x512 f16 matmul.

Each kernel runs batched (all tile blocks at once, the default), one tile block at a time
(batch=False) and as plain numpy, alternating within every round (best of --repeat rounds), so
all sides share the machine's conditions; the load average is printed with the figures.

The kernels are written in cuTile Python and exported to bytecode here (no GPU needed); the numpy
baselines compute the same result directly. Run:
    PYTHONPATH=.:runtime .venv/bin/python benchmarks/bench_interp.py [--repeat N]
"""
import argparse
import io
import os
import time

# One BLAS thread for both sides: on a shared machine a threaded BLAS makes small matmuls (the
# interpreter's per-tile mma) and the baseline's one big matmul swing by 10-100x between runs.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

import cuda.tile as ct
from cuda.tile.compilation import (ArrayConstraint, CallingConvention, KernelSignature,
                                   export_kernel)

import tilebc
from tilebc.interp import run


@ct.kernel
def vadd(a, b, c, T: ct.Constant[int]):
    i = ct.bid(0)
    ct.store(c, index=(i,), tile=ct.load(a, index=(i,), shape=(T,)) +
             ct.load(b, index=(i,), shape=(T,)))


@ct.kernel
def softmax(x, y, TM: ct.Constant[int], N: ct.Constant[int]):
    i = ct.bid(0)
    rows = ct.load(x, index=(i, 0), shape=(TM, N))
    shifted = ct.exp(rows - ct.max(rows, axis=1, keepdims=True))
    ct.store(y, index=(i, 0), tile=shifted / ct.sum(shifted, axis=1, keepdims=True))


@ct.kernel
def matmul(a, b, c, KT: ct.Constant[int], TM: ct.Constant[int], TN: ct.Constant[int],
           TK: ct.Constant[int]):
    acc = ct.zeros((TM, TN), ct.float32)
    for k in range(KT):
        acc = ct.mma(ct.load(a, index=(ct.bid(0), k), shape=(TM, TK)),
                     ct.load(b, index=(k, ct.bid(1)), shape=(TK, TN)), acc)
    ct.store(c, index=(ct.bid(0), ct.bid(1)), tile=acc)


def _array(dtype, ndim):
    return ArrayConstraint(dtype, ndim, index_dtype=ct.int32, stride_lower_bound_incl=0,
                           alias_groups=(), may_alias_internally=False,
                           shape_constant=(None,) * ndim, stride_constant=(None,) * ndim,
                           shape_divisible_by=1, base_addr_divisible_by=1)


def export(kernel, params):
    buffer = io.BytesIO()
    export_kernel(kernel, [KernelSignature(params, CallingConvention.cutile_python_v1())], buffer,
                  output_format="tileir_bytecode", bytecode_version="13.4", gpu_code=None)
    return tilebc.load(buffer.getvalue())


def best_alternating(functions, repeat):
    """Best time of each function over `repeat` rounds; each round runs every function once, in
    turn, so all sides see the same machine conditions."""
    times = [[] for _ in functions]
    for _ in range(repeat):
        for fn, spent in zip(functions, times):
            start = time.perf_counter()
            fn()
            spent.append(time.perf_counter() - start)
    return [min(spent) for spent in times]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    load_before = os.getloadavg()[0]

    f32 = ct.float32
    n = 1 << 20
    a, b, c = (rng.random(n, dtype=np.float32) for _ in range(3))
    module = export(vadd, [_array(f32, 1)] * 3 + [4096])
    times = best_alternating([lambda: run(module, None, (n // 4096,), a, b, c),
                              lambda: run(module, None, (n // 4096,), a, b, c, batch=False),
                              lambda: np.add(a, b, out=c)], options.repeat)
    assert np.array_equal(c, a + b)
    rows.append(("vadd 2^20 f32, 4096-wide tiles", *times))

    x = rng.standard_normal((4096, 256)).astype(np.float32)
    y = np.zeros_like(x)
    module = export(softmax, [_array(f32, 2)] * 2 + [64, 256])

    shifted, expected = np.empty_like(x), np.empty_like(x)

    def numpy_softmax():  # numpy at its best: float32 exp, no allocation of big arrays
        np.subtract(x, x.max(axis=1, keepdims=True), out=shifted)
        np.exp(shifted, out=shifted)
        return np.divide(shifted, shifted.sum(axis=1, keepdims=True), out=expected)
    times = best_alternating([lambda: run(module, None, (4096 // 64,), x, y),
                              lambda: run(module, None, (4096 // 64,), x, y, batch=False),
                              numpy_softmax,
                              lambda: run(module, None, (4096 // 64,), x, y, exact_math=True)],
                             options.repeat)
    np.testing.assert_allclose(y, numpy_softmax(), rtol=1e-5, atol=1e-7)
    rows.append(("softmax 4096x256 f32, 64x256 tiles", *times[:3]))
    rows.append(("softmax, exact_math=True (float64 exp)", times[3], None, times[2]))

    m = 512
    a = rng.standard_normal((m, m)).astype(np.float16)
    b = rng.standard_normal((m, m)).astype(np.float16)
    c = np.zeros((m, m), np.float32)
    module = export(matmul, [_array(ct.float16, 2)] * 2 + [_array(f32, 2), 8, 128, 128, 64])
    a32, b32, c32 = (np.empty((m, m), np.float32) for _ in range(3))

    def numpy_matmul():  # widen into preallocated arrays, multiply into a preallocated result
        np.copyto(a32, a)
        np.copyto(b32, b)
        return np.matmul(a32, b32, out=c32)
    times = best_alternating([lambda: run(module, None, (4, 4), a, b, c),
                              lambda: run(module, None, (4, 4), a, b, c, batch=False),
                              numpy_matmul], options.repeat)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-4,
                               atol=1e-3)
    rows.append(("matmul 512^3 f16->f32, 128x128x64 tiles", *times))
    report = run(module, None, (4, 4), a, b, c)
    assert report.batched, report.reason  # all three kernels must take the batched path

    print(f"load average (1 min) before / after: {load_before:.2f} / {os.getloadavg()[0]:.2f}")
    print(f"{'kernel':44} {'batched ms':>10} {'blocks ms':>10} {'numpy ms':>9} {'ratio':>6}")
    for name, t_i, t_b, t_n in rows:
        blocks = f"{t_b * 1e3:10.3f}" if t_b is not None else f"{'-':>10}"
        print(f"{name:44} {t_i * 1e3:10.3f} {blocks} {t_n * 1e3:9.3f} {t_i / t_n:5.1f}x")


if __name__ == "__main__":
    main()

# Figures: benchmarks/results/interp.md
