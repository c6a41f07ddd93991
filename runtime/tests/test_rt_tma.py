"""TMA (the sm_90 default; compile(tma=False) turns it off): sm_90 wgmma K-loop stages filled by TMA (lowering/tma.py, matmul._KPipeline),
the tensor map records in the kernel metadata, the host-side maps built from launch arguments
(tensor_maps.py), and the emulator against the interpreter, ragged shapes included."""
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from test_rt_sim_mma import (FIXTURES, _aligned_gemm_views, _case_ptx, _check_ragged_k_loop,
                             _pipelined_k_loop_kernel, _quarters, interpret)
from tilebc.ir import TileType, f32
from tilebc.ir.builder import new_module
from tilebc_runtime import sim
from tilebc_runtime.compiler import compile as jit_compile
from tilebc_runtime.launch_errors import LaunchError

ALIGNED = FIXTURES / "la_gemm_aligned_tile" / "la_gemm_aligned_tile-13.5.tilebc"


def _loop(ptx):
    head, end = (re.search(rf"^\$L_{label}_\d+:", ptx, re.M).start() for label in ("for", "endfor"))
    return ptx[:head], ptx[head:end]


def test_aligned_gemm_fixture_fills_its_stages_with_tma():
    [ptx] = _case_ptx("la_gemm_aligned_tile", arch="sm_90")  # TMA is the sm_90 default
    [default] = _case_ptx("la_gemm_aligned_tile", arch="sm_90", tma=False)
    assert "cp.async.bulk.tensor" not in default and "cp.async.cg" in default
    assert _case_ptx("la_gemm_aligned_tile", arch="sm_90", tma=True) == [ptx]
    assert ptx.count(".param .align 64 .b8 ") == 2  # A's map and B's
    prologue, loop = _loop(ptx)
    assert "mbarrier.init.shared::cta.b64" in prologue
    # no memory write precedes the loop: only the stages' shared memory needs the proxy fence
    assert "\tfence.proxy.async.shared::cta;\n" in prologue
    assert "\tfence.proxy.async;\n" not in ptx
    # A: one 64x64 box; B [64, 128]: two 64-column boxes; one stage a K step, thread 0 alone
    assert loop.count("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier") == 3
    assert loop.count("mbarrier.try_wait.parity") == 1 and loop.count("bar.sync") == 1
    assert "mbarrier.arrive.expect_tx.shared::cta.b64" in loop and ", 24576;" in loop
    assert "cp.async.cg" not in ptx and "cp.async.wait_group" not in ptx
    # two 24 KiB stages (four CTAs an SM; matmul._WGMMA_STAGES_SHARE), no wgmma group in flight
    assert re.search(r"\.b8 __tilebc_k0_tma_bar\d+\[16\];", ptx)
    assert "wgmma.mma_async" in loop and "wgmma.wait_group.sync.aligned 0;" in loop


def test_tensor_map_records_name_the_arrays_and_the_boxes():
    result = jit_compile(ALIGNED, arch="sm_90", emit="ptx", tma=True)
    [info] = result.kernels.values()
    a, b = info.tensor_maps
    # A [M, K]: dims (K, M) = params 2, 1, row stride param 3; B [K, N] from param 5 on
    assert (a["array"], a["dims"], a["strides"]) == (0, [["param", 2], ["param", 1]], [["param", 3]])
    assert (b["array"], b["dims"], b["strides"]) == (5, [["param", 7], ["param", 6]], [["param", 8]])
    for record in (a, b):
        assert (record["element"], record["rank"], record["box"], record["swizzle"],
                record["oob_fill"], record["interleave"]) == ("f16", 2, [64, 64], 128, "zero", "none")
        assert f".param .align 64 .b8 {record['param']}[128]" in result.ptx
    json.dumps(info.tensor_maps)  # cache metadata and AOT facts are JSON
    plain = jit_compile(ALIGNED, arch="sm_90", emit="ptx", tma=False)
    assert next(iter(plain.kernels.values())).tensor_maps == ()
    from tilebc_runtime.aot import _jit_facts
    assert next(iter(_jit_facts(result).values()))["tensor_maps"] == list(info.tensor_maps)
    assert "tensor_maps" not in next(iter(_jit_facts(plain).values()))


