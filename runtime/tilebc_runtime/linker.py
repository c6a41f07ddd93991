"""libnvJitLink through ctypes: PTX -> cubin without cuda.bindings or cuda.pathfinder.

Importing cuda.bindings.nvjitlink imports cuda.pathfinder (~50 ms of a ~200 ms cold `tilebc
compile`). The calls are the same C entry points the binding makes (its unversioned names), so
the cubin is the same. The library is the one cuda.pathfinder would load: where its first search
step (the NVIDIA wheels in site-packages) finds it and nothing has loaded another one, that file
is opened here directly; anywhere else cuda.pathfinder is asked, as before.
"""
from __future__ import annotations

import _thread
import atexit
import ctypes
import os
import site
import sys
from collections.abc import Sequence

# cuda.pathfinder's nvJitLink descriptor on Linux: wheel folders and sonames, in its order.
_WHEEL_DIRS = (("nvidia", "cu13", "lib"), ("nvidia", "nvjitlink", "lib"))
_SONAMES = ("libnvJitLink.so.13", "libnvJitLink.so.12")
_INPUT_PTX = 2  # nvJitLinkInputType NVJITLINK_INPUT_PTX


class LinkFailure(Exception):
    """A nvJitLink call returned `status` (an nvJitLinkResult other than success)."""

    def __init__(self, status: int, call: str):
        self.status, self.call, self.log = status, call, ""
        super().__init__(f"{_status_name(status)} ({status})")


def _status_name(status: int) -> str:
    # Named by cuda.bindings' enum when it is there: only failures pay for its import.
    try:
        from cuda.bindings.nvjitlink import Result
        return Result(status).name
    except Exception:
        return "nvJitLink error"


def site_folders() -> list:
    """site-packages folders in cuda.pathfinder's order (a venv's own, then the user's)."""
    folders = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        user = site.getusersitepackages()
        if user:
            folders.insert(1 if sys.prefix != sys.base_prefix else 0, user)
    return folders


def wheel_library() -> str | None:
    """The libnvJitLink of an NVIDIA wheel that cuda.pathfinder's site-packages step would pick,
    or None (not Linux, or no such wheel)."""
    if not sys.platform.startswith("linux"):
        return None
    folders = site_folders()
    for parts in _WHEEL_DIRS:
        for folder in folders:
            directory = os.path.join(folder, *parts)
            for soname in _SONAMES:
                path = os.path.join(directory, soname)
                if os.path.isfile(path):
                    return path
    return None


def _already_loaded() -> bool:
    for soname in _SONAMES:
        try:
            ctypes.CDLL(soname, mode=os.RTLD_NOLOAD)
            return True
        except OSError:
            continue
    return False


# The wheel library a background thread is opening (start_loading): its path and a lock the
# thread holds until dlopen returns; _starting makes the check and the start one step.
_loading: dict = {}
_starting = _thread.allocate_lock()


def start_loading() -> None:
    """Begin opening the wheel's libnvJitLink on another thread, so that the dynamic loader's
    ~15 ms overlap the work before the first link. ctypes.CDLL holds the GIL while it opens a
    library; a foreign call does not, so the thread calls libc's dlopen. locate_and_open()
    waits for it and opens the same file again (the loader only counts the reference)."""
    if _loading or not sys.platform.startswith("linux"):
        return
    with _starting:  # two threads compiling at once start one load
        if _loading:
            return
        path = wheel_library()
        if path is None or _already_loaded():
            return
        try:
            dlopen = ctypes.CDLL(None).dlopen
        except (OSError, AttributeError):
            return
        dlopen.argtypes, dlopen.restype = [ctypes.c_char_p, ctypes.c_int], ctypes.c_void_p
        # An extension module imported while the thread is in dlopen waits for the loader's
        # lock (~10 ms): those that the decoder and the lowering import are loaded first
        # (test_rt_linker checks that a compile imports none after this point).
        import array  # noqa: F401
        import contextvars  # noqa: F401
        import math  # noqa: F401
        try:
            import _blake2  # noqa: F401 (tilebc.codecache's key)
        except ImportError:
            pass
        import tilebc.speedups  # noqa: F401 (the reader's compiled decoder)
        encoded = os.fsencode(path)
        done = _thread.allocate_lock()
        done.acquire()
        offer = _FirstLink()

        def load() -> None:
            library = None
            try:
                try:
                    handle = dlopen(encoded, os.RTLD_NOW | os.RTLD_GLOBAL)
                finally:
                    done.release()  # a failed open shows in the real one
                if handle:
                    library = ctypes.CDLL(path, handle=handle)
            except BaseException:  # the real open meets it; the offer is still served
                library = None
            offer.serve(library)
        # before the thread: a fork waits for it, and so does the interpreter's exit (the
        # library's destructors must not run while the thread is inside nvJitLink)
        _loading.update(path=path, done=done, offer=offer)
        atexit.register(_before_exit)
        try:
            _thread.start_new_thread(load, ())
        except RuntimeError:  # no thread to be had: locate_and_open opens it itself
            _loading.clear()
            done.release()
            offer.withdraw()


