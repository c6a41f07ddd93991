"""Integer arithmetic of Tile IR on signless storage arrays: the semantics of addi, subi, muli, negi,
absi, mulhii, divi, remi, shli, shri, maxi, mini, andi, ori, xori and cmpi.

Operands and results are numpy arrays in the storage of `tilebc.numeric.convert` (i1: bool_, i8..i64: the
signed numpy integers holding the bits). The integer ops take i1, i8, i16, i32 and i64 (Tile IR's
integer tile type; i4 only exists for memory, conversions and pack/unpack). The element type is read
from the array's dtype. Signedness is a flag of the op, never of the type: `signed=False` reads the
same bits as unsigned (int8(-56) is 200).

Results wrap modulo 2^width, which is what the ops define and what the hardware does. Some inputs are
undefined behaviour in Tile IR; each function computes a result for them anyway (the one the PTX that
tileiras emits produces, where known) and can report them:

  * overflow flags (addi, subi, muli, shli, negi): `no_signed_wrap` promises that the exact result of the
    signed reading fits, `no_unsigned_wrap` the same for the unsigned reading, `no_wrap` both. A broken
    promise is undefined (LLVM calls the value poison). negi is `0 - x`: no_signed_wrap breaks at the
    minimum value, no_wrap also for every x != 0; no_unsigned_wrap alone is rejected (tileiras does).
    For shli the exact result is x * 2^y.
  * divi and remi: a zero divisor; signed divi of the minimum value by -1. Computed results: quotient all
    ones, remainder the dividend (PTX's div/rem by zero); min / -1 wraps to min. The spec makes only a
    zero divisor undefined for remi: signed remi(min, -1) is 0.
  * shli and shri: the shift amount (the rhs, always read as unsigned) must be below the width; the spec
    leaves larger amounts unsaid and LLVM makes them poison. Computed results follow PTX's shl/shr, which
    tileiras emits unchanged: the amount clamps to the width (shli and unsigned shri give 0, signed shri
    fills with the sign bit).

Rounding of divi: `zero` (truncate, the default), `negative_inf` (floor) or `positive_inf` (ceiling);
`unsigned` with `negative_inf` is not a valid combination (it equals `zero`; NVIDIA's verifier rejects
it) and raises. mulhii is unsigned only. absi reads its input as signed and its result as unsigned:
absi(min) is 2^(width-1), no overflow. i1 read as signed is -1 (true) or 0.

Every function takes `check=True` to raise `IntegerUndefinedError` when any element is undefined;
`undefined(...)` returns the mask instead. `evaluate(mnemonic, operands, attrs)` dispatches on the op
table's mnemonics and attribute names, for the interpreter.
"""
from __future__ import annotations

import functools
from typing import Callable, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from .convert import int_from_values, int_values
from ..errors import TilebcError
from ..ir.types import ELEMENT_TYPES, ElementType
from ..ops.enums import ComparisonPredicate, IntegerOverflow, RoundingMode, Signedness
from ..ops.table import OPS_BY_MNEMONIC, by_mnemonic


class IntegerOpError(TilebcError):
    """An integer op applied to arrays or flags that Tile IR does not accept."""


class IntegerUndefinedError(IntegerOpError):
    """Some elements of an integer op are undefined behaviour (raised only with check=True)."""

    def __init__(self, message: str, mask: np.ndarray):
        super().__init__(message)
        self.mask = mask


OF = IntegerOverflow
# Integer ops accept these element types (i4 is excluded: no arithmetic on it).
_BY_DTYPE = {np.dtype(np.bool_): "i1", np.dtype(np.int8): "i8", np.dtype(np.int16): "i16",
             np.dtype(np.int32): "i32", np.dtype(np.int64): "i64"}
U64 = np.uint64


# bits -> (width, mask of the width, signed minimum)
_WIDTHS = {bits: (bits, U64((1 << bits) - 1), -(1 << (bits - 1))) for bits in (1, 8, 16, 32, 64)}


def element_of(array) -> ElementType:
    """The integer element type whose storage `array` is, or IntegerOpError."""
    dtype = np.asarray(array).dtype
    name = _BY_DTYPE.get(dtype)
    if name is None:
        raise IntegerOpError(f"integer ops take i1, i8, i16, i32 or i64 storage (numpy bool_, int8, "
                             f"int16, int32, int64); got numpy dtype {dtype}")
    return ELEMENT_TYPES[name]


