"""Codec benchmark: tilebc.load / tilebc.dump throughput versus NVIDIA's tileirdisasm.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_codec.py [--record] [--repeat N] [--profile]

Three modules, all made of real cuTile bytecode from fixtures/bytecode:

* small  one fixture of about 1 KB, as cuTile wrote it;
* 100k   the entry functions of every usable fixture, replicated under fresh names into one
         Module until its encoding reaches 100 KB;
* 1m     the same, until it reaches 1 MiB.

Each copy is a real copy (a fresh tilebc.load of the fixture's bytes), renamed `<name>__<n>`, with
its debug subprogram's linkage name renamed to match (tileirdisasm checks that). Both big files are
checked with tileirdisasm (exit 0) before anything is timed.

Timings are best-of-N wall times (time.perf_counter). decode = tilebc.load(bytes) -> Module,
encode = tilebc.dump(Module) -> bytes, tileirdisasm = one subprocess run on the same file with its
output sent to /dev/null (the cheapest sink, so the comparison favours tileirdisasm).

The target (from the issue): decode the 1 MiB module into the IR in less time than tileirdisasm
takes to print it -> PASS/FAIL line at the end.

--record also writes benchmarks/results/codec.md. --profile prints a cProfile of decoding the 1 MiB
module (top 25 by tottime).
"""
from __future__ import annotations

import argparse
import cProfile
import dataclasses
import datetime
import gc
import glob
import io
import math
import os
import platform
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from typing import Callable, Dict, List, Optional, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

import tilebc  # noqa: E402
from tilebc.ir import location as L  # noqa: E402
from tilebc.ir.module import Module  # noqa: E402

FIXTURES = os.path.join(REPO, "fixtures", "bytecode")
RESULTS = os.path.join(REPO, "benchmarks", "results", "codec.md")
SMALL_TARGET = 1024
MEDIUM_TARGET = 100 * 1024
LARGE_TARGET = 1024 * 1024


# ---- tools ---------------------------------------------------------------------------------------

def find_disasm() -> Optional[str]:
    """tileirdisasm from the venv's nvidia-cuda-* wheel, else from PATH."""
    candidates = glob.glob(os.path.join(os.path.dirname(sys.executable), "..", "lib", "python*",
                                        "site-packages", "nvidia", "cu*", "bin", "tileirdisasm"))
    candidates += glob.glob(os.path.join(REPO, ".venv", "lib", "python*", "site-packages", "nvidia",
                                         "cu*", "bin", "tileirdisasm"))
    for candidate in candidates:
        if os.access(candidate, os.X_OK):
            return os.path.abspath(candidate)
    return shutil.which("tileirdisasm")


