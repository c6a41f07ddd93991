"""Building blocks for per-op typing constraints.

A constraint is a function `(ctx, op) -> bool`: it reports through `ctx.report(...)` and returns
False once the op is known to be ill-typed, so later constraints of the same op can assume what the
earlier ones checked (kinds first, then shapes, then attribute values).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from ..ir.types import (ELEMENT_TYPES, ElementType, GatherScatterViewType, PartitionViewType,
                        PointerType, StridedViewType, TensorViewType, TileType, TokenType, i1)
from ..ops.spec import Arity
from ..ops.table import OPS

Constraint = Callable[["object", "object"], bool]

# Element-type families, named as in NVIDIA's op definitions.
INT = frozenset(ELEMENT_TYPES[n] for n in ("i1", "i8", "i16", "i32", "i64"))
INT_OR_I4 = INT | {ELEMENT_TYPES["i4"]}  # only conversions and pack/unpack accept i4
BASE_FLOAT = frozenset(ELEMENT_TYPES[n] for n in ("f16", "bf16", "f32", "f64"))
FLOAT = frozenset(t for t in ELEMENT_TYPES.values() if t.is_float)
NUMBER = INT | FLOAT
ANY_ELEMENT = frozenset(ELEMENT_TYPES.values())
F32 = ELEMENT_TYPES["f32"]

_FAMILY_NAMES = {INT: "integer", INT_OR_I4: "integer", BASE_FLOAT: "f16, bf16, f32 or f64",
                 FLOAT: "float", NUMBER: "number", ANY_ELEMENT: "element"}

# Where each declared result sits in `op.results`, per op (variadic results come last).
_RESULT_SLOTS: dict[str, dict[str, int]] = {
    spec.mnemonic: {r.name: i for i, r in enumerate(spec.results)} for spec in OPS}


def family_name(elements: frozenset) -> str:
    if elements in _FAMILY_NAMES:
        return _FAMILY_NAMES[elements]
    return ", ".join(sorted(str(e) for e in elements))


def values(op, name: str) -> list:
    """The values an operand group or a result name stands for (empty when absent)."""
    if name in op.operands:
        group = op.operands[name]
        if group is None:
            return []
        return list(group) if isinstance(group, tuple) else [group]
    slots = _RESULT_SLOTS.get(op.spec.mnemonic)
    if slots is None:  # an op added to the table after this module loaded
        slots = {r.name: i for i, r in enumerate(op.spec.results)}
    slot = slots.get(name)
    if slot is None:
        raise KeyError(f"{op.spec.mnemonic} has no operand or result {name!r}")
    if op.spec.results[slot].variadic:
        return op.results[slot:]
    return op.results[slot:slot + 1]


def value(op, name: str):
    found = values(op, name)
    return found[0] if found else None


def role(op, name: str) -> str:
    kind = "operand" if name in op.operands else "result"
    return f"{kind} '{name}'"


# The order in which NVIDIA's op definitions list element types in their messages.
_ODS_ORDER = ("i1", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64", "tf32", "f8E4M3FN",
              "f8E5M2", "f8E8M0FNU", "f4E2M1FN", "i4", "fnv8E5M3FNU")


def _is_variadic(op, name: str) -> bool:
    for spec in op.spec.operands:
        if spec.name == name:
            return spec.arity is Arity.VARIADIC
    return any(r.name == name and r.variadic for r in op.spec.results)


def ods_tile_desc(op, name: str, elements: frozenset, rank: int | None) -> str:
    """A tile constraint as MLIR's generated verifier words it: `0D tile of i1 or i8 values`."""
    names = " or ".join(n for n in _ODS_ORDER if ELEMENT_TYPES[n] in elements)
    desc = f"{'' if rank is None else f'{rank}D '}tile of {names} values"
    return f"variadic of {desc}" if _is_variadic(op, name) else desc


def ods_type_error(op, name: str, v, desc: str, detail: str) -> str:
    """MLIR's generated message for a value of the wrong type (`'cuda_tile.addf' op operand #0
    must be …, but got '!cuda_tile.tile<i32>'`), then ours in parentheses."""
    if name in op.operands:
        kind, index = "operand", next(i for i, x in enumerate(op.operand_values) if x is v)
    else:
        kind, index = "result", v.index
    # builtin types (a bare i32) print without the dialect prefix
    shown = v.type if isinstance(v.type, ElementType) else f"!cuda_tile.{v.type}"
    return (f"'cuda_tile.{op.name}' op {kind} #{index} must be {desc}, but got '{shown}' "
            f"({detail})")


def tile_desc(elements: frozenset | None, rank: int | None) -> str:
    shape = "a scalar tile" if rank == 0 else f"a rank-{rank} tile" if rank else "a tile"
    return f"{shape} of {family_name(elements)}" if elements else shape


