"""Batched execution (tilebc.interp.batch: all tile blocks at once) against running the tile
blocks one at a time: every fixture kernel both ways, compared bit for bit, plus the fallbacks."""
import io

import numpy as np
import pytest

import importlib

import test_interp_fixtures as fixtures
import tilebc
from fixture_cases import CASE_MODULES, run as run_case
from tilebc.interp import ExecutionError, KernelAssertionError, MemoryCheckError, Pointer, api

# Fixtures that must not run batched, and a word of the reason each gives.
FALLBACKS = {
    "aliasing_arrays": "alias",  # the case runs once rejected (overlap) and once with aliasing
    "atomic_red_view": "atomics", "atomic_red_view_f32": "atomics", "atomics_counter": "atomics",
    "atomics_float": "atomics", "atomics_int": "atomics", "atomics_raw": "atomics",
    "atomics_unsigned": "atomics",
    "print": "print", "printf": "print",
    "early_return": "condition of if differs",  # only some blocks return early
    "grid_2d_persistent": "bound of for differs",  # a persistent loop starting at the block id
    "strided_view": "other tile blocks read",  # block i writes the tile block i + 1 reads
}


def _arrays(argument):
    if isinstance(argument, np.ndarray):
        return [argument]
    if isinstance(argument, Pointer):
        return [argument.array]
    if isinstance(argument, (list, tuple)):
        return [a for item in argument for a in _arrays(item)]
    return []


class BothWays:
    """Stands in for `run` in the fixture cases: runs the launch one block at a time, restores
    the arrays, runs it again with batching allowed, and checks that memory, printed output,
    raised errors and the kernels' results agree bit for bit. Both runs check every `assume`
    (fixture_cases.run)."""

    def __init__(self):
        self.reports = []

    def __call__(self, module, entry, grid, *args, **options):
        arrays = _arrays(list(args))
        before = [a.copy() for a in arrays]
        stream = options.pop("print_stream", None)
        sequential_text = io.StringIO()
        try:
            run_case(module, entry, grid, *args, batch=False, print_stream=sequential_text,
                     **options)
            sequential_error = None
        except tilebc.TilebcError as error:
            sequential_error = error
        after = [a.copy() for a in arrays]
        for array, saved in zip(arrays, before):
            np.copyto(array, saved)
        batched_text = io.StringIO() if stream is None else stream
        start = batched_text.tell()
        try:
            report = run_case(module, entry, grid, *args, print_stream=batched_text, **options)
        except tilebc.TilebcError as error:
            assert sequential_error is not None, f"only the batched run raised {error}"
            assert type(error) is type(sequential_error) and str(error) == str(sequential_error)
            raise
        assert sequential_error is None, f"only the sequential run raised {sequential_error}"
        self.reports.append(report)
        for k, (array, expected) in enumerate(zip(arrays, after)):
            assert array.tobytes() == expected.tobytes(), \
                f"array {k} differs between batched and sequential runs ({report})"
        assert batched_text.getvalue()[start:] == sequential_text.getvalue()
        return report


@pytest.mark.parametrize("name,version", fixtures.PARAMS,
                         ids=[f"{n}-{v}" for n, v in fixtures.PARAMS])
def test_batched_runs_match_sequential_runs_bit_for_bit(name, version, monkeypatch):
    both = BothWays()
    monkeypatch.setattr(fixtures, "run", both)
    # inputs of our own: the fixture module's shared generator stays as its own tests expect
    monkeypatch.setattr(fixtures, "RNG", np.random.default_rng(sum(map(ord, name + version))))
    fixtures.CASES[name](fixtures.module(name, version))
    assert both.reports, "the case launched nothing"
    if name in FALLBACKS:
        fell_back = [r for r in both.reports if not r.batched]
        assert fell_back and all(FALLBACKS[name] in r.reason for r in fell_back), both.reports
    else:
        assert all(r.batched for r in both.reports), both.reports


# The kernel families (fixtures/kernels/<family>.py): bit-identical both ways; a launch that cannot
# batch must say why (their kernels are free to use atomics, in-place updates, early returns).
FAMILY_PARAMS = [(m, name, version) for m in CASE_MODULES[1:]
                 for name, version in importlib.import_module(m).PARAMS]


