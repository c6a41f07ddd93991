"""Code objects of the generated per-op functions (decoders, printers, verifier checks), kept on
disk beside the package's .pyc files.

The sources are still generated from the op table in every process; only their compilation is
saved (about 0.2 s of `tilebc dis` on a module that uses every op). An entry is named by a hash of
the source, its file name and the Python version, so a changed op table or generator simply misses
and compiles. Where the package directory is not writable, every process compiles, as before.
"""
from __future__ import annotations

import marshal
import os
import sys

# A bytecode or text input of this many bytes or more builds a module of many ops of most kinds
# at once: the reader compiles each op kind's decoder at its first op (binary/reader.py), and a
# one-shot command has its allocator's arenas populated (cli.py).
LARGE_INPUT_BYTES = 64 * 1024
# A module whose entries hold this many ops (at their top level) or more has many ops of most
# kinds it uses: the verifier and the printer compile a kind's generated function at its first
# op instead of checking or walking its first few ops the slow way (the 1.4 MB module: ~700 ops
# checked in full, ~650 walked).
COMPILE_AT_ONCE_OPS = 2000


def compiles_at_once(module) -> bool:
    """Whether `module` is large enough to compile each op kind's function at its first op."""
    return sum(len(function.body.ops) for function in module.functions) >= COMPILE_AT_ONCE_OPS


_DIRECTORY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__",
                          "generated")
_TAG = f"{sys.implementation.cache_tag}-{sys.version}".encode()
_usable = None  # whether the directory exists or could be made


def compile_generated(source: str, filename: str):
    """compile(source, filename, "exec"), from the cache when an earlier process compiled it."""
    try:
        from _blake2 import blake2b  # hashlib would load OpenSSL: 3 ms of every start-up
    except ImportError:  # a Python built without the module
        from hashlib import blake2b
    key = blake2b(_TAG + b"\0" + filename.encode() + b"\0" + source.encode(),
                          digest_size=16).hexdigest()
    path = os.path.join(_DIRECTORY, key + ".code")
    try:
        with open(path, "rb") as stream:
            return marshal.loads(stream.read())
    except (OSError, ValueError, EOFError, TypeError):  # missing or unreadable: compile again
        pass
    code = compile(source, filename, "exec")
    _store(path, code)
    return code


def _store(path: str, code) -> None:
    global _usable
    if _usable is False:
        return
    try:
        if not _usable:
            os.makedirs(_DIRECTORY, exist_ok=True)
            _usable = True
        temporary = f"{path}.{os.getpid()}.{id(code):x}.tmp"  # one writer per name
        with open(temporary, "wb") as stream:
            stream.write(marshal.dumps(code))
        os.replace(temporary, path)  # readers see the whole file or none
    except OSError:
        _usable = False