class _FirstLink:
    """The loading thread's offer to run the process's first link. nvJitLink's first input on a
    thread costs ~5-8 ms more than later ones on that thread (its front end sets itself up per
    thread): the loading thread pays that on a trivial entry while the caller decodes and lowers,
    then links the caller's first PTX itself. Later links run on their callers' threads."""

    def __init__(self):
        self.pid = os.getpid()
        self.claimed = False
        self.job = self.outcome = None
        self.posted, self.finished = _thread.allocate_lock(), _thread.allocate_lock()
        self.posted.acquire()
        self.finished.acquire()
        self.idle = _thread.allocate_lock()  # held while the thread works in nvJitLink
        self.idle.acquire()

    def claim(self) -> bool:
        """True once per process for the caller that will hand its link over (run)."""
        with _starting:
            if self.claimed or self.pid != os.getpid():  # a forked child has no such thread
                return False
            self.claimed = True
            return True

    def run(self, function, *arguments):
        """function(*arguments) on the loading thread: its value, or its exception raised here."""
        self.job = (function, arguments)
        self.posted.release()
        self.finished.acquire()
        succeeded, value = self.outcome
        self.job = self.outcome = None
        if succeeded:
            return value
        raise value

    def serve(self, library) -> None:
        """On the loading thread: warm up, then run the job when one is posted."""
        try:
            if library is not None:
                _warm_up(library)
        except Exception:  # the real link meets whatever failed here; the offer still stands
            pass
        finally:
            self.idle.release()
        self.posted.acquire()  # forever, in a process that never links: it exits all the same
        with self.idle:
            function, arguments = self.job
            try:
                self.outcome = (True, function(*arguments))
            except BaseException as error:  # handed to the caller, which raises it
                self.outcome = (False, error)
        self.finished.release()

    def withdraw(self) -> None:
        """No thread will serve: nobody may claim, and a fork does not wait (the caller holds
        _starting)."""
        self.claimed = True
        self.idle.release()

    def close(self) -> None:
        """From now on nobody may claim: later first links run on their callers' threads."""
        with _starting:
            self.claimed = True

    def hold(self) -> bool:
        """Take `idle` (wait until the thread is out of nvJitLink, and keep it out) where this
        process's thread serves; False where there is nothing to hold."""
        if self.pid != os.getpid():
            return False
        self.idle.acquire()
        return True


# A trivial entry: nvJitLink's first input on a thread sets up its PTX front end and code
# generator there.
_WARM_UP_PTX = (b".version 7.8\n.target sm_90\n.address_size 64\n"
                b".visible .entry tilebc_warm_up() { ret; }\n")


def _warm_up(library: ctypes.CDLL) -> None:
    """Link _WARM_UP_PTX and drop the result. A failure (a library without these entry points,
    a refused link) raises; serve() ignores it and the real link meets it."""
    NvJitLink(library)._link_ptx(_WARM_UP_PTX, ["-arch=sm_90"], "warm-up.ptx")


def _wait_until_open() -> None:
    """Until the loading thread's dlopen returned (at once where none was started)."""
    done = _loading.get("done")
    if done is not None:
        with done:
            pass


def _wait_for_loading() -> None:
    """Until the loading thread has opened the library and is out of nvJitLink (now)."""
    _wait_until_open()
    offer = _loading.get("offer")
    if offer is not None and offer.hold():
        offer.idle.release()


def _before_fork() -> None:
    """The library open, and the loading thread kept out of nvJitLink until the fork is done: a
    child must inherit neither a load in progress nor nvJitLink's locks held."""
    _wait_until_open()
    offer = _loading.get("offer")
    _loading["held_for_fork"] = offer is not None and offer.hold()


def _after_fork_in_parent() -> None:
    if _loading.pop("held_for_fork", False):
        _loading["offer"].idle.release()


def _before_exit() -> None:
    """No first link starts any more, and the loading thread is kept out of nvJitLink: the
    library's destructors run after this."""
    offer = _loading.get("offer")
    if offer is not None:
        offer.close()
    _wait_until_open()
    if offer is not None:
        offer.hold()  # never released: the process is ending


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent)


