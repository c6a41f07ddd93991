"""The per-op parse functions generated from the op table's syntax (tilebc/text/parsegen.py)."""
import pytest

from tilebc.errors import TextSyntaxError
from tilebc.ops.table import OPS_BY_MNEMONIC
from tilebc.text import parse_module, print_module
from tilebc.text import parser as P
from tilebc.text.parsegen import op_parser_source

PARSED = [spec for spec in OPS_BY_MNEMONIC.values() if spec.syntax and not spec.structural]


@pytest.mark.parametrize("spec", PARSED, ids=lambda spec: spec.mnemonic)
def test_every_element_and_directive_has_code(spec):
    # the generator's fallbacks name a message constant where it has no code for an element
    source, constants = op_parser_source(spec, P._Parser, P._CUSTOM_ENUMS,
                                         P.OWN_MEMORY_ATTRIBUTE_PARSER)
    fallbacks = [value for value in constants.values() if isinstance(value, str)
                 and value.startswith(("cannot parse element", "no parser for directive",
                                       "cannot decide optional group"))]
    assert fallbacks == []
    compile(source, f"<{spec.mnemonic}>", "exec")


def test_each_kind_is_generated_once():
    spec = OPS_BY_MNEMONIC["addi"]
    assert P._op_parser(spec) is P._op_parser(spec)


TEXT = """\
cuda_tile.module @m {
  entry @e(%a: tile<ptr<f32>>) {
    %v = make_tensor_view %a, shape = [8], strides = [1] : tensor_view<8xf32, strides=[1]>
    %p = make_partition_view %v : partition_view<tile=(8), tensor_view<8xf32, strides=[1]>>
    %c = constant <i32: 0> : tile<i32>
    %t, %k = load_view_tko weak %p[%c] : partition_view<tile=(8), tensor_view<8xf32, strides=[1]>>, tile<i32> -> tile<8xf32>, token
    %s = addf %t, %t rounding<positive_inf> flush_to_zero : tile<8xf32>
    %k2 = store_view_tko weak %s, %p[%c] token = %k : tile<8xf32>, partition_view<tile=(8), tensor_view<8xf32, strides=[1]>>, tile<i32> -> token
    return
  }
}
"""


def test_optional_groups_and_literals_read_back():
    module = parse_module(TEXT)
    ops = {op.spec.mnemonic: op for op in module.functions[0].body.ops}
    assert ops["addf"].attrs["flush_to_zero"] is True
    assert ops["addf"].attrs["rounding_mode"].keyword == "positive_inf"
    assert ops["store_view_tko"].operands["token"] is ops["load_view_tko"].results[1]
    assert parse_module(print_module(module)).functions[0].body.ops[4].attrs \
        == ops["addf"].attrs


# line:col and words as the element-walking parser gave them before the parsers were generated
@pytest.mark.parametrize("bad, line, column, words", [
    ("addf %t, %t rounding<positive_inf> flush_to_zero : tile<8xi32>", 7, 19,
     "use of value '%t' expects different type than prior uses: '!cuda_tile.tile<8xi32>' vs "
     "'!cuda_tile.tile<8xf32>'"),
    ("addf %t %t : tile<8xf32>", 7, 18, "expected ',' in addf, found '%t'"),
    ("addf %t, %t flush_to_zero tile<8xf32>", 7, 36, "expected ':' in addf, found 'tile'"),
    ("addf %t, %t rounding<positive_inf> flush_to_zero flush_to_zero : tile<8xf32>", 7, 59,
     "expected ':' in addf, found 'flush_to_zero'"),
    ("addf %t, %t rounding<nearest> : tile<8xf32>", 7, 31,
     "custom op 'cuda_tile.addf' expected rounding mode to be one of: 'nearest_even', 'zero', "
     "'negative_inf', 'positive_inf', got: 'nearest'"),
])
def test_errors_name_the_place_and_what_was_expected(bad, line, column, words):
    text = TEXT.replace("addf %t, %t rounding<positive_inf> flush_to_zero : tile<8xf32>", bad)
    with pytest.raises(TextSyntaxError) as caught:
        parse_module(text)
    assert (caught.value.line, caught.value.column) == (line, column)
    assert caught.value.message.startswith(words)


GENERIC = """\
cuda_tile.module @m {
  entry @e(%a: tile<i32>, %c: tile<i1>) {
    LINE
    return
  }
}
"""


# building the op from what was read (parser._build), after the generated code or MLIR's generic
# form: line:col and words as before the parsers were generated
@pytest.mark.parametrize("line, column, words", [
    ('%r = "cuda_tile.cmpi"(%a, %a) : (tile<i32>, tile<i32>) -> tile<i1>', 10,
     "cmpi needs attribute 'comparison_predicate'"),
    ('"cuda_tile.if"(%c) : (tile<i1>) -> ()', 5, "if needs 2 region(s)"),
    ("%r = addi %a, %c : tile<i32>", 19, "use of value '%c' expects different type than prior "
     "uses: '!cuda_tile.tile<i32>' vs '!cuda_tile.tile<i1>'"),
])
def test_build_errors(line, column, words):
    with pytest.raises(TextSyntaxError) as caught:
        parse_module(GENERIC.replace("LINE", line))
    assert (caught.value.line, caught.value.column) == (3, column)
    assert caught.value.message.startswith(words)


def test_build_fills_defaults_and_keeps_written_attributes():
    def overflow(line):
        return parse_module(GENERIC.replace("LINE", line)).functions[0].body.ops[0] \
            .attrs["overflow"].keyword
    assert overflow('%r = "cuda_tile.addi"(%a, %a) : (tile<i32>, tile<i32>) -> tile<i32>') \
        == "none"
    assert overflow('%r = "cuda_tile.addi"(%a, %a) {overflow = #cuda_tile.overflow<no_signed_wrap>}'
                    ' : (tile<i32>, tile<i32>) -> tile<i32>') == "no_signed_wrap"
