"""GPU timings at GPU-filling sizes: our JIT vs tileiras, beside the performance model's estimates.

    python benchmarks/bench_gpu_scale.py [--rounds 5] [--arrays core|torch] [--results FILE] [NAME ...]
        [--variant LABEL:opt=value[,opt=value] ...]   # our JIT with other compile options too

The launches are bench_model.py's "(large)" cases: fixture kernels over grids and arrays that fill
an H100 many times over. Each kernel is launched once per backend on its own copy of the inputs and
the two results are compared (max abs / rel difference per array, after the launch: outputs and any
input the kernel writes). Then `rounds` rounds time both backends alternately (the order flips each
round; each sample is bench_gpu.time_launch: warm-up, event-timed batches, median); the figure is
the median over rounds. The model's figures for the same launches are read from
benchmarks/results/model.md ("(large)" rows, µs at the grid) and printed beside the measurements,
which is the calibration data MODEL.md asks for. Writes benchmarks/results/gpu_scale.md.
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT, ROOT / "runtime", ROOT / "tests", ROOT / "scripts", ROOT / "benchmarks"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

DEFAULT_RESULTS = ROOT / "benchmarks" / "results" / "gpu_scale.md"
GPU_ONLY_RESULTS = ROOT / "benchmarks" / "results" / "gpu_only.md"
MODEL_RESULTS = ROOT / "benchmarks" / "results" / "model.md"
BACKENDS = ("jit", "tileiras")


# the --wgmma and --tma columns: our JIT with these compile options
BUILT_IN_VARIANTS = {"jit+wgmma": {"wgmma": True}, "jit-wgmma": {"wgmma": False},
                     "jit-tma": {"tma": False}}


def variant_load(label: str, custom=None):
    """(backend, load options) for a column label: the two backends, "jit+wgmma" / "jit-wgmma"
    (sm_90's warpgroup mma wherever it fits / never; the JIT's own choice is in between),
    "jit-tma" (sm_90 wgmma K-loop stages filled by cp.async instead of the default TMA),
    "jit@N" (N threads per CTA instead of the JIT's own choice) and the labels of `custom`
    ({label: JIT compile options}, from --variant)."""
    if custom and label in custom:
        return "jit", dict(custom[label])
    if label in BACKENDS:
        return label, {}
    if label in BUILT_IN_VARIANTS:
        return "jit", dict(BUILT_IN_VARIANTS[label])
    if label.startswith("jit@"):
        return "jit", {"threads": int(label[4:])}
    raise ValueError(f"unknown variant {label!r}")


def parse_variant(text: str):
    """(label, JIT compile options) from --variant's LABEL:opt=value[,opt=value]; the values
    read as bench_model's --jit-option reads them."""
    import bench_model
    label, colon, spec = text.partition(":")
    label = label.strip()
    items = [item for item in spec.split(",") if item.strip()]
    try:
        options = bench_model.jit_options(items)
    except ValueError:
        options = None
    if not colon or not label or not options:
        raise ValueError(f"--variant {text!r}: expected LABEL:option=value[,option=value]")
    if label in BACKENDS or label.startswith("jit@") or label in BUILT_IN_VARIANTS:
        raise ValueError(f"--variant {text!r}: label {label!r} names a built-in column")
    return label, options


def variant_columns(args):
    """(column labels, {custom label: options}) for the parsed command line."""
    custom = {}
    for text in args.variant:
        label, options = parse_variant(text)
        if label in custom:
            raise ValueError(f"--variant label {label!r} given twice")
        custom[label] = options
    variants = BACKENDS + (("jit+wgmma", "jit-wgmma") if args.wgmma else ()) + \
        (("jit-tma",) if args.tma else ()) + \
        tuple(f"jit@{int(t)}" for t in args.threads.split(",") if t.strip()) + tuple(custom)
    return variants, custom


def model_estimates(path: Path = MODEL_RESULTS):
    """{case name: [(kernel label, ours µs, tileiras µs), ...]} from model.md's "(large)" rows."""
    found = {}
    if not path.is_file():
        return found
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 5 or not cells[0].endswith("(large)"):
            continue
        label = cells[0][:-len("(large)")].strip()
        try:
            ours, theirs = float(cells[3].replace(",", "")), float(cells[4].replace(",", ""))
        except ValueError:
            continue
        found.setdefault(re.split(r"[:#]", label)[0], []).append((label, ours, theirs))
    return found


class ScaleRunner:
    """Stands in for a case module's `run`: launches one kernel on every backend, compares the
    backends' results, and times them alternately."""

    def __init__(self, arrays, rounds: int, repeat: int, batch: int, variants=BACKENDS,
                 custom=None):
        self.arrays = arrays
        self.rounds, self.repeat, self.batch = rounds, repeat, batch
        self.variants = tuple(variants)
        self.custom = dict(custom or {})
        self.rows = []

    def __call__(self, module, entry, grid, *args, **_interp_only):
        import tilebc_runtime
        from bench_gpu import time_launch
        from gpu_checks import flatten_launch_args
        from tilebc_runtime import driver
        prepared = {}
        for variant in self.variants:
            backend, options = variant_load(variant, self.custom)
            source = module.source if module.source and Path(module.source).is_file() else module
            kernel = tilebc_runtime.load(source, backend=backend, options=options)[entry]
            copies = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
            flat, pairs = flatten_launch_args(copies, self.arrays.upload, self.arrays.pointer)
            kernel.launch(grid, *flat, allow_overlap=True)
            driver.call("Device.sync", self.arrays.device.sync)
            for device_array, host in pairs:
                self.arrays.download(device_array, host)
            prepared[variant] = (kernel, flat, [host for _, host in pairs])
        agreement = _agreement(prepared["jit"][2], prepared["tileiras"][2])
        extra = {f"{v}_agreement": _agreement(prepared[v][2], prepared["tileiras"][2])
                 for v in self.variants if v not in BACKENDS}
        samples = {b: [] for b in self.variants}
        for round_index in range(self.rounds):
            order = self.variants if round_index % 2 == 0 else self.variants[::-1]
            for backend in order:
                kernel, flat, _ = prepared[backend]
                samples[backend].append(time_launch(kernel, grid, flat, repeat=self.repeat,
                                                    warmup=2, batch=self.batch))
        self.rows.append({"entry": entry, "grid": tuple(grid) if isinstance(grid, (tuple, list)) else (grid,),
                          "agreement": agreement, **extra,
                          **{b: statistics.median(samples[b]) for b in self.variants},
                          **{f"{b}_spread": (min(samples[b]), max(samples[b])) for b in self.variants}})


def _agreement(ours, theirs) -> str:
    """The largest difference between the two backends' arrays after the launch."""
    worst_abs, worst_rel = 0.0, 0.0
    for a, b in zip(ours, theirs):
        a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
        both_nan = np.isnan(a64) & np.isnan(b64)
        diff = np.where(both_nan, 0.0, np.abs(a64 - b64))
        if diff.size:
            worst_abs = max(worst_abs, float(np.nanmax(np.where(np.isnan(diff), np.inf, diff))))
            scale = np.maximum(np.abs(b64), 1e-30)
            worst_rel = max(worst_rel, float(np.nanmax(np.where(np.isnan(diff), np.inf, diff / scale))))
    if worst_abs == 0:
        return "identical"
    return f"max abs {worst_abs:.3g}, max rel {worst_rel:.3g}"


def gpu_only_cases():
    """Launches the model's table does not have, each a question the model leaves open:
    one-tile-per-CTA kernels at the model's "at scale" grid (132 × 64 CTAs), a one-CTA launch
    (the per-launch floor), and the production-tile GEMMs (the fixtures whose products fit sm_90's
    warpgroup mma; --wgmma times that path too) at 512³–4096³ and a ragged shape: on arrays without
    alignment facts, and on contiguous 16-byte-aligned ones, where tileiras uses TMA; the batched
    GEMM and flash attention with production tiles on contiguous tensors."""
    import ml_dtypes
    rng = np.random.default_rng(7)
    scale = 132 * 64

    def f(shape, dtype=np.float32, low=0.5, high=2.0):
        return rng.uniform(low, high, shape).astype(dtype)

    def weighted_sum3(ref):   # one 32-element tile per CTA
        n = scale * 32
        xs = (f(n, np.float16), f(n), f(n, ml_dtypes.bfloat16))
        weights = (np.float32(1.5), np.int32(-2), np.float64(0.25), np.float32(0.125))
        ref.run(ref.module_, ref.entry(ref.module_, 0), (scale,), xs, weights,
                np.zeros(n, np.float32))

    def nan_compare(ref):   # one 16-element tile per CTA
        n = scale * 16
        ref.run(ref.module_, ref.entry(ref.module_, 0), (scale,), f(n, low=-20, high=20),
                np.zeros(n, np.float32), np.zeros(n, np.int32), np.float32(-0.5))

    def elementwise_one_cta(ref):   # 64 elements, one CTA: what a launch costs at least
        a, b = f(64), f(64)
        ref.run(ref.module_, ref.entry(ref.module_), (1,), a, b, np.zeros(64, np.float32))

    def gemm_64x128(*sizes):   # 64×128×64 tiles, f16 in, f32 accumulate, bias + relu, f16 out
        def launch(ref):
            for m, n, k in sizes:
                a, b = f((m, k), np.float16, -1, 1), f((k, n), np.float16, -1, 1)
                bias = f(n, np.float16, -0.5, 0.5)
                grid = (-(-m // 64) * -(-n // 128),)
                ref.run(ref.module_, ref.entry(ref.module_), grid, a, b, bias,
                        np.zeros((m, n), np.float16))
        return launch

    def bmm_64x128(*sizes):   # batched A @ B^T, 64×128×64 tiles, f16 in, f32 out
        def launch(ref):
            for batch, m, n, k in sizes:
                a = f((batch, m, k), np.float16, -1, 1)
                b = f((batch, n, k), np.float16, -1, 1)
                ref.run(ref.module_, ref.entry(ref.module_), (-(-m // 64), -(-n // 128), batch),
                        a, b, np.zeros((batch, m, n), np.float32))
        return launch

    def attention(*shapes):   # (entry, batch, heads, seq, query rows a CTA); head dim 64
        def launch(ref):
            for index, batch, heads, seq, rows in shapes:
                dtype = np.float16 if index == 0 else ml_dtypes.bfloat16
                q, k, v = (f((batch, heads, seq, 64), dtype, -1, 1) for _ in range(3))
                ref.run(ref.module_, ref.entry(ref.module_, index), (seq // rows, batch * heads),
                        q, k, v, np.zeros((batch, heads, seq, 64), dtype), np.float32(0.125))
        return launch

    return {"ft_weighted_sum3": weighted_sum3, "ft_nan_compare": nan_compare,
            "elementwise_f32": elementwise_one_cta,
            "la_gemm_large_tile": gemm_64x128((512, 512, 512), (2048, 2048, 2048), (200, 264, 100)),
            # the same GEMM on contiguous, 16-byte-aligned arrays (TMA for tileiras)
            "la_gemm_aligned_tile": gemm_64x128((512, 512, 512), (2048, 2048, 2048),
                                                (4096, 4096, 4096), (256, 384, 208)),
            "la_bmm_aligned_tile": bmm_64x128((8, 1024, 1024, 1024), (16, 2048, 2048, 512)),
            # heads = the fixture's H (2): batch * 2 (batch, head) pairs on grid y
            "nn_flash_attention_tile": attention((0, 32, 2, 2048, 64), (1, 32, 2, 2048, 128))}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--arrays", default="core", choices=["core", "torch", "cupy"],
                        help="who allocates the device arrays (cuda.core cannot export bfloat16)")
    parser.add_argument("--gpu-only", action="store_true",
                        help="time the launches the model has no row for (gpu_only_cases) instead")
    parser.add_argument("--wgmma", action="store_true",
                        help="also time our JIT with sm_90 wgmma wherever it fits and nowhere "
                             "(compile option wgmma=True / False)")
    parser.add_argument("--tma", action="store_true",
                        help="also time our JIT with cp.async-filled sm_90 wgmma K-loop stages "
                             "instead of the default TMA (compile option tma=False)")
    parser.add_argument("--threads", default="",
                        help="comma-separated threads per CTA to time our JIT with as well")
    parser.add_argument("--variant", action="append", default=[],
                        help="also time our JIT with these compile options, as column LABEL: "
                             "LABEL:opt=value[,opt=value] (true/false, integers, else text; "
                             "repeatable), e.g. cpasync:tma=false")
    parser.add_argument("--results", help="where to write the table (default: results/gpu_scale.md, "
                                           "or results/gpu_only.md with --gpu-only)")
    args = parser.parse_args(argv)
    args.results = args.results or str(GPU_ONLY_RESULTS if args.gpu_only else DEFAULT_RESULTS)
    try:
        variants, custom = variant_columns(args)
    except ValueError as error:
        parser.error(str(error))
    import gpu_checks
    count, reason = gpu_checks.gpu_presence()
    if not count:
        print(f"bench_gpu_scale: no CUDA GPU here ({reason}); nothing to time")
        return 0
    import bench_model
    from fixture_cases import CASE_MODULES
    started = time.monotonic()
    arrays = gpu_checks.DeviceArrays(args.arrays)
    estimates = {} if args.gpu_only else model_estimates()
    # the model's GPU-filling launches (a kernel's other sizes, "(large, …)", are timed in gpu_only)
    cases = gpu_only_cases() if args.gpu_only else {
        name: launches[0][1] for name, launches in bench_model._large_cases().items()}
    table, failures = [], []
    for name, launch in cases.items():
        if args.names and name not in args.names:
            continue
        reference = next(importlib.import_module(m) for m in CASE_MODULES
                         if name in importlib.import_module(m).CASES)
        runner = ScaleRunner(arrays, args.rounds, args.repeat, args.batch, variants, custom)
        original = reference.run
        reference.run, reference.module_ = runner, reference.module(name, reference.versions(name)[-1])
        try:
            launch(reference)
        except Exception as error:  # noqa: BLE001 - one kernel's failure is a row, not the end
            failures.append((name, f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"))
        finally:
            reference.run = original
            del reference.module_
        model = estimates.get(name, [])
        for index, row in enumerate(runner.rows):
            label, model_ours, model_theirs = model[index] if index < len(model) else (name, None, None)
            table.append((label, row, model_ours, model_theirs))
        print(f"{name}: done ({len(runner.rows)} launch(es))", flush=True)
    text = render(table, failures, gpu_checks._device_name(), " ".join(["benchmarks/bench_gpu_scale.py",
                                                             *(argv if argv is not None else sys.argv[1:])]),
                  time.monotonic() - started, variants)
    Path(args.results).write_text(text)
    print(text)
    return 1 if failures else 0


def render(table, failures, device, command, elapsed, variants=BACKENDS) -> str:
    lines = ["# GPU timings at GPU-filling sizes: tilebc JIT vs tileiras, and the model",
             "",
             f"Measured on {device}, {datetime.date.today().isoformat()}. Command: `{command}` "
             f"({elapsed:.0f} s). Median µs per launch over alternating rounds (min–max of the "
             "rounds in brackets); model = benchmarks/results/model.md's estimate for the same "
             "launch (H100 SXM5 knobs). agreement = largest difference between the two backends' "
             "arrays after one launch on the same inputs.",
             "",
             "| kernel | grid | jit µs | tileiras µs | jit / tileiras | model jit µs | model tileiras µs | model ratio | agreement |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    ratios, model_ratios = [], []
    for label, row, model_ours, model_theirs in table:
        jit, theirs = row["jit"], row["tileiras"]
        ratio = jit / theirs if theirs else float("nan")
        ratios.append(ratio)
        model_ratio = model_ours / model_theirs if model_ours and model_theirs else None
        if model_ratio:
            model_ratios.append(model_ratio)
        spread = {b: "{:.1f}–{:.1f}".format(*row[f"{b}_spread"]) for b in BACKENDS}
        lines.append(f"| {label} | {'×'.join(map(str, row['grid']))} | {jit:.1f} ({spread['jit']}) | "
                     f"{theirs:.1f} ({spread['tileiras']}) | {ratio:.2f} | "
                     f"{'' if model_ours is None else f'{model_ours:.1f}'} | "
                     f"{'' if model_theirs is None else f'{model_theirs:.1f}'} | "
                     f"{'' if model_ratio is None else f'{model_ratio:.2f}'} | {row['agreement']} |")
    if ratios:
        geomean = float(np.exp(np.mean(np.log(ratios))))
        lines += ["", f"Geometric mean jit / tileiras, measured: {geomean:.2f} over {len(ratios)} launches"
                  + (f"; the model's: {float(np.exp(np.mean(np.log(model_ratios)))):.2f}" if model_ratios else "")
                  + " (below 1: ours is faster)."]
    extra = [v for v in variants if v not in BACKENDS]
    if extra:
        lines += ["", "Variants of our JIT, same launches, timed in the same alternating rounds:", "",
                  "| kernel | grid | " + " | ".join(f"{v} µs | {v} / tileiras | {v} agreement"
                                                    for v in extra) + " |",
                  "|---|---|" + "---:|---:|---|" * len(extra)]
        for label, row, _, _ in table:
            cells = []
            for v in extra:
                low, high = row[f"{v}_spread"]
                cells.append(f"{row[v]:.1f} ({low:.1f}–{high:.1f}) | {row[v] / row['tileiras']:.2f} | "
                             f"{row[f'{v}_agreement']}")
            lines.append(f"| {label} | {'×'.join(map(str, row['grid']))} | " + " | ".join(cells) + " |")
    if failures:
        lines += ["", "Not measured:", ""] + [f"- {name}: {why}" for name, why in failures]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
