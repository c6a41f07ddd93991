"""The IR model: Module → Global / Function → Region → Block → Op → Value."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Tuple, Union

from ..ops.enums import SymbolVisibility
from ..ops.spec import Arity, OpSpec
from ..version import Version, MAX_VERSION
from .attrs import ArrayAttr, Attribute, DenseElementsAttr, OptimizationHintsAttr
from .location import Location
from .types import FunctionType, TileType, Type


class Value:
    """An SSA value: a function or block argument, or an op result."""

    __slots__ = ("type", "owner", "index", "name_hint")

    def __init__(self, type: Type, owner=None, index: int = 0, name_hint: Optional[str] = None):
        self.type = type
        self.owner = owner  # the defining Op, or the Block for arguments
        self.index = index
        self.name_hint = name_hint

    def __repr__(self) -> str:
        return f"<Value {self.name_hint or self.index}: {self.type}>"


OperandGroup = Union[Value, None, Tuple[Value, ...]]


class Op:
    """One operation. `operands` maps each declared operand group to a Value, None (absent optional)
    or a tuple (variadic); `attrs` maps attribute names to values (None: absent optional)."""

    __slots__ = ("spec", "operands", "attrs", "results", "regions", "loc", "offset", "text_pos",
                 "generic_form")

    def __init__(self, spec: OpSpec, operands: Dict[str, OperandGroup], attrs: Dict[str, object],
                 result_types: List[Type], regions: Optional[List["Region"]] = None,
                 loc: Location = None, offset: Optional[int] = None):
        self.spec = spec
        self.operands = operands
        self.attrs = attrs
        self.results = [Value(t, self, i) for i, t in enumerate(result_types)]
        self.regions = regions or []
        self.loc = loc
        self.offset = offset  # byte offset in the file it was read from, for diagnostics
        self.text_pos: Optional[Tuple[int, int]] = None  # (line, column) when parsed from text
        self.generic_form = False  # parsed from MLIR's generic op form (its messages differ)

    @property
    def name(self) -> str:
        return self.spec.mnemonic

    @property
    def operand_values(self) -> List[Value]:
        """All operands in declaration order, absent optionals skipped."""
        values: List[Value] = []
        for spec in self.spec.operands:
            group = self.operands.get(spec.name)
            if group is None:
                continue
            if spec.arity is Arity.VARIADIC:
                values.extend(group)
            else:
                values.append(group)
        return values

    def walk(self) -> Iterator["Op"]:
        """This op, then every op nested in its regions, in pre-order (the debug-section order)."""
        yield self
        for region in self.regions:
            for block in region.blocks:
                for op in block.ops:
                    yield from op.walk()

    def __repr__(self) -> str:
        return f"<Op {self.name}>"


@dataclass
class Block:
    args: List[Value] = field(default_factory=list)
    ops: List[Op] = field(default_factory=list)


@dataclass
class Region:
    blocks: List[Block] = field(default_factory=list)


@dataclass
class Function:
    """A kernel entry (`entry @name(...)`). Its body block's arguments are the kernel parameters."""

    name: str
    type: FunctionType
    body: Block
    optimization_hints: Optional[OptimizationHintsAttr] = None
    arg_attrs: Optional[ArrayAttr] = None
    loc: Location = None
    offset: Optional[int] = None
    text_pos: Optional[Tuple[int, int]] = None  # (line, column) when parsed from text

    @property
    def args(self) -> List[Value]:
        return self.body.args

    def walk(self) -> Iterator[Op]:
        for op in self.body.ops:
            yield from op.walk()


@dataclass
class Global:
    name: str
    value: DenseElementsAttr
    alignment: int = 0
    visibility: SymbolVisibility = SymbolVisibility.PUBLIC
    constant: bool = False

    @property
    def type(self) -> TileType:
        return self.value.type


@dataclass
class Module:
    functions: List[Function] = field(default_factory=list)
    globals: List[Global] = field(default_factory=list)
    version: Version = MAX_VERSION
    producer: Optional[str] = None
    preview: bool = False  # header tag bit 0
    name: str = "kernels"  # not stored in bytecode
    source: Optional[str] = None  # file it was read from, for diagnostics
    # Lenient readings of a decoded file (tilebc.binary.DecodeWarning); not part of the IR's value.
    decode_warnings: list = field(default_factory=list, compare=False, repr=False)
    # How the file it was read from laid out its tables (tilebc.binary.layout.FileLayout), for
    # writing it back byte for byte; None for a module built or parsed. Not part of its value.
    layout: Optional[object] = field(default=None, compare=False, repr=False)

    def function(self, name: str) -> Function:
        for function in self.functions:
            if function.name == name:
                return function
        raise KeyError(name)

    def walk(self) -> Iterator[Op]:
        for function in self.functions:
            yield from function.walk()
