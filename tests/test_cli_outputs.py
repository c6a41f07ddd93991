"""How every command writes its output (tilebc/outputs.py), as llvm-dis and wasm-tools users expect:
special files and symlinks written through, the umask honoured, regular files replaced atomically
(nothing lost when writing fails), and one error line naming the file. The commands run in this
process (run_cli: what they write to a path is the same, without a Python start per call); the
process's own plumbing (its stdout on a full device, SIGINT) is tested on a subprocess."""
import errno
import os
import signal
import stat
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from conftest import FIXTURE_DIR, ROOT, run_cli

GOOD = FIXTURE_DIR / "elementwise_f32" / "elementwise_f32-13.5.tilebc"
TEXT = GOOD.with_suffix(".dis")
ENV = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'runtime'}", "TILEBC_CACHE_DIR": "off"}
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def tilebc_process(*args, stdout=subprocess.PIPE):
    """`tilebc ARGS` as a process of its own, for the tests of the process's plumbing."""
    return subprocess.run([sys.executable, "-m", "tilebc.cli", *map(str, args)],
                          stdout=stdout, stderr=subprocess.PIPE, cwd=ROOT, env=ENV, timeout=120)


def tilebc_here(*args, cwd=None, umask=None, stdin=b""):
    """`tilebc ARGS` in this process (no Python start-up per call), with the subprocesses' cache
    setting and, where given, the umask a shell would give the command."""
    saved = os.umask(umask) if umask is not None else None
    try:
        return run_cli(*args, cwd=cwd, stdin=stdin, env={"TILEBC_CACHE_DIR": "off"})
    finally:
        if saved is not None:
            os.umask(saved)


def one_error_line(result) -> str:
    stderr = result.stderr.decode()
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def no_temp_files(folder) -> bool:
    return not [p for p in os.listdir(folder) if p.endswith(".tmp")]


# ---------------------------------------------------------------------------- special files

def test_a_fifo_is_written_through_not_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    result = tilebc_here("dis", GOOD, "-o", fifo)
    reader.join(timeout=10)
    if reader.is_alive():  # nothing opened the FIFO: release the reader
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert result.returncode == 0, result.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert received == [TEXT.read_bytes()]


@pytest.mark.skipif(not IS_ROOT, reason="making a device node needs root")
def test_a_device_node_is_written_through_not_replaced(tmp_path):
    """Regression: as root, `-o /dev/null` replaced the device with a regular file. A null device
    of our own stands in for /dev/null, so a regression cannot break the machine's."""
    node = tmp_path / "null"
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    for argv in (["dis", GOOD], ["asm", TEXT], ["convert", GOOD, "--to", "13.1"],
                 ["compile", GOOD, "--emit", "ptx"]):
        result = tilebc_here(*argv, "-o", node)
        assert result.returncode == 0, (argv, result.stderr)
        assert stat.S_ISCHR(os.lstat(node).st_mode), argv
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.skipif(not IS_ROOT, reason="making a device node needs root")
def test_a_full_device_names_the_file(tmp_path):
    node = tmp_path / "full"
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    result = tilebc_here("dis", GOOD, "-o", node)
    assert result.returncode == 1
    assert one_error_line(result) == (f"tilebc dis: error: {node}: cannot write the output: "
                                      f"{os.strerror(errno.ENOSPC)}")
    assert stat.S_ISCHR(os.lstat(node).st_mode)


def test_stdout_on_a_full_device_names_stdout(tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "wb") as full:  # a redirection: the device is opened, never replaced
        result = tilebc_process("dis", GOOD, stdout=full)
    assert result.returncode == 1
    assert one_error_line(result) == (f"tilebc dis: error: <stdout>: cannot write the output: "
                                      f"{os.strerror(errno.ENOSPC)}")


# ---------------------------------------------------------------------------------- symlinks

def test_a_symlink_is_followed_and_stays_a_link(tmp_path):
    target = tmp_path / "real.mlir"
    target.write_text("old\n")
    link = tmp_path / "link.mlir"
    link.symlink_to(target.name)
    result = tilebc_here("dis", GOOD, "-o", link)
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and os.readlink(link) == target.name
    assert target.read_bytes() == TEXT.read_bytes()
    assert no_temp_files(tmp_path)


