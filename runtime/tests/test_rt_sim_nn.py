"""The `nn` fixture kernels lowered to PTX by the JIT and run on the PTX emulator match the numpy
references of tests/test_interp_nn.py (same inputs, same tolerances), with its `run` swapped for
`tilebc_runtime.sim.run`.  Newest bytecode only: older versions differ in the decoder, which
the interpreter tests cover."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
import test_interp_nn as reference  # noqa: E402

from tilebc_runtime import sim  # noqa: E402

PARAMS = [(name, reference.versions(name)[-1]) for name in sorted(reference.CASES)]


@pytest.mark.parametrize("name,version", PARAMS, ids=[f"{n}-{v}" for n, v in PARAMS])
def test_nn_fixture_on_emulator_matches_reference(name, version, monkeypatch):
    monkeypatch.setattr(reference, "run", sim.run)
    reference.CASES[name](reference.module(name, version))
