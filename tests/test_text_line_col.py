"""The parser's line:col of an offset (a binary search over newline offsets) agrees with counting
from the start of the text, at every offset, and costs no scan per op."""
import random

from tilebc.text.lexer import Cursor


def _counted(text: str, pos: int):
    return text.count("\n", 0, pos) + 1, pos - (text.rfind("\n", 0, pos) + 1) + 1


def test_line_col_agrees_with_counting_everywhere():
    rng = random.Random(7)
    for text in ("", "\n", "a", "ab\n\ncd\n", "\n\nx", "".join(rng.choice("ab\n") for _ in range(500))):
        cursor = Cursor(text)
        for pos in range(len(text) + 1):
            assert cursor.line_col(pos) == _counted(text, pos), (text, pos)


def test_line_col_of_any_order_of_offsets():
    text = "entry @k() {\n  return\n}\n" * 50
    cursor = Cursor(text)
    offsets = list(range(len(text)))
    random.Random(3).shuffle(offsets)
    assert [cursor.line_col(pos) for pos in offsets] == [_counted(text, pos) for pos in offsets]
