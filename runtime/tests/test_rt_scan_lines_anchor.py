"""A scan whose source is made element-wise from broadcasts (a one-hot of digits over the
radixes) gets that source built straight in its Lines layout (anchors.scan_anchors): the scan
and the reductions beside it then need no shared-memory exchange, and whole-warp i32 sums are
one redux.sync each. Checked on dm_radix_digits (its values: test_rt_sim_families)."""
import re
from pathlib import Path

from tilebc_runtime.compiler import compile

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "bytecode" / "dm_radix_digits" / "dm_radix_digits-13.5.tilebc"


def _entry_ptx(ptx, prefix):
    start = ptx.index(f".entry {prefix}")
    end = ptx.find(".entry", start + 1)
    return ptx[start:end if end >= 0 else len(ptx)]


def test_radix_rank_scan_runs_in_lines_without_exchanges():
    ptx = compile(str(FIXTURE), arch="sm_90", emit="ptx").ptx
    body = _entry_ptx(ptx, "radix_digit_rank_Kt1_A1f32")
    # the histogram's column sums: one redux per slot instead of five butterflies
    assert body.count("redux.sync.add.s32") == 4
    assert "shfl.sync.bfly" not in body
    # two exchanges left: the histogram to the atomic's threads, the row sums across warps
    assert body.count("bar.sync") == 4
    # the scan runs over lanes (32 positions a line): five shuffle steps per slot, plus the
    # exclusive shift
    assert len(re.findall(r"shfl\.sync\.up", body)) == 4 * 5 + 4

