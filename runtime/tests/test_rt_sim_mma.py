"""mma.sync on the emulator and the tensor-core lowering of mmaf.

The emulator's fragment layout is checked against the PTX ISA's formulas (written here as the ISA
states them: element i of lane l, groupID = l >> 2, threadID_in_group = l % 4), with the fragments
packed on the host; the lowering's mma.sync path is checked on the emulator against the CPU
interpreter for shapes where warps own several blocks, uneven block counts and batches."""
import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from tilebc.interp import run as interpret
from tilebc.interp.memory import GlobalMemory, host_bytes
from tilebc.ir import PointerType, TileType, f32, i32, scalar
from tilebc.ir.builder import new_function, new_module
from tilebc.ir.types import ELEMENT_TYPES

from tilebc_runtime import sim
from tilebc_runtime.compiler import compile as jit_compile
from tilebc_runtime.sim import SimExecutionError

RNG = np.random.default_rng(21)
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "bytecode"


# ---------------------------------------------------------------- the ISA's fragment formulas

def a_position(lane, i):
    g, t = lane >> 2, lane % 4
    row = g if (i < 2 or 4 <= i < 6) else g + 8
    col = t * 2 + (i & 1) + (8 if i >= 4 else 0)
    return row, col


def b_position(lane, i):
    g, t = lane >> 2, lane % 4
    return t * 2 + (i & 1) + (8 if i >= 2 else 0), g


def c_position(lane, i):
    g, t = lane >> 2, lane % 4
    return (g if i < 2 else g + 8), t * 2 + (i & 1)


def _pack_pairs(matrix, position, count):
    """[32, count // 2] .b32 words: elements 2j (low half) and 2j+1 (high half) of each lane."""
    bits = matrix.view(np.uint16)
    words = np.zeros((32, count // 2), np.uint32)
    for lane in range(32):
        for j in range(count // 2):
            low = bits[position(lane, 2 * j)]
            high = bits[position(lane, 2 * j + 1)]
            words[lane, j] = np.uint32(low) | (np.uint32(high) << np.uint32(16))
    return words


MMA_PTX = """.version 7.8
.target sm_90
.address_size 64
.visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd)
.maxntid {threads}, 1, 1
{{
.reg .pred %p<2>; .reg .b32 %r<16>; .reg .b64 %rd<16>; .reg .f32 %f<16>;
ld.param.u64 %rd0, [pa]; ld.param.u64 %rd1, [pb]; ld.param.u64 %rd2, [pc];
ld.param.u64 %rd3, [pd];
mov.u32 %r0, %tid.x;
and.b32 %r1, %r0, 31;
mul.wide.u32 %rd4, %r1, 16;
mul.wide.u32 %rd5, %r1, 8;
add.s64 %rd6, %rd0, %rd4; add.s64 %rd7, %rd1, %rd5; add.s64 %rd8, %rd2, %rd4;
add.s64 %rd9, %rd3, %rd4;
{guard}
ld.global.v4.b32 {{%r2, %r3, %r4, %r5}}, [%rd6];
ld.global.v2.b32 {{%r6, %r7}}, [%rd7];
ld.global.v4.f32 {{%f0, %f1, %f2, %f3}}, [%rd8];
mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32 {{%f4, %f5, %f6, %f7}}, {{%r2, %r3, %r4, %r5}}, {{%r6, %r7}}, {{%f0, %f1, %f2, %f3}};
st.global.v4.f32 [%rd9], {{%f4, %f5, %f6, %f7}};
$done:
ret;
}}
"""


def _run_mma(kind, a, b, c, threads=32, guard=""):
    words_a = _pack_pairs(a, a_position, 8)
    words_b = _pack_pairs(b, b_position, 4)
    frag_c = np.array([[c[c_position(lane, i)] for i in range(4)] for lane in range(32)],
                      np.float32)
    out = np.zeros((32, 4), np.float32)
    memory = GlobalMemory()
    addresses = [memory.map(host_bytes(x), f"array {i}").base
                 for i, x in enumerate((words_a, words_b, frag_c, out))]
    sim.emulate(MMA_PTX.format(threads=threads, kind=kind, guard=guard), "k", (1,), addresses,
                memory=memory, source="mma.ptx")
    d = np.zeros((16, 8), np.float32)
    for lane in range(32):
        for i in range(4):
            d[c_position(lane, i)] = out[lane, i]
    return d


@pytest.mark.parametrize("kind,dtype", [("f16", np.float16), ("bf16", ml_dtypes.bfloat16)])
def test_mma_sync_fragments_follow_the_isa(kind, dtype):
    a = RNG.uniform(-2, 2, (16, 16)).astype(dtype)
    b = RNG.uniform(-2, 2, (16, 8)).astype(dtype)
    c = RNG.uniform(-2, 2, (16, 8)).astype(np.float32)
    d = _run_mma(kind, a, b, c)
    expected = (a.astype(np.float64) @ b.astype(np.float64) + c.astype(np.float64))
    np.testing.assert_array_equal(d, expected.astype(np.float32))  # exact sum, one rounding


def test_mma_sync_with_a_partial_warp_is_undefined():
    a = np.ones((16, 16), np.float16)
    b = np.ones((16, 8), np.float16)
    c = np.zeros((16, 8), np.float32)
    with pytest.raises(SimExecutionError, match=r"part of warp 0 \(lane 31"):
        _run_mma("f16", a, b, c, guard="setp.eq.u32 %p0, %r1, 31;\n@%p0 bra $done;")


# ------------------------------------------------------------------ the lowering's mma.sync path

def mmaf_kernel(kind: str, m: int, n: int, k: int, batch: int = 0, acc_kind: str = "f32"):
    """c = a @ b + c for one tile of each array (batched when batch > 0)."""
    module = new_module("13.5")
    element = ELEMENT_TYPES[kind]
    rank = 3 if batch else 2
    lead = (batch,) if batch else ()
    params = []
    acc_element = ELEMENT_TYPES[acc_kind]
    for pointee in (element, element, acc_element):
        params += [scalar(PointerType(pointee))] + [scalar(i32)] * (2 * rank)
    b = new_function(module, f"mmaf_{kind}_{acc_kind}_{m}x{n}x{k}", params)
    args = b.args
    start = b.make_token()
    zero = b.constant(0, "i32")
    tiles = []
    for group, shape in enumerate((lead + (m, k), lead + (k, n), lead + (m, n))):
        base = args[group * (1 + 2 * rank):(group + 1) * (1 + 2 * rank)]
        view = b.tensor_view(base[0], base[1:1 + rank], base[1 + rank:])
        tiles.append(b.partition_view(view, shape))
    index = [zero] * rank
    lhs, _ = b.load(tiles[0], index, token=start)
    rhs, _ = b.load(tiles[1], index, token=start)
    acc, _ = b.load(tiles[2], index, token=start)
    product = b.mmaf(lhs, rhs, acc, result_types=[TileType(lead + (m, n), acc_element)])
    b.store(product, tiles[2], index, token=start)
    b.return_([])
    return module


CASES = [  # kind, m, n, k, batch, threads per CTA
    ("f16", 32, 32, 32, 0, 128),   # 8 blocks over 4 warps, two k steps
    ("bf16", 32, 32, 16, 0, 96),   # 8 blocks over 3 warps: the last round leaves a warp idle
    ("f16", 16, 8, 64, 0, 64),     # one block: one warp works, the other waits
    ("bf16", 64, 16, 16, 0, 32),   # one warp does all 8 blocks
    ("f16", 16, 16, 16, 4, 128),   # batched
    ("f16", 32, 24, 48, 0, 64),    # odd block columns (ldmatrix .x2), rows staged slot by slot
    ("bf16", 64, 64, 80, 0, 128),  # a K loop of 5 steps, 2x2 warps over 4x8 blocks
    ("f16", 32, 16, 32, 2, 64),    # batched, warps over batches
]


@pytest.mark.parametrize("kind,m,n,k,batch,threads", CASES,
                         ids=[f"{c[0]}-{c[1]}x{c[2]}x{c[3]}-b{c[4]}-t{c[5]}" for c in CASES])
def test_tensor_core_mmaf_matches_the_interpreter(kind, m, n, k, batch, threads):
    module = mmaf_kernel(kind, m, n, k, batch)
    ptx = jit_compile(module, arch="sm_80", emit="ptx", threads=threads).ptx
    assert f"mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32" in ptx
    dtype = np.float16 if kind == "f16" else ml_dtypes.bfloat16
    lead = (batch,) if batch else ()
    a = RNG.uniform(-1, 1, lead + (m, k)).astype(dtype)
    b = RNG.uniform(-1, 1, lead + (k, n)).astype(dtype)
    c = RNG.uniform(-1, 1, lead + (m, n)).astype(np.float32)
    expected, actual = c.copy(), c.copy()
    interpret(module, None, (1,), a, b, expected)
    sim.run(module, None, (1,), a, b, actual, arch="sm_80", threads=threads)
    exact = np.matmul(a.astype(np.float64), b.astype(np.float64)) + c
    # f32 sums of k products in some order, plus the accumulator: within (k + 1) f32 rounding
    # errors of the magnitudes summed (the interpreter's numpy matmul has the same bound)
    magnitude = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64))) + np.abs(c)
    bound = (k + 1) * 2.0 ** -24 * magnitude
    assert np.all(np.abs(actual - exact) <= bound)
    assert np.all(np.abs(expected - exact) <= bound)
    assert np.all(np.abs(actual - expected) <= 2 * bound)


DTYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32,
          "f8E4M3FN": ml_dtypes.float8_e4m3fn, "f8E5M2": ml_dtypes.float8_e5m2}
WIDE = "m16n8k16.row.col.f32.f16.f16.f32"
WIDER_CASES = [  # operand kind, accumulator kind, K, mma form, arch
    ("f16", "f16", 32, WIDE, "sm_90"),     # matmul_operator's shape of problem
    ("bf16", "bf16", 32, "m16n8k16.row.col.f32.bf16.bf16.f32", "sm_80"),
    ("f8E4M3FN", "f32", 32, "m16n8k32.row.col.f32.e4m3.e4m3.f32", "sm_90"),  # native fp8
    ("f8E4M3FN", "f32", 64, "m16n8k32.row.col.f32.e4m3.e4m3.f32", "sm_89"),
    ("f8E5M2", "f16", 32, "m16n8k32.row.col.f32.e5m2.e5m2.f32", "sm_90"),
    ("f8E5M2", "f32", 32, "m16n8k32.row.col.f32.e5m2.e5m2.f32", "sm_120"),
    ("f8E4M3FN", "f32", 48, WIDE, "sm_90"),  # K not a multiple of 32: widened, cvt.rn.f16x2
    ("f8E4M3FN", "f32", 32, WIDE, "sm_80"),  # no fp8 mma: decoded in software, then cvt to f16
]


@pytest.mark.parametrize("kind,acc_kind,k,form,arch", WIDER_CASES,
                         ids=[f"{c[0]}-{c[1]}-k{c[2]}-{c[4]}" for c in WIDER_CASES])
