"""What `tilebc opt` and `tilebc translate` do the way MLIR's tools (cuda-tile-opt,
cuda-tile-translate) do it: split input files, check expected diagnostics, print MLIR's form.

* `-split-input-file`: the input is cut at lines starting with `// -----`; each chunk is handled
  alone (its diagnostics keep the whole file's line numbers) and outputs are joined with the
  same marker.
* `-verify-diagnostics`: comments `// expected-error {{text}}` (also -warning, -note, -remark;
  placed with `@+N`, `@-N`, `@N`, `@above`, `@below`; `-re` takes `{{regex}}` parts) list what
  must be reported; every other diagnostic, and every expectation left unmet, is an error named
  by file:line:col. Matching is on severity, line and a substring of the message.
* Diagnostics print as `FILE:LINE:COL: error: MESSAGE` (MLIR's layout, our locations).
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from .errors import Location, TilebcError, TextSyntaxError, UsageError
from .version import GLOBAL_VISIBILITY_AND_CONSTANT as _GLOBAL_FLAGS

SPLIT_MARKER = "// -----"
_MARKER_LINE = re.compile(r"^[ \t]*// -----[^\n]*(?:\n|$)", re.M)
_EXPECTED = re.compile(
    r"expected-(error|warning|note|remark)(-re)?[ \t]*(?:@[ \t]*(above|below|unknown|[+-]?[0-9]+))?"
    r"[ \t]*(\*?)[ \t]*\{\{(.*?)\}\}[ \t]*$")
HINT_FAILURE = "Optimization hints verification failed"


@dataclass
class Diag:
    severity: str   # error, warning, note, remark
    line: Optional[int]
    column: Optional[int]
    message: str
    file: Optional[str] = None
    offset: Optional[int] = None

    def where(self) -> str:
        offset = self.offset if self.line is None else None  # a text line wins over an offset
        return str(Location(self.file, offset, self.line, self.column)) or "<text>"

    def __str__(self) -> str:
        return f"{self.where()}: {self.severity}: {self.message}"


class Diagnosed(TilebcError):
    """Several diagnostics at once (a module that the target version cannot encode)."""

    def __init__(self, diags: List["Diag"]):
        super().__init__("; ".join(d.message for d in diags))
        self.diags = diags


def from_error(error: TilebcError, file: Optional[str] = None) -> Diag:
    """A raised error as a diagnostic; a syntax error's quoted source line is left out."""
    message = error.message.split("\n", 1)[0] if isinstance(error, TextSyntaxError) \
        else error.message
    return Diag("error", error.line, error.column, message, error.file or file, error.offset)


# ---- splitting -----------------------------------------------------------------------------------

def split_input(text: str, split: bool) -> List[str]:
    """The chunks of `text`, each padded with the newlines before it so that its line numbers are
    the file's."""
    if not split:
        return [text]
    chunks, start = [], 0
    for match in _MARKER_LINE.finditer(text):
        chunks.append(text[start:match.start()])
        start = match.end()
    chunks.append(text[start:])
    padded, line = [], 0
    for index, chunk in enumerate(chunks):
        padded.append("\n" * line + chunk)
        line += chunk.count("\n") + 1  # the marker line
    return padded


def join_outputs(outputs: List[str]) -> str:
    return (SPLIT_MARKER + "\n").join(outputs)


# ---- expected diagnostics ------------------------------------------------------------------------

@dataclass
class Expected:
    severity: str
    line: Optional[int]  # where the diagnostic must be reported (None: no line)
    text: str
    regex: Optional[re.Pattern]
    at_line: int        # the comment's own line
    at_column: int
    matched: bool = False

    def accepts(self, diag: Diag) -> bool:
        if diag.severity != self.severity or diag.line != self.line:
            return False
        if self.regex is not None:
            return self.regex.search(diag.message) is not None
        return self.text in diag.message


def _pattern(text: str) -> re.Pattern:
    """`-re` text: `{{regex}}` parts inside literal text."""
    parts, position = [], 0
    for match in re.finditer(r"\{\{(.*?)\}\}", text):
        parts.append(re.escape(text[position:match.start()]))
        parts.append(match.group(1))
        position = match.end()
    parts.append(re.escape(text[position:]))
    return re.compile("".join(parts))


