"""Kernel.bind / BoundLaunch and Kernel.launch against a fake driver: what reaches the driver,
how often arguments are packed, and how long they are kept alive."""
import os
import types
from pathlib import Path

import numpy as np
import pytest

import tilebc
from tilebc_runtime import driver, launch

from test_rt_launch import BASE, FakeCAI, FakeDLPack, only_kernel


_REAL = {name: getattr(driver, name) for name in ("device", "pointer_device",
                                                  "wait_for_producers", "launch_with")}


class FakeEvent:
    def __init__(self, stream, done=False):
        self.stream, self.is_done, self.at = stream, done, len(stream.log)

    def __sub__(self, other):  # elapsed milliseconds, as cuda.core's Event does
        return float(self.at - other.at)

    def sync(self):
        self.is_done = True


class FakeStream:
    def __init__(self, handle=0x5151):
        self.handle = handle
        self.log = []
        self.events = []

    def record(self, options=None):
        self.events.append(FakeEvent(self))
        return self.events[-1]

    def sync(self):
        for event in self.events:
            event.is_done = True


class FakeDriver:
    """Stands in for the driver calls the launcher makes; records launches and waits."""

    def __init__(self, monkeypatch):
        self.stream = FakeStream()
        self.handle = types.SimpleNamespace(device_id=0)
        self.launches, self.waits, self.configs = [], [], []
        entry = types.SimpleNamespace(threads=128, dynamic_shared_bytes=0, static_shared_bytes=0,
                                      cubin=b"\x7fELF", tensor_maps=())
        self.entry = entry
        monkeypatch.setattr(driver, "device", lambda device_id=None: self.handle)
        monkeypatch.setattr(driver, "resolve_stream", lambda stream, handle: (self.stream, 77))
        monkeypatch.setattr(driver, "arch_of", lambda handle: "sm_90")
        monkeypatch.setattr(driver, "pointer_device", lambda ptr: 0)
        monkeypatch.setattr(driver, "load_kernel", lambda cubin, name: ("function", name))
        monkeypatch.setattr(launch.Kernel, "compile", lambda kernel, arch: entry)
        monkeypatch.setattr(driver, "launch_config", self._config)
        monkeypatch.setattr(driver, "launch_with", self._launch)
        monkeypatch.setattr(driver, "wait_for_producers", lambda s, streams: self.waits.append(
            list(streams)))

    def _config(self, grid, threads, shared):
        self.configs.append((grid, threads, shared))
        return (grid, threads, shared)

    def _launch(self, stream, config, function, values):
        assert stream is self.stream
        self.launches.append((config, function, [v.item() for v in values]))
        stream.log.append("launch")


@pytest.fixture
def fake_driver(monkeypatch):
    return FakeDriver(monkeypatch)


def test_bind_packs_once_and_launches_many_times(fake_driver):
    kernel = only_kernel("aliasing_arrays")
    left, right = FakeDLPack(BASE, (64,)), FakeDLPack(BASE + 4096, (64,))
    bound = kernel.bind((3, 2), left, right)
    for _ in range(3):
        bound.launch()
    assert left.streams_seen == [77]  # DLPack export (and all checks) happened once
    assert fake_driver.configs == [((3, 2, 1), 128, 0)]
    assert len(fake_driver.launches) == 3
    config, function, values = fake_driver.launches[-1]
    assert function == ("function", kernel.entry)
    assert values == [BASE, 64, 1, BASE + 4096, 64, 1]
    assert [int(v) for v in bound.values] == values
    # Alive while bound; handed to the keep-alive list on release until the stream passes.
    assert len(kernel._keep_alive) == 0
    bound.release()
    assert len(kernel._keep_alive) == 1
    bound.release()  # nothing launched since: nothing more to hold
    assert len(kernel._keep_alive) == 1
    fake_driver.stream.sync()
    kernel._keep_alive.reap()
    assert len(kernel._keep_alive) == 0


