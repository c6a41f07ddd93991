"""`load(bytecode)` -> entries with signatures -> `kernel[grid](*args)`, on either backend.

Both backends (our JIT and NVIDIA's `tileiras`) compile through the same cubin cache and launch
through the same path. Compilation happens at first launch for the launching device's
architecture, or explicitly with `Kernel.compile(arch)`, which needs no GPU.

A list of arrays is cuTile's list-of-arrays parameter (as `tilebc.interp.run` takes it): the
launcher builds its i64 table (address, shape..., strides... per array) on the device, on the
launch stream, and keeps it and the arrays alive until the stream has passed the kernel.

Array arguments: anything with `__dlpack__` (torch, cupy, cuda.core StridedMemoryView, ...) or the
CUDA Array Interface. A CAI typestr cannot name bf16 or fp8: for those kernel types a same-size raw
typestr ('<V2', '<u2', '<i2'; '|V1', '|u1', '|i1') is read as the kernel's type, unless the object's
`.dtype` (cupy, torch) says otherwise. A bare cuda.core `Buffer` is untyped bytes and is refused:
wrap it as `StridedMemoryView.from_buffer(buffer, shape, dtype=...)`.
"""
from __future__ import annotations

import os
import sys
from functools import lru_cache
from collections.abc import Mapping, Sequence

import tilebc
from tilebc.errors import TilebcError

from .digest import blake2b, sha256
from . import driver
from .launch_errors import ArgumentError, LaunchError
from .cache import CacheEntry, CubinCache, KeyFields

TYPE_CHECKING = False

_default_cache: CubinCache | None = None


def default_cache() -> CubinCache:
    """The process-wide cache configured from the environment (created on first use)."""
    global _default_cache
    if _default_cache is None:
        _default_cache = CubinCache.from_environment()
    return _default_cache


# -- backends -------------------------------------------------------------------------------------

class TileirasBackend:
    """NVIDIA's `tileiras` (bytecode -> cubin). Options: opt_level (0-3), lineinfo, device_debug."""

    name = "tileiras"
    _FLAGS = {"lineinfo": "--lineinfo", "device_debug": "--device-debug"}

    def __init__(self, path: str | None = None):
        self.path = path or tool_path("tileiras")
        if self.path is None:
            raise LaunchError("backend 'tileiras' needs NVIDIA's tileiras: install it with `pip "
                              "install nvidia-cuda-tileiras` or set TILEBC_TILEIRAS")

    def identity(self) -> str:
        return f"tileiras/{_tileiras_version(self.path)}"

    def ptx_isa(self, arch: str) -> str:
        return ""  # tileiras' PTX is internal: its version is part of the tileiras identity

    def nvjitlink(self) -> str:
        return ""

    def toolchain_record(self) -> dict[str, Any]:
        return {"identity": self.identity(), "ptx_isa": {}, "nvjitlink": ""}

    def compile(self, bytecode: bytes, entry: str, arch: str,
                options: Mapping[str, Any]) -> tuple[bytes, dict[str, Any]]:
        flags = []
        for name, value in sorted(options.items()):
            if name == "opt_level" and value in (0, 1, 2, 3):
                flags.append(f"--opt-level={value}")
            elif name in self._FLAGS and isinstance(value, bool):
                flags += [self._FLAGS[name]] if value else []
            else:
                raise LaunchError(f"backend 'tileiras': unknown or invalid option {name}={value!r} "
                                  f"(known: opt_level 0-3, {', '.join(self._FLAGS)} as bools)")
        import subprocess
        import tempfile
        from pathlib import Path
        with tempfile.TemporaryDirectory(prefix="tilebc-tileiras-") as folder:
            source, output = Path(folder, "input.tilebc"), Path(folder, "output.cubin")
            source.write_bytes(bytecode)
            done = subprocess.run([self.path, f"--gpu-name={arch}", *flags, "-o", str(output),
                                   str(source)], capture_output=True, text=True, timeout=600)
            if done.returncode != 0 or not output.exists():
                raise LaunchError(f"tileiras failed for entry {entry!r} ({arch}), exit "
                                  f"{done.returncode}: {done.stderr.strip() or done.stdout.strip()}")
            cubin = output.read_bytes()
        threads, shared = cubin_launch_facts(cubin, entry)
        return cubin, {"threads_per_cta": threads, "static_shared_bytes": shared,
                       "dynamic_shared_bytes": 0, "backend": self.name}


