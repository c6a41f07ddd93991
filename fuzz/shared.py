"""Inputs that share structure on purpose, and the check each must pass.

Random mutation of real files almost never builds sharing: a table entry referred to twice by the
next one, and that one twice by the next. These generators do, from a seeded `random.Random`:

* `type_dag`: a type table whose function types refer to earlier entries (mostly the latest ones,
  several times), used as the entry's signature, as a parameter type or inside a type attribute;
* `debug_dag`: a debug section whose call sites refer to earlier locations (`callsite(a at b)`,
  often a = b), lexical-block chains, and ops located anywhere in that DAG;
* `attr_deep`: optimization hints whose dictionaries and arrays nest, some past max_nesting;
* `alias_dag`: the `-g` text of a kernel whose `#locN = loc(callsite(#locA at #locB))` aliases form
  a DAG (sometimes a cycle or a dangling name), with inline call sites nested deep;
* `regions`: the text of a kernel with `for`/`if` regions nested deep and blocks of many ops.

`check` runs an input through every command a user has (load, verify, dis, dis -g, convert = dump,
asm = parse + dump, and the text round trip) and records foreign exceptions (anything but a
TilebcError) and the CPU time and memory it took. The builders of two hostile files
(`callsite_chain`, `function_type_chain`) live here too, for the tests.
"""
from __future__ import annotations

import random
import struct
import time
import traceback
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import tilebc
from tilebc.binary.primitives import Writer
from tilebc.binary.writer import encode_offset_table
from tilebc.verify import diagnostics

MAGIC = b"\x7fTileIR\x00"
FUNC, DEBUG, TYPE, STRING = 2, 3, 5, 1
RETURN = b"\x5c\x00\x00"        # return: no result types, no operands
MAKE_TOKEN = b"\x44\x00"        # %t = make_token : token (result type 0 here: see TYPES)

# The leaf types every generated table starts with.
LEAF_TYPES = (
    b"\x11",                     # [0] token
    b"\x07",                     # [1] f32
    b"\x0d\x01\x00",             # [2] tile<f32>
    b"\x03",                     # [3] i32
    b"\x0d\x03\x00",             # [4] tile<i32>
)
TOKEN, TILE_F32, TILE_I32 = 0, 2, 4
# [0] entry name, [1] hints key, [2] dictionary key, [3] file, [4] directory, [5..] more entries
STRINGS = (b"k", b"sm_90", b"x", b"f.py", b"/src") + tuple(b"k%d" % n for n in range(1, 8))


# ---- byte builders -------------------------------------------------------------------------------

def varint(value: int) -> bytes:
    writer = Writer()
    writer.varint(value)
    return bytes(writer.buf)


def make_file(version: Tuple[int, int], sections: Sequence[Tuple[int, bytes, int]]) -> bytes:
    """Header, then each (section id, payload, alignment) aligned with 0xCB, then the end byte."""
    writer = Writer()
    writer.raw(MAGIC)
    writer.u8(version[0])
    writer.u8(version[1])
    writer.fixed(0, 2)
    for section_id, payload, align in sections:
        writer.u8(section_id | 0x80)
        writer.varint(len(payload))
        writer.varint(align)
        while len(writer.buf) % align:
            writer.u8(0xCB)
        writer.raw(payload)
    writer.u8(0)
    return bytes(writer.buf)


def table(blobs: Sequence[bytes], width: int = 4, align: int = 4) -> bytes:
    return bytes(encode_offset_table(list(blobs), width, align))


def debug_section(functions: Sequence[Sequence[int]], attrs: Sequence[bytes]) -> bytes:
    """count, pad4, first index of each function (u32); count, pad8, indices (u64); count, pad4,
    attribute offsets (u32), attributes."""
    writer = Writer()
    writer.varint(len(functions))
    writer.align(4)
    first = 0
    for indices in functions:
        writer.fixed(first, 4)
        first += len(indices)
    writer.varint(first)
    writer.align(8)
    for indices in functions:
        for index in indices:
            writer.fixed(index, 8)
    writer.raw(bytes(encode_offset_table(list(attrs), 4, 4, base=len(writer.buf))))
    return bytes(writer.buf)


