"""Fuzzing the text side: mutations of real Tile IR text and the checks every input must pass.

The corpus is NVIDIA's disassembly of the cuTile fixtures (`fixtures/bytecode/*/*.dis`, `.dis-g`)
plus the hand-written MLIR-form files in `tests/text_corpus/`. Each mutator takes the text, a random
source (`random.Random`) and the corpus, and returns new text; a mutator picks its spot as the
first match after a random position rather than listing every match of the text.

`check(text, version)` runs `tilebc.text.assemble(text, version, verify=True)`; the input must
either assemble or raise a TilebcError subclass whose position (line:col) lies inside the text.
Anything else (a foreign exception, RecursionError included) is a tilebc bug. An input that
assembles must print, and print -> parse -> print must give the same text; its bytes must load.
"""
from __future__ import annotations

import random
import re
import signal
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import tilebc
from tilebc.errors import TilebcError

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "bytecode"
TEXT_CORPUS = ROOT / "tests" / "text_corpus"
VERSIONS = ("13.1", "13.2", "13.3", "13.4", "13.5")
_VERSION_IN_NAME = re.compile(r"-(13\.[1-5])\.dis(?:-g)?$")

Entry = Tuple[str, str, str]  # (name, version, text)


def corpus(max_chars: int = 200_000) -> List[Entry]:
    """(name, version, text) of every fixture disassembly and text-corpus file, smallest first."""
    found: List[Entry] = []
    paths = sorted(FIXTURES.glob("*/*.dis")) + sorted(FIXTURES.glob("*/*.dis-g"))
    for path in paths:
        match = _VERSION_IN_NAME.search(path.name)
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        if match and len(text) <= max_chars:
            found.append((path.name, match.group(1), text))
    for path in sorted(TEXT_CORPUS.glob("*.mlir")):
        found.append((path.name, "13.5", path.read_text(encoding="utf-8")))
    if not found:
        raise RuntimeError(f"no text corpus under {FIXTURES} or {TEXT_CORPUS}")
    found.sort(key=lambda e: (len(e[2]), e[0]))
    return found


# ---- tokens (an independent, rough split: the mutators must not trust the lexer under test) ------