@pytest.mark.parametrize("family,name,version", FAMILY_PARAMS,
                         ids=[f"{n}-{v}" for _, n, v in FAMILY_PARAMS])
def test_family_batched_runs_match_sequential_runs_bit_for_bit(family, name, version, monkeypatch):
    cases = importlib.import_module(family)
    both = BothWays()
    monkeypatch.setattr(cases, "run", both)
    monkeypatch.setattr(cases, "RNG", np.random.default_rng(sum(map(ord, name + version))))
    cases.CASES[name](cases.module(name, version))
    assert both.reports, "the case launched nothing"
    assert all(r.batched or r.reason for r in both.reports), both.reports
    # falling back is fine for a reason the batcher states; an internal failure is a bug
    assert not any("internally" in (r.reason or "") for r in both.reports), both.reports


# ------------------------------------------------------------------------------ fallbacks

RNG = np.random.default_rng(11)


def rand(n):
    return RNG.uniform(0.5, 2.0, n).astype(np.float32)


def test_batch_true_names_the_reason_a_launch_cannot_batch():
    mod = fixtures.module("early_return", "13.4")
    x = rand(128)
    out = np.zeros(128, np.float32)
    with pytest.raises(ExecutionError, match="cannot run batched: the condition of if differs"):
        api.run(mod, fixtures.entry(mod), (4,), x, out, 2, batch=True)
    assert np.all(out == 0)  # nothing was written
    assert api.run(mod, fixtures.entry(mod), (4,), x, out, 4, batch=True).batched


def test_batch_false_and_auto_report_how_they_ran():
    mod = fixtures.module("elementwise_f32", "13.4")
    a, b = rand(128), rand(128)
    out = np.zeros(128, np.float32)
    assert api.run(mod, fixtures.entry(mod), (2,), a, b, out) == (2, True, None)
    assert api.run(mod, fixtures.entry(mod), (2,), a, b, out, batch=False) == \
        (2, False, "batch=False")
    assert not api.run(mod, fixtures.entry(mod), (2,), a, b, out, shuffle=True).batched


def test_a_fault_in_one_block_is_reported_as_the_sequential_run_reports_it():
    """Block 1 reads past a lying shape: the batched run stops with memory untouched and the
    sequential rerun stores block 0's tile before naming block 1."""
    mod = fixtures.module("elementwise_f32", "13.4")
    a, b = rand(128), rand(128)
    out = np.zeros(128, np.float32)
    with pytest.raises(MemoryCheckError) as error:
        api.run(mod, fixtures.entry(mod), (2,), Pointer(a[:64]), 128, 1, b, out, batch=True)
    assert error.value.block_id == (1, 0, 0)
    assert np.all(out[:64] != 0) and np.all(out[64:] == 0)


def test_a_failed_assert_names_the_first_failing_block_in_order():
    mod = fixtures.module("assert", "13.4")
    x = rand(32)
    x[20] = -1  # block 1 of 2 (16-wide tiles) fails
    with pytest.raises(KernelAssertionError) as error:
        api.run(mod, fixtures.entry(mod), (2,), x, 1)
    assert error.value.block_id == (1, 0, 0)


def test_a_defect_of_the_batched_run_propagates_instead_of_falling_back(monkeypatch):
    """Only BatchFallback (and a TilebcError, rerun in order) sends a launch to the sequential
    run; any other exception is a bug of the batched interpreter and must not be hidden."""
    from tilebc.interp import batch

    def broken(*args, **kwargs):
        raise RuntimeError("defect in the batched interpreter")
    monkeypatch.setattr(batch, "run_batched", broken)
    mod = fixtures.module("elementwise_f32", "13.4")
    a, b = rand(128), rand(128)
    out = np.zeros(128, np.float32)
    with pytest.raises(RuntimeError, match="defect in the batched interpreter"):
        api.run(mod, fixtures.entry(mod), (2,), a, b, out)
    assert np.all(out == 0)
    assert api.run(mod, fixtures.entry(mod), (2,), a, b, out, batch=False) == \
        (2, False, "batch=False")

    def cannot(*args, **kwargs):
        raise batch.BatchFallback("told not to")
    monkeypatch.setattr(batch, "run_batched", cannot)
    assert api.run(mod, fixtures.entry(mod), (2,), a, b, out) == (2, False, "told not to")
