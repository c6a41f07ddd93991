"""The `tilebc` command line (compiler-tool conventions: `tilebc CMD INPUT [-o OUTPUT]`)."""
from __future__ import annotations

import argparse
import collections
import gc
import io
import os
import sys

from .errors import Location, TextSyntaxError, TilebcError, UsageError, VersionError
from .inputs import MAGIC, decode_bytes, display_name, looks_like_text, read_input, verify_module
from .outputs import end_process, may_end_hard, same_file, write_output
from .version import ALL_VERSIONS, Version


def load(source):
    # The reader loads on first use: a plugin's command (`compile` served from the cubin cache)
    # may need none of it.
    from .api import load as decode
    return decode(source)


def dump(module, version=None) -> bytes:
    # The writer loads only for commands that encode: `dis`, `verify` and `info` start faster.
    from .binary.writer import dump as encode
    return encode(module, version)


# The input helpers live in tilebc.inputs (below every command line); these names stay for callers.
_display_name = display_name
_looks_like_text = looks_like_text
_verify = verify_module


def _read(path: str) -> bytes:
    """A command's input (read_input) in the one-shot commands. One of
    codecache.LARGE_INPUT_BYTES or more builds a module of tens of MiB at once (the process keeps
    it to the end): the allocator's arenas are populated as they are mapped (tilebc/_speedups.c
    populate_arenas), a third cheaper than faulting them in a page at a time. Below it, a
    command's few new arenas would be populated whole for a few objects each."""
    from .codecache import LARGE_INPUT_BYTES  # loaded by the reader and printer anyway
    data = read_input(path)
    if _held is not None and len(data) >= LARGE_INPUT_BYTES:
        from .speedups import populate_arenas
        if populate_arenas is not None:
            populate_arenas()
    return data


def _decode(path: str, verify: bool = True, strict: bool = False):
    """Read bytecode from a path or stdin; errors name the file."""
    module = _hold(decode_bytes(_read(path), display_name(path), strict=strict))
    if verify:
        verify_module(module)
    return module


def _parse_text(path: str, verify: bool = True):
    module = _hold(_parse_bytes(_read(path), _display_name(path)))
    if verify:
        _verify(module)
    return module


def _parse_bytes(data: bytes, name: str):
    """Text form -> Module (unverified); bytecode, binary junk and empty input are named as such."""
    from .text import parse_module
    return parse_module(_text_of(data, name), filename=name)


def _text_of(data: bytes, name: str) -> str:
    if data.startswith(MAGIC):
        raise TextSyntaxError("the input is Tile IR bytecode, not text (`tilebc dis` prints its "
                              "text form)", file=name, offset=0)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise TextSyntaxError(f"the input is not UTF-8 text (byte 0x{data[error.start]:02x}); "
                              "expected the Tile IR text form", file=name,
                              offset=error.start) from None
    if not text:
        # zero bytes is a broken pipeline; a blank line is the empty module (tileirdisasm's text)
        raise TextSyntaxError("the input is empty; expected 'entry', 'global' or 'module'",
                              file=name, line=1, column=1)
    return text


def _load_any(path: str, verify: bool = True, strict: bool = False):
    """Bytecode (by its magic) or text."""
    if path != "-":
        with open(path, "rb") as stream:
            is_bytecode = stream.read(len(MAGIC)) == MAGIC
        return _decode(path, verify, strict) if is_bytecode else _parse_text(path, verify)
    data = sys.stdin.buffer.read()
    sys.stdin = _BytesStdin(data)
    return _decode(path, verify, strict) if data.startswith(MAGIC) else _parse_text(path, verify)


def _decode_warnings(module) -> list:
    """The module's decode warnings (lenient readings), debug-info ones included."""
    for function in module.functions:  # decodes lazily read locations, which may add warnings
        function.loc
        for op in function.walk():
            op.loc
    return list(module.decode_warnings)


class _BytesStdin:
    """Stdin already read once (to sniff the magic), offered again to `read_input`."""

    def __init__(self, data: bytes):
        self.buffer = io.BytesIO(data)


def _write_output(path: str | None, data, *, binary: bool, force: bool = False) -> None:
    """`None`/`-`: stdout (binary refused to a terminal unless forced); else the file, replaced
    atomically or written through (tilebc/outputs.py)."""
    write_output(path, data, binary=binary, force=force)