class _Operands:
    """Both readings of each operand, plus the width's constants. The readings are made when an
    op first asks (most ops read one of them)."""

    __slots__ = ("element", "width", "mask", "min", "shape", "need_mask", "_arrays", "_signed",
                 "_unsigned")

    def __init__(self, op: str, arrays: Sequence, need_mask: bool = True):
        arrays = [np.asarray(a) for a in arrays]
        self.element = element_of(arrays[0])
        first = arrays[0]
        for other in arrays[1:]:
            if other.dtype != first.dtype:
                raise IntegerOpError(f"{op}: operands must have the same element type; got "
                                     f"{self.element.name} and numpy dtype {other.dtype}")
        if len(arrays) > 1 and any(other.shape != first.shape for other in arrays[1:]):
            arrays = list(np.broadcast_arrays(*arrays))
        self._arrays = arrays
        self.shape = arrays[0].shape
        self.need_mask = need_mask  # False: the caller reads the result only (cores skip the mask)
        self._signed = self._unsigned = None
        self.width, self.mask, self.min = _WIDTHS[self.element.bits]

    @property
    def signed(self):
        if self._signed is None:
            self._signed = [int_values(a, self.element, True) for a in self._arrays]
        return self._signed

    @property
    def unsigned(self):
        if self._unsigned is None:
            self._unsigned = [int_values(a, self.element, False) for a in self._arrays]
        return self._unsigned

    def native(self, ufunc, reading: Callable[[np.ndarray, np.ndarray], np.ndarray]):
        """`ufunc` on the storage itself, whose integer arithmetic wraps at the width as the op
        does (i8..i64); i1's is logic, so i1 stores `reading(unsigned a, unsigned b)`."""
        if self.width == 1:
            (ua, ub) = self.unsigned
            return self.store(reading(ua, ub))
        return ufunc(self._arrays[0], self._arrays[1])

    def store(self, values) -> np.ndarray:
        """Storage of values (int64 or uint64) wrapped to the width."""
        return int_from_values(np.asarray(values), self.element)

    def s(self, values) -> np.ndarray:
        """Signed reading of wrapped values."""
        return int_values(self.store(values), self.element, True)

    def u(self, values) -> np.ndarray:
        return int_values(self.store(values), self.element, False)


def _overflow(value) -> IntegerOverflow:
    if isinstance(value, IntegerOverflow):
        return value
    if isinstance(value, str):
        try:
            return IntegerOverflow.from_keyword(value)
        except KeyError:
            pass
    try:
        return IntegerOverflow(value)
    except ValueError:
        raise IntegerOpError(f"unknown overflow flag {value!r}; expected none, no_signed_wrap, "
                             f"no_unsigned_wrap or no_wrap") from None


def _signed_flag(signed) -> bool:
    if isinstance(signed, Signedness):
        return signed is Signedness.SIGNED
    if isinstance(signed, str):
        if signed not in ("signed", "unsigned"):
            raise IntegerOpError(f"unknown signedness {signed!r}; expected signed or unsigned")
        return signed == "signed"
    return bool(signed)


def _wrap_flags(ops: "_Operands", overflow, signed_breaks: Callable[[], np.ndarray],
                unsigned_breaks: Callable[[], np.ndarray]) -> Optional[np.ndarray]:
    """The elements breaking the flag's promise (None when `ops` needs no mask); the breaks are
    computed only for the flags that ask."""
    flag = _overflow(overflow)
    if not ops.need_mask:
        return None
    broken = np.zeros(ops.shape, bool)
    if flag in (OF.NO_SIGNED_WRAP, OF.NO_WRAP):
        broken = broken | signed_breaks()
    if flag in (OF.NO_UNSIGNED_WRAP, OF.NO_WRAP):
        broken = broken | unsigned_breaks()
    return broken


def _nothing_undefined(ops: "_Operands") -> Optional[np.ndarray]:
    return np.zeros(ops.shape, bool) if ops.need_mask else None


