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

from large_exchange import EXCHANGE_BYTES, TRANSPOSE  # noqa: E402


def test_large_exchange_uses_dynamic_shared_memory():
    # a 64x256 i32 transpose stages 65536 bytes: over 48 KiB, so the exchange area is the
    # module's `.extern .shared` array and the launch must ask for the bytes
    for arch in ("sm_80", "sm_86", "sm_90", "sm_120"):
        result = compile(TRANSPOSE, arch=arch, emit="ptx")
        assert result.dynamic_shared_bytes == EXCHANGE_BYTES and result.shared_memory_bytes == 0
        assert ".extern .shared .align 16 .b8 __tilebc_smem[];" in result.ptx.splitlines()
        assert f"__tilebc_smem[{EXCHANGE_BYTES}]" not in result.ptx


def test_emulator_needs_the_dynamic_bytes_at_launch(monkeypatch):
    # the emulator sizes the extern array from the launch, like the driver: with the bytes the
    # transpose is right; launched without them, the first exchange store is out of bounds
    import numpy as np
    import tilebc
    from tilebc_runtime.sim import runner
    from tilebc_runtime.sim.errors import SimMemoryError
    module = tilebc.load(TRANSPOSE)
    source = np.arange(64 * 256, dtype=np.int32).reshape(64, 256)
    target = np.zeros((256, 64), np.int32)
    from tilebc.interp import Pointer
    sim.run(module, "transpose", (1,), Pointer(source), Pointer(target), arch="sm_90")
    np.testing.assert_array_equal(target, source.T)
    real = runner.compiled_kernel

    def without_dynamic_bytes(*args, **kwargs):
        image, threads, dynamic, maps = real(*args, **kwargs)
        assert dynamic == EXCHANGE_BYTES
        return image, threads, 0, maps
    monkeypatch.setattr(runner, "compiled_kernel", without_dynamic_bytes)
    with pytest.raises(SimMemoryError, match="shared"):
        sim.run(module, "transpose", (1,), Pointer(source), Pointer(np.zeros((256, 64), np.int32)),
                arch="sm_90")


def test_over_the_arch_maximum_names_the_op_need_and_limit(monkeypatch):
    # no fixture needs more than an arch allows, so pretend sm_90 had 60 KiB (as a part with a
    # smaller carveout would): the error names the permute, its bytes and the limit
    from tilebc_runtime import targets
    from tilebc_runtime.lowering.lowerer import LoweringError
    import tilebc
    monkeypatch.setitem(targets.MAX_SHARED_PER_BLOCK_OPTIN, 90, 60 * 1024)
    with pytest.raises(LoweringError) as info:
        compile(TRANSPOSE, arch="sm_90", emit="ptx")
    error = info.value
    assert error.offset is not None and str(TRANSPOSE) in str(error)
    op = next(op for f in tilebc.load(TRANSPOSE).functions
              for op in f.walk() if op.offset == error.offset)
    assert op.name == "permute"
    assert f"{EXCHANGE_BYTES} bytes" in str(error) and "61440 bytes" in str(error) \
        and "sm_90" in str(error)
    compile(TRANSPOSE, arch="sm_80", emit="ptx")  # the real limits still hold elsewhere


def test_compile_error_names_the_file(tmp_path, monkeypatch):
    # before: "<bytes>: offset 0xbc: ..." (the JIT backend compiles the module's bytes), which is
    # also what `tilebc compile FILE` printed
    from tilebc_runtime import launch, targets
    from tilebc_runtime.cache import CubinCache
    from tilebc_runtime.lowering.lowerer import LoweringError
    monkeypatch.setitem(targets.MAX_SHARED_PER_BLOCK_OPTIN, 90, 60 * 1024)
    loaded = launch.load(TRANSPOSE, cache=CubinCache(tmp_path))
    with pytest.raises(LoweringError, match=f"^{TRANSPOSE}: offset 0x[0-9a-f]+: permute: "):
        loaded[next(iter(loaded.entries))].compile("sm_90")
