"""The front door: load/dump with the verifier on by default (opt out with `verify=False`)."""
from __future__ import annotations

import io
import os

from .binary import reader
from .binary.limits import DEFAULT_LIMITS, DecodeLimits
from .errors import TilebcError
from .ir.module import Module

Source = bytes | bytearray | memoryview | str | os.PathLike | io.BufferedIOBase


def load(source: Source, *, verify: bool = True, limits: DecodeLimits | None = None,
         lazy_debug: bool = True, strict: bool = False) -> Module:
    """Decode bytecode (bytes, a path, or a file object opened in binary mode) into a Module,
    then verify it.

    Raises DecodeError for bytes that do not decode (malformed) and VerificationError for IR that
    decodes but breaks a typing or well-formedness rule (invalid); both carry the file and offset.
    `verify=False` skips the second step (faster, for trusted input). `limits` bounds what a hostile
    file can make the decoder allocate; `lazy_debug=False` decodes debug locations up front, so a broken
    debug section fails here rather than on the first `op.loc` read.

    Bytes that break the format in ways NVIDIA's reader accepts (format_spec.md §16) are read as
    tileirdisasm reads them, each recorded on `module.decode_warnings` (DecodeWarning, category
    "lenient"); `strict=True` refuses them with a DecodeError instead (a lint for producers).

    The module keeps the file's layout (`module.layout`: table and section order, unused entries),
    so `dump` at the file's version gives its bytes back until an edit changes what the tables
    must hold (format_spec.md §4.1).
    """
    source, name = _read_file_object(source, limits or DEFAULT_LIMITS)
    try:
        module = reader.load(source, limits=limits, lazy_debug=lazy_debug, strict=strict)
    except TilebcError as error:
        file = error.file or name
        if file is not error.file:  # the setter copies the whole location
            error.file = file
        raise
    module.source = module.source or name
    if verify:
        from .verify import verify as check
        check(module)
    return module


def _read_file_object(source, limits: DecodeLimits):
    """(what the reader takes, the file's name for messages): a file object is read here, at most
    one byte past `limits.max_input_bytes`, so the reader refuses an oversized stream by size."""
    if isinstance(source, (bytes, bytearray, memoryview, str, os.PathLike)):
        return source, None
    if not callable(getattr(source, "read", None)):
        raise TypeError("tilebc.load takes bytes, a path or a binary file object, not "
                        f"{type(source).__name__}")
    data = source.read(limits.max_input_bytes + 1)
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError("tilebc.load needs a file opened in binary mode ('rb'); read() gave "
                        f"{type(data).__name__}")
    name = getattr(source, "name", None)
    return bytes(data), name if isinstance(name, str) else None
