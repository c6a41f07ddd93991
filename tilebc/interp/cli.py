"""`tilebc run`: execute an entry of a .tilebc file on the CPU interpreter.

    tilebc run FILE --entry NAME --grid X[,Y[,Z]] --arg A --arg B ... [--out result.npz]

Each --arg is one kernel argument, in order:
  path.npy                 an array loaded from a .npy file
  rand:DTYPE:SHAPE         random values (uniform [0, 1) for floats, 0..99 for integers)
  zeros:DTYPE:SHAPE        zeros (SHAPE is like 128 or 64x32)
  a number                 a scalar parameter (int or float literal)
After the run every array argument is saved to the --out .npz as arg0, arg1, ...
`tilebc/cli.py` adds it with `add_run_parser(subparsers)` when `run` (or help) is asked for.
"""
from __future__ import annotations

import argparse
import io
import os
import sys

import ml_dtypes
import numpy as np

from ..errors import TilebcError, UsageError
from ..inputs import decode_bytes, display_name, read_input, verify_module
from ..outputs import write_output


def _dtype(name: str) -> np.dtype:
    try:
        return np.dtype(name)
    except TypeError:
        return np.dtype(getattr(ml_dtypes, name))


def parse_argument(text: str, rng: np.random.Generator):
    """One --arg value as a numpy array or a Python scalar."""
    if text.endswith(".npy"):
        return load_npy(text)
    if text.startswith(("rand:", "zeros:")):
        try:
            kind, dtype_name, shape_text = text.split(":")
            dtype = _dtype(dtype_name)
            shape = tuple(int(part) for part in shape_text.split("x"))
        except (ValueError, AttributeError) as error:
            raise argparse.ArgumentTypeError(f"bad array argument {text!r}: expected "
                                             f"rand:DTYPE:SHAPE or zeros:DTYPE:SHAPE") from error
        _check_allocation(text, shape, dtype.itemsize if kind == "zeros" else
                          max(8, dtype.itemsize))
        if kind == "zeros":
            return np.zeros(shape, dtype)
        if dtype.kind in "iu":
            return rng.integers(0, 100, shape).astype(dtype)
        if dtype.kind == "b":
            return rng.integers(0, 2, shape).astype(dtype)
        return rng.random(shape).astype(dtype)
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad argument {text!r}: expected a .npy path, "
                                         f"rand:/zeros: array or a number") from None


