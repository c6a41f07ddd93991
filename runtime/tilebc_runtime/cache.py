"""On-disk cubin cache with an in-memory map in front (layout and key: runtime/CACHE.md).

The cache never breaks a compile: every disk failure (unreadable, corrupt, not writable) is logged
and turns into a miss or a skipped store. Entries are raw cubin bytes plus JSON metadata; nothing
is pickled, so a cache directory shared between Python versions or hosts is safe to read.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import struct
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping

from tilebc.record import Record

from .digest import sha256
from . import cache_remote
from .cache_entry import (MAX_JSON_BYTES, SCHEMA, CacheEntry, LazyLogger, check_metadata,
                          parse_json)

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every command's start ~3 ms
    from pathlib import Path
    from typing import Any

log = LazyLogger("tilebc_runtime.cache")

MAGIC = "tilebc-cubin-cache"
LAYOUT_DIR = f"v{SCHEMA}"
DEFAULT_MAX_BYTES = 2 * 1024 ** 3
ENV_DIR = "TILEBC_CACHE_DIR"
ENV_MAX_BYTES = "TILEBC_CACHE_MAX_BYTES"
OFF_VALUES = ("off",)
TOOLCHAIN_FILE = "toolchain.json"
MEMO_FILE = "memo.json"  # facts kept between processes for start-up speed (CubinCache.memo)
# A store sums the cache's size (and evicts over the bound) about once per this share of the
# bound stored (CubinCache._sums_size_after); _METADATA_BYTES: about an entry's metadata file.
SIZE_CHECKS_PER_BOUND = 64
_METADATA_BYTES = 1024

# compile_fn(bytecode, entry, arch, options) -> (cubin, launch facts). The facts are merged into
# the entry's metadata: `threads_per_cta`, `static_shared_bytes`, `dynamic_shared_bytes`, `backend`.
CompileFn = Callable[[bytes, str, str, dict[str, "Any"]], tuple[bytes, dict[str, "Any"]]]


def canonical_options(options: Mapping[str, Any] | None) -> str:
    """Compile options as canonical JSON: sorted keys, `,`/`:` separators, ASCII only."""
    return json.dumps(dict(options or {}), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True, allow_nan=False)


class KeyFields(Record):
    """Everything that changes the compiled cubin; see the key table in CACHE.md (a frozen
    record: dataclasses cost start-up time)."""

    _fields = ("toolchain", "bytecode", "entry", "arch", "ptx_isa", "nvjitlink", "options")

    def __init__(self, toolchain: str, bytecode: bytes, entry: str, arch: str, ptx_isa: str = "",
                 nvjitlink: str = "", options: Mapping[str, Any] | None = None):
        # toolchain: backend identity, e.g. "tileiras/13.5.37"; arch: "sm_90"; ptx_isa empty for
        # backends that do not emit PTX, nvjitlink when nvJitLink is not used
        for name, value in (("toolchain", toolchain), ("bytecode", bytecode), ("entry", entry),
                            ("arch", arch), ("ptx_isa", ptx_isa), ("nvjitlink", nvjitlink),
                            ("options", {} if options is None else options)):
            object.__setattr__(self, name, value)

    __hash__ = None  # options is a mapping

    def encoded_fields(self) -> list[bytes]:
        text = (MAGIC, str(SCHEMA), self.toolchain)
        tail = (self.entry, self.arch, self.ptx_isa, self.nvjitlink, canonical_options(self.options))
        return ([value.encode("utf-8") for value in text] + [bytes(self.bytecode)]
                + [value.encode("utf-8") for value in tail])

    def key(self) -> str:
        digest = sha256()
        for value in self.encoded_fields():
            digest.update(struct.pack("<Q", len(value)))
            digest.update(value)
        return digest.hexdigest()

    def describe(self) -> dict[str, Any]:
        """The fields in clear, except the bytecode, which is recorded by its sha256."""
        return {"toolchain": self.toolchain,
                "bytecode_sha256": sha256(self.bytecode).hexdigest(),
                "entry": self.entry, "arch": self.arch, "ptx_isa": self.ptx_isa,
                "nvjitlink": self.nvjitlink, "options": canonical_options(self.options)}


class EntryInfo(Record):
    """One disk entry as `tilebc cache list` shows it: size is cubin + metadata bytes, last_used
    the metadata's mtime (set explicitly on each disk hit)."""

    _fields = ("key", "size", "last_used", "metadata")

    def __init__(self, key: str, size: int, last_used: float,
                 metadata: dict[str, Any] | None):
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "last_used", last_used)
        object.__setattr__(self, "metadata", metadata)


