"""The optional compiled helpers (tilebc/_speedups.c) agree with the pure-Python definitions they
stand in for. Skipped where the extension is not built; TILEBC_PURE=1 runs the rest of the suite on
the pure path."""
import glob
import os
import random
import re
import sys

import pytest

import tilebc
from tilebc.text.lexer import _CHECKED, _SPACED_TOKEN

speedups = pytest.importorskip("tilebc._speedups")
CORPUS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "text_corpus", "*.mlir")))


def _compiled_cursor():
    """The lexer's Cursor on the compiled token methods, made here so that the comparisons below
    also run where TILEBC_PURE=1 makes the lexer's own Cursor the pure one."""
    from tilebc.text import lexer
    return type("CompiledCursor", (lexer._CursorCommon, speedups.CursorBase),
                {"_token": speedups.Token})


def _by_regex(text: str, pos: int):
    """What the lexer's regular expression reads at `pos`, when it is a kind scan_token handles."""
    match = _SPACED_TOKEN.match(text, pos)
    if match is None or match.lastgroup in _CHECKED:
        return None
    kind = match.lastgroup
    return kind, match.group(kind), match.start(kind)


@pytest.mark.parametrize("path", CORPUS, ids=os.path.basename)
def test_scan_token_matches_the_lexer_at_every_offset(path):
    text = open(path, encoding="utf-8").read()
    read = 0
    for pos in range(len(text)):
        found = speedups.scan_token(text, pos)
        if found is not None:
            assert found == _by_regex(text, pos), (path, pos)
            read += 1
    assert read > len(text) // 2  # it reads most positions itself, not only the easy ones


def test_scan_token_matches_the_lexer_on_random_text():
    # every character class the grammar distinguishes, non-ASCII spaces and letters among them
    alphabet = list(" \t\n\r\f\v\x1c\x85\xa0\u2028/%#!@\"-0123456789xeE.abcAZ_$()[]{}<>,:=?^*+é;&|~")
    rng = random.Random(20)
    declined = 0
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10)))
        for pos in range(len(text) + 1):
            found = speedups.scan_token(text, pos)
            if found is None:
                declined += 1
            else:
                assert found == _by_regex(text, pos), (text, pos)
    assert declined  # the cases it leaves to the regular expressions do occur


def _tokens(cursor_class, text):
    """Every token up to the end, or up to the first error (text as tokens: types, read
    character by character by the parser, stop it at their dimension lists)."""
    from tilebc.errors import TextSyntaxError
    cursor, out = cursor_class(text), []
    while True:
        try:
            token = cursor.next()
        except TextSyntaxError as error:
            return out + [("error", str(error))]
        out.append((token.kind, token.text, token.pos))
        if token.kind == "eof":
            return out


@pytest.mark.parametrize("path", CORPUS[:12], ids=os.path.basename)
def test_compiled_cursor_reads_the_tokens_the_python_cursor_reads(path):
    from tilebc.text.lexer import PyCursor
    text = open(path, encoding="utf-8").read()
    read = _tokens(_compiled_cursor(), text)
    assert len(read) > 10 and read == _tokens(PyCursor, text)


def test_compiled_cursor_methods_match_the_python_ones_on_random_text():
    # the same calls on both cursors: equal results, positions and errors
    from tilebc.errors import TextSyntaxError
    from tilebc.text.lexer import PyCursor
    alphabet = ["%a", "%b#1", "@f", '"s"', "#x", "!t", "12", "-3", "0x1f", "->", "(", ")", ":",
                "=", ",", "{", "}", "<", ">", " ", "\n", "// c\n", "addi", "x", "\xa0", "\"", "12ab"]
    rng = random.Random(7)
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
        calls = [(rng.choice(["peek", "next", "at", "accept", "expect", "expect_kind"]),
                  rng.choice(["(", ":", "addi", "value", "ident", "eof"])) for _ in range(6)]
        seen = []
        for cursor_class in (_compiled_cursor(), PyCursor):
            cursor, log = cursor_class(text, "t.mlir"), []
            for method, argument in calls:
                try:
                    if method in ("peek", "next"):
                        token = getattr(cursor, method)()
                        result = (token.kind, token.text, token.pos)
                    elif method in ("at", "accept"):
                        result = getattr(cursor, method)(argument)
                    elif method == "expect":
                        token = cursor.expect(argument, "here")
                        result = (token.kind, token.text, token.pos)
                    else:
                        token = cursor.expect_kind(argument, "a " + argument)
                        result = (token.kind, token.text, token.pos)
                except TextSyntaxError as error:
                    result = ("error", str(error))
                log.append((result, cursor.pos, cursor.end))
            seen.append(log)
        assert seen[0] == seen[1], (text, calls)


def test_the_lexer_uses_the_compiled_cursor_unless_told_not_to():
    from tilebc.text.lexer import Cursor as used, PyCursor
    assert (used is PyCursor) == bool(os.environ.get("TILEBC_PURE"))
    if used is not PyCursor:
        assert issubclass(used, speedups.CursorBase)


def test_compiled_token_behaves_as_the_python_token():
    from tilebc.text.lexer import PyToken
    compiled = speedups.Token("value", "%x", 3)
    plain = PyToken("value", "%x", 3)
    assert repr(compiled) == repr(plain) == "Token(kind='value', text='%x', pos=3)"
    assert compiled == speedups.Token("value", "%x", 3) and hash(compiled) == hash(plain)
    assert compiled != speedups.Token("value", "%x", 4)
    with pytest.raises(AttributeError):
        compiled.pos = 5  # tokens are values


def test_compiled_cursor_survives_what_python_code_may_set():
    # the members are writable from Python: odd values give Python errors, never a crash
    cursor = _compiled_cursor()("%a = addi", "t.mlir")
    cursor._peeked = ("value", "%a", 0)  # not a Token: ignored, the text is scanned again
    assert (cursor.peek().kind, cursor.peek().text) == ("value", "%a")
    cursor.pos = 10**6  # past the end: the end-of-input token
    assert cursor.next().kind == "eof"
    cursor.pos = -5  # before the start: read from 0, as the regular expressions read it
    assert (cursor.peek().text, cursor.peek().pos) == ("%a", 0)
    cursor.text, cursor._peeked = b"%a", None
    with pytest.raises(TypeError):
        cursor.peek()


def test_compiled_cursor_on_long_and_unusual_text():
    from tilebc.text.lexer import PyCursor
    texts = ["x" * 200_000 + " y", "%v" + "a" * 100_000, "\x00%a", "%a\ud800 b", "é %a",
             "a\u2028b", "//" + "c" * 1000 + "\n%z"]
    for text in texts:
        assert _tokens(_compiled_cursor(), text) == _tokens(PyCursor, text)


# ---- the bytecode reader's decoder (tilebc/_opdecoder.c) ---------------------------------------

def _decode_every_fixture(monkeypatch, compiled: bool):
    """{path: ir_signature} of every fixture, all ops through compiled decoders: the C ones (and
    the C loop) when `compiled`, else the generated Python; the process-wide caches are emptied
    around it, so each run compiles its own."""
    from fuzz.harness import ir_signature
    from tilebc import speedups as chosen
    from tilebc.binary import fastpath, reader
    monkeypatch.setattr(fastpath, "_COMPILED", {})
    monkeypatch.setattr(reader, "_FAST_READY", {})
    if not compiled:
        monkeypatch.setattr(chosen, "OpDecoder", None)
        monkeypatch.setattr(reader, "decode_ops", None)
    signatures = {}
    fixtures = os.path.join(os.path.dirname(__file__), "..", "fixtures", "bytecode")
    for path in sorted(glob.glob(os.path.join(fixtures, "*", "*.tilebc"))):
        with open(path, "rb") as stream:
            decoder = reader.ModuleReader(stream.read(), path, lazy_debug=False)
        decoder.fast_compile_after = 0
        module = decoder.read()
        assert decoder.fast_fallbacks == 0, path
        signatures[path] = ir_signature(module)
    kinds = {type(decode).__name__ for decode in fastpath._COMPILED.values()}
    monkeypatch.undo()
    return signatures, kinds


def test_the_c_decoder_builds_what_the_generated_python_builds(monkeypatch):
    """Every fixture (all versions), every op through the compiled decoders: the C decoder and
    loop give the IR the generated Python functions give (the fuzz tests compare either with
    the careful reader on mutated input)."""
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C decoder is switched off")
    ours, kinds = _decode_every_fixture(monkeypatch, compiled=True)
    assert kinds == {"OpDecoder"}  # the C decoder was the one used
    theirs, kinds = _decode_every_fixture(monkeypatch, compiled=False)
    assert kinds == {"function"}
    assert len(ours) > 900 and ours == theirs


def _every_op_location(monkeypatch, compiled: bool) -> dict:
    """{path: [(class, fields) of each op's location, functions in order, ops in pre-order]} of
    every fixture, the debug section read lazily (the C helper's path when `compiled`)."""
    from tilebc.binary import reader
    if not compiled:
        monkeypatch.setattr(reader, "plain_locations", None)
    found = {}
    fixtures = os.path.join(os.path.dirname(__file__), "..", "fixtures", "bytecode")
    for path in sorted(glob.glob(os.path.join(fixtures, "*", "*.tilebc"))):
        with open(path, "rb") as stream:
            module = reader.ModuleReader(stream.read(), path).read()
        locations = []
        for function in module.functions:
            blocks = [function.body]
            while blocks:
                for op in blocks.pop().ops:
                    loc = op.loc
                    fields = {k: v for k, v in vars(loc).items() if k != "_hash"} \
                        if loc is not None else None
                    locations.append((type(loc).__name__, fields, loc))
                    blocks.extend(block for region in op.regions for block in region.blocks)
        found[path] = locations
    monkeypatch.undo()
    return found


