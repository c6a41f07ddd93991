"""The ctypes nvJitLink (linker.py) against cuda.bindings' binding and cuda.pathfinder's choice:
same library, same version, the same cubin bytes, the same failure names."""
import subprocess
import sys
from pathlib import Path

import pytest

from tilebc_runtime import linker, targets
from tilebc_runtime.compiler import load_module, lower_module

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "bytecode" / "elementwise_f32" / "elementwise_f32-13.5.tilebc"

nvjitlink = pytest.importorskip("cuda.bindings.nvjitlink")


def _ptx() -> bytes:
    module = load_module(FIXTURE)
    return lower_module(module, module.functions, 90, (7, 8))[0].encode()


def _bindings_cubin(ptx: bytes) -> bytes:
    handle = nvjitlink.create(1, ["-arch=sm_90"])
    try:
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, ptx, len(ptx), "tilebc.ptx")
        nvjitlink.complete(handle)
        cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, cubin)
        return bytes(cubin)
    finally:
        nvjitlink.destroy(handle)


def test_same_version_and_cubin_as_cuda_bindings():
    ours = targets.nvjitlink_module()
    assert ours.version() == tuple(nvjitlink.version())
    ptx = _ptx()
    cubin, _ = ours.link_ptx(ptx, ["-arch=sm_90"])
    assert cubin[:4] == b"\x7fELF" and cubin == _bindings_cubin(ptx)
    assert linker._INPUT_PTX == int(nvjitlink.InputType.PTX)


def test_a_failure_reads_as_cuda_bindings_error():
    ptx = _ptx().replace(b"add.rn.f32", b"add.rn.f33")
    with pytest.raises(linker.LinkFailure) as info:
        targets.nvjitlink_module().link_ptx(ptx, ["-arch=sm_90"])
    assert str(info.value) == str(nvjitlink.nvJitLinkError(info.value.status))
    assert info.value.call in ("AddData", "Complete") and "f33" in info.value.log
    with pytest.raises(linker.LinkFailure) as info:  # refused before any input
        targets.nvjitlink_module().link_ptx(ptx, ["-no-such-option"])
    assert info.value.call == "Create"


# In a new process: the library the fast path opens is cuda.pathfinder's pick, and a link on the
# fast path imports neither cuda.pathfinder nor cuda.bindings.
PROBE = """import sys
from tilebc_runtime import linker, targets
path = linker.wheel_library()
module = targets.nvjitlink_module()
print(path == module.path, any(name.startswith("cuda") for name in sys.modules))
from cuda import pathfinder
found = pathfinder.load_nvidia_dynamic_lib("nvJitLink")
print(found.abs_path == module.path, found.found_via)
"""


def test_the_fast_path_opens_the_library_pathfinder_picks():
    if linker.wheel_library() is None:
        pytest.skip("no nvJitLink wheel in site-packages: the fast path is not taken")
    env_path = f"{ROOT}:{ROOT / 'runtime'}"
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.split("\n")[:2]
    assert first == "True False"  # its own path, without importing cuda.*
    # pathfinder sees the library loaded already, at the same path as its own search gives
    assert second.split()[0] == "True"


# In a new process: the library opened in the background (start_loading) is the wheel's, and the
# link then uses that handle.
BACKGROUND_PROBE = """import sys
from tilebc_runtime import linker, targets
targets.start_loading_nvjitlink()
path = linker._loading.get("path")
linker._wait_for_loading()  # the library is open: taking it must not go through pathfinder
module = targets.nvjitlink_module()
print(path == module.path == linker.wheel_library(), module.version() >= (12, 0),
      any(name.startswith("cuda") for name in sys.modules))
"""


def test_the_library_opened_in_the_background_is_the_one_linked():
    if linker.wheel_library() is None:
        pytest.skip("no nvJitLink wheel in site-packages: nothing is opened in the background")
    env_path = f"{ROOT}:{ROOT / 'runtime'}"
    done = subprocess.run([sys.executable, "-c", BACKGROUND_PROBE], capture_output=True,
                          text=True, env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "False"]


# A fork while the library opens in the background waits for it (os.register_at_fork), so the
# child neither inherits a held lock nor a half-done load; a thread that cannot start leaves the
# open to locate_and_open.
FORK_PROBE = """import os, _thread
from tilebc_runtime import linker, targets
targets.start_loading_nvjitlink()
pid = os.fork()
if pid == 0:
    os._exit(0 if targets.nvjitlink_module().version() >= (12, 0) else 3)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""

NO_THREAD_PROBE = """import _thread
from tilebc_runtime import linker, targets
def refuse(*args):
    raise RuntimeError("can't start new thread")
_thread.start_new_thread = refuse
targets.start_loading_nvjitlink()
print(linker._loading == {}, targets.nvjitlink_module().path == linker.wheel_library())
"""


@pytest.mark.parametrize("probe,expected", [(FORK_PROBE, ["0"]),
                                            (NO_THREAD_PROBE, ["True", "True"])])
def test_background_open_survives_fork_and_a_refused_thread(probe, expected):
    if linker.wheel_library() is None:
        pytest.skip("no nvJitLink wheel in site-packages: nothing is opened in the background")
    env_path = f"{ROOT}:{ROOT / 'runtime'}"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"}, timeout=20)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == expected


# In a new process: the first link runs on the thread that opened the library (warmed up there),
# with the cubin a link on the caller's thread gives; later links run on their callers' threads;
# a first link that fails raises its LinkFailure, with nvJitLink's log, in the caller.
FIRST_LINK_PROBE = """import _thread, sys
from tilebc_runtime import linker, targets
ptx = (b".version 7.0\\n.target sm_80\\n.address_size 64\\n"
       b".visible .entry probe(.param .u64 out) { .reg .b64 %rd<2>; .reg .b32 %r<2>; "
       b"ld.param.u64 %rd1, [out]; mov.u32 %r1, 7; st.global.u32 [%rd1], %r1; ret; }\\n")
