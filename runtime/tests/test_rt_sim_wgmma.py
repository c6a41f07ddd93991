"""wgmma.mma_async on the PTX emulator against numpy. A hand-written sm_90a kernel copies a
shared-memory image built here to shared memory, points matrix descriptors at it and runs one
warpgroup's wgmma; the lanes' accumulators are read back through the ISA's accumulator figure.

The images are laid out here from the PTX ISA's description of the canonical layouts, written
per swizzle mode as "16-byte chunk c of row r lands at chunk c XOR f(r)" (the emulator instead
XORs address bits), so a misread descriptor field, major-ness or swizzle fails. The same
layouts, run through test_rt_sim_isa's @also_on_gpu wgmma cases, matched an H200 bit for bit.
"""
import re

import ml_dtypes
import numpy as np
import pytest

from tilebc.interp.memory import GlobalMemory, host_bytes
from tilebc_runtime import sim
from tilebc_runtime.sim.isa_sm90 import Descriptor

RNG = np.random.default_rng(90)
ELEMENT = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "tf32": np.float32,
           "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2, "s8": np.int8,
           "u8": np.uint8}
K_OF = {"f16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32, "s8": 32, "u8": 32}
SWIZZLE_CODE = {0: 0, 128: 1, 64: 2, 32: 3}


def _values(ptype, shape):
    """Values whose products and sums are exact in f32 (any summation order gives one result)."""
    if ptype in ("s8", "u8"):
        info = np.iinfo(ELEMENT[ptype])
        return RNG.integers(info.min, info.max + 1, shape).astype(ELEMENT[ptype])
    return (RNG.integers(-8, 9, shape) / 4).astype(ELEMENT[ptype])


def _bits(values):
    values = np.ascontiguousarray(values)
    return values.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[values.itemsize])


