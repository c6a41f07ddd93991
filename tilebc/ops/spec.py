"""The vocabulary of the op table: what an op declares about its operands, results, attributes and regions.

Everything the encoder, decoder, printer, parser, verifier, interpreter and lowering need to know about an
op's shape is derived from these declarations (see `table.py`); nothing else lists opcodes.
"""
from __future__ import annotations

import enum
from collections.abc import Callable

from ..record import Record
from ..version import V13_1, Version

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every command's start ~3 ms
    from typing import Any


class Arity(enum.Enum):
    ONE = "one"
    OPTIONAL = "optional"
    VARIADIC = "variadic"


# The number each arity is given in the programs the optional C helpers read (tilebc/_*.c).
ARITY_CODES = {Arity.ONE: 0, Arity.OPTIONAL: 1, Arity.VARIADIC: 2}


class AttrKind(enum.Enum):
    """How an op attribute is stored inline (no tag: the kind is implied by the op)."""

    ENUM = "enum"            # varint of the enum value
    UNIT = "unit"            # no bytes; presence is a bit of the op's flags varint
    BOOL = "bool"            # one byte 0/1
    INT = "int"              # varint of the value zero-extended to `width` bits
    STRING = "string"        # string-table index
    SYMBOL = "symbol"        # string-table index of a (non-empty) symbol name
    TYPE = "type"            # type-table index
    DENSE = "dense"          # constant-pool index; shape and element type from the result type
    I32_ARRAY = "i32_array"  # varint count + 4-byte LE signed each
    I64_ARRAY = "i64_array"  # varint count + 8-byte LE signed each
    BOOL_ARRAY = "bool_array"  # varint count + one byte per element
    ATTR_ARRAY = "attr_array"  # varint count + tagged attributes
    TAGGED = "tagged"        # one tagged attribute
    HINTS = "hints"          # untagged optimization-hints dictionary body


class Effects(enum.Enum):
    """An op's memory effects, as NVIDIA's dialect declares them (cuda-tile Ops.td traits), with the
    kind of effect where it has one: the interpreter's batched runner and the JIT's dead-op removal
    decide by kind."""

    NONE = "none"            # Pure or NoMemoryEffect: reads and writes nothing
    RECURSIVE = "recursive"  # RecursiveMemoryEffects: those of the ops in its regions
    UNDECLARED = "undeclared"  # declares no trait (MLIR then assumes effects) but touches no memory
    MEMORY = "memory"        # loads, stores, fences: ordered by tokens within a tile block
    ATOMIC = "atomic"        # atomics: tile blocks may communicate through them
    OUTPUT = "output"        # prints: visible outside the kernel, in order
    TRAP = "trap"            # asserts: end the kernel when a check fails
    ALLOC = "alloc"          # scratch memory owned by one tile block
    CALL = "call"            # a foreign function: anything

    @property
    def own(self) -> bool:
        """The op itself has effects (NVIDIA's verifier rejects it in a reduce/scan body)."""
        return self not in (Effects.NONE, Effects.RECURSIVE)


class Family(enum.Enum):
    """Op families whose typing is one rule, read by the verifier and the builder alike."""

    OTHER = "other"
    # Element-wise ops: every operand and the result are tiles of one type whose elements are of
    # the op's element class; the result type is the operands' type.
    ELEMENTWISE = "elementwise"
    # Element-wise comparisons: both operands one tile type of the element class; the result is the
    # i1 tile of their shape.
    COMPARE = "compare"


class Exit(enum.Enum):
    """Where a terminator sends control when it ends its region."""

    VALUES = "values"          # back to the op owning the region, with its values (if, combiners)
    NEXT = "next"              # the enclosing loop's next iteration, with the carried values
    LEAVE_LOOP = "leave_loop"  # out of the enclosing loop, with its results
    LEAVE_KERNEL = "leave_kernel"  # out of the kernel


class Elements(enum.Enum):
    """Element class of an element-wise family op."""

    FLOAT = "float"  # the base float types (f16, bf16, f32, f64)
    INT = "int"      # the integer types i1..i64


# Plain frozen records (tilebc/record.py): the table builds ~120 specs at import, and `tilebc dis`
# starts faster without generating dataclass methods.
class OperandSpec(Record):
    __slots__ = ("name", "arity", "since")
    _fields = __slots__

    def __init__(self, name: str, arity: Arity = Arity.ONE, since: Version = V13_1):
        _set = object.__setattr__
        _set(self, "name", name)
        _set(self, "arity", arity)
        _set(self, "since", since)


class ResultSpec(Record):
    __slots__ = ("name", "variadic", "since", "default_type", "parsed_kind")
    _fields = __slots__

    # default_type: the type the reader synthesizes when the file predates the result.
    # parsed_kind: the kind of type the op's custom text form reads for this result
    # ("partition_view"); NVIDIA's parser refuses any other kind where the type is written.
    def __init__(self, name: str, variadic: bool = False, since: Version = V13_1,
                 default_type: Any = None, parsed_kind: str = ""):
        _set = object.__setattr__
        _set(self, "name", name)
        _set(self, "variadic", variadic)
        _set(self, "since", since)
        _set(self, "default_type", default_type)
        _set(self, "parsed_kind", parsed_kind)


