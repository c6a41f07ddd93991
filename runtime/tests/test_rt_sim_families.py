"""The kernel families (fixtures/kernels/<family>.py), lowered to PTX by the JIT and run on the PTX
emulator, match the numpy references of their tests/test_interp_<family>.py (same inputs and
tolerances as the interpreter run; the family module's `run` is swapped for `tilebc_runtime.sim.run`).
The newest bytecode of every kernel, plus the oldest for every third one."""
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from fixture_cases import CASE_MODULES  # noqa: E402

from tilebc_runtime import sim  # noqa: E402


def _params():
    params = []
    for family in CASE_MODULES[1:]:  # the probes have runtime/tests/test_rt_sim_fixtures.py
        reference = importlib.import_module(family)
        for index, name in enumerate(sorted(reference.CASES)):
            versions = reference.versions(name)
            oldest = versions[:1] if index % 3 == 0 and len(versions) > 1 else []
            params += [(family, name, version) for version in versions[-1:] + oldest]
    return params


PARAMS = _params()


@pytest.mark.parametrize("family,name,version", PARAMS, ids=[f"{n}-{v}" for _, n, v in PARAMS])
def test_family_kernel_on_emulator_matches_reference(family, name, version, monkeypatch):
    reference = importlib.import_module(family)
    monkeypatch.setattr(reference, "run", sim.run)
    reference.CASES[name](reference.module(name, version))
