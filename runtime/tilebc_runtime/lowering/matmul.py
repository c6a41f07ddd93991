"""mmaf / mmai / mmaf_scaled. On sm_80+ with whole warps, M % 16 == 0 and N % 8 == 0, these run on
the tensor cores with the result in the mma accumulator layout (layout.MmaAcc, see
runtime/LAYOUTS.md) where the warps tile the blocks (anchors.mma_layout): mmaf on f16, bf16 or fp8
(e4m3, e5m2: widened to f16, exactly; f16 products are exact in the f32 accumulation) operands
with an f16, bf16 or f32 accumulator through mma.sync.m16n8k16 (K % 16 == 0), fp8 on sm_89+
with K % 32 == 0 through the native mma.sync.m16n8k32 .e4m3/.e5m2 (f32 accumulators, operands
staged like i8's: B transposed), tf32 through
m16n8k8, f64 through m8n8k4 (8x8 blocks, M % 8 == 0), mmai on i8 through m16n8k32 (.s8/.u8). The
accumulator enters the first mma as its C fragment, so each K step's sum is rounded once to the
accumulator type, with no shared-memory round trip; operands come from padded shared staging
through ldmatrix; a `for` that carries the accumulator keeps it in that layout (control_flow.py).
An f16 / bf16 mmaf whose blocks no warp grid divides takes _mma_sync: each warp computes blocks in
turn and they go through shared memory back to the default distribution, where each thread adds
its accumulator slots in f32 and rounds once. An f32 [M, N] product whose shape fits
(_blocked_plan) runs in register tiles: a few warps each keep an mr x nr block of accumulators
across K, read A rows 16 bytes at a time and B rows nr wide, and the result returns to Cyclic
through shared memory; a B defined before the `for` around the mmaf is read into registers once,
before the loop. Everything else: each thread computes its result
slots as dot products in a uniform PTX loop (f32 accumulation for f16/bf16/tf32/fp8 inputs, f64
for f64, s32 for i8), all slots in one K loop where their rows and columns are a fixed distance
apart. A transposed B read only by tensor-core mmas is staged from its source (Transposed); an
aligned view load read only by one such mma is copied into the staging by cp.async (ViewStaged).
In a `for` whose body is such loads feeding one mma (a GEMM K loop), those copies run one or
two iterations ahead through 2-4 rotating stages (_KPipeline), with a wgmma group left in
flight across iterations where the loop carries its accumulator. On sm_90 an f16 / bf16 mmaf with
an f32 result that anchors.wgmma_fits takes runs as warpgroup MMA instead (_wgmma), in the same
accumulator layout with a 1 x 4 x 1 warp grid, or 1 x 8 x 1 with two warpgroups (256 threads, which
compile picks for 128-row products: anchors.takes_two_warpgroups; runtime/LAYOUTS.md). By default
(compile's tma) a wgmma pipeline whose staged operands are all 128-byte swizzled and described by
tensor maps (tma.py) fills its stages by TMA: thread 0 issues cp.async.bulk.tensor into each stage,
completing the stage's mbarrier, whose phase the consumers wait for.
"""
from __future__ import annotations

from functools import partial

from ..lazy_numpy import np

from tilebc.ir.types import ELEMENT_TYPES, TileType
from tilebc.ops.enums import Signedness
from tilebc.ops.table import by_mnemonic

from . import dtypes, intdiv, softfloat
from .anchors import (is_mma, mma_form, mma_layout, tensor_core_kind, wgmma_fits,
                      writes_memory)
from ..targets import STATIC_SHARED_LIMIT, max_shared_per_block
from .common import (LaterIteration, Tile, is_loop, strides_by_the_grid, traced_to,
                     vector_access)
from .layout import UNIFORM
from .registry import LOWERINGS, before_loops, defers, lowers, pipelines



def _u32(w, text_op: str, *args) -> str:
    """A fresh .b32 register written by `text_op` with `args` (the mma paths' index arithmetic)."""
    out = w.reg("b32")
    w(f"{text_op} {out}, {', '.join(str(a) for a in args)}")
    return out


def _warp_position(lw, u32, grid):
    """(lane, batch, row and column position in the warp grid) of this thread's warp; warps past
    the grid repeat it (copies)."""
    wb, wm, wn = grid
    lane = u32("and.b32", lw.tid(), 31)
    warp = u32("rem.u32", u32("shr.u32", lw.tid(), 5), wb * wm * wn)
    pb, pm, pn = (u32("div.u32", warp, wm * wn), u32("rem.u32", warp, wm * wn),
                  u32("rem.u32", warp, wn))
    return lane, pb, u32("div.u32", pm, wn), pn

def _multiply_add(lw, op, total: str, a: str, b: str, lhs, rhs, integer: bool) -> None:
    """total += a * b for an integer product (operands widened by their signedness) or an f64 one."""
    if not integer:
        lw.w(f"fma.rn.f64 {total}, {a}, {b}, {total}")
        return
    if op.attrs["signedness_lhs"] is Signedness.UNSIGNED:
        a = lw.zero_extended(a, lhs.element)
    if op.attrs["signedness_rhs"] is Signedness.UNSIGNED:
        b = lw.zero_extended(b, rhs.element)
    lw.w(f"mad.lo.s32 {total}, {a}, {b}, {total}")


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
    return intdiv.udiv(lw.w, kk, block)


def _as_tf32(lw, tile: Tile) -> Tile:
    if tile.element.name != "tf32":
        return tile
    return Tile(tile.type, [dtypes.tf32_operand(lw.w, reg) for reg in tile.regs])


def _matmul(lw, op, integer: bool, scaled: bool = False):
    w = lw.w
    lhs, rhs, acc = (lw.get(op.operands[n]) for n in ("lhs", "rhs", "acc"))
    result_type = op.results[0].type
    shape = result_type.shape
    batched = len(shape) == 3
    m, n = shape[-2], shape[-1]
    k_dim = lhs.type.shape[-1]
    # tf32 inputs are f32 registers that may carry more precision (a tile loaded from a tf32
    # array holds the stored f32 bits): the tensor cores drop the low 13 bits, and the paths
    # without them do the same (tilebc.interp's tf32_operand)
    lhs, rhs = (_as_tf32(lw, t) for t in (lhs, rhs))
    if not scaled and not integer and _register_blocked(lw, op, lhs, rhs, acc):
        return
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
    if not scaled and _joint_k_loop(lw, op, lhs, rhs, acc, offsets, integer, work):
        return
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
        if integer or work == "f64":
            _multiply_add(lw, op, total, a, b, lhs, rhs, integer)
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


def _slot_shifts(lw, shape, k_dim):
    """Per slot of a Cyclic [B, M, N] (or [M, N]) result: the element distance of its A row and
    B column from slot 0's, when the same in every thread (else None), as (A elements, B
    elements)."""
    count = 1
    for dim in shape:
        count *= dim
    if count % lw.T or lw.slots(count) > 16:
        return None
    linear = np.arange(lw.T)[None, :] + lw.T * np.arange(lw.slots(count))[:, None]
    mi = np.unravel_index(linear, tuple(shape))
    batch = mi[0] if len(shape) == 3 else np.zeros_like(linear)
    m, n = shape[-2:]
    a = (batch * m + mi[-2]) * k_dim  # element of A[batch, row, 0]
    b = batch * k_dim * n + mi[-1]    # element of B[batch, 0, col]
    a, b = a - a[:1], b - b[:1]
    if (a != a[:, :1]).any() or (b != b[:, :1]).any():
        return None
    return [(int(x), int(y)) for x, y in zip(a[:, 0], b[:, 0])]


def _joint_k_loop(lw, op, lhs, rhs, acc, offsets, integer, work) -> bool:
    """The per-thread dot products of every result slot in one K loop: A and B read through
    two pointers (slot 0's row and column) plus immediates, each distinct element once, K
    unrolled by up to 4. Every slot still sums its products in K order from its accumulator,
    as the slot-by-slot loop does. False where slots are not a fixed distance apart."""
    w = lw.w
    result_type = op.results[0].type
    shape = result_type.shape
    k_dim = lhs.type.shape[-1]
    m, n = shape[-2:]
    shifts = _slot_shifts(lw, shape, k_dim)
    if shifts is None:
        return False
    out_element = result_type.element
    a_size, b_size = dtypes.byte_size(lhs.element), dtypes.byte_size(rhs.element)
    mi = lw.multi_index(shape, 0)
    batch = mi[0] if len(shape) == 3 else None
    a_ptr = lw.smem_address(offsets[0], _operand_index(lw, mi, batch, m, k_dim, mi[-2],
                                                       lw.const_u32(0)), lhs.element)
    b_ptr = lw.smem_address(offsets[1], _operand_index(lw, mi, batch, k_dim, n,
                                                       lw.const_u32(0), mi[-1]), rhs.element)
    a_ptr, b_ptr = _fresh(w, a_ptr), _fresh(w, b_ptr)
    totals = []
    for k in range(len(shifts)):
        total = w.reg("b32" if integer else work)
        start = acc.slot(k)
        if integer:
            w(f"mov.b32 {total}, {start}")
        elif work == "f64":
            w(f"mov.f64 {total}, {start}")
        else:
            w(f"mov.f32 {total}, {dtypes.to_f32(w, start, out_element)}")
        totals.append(total)
    unroll = next(u for u in (4, 2, 1) if k_dim % u == 0)
    a_end = w.reg("b32")
    w(f"add.u32 {a_end}, {a_ptr}, {k_dim * a_size}")
    # A rows are read along K: four 4-byte elements as one 16-byte load (row starts are
    # 16-byte aligned when K % 4 == 0)
    vector = unroll == 4 and a_size == 4 and dtypes.reg_class(lhs.element) in ("f32", "b32")
    top = w.label("dot")
    w.place(top)
    rows = {}
    if vector:
        for a_shift, _ in shifts:
            if a_shift not in rows:
                rows[a_shift] = [w.reg(dtypes.reg_class(lhs.element)) for _ in range(4)]
                w(f"ld.shared.v4.{dtypes.mem_type(lhs.element)} {{{', '.join(rows[a_shift])}}}, "
                  f"[{a_ptr}+{a_shift * a_size}]")
    for kk in range(unroll):
        a_vals = {a_shift: row[kk] for a_shift, row in rows.items()}
        b_vals = {}
        for a_shift, b_shift in shifts:
            if a_shift not in a_vals:
                a_vals[a_shift] = lw.load("shared", f"{a_ptr}+{(a_shift + kk) * a_size}",
                                          lhs.element)
            if b_shift not in b_vals:
                b_vals[b_shift] = lw.load("shared", f"{b_ptr}+{(b_shift + kk * n) * b_size}",
                                          rhs.element)
        for total, (a_shift, b_shift) in zip(totals, shifts):
            a, b = a_vals[a_shift], b_vals[b_shift]
            if integer or work == "f64":
                _multiply_add(lw, op, total, a, b, lhs, rhs, integer)
            else:
                w(f"fma.rn.f32 {total}, {dtypes.to_f32(w, a, lhs.element)}, "
                  f"{dtypes.to_f32(w, b, rhs.element)}, {total}")
    w(f"add.u32 {a_ptr}, {a_ptr}, {unroll * a_size}")
    w(f"add.u32 {b_ptr}, {b_ptr}, {unroll * n * b_size}")
    again = w.reg("pred")
    w(f"setp.lt.u32 {again}, {a_ptr}, {a_end}")
    w(f"@{again} bra.uni {top}")
    regs = [dtypes.from_f32(w, t, out_element) if not integer and work == "f32" else t
            for t in totals]
    lw.barrier()
    lw.set(op.results[0], Tile(result_type, regs))
    return True


def _fresh(w, reg: str) -> str:
    """A new register holding `reg` (which may be shared, e.g. cached): safe to advance."""
    out = w.reg("b32")
    w(f"mov.b32 {out}, {reg}")
    return out


# mma.sync.m16n8k16 fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point
# type"), with g = laneid >> 2 and t = laneid % 4, as (row, col) offsets from the block origin:
# A registers hold two consecutive columns of one row; B registers two consecutive rows of one
# column; C/D registers one element each.
_A_PAIRS = (("g", 0), ("g8", 0), ("g", 8), ("g8", 8))  # (row, column offset added to 2t)
_B_PAIRS = (0, 8)  # row offset added to 2t; column g
_D_SLOTS = (("g", 0), ("g", 1), ("g8", 0), ("g8", 1))  # (row, column offset added to 2t)


def _to_f16(lw, tile: Tile) -> Tile:
    """An fp8 tile widened (exactly) to f16; f16 / bf16 tiles unchanged."""
    name = tile.element.name
    if name in ("f16", "bf16"):
        return tile
    w = lw.w
    regs = []
    for reg in tile.regs:
        if softfloat_free(w, name):  # sm_89+: one cvt gives the f16 pair; keep the low half
            pair, low, high = w.reg("b32"), w.reg("b16"), w.reg("b16")
            w(f"cvt.rn.f16x2.{dtypes.FP8_PTX[name]}x2 {pair}, {reg}")
            w(f"mov.b32 {{{low}, {high}}}, {pair}")
        else:
            low = w.reg("b16")
            w(f"cvt.rn.f16.f32 {low}, {dtypes.to_f32(w, reg, tile.element)}")
        regs.append(low)
    return Tile(TileType(tile.type.shape, ELEMENT_TYPES["f16"]), regs)


def softfloat_free(w, name: str) -> bool:
    return not softfloat.is_soft(name, w.arch)


# K steps of 16 up to which the mma.sync K loop is unrolled (every address an immediate offset)
_UNROLL_K_STEPS = 4


