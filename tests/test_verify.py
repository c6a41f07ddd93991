"""The verifier accepts every real kernel and covers every op (its cost: bench_codec.py)."""

import pytest

from op_checklist import gaps, typing_gap

import tilebc
from tilebc.ops import BODY_OPS
from tilebc.verify import OP_CONSTRAINTS, diagnostics, verify

from conftest import CaseFailures, decoded, fixture_kernels
from handbuilt import KERNELS

FIXTURE_KERNELS = fixture_kernels()


@pytest.mark.parametrize("fixture_kernel", sorted(FIXTURE_KERNELS))
def test_fixture_verifies_clean(fixture_kernel):
    failures = CaseFailures()
    for path in FIXTURE_KERNELS[fixture_kernel]:
        with failures.case(path.name):
            module = decoded(path)
            assert diagnostics(module) == []
            verify(module)
    failures.raise_any()


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_handbuilt_verifies_clean(name):
    module, _ = KERNELS[name]()
    assert diagnostics(module) == []
    assert diagnostics(tilebc.load(tilebc.dump(module))) == []


def test_every_body_op_has_a_constraint_entry():
    missing = gaps(BODY_OPS, [typing_gap])
    assert missing == [], "\n".join(missing)
    public = {spec.mnemonic for spec in BODY_OPS}
    stray = sorted(set(OP_CONSTRAINTS) - public)
    assert stray == [], f"constraint entries for ops the op table does not have: {stray}"


def test_every_constraint_entry_checks_or_says_why_not():
    for mnemonic, constraints in OP_CONSTRAINTS.items():
        assert constraints, f"{mnemonic}: empty entry; use no_extra(reason) to say why"
        for constraint in constraints:
            assert callable(constraint), mnemonic
            if hasattr(constraint, "reason"):
                assert constraint.reason.strip(), mnemonic


@pytest.mark.parametrize("args, ok", [(2, True), (1, False)])
def test_print_format_percent_inside_a_conversion_starts_the_next(args, ok):
    """tileirdisasm counts "% %f" as two arguments: the second `%` closes the first conversion."""
    from tilebc.text import parse_module
    values = ", ".join(["%arg0"] * args)
    types = ", ".join(["tile<f32>"] * args)
    module = parse_module("entry @k(%arg0: tile<f32>) {\n  %0 = make_token : token\n"
                          f'  %1 = print_tko "% %f", {values} token=%0 : {types} -> token\n'
                          "  return\n}\n")
    found = [d for d in diagnostics(module) if d.rule == "print.format"]
    assert (found == []) == ok, found
    if not ok:
        assert "takes 2 arguments, got 1" in found[0].message