def func_entry(version: Tuple[int, int], signature: int, *, loc: int = 0, body: bytes = RETURN,
               hints: Optional[bytes] = None, name: int = 0) -> bytes:
    """name, signature, flags (kernel; 0x04 = hints before 13.5), location, [hints], [13.5:
    empty argument attributes], body length, body."""
    flags = 0x02 | (0x04 if hints is not None and version < (13, 5) else 0)
    out = varint(name) + varint(signature) + bytes([flags]) + varint(loc)
    if version >= (13, 5):
        out += (hints if hints is not None else b"\x0b\x00") + b"\x06\x00"
    elif hints is not None:
        out += hints
    return out + varint(len(body)) + body


def module_bytes(version: Tuple[int, int], types: Sequence[bytes], entries: Sequence[bytes],
                 debug: Optional[bytes] = None, strings: Sequence[bytes] = STRINGS) -> bytes:
    sections = [(FUNC, varint(len(entries)) + b"".join(entries), 8)]
    if debug is not None:
        sections.append((DEBUG, debug, 8))
    sections += [(TYPE, table(types), 4), (STRING, table(strings), 4)]
    return make_file(version, sections)


def function_type(inputs: Sequence[int], results: Sequence[int] = ()) -> bytes:
    return (b"\x10" + varint(len(inputs)) + b"".join(map(varint, inputs))
            + varint(len(results)) + b"".join(map(varint, results)))


# Debug attributes (1-based indices): file, compile unit, subprogram "k" (linkage "k"), loc in it.
def _debug_base(version: Tuple[int, int]) -> List[bytes]:
    flags = b"\x00" if version >= (13, 5) else b""
    return [b"\x02\x03\x04",                                  # 1: di_file "f.py" in "/src"
            b"\x01\x01",                                      # 2: di_compile_unit
            b"\x05\x01\x0a\x00\x00\x02\x0a" + flags,          # 3: di_subprogram k, line 10
            b"\x04\x03\x03\x0a\x01"]                          # 4: loc("f.py":10:1) in 3


def call_site(callee: int, caller: int) -> bytes:
    return b"\x06" + varint(callee) + varint(caller)


# ---- hostile files -------------------------------------------------------------------------------

def callsite_chain(depth: int = 50, version: Tuple[int, int] = (13, 3)) -> bytes:
    """A kernel whose `return` is located at #locN, #locK = callsite(#locK-1 at #locK-1): a tree of
    2^depth leaves in a few hundred bytes."""
    attrs = _debug_base(version)
    for _ in range(depth):
        attrs.append(call_site(len(attrs), len(attrs)))
    signature = len(LEAF_TYPES)
    return module_bytes(version, LEAF_TYPES + (function_type([TILE_F32]),),
                        [func_entry(version, signature, loc=1)],
                        debug=debug_section([[4, len(attrs)]], attrs))


def callsite_chain_text(depth: int = 50) -> str:
    """The `-g` text of `callsite_chain`: `#locN = loc(callsite(#locN-1 at #locN-1))`."""
    lines = ["entry @k(%arg0: tile<f32>) {", f"  return loc(#loc{depth + 1})", "} loc(#loc1)",
             '#di_file = #cuda_tile.di_file<"f.py" in "/src">',
             '#loc = loc("f.py":10:1)',
             "#di_compile_unit = #cuda_tile.di_compile_unit<file = #di_file>",
             '#di_subprogram = #cuda_tile.di_subprogram<file = #di_file, line = 10, name = "k", '
             'linkageName = "k", compileUnit = #di_compile_unit, scopeLine = 10>',
             "#loc1 = #cuda_tile.di_loc<#loc in #di_subprogram>"]
    lines += [f"#loc{n} = loc(callsite(#loc{n - 1} at #loc{n - 1}))" for n in range(2, depth + 2)]
    return "\n".join(lines) + "\n"