def _mulhi_unsigned(a: np.ndarray, b: np.ndarray, width: int) -> np.ndarray:
    """High `width` bits of the 2*width-bit product of unsigned values (uint64)."""
    if width <= 32:
        return (a * b) >> U64(width)  # exact: both below 2^32
    low32, shift = U64(0xFFFFFFFF), U64(32)
    a_lo, a_hi, b_lo, b_hi = a & low32, a >> shift, b & low32, b >> shift
    lo_lo = a_lo * b_lo
    mid = a_hi * b_lo + (lo_lo >> shift)
    mid2 = a_lo * b_hi + (mid & low32)
    return a_hi * b_hi + (mid >> shift) + (mid2 >> shift)


# -------------------------------------------------------------------------------------------------
# The ops. Each core function returns (result storage, undefined mask, what makes it undefined);
# the mask is None when the operands say no mask is needed (`evaluate`).

Core = Tuple[np.ndarray, Optional[np.ndarray], str]


def _addi(ops: _Operands, overflow=OF.NONE) -> Core:
    result = ops.native(np.add, lambda ua, ub: ua + ub)

    def signed_breaks():
        (sa, sb), sr = ops.signed, int_values(result, ops.element, True)
        return ((sa < 0) == (sb < 0)) & ((sr < 0) != (sa < 0))
    return result, _wrap_flags(ops, overflow, signed_breaks, lambda: int_values(
        result, ops.element, False) < ops.unsigned[0]), "overflow"


def _subi(ops: _Operands, overflow=OF.NONE) -> Core:
    result = ops.native(np.subtract, lambda ua, ub: ua - ub)

    def signed_breaks():
        (sa, sb), sr = ops.signed, int_values(result, ops.element, True)
        return ((sa < 0) != (sb < 0)) & ((sr < 0) != (sa < 0))
    return result, _wrap_flags(ops, overflow, signed_breaks,
                               lambda: ops.unsigned[0] < ops.unsigned[1]), "overflow"


def _muli(ops: _Operands, overflow=OF.NONE) -> Core:
    result = ops.native(np.multiply, lambda ua, ub: ua * ub)
    high = []  # the unsigned product's high half, made once for either flag

    def unsigned_high():
        if not high:
            high.append(_mulhi_unsigned(*ops.unsigned, ops.width))
        return high[0]

    def signed_breaks():
        (sa, sb), (ua, ub) = ops.signed, ops.unsigned
        # high half of the signed product: subtract b (a) where a (b) is negative, mod 2^width
        signed_high = (unsigned_high() - np.where(sa < 0, ub, U64(0))
                       - np.where(sb < 0, ua, U64(0))) & ops.mask
        sign_fill = np.where(int_values(result, ops.element, True) < 0, ops.mask, U64(0))
        return signed_high != sign_fill
    return result, _wrap_flags(ops, overflow, signed_breaks,
                               lambda: unsigned_high() != 0), "overflow"


def _negi(ops: _Operands, overflow=OF.NONE) -> Core:
    flag = _overflow(overflow)
    if flag is OF.NO_UNSIGNED_WRAP:
        raise IntegerOpError("negi: the no_unsigned_wrap flag is not supported (negation is signed; "
                             "use none, no_signed_wrap or no_wrap)")
    (ua,) = ops.unsigned
    result = ops.store(U64(0) - ua)
    return result, _wrap_flags(ops, flag, lambda: ops.signed[0] == ops.min,
                               lambda: ua != 0), "overflow"


def _absi(ops: _Operands) -> Core:
    (sa,), (ua,) = ops.signed, ops.unsigned
    magnitude = np.where(sa < 0, U64(0) - ua, ua)  # unsigned reading: |min| = 2^(width-1)
    return ops.store(magnitude), _nothing_undefined(ops), ""


def _mulhii(ops: _Operands) -> Core:
    (ua, ub) = ops.unsigned
    return ops.store(_mulhi_unsigned(ua, ub, ops.width)), _nothing_undefined(ops), ""


def _rounding(value) -> RoundingMode:
    if isinstance(value, RoundingMode):
        return value
    if isinstance(value, str):
        try:
            return RoundingMode.from_keyword(value)
        except KeyError:
            pass
    try:
        return RoundingMode(value)
    except ValueError:
        raise IntegerOpError(f"unknown rounding mode {value!r}") from None