def test_the_c_decoder_reads_assume_predicates_as_the_python_does(monkeypatch):
    """`assume` predicates (div_by, bounded) with absent, negative and 64-bit parts: the C decoder
    finds a predicate seen before in the reader's attribute cache and leaves a new one to
    fast_tagged, giving the attributes the generated Python gives, shared as it shares them."""
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C decoder is switched off")
    from tilebc import speedups as chosen
    from tilebc.binary import fastpath, reader
    from tilebc.ir import BoundedAttr, DivByAttr, Module, i64, scalar
    from tilebc.ir.builder import new_function
    # pairs such as 4 and -5 share all zigzag bits but the sign's
    predicates = [BoundedAttr(0, None), BoundedAttr(None, 4), BoundedAttr(None, -5),
                  BoundedAttr(-(1 << 62), 1 << 62), BoundedAttr(None, None), DivByAttr(16),
                  DivByAttr(8, every=2, along=0), DivByAttr(8, every=-3, along=0),
                  DivByAttr((1 << 63) + 5, every=None, along=2)]
    module = Module(version=tilebc.Version(13, 5))
    b = new_function(module, "k", [scalar(i64)])
    x = b.block.args[0]
    for predicate in predicates * 3:
        b.op("assume", [x], [scalar(i64)], {"predicate": predicate})
    b.op("return", [[]])
    data = tilebc.dump(module)

    def decoded(compiled: bool):
        with monkeypatch.context() as patch:
            patch.setattr(fastpath, "_COMPILED", {})
            patch.setattr(reader, "_FAST_READY", {})
            if not compiled:
                patch.setattr(chosen, "OpDecoder", None)
            decoder = reader.ModuleReader(data, "k.tilebc")
            decoder.fast_compile_after = 0
            ops = decoder.read().functions[0].body.ops[:-1]
            kinds = {type(decode).__name__ for decode in fastpath._COMPILED.values()}
        return [op.attrs["predicate"] for op in ops], kinds
    ours, kinds = decoded(compiled=True)
    assert kinds == {"OpDecoder"}
    theirs, kinds = decoded(compiled=False)
    assert kinds == {"function"}
    assert ours == theirs == predicates * 3
    assert [type(p) for p in ours] == [type(p) for p in theirs]
    for first, later in zip(ours, ours[len(predicates):]):
        assert later is first  # a predicate seen before is the cached attribute


def test_the_c_locations_are_the_ones_the_reader_makes(monkeypatch):
    """Every fixture's op locations, read lazily: those the C helper makes from plain debug
    entries are the DILocs the reader's Python makes, field for field."""
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C helpers are switched off")
    ours = _every_op_location(monkeypatch, compiled=True)
    theirs = _every_op_location(monkeypatch, compiled=False)
    assert ours.keys() == theirs.keys() and len(ours) > 900
    located = sum(1 for locations in ours.values() for kind, _, _ in locations if kind == "DILoc")
    assert located > 10_000
    for path in ours:
        assert [item[:2] for item in ours[path]] == [item[:2] for item in theirs[path]], path
        assert [item[2] for item in ours[path]] == [item[2] for item in theirs[path]], path


def test_plain_locations_stops_at_what_it_cannot_make():
    """The C helper makes a location only from a plain entry whose scope and file name are decoded
    already, and stops at the first other entry; it reads no byte outside an entry."""
    from tilebc.binary.reader import _LOC_SCOPES, DEBUG_LOC
    from tilebc.ir import location as L
    file = L.DIFile("k.py", "/")
    scope = L.DISubprogram(file, 1, "k", "k", L.DICompileUnit(file), 1)
    # entries 1..4: plain (scope 7, name 3, line 5, column 9); a long varint; wrong tag; short
    data = bytes([DEBUG_LOC, 7, 3, 5, 9, DEBUG_LOC, 7, 3, 0x85, 0x01, 9, DEBUG_LOC + 1, 7, 3, 5, 9,
                  DEBUG_LOC, 7, 3, 5])
    offsets = [0, 5, 11, 16]
    cache, attrs, strings = {}, {7: scope}, {3: "k.py"}
    call = (data, offsets, [1, 2, 3, 4, 2], 0, 5, cache, attrs, strings, L.DILoc, _LOC_SCOPES,
            DEBUG_LOC)
    made = speedups.plain_locations(*call)
    assert made == [L.DILoc(scope, "k.py", 5, 9), L.DILoc(scope, "k.py", 133, 9)]
    assert cache == {1: made[0], 2: made[1]} and attrs[2] is made[1]
    assert speedups.plain_locations(*call[:3], 4, 5, *call[5:]) == [made[1]]  # from the cache
    assert speedups.plain_locations(*call[:3], 3, 4, *call[5:]) == []  # entry 4: too short
    assert speedups.plain_locations(*call[:3], 2, 3, *call[5:]) == []  # entry 3: another tag
    assert speedups.plain_locations(data, offsets, [1], 0, 1, {}, {}, strings, L.DILoc,
                                    _LOC_SCOPES, DEBUG_LOC) == []  # the scope is not decoded
    assert speedups.plain_locations(data, offsets, [9, 0, -1], 0, 3, {}, attrs, strings, L.DILoc,
                                    _LOC_SCOPES, DEBUG_LOC) == []  # no such entry
    with pytest.raises(TypeError):
        speedups.plain_locations(*call[:-1])


def test_materialised_locations_are_stored_as_the_python_loop_stores_them(monkeypatch):
    """Every 13.5 fixture's op locations read lazily: with the materialising loop in C
    (store_locations) each op becomes a LocatedOp holding the location the Python loop gives it."""
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C helpers are switched off")
    from tilebc import speedups as chosen
    from tilebc.binary.lazyloc import LocatedOp as Op

    def locations(compiled: bool):
        with monkeypatch.context() as patch:
            if not compiled:
                patch.setattr(chosen, "store_locations", None)
            found = []
            for module in _fixture_modules():
                for function in module.functions:
                    ops = list(function.walk())
                    found += [(op.loc, type(op)) for op in ops]
            return found
    ours, theirs = locations(True), locations(False)
    assert len(ours) > 1000 and ours == theirs
    assert {kind for _, kind in ours} == {Op} and any(loc is not None for loc, _ in ours)
    with pytest.raises(TypeError):
        speedups.store_locations([], [], None, Op)


def test_plain_locations_makes_the_subprogram_scoping_a_location():
    """With the subprogram kinds, a DILoc whose scope is a subprogram not decoded yet is made in
    C with that subprogram (kept in debug_attrs, as debug_attr keeps it) when the subprogram entry
    is plain: its fields fill the entry, its file and compile unit are decoded, its names read,
    no unknown flag. Anything else is left to the reader."""
    from tilebc.binary.reader import _LOC_SCOPES, DEBUG_CALL_SITE, DEBUG_LOC, DEBUG_SUBPROGRAM
    from tilebc.ir import location as L
    if not getattr(speedups, "PLAIN_SUBPROGRAMS", 0):
        pytest.skip("an extension built before subprograms were made in C")
    file = L.DIFile("k.py", "/")
    unit = L.DICompileUnit(file)
    entries = [bytes([DEBUG_SUBPROGRAM, 9, 0xC8, 0x01, 3, 4, 8, 5, 0]),  # 1: plain, line 200
               bytes([DEBUG_LOC, 1, 3, 12, 4]),                       # 2: a loc in 1
               bytes([DEBUG_SUBPROGRAM, 9, 7, 3, 4, 8, 5, 2]),        # 3: an unknown flag bit
               bytes([DEBUG_LOC, 3, 3, 12, 4]),                       # 4: a loc in 3
               bytes([DEBUG_SUBPROGRAM, 9, 7, 6, 4, 8, 5, 0]),        # 5: a name not read yet
               bytes([DEBUG_LOC, 5, 3, 12, 4]),                       # 6: a loc in 5
               bytes([DEBUG_SUBPROGRAM, 9, 7, 3, 4, 8, 5, 0, 0]),     # 7: a byte left over
               bytes([DEBUG_LOC, 7, 3, 12, 4])]                       # 8: a loc in 7
    data, offsets = b"", []
    for entry in entries:
        offsets.append(len(data))
        data += entry
    strings = {3: "k.py", 4: "k"}
    kinds = (L.DISubprogram, L.DIFile, L.DICompileUnit, DEBUG_SUBPROGRAM, True, 1)

    def call(index, attrs, with_subprograms=True):
        extra = (kinds,) if with_subprograms else ()
        return speedups.plain_locations(data, offsets, [index], 0, 1, {}, attrs, strings,
                                        L.DILoc, _LOC_SCOPES, DEBUG_LOC, L.CallSiteLoc,
                                        L.UnknownDebugAttr, DEBUG_CALL_SITE, *extra)
    attrs = {9: file, 8: unit}
    made = call(2, attrs)
    subprogram = L.DISubprogram(file, 200, "k.py", "k", unit, 5, 0)
    assert made == [L.DILoc(subprogram, "k.py", 12, 4)] and attrs[1] == subprogram
    assert made[0].scope is attrs[1] and attrs[1].file is file and attrs[1].compile_unit is unit
    assert attrs[1].__dict__.keys() == subprogram.__dict__.keys() - {"_hash"}
    for index in (4, 6, 8):  # left to the reader
        assert call(index, {9: file, 8: unit}) == []
    assert call(2, {9: file}) == []  # the compile unit not decoded yet
    assert call(2, {9: file, 8: unit}, with_subprograms=False) == []
    with pytest.raises(TypeError):  # the subprogram kinds must be six
        speedups.plain_locations(data, offsets, [2], 0, 1, {}, {}, strings, L.DILoc,
                                 _LOC_SCOPES, DEBUG_LOC, L.CallSiteLoc, L.UnknownDebugAttr,
                                 DEBUG_CALL_SITE, (L.DISubprogram,))


def test_entry_locations_are_made_as_the_careful_reader_makes_them(monkeypatch):
    """Every fixture's entry and op locations, read lazily: the same classes and fields with the
    C helper (entry subprograms included) and without it."""
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C helpers are switched off")
    from tilebc.binary import reader

    def fields(loc):
        if loc is None:
            return None
        return (type(loc).__name__,
                {k: fields(v) if hasattr(v, "__dict__") else v
                 for k, v in vars(loc).items() if k != "_hash"})

    def locations(compiled: bool):
        with monkeypatch.context() as patch:
            if not compiled:
                patch.setattr(reader, "plain_locations", None)
            found = []
            fixtures = os.path.join(os.path.dirname(__file__), "..", "fixtures", "bytecode")
            for path in sorted(glob.glob(os.path.join(fixtures, "*", "*.tilebc"))):
                module = reader.ModuleReader(open(path, "rb").read(), path).read()
                for function in module.functions:
                    found.append(fields(function.loc))
                    found += [fields(op.loc) for op in function.walk()]
            return found
    ours, theirs = locations(True), locations(False)
    assert len(ours) > 10_000 and ours == theirs
    assert any(loc and loc[0] == "DILoc" and loc[1]["scope"][0] == "DISubprogram"
               for loc in ours)


