"""cp.async groups on the PTX emulator: a copy lands when a cp.async.wait_group / wait_all of
its thread covers its group, not before, so a multi-stage pipeline that reads a stage too early
reads the old bytes (hand-written kernels, one word per thread and group)."""
import numpy as np
import pytest

from tilebc.interp.memory import GlobalMemory, host_bytes
from tilebc_runtime import sim

THREADS = 64


def kernel(body):
    return f""".version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 psrc, .param .u64 pout)
.reqntid {THREADS}
{{
  .reg .b32 %r<64>;
  .reg .b64 %rd<32>;
  .shared .align 16 .b8 smem[{4 * 4 * THREADS}];
  mov.u32 %r0, %tid.x;
  ld.param.u64 %rd1, [psrc];
  ld.param.u64 %rd2, [pout];
  mov.u32 %r1, smem;
  shl.b32 %r2, %r0, 2;
  add.u32 %r3, %r1, %r2;
  mul.wide.u32 %rd3, %r0, 4;
  add.s64 %rd4, %rd1, %rd3;
  mov.u32 %r4, 7;
  st.shared.u32 [%r3], %r4;
  st.shared.u32 [%r3+{4 * THREADS}], %r4;
  st.shared.u32 [%r3+{8 * THREADS}], %r4;
{body}
  ret;
}}
"""


def issue(group):
    """This thread's word of source row `group` into shared row `group`."""
    return (f"  cp.async.ca.shared.global [%r3+{4 * THREADS * group}], "
            f"[%rd4+{4 * THREADS * group}], 4;")


def read_all(column):
    """The thread's three shared words to out[tid, column*3 + 0..2]."""
    lines = []
    for row in range(3):
        lines += [f"  ld.shared.u32 %r10, [%r3+{4 * THREADS * row}];",
                  f"  mad.lo.u32 %r11, %r0, 9, {3 * column + row};",
                  "  mul.wide.u32 %rd5, %r11, 4;",
                  "  add.s64 %rd6, %rd2, %rd5;",
                  "  st.global.u32 [%rd6], %r10;"]
    return "\n".join(lines)


def run(body):
    src = (np.arange(3 * THREADS, dtype=np.uint32) + 1000).reshape(3, THREADS)
    out = np.zeros((THREADS, 9), np.uint32)
    memory = GlobalMemory()
    bases = [memory.map(host_bytes(a), f"a{i}").base for i, a in enumerate((src, out))]
    sim.emulate(kernel(body), "k", 1, bases, memory=memory)
    return src, out


def test_wait_group_lands_all_but_the_newest_groups():
    body = "\n".join([issue(0), "  cp.async.commit_group;", issue(1), "  cp.async.commit_group;",
                      issue(2), "  cp.async.commit_group;",
                      "  cp.async.wait_group 3;", read_all(0),
                      "  cp.async.wait_group 2;", read_all(1),
                      "  cp.async.wait_group 0;", read_all(2)])
    src, out = run(body)
    mine = src.T  # [thread, group]
    sentinel = np.full(THREADS, 7)
    np.testing.assert_array_equal(out[:, 0:3], np.stack([sentinel] * 3, 1))  # none landed
    np.testing.assert_array_equal(out[:, 3:6], np.stack([mine[:, 0], sentinel, sentinel], 1))
    np.testing.assert_array_equal(out[:, 6:9], mine)


def test_wait_group_leaves_the_open_group_and_wait_all_closes_it():
    body = "\n".join([issue(0), "  cp.async.commit_group;", issue(1),
                      "  cp.async.wait_group 0;", read_all(0),  # group 1 is not committed
                      "  cp.async.wait_all;", read_all(1), read_all(2)])
    src, out = run(body)
    np.testing.assert_array_equal(out[:, 0:3], np.stack([src[0], np.full(THREADS, 7),
                                                         np.full(THREADS, 7)], 1))
    np.testing.assert_array_equal(out[:, 3:5], src[:2].T)


def test_a_copy_landing_while_another_thread_reads_the_word_is_a_race():
    # thread 0's copy lands at its wait, after the barrier that let thread 1 read the word
    body = "\n".join(["  bar.sync 0;", issue(0), "  cp.async.commit_group;", "  bar.sync 0;",
                      "  xor.b32 %r20, %r0, 1;", "  shl.b32 %r21, %r20, 2;",
                      "  add.u32 %r22, %r1, %r21;", "  ld.shared.u32 %r23, [%r22];",
                      "  cp.async.wait_group 0;"])
    with pytest.raises(sim.SharedRaceError):
        run(body)