# ---- kinds -----------------------------------------------------------------------------------

def tile_of(*names: str, elements: frozenset | None = None, rank: int | None = None,
            rule: str = "type.operand") -> Constraint:
    """Each named operand/result is a tile (of the given element family and rank)."""
    wanted = tile_desc(elements, rank)

    def check(ctx, op) -> bool:
        for name in names:
            for v in values(op, name):
                t = v.type
                if (not isinstance(t, TileType) or (elements is not None and t.element not in elements)
                        or (rank is not None and t.rank != rank)):
                    message = f"{role(op, name)} must be {wanted}, got {t}"
                    if elements is not None:
                        message = ods_type_error(op, name, v, ods_tile_desc(op, name, elements,
                                                                            rank), role(op, name))
                    return ctx.report(rule, op, message)
        return True
    return check


def pointer_tile(*names: str, rank: int | None = None) -> Constraint:
    wanted = "a scalar tile of pointers" if rank == 0 else "a tile of pointers"

    def check(ctx, op) -> bool:
        for name in names:
            for v in values(op, name):
                t = v.type
                if (not isinstance(t, TileType) or not isinstance(t.element, PointerType)
                        or (rank is not None and t.rank != rank)):
                    ods = f"{'' if rank is None else f'{rank}D '}tile of Pointer type values"
                    return ctx.report("type.operand", op, ods_type_error(
                        op, name, v, ods, f"{role(op, name)} must be {wanted}, got {t}"))
        return True
    return check


def of_kind(*names: str, kind, what: str, ods: str | None = None,
            parsed: str | None = None) -> Constraint:
    """`ods`: the constraint as NVIDIA's generated verifier names it; `parsed`: what NVIDIA's
    custom parser of the op says it expected, when it checks the type while parsing."""
    def check(ctx, op) -> bool:
        for name in names:
            for v in values(op, name):
                if not isinstance(v.type, kind):
                    message = f"{role(op, name)} must be {what}, got {v.type}"
                    if parsed and op.text_pos is not None and not getattr(op, "generic_form",
                                                                          False):
                        message = (f"'cuda_tile.{op.name}' expected {parsed}, got "
                                   f"'!cuda_tile.{v.type}' ({role(op, name)})")
                    elif ods:
                        message = ods_type_error(op, name, v, ods, role(op, name))
                    return ctx.report("type.operand", op, message)
        return True
    return check


def token(*names: str) -> Constraint:
    return of_kind(*names, kind=TokenType, what="a token", ods="cuda tile token type")


def tensor_view(*names: str, parsed: bool = False) -> Constraint:
    """`parsed`: the op's custom form checks the type while parsing (NVIDIA's words differ)."""
    return of_kind(*names, kind=TensorViewType, what="a tensor_view",
                   parsed="tensor_view" if parsed else None)


VIEW_KINDS = (PartitionViewType, StridedViewType, GatherScatterViewType)


def tile_view(*names: str) -> Constraint:
    return of_kind(*names, kind=VIEW_KINDS,
                   what="a partition_view, strided_view or gather_scatter_view",
                   ods="TileView instance")


# ---- agreement between values ------------------------------------------------------------------

def _all_of(op, names, what: str, detail: str) -> str:
    """MLIR's generated message for an all-of-these-agree constraint, then ours in parentheses."""
    return (f"'cuda_tile.{op.name}' op failed to verify that all of {{{', '.join(names)}}} have "
            f"{what} ({detail})")


def same_type(*names: str) -> Constraint:
    def check(ctx, op) -> bool:
        first = value(op, names[0])
        for name in names[1:]:
            for v in values(op, name):
                if v.type != first.type:
                    return ctx.report("type.mismatch", op, _all_of(
                        op, names, "same type", f"{role(op, name)} type {v.type} does not match "
                                                f"{role(op, names[0])} type {first.type}"))
        return True
    return check


def same_shape(*names: str) -> Constraint:
    def check(ctx, op) -> bool:
        first = value(op, names[0])
        for name in names[1:]:
            for v in values(op, name):
                if v.type.shape != first.type.shape:
                    return ctx.report("shape.mismatch", op, _all_of(
                        op, names, "same shape", f"{role(op, name)} shape {_shape(v.type)} does "
                                                 f"not match {role(op, names[0])} shape "
                                                 f"{_shape(first.type)}"))
        return True
    return check


def same_element(*names: str) -> Constraint:
    def check(ctx, op) -> bool:
        first = value(op, names[0])
        for name in names[1:]:
            for v in values(op, name):
                if v.type.element != first.type.element:
                    return ctx.report("type.element_mismatch", op, _all_of(
                        op, names, "the same element type",
                        f"{role(op, name)} element type {v.type.element} does not match "
                        f"{role(op, names[0])} element type {first.type.element}"))
        return True
    return check


