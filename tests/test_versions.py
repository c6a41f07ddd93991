"""Writing for an older version succeeds or refuses with the field and the version it needs."""
import pytest

import tilebc
from tilebc.ir import (ArrayAttr, DenseElementsAttr, Global, Module, PointerType, StringAttr, f32,
                       f4E2M1FN, i32, scalar, tile, token)
from tilebc.ir.builder import new_function
from tilebc.ops import PtrAttr, RoundingMode, SymbolVisibility


def _kernel(arg_types, build, version="13.5"):
    module = Module(version=tilebc.Version.parse(version))
    b = new_function(module, "k", arg_types)
    build(b, *b.block.args)
    b.op("return", [[]])
    return module


def refusal(module, version):
    with pytest.raises(tilebc.EncodeError) as caught:
        tilebc.dump(module, version)
    return str(caught.value)


def test_new_op_refused_with_its_version():
    module = _kernel([scalar(f32), scalar(f32)],
                     lambda b, x, y: b.op("atan2", [x, y], [scalar(f32)]))
    assert "atan2" in refusal(module, "13.1") and "13.2" in refusal(module, "13.1")
    assert tilebc.load(tilebc.dump(module, "13.2")).version == tilebc.Version(13, 2)


def test_new_enum_value_refused():
    module = _kernel([scalar(f32)], lambda b, x: b.op(
        "ftof", [x], [scalar(f32)], {"rounding_mode": RoundingMode.NEAREST_AWAY}))
    message = refusal(module, "13.3")
    assert "nearest_away" in message and "13.4" in message


def test_new_attribute_with_non_default_value_refused_default_dropped():
    refused = _kernel([scalar(f32)], lambda b, x: b.op(
        "exp", [x], [scalar(f32)], {"rounding_mode": RoundingMode.APPROX}))
    assert "rounding_mode" in refusal(refused, "13.2")
    default = _kernel([scalar(f32)], lambda b, x: b.op("exp", [x], [scalar(f32)]))
    decoded = tilebc.load(tilebc.dump(default, "13.2"))
    assert next(decoded.walk()).attrs["rounding_mode"] is RoundingMode.FULL


def test_new_unit_flag_refused():
    module = _kernel([scalar(f32)], lambda b, x: b.op(
        "ftoi", [x], [scalar(i32)], {"saturating": True}))
    assert "saturating" in refusal(module, "13.3")


def test_new_type_and_pointer_attribute_refused():
    fp4 = _kernel([scalar(f32)], lambda b, x: b.op("ftof", [x], [scalar(f4E2M1FN)]))
    assert "f4E2M1FN" in refusal(fp4, "13.2")
    multicast = _kernel([scalar(PointerType(f32, PtrAttr.MULTICAST))], lambda b, p: None)
    assert "multicast" in refusal(multicast, "13.3")


def test_used_result_that_the_target_cannot_express_is_refused():
    def build(b, x):
        printed = b.op("print_tko", [[x], None], [token], {"str": "%f"})
        b.op("join_tokens", [[printed]], [token])
    module = _kernel([scalar(f32)], build)
    assert refusal(module, "13.1").startswith(
        "join_tokens: uses print_tko's result_token, which needs bytecode version 13.2")
    unused = _kernel([scalar(f32)], lambda b, x: b.op("print_tko", [[x], None], [token],
                                                      {"str": "%f"}))
    assert tilebc.load(tilebc.dump(unused, "13.1")).version == tilebc.Version(13, 1)


def test_private_global_and_entry_arg_attrs_refused():
    module = _kernel([], lambda b: None)
    one = DenseElementsAttr(tile((1,), i32), b"\x01\x00\x00\x00")
    module.globals.append(Global("g", one, visibility=SymbolVisibility.PRIVATE))
    assert "global @g" in refusal(module, "13.2")
    module.globals.clear()
    module.functions[0].arg_attrs = ArrayAttr((StringAttr("x"),))
    assert "argument attributes" in refusal(module, "13.4")


def test_version_argument_forms():
    module = _kernel([], lambda b: None)
    for version in ("13.3", (13, 3), tilebc.Version(13, 3)):
        assert tilebc.load(tilebc.dump(module, version)).version == tilebc.Version(13, 3)
    for bad in ("13.0", "13.6", "14.1", "latest"):
        with pytest.raises(tilebc.VersionError):
            tilebc.dump(module, bad)


def test_invalid_ir_raises_encode_error():
    module = _kernel([], lambda b: None)
    one = DenseElementsAttr(tile((1,), i32), b"\x01\x00\x00\x00")
    module.globals.append(Global("g", one, alignment=-4))
    with pytest.raises(tilebc.EncodeError, match="cannot encode module"):
        tilebc.dump(module)
