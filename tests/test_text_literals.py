"""Literals in text: integer ranges, dense constant shapes, and where their errors point.

NVIDIA's dialect parser (cuda-tile `parseDenseTypedElementsAttr`) reads a signless integer literal in
the union of the signed and unsigned ranges of its width, and a dense list must spell the tile's shape
exactly (a single value is a splat of any shape).
"""
import pytest

import tilebc
from tilebc.errors import TextSyntaxError
from tilebc.text import parse_module, print_module

WIDTHS = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64}


def _constant(literal: str, type_: str) -> str:
    element = type_[len("tile<"):-1].split("x")[-1]
    return f"entry @k() {{\n  %c = constant <{element}: {literal}> : {type_}\n  return\n}}\n"


def _parse_error(text: str) -> TextSyntaxError:
    with pytest.raises(TextSyntaxError) as caught:
        parse_module(text, "lit.mlir")
    return caught.value


def _constant_value(text: str):
    module = parse_module(text, "lit.mlir")
    return print_module(module).splitlines()[1].split("= ")[1]


@pytest.mark.parametrize("name", WIDTHS)
def test_integer_literal_bounds_are_the_union_of_signed_and_unsigned(name):
    bits = WIDTHS[name]
    low, high = -(1 << (bits - 1)), (1 << bits) - 1
    for value in (low, high, 0):
        _constant_value(_constant(str(value), f"tile<{name}>"))
    for value in (low - 1, high + 1, -(1 << bits), high * 2):
        error = _parse_error(_constant(str(value), f"tile<{name}>"))
        assert (error.line, error.column) == (2, 20 + len(name)), str(error)
        assert f"integer {value} is out of range for {name}" in error.message, error.message


@pytest.mark.parametrize("literal", ["-129", "-200", "-256", "256", "[1, -129]"])
def test_i8_literal_out_of_range_is_an_error_not_a_wrapped_value(literal):
    error = _parse_error(_constant(literal, "tile<2xi8>" if "[" in literal else "tile<i8>"))
    assert "out of range for i8, expected -128 to 255" in error.message


def test_in_range_literals_keep_their_value():
    assert _constant_value(_constant("-128", "tile<i8>")) == "constant <i8: -128> : tile<i8>"
    assert _constant_value(_constant("255", "tile<i8>")) == "constant <i8: -1> : tile<i8>"
    assert _constant_value(_constant("-1", "tile<i1>")) == "constant <i1: true> : tile<i1>"


def test_typed_attribute_and_int_attribute_ranges():
    text = ("entry @k() {\n  %a = constant <i32: [1, 2, 3, 4]> : tile<4xi32>\n"
            "  %b = cat %a, %a dim = 18446744073709551616 : tile<4xi32>, tile<4xi32> -> tile<8xi32>\n"
            "  return\n}\n")
    error = _parse_error(text)
    assert (error.line, error.column) == (3, 25)
    assert "out of range for dim" in error.message


@pytest.mark.parametrize("literal, type_, message", [
    ("[[1, 2], 3, 4]", "tile<2x2xi32>", "not rectangular"),
    ("[1, [2, 3]]", "tile<2x2xi32>", "not rectangular"),
    ("[[1, 2], [3]]", "tile<2x2xi32>", "not rectangular"),
    ("[[[1, 2]], [[3, 4], [5, 6]]]", "tile<2x2x2xi32>", "not rectangular"),
    ("[1, 2, 3, 4]", "tile<2x2xi32>", "constant literal has shape [4] but tile<2x2xi32> has shape [2, 2]"),
    ("[[1, 2], [3, 4]]", "tile<4xi32>", "has shape [2, 2]"),
    ("[[1, 2, 3, 4]]", "tile<2x2xi32>", "has shape [1, 4]"),
    ("[1, 2, 3]", "tile<8xi32>", "has shape [3]"),
    ("[7]", "tile<i32>", "has shape [1] but tile<i32> has shape []"),
    ("[]", "tile<1xi32>", "cannot be empty"),
])
def test_dense_literal_must_spell_the_tile_shape(literal, type_, message):
    error = _parse_error(_constant(literal, type_))
    assert error.line == 2, str(error)
    assert message in error.message, error.message


def test_dense_literal_accepted_forms():
    assert _constant_value(_constant("[[1, 2], [3, 4]]", "tile<2x2xi32>")) == \
        "constant <i32: [[1, 2], [3, 4]]> : tile<2x2xi32>"
    assert _constant_value(_constant("7", "tile<2x2xi32>")) == "constant <i32: 7> : tile<2x2xi32>"
    assert _constant_value(_constant("[7]", "tile<1xi32>")) == "constant <i32: 7> : tile<1xi32>"


@pytest.mark.parametrize("line, column, message", [
    ("  %c = constant <i32: [1, 2, 3]> : tile<2x2xi32>", 36, "has shape [3]"),
    ("  %c = constant <i32: 1> : tile<4xf32>", 28, "does not match tile<4xf32>"),
    ("  %v = make_tensor_view %p, shape = [8], strides = [2] : tensor_view<8xf32, strides=[1]>", 58,
     "make_tensor_view: strides [2] does not match"),
    ("  %v = make_tensor_view %p, shape = [4], strides = [1] : tensor_view<8xf32, strides=[1]>", 58,
     "make_tensor_view: shape [4] does not match"),
])
def test_errors_found_after_an_op_point_at_that_op(line, column, message):
    """Errors checked once the op's type is read used to point at the next op's first token."""
    text = ("entry @k(%p: tile<ptr<f32>>) {\n" + line + "\n"
            "  %next = constant <i32: 1> : tile<i32>\n  return\n}\n")
    error = _parse_error(text)
    assert (error.file, error.line, error.column) == ("lit.mlir", 2, column), str(error)
    assert message in error.message, error.message
    assert str(error).startswith(f"lit.mlir:2:{column}: ")


def test_tensor_view_stride_count_error_points_at_the_strides():
    text = ("entry @k(%p: tile<ptr<f32>>) {\n"
            "  %v = make_tensor_view %p, shape = [8], strides = [1] : tensor_view<8xf32, strides=[1,1]>\n"
            "  %next = constant <i32: 1> : tile<i32>\n  return\n}\n")
    error = _parse_error(text)
    assert (error.line, error.column) == (2, 86), str(error)
    assert "tensor_view has 1 dimensions but 2 strides" in error.message
