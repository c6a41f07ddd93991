"""The default (cyclic) layout's per-thread indices without numpy: the same slot deltas and
multi-index rows as numpy's unravel_index gives, and a view kernel that compiles without it."""
import numpy as np
import pytest

import tilebc
from pathlib import Path
from tilebc_runtime.lowering.layout import Cyclic
from tilebc_runtime.lowering.lowerer import Lowerer, _unravel

FIXTURE = (Path(__file__).resolve().parents[2] / "fixtures" / "bytecode" / "early_return"
           / "early_return-13.5.tilebc")
SHAPES = [(128,), (4, 64), (64, 4), (2, 3, 64), (8, 16), (16, 8, 2), (1, 256), (3, 5), (512, 1)]


def _numpy_deltas(shape, threads):
    """slot_deltas as numpy computes it: None where slot k's offset from slot 0 varies by thread."""
    count = int(np.prod(shape))
    slots = -(-count // threads)
    if count == 1 or count % threads:
        return [None] * slots
    linear = np.arange(threads)[None, :] + threads * np.arange(slots)[:, None]
    index = np.stack(np.unravel_index(linear, shape))
    moved = index - index[:, :1, :]
    return [tuple(int(v) for v in moved[:, k, 0]) if np.all(moved[:, k, :] == moved[:, k, :1])
            else None for k in range(slots)]


@pytest.mark.parametrize("threads", [32, 128, 256])
@pytest.mark.parametrize("shape", SHAPES)
def test_cyclic_indices_match_numpy(shape, threads):
    module = tilebc.load(FIXTURE)
    lw = Lowerer(module, module.functions[0], threads=threads, arch=90)
    assert lw.slot_deltas(shape) == _numpy_deltas(shape, threads)
    table = Cyclic(int(np.prod(shape)), threads).table(threads)
    for k in range(table.shape[0]):
        ours = _unravel([(t + k * threads) % int(np.prod(shape)) for t in range(threads)], shape)
        assert ours == [list(map(int, row)) for row in np.unravel_index(table[k], shape)]
    # a row given as numpy and as a list is one preamble register, not two
    row = np.arange(threads, dtype=np.int64) * 3 + 5
    first = lw.per_thread(row, lambda: lw.w.reg("b32"))
    assert lw.per_thread(row.tolist(), lambda: pytest.fail("recomputed")) == first
