"""`tilebc dis -g` with the locations named by the verifying child (tilebc/alias_aside.py): the
parent's marked text with the child's reference texts put in is tileirdisasm's `-g` text, and a
report that is missing or does not fit is refused before anything is printed."""
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import tilebc
from tilebc.alias_aside import MARK, MarkedLocations, location_texts
from tilebc.binary.lazyloc import pending_indices
from tilebc.ir.attrs import DenseElementsAttr
from tilebc.ir.module import Global
from tilebc.ir.types import f32, tile
from tilebc.text import print_module
from tilebc.text.printer import module_text_pieces
from tilebc.verify_aside import MIN_BYTES, _usable_cores as usable_cores

from conftest import joined_fixture_module

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "bytecode"


def _marked_text(data: bytes):
    """(the parent's printed pieces, its MarkedLocations, the child's report) for `data`, each
    side from its own decode, as the two processes make them."""
    report = location_texts(tilebc.load(data, verify=False))
    module = tilebc.load(data, verify=False)
    marked = MarkedLocations.of(module)
    assert marked is not None
    return list(module_text_pieces(module, aliases=marked)), marked, report


@pytest.mark.parametrize("version", ["13.3", "13.4", "13.5"])
def test_the_marked_text_with_the_childs_texts_is_tileirdisasms(version):
    paths = sorted(FIXTURES.glob(f"*/*-{version}.tilebc"))
    assert len(paths) > 100
    for path in paths:
        expected = path.with_suffix(".dis-g")
        if not expected.exists():
            continue
        printed, marked, report = _marked_text(path.read_bytes())
        pieces = marked.pieces(printed, report)
        assert pieces is not None, path
        assert "".join(pieces) == expected.read_text(), path


def _large() -> bytes:
    """Entries of several fixtures, a few without debug info, in one module with a global."""
    module = joined_fixture_module(2 * MIN_BYTES, plain_entries=3)
    module.globals.append(Global("table", DenseElementsAttr(tile((4,), f32), bytes(16))))
    data = tilebc.dump(module)
    assert len(data) >= MIN_BYTES  # large enough to be verified (and named) aside
    return data


@pytest.fixture(scope="module")
def large():
    return _large()


def test_a_large_module_of_entries_with_and_without_debug_info(large):
    printed, marked, report = _marked_text(large)
    assert "".join(marked.pieces(printed, report)) == print_module(tilebc.load(large), debug=True)


def test_the_c_printer_marks_without_calling_ref(large, monkeypatch):
    """print_ops marks the locations of the ops it prints itself (it appends to the order and
    writes MARK, as ref() does), so ref() is called only for the others (entries, ops with
    regions); the order is the same either way."""
    from tilebc import speedups
    if speedups.print_ops is None:
        pytest.skip("the C printer is not built (or TILEBC_PURE=1)")
    called = []
    ref = MarkedLocations.ref
    monkeypatch.setattr(MarkedLocations, "ref", lambda self, loc: called.append(1) or
                        ref(self, loc))
    printed, marked, report = _marked_text(large)
    assert 0 < len(called) < len(marked.order) // 4
    monkeypatch.setattr(speedups, "print_ops", None)
    python, by_python, _ = _marked_text(large)
    assert by_python.order == marked.order and python == printed
    assert "".join(marked.pieces(printed, report)) == print_module(tilebc.load(large), debug=True)


def test_a_report_that_does_not_fit_is_refused(large):
    printed, marked, report = _marked_text(large)
    assert marked.pieces(printed, report) is not None
    assert marked.pieces(printed, None) is None  # the child sent nothing
    assert marked.pieces(printed, b"") is None
    assert marked.pieces(printed, report[:-1]) is None  # cut short
    count, texts, definitions = struct.unpack_from("<QQQ", report)
    fewer = struct.pack("<QQQ", count - 1, texts, definitions) + report[24:]
    assert marked.pieces(printed, fewer) is None  # the counts disagree
    # an index the report does not name: the first one it names, renamed
    numbers = bytearray(report)
    numbers[24:32] = struct.pack("<q", 1 << 40)
    assert marked.pieces(printed, bytes(numbers)) is None
    # a mark the printer did not ask for (a text that held the character itself)
    assert marked.pieces(printed[:1] + [MARK] + printed[1:], report) is None


