"""Instruction-level tests of the PTX emulator: each pins one semantic rule (rounding, flushing,
saturation, conversion edge cases, integer corner cases, divergence, barriers, races, faults)
with expectations derived from IEEE 754 / the PTX ISA, not from the emulator.

Tests marked `@also_on_gpu` pin hardware semantics, so `scripts/gpu_checks.py` runs them again with
`EXECUTE` swapped for a GPU executor (one generated PTX kernel per case, the same assertions on the
device's results); the others check the emulator's own diagnostics and run here only."""
import io

import ml_dtypes
import numpy as np
import pytest

from tilebc.interp.memory import GlobalMemory, host_bytes
from tilebc_runtime import sim
from tilebc_runtime.sim import (PtxSyntaxError, SharedRaceError, SimExecutionError, SimMemoryError,
                                SimTrap, UnsupportedInstruction)

HEADER = """.version 7.8
.target sm_90
.address_size 64
"""


def also_on_gpu(test):
    """Mark a test whose expectations hold on hardware too (scripts/gpu_checks.py reruns it)."""
    test.also_on_gpu = True
    return test


def emulate_ptx(ptx, entry, grid, threads, arrays, print_stream=None):
    """Run `entry` of `ptx` in the emulator with the arrays' addresses as its u64 parameters;
    the arrays are updated in place. `threads` is the .maxntid the kernel declares."""
    memory = GlobalMemory()
    addresses = [memory.map(host_bytes(a), f"array {i}").base for i, a in enumerate(arrays)]
    sim.emulate(ptx, entry, grid, addresses, memory=memory, print_stream=print_stream,
                source="test.ptx")


EXECUTE = emulate_ptx  # swapped by scripts/gpu_checks.py for its GPU executor


def run_ptx(body, *arrays, threads=32, grid=(1,), data="", shared=256, print_stream=None,
            header=HEADER, align=16):
    """Run `body` with %rd0.. = the arrays' addresses, %r0 = %tid.x, %rd9 = 4*tid, %rd8 = 8*tid."""
    params = ", ".join(f".param .u64 p{i}" for i in range(len(arrays)))
    loads = "\n".join(f"ld.param.u64 %rd{i}, [p{i}];" for i in range(len(arrays)))
    ptx = f"""{header}{data}
.visible .entry k({params})
.maxntid {threads}, 1, 1
{{
.reg .pred %p<16>; .reg .b16 %h<16>; .reg .b32 %r<40>; .reg .b64 %rd<40>;
.reg .f32 %f<16>; .reg .f64 %fd<16>;
.shared .align {align} .b8 smem[{shared}];
{loads}
mov.u32 %r0, %tid.x;
mul.wide.u32 %rd9, %r0, 4;
mul.wide.u32 %rd8, %r0, 8;
{body}
ret;
}}
"""
    EXECUTE(ptx, "k", grid, threads, arrays, print_stream)


def f32_unary(body, x, out_dtype=np.float32):
    """out[tid] = body(in[tid]): %f1 holds the input, %f2 / %r2 ... the result."""
    x = np.asarray(x, np.float32)
    out = np.zeros(len(x), out_dtype)
    size = np.dtype(out_dtype).itemsize
    run_ptx(f"add.s64 %rd2, %rd0, %rd9; ld.global.f32 %f1, [%rd2];\n"
            f"mul.wide.u32 %rd10, %r0, {size}; add.s64 %rd3, %rd1, %rd10;\n{body}", x, out,
            threads=len(x))
    return out