_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[%@#!]?[\w.$-]+(?:#\d+)?|->|\S')
_NUMBER = re.compile(r"(?<![\w.%#@])-?(?:0x[0-9A-Fa-f]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)(?![\w.])")
_IDENT = re.compile(r"(?<![\w%#@!$.])[A-Za-z_][\w.]*")
_VALUE = re.compile(r"%[\w$.-]+")
_DIMS = re.compile(r"(?:tile|tensor_view)<((?:\??\d*x)+)")
_ATTR_VALUE = re.compile(r"(\b\w+ = )([^,>}\n]+)")
_ALIAS_DEF = re.compile(r"^(#[\w.]+) = (.*)$", re.MULTILINE)
_ALIAS_REF = re.compile(r"#(?:loc|di_\w+)\d*\b")


def _spans(pattern: re.Pattern, text: str) -> List[Tuple[int, int]]:
    return [m.span() for m in pattern.finditer(text)]


def _pick(pattern: re.Pattern, text: str, rng: random.Random,
          group: int = 0) -> Optional[Tuple[int, int]]:
    """A random match of `pattern`: the first one at or after a random position, wrapping around.
    Listing every match of a 10 KB text for each pick cost most of a fuzz pass; this favours
    matches after long gaps, which does not matter to a fuzzer."""
    at = rng.randrange(len(text) + 1)
    found = pattern.search(text, at) or pattern.search(text)
    return found.span(group) if found else None


def _replace_span(text: str, span: Tuple[int, int], new: str) -> str:
    return text[:span[0]] + new + text[span[1]:]


NUMBERS = (
    "0", "-0", "1", "-1", "2147483647", "2147483648", "-2147483649", "4294967296",
    "9223372036854775807", "9223372036854775808", "-9223372036854775809", "18446744073709551616",
    "1" + "0" * 400, "-" + "9" * 5000, "0x0", "0xFFFFFFFF", "0x7FC00000", "0xFFFFFFFFFFFFFFFFFFFF",
    "0x", "0X1", "1.5", "-0.0", "1e308", "1e309", "-1e309", "1e-400", "1.0e+38", "3.4e39",
    "6.5e4", "1.", ".5", "1e", "1e+", "nan", "NaN", "-nan", "inf", "-inf", "Infinity", "0x7FF8",
    "00", "007", "1_000", "0b101", "1.0f", "+1", "--1", "1e99999999999",
)

IDENTS = ("tile", "ptr", "token", "i1", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64",
          "tf32", "f8E4M3FN", "f8E5M2", "loc", "unknown", "callsite", "fused", "at", "in",
          "entry", "global", "module", "return", "yield", "continue", "break", "if", "else",
          "for", "loop", "constant", "attributes", "optimization_hints", "iter_values", "to",
          "step", "token", "signed", "unsigned", "true", "false", "x", "_", "cuda_tile.module",
          "cuda_tile.tile", "tensor_view", "partition_view", "strided_view", "dim_map", "strides",
          "shape", "padding_value", "div_by", "bounded", "same_elements", "every", "along")

DIMS = ("0", "1", "3", "-1", "-4", "?", "", "65536", "4294967296", "99999999999999999999",
        "1" + "0" * 100, "00", "0x10")


# ---- mutators --------------------------------------------------------------------------------------

def delete_token(text: str, rng: random.Random, pool: Sequence[Entry]) -> str:
    for _ in range(rng.choice((1, 1, 1, 2, 5))):
        span = _pick(_TOKEN, text, rng)
        if span is None:
            break
        text = _replace_span(text, span, "")
    return text


def duplicate_token(text: str, rng: random.Random, pool: Sequence[Entry]) -> str:
    span = _pick(_TOKEN, text, rng)
    if span is None:
        return text
    start, end = span
    copies = rng.choice((1, 1, 2, 10))
    return text[:end] + (" " + text[start:end]) * copies + text[end:]


def swap_tokens(text: str, rng: random.Random, pool: Sequence[Entry]) -> str:
    """A token and the next one (or one anywhere in the text) change places."""
    first = _pick(_TOKEN, text, rng)
    if first is None:
        return text
    following = _TOKEN.search(text, first[1])
    if rng.random() < 0.6 and following is not None:
        second = following.span()
    else:
        second = _pick(_TOKEN, text, rng)
    a, b = sorted((first, second))
    if a[1] > b[0]:  # the same token, or overlapping ones
        return text
    return text[:a[0]] + text[b[0]:b[1]] + text[a[1]:b[0]] + text[a[0]:a[1]] + text[b[1]:]


def replace_number(text: str, rng: random.Random, pool: Sequence[Entry]) -> str:
    for _ in range(rng.choice((1, 1, 3))):
        span = _pick(_NUMBER, text, rng)
        if span is None:
            break
        text = _replace_span(text, span, rng.choice(NUMBERS))
    return text


def replace_ident(text: str, rng: random.Random, pool: Sequence[Entry]) -> str:
    span = _pick(_IDENT, text, rng)
    if span is None:
        return text
    if rng.random() < 0.5:
        new = rng.choice(IDENTS)
    else:  # another word of the same text: a type or keyword where a different one belongs
        new = text[slice(*_pick(_IDENT, text, rng))]
    return _replace_span(text, span, new)


def replace_value(text: str, rng: random.Random, pool: Sequence[Entry]) -> str:
    """SSA names: another name of the file (use before definition, redefinition), a result
    group index, an undefined name."""
    span = _pick(_VALUE, text, rng)
    if span is None:
        return text
    choice = rng.random()
    if choice < 0.5:
        new = text[slice(*_pick(_VALUE, text, rng))]
    elif choice < 0.7:
        new = text[slice(*span)] + rng.choice(("#0", "#1", "#99", "#-1", "#"))
    else:
        new = rng.choice(("%undefined", "%", "%0", "%arg99", "%-", "%$", "%" + "a" * 1000))
    return _replace_span(text, span, new)


BRACKETS = "()[]{}<>\"\\,:=?^*+-"
_BRACKET = re.compile("[" + re.escape(BRACKETS) + "]")


def bracket_damage(text: str, rng: random.Random, pool: Sequence[Entry]) -> str:
    """Insert or delete brackets, quotes, backslashes and punctuation."""
    for _ in range(rng.choice((1, 1, 2, 4))):
        span = _pick(_BRACKET, text, rng) if rng.random() < 0.5 else None
        if span is not None:
            text = _replace_span(text, span, "")
        else:
            at = rng.randrange(len(text) + 1)
            text = text[:at] + rng.choice(BRACKETS) + text[at:]
    return text


_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
ESCAPES = ("\\", "\\\\", "\\\"", "\\n", "\\t", "\\0", "\\x", "\\G", "\\zz", "\\FF", "\\C3\\A9",
           "\\C3", "\\FF\\FE", "\\00", "\u00e9", "\U0001F600", "\x00", "\r", "\ud800", "\t")


def escape_damage(text: str, rng: random.Random, pool: Sequence[Entry]) -> str:
    span = _pick(_STRING, text, rng)
    if span is None:
        at = rng.randrange(len(text) + 1)
        return text[:at] + '"' + rng.choice(ESCAPES) + '"' + text[at:]
    start, end = span
    at = rng.randrange(start + 1, end)
    return text[:at] + rng.choice(ESCAPES) + text[at:]


def truncate(text: str, rng: random.Random, pool: Sequence[Entry]) -> str:
    return text[:rng.randrange(len(text))] if text else text


def splice_lines(text: str, rng: random.Random, pool: Sequence[Entry]) -> str:
    """Lines of another file (any version, with or without -g) replace or join this file's."""
    ours = text.split("\n")
    _, _, other_text = rng.choice(pool)
    theirs = other_text.split("\n")
    start = rng.randrange(len(theirs))
    piece = theirs[start:start + rng.choice((1, 1, 2, 5))]
    at = rng.randrange(len(ours))
    drop = rng.choice((0, 1, 1, 3))
    return "\n".join(ours[:at] + piece + ours[at + drop:])


def shape_edit(text: str, rng: random.Random, pool: Sequence[Entry]) -> str:
    """Dimensions of tile<...>/tensor_view<...> types: 0, negative, huge, dynamic, missing."""
    span = _pick(_DIMS, text, rng, group=1)
    if span is None:
        return text
    start, end = span
    dims = text[start:end].split("x")[:-1]
    dims[rng.randrange(len(dims))] = rng.choice(DIMS)
    if rng.random() < 0.2:
        dims.append(rng.choice(DIMS))
    return text[:start] + "".join(d + "x" for d in dims) + text[end:]


ATTR_VALUES = ("0", "-1", "[]", "[1, 2]", "{}", "\"\"", "true", "#cuda_tile.bogus<1>", "#loc999",
               "loc(unknown)", "<", "[[[", "18446744073709551616", "nan", "unknown", "@f",
               "#cuda_tile.di_file<\"a\" in \"b\">", "1.5 : f32", "1 : i1", "2 : i1", "-3 : i8")


def attr_value_edit(text: str, rng: random.Random, pool: Sequence[Entry]) -> str:
    span = _pick(_ATTR_VALUE, text, rng, group=2)
    if span is None:
        return text
    return _replace_span(text, span, rng.choice(ATTR_VALUES))


def loc_damage(text: str, rng: random.Random, pool: Sequence[Entry]) -> str:
    """-g text: alias cycles, undefined aliases, deleted or duplicated definitions, refs swapped."""
    defs = list(_ALIAS_DEF.finditer(text))
    refs = _spans(_ALIAS_REF, text)
    choice = rng.random()
    if defs and choice < 0.25:  # a definition refers to itself or to a later alias: a cycle
        target = rng.choice(defs)
        other = rng.choice(defs).group(1)
        body = rng.choice((f"loc({other})", f"loc(callsite({other} at {target.group(1)}))",
                           f"#cuda_tile.di_loc<loc({other}) in {target.group(1)}>",
                           f"#cuda_tile.di_compile_unit<file = {target.group(1)}>"))
        return _replace_span(text, target.span(2), body)
    if defs and choice < 0.4:  # delete a definition: its uses are undefined
        return _replace_span(text, rng.choice(defs).span(), "")
    if defs and choice < 0.5:  # define twice
        line = rng.choice(defs).group()
        return text + ("\n" if not text.endswith("\n") else "") + line + "\n"
    if refs and choice < 0.8:
        new = rng.choice(("#loc9999", "#di_file", "#loc", "#di_subprogram", "#nope", "#loc-1",
                          text[slice(*rng.choice(refs))]))
        return _replace_span(text, rng.choice(refs), new)
    # A trailer where none belongs, or a malformed one.
    at = rng.randrange(len(text) + 1)
    return text[:at] + rng.choice((" loc(", " loc(#loc)", " loc(unknown", " loc(\"f\":1:2)",
                                   " loc(callsite(#loc at))", " loc(fused[#loc, #loc1])",
                                   " loc(\"n\"(\"f\":1:1))")) + text[at:]


def deep_nesting(text: str, rng: random.Random, pool: Sequence[Entry]) -> str:
    """10^3..10^5 opening (or balanced) brackets at a random place."""
    depth = rng.choice((1000, 10_000, 100_000))
    opening, closing = rng.choice((("(", ")"), ("{", "}"), ("[", "]"), ("<", ">"),
                                   ("tile<", ">"), ("loc(callsite(", " at #loc))"),
                                   ("[", "],")))
    body = opening * depth + (closing * depth if rng.random() < 0.5 else "")
    at = rng.randrange(len(text) + 1)
    return text[:at] + body + text[at:]


def long_line(text: str, rng: random.Random, pool: Sequence[Entry]) -> str:
    """A very long token or line: identifier, SSA name, string, number, spaces, comment."""
    size = rng.choice((10_000, 200_000))
    piece = rng.choice(("a" * size, "%" + "v" * size, "\"" + "s" * size + "\"", "9" * size,
                        " " * size, "// " + "c" * size, "," * size, "x" * size, "1x" * size))
    at = rng.randrange(len(text) + 1)
    return text[:at] + piece + text[at:]


def odd_characters(text: str, rng: random.Random, pool: Sequence[Entry]) -> str:
    """Control characters, non-ASCII letters, lone surrogates, BOM, CR line ends."""
    at = rng.randrange(len(text) + 1)
    piece = rng.choice(("\x00", "\r", "\r\n", "\ufeff", "\u00e9", "\u0660", "\ud800", "\x0b",
                        "\x0c", "\u2028", "ﬁ", "٣", "\t"))
    return text[:at] + piece + text[at:]


MUTATORS: Dict[str, Callable[[str, random.Random, Sequence[Entry]], str]] = {
    f.__name__: f for f in (
        delete_token, duplicate_token, swap_tokens, replace_number, replace_ident, replace_value,
        bracket_damage, escape_damage, truncate, splice_lines, shape_edit, attr_value_edit,
        loc_damage, deep_nesting, long_line, odd_characters)
}
# Cheap and structured mutators more often; the huge-input ones (deep nesting, long lines) rarer
# so a CI pass stays fast and still meets every kind.
WEIGHTS = {name: 1.0 for name in MUTATORS}
WEIGHTS.update(deep_nesting=0.15, long_line=0.15, truncate=0.5)


def mutate(text: str, rng: random.Random, pool: Sequence[Entry]) -> Tuple[str, List[str]]:
    """One to three mutations; returns the text and the mutator names used."""
    names = list(MUTATORS)
    weights = [WEIGHTS[n] for n in names]
    used = rng.choices(names, weights, k=rng.choice((1, 1, 1, 2, 3)))
    for name in used:
        text = MUTATORS[name](text, rng, pool)
    return text, used


# ---- the checks --------------------------------------------------------------------------------------

@dataclass
class Outcome:
    accepted: bool
    error: Optional[str] = None       # class name and message when rejected
    foreign: Optional[str] = None     # traceback of a non-TilebcError exception
    problems: List[str] = field(default_factory=list)
    cpu_seconds: float = 0.0          # CPU time of the assemble step
    check_cpu_seconds: float = 0.0    # CPU time of everything (assemble, print, reparse, load)


def _position_problem(error: TilebcError, text: str) -> Optional[str]:
    """A TextSyntaxError (and a VerificationError of parsed text) must point inside the text."""
    if isinstance(error, tilebc.TextSyntaxError) and error.line is None:
        return f"TextSyntaxError without line:col: {error.message[:200]}"
    if error.line is None:
        return None
    lines = text.split("\n")
    if not 1 <= error.line <= len(lines):
        return f"error line {error.line} outside the text ({len(lines)} lines)"
    if not 1 <= (error.column or 1) <= len(lines[error.line - 1]) + 1:
        return f"error column {error.column} outside line {error.line}"
    return None


class CpuLimit(Exception):
    """Raised by the CPU-time alarm of `check` (never by tilebc)."""


def _alarm(signum, frame):
    raise CpuLimit()


def _arm(seconds: Optional[float]) -> bool:
    """Start a CPU-time alarm (main thread on POSIX only); a hang then ends as a problem."""
    if not seconds or not hasattr(signal, "ITIMER_VIRTUAL") or \
            threading.current_thread() is not threading.main_thread():
        return False
    signal.signal(signal.SIGVTALRM, _alarm)
    signal.setitimer(signal.ITIMER_VIRTUAL, seconds)
    return True


def check(text: str, version: str = "13.5", cpu_limit: Optional[float] = 5.0) -> Outcome:
    """Assemble `text`; on success print, reparse, reprint (same text) and load the bytes.
    An input still running after `cpu_limit` s of CPU is stopped and recorded as a problem."""
    armed = _arm(cpu_limit)
    try:
        return _check(text, version)
    except CpuLimit:
        return Outcome(accepted=False, problems=[f"stopped after {cpu_limit} s of CPU (a hang?)"],
                       cpu_seconds=cpu_limit, check_cpu_seconds=cpu_limit)
    finally:
        if armed:
            signal.setitimer(signal.ITIMER_VIRTUAL, 0)


def _check(text: str, version: str) -> Outcome:
    from tilebc.text import parse_module, print_module
    from tilebc.verify import verify

    cpu = time.process_time()
    outcome = Outcome(accepted=False)
    try:
        module = parse_module(text, "<fuzz>")
        verify(module)
        data = tilebc.dump(module, version)
        outcome.accepted = True
    except TilebcError as error:
        outcome.error = f"{type(error).__name__}: {error.message}"
        problem = _position_problem(error, text)
        if problem:
            outcome.problems.append(problem)
    except CpuLimit:
        raise
    except Exception:  # noqa: BLE001 - what the fuzzer exists to catch (RecursionError too)
        outcome.foreign = traceback.format_exc(limit=-8)
    outcome.cpu_seconds = time.process_time() - cpu
    if outcome.accepted:
        try:
            printed = print_module(module)
            again = print_module(parse_module(printed, "<printed>"))
            if again != printed:
                outcome.problems.append("print -> parse -> print is not a fixed point: "
                                        + _first_difference(printed, again))
            tilebc.load(data, verify=False)
        except TilebcError as error:
            outcome.problems.append(f"assembled module fails afterwards: {error}")
        except CpuLimit:
            raise
        except Exception:  # noqa: BLE001
            outcome.foreign = traceback.format_exc(limit=-8)
    outcome.check_cpu_seconds = time.process_time() - cpu
    return outcome


def _first_difference(a: str, b: str) -> str:
    for number, (x, y) in enumerate(zip(a.split("\n"), b.split("\n")), 1):
        if x != y:
            return f"line {number}: {x[:120]!r} vs {y[:120]!r}"
    return f"{a.count(chr(10))} lines vs {b.count(chr(10))}"