class JitBackend:
    """tilebc's own compiler (`tilebc_runtime.compile`: Tile IR -> PTX -> nvJitLink -> cubin)."""

    name = "tilebc-jit"

    def __init__(self, decoded: tuple[bytes, Any] | None = None):
        # (bytes, the unverified Module they decoded to): a miss on those bytes compiles the
        # Module instead of decoding them again (`tilebc compile` has decoded them already).
        self.decoded = decoded

    def identity(self) -> str:
        from ._version import __version__
        return f"tilebc-jit/{__version__}+{(_MEMO.get('sources') or lowering_sources_hash())[:16]}"

    def ptx_isa(self, arch: str) -> str:
        from .targets import choose_ptx_version, parse_arch
        major, minor = choose_ptx_version(parse_arch(arch), _linker_version())
        return f"{major}.{minor}"

    def nvjitlink(self) -> str:
        try:
            return "%d.%d" % _linker_version()
        except Exception as error:  # the JIT itself reports a missing nvJitLink when it compiles
            return f"unavailable ({type(error).__name__})"

    def prime(self, cache: CubinCache, compute: bool = True) -> bool:
        return prime_from_memo(cache, compute=compute)

    def toolchain_record(self) -> dict[str, Any]:
        # Every arch the JIT targets, so a host without Python can rebuild key field 7.
        from .targets import ARCH_MIN_PTX
        from tilebc.errors import TilebcError
        table = {}
        for number in sorted(ARCH_MIN_PTX):
            try:
                table[f"sm_{number}"] = self.ptx_isa(f"sm_{number}")
            except TilebcError:
                continue  # the installed nvJitLink cannot target it: no key to look up
        return {"identity": self.identity(), "ptx_isa": table, "nvjitlink": self.nvjitlink()}

    def compile(self, bytecode: bytes, entry: str, arch: str,
                options: Mapping[str, Any]) -> tuple[bytes, dict[str, Any]]:
        # Imported here: a cache hit computes its key without loading the lowering.
        from .compiler import compile as jit_compile
        source = bytecode
        if self.decoded is not None and self.decoded[0] == bytecode:
            from tilebc.verify import verify
            source = self.decoded[1]
            verify(source)  # as compiling the bytes would (they decoded, unverified)
        result = jit_compile(source, entry, arch, emit="cubin", **dict(options))
        return bytes(result.cubin), self.metadata(result)

    def metadata(self, result) -> dict[str, Any]:
        """The cache entry's launch facts of one compiled entry (compiler.CompileResult)."""
        metadata = {"threads_per_cta": result.threads_per_cta,
                    "static_shared_bytes": result.shared_memory_bytes,
                    "dynamic_shared_bytes": result.dynamic_shared_bytes,
                    "backend": self.name}
        maps = result._only().tensor_maps
        if maps:  # TMA kernels: the launcher builds these after the kernel's parameters
            metadata["tensor_maps"] = [dict(record) for record in maps]
        return metadata


BACKENDS = {"jit": JitBackend, "tileiras": TileirasBackend}

# Modules of this package that do not influence generated code, so are left out of the JIT's
# identity hash (editing the launcher or the PTX emulator must not invalidate every cached cubin).
# The rest of perf/ is in: the compiler asks its model whether a product runs on wgmma.
_NOT_LOWERING = {"cache.py", "cache_cli.py", "cache_entry.py", "cache_remote.py", "launch.py",
                 "launch_errors.py", "args.py", "driver.py", "aot.py", "cli.py", "demo.py", "sim/",
                 "perf/static.py", "tensor_maps.py"}
# The parts of tilebc (the format package) that shape the JIT's output: the reader and verifier
# that build the IR it lowers, the IR, the op table, and the numeric helpers it folds constants
# with. Not here: the text form (a text file is assembled to bytecode first, and the key hashes
# those bytes), the CPU interpreter, the command line and the NVIDIA tool finder.
# runtime/tests/test_rt_cache_key.py checks that the JIT imports nothing of tilebc outside these.
TILEBC_CODEGEN_SOURCES = ("__init__.py", "api.py", "version.py", "errors.py", "record.py", "gcpause.py",
                          "codecache.py", "numeric/__init__.py", "numeric/numerics.py",
                          "numeric/formats.py", "numeric/convert.py", "numeric/dense.py",
                          "numeric/dtypes.py", "binary/", "ir/", "ops/", "verify/",
                          # the reader's compiled decoder: its C sources stand for the built module
                          "speedups.py", "_speedups.c", "_opdecoder.c", "_printer.c",
                          "_verifier.c", "_opencoder.c", "_opparser.c", "_speedups.h")


def _matcher(entries):
    """Whether a relative path is listed in `entries`: a file by name, or under a "folder/"."""
    names = frozenset(entry for entry in entries if not entry.endswith("/"))
    folders = tuple(entry for entry in entries if entry.endswith("/"))
    return lambda relative: relative in names or relative.startswith(folders)


