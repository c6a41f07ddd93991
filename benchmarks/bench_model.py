"""Performance model (ESTIMATES, no GPU): our JIT's code against tileiras's on the same kernels.

    PYTHONPATH=.:runtime .venv/bin/python benchmarks/bench_model.py [--quick] [--record] [NAME ...]

For every fixture case of tests/test_interp_*.py (the probes and the nn, linalg, features, datamove
and sci families) each kernel launch of the case runs twice on the PTX emulator with the same
inputs: through our JIT's PTX (sm_90; the case's numpy checks judge these results) and through
tileiras's PTX (sm_80, sm_89 where sm_80 refuses the types; on a copy of the inputs). Both runs
are profiled (tilebc_runtime.sim.profile), both PTX files are assembled by ptxas for sm_90 to get
registers, spills, shared memory and the SASS of every PTX line (tilebc_runtime.perf.static), and
the H100 model (tilebc_runtime.perf.model, assumptions in benchmarks/MODEL.md) turns the counts
into an estimated time at the case's grid and "at scale" (the same per-CTA work over
132 × 64 CTAs). One row per kernel entry (launches of one entry in a case are summed), sorted
worst first by the at-scale ratio ours / tileiras; kernels left out are listed with the reason.

`--arch sm_80` runs our JIT's code for that target instead of sm_90 (the model and the SASS
stay the H100's); `--quick` runs a dozen representative cases; `--record` writes
benchmarks/results/model.md;
`--sm90` instead compares ours with tileiras's sm_90 PTX (TMA, wgmma) on the tensor-core fixtures,
at their size and at sizes timed on an H100 (`--record`: benchmarks/results/model-sm90.md);
`--sample N` profiles only N CTAs of larger grids (counts extrapolated; results are then not
checked); `--csv FILE` writes every row.
"""
from __future__ import annotations

import argparse
import copy
import datetime
import importlib
import platform
import re
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "runtime"), str(ROOT / "tests")]

from fixture_cases import CASE_MODULES  # noqa: E402
from tilebc.interp.api import find_entry  # noqa: E402
from tilebc_runtime.compiler import compile as jit_compile  # noqa: E402
from tilebc_runtime.perf.model import Hardware, estimate, launch_counts, scale_grid  # noqa: E402
from tilebc_runtime.perf.static import environment_note, sass_facts  # noqa: E402
from tilebc_runtime import sim  # noqa: E402
from tilebc_runtime.sim import Profile, nvidia  # noqa: E402
from tilebc_runtime.sim.errors import PtxSyntaxError, UnsupportedInstruction  # noqa: E402
from tilebc_runtime.sim.runner import load_any  # noqa: E402

OUR_ARCH = "sm_90"
SASS_ARCH = "sm_90"
QUICK = ["elementwise_f32", "reduce_rows", "matmul_f16", "nn_softmax_rows", "nn_layer_norm_fwd",
         "la_gemm_persistent", "la_gemm_alpha_beta", "la_stencil_2d", "la_transpose",
         "ft_f64_math", "scan_cumsum_cumprod", "dm_adam_step"]


class Side:
    """One compiler's launches of one kernel entry: summed estimates and counts."""

    def __init__(self):
        self.time = 0.0
        self.scale_time = 0.0
        self.bounds = {}
        self.scale_bounds = {}
        self.instructions = 0.0
        self.sectors = 0.0
        self.ideal_sectors = 0.0
        self.wavefronts = 0.0
        self.ideal_wavefronts = 0.0
        self.barriers = 0.0
        self.dram = 0.0
        self.tma_sectors = 0.0
        self.registers = 0
        self.spills = 0
        self.shared = 0
        self.occupancy = 0
        self.sass = True
        self.launches = 0

    def add(self, counts, hw):
        here = estimate(counts, hw)
        big = estimate(counts, hw, grid=scale_grid(hw))
        self.time += here.time_us
        self.scale_time += big.time_us
        for target, est in ((self.bounds, here), (self.scale_bounds, big)):
            target[est.bound] = target.get(est.bound, 0.0) + est.time_us
        self.instructions += counts.total_instructions
        self.sectors += counts.global_sectors
        self.ideal_sectors += counts.global_ideal_sectors
        self.wavefronts += counts.shared_wavefronts
        self.ideal_wavefronts += counts.shared_ideal_wavefronts
        self.barriers += counts.barriers
        self.dram += counts.dram_bytes
        self.tma_sectors += counts.tma_sectors
        self.registers = max(self.registers, counts.registers)
        self.spills = max(self.spills, counts.spill_bytes)
        self.shared = max(self.shared, counts.shared_bytes)
        self.occupancy = here.ctas_per_sm if not self.launches else min(self.occupancy,
                                                                         here.ctas_per_sm)
        self.sass = self.sass and counts.sass
        self.launches += 1

    @staticmethod
    def _top(bounds):
        return max(bounds, key=bounds.get) if bounds else "-"

    @property
    def bound(self):
        return self._top(self.bounds)

    @property
    def scale_bound(self):
        return self._top(self.scale_bounds)


_OUR_PTX = {}
OUR_OPTIONS = {}  # JIT compile options of our side (--jit-option)


