"""format_spec.md must match what scripts/gen_format_spec.py generates from the code."""
import importlib.util
import re
from pathlib import Path

import pytest

from tilebc.ops.table import OPS

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "format_spec.md"


@pytest.fixture(scope="module")
def generator():
    spec = importlib.util.spec_from_file_location("gen_format_spec",
                                                  ROOT / "scripts" / "gen_format_spec.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def spec_text():
    return SPEC.read_text(encoding="utf-8")


def test_generated_blocks_are_current(generator, spec_text):
    fresh = generator.render(spec_text)
    assert fresh == spec_text, (
        "format_spec.md is stale: run `python scripts/gen_format_spec.py` and commit the result")


def test_check_mode_reports_stale_file(generator, tmp_path, capsys):
    stale = tmp_path / "format_spec.md"
    text = SPEC.read_text(encoding="utf-8")
    stale.write_text(text.replace("| 0x02 | `addf` |", "| 0x02 | `addff` |", 1), encoding="utf-8")
    assert generator.main(["--check", "--path", str(stale)]) == 1
    assert "addff" in capsys.readouterr().out
    assert generator.main(["--check", "--path", str(SPEC)]) == 0


def test_every_opcode_is_documented(spec_text):
    missing = [f"0x{op.opcode:02X} {op.mnemonic}" for op in OPS
               if f"| 0x{op.opcode:02X} | `{op.mnemonic}` |" not in spec_text]
    assert not missing, f"opcodes missing from format_spec.md: {missing}"


def test_generated_blocks_carry_the_note(generator, spec_text):
    blocks = re.findall(r"<!-- BEGIN GENERATED: ([\w-]+) -->\n(.*?)<!-- END GENERATED: \1 -->",
                        spec_text, re.S)
    assert sorted(name for name, _ in blocks) == sorted(generator.GENERATORS)
    for name, body in blocks:
        assert body.startswith(generator.NOTE), name
