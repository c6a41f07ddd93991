"""Invalid IR: decodes (or builds) but breaks a rule. One case per rule at least; each case checks
the rule id, the op, the start of the message and where the diagnostic points.

Builder cases are written with our writer and read back when the writer accepts them, so their
locations are real byte offsets; fixture cases corrupt a loaded cuTile kernel in memory.
"""
from dataclasses import dataclass
from typing import Callable

import pytest

import tilebc
from tilebc.errors import EncodeError, VerificationError
from tilebc.ir import (ArrayAttr, BoolAttr, BoundedAttr, DenseElementsAttr, DictionaryAttr,
                       OptimizationHintsAttr, DivByAttr, FunctionType,
                       GatherScatterViewType, Global, IntegerAttr, Module, PartitionViewType,
                       PointerType, Block, StridedViewType, TensorViewType, Value,
                       FloatAttr, StringAttr, bf16, f16, f32, f64, f4E2M1FN, f8E4M3FN, f8E8M0FNU,
                       i1, i8, i32, i64, tf32, scalar, tile, token)
from tilebc.ir.builder import make_op, new_function
from tilebc.ir.location import CallSiteLoc, DILexicalBlock, DILoc
from tilebc.ops import (AtomicRMWMode, IntegerOverflow, MemoryOrderingSemantics as Order,
                        MemoryScope, MultimemReductionKind, PaddingValue, PtrAttr, RoundingMode,
                        Signedness, ComparisonPredicate)
from tilebc.verify import diagnostics, verify

from conftest import FIXTURE_DIR

V = tilebc.Version
WEAK = {"memory_ordering_semantics": Order.WEAK}


def kernel(params, body, version=V(13, 5)) -> Module:
    """A one-entry module; `body(builder, *params)` adds ops, a `return` closes it if needed."""
    module = Module(version=version)
    builder = new_function(module, "k", params)
    body(builder, *builder.block.args)
    ops = builder.block.ops
    if not ops or not ops[-1].spec.terminator:
        builder.op("return", [[]])
    return module


def const(builder, type_, raw: bytes):
    return builder.op("constant", [], [type_], {"value": DenseElementsAttr(type_, raw)})


def zero_i32(builder):
    return const(builder, scalar(i32), b"\0\0\0\0")


def fixture(name: str, version: str = "13.5") -> Module:
    return tilebc.load(FIXTURE_DIR / name / f"{name}-{version}.tilebc")


def ops_named(module, mnemonic):
    return [op for op in module.walk() if op.name == mnemonic]


def view_kernel(view_type_fn, body, element=f32, ptr_attr=PtrAttr.NONE, version=V(13, 5)):
    """Kernel with a 64-element tensor view of `element` and a subview from `view_type_fn(tv)`."""
    tv = TensorViewType(element, (64,), (1,), ptr_attr)

    def build(b, base):
        view = b.op("make_tensor_view", [base, [], []], [tv])
        sub_type = view_type_fn(tv)
        maker = {PartitionViewType: "make_partition_view", StridedViewType: "make_strided_view",
                 GatherScatterViewType: "make_gather_scatter_view"}[type(sub_type)]
        sub = b.op(maker, [view], [sub_type])
        body(b, sub, view)
    return kernel([scalar(PointerType(element, ptr_attr))], build, version)


def partition(tv, shape=(16,), **kw):
    return PartitionViewType(shape, tv, (0,), **kw)


@dataclass
class Case:
    id: str
    make: Callable[[], Module]
    rule: str
    op: str          # mnemonic (or "entry @k", "global @g", "module") the diagnostic names
    prefix: str      # the message starts with this
    occurrence: int = 0  # which op with that mnemonic (walk order) it points at
    severity: str = "error"
    reload: bool = True  # False: IR no bytes can hold (decoding always makes fresh values)


# ---- builders for structural corruptions --------------------------------------------------------

def _two_entries():
    module = kernel([], lambda b: None)
    module.functions.append(kernel([], lambda b: None).functions[0])
    return module


def _undefined_global():
    return kernel([], lambda b: b.op("get_global", [], [scalar(PointerType(f32))], {"name": "g"}))


def _global_pointee():
    module = kernel([], lambda b: b.op("get_global", [], [scalar(PointerType(i32))], {"name": "g"}))
    module.globals.append(Global("g", DenseElementsAttr(tile((4,), f32), bytes(16))))
    return module


def _renamed(name):
    module = kernel([], lambda b: None)
    module.functions[0].name = name
    return module


def _swap_ops():
    module = fixture("loop_for_carried")
    body = module.functions[0].body.ops
    body[1], body[3] = body[3], body[1]  # make_tensor_view now precedes the assume it uses
    return module


def _escape_region():
    module = fixture("loop_for_carried")
    loop = ops_named(module, "for")[0]
    inner = loop.regions[0].blocks[0].ops[1].results[0]  # the fma inside the loop
    store = ops_named(module, "store_view_tko")[0]
    store.operands["tile"] = inner
    return module


def _redefine():
    module = fixture("loop_for_carried")
    block = module.functions[0].body
    block.ops.insert(2, block.ops[1])  # the same assume twice
    return module


def _drop_return():
    module = fixture("loop_for_carried")
    module.functions[0].body.ops.pop()
    return module


def _return_mid_block():
    module = fixture("loop_for_carried")
    block = module.functions[0].body
    block.ops.insert(3, make_op("return", [[]]))
    return module


def _break_in_for():
    module = fixture("loop_for_carried")
    body = ops_named(module, "for")[0].regions[0].blocks[0]
    old = body.ops[-1]
    body.ops[-1] = make_op("break", [old.operands["operands"]])
    return module


def _continue_types():
    module = fixture("loop_for_carried")
    cont = ops_named(module, "continue")[0]
    cont.operands["operands"] = cont.operands["operands"][:1]
    return module


def _if_yield_types():
    module = fixture("if_else_result")
    yielded = ops_named(module, "yield")[0]
    yielded.operands["operands"] = ()
    return module


def _yield_in_entry():
    module = fixture("loop_for_carried")
    module.functions[0].body.ops[-1] = make_op("yield", [[]])
    return module


def _region_count():
    module = fixture("if_no_else")
    ops_named(module, "if")[0].regions.pop()
    return module


def _region_blocks():
    """A second, well-formed block in a for body (bytecode can hold it; NVIDIA: "expects region
    #0 to have 0 or 1 blocks")."""
    module = fixture("loop_for_carried")
    loop = ops_named(module, "for")[0]
    first = loop.regions[0].blocks[0]
    extra = Block()
    extra.args = [Value(a.type, extra, i) for i, a in enumerate(first.args)]
    extra.ops = [make_op("continue", [extra.args[1:]])]
    loop.regions[0].blocks.append(extra)
    return module


def _empty_region():
    module = fixture("loop_for_carried")
    ops_named(module, "for")[0].regions[0].blocks.clear()
    return module


def _if_results_without_else():
    module = fixture("if_else_result")
    ops_named(module, "if")[0].regions[1].blocks.clear()
    return module


def _for_region_args():
    module = fixture("loop_for_carried")
    block = ops_named(module, "for")[0].regions[0].blocks[0]
    block.args[0] = Value(scalar(i64), block, 0)
    return module


def _entry_results():
    module = kernel([], lambda b: None)
    module.functions[0].type = FunctionType((), (scalar(i32),))
    return module


def _entry_signature():
    module = kernel([scalar(i32)], lambda b, x: None)
    module.functions[0].type = FunctionType((scalar(i64),))
    return module


def _global_rank():
    module = kernel([], lambda b: None)
    module.globals.append(Global("g", DenseElementsAttr(tile((2, 2), f32), bytes(16))))
    return module


def _arity():
    module = kernel([], lambda b: b.op("get_tile_block_id", [], [scalar(i32)] * 3))
    ops_named(module, "get_tile_block_id")[0].results.pop()
    return module


def _missing_attr():
    module = kernel([scalar(i32), scalar(i32)], lambda b, x, y: b.op(
        "cmpi", [x, y], [scalar(i1)], {"comparison_predicate": ComparisonPredicate.EQUAL}))
    ops_named(module, "cmpi")[0].attrs["comparison_predicate"] = None
    return module


