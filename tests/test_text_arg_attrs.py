"""Entry argument attributes (13.5): printed after each parameter's type as tileirdisasm prints them,
parsed back, and kept through a text round trip."""
import pytest

import tilebc
from tilebc import oracles
from tilebc.ir.attrs import ArrayAttr, DictionaryAttr, IntegerAttr, StringAttr
from tilebc.text import assemble, print_module
from test_verify_invalid import f32, i32, kernel, scalar


def _module(first, second):
    module = kernel([scalar(i32), scalar(f32)], lambda b, x, y: None)
    module.functions[0].arg_attrs = ArrayAttr((DictionaryAttr(first), DictionaryAttr(second)))
    return module


CASES = {
    "second only": ((), (("cuda_tile.foo", IntegerAttr(i32, 1)), ("cuda_tile.bar", StringAttr("s")),
                         ("cuda_tile.z", ArrayAttr((IntegerAttr(i32, 2),))))),
    "both": ((("cuda_tile.a", IntegerAttr(i32, -3)),), (("cuda_tile.b", StringAttr("x y")),)),
    "all empty": ((), ()),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("debug", [False, True], ids=["plain", "g"])
def test_arg_attrs_print_as_tileirdisasm(name, debug):
    data = tilebc.dump(_module(*CASES[name]), "13.5")
    expected = oracles.tileirdisasm(data, debug_info=debug)
    assert expected.ok, expected.stderr
    ours = print_module(tilebc.load(data), debug=debug)
    assert ours == expected.stdout
    if name != "all empty":
        assert " {cuda_tile." in ours


@pytest.mark.parametrize("name", sorted(CASES))
def test_arg_attrs_text_round_trip(name):
    text = print_module(tilebc.load(tilebc.dump(_module(*CASES[name]), "13.5")))
    data = assemble(text, "13.5")
    assert print_module(tilebc.load(data)) == text
    attrs = tilebc.load(data).functions[0].arg_attrs
    if name == "all empty":
        assert attrs is None or not attrs.elements  # the text carries nothing, as NVIDIA's listing
    else:
        got = [dict(d.entries) for d in attrs.elements]
        assert got == [dict(CASES[name][0]), dict(CASES[name][1])]


def test_arg_attrs_need_13_5_from_text():
    text = print_module(tilebc.load(tilebc.dump(_module(*CASES["both"]), "13.5")))
    with pytest.raises(tilebc.EncodeError, match="13.5"):
        assemble(text, "13.4")
