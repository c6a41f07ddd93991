"""The tileiras that stops at PTX (conftest.tileiras_front_end), which the fixture compiles use:
it must judge bytes as the real tileiras does, and must really skip ptxas."""
import hashlib
import os
import shutil
import subprocess

import pytest

import conftest
from conftest import FIXTURE_DIR, _make_front_end, needs_tileiras, tileiras_accepts
from tilebc import oracles


def _digest(path: str) -> str:
    with open(path, "rb") as stream:
        return hashlib.sha256(stream.read()).hexdigest()


@pytest.fixture(scope="module")
def front_end():
    real = os.path.realpath(oracles.tool_path("tileiras"))
    tools = {name: _digest(os.path.join(os.path.dirname(real), name))
             for name in ("tileiras", "ptxas")}
    made = _make_front_end()
    if made is None:
        pytest.skip("no hard link to tileiras possible here: the fixture compiles use tileiras")
    folder, tool = made
    yield tool
    shutil.rmtree(folder, ignore_errors=True)
    assert {name: _digest(os.path.join(os.path.dirname(real), name)) for name in tools} == tools, \
        "making or removing the copy changed NVIDIA's tools"


def _compile(tool: str, data: bytes, gpu_name: str, folder) -> tuple[int, str, int]:
    """(exit status, first stderr line, cubin size or -1)."""
    source, cubin = folder / "input.tilebc", folder / "out.cubin"
    source.write_bytes(data)
    if cubin.exists():
        cubin.unlink()
    done = subprocess.run([tool, "--opt-level=0", f"--gpu-name={gpu_name}", "-o", str(cubin),
                           str(source)], capture_output=True, text=True, timeout=300)
    first = (done.stderr.strip().splitlines() or [""])[0].replace(str(source), "INPUT")
    return done.returncode, first, cubin.stat().st_size if cubin.exists() else -1


@needs_tileiras
def test_front_end_judges_as_tileiras_does(front_end, tmp_path):
    good = (FIXTURE_DIR / "atomics_raw" / "atomics_raw-13.5.tilebc").read_bytes()
    fp4 = (FIXTURE_DIR / "cast_fp4" / "cast_fp4-13.5.tilebc").read_bytes()
    # the architectures tileiras_accepts asks for: sm_90, then sm_100 / sm_107 for Blackwell types
    cases = {"valid": (good, "sm_90"), "Blackwell types on Hopper": (fp4, "sm_90"),
             "Blackwell types on sm_100": (fp4, "sm_100"),
             "valid on sm_107": (good, "sm_107"),
             "truncated": (good[: len(good) // 2], "sm_90"),
             "a corrupted byte": (good[:40] + bytes([good[40] ^ 0x5A]) + good[41:], "sm_90")}
    statuses = {}
    for label, (data, gpu_name) in cases.items():
        ours = _compile(front_end, data, gpu_name, tmp_path)
        theirs = _compile(oracles.tool_path("tileiras"), data, gpu_name, tmp_path)
        assert ours[:2] == theirs[:2], label
        if theirs[0] == 0:  # ptxas's cubin from the real one, the stand-in's empty file here
            assert theirs[2] > 0 and ours[2] == 0, label
        statuses[label] = theirs[0]
    assert statuses["valid"] == statuses["valid on sm_107"] == 0, statuses
    assert statuses["Blackwell types on sm_100"] == 0, statuses
    assert statuses["Blackwell types on Hopper"] == 5, statuses
    assert statuses["truncated"] != 0 and statuses["a corrupted byte"] != 0, statuses


@needs_tileiras
def test_the_fixture_compiles_use_the_front_end(monkeypatch):
    tool = os.environ.get(conftest._FRONT_END_ENV)
    if tool is None:
        made = _make_front_end()
        if made is not None:
            shutil.rmtree(made[0], ignore_errors=True)
        assert made is None, "a front end could be made, but the session has none"
        pytest.skip("no front end here: the fixture compiles run tileiras itself")
    assert open(os.path.join(os.path.dirname(tool), "ptxas")).read() == conftest._PTXAS_STAND_IN
    called = []
    monkeypatch.setattr(oracles, "_run_on_bytes",
                        lambda args, data, timeout=120: called.append(args) or
                        oracles.ToolResult(0, "", ""))
    tileiras_accepts(b"", "sm_90")
    assert called and called[0][0] == tool, called
