"""The long text-fuzzing pass: `python -m fuzz.run_text --count 200000 [--seed S] [--out FILE]`.

Mutates the text corpus (fuzz/text.py) with a seeded random.Random, runs `fuzz.text.check` on each
input and writes the figures to fuzz/results/text-<stamp>.md. Exits 1 when a hard requirement
fails: an exception other than TilebcError, a broken invariant (error position outside the text,
print -> parse -> print not a fixed point, assembled bytes that do not load), more than 1 s CPU
for one input, or more than 256 MiB for one input (tracemalloc, sampled).
"""
from __future__ import annotations

import argparse
import collections
import datetime
import random
import re
import resource
import sys
import time
import tracemalloc
from pathlib import Path

from .report import RESULTS, publish
from .text import MUTATORS, check, corpus, mutate

CPU_LIMIT = 1.0
MEMORY_LIMIT = 256 * 2**20


def _rule(message: str) -> str:
    """One row per kind of rejection: numbers, quoted text and the quoted source line dropped."""
    first = message.split("\n", 1)[0]
    return re.sub(r"\d+", "N", re.sub(r"'[^']*'|\"[^\"]*\"|[%@#][\w.$-]+", "…", first))[:100]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--memory-every", type=int, default=100,
                        help="measure the tracemalloc peak of every Nth input")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)

    pool = corpus()
    rng = random.Random(args.seed)
    stamp = datetime.datetime.now()
    started = time.perf_counter()
    counts = collections.Counter()
    errors = collections.Counter()
    mutators = collections.Counter()
    foreign, problems, slow = [], [], []
    max_cpu, max_check_cpu, total_cpu, traced_peak = 0.0, 0.0, 0.0, 0
    slowest = slowest_check = ""
    for index in range(args.count):
        name, version, text = rng.choice(pool)
        mutated, used = mutate(text, rng, pool)
        mutators.update(used)
        measure = args.memory_every and index % args.memory_every == 0
        if measure:
            tracemalloc.start()
        outcome = check(mutated, version)
        if measure:
            traced_peak = max(traced_peak, tracemalloc.get_traced_memory()[1])
            if tracemalloc.get_traced_memory()[1] > MEMORY_LIMIT:
                problems.append(f"#{index} {name} via {used}: over 256 MiB")
            tracemalloc.stop()
        label = f"#{index} {name} via {'+'.join(used)}"
        counts["accepted" if outcome.accepted else "rejected"] += 1
        if outcome.error:
            kind, _, message = outcome.error.partition(": ")
            errors[(kind, _rule(message))] += 1
        if outcome.foreign:
            foreign.append(f"{label}:\n{outcome.foreign}")
        problems += [f"{label}: {p}" for p in outcome.problems]
        total_cpu += outcome.check_cpu_seconds
        if outcome.cpu_seconds > max_cpu:
            max_cpu, slowest = outcome.cpu_seconds, label
        if outcome.check_cpu_seconds > max_check_cpu:
            max_check_cpu, slowest_check = outcome.check_cpu_seconds, label
        if outcome.check_cpu_seconds > CPU_LIMIT:
            slow.append(f"{label}: {outcome.check_cpu_seconds:.2f} s CPU")
        if index and index % 10_000 == 0:
            print(f"{index} inputs, {len(foreign)} foreign, {len(problems)} problems, "
                  f"{len(slow)} slow", file=sys.stderr)
    elapsed = time.perf_counter() - started
    max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    ok = not foreign and not problems and not slow and traced_peak <= MEMORY_LIMIT

    lines = [
        f"# Text fuzz run {stamp:%Y-%m-%d %H:%M:%S}",
        "",
        f"- command: `python -m fuzz.run_text --count {args.count} --seed {args.seed}`",
        f"- corpus: {len(pool)} texts (fixture .dis/.dis-g at 13.1-13.5, tests/text_corpus)",
        "- mutators used: " + ", ".join(f"{k} {v}" for k, v in sorted(mutators.items())),
        f"- inputs: {args.count} in {elapsed:.0f} s; assembled {counts['accepted']}, "
        f"rejected with a TilebcError {counts['rejected']}",
        f"- exceptions other than TilebcError (RecursionError included): {len(foreign)} (must be 0)",
        f"- broken invariants (error line:col outside the text, print -> parse -> print not a "
        f"fixed point, assembled bytes that do not load, over 256 MiB): {len(problems)} (must be 0)",
        f"- inputs over {CPU_LIMIT:.0f} s CPU: {len(slow)} (must be 0); max CPU of assemble "
        f"{max_cpu * 1e3:.1f} ms ({slowest}); max CPU of the whole check {max_check_cpu * 1e3:.1f} "
        f"ms ({slowest_check}); mean {total_cpu / max(args.count, 1) * 1e3:.2f} ms",
        f"- memory: process ru_maxrss {max_rss / 2**20:.0f} MiB; tracemalloc peak of one check "
        f"(every {args.memory_every}th input) {traced_peak / 2**20:.1f} MiB (limit 256 MiB)",
        "",
        f"- verdict: {'PASS' if ok else 'FAIL'}",
        "",
        "## Rejections by kind (top 40)",
        "",
        "| error | count | message (numbers and names dropped) |",
        "|---|---:|---|",
    ]
    for (kind, rule), count in errors.most_common(40):
        lines.append(f"| {kind} | {count} | {rule.replace('|', '/')} |")
    publish(lines, (("Foreign exceptions", foreign), ("Broken invariants", problems),
                    ("Slow inputs", slow)),
            args.out or RESULTS / f"text-{stamp:%Y%m%d-%H%M%S}.md")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
