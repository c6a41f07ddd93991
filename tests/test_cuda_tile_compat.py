"""`tilebc opt` / `tilebc translate` behave as NVIDIA's cuda-tile-opt / cuda-tile-translate do on
the flags of their lit suite (small inputs of our own; the suite itself runs from
conformance/run_cuda_tile_lit.py)."""
import pytest

import tilebc
from tilebc.cli import main
from tilebc.errors import TextSyntaxError
from tilebc.mlir_tools import check_expected, expected_diagnostics, split_input, Diag
from tilebc.text import print_module
from tilebc.text.parser import parse_modules

TWO_MODULES = """\
cuda_tile.module @first {
  cuda_tile.global @g <i32: [1, 2]> : !cuda_tile.tile<2xi32>
  cuda_tile.entry @k() {
    cuda_tile.return
  }
}
cuda_tile.module @second {
  entry @k() {
    %c = constant <i32: 7> : tile<i32>
    return
  }
}
"""


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path, text, name="in.mlir"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_opt_prints_mlir_form_and_keeps_modules_apart(tmp_path, capsys):
    code, out, err = run(capsys, "opt", write(tmp_path, TWO_MODULES))
    assert code == 0, err
    assert out == (
        "cuda_tile.module @first {\n"
        "  global @g <i32: [1, 2]> : tile<2xi32>\n"
        "  entry @k() {\n"
        "    return\n"
        "  }\n"
        "}\n"
        "cuda_tile.module @second {\n"
        "  entry @k() {\n"
        "    %cst_7_i32 = constant <i32: 7> : tile<i32>\n"
        "    return\n"
        "  }\n"
        "}\n")
    # the same symbol in two modules is no clash, and the output reads back the same
    again = write(tmp_path, out, "again.mlir")
    assert run(capsys, "opt", again)[1] == out


def test_dis_keeps_tileirdisasm_form_while_translate_prints_mlir(tmp_path, capsys):
    module = parse_modules(TWO_MODULES)[1]
    data = tilebc.dump(module, tilebc.Version(13, 1))
    path = tmp_path / "k.tilebc"
    path.write_bytes(data)
    assert run(capsys, "dis", path)[1] == print_module(tilebc.load(data))
    assert run(capsys, "dis", path)[1].startswith("entry @k()")
    code, out, _ = run(capsys, "translate", "-cudatilebc-to-mlir", path)
    assert code == 0 and out.startswith("cuda_tile.module @kernels {\n  entry @k() {\n")
    assert run(capsys, "opt", path)[1] == out  # opt reads bytecode as well


def test_globals_and_entries_keep_their_text_order():
    text = ("cuda_tile.module @m {\n  entry @a() {\n    return\n  }\n"
            "  global private constant @g <f32: 1.0> : tile<1xf32>\n}\n")
    printed = print_module(parse_modules(text)[0], mlir=True)
    assert printed.index("entry @a") < printed.index("global private constant @g")


def test_split_input_file_keeps_line_numbers_and_joins_outputs(tmp_path, capsys):
    text = ("cuda_tile.module @a {\n}\n// -----\n"
            "cuda_tile.module @b {\n  entry @k() {\n    %x = addi %nope, %nope : tile<i32>\n"
            "  }\n}\n// -----\ncuda_tile.module @c {\n}\n")
    chunks = split_input(text, True)
    assert len(chunks) == 3 and chunks[1].count("\n") >= 5
    path = write(tmp_path, text)
    code, out, err = run(capsys, "opt", "-split-input-file", path)
    assert code == 1
    assert err.strip() == f"{path}:6:15: error: use of undefined value %nope"
    assert out == "cuda_tile.module @a {\n}\n// -----\ncuda_tile.module @c {\n}\n"


def test_verify_diagnostics_reports_mismatches_with_file_and_line(tmp_path, capsys):
    text = ("cuda_tile.module @m {\n  entry @k() {\n"
            "    // expected-error @below {{this is not what is said}}\n"
            "    %x = addi %nope, %nope : tile<i32>\n  }\n}\n"
            "// -----\n"
            "cuda_tile.module @n {\n  // expected-warning @+1 {{never said}}\n"
            "  entry @k() {\n  }\n}\n")
    path = write(tmp_path, text)
    code, out, err = run(capsys, "opt", "-split-input-file", "-verify-diagnostics", path)
    assert code == 1
    lines = err.splitlines()
    assert f"{path}:4:15: error: unexpected error: use of undefined value %nope" in lines
    assert f'{path}:3:8: error: expected error "this is not what is said" was not produced' \
        in lines
    assert f'{path}:9:6: error: expected warning "never said" was not produced' in lines
    # the right text on the right line passes, and exits 0
    fixed = text.replace("this is not what is said", "undefined value %nope").replace(
        "  // expected-warning @+1 {{never said}}\n", "")
    code, _, err = run(capsys, "opt", "-split-input-file", "-verify-diagnostics",
                       write(tmp_path, fixed, "fixed.mlir"))
    assert code == 0, err


def test_expected_placement_forms():
    text = ("line1\n// expected-note @above {{a}}\n// expected-error @below {{b}}\n"
            "// expected-warning @below {{c}}\nline5\nx // expected-remark {{d}}\n"
            "// expected-error @-6 {{e}}\n// expected-error @unknown {{f}}\n")
    found, problems = expected_diagnostics(text, "f")
    assert not problems
    assert [(e.severity, e.line, e.text) for e in found] == [
        ("note", 1, "a"), ("error", 5, "b"), ("warning", 5, "c"), ("remark", 6, "d"),
        ("error", 1, "e"), ("error", None, "f")]
    text = "// expected-error @below {{b}}\nop\n// expected-error @unknown {{f}}\n"
    produced = [Diag("error", 2, 1, "xx b yy"), Diag("error", None, None, "f!")]
    assert check_expected(text, "f", produced) == []
    wrong_line = check_expected(text, "f", [Diag("error", 3, 1, "xx b yy"), produced[1]])
    assert [p.message for p in wrong_line] == ["unexpected error: xx b yy",
                                               'expected error "b" was not produced']


def test_hint_warnings_only_when_asked(tmp_path, capsys):
    text = ("cuda_tile.module @m {\n  entry @k() optimization_hints=<sm_100a={num_cta_in_cga=2}> "
            "{\n    return\n  }\n}\n")
    path = write(tmp_path, text)
    code, out, err = run(capsys, "opt", path)
    assert code == 0 and err == "" and "sm_100a = {num_cta_in_cga = 2}" in out
    code, _, err = run(capsys, "opt", "-Wunsupported-hints", path)
    assert code == 0 and f"{path}:2:3: warning: unknown hint key sm_100a" in err
    code, _, err = run(capsys, "opt", "-Wunsupported-hints", "-Werr-hints", path)
    assert code == 1
    assert f"{path}:2:3: error: Optimization hints verification failed" in err.splitlines()


def test_testing_func_only_on_request_and_never_in_bytecode(tmp_path, capsys):
    text = ("cuda_tile.module @m {\n  testing$func @f(%a: !cuda_tile.token) -> tile<i32> {\n"
            "    %c = constant <i32: 1> : tile<i32>\n    return %c : tile<i32>\n  }\n}\n")
    path = write(tmp_path, text)
    code, _, err = run(capsys, "opt", path)
    assert code == 1 and "testing$func" in err and f"{path}:2:3: error:" in err
    code, out, err = run(capsys, "opt", "--testing-ops", path)
    assert code == 0, err
    assert "  testing$func @f(%arg0: token) -> tile<i32> {" in out
    code, _, err = run(capsys, "translate", "--testing-ops", "-mlir-to-cudatilebc", path,
                       "-o", tmp_path / "x.tilebc")
    assert code != 0 and "has no bytecode form" in err
    assert not (tmp_path / "x.tilebc").exists()
    # as an entry, the same signature breaks the entry rules
    code, _, err = run(capsys, "opt", write(tmp_path, text.replace("testing$func", "entry"),
                                            "entry.mlir"))
    assert code == 1 and "an entry returns nothing" in err


