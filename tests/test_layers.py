"""The package layers point one way (README, "Imports"): the format package `tilebc` never imports
the runtime, and the packages cut apart so far hold no import cycle. The graph is read from the
source with `ast`, so an import inside a function counts as much as one at the top of a file."""
import ast
import functools
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Set

import pytest

from conftest import ROOT

PACKAGE = ROOT / "tilebc"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name an ImportFrom names (`from ..x import y` inside tilebc.a.b -> tilebc.x)."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base.pop()
    if node.level > 1:
        base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


@functools.lru_cache(maxsize=None)  # read when a test asks, not at collection in every worker
def import_graph(root: Path = PACKAGE) -> Dict[str, Set[str]]:
    """Module -> the modules it imports anywhere in its source (top level, functions, branches).
    `from package import name` counts as an import of `package.name` when that is a module, else
    of `package`. A submodule's implicit run of its parents' `__init__` is left out: counted, every
    package whose `__init__` re-exports a submodule would be a cycle with it."""
    sources = {module_name(path): path for path in sorted(root.rglob("*.py"))}
    graph: Dict[str, Set[str]] = {}
    for module, path in sources.items():
        is_package = path.name == "__init__.py"
        targets: Set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, is_package, node)
                names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in sources else base
                         for alias in node.names]
            else:
                continue
            targets.update(names)
        targets.discard(module)
        graph[module] = targets
    return graph


