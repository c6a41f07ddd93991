"""Pointer tiles made as base + row * stride + (chunk + iota), with cuTile's alignment facts on
the base, the row stride and the row length, point at aligned runs of consecutive elements
(lowering/vectors.run_facts). Every tile of that shape is then laid out in Blocked(vec) and each
load_ptr_tko / store_ptr_tko moves vec elements in one ld/st.v (NVIDIA's RMS-norm gather kernel
reads rows so): the values, masked tails and loop-carried sums equal the interpreter's on sm_80
and sm_90, in an unrolled and in a rolled loop; without the facts the accesses stay scalar."""
import numpy as np
import pytest

from tilebc.interp import run as interpret
from tilebc.text import parse_module

from tilebc_runtime import sim
from tilebc_runtime.compiler import compile as jit_compile

CHUNK = 256


def _kernel(aligned: bool, chunks: str) -> str:
    """Row b of x (f16, `cols` long, in CHUNK-element pieces: the loop runs `chunks` times, a
    constant or the argument %chunks) times 2 into y; the row's f32 sum into sums[b]."""
    def fact(name, kind):
        return [f"  %{name}_a = assume div_by<16>, %{name} : tile<{kind}>"] if aligned else \
            [f"  %{name}_a = assume bounded<0, ?>, %{name} : tile<{kind}>"]

    def spread(name, scalar, element):
        return [f"  %{name}_r = reshape {scalar} : tile<{element}> -> tile<1x{element}>",
                f"  %{name} = broadcast %{name}_r : tile<1x{element}> -> tile<{CHUNK}x{element}>"]
    bound = "%chunks" if chunks == "argument" else "%four"
    lines = [
        "entry @rows(%x: tile<ptr<f16>>, %xr: tile<i32>, %cols: tile<i32>, %stride: tile<i32>, "
        "%xc: tile<i32>, %y: tile<ptr<f16>>, %yr: tile<i32>, %ycols: tile<i32>, "
        "%ystride: tile<i32>, %yc: tile<i32>, %sums: tile<ptr<f32>>, %sn: tile<i32>, "
        "%ss: tile<i32>, %chunks: tile<i32>) optimization_hints=<default = {}> {",
        "  %token = make_token : token",
        "  %zero = constant <i32: 0> : tile<i32>",
        "  %one = constant <i32: 1> : tile<i32>",
        "  %four = constant <i32: 4> : tile<i32>",
        f"  %width = constant <i32: {CHUNK}> : tile<i32>",
        f"  %fzero = constant <f32: 0.000000e+00> : tile<{CHUNK}xf32>",
        f"  %two = constant <f16: 2.000000e+00> : tile<{CHUNK}xf16>",
        f"  %pad = constant <f16: 0.000000e+00> : tile<{CHUNK}xf16>",
        "  %bid, %bid_y, %bid_z = get_tile_block_id : tile<i32>",
        f"  %iota = iota : tile<{CHUNK}xi32>"]
    lines += fact("x", "ptr<f16>") + fact("y", "ptr<f16>") + fact("cols", "i32") \
        + fact("stride", "i32")
    lines += ["  %row = muli %bid, %stride_a : tile<i32>"]
    lines += spread("rows", "%row", "i32") + spread("limit", "%cols_a", "i32")
    lines += spread("xs", "%x_a", "ptr<f16>") + spread("ys", "%y_a", "ptr<f16>")
    lines += [
        f"  %sum = for %c in (%zero to {bound}, step %one) : tile<i32> iter_values(%acc = %fzero)"
        f" -> (tile<{CHUNK}xf32>) {{",
        "    %start = muli %c, %width : tile<i32>"]
    lines += ["  " + line for line in spread("starts", "%start", "i32")]
    lines += [
        f"    %col = addi %starts, %iota : tile<{CHUNK}xi32>",
        f"    %in = cmpi less_than %col, %limit, signed : tile<{CHUNK}xi32> -> tile<{CHUNK}xi1>",
        f"    %at = addi %rows, %col : tile<{CHUNK}xi32>",
        f"    %px = offset %xs, %at : tile<{CHUNK}xptr<f16>>, tile<{CHUNK}xi32> -> "
        f"tile<{CHUNK}xptr<f16>>",
        f"    %v, %vt = load_ptr_tko weak %px, %in, %pad token=%token : tile<{CHUNK}xptr<f16>>, "
        f"tile<{CHUNK}xi1>, tile<{CHUNK}xf16> -> tile<{CHUNK}xf16>, token",
        f"    %w = mulf %v, %two : tile<{CHUNK}xf16>",
        f"    %py = offset %ys, %at : tile<{CHUNK}xptr<f16>>, tile<{CHUNK}xi32> -> "
        f"tile<{CHUNK}xptr<f16>>",
        f"    %st = store_ptr_tko weak %py, %w, %in token=%token : tile<{CHUNK}xptr<f16>>, "
        f"tile<{CHUNK}xf16>, tile<{CHUNK}xi1> -> token",
        f"    %wide = ftof %v : tile<{CHUNK}xf16> -> tile<{CHUNK}xf32>",
        f"    %next = addf %acc, %wide : tile<{CHUNK}xf32>",
        f"    continue %next : tile<{CHUNK}xf32>",
        "  }",
        f"  %total = reduce %sum dim=0 identities=[0.000000e+00 : f32] : tile<{CHUNK}xf32> -> "
        "tile<f32>",
        "  (%l: tile<f32>, %r: tile<f32>) {",
        "    %s = addf %l, %r : tile<f32>",
        "    yield %s : tile<f32>",
        "  }",
        "  %ps = offset %sums, %bid : tile<ptr<f32>>, tile<i32> -> tile<ptr<f32>>",
        "  %done = store_ptr_tko weak %ps, %total token=%token : tile<ptr<f32>>, tile<f32> -> token",
        "  return", "}"]
    return "\n".join(lines) + "\n"