def expected_diagnostics(text: str, file: str) -> Tuple[List[Expected], List[Diag]]:
    """The expectations written in `text`, and errors for ones that cannot be placed."""
    found: List[Expected] = []
    problems: List[Diag] = []
    # as MLIR: @below is the next line, @above the last line, without an expectation on it
    last_plain = 0
    pending_below: List[Expected] = []
    for number, line in enumerate(text.split("\n"), start=1):
        match = _EXPECTED.search(line)
        if not match:
            last_plain = number
            for item in pending_below:
                item.line = number
            pending_below = []
            continue
        severity, is_re, where, _, body = match.groups()
        expected = Expected(severity, number, body, None, number, match.start() + 1)
        if is_re:
            try:
                expected.regex = _pattern(body)
            except re.error as error:
                problems.append(Diag("error", number, match.start() + 1,
                                     f"invalid regular expression in expected-{severity}-re: "
                                     f"{error}", file))
                continue
        if where == "below":
            pending_below.append(expected)
        elif where == "above":
            if not last_plain:
                problems.append(Diag("error", number, match.start() + 1,
                                     "expected diagnostic @above has no line above it", file))
                continue
            expected.line = last_plain
        elif where == "unknown":
            expected.line = None  # a diagnostic without a line
        elif where:
            expected.line = number + int(where) if where[0] in "+-" else int(where)
        found.append(expected)
    for item in pending_below:
        problems.append(Diag("error", item.at_line, item.at_column,
                             "expected diagnostic @below has no line below it", file))
    return found, problems


def check_expected(text: str, file: str, produced: List[Diag]) -> List[Diag]:
    """MLIR's -verify-diagnostics verdict: the mismatches, as errors (none: all as expected)."""
    expectations, problems = expected_diagnostics(text, file)
    for diag in produced:
        for item in expectations:
            if not item.matched and item.accepts(diag):
                item.matched = True
                break
        else:
            problems.append(Diag("error", diag.line, diag.column,
                                 f"unexpected {diag.severity}: {diag.message}", diag.file or file,
                                 diag.offset))
    for item in expectations:
        if not item.matched:
            problems.append(Diag("error", item.at_line, item.at_column,
                                 f'expected {item.severity} "{item.text}" was not produced',
                                 file))
    return problems


# ---- one chunk -----------------------------------------------------------------------------------

@dataclass
class Options:
    testing_ops: bool = False
    allow_unregistered: bool = False  # -allow-unregistered-dialect
    hint_warnings: bool = False   # -Wunsupported-hints
    hint_errors: bool = False     # -Werr-hints
    verify: bool = True


@dataclass
class ChunkResult:
    modules: list = field(default_factory=list)
    diagnostics: List[Diag] = field(default_factory=list)
    # the refusals owed for ops of other dialects (-allow-unregistered-dialect), which were
    # verified around but can be neither printed nor encoded
    unregistered: List[Diag] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(d.severity == "error" for d in self.diagnostics)


def parse_chunk(text: str, file: str, options: Options) -> ChunkResult:
    """Parse and verify one chunk; every problem becomes a diagnostic (none is raised)."""
    from .text.parser import parse_modules
    from .verify import WARNING, diagnostics
    result = ChunkResult()
    try:
        result.modules, unwritable = parse_modules(
            text, file, testing_ops=options.testing_ops, defer_unwritable=True,
            allow_unregistered=options.allow_unregistered)
    except TilebcError as error:
        result.diagnostics.append(from_error(error, file))
        # notes, remarks and further errors a parse error carries at their own positions
        for severity, line, column, message in getattr(error, "related", ()):
            result.diagnostics.append(Diag(severity, line, column, message, file))
        return result
    # the first op of another dialect is refused (as NVIDIA's writer stops at it)
    for error in [e for e in unwritable if getattr(e, "unregistered", False)][:1]:
        result.unregistered.append(from_error(error, file))
        for severity, line, column, message in getattr(error, "related", ()):
            result.unregistered.append(Diag(severity, line, column, message, file))
    unwritable = [e for e in unwritable if not getattr(e, "unregistered", False)]
    if not options.verify:
        return result
    for module in result.modules:
        module.source = file
        for found in diagnostics(module):
            diag = Diag(found.severity, found.line, found.column, found.message, file,
                        None if found.line is not None else found.offset)
            if found.rule.startswith("hints.") and found.severity == WARNING:
                # NVIDIA's tools say nothing about hints they do not know unless asked
                if not options.hint_warnings:
                    continue
                result.diagnostics.append(diag)
                if options.hint_errors:
                    result.diagnostics.append(Diag("error", diag.line, diag.column,
                                                   HINT_FAILURE, file))
                continue
            result.diagnostics.append(diag)
    # a fused or named location is refused once the module verifies (NVIDIA's verifier sees
    # through it; its bytecode writer refuses it)
    if unwritable and not any(d.severity == "error" for d in result.diagnostics):
        result.diagnostics.append(from_error(unwritable[0], file))
    return result


