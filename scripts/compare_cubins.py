"""Our cubin beside tileiras's for one fixture: registers, spills, shared memory, global access
widths and instruction counts, in SASS.

Usage: python scripts/compare_cubins.py NAME_OR_FILE [NAME_OR_FILE ...] [--arch sm_90]
                                       [--markdown FILE] [--jobs N]
Both cubins are disassembled with `cuobjdump -sass` (registers and shared memory from
`cuobjdump -res-usage`); spill bytes come from `ptxas -v` on each side's PTX (tileiras's PTX is
captured with ../shared/tools/tileiras-ptx beside the repository). SASS instructions are counted without the NOP
padding; LDG/STG are grouped by access width (.128, .64, 32 bits or narrower).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "runtime")]
TILEIRAS_PTX = os.environ.get(
    "TILEBC_TILEIRAS_PTX", str(Path(__file__).resolve().parents[2] / "shared" / "tools" / "tileiras-ptx"))


def ptxas_stats(ptx_path: str, arch: str, ptxas: str) -> dict:
    # tileiras targets the arch-specific variant (sm_90a): assemble each file for its own target
    target = re.search(r"^\.target\s+(\w+)", Path(ptx_path).read_text(), re.M)
    arch = target.group(1) if target else arch
    done = subprocess.run([ptxas, "-v", f"-arch={arch}", ptx_path, "-o", os.devnull],
                          capture_output=True, text=True)
    text = done.stdout + done.stderr
    stats = {"registers": None, "spill stores": 0, "spill loads": 0, "smem": 0}
    for key, pattern in (("registers", r"Used (\d+) registers"),
                         ("spill stores", r"(\d+) bytes spill stores"),
                         ("spill loads", r"(\d+) bytes spill loads"),
                         ("smem", r"(\d+) bytes smem")):
        values = [int(v) for v in re.findall(pattern, text)]
        if values:
            stats[key] = max(values)
    if done.returncode:
        stats["error"] = text.strip().splitlines()[-1]
    return stats


def ptx_stats(ptx: str) -> dict:
    body = [line.strip() for line in ptx.splitlines() if line.startswith("\t")
            and not line.strip().startswith((".", "//"))]
    widths = {"v4": 0, "v2": 0, "scalar": 0}
    for line in body:
        if re.search(r"\b(ld|st)\.(?:\w+\.)*global", line):
            kind = "v4" if ".v4." in line else "v2" if ".v2." in line else "scalar"
            widths[kind] += 1
    return {"PTX instructions": len(body), "global ld/st v4": widths["v4"],
            "global ld/st v2": widths["v2"], "global ld/st scalar": widths["scalar"]}


def sass_tool(name: str):
    path = shutil.which(name)
    if path:
        return path
    try:
        from cuda import pathfinder
        return pathfinder.find_nvidia_binary_utility(name)
    except Exception:
        return None


_SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)")


def cuobjdump() -> str:
    path = sass_tool("cuobjdump")
    if path is None:
        from tilebc.oracles import require_tool
        path = str(Path(require_tool("tileiras")).with_name("cuobjdump"))
    return path


def sass_stats(cubin_path: str) -> dict:
    """Figures read off the cubin itself: registers/shared memory per kernel (largest kernel for
    multi-kernel files), SASS instruction count and global load/store widths (summed)."""
    tool = cuobjdump()
    usage = subprocess.run([tool, "-res-usage", cubin_path], capture_output=True, text=True)
    regs = [int(v) for v in re.findall(r"\bREG:(\d+)", usage.stdout)]
    smem = [int(v) for v in re.findall(r"\bSHARED:(\d+)", usage.stdout)]
    sass = subprocess.run([tool, "-sass", cubin_path], capture_output=True, text=True)
    if sass.returncode:
        return {"error": (sass.stderr or sass.stdout).strip()}
    stats = {"registers": max(regs, default=None), "smem": max(smem, default=0),
             "SASS instrs": 0, "LDG/STG 128": 0, "LDG/STG 64": 0, "LDG/STG <=32": 0}
    for opcode in _SASS_LINE.findall(sass.stdout):
        if opcode == "NOP":
            continue
        stats["SASS instrs"] += 1
        if opcode.startswith(("LDG.", "STG.")) or opcode in ("LDG", "STG"):
            parts = opcode.split(".")
            width = "128" if "128" in parts else "64" if "64" in parts else "<=32"
            stats[f"LDG/STG {width}"] += 1
    return stats


def compare(fixture: str, arch: str, version: str) -> tuple:
    """(file name, {"tilebc": stats, "tileiras": stats}) for one fixture or bytecode file."""
    from tilebc.oracles import require_tool
    from tilebc_runtime.compiler import compile

    path = Path(fixture)
    if not path.exists():
        path = ROOT / "fixtures" / "bytecode" / fixture / f"{fixture}-{version}.tilebc"
    tileiras = require_tool("tileiras")
    ptxas = str(Path(tileiras).with_name("ptxas"))
    with tempfile.TemporaryDirectory() as folder:
        ours = compile(path, arch=arch, emit="cubin")
        our_ptx, our_cubin = os.path.join(folder, "ours.ptx"), os.path.join(folder, "ours.cubin")
        Path(our_ptx).write_text(ours.ptx)
        Path(our_cubin).write_bytes(ours.cubin)
        spills = ptxas_stats(our_ptx, arch, ptxas)
        rows = {"tilebc": {**spills, **sass_stats(our_cubin), **ptx_stats(ours.ptx)}}
        rows["tilebc"]["threads/CTA"] = "/".join(
            map(str, sorted({k.threads_per_cta for k in ours.kernels.values()})))
        nv_cubin, nv_ptx = os.path.join(folder, "nv.cubin"), os.path.join(folder, "nv.ptx")
        nv = subprocess.run([tileiras, f"--gpu-name={arch}", str(path), "-o", nv_cubin],
                            capture_output=True)
        if nv.returncode or not os.path.exists(nv_cubin):  # tileiras refuses some kernels per arch
            rows["tileiras"] = {"registers": f"refused (exit {nv.returncode})"}
            return path.name, rows
        # the PTX only for ptxas's spill figures (cuobjdump does not tell spills from stack use)
        env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
        subprocess.run([TILEIRAS_PTX, str(path), f"--gpu-name={arch}", nv_ptx],
                       capture_output=True, env=env)
        rows["tileiras"] = sass_stats(nv_cubin)
        if os.path.exists(nv_ptx):
            nv_text = Path(nv_ptx).read_text()
            spills = ptxas_stats(nv_ptx, arch, ptxas)
            rows["tileiras"] = {**spills, **rows["tileiras"], **ptx_stats(nv_text)}
            found = sorted({int(m) for m in re.findall(r"\.reqntid (\d+)", nv_text)})
            rows["tileiras"]["threads/CTA"] = "/".join(map(str, found)) or "?"
    return path.name, rows


COLUMNS = (("registers", "regs"), ("spill stores", "spill st B"), ("spill loads", "spill ld B"),
           ("smem", "smem B"), ("LDG/STG 128", "LDG/STG .128"), ("LDG/STG 64", "LDG/STG .64"),
           ("LDG/STG <=32", "LDG/STG ≤32b"), ("SASS instrs", "SASS instrs"),
           ("threads/CTA", "threads"))


def ratio(rows) -> str:
    ours, theirs = rows["tilebc"].get("SASS instrs"), rows["tileiras"].get("SASS instrs")
    return f"{ours / theirs:.2f}" if isinstance(ours, int) and theirs else ""


def markdown(results, arch: str) -> str:
    head = ("| fixture | " + " | ".join(f"{label} (ours / tileiras)" for _, label in COLUMNS)
            + " | SASS ratio |")
    lines = [head, "|---|" + "---:|" * (len(COLUMNS) + 1)]
    for name, rows in results:
        cells = [f"{rows['tilebc'].get(key, '')} / {rows['tileiras'].get(key, '')}"
                 for key, _ in COLUMNS]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {ratio(rows)} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fixtures", nargs="+")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--version", default="13.5")
    parser.add_argument("--jobs", type=int, default=1, help="fixtures compared in parallel")
    parser.add_argument("--markdown", help="write a markdown table of all fixtures to this file")
    args = parser.parse_args(argv)
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        results = list(pool.map(lambda f: compare(f, args.arch, args.version), args.fixtures))
    for name, rows in results:
        print(f"{name} on {args.arch}")
        keys = list(dict.fromkeys(list(rows["tilebc"]) + list(rows["tileiras"])))
        print(f"{'':24} {'tilebc':>12} {'tileiras':>12}")
        for key in keys:
            print(f"{key:24} {str(rows['tilebc'].get(key, '')):>12} "
                  f"{str(rows['tileiras'].get(key, '')):>12}")
        if ratio(rows):
            print(f"{'SASS ratio':24} {ratio(rows):>12}")
    if args.markdown:
        Path(args.markdown).write_text(markdown(results, args.arch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
