"""GPU targets, the PTX ISA version to emit, and locating nvJitLink.

PTX ISA version: the lowest version that the target architecture and the instructions the kernel
uses need, checked against the newest version the installed nvJitLink — and the driver, when one is
given — accepts. Nothing here touches the CUDA driver.
"""
from __future__ import annotations

import re
from functools import lru_cache

from tilebc.errors import TilebcError

# Architectures the JIT targets -> the first PTX ISA version that knows them.
ARCH_MIN_PTX = {80: (7, 0), 86: (7, 1), 87: (7, 4), 89: (7, 8), 90: (7, 8), 100: (8, 6),
                101: (8, 6), 103: (8, 8), 110: (9, 0), 120: (8, 7), 121: (8, 8)}
# The lowering's own needs: griddepcontrol and .NaN min/max etc. are all <= 7.8.
SUBSET_MIN_PTX = (7, 8)
# Instructions whose PTX ISA version depends on the target, found in the generated PTX:
# (what, pattern over the PTX text, {arch: first PTX ISA version that has it there}). From ptxas
# 13.5: "Feature 'cvt.e4m3x2.f32 on sm_89' requires PTX ISA .version 8.1 or later" (sm_90 and
# newer take it from 7.8); the same holds for cvt from e4m3x2/e5m2x2 to f16x2.
FEATURE_MIN_PTX = (
    ("cvt with .e4m3x2/.e5m2x2", re.compile(r"^\s*cvt(?:\.\w+)*\.e[45]m[23]x2\b", re.M),
     {89: (8, 1)}),
    # ptxas 13.5: "Feature 'mma with FP8 floating point type' requires PTX ISA .version 8.4"
    # (m16n8k32 .e4m3/.e5m2, sm_89+; sm_100 and newer need a later version anyway)
    ("mma with .e4m3/.e5m2", re.compile(r"^\s*mma(?:\.\w+)*\.e[45]m[23]\b", re.M),
     {89: (8, 4), 90: (8, 4)}),
    # PTX ISA: wgmma.mma_async, "Introduced in PTX ISA version 8.0", sm_90a only
    ("wgmma", re.compile(r"^\s*wgmma\.", re.M), {90: (8, 0)}),
)
# CUDA toolkit (nvJitLink / driver) version -> newest PTX ISA it accepts.
TOOLKIT_MAX_PTX = {(12, 0): (8, 0), (12, 1): (8, 1), (12, 2): (8, 2), (12, 3): (8, 3),
                   (12, 4): (8, 4), (12, 5): (8, 5), (12, 6): (8, 5), (12, 8): (8, 7),
                   (12, 9): (8, 8), (13, 0): (9, 0), (13, 1): (9, 1), (13, 2): (9, 2),
                   (13, 3): (9, 3), (13, 4): (9, 4), (13, 5): (9, 5)}
MIN_NVJITLINK = (12, 0)

# Shared memory one CTA may use (static + dynamic) after opting in with
# CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: the "maximum amount of shared memory per thread
# block" row of the CUDA C++ Programming Guide's compute-capability table (163 KiB on 8.0/8.7,
# 99 KiB on 8.6/8.9/12.x, 227 KiB on 9.0/10.x/11.0), i.e. cudaDevAttrMaxSharedMemoryPerBlockOptin.
# Without opting in a CTA gets 48 KiB, the most a kernel may declare statically.
KIB = 1024
STATIC_SHARED_LIMIT = 48 * KIB
MAX_SHARED_PER_BLOCK_OPTIN = {80: 163 * KIB, 86: 99 * KIB, 87: 163 * KIB, 89: 99 * KIB,
                              90: 227 * KIB, 100: 227 * KIB, 101: 227 * KIB, 103: 227 * KIB,
                              110: 227 * KIB, 120: 99 * KIB, 121: 99 * KIB}


def max_shared_per_block(arch: int) -> int:
    """Bytes of shared memory (static + dynamic) one CTA can have on `arch` (opted in)."""
    return MAX_SHARED_PER_BLOCK_OPTIN[arch]


def parse_arch(arch) -> int:
    """'sm_90' / 'sm_90a' / 90 -> 90."""
    if isinstance(arch, int):
        number = arch
    else:
        match = re.fullmatch(r"(?:sm_|compute_)?(\d+)[af]?", str(arch).strip())
        if not match:
            raise TilebcError(f"cannot parse GPU architecture {arch!r}; expected e.g. 'sm_90'")
        number = int(match.group(1))
    if number not in ARCH_MIN_PTX:
        raise TilebcError(f"GPU architecture sm_{number} is not supported by the JIT; supported: "
                          + ", ".join(f"sm_{a}" for a in sorted(ARCH_MIN_PTX)))
    return number


def max_ptx_for(toolkit: tuple[int, int]) -> tuple[int, int]:
    """Newest PTX ISA a toolkit version accepts (newer, unknown toolkits: the newest we know)."""
    known = [v for v in TOOLKIT_MAX_PTX if v <= tuple(toolkit)]
    if not known:
        raise TilebcError(f"CUDA {toolkit[0]}.{toolkit[1]} is too old for the JIT "
                          f"(needs nvJitLink {MIN_NVJITLINK[0]}.{MIN_NVJITLINK[1]} or newer)")
    return TOOLKIT_MAX_PTX[max(known)]


