"""One implementation per op mnemonic, registered by the family modules under `interp/ops/`.

An implementation is called as `impl(tb, op, *groups)` where `tb` is the running TileBlock and
`groups` are the op's operand groups in declaration order (a value, None for an absent optional, a
tuple for a variadic group). It returns the list of result values, or a `Signal` (terminators and
control flow that leaves a region early). Ops that cannot run on the CPU are refused explicitly,
with the reason, so a test can check every body op of the table has one or the other.
"""
from __future__ import annotations

from typing import Callable, Dict, Set

from ..ops.spec import Effects, OpSpec
from ..ops.table import OPS_BY_MNEMONIC

IMPLEMENTATIONS: Dict[str, Callable] = {}
REFUSALS: Dict[str, str] = {}
# Ops whose results depend only on the operands, the op's attributes and the launch (module, grid,
# options), with no effect beyond a possible error: the machine computes them once per launch when
# every operand is the same in all tile blocks (see Machine.compile_block). Derived from the op
# table's effects; `per_block` implementations (they read the tile block's coordinates) are not.
PURE: Set[str] = set()
_HOISTABLE = (Effects.NONE, Effects.UNDECLARED)
# Implementations that work unchanged when every array operand carries extra leading axes (all of
# them the same axes, or none for some operands): element-wise ops, matmul-like ops and pointer
# loads. The batched runner (batch.py) calls them once for all tile blocks, the block axis leading.
LANEWISE: Set[str] = set()


def implements(*mnemonics: str, per_block: bool = False, lanewise: bool = False):
    """Decorator: register `fn` as the implementation of each mnemonic. `per_block`: its results
    depend on the running tile block (its coordinates), so it is never computed once per launch."""
    def register(fn: Callable) -> Callable:
        for mnemonic in mnemonics:
            if mnemonic in IMPLEMENTATIONS or mnemonic in REFUSALS:
                raise RuntimeError(f"two interpreter entries for {mnemonic!r}")
            spec = OPS_BY_MNEMONIC.get(mnemonic)
            if spec is None:
                raise RuntimeError(f"interpreter entry for unknown op {mnemonic!r}")
            IMPLEMENTATIONS[mnemonic] = fn
            if spec.effects in _HOISTABLE and not spec.terminator and not per_block:
                PURE.add(mnemonic)
            if lanewise:
                LANEWISE.add(mnemonic)
        return fn
    return register


def refuse(mnemonic: str, reason: str) -> None:
    """Declare that `mnemonic` raises UnsupportedError(reason) on the CPU interpreter."""
    if mnemonic in IMPLEMENTATIONS or mnemonic in REFUSALS:
        raise RuntimeError(f"two interpreter entries for {mnemonic!r}")
    if mnemonic not in OPS_BY_MNEMONIC:
        raise RuntimeError(f"interpreter entry for unknown op {mnemonic!r}")
    REFUSALS[mnemonic] = reason


class Signal:
    """How a region ended: `exit` is where its terminator sends control (OpSpec.exit), `kind` the
    terminator's mnemonic (for messages)."""

    __slots__ = ("kind", "exit", "values")

    def __init__(self, terminator: OpSpec, values):
        self.kind = terminator.mnemonic
        self.exit = terminator.exit
        self.values = values

    def __repr__(self) -> str:
        return f"<Signal {self.kind} {len(self.values)} values>"
