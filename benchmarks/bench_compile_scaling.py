"""Compile time and PTX size against tile size and op count: one element-wise kernel (load, a chain
of f32 addf/mulf, store) swept over tile sizes and op counts, ours beside tileiras on the same bytecode.

Usage: python benchmarks/bench_compile_scaling.py [--arch sm_90] [--sizes 1K,4K,...] [--ops 1,4,16]
                                                  [--ops-size 16K] [--timeout S] [--link]
                                                  [--unbounded] [--markdown FILE [--append]]

Cases: every size in --sizes with 4 ops, then every op count in --ops at --ops-size. For each case
our compile to PTX runs in a forked child of this process (imports already paid, as in a warm
process) and tileiras in a fresh process, alternating; each has --timeout seconds, after which the
case is reported as "> S s" and the benchmark goes on. --link also times nvJitLink (PTX -> cubin)
on our PTX, under the same timeout. Tiles over 32 elements per thread are lowered as one loop over
register chunks (runtime/tilebc_runtime/lowering/chunks.py), so this kernel's PTX does not grow
with the tile. --unbounded lifts the JIT's code-size bound (compiler.py refuses kernels that are
not chunked over 256 elements per thread or ~64K estimated instructions) to measure what the
lowering itself does with such kernels; without it they show the refusal.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "runtime")]

DEFAULT_SIZES = "1K,4K,16K,64K,256K,1M"
DEFAULT_OPS = "1,4,16"


def parse_size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
    return int(text.rstrip("KM")) * scale


def size_name(elements: int) -> str:
    if elements >= 1 << 20 and elements % (1 << 20) == 0:
        return f"{elements >> 20}M"
    if elements >= 1 << 10 and elements % (1 << 10) == 0:
        return f"{elements >> 10}K"
    return str(elements)


def elementwise_kernel(elements: int, ops: int) -> bytes:
    """Bytecode of elementwise_module(elements, ops)."""
    import tilebc
    return tilebc.dump(elementwise_module(elements, ops))


def elementwise_module(elements: int, ops: int):
    """`ew(x: ptr<f32>, n: i32)`: one tile of `elements` f32 per block is loaded, put through
    `ops` float ops (y = y + x, y = y * x, alternating, starting from y = x) and stored back in
    place over a view of dynamic length."""
    import tilebc
    from tilebc.ir.builder import module_entry, new_module
    from tilebc.ir.types import PointerType, f32, i32, scalar

    module = new_module(tilebc.Version(13, 5))
    b = module_entry(module, "ew", [scalar(PointerType(f32)), scalar(i32)])
    x_ptr, size = b.args
    token = b.make_token()
    tiles = b.partition_view(b.tensor_view(x_ptr, shape=[size], strides=[1]), (elements,))
    block, _, _ = b.get_tile_block_id()
    x, _ = b.load(tiles, [block], token=token)
    y = x
    for index in range(ops):
        y = b.addf(y, x) if index % 2 == 0 else b.mulf(y, x)
    b.store(y, tiles, [block], token=token)
    b.return_()
    return module


def _ours_child(conn, data: bytes, arch: str, link: bool, unbounded: bool) -> None:
    """In the forked child: lower to PTX (send the time and size), then optionally link."""
    from tilebc_runtime import compiler
    if unbounded:
        compiler.MAX_ELEMENTS_PER_THREAD = 1 << 30
        compiler.MAX_ESTIMATED_INSTRUCTIONS = 1 << 62
    try:
        mark = time.perf_counter()
        result = compiler.compile(data, arch=arch, emit="ptx")
        seconds = time.perf_counter() - mark
        conn.send(("ptx", seconds, len(result.ptx.encode()), result.ptx.count("\n"),
                   result.threads_per_cta))
    except Exception as exc:  # a refusal is a result: report it
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    if link:
        try:
            mark = time.perf_counter()
            compiler.link_ptx(result.ptx, int(arch.split("_")[1]))
            conn.send(("link", time.perf_counter() - mark))
        except Exception as exc:
            conn.send(("link-error", f"{type(exc).__name__}: {exc}"))


def run_ours(data: bytes, arch: str, timeout: float, link: bool, unbounded: bool) -> dict:
    """Our compile in a forked child with a deadline; the child is killed when it runs over."""
    context = multiprocessing.get_context("fork")
    parent, child = context.Pipe(duplex=False)
    process = context.Process(target=_ours_child, args=(child, data, arch, link, unbounded))
    started = time.perf_counter()
    process.start()
    child.close()
    out = {}
    deadline = started + timeout
    while True:
        left = deadline - time.perf_counter()
        if left <= 0 or not parent.poll(left):
            break
        try:
            message = parent.recv()
        except EOFError:
            break
        kind = message[0]
        if kind == "ptx":
            out.update(ptx_s=message[1], ptx_bytes=message[2], ptx_lines=message[3],
                       threads=message[4])
            if not link:
                break
            deadline = time.perf_counter() + timeout  # the link gets its own deadline
        elif kind == "link":
            out["link_s"] = message[1]
            break
        elif kind == "link-error":
            out["link_error"] = message[1]
            break
        else:
            out["error"] = message[1]
            break
    if process.is_alive():
        process.kill()
    process.join()
    if "ptx_s" not in out and "error" not in out:
        out["ptx_timeout"] = True
    elif link and "ptx_s" in out and "link_s" not in out and "link_error" not in out:
        out["link_timeout"] = True
    return out


def run_tileiras(data: bytes, arch: str, timeout: float) -> dict:
    from tilebc import oracles
    tool = oracles.require_tool("tileiras")
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "in.tilebc"
        source.write_bytes(data)
        mark = time.perf_counter()
        try:
            done = subprocess.run([tool, f"--gpu-name={arch}", "-o", str(Path(scratch) / "out.cubin"),
                                   str(source)], capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"timeout": True}
        seconds = time.perf_counter() - mark
        if done.returncode:
            return {"s": seconds, "error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
        return {"s": seconds, "cubin_bytes": (Path(scratch) / "out.cubin").stat().st_size}


def fmt_seconds(value, timeout, timed_out) -> str:
    if timed_out:
        return f"> {timeout:g} s"
    if value is None:
        return "—"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--sizes", default=DEFAULT_SIZES)
    parser.add_argument("--ops", default=DEFAULT_OPS)
    parser.add_argument("--ops-size", default="16K")
    parser.add_argument("--size-ops", type=int, default=4, help="op count of the size sweep")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--link", action="store_true", help="also time nvJitLink on our PTX")
    parser.add_argument("--unbounded", action="store_true",
                        help="lift the JIT's code-size bound (measure the lowering itself)")
    parser.add_argument("--no-tileiras", action="store_true")
    parser.add_argument("--markdown")
    parser.add_argument("--append", action="store_true",
                        help="add this run's table to the end of --markdown instead of replacing it")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    import tilebc  # noqa: F401  (paid once, here, not in the cases)
    from tilebc_runtime import compiler
    import_seconds = time.perf_counter() - start
    # warm the lowering's lazily loaded op families in this process, so each forked case starts warm
    compiler.compile(elementwise_kernel(128, 1), arch=args.arch, emit="ptx")

    cases = [(parse_size(s), args.size_ops) for s in args.sizes.split(",") if s]
    cases += [(parse_size(args.ops_size), int(n)) for n in args.ops.split(",") if n]
    seen, unique = set(), []
    for case in cases:
        if case not in seen:
            seen.add(case)
            unique.append(case)

    print(f"import: {import_seconds * 1000:.0f} ms; arch {args.arch}; timeout {args.timeout:g} s per "
          f"case{'; code-size bound lifted' if args.unbounded else ''}")
    header = (f"{'elements':>9} {'ops':>4} {'thr':>4} {'ours ptx':>10} {'PTX bytes':>11} "
              f"{'PTX lines':>10} {'link':>10} {'tileiras':>10}  note")
    print(header)
    rows = []
    for elements, ops in unique:
        data = elementwise_kernel(elements, ops)
        ours = run_ours(data, args.arch, args.timeout, args.link, args.unbounded)
        theirs = {} if args.no_tileiras else run_tileiras(data, args.arch, args.timeout)
        note = ours.get("error") or ours.get("link_error") or ""
        if theirs.get("error"):
            note = (note + "; " if note else "") + "tileiras: " + " ".join(theirs["error"])
        row = dict(elements=elements, ops=ops, ours=ours, theirs=theirs, note=note)
        rows.append(row)
        print(f"{size_name(elements):>9} {ops:>4} {ours.get('threads', ''):>4} "
              f"{fmt_seconds(ours.get('ptx_s'), args.timeout, ours.get('ptx_timeout')):>10} "
              f"{ours.get('ptx_bytes', '—'):>11} {ours.get('ptx_lines', '—'):>10} "
              f"{fmt_seconds(ours.get('link_s'), args.timeout, ours.get('link_timeout')):>10} "
              f"{fmt_seconds(theirs.get('s'), args.timeout, theirs.get('timeout')):>10}  "
              f"{note[:160]}", flush=True)
    if args.markdown:
        write_markdown(Path(args.markdown), rows, args, import_seconds, argv)
    return 0


def write_markdown(path: Path, rows, args, import_seconds, argv) -> None:
    command = shlex.join(["python", "benchmarks/bench_compile_scaling.py",
                          *(argv if argv is not None else sys.argv[1:])])
    title = "Code-size bound lifted (`--unbounded`)" if args.unbounded else "As shipped"
    lines = [f"## {title}", "",
             f"`{command}` — {time.strftime('%Y-%m-%d', time.gmtime())}, one run per case, "
             f"timeout {args.timeout:g} s per case. Kernel: load one f32 tile, a chain of `ops` "
             "addf/mulf, store. Ours = bytecode -> PTX in a forked warm process (import "
             f"{import_seconds * 1000:.0f} ms paid once, not counted)"
             + ("; link = nvJitLink PTX -> cubin" if args.link else "")
             + "; tileiras = a fresh `tileiras` process to a cubin.", "",
             "| elements | ops | threads | ours to PTX | PTX bytes | PTX lines | "
             + ("link | " if args.link else "") + "tileiras | note |",
             "|---:|---:|---:|---:|---:|---:|" + ("---:|" if args.link else "") + "---:|---|"]
    for row in rows:
        ours, theirs = row["ours"], row["theirs"]
        cells = [size_name(row["elements"]), str(row["ops"]), str(ours.get("threads", "")),
                 fmt_seconds(ours.get("ptx_s"), args.timeout, ours.get("ptx_timeout")),
                 f"{ours['ptx_bytes']:,}" if "ptx_bytes" in ours else "—",
                 f"{ours['ptx_lines']:,}" if "ptx_lines" in ours else "—"]
        if args.link:
            cells.append(fmt_seconds(ours.get("link_s"), args.timeout, ours.get("link_timeout")))
        cells.append("not run" if args.no_tileiras else
                     fmt_seconds(theirs.get("s"), args.timeout, theirs.get("timeout")))
        cells.append(row["note"].replace("|", "\\|"))
        lines.append("| " + " | ".join(cells) + " |")
    if args.append and path.exists():
        path.write_text(path.read_text().rstrip("\n") + "\n\n" + "\n".join(lines) + "\n")
    else:
        heading = f"# Compile time and PTX size against tile size and op count ({args.arch})"
        path.write_text(heading + "\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