def test_bind_checks_arguments_before_the_driver(fake_driver):
    kernel = only_kernel("aliasing_arrays")
    with pytest.raises(launch.ArgumentError, match="overlap in memory"):
        kernel.bind(1, FakeDLPack(BASE, (64,)), FakeDLPack(BASE + 8, (64,)))
    kernel.bind(1, FakeDLPack(BASE, (64,)), FakeDLPack(BASE + 8, (64,)), allow_overlap=True)
    with pytest.raises(launch.LaunchError, match="grid must be 1 to 3 positive ints"):
        kernel.bind((0,), FakeDLPack(BASE, (64,)), FakeDLPack(BASE + 4096, (64,)))
    assert fake_driver.launches == []


def test_cai_producers_are_waited_for_once_per_binding(fake_driver):
    kernel = only_kernel("aliasing_arrays")
    bound = kernel.bind(1, FakeCAI(BASE, (64,), stream=5), FakeCAI(BASE + 4096, (64,)))
    bound.launch()
    bound.launch()
    assert fake_driver.waits == [[5]]


def test_launch_and_subscript_go_through_a_binding(fake_driver):
    kernel = only_kernel("aliasing_arrays")
    kernel.launch(4, FakeDLPack(BASE, (64,)), FakeDLPack(BASE + 4096, (64,)))
    kernel[(2, 2)](FakeDLPack(BASE, (8,)), FakeDLPack(BASE + 4096, (8,)))
    assert [c for c, _, _ in fake_driver.launches] == [((4, 1, 1), 128, 0), ((2, 2, 1), 128, 0)]
    assert len(kernel._keep_alive) == 2  # each single launch holds its arrays until done


def test_with_block_releases(fake_driver):
    kernel = only_kernel("aliasing_arrays")
    with kernel.bind(1, FakeDLPack(BASE, (64,)), FakeDLPack(BASE + 4096, (64,))) as bound:
        bound.launch()
        assert len(kernel._keep_alive) == 0
    assert len(kernel._keep_alive) == 1


def test_bench_time_launch_uses_a_binding(fake_driver, monkeypatch):
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import bench_gpu
    monkeypatch.setattr(bench_gpu, "_timed_event", lambda stream: stream.record())
    kernel = only_kernel("aliasing_arrays")
    micros = bench_gpu.time_launch(kernel, (2,), [FakeDLPack(BASE, (64,)),
                                                  FakeDLPack(BASE + 4096, (64,))],
                                   repeat=4, warmup=2, batch=5)
    assert len(fake_driver.launches) == 2 + 4 * 5
    assert micros == pytest.approx(1000.0)  # the fake clock: 1 "ms" per launch -> 1000 us
    assert len({tuple(v) for _, _, v in fake_driver.launches}) == 1


# -- list-of-arrays parameters ------------------------------------------------------------------

@pytest.fixture
def uploads(fake_driver, monkeypatch):
    tables = []

    def upload(handle, stream, table):
        assert stream is fake_driver.stream  # ordered on the launch stream
        tables.append(table)
        return 0xD000_0000 + 0x1000 * len(tables), ("device table", len(tables))
    monkeypatch.setattr(driver, "upload", upload)
    return tables


def test_list_parameter_is_recognised():
    kernel = only_kernel("array_list")
    first = kernel.signature.params[0]
    assert type(first).__name__ == "ListParam" and first.rank == 1 and str(first.element) == "f32"
    assert str(kernel.signature).endswith("(0: list<array<?xf32>>, 1: array<?xf32, index i32>)")


