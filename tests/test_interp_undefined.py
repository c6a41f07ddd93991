"""Integer ops through tilebc.numeric.intops: wrapped results by default, and with check_undefined=True a
fault naming the op, the tile block and the element of the first undefined lane, the same whether
the launch runs batched or one tile block at a time. Also the public argument binder."""
import numpy as np
import pytest

import tilebc
from tilebc.interp import ExecutionError, UndefinedError, run
from tilebc.ir import Module, PointerType, scalar, tile
from tilebc.ir.builder import new_function
from tilebc.ir.types import ELEMENT_TYPES
from tilebc.ops import IntegerOverflow, Signedness

BLOCKS, WIDTH = 4, 8


def blockwise_kernel(mnemonic, element, attrs):
    """out[tile i] = lhs[tile i] <op> rhs[tile i] for tile block i (1-d, WIDTH-wide tiles)."""
    module = Module(version=tilebc.Version(13, 5))
    el = ELEMENT_TYPES[element]
    b = new_function(module, "k", [scalar(PointerType(el))] * 3)
    pointers = b.args
    block_id = b.op("get_tile_block_id", [], [scalar(ELEMENT_TYPES["i32"])] * 3)[0]
    views = [b.partition_view(b.tensor_view(p, [BLOCKS * WIDTH], [1]), [WIDTH]) for p in pointers]
    lhs, _ = b.load(views[0], [block_id])
    rhs, _ = b.load(views[1], [block_id])
    result = b.op(mnemonic, [lhs, rhs], [tile((WIDTH,), el)], attrs)
    b.store(result, views[2], [block_id])
    b.op("return", [[]])
    return module


def launch(module, lhs, rhs, **options):
    out = np.zeros_like(lhs)
    run(module, "k", (BLOCKS,), tilebc.interp.Pointer(lhs), tilebc.interp.Pointer(rhs),
        tilebc.interp.Pointer(out), **options)
    return out


def planted(dtype, value, block, element, fill=1):
    array = np.full(BLOCKS * WIDTH, fill, dtype)
    array[block * WIDTH + element] = value
    return array


CASES = [
    # mnemonic, attrs, lhs, rhs, what the message says
    ("addi", {"overflow": IntegerOverflow.NO_SIGNED_WRAP},
     planted(np.int32, 2**31 - 1, 2, 5), np.ones(BLOCKS * WIDTH, np.int32), "no_signed_wrap"),
    ("muli", {"overflow": IntegerOverflow.NO_UNSIGNED_WRAP},
     planted(np.int32, -1, 2, 5), np.full(BLOCKS * WIDTH, 2, np.int32), "no_unsigned_wrap"),
    ("divi", {"signedness": Signedness.SIGNED},
     np.full(BLOCKS * WIDTH, 7, np.int32), planted(np.int32, 0, 2, 5), "division by zero"),
    ("remi", {"signedness": Signedness.UNSIGNED},
     np.full(BLOCKS * WIDTH, 7, np.int16), planted(np.int16, 0, 2, 5), "division by zero"),
    ("shli", {}, np.ones(BLOCKS * WIDTH, np.int8), planted(np.int8, 8, 2, 5), "shift amount"),
    ("shri", {"signedness": Signedness.SIGNED},
     np.ones(BLOCKS * WIDTH, np.int64), planted(np.int64, 64, 2, 5), "shift amount"),
]


@pytest.mark.parametrize("mnemonic,attrs,lhs,rhs,what", CASES, ids=[c[0] for c in CASES])
def test_undefined_lane_is_reported_with_op_block_and_element(mnemonic, attrs, lhs, rhs, what):
    module = blockwise_kernel(mnemonic, {np.int8: "i8", np.int16: "i16", np.int32: "i32",
                                         np.int64: "i64"}[lhs.dtype.type], attrs)
    wrapped = launch(module, lhs, rhs)  # by default: intops' defined-anyway result, no fault
    expected = tilebc.numeric.intops.evaluate(mnemonic, (lhs, rhs), attrs)
    np.testing.assert_array_equal(wrapped, expected)
    messages = []
    for batch in (False, "auto"):
        with pytest.raises(UndefinedError) as error:
            launch(module, lhs, rhs, check_undefined=True, batch=batch)
        assert error.value.op.name == mnemonic
        assert error.value.block_id == (2, 0, 0)
        assert "at element (5,)" in str(error.value) and what in str(error.value)
        messages.append(str(error.value))
    assert messages[0] == messages[1]


