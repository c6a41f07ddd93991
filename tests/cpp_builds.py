"""The two builds of the C++ loader (runtime/cpp) that the tests use, made one way for the tests
and for `scripts/setup.sh --tests`.

* runtime/cpp/build/pytest-asan: Debug, AddressSanitizer and UBSan, the library as one translation
  unit, with the tools, examples and C/C++ test programs (test_cpp_loader.py, test_c_api.py).
* runtime/cpp/build/pytest-package: the default configuration without tools, each source compiled
  on its own, which test_cpp_package.py installs and builds consumer projects against.

Both are incremental: a build that is up to date costs a ninja no-op. Workers of one test run (and
set-up) take a file lock per build directory, so one builds and the others wait.

Run as a script (what set-up does, while pip installs the rest of the test environment on the other
core), it makes both builds and exits 0 whatever happens: a build that fails there is built again,
and its error reported, by the tests that need it.
"""
from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CPP = ROOT / "runtime" / "cpp"
ASAN_BUILD = CPP / "build" / "pytest-asan"
PACKAGE_BUILD = CPP / "build" / "pytest-package"


class BuildError(Exception):
    """A configure or build step failed; the message ends with the tail of its output."""


def tool(name: str) -> str | None:
    """`name` on PATH, else in the running Python's bin/ (the test extra's cmake and ninja wheels
    install there, which may not be on PATH)."""
    return shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))


def missing_tools(*, c_compiler: bool = False) -> list[str]:
    """What the builds need and this machine lacks (empty: they can run)."""
    missing = [] if tool("cmake") else ["cmake"]
    if not (shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")):
        missing.append("a C++17 compiler")
    if c_compiler and not shutil.which("cc"):
        missing.append("a C compiler (cc)")
    return missing


def locked(build: Path):
    """The build directory's lock (a no-op where the filelock package is not installed yet)."""
    build.mkdir(parents=True, exist_ok=True)
    try:
        from filelock import FileLock
    except ImportError:
        return contextlib.nullcontext()
    return FileLock(str(build) + ".lock")


def generator() -> list[str]:
    """CMake's Ninja generator where ninja is here (the default Makefiles otherwise)."""
    ninja = tool("ninja")
    return ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}"] if ninja else []


def _run(command: list, timeout: int) -> None:
    proc = subprocess.run([str(part) for part in command], capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        raise BuildError(f"{' '.join(map(str, command))} exited with {proc.returncode}:\n"
                         f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")


def _configure_and_build(build: Path, options: list[str]) -> Path:
    cmake = tool("cmake")
    if cmake is None:
        raise BuildError("cmake is not installed")
    with locked(build):
        if not (build / "CMakeCache.txt").exists():
            _run([cmake, *generator(), "-S", CPP, "-B", build, *options,
                  f"-DPython3_EXECUTABLE={sys.executable}"], timeout=300)
        _run([cmake, "--build", build, "--parallel", "2"], timeout=600)
    return build


def asan_build() -> Path:
    # -g1: line tables, all a sanitizer report's stack needs; full -g costs an eighth more CPU.
    # Measured with GCC 12 and not taken: -O1 (2.6x the library's compile CPU), -Og (no less), a
    # precompiled header for the tools (building it costs what the four tools save).
    return _configure_and_build(ASAN_BUILD, [
        "-DCMAKE_BUILD_TYPE=Debug", "-DCMAKE_CXX_FLAGS_DEBUG=-g1", "-DCMAKE_C_FLAGS_DEBUG=-g1",
        "-DTILEBC_SANITIZE=ON", "-DTILEBC_UNITY_BUILD=ON"])


def package_build() -> Path:
    return _configure_and_build(PACKAGE_BUILD, ["-DTILEBC_BUILD_TOOLS=OFF"])


def main() -> int:
    if missing_tools(c_compiler=True):
        return 0
    for build in (asan_build, package_build):
        try:
            build()
        except Exception:  # noqa: BLE001 - the tests build it again and report the error
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
