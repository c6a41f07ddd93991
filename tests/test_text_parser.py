"""The parser/assembler: NVIDIA's disassembly parses back to bytecode tileirdisasm prints the same,
our own cuda_tile.-prefixed corpus assembles, and malformed text fails at an exact line:col."""
from pathlib import Path

import pytest

import tilebc
from tilebc.errors import TextSyntaxError
from tilebc.ir import attrs as A
from tilebc.oracles import tileirdisasm
from tilebc.text import assemble, parse_module, print_module

from conftest import (CaseFailures, assembled, fixture_files, fixture_id, fixture_kernels,
                      needs_disasm, needs_tileiras, tileiras_accepts)

FILES = fixture_files()
FIXTURE_KERNELS = fixture_kernels()


def _version(path: Path) -> str:
    return path.stem.rsplit("-", 1)[1]


@needs_disasm
@pytest.mark.parametrize("fixture_kernel", sorted(FIXTURE_KERNELS))
def test_disassembly_reassembles(fixture_kernel):
    failures = CaseFailures()
    for path in FIXTURE_KERNELS[fixture_kernel]:
        with failures.case(path.name):
            text = path.with_suffix(".dis").read_text()
            data = assembled(path, ".dis")  # assemble(text, the file's version), shared per session
            result = tileirdisasm(data)
            assert result.ok, result.stderr
            assert result.stdout == text
    failures.raise_any()


@pytest.mark.parametrize("path", FILES[::7], ids=fixture_id)
def test_debug_listing_parses_like_plain(path):
    """`-g` output (locations, alias definitions) parses to the same ops as the plain listing."""
    module = parse_module(path.with_suffix(".dis-g").read_text(), str(path))
    assert print_module(module) == path.with_suffix(".dis").read_text()


def _sorted_dictionaries(value):
    """`value` with the keys of every dictionary in it sorted, as tileirdisasm prints them."""
    if isinstance(value, (A.DictionaryAttr, A.OptimizationHintsAttr)):
        return type(value)(tuple(sorted((key, _sorted_dictionaries(item))
                                        for key, item in value.entries)))
    return value


@needs_disasm
@pytest.mark.parametrize("fixture_kernel", sorted(FIXTURE_KERNELS))
def test_debug_listing_reassembles(fixture_kernel):
    """`asm(dis -g x)` keeps every location: tileirdisasm -g prints the listing it came from, and
    the bytes are cuTile's unless the text lacks what made them differ."""
    failures = CaseFailures()
    for path in FIXTURE_KERNELS[fixture_kernel]:
        with failures.case(path.name):
            _check_debug_listing_reassembles(path)
    failures.raise_any()


def _check_debug_listing_reassembles(path):
    text = path.with_suffix(".dis-g").read_text()
    data = assemble(text, _version(path), str(path))
    result = tileirdisasm(data, debug_info=True)
    assert result.ok, result.stderr
    assert result.stdout == text
    original = path.read_bytes()
    if data != original:
        # The text prints dictionary keys sorted, and cuTile may register table entries out of use
        # order (format_spec.md, "Table order"): then the bytes are the canonical encoding of the
        # file's IR with sorted dictionaries, and that encoding is not cuTile's.
        module = tilebc.load(original)
        module.layout = None
        for function in module.functions:
            function.optimization_hints = _sorted_dictionaries(function.optimization_hints)
        canonical = tilebc.dump(module)
        assert data == canonical
        assert canonical != original


# One file per kernel: its newest version (tileiras 13.5 reads them all).
NEWEST = {}
for _path in FILES:
    if _path.parent.name not in NEWEST or _version(_path) > _version(NEWEST[_path.parent.name]):
        NEWEST[_path.parent.name] = _path
ARCHS = ("sm_90", "sm_100", "sm_107")  # Blackwell-only types (fp4, e8m0, e5m3) need the later ones


def _compile_reassembled(path):
    """(arch, result) for the first architecture whose tileiras does not reject the kernel's
    types; what the architecture supports is checked against the original bytes."""
    data = assembled(path, ".dis")
    for arch in ARCHS:
        result = tileiras_accepts(data, arch)
        if result.returncode == 5 and "Incompatibility with architecture" in result.stderr:
            continue
        return arch, result
    return None, result


@needs_tileiras
@pytest.mark.parametrize("name", sorted(NEWEST))
def test_tileiras_compiles_reassembled(name):
    # one kernel per test, so xdist workers split the kernels (tileiras runs are memoised in conftest)
    arch, result = _compile_reassembled(NEWEST[name])
    assert arch is not None, f"no architecture in {ARCHS} accepts it: {result.stderr}"
    assert result.ok, result.stderr
    if arch != "sm_90":  # only where the original itself is Hopper-incompatible
        original = tileiras_accepts(NEWEST[name].read_bytes(), "sm_90")
        assert "Incompatibility with architecture" in original.stderr, original.stderr


