"""The shared-structure pass: `python -m fuzz.run_shared --count 100000 [--seed S] [--out FILE]`.

Builds inputs that share structure on purpose (fuzz/shared.py: DAGs of types, debug locations and
text aliases; deep attributes; deep and wide regions), runs every command on each
(`fuzz.shared.check`) and, every K-th binary input, the C++ reader too (`tilebc-inspect list`,
in batches, when runtime/cpp/build/pytest-asan holds a build). Writes the figures to
fuzz/results/shared-<stamp>.md. Exits 1 when a hard requirement fails: an exception other than
TilebcError, a broken invariant, more than 1 s of CPU for one input, more than 256 MiB (process
ru_maxrss, and the tracemalloc peak of a sample of checks), or a C++ reader crash.
"""
from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import platform
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Dict, List

from .report import RESULTS, publish
from .shared import GENERATORS, check

CPU_LIMIT = 1.0
MEMORY_LIMIT = 256 * 2**20
ROOT = Path(__file__).resolve().parent.parent
INSPECT = ROOT / "runtime" / "cpp" / "build" / "pytest-asan" / "tilebc-inspect"
CPP_BATCH = 500


def _rule(message: str) -> str:
    """One row per kind of rejection: numbers, quoted text and the quoted source line dropped."""
    first = message.split("\n", 1)[0]
    return re.sub(r"\d+", "N", re.sub(r"'[^']*'|\"[^\"]*\"|[%@#][\w.$-]+", "…", first))[:110]