def test_defined_lanes_pass_the_check():
    module = blockwise_kernel("addi", "i32", {"overflow": IntegerOverflow.NO_UNSIGNED_WRAP})
    lhs = planted(np.int32, 2**31 - 1, 2, 5)  # signed overflow only: no_unsigned_wrap holds
    out = launch(module, lhs, np.ones_like(lhs), check_undefined=True)
    assert out[2 * WIDTH + 5] == -2**31


def test_an_invalid_flag_combination_is_an_execution_error():
    module = blockwise_kernel("divi", "i32", {"signedness": Signedness.UNSIGNED,
                                              "rounding": tilebc.ops.RoundingMode.NEGATIVE_INF})
    ones = np.ones(BLOCKS * WIDTH, np.int32)
    with pytest.raises(ExecutionError, match="negative_inf is not allowed with unsigned"):
        launch(module, ones, ones.copy())


def test_binder_is_public_and_binds_like_run():
    from tilebc.interp import Binder, bind_arguments
    from tilebc.interp.api import _Binder
    from tilebc.interp.memory import GlobalMemory
    assert _Binder is Binder
    module = blockwise_kernel("addi", "i32", {})
    memory = GlobalMemory()
    arrays = [np.arange(BLOCKS * WIDTH, dtype=np.int32) for _ in range(3)]
    values, _ = bind_arguments(module.functions[0], memory,
                               [tilebc.interp.Pointer(a) for a in arrays])
    assert len(values) == 3 and len(memory.buffers) == 3
    assert [memory.buffer_at(int(v)).data.base is not None for v in values] == [True] * 3
    with pytest.raises(tilebc.interp.ArgumentError, match="takes 3 parameters"):
        bind_arguments(module.functions[0], GlobalMemory(), [tilebc.interp.Pointer(arrays[0])])


# ---- undetermined padding ------------------------------------------------------------------


def _ragged_copy_kernel(padding):
    """out = the 16-wide tile of a 10-element f32 array (its last 6 elements are padding)."""
    module = Module(version=tilebc.Version(13, 5))
    f32 = ELEMENT_TYPES["f32"]
    b = new_function(module, "k", [scalar(PointerType(f32))] * 2)
    source, out = b.args
    zero = b.constant(0, "i32")
    values, _ = b.load(b.partition_view(b.tensor_view(source, [10], [1]), [16], padding), [zero])
    b.store(values, b.partition_view(b.tensor_view(out, [16], [1]), [16]), [zero])
    b.op("return", [[]])
    return module


@pytest.mark.parametrize("padding", [None, "zero"])
def test_undetermined_padding_reads_nan_only_when_checking(padding):
    """A view load with no padding value fills its out-of-bounds elements with an undetermined
    value: 0 by default, NaN with check_undefined=True (where a result relies on it, it shows,
    as on a GPU whose loads fill them with NaN); a zero padding value stays 0 either way."""
    module = _ragged_copy_kernel(padding)
    source = np.arange(10, dtype=np.float32) + 1
    for check, expected_tail in ((False, 0.0), (True, np.nan if padding is None else 0.0)):
        out = np.full(16, -1, np.float32)
        run(module, "k", (1,), tilebc.interp.Pointer(source), tilebc.interp.Pointer(out),
            check_undefined=check)
        np.testing.assert_array_equal(out[:10], source)
        np.testing.assert_array_equal(out[10:], np.full(6, expected_tail, np.float32))
