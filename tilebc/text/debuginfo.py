"""Location aliases (`#loc3 = …`) for `-g` output, numbered the way MLIR's AliasInitializer does.

Locations and debug-info attributes are collected in print order (an op's location before the ops
nested in it; an attribute before the attributes it refers to), then stably sorted by alias depth
(0 for attributes that refer to no aliased attribute, else one more than the deepest they refer to)
and by alias name; each name is numbered in that order (`#loc`, `#loc1`, …).
"""
from __future__ import annotations


from functools import lru_cache

from .. import speedups
from ..errors import TilebcError
from ..ir import location as L
from .values import escape_string

_escaped = lru_cache(maxsize=1 << 12)(escape_string)  # a module's locations share a few files

UNKNOWN = ("unknown",)
# DISubprogram flag bits by their text keyword (`flags = declaration`, 13.5 on).
SUBPROGRAM_FLAGS = {"declaration": 0x1}


def subprogram_flags_text(flags: int) -> str:
    words = [word for word, bit in SUBPROGRAM_FLAGS.items() if flags & bit]
    unknown = flags & ~sum(SUBPROGRAM_FLAGS.values())
    if unknown or not words:
        raise TilebcError(f"DISubprogram flags 0x{flags:x} have no text form; only bit 0 "
                          f"(declaration) exists")
    return " | ".join(words)


def _file_loc(loc: L.DILoc):
    return ("file", loc.filename, loc.line, loc.column)


def _children(node) -> list[object]:
    if node.__class__ is L.DILoc:  # most nodes (the record classes have no subclasses)
        return [_file_loc(node), node.scope]
    if isinstance(node, L.CallSiteLoc):
        return [_normal(node.callee), _normal(node.caller)]
    if isinstance(node, L.DISubprogram):
        return [node.file, node.compile_unit]
    if isinstance(node, L.DICompileUnit):
        return [node.file]
    if isinstance(node, L.DILexicalBlock):
        return [node.scope, node.file]
    return []


def _normal(loc):
    if loc is None or isinstance(loc, L.UnknownDebugAttr):
        return UNKNOWN
    return loc


# what alias_visit tells apart, in its order
_KINDS = (L.DILoc, L.CallSiteLoc, L.DISubprogram, L.DICompileUnit, L.DILexicalBlock,
          L.UnknownDebugAttr)

_ALIAS_NAMES = {L.DIFile: "di_file", L.DICompileUnit: "di_compile_unit",
                L.DISubprogram: "di_subprogram", L.DILexicalBlock: "di_lexical_block"}


def _alias_name(node) -> str:
    return _ALIAS_NAMES.get(node.__class__, "loc")


