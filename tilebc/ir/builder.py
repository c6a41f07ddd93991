"""Build IR programmatically. Op shapes come from the op table, so every op is built the same way."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Union

from ..errors import TilebcError
from ..ops.spec import Arity, AttrKind
from ..ops.table import MNEMONIC_ALIASES, OPS_BY_MNEMONIC
from .attrs import OptimizationHintsAttr
from .location import Location
from .module import Block, Function, Module, Op, Region, Value
from .types import FunctionType, Type


def make_op(mnemonic: str, operands: Union[Sequence, Dict[str, object]] = (),
            result_types: Sequence[Type] = (), attrs: Optional[Dict[str, object]] = None,
            regions: Sequence[Region] = (), loc: Location = None) -> Op:
    """Create an op by mnemonic. `operands` is a dict by operand name, or a list in declaration
    order (a list/tuple for a variadic group, None for an absent optional). Attributes left out take
    the table's default (unit attributes: False; optional ones: absent)."""
    spec = OPS_BY_MNEMONIC.get(MNEMONIC_ALIASES.get(mnemonic, mnemonic))
    if spec is None or spec.structural:
        raise TilebcError(f"unknown op {mnemonic!r}")
    if not isinstance(operands, dict):
        operands = list(operands)
        if len(operands) != len(spec.operands):
            raise TilebcError(f"{spec.mnemonic} takes {len(spec.operands)} operand groups "
                              f"({', '.join(o.name for o in spec.operands)}), got {len(operands)}")
        operands = {o.name: value for o, value in zip(spec.operands, operands)}
    groups = {}
    for operand in spec.operands:
        value = operands.get(operand.name)
        if operand.arity is Arity.VARIADIC:
            value = tuple(value or ())
        elif operand.arity is Arity.ONE and not isinstance(value, Value):
            raise TilebcError(f"{spec.mnemonic}: operand {operand.name} must be a Value")
        groups[operand.name] = value
    unknown = set(operands) - set(groups)
    if unknown:
        raise TilebcError(f"{spec.mnemonic} has no operand(s) {sorted(unknown)}")
    given = dict(attrs or {})
    values = {}
    for attr in spec.attrs:
        if attr.name in given:
            values[attr.name] = given.pop(attr.name)
        elif attr.kind is AttrKind.UNIT:
            values[attr.name] = False
        elif attr.optional:
            values[attr.name] = None
        else:
            default = attr.default_for(groups)
            if default is None:
                raise TilebcError(f"{spec.mnemonic}: attribute {attr.name} is required")
            values[attr.name] = default
    if given:
        raise TilebcError(f"{spec.mnemonic} has no attribute(s) {sorted(given)}")
    return Op(spec, groups, values, list(result_types), list(regions), loc=loc)


class Builder:
    """Appends ops to a block: `b.op("addf", [x, y], [tile_type])` returns the op's results."""

    def __init__(self, block: Block):
        self.block = block

    def op(self, mnemonic: str, operands=(), result_types=(), attrs=None, regions=(),
           loc: Location = None):
        op = make_op(mnemonic, operands, result_types, attrs, regions, loc)
        self.block.ops.append(op)
        if len(op.results) == 1:
            return op.results[0]
        return tuple(op.results)

    def region(self, arg_types: Sequence[Type] = ()):
        """A new single-block region and a builder for it."""
        block = Block()
        block.args = [Value(t, block, i) for i, t in enumerate(arg_types)]
        return Region([block]), Builder(block)


def new_function(module: Module, name: str, arg_types: Sequence[Type],
                 hints: Optional[OptimizationHintsAttr] = None) -> Builder:
    """Add an entry to `module` and return a builder for its body."""
    block = Block()
    block.args = [Value(t, block, i) for i, t in enumerate(arg_types)]
    module.functions.append(Function(name, FunctionType(tuple(arg_types)), block, hints))
    return Builder(block)
