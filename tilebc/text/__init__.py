"""Text form of Tile IR: the printer (tileirdisasm-compatible) and the parser/assembler.

`print_module` and `parse_module` load their modules on first use, so printing (`tilebc dis`)
never imports the parser, nor parsing the printer."""
from __future__ import annotations

from ..version import VersionLike

__all__ = ["assemble", "parse_module", "print_module"]


def __getattr__(name):
    if name == "parse_module":
        from .parser import parse_module
        return parse_module
    if name == "print_module":
        from .printer import print_module
        return print_module
    raise AttributeError(f"module 'tilebc.text' has no attribute {name!r}")


def assemble(text: str, version: VersionLike, filename: str = "<text>", *,
             verify: bool = True) -> bytes:
    """Tile IR text → bytecode for `version`: parse, verify (VerificationError with `line:col`;
    `verify=False` skips it), then `tilebc.dump`."""
    from ..binary import dump
    from .parser import parse_module
    module = parse_module(text, filename)
    if verify:
        from ..verify import verify as check
        check(module)
    return dump(module, version)
