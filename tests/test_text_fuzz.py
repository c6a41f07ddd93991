"""Hostile text input: seeded mutation fuzzing of the assembler (the short CI pass;
`python -m fuzz.run_text` is the long one), and one regression test per crash the fuzzer found.

Every mutated text must assemble or raise a TilebcError pointing inside the text; nothing else,
no RecursionError, no hang, under 1 s CPU each; what assembles prints, and print -> parse -> print
is a fixed point (fuzz/text.py `check`).
"""
from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import tilebc  # noqa: E402
from fuzz.text import MUTATORS, check, corpus, mutate  # noqa: E402
from tilebc.text import assemble, parse_module  # noqa: E402

CI_INPUTS = 5_000
CI_PARTS = 4
POOL = corpus()


def test_corpus_covers_versions_and_forms():
    assert {version for _, version, _ in POOL} == {"13.1", "13.2", "13.3", "13.4", "13.5"}
    names = [name for name, _, _ in POOL]
    assert any(n.endswith(".dis-g") for n in names) and any(n.endswith(".dis") for n in names)
    assert any(n.endswith(".mlir") for n in names)


@pytest.mark.parametrize("name", sorted(MUTATORS))
def test_mutator_changes_input(name):
    """Each mutator changes most inputs (a no-op mutator would fuzz nothing)."""
    rng = random.Random(name)
    sample = [entry for entry in POOL if entry[0].endswith(".dis-g")][:40] + POOL[:10]
    changed = sum(MUTATORS[name](text, rng, POOL) != text for _, _, text in sample)
    assert changed >= 40, f"{name} changed only {changed} of {len(sample)} inputs"


def test_unmutated_corpus_passes_the_check():
    """The checks accept real text: a sample of the corpus assembles and is a print fixed point."""
    for name, version, text in POOL[::97]:
        outcome = check(text, version)
        assert outcome.accepted and not outcome.problems and not outcome.foreign, (name, outcome)


