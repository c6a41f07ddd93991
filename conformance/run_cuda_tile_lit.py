#!/usr/bin/env python3
"""Run the lit suite of NVIDIA's open cuda-tile repository with tilebc in place of its tools.

    python conformance/run_cuda_tile_lit.py CUDA_TILE_CHECKOUT [--results conformance/results.md]

CUDA_TILE_CHECKOUT is a clone of github.com/NVIDIA/cuda-tile (a work tree, or a bare git
directory: its HEAD's test/ is extracted). The suite is copied into a temporary directory, a lit
configuration of our own replaces theirs there, and `cuda-tile-translate` / `cuda-tile-opt` are
small scripts calling `tilebc translate` / `tilebc opt`; FileCheck is the `filecheck` package.
Nothing of the suite is written into this repository: only the summary (counts per directory,
the reason of every failure, the command and the date).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import OrderedDict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Tests that exercise what tilebc does not set out to be: MLIR passes, the C API, Python bindings.
NOT_APPLICABLE = OrderedDict([
    ("CAPI/", "C API of the MLIR dialect"),
    ("python/", "Python bindings of the MLIR dialect"),
    ("Transforms/", "MLIR transformation passes"),
    ("Dialect/CudaTile/canonicalize.mlir", "MLIR canonicalization pass"),
    ("Dialect/CudaTile/debuginfo_update_symbol_names.mlir", "test-only MLIR pass"),
    ("Dialect/CudaTile/debuginfo_update_symbol_names_fail.mlir", "test-only MLIR pass"),
])

LIT_CONFIG = '''\
import os
import lit.formats
config.name = "cuda-tile-on-tilebc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.excludes = ["Inputs", "lib"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = {exec_root!r}
config.environment["PATH"] = {bin!r} + os.pathsep + os.environ.get("PATH", "")
config.substitutions.append(("%round_trip_test", {round_trip!r}))
config.substitutions.append(("%PYTHON", {python!r}))
'''

WRAPPER = '''\
#!/bin/sh
# NVIDIA's tests are built with their test-only ops; --testing-ops is our opt-in for the same
PYTHONPATH={pythonpath} exec {python} -m tilebc {command} --testing-ops "$@"
'''

ROUND_TRIP = '''\
#!/bin/bash
# text -> bytecode -> text must equal the text printed straight from the input
set -e
cuda-tile-translate -mlir-to-cudatilebc -no-implicit-module "$1" -o "$2.out.tilebc"
cuda-tile-translate -cudatilebc-to-mlir "$2.out.tilebc" -o "$2.roundtrip.mlir" "${@:3}"
cuda-tile-opt "$1" -no-implicit-module -o "$2.ref.mlir" "${@:3}"
diff -B "$2.ref.mlir" "$2.roundtrip.mlir"
'''


# Tests of what NVIDIA's open repository does and its released 13.5 tools do not (the released
# tools win, see fuzz/results/DISAGREEMENTS.md): counted apart from the applicable tests.
_FPOWF = [(r"\bpow %", "fpowf %"), (r"= pow ", "= fpowf ")]
# name -> (what differs, substitutions that give the released tools' spelling; None: none can).
# Tests with substitutions run again in the patched copy, and their outcome is reported apart.
RELEASED_TOOLS_DIFFER = OrderedDict([
    ("Bytecode/list_versions.mlir", ("lists 13.1-13.3 and the test-only versions 250.0/250.1; "
     "the released tools read and write 13.1-13.5",
     [(r"// CHECK-NEXT: 13\.3\n", "// CHECK-NEXT: 13.3\n// CHECK-NEXT: 13.4\n"
       "// CHECK-NEXT: 13.5\n"), (r"// CHECK-NEXT: 250\.[0-9]\n", "")])),
    ("Bytecode/unsupportedVersionTest.mlir", ("names the supported range [13.1 - 13.3]; the "
     "released tools' range is [13.1 - 13.5]", [(r"\[13\.1 - 13\.3\]", "[13.1 - 13.5]")])),
    ("Bytecode/invalid/invalid_structure.mlir", ("names the supported range [13.1 - 13.3] in "
     "the unsupported-version error; the released tools' range is [13.1 - 13.5]",
     [(r"\[13\.1 - 13\.3\]", "[13.1 - 13.5]")])),
    ("Bytecode/operationsTest.mlir", ("an entry takes parameters of type token and tensor_view; "
     "the released tileiras refuses them (entry parameters are scalar tiles)", None)),
    ("Dialect/CudaTile/arith.mlir", ("checks the mnemonic `pow`; the released tools print "
     "`fpowf`", _FPOWF)),
    ("Dialect/CudaTile/ops.mlir", ("checks the mnemonic `pow`; the released tools print "
     "`fpowf`", _FPOWF)),
    ("Dialect/CudaTile/conversion_invalid.mlir", ("its float type lists end at f4E2M1FN; the "
     "released tools' generated verifier lists fnv8E5M3FNU too ('... or f4E2M1FN or "
     "fnv8E5M3FNU values, but got', in tileiras 13.5)",
     [(r"or f4E2M1FN values, but got", "or f4E2M1FN or fnv8E5M3FNU values, but got")])),
    ("Dialect/CudaTile/reduce_and_scan_invalid.mlir", ("a reduce/scan body with memory effects "
     "is refused as 'only pure operations are allowed inside'; the released tools say 'only "
     "memory-effect-free operations are allowed inside' (tileiras 13.5)",
     [(r"only pure operations are allowed inside", "only memory-effect-free operations are "
       "allowed inside")])),
    ("Dialect/CudaTile/math_invalid.mlir", ("names the float power op 'cuda_tile.pow'; the "
     "released tools name it 'cuda_tile.fpowf'", [(r"'cuda_tile\.pow' op", "'cuda_tile.fpowf' op")])),
    ("Bytecode/versioning/test_forward_compatibility.mlir", ("test-only bytecode versions "
     "250.x and their test-only ops", None)),
    ("Bytecode/versioning/test_version_250_1.mlir", ("test-only bytecode versions 250.x and "
     "their test-only ops", None)),
    ("Bytecode/versioning/test_version_errors.mlir", ("test-only bytecode versions 250.x and "
     "their test-only ops", None)),
])


def extract(source: Path, into: Path) -> Path:
    """The checkout's test/ directory, copied to `into`/test."""
    target = into / "test"
    if (source / "test").is_dir():
        shutil.copytree(source / "test", target)
    else:
        git_dir = source / "repo" if (source / "repo" / "HEAD").exists() else source
        archive = subprocess.run(["git", "--git-dir", str(git_dir), "archive", "HEAD", "test"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return target


def revision(source: Path) -> str:
    git_dir = source / "repo" if (source / "repo" / "HEAD").exists() else source
    if (source / ".git").exists():
        git_dir = source / ".git"
    done = subprocess.run(["git", "--git-dir", str(git_dir), "log", "-1", "--format=%h %s"],
                          capture_output=True, text=True)
    return done.stdout.strip() or "unknown revision"


def not_applicable(name: str):
    for prefix, reason in NOT_APPLICABLE.items():
        if name.startswith(prefix):
            return reason
    if name in RELEASED_TOOLS_DIFFER:
        return RELEASED_TOOLS_DIFFER[name][0]
    return None


def line_agreement(suite: Path, name: str):
    """For a `cuda-tile-opt -verify-diagnostics -split-input-file` test: per chunk, whether
    tilebc rejects it on every line where an error is expected (whatever the wording), and
    whether it rejects a chunk that NVIDIA's tool accepts. None for other tests."""
    text = (suite / name).read_text()
    runs = [line for line in text.splitlines() if "RUN:" in line]
    if not any("cuda-tile-opt" in run and "-verify-diagnostics" in run for run in runs):
        return None
    from tilebc.mlir_tools import Options, expected_diagnostics, parse_chunk, split_input
    run = next(run for run in runs if "-verify-diagnostics" in run)
    options = Options(testing_ops=True, allow_unregistered="-allow-unregistered-dialect" in run,
                      hint_warnings="-Wunsupported-hints" in run,
                      hint_errors="-Werr-hints" in run)
    counts = {"rejected": 0, "same_line": 0, "missed": [], "extra": [], "accepted": 0,
              "released_accepts": []}
    differ = [(pattern, why) for test, pattern, why in RELEASED_TOOLS_ACCEPT if test == name]
    for chunk in split_input(text, "-split-input-file" in run):
        expected = [e for e in expected_diagnostics(chunk, name)[0] if e.severity == "error"]
        produced = [d for d in parse_chunk(chunk, name, options).diagnostics
                    if d.severity == "error"]
        first = len(chunk) - len(chunk.lstrip("\n")) + 1
        why = next((why for pattern, why in differ if re.search(pattern, chunk)), None)
        if expected and why:
            counts["released_accepts"].append((first, why, not produced))
        elif expected:
            counts["rejected"] += 1
            lines = {d.line for d in produced}
            if all(e.line in lines for e in expected):
                counts["same_line"] += 1
            else:
                counts["missed"].append(first)
        else:
            counts["accepted"] += 1
            if produced:
                counts["extra"].append(first)
    return counts


def reason_of(output: str, root: str = "") -> str:
    """A one-line reason from a failing test's output: for -verify-diagnostics, how many
    expectations were not met and the first; else the first error line, else the first failing
    command's last stderr line."""
    if root:
        output = output.replace(root.rstrip("/") + "/", "")
    lines = [re.sub(r"^# \| ?", "", line).strip() for line in output.splitlines()]
    unmet = [line for line in lines if re.search(r"error: expected (error|warning|note|remark) "
                                                 r".* was not produced", line)]
    if unmet:
        unexpected = [line for line in lines if "error: unexpected " in line]
        first = unmet[0].split(": error: ", 1)[-1]
        said = unexpected[0].split(": error: unexpected ", 1)[-1] if unexpected else "nothing"
        return (f"{len(unmet)} expected diagnostic(s) not matched (first: {first[:160]}; tilebc "
                f"said {said[:160]})")
    lines = [line for line in lines if line and not line.startswith(("# executed", "# RUN",
                                                                     "# error: command failed"))]
    for pattern in (r"error: (CHECK|[A-Z0-9-]+): ", r"expected-\w+ .*not produced",
                    r"unexpected (error|warning|note)", r"error: ", r"^(\+|-)[^+-]"):
        for line in lines:
            if re.search(pattern, line) and not line.startswith("#"):
                return line[:300]
    tail = [line for line in lines if not line.startswith("#")]
    return (tail[-1] if tail else "no output")[:300]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path, help="cuda-tile clone (work tree or bare git)")
    parser.add_argument("--results", type=Path, default=ROOT / "conformance" / "results.md")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--keep", type=Path, help="run in this directory and keep it")
    parser.add_argument("-j", "--workers", type=int, default=1)
    parser.add_argument("--filter", help="regular expression on test names (no results file)")
    args = parser.parse_args(argv)

    work = args.keep or Path(tempfile.mkdtemp(prefix="cuda-tile-lit-"))
    if work.exists() and args.keep:
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    suite = extract(args.checkout.resolve(), work)
    bindir = work / "bin"
    bindir.mkdir()
    pythonpath = os.pathsep.join([str(ROOT), str(ROOT / "runtime")]
                                 + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                    if p])
    for tool, command in (("cuda-tile-translate", "translate"), ("cuda-tile-opt", "opt")):
        path = bindir / tool
        path.write_text(WRAPPER.format(pythonpath=pythonpath, python=args.python,
                                       command=command))
        path.chmod(0o755)
    filecheck = shutil.which("filecheck", path=str(Path(args.python).parent)) or \
        shutil.which("filecheck")
    if not filecheck:
        print("filecheck is not installed (pip install lit filecheck)", file=sys.stderr)
        return 2
    (bindir / "FileCheck").symlink_to(filecheck)
    round_trip = bindir / "round_trip_test"
    round_trip.write_text(ROUND_TRIP)
    round_trip.chmod(0o755)
    for config in ("lit.cfg.py", "lit.site.cfg.py.in"):
        (suite / config).unlink(missing_ok=True)
    (suite / "lit.cfg.py").write_text(LIT_CONFIG.format(
        exec_root=str(work / "out"), bin=str(bindir), round_trip=str(round_trip),
        python=args.python))

    tests = sorted(str(p.relative_to(suite)) for p in suite.rglob("*.mlir")
                   if "Inputs" not in p.parts)
    applicable = [t for t in tests if not not_applicable(t)]
    if args.filter:
        applicable = [t for t in applicable if re.search(args.filter, t)]
    # the released tools' spelling, written into the (temporary) copy of the differing tests
    patched = []
    for name, (_, substitutions) in RELEASED_TOOLS_DIFFER.items():
        if substitutions and name in tests and not args.filter:
            path = suite / name
            text = path.read_text()
            for pattern, replacement in substitutions:
                text = re.sub(pattern, replacement, text)
            path.write_text(text)
            patched.append(name)
    report = work / "lit.json"
    lit = [args.python, "-c", "from lit.main import main; main()", "-q", f"-j{args.workers}",
           f"--output={report}"] + [str(suite / t) for t in applicable + patched]
    subprocess.run(lit)
    if not report.exists():
        print("lit wrote no results (see its output above)", file=sys.stderr)
        return 2
    results = json.loads(report.read_text())["tests"]
    outcome = {}
    for test in results:
        name = test["name"].split(" :: ", 1)[1]
        outcome[name] = (test["code"], test.get("output", ""))
    if args.filter:
        for name in applicable:
            code, output = outcome.get(name, ("MISSING", ""))
            print(f"{code:8} {name}" + ("" if code == "PASS" else f"  -- {reason_of(output)}"))
        return 0
    args.suite = suite
    sys.path[:0] = [str(ROOT)]
    write_results(args, tests, applicable, outcome)
    print(f"wrote {args.results}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0
# Single chunks of -verify-diagnostics tests that the open repository expects refused and the
# released tools accept (checked by encoding the chunk's op into bytecode and running tileiras
# 13.5): (test, pattern found in the chunk, what differs). Counted apart from the rejected chunks.
RELEASED_TOOLS_ACCEPT = [
    ("Dialect/CudaTile/invalid.mlir",
     r"ftof %arg0 rounding<negative_inf> : tile<2x2xf32> -> tile<2x2xf64>",
     "expects `ftof` f32 to f64 with rounding<negative_inf> refused (\"Only 'nearest_even' is "
     "supported\"); tileiras 13.5 accepts every IEEE mode and nearest_away in a widening "
     "conversion"),
]


def write_results(args, tests, applicable, outcome) -> None:
    per_dir = OrderedDict()
    for name in applicable:
        code = outcome.get(name, ("MISSING", ""))[0]
        counts = per_dir.setdefault(os.path.dirname(name), [0, 0])
        counts[code == "PASS"] += 1
    passed = sum(c[1] for c in per_dir.values())
    lines = ["# NVIDIA's cuda-tile lit suite with tilebc in place of its tools", "",
             f"Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC  ",
             f"Suite: NVIDIA/cuda-tile `test/` at {revision(args.checkout.resolve())}  ",
             "Command: `python conformance/run_cuda_tile_lit.py <cuda-tile checkout>"
             + (f" -j{args.workers}" if args.workers != 1 else "") + "` "
             "(lit and filecheck from PyPI; `cuda-tile-translate` = `tilebc translate`, "
             "`cuda-tile-opt` = `tilebc opt`)", "",
             f"**{passed} of {len(applicable)} applicable tests pass "
             f"({100 * passed / max(1, len(applicable)):.0f} %).**", ""]
    # the tests the released tools word differently, run in their spelling, counted in as well
    respelled = [n for n, (_, subs) in RELEASED_TOOLS_DIFFER.items() if subs and n in tests]
    if respelled:
        more = sum(outcome.get(n, ("NOT RUN",))[0] == "PASS" for n in respelled)
        total = len(applicable) + len(respelled)
        lines += [f"Counting also the {len(respelled)} tests written in the open repository's "
                  f"spelling where the released tools differ (below), run in the released "
                  f"spelling: {passed + more} of {total} "
                  f"({100 * (passed + more) / total:.0f} %).", ""]
    lines += ["| directory | pass | fail |", "|---|---:|---:|"]
    for directory, (fail, ok) in per_dir.items():
        lines.append(f"| {directory} | {ok} | {fail} |")
    failing = [n for n in applicable if outcome.get(n, ("MISSING",))[0] != "PASS"]
    lines += ["", "## Failures", ""]
    if not failing:
        lines.append("None.")
    for name in failing:
        code, output = outcome.get(name, ("MISSING", ""))
        lines.append(f"- `{name}` ({code}): {reason_of(output, str(args.suite.parent))}")
    # also the tests whose wording the released tools change (their lines do not change)
    differing = [n for n, (_, subs) in RELEASED_TOOLS_DIFFER.items() if subs and n in tests]
    agreement = [(name, line_agreement(args.suite, name)) for name in applicable + differing]
    agreement = [(name, counts) for name, counts in agreement if counts]
    if agreement:
        total = sum(c["rejected"] for _, c in agreement)
        same = sum(c["same_line"] for _, c in agreement)
        extra = sum(len(c["extra"]) for _, c in agreement)
        lines += ["", "## Verifier cases: rejected on the expected line", "",
                  "The `-verify-diagnostics` tests hold one case per `// -----` chunk. Apart from "
                  "the wording, does tilebc reject each chunk NVIDIA's tool rejects, on every "
                  "line where an error is expected, and accept the chunks it accepts?", "",
                  f"**{same} of {total} rejected chunks are rejected by tilebc on the expected "
                  f"line(s) ({100 * same / max(1, total):.0f} %); {extra} accepted chunk(s) are "
                  f"rejected by tilebc.** (Chunks the released tools accept are counted "
                  f"apart, below.)", "",
                  "| test | chunks NVIDIA rejects | same line | chunk lines tilebc misses | "
                  "accepted by NVIDIA, rejected by tilebc |", "|---|---:|---:|---|---|"]
        for name, c in agreement:
            missed = ", ".join(map(str, c["missed"][:12])) + (" …" if len(c["missed"]) > 12
                                                             else "")
            lines.append(f"| {name} | {c['rejected']} | {c['same_line']} | {missed} | "
                         f"{', '.join(map(str, c['extra']))} |")
    lines += ["", "## Where NVIDIA's open repository and its released 13.5 tools differ", ""]
    lines += ["Counted apart from the applicable tests. Where a substitution gives the released "
              "tools' spelling, the test ran again on the patched copy:", ""]
    for name, (reason, substitutions) in RELEASED_TOOLS_DIFFER.items():
        if name in tests:
            verdict = ""
            if substitutions:
                code, output = outcome.get(name, ("NOT RUN", ""))
                verdict = (" — with the released tools' spelling: passes" if code == "PASS"
                           else f" — with the released tools' spelling: {code}: "
                                f"{reason_of(output, str(args.suite.parent))}")
            lines.append(f"- `{name}`: {reason}{verdict}")
    for name, c in agreement:
        for first, why, accepted in c["released_accepts"]:
            lines.append(f"- `{name}`, the chunk at line {first}: {why} — tilebc "
                         + ("accepts it too" if accepted else "still rejects it"))
    lines += ["", "## Not applicable", ""]
    for name in tests:
        if name in RELEASED_TOOLS_DIFFER:
            continue
        reason = not_applicable(name)
        if reason:
            lines.append(f"- `{name}`: {reason}")
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