def _our_compiled(module, entry):
    key = (id(module), entry, OUR_ARCH, tuple(sorted(OUR_OPTIONS.items())))
    if key not in _OUR_PTX:
        _OUR_PTX[key] = (module, jit_compile(module, entry=entry, arch=OUR_ARCH, emit="ptx",
                                             **OUR_OPTIONS))
    return _OUR_PTX[key][1]


def _with_dynamic_shared(facts, dynamic):
    """`facts` with the launch's dynamic shared memory added to ptxas's static figure: a
    pipeline's stages over 48 KiB are dynamic, and occupancy must count them."""
    import dataclasses
    return dataclasses.replace(facts, shared_bytes=facts.shared_bytes + dynamic) if dynamic \
        else facts


def lines_of(image):
    return {ins.line for ins in image.kernel.instructions}


class Recorder:
    """Stands in for the case module's `run`: both compilers, profiled, per launch."""

    def __init__(self, hw, sample, cache_dir, name, their_archs=("sm_80", "sm_89")):
        self.their_archs = their_archs
        self.hw = hw
        self.sample = sample
        self.cache_dir = cache_dir
        self.name = name
        self.rows = {}        # entry -> (ours Side, theirs Side)
        self.left_out = {}    # entry -> reason (tileiras side)

    def __call__(self, module_or_path, entry, grid, *args, **kwargs):
        module = load_any(module_or_path)
        function = find_entry(module, entry)
        theirs_args = copy.deepcopy(args)
        ours = Profile(sample=self.sample)
        image = sim.run(module, entry, grid, *args, arch=OUR_ARCH, profile=ours,
                        **{**kwargs, **OUR_OPTIONS})
        compiled = _our_compiled(module, function.name)
        facts = sass_facts(compiled.ptx, function.name, SASS_ARCH,
                           instruction_lines=lines_of(image), cache_dir=self.cache_dir)
        facts = _with_dynamic_shared(facts, compiled.dynamic_shared_bytes)
        ours_side, theirs_side = self.rows.setdefault(function.name, (Side(), Side()))
        cap = _array_bytes(args)
        ours_side.add(launch_counts(ours, facts, cap, self.hw), self.hw)
        if function.name in self.left_out:
            return image
        theirs = Profile(sample=self.sample)
        arch = None
        try:
            for arch in self.their_archs:
                try:
                    ptx = nvidia.tileiras_ptx(module, arch, self.cache_dir)
                    break
                except nvidia.TileirasError as error:
                    if arch == self.their_archs[-1]:
                        raise
                    last = error  # noqa: F841
            their_kwargs = dict(kwargs)
            if their_kwargs.get("print_stream") is not None:  # the case reads ours only
                import io
                their_kwargs["print_stream"] = io.StringIO()
            their_image = nvidia.run(module, entry, grid, *theirs_args, arch=arch,
                                     cache_dir=self.cache_dir, profile=theirs, **their_kwargs)
            their_facts = sass_facts(ptx, function.name, SASS_ARCH,
                                     instruction_lines=lines_of(their_image),
                                     cache_dir=self.cache_dir)
            theirs_side.add(launch_counts(theirs, their_facts, cap, self.hw), self.hw)
        except nvidia.TileirasError as error:
            self.left_out[function.name] = "tileiras refuses it: " + _short(error)
        except (UnsupportedInstruction, PtxSyntaxError) as error:
            self.left_out[function.name] = f"tileiras's {arch} PTX: emulator lacks " + \
                _short(error)
        except Exception as error:  # noqa: BLE001 - reported per kernel, the sweep goes on
            self.left_out[function.name] = f"tileiras's {arch} PTX failed on the emulator: " \
                f"{type(error).__name__}: {_short(error)}"
        return image


def _array_bytes(args) -> float:
    """Bytes of the numpy arrays among a launch's arguments (an upper bound of its footprint)."""
    import numpy as np
    total = 0
    for value in args:
        array = getattr(value, "array", value)
        if isinstance(array, np.ndarray):
            total += array.nbytes
    return float(total)


def _short(error) -> str:
    text = " ".join(str(error).split())
    text = re.sub(r"\b\w{40,}\b", "…", text)  # cuTile's mangled kernel names would fill it
    if "unsupported type" in text:
        text = text[text.index("unsupported type"):]
    return text[:140]


def model_cache_dir() -> Path:
    """Where PTX, SASS facts and tileiras's PTX are kept between runs: the user's own cache
    folder, owner-only (checked as the cubin cache's root is), not a shared temp path whose
    files another user could plant."""
    from tilebc_runtime.cache import _prepare_directory, default_root
    path = Path(default_root()) / "model-ptx"
    problem = _prepare_directory(path)
    if problem:
        raise SystemExit(f"bench_model: {path} {problem}")
    return path


def run_case(reference, name, hw, sample, cache_dir, check, their_archs=("sm_80", "sm_89")):
    """(rows, left_out) of one fixture case."""
    versions = reference.versions(name)
    module = reference.module(name, versions[-1])
    recorder = Recorder(hw, sample, cache_dir, name, their_archs)
    original_run, original_check = reference.run, getattr(reference, "check", None)
    reference.run = recorder
    if not check and original_check is not None:
        reference.check = lambda *a, **k: None
    try:
        reference.CASES[name](module)
        error = None
    except AssertionError as failure:
        error = "our results differ from the reference: " + _short(failure) if check else None
    except (UnsupportedInstruction, PtxSyntaxError) as failure:
        error = "our PTX: emulator lacks " + _short(failure)
    except Exception as failure:  # noqa: BLE001
        last = traceback.extract_tb(failure.__traceback__)[-1]
        error = f"{type(failure).__name__}: {_short(failure)} ({Path(last.filename).name}:" \
                f"{last.lineno})"
    finally:
        reference.run = original_run
        if original_check is not None:
            reference.check = original_check
    return recorder, error