def function_type_chain(depth: int = 40, version: Tuple[int, int] = (13, 3)) -> bytes:
    """A kernel whose parameter has type T_depth, T_k = (T_k-1, T_k-1) -> (), T_0 = tile<f32>."""
    types = list(LEAF_TYPES)
    previous = TILE_F32
    for _ in range(depth):
        types.append(function_type([previous, previous]))
        previous = len(types) - 1
    types.append(function_type([previous]))
    return module_bytes(version, types, [func_entry(version, len(types) - 1)])


# ---- generators ----------------------------------------------------------------------------------

VERSIONS = ((13, 1), (13, 2), (13, 3), (13, 4), (13, 5))


def _earlier(rng: random.Random, count: int, recent: int = 3) -> int:
    """An index below `count`, mostly one of the last `recent` (that is what makes sharing grow)."""
    if rng.random() < 0.8:
        return max(0, count - 1 - rng.randrange(min(recent, count)))
    return rng.randrange(count)


def type_dag(rng: random.Random) -> bytes:
    version = rng.choice(VERSIONS)
    types = list(LEAF_TYPES)
    for _ in range(rng.randrange(1, 48)):
        inputs = [_earlier(rng, len(types)) for _ in range(rng.choice((1, 2, 2, 2, 3, 4)))]
        results = [_earlier(rng, len(types)) for _ in range(rng.choice((0, 0, 1, 2)))]
        types.append(function_type(inputs, results))
    dag = len(types) - 1
    use = rng.choice(("parameter", "signature", "attribute", "valid"))
    hints = None
    if use == "parameter":
        types.append(function_type([TILE_F32, dag]))
    elif use == "attribute":  # hints {sm_90 = {x = type}}: a type attribute referring to the DAG
        types.append(function_type([TILE_F32]))
        hints = b"\x0b\x01\x01\x0a\x01\x02\x04" + varint(dag)
    elif use == "valid":
        types.append(function_type([TILE_F32, TILE_I32]))
    signature = dag if use == "signature" else len(types) - 1
    entries = [func_entry(version, signature, hints=hints, name=4 + n if n else 0)
               for n in range(rng.choice((1, 1, 2, 8)))]
    return module_bytes(version, types, entries)


def debug_dag(rng: random.Random) -> bytes:
    version = rng.choice(((13, 3), (13, 5)))
    attrs = _debug_base(version)
    scopes = [3]
    locations = [4]
    for _ in range(rng.randrange(1, 80)):
        roll = rng.random()
        if roll < 0.1:  # a lexical block in the latest scope, and a loc in it
            attrs.append(b"\x03" + varint(scopes[-1]) + b"\x01" + varint(rng.randrange(1, 99))
                         + varint(rng.randrange(99)))
            scopes.append(len(attrs))
            attrs.append(b"\x04" + varint(len(attrs)) + b"\x03" + varint(rng.randrange(1, 99))
                         + varint(rng.randrange(99)))
            locations.append(len(attrs))
            continue
        callee = locations[_earlier(rng, len(locations))]
        caller = callee if roll < 0.7 else locations[_earlier(rng, len(locations))]
        if rng.random() < 0.03:
            callee = 0  # unknown
        attrs.append(call_site(callee, caller))
        locations.append(len(attrs))
    ops = rng.randrange(0, 12)
    body = MAKE_TOKEN * ops + RETURN
    # The entry's own location is a loc in the subprogram (or, sometimes, a call site: invalid).
    own = 4 if rng.random() < 0.9 else locations[-1]
    indices = [own] + [locations[_earlier(rng, len(locations))] for _ in range(ops + 1)]
    return module_bytes(version, LEAF_TYPES + (function_type([TILE_F32]),),
                        [func_entry(version, len(LEAF_TYPES), loc=1, body=body)],
                        debug=debug_section([indices], attrs))


