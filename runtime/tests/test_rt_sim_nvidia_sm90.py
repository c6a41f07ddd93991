"""NVIDIA's sm_90 code generation on our PTX emulator: tileiras --gpu-name=sm_90 (PTX `.target
sm_90a`) for fixture kernels, run by `sim.nvidia.run`, matches the numpy references of
tests/test_interp_*.py. Each case names what of tileiras's Hopper code it exercises; the PTX is
checked to contain it, so a case cannot pass without running the instruction. The sweep over
every fixture is `python -m tilebc_runtime.sim.nvidia_sweep --arch sm_90`
(benchmarks/results/sim-nvidia-sm90.md).
"""
import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from tilebc.oracles import tool_path  # noqa: E402
from tilebc_runtime.sim import nvidia  # noqa: E402

pytestmark = pytest.mark.skipif(tool_path("tileiras") is None,
                                reason="NVIDIA tileiras is not installed")

# fixture -> (case module, text tileiras's sm_90 PTX must contain)
CASES = {
    "matmul_f16": ("test_interp_fixtures", "%clusterid.x"),  # CTA id of a one-CTA cluster
    "la_gemm_large_tile": ("test_interp_linalg", "wgmma.mma_async.sync.aligned.m64n128k16"),
    "la_syrk_lower": ("test_interp_linalg", "cp.async.mbarrier.arrive.noinc"),
    "la_histogram_u8": ("test_interp_linalg", "barrier.sync \t1, 128"),  # warp-specialised
    "dm_cat_split_heads": ("test_interp_datamove", "stmatrix.sync.aligned.m8n8.x1"),
    "ft_checked_scale": ("test_interp_features", "elect.sync"),
    # TMA through the hidden tensor-map parameters (sim/nvidia.py rebuilds the maps): 2-d loads
    # and stores and a 1-d load; 3-d with a batch; 4-d with two size-1 dimensions, 64-row stores
    "la_gemm_aligned_tile": ("test_interp_linalg", "cp.async.bulk.tensor.1d"),
    "la_bmm_aligned_tile": ("test_interp_linalg", "cp.async.bulk.tensor.3d.global.shared::cta"),
    "nn_flash_attention_tile": ("test_interp_nn", "cp.async.bulk.tensor.4d.shared::cta.global"),
}


@pytest.fixture(scope="session")
def ptx_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("tileiras-ptx-sm90")


@pytest.mark.parametrize("name", sorted(CASES))
def test_tileiras_sm90_ptx_on_emulator_matches_reference(name, ptx_cache, monkeypatch):
    family, feature = CASES[name]
    reference = importlib.import_module(family)
    module = reference.module(name, reference.versions(name)[-1])
    ptx = nvidia.tileiras_ptx(module, "sm_90", ptx_cache)
    assert ".target sm_90a" in ptx and feature in ptx

    def run(*args, **kwargs):
        return nvidia.run(*args, cache_dir=ptx_cache, arch="sm_90", **kwargs)
    monkeypatch.setattr(reference, "run", run)
    reference.CASES[name](module)


# ---- wgmma in every operand type: cuTile GEMMs with 64 x 128 x 64 tiles ----------------------
# (tileiras uses wgmma only for large tiles; of the fixtures only la_gemm_large_tile has them)

# name -> (input dtype, accumulator / output dtype, the wgmma form tileiras emits)
GEMMS = {
    "bf16": ("bfloat16", "float32", "m64n128k16.f32.bf16.bf16"),
    "f16_acc": ("float16", "float16", "m64n128k16.f16.f16.f16"),
    "tf32": ("float32", "float32", "m64n128k8.f32.tf32.tf32"),
    "e4m3": ("float8_e4m3fn", "float32", "m64n128k32.f32.e4m3.e4m3"),
    "s8": ("int8", "int32", "m64n128k32.satfinite.s32.s8.s8"),
}
UNIT_GEMMS = ("bf16", "s8")  # the sweep (nvidia_sweep --gemms) runs them all


# TMA GEMMs: with shapes, row strides and base addresses divisible by 16 (unit column stride)
# tileiras moves the tiles with cp.async.bulk.tensor through the maps sim/nvidia.py rebuilds.
# name -> (input dtype, output dtype, TM, TN, TK, C += A @ B): tile rows of 128, 64 and 32 bytes
# (each its swizzle), 64-row store slices of a 128-row tile, C loaded and stored (two maps on one
# tensor, whole 128-row stores); M, N and K ragged (zero fill, clipped stores)
TMA_GEMMS = {
    "bf16_128x128x64": ("bfloat16", "float32", 128, 128, 64, False),
    "bf16_acc_128x128x64": ("bfloat16", "float32", 128, 128, 64, True),
    "e4m3_64x128x32": ("float8_e4m3fn", "float32", 64, 128, 32, False),
    "f16_64x32x16": ("float16", "float16", 64, 32, 16, False),
}