def test_plain_locations_makes_call_sites_of_plain_parts_only():
    """With the call-site arguments, an entry `callsite(callee at caller)` is made in C when each
    part is unknown (index 0 or an `unknown` entry), decoded already, or a plain DILoc entry (kept
    in debug_attrs only, as debug_attr keeps it); anything else is left to the reader."""
    from tilebc.binary.reader import _LOC_SCOPES, DEBUG_CALL_SITE, DEBUG_LOC
    from tilebc.ir import location as L
    file = L.DIFile("k.py", "/")
    scope = L.DISubprogram(file, 1, "k", "k", L.DICompileUnit(file), 1)
    entries = [bytes([DEBUG_LOC, 9, 3, 5, 9]),          # 1: plain DILoc
               bytes([DEBUG_LOC, 9, 3, 6, 1]),          # 2: plain DILoc
               bytes([DEBUG_CALL_SITE, 1, 2]),          # 3: callsite(#1 at #2)
               bytes([DEBUG_CALL_SITE, 0, 8]),          # 4: callsite(unknown at unknown)
               bytes([DEBUG_CALL_SITE, 3, 4]),          # 5: parts decoded call sites
               bytes([DEBUG_CALL_SITE, 1, 2, 0]),       # 6: a byte left over
               bytes([DEBUG_CALL_SITE, 9, 1]),          # 7: callee a subprogram
               bytes([DEBUG_CALL_SITE, 1, 40]),         # 8: caller out of range
               bytes([0])]                              # 9: unknown
    data, offsets = b"", []
    for entry in entries:
        offsets.append(len(data))
        data += entry
    attrs = {9: scope, 8: L.UnknownDebugAttr()}
    strings = {3: "k.py"}

    def call(index, cache, with_sites=True):
        extra = (L.CallSiteLoc, L.UnknownDebugAttr, DEBUG_CALL_SITE) if with_sites else ()
        return speedups.plain_locations(data, offsets, [index], 0, 1, cache, attrs, strings,
                                        L.DILoc, _LOC_SCOPES, DEBUG_LOC, *extra)
    cache = {}
    made = call(3, cache)
    first, second = L.DILoc(scope, "k.py", 5, 9), L.DILoc(scope, "k.py", 6, 1)
    assert made == [L.CallSiteLoc(first, second)]
    assert cache == {3: made[0]} and attrs[3] is made[0] and attrs[1] == first and 1 not in cache
    unknown = call(4, cache)
    assert unknown == [L.CallSiteLoc(None, None)]
    both = call(5, cache)
    assert both == [L.CallSiteLoc(made[0], unknown[0])]
    assert both[0].callee is made[0] and both[0].caller is unknown[0]
    assert call(3, {}) == []  # decoded already (as a part, say): left to the reader's cache
    assert call(6, {}) == [] and call(7, {}) == [] and call(8, {}) == []
    assert call(4, {}, with_sites=False) == []
    with pytest.raises(TypeError):
        speedups.plain_locations(data, offsets, [3], 0, 1, {}, attrs, strings, L.DILoc,
                                 _LOC_SCOPES, DEBUG_LOC, L.CallSiteLoc)


def _every_name(monkeypatch, compiled: bool) -> list:
    """The SSA names the printer gives every function of every fixture and text-corpus file: (text,
    refs, result groups, suggestions) by value position, through tilebc/_printer.c when `compiled`."""
    from tilebc import speedups as chosen
    from tilebc.text import parse_module
    from tilebc.text.names import FunctionNames
    if not compiled:
        monkeypatch.setattr(chosen, "number_ops", None)
    fixtures = os.path.join(os.path.dirname(__file__), "..", "fixtures", "bytecode")
    modules = [tilebc.load(path, verify=False)
               for path in sorted(glob.glob(os.path.join(fixtures, "*", "*-13.5.tilebc")))]
    for path in CORPUS:
        with open(path, encoding="utf-8") as stream:
            try:
                modules.append(parse_module(stream.read(), path))
            except tilebc.TilebcError:
                continue  # the corpus holds invalid files too
    found = []
    for module in modules:
        for function in module.functions:
            names = FunctionNames(function)  # dicts in insertion order: the order values are named
            found.append((list(names.text.values()), list(names.refs.values()),
                          sorted(names.groups.values()), list(names._suggested.values())))
    monkeypatch.undo()
    return found


def test_the_c_naming_gives_the_names_the_python_gives(monkeypatch):
    """Every function of every 13.5 fixture and text-corpus file: tilebc/_printer.c names every
    value (numbers, fixed names made unique, suggestions, result groups) as names.py does."""
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C helpers are switched off")
    ours = _every_name(monkeypatch, compiled=True)
    theirs = _every_name(monkeypatch, compiled=False)
    assert len(ours) > 300 and ours == theirs
    assert any(groups for _, _, groups, _ in ours)  # multi-result groups were named too
    assert any(name.endswith("_1") for text, _, _, _ in ours for name in text)  # and conflicts


def test_the_c_naming_asks_python_only_for_new_constants_and_unusual_assumes(monkeypatch):
    """Constants whose attribute was named before and `assume`s of a block argument, an op that
    names nothing or one already named are named in C; the rest through suggested_names."""
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C helpers are switched off")
    from tilebc.ir import BoundedAttr, Module, i32, scalar
    from tilebc.ir.builder import new_function
    from tilebc.text import names as names_module
    module = Module(version=tilebc.Version(13, 5))
    b = new_function(module, "k", [scalar(i32)])
    x = b.block.args[0]
    constant = None
    for _ in range(5):
        constant = b.op("constant", [], [scalar(i32)],
                        {"value": tilebc.ir.DenseElementsAttr(scalar(i32), b"\1\0\0\0")})
        b.op("assume", [constant], [scalar(i32)], {"predicate": BoundedAttr(0, None)})
        b.op("assume", [x], [scalar(i32)], {"predicate": BoundedAttr(0, None)})
        total = b.op("addi", [x, constant], [scalar(i32)])
        b.op("assume", [total], [scalar(i32)], {"predicate": BoundedAttr(0, None)})
    b.op("return", [[]])
    module = tilebc.load(tilebc.dump(module))  # the reader shares the equal constants' attribute
    asked = []
    python_suggest = names_module.suggested_names
    monkeypatch.setattr(names_module, "suggested_names",
                        lambda op, names: (asked.append(op.name), python_suggest(op, names))[1])
    names = names_module.FunctionNames(module.functions[0])
    assert asked == ["constant"]  # the first constant's attribute: named once in Python
    texts = list(names.text.values())
    assert texts[:6] == ["arg0", "cst_1_i32", "assume_cst_1_i32", "assume", "0", "assume_0"]
    from tilebc import speedups as chosen
    monkeypatch.setattr(chosen, "number_ops", None)
    assert list(names_module.FunctionNames(module.functions[0]).text.values()) == texts


def _every_text(monkeypatch, compiled: bool) -> list:
    """Every 13.5 fixture printed plain and with locations (`-g`), the printer's loops in C
    (tilebc/_printer.c) when `compiled`."""
    from tilebc import speedups as chosen
    from tilebc.text import print_module
    if not compiled:
        monkeypatch.setattr(chosen, "print_ops", None)
        monkeypatch.setattr(chosen, "number_ops", None)
        monkeypatch.setattr(chosen, "visit_locations", None)
        monkeypatch.setattr(chosen, "alias_visit", None)
    fixtures = os.path.join(os.path.dirname(__file__), "..", "fixtures", "bytecode")
    texts = []
    for path in sorted(glob.glob(os.path.join(fixtures, "*", "*-13.5.tilebc"))):
        module = tilebc.load(path, verify=False)
        texts += [print_module(module), print_module(module, debug=True)]
    monkeypatch.undo()
    return texts


def test_the_c_alias_walk_records_what_the_python_one_records(monkeypatch):
    """Every fixture's locations (all versions) collected for -g aliases: the C walk and visits
    (visit_locations with alias_visit) record the same nodes, in the same order, at the same
    depths as LocationAliases.visit and _visit in Python; shared and unknown locations and call
    sites included."""
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C helpers are switched off")
    from tilebc import speedups as chosen
    from tilebc.text.debuginfo import LocationAliases
    from tilebc.text.printer import _visit_locations

    def collected(compiled: bool) -> list:
        if not compiled:
            monkeypatch.setattr(chosen, "visit_locations", None)
            monkeypatch.setattr(chosen, "alias_visit", None)
        found = []
        fixtures = os.path.join(os.path.dirname(__file__), "..", "fixtures", "bytecode")
        for path in sorted(glob.glob(os.path.join(fixtures, "*", "*.tilebc"))):
            module = tilebc.load(path, verify=False)
            aliases = LocationAliases()
            for function in module.functions:
                aliases.visit(function.loc)
                _visit_locations(function.body.ops, aliases)
            found.append(list(aliases._depth.items()))
        monkeypatch.undo()
        return found
    ours, theirs = collected(True), collected(False)
    assert ours == theirs
    kinds = {type(node).__name__ for nodes in ours for node, _ in nodes}
    assert {"DILoc", "CallSiteLoc", "DISubprogram", "tuple"} <= kinds
    assert max(depth for nodes in ours for _, depth in nodes) >= 3


def test_alias_visit_all_visits_as_visit_does(monkeypatch):
    """LocationAliases.visit_distinct (alias_visit_all in C) records the nodes of a list of
    locations, repeated ones and None among them, as visit() one by one does (without keeping
    them by identity); refs() gives ref() of each."""
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C helpers are switched off")
    from tilebc.text.debuginfo import LocationAliases
    fixtures = os.path.join(os.path.dirname(__file__), "..", "fixtures", "bytecode")
    checked = 0
    for path in sorted(glob.glob(os.path.join(fixtures, "*", "*-13.5.tilebc")))[:60]:
        module = tilebc.load(path)
        locations = [None] + [op.loc for function in module.functions
                              for op in function.walk()] + [None]
        one_by_one, at_once = LocationAliases(), LocationAliases()
        for loc in locations:
            one_by_one.visit(loc)
        at_once.visit_distinct(locations)
        assert list(at_once._depth.items()) == list(one_by_one._depth.items())
        assert at_once._known == {}
        one_by_one.finish()
        at_once.finish()
        assert at_once.refs(locations) == [one_by_one.ref(loc) for loc in locations]
        checked += len(locations)
    assert checked > 1000
    with pytest.raises(TypeError):
        speedups.alias_visit_all((), {}, None, *range(6))