def codegen_source_files() -> list[tuple[str, str]]:
    """(name, path) of every source file in the JIT's identity hash, in hashing order: the
    tilebc files in TILEBC_CODEGEN_SOURCES, then tilebc_runtime's files outside _NOT_LOWERING."""
    return list(_walk_codegen_sources())


def _tilebc_folder(folder: str) -> bool:
    """Whether a tilebc folder ("ir/", "ir/sub/") may hold a file in TILEBC_CODEGEN_SOURCES: on
    the way to a listed path, or inside a listed folder."""
    return any(entry.startswith(folder) or (entry.endswith("/") and folder.startswith(entry))
               for entry in TILEBC_CODEGEN_SOURCES)


_hidden_in_runtime = _matcher(_NOT_LOWERING)


def _package_sources(package: str, keep, enter) -> list[tuple[str, str]]:
    """(name relative to `package`, path) of its .py/.c/.h files that `keep(name)` accepts, in
    hashing order; a folder ("a/b/") is walked only where `enter(folder)`."""
    found = []
    # os.walk rather than Path.rglob: a quarter of the time, and this runs in every process;
    # folders with nothing to hash (tilebc/text/, the runtime's sim/) are not entered
    for folder, subfolders, names in os.walk(package):
        relative = os.path.relpath(folder, package).replace(os.sep, "/")
        prefix = "" if relative == "." else relative + "/"
        # not hidden folders or files (an editor's lock, `.#compiler.py`, is a dangling link),
        # nor anything but regular files: no source
        subfolders[:] = [name for name in subfolders if name != "__pycache__"
                         and not name.startswith(".") and enter(f"{prefix}{name}/")]
        for name in names:
            if name.endswith((".py", ".c", ".h")) and not name.startswith(".") \
                    and keep(prefix + name):
                path = os.path.join(folder, name)
                if os.path.isfile(path):
                    found.append((prefix + name, path))
    # rglob's order: by path parts, so `a/b.py` sorts before `a_b.py`
    return sorted(found, key=lambda item: item[0].split("/"))


@lru_cache(maxsize=None)  # a cold compile asks twice (fingerprint, then hash): walk once (~2.5 ms)
def _walk_codegen_sources() -> tuple[tuple[str, str], ...]:
    files = []
    for package, keep, enter in (
            (os.path.dirname(os.path.realpath(tilebc.__file__)),
             _matcher(TILEBC_CODEGEN_SOURCES), _tilebc_folder),
            (os.path.dirname(os.path.realpath(__file__)),
             lambda name: not _hidden_in_runtime(name),
             lambda folder: not _hidden_in_runtime(folder))):
        label = os.path.basename(package)
        files += [(f"{label}/{relative}", path)
                  for relative, path in _package_sources(package, keep, enter)]
    return tuple(files)


LOWERING_HASH = "blake2b-256"  # in the memo's name: a value another algorithm made is not used


@lru_cache(maxsize=None)
def lowering_sources_hash() -> str:
    """BLAKE2b-256 over tilebc's version and the source of everything that shapes the JIT's output
    (codegen_source_files: name and bytes of each), computed once per process (a third of
    SHA-256's time here, without OpenSSL: digest.py)."""
    digest = blake2b(f"tilebc {tilebc.__version__}\0".encode(), digest_size=32)
    for name, path in codegen_source_files():
        try:
            with open(path, "rb") as source:
                data = source.read()
        except OSError:  # removed since the walk (see _sources_fingerprint): hashed as absent
            digest.update(name.encode() + b"\1")
            continue
        digest.update(name.encode() + b"\0" + data + b"\0")
    return digest.hexdigest()


# Facts of the JIT's cache key that prime_from_memo() took from the cache's memo instead of
# computing them: "sources" (lowering_sources_hash); nvJitLink's version is targets'.
_MEMO: dict[str, Any] = {}


def _linker_version() -> tuple[int, int]:
    from .targets import known_nvjitlink
    return known_nvjitlink()


def _sources_fingerprint(files: list[tuple[str, str]]) -> str:
    """A digest of the name, inode, size and modification time of each hashed source file: while
    it holds, so does the lowering hash (~6 ms to recompute: it reads ~1.3 MB of source)."""
    parts = [f"tilebc {tilebc.__version__}"]
    for name, path in files:
        try:
            info = os.stat(path)
        except OSError:  # removed since the walk: an edit under way, which the next run sees
            parts.append(f"{name} -")
            continue
        parts.append(f"{name} {info.st_ino} {info.st_size} {info.st_mtime_ns}")
    return sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


