"""A position-based scanner over Tile IR text.

Tokens are scanned on demand from the current position, so the type parser can read dimension lists
like `16x16xf32` character by character while everything else works on tokens. Errors carry the
line and column and show the offending line with a caret.
"""
from __future__ import annotations

import bisect
import functools
import itertools
import operator
import re
import sys

from ..errors import TextSyntaxError
from ..speedups import CursorBase as _CompiledCursorBase, Token as _CompiledToken

# A repeat of groups that keeps no backtracking state per pass where Python has possessive
# repeats (3.11): otherwise sre holds ~100 bytes per escape (a 2 MB string of escapes: ~200 MiB).
_ONCE = "*+" if sys.version_info >= (3, 11) else "*"
# A quoted string: a run of plain characters is one repeat, not an alternation per character (35x
# faster on the 2.3 MB string of text-fuzz input 3494).
_QUOTED = r'"[^"\\\n]*(?:\\.[^"\\\n]*)' + _ONCE + '"'
_TOKENS = r"""
    (?P<value>%[A-Za-z0-9_$.\-]+(?:\#[0-9]+)?)
  | (?P<symbol>@(?:[A-Za-z_][A-Za-z0-9_$.]*|QUOTED))
  | (?P<hash>\#[A-Za-z_][A-Za-z0-9_$.]*)
  | (?P<bang>![A-Za-z_][A-Za-z0-9_$.]*)
  | (?P<string>QUOTED)
  | (?P<number>-?(?:0x[0-9A-Fa-f]+|[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_$.]*)
  | (?P<punct>->|[()\[\]{}<>,:=?^*+\-])
""".replace("QUOTED", _QUOTED)
_TOKEN = re.compile(_TOKENS, re.VERBOSE)
# Spaces and comments taken whole, never given back: a lookahead captures them and the
# backreference consumes them (an atomic group on every Python), so a failed match cannot find a
# token inside a comment.
SPACES = r"(?=((?:\s|//[^\n]*)*))\1"
# Spaces and comments, then a token: one match per token (the token's group says where it starts).
_SPACED_TOKEN = re.compile(SPACES + "(?:" + _TOKENS + ")", re.VERBOSE)
# Token kinds whose text is checked further (escapes; a number's length and what follows it).
_CHECKED = frozenset(("string", "symbol", "number"))
_WORD_TAIL = re.compile(r"[A-Za-z0-9_.]*")
# MLIR's string escapes: two hex digits, \n, \t, \" and \\; anything else after a backslash is an error.
_ESCAPE = re.compile(r"\\(?:[0-9A-Fa-f]{2}|[nt\"\\]|(.?))")  # group 1: an invalid one
# Text up to the first invalid escape.
_VALID_ESCAPES = re.compile(r"(?:[^\\]+|\\(?:[0-9A-Fa-f]{2}|[nt\"\\]))" + _ONCE)
# The longest number literal read: 2**64 needs 20 digits, but printers write doubles in full
# (1e300 as 301 digits); int() of decimal text is quadratic and refused by Python past 4300 digits.
MAX_NUMBER_CHARS = 4096
# How deep regions, attribute values and locations may nest in text. Each level costs the
# recursive-descent parser several Python frames; 64 is far beyond real kernels and well inside
# Python's default recursion limit (1000) wherever the parser is called from.
MAX_NESTING = 64
# The source line quoted under an error shows this many characters either side of the caret.
_QUOTE_WINDOW = 80
_SPACE = re.compile(r"(?:\s+|//[^\n]*)+")