def place(matrix, major, swizzle, leading, stride, image, origin):
    """Write `matrix` (rows = M or N, cols = K) into `image` at byte `origin` in a canonical
    layout; `major` is "k" or "mn"; leading/stride are the descriptor's byte offsets."""
    size = matrix.itemsize
    raw = _bits(matrix)
    shift = {128: 0, 64: 1, 32: 2}.get(swizzle)
    for r in range(matrix.shape[0]):
        for c in range(matrix.shape[1]):
            if major == "k":   # 8 rows x 16 B core matrices, or rows of `swizzle` bytes
                chunk, byte = divmod(c * size, 16)
                if swizzle == 0:
                    where = (r // 8) * stride + (r % 8) * 16 + chunk * leading + byte
                else:
                    where = (r // 8) * stride + (r % 8) * swizzle + \
                        (chunk ^ ((r % 8) >> shift)) * 16 + byte
            else:              # runs of 16 B along M/N, K-rows of 16 B or `swizzle` bytes
                chunk, byte = divmod(r * size, 16)
                if swizzle == 0:
                    where = chunk * stride + (c % 8) * 16 + (c // 8) * leading + byte
                else:
                    per_row = swizzle // 16
                    where = (chunk // per_row) * leading + (c // 8) * stride + \
                        (c % 8) * swizzle + ((chunk % per_row) ^ ((c % 8) >> shift)) * 16 + byte
            image[origin + where: origin + where + size] = \
                np.frombuffer(raw[r, c].tobytes(), np.uint8)


def descriptor(offset, leading, stride, swizzle):
    """Descriptor bits with the start relative to the shared array (the kernel adds its base)."""
    return ((offset >> 4) & 0x3FFF) | ((leading >> 4) & 0x3FFF) << 16 | \
        ((stride >> 4) & 0x3FFF) << 32 | SWIZZLE_CODE[swizzle] << 62


def d_position(i, tid):
    """Accumulator element d_i of warpgroup thread `tid` (ISA figure for wgmma .m64nNk*)."""
    warp, lane = divmod(tid, 32)
    row = warp * 16 + lane // 4 + (8 if i % 4 >= 2 else 0)
    col = (i // 4) * 8 + (lane % 4) * 2 + i % 2
    return row, col


def a_register_position(i, tid, ptype):
    """Element a_i of thread `tid` when A comes from registers (per warp: the mma.m16n8kK A
    fragment of its 16 rows)."""
    warp, lane = divmod(tid, 32)
    g, t = lane // 4, lane % 4
    if ptype == "tf32":            # a0..a3
        row, col = g + 8 * (i % 2), t + 4 * (i // 2)
    elif ptype in ("f16", "bf16"):  # a0..a7
        row, col = g + 8 * ((i // 2) % 2), 2 * t + i % 2 + 8 * (i // 4)
    else:                           # a0..a15, 8-bit
        row, col = g + 8 * ((i // 4) % 2), 4 * t + i % 4 + 16 * (i // 8)
    return warp * 16 + row, col


def kernel_ptx(shape, dtype, atype, btype, steps, a_registers=False, scale_a=1, scale_b=1,
               trans=(0, 0), satfinite=False, shared_bytes=8192, threads=128, extra=""):
    """`steps`: (A descriptor or None, B descriptor) per wgmma, accumulating from C."""
    n = int(shape.split("n")[1].split("k")[0])
    acc = n // 4 if dtype == "f16" else n // 2
    integer = atype in ("s8", "u8")
    lines = [".version 8.4", ".target sm_90a", ".address_size 64",  # 8.4: s8 x u8
             ".visible .entry k(.param .u64 pimg, .param .u32 pwords, .param .u64 pc, "
             ".param .u64 pd, .param .u64 pa, .param .u32 pscale)",
             f".reqntid {threads}", "{",
             "  .reg .b32 %r<16>;", f"  .reg .b32 %acc<{acc}>;", "  .reg .b32 %a<4>;",
             "  .reg .b64 %rd<16>;", "  .reg .b64 %desc<32>;", "  .reg .pred %p<4>;",
             f"  .shared .align 1024 .b8 smem[{shared_bytes}];",
             "  mov.u32 %r0, %tid.x;", "  ld.param.u64 %rd0, [pimg];",
             "  ld.param.u32 %r1, [pwords];", "  mov.u32 %r2, smem;", "  mov.u32 %r3, %r0;",
             "$copy:", "  setp.ge.u32 %p0, %r3, %r1;", "  @%p0 bra $copied;",
             "  mul.wide.u32 %rd1, %r3, 4;", "  add.s64 %rd2, %rd0, %rd1;",
             "  ld.global.b32 %r4, [%rd2];", "  shl.b32 %r5, %r3, 2;",
             "  add.s32 %r6, %r2, %r5;", "  st.shared.b32 [%r6], %r4;",
             f"  add.s32 %r3, %r3, {threads};", "  bra $copy;", "$copied:",
             "  fence.proxy.async.shared::cta;", "  bar.sync 0;",
             "  cvt.u64.u32 %rd3, %r2;", "  shr.u64 %rd3, %rd3, 4;",
             # this thread's accumulators (and A registers) from global memory
             "  ld.param.u64 %rd4, [pc];", f"  mul.wide.u32 %rd5, %r0, {4 * acc};",
             "  add.s64 %rd6, %rd4, %rd5;",
             "  ld.param.u64 %rd7, [pa];", "  mul.wide.u32 %rd8, %r0, 16;",
             "  add.s64 %rd9, %rd7, %rd8;",
             "  ld.param.u32 %r7, [pscale];", "  setp.ne.s32 %p1, %r7, 0;"]
    lines += [f"  ld.global.b32 %acc{i}, [%rd6+{4 * i}];" for i in range(acc)]
    if a_registers:
        lines += [f"  ld.global.b32 %a{i}, [%rd9+{4 * i}];" for i in range(4)]
    lines.append(extra)
    lines.append("  wgmma.fence.sync.aligned;")
    accumulators = "{" + ", ".join(f"%acc{i}" for i in range(acc)) + "}"
    sat = ".satfinite" if satfinite else ""
    for index, (a_desc, b_desc) in enumerate(steps):
        lines += [f"  mov.b64 %desc{2 * index}, {b_desc};",
                  f"  add.s64 %desc{2 * index}, %desc{2 * index}, %rd3;"]
        if a_registers:
            a_operand = "{%a0, %a1, %a2, %a3}"
        else:
            lines += [f"  mov.b64 %desc{2 * index + 1}, {a_desc};",
                      f"  add.s64 %desc{2 * index + 1}, %desc{2 * index + 1}, %rd3;"]
            a_operand = f"%desc{2 * index + 1}"
        scale_d = "%p1" if index == 0 else "1"
        tail = [scale_d]
        if not integer:
            tail += [str(scale_a), str(scale_b)]
            if atype in ("f16", "bf16"):
                tail += ([] if a_registers else [str(trans[0])]) + [str(trans[1])]
        lines.append(f"  wgmma.mma_async.sync.aligned.{shape}{sat}.{dtype}.{atype}.{btype} "
                     f"{accumulators}, {a_operand}, %desc{2 * index}, {', '.join(tail)};")
    lines += ["  wgmma.commit_group.sync.aligned;", "  wgmma.wait_group.sync.aligned 0;",
              "  ld.param.u64 %rd10, [pd];", "  add.s64 %rd11, %rd10, %rd5;"]
    lines += [f"  st.global.b32 [%rd11+{4 * i}], %acc{i};" for i in range(acc)]
    lines += ["  ret;", "}"]
    return "\n".join(lines) + "\n"


def run_wgmma(ptx, image, c_words, a_words=None, scale=1, threads=128, profile=None):
    memory = GlobalMemory()
    image = np.ascontiguousarray(image)
    pad = (-len(image)) % 4
    image = np.concatenate([image, np.zeros(pad, np.uint8)])
    out = np.zeros_like(c_words)
    a_words = a_words if a_words is not None else np.zeros((threads, 4), np.uint32)
    bases = [memory.map(host_bytes(x), name).base for x, name in
             ((image, "image"), (c_words, "c"), (out, "d"), (a_words, "a"))]
    sim.emulate(ptx, "k", 1, [bases[0], len(image) // 4, bases[1], bases[2], bases[3], scale],
                memory=memory, profile=profile)
    return out


def distribute_accumulators(C, dtype):
    """(128, registers) words holding C per the accumulator figure."""
    n = C.shape[1]
    count = n // 2
    words = np.zeros((128, count // 2 if dtype == "f16" else count), np.uint32)
    for tid in range(128):
        for i in range(count):
            value = C[d_position(i, tid)]
            if dtype == "f16":
                bits = int(np.float16(value).view(np.uint16))
                words[tid, i // 2] |= bits << (16 * (i % 2))
            else:
                words[tid, i] = np.asarray(value, np.int32 if dtype == "s32" else
                                           np.float32).view(np.uint32)
    return words


def gather_accumulators(words, dtype, n):
    out = np.zeros((64, n), np.float64 if dtype != "s32" else np.int64)
    for tid in range(128):
        for i in range(n // 2):
            if dtype == "f16":
                bits = (int(words[tid, i // 2]) >> (16 * (i % 2))) & 0xFFFF
                value = float(np.uint16(bits).view(np.float16))
            elif dtype == "s32":
                value = int(words[tid, i].view(np.int32))
            else:
                value = float(words[tid, i].view(np.float32))
            out[d_position(i, tid)] = value
    return out


def _reference(A, B, C, dtype, keep=True, satfinite=False):
    if dtype == "s32":
        D = A.astype(np.int64) @ B.astype(np.int64) + (C.astype(np.int64) if keep else 0)
        if satfinite:
            D = np.clip(D, -2 ** 31, 2 ** 31 - 1)
        return ((D + 2 ** 31) % 2 ** 32) - 2 ** 31
    D = A.astype(np.float64) @ B.astype(np.float64) + (C.astype(np.float64) if keep else 0)
    return D.astype(np.float16 if dtype == "f16" else np.float32).astype(np.float64)


# (major of A, major of B, swizzle) with descriptor offsets chosen as the canonical layouts need
LAYOUTS = [("k", "k", 0), ("k", "k", 32), ("k", "k", 64), ("k", "k", 128),
           ("mn", "mn", 0), ("mn", "k", 128), ("k", "mn", 64), ("mn", "mn", 32)]


def _offsets(major, swizzle, rows, size):
    """(leading, stride) byte offsets of a compact canonical layout of `rows` x 16 K elements."""
    if major == "k":  # no swizzle: 8-row groups 128 B apart, then the K chunks
        return (rows * 16, 128) if swizzle == 0 else (16, 8 * swizzle)
    if swizzle == 0:  # 16-byte runs along M/N 128 B apart, then the next 8 K-rows
        return 128 * (rows * size // 16), 128
    return 16 * swizzle, 8 * swizzle  # blocks of `swizzle` bytes along M/N after both K groups


@pytest.mark.parametrize("a_major,b_major,swizzle", LAYOUTS,
                         ids=lambda v: str(v))
def test_wgmma_f16_descriptors_and_swizzles(a_major, b_major, swizzle):
    n, k = 32, 16
    A, B = _values("f16", (64, k)), _values("f16", (k, n))
    C = _values("f16", (64, n)).astype(np.float32)
    image = np.zeros(16384, np.uint8)  # A in the first 8 KiB (64 rows of 128 B at most), B after
    a_lead, a_stride = _offsets(a_major, swizzle, 64, 2)
    b_lead, b_stride = _offsets(b_major, swizzle, n, 2)
    place(A, a_major, swizzle, a_lead, a_stride, image, 0)
    place(B.T.copy(), b_major, swizzle, b_lead, b_stride, image, 8192)
    ptx = kernel_ptx(f"m64n{n}k{k}", "f32", "f16", "f16",
                     [(descriptor(0, a_lead, a_stride, swizzle),
                       descriptor(8192, b_lead, b_stride, swizzle))],
                     trans=(int(a_major == "mn"), int(b_major == "mn")), shared_bytes=16384)
    words = run_wgmma(ptx, image, distribute_accumulators(C, "f32"))
    got = gather_accumulators(words, "f32", n)
    np.testing.assert_array_equal(got, _reference(A, B, C, "f32"))


def test_descriptor_addresses_differ_between_layouts():
    """A check that can fail: the swizzles move data, and K-major is not MN-major."""
    plain = Descriptor(0x400, 1024, 128, 0, 0).addresses(64, 16, 2, True)
    swizzled = Descriptor(0x400, 16, 1024, 0, 128).addresses(64, 16, 2, True)
    assert len(np.unique(plain)) == len(np.unique(swizzled)) == 64 * 16
    assert not np.array_equal(np.sort(plain.ravel()), np.sort(swizzled.ravel()))
    # 128-byte swizzle: row r's first 16-byte chunk moves to chunk r % 8 of its 128-byte row
    assert [int(swizzled[r, 0]) - 0x400 - 128 * r for r in range(8)] == [16 * r for r in range(8)]


@pytest.mark.parametrize("dtype,atype,btype", [
    ("f32", "bf16", "bf16"), ("f16", "f16", "f16"), ("f32", "tf32", "tf32"),
    ("f32", "e4m3", "e5m2"), ("f16", "e5m2", "e5m2"), ("s32", "s8", "u8"), ("s32", "u8", "u8")])
def test_wgmma_types_k_major_128b_swizzle(dtype, atype, btype):
    n, k = 16, K_OF[atype]
    size = np.dtype(ELEMENT[atype]).itemsize
    A, B = _values(atype, (64, k)), _values(btype, (k, n))
    C = (_values("s8", (64, n)).astype(np.int32) if dtype == "s32"
         else _values("f16", (64, n)).astype(np.float32))
    image = np.zeros(16384, np.uint8)
    place(A, "k", 128, 1, 1024, image, 0)
    place(B.T.copy(), "k", 128, 1, 1024, image, 8192)
    ptx = kernel_ptx(f"m64n{n}k{k}", dtype, atype, btype,
                     [(descriptor(0, 16, 1024, 128), descriptor(8192, 16, 1024, 128))],
                     shared_bytes=16384)
    words = run_wgmma(ptx, image, distribute_accumulators(C, dtype))
    got = gather_accumulators(words, dtype, n)
    np.testing.assert_array_equal(got, _reference(A, B, C, dtype))
    assert size * k == 32  # one wgmma reads 32 bytes of K per row


def test_k_loop_advances_the_start_inside_a_128b_swizzled_row():
    """64 K-elements of f16 fill one 128-byte swizzled row; four wgmma's step the descriptor's
    start by 32 bytes each and accumulate (as GEMM main loops do)."""
    n, k = 64, 64
    A, B = _values("f16", (64, k)), _values("f16", (k, n))
    C = np.zeros((64, n), np.float32)
    image = np.zeros(24576, np.uint8)
    place(A, "k", 128, 1, 1024, image, 0)
    place(B.T.copy(), "k", 128, 1, 1024, image, 8192)
    steps = [(descriptor(32 * s, 16, 1024, 128), descriptor(8192 + 32 * s, 16, 1024, 128))
             for s in range(4)]
    ptx = kernel_ptx(f"m64n{n}k16", "f32", "f16", "f16", steps, shared_bytes=24576)
    profile = sim.Profile()
    words = run_wgmma(ptx, image, distribute_accumulators(C, "f32"), scale=0, profile=profile)
    np.testing.assert_array_equal(gather_accumulators(words, "f32", n),
                                  _reference(A, B, C, "f32", keep=False))
    report = profile.report()  # the profiler counts the flops and the operand reads
    assert report["mma_flops"] == {"f16": 2 * 64 * n * k}
    copies = 24576 // 128  # the image's st.shared.b32: one wavefront per warp access
    assert report["shared_wavefronts"] == copies + (64 + n) * k * 2 // 128


@pytest.mark.parametrize("atype", ["f16", "tf32", "s8"])
def test_wgmma_a_from_registers(atype):
    n, k = 24 if atype != "s8" else 32, K_OF[atype]
    dtype = "s32" if atype == "s8" else "f32"
    A, B = _values(atype, (64, k)), _values(atype, (k, n))
    C = np.zeros((64, n), np.int32 if dtype == "s32" else np.float32)
    per_register = 4 // np.dtype(ELEMENT[atype]).itemsize
    raw = _bits(A)
    a_words = np.zeros((128, 4), np.uint32)
    for tid in range(128):
        for i in range(4 * per_register):
            bits = int(raw[a_register_position(i, tid, atype)])
            a_words[tid, i // per_register] |= bits << (32 // per_register * (i % per_register))
    image = np.zeros(4096, np.uint8)
    place(B.T.copy(), "k", 0, 16 * n, 128, image, 0)
    ptx = kernel_ptx(f"m64n{n}k{k}", dtype, atype, atype,
                     [(None, descriptor(0, 16 * n, 128, 0))], a_registers=True)
    words = run_wgmma(ptx, image, distribute_accumulators(C, dtype), a_words)
    np.testing.assert_array_equal(gather_accumulators(words, dtype, n),
                                  _reference(A, B, C, dtype))


def test_scale_and_negation_immediates():
    n, k = 8, 16
    A, B = _values("f16", (64, k)), _values("f16", (k, n))
    C = _values("f16", (64, n)).astype(np.float32)
    image = np.zeros(8192, np.uint8)
    place(A, "k", 64, 1, 512, image, 0)
    place(B.T.copy(), "k", 64, 1, 512, image, 4096)
    steps = [(descriptor(0, 16, 512, 64), descriptor(4096, 16, 512, 64))]
    ptx = kernel_ptx(f"m64n{n}k{k}", "f32", "f16", "f16", steps, scale_a=-1)
    c_words = distribute_accumulators(C, "f32")
    np.testing.assert_array_equal(gather_accumulators(run_wgmma(ptx, image, c_words), "f32", n),
                                  _reference(-A, B, C, "f32"))
    # scale-d false: D = A*B, C ignored
    ptx = kernel_ptx(f"m64n{n}k{k}", "f32", "f16", "f16", steps, scale_b=-1)
    got = gather_accumulators(run_wgmma(ptx, image, c_words, scale=0), "f32", n)
    np.testing.assert_array_equal(got, _reference(A, -B, C, "f32", keep=False))


@pytest.mark.parametrize("satfinite", [True, False])
def test_integer_wgmma_saturates_or_wraps(satfinite):
    n, k = 16, 32
    A, B = np.full((64, k), 127, np.int8), np.full((k, n), 127, np.int8)
    C = np.full((64, n), 2 ** 31 - 1000, np.int32)
    image = np.zeros(8192, np.uint8)
    place(A, "k", 32, 1, 256, image, 0)
    place(B.T.copy(), "k", 32, 1, 256, image, 4096)
    ptx = kernel_ptx(f"m64n{n}k{k}", "s32", "s8", "s8",
                     [(descriptor(0, 16, 256, 32), descriptor(4096, 16, 256, 32))],
                     satfinite=satfinite)
    got = gather_accumulators(run_wgmma(ptx, image, distribute_accumulators(C, "s32")), "s32", n)
    np.testing.assert_array_equal(got, _reference(A, B, C, "s32", satfinite=satfinite))
    assert (got == 2 ** 31 - 1).all() == satfinite


@pytest.mark.parametrize("instruction,message", [
    ("wgmma.mma_async.sync.aligned.m64n12k16.f32.f16.f16", "N = 12"),
    ("wgmma.mma_async.sync.aligned.m64n8k16.f16.bf16.bf16", "not a form"),
    ("wgmma.mma_async.sync.aligned.m64n8k8.f32.f16.f16", "not a form"),
    ("wgmma.mma_async.sync.aligned.m64n40k32.s32.s8.s8", "N = 40"),
])
def test_unemulated_wgmma_forms_are_refused(instruction, message):
    n = int(instruction.split(".m64n")[1].split("k")[0])
    acc = n // 4 if ".f16.bf16" in instruction else n // 2
    regs = "{" + ", ".join(f"%f{i}" for i in range(max(acc, 1))) + "}"
    tail = "%p0" if ".s8" in instruction else "%p0, 1, 1, 0, 0"
    ptx = f""".version 8.0
.target sm_90a
.address_size 64
.visible .entry k()
.reqntid 128
{{
  .reg .f32 %f<200>;
  .reg .b64 %rd<4>;
  .reg .pred %p<2>;
  {instruction} {regs}, %rd0, %rd1, {tail};
  ret;
}}
"""
    with pytest.raises(sim.UnsupportedInstruction, match=message):
        sim.load_kernel(ptx, "k")


def test_base_offset_and_partial_warpgroup_are_reported():
    image = np.zeros(16384, np.uint8)
    place(_values("f16", (64, 16)), "k", 128, 1, 1024, image, 0)
    place(_values("f16", (8, 16)), "k", 128, 1, 1024, image, 8192)
    bad = descriptor(0, 16, 1024, 128) | (1 << 49)
    ptx = kernel_ptx("m64n8k16", "f32", "f16", "f16", [(bad, descriptor(8192, 16, 1024, 128))],
                     shared_bytes=16384)
    with pytest.raises(sim.SimExecutionError, match="base offset"):
        run_wgmma(ptx, image, np.zeros((128, 4), np.uint32))
    ptx = kernel_ptx("m64n8k16", "f32", "f16", "f16",
                     [(descriptor(0, 16, 1024, 128), descriptor(8192, 16, 1024, 128))],
                     threads=160, shared_bytes=16384)
    with pytest.raises(sim.SimExecutionError, match="whole warpgroups"):
        run_wgmma(ptx, image, np.zeros((160, 4), np.uint32), threads=160)


def test_descriptor_pointing_at_unwritten_shared_memory_is_reported():
    image = np.zeros(4096, np.uint8)
    ptx = kernel_ptx("m64n8k16", "f32", "f16", "f16",
                     [(descriptor(4096, 16, 1024, 128), descriptor(0, 16, 1024, 128))],
                     shared_bytes=16384)
    with pytest.raises(sim.SimMemoryError, match="no thread of this CTA has written"):
        run_wgmma(ptx, image, np.zeros((128, 4), np.uint32))


@pytest.mark.parametrize("wait", [True, False])
def test_accumulators_land_at_wait_group(wait):
    """Two chained wgmma's: the second accumulates onto the first's pending result; the
    registers change when wait_group retires the group, or, stored before it, when the stores
    touch them (ptxas serialises the pipeline there: no stale C is stored)."""
    n, k = 8, 16
    A, B = _values("f16", (64, k)), _values("f16", (k, n))
    C = _values("f16", (64, n)).astype(np.float32)
    image = np.zeros(16384, np.uint8)
    place(A, "k", 128, 1, 1024, image, 0)
    place(B.T.copy(), "k", 128, 1, 1024, image, 8192)
    step = (descriptor(0, 16, 1024, 128), descriptor(8192, 16, 1024, 128))
    ptx = kernel_ptx(f"m64n{n}k{k}", "f32", "f16", "f16", [step, step], shared_bytes=16384)
    if not wait:  # the wait after the stores
        ptx = ptx.replace("  wgmma.wait_group.sync.aligned 0;\n", "") \
            .replace("  ret;", "  wgmma.wait_group.sync.aligned 0;\n  ret;")
    got = gather_accumulators(run_wgmma(ptx, image, distribute_accumulators(C, "f32")), "f32", n)
    want = A.astype(np.float64) @ B.astype(np.float64)
    np.testing.assert_array_equal(got, (2 * want + C).astype(np.float32))


@pytest.mark.parametrize("drop", ["  wgmma.wait_group.sync.aligned 0;\n",
                                  "  wgmma.commit_group.sync.aligned;\n"])
def test_results_never_retired_are_reported(drop):
    image = np.zeros(16384, np.uint8)
    place(_values("f16", (64, 16)), "k", 128, 1, 1024, image, 0)
    place(_values("f16", (8, 16)), "k", 128, 1, 1024, image, 8192)
    ptx = kernel_ptx("m64n8k16", "f32", "f16", "f16",
                     [(descriptor(0, 16, 1024, 128), descriptor(8192, 16, 1024, 128))],
                     shared_bytes=16384).replace(drop, "")
    # nothing reads the accumulators afterwards (a read would land them)
    ptx = "\n".join(line for line in ptx.splitlines() if "st.global" not in line)
    with pytest.raises(sim.SimExecutionError, match="no wgmma.commit_group"):
        run_wgmma(ptx, image, np.zeros((128, 4), np.uint32))


# (what is done to the kernel, the writer the refusal names or None where the kernel runs)
FENCE_CASES = {
    "fenced": None,
    "accumulator written after the fence": "add.u32 %acc1",
    "A written after the fence": "add.u32 %a2",
    "no fence": "ld.global.b32 %acc3",
    "shfl writes an accumulator": "shfl.sync.idx.b32 %acc1|%p2",
    "predicated fence": "ld.global.b32 %acc3",
    "chained wgmma's": None,  # the same shape on the same accumulators needs no fence between
    "a branch target between": None,  # control may come from elsewhere: no verdict
}


@pytest.mark.parametrize("change", list(FENCE_CASES))
def test_registers_written_after_wgmma_fence_are_refused_in_our_code(change):
    """The ISA's wgmma.fence rule: an accumulator or A register another instruction wrote is
    read by wgmma.mma_async only after a wgmma.fence (else undefined: ptxas serialises the
    pipeline, or the hardware reads the earlier value; the emulator would read the new one).
    Refused in the JIT's own code; tileiras's code, which the emulator runs as ptxas would
    compile it, is not judged by it."""
    from tilebc_runtime.sim.machine import load_kernel
    image = np.zeros(16384, np.uint8)
    place(_values("f16", (64, 16)), "k", 128, 1, 1024, image, 0)
    place(_values("f16", (8, 16)), "k", 128, 1, 1024, image, 8192)
    fence = "  wgmma.fence.sync.aligned;\n"
    step = (descriptor(0, 16, 1024, 128), descriptor(8192, 16, 1024, 128))
    ptx = kernel_ptx("m64n8k16", "f32", "f16", "f16",
                     [step, step] if change == "chained wgmma's" else [step],
                     a_registers=change.startswith("A"), shared_bytes=16384)
    after_fence = {"accumulator written after the fence": "  add.u32 %acc1, %acc1, 0;\n",
                   "A written after the fence": "  add.u32 %a2, %a2, 0;\n",
                   "shfl writes an accumulator":
                       "  shfl.sync.idx.b32 %acc1|%p2, %acc1, 0, 31, -1;\n",
                   "a branch target between": "  add.u32 %acc1, %acc1, 0;\n$elsewhere:\n"}
    if change in after_fence:
        ptx = ptx.replace(fence, fence + after_fence[change])
    if change == "a branch target between":  # a branch (never taken) to the label
        ptx = ptx.replace(fence, "  setp.ne.u32 %p3, %r0, %r0;\n  @%p3 bra $elsewhere;\n" + fence)
    elif change == "no fence":
        ptx = ptx.replace(fence, "")
    elif change == "predicated fence":
        ptx = ptx.replace(fence, "  @%p1 wgmma.fence.sync.aligned;\n")
    writer = FENCE_CASES[change]
    for ours in (True, False):
        kernel = load_kernel(ptx, "k")
        kernel.serialize_wgmma = not ours
        if ours and writer is not None:
            with pytest.raises(sim.SimExecutionError,
                               match="since the last wgmma.fence, which the PTX ISA leaves "
                               "undefined .*: `" + re.escape(writer) + ".*with no wgmma.fence"):
                run_wgmma(kernel, image, np.zeros((128, 4), np.uint32), scale=1)
        else:
            run_wgmma(kernel, image, np.zeros((128, 4), np.uint32), scale=1)


def _one_wgmma(a_registers=False):
    """(shared-memory image, PTX) of one m64n8k16 wgmma: A 64x16 f16 at 0 (or in registers), B
    8x16 at 8192, both K-major with the 128-byte swizzle."""
    image = np.zeros(16384, np.uint8)
    if not a_registers:
        place(_values("f16", (64, 16)), "k", 128, 1, 1024, image, 0)
    place(_values("f16", (8, 16)), "k", 128, 1, 1024, image, 8192)
    a = None if a_registers else descriptor(0, 16, 1024, 128)
    ptx = kernel_ptx("m64n8k16", "f32", "f16", "f16", [(a, descriptor(8192, 16, 1024, 128))],
                     a_registers=a_registers, shared_bytes=16384)
    return image, ptx


def _run_as(ptx, image, ours, refused=None, match=None):
    """Run `ptx` as the JIT's own code (`ours`) or as tileiras's; with `refused`, expect that
    error."""
    from tilebc_runtime.sim.machine import load_kernel
    kernel = load_kernel(ptx, "k")
    kernel.serialize_wgmma = not ours
    if refused is None:
        run_wgmma(kernel, image, np.zeros((128, 4), np.uint32))
        return
    with pytest.raises(refused, match=match):
        run_wgmma(kernel, image, np.zeros((128, 4), np.uint32))


COMMIT = "  wgmma.commit_group.sync.aligned;\n"
WAIT = "  wgmma.wait_group.sync.aligned 0;\n"
AFTER_WAIT = "  ld.param.u64 %rd10, [pd];\n"
THREAD_0 = "  setp.eq.u32 %p2, %r0, 0;\n"


@pytest.mark.parametrize("where", ["before the wait", "after the wait"])
def test_a_registers_touched_before_the_wait_are_refused_in_our_code(where):
    """The ISA's rule for A in registers: no other instruction reads or writes them until a
    wgmma.wait_group retires the wgmma (the hardware may read them until then; the emulator
    reads them at issue). Refused in the JIT's own code; after the wait they are free again."""
    image, ptx = _one_wgmma(a_registers=True)
    anchor = COMMIT if where == "before the wait" else AFTER_WAIT
    ptx = ptx.replace(anchor, "  add.u32 %r9, %a1, 0;\n" + anchor)
    refused = where == "before the wait"
    _run_as(ptx, image, True, sim.SimExecutionError if refused else None,
            "touches an A register of `wgmma.mma_async.* before a wgmma.wait_group retires "
            "it.*`add.u32 %r9, %a1, 0`")
    _run_as(ptx, image, False)


def test_a_registers_stay_in_flight_past_a_wait_that_keeps_their_group():
    """`wgmma.wait_group 1` right after the wgmma's own commit keeps that group in flight: its A
    registers are still not to be touched (refused in our code)."""
    image, ptx = _one_wgmma(a_registers=True)
    ptx = ptx.replace(WAIT, "  wgmma.wait_group.sync.aligned 1;\n  add.u32 %r9, %a1, 0;\n" + WAIT)
    _run_as(ptx, image, True, sim.SimExecutionError, "touches an A register of `wgmma")


@pytest.mark.parametrize("where", ["into B before the wait", "into B after the wait",
                                   "beside the operands", "into A before the wait"])
def test_stores_to_shared_memory_a_wgmma_reads_in_flight_are_refused_in_our_code(where):
    """A wgmma.mma_async may read its shared-memory operands until a wgmma.wait_group retires
    it; the emulator reads them at issue, so in the JIT's own code a store to those bytes in
    between is refused (a stage refilled too early). Bytes it does not read are free."""
    image, ptx = _one_wgmma()
    anchor = AFTER_WAIT if where.endswith("after the wait") else COMMIT
    # A's first row at 0, B's at 8192; 12288 is past both
    offset = {"into A before the wait": 0, "beside the operands": 12288}.get(where, 8192)
    ptx = ptx.replace(anchor, f"{THREAD_0}  @%p2 st.shared.b32 [%r2+{offset}], %r0;\n" + anchor)
    refused = where.endswith("before the wait")
    _run_as(ptx, image, True, sim.SimMemoryError if refused else None,
            "overwrites shared memory that a wgmma.mma_async still in flight reads")
    _run_as(ptx, image, False)


def test_a_copy_issued_into_a_wgmmas_operand_in_flight_is_refused_in_our_code():
    """A bulk copy issued into B while the wgmma is in flight is refused when issued, though it
    lands only at its mbarrier's wait (after the wgmma's here): the hardware may land it at once."""
    image, ptx = _one_wgmma()
    ptx = ptx.replace(COMMIT, f"""  add.u32 %r12, %r2, 16000;
  add.u32 %r13, %r2, 8192;
{THREAD_0}  @%p2 mbarrier.init.shared::cta.b64 [%r12], 1;
  bar.sync 0;
  @%p2 mbarrier.arrive.expect_tx.shared::cta.b64 %rd12, [%r12], 16;
  @%p2 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r13], [%rd0], 16, [%r12];
""" + COMMIT).replace(WAIT, WAIT + """$mwait:
  mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r12], 0;
  @!%p3 bra $mwait;
""")
    _run_as(ptx, image, True, sim.SimExecutionError,
            "copies into shared memory that a wgmma.mma_async still in flight reads")
    _run_as(ptx, image, False)
