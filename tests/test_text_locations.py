"""Debug locations written by hand: lexical blocks, call sites, inline and aliased forms, all
re-encoded so that tileirdisasm -g prints them back."""
import pytest

import tilebc
from tilebc.ir import location as L
from tilebc.oracles import tileirdisasm
from tilebc.text import parse_module, print_module

from conftest import needs_disasm

TEXT = """\
cuda_tile.module @m {
  cuda_tile.entry @k(%x: !cuda_tile.tile<f32>) {
    %a = cuda_tile.negf %x : !cuda_tile.tile<f32> loc(#in_block)
    %b = cuda_tile.absf %a : !cuda_tile.tile<f32> loc(callsite(#inlined at #in_block))
    %c = cuda_tile.exp %b : !cuda_tile.tile<f32> loc("bare.py":9:1)
    %d = cuda_tile.sqrt %c : !cuda_tile.tile<f32> loc(#cuda_tile.di_loc<loc("k.py":12:5) in #sub>)
    cuda_tile.return loc(unknown)
  } loc(#top)
}
#file = #cuda_tile.di_file<"k.py" in "/src">
#unit = #cuda_tile.di_compile_unit<file = #file>
#sub = #cuda_tile.di_subprogram<file = #file, line = 3, name = "k", linkageName = "k", compileUnit = #unit>
#block = #cuda_tile.di_lexical_block<scope = #sub, file = #file, line = 7, column = 2>
#top = #cuda_tile.di_loc<loc("k.py":3:0) in #sub>
#in_block = #cuda_tile.di_loc<loc("k.py":8:4) in #block>
#inlined = #cuda_tile.di_loc<loc("helper.py":20:11) in #sub>
"""


def test_locations_are_read_into_the_ir():
    module = parse_module(TEXT, "k.mlir")
    function = module.functions[0]
    neg, absf, exp, sqrt, ret = function.body.ops
    file = L.DIFile("k.py", "/src")
    sub = L.DISubprogram(file, 3, "k", "k", L.DICompileUnit(file), 0)
    block = L.DILexicalBlock(sub, file, 7, 2)
    assert function.loc == L.DILoc(sub, "k.py", 3, 0)
    assert neg.loc == L.DILoc(block, "k.py", 8, 4)
    assert absf.loc == L.CallSiteLoc(L.DILoc(sub, "helper.py", 20, 11), neg.loc)
    assert exp.loc is None  # a bare file location has no scope: the format cannot hold it
    assert sqrt.loc == L.DILoc(sub, "k.py", 12, 5)  # inline di_loc without an alias
    assert ret.loc is None


@needs_disasm
def test_hand_written_locations_survive_the_bytecode():
    module = parse_module(TEXT, "k.mlir")
    data = tilebc.dump(module, "13.5")
    listing = tileirdisasm(data, debug_info=True)
    assert listing.ok, listing.stderr
    assert listing.stdout == print_module(module, debug=True)
    assert "#cuda_tile.di_lexical_block<scope = #di_subprogram, file = #di_file, line = 7, " \
           "column = 2>" in listing.stdout
    # And NVIDIA's listing parses back to the same bytes.
    assert tilebc.dump(parse_module(listing.stdout), "13.5") == data


# A 13.5 subprogram marked as a declaration (DISubprogram flags bit 0), with and without a
# scopeLine: NVIDIA prints `flags = declaration` last.
DECLARATION = TEXT.replace(
    'compileUnit = #unit>', 'compileUnit = #unit, scopeLine = 4, flags = declaration>').replace(
    '#inlined = #cuda_tile.di_loc<loc("helper.py":20:11) in #sub>',
    '#helper = #cuda_tile.di_subprogram<file = #file, line = 20, name = "h", linkageName = "h", '
    'compileUnit = #unit, flags = declaration>\n'
    '#inlined = #cuda_tile.di_loc<loc("helper.py":20:11) in #helper>')


def test_subprogram_declaration_flag_is_read():
    module = parse_module(DECLARATION, "k.mlir")
    absf = module.functions[0].body.ops[1]
    assert module.functions[0].loc.scope.flags == 1
    assert module.functions[0].loc.scope.scope_line == 4
    assert absf.loc.callee.scope == L.DISubprogram(L.DIFile("k.py", "/src"), 20, "h", "h",
                                                   L.DICompileUnit(L.DIFile("k.py", "/src")),
                                                   0, flags=1)


