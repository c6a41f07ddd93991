"""Launch path up to the driver call: signatures from real fixtures, argument checks with fake
DLPack / CUDA Array Interface objects, the tileiras backend through the cache, import safety."""
import ctypes
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from conftest import SHARED  # noqa: E402

import tilebc
from tilebc_runtime import args as argmod
from tilebc_runtime import driver, launch
from tilebc_runtime.args import ArgumentError, ArrayParam, PointerParam, ScalarParam
from tilebc_runtime.cache import CubinCache

ROOT = Path(__file__).resolve().parents[2]
BYTECODE = ROOT / "fixtures" / "bytecode"
HAVE_TILEIRAS = launch.tool_path("tileiras") is not None


def fixture(name, version="13.5"):
    return BYTECODE / name / f"{name}-{version}.tilebc"


def only_kernel(name, **kwargs):
    module = launch.load(fixture(name), **kwargs)
    (entry,) = module.entries
    return module[entry]


# -- fake arrays ----------------------------------------------------------------------------------

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                             ("deleter", _DELETER)]
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_DL_CODES = {"i": 0, "u": 1, "f": 2, "b": 6}


class FakeDLPack:
    """A CUDA-resident tensor as DLPack describes it (legacy 'dltensor' capsule); the memory is
    never touched, so any address works."""

    def __init__(self, ptr, shape, dtype="float32", strides=None, device_id=0, device_type=2):
        dtype = np.dtype(dtype)
        self.ptr, self.shape, self.dtype = ptr, tuple(shape), dtype
        self.strides = strides if strides is not None else argmod._contiguous_strides(shape)
        self.device = (device_type, device_id)
        self.streams_seen = []
        self._alive = []

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        self.streams_seen.append(stream)
        ndim = len(self.shape)
        shape = (ctypes.c_int64 * ndim)(*self.shape)
        strides = (ctypes.c_int64 * ndim)(*self.strides)
        managed = _DLManagedTensor()
        managed.dl_tensor = _DLTensor(self.ptr, _DLDevice(*self.device), ndim,
                                      _DLDataType(_DL_CODES[self.dtype.kind], self.dtype.itemsize * 8, 1),
                                      shape, strides, 0)
        managed.deleter = _DELETER(lambda _: None)
        self._alive.append((managed, shape, strides))
        return _capsule_new(ctypes.addressof(managed), b"dltensor", None)


class FakeCAI:
    def __init__(self, ptr, shape, typestr="<f4", strides=None, stream=None, **extra):
        self.__cuda_array_interface__ = dict(shape=tuple(shape), typestr=typestr,
                                             data=(ptr, False), strides=strides, version=3,
                                             **({"stream": stream} if stream is not None else {}),
                                             **extra)


def device_zero(ptr):
    return 0


def prepare(kernel, *args, **kwargs):
    kwargs.setdefault("device_id", 0)
    kwargs.setdefault("dlpack_stream", 77)
    kwargs.setdefault("pointer_device", device_zero)
    return kernel.prepare(args, **kwargs)


BASE = 0x7F00_0000_0000


# -- signatures from real kernels -----------------------------------------------------------------

def test_signature_of_scalar_params_groups_array_and_scalars():
    kernel = only_kernel("scalar_params")
    kinds = [(type(p).__name__, p.describe()) for p in kernel.signature.params]
    # flat entry: ptr<f32>, i32, i32, f32, f64, i64, i16, i8, i1 (see the .dis beside it)
    listing = (BYTECODE / "scalar_params" / "scalar_params-13.5.dis").read_text()
    flat = re.findall(r"%arg\d+: tile<([^>]+>?)>", listing.splitlines()[0])
    assert kernel.signature.slot_count == len(flat) == 9
    assert kinds == [("ArrayParam", "array<?xf32, index i32>")] + \
        [("ScalarParam", t) for t in flat[3:]]


def test_signature_static_shape_index_type_and_facts():
    module = launch.load(fixture("load_store_static_shape"))
    static, wide = module.entries.values()
    assert static.params[0].static_shape == (128, 64) and static.params[0].static_strides == (64, 1)
    assert static.params[1].static_shape == (128, None)
    assert wide.params[0].index_type == "i64" and wide.params[0].rank == 2
    assert wide.params[0].pointer.facts == (argmod.Fact(divisor=16),)
    assert argmod.Fact(divisor=16) in wide.params[0].shape[0].facts
    assert argmod.Fact(lower=0) in wide.params[0].strides[1].facts


