"""tilebc.numeric.ieee (struct and integer rounding, no numpy) gives the bits and values of
tilebc.numeric.convert / numerics, which the text parser and printer used before, on edge cases
and many random values; and reading and printing float constants no longer loads numpy."""
import math
import random
import struct
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from tilebc.ir import types as T
from tilebc.numeric import convert, ieee, numerics

EDGES = [0.0, -0.0, 1.0, -1.5, math.inf, -math.inf, 65504.0, 65519.99, 65520.0, 5.96e-8,
         2.9802322387695312e-08, 2.9802322387695313e-08, 3.4028235e38, 3.4028235677973366e38,
         3.3895313892515355e38, 3.3961e38, 1e-40, 9.18e-41, 4.591774807899561e-41,
         1.401298464324817e-45, -1e-45, 1e-46, 1e300, -1e300, 5e-324]


def _values(seed: int):
    rng = random.Random(seed)
    values = list(EDGES)
    for _ in range(4000):
        values.append(rng.uniform(-1, 1) * 10.0 ** rng.randint(-330, 308))
        values.append(struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0])
        near = struct.unpack("<f", struct.pack("<I", rng.getrandbits(32)))[0]
        values.append(near * (1 + rng.choice([0.0, 2.0 ** -9, -2.0 ** -9, 2.0 ** -8, 2.0 ** -30])))
    return [v for v in values if v == v]


@pytest.mark.parametrize("name", ["f64", "f32", "f16", "bf16", "tf32", "f8E4M3FN"])
def test_float_to_bits_matches_convert(name):
    element = T.ELEMENT_TYPES[name]
    values = _values(len(name)) if name in ("f64", "f32", "f16", "bf16") else EDGES
    # convert.float_to_bits is round_float64 on a one-element array; rounding them all in one
    # call gives the same bits (it is element-wise) without a numpy pipeline per value
    expected = convert.round_float64(np.array(values, dtype=np.float64), element).tolist()
    for value, bits in zip(EDGES, expected):  # values start with EDGES
        assert convert.float_to_bits(value, element) == bits, value
    for value, bits in zip(values, expected):
        assert ieee.float_to_bits(value, element) == bits, value


@pytest.mark.parametrize("name", ["f64", "f32", "f16", "bf16", "f8E5M2"])
def test_float_from_bits_matches_numerics(name):
    element = T.ELEMENT_TYPES[name]
    rng = random.Random(7)
    patterns = [rng.getrandbits(element.bits + 3) for _ in range(5000)]  # past the width: ignored
    # numerics.float_from_bits decodes a one-element array; decoding all at once gives the same
    # values (element-wise), without a numpy pipeline per pattern
    fmt = numerics.float_format(element)
    mask = (1 << fmt.bits) - 1
    decoded = numerics.decode_bits(np.array([b & mask for b in patterns], dtype=np.uint64),
                                   fmt).tolist()
    for bits, theirs in zip(patterns[:50], decoded):
        one = numerics.float_from_bits(bits, element)
        assert (one != one and theirs != theirs) or struct.pack("<d", one) == struct.pack(
            "<d", theirs), hex(bits)
    for bits, theirs in zip(patterns, decoded):
        ours = ieee.float_from_bits(bits, element)
        if theirs != theirs:
            assert ours != ours, hex(bits)
        else:
            assert ours == theirs and math.copysign(1, ours) == math.copysign(1, theirs), hex(bits)


def test_text_of_float_constants_needs_no_numpy():
    source = ("%a = constant <f32: 1.5> : tile<f32>\n%b = constant <bf16: -0.333> : tile<bf16>\n"
              "%c = constant <f16: 6.5e-5> : tile<f16>\n%d = constant <f64: 0.1> : tile<f64>\n")
    text = f"cuda_tile.module @m {{\n  entry @k() {{\n{source}    return\n  }}\n}}\n"
    script = ("import sys\nfrom tilebc.text.parser import parse_module\n"
              "from tilebc.text.printer import print_module\n"
              f"module = parse_module({text!r})\nprinted = print_module(module)\n"
              "assert print_module(parse_module(printed)) == printed\n"
              "print(printed)\nprint('numpy' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, check=True)
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == "False"
    # as the numpy conversions print them (main before this change)
    assert [line.split("= ", 1)[1] for line in lines if "constant" in line] == [
        "constant <f32: 1.500000e+00> : tile<f32>", "constant <bf16: -3.320310e-01> : tile<bf16>",
        "constant <f16: 6.502870e-05> : tile<f16>", "constant <f64: 1.000000e-01> : tile<f64>"]
