"""The verifier's fast path (verdicts reused across ops with the same signature) reports exactly
what checking every op in full reports: on every fixture, every invalid case, a sample of
attribute mutations, and modules where ops share a signature with clean ops but stand in a wrong
place (dominance, debug scope)."""

import os
from unittest import mock

import pytest

import tilebc
from tilebc.errors import VerificationError
from tilebc.ir import Value, f32, i32, i64, scalar, tile
from tilebc.ir.location import DILoc, DISubprogram
from tilebc.verify import diagnostics, verify
from tilebc.verify.diagnostics import Collector
from tilebc.verify import structure
from tilebc.verify.structure import Verifier

from conftest import CaseFailures, decoded, fixture_files, fixture_kernels
from test_verify_differential import attribute_mutations, sample
from test_verify_invalid import CASES, _reload, const, kernel

FIXTURE_KERNELS = fixture_kernels()


@pytest.fixture(autouse=True)
def compile_fast_paths(monkeypatch):
    """The fast path of every op kind from its first op (by default the first few ops of a kind
    are checked in full before it is compiled)."""
    monkeypatch.setattr(structure, "COMPILE_AFTER", 0)


def same_report(module):
    """The fast path's report (through the C loop where tilebc._speedups is built, and through
    the Python loop) equals checking every op in full."""
    fast = diagnostics(module)
    full = diagnostics(module, full=True)
    assert fast == full
    if structure.verify_ops is not None:
        with mock.patch.object(structure, "verify_ops", None):
            assert diagnostics(module) == full
    return fast


@pytest.mark.parametrize("fixture_kernel", sorted(FIXTURE_KERNELS))
def test_fast_path_agrees_on_fixture(fixture_kernel):
    failures = CaseFailures()
    for path in FIXTURE_KERNELS[fixture_kernel]:
        with failures.case(path.name):
            module = decoded(path)
            assert same_report(module) == []
            verifier = Verifier(module, Collector(module.source, fail_fast=False))
            verifier.run()
            ops = sum(1 for _ in module.walk())
            if ops >= 50:  # a real kernel repeats signatures: most ops reuse a verdict
                assert len(verifier._clean_by_id) < ops
    failures.raise_any()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_fast_path_agrees_on_invalid_case(case):
    module = _reload(case.make()) if case.reload else case.make()
    found = same_report(module)
    assert found
    errors = [d for d in found if d.severity == "error"]
    if errors:
        with pytest.raises(VerificationError) as raised:
            verify(module)
        assert raised.value.diagnostic == errors[0]


def test_fast_path_agrees_on_attribute_mutations():
    items = sample(list(attribute_mutations()), 60)
    reported = 0
    for label, build in items:
        module, _ = build()
        reported += bool(same_report(module))
        reloaded = tilebc.load(tilebc.dump(module), verify=False)
        assert diagnostics(reloaded) == diagnostics(reloaded, full=True), label
    assert 0 < reported < len(items)


def _two_copies(name="matmul_f16"):
    """One fixture's entry twice in one module, the second renamed (with its subprogram)."""
    path = next(p for p in fixture_files() if p.name == f"{name}-13.5.tilebc")
    module = tilebc.load(path, lazy_debug=False)
    second = tilebc.load(path, lazy_debug=False).functions[0]
    second.name += "_2"
    if isinstance(second.loc, DILoc) and isinstance(second.loc.scope, DISubprogram):
        sub = second.loc.scope.replace(linkage_name=second.name)
        old = second.loc.scope
        second.loc = second.loc.replace(scope=sub)
        for op in second.walk():
            if isinstance(op.loc, DILoc) and op.loc.scope is old:
                op.loc = op.loc.replace(scope=sub)
    module.functions.append(second)
    assert diagnostics(module) == []
    return module


def test_context_errors_are_found_on_ops_with_a_clean_signature():
    module = _two_copies()
    first, second = module.functions
    # Same signature as the clean original (same types and attributes), wrong place: an operand
    # from the other entry, and a location in the other entry's subprogram.
    victim = next(op for op in second.walk() if op.operand_values and not op.regions)
    name, group = next((n, g) for n, g in victim.operands.items() if g is not None
                       and not isinstance(g, tuple))
    twin = next(op for op in first.walk() if op.spec is victim.spec
                and isinstance(op.operands.get(name), type(group)))
    victim.operands[name] = twin.operands[name]
    other = next(op for op in second.walk() if op is not victim and isinstance(op.loc, DILoc))
    other.loc = first.loc
    found = same_report(module)
    assert {d.rule for d in found} == {"ssa.dominance", "debug.op_scope"}