def test_every_fixture_entry_has_a_consistent_signature():
    for path in sorted(BYTECODE.glob("*/*-13.5.tilebc")):
        module = tilebc.load(path)
        for function in module.functions:
            signature = argmod.infer_signature(function)
            slots = [slot.index for param in signature.params for slot in param.slots]
            assert slots == list(range(len(function.args))), function.name
            arrays = sum(isinstance(p, ArrayParam) for p in signature.params)
            # cuTile's mangled name lists one 'A<rank>' per array parameter outside lists.
            mangled = re.findall(r"(?:^|_|T\d|[A-Za-z0-9])A(\d)", function.name.split("_K", 1)[1])
            assert arrays <= len(mangled), function.name


def test_raw_pointer_arrays_are_found_through_their_assumes():
    kernel = only_kernel("gather_scatter")
    assert [type(p) for p in kernel.signature.params] == [ArrayParam, ArrayParam, ArrayParam,
                                                          ScalarParam]


def test_arrays_at_pointers_whose_shape_and_strides_the_kernel_never_reads():
    """raw_memory reads x and y only through pointers, so cuTile left their shape and stride
    parameters without `assume` and the static signature shows bare pointers. An array given
    there fills them as well, as tilebc.interp.run does (found on an H100: the launch was refused)."""
    kernel = only_kernel("raw_memory")
    assert [type(p) for p in kernel.signature.params][:2] == [PointerParam, ScalarParam]
    x, y = FakeDLPack(BASE, (100,)), FakeDLPack(BASE + 4096, (100,))
    packed = prepare(kernel, x, y, 10)
    assert [v.item() for v in packed.values] == [BASE, 100, 1, BASE + 4096, 100, 1, 10]
    assert [type(v) for v in packed.values] == [np.uint64, np.int32, np.int32] * 2 + [np.int32]
    flat = prepare(kernel, x, 100, 1, y, 100, 1, 10)  # the flat form is still taken as it was
    assert [v.item() for v in flat.values] == [BASE, 100, 1, BASE + 4096, 100, 1, 10]
    with pytest.raises(ArgumentError, match="expected 7 arguments"):
        prepare(kernel, FakeDLPack(BASE, (10, 10)), y, 10)  # 2-D: no room for its layout


def test_torch_float8_tensors_are_read_without_dlpack(monkeypatch):
    """torch 2.11 refuses to export float8 through DLPack ("Unsupported AOTI dtype code: 24", seen
    on an H100); a torch CUDA tensor is then read from data_ptr / shape / stride / dtype, and the
    launch waits on torch's current stream."""
    import types
    current = types.SimpleNamespace(cuda_stream=0xabc)
    fake_torch = types.SimpleNamespace(__version__="0.0", cuda=types.SimpleNamespace(
        current_stream=lambda device: current, current_device=lambda: 0))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)

    class Tensor:
        __module__ = "torch"
        dtype = "torch.float8_e4m3fn"
        is_cuda = True
        device = types.SimpleNamespace(type="cuda", index=0)

        def __init__(self, ptr, shape, stride):
            self.ptr, self.shape, self._stride = ptr, shape, stride

        def __dlpack__(self, **kwargs):
            raise RuntimeError("Unsupported AOTI dtype code: 24")

        def __dlpack_device__(self):
            return (2, 0)

        def data_ptr(self):
            return self.ptr

        def stride(self):
            return self._stride

    kernel = only_kernel("matmul_fast_acc")
    a, b = Tensor(BASE, (64, 32), (32, 1)), Tensor(BASE + 8192, (32, 64), (64, 1))
    out = FakeDLPack(BASE + 65536, (64, 64))
    packed = prepare(kernel, a, b, out)
    assert [v.item() for v in packed.values[:5]] == [BASE, 64, 32, 32, 1]
    assert packed.producer_streams == [0xabc]
    Tensor.dtype = "torch.float32"  # a dtype the kernel does not take is still refused
    with pytest.raises(ArgumentError, match="float32"):
        prepare(kernel, Tensor(BASE, (64, 32), (32, 1)), b, out)


