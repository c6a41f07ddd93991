"""README.md's code runs as written: each python block is executed verbatim in a folder where
`kernel.tilebc` is a real kernel (cuTile's `vadd`, exported here by cuTile itself, or a stored
fixture), each shell block's commands are run (the setup script is only syntax-checked: it installs
packages), and the command-line synopsis names only commands and options the parser knows.

Blocks that launch on a GPU are skipped, with the reason, when no GPU/driver (or torch) is present."""
import io
import os
import re
import shlex
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tilebc import oracles
from tilebc.cli import build_parser

from conftest import FIXTURE_DIR, ROOT

README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"^```(\w*)\n(.*?)^```", README, re.M | re.S)
PYTHON = [code for language, code in BLOCKS if language == "python"]
SHELL = [code for language, code in BLOCKS if language == "sh"]
SYNOPSIS = [code for language, code in BLOCKS if not language and code.startswith("tilebc ")]
ENV = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'runtime'}"}

try:  # cuTile exports the README's vadd; without it only the stored fixtures stand in
    import cuda.tile as ct
    from cuda.tile.compilation import (ArrayConstraint, CallingConvention, KernelSignature,
                                       export_kernel)
except ImportError:  # pragma: no cover - cuda-tile is in the test extra
    ct = None

if ct is not None:
    TILE = 64

    @ct.kernel
    def vadd(a, b, out):
        i = ct.bid(0)
        x = ct.load(a, index=(i,), shape=(TILE,))
        y = ct.load(b, index=(i,), shape=(TILE,))
        ct.store(out, index=(i,), tile=x + y)


def block(first_line: str) -> str:
    """The python block that starts with `first_line` (fails when the README lost it)."""
    found = [code for code in PYTHON if code.startswith(first_line)]
    assert len(found) == 1, f"README has {len(found)} python blocks starting {first_line!r}"
    return found[0]


@pytest.fixture(scope="module")
def vadd_bytes():
    if ct is None:
        pytest.skip("cuda.tile (cuTile Python) is not installed")
    array = ArrayConstraint(ct.float32, 1, index_dtype=ct.int32, stride_lower_bound_incl=0,
                            alias_groups=(), may_alias_internally=False, shape_constant=(None,),
                            stride_constant=(None,), shape_divisible_by=1, base_addr_divisible_by=1)
    stream = io.BytesIO()
    export_kernel(vadd, [KernelSignature([array] * 3, CallingConvention.cutile_python_v1())], stream,
                  output_format="tileir_bytecode", bytecode_version="13.3")
    return stream.getvalue()


def in_folder_with_kernel(tmp_path, monkeypatch, data: bytes) -> None:
    (tmp_path / "kernel.tilebc").write_bytes(data)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TILEBC_CACHE_DIR", str(tmp_path / "cache"))


def test_readme_has_the_blocks_this_harness_runs():
    assert len(PYTHON) == 4 and len(SHELL) == 2 and len(SYNOPSIS) == 1, \
        "README's code blocks changed: teach tests/test_readme.py to run the new ones"


def test_library_block_on_cutile_vadd(tmp_path, monkeypatch, vadd_bytes):
    in_folder_with_kernel(tmp_path, monkeypatch, vadd_bytes)
    scope = {}
    exec(block("import numpy as np\nimport tilebc\n\nmodule = tilebc.load"), scope)
    # The comments' claims: NVIDIA's disassembly, and a 13.1 file that decodes as 13.1.
    if oracles.tool_path("tileirdisasm"):
        assert scope["text"] == oracles.tileirdisasm(vadd_bytes).stdout
        assert scope["text_g"] == oracles.tileirdisasm(vadd_bytes, debug_info=True).stdout
    import tilebc
    assert tilebc.load(scope["data"]).version == tilebc.Version(13, 1)
    assert scope["out"].any()  # the block itself asserted out == a + b


@pytest.mark.parametrize("version", ["13.1", "13.5"])
def test_library_block_on_a_stored_fixture(tmp_path, monkeypatch, version):
    """elementwise_f32's kernel is `float_math(x, y, out)`, 64-element tiles: vadd's calling
    convention, not its arithmetic, so the harness names it and drops the `a + b` assertion."""
    fixture = FIXTURE_DIR / "elementwise_f32" / f"elementwise_f32-{version}.tilebc"
    in_folder_with_kernel(tmp_path, monkeypatch, fixture.read_bytes())
    code = block("import numpy as np\nimport tilebc\n\nmodule = tilebc.load")
    code = code.replace('"vadd"', '"float_math"')
    code = re.sub(r"^assert np\.array_equal\(out, a \+ b\).*$", "", code, flags=re.M)
    scope = {}
    exec(code, scope)
    assert scope["text"] == fixture.with_suffix(".dis").read_text()
    assert scope["text_g"] == fixture.with_suffix(".dis-g").read_text()
    assert np.isfinite(scope["out"]).mean() > 0.99 and scope["out"].any()


