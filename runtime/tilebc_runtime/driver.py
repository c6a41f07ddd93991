"""The CUDA driver, opened lazily through cuda.core; every call checked and named in its error.

Importing this module touches neither cuda.core nor the driver. A process that initialised CUDA
and then forked refuses to use it in the child (a CUDA context does not survive fork).
"""
from __future__ import annotations

import os
import _thread
from collections.abc import Callable

from .launch_errors import LaunchError

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every command's start ~3 ms
    from typing import Any


class DriverError(LaunchError):
    """A CUDA driver call failed, or CUDA cannot be used in this process."""


class ContextLost(DriverError):
    """An earlier device fault left the CUDA context unusable; only a new process can use CUDA."""


# Errors after which the driver refuses all further work in the context (the CUDA documentation
# says of each: "the process must be terminated and relaunched").
STICKY_ERRORS = ("CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_TIMEOUT", "CUDA_ERROR_ASSERT",
                 "CUDA_ERROR_HARDWARE_STACK_ERROR", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
                 "CUDA_ERROR_MISALIGNED_ADDRESS", "CUDA_ERROR_INVALID_ADDRESS_SPACE",
                 "CUDA_ERROR_INVALID_PC", "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_ECC_UNCORRECTABLE",
                 # the same errors as cuda.core 1.x names them (runtime-API spelling)
                 "cudaErrorIllegalAddress", "cudaErrorLaunchTimeout", "cudaErrorAssert",
                 "cudaErrorHardwareStackError", "cudaErrorIllegalInstruction",
                 "cudaErrorMisalignedAddress", "cudaErrorInvalidAddressSpace", "cudaErrorInvalidPc",
                 "cudaErrorLaunchFailure", "cudaErrorECCUncorrectable")

_lost: str | None = None  # the failure that made the context unusable


def ensure_usable() -> None:
    """Raise ContextLost when an earlier sticky error has made the context unusable."""
    if _lost is not None:
        raise ContextLost(f"the CUDA context is unusable after {_lost}; restart the process")


def _failed(message: str) -> DriverError:
    """The error for a failed call; a sticky one marks the context unusable from now on."""
    global _lost
    if any(name in message for name in STICKY_ERRORS):
        if _lost is None:
            _lost = message
        return ContextLost(f"{message}; the CUDA context is now unusable: restart the process")
    return DriverError(message)


_lock = _thread.allocate_lock()  # threading.Lock itself; importing threading costs start-up
_initialised_pid: int | None = None
_devices: dict = {}
_zero_scratch: dict = {}  # device id -> (address, cuda.core Buffer), kept for the process


def _forget_after_fork() -> None:
    # The child keeps _initialised_pid (the parent's) so that use is refused with a clear message.
    _devices.clear()
    _zero_scratch.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def call(name: str, function: Callable, /, *args, **kwargs):
    """Run one cuda.core / driver call, turning any failure into a DriverError naming the call
    (positional-only, so that `name=` and `function=` reach the callee: from_cubin takes name=).
    Refused up front (ContextLost) once a device fault has made the context unusable."""
    ensure_usable()
    try:
        return function(*args, **kwargs)
    except DriverError:
        raise
    except Exception as error:  # cuda.core raises CUDAError, pathfinder raises its own types
        raise _failed(f"{name} failed: {type(error).__name__}: {error}") from error


def check(name: str, result: tuple) -> Any:
    """Check a cuda.bindings.driver result tuple (CUresult, *values); return the values."""
    from cuda.bindings import driver
    status, *values = result if isinstance(result, tuple) else (result,)
    if status != driver.CUresult.CUDA_SUCCESS:
        text = getattr(status, "name", None) or str(status)  # the enum name, no further driver call
        raise _failed(f"{name} failed: {text} ({int(status)})")
    return values[0] if len(values) == 1 else tuple(values)


def device(device_id: int | None = None):
    """The cuda.core Device, made current; the driver is initialised on first use."""
    global _initialised_pid
    ensure_usable()
    with _lock:
        pid = os.getpid()
        if _initialised_pid is not None and _initialised_pid != pid:
            raise DriverError(f"CUDA was initialised in process {_initialised_pid}; process {pid} "
                              "is a fork of it and cannot use CUDA (start workers with "
                              "multiprocessing's 'spawn' method)")
        key = -1 if device_id is None else device_id
        if key not in _devices:
            from cuda.core import Device
            handle = call("cuda.core.Device", Device, device_id)
            call("Device.set_current", handle.set_current)
            _initialised_pid = pid
            _devices[key] = handle
            _devices.setdefault(handle.device_id, handle)
        return _devices[key]


