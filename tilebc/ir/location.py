"""Debug locations (the debug section's attributes). None stands for `loc(unknown)`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union


@dataclass(frozen=True)
class DIFile:
    name: str
    directory: str


@dataclass(frozen=True)
class DICompileUnit:
    file: DIFile


@dataclass(frozen=True)
class DISubprogram:
    file: DIFile
    line: int
    name: str
    linkage_name: str
    compile_unit: DICompileUnit
    scope_line: int
    flags: int = 0  # stored from 13.5 on


@dataclass(frozen=True)
class DILexicalBlock:
    scope: "DIScope"
    file: DIFile
    line: int
    column: int


DIScope = Union[DISubprogram, DILexicalBlock]


@dataclass(frozen=True)
class DILoc:
    scope: DIScope
    filename: str
    line: int
    column: int


@dataclass(frozen=True)
class CallSiteLoc:
    callee: "Location"
    caller: "Location"


@dataclass(frozen=True)
class UnknownDebugAttr:
    """The explicit `unknown` debug attribute (tag 0) some writers put in the table."""


Location = Optional[Union[DILoc, CallSiteLoc]]
DebugAttr = Union[DIFile, DICompileUnit, DISubprogram, DILexicalBlock, DILoc, CallSiteLoc,
                  UnknownDebugAttr]