def test_locations_already_decoded_are_neither_marked_nor_named(large):
    module = tilebc.load(large, verify=False)
    entry = next(function for function in module.functions if function.body.ops
                 and function.body.ops[0].loc is not None)  # read: decoded now
    assert pending_indices(entry) is None
    assert MarkedLocations.of(module) is None
    assert location_texts(module) == b""
    # nothing was changed: it prints as usual
    assert print_module(module, debug=True) == print_module(tilebc.load(large), debug=True)


def _own_process(*args, script: str | None = None, used=None):
    command = [sys.executable, "-c", script, *map(str, args)] if script else \
        [sys.executable, "-m", "tilebc", *map(str, args)]
    env = {**os.environ, "USED": str(used)} if used else None
    return subprocess.run(command, capture_output=True, cwd=ROOT, timeout=300, env=env)


# `tilebc` in its own process, with the child's report replaced by what `made` gives; whether
# the child's texts were used is written to the file USED names
_WITH_REPORT = """
import os
import sys
import tilebc.alias_aside as aside
made = aside.location_texts
aside.location_texts = lambda module: {made}
pieces = aside.MarkedLocations.pieces
def reported(self, printed, report):
    texts = pieces(self, printed, report)
    with open(os.environ["USED"], "w") as used:
        used.write("used" if texts is not None else "refused")
    return texts
aside.MarkedLocations.pieces = reported
sys.argv[0] = "tilebc"
from tilebc.cli import main
sys.exit(main())
"""


aside_cores = pytest.mark.skipif(not hasattr(os, "fork") or usable_cores() < 2,
                                 reason="no fork, or one usable core: verified in place")


@aside_cores
def test_dis_g_of_a_large_module_in_its_own_process(large, tmp_path):
    path, used = tmp_path / "large.tilebc", tmp_path / "used"
    path.write_bytes(large)
    expected = print_module(tilebc.load(large), debug=True).encode()
    printed = _own_process("dis", "-g", path)
    assert (printed.returncode, printed.stderr, printed.stdout) == (0, b"", expected)
    # the child's texts are the ones printed
    again = _own_process("dis", "-g", path, script=_WITH_REPORT.format(made="made(module)"),
                         used=used)
    assert (again.returncode, again.stderr, again.stdout) == (0, b"", expected)
    assert used.read_text() == "used"
    # a child whose report is missing or wrong: printed again, the same text
    for made in ('b""', 'made(module)[:-1]'):
        again = _own_process("dis", "-g", path, script=_WITH_REPORT.format(made=made), used=used)
        assert (again.returncode, again.stderr, again.stdout) == (0, b"", expected), made
        assert used.read_text() == "refused"
    # a child that fails: the module verified here, from a fresh decode (its locations are
    # indices in the printing process)
    failing = _own_process("dis", "-g", path, script=_WITH_REPORT.format(made="1 / 0"), used=used)
    assert (failing.returncode, failing.stderr, failing.stdout) == (0, b"", expected)
    assert used.read_text() == "refused"


@aside_cores
@pytest.mark.parametrize("first", [False, True], ids=["last", "first"])
def test_dis_g_of_an_invalid_large_module_reports_as_in_place(large, tmp_path, first):
    from tilebc.ir.builder import new_function
    from tilebc.ir.types import i32, scalar
    from conftest import run_cli
    module = tilebc.load(large)
    builder = new_function(module, "added_wrongly", [scalar(i32), scalar(i32)])
    builder.op("addf", list(builder.block.args), [scalar(i32)])
    builder.op("return", [[]])
    if first:
        module.functions.insert(0, module.functions.pop())
    path = tmp_path / "invalid.tilebc"
    path.write_bytes(tilebc.dump(module))
    in_place = run_cli("dis", "-g", path)  # main() in this process: no fork
    assert in_place.returncode == 1 and b"addf" in in_place.stderr and not in_place.stdout
    aside = _own_process("dis", "-g", path)
    assert (aside.returncode, aside.stdout, aside.stderr) == (1, b"", in_place.stderr)