def disasm_ok(disasm: str, path: str) -> Tuple[bool, str]:
    result = subprocess.run([disasm, path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return result.returncode == 0, result.stderr.decode("utf-8", "replace")[-400:]


def best_of(fn: Callable[[], object], repeat: int) -> Tuple[float, object]:
    """Best wall time of `repeat` calls (a collection before each, gc left on), and the last result."""
    best = math.inf
    result = None
    for _ in range(repeat):
        result = None
        gc.collect()
        start = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - start
        best = min(best, elapsed)
    return best, result


def count_ops(module: Module) -> int:
    return sum(1 for f in module.functions for _ in f.walk())


# ---- building the modules ------------------------------------------------------------------------

def fixture_files() -> Dict[str, Dict[str, str]]:
    """{version: {fixture name: path}} for fixtures/bytecode/<name>/<name>-<version>.tilebc."""
    found: Dict[str, Dict[str, str]] = {}
    for path in sorted(glob.glob(os.path.join(FIXTURES, "*", "*.tilebc"))):
        name = os.path.basename(os.path.dirname(path))
        match = re.fullmatch(re.escape(name) + r"-(\d+\.\d+)\.tilebc", os.path.basename(path))
        if match:
            found.setdefault(match.group(1), {})[name] = path
    return found


def _relink(loc, old: str, new: str, memo: dict):
    """`loc` with every subprogram whose linkage name is `old` renamed to `new`."""
    if loc is None:
        return None
    key = id(loc)
    if key in memo:
        return memo[key][1]
    if isinstance(loc, L.DISubprogram):
        result = loc.replace(linkage_name=new) if loc.linkage_name == old else loc
    elif isinstance(loc, L.DILexicalBlock):
        result = loc.replace(scope=_relink(loc.scope, old, new, memo))
    elif isinstance(loc, L.DILoc):
        result = loc.replace(scope=_relink(loc.scope, old, new, memo))
    elif isinstance(loc, L.CallSiteLoc):
        result = L.CallSiteLoc(_relink(loc.callee, old, new, memo),
                               _relink(loc.caller, old, new, memo))
    else:
        result = loc
    memo[key] = (loc, result)  # keep `loc` alive so its id is not reused
    return result


def renamed_copy(data: bytes, serial: List[int]):
    """The entry functions of `data`, freshly decoded and renamed `<name>__<n>` (debug info too)."""
    functions = tilebc.load(data, verify=False).functions
    for function in functions:
        old = function.name
        new = f"{old}__{serial[0]}"
        serial[0] += 1
        memo: dict = {}
        function.name = new
        function.loc = _relink(function.loc, old, new, memo)
        for op in function.walk():
            op.loc = _relink(op.loc, old, new, memo)
    return functions


def build_replicated(pool: List[bytes], template: Module, target: int) -> Tuple[bytes, int]:
    """Encode renamed copies of the fixtures in `pool`, cycling through it, into one Module until
    its encoding is >= `target` bytes. Returns (bytes, number of fixture copies)."""
    def encode(units: int) -> bytes:
        serial = [0]
        module = Module(version=template.version, producer=template.producer,
                        preview=template.preview)
        for unit in range(units):
            module.functions.extend(renamed_copy(pool[unit % len(pool)], serial))
        return tilebc.dump(module)

    # Bytes one more pass over the pool adds (shared strings/types/debug entries are not repeated).
    one = len(encode(len(pool)))
    per_unit = max((len(encode(2 * len(pool))) - one) / len(pool), 1.0)
    units = max(1, len(pool) + math.ceil((target - one) / per_unit))
    while True:
        data = encode(units)
        if len(data) >= target:
            return data, units
        units += max(1, math.ceil((target - len(data)) / per_unit))


def select_inputs(disasm: Optional[str], version: Optional[str]):
    """(version, small fixture path, pool of usable fixture bytes, template module)."""
    by_version = fixture_files()
    if not by_version:
        sys.exit(f"no fixtures under {FIXTURES}")
    if version is None:
        # The newest version that has (nearly) the most fixtures: regeneration may be under way.
        most = max(len(v) for v in by_version.values())
        version = max((v for v, f in by_version.items() if len(f) >= 0.9 * most),
                      key=lambda v: tuple(int(x) for x in v.split(".")))
    files = by_version.get(version)
    if not files:
        sys.exit(f"no fixtures for version {version}; have {sorted(by_version)}")
    pool: List[Tuple[str, bytes]] = []
    skipped: List[str] = []
    template = None
    for name, path in sorted(files.items()):
        try:  # fixtures may be being regenerated while this runs
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError as error:
            skipped.append(f"{name} ({error.strerror})")
            continue
        try:
            module = tilebc.load(data, verify=False)
        except tilebc.TilebcError as error:
            skipped.append(f"{name} (tilebc.load: {str(error)[:80]})")
            continue
        if module.preview or module.globals or not module.functions:
            skipped.append(f"{name} (preview/globals/empty)")
            continue
        if disasm is not None:
            ok, err = disasm_ok(disasm, path)
            if not ok:
                skipped.append(f"{name} (tileirdisasm rejects it)")
                continue
        pool.append((path, data))
        template = template or module
    if not pool:
        sys.exit("no usable fixtures: " + "; ".join(skipped))
    small = min(pool, key=lambda item: (abs(len(item[1]) - SMALL_TARGET), item[0]))[0]
    return version, small, [data for _, data in pool], template, skipped


# ---- measuring -----------------------------------------------------------------------------------

@dataclasses.dataclass
class Row:
    label: str
    path: str
    size: int
    functions: int
    ops: int
    decode_s: float
    strict_s: float
    verify_s: float
    encode_s: float
    disasm_s: Optional[float]
    repeat: int

    @property
    def ratio(self) -> Optional[float]:
        return None if not self.disasm_s else self.decode_s / self.disasm_s


def measure(label: str, path: str, repeat: int, disasm: Optional[str]) -> Row:
    with open(path, "rb") as handle:
        data = handle.read()
    decode_s, module = best_of(lambda: tilebc.load(data, verify=False), repeat)
    # The same with every debug location decoded at load (the default decodes them on first use).
    strict_s, _ = best_of(lambda: tilebc.load(data, lazy_debug=False, verify=False), repeat)
    ops = count_ops(module)
    from tilebc.verify import verify
    strict_module = tilebc.load(data, lazy_debug=False, verify=False)
    verify_s, _ = best_of(lambda: verify(strict_module), repeat)
    encode_s, _ = best_of(lambda: tilebc.dump(module), repeat)
    disasm_s = None
    if disasm is not None:
        disasm_s, _ = best_of(lambda: subprocess.run([disasm, path], stdout=subprocess.DEVNULL,
                                                     stderr=subprocess.DEVNULL, check=True),
                              max(repeat, 5))
    return Row(label, path, len(data), len(module.functions), ops, decode_s, strict_s, verify_s, encode_s,
               disasm_s, repeat)


def cold_decode(path: str) -> float:
    """Seconds of the first tilebc.load in a fresh interpreter (after `import tilebc`): includes
    compiling the fast decoders of the ops the file uses, which later loads reuse."""
    code = ("import sys, time, tilebc\n"
            "data = open(sys.argv[1], 'rb').read()\n"
            "start = time.perf_counter(); tilebc.load(data, verify=False)\n"
            "print(time.perf_counter() - start)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True,
                            env=env, check=True)
    return float(result.stdout.strip())


def peak_decode_memory(path: str) -> Tuple[int, int]:
    """(peak traced bytes while decoding, bytes still held by the resulting Module)."""
    with open(path, "rb") as handle:
        data = handle.read()
    gc.collect()
    tracemalloc.start()
    try:
        module = tilebc.load(data, verify=False)
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del module
    return peak, current


def profile_decode(path: str, top: int = 25) -> str:
    with open(path, "rb") as handle:
        data = handle.read()
    profiler = cProfile.Profile()
    profiler.enable()
    tilebc.load(data, verify=False)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


# ---- reporting -----------------------------------------------------------------------------------

def _ms(seconds: Optional[float]) -> str:
    return "n/a" if seconds is None else f"{seconds * 1e3:.2f}"


def _size(n: int) -> str:
    return f"{n / 1024 / 1024:.2f} MiB" if n >= 1024 * 1024 else f"{n / 1024:.1f} KiB"


HEADERS = ["module", "size", "funcs", "ops", "decode ms", "dec MB/s", "dec kops/s", "strict ms", "verify ms", "encode ms",
           "enc MB/s", "enc kops/s", "tileirdisasm ms", "decode/disasm"]


def table_rows(rows: List[Row]) -> List[List[str]]:
    out = []
    for r in rows:
        mb = r.size / 1e6
        out.append([r.label, _size(r.size), str(r.functions), str(r.ops), _ms(r.decode_s),
                    f"{mb / r.decode_s:.2f}", f"{r.ops / r.decode_s / 1e3:.1f}", _ms(r.strict_s),
                    _ms(r.verify_s), _ms(r.encode_s),
                    f"{mb / r.encode_s:.2f}", f"{r.ops / r.encode_s / 1e3:.1f}", _ms(r.disasm_s),
                    "n/a" if r.ratio is None else f"{r.ratio:.2f}x"])
    return out


def text_table(rows: List[List[str]]) -> str:
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(HEADERS)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(HEADERS, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in rows]
    return "\n".join(lines)


def markdown_table(rows: List[List[str]]) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "|".join("---:" for _ in HEADERS) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def disasm_version(disasm: Optional[str]) -> str:
    if disasm is None:
        return "not found"
    result = subprocess.run([disasm, "--version"], capture_output=True, text=True)
    text = " ".join((result.stdout + result.stderr).split())
    match = re.search(r"release [\d.]+, V[\w.\-]+", text)
    return match.group(0) if match else text[:80]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--record", action="store_true", help=f"also write {RESULTS}")
    parser.add_argument("--repeat", type=int, default=5, help="best of N for small/100k (default 5)")
    parser.add_argument("--repeat-large", type=int, default=3, help="best of N for 1m (default 3)")
    parser.add_argument("--version", help="fixture bytecode version (default: newest complete one)")
    parser.add_argument("--profile", action="store_true",
                        help="cProfile tilebc.load of the 1 MiB module, top 25 by tottime")
    parser.add_argument("--keep", metavar="DIR", help="keep the generated .tilebc files in DIR")
    args = parser.parse_args(argv)
    if args.repeat < 3 or args.repeat_large < 1:
        parser.error("--repeat must be >= 3 and --repeat-large >= 1")

    disasm = find_disasm()
    workdir = args.keep or tempfile.mkdtemp(prefix="tilebc-bench-")
    os.makedirs(workdir, exist_ok=True)
    try:
        version, small, pool, template, skipped = select_inputs(disasm, args.version)
        print(f"fixtures: version {version}, {len(pool)} usable"
              + (f", skipped {len(skipped)}: {'; '.join(skipped)}" if skipped else ""))
        print(f"tileirdisasm: {disasm or 'NOT FOUND (disassembler columns will be n/a)'}")

        inputs = [("small", small, args.repeat)]
        for label, target, repeat in (("100k", MEDIUM_TARGET, args.repeat),
                                      ("1m", LARGE_TARGET, args.repeat_large)):
            data, copies = build_replicated(pool, template, target)
            path = os.path.join(workdir, f"replicated-{label}-{version}.tilebc")
            with open(path, "wb") as handle:
                handle.write(data)
            if disasm is not None:
                ok, err = disasm_ok(disasm, path)
                if not ok:
                    print(f"tileirdisasm rejects the generated {label} module {path}:\n{err}",
                          file=sys.stderr)
                    return 2
            print(f"built {label}: {copies} fixture copies ({copies / len(pool):.2f} passes over "
                  f"{len(pool)} fixtures), {len(data)} bytes"
                  + (", tileirdisasm exit 0" if disasm else ""))
            inputs.append((label, path, repeat))

        rows = []
        for label, path, repeat in inputs:
            rows.append(measure(label, path, repeat, disasm))
        large = rows[-1]
        peak, held = peak_decode_memory(large.path)
        cold = min(cold_decode(large.path) for _ in range(3))

        cells = table_rows(rows)
        print()
        print(f"small = {os.path.relpath(small, REPO)}; best of {args.repeat} "
              f"(1m: best of {args.repeat_large}; tileirdisasm: best of >= 5)")
        print(text_table(cells))
        print()
        memory = (f"decode peak memory (1m, tracemalloc): {peak / 1e6:.1f} MB "
                  f"({peak / large.size:.0f}x the file); Module holds {held / 1e6:.1f} MB")
        print(memory)
        cold_line = (f"first decode in a fresh interpreter (1m, compiles the fast decoders; best of 3): "
                     f"{cold * 1e3:.2f} ms")
        print(cold_line)
        if large.ratio is None:
            verdict = "target (decode 1 MiB faster than tileirdisasm prints it): UNKNOWN (no tileirdisasm)"
        else:
            verdict = (f"target (decode 1 MiB faster than tileirdisasm prints it): "
                       f"{'PASS' if large.ratio < 1 else 'FAIL'} "
                       f"(decode {_ms(large.decode_s)} ms vs tileirdisasm {_ms(large.disasm_s)} ms, "
                       f"{large.ratio:.2f}x)")
        print(verdict)

        if args.record:
            os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
            stamp = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
            lines = [
                "# Codec benchmark",
                "",
                "Generated by `PYTHONPATH=. .venv/bin/python benchmarks/bench_codec.py --record`.",
                "",
                f"- date: {stamp}",
                f"- machine: {os.cpu_count()} CPUs (`nproc`: {len(os.sched_getaffinity(0))}), "
                f"{cpu_model()}, {platform.system()} {platform.release()}; load average at the "
                f"end {' '.join(f'{x:.2f}' for x in os.getloadavg())} (a shared machine)",
                f"- python: {platform.python_implementation()} {platform.python_version()}",
                f"- tilebc: {tilebc.__version__}; tileirdisasm: {disasm_version(disasm)}",
                f"- fixtures: bytecode version {version}, {len(pool)} fixtures; small = "
                f"`{os.path.relpath(small, REPO)}`; 100k/1m = every fixture's entry functions "
                "replicated under fresh names",
                f"- timing: best of {args.repeat} (1m: best of {args.repeat_large}; tileirdisasm "
                "best of >= 5, stdout to /dev/null), time.perf_counter, gc on",
                "",
                markdown_table(cells),
                "",
                f"- {memory}",
                f"- {cold_line}",
                "- decode = `tilebc.load(data, verify=False)` (debug locations decoded on first use); strict = "
                "`tilebc.load(data, lazy_debug=False, verify=False)` (every location decoded at load)",
                f"- {verdict}",
                "",
            ]
            with open(RESULTS, "w") as handle:
                handle.write("\n".join(lines))
            print(f"recorded {os.path.relpath(RESULTS, REPO)}")

        if args.profile:
            print()
            print(profile_decode(large.path))
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