def _enum_attr():
    module = kernel([scalar(i32), scalar(i32)], lambda b, x, y: b.op(
        "addi", [x, y], [scalar(i32)]))
    ops_named(module, "addi")[0].attrs["overflow"] = 2
    return module


def _structural_in_body():
    module = kernel([], lambda b: None)
    from tilebc.ops import OPS_BY_MNEMONIC
    module.functions[0].body.ops.insert(0, tilebc.ir.Op(OPS_BY_MNEMONIC["global"], {}, {}, []))
    return module


def _dominance_in_block():
    def body(b, x):
        later = make_op("negi", [x], [scalar(i32)])
        b.op("absi", [later.results[0]], [scalar(i32)])
        b.block.ops.append(later)
    return kernel([scalar(i32)], body)


# ---- the cases ---------------------------------------------------------------------------------

CASES = [
    # module and symbols
    Case("duplicate entry", _two_entries, "symbol.duplicate", "entry @k", "symbol @k is already"),
    Case("get_global of nothing", _undefined_global, "symbol.undefined", "get_global",
         "@g does not name a global"),
    Case("get_global pointee", _global_pointee, "type.pointee", "get_global",
         "result points to i32 but global @g holds f32"),
    Case("global rank", _global_rank, "global.type", "global @g", "global value must be a rank-1"),
    Case("unsupported version", lambda: kernel([], lambda b: None, V(13, 9)), "version.module",
         "module", "bytecode version 13.9 is outside"),
    Case("empty entry name", lambda: _renamed(""), "symbol.name", "entry @",
         "symbol name must not be empty", reload=False),
    # SSA
    Case("use before definition", _swap_ops, "ssa.dominance", "make_tensor_view",
         "operand <Value"),
    Case("use before definition (builder)", _dominance_in_block, "ssa.dominance", "absi",
         "operand <Value"),
    Case("value escapes its region", _escape_region, "ssa.dominance", "store_view_tko",
         "operand <Value"),
    Case("value assigned twice", _redefine, "ssa.redefined", "assume", "value <Value",
         occurrence=1, reload=False),
    # regions and terminators
    Case("entry without return", _drop_return, "terminator.missing", "entry @",
         "entry region must end with return"),
    Case("return mid-block", _return_mid_block, "terminator.position", "return",
         "return must be the last op"),
    Case("break in for", _break_in_for, "terminator.parent", "break",
         "break must be nested (through if only) in loop, not in for"),
    Case("continue types", _continue_types, "terminator.types", "continue",
         "continue operands (tile<32xf32>) do not match what for expects"),
    Case("if yields nothing", _if_yield_types, "terminator.types", "if",
         "yield operands () do not match what if expects"),
    Case("yield ends entry", _yield_in_entry, "terminator.parent", "yield",
         "yield cannot end a entry region"),
    Case("if with one region", _region_count, "region.count", "if", "if has 1 regions, expected 2"),
    Case("for with two blocks", _region_blocks, "region.blocks", "for",
         "region 0 has 2 blocks, expected exactly one"),
    Case("for with no block", _empty_region, "region.blocks", "for",
         "region 0 has 0 blocks, expected exactly one"),
    Case("if results without else", _if_results_without_else, "region.blocks", "if",
         "an if with results needs an else region"),
    Case("for induction type", _for_region_args, "region.args", "for", "region arguments (tile<i64>"),
    # entries
    Case("entry tile param", lambda: kernel([tile((4,), f32)], lambda b, x: None),
         "entry.params", "entry @k", "parameter 0 must be a scalar tile"),
    Case("entry token param", lambda: kernel([token], lambda b, x: None),
         "entry.params", "entry @k", "parameter 0 must be a scalar tile"),
    Case("entry results", _entry_results, "entry.results", "entry @k", "an entry returns nothing"),
    Case("entry signature", _entry_signature, "entry.signature", "entry @k",
         "body arguments (tile<i32>) do not match"),
    # shared op checks
    Case("result count", _arity, "op.arity", "get_tile_block_id", "get_tile_block_id has 2 results",
         reload=False),
    Case("missing attribute", _missing_attr, "attr.missing", "cmpi",
         "attribute comparison_predicate is required"),
    Case("enum attribute of the wrong kind", _enum_attr, "attr.enum", "addi",
         "attribute overflow must be a IntegerOverflow"),
    Case("structural op in a body", _structural_in_body, "op.unknown", "global",
         "global cannot appear in a function body"),
    # versions
    Case("op newer than module", lambda: kernel([scalar(f32), scalar(i32)], lambda b, x, n: b.op(
        "fpowi", [x, n], [scalar(f32)]), V(13, 3)), "version.op", "fpowi",
        "fpowi needs bytecode 13.4, module is 13.3"),
    Case("attribute newer than module", lambda: kernel([scalar(f32)], lambda b, x: b.op(
        "ftoi", [x], [scalar(i32)], {"saturating": True}), V(13, 3)), "version.attr", "ftoi",
        "attribute saturating needs bytecode 13.4"),
    Case("enum value newer than module", lambda: kernel([scalar(f32)], lambda b, x: b.op(
        "ftof", [x], [scalar(tilebc.ir.tf32)], {"rounding_mode": RoundingMode.NEAREST_AWAY}),
        V(13, 3)), "version.enum", "ftof", "rounding_mode nearest_away needs bytecode 13.4"),
    Case("type newer than module", lambda: kernel([scalar(f32)], lambda b, x: b.op(
        "ftof", [b.op("reshape", [x], [tile((1,), f32)])], [tile((2,), f4E2M1FN)]), V(13, 2)),
        "version.type", "ftof", "result type tile<2xf4E2M1FN> uses element type f4E2M1FN"),
    Case("operand newer than module", lambda: kernel([], lambda b: b.op(
        "print_tko", [[], b.op("make_token", [], [token])], [token], {"str": "x"}), V(13, 1)),
        "version.operand", "print_tko", "operand token needs bytecode 13.2"),
    # types on their own
    Case("tile dim not a power of two", lambda: kernel([], lambda b: b.op(
        "iota", [], [tile((12,), i32)])), "type.tile_shape", "iota",
        "result type tile<12xi32>: tile dimensions must be powers of two"),
    Case("tile too large", lambda: kernel([], lambda b: b.op(
        "iota", [], [tile((1 << 25,), i32)])), "type.tile_shape", "iota",
        "result type tile<33554432xi32>: tile 33554432 has 33554432 elements"),
    Case("scalar f4 tile", lambda: kernel([tile((), f32)], lambda b, x: b.op(
        "ftof", [x], [scalar(f4E2M1FN)])), "type.tile_shape", "ftof",
        "result type tile<f4E2M1FN>: f4E2M1FN tiles must have an even number"),
    Case("tensor_view stride 0", lambda: kernel([scalar(PointerType(f32))], lambda b, p: b.op(
        "make_tensor_view", [p, [], []], [TensorViewType(f32, (64,), (0,))])),
        "type.tensor_view", "make_tensor_view", "result type tensor_view<64xf32, strides=[0]>: "
        "tensor_view strides must be positive"),
    Case("dim_map not a permutation", lambda: view_kernel(
        lambda tv: PartitionViewType((16,), tv, (1,)), lambda b, v, t: None),
        "type.partition_view", "make_partition_view", "result type partition_view"),
    Case("nan padding on integers", lambda: view_kernel(
        lambda tv: partition(tv, padding_value=PaddingValue.NAN), lambda b, v, t: None,
        element=i32), "type.partition_view", "make_partition_view", "result type partition_view"),
    Case("partition rank", lambda: view_kernel(
        lambda tv: PartitionViewType((4, 4), tv, (0, 1)), lambda b, v, t: None),
        "type.partition_view", "make_partition_view", "result type partition_view"),
    Case("strided view strides", lambda: view_kernel(
        lambda tv: StridedViewType((16,), (1, 1), tv, (0,)), lambda b, v, t: None),
        "type.strided_view", "make_strided_view", "result type strided_view"),
    Case("gather dim", lambda: view_kernel(
        lambda tv: GatherScatterViewType((16,), tv, 1), lambda b, v, t: None),
        "type.gather_scatter_view", "make_gather_scatter_view", "result type gather_scatter_view"),
]


