"""The redundant-predicate pass (lowering/predicates.py) on real PTX: sci_pool2d's max-pool checks
each tap with `x >= 0 && x < N` and again as `x <u N`; the pass drops the implied unsigned
compares and the and.pred chains that only repeated known conjuncts, removes a duplicated setp,
keeps compares nothing else implies, and the kernel still computes what the interpreter does."""
import re
from pathlib import Path

import numpy as np
import pytest

import tilebc
from tilebc.interp import run as interp_run

from tilebc_runtime import compiler, sim
from tilebc_runtime.compiler import compile
from tilebc_runtime.lowering.predicates import simplify_predicates

ROOT = Path(__file__).resolve().parents[2]
POOL = ROOT / "fixtures" / "bytecode" / "sci_pool2d" / "sci_pool2d-13.5.tilebc"
SETP = re.compile(r"setp\.(\w+)\.(\w+) (%p\d+), (%?\w+), (%?\w+);")


@pytest.fixture(scope="module")
def pool():
    return tilebc.load(POOL)


def _unsimplified(module, monkeypatch):
    """(PTX, PtxWriter) of pool2d entry 0 with the pass switched off."""
    writers = []
    monkeypatch.setattr(compiler, "simplify_predicates", writers.append)
    ptx = compile(module, entry=module.functions[0].name, arch="sm_90", emit="ptx").ptx
    monkeypatch.undo()
    return ptx, writers[0]


def _constants(ptx):
    return {m.group(1): m.group(2) for m in re.finditer(r"mov\.b32 (%r\d+), (-?\d+);", ptx)}


def _bounds(ptx):
    """(x, N) of each signed pair x >= 0, x <s N and of each unsigned x <u N in `ptx`."""
    zero = {reg for reg, value in _constants(ptx).items() if value == "0"} | {"0"}
    setps = SETP.findall(ptx)
    nonneg = {x for cmp, kind, _, x, n in setps if (cmp, kind) == ("ge", "s32") and n in zero}
    signed = {(x, n) for cmp, kind, _, x, n in setps if (cmp, kind) == ("lt", "s32") and x in nonneg}
    unsigned = {(x, n) for cmp, kind, _, x, n in setps if (cmp, kind) == ("lt", "u32")}
    return signed, unsigned


def test_implied_unsigned_bounds_and_repeated_conjuncts_go(pool, monkeypatch):
    before, _ = _unsimplified(pool, monkeypatch)
    after = compile(pool, entry=pool.functions[0].name, arch="sm_90", emit="ptx").ptx
    signed, unsigned = _bounds(before)
    implied = unsigned & signed
    kept = unsigned - signed
    assert implied and kept  # the fixture has both kinds
    signed_after, unsigned_after = _bounds(after)
    assert signed_after == signed  # the signed checks stay: the load masks need them
    assert unsigned_after == kept  # only the unsigned compares no signed pair implies remain
    assert after.count("and.pred") < before.count("and.pred")
    assert len(SETP.findall(after)) == len(SETP.findall(before)) - len(implied)


def test_duplicate_setp_removed_distinct_kept(pool, monkeypatch):
    _, w = _unsimplified(pool, monkeypatch)
    # repeat a compare of registers written once into a fresh register and read both
    written = re.findall(r"^\t(?:@\S+ )?\S+ (%\w+)", "\n".join(w.preamble + w.body), re.M)
    line = next(text for text in w.body if SETP.search(text) and all(
        written.count(reg) == 1 for reg in SETP.search(text).groups()[3:]))
    cmp, kind, first, x, n = SETP.search(line).groups()
    again, both, other = w.reg("pred"), w.reg("pred"), w.reg("pred")
    w.body += [f"\tsetp.{cmp}.{kind} {again}, {x}, {n};",
               f"\tsetp.{cmp}.{kind} {other}, {n}, {x};",  # operands swapped: a different test
               f"\tand.pred {both}, {again}, {other};",
               f"\t@{both} st.global.b32 [%rd0], {x};"]
    w.origin += [None] * 4
    simplify_predicates(w)
    tail = "\n".join(w.body[-4:])
    assert again not in tail  # the duplicate is gone and its reader uses the first compare
    assert f"and.pred {both}, {first}, {other};" in tail
    assert f"setp.{cmp}.{kind} {other}, {n}, {x};" in tail


def test_pool2d_same_results_as_interpreter(pool):
    rng = np.random.default_rng(17)
    x = rng.standard_normal((1, 7, 6, 12)).astype(np.float16)
    grid = (1, 2)  # 4 x 3 output pixels in one tile of 16; 12 channels in tiles of 8
    expected = np.full((1, 4, 3, 12), 9, np.float16)
    got = expected.copy()
    interp_run(pool, pool.functions[0].name, grid, x, expected)
    sim.run(pool, pool.functions[0].name, grid, x, got)
    np.testing.assert_array_equal(got, expected)
    assert not np.any(got == 9)
