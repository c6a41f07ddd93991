"""Debug locations (the debug section's attributes). None stands for `loc(unknown)`.

Call sites and lexical blocks refer to other entries of the debug table, which may be shared
(`callsite(#loc1 at #loc1)`): hashes are cached and equality visits each shared entry once
(tilebc/ir/shared.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from .shared import cached_hash, shared_node


@cached_hash
@dataclass(frozen=True)
class DIFile:
    name: str
    directory: str


@cached_hash
@dataclass(frozen=True)
class DICompileUnit:
    file: DIFile


@cached_hash
@dataclass(frozen=True)
class DISubprogram:
    file: DIFile
    line: int
    name: str
    linkage_name: str
    compile_unit: DICompileUnit
    scope_line: int
    flags: int = 0  # stored from 13.5 on


@shared_node
@dataclass(frozen=True)
class DILexicalBlock:
    scope: "DIScope"
    file: DIFile
    line: int
    column: int


DIScope = Union[DISubprogram, DILexicalBlock]


@cached_hash
@dataclass(frozen=True)
class DILoc:
    scope: DIScope
    filename: str
    line: int
    column: int


@shared_node
@dataclass(frozen=True)
class CallSiteLoc:
    callee: "Location"
    caller: "Location"


@cached_hash
@dataclass(frozen=True)
class UnknownDebugAttr:
    """The explicit `unknown` debug attribute (tag 0) some writers put in the table."""


Location = Optional[Union[DILoc, CallSiteLoc]]
DebugAttr = Union[DIFile, DICompileUnit, DISubprogram, DILexicalBlock, DILoc, CallSiteLoc,
                  UnknownDebugAttr]