def test_builder_block(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(block("import numpy as np\nimport tilebc\nfrom tilebc.interp import Pointer"), scope)
    if oracles.tool_path("tileirdisasm"):  # the built bytes are real Tile IR to NVIDIA's tools
        listing = oracles.tileirdisasm(scope["data"])
        assert listing.ok, listing.stderr
        assert "addf" in listing.stdout
    assert np.array_equal(scope["values"], 2 * np.arange(256, dtype=np.float32))


def gpu_skip_reason():
    from tilebc_runtime import driver
    try:
        driver.device(0)
    except driver.DriverError as error:
        return f"launching needs a GPU and its driver ({error})"
    try:
        import torch  # noqa: F401
    except ImportError:
        return "the README's launch example uses torch, which is not installed"
    return None


def test_runtime_blocks(tmp_path, monkeypatch, vadd_bytes):
    in_folder_with_kernel(tmp_path, monkeypatch, vadd_bytes)
    scope = {}
    exec(block("import tilebc_runtime\n"), scope)
    result = scope["result"]
    assert result.cubin[:4] == b"\x7fELF"
    assert ".entry vadd_" in result.ptx and result.threads_per_cta >= 32
    assert scope["name"].startswith("vadd_")
    reason = gpu_skip_reason()
    if reason:
        pytest.skip(reason)
    exec(block("import torch"), scope)  # asserts z == x + y itself


def run_shell_command(command: str) -> subprocess.CompletedProcess:
    """`.venv/bin/X` as written when this checkout has the venv, else X from this interpreter."""
    argv = shlex.split(command)
    if not (ROOT / argv[0]).exists() and argv[0].startswith(".venv/bin/"):
        tool = argv[0].rsplit("/", 1)[1]
        argv = [sys.executable] + (["-m", "tilebc.cli"] if tool == "tilebc" else []) + argv[1:]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**ENV, "TILEBC_CACHE_DIR": "off"})


@pytest.mark.parametrize("code", SHELL, ids=["demo", "tests"])
def test_shell_blocks(code):
    setup, command = [part.strip() for part in code.strip().split("&&")]
    # the test command's set-up also makes the C++ builds the tests use
    assert setup == ("bash scripts/setup.sh --tests" if "pytest" in command else "bash scripts/setup.sh")
    assert subprocess.run(["bash", "-n", ROOT / "scripts" / "setup.sh"]).returncode == 0
    if "pytest" in command:
        # This is the suite itself: the README's claim is that CI runs exactly this line.
        ci = (ROOT / ".ci" / "run").read_text()
        assert code.strip() in ci
        return
    result = run_shell_command(command)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "== all steps passed" in result.stdout


def synopsis_lines():
    """Each `tilebc ...` line up to its description (after two spaces, or on the next line)."""
    return [re.split(r"\s{2,}", line)[0] for line in SYNOPSIS[0].splitlines()
            if line.startswith("tilebc ")]


@pytest.mark.parametrize("line", synopsis_lines())
def test_synopsis_names_real_commands_and_options(line):
    words = line.replace("|", " ").replace("[", " ").replace("]", " ").split()
    command = words[1]
    actions = build_parser()._subparsers._group_actions[0].choices
    assert command in actions, f"README names `tilebc {command}`, which does not exist"
    parser = actions[command]
    options = {option for action in parser._actions for option in action.option_strings}
    nested = parser._subparsers._group_actions[0].choices if parser._subparsers else {}
    for word in words[2:]:
        if word.startswith("-") and word != "-":
            assert word in options, f"`tilebc {command}` has no option {word}"
        elif command == "cache" and word.isalpha():
            assert word in nested, f"`tilebc cache` has no sub-command {word}"


