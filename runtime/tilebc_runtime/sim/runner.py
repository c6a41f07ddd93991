"""`run`: the CPU interpreter's calling convention, executed by lowering to PTX and emulating it.

    run(module_or_path, entry, grid, *args, ...)   # same arguments as tilebc.interp.run

The module is compiled by the JIT (`tilebc_runtime.compiler.compile(emit="ptx")`), the host
arguments are bound exactly as the interpreter binds them (same GlobalMemory layout: module globals
first, then the arguments, so both see identical pointers), and the PTX runs on the emulator.
Numpy arrays are updated in place.
"""
from __future__ import annotations

import os
from typing import Dict, Iterable, Optional, Tuple

from tilebc.interp.api import Binder as _Binder, find_entry
from tilebc.interp.machine import Machine, Options, flatten_grid
from tilebc.ir.module import Module

from ..args import check_host_arguments, infer_signature
from ..compiler import compile as jit_compile, load_module
from .machine import KernelImage, emulate, load_kernel

_IMAGES: Dict[Tuple, Tuple[Module, KernelImage, int]] = {}  # least recently used first
# Runs of one module come in bursts, so the newest few images are the ones reused (in the sim
# tests every hit is on one of the last two); each image held is many thousand closures that
# every full garbage collection walks.
_IMAGES_KEPT = 4


def compiled_kernel(module: Module, entry: str, arch: str = "sm_90",
                    threads: Optional[int] = None, wgmma: Optional[bool] = None,
                    tma: Optional[bool] = None) -> Tuple[KernelImage, int, int, tuple]:
    """The emulator image of one entry (cached per module object), its threads per CTA, the
    dynamic shared memory its launch requests and its tensor map records (KernelInfo).
    `wgmma`, `tma`: the JIT's sm_90 choices (compiler.compile)."""
    key = (id(module), entry, arch, threads, wgmma, tma)
    cached = _IMAGES.pop(key, None)
    if cached is not None and cached[0] is module:
        _IMAGES[key] = cached  # now the most recently used
        return cached[1:]
    result = jit_compile(module, entry=entry, arch=arch, emit="ptx", threads=threads, wgmma=wgmma,
                         tma=tma)
    image = load_kernel(result.ptx, entry, source=f"<PTX of {module.source or 'module'}>")
    image.serialize_wgmma = False  # our code waits for its accumulators before touching them
    info = result.kernels[entry]
    while len(_IMAGES) >= _IMAGES_KEPT:
        del _IMAGES[next(iter(_IMAGES))]
    _IMAGES[key] = (module, image, info.threads_per_cta, info.dynamic_shared_bytes,
                    info.tensor_maps)
    return image, info.threads_per_cta, info.dynamic_shared_bytes, info.tensor_maps


def run(module_or_path, entry: Optional[str], grid, *args, arch: str = "sm_90",
        threads: Optional[int] = None, check_memory: bool = True, allow_aliasing: bool = False,
        uninitialized: Iterable[int] = (), print_stream=None, max_steps: int = 50_000_000,
        profile=None, wgmma: Optional[bool] = None, tma: Optional[bool] = None,
        **interpreter_only) -> KernelImage:
    """Run `entry` over `grid` like `tilebc.interp.run`, but through the JIT's PTX on the
    emulator. Interpreter-only options (check_assumptions, shuffle, seed, progress) are accepted
    and ignored: assumptions are not in the PTX, and CTAs run in id order."""
    unknown = set(interpreter_only) - {"check_assumptions", "shuffle", "seed", "progress"}
    if unknown:
        raise TypeError(f"run() got unexpected keyword arguments {sorted(unknown)}")
    module = load_any(module_or_path)
    function = find_entry(module, entry)
    image, count, dynamic_shared, maps = compiled_kernel(module, function.name, arch, threads,
                                                         wgmma, tma)
    machine, binder = bind_arguments(module, function, args, check_memory, allow_aliasing,
                                     uninitialized)
    symbols = {f"__tilebc_global_{name}": address
               for name, address in machine.global_addresses.items()}
    values = list(binder.values)
    if maps:  # built from this launch's arguments, as the CUDA launcher does
        from .. import tensor_maps
        found = tensor_maps.resolve_all(maps, values)
        scratch = 0
        if any(each.empty for each in found):  # zeroed memory, as the CUDA launcher's scratch
            import numpy as np
            scratch = machine.memory.map(np.zeros(tensor_maps.ZERO_SCRATCH_BYTES, np.uint8),
                                         "TMA zero scratch").base
        values += [tensor_maps.for_emulator(tensor_maps.over_zeros(each, scratch))
                   for each in found]
    return emulate(image, function.name, flatten_grid(grid), values,
                   memory=machine.memory, threads=count, check=check_memory,
                   print_stream=print_stream, max_steps=max_steps, global_symbols=symbols,
                   dynamic_shared_bytes=dynamic_shared, profile=profile)


def load_any(module_or_path) -> Module:
    """A Module as given, or loaded from a bytecode path / bytes."""
    if isinstance(module_or_path, Module):
        return module_or_path
    return load_module(os.fspath(module_or_path) if isinstance(module_or_path, os.PathLike)
                       else module_or_path)


def bind_arguments(module: Module, function, args, check_memory: bool = True,
                   allow_aliasing: bool = False, uninitialized: Iterable[int] = ()):
    """Map the host arguments as the interpreter does (module globals first, then the arguments,
    same GlobalMemory layout): returns the interpreter Machine (its memory and global addresses)
    and the Binder whose `values` hold one runtime value per entry parameter."""
    machine = Machine(module, Options(check_memory=check_memory))
    binder = _Binder(function, machine.memory, uninitialized)
    keep: list = []
    bound = []  # (first flat parameter, argument)
    for index, argument in enumerate(args):
        bound.append((binder.position, argument))
        binder.bind(argument, f"argument {index}", index, keep)
    if binder.position != len(binder.params):
        from tilebc.interp.errors import ArgumentError
        raise ArgumentError(f"entry {function.name} takes {len(binder.params)} parameters; the "
                            f"arguments filled {binder.position}")
    # what the GPU launcher refuses, the emulator refuses too (overlaps last, as it does)
    check_host_arguments(infer_signature(function), bound)
    if check_memory and not allow_aliasing:
        binder.check_overlaps()
    binder.keep = keep  # host buffers the bound values point into stay alive with the binder
    return machine, binder
