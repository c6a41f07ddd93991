"""One Location type formats the place of every error, diagnostic and decode warning."""
from __future__ import annotations

import pytest

import tilebc
from tilebc.binary.lenient import DecodeWarning
from tilebc.errors import DecodeError, Location, TextSyntaxError, TilebcError, VerificationError
from tilebc.verify import diagnostics


@pytest.mark.parametrize("location, text", [
    (Location("a.tilebc", 0x1a3), "a.tilebc: offset 0x1a3"),
    (Location(None, 0), "<bytes>: offset 0x0"),
    (Location("a.mlir", None, 12, 5), "a.mlir:12:5"),
    (Location(None, None, 3), "<text>:3:1"),
    (Location("a.tilebc"), "a.tilebc"),
    (Location(), ""),
])
def test_format(location, text):
    assert str(location) == text
    assert str(TilebcError("boom", location=location)) == (f"{text}: boom" if text else "boom")


def test_error_fields_read_and_write_through_the_location():
    error = DecodeError("bad tag", offset=7)
    assert error.location == Location(None, 7)
    error.file = error.file or "k.tilebc"
    assert (error.file, error.offset, error.line, error.column) == ("k.tilebc", 7, None, None)
    assert str(error) == "k.tilebc: offset 0x7: bad tag"


def test_in_file_keeps_a_named_file():
    assert Location(None, 4).in_file("x") == Location("x", 4)
    assert Location("y", 4).in_file("x") == Location("y", 4)


def test_of_a_parsed_op_and_a_decoded_op():
    text = "cuda_tile.module @m {\n  entry @e() {\n    return\n  }\n}\n"
    parsed = tilebc.parse_module(text, filename="m.mlir")
    op = next(parsed.functions[0].walk())
    assert Location.of(op, "m.mlir") == Location("m.mlir", None, 3, 5)
    decoded = tilebc.load(tilebc.dump(parsed))
    op = next(decoded.functions[0].walk())
    location = Location.of(op, "m.tilebc")
    assert location.offset is not None and location.line is None
    assert str(location) == f"m.tilebc: offset 0x{op.offset:x}"
    assert Location.of(None, "m.tilebc") == Location("m.tilebc")


def test_syntax_error_and_diagnostic_and_warning_use_it():
    with pytest.raises(TextSyntaxError) as caught:
        tilebc.parse_module("cuda_tile.module @m {\n  entry @e( {\n", filename="bad.mlir")
    assert str(caught.value).startswith(f"{caught.value.location}: ")
    assert caught.value.location.file == "bad.mlir" and caught.value.location.line == 2

    module = tilebc.parse_module("cuda_tile.module @m {\n  entry @e() {\n"
                                 "    %0 = constant <i32: 1> : tile<i32>\n"
                                 "    %1 = addf %0, %0 : tile<i32>\n    return\n  }\n}\n",
                                 filename="e.mlir")
    first = diagnostics(module)[0]
    assert first.location == Location("e.mlir", None, 4, 5)
    error = first.to_error()
    assert isinstance(error, VerificationError) and error.location == first.location
    assert str(first) == f"{first.location}: {first.op}: {first.message} [{first.rule}]"

    warning = DecodeWarning("padding byte 0x01", 0x20, "read as 0x00", "w.tilebc")
    assert warning.location == Location("w.tilebc", 0x20)
    assert str(warning) == "w.tilebc: offset 0x20: warning: padding byte 0x01; read as 0x00"


def test_no_other_module_formats_a_place_itself():
    """'file: offset 0x..' and 'file:line:col' of an input are written by Location.__str__ only
    (a debug location's `filename:line:col` is IR content, not the place of an error)."""
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    pattern = re.compile(r"\}: offset 0x\{|'<text>'\}:\{|text_pos\[0\]\}:\{")
    sources = list((root / "tilebc").rglob("*.py")) + \
        list((root / "runtime" / "tilebc_runtime").rglob("*.py"))
    offenders = [str(p.relative_to(root)) for p in sources
                 if pattern.search(p.read_text()) and p != root / "tilebc" / "errors.py"]
    assert offenders == []