def _binary(mnemonic, lhs_type, rhs_type, result_type, attrs=None):
    return lambda: kernel([lhs_type, rhs_type], lambda b, x, y: b.op(
        mnemonic, [x, y], [result_type], attrs))


def _unary(mnemonic, source_type, result_type, attrs=None):
    return lambda: kernel([source_type], lambda b, x: b.op(mnemonic, [x], [result_type], attrs))


def _tile_op(mnemonic, source, result, attrs=None, extra=()):
    """An op on a tile made by iota/reshape from a scalar parameter."""
    def build(b, x):
        value = b.op("reshape", [x], [tile((1,) * len(source.shape), source.element)])
        value = b.op("broadcast", [value], [source])
        b.op(mnemonic, [value, *extra], [result], attrs)
    return lambda: kernel([scalar(source.element)], build)


def _select_shapes():
    def build(b, c, x):
        cond = b.op("broadcast", [b.op("reshape", [c], [tile((1,), i1)])], [tile((4,), i1)])
        b.op("select", [cond, x, x], [scalar(f32)])
    return kernel([scalar(i1), scalar(f32)], build)


def _mma(lhs, rhs, acc):
    def build(b, x):
        def tile_of(t):
            value = b.op("reshape", [x], [tile((1, 1), f16)])
            value = b.op("broadcast", [value], [tile(t.shape, f16)])
            return value if t.element == f16 else b.op("ftof", [value], [t])
        b.op("mmaf", [tile_of(lhs), tile_of(rhs), tile_of(acc)], [acc])
    return kernel([scalar(f16)], build)


def _extract_indices():
    def build(b, x):
        source = b.op("broadcast", [b.op("reshape", [x], [tile((1,), f32)])], [tile((8,), f32)])
        b.op("extract", [source, []], [tile((4,), f32)])
    return kernel([scalar(f32)], build)


def _load_view(tile_type, indices_fn, order=Order.WEAK, scope=None, inbounds=None):
    def body(b, view, _):
        attrs = {"memory_ordering_semantics": order, "memory_scope": scope}
        if inbounds is not None:
            attrs["inbounds"] = inbounds
        b.op("load_view_tko", [view, indices_fn(b), None], [tile_type, token], attrs)
    return lambda: view_kernel(partition, body)


def _pointer_tile(b, p, shape=(4,)):
    return b.op("broadcast", [b.op("reshape", [p], [tile((1,), p.type.element)])],
                [tile(shape, p.type.element)])


def _load_ptr(result_type, order=Order.WEAK, scope=None):
    def build(b, p):
        b.op("load_ptr_tko", [_pointer_tile(b, p), None, None, None], [result_type, token],
             {"memory_ordering_semantics": order, "memory_scope": scope})
    return lambda: kernel([scalar(PointerType(f32))], build)


def _rmw(element, mode):
    def build(b, p, x):
        ptrs = _pointer_tile(b, p)
        arg = b.op("broadcast", [b.op("reshape", [x], [tile((1,), element)])], [tile((4,), element)])
        b.op("atomic_rmw_tko", [ptrs, arg, None, None], [tile((4,), element), token],
             {"memory_ordering_semantics": Order.RELAXED, "memory_scope": MemoryScope.DEVICE,
              "mode": mode})
    return lambda: kernel([scalar(PointerType(element)), scalar(element)], build)


def _multimem_f32_min():
    def body(b, view, _):
        values, _tok = b.op("multimem_load_reduce_view_tko", [view, [zero_i32(b)], None],
                            [tile((16,), f32), token], {**WEAK, "reduction": MultimemReductionKind.ADD})
        b.op("multimem_reduce_view_tko", [view, values, [zero_i32(b)], None], [token],
             {"memory_ordering_semantics": Order.RELAXED, "memory_scope": MemoryScope.DEVICE,
              "reduction": MultimemReductionKind.MIN})
    return view_kernel(partition, body, ptr_attr=PtrAttr.MULTICAST)


def _if_view_result():
    def build(b, c, p):
        view_type = TensorViewType(f32, (64,), (1,))
        then_region, then_b = b.region()
        then_b.op("yield", [[then_b.op("make_tensor_view", [p, [], []], [view_type])]])
        else_region, else_b = b.region()
        else_b.op("yield", [[else_b.op("make_tensor_view", [p, [], []], [view_type])]])
        b.op("if", [c], [view_type], regions=[then_region, else_region])
    return kernel([scalar(i1), scalar(PointerType(f32))], build)


def _reduce_identities():
    def build(b, x):
        source = b.op("broadcast", [b.op("reshape", [x], [tile((1,), f32)])], [tile((8,), f32)])
        region, inner = b.region([scalar(f32)] * 2)
        inner.op("yield", [[inner.op("addf", list(inner.block.args), [scalar(f32)])]])
        b.op("reduce", [[source]], [scalar(f32)],
             {"dim": 0, "identities": (IntegerAttr(i32, 0),)}, regions=[region])
    return kernel([scalar(f32)], build)


def _reduce_region():
    def build(b, x):
        source = b.op("broadcast", [b.op("reshape", [x], [tile((1,), f32)])], [tile((8,), f32)])
        region, inner = b.region([scalar(f32)])
        inner.op("yield", [[inner.block.args[0]]])
        b.op("reduce", [[source]], [scalar(f32)],
             {"dim": 0, "identities": (tilebc.ir.FloatAttr(f32, 0),)}, regions=[region])
    return kernel([scalar(f32)], build)


def _reduce_printing():
    """print_tko in a combiner body: NVIDIA allows only memory-effect-free ops there."""
    def build(b, x):
        source = b.op("broadcast", [b.op("reshape", [x], [tile((1,), f32)])], [tile((8,), f32)])
        region, inner = b.region([scalar(f32)] * 2)
        inner.op("print_tko", [[], None], [token], {"str": "step"})
        inner.op("yield", [[inner.op("addf", list(inner.block.args), [scalar(f32)])]])
        b.op("reduce", [[source]], [scalar(f32)],
             {"dim": 0, "identities": (tilebc.ir.FloatAttr(f32, 0),)}, regions=[region])
    return kernel([scalar(f32)], build)


def _loop_view_result():
    def build(b, p):
        view_type = TensorViewType(f32, (64,), (1,))
        region, inner = b.region()
        inner.op("break", [[inner.op("make_tensor_view", [p, [], []], [view_type])]])
        b.op("loop", [[]], [view_type], regions=[region])
    return kernel([scalar(PointerType(f32))], build)