def test_alias_visit_refuses_what_it_cannot_walk():
    """alias_visit checks its arguments, and a node refers to itself only by a bug: refused."""
    from tilebc.ir import location as L
    from tilebc.text.debuginfo import _KINDS, UNKNOWN
    depths = {}
    file = L.DIFile("k.py", "/")
    sub = L.DISubprogram(file, 1, "k", "k", L.DICompileUnit(file), 1)
    loc = L.DILoc(sub, "k.py", 2, 3)
    assert speedups.alias_visit(depths, loc, UNKNOWN, *_KINDS) == 3
    assert list(depths) == [loc, ("file", "k.py", 2, 3), sub, file, L.DICompileUnit(file)]
    depths[loc] = None  # in progress: only a cycle could meet it again
    with pytest.raises(TypeError):
        speedups.alias_visit(depths, loc, UNKNOWN, *_KINDS)
    with pytest.raises(TypeError):
        speedups.alias_visit([], loc, UNKNOWN, *_KINDS)
    with pytest.raises(TypeError):
        speedups.alias_visit(depths, loc, UNKNOWN, *_KINDS[:-1], 3)


def test_the_c_printer_loop_prints_what_the_python_one_prints(monkeypatch):
    """Every 13.5 fixture, plain and `-g`: the same text with the printer's loops in C and in
    Python (the identity tests compare the C path's text with tileirdisasm's)."""
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C helpers are switched off")
    ours = _every_text(monkeypatch, compiled=True)
    theirs = _every_text(monkeypatch, compiled=False)
    assert len(ours) > 300 and ours == theirs
    assert any("#loc" in text for text in ours)


def _fixture_modules() -> list:
    fixtures = os.path.join(os.path.dirname(__file__), "..", "fixtures", "bytecode")
    return [tilebc.load(path, verify=False)
            for path in sorted(glob.glob(os.path.join(fixtures, "*", "*-13.5.tilebc")))]


def test_body_programs_print_what_the_fast_printers_print(monkeypatch):
    """Every 13.5 fixture with every op kind compiled at once: the C loop prints most ops from
    their kinds' body programs (printer.body_program), without the kinds' fast printers, and the
    text, plain and `-g`, is the Python loop's."""
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C helpers are switched off")
    from tilebc import speedups as chosen
    from tilebc.text import printer
    monkeypatch.setattr(printer, "COMPILE_AFTER", 0)
    modules = _fixture_modules()
    python_texts = []
    with monkeypatch.context() as pure:
        for name in ("print_ops", "number_ops", "visit_locations", "alias_visit"):
            pure.setattr(chosen, name, None)
        for module in modules:
            python_texts += [printer.print_module(module), printer.print_module(module, True)]
    # each fast printer counts the ops it prints from now on
    fast_calls = []
    for key, (spec, body, program) in list(printer._OP_PRINTERS.items()):
        def counted(op, ctx, body=body):
            fast_calls.append(op.spec.mnemonic)
            return body(op, ctx)
        monkeypatch.setitem(printer._OP_PRINTERS, key, (spec, counted, program))
    c_texts = []
    for module in modules:
        c_texts += [printer.print_module(module), printer.print_module(module, True)]
    ops = sum(2 * sum(1 for _ in function.walk()) for module in modules
              for function in module.functions)
    assert len(c_texts) > 300 and c_texts == python_texts
    # only the kinds whose syntax holds a region print by their fast printers: every other kind
    # met has a program, those with optional groups included
    from tilebc.ops.table import OPS
    with_regions = {spec.mnemonic for spec in OPS if spec.regions}
    assert ops > 10_000 and fast_calls and len(fast_calls) < ops / 20
    assert set(fast_calls) <= with_regions
    met = {spec.mnemonic: program for spec, _, program in printer._OP_PRINTERS.values()}
    assert len(met) > 60
    assert {mnemonic for mnemonic, program in met.items() if program is None} <= with_regions
    grouped = {spec.mnemonic for spec in OPS if spec.syntax and "?" in spec.syntax}
    assert len(grouped & {mnemonic for mnemonic, program in met.items() if program}) > 20


def test_an_extension_without_body_programs_still_prints(monkeypatch):
    """A printer newer than its built extension (print_ops of eight arguments, no
    PRINT_PROGRAMS) prints the same text, every body by the kinds' fast printers; kinds whose
    syntax holds a region get no body program (a failing step would print the region twice)."""
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C helpers are switched off")
    from tilebc import speedups as chosen
    from tilebc.ops.table import OPS
    from tilebc.text import printer
    from tilebc.text.syntax import Custom
    modules = _fixture_modules()[:40]
    expected = [printer.print_module(module) for module in modules]
    eight = chosen.print_ops

    def older(*args):
        assert len(args) == 8
        return eight(*args)
    monkeypatch.setattr(chosen, "PRINT_PROGRAMS", 0)
    monkeypatch.setattr(chosen, "print_ops", older)
    assert [printer.print_module(module) for module in modules] == expected
    # one that runs programs without optional groups (PRINT_PROGRAMS 1): none made with one
    monkeypatch.setattr(chosen, "PRINT_PROGRAMS", 1)
    monkeypatch.setattr(chosen, "print_ops", eight)
    grouped = [spec for spec in OPS if spec.syntax and "?" in spec.syntax and not spec.regions]
    assert grouped and all(printer.body_program(spec) is None for spec in grouped)
    monkeypatch.setattr(chosen, "PRINT_PROGRAMS", 2)
    assert all(printer.body_program(spec) is not None for spec in grouped)

    def kinds(steps):  # the step kinds and group tests of a program, nested ones included
        for step in steps:
            yield step[0]
            if step[0] == printer.STEP_GROUP:
                yield ("test", step[1])
                yield from kinds(step[3])
    # one without the print's kept attribute texts or fixed defaults (2): neither asked of it,
    # the same text
    newer = {kind for spec in OPS if spec.syntax and printer.body_program(spec)
             for kind in kinds(printer.body_program(spec)[1])}
    assert printer.STEP_ATTRIBUTE_TEXT not in newer
    assert ("test", printer.GROUP_NOT_DEFAULT) not in newer
    assert [printer.print_module(module) for module in modules] == expected
    monkeypatch.setattr(chosen, "PRINT_PROGRAMS", 3)
    newest = {kind for spec in OPS if spec.syntax and printer.body_program(spec)
              for kind in kinds(printer.body_program(spec)[1])}
    assert {printer.STEP_ATTRIBUTE_TEXT, ("test", printer.GROUP_NOT_DEFAULT)} <= newest
    with_regions = [spec for spec in OPS if spec.regions and spec.syntax]
    assert with_regions  # printed through their syntax, a region in it: no program
    assert all(printer.body_program(spec) is None for spec in with_regions)
    writer = printer._ProgramWriter(with_regions[0])
    for name in ("Region", "ArgumentRegion"):
        with pytest.raises(printer._NoProgram):
            writer.elements([Custom(name, (0,))])


def test_a_body_program_leaves_an_op_it_cannot_print_to_the_fast_printer(monkeypatch):
    """An op of a kind with a body program, shaped otherwise than its kind declares (its operand
    a tuple) or using a value the function does not name: the C loop's text, or error, is the
    Python loop's (the kind's walked printer's text; the printer's `cannot print` error)."""
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C helpers are switched off")
    from tilebc import speedups as chosen
    from tilebc.ir.module import Value
    from tilebc.text import printer
    monkeypatch.setattr(printer, "COMPILE_AFTER", 0)

    def both(module):
        """(C loop's text or error, Python loop's)"""
        found = []
        for pure in (False, True):
            with monkeypatch.context() as patch:
                if pure:
                    patch.setattr(chosen, "print_ops", None)
                try:
                    found.append(printer.print_module(module))
                except tilebc.TilebcError as error:
                    found.append(f"error: {error}")
        return found

    module = next(m for m in _fixture_modules()
                  if any(op.name == "reshape" for f in m.functions for op in f.walk()))
    reshape = next(op for f in module.functions for op in f.walk() if op.name == "reshape")
    source = reshape.operands["source"]
    assert printer.body_program(reshape.spec) is not None
    reshape.operands["source"] = (source,)
    ours, theirs = both(module)
    assert ours == theirs and "reshape %" in ours
    reshape.operands["source"] = Value(source.type)  # defined nowhere: it has no name
    ours, theirs = both(module)
    assert ours == theirs and ours.startswith("error: ") and "cannot print reshape" in ours
    reshape.operands["source"] = source
    ours, theirs = both(module)
    assert ours == theirs and "reshape %" in ours


def test_print_ops_leaves_what_it_cannot_print_to_the_printer():
    """An op kind without a compiled printer, a multi-result op, or a printer that raises: the
    C loop hands the op to the Python method, whose text (or error) it keeps."""
    calls = []

    def op_text(op, ctx):
        calls.append(op)
        if op == "bad":
            raise ValueError("bad op")
        return f"py:{op}"

    def cannot_print(op, error):
        return RuntimeError(f"cannot print {op}: {error}")

    assert speedups.print_ops(op_text, ["a", "b"], None, "  ", {}, {}, None, cannot_print) == \
        "  py:a\n  py:b\n" and calls == ["a", "b"]
    with pytest.raises(AttributeError):  # aliases without their map of known locations
        speedups.print_ops(op_text, ["a"], None, "", {}, {}, object(), cannot_print)
    with pytest.raises(ValueError, match="bad op"):
        speedups.print_ops(op_text, ["a", "bad"], None, "", {}, {}, None, cannot_print)
    with pytest.raises(TypeError):
        speedups.print_ops(op_text, ["a"], None, "", [], {}, None, cannot_print)


