"""The IR model: Module → Global / Function → Region → Block → Op → Value."""
from __future__ import annotations

from collections.abc import Iterator
from _weakref import ref as _weak  # weakref.ref, without loading weakref.py (~0.5 ms)

from ..ops.enums import SymbolVisibility
from ..ops.spec import OpSpec
from ..record import Struct
from ..version import Version, MAX_VERSION
from .attrs import ArrayAttr, Attribute, DenseElementsAttr, OptimizationHintsAttr
from .location import Location
from .types import FunctionType, TileType, Type


class Value:
    """An SSA value: a function or block argument, or an op result.

    `owner` is the defining Op, or the Block for an argument, held by a weak reference: the IR
    has no reference cycles, so a module nobody holds is freed at once, without the garbage
    collector walking it. A value outlives its owner only where the owner was dropped (an op
    made and never put in a block); its owner is then None."""

    __slots__ = ("type", "_owner", "index")

    def __init__(self, type: Type, owner=None, index: int = 0):
        self.type = type
        self._owner = None if owner is None else _weak(owner)
        self.index = index

    @property
    def owner(self):
        owner = self._owner
        return None if owner is None else owner()

    @owner.setter
    def owner(self, owner) -> None:
        self._owner = None if owner is None else _weak(owner)

    def __repr__(self) -> str:
        return f"<Value {self.index}: {self.type}>"


OperandGroup = Value | None | tuple[Value, ...]


class Op:
    """One operation. `operands` maps each declared operand group to a Value, None (absent optional)
    or a tuple (variadic); `attrs` maps attribute names to values (None: absent optional).
    `regions` is a list, or the empty tuple where the op has none (one shared object instead of
    a list per op: most ops of a large module have none)."""

    __slots__ = ("spec", "operands", "attrs", "results", "regions", "loc", "offset",
                 "__weakref__")

    # Facts of an op read from text (ParsedOp's slots); a decoded or built op has neither, and
    # no slot for them: a large decoded module has ~75k ops.
    text_pos: tuple[int, int] | None = None  # (line, column) where the text placed it
    generic_form = False  # written in MLIR's generic op form (its messages differ)

    def __init__(self, spec: OpSpec, operands: dict[str, OperandGroup], attrs: dict[str, object],
                 result_types: list[Type], regions: list[Region] | None = None,
                 loc: Location = None, offset: int | None = None):
        self.spec = spec
        self.operands = operands
        self.attrs = attrs
        self.results = [Value(t, self, i) for i, t in enumerate(result_types)]
        self.regions = regions or ()
        self.loc = loc
        self.offset = offset  # byte offset in the file it was read from, for diagnostics

    @property
    def name(self) -> str:
        return self.spec.mnemonic

    @property
    def operand_values(self) -> list[Value]:
        """All operands in declaration order, absent optionals skipped."""
        values: list[Value] = []
        get = self.operands.get
        for name, variadic in self.spec.operand_layout:
            group = get(name)
            if group is None:
                continue
            if variadic:
                values.extend(group)
            else:
                values.append(group)
        return values

    def walk(self) -> Iterator[Op]:
        """This op, then every op nested in its regions, in pre-order (the debug-section order)."""
        yield self
        for region in self.regions:
            for block in region.blocks:
                for op in block.ops:
                    yield from op.walk()

    def __repr__(self) -> str:
        return f"<Op {self.name}>"


class ParsedOp(Op):
    """An Op read from text: `text_pos` (line, column) and `generic_form` are its own."""

    __slots__ = ("text_pos", "generic_form")

    def __init__(self, spec: OpSpec, operands: dict[str, OperandGroup], attrs: dict[str, object],
                 result_types: list[Type], regions: list[Region] | None = None):
        # Op.__init__ spelled out (the parser makes one per op)
        self.spec = spec
        self.operands = operands
        self.attrs = attrs
        self.results = [Value(t, self, i) for i, t in enumerate(result_types)]
        self.regions = regions or ()
        self.loc = None
        self.offset = None
        self.text_pos = None
        self.generic_form = False


# Mutable structs (tilebc/record.py): compared field by field, unhashable, like the dataclasses
# they replace, without generating methods at import.
class Block(Struct):
    _fields = ("args", "ops")

    def __init__(self, args: list[Value] | None = None, ops: list[Op] | None = None):
        self.args = [] if args is None else args
        self.ops = [] if ops is None else ops


class Region(Struct):
    _fields = ("blocks",)

    def __init__(self, blocks: list[Block] | None = None):
        self.blocks = [] if blocks is None else blocks


class Function(Struct):
    """A kernel entry (`entry @name(...)`). Its body block's arguments are the kernel parameters."""

    _fields = ("name", "type", "body", "optimization_hints", "arg_attrs", "loc", "offset",
               "text_pos")

    # text_pos: (line, column) when parsed from text
    def __init__(self, name: str, type: FunctionType, body: Block,
                 optimization_hints: OptimizationHintsAttr | None = None,
                 arg_attrs: ArrayAttr | None = None, loc: Location = None,
                 offset: int | None = None, text_pos: tuple[int, int] | None = None):
        self.name = name
        self.type = type
        self.body = body
        self.optimization_hints = optimization_hints
        self.arg_attrs = arg_attrs
        self.loc = loc
        self.offset = offset
        self.text_pos = text_pos

    @property
    def args(self) -> list[Value]:
        return self.body.args

    def walk(self) -> Iterator[Op]:
        for op in self.body.ops:
            yield from op.walk()


class Global(Struct):
    _fields = ("name", "value", "alignment", "visibility", "constant")

    def __init__(self, name: str, value: DenseElementsAttr, alignment: int = 0,
                 visibility: SymbolVisibility = SymbolVisibility.PUBLIC, constant: bool = False):
        self.name = name
        self.value = value
        self.alignment = alignment
        self.visibility = visibility
        self.constant = constant

    @property
    def type(self) -> TileType:
        return self.value.type


class Module(Struct):
    _fields = ("functions", "globals", "version", "producer", "preview", "name", "source")

    # preview: header tag bit 0. name: not stored in bytecode. source: the file it was read from,
    # for diagnostics. decode_warnings: lenient readings of a decoded file
    # (tilebc.binary.DecodeWarning). layout: how the file it was read from laid out its tables
    # (tilebc.binary.layout.FileLayout), for writing it back byte for byte; None for a module
    # built or parsed. Neither of the last two is part of the module's value (compared, shown).
    def __init__(self, functions: list[Function] | None = None,
                 globals: list[Global] | None = None, version: Version = MAX_VERSION,
                 producer: str | None = None, preview: bool = False, name: str = "kernels",
                 source: str | None = None, decode_warnings: list | None = None,
                 layout: object | None = None):
        self.functions = [] if functions is None else functions
        self.globals = [] if globals is None else globals
        self.version = version
        self.producer = producer
        self.preview = preview
        self.name = name
        self.source = source
        self.decode_warnings = [] if decode_warnings is None else decode_warnings
        self.layout = layout

    def function(self, name: str) -> Function:
        for function in self.functions:
            if function.name == name:
                return function
        raise KeyError(name)

    def walk(self) -> Iterator[Op]:
        for function in self.functions:
            yield from function.walk()
