"""Cold compile time per fixture: tilebc_runtime (bytecode -> PTX -> cubin via nvJitLink) beside
NVIDIA's tileiras (bytecode -> cubin), both for the same architecture.

Usage: python benchmarks/bench_compile.py [--arch sm_90] [--version 13.5] [--limit N] [NAME ...]
"Cold" = first compile of that file in this process (our import cost is reported once, separately);
tileiras is a fresh process per file, as it is always used.
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
    for path in files:
        data = path.read_bytes()
        mark = time.perf_counter()
        try:
            result = compile(path, arch=args.arch, emit="cubin")
            ours = (time.perf_counter() - mark) * 1000
            lower = result.timings.get("lower", 0) * 1000
            link = result.timings.get("link", 0) * 1000
        except Exception as exc:  # report and go on: the table shows what does not compile
            ours = lower = link = None
            print(f"{path.parent.name:28} {'—':>9}  ({type(exc).__name__})", end="")
        mark = time.perf_counter()
        nv = oracles.tileiras(data, gpu_name=args.arch)
        theirs = (time.perf_counter() - mark) * 1000
        if ours is None:
            print(f"{'':>16} {theirs:12.0f}")
            continue
        ratio = theirs / ours if ours else float("nan")
        ratios.append(ratio)
        flag = "" if nv.ok else "  (tileiras failed)"
        print(f"{path.parent.name:28} {ours:9.1f} {lower:7.1f} {link:7.1f} {theirs:12.0f} "
              f"{ratio:6.1f}x{flag}")
    if ratios:
        print(f"median speed-up over tileiras: {statistics.median(ratios):.1f}x "
              f"({len(ratios)} kernels)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