def binary_f32(op, a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    out = np.zeros(len(a), np.float32)
    run_ptx(f"""add.s64 %rd4, %rd0, %rd9; ld.global.f32 %f1, [%rd4];
add.s64 %rd5, %rd1, %rd9; ld.global.f32 %f2, [%rd5];
{op} %f3, %f1, %f2;
add.s64 %rd6, %rd2, %rd9; st.global.f32 [%rd6], %f3;""", a, b, out, threads=len(a))
    return out


ONE_UP = np.nextafter(np.float32(1), np.float32(2))
ONE_DOWN = np.nextafter(np.float32(1), np.float32(0))
TINY = np.float32(2.0 ** -30)
SUBNORMAL = np.float32(2.0 ** -140)


# ---------------------------------------------------------------------------------- floats

@also_on_gpu
@pytest.mark.parametrize("mode,positive,negative", [
    ("rn", 1.0, 1.0), ("rz", 1.0, ONE_DOWN), ("rm", 1.0, ONE_DOWN), ("rp", ONE_UP, 1.0)])
def test_add_rounding_modes(mode, positive, negative):
    out = binary_f32(f"add.{mode}.f32", [1, 1], [TINY, -TINY])
    assert out.tolist() == [np.float32(positive), np.float32(negative)]


@also_on_gpu
def test_mul_directed_rounding():
    third = np.float32(1) / np.float32(3)  # 1/3 rounded: x*3 is inexact
    out = binary_f32("mul.rp.f32", [third], [3.0])
    exact = float(third) * 3
    assert float(out[0]) >= exact and float(np.nextafter(out[0], np.float32(0))) < exact


@also_on_gpu
def test_fma_rounds_once():
    # a*b = 1 + 2^-11 + 2^-24 exactly (a tie at f32 precision); + 2^-60 breaks the tie upward.
    # Rounding the product first (or the f64 sum) would give 1 + 2^-11.
    a = np.float32(1 + 2.0 ** -12)
    c = np.float32(2.0 ** -60)
    out = np.zeros(1, np.float32)
    run_ptx(f"""mov.f32 %f1, 0f{a.view(np.uint32):08X}; mov.f32 %f3, 0f{c.view(np.uint32):08X};
fma.rn.f32 %f4, %f1, %f1, %f3; st.global.f32 [%rd0], %f4;""", out, threads=1)
    assert out[0] == np.float32(1 + 2.0 ** -11 + 2.0 ** -23)


@also_on_gpu
def test_fma_f64_rounds_once():
    def bits(value):
        return f"0d{np.float64(value).view(np.uint64):016X}"
    out = np.zeros(2, np.float64)
    run_ptx(f"""mov.f64 %fd1, {bits(1 + 2.0 ** -26)}; mov.f64 %fd2, {bits(1 + 2.0 ** -27)};
mov.f64 %fd3, {bits(2.0 ** -200)}; fma.rn.f64 %fd4, %fd1, %fd2, %fd3; st.global.f64 [%rd0], %fd4;
fma.rz.f64 %fd4, %fd1, %fd2, %fd3; st.global.f64 [%rd0+8], %fd4;""", out, threads=1)
    # a*b = 1 + 2^-26 + 2^-27 + 2^-53: a tie at f64 precision, broken upward by the addend
    assert out[0] == 1 + 2.0 ** -26 + 2.0 ** -27 + 2.0 ** -52
    assert out[1] == 1 + 2.0 ** -26 + 2.0 ** -27


@also_on_gpu
def test_ftz_flushes_inputs_and_results():
    out = binary_f32("add.ftz.f32", [SUBNORMAL, 1.0], [SUBNORMAL, 0.0])
    assert out[0] == 0 and out[1] == 1
    plain = binary_f32("add.f32", [SUBNORMAL], [SUBNORMAL])
    assert plain[0] == np.float32(2 * SUBNORMAL)
    negative = binary_f32("mul.rn.ftz.f32", [-SUBNORMAL], [1.0])
    assert negative[0] == 0 and np.signbit(negative[0])


@also_on_gpu
def test_sat_clamps_and_zeroes_nan():
    out = binary_f32("add.sat.f32", [1.5, -2.0, np.nan, 0.25], [0.0, 0.0, 0.0, 0.5])
    assert out.tolist() == [1.0, 0.0, 0.0, 0.75]


@also_on_gpu
def test_min_max_nan_and_signed_zero():
    nan = np.float32(np.nan)
    out = binary_f32("min.f32", [nan, 1.0, 0.0], [2.0, nan, -0.0])
    assert out[0] == 2 and out[1] == 1 and out[2] == 0 and np.signbit(out[2])
    out = binary_f32("max.NaN.f32", [nan, 1.0], [2.0, 3.0])
    assert np.isnan(out[0]) and out[1] == 3


@also_on_gpu
def test_div_and_sqrt_are_correctly_rounded():
    rng = np.random.default_rng(5)
    a = rng.uniform(-10, 10, 32).astype(np.float32)
    b = rng.uniform(0.1, 10, 32).astype(np.float32)
    out = binary_f32("div.rn.f32", a, b)
    expected = (a.astype(np.float64) / b.astype(np.float64)).astype(np.float32)
    assert np.array_equal(out, expected)
    root = f32_unary("sqrt.rn.f32 %f2, %f1; st.global.f32 [%rd3], %f2;", b)
    assert np.array_equal(root, np.sqrt(b))


@also_on_gpu
@pytest.mark.parametrize("op,reference,bound", [
    ("ex2.approx.f32", np.exp2, 2 ** -22), ("lg2.approx.f32", np.log2, 2 ** -22),
    ("sin.approx.f32", np.sin, 2 ** -20.9), ("cos.approx.f32", np.cos, 2 ** -20.9),
    ("tanh.approx.f32", np.tanh, 2 ** -10.9), ("rsqrt.approx.f32", lambda x: 1 / np.sqrt(x),
                                                2 ** -22)])
def test_approximations_within_documented_bounds(op, reference, bound):
    x = np.linspace(0.1, 3.0, 64, dtype=np.float32)
    out = f32_unary(f"{op} %f2, %f1; st.global.f32 [%rd3], %f2;", x)
    exact = reference(x.astype(np.float64))
    assert np.all(np.abs(out - exact) <= bound * np.maximum(1, np.abs(exact)))


@also_on_gpu
def test_abs_neg_copysign_testp():
    x = np.array([-1.5, 2.0, -0.0, np.inf], np.float32)
    out = f32_unary("abs.f32 %f2, %f1; st.global.f32 [%rd3], %f2;", x)
    assert out.tolist() == [1.5, 2.0, 0.0, np.inf] and not np.signbit(out[2])
    out = f32_unary("mov.f32 %f3, 0fBF800000; copysign.f32 %f2, %f3, %f1; "
                    "st.global.f32 [%rd3], %f2;", x)
    assert out.tolist() == [-1.5, -2.0, -0.0, -np.inf]
    out = f32_unary("testp.infinite.f32 %p1, %f1; selp.u32 %r2, 1, 0, %p1; "
                    "st.global.u32 [%rd3], %r2;", x, np.uint32)
    assert out.tolist() == [0, 0, 0, 1]


# -------------------------------------------------------------------------------- compare

@also_on_gpu
def test_setp_ordered_and_unordered():
    nan = np.float32(np.nan)
    a = np.array([nan, 1, 2], np.float32)
    out = f32_unary("mov.f32 %f3, 0f3F800000; setp.ne.f32 %p1, %f1, %f3; setp.neu.f32 %p2, "
                    "%f1, %f3; selp.u32 %r2, 1, 0, %p1; selp.u32 %r3, 2, 0, %p2; "
                    "or.b32 %r4, %r2, %r3; st.global.u32 [%rd3], %r4;", a, np.uint32)
    assert out.tolist() == [2, 0, 3]  # NaN: ne false, neu true


@also_on_gpu
def test_setp_signedness_and_combination():
    out = np.zeros(1, np.uint32)
    run_ptx("""mov.u32 %r1, 4294967295; setp.lt.s32 %p1, %r1, 0; setp.lt.u32 %p2, %r1, 0;
setp.gt.and.u32 %p3|%p4, %r1, 5, %p1;
selp.u32 %r2, 1, 0, %p1; selp.u32 %r3, 2, 0, %p2; selp.u32 %r4, 4, 0, %p3; selp.u32 %r5, 8, 0, %p4;
or.b32 %r6, %r2, %r3; or.b32 %r6, %r6, %r4; or.b32 %r6, %r6, %r5; st.global.u32 [%rd0], %r6;""",
            out, threads=1)
    assert out[0] == 1 | 4  # -1 < 0 signed; not unsigned; p = (x>5)&p1, q = !(x>5)&p1


# ------------------------------------------------------------------------------- integers

@also_on_gpu
def test_integer_division_and_remainder():
    out = np.zeros(6, np.int32)
    run_ptx("""mov.u32 %r1, -7; mov.u32 %r2, 2; mov.u32 %r9, 0;
div.s32 %r3, %r1, %r2; st.global.u32 [%rd0], %r3;
rem.s32 %r3, %r1, %r2; st.global.u32 [%rd0+4], %r3;
div.u32 %r3, %r1, %r2; st.global.u32 [%rd0+8], %r3;
div.s32 %r3, %r1, %r9; st.global.u32 [%rd0+12], %r3;
mov.u32 %r4, -2147483648; mov.u32 %r5, -1; div.s32 %r3, %r4, %r5; st.global.u32 [%rd0+16], %r3;
rem.u32 %r3, %r1, %r9; st.global.u32 [%rd0+20], %r3;""", out, threads=1)
    # x % 0 is all ones like x / 0 (an H100 gave -1, not the dividend)
    assert out.tolist() == [-3, -1, (2 ** 32 - 7) // 2, -1, -2 ** 31, -1]


@also_on_gpu
def test_division_by_zero_from_memory_is_all_ones_in_every_width():
    """Operands loaded from memory, so ptxas cannot fold them: these are the H100's answers."""
    out = np.array([-7, 2, 0] + [0] * 8, np.int32)
    run_ptx("""ld.global.u32 %r1, [%rd0]; ld.global.u32 %r2, [%rd0+4]; ld.global.u32 %r9, [%rd0+8];
div.s32 %r3, %r1, %r9; st.global.u32 [%rd0+12], %r3;
rem.s32 %r3, %r1, %r9; st.global.u32 [%rd0+16], %r3;
div.u32 %r3, %r2, %r9; st.global.u32 [%rd0+20], %r3;
rem.u32 %r3, %r2, %r9; st.global.u32 [%rd0+24], %r3;""", out, threads=1)
    assert out[3:7].tolist() == [-1, -1, -1, -1]
    wide = np.array([-7, 0, 0, 0, 0, 0], np.int64)
    run_ptx("""ld.global.u64 %rd1, [%rd0]; ld.global.u64 %rd2, [%rd0+8];
div.s64 %rd3, %rd1, %rd2; st.global.u64 [%rd0+16], %rd3;
rem.s64 %rd3, %rd1, %rd2; st.global.u64 [%rd0+24], %rd3;
div.u64 %rd3, %rd1, %rd2; st.global.u64 [%rd0+32], %rd3;
rem.u64 %rd3, %rd1, %rd2; st.global.u64 [%rd0+40], %rd3;""", wide, threads=1)
    assert wide[2:].tolist() == [-1, -1, -1, -1]


@also_on_gpu
def test_multiply_forms_and_shifts():
    out = np.zeros(8, np.uint32)
    run_ptx("""mov.u32 %r1, 4000000000; mov.u32 %r2, 3;
mul.hi.u32 %r3, %r1, %r2; st.global.u32 [%rd0], %r3;
mul.lo.u32 %r3, %r1, %r2; st.global.u32 [%rd0+4], %r3;
mul.wide.s32 %rd20, %r1, %r2; st.global.u64 [%rd0+8], %rd20;
mov.u32 %r4, -16; shr.s32 %r5, %r4, 40; st.global.u32 [%rd0+16], %r5;
shr.u32 %r5, %r4, 2; st.global.u32 [%rd0+20], %r5;
shl.b32 %r5, %r4, 33; st.global.u32 [%rd0+24], %r5;
mad.lo.s32 %r5, %r2, %r2, %r4; st.global.u32 [%rd0+28], %r5;""", out, threads=1)
    assert out[0] == (4000000000 * 3) >> 32
    assert out[1] == (4000000000 * 3) & 0xFFFFFFFF
    assert out[2:4].view(np.int64)[0] == (4000000000 - 2 ** 32) * 3
    assert out[4:].view(np.int32).tolist() == [-1, (2 ** 32 - 16) >> 2, 0, 9 - 16]


def test_min_max_relu_clamps_negative_results_to_zero():  # sm_90 PTX: not in the sm_80 GPU run
    out = np.zeros(3, np.int32)
    run_ptx("""mov.u32 %r1, -7; mov.u32 %r2, 5; mov.u32 %r3, 9;
min.relu.s32 %r4, %r1, %r2; st.global.u32 [%rd0], %r4;
max.relu.s32 %r4, %r1, %r1; st.global.u32 [%rd0+4], %r4;
min.relu.s32 %r4, %r3, %r2; st.global.u32 [%rd0+8], %r4;""", out, threads=1)
    assert out.tolist() == [0, 0, 5]


@also_on_gpu
def test_integer_conversions():
    out = np.zeros(5, np.int32)
    run_ptx("""mov.u32 %r1, 0x1FF80; cvt.s32.s8 %r2, %r1; st.global.u32 [%rd0], %r2;
cvt.u16.u32 %h1, %r1; cvt.u32.u16 %r2, %h1; st.global.u32 [%rd0+4], %r2;
mov.u32 %r3, 300; cvt.sat.s8.s32 %r2, %r3; st.global.u32 [%rd0+8], %r2;
mov.u32 %r3, -5; cvt.sat.u8.s32 %r2, %r3; st.global.u32 [%rd0+12], %r2;
cvt.s64.s32 %rd20, %r3; cvt.u32.u64 %r4, %rd20; st.global.u32 [%rd0+16], %r4;""", out, threads=1)
    assert out.tolist() == [-128, 0xFF80, 127, 0, -5]


@also_on_gpu
def test_float_to_int_saturates_and_rounds():
    x = np.array([np.nan, 3e9, -3e9, -3.7, 2.5, 3.5, -0.5], np.float32)
    rzi = f32_unary("cvt.rzi.s32.f32 %r2, %f1; st.global.u32 [%rd3], %r2;", x, np.int32)
    assert rzi.tolist() == [0, 2 ** 31 - 1, -2 ** 31, -3, 2, 3, 0]
    rni = f32_unary("cvt.rni.s32.f32 %r2, %f1; st.global.u32 [%rd3], %r2;", x, np.int32)
    assert rni.tolist()[3:] == [-4, 2, 4, 0]
    unsigned = f32_unary("cvt.rzi.u32.f32 %r2, %f1; st.global.u32 [%rd3], %r2;", x, np.uint32)
    assert unsigned.tolist()[:4] == [0, 3000000000, 0, 0]


@also_on_gpu
def test_float_conversions():
    x = np.array([65520.0, 1 + 2.0 ** -11, -1e-8, 3.0], np.float32)
    rn = f32_unary("cvt.rn.f16.f32 %h1, %f1; st.global.b16 [%rd3], %h1;", x, np.float16)
    assert rn.tolist()[0] == np.inf and rn[1] == 1.0 and rn[3] == 3
    rz = f32_unary("cvt.rz.f16.f32 %h1, %f1; st.global.b16 [%rd3], %h1;", x, np.float16)
    assert rz[0] == 65504 and rz[2] == 0 and np.signbit(rz[2])
    bf = f32_unary("cvt.rn.bf16.f32 %h1, %f1; st.global.b16 [%rd3], %h1;", x, ml_dtypes.bfloat16)
    assert np.array_equal(bf, x.astype(ml_dtypes.bfloat16))
    back = f32_unary("cvt.rn.f16.f32 %h1, %f1; cvt.f32.f16 %f2, %h1; st.global.f32 [%rd3], %f2;",
                     x)
    assert back[3] == 3 and back[1] == 1
    floor = f32_unary("cvt.rmi.f32.f32 %f2, %f1; st.global.f32 [%rd3], %f2;", [-1.5, 2.5])
    assert floor.tolist() == [-2, 2]
    tf32 = f32_unary("cvt.rna.tf32.f32 %r2, %f1; st.global.u32 [%rd3], %r2;",
                     [1 + 2.0 ** -11, 1 + 2.0 ** -12], np.uint32)
    assert tf32.view(np.float32).tolist() == [1 + 2.0 ** -10, 1.0]  # tie goes away from zero


@also_on_gpu
def test_fp8_pairs():
    out = np.zeros(1, np.uint32)
    run_ptx("""mov.f32 %f1, 0f447A0000; mov.f32 %f2, 0f3FC00000;
cvt.rn.satfinite.e4m3x2.f32 %h1, %f1, %f2; cvt.u32.u16 %r1, %h1; st.global.u32 [%rd0], %r1;""",
            out, threads=1)
    high, low = int(out[0]) >> 8, int(out[0]) & 0xFF
    assert np.uint8(high).view(ml_dtypes.float8_e4m3fn) == 448  # 1000 saturates to MAX_NORM
    assert np.uint8(low).view(ml_dtypes.float8_e4m3fn) == 1.5
    pair = np.zeros(2, np.float16)
    run_ptx("""mov.u16 %h1, 0x3C48; cvt.rn.f16x2.e4m3x2 %r1, %h1; st.global.u32 [%rd0], %r1;""",
            pair, threads=1)
    lo = float(np.uint8(0x48).view(ml_dtypes.float8_e4m3fn))
    hi = float(np.uint8(0x3C).view(ml_dtypes.float8_e4m3fn))
    assert pair.tolist() == [lo, hi]


# ------------------------------------------------------------------- control flow, threads

@also_on_gpu
def test_divergent_branches_reconverge():
    out = np.zeros(64, np.uint32)
    run_ptx("""and.b32 %r1, %r0, 1; setp.eq.u32 %p1, %r1, 0;
@%p1 bra $EVEN;
mul.lo.u32 %r2, %r0, 3; bra $JOIN;
$EVEN: mul.lo.u32 %r2, %r0, 5;
$JOIN: add.u32 %r2, %r2, 1;
add.s64 %rd2, %rd0, %rd9; st.global.u32 [%rd2], %r2;""", out, threads=64)
    t = np.arange(64)
    assert out.tolist() == np.where(t % 2 == 0, 5 * t, 3 * t).__add__(1).tolist()


@also_on_gpu
def test_divergent_loop_trip_counts():
    out = np.zeros(32, np.uint32)
    run_ptx("""mov.u32 %r1, 0; mov.u32 %r2, 0;
$LOOP: setp.ge.u32 %p1, %r1, %r0; @%p1 bra $DONE;
add.u32 %r2, %r2, %r1; add.u32 %r1, %r1, 1; bra $LOOP;
$DONE: add.s64 %rd2, %rd0, %rd9; st.global.u32 [%rd2], %r2;""", out)
    t = np.arange(32)
    assert out.tolist() == (t * (t - 1) // 2).tolist()


@also_on_gpu
def test_predicated_ret_retires_threads():
    out = np.zeros(32, np.uint32)
    run_ptx("""setp.ge.u32 %p1, %r0, 8; @%p1 ret;
add.s64 %rd2, %rd0, %rd9; st.global.u32 [%rd2], %r0;""", out)
    assert out.tolist() == list(range(8)) + [0] * 24


def test_divergent_bra_uni_is_an_error():
    with pytest.raises(SimExecutionError, match="bra.uni") as info:
        run_ptx("setp.eq.u32 %p1, %r0, 0; @%p1 bra.uni $X; $X: add.u32 %r1, %r0, 1;")
    assert info.value.line is not None and "test.ptx" in str(info.value)


def test_barrier_in_divergent_code_is_an_error():
    with pytest.raises(SimExecutionError, match="bar.sync"):
        run_ptx("setp.eq.u32 %p1, %r0, 0; @%p1 bra $X; bar.sync 0; $X: add.u32 %r1, %r0, 1;")


@also_on_gpu
def test_special_registers_over_a_grid():
    out = np.zeros((3, 2, 4), np.uint32)
    run_ptx("""mov.u32 %r1, %ctaid.x; mov.u32 %r2, %ctaid.y; mov.u32 %r3, %nctaid.x;
mov.u32 %r4, %ntid.x; mov.u32 %r5, %laneid;
mad.lo.u32 %r6, %r2, %r3, %r1; mad.lo.u32 %r7, %r6, %r4, %r0;
mul.wide.u32 %rd2, %r7, 4; add.s64 %rd2, %rd0, %rd2;
mad.lo.u32 %r8, %r6, 100, %r5; st.global.u32 [%rd2], %r8;""", out, threads=4, grid=(2, 3))
    expected = (np.arange(6)[:, None] * 100 + np.arange(4)).reshape(3, 2, 4)
    assert np.array_equal(out, expected)


@also_on_gpu
def test_shfl_and_vote():
    out = np.zeros(64, np.uint32)
    # butterfly sum over each warp, then ballot of odd lanes
    run_ptx("""mov.u32 %r1, %r0;
shfl.sync.bfly.b32 %r2, %r1, 16, 31, -1; add.u32 %r1, %r1, %r2;
shfl.sync.bfly.b32 %r2, %r1, 8, 31, -1; add.u32 %r1, %r1, %r2;
shfl.sync.bfly.b32 %r2, %r1, 4, 31, -1; add.u32 %r1, %r1, %r2;
shfl.sync.bfly.b32 %r2, %r1, 2, 31, -1; add.u32 %r1, %r1, %r2;
shfl.sync.bfly.b32 %r2, %r1, 1, 31, -1; add.u32 %r1, %r1, %r2;
and.b32 %r3, %r0, 1; setp.ne.u32 %p1, %r3, 0; vote.sync.ballot.b32 %r4, %p1, -1;
shfl.sync.idx.b32 %r5, %r0, 3, 31, -1;
add.u32 %r1, %r1, %r4; add.u32 %r1, %r1, %r5;
add.s64 %rd2, %rd0, %rd9; st.global.u32 [%rd2], %r1;""", out, threads=64)
    warp_sums = np.repeat([sum(range(32)), sum(range(32, 64))], 32)
    expected = (warp_sums + 0xAAAAAAAA + np.repeat([3, 35], 32)) % 2 ** 32
    assert out.tolist() == expected.tolist()


def test_atomics_serialise_in_thread_order():
    counter = np.zeros(2, np.int32)
    old = np.zeros(32, np.int32)
    run_ptx("""atom.global.add.s32 %r1, [%rd0], 2; add.s64 %rd2, %rd1, %rd9;
st.global.u32 [%rd2], %r1;
atom.global.cas.b32 %r3, [%rd0+4], %r0, 100;""", counter, old)
    assert counter[0] == 64 and old.tolist() == list(range(0, 64, 2))
    assert counter[1] == 100  # only thread 0 saw 0 == its tid


def test_vprintf_and_trap():
    data = ('.global .align 1 .b8 fmt[22] = {110, 61, 37, 100, 32, 120, 61, 37, 46, 50, 102, 32, '
            '37, 108, 108, 100, 10, 0, 0, 0, 0, 0};\n')  # "n=%d x=%.2f %lld\n"
    stream = io.StringIO()
    body = """setp.ne.u32 %p1, %r0, 1; @%p1 bra $SKIP;
.local .align 8 .b8 buf[24];
mov.u64 %rd2, fmt; cvta.global.u64 %rd3, %rd2; mov.u64 %rd4, buf; cvta.local.u64 %rd5, %rd4;
st.local.u32 [%rd4], %r0; mov.f64 %fd1, 0d400C000000000000; st.local.f64 [%rd4+8], %fd1;
mov.u64 %rd6, -3; st.local.u64 [%rd4+16], %rd6;
{ .param .b64 param0; .param .b64 param1; .param .b32 retval0;
st.param.b64 [param0], %rd3; st.param.b64 [param1], %rd5;
call (retval0), vprintf, (param0, param1); }
$SKIP: """
    run_ptx(body, threads=4, data=data, print_stream=stream)
    assert stream.getvalue() == "n=1 x=3.50 -3\n"
    with pytest.raises(SimTrap, match="n=1 x=3.50"):
        run_ptx(body + "setp.eq.u32 %p2, %r0, 1; @%p2 trap;", threads=4, data=data,
                print_stream=io.StringIO())


# ----------------------------------------------------------------------- memory checking

def test_out_of_bounds_global_access_names_the_address():
    x = np.zeros(4, np.float32)
    with pytest.raises(SimMemoryError, match="outside every array") as info:
        run_ptx("add.s64 %rd2, %rd0, %rd9; ld.global.f32 %f1, [%rd2];", x, threads=8)
    assert info.value.address is not None and info.value.thread == 4
    assert info.value.line is not None


def test_shared_write_write_race():
    with pytest.raises(SharedRaceError, match="different values"):
        run_ptx("mov.u32 %r1, smem; st.shared.u32 [%r1], %r0;")
    run_ptx("mov.u32 %r1, smem; mov.u32 %r2, 7; st.shared.u32 [%r1], %r2;")  # same value: benign
    with pytest.raises(SharedRaceError, match="overwrites"):
        run_ptx("""mov.u32 %r1, smem; setp.eq.u32 %p1, %r0, 0; @%p1 st.shared.u32 [%r1], %r0;
setp.eq.u32 %p2, %r0, 1; @%p2 st.shared.u32 [%r1], %r0;""")


def test_shared_read_after_write_needs_a_barrier():
    body = """mov.u32 %r1, smem; mad.lo.u32 %r2, %r0, 4, %r1; st.shared.u32 [%r2], %r0;
{barrier}
xor.b32 %r3, %r0, 1; mad.lo.u32 %r4, %r3, 4, %r1; ld.shared.u32 %r5, [%r4];
{barrier}
st.shared.u32 [%r2], %r5;"""
    with pytest.raises(SharedRaceError, match="reads a byte thread"):
        run_ptx(body.format(barrier=""))
    run_ptx(body.format(barrier="bar.sync 0;"))
    with pytest.raises(SharedRaceError, match="read with no bar.sync"):
        run_ptx(body.replace("{barrier}\nst.shared", "st.shared").format(barrier="bar.sync 0;"))


def test_read_of_unwritten_shared_memory():
    with pytest.raises(SimMemoryError, match="no thread of this CTA has written"):
        run_ptx("mov.u32 %r1, smem; ld.shared.u32 %r2, [%r1+8];")
    with pytest.raises(SimMemoryError, match="outside the CTA"):
        run_ptx("mov.u32 %r1, smem; st.shared.u32 [%r1+256], %r0;")


# ------------------------------------------------------------------------------- refusals

def test_unimplemented_instruction_is_refused_at_load():
    ptx = HEADER + """.visible .entry k()
.maxntid 32, 1, 1
{
.reg .b32 %r<4>;
mov.u32 %r1, 1;
bfind.u32 %r2, %r1;
ret;
}"""
    with pytest.raises(UnsupportedInstruction, match="bfind") as info:
        sim.load_kernel(ptx, "k", source="x.ptx")
    assert (info.value.line, info.value.column) == (9, 1)
    with pytest.raises(UnsupportedInstruction, match="carry"):
        sim.load_kernel(ptx.replace("bfind.u32 %r2, %r1", "add.cc.u16 %r2, %r1, 1"), "k")


def test_syntax_errors_name_the_line():
    with pytest.raises(PtxSyntaxError) as info:
        sim.parse_ptx(HEADER + ".visible .entry k()\n{\nmov.u32 %r1, ??;\nret;\n}", "bad.ptx")
    assert info.value.line == 6 and "bad.ptx" in str(info.value)


@also_on_gpu
@pytest.mark.parametrize("op", ["div.rz.f32", "div.rm.f32", "div.rp.f32"])
def test_directed_division_brackets_the_exact_quotient(op):
    a = np.array([1, 2, -1, 10], np.float32)
    b = np.array([3, 7, 3, 9], np.float32)
    out = binary_f32(op, a, b).astype(np.float64)
    exact = a.astype(np.float64) / b.astype(np.float64)
    mode = op.split(".")[1]
    below = out < exact if mode == "rm" else (np.abs(out) < np.abs(exact))
    if mode == "rp":
        below = out > exact
    assert np.all(below)
    nearest = (a.astype(np.float64) / b).astype(np.float32).astype(np.float64)
    assert np.all(np.abs(out - nearest) <= np.abs(np.spacing(out.astype(np.float32))))


@pytest.mark.parametrize("fmt", ["%99999999999999999999d\n", "%.999999999d\n", "%4097d\n"])
def test_vprintf_widths_are_bounded_as_in_the_interpreter(fmt):
    """Regression: a huge width was a bare ValueError (or a gigabyte of padding); the emulator
    refuses what the interpreter refuses (tilebc.interp.ops.debug.PRINT_MAX_WIDTH)."""
    raw = fmt.encode() + b"\0"
    data = (f".global .align 1 .b8 fmt[{len(raw)}] = {{{', '.join(map(str, raw))}}};\n")
    body = """setp.ne.u32 %p1, %r0, 1; @%p1 bra $SKIP;
.local .align 8 .b8 buf[8];
mov.u64 %rd2, fmt; cvta.global.u64 %rd3, %rd2; mov.u64 %rd4, buf; cvta.local.u64 %rd5, %rd4;
st.local.u32 [%rd4], %r0;
{ .param .b64 param0; .param .b64 param1; .param .b32 retval0;
st.param.b64 [param0], %rd3; st.param.b64 [param1], %rd5;
call (retval0), vprintf, (param0, param1); }
$SKIP: """
    with pytest.raises(SimExecutionError, match="width or precision above 4096"):
        run_ptx(body, threads=4, data=data, print_stream=io.StringIO())


# --------------------------------------------------------------- warpgroup MMA (sm_90a)
# One warpgroup copies a shared-memory image laid out here from the PTX ISA's canonical layouts
# (test_rt_sim_wgmma.place), points matrix descriptors at it and runs wgmma.mma_async; each
# thread's accumulators go in and out through the ISA's accumulator figure. Inputs are
# multiples of 1/4 in [-2, 2], so every product and sum is exact and the order of summation
# cannot change a bit.

HEADER_SM90A = """.version 8.4
.target sm_90a
.address_size 64
"""
WGMMA = "wgmma.mma_async.sync.aligned"


def wg_values(seed, dtype, shape):
    return (np.random.default_rng(seed).integers(-8, 9, shape) / 4).astype(dtype)


def canonical_offsets(major, swizzle, rows, size=2):
    """(leading, stride) byte offsets of a compact canonical layout of `rows` x 16 K elements
    (one K step of a 16-bit wgmma)."""
    if major == "k":  # none: 8-row core matrices 128 B apart, then the second K chunk
        return (rows * 16, 128) if swizzle == 0 else (16, 8 * swizzle)
    if swizzle == 0:  # 16-byte runs along M/N 128 B apart, then the next 8 K-rows
        return 128 * (rows * size // 16), 128
    return 16 * swizzle, 8 * swizzle  # swizzle atoms along M/N after both 8-K-row groups


def run_wgmma(instruction, image, c_words, steps, a_words=None, waits=(0,), prologue=""):
    """`steps`: (A descriptor or None for A in registers, B descriptor, trailing operands,
    commit after it); descriptor starts are relative to the image. Returns the accumulators."""
    words = np.ascontiguousarray(image).view(np.uint32)
    acc = c_words.shape[1]
    out = np.zeros_like(c_words)
    a_words = np.zeros((128, 4), np.uint32) if a_words is None else a_words
    lines = [f".reg .b32 %acc<{acc}>; .reg .b32 %a<4>; .reg .b64 %desc<16>;",
             "mov.u32 %r2, smem; mov.u32 %r3, %r0;",
             f"$copy: setp.ge.u32 %p0, %r3, {len(words)}; @%p0 bra $copied;",
             "mul.wide.u32 %rd10, %r3, 4; add.s64 %rd11, %rd0, %rd10; ld.global.b32 %r4, [%rd11];",
             "shl.b32 %r5, %r3, 2; add.s32 %r6, %r2, %r5; st.shared.b32 [%r6], %r4;",
             "add.s32 %r3, %r3, 128; bra $copy;",
             # wgmma reads shared memory through the async proxy
             "$copied: fence.proxy.async.shared::cta; bar.sync 0;",
             "cvt.u64.u32 %rd12, %r2; shr.u64 %rd12, %rd12, 4;",  # the image's start field
             f"mul.wide.u32 %rd13, %r0, {4 * acc}; add.s64 %rd14, %rd1, %rd13; "
             "add.s64 %rd15, %rd2, %rd13;",
             "mul.wide.u32 %rd16, %r0, 16; add.s64 %rd16, %rd3, %rd16;"]
    lines += [f"ld.global.b32 %acc{i}, [%rd14+{4 * i}];" for i in range(acc)]
    lines += [f"ld.global.b32 %a{i}, [%rd16+{4 * i}];" for i in range(4)]
    lines += [prologue, "wgmma.fence.sync.aligned;"]
    d = "{" + ", ".join(f"%acc{i}" for i in range(acc)) + "}"
    for index, (a_desc, b_desc, tail, commit) in enumerate(steps):
        b = f"%desc{2 * index}"
        lines.append(f"mov.b64 {b}, 0x{b_desc:016x}; add.s64 {b}, {b}, %rd12;")
        a = "{%a0, %a1, %a2, %a3}"
        if a_desc is not None:
            a = f"%desc{2 * index + 1}"
            lines.append(f"mov.b64 {a}, 0x{a_desc:016x}; add.s64 {a}, {a}, %rd12;")
        lines.append(f"{instruction} {d}, {a}, {b}, {tail};")
        if commit:
            lines.append("wgmma.commit_group.sync.aligned;")
    lines += [f"wgmma.wait_group.sync.aligned {w};" for w in waits]
    lines += [f"st.global.b32 [%rd15+{4 * i}], %acc{i};" for i in range(acc)]
    run_ptx("\n".join(lines), words, c_words, out, a_words, threads=128, shared=len(image),
            header=HEADER_SM90A, align=1024)
    return out


def exact(product, dtype):
    return product.astype(dtype).astype(np.float64)


@also_on_gpu
@pytest.mark.parametrize("a_major,b_major,swizzle", [
    ("k", "k", 0), ("k", "k", 32), ("k", "k", 64), ("k", "k", 128), ("mn", "mn", 0),
    ("mn", "mn", 128), ("mn", "mn", 64), ("mn", "k", 32), ("k", "mn", 32)])
def test_wgmma_m64n64k16_descriptor_layouts(a_major, b_major, swizzle):
    """A (64x16) and B (16x64) f16 from descriptors in every major-ness and swizzle mode
    (MN-major through imm-trans-a/b), f32 accumulators from C: D = A B + C against numpy."""
    from test_rt_sim_wgmma import descriptor, distribute_accumulators, gather_accumulators, place
    n = 64
    A, B = wg_values(1, np.float16, (64, 16)), wg_values(2, np.float16, (16, n))
    C = wg_values(3, np.float32, (64, n))
    image = np.zeros(16384, np.uint8)  # A in the first 8 KiB, B in the second
    a_lead, a_stride = canonical_offsets(a_major, swizzle, 64)
    b_lead, b_stride = canonical_offsets(b_major, swizzle, n)
    place(A, a_major, swizzle, a_lead, a_stride, image, 0)
    place(B.T.copy(), b_major, swizzle, b_lead, b_stride, image, 8192)
    tail = f"1, 1, 1, {int(a_major == 'mn')}, {int(b_major == 'mn')}"
    step = (descriptor(0, a_lead, a_stride, swizzle), descriptor(8192, b_lead, b_stride, swizzle),
            tail, True)
    out = run_wgmma(f"{WGMMA}.m64n{n}k16.f32.f16.f16", image, distribute_accumulators(C, "f32"),
                    [step])
    got = gather_accumulators(out, "f32", n)
    np.testing.assert_array_equal(got, exact(A.astype(np.float64) @ B + C, np.float32))


@also_on_gpu
@pytest.mark.parametrize("dtype,atype,n", [("f32", "bf16", 256), ("f16", "f16", 128)])
def test_wgmma_bf16_and_f16_accumulators(dtype, atype, n):
    """bf16 into f32 at the widest N (128 accumulator registers), and f16 with packed f16
    accumulators; K-major operands with the 128-byte swizzle."""
    from test_rt_sim_wgmma import descriptor, distribute_accumulators, gather_accumulators, place
    element = ml_dtypes.bfloat16 if atype == "bf16" else np.float16
    A, B = wg_values(4, element, (64, 16)), wg_values(5, element, (16, n))
    C = wg_values(6, np.float32, (64, n))
    image = np.zeros(8192 + 128 * n, np.uint8)
    place(A, "k", 128, 16, 1024, image, 0)
    place(B.T.copy(), "k", 128, 16, 1024, image, 8192)
    step = (descriptor(0, 16, 1024, 128), descriptor(8192, 16, 1024, 128), "1, 1, 1, 0, 0", True)
    out = run_wgmma(f"{WGMMA}.m64n{n}k16.{dtype}.{atype}.{atype}", image,
                    distribute_accumulators(C, dtype), [step])
    got = gather_accumulators(out, dtype, n)
    want = A.astype(np.float64) @ B.astype(np.float64) + C
    np.testing.assert_array_equal(got, exact(want, np.float16 if dtype == "f16" else np.float32))


@also_on_gpu
@pytest.mark.parametrize("atype", ["f16", "bf16"])
def test_wgmma_a_from_registers(atype):
    """A in four registers per thread (each warp holds its 16 rows as mma.m16n8k16's A
    fragment), B from a no-swizzle descriptor; scale-d 0 ignores the accumulators' old values."""
    from test_rt_sim_wgmma import (a_register_position, descriptor, distribute_accumulators,
                                   gather_accumulators, place)
    n = 32
    element = ml_dtypes.bfloat16 if atype == "bf16" else np.float16
    A, B = wg_values(7, element, (64, 16)), wg_values(8, element, (16, n))
    raw = A.view(np.uint16)
    a_words = np.zeros((128, 4), np.uint32)
    for tid in range(128):
        for i in range(8):
            a_words[tid, i // 2] |= np.uint32(int(raw[a_register_position(i, tid, atype)])
                                              << (16 * (i % 2)))
    image = np.zeros(4096, np.uint8)
    lead, stride = canonical_offsets("k", 0, n)
    place(B.T.copy(), "k", 0, lead, stride, image, 0)
    garbage = distribute_accumulators(wg_values(9, np.float32, (64, n)), "f32")
    out = run_wgmma(f"{WGMMA}.m64n{n}k16.f32.{atype}.{atype}", image, garbage,
                    [(None, descriptor(0, lead, stride, 0), "0, 1, 1, 0", True)], a_words)
    got = gather_accumulators(out, "f32", n)
    np.testing.assert_array_equal(got, exact(A.astype(np.float64) @ B.astype(np.float64),
                                             np.float32))


@also_on_gpu
@pytest.mark.parametrize("keep,retire", [(keep, retire) for retire in ("wait", "stores",
                                                                     "stores, second uncommitted")
                                          for keep in (True, False)])
def test_wgmma_two_groups_accumulate_with_commit_and_wait(keep, retire):
    """The K loop of a GEMM: two wgmma's whose descriptors step 32 bytes along 128-byte swizzled
    rows (K 0-15, then 16-31), each its own commit group, retired by wait_group 1 then 0. The
    first's scale-d is a predicate (C kept or dropped), the second negates A (imm-scale-a -1)
    and accumulates onto the first's result: D = [C] + A0 B0 - A1 B1. With no wait (the
    second group committed or not), the stores of the accumulators land the results first, as
    ptxas serialises the pipeline there: the same D, nothing left in flight."""
    from test_rt_sim_wgmma import descriptor, distribute_accumulators, gather_accumulators, place
    n = 64
    A, B = wg_values(10, np.float16, (64, 32)), wg_values(11, np.float16, (32, n))
    C = wg_values(12, np.float32, (64, n))
    image = np.zeros(16384, np.uint8)
    place(A, "k", 128, 16, 1024, image, 0)
    place(B.T.copy(), "k", 128, 16, 1024, image, 8192)
    steps = [(descriptor(0, 16, 1024, 128), descriptor(8192, 16, 1024, 128),
              "%p1, 1, 1, 0, 0", True),
             (descriptor(32, 16, 1024, 128), descriptor(8192 + 32, 16, 1024, 128),
              "1, -1, 1, 0, 0", retire != "stores, second uncommitted")]
    out = run_wgmma(f"{WGMMA}.m64n{n}k16.f32.f16.f16", image, distribute_accumulators(C, "f32"),
                    steps, waits=(1, 0) if retire == "wait" else (),
                    prologue=f"setp.{'lt' if keep else 'ge'}.u32 %p1, %r0, 128;")
    got = gather_accumulators(out, "f32", n)
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    want = A64[:, :16] @ B64[:16] - A64[:, 16:] @ B64[16:] + (C if keep else 0)
    np.testing.assert_array_equal(got, exact(want, np.float32))


ELEMENTS = {"tf32": np.float32, "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2,
            "s8": np.int8, "u8": np.uint8}


@also_on_gpu
@pytest.mark.parametrize("dtype,atype,btype", [
    ("f32", "tf32", "tf32"), ("f32", "e4m3", "e5m2"), ("f16", "e5m2", "e5m2"),
    ("s32", "s8", "u8")])
def test_wgmma_tf32_fp8_and_int8(dtype, atype, btype):
    """The other operand types, K-major with the 128-byte swizzle (one wgmma reads 32 bytes of
    K per row: k8 for tf32, k32 for 8-bit types). Float inputs stay small enough that even a
    narrow accumulator holds every partial sum exactly; integers use their whole range."""
    from test_rt_sim_wgmma import descriptor, distribute_accumulators, gather_accumulators, place
    n, k = 64, 8 if atype == "tf32" else 32
    rng = np.random.default_rng(15)
    if dtype == "s32":
        A = rng.integers(-128, 128, (64, k)).astype(np.int8)
        B = rng.integers(0, 256, (k, n)).astype(ELEMENTS[btype])
        C = rng.integers(-2 ** 20, 2 ** 20, (64, n)).astype(np.int32)
    else:
        bound = 4 if dtype == "f16" else 8
        A = (rng.integers(-bound, bound + 1, (64, k)) / 4).astype(ELEMENTS[atype])
        B = (rng.integers(-bound, bound + 1, (k, n)) / 4).astype(ELEMENTS[btype])
        C = wg_values(16, np.float32, (64, n))
    image = np.zeros(16384, np.uint8)
    place(A, "k", 128, 16, 1024, image, 0)
    place(B.T.copy(), "k", 128, 16, 1024, image, 8192)
    tail = "1" if dtype == "s32" else "1, 1, 1"
    step = (descriptor(0, 16, 1024, 128), descriptor(8192, 16, 1024, 128), tail, True)
    out = run_wgmma(f"{WGMMA}.m64n{n}k{k}.{dtype}.{atype}.{btype}", image,
                    distribute_accumulators(C, dtype), [step])
    got = gather_accumulators(out, dtype, n)
    if dtype == "s32":  # |A B + C| < 2^31 here
        want = A.astype(np.int64) @ B.astype(np.int64) + C
    else:
        want = exact(A.astype(np.float64) @ B.astype(np.float64) + C,
                     np.float16 if dtype == "f16" else np.float32)
    np.testing.assert_array_equal(got, want)


@also_on_gpu
@pytest.mark.parametrize("satfinite", [True, False])
def test_wgmma_s8_satfinite_saturates_else_wraps(satfinite):
    """127 x 127 summed 32 times onto 2^31 - 1000 overflows s32: .satfinite clamps to
    2^31 - 1, without it the sum wraps."""
    from test_rt_sim_wgmma import descriptor, distribute_accumulators, gather_accumulators, place
    n = 16
    A, B = np.full((64, 32), 127, np.int8), np.full((32, n), 127, np.int8)
    C = np.full((64, n), 2 ** 31 - 1000, np.int32)
    image = np.zeros(16384, np.uint8)
    place(A, "k", 128, 16, 1024, image, 0)
    place(B.T.copy(), "k", 128, 16, 1024, image, 8192)
    sat = ".satfinite" if satfinite else ""
    out = run_wgmma(f"{WGMMA}.m64n{n}k32{sat}.s32.s8.s8", image,
                    distribute_accumulators(C, "s32"),
                    [(descriptor(0, 16, 1024, 128), descriptor(8192, 16, 1024, 128), "1", True)])
    got = gather_accumulators(out, "s32", n)
    total = 32 * 127 * 127 + 2 ** 31 - 1000
    assert (got == (2 ** 31 - 1 if satfinite else total - 2 ** 32)).all()


def test_wgmma_refusals_name_the_instruction():
    """An N the ISA lacks is refused at load; a descriptor with a base offset (a swizzle
    pattern not at its alignment) and one reaching past shared memory fail at the wgmma."""
    from test_rt_sim_wgmma import descriptor, distribute_accumulators, place
    image = np.zeros(16384, np.uint8)
    place(wg_values(13, np.float16, (64, 16)), "k", 128, 16, 1024, image, 0)
    place(wg_values(14, np.float16, (8, 16)), "k", 128, 16, 1024, image, 8192)
    c_words = distribute_accumulators(np.zeros((64, 8), np.float32), "f32")
    good = descriptor(8192, 16, 1024, 128)
    with pytest.raises(UnsupportedInstruction,
                       match=r"N = 12.*wgmma\.mma_async.*m64n12k16") as info:
        run_wgmma(f"{WGMMA}.m64n12k16.f32.f16.f16", image,
                  np.zeros((128, 6), np.uint32), [(0, good, "1, 1, 1, 0, 0", True)])
    assert info.value.line is not None
    with pytest.raises(SimExecutionError, match=r"base offset.*wgmma\.mma_async"):
        run_wgmma(f"{WGMMA}.m64n8k16.f32.f16.f16", image, c_words,
                  [(descriptor(0, 16, 1024, 128) | 1 << 49, good, "1, 1, 1, 0, 0", True)])
    with pytest.raises(SimMemoryError, match=r"wgmma\.mma_async"):  # B rows 8-15: 8 KiB on
        run_wgmma(f"{WGMMA}.m64n16k16.f32.f16.f16", image, np.zeros((128, 8), np.uint32),
                  [(descriptor(0, 16, 1024, 128), descriptor(8192, 16, 8192, 128),
                    "1, 1, 1, 0, 0", True)])


def test_wgmma_cases_link_for_sm_90a(monkeypatch):
    """nvJitLink turns every GPU-checked wgmma case's PTX into an sm_90a cubin
    (scripts/gpu_checks.py links them so on an sm_90 GPU; s8 x u8 needs PTX ISA 8.4)."""
    from tilebc_runtime.compiler import link_ptx

    class Linked(Exception):
        pass

    def link_only(ptx, entry, grid, threads, arrays, print_stream=None):
        cubin, _log = link_ptx(ptx, "90a")
        assert cubin[:4] == b"\x7fELF"
        raise Linked  # the emulated run is the case's own test
    monkeypatch.setitem(globals(), "EXECUTE", link_only)
    cases = [test for name, test in globals().items()
             if name.startswith("test_wgmma") and getattr(test, "also_on_gpu", False)]
    linked = 0
    for test in cases:
        mark, = [m for m in test.pytestmark if m.name == "parametrize"]
        names = [n.strip() for n in mark.args[0].split(",")]
        for values in mark.args[1]:
            values = values if isinstance(values, tuple) else (values,)
            with pytest.raises(Linked):
                test(**dict(zip(names, values)))
            linked += 1
    assert len(cases) == 6 and linked == 25
