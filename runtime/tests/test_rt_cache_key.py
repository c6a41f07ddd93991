"""The JIT's toolchain identity (cache key field 3) covers every source file that shapes generated
code, in tilebc as well as in tilebc_runtime, and nothing the JIT does not run."""
import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tilebc
from tilebc_runtime import launch

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "bytecode"


def _identity(tree: Path) -> str:
    code = "from tilebc_runtime.launch import JitBackend; print(JitBackend().identity())"
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'runtime'}"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=tree, check=True)
    return done.stdout.strip()


@pytest.fixture(scope="module")
def copied_tree(tmp_path_factory):
    """A copy of both packages whose sources a test may edit, and its JIT identity."""
    tree = tmp_path_factory.mktemp("tree")
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "tilebc", tree / "tilebc", ignore=ignore)
    shutil.copytree(ROOT / "runtime" / "tilebc_runtime", tree / "runtime" / "tilebc_runtime", ignore=ignore)
    return tree, _identity(tree)


@pytest.mark.parametrize("edited, changes_key", [
    ("tilebc/ir/types.py", True),            # before: only tilebc.__version__ was hashed
    ("tilebc/binary/reader.py", True),
    ("tilebc/ops/table.py", True),
    ("tilebc/numeric/numerics.py", True),
    ("runtime/tilebc_runtime/lowering/elementwise.py", True),
    ("runtime/tilebc_runtime/compiler.py", True),
    ("runtime/tilebc_runtime/perf/model.py", True),       # it picks wgmma or mma.sync
    ("runtime/tilebc_runtime/perf/ptx_counts.py", True),
    ("runtime/tilebc_runtime/perf/static.py", False),     # ptxas's facts, for the emulator's counts
    ("tilebc/cli.py", False),
    ("tilebc/interp/machine.py", False),
    ("tilebc/text/printer.py", False),
    ("runtime/tilebc_runtime/launch.py", False),
    ("runtime/tilebc_runtime/sim/machine.py", False),
])
def test_identity_follows_the_sources_that_shape_code(copied_tree, edited, changes_key):
    tree, before = copied_tree
    path = tree / edited
    original = path.read_bytes()
    try:
        path.write_bytes(original + b"\n# edited\n")
        after = _identity(tree)
    finally:
        path.write_bytes(original)
    assert before.startswith("tilebc-jit/") and (after != before) == changes_key, (before, after)


def _hashed_tilebc_modules():
    names = set()
    for name, _ in launch.codegen_source_files():
        if name.startswith("tilebc/"):  # a C source stands for its extension module
            module = name.rsplit(".", 1)[0].replace("/", ".")
            names.add(module[:-len(".__init__")] if module.endswith(".__init__") else module)
    return names


def test_the_jit_imports_no_unhashed_tilebc_module():
    """Lowering a spread of fixtures (every lowering module is loaded) imports only tilebc modules
    in the hash; a new import of another one must add it to TILEBC_CODEGEN_SOURCES."""
    fixtures = [FIXTURES / name / f"{name}-13.5.tilebc" for name in
                ("scalar_params", "la_histogram_u8", "cast_fp8", "ft_printf_formats", "atomics_float",
                 "ft_f64_math", "dm_bitonic_sort", "la_gemm_large_tile")]
    code = ("import sys\nfrom tilebc_runtime.compiler import compile\n"
            "from tilebc_runtime.lowering.families import load_all\nload_all()\n"
            f"for path in {[str(p) for p in fixtures]!r}:\n"
            "    compile(path, arch='sm_90', emit='ptx')\n"
            "print('\\n'.join(sorted(m for m in sys.modules if m == 'tilebc' or m.startswith('tilebc.'))))")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'runtime'}"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          check=True)
    imported = set(done.stdout.split())
    assert "tilebc.binary.reader" in imported
    assert imported <= _hashed_tilebc_modules(), sorted(imported - _hashed_tilebc_modules())


