"""Errors the interpreter raises while a kernel runs (the "trap" phase of tilebc's error kinds).

Every error names the op (mnemonic plus its byte offset or line:col when the IR came from a file or
text), the tile block that was running and, for memory faults, the offending address.
"""
from __future__ import annotations

from typing import Optional, Sequence

from ..errors import Location, TilebcError


class ExecutionError(TilebcError):
    """A kernel ran but could not complete: a fault, a failed assert, an unsupported op."""

    def __init__(self, message: str, *, op=None, block_id: Optional[Sequence[int]] = None,
                 address: Optional[int] = None, file: Optional[str] = None):
        parts = []
        if op is not None:
            parts.append(f"in {op.name}")
        if block_id is not None:
            parts.append(f"tile block ({', '.join(str(int(c)) for c in block_id)})")
        if address is not None:
            parts.append(f"address 0x{int(address):x}")
        full = f"{message} [{'; '.join(parts)}]" if parts else message
        super().__init__(full, location=Location.of(op, file))
        self.reason = message
        self.op = op
        self.block_id = tuple(block_id) if block_id is not None else None
        self.address = address


class MemoryCheckError(ExecutionError):
    """Out-of-bounds, misaligned or uninitialised access, or overlapping argument arrays."""


class KernelAssertionError(ExecutionError):
    """An `assert` op found a false element; the message is the op's message."""


class AssumptionError(ExecutionError):
    """An `assume` predicate does not hold (checked only with check_assumptions=True)."""


class UndefinedError(ExecutionError):
    """An op hit undefined behaviour (integer overflow against its flags, division by zero, an
    out-of-range shift); raised only with check_undefined=True."""


class UnsupportedError(ExecutionError):
    """The op (or this use of it) has no defined behaviour on the CPU interpreter."""


class ArgumentError(TilebcError):
    """The host arguments do not match the entry's parameters."""