def _default_bytecode_output(path: str) -> str:
    """FILE with its suffix replaced by .tilebc (stdout for stdin); never the input itself."""
    if path == "-":
        return "-"
    root, _ = os.path.splitext(path)
    output = root + ".tilebc"
    if output == path or same_file(output, path):
        raise UsageError(f"the default output {output} is the input file; name the output "
                         "with -o")
    return output


def cmd_dis(args) -> int:
    from .verify_aside import read_verified
    data = _read(args.input)

    def read():
        # Unverified, the debug section is still read whole, as tileirdisasm reads it (the
        # verifier reads every location; a plain print reads none).
        return decode_bytes(data, display_name(args.input), lazy_debug=not args.no_verify)

    report = None
    if args.debug:  # a child verifying aside also names the locations (alias_aside.py)
        from .alias_aside import location_texts as report
    module, verifier = read_verified(read, len(data), enabled=not args.no_verify,
                                     may_fork=_held is not None, report=report)
    _hold(module)
    marked = None
    if args.debug and not verifier.in_place:
        from .alias_aside import MarkedLocations
        try:
            marked = MarkedLocations.of(module)
        except BaseException:
            verifier.cancel()
            raise
        if marked is not None:
            verifier.fresh = read  # its locations are indices now
    # A regular file takes the text an entry at a time (the text of a large module is never held
    # whole; with -g and the locations named aside, it is held until their texts are in) and is
    # replaced only once the module is known valid; stdout or a device gets nothing before that.
    streams = verifier.in_place or _replaced_file(args.output)

    def pieces():
        # loaded after the fork, in the verifier's block: a child verifying aside never prints
        from .text.printer import module_text_pieces
        if marked is not None:
            printed = list(module_text_pieces(module, aliases=marked))
            # the child's texts put in while it verifies
            texts = marked.pieces(printed, verifier.take_report())
            texts = None if texts is None else list(texts)
            verifier.confirm()
            # without the child's texts: printed again from a fresh decode
            yield from texts if texts is not None else \
                module_text_pieces(_hold(read()), debug=True)
            return
        produced = module_text_pieces(module, debug=args.debug)
        if not streams:
            produced = list(produced)
            verifier.confirm()
        yield from produced
        verifier.confirm()  # raises the verifier's error: a replaced file keeps its old contents

    with verifier:
        _write_output(args.output, pieces, binary=False)
    return 0


def _replaced_file(path: str | None) -> bool:
    """Whether the output goes to a regular file (new or existing), which write_output replaces
    atomically, rather than to stdout, a FIFO or a device."""
    if path is None or path == "-":
        return False
    try:
        return os.path.isfile(os.path.realpath(path)) or not os.path.exists(path)
    except OSError:
        return False


def cmd_asm(args) -> int:
    from .verify_aside import read_verified
    output = args.output or _default_bytecode_output(args.input)
    text = _read(args.input)
    module, verifier = read_verified(
        lambda: _parse_bytes(text, _display_name(args.input)), len(text), text=True,
        enabled=not args.no_verify, may_fork=_held is not None)
    _hold(module)
    with verifier:  # as for dis: a large module is verified while it encodes
        data = dump(module, args.target_version or module.version)
        verifier.confirm()  # raises the verifier's error: nothing is written
        _write_output(output, data, binary=True, force=args.force)
    return 0


def cmd_verify(args) -> int:
    from .verify import ERROR, diagnostics
    module = _load_any(args.input, verify=False, strict=args.strict)
    module.source = module.source or _display_name(args.input)
    warnings = _decode_warnings(module)
    for warning in warnings:
        print(f"{Location(_display_name(args.input), warning.offset)}: warning: "
              f"{warning.message}; {warning.action}", file=sys.stderr)
    found = diagnostics(module)
    for diagnostic in found:
        print(str(diagnostic), file=sys.stderr)
    errors = sum(d.severity == ERROR for d in found)
    if errors:
        print(f"{_display_name(args.input)}: {errors} error(s)", file=sys.stderr)
        return 1
    if not args.quiet:
        print(f"{_display_name(args.input)}: ok ({module.version}, "
              f"{len(module.functions)} entries, {len(module.globals)} globals"
              + (f", {len(warnings)} decode warning(s)" if warnings else "") + ")", file=sys.stderr)
    return 0