class PyToken:
    """One token: its kind (value, symbol, hash, bang, string, number, ident, punct, eof), its text
    and where it starts. A slotted class, not a frozen dataclass: the parser makes one per token and
    a frozen dataclass's __init__ costs three object.__setattr__ calls. The compiled helpers have
    their own (Token below), made by their Cursor's methods."""

    __slots__ = ("kind", "text", "pos")

    def __init__(self, kind: str, text: str, pos: int):
        self.kind = kind
        self.text = text
        self.pos = pos

    def __eq__(self, other):
        return other.__class__ is PyToken and (self.kind, self.text, self.pos) == \
            (other.kind, other.text, other.pos)

    def __hash__(self):
        return hash((self.kind, self.text, self.pos))

    def __repr__(self) -> str:
        return f"Token(kind={self.kind!r}, text={self.text!r}, pos={self.pos!r})"


Token = _CompiledToken or PyToken
_new_token = object.__new__


class _PyTokenMethods:
    """The token-level methods in Python; the compiled CursorBase has the same ones, reading
    the common tokens itself and the others through _peek_checked."""

    # ---- tokens ----------------------------------------------------------------------------------

    def peek(self) -> Token:
        peeked = self._peeked
        if peeked is not None and peeked.pos >= self.pos:
            return peeked
        match = _SPACED_TOKEN.match(self.text, self.pos)
        if match is not None:
            kind = match.lastgroup
            if kind not in _CHECKED:
                # a token made without its __init__ frame (a fifth of the cost of a token)
                peeked = self._peeked = _new_token(PyToken)
                peeked.kind = kind
                peeked.text = match.group(kind)
                peeked.pos = self.pos = match.start(kind)
                return peeked
        return self._peek_checked()

    # next/at/_take run once or more per token: each reuses the peeked token inline (a call to
    # peek() costs as much as the rest of them).

    def next(self) -> Token:
        token = self._peeked
        if token is None or token.pos < self.pos:
            token = self.peek()
        self.pos = self.end = token.pos + len(token.text)
        self._peeked = None
        return token

    def at(self, text: str) -> bool:
        token = self._peeked
        if token is None or token.pos < self.pos:
            token = self.peek()
        return token.text == text

    def _take(self, text: str) -> tuple[Token, bool]:
        """(the next token, whether it was `text` and so consumed)."""
        token = self._peeked
        if token is None or token.pos < self.pos:
            token = self.peek()
        if token.text != text:
            return token, False
        self.pos = self.end = token.pos + len(text)
        self._peeked = None
        return token, True

    def accept(self, text: str) -> bool:
        return self._take(text)[1]

    def expect(self, text: str, what: str | None = None) -> Token:
        token, taken = self._take(text)
        return token if taken else self._expect_failed(token, text, what)

    def expect_kind(self, kind: str, what: str) -> Token:
        token = self._peeked
        if token is None or token.pos < self.pos:
            token = self.peek()
        if token.kind != kind:
            return self._expect_kind_failed(token, kind, what)
        self.pos = self.end = token.pos + len(token.text)
        self._peeked = None
        return token