def arch_of(handle) -> str:
    major, minor = call("Device.compute_capability", lambda: tuple(handle.compute_capability))
    return f"sm_{major}{minor}"


def pointer_device(ptr: int) -> int:
    """The device ordinal owning `ptr`, or -1 for memory the driver does not know (host)."""
    from cuda.bindings import driver
    ensure_usable()
    status, ordinal = driver.cuPointerGetAttribute(
        driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr)
    if status == driver.CUresult.CUDA_ERROR_INVALID_VALUE:
        return -1
    return check("cuPointerGetAttribute(DEVICE_ORDINAL)", (status, ordinal))


def resolve_stream(stream: Any, handle) -> tuple[Any, int]:
    """(cuda.core Stream, the stream's number in DLPack's convention) for a launch.

    Accepts None (the device's default stream), a cuda.core Stream, any object with
    `__cuda_stream__` (torch, cupy) or a raw CUstream handle as an int."""
    from cuda.core import Stream
    if stream is None:
        stream = handle.default_stream
    elif isinstance(stream, int):
        stream = call("Stream.from_handle", Stream.from_handle, stream)
    elif not isinstance(stream, Stream):
        if not hasattr(stream, "__cuda_stream__"):
            raise LaunchError(f"stream: expected None, a cuda.core Stream, an object with "
                              f"__cuda_stream__ or an int handle, got {type(stream).__name__}")
        stream = call("Device.create_stream", handle.create_stream, stream)
    raw = int(stream.handle)
    # DLPack: 1 is the legacy default stream, 2 the per-thread one; 0 is not allowed.
    return stream, 1 if raw == 0 else raw


def wait_for_producers(stream, producer_streams: list[int]) -> None:
    """Order `stream` after the streams CUDA Array Interface producers named (CAI v3 rule)."""
    from cuda.bindings import driver
    ensure_usable()
    for producer in producer_streams:
        raw = 0 if producer == 1 else producer  # CAI 1 = legacy default, 2 = per-thread
        if raw == int(stream.handle):
            continue
        event = check("cuEventCreate", driver.cuEventCreate(
            driver.CUevent_flags.CU_EVENT_DISABLE_TIMING))
        try:
            check("cuEventRecord", driver.cuEventRecord(event, driver.CUstream(raw)))
            check("cuStreamWaitEvent", driver.cuStreamWaitEvent(driver.CUstream(int(stream.handle)),
                                                                event, 0))
        finally:
            check("cuEventDestroy", driver.cuEventDestroy(event))


class KeepAlive:
    """Holds launch arguments until an event recorded after the kernel has completed."""

    def __init__(self):
        self._pending: list[tuple[Any, list[Any]]] = []

    def hold(self, stream, objects: list[Any]) -> None:
        self.reap()
        if objects:
            event = call("Stream.record", stream.record)
            self._pending.append((event, objects))

    def reap(self) -> None:
        self._pending = [(event, objects) for event, objects in self._pending
                         if not call("Event.is_done", lambda: event.is_done)]

    def __len__(self) -> int:
        return len(self._pending)


def upload(handle, stream, host) -> tuple[int, Any]:
    """Copy a host numpy array to new device memory, ordered on `stream`: (address, owner).
    The owner (device buffer and host array) must live until the stream has used the copy."""
    from cuda.bindings import driver
    buffer = call("Device.allocate", handle.allocate, max(host.nbytes, 1), stream=stream)
    address = int(buffer.handle)
    check("cuMemcpyHtoDAsync", driver.cuMemcpyHtoDAsync(
        address, host.ctypes.data, host.nbytes, driver.CUstream(int(stream.handle))))
    return address, (buffer, host)


