"""The optional compiled helpers (tilebc/_speedups.c) agree with the pure-Python definitions they
stand in for. Skipped where the extension is not built; TILEBC_PURE=1 runs the rest of the suite on
the pure path."""
import glob
import os
import random

import pytest

from tilebc.text.lexer import _CHECKED, _SPACED_TOKEN, Cursor

speedups = pytest.importorskip("tilebc._speedups")
CORPUS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "text_corpus", "*.mlir")))


def _by_regex(text: str, pos: int):
    """What the lexer's regular expression reads at `pos`, when it is a kind scan_token handles."""
    match = _SPACED_TOKEN.match(text, pos)
    if match is None or match.lastgroup in _CHECKED:
        return None
    kind = match.lastgroup
    return kind, match.group(kind), match.start(kind)


@pytest.mark.parametrize("path", CORPUS, ids=os.path.basename)
def test_scan_token_matches_the_lexer_at_every_offset(path):
    text = open(path, encoding="utf-8").read()
    read = 0
    for pos in range(len(text)):
        found = speedups.scan_token(text, pos)
        if found is not None:
            assert found == _by_regex(text, pos), (path, pos)
            read += 1
    assert read > len(text) // 2  # it reads most positions itself, not only the easy ones


def test_scan_token_matches_the_lexer_on_random_text():
    # every character class the grammar distinguishes, non-ASCII spaces and letters among them
    alphabet = list(" \t\n\r\f\v\x1c\x85\xa0\u2028/%#!@\"-0123456789xeE.abcAZ_$()[]{}<>,:=?^*+é;&|~")
    rng = random.Random(20)
    declined = 0
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10)))
        for pos in range(len(text) + 1):
            found = speedups.scan_token(text, pos)
            if found is None:
                declined += 1
            else:
                assert found == _by_regex(text, pos), (text, pos)
    assert declined  # the cases it leaves to the regular expressions do occur


def test_lexer_tokens_are_the_same_on_both_paths(monkeypatch):
    import tilebc.text.lexer as lexer
    text = open(CORPUS[0], encoding="utf-8").read()

    def tokens():
        cursor, out = Cursor(text), []
        while True:
            token = cursor.next()
            out.append((token.kind, token.text, token.pos))
            if token.kind == "eof":
                return out

    compiled = tokens()
    monkeypatch.setattr(lexer, "_scan_token", None)
    assert tokens() == compiled