def hash_memo_beside_sources() -> str:
    """The file that keeps the lowering hash beside the sources it digests: tilebc_runtime's
    __pycache__, or that folder's place under sys.pycache_prefix, as Python keeps bytecode. The
    hash is a fact of the installed sources, not of a cache: a new cache directory finds it."""
    folder = os.path.dirname(os.path.abspath(__file__))
    if sys.pycache_prefix:
        folder = os.path.join(sys.pycache_prefix, os.path.splitdrive(folder)[1].lstrip(os.sep))
    else:
        folder = os.path.join(folder, "__pycache__")
    return os.path.join(folder, "lowering-hash.json")


def _recall_sources_hash(cache: CubinCache, name: str, fingerprint: str) -> tuple[bool, bool]:
    """Take the lowering hash from `cache`'s memo, else from the memo beside the sources, where
    the record's fingerprint still holds: (taken, from the cache)."""
    from .cache import read_memo
    for in_cache in (True, False):
        stored, value = cache.memo(name) if in_cache else \
            read_memo(hash_memo_beside_sources(), name)
        if stored == fingerprint and isinstance(value, str) and len(value) == 64:
            _MEMO["sources"] = value
            return True, in_cache
    return False, False


def record_hash_beside_sources() -> str | None:
    """Record the lowering hash beside the sources even where Python writes no bytecode: an
    installer's step, as compiling the sources' bytecode is (scripts/setup.sh). The record's
    path, or None where it could not be written."""
    files = codegen_source_files()
    written = _remember_beside_sources(_hash_record_name(files), _sources_fingerprint(files),
                                       lowering_sources_hash(), always=True)
    return hash_memo_beside_sources() if written else None


def _hash_record_name(files: list[tuple[str, str]]) -> str:
    """The record's name: per checkout (the two package folders) and hash algorithm."""
    return (f"lowering_hash {LOWERING_HASH} {os.path.dirname(files[0][1])} "
            f"{os.path.dirname(__file__)}")


def _remember_beside_sources(name: str, fingerprint: str, value: str, always=False) -> bool:
    """Record the lowering hash beside the sources (best effort), unless Python writes no
    bytecode there either (-B, PYTHONDONTWRITEBYTECODE) and not `always`: whether it did."""
    if sys.dont_write_bytecode and not always:
        return False
    from .cache import write_memo
    path = hash_memo_beside_sources()
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
        write_memo(path, {name: (fingerprint, value)})
    except Exception:  # a read-only installation, say: the cache's memo keeps it
        return False
    # a writer killed between its temp file and the rename leaves the temp file: an hour on, it
    # is nobody's
    import time
    try:
        with os.scandir(folder) as entries:
            strays = [entry.path for entry in entries if entry.name.startswith(".tmp-")
                      and entry.name.endswith(".json")
                      and entry.stat(follow_symlinks=False).st_mtime < time.time() - 3600]
    except OSError:
        return True
    for path in strays:
        try:
            os.unlink(path)
        except OSError:
            pass  # removed by another process meanwhile, say
    return True


def prime_from_memo(cache: CubinCache, *, compute: bool = True) -> bool:
    """Once per process, before the first key: take the lowering hash and nvJitLink's version from
    `cache`'s memo where their fingerprints still hold, so that a `tilebc compile` served from
    the cache neither reads the sources nor loads nvJitLink (cuda.pathfinder and the library:
    ~100 ms of a new process); otherwise compute them and record them for the next process. The
    lowering hash is also kept beside the sources (hash_memo_beside_sources), so that the first
    compile in a new cache does not read them either.

    Returns whether both came from the cache's memo (True without a disk cache). With
    `compute=False` a fact missing from that memo is left to a later call, nvJitLink starting to
    open meanwhile: a cache without this toolchain's memo is new to it, so a caller may skip its
    lookup there."""
    from . import targets
    if "primed" in _MEMO or not cache.disk_enabled:
        return True
    recalled = _MEMO.get("recalled")
    if recalled is None:
        nvjitlink_name = f"nvjitlink {sys.prefix}"
        linker = bool(targets.installed_nvjitlink.cache_info().currsize) or \
            _recall_nvjitlink(cache, nvjitlink_name)
        if not linker:
            targets.start_loading_nvjitlink()  # the library opens while the sources are hashed
        # (memo name, fingerprint, whether the hash was recalled) of a record the cache's memo
        # lacks. Named per checkout and per environment: several sharing one cache keep a record
        # each.
        sources = None
        if not lowering_sources_hash.cache_info().currsize:
            files = codegen_source_files()
            name = _hash_record_name(files)
            fingerprint = _sources_fingerprint(files)
            taken, in_cache = _recall_sources_hash(cache, name, fingerprint)
            if not in_cache:
                sources = (name, fingerprint, taken)
        recalled = _MEMO["recalled"] = (linker, nvjitlink_name, sources)
    linker, nvjitlink_name, sources = recalled
    if not compute and (not linker or sources is not None):
        return False
    _MEMO["primed"] = True
    records = {}  # for the cache's memo, written once
    if sources is not None:
        name, fingerprint, taken = sources
        if not taken:
            _remember_beside_sources(name, fingerprint, lowering_sources_hash())
        records[name] = (fingerprint, _MEMO.get("sources") or lowering_sources_hash())
    try:
        if not linker:
            try:
                version = targets.installed_nvjitlink()
            except Exception:
                return False  # reported when the JIT compiles
            path = targets.loaded_nvjitlink_path()
            fingerprint = targets.nvjitlink_fingerprint(path)
            if fingerprint is not None:
                records[nvjitlink_name] = (fingerprint, {"path": path, "version": list(version)})
    finally:
        cache.remember(records)
    return linker and sources is None