_DIVI_ROUNDING = (RoundingMode.ZERO, RoundingMode.NEGATIVE_INF, RoundingMode.POSITIVE_INF)


def _divi(ops: _Operands, signed=True, rounding=RoundingMode.ZERO) -> Core:
    signed = _signed_flag(signed)
    mode = _rounding(rounding)
    if mode not in _DIVI_ROUNDING:
        raise IntegerOpError(f"divi: rounding {mode.keyword} is not valid; expected zero, "
                             f"negative_inf or positive_inf")
    if mode is RoundingMode.NEGATIVE_INF and not signed:
        raise IntegerOpError("divi: rounding negative_inf is not allowed with unsigned (unsigned "
                             "division already rounds down: use rounding zero)")
    (sa, sb), (ua, ub) = ops.signed, ops.unsigned
    zero = ub == 0
    if signed:
        minus_one = sb == -1  # handled apart: min / -1 overflows numpy's division too
        safe = np.where(zero | minus_one, 1, sb)
        floor = np.floor_divide(sa, safe)
        inexact = (sa - floor * safe) != 0
        if mode is RoundingMode.NEGATIVE_INF:
            quotient = floor
        elif mode is RoundingMode.POSITIVE_INF:
            quotient = floor + inexact
        else:
            quotient = floor + (inexact & ((sa < 0) != (safe < 0)))
        quotient = np.where(minus_one, U64(0) - ua, ops.u(quotient))
        undefined = zero | (minus_one & (sa == ops.min))
    else:
        safe = np.where(zero, U64(1), ub)
        quotient = ua // safe
        if mode is RoundingMode.POSITIVE_INF:
            quotient = quotient + (ua % safe != 0)
        undefined = zero
    quotient = np.where(zero, ops.mask, quotient)
    what = "division by zero or signed overflow (min / -1)" if signed else "division by zero"
    return ops.store(quotient), undefined, what


def _remi(ops: _Operands, signed=True) -> Core:
    (sa, sb), (ua, ub) = ops.signed, ops.unsigned
    zero = ub == 0
    if _signed_flag(signed):
        special = zero | (sb == -1)
        remainder = np.fmod(sa, np.where(special, 1, sb))  # sign of the dividend
        remainder = np.where(sb == -1, 0, remainder)
        result = np.where(zero, ua, ops.u(remainder))
    else:
        result = np.where(zero, ua, ua % np.where(zero, U64(1), ub))
    return ops.store(result), zero, "division by zero"


def _shift_amount(ops: _Operands) -> Tuple[np.ndarray, np.ndarray]:
    amount = ops.unsigned[1]
    too_far = amount >= U64(ops.width)
    return np.minimum(amount, U64(ops.width - 1)), too_far


def _shli(ops: _Operands, overflow=OF.NONE) -> Core:
    (ua, _) = ops.unsigned
    amount, too_far = _shift_amount(ops)
    result = ops.store(np.where(too_far, U64(0), ua << amount))

    def signed_breaks():
        kept = int_values(result, ops.element, True) >> amount.astype(np.int64)
        return kept != ops.signed[0]
    broken = _wrap_flags(ops, overflow, signed_breaks,
                         lambda: (int_values(result, ops.element, False) >> amount) != ua)
    what = "shift amount >= width or overflow"
    return result, None if broken is None else too_far | (broken & ~too_far), what


def _shri(ops: _Operands, signed=True) -> Core:
    (sa, _), (ua, _) = ops.signed, ops.unsigned
    amount, too_far = _shift_amount(ops)
    if _signed_flag(signed):
        result = ops.u(sa >> amount.astype(np.int64))  # clamped at width-1: sign fill
    else:
        result = np.where(too_far, U64(0), ua >> amount)
    return ops.store(result), too_far, "shift amount >= width"


def _extreme(pick_max: bool) -> Callable[..., Core]:
    def core(ops: _Operands, signed=True) -> Core:
        a, b = ops.signed if _signed_flag(signed) else ops.unsigned
        take_a = a >= b if pick_max else a <= b
        chosen = np.where(take_a, ops.unsigned[0], ops.unsigned[1])
        return ops.store(chosen), _nothing_undefined(ops), ""
    return core


