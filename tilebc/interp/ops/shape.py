"""Data movement between tiles (constant, iota, broadcast, reshape, permute, cat, extract, insert),
reductions and scans with their combiner regions, and matrix multiply-accumulate.

reduce / scan run the combiner region on whole slices of the tile at once (the region's ops are
element-wise, so our numpy implementations broadcast over the extra leading axis): reduce combines
neighbours pairwise in a balanced tree, scan is a Hillis-Steele inclusive scan. Both keep operand
order (the left argument always holds the earlier elements), so any associative combiner gives the
sequential result; float sums may differ from a left-to-right loop by rounding (the spec leaves
the association order unspecified).

mma: products and sums are formed in the accumulator's type, at least f32: f16 / bf16 / tf32 / f8
inputs are widened to f32 (tf32 read as the tensor cores read it: the low 13 bits of its f32 pattern
dropped), f64 stays f64, and the result is rounded
once to the accumulator type. The device's tensor cores sum in an unspecified order, so f32 results
agree to a relative error of about K * 2^-24 (stated tolerance for low-precision mma tests).
Integer mma sums exactly and wraps to i32.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ...ops.enums import Signedness
from ...ops.spec import Exit
from .. import numeric_ops as num
from ..registry import Signal, implements
from ._common import element_of, result_dtype, result_shape, tile


@implements("constant")
def _constant(tb, op):
    cache = tb.machine.__dict__.setdefault("_constants", {})
    value = cache.get(id(op))
    if value is None:
        value = num.dense_to_array(op.attrs["value"], element_of(op.results[0].type))
        value.flags.writeable = False
        cache[id(op)] = value
    return [value]


@implements("iota")
def _iota(tb, op):
    shape = result_shape(op)
    return [num.as_signed(np.arange(shape[0], dtype=np.int64), result_dtype(op))]


@implements("broadcast")
def _broadcast(tb, op, source):
    return [np.broadcast_to(source, result_shape(op))]


@implements("reshape")
def _reshape(tb, op, source):
    return [np.reshape(source, result_shape(op))]


@implements("permute")
def _permute(tb, op, source):
    """Result dimension i is source dimension permutation[i]."""
    return [np.transpose(source, tuple(op.attrs["permutation"]))]


@implements("cat")
def _cat(tb, op, lhs, rhs):
    return [np.concatenate([lhs, rhs], axis=int(op.attrs["dim"]))]


def _window(indices, shape):
    return tuple(slice(int(i) * size, (int(i) + 1) * size) for i, size in zip(indices, shape))


@implements("extract")
def _extract(tb, op, source, indices):
    """The result-shaped sub-tile at `indices` (counted in result-tile units)."""
    shape = result_shape(op)
    window = _window(indices, shape)
    for part, size in zip(window, np.shape(source)):
        if part.start < 0 or part.stop > size:
            tb.fail(f"extract index out of range: window {part.start}:{part.stop} of {size}")
    return [np.asarray(source)[window]]


@implements("insert")
def _insert(tb, op, source, destination, indices):
    window = _window(indices, np.shape(source))
    for part, size in zip(window, np.shape(destination)):
        if part.start < 0 or part.stop > size:
            tb.fail(f"insert index out of range: window {part.start}:{part.stop} of {size}")
    result = np.array(destination, copy=True)
    result[window] = source
    return [result]


# ----------------------------------------------------------------------------- reduce / scan


def _combine(tb, op, lefts, rights, varying=None):
    arguments = []
    for left, right in zip(lefts, rights):
        arguments += [left, right]
    if varying is None:
        signal = tb.run_region(op.regions[0], arguments)
    else:  # batched run: every argument carries the tile-block axis
        signal = tb.run_region(op.regions[0], arguments, [varying] * len(arguments))
    if signal is None or signal.exit is not Exit.VALUES:
        tb.fail(f"{op.name} combiner must end with yield", op=op)
    tb.current_op = op
    return [np.asarray(v) for v in signal.values]


@implements("reduce")
def _reduce(tb, op, operands, lead: int = 0):
    """`lead` leading axes (a batched run's tile-block axis) are carried through untouched.

    The combiner pairs elements 2i and 2i+1 of the reduced dimension, level by level (a balanced
    tree; an odd last element passes to the next level). The dimension stays where it is, so for
    the common last-axis reduction numpy's inner loops run over nearby elements."""
    dim = int(op.attrs["dim"]) + lead
    varying = True if lead else None
    arrays = [np.asarray(x) for x in operands]
    before = (slice(None),) * dim

    def part(array, start, stop, step=None):
        return array[before + (slice(start, stop, step),)]
    while arrays[0].shape[dim] > 1:
        count = arrays[0].shape[dim]
        pairs = count // 2 * 2
        lefts = [part(a, 0, pairs, 2) for a in arrays]
        combined = _combine(tb, op, lefts, [part(a, 1, pairs, 2) for a in arrays], varying)
        combined = [_lanes(c, left.shape, lead) for c, left in zip(combined, lefts)]
        if count % 2:
            combined = [np.concatenate([c, part(a, count - 1, count)], axis=dim)
                        for c, a in zip(combined, arrays)]
        arrays = combined
    return [tile(a[before + (0,)], result_dtype(op, i)) for i, a in enumerate(arrays)]


def _lanes(value, shape, lead: int, axis: Optional[int] = None):
    """A combiner result as one value per lane. A value the body takes from outside the region is
    one per tile block in a batched run (shape (blocks,)): it spreads over the block's lanes.
    `axis` is where the scanned dimension was moved to the front (scan), else None."""
    value = np.asarray(value)
    if lead and value.ndim == lead and len(shape) > lead:
        if axis is None:
            value = value.reshape(value.shape + (1,) * (len(shape) - lead))
        else:  # scan arrays are (scanned, blocks, ...): the block axis is 1
            value = value.reshape((1,) + value.shape + (1,) * (len(shape) - lead - 1))
    return np.broadcast_to(value, shape)


@implements("scan")
def _scan(tb, op, operands, lead: int = 0):
    dim = int(op.attrs["dim"]) + lead
    varying = True if lead else None
    reverse = bool(op.attrs.get("reverse"))
    arrays = [np.moveaxis(np.asarray(x), dim, 0) for x in operands]
    if reverse:
        arrays = [a[::-1] for a in arrays]
    length = arrays[0].shape[0]
    step = 1
    while step < length:
        combined = _combine(tb, op, [a[:-step] for a in arrays], [a[step:] for a in arrays],
                            varying)
        arrays = [np.concatenate([a[:step], _lanes(c, a[step:].shape, lead, axis=dim)])
                  for a, c in zip(arrays, combined)]
        step *= 2
    if reverse:
        arrays = [a[::-1] for a in arrays]
    return [tile(np.moveaxis(a, 0, dim), result_dtype(op, i)) for i, a in enumerate(arrays)]


_ = Signal

# -------------------------------------------------------------------------------------- mma


_F16_TO_F32 = None  # every f16 bit pattern's f32 value, as numpy converts it


def _f16_to_f32(values: np.ndarray, out=None) -> np.ndarray:
    """numpy's f16 -> f32 conversion, bit for bit, by table lookup: ~2x faster than astype."""
    global _F16_TO_F32
    if _F16_TO_F32 is None:
        _F16_TO_F32 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16) \
            .astype(np.float32)
    return np.take(_F16_TO_F32, values.view(np.uint16), out=out)


