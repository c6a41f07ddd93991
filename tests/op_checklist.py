"""What adding an op takes (docs/adding-an-op.md), one check per place it touches.

Each check returns None when the op has what that place needs, else a sentence naming what is
missing and where to add it. The coverage tests (typing, interpreter, lowering, fixtures) and the
worked example (runtime/tests/test_rt_adding_an_op.py) all run these same checks.
"""
from typing import Iterable, List, Mapping, Optional

from tilebc.interp.registry import IMPLEMENTATIONS, REFUSALS
from tilebc.ops.spec import Family, OpSpec
from tilebc.verify.optable import constraints_for


def typing_gap(spec: OpSpec) -> Optional[str]:
    if spec.family is not Family.OTHER and spec.elements is None:
        return (f"op {spec.mnemonic} is in the {spec.family.value} family without an element "
                f"class: set elements= in its tilebc/ops/table.py entry")
    if constraints_for(spec) is None:
        return (f"op {spec.mnemonic} has no typing rule: give it a family and element class in "
                f"tilebc/ops/table.py (element-wise ops), or add an entry to _OTHER in "
                f"tilebc/verify/optable.py")
    return None


def interpreter_gap(spec: OpSpec, implementations: Mapping = IMPLEMENTATIONS,
                    refusals: Mapping = REFUSALS) -> Optional[str]:
    if spec.mnemonic in implementations or spec.mnemonic in refusals:
        return None
    return (f"op {spec.mnemonic} has no interpreter implementation: add "
            f"@implements(\"{spec.mnemonic}\") to a function in tilebc/interp/ops/ (or "
            f"refuse(\"{spec.mnemonic}\", reason))")


def lowering_gap(spec: OpSpec, lowerings: Mapping, not_lowered: Mapping) -> Optional[str]:
    if spec.mnemonic in lowerings or spec.mnemonic in not_lowered:
        return None
    return (f"op {spec.mnemonic} has no lowering: add @lowers(\"{spec.mnemonic}\") to a function "
            f"in runtime/tilebc_runtime/lowering/ (or a NOT_LOWERED entry with the reason)")


def fixture_gap(spec: OpSpec, seen: Iterable[str]) -> Optional[str]:
    if spec.mnemonic in seen:
        return None
    return (f"op {spec.mnemonic} is in no fixture or hand-built kernel: add a kernel that uses it "
            f"(tests/handbuilt.py KERNELS, or a fixture file)")


def gaps(specs: Iterable[OpSpec], checks) -> List[str]:
    """Every message of `checks` (functions of a spec) for `specs`."""
    return [message for spec in specs for check in checks
            if (message := check(spec)) is not None]