# -- packing --------------------------------------------------------------------------------------

def test_packed_values_follow_the_calling_convention_and_cuda_core_accepts_them():
    kernel = only_kernel("scalar_params")
    out = FakeDLPack(BASE, (1024,))
    packed = prepare(kernel, out, 1.5, 2.0, -3, 4, 200, True)
    expected = [np.uint64(BASE), np.int32(1024), np.int32(1), np.float32(1.5), np.float64(2.0),
                np.int64(-3), np.int16(4), np.int8(200 - 256), np.bool_(True)]
    assert [type(v) for v in packed.values] == [type(v) for v in expected]
    assert [v.item() for v in packed.values] == [v.item() for v in expected]
    assert out.streams_seen == [77]  # DLPack: the producer is told the consumer stream
    assert packed.keep_alive[0][0] is out
    from cuda.core._kernel_arg_handler import ParamHolder
    ParamHolder(tuple(packed.values))  # the driver-side packer takes every value as given


def test_strided_two_dimensional_view():
    kernel = only_kernel("reduce_rows")
    params = kernel.signature.params
    matrix = FakeDLPack(BASE, (64, 32), strides=(64, 2))
    dtypes = {"f32": "float32", "i32": "int32"}
    vectors = [FakeDLPack(BASE + (1 << 20) * (i + 1), (64,), dtypes[str(p.element)])
               for i, p in enumerate(params[1:])]
    packed = prepare(kernel, matrix, *vectors)
    assert [int(v) for v in packed.values[:5]] == [BASE, 64, 32, 64, 2]


@pytest.mark.parametrize("make_args, message", [
    (lambda: (FakeDLPack(BASE, (8,)),), "expected 7 arguments"),
    (lambda: (FakeDLPack(BASE, (8,), "float64"), 1.0, 1.0, 1, 1, 1, True),
     "array dtype float64 does not match the kernel's f32"),
    (lambda: (FakeDLPack(BASE, (8, 8)), 1.0, 1.0, 1, 1, 1, True),
     "array has rank 2, the kernel expects 1"),
    (lambda: (np.zeros(8, np.float32), 1.0, 1.0, 1, 1, 1, True), "ndarray is a host (CPU) array"),
    (lambda: (FakeDLPack(BASE, (8,), device_id=1), 1.0, 1.0, 1, 1, 1, True),
     "array is on device 1, the kernel launches on device 0"),
    (lambda: (FakeDLPack(BASE, (8,), strides=(-1,)), 1.0, 1.0, 1, 1, 1, True),
     "stride[0] = -1 must be within [0, ?]"),
    (lambda: (FakeDLPack(BASE, (8,)), 1.0, 1.0, 1.5, 1, 1, True), "expected an integer, got float"),
    (lambda: (FakeDLPack(BASE, (8,)), 1.0, 1.0, 1, 1 << 16, 1, True),
     "65536 does not fit in [-32768, 65535]"),
    (lambda: (FakeDLPack(BASE, (8,)), 1.0, 1.0, 1, 1, 1, 2), "expected a bool, got 2"),
    (lambda: (FakeDLPack(BASE, (8,)), "x", 1.0, 1, 1, 1, True), "expected a number, got str"),
    (lambda: (object(), 1.0, 1.0, 1, 1, 1, True),
     "expected an array with __dlpack__ or __cuda_array_interface__, got object"),
    (lambda: (FakeDLPack(BASE, (1 << 31,)), 1.0, 1.0, 1, 1, 1, True),
     "shape[0]: 2147483648 does not fit in [-2147483648, 2147483647]"),
])
def test_bad_arguments_are_refused_with_a_clear_message(make_args, message):
    kernel = only_kernel("scalar_params")
    with pytest.raises(ArgumentError) as caught:
        prepare(kernel, *make_args())
    assert message in str(caught.value)
    assert str(caught.value).startswith("scalar_params_K")


