"""A second cubin-cache tier on a shared store, for fleets of hosts (runtime/CACHE.md, "Remote tier").

`CubinCache` reads through it after a local miss and writes every compile back to it. Entries are
stored under the local key, as the same two parts (cubin bytes and metadata JSON), and are checked
on the way in exactly as disk entries are (metadata shape, schema, own key, cubin size and sha256);
one that fails is a logged miss and is overwritten by the recompile.

The remote never fails or stalls a compile: every call has a short socket timeout and no retries,
and after one failure the tier is skipped for `retry_after` seconds, so a server that goes away
costs at most one timeout per `retry_after`. Only Redis is implemented (the `redis` package:
`pip install tilebc-runtime[redis]`).
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping

from .digest import sha256
from .cache_entry import CacheEntry, LazyLogger, check_metadata

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every command's start ~3 ms
    from typing import Any

log = LazyLogger("tilebc_runtime.cache")

ENV_REMOTE = "TILEBC_CACHE_REMOTE"
ENV_REMOTE_TIMEOUT = "TILEBC_CACHE_REMOTE_TIMEOUT"
DEFAULT_TIMEOUT = 0.5        # seconds per connect and per reply
DEFAULT_RETRY_AFTER = 30.0   # seconds a failed remote is left alone
MAX_ENTRY_BYTES = 256 * 1024 ** 2  # larger values read from the remote are refused unread
REDIS_PREFIX = "tilebc:v1:"  # v1 = the cache layout (CACHE.md schema 1)


class RemoteTier:
    """What `CubinCache` needs from a shared store: raw parts by key, best effort.

    `get` returns (cubin, metadata JSON bytes) or None; neither it nor `put` raises for the
    store's own failures (they are logged, and the tier marks itself down for a while)."""

    url = "<remote>"

    def get(self, key: str) -> tuple[bytes, bytes] | None:
        raise NotImplementedError

    def put(self, key: str, cubin: bytes, metadata: bytes) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Release connections (optional)."""


def redact(url: str) -> str:
    """`url` without its password, for messages."""
    import urllib.parse  # on first use: most processes have no remote
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<unparsable url>"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


class RedisTier(RemoteTier):
    """Entries as Redis hashes `tilebc:v1:<key>` with fields `cubin` and `metadata`, replaced in
    one transaction (so a reader never sees half an entry), optionally expiring after `ttl` s.

    `url` is any URL redis-py accepts (`redis://[:password@]host:port/db`, `rediss://` for TLS,
    `unix://path`). `timeout` bounds each connect and each reply; there are no retries."""

    def __init__(self, url: str, *, timeout: float = DEFAULT_TIMEOUT,
                 retry_after: float = DEFAULT_RETRY_AFTER, ttl: int | None = None,
                 prefix: str = REDIS_PREFIX, client: Any = None):
        self.url = redact(url)
        self.timeout = timeout
        self.retry_after = retry_after
        self.ttl = ttl
        self.prefix = prefix
        self._down_until = 0.0
        import threading  # only with a remote tier
        self._state_lock = threading.Lock()
        if client is None:
            import redis  # optional dependency: tilebc-runtime[redis]
            from redis.backoff import NoBackoff
            from redis.retry import Retry
            client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout,
                                          retry_on_timeout=False, retry=Retry(NoBackoff(), 0),
                                          health_check_interval=0)
        self._client = client

    def _available(self) -> bool:
        return time.monotonic() >= self._down_until

    def _failed(self, action: str, key: str, error: BaseException) -> None:
        """An unreachable or hung server is left alone for `retry_after` seconds (logged once);
        an error about one entry (a key holding another type, say) is only that entry's miss."""
        if not _is_outage(error):
            log.warning("tilebc cache: remote %s refused the %s of entry %s (%s: %s)", self.url, action,
                        key, type(error).__name__, error)
            return
        with self._state_lock:
            already_down = time.monotonic() < self._down_until
            self._down_until = time.monotonic() + self.retry_after
        if not already_down:
            log.warning("tilebc cache: remote %s failed on %s (%s: %s); using the local cache only "
                        "for %g s", self.url, action, type(error).__name__, error, self.retry_after)

    def get(self, key: str) -> tuple[bytes, bytes] | None:
        if not self._available():
            return None
        name = self.prefix + key
        try:
            # Sizes first (one round trip), so an oversized value is refused before it is sent.
            pipe = self._client.pipeline(transaction=False)
            pipe.hstrlen(name, "cubin")
            pipe.hstrlen(name, "metadata")
            cubin_size, meta_size = pipe.execute()
            if cubin_size == 0 or meta_size == 0:
                return None
            if cubin_size + meta_size > MAX_ENTRY_BYTES:
                log.warning("tilebc cache: remote entry %s is %d bytes, over the %d-byte bound; "
                            "recompiling", key, cubin_size + meta_size, MAX_ENTRY_BYTES)
                return None
            cubin, metadata = self._client.hmget(name, ["cubin", "metadata"])
        except Exception as error:  # noqa: BLE001 - a cache boundary: the store never fails a compile
            self._failed("read", key, error)
            return None
        if not isinstance(cubin, bytes) or not isinstance(metadata, bytes):
            return None
        return cubin, metadata

    def put(self, key: str, cubin: bytes, metadata: bytes) -> None:
        if not self._available():
            return
        name = self.prefix + key
        try:
            # One transaction replaces whatever the name held (another type, stray fields).
            pipe = self._client.pipeline(transaction=True)
            pipe.delete(name)
            pipe.hset(name, mapping={"cubin": cubin, "metadata": metadata})
            if self.ttl:
                pipe.expire(name, int(self.ttl))
            pipe.execute()
        except Exception as error:  # noqa: BLE001 - a cache boundary, as in get
            self._failed("write", key, error)

    def close(self) -> None:
        try:
            self._client.close()
        except Exception:  # noqa: BLE001 - closing a dead connection must not raise
            pass


