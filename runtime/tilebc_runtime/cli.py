"""`tilebc compile FILE [--entry NAME] --arch sm_90 --emit ptx|cubin [-o OUT]`, and
`tilebc compile FILE --arch sm_80,sm_90 --fatbin -o kernels.fatbin` (AOT, see aot.py).

A cubin for one entry goes through the cubin cache (runtime/CACHE.md), so the C++ loader, which
runs `tilebc compile FILE --entry NAME --arch sm_XY --emit cubin -o OUT` on a miss, finds it
there afterwards; the entry's metadata is also written to OUT.json.

`add_compile_parser(subparsers)` adds the sub-command to tilebc's CLI; runtime/pyproject.toml
registers it in the `tilebc.commands` entry-point group, which tilebc/cli.py reads."""
from __future__ import annotations

import argparse
import json
import os
import sys

from tilebc.errors import UsageError


def add_compile_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "compile", help="compile Tile IR bytecode to PTX, a cubin, or an AOT fatbin",
        description="Compile Tile IR bytecode. A cubin for one entry is also stored in the "
        "cubin cache (TILEBC_CACHE_DIR) and described in OUT.json.")
    parser.add_argument("file", help="Tile IR bytecode file (- for stdin, then -o is needed)")
    parser.add_argument("--entry", help="kernel to compile (default: every entry)")
    parser.add_argument("--arch", default="sm_90",
                        help="GPU architecture, sm_80 .. sm_121; with --fatbin a comma-separated "
                             "list, e.g. sm_80,sm_90")
    parser.add_argument("--emit", choices=("ptx", "cubin"), default="cubin")
    parser.add_argument("--fatbin", action="store_true",
                        help="write a fatbin: a cubin per --arch plus PTX for the newest, and "
                             "OUT.json with the entries and launch facts")
    parser.add_argument("--no-ptx", action="store_true", help="with --fatbin: leave out the PTX")
    parser.add_argument("--backend", choices=("jit", "tileiras"), default="jit",
                        help="cubin compiler: tilebc's JIT (default) or NVIDIA's tileiras")
    parser.add_argument("--threads", type=_positive_int,
                        help="threads per CTA (JIT; default: per kernel)")
    parser.add_argument("--wgmma", action=argparse.BooleanOptionalAction, default=None,
                        help="JIT, sm_90: run f16/bf16 products that fit a warpgroup on "
                             "wgmma.mma_async everywhere (--wgmma) or nowhere (--no-wgmma); "
                             "default: where the performance model estimates it faster "
                             "than mma.sync (--emit ptx -v prints the estimates)")
    parser.add_argument("--tma", action=argparse.BooleanOptionalAction, default=None,
                        help="JIT, sm_90: fill wgmma K-loop stages with TMA where the views "
                             "allow (default; the kernel then takes tensor maps its launcher "
                             "builds) or never (--no-tma)")
    parser.add_argument("-o", "--output",
                        help="output file (default: FILE with .ptx/.cubin/.fatbin)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print per-kernel facts and nvJitLink's info log")
    parser.set_defaults(handler=run_compile)
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _options(args) -> dict:
    options = {}
    if args.threads is not None:
        options["threads"] = args.threads
    if args.wgmma is not None:
        options["wgmma"] = args.wgmma
    if args.tma is not None:
        options["tma"] = args.tma
    if options and args.backend != "jit":
        raise UsageError(f"--{next(iter(options))} applies to the JIT backend only")
    return options


def run_compile(args) -> int:
    from tilebc.errors import TilebcError
    name = args.display_name = "<stdin>" if args.file == "-" else args.file
    try:
        if args.file == "-" and args.output is None:
            raise UsageError("with the input on stdin, name the output file with -o")
        if args.output == "-" and (args.fatbin or args.emit == "cubin"):
            raise UsageError("-o -: a cubin or fatbin is written with its metadata OUT.json "
                             "beside it; name an output file (only --emit ptx can go to stdout)")
        _default_output(args, ".fatbin" if args.fatbin else f".{args.emit}")  # refuse early
        from tilebc.inputs import decode_bytes, read_input
        data = args.data = read_input(args.file)
        if not args.fatbin and args.emit == "cubin" and args.backend == "jit" and \
                "," not in args.arch and _run_cached(args):
            return 0
        if args.backend == "jit" and (args.fatbin or args.emit == "cubin"):
            from .targets import start_loading_nvjitlink
            start_loading_nvjitlink()  # while the bytes decode and lower
        # Decoded once up front so bad input reads as it does in every tilebc command.
        args.decoded = decode_bytes(data, name)
        if args.file == "-":
            args.file = data  # the loaders take bytes as well as paths
        if args.fatbin:
            return _run_fatbin(args)
        if "," in args.arch:
            raise UsageError("several architectures need --fatbin (one cubin or PTX per arch)")
        if args.emit == "ptx":
            return _run_ptx(args)
        return _run_cubin(args)
    except UsageError as error:  # a bad combination of options, before TilebcError
        print(f"tilebc compile: error: {error}", file=sys.stderr)
        return 2
    except TilebcError as error:
        if error.offset is not None or error.line is not None:
            error.file = error.file or name  # bytes carry no name of their own
        print(f"tilebc compile: error: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"tilebc compile: error: {error.filename or name}: {error.strerror}",
              file=sys.stderr)
        return 1


def _default_output(args, suffix: str) -> str:
    """-o, else FILE with its suffix replaced (`proj.v2/kernel` -> `proj.v2/kernel.cubin`);
    never the input file itself."""
    if args.output:
        return args.output
    from tilebc.outputs import same_file
    output = os.path.splitext(args.file)[0] + suffix
    if output == args.file or same_file(output, args.file):
        raise UsageError(f"the default output {output} is the input file; name the output "
                         "with -o")
    return output


