"""Writing a command's output, the way compiler tools (llvm-dis, wasm-tools) behave for their users.

Every command of both CLIs (`tilebc asm/dis/convert/translate/run`, `tilebc compile`) writes through
`write_output`:

* `-` (or no path, where a command defaults to it) is stdout; binary data is refused to a terminal
  unless forced;
* a regular file, or a name that does not exist yet, is replaced atomically: the data goes to a temp
  file beside it, is flushed to disk, then renamed over the name, so a failure (a full disk, an
  interrupt) leaves the old file, or none, and no temp file. A new file gets mode 0666 less the
  umask; a replaced one keeps its permission bits (and, where we may, its owner). Where no temp file
  can be made beside it (a folder we may not write) but the file itself is writable, it is
  rewritten in place. A file with several hard links gets a new inode: its other names keep the
  old contents (as with `sed -i`);
* a symlink is followed and its target written by the same rules: the link stays a link;
* anything else that exists (a device such as /dev/null, a FIFO) is opened and written through,
  never replaced;
* an OS failure is one TilebcError naming the path the user gave: "OUT: cannot write the output:
  No space left on device";
* output made in pieces (`tilebc dis`, an entry at a time) is written as it is made, never held
  whole, by the same rules: an error while it is made leaves a regular file as it was, and what
  came before it on stdout or in a special file.
"""
from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Callable, Iterable

from .errors import TilebcError, UsageError  # noqa: F401 (UsageError: re-exported)


Pieces = Callable[[], Iterable[bytes]]


def write_output(path: str | os.PathLike | None,
                 data: bytes | str | Callable[[], Iterable[bytes | str]], *,
                 binary: bool = True, force: bool = False) -> None:
    """Write `data` (str is UTF-8 encoded) to `path` by the rules of this module's docstring.

    `data` may also be a function returning the output in pieces (`tilebc dis`: one entry at a
    time), written as they come so that a large output is never held whole. A regular file is
    still replaced atomically: an error while the pieces are made (an exception from the
    function) leaves the old file and no temp file; where it cannot be replaced and is rewritten
    in place, the pieces are made again and joined before it is truncated, so the same holds.
    Stdout and special files (a FIFO, a device) take the pieces as they come: an error leaves
    what came before it there, as with any streaming tool."""
    pieces = _pieces(data)
    if path is None or os.fspath(path) == "-":
        _write_stdout(pieces, binary=binary, force=force)
        return
    name = os.fspath(path)
    try:
        _write_file(name, pieces)
    except OSError as error:
        reason = error.strerror or str(error)
        raise TilebcError(f"cannot write the output: {reason}", file=name) from None


def _encoded(piece: bytes | str) -> bytes:
    return piece.encode("utf-8", "surrogateescape") if isinstance(piece, str) else bytes(piece)


def _pieces(data) -> Pieces:
    if callable(data):
        return lambda: map(_encoded, data())
    payload = _encoded(data)
    return lambda: (payload,)


def _write_stdout(pieces: Pieces, *, binary: bool, force: bool) -> None:
    if binary and sys.stdout.isatty() and not force:
        raise UsageError("refusing to write binary bytecode to a terminal; use -o FILE, redirect, "
                         "or -f to force")
    try:
        sys.stdout.flush()
        for piece in pieces():
            sys.stdout.buffer.write(piece)
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        raise  # a reader that stopped early (`| head`): the CLI ends quietly
    except OSError as error:
        raise TilebcError(f"cannot write the output: {error.strerror or error}",
                          file="<stdout>") from None


def write_file(name: str, payload: bytes) -> None:
    """Write `payload` to the file `name` (symlinks followed, special files written through,
    regular files replaced atomically); OSError on failure, with no temp file left behind."""
    _write_file(name, lambda: (payload,))


def _write_file(name: str, pieces: Pieces) -> None:
    target = os.path.realpath(name)  # the final target of a symlink chain, dangling or not
    try:
        info = os.stat(target)
    except FileNotFoundError:
        info = None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), name)
    if info is not None and not stat.S_ISREG(info.st_mode):
        _write_through(target, pieces)
        return
    try:
        _replace(target, pieces, info)
    except PermissionError:
        # no temp file beside it (a folder we may not write), or its owner cannot be kept: the
        # file itself may still be writable, as it is for tools that truncate and write
        if info is None or not os.access(target, os.W_OK):
            raise
        text = b"".join(pieces())  # made whole before the file is truncated (see write_output)
        _write_through(target, lambda: (text,))


def _write_through(target: str, pieces: Pieces) -> None:
    flags = os.O_WRONLY | os.O_TRUNC | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    descriptor = os.open(target, flags)
    with os.fdopen(descriptor, "wb") as stream:
        for piece in pieces():
            stream.write(piece)


def _replace(target: str, pieces: Pieces, info: os.stat_result | None) -> None:
    descriptor, temp = temp_file(os.path.dirname(target), ".tilebc-", ".tmp")
    try:
        with os.fdopen(descriptor, "wb") as stream:
            for piece in pieces():
                stream.write(piece)
            stream.flush()
            os.fsync(stream.fileno())  # a full disk or quota can surface only here
        if info is None:
            os.chmod(temp, 0o666 & ~current_umask())
        else:
            os.chmod(temp, stat.S_IMODE(info.st_mode))
            if (info.st_uid, info.st_gid) != (os.geteuid(), os.getegid()):
                os.chown(temp, info.st_uid, info.st_gid)  # PermissionError: rewrite in place
        os.replace(temp, target)
    except BaseException:
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass
        raise


def temp_file(folder: str, prefix: str, suffix: str):
    """(descriptor, path) of a new file in `folder` that no one else opened, mode 0600, as
    tempfile.mkstemp makes it; tempfile itself costs start-up time (random, weakref)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | \
        getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        path = os.path.join(folder, f"{prefix}{os.urandom(6).hex()}{suffix}")
        try:
            return os.open(path, flags, 0o600), path
        except FileExistsError:
            continue  # taken: draw another name
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", folder)


def current_umask() -> int:
    """The process's umask (os.umask can only read it by setting it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def same_file(first: str, second: str) -> bool:
    """Whether two paths name one existing file (a command must not overwrite its own input)."""
    try:
        return os.path.samefile(first, second)
    except OSError:
        return False


def end_process(code: int) -> None:
    """End a command's own process with `code` now, its output flushed, skipping the interpreter's
    teardown (it frees every object one by one and runs loaded libraries' destructors: ~5 ms of a
    `tilebc compile`). Only after a command ran to its end, never under a tracer or profiler
    (coverage, cProfile write their results at exit): callers check."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except (BrokenPipeError, ValueError):  # a reader that stopped early (`| head`): not ours
        pass
    except OSError as error:
        print(f"tilebc: error: cannot write the output: {error.strerror or error}",
              file=sys.stderr)
        code = code or 1
    try:
        if sys.stderr is not None:
            sys.stderr.flush()
    except (OSError, ValueError):  # closed after a broken pipe
        pass
    os._exit(code)


def may_end_hard() -> bool:
    """Whether end_process may end this process: no tracer or profiler is watching (nor, from
    Python 3.12, a sys.monitoring tool such as coverage's)."""
    if sys.gettrace() is not None or sys.getprofile() is not None:
        return False
    monitoring = getattr(sys, "monitoring", None)
    return monitoring is None or not any(monitoring.get_tool(tool) for tool in range(6))
