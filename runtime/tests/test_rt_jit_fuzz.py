"""The JIT on mutated, verified fixtures: `compile(..., emit="ptx")` for sm_80 and sm_90 returns
PTX (nvJitLink links a sample of it) or raises a TilebcError, never another exception, and each
compile stays under `fuzz.jit.COMPILE_SECONDS`. The long pass: `python -m fuzz.run_jit`."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fuzz import jit, mutate  # noqa: E402


@pytest.fixture(scope="module")
def pool():
    return mutate.corpus()


@pytest.mark.parametrize("block", range(5))
def test_jit_fuzz_sample(pool, block):
    """100 mutated inputs per block, every 5th linked: no foreign exception, no overrun, and
    mutants that load mostly compile (a LoweringError is allowed, but should stay rare)."""
    failures, loaded, compiled, linked = [], 0, 0, 0
    for index in range(block * 100, (block + 1) * 100):
        result = jit.check(jit.make_case(23, index, pool), link=index % 5 == 0, interpret=False)
        loaded += result.loaded
        compiled += result.stages.get("ptx-sm_90") == "ok"
        linked += result.stages.get("link-sm_90") == "ok"
        failures += [(index, stage, text.splitlines()[-1]) for stage, text in result.failures]
    assert failures == []
    assert loaded >= 40 and compiled >= loaded * 0.8 and linked >= 5


def test_interrupted_stage_is_reported_as_overrun(pool):
    """The harness's own timer: a stage past its budget is a failure, not a hang."""
    result = jit.Result(jit.make_case(23, 0, pool))

    def spin():
        while True:
            pass
    jit._stage(result, "spin", 0.2, spin)
    assert result.stages["spin"] == "overrun" and result.failures[0][0] == "spin"


def test_foreign_exception_is_reported(pool):
    result = jit.Result(jit.make_case(23, 0, pool))
    jit._stage(result, "boom", 1.0, lambda: {}["missing"])
    assert result.stages["boom"] == "foreign" and "KeyError" in result.failures[0][1]