def test_list_argument_table_matches_the_interpreters(fake_driver, uploads):
    from tilebc.interp.api import Binder
    from tilebc.interp.memory import GlobalMemory
    kernel = only_kernel("array_list")
    hosts = [np.zeros(40, np.float32), np.zeros(64, np.float32)[::2], np.zeros(33, np.float32)]
    items = [FakeDLPack(BASE + ((i + 1) << 20), h.shape, strides=[s // 4 for s in h.strides])
             for i, h in enumerate(hosts)]
    out = FakeDLPack(BASE, (32,))
    bound = kernel.bind(1, items, out)
    bound.launch()
    _, _, values = fake_driver.launches[0]
    assert values == [0xD000_1000, 3, BASE, 32, 1]
    (table,) = uploads
    assert table.dtype == np.int64 and table.shape == (3, 3)
    assert table[:, 0].tolist() == [item.ptr for item in items]
    # The interpreter lays out the same rows for the same arrays (its addresses are its own).
    function = kernel.module.module.functions[0]
    reference = Binder(function, GlobalMemory()).array_list(hosts, "arrays")
    assert table[:, 1:].tolist() == reference[:, 1:].tolist()
    bound.release()
    (_, held), = kernel._keep_alive._pending
    assert any(h is table for h in held)
    assert any(isinstance(h, tuple) and h == ("device table", 1) for h in held)
    assert sum(isinstance(h, tuple) and any(h[0] is item for item in items) for h in held) == 3


def test_list_argument_errors(fake_driver, uploads):
    kernel = only_kernel("array_list")
    out = FakeDLPack(BASE, (32,))
    with pytest.raises(launch.ArgumentError, match=r"argument 0 \(list<array<\?xf32>>\): "
                       "expected a list of arrays, got FakeDLPack"):
        kernel.bind(1, FakeDLPack(BASE + (1 << 20), (8,)), out)
    with pytest.raises(launch.ArgumentError, match="item 1: array has rank 2, the kernel expects 1"):
        kernel.bind(1, [FakeDLPack(BASE + (1 << 20), (8,)), FakeDLPack(BASE + (2 << 20), (8, 8))],
                    out)
    with pytest.raises(launch.ArgumentError, match="item 0: array dtype float64 does not match "
                       "the kernel's f32"):
        kernel.bind(1, [FakeDLPack(BASE + (1 << 20), (8,), "float64")], out)
    with pytest.raises(launch.ArgumentError, match=r"arrays for arguments 0\[0\] and 0\[1\] "
                       "overlap"):
        kernel.bind(1, [FakeDLPack(BASE + (1 << 20), (8,)), FakeDLPack(BASE + (1 << 20) + 4, (8,))],
                    out)
    assert uploads == [] and fake_driver.launches == []  # nothing reached the device


def test_empty_list_needs_no_table(fake_driver, uploads):
    kernel = only_kernel("array_list")
    kernel.launch(1, [], FakeDLPack(BASE, (32,)))
    assert fake_driver.launches[0][2][:2] == [0, 0] and uploads == []


def test_list_without_a_device_is_refused():
    kernel = only_kernel("array_list")
    with pytest.raises(launch.ArgumentError, match="needs a device to hold its table"):
        kernel.prepare(([FakeDLPack(BASE + (1 << 20), (8,))], FakeDLPack(BASE, (32,))),
                       device_id=0, dlpack_stream=77, pointer_device=lambda ptr: 0)


# -- sticky device faults -----------------------------------------------------------------------

@pytest.fixture
def fresh_context(monkeypatch):
    monkeypatch.setattr(driver, "_lost", None)


def test_a_sticky_fault_makes_every_later_call_say_restart(fake_driver, fresh_context, monkeypatch):
    def fault():
        raise RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered")
    kernel = only_kernel("aliasing_arrays")
    args = (FakeDLPack(BASE, (64,)), FakeDLPack(BASE + 4096, (64,)))
    bound = kernel.bind(1, *args)
    bound.launch()  # the fault surfaces later, at a synchronising call
    with pytest.raises(driver.ContextLost, match="^Stream.sync failed: RuntimeError: "
                       "CUDA_ERROR_ILLEGAL_ADDRESS.*; the CUDA context is now unusable: restart"):
        driver.call("Stream.sync", fault)
    later = "^the CUDA context is unusable after Stream.sync failed: .*ILLEGAL_ADDRESS.*; " \
            "restart the process$"
    touched = []
    for attempt in (lambda: driver.call("Event.is_done", lambda: touched.append(1)),
                    lambda: _REAL["device"](0), lambda: _REAL["pointer_device"](BASE),
                    lambda: _REAL["wait_for_producers"](fake_driver.stream, [5]),
                    lambda: _REAL["launch_with"](fake_driver.stream, None, None, [])):
        with pytest.raises(driver.ContextLost, match=later):
            attempt()
    assert touched == []  # refused before reaching the driver
    monkeypatch.setattr(driver, "device", _REAL["device"])
    with pytest.raises(driver.ContextLost, match=later):
        kernel.launch(1, *args)
    bound.release()  # no event can be recorded now: the arguments simply stay referenced
    assert isinstance(driver.ContextLost("x"), launch.LaunchError)


def test_sticky_status_codes_and_ordinary_failures(fresh_context):
    from cuda.bindings import driver as cu
    with pytest.raises(driver.DriverError) as caught:
        driver.check("cuMemAlloc", (cu.CUresult.CUDA_ERROR_OUT_OF_MEMORY, None))
    assert not isinstance(caught.value, driver.ContextLost)
    driver.ensure_usable()  # out of memory is not sticky
    with pytest.raises(driver.ContextLost, match=r"^cuCtxSynchronize failed: "
                       r"CUDA_ERROR_ASSERT \(710\); the CUDA context is now unusable"):
        driver.check("cuCtxSynchronize", (cu.CUresult.CUDA_ERROR_ASSERT, None))
    with pytest.raises(driver.ContextLost, match="unusable after cuCtxSynchronize failed: "
                       "CUDA_ERROR_ASSERT"):
        driver.ensure_usable()



# -- cache keys follow the original bytes -------------------------------------------------------

CPP_TOOLS = sorted(Path(__file__).resolve().parents[2].glob("runtime/cpp/build/*/tilebc-inspect"))


def _cpp_keys(path, kernel, fields):
    """tilebc-inspect's keys for `path` (runtime/cpp), or None when it is not built."""
    import json
    import subprocess
    if not CPP_TOOLS:
        return None
    done = subprocess.run([str(CPP_TOOLS[0]), "key", "--toolchain", fields.toolchain, "--arch",
                           fields.arch, "--ptx-isa", fields.ptx_isa, "--nvjitlink", fields.nvjitlink,
                           "--options", json.dumps(dict(fields.options)), str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[0])["keys"]


@pytest.mark.parametrize("name", ["scalar_params", "array_list", "matmul_f16"])
def test_module_with_its_bytes_keeps_the_file_cache_key(name, monkeypatch):
    import tilebc
    from test_rt_launch import fixture
    from tilebc_runtime.cache import KeyFields
    monkeypatch.setattr(launch.JitBackend, "identity", lambda self: "tilebc-jit/test")
    monkeypatch.setattr(launch.JitBackend, "ptx_isa", lambda self, arch: "8.8")
    monkeypatch.setattr(launch.JitBackend, "nvjitlink", lambda self: "13.5")
    path = fixture(name)
    data = path.read_bytes()
    module = tilebc.load(path)
    by_path = launch.load(path)
    entry = next(iter(by_path.entries))
    keys = {how: loaded[entry].key_fields("sm_90").key() for how, loaded in {
        "path": by_path, "bytes": launch.load(data), "pair": launch.load((module, data)),
        "module": launch.load(module)}.items()}
    fields = by_path[entry].key_fields("sm_90")
    assert fields.bytecode == data
    assert keys["path"] == keys["bytes"] == keys["pair"] == KeyFields(
        fields.toolchain, data, entry, "sm_90", "8.8", "13.5", {}).key()
    # an unmodified decoded module re-encodes to the file's own bytes, so it keys alike
    assert keys["module"] == keys["path"]
    module.layout = None  # the canonical layout: other bytes, another key
    assert launch.load(module)[entry].key_fields("sm_90").key() != keys["path"] or \
        tilebc.dump(module) == data
    module.source_bytes = data  # what tilebc.load may record: then a bare Module keys alike
    assert launch.load(module)[entry].key_fields("sm_90").key() == keys["path"]
    cpp = _cpp_keys(path, by_path[entry], fields)
    if cpp is not None:
        assert cpp[entry] == keys["pair"]


def test_pair_with_other_bytes_is_refused():
    import tilebc
    from test_rt_launch import fixture
    module = tilebc.load(fixture("scalar_params"))
    with pytest.raises(launch.LaunchError, match="the bytes given with the Module are not the "
                       "ones it was decoded from"):
        launch.load((module, fixture("gdc").read_bytes()))
    with pytest.raises(launch.LaunchError, match="a tuple source must be"):
        launch.load((module,))


# -- dynamic shared memory ------------------------------------------------------------------------

from large_exchange import EXCHANGE_BYTES, TRANSPOSE  # noqa: E402


class FakeKernelHandle:
    def __init__(self, name):
        self.name, self.handle = name, f"CUkernel:{name}"


@pytest.fixture
def dynamic_shared_driver(monkeypatch, tmp_path):
    """The fake driver with a real JIT compile (through a fresh cache) and a recorded
    cuKernelSetAttribute; the device allows 227 KiB per CTA (an H100)."""
    from cuda.bindings import driver as cuda_driver
    fake = FakeDriver(monkeypatch)
    monkeypatch.setattr(launch.Kernel, "compile", _REAL_COMPILE)
    monkeypatch.setattr(driver, "load_kernel", lambda cubin, name: FakeKernelHandle(name))
    fake.handle.properties = types.SimpleNamespace(max_shared_memory_per_block_optin=232448)
    fake.attributes = []
    monkeypatch.setattr(cuda_driver, "cuKernelSetAttribute", lambda attribute, value, kernel, dev:
                        fake.attributes.append((attribute, value, kernel, int(dev)))
                        or (cuda_driver.CUresult.CUDA_SUCCESS,))
    from tilebc_runtime.cache import CubinCache
    fake.module = launch.load(TRANSPOSE, cache=CubinCache(tmp_path))
    return fake


_REAL_COMPILE = launch.Kernel.compile


def test_dynamic_shared_memory_reaches_launch_config_and_kernel_attribute(dynamic_shared_driver):
    from cuda.bindings import driver as cuda_driver
    fake = dynamic_shared_driver
    kernel = fake.module[next(iter(fake.module.entries))]
    source = FakeDLPack(BASE, (64, 256), "int32")
    target = FakeDLPack(BASE + EXCHANGE_BYTES, (256, 64), "int32")
    for _ in range(2):
        kernel[(1,)](source, target)
    # every launch asks for the dynamic bytes (the JIT's 64x256 i32 transpose exchange)
    assert fake.configs == [((1, 1, 1), kernel.compile("sm_90").threads, EXCHANGE_BYTES)] * 2
    # the kernel opted in once, when it was loaded, for the launching device
    attribute = cuda_driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    assert fake.attributes == [(attribute, EXCHANGE_BYTES, f"CUkernel:{kernel.entry}", 0)]
    # and the cache recorded the size for later processes (and the C++ loader)
    assert kernel.compile("sm_90").metadata["dynamic_shared_bytes"] == EXCHANGE_BYTES


def test_dynamic_shared_memory_over_the_device_limit_is_refused(dynamic_shared_driver):
    fake = dynamic_shared_driver
    fake.handle.properties.max_shared_memory_per_block_optin = 61440  # smaller than the kernel
    kernel = fake.module[next(iter(fake.module.entries))]
    with pytest.raises(driver.DriverError,
                       match=f"{EXCHANGE_BYTES} bytes of shared memory .* 61440 bytes"):
        kernel[(1,)](FakeDLPack(BASE, (64, 256), "int32"),
                     FakeDLPack(BASE + EXCHANGE_BYTES, (256, 64), "int32"))
    assert fake.attributes == [] and fake.launches == []


def test_small_dynamic_shared_memory_needs_no_attribute(monkeypatch):
    calls = []
    monkeypatch.setattr(driver, "call", lambda *args, **kwargs: calls.append(args))
    driver.allow_dynamic_shared(types.SimpleNamespace(device_id=0), object(), 48 * 1024)
    driver.allow_dynamic_shared(types.SimpleNamespace(device_id=0), object(), 0)
    assert calls == []


def test_entries_are_found_by_their_unmangled_name():
    # cuTile mangles entry names (`vadd_Kt1_…`); m["vadd"] finds the one entry it was made from,
    # as tilebc.run does, and a prefix shared by several entries is refused as ambiguous
    from tilebc_runtime import load as rt_load
    path = ROOT_FIXTURES / "tuple_params" / "tuple_params-13.5.tilebc"
    loaded = rt_load(path)
    names = list(loaded.entries)
    assert len(names) == 2 and all("_" in n for n in names)
    assert loaded[names[0]].entry == names[0]
    stem = os.path.commonprefix(names).rstrip("_")
    with pytest.raises(KeyError, match="ambiguous"):
        loaded[stem.split("_")[0]]
    single = rt_load(ROOT_FIXTURES / "elementwise_f32" / "elementwise_f32-13.5.tilebc")
    (full,) = list(single.entries)
    assert single[full.split("_")[0]] is single[full]
    with pytest.raises(KeyError, match="no entry 'nope'"):
        single["nope"]


def test_threads_zero_is_refused_not_taken_as_the_default():
    from tilebc_runtime import compile as rt_compile
    with pytest.raises(tilebc.TilebcError, match="multiple of 32"):
        rt_compile(ROOT_FIXTURES / "elementwise_f32" / "elementwise_f32-13.5.tilebc", arch="sm_90",
                   emit="ptx", threads=0)


ROOT_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "bytecode"


def test_tensor_maps_are_encoded_from_the_arguments_and_passed_after_them(fake_driver,
                                                                         monkeypatch):
    """A compile(tma=True) entry: its maps are resolved from the packed values once per
    binding, encoded, and passed by value after the kernel's parameters through RawLaunch."""
    from tilebc_runtime import tensor_maps
    fake_driver.entry.tensor_maps = ({
        "param": "k_tmap_0", "array": 3, "element": "f16", "rank": 2,
        "dims": [["const", 64], ["param", 4]], "strides": [["const", 64]], "box": [64, 8],
        "swizzle": 128, "oob_fill": "zero", "interleave": "none"},)
    encoded, raw = [], []
    monkeypatch.setattr(tensor_maps, "encode", lambda found: encoded.append(found)
                        or types.SimpleNamespace(opaque=list(range(16))))
    launched = []

    class FakeRawLaunch:
        def __init__(self, *args):
            raw.append(args)

        def launch(self):
            launched.append(self)
    monkeypatch.setattr(driver, "RawLaunch", FakeRawLaunch)
    kernel = only_kernel("aliasing_arrays")
    bound = kernel.bind(2, FakeDLPack(BASE, (64,)), FakeDLPack(BASE + 4096, (64,)))
    bound.launch()
    bound.launch()
    assert encoded == [tensor_maps.TiledMap("k_tmap_0", "f16", BASE + 4096, (64, 64), (128,),
                                            (64, 8), 128)]
    # the parameter block is built once for the binding, then launched twice
    assert fake_driver.launches == [] and len(raw) == 1 and len(launched) == 2
    stream, grid, threads, shared, function, values, maps = raw[0]
    assert (grid, threads, shared, function) == ((2, 1, 1), 128, 0, ("function", kernel.entry))
    assert [int(v) for v in values] == [BASE, 64, 1, BASE + 4096, 64, 1]
    assert [list(m) for m in maps] == [list(range(16))]


def test_empty_array_maps_are_encoded_over_one_zeroed_scratch(fake_driver, monkeypatch):
    """A map whose array has a zero extent (cuTensorMapEncodeTiled refuses extent 0) is encoded
    over the device's zeroed scratch, extents 1 and strides 16; the scratch is allocated and
    zeroed once (on the launch stream, waited for) and reused by later bindings."""
    from cuda.bindings import driver as cu
    from tilebc_runtime import tensor_maps
    fake_driver.entry.tensor_maps = ({
        "param": "k_tmap_0", "array": 3, "element": "f16", "rank": 2,
        "dims": [["const", 64], ["param", 4]], "strides": [["const", 64]], "box": [64, 8],
        "swizzle": 128, "oob_fill": "zero", "interleave": "none"},)
    encoded, allocations, memsets, syncs = [], [], [], []
    monkeypatch.setattr(tensor_maps, "encode", lambda found: encoded.append(found)
                        or types.SimpleNamespace(opaque=list(range(16))))
    monkeypatch.setattr(driver, "RawLaunch", lambda *args: types.SimpleNamespace(
        launch=lambda: None))
    monkeypatch.setattr(driver, "_zero_scratch", {})
    fake_driver.handle.allocate = lambda nbytes, stream: allocations.append((nbytes, stream)) \
        or types.SimpleNamespace(handle=0xE000_0000)
    monkeypatch.setattr(cu, "cuMemsetD8Async", lambda *args: memsets.append(args)
                        or (cu.CUresult.CUDA_SUCCESS,))
    monkeypatch.setattr(fake_driver.stream, "sync", lambda: syncs.append(1))
    kernel = only_kernel("aliasing_arrays")
    for _ in range(2):
        kernel.bind(2, FakeDLPack(BASE, (64,)), FakeDLPack(BASE + 4096, (0,))).launch()
    kernel.bind(2, FakeDLPack(BASE, (64,)), FakeDLPack(BASE + 4096, (64,))).launch()
    over = tensor_maps.TiledMap("k_tmap_0", "f16", 0xE000_0000, (1, 1), (16,), (64, 8), 128)
    assert encoded == [over, over, tensor_maps.TiledMap("k_tmap_0", "f16", BASE + 4096, (64, 64),
                                                        (128,), (64, 8), 128)]
    assert allocations == [(tensor_maps.ZERO_SCRATCH_BYTES, fake_driver.stream)]
    [(address, value, count, stream)] = memsets
    assert (int(address), value, count) == (0xE000_0000, 0, tensor_maps.ZERO_SCRATCH_BYTES)
    assert int(stream) == fake_driver.stream.handle and syncs == [1]


def test_raw_launch_points_the_driver_at_each_parameter_in_order(monkeypatch):
    """RawLaunch builds the parameter block once; each launch hands the driver the same
    pointers, one per parameter in order, the tensor map's 128 bytes by value."""
    import ctypes
    import numpy as np
    from cuda.bindings import driver as cu
    seen = []

    def fake_launch(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        pointers = (ctypes.c_void_p * 3).from_address(params)
        seen.append(((gx, gy, gz, bx, shared), ctypes.string_at(pointers[0], 8),
                     ctypes.string_at(pointers[1], 4), ctypes.string_at(pointers[2], 128)))
        return (cu.CUresult.CUDA_SUCCESS,)
    monkeypatch.setattr(cu, "cuLaunchKernel", fake_launch)
    blob = (ctypes.c_uint64 * 16)(*range(100, 116))
    raw = driver.RawLaunch(types.SimpleNamespace(handle=0), (3, 2, 1), 128, 4096,
                           types.SimpleNamespace(handle=0x1234), [np.uint64(BASE), np.int32(-5)],
                           [blob])
    raw.launch()
    raw.launch()
    first, second = seen
    assert first == second
    (dims, pointer, scalar, table) = first
    assert dims == (3, 2, 1, 128, 4096)
    assert pointer == np.uint64(BASE).tobytes() and scalar == np.int32(-5).tobytes()
    assert table == bytes(blob)


# -- the emulator refuses what the launcher refuses ---------------------------------------------

PERSISTENT = Path(__file__).resolve().parents[2] / "fixtures" / "bytecode" / \
    "nn_rms_norm_persistent" / "nn_rms_norm_persistent-13.5.tilebc"


@pytest.mark.parametrize("rows,pitch,refusal", [
    (13, 256, "argument 0 (array<?x?xf16, index i32>) shape[0] = 13 must be divisible by 16 "
              "(the kernel assumes div_by<16>)"),
    (16, 264, "argument 0 (array<?x?xf16, index i32>) stride[0] = 264 must be divisible by 16 "
              "(the kernel assumes div_by<16>)"),
    (16, 272, None)])
def test_the_emulator_refuses_the_launches_the_gpu_launcher_refuses_in_its_words(
        fake_driver, rows, pitch, refusal):
    """nn_rms_norm_persistent's whole-row entry assumes arrays whose two sizes and row stride
    are multiples of 16. The same arguments go to the GPU launcher (fake driver, device arrays)
    and to the emulator (numpy arrays, strided alike): both refuse in the same words, or both
    take them."""
    from tilebc_runtime import sim
    module = tilebc.load(PERSISTENT)
    entry = module.functions[1].name
    kernel = launch.load(PERSISTENT)[entry]
    x, y = (np.zeros((rows, pitch), np.float16)[:, :256] for _ in range(2))
    weight = np.zeros(256, np.float16)
    device = [FakeDLPack(BASE, (rows, 256), "float16", strides=(pitch, 1)),
              FakeDLPack(BASE + 2 ** 20, (rows, 256), "float16", strides=(pitch, 1)),
              FakeDLPack(BASE + 2 ** 21, (256,), "float16")]
    said = []
    for run in (lambda: kernel.bind((2,), *device, np.float32(1e-6)),
                lambda: sim.run(module, entry, (2,), x, y, weight, np.float32(1e-6),
                                arch="sm_90")):
        try:
            run()
            said.append(None)
        except launch.ArgumentError as error:
            said.append(str(error))
    assert said == [None if refusal is None else f"{entry}: {refusal}"] * 2


def test_the_emulator_checks_an_argument_only_against_the_parameter_it_fills():
    """An array fills a pointer, a size and a stride; a Pointer fills one slot. Passed as a
    Pointer plus two integers for the first array and an array for the second pointer (the
    interpreter's calling convention allows it), no argument lines up with a parameter of the
    launch signature, so none is held to another's facts: the stride 1 is not the div_by<16>
    size it sits beside in the signature."""
    from tilebc.interp.api import Pointer
    from tilebc.text import parse_module
    from tilebc_runtime import sim
    view, tile = "tensor_view<?xf32, strides=[?]>", "tile<16xf32>"
    unit = "tensor_view<?xf32, strides=[1]>"
    part, unit_part = (f"partition_view<tile=(16), {v}>" for v in (view, unit))
    module = parse_module(f"""
entry @k(%q: tile<ptr<f32>>, %qn: tile<i32>, %qs: tile<i32>, %p: tile<ptr<f32>>, %pn: tile<i32>, %ps: tile<i32>) {{
  %t0 = make_token : token
  %z = constant <i32: 0> : tile<i32>
  %pn_d = assume div_by<16>, %pn : tile<i32>
  %vq = make_tensor_view %q, shape = [%qn], strides = [%qs] : tile<i32> -> {view}
  %vp = make_tensor_view %p, shape = [%pn_d], strides = [1] : tile<i32> -> {unit}
  %a = make_partition_view %vq : {part}
  %b = make_partition_view %vp : {unit_part}
  %x, %t1 = load_view_tko weak %a[%z] token = %t0 : {part}, tile<i32> -> {tile}, token
  %t2 = store_view_tko weak %x, %b[%z] token = %t1 : {tile}, {unit_part}, tile<i32> -> token
  return
}}
""", "k.mlir")
    module.version = tilebc.Version(13, 5)
    source, out = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    sim.run(module, "k", (1,), Pointer(source), np.int32(16), np.int32(1), out, arch="sm_90")
    np.testing.assert_array_equal(out, source)
    with pytest.raises(launch.ArgumentError, match=r"argument 1 \(array<\?xf32, index i32>\) "
                                                    r"shape\[0\] = 8 must be divisible by 16"):
        sim.run(module, "k", (1,), source, np.zeros(8, np.float32), arch="sm_90")
