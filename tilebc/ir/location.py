"""Debug locations (the debug section's attributes). None stands for `loc(unknown)`.

Call sites and lexical blocks refer to other entries of the debug table, which may be shared
(`callsite(#loc1 at #loc1)`): hashes are cached and equality visits each shared entry once
(tilebc/ir/shared.py). They are frozen records (tilebc/record.py): `replace` makes a changed
copy."""
from __future__ import annotations


from ..record import Record
from .shared import cached_hash, shared_node


@cached_hash
class DIFile(Record):
    _fields = ("name", "directory")

    def __init__(self, name: str, directory: str):
        _set = object.__setattr__
        _set(self, "name", name)
        _set(self, "directory", directory)


@cached_hash
class DICompileUnit(Record):
    _fields = ("file",)

    def __init__(self, file: DIFile):
        _set = object.__setattr__
        _set(self, "file", file)


@cached_hash
class DISubprogram(Record):
    _fields = ("file", "line", "name", "linkage_name", "compile_unit", "scope_line", "flags")

    # flags: stored from 13.5 on
    def __init__(self, file: DIFile, line: int, name: str, linkage_name: str,
                 compile_unit: DICompileUnit, scope_line: int, flags: int = 0):
        _set = object.__setattr__
        _set(self, "file", file)
        _set(self, "line", line)
        _set(self, "name", name)
        _set(self, "linkage_name", linkage_name)
        _set(self, "compile_unit", compile_unit)
        _set(self, "scope_line", scope_line)
        _set(self, "flags", flags)


@shared_node
class DILexicalBlock(Record):
    _fields = ("scope", "file", "line", "column")

    def __init__(self, scope: DIScope, file: DIFile, line: int, column: int):
        _set = object.__setattr__
        _set(self, "scope", scope)
        _set(self, "file", file)
        _set(self, "line", line)
        _set(self, "column", column)


DIScope = DISubprogram | DILexicalBlock


@cached_hash
class DILoc(Record):
    _fields = ("scope", "filename", "line", "column")

    def __init__(self, scope: DIScope, filename: str, line: int, column: int):
        _set = object.__setattr__
        _set(self, "scope", scope)
        _set(self, "filename", filename)
        _set(self, "line", line)
        _set(self, "column", column)


@shared_node
class CallSiteLoc(Record):
    _fields = ("callee", "caller")

    def __init__(self, callee: Location, caller: Location):
        _set = object.__setattr__
        _set(self, "callee", callee)
        _set(self, "caller", caller)


@cached_hash
class UnknownDebugAttr(Record):
    """The explicit `unknown` debug attribute (tag 0) some writers put in the table."""

    _fields = ()


Location = DILoc | CallSiteLoc | None
DebugAttr = (DIFile | DICompileUnit | DISubprogram | DILexicalBlock | DILoc | CallSiteLoc
             | UnknownDebugAttr)
