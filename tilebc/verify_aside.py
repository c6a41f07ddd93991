"""The verifier in a forked child while the command prints or encodes (`tilebc dis` and
`tilebc asm` of a large module).

Verifying a large module takes about as long as printing it, and printing needs nothing the
verifier finds. On a machine with more than one usable core the command forks as soon as it has
the input's bytes: the child decodes (or parses) them itself and verifies the module while the
parent decodes and prints (or parses and encodes). Each process builds its own objects: a child
verifying the parent's module would copy every page it touches (reference counts are written)
while the parent copies those it touches, about as long as decoding. The parent commits its
output only after the child has found the module valid. Where the child finds a problem, or fails
in any other way, the parent verifies again itself, so every message and exit status is the one
verifying in place gives.

The child says "valid" through a pipe before it exits, and the parent goes on at once: a process
that built a large module takes tens of milliseconds to end (its memory is given back), and the
parent need not wait for that. A child that ends without a word found a problem (or failed).
A command may also have the child make something from its module for the parent (`report`:
`tilebc dis -g` has it name the locations, tilebc/alias_aside.py). The child makes it before it
verifies, leaves it in an unnamed file and says so on the pipe (REPORTED and its length), so the
parent can use it while the child verifies (take_report).

Verifying a parsed module takes the child longer than encoding takes the parent, so for `asm`
the child leaves the last entries of a module of several to the parent, which verifies them once
its output is made (PARENT_SHARE). The decoder and the parser make no value shared by two entries, so
the parts pass together exactly when the whole does; any failure, in either process, is followed
by verifying the whole module in place.
"""
from __future__ import annotations

import os
import signal
import struct

from .inputs import verify_module

# Below this many bytes of bytecode the fork (and the pages the child copies as it touches the
# module) costs more than verifying in place.
MIN_BYTES = 64 * 1024
TEXT_BYTES_PER_BYTECODE_BYTE = 4  # a module's text form is about four times its bytecode
VALID = b"valid"  # what the child writes once it found the module valid
REPORTED = b"report"  # what it writes before, with the length, once its report is in the file
_REPORT_LENGTH = struct.Struct("<Q")
# The share of a module's entries the parent verifies after making its output: about what
# verifying takes the child beyond what encoding takes the parent (asm of text). 0 for dis:
# its parent would first decode the debug section and compile the verifier's checks for its
# share, which costs it more than the share saves the child.
PARENT_SHARE = {"bytecode": 0.0, "text": 0.12}


def child_entries(count: int, text: bool) -> int:
    """How many of a module's `count` entries, from the first, the child verifies (the parent
    the others): all of a module of one entry."""
    return count - int(count * PARENT_SHARE["text" if text else "bytecode"])


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class Verified:
    """A module verified in place before the output was made (or not to be verified):
    nothing to wait for."""

    in_place = True

    def confirm(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, kind, error, trace) -> bool:
        return False


class AsideVerifier(Verified):
    """A child verifying `module`; `confirm()` returns once it found the module valid and
    raises the verifier's error (from a verification in this process) otherwise. Used as a
    context manager around making and writing the output: an exception from that yields to
    the verifier's error (an invalid module's printing or writing may fail first), and the
    child is stopped when the block ends."""

    in_place = False

    def __init__(self, module, pid: int, verdict: int | None = None, report_file=None):
        self.module = module
        self.pid = pid
        self.verdict = verdict  # the pipe's read end, where the child writes VALID (None: none)
        self.entries: range | None = None  # the entries verified here, the child the others
        self.valid: bool | None = None
        self.error: BaseException | None = None  # what verifying here raised
        self.report_file = report_file  # where the child leaves its report (None: none)
        self.report: bytes | None = None  # the child's report, once taken (None: none came)
        # Set by a parent that changed its module in a way the verifier cannot read (the
        # locations of `dis -g`, alias_aside.py): a fresh module to verify here where needed.
        self.fresh = None

    def confirm(self) -> None:
        if self.error is not None:
            raise self.error
        if self.valid is None and self.entries and self.fresh is None:
            try:
                verify_module(self.module, self.entries)  # the parent's share
            except Exception:  # the whole module is verified below, for the error's words
                self._stop_child()
                self.valid = False
        if self.valid is None:
            if self.verdict is not None:
                self.valid = self._read_verdict()
                # a child that said VALID may still be ending: not waited for (one that said
                # nothing has closed the pipe as it exited)
                self._reap(wait=not self.valid)
            else:
                self.valid = self._reap() == 0
        if not self.valid:
            try:
                # the error, as verifying in place raises it
                verify_module(self.module if self.fresh is None else self.fresh())
            except BaseException as error:
                self.error = error
                raise
            self.valid = True  # the child failed for a reason of its own: the module is valid

    def __exit__(self, kind, error, trace) -> bool:
        try:
            if kind is not None and issubclass(kind, Exception):
                self.confirm()
        finally:
            self.cancel()
        return False

    def cancel(self) -> None:
        """Stop the child if it still runs (the command ended early)."""
        if self.valid is None:
            self._stop_child()
            self.valid = False
        if self.report_file is not None:
            self.report_file.close()
            self.report_file = None
        self._close_verdict()
        if self.pid:
            self._reap(wait=False)

    def _stop_child(self) -> None:
        """Kill the child (its verdict no longer matters) and wait for its end."""
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
            self._reap()

    def _read_verdict(self) -> bool:
        """Whether the child wrote VALID before it ended (waits for the one or the other)."""
        try:
            self.take_report()
            said = _read_exactly(self.verdict, len(VALID))
        except OSError:
            said = b""
        finally:
            self._close_verdict()
        return said == VALID

    def take_report(self) -> bytes | None:
        """The child's report, once it is made (waits for it; None where the child ended without
        one). Read once: the pipe goes on to the verdict."""
        file, self.report_file = self.report_file, None
        if file is None:
            return self.report
        if self.verdict is None:
            file.close()
            return self.report
        try:
            said = _read_exactly(self.verdict, len(REPORTED) + _REPORT_LENGTH.size)
            if said is not None and said.startswith(REPORTED):
                length = _REPORT_LENGTH.unpack_from(said, len(REPORTED))[0]
                self.report = _read_file(file.fileno(), length)
        except OSError:
            self.report = None
        finally:
            file.close()
        return self.report

    def _close_verdict(self) -> None:
        if self.verdict is not None:
            try:
                os.close(self.verdict)
            except OSError:
                pass
            self.verdict = None

    def _reap(self, wait: bool = True) -> int:
        """The child's exit status once it ended (1 when there is no child to wait for); the pid
        is forgotten only then, so an interrupted wait leaves it for cancel() to kill. Without
        `wait`, a child still running is left to end on its own (-1)."""
        if not self.pid:
            return 1
        try:
            pid, status = os.waitpid(self.pid, 0 if wait else os.WNOHANG)
        except ChildProcessError:
            pid, status = self.pid, None
        if pid == 0:  # still running
            return -1
        self.pid = 0
        return 1 if status is None else os.waitstatus_to_exitcode(status)


