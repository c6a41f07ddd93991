"""Long pass of the JIT / interpreter fuzzer (`fuzz.jit`).

    PYTHONPATH=.:runtime python -m fuzz.run_jit --count 20000 --seed 7 --link-every 10 \
        --out fuzz/results/jit-20k.md

Prints progress, writes the figures and every failure (with `fuzz.jit.replay(seed, index)` to
rebuild it) to --out, and exits 1 when any failure was found.
"""
from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

from . import jit
from . import mutate as bytes_mutate


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--start", type=int, default=0, help="first input index")
    parser.add_argument("--link-every", type=int, default=10,
                        help="link every K-th compiled input with nvJitLink (0: never)")
    parser.add_argument("--no-interp", action="store_true")
    parser.add_argument("--out", type=Path)
    options = parser.parse_args(argv)

    pool = bytes_mutate.corpus()
    stages = collections.Counter()
    slowest = collections.defaultdict(lambda: (0.0, None))
    failures = []
    made = loaded = from_bytes = loaded_bytes = 0
    start = time.time()
    for index in range(options.start, options.start + options.count):
        case = jit.make_case(options.seed, index, pool)
        link = bool(options.link_every) and index % options.link_every == 0
        result = jit.check(case, link=link, interpret=not options.no_interp)
        is_bytes = bool(case.mutations) and case.mutations[0].startswith("bytes:")
        made += case.data is not None
        from_bytes += is_bytes
        loaded += result.loaded
        loaded_bytes += result.loaded and is_bytes
        for stage, verdict in result.stages.items():
            stages[(stage.split("-")[0] if stage.startswith("link") else stage, verdict)] += 1
        for stage, seconds in result.seconds.items():
            if seconds > slowest[stage][0]:
                slowest[stage] = (seconds, index)
        for stage, text in result.failures:
            failures.append((index, case.seed_name, case.mutations, stage, text))
            print(f"FAIL #{index} {case.seed_name} {stage}: {text.strip().splitlines()[-1]}",
                  flush=True)
        done = index - options.start + 1
        if done % 500 == 0:
            print(f"{done}/{options.count} inputs, {loaded} loaded, {len(failures)} failures, "
                  f"{time.time() - start:.0f} s", flush=True)
    elapsed = time.time() - start

    lines = [f"# JIT / interpreter fuzz: {options.count} inputs, seed {options.seed}", "",
             f"Command: `python -m fuzz.run_jit --count {options.count} --seed {options.seed} "
             f"--start {options.start} --link-every {options.link_every}"
             f"{' --no-interp' if options.no_interp else ''}`", "",
             f"- wall time: {elapsed:.0f} s ({elapsed / max(1, options.count) * 1000:.1f} ms/input)",
             f"- inputs: {options.count} ({from_bytes} byte-level, "
             f"{options.count - from_bytes} IR-level)",
             f"- loaded (decode + verify): {loaded} ({loaded_bytes} byte-level, "
             f"{loaded - loaded_bytes} IR-level)",
             f"- failures (foreign exception or overrun): **{len(failures)}**", "",
             "| stage | outcome | count |", "|---|---|---|"]
    for (stage, verdict), count in sorted(stages.items()):
        lines.append(f"| {stage} | {verdict} | {count} |")
    lines += ["", "| stage | slowest (s) | input |", "|---|---|---|"]
    for stage, (seconds, index) in sorted(slowest.items()):
        lines.append(f"| {stage} | {seconds:.2f} | {index} |")
    lines += ["", "## Failures", ""]
    if not failures:
        lines.append("None.")
    for index, name, mutations, stage, text in failures:
        lines += [f"### input {index} ({name}, stage {stage})", "",
                  f"Replay: `fuzz.jit.replay({options.seed}, {index})`; mutations: "
                  f"{'; '.join(mutations) or 'none'}", "", "```", text.strip()[-3000:], "```", ""]
    report = "\n".join(lines) + "\n"
    if options.out:
        options.out.write_text(report)
    print(report if not options.out else f"wrote {options.out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
