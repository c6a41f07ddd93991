"""Cold compile time per fixture: tilebc_runtime (bytecode -> PTX -> cubin via nvJitLink) beside
NVIDIA's tileiras (bytecode -> cubin), both for the same architecture.

Usage: python benchmarks/bench_compile.py [--arch sm_90] [--version 13.5] [--limit N]
                                         [--repeat R] [--markdown FILE] [NAME ...]
Runs alternate per file (ours, tileiras, ours, tileiras, ...) so machine load hits both alike; with
--repeat the median of R runs is reported. Our import cost is reported once, separately; tileiras
is a fresh process per run, as it is always used. --markdown writes the table to FILE.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "runtime")]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--version", default="13.5")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--markdown")
    parser.add_argument("names", nargs="*")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    from tilebc_runtime.compiler import compile
    from tilebc import oracles
    import_seconds = time.perf_counter() - start

    files = sorted((ROOT / "fixtures" / "bytecode").glob(f"*/*-{args.version}.tilebc"))
    if args.names:
        files = [f for f in files if f.parent.name in args.names]
    files = files[: args.limit] if args.limit else files
    print(f"tilebc_runtime import: {import_seconds * 1000:.0f} ms; arch {args.arch}, "
          f"bytecode {args.version}")
    print(f"{'fixture':28} {'ours ms':>9} {'lower':>7} {'link':>7} {'tileiras ms':>12} {'ratio':>7}")
    ratios = []
    rows = []
    for path in files:
        data = path.read_bytes()
        ours_runs, theirs_runs, lower, link, failure = [], [], 0.0, 0.0, None
        for _ in range(max(1, args.repeat)):
            mark = time.perf_counter()
            try:
                result = compile(path, arch=args.arch, emit="cubin")
                ours_runs.append((time.perf_counter() - mark) * 1000)
                lower = result.timings.get("lower", 0) * 1000
                link = result.timings.get("link", 0) * 1000
            except Exception as exc:  # report and go on: the table shows what does not compile
                failure = type(exc).__name__
            mark = time.perf_counter()
            nv = oracles.tileiras(data, gpu_name=args.arch)
            theirs_runs.append((time.perf_counter() - mark) * 1000)
        theirs = statistics.median(theirs_runs)
        if failure or not ours_runs:
            print(f"{path.parent.name:28} {'—':>9}  ({failure}) {theirs:12.0f}")
            rows.append((path.parent.name, None, None, None, theirs, None, failure))
            continue
        ours = statistics.median(ours_runs)
        ratio = theirs / ours if ours else float("nan")
        if nv.ok:  # a refusal is not a compile time: keep it out of the summary
            ratios.append(ratio)
        flag = "" if nv.ok else "  (tileiras failed)"
        print(f"{path.parent.name:28} {ours:9.1f} {lower:7.1f} {link:7.1f} {theirs:12.0f} "
              f"{ratio:6.1f}x{flag}")
        rows.append((path.parent.name, ours, lower, link, theirs, ratio, flag.strip()))
    if ratios:
        print(f"median speed-up over tileiras: {statistics.median(ratios):.1f}x "
              f"({len(ratios)} kernels tileiras compiles)")
    if args.markdown:
        write_markdown(Path(args.markdown), rows, ratios, args, import_seconds)
    return 0


def write_markdown(path: Path, rows, ratios, args, import_seconds) -> None:
    lines = [f"# Compile time: tilebc_runtime vs tileiras ({args.arch}, bytecode {args.version})", "",
             f"`python benchmarks/bench_compile.py --arch {args.arch} --repeat {args.repeat} "
             f"--markdown {path.name}`; runs alternate per file, median of {args.repeat}. "
             f"tilebc_runtime import: {import_seconds * 1000:.0f} ms (once per process). "
             "Ours = load + lower + nvJitLink; tileiras = a fresh `tileiras` process.", "",
             "| fixture | ours ms | lower ms | link ms | tileiras ms | tileiras / ours |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, ours, lower, link, theirs, ratio, note in rows:
        if ours is None:
            lines.append(f"| {name} | — ({note}) | | | {theirs:.0f} | |")
        else:
            lines.append(f"| {name} | {ours:.1f} | {lower:.1f} | {link:.1f} | {theirs:.0f} | "
                         f"{ratio:.1f}x{' ' + note if note else ''} |")
    if ratios:
        lines += ["", f"Median: ours is {statistics.median(ratios):.1f}x faster than tileiras over "
                      f"{len(ratios)} kernels that tileiras compiles (min {min(ratios):.1f}x, max "
                      f"{max(ratios):.1f}x); tileiras refuses the rows marked failed for this "
                      "architecture, which are left out of the median."]
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