CASES += [
    # element families and agreement
    Case("addf on integers", _binary("addf", scalar(i32), scalar(i32), scalar(i32)),
         "type.operand", "addf", "'cuda_tile.addf' op operand #0 must be tile of f16 or bf16 or "
         "f32 or f64 values, but got '!cuda_tile.tile<i32>' (operand 'lhs')"),
    Case("addf operand types differ", _binary("addf", scalar(f32), scalar(f16), scalar(f32)),
         "type.mismatch", "addf", "'cuda_tile.addf' op failed to verify that all of {lhs, rhs, "
         "result} have same type (operand 'rhs' type tile<f16> does not match operand 'lhs'"),
    Case("cmpf result not i1", _binary("cmpf", scalar(f32), scalar(f32), scalar(f32), {
        "comparison_predicate": ComparisonPredicate.EQUAL,
        "comparison_ordering": tilebc.ops.ComparisonOrdering.ORDERED}),
         "type.mismatch", "cmpf", "'cuda_tile.cmpf' op result #0 must be tile of i1 values, but "
         "got '!cuda_tile.tile<f32>' (result 'result' must be tile<i1>"),
    Case("select shapes", _select_shapes, "shape.mismatch", "select",
         "'cuda_tile.select' op failed to verify that all of {cond, val_if_true, val_if_false, "
         "result} have same shape (operand 'val_if_true' shape"),
    Case("broadcast element", _unary("broadcast", scalar(f32), scalar(i32)),
         "type.element_mismatch", "broadcast", "'cuda_tile.broadcast' op failed to verify that "
         "all of {source, result} have the same element type (result 'result' element type i32"),
    Case("broadcast rank", _unary("broadcast", scalar(f32), tile((4,), f32)),
         "shape.rank", "broadcast", "'cuda_tile.broadcast' op failed to verify that all of "
         "{source, result} have same rank (result 'result' rank 1 does not match"),
    Case("broadcast grows a non-1 dim", _tile_op("broadcast", tile((2,), f32), tile((8,), f32)),
         "shape.broadcast", "broadcast", "source shape 2 cannot broadcast to 8", occurrence=1),
    Case("reshape count", _tile_op("reshape", tile((4,), f32), tile((2, 4), f32)),
         "shape.reshape", "reshape", "reshape from 4 to 2x4", occurrence=1),
    Case("permute result shape", _tile_op("permute", tile((2, 4), f32), tile((2, 4), f32),
                                          {"permutation": (1, 0)}),
         "shape.permute", "permute", "'cuda_tile.permute' op result shape invalid at index 0, "
         "expected: 4, but got: 2 (result shape 2x4 should be 4x2)"),
    Case("permutation invalid", _tile_op("permute", tile((2, 4), f32), tile((2, 4), f32),
                                         {"permutation": (0, 0)}),
         "attr.permutation", "permute", "'cuda_tile.permute' op expect permutation elements to be "
         "unique (permutation [0, 0] must be a permutation"),
    Case("cat dim", lambda: kernel([scalar(f32)], lambda b, x: b.op(
        "cat", [b.op("reshape", [x], [tile((1,), f32)])] * 2, [tile((2,), f32)], {"dim": 1})),
         "attr.dim", "cat", "dim 1 is outside [0, 1)"),
    Case("cat sizes", lambda: kernel([scalar(f32)], lambda b, x: b.op(
        "cat", [b.op("reshape", [x], [tile((1,), f32)])] * 2, [tile((4,), f32)], {"dim": 0})),
         "shape.cat", "cat", "result shape 4 should be 2 along dim 0"),
    Case("extract sizes", _tile_op("extract", tile((8,), f32), tile((4, ), f32), extra=([],)),
         "operand.count", "extract", "expected 1 indices, got 0"),
    Case("extract non-dividing", _tile_op("extract", tile((4,), f32), tile((8,), f32), extra=([],)),
         "shape.subtile", "extract", "result dimension 0 size 8 does not divide 4"),
    Case("extract index out of bounds", lambda: kernel([scalar(f32)], lambda b, x: b.op(
        "extract", [b.op("broadcast", [b.op("reshape", [x], [tile((1,), f32)])], [tile((8,), f32)]),
                    [const(b, scalar(i32), (2).to_bytes(4, "little"))]], [tile((4,), f32)])),
         "index.bounds", "extract", "index 0 is 2, outside the 2 sub-tiles", severity="warning"),
    Case("iota range", lambda: kernel([], lambda b: b.op("iota", [], [tile((512,), i8)])),
         "shape.iota", "iota", "'cuda_tile.iota' op the number of elements 512 exceeds the "
         "maximum value of element type 'i8' (512 elements exceed the range of i8)"),
    Case("pack size", _tile_op("pack", tile((4,), f32), tile((8,), i8)),
         "type.pack", "pack", "source is 16 bytes but result is 8 bytes"),
    Case("exti narrows", _unary("exti", scalar(i32), scalar(i8), {"signedness": Signedness.SIGNED}),
         "type.width", "exti", "'cuda_tile.exti' op extending to smaller or identical "
         "integer (exti must widen: i32 to i8)"),
    Case("bitcast widths", _unary("bitcast", scalar(f32), scalar(i64)),
         "type.width", "bitcast", "'cuda_tile.bitcast' op types must be equal width (bitcast "
         "needs equal widths"),
    Case("ftof to itself", _unary("ftof", scalar(f32), scalar(f32)),
         "type.noop", "ftof", "'cuda_tile.ftof' op converting tiles must not be a no-op "
         "(converting tile<f32> to itself)"),
    Case("int_to_ptr from i32", _unary("int_to_ptr", scalar(i32), scalar(PointerType(f32))),
         "type.operand", "int_to_ptr", "'cuda_tile.int_to_ptr' op operand #0 must be tile of i64 "
         "values, but got '!cuda_tile.tile<i32>' (operand 'source')"),
    # attribute values
    Case("addf approx", _binary("addf", scalar(f32), scalar(f32), scalar(f32),
                                {"rounding_mode": RoundingMode.APPROX}),
         "attr.rounding", "addf", "'cuda_tile.addf' op invalid rounding mode specified, expect "
         "one of [nearest_even, zero, negative_inf, positive_inf] (rounding_mode approx is not "
         "allowed here"),
    Case("ftof positive_inf to f16", _unary("ftof", scalar(f32), scalar(f16),
                                            {"rounding_mode": RoundingMode.POSITIVE_INF}),
         "attr.rounding", "ftof", "'cuda_tile.ftof' op invalid rounding mode specified. Only "
         "'nearest_even' and 'zero' are supported for narrowing conversions to standard types "
         "(rounding_mode positive_inf is not allowed for f32 to f16)"),
    Case("itof to f8E8M0FNU", _unary("itof", scalar(i32), scalar(f8E8M0FNU), {
        "signedness": Signedness.SIGNED, "rounding_mode": RoundingMode.NEAREST_EVEN}),
         "type.operand", "itof", "'cuda_tile.itof' op integer to f8E8M0FNU conversion is not "
         "supported, please first convert to another float type"),
    Case("ftof f8E8M0FNU to f32 positive_inf", _unary("ftof", scalar(f8E8M0FNU), scalar(f32),
                                                     {"rounding_mode": RoundingMode.POSITIVE_INF}),
         "attr.rounding", "ftof", "'cuda_tile.ftof' op invalid rounding mode specified. Only "
         "'nearest_even' and 'zero' are supported for narrowing conversions to standard types "
         "(rounding_mode positive_inf is not allowed for f8E8M0FNU to f32)"),
    Case("ftof f4E2M1FN to f8E4M3FN zero", lambda: kernel([scalar(f32)], lambda b, x: b.op(
        "ftof", [b.op("ftof", [b.op("broadcast", [b.op("reshape", [x], [tile((1,), f32)])],
                                    [tile((2,), f32)])], [tile((2,), f4E2M1FN)])],
        [tile((2,), f8E4M3FN)], {"rounding_mode": RoundingMode.ZERO})),
         "attr.rounding", "ftof", "'cuda_tile.ftof' op invalid rounding mode specified for "
         "conversion to low-precision type. Only 'nearest_even' is supported (rounding_mode zero "
         "is not allowed for f4E2M1FN to f8E4M3FN (exact, but into a low-precision type))",
         occurrence=1),
    Case("itof zero", _unary("itof", scalar(i32), scalar(f32), {
        "signedness": Signedness.SIGNED, "rounding_mode": RoundingMode.ZERO}),
         "attr.rounding", "itof", "rounding_mode zero is not allowed here"),
    Case("ftz on f16", _binary("addf", scalar(f16), scalar(f16), scalar(f16),
                               {"flush_to_zero": True}),
         "attr.f32_only", "addf", "'cuda_tile.addf' op flush_to_zero modifier only supported for "
         "f32 data type, but got: 'f16' (flush_to_zero is only supported for f32"),
    Case("divf approx on f16", _binary("divf", scalar(f16), scalar(f16), scalar(f16),
                                       {"rounding_mode": RoundingMode.APPROX}),
         "attr.f32_only", "divf", "'cuda_tile.divf' op approx modifier only supported for f32 data "
         "type, but got: 'f16' (rounding_mode approx is only supported for f32"),
    Case("negi no_unsigned_wrap", _unary("negi", scalar(i32), scalar(i32),
                                         {"overflow": IntegerOverflow.NO_UNSIGNED_WRAP}),
         "attr.overflow", "negi", "overflow no_unsigned_wrap is not allowed here"),
    Case("unsigned floor division", _binary("divi", scalar(i32), scalar(i32), scalar(i32), {
        "signedness": Signedness.UNSIGNED, "rounding": RoundingMode.NEGATIVE_INF}),
         "divi.unsigned_floor", "divi", "'cuda_tile.divi' op rounding mode 'negative_inf' is not "
         "allowed with 'unsigned' flag (rounding negative_inf is not allowed here"),
    Case("assume div_by 3", _unary("assume", scalar(i32), scalar(i32),
                                   {"predicate": DivByAttr(3)}),
         "assume.predicate", "assume", "div_by divisor must be a power of two, got 3"),
    Case("assume div_by 2^63", _unary("assume", scalar(i32), scalar(i32),
                                      {"predicate": DivByAttr(1 << 63)}),
         "assume.predicate", "assume", "div_by divisor 9223372036854775808 is too large"),
    Case("assume div_by every beyond the dimension", _tile_op(
        "assume", tile((16,), i32), tile((16,), i32), {"predicate": DivByAttr(1, 24, 0)}),
         "assume.predicate", "assume", "div_by every 24 is outside [0, 16]"),
    Case("assume div_by every on a 0-d tile", _unary(
        "assume", scalar(i32), scalar(i32), {"predicate": DivByAttr(4, 1, 0)}),
         "assume.predicate", "assume", "div_by on a 0-d tile takes no 'every'/'along'"),
    Case("assume bounded on floats", _unary("assume", scalar(f32), scalar(f32),
                                            {"predicate": BoundedAttr(0, 4)}),
         "assume.predicate", "assume", "bounded applies to integer tiles"),
    Case("print arguments", lambda: kernel([scalar(i32)], lambda b, x: b.op(
        "print_tko", [[x], None], [token], {"str": "%d %d\n"})),
         "print.format", "print_tko", "format '%d %d\\n' takes 2 arguments, got 1"),
    Case("alloca alignment", lambda: kernel([], lambda b: b.op(
        "alloca", [], [scalar(PointerType(f32))], {"num_elem": 4, "alignment": 2})),
         "attr.alignment", "alloca", "alignment 2 is below the 4-byte size of f32"),
    Case("join one token", lambda: kernel([], lambda b: b.op(
        "join_tokens", [[b.op("make_token", [], [token])]], [token])),
         "operand.count", "join_tokens", "'cuda_tile.join_tokens' op expect two or more tokens "
         "(join_tokens needs two or more tokens, got 1)"),
    Case("alloca negative count", lambda: kernel([], lambda b: b.op(
        "alloca", [], [scalar(PointerType(f32))], {"num_elem": -1, "alignment": 4})),
         "attr.value", "alloca", "num_elem must not be negative, got -1", reload=False),
    Case("tile of tokens", lambda: kernel([], lambda b: b.op(
        "make_token", [], [tile((), token)])), "type.tile_element", "make_token",
         "result type tile<token>: tile element must be an element or pointer type",
         reload=False),
    Case("not a Tile IR type", lambda: kernel([], lambda b: b.op(
        "make_token", [], [tilebc.ir.types.Type()])), "type.unknown", "make_token",
         "result type <tilebc.ir.types.Type object", reload=False),
    # matrix multiply
    Case("mma K mismatch", lambda: _mma(tile((16, 8), f16), tile((16, 16), f16), tile((16, 16), f32)),
         "shape.mma", "mmaf", "lhs 16x8 and rhs 16x16 disagree on K"),
    Case("mmaf on f4E2M1FN", lambda: _mma(tile((16, 16), f4E2M1FN), tile((16, 16), f4E2M1FN),
                                          tile((16, 16), f32)),
         "type.operand", "mmaf", "'cuda_tile.mmaf' op operand #0 must be tile of"),
    Case("mma accumulator type", lambda: _mma(tile((16, 16), bf16), tile((16, 16), bf16),
                                              tile((16, 16), f16)),
         "type.mma", "mmaf", "bf16 inputs need a f32 accumulator, got f16"),
    # views and memory
    Case("load tile type", _load_view(tile((8,), f32), lambda b: [zero_i32(b)]),
         "type.view_tile", "load_view_tko", "result 'tile' must be tile<16xf32>"),
    Case("load index count", _load_view(tile((16,), f32), lambda b: []),
         "operand.count", "load_view_tko", "expected 1 index operands"),
    Case("load index not scalar", _load_view(tile((16,), f32), lambda b: [
        b.op("iota", [], [tile((2,), i32)])]),
         "type.index", "load_view_tko", "index 0 must be a scalar integer tile"),
    Case("load inbounds length", _load_view(tile((16,), f32), lambda b: [zero_i32(b)],
                                            inbounds=(True, True)),
         "attr.inbounds", "load_view_tko", "inbounds has 2 entries for 1 indices"),
    Case("load with release", _load_view(tile((16,), f32), lambda b: [zero_i32(b)],
                                         order=Order.RELEASE, scope=MemoryScope.DEVICE),
         "memory.ordering", "load_view_tko", "'cuda_tile.load_view_tko' op expect one of: weak, "
         "relaxed, or acquire, but got: release (memory ordering release is not allowed"),
    Case("weak load with scope", _load_view(tile((16,), f32), lambda b: [zero_i32(b)],
                                            scope=MemoryScope.DEVICE),
         "memory.scope", "load_view_tko", "'cuda_tile.load_view_tko' op weak load must not have "
         "memory scope (a weak access takes no memory scope"),
    Case("acquire load without scope", _load_ptr(tile((4,), f32), order=Order.ACQUIRE),
         "memory.scope", "load_ptr_tko", "'cuda_tile.load_ptr_tko' op memory scope is required for "
         "acquire load (a acquire access needs a memory scope)"),
    Case("load_ptr pointee", _load_ptr(tile((4,), i32)),
         "type.pointee", "load_ptr_tko", "'cuda_tile.load_ptr_tko' op failed to verify that "
         "`source` type is expected a pointer type of `result` type (operand 'source' points to "
         "f32 but result 'result' holds i32)"),
    Case("tensor_view pointee", lambda: kernel([scalar(PointerType(f32))], lambda b, p: b.op(
        "make_tensor_view", [p, [], []], [TensorViewType(i32, (64,), (1,))])),
         "type.view", "make_tensor_view", "base points to f32 but the tensor_view holds i32"),
    Case("dynamic dims count", lambda: kernel([scalar(PointerType(f32))], lambda b, p: b.op(
        "make_tensor_view", [p, [], []], [TensorViewType(f32, (None,), (1,))])),
         "operand.count", "make_tensor_view", "expected 1 dynamicShape operands"),
    Case("get_tensor_shape count", lambda: kernel([scalar(PointerType(f32))], lambda b, p: b.op(
        "get_tensor_shape", [b.op("make_tensor_view", [p, [], []], [TensorViewType(f32, (64,), (1,))])],
        [scalar(i32)] * 2)),
         "result.count", "get_tensor_shape", "'cuda_tile.get_tensor_shape' op expected 1 "
         "results due to tensor rank, but got 2"),
    Case("rmw addf on integers", _rmw(i32, AtomicRMWMode.ADDF),
         "atomic.mode", "atomic_rmw_tko", "atomic mode addf works on f16, bf16, f32 and f64 only"),
    Case("rmw xchg on tf32", _rmw(tf32, AtomicRMWMode.XCHG),
         "atomic.mode", "atomic_rmw_tko", "atomic mode xchg works on 32- and 64-bit values only"),
    Case("rmw add on i8", _rmw(i8, AtomicRMWMode.ADD),
         "atomic.mode", "atomic_rmw_tko", "atomic mode add works on i32 and i64 only"),
    Case("multimem float min", _multimem_f32_min, "multimem.reduction", "multimem_reduce_view_tko",
         "reduction min is not supported for f32"),
    Case("multimem on a unicast view", lambda: view_kernel(partition, lambda b, v, t: b.op(
        "multimem_load_reduce_view_tko", [v, [zero_i32(b)], None], [tile((16,), f32), token],
        {**WEAK, "reduction": MultimemReductionKind.ADD})),
         "type.view", "multimem_load_reduce_view_tko", "multimem ops need a view over a multicast"),
    # control flow and regions
    Case("if returns a view", _if_view_result, "type.view_value", "if", "result 0 is a view"),
    Case("reduce identity type", _reduce_identities, "attr.identities", "reduce",
         "'cuda_tile.reduce' op expect same type for operand at index: 0 and identity at "
         "index: 0 but got: 'f32' and 'i32'"),
    Case("reduce region arguments", _reduce_region, "region.args", "reduce",
         "'cuda_tile.reduce' op expect 2 block arguments but got: 1"),
    Case("print_tko in a reduce body", _reduce_printing, "region.effects", "print_tko",
         "'cuda_tile.print_tko' op only memory-effect-free operations are allowed inside "
         "'cuda_tile.reduce' (print_tko has memory effects)"),
    Case("loop returns a view", _loop_view_result, "type.view_value", "loop", "result 0 is a view"),
]


