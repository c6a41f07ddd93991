"""Builder API (tilebc.ir.builder): result-type inference, constants, regions, errors. Each built
module goes through the verifier and our writer/reader; the fixture-level check is
test_builder_fixtures.py."""
from __future__ import annotations

import numpy as np
import pytest

import tilebc
from tilebc.interp import run
from tilebc.interp.api import Pointer
from tilebc.ir import (PointerType, TileType, f16, f32, i1, i32, i64, scalar, tile, token)
from tilebc.ir.builder import BuilderError, dense_attr, module_entry, new_module
from tilebc.ops.table import BODY_OPS
from tilebc.text.values import dense_elements
from tilebc.verify import verify


def kernel(params, version="13.5"):
    module = new_module(version)
    return module, module_entry(module, "k", params)


def test_inferred_types():
    module, b = kernel([scalar(PointerType(f32)), scalar(i32)])
    base, n = b.args
    x = b.constant(np.arange(8, dtype=np.float32).reshape(2, 4), f32, (2, 4))
    assert b.addf(x, x).type == tile((2, 4), f32)
    assert b.cmpf(x, x, comparison_predicate="less_than", comparison_ordering="ordered").type == \
        tile((2, 4), i1)
    assert b.cmpi(n, n, comparison_predicate="equal", signedness="signed").type == scalar(i1)
    assert b.select(b.cmpi(n, n, comparison_predicate="equal", signedness="signed"), n, n).type == \
        scalar(i32)
    assert b.make_token().type == token
    assert [v.type for v in b.get_tile_block_id()] == [scalar(i32)] * 3
    assert b.splat(b.constant(1, i64), (4, 8)).type == tile((4, 8), i64)
    assert b.permute(x, (1, 0)).type == tile((4, 2), f32)
    assert b.exti(n, i64).type == scalar(i64)
    assert b.ftof(x, f16).type == tile((2, 4), f16)
    view = b.tensor_view(base, [n, 64], [64, 1])
    assert str(view.type) == "tensor_view<?x64xf32, strides=[64,1]>"
    parts = b.partition_view(view, (16, 32), padding_value="zero")
    loaded, after = b.load(parts, [n, n])
    assert loaded.type == tile((16, 32), f32) and after.type == token
    assert b.store(loaded, parts, [n, n], token=after).type == token
    rows = b.reduce([loaded], 1, [0.0], lambda rb, lhs, rhs: [rb.addf(lhs, rhs)])
    assert rows.type == tile((16,), f32)
    assert b.mmaf(b.constant(0, f16, (16, 8)), b.constant(0, f16, (8, 16)),
                  b.constant(0, f32, (16, 16))).type == tile((16, 16), f32)
    b.return_()
    verify(module)
    tilebc.load(tilebc.dump(module))


def test_dense_constants():
    assert dense_attr(1.5, scalar(f32)).data == np.float32(1.5).tobytes()
    splat = dense_attr([7, 7, 7, 7], tile((4,), i32))
    assert splat.is_splat and dense_elements(splat) == [7]
    full = dense_attr([1, -1, 2, 3], tile((4,), i32))
    assert dense_elements(full) == [1, 0xFFFFFFFF, 2, 3]
    bits = dense_attr([True, False, True, True, False, False, False, False, True], tile((9,), i1))
    assert bits.data == bytes([0b1101, 0b1])
    assert dense_attr(True, tile((9,), i1)).data == b"\xff"
    with pytest.raises(BuilderError, match="does not fit"):
        dense_attr([1, 2, 3], tile((4,), i32))
    with pytest.raises(BuilderError, match="does not fit"):
        dense_attr(1 << 40, scalar(i32))


def test_regions_run_in_the_interpreter():
    """for / if / reduce built from callbacks compute what they say (tilebc's interpreter)."""
    module, b = kernel([scalar(PointerType(i32)), scalar(i32)])
    out, n = b.args
    start = b.make_token()
    zero, one = b.constant(0, i32), b.constant(1, i32)
    # sum of 0..n-1 by a loop, then doubled when n > 3
    total = b.for_(zero, n, one, [zero], lambda lb, i, acc: [lb.addi(acc, i)])
    big = b.cmpi(n, b.constant(3, i32), comparison_predicate="greater_than", signedness="signed")
    chosen = b.if_(big, lambda tb: [tb.muli(total, tb.constant(2, i32))], lambda eb: [total])
    values = b.constant(np.arange(8, dtype=np.int32), i32, (8,))
    largest = b.reduce([values], 0, [-(1 << 31)],
                       lambda rb, lhs, rhs: [rb.maxi(lhs, rhs, signedness="signed")])
    result = b.addi(chosen, largest)
    b.store_ptr_tko(out, result, token=start, memory_ordering_semantics="weak")
    b.return_()
    verify(module)
    for count, expected in ((2, 1 + 7), (5, 20 + 7)):
        memory = np.zeros(1, np.int32)
        run(tilebc.load(tilebc.dump(module)), "k", (1,), Pointer(memory), np.int32(count))
        assert memory.tolist() == [expected]


def test_every_body_op_is_a_method():
    module, b = kernel([])
    for spec in BODY_OPS:
        assert callable(getattr(b, spec.mnemonic + "_"))


@pytest.mark.parametrize("build, message", [
    (lambda b, n: b.op("nosuch", [n]), "unknown op"),
    (lambda b, n: b.addi(n), "missing operand rhs"),
    (lambda b, n: b.addi(n, n, n), "at most 2"),
    (lambda b, n: b.addi(n, n, overflow="always"), "overflow must be one of"),
    (lambda b, n: b.addi(n, n, colour=1), "no attribute"),
    (lambda b, n: b.iota(), "cannot infer"),
    (lambda b, n: b.addi(n, 3), "must be a Value"),
    (lambda b, n: b.tensor_view(n, [4], [1]), "pointer base"),
    (lambda b, n: b.reduce([b.constant(0, i32, (4,))], 0, [0, 0], lambda rb, x, y: [x]),
     "identities"),
])
def test_errors(build, message):
    module, b = kernel([scalar(i32)])
    with pytest.raises(BuilderError, match=message):
        build(b, b.args[0])


def test_explicit_result_types_still_win():
    module, b = kernel([scalar(i32)])
    (n,) = b.args
    wide = b.op("iota", [], [TileType((16,), i32)])
    assert wide.type == tile((16,), i32)
    assert b.op("addi", [n, n], [scalar(i32)]).type == scalar(i32)
