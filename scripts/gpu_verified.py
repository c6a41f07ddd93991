"""Which fixture kernels' GPU code changed since a GPU last checked it.

    .venv/bin/python scripts/gpu_verified.py            # list the kernels whose PTX changed
    .venv/bin/python scripts/gpu_verified.py --only     # the same, as a --only list for gpu_checks
    .venv/bin/python scripts/gpu_verified.py --record "H100, 2026-11-28: gpu_checks, all fixtures"

The emulator checks our PTX on every fixture without a GPU, but it is not the hardware: a K/V
pipeline it ran to the interpreter's values gave wrong results on an H100 (benchmarks/results/
gpu.md). So the PTX a GPU has run and matched is recorded: for every fixture's newest file and
every entry, a digest of our sm_90 code (default options: what `scripts/gpu_checks.py
--backends jit` launches on a Hopper GPU) and of our sm_80 code (`--backends jit@sm_80`), comments
left out. `--record` writes the current digests, with what checked them, to
benchmarks/results/gpu-verified-ptx.json: run it only for code a GPU has just matched. Without it,
the kernels whose code differs from the record (or that it does not hold) are printed, the ones a
short GPU session should check first.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT, ROOT / "runtime", ROOT / "scripts"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

RECORD = ROOT / "benchmarks" / "results" / "gpu-verified-ptx.json"
ARCHS = ("sm_90", "sm_80")


def ptx_digest(ptx: str) -> str:
    """sha256 of the PTX without its comments (source locations and notes, not code)."""
    code = "\n".join(line for line in ptx.splitlines() if not line.lstrip().startswith("//"))
    return hashlib.sha256(code.encode()).hexdigest()[:16]


def _digests_of(path: Path) -> dict[str, str]:
    """{"fixture:entry@arch": digest} for every entry of one fixture file; a kernel the JIT
    refuses gets the refusal's first line, so a change in that shows too."""
    import tilebc
    from tilebc_runtime.compiler import compile as jit_compile
    module = tilebc.load(path)
    fixture = path.parent.name
    found = {}
    for function in module.functions:
        for arch in ARCHS:
            key = f"{fixture}:{function.name}@{arch}"
            try:
                found[key] = ptx_digest(jit_compile(module, function.name, arch, emit="ptx").ptx)
            except tilebc.TilebcError as error:
                found[key] = "refused: " + str(error).splitlines()[0][-120:]
    return found


def current_digests(workers: int = 2) -> dict[str, str]:
    from gpu_prepare import newest_fixture_files
    digests: dict[str, str] = {}
    with ProcessPoolExecutor(workers) as pool:
        for found in pool.map(_digests_of, newest_fixture_files()):
            digests.update(found)
    return dict(sorted(digests.items()))


def changed(recorded: dict[str, str], current: dict[str, str]) -> list[str]:
    """The keys of `current` whose digest the record does not hold."""
    return [key for key, digest in current.items() if recorded.get(key) != digest]


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    return (done.stdout.strip() or "unknown") + (" with changes" if dirty else "")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", metavar="WHAT",
                        help="record the current digests as checked on a GPU by WHAT")
    parser.add_argument("--only", action="store_true",
                        help="print the changed fixtures as one comma-separated list")
    parser.add_argument("--file", type=Path, default=RECORD)
    args = parser.parse_args(argv)
    current = current_digests()
    if args.record:
        args.file.write_text(json.dumps({
            "checked": args.record, "commit": _commit(),
            "date": datetime.date.today().isoformat(), "archs": list(ARCHS),
            "digests": current}, indent=1) + "\n")
        print(f"recorded {len(current)} kernels in {args.file}")
        return 0
    record = json.loads(args.file.read_text()) if args.file.exists() else {"digests": {}}
    keys = changed(record["digests"], current)
    fixtures = sorted({key.split(":", 1)[0] for key in keys})
    if args.only:
        print(",".join(fixtures))
        return 0
    print(f"{len(keys)} of {len(current)} kernels' code differs from what a GPU checked")
    print(f"  record: {record.get('date', '-')}, {record.get('commit', '-')}: "
          f"{record.get('checked', 'nothing recorded')}")
    for key in keys:
        print(f"  {key}")
    if fixtures:
        print(f"check them with: scripts/gpu_checks.py --only {','.join(fixtures)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
