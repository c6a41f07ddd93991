"""The op table: every public Tile IR op, declared once.

Encoder, decoder, printer, parser, verifier, interpreter and lowering all read their per-op facts from
OPS. Opcodes are frozen wire values (never renumbered). Operand shorthand: "name" one value,
"name?" optional, "name*" variadic. Result shorthand: "name" one result, "name*" variadic.
"""
from __future__ import annotations

import functools

from ..version import V13_1, V13_2, V13_3, V13_4, V13_5, Version
from .enums import (AtomicRMWMode, ComparisonOrdering, ComparisonPredicate, IntegerOverflow,
                    MemoryOrderingSemantics, MemoryScope, MultimemReductionKind, RoundingMode,
                    Signedness, SymbolVisibility)
from .spec import (Arity, AttrKind, AttrSpec, Effects, Elements, Exit, Family, OperandSpec,
                   OpSpec, ResultSpec)


TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every command's start ~3 ms
    from typing import TypeVar
    T = TypeVar("T")


def _operands(*names, since: Version = V13_1) -> tuple[OperandSpec, ...]:
    specs = []
    for name in names:
        if isinstance(name, OperandSpec):
            specs.append(name)
        elif name.endswith("?"):
            specs.append(OperandSpec(name[:-1], Arity.OPTIONAL, since))
        elif name.endswith("*"):
            specs.append(OperandSpec(name[:-1], Arity.VARIADIC, since))
        else:
            specs.append(OperandSpec(name, Arity.ONE, since))
    return tuple(specs)


def _results(*names) -> tuple[ResultSpec, ...]:
    return tuple(n if isinstance(n, ResultSpec) else
                 ResultSpec(n.rstrip("*"), variadic=n.endswith("*")) for n in names)


# Operand and result declarations -> their (frozen) specs, made once for all the ops that declare
# alike: most ops share a few ("source",), ("lhs", "rhs"), ("result",).
_DECLARED: dict[tuple, tuple] = {}


def _declared(make, names) -> tuple:
    key = (make, tuple(names))
    found = _DECLARED.get(key)
    if found is None:
        found = _DECLARED[key] = make(*names)
    return found


def enum_attr(name, enum, default=None, *, optional=False, since=V13_1) -> AttrSpec:
    return AttrSpec(name, AttrKind.ENUM, enum=enum, default=default, optional=optional, since=since)


def unit(name, since=V13_1) -> AttrSpec:
    return AttrSpec(name, AttrKind.UNIT, default=False, since=since)


def attr(name, kind, *, optional=False, since=V13_1, default=None, width=64) -> AttrSpec:
    return AttrSpec(name, kind, optional=optional, since=since, default=default, width=width)


def _all_false(operands) -> tuple:
    return (False,) * len(operands.get("index") or ())


ROUNDING = enum_attr("rounding_mode", RoundingMode, RoundingMode.NEAREST_EVEN)
_IEEE_MODES = (RoundingMode.NEAREST_EVEN, RoundingMode.ZERO, RoundingMode.NEGATIVE_INF,
               RoundingMode.POSITIVE_INF)
# The rounding modes a float op takes (NVIDIA's verifier and its text parser list them in this
# order), and the ops whose custom form refuses the others already while parsing.
ROUNDING_MODES_TAKEN = {
    "addf": _IEEE_MODES, "subf": _IEEE_MODES, "mulf": _IEEE_MODES, "fma": _IEEE_MODES,
    "divf": _IEEE_MODES + (RoundingMode.APPROX, RoundingMode.FULL),
    "sqrt": _IEEE_MODES + (RoundingMode.APPROX,),
    "exp": (RoundingMode.APPROX, RoundingMode.FULL),
    "tanh": (RoundingMode.APPROX, RoundingMode.FULL),
}
ROUNDING_CHECKED_WHEN_PARSED = ("addf", "subf", "mulf", "fma")
# Ops whose memory ordering and scope NVIDIA reads with a parser of its own (its errors differ).
OWN_MEMORY_ATTRIBUTE_PARSER = ("load_view_tko", "store_view_tko")
# cuTile reads an item out of a tile with these two ops in a row; its writer registers the
# item's scalar type before the 1x…x1 type of the first.
ITEM_READ = ("extract", "reshape")
FTZ = unit("flush_to_zero")
OVERFLOW = enum_attr("overflow", IntegerOverflow, IntegerOverflow.NONE)
SIGNEDNESS = enum_attr("signedness", Signedness, Signedness.SIGNED)
ORDERING = enum_attr("memory_ordering_semantics", MemoryOrderingSemantics)
SCOPE = enum_attr("memory_scope", MemoryScope)
OPT_SCOPE = enum_attr("memory_scope", MemoryScope, optional=True)
OPT_HINTS = attr("optimization_hints", AttrKind.HINTS, optional=True)
RESULT_TOKEN = ResultSpec("result_token")


def _op(mnemonic, opcode, operands=(), results=("result",), attrs=(), *, since=V13_1,
        regions=0, segmented=False, terminator=False, summary="", **extra) -> OpSpec:
    effects = _EFFECTS.get(mnemonic)
    if effects is not None:  # declared below, by name, rather than in every op's entry
        extra["effects"] = effects
    return OpSpec(mnemonic=mnemonic, opcode=opcode, since=since,
                  operands=_declared(_operands, operands),
                  results=_declared(_results, results), attrs=tuple(attrs),
                  regions=regions, segmented=segmented, terminator=terminator, summary=summary,
                  **extra)


