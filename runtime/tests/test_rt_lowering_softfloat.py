"""Software narrow-float conversions (lowering/softfloat.py) against tilebc.numeric.convert.

No GPU here: the straight-line PTX that `encode_f64` emits is evaluated lane-parallel by a tiny
evaluator of exactly the integer instructions it uses (semantics per the PTX ISA), over every
special value, every code's neighbourhood (exact values, midpoints, one ulp either side) and random
f32/f64 inputs. The result must equal tilebc.numeric.convert.float_to_float bit for bit. The compiled
fixtures link on every target (test_rt_compile_fixtures.py).
"""
import re

import numpy as np
import pytest

from tilebc.numeric.convert import float_to_float
from tilebc.numeric.numerics import float_format, from_bits, to_bits

from tilebc_runtime.lowering import softfloat
from tilebc_runtime.lowering.ptx import PtxWriter

WIDTH = {"b16": 16, "u16": 16, "b32": 32, "u32": 32, "s32": 32, "b64": 64, "u64": 64, "s64": 64,
         "f32": 32, "f64": 64}
_INSTR = re.compile(r"^\t(\w+)((?:\.\w+)*) (.*);$")


def _signed(values, bits):
    return np.array([v - (1 << bits) if v >> (bits - 1) else v for v in values], dtype=object)


def evaluate(lines, inputs):
    """Run straight-line PTX lines over lanes; `inputs` maps register -> uint64 bit arrays.
    Integer registers hold Python ints (unsigned bit patterns), predicates numpy bools."""
    regs = {name: np.array([int(v) for v in values], dtype=object) for name, values in inputs.items()}
    lanes = len(next(iter(inputs.values())))

    def val(token, bits):
        if token.startswith("%"):
            return regs[token]
        return np.array([int(token) % (1 << bits)] * lanes, dtype=object)

    def wrap(values, bits):
        return np.array([int(v) % (1 << bits) for v in values], dtype=object)

    for line in lines:
        match = _INSTR.match(line)
        assert match, f"unexpected PTX line {line!r}"
        opcode, mods, args = match.group(1), match.group(2).split(".")[1:], match.group(3)
        dst, *src = [a.strip() for a in args.split(",")]
        kind = mods[-1]
        bits = WIDTH.get(kind, 1)
        if opcode == "mov":
            regs[dst] = regs[src[0]] if src[0].startswith("%") else val(src[0], bits)
        elif opcode == "cvt":
            to, frm = mods[-2], mods[-1]
            if (to, frm) == ("f64", "f32"):
                f32 = np.array(list(regs[src[0]]), dtype=np.uint64).astype(np.uint32)
                wide = f32.view(np.float32).astype(np.float64).view(np.uint64)
                regs[dst] = np.array([int(v) for v in wide], dtype=object)
            else:
                regs[dst] = wrap(regs[src[0]], WIDTH[to])
        elif kind == "pred":
            a = regs[src[0]]
            regs[dst] = {"not": lambda: ~a, "and": lambda: a & regs[src[1]],
                         "or": lambda: a | regs[src[1]]}[opcode]()
        elif opcode in ("and", "or"):
            a, b = val(src[0], bits), val(src[1], bits)
            regs[dst] = (a & b) if opcode == "and" else (a | b)
        elif opcode in ("shr", "shl"):
            a, amount = val(src[0], bits), val(src[1], 32)
            shifted = [(x << min(s, bits)) if opcode == "shl" else (x >> min(s, bits))
                       for x, s in zip(a, amount)]
            regs[dst] = wrap(shifted, bits)
        elif opcode in ("add", "sub", "min", "max"):
            a, b = val(src[0], bits), val(src[1], bits)
            if kind.startswith("s"):
                a, b = _signed(a, bits), _signed(b, bits)
            out = {"add": lambda: a + b, "sub": lambda: a - b, "min": lambda: np.minimum(a, b),
                   "max": lambda: np.maximum(a, b)}[opcode]()
            regs[dst] = wrap(out, bits)
        elif opcode == "setp":
            a, b = val(src[0], bits), val(src[1], bits)
            if kind.startswith("s"):
                a, b = _signed(a, bits), _signed(b, bits)
            regs[dst] = np.array({"eq": a == b, "ne": a != b, "lt": a < b, "gt": a > b,
                                  "le": a <= b, "ge": a >= b}[mods[0]], dtype=bool)
        elif opcode == "selp":
            regs[dst] = np.where(regs[src[2]], val(src[0], bits), val(src[1], bits))
        else:
            raise AssertionError(f"evaluator does not know {opcode}")
    return regs


