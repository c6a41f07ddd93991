"""GPU timings: our JIT's kernels vs tileiras's per fixture, and copy bandwidth.

    .venv/bin/python benchmarks/bench_gpu.py [--versions latest] [--repeat 20] [--only a,b]

The measuring runs inside `scripts/gpu_checks.py` (its worker processes launch every fixture on
both backends and compare the results first; only kernels that matched are timed), so this script
is that run with the instruction suite left out. It writes benchmarks/results/gpu.md.

Method: each fixture's last launch of its case is repeated with the arguments packed once;
`warmup` launches, then `repeat` samples of `batch` back-to-back launches between two CUDA events
(cuda.core) on the default stream; the figure is the median sample / batch. For kernels shorter
than the host's launch rate the figure is the launch interval, the same floor for both backends.
Bandwidth: 256 MiB copies (device to device, pinned host to device, device to pinned host),
median of `repeat` event-timed copies after a warm-up.
"""
from __future__ import annotations

import ctypes
import statistics
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

COPY_BYTES = 256 << 20


def _timed_event(stream):
    from cuda.core import EventOptions
    return stream.record(options=EventOptions(timing_enabled=True))


def time_launch(kernel, grid, flat_args: Sequence[Any], *, repeat: int = 20, warmup: int = 3,
                batch: int = 10) -> float:
    """Median microseconds per launch of `kernel` (a tilebc_runtime Kernel) over `grid`.

    The arguments are checked and packed once (`Kernel.bind`), so the timing is the launches'."""
    bound = kernel.bind(grid, *flat_args, allow_overlap=True)
    with bound:
        stream = bound.stream
        for _ in range(warmup):
            bound.launch()
        stream.sync()
        samples = []
        for _ in range(repeat):
            start = _timed_event(stream)
            for _ in range(batch):
                bound.launch()
            end = _timed_event(stream)
            end.sync()
            samples.append((end - start) * 1000.0 / batch)  # ms -> us
    return statistics.median(samples)


def copy_bandwidth(device, nbytes: int = COPY_BYTES, repeat: int = 10) -> List[Dict[str, Any]]:
    """GB/s of device->device, host->device and device->host copies (pinned host memory)."""
    from cuda.bindings import driver as cu
    from tilebc_runtime.driver import check
    stream = device.default_stream
    raw_stream = cu.CUstream(int(stream.handle))
    source = device.allocate(nbytes, stream=stream)
    target = device.allocate(nbytes, stream=stream)
    host = check("cuMemAllocHost", cu.cuMemAllocHost(nbytes))
    try:
        ctypes.memset(int(host), 7, nbytes)  # touch every page before timing
        copies = {
            "device to device": lambda: cu.cuMemcpyDtoDAsync(int(target.handle), int(source.handle),
                                                             nbytes, raw_stream),
            "host to device (pinned)": lambda: cu.cuMemcpyHtoDAsync(int(target.handle), host,
                                                                    nbytes, raw_stream),
            "device to host (pinned)": lambda: cu.cuMemcpyDtoHAsync(host, int(source.handle),
                                                                    nbytes, raw_stream),
        }
        rows = []
        for name, copy in copies.items():
            check(name, copy())  # warm-up
            stream.sync()
            samples = []
            for _ in range(repeat):
                start = _timed_event(stream)
                check(name, copy())
                end = _timed_event(stream)
                end.sync()
                samples.append(end - start)
            millis = statistics.median(samples)
            # device to device reads and writes every byte: count both, as bandwidth tests do
            moved = 2 * nbytes if name == "device to device" else nbytes
            rows.append({"copy": name, "bytes": nbytes, "ms": millis,
                         "gb_per_s": moved / (millis / 1000.0) / 1e9})
        return rows
    finally:
        stream.sync()
        check("cuMemFreeHost", cu.cuMemFreeHost(host))
        source.close(stream)
        target.close(stream)


def render_markdown(fixtures, backends: Sequence[str], bandwidth: Optional[dict], *, device: str,
                    command: str, elapsed: float) -> str:
    """benchmarks/results/gpu.md: the per-fixture timing table and the bandwidth table."""
    lines = ["# GPU timings: tilebc JIT vs tileiras",
             "",
             "Produced by `scripts/gpu_checks.py` (or `benchmarks/bench_gpu.py`); do not edit by hand.",
             f"Device: {device}. Command: `{command}` ({elapsed:.0f} s).",
             "Median µs per launch (back-to-back launches between CUDA events; see bench_gpu.py). "
             "Only kernels whose results matched the interpreter are timed.",
             ""]
    header = ["fixture", "version"] + [f"{b} µs" for b in backends]
    if "jit" in backends and "tileiras" in backends:
        header.append("jit / tileiras")
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join(["---"] * 2 + ["---:"] * (len(header) - 2)) + "|")
    ratios = []
    for result in fixtures:
        times = [result.backends[b].micros if b in result.backends else None for b in backends]
        cells = [result.name, result.version] + ["" if t is None else f"{t:.1f}" for t in times]
        if len(header) > len(cells):
            jit, tileiras = (result.backends.get(b) for b in ("jit", "tileiras"))
            if jit and tileiras and jit.micros and tileiras.micros:
                ratios.append(jit.micros / tileiras.micros)
                cells.append(f"{ratios[-1]:.2f}x")
            else:
                cells.append("")
        lines.append("| " + " | ".join(cells) + " |")
    if ratios:
        geomean = float(np.exp(np.mean(np.log(ratios))))
        lines += ["", f"Geometric mean jit / tileiras over {len(ratios)} kernels: {geomean:.2f}x "
                  "(below 1: ours is faster)."]
    lines += ["", "## Copy bandwidth", ""]
    if bandwidth and bandwidth.get("rows"):
        lines += ["| copy | MiB | median ms | GB/s |", "|---|---:|---:|---:|"]
        for row in bandwidth["rows"]:
            lines.append(f"| {row['copy']} | {row['bytes'] >> 20} | {row['ms']:.3f} | "
                         f"{row['gb_per_s']:.1f} |")
        lines += ["", "Device to device counts the bytes read and the bytes written."]
    else:
        lines.append(f"Not measured{': ' + bandwidth['error'] if bandwidth and bandwidth.get('error') else ''}.")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    sys.path.insert(0, str(ROOT / "scripts"))
    import gpu_checks
    return gpu_checks.main(["--no-isa", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
