"""SHA-256 and BLAKE2b without hashlib: importing hashlib loads OpenSSL's binding, ~3.5 ms of every
`tilebc compile` (a cubin-cache hit takes ~40 ms in all). CPython's own modules give the same
digests. Their SHA-256 is slower per byte (~4 ms a MB against OpenSSL's 0.6); the lowering hash,
which only the first compile in a cache computes (~1.3 MB of source), uses BLAKE2b (~1.4 ms a MB)."""
from __future__ import annotations

try:
    from _sha2 import sha256  # CPython 3.12+
except ImportError:
    try:
        from _sha256 import sha256  # CPython 3.11
    except ImportError:  # another implementation: hashlib's
        from hashlib import sha256

try:
    from _blake2 import blake2b
except ImportError:  # a Python built without the module
    from hashlib import blake2b

__all__ = ["sha256", "blake2b"]