def same_rank(*names: str) -> Constraint:
    def check(ctx, op) -> bool:
        first = value(op, names[0])
        for name in names[1:]:
            for v in values(op, name):
                if v.type.rank != first.type.rank:
                    return ctx.report("shape.rank", op, _all_of(
                        op, names, "same rank", f"{role(op, name)} rank {v.type.rank} does not "
                                                f"match {role(op, names[0])} rank "
                                                f"{first.type.rank}"))
        return True
    return check


def i1_like(result: str, operand: str) -> Constraint:
    """`result` is an i1 tile of `operand`'s shape (comparisons)."""
    def check(ctx, op) -> bool:
        expected = TileType(value(op, operand).type.shape, i1)
        v = value(op, result)
        got = v.type
        if got != expected:
            detail = f"{role(op, result)} must be {expected}, got {got}"
            # NVIDIA checks the result's own type constraint first, then the shared trait
            if not isinstance(got, TileType) or got.element != i1:
                return ctx.report("type.mismatch", op, ods_type_error(
                    op, result, v, "tile of i1 values", detail))
            return ctx.report("type.mismatch", op, f"'cuda_tile.{op.name}' op failed to verify "
                              f"that Result type has i1 element type and same shape as operands "
                              f"({detail})")
        return True
    return check


def _shape(t) -> str:
    return "x".join(map(str, t.shape)) if t.shape else "scalar"


def shape_text(t) -> str:
    return _shape(t)


# ---- attribute values --------------------------------------------------------------------------

def attr_in(name: str, allowed: Iterable, *, rule: str = "attr.value",
            when: Callable | None = None, severity: str = "error") -> Constraint:
    """Attribute `name` is one of `allowed` (enum members). `when(op)` limits the check."""
    allowed = tuple(allowed)
    listing = ", ".join(a.keyword for a in allowed)

    def check(ctx, op) -> bool:
        got = op.attrs.get(name)
        if got is None or got in allowed or (when is not None and not when(op)):
            return True
        ours = f"{name} {got.keyword} is not allowed here; expected one of {listing}"
        prefix = f"'cuda_tile.{op.name}' op "
        if rule == "attr.rounding" and len(allowed) > 1:
            # NVIDIA's op verifiers list the modes they take, in this order
            ours = (f"{prefix}invalid rounding mode specified, expect one of "
                    f"[{listing}] ({ours})")
        elif rule == "divi.unsigned_floor":
            ours = (f"{prefix}rounding mode '{got.keyword}' is not allowed with 'unsigned' flag "
                    f"({ours})")
        ctx.report(rule, op, ours, severity)
        return severity != "error"
    return check


def flag_needs_f32(flag: str, *, result: str = "result") -> Constraint:
    """A unit attribute (flush_to_zero) that only f32 supports."""
    def check(ctx, op) -> bool:
        element = value(op, result).type.element
        if op.attrs.get(flag) and element != F32:
            return ctx.report("attr.f32_only", op, f"'cuda_tile.{op.name}' op {flag} modifier "
                                                   f"only supported for f32 data type, but got: "
                                                   f"'{element}' ({flag} is only supported for "
                                                   f"f32, got {element})")
        return True
    return check


def mode_needs_f32(name: str, modes: Iterable, *, result: str = "result") -> Constraint:
    """Rounding modes (approx, full) that only f32 supports."""
    modes = tuple(modes)

    def check(ctx, op) -> bool:
        got = op.attrs.get(name)
        element = value(op, result).type.element
        if got in modes and element != F32:
            return ctx.report("attr.f32_only", op, f"'cuda_tile.{op.name}' op {got.keyword} "
                                                   f"modifier only supported for f32 data type, "
                                                   f"but got: '{element}' ({name} {got.keyword} "
                                                   f"is only supported for f32, got {element})")
        return True
    return check


def no_extra(reason: str) -> Constraint:
    """Explicit 'nothing more to check here' entry, with the reason it is enough."""
    def check(ctx, op) -> bool:
        return True
    check.reason = reason
    return check


def context_tail(context: Constraint):
    """Mark a constraint whose last part reads more than the op's own types and attributes
    (defining ops, regions); `context` is that part alone: on an op whose first part passes, it
    reports and returns exactly what the whole constraint does. The first part's verdicts are then
    reused across ops like any other (structure.py), and `context` is run on every op."""
    def mark(check: Constraint) -> Constraint:
        check.context = context
        return check
    return mark


def element_bits(element: ElementType) -> int:
    return 32 if element.name == "tf32" else element.bits
