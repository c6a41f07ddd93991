"""The `tilebc` command line: stdin/stdout, -o, exit codes, messages. Commands run in this process
(tilebc.cli.main); the terminal check and `python -m tilebc` run as real processes."""
import gc
import os
import pty
import subprocess
import sys

import pytest

import tilebc
from tilebc import oracles

from conftest import FIXTURE_DIR, ROOT, run_cli

SAMPLE = FIXTURE_DIR / "elementwise_f32" / "elementwise_f32-13.3.tilebc"
SAMPLE_13_5 = FIXTURE_DIR / "atan2_f32" / "atan2_f32-13.5.tilebc"  # atan2 needs 13.2


def tilebc_cli(*args, stdin=None, stdout=subprocess.PIPE, cwd=None):
    if stdout == subprocess.PIPE:
        return run_cli(*args, stdin=stdin or b"", cwd=cwd or ROOT)
    return subprocess.run([sys.executable, "-m", "tilebc.cli", *map(str, args)], input=stdin,
                          stdout=stdout, stderr=subprocess.PIPE, cwd=cwd or ROOT, timeout=120)


def test_info_lists_sections_entries_and_hints():
    result = tilebc_cli("info", SAMPLE)
    assert result.returncode == 0, result.stderr
    text = result.stdout.decode()
    assert "Tile IR bytecode 13.3" in text
    for section in ("func", "type", "string", "constant"):
        assert f"  {section} " in text
    module = tilebc.load(SAMPLE)
    assert f"@{module.functions[0].name}(" in text
    assert "optimization hints:" in text


def test_info_reads_stdin_and_names_it_in_errors():
    result = tilebc_cli("info", "-", stdin=SAMPLE.read_bytes())
    assert result.returncode == 0
    assert result.stdout.decode().startswith("<stdin>: Tile IR bytecode 13.3")
    bad = tilebc_cli("info", "-", stdin=SAMPLE.read_bytes()[:40])
    assert bad.returncode == 1
    assert bad.stderr.decode().startswith("tilebc info: error: <stdin>: offset 0x")


def test_bad_file_exits_1_with_offset_and_no_traceback(tmp_path):
    junk = tmp_path / "junk.tilebc"
    junk.write_bytes(b"not bytecode at all")
    result = tilebc_cli("info", junk)
    assert result.returncode == 1
    message = result.stderr.decode()
    assert (f"{junk}: offset 0x0: invalid magic number: input does not start with the Tile IR "
            "magic") in message
    assert "Traceback" not in message


def test_missing_file_exits_1():
    result = tilebc_cli("info", "no/such/file.tilebc")
    assert result.returncode == 1
    assert "no/such/file.tilebc" in result.stderr.decode()


@pytest.mark.parametrize("argv", [[], ["frobnicate"], ["convert", str(SAMPLE), "--to", "14.0"],
                                  ["convert", str(SAMPLE), "--to", "banana"], ["info"]])
def test_usage_errors_exit_2(argv):
    result = tilebc_cli(*argv)
    assert result.returncode == 2
    assert b"usage:" in result.stderr


def test_convert_to_file_is_atomic_and_readable_by_nvidia(tmp_path):
    out = tmp_path / "out.tilebc"
    result = tilebc_cli("convert", SAMPLE, "--target-version", "13.1", "-o", out)
    assert result.returncode == 0, result.stderr
    assert tilebc.load(out).version == tilebc.Version(13, 1)
    assert [p.name for p in tmp_path.iterdir()] == ["out.tilebc"]  # no temp file left behind
    if oracles.tool_path("tileirdisasm"):
        ours = oracles.tileirdisasm(out.read_bytes())
        assert ours.ok, ours.stderr


def test_convert_refusal_leaves_no_file(tmp_path):
    out = tmp_path / "out.tilebc"
    with pytest.raises(tilebc.EncodeError) as refusal:
        tilebc.dump(tilebc.load(SAMPLE_13_5), "13.1")
    expected = refusal.value.message
    assert "atan2 needs bytecode version 13.2" in expected
    result = tilebc_cli("convert", SAMPLE_13_5, "--to", "13.1", "-o", out)
    assert result.returncode == 1
    assert expected in result.stderr.decode()
    assert not out.exists()


def test_convert_to_stdout_pipe():
    result = tilebc_cli("convert", SAMPLE, "--to", "13.2", "-o", "-")
    assert result.returncode == 0
    assert tilebc.load(result.stdout).version == tilebc.Version(13, 2)


def test_binary_output_to_terminal_is_refused_unless_forced():
    main, secondary = pty.openpty()
    try:
        refused = tilebc_cli("convert", SAMPLE, "-o", "-", stdout=secondary)
        forced = tilebc_cli("convert", SAMPLE, "-o", "-", "-f", stdout=secondary)
    finally:
        os.close(secondary)
        os.close(main)
    assert refused.returncode == 2
    assert b"refusing to write binary bytecode to a terminal" in refused.stderr
    assert forced.returncode == 0


def test_translate_lists_versions():
    result = tilebc_cli("translate", "--list-versions")
    assert result.returncode == 0
    assert result.stdout.decode().split() == [str(v) for v in tilebc.ALL_VERSIONS]


def test_translate_needs_exactly_one_mode():
    result = tilebc_cli("translate", SAMPLE)
    assert result.returncode == 2
    assert b"choose exactly one of" in result.stderr