def test_narrow_accumulators_and_fp8_use_the_tensor_cores(kind, acc_kind, k, form, arch):
    m, n = 32, 16
    module = mmaf_kernel(kind, m, n, k, acc_kind=acc_kind)
    ptx = jit_compile(module, arch=arch, emit="ptx").ptx
    assert {line.split()[0] for line in ptx.splitlines() if "mma.sync" in line} == \
        {f"mma.sync.aligned.{form}"}
    a = RNG.uniform(-1, 1, (m, k)).astype(DTYPES[kind])
    b = RNG.uniform(-1, 1, (k, n)).astype(DTYPES[kind])
    c = RNG.uniform(-1, 1, (m, n)).astype(DTYPES[acc_kind])
    expected, actual = c.copy(), c.copy()
    interpret(module, None, (1,), a, b, expected)
    sim.run(module, None, (1,), a, b, actual, arch=arch)
    wide = [x.astype(np.float64) for x in (a, b, c)]
    exact = np.matmul(wide[0], wide[1]) + wide[2]
    magnitude = np.matmul(np.abs(wide[0]), np.abs(wide[1])) + np.abs(wide[2])
    # f32 sums as above, then one rounding to the accumulator type (half an ulp, relative)
    unit = {"f32": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}[acc_kind]
    bound = (k + 1) * 2.0 ** -24 * magnitude + unit * np.abs(exact) + 2.0 ** -24
    for result in (actual, expected):
        assert np.all(np.abs(result.astype(np.float64) - exact) <= bound)


def test_other_matmuls_keep_the_dot_product_loop():
    # shapes off the 16x8 grid and scaled matmuls are not given to mma.sync; the
    # f16-accumulator, fp8, i8, tf32 and f64 fixtures are
    assert "mma.sync" not in jit_compile(mmaf_kernel("f16", 8, 8, 16), arch="sm_90",
                                         emit="ptx").ptx
    for name, tensor_cores in (("matmul_operator", True), ("matmul_fp8", True),
                               ("mma_scaled_fp8", False), ("matmul_i8", True)):
        path = FIXTURES / name / f"{name}-13.5.tilebc"
        assert ("mma.sync" in jit_compile(path, arch="sm_90", emit="ptx").ptx) == tensor_cores


def test_each_element_type_gets_its_mma_shape():
    def forms(name):
        ptx = jit_compile(FIXTURES / name / f"{name}-13.5.tilebc", arch="sm_80", emit="ptx").ptx
        return {line.split()[0] for line in ptx.splitlines() if "mma.sync" in line}
    assert forms("matmul_bf16_tf32_f64") == {
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
        "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64"}
    # signed and unsigned i8 (the signedness attributes)
    assert forms("matmul_i8") == {"mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32",
                                  "mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32"}


NATIVE_FP8 = {"matmul_fp8": {"mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32",
                              "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32"},
              "la_gemm_fp8_scaled": {"mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"}}


@pytest.mark.parametrize("name", sorted(NATIVE_FP8))
def test_fp8_fixtures_take_native_mma_from_sm_89_and_link(name):
    """sm_89+ has mma.sync m16n8k32 .e4m3/.e5m2: the bytes go to the mma as they are (no cvt to
    f16); sm_80 has no fp8 mma and keeps widening to f16 for m16n8k16."""
    def forms(ptx):
        return {line.split()[0] for line in ptx.splitlines() if "mma.sync" in line}
    path = FIXTURES / name / f"{name}-13.5.tilebc"
    sm80 = jit_compile(path, arch="sm_80", emit="ptx").ptx
    assert forms(sm80) == {"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"}
    for arch in ("sm_89", "sm_90", "sm_100", "sm_120"):
        result = jit_compile(path, arch=arch, emit="cubin")
        assert forms(result.ptx) == NATIVE_FP8[name], arch
        assert not re.search(r"cvt\S*\.f16x2\.e[45]m[23]x2", result.ptx), arch
        assert result.cubin[:4] == b"\x7fELF"


FP8_EXACT_CASES = [  # kind, accumulator, m, n, k, batch, threads, arch
    ("f8E4M3FN", "f32", 32, 32, 32, 0, 128, "sm_90"),   # one K step, 2x2 warps
    ("f8E4M3FN", "f32", 64, 16, 160, 0, 64, "sm_89"),   # a K loop of 5 steps
    ("f8E5M2", "f16", 32, 24, 64, 0, 64, "sm_90"),      # odd block columns (ldmatrix .x2)
    ("f8E5M2", "bf16", 16, 16, 32, 4, 128, "sm_120"),   # batched
]


@pytest.mark.parametrize("kind,acc_kind,m,n,k,batch,threads,arch", FP8_EXACT_CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}x{c[3]}x{c[4]}-b{c[5]}-{c[7]}"
                              for c in FP8_EXACT_CASES])
def test_native_fp8_mma_matches_the_interpreter_bit_for_bit(kind, acc_kind, m, n, k, batch,
                                                            threads, arch):
    """Operands multiples of 1/4 up to 2 (integers for a narrow accumulator): every product and
    partial sum is exact in the accumulator, so the emulated native fp8 mma (its fragments,
    staging and K loop) must equal the interpreter exactly, whatever the order of the sums."""
    module = mmaf_kernel(kind, m, n, k, batch, acc_kind=acc_kind)
    ptx = jit_compile(module, arch=arch, emit="ptx", threads=threads).ptx
    assert {line.split()[0] for line in ptx.splitlines() if "mma.sync" in line} == \
        {f"mma.sync.aligned.m16n8k32.row.col.f32.{'e4m3' if kind == 'f8E4M3FN' else 'e5m2'}"
         f".{'e4m3' if kind == 'f8E4M3FN' else 'e5m2'}.f32"}
    lead = (batch,) if batch else ()
    step = 4 if acc_kind == "f32" else 1
    a = (RNG.integers(-2 * step, 2 * step + 1, lead + (m, k)) / step).astype(DTYPES[kind])
    b = (RNG.integers(-2 * step, 2 * step + 1, lead + (k, n)) / step).astype(DTYPES[kind])
    c = (RNG.integers(-64, 65, lead + (m, n)) / step ** 2).astype(DTYPES[acc_kind])
    expected, actual = c.copy(), c.copy()
    interpret(module, None, (1,), a, b, expected)
    sim.run(module, None, (1,), a, b, actual, arch=arch, threads=threads)
    exact = np.matmul(a.astype(np.float64), b.astype(np.float64)) + c.astype(np.float64)
    np.testing.assert_array_equal(expected.astype(np.float64), exact)
    np.testing.assert_array_equal(actual.view(np.uint8), expected.view(np.uint8))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_tensor_core_path_assembles(arch):
    result = jit_compile(mmaf_kernel("bf16", 32, 32, 32, 2), arch=arch, emit="cubin")
    assert result.cubin[:4] == b"\x7fELF"
    for name in ("matmul_bf16_tf32_f64", "matmul_i8"):  # tf32, f64, s8/u8 forms and ldmatrix
        path = FIXTURES / name / f"{name}-13.5.tilebc"
        assert jit_compile(path, arch=arch, emit="cubin").cubin[:4] == b"\x7fELF"


# ------------------------------------------------------------- the mma accumulator layout

@pytest.mark.parametrize("batches,m,n,threads,grid,height", [
    (1, 32, 32, 128, (1, 2, 2), 16), (1, 64, 16, 64, (1, 2, 1), 16),
    (2, 16, 16, 128, (2, 1, 2), 16), (1, 16, 8, 32, (1, 1, 1), 16),
    (1, 16, 16, 128, (1, 1, 2), 16), (1, 16, 16, 64, (1, 2, 1), 8)])
