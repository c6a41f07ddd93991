"""`preview$call` in text: built with the builder, printed as NVIDIA's tileirdisasm prints it
(with the `simt` preview feature enabled), and parsed back to the same bytes."""
import subprocess
import tempfile
from pathlib import Path

import pytest

import tilebc
from tilebc.errors import TextSyntaxError
from tilebc.ir import DictionaryAttr, IntegerAttr, Module, PointerType, TensorViewType, f32, i32, \
    scalar, tile
from tilebc.ir.builder import new_function
from tilebc.oracles import tool_path
from tilebc.text import parse_module, print_module


def call_module() -> Module:
    module = Module(version=tilebc.Version(13, 5), preview=True)
    b = new_function(module, "caller", [scalar(f32), scalar(PointerType(f32))])
    value, pointer = b.block.args
    view = b.op("make_tensor_view", [pointer, [], []], [TensorViewType(f32, (8,), (1,))])
    no_attrs = {"const_args": (), "arg_attrs": None, "res_attrs": None}
    b.op("preview$call", [[value, pointer, view]], [scalar(f32), tile((4,), i32)],
         {"callee": "ext func", "const_args": (),
          "arg_attrs": (DictionaryAttr((("foo", IntegerAttr(i32, 3)),)), DictionaryAttr(()),
                        DictionaryAttr(())),
          "res_attrs": (DictionaryAttr(()), DictionaryAttr(()))})
    b.op("preview$call", [[]], [], {"callee": "nothing", **no_attrs})
    b.op("preview$call", [[value]], [scalar(f32)], {"callee": "one", **no_attrs})
    b.op("return", [[]])
    return module


def nvidia_listing(data: bytes, *extra: str) -> str:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "call.tilebc"
        path.write_bytes(data)
        done = subprocess.run([tool_path("tileirdisasm"), "--preview=simt", *extra, str(path)],
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(tool_path("tileirdisasm") is None, reason="needs tileirdisasm")
@pytest.mark.parametrize("debug", [False, True], ids=["plain", "g"])
def test_call_prints_as_nvidia_and_parses_back(debug):
    data = tilebc.dump(call_module(), "13.5")
    listing = nvidia_listing(data, *(["-g"] if debug else []))
    assert "preview$call @\"ext func\"(" in listing
    assert print_module(tilebc.load(data), debug=debug) == listing
    parsed = parse_module(listing, "call.mlir")
    assert parsed.preview
    assert tilebc.dump(parsed, "13.5") == data


def test_call_argument_types_are_checked():
    text = ("entry @k(%a: tile<f32>) {\n"
            "  %0 = preview$call @f(%a) : (!cuda_tile.tile<i32>) -> !cuda_tile.tile<f32>\n"
            "  return\n}\n")
    with pytest.raises(TextSyntaxError) as caught:
        parse_module(text, "call.mlir")
    assert (caught.value.line, caught.value.column) == (2, 31)
    assert "argument 0 has type tile<f32>, but the text says tile<i32>" in caught.value.message


def test_call_rejects_unknown_attributes():
    text = ("entry @k(%a: tile<f32>) {\n"
            "  preview$call @f(%a) {bogus = []} : (tile<f32>) -> ()\n  return\n}\n")
    with pytest.raises(TextSyntaxError) as caught:
        parse_module(text, "call.mlir")
    assert (caught.value.line, caught.value.column) == (2, 24)
    assert caught.value.message.startswith("preview$call has no attribute 'bogus'")