def test_print_ops_runs_a_failing_body_printer_once():
    """A body printer that fails is not run again through the printer's `op` method: its error
    becomes cannot_print's (as `op` raises it), and a KeyboardInterrupt passes through unchanged
    (each nesting level re-running a failed inner printer would cost 2 ** depth)."""
    class Spec:
        mnemonic = "k"

    class FakeOp:
        spec = Spec()
        results = []

    runs = []

    def failing(op, ctx):
        runs.append(op)
        raise ctx

    printers = {id(FakeOp.spec): (FakeOp.spec, failing)}

    def op_text(op, ctx):
        raise AssertionError("the op method must not run")

    def cannot_print(op, error):
        return RuntimeError(f"cannot print: {type(error).__name__}")

    op = FakeOp()
    with pytest.raises(RuntimeError, match="cannot print: KeyError") as raised:
        speedups.print_ops(op_text, [op], KeyError("x"), "", printers, {}, None, cannot_print)
    assert runs == [op] and raised.value.__suppress_context__
    with pytest.raises(KeyboardInterrupt):
        speedups.print_ops(op_text, [op], KeyboardInterrupt(), "", printers, {}, None,
                           cannot_print)
    assert runs == [op, op]
    printers[id(FakeOp.spec)] = (FakeOp.spec, lambda op, ctx: " body")
    assert speedups.print_ops(op_text, [op], None, "  ", printers, {}, None, cannot_print) == \
        "  k body\n"


def test_print_ops_writes_result_groups_as_the_op_method_does():
    """Ops of several results: one group `%head:N = `, or the groups names.groups holds
    (`%a:2, %b = `); groups it cannot read go to the `op` method, and a body printer that
    changes the op's results cannot make the loop read past them."""
    class Spec:
        mnemonic = "k"

    class FakeOp:
        spec = Spec()

        def __init__(self, results):
            self.results = results

    class Names:
        def __init__(self, text, groups):
            self.text, self.groups = text, groups

    class Ctx:
        def __init__(self, names):
            self.names = names

    values = [object() for _ in range(3)]
    text = {values[0]: "a", values[2]: "b"}
    printers = {id(FakeOp.spec): (FakeOp.spec, lambda op, ctx: " body")}
    fallback = []

    def op_text(op, ctx):
        fallback.append(op)
        return "by the op method"

    def printed(op, groups):
        return speedups.print_ops(op_text, [op], Ctx(Names(text, groups)), "", printers, {},
                                  None, lambda op, error: error)
    one = FakeOp(list(values))
    assert printed(one, {}) == "%a:3 = k body\n"
    assert printed(one, {id(one): [0, 2]}) == "%a:2, %b = k body\n"
    assert fallback == []
    assert printed(one, {id(one): [1]}) == "by the op method\n"  # not a start at 0
    assert printed(one, {id(one): [0, 5]}) == "by the op method\n"
    assert fallback == [one, one]

    def emptying(op, ctx):
        op.results.clear()
        return " body"
    printers[id(FakeOp.spec)] = (FakeOp.spec, emptying)
    assert printed(FakeOp(list(values)), {}) == "%a:3 = k body\n"


def test_a_malformed_decoder_program_is_refused(monkeypatch):
    from tilebc import speedups as chosen
    from tilebc.binary import fastpath
    from tilebc.binary.plans import plan_for
    from tilebc.ops.table import OPS_BY_MNEMONIC
    from tilebc.version import MAX_VERSION
    monkeypatch.setattr(chosen, "OpDecoder", speedups.OpDecoder)  # also under TILEBC_PURE=1
    good = fastpath.c_decoder(plan_for(OPS_BY_MNEMONIC["addf"], MAX_VERSION), MAX_VERSION)
    assert type(good).__name__ == "OpDecoder"
    program = (None, 0, 0, 1, (), 0, 0, ((), ), (), 0, 0, (), 0, fastpath._helpers())
    with pytest.raises(ValueError):
        speedups.OpDecoder(program)
    with pytest.raises(ValueError):
        speedups.OpDecoder(program[:-1])
    with pytest.raises(TypeError):
        good(1, 2, 3)
    # an `assume` predicate step names its fallback and the two tags it looks up (tags.py's)
    from tilebc.binary.tags import ATTR_BOUNDED, ATTR_DIV_BY
    monkeypatch.setattr(chosen, "DECODER_KINDS", speedups.DECODER_KINDS)
    plan = plan_for(OPS_BY_MNEMONIC["assume"], MAX_VERSION)
    steps = fastpath.decoder_program(plan, MAX_VERSION)[7]
    [tagged] = [i for i, step in enumerate(steps) if step[3] == fastpath._TAGGED]
    assert steps[tagged][5] == (fastpath._read_tagged, ATTR_DIV_BY, ATTR_BOUNDED)
    assert type(speedups.OpDecoder(fastpath.decoder_program(plan, MAX_VERSION))).__name__ \
        == "OpDecoder"
    read = fastpath._read_tagged
    for extra in (read, (read, ATTR_DIV_BY), (read, ATTR_DIV_BY, 300)):
        bad = steps[:tagged] + (steps[tagged][:5] + (extra,),) + steps[tagged + 1:]
        with pytest.raises(ValueError):
            speedups.OpDecoder(fastpath.decoder_program(plan, MAX_VERSION, bad))


class _Module:
    """What a decoder asks of the module reader: type index 0 is a scalar i32; attributes the
    decoders hand to the careful reader are read by its code."""

    from tilebc.binary.reader import ModuleReader
    _op_attr = ModuleReader._op_attr

    def __init__(self):
        from tilebc.ir.types import i32, scalar
        self._types = {0: scalar(i32)}
        self._string_cache = {}
        self._dense = {}


def test_the_c_decoder_stops_at_the_body_end_as_the_python_one_does(monkeypatch):
    """A `permute` whose permutation lies past the body's end (the data goes on: the next body,
    or another section): the generated Python reads the array through the careful reader, which
    stops at the end, so neither may build the op (the C decoder once took a count read past the
    end, and read its elements, past the data for a large count)."""
    from tilebc import speedups as chosen
    from tilebc.binary import fastpath
    from tilebc.binary.plans import plan_for
    from tilebc.binary.primitives import Reader
    from tilebc.ir.module import Value
    from tilebc.ir.types import i32, scalar
    from tilebc.ops.table import OPS_BY_MNEMONIC
    from tilebc.version import MAX_VERSION
    monkeypatch.setattr(chosen, "OpDecoder", speedups.OpDecoder)
    plan = plan_for(OPS_BY_MNEMONIC["permute"], MAX_VERSION)
    decoders = [(fastpath.c_decoder(plan, MAX_VERSION), fastpath.Bail),
                (fastpath.compile_plan(plan, MAX_VERSION), tilebc.DecodeError)]
    # result type 0, a count of 1, its element 0, operand 0: the body ends after the result
    # type, or after the count
    data = bytes([0, 1, 0, 0, 0, 0, 0])
    for end in (1, 2):
        for decode, refusal in decoders:
            values = [Value(scalar(i32))]
            reader = Reader(data, 0, end)
            with pytest.raises(refusal):
                decode(_Module(), reader, data, 0, end, values, [], None, 0, 0)
    # the same op within its body decodes to the same permutation in both
    for decode, _ in decoders:
        op, pos = decode(_Module(), Reader(data, 0, 7), data, 0, 7, [Value(scalar(i32))], [],
                         None, 0, 0)
        assert (op.attrs["permutation"], pos) == ((0,), 7)


def _encode_every_fixture(monkeypatch, compiled: bool) -> tuple[dict, int]:
    """{(path, route, version): bytes or the EncodeError's text} of each 13.5 fixture, decoded
    (written in its file's order) and parsed from its text (NVIDIA's order), written for every
    version; and how many ops the writer's Python `op` wrote."""
    from tilebc.binary import reader, writer
    from tilebc.errors import TilebcError
    from tilebc.text import parse_module
    if not compiled:
        monkeypatch.setattr(writer, "encode_ops", None)
    by_python = []
    original = writer.ModuleWriter.op

    def counted(self, op, *args):
        by_python.append(op.spec.mnemonic)
        return original(self, op, *args)
    monkeypatch.setattr(writer.ModuleWriter, "op", counted)
    found = {}
    fixtures = os.path.join(os.path.dirname(__file__), "..", "fixtures", "bytecode")
    for path in sorted(glob.glob(os.path.join(fixtures, "*", "*-13.5.tilebc"))):
        with open(path, "rb") as stream:
            decoded = reader.ModuleReader(stream.read(), path).read()
        with open(path[:-len(".tilebc")] + ".dis", encoding="utf-8") as stream:
            parsed = parse_module(stream.read(), path)
        for route, module in (("decoded", decoded), ("parsed", parsed)):
            for version in ("13.1", "13.2", "13.3", "13.4", "13.5"):
                try:
                    found[path, route, version] = writer.dump(module, version)
                except TilebcError as error:
                    found[path, route, version] = str(error)
    monkeypatch.undo()
    return found, len(by_python)


def test_the_c_encoder_writes_what_the_python_one_writes(monkeypatch):
    """Every 13.5 fixture, decoded and parsed, written for every version: the same bytes (or the
    same error: a kind, attribute or enum member the version lacks) with the writer's loop in C
    and in Python, the C loop writing most ops itself."""
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C helpers are switched off")
    ours, python_ops_ours = _encode_every_fixture(monkeypatch, compiled=True)
    theirs, python_ops_theirs = _encode_every_fixture(monkeypatch, compiled=False)
    assert len(ours) > 1500 and ours == theirs
    assert any(isinstance(v, str) for v in ours.values())  # versions refusing some fixtures
    assert python_ops_ours * 10 < python_ops_theirs


