"""Our cubin beside tileiras's for one fixture: registers, spills, shared memory, global access
widths and instruction counts.

Usage: python scripts/compare_cubins.py NAME_OR_FILE [NAME_OR_FILE ...] [--arch sm_90]
                                       [--markdown FILE]
Registers/spills/smem come from `ptxas -v` on each side's PTX (tileiras's PTX is captured with
/work/shared/tools/tileiras-ptx). SASS instruction counts need cuobjdump or nvdisasm; the
nvidia-cuda-tileiras / nvcc wheels do not ship them, so without them PTX instruction counts are shown.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "runtime")]
TILEIRAS_PTX = os.environ.get("TILEBC_TILEIRAS_PTX", "/work/shared/tools/tileiras-ptx")


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


def sass_tool():
    for name in ("cuobjdump", "nvdisasm"):
        path = shutil.which(name)
        if path:
            return path
        try:
            from cuda import pathfinder
            path = pathfinder.find_nvidia_binary_utility(name)
            if path:
                return path
        except Exception:
            pass
    return None


def compare(fixture: str, arch: str, version: str) -> tuple:
    """(file name, {"tilebc": stats, "tileiras": stats}) for one fixture or bytecode file."""
    from tilebc.oracles import require_tool
    from tilebc_runtime.compiler import compile

    path = Path(fixture)
    if not path.exists():
        path = ROOT / "fixtures" / "bytecode" / fixture / f"{fixture}-{version}.tilebc"
    ptxas = str(Path(require_tool("tileiras")).with_name("ptxas"))
    with tempfile.TemporaryDirectory() as folder:
        ours = compile(path, arch=arch, emit="cubin")
        our_ptx = os.path.join(folder, "ours.ptx")
        Path(our_ptx).write_text(ours.ptx)
        nv_ptx = os.path.join(folder, "tileiras.ptx")
        env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
        nv = subprocess.run([TILEIRAS_PTX, str(path), f"--gpu-name={arch}", nv_ptx],
                            capture_output=True, env=env)
        rows = {"tilebc": {**ptxas_stats(our_ptx, arch, ptxas), **ptx_stats(ours.ptx)}}
        if nv.returncode or not os.path.exists(nv_ptx):  # tileiras refuses some kernels per arch
            rows["tileiras"] = {"registers": f"refused (exit {nv.returncode})"}
            rows["tilebc"]["threads/CTA"] = "/".join(
                map(str, sorted({k.threads_per_cta for k in ours.kernels.values()})))
            return path.name, rows
        rows["tileiras"] = {**ptxas_stats(nv_ptx, arch, ptxas), **ptx_stats(Path(nv_ptx).read_text())}
        threads = sorted({k.threads_per_cta for k in ours.kernels.values()})
        rows["tilebc"]["threads/CTA"] = "/".join(map(str, threads))
        nv_text = Path(nv_ptx).read_text()
        found = sorted({int(m) for m in re.findall(r"\.reqntid (\d+)", nv_text)})
        rows["tileiras"]["threads/CTA"] = "/".join(map(str, found)) or "?"
    return path.name, rows


COLUMNS = (("registers", "regs"), ("spill stores", "spill st B"), ("spill loads", "spill ld B"),
           ("smem", "smem B"), ("global ld/st v4", "ld/st v4"), ("global ld/st v2", "ld/st v2"),
           ("global ld/st scalar", "ld/st scalar"), ("PTX instructions", "PTX instrs"),
           ("threads/CTA", "threads"))


def markdown(results, arch: str) -> str:
    head = "| fixture | " + " | ".join(f"{label} (ours / tileiras)" for _, label in COLUMNS) + " |"
    lines = [head, "|---|" + "---:|" * len(COLUMNS)]
    for name, rows in results:
        cells = [f"{rows['tilebc'].get(key, '')} / {rows['tileiras'].get(key, '')}"
                 for key, _ in COLUMNS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fixtures", nargs="+")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--version", default="13.5")
    parser.add_argument("--markdown", help="write a markdown table of all fixtures to this file")
    args = parser.parse_args(argv)
    results = []
    for fixture in args.fixtures:
        name, rows = compare(fixture, args.arch, args.version)
        results.append((name, rows))
        print(f"{name} on {args.arch}")
        keys = list(dict.fromkeys(list(rows["tilebc"]) + list(rows["tileiras"])))
        print(f"{'':24} {'tilebc':>12} {'tileiras':>12}")
        for key in keys:
            print(f"{key:24} {str(rows['tilebc'].get(key, '')):>12} "
                  f"{str(rows['tileiras'].get(key, '')):>12}")
    if sass_tool() is None:
        print("SASS instruction counts: cuobjdump/nvdisasm not installed (not in the nvidia wheels "
              "here); PTX instruction counts shown instead")
    if args.markdown:
        Path(args.markdown).write_text(markdown(results, args.arch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
