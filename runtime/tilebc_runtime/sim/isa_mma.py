"""Instruction semantics, part 4: warp-level matrix multiply-accumulate (mma.sync).

Implemented: mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32, the only form the
lowering emits: for mmaf with f16/bf16 operands, and with fp8 (e4m3/e5m2) operands widened exactly to
f16 on their way to shared memory; the accumulator is always f32 here, and an f16/bf16 mmaf
accumulator is widened before and rounded once after the K loop by the lowering (matmul.py). Every warp that executes it computes
D = A (16x16) * B (16x8) + C (16x8) from fragments spread over its 32 lanes, laid out as in the PTX
ISA ("Matrix Fragments for mma.m16n8k16 with floating point type"), with
groupID g = laneid >> 2 and threadID_in_group t = laneid % 4:

  A: four .b32 registers of two elements each (low half first): {A[g][2t..2t+1]},
     {A[g+8][2t..2t+1]}, {A[g][2t+8..2t+9]}, {A[g+8][2t+8..2t+9]}
  B: two .b32 registers: {B[2t][g], B[2t+1][g]}, {B[2t+8][g], B[2t+9][g]}
  C, D: four .f32 registers: C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1]

Numerics: products of f16/bf16 values are exact in f64 and the sum of 16 of them plus C is formed
in f64 and rounded once to f32. The device's tensor cores sum in an unspecified order with
unspecified intermediate rounding, so results agree with the device to about K ulps of f32, not
bit for bit. A warp only partly executing the instruction is undefined behaviour (.aligned) and
reported.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from .isa import Mods, implements, operands
from .parser import Vec

_INPUTS = {"f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16)}

# Fragment coordinates per lane (32 lanes): (row, col) of each element, low to high.
_LANE = np.arange(32)
_G, _T = _LANE >> 2, _LANE & 3
A_COORDS = [(_G, 2 * _T), (_G, 2 * _T + 1), (_G + 8, 2 * _T), (_G + 8, 2 * _T + 1),
            (_G, 2 * _T + 8), (_G, 2 * _T + 9), (_G + 8, 2 * _T + 8), (_G + 8, 2 * _T + 9)]
B_COORDS = [(2 * _T, _G), (2 * _T + 1, _G), (2 * _T + 8, _G), (2 * _T + 9, _G)]
C_COORDS = [(_G, 2 * _T), (_G, 2 * _T + 1), (_G + 8, 2 * _T), (_G + 8, 2 * _T + 1)]


def _halves(words: np.ndarray, dtype: np.dtype):
    """The low and high 16-bit elements of .b32 registers, as float64."""
    words = words.astype(np.uint32)
    low = (words & np.uint32(0xFFFF)).astype(np.uint16).view(dtype).astype(np.float64)
    high = (words >> np.uint32(16)).astype(np.uint16).view(dtype).astype(np.float64)
    return low, high


def _vector(ins, k, operand, count: int, what: str):
    if not isinstance(operand, Vec) or len(operand.items) != count:
        raise k.unsupported(ins, f"mma.m16n8k16 needs {count} registers for {what}")
    return operand.items


@implements("mma", forms="mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 "
                         "(fragments per the PTX ISA; f64 sum rounded once to f32)")
def build_mma(ins, k):
    mods = Mods(ins, k, ("sync", "aligned", "m16n8k16", "row", "col"), types=(4,))
    dtype, atype, btype, ctype = mods.types
    if not all(mods.has(f) for f in ("sync", "aligned", "m16n8k16", "row", "col")):
        raise k.unsupported(ins, "only mma.sync.aligned.m16n8k16.row.col is emulated")
    if dtype != "f32" or ctype != "f32" or atype not in _INPUTS or btype != atype:
        raise k.unsupported(ins, "mma.m16n8k16 is emulated for .f32 accumulators with .f16 or "
                                 ".bf16 operands (the same for A and B)")
    d, a, b, c = operands(ins, k, 4)
    d_regs = _vector(ins, k, d, 4, "D")
    read_a = [k.reader(ins, r, "b32") for r in _vector(ins, k, a, 4, "A")]
    read_b = [k.reader(ins, r, "b32") for r in _vector(ins, k, b, 2, "B")]
    read_c = [k.reader(ins, r, "f32") for r in _vector(ins, k, c, 4, "C")]
    writes = [k.writer(ins, r, "f32") for r in d_regs]
    element = _INPUTS[atype]

    def fn(cta, mask):
        T = cta.T
        if T % 32:
            raise cta.launch.error(cta, ins, f"mma.sync needs whole warps; the CTA has {T} "
                                   f"threads")
        warps = T // 32
        active = np.ones(T, np.bool_) if mask is None else mask
        per_warp = active.reshape(warps, 32)
        partial = per_warp.any(axis=1) & ~per_warp.all(axis=1)
        if np.any(partial):
            w = int(np.argmax(partial))
            lane = int(np.argmin(per_warp[w]))
            raise cta.launch.error(cta, ins, f"mma.sync.aligned executed by part of warp {w} "
                                   f"(lane {lane} is not executing it): undefined",
                                   thread=32 * w + lane)
        A = np.zeros((warps, 16, 16))
        B = np.zeros((warps, 16, 8))
        C = np.zeros((warps, 16, 8))
        for index, read in enumerate(read_a):
            low, high = _halves(np.broadcast_to(np.asarray(read(cta)), (T,)), element)
            for part, values in ((0, low), (1, high)):
                row, col = A_COORDS[2 * index + part]
                A[:, row, col] = values.reshape(warps, 32)
        for index, read in enumerate(read_b):
            low, high = _halves(np.broadcast_to(np.asarray(read(cta)), (T,)), element)
            for part, values in ((0, low), (1, high)):
                row, col = B_COORDS[2 * index + part]
                B[:, row, col] = values.reshape(warps, 32)
        for index, read in enumerate(read_c):
            row, col = C_COORDS[index]
            values = np.broadcast_to(np.asarray(read(cta), np.float32), (T,))
            C[:, row, col] = values.astype(np.float64).reshape(warps, 32)
        D = (np.matmul(A, B) + C).astype(np.float32)
        for index, write in enumerate(writes):
            row, col = C_COORDS[index]
            write(cta, D[:, row, col].reshape(T), mask)
    return fn
