"""Kernels whose shared memory exceeds the 48 KiB a CTA gets without opting in: the JIT moves the
exchange area to dynamic shared memory (`.extern .shared`), nvJitLink links it for sm_80 and
sm_90, the cubin declares only the static part, and the PTX emulator (given the size at launch)
agrees with numpy and the CPU interpreter.

Kernels: a 64x256 i32 transpose (large_exchange.py, 65536 bytes) and cuTile's MatMul-sample tile
size, a 128x256x64 f16 GEMM (fixtures/kernels/linalg.py's gemm_bias_relu exported here with that
signature: A and B alone take 48 KiB, 51 KiB with their rows padded for ldmatrix). No GPU launch
happens here: that needs a device."""
import functools
import io
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import tilebc
from tilebc_runtime import sim, targets
from tilebc_runtime.compiler import compile as jit_compile
from tilebc_runtime.launch import cubin_launch_facts, tool_path

ROOT = Path(__file__).resolve().parents[2]
HISTOGRAM = ROOT / "fixtures" / "bytecode" / "la_histogram_u8" / "la_histogram_u8-13.5.tilebc"
from large_exchange import EXCHANGE_BYTES, TRANSPOSE  # noqa: E402
BIG_GEMM = (128, 256, 64)  # TM, TN, TK


@pytest.fixture(scope="module")
def big_gemm() -> bytes:
    """gemm_bias_relu with 128x256x64 f16 tiles, exported by cuTile as bytecode 13.4."""
    ct = pytest.importorskip("cuda.tile")
    from cuda.tile.compilation import export_kernel
    rel = os.path.join("fixtures", "kernels", "linalg.py")
    module = types.ModuleType("tilebc_fixture_linalg")
    module.__file__ = rel
    sys.path.insert(0, str(ROOT / "fixtures" / "kernels"))  # for its `_common` import
    try:
        exec(compile_source(ROOT / rel, rel), module.__dict__)
    finally:
        sys.path.pop(0)
    signature = module._gemm_sig(ct.float16, ct.float16, *BIG_GEMM, 8, bias_dt=ct.float16)
    buffer = io.BytesIO()
    export_kernel(module.gemm_bias_relu, [signature], buffer, output_format="tileir_bytecode",
                  bytecode_version="13.4")
    return buffer.getvalue()


@functools.lru_cache(maxsize=None)
def compile(source, arch: str, emit: str = "cubin"):
    """The JIT's result for (source, arch, emit), compiled once per process: several tests read
    the same kernel's result (the tests only read it)."""
    return jit_compile(source, arch=arch, emit=emit)


def compile_source(path: Path, name: str):
    import builtins
    return builtins.compile(path.read_text(), name, "exec")


# -- compile and link ---------------------------------------------------------------------------

# the GEMM stages A (128 x 64 f16, rows padded to 72) and B (64 x 256, rows padded to 264); its
# f32 product stays in registers (the mma accumulator layout, bias and relu applied there), so
# nothing else needs shared memory: over the static 48 KiB, under every arch's maximum
GEMM_DYNAMIC = 2 * 128 * 72 + 2 * 64 * 264

# a kernel with a small static exchange area (its whole-tile reduction crosses warps)
REDUCE_ALL = ROOT / "fixtures" / "bytecode" / "reduce_all_keepdims" / \
    "reduce_all_keepdims-13.5.tilebc"


def static_section(result) -> int:
    """Size of the cubin's .nv.shared.<entry>: the static shared memory, plus whatever the
    linker reserves on the arch (1 KiB on sm_90, none on sm_80, as nvJitLink 13 writes it)."""
    return cubin_launch_facts(result.cubin, result.entry)[1]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_large_exchange_links_with_only_dynamic_shared_memory(arch):
    result = compile(TRANSPOSE, arch=arch)
    assert result.dynamic_shared_bytes == EXCHANGE_BYTES and result.shared_memory_bytes == 0
    # a static kernel's section is its exchange area plus the linker's reserve; the transpose's
    # is the reserve alone: its exchange bytes are not in the cubin
    static = compile(REDUCE_ALL, arch=arch)
    assert static.dynamic_shared_bytes == 0 and static.shared_memory_bytes > 0
    reserve = static_section(static) - static.shared_memory_bytes
    assert reserve in (0, 1024) and static_section(result) == reserve


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_90", "sm_120"])
def test_big_gemm_fits_each_arch_maximum(big_gemm, arch):
    result = compile(big_gemm, arch=arch, emit="cubin" if arch in ("sm_80", "sm_90") else "ptx")
    assert result.dynamic_shared_bytes == GEMM_DYNAMIC
    assert result.dynamic_shared_bytes <= targets.max_shared_per_block(targets.parse_arch(arch))
    assert ".extern .shared .align 16 .b8 __tilebc_smem[];" in result.ptx.splitlines()
    if result.cubin is not None:
        assert static_section(result) <= 1024  # the linker's reserve at most