def _broken_modules():
    """(what, module) pairs: one fixture's body edited each way a caller could break it."""
    from tilebc.ir.module import Value
    from tilebc.text import parse_module
    path = os.path.join(os.path.dirname(__file__), "..", "fixtures", "bytecode", "atomics_int",
                        "atomics_int-13.5.dis")
    with open(path, encoding="utf-8") as stream:
        text = stream.read()

    def edited(what, edit):
        module = parse_module(text, path)
        ops = module.functions[0].body.ops
        edit({op.spec.mnemonic: op for op in reversed(ops)}, ops)
        return what, module

    def stray_operand(by_name, ops):
        op = by_name["muli"]
        op.operands["lhs"] = Value(op.results[0].type)

    def tuple_for_one(by_name, ops):
        op = by_name["muli"]
        op.operands["rhs"] = (op.operands["rhs"],)

    def ordering_missing(by_name, ops):
        del by_name["atomic_rmw_tko"].attrs["memory_ordering_semantics"]

    def ordering_wrong(by_name, ops):
        by_name["atomic_rmw_tko"].attrs["memory_ordering_semantics"] = 3

    def result_type_wrong(by_name, ops):
        by_name["iota"].results[0].type = "tile<32xi32>"

    def operands_not_a_dict(by_name, ops):
        op = by_name["iota"]
        op.operands = list(op.operands.items())

    def token_variadic_wrong(by_name, ops):
        by_name["join_tokens"].operands["tokens"] = {"a": 1}

    return [edited(f.__name__, f) for f in (stray_operand, tuple_for_one, ordering_missing,
                                            ordering_wrong, result_type_wrong,
                                            operands_not_a_dict, token_variadic_wrong)]


def test_the_c_encoder_refuses_what_the_python_one_refuses(monkeypatch):
    """Ops a caller broke (an operand defined nowhere, a group of the wrong shape, an attribute
    missing or of the wrong type, a result type that is no type): the C loop hands each to the
    Python `op`, so the error, or the bytes where `op` accepts it, are the Python ones."""
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C helpers are switched off")
    from tilebc.binary import writer
    from tilebc.errors import TilebcError

    def outcome(module):
        try:
            return writer.dump(module, "13.5")
        except (TilebcError, AttributeError, TypeError, KeyError) as error:
            return type(error).__name__, str(error)

    ours = [outcome(module) for _, module in _broken_modules()]
    monkeypatch.setattr(writer, "encode_ops", None)
    theirs = [outcome(module) for _, module in _broken_modules()]
    assert ours == theirs
    assert sum(isinstance(found, tuple) for found in ours) >= 5, ours


def _parsed(text: str, compiled: bool, monkeypatch):
    """What parsing `text` gives, with the parser's op loop in C or in Python: the error's text,
    or the module's -g print, each op's line:col and its bytes (or the writer's refusal)."""
    from tilebc.binary import writer
    from tilebc.errors import TilebcError
    from tilebc.text import parser
    from tilebc.text.printer import print_module
    if not compiled:
        monkeypatch.setattr(parser, "parse_ops", None)
    try:
        module = parser.parse_module(text, "<fuzz>")
    except TilebcError as error:
        return "refused", str(error)
    finally:
        monkeypatch.undo()
    placed = [(op.spec.mnemonic, op.text_pos) for op in module.walk()]
    try:
        data = writer.dump(module, "13.5")
    except TilebcError as error:
        data = str(error)
    return print_module(module, debug=True), placed, data


@pytest.mark.parametrize("part", range(4))
def test_the_c_op_parser_reads_what_the_python_one_reads(part, monkeypatch):
    """Every fixture's text (plain and -g, all versions) and the text corpus, in four parts:
    the same module (printed with locations, each op's line:col, its bytes) with the parser's op
    loop in C and in Python, the C loop reading most ops itself."""
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C helpers are switched off")
    from fuzz.text import corpus
    from tilebc.text import parser
    by_python = []
    original = parser._Parser._next_op

    def counted(self):
        op = original(self)
        by_python.append(op)
        return op
    texts = [text for _, _, text in corpus()]
    assert len(texts) > 1500
    ops = 0
    for text in texts[part::4]:
        with pytest.MonkeyPatch.context() as counting:
            counting.setattr(parser._Parser, "_next_op", counted)
            ours = _parsed(text, True, monkeypatch)
        assert ours == _parsed(text, False, monkeypatch)
        ops += len(ours[1])
    assert len(by_python) * 3 < ops


def test_the_c_op_parser_refuses_what_the_python_one_refuses(monkeypatch):
    """Mutated fixture texts (the text fuzzer's mutators, seeded): the C loop leaves whatever it
    does not expect to the Python parser, so each text is refused with the same message at the
    same line:col, or read into the same module."""
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C helpers are switched off")
    from fuzz.text import corpus, mutate
    pool = [entry for entry in corpus() if len(entry[2]) < 20_000]
    refused = 0
    for seed in range(600):
        rng = random.Random(seed)
        text, _ = mutate(rng.choice(pool)[2], rng, pool)
        ours = _parsed(text, True, monkeypatch)
        assert ours == _parsed(text, False, monkeypatch), seed
        refused += ours[0] == "refused"
    assert 200 < refused < 600


_ENTRY_CASES = [
    # arguments: attributes, a location, a name used twice, a type read for the first time in
    # the middle, a missing comma, a missing type
    "entry @k(%a: tile<i32>, %b: tile<ptr<f32>> {tile.aligned = 16 : i32}, %c: tile<i32>) {}\n",
    "entry @k(%a: tile<i32> loc(\"f.py\":3:4), %b: tile<i32>) {}\n",
    "entry @k(%a: tile<i32>, %a: tile<i32>) {}\n",
    "entry @k(%a: tile<i32>, %b: tile<i64>, %c: tile<i64>, %d: tile<i32>) {}\n",
    "entry @k(%a: tile<i32> %b: tile<i32>) {}\n",
    "entry @k(%a: tile<i32>, %b) {}\n",
    "entry @k(%a: tile<i32>,) {}\n",
    # ops: a name in use, a value not defined, a type other than the value's, an unknown op,
    # results without names, more names than results, a result group, a trailing location
    "entry @k(%a: tile<i32>) {\n  %a = addi %a, %a : tile<i32>\n}\n",
    "entry @k(%a: tile<i32>) {\n  %b = addi %a, %c : tile<i32>\n}\n",
    "entry @k(%a: tile<i32>) {\n  %b = addi %a, %a : tile<i32>\n  %c = addi %b, %a : tile<i64>\n}\n",
    "entry @k(%a: tile<i32>) {\n  %b = addx %a, %a : tile<i32>\n}\n",
    "entry @k(%a: tile<i32>) {\n  addi %a, %a : tile<i32>\n}\n",
    "entry @k(%a: tile<i32>) {\n  %b, %c = addi %a, %a : tile<i32>\n}\n",
    "entry @k(%a: tile<i32>) {\n  %b, = addi %a, %a : tile<i32>\n}\n",
    "entry @k(%a: tile<i32>) {\n  %b:2 = addi %a, %a : tile<i32>\n}\n",
    "entry @k(%a: tile<i32>) {\n  %b = addi %a, %a : tile<i32> loc(\"f.py\":1:2)\n}\n",
    "entry @k(%a: tile<i32>) {\n  %b = addi %a, %a overflow<nsw> : tile<i32>\n}\n",
    "entry @k(%a: tile<i32>) {\n  %b = addi %a, %a overflow<none> {x = 1} : tile<i32>\n}\n",
    "entry @k(%a: tile<i32>) {\n  %b = addi %a, %a : tile<i32>\n  %b = addi %a, %a : tile<i32>\n}\n",
    # results of a group: by index, out of range, an index on a single value, no index
    "entry @k(%a: tile<i32>) {\n  %g:3 = get_tile_block_id : tile<i32>\n"
    "  %b = addi %g#1, %g#2 : tile<i32>\n}\n",
    "entry @k(%a: tile<i32>) {\n  %g:3 = get_tile_block_id : tile<i32>\n"
    "  %b = addi %g#3, %a : tile<i32>\n}\n",
    "entry @k(%a: tile<i32>) {\n  %b = addi %a#0, %a : tile<i32>\n}\n",
    "entry @k(%a: tile<i32>) {\n  %g:3 = get_tile_block_id : tile<i32>\n"
    "  %b = addi %g, %a : tile<i32>\n}\n",
]


@pytest.mark.parametrize("text", _ENTRY_CASES)
def test_the_c_loops_read_and_refuse_entries_as_python_does(text, monkeypatch):
    """Arguments and ops at each place the C loops hand over to Python: the same module or the
    same error."""
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C helpers are switched off")
    assert _parsed(text, True, monkeypatch) == _parsed(text, False, monkeypatch)


def test_the_c_loops_let_an_interrupt_through(monkeypatch):
    """A KeyboardInterrupt (or MemoryError) raised by a Python method the C loops call is raised,
    not taken for a reason to hand the op to Python (where the work would quietly run again: the
    methods here raise once, then do their work, so a swallowed interrupt would go unnoticed)."""
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C helpers are switched off")
    from tilebc.binary import writer
    from tilebc.text import parser
    path = os.path.join(os.path.dirname(__file__), "..", "fixtures", "bytecode", "atomics_int",
                        "atomics_int-13.5.dis")
    with open(path, encoding="utf-8") as stream:
        text = stream.read()
    module = parser.parse_module(text, path)

    def once(original, raised):
        calls = []

        def method(*args):
            calls.append(1)
            if len(calls) == 1:
                raise raised()
            return original(*args)
        return method
    for raised in (KeyboardInterrupt, MemoryError):
        for owner, name, run in (
                (writer.ModuleWriter, "_attr_bytes", lambda: writer.dump(module, "13.5")),
                (writer.ModuleWriter, "type", lambda: writer.dump(module, "13.5")),
                (parser._Parser, "_predicate", lambda: parser.parse_module(text, path)),
                (parser.TypeParser, "type", lambda: parser.parse_module(text, path))):
            with monkeypatch.context() as patch:
                patch.setattr(owner, name, once(getattr(owner, name), raised))
                with pytest.raises(raised):
                    run()
    assert writer.dump(module, "13.5")  # and the ordinary path still writes



# Token-level edits that land where the C parser hands over: punctuation and names out of place.
_TOKEN = re.compile(r"%[\w$.\-]+(?:#\d+)?|->|[A-Za-z_][\w$.]*|-?\d+|[()\[\]{}<>,:=?^*+\-]|\s+|.",
                    re.S)
_INSERTS = [",", "=", "%0", "%x", ":", "#1", " token", "->", "i32", "tile<i32>", "0", "-1",
            "weak", "[", "]", "loc", "{", "}", " ", "00", "0x1", "%0#0", "%a,", "%b ="]


