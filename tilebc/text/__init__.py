"""Text form of Tile IR: the printer (tileirdisasm-compatible) and the parser/assembler."""
from __future__ import annotations

from ..binary import dump
from ..version import VersionLike
from .parser import parse_module  # noqa: F401
from .printer import print_module  # noqa: F401


def assemble(text: str, version: VersionLike, filename: str = "<text>", *,
             verify: bool = True) -> bytes:
    """Tile IR text → bytecode for `version`: parse, verify (VerificationError with `line:col`;
    `verify=False` skips it), then `tilebc.dump`."""
    module = parse_module(text, filename)
    if verify:
        from ..verify import verify as check
        check(module)
    return dump(module, version)
