"""Typing constraints of every body op, keyed by mnemonic (the op table stays the single list of ops).

Each entry is a tuple of constraints run in order; the first failure ends the op's checks. Kinds come
first, so later constraints may rely on them. Element-wise and comparison ops get theirs from their
family in the op table (`family_constraints`); `EXTRA` adds what an op checks beyond its family.
Terminators and region nesting are checked by `structure.py`; their entries say so explicitly.
"""
from __future__ import annotations


from ..ir.types import ELEMENT_TYPES, i1
from ..ops.enums import (IntegerOverflow, MemoryOrderingSemantics as Order, RoundingMode as RM)
from ..ops.spec import Elements, Family, OpSpec
from ..ops.table import BODY_OPS, OPS_BY_MNEMONIC, ROUNDING_MODES_TAKEN as TAKEN, by_mnemonic
from . import opchecks as oc
from .constraints import (BASE_FLOAT, FLOAT, INT, INT_OR_I4, NUMBER, Constraint, attr_in,
                          flag_needs_f32, i1_like, mode_needs_f32, no_extra, pointer_tile,
                          same_element, same_rank, same_shape, same_type, tensor_view, tile_of,
                          tile_view, token)

i8, i32, i64 = ELEMENT_TYPES["i8"], ELEMENT_TYPES["i32"], ELEMENT_TYPES["i64"]
f32 = ELEMENT_TYPES["f32"]
f8e8m0 = ELEMENT_TYPES["f8E8M0FNU"]

I1 = frozenset({i1})
I8 = frozenset({i8})
I32 = frozenset({i32})
I64 = frozenset({i64})
MMAF_INPUTS = frozenset(oc.MMAF_TYPES)
MMAF_ACC = frozenset({ELEMENT_TYPES[n] for n in ("f16", "f32", "f64")})
SCALED_INPUTS = frozenset({ELEMENT_TYPES[n] for n in ("f8E4M3FN", "f8E5M2", "f4E2M1FN")})
SCALES = frozenset({ELEMENT_TYPES["f8E4M3FN"], f8e8m0})
UNPACKED = NUMBER | INT_OR_I4


ELEMENT_CLASSES = {Elements.FLOAT: BASE_FLOAT, Elements.INT: INT}


def family_constraints(spec: OpSpec) -> tuple[Constraint, ...]:
    """The typing rule of the op's family (spec.py `Family`); the builder infers result types from
    the same declaration (`result_like`)."""
    names = tuple(o.name for o in spec.operands)
    elements = ELEMENT_CLASSES.get(spec.elements)
    if spec.family is Family.ELEMENTWISE:
        return (tile_of(*names, "result", elements=elements), same_type(*names, "result"))
    if spec.family is Family.COMPARE:
        return (tile_of(*names, elements=elements), same_type(*names),
                i1_like("result", names[0]))
    return ()


def terminator(spec: OpSpec) -> tuple[Constraint, ...]:
    parents = ", ".join(spec.ends + (("through if",) if spec.through_if else ()))
    return (no_extra(f"terminator: parent ({parents}) and operand types are checked by "
                     f"structure.py"),)


def rounding_taken() -> Constraint:
    """The rounding modes the op takes (the op table's ROUNDING_MODES_TAKEN)."""
    checks = {}

    def check(ctx, op) -> bool:
        name = op.spec.mnemonic
        if name not in checks:
            checks[name] = attr_in("rounding_mode", TAKEN[name], rule="attr.rounding")
        return checks[name](ctx, op)
    return check


def ieee_arith() -> tuple[Constraint, ...]:
    return (rounding_taken(), flag_needs_f32("flush_to_zero"))


LOAD_ORDER = oc.ordering(oc.LOAD_ORDERS, scoped_optional=True)
STORE_ORDER = oc.ordering(oc.STORE_ORDERS, scoped_optional=True)