@pytest.mark.parametrize("part", range(CI_PARTS))
def test_text_fuzz_ci_pass(part, frozen_heap):
    """>= 5,000 mutated texts, every invariant of fuzz.text.check, within about a minute of CPU.

    Input i is mutated by random.Random(i), so a failure names i and reruns alone; the inputs come
    in CI_PARTS parts that the test workers share (as tests/test_fuzz.py does for bytecode)."""
    per_part = -(-CI_INPUTS // CI_PARTS)
    seen = {"inputs": 0, "accepted": 0}
    started = time.process_time()
    for i in range(part * per_part, (part + 1) * per_part):
        rng = random.Random(i)
        name, version, text = POOL[rng.randrange(len(POOL))]
        mutated, used = mutate(text, rng, POOL)
        outcome = check(mutated, version)
        seen["inputs"] += 1
        seen["accepted"] += outcome.accepted
        where = f"input {i}: {name} via {used}"
        assert outcome.foreign is None, f"{where}: {outcome.foreign}"
        assert not outcome.problems, f"{where}: {outcome.problems}"
        assert outcome.check_cpu_seconds < 1.0, \
            f"{where}: {outcome.check_cpu_seconds:.2f} s CPU"
    elapsed = time.process_time() - started
    assert seen["inputs"] * CI_PARTS >= CI_INPUTS, seen
    assert seen["accepted"] > 0, "no mutated text assembled: the mutations are too destructive"
    assert elapsed < 120 / CI_PARTS, f"CI text fuzz pass part {part} took {elapsed:.0f} s of CPU"


# ---- regressions: each crafted input, and the error it must give --------------------------------

ASSERT = (ROOT / "fixtures" / "bytecode" / "assert" / "assert-13.5.dis").read_text()
HINTS = "optimization_hints=<default = {}>"
ENTRY = "entry @f({args}) {{\n{body}\n}}\n"


def _error(text: str, exception=tilebc.TextSyntaxError) -> tilebc.TilebcError:
    with pytest.raises(exception) as info:
        assemble(text, "13.5")
    error = info.value
    assert error.file == "<text>" and error.line is not None and error.column is not None
    lines = text.split("\n")
    assert 1 <= error.line <= len(lines) and 1 <= error.column <= len(lines[error.line - 1]) + 1
    return error


@pytest.mark.parametrize("string, message", [
    ('"bad \\G escape"', "invalid escape '\\G' in string"),
    ('"cut \\4"', "invalid escape '\\4' in string"),  # one hex digit, then the quote
    ('"ok \\\\G"', None),                     # an escaped backslash, then a plain G
    ('"lone \ud800 surrogate"', "not a Unicode character (a lone surrogate)"),
])
def test_string_escapes(string, message):
    """Was a ValueError/UnicodeEncodeError from unescape deep inside the location or op parser."""
    text = ASSERT.replace('"negative input"', string)
    assert text != ASSERT
    if message is None:
        assemble(text, "13.5")
        return
    error = _error(text)
    assert message in error.message
    assert text.split("\n")[error.line - 1][error.column - 1:].startswith("\\") or "surrogate" in message


def test_string_escape_in_location_alias():
    text = ENTRY.format(args="", body="return loc(#loc)") + '#loc = loc("a\\zz.py":1:2)\n'
    assert "invalid escape '\\z'" in _error(text).message


def test_huge_number_literal():
    """int() of > 4300 digits raised ValueError (Python's int/str limit)."""
    text = ASSERT.replace("<i32: 0>", "<i32: " + "9" * 5000 + ">")
    error = _error(text)
    assert "number literal of 5000 characters is too long" in error.message
    assert len(str(error)) < 1500  # the 5000 digits are not repeated in the message


def test_tile_with_dynamic_dimension():
    """`tile<?x4xf32>` gave ValueError: int('?')."""
    text = ENTRY.format(args="%a: tile<?x4xf32>", body="")
    assert "a tile's dimensions are static" in _error(text).message


def test_huge_type_dimension():
    text = ENTRY.format(args="%a: tile<" + "7" * 400 + "xf32>", body="")
    assert "in a type is too large" in _error(text).message


def test_float_literals():
    """Hex bits wider than the type reached int.to_bytes (OverflowError); a word that is not a
    float reached float() (ValueError)."""
    assert "does not fit in f32 (32 bits)" in _error(
        "global @g <f32: 0x1FFFFFFFF> : tile<1xf32>\n").message
    assert "expected a f32 value, found 'lots'" in _error(
        "global @g <f32: lots> : tile<1xf32>\n").message


def test_gather_scatter_view_without_sparse_dim_value():
    """match_raw returned None and `.group()` raised AttributeError."""
    view = "gather_scatter_view<tile=(16), tensor_view<?xf32, strides=[?]>, sparse_dim=x>"
    assert "expected an integer (sparse_dim)" in _error(ENTRY.format(args=f"%a: {view}",
                                                                     body="")).message


def test_result_group_count_is_bounded():
    """`%x:99999999999 = op` made a list of that many types (MemoryError)."""
    text = ASSERT.replace("%blockId_x, %blockId_y, %blockId_z = get_tile_block_id",
                          "%ids:99999999999 = get_tile_block_id")
    assert "a result group holds 1 to 65536 results" in _error(text).message


def test_result_index_with_many_digits():
    text = ASSERT.replace("%assume_0 = assume bounded<0, ?>, %arg2",
                          "%assume_0 = assume bounded<0, ?>, %arg2#" + "1" * 30)
    assert "is a single value and takes no #index" in _error(text).message


@pytest.mark.parametrize("what, text, message", [
    ("regions", ENTRY.format(args="%c: tile<i1>", body="if %c {\n" * 2000 + "}\n" * 2000),
     "regions nested more than 64 levels deep"),
    ("attribute arrays", ASSERT.replace(HINTS, "optimization_hints=<default = {x = "
                                        + "[" * 100_000 + "}>", 1),
     "attribute values nested more than 64 levels deep"),
    ("dictionaries", ASSERT.replace(HINTS, "optimization_hints=<default = {x = "
                                    + "{a = " * 50_000 + "}>", 1),
     "dictionaries nested more than 64 levels deep"),
    ("dense constants", "global @g <f32: " + "[" * 100_000 + "1.0" + "]" * 100_000
     + "> : tile<1xf32>\n", "dense constant nested more than 64 levels deep"),
    ("fused locations", ENTRY.format(args="", body="return loc(" + "fused[" * 50_000 + ")"),
     "locations nested more than 64 levels deep"),
    ("named locations", ENTRY.format(args="", body="return loc(" + '"a"(' * 50_000 + ")"),
     "locations nested more than 64 levels deep"),
    ("debug attributes", ENTRY.format(args="", body="return loc(#loc)") + "#loc = "
     + "#cuda_tile.di_loc<" * 50_000 + "\n", "attribute values nested more than 64 levels deep"),
    ("alias chains", ENTRY.format(args="", body="return loc(#a0)")
     + "".join(f"#a{i} = loc(#a{i + 1})\n" for i in range(1000)) + "#a1000 = loc(unknown)\n",
     "location aliases refer to each other more than 64 levels deep"),
])
def test_deep_nesting_is_refused_not_a_recursion_error(what, text, message):
    # An untimed first pass: a worker's first parse also compiles the parser's generated code.
    assert message in _error(text).message
    started = time.process_time()
    assert message in _error(text).message
    assert time.process_time() - started < 1.0, what


def test_alias_cycle():
    text = ENTRY.format(args="", body="return loc(#a0)") + "#a0 = loc(#a1)\n#a1 = loc(#a0)\n"
    assert "alias #a0 refers to itself" in _error(text).message


def test_long_line_is_quoted_as_a_window():
    """A 200,000-character line is quoted around the caret, not whole."""
    text = ASSERT.replace("%cst_0_i32 = constant", "%cst_0_i32 = " + "q" * 200_000 + " constant")
    error = _error(text)
    assert "unknown operation" in error.message
    assert len(str(error)) < 1000
    assert str(error).splitlines()[-2].strip().startswith("%cst_0_i32 = qqq")


def test_valid_deep_but_reasonable_nesting_still_parses():
    """The nesting guard leaves room for real kernels: 30 nested ifs assemble."""
    body = "if %c {\n" * 30 + "}\n" * 30
    module = parse_module(ENTRY.format(args="%c: tile<i1>", body=body))
    assert len(list(module.functions[0].walk())) >= 30


# Text-fuzz input 3494 (deep_nesting inside a -g subprogram's linkageName string: 2.3 MB) took
# 1.7 s: the string regex tried an alternation per character, and unescape (parsing) and
# escape_string (the verifier's message) stepped through the string in Python.
ASSERT_G = (ROOT / "fixtures" / "bytecode" / "assert" / "assert-13.5.dis-g").read_text()
LINKAGE = 'linkageName = "assert_kernel_Kt1_A1f32_1l0_Si32_I16"'


def _long_linkage_name(repeats: int) -> str:
    # an escaped backslash and UTF-8 escapes between the runs: both escape paths run
    body = "loc(callsite(" * repeats + "\\\\ \\C3\\A9" + " at #loc))" * repeats
    assert LINKAGE in ASSERT_G
    return ASSERT_G.replace(LINKAGE, f'linkageName = "{body}"')


def _python_lines(text: str):
    """(Python lines executed, error) parsing and verifying `text`: a count of interpreted
    steps, the same on any machine."""
    from tilebc.verify import verify
    count = [0]

    def local(frame, event, arg):
        count[0] += event == "line"
        return local

    def trace(frame, event, arg):
        return local

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        verify(parse_module(text))
        error = None
    except tilebc.TilebcError as caught:
        error = caught
    finally:
        sys.settrace(previous)
    return count[0], error


def test_long_string_costs_no_python_step_per_character():
    _python_lines(_long_linkage_name(1_000))  # imports and caches filled once, before counting
    small_lines, small_error = _python_lines(_long_linkage_name(1_000))
    large_lines, large_error = _python_lines(_long_linkage_name(30_000))  # 690 kB string
    for error in (small_error, large_error):  # the message is NVIDIA's, the whole name in it
        assert isinstance(error, tilebc.VerificationError)
        assert "does not match subprogram scope linkage name" in error.message
        assert '"loc(callsite(loc(callsite(' in error.message
        assert "\\\\ \\C3\\A9 at" in error.message
    assert len(large_error.message) > 3 * 690_000
    # the per-character loops took > 4 lines a character: millions here
    assert large_lines - small_lines < 500, (small_lines, large_lines)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="possessive repeats need Python 3.11")
def test_string_of_escapes_is_lexed_in_bounded_memory():
    """sre kept backtracking state for every escape of a string (~230 bytes each: 226 MiB for a
    2 MB string of escapes); the repeats are possessive now."""
    import tracemalloc
    from tilebc.text.lexer import Cursor, unescape
    token = '"' + "\\n\\41" * 200_000 + '"'
    tracemalloc.start()
    try:
        assert Cursor(token).peek().text == token
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * len(token), peak  # the token's copy and little more (was 120x)
    assert unescape(token) == "\nA" * 200_000
