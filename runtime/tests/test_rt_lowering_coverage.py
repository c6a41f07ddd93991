"""Every body op of the op table has a lowering or a documented reason it has none."""
import sys
from pathlib import Path

from tilebc.ops.table import BODY_OPS

from tilebc_runtime.lowering.ptx import PTX_SUBSET
from tilebc_runtime.lowering.families import load_all
from tilebc_runtime.lowering.registry import LOWERINGS, NOT_LOWERED

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from op_checklist import gaps, lowering_gap  # noqa: E402


def test_every_body_op_is_lowered_or_explained():
    load_all()
    missing = gaps(BODY_OPS, [lambda spec: lowering_gap(spec, LOWERINGS, NOT_LOWERED)])
    assert missing == [], "\n".join(missing)


def test_no_op_is_both_lowered_and_excused():
    load_all()
    assert sorted(set(LOWERINGS) & set(NOT_LOWERED)) == []


def test_reasons_are_written_out():
    for mnemonic, reason in NOT_LOWERED.items():
        assert len(reason.split()) >= 3, f"{mnemonic}: reason too short: {reason!r}"


def test_subset_lists_core_instructions():
    for opcode in ("ld", "st", "bar", "setp", "bra", "atom"):
        assert opcode in PTX_SUBSET
