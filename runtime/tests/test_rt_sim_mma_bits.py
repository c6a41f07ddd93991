"""The interpreter and the JIT's code on the emulator, on every fixture that multiplies tiles (mmaf,
mmaf_scaled, mmai), with the fixtures' own inputs. The interpreter gives the exact product sum
rounded once; the JIT's code gives the same bits where it rounds once too (tensor-core mma with the
accumulator as C and K = 16 per step, integer mma) and differs in the last bits where it rounds per step (listed in
ROUNDS_PER_STEP: as a GPU does, within the fixtures' tolerance, which tests/test_rt_sim_fixtures.py
checks). tests/test_interp_batch.py checks batched = one block at a time."""
import re
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
import test_interp_fixtures as reference  # noqa: E402

import tilebc  # noqa: E402
from tilebc_runtime import sim  # noqa: E402

MMA_OPS = {"mmaf", "mmaf_scaled", "mmai"}

# Fixtures whose PTX rounds more than once per result (name -> how). The test asserts that they
# still differ, so a JIT that rounds once fails here until its entry is removed.
ROUNDS_PER_STEP = {
    "matmul_bf16_tf32_f64": "f64 and tf32 operands: one fma.rn per K step",
    "mma_scaled_fp8": "scaled operands: one fma.rn per K step",
}


def _newest(name):
    return ROOT / "fixtures" / "bytecode" / name / f"{name}-{reference.versions(name)[-1]}.tilebc"


def _multiplies_tiles(name):
    module = reference.module(name, reference.versions(name)[-1])
    return any(op.name in MMA_OPS for function in module.functions for op in function.walk())


# Read from the stored listings, not decoded: this runs at collection in every worker
# (test_cases_are_found checks it against the decoded IR).
_MMA_OP = re.compile(r"= (?:%s) " % "|".join(sorted(MMA_OPS)))
CASES = [name for name in sorted(reference.CASES)
         if _MMA_OP.search(_newest(name).with_suffix(".dis").read_text())]


def _copy(value):
    return value.copy() if isinstance(value, np.ndarray) else value


class _RunBoth:
    """The interpreter's run, with the emulator run beside it on copies of the arguments."""

    def __init__(self):
        self.differing = []

    def __call__(self, module_or_path, entry, grid, *args, **options):
        emulated = [_copy(a) for a in args]
        sim.run(module_or_path, entry, grid, *emulated, **options)
        report = tilebc.run(module_or_path, entry, grid, *args, **options)
        self.differing += [index for index, (ours, theirs) in enumerate(zip(args, emulated))
                           if isinstance(ours, np.ndarray) and ours.tobytes() != theirs.tobytes()]
        return report


def test_cases_are_found():
    assert CASES == [name for name in sorted(reference.CASES) if _multiplies_tiles(name)]
    assert len(CASES) >= 5, CASES


@pytest.mark.parametrize("name", CASES)
def test_emulator_and_interpreter_agree_bit_for_bit(name, monkeypatch):
    module = reference.module(name, reference.versions(name)[-1])
    run_both = _RunBoth()
    monkeypatch.setattr(reference, "run", run_both)
    reference.CASES[name](module)
    if name in ROUNDS_PER_STEP:
        assert run_both.differing, f"{name} now agrees bit for bit: remove it from ROUNDS_PER_STEP"
    else:
        assert not run_both.differing, f"arguments {run_both.differing} differ"
