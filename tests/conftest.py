import contextlib
import functools
import gc
import hashlib
import io
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

# One BLAS thread per process, set before numpy loads (here, in the xdist workers, which inherit
# it, and in the tests' subprocesses): the interpreter's matmuls are small, and OpenBLAS's extra
# threads spin on the cores the other workers need (mmaf's exact_dot took 8x the CPU).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# A test process holds hundreds of MB of session caches (decoded fixtures, tool results), which
# every full collection walked again (at Python's default thresholds ~12 % of a fixture walk's CPU).
# Between tests everything still alive is frozen (_FreezeBetweenTests, below), so a collection
# walks only what the running test made; these thresholds keep young collections cheap inside a
# test, and a full one comes after some 2 million surviving allocations instead of 70,000.
gc.set_threshold(5000, 20, 20)

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_DIR = ROOT / "fixtures" / "bytecode"
# The team's shared folder (seeds, NVIDIA reference files, tools) sits beside the repository.
SHARED = Path(os.environ.get("TILEBC_SHARED", ROOT.parent / "shared"))
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def fixture_files():
    """Every stored cuTile fixture file (fails loudly if there are none)."""
    files = sorted(FIXTURE_DIR.glob("*/*.tilebc"))
    if not files:
        raise RuntimeError(f"no fixtures under {FIXTURE_DIR}")
    return files


def shared_path(relative: str) -> Path:
    """A path inside the shared folder. A checkout without the folder skips the test (and says
    where it looked); a shared folder that lacks the path is an error, never a silent skip."""
    if not SHARED.is_dir():
        pytest.skip(f"no shared folder at {SHARED} (set TILEBC_SHARED to use another)")
    path = SHARED / relative
    if not path.exists():
        pytest.fail(f"{path} is missing from the shared folder {SHARED}")
    return path


@pytest.fixture
def frozen_heap():
    """Keep the garbage collector off the objects that exist before the test (its fixtures'
    included): a collection would walk them and be charged to whichever input a per-input CPU
    limit happened to be timing. What is frozen stays so; _FreezeBetweenTests collects the test's
    own garbage after it."""
    gc.freeze()
    yield


