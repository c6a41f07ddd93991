"""The PTX emulator's modules import one another in one direction only: the syntax tree, dtypes
and the instruction registry at the bottom, the semantics modules registering into the registry,
the machine reading it, and the package importing the semantics modules. The graph is read from
the source with `ast` (tests/test_layers.py's reader), so an import inside a function counts."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from test_layers import cycles, import_graph  # noqa: E402

SIM = ROOT / "runtime" / "tilebc_runtime" / "sim"
PREFIX = "runtime.tilebc_runtime.sim"


def test_the_graph_reads_the_emulator():
    assert f"{PREFIX}.registry" in import_graph(SIM)[f"{PREFIX}.machine"]
    assert f"{PREFIX}.isa_sm90" in import_graph(SIM)[PREFIX]  # the package imports the semantics modules
    assert f"{PREFIX}.inline" in import_graph(SIM)[f"{PREFIX}.parser"]


def test_no_import_cycle_inside_the_emulator():
    members = {name for name in import_graph(SIM) if name.startswith(PREFIX)}
    assert len(members) > 15
    assert cycles(import_graph(SIM), members) == []


def test_the_registry_and_syntax_tree_import_no_semantics():
    for base in ("registry", "syntax", "dtypes"):
        inside = {t for t in import_graph(SIM)[f"{PREFIX}.{base}"] if t.startswith(PREFIX)}
        assert inside <= {f"{PREFIX}.{name}" for name in ("fp", "dtypes", "syntax", "errors")}, \
            base