def _recall_nvjitlink(cache: CubinCache, name: str) -> bool:
    """Take nvJitLink's version from `cache`'s memo where its fingerprint still holds."""
    from . import targets
    stored, value = cache.memo(name)
    try:
        if stored is not None and stored == targets.nvjitlink_fingerprint(value["path"]):
            major, minor = value["version"]
            targets.recalled_nvjitlink = (int(major), int(minor))
            return True
    except Exception:
        pass  # a damaged record: load the library and record it again
    return False


def tool_path(name: str) -> str | None:
    """An NVIDIA tool: $TILEBC_<NAME>, the nvidia/cu13/bin of a wheel on sys.path, then $PATH."""
    override = os.environ.get(f"TILEBC_{name.upper()}")
    if override:
        return override
    for entry in sys.path:
        candidate = os.path.join(entry or ".", "nvidia", "cu13", "bin", name)
        if os.path.isfile(candidate):
            return candidate
    import shutil
    return shutil.which(name)


@lru_cache(maxsize=None)
def _tileiras_version(path: str) -> str:
    import re
    import subprocess
    done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    match = re.search(r"V(\d+\.\d+\.\d+)", done.stdout)
    if done.returncode != 0 or match is None:
        raise LaunchError(f"cannot read the version of {path}: {done.stderr.strip() or done.stdout}")
    return match.group(1)


def cubin_launch_facts(cubin: bytes, entry: str) -> tuple[int | None, int]:
    """(threads per CTA from the kernel's required block size, static shared bytes) of `entry`.

    Reads the cubin's ELF section headers: `.nv.info.<entry>` holds EIATTR_REQNTID (0x10) and
    `.nv.shared.<entry>` has the static shared memory as its size."""
    import struct
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        raise LaunchError("not a 64-bit ELF cubin")
    section_offset = struct.unpack_from("<Q", cubin, 0x28)[0]
    entry_size, count, names_index = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", cubin, section_offset + i * entry_size)
               for i in range(count)]
    names_at = headers[names_index][4]

    def name_of(header) -> str:
        start = names_at + header[0]
        return cubin[start:cubin.index(b"\0", start)].decode()

    threads, shared = None, 0
    for header in headers:
        name, offset, size = name_of(header), header[4], header[5]
        if name == f".nv.shared.{entry}":
            shared = size
        elif name == f".nv.info.{entry}":
            position, end = offset, offset + size
            while position + 2 <= end:
                form, attribute = cubin[position], cubin[position + 1]
                if form == 4:  # EIFMT_SVAL: u16 length, then the value
                    length = struct.unpack_from("<H", cubin, position + 2)[0]
                    if attribute == 0x10:  # EIATTR_REQNTID: x, y, z
                        x, y, z = struct.unpack_from("<III", cubin, position + 4)
                        threads = x * y * z
                    position += 4 + length
                else:  # EIFMT_NVAL/BVAL/HVAL: a 4-byte record (NVAL's value half is padding)
                    position += 4
    return threads, shared


# -- modules and kernels ----------------------------------------------------------------------

if TYPE_CHECKING:  # annotations only: importing typing costs every command's start ~3 ms
    from typing import Any, Union
    Source = Union[bytes, bytearray, memoryview, str, os.PathLike, "tilebc.Module",
                   tuple["tilebc.Module", bytes]]