class LocationAliases:
    """Collects locations with `visit`, then names them (`finish`) and prints definitions."""

    def __init__(self):
        # each node (normalised) in print order, pre-order, with its alias depth (None while its
        # children are visited): the order sorting keeps for equal depths and names
        self._depth: dict[object, int | None] = {}
        self.names: dict[object, str] = {}
        # id(loc) -> (loc, its `loc(#…)` text, or None before `finish`): a module shares its
        # location objects, so most are found by identity without hashing their trees
        self._known: dict[int, tuple] = {}

    def visit(self, loc) -> None:
        known = self._known.get(id(loc))
        if known is not None and known[0] is loc:
            return
        self._known[id(loc)] = (loc, None)
        if speedups.alias_visit is not None:  # _visit in C (tilebc/_printer.c)
            speedups.alias_visit(self._depth, _normal(loc), UNKNOWN, *_KINDS)
        else:
            self._visit(_normal(loc))

    def visit_distinct(self, locations: list) -> None:
        """visit() of each of `locations` without keeping them by identity (a location met twice
        is found by value): for a caller that asks refs(), not ref(), of locations that are
        mostly distinct objects (tilebc/alias_aside.py)."""
        if speedups.alias_visit_all is not None:
            speedups.alias_visit_all(locations, self._depth, UNKNOWN, *_KINDS)
        else:
            visit = self._visit
            for loc in locations:
                visit(_normal(loc))

    def refs(self, locations: list) -> list[str]:
        """[ref(loc) for loc in locations], after finish."""
        names, named = self.names, self.names.get
        # most are nodes themselves (normal): named without _normal
        return ["loc(" + (named(loc) or names[_normal(loc)]) + ")" for loc in locations]

    def visit_ops_in_c(self, ops) -> None:
        """visit(op.loc) for `ops` and the ops nested in them, in pre-order, by
        tilebc._speedups.visit_locations (the visits themselves in C where alias_visit is)."""
        if speedups.alias_visit is not None:
            speedups.visit_locations(ops, self, self._depth, UNKNOWN, *_KINDS)
        else:
            speedups.visit_locations(ops, self)

    def _visit(self, node) -> int:
        """Records `node` (normalised) and what it refers to, in pre-order; its alias depth."""
        depths = self._depth
        depth = depths.get(node, -1)
        if depth != -1:  # debug attributes form a DAG: a node is never met inside itself
            return depth
        depths[node] = None
        depth = 0
        for child in _children(node):
            depth = max(depth, self._visit(child) + 1)
        depths[node] = depth
        return depth

    def finish(self) -> None:
        # by depth, then alias name, print order kept among equals: nodes are grouped by (depth,
        # name) in print order and the few groups sorted, rather than every node
        groups: dict[tuple, list] = {}
        alias_names = _ALIAS_NAMES.get
        for node, depth in self._depth.items():
            key = (depth, alias_names(node.__class__, "loc"))
            group = groups.get(key)
            if group is None:
                groups[key] = [node]
            else:
                group.append(node)
        counts: dict[str, int] = {}
        ordered, ordered_names = [], []
        for key in sorted(groups):
            base = key[1]
            group = groups[key]
            count = counts.get(base, 0)
            counts[base] = count + len(group)
            head = "#" + base
            ordered_names += [head + str(number) if number else head
                              for number in range(count, count + len(group))]
            ordered += group
        self.names.update(zip(ordered, ordered_names))
        self._sorted = ordered
        self._sorted_names = ordered_names  # the name of each node of _sorted

    def ref(self, loc) -> str:
        known = self._known.get(id(loc))
        if known is not None and known[0] is loc and known[1] is not None:
            return known[1]
        text = f"loc({self.names[_normal(loc)]})"
        self._known[id(loc)] = (loc, text)
        return text

    def definitions_text(self) -> str:
        """The definitions, each line ended by a newline, in one str."""
        if speedups.alias_definitions_text is not None:  # in C (tilebc/_printer.c)
            return speedups.alias_definitions_text(self._sorted, self._sorted_names, self.names,
                                                   self._define, L.DILoc, _escaped)
        return "".join(line + "\n" for line in self.definitions())

    def definitions(self) -> list[str]:
        """Each node's `alias = text` line (definitions_text does it in C where it can)."""
        define = self._define
        scope_names: dict[int, str] = {}  # id(scope) -> its alias: a module's DILocs share few
        lines = []
        di_loc, names_get, append = L.DILoc, self.names.get, lines.append
        for node, name in zip(self._sorted, self._sorted_names):
            if node.__class__ is di_loc:  # most nodes: their scope's alias found by identity
                scope = node.scope  # kept alive by the node
                scope_name = scope_names.get(id(scope))
                if scope_name is None:
                    scope_name = scope_names[id(scope)] = names_get(scope)
                append(f"{name} = {self._di_loc(node, scope_name)}")
            else:
                append(f"{name} = {define(node)}")
        return lines

    def _di_loc(self, node, scope_name) -> str:
        return f"#cuda_tile.di_loc<{self.names.get(_file_loc(node))} in {scope_name}>"

    def _define(self, node) -> str:
        name = self.names.get
        kind = node.__class__
        if kind is tuple:  # most nodes: a DILoc's file location, or UNKNOWN
            if node == UNKNOWN:
                return "loc(unknown)"
            _, filename, line, column = node
            return f"loc({_escaped(filename)}:{line}:{column})"
        if kind is L.DILoc:  # the other most
            return self._di_loc(node, name(node.scope))
        if isinstance(node, L.DIFile):
            return f"#cuda_tile.di_file<{escape_string(node.name)} in {escape_string(node.directory)}>"
        if isinstance(node, L.DICompileUnit):
            return f"#cuda_tile.di_compile_unit<file = {name(node.file)}>"
        if isinstance(node, L.DISubprogram):
            text = (f"#cuda_tile.di_subprogram<file = {name(node.file)}, line = {node.line}, "
                    f"name = {escape_string(node.name)}, "
                    f"linkageName = {escape_string(node.linkage_name)}, "
                    f"compileUnit = {name(node.compile_unit)}")
            if node.scope_line:
                text += f", scopeLine = {node.scope_line}"
            if node.flags:
                text += f", flags = {subprogram_flags_text(node.flags)}"
            return text + ">"
        if isinstance(node, L.DILexicalBlock):
            text = (f"#cuda_tile.di_lexical_block<scope = {name(node.scope)}, "
                    f"file = {name(node.file)}, line = {node.line}")
            if node.column:
                text += f", column = {node.column}"
            return text + ">"
        if isinstance(node, L.CallSiteLoc):
            return (f"loc(callsite({name(_normal(node.callee))} at "
                    f"{name(_normal(node.caller))}))")
        raise TypeError(f"cannot print debug attribute {node!r}")


class _Inline(dict):
    """Names every attribute by its full text, so that `_define` writes it without aliases."""

    def __init__(self, printer: LocationAliases):
        super().__init__()
        self.printer = printer

    def get(self, node, default=None):
        return self.printer._define(_normal(node))


def attribute_text(node) -> str:
    """A location or debug attribute in full, as MLIR writes one into a diagnostic (no aliases):
    `#cuda_tile.di_lexical_block<scope = #cuda_tile.di_subprogram<…>, …>`."""
    printer = LocationAliases()
    printer.names = _Inline(printer)
    try:
        return printer._define(_normal(node))
    except TilebcError:  # subprogram flags with no text form (reported on their own)
        return repr(node)