def test_demo_runs_every_stage_on_the_embedded_kernel():
    """The README's main job: assemble -> verify -> dis (== tileirdisasm) -> interpreter -> JIT."""
    result = tilebc_cli("demo")
    text = result.stdout.decode()
    assert result.returncode == 0, text + result.stderr.decode()
    for stage in ("== assemble embedded demo kernel", "== verify: ok", "== CPU interpreter vs numpy: ok",
                  "== JIT to PTX and cubin (nvJitLink): ok", "== all steps passed"):
        assert stage in text, stage
    if oracles.tool_path("tileirdisasm"):
        assert text.count("our dis == tileirdisasm") == len(tilebc.ALL_VERSIONS)


def test_demo_on_invalid_text_fails_with_location(tmp_path):
    bad = tmp_path / "bad.mlir"
    bad.write_text("entry @k() {\n  %x = addf %a, %b : tile<4xf32>\n  return\n}\n")
    result = tilebc_cli("demo", bad)
    assert result.returncode == 1
    assert f"{bad}:2:" in result.stderr.decode()


def test_python_dash_m_tilebc_is_the_cli():
    result = subprocess.run([sys.executable, "-m", "tilebc", "translate", "--list-versions"],
                            capture_output=True, timeout=60)
    assert result.returncode == 0 and result.stdout.split()[0] == b"13.1"


# Counts the collections that run inside tilebc.cli.main() of a new process and its calls of
# populate_arenas, reported from its hard exit (the last line of stderr).
_COLLECTIONS_PROBE = """import gc, sys
inside, runs, populated = [False], [], []
gc.callbacks.append(lambda phase, info: runs.append(1) if phase == "start" and inside[0] else None)
from tilebc import cli, speedups
speedups.populate_arenas = lambda: populated.append(1) or True
hard_exit = cli._hard_exit
def report(code):
    print("COLLECTIONS", len(runs), "POPULATED", len(populated), file=sys.stderr)
    hard_exit(code)
cli._hard_exit = report
sys.argv[0] = "tilebc"
inside[0] = True
sys.exit(cli.main())
"""


@pytest.mark.parametrize("command", ["dis", "verify"])
def test_one_shot_commands_run_no_collection(command, tmp_path):
    """dis, asm, verify, info and convert keep all they build until the process ends, so their own
    process runs no garbage collection (each would walk the whole module for nothing) and ends
    without freeing it object by object (the probe reports from the hard exit); in this process
    (run_cli) the library's usual collections stay on and main returns."""
    largest = max(FIXTURE_DIR.glob("*/*-13.5.tilebc"), key=lambda path: path.stat().st_size)
    argv = [command, largest] + (["-o", tmp_path / "out.mlir"] if command == "dis" else [])
    done = subprocess.run([sys.executable, "-c", _COLLECTIONS_PROBE, *map(str, argv)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1].startswith("COLLECTIONS 0 ")
    assert run_cli(*argv).returncode == 0 and gc.isenabled()


def test_one_shot_commands_populate_arenas_for_a_large_input(tmp_path):
    """A one-shot command's own process has the allocator's arenas populated once it has read an
    input of codecache.LARGE_INPUT_BYTES bytes or more (its module is built at once), not for a small kernel
    (its few new arenas would be populated for a few objects each); in this process, never."""
    from conftest import joined_fixture_module
    from tilebc import codecache, speedups
    large = tmp_path / "large.tilebc"
    large.write_bytes(tilebc.dump(joined_fixture_module(codecache.LARGE_INPUT_BYTES)))
    small = min(FIXTURE_DIR.glob("*/*-13.5.tilebc"), key=lambda path: path.stat().st_size)
    for command in (["dis", large, "-o", tmp_path / "large.mlir"], ["verify", large],
                    ["dis", small, "-o", tmp_path / "small.mlir"], ["verify", small]):
        done = subprocess.run([sys.executable, "-c", _COLLECTIONS_PROBE, *map(str, command)],
                              capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert done.returncode == 0, done.stderr
        expected = 1 if command[1] == large else 0
        assert done.stderr.splitlines()[-1].endswith(f" POPULATED {expected}"), command
    calls = []
    original = speedups.populate_arenas
    speedups.populate_arenas = lambda: calls.append(1)
    try:
        assert run_cli("verify", large).returncode == 0 and not calls
    finally:
        speedups.populate_arenas = original


def test_compile_in_its_own_process_ends_without_teardown(tmp_path):
    """`tilebc compile` (run by the C++ loader on every cache miss) ends through the hard exit,
    with its output written, as the one-shot commands do (the probe reports from it)."""
    fixture = FIXTURE_DIR / "atomics_raw" / "atomics_raw-13.5.tilebc"
    out = tmp_path / "k.ptx"
    done = subprocess.run([sys.executable, "-c", _COLLECTIONS_PROBE, "compile", str(fixture),
                           "--emit", "ptx", "-o", str(out)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1].startswith("COLLECTIONS ")
    assert out.read_text().startswith("//") and done.stdout.strip() == str(out)


def test_a_profiled_one_shot_command_ends_normally(tmp_path):
    """Under a profiler (or a tracer such as coverage) a one-shot command takes the normal way
    out, so the tool can write its results at exit."""
    fixture = next(FIXTURE_DIR.glob("*/*-13.5.tilebc"))
    stats = tmp_path / "dis.prof"
    done = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(stats), "-m", "tilebc",
                           "dis", str(fixture), "-o", str(tmp_path / "out.mlir")],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert stats.stat().st_size > 0 and (tmp_path / "out.mlir").stat().st_size > 0
