"""The tileiras that stops at PTX (conftest.tileiras_front_end), which the fixture compiles use:
it must judge bytes as the real tileiras does, and must really skip ptxas."""
import os
import shutil
import subprocess

import pytest

from conftest import FIXTURE_DIR, _make_front_end, needs_tileiras
from tilebc import oracles


@pytest.fixture(scope="module")
def front_end():
    made = _make_front_end()
    if made is None:
        pytest.skip("no hard link to tileiras possible here: the fixture compiles use tileiras")
    folder, tool = made
    yield tool
    shutil.rmtree(folder, ignore_errors=True)
    assert os.path.isfile(oracles.tool_path("tileiras")), "removing the copy removed the tool"


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
    real = oracles.tool_path("tileiras")
    good = (FIXTURE_DIR / "atomics_raw" / "atomics_raw-13.5.tilebc").read_bytes()
    fp4 = (FIXTURE_DIR / "mma_scaled_fp4" / "mma_scaled_fp4-13.5.tilebc").read_bytes()
    cases = {"valid": (good, "sm_90"), "Blackwell types on Hopper": (fp4, "sm_90"),
             "truncated": (good[: len(good) // 2], "sm_90"),
             "a flipped opcode byte": (good[:40] + bytes([good[40] ^ 0x5A]) + good[41:], "sm_90")}
    for label, (data, gpu_name) in cases.items():
        ours, theirs = (_compile(tool, data, gpu_name, tmp_path) for tool in (front_end, real))
        assert ours[:2] == theirs[:2], label
        if theirs[0] == 0:  # ptxas's cubin from the real one, the stand-in's empty file here
            assert theirs[2] > 0 and ours[2] == 0, label
    statuses = {label: _compile(real, data, gpu, tmp_path)[0] for label, (data, gpu) in cases.items()}
    assert statuses["valid"] == 0 and statuses["truncated"] != 0, statuses
    assert statuses["Blackwell types on Hopper"] == 5, statuses


@needs_tileiras
def test_the_fixture_compiles_use_the_front_end():
    tool = os.environ.get("TILEBC_TEST_TILEIRAS_FRONT_END")
    if tool is None:
        made = _make_front_end()
        if made is not None:
            shutil.rmtree(made[0], ignore_errors=True)
        assert made is None, "a front end could be made, but the session has none"
        return
    assert os.path.basename(os.path.dirname(os.path.dirname(tool))) == \
        os.path.basename(os.path.dirname(os.path.dirname(os.path.realpath(
            oracles.tool_path("tileiras")))))
    assert open(os.path.join(os.path.dirname(tool), "ptxas")).read().startswith("#!/bin/sh")
