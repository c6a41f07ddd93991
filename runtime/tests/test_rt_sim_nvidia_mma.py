"""mma.sync forms on the PTX emulator against a numpy matmul. Each lane's registers are filled from
matrices A, B, C through the fragment tables of the PTX ISA ("Matrix Fragments for mma.m16n8kK",
"mma.m8n8k4 with .f64"), spelled out here table by table (independently of the emulator's one
rule); the lanes' D registers are read back through the D table and compared with A @ B + C.
"""
import ml_dtypes
import numpy as np
import pytest

from tilebc.interp.memory import GlobalMemory, host_bytes
from tilebc_runtime import sim

RNG = np.random.default_rng(20240607)


# ---- the ISA's fragment tables: element index i of a lane's fragment -> (row, col) -----------
# g = groupID = lane >> 2, t = threadID_in_group = lane % 4

def c_m16n8(i, g, t):          # c0..c3 (also D; f16x2 accumulators: halves low first)
    return (g if i < 2 else g + 8), 2 * t + (i & 1)


def a_m16n8k16_half(i, g, t):  # a0..a7
    return (g if i in (0, 1, 4, 5) else g + 8), (2 * t + (i & 1) + (8 if i >= 4 else 0))


def b_m16n8k16_half(i, g, t):  # b0..b3
    return 2 * t + (i & 1) + (8 if i >= 2 else 0), g


def a_m16n8k8_half(i, g, t):   # a0..a3
    return (g if i < 2 else g + 8), 2 * t + (i & 1)


def b_m16n8k8_half(i, g, t):   # b0, b1
    return 2 * t + i, g


def a_m16n8k8_tf32(i, g, t):   # a0..a3
    return (g if i in (0, 2) else g + 8), (t if i < 2 else t + 4)


def b_m16n8k8_tf32(i, g, t):   # b0, b1
    return (t if i == 0 else t + 4), g


def a_m16n8k4_tf32(i, g, t):   # a0, a1
    return (g if i == 0 else g + 8), t


def b_m16n8k4_tf32(i, g, t):   # b0
    return t, g


def a_m16n8k32_8bit(i, g, t):  # a0..a15
    return (g if i < 4 or 8 <= i < 12 else g + 8), 4 * t + (i & 3) + (16 if i >= 8 else 0)


def b_m16n8k32_8bit(i, g, t):  # b0..b7
    return 4 * t + (i & 3) + (16 if i >= 4 else 0), g


def a_m16n8k16_8bit(i, g, t):  # a0..a7
    return (g if i < 4 else g + 8), 4 * t + (i & 3)


def b_m16n8k16_8bit(i, g, t):  # b0..b3
    return 4 * t + i, g


def a_m8n8k4_f64(i, g, t):
    return g, t


def b_m8n8k4_f64(i, g, t):
    return t, g


def c_m8n8_f64(i, g, t):       # c0, c1
    return g, 2 * t + i


ELEMENT = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn,
           "e5m2": ml_dtypes.float8_e5m2, "s8": np.int8, "u8": np.uint8, "tf32": np.float32,
           "f64": np.float64, "f32": np.float32, "s32": np.int32}

