"""pack / unpack: a rank-1 tile <-> its bytes as a tile of i8.

The byte image is the data layout of the element type (little-endian elements back to back; 4-bit
elements two to a byte, the first in the low nibble). It is built in shared memory: every thread
stores its slots at their linear position, then reads the elements of the other view back.
"""
from __future__ import annotations

from . import dtypes
from .common import Tile
from .registry import lowers



def _check(lw, op, element):
    name = dtypes.name_of(element)
    if name in ("i1", "ptr") or getattr(element, "bits", 8) not in (4, 8, 16, 32, 64):
        raise lw.error(op, f"cannot pack/unpack {name} elements")
    dtypes.check_supported(element, op.name)


@lowers("pack")
def lower_pack(lw, op):
    w = lw.w
    source: Tile = lw.get(op.operand_values[0])
    result_type = op.results[0].type
    _check(lw, op, source.element)
    [offset] = lw.reserve_smem([source.count * dtypes.byte_size(source.element)])
    lw.smem_write(source, offset)  # one element (or one 4-bit code) per storage unit
    lw.barrier()
    byte_type = result_type.element
    regs = []
    for k in range(lw.slots(result_type.num_elements)):
        index = lw.elem_index(result_type.num_elements, k)
        if source.element.bits == 4:
            first_index, second_index = w.reg("b32"), w.reg("b32")
            w(f"shl.b32 {first_index}, {index}, 1")
            w(f"add.u32 {second_index}, {first_index}, 1")
            low = lw.smem_read(offset, first_index, byte_type)
            high = lw.smem_read(offset, second_index, byte_type)
            nibble, shifted, byte = w.reg("b32"), w.reg("b32"), w.reg("b32")
            w(f"and.b32 {nibble}, {low}, 15")
            w(f"shl.b32 {shifted}, {high}, 4")
            w(f"or.b32 {byte}, {nibble}, {shifted}")
            regs.append(lw.normalize_int(byte, byte_type))
        else:
            regs.append(lw.smem_read(offset, index, byte_type))
    lw.barrier()
    lw.set(op.results[0], Tile(result_type, regs))


@lowers("unpack")
def lower_unpack(lw, op):
    w = lw.w
    source: Tile = lw.get(op.operand_values[0])
    result_type = op.results[0].type
    element = result_type.element
    _check(lw, op, element)
    [offset] = lw.reserve_smem([source.count])
    lw.smem_write(source, offset)
    lw.barrier()
    regs = []
    for k in range(lw.slots(result_type.num_elements)):
        index = lw.elem_index(result_type.num_elements, k)
        if element.bits == 4:
            byte_index, odd, shift = w.reg("b32"), w.reg("b32"), w.reg("b32")
            w(f"shr.u32 {byte_index}, {index}, 1")
            w(f"and.b32 {odd}, {index}, 1")
            w(f"shl.b32 {shift}, {odd}, 2")
            byte = lw.smem_read(offset, byte_index, source.element)
            code, out = w.reg("b32"), w.reg("b16")
            w(f"shr.u32 {code}, {byte}, {shift}")
            w(f"and.b32 {code}, {code}, 15")
            w(f"cvt.u16.u32 {out}, {code}")
            regs.append(out)
        else:
            regs.append(lw.smem_read(offset, index, element))
    lw.barrier()
    lw.set(op.results[0], Tile(result_type, regs))
