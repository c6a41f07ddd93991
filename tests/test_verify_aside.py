"""`tilebc dis` of a large module verifies it in a forked child while it prints
(tilebc/verify_aside.py): the same text, the same messages and exit status as verifying first,
and no output (an old file kept) for an invalid module or input that does not decode."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tilebc
from tilebc.ir.types import i32, scalar
from tilebc.ir.builder import new_function
from tilebc.text import print_module
from tilebc.verify_aside import MIN_BYTES, VALID, AsideVerifier, child_entries, verify_aside

from conftest import joined_fixture_module, run_cli

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")


def _large_module(invalid: bool, first: bool = False) -> bytes:
    """Entries of the 13.5 fixtures in one module of more than MIN_BYTES; `invalid` appends an
    entry that adds two i32 with addf (`first`: puts it first)."""
    module = joined_fixture_module(2 * MIN_BYTES)
    if invalid:
        builder = new_function(module, "added_wrongly", [scalar(i32), scalar(i32)])
        builder.op("addf", list(builder.block.args), [scalar(i32)])
        builder.op("return", [[]])
        if first:
            module.functions.insert(0, module.functions.pop())
    data = tilebc.dump(module)
    assert len(data) > MIN_BYTES
    return data


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    folder = tmp_path_factory.mktemp("aside")
    paths = {}
    for name, invalid, first in (("valid", False, False), ("invalid", True, False),
                                 ("invalid-first", True, True)):
        paths[name] = folder / f"{name}.tilebc"
        paths[name].write_bytes(_large_module(invalid, first))
    return paths


def _own_process(*args, cwd=None):
    """`tilebc ARGS` in a process of its own, as users run it (where the child is forked)."""
    return subprocess.run([sys.executable, "-m", "tilebc", *map(str, args)],
                          capture_output=True, cwd=cwd or ROOT, timeout=300)


def test_a_valid_module_prints_as_when_verified_first(large, tmp_path):
    expected = print_module(tilebc.load(large["valid"])).encode()
    printed = _own_process("dis", large["valid"])
    assert (printed.returncode, printed.stderr, printed.stdout) == (0, b"", expected)
    output = tmp_path / "valid.mlir"
    written = _own_process("dis", large["valid"], "-o", output)
    assert written.returncode == 0, written.stderr
    assert output.read_bytes() == expected


def test_an_invalid_module_reports_as_when_verified_first(large, tmp_path):
    in_place = run_cli("dis", large["invalid"])  # main() in this process: no fork
    assert in_place.returncode == 1 and b"addf" in in_place.stderr and not in_place.stdout
    aside = _own_process("dis", large["invalid"])
    assert (aside.returncode, aside.stdout, aside.stderr) == (1, b"", in_place.stderr)
    output = tmp_path / "kept.mlir"
    output.write_text("old contents\n")
    written = _own_process("dis", large["invalid"], "-o", output)
    assert (written.returncode, written.stderr) == (1, in_place.stderr)
    assert output.read_text() == "old contents\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.mlir"]  # no temp file left
    # an output that cannot be written: still the verifier's error, as when verifying first
    unwritable = tmp_path / "no such folder" / "out.mlir"
    assert _own_process("dis", large["invalid"], "-o", unwritable).stderr == in_place.stderr


def test_a_child_failing_for_its_own_reasons_is_verified_again(large):
    module = tilebc.load(large["valid"], verify=False)
    aside = verify_aside(lambda: module, MIN_BYTES)
    if aside is None:
        pytest.skip("one usable core: dis verifies in place")
    aside.module = module
    killed = aside.pid
    aside.cancel()  # the child killed and reaped: its status says nothing of the module
    pid = os.fork()
    if pid == 0:
        os._exit(3)  # a child that fails without verifying
    aside.valid, aside.pid = None, pid
    aside.confirm()  # verified here instead: valid, so nothing is raised
    assert aside.valid is True
    for child in (killed, pid):  # none left behind
        with pytest.raises(ChildProcessError):
            os.waitpid(child, os.WNOHANG)


def _child(said_valid: bool, linger: float = 0.0):
    """(pid, pipe's read end) of a child standing in for the verifier: it writes VALID or
    nothing, stays `linger` seconds, and exits 0."""
    verdict, said = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(verdict)
        if said_valid:
            os.write(said, VALID)
        time.sleep(linger)
        os._exit(0)
    os.close(said)
    return pid, verdict


def test_the_parent_goes_on_once_the_child_said_valid(large):
    """The child says VALID before it ends, and the parent goes on without waiting for its end
    (a process that built a large module takes a while to give back its memory)."""
    module = tilebc.load(large["valid"], verify=False)
    pid, verdict = _child(said_valid=True, linger=5)
    aside = AsideVerifier(module, pid, verdict)
    start = time.monotonic()
    with aside:
        aside.confirm()
    assert aside.valid is True and time.monotonic() - start < 3
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0  # not killed: it ended on its own


def test_a_failing_share_of_the_parent_stops_the_child(large):
    """The parent's share of the entries (asm) fails: the child is stopped at once, and the
    whole module verified here raises the verifier's error."""
    module = tilebc.load(large["invalid"], verify=False)
    count = len(module.functions)
    pid, verdict = _child(said_valid=True, linger=30)
    aside = AsideVerifier(module, pid, verdict)
    aside.entries = range(count - 1, count)  # the invalid entry is the last
    start = time.monotonic()
    with pytest.raises(tilebc.TilebcError, match="addf"):
        aside.confirm()
    assert time.monotonic() - start < 10 and aside.pid == 0
    with pytest.raises(ChildProcessError):  # killed and reaped
        os.waitpid(pid, os.WNOHANG)
    aside.cancel()


def test_a_child_ending_without_a_word_is_not_taken_as_valid(large):
    """A child that exits 0 without writing VALID (it failed before it could) proves nothing:
    the parent verifies the module itself and raises the verifier's error."""
    module = tilebc.load(large["invalid"], verify=False)
    pid, verdict = _child(said_valid=False)
    aside = AsideVerifier(module, pid, verdict)
    with pytest.raises(tilebc.TilebcError, match="addf"):
        aside.confirm()
    assert aside.valid is False
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def test_asm_splits_the_verifying_and_dis_leaves_it_to_the_child():
    """asm's parent verifies the last entries of a module of several (after encoding), the
    child the others; dis's child verifies every entry; a module of one entry is the child's."""
    assert 0 < child_entries(100, text=True) < 100
    assert child_entries(100, text=False) == 100
    assert child_entries(1, text=True) == 1 and child_entries(0, text=True) == 0


def test_verifying_in_parts_checks_the_parts_and_the_module_rules(large):
    """verify(module, entries): the module-level rules and the entries at those positions only;
    the parts of a module pass together exactly when the whole does."""
    from tilebc.verify import verify
    module = tilebc.load(large["invalid"], verify=False)
    count = len(module.functions)
    verify(module, range(0, count - 1))  # all but the invalid last entry
    with pytest.raises(tilebc.TilebcError, match="addf"):
        verify(module, range(count - 1, count))
    module.functions[0].name = module.functions[1].name  # a module-level rule broken
    with pytest.raises(tilebc.TilebcError, match="already defined"):
        verify(module, range(0, 0))


def test_asm_of_a_large_module_encodes_as_when_verified_first(large, tmp_path):
    # the invalid entry last (in the parent's share of the verifying) and first (the child's)
    for name in ("valid", "invalid", "invalid-first"):
        text = tmp_path / f"{name}.mlir"
        text.write_text(print_module(tilebc.load(large[name], verify=False)))
        assert text.stat().st_size // 4 > MIN_BYTES  # large enough to verify aside
        in_place = run_cli("asm", text, "-o", tmp_path / f"{name}-in-place.tilebc")
        output = tmp_path / f"{name}.tilebc"
        output.write_bytes(b"old contents")
        aside = _own_process("asm", text, "-o", output)
        assert (aside.returncode, aside.stderr) == (in_place.returncode, in_place.stderr)
        if name == "valid":
            assert aside.returncode == 0
            assert output.read_bytes() == (tmp_path / "valid-in-place.tilebc").read_bytes()
        else:
            assert aside.returncode == 1 and b"addf" in aside.stderr
            assert output.read_bytes() == b"old contents"
            assert not (tmp_path / f"{name}-in-place.tilebc").exists()


def test_input_that_does_not_decode_reports_as_in_place(large, tmp_path):
    # The child is forked before decoding: a file cut short fails in both processes, and the
    # parent's error is the one reported, the child stopped.
    cut = tmp_path / "cut.tilebc"
    cut.write_bytes(large["valid"].read_bytes()[:-40])
    in_place = run_cli("dis", cut)
    assert in_place.returncode == 1 and b"cut.tilebc" in in_place.stderr
    aside = _own_process("dis", cut)
    assert (aside.returncode, aside.stdout, aside.stderr) == (1, b"", in_place.stderr)
    text = tmp_path / "cut.mlir"
    text.write_text(print_module(tilebc.load(large["valid"]))[:-300])
    in_place = run_cli("asm", text, "-o", tmp_path / "in-place.tilebc")
    assert in_place.returncode == 1
    aside = _own_process("asm", text, "-o", tmp_path / "aside.tilebc")
    assert (aside.returncode, aside.stderr) == (1, in_place.stderr)
    assert not (tmp_path / "aside.tilebc").exists()