def _bitwise(fn) -> Callable[..., Core]:
    def core(ops: _Operands) -> Core:
        # on i1's bool storage numpy's and/or/xor are the logic ops, bit for bit what the 0/1
        # readings give, so every width applies `fn` to the storage itself
        return fn(*ops._arrays), _nothing_undefined(ops), ""
    return core


_COMPARE = {
    ComparisonPredicate.EQUAL: np.equal, ComparisonPredicate.NOT_EQUAL: np.not_equal,
    ComparisonPredicate.LESS_THAN: np.less, ComparisonPredicate.LESS_THAN_OR_EQUAL: np.less_equal,
    ComparisonPredicate.GREATER_THAN: np.greater,
    ComparisonPredicate.GREATER_THAN_OR_EQUAL: np.greater_equal,
}


def _predicate(value) -> ComparisonPredicate:
    if isinstance(value, ComparisonPredicate):
        return value
    if isinstance(value, str):
        try:
            return ComparisonPredicate.from_keyword(value)
        except KeyError:
            pass
    try:
        return ComparisonPredicate(value)
    except ValueError:
        raise IntegerOpError(f"unknown comparison predicate {value!r}") from None


def _cmpi(ops: _Operands, predicate, signed=True) -> Core:
    compare = _COMPARE[_predicate(predicate)]
    if _signed_flag(signed):
        if ops.width == 1:  # i1 read as signed: true is -1, below false
            result = compare(*ops.signed)
        else:  # the storage is the signed reading
            result = compare(*ops._arrays)
    else:
        a, b = ops.unsigned
        result = compare(a, b)
    return np.asarray(result, np.bool_), _nothing_undefined(ops), ""


# mnemonic -> (core, {op-table attribute name: core keyword}); operand counts come from the op table
_CORES: Dict[str, Tuple[Callable[..., Core], Dict[str, str]]] = by_mnemonic({
    "addi": (_addi, {"overflow": "overflow"}),
    "subi": (_subi, {"overflow": "overflow"}),
    "muli": (_muli, {"overflow": "overflow"}),
    "negi": (_negi, {"overflow": "overflow"}),
    "absi": (_absi, {}),
    "mulhii": (_mulhii, {}),
    "divi": (_divi, {"signedness": "signed", "rounding": "rounding"}),
    "remi": (_remi, {"signedness": "signed"}),
    "shli": (_shli, {"overflow": "overflow"}),
    "shri": (_shri, {"signedness": "signed"}),
    "maxi": (_extreme(True), {"signedness": "signed"}),
    "mini": (_extreme(False), {"signedness": "signed"}),
    "andi": (_bitwise(np.bitwise_and), {}),
    "ori": (_bitwise(np.bitwise_or), {}),
    "xori": (_bitwise(np.bitwise_xor), {}),
    "cmpi": (_cmpi, {"comparison_predicate": "predicate", "signedness": "signed"}),
}, "integer op cores")
_OPS: Dict[str, Tuple[Callable[..., Core], int, Dict[str, str]]] = {
    mnemonic: (core, len(OPS_BY_MNEMONIC[mnemonic].operands), names)
    for mnemonic, (core, names) in _CORES.items()}
MNEMONICS = tuple(_OPS)


def _run(mnemonic: str, operands: Sequence, kwargs: Mapping[str, object],
         need_mask: bool = True) -> Core:
    core, count, _ = _OPS[mnemonic]
    if len(operands) != count:
        raise IntegerOpError(f"{mnemonic} takes {count} operand(s), got {len(operands)}")
    ops = _Operands(mnemonic, operands, need_mask)
    if ops.shape:  # numpy warns of integer overflow on scalars only, never on arrays
        return core(ops, **kwargs)
    with np.errstate(over="ignore"):  # wrapping is the semantics
        return core(ops, **kwargs)


def _raise_if_undefined(mnemonic: str, operands: Sequence, core: Core) -> None:
    result, mask, what = core
    if not np.any(mask):
        return
    index = tuple(int(i) for i in np.argwhere(mask)[0]) if mask.ndim else ()
    arrays = np.broadcast_arrays(*[np.asarray(a) for a in operands])
    element = element_of(arrays[0])
    values = ", ".join(f"{int(int_values(a, element, True)[index])}" for a in arrays)
    raise IntegerUndefinedError(
        f"{mnemonic} on {element.name}: {int(np.count_nonzero(mask))} element(s) undefined "
        f"({what}); first at index {index} with operand(s) {values} (signed reading)", mask)