def _nested_attr(rng: random.Random, depth: int, budget: List[int]) -> bytes:
    """An attribute nested `depth` deep: arrays and one-key dictionaries, with at most about
    `budget[0]` leaves in all (attributes are inline in the bytes: no sharing, only depth)."""
    if depth == 0 or budget[0] <= 0:
        budget[0] -= 1
        return rng.choice((b"\x01\x03" + varint(7), b"\x03\x01", b"\x05\x02"))  # i32 7, true, "x"
    if rng.random() < 0.5:
        width = 2 if budget[0] > 1 and rng.random() < 0.3 else 1
        return b"\x06" + varint(width) + b"".join(_nested_attr(rng, depth - 1, budget)
                                                  for _ in range(width))
    return b"\x0a\x01\x02" + _nested_attr(rng, depth - 1, budget)  # {x = …}


def attr_deep(rng: random.Random) -> bytes:
    version = rng.choice(VERSIONS)
    depth = rng.choice((1, 4, 16, 40, 62, 63, 64, 65, 80))
    hints = b"\x0b\x01\x01\x0a\x01\x02" + _nested_attr(rng, depth, [rng.choice((1, 8, 64))])
    types = LEAF_TYPES + (function_type([TILE_F32]),)
    return module_bytes(version, types, [func_entry(version, len(LEAF_TYPES), hints=hints)])


def alias_dag(rng: random.Random) -> str:
    count = rng.randrange(1, 120)
    ops = rng.randrange(0, 8)
    names = ["#loc1"]
    definitions = []
    for number in range(2, count + 2):
        callee = names[_earlier(rng, len(names))]
        caller = callee if rng.random() < 0.6 else names[_earlier(rng, len(names))]
        definitions.append(f"#loc{number} = loc(callsite({callee} at {caller}))")
        names.append(f"#loc{number}")
    if rng.random() < 0.05:  # a cycle
        definitions.append(f"#loc{count + 2} = loc(callsite(#loc{count + 2} at #loc1))")
    if rng.random() < 0.05:  # a dangling name
        definitions.append(f"#loc{count + 3} = loc(callsite(#nowhere at #loc1))")
    rng.shuffle(definitions)

    def inline(depth: int) -> str:
        if depth == 0:
            return rng.choice(names)
        return f"callsite({inline(depth - 1)} at {rng.choice(names)})"

    body = []
    for index in range(ops):
        where = rng.choice(names) if rng.random() < 0.7 else inline(rng.choice((1, 8, 40, 70)))
        body.append(f"  %t{index} = make_token : token loc({where})")
    lines = ["entry @k(%arg0: tile<f32>) {", *body, f"  return loc({rng.choice(names)})",
             "} loc(#loc1)",
             '#di_file = #cuda_tile.di_file<"f.py" in "/src">',
             '#loc = loc("f.py":10:1)',
             "#di_compile_unit = #cuda_tile.di_compile_unit<file = #di_file>",
             '#di_subprogram = #cuda_tile.di_subprogram<file = #di_file, line = 10, name = "k", '
             'linkageName = "k", compileUnit = #di_compile_unit, scopeLine = 10>',
             "#loc1 = #cuda_tile.di_loc<#loc in #di_subprogram>", *definitions]
    return "\n".join(lines) + "\n"