def zero_scratch(handle, stream, nbytes: int) -> int:
    """The address of a zeroed buffer of `nbytes` on device `handle`, allocated and zeroed once
    per device and kept for the process (TMA maps over empty arrays point at it:
    tensor_maps.over_zeros). The first call waits for the zeroing, so any stream may use it."""
    held = _zero_scratch.get(handle.device_id)
    if held is None:  # made outside the lock: the sync must not hold up other threads' device()
        from cuda.bindings import driver
        buffer = call("Device.allocate", handle.allocate, nbytes, stream=stream)
        address = int(buffer.handle)
        check("cuMemsetD8Async", driver.cuMemsetD8Async(
            address, 0, nbytes, driver.CUstream(int(stream.handle))))
        call("Stream.sync", stream.sync)
        with _lock:  # a thread that raced here first keeps its buffer; this one is dropped
            held = _zero_scratch.setdefault(handle.device_id, (address, buffer))
    return held[0]


def load_kernel(cubin: bytes, entry: str):
    from cuda.core import ObjectCode
    code = call("ObjectCode.from_cubin", ObjectCode.from_cubin, cubin, name=entry)
    return call(f"ObjectCode.get_kernel({entry!r})", code.get_kernel, entry)


# Dynamic shared memory a launch may request without opting the kernel in to more.
DEFAULT_DYNAMIC_SHARED_LIMIT = 48 * 1024


def allow_dynamic_shared(handle, kernel, dynamic_bytes: int, static_bytes: int = 0) -> None:
    """Opt a loaded kernel in to `dynamic_bytes` of dynamic shared memory on device `handle`
    (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES; launches past 48 KiB fail without it).
    Call once per loaded kernel and device; a no-op up to 48 KiB."""
    if dynamic_bytes <= DEFAULT_DYNAMIC_SHARED_LIMIT:
        return
    from cuda.bindings import driver
    limit = call("Device.properties", lambda: handle.properties.max_shared_memory_per_block_optin)
    if dynamic_bytes + static_bytes > limit:
        raise _failed(f"the kernel needs {dynamic_bytes + static_bytes} bytes of shared memory "
                      f"per CTA ({dynamic_bytes} dynamic), over the {limit} bytes device "
                      f"{handle.device_id} allows (max_shared_memory_per_block_optin)")
    # cuda.core kernels are context-independent CUkernel handles: set it for this device
    attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    check("cuKernelSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
          call("cuKernelSetAttribute", driver.cuKernelSetAttribute, attribute, int(dynamic_bytes),
               kernel.handle, driver.CUdevice(handle.device_id)))


def launch_config(grid: tuple[int, int, int], threads: int, shared_bytes: int):
    from cuda.core import LaunchConfig
    # Static shared memory is part of the cubin; the launch only asks for dynamic shared memory.
    return call("LaunchConfig", LaunchConfig, grid=grid, block=(threads, 1, 1),
                shmem_size=shared_bytes)


def launch_with(stream, config, kernel, values: list[Any]) -> None:
    from cuda.core import launch as core_launch
    call("cuda.core.launch", core_launch, stream, config, kernel, *values)


def launch(stream, grid: tuple[int, int, int], threads: int, shared_bytes: int, kernel,
           values: list[Any]) -> None:
    launch_with(stream, launch_config(grid, threads, shared_bytes), kernel, values)


class RawLaunch:
    """One kernel launch through cuLaunchKernel, its parameter block built once so that each
    `launch()` is a single driver call (building the block costs ~50 us of Python per launch,
    more than a small kernel runs). Parameters: `values` (numpy scalars, as
    args.pack_arguments makes them) then `blobs` (ctypes objects passed by value: tensor maps,
    128 bytes each, which cuda.core's launch does not take as raw bytes)."""

    def __init__(self, stream, grid: tuple[int, int, int], threads: int, shared_bytes: int,
                 kernel, values: list[Any], blobs: list[Any]):
        import ctypes
        from cuda.bindings import driver as cu
        self._storage = [ctypes.create_string_buffer(value.tobytes(), max(value.nbytes, 1))
                         for value in values] + list(blobs)
        self._pointers = (ctypes.c_void_p * len(self._storage))(
            *[ctypes.addressof(item) for item in self._storage])
        function = cu.CUfunction(int(kernel.handle))  # a CUkernel launches as a CUfunction
        self._call = cu.cuLaunchKernel
        self._arguments = (function, *grid, threads, 1, 1, shared_bytes,
                           cu.CUstream(int(stream.handle)), ctypes.addressof(self._pointers), 0)

    def launch(self) -> None:
        ensure_usable()
        check("cuLaunchKernel", self._call(*self._arguments))