def test_mma_accumulator_layout_is_the_c_fragment_tiled_over_warps(batches, m, n, threads, grid,
                                                                   height):
    from tilebc_runtime.lowering.layout import MmaAcc
    layout = MmaAcc(batches, m, n, threads, grid, height)  # height 8: m8n8 (f64) blocks
    table = layout.table(threads)
    wb, wm, wn = grid
    copies = threads // 32 // (wb * wm * wn)  # warps beyond the grid repeat it
    assert table.shape == (batches * m * n * copies // threads, threads)
    assert sorted(table.ravel().tolist()) == sorted(list(range(batches * m * n)) * copies)
    for thread in range(threads):
        warp, lane = divmod(thread, 32)
        warp %= wb * wm * wn
        pb, pm, pn = warp // (wm * wn), warp // wn % wm, warp % wn
        for k in range(layout.slots):
            block, i = divmod(k, height // 4)
            jb, rest = divmod(block, layout.per_warp[1] * layout.per_warp[2])
            jm, jn = divmod(rest, layout.per_warp[2])
            row, col = c_position(lane, i)  # the ISA's formula
            batch, row = jb * wb + pb, (jm * wm + pm) * height + row
            col += (jn * wn + pn) * 8
            assert table[k, thread] == (batch * m + row) * n + col


def test_mma_accumulator_layout_needs_a_grid_that_divides_blocks_and_warps():
    from tilebc_runtime.lowering.layout import MmaAcc
    with pytest.raises(ValueError):
        MmaAcc(1, 32, 32, 128, (1, 4, 1))  # two block rows over four warps
    with pytest.raises(ValueError):
        MmaAcc(1, 32, 32, 128, (1, 1, 3))  # a three-warp grid does not divide four warps


def _loop_body(ptx: str) -> str:
    start = ptx.index("$L_for")
    return ptx[start:ptx.index("$L_latch", start)]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_loop_carried_accumulator_stays_in_fragments(arch):
    # matmul_f16: a K loop carrying a 32x32 f32 accumulator through one mmaf per iteration
    path = FIXTURES / "matmul_f16" / "matmul_f16-13.5.tilebc"
    body = _loop_body(jit_compile(path, arch=arch, emit="ptx").ptx)
    assert body.count("mma.sync.aligned.m16n8k16") >= 1
    # nothing f32 goes through shared memory in the loop: the product is added in the mma's C
    # fragment and the accumulator is never exchanged back to the default distribution
    assert "st.shared.f32" not in body and "ld.shared.f32" not in body
    assert body.count("bar.sync") == 2  # operands staged, then released
    # fragments by ldmatrix (B transposed), no scalar shared loads
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in body
    assert ".trans.shared.b16" in body and "ld.shared" not in body


def test_epilogue_stays_in_the_accumulator_layout():
    # la_gemm_bias_relu: the loop's accumulator + a broadcast bias row, relu, cast to f16, store;
    # the bias is rebuilt in the accumulator layout (a shuffle per slot from its 32 elements)
    # instead of the accumulator going through shared memory to the default distribution
    path = FIXTURES / "la_gemm_bias_relu" / "la_gemm_bias_relu-13.5.tilebc"
    ptx = jit_compile(path, arch="sm_80", emit="ptx").ptx
    epilogue = ptx[ptx.index("\n$L_endfor"):]
    assert "bar.sync" not in epilogue and "st.shared" not in epilogue


def _aligned_mmaf_kernel(m, n, k):
    """c = a @ b + c over a grid of tiles; c's view is promised 16-byte aligned with a row
    stride a multiple of 4 (assume div_by), so its stores may be vectors."""
    from tilebc.ir.attrs import DivByAttr
    module = new_module("13.5")
    f16 = ELEMENT_TYPES["f16"]
    params = []
    for pointee in (f16, f16, f32):
        params += [scalar(PointerType(pointee))] + [scalar(i32)] * 4  # shape, strides
    b = new_function(module, "k", params)
    token = b.make_token()
    bid = b.get_tile_block_id()
    zero = b.constant(0, "i32")

    def view(group, shape, aligned):
        pointer, rows, cols, stride, _ = b.args[5 * group:5 * group + 5]
        if aligned:
            pointer = b.assume(pointer, predicate=DivByAttr(16))
            stride = b.assume(stride, predicate=DivByAttr(4))
        return b.partition_view(b.tensor_view(pointer, [rows, cols], [stride, 1]), shape)
    lhs, _ = b.load(view(0, (m, k), False), [bid[0], zero], token=token)
    rhs, _ = b.load(view(1, (k, n), False), [zero, bid[1]], token=token)
    out = view(2, (m, n), True)
    acc, _ = b.load(out, [bid[0], bid[1]], token=token)
    product = b.mmaf(lhs, rhs, acc, result_types=[TileType((m, n), f32)])
    b.store(product, out, [bid[0], bid[1]], token=token)
    b.return_([])
    return module


def _async_operands_kernel(m, n, k, align):
    """c = a @ b + c over a grid of tiles, with a's and b's base pointers promised `align`-byte
    aligned and their row strides and column counts multiples of align / 2 elements (f16)."""
    module = new_module("13.5")
    b, views = _aligned_gemm_views(module, "f16", m, n, k, align=align)
    token = b.make_token()
    bid = b.get_tile_block_id()
    zero = b.constant(0, "i32")
    a_view, b_view, out = views
    lhs, _ = b.load(a_view, [bid[0], zero], token=token)
    rhs, _ = b.load(b_view, [zero, bid[1]], token=token)
    acc, _ = b.load(out, [bid[0], bid[1]], token=token)
    product = b.mmaf(lhs, rhs, acc, result_types=[TileType((m, n), f32)])
    b.store(product, out, [bid[0], bid[1]], token=token)
    b.return_([])
    return module


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("align,copy", [(16, "cp.async.cg.shared.global"),
                                        (4, "cp.async.ca.shared.global")])
def test_aligned_operands_go_to_shared_through_cp_async(arch, align, copy):
    m, n, k = 32, 32, 32
    module = _async_operands_kernel(m, n, k, align)
    ptx = jit_compile(module, entry="k", arch=arch, emit="ptx", threads=128).ptx
    assert copy in ptx and "cp.async.wait_group 0" in ptx
    assert "st.shared.b16" not in ptx  # neither operand is staged through registers
    rows, cols = 45, 48  # tiles past both ends: their runs read nothing and land as zeros
    a = RNG.uniform(-1, 1, (rows, 40)).astype(np.float16)[:, :k]  # row stride 40
    b = RNG.uniform(-1, 1, (k, 56)).astype(np.float16)[:, :cols]
    c = RNG.uniform(-1, 1, (rows, cols)).astype(np.float32)
    grid = (-(-rows // m), -(-cols // n))
    expected, actual = c.copy(), c.copy()
    interpret(module, "k", grid, a, b, expected)
    sim.run(module, "k", grid, a, b, actual, arch=arch, threads=128)
    exact = a.astype(np.float64) @ b.astype(np.float64) + c
    bound = (k + 1) * 2.0 ** -24 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
                                    + np.abs(c))
    assert np.all(np.abs(actual - exact) <= bound) and np.all(np.abs(expected - exact) <= bound)


def test_i8_lhs_goes_through_cp_async_and_transposed_rhs_through_registers():
    from tilebc.ir.attrs import DivByAttr
    from tilebc.ops.enums import Signedness
    m, n, k = 32, 32, 64
    module = new_module("13.5")
    b, views = _aligned_gemm_views(module, "i8", m, n, k)
    token = b.make_token()
    bid = b.get_tile_block_id()
    zero = b.constant(0, "i32")
    a_view, b_view, out = views
    lhs, _ = b.load(a_view, [bid[0], zero], token=token)
    rhs, _ = b.load(b_view, [zero, bid[1]], token=token)
    acc, _ = b.load(out, [bid[0], bid[1]], token=token)
    product = b.mmai(lhs, rhs, acc, result_types=[TileType((m, n), i32)],
                     signedness_lhs=Signedness.SIGNED, signedness_rhs=Signedness.SIGNED)
    b.store(product, out, [bid[0], bid[1]], token=token)
    b.return_([])
    ptx = jit_compile(module, entry="k", arch="sm_80", emit="ptx", threads=128).ptx
    assert ptx.count("cp.async.cg.shared.global") == 1  # A only: B is staged transposed
    rows, cols = 45, 48
    a = RNG.integers(-128, 128, (rows, k)).astype(np.int8)
    bb = RNG.integers(-128, 128, (k, 64)).astype(np.int8)[:, :cols]
    c = RNG.integers(-1000, 1000, (rows, cols)).astype(np.int32)
    grid = (-(-rows // m), -(-cols // n))
    expected, actual = c.copy(), c.copy()
    interpret(module, "k", grid, a, bb, expected)
    sim.run(module, "k", grid, a, bb, actual, arch="sm_80", threads=128)
    assert np.array_equal(expected, a.astype(np.int64) @ bb.astype(np.int64) + c)
    assert np.array_equal(actual, expected)


def _async_k_loop_kernel(m, n, k, steps, store_between):
    """c = a @ b + c with a `for` over `steps` K tiles whose loads feed the mma, a's and b's
    views 16-byte aligned; with `store_between`, the loop stores the acc to c between the
    loads and the mma (the loads must then stay where they are)."""
    from tilebc.ir.attrs import DivByAttr
    module = new_module("13.5")
    b, views = _aligned_gemm_views(module, "f16", m, n, k)
    token = b.make_token()
    bid = b.get_tile_block_id()
    zero, one = b.constant(0, "i32"), b.constant(1, "i32")
    count = b.constant(steps, "i32")
    a_view, b_view, out = views
    acc0, _ = b.load(out, [bid[0], bid[1]], token=token)

    def body(lb, i, acc):
        lhs, _ = lb.load(a_view, [bid[0], i], token=token)
        rhs, _ = lb.load(b_view, [i, bid[1]], token=token)
        if store_between:
            lb.store(acc, out, [bid[0], bid[1]], token=token)
        return [lb.mmaf(lhs, rhs, acc, result_types=[TileType((m, n), f32)])]
    product = b.for_(zero, count, one, [acc0], body)
    b.store(product, out, [bid[0], bid[1]], token=token)
    b.return_([])
    return module


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("store_between", [False, True])
def test_k_loop_operands_through_cp_async(arch, store_between):
    m, n, k, steps = 32, 32, 32, 3
    module = _async_k_loop_kernel(m, n, k, steps, store_between)
    ptx = jit_compile(module, entry="k", arch=arch, emit="ptx", threads=128).ptx
    assert ("cp.async.cg" in ptx) != store_between  # a store between keeps the load in place
    rows, cols = 45, 48
    a = RNG.uniform(-1, 1, (rows, k * steps)).astype(np.float16)
    b = RNG.uniform(-1, 1, (k * steps, cols)).astype(np.float16)
    c = RNG.uniform(-1, 1, (rows, cols)).astype(np.float32)
    grid = (-(-rows // m), -(-cols // n))
    expected, actual = c.copy(), c.copy()
    interpret(module, "k", grid, a, b, expected)
    sim.run(module, "k", grid, a, b, actual, arch=arch, threads=128)
    magnitude = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) + np.abs(c)
    bound = (k * steps + steps) * 2.0 ** -24 * magnitude
    assert np.all(np.abs(actual - expected) <= 2 * bound)


def _aligned_gemm_views(module, element, m, n, k, loop_counts=0, align=16):
    """Function "k" of `module` over (a, b, c) arrays, each a pointer and 4 i32 (rows, cols,
    row stride, unused), then `loop_counts` i32 scalars; a's and b's views proven `align`-byte
    aligned with cols and stride multiples of `align` bytes (what cp.async staging needs).
    Returns the builder and the [m, k], [k, n], [m, n] partition views."""
    from tilebc.ir.attrs import DivByAttr
    operand = ELEMENT_TYPES[element]
    run = align // (2 if element == "f16" else 1)  # elements in `align` bytes
    params = []
    for pointee in (operand, operand, i32 if element == "i8" else f32):
        params += [scalar(PointerType(pointee))] + [scalar(i32)] * 4
    b = new_function(module, "k", params + [scalar(i32)] * loop_counts)

    def view(group, shape):
        pointer, rows, cols, stride, _ = b.args[5 * group:5 * group + 5]
        if group < 2:
            pointer = b.assume(pointer, predicate=DivByAttr(align))
            cols = b.assume(cols, predicate=DivByAttr(run))
            stride = b.assume(stride, predicate=DivByAttr(run))
        return b.partition_view(b.tensor_view(pointer, [rows, cols], [stride, 1]), shape)
    return b, (view(0, (m, k)), view(1, (k, n)), view(2, (m, n)))


def _pipelined_k_loop_kernel(m, n, k, zero_acc=False, element="f16", lower=0):
    """c = a @ b + c (`zero_acc`: c = a @ b, c first read after the loop) with a `for` over a
    runtime count of K tiles (the cuTile GEMM shape: both loads index the tile with the
    induction variable), views 16-byte aligned; f16 (mmaf, f32 c) or i8 (mmai, i32 c)."""
    from tilebc.ops.enums import Signedness
    module = new_module("13.5")
    b, (a_view, b_view, out) = _aligned_gemm_views(module, element, m, n, k, loop_counts=1)
    token = b.make_token()
    bid = b.get_tile_block_id()
    zero, one = b.constant(0, "i32"), b.constant(1, "i32")
    if zero_acc:
        acc0 = b.constant(0.0, "f32", (m, n))
    else:
        acc0, _ = b.load(out, [bid[0], bid[1]], token=token)

    def body(lb, i, acc):
        lhs, _ = lb.load(a_view, [bid[0], i], token=token)
        rhs, _ = lb.load(b_view, [i, bid[1]], token=token)
        if element == "i8":
            return [lb.mmai(lhs, rhs, acc, result_types=[TileType((m, n), i32)],
                            signedness_lhs=Signedness.SIGNED,
                            signedness_rhs=Signedness.SIGNED)]
        return [lb.mmaf(lhs, rhs, acc, result_types=[TileType((m, n), f32)])]
    product = b.for_(b.constant(lower, "i32") if lower else zero, b.args[15], one, [acc0], body)
    b.store(product, out, [bid[0], bid[1]], token=token)
    b.return_([])
    return module


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("m,n,k,stages", [(32, 32, 32, 3), (64, 64, 32, 2)])
@pytest.mark.parametrize("trips", [0, 1, 2, 5])
def test_k_loop_copies_run_stages_ahead(arch, m, n, k, stages, trips):
    """The K loop's operands are copied S-1 iterations ahead into S rotating stages (three where
    they fit in 24 KiB, else two): a prologue of S-1 commit groups, one wait for
    all but the newest S-2 groups and one issue per iteration, a drain after the loop. On the
    emulator copies land only at their wait, so a stage read early or overwritten while read
    shows in the results; K is ragged (the last tile's tail and the iterations past the bound
    copy zeros), as are M and N."""
    module = _pipelined_k_loop_kernel(m, n, k)
    ptx = jit_compile(module, entry="k", arch=arch, emit="ptx", threads=128, wgmma=False).ptx
    assert "wgmma.mma_async" not in ptx
    head, end = (re.search(rf"^\$L_{label}_\d+:", ptx, re.M).start()
                 for label in ("for", "endfor"))
    prologue, loop = ptx[:head], ptx[head:end]
    assert prologue.count("cp.async.commit_group") == stages - 1
    assert loop.count("cp.async.commit_group") == 1
    assert loop.count("cp.async.wait_group") == 1
    assert f"cp.async.wait_group {stages - 2};" in loop and "st.shared" not in loop
    assert loop.count("bar.sync") == 1
    kk = max(k * trips - 8, 0)  # a's runs of 8 columns are in or out as a whole
    rows, cols = m + 13, 2 * n - 8
    a = RNG.uniform(-1, 1, (rows, kk + 8)).astype(np.float16)[:, :kk]  # row stride kk + 8
    b = RNG.uniform(-1, 1, (kk, cols + 8)).astype(np.float16)[:, :cols]
    c = RNG.uniform(-1, 1, (rows, cols)).astype(np.float32)
    grid = (-(-rows // m), -(-cols // n))
    expected, actual = c.copy(), c.copy()
    interpret(module, "k", grid, a, b, expected, np.int32(trips))
    sim.run(module, "k", grid, a, b, actual, np.int32(trips), arch=arch, threads=128)
    exact = a.astype(np.float64) @ b.astype(np.float64) + c
    magnitude = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) + np.abs(c)
    bound = (kk + trips + 1) * 2.0 ** -24 * magnitude
    assert np.all(np.abs(expected - exact) <= bound)
    assert np.all(np.abs(actual - exact) <= bound)


def _check_ragged_k_loop(module, m, n, kk, trips, rows, wgmma, tma=None):
    """Run `_pipelined_k_loop_kernel`'s "k" on the sm_90 emulator over ragged M (`rows`), N and K
    (`kk`, strided views of wider arrays) and compare it with the interpreter and numpy."""
    cols = 2 * n - 8
    a = _quarters(np.float16, (rows, kk + 8))[:, :kk]
    b = _quarters(np.float16, (kk, cols + 8))[:, :cols]
    c = _quarters(np.float32, (rows, cols))
    grid = (-(-rows // m), -(-cols // n))
    expected, actual = c.copy(), c.copy()
    interpret(module, "k", grid, a, b, expected, np.int32(trips))
    sim.run(module, "k", grid, a, b, actual, np.int32(trips), arch="sm_90", threads=128,
            wgmma=wgmma, tma=tma)
    np.testing.assert_array_equal(actual, expected)
    np.testing.assert_array_equal(expected, a.astype(np.float64) @ b.astype(np.float64) + c)


@pytest.mark.parametrize("trips", [1, 3])
def test_production_size_k_loop_stages_go_to_dynamic_shared_memory(trips):
    """64x128x64 f16 tiles: a stage (26 KiB padded) is over the 24 KiB the small pipelines keep
    to, so on sm_90 two stages take a quarter of the CTA's opt-in shared memory (dynamic): the
    copies of the next K tile overlap this one's mma's, one barrier per iteration. sm_86 (99 KiB
    a CTA) has no room for them and keeps the unpipelined loop."""
    m, n, k = 64, 128, 64
    module = _pipelined_k_loop_kernel(m, n, k)
    ptx = jit_compile(module, entry="k", arch="sm_90", emit="ptx", threads=128, wgmma=False).ptx
    head, end = (re.search(rf"^\$L_{label}_\d+:", ptx, re.M).start()
                 for label in ("for", "endfor"))
    loop = ptx[head:end]
    assert ".extern .shared" in ptx
    assert ptx[:head].count("cp.async.commit_group") == 1
    assert loop.count("cp.async.commit_group") == 1 and "cp.async.wait_group 0;" in loop
    assert loop.count("bar.sync") == 1
    assert len(set(re.findall(r"cp\.async\.cg\.shared\.global \[(%r\d+)\+", loop))) == 2
    other = jit_compile(module, entry="k", arch="sm_86", emit="ptx", threads=128).ptx
    head = re.search(r"^\$L_for_\d+:", other, re.M).start()
    assert "cp.async.commit_group" not in other[:head] and ".extern .shared" not in other
    _check_ragged_k_loop(module, m, n, max(k * trips - 8, 0), trips, m + 5, wgmma=False)


def test_k_loop_copies_ahead_stop_where_the_induction_variable_would_wrap():
    """A loop ending at INT32_MAX: the copies two iterations ahead index tile 2**31 + 1, which
    wraps negative; the copies' bounds checks must still read it as outside (zero fill, no
    access), so the pipeline needs no overflow guard of its own."""
    m, n, k = 32, 32, 32
    top = 2 ** 31 - 1
    module = _pipelined_k_loop_kernel(m, n, k, lower=top - 2)
    a = RNG.uniform(-1, 1, (m, k)).astype(np.float16)
    b = RNG.uniform(-1, 1, (k, n)).astype(np.float16)
    c = RNG.uniform(-1, 1, (m, n)).astype(np.float32)
    expected, actual = c.copy(), c.copy()
    interpret(module, "k", (1, 1), a, b, expected, np.int32(top))
    sim.run(module, "k", (1, 1), a, b, actual, np.int32(top), arch="sm_80", threads=128)
    np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("trips", [0, 3])
def test_k_loop_prologue_computes_nothing_later_code_reuses(trips):
    """The prologue's copies are skipped when the loop runs fewer iterations than it stages:
    index arithmetic first computed there (the tile row of a and of c) is not reused by the
    store after the loop."""
    m, n, k = 32, 32, 32
    module = _pipelined_k_loop_kernel(m, n, k, zero_acc=True)
    ptx = jit_compile(module, entry="k", arch="sm_80", emit="ptx", threads=128).ptx
    assert ptx.count("cp.async.commit_group") == 3
    kk = k * trips
    rows, cols = 3 * m - 5, 2 * n - 8  # the last tiles' stores are masked by those checks
    a = RNG.uniform(-1, 1, (rows, kk + 8)).astype(np.float16)[:, :kk]
    b = RNG.uniform(-1, 1, (kk, cols + 8)).astype(np.float16)[:, :cols]
    expected, actual = np.full((rows, cols), 5, np.float32), np.full((rows, cols), 5, np.float32)
    grid = (-(-rows // m), -(-cols // n))
    interpret(module, "k", grid, a, b, expected, np.int32(trips))
    sim.run(module, "k", grid, a, b, actual, np.int32(trips), arch="sm_80", threads=128)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    bound = (kk + 1) * 2.0 ** -24 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    assert np.all(np.abs(expected - exact) <= bound)
    assert np.all(np.abs(actual - exact) <= bound)


@pytest.mark.parametrize("trips", [0, 1, 4])
def test_k_loop_pipeline_with_one_operand_through_registers(trips):
    """i8: A is copied ahead, B (staged transposed, which cp.async cannot do) goes through
    registers each iteration above the stages, behind its own barrier."""
    m, n, k = 32, 32, 64
    module = _pipelined_k_loop_kernel(m, n, k, element="i8")
    ptx = jit_compile(module, entry="k", arch="sm_80", emit="ptx", threads=128).ptx
    head, end = (re.search(rf"^\$L_{label}_\d+:", ptx, re.M).start()
                 for label in ("for", "endfor"))
    loop = ptx[head:end]
    assert ptx[:head].count("cp.async.commit_group") == 2
    assert loop.count("cp.async.cg.shared.global") == 1 and "st.shared.u8" in loop
    assert loop.count("cp.async.wait_group") == 1 and "cp.async.wait_group 1;" in loop
    kk = max(k * trips - 16, 0)
    rows, cols = 2 * m - 3, 2 * n
    a = RNG.integers(-128, 128, (rows, kk + 16)).astype(np.int8)[:, :kk]
    bb = RNG.integers(-128, 128, (kk, cols + 16)).astype(np.int8)[:, :cols]
    c = RNG.integers(-1000, 1000, (rows, cols)).astype(np.int32)
    grid = (-(-rows // m), -(-cols // n))
    expected, actual = c.copy(), c.copy()
    interpret(module, "k", grid, a, bb, expected, np.int32(trips))
    sim.run(module, "k", grid, a, bb, actual, np.int32(trips), arch="sm_80", threads=128)
    assert np.array_equal(expected, a.astype(np.int64) @ bb.astype(np.int64) + c)
    assert np.array_equal(actual, expected)


@pytest.mark.parametrize("kind,arch", [("f8E4M3FN", "sm_90"), ("f8E5M2", "sm_89")])
@pytest.mark.parametrize("trips", [0, 1, 3])
def test_native_fp8_k_loop_copies_a_ahead_and_matches_the_interpreter(kind, arch, trips):
    """Native fp8 (bytes staged as they are, like i8): A is copied ahead by cp.async, B goes
    through registers (staged transposed); on exact data (multiples of 1/4 up to 2) the emulator
    equals the interpreter bit for bit. sm_80 widens fp8 to f16 in registers: no cp.async."""
    m, n, k = 32, 32, 64
    module = _pipelined_k_loop_kernel(m, n, k, element=kind)
    assert "cp.async" not in jit_compile(module, entry="k", arch="sm_80", emit="ptx",
                                         threads=128).ptx
    ptx = jit_compile(module, entry="k", arch=arch, emit="ptx", threads=128).ptx
    head, end = (re.search(rf"^\$L_{label}_\d+:", ptx, re.M).start()
                 for label in ("for", "endfor"))
    loop = ptx[head:end]
    assert ptx[:head].count("cp.async.commit_group") == 2
    assert loop.count("cp.async.cg.shared.global") == 1 and "st.shared.u8" in loop
    assert "mma.sync.aligned.m16n8k32.row.col.f32.e" in loop and "cvt" not in loop
    kk = max(k * trips - 16, 0)
    rows, cols = 2 * m - 3, 2 * n
    a = (RNG.integers(-8, 9, (rows, kk + 16)) / 4).astype(DTYPES[kind])[:, :kk]
    bb = (RNG.integers(-8, 9, (kk, cols + 16)) / 4).astype(DTYPES[kind])[:, :cols]
    c = (RNG.integers(-64, 65, (rows, cols)) / 16).astype(np.float32)
    grid = (-(-rows // m), -(-cols // n))
    expected, actual = c.copy(), c.copy()
    interpret(module, "k", grid, a, bb, expected, np.int32(trips))
    sim.run(module, "k", grid, a, bb, actual, np.int32(trips), arch=arch, threads=128)
    assert np.array_equal(expected, a.astype(np.float64) @ bb.astype(np.float64) + c)
    assert np.array_equal(actual.view(np.uint32), expected.view(np.uint32))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_100", "sm_120"])
def test_pipelined_k_loops_link(arch):
    from tilebc_runtime.lowering.ptx import check_subset
    native_fp8 = [] if arch == "sm_80" else [("f8E4M3FN", (32, 32, 64))]  # A by cp.async
    for element, (m, n, k) in [("f16", (32, 32, 32)), ("f16", (64, 64, 32)),
                               ("i8", (32, 32, 64))] + native_fp8:
        result = jit_compile(_pipelined_k_loop_kernel(m, n, k, element=element), entry="k",
                             arch=arch, emit="cubin", threads=128)
        assert result.cubin[:4] == b"\x7fELF"
        assert "cp.async.wait_group" in result.ptx
        assert check_subset(result.ptx) == ()


def test_k_loop_pipeline_inside_a_persistent_loop():
    """A persistent-GEMM shape: an outer loop over c's column tiles holds the K loop and the
    store; each outer iteration drains its stages and the next one fills them again."""
    m, n, k = 32, 32, 32
    module = new_module("13.5")
    b, (a_view, b_view, out) = _aligned_gemm_views(module, "f16", m, n, k, loop_counts=2)
    token = b.make_token()
    bid = b.get_tile_block_id()
    zero, one = b.constant(0, "i32"), b.constant(1, "i32")

    def tile(ob, j, done):
        acc0, _ = ob.load(out, [bid[0], j], token=token)

        def body(lb, i, acc):
            lhs, _ = lb.load(a_view, [bid[0], i], token=token)
            rhs, _ = lb.load(b_view, [i, j], token=token)
            return [lb.mmaf(lhs, rhs, acc, result_types=[TileType((m, n), f32)])]
        product = ob.for_(zero, b.args[15], one, [acc0], body)
        ob.store(product, out, [bid[0], j], token=token)
        return [done]
    b.for_(zero, b.args[16], one, [zero], tile)
    b.return_([])
    ptx = jit_compile(module, entry="k", arch="sm_80", emit="ptx", threads=128).ptx
    assert ptx.count("cp.async.commit_group") == 3 and "cp.async.wait_group 1;" in ptx
    trips, kk = 4, 4 * k - 8
    rows, cols = 2 * m - 3, 3 * n
    a = RNG.uniform(-1, 1, (rows, kk)).astype(np.float16)
    bb = RNG.uniform(-1, 1, (kk, cols)).astype(np.float16)
    c = RNG.uniform(-1, 1, (rows, cols)).astype(np.float32)
    grid = (-(-rows // m), 1)
    expected, actual = c.copy(), c.copy()
    interpret(module, "k", grid, a, bb, expected, np.int32(trips), np.int32(cols // n))
    sim.run(module, "k", grid, a, bb, actual, np.int32(trips), np.int32(cols // n),
            arch="sm_80", threads=128)
    exact = a.astype(np.float64) @ bb.astype(np.float64) + c
    bound = (kk + trips + 1) * 2.0 ** -24 * (
        np.abs(a.astype(np.float64)) @ np.abs(bb.astype(np.float64)) + np.abs(c))
    assert np.all(np.abs(expected - exact) <= bound)
    assert np.all(np.abs(actual - exact) <= bound)


def test_unaligned_operands_keep_register_staging():
    ptx = jit_compile(_async_operands_kernel(32, 32, 32, 2), entry="k", arch="sm_80",
                      emit="ptx", threads=128).ptx
    assert "cp.async" not in ptx and "st.shared.b16" in ptx  # 2-byte runs: below cp.async's 4


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_accumulator_stores_pairs_as_vectors(arch):
    m, n, k = 32, 32, 32
    module = _aligned_mmaf_kernel(m, n, k)
    ptx = jit_compile(module, entry="k", arch=arch, emit="ptx", threads=128).ptx
    assert "st.global.v2.f32" in ptx and "st.global.f32" in ptx  # pairs crossing the end: tails
    rows, cols = 45, 50  # ragged: tiles past both ends
    pitch = 52  # a row stride that keeps the div_by 4 promise
    a = RNG.uniform(-1, 1, (rows, k)).astype(np.float16)
    b = RNG.uniform(-1, 1, (k, cols)).astype(np.float16)
    c = RNG.uniform(-1, 1, (rows, pitch)).astype(np.float32)[:, :cols]
    grid = (-(-rows // m), -(-cols // n))
    # strided like c (a copy would be contiguous: pitch 50); the padding columns NaN, which no
    # store may touch
    padded = [np.full((rows, pitch), np.nan, np.float32) for _ in range(2)]
    expected, actual = (whole[:, :cols] for whole in padded)
    expected[...], actual[...] = c, c
    interpret(module, "k", grid, a, b, expected)
    sim.run(module, "k", grid, a, b, actual, arch=arch, threads=128)
    exact = a.astype(np.float64) @ b.astype(np.float64) + c
    bound = (k + 1) * 2.0 ** -24 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
                                    + np.abs(c))
    assert np.all(np.abs(actual - exact) <= bound) and np.all(np.abs(expected - exact) <= bound)
    assert all(np.isnan(whole[:, cols:]).all() for whole in padded)


def test_copies_of_an_accumulator_are_stored_once():
    # 16x16: two 16x8 blocks, so 2 of 4 warps form the grid and the other 2 hold copies; only
    # the grid's warps (threads below 64) store
    module = mmaf_kernel("f16", 16, 16, 16)
    ptx = jit_compile(module, arch="sm_80", emit="ptx", threads=128).ptx
    stores = [line for line in ptx.splitlines() if "st.global" in line]
    assert len(stores) == 4  # one per accumulator slot
    lines = [line.strip().rstrip(";") for line in ptx.splitlines()]
    owner = {line.split()[1].rstrip(",") for line in lines
             if line.startswith("setp.lt.u32") and line.endswith(", 64")}
    defs = {line.split()[1].rstrip(","): line for line in lines if line.startswith("and.pred")}
    for store in stores:  # "@%pN st.global...": %pN = owner and in-bounds
        guard = store.split()[0].lstrip("@")
        assert guard in defs and owner & set(defs[guard].replace(",", " ").split()[2:]), store
    a = RNG.uniform(-1, 1, (16, 16)).astype(np.float16)
    b = RNG.uniform(-1, 1, (16, 16)).astype(np.float16)
    c = RNG.uniform(-1, 1, (16, 16)).astype(np.float32)
    expected, actual = c.copy(), c.copy()
    interpret(module, None, (1,), a, b, expected)
    sim.run(module, None, (1,), a, b, actual, arch="sm_80", threads=128)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


def test_reduced_products_take_the_direct_path_to_cyclic():
    # row maxima of a @ b (attention's scores): the product lands in Cyclic through shared
    # memory (no ldmatrix path, whose layout would need its own exchange before the reduction)
    module = new_module("13.5")
    f16 = ELEMENT_TYPES["f16"]
    b = new_function(module, "k", [scalar(PointerType(f16))] + [scalar(i32)] * 4
                     + [scalar(PointerType(f16))] + [scalar(i32)] * 4
                     + [scalar(PointerType(f32))] + [scalar(i32)] * 2)
    token = b.make_token()
    zero = b.constant(0, "i32")
    args = b.args
    tiles = [b.partition_view(b.tensor_view(args[5 * g], args[5 * g + 1:5 * g + 3],
                                            args[5 * g + 3:5 * g + 5]), (32, 32))
             for g in range(2)]
    out = b.partition_view(b.tensor_view(args[10], args[11:12], args[12:13]), (32,))
    lhs, _ = b.load(tiles[0], [zero, zero], token=token)
    rhs, _ = b.load(tiles[1], [zero, zero], token=token)
    scores = b.mmaf(lhs, rhs, b.constant(0.0, "f32", (32, 32)),
                    result_types=[TileType((32, 32), f32)])
    top = b.reduce([scores], 1, [float("-inf")], lambda inner, x, y: [inner.maxf(x, y)])
    b.store(top, out, [zero], token=token)
    b.return_([])
    ptx = jit_compile(module, arch="sm_80", emit="ptx", threads=128).ptx
    assert "mma.sync" in ptx and "ldmatrix" not in ptx
    a = RNG.uniform(-1, 1, (32, 32)).astype(np.float16)
    w = RNG.uniform(-1, 1, (32, 32)).astype(np.float16)
    expected, actual = np.zeros(32, np.float32), np.zeros(32, np.float32)
    interpret(module, "k", (1,), a, w, expected)
    sim.run(module, "k", (1,), a, w, actual, arch="sm_80", threads=128)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)

# ------------------------------------------------- register and shared-memory traffic shapes

def _case_ptx(name, arch="sm_80", **options):
    """The PTX of every kernel launch of fixture / family case `name` (not run)."""
    import importlib
    import sys
    sys.path.insert(0, str(FIXTURES.parents[1] / "tests"))
    from fixture_cases import CASE_MODULES
    from tilebc.interp.api import find_entry
    from tilebc_runtime.sim.runner import load_any
    for family in CASE_MODULES:
        reference = importlib.import_module(family)
        if name not in reference.CASES:
            continue
        found = []

        def record(module_or_path, entry, grid, *args, **kwargs):
            module = load_any(module_or_path)
            found.append(jit_compile(module, entry=find_entry(module, entry).name, arch=arch,
                                     emit="ptx", **options).ptx)
            raise _Stop
        saved = reference.run
        reference.run = record
        try:
            reference.CASES[name](reference.module(name, reference.versions(name)[-1]))
        except _Stop:
            pass
        finally:
            reference.run = saved
        return found
    raise KeyError(name)


class _Stop(Exception):
    """Ends a case after its first launch was compiled."""


def test_online_softmax_accumulator_stays_in_fragments():
    # acc = mma(p, v, acc * alpha): the carried accumulator is scaled in the mma layout, so the
    # loop's continue carries the mma result as it is (no exchange through shared memory)
    [ptx] = _case_ptx("nn_flash_attention")
    lines = ptx.splitlines()
    latch = next(i for i, line in enumerate(lines) if line.startswith("$L_latch"))
    last_mma = max(i for i in range(latch) if "mma.sync" in lines[i])
    assert not any("st.shared" in line for line in lines[last_mma:latch])


def test_transposed_b_is_staged_from_its_source():
    # B = transpose(load): the loaded N x K tile is staged as it is and read with ldmatrix
    # without .trans; the transpose itself moves nothing
    [ptx] = _case_ptx("la_bmm_transposed_b")
    loads = [line for line in ptx.splitlines() if "ldmatrix" in line]
    assert loads and not any(".trans" in line for line in loads)
    loop = ptx[ptx.index("\n$L_for"):ptx.index("\n$L_endfor")]
    assert loop.count("bar.sync") == 2  # operands staged; shared memory free again


def test_f64_fragments_of_two_k_steps_come_in_one_load():
    ptx = jit_compile(FIXTURES / "matmul_bf16_tf32_f64" / "matmul_bf16_tf32_f64-13.5.tilebc",
                      arch="sm_80", emit="ptx").ptx
    assert "ld.shared.v2.f64" in ptx and "ld.shared.f64 " not in ptx


def test_dot_product_slots_share_one_k_loop():
    # f32 mmaf with K off the register tiles' steps of 4: one K loop for all of a thread's slots
    ptx = jit_compile(mmaf_kernel("f32", 16, 16, 6), arch="sm_90", emit="ptx").ptx
    assert ptx.count("$L_dot") == 2  # its label and its branch
    assert "blocked_done" not in ptx


def test_f32_mmaf_of_sci_matrix_power_is_one_warp_of_register_tiles():
    # [16, 16] x [16, 16]: one warp of 4 x 2 accumulator tiles, K unrolled; per K step of 4 a
    # thread reads its 4 A rows as 16-byte loads and 4 B row pairs as 8-byte loads
    for ptx in _case_ptx("sci_matrix_power", "sm_90"):
        mmas = ptx.count("// mmaf offset")
        assert mmas and "$L_dot" not in ptx
        assert ptx.count("ld.shared.v4.f32") == ptx.count("ld.shared.v2.f32") == 16 * mmas
        assert ptx.count("fma.rn.f32") == 128 * mmas
        # each thread stages its 2 slots of A and of B, but those of x @ x once
        sections = ptx.split("// mmaf offset")[1:]
        assert sorted(part[:part.index("bar.sync")].count("st.shared.f32 [")
                      for part in sections) == [2, 4]


# ------------------------------------------------ f32 products in register-blocked thread tiles

def _fma_chain(a, b, c):
    """Each c[i, j] + sum over k of a[i, k] * b[k, j] as the JIT sums it: one fma.rn.f32 per k in
    K order from the accumulator (products exact in f64; f64 sum then f32 rounding, which only a
    halfway f64 sum could round differently, not met with these seeds)."""
    out = c.astype(np.float32).copy()
    for kk in range(a.shape[1]):
        out = (np.outer(a[:, kk].astype(np.float64), b[kk].astype(np.float64)) +
               out.astype(np.float64)).astype(np.float32)
    return out


BLOCKED_CASES = [  # m, n, k, threads per CTA, threads that compute
    (16, 16, 16, 128, 32),   # sci_matrix_exp's shape: one warp of 4 x 2 tiles
    (16, 16, 8, 64, 32),
    (32, 32, 16, 128, 64),   # 4 x 4 tiles, K unrolled
    (64, 64, 64, 128, 128),  # 8 x 4 tiles, a K loop
    (16, 8, 36, 128, 32),    # nr = 1, K loop of 9 steps
]


@pytest.mark.parametrize("m,n,k,threads,working", BLOCKED_CASES,
                         ids=[f"{c[0]}x{c[1]}x{c[2]}-t{c[3]}" for c in BLOCKED_CASES])
def test_f32_mmaf_in_register_tiles_sums_in_k_order(m, n, k, threads, working):
    module = mmaf_kernel("f32", m, n, k)
    ptx = jit_compile(module, arch="sm_90", emit="ptx", threads=threads).ptx
    # threads past the working ones skip to the exchange
    skips = any(line.strip().startswith("setp.ge.u32") and line.endswith(f", {working};")
                for line in ptx.splitlines())
    assert skips == (working < threads) and "blocked_done" in ptx
    assert "ld.shared.v4.f32" in ptx  # A rows along K, 16 bytes at a time
    a = RNG.uniform(-1, 1, (m, k)).astype(np.float32)
    b = RNG.uniform(-1, 1, (k, n)).astype(np.float32)
    c = RNG.uniform(-1, 1, (m, n)).astype(np.float32)
    actual, expected = c.copy(), c.copy()
    interpret(module, None, (1,), a, b, expected)
    sim.run(module, None, (1,), a, b, actual, arch="sm_90", threads=threads)
    assert np.array_equal(actual.view(np.uint32), _fma_chain(a, b, c).view(np.uint32))
    exact = np.matmul(a.astype(np.float64), b.astype(np.float64)) + c
    bound = (k + 1) * 2.0 ** -24 * (np.abs(a.astype(np.float64)) @ np.abs(b) + np.abs(c))
    assert np.all(np.abs(expected - exact) <= bound)
    assert np.all(np.abs(actual - exact) <= bound)


def _power_loop_kernel(size, steps):
    """x <- x @ w + x, `steps` times in a `for`; w is loaded before the loop."""
    module = new_module("13.5")
    params = []
    for _ in range(2):
        params += [scalar(PointerType(f32))] + [scalar(i32)] * 4
    b = new_function(module, "k", params)
    token = b.make_token()
    zero, one = b.constant(0, "i32"), b.constant(1, "i32")
    views = [b.partition_view(b.tensor_view(b.args[5 * g], b.args[5 * g + 1:5 * g + 3],
                                            b.args[5 * g + 3:5 * g + 5]), (size, size))
             for g in range(2)]
    x0, _ = b.load(views[0], [zero, zero], token=token)
    w, _ = b.load(views[1], [zero, zero], token=token)

    def body(lb, i, x):
        return [lb.mmaf(x, w, x, result_types=[TileType((size, size), f32)])]
    result = b.for_(zero, b.constant(steps, "i32"), one, [x0], body)
    b.store(result, views[0], [zero, zero], token=token)
    b.return_([])
    return module


def test_f32_mmaf_b_defined_before_its_loop_stays_in_registers():
    module = _power_loop_kernel(16, 3)
    ptx = jit_compile(module, entry="k", arch="sm_90", emit="ptx", threads=128).ptx
    head = ptx.index("\n$L_for")
    loop = ptx[head:ptx.index("\n$L_endfor")]
    # w's 16 x 2 columns per thread are loaded once before the loop; in the loop only the
    # accumulator's 4 rows of pairs are 8-byte loads, and x alone is staged
    assert ptx[:head].count("ld.shared.v2.f32") == 16
    assert loop.count("ld.shared.v2.f32") == 4
    assert loop[:loop.index("bar.sync")].count("st.shared.f32 [") == 2
    x = RNG.uniform(-1, 1, (16, 16)).astype(np.float32)
    w = RNG.uniform(-0.5, 0.5, (16, 16)).astype(np.float32)
    actual, expected = x.copy(), x.copy()
    interpret(module, "k", (1,), expected, w)
    sim.run(module, "k", (1,), actual, w, arch="sm_90", threads=128)
    chain = x
    for _ in range(3):
        chain = _fma_chain(chain, w, chain)
    assert np.array_equal(actual.view(np.uint32), chain.view(np.uint32))
    assert np.allclose(actual, expected, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------- sm_90: warpgroup MMA (wgmma)

def _transposed_b_kernel(kind: str, m: int, n: int, k: int):
    """c = a @ permute(bt) + c with bt loaded as [N, K] (B staged K-major from its source)."""
    module = new_module("13.5")
    element = ELEMENT_TYPES[kind]
    params = []
    for pointee in (element, element, f32):
        params += [scalar(PointerType(pointee))] + [scalar(i32)] * 4
    b = new_function(module, "k", params)
    token = b.make_token()
    zero = b.constant(0, "i32")
    tiles = []
    for group, shape in enumerate(((m, k), (n, k), (m, n))):
        base = b.args[5 * group:5 * group + 5]
        tiles.append(b.partition_view(b.tensor_view(base[0], base[1:3], base[3:5]), shape))
    lhs, _ = b.load(tiles[0], [zero, zero], token=token)
    rhs_t, _ = b.load(tiles[1], [zero, zero], token=token)
    acc, _ = b.load(tiles[2], [zero, zero], token=token)
    product = b.mmaf(lhs, b.permute(rhs_t, [1, 0]), acc, result_types=[TileType((m, n), f32)])
    b.store(product, tiles[2], [zero, zero], token=token)
    b.return_([])
    return module


def _quarters(dtype, shape):
    """Multiples of 1/4 in [-2, 2]: every product and sum here is exact in f32, so any order of
    summation gives the interpreter's bits."""
    return (RNG.integers(-8, 9, shape) / 4).astype(dtype)


WGMMA_CASES = [  # kind, m, n, k, B transposed from an [N, K] load
    ("f16", 64, 64, 16, False),    # one wgmma
    ("bf16", 128, 32, 48, False),  # two 64-row halves, three K steps
    ("f16", 64, 256, 32, False),   # the widest N
    ("bf16", 128, 8, 16, False),   # the narrowest N
    ("f16", 192, 40, 32, False),   # three halves, N not a power of two
    ("f16", 64, 48, 32, True),     # B from its [N, K] source, K-major
    ("bf16", 128, 64, 16, True),
    ("bf16", 64, 128, 64, False),  # 128-byte swizzle: A one K block, B two N blocks of 64
    ("f16", 128, 64, 128, True),   # swizzled, two K blocks of A and of B's [N, K] source
]


TWO_WARPGROUP_CASES = [  # kind, M, N, K, B transposed: 256 threads
    ("f16", 128, 64, 64, False),   # A 128-byte swizzled: the second warpgroup 64 rows further
    ("bf16", 256, 32, 32, False),  # A in core matrices (K 32), two row groups per warpgroup
    ("f16", 128, 64, 128, True),   # B K-major from its source, two K blocks
]


@pytest.mark.parametrize("kind,m,n,k,transposed,threads",
                         [c + (128,) for c in WGMMA_CASES]
                         + [c + (256,) for c in TWO_WARPGROUP_CASES],
                         ids=[f"{c[0]}-{c[1]}x{c[2]}x{c[3]}{'-bt' if c[4] else ''}-t{t}"
                              for cs, t in ((WGMMA_CASES, 128), (TWO_WARPGROUP_CASES, 256))
                              for c in cs])
def test_sm90_mmaf_runs_on_wgmma_and_matches_the_interpreter(kind, m, n, k, transposed, threads):
    """One warpgroup, or two (256 threads): warpgroup g issues the wgmma's of rows 64 g of every
    128 (its A descriptors start 64 g rows further), accumulating in MmaAcc (1, 8, 1)."""
    module = _transposed_b_kernel(kind, m, n, k) if transposed else mmaf_kernel(kind, m, n, k)
    entry = "k" if transposed else None
    ptx = jit_compile(module, entry=entry, arch="sm_90", emit="ptx", threads=threads,
                      wgmma=True).ptx
    assert ".target sm_90a" in ptx and "mma.sync" not in ptx and "ldmatrix" not in ptx
    assert ptx.count(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{kind}.{kind}") \
        == (m // (64 * (threads // 128))) * (k // 16)
    assert f", 1, 1, 1, 0, {int(not transposed)};" in ptx  # imm-trans-b for a [K, N] B
    assert "wgmma" not in jit_compile(module, entry=entry, arch="sm_80", emit="ptx",
                                      threads=128).ptx
    dtype = np.float16 if kind == "f16" else ml_dtypes.bfloat16
    a = _quarters(dtype, (m, k))
    b = _quarters(dtype, (n, k) if transposed else (k, n))
    c = _quarters(np.float32, (m, n))
    expected, actual = c.copy(), c.copy()
    interpret(module, entry, (1,), a, b, expected)
    sim.run(module, entry, (1,), a, b, actual, arch="sm_90", threads=threads, wgmma=True)
    np.testing.assert_array_equal(actual, expected)
    b_kn = b.T if transposed else b
    np.testing.assert_array_equal(actual, a.astype(np.float64) @ b_kn.astype(np.float64) + c)


def test_attention_with_128_query_rows_takes_two_warpgroups_on_sm90():
    """The JIT's own thread choice: 256 threads (two wgmma warpgroups) for the 128-row entry of
    nn_flash_attention_tile on sm_90, where one warpgroup holding all 128 rows' scores and
    outputs needs ~230 registers a thread (timed on an H100: 1.07x tileiras's time with 128
    threads, 0.96x with 256); 128 for its 64-row entry, on sm_80, and without wgmma."""
    from tilebc_runtime.compiler import load_module, select_entries
    module = load_module(FIXTURES / "nn_flash_attention_tile"
                         / "nn_flash_attention_tile-13.5.tilebc")
    threads = {}
    for function in select_entries(module, None):
        rows = max(op.results[0].type.shape[0] for op in function.walk() if op.name == "mmaf")
        for arch, wgmma in (("sm_90", None), ("sm_80", None), ("sm_90", False)):
            result = jit_compile(module, entry=function.name, arch=arch, emit="ptx", wgmma=wgmma)
            threads[rows, arch, wgmma] = result.threads_per_cta
            if (rows, arch, wgmma) == (128, "sm_90", None):
                assert "wgmma.mma_async" in result.ptx and "mma.sync" not in result.ptx
    assert threads == {(128, "sm_90", None): 256, (128, "sm_80", None): 128,
                       (128, "sm_90", False): 128, (64, "sm_90", None): 128,
                       (64, "sm_80", None): 128, (64, "sm_90", False): 128}


def test_two_warpgroups_only_where_the_product_runs_on_wgmma():
    """A 128-row product whose operands cp.async stages takes 256 threads and wgmma; one whose
    operands would go through st.shared runs on mma.sync (the model's pick), with 128 threads."""
    aligned = jit_compile(_async_operands_kernel(128, 64, 64, 16), entry="k", arch="sm_90",
                          emit="ptx")
    assert aligned.threads_per_cta == 256 and "wgmma.mma_async" in aligned.ptx
    staged = jit_compile(mmaf_kernel("f16", 128, 64, 64), arch="sm_90", emit="ptx")
    assert staged.threads_per_cta == 128 and "mma.sync" in staged.ptx
    assert "wgmma" not in staged.ptx


@pytest.mark.parametrize("kind,m,n,k,threads,result", [
    ("f16", 32, 32, 32, 128, "f32"),   # M under 64 (the fixtures' GEMM tiles)
    ("f16", 64, 64, 16, 64, "f32"),    # not one warpgroup
    ("f16", 64, 64, 16, 256, "f32"),   # two warpgroups, but under 64 rows each
    ("bf16", 64, 64, 16, 128, "bf16"),  # a bf16 result
    ("f16", 16, 16, 16, 128, "f16")])
def test_other_sm90_mmas_keep_mma_sync(kind, m, n, k, threads, result):
    ptx = jit_compile(mmaf_kernel(kind, m, n, k, acc_kind=result), arch="sm_90", emit="ptx",
                      threads=threads, wgmma=True).ptx
    assert "mma.sync" in ptx and "wgmma" not in ptx and ".target sm_90\n" in ptx


def test_wgmma_path_links_for_sm_90a():
    result = jit_compile(_pipelined_k_loop_kernel(128, 128, 64), entry="k", arch="sm_90",
                         emit="cubin", threads=128, wgmma=True)
    assert "wgmma.mma_async" in result.ptx and ".target sm_90a" in result.ptx
    assert result.cubin[:4] == b"\x7fELF"
    from tilebc_runtime.compiler import link_ptx
    assert link_ptx(result.ptx, 90)[0][:4] == b"\x7fELF"  # callers linking for sm_90 as such


def test_wgmma_descriptor_fields_match_the_emulator_tests():
    from test_rt_sim_wgmma import descriptor
    from tilebc_runtime.lowering.matmul import wgmma_descriptor
    for start, leading, stride in ((0, 1024, 128), (8192 + 32, 16 * 256, 128), (4096, 16, 1024)):
        assert wgmma_descriptor(start, leading, stride) == descriptor(start, leading, stride, 0)
        assert wgmma_descriptor(start, leading, stride, 128) == \
            descriptor(start, leading, stride, 128)
    for bad in ((8, 16, 128), (0, 1 << 18, 128), (0, 16, 1024, 64)):
        with pytest.raises(ValueError):
            wgmma_descriptor(*bad)


@pytest.mark.parametrize("m,n,k,transposed,swizzled", [
    (64, 128, 64, False, (True, True)),
    (128, 64, 32, False, (False, True)),  # K 32: A in core matrices, B's N rows swizzled
    (64, 48, 128, False, (True, False)),  # N 48: B in core matrices
    (64, 64, 64, True, (True, True)),
])
def test_wgmma_operands_take_the_128_byte_swizzle_where_their_rows_are_128_bytes(
        m, n, k, transposed, swizzled):
    """An operand whose contiguous dim (K, or N of an MN-major B) is a multiple of 64 16-bit
    elements is staged with the 128-byte swizzle (16-byte chunks XORed with row % 8) and read
    through SWIZZLE_128B descriptors (layout type 1, stride 1024 between 8-row atoms; K-major
    steps 32 bytes into the rows, MN-major 16 rows of 128 bytes), its stage 1024-byte aligned;
    others keep the padded core matrices (layout type 0)."""
    module = _transposed_b_kernel("f16", m, n, k) if transposed else mmaf_kernel("f16", m, n, k)
    entry = "k" if transposed else None
    ptx = jit_compile(module, entry=entry, arch="sm_90", emit="ptx", threads=128,
                      wgmma=True).ptx
    descriptors = [int(v) for v in re.findall(r"add\.s64 %rd\d+, %rd\d+, (\d+);", ptx)]
    wgmmas = re.findall(r"wgmma\.mma_async\S+ \{[^}]*\}, (%rd\d+), (%rd\d+)", ptx)
    assert len(wgmmas) == (m // 64) * (k // 16)
    named = dict(re.findall(r"add\.s64 (%rd\d+), %rd\d+, (\d+);", ptx))
    for role in (0, 1):
        fields = [int(named[pair[role]]) for pair in wgmmas]
        assert {v >> 62 for v in fields} == {int(swizzled[role])}
        if swizzled[role]:
            assert {(v >> 32) & 0x3FFF for v in fields} == {1024 >> 4}
            assert all((v & 0x3FFF) % (1024 >> 4) in (0, 2, 4, 6) for v in fields)
    assert descriptors
    if any(swizzled):
        assert ".align 1024 .b8 __tilebc_smem" in ptx and "xor.b32" in ptx
    rows_b = (n, k) if transposed else (k, n)
    a, b = _quarters(np.float16, (m, k)), _quarters(np.float16, rows_b)
    c = _quarters(np.float32, (m, n))
    expected, actual = c.copy(), c.copy()
    interpret(module, entry, (1,), a, b, expected)
    sim.run(module, entry, (1,), a, b, actual, arch="sm_90", threads=128, wgmma=True)
    np.testing.assert_array_equal(actual, expected)


def test_large_tile_gemm_keeps_wgmma_accumulators_across_its_k_loop():
    [ptx] = _case_ptx("la_gemm_large_tile", arch="sm_90", wgmma=True)
    lines = ptx.splitlines()
    latch = next(i for i, line in enumerate(lines) if line.startswith("$L_latch"))
    last = max(i for i in range(latch) if "wgmma.mma_async" in lines[i])
    assert "mma.sync" not in ptx
    assert not any("st.shared" in line or "ld.shared" in line for line in lines[last:latch])


@pytest.mark.parametrize("m,n,k,stages", [(64, 128, 64, 4), (128, 64, 32, 4)])
@pytest.mark.parametrize("trips", [0, 1, 2, 5])
def test_pipelined_wgmma_k_loop_leaves_one_group_in_flight(m, n, k, stages, trips):
    """A wgmma K loop fed by cp.async stages (tma=False; TMA's: test_rt_tma.py): iteration i
    issues its wgmma's into the carried accumulator registers, then the copies of iteration
    i+S-2 (into the stage i-2 read, free since the barrier), and waits only for iteration i-1's
    wgmma's (wgmma.wait_group 1); one barrier per iteration, and no instruction but the wgmma's
    touches the accumulators inside the loop. On the emulator an accumulator read before its group is retired sees the old value and a group
    never retired is an error, so results equal to the interpreter's show the waits suffice."""
    module = _pipelined_k_loop_kernel(m, n, k)
    ptx = jit_compile(module, entry="k", arch="sm_90", emit="ptx", threads=128, wgmma=True,
                      tma=False).ptx
    head, end = (re.search(rf"^\$L_{label}_\d+:", ptx, re.M).start()
                 for label in ("for", "endfor"))
    prologue, loop, after = ptx[:head], ptx[head:end], ptx[end:]
    assert prologue.count("cp.async.commit_group") == stages - 2
    assert loop.count("cp.async.commit_group") == 1
    assert re.findall(r"cp\.async\.wait_group \d+", loop) == [f"cp.async.wait_group {stages - 3}"]
    assert re.findall(r"wgmma\.wait_group\.sync\.aligned \d+", loop) == \
        ["wgmma.wait_group.sync.aligned 1"]
    assert loop.count("bar.sync") == 1 and "mov.f32" not in loop
    # each operand's copies: one staging address register plus immediates
    assert len(set(re.findall(r"cp\.async\.cg\.shared\.global \[(%r\d+)\+", loop))) == 2
    # the tensor core starts right after the barrier; the later K tile's copies follow
    assert loop.index("bar.sync") < loop.index("wgmma.mma_async") < loop.index("cp.async.cg") \
        < loop.index("wgmma.wait_group")
    assert after.index("wgmma.wait_group.sync.aligned 0") < after.index("cp.async.wait_group 0")
    _check_ragged_k_loop(module, m, n, max(k * trips - 8, 0), trips, m + 13, wgmma=True,
                         tma=False)


@pytest.mark.parametrize("rounded", [True, False])
def test_swizzled_wgmma_stages_round_a_misplaced_dynamic_shared_base_up(rounded, monkeypatch):
    """The 128-byte swizzle XORs absolute address bits, so swizzled stages need 1024-byte
    alignment; where the launch puts dynamic shared memory is the driver's, so the kernel rounds
    its base up. Emulated with the dynamic area 16 bytes past an alignment (a static variable
    before it, the extern's .align lowered to 16): the results equal the interpreter's, and
    without the rounding (`rounded` False) they do not."""
    from tilebc_runtime.sim import runner
    m, n, k, trips = 64, 128, 64, 3
    module = _pipelined_k_loop_kernel(m, n, k)
    ptx = jit_compile(module, entry="k", arch="sm_90", emit="ptx", threads=128, wgmma=True,
                      tma=False).ptx
    assert ".extern .shared .align 1024 .b8 __tilebc_smem[];" in ptx
    rounding = re.compile(r"\tadd\.u32 (%r\d+), \1, 1023;\n\tand\.b32 \1, \1, -1024;\n")
    assert len(rounding.findall(ptx)) == 1
    original = runner.load_kernel

    def misplaced(text, *args, **kwargs):
        text = text.replace(".extern .shared .align 1024", ".extern .shared .align 16")
        text = text.replace("\n{\n", "\n{\n\t.shared .align 16 .b8 misplace[16];\n", 1)
        if not rounded:
            text = rounding.sub("", text)
        return original(text, *args, **kwargs)
    monkeypatch.setattr(runner, "load_kernel", misplaced)
    a = _quarters(np.float16, (m, k * trips))
    b = _quarters(np.float16, (k * trips, n))
    c = _quarters(np.float32, (m, n))
    expected, actual = c.copy(), c.copy()
    interpret(module, "k", (1, 1), a, b, expected, np.int32(trips))
    sim.run(module, "k", (1, 1), a, b, actual, np.int32(trips), arch="sm_90", threads=128,
            wgmma=True, tma=False)
    assert np.array_equal(actual, expected) == rounded


@pytest.mark.parametrize("align", [16, 4])
def test_wgmma_operands_copied_by_cp_async_into_the_canonical_layout(align):
    """Aligned view loads go to wgmma's staging by cp.async (16- or 4-byte runs along K for A,
    along N for B's MN-major layout), ragged tiles zero-filled."""
    m, n, k = 64, 64, 32
    module = _async_operands_kernel(m, n, k, align)
    ptx = jit_compile(module, entry="k", arch="sm_90", emit="ptx", threads=128, wgmma=True).ptx
    assert "wgmma.mma_async" in ptx and "cp.async" in ptx and "st.shared.b16" not in ptx
    rows, cols = 77, 72
    a = _quarters(np.float16, (rows, 40))[:, :k]
    b = _quarters(np.float16, (k, 88))[:, :cols]
    c = _quarters(np.float32, (rows, cols))
    grid = (-(-rows // m), -(-cols // n))
    expected, actual = c.copy(), c.copy()
    interpret(module, "k", grid, a, b, expected)
    sim.run(module, "k", grid, a, b, actual, arch="sm_90", threads=128, wgmma=True)
    np.testing.assert_array_equal(actual, expected)


def test_portable_ptx_and_the_aot_ptx_image_keep_mma_sync():
    """sm_90a code runs on sm_90 alone, so the PTX a fatbin carries for newer GPUs stays
    portable: mma.sync, .target sm_90."""
    from tilebc_runtime.aot import build_fatbin
    module = _pipelined_k_loop_kernel(128, 128, 64)
    ptx = jit_compile(module, entry="k", arch="sm_90", emit="ptx", threads=128,
                      portable=True, wgmma=True).ptx
    assert "wgmma" not in ptx and "mma.sync" in ptx and ".target sm_90\n" in ptx
    fatbin = build_fatbin(module, "sm_80,sm_90", entry="k", options={"threads": 128})
    assert b".target sm_90\n" in fatbin.fatbin and b".target sm_90a" not in fatbin.fatbin


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_batched_gemm_tiles_reach_the_staging_through_reshape_and_transpose(arch):
    """la_bmm_aligned_tile loads (1, M, K) and (1, N, K) tiles of 3-D tensors, reshapes them to
    2-D and transposes B: cp.async still copies both into the mma's staging (B's N x K source
    K-major, as it is), with no st.shared staging and no second load; on sm_90 the product runs
    on wgmma, in a pipeline (test_production_gemm_k_loops_pipeline_where_the_model_says). The
    family emulator suite (sm_90) and test_rt_sim_archs.py (sm_80's own code) check the
    results."""
    [ptx] = _case_ptx("la_bmm_aligned_tile", arch, tma=False)
    assert "cp.async.cg.shared.global" in ptx and "st.shared.b16" not in ptx
    assert "ld.global" not in ptx.replace("ld.global.nc", "")  # no register load of A or B
    if arch == "sm_90":
        assert "wgmma.mma_async" in ptx and "mma.sync" not in ptx
        # by default TMA fills the same stages: 3-d maps over the (1, M, K) and (1, N, K) tiles
        [tma] = _case_ptx("la_bmm_aligned_tile", arch)
        assert "cp.async.bulk.tensor.3d" in tma and "cp.async.cg" not in tma
    else:
        assert "ldmatrix" in ptx and "wgmma" not in ptx


def _k_loop_groups(ptx):
    """(cp.async groups committed before the first loop, its body's cp.async.wait_group N's,
    its body's commits, whether the stages are dynamic shared memory)."""
    head = re.search(r"^\$L_for_\d+:", ptx, re.M).start()
    body = ptx[head:re.search(r"^\$L_endfor_\d+:", ptx, re.M).start()]
    return (ptx[:head].count("cp.async.commit_group"),
            [int(n) for n in re.findall(r"cp\.async\.wait_group (\d+)", body)],
            body.count("cp.async.commit_group"), ".extern .shared" in ptx)


@pytest.mark.parametrize("name,stage", [("la_gemm_aligned_tile", 26624),
                                        ("la_bmm_aligned_tile", 27648)])
def test_production_gemm_k_loops_pipeline_where_the_model_says(name, stage):
    """The 64x128x64 f16 production tiles (one stage: 26 / 27 KiB padded). sm_90 pipelines
    them: wgmma three stages (two groups ahead, wait_group 1), mma.sync two (one ahead). On
    sm_80, sm_86 and sm_120 each iteration copies its tile and waits for it (wait_group 0), in
    one static stage: two dynamic stages would leave sm_80 (164 KiB an SM) 3 CTAs (bmm: 2)
    instead of 4, which the performance model (bench_model.py --arch sm_80, its H100 knobs with
    164 KiB of shared memory an SM) puts at 1.03-1.07x today's time at scale (GEMM 2048^3:
    1.07x at its grid) for 0.99x at the fixtures' grids; three stages (2 CTAs) at 1.07-1.17x.
    sm_86 / sm_120 (99 KiB a CTA) have no room for two."""
    for arch in ("sm_80", "sm_86", "sm_120"):
        [ptx] = _case_ptx(name, arch)
        assert _k_loop_groups(ptx) == (0, [0], 1, False), arch
        assert f"__tilebc_smem[{stage}]" in ptx
    [mma_sync] = _case_ptx(name, "sm_90", tma=False, wgmma=False)
    assert _k_loop_groups(mma_sync) == (1, [0], 1, True)
    [wgmma] = _case_ptx(name, "sm_90", tma=False)
    assert _k_loop_groups(wgmma) == (2, [1], 1, True) and "wgmma.mma_async" in wgmma


def _loop_bodies(ptx):
    """The text between each `for` loop's head label and its exit label."""
    import re
    return re.findall(r"\$L_for_\d+:\n(.*?)\$L_endfor_\d+:", ptx, re.S)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_attention_keeps_scores_statistics_and_p_in_registers(arch):
    """nn_flash_attention_tile (64 or 128 query rows, 64 keys, head dim 64): both products keep
    warps on whole rows, so a row's max and sum are two lane-quad shuffles; the running max and
    sum are carried in the reductions' layout; P feeds P.V as A fragments from registers; Q's
    fragments are read once before the key loop; K (loaded through `order`, K dim contiguous)
    and V reach the staging by cp.async, an iteration ahead (one stage holds both). Per key
    tile, shared memory holds only K and V, and one barrier guards them. On sm_90 both products
    are wgmma's with A in registers. The emulator runs (the family suite on sm_90,
    test_rt_sim_archs.py on the other architectures' own code) check the results."""
    import re
    for ptx in _case_ptx("nn_flash_attention_tile", arch):
        offsets = set(re.findall(r"shfl\.sync\.bfly\.b32 [^,]+, [^,]+, (\d+),", ptx))
        assert offsets == {"1", "2"}, offsets
        bodies = _loop_bodies(ptx)
        assert bodies
        for body in bodies[:1]:  # the unmasked key loop
            if arch == "sm_90":
                # 4 K steps a product, one wgmma per 64 rows, A from 4 registers
                wgmmas = re.findall(r"wgmma\.mma_async[^;]*\}, \{(%r\d+, ){3}%r\d+\}", body)
                assert len(wgmmas) in (8, 16) and "mma.sync" not in body
            else:
                # a warp's 16 or 32 rows: 4 K steps x 8 column blocks per product
                assert body.count("mma.sync") in (64, 128)
            assert "ld.global" not in body and "st.shared" not in body
            assert "ld.shared" not in body  # ldmatrix / wgmma read K and V; nothing else
            if arch == "sm_90":  # TMA (the default there): thread 0 copies K's and V's boxes
                assert body.count("cp.async.bulk.tensor") >= 2
                assert body.count("mbarrier.try_wait") == 1 and body.count("bar.sync") == 1
            else:
                assert body.count("cp.async.cg.shared.global") >= 2
                assert body.count("cp.async.wait_group") == 1 and body.count("bar.sync") == 1


# ------------------------------------------- wgmma groups: nothing they read written after the fence

_WGMMA_GROUP = re.compile(r"^\s*wgmma\.fence\.sync\.aligned;\n(.*?)^\s*wgmma\.commit_group",
                          re.M | re.S)


def _group_hazards(ptx: str) -> list:
    """(register, instruction) for each register a wgmma of a fence ... commit group reads (its
    accumulators and A fragments) that another instruction of the group writes: ptxas then makes
    every wgmma of the group wait for the one before it."""
    hazards = []
    for group in _WGMMA_GROUP.findall(ptx):
        lines = [line.strip() for line in group.splitlines() if line.strip()
                 and not line.strip().startswith("//")]
        read = set()
        for line in lines:
            if line.startswith("wgmma.mma_async"):
                read.update(re.findall(r"%\w+", line.split("}, ", 1)[0] + "}" +
                                       (line.split("}, ", 2)[1] if line.count("{") > 1 else "")))
        for line in lines:
            if line.startswith("wgmma."):
                continue
            written = re.match(r"(?:@!?%\w+\s+)?[\w.:]+\s+(%\w+)", line)
            if written and written.group(1) in read:
                hazards.append((written.group(1), line))
    return hazards


def test_group_hazards_are_found():
    ptx = ("\twgmma.fence.sync.aligned;\n\tmov.b32 %r5, {%h1, %h2};\n"
           "\twgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2}, {%r5, %r6}, %rd1, "
           "1, 1, 1, 0;\n\twgmma.commit_group.sync.aligned;\n")
    assert _group_hazards(ptx) == [("%r5", "mov.b32 %r5, {%h1, %h2};")]
    assert _group_hazards(ptx.replace("%r5", "%r7", 1)) == []


@pytest.mark.parametrize("name", ["nn_flash_attention_tile", "la_gemm_aligned_tile",
                                  "la_bmm_aligned_tile"])
def test_wgmma_groups_read_nothing_written_after_their_fence(name):
    """A from registers (attention's P.V, whose P is packed to f16 pairs) is packed before the
    fence; the accumulators' copies too."""
    codes = _case_ptx(name, "sm_90")
    assert any("wgmma.mma_async" in ptx for ptx in codes)
    for ptx in codes:
        assert _group_hazards(ptx) == [], name