def test_documented_paths_exist():
    """Every repository path the README names in backticks exists."""
    for path in re.findall(r"`((?:tilebc|runtime|scripts|fixtures|benchmarks|fuzz|tests)/[\w./-]*)`",
                           README):
        if "{" in path:
            continue
        assert (ROOT / path).exists() or (ROOT / "runtime" / "cpp" / "include" / path).exists(), path
    assert shutil.which("bash")


# The README's library claims, one by one, on a stored fixture.
SAMPLE = FIXTURE_DIR / "atan2_f32" / "atan2_f32-13.5.tilebc"  # atan2 needs 13.2


def test_load_takes_a_path_str_bytes_and_a_binary_file():
    import pathlib

    import tilebc
    expected = SAMPLE.with_suffix(".dis").read_text()
    with open(SAMPLE, "rb") as stream:
        from_file = tilebc.load(stream)
    for module in (tilebc.load(str(SAMPLE)), tilebc.load(pathlib.Path(SAMPLE)),
                   tilebc.load(SAMPLE.read_bytes()), tilebc.load(bytearray(SAMPLE.read_bytes())),
                   tilebc.load(io.BytesIO(SAMPLE.read_bytes())), from_file):
        assert tilebc.print_module(module) == expected
    assert from_file.source == str(SAMPLE)


def test_load_errors_are_the_documented_ones(tmp_path):
    import tilebc
    truncated = tmp_path / "cut.tilebc"
    truncated.write_bytes(SAMPLE.read_bytes()[:100])
    with open(truncated, "rb") as stream, pytest.raises(tilebc.DecodeError) as caught:
        tilebc.load(stream)
    assert caught.value.file == str(truncated) and caught.value.offset == 0x64
    assert caught.value.category == "malformed"
    with pytest.raises(tilebc.TilebcError, match="No such file"):
        tilebc.load(tmp_path / "missing.tilebc")
    with open(SAMPLE.with_suffix(".dis")) as text_mode, pytest.raises(TypeError, match="'rb'"):
        tilebc.load(text_mode)
    with pytest.raises(TypeError, match="not int"):
        tilebc.load(12)  # bytes(12) would be twelve zero bytes: refused, not decoded
    big = io.BytesIO(SAMPLE.read_bytes())
    with pytest.raises(tilebc.DecodeError, match="max_input_bytes=100"):
        tilebc.load(big, limits=tilebc.DecodeLimits(max_input_bytes=100))
    assert big.tell() == 101  # a stream is read only one byte past the limit


@pytest.mark.parametrize("version", ["13.1", "13.2", "13.3", "13.4", "13.5"])
def test_dump_to_each_version_reads_back(version):
    import tilebc
    module = tilebc.load(FIXTURE_DIR / "elementwise_f32" / "elementwise_f32-13.5.tilebc")
    data = tilebc.dump(module, version=version)
    again = tilebc.load(data)
    assert again.version == tilebc.Version.parse(version)
    assert tilebc.print_module(again) == tilebc.print_module(module)


def test_dump_refuses_what_a_version_lacks_and_bad_versions():
    import tilebc
    module = tilebc.load(SAMPLE)
    with pytest.raises(tilebc.EncodeError, match="13.2"):
        tilebc.dump(module, version="13.1")  # atan2 arrived in 13.2
    for bad in ("14.0", "banana", 13.1):
        with pytest.raises(tilebc.VersionError):
            tilebc.dump(module, version=bad)


def test_runtime_compile_takes_a_path_and_raises_tilebc_errors(tmp_path):
    import pathlib

    import tilebc
    import tilebc_runtime
    result = tilebc_runtime.compile(pathlib.Path(SAMPLE), arch="sm_90", emit="ptx")
    assert ".target sm_90" in result.ptx and result.cubin is None
    truncated = tmp_path / "cut.tilebc"
    truncated.write_bytes(SAMPLE.read_bytes()[:100])
    with pytest.raises(tilebc.DecodeError) as caught:
        tilebc_runtime.compile(str(truncated), emit="ptx")
    assert caught.value.file == str(truncated)
    with pytest.raises(tilebc.TilebcError, match="sm_13 is not supported"):
        tilebc_runtime.compile(SAMPLE, arch="sm_13", emit="ptx")


def test_public_functions_say_what_they_do():
    import tilebc
    import tilebc_runtime
    for function in (tilebc.load, tilebc.dump, tilebc.print_module, tilebc.parse_module,
                     tilebc.run, tilebc_runtime.compile, tilebc_runtime.load):
        assert function.__doc__ and len(function.__doc__.split()) >= 8, function.__qualname__
