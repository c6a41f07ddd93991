"""Compile-time integer index tiles: iota, integer constants and the integer/shape ops on them.

cuTile builds gather/scatter indices as `iota` -> reshape -> arithmetic with constants -> broadcast.
Under the cyclic distribution a broadcast or permute moves elements between threads (shuffles or a
shared-memory round trip), although every thread could compute its own elements from its
multi-index. `constant_array` evaluates such a tile exactly with numpy; `fold_shape_op` then gives
a shape op whose result is one of them its registers without moving data: an affine result
(offset + sum coef_d * index_d, the usual case) from the cached per-thread multi-index, anything
else from a table in the constant bank. The registers are computed once, in the preamble.
"""
from __future__ import annotations


from ..lazy_numpy import np

from tilebc.ir.module import Op, Value
from tilebc.ir.types import TileType
from tilebc.ops.enums import Signedness
from tilebc.ops.table import by_mnemonic

from .common import Tile, element_bytes
from .layout import Cyclic

MAX_ELEMENTS = 1 << 14  # larger tiles are not worth evaluating at compile time
INT_BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}


def _bits(value: Value) -> int | None:
    if not isinstance(value.type, TileType):
        return None
    return INT_BITS.get(getattr(value.type.element, "name", None))


def _wrap(array: np.ndarray, bits: int) -> np.ndarray:
    """Two's-complement wrap of int64 values to `bits` (the signed value of the element)."""
    if bits == 64:
        return array.astype(np.int64)
    half = 1 << (bits - 1)
    return ((array.astype(np.int64) + half) & ((1 << bits) - 1)) - half


def constant_array(lw, value: Value) -> np.ndarray | None:
    """The element values (int64, shaped like the tile) of an integer tile known at compile time,
    or None. Memoised per lowering."""
    memo = lw._cache.setdefault(("folded",), {})
    if value not in memo:
        memo[value] = _evaluate(lw, value)
    return memo[value]


def uniform_int(lw, value: Value) -> int | None:
    """The one value of an integer tile whose every element is the same compile-time constant,
    or None."""
    array = constant_array(lw, value)
    if array is None or array.size == 0 or not (array == array.flat[0]).all():
        return None
    return int(array.flat[0])


def _evaluate(lw, value: Value) -> np.ndarray | None:
    bits = _bits(value)
    op = value.owner
    if bits is None or not isinstance(op, Op) or value.type.num_elements > MAX_ELEMENTS:
        return None
    shape = tuple(value.type.shape)
    leaf = _LEAVES.get(op.name)
    if leaf is not None:
        return leaf(op, value, shape, bits)
    sources = [constant_array(lw, v) for v in op.operand_values]
    if not sources or any(s is None for s in sources):
        return None
    fold = _FOLDS.get(op.name)
    return None if fold is None else fold(op, sources, shape, bits)


def _iota(op, value, shape, bits):
    return _wrap(np.arange(value.type.num_elements, dtype=np.int64), bits).reshape(shape)


def _constant(op, value, shape, bits):
    raw = np.frombuffer(element_bytes(op.attrs["value"]), dtype=f"<i{bits // 8}")
    return raw.astype(np.int64).reshape(shape)


def _reshape(op, sources, shape, bits):
    return sources[0].reshape(shape)


def _broadcast(op, sources, shape, bits):
    return np.broadcast_to(sources[0], shape).copy()


def _permute(op, sources, shape, bits):
    return np.transpose(sources[0], list(op.attrs["permutation"])).copy()


def _extend(op, sources, shape, bits):
    source_bits = _bits(op.operand_values[0])
    if op.attrs.get("signedness") is Signedness.UNSIGNED and source_bits < 64:
        return sources[0] & ((1 << source_bits) - 1)
    return sources[0].copy()


def _truncate(op, sources, shape, bits):
    return _wrap(sources[0], bits)


def _arithmetic(ufunc: str):  # numpy's name: np is imported at the first fold
    def fold(op, sources, shape, bits):
        lhs, rhs = np.broadcast_arrays(*sources)
        with np.errstate(over="ignore"):
            result = getattr(np, ufunc)(lhs, rhs)
        return _wrap(result, bits).reshape(shape)
    return fold


# Ops whose value needs no operand values, and ops folded from their operands' values.
_LEAVES = by_mnemonic({"iota": _iota, "constant": _constant}, "compile-time folding")
_FOLDS = by_mnemonic({"reshape": _reshape, "assume": _reshape, "broadcast": _broadcast,
                      "permute": _permute, "exti": _extend, "trunci": _truncate,
                      "addi": _arithmetic("add"), "subi": _arithmetic("subtract"),
                      "muli": _arithmetic("multiply")}, "compile-time folding")


# Ops that keep a splat a splat of the same value, and the op that makes one.
_SPLAT_KEEPING = by_mnemonic({"reshape": True, "assume": True, "broadcast": True},
                             "compile-time float splats")
_SPLAT_MAKING = by_mnemonic({"constant": True}, "compile-time float splats")
_FLOAT_STORAGE = {"f16": "<f2", "f32": "<f4", "f64": "<f8"}


