"""Errors of the PTX emulator. Each names the PTX file (or "<ptx>"), the line:column of the
instruction and, while running, the CTA, the first offending thread and the address.

Run-time faults subclass the CPU interpreter's errors, so callers (and tests) that handle
`tilebc.interp.MemoryCheckError` / `KernelAssertionError` treat the emulator the same way.
"""
from __future__ import annotations

from typing import Optional, Sequence

from tilebc.errors import TilebcError
from tilebc.interp.errors import ExecutionError, KernelAssertionError, MemoryCheckError


class PtxSyntaxError(TilebcError):
    """The PTX text is not in the grammar the emulator reads."""


class UnsupportedInstruction(TilebcError):
    """An instruction (or a modifier of it) the emulator does not implement. Raised while the
    kernel is loaded, before anything runs, so an unknown lowering cannot pass by accident."""


def _context(cta: Optional[Sequence[int]], thread: Optional[int], address: Optional[int],
             text: Optional[str]) -> str:
    parts = []
    if text:
        parts.append(f"`{text}`")
    if cta is not None:
        parts.append(f"CTA ({', '.join(str(int(c)) for c in cta)})")
    if thread is not None:
        parts.append(f"thread {int(thread)}")
    if address is not None:
        parts.append(f"address 0x{int(address):x}")
    return f" [{'; '.join(parts)}]" if parts else ""


class _RunMixin:
    def _init(self, message, file, line, column, cta, thread, address, text):
        self.reason = message
        self.cta = tuple(cta) if cta is not None else None
        self.thread = thread
        self.address = address
        self.instruction = text
        TilebcError.__init__(self, message + _context(cta, thread, address, text), file=file,
                             line=line, column=column)


class SimExecutionError(_RunMixin, ExecutionError):
    """A kernel could not complete on the emulator (divergent bra.uni, barrier in divergent
    code, bad special register...)."""

    def __init__(self, message, *, file=None, line=None, column=None, cta=None, thread=None,
                 address=None, text=None):
        self._init(message, file, line, column, cta, thread, address, text)
        self.op = None
        self.block_id = self.cta


class SimMemoryError(_RunMixin, MemoryCheckError):
    """Out-of-bounds / misaligned / uninitialised access, or a shared-memory race."""

    def __init__(self, message, *, file=None, line=None, column=None, cta=None, thread=None,
                 address=None, text=None):
        self._init(message, file, line, column, cta, thread, address, text)
        self.op = None
        self.block_id = self.cta


class SharedRaceError(SimMemoryError):
    """Two threads touched one shared-memory byte between barriers, one of them writing."""


class SimTrap(_RunMixin, KernelAssertionError):
    """A thread executed `trap`; the message carries what the CTA printed before it (the
    kernel's assert message)."""

    def __init__(self, message, *, file=None, line=None, column=None, cta=None, thread=None,
                 address=None, text=None):
        self._init(message, file, line, column, cta, thread, address, text)
        self.op = None
        self.block_id = self.cta