def test_hashed_runtime_files_import_only_hashed_tilebc_modules():
    """The same, statically, for imports inside functions (which a run may not reach)."""
    hashed = _hashed_tilebc_modules()
    for name, path in launch.codegen_source_files():
        if not name.startswith("tilebc_runtime/"):
            continue
        with open(path, encoding="utf-8") as source:
            tree = ast.parse(source.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                # `from tilebc.x import y`: y is a submodule, or a name defined in tilebc.x
                targets = [f"{node.module}.{alias.name}" if _is_module(f"{node.module}.{alias.name}")
                           else node.module for alias in node.names]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            for target in targets:
                if target.split(".")[0] == "tilebc" and target not in hashed:
                    pytest.fail(f"{name} imports {target}, which is not in TILEBC_CODEGEN_SOURCES")


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def test_identity_is_computed_once_per_process():
    assert launch.lowering_sources_hash() is launch.lowering_sources_hash()
    assert launch.JitBackend().identity().endswith("+" + launch.lowering_sources_hash()[:16])
    assert launch.JitBackend().identity().startswith("tilebc-jit/")
    assert tilebc.__version__  # part of the digest as before


def test_the_lowering_hash_is_kept_beside_the_sources(tmp_path, monkeypatch):
    """The first compile in any cache records the lowering hash beside the sources (as Python
    keeps bytecode there); the first compile in another cache takes it from there instead of
    reading the sources, while the sources' fingerprint holds. A stale, untrusted or unwritable
    record is not used, and -B / PYTHONDONTWRITEBYTECODE writes none."""
    from tilebc_runtime.cache import CubinCache
    beside = tmp_path / "pycache" / "lowering-hash.json"
    monkeypatch.setattr(launch, "hash_memo_beside_sources", lambda: str(beside))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    true_hash = launch.lowering_sources_hash()

    def prime_in_a_new_cache(name):
        """Prime as a new process would (no facts in memory); whether it read the sources."""
        monkeypatch.setattr(launch, "_MEMO", {})
        launch.lowering_sources_hash.cache_clear()
        cache = CubinCache(tmp_path / name)
        launch.prime_from_memo(cache)
        hashed = launch.lowering_sources_hash.cache_info().currsize == 1
        assert launch.JitBackend().identity().endswith("+" + true_hash[:16])
        (record,) = [value for key, value in
                     json.loads((tmp_path / name / "v1" / "memo.json").read_text()).items()
                     if key.startswith("lowering_hash ")]
        assert record["value"] == true_hash  # the cache's own memo has it either way
        return hashed

    def recorded():
        return list(json.loads(beside.read_text()).values())

    try:
        assert prime_in_a_new_cache("first") is True
        ((fingerprint, value),) = [(r["fingerprint"], r["value"]) for r in recorded()]
        assert value == true_hash and oct(beside.stat().st_mode & 0o777) == "0o600"
        assert prime_in_a_new_cache("second") is False  # taken from beside the sources

        name = next(iter(json.loads(beside.read_text())))
        beside.write_text(json.dumps({name: {"fingerprint": "stale", "value": "0" * 64}}))
        # temp files of writers killed before their rename: removed an hour on, not before
        old, recent = beside.parent / ".tmp-0a.json", beside.parent / ".tmp-0b.json"
        old.write_text("{")
        recent.write_text("{")
        os.utime(old, (os.path.getmtime(old) - 7200,) * 2)
        assert prime_in_a_new_cache("stale") is True  # a record of other sources: not used
        assert recorded() == [{"fingerprint": fingerprint, "value": true_hash}]
        assert not old.exists() and recent.exists()
        recent.unlink()

        beside.chmod(0o620)  # another user could have written it: not trusted
        assert prime_in_a_new_cache("untrusted") is True

        beside.unlink()
        monkeypatch.setattr(sys, "dont_write_bytecode", True)
        assert prime_in_a_new_cache("no-bytecode") is True
        assert not beside.exists()

        monkeypatch.setattr(sys, "dont_write_bytecode", False)
        beside.parent.rmdir()
        beside.parent.write_text("a file where the folder would be")  # cannot be written
        assert prime_in_a_new_cache("unwritable") is True
    finally:
        launch.lowering_sources_hash.cache_clear()


def test_a_source_removed_after_the_walk_breaks_no_compile(tmp_path, monkeypatch):
    """An edit under way (a file gone between the walk and the reads): fingerprinted and hashed
    as absent, so the key differs from the full tree's and the next process walks again."""
    present = tmp_path / "a.py"
    present.write_text("x = 1\n")
    files = [("tilebc/a.py", str(present)), ("tilebc/gone.py", str(tmp_path / "gone.py"))]
    monkeypatch.setattr(launch, "codegen_source_files", lambda: files)
    launch.lowering_sources_hash.cache_clear()
    try:
        with_gap = launch.lowering_sources_hash()
        assert launch._sources_fingerprint(files) != launch._sources_fingerprint(files[:1])
        launch.lowering_sources_hash.cache_clear()
        monkeypatch.setattr(launch, "codegen_source_files", lambda: files[:1])
        assert launch.lowering_sources_hash() != with_gap
    finally:
        launch.lowering_sources_hash.cache_clear()


def test_an_installer_records_the_hash_even_where_no_bytecode_is_written(tmp_path, monkeypatch):
    """scripts/setup.sh records the hash as it compiles the bytecode caches, PYTHONDONTWRITEBYTECODE
    or not; a later new process's prime takes it from there."""
    from tilebc_runtime.cache import CubinCache
    beside = tmp_path / "pycache" / "lowering-hash.json"
    monkeypatch.setattr(launch, "hash_memo_beside_sources", lambda: str(beside))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    try:
        assert launch.record_hash_beside_sources() == str(beside)
        (record,) = json.loads(beside.read_text()).values()
        assert record["value"] == launch.lowering_sources_hash()
        monkeypatch.setattr(launch, "_MEMO", {})
        launch.lowering_sources_hash.cache_clear()
        launch.prime_from_memo(CubinCache(tmp_path / "cache"))
        assert launch.lowering_sources_hash.cache_info().currsize == 0  # read, not hashed
        beside.unlink()
        beside.parent.rmdir()
        beside.parent.write_text("a file where the folder would be")
        assert launch.record_hash_beside_sources() is None
    finally:
        launch.lowering_sources_hash.cache_clear()


def test_the_memo_beside_the_sources_follows_pycache_prefix(monkeypatch):
    monkeypatch.setattr(sys, "pycache_prefix", None)
    package = Path(os.path.abspath(launch.__file__)).parent
    assert Path(launch.hash_memo_beside_sources()) == package / "__pycache__" / "lowering-hash.json"
    monkeypatch.setattr(sys, "pycache_prefix", "/var/pyc")
    assert Path(launch.hash_memo_beside_sources()) == \
        Path("/var/pyc", *package.parts[1:], "lowering-hash.json")


def test_the_source_walk_enters_only_folders_that_may_hold_hashed_files(tmp_path):
    """tilebc: listed files, and everything under a listed folder however deep; unlisted folders
    are not walked. The runtime: everything but the _NOT_LOWERING entries. Hidden files and
    folders (an editor's lock) and dangling links are no sources."""
    for name in ("api.py", "cli.py", "ir/types.py", "ir/deeper/still/x.py", "ir/deeper/y.h",
                 "text/printer.py", "text/inner/z.py", "ir/__pycache__/types.py", "ir/notes.txt"):
        (tmp_path / "tilebc" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "tilebc" / name).write_text("")
    # an editor's lock file (a dangling link), any dangling link, a hidden folder: no sources
    (tmp_path / "tilebc" / "ir" / ".#types.py").symlink_to(tmp_path / "nowhere")
    (tmp_path / "tilebc" / "ir" / "gone.py").symlink_to(tmp_path / "nowhere")
    (tmp_path / "tilebc" / "ir" / ".checkpoints").mkdir()
    (tmp_path / "tilebc" / "ir" / ".checkpoints" / "types.py").write_text("")
    found = [name for name, _ in launch._package_sources(
        str(tmp_path / "tilebc"), launch._matcher(launch.TILEBC_CODEGEN_SOURCES),
        launch._tilebc_folder)]
    assert found == ["api.py", "ir/deeper/still/x.py", "ir/deeper/y.h", "ir/types.py"]
    for name in ("compiler.py", "sim/run.py", "sim/deep/a.py", "perf/static.py", "perf/model.py",
                 "lowering/sub/b.c"):
        (tmp_path / "rt" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "rt" / name).write_text("")
    hidden = launch._hidden_in_runtime
    found = [name for name, _ in launch._package_sources(
        str(tmp_path / "rt"), lambda name: not hidden(name), lambda folder: not hidden(folder))]
    assert found == ["compiler.py", "lowering/sub/b.c", "perf/model.py"]
