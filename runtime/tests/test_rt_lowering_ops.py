"""Lowerings of alloca, pack/unpack and mmaf_scaled: the PTX they produce and that it links."""
import re
import struct
from pathlib import Path

import pytest

import tilebc
from tilebc.text import parse_module

from tilebc_runtime.compiler import compile
from tilebc_runtime.lowering.lowerer import LoweringError
from tilebc_runtime.lowering.ptx import check_subset

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "bytecode"

SCRATCH = """
entry @scratch(%arg0: tile<ptr<f32>>) {{
  %0 = make_token : token
  %p = alloca num_elem = {count}, alignment = 16 : tile<ptr<f32>>
  %r = reshape %p : tile<ptr<f32>> -> tile<1xptr<f32>>
  %b = broadcast %r : tile<1xptr<f32>> -> tile<64xptr<f32>>
  %i = iota : tile<64xi32>
  %q = offset %b, %i : tile<64xptr<f32>>, tile<64xi32> -> tile<64xptr<f32>>
  %v = itof %i signed : tile<64xi32> -> tile<64xf32>
  %t = store_ptr_tko weak %q, %v token=%0 : tile<64xptr<f32>>, tile<64xf32> -> token
  %w, %t2 = load_ptr_tko weak %q token=%t : tile<64xptr<f32>> -> tile<64xf32>, token
  %ro = reshape %arg0 : tile<ptr<f32>> -> tile<1xptr<f32>>
  %bo = broadcast %ro : tile<1xptr<f32>> -> tile<64xptr<f32>>
  %o = offset %bo, %i : tile<64xptr<f32>>, tile<64xi32> -> tile<64xptr<f32>>
  %t3 = store_ptr_tko weak %o, %w token=%t2 : tile<64xptr<f32>>, tile<64xf32> -> token
  return
}}
"""


def _scratch_module(count):
    module = parse_module(SCRATCH.format(count=count), "scratch.mlir")
    module.version = tilebc.Version(13, 5)
    return module


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_alloca_is_tile_block_shared_memory(arch):
    result = compile(_scratch_module(64), arch=arch)
    ptx = result.ptx
    assert re.search(r"\.shared \.align 16 \.b8 __tilebc_k0_alloca0\[256\];", ptx)
    assert "cvta.shared.u64" in ptx
    # every access through a pointer is generic: the kernel argument and the scratch share code
    assert not re.search(r"\b(ld|st)\.global", ptx)
    assert re.search(r"\tst\.f32 \[%rd\d+\]", ptx) and re.search(r"\tld\.f32 %f\d+, \[%rd\d+\]", ptx)
    assert result.shared_memory_bytes >= 256
    assert check_subset(ptx) == ()


def test_alloca_without_room_is_refused():
    with pytest.raises(LoweringError, match=r"alloca: .*exceed the 49152-byte static shared memory"):
        compile(_scratch_module(1 << 20), arch="sm_90", emit="ptx")


def test_kernels_without_alloca_keep_global_accesses():
    result = compile(FIXTURES / "gather_scatter" / "gather_scatter-13.5.tilebc", arch="sm_90",
                     emit="ptx")
    assert re.search(r"ld\.global\.f32", result.ptx) and "cvta.shared" not in result.ptx


def test_pack_unpack_goes_through_the_byte_image():
    result = compile(FIXTURES / "pack_unpack" / "pack_unpack-13.5.tilebc", arch="sm_90")
    first = result.ptx.split(".visible .entry")[1]
    # f32 elements are written as f32 and read back as (sign-extended) bytes, and vice versa
    assert re.search(r"st\.shared\.f32", first) and re.search(r"ld\.shared\.s8", first)
    assert re.search(r"ld\.shared\.f32", first) and re.search(r"st\.shared\.u8", first)
    assert check_subset(result.ptx) == ()


def test_mmaf_scaled_applies_one_scale_per_k_block():
    result = compile(FIXTURES / "mma_scaled_fp8" / "mma_scaled_fp8-13.5.tilebc", arch="sm_90",
                     emit="ptx")
    # K = 64 with 2 scales per row: the block index is kk >> 5 for both operands
    assert len(re.findall(r"shr\.u32 %r\d+, %r\d+, 5;", result.ptx)) >= 2
    assert len(re.findall(r"mul\.rn\.f32", result.ptx)) >= 2


@pytest.mark.parametrize("arch", ["sm_80", "sm_100"])
def test_fp4_decodes_through_a_constant_table(arch):
    result = compile(FIXTURES / "cast_fp4" / "cast_fp4-13.5.tilebc", arch=arch, emit="ptx")
    table = re.search(r"\.const \.align 8 \.b8 (\w+)\[64\] = \{([^}]*)\}", result.ptx)
    assert table, "a 16-entry f32 decode table"
    words = [int(b) for b in table.group(2).split(",")]
    values = struct.unpack("<16f", bytes(words))
    assert values[:8] == (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
    assert values[8] == 0.0 and str(values[8]) == "-0.0" and values[15] == -6.0


def test_reduce_tree_shape_choice():
    from tilebc_runtime.lowering.reductions import choose_tree
    assert choose_tree(128, 1, 32) == (16, 1)      # one output: half-warp groups, 2 elements each
    assert choose_tree(128, 1, 4096) == (32, 4)    # long reduction: every warp takes a segment
    assert choose_tree(128, 4096, 4) == (1, 1)     # many short rows: one thread per output
    lanes, segments = choose_tree(128, 64, 64)
    assert lanes * segments <= 128 // 64 * 32 and lanes > 1


def test_commutative_reductions_butterfly_without_a_lane_order_fixup():
    # reduce_all_keepdims: a column sum and maximum of an 8x32 tile ([8, 32] over 128 threads:
    # each warp holds a column's rows 4k + warp), then the maximum over the 32 columns, whose
    # lanes are combined by butterflies that need no selp to keep lane order (maxf commutes)
    result = compile(FIXTURES / "reduce_all_keepdims" / "reduce_all_keepdims-13.5.tilebc",
                     arch="sm_90", emit="ptx")
    offsets = [int(m) for m in re.findall(r"shfl\.sync\.bfly\.b32 %r\d+, %r\d+, (\d+), 31, -1;",
                                          result.ptx)]
    assert offsets == [1, 2, 4, 8, 16]
    assert "selp.f32" not in result.ptx
    # two column reductions, each one shared-memory step across the warps
    assert result.ptx.count("bar.sync") == 4
    assert check_subset(result.ptx) == ()


def test_small_gather_index_tiles_are_read_by_shuffle():
    # advanced_indexing gathers 16x16 rows through a 16-element index tile: whole in every warp,
    # so the row indices come by shfl.sync.idx, without a shared-memory round trip
    result = compile(FIXTURES / "advanced_indexing" / "advanced_indexing-13.5.tilebc",
                     arch="sm_90", emit="ptx")
    assert "shfl.sync.idx.b32" in result.ptx
    assert "st.shared" not in result.ptx and "bar.sync" not in result.ptx
    assert check_subset(result.ptx) == ()
