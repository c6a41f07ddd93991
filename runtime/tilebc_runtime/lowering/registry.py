"""Lowering hooks by op mnemonic, checked against the op table.

Every body op of the op table must appear either in LOWERINGS (a hook) or in NOT_LOWERED (with the
reason it is not lowered yet); `runtime/tests/test_rt_lowering_coverage.py` enforces this.
"""
from __future__ import annotations

from typing import Callable, Dict

from tilebc.ops.table import OPS_BY_MNEMONIC, by_mnemonic

LOWERINGS: Dict[str, Callable] = {}
EXPANDING: set = set()  # mnemonics whose lowering expands each element (see `lowers`)

NOT_LOWERED: Dict[str, str] = by_mnemonic({
    "multimem_load_reduce_view_tko": "multicast (NVLink SHARP) memory needs multimem.* on sm_90 "
                                     "with multicast objects; not lowered",
    "multimem_reduce_view_tko": "multicast memory: not lowered",
    "multimem_store_view_tko": "multicast memory: not lowered",
}, "ops not lowered")


def lowers(*mnemonics: str, expands: bool = False):
    """Register the decorated function as the lowering of each mnemonic. `expands`: the lowering
    emits a long sequence per element (polynomials, softfloat), which the code-size bound charges."""
    def register(function: Callable) -> Callable:
        for mnemonic in mnemonics:
            if expands:
                EXPANDING.add(mnemonic)
            if mnemonic not in OPS_BY_MNEMONIC:
                raise RuntimeError(f"lowering registered for unknown op {mnemonic!r}")
            if mnemonic in LOWERINGS:
                raise RuntimeError(f"two lowerings registered for {mnemonic!r}")
            LOWERINGS[mnemonic] = function
        return function
    return register

