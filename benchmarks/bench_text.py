"""Text tools and start-up: `tilebc dis/verify/info/asm` in a new process beside NVIDIA's tileirdisasm.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_text.py [--record] [--repeat N]
                                                            [--baseline DIR] [--keep DIR]

Modules (real cuTile bytecode from fixtures/bytecode, replicated as bench_codec.py does):

* small  one fixture of about 1 KB;
* 100k   every usable fixture's entry functions, replicated under fresh names to >= 95 KiB;
* 1.4m   the same to >= 1.4 MB (about 14x the 100k module).

Each text file is our `dis` of its module, which is tileirdisasm's text. Every measurement is one
new process of the venv's installed `tilebc` command (`python -m tilebc` where there is none),
timed from outside (wall clock, best and median of N); the commands of a round run
one after another, round after round, so tilebc, the baseline and tileirdisasm share the machine's
load. Rows:

* start-up: `python -c pass`, then `tilebc dis/verify/info` of the small module and `asm` of its
  text, beside `tileirdisasm` on the same file;
* dis (plain and -g), asm, verify and convert (one version down) of the 100k and 1.4m modules,
  dis beside `tileirdisasm` (plain and -g) on the same bytecode; the linearity lines give each
  command's time ratio 1.4m / 100k against the size ratio of its input (linear: equal);
* which packages `tilebc dis` loads (the runtime, the interpreter, cuda bindings, numpy).

`--baseline DIR` also times another checkout (e.g. a worktree of an older commit) in the same
rounds; its 1.4m asm runs once at most (`--baseline-large`), as it may take minutes.
`--record` writes benchmarks/results/text.md.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, REPO)

import bench_codec  # noqa: E402

RESULTS = os.path.join(REPO, "benchmarks", "results", "text.md")
TARGETS = {"100k": 95 * 1024, "1.4m": 1400 * 1024}
# Reports the packages loaded when the command ends: from its hard exit (a one-shot command in
# its own process ends with os._exit), or after it returns (older trees).
PROBE = """import sys, runpy
sys.argv = ['tilebc'] + sys.argv[1:]
heavy = ('tilebc_runtime', 'tilebc.interp', 'cuda', 'numpy')
def report():
    print(' '.join(p for p in heavy if any(m == p or m.startswith(p + '.') for m in sys.modules))
          or 'none', file=sys.stderr)
from tilebc import cli
hard_exit = getattr(cli, '_hard_exit', None)
if hard_exit is not None:
    cli._hard_exit = lambda code: (report(), hard_exit(code))
try:
    runpy.run_module('tilebc', run_name='__main__')
except SystemExit:
    pass
