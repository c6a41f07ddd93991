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

CASES = sorted(reference.CASES)


def _versions(name):
    versions = reference.versions(name)
    oldest = versions[:1] if CASES.index(name) % 3 == 0 and len(versions) > 1 else []
    return versions[-1:] + oldest


PARAMS = [(name, version) for name in CASES for version in _versions(name)]


@pytest.mark.parametrize("name,version", PARAMS, ids=[f"{n}-{v}" for n, v in PARAMS])
def test_linalg_fixture_on_emulator_matches_reference(name, version, monkeypatch):
    monkeypatch.setattr(reference, "run", sim.run)
    reference.CASES[name](reference.module(name, version))