def section_sizes(data: bytes):
    """(name, payload offset, payload size) for each section of a file that already loaded."""
    from .binary import container
    SectionId = container.SectionId
    start = 12
    sections = []
    while True:
        found = container.plain_section(data, start)
        if found is None:  # odd padding, which a lenient load passed: the schema reads it
            stream = io.BytesIO(data)
            stream.seek(start)
            section = container.Section.parse_stream(stream, padding_sink=[])
            found = (section.header.id, section.length, stream.tell())
        else:
            found = (found[0], found[2], found[5])
        section_id, size, start = found
        if section_id == SectionId.END:
            return sections
        sections.append((SectionId(section_id).name.lower(), start - size, size))


def _format_hints(hints) -> str:
    if hints is None:
        return "none"
    parts = []
    for arch, dictionary in hints.entries:
        body = ", ".join(f"{key} = {_attr_text(value)}" for key, value in dictionary.entries)
        parts.append(f"{arch}: {{{body}}}")
    return "; ".join(parts) or "none"


def _attr_text(value) -> str:
    for field in ("value", "values"):
        if hasattr(value, field):
            return str(getattr(value, field))
    return str(value)


def cmd_info(args) -> int:
    data = _read(args.input)
    try:
        module = load(data)
    except TilebcError as error:
        error.file = error.file or _display_name(args.input)
        raise
    name = _display_name(args.input)
    print(f"{name}: Tile IR bytecode {module.version}"
          + (" (public preview)" if module.preview else "") + f", {len(data)} bytes")
    print(f"producer: {module.producer or '(none recorded)'}")
    warnings = _decode_warnings(module)
    print(f"decode warnings: {len(warnings)}" + (" (read as tileirdisasm reads them; "
                                                 "`tilebc verify --strict` refuses them)"
                                                 if warnings else ""))
    for warning in warnings:
        print(f"  0x{warning.offset:x}: {warning.message}; {warning.action}")
    print("sections:")
    for section, offset, size in section_sizes(data):
        print(f"  {section:<9} {size:>9} bytes at 0x{offset:x}")
    print(f"globals: {len(module.globals)}")
    for item in module.globals:
        flags = [item.visibility.name.lower()] + (["constant"] if item.constant else [])
        print(f"  @{item.name}: {item.type} ({', '.join(flags)}"
              + (f", align {item.alignment}" if item.alignment else "") + ")")
    print(f"entries: {len(module.functions)}")
    for function in module.functions:
        ops = sum(1 for _ in function.walk())
        params = ", ".join(str(t) for t in function.type.inputs)
        print(f"  @{function.name}({params})")
        print(f"    ops: {ops}; optimization hints: {_format_hints(function.optimization_hints)}")
    return 0


def cmd_convert(args) -> int:
    module = _decode(args.input, verify=False)
    version = args.target_version or module.version
    data = dump(module, version)
    _write_output(args.output, data, binary=True, force=args.force)
    if args.output not in (None, "-"):
        print(f"wrote {args.output}: {len(data)} bytes, version {version}", file=sys.stderr)
    return 0


def _mlir_options(args):
    from .mlir_tools import Options
    return Options(testing_ops=args.testing_ops, allow_unregistered=args.allow_unregistered,
                   hint_warnings=args.hint_warnings,
                   hint_errors=args.hint_errors, verify=not args.no_verify)


def _read_text(path: str) -> str:
    return _text_of(_read(path), _display_name(path))