def cycles(graph: Dict[str, Set[str]], members: Set[str]) -> List[List[str]]:
    """The strongly connected components of more than one module among `members` (Tarjan)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []

    def visit(start: str) -> None:
        # iterative, so a deep chain of imports cannot hit Python's recursion limit
        work = [(start, iter(sorted(graph.get(start, ()) & members)))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ()) & members))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))

    for member in sorted(members):
        if member not in index:
            visit(member)
    return found


def test_graph_sees_function_level_imports():
    """The reader itself: a relative import inside a function is an edge."""
    assert "tilebc.verify" in import_graph()["tilebc.cli"]  # cmd_verify imports it in its body
    assert "tilebc.binary" in import_graph()["tilebc"]


def test_format_package_never_imports_the_runtime():
    offenders = {module: sorted(t for t in targets if t.split(".")[0] == "tilebc_runtime")
                 for module, targets in import_graph().items()}
    assert not {module: names for module, names in offenders.items() if names}


def test_no_import_cycle_in_the_format_package():
    """Among others: the command line and the interpreter's `run`, the interpreter's machine and
    batched runner, convert and numerics import each other in one direction only."""
    assert cycles(import_graph(), set(import_graph())) == []


def test_cycle_finder_reports_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph, set(graph)) == [["a", "b", "c"]]


# ---- the `tilebc` command finds other packages' commands through entry points ----------------


def _probe(code: str, env_path: str) -> str:
    """Run `code` in a fresh interpreter with `env_path` first on the import path."""
    import os
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([env_path, str(ROOT), str(ROOT / "runtime")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def runtime_distribution(directory: Path) -> Path:
    """A dist-info for tilebc-runtime whose entry points are the ones runtime/pyproject.toml
    declares: what `pip install ./runtime` writes (the tests see it whether or not the
    installed copy is current)."""
    import tomllib
    project = tomllib.loads((ROOT / "runtime" / "pyproject.toml").read_text())["project"]
    info = directory / f"tilebc_runtime-{project['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\n"
                                   f"Version: {project['version']}\n")
    sections = [f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in entries.items())
                for group, entries in project["entry-points"].items()]
    (info / "entry_points.txt").write_text("\n".join(sections))
    return directory


def test_runtime_declares_its_commands_and_demo_step():
    import tomllib
    groups = tomllib.loads((ROOT / "runtime" / "pyproject.toml").read_text())["project"][
        "entry-points"]
    from tilebc.cli import COMMAND_GROUP, DEMO_GROUP
    assert set(groups[COMMAND_GROUP]) == {"compile", "cache"}
    assert set(groups[DEMO_GROUP]) == {"jit"}


def test_text_tools_load_neither_the_runtime_nor_the_interpreter(tmp_path):
    """`import tilebc.cli`, then `dis`, `verify`, `info` and `asm` in one process, leave the
    runtime, the interpreter, cuda bindings, entry-point metadata, dataclasses (with inspect
    and ast, ~10 ms of a start), typing (~3 ms: annotations are never evaluated) and shutil
    (argparse's help width; with zlib, bz2 and lzma) unloaded, even with the runtime's entry
    points installed."""
    sample = next((ROOT / "fixtures" / "bytecode").glob("*/*-13.5.tilebc"))
    text, again = tmp_path / "k.mlir", tmp_path / "k.tilebc"
    commands = [["dis", str(sample), "-o", str(text)], ["verify", "-q", str(sample)],
                ["info", str(sample)], ["asm", str(text), "-o", str(again)],
                ["convert", str(sample), "--to", "13.3", "-o", str(tmp_path / "old.tilebc")]]
    out = _probe(
        "import contextlib, io, sys\nimport tilebc.cli\n"
        f"for argv in {commands!r}:\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        assert tilebc.cli.main(argv) == 0, argv\n"
        "print('\\n'.join(sorted(sys.modules)))", str(runtime_distribution(tmp_path / "site")))
    loaded = out.split()
    assert text.read_text().startswith("entry @") and again.read_bytes().startswith(b"\x7fTileIR")
    assert "tilebc.text.printer" in loaded and "tilebc.verify" in loaded  # the probe ran
    for prefix in ("tilebc_runtime", "tilebc.interp", "cuda", "importlib.metadata", "dataclasses",
                   "typing", "shutil"):
        assert not [name for name in loaded if name == prefix or name.startswith(prefix + ".")], \
            prefix


def _after_text_commands(sample, tmp_path, report: str) -> list[str]:
    """The words `report` prints in a new interpreter after `dis`, `verify` and `info` of
    `sample` ran there (their output swallowed without contextlib, which must stay unloaded)."""
    commands = [["dis", str(sample), "-o", str(tmp_path / "k.mlir")], ["verify", "-q", str(sample)],
                ["info", str(sample)]]
    return _probe("import io, sys\nimport tilebc.cli\n"
                  f"for argv in {commands!r}:\n"
                  "    shown, sys.stdout = sys.stdout, io.StringIO()\n"
                  "    try:\n"
                  "        assert tilebc.cli.main(argv) == 0, argv\n"
                  "    finally:\n"
                  "        sys.stdout = shown\n" + report, str(tmp_path)).split()


def test_numpy_loads_only_for_values(tmp_path):
    """A kernel without float constants is printed, verified and described without numpy."""
    sample = ROOT / "fixtures" / "bytecode" / "atomics_unsigned" / "atomics_unsigned-13.5.tilebc"
    report = "print('numpy' in sys.modules, 'tilebc.text.printer' in sys.modules)"
    assert _after_text_commands(sample, tmp_path, report) == ["False", "True"]


def test_dis_verify_and_info_leave_unneeded_work_undone(tmp_path):
    """What `dis`, `verify` and `info` never need stays unloaded or unbuilt, for their start-up:
    weakref.py (the IR takes weakref.ref from _weakref), contextlib (which `python -m` loads, but
    the installed `tilebc` command need not), the printer's location aliases (for -g only) and the
    verifier's table of every op's constraints (the verifier asks per op kind)."""
    sample = next((ROOT / "fixtures" / "bytecode").glob("*/*-13.5.tilebc"))
    report = ("import tilebc.verify.optable as optable\n"
              "print('weakref' in sys.modules, 'contextlib' in sys.modules,\n"
              "      'tilebc.text.debuginfo' in sys.modules, 'OP_CONSTRAINTS' in vars(optable))")
    assert _after_text_commands(sample, tmp_path, report) == ["False", "False", "False", "False"]


def test_help_and_unknown_commands_come_from_entry_points(tmp_path):
    """The real declarations of runtime/pyproject.toml, as pip installs them: help lists the
    runtime's commands, and `compile` parses with the runtime's own parser."""
    out = _probe("import sys, contextlib, io\nimport tilebc.cli as cli\n"
                 "text = io.StringIO()\n"
                 "with contextlib.redirect_stdout(text):\n"
                 "    try:\n        cli.main(['--help'])\n    except SystemExit:\n        pass\n"
                 "print(text.getvalue())\n"
                 "args = cli.build_parser('compile').parse_args(['compile', 'k.tilebc', '--emit', 'ptx'])\n"
                 "print(args.handler.__module__, 'tilebc_runtime.cli' in sys.modules)",
                 str(runtime_distribution(tmp_path / "site")))
    assert "compile" in out and "cache" in out and "run" in out
    assert out.splitlines()[-1] == "tilebc_runtime.cli True"


class _Entry:
    """Stands for an importlib.metadata.EntryPoint."""

    def __init__(self, name, value, loaded=None, error=None):
        self.name, self.value, self._loaded, self._error = name, value, loaded, error

    def load(self):
        if self._error:
            raise self._error
        return self._loaded


def _fake_group(monkeypatch, entries):
    import importlib.metadata
    from tilebc import cli
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group: [entry for entry in entries if group == "tilebc.commands"])
    # the command line's own reading of entry_points.txt, for a command it is asked to run
    monkeypatch.setattr(cli, "_named_plugin", lambda group, name: next(
        (entry.load() for entry in entries if entry.name == name and group == "tilebc.commands"),
        None))


def test_a_named_plugin_is_found_without_importlib_metadata(tmp_path):
    """`tilebc compile` reads the runtime's entry point from its dist-info directly (importing
    importlib.metadata is ~30 ms); an unknown name finds nothing."""
    site = str(runtime_distribution(tmp_path / "site"))
    out = _probe("import sys\nfrom tilebc import cli\n"
                 "found = cli._named_plugin(cli.COMMAND_GROUP, 'compile')\n"
                 "print(found.__module__, found.__name__)\n"
                 "print(cli._named_plugin(cli.COMMAND_GROUP, 'no-such-command'))\n"
                 "print('importlib.metadata' in sys.modules)", site)
    assert out.split("\n")[:3] == ["tilebc_runtime.cli add_compile_parser", "None", "False"]


def test_a_plugin_command_is_added_and_dispatched(monkeypatch, capsys):
    from tilebc import cli
    calls = []

    def add_hello(subparsers):
        parser = subparsers.add_parser("hello", help="say hello")
        parser.add_argument("who")
        parser.set_defaults(handler=lambda args: calls.append(args.who) or 0)

    _fake_group(monkeypatch, [_Entry("hello", "fake.plugin:add_hello", add_hello)])
    assert cli.main(["hello", "world"]) == 0 and calls == ["world"]
    assert "hello" not in cli.build_parser("dis")._subparsers._group_actions[0].choices


def test_a_broken_plugin_warns_and_the_rest_still_work(monkeypatch, capsys):
    from tilebc import cli
    _fake_group(monkeypatch, [_Entry("broken", "fake.plugin:add", error=ImportError("no module"))])
    choices = cli.build_parser()._subparsers._group_actions[0].choices
    assert "broken" not in choices and "dis" in choices
    assert "'broken' (fake.plugin:add) does not load: ImportError: no module" in \
        capsys.readouterr().err
    with pytest.raises(ImportError):  # asked for by name: the failure is the answer
        cli.build_parser("broken")


def test_without_plugins_an_unknown_command_names_the_runtime(monkeypatch, capsys):
    from tilebc import cli
    _fake_group(monkeypatch, [])
    with pytest.raises(SystemExit) as stop:
        cli.main(["compile", "k.tilebc"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "tilebc-runtime adds the commands compile and cache" in err
    assert "invalid choice: 'compile'" in err


def test_usage_errors_are_tilebc_errors():
    from tilebc.errors import TilebcError, UsageError
    from tilebc.outputs import UsageError as OutputsUsageError
    assert issubclass(UsageError, TilebcError) and OutputsUsageError is UsageError
    import tilebc_runtime.cli as runtime_cli
    assert runtime_cli.UsageError is UsageError
