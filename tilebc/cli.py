"""The `tilebc` command line (compiler-tool conventions: `tilebc CMD INPUT [-o OUTPUT]`)."""
from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
from importlib import resources
from typing import List, Optional

from . import dump, load
from .errors import TilebcError
from .version import ALL_VERSIONS, Version


def _write_atomically(path: str, data: bytes) -> None:
    """Write to a temp file beside `path`, then rename: a failure never leaves a partial file."""
    folder = os.path.dirname(os.path.abspath(path))
    handle, temp = tempfile.mkstemp(dir=folder, prefix=".tilebc-", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


def _read_input(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    with open(path, "rb") as stream:
        return stream.read()


def cmd_info(args) -> int:
    module = load(args.input)
    print(f"{args.input}: Tile IR bytecode {module.version}"
          + (" (public preview)" if module.preview else ""))
    if module.producer:
        print(f"producer: {module.producer}")
    for item in module.globals:
        print(f"global @{item.name}: {item.type}")
    for function in module.functions:
        ops = list(function.walk())
        print(f"entry @{function.name}")
        print(f"  signature: {function.type}")
        print(f"  ops: {len(ops)}")
    return 0


def cmd_convert(args) -> int:
    module = load(args.input)
    data = dump(module, args.to or module.version)
    _write_atomically(args.output, data)
    print(f"wrote {args.output}: {len(data)} bytes, version {args.to or module.version}")
    return 0


def cmd_demo(args) -> int:
    """Main job: everything that exists so far, on an embedded default kernel (or a given file)."""
    from . import oracles
    if args.input:
        name, data = args.input, _read_input(args.input)
    else:
        name = "embedded demo kernel (cuTile elementwise_f32, 13.3)"
        data = resources.files("tilebc").joinpath("data/demo.tilebc").read_bytes()
    print(f"== read {name}: {len(data)} bytes")
    module = load(data)
    print(f"   version {module.version}, {len(module.functions)} entr"
          f"{'y' if len(module.functions) == 1 else 'ies'}, {len(module.globals)} globals")
    for function in module.functions:
        histogram = collections.Counter(op.name for op in function.walk())
        print(f"   entry @{function.name}")
        print(f"     signature {function.type}")
        print(f"     {sum(histogram.values())} ops: "
              + ", ".join(f"{op} x{count}" for op, count in histogram.most_common(8)) + ", …")
    disasm = oracles.tool_path("tileirdisasm")
    reference = oracles.tileirdisasm(data).stdout if disasm else None
    print("== re-encode for every version" + ("" if disasm else
          " (tileirdisasm not installed: NVIDIA checks skipped)"))
    failures = 0
    for version in ALL_VERSIONS:
        try:
            encoded = dump(module, version)
        except TilebcError as error:
            print(f"   {version}: refused: {error.message}")
            continue
        again = dump(load(encoded), version)
        status = f"{len(encoded)} bytes, deterministic={again == encoded}"
        if disasm:
            listing = oracles.tileirdisasm(encoded)
            same = listing.ok and (oracles.without_hint_keys(listing.stdout)
                                   == oracles.without_hint_keys(reference))
            status += f", tileirdisasm {'accepts, same text' if same else 'DIFFERS'}"
            failures += not same
        print(f"   {version}: {status}")
    if oracles.tool_path("tileiras"):
        compiled = oracles.tileiras(dump(module), "sm_90")
        print(f"== tileiras --gpu-name=sm_90 on our bytes: {'ok' if compiled.ok else 'FAILED'}")
        failures += not compiled.ok
    print("== not yet available: verify, dis/asm, CPU interpreter, JIT to PTX/cubin, GPU launch "
          "(see the open issues)")
    return 1 if failures else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tilebc", description="CUDA Tile IR bytecode toolchain")
    commands = parser.add_subparsers(dest="command", required=True)

    info = commands.add_parser("info", help="show version, globals, entries and signatures")
    info.add_argument("input")
    info.set_defaults(run=cmd_info)

    convert = commands.add_parser("convert", help="re-encode bytecode for another version")
    convert.add_argument("input")
    convert.add_argument("-o", "--output", required=True)
    convert.add_argument("--to", type=Version.parse, choices=ALL_VERSIONS, metavar="VERSION",
                         help="target version, 13.1-13.5 (default: the input's)")
    convert.set_defaults(run=cmd_convert)

    demo = commands.add_parser("demo", help="run the end-to-end demo on the embedded kernel")
    demo.add_argument("input", nargs="?")
    demo.set_defaults(run=cmd_demo)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except TilebcError as error:
        print(f"tilebc: error: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"tilebc: error: {error.filename or ''}: {error.strerror}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
