"""The op-family modules, imported so their lowering hooks register. Kept apart from registry.py,
which the families import (registering there), so that no import cycle runs through the registry.

Most families are imported for every kernel. Those in ON_DEMAND are imported only for a kernel
that holds one of the ops they lower: each is a noticeable share of a small compile's start-up
(matmul alone ~1.5 ms of a ~70 ms `tilebc compile`), and their hooks on other families' ops
(matmul's deferral of the loads and permutes its mmas read, its loop pipelines and loop-invariant
operands) act only for their own ops. runtime/tests/test_rt_lowering_families.py checks both
claims: the lists against the registrations, and every fixture's PTX with and without them."""
from __future__ import annotations

from importlib import import_module

ALWAYS = ("atomics", "casts", "control_flow", "elementwise", "grid", "memory", "packing",
          "shapes")
ON_DEMAND = {"matmul": ("mmaf", "mmai", "mmaf_scaled"), "reductions": ("reduce", "scan"),
             "debug": ("assert", "print_tko")}

_imported: set = set()


def _import(families) -> None:
    for family in families:
        if family not in _imported:
            import_module(f"{__package__}.{family}")
            _imported.add(family)


def load_all() -> None:
    """Import every op-family module so their hooks register (idempotent)."""
    _import(ALWAYS)
    _import(ON_DEMAND)


def load_for(function) -> None:
    """Import the families that lowering `function` (a tilebc Function) needs: ALWAYS, and each
    of ON_DEMAND whose ops it holds (idempotent; cheap once everything is imported)."""
    _import(ALWAYS)
    missing = [family for family in ON_DEMAND if family not in _imported]
    if missing:
        names = {op.name for op in function.walk()}
        _import(family for family in missing if not names.isdisjoint(ON_DEMAND[family]))