first_bad = sys.argv[1] == "bad"
threads = []
plain = linker.NvJitLink._link_ptx
def spy(self, *arguments):
    if arguments[-1] != "warm-up.ptx":  # the loading thread's own warm-up link
        threads.append(_thread.get_ident())
    return plain(self, *arguments)
linker.NvJitLink._link_ptx = spy
targets.start_loading_nvjitlink()
module = targets.nvjitlink_module()
if first_bad:
    try:
        module.link_ptx(b".version 7.0\\n.target sm_80\\nnot ptx\\n", ["-arch=sm_80"])
    except linker.LinkFailure as failure:
        print("failure", bool(failure.log.strip()))
first = module.link_ptx(ptx, ["-arch=sm_80"])[0]
second = module.link_ptx(ptx, ["-arch=sm_80"])[0]
here = _thread.get_ident()
print(threads[0] != here, threads[1:] == [here] * (len(threads) - 1), first == second,
      first[:4] == b"\\x7fELF")
"""


@pytest.mark.parametrize("first,expected", [("good", ["True", "True", "True", "True"]),
                                            ("bad", ["failure", "True", "True", "True", "True",
                                                     "True"])])
def test_the_first_link_runs_on_the_loading_thread(first, expected):
    if linker.wheel_library() is None:
        pytest.skip("no nvJitLink wheel in site-packages: nothing is opened in the background")
    env_path = f"{ROOT}:{ROOT / 'runtime'}"
    done = subprocess.run([sys.executable, "-c", FIRST_LINK_PROBE, first], capture_output=True,
                          text=True, env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"},
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == expected


# In a new process: `tilebc compile` of a one-entry kernel (an empty cache and one in use) imports
# no extension module after the library starts opening in the background: one imported while the
# thread is in dlopen waits for the dynamic loader's lock (start_loading imports them first).
LATE_EXTENSIONS_PROBE = """import importlib.machinery, sys
from tilebc_runtime import linker
plain, before = linker.start_loading, {}
def spy():
    plain()
    before.update(dict.fromkeys(sys.modules))
linker.start_loading = spy
from tilebc import cli
code = cli._main(sys.argv[1:])
late = sorted(name for name, module in sys.modules.items() if name not in before and
              (getattr(module, "__file__", None) or "").endswith(
                  tuple(importlib.machinery.EXTENSION_SUFFIXES)))
print(code, bool(before), late)
"""


def test_no_extension_module_is_imported_while_the_library_opens(tmp_path):
    if linker.wheel_library() is None:
        pytest.skip("no nvJitLink wheel in site-packages: nothing is opened in the background")
    env = {"PYTHONPATH": f"{ROOT}:{ROOT / 'runtime'}", "PATH": "/usr/bin:/bin",
           "TILEBC_CACHE_DIR": str(tmp_path / "cache")}
    for name in ("atomics_raw", "early_return"):  # cold, then a miss in a cache in use
        fixture = ROOT / "fixtures" / "bytecode" / name / f"{name}-13.5.tilebc"
        done = subprocess.run([sys.executable, "-c", LATE_EXTENSIONS_PROBE, "compile",
                               str(fixture), "--arch", "sm_90", "-o", str(tmp_path / "k.cubin")],
                              capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split("\n")[-2] == "0 True []"


# A process that ends while the loading thread warms nvJitLink up must wait for it: the library's
# destructors running beside the thread crashed such a process (abort or segfault in ~60 % of
# runs ending 5 ms after the open; atexit now waits).
EARLY_EXIT_PROBE = """import time
from tilebc_runtime import linker
linker.start_loading()
with linker._loading["done"]:
    pass
time.sleep(0.005)
"""


def test_a_process_ending_during_the_warm_up_exits_cleanly():
    if linker.wheel_library() is None:
        pytest.skip("no nvJitLink wheel in site-packages: nothing is opened in the background")
    env = {"PYTHONPATH": f"{ROOT}:{ROOT / 'runtime'}", "PATH": "/usr/bin:/bin"}
    codes = [subprocess.run([sys.executable, "-c", EARLY_EXIT_PROBE], capture_output=True,
                            env=env, timeout=60).returncode for _ in range(6)]
    assert codes == [0] * 6


# In a new process: a warm-up that fails (here: raises) neither kills the offer nor hangs the
# first link, which then runs on the loading thread all the same.
FAILED_WARM_UP_PROBE = """from tilebc_runtime import linker, targets
def broken(library):
    raise OSError("no warm-up")
linker._warm_up = broken
targets.start_loading_nvjitlink()
ptx = (b".version 7.0\\n.target sm_80\\n.address_size 64\\n.visible .entry k() { ret; }\\n")
print(targets.nvjitlink_module().link_ptx(ptx, ["-arch=sm_80"])[0][:4] == b"\\x7fELF")
"""


def test_a_failed_warm_up_leaves_the_first_link_working():
    if linker.wheel_library() is None:
        pytest.skip("no nvJitLink wheel in site-packages: nothing is opened in the background")
    env = {"PYTHONPATH": f"{ROOT}:{ROOT / 'runtime'}", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", FAILED_WARM_UP_PROBE], capture_output=True,
                          text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True"]