def _gemm_loop(m, n, k, align=16, a_row_block=None, store_first=False, trips=None):
    """C[bid] += A[row block, i] @ B[i, bid.y] over the K loop, from _aligned_gemm_views:
    `a_row_block` "zero" reads A's row block 0 in every CTA (else the CTA's own), `store_first`
    writes C back before the loop, `trips` a constant trip count (else the kernel's argument)."""
    module = new_module("13.5")
    b, (a_view, b_view, out) = _aligned_gemm_views(module, "f16", m, n, k, loop_counts=1,
                                                   align=align)
    token = b.make_token()
    bid = b.get_tile_block_id()
    zero, one = b.constant(0, "i32"), b.constant(1, "i32")
    acc0, _ = b.load(out, [bid[0], bid[1]], token=token)
    if store_first:
        b.store(acc0, out, [bid[0], bid[1]], token=token)
    row = zero if a_row_block == "zero" else bid[0]

    def body(lb, i, acc):
        lhs, _ = lb.load(a_view, [row, i], token=token)
        rhs, _ = lb.load(b_view, [i, bid[1]], token=token)
        return [lb.mmaf(lhs, rhs, acc, result_types=[TileType((m, n), f32)])]
    upper = b.args[15] if trips is None else b.constant(trips, "i32")
    product = b.for_(zero, upper, one, [acc0], body)
    b.store(product, out, [bid[0], bid[1]], token=token)
    b.return_([])
    return module


def test_a_loop_too_short_to_pipeline_declares_no_tensor_maps():
    """One constant trip: no pipeline, so no maps among the kernel's parameters either (each
    would be built on every launch for nothing)."""
    short = jit_compile(_gemm_loop(64, 128, 64, trips=1), entry="k", arch="sm_90", emit="ptx",
                        threads=128, wgmma=True, tma=True)
    assert short.kernels["k"].tensor_maps == () and ".b8 " not in short.ptx.split("{")[0]
    longer = jit_compile(_gemm_loop(64, 128, 64, trips=4), entry="k", arch="sm_90", emit="ptx",
                         threads=128, wgmma=True, tma=True)
    assert len(longer.kernels["k"].tensor_maps) == 2 and "cp.async.bulk.tensor" in longer.ptx


def test_kernel_whose_facts_do_not_allow_tma_keeps_cp_async():
    """Views only 8-byte aligned: cp.async still stages them (8-byte runs), but TMA needs a
    16-byte-aligned base and row stride, so tma=True changes nothing."""
    module = _gemm_loop(64, 128, 64, align=8)
    result = jit_compile(module, entry="k", arch="sm_90", emit="ptx", threads=128, wgmma=True,
                         tma=True)
    assert "cp.async.bulk.tensor" not in result.ptx and "mbarrier" not in result.ptx
    assert "cp.async.ca.shared.global" in result.ptx and "wgmma.mma_async" in result.ptx
    assert result.kernels["k"].tensor_maps == ()


def test_maps_are_planned_only_for_types_the_launchers_encode():
    from tilebc_runtime import tensor_maps
    from tilebc_runtime.lowering import tma
    assert set(tma.ELEMENTS) == set(tensor_maps.ELEMENT_BYTES)
    cpp = (FIXTURES.parents[1] / "runtime" / "cpp" / "src" / "tensor_map.cpp").read_text()
    assert "element must be f16 or bf16" in cpp  # the C++ loader's refusal of any other


def test_tma_is_sm_90_only():
    for arch in ("sm_80", "sm_100"):
        ptx = jit_compile(ALIGNED, arch=arch, emit="ptx", tma=True).ptx
        assert "cp.async.bulk.tensor" not in ptx, arch


@pytest.mark.parametrize("trips,rows", [(0, 64), (1, 69), (3, 133), (5, 64)])
def test_tma_k_loop_on_emulator_matches_the_interpreter(trips, rows):
    """Ragged M (rows), N (cols = 2n - 8) and K (64 trips - 8: the last box's tail lies past
    the tensor and is zero-filled), 4 stages two ahead over 0, 1, 3 and 5 iterations (phases
    wrap); the emulator lands a box only when its mbarrier phase is waited for."""
    m, n, k = 64, 128, 64
    module = _pipelined_k_loop_kernel(m, n, k)
    ptx = jit_compile(module, entry="k", arch="sm_90", emit="ptx", threads=128, wgmma=True,
                      tma=True).ptx
    assert "cp.async.bulk.tensor" in ptx
    kk = max(k * trips - 8, 0)  # trips 0: K = 0, the maps over A and B are empty
    _check_ragged_k_loop(module, m, n, kk, trips, rows, wgmma=True, tma=True)


