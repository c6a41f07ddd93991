"""Instruction semantics, part 4: warp-level matrix multiply-accumulate (mma.sync).

Every warp that executes mma.sync computes D = A (MxK) * B (KxN) + C (MxN) from fragments spread
over its 32 lanes. The forms emulated (all .row.col) are those of the PTX ISA sections "Matrix
Fragments for mma.m16n8kK" and "mma.m8n8k4 with .f64":

  m16n8k8  .f16/.bf16 (f32 or f16 accumulators), .tf32 (f32)
  m16n8k16 .f16/.bf16 (f32 or f16 accumulators), .s8/.u8 (s32)
  m16n8k4  .tf32 (f32)
  m16n8k32 .s8/.u8 (s32), .e4m3/.e5m2 (f32 or f16 accumulators; sm_89+)
  m8n8k4   .f64 (f64)

With groupID g = laneid >> 2, threadID_in_group t = laneid % 4 and `pack` elements per A/B
register (2 for 16-bit types, 4 for 8-bit types, 1 for .tf32 and .f64), element j of a lane's
register r sits at

  A: row g + 8 * (r & 1) (M = 16; row g for M = 8),  col pack * t + j + 4 * pack * (r >> 1)
  B: row pack * t + j + 4 * pack * r,                  col g
  C, D element i (counting f16x2 halves low first): row g + 8 * (i >> 1), col 2t + (i & 1)

(the ISA's tables for each shape, written as one rule; the unit tests spell out each table).

Numerics: float products of f16/bf16/tf32/fp8 values are exact in f64; their sum plus C is formed
in f64 and rounded once to the accumulator type. The device sums in an unspecified order with
unspecified intermediate rounding, so results agree with it to about K ulps, not bit for bit.
A .tf32 operand register holding an f32 pattern that is not a tf32 value is read with its low 13
bits dropped: the ISA leaves this open; an H200 gave the truncated operands' product for
tileiras's code, which feeds words loaded from tf32 arrays to mma unconverted (2026-11-28,
benchmarks/results/gpu.md). f64 mma is
computed exactly (products split with Dekker's method, then math.fsum) and rounded once. Integer
mma is exact in int64; .satfinite clamps to the s32 range, without it the sum wraps. A warp only
partly executing the instruction is undefined behaviour (.aligned) and reported.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from .registry import Mods, implements, operands, per_thread
from .syntax import Vec

# element type -> (bits, numpy storage view or None for integers/tf32/f64 handled apart)
_FLOAT16 = {"f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16)}
_FP8 = {"e4m3": np.dtype(ml_dtypes.float8_e4m3fn), "e5m2": np.dtype(ml_dtypes.float8_e5m2)}
_INT8 = {"s8": np.dtype(np.int8), "u8": np.dtype(np.uint8)}

# (shape, input kind) -> allowed accumulator types; input kinds: half, tf32, int8, fp8, f64
_FORMS = {
    ("m16n8k8", "half"): ("f32", "f16"), ("m16n8k8", "tf32"): ("f32",),
    ("m16n8k16", "half"): ("f32", "f16"), ("m16n8k16", "int8"): ("s32",),
    ("m16n8k4", "tf32"): ("f32",),
    ("m16n8k32", "int8"): ("s32",), ("m16n8k32", "fp8"): ("f32", "f16"),
    ("m8n8k4", "f64"): ("f64",),
}
_SHAPE_FLAGS = tuple(dict.fromkeys(shape for shape, _ in _FORMS))

_LANE = np.arange(32)
_G, _T = _LANE >> 2, _LANE & 3


def _kind(ptype: str) -> str:
    if ptype in _FLOAT16:
        return "half"
    if ptype in _FP8:
        return "fp8"
    if ptype in _INT8:
        return "int8"
    return ptype  # tf32, f64 (anything else is refused by the _FORMS lookup)


def _pack(ptype: str) -> int:
    return {"half": 2, "fp8": 4, "int8": 4}.get(_kind(ptype), 1)


def a_coords(m: int, k: int, pack: int):
    """[(rows, cols) per lane] of the A fragment's elements, register by register, low first."""
    out = []
    for r in range(m * k // 32 // pack):
        for j in range(pack):
            row = _G + (8 * (r & 1) if m == 16 else 0)
            col = pack * _T + j + 4 * pack * (r >> 1 if m == 16 else r)
            out.append((row, col))
    return out


def b_coords(k: int, pack: int):
    return [(pack * _T + j + 4 * pack * r, _G) for r in range(k // 4 // pack) for j in range(pack)]


def c_coords(m: int):
    return [(_G + 8 * (i >> 1), 2 * _T + (i & 1)) for i in range(m * 8 // 32)]


def _elements(words: np.ndarray, ptype: str) -> list:
    """The elements packed in .b32 registers (low first) as float64 / int64 arrays, or the
    registers themselves for .f64 and .tf32 (top 19 bits of the f32 pattern)."""
    if ptype == "f64":
        return [np.asarray(words, np.float64)]
    words = np.asarray(words).astype(np.uint32)
    if ptype == "tf32":
        return [_tf32_top_bits(words)]
    bits = 32 // _pack(ptype)
    field = np.uint32((1 << bits) - 1)
    out = []
    for j in range(_pack(ptype)):
        raw = (words >> np.uint32(bits * j)) & field
        if ptype in _FLOAT16:
            out.append(raw.astype(np.uint16).view(_FLOAT16[ptype]).astype(np.float64))
        elif ptype in _FP8:
            out.append(raw.astype(np.uint8).view(_FP8[ptype]).astype(np.float64))
        else:
            out.append(raw.astype(np.uint8).view(_INT8[ptype]).astype(np.int64))
    return out


def _tf32_top_bits(words: np.ndarray) -> np.ndarray:
    """f32 bit patterns read as .tf32: the low 13 bits dropped (see above)."""
    with np.errstate(invalid="ignore"):  # a signalling NaN's widening is quiet here
        return (words & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)


def _split(x: np.ndarray):
    """Dekker's split: x = hi + lo with each half of 26 significant bits (products then exact)."""
    factor = 134217729.0  # 2**27 + 1
    c = factor * x
    hi = c - (c - x)
    return hi, x - hi


def _exact_f64_matmul(A: np.ndarray, B: np.ndarray, C: np.ndarray) -> np.ndarray:
    """A @ B + C for float64 (warps, m, k) x (warps, k, n), each result rounded once: every
    product is split into two doubles exactly (TwoProduct), then math.fsum sums them."""
    p = A[:, :, :, None] * B[:, None, :, :]               # (w, m, k, n)
    ah, al = _split(A[:, :, :, None])
    bh, bl = _split(B[:, None, :, :])
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl      # the rounding error of each product
    terms = np.concatenate([p, e, C[:, :, None, :]], axis=2)  # (w, m, 2k+1, n)
    flat = terms.transpose(0, 1, 3, 2).reshape(-1, terms.shape[2])
    finite = np.isfinite(flat).all(axis=1)
    sums = np.where(finite, 0.0, flat.sum(axis=1))        # inf/nan: IEEE propagation
    for index in np.flatnonzero(finite):
        sums[index] = math.fsum(flat[index])
    return sums.reshape(C.shape[0], C.shape[1], C.shape[2])


def _flat_coords(coords, count: int):
    """Every lane's (row, col) of the first `count` elements as two flat index arrays (element
    by element, lanes in order), or None if two of them name one cell (then the elements are
    placed one by one, the later winning)."""
    rows = np.concatenate([np.broadcast_to(coords[i][0], (32,)) for i in range(count)])
    cols = np.concatenate([np.broadcast_to(coords[i][1], (32,)) for i in range(count)])
    if len(set(zip(rows.tolist(), cols.tolist()))) != len(rows):
        return None
    return rows, cols


def _place(target, values: np.ndarray, cells) -> None:
    """target[w, row, col] = values[element, 32 * w + lane] for every element at once."""
    count, T = values.shape
    warps = T // 32
    rows, cols = cells
    target[:, rows, cols] = values.reshape(count, warps, 32).transpose(1, 0, 2).reshape(
        warps, count * 32)


def _vector(ins, k, operand, count: int, what: str):
    if not isinstance(operand, Vec) or len(operand.items) != count:
        raise k.unsupported(ins, f"mma needs {count} registers for {what}")
    return operand.items


@implements("mma", forms="mma.sync.aligned.row.col: m16n8k8 f16/bf16/tf32, m16n8k16 f16/bf16/"
                         "s8/u8, m16n8k4 tf32, m16n8k32 s8/u8/e4m3/e5m2, m8n8k4 f64; f32/f16/s32/"
                         "f64 accumulators as the ISA allows, .satfinite for integers "
                         "(fragments per the PTX ISA; exact sum rounded once)")
def build_mma(ins, k):
    type_set = {"f16", "bf16", "tf32", "f32", "f64", "s32", *(_FP8), *(_INT8)}
    mods = Mods(ins, k, ("sync", "aligned", "row", "col", "satfinite") + _SHAPE_FLAGS,
                types=(4,), type_set=type_set)
    dtype, atype, btype, ctype = mods.types
    shapes = [s for s in _SHAPE_FLAGS if mods.has(s)]
    if not all(mods.has(f) for f in ("sync", "aligned", "row", "col")) or len(shapes) != 1:
        raise k.unsupported(ins, "mma needs .sync.aligned, one shape and .row.col")
    shape = shapes[0]
    kind = _kind(atype)
    allowed = _FORMS.get((shape, kind))
    same_inputs = atype == btype or (kind in ("int8", "fp8") and _kind(btype) == kind)
    if allowed is None or not same_inputs or dtype not in allowed or ctype not in allowed:
        raise k.unsupported(ins, f"mma.{shape}.{dtype}.{atype}.{btype}.{ctype} is not one of "
                                 "the emulated forms (" + IMPLEMENTED_FORMS + ")")
    if kind == "half" and "f16" in (dtype, ctype) and atype != "f16":
        raise k.unsupported(ins, "an .f16 accumulator needs .f16 operands")
    if mods.has("satfinite") and kind != "int8":
        raise k.unsupported(ins, ".satfinite is emulated for integer mma only")
    m, n, kk = (int(x) for x in shape[1:].replace("n", " ").replace("k", " ").split())
    integer = kind == "int8"
    d, a, b, c = operands(ins, k, 4)
    acc_width = {"f32": 1, "s32": 1, "f64": 1, "f16": 2}
    a_regs = _vector(ins, k, a, m * kk // 32 // _pack(atype), "A")
    b_regs = _vector(ins, k, b, kk * n // 32 // _pack(btype), "B")
    c_regs = _vector(ins, k, c, m * n // 32 // acc_width[ctype], "C")
    d_regs = _vector(ins, k, d, m * n // 32 // acc_width[dtype], "D")
    register_type = {"f64": "f64"}
    read_a = [k.reader(ins, r, register_type.get(atype, "b32")) for r in a_regs]
    read_b = [k.reader(ins, r, register_type.get(btype, "b32")) for r in b_regs]
    read_c = [k.reader(ins, r, "b32" if ctype == "f16" else ctype) for r in c_regs]
    writes = [k.writer(ins, r, "b32" if dtype == "f16" else dtype) for r in d_regs]
    A_at, B_at, C_at = a_coords(m, kk, _pack(atype)), b_coords(kk, _pack(btype)), c_coords(m)
    work = np.int64 if integer else np.float64
    a_cells = _flat_coords(A_at, len(read_a) * _pack(atype))
    b_cells = _flat_coords(B_at, len(read_b) * _pack(btype))
    c_cells = _flat_coords(C_at, len(read_c) * (2 if ctype == "f16" else 1))

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
        A = np.zeros((warps, m, kk), work)
        B = np.zeros((warps, kk, n), work)
        C = np.zeros((warps, m, n), work)

        def scatter(target, readers, ptype, coords, cells):
            if cells is not None:  # every register's elements placed in one assignment
                words = np.stack([per_thread(np.asarray(read(cta)), T)
                                  for read in readers])
                parts = _elements(words, ptype)
                _place(target, np.stack(parts, axis=1).reshape(-1, T), cells)
                return
            index = 0
            for read in readers:
                for values in _elements(per_thread(np.asarray(read(cta)), T), ptype):
                    row, col = coords[index]
                    target[:, row, col] = values.reshape(warps, 32)
                    index += 1
        scatter(A, read_a, atype, A_at, a_cells)
        scatter(B, read_b, btype, B_at, b_cells)
        if ctype == "f16":
            scatter(C, read_c, "f16", C_at, c_cells)
        elif c_cells is not None:
            _place(C, np.stack([per_thread(np.asarray(read(cta)), T).astype(work)
                                for read in read_c]), c_cells)
        else:
            for index, read in enumerate(read_c):
                row, col = C_at[index]
                values = per_thread(np.asarray(read(cta)), T)
                C[:, row, col] = values.astype(work).reshape(warps, 32)
        if integer:
            D = np.matmul(A, B) + C
            D = np.clip(D, -2**31, 2**31 - 1) if mods.has("satfinite") else D
            D = D.astype(np.int64).astype(np.uint64).astype(np.uint32).view(np.int32)
        elif kind == "f64":
            D = _exact_f64_matmul(A, B, C)
        else:
            D = np.matmul(A, B) + C
        if dtype == "f16":
            halves = D.astype(np.float16).view(np.uint16).astype(np.uint32)
            for index, write in enumerate(writes):
                (r0, c0), (r1, c1) = C_at[2 * index], C_at[2 * index + 1]
                word = halves[:, r0, c0] | (halves[:, r1, c1] << np.uint32(16))
                write(cta, word.reshape(T), mask)
            return
        out = D.astype({"f32": np.float32, "f64": np.float64, "s32": np.int32}[dtype])
        for index, write in enumerate(writes):
            row, col = C_at[index]
            write(cta, out[:, row, col].reshape(T), mask)
    return fn


IMPLEMENTED_FORMS = ", ".join(f"{shape} {kind}->{'/'.join(acc)}"
                              for (shape, kind), acc in _FORMS.items())
