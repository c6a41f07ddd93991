"""The front door: load/dump with the verifier on by default (opt out with `verify=False`)."""
from __future__ import annotations

import os
from typing import Union

from typing import Optional

from .binary import reader
from .binary.limits import DecodeLimits
from .ir.module import Module

Source = Union[bytes, bytearray, memoryview, str, os.PathLike]


def load(source: Source, *, verify: bool = True, limits: Optional[DecodeLimits] = None,
         lazy_debug: bool = True, strict: bool = False) -> Module:
    """Decode bytecode (bytes or a path) into a Module, then verify it.

    Raises DecodeError for bytes that do not decode (malformed) and VerificationError for IR that
    decodes but breaks a typing or well-formedness rule (invalid); both carry the file and offset.
    `verify=False` skips the second step (faster, for trusted input). `limits` bounds what a hostile
    file can make the decoder allocate; `lazy_debug=False` decodes debug locations up front, so a broken
    debug section fails here rather than on the first `op.loc` read.

    Bytes that break the format in ways NVIDIA's reader accepts (format_spec.md §16) are read as
    tileirdisasm reads them, each recorded on `module.decode_warnings` (DecodeWarning, category
    "lenient"); `strict=True` refuses them with a DecodeError instead (a lint for producers).
    """
    module = reader.load(source, limits=limits, lazy_debug=lazy_debug, strict=strict)
    if verify:
        from .verify import verify as check
        check(module)
    return module