# ---- debug info (cuTile writes a DISubprogram per kernel and one per inlined helper) ------------

def _debug_fixture():
    """bool_logic: its entry and ops are scoped by the kernel's subprogram; two ops are inlined
    `astype` calls (call sites whose caller is in the kernel)."""
    module = fixture("bool_logic")
    function = module.functions[0]
    inlined = [op for op in function.walk() if isinstance(op.loc, CallSiteLoc)]
    return module, function, function.loc.scope, inlined[0]


def _rescoped(module, old, new):
    """Every location scoped by `old` moved to `new` (call sites included)."""
    def fix(loc):
        if isinstance(loc, DILoc) and loc.scope == old:
            return loc.replace(scope=new)
        if isinstance(loc, CallSiteLoc):
            return CallSiteLoc(fix(loc.callee), fix(loc.caller))
        return loc
    for function in module.functions:
        function.loc = fix(function.loc)
    for op in module.walk():
        op.loc = fix(op.loc)
    return module


def _linkage_name():
    module, _, sub, _ = _debug_fixture()
    return _rescoped(module, sub, sub.replace(linkage_name="bool_ops"))


def _subprogram_name_differs():
    """Only the linkage name is tied to the entry: NVIDIA accepts any plain name."""
    module, _, sub, _ = _debug_fixture()
    return _rescoped(module, sub, sub.replace(name="renamed"))