def test_static_kernels_keep_static_shared_memory():
    # under 48 KiB nothing changes: a sized .shared array in the kernel, no launch request
    result = compile(REDUCE_ALL, arch="sm_80")
    assert result.dynamic_shared_bytes == 0 and result.shared_memory_bytes > 0
    assert ".extern .shared" not in result.ptx
    assert f"__tilebc_smem[{result.shared_memory_bytes}]" in result.ptx
    assert static_section(result) == result.shared_memory_bytes


def test_cuobjdump_agrees_on_the_shared_sections(tmp_path):
    # NVIDIA's reading of the cubin: a zero-size .nv.shared section for the dynamic-only kernel
    cuobjdump = tool_path("cuobjdump")
    if cuobjdump is None:
        pytest.skip("cuobjdump not installed")
    result = compile(TRANSPOSE, arch="sm_80")
    path = tmp_path / "transpose.cubin"
    path.write_bytes(result.cubin)
    listing = subprocess.run([cuobjdump, "-elf", str(path)], capture_output=True, text=True,
                             timeout=120, check=True).stdout
    [line] = [l for l in listing.splitlines()
              if l.rstrip().endswith(f".nv.shared.{result.entry}") and "NOBITS" in l]
    assert line.split()[2] == "0", line  # columns: index, offset, size (hex), ...


# -- emulator == numpy == interpreter -----------------------------------------------------------

@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_big_gemm_on_the_emulator_matches_numpy_and_the_interpreter(big_gemm, arch):
    module = tilebc.load(big_gemm)
    entry = module.functions[0].name
    m, n, k = 128, 256, 100  # one output tile, ragged K over two K tiles
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float16)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float16)
    bias = rng.uniform(-0.5, 0.5, n).astype(np.float16)
    emulated, interpreted = np.zeros((m, n), np.float16), np.zeros((m, n), np.float16)
    sim.run(module, entry, (1,), a, b, bias, emulated, arch=arch)
    tilebc.interp.run(module, entry, (1,), a, b, bias, interpreted)
    expected = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias[None, :], 0.0)
    np.testing.assert_allclose(emulated.astype(np.float64), expected, rtol=1e-2, atol=1e-3)
    np.testing.assert_allclose(emulated.astype(np.float64), interpreted.astype(np.float64),
                               rtol=1e-2, atol=1e-3)


def test_histogram_on_the_emulator_matches_the_interpreter():
    module = tilebc.load(HISTOGRAM)
    entry = module.functions[0].name
    pixels = np.random.default_rng(3).integers(0, 256, 100, dtype=np.uint8)  # ragged 2nd block
    emulated, interpreted = np.zeros(256, np.int32), np.zeros(256, np.int32)
    sim.run(module, entry, (2,), pixels, emulated)
    tilebc.interp.run(module, entry, (2,), pixels, interpreted)
    np.testing.assert_array_equal(emulated, np.bincount(pixels, minlength=256))
    np.testing.assert_array_equal(emulated, interpreted)


def test_tileiras_cubins_declare_their_shared_memory_statically(big_gemm):
    # tileiras' own cubin for the same GEMM puts >48 KiB in the static .nv.shared section (no
    # .extern), so the tileiras backend records static bytes and asks for no dynamic ones
    from tilebc_runtime.launch import TileirasBackend
    if tool_path("tileiras") is None:
        pytest.skip("tileiras not installed")
    entry = tilebc.load(big_gemm).functions[0].name
    cubin, facts = TileirasBackend().compile(big_gemm, entry, "sm_90", {})
    assert facts["dynamic_shared_bytes"] == 0
    assert facts["static_shared_bytes"] == static_section_of(cubin, entry) > 48 * 1024


def static_section_of(cubin: bytes, entry: str) -> int:
    return cubin_launch_facts(cubin, entry)[1]
