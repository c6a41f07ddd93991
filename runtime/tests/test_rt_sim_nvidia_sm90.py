"""NVIDIA's sm_90 code generation on our PTX emulator: tileiras --gpu-name=sm_90 (PTX `.target
sm_90a`) for fixture kernels, run by `sim.nvidia.run`, matches the numpy references of
tests/test_interp_*.py. Each case names what of tileiras's Hopper code it exercises; the PTX is
checked to contain it, so a case cannot pass without running the instruction. The sweep over
every fixture is `python -m tilebc_runtime.sim.nvidia_sweep --arch sm_90`
(benchmarks/results/sim-nvidia-sm90.md).
"""
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from tilebc.oracles import tool_path  # noqa: E402
from tilebc_runtime.sim import nvidia  # noqa: E402

pytestmark = pytest.mark.skipif(tool_path("tileiras") is None,
                                reason="NVIDIA tileiras is not installed")

# fixture -> (case module, text tileiras's sm_90 PTX must contain)
CASES = {
    "matmul_f16": ("test_interp_fixtures", "%clusterid.x"),  # CTA id of a one-CTA cluster
    "la_gemm_large_tile": ("test_interp_linalg", "wgmma.mma_async.sync.aligned.m64n128k16"),
    "la_syrk_lower": ("test_interp_linalg", "cp.async.mbarrier.arrive.noinc"),
    "la_histogram_u8": ("test_interp_linalg", "barrier.sync \t1, 128"),  # warp-specialised
    "dm_cat_split_heads": ("test_interp_datamove", "stmatrix.sync.aligned.m8n8.x1"),
    "ft_checked_scale": ("test_interp_features", "elect.sync"),
}


@pytest.fixture(scope="session")
def ptx_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("tileiras-ptx-sm90")


@pytest.mark.parametrize("name", sorted(CASES))
def test_tileiras_sm90_ptx_on_emulator_matches_reference(name, ptx_cache, monkeypatch):
    family, feature = CASES[name]
    reference = importlib.import_module(family)
    module = reference.module(name, reference.versions(name)[-1])
    ptx = nvidia.tileiras_ptx(module, "sm_90", ptx_cache)
    assert ".target sm_90a" in ptx and feature in ptx

    def run(*args, **kwargs):
        return nvidia.run(*args, cache_dir=ptx_cache, arch="sm_90", **kwargs)
    monkeypatch.setattr(reference, "run", run)
    reference.CASES[name](module)
