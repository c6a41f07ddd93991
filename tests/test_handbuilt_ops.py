"""Ops cuTile cannot emit, built with our writer and checked by NVIDIA's reader and compiler."""
import pytest

import tilebc
from tilebc import oracles

from handbuilt import KERNELS


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_nvidia_tools_accept_handbuilt(name):
    module, gpu_name = KERNELS[name]()
    data = tilebc.dump(module)
    listing = oracles.tileirdisasm(data)
    assert listing.ok, listing.stderr
    for op in module.walk():
        if not op.spec.terminator:
            assert f" {op.name} " in listing.stdout or f" {op.name}\n" in listing.stdout, op.name
    compiled = oracles.tileiras(data, gpu_name)
    assert compiled.ok, compiled.stderr
    again = tilebc.load(data)
    assert [op.name for op in again.walk()] == [op.name for op in module.walk()]
    assert tilebc.dump(again) == data


def test_attribute_variants_survive_decoding():
    module, _ = KERNELS["attribute_variants"]()
    ops = {op.name: op for op in tilebc.load(tilebc.dump(module)).walk()}
    assert ops["divi"].attrs["rounding"] is tilebc.ops.RoundingMode.ZERO
    assert ops["ftoi"].attrs["saturating"] is True
    assert ops["for"].attrs["unsignedCmp"] is True
    assert ops["negi"].attrs["overflow"] is tilebc.ops.IntegerOverflow.NO_SIGNED_WRAP