@pytest.mark.parametrize("text, version, message", [
    ("  entry @k() {\n    %i = constant <i32: [1, 2]> : tile<2xi32>\n"
     "    %r = negi %i overflow<no_signed_wrap> : tile<2xi32>\n  }\n", "13.1",
     "3:5: error: attribute 'overflow' requires bytecode version 13.2+, but targeting 13.1"),
    ("  global constant @g <f32: 1.0> : tile<1xf32>\n", "13.2",
     "1:3: error: constant global `g` cannot be encoded in bytecode version 13.2 (the "
     "`constant` attribute requires bytecode 13.3+)"),
    ("  global private @g <f32: 1.0> : tile<1xf32>\n", "13.1",
     "1:3: error: global `g` uses non-public symbol visibility, which cannot be encoded in "
     "bytecode version 13.1 (requires bytecode 13.3+)"),
    ("  entry @k(%p: tile<f8E8M0FNU>) {\n  }\n", "13.1",
     "error: type 'Float8E8M0FNU' requires bytecode version 13.2+, targeting 13.1"),
])
def test_version_errors_in_nvidias_words(tmp_path, capsys, text, version, message):
    path = write(tmp_path, "cuda_tile.module @m {\n" + text + "}\n")
    # the body starts on line 2: shift the expected line
    if message[0].isdigit():
        line, rest = message.split(":", 1)
        message = f"{path}:{int(line) + 1}:{rest}"
    else:
        message = f"{path}: {message}"
    code, _, err = run(capsys, "translate", "-mlir-to-cudatilebc", f"-bytecode-version={version}",
                       path, "-o", tmp_path / "out.tilebc")
    assert code == 1
    assert message in err.splitlines(), err
    code, _, err = run(capsys, "translate", "-mlir-to-cudatilebc", "-bytecode-version=13.5",
                       path, "-o", tmp_path / "out.tilebc")
    assert code == 0, err


def test_unsupported_bytecode_version_is_named(tmp_path, capsys):
    path = write(tmp_path, "cuda_tile.module @m {\n}\n")
    code, _, err = run(capsys, "translate", "-mlir-to-cudatilebc", "-bytecode-version=12.0", path)
    assert code == 2
    assert "Invalid argument '12.0': the supported versions are [13.1 - 13.5]" in err


def test_long_float_literal_is_read_but_a_hostile_one_is_not():
    long_text = "1" + "0" * 400 + ".0"  # 1e400 written out: infinity in f64
    text = f"entry @k() {{\n  %c = constant <f64: {long_text}> : tile<f64>\n  return\n}}\n"
    module = parse_modules(text)[0]
    assert "0x7FF0000000000000" in print_module(module)
    with pytest.raises(TextSyntaxError, match="too long"):
        parse_modules(text.replace(long_text, "9" * 10000))


@pytest.mark.parametrize("hints, message", [
    ("<sm_100=2>", "custom op 'cuda_tile.entry' expected dictionary attribute for "
                   "optimization_hints entry `sm_100` got value=2 : i64"),
    ("<2>", "expected valid keyword or string"),
])
def test_malformed_hints_in_nvidias_words(hints, message):
    text = f"entry @k() optimization_hints={hints} {{\n  return\n}}\n"
    with pytest.raises(TextSyntaxError) as caught:
        parse_modules(text)
    assert message in caught.value.message and caught.value.line == 1


def test_hint_value_warnings_in_nvidias_words(tmp_path, capsys):
    text = ("cuda_tile.module @m {\n  entry @k() optimization_hints=<sm_100={num_cta_in_cga=7, "
            "occupancy=64, num_qqq=1}> {\n    return\n  }\n}\n")
    code, _, err = run(capsys, "opt", "-Wunsupported-hints", write(tmp_path, text))
    assert code == 0
    for words in ("expected power-of-two \u2264 16 for sm_100.num_cta_in_cga",
                  "integer value in the range [1, 32] is expected for sm_100.occupancy",
                  "num_qqq is not known hint for current Operation"):
        assert words in err, words


GENERIC_INPUT = """\
cuda_tile.module @m {
  entry @k(%p: tile<ptr<f32>>, %n: tile<i32>) {
    %a = constant <i32: [1, 2]> : tile<2xi32>
    %c = "cuda_tile.cmpi"(%a, %a) {comparison_predicate = #cuda_tile.comparison_predicate<less_than>, signedness = #cuda_tile.signedness<unsigned>} : (!cuda_tile.tile<2xi32>, !cuda_tile.tile<2xi32>) -> !cuda_tile.tile<2xi1>
    %lo = constant <i32: 0> : tile<i32>
    %one = constant <i32: 1> : tile<i32>
    %s = for %i in (%lo to %n, step %one) : tile<i32> iter_values(%acc = %lo) -> (tile<i32>) {
      %t = addi %acc, %i : tile<i32>
      continue %t : tile<i32>
    }
    %r = reduce %a dim=0 identities=[0 : i32] : tile<2xi32> -> tile<i32>
    (%x: tile<i32>, %y: tile<i32>) {
      %z = addi %x, %y : tile<i32>
      yield %z : tile<i32>
    }
    %b = assume bounded<0, 42>, %n : tile<i32>
    return
  }
}
"""


def test_generic_form_is_read_and_printed_back(tmp_path, capsys):
    path = write(tmp_path, GENERIC_INPUT)
    code, custom, err = run(capsys, "opt", path)
    assert code == 0, err
    # the generic input was read as the op itself (values get tilebc's names when printed)
    assert "%0 = cmpi less_than %cst_i32, %cst_i32, unsigned : tile<2xi32> -> tile<2xi1>" \
        in custom
    code, generic, err = run(capsys, "opt", "-mlir-print-op-generic", path)
    assert code == 0, err
    assert ('%0 = "cuda_tile.cmpi"(%cst_i32, %cst_i32) {comparison_predicate = '
            '#cuda_tile.comparison_predicate<less_than>, signedness = '
            '#cuda_tile.signedness<unsigned>} : (tile<2xi32>, tile<2xi32>) -> tile<2xi1>') \
        in generic
    assert ('%for = "cuda_tile.for"(%cst_0_i32, %arg1, %cst_1_i32, %cst_0_i32) ({\n'
            '      ^bb0(%loopIdx: tile<i32>, %iterArg0: tile<i32>):') in generic
    assert "{operandSegmentSizes = array<i32: 1, 1, 1, 1>}" in generic
    assert '"cuda_tile.continue"(%1) : (tile<i32>) -> ()' in generic
    assert "{dim = 0 : i32, identities = [0 : i32]} : (tile<2xi32>) -> tile<i32>" in generic
    assert '"cuda_tile.assume"(%arg1) {predicate = bounded<0, 42>}' in generic
    # generic text reads back to the same IR
    code, again, err = run(capsys, "opt", write(tmp_path, generic, "generic.mlir"))
    assert code == 0, err
    assert again == custom


