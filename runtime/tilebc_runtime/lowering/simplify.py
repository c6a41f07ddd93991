"""Value forwarding and dead-op removal before lowering.

Shape ops that only move elements cost a shuffle or a shared-memory round trip each, and cuTile
code often undoes them: permute(permute(x)) with inverse permutations, or an extract that takes
back one operand of a cat. `forwarding` maps such results to the value they equal, and `dead_ops`
finds the side-effect-free ops no live op needs once uses are forwarded; the Lowerer skips both.
"""
from __future__ import annotations

from typing import Dict, Set

from tilebc.ir.module import Function, Op, Value
from tilebc.ir.types import TileType, TokenType
from tilebc.ops.spec import Effects
from tilebc.ops.table import by_mnemonic

from .folding import constant_array


def forwarding(lw, function: Function) -> Dict[Value, Value]:
    """result -> the earlier value it is equal to (element for element, same type)."""
    forward: Dict[Value, Value] = {}

    def resolve(value: Value) -> Value:
        while value in forward:
            value = forward[value]
        return value

    for op in function.walk():
        if not op.results or not isinstance(op.results[0].type, TileType):
            continue
        result = op.results[0]
        forwarder = _FORWARDERS.get(op.name)
        target = forwarder(lw, op, resolve) if forwarder is not None else None
        if target is not None and target.type == result.type:
            forward[result] = target
    return {value: resolve(value) for value in forward}


def _undone_permute(lw, op: Op, resolve):
    """The source when permute(...) composes to the identity (possibly through a permute)."""
    source = resolve(op.operand_values[0])
    perm = list(op.attrs["permutation"])
    if perm == list(range(len(perm))):
        return source
    inner = source.owner
    if isinstance(inner, Op) and inner.spec is op.spec:  # a permute too
        first = list(inner.attrs["permutation"])
        # result dim d is source dim perm[d], which is the inner source's dim first[perm[d]]
        if [first[p] for p in perm] == list(range(len(perm))):
            return resolve(inner.operand_values[0])
    return None


def _extracted_operand(lw, op: Op, resolve):
    """For extract with compile-time indices: the whole source (one window) or the cat operand
    that exactly fills the window."""
    source = resolve(op.operands["source"])
    indices = []
    for value in op.operands["indices"]:
        array = constant_array(lw, value)
        if array is None or array.size != 1:
            return None
        indices.append(int(array.flat[0]))
    shape = list(op.results[0].type.shape)
    starts = [i * s for i, s in zip(indices, shape)]
    if list(source.type.shape) == shape and not any(starts):
        return source
    cat = source.owner
    if not (isinstance(cat, Op) and cat.name == "cat"):
        return None
    dim = cat.attrs["dim"]
    lhs, rhs = cat.operand_values
    split = lhs.type.shape[dim]
    for operand, begin in ((lhs, 0), (rhs, split)):
        expected = [0] * len(shape)
        expected[dim] = begin
        if list(operand.type.shape) == shape and starts == expected:
            return resolve(operand)
    return None


# Effects (op table) of ops that may go when nothing uses their results: none, or none on memory
# (assume), or a scratch allocation nobody reads.
_DROPPABLE = (Effects.NONE, Effects.UNDECLARED, Effects.ALLOC)


def _removable(op: Op) -> bool:
    """No effect besides its results, which are tiles (tokens and views are kept for the
    lowering's bookkeeping); no regions, not a terminator."""
    if not op.results or op.regions or op.spec.terminator or op.spec.effects not in _DROPPABLE:
        return False
    return not any(isinstance(r.type, TokenType) for r in op.results) and \
        all(isinstance(r.type, TileType) for r in op.results)


def dead_ops(function: Function, forward: Dict[Value, Value]) -> Set[Op]:
    """Removable ops whose results no live op uses (uses read through `forward`), plus every
    forwarded op (its uses read the forwarded value)."""
    ops = list(function.walk())
    forwarded = {op for op in ops if op.results and all(r in forward for r in op.results)}
    live: Set[Op] = set()
    work = [op for op in ops if not _removable(op) and op not in forwarded]
    while work:
        op = work.pop()
        if op in live:
            continue
        live.add(op)
        for value in op.operand_values:
            owner = forward.get(value, value).owner
            if isinstance(owner, Op) and owner not in live:
                work.append(owner)
    return {op for op in ops if op not in live}


# Ops whose result may be forwarded to a value computed already: op -> that value or None.
_FORWARDERS = by_mnemonic({"permute": _undone_permute, "extract": _extracted_operand},
                          "value forwarding")
