"""Run one fuzz input through the reader and check what must hold for any bytes at all.

For every input:
* the strict load (`lazy_debug=False`) returns a Module or raises DecodeError: any other
  exception is a *foreign* exception (a tilebc bug), recorded with its traceback;
* the default (lazy-debug) load, once every location is read, ends the same way (same message and
  offset on rejection);
* the careful reader alone (fast decoder off) ends the same way, and when both accept they build
  the same IR (`ir_signature`);
* when they accept, all three record the same decode warnings (lenient readings, each once);
* the time taken is recorded (the budget is < 1 s per input);
* a decoded module then goes through the verifier and the printer: the verifier may raise only
  VerificationError (recorded as `invalid`), the printer nothing at all.

`NvidiaOracle` runs tileirdisasm on inputs for the accept/reject differential (NVIDIA accepts =>
we accept; NVIDIA rejects => we reject), and `classify` triages each disagreement.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Tuple

import tilebc
from tilebc.binary.reader import ModuleReader
from tilebc.gcpause import collection_paused


@dataclass
class Outcome:
    accepted: bool
    message: Optional[str] = None     # DecodeError message when rejected
    offset: Optional[int] = None
    foreign: Optional[str] = None     # traceback of an exception that is not a DecodeError
    problems: List[str] = field(default_factory=list)  # broken invariants (all must stay empty)
    seconds: float = 0.0              # wall time of the strict load
    cpu_seconds: float = 0.0          # CPU time of it (immune to other processes on the machine)
    invalid: Optional[str] = None     # VerificationError message of a module that decodes
    text: Optional[str] = None        # our disassembly of a decoded module
    warnings: int = 0                 # decode warnings (lenient readings) of a decoded module

    @property
    def valid(self) -> bool:
        """Decodes and verifies: what tilebc.load (verify on) accepts."""
        return self.accepted and self.invalid is None


def ir_signature(module: tilebc.Module):
    """A comparable picture of a module: ops, attributes, types, value numbering, locations.

    Types and op locations appear as indices into a table of their distinct values (by equality,
    in order of first appearance) that ends the signature: two signatures are equal exactly when
    the values are position by position, and each pair of distinct types is compared once rather
    than at every value (most of the cost of comparing two decodings of a file).

    The function bodies are one flat list, each sequence (block arguments, ops, regions, blocks,
    results) preceded by its length, so equal lists mean equal trees: no tuple per op and block
    to build and compare."""
    numbers = {}   # id of a value -> its number, in order of definition
    by_id = {}     # id of a type or location -> its index in `table`
    by_value = {}  # type or location -> its index (equal values share one)
    table = []
    flat = []
    append = flat.append

    def intern(item):
        index = by_value.get(item)
        if index is None:
            index = by_value[item] = len(table)
            table.append(item)
        by_id[id(item)] = index
        return index

    def define_all(values):
        append(len(values))
        for value in values:
            numbers[id(value)] = len(numbers)
            index = by_id.get(id(value.type))
            append(intern(value.type) if index is None else index)

    def block(b):
        define_all(b.args)
        ops = b.ops
        append(len(ops))
        for o in ops:
            append(o.spec.opcode)
            append(o.offset)
            operands = []
            for name, group in o.operands.items():
                if group is None:
                    operands.append((name, None))
                elif isinstance(group, tuple):
                    operands.append((name, tuple([numbers[id(v)] for v in group])))
                else:
                    operands.append((name, numbers[id(group)]))
            append(tuple(operands))
            append(tuple(o.attrs.items()))
            regions = o.regions
            append(len(regions))
            for region in regions:
                blocks = region.blocks
                append(len(blocks))
                for inner in blocks:
                    block(inner)
            define_all(o.results)  # after the regions: their values are numbered first
            loc = o.loc
            index = by_id.get(id(loc))
            append(intern(loc) if index is None else index)

    # Many small objects: collections triggered while building would only rescan the modules
    # being compared (tilebc/gcpause.py).
    with collection_paused():
        functions = []
        for f in module.functions:
            functions.append((f.name, f.type, f.optimization_hints, f.arg_attrs, f.loc, f.offset))
            block(f.body)
    block = None  # it calls itself through its closure: unbound, the cycle is gone at return
    return (module.version, module.producer, module.preview, tuple(module.globals),
            tuple(functions), flat, tuple(table))


def warning_keys(module: tilebc.Module):
    """The decode warnings of a module as a comparable set of (message, offset)."""
    return sorted((w.message, w.offset) for w in getattr(module, "decode_warnings", ()))


def _materialise(module: tilebc.Module) -> None:
    for function in module.functions:
        function.loc
        for op in function.walk():
            op.loc


def _attempt(fn: Callable[[], object]) -> Tuple[Optional[object], Optional[tilebc.DecodeError],
                                                Optional[str]]:
    try:
        return fn(), None, None
    except tilebc.DecodeError as error:
        # Without its traceback: the frames in it would hold this error in a cycle (and, with
        # it, the half-read module), left for the garbage collector.
        return None, error.with_traceback(None), None
    except Exception:  # noqa: BLE001 - exactly what the fuzzer exists to catch
        return None, None, traceback.format_exc(limit=8)


def _careful_load(data: bytes):
    ModuleReader.use_fast_path = False
    try:
        return tilebc.load(data, lazy_debug=False, verify=False)
    finally:
        ModuleReader.use_fast_path = True


def check(data: bytes, *, differential: bool = True) -> Outcome:
    """Decode `data` every way and check the invariants above."""
    # Collections inside would only rescan the modules still being compared (each load would
    # re-enable collection on return); once the check is over they are garbage, collected in one pass.
    with collection_paused():
        return _check(data, differential)


def _check(data: bytes, differential: bool) -> Outcome:
    started, cpu_started = time.perf_counter(), time.thread_time()
    module, error, foreign = _attempt(lambda: tilebc.load(data, lazy_debug=False, verify=False))
    outcome = Outcome(accepted=module is not None, seconds=time.perf_counter() - started,
                      cpu_seconds=time.thread_time() - cpu_started, foreign=foreign)
    if error is not None:
        outcome.message, outcome.offset = error.message, error.offset
        if type(error.offset) is not int or not 0 <= error.offset <= len(data):
            outcome.problems.append(f"error offset {error.offset!r} outside the input")
        if error.category != "malformed":
            outcome.problems.append(f"DecodeError category {error.category!r}")
    if foreign or not differential:
        return outcome

    # The lazy load may report a different error of a file with several (it meets the body errors
    # of later functions before the debug errors of earlier ones); once it has loaded, reading the
    # locations must raise exactly the strict load's error.
    lazy_module, lazy_error, lazy_foreign = _attempt(lambda: tilebc.load(data, verify=False))
    if lazy_module is not None:
        _, lazy_error, lazy_foreign = _attempt(lambda: _materialise(lazy_module))
        if lazy_error is not None and error is not None and (
                (lazy_error.message, lazy_error.offset) != (error.message, error.offset)):
            outcome.problems.append(f"location error {lazy_error} differs from strict {error}")
    if lazy_foreign:
        outcome.foreign = lazy_foreign
    elif (lazy_error is None) != (error is None):
        outcome.problems.append("lazy-debug load and strict load disagree on acceptance")
    elif module is not None and warning_keys(lazy_module) != warning_keys(module):
        outcome.problems.append("lazy-debug load and strict load record different warnings")

    careful_module, careful_error, careful_foreign = _attempt(lambda: _careful_load(data))
    if careful_foreign:
        outcome.foreign = careful_foreign
    elif (careful_module is None) != (module is None):
        outcome.problems.append("fast and careful decoders disagree on acceptance")
    elif error is not None and (careful_error.message, careful_error.offset) != (error.message,
                                                                                 error.offset):
        outcome.problems.append(f"careful decoder error {careful_error} differs from {error}")
    elif module is not None and ir_signature(module) != ir_signature(careful_module):
        outcome.problems.append("fast and careful decoders build different IR")
    elif module is not None and warning_keys(module) != warning_keys(careful_module):
        outcome.problems.append("fast and careful decoders record different warnings")
    if module is not None:
        outcome.warnings = len(module.decode_warnings)
    if module is not None and not outcome.foreign:
        _verify_and_print(module, outcome)
    return outcome


def _verify_and_print(module: tilebc.Module, outcome: Outcome) -> None:
    from tilebc.text import print_module
    from tilebc.verify import verify
    try:
        verify(module)
    except tilebc.VerificationError as error:
        outcome.invalid = error.message
        if error.category != "invalid":
            outcome.problems.append(f"VerificationError category {error.category!r}")
    except Exception:  # noqa: BLE001
        outcome.foreign = traceback.format_exc(limit=8)
        return
    try:
        outcome.text = print_module(module)
    except tilebc.TilebcError as error:  # allowed only for IR the verifier refused
        if outcome.invalid is None:
            outcome.problems.append(f"printer refuses a valid module: {error}")
    except Exception:  # noqa: BLE001 - anything else from the printer is a tilebc bug
        outcome.foreign = traceback.format_exc(limit=8)


# ---- NVIDIA's disassembler as the oracle ---------------------------------------------------------

def find_tileirdisasm() -> Optional[str]:
    try:
        import nvidia  # namespace package of the nvidia-cuda-tileiras wheel
        for entry in getattr(nvidia, "__path__", []):
            candidate = os.path.join(entry, "cu13", "bin", "tileirdisasm")
            if os.access(candidate, os.X_OK):
                return candidate
    except ImportError:
        pass
    return shutil.which("tileirdisasm")


class NvidiaOracle:
    """tileirdisasm's verdict on bytes: (accepted, first line of its diagnostics)."""

    def __init__(self, tool: Optional[str] = None):
        self.tool = tool or find_tileirdisasm()
        self.directory = tempfile.mkdtemp(prefix="tilebc-fuzz-")
        self.runs = 0

    @property
    def available(self) -> bool:
        return self.tool is not None

    def verdict(self, data: bytes) -> Tuple[bool, str]:
        accepted, message, _ = self.run(data, text=False)
        return accepted, message

    def run(self, data: bytes, *, text: bool) -> Tuple[bool, str, Optional[str]]:
        """(accepted, diagnostic, printed text when `text`)."""
        path = os.path.join(self.directory, "input.tilebc")
        with open(path, "wb") as handle:
            handle.write(data)
        command = [self.tool, path]
        if len(data) > 10 and data[10] & 1:
            # tilebc reads a public-preview file as such; tileirdisasm needs the feature named.
            command.insert(1, "--preview=simt")
        try:
            proc = subprocess.run(command, stderr=subprocess.PIPE, timeout=30,
                                  stdout=subprocess.PIPE if text else subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return False, "tileirdisasm timed out (30 s)", None
        self.runs += 1
        printed = proc.stdout.decode("utf-8", "surrogateescape") if text else None
        text = proc.stderr.decode("utf-8", "replace").strip().replace(path, "<input>")
        lines = [line for line in text.splitlines() if "error:" in line] or text.splitlines() or [""]
        # Keep the diagnostic, not the location MLIR prints before it.
        return proc.returncode == 0, lines[0].split("error:", 1)[-1].strip()[:200], printed

    def close(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def compare_text(outcome: Outcome, nvidia_text: str) -> Optional[str]:
    """None when our disassembly equals tileirdisasm's, else the first differing line."""
    ours = (outcome.text or "").splitlines()
    theirs = nvidia_text.splitlines()
    for number, (a, b) in enumerate(zip(ours, theirs), 1):
        if a != b:
            return f"line {number}: ours {a[:120]!r} vs tileirdisasm {b[:120]!r}"
    if len(ours) != len(theirs):
        return f"{len(ours)} lines vs tileirdisasm's {len(theirs)}"
    return None


def text_quirk(ours: str, theirs: str) -> Optional[str]:
    """Why a text difference is tileirdisasm's own doing, or None. Hint names print raw, so a name
    holding a newline breaks both outputs' lines; tileirdisasm then also shifts a space (it starts
    its first line with one), which tilebc does not copy."""
    # The quirk shows when the line holding `optimization_hints=<` (an entry's) or
    # `optimization_hints = <` (an op's) does not end the entry header.
    if "\n" in ours and ours.split() == theirs.split() and re.search(
            r"optimization_hints ?= ?<(?![^\n]*> \{$)", ours, re.MULTILINE):
        return "a hint name holding a newline: tileirdisasm's output shifts spaces around it"
    return None


def printer_gap(ours: str, theirs: str) -> Optional[str]:
    """Why a text difference is a known gap of tilebc's printer (not this harness's to fix), or None."""
    if ours == "" and theirs == "\n":
        return ("a module with no items: tileirdisasm prints one empty line, tilebc's printer "
                "nothing (tilebc.text owner)")
    return None


# Text differential on inputs both sides accept: fn(outcome, tileirdisasm_text) -> None or a difference.
TEXT_COMPARE: Optional[Callable[[Outcome, str], Optional[str]]] = compare_text


# Known, triaged differences: (our message pattern, NVIDIA accepts?, category, why).
# "stricter": NVIDIA accepts bytes that break the format and the default (lenient) reader still
# refuses them (format_spec.md §16). The rules NVIDIA does not check and the default reader reads
# as NVIDIA does (padding, table order, leftover bytes, flag bits, ...) are no longer
# disagreements: they raise only with strict=True, which the differential does not use.
TRIAGE: List[Tuple[str, bool, str, str]] = [
    # Every other class NVIDIA accepts that the runs met is read as NVIDIA reads it. A new row
    # needs a reason the default reader must keep refusing (garbage, unsafe) and a §16 entry.
    (r"unknown attribute tag 13$", True, "stricter",
     "attribute tag 13 (unknown to the format): tileirdisasm crashes (SIGSEGV) on files with it "
     "and accepted this one by chance"),
]


# NVIDIA's reader runs MLIR's type and op verifiers while it reads; tilebc's reader only decodes
# and leaves those rules to the verifier (tilebc.verify, VerificationError, category "invalid").
VERIFIER_MESSAGES = (r"'cuda_tile\.[\w.]+' op ", r"powers? of two", r"mapped at least twice",
                     r"must have positive length", r"invalid operation debug info scope",
                     r"failed to get result type", r"strictly positive constant",
                     r"outside of tensor view dimensions")


def _rule(message: str) -> str:
    """One row per rule: numbers and quoted names dropped."""
    return re.sub(r"\d+", "N", re.sub(r"'[^']*'", "'…'", message))[:120]


def classify(ours: Outcome, nvidia_accepts: bool, nvidia_message: str) -> Tuple[str, str]:
    """(category, explanation) of a disagreement; category 'untriaged' needs a person."""
    if nvidia_accepts and ours.accepted and ours.invalid is not None:
        return "verifier", (f"decodes but tilebc.verify rejects it ({_rule(ours.invalid)}); "
                            "tileirdisasm does not run that rule while reading")
    if nvidia_accepts and not ours.accepted:
        for pattern, accepts, category, why in TRIAGE:
            if accepts and re.match(pattern, ours.message or ""):
                return category, why
        return "untriaged", f"NVIDIA accepts; tilebc: {ours.message}"
    if re.search(r"requires at least one enabled preview feature", nvidia_message):
        return "looser", ("preview-tagged file without an enabled preview feature: tilebc does not "
                          "model preview features (format_spec.md section 16)")
    for pattern in VERIFIER_MESSAGES:
        if re.search(pattern, nvidia_message):
            return "invalid", ("NVIDIA's reader applies a verifier rule tilebc.verify lacks: "
                               f"{_rule(nvidia_message)}")
    return "untriaged", f"NVIDIA rejects ({nvidia_message}); tilebc accepts"
