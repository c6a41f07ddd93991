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
    of ON_DEMAND whose ops it holds (idempotent; once every family is imported, no walk). The
    function is walked at each call: a Function may change between two (a builder adds ops)."""
    _import(ALWAYS)
    # op -> its family, for the families not imported yet
    wanted = {op: family for family, ops in ON_DEMAND.items() if family not in _imported
              for op in ops}
    if not wanted:
        return
    for op in function.walk():
        family = wanted.get(op.name)
        if family is not None:
            _import((family,))
            wanted = {name: owner for name, owner in wanted.items() if owner != family}
            if not wanted:
                return
