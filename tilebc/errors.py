"""One exception per phase; every error can carry a location (file + byte offset or line:col)."""
from __future__ import annotations

from typing import Optional


class TilebcError(Exception):
    """Base class of every error tilebc raises on purpose.

    `category` sorts rejections as WebAssembly's spec tests do: "malformed" (the bytes or text do not
    decode or parse at all), "invalid" (they do, but break a typing or well-formedness rule), None
    for everything else (I/O, unsupported requests). `message` is stable text without the location.
    """

    category = None

    def __init__(self, message: str, *, file: Optional[str] = None,
                 offset: Optional[int] = None, line: Optional[int] = None,
                 column: Optional[int] = None):
        super().__init__(message)
        self.message = message
        self.file = file
        self.offset = offset
        self.line = line
        self.column = column

    def where(self) -> str:
        """'file:0x1a3' or 'file:12:5' (file defaults to '<bytes>' / '<text>')."""
        if self.offset is not None:
            return f"{self.file or '<bytes>'}: offset 0x{self.offset:x}"
        if self.line is not None:
            return f"{self.file or '<text>'}:{self.line}:{self.column or 1}"
        return self.file or ""

    def __str__(self) -> str:
        where = self.where()
        return f"{where}: {self.message}" if where else self.message


class VersionError(TilebcError):
    """A version outside the supported range, or a feature the target version lacks."""


class DecodeError(TilebcError):
    """Malformed bytecode: will not decode."""

    category = "malformed"


class EncodeError(TilebcError):
    """The module cannot be written (for this version)."""


class TextSyntaxError(TilebcError):
    """Malformed text: will not parse."""

    category = "malformed"


class VerificationError(TilebcError):
    """Decodes or parses, but breaks a typing or well-formedness rule."""

    category = "invalid"


class UsageError(TilebcError):
    """Bad command-line use: an option the input rules out, binary output to a terminal, an
    input that would be overwritten. Command lines exit with status 2 on it, not 1."""