class _FreezeBetweenTests:
    """After each test, collect once and freeze what survives (session caches, module globals,
    fixtures still in scope): no later collection walks it again. In a full run the collector took
    56 s of the workers' CPU with the old generations walked over and over; 44 s this way.
    Cyclic garbage among frozen objects is never reclaimed; what becomes garbage later is a
    fixture of module scope at most, and a run's peak memory is unchanged (~830 MB)."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session):
        gc.collect()
        gc.freeze()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        yield
        gc.collect()
        gc.freeze()


def fixture_id(path: Path) -> str:
    return path.stem


def fixture_kernels() -> dict:
    """Every fixture kernel (its folder's name) -> its files, one per bytecode version, oldest
    first. The fixture walks run one test per kernel: pytest's own cost per test (some 3 ms under
    xdist) would be a large part of a walk with one test per file."""
    kernels = {}
    for path in fixture_files():
        kernels.setdefault(path.parent.name, []).append(path)
    return kernels


class CaseFailures:
    """Gathers what fails across the cases of one test (a kernel's version files), so that a
    failing case does not hide the ones after it; `raise_any` then fails the test naming each
    failing case, the line that failed and its message.

        failures = CaseFailures()
        for path in files:
            with failures.case(path.name):
                ...
        failures.raise_any()
    """

    def __init__(self):
        self.failures = []
        self.cases = 0

    @contextlib.contextmanager
    def case(self, label: str):
        self.cases += 1
        try:
            yield
        except Exception as error:  # an unexpected exception fails only its case, as an assert does
            self.failures.append((label, error))
        except BaseException:  # pytest.skip / fail / exit: not before reporting what already failed
            self.raise_any()
            raise

    def raise_any(self):
        if not self.failures:
            return
        reports = []
        for label, error in self.failures:
            if isinstance(error, AssertionError):
                frame = traceback.extract_tb(error.__traceback__)[-1]
                where = f"{Path(frame.filename).name}:{frame.lineno}"
                reports.append(f"{label}: {where}: {error}")
            else:  # the whole traceback: where it was raised is the point
                reports.append(f"{label}: " + "".join(traceback.format_exception(error)))
        pytest.fail(f"{len(self.failures)} of {self.cases} cases failed: "
                    + ", ".join(label for label, _ in self.failures) + "\n\n"
                    + "\n\n".join(reports), pytrace=False)


@pytest.fixture(scope="session")
def all_fixture_files():
    return fixture_files()


# ---- NVIDIA's tools -----------------------------------------------------------------------------
from tilebc import oracles  # noqa: E402

HAVE_DISASM = oracles.tool_path("tileirdisasm") is not None
HAVE_TILEIRAS = oracles.tool_path("tileiras") is not None
needs_disasm = pytest.mark.skipif(not HAVE_DISASM, reason="needs NVIDIA's tileirdisasm "
                                  "(pip package nvidia-cuda-tileiras)")
needs_tileiras = pytest.mark.skipif(not HAVE_TILEIRAS, reason="needs NVIDIA's tileiras "
                                    "(pip package nvidia-cuda-tileiras)")


def tileiras_accepts(data: bytes, gpu_name: str = "sm_90"):
    """tileiras on bytes whose IR tileirdisasm already showed equal to a cuTile file's: the question
    is whether NVIDIA's compiler reads, verifies and lowers them, which -O0 answers as -O3 does
    (the optimiser works on the same in-memory IR) in a tenth of the time (12 s -> 1 s for the
    largest kernel). Architecture refusals (exit 5) are the same at both levels. Where it can,
    the run stops at tileiras's PTX (tileiras_front_end): ptxas reads that PTX, not our bytes."""
    return oracles.tileiras(data, gpu_name, opt_level=0,
                            executable=os.environ.get(_FRONT_END_ENV) or None)


_FRONT_END_ENV = "TILEBC_TEST_TILEIRAS_FRONT_END"
# Takes ptxas's place: an empty output file where ptxas would write the cubin.
_PTXAS_STAND_IN = """#!/bin/sh
out=
while [ $# -gt 0 ]; do
  if [ "$1" = -o ]; then out=$2; shift; fi
  shift
done
[ -n "$out" ] && : > "$out"
exit 0
"""


def tileiras_front_end(folder: str) -> str | None:
    """A tileiras that stops after writing its PTX, made in `folder`; None where it cannot be.

    tileiras lowers Tile IR to PTX, then runs the ptxas of its own folder (not $PATH's) on that
    PTX: about 40 % of an -O0 compile (23 s of the 55 s of CPU for the 205 fixtures). This is a
    copy of the tool folder whose tileiras is a hard link to the real one, whose ptxas is
    _PTXAS_STAND_IN, and whose other entries are links to the real ones. A hard link needs the
    same filesystem: else None (copying 100 MB would cost more than it saves)."""
    real = oracles.tool_path("tileiras")
    if real is None or os.name != "posix":
        return None
    real = os.path.realpath(real)
    tools = os.path.dirname(real)
    install = os.path.dirname(tools)
    mirror = os.path.join(folder, os.path.basename(install))
    mirror_tools = os.path.join(mirror, os.path.basename(tools))
    os.makedirs(mirror_tools)
    try:
        os.link(real, os.path.join(mirror_tools, "tileiras"))
    except OSError:
        return None
    for source, target, skip in ((install, mirror, os.path.basename(tools)),
                                 (tools, mirror_tools, None)):
        for name in os.listdir(source):
            if name not in (skip, "tileiras", "ptxas"):
                os.symlink(os.path.join(source, name), os.path.join(target, name))
    stand_in = os.path.join(mirror_tools, "ptxas")
    with open(stand_in, "w") as stream:
        stream.write(_PTXAS_STAND_IN)
    os.chmod(stand_in, 0o755)
    return os.path.join(mirror_tools, "tileiras")


_MEMO_ENV = "TILEBC_TEST_TOOL_MEMO"


def _memoise_tool_runs():
    """Run each NVIDIA tool once per (arguments, input bytes) per test session. The tools are
    deterministic, and several tests hand them the same bytes (our re-encoding of a fixture, the
    reassembly of its listing, its conversion to a version another fixture file already has):
    of the 7,599 tileirdisasm runs the fixture walks make, 3,845 have distinct inputs. Results
    are shared between xdist workers through a folder the controlling process makes."""
    run = oracles._run_on_bytes
    memo = {}

    def cached(args, data, timeout=120):
        key = hashlib.sha256(repr(args).encode() + b"\0" + bytes(data)).hexdigest()
        hit = memo.get(key)
        folder = os.environ.get(_MEMO_ENV)
        stored = Path(folder) / key if folder else None
        if hit is None and stored is not None and stored.is_file():
            hit = memo[key] = oracles.ToolResult(*pickle.loads(stored.read_bytes()))
        if hit is None:
            hit = memo[key] = run(args, data, timeout)
            if stored is not None and stored.parent.is_dir():
                partial = stored.with_suffix(f".{os.getpid()}")
                partial.write_bytes(pickle.dumps((hit.returncode, hit.stdout, hit.stderr)))
                os.replace(partial, stored)
        return oracles.ToolResult(hit.returncode, hit.stdout, hit.stderr)

    oracles._run_on_bytes = cached


_memoise_tool_runs()


def pytest_configure(config):
    # a plugin, not hooks of this file: those would apply to tests/ alone, not runtime/tests
    config.pluginmanager.register(_FreezeBetweenTests(), "tilebc-freeze-between-tests")
    if not os.environ.get("PYTEST_XDIST_WORKER") and not os.environ.get(_MEMO_ENV):
        folder = tempfile.mkdtemp(prefix="tilebc-tool-memo-")
        os.environ[_MEMO_ENV] = folder  # the xdist workers start later and inherit it
        config._tilebc_tool_memo = folder
    if not os.environ.get("PYTEST_XDIST_WORKER") and not os.environ.get(_FRONT_END_ENV):
        made = _make_front_end()
        if made is not None:
            config._tilebc_front_end, os.environ[_FRONT_END_ENV] = made


_FRONT_END_PREFIX = "tilebc-test-tileiras-"


def _make_front_end() -> tuple[str, str] | None:
    """(folder, tool) of a tileiras_front_end: in a temporary folder, else, for the NVIDIA wheel's
    tileiras (site-packages/nvidia/cu13/bin), in site-packages/nvidia, where the temporary folder
    is on another filesystem. None where neither works."""
    real = oracles.tool_path("tileiras")
    places = [None]
    _remove_stale_front_ends(tempfile.gettempdir())
    wheel = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(real)))) if real else ""
    if os.path.basename(wheel) == "nvidia":
        _remove_stale_front_ends(wheel)
        places.append(wheel)
    for place in places:
        try:
            folder = tempfile.mkdtemp(prefix=_FRONT_END_PREFIX, dir=place)
        except OSError:
            continue
        try:
            tool = tileiras_front_end(folder)
        except OSError:
            tool = None
        if tool is not None:
            return folder, tool
        shutil.rmtree(folder, ignore_errors=True)
    return None