class _CursorCommon:
    """The Cursor's own methods beside the token-level ones (_PyTokenMethods or the compiled
    CursorBase), which call back into these for declined tokens and errors."""

    def __init__(self, text: str, filename: str = "<text>"):
        self.text = text
        self.filename = filename
        self.pos = 0
        self.end = 0  # where the last token read ends
        self._peeked: Token | None = None
        self.depth = 0  # current nesting, all families together (see `nesting`)
        self.depths: dict[str, int] = {}  # current nesting of each family
        self._newlines: list[int] | None = None  # offsets of "\n", found on first use

    # ---- positions and errors --------------------------------------------------------------------

    def line_col(self, pos: int):
        # Every op records its line:col, so this must not rescan the text: the newline offsets
        # are found once and searched (a scan per op made parsing quadratic in the text's size).
        newlines = self._newlines
        if newlines is None:
            # line k's newline is at the lengths of lines 0..k plus k (all in C: no step per line)
            lines = self.text.split("\n")
            del lines[-1]
            newlines = self._newlines = list(map(operator.add, itertools.accumulate(map(len, lines)),
                                                 itertools.count()))
        line = bisect.bisect_left(newlines, pos)
        start = newlines[line - 1] + 1 if line else 0
        return line + 1, pos - start + 1

    def error(self, message: str, pos: int | None = None) -> TextSyntaxError:
        pos = self.peek().pos if pos is None else pos
        line, column = self.line_col(pos)
        start = self.text.rfind("\n", 0, pos) + 1
        end = self.text.find("\n", pos)
        end = end if end >= 0 else len(self.text)
        # Long lines are quoted as a window around the caret (a 100 kB line must not fill the message).
        first = max(start, pos - _QUOTE_WINDOW)
        last = min(end, pos + _QUOTE_WINDOW)
        source_line = ("…" if first > start else "") + self.text[first:last] + ("…" if last < end else "")
        caret = pos - first + (first > start)
        detail = f"{shorten(message, 400)}\n  {source_line}\n  {' ' * caret}^"
        return TextSyntaxError(detail, file=self.filename, line=line, column=column)

    def skip_space(self) -> None:
        match = _SPACE.match(self.text, self.pos)
        if match:
            self.pos = match.end()

    def _peek_checked(self) -> Token:
        """peek() for the end of input, a bad character and the tokens whose text is checked."""
        self.skip_space()
        if self.pos >= len(self.text):
            self._peeked = self._token("eof", "", self.pos)
            return self._peeked
        match = _TOKEN.match(self.text, self.pos)
        if not match:
            if self.text[self.pos] == '"':
                raise self.error("unterminated string (a string ends with \" on the same line)",
                                 self.pos)
            raise self.error(f"unexpected character {self.text[self.pos]!r}", self.pos)
        if match.lastgroup in ("string", "symbol") and '"' in match.group():
            self._check_string(match.group(), self.pos)
        if match.lastgroup == "number":
            if match.end() - self.pos > MAX_NUMBER_CHARS:
                raise self.error(f"number literal of {match.end() - self.pos} characters is too "
                                 f"long (at most {MAX_NUMBER_CHARS})", self.pos)
            # A number runs into letters or digits (`12abc`, `0x`, `1.5e`): malformed.
            tail = _WORD_TAIL.match(self.text, match.end())
            if tail.end() > match.end():
                raise self.error(f"malformed number '{self.text[self.pos:tail.end()]}'", self.pos)
        self._peeked = self._token(match.lastgroup, match.group(), self.pos)
        return self._peeked

    def _check_string(self, token_text: str, pos: int) -> None:
        """A quoted string's escapes and characters must make bytes (so unescape cannot fail)."""
        end = _VALID_ESCAPES.match(token_text).end()  # one C-level scan, not a step per escape
        if end < len(token_text):
            bad = _ESCAPE.match(token_text, end)
            raise self.error(f"invalid escape '{bad.group()}' in string "
                             "(expected \\XX with two hex digits, \\n, \\t, \\\" or \\\\)",
                             pos + bad.start())
        try:
            token_text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError as error:
            raise self.error(f"string holds {token_text[error.start]!r}, which is not a Unicode "
                             "character (a lone surrogate)", pos + error.start) from None

    def int_value(self, token: Token, what: str = "an integer") -> int:
        """The value of an integer token (decimal or 0x hex); TextSyntaxError when it is not one."""
        try:
            return int(token.text, 0)
        except ValueError:
            raise self.error(f"expected {what}, found '{shorten(token.text)}'", token.pos) from None

    def _expect_failed(self, token: Token, text: str, what: str | None):
        found = shorten(token.text) or "end of input"
        # MLIR reports a missing token that the next line does not hold where the line
        # before ends (after the last token read)
        start = self.text.rfind("\n", 0, token.pos) + 1
        pos = self.end if 0 < self.end <= start and not self.text[start:token.pos].strip() \
            else token.pos
        raise self.error(f"expected '{text}'{' ' + what if what else ''}, found '{found}'", pos)

    def _expect_kind_failed(self, token: Token, kind: str, what: str):
        raise self.error(f"expected {what}, found '{shorten(token.text) or 'end of input'}'")

    # ---- raw characters (types) ------------------------------------------------------------------

    def match_text(self, text: str) -> bool:
        """match_raw of a literal `text`."""
        self.skip_space()
        self._peeked = None
        if self.text.startswith(text, self.pos):
            self.pos = self.end = self.pos + len(text)
            return True
        return False

    def match_raw(self, pattern: re.Pattern):
        self.skip_space()
        self._peeked = None
        match = pattern.match(self.text, self.pos)
        if match:
            self.pos = self.end = match.end()
        return match


