"""`demo_compile(module) -> str`: the JIT step of `tilebc demo`, in one summary line (`demo_step`
is the form the demo calls, registered in the `tilebc.demo` entry-point group).

Compiles the module's first entry to PTX and a cubin and reports the facts. With a GPU it also
launches the kernel on synthesised inputs (one tile block) and compares every array with what the
CPU reference interpreter computes from the same inputs; without one the line says so.
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

import numpy as np

DEFAULT_ARCH = "sm_90"
_DIM = {1: 256, 2: 64, 3: 16}  # per-dimension extent of synthesised arrays, by rank


def demo_compile(module, arch: Optional[str] = None) -> str:
    """Compile `module` (a tilebc Module, a path or bytes) and summarise it in one line:
    `entry @NAME: sm_XY, PTX N B, cubin N B, T threads/CTA; <GPU result or why none>`."""
    from .compiler import compile as jit_compile, load_module
    module = load_module(module)
    if not module.functions:
        return "JIT: the module has no entry to compile"
    function = module.functions[0]
    handle, why_no_gpu = _gpu()
    if arch is None:
        arch = _device_arch(handle) if handle is not None else DEFAULT_ARCH
    result = jit_compile(module, function.name, arch, "cubin")
    more = len(module.functions) - 1
    line = (f"entry @{function.name}{f' (+{more} more)' if more else ''}: {result.arch}, "
            f"PTX {result.ptx_version} {len(result.ptx.encode())} B, cubin {len(result.cubin)} B, "
            f"{result.threads_per_cta} threads/CTA")
    if handle is None:
        return f"{line}; no GPU ({why_no_gpu}): launch and compare skipped"
    try:
        return f"{line}; {_launch_and_compare(module, function)}"
    except Exception as error:  # the summary reports a failed launch instead of raising
        return f"{line}; GPU launch FAILED: {type(error).__name__}: {error}"


def demo_step(module) -> Tuple[str, bool, str]:
    """`tilebc demo`'s JIT step: (title, ok, the summary line of `demo_compile`)."""
    line = demo_compile(module)
    return "JIT to PTX and cubin (nvJitLink)", "FAILED" not in line, line


def _gpu() -> Tuple[Any, str]:
    """(device handle, "") when a CUDA GPU can be used, else (None, why not)."""
    from . import driver
    try:
        return driver.device(None), ""
    except Exception as error:
        text = str(error)
        if "DynamicLibNotFound" in text or "libcuda" in text:
            return None, "the CUDA driver, libcuda, is not installed"
        return None, (text.splitlines() or [type(error).__name__])[0][:160]


def _device_arch(handle) -> str:
    from . import driver
    return driver.arch_of(handle)


# -- inputs ---------------------------------------------------------------------------------------

def _inputs(signature, rng: np.random.Generator) -> List[Any]:
    """Host values for every parameter: arrays of a fixed modest size, scalars of 1 (or a
    value that satisfies the parameter's assumed divisibility and bounds)."""
    from tilebc.numeric.dtypes import numpy_dtype
    from .args import ArrayParam, PointerParam
    values: List[Any] = []
    for param in signature.params:
        if isinstance(param, PointerParam):
            raise _Skip(f"parameter {param.describe()} is a bare pointer; cannot size its data")
        if isinstance(param, ArrayParam):
            dtype = numpy_dtype(param.element)
            shape = tuple(static or _DIM.get(param.rank, 8) for static in param.static_shape)
            values.append(_random(rng, dtype, shape))
            continue
        slot = param.slot
        value = 1
        for fact in slot.facts:
            value = fact.divisor or value
            if fact.lower is not None:
                value = max(value, fact.lower)
        dtype = numpy_dtype(slot.element)
        values.append(dtype.type(value if dtype.kind != "f" else 0.5))
    return values


def _random(rng, dtype: np.dtype, shape) -> np.ndarray:
    if dtype.kind == "f" or dtype.kind == "V":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    return rng.integers(0, 16, shape).astype(dtype)


class _Skip(Exception):
    pass


# -- GPU side ---------------------------------------------------------------------------------

class _DeviceArray:
    """A device copy of a numpy array, exposed through __cuda_array_interface__ (version 3)."""

    def __init__(self, host: np.ndarray):
        from cuda.bindings import driver as cu
        self._cu = cu
        self.host = np.ascontiguousarray(host)
        self.ptr = _checked(cu.cuMemAlloc(max(self.host.nbytes, 1)), "cuMemAlloc")
        _checked(cu.cuMemcpyHtoD(self.ptr, self.host.ctypes.data, self.host.nbytes), "cuMemcpyHtoD")
        self.__cuda_array_interface__ = {"shape": self.host.shape, "typestr": self.host.dtype.str,
                                         "data": (int(self.ptr), False), "strides": None,
                                         "version": 3}

    def to_host(self) -> np.ndarray:
        out = np.empty_like(self.host)
        _checked(self._cu.cuMemcpyDtoH(out.ctypes.data, self.ptr, out.nbytes), "cuMemcpyDtoH")
        return out

    def free(self) -> None:
        self._cu.cuMemFree(self.ptr)


def _checked(result, name: str):
    error, *rest = result if isinstance(result, tuple) else (result,)
    if int(error) != 0:
        raise RuntimeError(f"{name} failed with CUDA error {int(error)}")
    return rest[0] if rest else None


def _launch_and_compare(module, function) -> str:
    import tilebc.interp
    from . import launch
    loaded = launch.load(module)
    kernel = loaded[function.name]
    try:
        inputs = _inputs(kernel.signature, np.random.default_rng(0))
    except _Skip as why:
        return f"launch skipped: {why}"
    device_args = [_DeviceArray(value) if isinstance(value, np.ndarray) else value
                   for value in inputs]
    from cuda.bindings import driver as cu
    try:
        kernel[(1,)](*device_args)
        _checked(cu.cuCtxSynchronize(), "cuCtxSynchronize")
        gpu = [arg.to_host() for arg in device_args if isinstance(arg, _DeviceArray)]
    finally:
        for arg in device_args:
            if isinstance(arg, _DeviceArray):
                arg.free()
    cpu_args = [value.copy() if isinstance(value, np.ndarray) else value for value in inputs]
    tilebc.interp.run(module, function.name, (1,), *cpu_args)
    cpu = [value for value in cpu_args if isinstance(value, np.ndarray)]
    mismatched = [index for index, (a, b) in enumerate(zip(gpu, cpu)) if not _close(a, b)]
    arch = _device_arch(_gpu()[0])
    if mismatched:
        return (f"launched on {arch}: MISMATCH with the CPU interpreter in array argument(s) "
                f"{', '.join(map(str, mismatched))}")
    return f"launched on {arch} (1 block): {len(gpu)} arrays match the CPU interpreter"


def _close(gpu: np.ndarray, cpu: np.ndarray) -> bool:
    if gpu.dtype.kind in "iub":
        return np.array_equal(gpu, cpu)
    return bool(np.allclose(gpu.astype(np.float64), cpu.astype(np.float64), rtol=1e-5,
                            atol=1e-6, equal_nan=True))
