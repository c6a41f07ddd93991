"""Op implementations, one module per family; importing this package registers all of them."""
from . import arith, atomics, casts, control, debug, math, memory, shape, views  # noqa: F401
