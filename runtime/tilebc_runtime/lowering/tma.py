"""TMA tensor maps for the sm_90 wgmma K-loop pipeline (the sm_90 default, runtime/LAYOUTS.md).

A staged operand whose stage layout is the 128-byte swizzle (matmul._swizzles) is what a tiled
tensor map with SWIZZLE_128B writes: boxes of 64 16-bit elements (128-byte rows) by the tile's
rows, one box per 64-column block. The maps are built on the host at launch from the kernel's
own parameters (base pointer, shape, strides), so a map is only planned where each of those is a
parameter (through `assume`) or a constant, and where the facts the launch checks make it valid:
base 16-byte aligned, the row stride a multiple of 16 bytes, the inner dim contiguous.

`TensorMapPlan.record()` is the kernel metadata a launcher reads (KernelInfo.tensor_maps): the
parameter holding the map, the array's flat parameter index, element type, rank, dims and
strides (each ["param", i] or ["const", n], dimension 0 the contiguous one, strides in elements
of dims 1..), box, swizzle, oob fill (zero) and interleave (none).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from tilebc.ops.table import by_mnemonic

from . import dtypes

# the op that makes the tensor view a map describes (its operands are the launch's values)
_MAKES_TENSOR = by_mnemonic({"make_tensor_view": True}, "TMA tensor map sources")
SWIZZLE = 128  # bytes: the only swizzle the wgmma stages use
BOX_COLS = SWIZZLE // 2  # 16-bit elements of one 128-byte box row
MAX_BOX = 256  # elements per box dimension (cuTensorMapEncodeTiled)
MAX_RANK = 5
# Element types a map is planned for: the 16-bit wgmma operands, which every launcher encodes
# (tensor_maps.ELEMENT_BYTES, runtime/cpp tensor_map.cpp; test_rt_tma checks they agree)
ELEMENTS = ("f16", "bf16")


@dataclass(frozen=True)
class TensorMapPlan:
    param: str  # the kernel parameter holding the map
    array: int  # flat parameter index of the base pointer
    element: str  # Tile IR element type name
    dims: Tuple[tuple, ...]  # dimension 0 first: ("param", i) or ("const", n)
    strides: Tuple[tuple, ...]  # of dims 1.., in elements
    box: Tuple[int, ...]  # dimension 0 first

    def record(self) -> dict:
        return {"param": self.param, "array": self.array, "element": self.element,
                "rank": len(self.dims), "dims": [list(d) for d in self.dims],
                "strides": [list(s) for s in self.strides], "box": list(self.box),
                "swizzle": SWIZZLE, "oob_fill": "zero", "interleave": "none"}


def _param_index(lw, value) -> Optional[int]:
    """The entry parameter `value` is, through ops that forward an operand (assume)."""
    for _ in range(64):
        owner = value.owner
        if owner is lw.function.body:
            return value.index
        if owner is None or not hasattr(owner, "spec") or not owner.spec.forwards:
            return None
        value = owner.operands[owner.spec.forwards]
    return None


def _source(lw, static, values) -> Optional[tuple]:
    if static is not None:
        return ("const", int(static))
    index = _param_index(lw, next(values))
    return None if index is None else ("param", index)


def plan(lw, load, staged_view, shape) -> Optional[Tuple[tuple, tuple, tuple, tuple]]:
    """(array, element, dims, strides) of the map that moves view load `load`'s [..., rows,
    cols] tile (`shape`, the staged view's own dim order; leading dims 1, as a batched GEMM's
    (1, M, K)) into 128-byte swizzled staging, or None where TMA cannot: a tensor view of rank
    2 to 5 made by make_tensor_view from parameters, its contiguous dim the tile's last, base
    and every other stride 16-byte multiples by the assumed facts, 16-bit elements, whole
    64-element column blocks, at most 256 rows. Map dim j is the tensor dim of tile dim -1-j."""
    from tilebc.ir.types import PartitionViewType
    from tilebc.ops.enums import PaddingValue
    from .common import SubView
    if not isinstance(staged_view, SubView) or not isinstance(staged_view.type, PartitionViewType):
        return None
    vt, tensor = staged_view.type, staged_view.tensor
    rank = len(shape)
    if not 2 <= rank <= MAX_RANK or len(tensor.shape) != rank or any(d != 1 for d in shape[:-2]):
        return None
    rows, cols = shape[-2:]
    size = dtypes.byte_size(tensor.type.element)
    if dtypes.name_of(tensor.type.element) not in ELEMENTS or cols % BOX_COLS or rows % 8 or rows > MAX_BOX or tensor.stride_div is None:
        return None
    # TMA fills what lies outside the tensor with zeros: only zero / undetermined padding
    if getattr(vt, "padding_value", None) not in (None, PaddingValue.ZERO):
        return None
    order = list(vt.dim_map or range(rank))[::-1]  # tensor dims, map dim 0 first
    if tensor.type.strides[order[0]] != 1 or tensor.base_align % 16 \
            or any((tensor.stride_div[d] * size) % 16 for d in order[1:]):
        return None
    if any(dtypes.name_of(v.type.element) != "i32" for v in load.operands["index"]):
        return None  # box coordinates are 32-bit
    view_op = lw.forward.get(load.operands["view"], load.operands["view"]).owner
    made = getattr(view_op, "operands", {}).get("tensor_view") if view_op is not None else None
    made = made.owner if made is not None else None
    if made is None or getattr(made, "name", None) not in _MAKES_TENSOR:
        return None
    array = _param_index(lw, made.operands["base"])
    shape_values = iter(made.operands["dynamicShape"])
    stride_values = iter(made.operands["dynamicStrides"])
    extents = [_source(lw, s, shape_values) for s in tensor.type.shape]
    steps = [_source(lw, s, stride_values) for s in tensor.type.strides]
    if array is None or None in extents or None in steps:
        return None
    return (array, dtypes.name_of(tensor.type.element), tuple(extents[d] for d in order),
            tuple(steps[d] for d in order[1:]))


def tensor_map(lw, found, rows: int) -> str:
    """The kernel parameter of the map for `found` (plan()'s answer) with boxes of `rows` rows,
    declared once per kernel (lw.tensor_maps)."""
    array, element, dims, strides = found
    box = (BOX_COLS, rows) + (1,) * (len(dims) - 2)
    for existing in lw.tensor_maps:
        if (existing.array, existing.element, existing.dims, existing.strides, existing.box) \
                == (array, element, dims, strides, box):
            return existing.param
    name = f"{lw.function.name}_tmap_{len(lw.tensor_maps)}"
    lw.tensor_maps.append(TensorMapPlan(name, array, element, dims, strides, box))
    return name
