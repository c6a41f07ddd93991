"""Cold compile time per fixture: tilebc_runtime (bytecode -> PTX -> cubin via nvJitLink) beside
NVIDIA's tileiras (bytecode -> cubin), both for the same architecture.

Usage: python benchmarks/bench_compile.py [--arch sm_90] [--version 13.5] [--limit N]
                                         [--repeat R] [--markdown FILE] [NAME ...]
Runs alternate per file (ours, tileiras, ours, tileiras, ...) so machine load hits both alike; with
--repeat the median of R runs is reported. Our import cost is reported once, separately; tileiras
is a fresh process per run, as it is always used. --markdown writes the table to FILE.

       python benchmarks/bench_compile.py --startup [--repeat R] [--baseline DIR] [--record]

--startup times `tilebc compile FILE --entry E --emit cubin -o OUT` as a new process, as the C++
loader runs it: cold (an empty TILEBC_CACHE_DIR), cold with sources new (also without the lowering
hash's record beside the sources: the first compile after an install or an edit), miss (a cache in
use that lacks this kernel) and warm (a cubin-cache hit), beside `tileiras --gpu-name=ARCH` on the
same file and `python -c pass`, round after round so load hits all alike; `--baseline DIR` times
another checkout in the same rounds. Wall and CPU (user + sys) medians; .pyc files and the hash's
record are written by an untimed first run, as an installed package that has compiled once has them.
--record writes benchmarks/results/compile-startup.md.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "runtime")]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--version", default="13.5")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--markdown")
    parser.add_argument("--startup", action="store_true",
                        help="time `tilebc compile` in a new process, cold and warm, vs tileiras")
    parser.add_argument("--baseline", metavar="DIR",
                        help="with --startup: another checkout timed in the same rounds")
    parser.add_argument("--baseline-label", metavar="TEXT",
                        help="how the results name the baseline (default: its path)")
    parser.add_argument("--record", action="store_true",
                        help=f"with --startup: write {STARTUP_RESULTS.relative_to(ROOT)}")
    parser.add_argument("names", nargs="*")
    args = parser.parse_args(argv)
    if args.startup:
        return startup(args)

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


STARTUP_RESULTS = ROOT / "benchmarks" / "results" / "compile-startup.md"
# Small kernels. A one-entry module's cubin goes through the cubin cache (cold, then warm); a
# module of several entries is compiled whole into one cubin, as tileiras does, without the cache.
STARTUP_KERNELS = ("atomics_raw", "early_return", "nn_softmax_rows")


def _child_env(tree: Path, cache: Optional[Path] = None) -> Dict[str, str]:
    # the cache as its defaults make it (a bound of the caller's could prune the large cache's
    # fillers, whose metadata no reader accepts)
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("TILEBC_CACHE")}
    env["PYTHONPATH"] = os.pathsep.join([str(tree), str(tree / "runtime")])
    if cache is not None:
        env["TILEBC_CACHE_DIR"] = str(cache)
    return env


LARGE_CACHE_ENTRIES = 10_000


def _fill_cache(root: Path, count: int) -> None:
    """`count` entries' files (a 16 KiB cubin and its metadata each) in `root`'s shards: what a
    compile walks when it sums the cache's size. Marked as made here (_drop_new_entries keeps
    them); no lookup ever asks for their keys."""
    import random
    generator = random.Random(20261128)
    layout = root / "v1"
    cubin = bytes(16 * 1024)
    for _ in range(count):
        key = f"{generator.getrandbits(256):064x}"
        shard = layout / key[:2]
        shard.mkdir(mode=0o700, parents=True, exist_ok=True)  # owner-only, as the cache makes them
        for name, data in ((f"{key}.cubin", cubin), (f"{key}.json", b'{"filler": true}')):
            handle = os.open(shard / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(handle, "wb") as stream:
                stream.write(data)


def _drop_new_entries(root: Path) -> None:
    """Remove the entries compiles stored in a cache _fill_cache made (its fillers stay)."""
    for meta in (root / "v1").glob("??/*.json"):
        if b'"filler"' not in meta.read_bytes():
            meta.unlink()
            meta.with_suffix(".cubin").unlink(missing_ok=True)


def _hash_record(python: str, tree: Path) -> Optional[str]:
    """Where `tree` keeps its lowering hash beside its sources, or None (a tree that keeps none)."""
    code = ("from tilebc_runtime import launch; "
            "print(getattr(launch, 'hash_memo_beside_sources', lambda: '')())")
    done = subprocess.run([python, "-c", code], capture_output=True, text=True,
                          env=_child_env(tree), cwd=tree)
    return done.stdout.strip() or None if done.returncode == 0 else None


def _timed(argv: List[str], env: Optional[Dict[str, str]], cwd=None) -> Tuple[float, float]:
    """(wall ms, CPU ms: user + sys of the process and its threads) of one new process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{' '.join(map(str, argv))} failed: {done.stderr.decode()[-400:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall * 1000, cpu * 1000


def startup(args) -> int:
    from tilebc_runtime.launch import tool_path
    tileiras = tool_path("tileiras")
    if tileiras is None:
        raise SystemExit("tileiras not found (pip install nvidia-cuda-tileiras)")
    trees = {"tilebc": ROOT}
    if args.baseline:
        trees["baseline"] = Path(args.baseline).resolve()
    python, work = sys.executable, Path(tempfile.mkdtemp(prefix="bench_compile_startup_"))
    repeat = args.repeat if args.repeat > 1 else 5  # the default 1 suits the per-file table
    times: Dict[Tuple[str, str], List[Tuple[float, float]]] = {}

    def add(row, tool, sample):
        times.setdefault((row, tool), []).append(sample)

    from bench_text import tilebc_launcher

    def compile_argv(path, output, module=None):
        # `tilebc` as the C++ loader runs it by default (the command on PATH), or a module's CLI
        # as it runs it with TILEBC_PYTHON (`python -m tilebc_runtime.cli`)
        launcher = [python, "-m", module] if module else tilebc_launcher(python)
        return [*launcher, "compile", str(path), "--arch", args.arch, "--emit", "cubin", "-o",
                str(output)]

    # each tree's record of its lowering hash beside its sources (None: it keeps none)
    beside_sources = {label: _hash_record(python, tree) for label, tree in trees.items()}
    import tilebc
    kernels = []  # (name, path, entries)
    for name in STARTUP_KERNELS:
        path = ROOT / "fixtures" / "bytecode" / name / f"{name}-{args.version}.tilebc"
        kernels.append((name, path, len(tilebc.load(path).functions)))
    # per tree, a cache holding LARGE_CACHE_ENTRIES entries besides this toolchain's memo (left
    # by a one-entry compile, whose entry is then dropped: each kernel's row stays a miss)
    large_caches = {label: work / f"large-{label}" for label in trees}
    try:
        one_entry = next(path for _, path, count in kernels if count == 1)
        for label, tree in trees.items():
            _timed(compile_argv(one_entry, work / "large.cubin"),
                   _child_env(tree, large_caches[label]), cwd=tree)
            _drop_new_entries(large_caches[label])
            _fill_cache(large_caches[label], LARGE_CACHE_ENTRIES)
        for _, path, _ in kernels:  # untimed: .pyc files and file caches warm
            for tree in trees.values():
                _timed(compile_argv(path, work / "warmup.cubin"),
                       _child_env(tree, work / "warmup-cache"), cwd=tree)
        for round_number in range(repeat):
            add("python -c pass", "python", _timed([python, "-c", "pass"], None))
            for name, path, entries in kernels:
                for label, tree in trees.items():
                    cache = work / f"cache-{label}-{name}-{round_number}"
                    argv, env = compile_argv(path, work / "out.cubin"), _child_env(tree, cache)
                    add(f"{name} cold", label, _timed(argv, env, cwd=tree))
                    if entries == 1:
                        # the first compile after the sources changed (an install, an edit):
                        # without the lowering hash's record beside them, it hashes them
                        record = beside_sources[label]
                        if record:
                            with contextlib.suppress(FileNotFoundError):
                                os.unlink(record)
                        fresh_cache = work / f"fresh-{label}-{name}-{round_number}"
                        add(f"{name} fresh", label,
                            _timed(argv, _child_env(tree, fresh_cache), cwd=tree))
                        shutil.rmtree(fresh_cache, ignore_errors=True)
                        add(f"{name} warm", label, _timed(argv, env, cwd=tree))
                        # a miss in a cache in use: it holds another kernel and the memo
                        other = next(path for other_name, path, count in kernels
                                     if other_name != name and count == 1)
                        used = work / f"used-{label}-{name}-{round_number}"
                        used_env = _child_env(tree, used)
                        _timed(compile_argv(other, work / "other.cubin"), used_env, cwd=tree)
                        add(f"{name} miss", label, _timed(argv, used_env, cwd=tree))
                        shutil.rmtree(used, ignore_errors=True)
                        # a miss in a cache of many entries (a long-used one)
                        big_env = _child_env(tree, large_caches[label])
                        add(f"{name} miss-large", label, _timed(argv, big_env, cwd=tree))
                        _drop_new_entries(large_caches[label])
                        # the runtime's own share: its CLI without tilebc's command dispatcher
                        runtime_cli = compile_argv(path, work / "out.cubin", "tilebc_runtime.cli")
                        add(f"{name} runtime", label, _timed(runtime_cli, env, cwd=tree))
                    shutil.rmtree(cache, ignore_errors=True)
                add(name, "tileiras", _timed([tileiras, f"--gpu-name={args.arch}", "-o",
                                              str(work / "nv.cubin"), str(path)], None))
            print(f"round {round_number + 1} done", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = render_startup(kernels, trees, times, repeat, args)
    print(report)
    if args.record:
        STARTUP_RESULTS.write_text(report)
        print(f"wrote {STARTUP_RESULTS}", file=sys.stderr)
    return 0


def _commit(tree: Path) -> str:
    """The checkout's commit (short), or "a checkout without git"."""
    done = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else "a checkout without git"


def render_startup(kernels, trees, times, repeat, args) -> str:
    def median(key, index):
        return statistics.median(sample[index] for sample in times[key])

    bare = ("python -c pass", "python")
    python_wall, python_cpu = median(bare, 0), median(bare, 1)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    command = "python benchmarks/bench_compile.py --startup" + (
        f" --repeat {args.repeat}" if args.repeat != 1 else "") + (
        " --baseline DIR --baseline-label TEXT" if args.baseline else "") + " --record"
    lines = [f"# `tilebc compile --emit cubin` in a new process vs tileiras ({args.arch}, "
             f"bytecode {args.version})", "",
             f"`{command}`, {datetime.date.today().isoformat()}, {os.cpu_count()} CPUs, load "
             f"average {load:.1f} at the end (compare within a row: its commands shared each "
             f"round's load). Median of {repeat} rounds; in each round every command runs once, "
             "one after another. Cold: an empty TILEBC_CACHE_DIR "
             "(decode, verify, lower, nvJitLink, store), the lowering hash read from its record "
             "beside the sources, which the untimed first run leaves there as it leaves .pyc "
             "files; cold, sources new: the same without that record (the first compile after "
             "an install or an edit hashes the sources); miss: the same in a cache in use (it "
             "holds another kernel's cubin and the memo of the lowering hash and nvJitLink's "
             "version, so nvJitLink opens in the background while the kernel lowers); miss, "
             f"{LARGE_CACHE_ENTRIES:,} entries cached: the same in a cache that also holds that "
             "many other entries (a long-used one: a store may sum its size); warm: the next "
             "run, a cubin-cache hit; a "
             "module of several entries is compiled whole into one cubin (as tileiras does), "
             "without the cache. The `-m tilebc_runtime.cli` row runs the runtime's compile command "
             "without tilebc's command dispatcher (tilebc/cli.py): the runtime's own share. "
             "CPU = user + sys of the process (tileiras runs threads). "
             + f"tilebc: {_commit(ROOT)}. "
             + (f"Baseline: {args.baseline_label or args.baseline}. " if args.baseline else "") +
             f"`python -c pass`: {python_wall:.0f} ms wall, {python_cpu:.0f} ms CPU.", "",
             "| kernel | run | " + " | ".join(f"{label} wall ms | CPU ms" for label in trees)
             + " | tileiras wall ms | CPU ms | " + " | ".join(f"{label} / tileiras (wall, CPU)"
                                                          for label in trees) + " |",
             "|---|---|" + "---:|---:|" * len(trees) + "---:|---:|" + "---:|" * len(trees)]
    for name, _, entries in kernels:
        nv_wall, nv_cpu = median((name, "tileiras"), 0), median((name, "tileiras"), 1)
        runs = {"cold": "cold", "fresh": "cold, sources new", "miss": "miss",
                "miss-large": f"miss, {LARGE_CACHE_ENTRIES:,} entries cached", "warm": "warm",
                "runtime": "warm, `-m tilebc_runtime.cli`"}
        if entries > 1:
            runs = {"cold": f"{entries} entries, no cache"}
        for run, title in runs.items():
            key = f"{name} {run}"
            cells, ratios = [], []
            for label in trees:
                wall, cpu = median((key, label), 0), median((key, label), 1)
                cells.append(f"{wall:.0f} | {cpu:.0f}")
                ratios.append(f"{wall / nv_wall:.2f}x, {cpu / nv_cpu:.2f}x")
            lines.append(f"| {name} | {title} | " + " | ".join(cells)
                         + f" | {nv_wall:.0f} | {nv_cpu:.0f} | " + " | ".join(ratios) + " |")
    lines += ["", "Target (issue 20): new-process compile <= 1.0x tileiras."]
    return "\n".join(lines) + "\n"


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
