#!/usr/bin/env python3
"""NVIDIA's own cuTile kernels (the `test/kernels` of github.com/NVIDIA/cutile-python) through
tilebc: kernels nobody on this team wrote, exported by cuTile at every bytecode version.

    python conformance/run_cutile_python.py CHECKOUT [--results conformance/cutile-python.md]
    python conformance/run_cutile_python.py CHECKOUT --export DIR   # bytecode, inputs, tileiras cubins
    python conformance/run_cutile_python.py --gpu DIR [--results FILE]  # on a GPU machine
    python conformance/run_cutile_python.py --model DIR [NAME ...]       # the performance model

CHECKOUT is a clone of NVIDIA/cutile-python (a work tree, or a bare git directory: its HEAD's
test/kernels is extracted). Its kernel modules are imported from a temporary copy; nothing of them
enters this repository. Each case names a kernel, a signature (arrays with dynamic shapes, runtime
scalars and constants), inputs and a grid; for every case:

* format: cuTile exports it at 13.1-13.5 (13.1/13.2 for sm_90, as cuTile requires there); at each
  version `tilebc dis` and `dis -g` equal tileirdisasm's, dump gives cuTile's bytes back, the
  reassembly of the listing disassembles (tileirdisasm) to the same listing, and at 13.5 tileiras
  compiles that reassembly (sm_100 where sm_90 lacks a type); the 13.5 module converted to each
  older version disassembles to what tilebc prints, and equals cuTile's own export from 13.3 on
  (its 13.1/13.2 files are compiled for sm_90, other IR);
* execution: the interpreter against a numpy reference (where the case has one), and our JIT's
  sm_80 and sm_90 PTX and tileiras's sm_90 PTX on the PTX emulator against the interpreter.

`--export DIR` writes what a GPU machine needs without cuTile or tileiras: the 13.5 bytecode and
inputs of every case with the interpreter's outputs, and the timing cases (GPU-filling sizes, tile
sizes like cutile-python's tuned ones, arrays specialised as cuTile specialises contiguous
16-byte-aligned tensors, and once more with dynamic shapes and no alignment facts), with
tileiras's sm_90 cubins in DIR/cache. `--gpu DIR` then runs every case on the GPU through our
JIT (sm_90 code, and sm_80 code linked for the GPU) and tileiras's cubins against the interpreter,
and times the timing cases, ours against tileiras's alternately (bench_gpu_scale's runner).
"""
from __future__ import annotations

import argparse
import datetime
import io
import math
import os
import pickle
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT, ROOT / "runtime", ROOT / "scripts", ROOT / "benchmarks"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

RESULTS = ROOT / "conformance" / "cutile-python.md"


# ---- the cases ----------------------------------------------------------------------------------
# A parameter is ("a", array) an array, ("ca", array) an array cuTile sees as a contiguous,
# 16-byte-aligned tensor, ("l", [arrays]) a list of arrays, ("s", dtype name, value) a runtime
# scalar, or ("c", value) a constant.

def _rng():
    return np.random.default_rng(7)


def _dtype(name):
    import ml_dtypes
    return {"f16": np.float16, "f32": np.float32, "i32": np.int32,
            "e4m3": ml_dtypes.float8_e4m3fn, "e8m0": ml_dtypes.float8_e8m0fnu}[name]