report()
"""


def build_inputs(directory: str, disasm: Optional[str]) -> Dict[str, Dict[str, str]]:
    """{label: {"bytecode": path, "text": path, "size": bytes}} for small, 100k and 1.4m."""
    import tilebc
    from tilebc.text import print_module
    version, small, pool, template, _ = bench_codec.select_inputs(disasm, None)
    blobs = {"small": open(small, "rb").read()}
    for label, target in TARGETS.items():
        path = os.path.join(directory, f"{label}.tilebc")
        if os.path.exists(path):
            blobs[label] = open(path, "rb").read()
        else:
            blobs[label], _ = bench_codec.build_replicated(pool, template, target)
    inputs = {}
    for label, data in blobs.items():
        bytecode = os.path.join(directory, f"{label}.tilebc")
        text = os.path.join(directory, f"{label}.mlir")
        if not os.path.exists(bytecode):
            with open(bytecode, "wb") as stream:
                stream.write(data)
        if not os.path.exists(text):
            with open(text, "w") as stream:
                stream.write(print_module(tilebc.load(data)))
        module_version = tilebc.load(data, verify=False).version
        # `convert` goes one version down (the replicated modules hold nothing newer needs)
        older = f"{module_version.major}.{max(module_version.minor - 1, 1)}"
        inputs[label] = {"bytecode": bytecode, "text": text, "size": len(data),
                         "text_size": os.path.getsize(text), "older": older,
                         "version": str(module_version)}
    return inputs


def env_for(tree: str) -> Dict[str, str]:
    env = dict(os.environ)
    # start-up is timed as an installed package runs: from its .pyc files (the warm-up run
    # writes them), whatever the calling shell says
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join([tree, os.path.join(tree, "runtime")])
    return env


def tilebc_launcher(python: str) -> List[str]:
    """The venv's installed `tilebc` command (its entry-point script), run as users run it; each
    tree comes first on its PYTHONPATH. `python -m tilebc` adds runpy and importlib.util (~5 ms)."""
    script = os.path.join(os.path.dirname(python), "tilebc")
    return [python, script] if os.path.isfile(script) else [python, "-m", "tilebc"]


def run_once(argv: List[str], env: Optional[Dict[str, str]] = None) -> float:
    # `-m`/`-c` put the working directory first on sys.path: run in the tree being timed
    cwd = env["PYTHONPATH"].split(os.pathsep)[0] if env else None
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                          cwd=cwd)
    elapsed = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.decode()[-400:]}")
    return elapsed


GNU_TIME = "/usr/bin/time"


def peak_kib(argv: List[str], env: Optional[Dict[str, str]] = None) -> Optional[int]:
    """The command's peak resident set in KiB, through GNU time (which waits on the command
    alone: a child of this process would report at least this process's own peak, as Linux
    keeps it across exec), in a run of its own; None without GNU time."""
    if not os.access(GNU_TIME, os.X_OK):
        return None
    cwd = env["PYTHONPATH"].split(os.pathsep)[0] if env else None
    with tempfile.NamedTemporaryFile("r") as report:
        done = subprocess.run([GNU_TIME, "-f", "%M", "-o", report.name, *argv],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
        words = report.read().split()
    if done.returncode or not words or not words[-1].isdigit():
        return None
    return int(words[-1])


# Memory a decode allocates (tracemalloc's peak, in bytes): the file is read first, so its own
# bytes are not counted, and another file is decoded before, so the decoders the process compiles
# once are not either; then the same with the verifier (which decodes the lazy locations).
DECODE_MEMORY_PROBE = """import sys, tracemalloc
import tilebc
from tilebc.verify import verify
tilebc.load(sys.argv[2])
data = open(sys.argv[1], 'rb').read()
tracemalloc.start()
module = tilebc.load(data, verify=False)
decoded = tracemalloc.get_traced_memory()[1]
verify(module)
print(decoded, tracemalloc.get_traced_memory()[1])
"""


def decode_memory(tree: str, path: str, first: str) -> Optional[Tuple[int, int]]:
    """(peak bytes of the decode of `path`, peak bytes with the verifier after it) in a new
    process that decoded `first` before."""
    done = subprocess.run([sys.executable, "-c", DECODE_MEMORY_PROBE, path, first],
                          capture_output=True, text=True, env=env_for(tree), cwd=tree)
    words = done.stdout.split()
    if done.returncode or len(words) != 2:
        return None
    return int(words[0]), int(words[1])


def loaded_by_dis(tree: str, path: str) -> str:
    done = subprocess.run([sys.executable, "-c", PROBE, "dis", path, "-o", os.devnull],
                          capture_output=True, text=True, env=env_for(tree), cwd=tree)
    return done.stderr.strip().splitlines()[-1]


def import_ms(tree: str, path: str) -> float:
    """Milliseconds `python -X importtime -m tilebc dis FILE` spends importing (its self times
    summed): what every command pays before it reads a byte."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "tilebc", "dis", path, "-o",
                           os.devnull], capture_output=True, text=True, env=env_for(tree), cwd=tree)
    total = 0
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            field = line.split(":", 1)[1].split("|")[0].strip()
            total += int(field) if field.isdigit() else 0
    return total / 1000


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="rounds of the small commands")
    parser.add_argument("--repeat-large", type=int, default=3,
                        help="rounds of dis/asm on the 100k and 1.4m modules")
    parser.add_argument("--baseline", metavar="DIR", help="another checkout to time alongside")
    parser.add_argument("--baseline-large", action="store_true",
                        help="with --baseline: also its asm of the 1.4m module (once)")
    parser.add_argument("--baseline-label", metavar="TEXT",
                        help="how the results name the baseline (default: its path)")
    parser.add_argument("--keep", metavar="DIR", help="keep (and reuse) the generated files here")
    parser.add_argument("--record", action="store_true", help=f"write {RESULTS}")
    args = parser.parse_args(argv)
    disasm = bench_codec.find_disasm()
    directory = args.keep or tempfile.mkdtemp(prefix="bench_text_")
    os.makedirs(directory, exist_ok=True)
    inputs = build_inputs(directory, disasm)
    trees = {"tilebc": REPO}
    if args.baseline:
        trees["baseline"] = os.path.abspath(args.baseline)
    python = sys.executable

    launcher = tilebc_launcher(python)

    def tilebc_cmd(tree, *words):
        return ([*launcher, *words], env_for(tree))

    small = inputs["small"]
    # (row, tool, command, env, rounds)
    jobs = [("python -c pass", "python", [python, "-c", "pass"], None, args.repeat)]
    for tree_name, tree in trees.items():
        for command in ("dis", "verify", "info"):
            argv, env = tilebc_cmd(tree, command, small["bytecode"],
                                   *(["-o", os.devnull] if command == "dis" else []))
            jobs.append((f"{command} small", tree_name, argv, env, args.repeat))
        argv, env = tilebc_cmd(tree, "asm", small["text"], "-o", os.devnull)
        jobs.append(("asm small", tree_name, argv, env, args.repeat))
    if disasm:
        jobs.append(("dis small", "tileirdisasm", [disasm, small["bytecode"]], None, args.repeat))
    for label in TARGETS:
        item = inputs[label]
        for tree_name, tree in trees.items():
            for words in (["dis"], ["dis", "-g"]):
                argv, env = tilebc_cmd(tree, *words, item["bytecode"], "-o", os.devnull)
                jobs.append((f"{' '.join(words)} {label}", tree_name, argv, env, args.repeat_large))
            rounds = args.repeat_large
            if tree_name == "baseline" and label == "1.4m":
                rounds = 1 if args.baseline_large else 0
            argv, env = tilebc_cmd(tree, "asm", item["text"], "-o", os.devnull)
            jobs.append((f"asm {label}", tree_name, argv, env, rounds))
            argv, env = tilebc_cmd(tree, "verify", item["bytecode"])
            jobs.append((f"verify {label}", tree_name, argv, env, args.repeat_large))
            argv, env = tilebc_cmd(tree, "convert", item["bytecode"], "--target-version",
                                   item["older"], "-o", os.devnull, "-f")
            jobs.append((f"convert {label}", tree_name, argv, env, args.repeat_large))
        if disasm:
            jobs.append((f"dis {label}", "tileirdisasm", [disasm, item["bytecode"]], None,
                         args.repeat_large))
            jobs.append((f"dis -g {label}", "tileirdisasm", [disasm, "-g", item["bytecode"]], None,
                         args.repeat_large))

    times: Dict[tuple, List[float]] = {}
    for job in jobs:  # one untimed run of each small command: file caches and .pyc files warm
        if job[4] and (job[0].endswith("small") or job[1] == "python"):
            run_once(job[2], job[3])
    for round_number in range(max(job[4] for job in jobs)):
        for row, tool, argv, env, rounds in jobs:
            if round_number < rounds:
                times.setdefault((row, tool), []).append(run_once(argv, env))
        print(f"round {round_number + 1} done", file=sys.stderr, flush=True)

    peaks = {}  # (row, tool) -> KiB, one run each after the timed rounds
    for row, tool, argv, env, _ in jobs:
        if row in ("dis 1.4m", "dis -g 1.4m", "asm 1.4m", "verify 1.4m"):
            found = peak_kib(argv, env)
            if found is not None:
                peaks[(row, tool)] = found
    decoded = {tree_name: decode_memory(tree, inputs["1.4m"]["bytecode"],
                                        inputs["100k"]["bytecode"])
               for tree_name, tree in trees.items()}
    loaded = {tree_name: (loaded_by_dis(tree, small["bytecode"]),
                          min(import_ms(tree, small["bytecode"]) for _ in range(3)))
              for tree_name, tree in trees.items()}
    report = render(inputs, trees, times, loaded, disasm, args, peaks, decoded)
    print(report)
    if args.record:
        with open(RESULTS, "w") as stream:
            stream.write(report)
        print(f"wrote {RESULTS}", file=sys.stderr)
    return 0