def load(source: Source, *, backend: str = "jit", cache: CubinCache | None = None,
         options: Mapping[str, Any] | None = None) -> LoadedModule:
    """Read Tile IR bytecode; nothing is compiled yet.

    `source` is bytes, a path, a tilebc Module, or `(module, data)`: a Module together with the
    bytes it was decoded from. The cache key hashes the bytecode, so bytes and paths (and the
    pair) give the keys the C++ loader gives for the same file. A bare Module is re-encoded with
    `tilebc.dump` (different bytes, so different keys) unless it carries `source_bytes`."""
    if isinstance(source, tuple):
        if len(source) != 2 or not isinstance(source[0], tilebc.Module) or \
                not isinstance(source[1], (bytes, bytearray, memoryview)):
            raise LaunchError("load: a tuple source must be (tilebc.Module, the bytes it was "
                              f"decoded from), got {tuple(type(x).__name__ for x in source)}")
        module, bytecode = source[0], bytes(source[1])
        name = module.source or "<module>"
        _check_same_module(module, bytecode, name)
    elif isinstance(source, tilebc.Module):
        module, name = source, source.source or "<module>"
        original = getattr(source, "source_bytes", None)
        bytecode = bytes(original) if original is not None else tilebc.dump(source, source.version)
    else:
        if isinstance(source, (bytes, bytearray, memoryview)):
            bytecode, name = bytes(source), "<bytes>"
            module = tilebc.load(bytecode)
        else:
            name = os.fspath(source)
            with open(name, "rb") as stream:
                bytecode = stream.read()
            module = tilebc.load(name)  # errors then name the file
    if backend not in BACKENDS:
        raise LaunchError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    return LoadedModule(bytecode, module, name, backend, cache, dict(options or {}))


def key_fields(backend, bytecode: bytes, entry: str, arch: str,
               options: Mapping[str, Any]) -> KeyFields:
    """The cache key fields of one entry of `bytecode` compiled by `backend` for `arch`."""
    return KeyFields(toolchain=backend.identity(), bytecode=bytecode, entry=entry, arch=arch,
                     ptx_isa=backend.ptx_isa(arch), nvjitlink=backend.nvjitlink(),
                     options=options)


def compile_entry(backend, cache: CubinCache, bytecode: bytes, name: str, entry: str, arch: str,
                  options: Mapping[str, Any]) -> CacheEntry:
    """The cubin of `entry` for `arch`, through `cache`; `name` (the bytes' file) names errors.

    Needs no decoded module: the JIT decodes and verifies the bytes itself on a miss, and a hit
    is bytes that verified before under the same toolchain identity (the key hashes both)."""
    if hasattr(backend, "prime"):
        backend.prime(cache)
    cache.record_toolchain(backend.name, backend.toolchain_record())
    try:
        found = cache.get_or_compile(key_fields(backend, bytecode, entry, arch, options),
                                     backend.compile)
    except TilebcError as error:
        # the backend compiles the module's bytes: name the file they came from
        if error.file is None and name not in ("<bytes>", "<module>"):
            error.file = name
        raise
    if not found.threads:
        raise LaunchError(f"{entry}: the compiled cubin does not state its block size")
    return found


def cached_entry(backend, cache: CubinCache, bytecode: bytes, entry: str, arch: str,
                 options: Mapping[str, Any]) -> CacheEntry | None:
    """compile_entry's result when the cache already holds it, else None (nothing compiled). A
    hit needs neither the decoder nor the lowering: the key hashes the bytes and the toolchain.
    A cache without the backend's memo is not looked in here (compile_entry still looks)."""
    if hasattr(backend, "prime") and not backend.prime(cache, compute=False):
        return None
    cache.record_toolchain(backend.name, backend.toolchain_record())
    found = cache.lookup(key_fields(backend, bytecode, entry, arch, options).key())
    return found if found is not None and found.threads else None


def _check_same_module(module, bytecode: bytes, name: str) -> None:
    """Refuse a pair whose bytes plainly are not the Module's: the bytes decode (no verifier) to
    the same version and the same entries with the same parameter types. The cache key and the
    compiled code follow the bytes, the signatures the Module, so they must agree."""
    from tilebc.binary import reader
    header = reader.load(bytecode, lazy_debug=True)
    ours = [(f.name, [str(a.type) for a in f.args]) for f in module.functions]
    theirs = [(f.name, [str(a.type) for a in f.args]) for f in header.functions]
    if header.version != module.version or ours != theirs:
        raise LaunchError(f"{name}: the bytes given with the Module are not the ones it was "
                          f"decoded from (version {header.version} vs {module.version}, "
                          f"entries {theirs} vs {ours})")


