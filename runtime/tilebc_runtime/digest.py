"""SHA-256 without hashlib: importing hashlib loads OpenSSL's binding, ~3.5 ms of every
`tilebc compile` (a cubin-cache hit takes ~40 ms in all). CPython's own module gives the same
digests; it is slower per byte (~4 ms a MB against OpenSSL's 0.6), which only the first compile
in a cache pays, hashing the lowering's ~1 MB of source while nvJitLink opens."""
from __future__ import annotations

try:
    from _sha2 import sha256  # CPython 3.12+
except ImportError:
    try:
        from _sha256 import sha256  # CPython 3.11
    except ImportError:  # another implementation: hashlib's
        from hashlib import sha256

__all__ = ["sha256"]