def load_npy(path: str) -> np.ndarray:
    """An array argument from a .npy file. The header is checked against the file's size before
    anything is allocated: a truncated file or a header claiming 10**12 elements is a TilebcError
    naming the file, as is anything numpy cannot read (pickled objects are never loaded)."""
    from numpy.lib import format as npy
    try:
        with open(path, "rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            try:
                version = npy.read_magic(stream)
                if version == (1, 0):
                    shape, fortran_order, dtype = npy.read_array_header_1_0(stream)
                elif version == (2, 0):
                    shape, fortran_order, dtype = npy.read_array_header_2_0(stream)
                else:
                    raise ValueError(f"unsupported .npy format version {version[0]}.{version[1]}")
            except (ValueError, EOFError, SyntaxError, TypeError) as error:
                raise TilebcError(f"not a readable .npy file: {_first_line(error)}",
                                  file=path) from None
            if dtype.hasobject:
                raise TilebcError(f"the array holds Python objects ({dtype}); expected numbers",
                                  file=path)
            count = 1
            for extent in shape:
                count *= int(extent)
            expected, present = count * dtype.itemsize, size - stream.tell()
            if present < expected:
                raise TilebcError(f"truncated .npy file: the header says shape {tuple(shape)} of "
                                  f"{dtype} ({expected} bytes of data), the file holds {present}",
                                  file=path)
            stream.seek(0)
            try:
                return np.load(stream, allow_pickle=False)
            except (ValueError, EOFError) as error:
                raise TilebcError(f"not a readable .npy file: {_first_line(error)}",
                                  file=path) from None
    except OSError as error:
        raise TilebcError(f"cannot read the argument: {error.strerror or error}",
                          file=path) from None


def _check_allocation(text: str, shape, itemsize: int) -> None:
    """Refuse a generated array with a negative extent, or one larger than this machine's memory
    (numpy would raise MemoryError, or the OOM killer would end the run)."""
    if any(extent < 0 for extent in shape):
        raise argparse.ArgumentTypeError(f"bad array argument {text!r}: negative extent")
    count = 1
    for extent in shape:
        count *= extent
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        memory = 1 << 40
    if count * itemsize > memory:
        raise argparse.ArgumentTypeError(f"bad array argument {text!r}: {count} elements need "
                                         f"{count * itemsize} bytes, more than this machine's "
                                         f"memory ({memory} bytes)")


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _size(text: str) -> int:
    from .batch import parse_size
    try:
        return parse_size(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad size {text!r}: expected bytes, or a number with "
                                         "K, M or G, e.g. 512M") from None


def parse_grid(text: str):
    try:
        grid = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad grid {text!r}: expected X[,Y[,Z]]") from None
    if not 1 <= len(grid) <= 3 or min(grid) < 1:
        raise argparse.ArgumentTypeError(f"bad grid {text!r}: 1 to 3 positive sizes")
    return grid


class ProgressBar:
    """A one-line progress bar on stderr, drawn only for grids worth waiting for."""

    def __init__(self, stream=sys.stderr, width: int = 40):
        self.stream = stream
        self.width = width
        self.last = -1

    def __call__(self, done: int, total: int) -> None:
        filled = self.width * done // total
        if filled == self.last and done != total:
            return
        self.last = filled
        self.stream.write(f"\r[{'#' * filled}{'.' * (self.width - filled)}] {done}/{total} "
                          f"tile blocks")
        if done == total:
            self.stream.write("\n")
        self.stream.flush()


def add_run_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("run", help="run a kernel on the CPU reference interpreter")
    parser.add_argument("file", help=".tilebc file, or - for stdin")
    parser.add_argument("--entry", help="entry name (or the cuTile kernel name before its "
                                        "mangled suffix); optional when there is one entry")
    parser.add_argument("--grid", type=parse_grid, default=(1,), help="X[,Y[,Z]] tile blocks")
    parser.add_argument("--arg", action="append", default=[], dest="args",
                        help="kernel argument: file.npy, rand:DTYPE:SHAPE, zeros:DTYPE:SHAPE, "
                             "or a number (repeat in parameter order)")
    parser.add_argument("--out", help="write the array arguments after the run to this .npz")
    parser.add_argument("--seed", type=int, default=0, help="seed for rand: inputs and shuffle")
    parser.add_argument("--shuffle", action="store_true", help="run tile blocks in random order")
    parser.add_argument("--no-check", action="store_true", help="turn memory checking off")
    parser.add_argument("--check-assumptions", action="store_true",
                        help="verify every assume predicate")
    parser.add_argument("--allow-aliasing", action="store_true",
                        help="accept array arguments that share memory")
    parser.add_argument("--check-undefined", action="store_true",
                        help="fault on undefined integer behaviour (overflow against nsw/nuw "
                             "flags, division by zero, shift amounts >= the width); read "
                             "undetermined load padding as NaN in float tiles")
    parser.add_argument("--no-batch", action="store_true",
                        help="run tile blocks one at a time instead of all at once")
    parser.add_argument("--batch-memory", type=_size, metavar="SIZE",
                        help="memory budget of the batched run, e.g. 512M or 2G (default: "
                             "TILEBC_BATCH_MEMORY, else 512M); tile blocks run batched in chunks "
                             "that fit it")
    parser.add_argument("--exact-math", action="store_true",
                        help="evaluate exp, sin, ... in float64 and round once (default: f32 "
                             "functions in numpy float32 within the device's ulp bound)")
    parser.set_defaults(handler=handle_run)
    return parser


def handle_run(options) -> int:
    """`tilebc run`: errors are raised for tilebc.cli.main to print (`tilebc run: error: FILE: …`)."""
    from .api import run
    rng = np.random.default_rng(options.seed)
    try:
        arguments = [parse_argument(text, rng) for text in options.args]
    except argparse.ArgumentTypeError as error:
        raise UsageError(str(error)) from None
    name = display_name(options.file)
    module = decode_bytes(read_input(options.file), name)
    verify_module(module)
    grid = options.grid
    blocks = int(np.prod(grid))
    progress = ProgressBar() if blocks >= 64 and sys.stderr.isatty() else None
    try:
        run(module, options.entry, grid, *arguments, check_memory=not options.no_check,
            check_assumptions=options.check_assumptions, shuffle=options.shuffle,
            seed=options.seed, allow_aliasing=options.allow_aliasing, progress=progress,
            check_undefined=options.check_undefined,
            batch=False if options.no_batch else "auto", exact_math=options.exact_math,
            batch_memory=options.batch_memory)
    except TilebcError as error:
        error.file = error.file or name
        raise
    if options.out:
        arrays = {f"arg{i}": value for i, value in enumerate(arguments)
                  if isinstance(value, np.ndarray)}
        archive = io.BytesIO()
        np.savez(archive, **arrays)
        write_output(options.out, archive.getvalue(), force=True)
    return 0