@pytest.mark.parametrize("op, message", [
    ('"cuda_tile.cmpi"(%a, %a) {comparison_predicate = #cuda_tile.comparison_predicate<less_than>,'
     ' signedness = #cuda_tile.signedness<signed>} : (tile<2xi32>) -> tile<2xi1>',
     "2 operands but 1 operand types"),
    ('"cuda_tile.cmpi"(%a, %a) {bogus = 1} : (tile<2xi32>, tile<2xi32>) -> tile<2xi1>',
     "cmpi has no attribute 'bogus'"),
    ('"test.other"(%a) : (tile<2xi32>) -> tile<2xi32>', "unknown operation 'test.other'"),
    ('"cuda_tile.negi"(%a) : (tile<2xi64>) -> tile<2xi64>',
     "operand 0 has type tile<2xi32>, declared tile<2xi64>"),
])
def test_bad_generic_ops_are_named_with_line(op, message):
    text = (f"entry @k() {{\n  %a = constant <i32: [1, 2]> : tile<2xi32>\n  %b = {op}\n"
            "  return\n}\n")
    with pytest.raises(TextSyntaxError) as caught:
        parse_modules(text, "g.mlir")
    assert message in caught.value.message and caught.value.line == 3, str(caught.value)


def test_builtin_mlir_types_are_named_as_nvidias_writer_names_them(tmp_path, capsys):
    path = write(tmp_path, "cuda_tile.module @m {\n  entry @k(%a: tensor<2xi16>) {\n  }\n}\n")
    code, _, err = run(capsys, "translate", "-mlir-to-cudatilebc", path, "-o",
                       tmp_path / "x.tilebc")
    assert code == 1
    assert err.startswith(f"{path}:2:16: error: unsupported type in bytecode writer: 'tensor'")


def test_top_level_ops_are_checked_under_testing_ops_only(tmp_path, capsys):
    """NVIDIA's verifier tests put single ops at the top level (MLIR's implicit module)."""
    text = ("%c = cuda_tile.constant <i32: 4> : !cuda_tile.tile<i32>\n"
            "// expected-error @below {{operand #0 must be 0D tile of i1 values, but got "
            "'!cuda_tile.tile<i32>'}}\n"
            '"cuda_tile.if"(%c) ({\n  cuda_tile.yield\n}, {\n}) : (!cuda_tile.tile<i32>) -> ()\n')
    path = write(tmp_path, text)
    code, _, err = run(capsys, "opt", "--testing-ops", "-verify-diagnostics", path)
    assert code == 0, err
    code, _, err = run(capsys, "opt", path)
    assert code == 1 and f"{path}:1:1: error: expected 'entry', 'global' or 'module'" in err


def test_a_boolean_is_an_i1_literal_only():
    with pytest.raises(TextSyntaxError, match="expected integer value for i8, found 'true'"):
        parse_modules("entry @k() {\n  %c = constant <i8: true> : tile<i8>\n  return\n}\n")
    module = parse_modules("entry @k() {\n  %c = constant <i1: true> : tile<i1>\n  return\n}\n")
    assert "constant <i1: true> : tile<i1>" in print_module(module[0])


def test_module_and_entries_in_generic_form():
    text = ('"cuda_tile.module"() <{sym_name = "gm"}> ({\n'
            '  "cuda_tile.entry"() <{arg_attrs = [{}], function_type = (!cuda_tile.tile<i32>) '
            '-> (), sym_name = "k"}> ({\n'
            '  ^bb0(%a: !cuda_tile.tile<i32>):\n'
            '    %0 = "cuda_tile.negi"(%a) : (!cuda_tile.tile<i32>) -> !cuda_tile.tile<i32>\n'
            '    "cuda_tile.return"() : () -> ()\n'
            '  }) : () -> ()\n'
            '}) : () -> ()\n')
    modules = parse_modules(text)
    assert len(modules) == 1 and modules[0].name == "gm"
    assert print_module(modules[0], mlir=True) == (
        "cuda_tile.module @gm {\n  entry @k(%arg0: tile<i32>) {\n"
        "    %0 = negi %arg0 : tile<i32>\n    return\n  }\n}\n")
    with pytest.raises(TextSyntaxError, match="testing\\$func"):
        parse_modules(text.replace("cuda_tile.entry", "cuda_tile.testing$func"))
    assert parse_modules(text.replace("cuda_tile.entry", "cuda_tile.testing$func"),
                         testing_ops=True)[0].functions[0].testing


def test_a_tile_dimension_of_zero_is_refused_where_the_type_is_written():
    with pytest.raises(TextSyntaxError) as caught:
        parse_modules("entry @k() {\n  %c = constant <f32: 0.0> : tile<1x0x2xf32>\n"
                      "  return\n}\n")
    assert "all dimensions must be positive constants, got 1, 0, 2" in caught.value.message
    assert (caught.value.line, caught.value.column) == (2, 30)


def test_translate_writes_one_module_per_bytecode_file(tmp_path, capsys):
    path = write(tmp_path, TWO_MODULES)
    code, _, err = run(capsys, "translate", "-mlir-to-cudatilebc", path, "-o",
                       tmp_path / "x.tilebc")
    assert code == 1 and "holds 2 modules and a bytecode file holds one" in err
    split = write(tmp_path, TWO_MODULES.replace("}\ncuda_tile.module @second",
                                                "}\n// -----\ncuda_tile.module @second"), "s.mlir")
    code, out, err = run(capsys, "translate", "-test-cudatile-roundtrip", "-split-input-file",
                         split)
    assert code == 0, err
    assert out.count("cuda_tile.module @kernels {") == 2 and "// -----\n" in out


def test_split_chunks_are_not_glued_into_one_bytecode_file(tmp_path, capsys):
    text = "cuda_tile.module @a {\n}\n// -----\ncuda_tile.module @b {\n}\n"
    code, _, err = run(capsys, "translate", "-mlir-to-cudatilebc", "-split-input-file",
                       write(tmp_path, text), "-o", tmp_path / "x.tilebc")
    assert code == 2 and "a bytecode file holds one module" in err
    assert not (tmp_path / "x.tilebc").exists()


def _bytecode(text: str, version: str = "13.3") -> bytearray:
    return bytearray(tilebc.dump(parse_modules(text)[0], version=version))


KERNEL = "entry @k() {\n  return\n}\n"


def _edit_magic(data):
    data[0] = 0x7E


def _edit_version(data):
    data[8:10] = bytes([18, 0])


def _edit_end(data):
    data.extend(b"\x00\x00\x00")


@pytest.mark.parametrize("edit, offset, words", [
    (_edit_magic, 0, "invalid magic number: input does not start with the Tile IR magic"),
    (_edit_version, 8, "unsupported Tile version 18.0.0, this reader supports versions "
                       "[13.1 - 13.5]"),
    (_edit_end, None, "end section is not the last section: 3 bytes follow it"),
])
def test_reader_errors_in_nvidias_words(tmp_path, capsys, edit, offset, words):
    data = _bytecode(KERNEL)
    size = len(data)
    edit(data)
    path = tmp_path / "bad.tilebc"
    path.write_bytes(bytes(data))
    code, _, err = run(capsys, "translate", "-cudatilebc-to-mlir", path)
    assert code == 1
    at = size if offset is None else offset
    assert f"{path}: offset 0x{at:x}: {words}" in err, err


def test_unknown_section_id_in_nvidias_words():
    data = _bytecode(KERNEL)
    data[12] = 0x7F  # the first section header
    with pytest.raises(tilebc.DecodeError) as caught:
        tilebc.load(bytes(data))
    assert caught.value.message == "unknown section ID: 127" and caught.value.offset == 12


