"""Reading a command's input: a path or `-` (stdin), bytecode recognised by its magic, errors that
name the file. Shared by every command line built on tilebc (`tilebc dis/verify/run`, and the
runtime's `tilebc compile`), below all of them in the import graph."""
from __future__ import annotations

import sys

from .errors import DecodeError, TilebcError

MAGIC = b"\x7fTileIR\x00"


def read_input(path: str) -> bytes:
    """The bytes of `path`, or of stdin for `-`."""
    if path == "-":
        return sys.stdin.buffer.read()
    with open(path, "rb") as stream:
        return stream.read()


def display_name(path: str) -> str:
    """How messages name an input: the path, or `<stdin>`."""
    return "<stdin>" if path == "-" else path


def decode_bytes(data: bytes, name: str, strict: bool = False, lazy_debug: bool = True):
    """Bytecode -> Module (unverified); an empty file or a text file gets a message saying so.
    `lazy_debug=False`: debug locations decoded now, their errors raised here (naming the file)."""
    from .api import load
    if not data:
        raise DecodeError(f"the input is empty; expected Tile IR bytecode (magic {MAGIC.hex(' ')})",
                          file=name, offset=0)
    try:
        module = load(data, verify=False, strict=strict, lazy_debug=lazy_debug)
    except DecodeError as error:
        error.file = error.file or name
        if error.offset == 0 and not data.startswith(MAGIC[:1]) and looks_like_text(data):
            error.message += "; this looks like text (`tilebc asm` assembles the Tile IR text form)"
            error.args = (error.message,)
        raise
    module.source = name
    return module


def looks_like_text(data: bytes) -> bool:
    """Whether the first 4 KiB of `data` decode as UTF-8."""
    try:
        data[:4096].decode("utf-8")
    except UnicodeDecodeError as error:
        return error.start > 4090  # a character cut at the end of the sample
    return True


def verify_module(module, entries: range | None = None) -> None:
    """Run the verifier (on the entries at positions `entries` only, with the module-level
    rules); its error names the module's file when it has none of its own."""
    from .verify import verify
    try:
        verify(module, entries)
    except TilebcError as error:
        error.file = error.file or module.source
        raise
