"""Kernel.bind / BoundLaunch and Kernel.launch against a fake driver: what reaches the driver,
how often arguments are packed, and how long they are kept alive."""
import types

import numpy as np
import pytest

from tilebc_runtime import driver, launch

from test_rt_launch import BASE, FakeCAI, FakeDLPack, only_kernel


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
        entry = types.SimpleNamespace(threads=128, dynamic_shared_bytes=0, cubin=b"\x7fELF")
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