@pytest.mark.parametrize("element, since, name", [
    ("f4E2M1FN", "13.3", "Float4E2M1FN"), ("i4", "13.3", "Int4"),
    ("f8E8M0FNU", "13.2", "Float8E8M0FNU"),
])
def test_type_newer_than_the_file_is_named_as_nvidias_reader_names_it(element, since, name):
    data = _bytecode(f"entry @k(%a: tile<{element}>) {{\n  return\n}}\n", since)
    data[9] -= 1  # claim the version before the type's
    with pytest.raises(tilebc.DecodeError) as caught:
        tilebc.load(bytes(data))
    minor = int(since.split(".")[1]) - 1
    assert caught.value.message == (f"type '{name}' requires bytecode version {since}+, file "
                                    f"version is 13.{minor}")


def _diagnose(tmp_path, capsys, params: str, body: str) -> str:
    """The first error `tilebc opt` reports for one op in a test-only entry."""
    text = (f"cuda_tile.module @m {{\n  testing$func @k({params}) {{\n    {body}\n    return\n"
            "  }\n}\n")
    path = write(tmp_path, text)
    code, _, err = run(capsys, "opt", "--testing-ops", path)
    assert code == 1, err
    assert err.startswith(f"{path}:3:5: error: "), err
    return err.splitlines()[0].split(": error: ", 1)[1]


TV = "!cuda_tile.tensor_view<64x64xf16, strides=[1,1]>"


@pytest.mark.parametrize("params, body, message", [
    (f"%v: {TV}", f"%0:3 = get_tensor_shape %v : {TV} -> tile<i32>",
     "operation defines 2 results but was provided 3 to bind"),
    (f"%v: {TV}", f'%0:3 = "cuda_tile.get_tensor_shape"(%v) : ({TV}) -> (!cuda_tile.tile<i32>, '
                  "!cuda_tile.tile<i32>, !cuda_tile.tile<i32>)",
     "'cuda_tile.get_tensor_shape' op expected 2 results due to tensor rank, but got 3"),
    ("%v: !cuda_tile.tile<4xi64>", "%0 = get_tensor_shape %v : tile<4xi64> -> tile<i32>",
     "'cuda_tile.get_tensor_shape' expected tensor_view, got '!cuda_tile.tile<4xi64>' "
     "(operand 'src')"),
    (f"%v: {TV}", f"%0:2 = get_tensor_shape %v : {TV} -> tile<f32>",
     "'cuda_tile.get_tensor_shape' op result #0 must be variadic of 0D tile of i1 or i8 or i16 "
     "or i32 or i64 values, but got '!cuda_tile.tile<f32>' (result 'results')"),
    ("%a: tile<4xf32>, %b: tile<4xf32>", "%0 = addi %a, %b : tile<4xf32>",
     "'cuda_tile.addi' op operand #0 must be tile of i1 or i8 or i16 or i32 or i64 values, but "
     "got '!cuda_tile.tile<4xf32>' (operand 'lhs')"),
    ("%a: tile<2x4xf32>", "%0 = permute %a [1, 0] : tile<2x4xf32> -> tile<4x2x1xf32>",
     "'cuda_tile.permute' op failed to verify that all of {source, result} have same rank "
     "(result 'result' rank 3 does not match operand 'source' rank 2)"),
    ("%a: tile<2x4xf32>", "%0 = permute %a [1, 0] : tile<2x4xf32> -> tile<4x2xf16>",
     "'cuda_tile.permute' op failed to verify that all of {source, result} have the same "
     "element type (result 'result' element type f16 does not match operand 'source' element "
     "type f32)"),
    ("%a: tile<4xf32>", "%0 = permute %a [0] : tile<4xf32> -> tile<4xf32>",
     "'cuda_tile.permute' op expects at least rank 2, but got: 1 (the source's rank)"),
    ("%a: tile<2x4xf32>", "%0 = permute %a [1, 0, 2] : tile<2x4xf32> -> tile<4x2xf32>",
     "'cuda_tile.permute' op expect permutation size (3) to equal the rank of the source (2) "
     "(permutation [1, 0, 2] must be a permutation of 0..1)"),
    ("%a: tile<2x4xf32>", "%0 = permute %a [1, 7] : tile<2x4xf32> -> tile<4x2xf32>",
     "'cuda_tile.permute' op permutation element at index 1 (7) is out of bound [0, 2) "
     "(permutation [1, 7] must be a permutation of 0..1)"),
    ("%a: tile<2x4xf32>", "%0 = permute %a [1, 1] : tile<2x4xf32> -> tile<4x2xf32>",
     "'cuda_tile.permute' op expect permutation elements to be unique (permutation [1, 1] must "
     "be a permutation of 0..1)"),
    ("%a: tile<2x4xf32>", "%0 = permute %a [1, 0] : tile<2x4xf32> -> tile<4x4xf32>",
     "'cuda_tile.permute' op result shape invalid at index 1, expected: 2, but got: 4 (result "
     "shape 4x4 should be 4x2)"),
])
def test_verifier_messages_in_nvidias_words(tmp_path, capsys, params, body, message):
    assert _diagnose(tmp_path, capsys, params, body) == message


@pytest.mark.parametrize("body, message, remark_at", [
    ('  entry @k() {\n    "other.op"() : () -> ()\n    return\n  }\n',
     "only ops from the 'cuda_tile' dialect are allowed (unknown operation 'other.op', at 3:5)",
     "3:5"),
    ("  cuda_tile.constant <f32: 5.0> : !cuda_tile.tile<f32>\n",
     "only function and global ops are allowed in the body ('cuda_tile.constant' is an op, not "
     "an entry or a global, at 2:3)", "2:3"),
])
def test_foreign_and_stray_ops_are_refused_at_the_module_with_a_remark(tmp_path, capsys, body,
                                                                       message, remark_at):
    path = write(tmp_path, "cuda_tile.module @m {\n" + body + "}\n")
    code, _, err = run(capsys, "translate", "-mlir-to-cudatilebc", path, "-o",
                       tmp_path / "out.tilebc")
    assert code == 1
    assert err.splitlines() == [f"{path}:1:1: error: {message}",
                                f"{path}:{remark_at}: remark: invalid op"], err
    assert not (tmp_path / "out.tilebc").exists()


@pytest.mark.parametrize("literal, type_text, message", [
    ("<i32: [1, 2, 3]>", "tile<4xi32>", "inferred shape of elements literal ([3]) does not match "
     "type ([4]) (constant literal has shape [3] but tile<4xi32> has shape [4])"),
    ("<i32: [[1, 2], [3]]>", "tile<2x2xi32>", "tensor literal is invalid; ranks are not "
     "consistent between elements (dense constant is not rectangular: this element has shape "
     "[1], the first one [2])"),
    ("<i8: 300>", "tile<i8>", "integer constant out of range for type (integer 300 is out of "
     "range for i8, expected -128 to 255)"),
    ("<f16: 0x123456>", "tile<f16>", "float constant out of range for type (bit pattern 0x123456 "
     "does not fit in f16 (16 bits))"),
    ("<f16: 1.0>", "tile<f32>", "mismatch between the element type: 'f16' and the tile element "
     "type 'f32' (constant element type f16 does not match tile<f32>)"),
    ("<i16: XYZ>", "tile<i16>", "expected integer value for i16, found 'XYZ'"),
    ("<tensor<i32> : 1>", "tile<i32>", "expect element type to be one of i1 or i8 or i16 or i32 "
     "or i64 or f16 or bf16 or f32 or f64 or tf32 or f8E4M3FN or f8E5M2 or f8E8M0FNU or f4E2M1FN "
     "values, but got 'tensor<i32>' (expected an element type)"),
    ("<quux : 1>", "tile<i32>", "'cuda_tile.constant' unknown type: quux (expected an element "
     "type)"),
])
def test_constant_literal_errors_in_nvidias_words(literal, type_text, message):
    text = f"entry @k() {{\n  %c = constant {literal} : {type_text}\n  return\n}}\n"
    with pytest.raises(TextSyntaxError) as caught:
        parse_modules(text)
    assert caught.value.message.split("\n")[0] == message and caught.value.line == 2


