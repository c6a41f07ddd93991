"""The CPU interpreter on mutated, verified fixtures: it runs or raises a tilebc error, in bounded
time (`max_iterations`). The long pass is `python -m fuzz.run_jit` (fuzz/results/jit-*.md)."""
import time

import numpy as np
import pytest

import tilebc
from tilebc.errors import TilebcError
from tilebc.interp.errors import ExecutionError
from tilebc.ir.attrs import DenseElementsAttr

from conftest import FIXTURE_DIR

pytest.importorskip("tilebc_runtime")  # fuzz.jit binds arguments with the runtime's signatures
from fuzz import jit, mutate  # noqa: E402


def _with_loop_start(name: str, start: int) -> tilebc.Module:
    """The fixture with its first `for` loop's lower bound (a constant) set to `start`."""
    module = tilebc.load(FIXTURE_DIR / name / f"{name}-13.5.tilebc")
    loop = next(op for op in module.walk() if op.name == "for")
    constant = loop.operands["lowerBound"].owner
    assert constant.name == "constant"
    attr = constant.attrs["value"]
    width = attr.type.element.bits // 8
    constant.attrs["value"] = DenseElementsAttr(attr.type, start.to_bytes(width, "little",
                                                                          signed=True))
    return tilebc.load(tilebc.dump(module, module.version))


def _arguments(module, seed=0):
    return jit.build_arguments(module.functions[0], np.random.default_rng(seed))


def test_max_iterations_stops_a_runaway_loop():
    # fuzz input seed 2 #940: la_gemv's loop made to start at -2**23 ran for minutes
    module = _with_loop_start("la_gemv", -(1 << 23))
    start = time.perf_counter()
    with pytest.raises(ExecutionError, match="max_iterations") as caught:
        tilebc.interp.run(module, None, (1,), *_arguments(module), max_iterations=50)
    assert time.perf_counter() - start < 10
    assert caught.value.op is not None and caught.value.op.name == "for"
    assert caught.value.offset == caught.value.op.offset  # names the loop's byte offset


def test_max_iterations_counts_every_block_sequentially_too():
    module = _with_loop_start("la_gemv", -(1 << 23))
    with pytest.raises(ExecutionError, match="max_iterations"):
        tilebc.interp.run(module, None, (2,), *_arguments(module), max_iterations=50,
                          batch=False)


def test_max_iterations_leaves_a_normal_launch_alone():
    module = tilebc.load(FIXTURE_DIR / "la_gemv" / "la_gemv-13.5.tilebc")
    args = _arguments(module)
    twin = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    tilebc.interp.run(module, None, (1,), *args, max_iterations=10_000)
    tilebc.interp.run(module, None, (1,), *twin)
    for got, want in zip(args, twin):
        if isinstance(got, np.ndarray):
            np.testing.assert_array_equal(got, want)


@pytest.fixture(scope="module")
def pool():
    return mutate.corpus()


@pytest.mark.parametrize("block", range(4))
def test_interpreter_fuzz_sample(pool, block):
    """60 mutated inputs per block (about 2/3 load): no foreign exception, no overrun."""
    failures = []
    loaded = 0
    for index in range(block * 60, (block + 1) * 60):
        result = jit.check(jit.make_case(11, index, pool), arches=())
        loaded += result.loaded
        failures += [(index, stage, text.splitlines()[-1]) for stage, text in result.failures]
    assert loaded >= 20, "the mutators should mostly keep modules verifiable"
    assert failures == []


def test_batched_masked_scalar_load_with_a_varying_mask():
    """fuzz input seed 4 #1770: la_conv1d with an index made from block id z. A scalar
    `load_ptr_tko` then had a uniform address but a per-block mask, and the batched run failed
    internally (numpy broadcast error, hidden by the one-by-one rerun). Both runs must agree."""
    module = tilebc.load(FIXTURE_DIR / "la_conv1d" / "la_conv1d-13.5.tilebc")
    block_id = next(op for op in module.walk() if op.name == "get_tile_block_id")
    extend = next(op for op in module.walk() if op.name == "exti"
                  and op.operands["from"].owner.name == "assume")
    extend.operands["from"] = block_id.results[2]
    module = tilebc.load(tilebc.dump(module, module.version))
    args = _arguments(module, seed=1770)
    twin = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    report = tilebc.interp.run(module, None, (2, 1, 2), *args, batch=True)
    assert report.batched
    tilebc.interp.run(module, None, (2, 1, 2), *twin, batch=False)
    for got, want in zip(args, twin):
        if isinstance(got, np.ndarray):
            np.testing.assert_array_equal(got, want)


def test_batched_reduce_whose_body_yields_a_value_from_outside():
    """fuzz input seed 20261121 #4315: la_trsv_lower with its reduce body's yield swapped for a
    tile<f32> defined outside the region, which differs per tile block. The batched run failed
    internally (the block axis did not broadcast over the lanes); it must batch and agree.
    Replayed over a pool of that one file as long as the run's (982 files): the draw lands on it
    with the same random state after it, whatever other fixtures were added or grew since."""
    name = "la_trsv_lower"
    base = (f"{name}-13.2", (FIXTURE_DIR / name / f"{name}-13.2.tilebc").read_bytes())
    result = jit.replay(20261121, 4315, pool=[base] * 982)
    assert result.case.mutations == ["swap: yield.operands swapped for a visible tile<f32>",
                                     "int: reduce.dim=0"]
    assert result.loaded and not result.failures, result.failures
    module = tilebc.load(result.case.data)
    args = _arguments(module, seed=4315)
    twin = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    report = tilebc.interp.run(module, None, (2,), *args, batch=True)
    assert report.batched, report.reason
    tilebc.interp.run(module, None, (2,), *twin, batch=False)
    for got, want in zip(args, twin):
        if isinstance(got, np.ndarray):
            np.testing.assert_array_equal(got, want)