def _run_chunks(args, produce, encodes: bool = False) -> int:
    """Split the text input, parse and verify each chunk, and hand each clean one's modules to
    `produce` (which returns its output, or raises TilebcError); diagnostics as MLIR prints them,
    or checked against the expected-* comments with -verify-diagnostics."""
    from .mlir_tools import Diagnosed, check_expected, from_error, join_outputs, parse_chunk, \
        report, split_input
    name = _display_name(args.input)
    options = _mlir_options(args)
    outputs, failed = [], False
    for chunk in split_input(_read_text(args.input), args.split_input_file):
        result = parse_chunk(chunk, name, options)
        produced = list(result.diagnostics)
        output = None
        if not result.failed and result.unregistered:
            # ops of other dialects were verified around; tilebc can neither print nor encode
            # them: the writer refuses them (as NVIDIA's does), and so does opt's printer,
            # except under -verify-diagnostics, which checks no output
            if encodes or not args.verify_diagnostics:
                produced += result.unregistered
        elif not result.failed:
            try:
                output = produce(result.modules)
            except Diagnosed as error:
                produced += error.diags
            except TilebcError as error:
                produced.append(from_error(error, name))
        if args.verify_diagnostics:
            problems = check_expected(chunk, name, produced)
            report(problems)
            failed |= bool(problems)
        else:
            report(produced)
            failed |= any(d.severity == "error" for d in produced)
        if output is not None and not any(d.severity == "error" for d in produced):
            outputs.append(output)
    if not outputs:
        return 1 if failed else 0
    if isinstance(outputs[0], bytes):
        if len(outputs) > 1:
            raise UsageError(f"{len(outputs)} chunks were translated and a bytecode file holds "
                             "one module; translate them one file at a time")
        _write_output(args.output, outputs[0], binary=True, force=args.force)
    else:
        _write_output(args.output, join_outputs(outputs), binary=False)
    return 1 if failed else 0


def _print_mlir(modules, args) -> str:
    from .text import print_module
    if args.generic:
        from .text.printer import print_generic
        return "".join(print_generic(m, debug=args.debug) for m in modules)
    return "".join(print_module(m, debug=args.debug, mlir=True) for m in modules)


def cmd_opt(args) -> int:
    """cuda-tile-opt's habits: parse, verify, print MLIR's form (no passes)."""
    if args.input != "-":
        with open(args.input, "rb") as stream:
            is_bytecode = stream.read(len(MAGIC)) == MAGIC
        if is_bytecode:
            module = _decode(args.input, verify=not args.no_verify)
            _write_output(args.output, _print_mlir([module], args), binary=False)
            return 0
    return _run_chunks(args, lambda modules: _print_mlir(modules, args))


def _check_version(text: str | None) -> Version | None:
    if text is None:
        return None
    try:
        version = Version.parse(text)
    except Exception:
        version = None
    if version not in ALL_VERSIONS:
        raise UsageError(f"Invalid argument '{text}': the supported versions are "
                         f"[{ALL_VERSIONS[0]} - {ALL_VERSIONS[-1]}]")
    return version


def cmd_translate(args) -> int:
    """cuda-tile-translate's spellings, so tests written for NVIDIA's tool run against ours."""
    from .mlir_tools import Diagnosed, refuse_testing_ops, version_problems
    if args.list_versions:
        print("\n".join(str(v) for v in ALL_VERSIONS))
        return 0
    modes = [args.cudatilebc_to_mlir, args.mlir_to_cudatilebc, args.roundtrip]
    if sum(modes) != 1:
        raise UsageError("choose exactly one of -cudatilebc-to-mlir, -mlir-to-cudatilebc, "
                         "-test-cudatile-roundtrip")
    version = _check_version(args.bytecode_version)
    if args.cudatilebc_to_mlir:
        module = _decode(args.input, verify=not args.no_verify)
        _write_output(args.output, _print_mlir([module], args), binary=False)
        return 0
    name = _display_name(args.input)

    def encode(modules):
        if len(modules) > 1:
            raise UsageError(f"the input holds {len(modules)} modules and a bytecode file "
                             "holds one (split them with `// -----` and -split-input-file)")
        data = []
        for module in modules:
            refuse_testing_ops(module, name)
            problems = version_problems(module, version or module.version, name)
            if problems:
                raise Diagnosed(problems)
            data.append(dump(module, version or module.version))
        return data

    if args.mlir_to_cudatilebc:
        return _run_chunks(args, lambda modules: b"".join(encode(modules)), encodes=True)
    return _run_chunks(args, lambda modules: _print_mlir([load(d) for d in encode(modules)],
                                                         args), encodes=True)


