"""The batched interpreter runs a launch in chunks of tile blocks under a memory budget
(tilebc/interp/batch.py, `block_bytes`, `chunk_boxes`): memory no longer grows with the grid, and
results stay bit for bit those of the one-block-at-a-time run."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import test_interp_fixtures as fixtures
from conftest import ROOT, run_cli
from test_interp_batch import FALLBACKS, BothWays
import tilebc
from tilebc.interp import MemoryCheckError, Pointer, api, batch

LATEST = [(name, version) for name, version in fixtures.PARAMS
          if version == max(fixtures.versions(name))]


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of at most 3 tile blocks whatever the budget; counts the chunks run."""
    made = []
    original = batch.chunk_boxes

    def three(grid, per_chunk):
        for chunk in original(grid, 3):
            made.append(chunk)
            yield chunk
    monkeypatch.setattr(batch, "chunk_boxes", three)
    return made


@pytest.mark.parametrize("name,version", LATEST, ids=[f"{n}-{v}" for n, v in LATEST])
def test_chunked_runs_match_sequential_runs_bit_for_bit(name, version, monkeypatch, small_chunks):
    both = BothWays()
    monkeypatch.setattr(fixtures, "run", both)
    monkeypatch.setattr(fixtures, "RNG", np.random.default_rng(sum(map(ord, name + version))))
    fixtures.CASES[name](fixtures.module(name, version))
    assert both.reports, "the case launched nothing"
    if name in FALLBACKS:
        assert all(r.batched or r.reason for r in both.reports), both.reports
    else:
        assert all(r.batched for r in both.reports), both.reports
    assert not any("internally" in (r.reason or "") for r in both.reports), both.reports
    if any(r.batched and r.blocks > 3 for r in both.reports):
        assert len(small_chunks) > 1


@pytest.mark.parametrize("grid", [(1, 1, 1), (7, 1, 1), (4, 3, 1), (2, 3, 5), (5, 4, 3)])
@pytest.mark.parametrize("per_chunk", [1, 2, 3, 4, 6, 7, 12, 100])
def test_chunks_cover_the_grid_in_flat_order(grid, per_chunk):
    gx, gy, _ = grid
    flats = []
    for (ox, oy, oz), (bx, by, bz) in batch.chunk_boxes(grid, per_chunk):
        assert 1 <= bx * by * bz <= max(per_chunk, 1)
        chunk = [(ox + x) + (oy + y) * gx + (oz + z) * gx * gy
                 for z in range(bz) for y in range(by) for x in range(bx)]
        assert chunk == list(range(chunk[0], chunk[0] + len(chunk)))  # consecutive flat ids
        flats += chunk
    assert flats == list(range(gx * gy * grid[2]))


def test_a_fault_after_some_chunks_is_reported_as_the_sequential_run_reports_it():
    """Blocks 0-4 run (chunks of two, then block 4 alone, one at a time), block 5 reads past a
    lying shape: the error and the memory are the sequential run's."""
    mod = fixtures.module("elementwise_f32", "13.4")
    rng = np.random.default_rng(5)
    a, b = rng.random(512, np.float32), rng.random(512, np.float32)
    results = []
    for options in ({"batch": False}, {"batch_memory": 2 * batch.block_bytes(mod.functions[0])}):
        out = np.zeros(512, np.float32)
        seen = []
        with pytest.raises(MemoryCheckError) as error:
            api.run(mod, fixtures.entry(mod), (8,), Pointer(a[:320]), 512, 1, b, out,
                    progress=lambda done, total: seen.append(done), **options)
        results.append((str(error.value), out.tobytes()))
        assert error.value.block_id == (5, 0, 0)
        if "batch_memory" in options:
            assert seen[:2] == [2, 4], seen  # two chunks of two ran batched
    assert results[0] == results[1]


def test_the_budget_setting_is_checked(monkeypatch):
    mod = fixtures.module("elementwise_f32", "13.4")
    a = np.ones(128, np.float32)
    with pytest.raises(tilebc.TilebcError, match="batch_memory must be a positive number"):
        api.run(mod, fixtures.entry(mod), (2,), a, a.copy(), a.copy(), batch_memory=0)
    monkeypatch.setenv("TILEBC_BATCH_MEMORY", "lots")
    with pytest.raises(tilebc.TilebcError, match="TILEBC_BATCH_MEMORY='lots' is not a size"):
        api.run(mod, fixtures.entry(mod), (2,), a, a.copy(), a.copy())
    assert [batch.parse_size(text) for text in ("512M", "2G", "1024", "1.5k", "64MiB")] == \
        [512 << 20, 2 << 30, 1024, 1536, 64 << 20]