# Text syntax building blocks (grammar: tilebc/text/syntax.py). Spacing follows MLIR's declarative
# assembly format, which is how NVIDIA's tileirdisasm prints: an element that prints nothing still
# leaves its leading space (hence `addf %a, %b  : …` where the default rounding mode is elided).
ROUND = "custom<Rounding>($rounding_mode)"
FTZ_KW = "(`flush_to_zero` $flush_to_zero^)?"
OVERFLOW_KW = "(`overflow` `` `<` $overflow^ `>`)?"
TOKEN_EQ = "(`token` `` `=` `` $token^)?"
TOKEN_SPACED = "(`token` `=` $token^)?"
HINTS_EQ = "(`optimization_hints` `=` $optimization_hints^)?"
INBOUNDS = "(`inbounds` `=` $inbounds^)?"
UNARY = "$source attr-dict `:` type($result)"
CAST = "$source attr-dict `:` type($source) `->` type($result)"
VALUES = "attr-dict ($operands^ `:` type($operands))?"


def _elementwise(elements, first: str) -> dict:
    """Family fields of an element-wise op (None: not element-wise); its result has the type of its
    first operand (and of every other), and it touches no memory."""
    if elements is None:
        return {}
    return dict(family=Family.ELEMENTWISE, elements=elements, result_like=first,
                effects=Effects.NONE)


def _unary(mnemonic, opcode, elements, summary, attrs=(), since=V13_1, syntax=UNARY,
           **extra) -> OpSpec:
    """One-operand op; with an element class, element-wise (`$source : type`)."""
    return _op(mnemonic, opcode, ("source",), attrs=attrs, since=since, summary=summary,
               syntax=syntax, **_elementwise(elements, "source"), **extra)


def _binary(mnemonic, opcode, elements, summary, attrs=(), names=("lhs", "rhs"), since=V13_1,
            middle="", commutative=False) -> OpSpec:
    """`$lhs, $rhs <middle> : type`: the shape of every element-wise binary op."""
    syntax = f"${names[0]} `,` ${names[1]} {middle} attr-dict `:` type($result)"
    return _op(mnemonic, opcode, names, attrs=attrs, since=since, summary=summary, syntax=syntax,
               commutative=commutative, **_elementwise(elements, names[0]))


def _terminator(mnemonic, opcode, summary, exit, ends, through_if=False) -> OpSpec:
    """Ends a region of one of the `ends` ops (`through_if`: also an `if` region inside one),
    sending control to `exit`."""
    return _op(mnemonic, opcode, ("operands*",), (), terminator=True, summary=summary,
               syntax=VALUES, exit=exit, ends=ends, through_if=through_if)


# Memory effects (cuda-tile Ops.td: Pure / NoMemoryEffect, RecursiveMemoryEffects; the ops newer
# than that file checked inside a reduce body with tileirdisasm 13.5). Element-wise and comparison
# ops are effect-free by their family (below); ops not named here read or write memory
# (Effects.MEMORY): loads, stores, fences, multimem and grid-dependency ops.
_EFFECT_FREE = frozenset("""
    bitcast broadcast cat constant exti extract fpowi ftof ftoi get_global get_index_space_shape
    get_num_tile_blocks get_tensor_shape get_tile_block_id insert int_to_ptr iota itof join_tokens
    make_gather_scatter_view make_partition_view make_strided_view make_tensor_view make_token
    mmaf mmaf_scaled mmai offset pack permute ptr_to_int ptr_to_ptr reshape select trunci unpack
    yield""".split())
_EFFECTS = {
    **{name: Effects.NONE for name in _EFFECT_FREE},
    **{name: Effects.RECURSIVE for name in ("if", "for", "loop", "reduce", "scan")},
    # declare no effect trait, so count as having effects, but read and write nothing
    **{name: Effects.UNDECLARED for name in ("assume", "return", "break", "continue")},
    **{name: Effects.ATOMIC for name in ("atomic_rmw_tko", "atomic_cas_tko",
                                         "atomic_red_view_tko")},
    "print_tko": Effects.OUTPUT,
    "assert": Effects.TRAP,
    "alloca": Effects.ALLOC,
    "preview$call": Effects.CALL,
}

