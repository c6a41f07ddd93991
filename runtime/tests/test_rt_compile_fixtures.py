"""Every cuTile fixture compiles to PTX that nvJitLink links (sm_80 and sm_90; sm_100/sm_120 on the
13.5 files), except the listed kernels whose ops the JIT does not lower yet. fp8 kernels link on
sm_80 too (software conversions below sm_89)."""
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


def _compile_or_expect(path, arch):
    name = _name(path)
    if name in NOT_YET:
        with pytest.raises(LoweringError):
            compile(path, arch=arch, emit="cubin")
        return None
    result = compile(path, arch=arch, emit="cubin")
    assert result.cubin[:4] == b"\x7fELF"
    return result


@pytest.mark.parametrize("path", FIXTURES, ids=_name)
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_fixture_links(path, arch):
    result = _compile_or_expect(path, arch)
    if result is not None:
        assert check_subset(result.ptx) == (), "PTX outside the documented subset"
        for info in result.kernels.values():
            assert 32 <= info.threads_per_cta <= 1024 and info.threads_per_cta % 32 == 0


@pytest.mark.parametrize("path", FIXTURES[::4], ids=_name)
@pytest.mark.parametrize("arch", ["sm_100", "sm_120"])
def test_fixture_links_blackwell(path, arch):
    _compile_or_expect(path, arch)


@pytest.mark.parametrize("path", OLDEST[::3], ids=_name)
def test_oldest_bytecode_links(path):
    _compile_or_expect(path, "sm_90")
