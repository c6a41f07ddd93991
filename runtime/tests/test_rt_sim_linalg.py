"""Linalg kernels on the JIT and the PTX emulator beyond the reference comparison (that one is in
test_rt_sim_families.py): dynamic shared memory and compile errors."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
import test_interp_linalg as reference  # noqa: E402

from tilebc_runtime import sim  # noqa: E402
from tilebc_runtime.compiler import compile  # noqa: E402

HISTOGRAM = ROOT / "fixtures" / "bytecode" / "la_histogram_u8" / "la_histogram_u8-13.5.tilebc"


def test_histogram_uses_dynamic_shared_memory():
    # its 64x256 i32 column sum stages 66560 bytes: over 48 KiB, so the exchange area is the
    # module's `.extern .shared` array and the launch must ask for the bytes
    for arch in ("sm_80", "sm_86", "sm_90", "sm_120"):
        result = compile(HISTOGRAM, arch=arch, emit="ptx")
        assert result.dynamic_shared_bytes == 66560 and result.shared_memory_bytes == 0
        assert ".extern .shared .align 16 .b8 __tilebc_smem[];" in result.ptx.splitlines()
        assert "__tilebc_smem[66560]" not in result.ptx


def test_emulator_needs_the_dynamic_bytes_at_launch(monkeypatch):
    # the emulator sizes the extern array from the launch, like the driver: launched without
    # the bytes, the first exchange store is out of bounds
    from tilebc_runtime.sim import runner
    from tilebc_runtime.sim.errors import SimMemoryError
    real = runner.compiled_kernel

    def without_dynamic_bytes(*args, **kwargs):
        image, threads, dynamic = real(*args, **kwargs)
        assert dynamic == 66560
        return image, threads, 0
    monkeypatch.setattr(runner, "compiled_kernel", without_dynamic_bytes)
    monkeypatch.setattr(reference, "run", sim.run)
    with pytest.raises(SimMemoryError, match="shared"):
        reference.CASES["la_histogram_u8"](reference.module("la_histogram_u8", "13.5"))


def test_over_the_arch_maximum_names_the_op_need_and_limit(monkeypatch):
    # no fixture needs more than an arch allows, so pretend sm_90 had 64 KiB (as an A100-class
    # part with a smaller carveout would): the error names the reduce, its bytes and the limit
    from tilebc_runtime import targets
    from tilebc_runtime.lowering.lowerer import LoweringError
    monkeypatch.setitem(targets.MAX_SHARED_PER_BLOCK_OPTIN, 90, 64 * 1024)
    with pytest.raises(LoweringError) as info:
        compile(HISTOGRAM, arch="sm_90", emit="ptx")
    error = info.value
    assert error.offset is not None and str(HISTOGRAM) in str(error)
    op = next(op for f in reference.module("la_histogram_u8", "13.5").functions
              for op in f.walk() if op.offset == error.offset)
    assert op.name == "reduce"
    assert "66560 bytes" in str(error) and "65536 bytes" in str(error) and "sm_90" in str(error)
    compile(HISTOGRAM, arch="sm_80", emit="ptx")  # the real limits still hold elsewhere


def test_compile_error_names_the_file(tmp_path, monkeypatch):
    # before: "<bytes>: offset 0xbc: ..." (the JIT backend compiles the module's bytes), which is
    # also what `tilebc compile FILE` printed
    from tilebc_runtime import launch, targets
    from tilebc_runtime.cache import CubinCache
    from tilebc_runtime.lowering.lowerer import LoweringError
    monkeypatch.setitem(targets.MAX_SHARED_PER_BLOCK_OPTIN, 90, 64 * 1024)
    loaded = launch.load(HISTOGRAM, cache=CubinCache(tmp_path))
    with pytest.raises(LoweringError, match=f"^{HISTOGRAM}: offset 0x[0-9a-f]+: reduce: "):
        loaded[next(iter(loaded.entries))].compile("sm_90")
