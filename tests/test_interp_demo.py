"""demo_check: the embedded demo kernel on the interpreter against numpy."""
import struct

import pytest

import tilebc
from conftest import ROOT
from tilebc.interp import DemoMismatch, demo_check
from tilebc.interp.errors import ArgumentError
from tilebc.ir import DenseElementsAttr


def test_embedded_demo_kernel_matches_numpy():
    summary = demo_check()
    assert "float_math" in summary and "matches numpy" in summary and "\n" not in summary


def test_demo_check_accepts_the_fixture_at_every_version():
    for path in sorted((ROOT / "fixtures" / "bytecode" / "elementwise_f32").glob("*.tilebc")):
        assert "matches numpy" in demo_check(tilebc.load(path), tiles=3, seed=5)


def test_a_changed_constant_is_reported_as_a_mismatch():
    module = tilebc.load(ROOT / "tilebc" / "data" / "demo.tilebc")
    half = struct.pack("<f", 0.5)
    constants = [op for op in module.functions[0].walk()
                 if op.name == "constant" and op.attrs["value"].data == half]
    assert constants, "the demo kernel computes r - a * 0.5"
    attr = constants[0].attrs["value"]
    constants[0].attrs["value"] = DenseElementsAttr(attr.type, struct.pack("<f", 0.25))
    with pytest.raises(DemoMismatch, match="differ from numpy"):
        demo_check(module, tiles=2)


def test_another_kernel_is_refused_with_a_reason():
    other = tilebc.load(ROOT / "fixtures" / "bytecode" / "elementwise_f16" /
                        "elementwise_f16-13.3.tilebc")
    with pytest.raises(ArgumentError, match="demo kernel"):
        demo_check(other)

