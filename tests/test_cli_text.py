"""`tilebc dis / asm / verify / translate` on real fixtures (tilebc.cli.main, in this process), with
NVIDIA's tileirdisasm as the judge of the bytes we write."""
import pytest

import tilebc
from tilebc.oracles import tileirdisasm
from tilebc.text import assemble

from conftest import FIXTURE_DIR, ROOT, needs_disasm, run_cli as cli_in_process

KERNEL = FIXTURE_DIR / "loop_for_carried" / "loop_for_carried-13.3"
OLD_KERNEL = FIXTURE_DIR / "elementwise_f32" / "elementwise_f32-13.1"

BAD_TEXT = "entry @k(%a: tile<i32>) {\n  %0 = addi %a, %nope : tile<i32>\n  return\n}\n"
# Parses, but breaks two typing rules.
INVALID_TEXT = ("entry @k(%a: tile<f32>) {\n  %0 = addi %a, %a : tile<f32>\n"
                "  %1 = xori %a, %a : tile<f32>\n  return\n}\n")


def run_cli(*args, stdin=None, cwd=None):
    return cli_in_process(*args, stdin=stdin or b"", cwd=cwd or ROOT)


def _file(stem, suffix: str):
    """A fixture file: `stem` names the kernel and version (elementwise_f32-13.1)."""
    return stem.parent / (stem.name + suffix)


def _as_mlir(text: str, module_loc: str = "") -> str:
    """tileirdisasm's text as MLIR's tools print it: the body indented inside the module."""
    body, aliases = [], []
    for line in text.splitlines():
        (aliases if line.startswith("#") else body).append(line)
    return ("cuda_tile.module @kernels {\n" + "".join("  " + line + "\n" for line in body)
            + "}" + module_loc + "\n" + "".join(line + "\n" for line in aliases))


def _text(stem) -> str:
    return _file(stem, ".dis").read_text()


# ---- dis -----------------------------------------------------------------------------------------

