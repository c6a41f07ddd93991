"""One exception per phase, all under TilebcError; every error can carry a Location (file + byte
offset or line:col)."""
from __future__ import annotations


from .record import Record


class Location(Record):
    """Where in the input something was found: a file and either a byte offset (bytecode) or
    line:col (text). Every error, diagnostic and decode warning formats its place with `str()` of
    one of these. (Not the debug-info location an op carries: that is tilebc.ir.location.)"""

    _fields = ("file", "offset", "line", "column")

    def __init__(self, file: str | None = None, offset: int | None = None,
                 line: int | None = None, column: int | None = None):
        _set = object.__setattr__
        _set(self, "file", file)
        _set(self, "offset", offset)
        _set(self, "line", line)
        _set(self, "column", column)

    @classmethod
    def of(cls, node, file: str | None = None) -> Location:
        """The place of an Op, Function or Global: its byte offset if it was decoded, else its
        line:col if it was parsed, else just the file."""
        offset = getattr(node, "offset", None)
        if offset is not None:
            return cls(file, offset)
        position = getattr(node, "text_pos", None)
        if position is not None:
            return cls(file, None, position[0], position[1])
        return cls(file)

    def in_file(self, file: str | None) -> Location:
        """This location, naming `file` if it named none."""
        return self if self.file is not None or file is None else self.replace(file=file)

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.file, self.offset, self.line))

    @property
    def place(self) -> str:
        """The place without the file: 'offset 0x1a3', '12:5' or ''."""
        if self.offset is not None:
            return f"offset 0x{self.offset:x}"
        if self.line is not None:
            return f"{self.line}:{self.column or 1}"
        return ""

    def __str__(self) -> str:
        """'file: offset 0x1a3' or 'file:12:5' (file defaults to '<bytes>' / '<text>')."""
        if self.offset is not None:
            return f"{self.file or '<bytes>'}: {self.place}"
        if self.line is not None:
            return f"{self.file or '<text>'}:{self.place}"
        return self.file or ""


def _location_field(name: str) -> property:
    def get(self):
        return getattr(self.location, name)

    def set(self, value):
        self.location = self.location.replace(**{name: value})
    return property(get, set, doc=f"`location.{name}` (settable)")


class TilebcError(Exception):
    """Base class of every error tilebc raises on purpose.

    `category` sorts rejections as WebAssembly's spec tests do: "malformed" (the bytes or text do not
    decode or parse at all), "invalid" (they do, but break a typing or well-formedness rule), None
    for everything else (I/O, unsupported requests). `message` is stable text without the location.
    """

    category = None

    def __init__(self, message: str, *, file: str | None = None,
                 offset: int | None = None, line: int | None = None,
                 column: int | None = None, location: Location | None = None):
        super().__init__(message)
        self.message = message
        self.location = location if location is not None else Location(file, offset, line, column)

    file = _location_field("file")
    offset = _location_field("offset")
    line = _location_field("line")
    column = _location_field("column")

    def where(self) -> str:
        return str(self.location)

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