def _entry_call_site():
    module, function, _, _ = _debug_fixture()
    function.loc = CallSiteLoc(function.loc, function.loc)
    return module


def _entry_lexical_block():
    module, function, sub, _ = _debug_fixture()
    function.loc = function.loc.replace(scope=DILexicalBlock(sub, sub.file, 1, 1))
    return module


def _op_in_lexical_block(scope_of):
    """The second op (an assume) placed in a lexical block whose scope is `scope_of(...)`."""
    def make():
        module, function, sub, inlined = _debug_fixture()
        op = function.body.ops[1]
        scope = scope_of(sub, inlined.loc.callee.scope)
        op.loc = op.loc.replace(scope=DILexicalBlock(scope, scope.file, 1, 1))
        return module
    return make


def _op_in_helper():
    """An op placed directly in the inlined helper's subprogram (not through a call site)."""
    module, function, _, inlined = _debug_fixture()
    function.body.ops[1].loc = inlined.loc.callee
    return module


def _call_site_swapped():
    """A call site whose caller is in the helper: its scope is the helper's, not the kernel's."""
    module, _, _, inlined = _debug_fixture()
    inlined.loc = CallSiteLoc(inlined.loc.caller, inlined.loc.callee)
    return module


def _entry_without_location():
    module, function, _, _ = _debug_fixture()
    function.loc = None
    return module


def _entry_other_subprogram():
    """The entry's subprogram differs from its ops' in the line only."""
    module, function, sub, _ = _debug_fixture()
    function.loc = function.loc.replace(scope=sub.replace(line=3))
    return module


def _subprogram_flags(flags, version=V(13, 5)):
    """The kernel's subprogram with `flags`, the module at `version`."""
    def make():
        module, _, sub, _ = _debug_fixture()
        module.version = version
        return _rescoped(module, sub, sub.replace(flags=flags))
    return make


def _big_line(where):
    """A line number beyond 32 bits in an op's location, a lexical block or a subprogram."""
    def make():
        module, function, sub, _ = _debug_fixture()
        op = function.body.ops[1]
        if where == "loc":
            op.loc = op.loc.replace(line=1 << 32 | 7)
        elif where == "lexical block":
            op.loc = op.loc.replace(scope=DILexicalBlock(sub, sub.file, 1 << 32, 1))
        else:
            _rescoped(module, sub, sub.replace(scope_line=1 << 32 | 76))
        return module
    return make


# ---- optimization hints -------------------------------------------------------------------------

def _hints(arch="sm_100", **values) -> OptimizationHintsAttr:
    def attr(value):
        if isinstance(value, bool):
            return BoolAttr(value)
        return IntegerAttr(i32, value) if isinstance(value, int) else value
    return OptimizationHintsAttr(((arch, DictionaryAttr(tuple(
        (name, attr(value)) for name, value in values.items()))),))


def _entry_hints(hints, version=V(13, 5)):
    def make():
        module = kernel([], lambda b: None, version)
        module.functions[0].optimization_hints = hints
        return module
    return make


def _load_hints(hints):
    return lambda: view_kernel(partition, lambda b, view, _: b.op(
        "load_view_tko", [view, [zero_i32(b)], None], [tile((16,), f32), token],
        {**WEAK, "optimization_hints": hints}))


def _load_ptr_hints(hints):
    return lambda: kernel([scalar(PointerType(f32))], lambda b, p: b.op(
        "load_ptr_tko", [_pointer_tile(b, p), None, None, None], [tile((4,), f32), token],
        {**WEAK, "optimization_hints": hints}))


HINT_WARNING = dict(op="entry @k", severity="warning")
# NVIDIA's debug-info messages name the subprogram in full, as MLIR prints an attribute
_CASTS_SP = ('#cuda_tile.di_subprogram<file = #cuda_tile.di_file<"casts.py" in '
             '"fixtures/kernels">, line = 76, name = "bool_ops", ')
_STUB_OP_SCOPE = ('invalid operation debug info scope: #cuda_tile.di_subprogram<file = '
                  '#cuda_tile.di_file<"_stub.py" in ')
