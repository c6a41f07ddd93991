"""The remote cache tier (cache_remote.py) against a real redis-server started here on loopback:
sharing compiles between caches and processes, refusing poisoned entries, and a remote that goes
away or never answers costing at most one timeout, never a failure.

Needs Debian's `redis-server` on PATH and the `redis` package (skipped with the reason otherwise).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tilebc_runtime import cache_remote
from tilebc_runtime.cache import CubinCache, KeyFields

from redis_server import RedisServer, free_port, requires_redis_server

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "bytecode" / "scalar_params" / "scalar_params-13.5.tilebc"
pytestmark = requires_redis_server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = RedisServer(tmp_path_factory.mktemp("redis"))
    yield running
    running.stop()


@pytest.fixture
def remote_url(server):
    server.client().flushall()
    return server.url


def fields(entry="scalar_params", arch="sm_90"):
    return KeyFields(toolchain="tileiras/13.5.37", bytecode=FIXTURE.read_bytes(), entry=entry, arch=arch)


class CountingCompiler:
    """compile_fn stand-in: a cubin derived from its inputs, and a record of every call."""

    def __init__(self):
        self.calls = []

    def __call__(self, bytecode, entry, arch, options):
        self.calls.append((entry, arch))
        seed = hashlib.sha256(bytecode + entry.encode() + arch.encode()).digest()
        return seed * 8, {"threads_per_cta": 128, "static_shared_bytes": 0}


# -- sharing ------------------------------------------------------------------------------------

def test_a_second_cache_with_its_own_disk_compiles_nothing(tmp_path, remote_url):
    first, second = CountingCompiler(), CountingCompiler()
    made = CubinCache(tmp_path / "a", remote=remote_url).get_or_compile(fields(), first)
    other = CubinCache(tmp_path / "b", remote=remote_url)
    got = other.get_or_compile(fields(), second)
    assert len(first.calls) == 1 and second.calls == []
    assert got.cubin == made.cubin and got.metadata["cubin_sha256"] == made.metadata["cubin_sha256"]
    # read through: the entry is now on b's disk, so b needs no remote next time
    assert [info.key for info in CubinCache(tmp_path / "b").disk_entries()] == [made.key]


def test_remote_only_cache_without_a_disk(tmp_path, remote_url):
    compiler = CountingCompiler()
    CubinCache(None, remote=remote_url).get_or_compile(fields(), compiler)
    CubinCache(None, remote=remote_url).get_or_compile(fields(), compiler)
    assert len(compiler.calls) == 1


def test_entries_are_one_redis_hash_under_the_local_key(tmp_path, remote_url, server):
    entry = CubinCache(tmp_path / "a", remote=remote_url).get_or_compile(fields(), CountingCompiler())
    stored = server.client().hgetall(f"tilebc:v1:{entry.key}")
    assert set(stored) == {b"cubin", b"metadata"}
    assert stored[b"cubin"] == entry.cubin
    assert json.loads(stored[b"metadata"])["key"] == entry.key
    assert server.client().ttl(f"tilebc:v1:{entry.key}") == -1  # no expiry unless asked


def test_ttl_makes_entries_expire(remote_url, server):
    tier = cache_remote.RedisTier(remote_url, ttl=120)
    tier.put("ab" * 32, b"cubin", b"{}")
    assert 0 < server.client().ttl("tilebc:v1:" + "ab" * 32) <= 120


_CHILD = textwrap.dedent("""
    import sys
    import tilebc_runtime
    from tilebc_runtime import cache as cache_mod, launch

    compiles = []
    original = cache_mod.CubinCache._compile
    def counting(self, *args, **kwargs):
        compiles.append(args[1])
        return original(self, *args, **kwargs)
    cache_mod.CubinCache._compile = counting

    cache = cache_mod.CubinCache.from_environment()
    assert cache.remote is not None, "TILEBC_CACHE_REMOTE was not picked up"
    module = launch.load(sys.argv[1], cache=cache)
    keys = [module[name].compile("sm_90").key for name in module.entries]
    print(len(compiles), *keys)