def parse_size(text: str) -> int:
    """'2G', '512M', '1048576' -> bytes."""
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4}
    if text and text[-1] in scale:
        return int(float(text[:-1]) * scale[text[-1]])
    return int(text)


def _foreign_problem(info: os.stat_result) -> str | None:
    """Why a cache folder or file with this status may hold another user's data, or None: it must
    be owned by this user and not writable by group or others."""
    if hasattr(os, "getuid"):
        if info.st_uid != os.getuid():
            return f"is owned by uid {info.st_uid}, not by this user (uid {os.getuid()})"
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"can be written by other users (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def _as_path(text: str) -> Path:
    """A Path for the public API. Inside, paths are strings: importing pathlib (urllib.parse and
    ipaddress with it) costs a new process ~4 ms, about 5 % of a `tilebc compile`."""
    from pathlib import Path
    return Path(text)


def _owner_only_problem(path: str) -> str | None:
    """Why `path` is unsafe to trust as a cache directory, or None."""
    info = os.stat(path)
    if not stat.S_ISDIR(info.st_mode):
        return "is not a directory"
    problem = _foreign_problem(info)
    if problem is not None:
        return problem
    if not os.access(path, os.W_OK | os.X_OK):
        return "is not writable"
    return None


class UntrustedError(OSError):
    """A cache folder or file that another user could have written (see `_foreign_problem`)."""