def test_a_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "link.tilebc"
    link.symlink_to("made.tilebc")
    result = tilebc_here("asm", TEXT, "-o", link)
    assert result.returncode == 0, result.stderr
    assert link.is_symlink()
    assert (tmp_path / "made.tilebc").read_bytes()[:8] == b"\x7fTileIR\x00"


# -------------------------------------------------------------------------------- permissions

@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600),
                                         (0o000, 0o666)])
def test_new_outputs_honour_the_umask(tmp_path, umask, mode):
    """Regression: outputs were created 0600 (the temp file's mode) whatever the umask."""
    outputs = {"dis": tmp_path / "k.mlir", "asm": tmp_path / "k.tilebc",
               "compile": tmp_path / "k.ptx"}
    for command, output in outputs.items():
        source = TEXT if command == "asm" else GOOD
        extra = ["--emit", "ptx"] if command == "compile" else []
        result = tilebc_here(command, source, *extra, "-o", output, umask=umask)
        assert result.returncode == 0, result.stderr
        assert stat.S_IMODE(os.stat(output).st_mode) == mode, command


def test_a_replaced_file_keeps_its_mode(tmp_path):
    output = tmp_path / "k.mlir"
    output.write_text("old\n")
    os.chmod(output, 0o640)
    result = tilebc_here("dis", GOOD, "-o", output, umask=0o022)
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(os.stat(output).st_mode) == 0o640
    assert output.read_bytes() == TEXT.read_bytes()


# --------------------------------------------------------------------------------- full disk

@pytest.fixture
def small_tmpfs(tmp_path):
    """A 64 KiB tmpfs, filled but for a few hundred bytes (needs root and mount rights)."""
    folder = tmp_path / "small"
    folder.mkdir()
    if not IS_ROOT or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs",
                                      str(folder)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (test_full_disk_simulated covers it)")
    try:
        (folder / "old.mlir").write_text("old\n")
        filler = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(filler, b"\0" * 512):
                pass
        except OSError as error:
            assert error.errno == errno.ENOSPC
        finally:
            os.close(filler)
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


@pytest.mark.parametrize("argv", [["dis", GOOD], ["compile", GOOD, "--emit", "ptx"],
                                  ["convert", GOOD, "--to", "13.1"]], ids=lambda a: a[0])
def test_full_disk_names_the_file_and_keeps_the_old_one(small_tmpfs, argv):
    """Regression: a full disk said `error: : No space left on device`."""
    output = small_tmpfs / "old.mlir"
    result = tilebc_here(*argv, "-o", output)
    assert result.returncode == 1
    assert one_error_line(result) == (f"tilebc {argv[0]}: error: {output}: cannot write the "
                                      f"output: {os.strerror(errno.ENOSPC)}")
    assert output.read_text() == "old\n"
    assert no_temp_files(small_tmpfs)


def test_full_disk_simulated(tmp_path, monkeypatch, capsys):
    """The same without a tmpfs: os.fsync fails with ENOSPC, in-process."""
    from tilebc import outputs
    from tilebc.cli import main

    def full(descriptor):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(outputs.os, "fsync", full)
    output = tmp_path / "k.mlir"
    output.write_text("old\n")
    assert main(["dis", str(GOOD), "-o", str(output)]) == 1
    assert capsys.readouterr().err == (f"tilebc dis: error: {output}: cannot write the output: "
                                       f"{os.strerror(errno.ENOSPC)}\n")
    assert output.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["k.mlir"]


# ------------------------------------------------------------------------------ streamed text

def test_pieces_are_written_as_they_come_and_a_failure_keeps_the_old_file(tmp_path):
    """`dis` writes its text an entry at a time (write_output given a function of pieces): an
    error while the pieces are made leaves the old file and no temp file."""
    from tilebc import outputs
    from tilebc.errors import TilebcError
    output = tmp_path / "k.mlir"
    output.write_text("old\n")
    written = []

    def pieces():
        for piece in ("a\n", "b\n"):
            written.append(piece)
            yield piece
        raise TilebcError("a type too long to print")
    with pytest.raises(TilebcError):
        outputs.write_output(output, pieces, binary=False)
    assert written == ["a\n", "b\n"]
    assert output.read_text() == "old\n" and os.listdir(tmp_path) == ["k.mlir"]
    outputs.write_output(output, lambda: iter(["é\n", b"\xff\n"]), binary=False)
    assert output.read_bytes() == "é\n".encode() + b"\xff\n"