def gemm_bytecode(name, tma=False):
    """Bytecode of a cuTile GEMM (K loop, ragged K zero padded) for one GEMMS entry, or with
    `tma` one TMA_GEMMS entry."""
    import io
    ct = pytest.importorskip("cuda.tile")
    compilation = pytest.importorskip("cuda.tile.compilation")

    @ct.kernel
    def gemm(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
        acc = ct.full((TM, TN), 0, dtype=C.dtype)
        for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
            a = ct.load(A, index=(ct.bid(0), k), shape=(TM, TK), padding_mode=ct.PaddingMode.ZERO)
            b = ct.load(B, index=(k, ct.bid(1)), shape=(TK, TN), padding_mode=ct.PaddingMode.ZERO)
            if A.dtype == ct.float32:
                a, b = ct.astype(a, ct.tfloat32), ct.astype(b, ct.tfloat32)
            acc = ct.mma(a, b, acc)
        ct.store(C, index=(ct.bid(0), ct.bid(1)), tile=acc)

    @ct.kernel
    def gemm_acc(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
        acc = ct.load(C, index=(ct.bid(0), ct.bid(1)), shape=(TM, TN),
                      padding_mode=ct.PaddingMode.ZERO)
        for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
            a = ct.load(A, index=(ct.bid(0), k), shape=(TM, TK), padding_mode=ct.PaddingMode.ZERO)
            b = ct.load(B, index=(k, ct.bid(1)), shape=(TK, TN), padding_mode=ct.PaddingMode.ZERO)
            acc = ct.mma(a, b, acc)
        ct.store(C, index=(ct.bid(0), ct.bid(1)), tile=acc)

    def array(dtype):
        aligned = dict(stride_constant=(None, 1), shape_divisible_by=16,
                       stride_divisible_by=(16, 1), base_addr_divisible_by=16) if tma else \
            dict(stride_constant=(None, None), shape_divisible_by=1, base_addr_divisible_by=1)
        return compilation.ArrayConstraint(
            getattr(ct, dtype), 2, index_dtype=ct.int32, stride_lower_bound_incl=0,
            alias_groups=(), may_alias_internally=False, shape_constant=(None, None), **aligned)
    ins, outs, *tiles, accumulate = TMA_GEMMS[name] if tma else \
        GEMMS[name][:2] + (64, 128, 64, False)
    signature = compilation.KernelSignature([array(ins), array(ins), array(outs), *tiles],
                                            compilation.CallingConvention.cutile_python_v1())
    buffer = io.BytesIO()
    compilation.export_kernel(gemm_acc if accumulate else gemm, [signature], buffer,
                              output_format="tileir_bytecode",
                              bytecode_version="13.4", gpu_code=None)
    return buffer.getvalue()


def check_gemm(name, cache_dir=None, seed=0):
    """tileiras's wgmma GEMM on the emulator against numpy: 128 x 256 output (a 2 x 2 grid of
    tiles), K = 100 (one full and one ragged K tile); inputs exact in every type, so every
    summation order gives numpy's result."""
    import ml_dtypes
    data = gemm_bytecode(name)
    ptx = nvidia.tileiras_ptx(data, "sm_90", cache_dir)
    assert "wgmma.mma_async.sync.aligned." + GEMMS[name][2] in ptx
    rng = np.random.default_rng(seed)
    m, n, k = 128, 256, 100
    element = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32,
               "float8_e4m3fn": ml_dtypes.float8_e4m3fn, "int8": np.int8, "int32": np.int32}
    ins, outs = (element[t] for t in GEMMS[name][:2])
    if ins is np.int8:
        a, b = (rng.integers(-128, 128, shape).astype(np.int8) for shape in ((m, k), (k, n)))
    else:  # multiples of 1/8 in [-1, 1]: products and sums exact in the accumulator
        a, b = ((rng.integers(-8, 9, shape) / 8).astype(ins) for shape in ((m, k), (k, n)))
    c = np.zeros((m, n), outs)
    nvidia.run(data, None, (m // 64, n // 128), a, b, c, arch="sm_90", cache_dir=cache_dir)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_array_equal(c.astype(np.float64), want.astype(outs).astype(np.float64))


@pytest.mark.parametrize("name", UNIT_GEMMS)
def test_tileiras_wgmma_gemm_on_emulator_matches_numpy(name, ptx_cache):
    check_gemm(name, ptx_cache)


def check_tma_gemm(name, cache_dir=None, seed=0):
    """tileiras's TMA GEMM on the emulator against numpy: a 2 x 2 grid of tiles with M, N and K
    16 short of whole tiles; inputs exact in every type (as check_gemm)."""
    import ml_dtypes
    data = gemm_bytecode(name, tma=True)
    ptx = nvidia.tileiras_ptx(data, "sm_90", cache_dir)
    assert "cp.async.bulk.tensor.2d.shared::cta.global" in ptx
    assert "cp.async.bulk.tensor.2d.global.shared::cta" in ptx
    ins, outs, tm, tn, tk, accumulate = TMA_GEMMS[name]
    element = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16,
               "float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float32": np.float32}
    rng = np.random.default_rng(seed)
    m, n, k = 2 * tm - 16, 2 * tn - 16, 3 * tk - 16
    a, b = ((rng.integers(-8, 9, shape) / 8).astype(element[ins]) for shape in ((m, k), (k, n)))
    c = np.full((m, n), 3, element[outs])
    want = a.astype(np.float64) @ b.astype(np.float64) + (3 if accumulate else 0)
    nvidia.run(data, None, (2, 2), a, b, c, arch="sm_90", cache_dir=cache_dir)
    np.testing.assert_array_equal(c.astype(np.float64),
                                  want.astype(element[outs]).astype(np.float64))


@pytest.mark.parametrize("name", sorted(TMA_GEMMS))
def test_tileiras_tma_gemm_on_emulator_matches_numpy(name, ptx_cache):
    check_tma_gemm(name, ptx_cache)


def tma_array(dtype: str, rank: int, shape_divisible_by=16):
    """An array parameter as cuTile specialises an aligned, row-major tensor (TMA-eligible):
    unit inner stride, outer strides and base divisible by 16, shapes divisible by
    `shape_divisible_by` (one number for every dimension, or one per dimension)."""
    ct = pytest.importorskip("cuda.tile")
    compilation = pytest.importorskip("cuda.tile.compilation")
    return compilation.ArrayConstraint(
        getattr(ct, dtype), rank, index_dtype=ct.int32, stride_lower_bound_incl=0,
        alias_groups=(), may_alias_internally=False, shape_constant=(None,) * rank,
        stride_constant=(None,) * (rank - 1) + (1,), shape_divisible_by=shape_divisible_by,
        stride_divisible_by=(16,) * (rank - 1) + (1,), base_addr_divisible_by=16)


def exported(kernel, parameters) -> bytes:
    """Bytecode 13.4 of a cuTile kernel for one signature (cuTile Python's calling convention)."""
    import io
    compilation = pytest.importorskip("cuda.tile.compilation")
    signature = compilation.KernelSignature(parameters,
                                            compilation.CallingConvention.cutile_python_v1())
    buffer = io.BytesIO()
    compilation.export_kernel(kernel, [signature], buffer, output_format="tileir_bytecode",
                              bytecode_version="13.4", gpu_code=None)
    return buffer.getvalue()


def persistent_bmm_bytecode():
    """A cuTile batched GEMM whose CTAs each walk several batches, A stored K-major
    ([batch, K, M], transposed in the kernel); bf16 in, bf16 out."""
    ct = pytest.importorskip("cuda.tile")

    @ct.kernel
    def bmm_at(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
        for batch in range(ct.bid(0), A.shape[0], ct.num_blocks(0)):
            acc = ct.full((TM, TN), 0, dtype=ct.float32)
            for k in range(ct.num_tiles(A, axis=1, shape=(1, TK, TM))):
                a = ct.reshape(ct.load(A, index=(batch, k, 0), shape=(1, TK, TM),
                                       padding_mode=ct.PaddingMode.ZERO), (TK, TM))
                b = ct.reshape(ct.load(B, index=(batch, k, 0), shape=(1, TK, TN),
                                       padding_mode=ct.PaddingMode.ZERO), (TK, TN))
                acc = ct.mma(ct.transpose(a), b, acc)
            ct.store(C, index=(batch, 0, 0),
                     tile=ct.reshape(ct.astype(acc, C.dtype), (1, TM, TN)))

    # the batch count (2 in the test) is no multiple of 16, as cuTile would see it
    return exported(bmm_at, [tma_array("bfloat16", 3, (1, 16, 16))] * 3 + [64, 64, 32])


def test_tileiras_copies_of_in_flight_accumulators_see_their_results(ptx_cache):
    """tileiras's sm_90 code for a persistent batched GEMM copies the wgmma accumulators with
    `mov` into the next batch's chain before waiting for them (ptxas serialises there). The
    emulator lands the in-flight results first (the profile counts it): the second batch is
    exact, where stale copies gave errors of ~8."""
    import ml_dtypes
    from tilebc_runtime.sim import Profile
    data = persistent_bmm_bytecode()
    assert "wgmma.mma_async" in nvidia.tileiras_ptx(data, "sm_90", ptx_cache)
    rng = np.random.default_rng(0)
    a, b = ((rng.integers(-8, 9, (2, 64, 64)) / 8).astype(ml_dtypes.bfloat16) for _ in range(2))
    c = np.zeros((2, 64, 64), ml_dtypes.bfloat16)
    profile = Profile()
    nvidia.run(data, None, (1,), a, b, c, arch="sm_90", cache_dir=ptx_cache, profile=profile)
    want = np.einsum("bkm,bkn->bmn", a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_array_equal(c.astype(np.float64),
                                  want.astype(ml_dtypes.bfloat16).astype(np.float64))
    assert profile.report()["wgmma_serialized"] >= 1


def two_products_bytecode():
    """C0 = A0 @ B, then C1 = A1 @ B, f16 64 x 64 tiles through TMA (aligned views); the
    views are made in the order B, A0, C0, A1, C1."""
    ct = pytest.importorskip("cuda.tile")

    @ct.kernel
    def two_products(A0, A1, B, C0, C1, T: ct.Constant[int]):
        row = ct.bid(0)
        b = ct.load(B, index=(0, 0), shape=(T, T))
        first = ct.mma(ct.load(A0, index=(row, 0), shape=(T, T)), b,
                       ct.full((T, T), 0, dtype=ct.float32))
        ct.store(C0, index=(row, 0), tile=ct.astype(first, C0.dtype))
        second = ct.mma(ct.load(A1, index=(row, 0), shape=(T, T)), b,
                        ct.full((T, T), 0, dtype=ct.float32))
        ct.store(C1, index=(row, 0), tile=ct.astype(second, C1.dtype))

    return exported(two_products, [tma_array("float16", 2)] * 5 + [64])


def test_tileiras_numbers_its_tensor_maps_loads_first_in_order_of_use(ptx_cache):
    """tileiras's five maps for two products sharing B: its PTX loads through the first three
    and stores through the last two, and the loads are A0, B, A1 (the order the first product
    uses its operands, then the second), not the order the views are made (B first; stores
    between). Bound so, the products are exact and no input is written."""
    import tilebc
    data = two_products_bytecode()
    module = tilebc.load(data)
    image = nvidia.nvidia_kernel(module, module.functions[0].name, "sm_90", ptx_cache)
    hidden = [param.name for param in image.kernel.params if param.hidden]
    copies = nvidia.map_copies(image.kernel)
    assert [copies[name] for name in hidden] == [{("load", 2)}] * 3 + [{("store", 2)}] * 2
    rng = np.random.default_rng(1)
    a0, a1 = ((rng.integers(-4, 5, (128, 64)) / 4).astype(np.float16) for _ in range(2))
    b = (rng.integers(-4, 5, (64, 64)) / 4).astype(np.float16)
    inputs = a0.copy(), a1.copy(), b.copy()
    c0, c1 = np.zeros((128, 64), np.float16), np.zeros((128, 64), np.float16)
    nvidia.run(data, None, (2,), a0, a1, b, c0, c1, arch="sm_90", cache_dir=ptx_cache)
    for got, a in ((c0, inputs[0]), (c1, inputs[1])):
        np.testing.assert_array_equal(got, (a.astype(np.float64) @ b).astype(np.float16))
    for kept, given in zip((a0, a1, b), inputs):
        np.testing.assert_array_equal(kept, given)


def row_max_bytecode(element: str, columns: int):
    """Each row's largest element and its column, 4 rows a tile, through TMA (aligned views):
    no mma anywhere."""
    ct = pytest.importorskip("cuda.tile")

    @ct.kernel
    def row_max(X, Top, Where, R: ct.Constant[int], C: ct.Constant[int]):
        tile = ct.load(X, index=(ct.bid(0), 0), shape=(R, C))
        ct.store(Top, index=(ct.bid(0),), tile=ct.astype(ct.max(tile, axis=1), Top.dtype))
        ct.store(Where, index=(ct.bid(0),), tile=ct.astype(ct.argmax(tile, axis=1), Where.dtype))

    return exported(row_max, [tma_array(element, 2), tma_array(element, 1),
                              tma_array("int32", 1), 4, columns])


def test_tileiras_copies_unswizzled_rows_where_no_wgmma_reads_them(ptx_cache):
    """Without wgmma tileiras's maps copy the tile's 64-byte rows unswizzled; a map with the
    64-byte swizzle permuted their 16-byte chunks (wrong maxima and columns)."""
    element, columns = "float32", 16
    data = row_max_bytecode(element, columns)
    assert "cp.async.bulk.tensor.2d" in nvidia.tileiras_ptx(data, "sm_90", ptx_cache)
    rng = np.random.default_rng(2)
    x = rng.permutation(16 * columns).reshape(16, columns).astype(element)
    top, where = np.zeros(16, element), np.zeros(16, np.int32)
    nvidia.run(data, None, (4,), x, top, where, arch="sm_90", cache_dir=ptx_cache)
    np.testing.assert_array_equal(top, x.max(axis=1))
    np.testing.assert_array_equal(where, x.argmax(axis=1))
