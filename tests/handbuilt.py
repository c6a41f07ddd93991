"""Kernels built with tilebc's own builder, for ops and attribute values cuTile never emits.

Each builder returns (module, gpu_name) where gpu_name is an architecture tileiras compiles it for.
"""
import tilebc
from tilebc.ir import (DenseElementsAttr, Module, PartitionViewType, PointerType, SameElementsAttr,
                       TensorViewType, f16, f32, i32, i64, scalar, tile, token)
from tilebc.ir.builder import new_function
from tilebc.ops import (IntegerOverflow, MemoryOrderingSemantics, MemoryScope,
                        MultimemReductionKind, PtrAttr, RoundingMode, Signedness)


def i32_constant(builder, value: int):
    data = (value & 0xFFFFFFFF).to_bytes(4, "little")
    return builder.op("constant", [], [scalar(i32)],
                      {"value": DenseElementsAttr(scalar(i32), data)})


def misc_ops() -> tuple:
    """get_tensor_shape, mulhii, ptr_to_int, ptr_to_ptr, memory_fence_alias_tko, alloca."""
    module = Module(version=tilebc.Version(13, 5))
    b = new_function(module, "misc_ops", [scalar(PointerType(f32)), scalar(i32), scalar(i32)])
    pointer, size, stride = b.block.args
    first = b.op("make_token", [], [token])
    view = b.op("make_tensor_view", [pointer, [size], [stride]],
                [TensorViewType(f32, (None,), (None,))])
    b.op("get_tensor_shape", [view], [scalar(i32)])
    b.op("mulhii", [size, stride], [scalar(i32)])
    b.op("ptr_to_int", [pointer], [scalar(i64)])
    b.op("ptr_to_ptr", [pointer], [scalar(PointerType(f16))])
    b.op("memory_fence_alias_tko", [first], [token])
    b.op("alloca", [], [scalar(PointerType(f32))], {"num_elem": 16, "alignment": 16})
    b.op("return", [[]])
    return module, "sm_90"


def multimem_ops() -> tuple:
    """The three 13.5 multimem view ops over a multicast tensor view."""
    module = Module(version=tilebc.Version(13, 5))
    b = new_function(module, "multimem_ops", [scalar(PointerType(f32, PtrAttr.MULTICAST))])
    (pointer,) = b.block.args
    view_type = TensorViewType(f32, (64,), (1,), PtrAttr.MULTICAST)
    view = b.op("make_tensor_view", [pointer, [], []], [view_type])
    parts = b.op("make_partition_view", [view], [PartitionViewType((16,), view_type, (0,))])
    zero = i32_constant(b, 0)
    values, loaded = b.op("multimem_load_reduce_view_tko", [parts, [zero], None],
                          [tile((16,), f32), token],
                          {"memory_ordering_semantics": MemoryOrderingSemantics.WEAK,
                           "reduction": MultimemReductionKind.ADD})
    reduced = b.op("multimem_reduce_view_tko", [parts, values, [zero], loaded], [token],
                   {"memory_ordering_semantics": MemoryOrderingSemantics.RELAXED,
                    "memory_scope": MemoryScope.DEVICE, "reduction": MultimemReductionKind.ADD})
    b.op("multimem_store_view_tko", [parts, values, [zero], reduced], [token],
         {"memory_ordering_semantics": MemoryOrderingSemantics.WEAK})
    b.op("return", [[]])
    return module, "sm_100"


def attribute_variants() -> tuple:
    """Attribute values cuTile does not produce: divi rounding zero, saturating ftoi, overflow
    flags, unsigned `for`, same_elements."""
    module = Module(version=tilebc.Version(13, 5))
    b = new_function(module, "attribute_variants", [scalar(i32), scalar(i32), scalar(f32)])
    x, y, real = b.block.args
    b.op("divi", [x, y], [scalar(i32)], {"signedness": Signedness.UNSIGNED,
                                          "rounding": RoundingMode.ZERO})
    b.op("ftoi", [real], [scalar(i32)], {"signedness": Signedness.SIGNED,
                                          "rounding_mode": RoundingMode.NEAREST_INT_TO_ZERO,
                                          "saturating": True})
    b.op("addi", [x, y], [scalar(i32)], {"overflow": IntegerOverflow.NO_SIGNED_WRAP})
    b.op("muli", [x, y], [scalar(i32)], {"overflow": IntegerOverflow.NO_WRAP})
    b.op("negi", [x], [scalar(i32)], {"overflow": IntegerOverflow.NO_SIGNED_WRAP})
    b.op("assume", [x], [scalar(i32)], {"predicate": SameElementsAttr(())})
    one = i32_constant(b, 1)
    body, inner = b.region([scalar(i32)])
    inner.op("continue", [[]])
    b.op("for", [x, y, one, []], [], {"unsignedCmp": True}, regions=[body])
    b.op("return", [[]])
    return module, "sm_90"


KERNELS = {"misc_ops": misc_ops, "multimem_ops": multimem_ops,
           "attribute_variants": attribute_variants}