OPS: tuple[OpSpec, ...] = (
    _unary("absf", 0x00, Elements.FLOAT, "float absolute value"),
    _unary("absi", 0x01, Elements.INT, "integer absolute value"),
    _binary("addf", 0x02, Elements.FLOAT, "float addition", (ROUNDING, FTZ), middle=f"{ROUND} {FTZ_KW}", commutative=True),
    _binary("addi", 0x03, Elements.INT, "integer addition", (OVERFLOW,), middle=OVERFLOW_KW, commutative=True),
    _binary("andi", 0x04, Elements.INT, "bitwise and", commutative=True),
    _op("assert", 0x05, ("condition",), (), (attr("message", AttrKind.STRING),),
        syntax="$condition `,` $message attr-dict `:` type($condition)", summary="abort when any element of an i1 tile is false"),
    _op("assume", 0x06, ("value",), attrs=(attr("predicate", AttrKind.TAGGED),),
        syntax="custom<AssumePredicate>($predicate) `,` $value attr-dict `:` type($value)",
        asm_name="@assume", result_like="value", forwards="value", summary="attach a div_by / same_elements / bounded fact to a value"),
    _op("atomic_cas_tko", 0x07, ("pointers", "cmp", "val", "mask?", "token?"),
        ("result", RESULT_TOKEN), (ORDERING, SCOPE), segmented=True,
        syntax="$memory_ordering_semantics $memory_scope $pointers `,` $cmp `,` $val (`,` $mask^)? "
               f"{TOKEN_EQ} attr-dict `:` type($pointers) `,` type($val) (`,` type($mask)^)? "
               "`->` type($result) `,` type($result_token)",
        result_like="val", summary="atomic compare-and-swap through a pointer tile"),
    _op("atomic_rmw_tko", 0x08, ("pointers", "arg", "mask?", "token?"), ("result", RESULT_TOKEN),
        (ORDERING, SCOPE, enum_attr("mode", AtomicRMWMode)), segmented=True,
        syntax="$memory_ordering_semantics $memory_scope $pointers `,` $mode `,` $arg (`,` $mask^)? "
               f"{TOKEN_EQ} attr-dict `:` type($pointers) `,` type($arg) (`,` type($mask)^)? "
               "`->` type($result) `,` type($result_token)",
        result_like="arg", summary="atomic read-modify-write through a pointer tile"),
    _unary("bitcast", 0x09, None, "reinterpret bits as another type of the same width", syntax=CAST, maps_elements=True),
    _terminator("break", 0x0A, "leave a loop with its result values", Exit.LEAVE_LOOP,
                ("loop",), True),
    _unary("broadcast", 0x0B, None, "broadcast size-1 dimensions", syntax=CAST, asm_name="bcast"),
    _op("cat", 0x0C, ("lhs", "rhs"), attrs=(attr("dim", AttrKind.INT, width=64),),
        syntax="$lhs `,` $rhs `dim` `=` $dim attr-dict `:` type($lhs) `,` type($rhs) `->` "
               "type($result)", summary="concatenate two tiles along a dimension"),
    _unary("ceil", 0x0D, Elements.FLOAT, "round up to an integral value"),
    _op("cmpf", 0x0E, ("lhs", "rhs"),
        attrs=(enum_attr("comparison_predicate", ComparisonPredicate),
               enum_attr("comparison_ordering", ComparisonOrdering)),
        syntax="$comparison_predicate $comparison_ordering $lhs `,` $rhs attr-dict `:` type($lhs) "
               "`->` type($result)", family=Family.COMPARE, elements=Elements.FLOAT, effects=Effects.NONE,
        types_match=("lhs", "rhs"),
        summary="float comparison"),
    _op("cmpi", 0x0F, ("lhs", "rhs"),
        attrs=(enum_attr("comparison_predicate", ComparisonPredicate), SIGNEDNESS),
        syntax="$comparison_predicate $lhs `,` $rhs `,` $signedness attr-dict `:` type($lhs) "
               "`->` type($result)", family=Family.COMPARE, elements=Elements.INT, types_match=("lhs", "rhs"),
        effects=Effects.NONE, summary="integer comparison"),
    _op("constant", 0x10, (), attrs=(attr("value", AttrKind.DENSE),),
        syntax="custom<DenseConstant>($value) attr-dict", asm_name="@constant",
        summary="dense constant tile"),
    _terminator("continue", 0x11, "next loop iteration with new carried values", Exit.NEXT,
                ("for", "loop"), True),
    _unary("cos", 0x12, Elements.FLOAT, "cosine"),
    _unary("cosh", 0x13, Elements.FLOAT, "hyperbolic cosine"),
    _binary("divf", 0x14, Elements.FLOAT, "float division", (ROUNDING, FTZ), middle=f"{ROUND} {FTZ_KW}"),
    _binary("divi", 0x15, Elements.INT, "integer division",
            (SIGNEDNESS, enum_attr("rounding", RoundingMode, RoundingMode.ZERO)),
            middle="$signedness (`rounding` `` `<` $rounding^ `>`)?"),
    OpSpec("entry", 0x16, structural=True, regions=1, summary="kernel entry (function table record)",
           attrs=(attr("sym_name", AttrKind.SYMBOL), attr("function_type", AttrKind.TYPE),
                  attr("arg_attrs", AttrKind.ATTR_ARRAY, optional=True),
                  attr("res_attrs", AttrKind.ATTR_ARRAY, optional=True),
                  attr("optimization_hints", AttrKind.HINTS, optional=True))),
    _unary("exp", 0x17, Elements.FLOAT, "base-e exponential",
           (enum_attr("rounding_mode", RoundingMode, RoundingMode.FULL, since=V13_3),),
           syntax=f"$source {ROUND} attr-dict `:` type($result)"),
    _unary("exp2", 0x18, Elements.FLOAT, "base-2 exponential", (FTZ,),
           syntax=f"$source {FTZ_KW} attr-dict `:` type($result)"),
    _op("exti", 0x25, ("from",), ("to",), (SIGNEDNESS,),
        syntax="$from $signedness attr-dict `:` type($from) `->` type($to)",
        summary="integer extension", maps_elements=True),
    _op("extract", 0x26, ("source", "indices*"),
        syntax="$source `[` $indices `]` attr-dict `:` type($source) `->` type($result)", summary="extract a sub-tile at tile-sized indices"),
    _unary("floor", 0x27, Elements.FLOAT, "round down to an integral value"),
    _op("fma", 0x28, ("lhs", "rhs", "acc"), attrs=(ROUNDING, FTZ),
        syntax=f"$lhs `,` $rhs `,` $acc {ROUND} {FTZ_KW} attr-dict `:` type($result)",
        **_elementwise(Elements.FLOAT, "lhs"), summary="fused multiply-add"),
    _op("for", 0x29, ("lowerBound", "upperBound", "step", "initValues*"), ("results*",),
        (unit("unsignedCmp", since=V13_2),), regions=1,
        syntax="(`unsigned` $unsignedCmp^)? custom<BlockArg>(0, 0) `in` ` ` `(` $lowerBound `to` "
               "$upperBound `,` `step` $step `)` `:` type($lowerBound) (`iter_values` `(` "
               "custom<IterValues>(0, 1, $initValues) `)` `->` `(` type($initValues)^ `)`)? "
               "custom<Region>(0, continue) attr-dict",
        asm_name="for", asm_block_args="induction", result_like="initValues",
        summary="counted loop with carried values"),
    _op("ftof", 0x2A, ("from",), ("to",), (ROUNDING,),
        syntax=f"$from {ROUND} attr-dict `:` type($from) `->` type($to)",
        summary="float to float conversion", maps_elements=True),
    _op("ftoi", 0x2B, ("from",), ("to",),
        (SIGNEDNESS, enum_attr("rounding_mode", RoundingMode, RoundingMode.NEAREST_INT_TO_ZERO),
         unit("saturating", since=V13_4)),
        syntax=f"$from $signedness {ROUND} (`saturating` $saturating^)? attr-dict `:` type($from) "
               "`->` type($to)", summary="float to integer conversion", maps_elements=True),
    _op("get_global", 0x2C, (), attrs=(attr("name", AttrKind.SYMBOL),),
        syntax="$name attr-dict `:` type($result)", summary="pointer to a module global"),
    _op("get_index_space_shape", 0x2D, ("src",), ("results*",),
        syntax="$src `:` type($src) `->` custom<FirstType>($results)", summary="number of tiles of a view along each dimension"),
    _op("get_num_tile_blocks", 0x2E, (), ("gridSize_x", "gridSize_y", "gridSize_z"),
        syntax="attr-dict `:` type($gridSize_x)", summary="grid size"),
    _op("get_tensor_shape", 0x2F, ("src",), ("results*",),
        syntax="$src `:` type($src) `->` custom<FirstType>($results)", summary="dimensions of a tensor view"),
    _op("get_tile_block_id", 0x30, (), ("blockId_x", "blockId_y", "blockId_z"),
        syntax="attr-dict `:` type($blockId_x)", summary="coordinates of the running tile block"),
    OpSpec("global", 0x31, structural=True, summary="module global (global section record)",
           attrs=(attr("sym_name", AttrKind.SYMBOL), attr("value", AttrKind.DENSE),
                  attr("alignment", AttrKind.INT, default=0),
                  enum_attr("sym_visibility", SymbolVisibility, SymbolVisibility.PUBLIC, since=V13_3),
                  unit("constant", since=V13_3))),
    _op("if", 0x32, ("condition",), ("results*",), regions=2,
        syntax="$condition (`->` `(` type($results)^ `)`)? custom<Region>(0, yield) "
               "(`else` custom<Region>(1, yield)^)? attr-dict", asm_name="", exits_pass=True,
        else_optional=True, block_args=False,
        summary="two-way branch with results"),
    _unary("int_to_ptr", 0x33, None, "integers to pointers", syntax=CAST, maps_elements=True),
    _op("iota", 0x3A, (), syntax="attr-dict `:` type($result)", summary="0, 1, 2, … along a 1-d tile"),
    _op("itof", 0x3B, ("from",), ("to",), (SIGNEDNESS, ROUNDING),
        syntax=f"$from $signedness {ROUND} attr-dict `:` type($from) `->` type($to)", summary="integer to float conversion", maps_elements=True),
    _op("join_tokens", 0x3C, ("tokens*",), syntax="$tokens attr-dict `:` type($result)", summary="token that orders after all given tokens"),
    _op("load_ptr_tko", 0x3D, ("source", "mask?", "paddingValue?", "token?"), ("result", RESULT_TOKEN),
        (ORDERING, OPT_SCOPE, OPT_HINTS), segmented=True,
        syntax="$memory_ordering_semantics ($memory_scope^)? $source (`,` $mask^)? "
               f"(`,` $paddingValue^)? {TOKEN_EQ} {HINTS_EQ} attr-dict `:` type($source) "
               "(`,` type($mask)^)? (`,` type($paddingValue)^)? `->` type($result) `,` "
               "type($result_token)", summary="gather load through a pointer tile"),
    _op("load_view_tko", 0x3E, ("view", "index*", "token?"), ("tile", RESULT_TOKEN),
        (ORDERING, OPT_SCOPE, OPT_HINTS,
         attr("inbounds", AttrKind.BOOL_ARRAY, since=V13_4, default=_all_false)),
        segmented=True,
        syntax="$memory_ordering_semantics ($memory_scope^)? $view `[` $index `]` "
               f"{TOKEN_SPACED} {HINTS_EQ} {INBOUNDS} attr-dict `:` type($view) `` "
               "custom<IndexTypes>($index) `->` type($tile) `,` type($result_token)",
        summary="load one tile of a view"),
    _unary("log", 0x3F, Elements.FLOAT, "natural logarithm"),
    _unary("log2", 0x40, Elements.FLOAT, "base-2 logarithm"),
    _op("loop", 0x41, ("initValues*",), ("results*",), regions=1,
        syntax="custom<LoopSignature>(0, $initValues, $results) custom<Region>(0, continue) "
               "attr-dict", asm_name="", carried="initValues",
        summary="unbounded loop left by break"),
    _op("make_partition_view", 0x42, ("tensor_view",),
        (ResultSpec("result", parsed_kind="partition_view"),),
        syntax="$tensor_view attr-dict `:` type($result)", asm_name="pview", summary="tile a tensor view into a partition view"),
    _op("make_tensor_view", 0x43, ("base", "dynamicShape*", "dynamicStrides*"), segmented=True,
        syntax="$base `,` `shape` `=` `[` custom<MixedDims>($dynamicShape, shape) `]` `,` `strides` "
               "`=` `[` custom<MixedDims>($dynamicStrides, strides) `]` attr-dict `:` "
               "custom<TensorViewTypes>($base, $dynamicShape, $dynamicStrides)",
        asm_name="tview", summary="tensor view over global memory"),
    _op("make_token", 0x44, (), syntax="attr-dict `:` type($result)", summary="fresh memory-ordering token"),
    _binary("maxf", 0x45, Elements.FLOAT, "float maximum", (unit("propagate_nan"), FTZ),
            middle=f"{FTZ_KW} (`propagate_nan` $propagate_nan^)?", commutative=True),
    _binary("maxi", 0x46, Elements.INT, "integer maximum", (SIGNEDNESS,), middle="$signedness", commutative=True),
    _binary("minf", 0x47, Elements.FLOAT, "float minimum", (unit("propagate_nan"), FTZ),
            middle=f"{FTZ_KW} (`propagate_nan` $propagate_nan^)?", commutative=True),
    _binary("mini", 0x48, Elements.INT, "integer minimum", (SIGNEDNESS,), middle="$signedness", commutative=True),
    _op("mmaf", 0x49, ("lhs", "rhs", "acc"), attrs=(unit("fast_acc", since=V13_3),),
        syntax="$lhs `,` $rhs `,` $acc (`fast_acc` $fast_acc^)? attr-dict `:` type($lhs) `,` "
               "type($rhs) `,` type($acc)", result_like="acc", summary="float matrix multiply-accumulate"),
    _op("mmai", 0x4A, ("lhs", "rhs", "acc"),
        attrs=(enum_attr("signedness_lhs", Signedness), enum_attr("signedness_rhs", Signedness)),
        syntax="$lhs `,` $rhs `,` $acc $signedness_lhs $signedness_rhs attr-dict `:` type($lhs) "
               "`,` type($rhs) `,` type($acc)", result_like="acc", summary="integer matrix multiply-accumulate"),
    OpSpec("module", 0x4B, structural=True, regions=1, summary="the whole file",
           attrs=(attr("sym_name", AttrKind.SYMBOL),
                  attr("producer", AttrKind.STRING, optional=True, since=V13_3))),
    _binary("mulf", 0x4C, Elements.FLOAT, "float multiplication", (ROUNDING, FTZ), middle=f"{ROUND} {FTZ_KW}", commutative=True),
    _binary("mulhii", 0x4D, Elements.INT, "high half of an integer product", names=("x", "y")),
    _binary("muli", 0x4E, Elements.INT, "integer multiplication", (OVERFLOW,), middle=OVERFLOW_KW, commutative=True),
    _unary("negf", 0x4F, Elements.FLOAT, "float negation"),
    _unary("negi", 0x50, Elements.INT, "integer negation",
           (enum_attr("overflow", IntegerOverflow, IntegerOverflow.NONE, since=V13_2),),
           syntax=f"$source {OVERFLOW_KW} attr-dict `:` type($result)"),
    _op("offset", 0x51, ("ptr", "offset"),
        syntax="$ptr `,` $offset attr-dict `:` type($ptr) `,` type($offset) `->` type($result)",
        result_like="ptr", summary="advance pointers by element offsets", maps_elements=True),
    _binary("ori", 0x52, Elements.INT, "bitwise or", commutative=True),
    _unary("permute", 0x53, None, "permute tile dimensions", (attr("permutation", AttrKind.I32_ARRAY),),
           syntax="$source $permutation attr-dict `:` type($source) `->` type($result)"),
    _binary("fpowf", 0x54, Elements.FLOAT, "float power with a float exponent", names=("source", "exponent")),
    _op("print_tko", 0x55, ("args*", OperandSpec("token", Arity.OPTIONAL, V13_2)),
        (ResultSpec("result_token", since=V13_2, default_type="token"),),
        (attr("str", AttrKind.STRING),), segmented=True,
        syntax=f"$str (`,` $args^)? {TOKEN_EQ} attr-dict (`:` type($args)^)? `->` "
               "type($result_token)", summary="formatted print (13.1: print)"),
    _unary("ptr_to_int", 0x56, None, "pointers to i64", syntax=CAST, maps_elements=True),
    _unary("ptr_to_ptr", 0x57, None, "pointer cast", syntax=CAST, maps_elements=True),
    _op("reduce", 0x58, ("operands*",), ("results*",),
        (attr("dim", AttrKind.INT, width=32), attr("identities", AttrKind.ATTR_ARRAY)), regions=1,
        syntax="$operands attr-dict ` ` `dim` `` `=` `` $dim `identities` `` `=` `` $identities "
               "`:` type($operands) `->` type($results) custom<ArgumentRegion>(0)",
        asm_name="reduce", asm_block_args="pairs", combiner=True,
        summary="reduce tiles along a dimension with a combiner region"),
    _binary("remf", 0x59, Elements.FLOAT, "float remainder"),
    _binary("remi", 0x5A, Elements.INT, "integer remainder", (SIGNEDNESS,), middle="$signedness"),
    _unary("reshape", 0x5B, None, "reshape keeping element order", syntax=CAST, asm_name="reshape"),
    _terminator("return", 0x5C, "leave the entry", Exit.LEAVE_KERNEL, ("entry",), True),
    _unary("rsqrt", 0x5D, Elements.FLOAT, "reciprocal square root", (FTZ,),
           syntax=f"$source {FTZ_KW} attr-dict `:` type($result)"),
    _op("scan", 0x5E, ("operands*",), ("results*",),
        (attr("dim", AttrKind.INT, width=32), attr("reverse", AttrKind.BOOL, default=False),
         attr("identities", AttrKind.ATTR_ARRAY)), regions=1,
        syntax="$operands attr-dict ` ` `dim` `` `=` `` $dim `reverse` `` `=` `` $reverse "
               "`identities` `` `=` `` $identities `:` type($operands) `->` type($results) "
               "custom<ArgumentRegion>(0)", asm_name="", combiner=True,
        summary="inclusive scan along a dimension with a combiner region"),
    _op("select", 0x5F, ("cond", "val_if_true", "val_if_false"),
        syntax="$cond `,` $val_if_true `,` $val_if_false attr-dict `:` type($cond) `,` "
               "type($result)", result_like="val_if_true", summary="element-wise choice", maps_elements=True,
        types_match=("val_if_true", "val_if_false", "result")),
    _binary("shli", 0x60, Elements.INT, "shift left", (OVERFLOW,), middle=OVERFLOW_KW),
    _binary("shri", 0x61, Elements.INT, "shift right", (SIGNEDNESS,), middle="$signedness"),
    _unary("sin", 0x62, Elements.FLOAT, "sine"),
    _unary("sinh", 0x63, Elements.FLOAT, "hyperbolic sine"),
    _unary("sqrt", 0x64, Elements.FLOAT, "square root", (ROUNDING, FTZ),
           syntax=f"$source {ROUND} {FTZ_KW} attr-dict `:` type($result)"),
    _op("store_ptr_tko", 0x65, ("destination", "value", "mask?", "token?"), (RESULT_TOKEN,),
        (ORDERING, OPT_SCOPE, OPT_HINTS), segmented=True,
        syntax="$memory_ordering_semantics ($memory_scope^)? $destination `,` $value (`,` $mask^)? "
               f"{TOKEN_EQ} {HINTS_EQ} attr-dict `:` type($destination) `,` type($value) "
               "(`,` type($mask)^)? `->` type($result_token)",
        summary="scatter store through a pointer tile"),
    _op("store_view_tko", 0x66, ("tile", "view", "index*", "token?"), (RESULT_TOKEN,),
        (ORDERING, OPT_SCOPE, OPT_HINTS,
         attr("inbounds", AttrKind.BOOL_ARRAY, since=V13_4, default=_all_false)),
        segmented=True,
        syntax="$memory_ordering_semantics ($memory_scope^)? $tile `,` $view `[` $index `]` "
               f"{TOKEN_SPACED} {HINTS_EQ} {INBOUNDS} attr-dict `:` type($tile) `,` type($view) `` "
               "custom<IndexTypes>($index) `->` type($result_token)",
        summary="store one tile of a view"),
    _binary("subf", 0x67, Elements.FLOAT, "float subtraction", (ROUNDING, FTZ), middle=f"{ROUND} {FTZ_KW}"),
    _binary("subi", 0x68, Elements.INT, "integer subtraction", (OVERFLOW,), middle=OVERFLOW_KW),
    _unary("tan", 0x69, Elements.FLOAT, "tangent"),
    _unary("tanh", 0x6A, Elements.FLOAT, "hyperbolic tangent",
           (enum_attr("rounding_mode", RoundingMode, RoundingMode.FULL, since=V13_2),),
           syntax=f"$source {ROUND} attr-dict `:` type($result)"),
    _op("trunci", 0x6B, ("from",), ("to",), (OVERFLOW,),
        syntax=f"$from {OVERFLOW_KW} attr-dict `:` type($from) `->` type($to)",
        summary="integer truncation", maps_elements=True),
    _binary("xori", 0x6C, Elements.INT, "bitwise xor", commutative=True),
    _terminator("yield", 0x6D, "end an if branch or combiner region with values",
                Exit.VALUES, ("if", "reduce", "scan")),
    _binary("atan2", 0x6E, Elements.FLOAT, "two-argument arctangent", names=("x", "y"), since=V13_2),
    _unary("pack", 0x6F, None, "pack a rank-1 tile into i8 bytes", since=V13_3, syntax=CAST),
    _unary("unpack", 0x70, None, "unpack i8 bytes into a rank-1 tile", since=V13_3, syntax=CAST),
    _op("alloca", 0x71, (), attrs=(unit("global"), attr("num_elem", AttrKind.INT, width=64),
                                   attr("alignment", AttrKind.INT, width=64)),
        since=V13_3,
        syntax="`num_elem` `=` $num_elem `,` `alignment` `=` $alignment (`global` $global^)? "
               "attr-dict `:` type($result)", summary="scratch memory for the tile block"),
    _op("mmaf_scaled", 0x72, ("lhs", "rhs", "acc", "lhs_scale", "rhs_scale"), since=V13_3,
        syntax="$lhs `,` $rhs `,` $acc `,` $lhs_scale `,` $rhs_scale attr-dict `:` type($lhs) `,` "
               "type($rhs) `,` type($acc) `,` type($lhs_scale) `,` type($rhs_scale)", result_like="acc",
        summary="block-scaled float matrix multiply-accumulate"),
    _op("make_gather_scatter_view", 0x73, ("tensor_view",),
        (ResultSpec("result", parsed_kind="gather_scatter_view"),), since=V13_3,
        syntax="$tensor_view attr-dict `:` type($result)", asm_name="gsview", summary="view that gathers/scatters along one sparse dimension"),
    _op("make_strided_view", 0x74, ("tensor_view",),
        (ResultSpec("result", parsed_kind="strided_view"),), since=V13_3,
        syntax="$tensor_view attr-dict `:` type($result)", asm_name="sview", summary="view that steps tiles by traversal strides"),
    _op("atomic_red_view_tko", 0x75, ("view", "index*", "value", "token?"), (RESULT_TOKEN,),
        (ORDERING, SCOPE, enum_attr("mode", AtomicRMWMode),
         attr("inbounds", AttrKind.BOOL_ARRAY, since=V13_5, default=_all_false)),
        since=V13_3, segmented=True,
        syntax="$memory_ordering_semantics ($memory_scope^)? $view `[` $index `]` `,` $mode `,` "
               f"$value {TOKEN_SPACED} {INBOUNDS} attr-dict `:` type($value) `,` type($view) `` "
               "custom<IndexTypes>($index) `->` type($result_token)",
        summary="atomic reduction of a tile into a view"),
    _op("insert", 0x76, ("source", "destination", "indices*"), since=V13_4,
        syntax="$source `,` $destination `[` $indices `]` attr-dict `:` type($source) `,` "
               "type($destination)", result_like="destination", summary="insert a sub-tile at tile-sized indices"),
    _op("gdc_launch_dependents_tko", 0x77, ("token?",), (RESULT_TOKEN,), since=V13_4,
        segmented=True, syntax=f"{TOKEN_SPACED} attr-dict `->` type($result_token)", summary="let dependent grids launch (grid dependency control)"),
    _op("gdc_wait_tko", 0x78, ("token?",), (RESULT_TOKEN,), since=V13_4, segmented=True,
        syntax=f"{TOKEN_SPACED} attr-dict `->` type($result_token)", summary="wait for prerequisite grids (grid dependency control)"),
    _op("fpowi", 0x79, ("source", "exponent"), since=V13_4,
        syntax="$source `,` $exponent attr-dict `:` type($source) `,` type($exponent)",
        result_like="source",
        summary="float power with an integer exponent"),
    _op("memory_fence_alias_tko", 0x7A, ("token",), (RESULT_TOKEN,), since=V13_4,
        syntax="$token attr-dict", summary="order memory operations through aliasing views"),
    _op("multimem_load_reduce_view_tko", 0x7B, ("view", "index*", "token?"),
        ("reduced_values", RESULT_TOKEN),
        (ORDERING, OPT_SCOPE,
         enum_attr("reduction", MultimemReductionKind),
         attr("inbounds", AttrKind.BOOL_ARRAY, default=_all_false)),
        since=V13_5, segmented=True,
        syntax="$memory_ordering_semantics ($memory_scope^)? $view `[` $index `]` "
               f"{TOKEN_SPACED} custom<Inbounds>($inbounds) attr-dict-with-keyword($reduction=add) `:` "
               "type($view) `` custom<IndexTypes>($index) (`,` type($token)^)? `->` "
               "type($reduced_values) `,` type($result_token)",
        summary="load-reduce across a multicast view"),
    _op("multimem_reduce_view_tko", 0x7C, ("view", "tile", "index*", "token?"), (RESULT_TOKEN,),
        (ORDERING, SCOPE,
         enum_attr("reduction", MultimemReductionKind),
         attr("inbounds", AttrKind.BOOL_ARRAY, default=_all_false)),
        since=V13_5, segmented=True,
        syntax="$memory_ordering_semantics ($memory_scope^)? $view `,` $tile `[` $index `]` "
               f"{TOKEN_SPACED} custom<Inbounds>($inbounds) attr-dict-with-keyword($reduction=add) `:` "
               "type($view) `,` type($tile) `` custom<IndexTypes>($index) (`,` type($token)^)? "
               "`->` type($result_token)", summary="reduce a tile into a multicast view"),
    _op("multimem_store_view_tko", 0x7D, ("view", "tile", "index*", "token?"), (RESULT_TOKEN,),
        (ORDERING, OPT_SCOPE, attr("inbounds", AttrKind.BOOL_ARRAY, default=_all_false)),
        since=V13_5, segmented=True,
        syntax="$memory_ordering_semantics ($memory_scope^)? $view `,` $tile `[` $index `]` "
               f"{TOKEN_SPACED} custom<Inbounds>($inbounds) attr-dict `:` type($view) `,` "
               "type($tile) `` custom<IndexTypes>($index) (`,` type($token)^)? `->` "
               "type($result_token)", summary="store a tile to a multicast view"),
    _op("preview$call", 0x4002, ("operands*",), ("results*",),
        (attr("callee", AttrKind.STRING), attr("const_args", AttrKind.ATTR_ARRAY),
         attr("arg_attrs", AttrKind.ATTR_ARRAY, optional=True),
         attr("res_attrs", AttrKind.ATTR_ARRAY, optional=True)),
        since=V13_5, preview=True,
        syntax="custom<CallSignature>($callee, $operands, $arg_attrs, $const_args, $res_attrs, "
               "$results)", summary="call a foreign function (public preview)"),
)