class AttrSpec(Record):
    __slots__ = ("name", "kind", "enum", "optional", "since", "default", "width")
    _fields = __slots__

    # default: the value implied when absent (files older than `since`, or elided in text); a
    # callable gets the op's operand groups, for defaults that depend on them (view `inbounds`).
    # width: INT attributes, the integer width the value must fit in.
    def __init__(self, name: str, kind: AttrKind, enum: type | None = None,
                 optional: bool = False, since: Version = V13_1, default: Any = None,
                 width: int = 64):
        _set = object.__setattr__
        _set(self, "name", name)
        _set(self, "kind", kind)
        _set(self, "enum", enum)
        _set(self, "optional", optional)
        _set(self, "since", since)
        _set(self, "default", default)
        _set(self, "width", width)

    def default_for(self, operands) -> Any:
        return self.default(operands) if callable(self.default) else self.default

    @property
    def in_flags(self) -> bool:
        """Unit and optional attributes take a bit of the op's flags varint."""
        return self.optional or self.kind is AttrKind.UNIT


class FlagBit(Record):
    __slots__ = ("bit", "name", "is_operand", "since")
    _fields = __slots__

    def __init__(self, bit: int, name: str, is_operand: bool, since: Version):
        _set = object.__setattr__
        _set(self, "bit", bit)
        _set(self, "name", name)
        _set(self, "is_operand", is_operand)
        _set(self, "since", since)


def _flag_bits(op_since: Version, attrs, operands) -> tuple[FlagBit, ...]:
    """Flag bits are numbered in version order: the optional fields of the op's first version
    (attributes in declaration order, then optional operands), then the next version's, and so on."""
    # (the table builds ~110 specs at import, most without attributes: skip the empty scans)
    candidates = [(max(a.since, op_since), 0, i, a.name, False)
                  for i, a in enumerate(attrs) if a.in_flags] if attrs else []
    if operands:
        candidates += [(max(o.since, op_since), 1, i, o.name, True)
                       for i, o in enumerate(operands) if o.arity is Arity.OPTIONAL]
    if not candidates:
        return ()
    candidates.sort(key=lambda c: c[:3])  # version, attributes before operands, position
    return tuple(FlagBit(bit, name, is_operand, since)
                 for bit, (since, _, _, name, is_operand) in enumerate(candidates))


