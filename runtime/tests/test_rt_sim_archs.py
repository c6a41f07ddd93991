"""The JIT's code for every architecture it emits, on the emulator against the interpreter.

test_rt_sim_fixtures.py and test_rt_sim_families.py run every fixture kernel's sm_90 code. Most
kernels lower to the same code for every architecture; TMA and wgmma (sm_90 only), fp8
conversions and mma (sm_89 on), griddepcontrol (sm_90 on) and the shared memory a CTA may have
make the differences. Here every kernel is lowered for each other architecture; code that is
sm_90's, or that of an architecture already run, apart from the lines naming the architecture and
the PTX ISA version, is covered by that run, and other code runs on the emulator for its
architecture against the same numpy references.
"""
import functools
import importlib
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from fixture_cases import CASE_MODULES  # noqa: E402

from tilebc_runtime import sim, targets  # noqa: E402
from tilebc_runtime.compiler import compile as jit_compile  # noqa: E402

EMULATED_IN_FULL = "sm_90"
OTHER_ARCHS = [f"sm_{number}" for number in sorted(targets.ARCH_MIN_PTX)
               if f"sm_{number}" != EMULATED_IN_FULL]


def _code(module, arch: str) -> tuple:
    """What the emulator runs for the module on `arch`: its PTX without the lines naming the
    architecture and the PTX ISA (the header's comments are the only lines starting with //),
    and each kernel's launch facts that the PTX does not hold."""
    result = jit_compile(module, None, arch, "ptx")
    ptx = "\n".join(line for line in result.ptx.splitlines()
                    if not line.startswith((".version", ".target", "//")))
    return ptx, tuple((name, info.threads_per_cta, info.dynamic_shared_bytes,
                       repr(info.tensor_maps)) for name, info in sorted(result.kernels.items()))


def _params():
    params = []
    for family in CASE_MODULES:
        reference = importlib.import_module(family)
        params += [(family, name, reference.versions(name)[-1]) for name in sorted(reference.CASES)]
    return params


PARAMS = _params()


@pytest.mark.parametrize("family,name,version", PARAMS, ids=[n for _, n, _ in PARAMS])
def test_each_architectures_own_code_matches_the_references(family, name, version, monkeypatch):
    reference = importlib.import_module(family)
    module = reference.module(name, version)
    sm_90 = _code(module, EMULATED_IN_FULL)
    covered, emulated = {sm_90}, []
    for arch in OTHER_ARCHS:
        code = _code(module, arch)
        if code in covered:
            continue
        covered.add(code)
        emulated.append(arch)
        with monkeypatch.context() as patch:
            patch.setattr(reference, "run", functools.partial(sim.run, arch=arch))
            reference.CASES[name](module)
    # sm_90's TMA and wgmma exist nowhere else: such code must have had another run here
    if re.search(r"^\s*(wgmma\.|cp\.async\.bulk\.tensor)", sm_90[0], re.M):
        assert "sm_80" in emulated, emulated