OPS_BY_OPCODE: dict[int, OpSpec] = {spec.opcode: spec for spec in OPS}
OPS_BY_MNEMONIC: dict[str, OpSpec] = {spec.mnemonic: spec for spec in OPS}
BODY_OPS = tuple(spec for spec in OPS if not spec.structural and not spec.preview)
PUBLIC_OPS = tuple(spec for spec in OPS if not spec.preview)
# The structural ops, which the IR holds as Module, Function and Global rather than as Op.
MODULE_OP, ENTRY_OP, GLOBAL_OP = (OPS_BY_MNEMONIC[name] for name in ("module", "entry", "global"))
# Names older tools and sources use for the same opcodes.
MNEMONIC_ALIASES = {"pow": "fpowf", "print": "print_tko"}


def by_mnemonic(registry: dict[str, T], what: str) -> dict[str, T]:
    """`registry` (per-op entries keyed by mnemonic) after checking every key is an op of the table:
    the one way, besides the registration decorators, that code outside this file names ops."""
    unknown = sorted(set(registry) - set(OPS_BY_MNEMONIC))
    if unknown:
        raise RuntimeError(f"{what}: entries for ops the op table does not have: {unknown}")
    return registry


def closing_terminator(region_op: str) -> OpSpec:
    """The terminator that closes a region of `region_op` when its body simply ends: the one that
    ends it directly and carries on (values back to the op, the loop's next iteration, the end of
    the kernel), never an early exit such as break."""
    for spec in OPS:
        if region_op in spec.ends and spec.exit is not Exit.LEAVE_LOOP:
            return spec
    raise KeyError(f"{region_op!r} has no region that a terminator closes")