# What element-wise and comparison ops check beyond their family's rule.
EXTRA: dict[str, tuple[Constraint, ...]] = by_mnemonic({
    "addf": ieee_arith(),
    "subf": ieee_arith(),
    "mulf": ieee_arith(),
    "fma": ieee_arith(),
    # NVIDIA checks flush_to_zero before approx/full (its shared div/sqrt modifier check)
    "divf": (rounding_taken(),
             flag_needs_f32("flush_to_zero"),
             mode_needs_f32("rounding_mode", (RM.APPROX, RM.FULL))),
    "maxf": (flag_needs_f32("flush_to_zero"),),
    "minf": (flag_needs_f32("flush_to_zero"),),
    "exp": (rounding_taken(),
            mode_needs_f32("rounding_mode", (RM.APPROX,))),
    "tanh": (rounding_taken(),
             mode_needs_f32("rounding_mode", (RM.APPROX,))),
    "exp2": (flag_needs_f32("flush_to_zero"),),
    "rsqrt": (flag_needs_f32("flush_to_zero"),),
    "sqrt": (rounding_taken(),
             flag_needs_f32("flush_to_zero"), mode_needs_f32("rounding_mode", (RM.APPROX,))),
    # Unsigned floor division must be written rounding<zero> (the same result): NVIDIA's verifier,
    # run by tileiras on load, rejects unsigned rounding<negative_inf>.
    "divi": (attr_in("rounding", (RM.ZERO, RM.NEGATIVE_INF, RM.POSITIVE_INF), rule="attr.rounding"),
             attr_in("rounding", (RM.ZERO, RM.POSITIVE_INF), rule="divi.unsigned_floor",
                     when=oc.signedness_unsigned)),
    # negation has signed semantics: no_unsigned_wrap alone is meaningless (tileiras rejects it;
    # it accepts none, no_signed_wrap and no_wrap)
    "negi": (attr_in("overflow", (IntegerOverflow.NONE, IntegerOverflow.NO_SIGNED_WRAP,
                                  IntegerOverflow.NO_WRAP), rule="attr.overflow"),),
}, "verifier typing extras")