@needs_disasm
def test_subprogram_declaration_flag_prints_as_tileirdisasm_prints_it():
    module = parse_module(DECLARATION, "k.mlir")
    data = tilebc.dump(module, "13.5")
    listing = tileirdisasm(data, debug_info=True)
    assert listing.ok, listing.stderr
    assert "scopeLine = 4, flags = declaration>" in listing.stdout
    assert 'linkageName = "h", compileUnit = #di_compile_unit, flags = declaration>' in listing.stdout
    assert print_module(tilebc.load(data), debug=True) == listing.stdout
    # NVIDIA's listing parses back to the same bytes: the flag survives the text round trip.
    assert tilebc.dump(parse_module(listing.stdout), "13.5") == data


def test_subprogram_flags_cannot_be_written_before_13_5():
    module = parse_module(DECLARATION, "k.mlir")
    with pytest.raises(tilebc.EncodeError, match="DISubprogram flags 1 needs bytecode version 13.5"):
        tilebc.dump(module, "13.4")


@pytest.mark.parametrize("value, message", [
    ("definition", "di_subprogram flags: expected one of declaration"),
    ("3", "di_subprogram flags: expected one of declaration"),
])
def test_subprogram_flags_text_errors_point_at_the_value(value, message):
    text = DECLARATION.replace("flags = declaration>", f"flags = {value}>", 1)
    with pytest.raises(tilebc.TextSyntaxError) as raised:
        parse_module(text, "k.mlir")
    assert message in str(raised.value)
    line = next(i for i, l in enumerate(text.splitlines(), 1) if f"flags = {value}" in l)
    assert raised.value.line == line


WRAPPED = ("#file = #cuda_tile.di_file<\"k.py\" in \"/src\">\n"
           "#unit = #cuda_tile.di_compile_unit<file = #file>\n"
           "#sub = #cuda_tile.di_subprogram<file = #file, line = 3, name = \"k\", linkageName = \"k\", "
           "compileUnit = #unit>\n"
           "#top = #cuda_tile.di_loc<loc(\"k.py\":3:0) in #sub>\n")


@pytest.mark.parametrize("op_loc, entry_loc, column, what", [
    ('loc("op"(#top))', "loc(#top)", 14, "a named location"),
    ('loc("op")', "loc(#top)", 14, "a named location"),
    ("loc(fused[#top])", "loc(#top)", 14, "a fused location"),
    ("loc(fused<#top>[#top, unknown])", "loc(#top)", 14, "a fused location"),
    ("loc(callsite(#top at fused[#top]))", "loc(#top)", 31, "a fused location"),
    ("loc(#top)", 'loc("entry"(#top))', 7, "a named location"),
    # NVIDIA's verifier looks through the wrapper and finds a scope the entry lacks
    ("loc(fused[#top])", "loc(unknown)", 14, "a fused location"),
])
def test_named_and_fused_locations_are_refused_not_dropped(op_loc, entry_loc, column, what):
    """NVIDIA's writer refuses NameLoc/FusedLoc ("unsupported location, expected DILocAttr or
    CallSiteLoc") and its verifier checks the scopes behind them; dropping them hid both."""
    text = f"entry @k() {{\n  return {op_loc}\n}} {entry_loc}\n" + WRAPPED
    with pytest.raises(tilebc.TextSyntaxError) as caught:
        parse_module(text, "w.mlir")
    error = caught.value
    line = 3 if entry_loc.startswith('loc("') else 2
    assert (error.file, error.line, error.column) == ("w.mlir", line, column), str(error)
    kind = "FusedLoc" if "fused" in what else "NameLoc"
    assert error.message.startswith(f"unsupported location, got {kind}, expected DILocAttr or "
                                    f"CallSiteLoc: {what} (loc("), error.message
    assert "cannot be written to Tile IR bytecode" in error.message, error.message


def test_unused_wrapped_alias_is_not_an_error():
    text = "entry @k() {\n  return loc(#top)\n} loc(#top)\n" + WRAPPED + "#spare = loc(fused[#top])\n"
    assert parse_module(text, "w.mlir").functions[0].loc is not None