def cmd_demo(args) -> int:
    """Main job: assemble -> verify -> disassemble -> interpret on the CPU -> JIT to a cubin (and launch
    when a GPU is present), on the embedded kernel text or on a given text/bytecode file."""
    from . import oracles
    from .text import print_module
    from .verify import verify
    if args.input:
        name, data = args.input, read_input(args.input)
    else:
        name = "embedded demo kernel (text form of cuTile's float_math, elementwise_f32)"
        from importlib import resources  # only the demo reads package data
        data = resources.files("tilebc").joinpath("data/demo.mlir").read_bytes()
    failures = 0

    def step(title: str, ok: bool = True, detail: str = "") -> None:
        nonlocal failures
        failures += not ok
        print(f"== {title}: {'ok' if ok else 'FAILED'}" + (f" — {detail}" if detail else ""))

    if data.startswith(MAGIC):
        module = decode_bytes(data, name)
        step(f"read bytecode {name}", detail=f"{len(data)} bytes, version {module.version}")
    else:
        module = _parse_bytes(data, name)
        step(f"assemble {name}", detail=f"{len(module.functions)} entry, "
             f"{sum(1 for _ in module.walk())} ops")
    verify(module)
    step("verify", detail="typing and well-formedness rules hold")
    for function in module.functions:
        histogram = collections.Counter(op.name for op in function.walk())
        print(f"   entry @{function.name}{function.type}")
        print(f"     {sum(histogram.values())} ops: "
              + ", ".join(f"{op} x{count}" for op, count in histogram.most_common(6)) + ", …")

    have_disasm = oracles.tool_path("tileirdisasm") is not None
    text = print_module(module)
    print("== encode for every version" + ("" if have_disasm else
          " (tileirdisasm not installed: NVIDIA checks skipped)"))
    for version in ALL_VERSIONS:
        try:
            encoded = dump(module, version)
        except TilebcError as error:
            print(f"   {version}: refused: {error.message}")
            continue
        ours = print_module(load(encoded))
        status = f"{len(encoded)} bytes, deterministic={dump(load(encoded), version) == encoded}"
        if have_disasm:
            listing = oracles.tileirdisasm(encoded)
            same = listing.ok and listing.stdout == ours
            status += f", our dis {'==' if same else '!='} tileirdisasm"
            failures += not same
        print(f"   {version}: {status}")
    bytecode = dump(module)
    if oracles.tool_path("tileiras"):
        compiled = oracles.tileiras(bytecode, "sm_90")
        step("tileiras --gpu-name=sm_90 on our bytes", compiled.ok)
    print(f"== disassembly (first lines of {len(text.splitlines())}):")
    for line in text.splitlines()[:4]:
        print("   " + (line if len(line) < 110 else line[:107] + "..."))

    try:
        from .interp import demo_check
        from .interp.errors import ArgumentError
        summary = demo_check(module)
        step("CPU interpreter vs numpy", detail=summary)
    except ArgumentError:
        print("== CPU interpreter: skipped (the numpy check knows only the embedded demo kernel; "
              "use `tilebc run`)")
    except TilebcError as error:
        step("CPU interpreter vs numpy", False, str(error))

    steps = plugins(DEMO_GROUP)
    if not steps:
        print("== JIT: tilebc-runtime is not installed (pip install -e ./runtime)")
    for name, step_function in steps:
        try:
            title, ok, detail = step_function(module)
        except TilebcError as error:
            step(f"{name} step", False, str(error))
        else:
            step(title, ok, detail)
    print(f"== {'all steps passed' if not failures else f'{failures} step(s) FAILED'}")
    return 1 if failures else 0


def _version(text: str) -> Version:
    try:
        version = Version.parse(text)
    except VersionError:
        raise argparse.ArgumentTypeError(f"invalid version {text!r} (expected 13.1-13.5)") from None
    if version not in ALL_VERSIONS:
        raise argparse.ArgumentTypeError(
            f"unsupported version {text} (supported: {', '.join(map(str, ALL_VERSIONS))})")
    return version


# Entry-point groups through which other installed packages extend the `tilebc` command, so that
# the format package never imports them (tilebc-runtime declares its own in runtime/pyproject.toml):
# - COMMAND_GROUP: an entry point named after a sub-command, loading a function that adds that
#   sub-command to the sub-parsers (`add(subparsers)`) and sets `handler` (or `run`) on it;
# - DEMO_GROUP: a step of `tilebc demo`, a function of the verified Module returning
#   (title, ok, detail).
COMMAND_GROUP = "tilebc.commands"
DEMO_GROUP = "tilebc.demo"


