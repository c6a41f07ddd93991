"""mmaf / mmai / mmaf_scaled. First version: operands go to shared memory and each thread computes its result
slots as dot products in a uniform PTX loop (f32 accumulation for f16/bf16/tf32/fp8 inputs, f64 for
f64, s32 for i8). mma.sync with ldmatrix is the planned fast path (sm_80+)."""
from __future__ import annotations

from tilebc.ops.enums import Signedness

from . import dtypes
from .lowerer import Tile
from .registry import lowers


def _operand_index(lw, mi, batch, rows, cols, row, col):
    """Linear index of (batch..., row, col) in a [B, rows, cols] or [rows, cols] tile."""
    w = lw.w
    index = w.reg("b32")
    w(f"mad.lo.u32 {index}, {row}, {cols}, {col}")
    if batch is not None:
        out = w.reg("b32")
        w(f"mad.lo.u32 {out}, {batch}, {rows * cols}, {index}")
        return out
    return index


def _block_index(lw, kk, block: int) -> str:
    """kk // block (u32) for the scale block that K index kk falls in."""
    w = lw.w
    out = w.reg("b32")
    if block & (block - 1) == 0:
        w(f"shr.u32 {out}, {kk}, {block.bit_length() - 1}")
    else:
        w(f"div.u32 {out}, {kk}, {block}")
    return out


def _as_tf32(lw, tile: Tile) -> Tile:
    if tile.element.name != "tf32":
        return tile
    return Tile(tile.type, [dtypes.round_tf32(lw.w, reg) for reg in tile.regs])


def _matmul(lw, op, integer: bool, scaled: bool = False):
    w = lw.w
    lhs, rhs, acc = (lw.get(op.operands[n]) for n in ("lhs", "rhs", "acc"))
    result_type = op.results[0].type
    shape = result_type.shape
    batched = len(shape) == 3
    m, n = shape[-2], shape[-1]
    k_dim = lhs.type.shape[-1]
    # tf32 inputs are f32 registers that may carry more precision (a tile loaded from a tf32
    # array holds the stored f32 bits): mma reads them rounded to tf32, nearest even, as the
    # reference does (tilebc.interp widens tf32 operands through convert's f32 -> tf32)
    lhs, rhs = (_as_tf32(lw, t) for t in (lhs, rhs))
    operands = [lhs, rhs]
    if scaled:  # lhs_scale [.., M, K/B], rhs_scale [.., K/B, N]: one scale per block of B along K
        lhs_scale, rhs_scale = lw.get(op.operands["lhs_scale"]), lw.get(op.operands["rhs_scale"])
        operands += [lhs_scale, rhs_scale]
        lhs_blocks, rhs_blocks = lhs_scale.type.shape[-1], rhs_scale.type.shape[-2]
        if k_dim % lhs_blocks or k_dim % rhs_blocks:
            raise lw.error(op, f"K={k_dim} is not a multiple of the scale blocks "
                               f"({lhs_blocks}, {rhs_blocks})")
    offsets = lw.reserve_smem([lw.smem_size_of(t.type) for t in operands])
    for tile, offset in zip(operands, offsets):
        lw.smem_write(tile, offset)
    lw.barrier()
    out_element = result_type.element
    work = "s32" if integer else ("f64" if out_element.name == "f64" else "f32")
    regs = []
    for k in range(lw.slots(result_type.num_elements)):
        mi = lw.multi_index(shape, k)
        batch = mi[0] if batched else None
        row, col = mi[-2], mi[-1]
        total = w.reg("b32" if integer else work)
        start = acc.slot(k)
        if integer:
            w(f"mov.b32 {total}, {start}")
        elif work == "f64":
            w(f"mov.f64 {total}, {start}")
        else:
            w(f"mov.f32 {total}, {dtypes.to_f32(w, start, out_element)}")
        kk = w.reg("b32")
        w(f"mov.u32 {kk}, 0")
        top = w.label("dot")
        w.place(top)
        a = lw.smem_read(offsets[0], _operand_index(lw, mi, batch, m, k_dim, row, kk), lhs.element)
        b = lw.smem_read(offsets[1], _operand_index(lw, mi, batch, k_dim, n, kk, col), rhs.element)
        if integer:
            if op.attrs["signedness_lhs"] is Signedness.UNSIGNED:
                a = lw.zero_extended(a, lhs.element)
            if op.attrs["signedness_rhs"] is Signedness.UNSIGNED:
                b = lw.zero_extended(b, rhs.element)
            w(f"mad.lo.s32 {total}, {a}, {b}, {total}")
        elif work == "f64":
            w(f"fma.rn.f64 {total}, {a}, {b}, {total}")
        else:
            fa = dtypes.to_f32(w, a, lhs.element)
            fb = dtypes.to_f32(w, b, rhs.element)
            if scaled:  # element * its block's scale, in f32 (as the reference does)
                sa = lw.smem_read(offsets[2], _operand_index(
                    lw, mi, batch, m, lhs_blocks, row, _block_index(lw, kk, k_dim // lhs_blocks)),
                    lhs_scale.element)
                sb = lw.smem_read(offsets[3], _operand_index(
                    lw, mi, batch, rhs_blocks, n, _block_index(lw, kk, k_dim // rhs_blocks), col),
                    rhs_scale.element)
                xa, xb = w.reg("f32"), w.reg("f32")
                w(f"mul.rn.f32 {xa}, {fa}, {dtypes.to_f32(w, sa, lhs_scale.element)}")
                w(f"mul.rn.f32 {xb}, {fb}, {dtypes.to_f32(w, sb, rhs_scale.element)}")
                fa, fb = xa, xb
            w(f"fma.rn.f32 {total}, {fa}, {fb}, {total}")
        w(f"add.u32 {kk}, {kk}, 1")
        again = w.reg("pred")
        w(f"setp.lt.u32 {again}, {kk}, {k_dim}")
        w(f"@{again} bra.uni {top}")
        if not integer and work == "f32":
            total = dtypes.from_f32(w, total, out_element)
        regs.append(total)
    lw.barrier()
    lw.set(op.results[0], Tile(result_type, regs))


@lowers("mmaf")
def lower_mmaf(lw, op):
    _matmul(lw, op, integer=False)


@lowers("mmai")
def lower_mmai(lw, op):
    _matmul(lw, op, integer=True)


@lowers("mmaf_scaled")
def lower_mmaf_scaled(lw, op):
    _matmul(lw, op, integer=False, scaled=True)