def _write(path: str, data, binary: bool = True) -> None:
    from tilebc.outputs import write_output
    write_output(path, data, binary=binary)


def _run_ptx(args) -> int:
    if args.backend != "jit":
        raise UsageError("--emit ptx needs the JIT backend (tileiras does not expose its PTX)")
    from . import launch
    launch.prime_from_memo(launch.default_cache())  # nvJitLink's version without loading it
    from .compiler import compile
    result = compile(args.file, args.entry, args.arch, "ptx", threads=args.threads,
                     verbose=args.verbose, wgmma=args.wgmma, tma=args.tma)
    output = _default_output(args, ".ptx")
    _report(args, result.kernels.values(), result.log)
    _write(output, result.ptx, binary=False)
    if output != "-":
        print(output)
    return 0


def _run_cached(args) -> bool:
    """Write the cubin of a one-entry JIT compile straight from the cubin cache, if it is there,
    without decoding the bytes or loading the lowering or nvJitLink (the key hashes the bytes,
    so a hit is bytes that decoded, verified and compiled before). False: compile as usual."""
    from . import launch
    # First: where the cache lacks nvJitLink's version, the library starts opening now
    backend, cache = launch.JitBackend(), launch.default_cache()
    primed = backend.prime(cache, compute=False)
    from tilebc.binary.container import entry_hint
    entry = args.entry
    if entry is None:
        hint = entry_hint(args.data)
        if hint is None or hint[0] != 1:
            return False  # several entries go into one cubin without the cache
        entry = hint[1]
    if not primed:
        return False  # a cache new to this toolchain: nothing of it to look up
    output = _default_output(args, ".cubin")
    found = launch.cached_entry(backend, cache, args.data, entry, args.arch, _options(args))
    if found is None:
        return False
    _write_entry(args, output, entry, found)
    return True


def _write_entry(args, output: str, entry: str, found) -> None:
    _write(output, found.cubin)
    if args.verbose:
        print(f"{entry}: {found.threads} threads/CTA, {found.static_shared_bytes} B shared; "
              f"cache key {found.key}")
    _write(f"{output}.json", json.dumps(dict(found.metadata), sort_keys=True, indent=1) + "\n",
           binary=False)
    print(output)


def _run_cubin(args) -> int:
    from . import launch
    options = _options(args)
    entries = [function.name for function in args.decoded.functions]
    names = [args.entry] if args.entry else entries
    if args.entry and args.entry not in entries:
        from tilebc.errors import TilebcError
        raise TilebcError(f"no entry named {args.entry!r} (entries: "
                          f"{', '.join(entries) or 'none'})", file=args.display_name)
    output = _default_output(args, ".cubin")
    if len(names) == 1:
        # Through the cache: a later lookup by the Python runtime or the C++ loader hits.
        if args.backend == "jit":
            # The key needs only the bytes, so a hit neither verifies nor loads the lowering:
            # the JIT verifies on a miss, and the key's toolchain identity covers the verifier.
            backend = launch.JitBackend(decoded=(args.data, args.decoded))
            entry = launch.compile_entry(backend, launch.default_cache(), args.data,
                                         args.display_name, names[0], args.arch, options)
        else:
            loaded = launch.load(args.file, backend=args.backend, options=options)
            entry = loaded[names[0]].compile(args.arch)
        _write_entry(args, output, names[0], entry)
        return 0
    else:
        # Several entries in one cubin: compiled directly (the cache holds one entry per key).
        from .aot import compile_cubin
        loaded = launch.load(args.file, backend=args.backend, options=options)
        cubin, facts = compile_cubin(loaded.backend, loaded.bytecode, names, None, args.arch,
                                      options)
        _write(output, cubin)
        metadata = {"backend": loaded.backend.name, "arch": args.arch, "entries": facts}
        if args.verbose:
            for name, item in facts.items():
                print(f"{name}: {item['threads_per_cta']} threads/CTA")
    _write(f"{output}.json", json.dumps(metadata, sort_keys=True, indent=1) + "\n", binary=False)
    print(output)
    return 0


def _run_fatbin(args) -> int:
    from .aot import write_fatbin
    if args.emit == "ptx":
        raise UsageError("--fatbin holds cubins (and PTX); drop --emit ptx")
    output = _default_output(args, ".fatbin")
    result = write_fatbin(args.file, args.arch, output, backend=args.backend, entry=args.entry,
                          options=_options(args), ptx=not args.no_ptx)
    for note in result.notes:
        print(f"tilebc compile: note: {note}", file=sys.stderr)
    meta = result.metadata
    ptx = meta["ptx"]
    print(f"{output}: {len(result.fatbin)} bytes ({result.packer}); cubins "
          + ", ".join(f"{arch} {size} B" for arch, size in result.cubin_sizes.items())
          + (f"; PTX {ptx['arch']} {result.ptx_size} B" if ptx else "; no PTX")
          + f"; {len(meta['entries'])} entr{'y' if len(meta['entries']) == 1 else 'ies'}; "
          f"metadata {output}.json")
    return 0


def _report(args, kernels, log: str) -> None:
    if not args.verbose:
        return
    stream = sys.stderr if args.output == "-" else sys.stdout  # stdout carries the PTX
    for info in kernels:
        print(f"{info.name}: {info.threads_per_cta} threads/CTA, "
              f"{info.shared_memory_bytes} B shared, {info.local_memory_bytes} B local",
              file=stream)
    if log:
        print(log, file=stream)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="tilebc")
    add_compile_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("tilebc compile: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    code = main()
    from tilebc.outputs import end_process, may_end_hard
    if may_end_hard():
        end_process(code)  # the compile is done: skip the interpreter's teardown (~5 ms)
    sys.exit(code)