def test_text_positions_are_recorded():
    path = FILES[0]
    module = parse_module(path.with_suffix(".dis").read_text())
    assert module.functions[0].text_pos == (1, 1)
    assert module.functions[0].body.ops[0].text_pos == (2, 3)


HEADER = "entry @k(%arg0: tile<i32>) {\n"
MALFORMED = [
    # (text, line, column, message prefix)
    (HEADER + "  %0 = addi %arg0, %arg0 : tile<i32>\n  return", 3, 9, "expected '}' to close"),
    (HEADER + "  %0 = frobnicate %arg0 : tile<i32>\n  return\n}\n", 2, 8, "unknown operation 'frobnicate'"),
    (HEADER + "  %0 = addi %arg0, %nope : tile<i32>\n  return\n}\n", 2, 20, "use of undefined value %nope"),
    (HEADER + "  %0 = addi %arg0 %arg0 : tile<i32>\n  return\n}\n", 2, 19, "expected ','"),
    (HEADER + "  %0 = addi %arg0, %arg0 : tile<i32\n  return\n}\n", 3, 3, "expected '>' in type"),
    (HEADER + "  %0 = addi %arg0, %arg0 : tile<i32>\n  %0 = addi %arg0, %arg0 : tile<i32>\n"
     "  return\n}\n", 3, 3, "redefinition of SSA value %0"),
    (HEADER + "  %0 = cmpi bigger %arg0, %arg0, signed : tile<i32> -> tile<i1>\n  return\n}\n",
     2, 13, "custom op 'cuda_tile.cmpi' expected 'comparison_predicate' to be one of: "
     "{'equal', 'not_equal', 'less_than', 'less_than_or_equal', 'greater_than', "
     "'greater_than_or_equal'} (expected comparison_predicate, one of"),
    (HEADER + "  %0 = constant <i8: 300> : tile<i8>\n  return\n}\n", 2, 22,
     "integer constant out of range for type (integer 300 is out of range for i8"),
    (HEADER + "  %0 = exti %arg0 sideways : tile<i32> -> tile<i64>\n  return\n}\n", 2, 19,
     "custom op 'cuda_tile.exti' expected signedness to be one of: {'signed', 'unsigned'} "
     "(expected signedness, one of"),
    (HEADER + "  return %arg0 : tile<f32>\n}\n", 2, 18,
     "return: operand operands has type tile<i32>, but the text says tile<f32>"),
    (HEADER + "  %0 = addi %arg0, %arg0 : tile<i32> ~\n}\n", 2, 38, "unexpected character '~'"),
    ("func @k() {\n}\n", 1, 1, "expected 'entry', 'global' or 'module'"),
    (HEADER + "  %a:2 = addi %arg0, %arg0 : tile<i32>\n  return\n}\n", 2, 3,
     "addi defines 1 results but 2 names were given"),
]
FLOAT_HEADER = "entry @k(%arg0: tile<i32>, %f: tile<f32>) {\n"
RETURN = "  return\n}\n"
MALFORMED += [
    # lexer: bad characters, unterminated strings, malformed numbers
    (HEADER + "  %0 = addi %arg0, %arg0 : tile<i32> \u00a7\n" + RETURN, 2, 38,
     "unexpected character '\u00a7'"),
    (HEADER + "  %c = constant <i1: true> : tile<i1>\n  assert %c, \"never closed : tile<i1>\n"
     + RETURN, 3, 14, "unterminated string"),
    (HEADER + "  %0 = constant <i32: 12abc> : tile<i32>\n" + RETURN, 2, 23, "malformed number '12abc'"),
    (FLOAT_HEADER + "  %0 = constant <f32: 1.5e> : tile<f32>\n" + RETURN, 2, 23,
     "malformed number '1.5e'"),
    (HEADER + "  %0 = constant <i32: 0x> : tile<i32>\n" + RETURN, 2, 23, "malformed number '0x'"),
    # parser: missing tokens
    (HEADER + "  %0 = addi %arg0, %arg0 tile<i32>\n" + RETURN, 2, 26, "expected ':' in addi, found 'tile'"),
    (HEADER + "  %0 = addi %arg0 : tile<i32>\n" + RETURN, 2, 19, "expected ',' in addi, found ':'"),
    ("entry @k(%arg0 tile<i32>) {\n" + RETURN, 1, 16, "expected ':', found 'tile'"),
    # a missing token is reported where the line before ends, as MLIR does
    (HEADER + "  %0 = addi %arg0, %arg0 : tile<i32> loc(\"a.py\":1:2\n" + RETURN, 2, 52,
     "expected ')' to close loc(...), found 'return'"),
    # parser: wrong attribute keywords
    (FLOAT_HEADER + "  %0 = addf %f, %f rounding<sideways> : tile<f32>\n" + RETURN, 2, 29,
     "custom op 'cuda_tile.addf' expected rounding mode to be one of: 'nearest_even', 'zero', "
     "'negative_inf', 'positive_inf', got: 'sideways' (expected rounding mode, one of: "
     "nearest_even, zero,"),
    (HEADER + "  %0 = addi %arg0, %arg0 overflow<maybe> : tile<i32>\n" + RETURN, 2, 35,
     "expected overflow, one of: none, no_signed_wrap"),
    (FLOAT_HEADER + "  %0 = cmpf less_than sometimes %f, %f : tile<f32> -> tile<i1>\n" + RETURN, 2, 23,
     "custom op 'cuda_tile.cmpf' expected 'comparison_ordering' to be one of: {'ordered', "
     "'unordered'} (expected comparison_ordering, one of: unordered, ordered; found "
     "'sometimes')"),
    # parser: type syntax
    (HEADER + "  %0 = addi %arg0, %arg0 : tile<4xq32>\n" + RETURN, 2, 35, "expected an element type"),
    # parser: SSA values used before any definition, aliases, blocks
    (HEADER + "  %0 = addi %arg0, %arg0 : tile<i32>\n  %1 = addi %0, %later : tile<i32>\n" + RETURN,
     3, 17, "use of undefined value %later"),
    (HEADER + "  %0 = addi %arg0, %arg0 : tile<i32> loc(#nowhere)\n" + RETURN, 2, 42,
     "use of undefined alias #nowhere"),
    (HEADER + RETURN + "#loc = loc(unknown)\n#loc = loc(unknown)\n", 5, 1, "redefinition of alias #loc"),
    (HEADER + "  %0 = addi %arg0, %arg0 : tile<i32> loc(#l)\n" + RETURN
     + "#l = #cuda_tile.di_loc<loc(unknown) in #l>\n", 5, 6, "#cuda_tile.di_loc needs a file location"),
    (HEADER + "  ^bb1:\n" + RETURN, 2, 3, "block labels are not allowed: a Tile IR region holds a "
     "single block"),
]


