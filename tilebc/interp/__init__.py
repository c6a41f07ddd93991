"""The reference interpreter: run Tile IR bytecode on the CPU with numpy.

`run(module_or_path, entry, grid, *args, **options)` executes an entry over a grid of tile blocks;
array arguments are updated in place; it returns a LaunchReport (whether all tile blocks ran at
once, batched, or one at a time and why). See `api.run` for the options and argument conventions,
`batch` for the batched mode. `Binder` / `bind_arguments` lay host arguments out in memory the way
`run` does (the PTX emulator's runner uses them too).
`demo_check()` runs the embedded demo kernel against numpy (used by `tilebc demo`).
"""
from . import ops  # noqa: F401  (registers every op implementation)
from .api import Binder, Pointer, bind_arguments, run  # noqa: F401
from .demo import DemoMismatch, demo_check  # noqa: F401
from .errors import (ArgumentError, AssumptionError, ExecutionError,  # noqa: F401
                     KernelAssertionError, MemoryCheckError, UndefinedError, UnsupportedError)
from .machine import LaunchReport  # noqa: F401