class CppReader:
    """Runs tilebc-inspect over batches of files; records crashes and the slowest batch."""

    def __init__(self):
        self.directory = tempfile.TemporaryDirectory(prefix="tilebc-shared-")
        self.pending: List[Path] = []
        self.files = self.accepted = self.batches = 0
        self.crashes: List[str] = []
        self.max_batch_seconds = 0.0
        self.max_rss = 0

    def add(self, index: int, data: bytes) -> None:
        path = Path(self.directory.name) / f"{index:07d}.tilebc"
        path.write_bytes(data)
        self.pending.append(path)
        if len(self.pending) >= CPP_BATCH:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        started = time.perf_counter()
        proc = subprocess.run([str(INSPECT), "list", *map(str, self.pending)], capture_output=True,
                              text=True, timeout=600,
                              env={**os.environ, "ASAN_OPTIONS": "detect_leaks=1:exitcode=97",
                                   "UBSAN_OPTIONS": "halt_on_error=1:exitcode=98"})
        self.max_batch_seconds = max(self.max_batch_seconds, time.perf_counter() - started)
        self.max_rss = max(self.max_rss,
                           resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
        self.batches += 1
        records = []
        for line in proc.stdout.splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                pass
        if proc.returncode != 0 or "Sanitizer" in proc.stderr or len(records) != len(self.pending):
            self.crashes.append(f"batch {self.pending[0].name}..{self.pending[-1].name}: exit "
                                f"{proc.returncode}, {len(records)} records of "
                                f"{len(self.pending)}; {proc.stderr[-400:]}")
        self.files += len(records)
        self.accepted += sum(bool(r.get("ok")) for r in records)
        for path in self.pending:
            path.unlink()
        self.pending = []


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=20261126)
    parser.add_argument("--memory-every", type=int, default=200,
                        help="measure the tracemalloc peak of every Nth input's check")
    parser.add_argument("--cpp-every", type=int, default=10,
                        help="give every Nth binary input to the C++ reader (0: never)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    names = sorted(GENERATORS)
    cpp = CppReader() if args.cpp_every and INSPECT.exists() else None
    stamp = datetime.datetime.now().astimezone()
    started = time.perf_counter()
    generated = collections.Counter()
    verdicts = collections.Counter()
    rejections = collections.Counter()
    foreign: List[str] = []
    problems: List[str] = []
    slow: List[str] = []
    slowest: Dict[str, tuple] = {}
    total_cpu = max_cpu = 0.0
    traced_peak = 0
    for index in range(args.count):
        name = rng.choice(names)
        payload = GENERATORS[name](rng)
        generated[name] += 1
        outcome = check(payload)
        if args.memory_every and index % args.memory_every == 0:
            # Again under tracemalloc, which slows Python several times: for memory, not time.
            tracemalloc.start()
            check(payload)
            traced_peak = max(traced_peak, tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
        total_cpu += outcome.cpu_seconds
        max_cpu = max(max_cpu, outcome.cpu_seconds)
        if outcome.cpu_seconds > slowest.get(name, (0.0,))[0]:
            slowest[name] = (outcome.cpu_seconds, index, len(payload))
        if outcome.cpu_seconds > CPU_LIMIT:
            slow.append(f"input {index} ({name}): {outcome.cpu_seconds:.2f} s CPU")
        if outcome.foreign:
            foreign.append(f"input {index} ({name}), stage {outcome.stage}:\n{outcome.foreign}")
        if outcome.problem:
            problems.append(f"input {index} ({name}): {outcome.problem[:300]}")
        verdicts[(name, "rejected" if outcome.rejected else "accepted")] += 1
        if outcome.rejected:
            kind, _, message = outcome.rejected.partition(": ")
            rejections[(kind, _rule(message.split(": ", 1)[-1] if "offset 0x" in message else message))] += 1
        if cpp is not None and isinstance(payload, bytes) and index % args.cpp_every == 0:
            cpp.add(index, payload)
        if (index + 1) % 10_000 == 0:
            print(f"{index + 1} inputs, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if cpp is not None:
        cpp.flush()
    elapsed = time.perf_counter() - started
    max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    cpp_ok = cpp is None or not cpp.crashes
    ok = (not foreign and not problems and not slow and max_rss < MEMORY_LIMIT
          and traced_peak < MEMORY_LIMIT and cpp_ok)
    lines = [
        f"# Shared-structure fuzz run {stamp:%Y-%m-%d %H:%M %Z}",
        "",
        f"- command: `python -m fuzz.run_shared --count {args.count} --seed {args.seed} "
        f"--cpp-every {args.cpp_every}`",
        f"- machine: {os.cpu_count()} CPUs (shared), {platform.python_implementation()} "
        f"{platform.python_version()}",
        "- generators: " + ", ".join(f"{n} {generated[n]} (accepted {verdicts[(n, 'accepted')]})"
                                     for n in names),
        "- each input: load (strict debug), verify, dis, dis -g, convert (dump 13.5 + load), asm of "
        "the -g text; text inputs are first assembled (parse + dump)",
        f"- inputs: {args.count} in {elapsed:.0f} s; ran every command {sum(v for (n, k), v in verdicts.items() if k == 'accepted')}, "
        f"stopped by a TilebcError {sum(v for (n, k), v in verdicts.items() if k == 'rejected')}",
        f"- exceptions other than TilebcError: {len(foreign)} (must be 0)",
        f"- broken invariants (bytes asm wrote that do not load; a valid module whose -g text "
        f"does not assemble): {len(problems)} (must be 0)",
        f"- inputs over 1 s CPU: {len(slow)} (must be 0); max CPU of one whole check "
        f"{max_cpu * 1e3:.1f} ms; mean {total_cpu / max(args.count, 1) * 1e3:.2f} ms; slowest per "
        "generator: " + ", ".join(f"{n} {s[0] * 1e3:.0f} ms (#{s[1]}, {s[2]} bytes/chars)"
                                  for n, s in sorted(slowest.items())),
        f"- memory: process ru_maxrss {max_rss / 2**20:.0f} MiB; tracemalloc peak of one check "
        f"(every {args.memory_every}th input) {traced_peak / 2**20:.1f} MiB (limit 256 MiB)",
    ]
    if cpp is not None:
        lines.append(f"- C++ reader (tilebc-inspect, ASan/UBSan build): {cpp.files} files (every "
                     f"{args.cpp_every}th binary input) in {cpp.batches} batches of up to {CPP_BATCH}, "
                     f"accepted {cpp.accepted}; crashes or sanitizer reports {len(cpp.crashes)} "
                     f"(must be 0); slowest batch {cpp.max_batch_seconds:.1f} s; peak RSS "
                     f"{cpp.max_rss / 2**20:.0f} MiB")
    else:
        lines.append("- C++ reader: not run (no build at runtime/cpp/build/pytest-asan, or --cpp-every 0)")
    lines += ["", f"- verdict: {'PASS' if ok else 'FAIL'}", "", "## Rejections by kind (top 30)", "",
              "| error | count | message (numbers and names dropped) |", "|---|---:|---|"]
    for (kind, message), count in rejections.most_common(30):
        lines.append(f"| {kind} | {count} | {message.replace('|', '/')} |")
    publish(lines, (("Foreign exceptions", foreign), ("Broken invariants", problems),
                    ("Over 1 s", slow), ("C++ reader", cpp.crashes if cpp else [])),
            args.out or RESULTS / f"shared-{stamp:%Y%m%d-%H%M%S}.md")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