# (shape, D, A, B, C) -> (m, n, k, A table, B table, C table)
FORMS = {
    ("m16n8k16", "f32", "f16", "f16", "f32"): (16, 8, 16, a_m16n8k16_half, b_m16n8k16_half, c_m16n8),
    ("m16n8k16", "f32", "bf16", "bf16", "f32"): (16, 8, 16, a_m16n8k16_half, b_m16n8k16_half,
                                                 c_m16n8),
    ("m16n8k16", "f16", "f16", "f16", "f16"): (16, 8, 16, a_m16n8k16_half, b_m16n8k16_half, c_m16n8),
    ("m16n8k16", "f32", "f16", "f16", "f16"): (16, 8, 16, a_m16n8k16_half, b_m16n8k16_half, c_m16n8),
    ("m16n8k8", "f32", "f16", "f16", "f32"): (16, 8, 8, a_m16n8k8_half, b_m16n8k8_half, c_m16n8),
    ("m16n8k8", "f32", "tf32", "tf32", "f32"): (16, 8, 8, a_m16n8k8_tf32, b_m16n8k8_tf32, c_m16n8),
    ("m16n8k4", "f32", "tf32", "tf32", "f32"): (16, 8, 4, a_m16n8k4_tf32, b_m16n8k4_tf32, c_m16n8),
    ("m16n8k32", "s32", "s8", "s8", "s32"): (16, 8, 32, a_m16n8k32_8bit, b_m16n8k32_8bit, c_m16n8),
    ("m16n8k32", "s32", "u8", "s8", "s32"): (16, 8, 32, a_m16n8k32_8bit, b_m16n8k32_8bit, c_m16n8),
    ("m16n8k16", "s32", "s8", "u8", "s32"): (16, 8, 16, a_m16n8k16_8bit, b_m16n8k16_8bit, c_m16n8),
    ("m16n8k32", "f32", "e4m3", "e4m3", "f32"): (16, 8, 32, a_m16n8k32_8bit, b_m16n8k32_8bit,
                                                 c_m16n8),
    ("m16n8k32", "f32", "e5m2", "e4m3", "f32"): (16, 8, 32, a_m16n8k32_8bit, b_m16n8k32_8bit,
                                                 c_m16n8),
    ("m16n8k32", "f16", "e5m2", "e5m2", "f16"): (16, 8, 32, a_m16n8k32_8bit, b_m16n8k32_8bit,
                                                 c_m16n8),
    ("m8n8k4", "f64", "f64", "f64", "f64"): (8, 8, 4, a_m8n8k4_f64, b_m8n8k4_f64, c_m8n8_f64),
}


def _random(ptype, shape):
    if ptype in ("s8", "u8"):
        info = np.iinfo(ELEMENT[ptype])
        return RNG.integers(info.min, info.max + 1, shape).astype(ELEMENT[ptype])
    if ptype == "s32":
        return RNG.integers(-2**20, 2**20, shape).astype(np.int32)
    values = RNG.uniform(-2, 2, shape)
    if ptype == "tf32":  # tf32 values: f32 with the low 13 bits clear
        return (values.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    return values.astype(ELEMENT[ptype])


def _bits(values):
    """Raw bits of an array of elements, as unsigned integers of their width."""
    values = np.asarray(values)
    return values.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[values.itemsize])


