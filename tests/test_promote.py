"""cuTile arithmetic promotion: all 18x18 pairs against the data-model seed's table and against cuTile."""
import re

import pytest

from conftest import shared_path
from tilebc.numeric.promote import DTYPES, PROMOTION_TABLE, SHORT_NAMES, Loose, PromotionError, promote

SEED = "seeds/002_d95ef6345bccb177.txt"  # the data-model seed, in the shared folder
LONG = {short: long for long, short in SHORT_NAMES.items()}
PAIRS = [(a, b) for a in DTYPES for b in DTYPES]


def seed_table():
    """The seed's promotion table, parsed from its text: {(row, column): dtype or None}."""
    text = shared_path(SEED).read_text()
    body = text.split("computed according to the table below.", 1)[1].split("Legend:", 1)[0]
    cells = [cell.strip() for cell in body.split("|")]
    cells = [cell for cell in cells if cell and not re.fullmatch(r"-+", cell)]
    header, rest = cells[:18], cells[18:]
    assert [LONG[name] for name in header] == list(DTYPES)
    assert len(rest) == 18 * 19
    table = {}
    for row in range(18):
        label, *values = rest[row * 19:(row + 1) * 19]
        for column, value in zip(header, values):
            table[(LONG[label], LONG[column])] = None if value == "ERR" else LONG[value]
    return table


def test_table_is_the_seed_table():
    assert PROMOTION_TABLE == seed_table()


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p[0]}-{p[1]}")
def test_every_pair_matches_cutile(pair):
    """cuTile's own promote_dtypes is the oracle for the concrete pairs."""
    ct = pytest.importorskip("cuda.tile")
    from cuda.tile._datatype import promote_dtypes
    left, right = pair
    expected = PROMOTION_TABLE[pair]
    try:
        theirs = str(promote_dtypes(getattr(ct, left), getattr(ct, right)))
    except Exception:  # cuTile raises its own TypeCheckingError for ERR cells
        theirs = None
    assert theirs == expected
    if expected is None:
        with pytest.raises(PromotionError, match=f"^implicit promotion of {left} and {right}"):
            promote(left, right)
    else:
        assert promote(left, right) == expected


def test_table_is_symmetric():
    assert all(PROMOTION_TABLE[(a, b)] == PROMOTION_TABLE[(b, a)] for a, b in PAIRS)


def test_loose_constants():
    assert promote(5, 7) == Loose("int")
    assert promote(5, 3.0) == Loose("float")
    assert promote("uint8", 3) == "uint8"          # same category: the typed operand wins
    assert promote("int16", 2 ** 40) == "int16"
    assert promote("float16", 1) == "float16"      # higher category wins
    assert promote("int8", 2.5) == "float32"       # a float constant is float32
    assert promote("bool_", 7) == "int32"          # integral constant by value
    assert promote("bool_", 2 ** 40) == "int64"
    assert promote("bool_", 2 ** 63) == "uint64"
    assert promote("bfloat16", 1.0) == "bfloat16"
    assert promote(True, "int8") == "int8"
    with pytest.raises(PromotionError, match="does not fit"):
        promote("bool_", 2 ** 64)


def test_names_from_other_systems():
    assert promote("cuda.tile.int8", "torch.float16") == "float16"
    assert promote("u8", "u16") == "uint16"
    with pytest.raises(PromotionError, match="^implicit promotion of uint8 and int8"):
        promote("uint8", "int8")
