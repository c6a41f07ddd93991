"""Debug-info rules: how an entry's location and its ops' locations must agree.

NVIDIA's verifier (run by tileiras on every load, with or without -g) refuses a kernel whose
debug info breaks one of these rules; the facts come from the public cuda-tile sources and were
confirmed against tileiras 13.5 (tests/test_verify_oracle.py):

* an entry's location is never a call site;
* when it is a `loc`, its scope is a DISubprogram (not a lexical block) whose linkage name is the
  entry's name (the subprogram's plain `name` is free: cuTile writes the Python function name);
* an op location's subprogram (a `loc`'s scope, through any lexical blocks; for a call site, its
  caller's) is the entry's subprogram, and an op has none when the entry has none.
"""
from __future__ import annotations

from typing import Dict, Optional

from ..ir.location import CallSiteLoc, DILexicalBlock, DILoc, DISubprogram
from ..ir.module import Function
from .diagnostics import Collector


def _di_loc(loc) -> Optional[DILoc]:
    """The `loc` that places `loc` in a scope: itself, or a call site's caller (inlined code is
    scoped where it was called)."""
    while isinstance(loc, CallSiteLoc):
        loc = loc.caller
    return loc if isinstance(loc, DILoc) else None


def _subprogram(scope) -> Optional[DISubprogram]:
    while isinstance(scope, DILexicalBlock):
        scope = scope.scope
    return scope if isinstance(scope, DISubprogram) else None


def _describe(sub: DISubprogram) -> str:
    return (f"subprogram {sub.name!r} (linkage name {sub.linkage_name!r}, "
            f"{sub.file.name}:{sub.line})")


class DebugInfoChecker:
    """Checks one entry at a time. Locations are shared objects (one per debug-table entry), so
    each is resolved once per verifier run."""

    def __init__(self, ctx: Collector):
        self.ctx = ctx
        self.resolved: Dict[int, tuple] = {}  # id(loc) -> (loc, its subprogram or None)

    def op_subprogram(self, loc) -> Optional[DISubprogram]:
        if loc is None:
            return None
        found = self.resolved.get(id(loc))
        if found is None:
            di_loc = _di_loc(loc)
            found = (loc, _subprogram(di_loc.scope) if di_loc is not None else None)
            self.resolved[id(loc)] = found
        return found[1]

    def entry(self, function: Function):
        """Check the entry's own location. Returns its subprogram, None when it has none (then
        its ops must have none either), or False once a problem is reported (ops go unchecked)."""
        ctx, loc = self.ctx, function.loc
        if isinstance(loc, CallSiteLoc):
            ctx.report("debug.entry_loc", function, "an entry's location must not be a call "
                                                    "site; expected a loc in its subprogram")
            return False
        if not isinstance(loc, DILoc):
            return None
        if not isinstance(loc.scope, DISubprogram):
            ctx.report("debug.entry_scope", function, f"an entry's location must be scoped by a "
                       f"subprogram, got a {type(loc.scope).__name__}")
            return False
        if loc.scope.linkage_name != function.name:
            ctx.report("debug.linkage_name", function, f"{_describe(loc.scope)} does not match "
                       f"the entry name @{function.name}")
            return False
        return loc.scope

    def op(self, op, entry_subprogram: Optional[DISubprogram]) -> None:
        sub = self.op_subprogram(op.loc)
        if sub is None or sub is entry_subprogram:
            return
        if entry_subprogram is None:
            self.ctx.report("debug.op_scope", op, f"location is in {_describe(sub)}, but the "
                                                  f"entry has no subprogram")
        elif sub != entry_subprogram:
            self.ctx.report("debug.op_scope", op, f"location is in {_describe(sub)}, not in the "
                            f"entry's {_describe(entry_subprogram)}")
