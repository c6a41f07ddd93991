"""`tilebc compile FILE [--entry NAME] --arch sm_90 --emit ptx|cubin [-o OUT]`.

`add_compile_parser(subparsers)` adds the sub-command to tilebc's CLI (wired in tilebc/cli.py)."""
from __future__ import annotations

import argparse
import sys


def add_compile_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "compile", help="compile Tile IR bytecode to PTX or a cubin (JIT through nvJitLink)")
    parser.add_argument("file", help="Tile IR bytecode file")
    parser.add_argument("--entry", help="kernel to compile (default: every entry)")
    parser.add_argument("--arch", default="sm_90", help="GPU architecture, sm_80 .. sm_120")
    parser.add_argument("--emit", choices=("ptx", "cubin"), default="cubin")
    parser.add_argument("--threads", type=int, help="threads per CTA (default: chosen per kernel)")
    parser.add_argument("-o", "--output", help="output file (default: FILE with .ptx/.cubin)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print per-kernel facts and nvJitLink's info log")
    parser.set_defaults(handler=run_compile)
    return parser


def run_compile(args) -> int:
    from tilebc.errors import TilebcError
    from .compiler import compile
    try:
        result = compile(args.file, args.entry, args.arch, args.emit, threads=args.threads,
                         verbose=args.verbose)
    except TilebcError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    output = args.output or args.file.rsplit(".", 1)[0] + "." + args.emit
    data = result.ptx.encode() if args.emit == "ptx" else result.cubin
    with open(output, "wb") as handle:
        handle.write(data)
    if args.verbose:
        for info in result.kernels.values():
            print(f"{info.name}: {info.threads_per_cta} threads/CTA, "
                  f"{info.shared_memory_bytes} B shared, {info.local_memory_bytes} B local")
        if result.log:
            print(result.log)
    print(output)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="tilebc")
    add_compile_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
