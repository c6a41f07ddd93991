"""The reference interpreter: run Tile IR bytecode on the CPU with numpy.

`run(module_or_path, entry, grid, *args, **options)` executes an entry over a grid of tile blocks;
array arguments are updated in place; it returns a LaunchReport (whether all tile blocks ran at
once, batched, or one at a time and why). See `api.run` for the options and argument conventions,
`batch` for the batched mode. `Binder` / `bind_arguments` lay host arguments out in memory the way
`run` does (the PTX emulator's runner uses them too).
`demo_check()` runs the embedded demo kernel against numpy (used by `tilebc demo`).

Order of floating-point accumulation (fixed, so results are the same bits whether tile blocks run
batched or one at a time, with any numpy and any BLAS, and match the JIT's code):
- `mmaf`, `mmaf_scaled`: operands are widened exactly to f32 (f64 operands stay f64; scaled
  operands are multiplied by their block scale in f32), then acc + the sum of the products is
  formed exactly and rounded once to f32 (f64), then to the result type (`ops.shape.exact_dot`
  states the bounds of "exactly"). A GPU sums in an unspecified order with intermediate roundings:
  it agrees to about K ulps. `mmai` is exact (integer products summed, then wrapped).
- `fma`: one correct rounding of a * b + c (nearest-even, or the op's directed mode).
- `reduce`: a balanced tree over the reduced dimension, elements 2i and 2i+1 combined first,
  level by level (an odd last element moves up unchanged).
- `scan`: log-step (Hillis-Steele): step s combines element i with element i - s, s = 1, 2, 4, ...
"""
from . import ops  # noqa: F401  (registers every op implementation)
from .api import Binder, Pointer, bind_arguments, run  # noqa: F401
from .demo import DemoMismatch, demo_check  # noqa: F401
from .errors import (ArgumentError, AssumptionError, ExecutionError,  # noqa: F401
                     KernelAssertionError, MemoryCheckError, UndefinedError, UnsupportedError)
from .machine import LaunchReport  # noqa: F401
