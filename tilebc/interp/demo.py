"""`demo_check`: run the embedded demo kernel on random inputs and compare with numpy.

The demo kernel (`tilebc/data/demo.tilebc`) is cuTile's `float_math` from
fixtures/kernels/elementwise.py (the elementwise_f32 fixture): out = f(x, y) element-wise, a chain
of f32 arithmetic and math functions. The numpy reference below is written from that Python source,
evaluated in float64; the interpreter's f32 chain agrees to a relative 1e-5 (a few ulp over about
thirty rounded steps).
"""
from __future__ import annotations

from importlib import resources
from typing import Optional

import numpy as np

from ..binary import load
from ..ir.module import Module
from ..ir.types import PartitionViewType, PointerType, TileType
from .api import run
from .errors import ArgumentError, ExecutionError

RTOL = 1e-5


class DemoMismatch(ExecutionError):
    """The interpreter's result of the demo kernel differs from the numpy reference."""


def float_math_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """cuTile's float_math kernel, term by term, in float64."""
    x, y = a.astype(np.float64), b.astype(np.float64)
    r = x + y
    r = r - x * 0.5
    r = r / (y + 1.0)
    r = r + np.exp(x) + np.exp2(y) + np.log(x) + np.log2(y)
    r = r + np.sqrt(x) + 1 / np.sqrt(y)
    r = r + np.sin(x) + np.cos(y) + np.tan(x)
    r = r + np.sinh(x) + np.cosh(y) + np.tanh(x)
    r = r + x ** y
    r = r + np.floor(x) + np.ceil(y) + np.abs(x) - y
    r = r + np.mod(x, y)
    r = r + np.minimum(x, y) + np.maximum(x, y)
    r = x * y + r
    return np.where(np.isnan(r), x, r)


def _tile_size(module: Module) -> int:
    """The kernel's tile width T (a constant baked into its partition views)."""
    function = module.functions[0]
    params = [v.type for v in function.args]
    f32_array = len(params) == 9 and all(isinstance(t, TileType) and t.shape == ()
                                         for t in params) \
        and all(isinstance(params[k].element, PointerType) and
                params[k].element.pointee.name == "f32" for k in (0, 3, 6))
    widths = {op.results[0].type.tile_shape for op in function.walk()
              if isinstance(op.results[0].type if op.results else None, PartitionViewType)}
    if len(module.functions) != 1 or not f32_array or len(widths) != 1 or \
            len(next(iter(widths))) != 1:
        raise ArgumentError("demo_check runs the demo kernel (cuTile float_math: one entry taking "
                            "three 1-d f32 arrays, one 1-d tile width); this module is not it")
    return int(next(iter(widths))[0])


def demo_check(module: Optional[Module] = None, *, tiles: int = 64, seed: int = 0) -> str:
    """Run the demo kernel (default: the embedded `tilebc/data/demo.tilebc`) over `tiles` tile
    blocks of random inputs in [0.5, 2) and compare with `float_math_reference`.

    Returns a one-line summary; raises DemoMismatch when an element differs by more than RTOL
    (relative), and the interpreter's own errors if the kernel faults."""
    if module is None:
        module = load(resources.files("tilebc").joinpath("data/demo.tilebc").read_bytes())
    width = _tile_size(module)
    count = width * tiles
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.5, 2.0, count).astype(np.float32)
    b = rng.uniform(0.5, 2.0, count).astype(np.float32)
    out = np.full(count, np.nan, dtype=np.float32)
    run(module, None, (tiles,), a, b, out)
    expected = float_math_reference(a, b)
    error = np.abs(out.astype(np.float64) - expected) / np.abs(expected)
    worst = float(np.nanmax(error)) if count else 0.0
    bad = int(np.count_nonzero(~(error <= RTOL)))
    what = (f"interpreter ran {module.functions[0].name.split('_Kt')[0]} over {tiles} tile blocks "
            f"({count} f32 elements, seed {seed})")
    if bad:
        raise DemoMismatch(f"{what}: {bad} elements differ from numpy by more than rtol {RTOL:g} "
                           f"(max relative error {worst:.2e})")
    return f"{what}: matches numpy (max relative error {worst:.2e}, rtol {RTOL:g})"
