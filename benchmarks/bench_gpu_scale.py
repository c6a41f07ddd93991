"""GPU timings at GPU-filling sizes: our JIT vs tileiras, beside the performance model's estimates.

    python benchmarks/bench_gpu_scale.py [--rounds 5] [--arrays core|torch] [--results FILE] [NAME ...]

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
MODEL_RESULTS = ROOT / "benchmarks" / "results" / "model.md"
BACKENDS = ("jit", "tileiras")


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

    def __init__(self, arrays, rounds: int, repeat: int, batch: int):
        self.arrays = arrays
        self.rounds, self.repeat, self.batch = rounds, repeat, batch
        self.rows = []

    def __call__(self, module, entry, grid, *args, **_interp_only):
        import tilebc_runtime
        from bench_gpu import time_launch
        from gpu_checks import flatten_launch_args
        from tilebc_runtime import driver
        prepared = {}
        for backend in BACKENDS:
            source = module.source if module.source and Path(module.source).is_file() else module
            kernel = tilebc_runtime.load(source, backend=backend)[entry]
            copies = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
            flat, pairs = flatten_launch_args(copies, self.arrays.upload, self.arrays.pointer)
            kernel.launch(grid, *flat, allow_overlap=True)
            driver.call("Device.sync", self.arrays.device.sync)
            for device_array, host in pairs:
                self.arrays.download(device_array, host)
            prepared[backend] = (kernel, flat, [host for _, host in pairs])
        agreement = _agreement(prepared["jit"][2], prepared["tileiras"][2])
        samples = {b: [] for b in BACKENDS}
        for round_index in range(self.rounds):
            order = BACKENDS if round_index % 2 == 0 else BACKENDS[::-1]
            for backend in order:
                kernel, flat, _ = prepared[backend]
                samples[backend].append(time_launch(kernel, grid, flat, repeat=self.repeat,
                                                    warmup=2, batch=self.batch))
        self.rows.append({"entry": entry, "grid": tuple(grid) if isinstance(grid, (tuple, list)) else (grid,),
                          "agreement": agreement,
                          **{b: statistics.median(samples[b]) for b in BACKENDS},
                          **{f"{b}_spread": (min(samples[b]), max(samples[b])) for b in BACKENDS}})


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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--arrays", default="core", choices=["core", "torch", "cupy"],
                        help="who allocates the device arrays (cuda.core cannot export bfloat16)")
    parser.add_argument("--results", default=str(DEFAULT_RESULTS))
    args = parser.parse_args(argv)
    import gpu_checks
    count, reason = gpu_checks.gpu_presence()
    if not count:
        print(f"bench_gpu_scale: no CUDA GPU here ({reason}); nothing to time")
        return 0
    import bench_model
    from fixture_cases import CASE_MODULES
    started = time.monotonic()
    arrays = gpu_checks.DeviceArrays(args.arrays)
    estimates = model_estimates()
    table, failures = [], []
    for name, launch in bench_model._large_cases().items():
        if args.names and name not in args.names:
            continue
        reference = next(importlib.import_module(m) for m in CASE_MODULES
                         if name in importlib.import_module(m).CASES)
        runner = ScaleRunner(arrays, args.rounds, args.repeat, args.batch)
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
                  time.monotonic() - started)
    Path(args.results).write_text(text)
    print(text)
    return 1 if failures else 0


def render(table, failures, device, command, elapsed) -> str:
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
    if failures:
        lines += ["", "Not measured:", ""] + [f"- {name}: {why}" for name, why in failures]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
