"""The runtime package's modules import one another in one direction only, function-level
imports included (tests/test_layers.py's reader; the emulator and the lowering have their own,
stricter tests). Modules read from runtime/ are named `runtime.tilebc_runtime...`; absolute
imports name `tilebc_runtime...`: both are mapped to the import name."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from test_layers import cycles, import_graph  # noqa: E402

PACKAGE = ROOT / "runtime" / "tilebc_runtime"


def runtime_graph():
    def name(module: str) -> str:
        return module[len("runtime."):] if module.startswith("runtime.tilebc_runtime") else module
    graph = {name(module): {name(t) for t in targets}
             for module, targets in import_graph(PACKAGE).items()}
    # (`from tilebc_runtime import x` counts as an import of the package itself: stricter)
    return graph


def test_the_graph_reads_absolute_and_function_level_imports():
    graph = runtime_graph()
    assert "tilebc_runtime.compiler" in graph["tilebc_runtime"]  # inside compile()'s body
    assert "tilebc_runtime._version" in graph["tilebc_runtime.launch"]
    assert len(graph) > 50


def test_no_import_cycle_in_the_runtime_package():
    graph = runtime_graph()
    assert cycles(graph, set(graph)) == []