_OTHER: dict[str, tuple[Constraint, ...]] = by_mnemonic({
    # ---- float arithmetic beyond the element-wise family
    "fpowi": (tile_of("source", "result", elements=BASE_FLOAT), same_type("source", "result"),
              tile_of("exponent", elements=INT), same_shape("source", "exponent")),
    # ---- conversions
    "bitcast": (tile_of("source", "result", elements=NUMBER), same_shape("source", "result"),
                oc.bitcast),
    "exti": (tile_of("from", "to", elements=INT_OR_I4), same_shape("from", "to"),
             oc.int_width(grow=True)),
    "trunci": (tile_of("from", "to", elements=INT_OR_I4), same_shape("from", "to"),
               oc.int_width(grow=False)),
    "ftof": (tile_of("from", "to", elements=FLOAT), same_shape("from", "to"), oc.ftof),
    "ftoi": (tile_of("from", elements=FLOAT), tile_of("to", elements=INT), same_shape("from", "to"),
             attr_in("rounding_mode", (RM.NEAREST_INT_TO_ZERO,), rule="attr.rounding")),
    "itof": (tile_of("from", elements=INT), tile_of("to", elements=FLOAT), same_shape("from", "to"),
             oc.itof_target, attr_in("rounding_mode", (RM.NEAREST_EVEN,), rule="attr.rounding")),
    "int_to_ptr": (tile_of("source", elements=I64), pointer_tile("result"),
                   oc.pointer_cast("source", "result")),
    "ptr_to_int": (pointer_tile("source"), tile_of("result", elements=I64),
                   oc.pointer_cast("source", "result")),
    "ptr_to_ptr": (pointer_tile("source", "result"), oc.pointer_cast("source", "result")),
    "offset": (pointer_tile("ptr", "result"), tile_of("offset", elements=INT),
               same_type("ptr", "result"), same_shape("ptr", "offset")),
    # ---- tile construction and shape
    "constant": (tile_of("result", elements=NUMBER), oc.constant),
    "iota": (tile_of("result", elements=INT), oc.iota),  # the rank in NVIDIA's words
    "broadcast": (tile_of("source", "result"), same_element("source", "result"),
                  same_rank("source", "result"), oc.broadcast),
    "reshape": (tile_of("source", "result"), same_element("source", "result"), oc.reshape),
    "permute": (tile_of("source", "result"), same_element("source", "result"),
                same_rank("source", "result"), oc.permute),
    "cat": (tile_of("lhs", "rhs", "result"), same_element("lhs", "rhs", "result"),
            same_rank("lhs", "rhs", "result"), oc.cat),
    "extract": (tile_of("source", "result"), same_element("source", "result"),
                same_rank("source", "result"), oc.extract),
    "insert": (tile_of("source", "destination", "result"), same_type("destination", "result"),
               same_element("destination", "source"), same_rank("destination", "source"),
               oc.insert),
    "select": (tile_of("cond", elements=I1), tile_of("val_if_true", "val_if_false", "result"),
               same_type("val_if_true", "val_if_false", "result"),
               same_shape("cond", "val_if_true", "val_if_false", "result"), oc.not_f4("result")),
    "pack": (tile_of("source", elements=UNPACKED, rank=1), tile_of("result", elements=I8, rank=1),
             oc.pack_unpack),
    "unpack": (tile_of("source", elements=I8, rank=1), tile_of("result", elements=UNPACKED, rank=1),
               oc.pack_unpack),
    "assume": (same_type("value", "result"), oc.assume),
    # ---- matrix multiply
    "mmaf": (tile_of("lhs", "rhs", elements=MMAF_INPUTS), tile_of("acc", "result", elements=MMAF_ACC),
             same_element("lhs", "rhs"), same_type("acc", "result"), oc.mma_shapes, oc.mmaf_types),
    "mmai": (tile_of("lhs", "rhs", elements=I8), tile_of("acc", "result", elements=I32),
             same_type("acc", "result"), oc.mma_shapes),
    "mmaf_scaled": (tile_of("lhs", "rhs", elements=SCALED_INPUTS),
                    tile_of("lhs_scale", "rhs_scale", elements=SCALES),
                    tile_of("acc", "result", elements=frozenset({f32})),
                    same_element("lhs", "rhs"), same_element("lhs_scale", "rhs_scale"),
                    same_type("acc", "result"), oc.mma_shapes, oc.mmaf_scaled),
    # ---- grid and globals
    "get_tile_block_id": (tile_of("blockId_x", "blockId_y", "blockId_z", elements=I32, rank=0),),
    "get_num_tile_blocks": (tile_of("gridSize_x", "gridSize_y", "gridSize_z", elements=I32,
                                    rank=0),),
    "get_global": (pointer_tile("result", rank=0),
                   no_extra("the symbol and its pointee are checked by structure.py")),
    "alloca": (pointer_tile("result", rank=0), oc.alloca),
    # ---- views
    "make_tensor_view": (pointer_tile("base", rank=0), tile_of("dynamicShape", "dynamicStrides",
                                                               elements=INT, rank=0),
                         tensor_view("result"), oc.make_tensor_view),
    "make_partition_view": (tensor_view("tensor_view"), tile_view("result"), oc.make_subview),
    "make_strided_view": (tensor_view("tensor_view"), tile_view("result"), oc.make_subview),
    "make_gather_scatter_view": (tensor_view("tensor_view"), tile_view("result"),
                                 oc.make_subview),
    "get_tensor_shape": (tensor_view("src", parsed=True), tile_of("results", elements=INT, rank=0),
                         oc.get_tensor_shape),
    "get_index_space_shape": (tile_view("src"), tile_of("results", elements=INT, rank=0),
                              oc.get_index_space_shape),
    "load_view_tko": (tile_view("view"), tile_of("tile"), token("token", "result_token"),
                      oc.view_access("tile"), LOAD_ORDER),
    "store_view_tko": (tile_view("view"), tile_of("tile"), token("token", "result_token"),
                       oc.view_access("tile"), STORE_ORDER),
    "atomic_red_view_tko": (tile_view("view"), tile_of("value"), token("token", "result_token"),
                            oc.atomic_red_view, oc.rmw_mode("value", allow_xchg=False),
                            oc.ordering((Order.RELAXED,), scoped_optional=False),
                            oc.no_sys_scope),
    "multimem_load_reduce_view_tko": (tile_view("view"), tile_of("reduced_values"),
                                      token("token", "result_token"), oc.multicast_view,
                                      oc.view_access("reduced_values"),
                                      oc.multimem_reduction("reduced_values", in_memory=False), LOAD_ORDER),
    "multimem_reduce_view_tko": (tile_view("view"), tile_of("tile"), token("token", "result_token"),
                                 oc.multicast_view, oc.view_access("tile"),
                                 oc.multimem_reduction("tile", in_memory=True),
                                 oc.ordering(oc.ATOMIC_ORDERS, scoped_optional=False)),
    "multimem_store_view_tko": (tile_view("view"), tile_of("tile"), token("token", "result_token"),
                                oc.multicast_view, oc.view_access("tile"), STORE_ORDER),
    # ---- pointer memory access and atomics
    "load_ptr_tko": (pointer_tile("source"), tile_of("result"), tile_of("mask", elements=I1),
                     tile_of("paddingValue"), token("token", "result_token"),
                     oc.pointee_matches("source", "result", nvidia=True),
                     oc.mask_like("mask", "source", "shape of 'mask' must match the shape of "
                                                    "'source'"),
                     oc.padding_operand, LOAD_ORDER),
    "store_ptr_tko": (pointer_tile("destination"), tile_of("value"), tile_of("mask", elements=I1),
                      token("token", "result_token"),
                      oc.pointee_matches("destination", "value", nvidia=True),
                      oc.mask_like("mask", "destination", "shape of 'destination' must match the "
                                                          "shape of 'mask'"), STORE_ORDER),
    "atomic_rmw_tko": (pointer_tile("pointers"), tile_of("arg", "result"),
                       tile_of("mask", elements=I1), token("token", "result_token"),
                       same_type("arg", "result"), oc.pointee_matches("pointers", "arg"),
                       oc.mask_like("mask", "arg"), oc.rmw_mode("arg"),
                       oc.ordering(oc.ATOMIC_ORDERS, scoped_optional=False)),
    "atomic_cas_tko": (pointer_tile("pointers"), tile_of("cmp", "val", "result"),
                       tile_of("mask", elements=I1), token("token", "result_token"),
                       same_type("cmp", "val", "result"), oc.pointee_matches("pointers", "val"),
                       oc.mask_like("mask", "val"), oc.cas_element,
                       oc.ordering(oc.ATOMIC_ORDERS, scoped_optional=False)),
    # ---- tokens and synchronisation
    "make_token": (token("result"),),
    "join_tokens": (token("tokens", "result"), oc.join_tokens),
    "memory_fence_alias_tko": (token("token", "result_token"),),
    "gdc_launch_dependents_tko": (token("token", "result_token"),),
    "gdc_wait_tko": (token("token", "result_token"),),
    "print_tko": (tile_of("args"), token("token", "result_token"), oc.print_format),
    "assert": (tile_of("condition", elements=I1),),
    # ---- control flow
    "if": (tile_of("condition", elements=I1, rank=0), oc.no_view_results),
    "for": (tile_of("lowerBound", "upperBound", "step", elements=INT, rank=0),
            same_type("lowerBound", "upperBound", "step"), oc.loop_carried),
    "loop": (oc.loop_carried,),
    "reduce": (tile_of("operands", "results"), oc.combiner),
    "scan": (tile_of("operands", "results"), oc.combiner),
}, "verifier typing rules")