def test_entries_sharing_a_signature_are_each_checked_where_they_differ():
    """Entries of one function type object: a clean one lets the next skip its parameter
    checks, and a signature with a bad parameter is reported for every entry that has it."""
    module = _two_copies()
    first, second = module.functions
    second.type = first.type  # one signature object for both
    assert same_report(module) == []
    bad = first.type.replace(inputs=(tile((4,), f32),) + first.type.inputs[1:])
    first.type = second.type = bad
    for function in (first, second):
        function.body.args[0] = Value(bad.inputs[0], function.body, 0)
    found = same_report(module)
    assert [d.rule for d in found].count("entry.params") == 2


def test_a_parameter_listed_twice_is_found_under_a_clean_signature():
    """Two parameters of one type, the second argument the first one's Value: the signature
    matches and was clean before, and the value defined twice is still reported."""
    from tilebc.ir.builder import new_function, new_module
    module = new_module()
    for name in ("k", "k2"):
        builder = new_function(module, name, [scalar(i32), scalar(i32)])
        first = builder.block.args[0]
        builder.op("addi", [first, first], [scalar(i32)])
        builder.op("return", [[]])
    second = module.functions[1]
    second.type = module.functions[0].type  # one signature object, clean in the first entry
    assert same_report(module) == []
    second.body.args[1] = second.body.args[0]
    assert [d.rule for d in same_report(module)] == ["ssa.redefined"]


def test_index_constants_are_checked_per_op():
    # Two extracts with equal types and attributes; only the second index is out of bounds (a
    # warning that depends on the defining constant, not on the signature).
    def body(b, x):
        source = b.op("broadcast", [b.op("reshape", [x], [tile((1,), f32)])], [tile((8,), f32)])
        for index in (1, 2):
            b.op("extract", [source, [const(b, scalar(i32), index.to_bytes(4, "little"))]],
                 [tile((4,), f32)])
    module = kernel([scalar(f32)], body)
    assert [d.rule for d in same_report(module)] == ["index.bounds"]


def test_loop_regions_are_checked_per_op():
    # Of two sibling `for` ops with one signature, the later gets a wrong induction variable type.
    def siblings(module):
        signature = Verifier(module, Collector(module.source, fail_fast=False)).value_key
        loops = [op for op in module.walk() if op.name == "for"]
        for later in loops:
            for earlier in loops:
                if earlier is later or later in list(earlier.walk()):
                    continue
                if (signature(earlier) == signature(later)
                        and loops.index(earlier) < loops.index(later)):
                    return later
        return None
    for path in fixture_files():
        module = tilebc.load(path, verify=False)
        later = siblings(module)
        if later is not None:
            break
    else:
        pytest.skip("no fixture with two sibling for loops of one signature")
    block = later.regions[0].blocks[0]
    wrong = i64 if block.args[0].type.element != i64 else i32
    block.args[0] = Value(scalar(wrong), block, 0)
    assert "region.args" in [d.rule for d in same_report(module)]


def test_constants_of_one_type_share_a_verdict_but_not_other_types():
    # Dense values enter the signature by type: 8 decoded constants of two types (the reader
    # shares type objects) need two full checks.
    def body(b, x):
        for n in range(4):
            const(b, scalar(i32), n.to_bytes(4, "little"))
            const(b, scalar(f32), n.to_bytes(4, "little"))
    module = _reload(kernel([scalar(f32)], body))
    verifier = Verifier(module, Collector(module.source, fail_fast=False))
    checked = []
    full = verifier.op_in_full
    verifier.op_in_full = lambda op, *rest: (checked.append(op.name), full(op, *rest))
    verifier.run()
    assert checked.count("constant") == 2
    assert same_report(module) == []


def test_bool_arrays_enter_the_signature_by_value():
    # `inbounds` tuples enter the signature by value (element classes included, as (True,) == (1,));
    # an unhashable value is checked in full rather than crash the key, and is reported.
    from test_verify_invalid import VIEW_ACCESSES, partition, view_kernel
    module = _reload(view_kernel(partition, lambda b, v, _: [
        VIEW_ACCESSES["load_view_tko"](b, v, {"inbounds": flags})
        for flags in ((True,), (True,), (False,))]))
    assert same_report(module) == []
    loads = [op for op in module.walk() if op.name == "load_view_tko"]
    loads[1].attrs["inbounds"] = (1,)
    loads[2].attrs["inbounds"] = [False, False]  # a list: unhashable, and the wrong length
    assert [d.rule for d in same_report(module)] == ["attr.inbounds"]