def test_the_c_op_parser_agrees_on_token_edits(monkeypatch):
    """Small fixture texts with one or two tokens deleted, inserted, replaced or swapped: the
    same module or the same error both ways (the fuzzer's mutators rarely hit result names)."""
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C helpers are switched off")
    from fuzz.text import corpus
    pool = [entry for entry in corpus() if len(entry[2]) < 6000]
    for seed in range(800):
        rng = random.Random(seed)
        tokens = _TOKEN.findall(rng.choice(pool)[2])
        for _ in range(rng.choice((1, 1, 2))):
            i = rng.randrange(len(tokens))
            edit = rng.random()
            if edit < 0.3:
                del tokens[i]
            elif edit < 0.6:
                tokens.insert(i, rng.choice(_INSERTS))
            elif edit < 0.8:
                tokens[i] = rng.choice(_INSERTS)
            else:
                j = min(i + 1, len(tokens) - 1)
                tokens[i], tokens[j] = tokens[j], tokens[i]
        text = "".join(tokens)
        assert _parsed(text, True, monkeypatch) == _parsed(text, False, monkeypatch), seed


def _edited_at_random(module, rng) -> None:
    """One or two random edits of `module`'s ops: an attribute dropped or replaced, an operand
    group replaced, a location that is no location, a result type replaced, two ops swapped."""
    ops = [op for function in module.functions for op in function.body.ops]
    values = [v for op in ops for v in op.results] + \
        [a for function in module.functions for a in function.args]
    attr_values = [None, 0, 1, True, "x", (), (True, False)] + \
        [v for op in ops for v in op.attrs.values()][:50]
    for _ in range(rng.choice((1, 2))):
        op = rng.choice(ops)
        edit = rng.random()
        if edit < 0.25 and op.attrs:
            name = rng.choice(list(op.attrs))
            if rng.random() < 0.5:
                del op.attrs[name]
            else:
                op.attrs[name] = rng.choice(attr_values)
        elif edit < 0.5 and op.operands:
            op.operands[rng.choice(list(op.operands))] = rng.choice(
                [None, (), rng.choice(values), (rng.choice(values),)])
        elif edit < 0.7:
            op.loc = rng.choice([None, 5, "loc"])
        elif edit < 0.85 and op.results:
            op.results[0].type = rng.choice([v.type for v in values] + ["t", None])
        else:
            body = module.functions[0].body.ops
            i, j = rng.randrange(len(body)), rng.randrange(len(body))
            body[i], body[j] = body[j], body[i]


def test_the_c_encoder_agrees_on_edited_modules(monkeypatch):
    """13.5 fixtures edited at random (as a caller building IR by hand might get it wrong): the
    same bytes or the same error, written by the C loop and by the Python one."""
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C helpers are switched off")
    from tilebc.binary import writer
    from tilebc.errors import TilebcError
    from tilebc.text import parse_module
    fixtures = os.path.join(os.path.dirname(__file__), "..", "fixtures", "bytecode")
    texts = []
    for path in sorted(glob.glob(os.path.join(fixtures, "*", "*-13.5.dis")))[::4]:
        with open(path, encoding="utf-8") as stream:
            texts.append(stream.read())

    def outcome(module, version):
        try:
            return writer.dump(module, version)
        except (TilebcError, AttributeError, TypeError, KeyError, ValueError) as error:
            return type(error).__name__, str(error)
    written = 0
    for seed in range(300):
        text = random.Random(seed).choice(texts)
        version = random.Random(seed).choice(("13.1", "13.3", "13.5"))
        ours, theirs = parse_module(text), parse_module(text)
        _edited_at_random(ours, random.Random(seed))
        _edited_at_random(theirs, random.Random(seed))
        found = outcome(ours, version)
        with monkeypatch.context() as patch:
            patch.setattr(writer, "encode_ops", None)
            assert found == outcome(theirs, version), seed
        written += isinstance(found, bytes)
    assert 30 < written < 270


def test_kept_hash_is_the_classes_own_hash():
    """keep_hash's slot answers what the cached-hash classes' __hash__ answers: made in C the
    first time (kept where __hash__ reads it) and read back after, for types and debug
    attributes of real modules (objects equal across two decodes)."""
    import copy
    import pickle
    from tilebc.ir import location as L
    from tilebc.ir import types as T
    path = next(iter(sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "fixtures",
                                                   "bytecode", "*", "*-13.5.tilebc")))))
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("the classes keep Python's slot under TILEBC_PURE")
    first, second = tilebc.load(path), tilebc.load(path)
    seen = 0
    for one, other in zip(first.functions, second.functions):
        objects = [(one.type, other.type), (one.loc, other.loc)]
        objects += [(a.loc, b.loc) for a, b in zip(one.walk(), other.walk())]
        objects += [(r.type, s.type) for a, b in zip(one.walk(), other.walk())
                    for r, s in zip(a.results, b.results)]
        objects += [(a.loc.scope, b.loc.scope) for a, b in zip(one.walk(), other.walk())
                    if isinstance(a.loc, L.DILoc)]
        for made_here, made_by_python in objects:
            if made_here is None:
                continue
            vars(made_here).pop("_hash", None)  # (loading verified: hashed already)
            vars(made_by_python).pop("_hash", None)
            python = type(made_by_python).__hash__(made_by_python)  # the Python method
            assert hash(made_here) == python == hash(made_by_python)
            assert vars(made_here)["_hash"] == python  # kept by the slot for __hash__
            assert hash(pickle.loads(pickle.dumps(made_here))) == python
            assert hash(copy.deepcopy(made_here)) == python
            seen += 1
    assert seen > 50
    assert L.DILoc._hash_fields == ("scope", "filename", "line", "column")


def test_kept_hash_is_made_in_c(monkeypatch):
    """The cached-hash classes are hashed by keep_hash's slot, not by their Python __hash__: a
    new hash is made from the fields `_hash_fields` names (here changed), where the Python
    method hashes the fields it was made with."""
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("the classes keep Python's slot under TILEBC_PURE")
    from tilebc.ir import location as L
    from tilebc.ir import types as T
    for made in (L.DIFile("kernel.py", "/src"), T.TileType((4, 8), T.f32)):
        python = type(made).__hash__(made)
        vars(made).pop("_hash")
        monkeypatch.setattr(type(made), "_hash_fields", ("shape",) if isinstance(made, T.TileType)
                            else ("name",))
        field = made.shape if isinstance(made, T.TileType) else made.name
        assert hash(made) == hash((field,)) != python
        assert vars(made)["_hash"] == hash((field,))  # kept where __hash__ reads it
        monkeypatch.undo()


def test_slot_reads_follow_a_class_changed_after_them(monkeypatch):
    """The C loops read ops' and values' slots at offsets found once per class (tilebc_slot in
    _speedups.h): a class changed after that (a property put over a slot) is read through the
    change, as Python reads it, and read directly again once it is undone."""
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C helpers are switched off")
    from tilebc.ir.module import Op
    from tilebc.text import printer
    module = _fixture_modules()[0]
    expected = printer.print_module(module)
    ops = [op for function in module.functions for op in function.walk() if op.results]
    seen = []
    slot = Op.__dict__["results"]

    def results(op):
        seen.append(op)
        return slot.__get__(op, type(op))
    monkeypatch.setattr(Op, "results", property(results, slot.__set__))
    assert printer.print_module(module) == expected
    assert len(seen) >= len(ops)  # every op's results read through the property
    monkeypatch.undo()
    seen.clear()
    assert printer.print_module(module) == expected and not seen


def test_store_locations_switches_classes_as_python_does():
    """Materialising a decoded module's locations (store_locations) makes each DecodedOp a
    LocatedOp, as assigning __class__ does, each op's reference to its class moved with it: once
    the module is gone both classes are referenced as before."""
    import gc
    import sys
    from tilebc.binary.lazyloc import DecodedOp, LocatedOp as Op
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C helpers are switched off")
    path = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "fixtures", "bytecode",
                                         "*", "*-13.5.tilebc")))[0]
    warm = tilebc.load(path, verify=False)  # what a first load leaves in caches
    [op.loc for function in warm.functions for op in function.walk()]
    del warm
    gc.collect()
    before = sys.getrefcount(DecodedOp), sys.getrefcount(Op)
    module = tilebc.load(path, verify=False)
    ops = [op for function in module.functions for op in function.walk()]
    assert sum(type(op) is DecodedOp for op in ops) > 10
    locations = [op.loc for op in ops]  # decoded: every op made a LocatedOp
    assert all(type(op) is Op for op in ops) and any(loc is not None for loc in locations)
    assert [op.loc for op in ops] == locations
    del module, ops, locations
    gc.collect()
    assert (sys.getrefcount(DecodedOp), sys.getrefcount(Op)) == before


def test_new_values_makes_block_arguments_as_value_does():
    """new_values (a decoded block's arguments) makes each Value as Value(type, owner, index)
    does: the same fields, the owner held weakly; a bad call is a TypeError."""
    from tilebc.binary.fastpath import VALUE_SLOTS as _VALUE_SLOTS
    from tilebc.binary.reader import _arguments
    from tilebc.ir.module import Block, Value
    from tilebc.ir.types import f32, i32, scalar, tile
    types = (scalar(i32), tile((4,), f32), scalar(i32))
    block = Block()
    made = speedups.new_values(types, block, Value, *_VALUE_SLOTS)
    expected = [Value(t, block, i) for i, t in enumerate(types)]
    fields = [(v.type, v.owner, v.index, type(v)) for v in expected]
    assert [(v.type, v.owner, v.index, type(v)) for v in made] == fields
    assert [(v.type, v.owner, v.index, type(v)) for v in _arguments(types, block)] == fields
    assert all(v.owner is block for v in made) and speedups.new_values((), block, Value,
                                                                      *_VALUE_SLOTS) == []
    del block, expected, fields
    assert all(v.owner is None for v in made)  # weakly held: the block is gone
    with pytest.raises(TypeError):
        speedups.new_values(list(types), Block(), Value, *_VALUE_SLOTS)
    with pytest.raises(TypeError):
        speedups.new_values(types, Block(), Value, "type", "_owner", "index")


# ---- decoded ops' compact fields (FieldsSlot) ---------------------------------------------------

def _raw_fields(op):
    from tilebc.ir.module import Op
    return Op.__dict__["operands"].__get__(op), Op.__dict__["attrs"].__get__(op)


