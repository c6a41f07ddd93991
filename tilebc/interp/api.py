"""`run`: bind host arguments to an entry's parameters and execute it over a grid.

Calling convention (cuTile's, which the fixtures' entries follow): an array parameter is a pointer
parameter followed by one integer parameter per dimension for the shape and one per dimension for the
strides (in elements). A Python list of arrays is cuTile's list-of-arrays parameter: a pointer to an
i64 table with one row (pointer, shape..., strides...) per array, followed by the list length.
A tuple is flattened into its items. Any other argument is a scalar for one scalar parameter.
Static shape/stride parameters (cuTile's v2 convention) are still passed; the kernel ignores them.
"""
from __future__ import annotations

import os
from typing import Iterable, List, Optional, Sequence, Tuple

import numpy as np

from ..api import load as load_verified
from ..ir.module import Function, Module
from ..ir.types import PointerType, TileType
from . import numeric_ops as num
from .errors import ArgumentError, MemoryCheckError
from .machine import LaunchReport, Machine, Options, flatten_grid
from .memory import GlobalMemory, host_bytes


class Pointer:
    """Pass an array as a bare pointer parameter (no shape / stride parameters follow it)."""

    def __init__(self, array: np.ndarray):
        self.array = array


def find_entry(module: Module, entry: Optional[str]) -> Function:
    """The entry named `entry`, or the only one whose cuTile-mangled name starts with `entry_`."""
    names = [f.name for f in module.functions]
    if entry is None:
        if len(module.functions) == 1:
            return module.functions[0]
        raise ArgumentError(f"the module has {len(names)} entries, name one of: {', '.join(names)}")
    for function in module.functions:
        if function.name == entry:
            return function
    matches = [f for f in module.functions if f.name.startswith(entry + "_")]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise ArgumentError(f"entry {entry!r} is ambiguous: {', '.join(f.name for f in matches)}")
    raise ArgumentError(f"no entry {entry!r} in the module (entries: {', '.join(names)})")


