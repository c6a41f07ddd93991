"""Families imported on demand (lowering/families.py ON_DEMAND): their op lists are the ops they
register, every family is listed once, and a kernel that holds none of a family's ops lowers to
the same PTX whether that family's hooks are registered or not (they act only for its ops)."""
import hashlib
from pathlib import Path

import pytest

import tilebc
from tilebc_runtime import compiler
from tilebc_runtime.lowering import families, registry

FIXTURES = sorted((Path(__file__).resolve().parents[2] / "fixtures" / "bytecode").glob(
    "*/*-13.5.tilebc"))


def _family(function) -> str:
    return function.__module__.rsplit(".", 1)[1]


def _hooks():
    """(family, kind, mnemonic or None) of every registered hook."""
    families.load_all()
    found = {(_family(hook), "lowers", name) for name, hook in registry.LOWERINGS.items()}
    found |= {(_family(hook), "defers", name) for name, hook in registry.DEFERRALS.items()}
    found |= {(_family(hook), kind, None) for kind, hooks in (
        ("pipelines", registry.LOOP_PIPELINES), ("before_loops", registry.BEFORE_LOOP))
        for hook in hooks}
    return found


def test_every_family_is_listed_once_with_the_ops_it_lowers():
    hooks = _hooks()
    listed = [*families.ALWAYS, *families.ON_DEMAND]
    assert len(listed) == len(set(listed))
    assert {family for family, _, _ in hooks} == set(listed)
    for family, ops in families.ON_DEMAND.items():
        registered = sorted(name for owner, kind, name in hooks
                            if owner == family and kind == "lowers")
        assert sorted(ops) == registered, \
            f"families.ON_DEMAND[{family!r}] lists {sorted(ops)}; {family}.py lowers {registered}"


def test_a_kernel_without_the_ops_of_a_family_does_not_import_it():
    """In a new process: every fixture that holds no op of ON_DEMAND, lowered first, imports
    none of those families (they stay out of a small compile's start-up); then a kernel with a
    reduce imports reductions and not matmul."""
    import os
    import subprocess
    import sys
    demand = {op for ops in families.ON_DEMAND.values() for op in ops}
    plain = [str(path) for path in FIXTURES if not demand & {
        op.name for function in tilebc.load(path).functions for op in function.walk()}]
    assert len(plain) >= 50
    softmax = FIXTURES[0].parents[1] / "nn_softmax_rows" / "nn_softmax_rows-13.5.tilebc"
    program = """import sys
from tilebc_runtime import compiler
for path in sys.argv[1:]:
    compiler.compile(path, None, "sm_90", emit="ptx")
    print(path, " ".join(sorted(name.rsplit(".", 1)[1] for name in sys.modules
                                if name.startswith("tilebc_runtime.lowering."))), sep="\t")
"""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{root / 'runtime'}"}
    done = subprocess.run([sys.executable, "-c", program, *plain, str(softmax)],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line.split("\t") for line in done.stdout.splitlines()]
    assert [path for path, _ in lines] == [*plain, str(softmax)]
    for path, loaded in lines[:-1]:
        assert set(families.ALWAYS) <= set(loaded.split()), path
        assert not set(loaded.split()) & set(families.ON_DEMAND), path
    assert "reductions" in lines[-1][1].split() and "matmul" not in lines[-1][1].split()


def _ptx_digests(paths) -> dict:
    return {path.name: hashlib.sha256(compiler.compile(path, None, "sm_90", emit="ptx")
                                      .ptx.encode()).hexdigest() for path in paths}


@pytest.fixture(scope="module")
def with_every_family():
    families.load_all()
    return _ptx_digests(FIXTURES)


@pytest.mark.parametrize("family", sorted(families.ON_DEMAND))
def test_a_family_s_hooks_change_nothing_where_its_ops_are_absent(family, with_every_family):
    """Every fixture without `family`'s ops, lowered with that family's hooks taken out of the
    registry (as in a process that never imported it), gives the same PTX as with them."""
    ops = set(families.ON_DEMAND[family])
    without = [path for path in FIXTURES if not ops & {op.name for function in
                                                       tilebc.load(path).functions
                                                       for op in function.walk()}]
    assert len(without) >= 20  # most kernels hold no mma, no reduce, no print
    # in place: the lowering modules hold these tables themselves (from .registry import ...)
    tables = (registry.LOWERINGS, registry.DEFERRALS, registry.LOOP_PIPELINES,
              registry.BEFORE_LOOP)
    saved = [table.copy() for table in tables]
    try:
        for table in tables[:2]:
            for op in [op for op, hook in table.items() if _family(hook) == family]:
                del table[op]
        for table in tables[2:]:
            table[:] = [hook for hook in table if _family(hook) != family]
        assert sum(map(len, tables)) < sum(map(len, saved))
        digests = _ptx_digests(without)
    finally:
        for table, copy in zip(tables, saved):
            table.clear()
            table.update(copy) if isinstance(table, dict) else table.extend(copy)
    assert digests == {name: with_every_family[name] for name in digests}


def test_a_function_changed_between_two_lowerings_gets_the_families_it_holds_then():
    """A Function is mutable (a builder adds ops): what load_for found for it once must not
    decide what a later lowering of the changed function imports."""
    import os
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[2]
    program = """import tilebc
from tilebc_runtime import compiler
module = tilebc.load(%r)
function = module.functions[0]
ops = list(function.body.ops)
function.body.ops[:] = ops[-1:]  # the return alone: no mma
compiler.estimate_code_size(function, 128)
function.body.ops[:] = ops
print(len(compiler.compile(module, None, "sm_90", emit="ptx").ptx) > 0)
""" % str(root / "fixtures/bytecode/la_bmm_aligned_tile/la_bmm_aligned_tile-13.5.tilebc")
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{root / 'runtime'}"}
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          env=env)
    assert done.returncode == 0 and done.stdout.split() == ["True"], done.stderr[-2000:]