""")


def test_two_processes_with_separate_disks_share_compiles(tmp_path, remote_url):
    """The real JIT, in two Python processes with their own TILEBC_CACHE_DIR and one Redis."""
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    results = []
    for name in ("node-a", "node-b"):
        env = {**os.environ, "TILEBC_CACHE_DIR": str(tmp_path / name),
               "TILEBC_CACHE_REMOTE": remote_url,
               "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "runtime"),
                                              os.environ.get("PYTHONPATH", "")])}
        proc = subprocess.run([sys.executable, str(script), str(FIXTURE)], capture_output=True, text=True,
                              env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        results.append(proc.stdout.split())
    (compiled_a, *keys_a), (compiled_b, *keys_b) = results
    assert compiled_a == "1" and compiled_b == "0"
    assert keys_a == keys_b
    assert [info.key for info in CubinCache(tmp_path / "node-b").disk_entries()] == keys_b


# -- poisoned entries -----------------------------------------------------------------------------

def _flip_cubin_byte(client, name, other_name):
    cubin = bytearray(client.hget(name, "cubin"))
    cubin[5] ^= 0x01
    client.hset(name, "cubin", bytes(cubin))


def _metadata_not_json(client, name, other_name):
    client.hset(name, "metadata", b"{not json")


def _metadata_wrong_schema(client, name, other_name):
    metadata = json.loads(client.hget(name, "metadata"))
    metadata["schema"] = 2
    client.hset(name, "metadata", json.dumps(metadata).encode())


def _other_keys_entry(client, name, other_name):
    client.hset(name, mapping=client.hgetall(other_name))


def _other_keys_cubin(client, name, other_name):
    client.hset(name, "cubin", client.hget(other_name, "cubin"))


def _metadata_missing(client, name, other_name):
    client.hdel(name, "metadata")


@pytest.mark.parametrize("poison, message", [
    (_flip_cubin_byte, "cubin sha256 does not match its metadata"),
    (_metadata_not_json, "metadata is not JSON"),
    (_metadata_wrong_schema, "metadata schema 2 is not 1"),
    (_other_keys_entry, "metadata names another key"),
    (_other_keys_cubin, "cubin sha256 does not match its metadata"),
], ids=["bad-sha256", "metadata-not-json", "metadata-schema", "other-keys-entry", "other-keys-cubin"])
def test_poisoned_remote_entry_is_refused_and_recompiled(tmp_path, remote_url, server, caplog, poison,
                                                         message):
    good = CubinCache(tmp_path / "a", remote=remote_url).get_or_compile(fields(), CountingCompiler())
    other = CubinCache(tmp_path / "a", remote=remote_url).get_or_compile(fields(arch="sm_80"),
                                                                          CountingCompiler())
    poison(server.client(), f"tilebc:v1:{good.key}", f"tilebc:v1:{other.key}")

    compiler = CountingCompiler()
    with caplog.at_level(logging.WARNING, logger="tilebc_runtime.cache"):
        got = CubinCache(tmp_path / "b", remote=remote_url).get_or_compile(fields(), compiler)
    assert len(compiler.calls) == 1
    assert got.cubin == good.cubin
    assert f"remote entry {good.key}" in caplog.text and f"refused ({message}" in caplog.text
    # the recompile was written back over the poison: the next node hits it
    later = CountingCompiler()
    assert CubinCache(tmp_path / "c", remote=remote_url).get_or_compile(fields(), later).cubin == good.cubin
    assert later.calls == []


def test_a_name_holding_another_type_is_one_miss_not_an_outage(tmp_path, remote_url, server, caplog):
    key = fields().key()
    server.client().set(f"tilebc:v1:{key}", b"not a hash")
    cache = CubinCache(tmp_path / "a", remote=remote_url)
    compiler = CountingCompiler()
    with caplog.at_level(logging.WARNING, logger="tilebc_runtime.cache"):
        cache.get_or_compile(fields(), compiler)
    assert len(compiler.calls) == 1
    assert f"refused the read of entry {key} (ResponseError" in caplog.text
    assert "using the local cache only" not in caplog.text and cache.remote._available()
    # the write-back replaced the string with the entry
    later = CountingCompiler()
    CubinCache(tmp_path / "b", remote=remote_url).get_or_compile(fields(), later)
    assert later.calls == []


def test_entry_without_metadata_is_a_plain_miss(tmp_path, remote_url, server):
    good = CubinCache(tmp_path / "a", remote=remote_url).get_or_compile(fields(), CountingCompiler())
    _metadata_missing(server.client(), f"tilebc:v1:{good.key}", None)
    compiler = CountingCompiler()
    CubinCache(tmp_path / "b", remote=remote_url).get_or_compile(fields(), compiler)
    assert len(compiler.calls) == 1


def test_oversized_remote_entry_is_refused_unread(tmp_path, remote_url, server, monkeypatch, caplog):
    good = CubinCache(tmp_path / "a", remote=remote_url).get_or_compile(fields(), CountingCompiler())
    monkeypatch.setattr(cache_remote, "MAX_ENTRY_BYTES", len(good.cubin))
    compiler = CountingCompiler()
    with caplog.at_level(logging.WARNING, logger="tilebc_runtime.cache"):
        CubinCache(tmp_path / "b", remote=remote_url).get_or_compile(fields(), compiler)
    assert len(compiler.calls) == 1 and "over the" in caplog.text


# -- a remote that goes away or never answers -------------------------------------------------------

def test_server_going_away_mid_run_never_fails_a_compile(tmp_path, caplog):
    own = RedisServer(tmp_path / "redis")
    try:
        writer = CubinCache(tmp_path / "a", remote=own.url)
        writer.get_or_compile(fields(), CountingCompiler())
        reader = CubinCache(tmp_path / "b", remote=own.url)
        assert reader.remote.get(fields().key()) is not None  # connected and serving
    finally:
        own.stop()
    compiler = CountingCompiler()
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="tilebc_runtime.cache"):
        for arch in ("sm_90", "sm_80", "sm_86", "sm_89"):
            reader.get_or_compile(fields(arch=arch), compiler)
    elapsed = time.monotonic() - started
    assert len(compiler.calls) == 4
    assert elapsed < cache_remote.DEFAULT_TIMEOUT + 1.0, elapsed
    assert caplog.text.count("using the local cache only") == 1  # one failure, then left alone
    # the local tier kept working: a fresh cache on b's disk compiles nothing
    again = CountingCompiler()
    CubinCache(tmp_path / "b").get_or_compile(fields(arch="sm_86"), again)
    assert again.calls == []


def test_a_remote_that_never_answers_costs_one_timeout(tmp_path, caplog):
    """A listener that completes the handshake but never replies (a hung server)."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        url = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
        cache = CubinCache(tmp_path / "a", remote=cache_remote.RedisTier(url, timeout=0.3))
        compiler = CountingCompiler()
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="tilebc_runtime.cache"):
            for arch in ("sm_90", "sm_80", "sm_86"):
                cache.get_or_compile(fields(arch=arch), compiler)
        elapsed = time.monotonic() - started
    assert len(compiler.calls) == 3
    assert 0.25 <= elapsed < 0.3 + 1.0, elapsed
    assert caplog.text.count("using the local cache only") == 1