CASES += [
    # debug info: NVIDIA refuses all of these (tileiras 13.5, probed)
    Case("subprogram linkage name", _linkage_name, "debug.linkage_name", "entry @k",
         "'cuda_tile.entry' op invalid function debug info scope: " + _CASTS_SP
         + 'linkageName = "bool_ops"'),
    Case("entry location is a call site", _entry_call_site, "debug.entry_loc", "entry @k",
         "'cuda_tile.entry' op invalid function debug info location: loc(callsite("),
    Case("entry location in a lexical block", _entry_lexical_block, "debug.entry_scope",
         "entry @k", "'cuda_tile.entry' op invalid function debug info scope: "
         "#cuda_tile.di_lexical_block<scope = " + _CASTS_SP),
    Case("op in another subprogram", _op_in_helper, "debug.op_scope", "assume",
         _STUB_OP_SCOPE),
    Case("op lexical block in another subprogram",
         _op_in_lexical_block(lambda kernel_sp, helper_sp: helper_sp), "debug.op_scope", "assume",
         _STUB_OP_SCOPE),
    Case("call site called from another subprogram", _call_site_swapped, "debug.op_scope", "exti",
         _STUB_OP_SCOPE),
    Case("op scoped but entry not", _entry_without_location, "debug.op_scope", "make_token",
         "'cuda_tile.make_token' op invalid operation debug info scope: " + _CASTS_SP),
    Case("entry subprogram differs from its ops'", _entry_other_subprogram, "debug.op_scope",
         "make_token", "invalid operation debug info scope: " + _CASTS_SP),
    # NVIDIA's reader: "unrecognized flag bits (0x2) when parsing DISubprogramAttr"
    Case("subprogram flag bit 1", _subprogram_flags(2), "debug.subprogram_flags", "entry @k",
         "subprogram 'bool_ops' (linkage name 'bool_ops_Kt1_A1f32_1l0_A1f32_1l0_A1b8_1l0_A1i32_"
         "1l0_I64', casts.py:76) has unknown flag bits 0x2", reload=False),  # our reader refuses it too
    Case("subprogram flags before 13.5", _subprogram_flags(1, V(13, 4)), "debug.subprogram_flags",
         "entry @k", "subprogram 'bool_ops' (linkage name 'bool_ops_Kt1_A1f32_1l0_A1f32_1l0_A1b8_"
         "1l0_A1i32_1l0_I64', casts.py:76) has flags (declaration), which bytecode 13.4 cannot "
         "hold"),
    # NVIDIA keeps the low 32 bits of these numbers (tileirdisasm -g prints line 7 for 2**32+7)
    Case("location line beyond 32 bits", _big_line("loc"), "debug.line_range", "assume",
         "location fixtures/kernels/casts.py:4294967303:0 has a line or column beyond 32 bits"),
    Case("lexical block line beyond 32 bits", _big_line("lexical block"), "debug.line_range",
         "assume", "lexical block at casts.py:4294967296:1 has a line or column beyond 32 bits"),
    Case("subprogram scopeLine beyond 32 bits", _big_line("subprogram"), "debug.line_range",
         "entry @k", "subprogram 'bool_ops'"),
    # optimization hints: tileiras 13.5 compiles these (and ignores the hint); warnings
    Case("hint key unknown", _entry_hints(_hints("sm_70")), "hints.key",
         prefix="unknown hint key sm_70; expected default or one of sm_80", **HINT_WARNING),
    Case("hint key default before 13.3", _entry_hints(_hints("default"), V(13, 2)), "hints.key",
         prefix="hint key default needs bytecode 13.3", **HINT_WARNING),
    Case("hint unknown", _entry_hints(_hints(bogus=1)), "hints.param",
         prefix="bogus is not known hint for current Operation (sm_100; entry takes num_cta_in_cga", **HINT_WARNING),
    Case("hint for another op", _entry_hints(_hints(latency=3)), "hints.param",
         prefix="hint latency does not apply to entry", **HINT_WARNING),
    Case("hint newer than module", _entry_hints(_hints(num_worker_warps_per_cta=4), V(13, 2)),
         "hints.version", prefix="hint num_worker_warps_per_cta needs bytecode 13.3",
         **HINT_WARNING),
    Case("num_cta_in_cga not a power of two", _entry_hints(_hints(num_cta_in_cga=3)),
         "hints.value", prefix="expected power-of-two \u2264 16 for sm_100.num_cta_in_cga (1 to 16), got 3",
         **HINT_WARNING),
    Case("num_cta_in_cga on Ampere", _entry_hints(_hints("sm_80", num_cta_in_cga=2)),
         "hints.value", prefix="sm_80.num_cta_in_cga must be 1 on sm_80", **HINT_WARNING),
    Case("occupancy range", _entry_hints(_hints(occupancy=33)), "hints.value",
         prefix="integer value in the range [1, 32] is expected for sm_100.occupancy, got 33", **HINT_WARNING),
    Case("num_worker_warps_per_cta range", _entry_hints(_hints(num_worker_warps_per_cta=64)),
         "hints.value", prefix="expected power-of-two \u2264 32 for "
                               "sm_100.num_worker_warps_per_cta", **HINT_WARNING),
    Case("latency range", _load_hints(_hints("default", latency=11)), "hints.value",
         "load_view_tko", "integer value in the range [1, 10] is expected for default.latency, got 11",
         severity="warning"),
    Case("allow_tma not a boolean", _load_hints(_hints(allow_tma=1)), "hints.value",
         "load_view_tko", "boolean value expected for sm_100.allow_tma, got 1", severity="warning"),
    Case("allow_tma on a pointer load", _load_ptr_hints(_hints(allow_tma=True)), "hints.param",
         "load_ptr_tko", "hint allow_tma does not apply to load_ptr_tko; it takes latency",
         severity="warning"),
    Case("hint entry not a dictionary", _entry_hints(OptimizationHintsAttr(
        (("sm_100", IntegerAttr(i32, 1)),))), "hints.entry", "entry @k",
         "hints for sm_100 must be a dictionary", reload=False),
]

# ---- array attributes whose length or element types follow the op ------------------------------

def _zeros(b, shape=(16,)):
    return const(b, tile(shape, f32), bytes(4 * shape[0]))


# Each view access with its tile, built with `inbounds` (one index: a 1-d partition view).
VIEW_ACCESSES = {
    "load_view_tko": lambda b, v, attrs: b.op(
        "load_view_tko", [v, [zero_i32(b)], None], [tile((16,), f32), token], {**WEAK, **attrs}),
    "store_view_tko": lambda b, v, attrs: b.op(
        "store_view_tko", [_zeros(b), v, [zero_i32(b)], None], [token], {**WEAK, **attrs}),
    "atomic_red_view_tko": lambda b, v, attrs: b.op(
        "atomic_red_view_tko", [v, [zero_i32(b)], _zeros(b), None], [token],
        {"memory_ordering_semantics": Order.RELAXED, "memory_scope": MemoryScope.DEVICE,
         "mode": AtomicRMWMode.ADDF, **attrs}),
    "multimem_load_reduce_view_tko": lambda b, v, attrs: b.op(
        "multimem_load_reduce_view_tko", [v, [zero_i32(b)], None], [tile((16,), f32), token],
        {**WEAK, "reduction": MultimemReductionKind.ADD, **attrs}),
    "multimem_reduce_view_tko": lambda b, v, attrs: b.op(
        "multimem_reduce_view_tko", [v, _zeros(b), [zero_i32(b)], None], [token],
        {"memory_ordering_semantics": Order.RELAXED, "memory_scope": MemoryScope.DEVICE,
         "reduction": MultimemReductionKind.ADD, **attrs}),
    "multimem_store_view_tko": lambda b, v, attrs: b.op(
        "multimem_store_view_tko", [v, _zeros(b), [zero_i32(b)], None], [token],
        {**WEAK, **attrs}),
}


def _view_access(mnemonic, inbounds, version=V(13, 5)):
    ptr_attr = PtrAttr.MULTICAST if mnemonic.startswith("multimem") else PtrAttr.NONE
    return lambda: view_kernel(partition, lambda b, v, _: VIEW_ACCESSES[mnemonic](
        b, v, {"inbounds": inbounds}), ptr_attr=ptr_attr, version=version)


def _combiner(mnemonic, element, identities):
    """reduce / scan of a 8-element tile of `element` with the given identities."""
    def build(b, x):
        source = b.op("broadcast", [b.op("reshape", [x], [tile((1,), element)])],
                      [tile((8,), element)])
        region, inner = b.region([scalar(element)] * 2)
        combine = "xori" if element == i1 else "maxf"
        inner.op("yield", [[inner.op(combine, list(inner.block.args), [scalar(element)])]])
        result = scalar(element) if mnemonic == "reduce" else tile((8,), element)
        attrs = {"dim": 0, "identities": identities}
        if mnemonic == "scan":
            attrs["reverse"] = False
        b.op(mnemonic, [[source]], [result], attrs, regions=[region])
    return lambda: kernel([scalar(element)], build)


def _entry_arg_attrs(*dictionaries):
    """A two-parameter 13.5 entry whose argument attributes are `dictionaries`."""
    def make():
        module = kernel([scalar(i32), scalar(f32)], lambda b, x, y: None)
        module.functions[0].arg_attrs = ArrayAttr(tuple(
            DictionaryAttr(tuple((name, IntegerAttr(i32, 1)) for name in names))
            if isinstance(names, tuple) else names for names in dictionaries))
        return module
    return make