@pytest.mark.parametrize("refused", ["temp file", "rename"])
def test_pieces_are_made_again_where_the_file_is_rewritten_in_place(tmp_path, monkeypatch,
                                                                    refused):
    """The file cannot be replaced (no temp file beside it in a folder we may not write, or the
    rename refused; simulated, as root may write anywhere): it is rewritten in place, from
    another call of the function where the first one's pieces were already written."""
    from tilebc import outputs
    output = tmp_path / "k.mlir"
    output.write_text("old\n")
    calls = []

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    def pieces():
        calls.append(1)
        yield "new "
        yield "text\n"
    if refused == "temp file":
        monkeypatch.setattr(outputs, "temp_file", refuse)
    else:
        monkeypatch.setattr(outputs.os, "replace", refuse)
    outputs.write_output(output, pieces, binary=False)
    assert output.read_text() == "new text\n"
    assert len(calls) == (1 if refused == "temp file" else 2)
    assert os.listdir(tmp_path) == ["k.mlir"]


def test_a_failure_while_rewriting_in_place_keeps_the_old_file(tmp_path, monkeypatch):
    """Where the file is rewritten in place, the pieces are made whole before it is truncated:
    an error while printing leaves the old contents."""
    from tilebc import outputs
    from tilebc.errors import TilebcError
    output = tmp_path / "k.mlir"
    output.write_text("old\n")

    def no_temp_file(folder, prefix, suffix):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), folder)

    def pieces():
        yield "partial\n"
        raise TilebcError("a type too long to print")
    monkeypatch.setattr(outputs, "temp_file", no_temp_file)
    with pytest.raises(TilebcError):
        outputs.write_output(output, pieces, binary=False)
    assert output.read_text() == "old\n"


@pytest.mark.parametrize("debug", [False, True], ids=["plain", "-g"])
def test_dis_pieces_join_to_tileirdisasms_listing(debug):
    """The pieces `tilebc dis` writes, one per global and entry (the aliases last with -g), make
    the listing NVIDIA's tileirdisasm printed for the file (stored beside it)."""
    from tilebc import load
    from tilebc.ir import Module
    from tilebc.text import print_module
    from tilebc.text.printer import module_text_pieces
    for path in sorted(FIXTURE_DIR.glob("*/*-13.5.tilebc"))[:40]:
        module = load(path)
        pieces = list(module_text_pieces(module, debug=debug))
        assert len(pieces) == len(module.functions) + len(module.globals) + debug, path
        listing = path.with_suffix(".dis-g" if debug else ".dis").read_text()
        assert "".join(pieces) == listing, path
    empty = Module()
    assert "".join(module_text_pieces(empty, debug=debug)) == print_module(empty, debug=debug)


# ----------------------------------------------------------------------------- output names