def small_cases():
    """(name, kernel module, function, params, grid, reference or None): sizes the emulator runs
    in seconds; a reference maps the inputs to {argument index: expected float64 array}."""
    rng = _rng()

    def rand(shape, name):
        return rng.standard_normal(shape).astype(_dtype(name))

    def zeros(shape, name):
        return np.zeros(shape, _dtype(name))

    def a(x):
        return ("a", x)

    f64 = lambda x: np.asarray(x, np.float64)  # noqa: E731
    add = lambda x: {2: f64(x[0]) + x[1]}  # noqa: E731
    matmul = lambda x: {2: f64(x[0]) @ f64(x[1])}  # noqa: E731
    m, n = 16, 200
    rows = rand((m, n), "f32")
    mean = rows.mean(1).astype(np.float32)
    rstd = (1 / np.sqrt(rows.var(1) + 1e-5)).astype(np.float32)
    experts = rng.integers(0, 4, 16)
    ids, blocks = [], []
    for expert in range(4):
        mine = [i for i in range(16) if experts[i] == expert]
        if mine:
            mine += [16] * (-len(mine) % 16)  # padding rows: out of range, skipped by gather/scatter
            ids += mine
            blocks += [expert] * (len(mine) // 16)

    def scales(shape):
        return np.exp2(rng.integers(-3, 3, shape).astype(np.float32)).astype(_dtype("e8m0"))

    def fp8(shape):
        return rng.uniform(-2, 2, shape).astype(_dtype("e4m3"))

    b, s, d = 1, 128, 64
    return [
        ("vec_add_1d", "vec_add", "vec_add_kernel_1d",
         [a(rand(1024, "f32")), a(rand(1024, "f32")), a(zeros(1024, "f32")), ("c", 256)], (4,), add),
        ("vec_add_2d", "vec_add", "vec_add_kernel_2d",
         [a(rand((64, 96), "f32")), a(rand((64, 96), "f32")), a(zeros((64, 96), "f32")), ("c", 32), ("c", 32)],
         (2, 3), add),
        ("vec_add_1d_gather", "vec_add", "vec_add_kernel_1d_gather",
         [a(rand(1000, "f16")), a(rand(1000, "f16")), a(zeros(1000, "f16")), ("c", 256)], (4,), add),
        ("vec_add_2d_gather", "vec_add", "vec_add_kernel_2d_gather",
         [a(rand((60, 90), "f32")), a(rand((60, 90), "f32")), a(zeros((60, 90), "f32")), ("c", 32), ("c", 32)],
         (2, 3), add),
        ("transpose", "transpose", "transpose_kernel",
         [a(rand((64, 128), "f16")), a(zeros((128, 64), "f16")), ("c", 32), ("c", 64)], (2, 2),
         lambda x: {1: f64(x[0]).T}),
        ("layer_norm_fwd", "layer_norm", "layer_norm_fwd",
         [a(rows), a(rand(n, "f32")), a(rand(n, "f32")), a(zeros((m, n), "f32")), a(zeros(m, "f32")),
          a(zeros(m, "f32")), ("s", "f32", 1e-5), ("c", 64)], (m,), _layer_norm),
        ("layer_norm_bwd_dx", "layer_norm", "layer_norm_bwd_dx_partial_dwdb",
         [a(zeros((m, n), "f32")), a(rand((m, n), "f32")), a(zeros((4, n), "f32")), a(zeros((4, n), "f32")),
          a(rows), a(rand(n, "f32")), a(mean), a(rstd), a(zeros(4, "i32")), ("c", 64)], (m,), None),
        ("layer_norm_bwd_dwdb", "layer_norm", "layer_norm_bwd_dwdb",
         [a(rand((8, n), "f32")), a(rand((8, n), "f32")), a(zeros(n, "f32")), a(zeros(n, "f32")),
          ("c", 4), ("c", 64)], (4,), lambda x: {2: f64(x[0]).sum(0), 3: f64(x[1]).sum(0)}),
        ("rms_norm", "rms_norm", "rms_norm_kernel",
         [a(rand((m, n), "f16")), a(rand(n, "f16")), a(zeros((m, n), "f16")), a(zeros(m, "f32")),
          ("c", n), ("c", 1e-6), ("c", 64)], (m,), lambda x: dict(zip((2, 3), _rms(x[0], x[1])))),
        ("rms_norm_gather", "rms_norm", "rms_norm_kernel_gather",
         [a(rand((m, n), "f32")), a(rand(n, "f32")), a(zeros((m, n), "f32")), a(zeros(m, "f32")),
          ("c", n), ("c", 1e-6), ("c", 64)], (m,), lambda x: dict(zip((2, 3), _rms(x[0], x[1])))),
        ("rms_norm_persistent", "rms_norm", "rms_norm_kernel_static_persistent",
         [a(rand((40, 256), "f16")), a(zeros((40, 256), "f16")), a(rand(256, "f16")), ("c", 8), ("c", 64),
          ("c", 256), ("c", 1e-6)], (3,), lambda x: {1: _rms(x[0], x[2])[0]}),
        ("matmul_f16", "matmul", "matmul_kernel",
         [a(rand((128, 96), "f16")), a(rand((96, 128), "f16")), a(zeros((128, 128), "f16")), ("c", 64), ("c", 64),
          ("c", 32)], (4,), matmul),
        ("matmul_f32_tf32", "matmul", "matmul_kernel",  # tf32 products: the reference is f64
         [a(rand((64, 64), "f32")), a(rand((64, 64), "f32")), a(zeros((64, 64), "f32")), ("c", 32), ("c", 32),
          ("c", 16)], (4,), None),
        ("matmul_split_k", "matmul", "matmul_split_k_kernel",
         [a(rand((64, 128), "f16")), a(rand((128, 64), "f16")), a(zeros((64, 64), "f32")), a(zeros(4, "i32")),
          a(zeros(4, "i32")), ("c", 32), ("c", 32), ("c", 32), ("c", 2)], (4, 2), matmul),
        ("batch_matmul", "matmul", "batch_matmul_kernel",
         [a(rand((2, 64, 48), "f16")), a(rand((2, 48, 64), "f16")), a(zeros((2, 64, 64), "f16")), ("c", 32),
          ("c", 32), ("c", 16)], (2, 2, 2), matmul),
        ("persistent_matmul", "matmul", "persistent_matmul_kernel",
         [a(rand((128, 64), "f16")), a(rand((64, 96), "f16")), a(zeros((128, 96), "f16")), ("c", 32), ("c", 32),
          ("c", 32)], (5,), matmul),
        ("fmha_causal", "attention", "fmha_kernel",
         [a(rand((b, 2, s, d), "f16")) for _ in range(3)] + [a(zeros((b, 2, s, d), "f16")),
          ("s", "f32", 1 / math.sqrt(d)), ("s", "i32", 0), ("c", d), ("c", 2), ("c", 64), ("c", 64), ("c", 1),
          ("c", True), ("c", True)], (s // 64, b * 2), lambda x: {3: _attention(x[0], x[1], x[2], True)}),
        ("fmha_gqa", "attention", "fmha_kernel",
         [a(rand((b, 4, s, d), "f16")), a(rand((b, 2, s, d), "f16")), a(rand((b, 2, s, d), "f16")),
          a(zeros((b, 4, s, d), "f16")), ("s", "f32", 1 / math.sqrt(d)), ("s", "i32", 0), ("c", d), ("c", 4),
          ("c", 64), ("c", 64), ("c", 2), ("c", False), ("c", True)], (s // 64, b * 4),
         lambda x: {3: _attention(x[0], x[1], x[2], False)}),
        ("silu_and_mul", "fused_moe", "silu_and_mul_kernel",
         [a(rand((16, 128), "f16")), a(rand((16, 128), "f16")), a(zeros((16, 128), "f16")), ("c", 128)], (16,),
         lambda x: {2: f64(x[0]) / (1 + np.exp(-f64(x[0]))) * x[1]}),
        ("fused_moe", "fused_moe", "fused_moe_kernel",
         [a(rand((8, 64), "f16")), a(rand((4, 64, 64), "f16")), a(zeros((16, 64), "f16")),
          a(rng.random(16).astype(np.float32)), a(np.array(ids, np.int32)), a(np.array(blocks, np.int32)),
          ("s", "i32", 2), ("c", True), ("c", 16), ("c", 32), ("c", 32)], (len(blocks) * 2,),
         lambda x: {2: np.stack([f64(x[0][r // 2]) @ f64(x[1][experts[r]]).T * x[3][r] for r in range(16)])}),
        ("group_gemm", "group_gemm", "grouped_matmul_kernel",
         [("l", [rand((64, 32), "f16"), rand((32, 48), "f16")]), ("l", [rand((32, 64), "f16"), rand((48, 32), "f16")]),
          ("l", [zeros((64, 64), "f16"), zeros((32, 32), "f16")]), ("c", 3), ("c", 32), ("c", 32), ("c", 16)], (3,),
         lambda x: {4: f64(x[0][0]) @ f64(x[1][0]), 5: f64(x[0][1]) @ f64(x[1][1])}),
        ("fft", "fft", "fft_kernel",
         [a(rand((4, 64, 2), "f32")), a(zeros((4, 64, 2), "f32"))] + [a(rand((4, 4, 2), "f32")) for _ in range(3)]
         + [a(rand((4, 16, 2), "f32")), a(rand((4, 4, 2), "f32"))] + [("c", v) for v in (64, 4, 4, 4, 2, 2)],
         (2,), None),
        ("block_scaled_mm", "scaled_matmul", "block_scaled_matmul_kernel",
         [a(fp8((64, 128))), a(scales((64, 4))), a(fp8((128, 64))), a(scales((4, 64))), a(zeros((64, 64), "f32")),
          ("c", 64), ("c", 64), ("c", 64), ("c", 32)], (4,),
         lambda x: {4: (f64(x[0]) * np.repeat(f64(x[1]), 32, 1)) @ (f64(x[2]) * np.repeat(f64(x[3]), 32, 0))}),
        ("block_scaled_mm_swizzled", "scaled_matmul", "block_scaled_matmul_kernel",
         [a(fp8((128, 128))), a(scales((1, 1, 32, 16))), a(fp8((128, 128))), a(scales((1, 1, 32, 16))),
          a(zeros((128, 128), "f32")), ("c", 128), ("c", 128), ("c", 128), ("c", 32)], (1,), None),
    ]


def _layer_norm(x):
    rows = np.asarray(x[0], np.float64)
    mean, rstd = rows.mean(1), 1 / np.sqrt(rows.var(1) + 1e-5)
    return {3: (rows - mean[:, None]) * rstd[:, None] * x[1] + x[2], 4: mean, 5: rstd}


def _rms(x, w):
    rows = np.asarray(x, np.float64)
    rstd = 1 / np.sqrt((rows * rows).mean(1) + 1e-6)
    return rows * rstd[:, None] * np.asarray(w, np.float64), rstd


def _attention(q, k, v, causal):
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
    if causal:
        scores = np.where(np.tril(np.ones(scores.shape[-2:], bool)), scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True) @ v


def timing_cases():
    """(name, kernel module, function, params): tile sizes like cutile-python's tuned ones (its
    test/benchmark_tuning.json lists Blackwell's; these are Hopper-sized). Arrays are placeholders
    (dtype, rank); `timing_inputs` builds the GPU-filling inputs."""
    def a(name, rank):
        return ("a", np.zeros((1,) * rank, _dtype(name)))
    attention = [a("f16", 4)] * 4 + [("s", "f32", 0.0), ("s", "i32", 0), ("c", 128), ("c", 32)]
    return [
        ("vec_add_1d", "vec_add", "vec_add_kernel_1d", [a("f32", 1)] * 3 + [("c", 1024)]),
        ("transpose", "transpose", "transpose_kernel", [a("f16", 2)] * 2 + [("c", 64), ("c", 64)]),
        ("layer_norm_fwd", "layer_norm", "layer_norm_fwd",
         [a("f16", 2), a("f16", 1), a("f16", 1), a("f16", 2), a("f32", 1), a("f32", 1), ("s", "f32", 1e-5),
          ("c", 1024)]),
        ("rms_norm", "rms_norm", "rms_norm_kernel",
         [a("f16", 2), a("f16", 1), a("f16", 2), a("f32", 1), ("c", 4096), ("c", 1e-6), ("c", 1024)]),
        ("rms_norm_gather", "rms_norm", "rms_norm_kernel_gather",
         [a("f16", 2), a("f16", 1), a("f16", 2), a("f32", 1), ("c", 4096), ("c", 1e-6), ("c", 1024)]),
        ("rms_norm_persistent", "rms_norm", "rms_norm_kernel_static_persistent",
         [a("f16", 2), a("f16", 2), a("f16", 1), ("c", 2), ("c", 4096), ("c", 4096), ("c", 1e-6)]),
        ("matmul_f16", "matmul", "matmul_kernel", [a("f16", 2)] * 3 + [("c", 128), ("c", 128), ("c", 64)]),
        ("persistent_matmul", "matmul", "persistent_matmul_kernel",
         [a("f16", 2)] * 3 + [("c", 128), ("c", 128), ("c", 64)]),
        ("batch_matmul", "matmul", "batch_matmul_kernel", [a("f16", 3)] * 3 + [("c", 128), ("c", 128), ("c", 64)]),
        ("fmha", "attention", "fmha_kernel", attention + [("c", 64), ("c", 128), ("c", 1), ("c", False), ("c", True)]),
        ("fmha_causal", "attention", "fmha_kernel",
         attention + [("c", 128), ("c", 128), ("c", 1), ("c", True), ("c", True)]),
        ("fmha_gqa", "attention", "fmha_kernel", attention + [("c", 64), ("c", 128), ("c", 4), ("c", False), ("c", True)]),
        ("silu_and_mul", "fused_moe", "silu_and_mul_kernel", [a("f16", 2)] * 3 + [("c", 4096)]),
        ("fused_moe", "fused_moe", "fused_moe_kernel",
         [a("f16", 2), a("f16", 3), a("f16", 2), a("f32", 1), a("i32", 1), ("a", np.zeros(1, np.int32)),
          ("s", "i32", 2), ("c", True), ("c", 64), ("c", 128), ("c", 64)]),
    ]


def timing_inputs(name: str):
    """(grid, arguments) of a timing case, GPU-filling on an H100/H200."""
    rng = np.random.default_rng(1)

    def r16(*shape):
        return rng.standard_normal(shape, dtype=np.float32).astype(np.float16)

    def r32(*shape):
        return rng.standard_normal(shape, dtype=np.float32)

    z16 = lambda *shape: np.zeros(shape, np.float16)  # noqa: E731
    z32 = lambda *shape: np.zeros(shape, np.float32)  # noqa: E731
    s, d = 4096, 128
    if name == "fused_moe":
        tokens, topk, experts, n, k, tile_m = 2048, 2, 8, 2048, 1024, 64
        replicas = tokens * topk
        expert_of = rng.integers(0, experts, replicas)
        ids, blocks = [], []
        for expert in range(experts):
            mine = list(np.nonzero(expert_of == expert)[0])
            mine += [replicas] * (-len(mine) % tile_m)
            ids += mine
            blocks += [expert] * (len(mine) // tile_m)
        return (len(blocks) * (n // 128),), (r16(tokens, k), r16(experts, n, k), z16(replicas, n),
                                             rng.random(replicas, dtype=np.float32),
                                             np.array(ids, np.int32), np.array(blocks, np.int32), topk)
    attention = lambda kv_heads: (r16(1, 32, s, d), r16(1, kv_heads, s, d), r16(1, kv_heads, s, d),  # noqa: E731
                                  z16(1, 32, s, d), 1 / math.sqrt(d), 0)
    return {
        "vec_add_1d": lambda: ((1 << 16,), (r32(1 << 26), r32(1 << 26), z32(1 << 26))),
        "transpose": lambda: ((128, 128), (r16(8192, 8192), z16(8192, 8192))),
        "layer_norm_fwd": lambda: ((16384,), (r16(16384, 4096), r16(4096), r16(4096), z16(16384, 4096),
                                              z32(16384), z32(16384), 1e-5)),
        "rms_norm": lambda: ((16384,), (r16(16384, 4096), r16(4096), z16(16384, 4096), z32(16384))),
        "rms_norm_gather": lambda: ((16384,), (r16(16384, 4096), r16(4096), z16(16384, 4096), z32(16384))),
        "rms_norm_persistent": lambda: ((132,), (r16(16384, 4096), z16(16384, 4096), r16(4096))),
        "matmul_f16": lambda: ((1024,), (r16(4096, 4096), r16(4096, 4096), z16(4096, 4096))),
        "persistent_matmul": lambda: ((132,), (r16(4096, 4096), r16(4096, 4096), z16(4096, 4096))),
        "batch_matmul": lambda: ((8, 8, 8), (r16(8, 1024, 1024), r16(8, 1024, 1024), z16(8, 1024, 1024))),
        "fmha": lambda: ((s // 64, 32), attention(32)),
        "fmha_causal": lambda: ((s // 128, 32), attention(32)),
        "fmha_gqa": lambda: ((s // 64, 32), attention(8)),
        "silu_and_mul": lambda: ((16384,), (r16(16384, 4096), r16(16384, 4096), z16(16384, 4096))),
    }[name]()


# ---- cuTile side ------------------------------------------------------------------------------

def import_kernels(checkout: Path, scratch: Path) -> dict:
    """NVIDIA's test/kernels modules from a temporary copy, by module name. Their module-level
    `import torch` gets a stand-in holding the dtypes they read, where torch is not installed."""
    source = checkout / "test" / "kernels"
    target = scratch / "test"
    if source.is_dir():
        import shutil
        shutil.copytree(source, target / "kernels")
    else:  # a bare repository
        archive = subprocess.run(["git", "--git-dir", str(checkout), "archive", "HEAD", "test/kernels"],
                                 check=True, capture_output=True).stdout
        tarfile.open(fileobj=io.BytesIO(archive)).extractall(scratch, filter="data")
    try:
        import torch  # noqa: F401
    except ImportError:
        stand_in = types.ModuleType("torch")
        for name, value in (("int32", np.int32), ("int64", np.int64), ("float16", np.float16),
                            ("float32", np.float32), ("uint8", np.uint8), ("Tensor", object),
                            ("dtype", object), ("float8_e4m3fn", None), ("float8_e5m2", None),
                            ("float8_e8m0fnu", None)):
            setattr(stand_in, name, value)
        sys.modules["torch"] = stand_in
    sys.path.insert(0, str(target))
    import importlib
    names = ("vec_add", "transpose", "layer_norm", "rms_norm", "matmul", "attention", "fused_moe",
             "group_gemm", "fft", "scaled_matmul")
    return {name: importlib.import_module(f"kernels.{name}") for name in names}


def _fixture_module(name: str, relative: str):
    """One of our fixture generator's modules, loaded by path: its `kernels` folder would clash
    with NVIDIA's `kernels` package on sys.path."""
    import importlib.util
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "fixtures" / relative)
        module = sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]


def signature(params):
    """The KernelSignature of a case's parameters, with the fixture kernels' helpers: `arr` for
    arrays with dynamic shapes and no facts, `contiguous` for a contiguous, 16-byte-aligned
    tensor (sig then picks the v2 calling convention)."""
    import cuda.tile as ct
    from cuda.tile.compilation import ListConstraint
    import ml_dtypes
    common = _fixture_module("tilebc_fixture_common", "kernels/_common.py")
    to_ct = {np.dtype(np.float16): ct.float16, np.dtype(np.float32): ct.float32,
             np.dtype(np.int32): ct.int32, np.dtype(ml_dtypes.float8_e4m3fn): ct.float8_e4m3fn,
             np.dtype(ml_dtypes.float8_e8m0fnu): ct.float8_e8m0fnu}
    out = []
    for param in params:
        kind = param[0]
        if kind == "a":
            out.append(common.arr(to_ct[param[1].dtype], param[1].ndim))
        elif kind == "ca":
            out.append(common.contiguous(to_ct[param[1].dtype], param[1].ndim))
        elif kind == "l":
            first = param[1][0]
            out.append(ListConstraint(common.arr(to_ct[first.dtype], first.ndim), alias_groups=(),
                                      elements_may_alias=False))
        elif kind == "s":
            out.append(common.scalar({"f32": ct.float32, "i32": ct.int32}[param[1]]))
        else:
            out.append(param[1])
    return common.sig(*out)


def export(function, params, version: str) -> bytes:
    """cuTile's bytecode of `function` at `version`, as fixtures/generate.py exports ours (13.5
    enabled, 13.1/13.2 for its architecture)."""
    generate = _fixture_module("tilebc_fixture_generate", "generate.py")
    common = _fixture_module("tilebc_fixture_common", "kernels/_common.py")
    generate.enable_dev_bytecode_versions()
    fixture = common.Fixture(getattr(function, "__name__", "kernel"), function, [signature(params)])
    return generate.export_one(fixture, version)


def runtime_args(params):
    args = []
    for param in params:
        if param[0] in ("a", "ca"):
            args.append(param[1].copy())
        elif param[0] == "l":
            args.append([x.copy() for x in param[1]])
        elif param[0] == "s":
            args.append(param[2])
    return args


def flat(args):
    out = []
    for arg in args:
        out.extend(arg if isinstance(arg, (list, tuple)) else [arg])
    return out


def disagreement(actual, expected):
    """Arrays of `actual` that differ from `expected`: exactly for integers, within 3e-2 for
    16-bit and 8-bit floats, 1e-4 for wider ones (gpu_checks.compare_arrays)."""
    from gpu_checks import compare_arrays
    bad = []
    for index, (x, y) in enumerate(zip(flat(actual), flat(expected))):
        if isinstance(x, np.ndarray):
            found = compare_arrays(x, y, rtol=_tolerance(x), atol=_tolerance(x))
            if found is not None:
                bad.append(f"argument {index}: {found}")
    return bad


def _tolerance(array: np.ndarray) -> float:
    return 0.0 if array.dtype.kind in "iub" else 3e-2 if array.dtype.itemsize <= 2 else 1e-4


# ---- checks -------------------------------------------------------------------------------------

def format_problems(files: dict) -> list:
    """What goes wrong in the format checks (the module docstring); converting to a version that
    lacks one of the module's ops must be refused, which is not a problem."""
    import tilebc
    from tilebc import oracles
    from tilebc.text import parse_module, print_module
    problems, listings = [], {}
    for version, data in files.items():
        plain, with_debug = oracles.tileirdisasm(data), oracles.tileirdisasm(data, debug_info=True)
        listings[version] = plain.stdout
        module = tilebc.load(data)
        if print_module(module) != plain.stdout:
            problems.append(f"{version}: dis differs from tileirdisasm")
        if print_module(module, debug=True) != with_debug.stdout:
            problems.append(f"{version}: dis -g differs from tileirdisasm -g")
        if tilebc.dump(module) != data:
            problems.append(f"{version}: dump does not give cuTile's bytes back")
        ours = tilebc.dump(parse_module(plain.stdout), module.version)
        back = oracles.tileirdisasm(ours)
        if not back.ok or back.stdout != plain.stdout:
            problems.append(f"{version}: the reassembled listing disassembles differently")
        if version == "13.5":
            compiled = oracles.tileiras(ours, "sm_90")
            if compiled.returncode == 5:  # an architecture refusal (fp8 scales): Blackwell then
                compiled = oracles.tileiras(ours, "sm_100")
            if not compiled.ok:
                problems.append(f"tileiras refuses the reassembly: {compiled.stderr.strip()[:200]}")
    newest = files.get("13.5")
    if newest is not None:
        module = tilebc.load(newest)
        for version in files:
            if version == "13.5":
                continue
            try:
                converted = tilebc.dump(module, version)
            except tilebc.TilebcError as error:
                if "needs bytecode version" not in error.message:  # else: an op the version lacks
                    problems.append(f"convert 13.5 -> {version}: {error.message}")
                continue
            listing = oracles.tileirdisasm(converted)
            if not listing.ok or print_module(tilebc.load(converted)) != listing.stdout:
                problems.append(f"convert 13.5 -> {version}: tileirdisasm and tilebc disagree")
            elif version >= "13.3" and listing.stdout != listings[version]:
                problems.append(f"convert 13.5 -> {version}: differs from cuTile's {version} file")
    return problems


def execution(data: bytes, params, grid, reference, tileiras: bool):
    """(problems, notes): the interpreter against numpy, then each PTX on the emulator against it."""
    import tilebc
    from tilebc.interp import run as interpret
    from tilebc_runtime import sim
    from tilebc_runtime.sim import nvidia
    module = tilebc.load(data)
    entry = module.functions[0].name
    before, expected = runtime_args(params), runtime_args(params)
    interpret(module, entry, grid, *expected)
    problems, notes = [], []
    if not any(isinstance(x, np.ndarray) and not np.array_equal(x, y)
               for x, y in zip(flat(before), flat(expected))):
        problems.append("the interpreter's run wrote nothing")
    if reference is not None:
        from gpu_checks import compare_arrays
        for index, value in reference(before).items():
            got = flat(expected)[index]
            found = compare_arrays(got, value, rtol=_tolerance(got), atol=_tolerance(got))
            if found is not None:
                problems.append(f"interpreter vs numpy: argument {index}: {found}")
        notes.append("numpy")
    runs = [("JIT sm_80", lambda args: sim.run(module, entry, grid, *args, arch="sm_80")),
            ("JIT sm_90", lambda args: sim.run(module, entry, grid, *args, arch="sm_90"))]
    if tileiras:
        runs.append(("tileiras sm_90", lambda args: nvidia.run(module, entry, grid, *args, arch="sm_90")))
    for label, run in runs:
        args = runtime_args(params)
        try:
            run(args)
        except Exception as error:  # noqa: BLE001 - reported per case
            problems.append(f"{label}: {type(error).__name__}: {str(error)[:200]}")
            continue
        problems += [f"{label} vs interpreter: {each}" for each in disagreement(args, expected)]
        notes.append(label)
    return problems, notes


def check(checkout: Path, results: Path) -> int:
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="cutile-python-") as scratch:
        modules = import_kernels(checkout, Path(scratch))
        rows = []
        for name, module_name, function, params, grid, reference in small_cases():
            kernel = getattr(modules[module_name], function)
            files, refused = {}, []
            for version in _fixture_module("tilebc_fixture_generate", "generate.py").VERSIONS:
                try:
                    files[version] = export(kernel, params, version)
                except Exception as error:  # noqa: BLE001 - cuTile's refusal, recorded
                    refused.append(f"{version} ({type(error).__name__})")
            problems = format_problems(files)
            notes = []
            if "13.5" in files:
                found, notes = execution(files["13.5"], params, grid, reference, "scaled" not in name)
                problems += found
            rows.append((name, function, sorted(files), refused, problems, notes))
            print(f"{name}: {'ok' if not problems else '; '.join(problems)}", flush=True)
    commit = _head(checkout)
    write_check_results(results, rows, commit, time.time() - started)
    return 1 if any(row[4] for row in rows) else 0


def _head(checkout: Path) -> str:
    for args in (["-C", str(checkout)], ["--git-dir", str(checkout)]):
        done = subprocess.run(["git", *args, "log", "-1", "--format=%h %s (%cs)"], capture_output=True, text=True)
        if done.returncode == 0:
            return done.stdout.strip()
    return "unknown"


def write_check_results(path: Path, rows, commit: str, seconds: float) -> None:
    failing = [row for row in rows if row[4]]
    lines = [f"# NVIDIA's cutile-python kernels through tilebc (CPU)", "",
             f"Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC  ",
             f"Kernels: NVIDIA/cutile-python `test/kernels` at {commit}  ",
             f"Command: `python conformance/run_cutile_python.py CHECKOUT` ({seconds:.0f} s, "
             f"{platform.machine()}, Python {platform.python_version()})", "",
             f"**{len(rows) - len(failing)} of {len(rows)} cases pass every check.** What each checks: "
             "the docstring of conformance/run_cutile_python.py.", "",
             "| case | kernel | versions exported | checks run on the 13.5 file | result |",
             "|---|---|---|---|---|"]
    for name, function, versions, refused, problems, notes in rows:
        exported = ", ".join(versions) + (f" (cuTile refuses {', '.join(refused)})" if refused else "")
        lines.append(f"| {name} | `{function}` | {exported} | {', '.join(notes)} | "
                     f"{'ok' if not problems else '; '.join(problems)} |")
    lines.append("")
    path.write_text("\n".join(lines))
    print(f"wrote {path}", file=sys.stderr)


# ---- the GPU machine ---------------------------------------------------------------------------

def export_for_gpu(checkout: Path, folder: Path) -> int:
    """The correctness cases (bytecode, inputs, the interpreter's outputs) and the timing cases
    (bytecode, aligned and dynamic), with tileiras's sm_90 cubins in folder/cache."""
    import tilebc
    import tilebc_runtime
    from tilebc.interp import run as interpret
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["TILEBC_CACHE_DIR"] = str(folder / "cache")
    with tempfile.TemporaryDirectory(prefix="cutile-python-") as scratch:
        modules = import_kernels(checkout, Path(scratch))
        correctness = []
        for name, module_name, function, params, grid, _reference in small_cases():
            data = export(getattr(modules[module_name], function), params, "13.5")
            module = tilebc.load(data)
            entry = module.functions[0].name
            expected = runtime_args(params)
            interpret(module, entry, grid, *expected)
            tileiras = "scaled" not in name  # tileiras has no sm_90 code for fp8 block scales
            if tileiras:
                tilebc_runtime.load(tilebc.load(data), backend="tileiras")[entry].compile("sm_90")
            correctness.append(dict(name=name, data=data, entry=entry, grid=grid, args=runtime_args(params),
                                    expected=expected, tileiras=tileiras))
        timing = []
        for aligned in (True, False):
            for name, module_name, function, params in timing_cases():
                # fused_moe's expert id per row block: as many as the blocks, not a multiple of 16
                params = [("ca",) + p[1:] if aligned and p[0] == "a" and not (name == "fused_moe" and i == 5)
                          else p for i, p in enumerate(params)]
                data = export(getattr(modules[module_name], function), params, "13.5")
                entry = tilebc.load(data).functions[0].name
                tilebc_runtime.load(tilebc.load(data), backend="tileiras")[entry].compile("sm_90")
                timing.append(dict(name=name, aligned=aligned, data=data, entry=entry))
            print(f"exported {len(timing)} timing cases", flush=True)
    with open(folder / "cases.pkl", "wb") as stream:
        pickle.dump(dict(correctness=correctness, timing=timing, commit=_head(checkout)), stream)
    return 0


def run_on_gpu(folder: Path, results: Path | None, rounds: int, timed_arrays: str) -> int:
    import copy
    import bench_gpu_scale
    import gpu_checks
    import tilebc
    count, reason = gpu_checks.gpu_presence()
    if not count:
        print(f"no GPU: {reason}")
        return 0
    with open(folder / "cases.pkl", "rb") as stream:
        cases = pickle.load(stream)
    os.environ.setdefault("TILEBC_CACHE_DIR", str(folder / "cache"))  # tileiras's cubins are there
    device = _device_name()
    arrays = gpu_checks.DeviceArrays("torch")
    started = time.time()
    checked = []
    for case in cases["correctness"]:
        module = tilebc.load(case["data"])
        outcome = {}
        for backend in ("jit", "jit@sm_80", "tileiras"):
            if backend == "tileiras" and not case["tileiras"]:
                outcome[backend] = "no sm_90 code (fp8 block scales)"
                continue
            args = copy.deepcopy(case["args"])
            try:
                gpu_checks.GpuLauncher(backend, arrays)(module, case["entry"], case["grid"], *args)
                bad = disagreement(args, case["expected"])
            except Exception as error:  # noqa: BLE001 - reported per case
                bad = [f"{type(error).__name__}: {str(error)[:200]}"]
            outcome[backend] = "ok" if not bad else "; ".join(bad)
        checked.append((case["name"], outcome))
        print(case["name"], outcome, flush=True)
    runner = bench_gpu_scale.ScaleRunner(arrays, rounds=rounds, repeat=10, batch=5)
    timed = []
    for case in cases["timing"]:
        if timed_arrays != "both" and case["aligned"] != (timed_arrays == "aligned"):
            continue
        grid, args = timing_inputs(case["name"])
        try:
            runner(tilebc.load(case["data"]), case["entry"], grid, *args)
            timed.append((case, grid, runner.rows[-1]))
            row = runner.rows[-1]
            print(f"{case['name']} aligned={case['aligned']}: {row['jit']:.1f} vs {row['tileiras']:.1f} us",
                  flush=True)
        except Exception as error:  # noqa: BLE001
            timed.append((case, grid, {"error": f"{type(error).__name__}: {str(error)[:200]}"}))
    report = render_gpu(device, cases.get("commit", "?"), checked, timed, time.time() - started, rounds)
    print(report)
    if results:
        results.write_text(report)
    failing = sum(value != "ok" and not value.startswith("no sm_90") for _, o in checked for value in o.values())
    return 1 if failing else 0


def _device_name() -> str:
    try:
        from cuda.bindings import driver as cu
        cu.cuInit(0)
        _, device = cu.cuDeviceGet(0)
        _, name = cu.cuDeviceGetName(128, device)
        return name.split(b"\0")[0].decode()
    except Exception:  # noqa: BLE001
        return "unknown GPU"


def _options() -> str:
    """This run's --rounds/--timed as given (--gpu and --results left out)."""
    words, kept, skip = sys.argv[1:], [], False
    for index, word in enumerate(words):
        if skip:
            skip = False
        elif word in ("--gpu", "--results"):
            skip = True
        elif not word.startswith(("--gpu=", "--results=")):
            kept.append(word)
    return " ".join(kept)


def render_gpu(device, commit, checked, timed, seconds, rounds) -> str:
    from statistics import geometric_mean
    lines = [f"# NVIDIA's cutile-python kernels on {device}: our JIT and tileiras", "",
             f"Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; kernels at {commit}.  ",
             "Command: `python conformance/run_cutile_python.py CHECKOUT --export DIR` (CPU machine), then "
             f"`python conformance/run_cutile_python.py --gpu DIR {_options()}` ({seconds:.0f} s).", "",
             "## Correctness: each case's 13.5 file against the interpreter", "",
             "| case | our sm_90 code | our sm_80 code | tileiras's cubin |", "|---|---|---|---|"]
    for name, outcome in checked:
        lines.append(f"| {name} | " + " | ".join(outcome[b] for b in ("jit", "jit@sm_80", "tileiras")) + " |")
    lines += ["", "## Time per launch at GPU-filling sizes, the same bytecode through both compilers", "",
              f"Median µs over {rounds} alternating rounds (bench_gpu_scale's runner: CUDA events, batches of 5). "
              "Aligned: arrays specialised as cuTile specialises contiguous, 16-byte-aligned torch tensors whose "
              "sizes are multiples of 16; dynamic: no shape, stride or alignment facts.", "",
              "| kernel | arrays | grid | ours µs | tileiras µs | ours / tileiras | agreement |",
              "|---|---|---|---:|---:|---:|---|"]
    ratios = {True: [], False: []}
    for case, grid, row in timed:
        arrays = "aligned" if case["aligned"] else "dynamic"
        if "error" in row:
            lines.append(f"| {case['name']} | {arrays} | {'×'.join(map(str, grid))} | – | – | – | {row['error']} |")
            continue
        ratio = row["jit"] / row["tileiras"]
        ratios[case["aligned"]].append(ratio)
        lines.append(f"| {case['name']} | {arrays} | {'×'.join(map(str, grid))} | {row['jit']:.1f} | "
                     f"{row['tileiras']:.1f} | {ratio:.2f} | {row['agreement']} |")
    lines.append("")
    for aligned, values in ratios.items():
        if values:
            lines.append(f"Geometric mean ours / tileiras, {'aligned' if aligned else 'dynamic'}: "
                         f"{geometric_mean(values):.2f} over {len(values)} kernels (below 1: ours is faster).")
    lines.append("")
    return "\n".join(lines)


def run_model(folder: Path, results: Path, names) -> int:
    """The performance model (benchmarks/bench_model.py's recorder: both compilers' sm_90 PTX on the
    emulator, sampled CTAs, H100 knobs) on the aligned timing cases, beside the GPU's figures."""
    import bench_model
    import tilebc
    from tilebc_runtime.perf.model import Hardware
    with open(folder / "cases.pkl", "rb") as stream:
        cases = pickle.load(stream)
    os.environ.setdefault("TILEBC_CACHE_DIR", str(folder / "cache"))
    gpu_results = results.parent / "cutile-python-gpu.md"
    measured = _measured(gpu_results)
    measured_on = _dated(gpu_results)
    hw = Hardware.h100_sxm()
    started = time.time()
    rows = []
    for case in cases["timing"]:
        if not case["aligned"] or (names and case["name"] not in names):
            continue
        grid, args = timing_inputs(case["name"])
        recorder = bench_model.Recorder(hw, bench_model.LARGE_SAMPLE, bench_model.model_cache_dir(),
                                        case["name"], their_archs=("sm_90",))
        recorder(tilebc.load(case["data"]), case["entry"], grid, *args)
        ours, theirs = recorder.rows[case["entry"]]
        left = recorder.left_out.get(case["entry"])
        rows.append((case["name"], ours, None if left else theirs, left, measured.get(case["name"])))
        print(case["name"], f"{ours.time:.1f}", "-" if left else f"{theirs.time:.1f}", flush=True)
    lines = ["# The performance model on NVIDIA's cutile-python kernels", "",
             f"Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC. Command: "
             f"`python conformance/run_cutile_python.py --model DIR` ({time.time() - started:.0f} s), on the "
             "aligned timing cases of `--export DIR`. Model: µs at the launch's grid on the H100 knobs "
             f"(benchmarks/MODEL.md), {bench_model.LARGE_SAMPLE} CTAs profiled; measured: "
             "conformance/cutile-python-gpu.md (an H200, whose memory is ~1.4x an H100's"
             + (f"; the code of {measured_on}, which may be older than this model run's"
                if measured_on else "") + ").", "",
             "| kernel | model ours µs (bound) | model tileiras µs (bound) | model ratio | measured ratio |",
             "|---|---:|---:|---:|---:|"]
    for name, ours, theirs, left, seen in rows:
        ratio = f"{ours.time / theirs.time:.2f}" if theirs and theirs.time else "–"
        them = f"{theirs.time:.1f} ({theirs.bound})" if theirs else \
            f"– (not on the emulator: {left.split('>: ', 1)[-1][:120]})"
        lines.append(f"| {name} | {ours.time:.1f} ({ours.bound}) | {them} | {ratio} | "
                     f"{seen if seen else '–'} |")
    lines.append("")
    results.write_text("\n".join(lines))
    print(f"wrote {results}", file=sys.stderr)
    return 0


def _dated(path: Path) -> str | None:
    """The date line of a --gpu results file ("2026-11-27 14:28 UTC"), or None."""
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.startswith("Date: "):
                return line[len("Date: "):].split(";")[0].strip()
    return None


def _measured(path: Path) -> dict:
    """kernel -> its measured ours / tileiras ratio (aligned rows) from a --gpu results file."""
    found = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            if len(cells) == 7 and cells[1] == "aligned":
                found[cells[0]] = cells[5]
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", nargs="?", type=Path, help="a clone of NVIDIA/cutile-python")
    parser.add_argument("--results", type=Path, help=f"results file (default for the CPU checks: {RESULTS})")
    parser.add_argument("--export", type=Path, metavar="DIR", help="write the GPU machine's cases to DIR")
    parser.add_argument("--gpu", type=Path, metavar="DIR", help="run DIR's cases on this machine's GPU")
    parser.add_argument("--model", type=Path, metavar="DIR",
                        help="the performance model on DIR's aligned timing cases (no GPU)")
    parser.add_argument("names", nargs="*", help="with --model: only these timing cases")
    parser.add_argument("--rounds", type=int, default=5, help="alternating timing rounds (--gpu)")
    parser.add_argument("--timed", choices=("aligned", "dynamic", "both"), default="both",
                        help="which arrays of the timing cases to time (--gpu)")
    args = parser.parse_args(argv)
    if args.gpu:
        return run_on_gpu(args.gpu, args.results, args.rounds, args.timed)
    if args.model:
        names = ([str(args.checkout)] if args.checkout else []) + args.names
        return run_model(args.model, args.results or RESULTS.with_name("cutile-python-model.md"), names)
    if args.checkout is None:
        parser.error("CHECKOUT is needed (a clone of NVIDIA/cutile-python)")
    if args.export:
        return export_for_gpu(args.checkout, args.export)
    return check(args.checkout, args.results or RESULTS)


if __name__ == "__main__":
    sys.exit(main())