def _remove_stale_front_ends(folder: str, age: float = 86400) -> None:
    """Copies a killed session left in `folder` over a day ago (a hard link keeps the tileiras
    it was made from on disk after the wheel is replaced; a running session's copy is younger)."""
    import time
    try:
        names = [name for name in os.listdir(folder) if name.startswith(_FRONT_END_PREFIX)]
    except OSError:
        return
    for name in names:
        path = os.path.join(folder, name)
        try:
            if time.time() - os.lstat(path).st_mtime > age and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass


def pytest_unconfigure(config):
    folder = getattr(config, "_tilebc_tool_memo", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(_MEMO_ENV, None)
    folder = getattr(config, "_tilebc_front_end", None)
    if folder:  # links only: rmtree removes a link, never what it points to
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(_FRONT_END_ENV, None)


# ---- fixtures decoded once per session ----------------------------------------------------------
@functools.lru_cache(maxsize=None)
def decoded(path: Path):
    """The fixture decoded once per session (not verified: the tests that want that verify it).
    Shared between tests, so a test must not change it; one that mutates IR loads its own copy."""
    import tilebc
    return tilebc.load(path, verify=False)


@functools.lru_cache(maxsize=None)
def encoded(path: Path) -> bytes:
    """Our canonical encoding of the fixture at its own version (as if the module were built from
    scratch: the file's recorded layout set aside, since with it the bytes are the file's own)."""
    import tilebc
    module = decoded(path)
    layout, module.layout = module.layout, None
    try:
        return tilebc.dump(module)
    finally:
        module.layout = layout


@functools.lru_cache(maxsize=None)
def verified_version(data: bytes):
    """The version of `data` decoded and verified (tilebc.load), once per distinct bytes per
    session: a kernel converted to a version from each of its files is mostly the same bytes
    (2,269 conversions of the fixtures, 981 distinct). A failure raises each time."""
    import tilebc
    return tilebc.load(data).version


@functools.lru_cache(maxsize=None)
def assembled(path: Path, suffix: str) -> bytes:
    """The stored listing `path.with_suffix(suffix)` assembled (and verified) at the fixture's
    version, once per session for the tests that each hand it to an NVIDIA tool."""
    from tilebc.text import assemble
    return assemble(path.with_suffix(suffix).read_text(), path.stem.rsplit("-", 1)[1], str(path))


# ---- the command line, in this process ----------------------------------------------------------
class _Stream(io.TextIOWrapper):
    """A text stream over bytes, as sys.stdout is: the commands write text and, for binary
    output, to .buffer."""

    def __init__(self, data: bytes = b""):
        super().__init__(io.BytesIO(data), encoding="utf-8", errors="surrogateescape",
                         write_through=True)

    def isatty(self):
        return False


def run_cli(*args, stdin: bytes = b"", cwd=None, env=None) -> subprocess.CompletedProcess:
    """`tilebc ARGS` run through tilebc.cli.main in this process (a subprocess costs a Python
    start and the imports, about half a CPU second): the exit status, and stdout/stderr as bytes.
    An exception that escapes main fails the calling test, as a traceback would."""
    from tilebc import cli
    argv = [str(a) for a in args]
    saved = sys.stdin, sys.stdout, sys.stderr, os.getcwd(), dict(os.environ)
    sys.stdin, sys.stdout, sys.stderr = _Stream(stdin), _Stream(), _Stream()
    out, err = sys.stdout, sys.stderr
    try:
        os.environ.update(env or {})
        if cwd is not None:
            os.chdir(cwd)
        try:
            code = cli.main(argv)
        except SystemExit as stop:  # argparse: --help, usage errors
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        for stream in (out, err):
            if not stream.closed:
                stream.flush()
        return subprocess.CompletedProcess(["tilebc", *argv], code, out.buffer.getvalue()
                                           if not out.closed else b"", err.buffer.getvalue()
                                           if not err.closed else b"")
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved[:3]
        os.chdir(saved[3])
        os.environ.clear()
        os.environ.update(saved[4])


def joined_fixture_module(min_bytes: int, plain_entries: int = 0):
    """The entries of the 13.5 fixtures (none with globals, names unique) in one module whose
    bytecode is over `min_bytes`, from the first in name order; the entries of the
    `plain_entries` fixtures after the first without debug info. Its own copy: callers change it."""
    import tilebc
    module, names, plain = None, set(), 0
    for path in sorted((ROOT / "fixtures" / "bytecode").glob("*/*-13.5.tilebc")):
        part = tilebc.load(path)
        if part.globals or any(function.name in names for function in part.functions):
            continue
        if module is None:
            module = part
        else:
            if plain < plain_entries:
                for function in part.functions:
                    function.loc = None
                    for op in function.walk():
                        op.loc = None
                plain += 1
            module.functions += part.functions
        names.update(function.name for function in part.functions)
        module.layout = None
        if len(tilebc.dump(module)) > min_bytes:
            return module
    raise AssertionError(f"the 13.5 fixtures hold less than {min_bytes} bytes of entries")
