"""The C ABI (runtime/cpp/include/tilebc/tilebc.h): its tests and example are compiled as C99 and
linked against the C++ loader built under ASan and UBSan (the build of test_cpp_loader.py).

Needs cmake and C/C++ compilers (skipped otherwise); needs no GPU.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from test_cpp_loader import FIXTURES, ROOT, SANITIZER_ENV, cpp_build  # noqa: F401 (a fixture)

from tilebc_runtime.cache import CubinCache, KeyFields

SCALAR_PARAMS = FIXTURES / "scalar_params" / "scalar_params-13.5.tilebc"
TOOLCHAIN = {"identity": "tilebc-jit/0.0.0+c0ffee00c0ffee00", "ptx_isa": {"sm_90": "8.0"},
             "nvjitlink": "13.0", "options": {}}


def _cache_with_one_entry(root):
    """A cache root as the Python runtime leaves it: toolchain.json and one entry for sm_90."""
    import tilebc
    name = tilebc.load(SCALAR_PARAMS, verify=False, lazy_debug=False).functions[0].name
    cache = CubinCache(root)
    cache.record_toolchain("tilebc-jit", TOOLCHAIN)
    fields = KeyFields(toolchain=TOOLCHAIN["identity"], bytecode=SCALAR_PARAMS.read_bytes(), entry=name,
                       arch="sm_90", ptx_isa="8.0", nvjitlink="13.0", options={})
    entry = cache.get_or_compile(fields, lambda *_: (b"\x7fELF" + bytes(range(200)),
                                                     {"threads_per_cta": 128}))
    return name, entry


def test_c_api_tests(cpp_build, tmp_path):
    root = tmp_path / "cache"
    name, entry = _cache_with_one_entry(root)
    bad_toolchain = tmp_path / "bad-toolchain"
    shutil.copytree(root, bad_toolchain)
    (bad_toolchain / "v1" / "toolchain.json").write_text('{"schema": 1, "backends": [')
    poisoned = tmp_path / "poisoned"
    shutil.copytree(root, poisoned)
    cubin_path = poisoned / "v1" / entry.key[:2] / f"{entry.key}.cubin"
    damaged = bytearray(cubin_path.read_bytes())
    damaged[7] ^= 0x40
    cubin_path.write_bytes(bytes(damaged))

    env = {**os.environ, **SANITIZER_ENV, "TILEBC_LIBCUDA": str(tmp_path / "no-libcuda.so.1"),
           "TILEBC_CACHE_DIR": str(tmp_path / "default-root")}
    proc = subprocess.run([str(cpp_build / "tilebc_c_tests"), str(ROOT / "fixtures"), str(root),
                           str(bad_toolchain), str(poisoned)], capture_output=True, text=True, timeout=120,
                          env=env)
    assert "Sanitizer" not in proc.stderr and "runtime error" not in proc.stderr, proc.stderr[-6000:]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert " 0 failures" in proc.stdout
    lines = proc.stdout.splitlines()
    assert f"key {name} {entry.key}" in lines  # the C ABI computes the Python runtime's key
    assert f"image {len(entry.cubin)} 128" in lines


def test_c_api_is_compiled_as_c(cpp_build):
    """The test and the example are C translation units; each also refuses a C++ compiler."""
    ninja = (cpp_build / "build.ninja").read_text()
    for source in ("tests/c_api_tests.c", "examples/list_entries.c"):
        assert re.search(rf"build \S*{re.escape(source)}\.o: C_COMPILER__", ninja), source
        assert "#error" in (ROOT / "runtime" / "cpp" / source).read_text()


def test_c_example_lists_entries_and_cache_state(cpp_build, tmp_path):
    root = tmp_path / "cache"
    name, entry = _cache_with_one_entry(root)
    env = {**os.environ, **SANITIZER_ENV, "TILEBC_CACHE_DIR": str(root)}
    proc = subprocess.run([str(cpp_build / "list_entries_c"), str(SCALAR_PARAMS), "sm_90"], capture_output=True,
                          text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    assert f"  {name} (tile<ptr<f32>>, tile<i32>" in proc.stdout
    assert "tile<i1>: integer, 1 bytes" in proc.stdout
    assert f"sm_90: cached cubin, {len(entry.cubin)} bytes" in proc.stdout
    missing = subprocess.run([str(cpp_build / "list_entries_c"), str(tmp_path / "absent.tilebc")],
                             capture_output=True, text=True, timeout=60, env=env)
    assert missing.returncode == 1
    assert missing.stderr.startswith("error 3 (input/output error): ") and "absent.tilebc" in missing.stderr