def _loaded_here(path: str) -> bool:
    """Whether `path` is the library start_loading opened (waiting for it to finish)."""
    if _loading.get("path") != path:
        return False
    _wait_until_open()
    return True


def locate_and_open() -> tuple[ctypes.CDLL, str | None]:
    """(the opened library, its path when known), as cuda.pathfinder would choose it."""
    path = wheel_library()
    if path is not None and (_loaded_here(path) or not _already_loaded()):
        # pathfinder's flags, so a later cuda.bindings user shares this handle
        return ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_GLOBAL), path
    try:
        from cuda import pathfinder
    except ImportError:  # no searcher: the dynamic linker's own search
        return _system_library(), None
    found = pathfinder.load_nvidia_dynamic_lib("nvJitLink")
    return ctypes.CDLL(found.abs_path or _SONAMES[0], handle=found._handle_uint), found.abs_path


def _system_library() -> ctypes.CDLL:
    for soname in _SONAMES:
        try:
            return ctypes.CDLL(soname, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
        except OSError:
            continue
    raise OSError(f"none of {', '.join(_SONAMES)} on the dynamic linker's path")


class NvJitLink:
    """The nvJitLink calls the JIT makes, on one opened library."""

    def __init__(self, library: ctypes.CDLL, path: str | None = None):
        self.path = path
        size_p, handle_p = ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_void_p)
        self._functions = {}
        for name, arguments in (
                ("Version", [ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(ctypes.c_uint)]),
                ("Create", [handle_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_char_p)]),
                ("Destroy", [handle_p]),
                ("AddData", [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t,
                             ctypes.c_char_p]),
                ("Complete", [ctypes.c_void_p]),
                ("GetLinkedCubinSize", [ctypes.c_void_p, size_p]),
                ("GetLinkedCubin", [ctypes.c_void_p, ctypes.c_void_p]),
                ("GetErrorLogSize", [ctypes.c_void_p, size_p]),
                ("GetErrorLog", [ctypes.c_void_p, ctypes.c_char_p]),
                ("GetInfoLogSize", [ctypes.c_void_p, size_p]),
                ("GetInfoLog", [ctypes.c_void_p, ctypes.c_char_p])):
            function = getattr(library, "nvJitLink" + name)
            function.argtypes, function.restype = arguments, ctypes.c_int
            self._functions[name] = function

    def _call(self, name: str, *arguments) -> None:
        status = self._functions[name](*arguments)
        if status:
            raise LinkFailure(status, name)

    def version(self) -> tuple[int, int]:
        major, minor = ctypes.c_uint(), ctypes.c_uint()
        self._call("Version", ctypes.byref(major), ctypes.byref(minor))
        return major.value, minor.value

    def link_ptx(self, ptx: bytes, options: Sequence[str], name: str = "tilebc.ptx"
                 ) -> tuple[bytes, str]:
        """(cubin, info log) of one PTX input. LinkFailure carries the error log as `log`. The
        process's first link runs on the thread that opened the library (_FirstLink)."""
        offer = _loading.get("offer")
        if offer is not None and offer.claim():
            return offer.run(self._link_ptx, ptx, options, name)
        return self._link_ptx(ptx, options, name)

    def _link_ptx(self, ptx: bytes, options: Sequence[str], name: str) -> tuple[bytes, str]:
        handle = ctypes.c_void_p()
        encoded = [option.encode() for option in options]
        self._call("Create", ctypes.byref(handle), len(encoded),
                   (ctypes.c_char_p * len(encoded))(*encoded))
        try:
            try:
                self._call("AddData", handle, _INPUT_PTX, ptx, len(ptx), name.encode())
                self._call("Complete", handle)
            except LinkFailure as failure:
                failure.log = self._log(handle, "Error")
                raise
            size = ctypes.c_size_t()
            self._call("GetLinkedCubinSize", handle, ctypes.byref(size))
            cubin = ctypes.create_string_buffer(size.value)
            self._call("GetLinkedCubin", handle, cubin)
            return cubin.raw, self._log(handle, "Info")
        finally:
            # a failed Destroy must not hide the error the link itself raised
            status = self._functions["Destroy"](ctypes.byref(handle))
            if status and sys.exc_info()[0] is None:
                raise LinkFailure(status, "Destroy")

    def _log(self, handle, which: str) -> str:
        size = ctypes.c_size_t()
        self._call(f"Get{which}LogSize", handle, ctypes.byref(size))
        if not size.value:
            return ""
        buffer = ctypes.create_string_buffer(size.value)
        self._call(f"Get{which}Log", handle, buffer)
        return buffer.raw.rstrip(b"\0").decode(errors="replace")
