"""`tilebc cache info|list|clear|prune`, run as a process against a populated cache."""
import json
import os
import subprocess
import sys
from pathlib import Path

from tilebc_runtime.cache import CubinCache, KeyFields

ROOT = Path(__file__).resolve().parents[2]


def run_cli(cache_dir, *argv):
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'runtime'}", "TILEBC_CACHE_DIR": str(cache_dir)}
    return subprocess.run([sys.executable, "-m", "tilebc_runtime.cache_cli", "cache", *argv],
                          capture_output=True, text=True, env=env)


def populate(root, archs):
    cache = CubinCache(root)
    for arch in archs:
        fields = KeyFields("tileiras/13.5.37", b"\x7fTileIR\x00", "kernel", arch)
        cache.get_or_compile(fields, lambda b, e, a, o: (a.encode() * 500, {"threads_per_cta": 128}))
    return cache


def test_info_list_prune_clear(tmp_path):
    cache = populate(tmp_path / "c", ["sm_80", "sm_90", "sm_100"])
    info = run_cli(tmp_path / "c", "info")
    assert info.returncode == 0, info.stderr
    assert f"location: {cache.directory}\nentries: 3\nsize: {cache.total_bytes()} bytes" in info.stdout

    listing = run_cli(tmp_path / "c", "list", "--json")
    rows = [json.loads(line) for line in listing.stdout.splitlines()]
    assert sorted(row["arch"] for row in rows) == ["sm_100", "sm_80", "sm_90"]
    assert all(row["valid"] and row["entry"] == "kernel" for row in rows)

    one_entry = max(row["size"] for row in rows)
    pruned = run_cli(tmp_path / "c", "prune", "--max-size", str(one_entry))
    assert pruned.stdout.startswith("removed 2 entries"), pruned.stdout + pruned.stderr
    assert len(cache.disk_entries()) == 1

    cleared = run_cli(tmp_path / "c", "clear")
    assert cleared.stdout.startswith("removed 1 entries") and cache.disk_entries() == []


def test_off_switch_and_usage_errors(tmp_path):
    info = run_cli("off", "info")
    assert info.returncode == 0 and "location: none (disabled by TILEBC_CACHE_DIR=off)" in info.stdout
    cleared = run_cli("off", "clear")
    assert cleared.returncode == 1 and "no disk cache" in cleared.stderr
    bad = run_cli(tmp_path / "c", "prune", "--max-size", "lots")
    assert bad.returncode == 2 and "--max-size" in bad.stderr


DEEP_JSON = b"[" * 100_000 + b"]" * 100_000


def test_deeply_nested_json_never_breaks_the_commands_and_clear_recovers(tmp_path):
    cache = populate(tmp_path / "c", ["sm_80", "sm_90"])
    toolchain = cache.directory / "toolchain.json"
    toolchain.write_bytes(DEEP_JSON)
    damaged = cache.disk_entries()[0]
    cache.paths(damaged.key)[1].write_bytes(DEEP_JSON)
    for argv in (["info"], ["list"], ["list", "--json"], ["prune", "--max-size", "1G"]):
        done = run_cli(tmp_path / "c", *argv)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (argv, done.stderr)
        if argv == ["info"]:
            assert f"toolchain: {toolchain} is not JSON (nested too deeply); ignored" in done.stdout
    assert len(cache.disk_entries()) == 1  # prune removed the damaged entry
    cache.paths(cache.disk_entries()[0].key)[1].write_bytes(DEEP_JSON)
    cleared = run_cli(tmp_path / "c", "clear")
    assert cleared.returncode == 0, cleared.stderr
    assert cleared.stdout.startswith("removed 1 entries")
    assert not toolchain.exists() and cache.disk_entries() == []
    info = run_cli(tmp_path / "c", "info")
    assert "entries: 0" in info.stdout and "toolchain:" not in info.stdout


def test_compile_through_a_cache_with_nested_json(tmp_path):
    """`tilebc compile` records its toolchain and looks the entry up before compiling: a damaged
    toolchain.json or entry is rewritten, never a failure."""
    fixture = ROOT / "fixtures" / "bytecode" / "scalar_params" / "scalar_params-13.5.tilebc"
    root = tmp_path / "c"
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'runtime'}", "TILEBC_CACHE_DIR": str(root)}
    command = [sys.executable, "-m", "tilebc", "compile", str(fixture), "--arch", "sm_90",
               "--emit", "cubin", "-o", str(tmp_path / "out.cubin")]
    first = subprocess.run(command, capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    cache = CubinCache(root)
    [entry] = cache.disk_entries()
    (cache.directory / "toolchain.json").write_bytes(DEEP_JSON)
    cache.paths(entry.key)[1].write_bytes(DEEP_JSON)
    again = subprocess.run(command, capture_output=True, text=True, env=env)
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr
    assert cache.toolchain()["backends"]["tilebc-jit"]["identity"].startswith("tilebc-jit/")
    [repaired] = cache.disk_entries()
    assert repaired.key == entry.key and repaired.metadata is not None