def report(diags: List[Diag], stream=None) -> None:
    stream = stream or sys.stderr
    for diag in diags:
        print(str(diag), file=stream)


def refuse_testing_ops(module, file: str) -> None:
    """Test-only entries never reach bytecode."""
    for function in module.functions:
        if getattr(function, "testing", False):
            raise UsageError(f"{file}: testing$func @{function.name} is a test-only entry and "
                             "has no bytecode form")


# ---- what the target version lacks, in NVIDIA's words --------------------------------------------

def _mlir_type_name(element) -> str:
    """`f8E8M0FNU` -> `Float8E8M0FNU`, MLIR's class name that NVIDIA's messages use."""
    name = element.name
    return "Float" + name[1:] if re.match(r"f[0-9]+E", name) else name


def _types_in(value):
    """Element types reachable from a type (tiles, pointers, views)."""
    from .ir import types as T
    if isinstance(value, T.ElementType):
        yield value
        return
    for attribute in ("element", "pointee", "tensor_view", "base"):
        inner = getattr(value, attribute, None)
        if inner is not None and inner is not value:
            yield from _types_in(inner)


def version_problems(module, version, file: str) -> List[Diag]:
    """What `version` cannot encode, found before writing so that each is reported at its op's
    line in the words of NVIDIA's cuda-tile-translate (the writer's own checks stay the last
    word)."""
    from .ops.spec import AttrKind
    found: List[Diag] = []

    def at(node, message, line=True):
        position = getattr(node, "text_pos", None) if line else None
        found.append(Diag("error", position[0] if position else None,
                          position[1] if position else None, message, file))

    for item in module.globals:
        if item.constant and version < _GLOBAL_FLAGS:
            at(item, f"constant global `{item.name}` cannot be encoded in bytecode version "
                     f"{version} (the `constant` attribute requires bytecode {_GLOBAL_FLAGS}+)")
        elif item.visibility.keyword != "public" and version < _GLOBAL_FLAGS:
            at(item, f"global `{item.name}` uses non-public symbol visibility, which cannot be "
                     f"encoded in bytecode version {version} (requires bytecode {_GLOBAL_FLAGS}+)")
    seen_types = set()

    def check_type(value):
        for element in _types_in(value):
            if element.since > version and element.name not in seen_types:
                seen_types.add(element.name)
                # NVIDIA reports these at an unknown location
                found.append(Diag("error", None, None, f"type '{_mlir_type_name(element)}' "
                                  f"requires bytecode version {element.since}+, targeting "
                                  f"{version}", file))

    for function in module.functions:
        for param in function.type.inputs:
            check_type(param)
        for op in function.walk():
            spec = op.spec
            for result in op.results:
                check_type(result.type)
            if spec.since > version:
                at(op, f"operation 'cuda_tile.{spec.mnemonic}' is not available in bytecode "
                       f"version {version}")
                continue
            for attr in spec.attrs:
                value = op.attrs.get(attr.name)
                if attr.since <= version or value is None:
                    continue
                if attr.kind is AttrKind.UNIT or attr.optional:
                    if value:
                        at(op, f"optional attribute '{attr.name}' is provided but requires "
                               f"bytecode version {attr.since}, targeting {version}")
                elif value != attr.default_for(op.operands) and not (
                        attr.kind is AttrKind.BOOL_ARRAY and not any(value)):
                    at(op, f"attribute '{attr.name}' requires bytecode version {attr.since}+, "
                           f"but targeting {version}")
            for operand in spec.operands:
                if operand.since > version and op.operands.get(operand.name):
                    at(op, f"optional operand '{operand.name}' is provided but requires "
                           f"bytecode version {operand.since}, targeting {version}")
    return found