def test_compile_dash_o_dash_writes_ptx_to_stdout(tmp_path):
    """Regression: `tilebc compile -o -` wrote files named `-` and `-.json`."""
    result = tilebc_here("compile", GOOD, "--emit", "ptx", "-o", "-", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert b".entry float_math_" in result.stdout
    assert os.listdir(tmp_path) == []
    piped = tilebc_here("compile", "-", "--emit", "ptx", "-o", "-", stdin=GOOD.read_bytes(),
                       cwd=tmp_path)
    assert piped.returncode == 0 and piped.stdout == result.stdout
    verbose = tilebc_here("compile", GOOD, "--emit", "ptx", "-v", "-o", "-", cwd=tmp_path)
    assert verbose.stdout == result.stdout  # the per-kernel facts go to stderr
    assert b"threads/CTA" in verbose.stderr


@pytest.mark.parametrize("extra", [[], ["--emit", "cubin"], ["--fatbin", "--arch", "sm_80,sm_90"]])
def test_compile_dash_o_dash_refuses_several_files(tmp_path, extra):
    result = tilebc_here("compile", GOOD, *extra, "-o", "-", cwd=tmp_path)
    assert result.returncode == 2
    assert "name an output file" in one_error_line(result)
    assert os.listdir(tmp_path) == []


def test_default_names_keep_dots_in_folder_names(tmp_path):
    """Regression: rsplit('.') turned proj.v2/kernel into proj.ptx."""
    folder = tmp_path / "proj.v2"
    folder.mkdir()
    (folder / "kernel").write_bytes(GOOD.read_bytes())
    (folder / "text").write_bytes(TEXT.read_bytes())
    assert tilebc_here("compile", "proj.v2/kernel", "--emit", "ptx", cwd=tmp_path).returncode == 0
    assert tilebc_here("asm", "proj.v2/text", cwd=tmp_path).returncode == 0
    assert sorted(os.listdir(folder)) == ["kernel", "kernel.ptx", "text", "text.tilebc"]
    assert sorted(os.listdir(tmp_path)) == ["proj.v2"]


@pytest.mark.parametrize("argv, name", [(["asm"], "k.tilebc"), (["compile", "--emit", "ptx"],
                                                                 "k.ptx")])
def test_a_default_output_never_overwrites_the_input(tmp_path, argv, name):
    """Regression: `tilebc asm X.tilebc` on a text file named .tilebc overwrote its input."""
    source = tmp_path / name
    content = TEXT.read_bytes() if argv == ["asm"] else GOOD.read_bytes()
    source.write_bytes(content)
    result = tilebc_here(argv[0], source, *argv[1:])
    assert result.returncode == 2
    assert one_error_line(result).endswith(f"the default output {source} is the input file; "
                                           "name the output with -o")
    assert source.read_bytes() == content


# ---------------------------------------------------------------------------- tilebc run input

def _npy(tmp_path):
    good = tmp_path / "good.npy"
    np.save(good, np.ones(128, np.float32))
    data = good.read_bytes()
    (tmp_path / "truncated.npy").write_bytes(data[:200])
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }"
    header += b" " * (118 - len(header) - 1) + b"\n"
    (tmp_path / "huge.npy").write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little")
                                        + header + data[128:])
    (tmp_path / "junk.npy").write_bytes(b"junk")
    np.save(tmp_path / "objects.npy", np.array([{}, 1], dtype=object), allow_pickle=True)


@pytest.mark.parametrize("first, expected", [
    ("truncated.npy", "truncated .npy file: the header says shape (128,) of float32 (512 bytes"),
    ("huge.npy", "truncated .npy file: the header says shape (1000000000000,) of float32"),
    ("junk.npy", "not a readable .npy file: "),
    ("objects.npy", "the array holds Python objects (object); expected numbers"),
    ("missing.npy", "cannot read the argument: No such file or directory"),
])
def test_run_bad_npy_is_one_line_naming_the_file(tmp_path, first, expected):
    _npy(tmp_path)
    start = time.perf_counter()
    result = tilebc_here("run", GOOD, "--grid", "2", "--arg", first, "--arg", "good.npy",
                         "--arg", "zeros:float32:128", cwd=tmp_path)
    assert time.perf_counter() - start < 30
    assert result.returncode == 1
    assert one_error_line(result) == f"tilebc run: error: {first}: {expected}" or \
        one_error_line(result).startswith(f"tilebc run: error: {first}: {expected}")


@pytest.mark.parametrize("value, expected", [
    ("nan", "argument 0: parameter 0 has type tile<ptr<f32>>; expected an array or an integer "
            "address, got nan"),
    ("-1", "argument 0: address -1 for parameter 0 (tile<ptr<f32>>) is outside [0, 2**64)"),
])
def test_run_scalar_for_a_pointer_is_one_line(tmp_path, value, expected):
    result = tilebc_here("run", GOOD, "--arg", value, "--arg", "zeros:float32:64",
                         "--arg", "zeros:float32:64")
    assert result.returncode == 1
    assert one_error_line(result) == f"tilebc run: error: {GOOD}: {expected}"