def test_permutations_enter_the_signature_by_value():
    # Two permutes of one type: the second's permutation repeats an index. Integer arrays enter
    # the signature (and the C loop's key) by value, so the clean first one covers nothing else.
    def body(b, x):
        source = b.op("broadcast", [b.op("reshape", [x], [tile((1, 1), f32)])],
                      [tile((4, 4), f32)])
        for permutation in ((1, 0), (1, 0), (0, 0)):
            b.op("permute", [source], [tile((4, 4), f32)], {"permutation": permutation})
    module = _reload(kernel([scalar(f32)], body))
    assert [d.rule for d in same_report(module)] == ["attr.permutation"]


def test_a_result_defined_twice_is_found_on_ops_with_a_clean_signature():
    # Three ops of one signature; the third's result is the second's Value again.
    def body(b, x):
        for _ in range(3):
            b.op("reshape", [x], [tile((1,), f32)])
    module = _reload(kernel([scalar(f32)], body))
    ops = module.functions[0].body.ops
    ops[2].results[0] = ops[1].results[0]
    assert [d.rule for d in same_report(module)] == ["ssa.redefined"]


def test_lines_beyond_32_bits_are_found_on_ops_with_a_clean_signature():
    # Twelve reshapes of one signature, each with a location of its own in the entry's
    # subprogram: one's line, another's column and a third's lexical block lie beyond 32 bits.
    from tilebc.ir.location import DILexicalBlock, DIFile, DICompileUnit
    def body(b, x):
        for _ in range(12):
            b.op("reshape", [x], [tile((1,), f32)])
    module = _reload(kernel([scalar(f32)], body))
    function = module.functions[0]
    file = DIFile("k.py", "/")
    sub = DISubprogram(file, 1, "k", function.name, DICompileUnit(file), 1)
    function.loc = DILoc(sub, "k.py", 1, 1)
    for line, op in enumerate(function.body.ops, 2):
        op.loc = DILoc(sub, "k.py", line, 3)
    ops = function.body.ops
    ops[5].loc = ops[5].loc.replace(line=1 << 32 | 7)
    ops[7].loc = ops[7].loc.replace(column=1 << 32)
    ops[9].loc = ops[9].loc.replace(scope=DILexicalBlock(sub, file, 1 << 32, 1))
    ops[10].loc = ops[10].loc.replace(line=-1)  # negative: not beyond
    found = same_report(module)
    assert [(d.rule, d.op) for d in found] == [("debug.line_range", "reshape")] * 3


def test_a_result_listed_twice_by_one_op_is_found_on_ops_with_a_clean_signature():
    # Twelve ops of three results and one signature; the last lists one Value twice.
    def body(b, x):
        for _ in range(12):
            b.op("get_tile_block_id", [], [scalar(i32)] * 3)
    module = _reload(kernel([scalar(f32)], body))
    ops = module.functions[0].body.ops
    ops[11].results[1] = ops[11].results[0]
    assert [d.rule for d in same_report(module)] == ["ssa.redefined"]


@pytest.mark.skipif(structure.verify_ops is None, reason="tilebc._speedups is not built")
def test_the_c_loop_reuses_clean_verdicts_and_checks_the_rest():
    # 40 reshapes of one signature: the C loop calls the compiled check for the first only; an
    # operand out of scope sends its op back to the check.
    def body(b, x):
        first = b.op("reshape", [x], [tile((1,), f32)])
        for _ in range(40):
            b.op("reshape", [first], [tile((1,), f32)])
    module = _reload(kernel([scalar(f32)], body))
    verifier = Verifier(module, Collector(module.source, fail_fast=False))
    verifier.run()  # compiles the kind's check
    spec = module.functions[0].body.ops[0].spec
    compiled = structure._PLAIN_CHECKS[id(spec)]
    calls = []
    with mock.patch.dict(structure._PLAIN_CHECKS,
                         {id(spec): lambda v, op: (calls.append(op), compiled(v, op))}):
        verifier = Verifier(module, Collector(module.source, fail_fast=False))
        verifier.run()
        ops = module.functions[0].body.ops
        assert calls == ops[:2] and verifier.ctx.diagnostics == []
        ops[30].operands["source"] = ops[35].results[0]  # defined later: out of scope
        calls.clear()
        verifier = Verifier(module, Collector(module.source, fail_fast=False))
        verifier.run()
        assert calls == [*ops[:2], ops[30]]
        assert [d.rule for d in verifier.ctx.diagnostics] == ["ssa.dominance"]