def plugins(group: str, name: str | None = None) -> list[tuple]:
    """(entry-point name, loaded object) for the entry points of `group`, in name order: only the
    one called `name` when there is one, else all. Metadata is read here, on demand, so commands
    built into tilebc never pay for it. A plugin that fails to load is left out with a warning
    (the built-in commands keep working), unless it is the one `name` asks for: then the error
    stands, since the user asked for that command."""
    from importlib.metadata import entry_points
    found = sorted({entry.name: entry for entry in entry_points(group=group)}.values(),
                   key=lambda entry: entry.name)
    chosen = [entry for entry in found if entry.name == name] or found
    loaded = []
    for entry in chosen:
        try:
            loaded.append((entry.name, entry.load()))
        except Exception as error:  # a broken plugin must not take the built-in commands down
            if entry.name == name:
                raise
            print(f"tilebc: warning: {group} entry point {entry.name!r} ({entry.value}) does not "
                  f"load: {type(error).__name__}: {error}", file=sys.stderr)
    return loaded


def _named_plugin(group: str, name: str):
    """The object entry point `name` of `group` loads, or None when no distribution on sys.path
    declares it. Reads each distribution's entry_points.txt directly: importing importlib.metadata
    alone costs ~30 ms, a third of a warm `tilebc compile`. The first declaration on sys.path wins
    (as for imports); anything unusual is left to plugins()."""
    import importlib
    header = f"[{group}]"
    for folder in sys.path:
        try:
            names = os.listdir(folder or ".")
        except OSError:
            continue  # a zip file or a missing folder
        for item in names:
            if not item.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(folder or ".", item, "entry_points.txt"),
                          encoding="utf-8") as stream:
                    text = stream.read()
            except OSError:
                continue
            if header not in text:
                continue
            section = None
            for line in text.splitlines():
                line = line.strip()
                if line.startswith("["):
                    section = line
                elif section == header and "=" in line and not line.startswith(("#", ";")):
                    key, value = (part.strip() for part in line.split("=", 1))
                    if key == name:
                        module, _, attribute = value.split("[")[0].strip().partition(":")
                        found = importlib.import_module(module)
                        for part in filter(None, attribute.strip().split(".")):
                            found = getattr(found, part)
                        return found
    return None


def _requested_command(argv: list[str]) -> str | None:
    """The sub-command `argv` names, or None (help, or no command): all commands are then built."""
    return argv[0] if argv and not argv[0].startswith("-") else None


def _mlir_tool_options(command) -> None:
    """The options MLIR's tools share (single or double dash, as LLVM's option parser takes)."""
    def flag(name, dest, help=None):
        command.add_argument(f"-{name}", f"--{name}", dest=dest, action="store_true", help=help)
    flag("split-input-file", "split_input_file", "handle each `// -----` chunk alone")
    flag("verify-diagnostics", "verify_diagnostics",
         "check diagnostics against the input's expected-error/-warning/-note comments")
    flag("mlir-print-debuginfo", "debug", "print locations")
    flag("mlir-print-op-generic", "generic", "print ops in MLIR's generic form")
    flag("allow-unregistered-dialect", "allow_unregistered",
         "read ops of other dialects written in the generic form inside entries, for "
         "-verify-diagnostics only (they are never printed nor encoded)")
    flag("no-implicit-module", "no_implicit_module",
         "accepted for compatibility (modules are always explicit)")
    flag("Wunsupported-hints", "hint_warnings", "warn about optimization hints the target "
         "does not know (silent by default, as NVIDIA's tools)")
    flag("Werr-hints", "hint_errors", "with -Wunsupported-hints, such hints are errors")
    command.add_argument("--testing-ops", action="store_true",
                         help="read NVIDIA's test-only `testing$func` entries (for running "
                              "their verifier tests; never written to bytecode)")
    command.add_argument("-o", dest="output", metavar="OUT")
    command.add_argument("-f", "--force", action="store_true")
    command.add_argument("--no-verify", action="store_true")


def _terminal_columns() -> int:
    """The width help is wrapped to, looked up as shutil.get_terminal_size does (COLUMNS, then the
    terminal, then 80)."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter without shutil: argparse builds one for every argument added (not
    only for help) and sizes it through shutil, whose import, with zlib, bz2 and lzma, cost every
    command ~1.5 ms."""

    def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
        super().__init__(prog, indent_increment, max_help_position,
                         _terminal_columns() - 2 if width is None else width)