def evaluate(mnemonic: str, operands: Sequence, attrs: Optional[Mapping[str, object]] = None, *,
             check: bool = False) -> np.ndarray:
    """Apply an integer op by mnemonic; `attrs` uses the op table's attribute names and values
    (overflow, signedness, rounding, comparison_predicate). Unknown attributes are ignored, so an
    op's whole attribute dict can be passed."""
    if mnemonic not in _OPS:
        raise IntegerOpError(f"{mnemonic!r} is not an integer op; expected one of {', '.join(MNEMONICS)}")
    names = _OPS[mnemonic][2]
    kwargs = {names[k]: v for k, v in (attrs or {}).items() if k in names and v is not None}
    core = _run(mnemonic, operands, kwargs, need_mask=check)
    if check:
        _raise_if_undefined(mnemonic, operands, core)
    return core[0]


def undefined(mnemonic: str, operands: Sequence,
              attrs: Optional[Mapping[str, object]] = None) -> np.ndarray:
    """Mask of the elements on which the op is undefined behaviour (see the module docstring)."""
    names = _OPS[mnemonic][2] if mnemonic in _OPS else {}
    kwargs = {names[k]: v for k, v in (attrs or {}).items() if k in names and v is not None}
    if mnemonic not in _OPS:
        raise IntegerOpError(f"{mnemonic!r} is not an integer op")
    return _run(mnemonic, operands, kwargs)[1]


# Convenience functions, one per op, with Python-friendly keywords. Each is named after its op (the
# name is checked against the table on import) and returns its operands and op-table attributes.

def _convenience(arguments: Callable[..., Tuple[tuple, dict]]) -> Callable[..., np.ndarray]:
    mnemonic = arguments.__name__
    if mnemonic not in _OPS:
        raise RuntimeError(f"integer op convenience function for {mnemonic!r}, not an integer op")

    @functools.wraps(arguments)
    def apply(*args, check=False, **kwargs):
        operands, attrs = arguments(*args, **kwargs)
        return evaluate(mnemonic, operands, attrs, check=check)
    return apply


@_convenience
def addi(lhs, rhs, overflow=OF.NONE):
    return (lhs, rhs), {"overflow": overflow}


@_convenience
def subi(lhs, rhs, overflow=OF.NONE):
    return (lhs, rhs), {"overflow": overflow}


@_convenience
def muli(lhs, rhs, overflow=OF.NONE):
    return (lhs, rhs), {"overflow": overflow}


@_convenience
def negi(source, overflow=OF.NONE):
    return (source,), {"overflow": overflow}


@_convenience
def absi(source):
    return (source,), {}


@_convenience
def mulhii(x, y):
    return (x, y), {}


@_convenience
def divi(lhs, rhs, signed=True, rounding=RoundingMode.ZERO):
    return (lhs, rhs), {"signedness": signed, "rounding": rounding}


@_convenience
def remi(lhs, rhs, signed=True):
    return (lhs, rhs), {"signedness": signed}


@_convenience
def shli(lhs, rhs, overflow=OF.NONE):
    return (lhs, rhs), {"overflow": overflow}


@_convenience
def shri(lhs, rhs, signed=True):
    return (lhs, rhs), {"signedness": signed}


@_convenience
def maxi(lhs, rhs, signed=True):
    return (lhs, rhs), {"signedness": signed}


@_convenience
def mini(lhs, rhs, signed=True):
    return (lhs, rhs), {"signedness": signed}


@_convenience
def andi(lhs, rhs):
    return (lhs, rhs), {}


@_convenience
def ori(lhs, rhs):
    return (lhs, rhs), {}


@_convenience
def xori(lhs, rhs):
    return (lhs, rhs), {}


@_convenience
def cmpi(lhs, rhs, predicate, signed=True):
    """i1 (bool) result; equal/not_equal ignore signedness."""
    return (lhs, rhs), {"comparison_predicate": predicate, "signedness": signed}
