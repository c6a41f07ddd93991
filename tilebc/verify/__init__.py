"""The verifier: decoded or parsed IR that breaks a typing or well-formedness rule.

`verify(module)` raises VerificationError for the first error; `diagnostics(module)` lists every
problem found (one per op at most), each with its rule id, op, location and message.
"""
from __future__ import annotations


from ..ir.module import Module
from ..gcpause import collection_paused
from .diagnostics import ERROR, WARNING, Collector, Diagnostic, StopChecking
from .structure import Verifier

__all__ = ["verify", "diagnostics", "Diagnostic", "OP_CONSTRAINTS", "ERROR", "WARNING"]


def diagnostics(module: Module, *, warnings: bool = True, full: bool = False) -> list[Diagnostic]:
    """Every problem in `module`, in walk order. Warnings mark IR NVIDIA's compiler accepts although
    the spec does not allow it; leave them out with `warnings=False`. `full=True` checks every op
    from scratch instead of reusing the verdict of an earlier op with the same signature (slower;
    the same diagnostics)."""
    collector = Collector(module.source, fail_fast=False)
    with collection_paused():
        Verifier(module, collector, fast=not full).run()
    found = collector.diagnostics
    return found if warnings else [d for d in found if d.severity == ERROR]


def verify(module: Module, entries: range | None = None) -> None:
    """Raise VerificationError (with .rule and .diagnostic) for the first error in `module`
    (with `entries`: in its module-level rules and the entries at those positions)."""
    collector = Collector(module.source, fail_fast=True)
    try:
        with collection_paused():
            Verifier(module, collector).run(entries)
    except StopChecking:
        pass
    for found in collector.diagnostics:
        if found.severity == ERROR:
            raise found.to_error()


def __getattr__(name):
    if name == "OP_CONSTRAINTS":  # made on first use (optable.py)
        from .optable import OP_CONSTRAINTS
        return OP_CONSTRAINTS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
