"""Time the PTX emulator on the fixture set, against the CPU interpreter on the same cases.

    PYTHONPATH=.:runtime .venv/bin/python benchmarks/bench_sim.py [--top N] [CASE ...]

Each fixture case of tests/test_interp_fixtures.py (same inputs, same numpy checks) runs once with
the interpreter and once through JIT PTX on the emulator (`tilebc_runtime.sim.run`); PTX lowering
is timed separately (it is cached per module, as in the CI test). Prints per-case seconds, the
slowest cases, totals and the emulator / interpreter ratio. Kernels the JIT does not lower, and
those whose PTX differs from the interpreter, are reported as such and not timed.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "runtime"), str(ROOT / "tests"), str(ROOT / "runtime" / "tests")]

import test_interp_fixtures as reference  # noqa: E402
import tilebc.interp  # noqa: E402
from test_rt_sim_fixtures import DIFFERS, F32_PRECISION, NOT_LOWERED  # noqa: E402
from tilebc_runtime import sim  # noqa: E402


def timed(case, module, runner):
    reference.run = runner
    start = time.perf_counter()
    case(module)
    return time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*")
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args(argv)
    names = args.cases or sorted(reference.CASES)
    original_check = reference.check
    rows, skipped = [], []
    total_lower = 0.0
    for name in names:
        if name in NOT_LOWERED or name in DIFFERS:
            skipped.append(name)
            continue
        version = reference.versions(name)[-1]
        module = reference.module(name, version)
        loose = F32_PRECISION.get(name)
        reference.check = original_check if loose is None else (
            lambda a, e, rtol=0.0, atol=0.0: original_check(a, e, max(rtol, loose), atol))
        start = time.perf_counter()
        for function in module.functions:
            sim.compiled_kernel(module, function.name)
        lower = time.perf_counter() - start
        total_lower += lower
        interp = timed(reference.CASES[name], module, tilebc.interp.run)
        emulated = timed(reference.CASES[name], module, sim.run)
        rows.append((name, lower, interp, emulated))
        print(f"{name:28s} lower {lower:6.2f}s  interp {interp:6.2f}s  emulator {emulated:6.2f}s",
              flush=True)
    reference.check = original_check
    total_interp = sum(r[2] for r in rows)
    total_emu = sum(r[3] for r in rows)
    print(f"\nslowest on the emulator:")
    for name, _, interp, emulated in sorted(rows, key=lambda r: -r[3])[:args.top]:
        print(f"  {name:28s} {emulated:6.2f}s ({emulated / max(interp, 1e-9):5.1f}x interp)")
    print(f"\n{len(rows)} cases: lowering {total_lower:.1f}s, interpreter {total_interp:.1f}s, "
          f"emulator {total_emu:.1f}s ({total_emu / max(total_interp, 1e-9):.1f}x)")
    print(f"not timed ({len(skipped)}): {', '.join(skipped)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