def _read_exactly(fd: int, count: int) -> bytes | None:
    """`count` bytes from the pipe `fd`, or None where it ends before."""
    chunks = []
    while count:
        chunk = os.read(fd, min(count, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def _read_file(fd: int, count: int) -> bytes | None:
    """`count` bytes of the file `fd` from its start, or None where it holds fewer."""
    chunks, at = [], 0
    while at < count:
        chunk = os.pread(fd, min(count - at, 1 << 24), at)
        if not chunk:
            return None
        chunks.append(chunk)
        at += len(chunk)
    return b"".join(chunks)


def _write_file(fd: int, data: bytes) -> None:
    view, at = memoryview(data), 0
    while at < len(data):
        at += os.pwrite(fd, view[at:], at)


def _report_file():
    """An unnamed file for the child's report, shared through the fork."""
    if hasattr(os, "memfd_create"):
        return open(os.memfd_create("tilebc-report", os.MFD_CLOEXEC), "rb", buffering=0)
    import tempfile
    return tempfile.TemporaryFile(buffering=0)


def verify_aside(read, size: int, *, text: bool = False, report=None) -> AsideVerifier | None:
    """A forked child verifying the module `read()` makes from the command's input (`size`: the
    length of that bytecode, or of its text with `text`), or None where that does not pay or
    cannot be done (small input, one core, no fork): then verify in place. The parent sets
    `module` on the verifier once it has read its own. `report(module)`: bytes the child makes
    from its module before verifying it, which the parent takes with take_report()."""
    if text:
        size //= TEXT_BYTES_PER_BYTECODE_BYTE
    if size < MIN_BYTES or not hasattr(os, "fork") or _usable_cores() < 2:
        return None
    try:
        report_file = None if report is None else _report_file()
    except OSError:
        return None
    try:
        verdict, said = os.pipe()
    except OSError:
        if report_file is not None:
            report_file.close()
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(verdict)
        os.close(said)
        if report_file is not None:
            report_file.close()
        return None
    if pid == 0:  # the child: VALID on the pipe, or nothing; never returns
        code = 2
        try:
            os.close(verdict)
            module = read()
            if report is not None:
                made = report(module)
                _write_file(report_file.fileno(), made)
                os.write(said, REPORTED + _REPORT_LENGTH.pack(len(made)))
            verify_module(module, range(child_entries(len(module.functions), text)))
            os.write(said, VALID)
            code = 0
        except BaseException:  # any failure: the parent verifies again and reports it
            code = 1
        finally:
            os._exit(code)
    os.close(said)
    return AsideVerifier(None, pid, verdict, report_file)


def read_verified(read, size: int, *, text: bool = False, enabled: bool = True,
                  may_fork: bool = True, report=None) -> tuple:
    """(module, verifier): the module `read()` makes from the command's input, and how the
    command learns it is valid before it commits its output. Verified here once read (the
    verifier's error raised at once), or by a child forked before reading (verify_aside) where
    `may_fork` (the command has its own process: a host calling main() may have threads a fork
    would not carry). `enabled=False` (--no-verify): not verified. `report`: see verify_aside
    (a module verified here gets none)."""
    aside = verify_aside(read, size, text=text, report=report) if enabled and may_fork else None
    try:
        module = read()
    except BaseException:
        if aside is not None:
            aside.cancel()  # the input did not read: the child has nothing to say
        raise
    if aside is not None:
        aside.module = module
        count = len(module.functions)
        aside.entries = range(child_entries(count, text), count)
        return module, aside
    if enabled:
        verify_module(module)
    return module, Verified()
