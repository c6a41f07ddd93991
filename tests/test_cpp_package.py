"""The installed C++ loader as consumers use it: `cmake --install` into a prefix outside the source
tree, then a CMake project that calls find_package(tilebc CONFIG REQUIRED) and links
tilebc::loader, and a C program built with `cc $(pkg-config --cflags --libs tilebc)`.

The library is built once (no sanitizers, no tools; cpp_builds.py) in
runtime/cpp/build/pytest-package and reused by later test runs; the prefix and the consumers live
in the test run's temp folder.
Needs cmake and C/C++ compilers; the pkg-config test also needs pkg-config. No GPU.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import cpp_builds
import tilebc

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "bytecode" / "scalar_params" / "scalar_params-13.5.tilebc"


def _run(command, **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(part) for part in command], capture_output=True, text=True,
                          timeout=kwargs.pop("timeout", 600), **kwargs)
    assert proc.returncode == 0, f"{command}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture(scope="session")
def installed_prefix(tmp_path_factory) -> Path:
    missing = cpp_builds.missing_tools(c_compiler=True)
    if missing:
        pytest.skip(f"building and installing runtime/cpp needs {' and '.join(missing)}")
    prefix = tmp_path_factory.mktemp("prefix")
    try:
        build = cpp_builds.package_build()
    except cpp_builds.BuildError as error:
        pytest.fail(str(error), pytrace=False)
    with cpp_builds.locked(build):  # no other worker rebuilds it while it is copied
        _run([cpp_builds.tool("cmake"), "--install", build, "--prefix", prefix], timeout=120)
    return prefix


def _entry_name() -> str:
    return tilebc.load(FIXTURE, verify=False, lazy_debug=False).functions[0].name


_CONSUMER_CMAKE = """\
cmake_minimum_required(VERSION 3.18)
project(tilebc_consumer LANGUAGES C CXX)
set(CMAKE_CXX_STANDARD 17)
find_package(tilebc 99.0 CONFIG QUIET)
message(STATUS "tilebc 99.0 found: ${tilebc_FOUND}")
unset(tilebc_DIR CACHE)
find_package(tilebc 0.1 CONFIG REQUIRED)
message(STATUS "tilebc found: ${tilebc_VERSION}")
add_executable(app main.cpp)
target_link_libraries(app PRIVATE tilebc::loader)
add_executable(app_c main.c)
target_link_libraries(app_c PRIVATE tilebc::loader)
"""

_CONSUMER_CPP = """\
#include <iostream>
#include "tilebc/loader.hpp"
int main(int argc, char** argv) {
  try {
    const auto module = tilebc::Module::load(argv[1]);
    for (const auto& entry : module.entries()) std::cout << entry.name << " " << entry.signature << "\\n";
  } catch (const tilebc::Error& error) {
    std::cerr << error.what() << "\\n";
    return 1;
  }
  return argc > 1 ? 0 : 2;
}
"""

_CONSUMER_C = """\
#include <stdio.h>
#include "tilebc/tilebc.h"
int main(int argc, char** argv) {
  tilebc_module* module = NULL;
  const char* name = NULL;
  if (argc < 2 || tilebc_module_load_file(argv[1], NULL, &module) != TILEBC_OK) {
    fprintf(stderr, "%s\\n", tilebc_last_error_message());
    return 1;
  }
  tilebc_module_entry_name(module, 0, &name);
  printf("%s\\n", name);
  tilebc_module_free(module);
  return 0;
}
"""


def test_find_package_links_tilebc_loader(installed_prefix, tmp_path):
    project = tmp_path / "consumer"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(_CONSUMER_CMAKE)
    (project / "main.cpp").write_text(_CONSUMER_CPP)
    (project / "main.c").write_text(_CONSUMER_C)
    build = tmp_path / "consumer-build"
    configure = _run([cpp_builds.tool("cmake"), *cpp_builds.generator(), "-S", project, "-B", build,
                      f"-DCMAKE_PREFIX_PATH={installed_prefix}"], timeout=300)
    assert "tilebc 99.0 found: 0" in configure.stdout  # the version file refuses other versions
    assert "tilebc found: 0.1.0" in configure.stdout
    _run([cpp_builds.tool("cmake"), "--build", build, "--parallel", "2"])
    name = _entry_name()
    out = _run([build / "app", FIXTURE], timeout=60).stdout
    assert out.startswith(f"{name} (tile<ptr<f32>>, tile<i32>")
    assert _run([build / "app_c", FIXTURE], timeout=60).stdout == f"{name}\n"


def test_installed_files(installed_prefix):
    installed = {path.relative_to(installed_prefix).as_posix() for path in installed_prefix.rglob("*")
                 if path.is_file()}
    config = {path.rsplit("/", 1)[-1] for path in installed if "/cmake/tilebc/" in path}
    assert {"tilebcConfig.cmake", "tilebcConfigVersion.cmake", "tilebcTargets.cmake"} <= config
    assert {"include/tilebc/tilebc.h", "include/tilebc/loader.hpp"} <= installed
    assert any(path.endswith("/pkgconfig/tilebc.pc") for path in installed)


def _pkg_config(prefix: Path, *args: str) -> str:
    [pc] = prefix.rglob("pkgconfig/tilebc.pc")
    env = {**os.environ, "PKG_CONFIG_PATH": str(pc.parent)}
    return _run(["pkg-config", *args, "tilebc"], env=env, timeout=60).stdout.strip()


@pytest.mark.skipif(shutil.which("pkg-config") is None, reason="pkg-config is not installed")
def test_pkg_config_builds_the_c_example(installed_prefix, tmp_path):
    # the .pc file finds its prefix from where it lies, so a moved install still works
    moved = tmp_path / "moved-prefix"
    shutil.copytree(installed_prefix, moved)
    for prefix in (installed_prefix, moved):
        assert _pkg_config(prefix, "--modversion") == "0.1.0"
        flags = _pkg_config(prefix, "--cflags", "--libs").split()
        includes = [Path(flag[2:]).resolve() for flag in flags if flag.startswith("-I")]
        assert includes == [(prefix / "include").resolve()], flags
        program = tmp_path / f"list_entries-{prefix.name}"
        source = cpp_builds.CPP / "examples" / "list_entries.c"
        _run([shutil.which("cc"), "-std=c99", "-Wall", "-Werror", source, "-o", program, *flags],
             timeout=300)
        out = _run([program, FIXTURE], timeout=60).stdout
        assert f"  {_entry_name()} (tile<ptr<f32>>, tile<i32>" in out