def test_static_shapes_and_divisibility_are_checked():
    static, wide = launch.load(fixture("load_store_static_shape")).entries.values()
    kernel = launch.load(fixture("load_store_static_shape"))[static.entry]
    good = FakeDLPack(BASE, (128, 64))
    prepare(kernel, good, FakeDLPack(BASE + (1 << 20), (128, 7)))
    with pytest.raises(ArgumentError, match="shape\\[1\\] is 32, the kernel was compiled for 64"):
        prepare(kernel, FakeDLPack(BASE, (128, 32)), FakeDLPack(BASE + (1 << 20), (128, 7)))
    with pytest.raises(ArgumentError, match="stride\\[1\\] is 2 elements, the kernel was compiled for 1"):
        prepare(kernel, FakeDLPack(BASE, (128, 64), strides=(64, 2)),
                FakeDLPack(BASE + (1 << 20), (128, 7)))
    kernel = launch.load(fixture("load_store_static_shape"))[wide.entry]
    prepare(kernel, FakeDLPack(BASE, (32, 16)), FakeDLPack(BASE + (1 << 20), (5, 3)))
    with pytest.raises(ArgumentError, match="shape\\[0\\] = 20 must be divisible by 16"):
        prepare(kernel, FakeDLPack(BASE, (20, 16)), FakeDLPack(BASE + (1 << 20), (5, 3)))
    with pytest.raises(ArgumentError, match="base address = .* must be divisible by 16"):
        prepare(kernel, FakeDLPack(BASE + 4, (32, 16)), FakeDLPack(BASE + (1 << 20), (5, 3)))


def test_overlapping_arrays_are_refused_unless_allowed():
    kernel = only_kernel("aliasing_arrays")
    first, second = FakeDLPack(BASE, (256,)), FakeDLPack(BASE + 1020, (16,))
    with pytest.raises(ArgumentError, match="arrays for arguments 0 and 1 overlap in memory"):
        prepare(kernel, first, second)
    prepare(kernel, first, second, allow_overlap=True)
    prepare(kernel, first, FakeDLPack(BASE + 1024, (16,)))  # adjacent is fine


def test_cuda_array_interface_arrays():
    kernel = only_kernel("aliasing_arrays")
    left = FakeCAI(BASE, (64,), strides=(8,), stream=5)
    packed = prepare(kernel, left, FakeCAI(BASE + 4096, (64,)))
    assert [int(v) for v in packed.values] == [BASE, 64, 2, BASE + 4096, 64, 1]
    assert packed.producer_streams == [5]
    assert packed.keep_alive[0] is left
    with pytest.raises(ArgumentError, match="pointer 0x7f0000000000 is host memory"):
        prepare(kernel, FakeCAI(BASE, (64,)), FakeCAI(BASE + 4096, (64,)),
                pointer_device=lambda ptr: -1)
    with pytest.raises(ArgumentError, match="stream 0 is not allowed"):
        prepare(kernel, FakeCAI(BASE, (64,), stream=0), FakeCAI(BASE + 4096, (64,)))
    with pytest.raises(ArgumentError, match="byte strides \\(6,\\) are not multiples"):
        prepare(kernel, FakeCAI(BASE, (64,), strides=(6,)), FakeCAI(BASE + 4096, (64,)))
    with pytest.raises(ArgumentError, match="masked arrays"):
        prepare(kernel, FakeCAI(BASE, (64,), mask=FakeCAI(0, (64,))), FakeCAI(BASE + 4096, (64,)))
    with pytest.raises(ArgumentError, match="array dtype int32 does not match the kernel's f32"):
        prepare(kernel, FakeCAI(BASE, (64,), typestr="<i4"), FakeCAI(BASE + 4096, (64,)))


def test_grid_and_entry_errors():
    module = launch.load(fixture("aliasing_arrays"))
    with pytest.raises(KeyError, match="no entry 'nope'"):
        module["nope"]
    kernel = module[next(iter(module.entries))]
    for grid in (0, (1, 2, 3, 4), (2.0,), ()):
        with pytest.raises(launch.LaunchError, match="grid must be 1 to 3 positive ints"):
            kernel[grid]


# -- backends and the cache ---------------------------------------------------------------------

