"""A gather straight into a scatter whose pointer tiles are made from index broadcasts is laid
out in Rows with one 32-byte sector of a row per lane group (anchors.pointer_anchors): a
transposing copy (y[j, i] = x[i, 2j]) then touches fewer sectors than in Cyclic, and the
values are the same."""
from pathlib import Path

import numpy as np

import tilebc
from tilebc_runtime import sim
from tilebc_runtime.sim.profile import Profile

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "bytecode" / "gather_scatter_2d" / "gather_scatter_2d-13.5.tilebc"


def test_transposing_gather_scatter_touches_two_sectors_per_ideal_one():
    module = tilebc.load(FIXTURE)
    x = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    y = np.zeros((16, 16), np.float32)
    profile = Profile()
    sim.run(module, module.functions[0].name, (1,), x, y, profile=profile)
    assert np.array_equal(y, x[:, ::2].T)
    r = profile.report()
    # the loads read every sector of x (each holds 4 of the 8 floats wanted): 64 either way
    assert r["global_ld_sectors"] == 64
    # each warp store covers 8 rows of y with 4 neighbours (16 bytes) each: 8 sectors a store
    # (Cyclic: 16 rows, 2 neighbours, 16 sectors)
    assert r["global_st_sectors"] == 8 * 8 and r["global_st_ideal_sectors"] == 32
