"""Disk cache: key, atomic publish, corruption recovery, concurrency, eviction, permissions, off."""
import errno
import hashlib
import json
import logging
import multiprocessing
import os
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tilebc_runtime import cache as cache_mod
from tilebc_runtime.cache import CubinCache, KeyFields, canonical_options, resolve_root

FIXTURE = (Path(__file__).resolve().parents[2] / "fixtures" / "bytecode" / "scalar_params"
           / "scalar_params-13.5.tilebc")


def base_fields(**changes):
    values = dict(toolchain="tileiras/13.5.37", bytecode=FIXTURE.read_bytes(),
                  entry="scalar_params", arch="sm_90", ptx_isa="9.5", nvjitlink="13.5",
                  options={"opt_level": 3})
    values.update(changes)
    return KeyFields(**values)


class CountingCompiler:
    """compile_fn stand-in: a cubin derived from its inputs, and a record of every call."""

    def __init__(self, size=256):
        self.calls = []
        self.size = size

    def __call__(self, bytecode, entry, arch, options):
        self.calls.append((entry, arch))
        seed = hashlib.sha256(bytecode + entry.encode() + arch.encode()).digest()
        return (seed * (self.size // 32 + 1))[: self.size], {"threads_per_cta": 128, "static_shared_bytes": 64}


@pytest.fixture
def disk_cache(tmp_path):
    return CubinCache(tmp_path / "cache")


# -- key --------------------------------------------------------------------------------------

def test_key_follows_cache_md_encoding():
    """Recomputes the key as CACHE.md specifies (the C++ loader does the same)."""
    fields = base_fields()
    parts = [b"tilebc-cubin-cache", b"1", b"tileiras/13.5.37", FIXTURE.read_bytes(),
             b"scalar_params", b"sm_90", b"9.5", b"13.5", b'{"opt_level":3}']
    expected = hashlib.sha256(b"".join(struct.pack("<Q", len(p)) + p for p in parts)).hexdigest()
    assert fields.key() == expected


@pytest.mark.parametrize("change", [
    {"toolchain": "tileiras/13.5.38"},
    {"toolchain": "tilebc-jit/0.1.0+0000000000000000"},
    {"bytecode": FIXTURE.read_bytes()[:-1] + bytes([FIXTURE.read_bytes()[-1] ^ 1])},
    {"entry": "scalar_params2"},
    {"arch": "sm_100"},
    {"ptx_isa": "9.4"},
    {"ptx_isa": ""},
    {"nvjitlink": "13.4"},
    {"options": {"opt_level": 2}},
    {"options": {}},
    {"options": {"opt_level": 3, "lineinfo": True}},
])
def test_changing_any_field_changes_the_key(change):
    assert base_fields(**change).key() != base_fields().key()


def test_key_fields_are_length_prefixed_and_options_canonical():
    assert (base_fields(entry="ab", arch="c").key() != base_fields(entry="a", arch="bc").key())
    assert (base_fields(ptx_isa="", nvjitlink="x").key()
            != base_fields(ptx_isa="x", nvjitlink="").key())
    reordered = base_fields(options={"b": 1, "a": [1, 2]})
    assert reordered.key() == base_fields(options={"a": [1, 2], "b": 1}).key()
    assert canonical_options({"b": 1, "a": "é"}) == '{"a":"\\u00e9","b":1}'


# -- hits, misses, memory map -------------------------------------------------------------------

def test_compile_once_then_hit_from_memory_and_disk(disk_cache):
    compiler = CountingCompiler()
    fields = base_fields()
    first = disk_cache.get_or_compile(fields, compiler)
    assert compiler.calls == [("scalar_params", "sm_90")]
    cubin_path, meta_path = disk_cache.paths(fields.key())
    assert cubin_path.read_bytes() == first.cubin
    meta = json.loads(meta_path.read_text())
    assert meta["cubin_sha256"] == hashlib.sha256(first.cubin).hexdigest()
    assert meta["fields"]["bytecode_sha256"] == hashlib.sha256(fields.bytecode).hexdigest()
    assert (meta["threads_per_cta"], meta["static_shared_bytes"], meta["dynamic_shared_bytes"]) == (128, 64, 0)
    assert str(cubin_path.parent.name) == fields.key()[:2]

    # A second process (fresh memory map) finds it on disk.
    other = CubinCache(disk_cache.root)
    assert other.get_or_compile(fields, compiler).cubin == first.cubin
    assert len(compiler.calls) == 1

    # The memory map answers even when the disk entry is gone.
    cubin_path.unlink()
    assert other.lookup(fields.key()).cubin == first.cubin
    other.forget_memory()
    assert other.lookup(fields.key()) is None


# -- atomic publish ----------------------------------------------------------------------------

def test_publish_writes_cubin_then_metadata_through_temp_files(disk_cache, monkeypatch):
    replaced = []
    real_replace = os.replace

    def recording_replace(source, target):
        replaced.append((Path(source).name, Path(target).name))
        real_replace(source, target)

    monkeypatch.setattr(cache_mod.os, "replace", recording_replace)
    key = base_fields().key()
    disk_cache.get_or_compile(base_fields(), CountingCompiler())
    assert [target for _, target in replaced] == [f"{key}.cubin", f"{key}.json"]
    assert all(source.startswith(".tmp-") for source, _ in replaced)
    assert not list(disk_cache.directory.glob("??/.tmp-*"))


def test_crash_between_cubin_and_metadata_is_a_miss(disk_cache, monkeypatch):
    real_replace = os.replace

    def crash_on_metadata(source, target):
        if str(target).endswith(".json"):
            raise OSError(28, "No space left on device")
        real_replace(source, target)

    monkeypatch.setattr(cache_mod.os, "replace", crash_on_metadata)
    compiler = CountingCompiler()
    disk_cache.get_or_compile(base_fields(), compiler)  # still returns the compiled entry
    monkeypatch.setattr(cache_mod.os, "replace", real_replace)
    cubin_path, meta_path = disk_cache.paths(base_fields().key())
    assert cubin_path.exists() and not meta_path.exists()
    assert not list(disk_cache.directory.glob("??/.tmp-*"))  # the temp file was cleaned up
    fresh = CubinCache(disk_cache.root)
    assert fresh.lookup(base_fields().key()) is None
    fresh.get_or_compile(base_fields(), compiler)
    assert len(compiler.calls) == 2 and meta_path.exists()


# -- corruption recovery ------------------------------------------------------------------------

def _truncate(cubin_path, meta_path):
    cubin_path.write_bytes(cubin_path.read_bytes()[:100])


def _flip_bit(cubin_path, meta_path):
    data = bytearray(cubin_path.read_bytes())
    data[37] ^= 0x04
    cubin_path.write_bytes(bytes(data))


def _remove_cubin(cubin_path, meta_path):
    cubin_path.unlink()


def _garbage_metadata(cubin_path, meta_path):
    meta_path.write_bytes(meta_path.read_bytes()[:40])


def _metadata_of_other_key(cubin_path, meta_path):
    meta = json.loads(meta_path.read_text())
    meta["key"] = "0" * 64
    meta_path.write_text(json.dumps(meta))


def _old_schema(cubin_path, meta_path):
    meta = json.loads(meta_path.read_text())
    meta["schema"] = 0
    meta_path.write_text(json.dumps(meta))


@pytest.mark.parametrize("damage, message", [
    (_truncate, "cubin truncated (100 of 256 bytes)"),
    (_flip_bit, "cubin sha256 does not match its metadata"),
    (_remove_cubin, "metadata without cubin"),
    (_garbage_metadata, "metadata is not JSON"),
    (_metadata_of_other_key, "metadata names another key"),
    (_old_schema, "metadata schema 0 is not 1"),
])
def test_corrupt_entry_is_a_logged_miss_and_recompiled(disk_cache, caplog, damage, message):
    compiler = CountingCompiler()
    fields = base_fields()
    good = disk_cache.get_or_compile(fields, compiler)
    damage(*disk_cache.paths(fields.key()))
    fresh = CubinCache(disk_cache.root)
    with caplog.at_level(logging.WARNING, logger="tilebc_runtime.cache"):
        assert fresh.lookup(fields.key()) is None
        again = fresh.get_or_compile(fields, compiler)
    assert f"entry {fields.key()} is corrupt ({message}" in caplog.text
    assert len(compiler.calls) == 2
    assert again.cubin == good.cubin
    # The repaired entry is valid for the next process.
    assert CubinCache(disk_cache.root).lookup(fields.key()).cubin == good.cubin


# -- concurrency ---------------------------------------------------------------------------------

def _worker(root, log_path, barrier, results):
    def slow_compile(bytecode, entry, arch, options):
        with open(log_path, "a") as log:  # O_APPEND: one line per compile, from any process
            log.write(f"{entry} {arch} {os.getpid()}\n")
        time.sleep(0.3)
        return CountingCompiler()(bytecode, entry, arch, options)

    cache = CubinCache(root)
    barrier.wait()
    digests = []
    for arch in ("sm_90", "sm_100", "sm_120"):
        entry = cache.get_or_compile(base_fields(arch=arch), slow_compile)
        digests.append(hashlib.sha256(entry.cubin).hexdigest())
    results.put(digests)


def test_eight_processes_compile_each_key_once(tmp_path):
    context = multiprocessing.get_context("fork")
    root, log_path = tmp_path / "cache", tmp_path / "compiles.log"
    log_path.touch()
    barrier, results = context.Barrier(8), context.Queue()
    workers = [context.Process(target=_worker, args=(root, log_path, barrier, results))
               for _ in range(8)]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=60) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    compiled = sorted(line.split()[1] for line in log_path.read_text().splitlines())
    assert compiled == ["sm_100", "sm_120", "sm_90"]
    assert all(outcome == outcomes[0] for outcome in outcomes)
    check = CubinCache(root)
    for arch, digest in zip(("sm_90", "sm_100", "sm_120"), outcomes[0]):
        entry = check.lookup(base_fields(arch=arch).key())
        assert hashlib.sha256(entry.cubin).hexdigest() == digest


# -- eviction ------------------------------------------------------------------------------------

def test_lru_eviction_keeps_recently_used_entries(tmp_path):
    compiler = CountingCompiler(size=1000)
    cache = CubinCache(tmp_path / "cache", max_bytes=10 ** 9)
    archs = [f"sm_{n}" for n in (80, 86, 89, 90)]
    for arch in archs:
        cache.get_or_compile(base_fields(arch=arch), compiler)
    # Give each entry a distinct last-use time, oldest first, then use sm_80 again (a disk hit).
    for age, arch in enumerate(reversed(archs)):
        meta = cache.paths(base_fields(arch=arch).key())[1]
        os.utime(meta, (time.time() - 100 * (age + 1),) * 2)
    cache.forget_memory()
    assert cache.lookup(base_fields(arch="sm_80").key()) is not None
    entry_size = cache.total_bytes() // 4
    cache.max_bytes = 3 * entry_size + entry_size // 2
    cache.get_or_compile(base_fields(arch="sm_100"), compiler)  # over the bound: evicts two
    remaining = {info.metadata["fields"]["arch"] for info in cache.disk_entries()}
    assert remaining == {"sm_80", "sm_90", "sm_100"}
    assert cache.total_bytes() <= cache.max_bytes


def test_a_store_sums_the_size_about_once_per_64th_of_the_bound(tmp_path, monkeypatch):
    """Summing the entry files walks every shard (~8 ms per 1,000 entries, on every miss of a
    compile before): a store does it where one entry is a 64th of the bound or more, else with
    that share as its chance (drawn from the key). The bound still holds, give or take that."""
    walks = []
    plain = CubinCache._file_bytes
    monkeypatch.setattr(CubinCache, "_file_bytes",
                        lambda self: walks.append(1) or plain(self))
    compiler = CountingCompiler(size=1000)
    cache = CubinCache(tmp_path / "roomy", max_bytes=10 ** 12)  # a chance of 1/7,700,000 a store
    for index in range(100):
        cache.get_or_compile(base_fields(entry=f"k{index}"), compiler)
    assert len(walks) == 0 and len(cache.disk_entries()) == 100
    assert cache._sums_size_after("f" * 64, 10 ** 12 // 64)  # a 64th of the bound: always

    entry_bytes = cache.total_bytes() // 100
    bound = 200 * entry_bytes  # a store walks with a chance of about a third
    tight = CubinCache(tmp_path / "tight", max_bytes=bound)
    for index in range(260):
        tight.get_or_compile(base_fields(entry=f"k{index}"), compiler)
    assert 40 <= len(walks) <= 150
    assert tight.total_bytes() <= bound + 10 * entry_bytes
    assert 150 < len(tight.disk_entries()) < 210


def test_prune_and_clear(tmp_path):
    cache = CubinCache(tmp_path / "cache")
    for arch in ("sm_80", "sm_90"):
        cache.get_or_compile(base_fields(arch=arch), CountingCompiler())
    _flip_bit(*cache.paths(base_fields(arch="sm_80").key()))
    _garbage_metadata(*cache.paths(base_fields(arch="sm_80").key()))
    assert cache.prune() == [base_fields(arch="sm_80").key()]
    assert cache.prune(max_bytes=0) == [base_fields(arch="sm_90").key()]
    cache.get_or_compile(base_fields(), CountingCompiler())
    assert cache.clear() == 1
    assert cache.disk_entries() == [] and cache.lookup(base_fields().key()) is None


# -- location, permissions, off switch -----------------------------------------------------------

def test_directories_are_created_owner_only(tmp_path):
    cache = CubinCache(tmp_path / "new" / "cache")
    cache.get_or_compile(base_fields(), CountingCompiler())
    for path in (cache.root, cache.directory, cache.paths(base_fields().key())[0].parent):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    for path in cache.paths(base_fields().key()):
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0


def test_group_writable_directory_is_refused(tmp_path, caplog):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with caplog.at_level(logging.WARNING, logger="tilebc_runtime.cache"):
        cache = CubinCache(shared)
    assert not cache.disk_enabled
    assert "can be written by other users (mode 777)" in caplog.text
    compiler = CountingCompiler()
    cache.get_or_compile(base_fields(), compiler)
    assert not list(shared.iterdir())  # nothing written into the refused directory


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to chown")
def test_directory_owned_by_another_user_is_refused(tmp_path):
    foreign = tmp_path / "foreign"
    foreign.mkdir(mode=0o700)
    os.chown(foreign, 4242, -1)
    cache = CubinCache(foreign)
    assert not cache.disk_enabled and "owned by uid 4242" in cache.reason


def test_environment_override_fallback_and_off(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    chosen = tmp_path / "chosen"
    assert resolve_root({"TILEBC_CACHE_DIR": str(chosen)})[0] == chosen

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    root, reason = resolve_root({"TILEBC_CACHE_DIR": str(blocker / "cache")})
    assert root == cache_mod.fallback_root() and "fallback" in reason
    assert stat.S_IMODE(root.stat().st_mode) == 0o700

    for value in ("off", "OFF"):
        cache = CubinCache.from_environment({"TILEBC_CACHE_DIR": value})
        assert not cache.disk_enabled and "disabled by TILEBC_CACHE_DIR" in cache.reason
    compiler = CountingCompiler()
    cache.get_or_compile(base_fields(), compiler)
    cache.get_or_compile(base_fields(), compiler)  # the memory map still works when the disk is off
    assert len(compiler.calls) == 1
    assert CubinCache.from_environment({"TILEBC_CACHE_DIR": str(chosen),
                                        "TILEBC_CACHE_MAX_BYTES": "512M"}).max_bytes == 512 << 20


def test_default_location_follows_xdg_as_the_cpp_loader_does(tmp_path):
    """Without TILEBC_CACHE_DIR: $XDG_CACHE_HOME/tilebc (trimmed), else ~/.cache/tilebc, as
    tilebc::default_cache_root chooses (tests/test_cpp_loader.py compares the two); platformdirs
    gives the same folders here, and is not imported for them."""
    import platformdirs
    from tilebc_runtime.cache import default_root
    home = str(tmp_path / "home")
    root, reason = resolve_root({"XDG_CACHE_HOME": str(tmp_path / "xdg"), "HOME": home})
    assert root == tmp_path / "xdg" / "tilebc" and "default location" in reason
    assert default_root({"XDG_CACHE_HOME": " \t", "HOME": home}) == home + "/.cache/tilebc"
    assert default_root({"HOME": home}) == home + "/.cache/tilebc"
    if sys.platform.startswith("linux"):
        for environ in ({"XDG_CACHE_HOME": str(tmp_path / "x")}, {}):
            with pytest.MonkeyPatch.context() as patch:
                for name in ("XDG_CACHE_HOME", "HOME"):
                    patch.delenv(name, raising=False)
                patch.setenv("HOME", home)
                for name, value in environ.items():
                    patch.setenv(name, value)
                assert default_root() == platformdirs.user_cache_dir("tilebc")
    done = subprocess.run([sys.executable, "-c", "import sys; from tilebc_runtime.cache import "
                           "default_root; default_root(); print('platformdirs' in sys.modules, "
                           "'pathlib' in sys.modules)"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.stdout.split() == ["False", "False"], done.stderr


def test_toolchain_record_merges_backends(disk_cache):
    disk_cache.record_toolchain("tileiras", {"identity": "tileiras/13.5.37"})
    disk_cache.record_toolchain("tilebc-jit", {"identity": "tilebc-jit/0.1.0+ab",
                                               "ptx_isa": {"sm_90": "8.8"}, "nvjitlink": "13.5"})
    recorded = json.loads((disk_cache.directory / "toolchain.json").read_text())
    assert recorded["schema"] == 1
    assert set(recorded["backends"]) == {"tileiras", "tilebc-jit"}
    assert recorded["backends"]["tilebc-jit"]["ptx_isa"] == {"sm_90": "8.8"}


# -- damaged JSON never breaks a compile ---------------------------------------------------------

DEEP_JSON = b"[" * 100_000 + b"]" * 100_000  # json.loads raises RecursionError on this


def test_deeply_nested_toolchain_json_is_rewritten(disk_cache, caplog):
    path = disk_cache.directory / "toolchain.json"
    path.write_bytes(DEEP_JSON)
    assert disk_cache.toolchain() == {}
    assert disk_cache.toolchain_problem() == "is not JSON (nested too deeply)"
    with caplog.at_level(logging.WARNING, logger="tilebc_runtime.cache"):
        disk_cache.record_toolchain("tileiras", {"identity": "tileiras/13.5.37"})
    assert "rewriting" in caplog.text and "nested too deeply" in caplog.text
    assert json.loads(path.read_text())["backends"]["tileiras"]["identity"] == "tileiras/13.5.37"


@pytest.mark.parametrize("document", [
    b"[]", b'{"schema": 1, "backends": []}', b'{"schema": 1, "backends": {"jit": 3}}',
    b'{"schema": 1, "backends": {"jit": {"identity": 5}}}', b"\xff\xfe", b" " * (2 << 20)])
def test_toolchain_json_of_another_shape_is_ignored_and_cleared(disk_cache, document):
    path = disk_cache.directory / "toolchain.json"
    path.write_bytes(document)
    assert disk_cache.toolchain() == {} and disk_cache.toolchain_problem() not in (None, "missing")
    disk_cache.clear()
    assert not path.exists()


def test_clear_keeps_a_valid_toolchain_json(disk_cache):
    disk_cache.record_toolchain("tileiras", {"identity": "tileiras/13.5.37"})
    disk_cache.clear()
    assert disk_cache.toolchain()["backends"]["tileiras"]["identity"] == "tileiras/13.5.37"


@pytest.mark.parametrize("content, message", [
    (DEEP_JSON, "metadata is not JSON (nested too deeply)"),
    (b"{" + b" " * (2 << 20) + b"}", "metadata is over 1048576 bytes"),
])
def test_damaged_metadata_is_a_miss_and_is_cleared(disk_cache, caplog, content, message):
    compiler = CountingCompiler()
    fields = base_fields()
    disk_cache.get_or_compile(fields, compiler)
    cubin_path, meta_path = disk_cache.paths(fields.key())
    meta_path.write_bytes(content)
    fresh = CubinCache(disk_cache.root)
    with caplog.at_level(logging.WARNING, logger="tilebc_runtime.cache"):
        assert fresh.get_or_compile(fields, compiler).cubin == cubin_path.read_bytes()
    assert f"entry {fields.key()} is corrupt ({message})" in caplog.text
    assert len(compiler.calls) == 2
    meta_path.write_bytes(content)
    [info] = fresh.disk_entries()
    assert info.metadata is None
    assert fresh.clear() == 1 and not meta_path.exists() and not cubin_path.exists()


def test_an_unexpected_failure_while_reading_is_a_logged_miss(disk_cache, caplog, monkeypatch):
    compiler = CountingCompiler()
    disk_cache.get_or_compile(base_fields(), compiler)

    def broken(raw, key):
        raise RuntimeError("unexpected")
    monkeypatch.setattr(cache_mod, "check_metadata", broken)
    fresh = CubinCache(disk_cache.root)
    with caplog.at_level(logging.WARNING, logger="tilebc_runtime.cache"):
        assert fresh.lookup(base_fields().key()) is None
    assert "cannot read entry" in caplog.text and "RuntimeError: unexpected" in caplog.text


# -- trust at every level: root, v1/, shard, files ------------------------------------------------

needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="needs root to chown")


def _group_writable(path):
    path.chmod(stat.S_IMODE(path.stat().st_mode) | 0o020)


def _owned_by_another_user(path):
    os.chown(path, 4242, -1)


def _symlinked(path):
    target = path.with_name("elsewhere" + path.suffix)
    path.rename(target)
    path.symlink_to(target.name)


# Symlinked folders are followed (as for the root itself): only symlinked files are refused.
_PLANTED = [pytest.param(level, change, id=f"{change.__name__}-{level}",
                         marks=needs_root if change is _owned_by_another_user else ())
            for change in (_group_writable, _owned_by_another_user, _symlinked)
            for level in ("root", "v1", "shard", "cubin", "metadata")
            if not (change is _symlinked and level in ("root", "v1", "shard"))]


@pytest.mark.parametrize("level, change", _PLANTED)
def test_an_entry_another_user_could_have_planted_is_a_miss(disk_cache, caplog, level, change):
    compiler = CountingCompiler()
    fields = base_fields()
    disk_cache.get_or_compile(fields, compiler)
    cubin_path, meta_path = disk_cache.paths(fields.key())
    opened = CubinCache(disk_cache.root)  # the checks hold for a cache opened before the change
    change({"root": disk_cache.root, "v1": disk_cache.directory, "shard": cubin_path.parent,
            "cubin": cubin_path, "metadata": meta_path}[level])
    with caplog.at_level(logging.WARNING, logger="tilebc_runtime.cache"):
        assert opened.lookup(fields.key()) is None
    expected = ("is a symbolic link" if change is _symlinked else "owned by uid 4242"
                if change is _owned_by_another_user else "can be written by other users")
    assert expected in caplog.text
    if level in ("cubin", "metadata"):  # recompiled and republished with the right owner and mode
        opened.get_or_compile(fields, compiler)
        assert len(compiler.calls) == 2
        assert CubinCache(disk_cache.root).lookup(fields.key()) is not None


def test_untrusted_toolchain_json_is_ignored(disk_cache):
    disk_cache.record_toolchain("tileiras", {"identity": "tileiras/13.5.37"})
    _group_writable(disk_cache.directory / "toolchain.json")
    assert disk_cache.toolchain() == {} and "can be written by other users" in disk_cache.toolchain_problem()
    disk_cache.clear()
    assert not (disk_cache.directory / "toolchain.json").exists()


def test_untrusted_entries_are_listed_as_corrupt_and_cleared(disk_cache):
    disk_cache.get_or_compile(base_fields(), CountingCompiler())
    _group_writable(disk_cache.paths(base_fields().key())[1])
    [info] = disk_cache.disk_entries()
    assert info.metadata is None
    assert disk_cache.prune() == [base_fields().key()]


def test_a_removed_cache_folder_is_a_quiet_miss(disk_cache, caplog):
    import shutil
    disk_cache.get_or_compile(base_fields(), CountingCompiler())
    opened = CubinCache(disk_cache.root)
    shutil.rmtree(disk_cache.root)
    with caplog.at_level(logging.WARNING, logger="tilebc_runtime.cache"):
        assert opened.lookup(base_fields().key()) is None
    assert caplog.text == ""


def test_entries_in_an_untrusted_shard_are_listed_as_corrupt(disk_cache):
    disk_cache.get_or_compile(base_fields(), CountingCompiler())
    _group_writable(disk_cache.paths(base_fields().key())[0].parent)
    [info] = disk_cache.disk_entries()
    assert info.metadata is None


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_in_place_of_an_entry_file_is_refused_without_waiting(disk_cache):
    fields = base_fields()
    disk_cache.get_or_compile(fields, CountingCompiler())
    meta_path = disk_cache.paths(fields.key())[1]
    meta_path.unlink()
    os.mkfifo(meta_path, 0o600)
    os.mkfifo(disk_cache.directory / "toolchain.json", 0o600)
    started = time.monotonic()
    assert CubinCache(disk_cache.root).lookup(fields.key()) is None
    assert disk_cache.toolchain() == {} and "not a regular file" in disk_cache.toolchain_problem()
    assert time.monotonic() - started < 5


def test_file_lock_excludes_filelock_and_another_of_its_own(tmp_path):
    """The cache's flock lock and filelock's (which the C++ tests and older tilebc take) exclude
    each other both ways; a lock that cannot be had in time raises TimeoutError, an OSError."""
    filelock = pytest.importorskip("filelock")
    path = str(tmp_path / "k.lock")
    ours = cache_mod.FileLock(path, 0)
    with ours:
        with pytest.raises(filelock.Timeout):
            filelock.FileLock(path).acquire(timeout=0)
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            cache_mod.FileLock(path, 0.2).acquire()
        assert time.monotonic() - started >= 0.2
    theirs = filelock.FileLock(path)
    with theirs:
        with pytest.raises(OSError):
            cache_mod.FileLock(path, 0).acquire()
    with cache_mod.FileLock(path, 0):  # free again once released
        pass
    assert stat.S_IMODE(os.stat(path).st_mode) & 0o077 == 0


def test_file_lock_falls_back_to_filelock_where_flock_is_missing(tmp_path, monkeypatch):
    """A filesystem without flock (ENOSYS): filelock's marker-file lock takes over at once, and
    does not take the empty file the flock attempt opened for another owner's marker."""
    pytest.importorskip("filelock")
    import warnings

    def no_flock(fd, operation):
        raise OSError(errno.ENOSYS, "Function not implemented")
    monkeypatch.setattr(cache_mod.fcntl, "flock", no_flock)
    path = str(tmp_path / "k.lock")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # filelock warns that it falls back
        started = time.monotonic()
        with cache_mod.FileLock(path, 2):
            with pytest.raises(OSError):
                cache_mod.FileLock(path, 0).acquire()
        with cache_mod.FileLock(path, 2):  # free again once released
            pass
        assert time.monotonic() - started < 1.5


def test_a_read_through_never_recreates_a_removed_cache_folder(tmp_path):
    """A remote hit is published into its shard only: a root (or v1/) removed meanwhile is not
    made again with the umask's modes (which would leave a folder the trust checks refuse); the
    entry stays in memory."""
    from tilebc_runtime.cache import CacheEntry
    root = tmp_path / "cache"
    cache = CubinCache(root)
    shutil.rmtree(root)
    old_umask = os.umask(0o002)
    try:
        cache._store_remote_hit(CacheEntry("ab" + "0" * 62, b"x", {"cubin_size": 1}))
    finally:
        os.umask(old_umask)
    assert not root.exists()