def _aligned(shape, dtype):
    """A zeroed array whose rows start 16-byte aligned (the kernel's assume div_by facts)."""
    array = np.zeros(shape, dtype)
    assert array.ctypes.data % 16 == 0 and array.strides[0] % 16 == 0
    return array


def _run(runner, module, x, cols, **options):
    rows = x.shape[0]
    y = _aligned(x.shape, np.float16)
    sums = np.zeros(rows, np.float32)
    view = x[:, :cols]
    runner(module, "rows", (rows,), view, y[:, :cols], sums, 4, **options)
    return y, sums


@pytest.mark.parametrize("arch", ("sm_80", "sm_90"))
@pytest.mark.parametrize("chunks", ("constant", "argument"))
def test_row_gathers_match_the_interpreter(chunks, arch):
    module = parse_module(_kernel(True, chunks))
    x = _aligned((3, 4 * CHUNK), np.float16)
    x[:] = np.random.default_rng(4).standard_normal(x.shape)
    cols = 4 * CHUNK - 48  # the last chunk's tail is masked: whole runs of 16 elements
    expected = _run(interpret, module, x, cols)
    assert np.array_equal(expected[0][:, :cols], x[:, :cols] * 2)
    actual = _run(sim.run, module, x, cols, arch=arch)
    assert np.array_equal(actual[0].view(np.uint16), expected[0].view(np.uint16))
    assert np.allclose(actual[1], expected[1], rtol=1e-5)


@pytest.mark.parametrize("chunks", ("constant", "argument"))
def test_aligned_rows_move_four_elements_per_access(chunks):
    ptx = jit_compile(parse_module(_kernel(True, chunks)), "rows", "sm_90", emit="ptx").ptx
    # 256 elements over 128 threads: 2 per thread, one run; unrolled 4 times or once in a loop
    accesses = 4 if chunks == "constant" else 1
    assert ptx.count("ld.global.v2.b16") == ptx.count("st.global.v2.b16") == accesses
    assert "ld.global.b16" not in ptx and "st.global.b16" not in ptx
    plain = jit_compile(parse_module(_kernel(False, chunks)), "rows", "sm_90", emit="ptx").ptx
    assert ".v2." not in plain and ".v4." not in plain