def _mma_sync(lw, op):
    w = lw.w
    lhs, rhs, acc = (lw.get(op.operands[n]) for n in ("lhs", "rhs", "acc"))
    result_type = op.results[0].type
    m, n = result_type.shape[-2:]
    batches = result_type.shape[0] if len(result_type.shape) == 3 else 1
    k_dim = lhs.type.shape[-1]
    lhs, rhs = _to_f16(lw, lhs), _to_f16(lw, rhs)
    kind = lhs.element.name
    f32 = ELEMENT_TYPES["f32"]
    # blocks of A*B go through smem as f32, a chunk of block rows at a time when the whole
    # product would not fit beside the operands (see _product_chunk_rows)
    blocks_n, per_batch = n // 8, (m // 16) * (n // 8)
    row_blocks = batches * (m // 16)
    staged = lw.smem_size_of(lhs.type) + lw.smem_size_of(rhs.type)
    chunk_rows = _product_chunk_rows(row_blocks, n, lw.T, staged, max_shared_per_block(lw.arch))
    offsets = lw.reserve_smem([lw.smem_size_of(lhs.type), lw.smem_size_of(rhs.type),
                               chunk_rows * 16 * n * 4])
    lw.smem_write(lhs, offsets[0])
    lw.smem_write(rhs, offsets[1])
    lw.barrier()

    u32 = partial(_u32, w)

    # Shared addresses split into a lane part (fragment position, computed once), a block part
    # (per 16x8 block) and immediates (fragment halves, K step, buffer offset). Row-major bytes:
    # A[batch, row, col] at 2*((batch*m + row)*k_dim + col), B[batch, row, col] at
    # 2*((batch*k_dim + row)*n + col), the f32 product D at 4*((batch*m + row)*n + col).
    with lw.preamble():
        lane = u32("and.b32", lw.tid(), 31)
        g, t = u32("shr.u32", lane, 2), u32("and.b32", lane, 3)
        a_lane = u32("mad.lo.u32", g, 2 * k_dim, u32("shl.b32", t, 2))  # A[g][2t]
        a_lane = u32("add.u32", a_lane, lw.smem_base())
        b_lane = u32("mad.lo.u32", t, 4 * n, u32("shl.b32", g, 1))  # B[2t][g]
        b_lane = u32("add.u32", b_lane, lw.smem_base())
        d_lane = u32("mad.lo.u32", g, 4 * n, u32("shl.b32", t, 3))  # D[g][2t]
        d_lane = u32("add.u32", d_lane, lw.smem_base())
    # blocks are numbered batch-major, then by block row, then block column; a chunk is
    # `chunk_rows` consecutive block rows (all their columns), a contiguous range of the product
    count = result_type.num_elements
    chunk_blocks = chunk_rows * blocks_n
    chunk_slots = lw.slots(count) if chunk_rows == row_blocks else chunk_rows * 16 * n // lw.T
    regs = []
    for chunk in range(row_blocks // chunk_rows):
        _mma_blocks(lw, op, kind, offsets, k_dim, n, per_batch, blocks_n, batches,
                    chunk * chunk_blocks, (chunk + 1) * chunk_blocks, chunk * chunk_rows,
                    a_lane, b_lane, d_lane)
        lw.barrier()
        for k in range(chunk * chunk_slots, min((chunk + 1) * chunk_slots, lw.slots(count))):
            # the product buffer is row-major like the result, so slot k's element is its own
            # (a chunk holds a whole number of thread rounds: its slots are the same everywhere)
            local = k - chunk * chunk_slots
            product = lw.smem_read_slot(offsets[2], count if chunk_rows == row_blocks else
                                        chunk_rows * 16 * n, local, f32)
            total = w.reg("f32")
            start = dtypes.to_f32(w, acc.slot(k), acc.element)
            w(f"add.rn.f32 {total}, {product}, {start}")
            regs.append(dtypes.from_f32(w, total, result_type.element))
        lw.barrier()
    lw.set(op.results[0], Tile(result_type, regs))


def _product_chunk_rows(row_blocks: int, n: int, threads: int, staged: int,
                        arch_limit: int) -> int:
    """How many 16-row block rows of the f32 product go through shared memory at once: all of
    them when they fit beside the `staged` operand bytes in static shared memory, else the
    largest divisor of `row_blocks` that fits and holds a whole number of thread rounds (so
    every thread reads the same slots from each chunk). When the operands alone overflow static
    shared memory (the kernel needs dynamic shared memory anyway), the same choice against the
    architecture's opt-in maximum `arch_limit`; all of them when nothing qualifies."""
    row_bytes = 16 * n * 4
    for limit in (STATIC_SHARED_LIMIT, arch_limit):
        if staged + row_blocks * row_bytes <= limit:
            return row_blocks
        for rows in range(row_blocks - 1, 0, -1):
            if (row_blocks % rows == 0 and (rows * 16 * n) % threads == 0
                    and staged + rows * row_bytes <= limit):
                return rows
    return row_blocks


def _mma_blocks(lw, op, kind, offsets, k_dim, n, per_batch, blocks_n, batches, first_block,
                end_block, first_row_block, a_lane, b_lane, d_lane):
    """mma.sync blocks first_block .. end_block-1 into the product buffer, whose row 0 is the
    product's block row `first_row_block`."""
    w = lw.w

    u32 = partial(_u32, w)

    m = per_batch // blocks_n * 16
    # warp w computes blocks w, w + warps, ...: a warp-uniform loop (other warps may be done)
    block = w.reg("b32")
    w(f"shr.u32 {block}, {lw.tid()}, 5")
    if first_block:
        w(f"add.u32 {block}, {block}, {first_block}")
    top, done = w.label("mma_block"), w.label("mma_done")
    w.place(top)
    finished = w.reg("pred")
    w(f"setp.ge.u32 {finished}, {block}, {end_block}")
    w(f"@{finished} bra {done}")
    if batches > 1:
        batch = intdiv.udiv(w, block, per_batch)
        in_batch = intdiv.urem(w, block, per_batch, quotient=batch)
    else:
        batch, in_batch = None, block
    row_block = intdiv.udiv(w, in_batch, blocks_n)
    col_block = intdiv.urem(w, in_batch, blocks_n, quotient=row_block)
    first_row = u32("mad.lo.u32", batch, m // 16, row_block) if batch else row_block  # x16 rows
    a_ptr = u32("mad.lo.u32", first_row, 16 * k_dim * 2, a_lane)
    b_ptr = u32("mad.lo.u32", col_block, 8 * 2, b_lane)
    if batch:
        b_ptr = u32("mad.lo.u32", batch, k_dim * n * 2, b_ptr)
    local_row = u32("sub.u32", first_row, first_row_block) if first_row_block else first_row
    d_ptr = u32("mad.lo.u32", local_row, 16 * n * 4, d_lane)
    d_ptr = u32("mad.lo.u32", col_block, 8 * 4, d_ptr)
    d = [w.reg("f32") for _ in range(4)]
    for reg in d:
        w(f"mov.f32 {reg}, 0f00000000")

    def k_step(a_at, b_at, kk):
        """One mma.sync over K columns kk..kk+15, operands at a_at/b_at + immediates."""
        a = []
        for row, extra in _A_PAIRS:  # one aligned 4-byte load: two elements of one row
            reg = w.reg("b32")
            shift = (8 * k_dim if row == "g8" else 0) + extra + kk
            w(f"ld.shared.b32 {reg}, [{a_at}+{offsets[0] + 2 * shift}]")
            a.append(reg)
        b = []
        for extra in _B_PAIRS:  # two rows of one column: two 2-byte loads packed low to high
            low, high, reg = w.reg("b16"), w.reg("b16"), w.reg("b32")
            at = offsets[1] + 2 * (extra + kk) * n
            w(f"ld.shared.b16 {low}, [{b_at}+{at}]")
            w(f"ld.shared.b16 {high}, [{b_at}+{at + 2 * n}]")
            w(f"mov.b32 {reg}, {{{low}, {high}}}")
            b.append(reg)
        out = [w.reg("f32") for _ in range(4)]
        w(f"mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32 {{{', '.join(out)}}}, "
          f"{{{', '.join(a)}}}, {{{', '.join(b)}}}, {{{', '.join(d)}}}")
        for reg, value in zip(d, out):
            w(f"mov.f32 {reg}, {value}")

    steps = k_dim // 16
    if steps <= _UNROLL_K_STEPS:
        for step in range(steps):
            k_step(a_ptr, b_ptr, 16 * step)
    else:  # a loop whose operand pointers advance by one K step
        a_at, b_at = w.reg("b32"), w.reg("b32")
        w(f"mov.u32 {a_at}, {a_ptr}")
        w(f"mov.u32 {b_at}, {b_ptr}")
        a_end = u32("add.u32", a_ptr, 2 * k_dim)
        k_top = w.label("mma_k")
        w.place(k_top)
        k_step(a_at, b_at, 0)
        w(f"add.u32 {a_at}, {a_at}, 32")
        w(f"add.u32 {b_at}, {b_at}, {32 * n}")
        more = w.reg("pred")
        w(f"setp.lt.u32 {more}, {a_at}, {a_end}")
        w(f"@{more} bra.uni {k_top}")
    # the block of A*B to shared memory (row-major f32), for the threads that own its elements
    for reg, (row, extra) in zip(d, _D_SLOTS):
        at = offsets[2] + 4 * ((8 * n if row == "g8" else 0) + extra)
        w(f"st.shared.f32 [{d_ptr}+{at}], {reg}")
    w(f"add.u32 {block}, {block}, {lw.T // 32}")
    w(f"bra.uni {top}")
    w.place(done)


def _padded_stride(row: int, unit: int) -> int:
    """Elements between row starts of a staged operand with `row` elements a row and `unit`
    elements in 16 bytes: rows of an even number of 16-byte chunks get one chunk of padding, so
    the 8 row addresses of an ldmatrix matrix fall in 8 different 16-byte bank groups (no bank
    conflicts)."""
    return row + unit if (row // unit) % 2 == 0 else row


def _interleave8(w, k: str) -> str:
    """K position of K index k in paired staging: k = 8q + 4s + t sits at 8q + 2t + s, so the
    two K steps of 4 that an m8n8k4 lane reads (t and t + 4) are neighbours."""
    out, low, high = w.reg("b32"), w.reg("b32"), w.reg("b32")
    w(f"and.b32 {out}, {k}, -8")
    w(f"and.b32 {low}, {k}, 3")
    w(f"shl.b32 {low}, {low}, 1")
    w(f"shr.u32 {high}, {k}, 2")
    w(f"and.b32 {high}, {high}, 1")
    w(f"or.b32 {out}, {out}, {low}")
    w(f"or.b32 {out}, {out}, {high}")
    return out


def _stage(lw, tile: Tile, offset: int, stride: int, transposed: bool,
           pairs: str | None = None) -> None:
    """Store a Cyclic [B, R, C] (or [R, C]) tile to shared memory with `stride` elements between
    rows: row-major (row r, column c at r*stride + c) or transposed (column c's elements along
    one row: c*stride + r). Where the thread count and the rows divide one another, every slot
    is one per-thread base register plus an immediate. For m8n8k4's paired fragments (K % 8 ==
    0), row-major with K interleaved: `pairs` "cols" (A: column k at _interleave8(k)) or "rows"
    (B: rows k and k + 4 of each 8 side by side, (k, c) at ((k >> 3)*4 + k % 4)*stride + 2c +
    (k >> 2) % 2)."""
    w = lw.w
    count, T = tile.count, lw.T
    rows, cols = tile.type.shape[-2:]
    size = dtypes.byte_size(tile.element)
    batched = len(tile.type.shape) == 3 and tile.type.shape[0] > 1

    def at(row: str, col: str, batch: str | None) -> str:
        """Element offset (u32 register) of (batch, row, col)."""
        out = w.reg("b32")
        rows_per_batch = rows
        if pairs == "cols":
            col = _interleave8(w, col)
        elif pairs == "rows":
            half, pair_row, two_col = w.reg("b32"), w.reg("b32"), w.reg("b32")
            w(f"shr.u32 {half}, {row}, 2")
            w(f"and.b32 {half}, {half}, 1")
            w(f"shr.u32 {pair_row}, {row}, 3")
            low = w.reg("b32")
            w(f"and.b32 {low}, {row}, 3")
            w(f"mad.lo.u32 {pair_row}, {pair_row}, 4, {low}")
            w(f"mad.lo.u32 {two_col}, {col}, 2, {half}")
            row, col, rows_per_batch = pair_row, two_col, rows // 2
        if transposed:
            w(f"mad.lo.u32 {out}, {col}, {stride}, {row}")
            if batch is not None:
                w(f"mad.lo.u32 {out}, {batch}, {cols * stride}, {out}")
        else:
            w(f"mad.lo.u32 {out}, {row}, {stride}, {col}")
            if batch is not None:
                w(f"mad.lo.u32 {out}, {batch}, {rows_per_batch * stride}, {out}")
        return out

    def base():
        if T % cols == 0:
            row = intdiv.udiv(w, lw.tid(), cols)
            col = intdiv.urem(w, lw.tid(), cols, quotient=row)
        else:
            row, col = lw.const_u32(0), lw.tid()
        reg = w.reg("b32")
        w(f"mad.lo.u32 {reg}, {at(row, col, None)}, {size}, {lw.smem_base()}")
        return reg
    fast = count % T == 0 and (T % cols == 0 or (cols % T == 0 and not transposed)) \
        and not (batched and transposed) \
        and not (pairs == "rows" and lw.slots(count) > 1
                 and (T % cols or (T // cols) % 8))  # slots must keep their pair position
    for k in range(lw.slots(count)):
        if fast:
            if T % cols == 0:  # each slot moves T // cols rows down
                step = k * (T // cols)
                shift = step if transposed else \
                    (step // 2 if pairs == "rows" else step) * stride
            else:
                row, col = divmod(k * T, cols)
                shift = row * stride + col
            key = ('stage base', cols, stride, transposed, size, pairs)
            address = f"{lw._cached(key, base)}" \
                      f"+{offset + size * shift}"
        else:
            e = lw.elem_index(count, k)
            flat_row = intdiv.udiv(w, e, cols, bound=count - 1)
            col = intdiv.urem(w, e, cols, quotient=flat_row, bound=count - 1)
            batch = None
            row = flat_row
            if batched:
                batch = intdiv.udiv(w, flat_row, rows, bound=count // cols - 1)
                row = intdiv.urem(w, flat_row, rows, quotient=batch, bound=count // cols - 1)
            address = lw.smem_address(offset, at(row, col, batch), tile.element)
        lw.store("shared", address, tile.slot(k), tile.element)


class Transposed:
    """The lowered value of a permute that swaps the last two dims of `source`, left for the
    tensor-core mma that reads it as B: it stages `source` ([.., N, K]) row-major as the N x K
    operand ldmatrix reads without .trans, instead of the permute's exchange plus staging.
    `make()` lowers the permute after all (an mma that takes another path)."""

    def __init__(self, source, make):
        self.source, self.make = source, make


def staged_transposed(lw, op) -> bool:
    """Whether permute `op` can be left to the mma's staging (Transposed): it swaps the last
    two dims, and every op reading it is an mmaf / mmai taking it as B only, with a non-f64
    mma accumulator layout."""
    from .anchors import _uses
    perm = list(op.attrs["permutation"])
    rank = len(perm)
    result = op.results[0]
    if rank not in (2, 3) or perm != list(range(rank - 2)) + [rank - 1, rank - 2] \
            or result.type.num_elements == 1:
        return False
    uses = _uses(lw).get(lw.forward.get(result, result), ())
    for use in uses:
        if not is_mma(use):
            return False
        roles = {name: lw.forward.get(v, v) for name, v in use.operands.items()}
        if roles.get("rhs") is not result or roles.get("lhs") is result \
                or roles.get("acc") is result:
            return False
        form = mma_form(lw, use)
        if form is None or form[0] == "f64" or mma_layout(lw, use) is None:
            return False
    return bool(uses)


def _lower_transposed(lw, op) -> None:
    """An mma not staging its operands itself: a Transposed B is lowered as the permute it is, a
    ViewStaged operand as the load it is."""
    for name in ("lhs", "rhs"):
        value = op.operands[name]
        value = lw.forward.get(value, value)
        held = lw.values.get(value)
        if isinstance(held, Transposed):
            made_source(lw, held)
        if isinstance(held, (Transposed, ViewStaged)):
            lw.set(value, held.make())


def made_source(lw, transposed: Transposed):
    """A Transposed's source as a lowered tile: a view load staged through it is loaded now."""
    source = lw.forward.get(transposed.source, transposed.source)
    held = lw.values.get(source)
    if isinstance(held, ViewStaged):
        held = held.make()
        lw.set(source, held)
    return held


class ViewStaged:
    """The lowered value of a view load left for the one tensor-core mma that reads it as A or B:
    the mma copies it from global memory straight into its staging with cp.async (_copy_async),
    runs of `vec` elements at a time. `make()` lowers the load after all (another path)."""

    def __init__(self, op, view, vec: int, make, swapped: bool = False):
        self.op, self.vec, self.make = op, vec, make
        self.type = op.results[0].type
        self.element = self.type.element
        # swapped: a B tile whose K dim (the second-to-last) is the tensor's contiguous one
        # (attention's K loaded through `order`): staged as its transpose, the [N, K] source a
        # Transposed B has, by a view whose last two tile dims trade places
        self.swapped, self.source_view = swapped, view
        self.view = _swapped_view(view) if swapped else view
        if swapped:
            shape = list(self.type.shape)
            shape[-2:] = shape[-1], shape[-2]
            self.type = TileType(tuple(shape), self.element)

    def indices(self, indices):
        """The load's index operands in the staged view's dim order."""
        indices = list(indices)
        if self.swapped:
            indices[-2:] = indices[-1], indices[-2]
        return indices


def _swapped_view(view):
    """`view` (a partition view) with its last two tile dims traded."""
    from tilebc.ir.types import PartitionViewType
    from .common import SubView
    vt = view.type
    dims = list(vt.dim_map or range(len(vt.tile_shape)))
    tile = list(vt.tile_shape)
    dims[-2:], tile[-2:] = (dims[-1], dims[-2]), (tile[-1], tile[-2])
    return SubView(PartitionViewType(tuple(tile), vt.tensor_view, tuple(dims), vt.padding_value),
                   view.tensor)


def _block_positions(lw):
    """op -> (its block's op list, its index there), for every op of the function."""
    key = ("block positions",)
    if key not in lw._cache:
        where = {}
        pending = [lw.function.body.ops]
        while pending:
            ops = pending.pop()
            for i, inner in enumerate(ops):
                where[inner] = (ops, i)
                for region in inner.regions:
                    pending.extend(block.ops for block in region.blocks)
        lw._cache[key] = where
    return lw._cache[key]


# Ops between a view load and the mma that stages it with cp.async: a reshape that only drops
# leading unit dims (a batched view's (1, M, K) tile as the mma's [M, K]), and for B a permute
# left to the staging (Transposed: the source is staged as it is, K-major).
_STAGING_CHAIN = by_mnemonic({"reshape": "unit dims", "permute": "transposed B"},
                             "view loads staged through shape ops")


def _drops_unit_dims(source_shape, result_shape) -> bool:
    def kept(shape):
        shape = list(shape)
        while len(shape) > 2 and shape[0] == 1:
            shape.pop(0)
        return shape
    return len(result_shape) >= 2 and kept(source_shape) == kept(result_shape)


def staged_use(lw, value):
    """(mma, role, from_source) for the tensor-core mma that reads `value` (a view load's
    tile) as `role` ("lhs" / "rhs") through single-use _STAGING_CHAIN ops only, or None;
    from_source: B reaches it through a Transposed permute."""
    from .anchors import _uses
    uses = _uses(lw)
    value = lw.forward.get(value, value)
    from_source = False
    while True:
        found = uses.get(value, ())
        if len(found) != 1:
            return None
        use = found[0]
        if is_mma(use):
            break
        kind = _STAGING_CHAIN.get(use.name)
        result = use.results[0]
        if kind == "unit dims" and _drops_unit_dims(value.type.shape, result.type.shape):
            pass
        elif kind == "transposed B" and not from_source and staged_transposed(lw, use):
            from_source = True
        else:
            return None
        value = lw.forward.get(result, result)
    roles = [name for name in ("lhs", "rhs", "acc")
             if lw.forward.get(use.operands[name], use.operands[name]) is value]
    if roles not in (["lhs"], ["rhs"]) or (from_source and roles != ["rhs"]):
        return None
    return use, roles[0], from_source


def staged_source(lw, value):
    """The view load whose tile reaches mma operand `value` through _STAGING_CHAIN ops (the
    inverse of staged_use), or None."""
    return traced_to(lw, value, _STAGED_LOADS, _STAGING_CHAIN, steps=3)


def staging(lw, op, view):
    """(vec, swapped) when view load `op`'s tile can go straight to the staging of the
    tensor-core mma reading it (ViewStaged): cp.async runs of `vec` elements; swapped, B staged
    as its transpose (see ViewStaged). Else None. Runs are 4, 8 or 16 bytes; what it takes:
    sm_80+ global pointers, a partition view with a stride-1 last dim (or second-to-last, for a
    swapped B), alignment and strides proven for the run, zero
    padding (cp.async zero-fills what it does not read), f16 / bf16 / i8 / fp8 for the native
    m16n8k32 (no conversion before staging), one mma use (staged_use) as A, or as B staged as it is (f16 / bf16: row-major
    K x N, or a transposed B's N x K source), later in the same block with only loads and ops
    touching no memory between (the load may move down to it)."""
    from tilebc.ir.types import PartitionViewType
    from tilebc.ops.enums import PaddingValue
    from tilebc.ops.spec import Effects
    from .memory import qualifiers
    from .vectors import view_dims
    if lw.arch < 80 or lw.generic_pointers or lw.chunk is not None or lw.T % 32:
        return None
    vt = view.type
    tensor = view.tensor
    result = op.results[0]
    shape = list(result.type.shape)
    element = dtypes.name_of(result.type.element)
    if not isinstance(vt, PartitionViewType) or qualifiers(op, store=False) \
            or tensor.stride_div is None or len(shape) < 2 \
            or len([d for d in shape[:-2] if d != 1]) > 1 or len(shape) > 3 and shape[-3] != 1 \
            or getattr(vt, "padding_value", None) not in (None, PaddingValue.ZERO) \
            or element not in ("f16", "bf16", "i8", "f8E4M3FN", "f8E5M2"):
        return None
    found = staged_use(lw, result)  # mmaf / mmai only (not mmaf_scaled)
    if found is None:
        return None
    use, role, _ = found
    if role == "rhs" and dtypes.byte_size(result.type.element) == 1:
        return None  # 8-bit B is staged transposed
    form = mma_form(lw, use)
    if form is None or form[0] not in ("f16", "bf16", "s8", "u8", "e4m3", "e5m2") \
            or mma_layout(lw, use) is None:
        return None
    if element in ("f8E4M3FN", "f8E5M2") and form[2] != 32:
        return None  # fp8 widened to f16 is converted in registers before its staging
    where = _block_positions(lw)
    if op not in where or use not in where:
        return None
    (ops, at), (use_ops, use_at) = where[op], where[use]
    if ops is not use_ops or use_at < at or any(
            between.spec.effects not in (Effects.NONE, Effects.UNDECLARED)
            and not between.name.startswith("load")
            for between in ops[at + 1:use_at]):
        return None
    dims = view_dims(vt)
    inbounds = list(op.attrs.get("inbounds") or ())
    swapped = False
    if tensor.type.strides[dims[-1]] != 1:
        # a B whose K dim is the contiguous one: staged as the [N, K] source (f16 / bf16)
        if role != "rhs" or found[2] or dtypes.byte_size(result.type.element) != 2 \
                or tensor.type.strides[dims[-2]] != 1:
            return None
        if len(inbounds) not in (0, len(dims)) or len(set(inbounds[-2:])) > 1:
            return None  # view_addresses reads the op's per-dim inbounds in its own order
        swapped = True
        dims[-2:], shape[-2:], inbounds[-2:] = dims[-2:][::-1], shape[-2:][::-1], \
            inbounds[-2:][::-1]
    last = dims[-1]
    checked = not (len(inbounds) >= len(dims) and inbounds[-1])
    size = dtypes.byte_size(result.type.element)
    count = result.type.num_elements
    vec = min(16 // size, shape[-1])
    while vec * size >= 4 and (count % (vec * lw.T) or tensor.base_align % (vec * size)
                               or any(tensor.stride_div[d] % vec for d in dims if d != last)
                               or (checked and tensor.shape_div[last] % vec)):
        vec //= 2
    return (vec, swapped) if vec * size >= 4 else None


def _copy_async(lw, staged: ViewStaged, offset: int, stride: int, indices=None,
                base=None) -> None:
    """cp.async of a ViewStaged tile into row-major staging at `offset` with `stride` elements
    between rows (batch b's rows after b * rows * stride); runs outside the tensor read
    nothing (src-size 0) and land as zeros. A pipeline stage gives the load's `indices` (for a
    later iteration) and the stage's `base` register."""
    from .layout import Blocked
    from .memory import view_addresses
    w = lw.w
    op, vec = staged.op, staged.vec
    shape = list(staged.type.shape)
    rows = shape[-2]
    batched = len(shape) == 3 and shape[0] > 1  # a (1, M, K) or (1, 1, M, K) tile is its [M, K]
    size = dtypes.byte_size(staged.element)
    layout = Blocked(staged.type.num_elements, lw.T, vec)
    runs = list(range(0, layout.slots, vec))
    addresses = view_addresses(lw, op, staged.view,
                               staged.indices(op.operands["index"] if indices is None
                                              else indices), shape, layout, slots=runs)
    width = vec * size
    kind = "cg" if width == 16 else "ca"  # .cg takes 16 bytes only

    def place(mi):
        """Staging element offset of multi-index `mi` (registers, or ints for constants)."""
        if isinstance(mi[-1], str):
            if callable(stride):  # a wgmma operand's canonical layout (_wgmma_place)
                at = stride(w, mi[-2], mi[-1], shape[-1])
            else:
                at = w.reg("b32")
                w(f"mad.lo.u32 {at}, {mi[-2]}, {stride}, {mi[-1]}")
            if batched:
                w(f"mad.lo.u32 {at}, {mi[0]}, {rows * stride}, {at}")
            return at
        at = stride.constant(mi[-2], mi[-1], shape[-1]) if callable(stride) \
            else mi[-2] * stride + mi[-1]
        return at + (mi[0] * rows * stride if batched else 0)

    # a run whose staging lands the same distance from the first run's in every thread is one
    # per-thread offset (computed once per kernel) plus an immediate, not its own arithmetic
    table = layout.table(lw.T)
    coords = np.unravel_index(table, shape)  # once for the table, not per element

    def multi_indices(k):
        """The multi-index of each element slot k holds, thread by thread."""
        return zip(*(dim[k] for dim in coords))
    first = [place(mi) for mi in multi_indices(0)]
    key = ("cp.async staging", tuple(shape), vec, size,
           stride.key if callable(stride) else stride)

    def shift(k):
        found = {place(mi) - at for mi, at in zip(multi_indices(k), first)}
        return found.pop() if len(found) == 1 else None

    def first_within():
        return _u32(w, "mul.lo.u32", place(lw.multi_index(shape, 0, layout)), size)
    shared = None  # the first run's staging address, once it is needed
    for k, (src, ok) in zip(runs, addresses):
        distance = shift(k)
        if distance is not None:
            if shared is None:
                within = lw._cached(key, first_within)
                shared = _u32(w, "add.u32", within, lw.smem_base() if base is None else base)
            dst, at_offset = shared, offset + size * distance
        else:
            at = place(lw.multi_index(shape, k, layout))
            dst = w.reg("b32")
            if base is None:
                w(f"mad.lo.u32 {dst}, {at}, {size}, {lw.smem_base()}")
            else:
                within = w.reg("b32")
                w(f"mul.lo.u32 {within}, {at}, {size}")
                w(f"add.u32 {dst}, {within}, {base}")
            at_offset = offset
        tail = ""
        if ok is not None:
            read = w.reg("b32")
            w(f"selp.u32 {read}, {width}, 0, {ok}")
            tail = f", {read}"
        w(f"cp.async.{kind}.shared.global [{dst}+{at_offset}], [{src}], {width}{tail}")


# The loads a K-loop pipeline copies ahead (the view loads _defer_view_load defers), and the
# mmas it feeds (True: mmaf, which leaves the fragments when its product reaches a reduction).
_STAGED_LOADS = by_mnemonic({"load_view_tko": True}, "cp.async K-loop stages")
# Ops with a combiner region a pipelined K loop's body may hold (pure combiners: straight-line)
_COMBINING = by_mnemonic({"reduce": True, "scan": True}, "cp.async K-loop combiners")
_IN_REGISTERS = by_mnemonic({"mmaf": True, "mmai": False}, "cp.async K-loop mmas")


def _may_follow_writes(function, loop_op) -> bool:
    """Whether a memory write can come before `loop_op` runs: one earlier in program order, or
    one inside a loop around it (an earlier iteration's). Only then do TMA's async reads need the
    generic proxy's writes fenced (a fence over global memory costs every CTA a few percent)."""
    for op in function.walk():
        if op is loop_op:
            return False
        if is_loop(op) and any(inner is loop_op for inner in op.walk()):
            if any(writes_memory(inner) for inner in op.walk()):
                return True
        elif writes_memory(op):
            return True
    return False


def _not_thread_0(lw) -> str:
    reg = lw.w.reg("pred")
    lw.w(f"setp.ne.u32 {reg}, {lw.tid()}, 0")
    return reg


def _param_address(w, name: str) -> str:
    """The generic address of kernel parameter `name` (a tensor map: TMA reads it there)."""
    symbol, reg = w.reg("b64"), w.reg("b64")
    w(f"mov.b64 {symbol}, {name}")
    w(f"cvta.param.u64 {reg}, {symbol}")
    return reg


def _tile_start(lw, value, step: int) -> str:
    """A register with index * step for an i32 tile index (scalars are registers)."""
    return _u32(lw.w, "mul.lo.s32", lw.get(value).scalar, step)


class _KPipeline:
    """A `for` whose body feeds its one tensor-core mma from view loads that cp.async can copy
    (ViewStaged): those copies run P = `stages - 1 - lag` iterations ahead, into `stages`
    rotating buffers below lw.smem_floor (stage s at region + s * stage_bytes). The prologue
    issues iterations 0..P-1, one commit group each; in iteration i the mma waits for all but
    the newest P-1 groups (its own stage is then in shared memory), synchronizes (every warp is
    done with iteration i-1-lag's buffer), issues iteration i+P into that buffer and computes
    from its own. `lag` 1 (wgmma): the mma's of iteration i stay in flight until iteration i+1
    has issued its own (wgmma.wait_group 1), so their stage is free one iteration later.
    Iterations past the bound commit empty groups (the group count stays the same); a tile's
    runs past the tensor read nothing and land as zeros (src-size 0), so ragged tails are
    right. After the loop: wait for everything, synchronize (the region is the exchange's
    again)."""

    def __init__(self, lw, loop, parts, stage_bytes, stages, iv_value):
        self.lw, self.loop = lw, loop
        # per mma, in body order: [mma, staged (A, B), offsets in a stage, strides]
        self.parts = parts
        self.stage_bytes, self.stages, self.iv_value = stage_bytes, stages, iv_value
        self.async_proxy = False  # True: a wgmma reads the stages (a proxy fence after copies)
        self.lag = 0  # wgmma groups left in flight by an iteration (see _accumulates_in_place)
        self.align = 16  # of the region and of every stage (a swizzled wgmma operand's: 1024)
        # TMA (the sm_90 default): (mma, role) -> (map parameter, rows, cols) for every staged
        # operand; thread 0 fills a stage with cp.async.bulk.tensor, completing that stage's
        # mbarrier, which the consumers wait on (phase parity) instead of cp.async groups
        self.tma = None
        self.after_writes = False  # TMA: a memory write may precede the loop (_may_follow_writes)

    @property
    def ahead(self) -> int:
        """Iterations the copies run ahead of the mma."""
        return self.stages - 1 - self.lag

    def _issue(self, ahead: int, base: str, bar: str | None = None) -> None:
        """Copies of iteration iv + ahead * step into the stage at `base`, then a commit (TMA:
        the bulk tensor copies, completing the stage's mbarrier at `bar`)."""
        lw, loop = self.lw, self.loop
        w = lw.w
        wide = loop.kind.endswith("64")
        later = w.reg("b64" if wide else "b32")
        if ahead:
            w(f"mad.lo.{loop.kind} {later}, {loop.step}, {ahead}, {loop.iv}")
        else:
            w(f"mov.{'b64' if wide else 'b32'} {later}, {loop.iv}")
        past, skip = w.reg("pred"), w.label("stage_skip")
        w(f"setp.ge.{loop.kind} {past}, {later}, {loop.upper}")
        stand_in = LaterIteration()
        lw.set(stand_in, Tile(self.iv_value.type, [later]))
        if self.tma is not None:  # thread 0 alone; past the bound nothing (no phase to wait)
            w(f"@{past} bra {skip}")
            w(f"@{self.follower} bra {skip}")
            with lw.fresh_scope():
                self._issue_tma(stand_in, base, bar)
            w.place(skip)
            return
        w(f"@{past} bra.uni {skip}")  # past the bound: an empty group, no copies
        with lw.fresh_scope():  # what the copies compute may be skipped: not reused after
            for _, staged_pair, offsets, strides in self.parts:
                for role, staged in enumerate(staged_pair):
                    if staged is None:
                        continue
                    indices = [stand_in if lw.forward.get(v, v) is self.iv_value else v
                               for v in staged.op.operands["index"]]
                    _copy_async(lw, staged, offsets[role], strides[role], indices=indices,
                                base=base)
        w.place(skip)
        w("cp.async.commit_group")

    def _issue_tma(self, later, base: str, bar: str) -> None:
        """Thread 0's part of _issue with TMA: the stage's mbarrier expects the boxes' bytes,
        then one cp.async.bulk.tensor per 64-column block of each operand, at the later
        iteration's tile coordinates (x along the contiguous dim, y along rows)."""
        lw = self.lw
        w = lw.w
        total = sum(rows * cols * 2 for rows, cols in
                    ((plan[1], plan[2]) for plan in self.tma.values()))
        state = w.reg("b64")
        w(f"mbarrier.arrive.expect_tx.shared::cta.b64 {state}, [{bar}], {total}")
        for mma, staged_pair, offsets, _ in self.parts:
            for role, staged in enumerate(staged_pair):
                if staged is None:
                    continue
                name, rows, cols = self.tma[(id(mma), role)]
                indices = staged.indices([later if lw.forward.get(v, v) is self.iv_value
                                          else v for v in staged.op.operands["index"]])
                shape = staged.type.shape  # [..., rows, cols], leading dims 1
                # map dim j: tile dim -1-j, from index * extent
                coords = [_tile_start(lw, v, step) for v, step in zip(indices, shape)][::-1]
                address = lw._cached(("tensor map", name), partial(_param_address, w, name))
                x = coords[0]
                for block in range(cols // 64):
                    if block:
                        coords[0] = _u32(w, "add.s32", x, 64 * block)
                    w(f"cp.async.bulk.tensor.{len(coords)}d.shared::cluster.global.tile"
                      f".mbarrier::complete_tx::bytes [{base}+{offsets[role] + block * rows * 128}],"
                      f" [{address}, {{{', '.join(coords)}}}], [{bar}]")

    def prologue(self) -> None:
        lw = self.lw
        w = lw.w
        self.saved_floor = lw.smem_floor
        region = lw.reserve_smem([self.stages * self.stage_bytes], self.align)[0]
        lw.smem_floor = region + self.stages * self.stage_bytes
        for part in self.parts:
            part[2] = [None if o is None else o + region for o in part[2]]
        self.read, self.write = w.reg("b32"), w.reg("b32")
        w(f"mov.u32 {self.read}, 0")
        w(f"mov.u32 {self.write}, {self.ahead * self.stage_bytes}")
        bars = None
        if self.tma is not None:
            bars = self._init_barriers()
        for s in range(self.ahead):
            base = w.reg("b32")
            w(f"add.u32 {base}, {lw.smem_base()}, {s * self.stage_bytes}")
            self._issue(s, base, None if bars is None else f"{bars}+{8 * s}")
        for part in self.parts:
            lw._cache[("k pipeline", part[0])] = self

    def _part(self, mma):
        return next(part for part in self.parts if part[0] is mma)

    def roles_of(self, mma):
        """Which of `mma`'s A and B the stages hold."""
        return tuple(t is not None for t in self._part(mma)[1])

    def offsets_of(self, mma):
        """Byte offsets of `mma`'s staged A and B within a stage (None: not staged)."""
        return self._part(mma)[2]

    def enter(self, mma, prefetch: bool = True) -> str:
        """steady() for the body's first mma; the later ones read the stage it waited for (the
        iteration's copies are one commit group). Returns the stage's byte offset."""
        return self.steady(prefetch) if mma is self.parts[0][0] else self.read

    def leave(self, mma) -> None:
        """advance() after the body's last mma."""
        if mma is self.parts[-1][0]:
            self.advance()

    def _init_barriers(self) -> str:
        """One mbarrier per stage (a static .shared array, apart from the exchange area), set
        up by thread 0 for one arrival; the phase each consumer waits for starts at 0. Returns
        the array's shared address register."""
        lw = self.lw
        w = lw.w
        symbol = f"{lw.prefix}_tma_bar{len(lw.allocas)}"
        lw.allocas.append((symbol, 8, 8 * self.stages))
        bars = w.reg("b32")
        w(f"mov.u32 {bars}, {symbol}")
        self.bars = bars
        self.follower = lw._cached(("not thread 0",), partial(_not_thread_0, lw))
        ready = w.label("tma_ready")
        w(f"@{self.follower} bra {ready}")
        for s in range(self.stages):
            w(f"mbarrier.init.shared::cta.b64 [{bars}+{8 * s}], 1")
        w("fence.mbarrier_init.release.cluster")
        w.place(ready)
        # the kernel's earlier generic-proxy writes come before TMA's async accesses: the
        # region's (exchanges) before its writes, and where the kernel may have written global
        # memory already, its stores before TMA's reads (an array it wrote, then loads by a map)
        w("fence.proxy.async" if self.after_writes else "fence.proxy.async.shared::cta")
        lw.barrier()
        self.bar_read, self.bar_write, self.phase = w.reg("b32"), w.reg("b32"), w.reg("b32")
        w(f"mov.u32 {self.bar_read}, {bars}")
        w(f"add.u32 {self.bar_write}, {bars}, {8 * self.ahead}")
        w(f"mov.u32 {self.phase}, 0")
        return bars

    def steady(self, prefetch: bool = True) -> str:
        """In the mma, before it reads its operands: this iteration's stage landed and is
        visible, the next stage is in flight (`prefetch` False: the mma issues it itself
        later, by prefetch()); returns the byte offset of this stage."""
        lw = self.lw
        w = lw.w
        if self.tma is not None:  # the stage's bytes have arrived once its phase completes
            done, again = w.reg("pred"), w.label("tma_wait")
            w.place(again)
            w(f"mbarrier.try_wait.parity.shared::cta.b64 {done}, [{self.bar_read}], {self.phase}")
            w(f"@!{done} bra {again}")
        else:
            w(f"cp.async.wait_group {self.ahead - 1}")
            if self.async_proxy:  # wgmma reads the stage through the async proxy
                w("fence.proxy.async.shared::cta")
        lw.barrier()  # every warp is done with the stage prefetch() refills
        if prefetch:
            self.prefetch()
        return self.read

    def prefetch(self) -> None:
        """The copies of iteration i + ahead, into the stage the barrier of steady() freed."""
        w = self.lw.w
        base = w.reg("b32")
        w(f"add.u32 {base}, {self.lw.smem_base()}, {self.write}")
        self._issue(self.ahead, base, self.bar_write if self.tma is not None else None)

    def advance(self) -> None:
        """Both stage offsets one buffer on, wrapping after the last (TMA: the mbarrier
        addresses too, and the phase the next wait expects flips when the reads wrap)."""
        w = self.lw.w
        end = self.stages * self.stage_bytes
        for reg in (self.read, self.write):
            wrap = w.reg("pred")
            w(f"add.u32 {reg}, {reg}, {self.stage_bytes}")
            w(f"setp.eq.u32 {wrap}, {reg}, {end}")
            w(f"selp.u32 {reg}, 0, {reg}, {wrap}")
            if self.tma is None:
                continue
            bar = self.bar_read if reg is self.read else self.bar_write
            w(f"add.u32 {bar}, {bar}, 8")
            w(f"selp.u32 {bar}, {self.bars}, {bar}, {wrap}")
            if reg is self.read:
                w(f"@{wrap} xor.b32 {self.phase}, {self.phase}, 1")

    def finish(self) -> None:
        lw = self.lw
        w = lw.w
        if self.lag:  # the last iteration's accumulators land
            w("wgmma.wait_group.sync.aligned 0")
        if self.tma is None:
            w("cp.async.wait_group 0")  # none in flight when the exchange takes the region back
        lw.barrier()  # and every warp is done reading its stages
        if self.tma is not None:  # every issued stage was waited for: the barriers may go
            done = w.label("tma_done")
            w(f"@{self.follower} bra {done}")
            for s in range(self.stages):
                w(f"mbarrier.inval.shared::cta.b64 [{self.bars}+{8 * s}]")
            w.place(done)
        lw.smem_floor = self.saved_floor
        for part in self.parts:
            del lw._cache[("k pipeline", part[0])]


# Stage buffers may take up to this much shared memory: three stages where they fit, else two.
_PIPELINE_SHARED = STATIC_SHARED_LIMIT // 2
# wgmma stages may take this share of the CTA's opt-in shared memory: up to four (one more than
# mma.sync's three, as the stage an iteration's wgmma's read is free only one iteration later).
_WGMMA_STAGES_SHARE = 2
# TMA-filled stages: four only where they fit in a quarter of it (four CTAs an SM), else two, with
# no wgmma group left in flight (on sm_90 every TMA stage, 16 KiB or more, takes two). Timed on an
# H200 (results/gpu_only_h200.md), the 64x128x64 f16 GEMM (24 KiB stages) at 2048³: two stages
# 35.7 µs, three 47.1, four 39.7 (tileiras 35.7); at 4096³ two are 1.7 % slower than four, the
# batched GEMM 4-5 % faster, attention the same; a 32-CTA grid 7.1 against 6.0 µs.

# Stages of production-size tiles (two over _PIPELINE_SHARED) may take this share of the CTA's
# opt-in shared memory (dynamic): a quarter keeps four CTAs an SM (sm_90: two 26 KiB stages of a
# 64x128x64 f16 GEMM, whose 128 registers a thread allow four CTAs too). sm_80's 163 KiB leave
# those tiles unpipelined: two stages would cost a CTA an SM, slower at scale by the model
# (test_production_gemm_k_loops_pipeline_where_the_model_says has the figures).
_LARGE_STAGES_SHARE = 4


@pipelines
def _k_loop_pipeline(lw, op, loop):
    """A _KPipeline for `for` op `op` (see there) when on sm_80+ its body is straight-line code
    ending in its continue, with mmas taking the in-register path (_mma_in_registers), at
    least one A / B of which is a ViewStaged view load whose view and indices come from outside
    the loop or are its induction variable, and no op that writes memory (the copies run ahead
    of the body's other effects); else None. Several mmas (attention's two products) share
    the stages: one stage holds every staged operand of an iteration."""
    from tilebc.ops.spec import Effects
    if lw.arch < 80 or lw.chunk is not None or lw.generic_pointers:
        return None
    body = op.regions[0].blocks[0]
    iv_value = body.args[0]
    inside = set(body.args)
    mmas = []
    for inner in body.ops:
        if inner.regions and inner.name not in _COMBINING or \
                (inner.spec.terminator and inner is not body.ops[-1]):
            return None
        inside.update(inner.results)
        if is_mma(inner):
            mmas.append(inner)
        elif inner.name in _COMBINING:
            if any(not nested.spec.terminator and
                   nested.spec.effects not in (Effects.NONE, Effects.UNDECLARED)
                   for nested in inner.walk() if nested is not inner):
                return None
        elif not inner.spec.terminator and inner.name not in _STAGED_LOADS and \
                inner.spec.effects not in (Effects.NONE, Effects.UNDECLARED):
            return None
    if not mmas or len({wgmma_fits(lw, mma) for mma in mmas}) > 1:
        return None  # one kind of stage layout and proxy for all
    parts, stage_bytes, align = [], 0, 16
    for mma in mmas:
        part = _pipeline_part(lw, mma, body, inside, iv_value, stage_bytes)
        if part is not None:
            stage_bytes, part_align = part.pop(), part.pop()
            align = max(align, part_align)
            parts.append(part)
    if not parts or not stage_bytes:
        return None
    stage_bytes = -(-stage_bytes // align) * align
    wgmma = wgmma_fits(lw, parts[0][0])
    tma_plans = _tma_plans(lw, parts) if wgmma and getattr(lw, "tma", False) else None
    budget, most = _PIPELINE_SHARED, 3
    if wgmma and strides_by_the_grid(lw, op):
        budget, most = max_shared_per_block(lw.arch) * 3 // 4, _PERSISTENT_STAGES
    elif wgmma:
        budget, most = max(budget, max_shared_per_block(lw.arch) // _WGMMA_STAGES_SHARE), 4
        if tma_plans is not None and \
                4 * stage_bytes > max_shared_per_block(lw.arch) // _LARGE_STAGES_SHARE:
            most = 2  # four CTAs an SM over two stages (see _WGMMA_STAGES_SHARE)
    elif 2 * stage_bytes > budget:
        budget = max(budget, max_shared_per_block(lw.arch) // _LARGE_STAGES_SHARE)
    stages = max(2, min(most, budget // stage_bytes))
    if loop.trips is not None:
        stages = min(stages, loop.trips)
    if stages < 2 or stages * stage_bytes > budget:
        return None
    pipe = _KPipeline(lw, loop, parts, stage_bytes, stages, iv_value)
    pipe.async_proxy, pipe.align = wgmma, align
    mma = parts[0][0]
    if wgmma and stages >= 3 and len(parts) == 1 and all(pipe.roles_of(mma)) \
            and _accumulates_in_place(lw, body, mma):
        pipe.lag = 1
    if tma_plans is not None:
        pipe.tma = _tma_stages(lw, tma_plans)
        pipe.after_writes = _may_follow_writes(lw.function, op)
    return pipe


# A persistent kernel's K loop (common.strides_by_the_grid) may fill this many stages, in up to
# three quarters of the CTA's opt-in shared memory. Its grid is sized to the SMs, one CTA each, so no
# other CTA hides the loads' latency: with two 32 KiB stages (one in flight, ~0.3 us of
# 128x128x64 wgmma's to cover a load) an H200 measured NVIDIA's persistent GEMM at 2.38x
# tileiras's time, which runs six (conformance/cutile-python-gpu.md).
_PERSISTENT_STAGES = 6


def _tma_plans(lw, parts):
    """{(id(mma), role): (tma.plan, tile shape)} for a wgmma pipeline's parts when every staged
    operand is 128-byte swizzled and has a tensor map, else None (the stages stay cp.async's).
    Declares nothing: _tma_stages does, once the pipeline is certain."""
    from . import tma
    found = {}
    for mma, staged_pair, _, _ in parts:
        for role, staged in enumerate(staged_pair):
            if staged is None:
                continue
            shape = tuple(staged.type.shape)
            if not _swizzles(*shape[-2:]):
                return None
            plan = tma.plan(lw, staged.op, staged.view, shape)
            if plan is None:
                return None
            found[(id(mma), role)] = (plan, shape[-2:])
    return found or None


def _tma_stages(lw, plans):
    """_KPipeline.tma from _tma_plans' answer: each staged operand's tensor map parameter
    (declared here), rows and columns."""
    from . import tma
    return {key: (tma.tensor_map(lw, plan, shape[0]), *shape)
            for key, (plan, shape) in plans.items()}


def _pipeline_part(lw, mma, body, inside, iv_value, stage_bytes):
    """[mma, staged, offsets, strides, align, stage_bytes after it] for one mma of a pipelined
    K loop (its staged operands placed from `stage_bytes` on), or None."""
    layout, form = mma_layout(lw, mma), mma_form(lw, mma)
    if layout is None or form is None or form[0] == "f64" or mma.name not in _IN_REGISTERS:
        return None
    acc = lw.forward.get(mma.operands["acc"], mma.operands["acc"])
    held = lw.values.get(acc)
    if _IN_REGISTERS[mma.name] and tensor_core_kind(lw, mma) and not _keeps_fragments(
            lw, mma, layout, held.layout if isinstance(held, Tile) else None):
        return None  # lower_mmaf takes _mma_sync
    lhs_type = mma.operands["lhs"].type
    size = dtypes.byte_size(lhs_type.element)
    unit = 16 // size
    m, n = mma.results[0].type.shape[-2:]
    k_dim = lhs_type.shape[-1]
    strides = [_padded_stride(k_dim, unit), _padded_stride(n, unit)]
    rows = [m, k_dim]
    wgmma = wgmma_fits(lw, mma)
    if wgmma:  # _wgmma's layouts (B [K, N] MN-major)
        strides = [_wgmma_place(m, k_dim, True), _wgmma_place(k_dim, n, False)]
    staged, offsets, start = [None, None], [None, None], stage_bytes
    shapes, align = ((m, k_dim), (k_dim, n)), 16
    for role, name in enumerate(("lhs", "rhs")):
        load = staged_source(lw, mma.operands[name])
        if load is None or role == 1 and size != 2:  # B staged transposed: cp.async cannot
            continue
        found = staged_use(lw, load.results[0])
        if found is None or found[0] is not mma:
            continue
        if load not in body.ops \
                or lw.forward.get(load.operands["view"], load.operands["view"]) in inside \
                or any(lw.forward.get(v, v) in inside and lw.forward.get(v, v) is not iv_value
                       for v in load.operands["index"]):
            continue
        view = lw.get(load.operands["view"])
        plan = staging(lw, load, view)
        if not plan:
            continue
        if found[2] or plan[1]:  # B's [N, K] source (transposed, or a swapped load), K-major
            strides[1] = _wgmma_place(n, k_dim, True) if wgmma else _padded_stride(k_dim, unit)
            rows[1], shapes = n, (shapes[0], (n, k_dim))
        staged[role] = ViewStaged(load, view, plan[0], None, plan[1])
        if wgmma and _swizzles(*shapes[role]):  # the swizzle's atoms start 1024-byte aligned
            align = _SWIZZLE_ATOM
            stage_bytes = -(-stage_bytes // align) * align
        offsets[role] = stage_bytes
        if wgmma:
            staged_bytes = _operand_bytes(*shapes[role], role == 0 or found[2] or plan[1])
        else:
            staged_bytes = size * layout.batches * rows[role] * strides[role]
        stage_bytes += -(-staged_bytes // 16) * 16
    if stage_bytes == start:
        return None
    return [mma, staged, offsets, strides, align, stage_bytes]


def _accumulates_in_place(lw, body, mma) -> bool:
    """Whether `mma` (in `for` body `body`) may add into the loop-carried accumulator registers
    themselves while its wgmma's are in flight: its accumulator is a carried value kept in the
    mma layout that nothing else reads, and its result is read only by the body's `continue`,
    which carries it on in the same place."""
    from tilebc.ops.spec import Exit
    from .anchors import _uses, carried_mma_layout
    last = body.ops[-1]
    if last.spec.exit is not Exit.NEXT:
        return False
    uses = _uses(lw)
    acc = lw.forward.get(mma.operands["acc"], mma.operands["acc"])
    result = mma.results[0]
    if acc not in body.args[1:] or uses.get(acc) != [mma] or uses.get(result) != [last]:
        return False
    index = body.args.index(acc) - 1
    carried = [lw.forward.get(v, v) for v in last.operand_values]
    return carried.count(result) == 1 and carried[index] is result \
        and carried_mma_layout(lw, body, index) is not None


def _mma_in_registers(lw, op, layout, form):
    """mmaf / mmai on the tensor cores with the accumulator and the result in `layout` (MmaAcc):
    each warp keeps its blocks' C fragments in registers for the whole K loop (mma.sync adds into
    them in place). The operands are staged with padded rows (_padded_stride) and read with
    ldmatrix: A row-major, one .x4 per block row of the warp tile; B one .x4 per two block
    columns, for f16 / bf16 row-major (K x N) through .trans, for tf32 and i8 (whose 4- and
    1-byte elements .trans cannot transpose) staged transposed (N x K). The accumulator enters
    the first mma as C, so the sum of products plus the accumulator is rounded once to the
    result type (the reference's semantics); no shared-memory round trip of the product."""
    if form[0] == "f64":
        _lower_transposed(lw, op)
        _mma_f64(lw, op, layout)
        return
    if wgmma_fits(lw, op) and layout.grid == (1, lw.T // 32, 1):
        _wgmma(lw, op, layout, form[0])
        return
    w = lw.w
    a_type, b_type, k_step = form
    acc = lw.convert(lw.get(op.operands["acc"], any_layout=True), layout)
    a_held = lw._cache.get(("hoisted A", op)) or \
        _a_fragments(lw, lw.get(op.operands["lhs"], any_layout=True), layout, form)
    lhs, rhs = (lw.get(op.operands[n]) if a_held is None or n == "rhs" else a_held.tile
                for n in ("lhs", "rhs"))
    from_source = isinstance(rhs, Transposed)  # B's [.., N, K] source, staged as it is
    if from_source:
        rhs = lw.get(rhs.source)
    from_source = from_source or getattr(rhs, "swapped", False)
    b_transposed = dtypes.byte_size(lhs.element) != 2 or from_source
    pipe = lw._cache.get(("k pipeline", op))  # a K-loop pipeline's stages hold these
    ahead = pipe.roles_of(op) if pipe is not None else (False, False)
    if isinstance(rhs, ViewStaged) and (b_transposed and not from_source
                                        or pipe is not None and not ahead[1]):
        swapped = rhs.swapped
        rhs = rhs.make()  # cp.async cannot transpose; a pipeline waits for its own groups only
        if swapped:  # the load as it is: B [K, N]
            from_source = False
            b_transposed = dtypes.byte_size(lhs.element) != 2
    if isinstance(lhs, ViewStaged) and pipe is not None and not ahead[0]:
        lhs = lhs.make()
    copied = [isinstance(t, ViewStaged) or a for t, a in zip((lhs, rhs), ahead)]
    # operands already where the mma reads them: nothing of this op's goes through the exchange
    covered = (ahead[0] or a_held is not None, ahead[1])
    result_type = op.results[0].type
    m, n = result_type.shape[-2:]
    k_dim = lhs.type.shape[-1]
    integer = a_type in ("s8", "u8")
    if a_type == "tf32":
        lhs, rhs = _as_tf32(lw, lhs), _as_tf32(lw, rhs)
        acc_type = "f32"
    elif integer:
        acc_type = "s32"
    elif k_step == 32:  # native fp8 (sm_89+): the bytes go to the mma as they are
        acc_type = "f32"
    else:
        lhs, rhs = (t if c else _to_f16(lw, t) for t, c in zip((lhs, rhs), copied))
        acc_type = "f32"
    size = dtypes.byte_size(lhs.element)
    unit = 16 // size  # elements in a 16-byte ldmatrix row
    a_stride = _padded_stride(k_dim, unit)
    b_stride = _padded_stride(k_dim if b_transposed else n, unit)
    all_batches = layout.batches
    wanted = [0 if a_held else size * all_batches * m * a_stride,
              size * all_batches * (n if b_transposed else k_dim) * b_stride]
    exchange = iter(lw.reserve_smem([b for b, a in zip(wanted, ahead) if not a]))
    offsets = [pipe.offsets_of(op)[i] if ahead[i] else next(exchange) for i in range(2)]
    stage = pipe.enter(op) if pipe is not None else None  # waits, synchronizes, issues the next
    if copied[0] and not ahead[0]:
        _copy_async(lw, lhs, offsets[0], a_stride)
    elif not copied[0] and a_held is None:
        _stage(lw, lhs, offsets[0], a_stride, False)
    if copied[1] and not ahead[1]:
        _copy_async(lw, rhs, offsets[1], b_stride)
    elif not copied[1]:
        _stage(lw, rhs, offsets[1], b_stride, b_transposed and not from_source)
    if pipe is None and any(copied):  # this thread's copies landed; the barrier shows them
        w("cp.async.commit_group")
        w("cp.async.wait_group 0")
    if not all(covered):
        lw.barrier()
    (wb, wm, wn), (batches, rows, cols) = layout.grid, layout.per_warp

    u32 = partial(_u32, w)

    # per-thread ldmatrix row addresses, once per kernel: lane l gives row l % 8 of matrix
    # q = l / 8. A's matrices are (rows 0-7, 8-15) x (K halves 0, 1) in the order of the mma's
    # a0..a3; B's are (K halves 0, 1) x (this block column, the warp's next one)
    def lanes():
        lane, pb, pm, pn = _warp_position(lw, u32, layout.grid)
        within = u32("and.b32", lane, 7)
        half = u32("and.b32", u32("shr.u32", lane, 3), 1)  # q % 2
        pair = u32("shr.u32", lane, 4)  # q / 2
        row8 = u32("mad.lo.u32", half, 8, within)
        a_row = u32("mad.lo.u32", pm, 16, row8)
        a_row = u32("mad.lo.u32", pb, m, a_row)
        a_at = u32("mad.lo.u32", a_row, a_stride, u32("mul.lo.u32", pair, unit))
        column = u32("mad.lo.u32", pair, 8 * wn, u32("shl.b32", pn, 3))
        if b_transposed:  # row: the block column's n, then the K half
            b_row = u32("mad.lo.u32", pb, n, u32("add.u32", column, within))
            b_at = u32("mad.lo.u32", b_row, b_stride, u32("mul.lo.u32", half, unit))
        else:  # row: K, then the block column's 8 n
            b_row = u32("mad.lo.u32", pb, k_dim, row8)
            b_at = u32("mad.lo.u32", b_row, b_stride, column)
        return (u32("mad.lo.u32", a_at, size, lw.smem_base()),
                u32("mad.lo.u32", b_at, size, lw.smem_base()))
    a_lane, b_lane = lw._cached(("mma lanes", layout.key(), form, k_dim, a_stride, b_stride, b_transposed),
                                lanes)
    d = []
    for k in range(layout.slots):
        reg = w.reg("b32" if integer else "f32")
        if integer:
            w(f"mov.b32 {reg}, {acc.slot(k)}")
        else:
            w(f"mov.f32 {reg}, {dtypes.to_f32(w, acc.slot(k), acc.element)}")
        d.append(reg)
    shape = f"m16n8k{k_step}"
    trans = "" if b_transposed else ".trans"

    def k_step_at(a_at, b_at, kk, jb):
        a_frags = []
        for jm in range(rows):
            if a_held is not None:
                a_frags.append(a_held.fragment(jb, jm, kk // k_step))
                continue
            frag = [w.reg("b32") for _ in range(4)]
            at = size * (jm * wm * 16 * a_stride + kk)
            w(f"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{', '.join(frag)}}}, [{a_at}+{at}]")
            a_frags.append(frag)
        b_frags = []
        for jn in range(0, cols, 2):
            count = 4 if jn + 1 < cols else 2
            frag = [w.reg("b32") for _ in range(count)]
            if b_transposed:
                at = size * (jn * wn * 8 * b_stride + kk)
            else:
                at = size * (kk * b_stride + jn * wn * 8)
            w(f"ldmatrix.sync.aligned.m8n8.x{count}{trans}.shared.b16 {{{', '.join(frag)}}}, "
              f"[{b_at}+{at}]")
            b_frags += [frag[:2], frag[2:]] if count == 4 else [frag]
        for jm in range(rows):
            for jn in range(cols):
                first = 4 * ((jb * rows + jm) * cols + jn)
                c = ", ".join(d[first:first + 4])
                w(f"mma.sync.aligned.{shape}.row.col.{acc_type}.{a_type}.{b_type}.{acc_type} "
                  f"{{{c}}}, {{{', '.join(a_frags[jm])}}}, {{{', '.join(b_frags[jn])}}}, {{{c}}}")

    steps = k_dim // k_step
    b_advance = k_step * (1 if b_transposed else b_stride)
    b_batch = (n if b_transposed else k_dim) * b_stride
    if ahead[0]:  # this iteration's stage
        a_lane = u32("add.u32", a_lane, stage)
    if ahead[1]:
        b_lane = u32("add.u32", b_lane, stage)
    for jb in range(batches):
        a_ptr = u32("add.u32", a_lane, offsets[0] + size * jb * wb * m * a_stride)
        b_ptr = u32("add.u32", b_lane, offsets[1] + size * jb * wb * b_batch)
        if steps <= _UNROLL_K_STEPS or a_held is not None:  # registers: every step unrolled
            for step in range(steps):
                k_step_at(a_ptr, b_ptr, k_step * step, jb)
            continue
        a_end = u32("add.u32", a_ptr, size * k_dim)  # a loop whose pointers advance by a step
        k_top = w.label("mma_k")
        w.place(k_top)
        k_step_at(a_ptr, b_ptr, 0, jb)
        w(f"add.u32 {a_ptr}, {a_ptr}, {size * k_step}")
        w(f"add.u32 {b_ptr}, {b_ptr}, {size * b_advance}")
        more = w.reg("pred")
        w(f"setp.lt.u32 {more}, {a_ptr}, {a_end}")
        w(f"@{more} bra.uni {k_top}")
    if not all(covered):
        lw.barrier()  # the operands' shared memory is free for the next exchange
    if pipe is not None:
        pipe.leave(op)
    regs = d if result_type.element.name in ("f32", "i32") else \
        [dtypes.from_f32(w, reg, result_type.element) for reg in d]
    lw.set(op.results[0], Tile(result_type, regs, layout))


def wgmma_descriptor(start: int, leading: int, stride: int, swizzle: int = 0) -> int:
    """The constant fields of a wgmma shared-memory matrix descriptor (PTX ISA, "Matrix
    Descriptor Format"): start address, leading and stride byte offsets, each >> 4 in 14 bits
    (bits 0, 16, 32); the layout type in bits 62-63 (0: no swizzle, 1: 128-byte swizzle);
    matrix base offset 0 (swizzled operands start at 1024-byte-aligned atoms)."""
    for value in (start, leading, stride):
        if value % 16 or value >> 4 >= 1 << 14:
            raise ValueError(f"descriptor field {value} is not a 16-byte multiple under 256 KiB")
    if swizzle not in (0, _SWIZZLE):
        raise ValueError(f"swizzle {swizzle}: only none or {_SWIZZLE} bytes")
    return start >> 4 | (leading >> 4) << 16 | (stride >> 4) << 32 | int(swizzle > 0) << 62


# 128-byte swizzle: a staged row of 64 16-bit elements, its 16-byte chunk c at c ^ (row % 8);
# 8 rows (1024 bytes, the alignment the pattern needs) form one atom
_SWIZZLE = 128
_SWIZZLE_ATOM = 8 * _SWIZZLE


def _swizzles(rows: int, cols: int) -> bool:
    """Whether a staged [rows, cols] 16-bit wgmma operand (cols along its contiguous dim: K for
    K-major, N for MN-major) takes the 128-byte swizzle: whole 64-element blocks along cols,
    whole 8-row atoms. The layout fast sm_90 GEMMs (tileiras's too) give the tensor core; its
    rows need no padding, as a row's 8 chunks and a chunk column's 8 rows fill all 32 banks."""
    return cols % (_SWIZZLE // 2) == 0 and rows % 8 == 0


def _swizzled_offset(i: int, j: int, rows: int) -> int:
    """_swizzled_at on constants."""
    return (j >> 6) * rows * 64 + i * 64 + ((((j >> 3) & 7) ^ (i & 7)) << 3) + (j & 7)


def _swizzled_at(w, row: str, col: str, rows: int) -> str:
    """Element offset of (row, col) of a 128-byte-swizzled [rows, C] operand: column blocks of
    64 (`rows` x 128 bytes each, the descriptor's leading offset for MN-major), 128-byte rows,
    the 16-byte chunk (col >> 3) & 7 XORed with row & 7."""
    u32 = partial(_u32, w)
    chunk = u32("xor.b32", u32("and.b32", u32("shr.u32", col, 3), 7), u32("and.b32", row, 7))
    at = u32("mad.lo.u32", chunk, 8, u32("and.b32", col, 7))
    at = u32("mad.lo.u32", row, 64, at)
    return u32("mad.lo.u32", u32("shr.u32", col, 6), rows * 64, at)


def _operand_bytes(rows: int, cols: int, k_last: bool) -> int:
    """Shared bytes of a staged [rows, cols] 16-bit wgmma operand (K-major: [M or N, K];
    MN-major: [K, N])."""
    if _swizzles(rows, cols):
        return 2 * rows * cols
    if k_last:
        return cols // 8 * _leading(rows, True)
    return rows // 8 * _leading(cols, False)


def _k_group(rows: int) -> int:
    """Bytes between the K groups of 8 of a K-major wgmma operand of `rows` 16-bit rows: 16 more
    than the group, so the 16-byte runs of one row in successive groups fall in different banks
    (a warp staging a row stores without conflicts)."""
    return 16 * rows + 16


# Bytes between the 16-byte N runs of an MN-major B's core matrices (8 K rows of 16 bytes): 16
# more than a core matrix, so the runs of one K row fall in different banks.
_MN_RUN = 144


def _leading(rows: int, k_last: bool) -> int:
    """A staged wgmma operand's bytes between K groups of 8 (the descriptor's leading offset;
    the whole operand is K / 8 of them): K-major _k_group, MN-major rows / 8 runs."""
    return _k_group(rows) if k_last else rows // 8 * _MN_RUN


def _canonical_at(w, row: str, col: str, rows: int, cols: int, k_last: bool) -> str:
    """Element offset (u32 register) of (row, col) of a staged [rows, cols] wgmma operand: the
    128-byte swizzle where _swizzles (_swizzled_at), else without swizzle in its canonical
    layout (PTX ISA, "Shared Memory Matrix Layout"), 8 x 16-byte core matrices:
    an [R, K] tile (k_last) K-major, (r, k) at byte (k >> 3) * L + 16r + 2(k & 7) (leading
    offset L = _k_group(R) between K groups of 8, stride 128 between 8-row groups); a [K, N] tile
    MN-major, (k, n) at (k >> 3) * L + (n >> 3) * _MN_RUN + 16(k & 7) + 2(n & 7) (leading
    L = N / 8 * _MN_RUN, stride _MN_RUN). Runs of up to 8 elements along the last dim stay
    contiguous (cp.async)."""
    u32 = partial(_u32, w)
    if _swizzles(rows, cols):
        return _swizzled_at(w, row, col, rows)
    if k_last:
        at = u32("mad.lo.u32", u32("shr.u32", col, 3), _k_group(rows) // 2,
                 u32("and.b32", col, 7))
        return u32("mad.lo.u32", row, 8, at)
    at = u32("mad.lo.u32", u32("shr.u32", row, 3), _leading(cols, False) // 2,
             u32("and.b32", col, 7))
    at = u32("mad.lo.u32", u32("shr.u32", col, 3), _MN_RUN // 2, at)
    return u32("mad.lo.u32", u32("and.b32", row, 7), 8, at)


def _canonical_offset(i: int, j: int, rows: int, cols: int, k_last: bool) -> int:
    """_canonical_at on constants."""
    if _swizzles(rows, cols):
        return _swizzled_offset(i, j, rows)
    if k_last:
        return (j >> 3) * (_k_group(rows) // 2) + i * 8 + (j & 7)
    return (i >> 3) * (_leading(cols, False) // 2) + (j >> 3) * (_MN_RUN // 2) + (i & 7) * 8 \
        + (j & 7)


def _stage_canonical(lw, tile: Tile, offset: int, k_last: bool) -> None:
    """Store a Cyclic 2-D tile to shared memory at `offset` in _canonical_at's layout. A slot
    whose element lands the same distance from slot 0's in every thread is addressed as one
    per-thread base plus an immediate; others compute their position."""
    w = lw.w
    rows, cols = tile.type.shape[-2:]
    T, size = lw.T, dtypes.byte_size(tile.element)

    def shift(k):
        """The constant element distance of slot k from slot 0 in every thread, or None."""
        if (k + 1) * T > tile.count:
            return None
        found = {_canonical_offset(*divmod(t + k * T, cols), rows, cols, k_last)
                 - _canonical_offset(*divmod(t, cols), rows, cols, k_last) for t in range(T)}
        return found.pop() if len(found) == 1 else None

    def base():
        row = intdiv.udiv(w, lw.tid(), cols)
        col = intdiv.urem(w, lw.tid(), cols, quotient=row)
        return _u32(w, "mad.lo.u32", _canonical_at(w, row, col, rows, cols, k_last), size,
                    lw.smem_base())
    for k in range(lw.slots(tile.count)):
        distance = shift(k) if T <= tile.count else None
        if distance is not None:
            first = lw._cached(("canonical stage base", rows, cols, k_last, size), base)
            address = f"{first}+{offset + size * distance}"
        else:
            e = lw.elem_index(tile.count, k)
            i = intdiv.udiv(w, e, cols, bound=tile.count - 1)
            j = intdiv.urem(w, e, cols, quotient=i, bound=tile.count - 1)
            address = lw.smem_address(offset, _canonical_at(w, i, j, rows, cols, k_last),
                                      tile.element)
        lw.store("shared", address, tile.slot(k), tile.element)


class _HeldA:
    """An f16 / bf16 A operand already in registers as another mma's accumulator fragments of
    the same warp rows (attention's P): the m16n8k16 A fragment of K step s packs the C
    registers of block columns 2s and 2s + 1 (PTX ISA, mma.m16n8k16 fragment layouts), so A
    needs no shared-memory staging and no ldmatrix."""

    def __init__(self, lw, tile):
        self.lw, self.tile = lw, tile

    def fragment(self, jb: int, jm: int, step: int):
        source = self.tile.layout
        _, rm, cn = source.per_warp

        def pair(jn, first):
            k = ((jb * rm + jm) * cn + jn) * 4 + first
            key = ("held A pair", self.tile.regs[k], self.tile.regs[k + 1])

            def make():
                reg = self.lw.w.reg("b32")
                self.lw.w(f"mov.b32 {reg}, {{{self.tile.regs[k]}, {self.tile.regs[k + 1]}}}")
                return reg
            return self.lw.scoped(key, make)
        return [pair(2 * step, 0), pair(2 * step, 2), pair(2 * step + 1, 0),
                pair(2 * step + 1, 2)]


class _HoistedA:
    """An A defined before the loop around its mma: its fragments were read from shared memory
    into registers once, before the loop (_hoist_invariant_a)."""

    def __init__(self, tile, fragments):
        self.tile, self.fragments = tile, fragments

    def fragment(self, jb: int, jm: int, step: int):
        return self.fragments[jb, jm, step]


def _a_fragments(lw, tile, layout, form):
    """_HeldA for mma A operand `tile` when it is an f16 / bf16 tile in an mma accumulator
    layout whose warps hold the same rows as `layout` and whose columns are the K dim; else
    None."""
    from .layout import MmaAcc
    source = getattr(tile, "layout", None)
    if not isinstance(source, MmaAcc) or form[0] not in ("f16", "bf16") \
            or dtypes.name_of(tile.element) != form[0] or source.height != 16 \
            or source.grid != layout.grid or source.copies != 1 or layout.copies != 1 \
            or source.batches != layout.batches or source.m != layout.m \
            or source.per_warp[2] % 2 or tile.type.shape[-1] != source.n:
        return None
    return _HeldA(lw, tile)


def _wgmma(lw, op, layout, a_type):
    """f16 / bf16 mmaf with an f32 result on sm_90 (anchors.wgmma_fits) through
    wgmma.mma_async.m64nNk16: A [M, K] staged K-major, B [K, N] MN-major (imm-trans-b) or a
    Transposed B's [N, K] source K-major, 128-byte swizzled where _swizzles, else in padded core
    matrices (_canonical_at), by st.shared or by
    cp.async (ViewStaged, also a K-loop pipeline's stages); per K step, each warpgroup issues
    one wgmma for each of its 64-row groups (warpgroup g of G: rows 64 g of every 64 G) from
    matrix descriptors, all in one commit group. The accumulators are the MmaAcc (1, 4 G, 1)
    fragment, which is wgmma's (warp w: rows 16 (w mod 4) + g, + 8 of its warpgroup's 64), so
    a `for` carries them in registers; the accumulator enters as D (scale-d 1)."""
    w = lw.w
    acc = lw.convert(lw.get(op.operands["acc"], any_layout=True), layout)
    a_held = lw._cache.get(("hoisted A", op)) or \
        _a_fragments(lw, lw.get(op.operands["lhs"], any_layout=True), layout, (a_type,))
    lhs = a_held.tile if a_held is not None else lw.get(op.operands["lhs"])
    rhs = lw.get(op.operands["rhs"])
    from_source = isinstance(rhs, Transposed)
    if from_source:
        rhs = lw.get(rhs.source)
    from_source = from_source or getattr(rhs, "swapped", False)
    pipe = lw._cache.get(("k pipeline", op))
    ahead = pipe.roles_of(op) if pipe is not None else (False, False)
    if isinstance(rhs, ViewStaged) and pipe is not None and not ahead[1]:
        if rhs.swapped:  # the load as it is: B [K, N]
            from_source = False
        rhs = rhs.make()
    if isinstance(lhs, ViewStaged) and pipe is not None and not ahead[0]:
        lhs = lhs.make()
    copied = [isinstance(t, ViewStaged) or a for t, a in zip((lhs, rhs), ahead)]
    # operands already where the wgmma reads them: nothing of this op's goes through the exchange
    covered = (ahead[0] or a_held is not None, ahead[1])
    m, n = op.results[0].type.shape
    k_dim = lhs.type.shape[-1]
    # the staged [rows, cols] of A (K-major) and B (K-major N x K source, or MN-major K x N)
    shapes = ((m, k_dim), (n, k_dim) if from_source else (k_dim, n))
    swizzled = [_swizzles(*shape) for shape in shapes]
    sizes = [_operand_bytes(*shape, k_last) for shape, k_last in zip(shapes, (True, from_source))]
    exchange = iter(lw.reserve_smem([b for b, a in zip(sizes, covered) if not a],
                                    _SWIZZLE_ATOM if any(swizzled) else 16))
    offsets = [pipe.offsets_of(op)[i] if ahead[i] else None if covered[i] else next(exchange)
               for i in range(2)]
    lag = pipe.lag if pipe is not None else 0
    # lag: the copies of a later K tile go after this one's wgmma's, so the tensor core starts
    # right after the barrier and their address arithmetic overlaps the wgmma's
    stage = pipe.enter(op, prefetch=not lag) if pipe is not None else None
    for role, (tile, k_last) in enumerate(((lhs, True), (rhs, from_source))):
        if covered[role] and not ahead[role]:
            continue  # A in registers
        if copied[role] and not ahead[role]:
            _copy_async(lw, tile, offsets[role], _wgmma_place(*shapes[role], k_last))
        elif not copied[role]:
            _stage_canonical(lw, tile, offsets[role], k_last)
    if pipe is None and any(copied):
        w("cp.async.commit_group")
        w("cp.async.wait_group 0")
    if not all(covered):
        w("fence.proxy.async.shared::cta")  # generic-proxy writes, read by wgmma's async proxy
        lw.barrier()

    def base():
        reg = w.reg("b64")
        w(f"cvt.u64.u32 {reg}, {lw.smem_base()}")
        w(f"shr.u64 {reg}, {reg}, 4")
        return reg
    starts = [lw._cached(("wgmma smem start",), base)] * 2
    if stage is not None:  # this iteration's stage: its start field
        moved = w.reg("b64")
        w(f"cvt.u64.u32 {moved}, {_u32(w, 'add.u32', lw.smem_base(), stage)}")
        w(f"shr.u64 {moved}, {moved}, 4")
        starts = [moved if a else s for a, s in zip(ahead, starts)]
    d = []
    for k in range(layout.slots):
        if lag:  # the carried registers themselves: no move may touch them while in flight
            d.append(acc.slot(k))
            continue
        reg = w.reg("f32")
        w(f"mov.f32 {reg}, {acc.slot(k)}")
        d.append(reg)
    per_half = n // 2  # f32 accumulators per thread per 64 rows
    groups = lw.T // 128  # warpgroup g takes rows 64 g of every 64 x groups (MmaAcc (1, T/32, 1))
    # A's registers are packed before the fence: ptxas makes every wgmma of the group wait for
    # the one before it (a warpgroup arrive and a scoreboard wait each) where a register a wgmma
    # reads is written after the fence
    held = {(half, step): a_held.fragment(0, half, step) for step in range(k_dim // 16)
            for half in range(m // (64 * groups))} if a_held is not None else {}
    w("wgmma.fence.sync.aligned")

    def k_major(rows, step, first_row):
        """Descriptor fields of K step `step` of a K-major operand from row `first_row`:
        swizzled, 64-element K blocks `rows` x 128 bytes apart, the step's 32 bytes into the
        block's rows (the swizzle XORs absolute address bits, so the start may sit inside an
        atom), 8-row atoms 1024 apart (the leading offset unused); unswizzled, core matrices."""
        if _swizzles(rows, k_dim):
            at = (step >> 2) * rows * _SWIZZLE + (step & 3) * 32 + first_row * _SWIZZLE
            return at, 16, _SWIZZLE_ATOM, _SWIZZLE
        return step * 2 * _k_group(rows) + first_row * 16, _k_group(rows), 128, 0
    if from_source:
        b_at, b_lead, b_stride, b_swizzle = k_major(n, 0, 0)
    elif swizzled[1]:  # MN-major: 16 K rows of 128 bytes a step, N blocks of 64 leading apart
        b_lead, b_stride, b_swizzle = k_dim * _SWIZZLE, _SWIZZLE_ATOM, _SWIZZLE
    else:
        b_lead, b_stride, b_swizzle = _leading(n, False), _MN_RUN, 0
    a_start = starts[0]
    if groups > 1 and a_held is None:  # this warpgroup's first row: 64 g rows further in A
        row_bytes = _SWIZZLE if _swizzles(m, k_dim) else 16

        def group_shift():  # once per kernel (preamble), not per K step
            shift, wide = w.reg("b32"), w.reg("b64")
            w(f"shr.u32 {shift}, {lw.tid()}, 7")
            w(f"mul.lo.u32 {shift}, {shift}, {64 * row_bytes >> 4}")
            w(f"cvt.u64.u32 {wide}, {shift}")
            return wide
        a_start = w.reg("b64")
        w(f"add.s64 {a_start}, {lw._cached(('wgmma group shift', row_bytes), group_shift)}, "
          f"{starts[0]}")
    for step in range(k_dim // 16):
        if from_source:
            b_at = k_major(n, step, 0)[0]
        else:
            b_at = step * 16 * _SWIZZLE if b_swizzle else step * 2 * b_lead
        b_desc = w.reg("b64")
        w(f"add.s64 {b_desc}, {starts[1]}, "
          f"{wgmma_descriptor(offsets[1] + b_at, b_lead, b_stride, b_swizzle)}")
        for half in range(m // (64 * groups)):
            regs = ", ".join(d[half * per_half:(half + 1) * per_half])
            if a_held is not None:  # the warp's 16 rows of each 64 (mma.m16n8k16's A fragment)
                a_regs = ", ".join(held[half, step])
                w(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{a_type}.{a_type} "
                  f"{{{regs}}}, {{{a_regs}}}, {b_desc}, 1, 1, 1, {int(not from_source)}")
                continue
            a_desc = w.reg("b64")
            at, lead, stride, swizzle = k_major(m, step, half * 64 * groups)
            w(f"add.s64 {a_desc}, {a_start}, "
              f"{wgmma_descriptor(offsets[0] + at, lead, stride, swizzle)}")
            w(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{a_type}.{a_type} "
              f"{{{regs}}}, {a_desc}, {b_desc}, 1, 1, 1, 0, {int(not from_source)}")
    w("wgmma.commit_group.sync.aligned")
    if lag:
        pipe.prefetch()
    w(f"wgmma.wait_group.sync.aligned {lag}")  # lag 1: the previous iteration's have landed
    if not all(covered):
        lw.barrier()  # the operands' shared memory is free for the next exchange
    if pipe is not None:
        pipe.leave(op)
    lw.set(op.results[0], Tile(op.results[0].type, d, layout))


def _wgmma_place(rows: int, cols: int, k_last: bool):
    """_copy_async's destination for a staged [rows, cols] wgmma operand: _canonical_at, with
    `constant` its value on constants and `key` what identifies it."""
    def place(w, row, col, _cols):
        return _canonical_at(w, row, col, rows, cols, k_last)
    place.constant = lambda i, j, _cols: _canonical_offset(i, j, rows, cols, k_last)
    place.key = ("canonical", rows, cols, k_last)
    return place


def _f64_stride(row: int, want: int) -> int:
    """Elements between row starts of a staged f64 operand: `want` (mod 16). 4 for scalar
    fragments (the 4 rows of 4 elements a half-warp reads fall in 4 different 32-byte bank
    quarters); 8 for paired A (the 2 rows of 4 pairs a quarter-warp reads fill the banks once)."""
    return row + (want - row) % 16


def _mma_f64(lw, op, layout):
    """f64 mmaf through mma.sync.m8n8k4 in the accumulator layout of 8x8 blocks: one f64 of A
    (A[g][t]) and of B (B[t][g]) per lane and K step. Where K % 8 == 0 the operands are staged
    with K interleaved (_interleave8) and B transposed, so one 16-byte load gives a lane its
    fragments of two K steps (A[g][t], A[g][t+4] and B[t][g], B[t+4][g]); else row-major with
    one 8-byte load per fragment."""
    w = lw.w
    acc = lw.convert(lw.get(op.operands["acc"], any_layout=True), layout)
    lhs, rhs = (lw.get(op.operands[n]) for n in ("lhs", "rhs"))
    result_type = op.results[0].type
    m, n = result_type.shape[-2:]
    k_dim = lhs.type.shape[-1]
    paired = k_dim % 8 == 0
    a_stride = _f64_stride(k_dim, 8 if paired else 4)
    # paired B: K/2 rows of 2N; 4 (mod 16) rows apart, so the 4 rows of 2 pairs a quarter-warp
    # reads fill the banks once
    b_stride = _f64_stride(2 * n, 4) if paired else _f64_stride(n, 4)
    b_rows = k_dim // 2 if paired else k_dim
    offsets = lw.reserve_smem([8 * layout.batches * m * a_stride,
                               8 * layout.batches * b_rows * b_stride])
    _stage(lw, lhs, offsets[0], a_stride, False, pairs="cols" if paired else None)
    _stage(lw, rhs, offsets[1], b_stride, False, pairs="rows" if paired else None)
    lw.barrier()
    (wb, wm, wn), (batches, rows, cols) = layout.grid, layout.per_warp

    u32 = partial(_u32, w)

    def lanes():
        lane, pb, pm, pn = _warp_position(lw, u32, layout.grid)
        g, t = u32("shr.u32", lane, 2), u32("and.b32", lane, 3)
        a_row = u32("mad.lo.u32", pb, m, u32("mad.lo.u32", pm, 8, g))
        column = u32("mad.lo.u32", pn, 8, g)
        if paired:  # A[row][2t], B pair row t, column 2*column: K steps s = 0, 1
            a_at = u32("mad.lo.u32", a_row, a_stride, u32("shl.b32", t, 1))
            b_row = u32("mad.lo.u32", pb, k_dim // 2, t)
            b_at = u32("mad.lo.u32", b_row, b_stride, u32("shl.b32", column, 1))
        else:
            a_at = u32("mad.lo.u32", a_row, a_stride, t)  # A[row][t]
            b_row = u32("mad.lo.u32", pb, k_dim, t)
            b_at = u32("mad.lo.u32", b_row, b_stride, column)  # B[t][col]
        return (u32("mad.lo.u32", a_at, 8, lw.smem_base()),
                u32("mad.lo.u32", b_at, 8, lw.smem_base()))
    a_lane, b_lane = lw._cached(("mma f64 lanes", layout.key(), k_dim, a_stride, b_stride,
                                 paired), lanes)
    d = []
    for k in range(layout.slots):
        reg = w.reg("f64")
        w(f"mov.f64 {reg}, {acc.slot(k)}")
        d.append(reg)

    def load(at, byte):
        """[fragment of each K step] from `at`+byte: a pair with paired staging, else one."""
        if not paired:
            reg = w.reg("f64")
            w(f"ld.shared.f64 {reg}, [{at}+{byte}]")
            return [reg]
        pair = [w.reg("f64"), w.reg("f64")]
        w(f"ld.shared.v2.f64 {{{pair[0]}, {pair[1]}}}, [{at}+{byte}]")
        return pair

    def k_step_at(a_at, b_at, kk, jb):
        """K steps kk.. (one, or two when paired): A blocks jm rows of 8 down; B blocks jn
        columns of 8 right (paired: 16 elements a block in a pair row; kk / 2 pair rows)."""
        a_frags = [load(a_at, 8 * (jm * wm * 8 * a_stride + kk)) for jm in range(rows)]
        b_at_k = (kk // 2) * b_stride if paired else kk * b_stride
        b_frags = [load(b_at, 8 * (b_at_k + jn * wn * 8 * (2 if paired else 1)))
                   for jn in range(cols)]
        for s in range(len(a_frags[0])):
            for jm in range(rows):
                for jn in range(cols):
                    first = 2 * ((jb * rows + jm) * cols + jn)
                    c = ", ".join(d[first:first + 2])
                    w(f"mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {{{c}}}, "
                      f"{{{a_frags[jm][s]}}}, {{{b_frags[jn][s]}}}, {{{c}}}")

    step = 8 if paired else 4  # K per k_step_at
    steps = k_dim // step
    for jb in range(batches):
        a_ptr = u32("add.u32", a_lane, offsets[0] + 8 * jb * wb * m * a_stride)
        b_ptr = u32("add.u32", b_lane, offsets[1] + 8 * jb * wb * b_rows * b_stride)
        if steps <= (1 if paired else 2) * _UNROLL_K_STEPS:
            for i in range(steps):
                k_step_at(a_ptr, b_ptr, step * i, jb)
            continue
        a_end = u32("add.u32", a_ptr, 8 * k_dim)
        k_top = w.label("mma_k")
        w.place(k_top)
        k_step_at(a_ptr, b_ptr, 0, jb)
        w(f"add.u32 {a_ptr}, {a_ptr}, {8 * step}")
        w(f"add.u32 {b_ptr}, {b_ptr}, {8 * (step // 2 if paired else step) * b_stride}")
        more = w.reg("pred")
        w(f"setp.lt.u32 {more}, {a_ptr}, {a_end}")
        w(f"@{more} bra.uni {k_top}")
    lw.barrier()  # the operands' shared memory is free for the next exchange
    lw.set(op.results[0], Tile(result_type, d, layout))


def _stays_in_fragments(lw, op, layout) -> bool:
    """Whether an f16 / bf16 mmaf should produce `layout` (see _keeps_fragments)."""
    return _keeps_fragments(lw, op, layout, lw.get(op.operands["acc"], any_layout=True).layout)


def _keeps_fragments(lw, op, layout, acc_layout) -> bool:
    """Whether mmaf `op`'s product stays in `layout` given its accumulator's layout (None: not
    known yet): not when it feeds a reduction, directly or through element-wise ops (on a layout
    whose warps hold copies that may take more exchanges than the product's own round trip to
    Cyclic in _mma_sync), unless the accumulator is already in the layout or every warp holds
    whole rows that are only reduced along (two quad shuffles a row)."""
    from .anchors import reaches_reduction, reduced_along_rows
    if acc_layout == layout or not reaches_reduction(lw, op.results[0]):
        return True
    return layout.grid[2] == 1 and layout.grid[0] == 1 and layout.copies == 1 \
        and reduced_along_rows(lw, op.results[0])


@lowers("mmaf")
def lower_mmaf(lw, op):
    layout = mma_layout(lw, op)
    if layout is not None and tensor_core_kind(lw, op) and not _stays_in_fragments(lw, op, layout):
        layout = None  # the product comes back to Cyclic anyway: _mma_sync does that directly
    if layout is not None:
        _mma_in_registers(lw, op, layout, mma_form(lw, op))
        return
    _lower_transposed(lw, op)
    if tensor_core_kind(lw, op):
        _mma_sync(lw, op)
    else:
        _matmul(lw, op, integer=False)


@lowers("mmai")
def lower_mmai(lw, op):
    layout = mma_layout(lw, op)
    if layout is not None:
        _mma_in_registers(lw, op, layout, mma_form(lw, op))
    else:
        _lower_transposed(lw, op)
        _matmul(lw, op, integer=True)


@lowers("mmaf_scaled")
def lower_mmaf_scaled(lw, op):
    _matmul(lw, op, integer=False, scaled=True)


@defers("permute")
def _defer_transpose(lw, op, lower_now):
    """A permute only tensor-core mmas read as B: left to their staging (Transposed)."""
    return Transposed(op.operand_values[0], lower_now) if staged_transposed(lw, op) else None


@defers("reshape")
def _defer_reshape(lw, op, lower_now):
    """A reshape of a view load's tile left to an mma's cp.async staging (_STAGING_CHAIN): the
    load's ViewStaged again, which lowers the load and then the reshape when made."""
    source = lw.forward.get(op.operand_values[0], op.operand_values[0])
    held = lw.values.get(source)
    if not isinstance(held, ViewStaged):
        return None

    def make():
        lw.set(source, held.make())
        return lower_now()
    return ViewStaged(held.op, held.source_view, held.vec, make, held.swapped)


@defers("load_view_tko")
def _defer_view_load(lw, op, lower_now):
    """A view load only a tensor-core mma reads: copied to its staging by cp.async."""
    view = lw.get(op.operands["view"])
    found = staging(lw, op, view)
    return ViewStaged(op, view, found[0], lower_now, found[1]) if found else None


# -- f32 dot products register-blocked over a few warps ------------------------------------------
# The per-slot paths give each of the T threads its Cyclic slots: a [16, 16] result is 2 per
# thread, so every thread reads 3 operand words per K step for 2 FMAs. Here P threads (whole
# warps, P <= T) each keep an mr x nr sub-tile of accumulators in registers across the K loop,
# reading mr + nr words per K step (A rows as 16-byte loads along K, B as one nr-wide load), and
# hand the result back to Cyclic through shared memory. Fewer, fuller threads read far fewer
# shared words (a [16, 16] x [16, 16] product: one warp of 4 x 2 tiles reads half as many).

_MAX_ACCUMULATORS = 32  # f32 accumulators a thread keeps (registers; occupancy)


def _blocked_plan(lw, m: int, n: int, k_dim: int):
    """(P, mr, nr, tm, tn) minimising shared-memory words read (one wavefront per word a thread
    reads, per warp), or None. The thread grid tm x tn covers the result, thread (ty, tx) taking
    rows ty + i*tm and columns tx*nr + j. tn is a multiple of 8 so the 8 lanes of a 16-byte A load
    phase read one row (a broadcast); nr-wide B loads of a phase cover one contiguous run."""
    if k_dim % 4:
        return None
    best = None
    for nr in (4, 2, 1):
        if n % nr:
            continue
        tn = n // nr
        if tn % 8:
            continue
        for mr in range(1, m + 1):
            if m % mr or mr * nr > _MAX_ACCUMULATORS:
                continue
            threads = (m // mr) * tn
            if threads % 32 or threads > lw.T:
                continue
            warps = threads // 32
            # operand reads, the sub-tile's stores and every thread's reads of its slots, plus
            # a quarter of a warp's FMA chain (few warps: a longer critical path); ties go to
            # more threads
            cost = warps * (k_dim * (mr + nr) + mr) + lw.T // 32 * lw.slots(m * n) + \
                k_dim * mr * nr / 4
            key = (cost, -threads)
            if best is None or key < best[0]:
                best = (key, threads, mr, nr, m // mr, tn)
    return best[1:] if best else None


_UNROLLED_K = 32  # K steps of 4 unrolled whole up to this K (addresses immediates)


def _tile_pointers(lw, tn: int, nr: int, k_dim: int, n: int):
    """Byte addresses (computed once per kernel) of A[ty, 0], B[0, tx*nr] and the result's
    [ty, tx*nr] for thread (ty, tx) of a tm x tn thread grid (buffer offsets to be added)."""
    w = lw.w

    def make():
        ty = _u32(w, "shr.u32", lw.tid(), tn.bit_length() - 1) if tn & (tn - 1) == 0 else \
            _u32(w, "div.u32", lw.tid(), tn)
        tx = _u32(w, "sub.u32", lw.tid(), _u32(w, "mul.lo.u32", ty, tn))
        base = lw.smem_base()
        return (_u32(w, "mad.lo.u32", ty, k_dim * 4, base),
                _u32(w, "mad.lo.u32", tx, nr * 4, base),
                _u32(w, "mad.lo.u32", ty, n * 4, _u32(w, "mad.lo.u32", tx, nr * 4, base)))
    return lw._cached(("blocked mma", tn, nr, k_dim, n), make)


def _blocked_shape_plan(lw, result_type, k_dim: int):
    shape = result_type.shape
    if len(shape) != 2 or result_type.element.name != "f32" or lw.chunk is not None:
        return None
    return _blocked_plan(lw, shape[0], shape[1], k_dim)


# f32 registers per thread a B fragment kept across a loop may take
_HOISTED_REGISTERS = 32


_HOISTED_A_STEPS = 4  # K steps of A fragments kept in registers across a loop (4 per step)
# ... or more steps, where all of a thread's A fragments fit this many registers: attention's Q
# at head dim 128 (8 steps of one 16-row block). Staged again in every iteration instead, it
# costs a wgmma kernel ~40 % of the loop's instructions and 16 KiB of shared memory.
_HOISTED_A_REGISTERS = 32


@before_loops
def _hoist_invariant_a(lw, loop) -> None:
    """Before a `for` whose body has a tensor-core f16 / bf16 mmaf keeping its product in
    fragments, with an A defined before the loop (attention's Q): A is staged and its ldmatrix
    fragments read into registers once, here, so no iteration stages or reads it again."""
    inside, ops = _loop_contents(loop)
    w = lw.w
    for op in ops:
        if LOWERINGS.get(op.name) is not lower_mmaf or op in lw.dead \
                or ("hoisted A", op) in lw._cache:
            continue
        lhs = op.operands["lhs"]
        layout, form = mma_layout(lw, op), mma_form(lw, op)
        if lw.forward.get(lhs, lhs) in inside or layout is None or form is None \
                or form[0] not in ("f16", "bf16") or not tensor_core_kind(lw, op) \
                or layout.copies != 1 or len(lhs.type.shape) != 2:
            continue
        if not _keeps_fragments(lw, op, layout, None):
            continue  # lower_mmaf takes _mma_sync
        m, k_dim = lhs.type.shape
        steps = k_dim // form[2]
        registers = 4 * steps * layout.per_warp[1]
        if k_dim % form[2] or (steps > _HOISTED_A_STEPS and registers > _HOISTED_A_REGISTERS):
            continue
        tile = _to_f16(lw, lw.get(lhs))
        if tile.element.name != form[0]:
            continue
        size = dtypes.byte_size(tile.element)
        unit = 16 // size
        a_stride = _padded_stride(k_dim, unit)
        [offset] = lw.reserve_smem([size * m * a_stride])
        lw.barrier()  # the exchange area may still be read (an earlier loop ran no iteration)
        _stage(lw, tile, offset, a_stride, False)
        lw.barrier()
        u32 = partial(_u32, w)
        lane, pb, pm, _ = _warp_position(lw, u32, layout.grid)
        row8 = u32("mad.lo.u32", u32("and.b32", u32("shr.u32", lane, 3), 1), 8,
                   u32("and.b32", lane, 7))
        a_at = u32("mad.lo.u32", u32("mad.lo.u32", pm, 16, row8), a_stride,
                   u32("mul.lo.u32", u32("shr.u32", lane, 4), unit))
        a_ptr = u32("mad.lo.u32", a_at, size, lw.smem_base())
        wm, rows = layout.grid[1], layout.per_warp[1]
        fragments = {}
        for jm in range(rows):
            for step in range(steps):
                frag = [w.reg("b32") for _ in range(4)]
                at = offset + size * (jm * wm * 16 * a_stride + step * form[2])
                w(f"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{', '.join(frag)}}}, "
                  f"[{a_ptr}+{at}]")
                fragments[0, jm, step] = frag
        lw.barrier()  # the exchange area is free for the loop
        lw._cache[("hoisted A", op)] = _HoistedA(tile, fragments)


def _loop_contents(loop):
    """(every value defined inside `for` op `loop`, every op inside it)."""
    inside, ops, stack = set(), [], [loop]
    while stack:
        for region in stack.pop().regions:
            for block in region.blocks:
                inside.update(block.args)
                for inner in block.ops:
                    inside.update(inner.results)
                    ops.append(inner)
                    stack.append(inner)
    return inside, ops


@before_loops
def _hoist_invariant_rhs(lw, loop) -> None:
    """Before a `for` whose body has an f32 mmaf (of the register tiles) with a B defined before
    the loop: the working threads load their B columns (K x nr) into registers once, here, and
    the mmaf neither stages B nor reads it from shared memory in any iteration."""
    inside, ops = _loop_contents(loop)
    w = lw.w
    for op in ops:
        if LOWERINGS.get(op.name) is not lower_mmaf or op in lw.dead:
            continue
        lhs, rhs = op.operands["lhs"], op.operands["rhs"]
        if rhs in inside or lhs is rhs or lhs.type.element.name != "f32" or \
                rhs.type.element.name != "f32":
            continue
        if mma_layout(lw, op) is not None or tensor_core_kind(lw, op):
            continue
        k_dim = lhs.type.shape[-1]
        plan = _blocked_shape_plan(lw, op.results[0].type, k_dim)
        if plan is None or k_dim * plan[2] > _HOISTED_REGISTERS or k_dim > _UNROLLED_K:
            continue
        threads, _, nr, _, tn = plan
        n = op.results[0].type.shape[1]
        tile = lw.get(rhs)
        [offset] = lw.reserve_smem([lw.smem_size_of(tile.type)])
        lw.smem_write(tile, offset)
        lw.barrier()
        _, b_ptr, _ = _tile_pointers(lw, tn, nr, k_dim, n)
        skip = w.label("hoisted_b")
        if threads < lw.T:
            idle = w.reg("pred")
            w(f"setp.ge.u32 {idle}, {lw.tid()}, {threads}")
            w(f"@{idle} bra {skip}")
        rows = []
        for kk in range(k_dim):
            regs = [w.reg("f32") for _ in range(nr)]
            vector_access(w, "ld", ".shared", "f32", regs, f"{b_ptr}+{offset + kk * n * 4}")
            rows.append(regs)
        w.place(skip)
        lw.barrier()
        lw.scoped(("blocked rhs", op), lambda rows=rows: rows)


def _register_blocked(lw, op, lhs, rhs, acc) -> bool:
    """The f32 product by _blocked_plan's thread sub-tiles; False where it does not apply. Each
    result element still sums its products in K order from its accumulator (fma.rn.f32 chain),
    as the other paths and the interpreter do."""
    w = lw.w
    result_type = op.results[0].type
    if any(dtypes.reg_class(t.element) != "f32" or dtypes.byte_size(t.element) != 4
           for t in (lhs, rhs)):
        return False
    k_dim = lhs.type.shape[-1]
    plan = _blocked_shape_plan(lw, result_type, k_dim)
    if plan is None:
        return False
    m, n = result_type.shape
    threads, mr, nr, tm, tn = plan
    hoisted = lw.scoped_hit(("blocked rhs", op))  # B's columns already in registers
    uniform_acc = acc.count == 1 or acc.layout is UNIFORM
    staged = [lhs] + ([] if hoisted else [rhs]) + ([] if uniform_acc else [acc])
    # one copy of a tile that is several operands (x @ x, x @ w + x)
    copy_of = [next(j for j, other in enumerate(staged) if other.type == tile.type and
                    other.regs == tile.regs and other.layout == tile.layout)
               for tile in staged]
    distinct = sorted(set(copy_of))
    places = lw.reserve_smem([lw.smem_size_of(staged[j].type) for j in distinct] +
                             [lw.smem_size_of(result_type)])
    out_at = places.pop()
    for j, at in zip(distinct, places):
        lw.smem_write(staged[j], at)
    offsets = [places[distinct.index(j)] for j in copy_of]
    a_at = offsets[0]
    b_at = None if hoisted else offsets[1]
    acc_at = None if uniform_acc else offsets[-1]
    lw.barrier()
    skip = w.label("blocked_done")
    if threads < lw.T:  # the other threads wait for the result at the barrier
        idle = w.reg("pred")
        w(f"setp.ge.u32 {idle}, {lw.tid()}, {threads}")
        w(f"@{idle} bra {skip}")
    a_ptr, b_ptr, c_ptr = _tile_pointers(lw, tn, nr, k_dim, n)
    unrolled = k_dim <= _UNROLLED_K
    if not unrolled:  # pointers that advance: this mma's own copies
        a_ptr, b_ptr = _fresh(w, a_ptr), _fresh(w, b_ptr)
    totals = [[w.reg("f32") for _ in range(nr)] for _ in range(mr)]
    for i in range(mr):
        if uniform_acc:
            for j in range(nr):
                w(f"mov.f32 {totals[i][j]}, {acc.regs[0]}")
        else:
            vector_access(w, "ld", ".shared", "f32", totals[i],
                          f"{c_ptr}+{acc_at + i * tm * n * 4}")
    steps = k_dim // 4 if unrolled else 1
    if not unrolled:
        a_end = _u32(w, "add.u32", a_ptr, k_dim * 4)
        top = w.label("blocked_k")
        w.place(top)

    def load_step(step):
        a_rows = []
        for i in range(mr):
            regs = [w.reg("f32") for _ in range(4)]
            at = a_at + (i * tm * k_dim + step * 4) * 4
            vector_access(w, "ld", ".shared", "f32", regs, f"{a_ptr}+{at}")
            a_rows.append(regs)
        if hoisted is not None:
            return a_rows, hoisted[step * 4:step * 4 + 4]
        b_rows = []
        for kk in range(4):
            regs = [w.reg("f32") for _ in range(nr)]
            at = b_at + (step * 4 + kk) * n * 4
            vector_access(w, "ld", ".shared", "f32", regs, f"{b_ptr}+{at}")
            b_rows.append(regs)
        return a_rows, b_rows

    # the next step's operands are loaded before this step's FMAs (their latency overlaps)
    ahead = load_step(0)
    for step in range(steps):
        a_rows, b_rows = ahead
        if step + 1 < steps:
            ahead = load_step(step + 1)
        for kk in range(4):
            for i in range(mr):
                for j in range(nr):
                    t = totals[i][j]
                    w(f"fma.rn.f32 {t}, {a_rows[i][kk]}, {b_rows[kk][j]}, {t}")
    if not unrolled:
        w(f"add.u32 {a_ptr}, {a_ptr}, 16")
        w(f"add.u32 {b_ptr}, {b_ptr}, {4 * n * 4}")
        again = w.reg("pred")
        w(f"setp.lt.u32 {again}, {a_ptr}, {a_end}")
        w(f"@{again} bra.uni {top}")
    for i in range(mr):
        vector_access(w, "st", ".shared", "f32", totals[i], f"{c_ptr}+{out_at + i * tm * n * 4}")
    w.place(skip)
    lw.barrier()
    regs = [lw.smem_read_slot(out_at, m * n, k, result_type.element)
            for k in range(lw.slots(m * n))]
    lw.barrier()
    lw.set(op.results[0], Tile(result_type, regs))
    return True