def render(inputs, trees, times, loaded, disasm, args, peaks, decoded) -> str:
    def cell(row, tool):
        found = times.get((row, tool))
        if not found:
            return "–"
        return f"{min(found) * 1000:.0f} / {statistics.median(found) * 1000:.0f}"

    tools = list(trees) + (["tileirdisasm"] if disasm else [])
    rows = ["dis small", "verify small", "info small", "asm small"] + [
        f"{command} {label}" for command in ("dis", "dis -g", "asm", "verify", "convert")
        for label in TARGETS]
    lines = ["# Text tools and start-up", "",
             "Generated by `PYTHONPATH=. .venv/bin/python benchmarks/bench_text.py --record"
             + (" --baseline DIR" if args.baseline else "")
             + (" --baseline-large" if args.baseline_large else "") + "`.", "",
             f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
             f"- machine: {os.cpu_count()} CPUs, {platform.machine()}, {platform.system()} "
             f"{platform.release()}; load average at the end "
             + " ".join(f"{x:.2f}" for x in os.getloadavg()),
             f"- python: {platform.python_implementation()} {platform.python_version()}",
             f"- tileirdisasm: {disasm or 'not found'}" if not disasm else
             "- tileirdisasm: from the venv's NVIDIA wheel",
             "- inputs: " + "; ".join(f"{label} {item['size']:,} B bytecode, "
                                      f"{item['text_size']:,} B text"
                                      for label, item in inputs.items()),
             f"- timing: each command a new process, wall ms, best / median of {args.repeat} "
             f"rounds ({args.repeat_large} for the 100k and 1.4m rows), the tools alternating "
             "within each round; output to /dev/null",
             "- tilebc runs as " + ("`python -m tilebc`" if "-m" in tilebc_launcher(sys.executable)
                                    else "the venv's installed `tilebc` command (its entry-point "
                                    "script), each tree first on PYTHONPATH"), ""]
    if args.baseline:
        lines.append(f"- baseline: {args.baseline_label or trees['baseline']}")
        lines.append("")
    lines.append("| command | " + " | ".join(tools) + " |")
    lines.append("|---|" + "---:|" * len(tools))
    pass_row = times.get(("python -c pass", "python"))
    lines.append("| `python -c pass` | " + " | ".join(
        f"{min(pass_row) * 1000:.0f} / {statistics.median(pass_row) * 1000:.0f}"
        if tool == "tilebc" else "–" for tool in tools) + " |")
    for row in rows:
        lines.append(f"| `{row}` | " + " | ".join(cell(row, tool) for tool in tools) + " |")
    lines.append("")
    text_ratio = inputs["1.4m"]["text_size"] / inputs["100k"]["text_size"]
    bytes_ratio = inputs["1.4m"]["size"] / inputs["100k"]["size"]
    for command, ratio, what in (("asm", text_ratio, "text"), ("verify", bytes_ratio, "bytecode"),
                                 ("convert", bytes_ratio, "bytecode")):
        for tool in trees:
            small_t, large_t = times.get((f"{command} 100k", tool)), times.get((f"{command} 1.4m", tool))
            if small_t and large_t:
                lines.append(f"- {command} linearity ({tool}): 1.4m / 100k = "
                             f"{min(large_t) / min(small_t):.1f}x the time for {ratio:.1f}x the {what}")
    # issue 20's ratios: dis (plain, -g) against tileirdisasm on the same bytecode, asm of the
    # text against tileirdisasm's dis of the module
    for row, against, target in (("dis 1.4m", "dis 1.4m", "1.0"), ("dis -g 1.4m", "dis -g 1.4m",
                                                                   "1.0"),
                                 ("asm 1.4m", "dis 1.4m", "2.0")):
        theirs = times.get((against, "tileirdisasm"))
        for tool in trees:
            ours = times.get((row, tool))
            if ours and theirs:
                lines.append(f"- `{row}` ({tool}) / tileirdisasm's `{against}`: "
                             f"{min(ours) / min(theirs):.2f}x best, "
                             f"{statistics.median(ours) / statistics.median(theirs):.2f}x median "
                             f"(issue 20's target: at most {target}x)")
    large = inputs["1.4m"]
    lines.append(f"- convert: `convert FILE --target-version {large['older']}`, one version below "
                 f"the modules' {large['version']}")
    found = [(row, tool, peaks[(row, tool)]) for row in ("dis 1.4m", "dis -g 1.4m", "asm 1.4m",
                                                         "verify 1.4m") for tool in tools
             if (row, tool) in peaks]
    if found:
        lines.append("- peak memory of the 1.4m rows (resident set, MiB, and x the bytecode; one "
                     "run each under GNU time after the timed rounds): " + "; ".join(
                         f"{row} {tool} {kib / 1024:.0f} ({kib * 1024 / large['size']:.0f}x)"
                         for row, tool, kib in found))
    for tool, found in decoded.items():
        if found is not None:
            lines.append(f"- memory of the decoded 1.4m module ({tool}; tracemalloc's peak in a new "
                         "process that decoded the 100k module before, the file's own bytes not "
                         "counted; issue 20's target: at most "
                         f"40x the file): `tilebc.load(data, verify=False)` {found[0] / 2**20:.1f} "
                         f"MiB ({found[0] / large['size']:.1f}x); with `verify` after it "
                         f"{found[1] / 2**20:.1f} MiB ({found[1] / large['size']:.1f}x)")
    for tool, (what, milliseconds) in loaded.items():
        lines.append(f"- `tilebc dis` small ({tool}) loads, of tilebc_runtime, tilebc.interp, "
                     f"cuda, numpy: {what}; imports take {milliseconds:.0f} ms "
                     "(`python -X importtime -m tilebc dis FILE`, self times summed, best of 3)")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