def features_ptx_version(arch: int, ptx: str) -> tuple[tuple[int, int], str | None]:
    """The PTX ISA version the instructions in `ptx` need on `arch` beyond the baseline, and
    which instruction needs it ((0, 0), None: nothing beyond the baseline)."""
    need, what = (0, 0), None
    for name, pattern, by_arch in FEATURE_MIN_PTX:
        version = by_arch.get(arch)
        if version is not None and version > need and pattern.search(ptx):
            need, what = version, name
    return need, what


def choose_ptx_version(arch: int, nvjitlink: tuple[int, int],
                       driver: tuple[int, int] | None = None,
                       ptx: str | None = None) -> tuple[int, int]:
    """The PTX ISA version to declare for `arch`: what the architecture needs, and with `ptx` (the
    generated code) also what its instructions need there."""
    need = max(ARCH_MIN_PTX[arch], SUBSET_MIN_PTX)
    reason = f"sm_{arch} needs"
    if ptx is not None:
        wanted, what = features_ptx_version(arch, ptx)
        if wanted > need:
            need, reason = wanted, f"the kernel's {what} instructions on sm_{arch} need"
    limit = max_ptx_for(nvjitlink)
    if driver is not None:
        limit = min(limit, max_ptx_for(driver))
    if need > limit:
        raise TilebcError(
            f"{reason} PTX ISA {need[0]}.{need[1]}, newer than the installed "
            f"nvJitLink {nvjitlink[0]}.{nvjitlink[1]}"
            + (f" / driver {driver[0]}.{driver[1]}" if driver else "") + " accepts; upgrade "
            "nvidia-nvjitlink (pip install -U nvidia-nvjitlink)")
    return need


# Variables that decide which libnvJitLink cuda-pathfinder finds.
_SEARCH_ENVIRONMENT = ("CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "CONDA_PREFIX",
                       "PYTHONUSERBASE")


def nvjitlink_fingerprint(path: str | None) -> str | None:
    """A digest of what decides which libnvJitLink cuda-pathfinder loads in a new process: the
    library file at `path` (inode, size, mtime), the interpreter, the search variables, the
    site-packages folders it scans (installing or removing a wheel adds or drops a dist-info
    there, which changes the folder's mtime; nvidia/ itself is not stable: tools write beside
    their files) and the dynamic linker's cache. While it holds, a version recorded with it holds
    without loading the library (cuda.pathfinder and the library: ~100 ms). None without a path."""
    from .digest import sha256
    import os
    import sys
    from .linker import site_folders
    if not path:
        return None
    folders = site_folders()
    parts = [sys.version, sys.prefix, path]
    searched = _SEARCH_ENVIRONMENT + (("PATH",) if os.name == "nt" else ())  # Windows' DLL search
    parts += [f"{name}={os.environ.get(name)}" for name in searched]
    for item in [path, "/etc/ld.so.cache"] + folders:
        try:
            info = os.stat(item)
        except OSError:
            parts.append(f"{item}: -")
            continue
        parts.append(f"{item}: {info.st_ino} {info.st_size} {info.st_mtime_ns}")
    return sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


def loaded_nvjitlink_path() -> str | None:
    """The path of the libnvJitLink that nvjitlink_module() opened, when known."""
    return nvjitlink_module().path if nvjitlink_module.cache_info().currsize else None


@lru_cache(maxsize=None)  # locating and loading the library is done once per process
def nvjitlink_module():
    """nvJitLink (linker.NvJitLink) on the library cuda-pathfinder would choose."""
    from . import linker
    try:
        library, path = linker.locate_and_open()
    except Exception as exc:  # pathfinder's DynamicLibNotFoundError, a failed dlopen, ...
        raise TilebcError(f"libnvJitLink not found ({exc}); pip install nvidia-nvjitlink") from exc
    try:
        return linker.NvJitLink(library, path)
    except AttributeError as exc:  # a library without the nvJitLink entry points
        raise TilebcError(f"{path or 'libnvJitLink'} is not a usable nvJitLink ({exc})") from exc


def start_loading_nvjitlink() -> None:
    """Let the library load in the background while the caller lowers (linker.start_loading);
    nothing if nvjitlink_module() has opened it already."""
    if not nvjitlink_module.cache_info().currsize:
        from . import linker
        linker.start_loading()


@lru_cache(maxsize=None)
def installed_nvjitlink() -> tuple[int, int]:
    """The loaded libnvJitLink's (major, minor), read once per process (it stays loaded)."""
    return tuple(nvjitlink_module().version())


# nvJitLink's (major, minor) as launch.prime_from_memo recalled it from the cubin cache's memo
# (its fingerprint still holding), so that PTX and cache keys need not load the library.
recalled_nvjitlink: tuple[int, int] | None = None


def known_nvjitlink() -> tuple[int, int]:
    """The recalled version, else the loaded library's (installed_nvjitlink)."""
    return recalled_nvjitlink or installed_nvjitlink()


def nvjitlink_version() -> tuple[int, int]:
    try:
        version = known_nvjitlink()
    except TilebcError:
        raise
    except Exception as exc:
        raise TilebcError(f"cannot load libnvJitLink: {exc}; pip install nvidia-nvjitlink") from exc
    if version < MIN_NVJITLINK:
        raise TilebcError(f"nvJitLink {version[0]}.{version[1]} is too old; the JIT needs "
                          f"{MIN_NVJITLINK[0]}.{MIN_NVJITLINK[1]} or newer")
    return version


def driver_version() -> tuple[int, int] | None:
    """The CUDA driver's version, or None without a driver. Opens the driver: call on demand only."""
    try:
        from cuda.bindings import driver
        err, version = driver.cuDriverGetVersion()
    except Exception:
        return None
    if int(err) != 0:
        return None
    return version // 1000, (version % 1000) // 10
