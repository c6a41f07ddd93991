"""Code-quality rewrites of the lowering, checked on the PTX emulator: each must compute exactly
what the plain instruction computes."""
import numpy as np
import pytest

from tilebc.interp.memory import GlobalMemory, host_bytes
from tilebc_runtime import sim
from tilebc_runtime.lowering.memory import _div_s64_by
from tilebc_runtime.lowering.ptx import PtxWriter

VALUES = np.array([0, 1, -1, 31, 32, 33, -31, -32, -33, 1000, -1000, 2**62, -2**62,
                   2**63 - 1, -2**63, 12345678901, -12345678901], np.int64)


class _Lowering:  # the one attribute _div_s64_by uses
    def __init__(self):
        self.w = PtxWriter()


def _divide_on_emulator(divisor: int) -> np.ndarray:
    lw = _Lowering()
    body = _div_s64_by(lw, "%x", divisor)
    count = len(VALUES)
    ptx = "\n".join([
        ".version 7.8", ".target sm_90", ".address_size 64",
        ".visible .entry k(.param .u64 src, .param .u64 dst)", f".maxntid {count}, 1, 1", "{",
        ".reg .b32 %t; .reg .b64 %x, %a, %b, %q, %o;", *lw.w.declarations(),
        "ld.param.u64 %a, [src]; ld.param.u64 %b, [dst];",
        "mov.u32 %t, %tid.x; mul.wide.u32 %o, %t, 8;",
        "add.s64 %a, %a, %o; add.s64 %b, %b, %o;",
        "ld.global.s64 %x, [%a];", *lw.w.body, f"mov.b64 %q, {body};",
        "st.global.s64 [%b], %q;", "ret;", "}"])
    memory = GlobalMemory()
    out = np.zeros_like(VALUES)
    src = memory.map(host_bytes(VALUES), "values").base
    dst = memory.map(host_bytes(out), "quotients").base
    sim.emulate(ptx, "k", (1,), [src, dst], memory=memory, source="div.ptx")
    return out


@pytest.mark.parametrize("divisor", [1, 2, 32, 1 << 20, 3, 48, 7, 10**12 + 7])
def test_division_by_a_constant_truncates_like_div_s64(divisor):
    quotients = _divide_on_emulator(divisor)
    expected = [int(v / divisor) if abs(int(v)) < 2**52 else
                (abs(int(v)) // divisor) * (1 if v >= 0 else -1) for v in VALUES]
    assert quotients.tolist() == expected


@pytest.mark.parametrize("divisor", [64, 3, 48, 7])
def test_constant_divisors_need_no_division(divisor):
    lw = _Lowering()
    _div_s64_by(lw, "%x", divisor)
    assert not any(line.strip().startswith("div") for line in lw.w.body)
