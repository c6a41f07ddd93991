"""`np`: numpy, imported on its first use.

The lowering modules use numpy only for some ops (folding, layouts, reductions, soft floats);
importing it up front cost about a third of a cold `tilebc compile` of a small kernel."""
from __future__ import annotations


class _LazyNumpy:
    def __getattr__(self, name: str):
        import numpy
        # Copy numpy's namespace in, so that later lookups are plain attribute hits; names numpy
        # itself makes lazily (submodules) still come through here.
        self.__dict__.update(vars(numpy))
        return getattr(numpy, name)

    def __repr__(self) -> str:
        return "<numpy, imported on first use>"


np = _LazyNumpy()