class OpSpec(Record):
    _fields = ("mnemonic", "opcode", "since", "operands", "results", "attrs", "regions",
               "segmented", "terminator", "structural", "preview", "effects", "family", "elements",
               "ends", "through_if", "exit", "exits_pass", "combiner", "else_optional",
               "block_args", "carried", "summary",
               "syntax", "asm_name", "asm_block_args", "result_like", "forwards", "commutative",
               "maps_elements", "types_match", "unregistered", "flag_bits")

    def __init__(self, mnemonic: str,
                 opcode: int,
                 since: Version = V13_1,
                 operands: tuple[OperandSpec, ...] = (),
                 results: tuple[ResultSpec, ...] = (),
                 attrs: tuple[AttrSpec, ...] = (),
                 regions: int = 0,
                 # AttrSizedOperandSegments: each operand group is encoded on its own (variadic:
                 # count + ids, optional: id only when its flag bit is set). Otherwise variadic
                 # operands share one total count.
                 segmented: bool = False,
                 terminator: bool = False,
                 structural: bool = False,  # entry / global / module: never inside a function body
                 # opcode in the preview range, readable only from preview-tagged files
                 preview: bool = False,
                 # Memory effects; a reduce/scan body may hold only ops whose effects come to NONE.
                 effects: Effects = Effects.MEMORY,
                 family: Family = Family.OTHER,
                 # ELEMENTWISE / COMPARE ops: the operands' element class
                 elements: Elements | None = None,
                 # Terminators: the region ops whose regions they may end directly (entry: a kernel
                 # body), and whether they may also end an `if` region nested in one of them (early
                 # exits).
                 ends: tuple[str, ...] = (),
                 through_if: bool = False,
                 exit: Exit | None = None,  # terminators: where control goes
                 # Region ops: early exits (return, continue, break) in its regions leave through it
                 # to the enclosing op (`if`); its regions are combiners, which may hold only
                 # effect-free ops (reduce, scan).
                 exits_pass: bool = False,
                 combiner: bool = False,
                 # Region ops: the last region may be left out when the op has no results (if
                 # without else).
                 else_optional: bool = False,
                 # Region ops: whether their regions' blocks take arguments (an if's do not).
                 block_args: bool = True,
                 # Loops: the operand group whose types `continue` carries to the next iteration
                 # when those need not be the results' (a loop left by break); "" where the
                 # results' types are carried.
                 carried: str = "",
                 summary: str = "",
                 # Text form: an MLIR-assembly-format-like declaration read by both the printer and
                 # the parser (grammar in tilebc/text/syntax.py).
                 syntax: str = "",
                 # Default SSA result names in text: None (op offers none), "" (op takes part in
                 # naming but names nothing), a base name for result 0 ("tview"), or "@constant" /
                 # "@assume" for names computed from the op's value / operand. Ops with two or more
                 # fixed results name each result after its declaration.
                 asm_name: str | None = None,
                 # Names of region entry-block arguments in text: "" (argN), "induction"
                 # (loopIdx, iterArgN), "pairs" (reduce_lhs/reduce_rhs pairs).
                 asm_block_args: str = "",
                 # Operand whose type the first result has (MLIR's AllTypesMatch / TypesMatchWith):
                 # the parser reads it when the syntax prints no result type, the builder infers the
                 # result type from it.
                 result_like: str = "",
                 # Operand whose value the result is, unchanged (assume only records a fact about
                 # it), so analyses may look through the op to where the value comes from.
                 forwards: str = "",
                 # The result does not depend on the order of the two operands, bit for bit (a
                 # reduction may pair partial results in any order and lane pairing).
                 commutative: bool = False,
                 # Result element i is a function of the operands' elements i alone (casts, select);
                 # the element-wise and compare families are so by definition, see `per_element`.
                 maps_elements: bool = False,
                 # Operands (and "result") that MLIR's AllTypesMatch gives one type beyond the
                 # element-wise family's: the parser reads those whose type the text does not write
                 # at the written one.
                 types_match: tuple[str, ...] = (),
                 # An op of another dialect, read from text only behind
                 # -allow-unregistered-dialect: checked by nothing but SSA scoping, never printed
                 # or encoded (see `unregistered_op`).
                 unregistered: bool = False):
        # One update of the instance dict (a Record refuses attribute assignment): a third of the
        # time 32 object.__setattr__ calls took, for each of the table's ~160 specs at import.
        vars(self).update(
            mnemonic=mnemonic,
            opcode=opcode,
            since=since,
            operands=operands,
            results=results,
            attrs=attrs,
            regions=regions,
            segmented=segmented,
            terminator=terminator,
            structural=structural,
            preview=preview,
            effects=effects,
            family=family,
            elements=elements,
            ends=ends,
            through_if=through_if,
            exit=exit,
            exits_pass=exits_pass,
            combiner=combiner,
            else_optional=else_optional,
            block_args=block_args,
            carried=carried,
            summary=summary,
            syntax=syntax,
            asm_name=asm_name,
            asm_block_args=asm_block_args,
            result_like=result_like,
            forwards=forwards,
            commutative=commutative,
            maps_elements=maps_elements,
            types_match=types_match,
            unregistered=unregistered,
            flag_bits=_flag_bits(since, attrs, operands),
            # (name, variadic) of each operand group, for Op.operand_values (not a field: derived)
            operand_layout=tuple([(o.name, o.arity is Arity.VARIADIC) for o in operands]))

    @property
    def per_element(self) -> bool:
        """Every result element depends only on the operands' elements at the same index (the
        JIT may lower such ops over any subset of elements, e.g. one chunk at a time)."""
        return self.maps_elements or self.family in (Family.ELEMENTWISE, Family.COMPARE)

    @property
    def has_variadic(self) -> bool:
        return (any(o.arity is Arity.VARIADIC for o in self.operands)
                or any(r.variadic for r in self.results))

    @property
    def counted_results(self) -> bool:
        """Result types are preceded by a count when the op has any variadic operand or result."""
        return self.has_variadic

    @property
    def flags_since(self) -> Version | None:
        """First version whose files carry this op's flags varint (None: the op has no flags)."""
        if not self.flag_bits:
            return None
        return min(b.since for b in self.flag_bits)

    def flag_bit(self, name: str) -> FlagBit | None:
        for bit in self.flag_bits:
            if bit.name == name:
                return bit
        return None

    def attr(self, name: str) -> AttrSpec:
        for spec in self.attrs:
            if spec.name == name:
                return spec
        raise KeyError(f"{self.mnemonic} has no attribute {name!r}")

    def operand(self, name: str) -> OperandSpec:
        for spec in self.operands:
            if spec.name == name:
                return spec
        raise KeyError(f"{self.mnemonic} has no operand {name!r}")


OpHook = Callable[..., "Any"]


def unregistered_op(name: str) -> OpSpec:
    """The spec of an op of another dialect (MLIR's -allow-unregistered-dialect): any operands
    and results, effects unknown (so assumed), no opcode (the writer has no encoding for it)."""
    return OpSpec(name, opcode=-1, operands=(OperandSpec("operands", Arity.VARIADIC),),
                  results=(ResultSpec("results", variadic=True),), effects=Effects.CALL,
                  unregistered=True)
