"""Every `tilebc` sub-command given bad input: exit status 1 (bad input) or 2 (usage), and a first
stderr line that names the file, the byte offset or line:col, and what was expected; never a
traceback, never a stray or partial output file. The commands run in this process (tilebc.cli.main);
the stdin cases run the real `python -m tilebc.cli` end to end."""
import os
import subprocess
import sys

import pytest

from conftest import FIXTURE_DIR, ROOT, run_cli

GOOD = FIXTURE_DIR / "elementwise_f32" / "elementwise_f32-13.3.tilebc"
ENV = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'runtime'}", "TILEBC_CACHE_DIR": "off"}


def tilebc_cli(*args, stdin=b"", cwd=None):
    return run_cli(*args, stdin=stdin, cwd=cwd or ROOT, env={"TILEBC_CACHE_DIR": "off"})


def tilebc_process(*args, stdin=b"", cwd=None):
    return subprocess.run([sys.executable, "-m", "tilebc.cli", *map(str, args)], input=stdin,
                          capture_output=True, cwd=cwd or ROOT, env=ENV, timeout=120)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Bad inputs of every kind, beside one good bytecode file and its text form."""
    folder = tmp_path_factory.mktemp("inputs")
    data = GOOD.read_bytes()
    files = {"bytecode": data, "empty": b"", "truncated": data[:100],
             "text": GOOD.with_suffix(".dis").read_bytes(), "binary": bytes(range(128, 256)) * 2,
             "prose": b"hello world\n"}
    for name, content in files.items():
        (folder / name).write_bytes(content)
    (folder / "directory").mkdir()
    return folder


def error_line(result) -> str:
    stderr = result.stderr.decode()
    assert "Traceback" not in stderr, stderr
    assert stderr.strip(), "no diagnostic on stderr"
    return stderr.splitlines()[0]


BYTECODE_READERS = [["dis"], ["convert", "--to", "13.1"], ["translate", "-cudatilebc-to-mlir"],
                    ["compile", "--emit", "ptx"]]
# what the first line must say for each bad input, after "FILE: "
BYTECODE_EXPECTED = {
    "empty": "offset 0x0: the input is empty; expected Tile IR bytecode",
    "truncated": "offset 0x64: ",
    "text": "offset 0x0: invalid magic number: input does not start with the Tile IR magic",
    "binary": "offset 0x0: invalid magic number: input does not start with the Tile IR magic",
    "missing": "No such file or directory",
    "directory": "Is a directory",
}


@pytest.mark.parametrize("kind", sorted(BYTECODE_EXPECTED))
@pytest.mark.parametrize("command", BYTECODE_READERS, ids=lambda c: c[0])
def test_bytecode_commands_name_the_file_and_offset(inputs, tmp_path, command, kind):
    path = inputs / kind
    out = tmp_path / "out"
    result = tilebc_cli(*command, path, "-o", out)
    assert result.returncode == 1
    line = error_line(result)
    assert line.startswith(f"tilebc {command[0]}: error: {path}: {BYTECODE_EXPECTED[kind]}"), line
    if kind == "text":  # the likely mix-up is named
        assert "looks like text (`tilebc asm`" in line
    assert not out.exists() and list(tmp_path.iterdir()) == []


TEXT_EXPECTED = {
    "bytecode": "offset 0x0: the input is Tile IR bytecode, not text (`tilebc dis`",
    "binary": "offset 0x0: the input is not UTF-8 text (byte 0x80); expected the Tile IR text",
    "empty": "1:1: the input is empty; expected 'entry', 'global' or 'module'",
    "prose": "1:1: expected 'entry', 'global' or 'module', found 'hello'",
}


# demo takes bytecode as well as text, so bytecode is no error for it
TEXT_CASES = [(command, kind) for command in (["asm"], ["translate", "-mlir-to-cudatilebc"], ["demo"])
              for kind in sorted(TEXT_EXPECTED) if not (command == ["demo"] and kind == "bytecode")]


@pytest.mark.parametrize("command,kind", TEXT_CASES, ids=[f"{c[0]}-{k}" for c, k in TEXT_CASES])
def test_text_commands_name_the_file_and_position(inputs, tmp_path, command, kind):
    path = inputs / kind
    output = [] if command == ["demo"] else ["-o", tmp_path / "out.tilebc"]
    result = tilebc_cli(*command, path, *output)
    assert result.returncode == 1
    line = error_line(result)
    separator = "" if TEXT_EXPECTED[kind][0].isdigit() else " "
    if command[0] == "translate" and kind == "prose":
        # diagnostics of the text itself are laid out as cuda-tile-translate's: FILE:L:C: error:
        message = TEXT_EXPECTED[kind].split(": ", 1)[1]
        assert line.startswith(f"{path}:1:1: error: {message}"), line
    else:
        assert line.startswith(f"tilebc {command[0]}: error: {path}:{separator}"
                               f"{TEXT_EXPECTED[kind]}"), line
    assert list(tmp_path.iterdir()) == []


def test_demo_on_truncated_bytecode_names_the_file(inputs):
    result = tilebc_process("demo", inputs / "truncated")
    assert result.returncode == 1
    assert error_line(result).startswith(f"tilebc demo: error: {inputs / 'truncated'}: offset 0x64:")


@pytest.mark.parametrize("target", ["missing-folder/out.tilebc", "directory"])
def test_unwritable_output_names_the_output_not_a_temp_file(inputs, target):
    output = inputs / target
    result = tilebc_cli("convert", inputs / "bytecode", "-o", output)
    assert result.returncode == 1
    line = error_line(result)
    assert line.startswith(f"tilebc convert: error: {output}: cannot write the output: "), line
    assert ".tmp" not in line
    assert not [p for p in inputs.rglob(".tilebc-*")], "temp file left behind"


@pytest.mark.parametrize("argv, expected", [
    (["asm", "TEXT", "--target-version", "14.0"], "unsupported version 14.0 (supported: 13.1"),
    (["convert", "BYTECODE", "--to", "banana"], "invalid version 'banana' (expected 13.1-13.5)"),
    (["translate", "-mlir-to-cudatilebc", "-bytecode-version=13.9", "TEXT"],
     "Invalid argument '13.9': the supported versions are [13.1 - 13.5]"),
    (["compile", "BYTECODE", "--threads", "0"], "expected a positive number, got '0'"),
    (["compile", "-", "--emit", "ptx"], "with the input on stdin, name the output file with -o"),
])
def test_usage_errors_exit_2_and_say_what_was_expected(inputs, argv, expected):
    argv = [{"TEXT": inputs / "text", "BYTECODE": inputs / "bytecode"}.get(a, a) for a in argv]
    result = tilebc_cli(*argv)
    assert result.returncode == 2
    assert expected in result.stderr.decode()
    assert "Traceback" not in result.stderr.decode()


@pytest.mark.parametrize("arch, expected", [
    ("banana", "cannot parse GPU architecture 'banana'; expected e.g. 'sm_90'"),
    ("sm_13", "GPU architecture sm_13 is not supported by the JIT; supported: sm_80"),
])
def test_unknown_arch_is_one_clear_line(inputs, tmp_path, arch, expected):
    result = tilebc_cli("compile", inputs / "bytecode", "--arch", arch, "-o", tmp_path / "k.cubin")
    assert result.returncode == 1
    assert expected in error_line(result)
    assert list(tmp_path.iterdir()) == []


def test_compile_reads_stdin(inputs, tmp_path):
    output = tmp_path / "k.ptx"
    result = tilebc_process("compile", "-", "--emit", "ptx", "-o", output,
                            stdin=(inputs / "bytecode").read_bytes())
    assert result.returncode == 0, result.stderr
    assert ".entry float_math_" in output.read_text()
    bad = tilebc_process("compile", "-", "--emit", "ptx", "-o", output,
                         stdin=(inputs / "truncated").read_bytes())
    assert bad.returncode == 1
    assert error_line(bad).startswith("tilebc compile: error: <stdin>: offset 0x64:")


@pytest.mark.parametrize("command", ["dis", "asm", "verify", "info", "convert", "translate", "run",
                                     "compile", "cache", "demo"])
def test_every_command_has_help(command):
    result = tilebc_cli(command, "--help")
    assert result.returncode == 0
    assert result.stdout.decode().startswith(f"usage: tilebc {command}")
