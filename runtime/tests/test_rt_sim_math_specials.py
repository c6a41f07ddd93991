"""Transcendentals through the JIT's PTX on the emulator give the IEEE answers at infinities and
NaN (the interpreter's, numpy's): exp(-inf) = 0 is what every masked softmax relies on (padding
with -inf, masking scores with -inf), so a reduction that turns ±inf into NaN poisons whole rows.
Found by the nn_softmax_rows / nn_cross_entropy fixtures."""
import numpy as np
import pytest

from tilebc.interp import run as interpret
from tilebc.ir import PointerType, f16, f32, i32, scalar
from tilebc.ir.builder import new_function, new_module
from tilebc.version import MAX_VERSION

from tilebc_runtime import sim

SPECIALS = np.array([-np.inf, np.inf, np.nan, -1e30, 1e30, -120.0, 95.0, -88.0,
                     88.5, 0.0, -0.0, 1.0, -1.0, 1e-3, -30.0, 30.0], np.float32)
NUMPY = {"exp": np.exp, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh}


def unary_kernel(mnemonic: str, element):
    """dst[i] = op(src[i]) over 16-element tiles (each array is pointer, size, stride)."""
    module = new_module(MAX_VERSION)
    params = [scalar(PointerType(element)), scalar(i32), scalar(i32),
              scalar(PointerType(element)), scalar(i32), scalar(i32)]
    b = new_function(module, f"{mnemonic}_{element}", params)
    a = b.args
    start = b.make_token()
    bid = b.get_tile_block_id()[0]
    tiles_in = b.partition_view(b.tensor_view(a[0], [a[1]], [a[2]]), (16,))
    tiles_out = b.partition_view(b.tensor_view(a[3], [a[4]], [a[5]]), (16,))
    x, _ = b.load(tiles_in, [bid], token=start)
    b.store(getattr(b, mnemonic)(x), tiles_out, [bid], token=start)
    b.return_([])
    return module


@pytest.mark.parametrize("element", [f32, f16], ids=str)
@pytest.mark.parametrize("mnemonic", sorted(NUMPY))
def test_math_at_infinities_and_nan(mnemonic, element):
    dtype = np.float32 if element is f32 else np.float16
    with np.errstate(over="ignore"):
        x = SPECIALS.astype(dtype)
    module = unary_kernel(mnemonic, element)
    entry = module.functions[0].name
    emulated, interpreted = np.zeros_like(x), np.zeros_like(x)
    sim.run(module, entry, (1,), x, emulated)
    interpret(module, entry, (1,), x, interpreted)
    with np.errstate(over="ignore", invalid="ignore"):
        expected = NUMPY[mnemonic](x.astype(np.float64)).astype(dtype)
    # the interpreter is the reference; check it too, then the emulator against it
    np.testing.assert_allclose(interpreted.astype(np.float64), expected.astype(np.float64),
                               rtol=1e-6)
    np.testing.assert_allclose(emulated.astype(np.float64), expected.astype(np.float64),
                               rtol=1e-5 if element is f32 else 1e-3, atol=0)
