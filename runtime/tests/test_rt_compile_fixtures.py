"""Every cuTile fixture compiles to PTX that nvJitLink links (sm_80 and sm_90; sm_100/sm_120 on the
13.5 files), except the listed kernels whose ops the JIT does not lower yet. fp8 kernels link on
sm_80 too (software conversions below sm_89). Kernels on the tensor cores link without spills."""
import re
from pathlib import Path

import pytest

from tilebc_runtime.compiler import compile
from tilebc_runtime.lowering.lowerer import LoweringError
from tilebc_runtime.lowering.ptx import check_subset

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "fixtures" / "bytecode").glob("*/*-13.5.tilebc"))
OLDEST = sorted((ROOT / "fixtures" / "bytecode").glob("*/*-13.1.tilebc"))

# Kernels the JIT cannot compile yet, with the op family that stops them (see registry.NOT_LOWERED).
NOT_YET: dict = {}


def _name(path):
    return path.parent.name


def _uses_tensor_cores(path):
    """Whether the fixture's listing (its version's .dis) has an mma op (mmaf, mmai, and their
    block-scaled forms)."""
    text = path.with_suffix(".dis").read_text()
    return re.search(r"= mma[fi](?:_scaled)?\b", text) is not None


def _compile_or_expect(path, arch, verbose=False):
    name = _name(path)
    if name in NOT_YET:
        with pytest.raises(LoweringError):
            compile(path, arch=arch, emit="cubin")
        return None
    result = compile(path, arch=arch, emit="cubin", verbose=verbose)
    assert result.cubin[:4] == b"\x7fELF"
    return result


def _spills(log):
    """Spill bytes (stores, loads) per function in an nvJitLink -verbose log."""
    found, current = {}, None
    for line in log.splitlines():
        if (m := re.search(r"Function properties for '?([\w$.]+)'?", line)):
            current = m.group(1)
        elif (m := re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)):
            found[current] = (int(m.group(1)), int(m.group(2)))
    return found


@pytest.mark.parametrize("path", FIXTURES, ids=_name)
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_fixture_links(path, arch):
    """Also: a tensor-core kernel spills nothing, in the link log of the build the runtime
    launches (nvJitLink's; -verbose makes it report what ptxas did, at no extra cost)."""
    mma = _uses_tensor_cores(path)
    result = _compile_or_expect(path, arch, verbose=mma)
    if result is not None:
        assert check_subset(result.ptx) == (), "PTX outside the documented subset"
        for info in result.kernels.values():
            assert 32 <= info.threads_per_cta <= 1024 and info.threads_per_cta % 32 == 0
        if mma:
            spills = _spills(result.log)
            assert set(spills) >= set(result.kernels), result.log
            assert all(each == (0, 0) for each in spills.values()), spills


@pytest.mark.parametrize("path", FIXTURES[::4], ids=_name)
@pytest.mark.parametrize("arch", ["sm_100", "sm_120"])
def test_fixture_links_blackwell(path, arch):
    _compile_or_expect(path, arch)


@pytest.mark.parametrize("path", OLDEST[::3], ids=_name)
def test_oldest_bytecode_links(path):
    _compile_or_expect(path, "sm_90")