def test_tma_over_rows_of_an_empty_array_reads_zeros():
    """M rows of an A whose K extent is 0 while the loop still runs (trips 2): every box is
    out of bounds, so the emulator's maps over the zero scratch give zeros and C is unchanged,
    as in the interpreter."""
    m, n, k = 64, 128, 64
    module = _pipelined_k_loop_kernel(m, n, k)
    _check_ragged_k_loop(module, m, n, 0, 2, 69, wgmma=True, tma=True)  # A @ B = 0: C stays


def test_aligned_gemm_fixture_with_k_0_on_emulator():
    """la_gemm_aligned_tile with K = 0 (an empty batch of products) through its TMA code on the
    emulator: relu(bias) in every row, as the interpreter gives."""
    import tilebc
    module = tilebc.load(ALIGNED.read_bytes())
    entry = module.functions[0].name
    [ptx] = _case_ptx("la_gemm_aligned_tile", arch="sm_90")
    assert "cp.async.bulk.tensor" in ptx
    m, n = 128, 256
    bias = _quarters(np.float16, (n,))
    results = []
    for runner in (interpret, sim.run):
        a, b = np.zeros((m, 0), np.float16), np.zeros((0, n), np.float16)
        c = np.full((m, n), np.nan, np.float16)
        runner(module, entry, (4,), a, b, bias, c)
        results.append(c)
    np.testing.assert_array_equal(results[1], results[0])
    np.testing.assert_array_equal(results[0], np.broadcast_to(np.maximum(bias, 0), (m, n)))


@pytest.mark.parametrize("name,boxes", [("la_gemm_aligned_tile", 3), ("la_bmm_aligned_tile", 2),
                                        ("nn_flash_attention_tile", 2)])
def test_fixtures_taking_tma_on_emulator_match_the_interpreter(name, boxes):
    """The fixtures whose sm_90 wgmma K loops take TMA (the aligned GEMM: 128 x 256 output in
    2 x 2 CTAs, K = 96, a ragged second box; the batched GEMM: 3-d maps over (1, rows, 64)
    boxes, B its [N, K] source), their own cases on the emulator: tma=True PTX gives the bits
    of the cp.async PTX (the same wgmma's on the same stage contents), and the interpreter's
    values up to f32 summation order."""
    [ptx] = _case_ptx(name, arch="sm_90", tma=True)
    assert _loop(ptx)[1].count("cp.async.bulk.tensor") == boxes
    assert _case_both_ways(name)


def _case_both_ways(name):
    """Fixture `name`'s own case, each launch run by the interpreter and on the emulator at
    sm_90 with TMA and with cp.async stages: the two emulated runs bit for bit, and the
    interpreter's values up to f32 summation order. Returns the entries compared."""
    import importlib
    sys.path.insert(0, str(FIXTURES.parents[1] / "tests"))
    from fixture_cases import CASE_MODULES
    reference = next(importlib.import_module(m) for m in CASE_MODULES
                     if name in importlib.import_module(m).CASES)
    compared = []

    def both(module, entry, grid, *args, **kwargs):
        copies = [np.array(x, copy=True) if isinstance(x, np.ndarray) else x for x in args]
        staged = [np.array(x, copy=True) if isinstance(x, np.ndarray) else x for x in args]
        interpret(module, entry, grid, *copies)
        sim.run(module, entry, grid, *staged, arch="sm_90", tma=False)
        sim.run(module, entry, grid, *args, arch="sm_90")
        for mine, cp_async, theirs in zip(args, staged, copies):
            if isinstance(mine, np.ndarray):
                np.testing.assert_array_equal(mine, cp_async)
                np.testing.assert_allclose(mine.astype(np.float64), theirs.astype(np.float64),
                                           rtol=2e-3, atol=1e-3)
        compared.append(entry)
    saved = reference.run
    reference.run = both
    try:
        reference.CASES[name](reference.module(name, reference.versions(name)[-1]))
    finally:
        reference.run = saved
    return compared