def _prepare_directory(path: str) -> str | None:
    """Create `path` owner-only if missing; return why it cannot be used, or None."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        return _owner_only_problem(path)
    except OSError as error:
        return f"cannot be created or read ({error.strerror or error})"


def fallback_root() -> Path:
    """Per-user directory under the system temp folder, used when the usual one is unusable."""
    return _as_path(_fallback_root())


def _fallback_root() -> str:
    user = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    import tempfile
    return os.path.join(tempfile.gettempdir(), f"tilebc-cache-{user}")


def default_root(environ: Mapping[str, str] | None = None) -> str:
    """The cache folder when TILEBC_CACHE_DIR names none, by the C++ loader's rule
    (`tilebc::default_cache_root`): `~/Library/Caches/tilebc` on macOS, `$XDG_CACHE_HOME/tilebc`
    (unset or blank: `~/.cache/tilebc`) on other POSIX systems, `~` being $HOME or else the
    user's password entry; platformdirs' user cache folder elsewhere (Windows). Written out on
    POSIX rather than asked of platformdirs, whose import costs a new process 10-16 ms."""
    environ = os.environ if environ is None else environ
    if os.name != "posix":
        import platformdirs
        return platformdirs.user_cache_dir("tilebc")
    home = environ.get("HOME") or _password_home()
    if sys.platform == "darwin":
        return home + "/Library/Caches/tilebc"
    xdg = environ.get("XDG_CACHE_HOME", "").strip(" \t\r\n")
    return (xdg or home + "/.cache") + "/tilebc"


def _password_home() -> str:
    import pwd
    try:
        return pwd.getpwuid(os.getuid()).pw_dir or ""
    except KeyError:  # a uid without an entry
        return ""


def resolve_root(environ: Mapping[str, str] | None = None) -> tuple[Path | None, str]:
    """The cache root to use and a one-line reason, from TILEBC_CACHE_DIR or default_root().

    Returns (None, reason) when the disk cache is off or no safe directory can be used."""
    root, reason = _resolve_root(environ)
    return (None if root is None else _as_path(root)), reason


def _resolve_root(environ: Mapping[str, str] | None = None) -> tuple[str | None, str]:
    environ = os.environ if environ is None else environ
    setting = environ.get(ENV_DIR, "").strip()
    if setting.lower() in OFF_VALUES:
        return None, f"disabled by {ENV_DIR}={setting}"
    chosen = os.path.expanduser(setting) if setting else default_root(environ)
    source = ENV_DIR if setting else "the default location"
    problem = _prepare_directory(chosen)
    if problem is None:
        return chosen, f"{chosen} (from {source})"
    fallback = _fallback_root()
    log.warning("tilebc cache: refusing %s (from %s): it %s; trying %s", chosen, source, problem,
                fallback)
    fallback_problem = _prepare_directory(fallback)
    if fallback_problem is None:
        return fallback, f"{fallback} (fallback: {chosen} {problem})"
    log.warning("tilebc cache: refusing fallback %s: it %s; disk cache off", fallback,
                fallback_problem)
    return None, f"off: {chosen} {problem}; fallback {fallback} {fallback_problem}"


def _max_bytes_from(environ: Mapping[str, str]) -> int:
    setting = environ.get(ENV_MAX_BYTES)
    if not setting:
        return DEFAULT_MAX_BYTES
    try:
        return parse_size(setting)
    except ValueError:
        log.warning("tilebc cache: ignoring %s=%r (not a size)", ENV_MAX_BYTES, setting)
        return DEFAULT_MAX_BYTES


class CubinCache:
    """Disk cache of compiled cubins behind an in-memory map.

    `root=None` keeps only the in-memory map. Construct with `CubinCache.from_environment()` to
    honour TILEBC_CACHE_DIR (a path, or `off`), TILEBC_CACHE_MAX_BYTES and TILEBC_CACHE_REMOTE.
    `remote` (a `redis://` URL or a `cache_remote.RemoteTier`) adds a shared second tier behind
    the disk: read through on a miss, written back after each compile (cache_remote.py).
    """

    def __init__(self, root: os.PathLike | None = None, *, max_bytes: int = DEFAULT_MAX_BYTES,
                 memory_entries: int = 512, lock_timeout: float = 600.0, reason: str = "",
                 remote: str | cache_remote.RemoteTier | None = None):
        self.max_bytes = max_bytes
        self.memory_entries = memory_entries
        self.lock_timeout = lock_timeout
        self._memory: OrderedDict[str, CacheEntry] = OrderedDict()
        self._recorded: dict[str, dict[str, Any]] = {}  # toolchain records already written
        self._root: str | None = None  # the root and its LAYOUT_DIR (strings: see _as_path)
        self._directory: str | None = None
        self.reason = reason
        self.remote = cache_remote.open_remote(remote)
        if root is not None:
            root = os.fspath(root)
            directory = os.path.join(root, LAYOUT_DIR)
            problem = _prepare_directory(root) or _prepare_directory(directory)
            if problem is None:
                self._root, self._directory = root, directory
                self.reason = reason or root
            else:
                log.warning("tilebc cache: refusing %s: it %s; disk cache off", root, problem)
                self.reason = f"off: {root} {problem}"

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None, **kwargs) -> CubinCache:
        environ = os.environ if environ is None else environ
        root, reason = _resolve_root(environ)
        kwargs.setdefault("max_bytes", _max_bytes_from(environ))
        if kwargs.get("remote") is None:
            kwargs["remote"] = cache_remote.open_remote(environ.get(cache_remote.ENV_REMOTE), environ)
        return cls(root, reason=reason, **kwargs)

    # -- paths ---------------------------------------------------------------------------------
    @property
    def disk_enabled(self) -> bool:
        return self._root is not None

    @property
    def root(self) -> Path | None:
        return None if self._root is None else _as_path(self._root)

    @property
    def directory(self) -> Path | None:
        return None if self._directory is None else _as_path(self._directory)

    def paths(self, key: str) -> tuple[Path, Path]:
        """(cubin path, metadata path) of `key`."""
        cubin, meta = self._paths(key)
        return _as_path(cubin), _as_path(meta)

    def _shard(self, key: str) -> str:
        return os.path.join(self._directory, key[:2])

    def _paths(self, key: str) -> tuple[str, str]:
        shard = self._shard(key)
        return os.path.join(shard, f"{key}.cubin"), os.path.join(shard, f"{key}.json")

    def _in_layout(self, name: str) -> str:
        return os.path.join(self._directory, name)

    def _make_shard(self, key: str) -> str:
        """`key`'s shard folder, made owner-only if missing (its parents are not made: a removed
        root stays removed)."""
        shard = self._shard(key)
        with contextlib.suppress(FileExistsError):
            os.mkdir(shard, 0o700)
        return shard

    def _lock(self, key: str) -> FileLock:
        return FileLock(os.path.join(self._make_shard(key), f"{key}.lock"), self.lock_timeout)

    # -- lookup --------------------------------------------------------------------------------
    def lookup(self, key: str) -> CacheEntry | None:
        """The verified entry for `key` from memory or disk, or None (a miss)."""
        entry = self._memory.get(key)
        if entry is not None:
            self._memory.move_to_end(key)
            return entry
        entry = self._read_disk(key)
        if entry is None and self.remote is not None:
            entry = cache_remote.read_entry(self.remote, key)
            if entry is not None and self._root is not None:
                self._store_remote_hit(entry)
        if entry is not None:
            self._remember(entry)
        return entry

    def _read_disk(self, key: str) -> CacheEntry | None:
        if self._root is None:
            return None
        try:
            return self._read_entry(key)
        except Exception as error:  # cache boundary: a damaged entry must never break a compile
            log.warning("tilebc cache: cannot read entry %s (%s: %s); recompiling", key,
                        type(error).__name__, error)
            return None

    def trust_problem(self, folder: str | os.PathLike | None = None) -> str | None:
        """Why the cache cannot be trusted now, or None: the root, v1/ and `folder` (a shard)
        must each be a directory owned by this user and not writable by group or others. A
        missing level is no problem: there is nothing below it to read. Checked before every
        disk read, as they may have changed since the cache was opened."""
        for level in (self._root, self._directory, folder):
            if level is None:
                continue
            try:
                info = os.stat(level)
            except FileNotFoundError:
                return None
            if not stat.S_ISDIR(info.st_mode):
                return f"{level} is not a directory"
            problem = _foreign_problem(info)
            if problem is not None:
                return f"{level} {problem}"
        return None

    def _read_entry(self, key: str) -> CacheEntry | None:
        cubin_path, meta_path = self._paths(key)
        refused = self.trust_problem(os.path.dirname(meta_path))
        if refused is not None:
            log.warning("tilebc cache: not reading entry %s: %s; recompiling", key, refused)
            return None
        try:
            meta_bytes = _read_owned(meta_path, MAX_JSON_BYTES + 1)
        except FileNotFoundError:
            return None  # not published (a cubin alone is a publish in progress or a crash)
        except OSError as error:
            log.warning("tilebc cache: cannot read %s (%s); recompiling", meta_path, error)
            return None
        problem, metadata = check_metadata(meta_bytes, key)
        cubin = None
        if problem is None:
            try:
                cubin = _read_owned(cubin_path)
            except FileNotFoundError:
                problem = "metadata without cubin"
            except OSError as error:
                problem = f"cubin unreadable ({error})"
        if problem is None:
            if len(cubin) != metadata["cubin_size"]:
                problem = f"cubin truncated ({len(cubin)} of {metadata['cubin_size']} bytes)"
            elif sha256(cubin).hexdigest() != metadata["cubin_sha256"]:
                problem = "cubin sha256 does not match its metadata"
        if problem is not None:
            log.warning("tilebc cache: entry %s is corrupt (%s); recompiling", key, problem)
            return None
        try:
            os.utime(meta_path)  # last-use time for LRU eviction (explicit: atime is unreliable)
        except OSError:
            pass
        return CacheEntry(key, cubin, metadata)

    def _store_remote_hit(self, entry: CacheEntry) -> None:
        """Read through: publish a verified remote entry, so this host's next lookup is a disk hit.
        No lock is needed: any concurrent publisher of the key writes an equivalent entry."""
        try:
            self._make_shard(entry.key)
        except OSError as error:
            log.warning("tilebc cache: cannot store entry %s (%s); it stays in memory only",
                        entry.key, error)
            return
        self._publish(entry)
        if self._sums_size_after(entry.key, len(entry.cubin)):
            self._evict_if_needed(keep=entry.key)

    def _remember(self, entry: CacheEntry) -> None:
        self._memory[entry.key] = entry
        self._memory.move_to_end(entry.key)
        while len(self._memory) > self.memory_entries:
            self._memory.popitem(last=False)

    # -- compile through the cache --------------------------------------------------------------
    def get_or_compile(self, fields: KeyFields, compile_fn: CompileFn) -> CacheEntry:
        """The cubin for `fields`: from memory, from disk, or compiled once across processes."""
        key = fields.key()
        entry = self.lookup(key)
        if entry is not None:
            return entry
        if self._root is None:
            return self._compile(fields, key, compile_fn)
        try:
            lock = self._lock(key)
            lock.acquire()
        except OSError as error:  # filelock.Timeout is an OSError too
            log.warning("tilebc cache: cannot lock entry %s (%s); compiling without the cache",
                        key, error)
            return self._compile(fields, key, compile_fn, publish=False)
        stored = False
        try:
            entry = self._read_disk(key)  # another process may have published it meanwhile
            if entry is None:
                self._discard(key)
                entry = self._compile(fields, key, compile_fn)
                stored = True
        finally:
            lock.release()
        self._remember(entry)
        if stored and self._sums_size_after(key, len(entry.cubin)):
            self._evict_if_needed(keep=key)
        return entry

    def _sums_size_after(self, key: str, added: int) -> bool:
        """Whether the store of about `added` bytes under `key` sums the cache's size, a walk of
        every shard (~8 ms per 1,000 entries): always where one entry is SIZE_CHECKS_PER_BOUND-th
        of the bound or more, else with that share as its chance, drawn from the key (SHA-256
        hex: uniform). A full cache is then walked about once per SIZE_CHECKS_PER_BOUND-th of
        the bound stored, and grows about that far past it between two walks."""
        share = (added + _METADATA_BYTES) * SIZE_CHECKS_PER_BOUND / max(self.max_bytes, 1)
        try:
            draw = int(key[:8], 16) / 0x100000000
        except ValueError:
            return True
        return draw < share

    def _compile(self, fields: KeyFields, key: str, compile_fn: CompileFn,
                 publish: bool = True) -> CacheEntry:
        started = time.perf_counter()
        cubin, extra = compile_fn(fields.bytecode, fields.entry, fields.arch, dict(fields.options))
        cubin = bytes(cubin)
        metadata = dict(extra or {})
        metadata.update({
            "schema": SCHEMA, "key": key, "fields": fields.describe(),
            "cubin_sha256": sha256(cubin).hexdigest(), "cubin_size": len(cubin),
            "threads_per_cta": metadata.get("threads_per_cta"),
            "dynamic_shared_bytes": metadata.get("dynamic_shared_bytes") or 0,
            "static_shared_bytes": metadata.get("static_shared_bytes") or 0,
            "created": time.time(), "compile_seconds": round(time.perf_counter() - started, 6),
        })
        entry = CacheEntry(key, cubin, metadata)
        if publish and self._root is not None:
            self._publish(entry)
        if self.remote is not None:
            cache_remote.write_entry(self.remote, entry)
        self._remember(entry)
        return entry

    def _publish(self, entry: CacheEntry) -> None:
        """Cubin first, then metadata, each through a temp file and os.replace."""
        cubin_path, meta_path = self._paths(entry.key)
        try:
            meta_text = json.dumps(entry.metadata, sort_keys=True, indent=1).encode("utf-8")
            _replace_atomically(cubin_path, entry.cubin)
            _replace_atomically(meta_path, meta_text)
        except (OSError, TypeError, ValueError) as error:
            log.warning("tilebc cache: cannot store entry %s (%s); it stays in memory only",
                        entry.key, error)

    def _discard(self, key: str) -> None:
        """Remove an entry's files, metadata first so no reader trusts a half-removed entry."""
        cubin_path, meta_path = self._paths(key)
        for path in (meta_path, cubin_path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as error:
                log.warning("tilebc cache: cannot remove %s (%s)", path, error)

    # -- housekeeping ---------------------------------------------------------------------------
    def disk_entries(self) -> list[EntryInfo]:
        """Every published entry on disk (metadata present), oldest use first."""
        if self._root is None or not os.path.isdir(self._directory):
            return []
        found = []
        for meta_path in self.directory.glob("??/*.json"):
            key = meta_path.stem
            cubin_path = meta_path.with_suffix(".cubin")
            try:
                meta_stat = meta_path.stat()
                size = meta_stat.st_size + (cubin_path.stat().st_size if cubin_path.exists() else 0)
                if self.trust_problem(meta_path.parent) is not None:
                    raise UntrustedError(errno.EPERM, "in an untrusted folder", str(meta_path))
                problem, metadata = check_metadata(_read_owned(meta_path, MAX_JSON_BYTES + 1), key)
            except UntrustedError:
                problem, metadata = "untrusted", None  # listed as corrupt: prune and clear remove it
            except OSError:
                continue
            found.append(EntryInfo(key, size, meta_stat.st_mtime, metadata if problem is None else None))
        found.sort(key=lambda info: info.last_used)
        return found

    def total_bytes(self) -> int:
        return sum(info.size for info in self.disk_entries())

    def prune(self, max_bytes: int | None = None, keep: str | None = None) -> list[str]:
        """Remove corrupt entries, stray temp files and orphan cubins, then least recently used
        entries until the disk size is at most `max_bytes` (default: this cache's bound).
        Entries locked by another process are skipped. Returns the removed keys."""
        if self._root is None:
            return []
        bound = self.max_bytes if max_bytes is None else max_bytes
        removed = []
        self._remove_strays()
        entries = self.disk_entries()
        total = sum(info.size for info in entries)
        for info in entries:
            if info.metadata is not None and (total <= bound or info.key == keep):
                continue
            if self._remove_unless_locked(info.key):
                removed.append(info.key)
                total -= info.size
                self._memory.pop(info.key, None)
        return removed

    def _evict_if_needed(self, keep: str) -> None:
        try:
            if self._file_bytes() > self.max_bytes:
                removed = self.prune(keep=keep)
                log.info("tilebc cache: evicted %d entries to stay under %d bytes", len(removed),
                         self.max_bytes)
        except OSError as error:
            log.warning("tilebc cache: eviction failed (%s)", error)

    def _file_bytes(self) -> int:
        """The size of every entry file (strays too): at most a little over total_bytes(), and
        read from the folders alone, so a compile does not parse every entry's metadata."""
        total = 0
        if not os.path.isdir(self._directory):
            return 0
        with os.scandir(self._directory) as shards:
            for shard in shards:
                if len(shard.name) != 2 or not shard.is_dir(follow_symlinks=False):
                    continue
                with os.scandir(shard.path) as files:
                    for item in files:
                        if item.name.endswith((".json", ".cubin")):
                            with contextlib.suppress(OSError):
                                total += item.stat(follow_symlinks=False).st_size
        return total

    def _remove_unless_locked(self, key: str) -> bool:
        try:
            lock = self._lock(key)
            lock.acquire(timeout=0)
        except OSError:
            return False
        try:
            self._discard(key)
        finally:
            lock.release()
        return True

    def _remove_strays(self, older_than: float = 3600.0) -> None:
        """Temp files left by a crashed writer, and cubins whose metadata never appeared."""
        now = time.time()
        for path in list(self.directory.glob("??/.tmp-*")) + list(self.directory.glob("??/*.cubin")):
            try:
                if path.suffix == ".cubin" and path.with_suffix(".json").exists():
                    continue
                if now - path.stat().st_mtime > older_than:
                    path.unlink()
            except OSError:
                continue

    def clear(self) -> int:
        """Remove every entry (memory and disk); returns how many disk entries were removed."""
        self._memory.clear()
        if self._root is None:
            return 0
        count = 0
        for info in self.disk_entries():
            count += self._remove_unless_locked(info.key)
        self._remove_strays(older_than=0.0)
        # Lock files are kept by eviction (removing one another process waits on would let two
        # processes compile the same key); clearing is the explicit moment to drop them.
        for path in self.directory.glob("??/*.lock"):
            _unlink_quietly(path)
        # A damaged toolchain.json would make every C++ host refuse the cache; a valid one describes
        # the toolchains, not entries, and stays.
        if self.toolchain_problem() is not None:
            _unlink_quietly(self.directory / TOOLCHAIN_FILE)
        _unlink_quietly(self.directory / MEMO_FILE)
        return count

    def forget_memory(self) -> None:
        """Drop the in-memory map (the disk is untouched)."""
        self._memory.clear()

    # -- start-up memo --------------------------------------------------------------------------
    def memo(self, name: str) -> tuple[str | None, Any]:
        """(fingerprint, value) as stored by `remember`, or (None, None) when there is none (or no
        disk cache, or the file is untrusted or damaged). For facts that are slow to recompute in
        every new process (the lowering hash, nvJitLink's version): the caller uses the value only
        when the fingerprint of everything it depends on is still the same."""
        if self._root is None or self.trust_problem() is not None:
            return None, None
        return read_memo(self._in_layout(MEMO_FILE), name)

    def remember(self, records: Mapping[str, tuple[str, Any]]) -> None:
        """Store each {name: (fingerprint, value)} of `records` in v1/memo.json, in one write
        (best effort: last writer wins, a lost update is recomputed next time)."""
        if not records or self._root is None or _prepare_directory(self._directory) is not None:
            return
        path = self._in_layout(MEMO_FILE)
        try:
            write_memo(path, records)
        except Exception as error:  # cache boundary: never break a compile
            log.warning("tilebc cache: cannot update %s (%s: %s)", path, type(error).__name__,
                        error)

    # -- toolchain record for hosts without Python ----------------------------------------------
    def record_toolchain(self, backend: str, info: Mapping[str, Any]) -> None:
        """Merge `info` for `backend` into toolchain.json (shape: CACHE.md, "toolchain.json").

        `info` has `identity`, `ptx_isa` ({arch: version}), `nvjitlink` and `options` (the
        compile options of the keys a host without Python looks up; default {})."""
        info = {"identity": "", "ptx_isa": {}, "nvjitlink": "", "options": {}, **dict(info)}
        if self._root is None or self._recorded.get(backend) == info:
            return
        path = self._in_layout(TOOLCHAIN_FILE)
        # Already recorded (the usual case): no lock needed, as writers replace the file atomically.
        current, problem = self._read_toolchain()
        if problem is None and current["backends"].get(backend) == info:
            self._recorded[backend] = dict(info)
            return
        try:
            with FileLock(self._in_layout("toolchain.lock"), 30):
                current, problem = self._read_toolchain()
                if problem is not None:
                    if problem != "missing":
                        log.warning("tilebc cache: rewriting %s: it %s", path, problem)
                    current = {"schema": SCHEMA, "backends": {}}
                if current["backends"].get(backend) != dict(info):
                    current["backends"][backend] = dict(info)
                    _replace_atomically(path, json.dumps(current, sort_keys=True, indent=1).encode())
            self._recorded[backend] = dict(info)
        except Exception as error:  # cache boundary: recording must never break a compile
            log.warning("tilebc cache: cannot update %s (%s: %s)", path, type(error).__name__, error)

    def toolchain(self) -> dict[str, Any]:
        """toolchain.json as recorded: {"schema": 1, "backends": {name: record}}, or {} when it is
        missing or damaged (`toolchain_problem()` says why)."""
        if self._root is None:
            return {}
        document, problem = self._read_toolchain()
        return {} if problem is not None else document

    def toolchain_problem(self) -> str | None:
        """Why toolchain.json cannot be used ("missing" when absent), or None when it can."""
        if self._root is None:
            return "no disk cache"
        return self._read_toolchain()[1]

    def _read_toolchain(self) -> tuple[dict[str, Any] | None, str | None]:
        """(document, None) when toolchain.json has the shape CACHE.md gives, else (None, why)."""
        path = self._in_layout(TOOLCHAIN_FILE)
        refused = self.trust_problem()
        if refused is not None:
            return None, f"is in an untrusted folder ({refused})"
        try:
            raw = _read_owned(path, MAX_JSON_BYTES + 1)
        except FileNotFoundError:
            return None, "missing"
        except OSError as error:
            return None, f"unreadable ({error.strerror or error})"
        document, problem = parse_json(raw)
        if problem is not None:
            return None, problem
        if not isinstance(document, dict) or document.get("schema") != SCHEMA:
            return None, f"not a JSON object with schema {SCHEMA}"
        backends = document.get("backends")
        if not isinstance(backends, dict) or not all(
                isinstance(record, dict) and isinstance(record.get("identity"), str)
                for record in backends.values()):
            return None, "'backends' is not an object of records with an 'identity' string"
        return document, None


try:
    import fcntl
except ImportError:  # Windows: filelock's own lock
    fcntl = None


class FileLock:
    """An exclusive lock on the file `path`, held between acquire() and release(): flock(2), as
    filelock takes it on POSIX, so the two exclude each other (older tilebc and the C++ build
    tests take filelock's). filelock itself costs ~30 ms of start-up; it still serves where flock is missing (Windows, a
    filesystem without flock). Failing to lock in `timeout` seconds (< 0: wait forever) raises
    TimeoutError, an OSError like filelock.Timeout."""

    POLL_SECONDS = 0.05

    def __init__(self, path: str, timeout: float):
        self.path, self.timeout = path, timeout
        self._fd: int | None = None
        self._fallback = None  # a filelock.FileLock where flock is missing

    def acquire(self, timeout: float | None = None) -> None:
        timeout = self.timeout if timeout is None else timeout
        if fcntl is None or self._fallback is not None:
            return self._acquire_fallback(timeout)
        deadline = time.monotonic() + timeout
        while True:
            fd, created = self._open()
            if fd is None:
                continue  # created and removed by another process in between: again
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                os.close(fd)
                if error.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    # e.g. ENOSYS on some mounts: filelock's marker-file lock takes over, and
                    # would take an empty file left here for another owner's marker
                    if created:
                        with contextlib.suppress(OSError):
                            os.unlink(self.path)
                    return self._acquire_fallback(timeout)
                if 0 <= timeout and time.monotonic() >= deadline:
                    raise TimeoutError(errno.ETIMEDOUT, "lock not acquired in time",
                                       self.path) from None
                time.sleep(self.POLL_SECONDS)
                continue
            self._fd = fd
            return None

    def _open(self):
        """(descriptor, whether this call created the file), or (None, False) when the file
        vanished between the two opens."""
        flags = os.O_RDWR | getattr(os, "O_NOFOLLOW", 0)
        try:
            return os.open(self.path, flags), False
        except FileNotFoundError:
            pass
        try:
            return os.open(self.path, flags | os.O_CREAT | os.O_EXCL, 0o600), True
        except FileExistsError:
            return None, False

    def _acquire_fallback(self, timeout: float) -> None:
        if self._fallback is None:
            import filelock
            self._fallback = filelock.FileLock(self.path, timeout=self.timeout, mode=0o600)
        self._fallback.acquire(timeout=timeout)

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        elif self._fallback is not None:
            self._fallback.release()

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc_info) -> None:
        self.release()