def _variant(old: str, new: str, chunks: str = "constant") -> str:
    text = _kernel(True, chunks)
    assert old in text
    return text.replace(old, new)


# a start one element past the aligned one, and the row bound compared the other way round
MISALIGNED = ("    %col = addi %starts, %iota : tile<256xi32>\n",
              "    %col0 = addi %starts, %iota : tile<256xi32>\n"
              "    %ones = broadcast %one_r : tile<1xi32> -> tile<256xi32>\n"
              "    %col = addi %col0, %ones : tile<256xi32>\n")
SWAPPED = ("cmpi less_than %col, %limit, signed", "cmpi greater_than %limit, %col, signed")


def _same_as_interpreter(module, arch: str) -> str:
    """The emulator's y on `arch` equals the interpreter's, bit for bit; the kernel's PTX."""
    x = _aligned((2, 4 * CHUNK), np.float16)
    x[:] = np.random.default_rng(6).standard_normal(x.shape)
    expected = _run(interpret, module, x, 4 * CHUNK - 48)
    actual = _run(sim.run, module, x, 4 * CHUNK - 48, arch=arch)
    assert np.array_equal(actual[0].view(np.uint16), expected[0].view(np.uint16))
    return jit_compile(module, "rows", arch, emit="ptx").ptx


def test_a_misaligned_run_stays_scalar_and_right():
    old, new = MISALIGNED
    text = _variant(old, new).replace(
        "  %row = muli", "  %one_r = reshape %one : tile<i32> -> tile<1xi32>\n  %row = muli")
    ptx = _same_as_interpreter(parse_module(text), "sm_90")
    assert ".v2." not in ptx and ".v4." not in ptx


def test_the_bound_on_either_side_of_the_comparison_masks_whole_runs():
    ptx = _same_as_interpreter(parse_module(_variant(*SWAPPED)), "sm_80")
    assert ptx.count("ld.global.v2.b16") == 4


def test_run_facts_claim_nothing_they_cannot_prove():
    from tilebc_runtime.lowering import families  # noqa: F401  (registers the lowerings)
    from tilebc_runtime.lowering.lowerer import Lowerer
    from tilebc_runtime.lowering.vectors import run_facts
    text = _kernel(True, "argument").replace(
        "    %at = addi %rows, %col : tile<256xi32>\n",
        "    %at = addi %rows, %col : tile<256xi32>\n"
        "    %twice = addi %col, %col : tile<256xi32>\n"
        "    %edge = cmpi less_than_or_equal %col, %limit, signed : tile<256xi32> -> "
        "tile<256xi1>\n")
    module = parse_module(text)
    function = module.functions[0]
    lw = Lowerer(module, function, threads=128, arch=90)
    loop = next(op for op in function.walk() if op.regions)
    body = [op.name for op in loop.regions[0].blocks[0].ops]
    assert body[3:9] == ["addi", "cmpi", "addi", "addi", "cmpi", "offset"], body
    values = dict(zip(("col", "in", "at", "twice", "edge", "px"),
                      (op.results[0] for op in loop.regions[0].blocks[0].ops[3:9])))
    values["iota"] = next(op for op in function.walk() if op.name == "iota").results[0]

    def facts(name):
        found = run_facts(lw, values[name])
        return found.contig, found.const, found.div
    assert facts("iota") == (CHUNK, 1, 1 << 30)
    assert facts("col") == (CHUNK, 1, CHUNK)  # chunk * 256 + iota: runs start at multiples
    assert facts("twice")[0] == 1             # 2 * col steps by two
    assert facts("in")[1] == 16               # col < cols, cols div_by 16
    assert facts("edge")[1] == 1              # col <= cols flips inside a run
    assert facts("px")[0] == CHUNK and facts("px")[2] == 16  # bytes: the base's div_by 16
    # the loop-carried sum is a block argument: nothing is known of it
    carried = loop.regions[0].blocks[0].args[1]
    found = run_facts(lw, carried)
    assert (found.contig, found.const, found.div) == (1, 1, 1)