class LoadedModule:
    """A bytecode module: `entries` maps each entry name to its signature; `m[name]` a Kernel."""

    def __init__(self, bytecode: bytes, module, name: str, backend: str,
                 cache: CubinCache | None, options: dict[str, Any]):
        self.bytecode = bytecode
        self.module = module
        self.name = name
        self.backend_name = backend
        self.options = options
        self._cache = cache
        self._backend = None
        from .args import infer_signature  # argument packing: not needed to compile
        self.entries: dict[str, Signature] = {f.name: infer_signature(f)
                                                for f in module.functions}
        self._kernels: dict[str, Kernel] = {}

    @property
    def cache(self) -> CubinCache:
        return self._cache if self._cache is not None else default_cache()

    @property
    def backend(self):
        if self._backend is None:
            self._backend = BACKENDS[self.backend_name]()
        return self._backend

    def __getitem__(self, entry: str) -> Kernel:
        entry = self._resolve(entry)
        if entry not in self._kernels:
            self._kernels[entry] = Kernel(self, entry)
        return self._kernels[entry]

    def _resolve(self, entry: str) -> str:
        """The full entry name: `entry` itself, or the one cuTile mangled from it (`entry_…`), as
        `tilebc.run` finds entries."""
        if entry in self.entries:
            return entry
        matches = [name for name in self.entries if name.startswith(f"{entry}_")]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise KeyError(f"{self.name}: entry {entry!r} is ambiguous: {', '.join(matches)}")
        raise KeyError(f"{self.name}: no entry {entry!r}; entries: {', '.join(self.entries)}")

    def __repr__(self) -> str:
        return f"<LoadedModule {self.name}: {', '.join(map(str, self.entries.values()))}>"


def _grid3(grid) -> tuple[int, int, int]:
    dims = (grid,) if isinstance(grid, int) else tuple(grid)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1
                                          for d in dims):
        raise LaunchError(f"grid must be 1 to 3 positive ints, got {grid!r}")
    return dims + (1,) * (3 - len(dims))


class Kernel:
    """One entry of a loaded module: `kernel.launch(grid, *args)` or `kernel[grid](*args)`."""

    def __init__(self, module: LoadedModule, entry: str):
        self.module = module
        self.entry = entry
        self.signature = module.entries[entry]
        self._loaded: dict[int, tuple[Any, CacheEntry]] = {}  # device id -> (kernel, entry)
        self._keep_alive = driver.KeepAlive()

    def key_fields(self, arch: str) -> KeyFields:
        return key_fields(self.module.backend, self.module.bytecode, self.entry, arch,
                          self.module.options)

    def compile(self, arch: str) -> CacheEntry:
        """The cubin for `arch` (e.g. "sm_90"), through the cache; needs no GPU."""
        return compile_entry(self.module.backend, self.module.cache, self.module.bytecode,
                             self.module.name, self.entry, arch, self.module.options)

    def prepare(self, args: Sequence[Any], *, device_id: int, dlpack_stream: int,
                pointer_device=None, allow_overlap: bool = False,
                upload=None) -> argmod.PackedArgs:
        """Check and flatten `args` for this entry (everything before the driver is called).
        `upload(table)` puts a list argument's table on the device: (address, owner)."""
        from . import args as argmod
        return argmod.pack_arguments(self.signature, args, device_id=device_id,
                                     dlpack_stream=dlpack_stream,
                                     pointer_device=pointer_device or driver.pointer_device,
                                     allow_overlap=allow_overlap, upload=upload)

    def bind(self, grid, *args, stream=None, device: int | None = None,
             allow_overlap: bool = False) -> BoundLaunch:
        """Check and pack `args` once for launching many times: `bound.launch()` repeats the launch
        on `stream` with the same arguments (the arrays' contents may change in between; their
        addresses, shapes and strides may not). The BoundLaunch keeps the arrays alive."""
        grid3 = _grid3(grid)
        handle = driver.device(device)
        core_stream, dlpack_stream = driver.resolve_stream(stream, handle)
        packed = self.prepare(args, device_id=handle.device_id, dlpack_stream=dlpack_stream,
                              allow_overlap=allow_overlap,
                              upload=lambda table: driver.upload(handle, core_stream, table))
        function, entry = self._function_for(handle)
        config = driver.launch_config(grid3, entry.threads, entry.dynamic_shared_bytes)
        if entry.tensor_maps:
            # TMA kernels (sm_90 default, lowering/tma.py) take their tensor maps by value after their own
            # parameters, encoded from this launch's arrays
            from . import tensor_maps
            # (a map over an empty array is encoded over the device's zeroed scratch)
            found = tensor_maps.resolve_all(entry.tensor_maps, packed.values)
            scratch = driver.zero_scratch(handle, core_stream, tensor_maps.ZERO_SCRATCH_BYTES) \
                if any(each.empty for each in found) else 0
            encoded = [tensor_maps.kernel_argument(tensor_maps.encode(
                tensor_maps.over_zeros(each, scratch))) for each in found]
            config = _WithTensorMaps(grid3, entry.threads, entry.dynamic_shared_bytes, encoded)
        return BoundLaunch(self, grid3, core_stream, config, function, packed)

    def launch(self, grid, *args, stream=None, device: int | None = None,
               allow_overlap: bool = False) -> None:
        """Launch once on `stream` (default: the device's default stream); returns at once."""
        bound = self.bind(grid, *args, stream=stream, device=device, allow_overlap=allow_overlap)
        bound.launch()
        bound.release()

    def _function_for(self, handle) -> tuple[Any, CacheEntry]:
        loaded = self._loaded.get(handle.device_id)
        if loaded is None:
            entry = self.compile(driver.arch_of(handle))
            kernel = driver.load_kernel(entry.cubin, self.entry)
            driver.allow_dynamic_shared(handle, kernel, entry.dynamic_shared_bytes,
                                        entry.static_shared_bytes)
            loaded = (kernel, entry)
            self._loaded[handle.device_id] = loaded
        return loaded

    def __getitem__(self, grid) -> _GridLaunch:
        return _GridLaunch(self, grid)

    def __repr__(self) -> str:
        return f"<Kernel {self.signature}>"