def _special_inputs(name):
    """f64 values around every code of the format: exact, midpoints, one ulp off, extremes."""
    fmt = float_format(name)
    codes = np.arange(1 << fmt.bits, dtype=np.uint64)
    values = np.asarray(float_to_float(from_bits(codes, name), name, "f64"), dtype=np.float64)
    finite = np.sort(values[np.isfinite(values)])
    mids = (finite[1:] + finite[:-1]) / 2
    near = np.concatenate([mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf)])
    extremes = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-300, -1e-300, 5e-324, 1e300,
                2.0 ** -127, 1.5 * 2.0 ** -127, 2.0 ** -128, 2.0 ** -149, 3.4e38, 2.0 ** 127,
                1.5 * 2.0 ** 127, 2.0 ** 128 * 0.99]
    rng = np.random.default_rng(7)
    random = rng.standard_normal(400) * np.exp2(rng.integers(-30, 30, 400))
    return np.concatenate([finite, near, extremes, random, -finite, -near])


# ftof rounds to these formats to nearest-even only, except e8m0 (zero, positive_inf); e8m0 with
# nearest-even is not an ftof mode but is checked too (ties go to the even exponent field).
CASES = [("f4E2M1FN", "rn"), ("fnv8E5M3FNU", "rn"), ("f8E4M3FN", "rn"), ("f8E5M2", "rn"),
         ("f8E8M0FNU", "rz"), ("f8E8M0FNU", "rp"), ("f8E8M0FNU", "rn")]


@pytest.mark.parametrize("name,rounding", CASES)
def test_encode_matches_convert(name, rounding):
    mode = {"rn": "nearest_even", "rz": "zero", "rp": "positive_inf"}[rounding]
    values = _special_inputs(name)
    for source in ("f64", "f32"):
        if source == "f32":
            with np.errstate(over="ignore"):
                values32 = values.astype(np.float32)
            inputs = values32.astype(np.float64)  # the f32 -> f64 step is exact
        else:
            inputs = values
        w = PtxWriter()
        w.arch = 80
        out = softfloat.encode_f64(w, "%in", name, rounding)
        regs = evaluate(w.body, {"%in": inputs.view(np.uint64)})
        got = np.array(list(regs[out]), dtype=np.uint64)
        expected = to_bits(float_to_float(inputs, "f64", name, mode), name).astype(np.uint64)
        bad = np.nonzero(got != expected)[0]
        assert bad.size == 0, (f"{source}->{name} {rounding}: {inputs[bad[:5]]} gave "
                               f"{got[bad[:5]]}, convert says {expected[bad[:5]]}")


@pytest.mark.parametrize("name", ["f4E2M1FN", "fnv8E5M3FNU", "f8E4M3FN", "f8E5M2"])
def test_decode_table_matches_convert(name):
    fmt = float_format(name)
    table = np.frombuffer(softfloat.decode_table(name), dtype="<u4")
    assert len(table) == 1 << fmt.bits
    codes = np.arange(1 << fmt.bits, dtype=np.uint64)
    expected = np.asarray(float_to_float(from_bits(codes, name), name, "f32"), np.float32)
    np.testing.assert_array_equal(table.view(np.float32), expected)
    # spot facts from the format definitions
    if name == "f4E2M1FN":
        assert list(table.view(np.float32)[:8]) == [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    if name == "fnv8E5M3FNU":
        assert np.isnan(table.view(np.float32)[255]) and table.view(np.float32)[254] == 114688.0


def test_soft_formats_by_arch():
    assert softfloat.is_soft("f8E4M3FN", 80) and not softfloat.is_soft("f8E4M3FN", 90)
    assert all(softfloat.is_soft(n, 120) for n in softfloat.ALWAYS_SOFT)
