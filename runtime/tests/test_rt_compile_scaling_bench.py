"""The compile-scaling benchmark's kernel is a real kernel: it verifies, the interpreter computes
what its docstring says, and the JIT lowers it."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

import tilebc
from tilebc.interp import run
from tilebc.interp.api import Pointer
from tilebc_runtime.compiler import compile

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location(
        "bench_compile_scaling", ROOT / "benchmarks" / "bench_compile_scaling.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("ops", [1, 4])
def test_sweep_kernel_verifies_and_runs_in_the_interpreter(ops):
    bench = _bench()
    elements, blocks = 64, 2
    data = bench.elementwise_kernel(elements, ops)
    module = tilebc.load(data)  # decodes and verifies
    x = np.linspace(-1.5, 2.0, elements * blocks, dtype=np.float32)
    expected = x.copy()
    for index in range(ops):
        expected = (expected + x) if index % 2 == 0 else (expected * x)
    run(module, "ew", (blocks,), Pointer(x), np.int32(x.size))
    np.testing.assert_array_equal(x, expected.astype(np.float32))


def test_sweep_kernel_lowers_and_ptx_grows_with_ops():
    bench = _bench()
    sizes = [len(compile(bench.elementwise_kernel(1024, ops), arch="sm_90", emit="ptx").ptx)
             for ops in (1, 4)]
    assert sizes[0] < sizes[1]


def test_size_names_round_trip():
    bench = _bench()
    for text in ("1K", "64K", "1M", "300"):
        assert bench.size_name(bench.parse_size(text)) == text