def _distribute(matrix, table, count, ptype):
    """The lanes' registers (32 x registers, as .b32 words or .f64) holding `count` elements of
    `matrix` each, per `table`; sub-word elements are packed low first."""
    lane = np.arange(32)
    g, t = lane >> 2, lane & 3
    elements = np.stack([matrix[table(i, g, t)] for i in range(count)], axis=1)  # (32, count)
    if ptype == "f64":
        return elements.astype(np.float64)
    bits = _bits(elements).astype(np.uint64)
    width = 8 * elements.itemsize
    per_word = 32 // width
    words = np.zeros((32, count // per_word), np.uint64)
    for i in range(count):
        words[:, i // per_word] |= bits[:, i] << np.uint64(width * (i % per_word))
    return words.astype(np.uint32)


def _kernel(form, counts, satfinite=True):
    shape, dtype, atype, btype, ctype = form
    na, nb, nc, nd = counts
    wide = lambda p: p == "f64"  # noqa: E731 - one .b64 register per element
    reg = {"a": ("fd" if wide(atype) else "r"), "b": ("fd" if wide(btype) else "r"),
           "c": ("fd" if wide(ctype) else "r"), "d": ("fd" if wide(dtype) else "r")}
    lines = [".version 8.7", ".target sm_89", ".address_size 64",
             ".visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd)",
             ".reqntid 32", "{", "  .reg .b32 %r<128>;", "  .reg .f64 %fd<64>;",
             "  .reg .b64 %rd<16>;", "  mov.u32 %r0, %tid.x;"]
    names = {}
    next_index = {"r": 1, "fd": 0}
    for slot, (param, count) in enumerate(zip("abcd", counts)):
        kind = reg[param]
        size = 8 if kind == "fd" else 4
        lines += [f"  ld.param.u64 %rd{slot}, [p{param}];",
                  f"  mul.wide.u32 %rd{slot + 4}, %r0, {size * count};",
                  f"  add.s64 %rd{slot + 8}, %rd{slot}, %rd{slot + 4};"]
        regs = []
        for i in range(count):
            regs.append(f"%{kind}{next_index[kind]}")
            next_index[kind] += 1
            if param != "d":
                op = "f64" if kind == "fd" else "b32"
                lines.append(f"  ld.global.{op} {regs[-1]}, [%rd{slot + 8}+{size * i}];")
        names[param] = regs
    sat = ".satfinite" if dtype == "s32" and satfinite else ""
    lines.append(f"  mma.sync.aligned.{shape}.row.col{sat}.{dtype}.{atype}.{btype}.{ctype} "
                 + ", ".join("{" + ", ".join(names[p]) + "}" for p in "dabc") + ";")
    for i, r in enumerate(names["d"]):
        op = "f64" if r.startswith("%fd") else "b32"
        lines.append(f"  st.global.{op} [%rd11+{(8 if op == 'f64' else 4) * i}], {r};")
    lines += ["  ret;", "}"]
    return "\n".join(lines) + "\n"


def _run_mma(form, A, B, C, satfinite=True):
    shape, dtype, atype, btype, ctype = form
    m, n, k, a_table, b_table, c_table = FORMS[form]
    per_lane = lambda rows, cols: rows * cols // 32  # noqa: E731
    a = _distribute(A, a_table, per_lane(m, k), atype)
    b = _distribute(B, b_table, per_lane(k, n), btype)
    c = _distribute(C, c_table, per_lane(m, n), ctype)
    d_words = per_lane(m, n) // (2 if dtype == "f16" else 1)
    d = np.zeros((32, d_words), np.float64 if dtype == "f64" else np.uint32)
    memory = GlobalMemory()
    bases = [memory.map(host_bytes(x), name).base for x, name in ((a, "a"), (b, "b"), (c, "c"),
                                                                  (d, "d"))]
    ptx = _kernel(form, (a.shape[1], b.shape[1], c.shape[1], d_words), satfinite)
    sim.emulate(ptx, "k", 1, bases, memory=memory)
    # gather D back through the C/D table
    out = np.zeros((m, n), ELEMENT[dtype] if dtype != "f16" else np.float16)
    lane = np.arange(32)
    g, t = lane >> 2, lane & 3
    if dtype == "f16":
        halves = np.stack([d & 0xFFFF, d >> 16], axis=2).reshape(32, -1).astype(np.uint16)
        values = halves.view(np.float16)
    else:
        values = d.view(ELEMENT[dtype]) if dtype != "f64" else d
    for i in range(per_lane(m, n)):
        out[c_table(i, g, t)] = values[:, i]
    return out


@pytest.mark.parametrize("form", sorted(FORMS), ids=lambda f: ".".join(f))
def test_mma_form_matches_numpy(form):
    shape, dtype, atype, btype, ctype = form
    m, n, k = FORMS[form][:3]
    A, B, C = _random(atype, (m, k)), _random(btype, (k, n)), _random(ctype, (m, n))
    got = _run_mma(form, A, B, C)
    if dtype == "s32":
        want = A.astype(np.int64) @ B.astype(np.int64) + C.astype(np.int64)
        np.testing.assert_array_equal(got, want)
        return
    want = A.astype(np.float64) @ B.astype(np.float64) + C.astype(np.float64)
    if dtype == "f64":
        np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-15)
    else:  # one rounding of the (here exact) f64 sum to the accumulator type
        np.testing.assert_array_equal(got, want.astype(ELEMENT[dtype]))


def test_mma_layout_is_not_symmetric_under_a_transpose():
    """A check that can fail on a swapped table: a one-hot A picks exactly one row of B."""
    form = ("m16n8k32", "f32", "e4m3", "e4m3", "f32")
    A = np.zeros((16, 32), ml_dtypes.float8_e4m3fn)
    A[5, 19] = 1
    B = _random("e4m3", (32, 8))
    got = _run_mma(form, A, B, np.zeros((16, 8), np.float32))
    assert np.array_equal(got[5], B[19].astype(np.float32))
    assert not got[np.arange(16) != 5].any()


@pytest.mark.parametrize("satfinite", [True, False])
def test_integer_mma_saturates_or_wraps(satfinite):
    form = ("m16n8k32", "s32", "s8", "s8", "s32")
    A = np.full((16, 32), 127, np.int8)
    B = np.full((32, 8), 127, np.int8)
    C = np.full((16, 8), 2**31 - 1000, np.int32)
    got = _run_mma(form, A, B, C, satfinite)
    total = 32 * 127 * 127 + 2**31 - 1000      # past the s32 range
    assert (got == (2**31 - 1 if satfinite else total - 2**32)).all()


def test_tf32_operand_bits_are_read_with_the_low_13_dropped():
    # what an H200 did with tileiras's code for f32 data in tf32 arrays (results/gpu.md)
    form = ("m16n8k8", "f32", "tf32", "tf32", "f32")
    A = np.zeros((16, 8), np.float32)
    B = np.zeros((8, 8), np.float32)
    A[0, 0] = np.float32(1 + 2**-11 + 2**-20)  # above the tf32 halfway point: still 1
    A[1, 0] = np.float32(-(1 + 2**-10 + 2**-12))  # toward zero, not away
    A[2, 0] = np.float32(1 + 2**-10)           # a tf32 value: kept
    B[0, :] = 1
    got = _run_mma(form, A, B, np.zeros((16, 8), np.float32))
    assert got[0, 0] == 1 and got[1, 0] == np.float32(-(1 + 2**-10))
    assert got[2, 0] == np.float32(1 + 2**-10)


def test_tf32_operands_read_alike_by_the_interpreter_and_the_emulator():
    """One reading of a tf32 mma operand everywhere: the interpreter's (tilebc.interp, whose
    tf32 tiles hold f32 words) and the emulator's mma/wgmma (isa_mma) keep the top 19 bits of
    every pattern. Specials follow from that: Inf and a NaN with a payload bit in the top 10
    stay so; a NaN whose payload is only in the low 13 bits reads as Inf (not seen on a GPU)."""
    from tilebc.interp.numeric_ops import tf32_operand
    from tilebc_runtime.sim.isa_mma import _tf32_top_bits
    rng = np.random.default_rng(3)
    words = np.concatenate([rng.integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32),
                            np.array([0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0x00000001,
                                      0x80001FFF, 0x3F800FFF], np.uint32)])
    interpreted = tf32_operand(words.view(np.float32)).view(np.uint32)
    assert (interpreted == words & 0xFFFFE000).all()
    emulated = _tf32_top_bits(words)  # float64: a NaN's payload is not kept bit for bit
    nan = np.isnan(emulated)
    assert (nan == np.isnan(interpreted.view(np.float32))).all()
    assert (emulated[~nan] == interpreted.view(np.float32)[~nan]).all()
    specials = interpreted[-7:].view(np.float32)
    assert np.isposinf(specials[0]) and np.isneginf(specials[1]) and np.isnan(specials[2])
    assert np.isposinf(specials[3]) and specials[4] == 0 and specials[5] == 0
    assert specials[6] == 1.0


@pytest.mark.parametrize("instruction", [
    "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32",       # its own quad-pair layout
    "mma.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32",   # no such tf32 shape
    "mma.sync.aligned.m16n8k16.row.col.f16.bf16.bf16.f16",   # bf16 has f32 accumulators only
    "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.s8.f32",     # mixed kinds
])
def test_unemulated_mma_forms_are_refused(instruction):
    ptx = f""".version 8.7
.target sm_89
.address_size 64
.visible .entry k()
.reqntid 32
{{
  .reg .b32 %r<8>;
  .reg .f32 %f<4>;
  {instruction} {{%f0, %f1, %f2, %f3}}, {{%r1, %r2, %r3, %r4}}, {{%r1, %r2}},
      {{%f0, %f1, %f2, %f3}};
  ret;
}}
"""
    with pytest.raises(sim.UnsupportedInstruction, match="mma"):
        sim.load_kernel(ptx, "k")