def _is_outage(error: BaseException) -> bool:
    """Whether `error` says the server is unreachable or too slow (rather than refusing one call)."""
    if isinstance(error, (OSError, TimeoutError)):
        return True
    try:
        from redis import exceptions
    except ImportError:
        return True
    return isinstance(error, (exceptions.ConnectionError, exceptions.TimeoutError))


def _timeout_from(environ: Mapping[str, str]) -> float:
    setting = environ.get(ENV_REMOTE_TIMEOUT, "").strip()
    if not setting:
        return DEFAULT_TIMEOUT
    try:
        value = float(setting)
        if value > 0:
            return value
    except ValueError:
        pass
    log.warning("tilebc cache: ignoring %s=%r (not a positive number of seconds)", ENV_REMOTE_TIMEOUT,
                setting)
    return DEFAULT_TIMEOUT


def open_remote(setting: None | str | RemoteTier,
                environ: Mapping[str, str] | None = None) -> RemoteTier | None:
    """The tier for an API argument or TILEBC_CACHE_REMOTE: a RemoteTier as is; a URL string;
    None, "" or "off" for none. An unusable setting (unknown scheme, `redis` not installed) is
    logged and gives no tier: the local cache keeps working."""
    environ = os.environ if environ is None else environ
    if setting is None or isinstance(setting, RemoteTier):
        return setting
    text = str(setting).strip()
    if not text or text.lower() == "off":
        return None
    import urllib.parse  # on first use: most processes have no remote
    scheme = urllib.parse.urlsplit(text).scheme.lower()
    if scheme not in ("redis", "rediss", "unix"):
        log.warning("tilebc cache: ignoring remote %s (only redis://, rediss:// and unix:// are "
                    "supported)", redact(text))
        return None
    try:
        return RedisTier(text, timeout=_timeout_from(environ))
    except ImportError:
        log.warning("tilebc cache: remote %s needs the redis package (pip install "
                    "'tilebc-runtime[redis]'); using the local cache only", redact(text))
    except ValueError as error:  # redis-py's URL parser
        log.warning("tilebc cache: ignoring remote %s (%s)", redact(text), error)
    return None


def verify(key: str, cubin: bytes, metadata: bytes) -> tuple[str | None, dict[str, Any] | None]:
    """(problem, metadata): the checks a disk entry passes (cache_entry.check_metadata, then the
    cubin's size and sha256), applied to parts read from a remote."""
    problem, parsed = check_metadata(metadata, key)
    if problem is not None:
        return problem, None
    if len(cubin) != parsed["cubin_size"]:
        return f"cubin truncated ({len(cubin)} of {parsed['cubin_size']} bytes)", None
    if sha256(cubin).hexdigest() != parsed["cubin_sha256"]:
        return "cubin sha256 does not match its metadata", None
    return None, parsed


def read_entry(tier: RemoteTier, key: str):
    """The verified `CacheEntry` for `key` from `tier`, or None (absent, unreachable or refused)."""
    parts = tier.get(key)
    if parts is None:
        return None
    cubin, metadata = parts
    problem, parsed = verify(key, cubin, metadata)
    if problem is not None:
        log.warning("tilebc cache: remote entry %s from %s refused (%s); recompiling", key, tier.url,
                    problem)
        return None
    return CacheEntry(key, cubin, parsed)


def write_entry(tier: RemoteTier, entry) -> None:
    """Write a freshly compiled `CacheEntry` back to `tier` (best effort)."""
    try:
        metadata = json.dumps(entry.metadata, sort_keys=True, indent=1).encode("utf-8")
    except (TypeError, ValueError) as error:
        log.warning("tilebc cache: cannot send entry %s to %s (%s)", entry.key, tier.url, error)
        return
    tier.put(entry.key, entry.cubin, metadata)
