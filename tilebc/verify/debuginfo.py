"""Debug-info rules: how an entry's location and its ops' locations must agree.

NVIDIA's verifier (run by tileiras on every load, with or without -g) refuses a kernel whose
debug info breaks one of these rules; the facts come from the public cuda-tile sources and were
confirmed against tileiras 13.5 (tests/test_verify_oracle.py):

* an entry's location is never a call site;
* when it is a `loc`, its scope is a DISubprogram (not a lexical block) whose linkage name is the
  entry's name (the subprogram's plain `name` is free: cuTile writes the Python function name);
* an op location's subprogram (a `loc`'s scope, through any lexical blocks; for a call site, its
  caller's) is the entry's subprogram, and an op has none when the entry has none;
* a DISubprogram's flags are bit 0 (`declaration`) only, and only from 13.5 (NVIDIA's reader
  refuses other bits).

tilebc is stricter in one respect: line, column and scopeLine numbers must fit 32 bits. NVIDIA
reads them as 32-bit unsigned numbers, silently keeping the low bits, so a larger number would
mean a different location to NVIDIA than to us (and print differently).
"""
from __future__ import annotations


from ..ir.location import CallSiteLoc, DILexicalBlock, DILoc, DISubprogram
from ..ir.module import Function
from ..version import Version
from .diagnostics import Collector

DISUBPROGRAM_FLAGS_SINCE = Version(13, 5)
KNOWN_SUBPROGRAM_FLAGS = 0x1  # declaration
LINE_LIMIT = 1 << 32


# The text printer spells NVIDIA's messages; it is loaded only when a message is written, so the
# JIT (which verifies what it lowers) does not load the text package.
def attribute_text(attribute) -> str:
    from ..text.debuginfo import attribute_text as spell
    return spell(attribute)


def escape_string(text: str) -> str:
    from ..text.values import escape_string as escape
    return escape(text)


def _di_loc(loc) -> DILoc | None:
    """The `loc` that places `loc` in a scope: itself, or a call site's caller (inlined code is
    scoped where it was called)."""
    while isinstance(loc, CallSiteLoc):
        loc = loc.caller
    return loc if isinstance(loc, DILoc) else None


def _line_problem(loc: DILoc) -> tuple:
    return ("debug.line_range", f"location {loc.filename}:{loc.line}:{loc.column} has a line or "
                                f"column beyond 32 bits (NVIDIA keeps only the low 32 bits)")


def _describe(sub: DISubprogram) -> str:
    return (f"subprogram {sub.name!r} (linkage name {sub.linkage_name!r}, "
            f"{sub.file.name}:{sub.line})")