def uniform_float(value: Value) -> float | None:
    """The one value of a float tile that is a splat constant at compile time (a `constant`,
    through reshapes, assumes and broadcasts; f16, bf16, f32 or f64), or None."""
    op = value.owner
    while isinstance(op, Op) and op.name in _SPLAT_KEEPING:
        value = op.operand_values[0]
        op = value.owner
    name = getattr(value.type.element, "name", None)
    storage = _FLOAT_STORAGE.get(name, "<u2" if name == "bf16" else None)
    if storage is None or not isinstance(op, Op) or op.name not in _SPLAT_MAKING:
        return None
    values = np.frombuffer(element_bytes(op.attrs["value"]), dtype=storage)
    bits = values.view(f"<u{values.itemsize}")
    if values.size == 0 or not (bits == bits[0]).all():
        return None
    if name == "bf16":  # the high half of an f32
        return float(np.array([int(bits[0]) << 16], np.uint32).view(np.float32)[0])
    return float(values[0])


def affine_form(array: np.ndarray):
    """(offset, coefs) with array[i] == offset + sum(coefs[d] * i[d]) for every multi-index i,
    or None when the values are not affine in the multi-index."""
    offset = int(array.flat[0])
    coefs = []
    for d, size in enumerate(array.shape):
        if size == 1:
            coefs.append(0)
            continue
        step = [0] * array.ndim
        step[d] = 1
        coefs.append(int(array[tuple(step)]) - offset)
    grid = np.indices(array.shape, dtype=np.int64)
    expected = offset + sum(c * g for c, g in zip(coefs, grid)) if coefs else np.int64(offset)
    if not np.array_equal(expected, array):
        return None
    return offset, coefs


def fold_shape_op(lw, op) -> bool:
    """Lower `op` (a shape op) by computing its compile-time-known integer result per thread;
    False when the result is not known at compile time or not affine (the caller moves data)."""
    result = op.results[0]
    array = constant_array(lw, result)
    if array is None or result.type.num_elements == 1:
        return False
    form = affine_form(array)
    if form is None:
        return False
    offset, coefs = form
    wide = result.type.element.name == "i64"
    layout = lw.wanted.get(result)  # computed straight in a load's layout that reads it
    slots = layout.slots if layout is not None else lw.slots(result.type.num_elements)
    regs = []
    with lw.preamble():
        for k in range(slots):
            regs.append(_affine_slot(lw, result.type.shape, k, offset, coefs, wide, layout))
    lw.set(result, Tile(result.type, regs, layout))
    return True


def _affine_slot(lw, shape, k: int, offset: int, coefs, wide: bool, layout=None) -> str:
    """Register with offset + sum coef_d * mi_d for slot k (of `layout`, default Cyclic). 32-bit
    arithmetic wraps like the element (i8/i16 results fit, so their sign-extended form comes out
    exact)."""
    # an i64 tile whose every value fits in s32 is computed in 32 bits and sign-extended once,
    # recorded as widened so i64 compares and multiplies of it can stay narrow
    span = [c * (d - 1) for c, d in zip(coefs, shape)]
    narrow = wide and -2**31 <= offset + sum(min(0, v) for v in span) \
        and offset + sum(max(0, v) for v in span) < 2**31

    def compute():
        w = lw.w
        if narrow:
            acc = _affine_compute(lw, shape, k, offset, coefs, False, layout)
            out = w.reg("b64")
            w(f"cvt.s64.s32 {out}, {acc}")
            lw.widened[out] = ("s", acc)
            return out
        return _affine_compute(lw, shape, k, offset, coefs, wide, layout)

    def make():
        # the values slot k holds in each thread, known now: equal rows share one register
        count = int(np.prod(shape, dtype=np.int64))
        linear = (layout or Cyclic(count, lw.T)).table(lw.T)[k]
        index = np.unravel_index(linear, tuple(shape))
        values = offset + sum(c * i for c, i in zip(coefs, index)) if coefs else \
            np.full(linear.shape, offset, np.int64)
        return lw.per_thread(np.asarray(values, np.int64), compute, wide)
    key = None if layout is None else layout.key()
    return lw._cached(("affine", tuple(shape), k, offset, tuple(coefs), wide, key), make)


def _affine_compute(lw, shape, k, offset, coefs, wide, layout):
    w = lw.w
    mi = lw.multi_index(shape, k, layout)
    cls, kind = ("b64", "s64") if wide else ("b32", "s32")
    acc = w.reg(cls)
    w(f"mov.b{64 if wide else 32} {acc}, {offset}")
    for index, coef in zip(mi, coefs):
        if not coef:
            continue
        if wide:
            index64 = w.reg("b64")
            w(f"cvt.u64.u32 {index64}, {index}")
            index = index64
        nxt = w.reg(cls)
        if coef == 1:
            w(f"add.{kind} {nxt}, {acc}, {index}")
        else:
            w(f"mad.lo.{kind} {nxt}, {index}, {coef}, {acc}")
        acc = nxt
    return acc


def trip_count(lw, op):
    """(first, step, trips) of a `for` whose bounds are compile-time constants, else None."""
    bounds = [constant_array(lw, op.operands[name])
              for name in ("lowerBound", "upperBound", "step")]
    if any(b is None or b.size != 1 for b in bounds):
        return None
    lower, upper, step = (int(b.flat[0]) for b in bounds)
    if op.attrs.get("unsignedCmp"):
        bits = 64 if op.operands["lowerBound"].type.element.name == "i64" else 32
        lower, upper = lower % 2**bits, upper % 2**bits
    if step <= 0:
        return None
    return lower, step, max(0, -(-(upper - lower) // step))