def _widen(values, element) -> np.ndarray:
    if element.name == "f64":
        return np.asarray(values, dtype=np.float64)
    if element.name == "tf32":
        return num.tf32_operand(values)
    values = np.asarray(values)
    if values.dtype == np.float16 and values.size >= 4096:
        return _f16_to_f32(values)
    return np.asarray(values, dtype=np.float32)


def _exact_sum(terms, work) -> np.ndarray:
    """The sum of float64 arrays, carried as a float64 pair and rounded once to `work`."""
    high = terms[0]
    low = np.zeros(np.shape(high), np.float64)
    for term in terms[1:]:
        high, error = num.two_sum(high, term)
        low += error
    total, error = num.two_sum(high, low)
    plain = np.where(np.isfinite(high), total, high)  # inf/nan: the plain float64 sum
    if np.dtype(work) == np.float64:
        return plain
    return np.where(np.isfinite(total), num.round_to_odd(total, error), plain).astype(work)


_NO_GRID = 1 << 20  # the grid exponent of zero: no constraint


def _grid_exponent(values, axis=None) -> np.ndarray:
    """log2 of the largest power of two that every value divides (f32-representable values; along
    `axis`, or per element), from the bits: the exponent of the lowest set significand bit."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    exponent = ((bits >> np.uint32(23)) & np.uint32(0xFF)).astype(np.int32)
    significand = (bits & np.uint32(0x7FFFFF)) | np.where(exponent > 0, np.uint32(1 << 23),
                                                           np.uint32(0))
    lowest = significand & (~significand + np.uint32(1))
    trailing = (lowest.astype(np.float32).view(np.uint32) >> np.uint32(23)).astype(np.int32) - 127
    grid = np.where(significand != 0, np.maximum(exponent, 1) - 150 + trailing, _NO_GRID)
    return grid if axis is None else np.min(grid, axis=axis)


def _dot_by_steps(lhs, rhs, acc, work) -> np.ndarray:
    """exact_dot one K step at a time: each product exact (f32 operands in float64, f64 operands
    split by Dekker's method), the terms summed as a float64 pair."""
    terms = [acc]
    for index in range(lhs.shape[-1]):
        a, b = lhs[..., index], rhs[..., index]
        if np.dtype(work) != np.float64:
            terms.append(a * b)
        else:
            terms += list(num.two_product(a, b))
    return _exact_sum(terms, work)


def exact_dot(lhs, rhs, acc, work) -> np.ndarray:
    """acc + lhs @ rhs, the exact value rounded once to `work` (float32 or float64). Independent
    of order, batching, numpy and BLAS. Leading (batch) axes broadcast.

    f32 work: products of f32 values are exact in float64. numpy's float64 matmul is then exact
    whatever its order where every term is a multiple of a power of two g and |acc| + |lhs| @ |rhs|
    stays below 2^52 g (typical of f16, bf16 and fp8 operands), and elsewhere within
    (K + 1) 2^-53 (|acc| + |lhs| @ |rhs|) of the exact value: where both ends of that interval
    round to the same f32 value, so does the exact value. The few results left (near a rounding
    boundary) and f64 work go one K step at a time, exactly. Exact barring
    overflow, f64 products below 2^-960, and terms more than about 2^100 apart."""
    lhs = np.asarray(lhs, dtype=np.float64)
    rhs = np.asarray(rhs, dtype=np.float64)
    shape = np.broadcast_shapes(lhs.shape[:-2], rhs.shape[:-2], np.shape(acc)[:-2]) + \
        (lhs.shape[-2], rhs.shape[-1])
    acc = np.broadcast_to(np.asarray(acc, dtype=np.float64), shape)
    k = lhs.shape[-1]
    with np.errstate(all="ignore"):
        if np.dtype(work) == np.float64:
            rows = np.broadcast_to(lhs[..., :, None, :], shape + (k,))
            columns = np.broadcast_to(np.swapaxes(rhs, -1, -2)[..., None, :, :], shape + (k,))
            return _dot_by_steps(rows, columns, acc, work)
        estimate = np.matmul(lhs, rhs) + acc
        magnitude = np.matmul(np.abs(lhs), np.abs(rhs)) + np.abs(acc)
        # Exact whatever the order: every term a multiple of 2^g, every partial sum below 2^(53+g).
        grid = _grid_exponent(lhs, -1)[..., :, None] + _grid_exponent(rhs, -2)[..., None, :]
        if np.any(acc):
            grid = np.minimum(grid, _grid_exponent(acc))
        top = ((magnitude.view(np.uint64) >> np.uint64(52)).astype(np.int32) - 1022)  # m < 2^top
        exact = top < 53 + grid  # one binade of margin for the rounding of `magnitude` itself
        if exact.all():
            return estimate.astype(work)
        bound = np.where(exact, 0.0, magnitude * ((k + 2) * 2.0 ** -52))
        low = (estimate - bound).astype(work)
        result = (estimate + bound).astype(work)
        unsure = np.nonzero((low != result) | ~np.isfinite(bound))
        if len(unsure[0]):
            lhs_full = np.broadcast_to(lhs, shape[:-2] + lhs.shape[-2:])
            rhs_full = np.broadcast_to(rhs, shape[:-2] + rhs.shape[-2:])
            rows = lhs_full[unsure[:-1]]  # (count, K)
            columns = rhs_full[unsure[:-2] + (slice(None), unsure[-1])]
            if len(shape) == 2:  # no batch axes: the column index stays in place
                columns = columns.T
            result[unsure] = _dot_by_steps(rows, columns, acc[unsure], work)
        return result


@implements("mmaf", lanewise=True)
def _mmaf(tb, op, lhs, rhs, acc):
    """acc + lhs @ rhs: operands widened exactly to f32 (f64 for f64); the exact sum is rounded
    once to f32 (f64), then to the result type. Bit-identical however tile blocks are batched."""
    dtype = result_dtype(op)
    lhs_element = element_of(op.operands["lhs"].type)
    rhs_element = element_of(op.operands["rhs"].type)
    work = np.dtype(np.float64 if dtype == np.float64 else np.float32)
    lhs = _widen(lhs, lhs_element).astype(work, copy=False)
    rhs = _widen(rhs, rhs_element).astype(work, copy=False)
    return [exact_dot(lhs, rhs, acc, work).astype(dtype, copy=False)]


@implements("mmai", lanewise=True)
def _mmai(tb, op, lhs, rhs, acc):
    def read(values, attr):
        values = np.asarray(values)
        if op.attrs.get(attr) == Signedness.UNSIGNED:
            values = num.as_unsigned(values)
        return values.astype(np.float64)  # |sum| < 2^53 for 8-bit operands and K < 2^37
    product = np.matmul(read(lhs, "signedness_lhs"), read(rhs, "signedness_rhs")).astype(np.int64)
    return [num.as_signed(product + np.asarray(acc).astype(np.int64), result_dtype(op))]


@implements("mmaf_scaled", lanewise=True)
def _mmaf_scaled(tb, op, lhs, rhs, acc, lhs_scale, rhs_scale):
    """acc + (lhs * lhs_scale) @ (rhs * rhs_scale); each scale covers a block of K."""
    lhs = np.asarray(lhs, dtype=np.float32)
    rhs = np.asarray(rhs, dtype=np.float32)
    k = lhs.shape[-1]
    lhs_scale = np.asarray(lhs_scale, dtype=np.float32)
    rhs_scale = np.asarray(rhs_scale, dtype=np.float32)
    lhs_block = k // lhs_scale.shape[-1]
    rhs_block = k // rhs_scale.shape[-2]
    scaled_lhs = lhs * np.repeat(lhs_scale, lhs_block, axis=-1)  # each product rounded to f32
    scaled_rhs = rhs * np.repeat(rhs_scale, rhs_block, axis=-2)
    product = exact_dot(scaled_lhs, scaled_rhs, acc, np.dtype(np.float32))
    return [product.astype(result_dtype(op))]
