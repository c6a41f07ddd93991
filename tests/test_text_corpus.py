"""Our own hand-written text in the `cuda_tile.`-prefixed MLIR form (tests/text_corpus/*.mlir).

Together the files use every public op of the op table; each one assembles, passes our verifier,
is accepted by NVIDIA's tileirdisasm (which prints what our printer prints) and compiles with
tileiras for the architecture named in its `// gpu: sm_XX` header line (sm_90 when absent).
"""
import re
from pathlib import Path

import pytest

import tilebc
from tilebc.oracles import tileiras, tileirdisasm
from tilebc.ops.table import PUBLIC_OPS
from tilebc.text import assemble, parse_module, print_module
from tilebc.verify import diagnostics

from conftest import needs_disasm, needs_tileiras

CORPUS = sorted((Path(__file__).parent / "text_corpus").glob("*.mlir"))
VERSION = "13.5"


def _gpu(path: Path) -> str:
    found = re.search(r"^// gpu: (sm_\w+)$", path.read_text(), re.MULTILINE)
    return found.group(1) if found else "sm_90"


def _mnemonics(module) -> set:
    names = {"module", "entry"} | ({"global"} if module.globals else set())
    for function in module.functions:
        names.update(op.name for op in function.walk())
    return names


def test_corpus_covers_every_public_op():
    used = set()
    for path in CORPUS:
        used |= _mnemonics(parse_module(path.read_text(), str(path)))
    missing = sorted({spec.mnemonic for spec in PUBLIC_OPS} - used)
    assert not missing, f"no corpus text uses: {', '.join(missing)}"


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_corpus_uses_the_prefixed_form(path):
    """Every op is spelled `cuda_tile.<op>` (the form cuda-tile-opt/-translate read)."""
    text = path.read_text()
    module = parse_module(text, str(path))
    lines = text.splitlines()
    for function in module.functions:
        for op in function.walk():
            line, column = op.text_pos
            head = lines[line - 1][column - 1:]
            if head.startswith("}"):
                continue  # an implicit terminator the text left out
            assert re.match(r"(%[\w$.#:]+(, )?)* ?=? ?cuda_tile\." + re.escape(op.name) + r"\b",
                            head), f"{path.name}:{line}: {head[:60]}"


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_corpus_verifies(path):
    assert diagnostics(parse_module(path.read_text(), str(path))) == []


@needs_disasm
@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_corpus_disassembles_as_we_print(path):
    data = assemble(path.read_text(), VERSION, str(path))
    result = tileirdisasm(data)
    assert result.ok, result.stderr
    assert print_module(tilebc.load(data)) == result.stdout
    # What NVIDIA prints parses back to the same bytes.
    assert assemble(result.stdout, VERSION) == data


@needs_tileiras
@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_corpus_compiles(path):
    result = tileiras(assemble(path.read_text(), VERSION, str(path)), _gpu(path))
    assert result.ok, result.stderr