def _cpu() -> float:
    """CPU seconds of this process and its finished children (tileiras, ptxas, nvdisasm)."""
    import resource
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


# ------------------------------------------------------------------ GPU-filling problem sizes
# The fixture kernels bake their tile shapes (and some loop counts) in as constants, so a larger
# problem is a larger grid over larger arrays. These launch the fixture modules at sizes that fill
# an H100 many times over; they are profiled on `LARGE_SAMPLE` CTAs spread over the grid (counts
# scaled by grid / sampled) and their results are not checked.
LARGE_SAMPLE = 6


def _large_cases():
    import numpy as np
    import ml_dtypes
    rng = np.random.default_rng(5)

    def f(shape, dtype=np.float32, low=0.5, high=2.0):
        return rng.uniform(low, high, shape).astype(dtype)

    def gemm(ref):   # matmul_f16: 32x32 tiles, K fixed by the kernel (4 K tiles of 16)
        m = n = 1024
        k = 4 * 16
        a, b = f((m, k), np.float16, -1, 1), f((k, n), np.float16, -1, 1)
        c = np.zeros((m, n), np.float32)
        ref.run(ref.module_, ref.entry(ref.module_, 0), (m // 32, n // 32), a, b, c)

    def elementwise(ref):   # elementwise_f32: 64 elements per block, 2^20 elements
        n = 1 << 20
        a, b, out = f(n), f(n), np.zeros(n, np.float32)
        ref.run(ref.module_, ref.entry(ref.module_), (n // 64,), a, b, out)

    def reduce_rows(ref):   # 8 rows of 32 per block
        rows = 1 << 15
        x = f((rows, 32))
        outs = [np.zeros(rows, np.float32) for _ in range(4)] + [np.zeros(rows, np.int32)]
        ref.run(ref.module_, ref.entry(ref.module_), (rows // 8,), x, *outs)

    def softmax(ref):   # persistent over tiles of 4 rows
        x = f((8192, 50), np.float16, -3, 3)
        y = np.zeros_like(x)
        ref.run(ref.module_, ref.entry(ref.module_, 0), (132 * 4,), x, y)

    def layer_norm(ref):   # one row per block
        rows, cols = 16384, 80
        x = f((rows, cols), np.float16, -2, 2)
        w, b = f(cols, np.float16), f(cols, np.float16)
        y = np.zeros_like(x)
        mean, rstd = np.zeros(rows, np.float32), np.zeros(rows, np.float32)
        ref.run(ref.module_, ref.entry(ref.module_, 0), (rows,), x, w, b, y, mean, rstd,
                np.float32(1e-5))

    def rms_norm(ref):
        rows = 16384
        x, w = f((rows, 50), np.float16), f(50, np.float16)
        y, rstd = np.zeros_like(x), np.zeros(rows, np.float32)
        ref.run(ref.module_, ref.entry(ref.module_, 0), (rows,), x, w, y, rstd)

    def adam(ref):   # tiles of 32
        n = 1 << 20
        p, g = f(n), f(n, ml_dtypes.bfloat16)
        m, v = f(n), f(n)
        ref.run(ref.module_, ref.entry(ref.module_, 0), (n // 32,), p, g, m, v,
                np.zeros(n, ml_dtypes.bfloat16),
                *(np.float32(x) for x in (1e-2, 0.9, 0.999, 1e-8, 0.01)), np.int32(3))

    def gemv(ref):   # 16 rows per block
        m, k = 1 << 14, 70
        a, x = f((m, k), np.float16, -1, 1), f(k, np.float16, -1, 1)
        ref.run(ref.module_, ref.entry(ref.module_), (m // 16,), a, x,
                np.zeros(m, np.float32), np.float32(-2.0))

    def black_scholes(ref):   # tiles of 32
        n = 1 << 20
        s, k, t = f(n, low=10, high=50), f(n, low=10, high=50), f(n, low=0.25, high=2)
        ref.run(ref.module_, ref.entry(ref.module_, 0), (n // 32,), s, k, t,
                np.zeros(n, np.float32), np.zeros(n, np.float32), np.float32(0.02),
                np.float32(0.3))

    def gemm_persistent(ref):   # persistent over output tiles; K = 40
        m = n = 512
        k = 40
        a = f((m, k), ml_dtypes.bfloat16, -1, 1)
        b = f((k, n), ml_dtypes.bfloat16, -1, 1)
        ref.run(ref.module_, ref.entry(ref.module_), (132 * 2,), a, b,
                np.zeros((m, n), np.float32))

    def gemm_aligned(size):   # 64x128x64 tiles on contiguous 16-byte-aligned arrays, size^3
        def launch(ref):
            m = n = k = size
            a, b = f((m, k), np.float16, -1, 1), f((k, n), np.float16, -1, 1)
            bias = f(n, np.float16, -0.5, 0.5)
            ref.run(ref.module_, ref.entry(ref.module_), ((m // 64) * (n // 128),), a, b, bias,
                    np.zeros((m, n), np.float16))
        return launch

    def attention(ref):   # causal, 64-row query tiles over 2048 keys, head dim 64, 64 heads
        batch, seq = 32, 2048
        q, k, v = (f((batch, 2, seq, 64), np.float16, -1, 1) for _ in range(3))
        ref.run(ref.module_, ref.entry(ref.module_, 0), (seq // 64, batch * 2), q, k, v,
                np.zeros_like(q), np.float32(0.125))

    # name -> [(label, launch)]: "(large)", or "(large, WHAT)" where a kernel has several sizes
    return {"matmul_f16": [("large", gemm)], "elementwise_f32": [("large", elementwise)],
            "reduce_rows": [("large", reduce_rows)], "nn_softmax_rows": [("large", softmax)],
            "nn_layer_norm_fwd": [("large", layer_norm)], "nn_rms_norm_tiled": [("large", rms_norm)],
            "dm_adam_step": [("large", adam)], "la_gemv": [("large", gemv)],
            "sci_black_scholes": [("large", black_scholes)],
            "la_gemm_persistent": [("large", gemm_persistent)],
            "la_gemm_aligned_tile": [("large", gemm_aligned(2048)),
                                     ("large, 512³", gemm_aligned(512))],
            "nn_flash_attention_tile": [("large", attention)]}


def run_large(reference, name, launch, hw, cache_dir, their_archs=("sm_80", "sm_89")):
    """(recorder, error) of one GPU-filling launch of a fixture kernel (sampled, not checked)."""
    module = reference.module(name, reference.versions(name)[-1])
    recorder = Recorder(hw, LARGE_SAMPLE, cache_dir, name, their_archs)
    original_run = reference.run
    reference.run = recorder
    reference.module_ = module
    try:
        launch(reference)
        error = None
    except Exception as failure:  # noqa: BLE001
        error = f"{type(failure).__name__}: {_short(failure)}"
    finally:
        reference.run = original_run
        del reference.module_
    return recorder, error


# ------------------------------------------------------------------ sm_90: wgmma against TMA
# The tensor-core fixtures whose production tiles our JIT lowers to wgmma, against tileiras's
# sm_90 code (TMA, mbarrier pipelines, wgmma), each at the fixture's size and at the sizes timed
# on a Hopper GPU (bench_gpu_scale --gpu-only; measured µs ours / tileiras, 2026-11-27).
SM90_FIXTURES = ("la_gemm_aligned_tile", "la_bmm_aligned_tile", "nn_flash_attention_tile")
SM90_MEASURED = {  # an H100 80GB HBM3 (the model's knobs' GPU), results/gpu_only.md
    "la_gemm_aligned_tile 2048³": (38.7, 41.0),
    "la_gemm_aligned_tile 4096³": (335.5, 346.9),
    "la_bmm_aligned_tile 8 × 1024³": (48.5, 51.6),
    "la_bmm_aligned_tile 16 × 2048×2048×512": (211.4, 245.7),
    "nn_flash_attention_tile causal 32×2×2048×64, 64-row tiles": (114.8, 117.1),
    "nn_flash_attention_tile 32×2×2048×64, 128-row tiles": (164.6, 169.6),
}


def _sm90_large():
    """label -> (fixture, launch) of the timed sizes, one launch each."""
    import numpy as np
    import ml_dtypes
    rng = np.random.default_rng(7)

    def f(shape, dtype):
        return rng.uniform(-1, 1, shape).astype(dtype)

    def gemm(m, n, k):   # 64x128x64 tiles, bias + relu
        def launch(ref):
            a, b, bias = f((m, k), np.float16), f((k, n), np.float16), f(n, np.float16)
            ref.run(ref.module_, ref.entry(ref.module_), ((m // 64) * (n // 128),), a, b,
                    bias, np.zeros((m, n), np.float16))
        return launch

    def bmm(batch, m, n, k):   # A @ B^T, f32 out
        def launch(ref):
            a, b = f((batch, m, k), np.float16), f((batch, n, k), np.float16)
            ref.run(ref.module_, ref.entry(ref.module_), (m // 64, n // 128, batch), a, b,
                    np.zeros((batch, m, n), np.float32))
        return launch

    def attention(index, rows):   # 32 batches x 2 heads x 2048 x 64
        def launch(ref):
            dtype = np.float16 if index == 0 else ml_dtypes.bfloat16
            q, k, v = (f((32, 2, 2048, 64), dtype) for _ in range(3))
            ref.run(ref.module_, ref.entry(ref.module_, index), (2048 // rows, 64), q, k, v,
                    np.zeros_like(q), np.float32(0.125))
        return launch

    labels = list(SM90_MEASURED)
    return {labels[0]: ("la_gemm_aligned_tile", gemm(2048, 2048, 2048)),
            labels[1]: ("la_gemm_aligned_tile", gemm(4096, 4096, 4096)),
            labels[2]: ("la_bmm_aligned_tile", bmm(8, 1024, 1024, 1024)),
            labels[3]: ("la_bmm_aligned_tile", bmm(16, 2048, 2048, 512)),
            labels[4]: ("nn_flash_attention_tile", attention(0, 64)),
            labels[5]: ("nn_flash_attention_tile", attention(1, 128))}


def run_sm90(hw, cache_dir, names=()):
    """(rows, left): ours (sm_90 PTX) against tileiras's sm_90 PTX; rows are (label, ours,
    theirs, measured or None)."""
    rows, left = [], []
    chosen = [name for name in SM90_FIXTURES if not names or name in names]
    for reference, name in cases(set(chosen)):
        t0 = time.perf_counter()
        recorder, error = run_case(reference, name, hw, None, cache_dir, check=True,
                                   their_archs=("sm_90",))
        _sm90_rows(recorder, error, name, None, rows, left)
        print(f"  {name} (sm_90): {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    fixtures = {name: reference for reference, name in cases(set(chosen))}
    for label, (name, launch) in _sm90_large().items():
        if name not in fixtures:
            continue
        t0 = time.perf_counter()
        recorder, error = run_large(fixtures[name], name, launch, hw, cache_dir,
                                    their_archs=("sm_90",))
        _sm90_rows(recorder, error, label, SM90_MEASURED[label], rows, left)
        print(f"  {label} (sm_90): {time.perf_counter() - t0:.1f} s", file=sys.stderr,
              flush=True)
    return rows, left


def _sm90_rows(recorder, error, label, measured, rows, left):
    if error:
        left.append((label, error))
        return
    names = kernel_labels(label.split()[0], list(recorder.rows))
    for entry, (ours, theirs) in recorder.rows.items():
        row = names[entry] + label[len(label.split()[0]):]
        if entry in recorder.left_out or not theirs.launches:
            left.append((row, recorder.left_out.get(entry, "tileiras side not run")))
        else:
            rows.append((row, ours, theirs, measured))


def render_sm90(rows, left, hw, wall, cpu):
    out = [f"sm_90: ours (TMA + wgmma) / tileiras (TMA + wgmma), ESTIMATED times on {hw.name}; "
           "measured: the same launches timed on an H100 (bench_gpu_scale --gpu-only, "
           "2026-11-27; results/gpu_only.md).", ""]
    out.append("| kernel | ours µs est. | tileiras µs est. | ratio est. | ours µs measured | "
               "tileiras µs measured | ratio measured | est. ÷ measured ours / tileiras | "
               "bound ours / tileiras | global sectors ours / tileiras (TMA's) | "
               "smem wavefronts ours / tileiras | SASS instr ours / tileiras | "
               "regs ours / tileiras | CTAs/SM ours / tileiras |")
    out.append("|" + "---|" * 14)
    for label, o, t, measured in rows:
        if measured:
            mo, mt = measured
            meas = (f"{mo:.1f} | {mt:.1f} | {mo / mt:.2f} | "
                    f"{o.time / mo:.2f} / {t.time / mt:.2f}")
        else:
            meas = "- | - | - | -"
        out.append(f"| {label} | {o.time:.1f} | {t.time:.1f} | {fmt_ratio(o.time, t.time)} | "
                   f"{meas} | {o.bound} / {t.bound} | {o.sectors:,.0f} / {t.sectors:,.0f} "
                   f"({t.tma_sectors:,.0f}) | {o.wavefronts:,.0f} / {t.wavefronts:,.0f} | "
                   f"{o.instructions:,.0f} / {t.instructions:,.0f} | {o.registers} / "
                   f"{t.registers} | {o.occupancy} / {t.occupancy} |")
    out.append("")
    if left:
        out.append(f"Left out ({len(left)}):")
        out.append("")
        out.extend(f"- {name}: {why}" for name, why in left)
        out.append("")
    out.append(f"Run time: {wall:.0f} s wall, {cpu:.0f} s CPU ({platform.python_version()}, "
               f"{environment_note()}).")
    return out


SM90_LEGEND = ("Both sides are sm_90 PTX on the emulator: ours from our JIT (wgmma K loops "
               "whose stages TMA fills, for these production tiles), tileiras's from tileiras --gpu-name=sm_90 (.target sm_90a: "
               "a producer warp's TMA loads completing on mbarriers, consumer warpgroups on "
               "wgmma, TMA stores), each assembled by ptxas for sm_90 (sm_90a where the PTX "
               "targets it). Fixture-size rows are "
               "the test cases' own launches (checked against numpy); the others are profiled on "
               f"{LARGE_SAMPLE} sampled CTAs (counts scaled to the grid, not checked). Times "
               "are at the launch's own grid and include the model's per-launch cost. "
               "Sectors: global 32-byte sectors (the L2 term), of which TMA's in brackets (they "
               "skip L1); wavefronts include wgmma's shared operands and TMA's shared writes "
               "(128 bytes each). MODEL.md, \"sm_90 comparison\", says what the model counts "
               "of TMA and wgmma and what it does not.")


def record_sm90(lines):
    path = ROOT / "benchmarks" / "results" / "model-sm90.md"
    command = "PYTHONPATH=.:runtime .venv/bin/python benchmarks/bench_model.py --sm90 --record"
    head = ["# Performance model, sm_90: our TMA + wgmma code vs tileiras's TMA + wgmma code "
            "(estimates beside H100 timings)", "",
            f"Recorded {datetime.date.today().isoformat()} with `{command}` on "
            f"{platform.machine()} ({platform.system()}).", "", SM90_LEGEND, ""]
    path.write_text("\n".join(head + lines) + "\n")


def cases(names):
    for family in CASE_MODULES:
        reference = importlib.import_module(family)
        for name in sorted(reference.CASES):
            if not names or name in names:
                yield reference, name


def fmt_ratio(a, b):
    return f"{a / b:.2f}" if b > 0 else "-"


def kernel_labels(case, entries):
    """Row names: the case, then the kernel's own name where it differs, then #i (the entry's
    order of launch in the case) where one name is left for several entries."""
    shorts = [entry.split("_Kt")[0] if "_Kt" in entry else entry for entry in entries]
    labels = {}
    for index, (entry, short) in enumerate(zip(entries, shorts)):
        label = case if short in case else f"{case}:{short}"
        if shorts.count(short) > 1:
            label += f"#{index}"
        labels[entry] = label
    return labels


def jit_options(texts):
    """{option: value} from --jit-option's OPT=VALUE texts (true / false, integers, else text)."""
    found = {}
    for text in texts:
        option, eq, value = (part.strip() for part in text.partition("="))
        if not eq or not option:
            raise ValueError(f"--jit-option {text!r}: expected OPT=VALUE")
        found[option] = value.lower() == "true" if value.lower() in ("true", "false") \
            else int(value) if value.lstrip("-").isdigit() else value
    return found


def main(argv=None) -> int:
    global OUR_ARCH
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--sample", type=int, default=None,
                        help="profile only N CTAs of each launch (counts extrapolated)")
    parser.add_argument("--csv")
    parser.add_argument("--no-large", action="store_true",
                        help="skip the GPU-filling launches (LARGE)")
    parser.add_argument("--arch", default=OUR_ARCH,
                        help="the target our JIT compiles for (e.g. sm_80: its mma.sync, "
                             "ldmatrix and cp.async code); the model stays the H100's")
    parser.add_argument("--sm90", action="store_true",
                        help="only the sm_90 table: ours (TMA + wgmma) against tileiras's sm_90 PTX "
                             "(TMA) on the tensor-core fixtures; --record writes "
                             "results/model-sm90.md")
    parser.add_argument("--mma-kind", action="store_true",
                        help="only the mma kernels, under the JIT's own wgmma / mma.sync choice "
                             "and each forced; --record writes results/model-mma-kind.md")
    parser.add_argument("--jit-option", action="append", default=[], metavar="OPT=VALUE",
                        help="a compile option of our JIT (true/false, integers, else text; "
                             "repeatable), e.g. tma=false")
    args = parser.parse_args(argv)
    OUR_ARCH = args.arch
    try:
        OUR_OPTIONS.update(jit_options(args.jit_option))
    except ValueError as error:
        parser.error(str(error))
    names = set(args.names) or (set(QUICK) if args.quick else set())
    hw = Hardware.h100_sxm()
    cache_dir = model_cache_dir()
    started = time.perf_counter()
    cpu_started = _cpu()
    if args.mma_kind:
        rows = run_mma_kind(hw, cache_dir, names or mma_cases())
        lines = render_mma_kind(rows, time.perf_counter() - started, _cpu() - cpu_started)
        print("\n".join(lines))
        if args.record:
            record_mma_kind(lines)
        return 0
    if args.sm90:
        rows, left = run_sm90(hw, cache_dir, set(args.names))
        lines = render_sm90(rows, left, hw, time.perf_counter() - started, _cpu() - cpu_started)
        if OUR_OPTIONS:
            lines[:0] = [f"Our JIT's compile options: {OUR_OPTIONS}", ""]
        print("\n".join(lines))
        if args.record:
            record_sm90(lines)
        return 0
    table, left = model_rows(names, hw, args.sample, cache_dir, args.no_large)
    wall = time.perf_counter() - started
    cpu = _cpu() - cpu_started
    table.sort(key=lambda row: -(row[1].scale_time / row[2].scale_time
                                 if row[2].scale_time else 0))
    lines = render(table, left, hw, wall, cpu, args)
    print("\n".join(lines))
    if args.csv:
        write_csv(args.csv, table)
    if args.record:
        record(lines, args)
    return 0


def _side(s):
    sectors = f"{s.sectors / s.ideal_sectors:.2f}" if s.ideal_sectors else "-"
    waves = f"{s.wavefronts / s.ideal_wavefronts:.2f}" if s.ideal_wavefronts else "-"
    return (f"{s.instructions:,.0f}", sectors, waves, f"{s.barriers:,.0f}", str(s.registers),
            str(s.spills), str(s.shared), str(s.occupancy))


def render(table, left, hw, wall, cpu, args):
    from statistics import median
    ratios = [o.scale_time / t.scale_time for _, o, t in table if t.scale_time]
    grid_ratios = [o.time / t.time for _, o, t in table if t.time]
    out = [f"Performance model: ours / tileiras, ESTIMATED times on {hw.name} "
           f"({hw.sms} SMs, {hw.clock_ghz} GHz); no GPU was used. Worst first by the at-scale "
           "ratio (>1: ours slower).", ""]
    out.append("| kernel | ratio @grid | ratio @scale | ours µs @grid | tileiras µs @grid | "
               "ours µs @scale | tileiras µs @scale | bound ours (grid/scale) | "
               "bound tileiras (grid/scale) | SASS instr ours / tileiras | sectors÷ideal "
               "ours / tileiras | smem wavefronts÷ideal ours / tileiras | bar.sync ours / "
               "tileiras | regs ours / tileiras | spill B ours / tileiras | smem B ours / "
               "tileiras | CTAs/SM ours / tileiras |")
    out.append("|" + "---|" * 17)
    for label, o, t in table:
        so, st = _side(o), _side(t)
        out.append(f"| {label} | {fmt_ratio(o.time, t.time)} | "
                   f"{fmt_ratio(o.scale_time, t.scale_time)} | {o.time:.2f} | {t.time:.2f} | "
                   f"{o.scale_time:.1f} | {t.scale_time:.1f} | {o.bound}/{o.scale_bound} | "
                   f"{t.bound}/{t.scale_bound} | " +
                   " | ".join(f"{a} / {b}" for a, b in zip(so, st)) + " |")
    out.append("")
    if ratios:
        out.append(f"{len(table)} kernels; at-scale ratio median {median(ratios):.2f}, "
                   f"{sum(r > 1.05 for r in ratios)} slower than tileiras by >5%, "
                   f"{sum(r < 0.95 for r in ratios)} faster by >5%; at-grid ratio median "
                   f"{median(grid_ratios):.2f}.")
    out.append("")
    out.append(f"Left out ({len(left)}):")
    out.append("")
    for name, why in left:
        out.append(f"- {name}: {why}")
    out.append("")
    out.append(f"Run time: {wall:.0f} s wall, {cpu:.0f} s CPU ({platform.python_version()}, "
               f"{environment_note()}).")
    return out


def model_rows(names, hw, sample, cache_dir, no_large):
    """(table, left out) of the named cases (all when empty) and their GPU-filling launches:
    table rows (label, ours, theirs)."""
    table, left = [], []
    for reference, name in cases(names):
        t0 = time.perf_counter()
        recorder, error = run_case(reference, name, hw, sample, cache_dir,
                                   check=sample is None)
        if error and not recorder.rows:
            left.append((name, error))
        elif error:
            left.append((name, f"(rows kept) {error}"))
        labels = kernel_labels(name, list(recorder.rows))
        for entry, (ours, theirs) in recorder.rows.items():
            label = labels[entry]
            if entry in recorder.left_out or not theirs.launches:
                left.append((label, recorder.left_out.get(entry, "tileiras side not run")))
                continue
            table.append((label, ours, theirs))
        print(f"  {name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    if not no_large:
        large = _large_cases()
        chosen = set(large) & names if names else set(large)
        # cases() takes an empty set for every case: none of the named ones is GPU-filling
        for reference, name in cases(chosen) if chosen else ():
            for what, launch in large[name]:
                t0 = time.perf_counter()
                recorder, error = run_large(reference, name, launch, hw, cache_dir)
                if error:
                    left.append((f"{name} ({what})", error))
                labels = kernel_labels(name, list(recorder.rows))
                for entry, (ours, theirs) in recorder.rows.items():
                    label = f"{labels[entry]} ({what})"
                    if entry in recorder.left_out or not theirs.launches:
                        left.append((label, recorder.left_out.get(entry, "tileiras side not run")))
                        continue
                    if not error:
                        table.append((label, ours, theirs))
                print(f"  {name} ({what}): {time.perf_counter() - t0:.1f} s", file=sys.stderr,
                      flush=True)
    return table, left


# ------------------------------------------------------------- sm_90: which tensor-core instruction
MMA_KINDS = (("wgmma", {"wgmma": True}), ("mma.sync", {"wgmma": False}))


def mma_cases():
    """The fixture cases whose newest bytecode has an mmaf / mmai."""
    from tilebc_runtime.lowering.anchors import is_mma
    found = set()
    for reference, name in cases(set()):
        module = reference.module(name, reference.versions(name)[-1])
        if any(is_mma(op) for function in module.functions for op in function.walk()):
            found.add(name)
    return found


def run_mma_kind(hw, cache_dir, names):
    """Rows (label, JIT's choice, {kind: forced}) of our sm_90 code under compile's own choice of
    wgmma or mma.sync and under each forced, estimated by the model at scale."""
    configs = {}
    for label, options in (("default", {}),) + MMA_KINDS:
        OUR_OPTIONS.clear()
        OUR_OPTIONS.update(options)
        table, _ = model_rows(names, hw, None, cache_dir, False)
        configs[label] = {row[0]: row[1] for row in table}
    OUR_OPTIONS.clear()
    return [(label, ours, {kind: configs[kind].get(label) for kind, _ in MMA_KINDS})
            for label, ours in configs["default"].items()]


def _same_code(a, b) -> bool:
    return a is not None and b is not None and a.instructions == b.instructions \
        and a.scale_time == b.scale_time


def render_mma_kind(rows, wall, cpu):
    out = ["| kernel | JIT's choice µs | wgmma µs | mma.sync µs | JIT's kind | model's pick |",
           "|---|---:|---:|---:|---|---|"]
    agree = choices = not_run = 0
    for label, ours, forced in sorted(rows):
        wgmma, sync = forced["wgmma"], forced["mma.sync"]
        if wgmma is None or sync is None:
            out.append(f"| {label} | {ours.scale_time:,.1f} | "
                       f"{'-' if wgmma is None else f'{wgmma.scale_time:,.1f}'} | "
                       f"{'-' if sync is None else f'{sync.scale_time:,.1f}'} | - | not run |")
            not_run += 1
            continue  # a forced kind failed (its error is in that run's log)
        if _same_code(wgmma, sync):
            continue  # wgmma does not fit: no choice to make
        kind = "wgmma" if _same_code(ours, wgmma) else "mma.sync" if _same_code(ours, sync) \
            else "other"
        pick = "wgmma" if wgmma.scale_time < sync.scale_time else "mma.sync"
        choices += 1
        agree += kind == pick
        out.append(f"| {label} | {ours.scale_time:,.1f} | {wgmma.scale_time:,.1f} | "
                   f"{sync.scale_time:,.1f} | {kind} | {pick}{'' if kind == pick else ' (differs)'} |")
    failed = f"; {not_run} where a forced kind did not run" if not_run else ""
    head = [f"The JIT's kind is the model's pick on {agree} of the {choices} launches where both "
            f"apply ({len(rows) - choices - not_run} other launches of mma kernels: wgmma does not "
            f"fit, the code is the same{failed}).", ""]
    return head + out + ["", f"Run time: {wall:.0f} s wall, {cpu:.0f} s CPU."]


def record_mma_kind(lines):
    path = ROOT / "benchmarks" / "results" / "model-mma-kind.md"
    command = "PYTHONPATH=.:runtime .venv/bin/python benchmarks/bench_model.py --mma-kind --record"
    head = ["# Performance model: wgmma or mma.sync on sm_90, the JIT's choice against the model's", "",
            f"Recorded {datetime.date.today().isoformat()} with `{command}` on {platform.machine()} "
            f"({platform.system()}). compile's default (wgmma=None) lowers an sm_90 kernel with a "
            "product that wgmma fits both ways and keeps the one the model estimates faster from "
            "counts read off the PTX text (no launch: perf/ptx_counts.py). Here each kernel of the "
            "fixtures with an mmaf / mmai is compiled three ways (the default, wgmma=True, "
            "wgmma=False), and the model (MODEL.md) estimates each at scale from the emulator's "
            "counts of real launches (µs over 132 × 64 CTAs, or the GPU-filling launch's grid); "
            "the model's pick is the faster of those estimates. Estimates, not timings.", ""]
    path.write_text("\n".join(head + lines) + "\n")


def write_csv(path, table):
    import csv
    with open(path, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["kernel", "ours_us_grid", "tileiras_us_grid", "ours_us_scale",
                         "tileiras_us_scale", "ours_bound", "tileiras_bound", "ours_instr",
                         "tileiras_instr", "ours_sectors", "tileiras_sectors"])
        for label, o, t in table:
            writer.writerow([label, o.time, t.time, o.scale_time, t.scale_time, o.scale_bound,
                             t.scale_bound, o.instructions, t.instructions, o.sectors,
                             t.sectors])


LEGEND = ("Columns: ratio = ours / tileiras estimated time (>1: ours slower) at the case's grid "
          "and at scale (the same per-CTA work over 132 × 64 CTAs); bound = the largest term of "
          "the model (issue, a pipe: fp32/fp16/fp64/int/sfu/conversion/shuffle/lsu, tensor (with "
          "the L1/shared traffic feeding it), l1_shared, l2, dram, cta_launch, latency) at the "
          "grid / at scale; times include the "
          "model's per-launch cost; SASS instr = dynamic SASS "
          "warp-instructions; sectors÷ideal = global 32-byte sectors touched / the ideal for the "
          "bytes requested; smem wavefronts÷ideal = shared-memory wavefronts / ideal; bar.sync = "
          "executions per launch; regs, spill bytes and static shared bytes from ptxas -v for "
          "sm_90; CTAs/SM from occupancy. \"(large)\": a GPU-filling launch profiled on 6 "
          "sampled CTAs; #i: the i-th entry launched by the case. tileiras's code is its sm_80 "
          "PTX (sm_89 for fp8), ours is sm_90 PTX; both assembled for sm_90. For GEMMs tileiras's "
          "sm_90 code (TMA, wgmma) is much faster than its sm_80 code: a GEMM's ratio here is "
          "not the GPU's (MODEL.md, Calibration: GEMMs).")


def record(lines, args):
    path = ROOT / "benchmarks" / "results" / "model.md"
    command = "PYTHONPATH=.:runtime .venv/bin/python benchmarks/bench_model.py --record" + \
        (" --quick" if args.quick else "") + (f" --sample {args.sample}" if args.sample else "") + \
        (f" --arch {args.arch}" if args.arch != "sm_90" else "")
    head = ["# Performance model: our JIT vs tileiras (estimates)", "",
            f"Recorded {datetime.date.today().isoformat()} with `{command}` on "
            f"{platform.machine()} ({platform.system()}). Every time below is an ESTIMATE of the "
            "model in `benchmarks/MODEL.md` from emulator counts, with knobs fitted to ten "
            "GPU-filling launches timed on an H100 (within 0.75-1.34x of them for both compilers; "
            "MODEL.md, Calibration; results/gpu_scale.md), tensor and L2 terms checked against "
            "GEMMs timed there (results/gpu_only.md).", "",
            LEGEND.replace("ours is sm_90 PTX", f"ours is {OUR_ARCH} PTX"), ""]
    path.write_text("\n".join(head + lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
