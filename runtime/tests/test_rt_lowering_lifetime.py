"""Lowering leaves no reference cycles: once its result is dropped, the module it compiled is
freed by reference counting (without the garbage collector walking it first), as tilebc's own
phases free theirs (tests/test_ir_lifetime.py)."""
import gc
import weakref
from pathlib import Path

import pytest

import tilebc
from tilebc.gcpause import collection_paused
from tilebc_runtime.compiler import compile

ROOT = Path(__file__).resolve().parents[2]
# Attention (loop-carried row statistics), f64 math (.const tables), a GEMM, a scan.
KERNELS = ["nn_flash_attention", "ft_f64_math", "la_gemm_large_tile", "la_cumsum_rows"]


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_a_compiled_module_is_freed_without_the_collector(name, arch):
    path = ROOT / "fixtures" / "bytecode" / name / f"{name}-13.5.tilebc"
    gc.collect()
    with collection_paused():  # what is freed here is freed by reference counting
        ref = _compiled_and_dropped(path, arch)
        assert ref() is None, "lowering left a reference cycle that keeps the module alive"


def _compiled_and_dropped(path, arch):
    module = tilebc.load(path)
    result = compile(module, arch=arch, emit="ptx")
    assert result.ptx
    return weakref.ref(module)