def _ptxas():
    found = shutil.which("ptxas")
    try:
        import nvidia.cu13
        candidate = os.path.join(list(nvidia.cu13.__path__)[0], "bin", "ptxas")
        found = candidate if os.path.exists(candidate) else found
    except ImportError:
        pass
    return found


def test_tma_ptx_links_for_sm_90a_without_spills(tmp_path):
    result = jit_compile(ALIGNED, arch="sm_90", emit="cubin", tma=True)
    assert ".target sm_90a" in result.ptx and result.cubin[:4] == b"\x7fELF"
    ptxas = _ptxas()
    if ptxas is None:
        pytest.skip("no ptxas here")
    source = tmp_path / "k.ptx"
    source.write_text(result.ptx)
    done = subprocess.run([ptxas, "-arch=sm_90a", "-v", str(source), "-o", str(tmp_path / "k.o")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in done.stderr


def test_host_maps_come_from_the_launch_arguments():
    from tilebc_runtime.tensor_maps import for_emulator, over_zeros, resolve
    record = {"param": "k_tmap_0", "array": 0, "element": "f16", "rank": 2,
              "dims": [["param", 2], ["const", 100]], "strides": [["param", 3]],
              "box": [64, 32], "swizzle": 128, "oob_fill": "zero", "interleave": "none"}
    values = [np.uint64(0x10000), np.int32(100), np.int32(72), np.int32(80)]
    found = resolve(record, values)
    assert (found.address, found.dims, found.strides, found.box) == \
        (0x10000, (72, 100), (160,), (64, 32))
    assert for_emulator(found).problem() is None
    with pytest.raises(LaunchError, match="16-byte aligned"):
        resolve(record, [np.uint64(0x10008)] + values[1:])
    with pytest.raises(LaunchError, match="extents"):
        resolve(record, values[:2] + [np.int32(-1), values[3]])
    # an empty array: base and strides are not read, the map goes over the zero scratch
    empty = resolve(record, [np.uint64(0x10008), np.int32(100), np.int32(0), np.int32(77)])
    assert empty.empty and empty.dims == (0, 100) and not found.empty
    moved = over_zeros(empty, 0x4000)
    assert (moved.address, moved.dims, moved.strides, moved.box, moved.swizzle, moved.element) \
        == (0x4000, (1, 1), (16,), (64, 32), 128, "f16")
    assert for_emulator(moved).problem() is None
    assert over_zeros(found, 0x4000) is found
    with pytest.raises(LaunchError, match="not 16-byte aligned"):
        over_zeros(empty, 0x4008)
    with pytest.raises(LaunchError, match="multiples of 16"):
        resolve(record, values[:3] + [np.int32(76)])
    # a constant zero extent (a view of static shape 0) is an empty array too
    static_empty = resolve({**record, "dims": [["param", 2], ["const", 0]]}, values)
    assert static_empty.empty and static_empty.dims == (72, 0)
    # metadata a cache handed over that lacks a field, or names a parameter past the launch's
    for broken in ({k: v for k, v in record.items() if k != "rank"}, {**record, "array": 9}):
        with pytest.raises(LaunchError, match="malformed"):
            resolve(broken, values)


def test_jit_backend_metadata_carries_the_maps():
    from tilebc_runtime.launch import JitBackend
    data = ALIGNED.read_bytes()
    import tilebc
    entry = tilebc.load(data).functions[0].name
    _, metadata = JitBackend().compile(data, entry, "sm_90", {"tma": True})
    assert [m["box"] for m in metadata["tensor_maps"]] == [[64, 64], [64, 64]]
    _, default = JitBackend().compile(data, entry, "sm_90", {})
    assert default["tensor_maps"] == metadata["tensor_maps"]
    _, plain = JitBackend().compile(data, entry, "sm_90", {"tma": False})
    assert "tensor_maps" not in plain


@pytest.mark.parametrize("share,stages,lag", [(3, 3, 1), (4, 2, 0)])
def test_fewer_tma_stages_with_and_without_a_wgmma_group_in_flight(monkeypatch, share, stages,
                                                                   lag):
    """Less shared memory for the stages: 3 (copies one iteration ahead, a wgmma group left in
    flight) or 2 (no group in flight: the stage is refilled right after the barrier); phases
    wrap every `stages` iterations."""
    from tilebc_runtime.lowering import matmul
    monkeypatch.setattr(matmul, "_WGMMA_STAGES_SHARE", share)
    monkeypatch.setattr(matmul, "_LARGE_STAGES_SHARE", 1)  # not the two-stage default for 24 KiB
    m, n, k, trips, rows = 64, 128, 64, 5, 69
    module = _pipelined_k_loop_kernel(m, n, k)
    ptx = jit_compile(module, entry="k", arch="sm_90", emit="ptx", threads=128, wgmma=True,
                      tma=True).ptx
    assert f".b8 __tilebc_k0_tma_bar" in ptx and f"[{8 * stages}];" in ptx
    assert (f"wgmma.wait_group.sync.aligned {lag};" in _loop(ptx)[1])
    _check_ragged_k_loop(module, m, n, k * trips - 8, trips, rows, wgmma=True, tma=True)


@pytest.mark.parametrize("m,n,k,stages,lag", [(64, 128, 64, 2, 0), (64, 64, 64, 2, 0)])
def test_tma_stage_count_keeps_four_ctas_an_sm(m, n, k, stages, lag):
    """TMA-filled wgmma stages: four (a wgmma group in flight) only where four fit in a quarter of
    the opt-in shared memory, else two; on sm_90 the smallest TMA stage (16 KiB) already takes two
    (24 KiB: two CTAs an SM over four stages ran a 2048³ GEMM 1.11x slower on an H200 than four
    CTAs over two)."""
    module = _pipelined_k_loop_kernel(m, n, k)
    ptx = jit_compile(module, entry="k", arch="sm_90", emit="ptx", threads=128, wgmma=True,
                      tma=True).ptx
    assert re.search(rf"\.b8 __tilebc_k0_tma_bar\d+\[{8 * stages}\];", ptx)
    assert f"wgmma.wait_group.sync.aligned {lag};" in _loop(ptx)[1]
    _check_ragged_k_loop(module, m, n, k * 3 - 8, 3, m + 5, wgmma=True, tma=True)


def test_encode_asks_the_driver_for_the_recorded_tiled_map(monkeypatch):
    from cuda.bindings import driver as cu
    from tilebc_runtime import tensor_maps
    seen = []

    def fake_encode(*args):
        seen.append(args)
        mapped = cu.CUtensorMap()
        return (cu.CUresult.CUDA_SUCCESS, mapped)
    monkeypatch.setattr(cu, "cuTensorMapEncodeTiled", fake_encode)
    found = tensor_maps.TiledMap("k_tmap_0", "bf16", 0x20000, (72, 100, 3), (160, 16000),
                                 (64, 32, 1), 128)
    mapped = tensor_maps.encode(found)
    [(kind, rank, address, dims, strides, box, steps, interleave, swizzle, l2, fill)] = seen
    assert kind == cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 and rank == 3
    assert address == 0x20000 and [int(d) for d in dims] == [72, 100, 3]
    assert [int(s) for s in strides] == [160, 16000] and [int(b) for b in box] == [64, 32, 1]
    assert [int(s) for s in steps] == [1, 1, 1]
    assert interleave == cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE
    assert swizzle == cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B
    assert fill == cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE  # zeros
    argument = tensor_maps.kernel_argument(mapped)
    assert len(bytes(argument)) == 128


def test_constant_tile_indices_become_box_coordinates():
    """A loaded at the constant row block 0 in every CTA (a loop-invariant, non-block index):
    every CTA's product reads rows 0..63 through the same map."""
    m, n, k, trips = 64, 128, 64, 3
    module = _gemm_loop(m, n, k, a_row_block="zero")
    ptx = jit_compile(module, entry="k", arch="sm_90", emit="ptx", threads=128, wgmma=True,
                      tma=True).ptx
    assert _loop(ptx)[1].count("cp.async.bulk.tensor") == 3
    kk, cols = k * trips, 2 * n
    a = _quarters(np.float16, (m, kk))
    bb = _quarters(np.float16, (kk, cols))
    c = _quarters(np.float32, (2 * m, cols))
    expected, actual = c.copy(), c.copy()
    interpret(module, "k", (2, 2), a, bb, expected, np.int32(trips))
    sim.run(module, "k", (2, 2), a, bb, actual, np.int32(trips), arch="sm_90", threads=128,
            wgmma=True, tma=True)
    np.testing.assert_array_equal(actual, expected)
    np.testing.assert_array_equal(expected[64:], a.astype(np.float64) @ bb.astype(np.float64)
                                  + c[64:])


def test_a_store_before_the_k_loop_is_fenced_from_the_tma_reads():
    """C is written back before the K loop (as a kernel reading an array it wrote might): every
    thread's generic-proxy writes must be fenced from TMA's async reads (fence.proxy.async over
    every state space, then the barrier), and the results stay the interpreter's."""
    m, n, k, trips = 64, 128, 64, 3
    module = _gemm_loop(m, n, k, store_first=True)
    ptx = jit_compile(module, entry="k", arch="sm_90", emit="ptx", threads=128, wgmma=True).ptx
    prologue, loop = _loop(ptx)
    assert "cp.async.bulk.tensor" in loop and "\tfence.proxy.async;\n" in prologue
    kk, cols = k * trips, 2 * n
    a = _quarters(np.float16, (2 * m, kk))
    bb = _quarters(np.float16, (kk, cols))
    c = _quarters(np.float32, (2 * m, cols))
    expected, actual = c.copy(), c.copy()
    interpret(module, "k", (2, 2), a, bb, expected, np.int32(trips))
    sim.run(module, "k", (2, 2), a, bb, actual, np.int32(trips), arch="sm_90", threads=128,
            wgmma=True)
    np.testing.assert_array_equal(actual, expected)


def test_attention_at_head_dim_128_copies_and_waits_for_each_tile_in_its_iteration():
    """nn_flash_attention_tile's head-dim-128 entry (64 query rows, 128-key tiles: 64 KiB of K
    and V an iteration, so no two stages fit): each iteration copies its K and V tiles with
    cp.async and waits for each before its product, TMA allowed or not (the same PTX); Q's
    fragments stay in registers (every wgmma takes A from registers). One buffer per operand
    refilled right after its product (the next iteration's copy in flight meanwhile) gave wrong
    results on an H100 and an H200 from the second key tile on, with TMA and with cp.async alike,
    while the emulator matched the interpreter (benchmarks/results/gpu.md); this form is the one
    checked there."""
    import tilebc
    path = FIXTURES / "nn_flash_attention_tile" / "nn_flash_attention_tile-13.5.tilebc"
    entry = tilebc.load(path.read_bytes()).functions[2].name
    ptx = jit_compile(path, entry=entry, arch="sm_90", emit="ptx", tma=True).ptx
    assert ptx == jit_compile(path, entry=entry, arch="sm_90", emit="ptx", tma=False).ptx
    before, loop = _loop(ptx)
    products = re.findall(r"wgmma\.mma_async\S* \{[^}]*\}, (\S)", loop)
    assert len(products) == 16 and set(products) == {"{"}  # A from registers
    assert "ldmatrix" in before and "ldmatrix" not in loop
    assert "cp.async.bulk" not in ptx and "mbarrier" not in ptx
    assert "cp.async.cg" not in before
    # K copied and waited for, its product; then V copied and waited for, its product
    k_wait = loop.find("cp.async.wait_group 0")
    v_wait = loop.find("cp.async.wait_group 0", k_wait + 1)
    first = loop.find("wgmma.mma_async")
    second = loop.find("wgmma.mma_async", loop.find("wgmma.wait_group", first))
    assert 0 <= loop.find("cp.async.cg") < k_wait < first
    assert first < loop.find("cp.async.cg", first) < v_wait < second
    assert loop.count("cp.async.wait_group") == 2


def test_persistent_gemm_fills_deeper_stages_and_matches_on_emulator():
    """la_gemm_persistent's production entry (128x128 tiles, K steps of 64, each CTA striding over
    output tiles by the grid size): its K loop takes five 32 KiB stages where a one-tile-a-CTA
    GEMM of the same tiles takes two (no other CTA on the SM hides its loads). Its case on the
    emulator, with TMA and with cp.async stages, gives the interpreter's values."""
    import tilebc
    path = FIXTURES / "la_gemm_persistent" / "la_gemm_persistent-13.5.tilebc"
    entry = tilebc.load(path.read_bytes()).functions[1].name
    ptx = jit_compile(path, entry=entry, arch="sm_90", emit="ptx").ptx
    assert ptx.count("mbarrier.init") == 5
    one_tile = jit_compile(ALIGNED, arch="sm_90", emit="ptx").ptx
    assert one_tile.count("mbarrier.init") == 2
    assert entry in _case_both_ways("la_gemm_persistent")