class _WithTensorMaps:
    """The launch configuration of a kernel with TMA tensor maps: cuda.core's launch takes no
    raw 128-byte arguments, so these launch through driver.RawLaunch."""

    __slots__ = ("grid", "threads", "shared_bytes", "maps")

    def __init__(self, grid, threads: int, shared_bytes: int, maps):
        self.grid, self.threads, self.shared_bytes, self.maps = grid, threads, shared_bytes, maps


class BoundLaunch:
    """A kernel with its grid, stream and packed arguments (see `Kernel.bind`).

    `launch()` enqueues one more launch. The arguments stay referenced while this object lives;
    `release()` (or leaving a `with` block, or dropping the object) hands them to the kernel's
    keep-alive list, which drops them once the stream has passed the last launch."""

    def __init__(self, kernel: Kernel, grid: tuple[int, int, int], stream, config, function,
                 packed: argmod.PackedArgs):
        self.kernel, self.grid, self.stream = kernel, grid, stream
        self._config, self._function, self._packed = config, function, packed
        self._waited = not packed.producer_streams
        self._pending = False  # launched since the last release
        self._raw = None  # the driver.RawLaunch of a kernel with tensor maps

    @property
    def values(self):
        """The flat kernel parameter values, as passed to the driver."""
        return list(self._packed.values)

    def launch(self) -> None:
        if not self._waited:  # CAI producers: once is enough, later launches follow in order
            driver.wait_for_producers(self.stream, self._packed.producer_streams)
            self._waited = True
        if isinstance(self._config, _WithTensorMaps):
            if self._raw is None:  # the parameter block once per binding, not per launch
                c = self._config
                self._raw = driver.RawLaunch(self.stream, c.grid, c.threads, c.shared_bytes,
                                             self._function, self._packed.values, c.maps)
            self._raw.launch()
        else:
            driver.launch_with(self.stream, self._config, self._function, self._packed.values)
        self._pending = True

    def release(self) -> None:
        if self._pending:
            self._pending = False
            try:
                self.kernel._keep_alive.hold(self.stream, self._packed.keep_alive)
            except driver.ContextLost:
                pass  # the device runs nothing more: there is no launch left to outlive

    def __enter__(self) -> BoundLaunch:
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def __del__(self):
        try:
            self.release()
        except Exception:  # interpreter shutdown or a dead context: nothing left to protect
            pass

    def __repr__(self) -> str:
        return f"<BoundLaunch {self.kernel.entry} grid={self.grid}>"


class _GridLaunch:
    """`kernel[grid]`: call it with the arguments to launch once."""

    __slots__ = ("kernel", "grid")

    def __init__(self, kernel: Kernel, grid):
        self.kernel, self.grid = kernel, _grid3(grid)

    def __call__(self, *args, stream=None, device: int | None = None,
                 allow_overlap: bool = False) -> None:
        self.kernel.launch(self.grid, *args, stream=stream, device=device,
                           allow_overlap=allow_overlap)


__all__ = ["load", "LoadedModule", "Kernel", "BoundLaunch", "TileirasBackend", "JitBackend", "BACKENDS",
           "default_cache", "cubin_launch_facts", "lowering_sources_hash", "ArgumentError",
           "LaunchError"]