def test_run_out_is_written_by_the_output_rules(tmp_path):
    link = tmp_path / "result.npz"
    link.symlink_to("real.npz")
    result = tilebc_here("run", GOOD, "--grid", "2", "--arg", "rand:float32:128",
                        "--arg", "rand:float32:128", "--arg", "zeros:float32:128",
                        "--out", link, umask=0o002)
    assert result.returncode == 0, result.stderr
    assert link.is_symlink()
    assert stat.S_IMODE(os.stat(tmp_path / "real.npz").st_mode) == 0o664
    with np.load(link) as saved:
        assert sorted(saved) == ["arg0", "arg1", "arg2"]


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stream:
        fields = stream.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads CPU time from /proc")
def test_sigint_is_one_line_without_a_traceback():
    process = subprocess.Popen(
        [sys.executable, "-m", "tilebc.cli", "run", str(GOOD), "--no-batch", "--grid", "200000",
         "--arg", "rand:float32:12800000", "--arg", "rand:float32:12800000",
         "--arg", "zeros:float32:12800000"], stderr=subprocess.PIPE, cwd=ROOT, env=ENV,
        # a test worker may ignore SIGINT (pytest-xdist's do), and an ignored signal stays ignored
        # across exec: give the command the disposition a terminal gives it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # interrupt once the run is under way: after 1.5 s of CPU time (imports take about 0.3 s)
    deadline = time.monotonic() + 120
    while _cpu_seconds(process.pid) < 1.5 and time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read()
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130
    assert stderr.decode() == "tilebc run: interrupted\n"


@pytest.mark.parametrize("value, expected", [
    ("rand:float32:1000000000000", "1000000000000 elements need 8000000000000 bytes, more than "
                                   "this machine's memory"),
    ("zeros:float32:1000000x1000000", "1000000000000 elements need 4000000000000 bytes"),
    ("zeros:float32:-5", "negative extent"),
])
def test_run_generated_arrays_are_bounded(value, expected):
    result = tilebc_here("run", GOOD, "--arg", value, "--arg", "zeros:float32:64",
                         "--arg", "zeros:float32:64")
    assert result.returncode == 2
    assert one_error_line(result).startswith(f"tilebc run: error: bad array argument '{value}': "
                                             f"{expected}")


@pytest.mark.parametrize("value, expected", [
    ("1.5", "parameter 1 has type tile<i32>; expected an integer, got 1.5"),
    ("inf", "parameter 1 has type tile<i32>; expected an integer, got inf"),
    ("4294967296", "4294967296 does not fit parameter 1 (tile<i32>): expected -2147483648 to "
                   "4294967295"),
])
def test_run_scalars_must_fit_their_parameter(value, expected):
    """Regression: 1.5 was truncated, 2**32 wrapped and inf gave an OverflowError traceback."""
    import re

    import tilebc
    from tilebc.interp import ArgumentError, Pointer, run
    number = int(value) if value.isdigit() else float(value)
    arrays = [Pointer(np.zeros(64, np.float32)) for _ in range(3)]
    with pytest.raises(ArgumentError, match="argument 1: " + re.escape(expected)):
        run(tilebc.load(GOOD), None, (1,), arrays[0], number, 1, arrays[1], 64, 1, arrays[2],
            64, 1)


def test_temp_files_are_new_private_and_distinct(tmp_path, monkeypatch):
    """outputs.temp_file (mkstemp without tempfile's start-up cost): mode 0600, never an existing
    file (a name that is taken is drawn again), distinct names."""
    from tilebc import outputs
    made = [outputs.temp_file(str(tmp_path), ".t-", ".x") for _ in range(20)]
    for descriptor, path in made:
        os.close(descriptor)
        assert os.path.basename(path).startswith(".t-") and path.endswith(".x")
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert len({path for _, path in made}) == 20
    draws = iter([b"\0" * 6, b"\0" * 6, b"\1" * 6])  # the first name exists: drawn again
    monkeypatch.setattr(outputs.os, "urandom", lambda n: next(draws))
    os.close(outputs.temp_file(str(tmp_path), "k", "")[0])
    descriptor, path = outputs.temp_file(str(tmp_path), "k", "")
    os.close(descriptor)
    assert path == str(tmp_path / ("k" + "01" * 6))
