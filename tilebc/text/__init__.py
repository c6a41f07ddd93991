"""Text form of Tile IR: the printer (tileirdisasm-compatible) and the parser/assembler."""
from __future__ import annotations

from ..binary import dump
from ..version import VersionLike
from .parser import parse_module  # noqa: F401
from .printer import print_module  # noqa: F401


def assemble(text: str, version: VersionLike, filename: str = "<text>") -> bytes:
    """Tile IR text → bytecode for `version` (parse, then `tilebc.dump`)."""
    return dump(parse_module(text, filename), version)