CASES += [
    # NVIDIA (tileirdisasm and tileiras, 13.4 and 13.5): "inbounds size (N) must match the number
    # of index dimensions (1)", an empty array included
    *[Case(f"{mnemonic} inbounds empty", _view_access(mnemonic, ()), "attr.inbounds", mnemonic,
           "inbounds has 0 entries for 1 indices") for mnemonic in VIEW_ACCESSES],
    *[Case(f"{mnemonic} inbounds empty 13.4", _view_access(mnemonic, (), V(13, 4)),
           "attr.inbounds", mnemonic, "inbounds has 0 entries for 1 indices")
      for mnemonic in ("load_view_tko", "store_view_tko")],
    Case("store inbounds too long", _view_access("store_view_tko", (True, False)),
         "attr.inbounds", "store_view_tko", "inbounds has 2 entries for 1 indices"),
    Case("permutation too short", _tile_op("permute", tile((2, 4), f32), tile((4, 2), f32),
                                           {"permutation": (0,)}),
         "attr.permutation", "permute", "'cuda_tile.permute' op expect permutation size (1) to "
         "equal the rank of the source (2) (permutation [0] must be a permutation of 0..1)"),
    Case("permutation too long", _tile_op("permute", tile((2, 4), f32), tile((4, 2), f32),
                                          {"permutation": (1, 0, 2)}),
         "attr.permutation", "permute", "'cuda_tile.permute' op expect permutation size (3) to "
         "equal the rank of the source (2) (permutation [1, 0, 2] must be a permutation of "
         "0..1)"),
    # NVIDIA: "expect identities to match the number of operands" / "expect same type for operand
    # at index: 0 and identity at index: 0 but got: 'f32' and 'none'"
    Case("reduce without identities", _combiner("reduce", f32, ()), "attr.identities", "reduce",
         "'cuda_tile.reduce' op expect identities to match the number of operands but got: 1 "
         "operands and 0 identities"),
    Case("scan with two identities", _combiner("scan", f32, (FloatAttr(f32, 0),) * 2),
         "attr.identities", "scan", "'cuda_tile.scan' op expect identities to match the number "
         "of operands but got: 1 operands and 2 identities"),
    Case("scan identity f64 for f32", _combiner("scan", f32, (FloatAttr(f64, 0),)),
         "attr.identities", "scan", "'cuda_tile.scan' op expect same type for operand at index: "
         "0 and identity at index: 0 but got: 'f32' and 'f64'"),
    Case("reduce identity a string", _combiner("reduce", f32, (StringAttr("x"),)),
         "attr.identities", "reduce", "'cuda_tile.reduce' op expect same type for operand at "
         "index: 0 and identity at index: 0 but got: 'f32' and 'none' (identity 0 must be an "
         "integer, float or bool value, got StringAttr)"),
    Case("scan identity a bool for f32", _combiner("scan", f32, (BoolAttr(False),)),
         "attr.identities", "scan", "'cuda_tile.scan' op expect same type for operand at index: "
         "0 and identity at index: 0 but got: 'f32' and 'i1'"),
    Case("reduce identity i8 for i1", _combiner("reduce", i1, (IntegerAttr(i8, 0),)),
         "attr.identities", "reduce", "'cuda_tile.reduce' op expect same type for operand at "
         "index: 0 and identity at index: 0 but got: 'i1' and 'i8'"),
    # NVIDIA: "expects argument attribute array to have the same number of elements as the number
    # of function arguments", "Array of dictionary attributes", "arguments may only have dialect
    # attributes"
    Case("entry arg_attrs count", _entry_arg_attrs(("cuda_tile.x",)), "entry.arg_attrs",
         "entry @k", "expected 2 argument attribute dictionaries, one per parameter, got 1"),
    Case("entry arg_attrs too many", _entry_arg_attrs((), ("cuda_tile.x",), ()),
         "entry.arg_attrs", "entry @k", "expected 2 argument attribute dictionaries"),
    Case("entry arg_attrs not dictionaries", _entry_arg_attrs(IntegerAttr(i32, 1), ()),
         "entry.arg_attrs", "entry @k", "argument attributes must be an array of dictionaries; "
                                        "entry 0 is a IntegerAttr"),
    Case("entry arg_attrs plain name", _entry_arg_attrs(("noalias",), ()), "entry.arg_attrs",
         "entry @k", "argument attribute 'noalias' is not dialect-qualified"),
]

# IR NVIDIA accepts that looks close to the cases above: the verifier must stay quiet.
VALID = {
    "subprogram plain name differs": _subprogram_name_differs,
    "op in a lexical block of the entry's subprogram": _op_in_lexical_block(
        lambda kernel_sp, helper_sp: kernel_sp),
    "every known hint in range": _entry_hints(OptimizationHintsAttr((
        ("sm_80", DictionaryAttr((("num_cta_in_cga", IntegerAttr(i32, 1)),))),
        ("sm_100", DictionaryAttr((("num_cta_in_cga", IntegerAttr(i32, 16)),
                                   ("num_worker_warps_per_cta", IntegerAttr(i32, 8)),
                                   ("occupancy", IntegerAttr(i32, 32))))),
        ("default", DictionaryAttr((("occupancy", IntegerAttr(i32, 1)),)))))),
    "load hints in range": _load_hints(_hints("default", latency=10, allow_tma=False)),
    "sm_90 key in 13.1": _entry_hints(_hints("sm_90", num_cta_in_cga=2), V(13, 1)),
    **{f"{mnemonic} inbounds one per index": _view_access(mnemonic, (True,))
       for mnemonic in VIEW_ACCESSES},
    "reduce f16 with a bf16 identity": _combiner("reduce", f16, (FloatAttr(bf16, 0),)),
    "scan bf16 with a f16 identity": _combiner("scan", bf16, (FloatAttr(f16, 0),)),
    "reduce i1 with a bool identity": _combiner("reduce", i1, (BoolAttr(True),)),
    "entry arg_attrs all empty, any count": _entry_arg_attrs((),),
    "entry arg_attrs one per parameter": _entry_arg_attrs(("cuda_tile.x",), ()),
}


@pytest.mark.parametrize("name", sorted(VALID))
def test_close_to_invalid_but_valid(name):
    module = _reload(VALID[name]())
    assert diagnostics(module) == []


def _reload(module: Module) -> Module:
    """Through our writer and reader, so ops carry real byte offsets; builder IR the writer
    refuses stays as built."""
    try:
        data = tilebc.dump(module, module.version)
    except (EncodeError, tilebc.VersionError):
        return module
    try:
        return tilebc.load(data, verify=False)
    except tilebc.DecodeError as error:  # e.g. a tile over DecodeLimits.max_tile_elements
        assert "limit exceeded" in error.message, error
        return module


def _target(module: Module, case: Case):
    if case.op == "module":
        return None
    if case.op.startswith("entry @"):
        return module.functions[-1]
    if case.op.startswith("global @"):
        return module.globals[0]
    return ops_named(module, case.op)[case.occurrence]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_invalid_ir_is_reported(case):
    module = _reload(case.make()) if case.reload else case.make()
    found = [d for d in diagnostics(module) if d.severity == case.severity]
    assert found, f"no {case.severity} reported"
    first = found[0]
    assert (first.rule, first.op.split(" @")[0]) == (case.rule, case.op.split(" @")[0]), str(first)
    assert first.message.startswith(case.prefix), first.message
    target = _target(module, case)
    assert first.offset == getattr(target, "offset", None)
    assert first.file == module.source
    if case.severity == "error":
        with pytest.raises(VerificationError) as raised:
            verify(module)
        assert raised.value.rule == case.rule
    else:
        verify(module)  # warnings alone do not fail verification


def test_every_rule_the_verifier_reports_has_a_case():
    import re
    from pathlib import Path
    source = "".join(p.read_text() for p in Path(tilebc.__file__).parent.joinpath("verify").glob("*.py"))
    rules = set(re.findall(r'"((?:[a-z_]+)\.[a-z_0-9]+)"', source))
    rules = {r for r in rules if r.split(".")[0] in {
        "module", "symbol", "global", "ssa", "terminator", "region", "entry", "op", "attr",
        "version", "type", "shape", "operand", "result", "memory", "atomic", "multimem", "assume",
        "print", "divi", "index", "debug", "hints"}}
    covered = {case.rule for case in CASES}
    assert sorted(rules - covered) == [], sorted(rules - covered)


def test_location_from_a_fixture_file_names_file_and_offset():
    module = _swap_ops()
    with pytest.raises(VerificationError) as raised:
        verify(module)
    op = module.functions[0].body.ops[1]
    assert str(raised.value).startswith(f"{module.source}: offset 0x{op.offset:x}: make_tensor_view: ")


def test_location_from_text_names_line_and_column():
    from tilebc.text import parse_module
    module = parse_module("cuda_tile.module @m {\n"
                          "  entry @k(%x: tile<i32>, %y: tile<i32>) {\n"
                          "      %0 = addf %x, %y : tile<i32>\n"
                          "    return\n  }\n}\n", "kernel.tileir")
    assert ops_named(module, "addf")[0].text_pos == (3, 7)
    with pytest.raises(VerificationError) as raised:
        verify(module)
    assert str(raised.value).startswith("kernel.tileir:3:7: addf: 'cuda_tile.addf' op operand "
                                        "#0 must be")


def test_diagnostics_lists_every_problem_in_walk_order():
    module = kernel([scalar(i32), scalar(f32)], lambda b, x, y: (
        b.op("addf", [x, x], [scalar(i32)]), b.op("addi", [y, y], [scalar(f32)])))
    assert [(d.rule, d.op) for d in diagnostics(module)] == [
        ("type.operand", "addf"), ("type.operand", "addi")]
