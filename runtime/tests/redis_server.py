"""A throwaway redis-server on loopback for the remote cache tier's tests (Debian's redis-server
package and the `redis` client; tests marked `requires_redis_server` skip with the reason without)."""
from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

try:
    import redis
except ImportError:  # the marker below skips every test that needs it
    redis = None

REDIS_SERVER = shutil.which("redis-server")
requires_redis_server = [
    pytest.mark.skipif(redis is None, reason="the remote tier needs the redis package "
                                             "(pip install 'tilebc-runtime[redis]')"),
    pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed "
                       "(Debian: apt-get install redis-server; scripts/setup.sh tries)"),
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RedisServer:
    """A throwaway redis-server on 127.0.0.1 without persistence."""

    def __init__(self, directory: Path):
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.process = None
        self.port = 0
        for _ in range(3):  # the port may be taken between the probe and the bind
            self.port = free_port()
            self.process = subprocess.Popen(
                [REDIS_SERVER, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
                 "--appendonly", "no", "--dir", str(directory), "--protected-mode", "yes"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if self._wait_ready():
                return
            self.stop()
        pytest.fail("redis-server did not start on loopback")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self):
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                if self.client().ping():
                    return True
            except redis.exceptions.ConnectionError:
                time.sleep(0.02)
        return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
