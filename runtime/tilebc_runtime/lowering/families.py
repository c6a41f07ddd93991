"""The op-family modules, imported together so every lowering hook is registered. Kept apart
from registry.py, which the families import (registering there), so that no import cycle runs
through the registry."""
from __future__ import annotations


_loaded = False


def load_all() -> None:
    """Import every op-family module so their hooks register (idempotent; after the first call
    it returns at once: it runs at every lowering)."""
    global _loaded
    if _loaded:
        return
    from . import (atomics, casts, control_flow, debug, elementwise, grid, matmul,  # noqa: F401
                   memory, packing, reductions, shapes)
    _loaded = True