# One 256K-element f32 tile per block through load -> exp -> addf -> store; prints the traced
# peak of the launch, the chunk sizes reported through `progress` and a digest of the result.
_MEASURE = """
import hashlib, json, sys, tracemalloc
import numpy as np, tilebc
from tilebc.interp import Pointer
from tilebc.ir.builder import module_entry, new_module
from tilebc.ir.types import PointerType, f32, i32, scalar
tile, grid, budget = 1 << 18, 32, (int(sys.argv[1]) or None)
module = new_module(tilebc.Version(13, 5))
b = module_entry(module, "k", [scalar(PointerType(f32)), scalar(PointerType(f32)), scalar(i32)])
x_ptr, y_ptr, n = b.args
token = b.make_token()
views = [b.partition_view(b.tensor_view(p, shape=[n], strides=[1]), (tile,))
         for p in (x_ptr, y_ptr)]
block, _, _ = b.get_tile_block_id()
x, _ = b.load(views[0], [block], token=token)
b.store(b.addf(b.exp(x), x), views[1], [block], token=token)
b.return_()
xs = np.random.default_rng(0).random(tile * grid, np.float32)
ys = np.zeros_like(xs)
seen = []
tracemalloc.start()
report = tilebc.run(tilebc.load(tilebc.dump(module)), "k", (grid,), Pointer(xs), Pointer(ys),
                    tile * grid, batch_memory=budget, progress=lambda d, t: seen.append(d))
peak = tracemalloc.get_traced_memory()[1]
print(json.dumps({"peak": peak, "batched": report.batched, "seen": seen,
                  "digest": hashlib.sha256(ys.tobytes()).hexdigest()}))
"""


def _measure(budget: int) -> dict:
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(budget)], capture_output=True,
                          text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_peak_memory_stays_under_the_budget_and_results_are_equal():
    """Regression: the batched run held every block's tiles at once (32 MiB of tiles here, 5 GB
    for a 64-block grid of 1M-element tiles); under a 24 MiB budget it runs in chunks of a few
    blocks, with a traced peak under the budget and the same bytes."""
    budget = 24 << 20
    whole = _measure(1 << 40)
    chunked = _measure(budget)
    assert whole["batched"] and chunked["batched"]
    assert whole["seen"] == [32]
    steps = np.diff([0] + chunked["seen"])
    assert len(steps) > 4 and steps.max() <= 4 and chunked["seen"][-1] == 32, chunked["seen"]
    assert chunked["peak"] < budget < whole["peak"], (chunked["peak"], whole["peak"])
    assert chunked["digest"] == whole["digest"]


def test_cli_run_takes_a_budget(tmp_path):
    source = ROOT / "fixtures" / "bytecode" / "elementwise_f32" / "elementwise_f32-13.5.tilebc"
    # `tilebc run` in this process (conftest.run_cli): each run seeds its rand: inputs itself
    argv = ["run", str(source), "--grid", "4",
            "--arg", "rand:float32:256", "--arg", "rand:float32:256", "--arg", "zeros:float32:256"]
    outputs = []
    for extra in ([], ["--batch-memory", "1"], ["--no-batch"]):
        out = tmp_path / f"out{len(outputs)}.npz"
        done = run_cli(*argv, *extra, "--out", str(out))
        assert done.returncode == 0, done.stderr
        with np.load(out) as saved:
            outputs.append(saved["arg2"].tobytes())
    assert outputs[0] == outputs[1] == outputs[2]
    bad = run_cli(*argv, "--batch-memory", "lots")  # an escaping exception would fail here
    assert bad.returncode == 2
    assert b"bad size 'lots'" in bad.stderr and b"Traceback" not in bad.stderr


def test_a_chunk_leaves_no_reference_cycle():
    """Regression: the store log's lane closures and the batched block referred to each other, so
    every chunk's tiles lived until the garbage collector ran (numpy's large allocations hardly
    trigger it): a gather/scatter kernel of 1-block chunks peaked at 4x the budget."""
    import gc
    mod = fixtures.module("elementwise_f32", "13.5")
    a, b = np.ones(512, np.float32), np.ones(512, np.float32)

    def launch():
        return api.run(mod, fixtures.entry(mod), (8,), a, b, np.zeros(512, np.float32),
                       batch_memory=1)
    launch()
    gc.collect()
    gc.disable()
    try:
        assert launch().batched
        assert gc.collect() == 0
    finally:
        gc.enable()