@functools.lru_cache(maxsize=None)  # asked once per decoded module: a fuzz pass decodes 20,000
def max_public_opcode(version: Version) -> int:
    """Opcodes are assigned in version order, so each version admits opcodes up to a maximum."""
    return max(spec.opcode for spec in PUBLIC_OPS if spec.since <= version)


def _check_table() -> None:
    if len(OPS_BY_OPCODE) != len(OPS) or len(OPS_BY_MNEMONIC) != len(OPS):
        raise RuntimeError("the op table has a duplicate opcode or mnemonic")
    unknown = set(_EFFECTS) - set(OPS_BY_MNEMONIC)
    if unknown:
        raise RuntimeError(f"effects declared for ops not in the table: {sorted(unknown)}")
    twice = sorted(name for name in _EFFECTS if OPS_BY_MNEMONIC[name].family is not Family.OTHER)
    if twice:
        raise RuntimeError(f"effects of family ops are the family's: {twice}")
    unset = sorted(name for name, effects in _EFFECTS.items()
                   if OPS_BY_MNEMONIC[name].effects is not effects)
    if unset:  # an entry built without _op
        raise RuntimeError(f"effects declared but not applied: {unset}")
    for spec in OPS:
        wrong = [name for name in spec.ends if name != "entry" and
                 not OPS_BY_MNEMONIC.get(name, spec).regions]
        if wrong or (spec.ends and not spec.terminator):
            raise RuntimeError(f"{spec.mnemonic} ends regions of ops without regions: {wrong}")
        if spec.terminator != (spec.exit is not None):
            raise RuntimeError(f"{spec.mnemonic}: a terminator, and only one, says where it exits")
        if spec.through_if and not any(s.exits_pass for s in OPS):
            raise RuntimeError(f"{spec.mnemonic} leaves through an op no entry lets exits pass")
        if spec.family is not Family.OTHER and spec.elements is None:
            raise RuntimeError(f"{spec.mnemonic}: an element-wise family op needs an element class")


_check_table()
