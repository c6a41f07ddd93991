"""The reference interpreter: run Tile IR bytecode on the CPU with numpy.

`run(module_or_path, entry, grid, *args, **options)` executes an entry over a grid of tile blocks;
array arguments are updated in place. See `api.run` for the options and argument conventions.
`demo_check()` runs the embedded demo kernel against numpy (used by `tilebc demo`).
"""
from . import ops  # noqa: F401  (registers every op implementation)
from .api import Pointer, run  # noqa: F401
from .demo import DemoMismatch, demo_check  # noqa: F401
from .errors import (ArgumentError, AssumptionError, ExecutionError,  # noqa: F401
                     KernelAssertionError, MemoryCheckError, UnsupportedError)