def test_the_remote_is_tried_again_after_retry_after(tmp_path, monkeypatch):
    port = free_port()  # nothing listens: connection refused
    tier = cache_remote.RedisTier(f"redis://127.0.0.1:{port}/0", retry_after=30.0)
    attempts = []
    real_get = tier._client.pipeline
    monkeypatch.setattr(tier._client, "pipeline", lambda **kw: attempts.append(1) or real_get(**kw))
    assert tier.get("ab" * 32) is None and len(attempts) == 1
    assert tier.get("ab" * 32) is None and len(attempts) == 1  # left alone while down
    tier._down_until = 0.0  # as if retry_after had passed
    assert tier.get("ab" * 32) is None and len(attempts) == 2


# -- configuration --------------------------------------------------------------------------------

def test_environment_variable_and_argument_configure_the_tier(tmp_path, remote_url, caplog):
    cache = CubinCache.from_environment({"TILEBC_CACHE_DIR": str(tmp_path / "a"),
                                         "TILEBC_CACHE_REMOTE": remote_url,
                                         "TILEBC_CACHE_REMOTE_TIMEOUT": "0.2"})
    assert isinstance(cache.remote, cache_remote.RedisTier)
    assert cache.remote.url == remote_url and cache.remote.timeout == 0.2
    assert CubinCache.from_environment({"TILEBC_CACHE_DIR": str(tmp_path / "a")}).remote is None
    assert CubinCache.from_environment({"TILEBC_CACHE_DIR": str(tmp_path / "a"),
                                        "TILEBC_CACHE_REMOTE": "OFF"}).remote is None
    # the argument wins over the environment
    chosen = CubinCache.from_environment({"TILEBC_CACHE_DIR": str(tmp_path / "a"),
                                          "TILEBC_CACHE_REMOTE": "redis://127.0.0.1:1/0"}, remote=remote_url)
    assert chosen.remote.url == remote_url
    with caplog.at_level(logging.WARNING, logger="tilebc_runtime.cache"):
        assert CubinCache(tmp_path / "a", remote="s3://bucket/prefix").remote is None
        assert CubinCache.from_environment({"TILEBC_CACHE_DIR": str(tmp_path / "a"),
                                            "TILEBC_CACHE_REMOTE": remote_url,
                                            "TILEBC_CACHE_REMOTE_TIMEOUT": "soon"}).remote.timeout \
            == cache_remote.DEFAULT_TIMEOUT
    assert "only redis://" in caplog.text and "TILEBC_CACHE_REMOTE_TIMEOUT" in caplog.text