def test_decoded_fields_stay_compact_through_the_c_loops():
    """The C decoder leaves an op's operands and attrs compact; the C printer, verifier and
    encoder read them so: a decoded module printed (plain and -g), verified and encoded keeps most
    of its ops compact, and gives what the same module gives once every op holds dicts, a
    module with errors the same diagnostics."""
    from conftest import joined_fixture_module
    from tilebc.text.printer import print_module
    from tilebc.verify import diagnostics
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C helpers are switched off")
    data = tilebc.dump(joined_fixture_module(300_000))
    module = tilebc.load(data, verify=False)
    ops = list(module.walk())
    compact = sum(type(operands) is tuple and type(attrs) is tuple
                  for operands, attrs in map(_raw_fields, ops))
    assert compact > 0.9 * len(ops)
    made = print_module(module), print_module(module, debug=True), tilebc.dump(module)
    # an entry's first op that defines a value, dropped: its users' operands are out of scope
    body = next(f.body for f in module.functions if any(op.results for op in f.body.ops[:-1]))
    at, dropped = next((at, op) for at, op in enumerate(body.ops) if op.results)
    del body.ops[at]
    found = [str(d) for d in diagnostics(module)]
    assert sum(type(operands) is tuple and type(attrs) is tuple
               for operands, attrs in map(_raw_fields, ops)) > 0.6 * len(ops)
    assert any("not visible" in d or "before it is defined" in d for d in found)
    for op in ops:
        assert type(op.operands) is dict and type(op.attrs) is dict
    assert all(type(operands) is dict and type(attrs) is dict
               for operands, attrs in map(_raw_fields, ops))
    assert [str(d) for d in diagnostics(module)] == found
    body.ops.insert(at, dropped)
    assert (print_module(module), print_module(module, debug=True), tilebc.dump(module)) == made


def test_decoded_fields_become_one_dict_on_first_read():
    """The first read from Python makes the dict (in the decoder's order, every optional group
    and attribute named), kept in the slot: the same object on every read, so a change to it
    stays; assignment replaces it; the class answers the descriptor."""
    from conftest import joined_fixture_module
    from tilebc.binary.lazyloc import DecodedOp, LocatedOp
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C helpers are switched off")
    module = tilebc.load(tilebc.dump(joined_fixture_module(100_000)), verify=False)
    op = next(op for op in module.walk()
              if type(_raw_fields(op)[1]) is tuple and len(_raw_fields(op)[1]) > 2)
    names, *values = _raw_fields(op)[1]
    attrs = op.attrs
    assert list(attrs) == list(names) and list(attrs.values()) == values
    assert op.attrs is attrs and _raw_fields(op)[1] is attrs
    attrs["extra"] = 1
    assert op.attrs["extra"] == 1
    op.attrs = {"other": 2}
    assert _raw_fields(op)[1] == {"other": 2} and op.attrs == {"other": 2}
    # only the decoder's names (FieldNames) make a tuple compact fields: another stays as given
    lookalike = (("value",), 1)
    op.operands = lookalike
    assert op.operands is lookalike
    assert type(names).__name__ == "FieldNames" and isinstance(names, tuple)
    assert isinstance(DecodedOp.attrs, speedups.FieldsSlot) and isinstance(LocatedOp.operands,
                                                                       speedups.FieldsSlot)
    with pytest.raises(TypeError):
        speedups.FieldsSlot("operands")  # a member descriptor, nothing else


_ARENA_CHURN = """import os
import tilebc._speedups as speedups
PAGE = os.sysconf("SC_PAGE_SIZE")
def resident():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE
def churn():
    made = [(i, str(i), [i]) for i in range(400_000)]  # ~100 MiB of small objects
    grown = resident()
    del made
    return grown
before_switch = [(i, str(i)) for i in range(200_000)]  # arenas mapped by CPython's allocator
print(speedups.populate_arenas())
start = resident()
first = churn()
held = resident()
del before_switch  # unmapped by ours
released = held - resident()
second = churn()
print(first - start > 50 << 20, second - start > 50 << 20, resident() - start < 20 << 20,
      released > 10 << 20)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux: /proc and madvise")
def test_populated_arenas_come_and_go_as_cpythons_do():
    """After populate_arenas (in a process of its own: it is process-wide) the allocator maps,
    fills and gives back arenas as before, those mapped before the switch among them: memory
    grows with what is made and returns once it is freed."""
    import subprocess
    if os.environ.get("TILEBC_PURE"):
        pytest.skip("TILEBC_PURE=1: the C helpers are switched off")
    done = subprocess.run([sys.executable, "-c", _ARENA_CHURN], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True"] * 5


def test_fill_marks_puts_each_text_where_the_python_substitution_does():
    """fill_marks (the -g parent's location texts put in) makes the pieces alias_aside's Python
    substitution makes: marks at the ends, side by side, in no piece, texts empty or wider than
    their piece (Latin-1, BMP, astral); another count of texts than marks is None."""
    from tilebc.alias_aside import MARK, _substituted
    rng = random.Random(52)
    alphabet = ["a", " ", "\n", "é", "\u2028", "\U0001f600", MARK]
    for _ in range(3000):
        pieces = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
                  for _ in range(rng.randint(0, 5))]
        count = sum(piece.count(MARK) for piece in pieces)
        texts = ["".join(rng.choice(alphabet[:-1]) for _ in range(rng.randint(0, 4)))
                 for _ in range(count)]
        expected = list(_substituted(pieces, texts, ""))[:-1]
        assert speedups.fill_marks(pieces, texts, MARK) == expected
        assert speedups.fill_marks(pieces, texts + ["x"], MARK) is None
        if count:
            assert speedups.fill_marks(pieces, texts[1:], MARK) is None
    with pytest.raises(ValueError):  # only an ASCII mark leaves each piece's kind right
        speedups.fill_marks(["a\u2603b"], ["x"], "\u2603")
    with pytest.raises(TypeError):
        speedups.fill_marks(["a\x00"], [b"x"], MARK)
    with pytest.raises(TypeError):
        speedups.fill_marks(("a",), [], MARK)


def test_a_large_file_compiles_each_decoder_at_its_first_op(monkeypatch):
    """A file of COMPILE_AT_ONCE bytes or more compiles each op kind's decoder when it meets its
    first op (none read carefully), a small kernel only after a few ops of a kind; both read the
    same module."""
    from conftest import joined_fixture_module
    from fuzz.harness import ir_signature
    from tilebc.binary import fastpath, reader
    data = tilebc.dump(joined_fixture_module(reader.ModuleReader.COMPILE_AT_ONCE))
    small = min(glob.glob(os.path.join(os.path.dirname(__file__), "..", "fixtures", "bytecode",
                                       "*", "*-13.5.tilebc")), key=os.path.getsize)
    for path_or_data, at_once in ((data, True), (open(small, "rb").read(), False)):
        monkeypatch.setattr(fastpath, "_COMPILED", {})
        monkeypatch.setattr(reader, "_FAST_READY", {})
        decoder = reader.ModuleReader(path_or_data, "m.tilebc")
        module = decoder.read()
        assert (decoder.fast_compile_after == 0) is at_once
        assert (not decoder._fast_uses) is at_once  # no op of a kind read carefully first
        monkeypatch.undo()
        careful = reader.ModuleReader(path_or_data, "m.tilebc")
        careful.use_fast_path = False
        assert ir_signature(module) == ir_signature(careful.read())


def test_alias_definitions_text_is_the_python_lines_joined():
    """alias_definitions_text writes LocationAliases.definitions' lines, each with its newline:
    every 13.5 fixture's aliases (DILocs, their file locations, subprograms, compile units,
    files, lexical blocks, call sites, unknown), a non-ASCII file name and an alias missing
    ("None", as the f-string writes it)."""
    from tilebc.ir import location as L
    from tilebc.text.debuginfo import LocationAliases, _escaped
    aliases = LocationAliases()
    for module in _fixture_modules():
        for function in module.functions:
            aliases.visit(function.loc)
            for op in function.walk():
                aliases.visit(op.loc)
    file = L.DIFile("ké\U0001f600.py", "/d")
    unit = L.DICompileUnit(file)
    sub = L.DISubprogram(file, 3, "f", "f", unit, 3)
    odd = L.DILoc(sub, "ké\U0001f600.py", 7, 9)
    aliases.visit(odd)
    aliases.finish()
    kinds = {type(node).__name__ for node in aliases._sorted}
    assert {"DILoc", "tuple", "DISubprogram", "DICompileUnit", "DIFile"} <= kinds
    expected = "".join(line + "\n" for line in aliases.definitions())
    # each line as _define writes its node on its own
    assert expected == "".join(f"{name} = {aliases._define(node)}\n"
                               for node, name in zip(aliases._sorted, aliases._sorted_names))
    made = speedups.alias_definitions_text(aliases._sorted, aliases._sorted_names, aliases.names,
                                           aliases._define, L.DILoc, _escaped)
    assert made == expected and _escaped("ké\U0001f600.py") in made
    del aliases.names[sub]  # a scope without an alias
    expected = "".join(line + "\n" for line in aliases.definitions())
    assert "in None>" in expected
    assert speedups.alias_definitions_text(aliases._sorted, aliases._sorted_names, aliases.names,
                                           aliases._define, L.DILoc, _escaped) == expected
    with pytest.raises(TypeError):
        speedups.alias_definitions_text(aliases._sorted, [], aliases.names, aliases._define,
                                        L.DILoc, _escaped)


def test_visit_distinct_numbers_as_visit_does():
    """LocationAliases.visit_distinct (alias_visit_all: no identity map) collects and numbers
    every 13.5 fixture's op locations as visit() of each does, repeats and None among them; the
    Python loop too."""
    from tilebc import speedups as chosen
    from tilebc.text.debuginfo import LocationAliases
    locations = [op.loc for module in _fixture_modules() for function in module.functions
                 for op in function.walk()]
    locations += locations[:50] + [None]

    def named(visit_all):
        aliases = LocationAliases()
        visit_all(aliases)
        aliases.finish()
        return aliases.refs(locations), aliases.definitions_text()
    expected = named(lambda aliases: [aliases.visit(loc) for loc in locations])
    assert named(lambda aliases: aliases.visit_distinct(locations)) == expected
    assert len(expected[0]) > 1000
    original = chosen.alias_visit_all
    chosen.alias_visit_all = None
    try:
        assert named(lambda aliases: aliases.visit_distinct(locations)) == expected
    finally:
        chosen.alias_visit_all = original
