"""assert, assume and print.

print_tko formats like the device's printf: each %-conversion takes the next argument; a 0-d tile
prints as one value, a larger tile as nested brackets of comma-separated values (the layout cuTile's
documentation shows, e.g. `[[0, 4, 8, 12]]`), each element formatted by the conversion.

Integer arguments reach the device's vprintf the way tileiras passes them: sign-extended from their
own width (it emits `cvt.s32.s16` for an i16 even under %u/%x), then read at the width the length
modifier names -- 32 bits by default, 64 with l/ll/j/z/t, and narrowed to char/short by hh/h as C
does. So an i16 0xFFFF prints as 4294967295 under %u and an i64 under a plain %d as its low 32 bits.

Widths and precisions are bounded (PRINT_MAX_WIDTH, PRINT_MAX_PADDING). CUDA formats a device
printf on the host with the C library, which takes any width up to INT_MAX (and prints nothing
beyond it), so tileiras accepts every number; the interpreter refuses a width or precision above
4096, and a print whose widths and precisions would pad its tiles to more than 64 MiB of text, with
an ExecutionError naming the conversion, rather than build gigabytes of spaces or zeros.
"""
from __future__ import annotations

import re
import sys

import numpy as np

from ...ir.attrs import BoundedAttr, DivByAttr, SameElementsAttr
from ...ir.types import PointerType
from .. import numeric_ops as num
from ..errors import AssumptionError, KernelAssertionError
from ..registry import implements
from ._common import element_of
from .memory import TOKEN


@implements("assert")
def _assert(tb, op, condition):
    if not np.all(condition):
        tb.fail(f"assertion failed: {op.attrs['message']}", kind=KernelAssertionError)
    return []


@implements("assume")
def _assume(tb, op, value):
    """With check_assumptions, a tile whose values break the predicate faults. Assumptions on
    views (tensor_view div_by) are not checked: the predicate's meaning for a view's parts is not
    pinned down by the sources we have."""
    if tb.options.check_assumptions and isinstance(value, np.ndarray):
        element = element_of(op.operands["value"].type)
        problem = _violation(op.attrs["predicate"], value, element)
        if problem:
            tb.fail(f"assumption does not hold: {problem}", kind=AssumptionError)
    return [value]


def _violation(predicate, value: np.ndarray, element):
    """A description of how `value` breaks `predicate`, or None."""
    if isinstance(predicate, BoundedAttr):
        signed = value.astype(np.int64) if value.dtype.kind in "iu" else value
        if predicate.lower is not None and np.any(signed < predicate.lower):
            return f"a value is below the lower bound {predicate.lower}"
        if predicate.upper is not None and np.any(signed > predicate.upper):
            return f"a value is above the upper bound {predicate.upper}"
    elif isinstance(predicate, DivByAttr):
        return _div_by_violation(predicate, num.as_unsigned(value).astype(np.uint64), element)
    elif isinstance(predicate, SameElementsAttr):
        for dim, group in enumerate(predicate.values):
            if group > 1 and value.ndim > dim:
                blocks = np.moveaxis(value, dim, 0)
                usable = blocks.shape[0] // group * group
                grouped = blocks[:usable].reshape((-1, group) + blocks.shape[1:])
                if np.any(grouped != grouped[:, :1]):
                    return f"elements differ within groups of {group} along dimension {dim}"
    return None


