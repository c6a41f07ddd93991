"""The C++ loader and the remote cache tier: the loader itself reads only the local tier, and on a
miss runs `tilebc compile`, which inherits TILEBC_CACHE_REMOTE and so takes a fleet's entry from
Redis instead of compiling; the loader then loads it from its local cache.

Needs the C++ build of test_cpp_loader.py, redis-server and the redis package (skipped otherwise).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from test_cpp_loader import FIXTURES, ROOT, _tool_env, cpp_build, run_tool  # noqa: F401 (a fixture)

sys.path.insert(0, str(ROOT / "runtime" / "tests"))  # the shared redis-server helper
from redis_server import RedisServer, requires_redis_server  # noqa: E402

pytestmark = requires_redis_server


def test_cpp_miss_takes_the_fleet_entry_through_the_python_runtime(cpp_build, tmp_path):
    from tilebc_runtime import launch
    from tilebc_runtime.cache import CubinCache
    fixture = FIXTURES / "scalar_params" / "scalar_params-13.5.tilebc"
    server = RedisServer(tmp_path / "redis")
    try:
        # Another node published this entry. Its cubin is a marker no compiler produces, so the
        # loader returning it proves nothing was compiled here.
        module = launch.load(fixture, cache=CubinCache(tmp_path / "node-a"))
        [name] = module.entries
        fields = module[name].key_fields("sm_86")
        marker = b"\x7fELF fleet entry " + bytes(range(64))
        published = CubinCache(None, remote=server.url).get_or_compile(
            fields, lambda *_: (marker, {"threads_per_cta": 96}))

        root = tmp_path / "node-b"
        env = _tool_env(TILEBC_PYTHON=sys.executable, TILEBC_COMPILER="", PATH="/usr/bin:/bin",
                        TILEBC_CACHE_REMOTE=server.url)
        [record] = run_tool(cpp_build, "module", str(fixture), "--arch", "sm_86", "--cache", str(root), env=env)
        image = record["images"][name]
        assert image["source"] == "cache", image
        assert image["detail"].endswith(f"{published.key}.cubin")
        assert image["size"] == len(marker) and image["threads_per_cta"] == 96
        assert (root / "v1" / published.key[:2] / f"{published.key}.cubin").read_bytes() == marker
    finally:
        server.stop()
