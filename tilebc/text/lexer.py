"""A position-based scanner over Tile IR text.

Tokens are scanned on demand from the current position, so the type parser can read dimension lists
like `16x16xf32` character by character while everything else works on tokens. Errors carry the
line and column and show the offending line with a caret.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from ..errors import TextSyntaxError

_TOKEN = re.compile(r"""
    (?P<value>%[A-Za-z0-9_$.\-]+(?:\#[0-9]+)?)
  | (?P<symbol>@(?:[A-Za-z_][A-Za-z0-9_$.]*|"(?:[^"\\\n]|\\.)*"))
  | (?P<hash>\#[A-Za-z_][A-Za-z0-9_$.]*)
  | (?P<bang>![A-Za-z_][A-Za-z0-9_$.]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<number>-?(?:0x[0-9A-Fa-f]+|[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_$.]*)
  | (?P<punct>->|[()\[\]{}<>,:=?^*+\-])
""", re.VERBOSE)
_WORD_TAIL = re.compile(r"[A-Za-z0-9_.]*")
_SPACE = re.compile(r"(?:\s+|//[^\n]*)+")


@dataclass(frozen=True)
class Token:
    kind: str   # value, symbol, hash, bang, string, number, ident, punct, eof
    text: str
    pos: int


class Cursor:
    def __init__(self, text: str, filename: str = "<text>"):
        self.text = text
        self.filename = filename
        self.pos = 0
        self._peeked: Optional[Token] = None

    # ---- positions and errors --------------------------------------------------------------------

    def line_col(self, pos: int):
        line = self.text.count("\n", 0, pos) + 1
        column = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        return line, column

    def error(self, message: str, pos: Optional[int] = None) -> TextSyntaxError:
        pos = self.peek().pos if pos is None else pos
        line, column = self.line_col(pos)
        start = self.text.rfind("\n", 0, pos) + 1
        end = self.text.find("\n", pos)
        source_line = self.text[start:end if end >= 0 else len(self.text)]
        detail = f"{message}\n  {source_line}\n  {' ' * (column - 1)}^"
        return TextSyntaxError(detail, file=self.filename, line=line, column=column)

    # ---- tokens ----------------------------------------------------------------------------------

    def skip_space(self) -> None:
        match = _SPACE.match(self.text, self.pos)
        if match:
            self.pos = match.end()

    def peek(self) -> Token:
        if self._peeked is not None and self._peeked.pos >= self.pos:
            return self._peeked
        self.skip_space()
        if self.pos >= len(self.text):
            self._peeked = Token("eof", "", self.pos)
            return self._peeked
        match = _TOKEN.match(self.text, self.pos)
        if not match:
            if self.text[self.pos] == '"':
                raise self.error("unterminated string (a string ends with \" on the same line)",
                                 self.pos)
            raise self.error(f"unexpected character {self.text[self.pos]!r}", self.pos)
        if match.lastgroup == "number":
            # A number runs into letters or digits (`12abc`, `0x`, `1.5e`): malformed.
            tail = _WORD_TAIL.match(self.text, match.end())
            if tail.end() > match.end():
                raise self.error(f"malformed number '{self.text[self.pos:tail.end()]}'", self.pos)
        self._peeked = Token(match.lastgroup, match.group(), self.pos)
        return self._peeked

    def next(self) -> Token:
        token = self.peek()
        self.pos = token.pos + len(token.text)
        self._peeked = None
        return token

    def at(self, text: str) -> bool:
        return self.peek().text == text

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.next()
            return True
        return False

    def expect(self, text: str, what: Optional[str] = None) -> Token:
        token = self.peek()
        if token.text != text:
            found = token.text or "end of input"
            raise self.error(f"expected '{text}'{' ' + what if what else ''}, found '{found}'")
        return self.next()

    def expect_kind(self, kind: str, what: str) -> Token:
        token = self.peek()
        if token.kind != kind:
            raise self.error(f"expected {what}, found '{token.text or 'end of input'}'")
        return self.next()

    # ---- raw characters (types) ------------------------------------------------------------------

    def match_raw(self, pattern: re.Pattern):
        self.skip_space()
        self._peeked = None
        match = pattern.match(self.text, self.pos)
        if match:
            self.pos = match.end()
        return match


def unescape(token_text: str) -> str:
    """The value of a quoted string token (MLIR escapes: \\XX hex bytes, \\n, \\t, \\", \\\\)."""
    body = token_text[1:-1]
    out = bytearray()
    index = 0
    while index < len(body):
        ch = body[index]
        if ch != "\\":
            out += ch.encode("utf-8", "surrogateescape")
            index += 1
            continue
        nxt = body[index + 1]
        if nxt in '"\\':
            out.append(ord(nxt))
            index += 2
        elif nxt == "n":
            out.append(10)
            index += 2
        elif nxt == "t":
            out.append(9)
            index += 2
        else:
            out.append(int(body[index + 1:index + 3], 16))
            index += 3
    return out.decode("utf-8", "surrogateescape")  # \XX bytes that are not UTF-8 stay raw bytes