def _div_by_violation(predicate, integers: np.ndarray, element):
    """div_by<D> : every value is a multiple of D. div_by<D, every E along A> (our reading of the
    Tile IR examples): along dimension A the values form groups of E consecutive elements; each
    group's first value is a multiple of D and the others follow it one unit apart (1 for
    integers, the pointee's size in bytes for pointers). `every 1` is the plain form."""
    divisor = np.uint64(predicate.divisor)
    every = predicate.every or 1
    if every == 1 or integers.ndim == 0:
        if np.any(integers % divisor):
            return f"a value is not divisible by {predicate.divisor}"
        return None
    along = predicate.along or 0
    rows = np.moveaxis(integers, along, -1)
    usable = rows.shape[-1] // every * every
    groups = rows[..., :usable].reshape(rows.shape[:-1] + (-1, every))
    leaders = groups[..., :1]
    if np.any(leaders % divisor):
        return (f"the first value of a group of {every} along dimension {along} is not "
                f"divisible by {predicate.divisor}")
    unit = max(1, (element.pointee.bits + 7) // 8) if isinstance(element, PointerType) else 1
    steps = np.arange(every, dtype=np.uint64) * np.uint64(unit)
    if np.any(groups != leaders + steps):
        return (f"values within a group of {every} along dimension {along} are not "
                f"consecutive (step {unit})")
    return None


_CONVERSION = re.compile(r"%(?P<flags>[-+ #0]*)(?P<width>\d+)?(?:\.(?P<precision>\d+))?"
                         r"(?P<length>hh|h|ll|l|j|z|t|L)?(?P<conversion>[diuoxXeEfFgGaAc%])")

PRINT_MAX_WIDTH = 4096  # largest width or precision one conversion may ask for
PRINT_MAX_PADDING = 64 << 20  # elements x width (or precision) summed over one print

_LENGTH_BITS = {"hh": 8, "h": 16, "l": 64, "ll": 64, "j": 64, "z": 64, "t": 64}


def _device_integer(value, conversion: str, length: str) -> int:
    """The integer printf prints for an element: sign-extended (integers are stored signed, so
    int() is that extension), read at the length modifier's width, as unsigned for u/o/x/X."""
    bits = _LENGTH_BITS.get(length, 32)
    number = int(value) & ((1 << bits) - 1)
    if conversion == "c":
        return number & 0xFF
    if conversion in "di" and number >> (bits - 1):
        number -= 1 << bits
    return number


def _format_element(spec: str, conversion: str, length: str, value) -> str:
    if conversion in "aA":
        text = float(value).hex()
        return text.upper() if conversion == "A" else text
    if conversion in "diuoxXc":
        python_conversion = "d" if conversion in "iu" else conversion
        return (spec[:-1] + python_conversion) % _device_integer(value, conversion, length)
    return spec % float(value)


def _format_argument(spec: str, conversion: str, length: str, value: np.ndarray) -> str:
    if value.ndim == 0:
        return _format_element(spec, conversion, length, value[()])
    return "[" + ", ".join(_format_argument(spec, conversion, length, part)
                           for part in value) + "]"


def format_print(text: str, arguments, fail=None) -> str:
    """The device printf's output for `text` and the argument tiles. A width or precision past the
    interpreter's bounds calls `fail(message)` (raises ValueError when no `fail` is given)."""
    _check_widths(text, arguments, fail)
    remaining = iter(arguments)
    pieces = []
    position = 0
    for match in _CONVERSION.finditer(text):
        pieces.append(text[position:match.start()])
        position = match.end()
        conversion = match.group("conversion")
        if conversion == "%":
            pieces.append("%")
            continue
        spec = "%" + (match.group("flags") or "") + (match.group("width") or "")
        if match.group("precision") is not None:
            spec += "." + match.group("precision")
        spec += conversion
        try:
            argument = next(remaining)
        except StopIteration:
            pieces.append(match.group(0))
            continue
        pieces.append(_format_argument(spec, conversion, match.group("length") or "",
                                       np.asarray(argument)))
    pieces.append(text[position:])
    return "".join(pieces)


def _check_widths(text: str, arguments, fail) -> None:
    """Refuse widths and precisions above PRINT_MAX_WIDTH, and a total padding (elements times the
    larger of width and precision, over every conversion) above PRINT_MAX_PADDING."""
    remaining = iter(arguments)
    padding = 0
    for match in _CONVERSION.finditer(text):
        if match.group("conversion") == "%":
            continue
        argument = next(remaining, None)
        digits = [(match.group(name) or "").lstrip("0") for name in ("width", "precision")]
        if not any(digits):
            continue
        # a 20-digit number is not read in full
        wide = max(int(number[:10] or 0) if len(number) <= 10 else PRINT_MAX_WIDTH + 1
                   for number in digits)
        if wide > PRINT_MAX_WIDTH:
            message = (f"print format conversion {match.group(0)[:40]!r} asks for a width or "
                       f"precision above the interpreter's limit of {PRINT_MAX_WIDTH}")
        else:
            elements = 1 if argument is None else int(np.asarray(argument).size)
            padding += elements * wide
            if padding <= PRINT_MAX_PADDING:
                continue
            message = (f"print format conversion {match.group(0)!r} pads its tiles to more than "
                       f"{PRINT_MAX_PADDING >> 20} MiB of text (the interpreter's limit)")
        if fail is None:
            raise ValueError(message)
        fail(message)


@implements("print_tko")
def _print(tb, op, arguments, token):
    stream = tb.options.print_stream or sys.stdout
    text = format_print(op.attrs["str"], arguments, tb.fail)
    buffer = getattr(stream, "buffer", None)
    if buffer is not None:  # a real stdout: write the format's raw bytes, as the device does
        stream.flush()
        buffer.write(text.encode("utf-8", "surrogateescape"))
        buffer.flush()
    else:
        stream.write(text)
    return [TOKEN]
