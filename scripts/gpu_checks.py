"""GPU-day checks: everything tilebc can only verify with a CUDA GPU, in one run (≤ 10 minutes).

    .venv/bin/python scripts/gpu_checks.py [--backends jit,tileiras] [--versions latest|all|13.x]
                                           [--arrays core|torch|cupy] [--only NAME,...] [--budget S]

1. Every cuTile fixture kernel runs through `tilebc_runtime.load(..., backend=B)` for each backend,
   on the inputs `tests/test_interp_fixtures.py` builds (its cases are run, not copied), and each
   array the case checks is compared with `tilebc.interp.run`'s under that check's tolerances
   (exact where the case is exact); the case's own numpy reference is checked as well.
2. The PTX-emulator instruction suite's `@also_on_gpu` cases (runtime/tests/test_rt_sim_isa.py)
   run on the GPU, one generated PTX kernel per case, with the same assertions; every array is
   also compared bit for bit with the emulator's (except for `.approx` instructions).
3. Our kernels are timed against tileiras's per fixture (CUDA events, warm-up, median) and copy
   bandwidth is measured; the tables go to benchmarks/results/gpu.md (see benchmarks/bench_gpu.py).
4. A summary table is printed; the exit status is 1 on any mismatch or error, else 0.

Without a usable CUDA GPU it says so and exits 0. The GPU work runs in worker processes: a kernel
fault (a failed device assert, say) leaves a CUDA context unusable, so the worker reports the job
and exits, and a fresh worker carries on with the jobs left. Nothing here needs the network.
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT, ROOT / "runtime", ROOT / "tests", ROOT / "runtime" / "tests", ROOT / "benchmarks"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

DEFAULT_RESULTS = ROOT / "benchmarks" / "results" / "gpu.md"
FIXTURE_SEED = 1234  # the seed tests/test_interp_fixtures.py draws its inputs with

# Fixture cases whose results depend on the order the hardware runs tile blocks or lanes in; the
# interpreter fixes one order (block id, lane order). A difference there is reported, not failed.
SCHEDULE_DEPENDENT = {
    "atomics_int": "duplicate indices in one tile: xchg/cas results depend on lane order",
    "strided_view": "tile blocks read rows the previous block wrote (the case assumes id order)",
    "printf": "blocks print in the order the hardware runs them",
    "ft_printf_formats": "two blocks print in the order the hardware runs them",
    "sci_stream_compact": "blocks reserve their output ranges with an atomic, in the order they run",
    "dm_moe_permute": "lanes and blocks take rows of an expert's segment with an atomic, in the order they run",
}
# Of those, the cases whose own checks hold in any order: a failing case check stays a mismatch.
ORDER_FREE_CASE_CHECKS = {"sci_stream_compact", "dm_moe_permute"}

FAILING = ("mismatch", "error")


# -- is there a GPU? --------------------------------------------------------------------------

def gpu_presence() -> Tuple[int, str]:
    """(number of CUDA devices, why none) without keeping anything open."""
    try:
        from cuda.bindings import driver
    except Exception as error:  # no cuda-python at all
        return 0, f"cuda.bindings cannot be imported ({type(error).__name__}: {error})"
    try:
        status, = driver.cuInit(0)
    except Exception as error:  # libcuda.so missing
        return 0, f"the CUDA driver cannot be loaded ({type(error).__name__}: {error})"
    if status != driver.CUresult.CUDA_SUCCESS:
        return 0, f"cuInit failed: {getattr(status, 'name', status)}"
    status, count = driver.cuDeviceGetCount()
    if status != driver.CUresult.CUDA_SUCCESS or count == 0:
        return 0, f"no CUDA device ({getattr(status, 'name', status)}, count {count})"
    return int(count), ""


# -- outcomes and comparison ------------------------------------------------------------------

@dataclass
class Outcome:
    """ok | mismatch | error | order (schedule-dependent difference) | refused (tileiras
    rejected the kernel) | partial (matched up to a device assert the case expects; its later
    launches need a fresh CUDA context) | skip."""

    status: str
    detail: str = ""
    micros: Optional[float] = None  # median GPU time per launch

    @property
    def failed(self) -> bool:
        return self.status in FAILING


@dataclass
class FixtureResult:
    name: str
    version: str
    interp: Outcome
    backends: Dict[str, Outcome] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"kind": "fixture", "name": self.name, "version": self.version,
                "interp": asdict(self.interp),
                "backends": {k: asdict(v) for k, v in self.backends.items()}}

    @classmethod
    def from_json(cls, record: dict) -> "FixtureResult":
        return cls(record["name"], record["version"], Outcome(**record["interp"]),
                   {k: Outcome(**v) for k, v in record["backends"].items()})


def compare_arrays(actual, expected, rtol: float = 0.0, atol: float = 0.0) -> Optional[str]:
    """None when `actual` matches `expected` as test_interp_fixtures.check would accept it
    (exact, NaN equal to NaN, when both tolerances are 0), else a short description."""
    try:
        if rtol == 0 and atol == 0:
            np.testing.assert_array_equal(actual, expected)
        else:
            np.testing.assert_allclose(np.asarray(actual, np.float64),
                                       np.asarray(expected, np.float64), rtol=rtol, atol=atol)
    except AssertionError as error:
        lines = [line for line in str(error).splitlines() if line.strip()]
        return " ".join(lines[:4])[:300]
    return None


def _pytest_failed() -> type:
    """What a failing `pytest.raises` in a case raises (pytest's Failed is no Exception)."""
    import pytest
    return pytest.fail.Exception


def _short(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    return " ".join(text.split())[:400]


# -- fixture cases ----------------------------------------------------------------------------

# Modules of tests/ whose CASES hold the fixture references (each has the same run / check / RNG /
# module / versions names); test_interp_fixtures.py first, then one per kernel family file.
FIXTURE_CASE_MODULES = importlib.import_module("fixture_cases").CASE_MODULES


def fixture_cases(name: Optional[str] = None):
    """The tests/ module whose CASES build the inputs and references of fixture `name`, imported;
    without a name, tests/test_interp_fixtures.py (it also holds MANIFEST)."""
    modules = [importlib.import_module(m) for m in FIXTURE_CASE_MODULES]
    if name is None:
        return modules[0]
    for module in modules:
        if name in module.CASES:
            return module
    raise KeyError(f"no fixture case named {name!r}")


def fixture_jobs(versions: str = "latest", only: Optional[Sequence[str]] = None) -> List[Tuple[str, str]]:
    """(fixture, bytecode version) pairs: the newest version of each, every version, or one."""
    cases = fixture_cases()
    names = set()
    for module_name in FIXTURE_CASE_MODULES:
        names |= set(importlib.import_module(module_name).CASES)
    jobs = []
    for name in sorted(names):
        if only and name not in only:
            continue
        available = sorted(cases.versions(name), key=lambda v: tuple(map(int, v.split("."))))
        if not available:
            continue
        if versions == "latest":
            chosen = available[-1:]
        elif versions == "all":
            chosen = available
        else:
            chosen = [v for v in available if v == versions]
        jobs += [(name, version) for version in chosen]
    return jobs


Launcher = Callable[..., Any]  # like tilebc.interp.run: (module, entry, grid, *args, **options)


class _CheckLog:
    """What one pass of a case saw at each `check` call, in call order."""

    def __init__(self):
        self.arrays: List[Tuple[np.ndarray, float, float]] = []
        self.problems: List[str] = []


@contextlib.contextmanager
def _patched_case_module(cases, runner: Launcher, checker: Callable, seed: int):
    """Run a case with `run` and `check` replaced and the input generator reseeded, so two passes
    of one case see the same inputs."""
    saved = cases.run, cases.check, cases.RNG
    cases.run, cases.check, cases.RNG = runner, checker, np.random.default_rng(seed)
    try:
        yield
    finally:
        cases.run, cases.check, cases.RNG = saved


def _interp_pass(cases, name: str, module, seed: int) -> Tuple[_CheckLog, Optional[str]]:
    log = _CheckLog()

    def recording_check(actual, expected, rtol=0.0, atol=0.0):
        log.arrays.append((np.array(actual, copy=True), rtol, atol))
        problem = compare_arrays(actual, expected, rtol, atol)
        if problem:
            log.problems.append(f"check {len(log.arrays)} vs reference: {problem}")

    from fixture_cases import run as run_case  # every assume checked, as the CPU suite runs them
    with _patched_case_module(cases, run_case, recording_check, seed):
        try:
            cases.CASES[name](module)
        except (Exception, _pytest_failed()) as error:  # a plain assert in the case, or the interpreter failing
            return log, _short(error)
    return log, None


def _device_pass(cases, name: str, module, seed: int, launcher: Launcher,
                 interp_log: _CheckLog) -> Outcome:
    problems: List[str] = []
    reference_problems: List[str] = []
    seen = [0]

    def comparing_check(actual, expected, rtol=0.0, atol=0.0):
        index = seen[0]
        seen[0] += 1
        if index >= len(interp_log.arrays):
            problems.append(f"check {index + 1} has no interpreter counterpart")
            return
        interp_actual = interp_log.arrays[index][0]
        problem = compare_arrays(actual, interp_actual, rtol, atol)
        if problem:
            problems.append(f"check {index + 1} vs interpreter: {problem}")
        problem = compare_arrays(actual, expected, rtol, atol)
        if problem:
            reference_problems.append(f"check {index + 1} vs reference: {problem}")

    with _patched_case_module(cases, launcher, comparing_check, seed):
        try:
            cases.CASES[name](module)
        except ContextSpent as spent:
            if not problems and not reference_problems:
                return Outcome("partial", f"matched through {seen[0]} check(s) and the expected "
                               f"device assert ({spent}); the launches after it need a fresh "
                               "CUDA context")
        except (Exception, _pytest_failed()) as error:
            text = _short(error)
            if isinstance(error, (AssertionError, _pytest_failed())):
                reference_problems.append(f"case assertion: {text}")
            elif "tileiras failed" in text:
                return Outcome("refused", text)
            else:
                return Outcome("error", text)
    if seen[0] != len(interp_log.arrays) and not problems and not reference_problems:
        problems.append(f"{seen[0]} checks on the device, {len(interp_log.arrays)} on the interpreter")
    problems += reference_problems
    if problems:
        order_only = name in SCHEDULE_DEPENDENT and not (
            reference_problems and name in ORDER_FREE_CASE_CHECKS)
        status = "order" if order_only else "mismatch"
        detail = "; ".join(problems)
        if status == "order":
            detail = f"{SCHEDULE_DEPENDENT[name]}: {detail}"
        return Outcome(status, detail[:600])
    return Outcome("ok")


def run_fixture_case(name: str, version: str, launchers: Mapping[str, Launcher],
                     seed: int = FIXTURE_SEED) -> FixtureResult:
    """Run fixture case `name` on the interpreter, then through each launcher, comparing."""
    cases = fixture_cases(name)
    module = cases.module(name, version)
    interp_log, failure = _interp_pass(cases, name, module, seed)
    if failure is not None:
        interp = Outcome("error", failure)
    elif interp_log.problems:
        interp = Outcome("mismatch", "; ".join(interp_log.problems)[:600])
    else:
        interp = Outcome("ok")
    result = FixtureResult(name, version, interp)
    for backend, launcher in launchers.items():
        if failure is not None:
            result.backends[backend] = Outcome("skip", "the interpreter pass did not complete")
            continue
        result.backends[backend] = _device_pass(cases, name, module, seed, launcher, interp_log)
    return result


# -- launch arguments -------------------------------------------------------------------------

def flatten_launch_args(args: Sequence[Any], upload: Callable[[np.ndarray], Any],
                        pointer: Callable[[Any], int]) -> Tuple[List[Any], List[Tuple[Any, np.ndarray]]]:
    """Interpreter-style arguments -> (flat kernel arguments, [(device array, host array)] to copy
    back). Tuples flatten into their items; a list of arrays stays a list (of device arrays), which
    Kernel.launch turns into cuTile's table and length; one host array passed twice is uploaded
    once (so aliasing stays aliasing)."""
    uploaded: Dict[int, Any] = {}
    pairs: List[Tuple[Any, np.ndarray]] = []

    def device_of(host: np.ndarray):
        if id(host) not in uploaded:
            uploaded[id(host)] = upload(host)
            pairs.append((uploaded[id(host)], host))
        return uploaded[id(host)]

    flat: List[Any] = []

    def visit(arg):
        if isinstance(arg, tuple):
            for item in arg:
                visit(item)
        elif isinstance(arg, list):  # Kernel.launch builds the list's table on the device
            for host in arg:
                if not isinstance(host, np.ndarray):
                    raise TypeError(f"a list argument holds arrays only, got {type(host).__name__}")
            flat.append([device_of(host) for host in arg])
        elif isinstance(arg, np.ndarray) and arg.ndim > 0:
            flat.append(device_of(arg))
        else:
            flat.append(arg)

    for arg in args:
        visit(arg)
    return flat, pairs


# -- device arrays ----------------------------------------------------------------------------

def _copy_to_device(dst_ptr: int, host: np.ndarray) -> None:
    from cuda.bindings import driver as cu
    from tilebc_runtime.driver import check
    source = np.ascontiguousarray(host)  # held in a name: it must outlive the copy
    if source.nbytes:
        check("cuMemcpyHtoD", cu.cuMemcpyHtoD(dst_ptr, source.ctypes.data, source.nbytes))


def _copy_to_host(host: np.ndarray, src_ptr: int) -> None:
    from cuda.bindings import driver as cu
    from tilebc_runtime.driver import check
    if not host.nbytes:
        return
    target = host if host.flags.c_contiguous else np.empty_like(host, order="C")
    check("cuMemcpyDtoH", cu.cuMemcpyDtoH(target.ctypes.data, src_ptr, host.nbytes))
    if target is not host:
        host[...] = target


class CoreDeviceArray:
    """A device array from cuda.core: a Buffer and a typed StridedMemoryView over it (DLPack)."""

    def __init__(self, device, host: np.ndarray):
        from cuda.core.utils import StridedMemoryView
        self.buffer = device.allocate(max(host.nbytes, 1), stream=device.default_stream)
        device.default_stream.sync()
        self.view = StridedMemoryView.from_buffer(self.buffer, tuple(host.shape), dtype=host.dtype)
        self.ptr = int(self.buffer.handle)

    def __dlpack__(self, *args, **kwargs):
        return self.view.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.view.__dlpack_device__()


class DeviceArrays:
    """Host <-> device arrays through cuda.core (default), torch or cupy."""

    def __init__(self, kind: str = "core"):
        from tilebc_runtime import driver
        self.kind = kind
        self.device = driver.device(None)
        self._spans: Dict[int, Tuple[Any, np.ndarray]] = {}  # strided uploads: id -> (base, host bytes)
        if kind == "torch":
            import torch
            self._lib = torch
        elif kind == "cupy":
            import cupy
            self._lib = cupy
        elif kind != "core":
            raise ValueError(f"--arrays: expected core, torch or cupy, got {kind!r}")

    def upload(self, host: np.ndarray):
        array = None
        if self.kind == "torch":
            dtype = getattr(self._lib, host.dtype.name, None)  # ml_dtypes names match torch's
            if dtype is not None and not host.flags.c_contiguous and host.size and \
                    all(s >= 0 and s % host.itemsize == 0 for s in host.strides):
                return self._upload_strided(host, dtype)
            if dtype is not None:
                array = self._lib.empty(host.shape, dtype=dtype, device=f"cuda:{self.device.device_id}")
        elif self.kind == "cupy" and host.dtype.kind in "biuf" and host.dtype.name in np.sctypeDict:
            array = self._lib.empty(host.shape, dtype=host.dtype)
        if array is None:  # cuda.core, or a dtype the library lacks
            array = CoreDeviceArray(self.device, host)
        _copy_to_device(self.pointer(array), host)
        return array

    def _upload_strided(self, host: np.ndarray, dtype):
        """A torch view with `host`'s strides over a copy of every byte the view spans, so a
        kernel compiled for (or checking) those strides sees them; `download` copies the span back."""
        low, high = np.lib.array_utils.byte_bounds(host)
        count = (high - low) // host.itemsize
        flat = self._lib.empty(count, dtype=dtype, device=f"cuda:{self.device.device_id}")
        span = np.ctypeslib.as_array((ctypes.c_uint8 * (high - low)).from_address(low))
        _copy_to_device(int(flat.data_ptr()), span)
        view = flat.as_strided(host.shape, [s // host.itemsize for s in host.strides],
                               (host.ctypes.data - low) // host.itemsize)
        self._spans[id(view)] = (flat, span)
        return view

    def pointer(self, array) -> int:
        if isinstance(array, CoreDeviceArray):
            return array.ptr
        if self.kind == "torch":
            return int(array.data_ptr())
        return int(array.data.ptr)

    def download(self, array, host: np.ndarray) -> None:
        if id(array) in self._spans:
            flat, span = self._spans.pop(id(array))
            _copy_to_host(span, int(flat.data_ptr()))
            return
        _copy_to_host(host, self.pointer(array))


@contextlib.contextmanager
def captured_output():
    """Capture what the process writes to fds 1 and 2 (device printf, assert messages)."""
    libc = ctypes.CDLL(None)
    result = {"stdout": "", "stderr": ""}
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    files = {fd: tempfile.TemporaryFile() for fd in (1, 2)}
    for fd, handle in files.items():
        os.dup2(handle.fileno(), fd)
    try:
        yield result
    finally:
        libc.fflush(None)  # the driver writes printf output through C stdio
        for fd in (1, 2):
            os.dup2(saved[fd], fd)
            os.close(saved[fd])
            files[fd].seek(0)
            result["stdout" if fd == 1 else "stderr"] = files[fd].read().decode(errors="replace")
            files[fd].close()


class ContextSpent(Exception):
    """A launch asked for after an expected device assert: the trap ended this CUDA context."""


def lowered_as_backend(backend: str) -> str:
    """`jit@sm_80`: our JIT's code for sm_80 (mma.sync, ldmatrix, cp.async; no TMA or wgmma),
    its PTX linked for the GPU at hand (PTX runs on later GPUs), so one GPU checks the lowering
    of an older arch. Registered with the runtime's backends under its own cache identity."""
    from tilebc_runtime import launch
    if backend in launch.BACKENDS or not backend.startswith("jit@"):
        return backend
    lower_as = backend.split("@", 1)[1]

    class LoweredAs(launch.JitBackend):
        name = f"tilebc-jit-lowered-as-{lower_as}"

        def identity(self) -> str:
            return f"{super().identity()}+lowered-as-{lower_as}"

        def compile(self, bytecode, entry, arch, options):
            from tilebc_runtime.compiler import compile as jit_compile, link_ptx
            from tilebc_runtime.targets import parse_arch
            if parse_arch(lower_as) > parse_arch(arch):
                raise launch.LaunchError(f"{lower_as} code cannot run on {arch}")
            result = jit_compile(bytecode, entry, lower_as, emit="ptx", **dict(options))
            cubin, _log = link_ptx(result.ptx, parse_arch(arch))
            return cubin, self.metadata(result)

    launch.BACKENDS[backend] = LoweredAs
    return backend


class GpuLauncher:
    """A drop-in for tilebc.interp.run that launches through tilebc_runtime on one backend."""

    def __init__(self, backend: str, arrays: DeviceArrays):
        self.backend = backend
        self.arrays = arrays
        self._loaded: Dict[int, Any] = {}
        self.last: Optional[Tuple[Any, Any, List[Any]]] = None  # (kernel, grid, flat args)
        self.trapped = ""  # what the device said when an assert trapped (the context is gone)

    def _load(self, module):
        import tilebc_runtime
        if id(module) not in self._loaded:
            source = module.source if module.source and Path(module.source).is_file() else module
            self._loaded[id(module)] = tilebc_runtime.load(
                source, backend=lowered_as_backend(self.backend))
        return self._loaded[id(module)]

    def __call__(self, module, entry, grid, *args, print_stream=None, allow_aliasing=False,
                 **_interp_only):
        from tilebc.interp import KernelAssertionError, MemoryCheckError
        from tilebc_runtime import ArgumentError, DriverError
        if self.trapped:
            raise ContextSpent(self.trapped)
        kernel = self._load(module)[entry]
        flat, pairs = flatten_launch_args(args, self.arrays.upload, self.arrays.pointer)
        with captured_output() as output:
            try:
                kernel.launch(grid, *flat, allow_overlap=allow_aliasing)
                from tilebc_runtime import driver
                driver.call("Device.sync", self.arrays.device.sync)
                failure = None
            except (ArgumentError, DriverError) as error:
                failure = error
        # The launcher's refusals and device faults, as the interpreter's error kinds.
        if isinstance(failure, ArgumentError) and "overlap" in str(failure):
            raise MemoryCheckError(str(failure)) from failure
        # A failed assert traps (both backends): the driver says ASSERT or LAUNCH_FAILED, and the
        # kernel's message is in what the device printed.
        said = (output["stderr"] + output["stdout"]).strip()
        trapped = any(name in str(failure) for name in ("CUDA_ERROR_ASSERT", "cudaErrorAssert")) or \
            (any(name in str(failure) for name in ("CUDA_ERROR_LAUNCH_FAILED", "cudaErrorLaunchFailure"))
             and said)
        if isinstance(failure, DriverError) and trapped and \
                not str(failure).startswith("the CUDA context is unusable after"):
            self.trapped = said[:200]
            raise KernelAssertionError(f"{failure}; device said: {said}") from failure
        if failure is not None:
            raise failure
        for device_array, host in pairs:
            self.arrays.download(device_array, host)
        (print_stream or sys.stdout).write(output["stdout"])
        self.last = (kernel, grid, flat)


# -- the PTX instruction suite ----------------------------------------------------------------

def isa_suite():
    import test_rt_sim_isa
    return test_rt_sim_isa


def _expand(test) -> List[Tuple[str, Dict[str, Any]]]:
    """(id, keyword arguments) for each parametrization of a test function."""
    variants: List[Tuple[str, Dict[str, Any]]] = [("", {})]
    for mark in getattr(test, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names, values = mark.args[0], mark.args[1]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        grown = []
        for suffix, kwargs in variants:
            for position, value in enumerate(values):
                value = tuple(value) if len(names) > 1 else (value,)
                # pytest's id rule: plain values as written, anything else by its position,
                # so that ids are the same in every process
                label = "-".join(str(v) if isinstance(v, (str, int, float, bool)) else f"{n}{position}"
                                 for n, v in zip(names, value))
                grown.append((f"{suffix}-{label}" if suffix else label, {**kwargs, **dict(zip(names, value))}))
        variants = grown
    return [(f"{test.__name__}[{s}]" if s else test.__name__, kw) for s, kw in variants]


def isa_cases(only: Optional[Sequence[str]] = None) -> List[Tuple[str, Callable, Dict[str, Any]]]:
    """Every `@also_on_gpu` case of the instruction suite: (id, test function, arguments)."""
    suite = isa_suite()
    cases = []
    for name in dir(suite):
        test = getattr(suite, name)
        if name.startswith("test_") and getattr(test, "also_on_gpu", False):
            for case_id, kwargs in _expand(test):
                if not only or any(o in case_id for o in only):
                    cases.append((case_id, test, kwargs))
    return cases


def math_suite():
    import test_rt_f64_math
    return test_rt_f64_math


def math_cases(only: Optional[Sequence[str]] = None) -> List[str]:
    """The f64 functions test_rt_f64_math bounds by CUDA's documented ulps and has a
    floating-point reference for (the integer-exponent power has its own test only)."""
    suite = math_suite()
    return [name for name in sorted(suite.CUDA_ULPS)
            if name in suite.REFERENCE and (not only or name in only)]


def run_math_case(name: str, arrays: "DeviceArrays", count: int, compared: int = 2048) -> Outcome:
    """Our JIT's f64 `name` on the GPU over the suite's generators at `count` draws: the real
    error against long double within CUDA's bound, and the GPU's bits equal to the emulator's
    on the first `compared` inputs."""
    import zlib
    suite = math_suite()
    if not suite.EXTENDED:
        return Outcome("skip", "numpy long double is no wider than double here")
    suite.RNG = np.random.default_rng([20261126, zlib.crc32(name.encode())])
    args = suite.inputs(name, count)
    mnemonic = suite.MNEMONIC.get(name, name)
    got = suite.emulate(mnemonic, *args, run=GpuLauncher("jit", arrays))
    exact = suite.exact(suite.REFERENCE[name], *args)
    error = suite.ulp_error(got, exact)
    worst = int(np.argmax(error))
    emulated = suite.emulate(mnemonic, *(a[:compared] for a in args))
    same = np.array_equal(emulated.view(np.int64), got[:compared].view(np.int64))
    detail = (f"max {error[worst]:.3f} ulp (CUDA's bound {suite.CUDA_ULPS[name]}) over "
              f"{len(got):,} inputs, at {tuple(float(a[worst]) for a in args)}; "
              f"{int((error > 0.5).sum()):,} over 0.5 ulp; GPU bits "
              f"{'equal' if same else 'DIFFER from'} the emulator's on the first "
              f"{min(compared, len(got)):,}")
    try:  # the test's own judgement: the bound, and the sign of every zero
        suite.assert_close(name, args, got, exact)
    except AssertionError as failure:
        return Outcome("mismatch", f"{detail}; {failure}")
    return Outcome("ok" if same else "mismatch", detail)


class ArchSpecific(Exception):
    """The case's PTX targets an arch-specific variant (sm_90a) another GPU cannot run."""


def link_arch(ptx: str, arch: str) -> str:
    """The nvJitLink arch for a case: sm_90a PTX (wgmma) links as 90a and runs on sm_90 only."""
    import re
    target = re.search(r"^\.target\s+(sm_\d+)(a?)\b", ptx, flags=re.M)
    if target and target.group(2):
        if target.group(1) != arch:
            raise ArchSpecific(f".target {target.group(1)}a PTX cannot run on {arch}")
        return arch[3:] + "a"
    return arch[3:]


def retarget_ptx(ptx: str, arch: str) -> str:
    """The suite writes `.target sm_90` (`sm_90a` for wgmma); another GPU needs its own target
    and a PTX ISA new enough for it."""
    if arch == "sm_90":
        return ptx
    import re
    from tilebc_runtime import ptx_isa_for
    ptx = re.sub(r"^\.target\s+\S+", f".target {arch}", ptx, count=1, flags=re.M)
    return re.sub(r"^\.version\s+\S+", f".version {ptx_isa_for(arch)}", ptx, count=1, flags=re.M)


class PtxExecutor:
    """The suite's EXECUTE on the GPU: link the case's PTX, launch it on copies of its arrays,
    copy the results back; also run the emulator on copies and note every array that differs."""

    def __init__(self, arrays: DeviceArrays, emulate: Callable):
        from tilebc_runtime import driver
        self.arrays = arrays
        self.emulate = emulate
        self.arch = driver.arch_of(arrays.device)
        self.differences: List[str] = []

    def __call__(self, ptx, entry, grid, threads, arrays, print_stream=None):
        from tilebc_runtime import driver
        from tilebc_runtime.compiler import link_ptx
        link_arch(ptx, self.arch)  # an arch-specific case on another GPU is skipped
        copies = [np.array(a, copy=True) for a in arrays]
        try:
            self.emulate(ptx, entry, grid, threads, copies, io.StringIO())
            emulated = True
        except Exception as error:
            self.differences.append(f"emulator: {_short(error)}")
            emulated = False
        cubin, _log = link_ptx(retarget_ptx(ptx, self.arch), link_arch(ptx, self.arch))
        function = driver.load_kernel(cubin, entry)
        device_arrays = [self.arrays.upload(a) for a in arrays]
        grid3 = tuple(grid) + (1,) * (3 - len(tuple(grid)))
        stream = self.arrays.device.default_stream
        with captured_output() as output:
            driver.launch(stream, grid3, threads, 0, function,
                          [np.uint64(self.arrays.pointer(d)) for d in device_arrays])
            driver.call("Stream.sync", stream.sync)
        for device_array, host in zip(device_arrays, arrays):
            self.arrays.download(device_array, host)
        if print_stream is not None:
            print_stream.write(output["stdout"])
        if emulated and ".approx" not in ptx:  # approximations may differ within their bounds
            for index, (host, copy) in enumerate(zip(arrays, copies)):
                if host.tobytes() != copy.tobytes():
                    self.differences.append(f"array {index}: GPU {_values(host)} vs "
                                            f"emulator {_values(copy)}")


def _values(array: np.ndarray, count: int = 8) -> str:
    """The first values of an array, with their bits where they are floats (NaN payloads, -0)."""
    flat = array.ravel()[:count]
    if flat.dtype.kind == "f":
        bits = flat.view(f"u{flat.dtype.itemsize}")
        return "[" + ", ".join(f"{v} (0x{b:x})" for v, b in zip(flat.tolist(), bits.tolist())) + "]"
    return str(flat.tolist())


def run_isa_case(case_id: str, test: Callable, kwargs: Dict[str, Any], executor) -> Outcome:
    """Run one suite case with `executor` as its EXECUTE."""
    suite = isa_suite()
    saved = suite.EXECUTE
    suite.EXECUTE = executor
    differences_before = len(getattr(executor, "differences", []))
    try:
        test(**kwargs)
    except ArchSpecific as error:
        return Outcome("skip", str(error))
    except AssertionError as error:
        seen = getattr(executor, "differences", [])[differences_before:]
        return Outcome("mismatch", f"assertion: {_short(error)}"
                       + (f"; differs from the emulator: {'; '.join(seen)}" if seen else ""))
    except Exception as error:
        return Outcome("error", _short(error))
    finally:
        suite.EXECUTE = saved
    new = getattr(executor, "differences", [])[differences_before:]
    if new:
        return Outcome("mismatch", "differs from the emulator: " + "; ".join(new)[:500])
    return Outcome("ok")


# -- worker processes -------------------------------------------------------------------------

def job_key(job: Mapping[str, Any]) -> str:
    return "/".join(str(job[k]) for k in ("kind", "name", "version", "backend") if k in job)


def _context_healthy() -> Optional[str]:
    from cuda.bindings import driver as cu
    status, = cu.cuCtxSynchronize()
    if status != cu.CUresult.CUDA_SUCCESS:
        return getattr(status, "name", str(status))
    return None


def worker_main(out_path: str, request: dict) -> int:
    """Run jobs in order, appending a JSON line per job to `out_path`; exit 3 as soon as the
    CUDA context is lost (the parent then starts a fresh worker for the jobs left)."""
    import bench_gpu
    options = request["options"]
    arrays = DeviceArrays(options["arrays"])
    executor = None

    def emit(record: dict) -> None:
        with open(out_path, "a") as handle:
            handle.write(json.dumps(record) + "\n")

    for job in request["jobs"]:
        emit({"start": job_key(job)})
        if job["kind"] == "fixture":
            # One backend per job: a fault on one must not leave the other a dead context.
            backend = job["backend"]
            launcher = GpuLauncher(backend, arrays)
            result = run_fixture_case(job["name"], job["version"], {backend: launcher})
            outcome = result.backends[backend]
            if options["bench"] and outcome.status in ("ok", "order") and launcher.last \
                    and _context_healthy() is None:
                try:
                    outcome.micros = bench_gpu.time_launch(
                        *launcher.last, repeat=options["repeat"], warmup=options["warmup"],
                        batch=options["batch"])
                except Exception as error:
                    outcome.detail = f"timing failed: {_short(error)}"
            record = result.to_json()
        elif job["kind"] == "isa":
            if executor is None:
                executor = PtxExecutor(arrays, isa_suite().emulate_ptx)
            by_id = {case_id: (test, kwargs) for case_id, test, kwargs in isa_cases([job["name"]])}
            test, kwargs = by_id[job["name"]]
            record = {"kind": "isa", "name": job["name"],
                      "outcome": asdict(run_isa_case(job["name"], test, kwargs, executor))}
        elif job["kind"] == "math":
            try:
                outcome = run_math_case(job["name"], arrays, options.get("math_inputs", 65536))
            except Exception as error:
                outcome = Outcome("error", _short(error))
            record = {"kind": "math", "name": job["name"], "outcome": asdict(outcome)}
        else:  # bandwidth
            record = {"kind": "bandwidth", "rows": bench_gpu.copy_bandwidth(arrays.device)}
        lost = _context_healthy()
        record["key"] = job_key(job)
        emit(record)
        if lost:
            return 3
    return 0


def run_workers(jobs: List[dict], options: dict, deadline: float,
                log: Callable[[str], None] = print) -> Tuple[List[dict], List[dict]]:
    """Run `jobs` in worker processes, replacing a worker that loses its context or dies.
    Returns (records, jobs never run because the time budget ran out)."""
    records: List[dict] = []
    remaining = list(jobs)
    while remaining:
        left = deadline - time.monotonic()
        if left < 5:
            break
        with tempfile.NamedTemporaryFile("r", suffix=".jsonl", delete=False) as handle:
            out_path = handle.name
        request = json.dumps({"jobs": remaining, "options": options})
        try:
            done = subprocess.run([sys.executable, __file__, "--worker", out_path], input=request,
                                  text=True, capture_output=True, timeout=left)
            code, tail = done.returncode, (done.stderr or "")[-800:]
        except subprocess.TimeoutExpired as timeout:
            code, tail = "timeout", str(timeout.stderr or "")[-800:]
        lines = [json.loads(line) for line in Path(out_path).read_text().splitlines() if line]
        os.unlink(out_path)
        finished = {r["key"] for r in lines if "key" in r}
        records += [r for r in lines if "key" in r]
        started = [r["start"] for r in lines if "start" in r]
        crashed = started[-1] if started and started[-1] not in finished else None
        if crashed is not None and code != "timeout":
            log(f"worker died on {crashed} (exit {code}): {tail.strip()[-300:]}")
            records.append(_crash_record(crashed, remaining, f"worker died (exit {code}): "
                                         f"{' '.join(tail.split())[-300:]}", options))
            finished.add(crashed)
        remaining = [j for j in remaining if job_key(j) not in finished]
        if code == "timeout" or (not finished and remaining):
            if code != "timeout":
                log(f"worker made no progress (exit {code}): {tail.strip()[-300:]}")
            break
    return records, remaining


def _crash_record(key: str, jobs: List[dict], detail: str, options: dict) -> dict:
    job = next(j for j in jobs if job_key(j) == key)
    if job["kind"] == "fixture":
        return FixtureResult(job["name"], job["version"], Outcome("skip"),
                             {job["backend"]: Outcome("error", detail)}).to_json() | {"key": key}
    if job["kind"] == "isa":
        return {"kind": "isa", "name": job["name"], "outcome": asdict(Outcome("error", detail)), "key": key}
    return {"kind": "bandwidth", "rows": [], "error": detail, "key": key}


def merge_fixture_records(records: Iterable[dict]) -> List[FixtureResult]:
    """One FixtureResult per (fixture, version) from the per-backend job records; the
    interpreter's outcome is the worst any job saw (each job reran it)."""
    merged: Dict[Tuple[str, str], FixtureResult] = {}
    rank = {"skip": -1, "ok": 0, "partial": 1, "order": 2, "refused": 3, "mismatch": 4, "error": 5}
    for record in records:
        result = FixtureResult.from_json(record)
        key = (result.name, result.version)
        if key not in merged:
            merged[key] = result
            continue
        kept = merged[key]
        kept.backends.update(result.backends)
        if rank.get(result.interp.status, 0) > rank.get(kept.interp.status, 0):
            kept.interp = result.interp
    return sorted(merged.values(), key=lambda r: (r.name, r.version))


# -- reports ----------------------------------------------------------------------------------

def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    rows = [[str(c) for c in row] for row in rows]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def render_summary(fixtures: Sequence[FixtureResult], isa: Sequence[Tuple[str, Outcome]],
                   backends: Sequence[str], unrun: Sequence[str] = (),
                   math: Sequence[Tuple[str, Outcome]] = ()) -> str:
    """The console summary: one row per fixture and per failing ISA case, then the totals."""
    header = ["fixture", "version", "interp"] + list(backends)
    rows = []
    for result in fixtures:
        rows.append([result.name, result.version, result.interp.status] +
                    [result.backends.get(b, Outcome("skip")).status for b in backends])
    parts = [_table(header, rows)] if rows else []
    if isa:
        bad = [(case_id, o) for case_id, o in isa if o.status != "ok"]
        parts.append(f"PTX instruction suite on the GPU: {len(isa) - len(bad)}/{len(isa)} ok")
        if bad:
            parts.append(_table(["case", "status", "detail"], [(c, o.status, o.detail) for c, o in bad]))
    problems = [(f"{r.name}-{r.version}", what, o) for r in fixtures
                for what, o in [("interp", r.interp), *r.backends.items()] if o.status != "ok"]
    if problems:
        parts.append(_table(["fixture", "where", "status", "detail"],
                            [(n, w, o.status, o.detail[:200]) for n, w, o in problems]))
    if math:
        parts.append(_table(["f64 function", "status", "detail"],
                            [(name, o.status, o.detail) for name, o in math]))
    failures = count_failures(fixtures, isa, math)
    parts.append(f"{len(fixtures)} fixture runs, {len(isa)} ISA cases, {len(math)} f64 "
                 f"functions, {failures} failing"
                 + (f", {len(unrun)} not run (time budget)" if unrun else ""))
    return "\n\n".join(parts)


def count_failures(fixtures: Sequence[FixtureResult], isa: Sequence[Tuple[str, Outcome]],
                   math: Sequence[Tuple[str, Outcome]] = ()) -> int:
    failing = sum(1 for r in fixtures for o in [r.interp, *r.backends.values()] if o.failed)
    return failing + sum(1 for _, o in [*isa, *math] if o.failed)


# -- main ---------------------------------------------------------------------------------------

def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="jit,tileiras",
                        help="jit, tileiras, or jit@sm_80 (etc.): our code for an older arch, "
                             "its PTX linked for this GPU")
    parser.add_argument("--versions", default="latest", help="latest, all, or one (e.g. 13.3)")
    parser.add_argument("--arrays", default="core", choices=["core", "torch", "cupy"])
    parser.add_argument("--only", default="", help="comma-separated fixture names / ISA case ids")
    parser.add_argument("--no-fixtures", action="store_true")
    parser.add_argument("--no-isa", action="store_true")
    parser.add_argument("--no-math", action="store_true",
                        help="skip the f64 math accuracy sweep (runtime/tests/test_rt_f64_math.py)")
    parser.add_argument("--math-inputs", type=int, default=65536,
                        help="draws per generator of the f64 math sweep")
    parser.add_argument("--no-bench", action="store_true")
    parser.add_argument("--repeat", type=int, default=20, help="timed samples per kernel")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch", type=int, default=10, help="launches per timed sample")
    parser.add_argument("--budget", type=float, default=540, help="seconds for all GPU work")
    parser.add_argument("--results", default=str(DEFAULT_RESULTS))
    parser.add_argument("--worker", metavar="OUT", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return worker_main(args.worker, json.loads(sys.stdin.read()))
    count, reason = gpu_presence()
    if not count:
        print(f"gpu_checks: no CUDA GPU here ({reason}); nothing to check")
        return 0
    started = time.monotonic()
    backends = [b for b in args.backends.split(",") if b]
    only = [o for o in args.only.split(",") if o]
    jobs: List[dict] = []
    if not args.no_fixtures:
        jobs += [{"kind": "fixture", "name": n, "version": v, "backend": b}
                 for n, v in fixture_jobs(args.versions, only or None) for b in backends]
    if not args.no_isa:
        jobs += [{"kind": "isa", "name": case_id} for case_id, _, _ in isa_cases(only or None)]
    if not args.no_math:
        jobs += [{"kind": "math", "name": name} for name in math_cases(only or None)]
    if not args.no_bench:
        jobs.append({"kind": "bandwidth"})
    options = {"backends": backends, "arrays": args.arrays, "bench": not args.no_bench,
               "repeat": args.repeat, "warmup": args.warmup, "batch": args.batch,
               "math_inputs": args.math_inputs}
    print(f"gpu_checks: {count} GPU(s); {len(jobs)} jobs, backends {', '.join(backends)}",
          flush=True)
    records, unrun = run_workers(jobs, options, started + args.budget)
    fixtures = merge_fixture_records([r for r in records if r["kind"] == "fixture"])
    isa = [(r["name"], Outcome(**r["outcome"])) for r in records if r["kind"] == "isa"]
    math = [(r["name"], Outcome(**r["outcome"])) for r in records if r["kind"] == "math"]
    bandwidth = next((r for r in records if r["kind"] == "bandwidth"), None)
    print(render_summary(fixtures, isa, backends, [job_key(j) for j in unrun], math))
    if not args.no_bench:
        import bench_gpu
        Path(args.results).write_text(bench_gpu.render_markdown(
            fixtures, backends, bandwidth, device=_device_name(), command=" ".join(
                ["scripts/gpu_checks.py", *(argv if argv is not None else sys.argv[1:])]),
            elapsed=time.monotonic() - started))
        print(f"timings written to {args.results}")
    failing = count_failures(fixtures, isa, math) + len(unrun)
    return 1 if failing else 0


def _device_name() -> str:
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30)
        return done.stdout.strip().splitlines()[0] if done.returncode == 0 else "unknown GPU"
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown GPU"


if __name__ == "__main__":
    sys.exit(main())
