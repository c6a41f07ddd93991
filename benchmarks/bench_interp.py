"""Interpreter time vs numpy for vadd, row softmax and a 512x512x512 f16 matmul.

Each kernel runs batched (all tile blocks at once, the default) and one tile block at a time
(batch=False), back to back under the same conditions.

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


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []

    f32 = ct.float32
    n = 1 << 20
    a, b, c = (rng.random(n, dtype=np.float32) for _ in range(3))
    module = export(vadd, [_array(f32, 1)] * 3 + [4096])
    t_interp = best(lambda: run(module, None, (n // 4096,), a, b, c), options.repeat)
    t_blocks = best(lambda: run(module, None, (n // 4096,), a, b, c, batch=False), options.repeat)
    t_numpy = best(lambda: np.add(a, b, out=c), options.repeat)
    assert np.array_equal(c, a + b)
    rows.append(("vadd 2^20 f32, 4096-wide tiles", t_interp, t_blocks, t_numpy))

    x = rng.standard_normal((4096, 256)).astype(np.float32)
    y = np.zeros_like(x)
    module = export(softmax, [_array(f32, 2)] * 2 + [64, 256])

    def numpy_softmax():
        shifted = np.exp(x - x.max(axis=1, keepdims=True))
        return shifted / shifted.sum(axis=1, keepdims=True)
    t_interp = best(lambda: run(module, None, (4096 // 64,), x, y), options.repeat)
    t_blocks = best(lambda: run(module, None, (4096 // 64,), x, y, batch=False), options.repeat)
    t_numpy = best(numpy_softmax, options.repeat)
    np.testing.assert_allclose(y, numpy_softmax(), rtol=1e-5, atol=1e-7)
    rows.append(("softmax 4096x256 f32, 64x256 tiles", t_interp, t_blocks, t_numpy))

    m = 512
    a = rng.standard_normal((m, m)).astype(np.float16)
    b = rng.standard_normal((m, m)).astype(np.float16)
    c = np.zeros((m, m), np.float32)
    module = export(matmul, [_array(ct.float16, 2)] * 2 + [_array(f32, 2), 8, 128, 128, 64])
    t_interp = best(lambda: run(module, None, (4, 4), a, b, c), options.repeat)
    t_blocks = best(lambda: run(module, None, (4, 4), a, b, c, batch=False), options.repeat)
    t_numpy = best(lambda: a.astype(np.float32) @ b.astype(np.float32), options.repeat)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-4,
                               atol=1e-3)
    rows.append(("matmul 512^3 f16->f32, 128x128x64 tiles", t_interp, t_blocks, t_numpy))
    report = run(module, None, (4, 4), a, b, c)
    assert report.batched, report.reason  # all three kernels must take the batched path

    print(f"{'kernel':44} {'batched ms':>10} {'blocks ms':>10} {'numpy ms':>9} {'ratio':>6}")
    for name, t_i, t_b, t_n in rows:
        print(f"{name:44} {t_i * 1e3:10.3f} {t_b * 1e3:10.3f} {t_n * 1e3:9.3f} "
              f"{t_i / t_n:5.1f}x")


if __name__ == "__main__":
    main()

# Figures: benchmarks/results/interp.md