def read_memo(path: str, name: str) -> tuple[str | None, Any]:
    """(fingerprint, value) of record `name` in the memo file at `path` (a JSON object of
    {name: {"fingerprint", "value"}}), or (None, None) when the file is missing, untrusted
    (_read_owned) or damaged, or holds no such record."""
    try:
        record = json.loads(_read_owned(path, MAX_JSON_BYTES + 1))[name]
        return str(record["fingerprint"]), record["value"]
    except Exception:  # missing, untrusted or damaged: the caller recomputes
        return None, None


def write_memo(path: str, records: Mapping[str, tuple[str, Any]]) -> None:
    """Set each {name: (fingerprint, value)} of `records` in the memo file at `path`, keeping
    its other records; the file is replaced atomically (last writer wins). Raises OSError where
    it cannot be written."""
    try:
        document = json.loads(_read_owned(path, MAX_JSON_BYTES + 1))
        if not isinstance(document, dict):
            document = {}
    except Exception:  # missing, untrusted or damaged: start afresh
        document = {}
    for name, (fingerprint, value) in records.items():
        document[name] = {"fingerprint": fingerprint, "value": value}
    _replace_atomically(path, json.dumps(document, sort_keys=True).encode())


def _read_owned(path: str | os.PathLike, limit: int = -1) -> bytes:
    """The bytes of a cache file (at most `limit`), refused with UntrustedError unless it is a
    regular file (not a symlink) owned by this user and not writable by group or others. The
    check is on the opened file, so the file cannot be swapped between check and read. Opening
    does not block (a FIFO in its place is refused, not waited on)."""
    flags = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
             | getattr(os, "O_BINARY", 0))
    try:
        handle = os.open(path, flags)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UntrustedError(errno.ELOOP, "is a symbolic link", str(path)) from None
        raise
    with os.fdopen(handle, "rb") as stream:
        info = os.fstat(stream.fileno())
        problem = "is not a regular file" if not stat.S_ISREG(info.st_mode) else _foreign_problem(info)
        if problem is not None:
            raise UntrustedError(errno.EPERM, problem, str(path))
        # read(n) allocates n bytes up front: ask for the file's size when it is under the limit
        return stream.read(limit if 0 <= limit <= info.st_size else -1)


def _replace_atomically(path: str | os.PathLike, data: bytes) -> None:
    from tilebc.outputs import temp_file  # not tempfile: start-up time
    path = os.fspath(path)
    handle, temp_name = temp_file(os.path.dirname(path), ".tmp-", os.path.splitext(path)[1])
    try:
        with os.fdopen(handle, "wb") as temp:
            temp.write(data)
        os.replace(temp_name, path)
    except BaseException:
        _unlink_quietly(temp_name)
        raise


def _unlink_quietly(path: str | os.PathLike) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass

