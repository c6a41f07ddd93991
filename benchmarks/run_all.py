"""Run every benchmark in one go, each printing its own table beside NVIDIA's tools where they apply.

    .venv/bin/python benchmarks/run_all.py [--quick] [--only codec,text,interp,compile,compile-startup,compile-scaling,cache,sim,model]

`--quick` shortens repeats and limits the compile benchmark to a few fixtures (a smoke run); the
recorded figures in `benchmarks/results/` come from full runs of the individual scripts.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# name -> (script, full arguments, quick arguments, what it compares against)
BENCHMARKS = {
    "codec": ("bench_codec.py", [], ["--repeat", "2", "--repeat-large", "1"],
              "decode/encode throughput vs tileirdisasm"),
    "text": ("bench_text.py", [], ["--repeat", "2", "--repeat-large", "1"],
             "dis/verify/info/asm in a new process vs tileirdisasm, alternating"),
    "interp": ("bench_interp.py", [], ["--repeat", "1"],
               "CPU interpreter vs the same computation in numpy"),
    "compile": ("bench_compile.py", ["--repeat", "3"], ["--limit", "4"],
                "our cold JIT compile vs tileiras, alternating"),
    "compile-startup": ("bench_compile.py", ["--startup"], ["--startup", "--repeat", "2"],
                        "`tilebc compile` in a new process, cold and warm cache, vs tileiras"),
    "compile-scaling": ("bench_compile_scaling.py", ["--link"],
                        ["--sizes", "1K,4K", "--ops", "1,4", "--ops-size", "4K", "--timeout", "30"],
                        "JIT compile time and PTX size vs tile size and op count, beside tileiras"),
    "cache": ("bench_cache.py", [], ["--repeat", "200"], "warm cubin-cache hit"),
    "sim": ("bench_sim.py", [], ["--top", "5"], "PTX emulator time per fixture"),
    "model": ("bench_model.py", [], ["--quick"],
              "estimated H100 time, our JIT vs tileiras (performance model, no GPU)"),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short smoke run")
    parser.add_argument("--only", help="comma-separated subset of: " + ", ".join(BENCHMARKS))
    args = parser.parse_args(argv)
    chosen = args.only.split(",") if args.only else list(BENCHMARKS)
    unknown = [name for name in chosen if name not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "runtime"), env.get("PYTHONPATH", "")])
    failed = []
    for name in chosen:
        script, full, quick, what = BENCHMARKS[name]
        print(f"\n######## {name}: {what}", flush=True)
        started = time.perf_counter()
        result = subprocess.run([sys.executable, str(HERE / script), *(quick if args.quick else full)],
                                cwd=ROOT, env=env)
        print(f"######## {name}: exit {result.returncode}, {time.perf_counter() - started:.1f} s",
              flush=True)
        if result.returncode:
            failed.append(name)
    print("\nall benchmarks ran" if not failed else f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
