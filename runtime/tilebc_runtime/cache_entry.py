"""A cache entry and the checks its metadata must pass, shared by the disk cache (cache.py) and
the remote tier (cache_remote.py)."""
from __future__ import annotations

import json

from tilebc.record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every command's start ~3 ms
    from typing import Any


class LazyLogger:
    """logging.getLogger(name), with logging imported at the first message: a cache hit logs
    nothing, and importing logging is ~5% of a new `tilebc compile` process."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attribute):
        import logging
        return getattr(logging.getLogger(self._name), attribute)

SCHEMA = 1
# Metadata and toolchain.json are a few hundred bytes; anything larger is not ours to parse.
MAX_JSON_BYTES = 1 << 20


class CacheEntry(Record):
    """A verified cubin and its metadata (a frozen record: dataclasses cost start-up time)."""

    _fields = ("key", "cubin", "metadata")

    def __init__(self, key: str, cubin: bytes, metadata: dict[str, Any]):
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "cubin", cubin)
        object.__setattr__(self, "metadata", metadata)

    @property
    def threads(self) -> int | None:
        """Threads per CTA the kernel was compiled for (metadata `threads_per_cta`)."""
        return self.metadata.get("threads_per_cta")

    @property
    def dynamic_shared_bytes(self) -> int:
        """Dynamic shared memory a launch must request (0: both backends allocate statically)."""
        return self.metadata.get("dynamic_shared_bytes") or 0

    @property
    def tensor_maps(self) -> tuple:
        """TMA tensor maps the launch passes after the kernel's parameters (TMA kernels;
        records as tilebc_runtime.tensor_maps reads them), or ()."""
        return tuple(self.metadata.get("tensor_maps") or ())

    @property
    def static_shared_bytes(self) -> int:
        """Shared memory already declared in the cubin (informational)."""
        return self.metadata.get("static_shared_bytes") or 0

    shared_bytes = static_shared_bytes  # earlier name, kept for callers written against it


_REQUIRED_METADATA = {"schema": int, "key": str, "cubin_sha256": str, "cubin_size": int,
                      "fields": dict}
# Launch facts: present in every entry this schema writes (threads may be null if unknown).
_LAUNCH_METADATA = ("threads_per_cta", "dynamic_shared_bytes")


def parse_json(raw: bytes) -> tuple[Any, str | None]:
    """(value, None), or (None, why) for bytes that are not JSON we can read: invalid, too large,
    or nested so deeply that the parser runs out of stack (RecursionError)."""
    if len(raw) > MAX_JSON_BYTES:
        return None, f"is over {MAX_JSON_BYTES} bytes"
    try:
        return json.loads(raw), None
    except RecursionError:
        return None, "is not JSON (nested too deeply)"
    except ValueError as error:  # UnicodeDecodeError included
        return None, f"is not JSON ({error})"


def check_metadata(raw: bytes, key: str) -> tuple[str | None, dict[str, Any] | None]:
    """(problem, metadata): problem is None when the metadata is well-formed and names `key`."""
    metadata, problem = parse_json(raw)
    if problem is not None:
        return f"metadata {problem}", None
    if not isinstance(metadata, dict):
        return "metadata is not a JSON object", None
    for name, kind in _REQUIRED_METADATA.items():
        if not isinstance(metadata.get(name), kind):
            return f"metadata field {name!r} missing or not {kind.__name__}", None
    if metadata["schema"] != SCHEMA:
        return f"metadata schema {metadata['schema']} is not {SCHEMA}", None
    if metadata["key"] != key:
        return "metadata names another key", None
    for name in _LAUNCH_METADATA:
        value = metadata.get(name, "missing")
        if not (value is None or (isinstance(value, int) and not isinstance(value, bool)
                                  and value >= 0)):
            return f"metadata field {name!r} missing or not a count", None
    return None, metadata