@pytest.mark.parametrize("text, line, column, prefix", MALFORMED,
                         ids=[m[3].split()[0] + str(i) for i, m in enumerate(MALFORMED)])
def test_malformed_text(text, line, column, prefix):
    with pytest.raises(TextSyntaxError) as caught:
        parse_module(text, "bad.mlir")
    error = caught.value
    assert (error.file, error.line, error.column) == ("bad.mlir", line, column), str(error)
    assert error.message.startswith(prefix), error.message
    # The message shows the offending line with a caret under the column.
    source_line, caret = error.message.splitlines()[1:3]
    assert caret.index("^") - 2 == column - 1
    assert source_line[2:] == text.splitlines()[line - 1]


@needs_disasm
def test_zero_d_tensor_view_may_omit_strides():
    """NVIDIA prints a 0-d tensor view as `tensor_view<f32>`; that text reads back."""
    text = ("entry @k(%p: tile<ptr<f32>>) {\n"
            "  %v = make_tensor_view %p, shape = [], strides = [] : tensor_view<f32>\n  return\n}\n")
    data = assemble(text, "13.5")
    listing = tileirdisasm(data)
    assert listing.ok, listing.stderr
    assert ": tensor_view<f32>\n" in listing.stdout
    assert assemble(listing.stdout, "13.5") == data
    assert print_module(tilebc.load(data)) == listing.stdout


def test_assemble_verifies_by_default_with_line_and_column():
    text = ("entry @k(%p: tile<ptr<f32>>) {\n"
            "  %c = constant <f32: 1.0> : tile<4xf32>\n"
            "  %x = addi %c, %c : tile<4xf32>\n"
            "  return\n}\n")
    with pytest.raises(tilebc.VerificationError) as caught:
        assemble(text, "13.5", "k.mlir")
    assert (caught.value.file, caught.value.line) == ("k.mlir", 3)
    assert "addi" in str(caught.value) and str(caught.value).startswith("k.mlir:3:")
    assert assemble(text, "13.5", "k.mlir", verify=False)[:8] == b"\x7fTileIR\x00"