DI_SETUP = """\
#f = #cuda_tile.di_file<"k.py" in "/src/">
#cu = #cuda_tile.di_compile_unit<file = #f>
#sp = #cuda_tile.di_subprogram<file = #f, line = 3, name = "k", linkageName = "k", \
compileUnit = #cu, scopeLine = 4>
#sp2 = #cuda_tile.di_subprogram<file = #f, line = 9, name = "h", linkageName = "h", \
compileUnit = #cu, scopeLine = 9>
#blk = #cuda_tile.di_lexical_block<scope = #sp, file = #f, line = 5, column = 2>
#at_k = #cuda_tile.di_loc<loc("/src/k.py":4:1) in #sp>
#at_blk = #cuda_tile.di_loc<loc("/src/k.py":5:3) in #blk>
#at_h = #cuda_tile.di_loc<loc("/src/k.py":10:1) in #sp2>
"""
SP = ('#cuda_tile.di_subprogram<file = #cuda_tile.di_file<"k.py" in "/src/">, line = 3, '
      'name = "k", linkageName = "k", compileUnit = #cuda_tile.di_compile_unit<file = '
      '#cuda_tile.di_file<"k.py" in "/src/">>, scopeLine = 4>')
SP2 = SP.replace("line = 3", "line = 9").replace('"k"', '"h"').replace("scopeLine = 4",
                                                                         "scopeLine = 9")


@pytest.mark.parametrize("entry, body_loc, line, message", [
    ("k", "", "#at_blk", "'cuda_tile.entry' op invalid function debug info scope: "
     "#cuda_tile.di_lexical_block<scope = " + SP + ', file = #cuda_tile.di_file<"k.py" in '
     '"/src/">, line = 5, column = 2>. Function location must have cuda_tile.di_subprogram debug '
     "info scope. (an entry's location must be scoped by a subprogram, got a DILexicalBlock)"),
    ("other", "", "#at_k", "'cuda_tile.entry' op invalid function debug info scope: " + SP
     + ". Function name \"other\" does not match subprogram scope linkage name \"k\". "
     "(subprogram 'k' (linkage name 'k', k.py:3) does not match the entry name @other)"),
    ("k", " loc(#at_k)", "unknown", "'cuda_tile.return' op invalid operation debug info scope: "
     + SP + ". Operation has debug info scope, but function debug info scope is undefined. "
     "(location is in subprogram 'k' (linkage name 'k', k.py:3), but the entry has no "
     "subprogram)"),
    ("k", " loc(#at_h)", "#at_k", "invalid operation debug info scope: " + SP2 + ". Operation "
     "debug info scope does not match function debug info scope: " + SP + ". (location is in "
     "subprogram 'h' (linkage name 'h', k.py:9), not in the entry's subprogram 'k' (linkage "
     "name 'k', k.py:3))"),
])
def test_debug_info_scope_errors_in_nvidias_words(tmp_path, capsys, entry, body_loc, line,
                                                  message):
    text = (DI_SETUP + "cuda_tile.module @m {\n"
            f"  entry @{entry}() {{\n    return{body_loc}\n  }} loc({line})\n}}\n")
    path = write(tmp_path, text)
    code, _, err = run(capsys, "opt", "-mlir-print-debuginfo", path)
    assert code == 1
    where = "10:3" if not body_loc else "11:5"  # the entry, or its return
    assert err.splitlines()[0] == f"{path}:{where}: error: {message}", err


def test_scoped_op_of_another_dialect_in_a_module_body_in_nvidias_words(tmp_path, capsys):
    path = write(tmp_path, DI_SETUP + 'cuda_tile.module @m {\n  "other.op"() : () -> () '
                 "loc(#at_k)\n}\n")
    code, _, err = run(capsys, "opt", "-allow-unregistered-dialect", path)
    assert code == 1
    assert err.splitlines() == [
        f"{path}:10:3: error: 'other.op' op invalid operation debug info scope: "
        '#cuda_tile.di_loc<loc("/src/k.py":4:1) in ' + SP + ">. Global variables must not have "
        "scope. (an op of another dialect in a module body, which has no subprogram)"], err
    # without a scope it is refused at the module, as any op of another dialect there
    path = write(tmp_path, 'cuda_tile.module @m {\n  "other.op"() : () -> ()\n}\n', "plain.mlir")
    code, _, err = run(capsys, "opt", "-allow-unregistered-dialect", path)
    assert code == 1
    assert err.splitlines() == [f"{path}:1:1: error: only ops from the 'cuda_tile' dialect are "
                                "allowed (unknown operation 'other.op', at 2:3)",
                                f"{path}:2:3: remark: invalid op"], err


@pytest.mark.parametrize("value", ["2147483647", "-7", "0"])
def test_decimal_integer_in_a_float_constant_is_refused_with_a_note(tmp_path, capsys, value):
    """MLIR reads a float literal only with a '.' or an exponent (hex spells the bits)."""
    path = write(tmp_path, f"entry @k() {{\n  %c = constant <f32: [1.5, {value}]> : "
                           f"tile<2xf32>\n  return\n}}\n")
    code, _, err = run(capsys, "opt", path)
    assert code == 1
    assert err.splitlines() == [
        f"{path}:2:29: error: unexpected decimal integer literal for a floating point value "
        f"(f32 element {value} has no '.' or exponent)",
        f"{path}:2:29: note: add a trailing dot to make the literal a float"], err
    for spelled in (f"{value}.", f"{value}.0", "1e3", "0x3f800000"):
        path = write(tmp_path, f"entry @k() {{\n  %c = constant <f32: [1.5, {spelled}]> : "
                               f"tile<2xf32>\n  return\n}}\n", "ok.mlir")
        assert run(capsys, "opt", path)[0] == 0


def test_unknown_constant_element_name_draws_both_of_nvidias_errors(tmp_path, capsys):
    path = write(tmp_path, "entry @k() {\n  %c = constant <pluto : 4.0> : tile<f32>\n"
                           "  return\n}\n")
    code, _, err = run(capsys, "opt", path)
    assert code == 1
    assert err.splitlines() == [
        f"{path}:2:18: error: 'cuda_tile.constant' unknown type: pluto (expected an element "
        "type)",
        f"{path}:2:18: error: expect element type to be one of i1 or i8 or i16 or i32 or i64 or "
        "f16 or bf16 or f32 or f64 or tf32 or f8E4M3FN or f8E5M2 or f8E8M0FNU or f4E2M1FN "
        "values, but got '<<NULL TYPE>>'"], err


@pytest.mark.parametrize("op_loc, entry_loc, where, words", [
    # the entry's scope is read through a named location (NVIDIA's verifier looks through it)
    ("", 'loc("entry"(#at_blk))', "10:3", "Function location must have cuda_tile.di_subprogram"),
    ("", "loc(fused[unknown, #at_h])", "10:3", 'Function name "k" does not match subprogram'),
    (' loc("op"(#at_k))', "loc(unknown)", "11:5", "Operation has debug info scope, but function"),
    (" loc(fused[#at_h])", "loc(#at_k)", "11:5", "Operation debug info scope does not match"),
])
def test_scope_errors_are_found_behind_named_and_fused_locations(tmp_path, capsys, op_loc,
                                                                 entry_loc, where, words):
    text = (DI_SETUP + "cuda_tile.module @m {\n"
            f"  entry @k() {{\n    return{op_loc}\n  }} {entry_loc}\n}}\n")
    path = write(tmp_path, text)
    code, _, err = run(capsys, "opt", path)
    assert code == 1
    assert len(err.splitlines()) == 1 and err.startswith(f"{path}:{where}: error: "), err
    assert words in err, err