def test_dis_prints_what_tileirdisasm_prints():
    result = run_cli("dis", _file(KERNEL, ".tilebc"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode() == _text(KERNEL)


def test_dis_debug_and_output_file(tmp_path):
    out = tmp_path / "listing.mlir"
    result = run_cli("dis", "-g", _file(KERNEL, ".tilebc"), "-o", out)
    assert result.returncode == 0, result.stderr
    assert result.stdout == b""
    assert out.read_text() == _file(KERNEL, ".dis-g").read_text()


def test_dis_reads_stdin():
    result = run_cli("dis", "-", stdin=_file(KERNEL, ".tilebc").read_bytes())
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode() == _text(KERNEL)
    broken = run_cli("dis", "-", stdin=_file(KERNEL, ".tilebc").read_bytes()[:30])
    assert broken.returncode == 1
    assert broken.stderr.decode().startswith("tilebc dis: error: <stdin>:")


# ---- asm -----------------------------------------------------------------------------------------

@needs_disasm
def test_asm_writes_beside_the_input_by_default(tmp_path):
    source = tmp_path / "kernel.mlir"
    source.write_text(_text(KERNEL))
    result = run_cli("asm", source)
    assert result.returncode == 0, result.stderr
    written = (tmp_path / "kernel.tilebc").read_bytes()
    assert tilebc.load(written).version == tilebc.Version(13, 5)
    assert tileirdisasm(written).stdout == _text(KERNEL)


def test_asm_to_a_pipe_with_target_version():
    result = run_cli("asm", "-", "-o", "-", "--target-version", "13.3",
                     stdin=_text(KERNEL).encode())
    assert result.returncode == 0, result.stderr
    assert result.stdout == assemble(_text(KERNEL), "13.3")
    assert tilebc.load(result.stdout).version == tilebc.Version(13, 3)


def test_asm_bad_text_names_file_line_column_with_a_caret(tmp_path):
    source = tmp_path / "bad.mlir"
    source.write_text(BAD_TEXT)
    result = run_cli("asm", source)
    assert result.returncode == 1
    lines = result.stderr.decode().splitlines()
    assert lines[0] == f"tilebc asm: error: {source}:2:17: use of undefined value %nope"
    assert lines[1].strip() == "%0 = addi %a, %nope : tile<i32>"
    assert lines[2].index("^") - lines[1].index("%0") == 16 - 2
    assert not (tmp_path / "bad.tilebc").exists()


def test_asm_too_old_target_version_is_refused(tmp_path):
    """A 13.3 op (pack) cannot be written as 13.1: exit 1 naming what needs the newer version."""
    source = tmp_path / "pack.mlir"
    source.write_text(_text(FIXTURE_DIR / "pack_unpack" / "pack_unpack-13.3"))
    result = run_cli("asm", source, "-o", tmp_path / "out.tilebc", "--target-version", "13.1")
    assert result.returncode == 1
    assert "13.3" in result.stderr.decode()
    assert not (tmp_path / "out.tilebc").exists()


# ---- verify --------------------------------------------------------------------------------------

@pytest.mark.parametrize("suffix", [".dis", ".tilebc"])
def test_verify_accepts_valid_text_and_bytecode(suffix):
    path = _file(KERNEL, suffix)
    result = run_cli("verify", path)
    assert result.returncode == 0, result.stderr
    assert result.stderr.decode().startswith(f"{path}: ok (")


def test_verify_lists_every_diagnostic_for_invalid_text(tmp_path):
    source = tmp_path / "invalid.mlir"
    source.write_text(INVALID_TEXT)
    result = run_cli("verify", source)
    assert result.returncode == 1
    lines = result.stderr.decode().splitlines()
    assert lines[0].startswith(f"{source}:2:3: addi: ")
    assert lines[1].startswith(f"{source}:3:3: xori: ")
    assert lines[-1] == f"{source}: 2 error(s)"


def test_verify_lists_diagnostics_for_invalid_bytecode(tmp_path):
    source = tmp_path / "invalid.mlir"
    source.write_text(INVALID_TEXT)
    data = tmp_path / "invalid.tilebc"
    assert run_cli("asm", "--no-verify", source, "-o", data).returncode == 0
    result = run_cli("verify", data)
    assert result.returncode == 1
    lines = result.stderr.decode().splitlines()
    # Bytecode diagnostics point at byte offsets instead of lines.
    assert [line.split(": ")[2] for line in lines[:2]] == ["addi", "xori"]
    assert all(line.startswith(f"{data}: offset 0x") for line in lines[:2]), lines
    assert lines[-1] == f"{data}: 2 error(s)"


# ---- translate (cuda-tile-translate spellings) ---------------------------------------------------

@needs_disasm
def test_translate_mlir_to_bytecode_at_an_old_version(tmp_path):
    source = tmp_path / "x.mlir"
    source.write_text(_text(OLD_KERNEL))
    out = tmp_path / "y.tilebc"
    result = run_cli("translate", "-mlir-to-cudatilebc", "-bytecode-version=13.1", source, "-o", out)
    assert result.returncode == 0, result.stderr
    data = out.read_bytes()
    assert tilebc.load(data).version == tilebc.Version(13, 1)
    assert tileirdisasm(data).stdout == _text(OLD_KERNEL)
    back = run_cli("translate", "-cudatilebc-to-mlir", out)
    assert back.returncode == 0, back.stderr
    assert back.stdout.decode() == _as_mlir(_text(OLD_KERNEL))


def test_translate_roundtrip_prints_the_text_again(tmp_path):
    source = tmp_path / "x.mlir"
    source.write_text(_file(KERNEL, ".dis-g").read_text())
    plain = run_cli("translate", "-test-cudatile-roundtrip", source)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.decode() == _as_mlir(_text(KERNEL))
    debug = run_cli("translate", "-test-cudatile-roundtrip", "-mlir-print-debuginfo", source)
    with_locs = _file(KERNEL, ".dis-g").read_text()
    unknown = next(line.split(" = ")[0] for line in with_locs.splitlines()
                   if line.endswith("= loc(unknown)"))
    assert debug.stdout.decode() == _as_mlir(with_locs, f" loc({unknown})")


def test_translate_bad_text_exits_1(tmp_path):
    source = tmp_path / "bad.mlir"
    source.write_text(BAD_TEXT)
    result = run_cli("translate", "-mlir-to-cudatilebc", source, "-o", tmp_path / "y.tilebc")
    assert result.returncode == 1
    assert f"{source}:2:17: error: use of undefined value %nope" in result.stderr.decode()
