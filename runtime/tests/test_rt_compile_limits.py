"""The JIT's code-size bound: kernels whose unrolled code would take ptxas minutes (or forever) are
refused before any PTX is generated, with one line naming the file, op, entry and bound."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tilebc
from tilebc.ir.builder import module_entry, new_module
from tilebc.ir.types import PointerType, f32, i32, scalar
from tilebc_runtime import compiler
from tilebc_runtime.compiler import (MAX_ELEMENTS_PER_THREAD, MAX_ESTIMATED_INSTRUCTIONS,
                                     compile, estimate_code_size)
from tilebc_runtime.lowering.lowerer import LoweringError

ROOT = Path(__file__).resolve().parents[2]


def exp_kernel(elements: int, exps: int = 1, chunkable: bool = True) -> bytes:
    """load -> exp (x `exps`) -> addf -> store on one tile of `elements` f32. Not `chunkable`:
    the exps' result goes through a reshape and back, which the JIT lowers on the whole tile
    (lowering/chunks.py), so the kernel is unrolled over every slot as before chunked regions."""
    module = new_module(tilebc.Version(13, 5))
    b = module_entry(module, "expadd", [scalar(PointerType(f32)), scalar(i32)])
    x_ptr, size = b.args
    token = b.make_token()
    tiles = b.partition_view(b.tensor_view(x_ptr, shape=[size], strides=[1]), (elements,))
    block, _, _ = b.get_tile_block_id()
    x, _ = b.load(tiles, [block], token=token)
    y = x
    for _ in range(exps):
        y = b.exp(y)
    if not chunkable:
        y = b.reshape(b.reshape(y, (2, elements // 2)), (elements,))
    b.store(b.addf(y, x), tiles, [block], token=token)
    b.return_()
    return tilebc.dump(module)


@pytest.mark.parametrize("elements", [1 << 16, 1 << 20, 1 << 24])
def test_tiles_over_the_per_thread_bound_are_refused_at_once(elements):
    # before: 64K elements linked for ~110 s in 672 MB; 1M never finished
    data = exp_kernel(elements, chunkable=False)
    started = time.perf_counter()
    with pytest.raises(LoweringError) as caught:
        compile(data, arch="sm_90", emit="cubin")
    assert time.perf_counter() - started < 1.0
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("<bytes>: offset 0x")
    assert "load_view_tko: entry expadd: " in message
    assert (f"a tile of {elements} elements is {elements // 128} elements per thread over 128 "
            f"threads, over the JIT's bound of {MAX_ELEMENTS_PER_THREAD}") in message
    assert "not lowered as a loop over register chunks: reshape at offset 0x" in message


def test_long_unrolled_kernels_are_refused_by_the_instruction_estimate():
    # 32K elements is 256 per thread (at the bound); eight exps on it estimate over 64K instructions
    data = exp_kernel(1 << 15, exps=8, chunkable=False)
    total, _, _ = estimate_code_size(tilebc.load(data).functions[0], 128)
    assert total > MAX_ESTIMATED_INSTRUCTIONS
    with pytest.raises(LoweringError, match=rf"entry expadd: the kernel would unroll to about "
                                            rf"{total} PTX instructions over 128 threads .* over "
                                            rf"the JIT's bound of {MAX_ESTIMATED_INSTRUCTIONS};"):
        compile(data, arch="sm_90", emit="ptx")


def test_kernels_within_the_bounds_still_lower():
    for data in (exp_kernel(1 << 12), exp_kernel(1 << 15), exp_kernel(1 << 12, exps=8)):
        assert ".entry expadd(" in compile(data, arch="sm_90", emit="ptx").ptx


@pytest.mark.parametrize("elements", [1 << 16, 1 << 20, 1 << 24])
def test_chunked_regions_are_charged_one_chunk(elements):
    # the same kernels, per-element from load to store: a loop over 16-slot chunks, whatever
    # the tile's size, well within both bounds
    total, widest, _ = estimate_code_size(tilebc.load(exp_kernel(elements, exps=8)).functions[0],
                                          128)
    assert total < MAX_ESTIMATED_INSTRUCTIONS // 8
    assert widest is None or widest.name != "load_view_tko"
    ptx = compile(exp_kernel(elements, exps=8), arch="sm_90", emit="ptx").ptx
    assert ptx.count("$L_chunk_") == 2


def test_more_threads_bring_a_tile_under_the_bound():
    module = tilebc.load(exp_kernel(1 << 16, chunkable=False))
    function = module.functions[0]
    with pytest.raises(LoweringError):
        compiler.check_code_size(module, function, 128)
    compiler.check_code_size(module, function, 256)  # 256 elements per thread


def test_every_fixture_is_well_within_the_bounds():
    """The bounds leave room for every real kernel we carry (largest today: la_histogram_u8,
    about 4,800 estimated instructions and 128 elements per thread)."""
    for path in sorted((ROOT / "fixtures" / "bytecode").glob("*/*-13.5.tilebc")):
        module = tilebc.load(path)
        for function in module.functions:
            threads, _, _ = compiler.choose_threads(module, function, 90)
            total, _, elements = estimate_code_size(function, threads)
            assert total <= MAX_ESTIMATED_INSTRUCTIONS // 4, path.name
            assert -(-elements // threads) <= MAX_ELEMENTS_PER_THREAD // 2, path.name


def test_cli_reports_one_line(tmp_path):
    source = tmp_path / "big.tilebc"
    source.write_bytes(exp_kernel(1 << 20, chunkable=False))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'runtime'}",
           "TILEBC_CACHE_DIR": "off"}
    done = subprocess.run([sys.executable, "-m", "tilebc", "compile", str(source), "--arch", "sm_90",
                           "-o", str(tmp_path / "big.cubin")], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"{source}: offset 0x" in lines[0] and "over the JIT's bound of 256" in lines[0]
    assert not (tmp_path / "big.cubin").exists()