def test_a_named_location_that_verifies_is_still_refused_as_unwritable(tmp_path, capsys):
    path = write(tmp_path, DI_SETUP + "cuda_tile.module @m {\n  entry @k() {\n"
                 '    return loc("op"(#at_k))\n  } loc(#at_k)\n}\n')
    code, _, err = run(capsys, "opt", path)
    assert code == 1
    assert err.startswith(f"{path}:11:16: error: unsupported location, got NameLoc, expected "
                          "DILocAttr or CallSiteLoc"), err


@pytest.mark.parametrize("definition, message", [
    ("#cu0 = #cuda_tile.di_compile_unit<>", "expected a parameter name in struct "
     "(#cuda_tile.di_compile_unit has no parameters)"),
    ('#sp0 = #cuda_tile.di_subprogram<file = #f, line = 1, linkageName = "k", compileUnit = #cu>',
     "struct is missing required parameter: name (#cuda_tile.di_subprogram needs 'name')"),
    ('#sp0 = #cuda_tile.di_subprogram<file = #f, line = 1, name = "k", compileUnit = #cu>',
     "struct is missing required parameter: linkageName (#cuda_tile.di_subprogram needs "
     "'linkageName')"),
])
def test_malformed_debug_attributes_are_refused_even_unused(tmp_path, capsys, definition,
                                                            message):
    """MLIR parses every alias as it is defined, so an unused malformed one is an error too."""
    path = write(tmp_path, DI_SETUP + definition + "\ncuda_tile.module @m {\n}\n")
    code, _, err = run(capsys, "opt", path)
    assert code == 1
    assert err.splitlines()[0] == f"{path}:9:8: error: {message}", err


@pytest.mark.parametrize("keyword, messages", [
    ("", ["custom op 'cuda_tile.exti' expected valid keyword (expected signedness, one of: "
          "unsigned, signed; found ':')",
          "custom op 'cuda_tile.exti' expected signedness to be one of: {'signed', 'unsigned'}"]),
    ("upward", ["custom op 'cuda_tile.exti' expected signedness to be one of: {'signed', "
                "'unsigned'} (expected signedness, one of: unsigned, signed; found 'upward')"]),
])
def test_missing_or_unknown_signedness_in_nvidias_words(tmp_path, capsys, keyword, messages):
    path = write(tmp_path, f"entry @k(%a: tile<i8>) {{\n  %b = exti %a {keyword}: tile<i8> -> "
                           f"tile<i16>\n  return\n}}\n")
    code, _, err = run(capsys, "opt", path)
    assert code == 1
    assert err.splitlines() == [f"{path}:2:16: error: {m}" for m in messages], err


@pytest.mark.parametrize("op", ["reduce dim=0 identities=[0.0 : f32]",
                                "scan dim=0 reverse=false identities=[0.0 : f32]"])
def test_combiner_types_without_operands_in_nvidias_words(tmp_path, capsys, op):
    """MLIR reads a variadic group's types whatever the operand count, then compares counts."""
    path = write(tmp_path, f"entry @k() {{\n  %r = {op} : tile<4xf32> -> tile<f32>\n"
                           "  (%a: tile<f32>, %b: tile<f32>) {\n    yield %a : tile<f32>\n  }\n"
                           "  return\n}\n")
    code, _, err = run(capsys, "opt", path)
    assert code == 1
    name = op.split()[0]
    assert err.splitlines()[0] == (f"{path}:2:8: error: custom op 'cuda_tile.{name}' number of "
                                   "operands and types do not match: got 0 operands and 1 "
                                   "types"), err


VIEW_ARGS = ("%v: !cuda_tile.partition_view<tile=(8), !cuda_tile.tensor_view<128xf32, "
             "strides=[1]>>, %tok: !cuda_tile.token")
VIEW_TYPE = "partition_view<tile=(8), tensor_view<128xf32, strides=[1]>>"


@pytest.mark.parametrize("memory, column, message", [
    ("bogus", 26, 'invalid memory_ordering_semantics attribute specification. Got "bogus" but '
     "expect one of: weak, relaxed, acquire, release, acq_rel (expected "
     "memory_ordering_semantics, one of: weak, relaxed, acquire, release, acq_rel; found "
     "'bogus')"),
    ("weak device", 31, 'operation specifies weak memory ordering semantics, but then provides '
     '"device" scope, expected no memory scope.'),
    ("relaxed galaxy", 34, 'invalid memory_scope attribute specification. Got "galaxy" but '
     "expect one of: tl_blk, device, sys"),
])
def test_view_access_memory_attributes_in_nvidias_words(tmp_path, capsys, memory, column,
                                                        message):
    """load_view_tko/store_view_tko read ordering and scope with NVIDIA's own parser."""
    path = write(tmp_path, f"testing$func @k({VIEW_ARGS}) {{\n  %c = constant <i32: 0> : "
                           f"tile<i32>\n  %t, %r = load_view_tko {memory} %v[%c] token = %tok : "
                           f"{VIEW_TYPE}, tile<i32> -> tile<8xf32>, token\n  return\n}}\n")
    code, _, err = run(capsys, "opt", "--testing-ops", path)
    assert code == 1
    assert err.splitlines() == [f"{path}:3:{column}: error: {message}"], err


def test_a_value_used_at_another_type_names_its_prior_use(tmp_path, capsys):
    """The token operand's type is implied: MLIR reports the clash at the use and notes the
    definition."""
    path = write(tmp_path, f"testing$func @k({VIEW_ARGS.replace('!cuda_tile.token', 'i32')}) "
                           f"{{\n  %c = constant <i32: 0> : tile<i32>\n  %t, %r = load_view_tko "
                           f"weak %v[%c] token = %tok : {VIEW_TYPE}, tile<i32> -> tile<8xf32>, "
                           "token\n  return\n}\n")
    code, _, err = run(capsys, "opt", "--testing-ops", path)
    assert code == 1
    assert err.splitlines() == [
        f"{path}:3:46: error: use of value '%tok' expects different type than prior uses: "
        "'!cuda_tile.token' vs 'i32'",
        f"{path}:1:104: note: prior use here"], err


def test_a_keyword_where_an_operand_belongs_in_mlirs_words(tmp_path, capsys):
    path = write(tmp_path, "entry @k(%p: tile<ptr<f32>>) {\n  %v, %t = load_ptr_tko weak blah %p "
                           ": tile<ptr<f32>> -> tile<f32>, token\n  return\n}\n")
    code, _, err = run(capsys, "opt", path)
    assert code == 1
    assert err.splitlines() == [f"{path}:2:30: error: expected SSA operand (expected an SSA value "
                                "(%name), found 'blah')"], err