class DebugInfoChecker:
    """Checks one entry at a time. Locations are shared objects (one per debug-table entry), so
    each is resolved once per verifier run."""

    def __init__(self, ctx: Collector, version: Version):
        self.ctx = ctx
        self.version = version
        # id(loc) -> (loc, subprogram, problem); id(scope) -> (scope, subprogram, problem). The
        # objects ride along so that their ids stay theirs while the checker lives.
        self.resolved: dict[int, tuple] = {}
        self.scopes: dict[int, tuple] = {}
        self.call_sites: dict[int, tuple] = {}  # id(call site) -> (call site, problem)

    def resolve(self, loc) -> tuple:
        """(loc, its subprogram or None, (rule, message) of a bad number or flag in it or None),
        worked out once per location object."""
        found = self.resolved.get(id(loc))
        if found is None:
            if loc.__class__ is DILoc:  # the common case, written out
                scope = loc.scope
                _, sub, problem = self.scopes.get(id(scope)) or self.scope(scope)
                if problem is None and (loc.line >= LINE_LIMIT or loc.column >= LINE_LIMIT):
                    problem = _line_problem(loc)
            else:
                di_loc = _di_loc(loc)
                sub = self.scope(di_loc.scope)[1] if di_loc is not None else None
                problem = self.field_problem(loc)
            found = self.resolved[id(loc)] = (loc, sub, problem)
        return found

    def scope(self, scope) -> tuple:
        """(scope, its subprogram or None, problem or None) of a DISubprogram / DILexicalBlock."""
        found = self.scopes.get(id(scope))
        if found is None:
            if isinstance(scope, DILexicalBlock):
                _, sub, problem = self.scope(scope.scope)
                if scope.line >= LINE_LIMIT or scope.column >= LINE_LIMIT:
                    problem = ("debug.line_range", f"lexical block at {scope.file.name}:"
                               f"{scope.line}:{scope.column} has a line or column beyond 32 "
                               f"bits (NVIDIA keeps only the low 32 bits)")
            elif isinstance(scope, DISubprogram):
                sub, problem = scope, self._subprogram_problem(scope)
            else:
                sub = problem = None
            found = self.scopes[id(scope)] = (scope, sub, problem)
        return found

    # ---- the numbers and flags inside locations ------------------------------------------------

    def field_problem(self, loc) -> tuple | None:
        """(rule, message) for the first out-of-range number or bad flag in `loc`, else None.
        Call sites may share their parts (`callsite(#loc1 at #loc1)`), so each is checked once."""
        if isinstance(loc, CallSiteLoc):
            found = self.call_sites.get(id(loc))
            if found is None:
                problem = self.field_problem(loc.callee) or self.field_problem(loc.caller)
                found = self.call_sites[id(loc)] = (loc, problem)
            return found[1]
        if not isinstance(loc, DILoc):
            return None
        if loc.line >= LINE_LIMIT or loc.column >= LINE_LIMIT:
            return _line_problem(loc)
        return self.scope(loc.scope)[2]

    def _subprogram_problem(self, sub: DISubprogram) -> tuple | None:
        if sub.line >= LINE_LIMIT or sub.scope_line >= LINE_LIMIT:
            return ("debug.line_range", f"{_describe(sub)} has a line or scopeLine beyond 32 "
                    f"bits (NVIDIA keeps only the low 32 bits)")
        if sub.flags & ~KNOWN_SUBPROGRAM_FLAGS:
            return ("debug.subprogram_flags", f"{_describe(sub)} has unknown flag bits "
                    f"0x{sub.flags & ~KNOWN_SUBPROGRAM_FLAGS:x}; only bit 0 (declaration) exists")
        if sub.flags and self.version < DISUBPROGRAM_FLAGS_SINCE:
            return ("debug.subprogram_flags", f"{_describe(sub)} has flags (declaration), which "
                    f"bytecode {self.version} cannot hold; they need {DISUBPROGRAM_FLAGS_SINCE}")
        return None

    def check_fields(self, node, loc) -> bool:
        problem = self.field_problem(loc)
        if problem is not None:
            self.ctx.report(problem[0], node, problem[1])
            return False
        return True

    def entry(self, function: Function):
        """Check the entry's own location. Returns its subprogram, None when it has none (then
        its ops must have none either), or False once a problem is reported (ops go unchecked)."""
        ctx, loc = self.ctx, function.loc
        if not self.check_fields(function, loc):
            return False
        # NVIDIA's words first (its DebugInfoVerifier), ours after them in parentheses
        if isinstance(loc, CallSiteLoc):
            ctx.report("debug.entry_loc", function, f"'cuda_tile.entry' op invalid function debug "
                       f"info location: {attribute_text(loc)}. Function location must not be a "
                       f"CallSiteLoc. (an entry's location must not be a call site; expected a "
                       f"loc in its subprogram)")
            return False
        if not isinstance(loc, DILoc):
            return None
        if not isinstance(loc.scope, DISubprogram):
            ctx.report("debug.entry_scope", function, f"'cuda_tile.entry' op invalid function "
                       f"debug info scope: {attribute_text(loc.scope)}. Function location must "
                       f"have cuda_tile.di_subprogram debug info scope. (an entry's location "
                       f"must be scoped by a subprogram, got a {type(loc.scope).__name__})")
            return False
        if loc.scope.linkage_name != function.name:
            ctx.report("debug.linkage_name", function, f"'cuda_tile.entry' op invalid function "
                       f"debug info scope: {attribute_text(loc.scope)}. Function name "
                       f"\"{function.name}\" does not match subprogram scope linkage name "
                       f"{escape_string(loc.scope.linkage_name)}. ({_describe(loc.scope)} does "
                       f"not match the entry name @{function.name})")
            return False
        return loc.scope

    def op(self, op, entry_subprogram: DISubprogram | None, loc=None) -> None:
        if loc is None:
            loc = op.loc
        _, sub, problem = self.resolve(loc)
        if problem is not None:
            self.ctx.report(problem[0], op, problem[1])
            self.resolved[id(loc)] = (loc, None, None)  # reported once per location
            return
        if sub is None or sub is entry_subprogram:
            return
        if entry_subprogram is None:
            self.ctx.report("debug.op_scope", op, f"'cuda_tile.{op.name}' op invalid operation "
                            f"debug info scope: {attribute_text(sub)}. Operation has debug info "
                            f"scope, but function debug info scope is undefined. (location is in "
                            f"{_describe(sub)}, but the entry has no subprogram)")
        elif sub != entry_subprogram:
            self.ctx.report("debug.op_scope", op, f"invalid operation debug info scope: "
                            f"{attribute_text(sub)}. Operation debug info scope does not match "
                            f"function debug info scope: {attribute_text(entry_subprogram)}. "
                            f"(location is in {_describe(sub)}, not in the entry's "
                            f"{_describe(entry_subprogram)})")
