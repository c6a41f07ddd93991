"""The front door: load/dump with the verifier on by default (opt out with `verify=False`)."""
from __future__ import annotations

import os
from typing import Union

from .binary import reader
from .ir.module import Module

Source = Union[bytes, bytearray, memoryview, str, os.PathLike]


def load(source: Source, *, verify: bool = True) -> Module:
    """Decode bytecode (bytes or a path) into a Module, then verify it.

    Raises DecodeError for bytes that do not decode (malformed) and VerificationError for IR that
    decodes but breaks a typing or well-formedness rule (invalid); both carry the file and offset.
    `verify=False` skips the second step (faster, for trusted input).
    """
    module = reader.load(source)
    if verify:
        from .verify import verify as check
        check(module)
    return module