@pytest.mark.parametrize("body, column, name, wanted, got", [
    ("%r = addi %c, %d : tile<4xi32>", 17, "%d", "tile<4xi32>", "tile<8xi32>"),
    ("%r = absi %d : tile<4xi32>", 13, "%d", "tile<4xi32>", "tile<8xi32>"),
    ("%r = negf %c : tile<4xf32>", 13, "%c", "tile<4xf32>", "tile<4xi32>"),
])
def test_element_wise_operands_are_read_at_the_written_type(tmp_path, capsys, body, column, name,
                                                           wanted, got):
    """An element-wise op writes one type; MLIR resolves its operands at it, so a value of
    another type is a parse error at its use, with a note at its definition."""
    path = write(tmp_path, "entry @k() {\n  %c = constant <i32: 1> : tile<4xi32>\n"
                           f"  %d = constant <i32: 2> : tile<8xi32>\n  {body}\n  return\n}}\n")
    code, _, err = run(capsys, "opt", path)
    assert code == 1
    defined = 2 if name == "%c" else 3
    assert err.splitlines() == [
        f"{path}:4:{column}: error: use of value '{name}' expects different type than prior "
        f"uses: '!cuda_tile.{wanted}' vs '!cuda_tile.{got}'",
        f"{path}:{defined}:3: note: prior use here"], err


@pytest.mark.parametrize("op, mode, listing, ours", [
    ("addf %a, %a", "approx", "'nearest_even', 'zero', 'negative_inf', 'positive_inf'", ""),
    ("mulf %a, %a", "pippo", "'nearest_even', 'zero', 'negative_inf', 'positive_inf'",
     " (expected rounding mode, one of: nearest_even, zero, negative_inf, positive_inf, approx, "
     "full, nearest_int_to_zero, nearest_away; found 'pippo')"),
    ("sqrt %a", "pippo", "'nearest_even', 'zero', 'negative_inf', 'positive_inf', 'approx'",
     " (expected rounding mode, one of: nearest_even, zero, negative_inf, positive_inf, approx, "
     "full, nearest_int_to_zero, nearest_away; found 'pippo')"),
])
def test_rounding_keywords_in_nvidias_parser_words(tmp_path, capsys, op, mode, listing, ours):
    """The custom form lists the modes the op takes; addf/subf/mulf/fma refuse the others while
    parsing, the rest only an unknown keyword (their verifier names a mode they do not take)."""
    path = write(tmp_path, f"entry @k(%a: tile<f32>) {{\n  %0 = {op} rounding<{mode}> : "
                           "tile<f32>\n  return\n}\n")
    code, _, err = run(capsys, "opt", path)
    assert code == 1
    column = len(f"  %0 = {op} rounding<") + 1
    mnemonic = op.split()[0]
    assert err.splitlines() == [f"{path}:2:{column}: error: custom op 'cuda_tile.{mnemonic}' "
                                f"expected rounding mode to be one of: {listing}, got: "
                                f"'{mode}'{ours}"], err


def test_generic_form_writes_every_type_so_the_verifier_reports_the_clash(tmp_path, capsys):
    path = write(tmp_path, "entry @k(%a: tile<f32>, %b: tile<f16>) {\n  %0 = \"cuda_tile.addf\"(%a, "
                           "%b) : (!cuda_tile.tile<f32>, !cuda_tile.tile<f16>) -> "
                           "!cuda_tile.tile<f32>\n  return\n}\n")
    code, _, err = run(capsys, "opt", path)
    assert code == 1
    assert err.splitlines() == [f"{path}:2:3: error: 'cuda_tile.addf' op failed to verify that "
                                "all of {lhs, rhs, result} have same type (operand 'rhs' type "
                                "tile<f16> does not match operand 'lhs' type tile<f32>)"], err


FOREIGN = """\
cuda_tile.module @m {
  entry @k() {
    %c = "test.make_cond"() : () -> !cuda_tile.tile<i32>
    %d = "test.pass"(%c) : (!cuda_tile.tile<i32>) -> !cuda_tile.tile<i32>
    // expected-error @below{{operand #0 must be 0D tile of i1 values}}
    if %d {
    }
    return
  }
}
"""


def test_ops_of_other_dialects_are_verified_around_only_when_allowed(tmp_path, capsys):
    path = write(tmp_path, FOREIGN)
    # with the flag, their results stand in for values: the error is the cuda_tile op's
    code, _, err = run(capsys, "opt", "-allow-unregistered-dialect", "-verify-diagnostics", path)
    assert (code, err) == (0, "")
    # without it (the default), the first one is refused, at the module, with the remark
    code, _, err = run(capsys, "opt", "-verify-diagnostics", path)
    assert code == 1 and "unknown operation 'test.make_cond'" in err, err


def test_ops_of_other_dialects_are_never_printed_nor_encoded(tmp_path, capsys):
    path = write(tmp_path, FOREIGN.replace("%d {", "%e {").replace(
        "    // expected-error @below{{operand #0 must be 0D tile of i1 values}}\n",
        '    %e = "test.to_i1"(%d) : (!cuda_tile.tile<i32>) -> !cuda_tile.tile<i1>\n'))
    refusal = [f"{path}:1:1: error: only ops from the 'cuda_tile' dialect are allowed (unknown "
               "operation 'test.make_cond', at 3:10)", f"{path}:3:10: remark: invalid op"]
    code, _, err = run(capsys, "opt", "-allow-unregistered-dialect", "-verify-diagnostics", path)
    assert (code, err) == (0, "")  # the module verifies
    code, out, err = run(capsys, "opt", "-allow-unregistered-dialect", path)
    assert (code, out, err.splitlines()) == (1, "", refusal)
    out_file = tmp_path / "out.tilebc"
    code, _, err = run(capsys, "translate", "-allow-unregistered-dialect", "-mlir-to-cudatilebc",
                       path, "-o", out_file)
    assert (code, err.splitlines()) == (1, refusal) and not out_file.exists()


@pytest.mark.parametrize("op, message", [
    ('"test.op"() {value = 1 : i32} : () -> ()', "tilebc reads ops of other dialects "
     "('test.op') without regions or attributes"),
    ('"test.op"() ({\n}) : () -> ()', "tilebc reads ops of other dialects ('test.op') without "
     "regions or attributes"),
    ('"cuda_tile.no_such_op"() : () -> ()', "unknown operation 'cuda_tile.no_such_op'"),
])
def test_what_allow_unregistered_dialect_still_refuses(tmp_path, capsys, op, message):
    path = write(tmp_path, f"entry @k() {{\n  {op}\n  return\n}}\n")
    code, _, err = run(capsys, "opt", "-allow-unregistered-dialect", "-verify-diagnostics", path)
    assert code == 1
    assert f"{path}:2:" in err and message in err, err


def test_a_0d_tensor_view_takes_no_strides():
    text = "entry @k(%v: tensor_view<f32, strides=[]>) {\n  return\n}\n"
    with pytest.raises(TextSyntaxError) as caught:
        parse_modules(text)
    assert caught.value.message.startswith("strides must not be provided for 0-d tiles")
    assert (caught.value.line, caught.value.column) == (1, 31)
    module = parse_modules(text.replace(", strides=[]", ""))[0]  # written as tilebc prints it
    assert str(module.functions[0].type.inputs[0]) == "tensor_view<f32>"


@pytest.mark.parametrize("op, written, kind", [
    ("make_partition_view", "tensor_view<?x8xf32, strides=[8,1]>", "partition_view"),
    ("make_strided_view", "partition_view<tile=(4x8), tensor_view<?x8xf32, strides=[8,1]>>",
     "strided_view"),
])
def test_a_view_maker_refuses_another_kind_of_type_where_it_is_written(op, written, kind):
    text = ("entry @k(%p: tile<ptr<f32>>, %n: tile<i32>) {\n"
            "  %t = make_tensor_view %p, shape = [%n, 8], strides = [8, 1] : tile<i32> -> "
            "tensor_view<?x8xf32, strides=[8,1]>\n"
            f"  %v = {op} %t\n    : {written}\n  return\n}}\n")
    with pytest.raises(TextSyntaxError) as caught:
        parse_modules(text)
    assert caught.value.message.split("\n")[0] == (
        f"'cuda_tile.{op}' expected '{kind}' type, but got '!cuda_tile.{written}'")
    assert (caught.value.line, caught.value.column) == (4, 7)