@pytest.mark.skipif(not HAVE_TILEIRAS, reason="needs NVIDIA tileiras")
def test_tileiras_backend_compiles_through_the_cache(tmp_path, monkeypatch):
    cache = CubinCache(tmp_path / "cache")
    kernel = only_kernel("matmul_f16", backend="tileiras", cache=cache)
    entry = kernel.compile("sm_90")
    assert entry.cubin[:4] == b"\x7fELF"
    ptx_tool = Path(os.environ.get("TILEBC_TILEIRAS_PTX", SHARED / "tools" / "tileiras-ptx"))
    if ptx_tool.exists():  # NVIDIA's own PTX states the block size the cubin must carry
        subprocess.run(["bash", str(ptx_tool), str(fixture("matmul_f16")), "--gpu-name=sm_90",
                        str(tmp_path / "k.ptx")], capture_output=True, check=True,
                       env={**os.environ,  # the tool finds the nvidia wheel through python3
                            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"})
        reqntid = re.search(r"\.reqntid (\d+)", (tmp_path / "k.ptx").read_text())
        assert entry.threads == int(reqntid.group(1))
    assert entry.threads and entry.shared_bytes > 0
    assert entry.metadata["fields"]["toolchain"].startswith("tileiras/13.")
    # Another process: a disk hit, tileiras is not run again.
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("recompiled"))
    again = only_kernel("matmul_f16", backend="tileiras", cache=CubinCache(tmp_path / "cache"))
    assert again.compile("sm_90").cubin == entry.cubin
    assert CubinCache(tmp_path / "cache").toolchain()["backends"]["tileiras"]["identity"] == \
        entry.metadata["fields"]["toolchain"]


@pytest.mark.skipif(not HAVE_TILEIRAS, reason="needs NVIDIA tileiras")
def test_tileiras_errors_and_options(tmp_path):
    kernel = only_kernel("vector_add" if fixture("vector_add").exists() else "gdc",
                         backend="tileiras", cache=CubinCache(None), options={"opt_level": 7})
    with pytest.raises(launch.LaunchError, match="unknown or invalid option opt_level=7"):
        kernel.compile("sm_90")
    kernel = only_kernel("gdc", backend="tileiras", cache=CubinCache(None))
    with pytest.raises(launch.LaunchError, match="tileiras failed for entry .* \\(sm_5\\)"):
        kernel.compile("sm_5")


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(launch.LaunchError, match="unknown backend 'cuda'"):
        launch.load(fixture("gdc"), backend="cuda")


def test_jit_backend_compiles_through_the_cache(tmp_path):
    """Default backend: our JIT's cubin lands in the cache with its launch facts, and a second
    module over the same bytes hits the cache instead of compiling again."""
    import tilebc_runtime
    cache = CubinCache(tmp_path / "cache")
    module = launch.load(fixture("gdc"), cache=cache)
    name = "gdc_Kt1_A1f32_1l0_A1f32_1l0_I32"
    entry = module[name].compile("sm_90")
    assert entry.cubin[:4] == b"\x7fELF"
    direct = tilebc_runtime.compile(fixture("gdc"), name, "sm_90", emit="cubin")
    assert entry.metadata["threads_per_cta"] == direct.threads_per_cta
    assert entry.metadata["fields"]["ptx_isa"] == tilebc_runtime.ptx_isa_for("sm_90")
    assert len(cache.disk_entries()) == 1
    again = launch.load(fixture("gdc"), cache=CubinCache(tmp_path / "cache"))[name].compile("sm_90")
    assert again.cubin == entry.cubin and len(cache.disk_entries()) == 1


def test_lowering_hash_ignores_launcher_files():
    digest = launch.lowering_sources_hash()
    assert re.fullmatch(r"[0-9a-f]{64}", digest)
    assert "launch.py" in launch._NOT_LOWERING and "cache.py" in launch._NOT_LOWERING


def test_malformed_bytecode_names_the_file(tmp_path):
    bad = tmp_path / "bad.tilebc"
    bad.write_bytes(fixture("gdc").read_bytes()[:40])
    with pytest.raises(tilebc.DecodeError, match="bad.tilebc"):
        launch.load(bad)


# -- driver discipline -------------------------------------------------------------------------

def test_import_does_not_touch_cuda():
    code = ("import sys, tilebc_runtime.launch, tilebc_runtime.cache, tilebc_runtime.driver;"
            "print(sorted(m for m in sys.modules if m.startswith('cuda')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'runtime'}"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_use_after_fork_is_refused(monkeypatch):
    monkeypatch.setattr(driver, "_initialised_pid", os.getpid() + 1)
    with pytest.raises(driver.DriverError, match="is a fork of it and cannot use CUDA"):
        driver.device(0)


def test_driver_failures_name_the_call(monkeypatch):
    def failing():
        raise RuntimeError("CUDA_ERROR_NO_DEVICE")
    with pytest.raises(driver.DriverError, match="^cuInit failed: RuntimeError: CUDA_ERROR_NO_DEVICE"):
        driver.call("cuInit", failing)
    from cuda.bindings import driver as cu
    with pytest.raises(driver.DriverError,
                       match=r"^cuModuleLoadData failed: CUDA_ERROR_INVALID_IMAGE \(200\)"):
        driver.check("cuModuleLoadData", (cu.CUresult.CUDA_ERROR_INVALID_IMAGE, None))
    assert driver.check("cuCtxGetDevice", (cu.CUresult.CUDA_SUCCESS, 3)) == 3


def test_launch_without_a_gpu_fails_before_launching(monkeypatch):
    try:
        driver.device(0)
        pytest.skip("a GPU is present")
    except driver.DriverError as error:
        assert str(error).startswith("cuda.core.Device failed:")
    kernel = only_kernel("gdc")
    with pytest.raises(driver.DriverError, match="cuda.core.Device failed"):
        kernel[(4,)](FakeDLPack(BASE, (8,)), FakeDLPack(BASE + 4096, (8,)))


# -- the driver wrapper ------------------------------------------------------------------------------

def test_driver_call_passes_name_and_function_keywords_through():
    from tilebc_runtime import driver
    assert driver.call("label", lambda name, function: (name, function), name="n", function="f") == ("n", "f")


@pytest.mark.parametrize("message", [
    "Device.sync failed: CUDAError: cudaErrorLaunchFailure: An exception occurred on the device",
    "cuCtxSynchronize failed: CUDA_ERROR_LAUNCH_FAILED"])
def test_a_device_fault_in_either_spelling_marks_the_context_lost(monkeypatch, message):
    """cuda.core 1.x reports a trapped kernel as cudaErrorLaunchFailure (seen on an H100 after a
    device assert), the driver as CUDA_ERROR_LAUNCH_FAILED: both leave the context unusable."""
    from tilebc_runtime import driver
    monkeypatch.setattr(driver, "_lost", None)
    assert isinstance(driver._failed(message), driver.ContextLost)
    with pytest.raises(driver.ContextLost, match="restart the process"):
        driver.call("next", lambda: None)


def test_load_kernel_names_the_cubin_after_its_entry(monkeypatch):
    """ObjectCode.from_cubin takes `name=`: it must reach cuda.core, not driver.call's own label."""
    import cuda.core
    from tilebc_runtime import driver
    seen = {}

    class FakeObjectCode:
        @staticmethod
        def from_cubin(cubin, *, name=""):
            seen["from_cubin"] = (cubin, name)
            return FakeObjectCode()

        def get_kernel(self, entry):
            seen["get_kernel"] = entry
            return "kernel"

    monkeypatch.setattr(cuda.core, "ObjectCode", FakeObjectCode)
    assert driver.load_kernel(b"\x7fELF", "vadd") == "kernel"
    assert seen == {"from_cubin": (b"\x7fELF", "vadd"), "get_kernel": "vadd"}


def test_interleaved_arrays_that_share_no_byte_are_not_an_overlap():
    """The two halves of a [4, 64] tensor's last dimension (torch's chunk(2, dim=-1), which
    NVIDIA's MoE sample passes to one kernel) interleave in memory without sharing a byte: not an
    overlap. Halves shifted by 16 elements share bytes, and an overlap between the first and
    third array in address order is found past a disjoint one between them."""
    signature = type("Signature", (), {"entry": "k"})()

    def view(offset, shape=(4, 32), strides=(64, 1)):
        return argmod.ArrayView(BASE + offset, shape, strides, np.dtype("float32"), 0, False, None)
    argmod._check_no_overlap(signature, [("0", view(0)), ("1", view(128))])
    with pytest.raises(ArgumentError, match="arguments 0 and 1 overlap in memory"):
        argmod._check_no_overlap(signature, [("0", view(0)), ("1", view(64))])
    with pytest.raises(ArgumentError, match="arguments 0 and 2 overlap in memory"):
        argmod._check_no_overlap(signature, [("0", view(0, (2, 16))), ("1", view(128, (1, 16))),
                                             ("2", view(288, (1, 8)))])