def regions(rng: random.Random) -> str:
    depth = rng.choice((1, 3, 10, 30, 60, 63, 64, 70, 100))
    width = rng.choice((1, 4, 50, 200))
    wide = rng.randrange(depth)  # the one level that holds `width` ops
    lines = ["entry @k(%arg0: tile<i32>, %arg1: tile<i1>) {",
             "  %c0 = constant <i32: 0> : tile<i32>",
             "  %c1 = constant <i32: 1> : tile<i32>"]
    closers = []
    for level in range(depth):
        pad = "  " * (level + 1)
        if rng.random() < 0.5:
            lines.append(f"{pad}for %i{level} in (%c0 to %arg0, step %c1) : tile<i32> {{")
            closers.append(f"{pad}  continue\n{pad}}}")
        else:
            lines.append(f"{pad}if %arg1 {{")
            closers.append(f"{pad}  yield\n{pad}}}")
        if level == wide:
            lines += [f"{pad}  %w{n} = addi %c1, %c1 : tile<i32>" for n in range(width)]
    lines += [f"  {'  ' * depth}%t = make_token : token"]
    lines += reversed(closers)
    lines += ["  return", "}"]
    return "\n".join(lines) + "\n"


GENERATORS: Dict[str, Callable[[random.Random], object]] = {
    "type_dag": type_dag, "debug_dag": debug_dag, "attr_deep": attr_deep, "alias_dag": alias_dag,
    "regions": regions,
}


# ---- the check -----------------------------------------------------------------------------------

@dataclass
class SharedOutcome:
    stage: str = ""                  # the last stage reached: load, verify, dis, dis-g, convert, asm
    rejected: Optional[str] = None   # "DecodeError: …" when a TilebcError ended it
    foreign: Optional[str] = None    # the traceback of any other exception
    problem: Optional[str] = None    # a broken invariant: bytes asm wrote that do not load, or
    #                                  a valid module whose -g text does not assemble
    cpu_seconds: float = 0.0


def _has_type_attr(module) -> bool:
    from tilebc.ir import attrs as A
    stack = [f.optimization_hints for f in module.functions] + [f.arg_attrs for f in module.functions]
    while stack:
        value = stack.pop()
        if isinstance(value, A.TypeAttr):
            return True
        if isinstance(value, A.ArrayAttr):
            stack.extend(value.elements)
        elif isinstance(value, (A.DictionaryAttr, A.OptimizationHintsAttr)):
            stack.extend(item for _, item in value.entries)
    return False


def check(payload) -> SharedOutcome:
    """Bytes: load, verify, dis, dis -g, convert (dump at 13.5 and reload), asm of the -g text.
    Text: asm (parse + dump), verify, then the same as bytes on the result. Only TilebcError may
    stop it."""
    outcome = SharedOutcome()
    started = time.thread_time()
    try:
        if isinstance(payload, str):
            outcome.stage = "asm"
            module = tilebc.parse_module(payload, filename="<shared>")
            data = tilebc.dump(module)
        else:
            data = payload
        outcome.stage = "load"
        try:
            module = tilebc.load(data, verify=False, lazy_debug=False)
        except tilebc.DecodeError as error:
            if isinstance(payload, str):
                outcome.problem = f"asm wrote bytes the reader refuses: {error}"
            raise
        outcome.stage = "verify"
        problems = diagnostics(module, warnings=False)
        outcome.stage = "dis"
        tilebc.print_module(module)
        outcome.stage = "dis-g"
        text = tilebc.print_module(module, debug=True)
        outcome.stage = "convert"
        tilebc.load(tilebc.dump(module, version="13.5"), verify=False, lazy_debug=False)
        outcome.stage = "asm"
        try:
            tilebc.parse_module(text, filename="<dis-g>")
        except tilebc.TilebcError as error:
            # Type attributes have no text form in tilebc's parser yet (a gap of its own, not
            # one of sharing): such modules are counted, not failed.
            if not problems and not _has_type_attr(module):
                outcome.problem = f"the -g text of a valid module does not assemble: {error}"
            raise
        if problems:
            outcome.rejected = f"VerificationError: {problems[0]}"
    except tilebc.TilebcError as error:
        outcome.rejected = f"{type(error).__name__}: {error.message}"
    except Exception:  # noqa: BLE001 - exactly what the fuzzer exists to catch
        outcome.foreign = traceback.format_exc(limit=8)
    outcome.cpu_seconds = time.thread_time() - started
    return outcome