@pytest.mark.parametrize("text, column, messages", [
    ("cmpi %a, %a, signed", 13, ["custom op 'cuda_tile.cmpi' expected valid keyword (expected "
     "comparison_predicate, one of: equal, not_equal, less_than, less_than_or_equal, "
     "greater_than, greater_than_or_equal; found '%a')", "custom op 'cuda_tile.cmpi' expected "
     "'comparison_predicate' to be one of: {'equal', 'not_equal', 'less_than', "
     "'less_than_or_equal', 'greater_than', 'greater_than_or_equal'}"]),
    ("cmpi above %a, %a, signed", 13, ["custom op 'cuda_tile.cmpi' expected "
     "'comparison_predicate' to be one of: {'equal', 'not_equal', 'less_than', "
     "'less_than_or_equal', 'greater_than', 'greater_than_or_equal'} (expected "
     "comparison_predicate, one of: equal, not_equal, less_than, less_than_or_equal, "
     "greater_than, greater_than_or_equal; found 'above')"]),
    ("cmpi equal %a, %a, ordered", 27, ["custom op 'cuda_tile.cmpi' expected signedness to be "
     "one of: {'signed', 'unsigned'} (expected signedness, one of: unsigned, signed; found "
     "'ordered')"]),
    ("cmpf equal signed %f, %f", 19, ["custom op 'cuda_tile.cmpf' expected "
     "'comparison_ordering' to be one of: {'ordered', 'unordered'} (expected "
     "comparison_ordering, one of: unordered, ordered; found 'signed')"]),
])
def test_comparison_keywords_in_nvidias_parser_words(tmp_path, capsys, text, column, messages):
    types = ("tile<f32> -> tile<i1>" if text.startswith("cmpf") else "tile<i32> -> tile<i1>")
    path = write(tmp_path, "entry @k(%a: tile<i32>, %f: tile<f32>) {\n"
                           f"  %r = {text} : {types}\n  return\n}}\n")
    code, _, err = run(capsys, "opt", path)
    assert code == 1
    assert err.splitlines() == [f"{path}:2:{column}: error: {m}" for m in messages], err


def test_the_writer_refuses_ops_of_other_dialects_even_when_checking_diagnostics(tmp_path,
                                                                                 capsys):
    path = write(tmp_path, "// expected-error @below{{only ops from the 'cuda_tile' dialect are "
                 "allowed}}\ncuda_tile.module @m {\n  entry @k() {\n    // expected-remark "
                 "@below{{invalid op}}\n    \"test.op\"() : () -> ()\n    return\n  }\n}\n")
    code, _, err = run(capsys, "translate", "-mlir-to-cudatilebc", "-allow-unregistered-dialect",
                       "-verify-diagnostics", path, "-o", tmp_path / "out.tilebc")
    assert (code, err) == (0, "")
    code, _, err = run(capsys, "opt", "-allow-unregistered-dialect", "-verify-diagnostics", path)
    assert code == 1 and "was not produced" in err  # opt verifies it: nothing to refuse


@pytest.mark.parametrize("text, at, message", [
    # a comparison writes its lhs type only: rhs is read at it
    ("%r = cmpi equal %a, %b, signed : tile<4xi32> -> tile<4xi1>", "2:23",
     "use of value '%b' expects different type than prior uses: '!cuda_tile.tile<4xi32>' vs "
     "'!cuda_tile.tile<4xi16>'"),
    # select writes the condition's and the result's: both values are read at the result's
    ("%r = select %c, %a, %b : tile<4xi1>, tile<4xi32>", "2:23",
     "use of value '%b' expects different type than prior uses: '!cuda_tile.tile<4xi32>' vs "
     "'!cuda_tile.tile<4xi16>'"),
    ("%r = select %c, %b, %a : tile<4xi1>, tile<4xi32>", "2:19",
     "use of value '%b' expects different type than prior uses: '!cuda_tile.tile<4xi32>' vs "
     "'!cuda_tile.tile<4xi16>'"),
    # a written type the value does not have is found once the whole form is read (MLIR
    # resolves operands last), so a missing type is reported first
    ("%r = select %c, %a, %a : tile<4xi32>,", "3:1", "custom op 'cuda_tile.select' expected "
     "valid keyword (expected a type, found '}')"),
])
def test_values_read_at_the_type_their_op_gives_them(tmp_path, capsys, text, at, message):
    end = "" if text.endswith(",") else "  return\n"
    path = write(tmp_path, "testing$func @k(%a: tile<4xi32>, %b: tile<4xi16>, %c: tile<4xi1>) {\n"
                           f"  {text}\n{end}}}\n")
    code, _, err = run(capsys, "opt", "--testing-ops", path)
    assert code == 1
    assert err.splitlines()[0] == f"{path}:{at}: error: {message}", err


def test_a_missing_token_is_reported_where_the_line_before_ends(tmp_path, capsys):
    """MLIR's rule: a token expected but not found on the next line is missed after the last
    token read, not at the start of the next line."""
    path = write(tmp_path, "entry @k(%c: tile<4xi1>, %a: tile<4xf32>) {\n"
                           "  %r = select %c, %a, %a : tile<4xi1>\n  return\n}\n")
    code, _, err = run(capsys, "opt", path)
    assert code == 1
    assert err.splitlines()[0] == f"{path}:2:38: error: expected ',' in select, found 'return'"
    # on the same line, the token found is the place
    path = write(tmp_path, "entry @k(%c: tile<4xi1>, %a: tile<4xf32>) {\n"
                           "  %r = select %c, %a, %a : tile<4xi1> return\n}\n", "same.mlir")
    code, _, err = run(capsys, "opt", path)
    assert err.splitlines()[0] == f"{path}:2:39: error: expected ',' in select, found 'return'"


def test_parsing_ops_of_other_dialects_keeps_nothing_per_parse(tmp_path, capsys):
    # each foreign op gets a spec of its own; a per-kind cache keyed by it would grow per parse
    from tilebc.text import parser
    path = write(tmp_path, FOREIGN)
    run(capsys, "opt", "-allow-unregistered-dialect", "-verify-diagnostics", path)
    kept = len(parser._BUILD_PLANS)
    for _ in range(5):
        assert run(capsys, "opt", "-allow-unregistered-dialect", "-verify-diagnostics", path)[0] == 0
    assert len(parser._BUILD_PLANS) == kept


def test_a_dense_elements_text_ends_where_the_character_walk_ends():
    """_element_end (str methods) finds the end of an element type's text in a refused dense
    constant where a walk over the characters would: the first `:` outside `<…>` (a `>` too
    many counts as inside), else the end of the line."""
    import random
    from tilebc.text.parser import _element_end

    def walked(text, pos):
        end, depth = pos, 0
        while end < len(text) and text[end] != "\n" and (depth or text[end] != ":"):
            depth += {"<": 1, ">": -1}.get(text[end], 0)
            end += 1
        return end
    rng = random.Random(7)
    for _ in range(3000):
        text = "".join(rng.choice("<>:\na :") for _ in range(rng.randint(0, 24)))
        pos = rng.randint(0, len(text))
        assert _element_end(text, pos) == walked(text, pos), (text, pos)
    assert _element_end("tensor<i32: x> : 1", 0) == 15
