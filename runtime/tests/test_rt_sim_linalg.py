"""The linalg fixture kernels, lowered to PTX by the JIT and run on the PTX emulator, match the
numpy references of tests/test_interp_linalg.py (same inputs and tolerances as the interpreter
run; that module's `run` is swapped for `tilebc_runtime.sim.run`). The newest bytecode of every
kernel, plus the oldest for every third one."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
import test_interp_linalg as reference  # noqa: E402

from tilebc_runtime import sim  # noqa: E402
from tilebc_runtime.compiler import compile  # noqa: E402
from tilebc_runtime.lowering.lowerer import LoweringError  # noqa: E402

# Kernels whose tiles need more shared memory than the JIT can declare (48 KiB static): the JIT
# refuses them with a LoweringError naming the op (name -> op); tileiras compiles them.
TOO_MUCH_SHARED = {"la_histogram_u8": "reduce"}

CASES = sorted(reference.CASES)


def _versions(name):
    versions = reference.versions(name)
    oldest = versions[:1] if CASES.index(name) % 3 == 0 and len(versions) > 1 else []
    return versions[-1:] + oldest


PARAMS = [(name, version) for name in CASES for version in _versions(name)]


@pytest.mark.parametrize("name,version", PARAMS, ids=[f"{n}-{v}" for n, v in PARAMS])
def test_linalg_fixture_on_emulator_matches_reference(name, version, monkeypatch):
    monkeypatch.setattr(reference, "run", sim.run)
    if name in TOO_MUCH_SHARED:
        with pytest.raises(LoweringError, match=f"{TOO_MUCH_SHARED[name]}: .*shared memory"):
            reference.CASES[name](reference.module(name, version))
        return
    reference.CASES[name](reference.module(name, version))


def test_shared_memory_overflow_names_the_op_and_offset():
    # before: nvJitLink's "uses too much shared data (0x10400 bytes, 0xc000 max)", no op named
    path = ROOT / "fixtures" / "bytecode" / "la_histogram_u8" / "la_histogram_u8-13.5.tilebc"
    with pytest.raises(LoweringError) as info:
        compile(path, arch="sm_90", emit="ptx")
    error = info.value
    assert error.offset is not None and str(path) in str(error)
    op = next(op for f in reference.module("la_histogram_u8", "13.5").functions
              for op in f.walk() if op.offset == error.offset)
    assert op.name == "reduce"
    assert "66560 bytes" in str(error) and "49152" in str(error)


def test_compile_error_names_the_file(tmp_path):
    # before: "<bytes>: offset 0xbc: ..." (the JIT backend compiles the module's bytes), which is
    # also what `tilebc compile FILE` printed
    from tilebc_runtime import launch
    from tilebc_runtime.cache import CubinCache
    path = ROOT / "fixtures" / "bytecode" / "la_histogram_u8" / "la_histogram_u8-13.5.tilebc"
    loaded = launch.load(path, cache=CubinCache(tmp_path))
    with pytest.raises(LoweringError, match=f"^{path}: offset 0x[0-9a-f]+: reduce: "):
        loaded[next(iter(loaded.entries))].compile("sm_90")
