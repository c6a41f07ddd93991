"""Zero padding of a float load is written as zero bytes without tilebc.numeric (numpy): that holds
only while +0.0 encodes as all zero bits in every float element type."""
from tilebc.ir.types import ELEMENT_TYPES
from tilebc.numeric.convert import float_to_bits


def test_positive_zero_is_all_zero_bits_in_every_float_type():
    floats = [t for t in ELEMENT_TYPES.values() if t.is_float]
    assert len(floats) >= 4
    assert {t.name: float_to_bits(0.0, t) for t in floats} == {t.name: 0 for t in floats}
    assert any(float_to_bits(-0.0, t) != 0 for t in floats)  # NEG_ZERO still needs the encoder