def test_loads_sharing_a_hints_object_share_its_verdict_and_others_are_checked():
    # Six loads of one signature but for their hints: three share a clean hints object, two share
    # one whose latency is out of range, one has an equal copy of the clean object.
    from test_verify_invalid import VIEW_ACCESSES, _hints, partition, view_kernel
    clean, bad = _hints("default", latency=3), _hints("default", latency=11)
    hints = (clean, clean, bad, clean, bad, _hints("default", latency=3))
    module = _reload(view_kernel(partition, lambda b, v, _: [
        VIEW_ACCESSES["load_view_tko"](b, v, {"optimization_hints": h}) for h in hints]))
    loads = [op for op in module.walk() if op.name == "load_view_tko"]
    for load, h in zip(loads, hints):  # the reader shares equal attributes: set them again
        load.attrs["optimization_hints"] = h
    found = same_report(module)
    assert [(d.rule, d.op) for d in found] == [("hints.value", "load_view_tko")] * 2


def test_a_kind_compiled_within_its_block_is_checked_by_the_c_loop_after():
    """The C loop asks again for the check of a kind it has none for yet: ops of one block
    compile their kind's check after COMPILE_AFTER and the rest of the block reuses its
    verdict (a fresh process: no kind compiled before), a module of one entry included."""
    import subprocess
    import sys
    from tilebc import speedups
    if speedups.verify_ops is None:
        pytest.skip("the C loop is not built (or TILEBC_PURE=1)")
    script = (
        "import tilebc\n"
        "from tilebc.ir.builder import new_function\n"
        "from tilebc.ir.types import i32, scalar\n"
        "from tilebc.verify import structure, verify\n"
        "module = tilebc.Module()\n"
        "builder = new_function(module, 'many', [scalar(i32), scalar(i32)])\n"
        "value, other = builder.block.args\n"
        "for _ in range(200):\n"
        "    value = builder.op('addi', [value, other], [scalar(i32)])\n"
        "builder.op('return', [[]])\n"
        "calls = []\n"
        "one = structure.Verifier.op_at\n"
        "structure.Verifier.op_at = lambda self, op, last: (calls.append(op), one(self, op, last))[1]\n"
        "verify(module)\n"
        "print(len(calls), structure.COMPILE_AFTER)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, timeout=120)
    assert done.returncode == 0, done.stderr
    calls, compile_after = map(int, done.stdout.split())
    assert calls <= compile_after + 2  # the ops before the check is compiled, and `return`


def test_a_large_module_compiles_each_kinds_check_at_its_first_op(monkeypatch):
    """A module of codecache.COMPILE_AT_ONCE_OPS top-level ops or more has each kind's fast path
    compiled at its first op (no op of a kind checked in full only for being early); a small
    kernel after COMPILE_AFTER ops; the diagnostics are the full check's either way (an error in
    each)."""
    from conftest import joined_fixture_module
    from tilebc import codecache
    from tilebc.verify.diagnostics import Collector
    monkeypatch.setattr(structure, "COMPILE_AFTER", 8)  # the default, not this file's 0
    large = joined_fixture_module(200_000)
    small = tilebc.load(min(fixture_files(), key=lambda path: os.path.getsize(path)),
                        verify=False)
    assert codecache.compiles_at_once(large) and not codecache.compiles_at_once(small)
    for module, at_once in ((large, True), (small, False)):
        for cache in ("_BODY_FACTS", "_FAST_CHECKS", "_PLAIN_CHECKS"):  # kinds met anew
            monkeypatch.setattr(structure, cache, {})
        verifier = Verifier(module, Collector(module.source, fail_fast=False))
        verifier.run()
        assert (verifier.compile_after == 0) is at_once
        met = [facts for facts in structure._BODY_FACTS.values() if facts.memoizable]
        assert met and all(facts.check is not None for facts in met) is at_once
        entry = module.functions[-1]
        entry.body.ops.insert(0, entry.body.ops.pop())  # its terminator first: an error
        assert diagnostics(module) == diagnostics(module, full=True) != []