def _address(value, label: str, index: int, param) -> int:
    """A scalar given for a pointer parameter: an integer address in [0, 2**64)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) and not (
            isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu"):
        raise ArgumentError(f"{label}: parameter {index} has type {param}; expected an array or "
                            f"an integer address, got {value!r}")
    address = int(value)
    if not 0 <= address < 1 << 64:
        raise ArgumentError(f"{label}: address {address} for parameter {index} ({param}) is "
                            f"outside [0, 2**64)")
    return address


def _check_integer(value, label: str, index: int, param) -> None:
    """A scalar for an integer parameter: integral, and within the signed or unsigned range of
    its width (the IR's integers are signless)."""
    try:
        number = float(value) if isinstance(value, (float, np.floating)) else None
    except (TypeError, ValueError):
        number = None
    if number is not None and not number.is_integer():
        raise ArgumentError(f"{label}: parameter {index} has type {param}; expected an integer, "
                            f"got {value!r}")
    try:
        whole = int(value)
    except (TypeError, ValueError, OverflowError):
        raise ArgumentError(f"{label}: parameter {index} has type {param}; expected an integer, "
                            f"got {value!r}") from None
    bits = param.element.bits
    if not -(1 << (bits - 1)) <= whole < 1 << bits:
        raise ArgumentError(f"{label}: {whole} does not fit parameter {index} ({param}): "
                            f"expected {-(1 << (bits - 1))} to {(1 << bits) - 1}")


class Binder:
    """Binds host arguments to an entry's parameters, mapping arrays into a GlobalMemory.

    `bind(argument, label, index, keep)` consumes one host argument (see the module docstring for
    the conventions); afterwards `values` holds one runtime value per parameter and `position`
    counts the parameters filled. `check_overlaps()` faults when two bound arrays share memory.
    Used by `run` and by the PTX emulator's runner, so both lay out memory identically."""

    def __init__(self, function: Function, memory: GlobalMemory,
                 uninitialized: Iterable[int] = ()):
        self.params = [value.type for value in function.args]
        self.position = 0
        self.memory = memory
        self.values: List = []
        self.arrays: List[tuple] = []  # (argument label, array) for the overlap check
        self.uninitialized = set(uninitialized)
        self.function = function

    def _next(self, label: str):
        if self.position >= len(self.params):
            raise ArgumentError(f"{label}: entry {self.function.name} has only "
                                f"{len(self.params)} parameters")
        param = self.params[self.position]
        self.position += 1
        return param

    def _scalar(self, value, label: str):
        param = self._next(label)
        if not isinstance(param, TileType) or param.shape != ():
            raise ArgumentError(f"{label}: parameter {self.position - 1} has type {param}, "
                                f"expected a scalar")
        if isinstance(param.element, PointerType):
            self.values.append(np.asarray(_address(value, label, self.position - 1, param),
                                          dtype=np.uint64))
        else:
            if param.element.is_integer and param.element.bits > 1:
                _check_integer(value, label, self.position - 1, param)
            self.values.append(num.cast_value(value, param.element))

    def map_array(self, array: np.ndarray, label: str, initialised: bool) -> int:
        buffer = self.memory.map(host_bytes(array), label, initialised=initialised)
        low = np.lib.array_utils.byte_bounds(array)[0] if array.size else 0
        data = array.__array_interface__["data"][0]
        return buffer.base + (data - low if array.size else 0)

    def array(self, array: np.ndarray, label: str, index: int, with_layout: bool = True):
        param = self._next(label)
        if not (isinstance(param, TileType) and isinstance(param.element, PointerType)):
            raise ArgumentError(f"{label}: an array was given for parameter {self.position - 1} "
                                f"of type {param}")
        expected = num.memory_dtype(param.element.pointee)
        if array.dtype != expected and array.dtype.kind in "iu" and expected.kind == "i" \
                and array.dtype.itemsize == expected.itemsize:
            array = array.view(expected)  # the IR's integers are signless: uint arrays fit too
        if array.dtype != expected:
            raise ArgumentError(f"{label}: array dtype {array.dtype} does not match "
                                f"ptr<{param.element.pointee}> (expected {expected})")
        if not array.flags.writeable:
            raise ArgumentError(f"{label}: the array is read-only; the kernel may write to it")
        self.arrays.append((label, array))
        address = self.map_array(array, label, index not in self.uninitialized)
        self.values.append(np.asarray(address, dtype=np.uint64))
        if not with_layout:
            return
        strides = [s // array.itemsize for s in array.strides]
        if any(s % array.itemsize for s in array.strides):
            raise ArgumentError(f"{label}: strides {array.strides} are not whole elements")
        for extent in list(array.shape) + strides:
            self._scalar(extent, label)

    def array_list(self, arrays: Sequence[np.ndarray], label: str):
        rows = []
        for k, array in enumerate(arrays):
            if not isinstance(array, np.ndarray):
                raise ArgumentError(f"{label}[{k}]: a list argument must hold numpy arrays")
            self.arrays.append((f"{label}[{k}]", array))
            address = self.map_array(array, f"{label}[{k}]", True)
            rows.append([address] + list(array.shape) +
                        [s // array.itemsize for s in array.strides])
        table = np.asarray(rows, dtype=np.uint64).view(np.int64)
        param = self._next(label)
        if not (isinstance(param, TileType) and isinstance(param.element, PointerType)):
            raise ArgumentError(f"{label}: a list was given for parameter {self.position - 1} "
                                f"of type {param}")
        self.values.append(np.asarray(self.map_array(table, f"{label} (table)", True),
                                      dtype=np.uint64))
        self._scalar(len(arrays), label)
        return table

    def bind(self, argument, label: str, index: int, keep: list):
        if isinstance(argument, Pointer):
            self.array(argument.array, label, index, with_layout=False)
        elif isinstance(argument, np.ndarray) and argument.ndim > 0:
            self.array(argument, label, index)
        elif isinstance(argument, list):
            keep.append(self.array_list(argument, label))
        elif isinstance(argument, tuple):
            for k, item in enumerate(argument):
                self.bind(item, f"{label}[{k}]", index, keep)
        else:
            self._scalar(argument, label)

    def finish(self) -> List:
        """The parameter values, after checking every parameter got an argument."""
        if self.position != len(self.params):
            raise ArgumentError(f"entry {self.function.name} takes {len(self.params)} parameters; "
                                f"the arguments filled {self.position}")
        return self.values

    def check_overlaps(self):
        from .memory import overlapping_pairs
        pairs = overlapping_pairs([array for _, array in self.arrays])
        if pairs:
            first, second = pairs[0]
            raise MemoryCheckError(f"{self.arrays[first][0]} and {self.arrays[second][0]} "
                                   "overlap in memory; pass allow_aliasing=True if the kernel "
                                   "expects aliasing", address=None)


_Binder = Binder  # the name the PTX emulator's runner used before Binder was public


def bind_arguments(function: Function, memory: GlobalMemory, args: Sequence,
                   uninitialized: Iterable[int] = ()) -> Tuple[List, list]:
    """Bind host `args` to `function`'s parameters in `memory`: (parameter values, keep), where
    `keep` holds host buffers made for the binding (list-of-arrays tables) that must outlive it."""
    binder = Binder(function, memory, uninitialized)
    keep: list = []
    for index, argument in enumerate(args):
        binder.bind(argument, f"argument {index}", index, keep)
    return binder.finish(), keep


def run(module_or_path, entry: Optional[str], grid, *args, check_memory: bool = True,
        check_assumptions: bool = False, check_undefined: bool = False, shuffle: bool = False,
        seed: int = 0, allow_aliasing: bool = False, uninitialized: Iterable[int] = (),
        print_stream=None, progress=None, batch="auto", exact_math: bool = False,
        max_iterations: Optional[int] = None, batch_memory: Optional[int] = None,
        verify: bool = True) -> LaunchReport:
    """Run `entry` of a module (a Module, a .tilebc path, or bytes) over `grid` (1-3 ints).

    A path or bytes is decoded and verified first, as `tilebc.load` does: invalid IR raises
    VerificationError (`verify=False` skips that, for trusted input). A Module is run as given
    (`tilebc.load` has verified it; check a hand-built one with `tilebc.verify.verify`).

    Arguments follow cuTile's calling convention (see the module docstring); numpy arrays are
    updated in place. Options:

    * check_memory (default True): fault on out-of-bounds, misaligned and uninitialised accesses
      and on overlapping array arguments; False skips the alignment/initialisation checks and the
      overlap check (out-of-bounds accesses still fault: there is no memory to reach).
    * check_assumptions: verify every `assume` predicate (bounded, div_by, same_elements).
    * check_undefined: fault on undefined integer behaviour (overflow against an op's
      no_signed_wrap / no_unsigned_wrap / no_wrap flag, division by zero, signed min / -1, shift
      amounts >= the bit width), naming the op, the tile block and the element; and read a view
      load's undetermined padding (no padding_value) as NaN in float tiles, so that results
      depending on it show (by default it reads as 0).
    * shuffle / seed: run tile blocks in a seeded random order instead of by flattened id.
    * allow_aliasing: accept array arguments that share memory (cuTile alias groups).
    * uninitialized: positions of array arguments whose contents count as uninitialised, so
      reading an element before the kernel writes it faults.
    * print_stream: where print_tko writes (default sys.stdout).
    * progress: callable(done, total) called after each tile block (once, at the end, when the
      launch ran batched).
    * batch: "auto" (default) runs all tile blocks at once as numpy arrays with a leading block
      axis when the kernel allows it, with results identical to running them one by one, and
      falls back to one block at a time otherwise (see `tilebc.interp.batch`); False always runs
      one block at a time; True requires the batched run and raises ExecutionError naming the
      reason when the kernel cannot run batched.
    * batch_memory: the batched run's memory budget in bytes (default: the TILEBC_BATCH_MEMORY
      environment variable, e.g. "2G", else 512 MiB). The tile blocks run batched in chunks whose
      estimated working set fits it (see `tilebc.interp.batch`), with the same results. With
      batch=True, a chunk after the first that cannot batch raises once the earlier chunks'
      blocks have run (and stored), as they would have one at a time.
    * exact_math: evaluate every math function (exp, sin, ...) in float64 and round once. By
      default f32 exp, sin, cos, tanh, sinh and cosh use numpy's float32 kernels, which stay within
      the device's documented ulp bound (see `tilebc.interp.fastmath`) and are ~10x faster.
    * max_iterations: stop with ExecutionError once the launch has run this many loop iterations
      (`for` and `loop` bodies, all tile blocks together); None (default) means no limit.

    Returns a LaunchReport: whether the launch ran batched and, if not, why.
    """
    if isinstance(module_or_path, Module):
        module = module_or_path
    elif isinstance(module_or_path, (str, os.PathLike, bytes, bytearray, memoryview)):
        module = load_verified(module_or_path, verify=verify)
    else:
        raise ArgumentError(f"expected a Module, a path or bytes, got {type(module_or_path)}")
    if batch not in ("auto", True, False):
        raise ArgumentError(f"batch must be 'auto', True or False, got {batch!r}")
    function = find_entry(module, entry)
    grid3 = flatten_grid(grid)
    options = Options(check_memory=check_memory, check_assumptions=check_assumptions,
                      check_undefined=check_undefined, shuffle=shuffle, seed=seed,
                      print_stream=print_stream, progress=progress, batch=batch,
                      exact_math=exact_math, max_iterations=max_iterations,
                      batch_memory=batch_memory)
    if batch_memory is not None and not (isinstance(batch_memory, int) and batch_memory > 0):
        raise ArgumentError(f"batch_memory must be a positive number of bytes, got "
                            f"{batch_memory!r}")
    machine = Machine(module, options)
    binder = Binder(function, machine.memory, uninitialized)
    keep: list = []  # list-of-arrays tables: mapped memory that must live through the launch
    for index, argument in enumerate(args):
        binder.bind(argument, f"argument {index}", index, keep)
    values = binder.finish()
    if check_memory and not allow_aliasing:
        binder.check_overlaps()
    return machine.launch(function, grid3, values, may_alias=allow_aliasing)