class PyCursor(_CursorCommon, _PyTokenMethods):
    """The Cursor in pure Python (TILEBC_PURE=1, or the compiled helpers not built)."""

    _token = PyToken  # every token it reads of one class


if _CompiledCursorBase is not None:
    class Cursor(_CursorCommon, _CompiledCursorBase):
        """A position-based scanner over Tile IR text (its token-level methods compiled)."""

        _token = Token  # the compiled methods take only these
else:
    Cursor = PyCursor


def nesting(what: str):
    """Decorator for a recursive parse method of an object with a Cursor `c`: refuses input that
    nests deeper than MAX_NESTING with a TextSyntaxError instead of a RecursionError. Each `what`
    (regions, attribute values, dictionaries, locations) has its own count, as the binary reader
    bounds regions in regions and attributes in attributes apart (DecodeLimits.max_nesting): the
    text of every module the reader accepts parses back, an op's location deep inside nested
    regions included."""
    family = what

    def wrap(method):
        @functools.wraps(method)
        def guarded(self, *args, **kwargs):
            cursor = self.c
            depths = cursor.depths
            depth = depths.get(family, 0)
            if depth >= MAX_NESTING:
                raise cursor.error(f"{what} nested more than {MAX_NESTING} levels deep")
            depths[family] = depth + 1
            cursor.depth += 1
            try:
                return method(self, *args, **kwargs)
            finally:
                depths[family] = depth
                cursor.depth -= 1
        return guarded
    return wrap


def shorten(text: str, limit: int = 60) -> str:
    """Text quoted in a message, cut to `limit` characters."""
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} characters)"


class _EscapeBytes(dict):
    """The text after a backslash (a checked escape, or a run of \\XX escapes) -> its bytes: one
    escape is looked up, a run is decoded by one fromhex() call."""

    def __missing__(self, run: bytes) -> bytes:
        return bytes.fromhex(run.replace(b"\\", b"").decode("ascii"))


_ESCAPE_BYTES = _EscapeBytes({b"n": b"\n", b"t": b"\t", b'"': b'"', b"\\": b"\\"})
_ESCAPE_BYTES.update((f"{a}{b}".encode(), bytes([int(a + b, 16)]))
                     for a in "0123456789abcdefABCDEF" for b in "0123456789abcdefABCDEF")
_ESCAPE_SPLIT = re.compile(rb"\\([0-9A-Fa-f]{2}(?:\\[0-9A-Fa-f]{2})" + _ONCE.encode() + rb"|.)",
                           re.DOTALL)


def unescape(token_text: str) -> str:
    """The value of a quoted string token (MLIR escapes: \\XX hex bytes, \\n, \\t, \\", \\\\).
    Works on whole runs (split, map, join) so a long string costs no Python step per character."""
    data = token_text[1:-1].encode("utf-8", "surrogateescape")
    if b"\\" in data:
        pieces = _ESCAPE_SPLIT.split(data)  # literal, escape(s), literal, ..., literal
        pieces[1::2] = map(_ESCAPE_BYTES.__getitem__, pieces[1::2])
        data = b"".join(pieces)
    return data.decode("utf-8", "surrogateescape")  # \XX bytes that are not UTF-8 stay raw bytes