class _ArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose formatter is _HelpFormatter; subcommands' parsers are of this
    class too (add_subparsers makes them of the parent's class)."""

    def __init__(self, *args, formatter_class=_HelpFormatter, **kwargs):
        super().__init__(*args, formatter_class=formatter_class, **kwargs)


BUILT_IN_COMMANDS = ("dis", "asm", "verify", "info", "convert", "translate", "opt", "demo")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; with `command`, only what that command needs is imported (built-in
    commands, plus `run` or a plugin's command when that is the one asked for)."""
    parser = _ArgumentParser(
        prog="tilebc", description="CUDA Tile IR bytecode toolchain. FILE may be - for stdin; "
        "exit status 0 ok, 1 bad input, 2 usage error.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    # A plugin's command (`compile`, `cache`) builds its own parser alone: neither the built-in
    # commands nor `run` (the interpreter, numpy) are loaded for it.
    plugin = None
    if command is not None and command != "run" and command not in BUILT_IN_COMMANDS:
        plugin = _named_plugin(COMMAND_GROUP, command)
    if plugin is not None:
        plugin(commands)
        return parser

    def wanted(name: str) -> bool:
        # A built-in command builds its own parser alone (each costs start-up time); help, `run`
        # and unknown names build them all.
        return command not in BUILT_IN_COMMANDS or command == name

    def add(name, run, help, output=True, force=False):
        command = commands.add_parser(name, help=help, description=help)
        command.add_argument("input", metavar="FILE")
        if output:
            command.add_argument("-o", "--output", metavar="OUT", help="output file (- for stdout)")
        if force:
            command.add_argument("-f", "--force", action="store_true",
                                 help="write binary output even to a terminal")
        command.set_defaults(run=run)
        return command

    if wanted("dis"):
        dis = add("dis", cmd_dis, "bytecode -> text, as NVIDIA's tileirdisasm prints it")
        dis.add_argument("-g", "--debug", action="store_true", help="print debug info (locations)")
        dis.add_argument("--no-verify", action="store_true", help="skip the verifier")

    if wanted("asm"):
        asm = add("asm", cmd_asm, "text -> bytecode (default output: FILE with .tilebc suffix)",
                  force=True)
        asm.add_argument("--target-version", type=_version, metavar="13.x",
                         help="bytecode version to write (default: 13.5 / the text's own)")
        asm.add_argument("--no-verify", action="store_true", help="skip the verifier")

    if wanted("verify"):
        check = add("verify", cmd_verify, "check a bytecode or text file against the typing and "
                    "well-formedness rules", output=False)
        check.add_argument("-q", "--quiet", action="store_true")
        check.add_argument("--strict", action="store_true",
                           help="refuse bytecode that NVIDIA's reader accepts but the format "
                                "forbids (padding, table order, unknown flag bits, ...) instead of "
                                "warning")

    if wanted("info"):
        add("info", cmd_info, "version, producer, sections, globals, entries, signatures, hints",
            output=False)

    if wanted("convert"):
        convert = add("convert", cmd_convert, "re-encode bytecode for another version", force=True)
        convert.add_argument("--target-version", "--to", dest="target_version", type=_version,
                             metavar="13.x", help="target version (default: the input's)")

    if wanted("translate"):
        translate = commands.add_parser(
            "translate", help="cuda-tile-translate compatible entry point",
            description="Accepts cuda-tile-translate's options: -cudatilebc-to-mlir, "
            "-mlir-to-cudatilebc, -test-cudatile-roundtrip, -bytecode-version=13.x, "
            "-no-implicit-module, --list-versions, -split-input-file, -verify-diagnostics, -o OUT.")
        translate.add_argument("input", nargs="?", default="-", metavar="FILE")
        translate.add_argument("-cudatilebc-to-mlir", "--cudatilebc-to-mlir",
                               dest="cudatilebc_to_mlir", action="store_true")
        translate.add_argument("-mlir-to-cudatilebc", "--mlir-to-cudatilebc",
                               dest="mlir_to_cudatilebc", action="store_true")
        translate.add_argument("-test-cudatile-roundtrip", "--test-cudatile-roundtrip",
                               dest="roundtrip", action="store_true")
        translate.add_argument("-bytecode-version", "--bytecode-version", dest="bytecode_version",
                               metavar="13.x")
        translate.add_argument("-list-versions", "--list-versions", dest="list_versions",
                               action="store_true")
        _mlir_tool_options(translate)
        translate.set_defaults(run=cmd_translate)

    if wanted("opt"):
        opt = commands.add_parser(
            "opt", help="cuda-tile-opt compatible: parse, verify, print MLIR's form",
            description="Parse and verify Tile IR text (or bytecode) and print it as cuda-tile-opt "
            "does. Accepts -split-input-file, -verify-diagnostics, -mlir-print-op-generic, "
            "-mlir-print-debuginfo, -Wunsupported-hints, -Werr-hints, -allow-unregistered-dialect, "
            "-no-implicit-module, -o OUT.")
        opt.add_argument("input", nargs="?", default="-", metavar="FILE")
        _mlir_tool_options(opt)
        opt.set_defaults(run=cmd_opt)

    # `run` (the interpreter, numpy) and other packages' commands load only when asked for, or
    # for help and unknown names (whose error lists every command)
    unknown = command is None or (command != "run" and command not in commands.choices)
    if unknown or command == "run":
        from .interp.cli import add_run_parser
        add_run_parser(commands)
    if unknown:
        added = plugins(COMMAND_GROUP, command)
        for _, add_parser in added:
            add_parser(commands)
        if not added:
            parser.epilog = ("tilebc-runtime adds the commands compile and cache once installed "
                             "(pip install -e ./runtime).")

    if wanted("demo"):
        demo = commands.add_parser("demo", help="run the end-to-end demo on the embedded kernel")
        demo.add_argument("input", nargs="?")
        demo.set_defaults(run=cmd_demo)
    return parser


# Commands that read one input, build its module, write the result and end: what they make lives
# until the process exits, so automatic collections would only walk it: 0.35 s of `dis` and 0.9 s
# of `asm` of the 1.4 MB module. The garbage they leave in cycles is bounded by the input, which
# the decoder's and parser's limits bound. In their own process the module is held to the end and
# the process ends without tearing down its objects (_hard_exit): freeing a module object by
# object, which the IR's lack of cycles would otherwise do as the command returns, costs ~0.1 s
# per 1.4 MB of bytecode, for nothing.
_ONE_SHOT = ("dis", "asm", "verify", "info", "convert")
# Commands whose own process ends without the interpreter's teardown (outputs.end_process): the
# one-shot ones, and `compile`, which the C++ loader runs for every cache miss.
_ENDS_HARD = _ONE_SHOT + ("compile",)
_held: list | None = None  # a one-shot command's modules, in its own process


def _hold(module):
    if _held is not None:
        _held.append(module)
    return module


# The other commands collect after every 100,000 net allocations instead of 700: a small kernel's
# `compile` (imports and one lowering) then runs no collection instead of ~34 (~8 ms); a collection
# still comes after at most ~10-20 MB of new objects.
_YOUNG_THRESHOLD = 100_000


def main(argv: list[str] | None = None) -> int:
    global _held
    own_process = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    command = _requested_command(argv)
    one_shot = own_process and command in _ONE_SHOT
    if one_shot:
        gc.disable()
        _held = []
    elif own_process:
        gc.set_threshold(_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    try:
        code = _main(argv)
    finally:
        if own_process:
            # The process ends next: the collection at interpreter exit would walk everything
            # still alive (~0.4 s CPU after `dis` of the 1.4 MB module). Frozen objects are not
            # collected.
            gc.freeze()
    if own_process and command in _ENDS_HARD and may_end_hard():
        _hard_exit(code)
    return code


_hard_exit = end_process  # a name of its own: tests watch the way out


def _main(argv: list[str]) -> int:
    command = _requested_command(argv)
    parser = build_parser(command)
    if command is not None and command not in parser._subparsers._group_actions[0].choices \
            and parser.epilog:
        print(f"tilebc: note: {parser.epilog}", file=sys.stderr)
    args = parser.parse_args(argv)
    try:
        run = getattr(args, "run", None) or args.handler
        return run(args)
    except UsageError as error:
        print(f"tilebc {args.command}: error: {error}", file=sys.stderr)
        return 2
    except TilebcError as error:
        print(f"tilebc {args.command}: error: {error}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # Output piped into a reader that stopped early (`| head`): not an error of ours.
        sys.stderr.close()
        return 0
    except OSError as error:
        reason = error.strerror or str(error)
        where = f"{error.filename}: " if error.filename else ""
        print(f"tilebc {args.command}: error: {where}{reason}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"tilebc {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
