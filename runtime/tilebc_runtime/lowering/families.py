"""The op-family modules, imported so their lowering hooks register. Kept apart from registry.py,
which the families import (registering there), so that no import cycle runs through the registry.

Most families are imported for every kernel. Those in ON_DEMAND are imported only for a kernel
that holds one of the ops they lower: each is a noticeable share of a small compile's start-up
(matmul alone ~1.5 ms of a ~70 ms `tilebc compile`), and their hooks on other families' ops
(matmul's deferral of the loads, permutes and reshapes its mmas read, its loop pipelines and
loop-invariant operands) act only for their own ops. runtime/tests/test_rt_lowering_families.py
checks both: the lists against the registrations, and each fixture's PTX (sm_90) with and
without the hooks of a family whose ops it does not hold."""
from __future__ import annotations

from importlib import import_module

from _weakref import ref  # the weakref module itself is not loaded by a compile otherwise

ALWAYS = ("atomics", "casts", "control_flow", "elementwise", "grid", "memory", "packing",
          "shapes")
ON_DEMAND = {"matmul": ("mmaf", "mmai", "mmaf_scaled"), "reductions": ("reduce", "scan"),
             "debug": ("assert", "print_tko")}

_imported: set = set()
# (a weak reference to the function load_for walked last, the ON_DEMAND families it needs): a
# kernel is asked for several times (code-size estimate, each thread count tried)
_walked: tuple | None = None


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
    global _walked
    _import(ALWAYS)
    if all(family in _imported for family in ON_DEMAND):
        return
    walked = _walked
    if walked is not None and walked[0]() is function:
        needed = walked[1]
    else:
        names = {op.name for op in function.walk()}
        needed = tuple(family for family, ops in ON_DEMAND.items() if not names.isdisjoint(ops))
        _walked = (ref(function), needed)
    _import(needed)