def constraints_for(spec: OpSpec) -> tuple[Constraint, ...] | None:
    """The op's typing constraints: its family's rule plus EXTRA, or its _OTHER entry; None when
    the op has neither."""
    if spec.terminator:
        return terminator(spec)
    if spec.family is not Family.OTHER and spec.elements is not None:
        return family_constraints(spec) + EXTRA.get(spec.mnemonic, ())
    return _OTHER.get(spec.mnemonic)


def _check() -> None:
    stray = sorted(name for name in EXTRA
                   if name not in OPS_BY_MNEMONIC or OPS_BY_MNEMONIC[name].family is Family.OTHER)
    doubled = sorted(spec.mnemonic for spec in BODY_OPS
                     if spec.mnemonic in _OTHER and (spec.family is not Family.OTHER or spec.terminator))
    if stray or doubled:
        raise RuntimeError(f"typing entries that the op table's families already give: "
                           f"{stray + doubled}")


_check()


def __getattr__(name):
    # OP_CONSTRAINTS (every body op's constraints) is made on first use: the verifier asks
    # constraints_for per op kind it meets, and building all ~100 entries costs each start-up.
    if name == "OP_CONSTRAINTS":
        table: dict[str, tuple[Constraint, ...]] = {}
        for spec in BODY_OPS:
            constraints = constraints_for(spec)
            if constraints is not None:
                table[spec.mnemonic] = constraints
        globals()[name] = table
        return table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