def test_passwords_stay_out_of_messages(caplog):
    tier = cache_remote.RedisTier(f"redis://user:hunter2@127.0.0.1:{free_port()}/0", timeout=0.2)
    with caplog.at_level(logging.WARNING, logger="tilebc_runtime.cache"):
        assert tier.get("ab" * 32) is None
    assert tier.url.startswith("redis://user:***@127.0.0.1:")
    assert "hunter2" not in caplog.text and "user:***@" in caplog.text


def test_without_the_redis_package_the_local_cache_still_works(tmp_path, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "redis", None)  # import redis -> ImportError
    with caplog.at_level(logging.WARNING, logger="tilebc_runtime.cache"):
        cache = CubinCache(tmp_path / "a", remote="redis://127.0.0.1:6379/0")
    assert cache.remote is None and "tilebc-runtime[redis]" in caplog.text
    compiler = CountingCompiler()
    cache.get_or_compile(fields(), compiler)
    assert len(compiler.calls) == 1


def test_cache_info_names_the_remote(tmp_path, capsys):
    import argparse
    from tilebc_runtime.cache_cli import run_cache_command
    url = f"redis://user:secret@127.0.0.1:{free_port()}/0"
    for root in (tmp_path / "a", None):
        run_cache_command(argparse.Namespace(cache_action="info"), CubinCache(root, remote=url))
        assert "remote: redis://user:***@127.0.0.1:" in capsys.readouterr().out
    run_cache_command(argparse.Namespace(cache_action="info"), CubinCache(tmp_path / "a"))
    assert "remote: none" in capsys.readouterr().out


def test_the_remote_module_is_not_part_of_the_jit_identity():
    """Editing cache_remote.py must not change every JIT key (CACHE.md lists it as not lowering)."""
    from tilebc_runtime import launch
    assert "cache_remote.py" in launch._NOT_LOWERING
    assert "`cache_remote.py`" in (ROOT / "runtime" / "CACHE.md").read_text()
