"""The lowering package's modules import one another without a cycle (imports inside functions
included): op-family modules share helpers through lowering/common.py and the leaf modules, the
registry imports no family (lowering/families.py does), and nothing a family imports imports a
family back."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tilebc_runtime" / "lowering"


def _graph():
    modules = {path.stem for path in PACKAGE.glob("*.py")}
    graph = {}
    for path in PACKAGE.glob("*.py"):
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    edges.add(node.module.split(".")[0])
                else:  # from . import a, b
                    edges.update(alias.name for alias in node.names)
        graph[path.stem] = edges & modules
    # families.py imports the family modules by name (importlib), which the walk above misses
    from tilebc_runtime.lowering import families
    graph["families"] |= {*families.ALWAYS, *families.ON_DEMAND}
    return graph


def _cycle(graph):
    """One import cycle as a list of modules, or None."""
    state, path = {}, []

    def visit(module):
        state[module] = "open"
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                return path[path.index(target):] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        state[module] = "done"
        path.pop()
        return None
    for module in sorted(graph):
        if module not in state:
            found = visit(module)
            if found:
                return found
    return None


def test_lowering_imports_have_no_cycle():
    graph = _graph()
    assert {"lowerer", "registry", "common", "families", "memory"} <= set(graph)
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_families_share_helpers_only_through_common():
    graph = _graph()
    from tilebc_runtime.lowering.families import ALWAYS, ON_DEMAND
    families = {*ALWAYS, *ON_DEMAND}
    assert "matmul" in families and "memory" in families
    # atomics and the mma's cp.async staging reuse memory's view addressing; no other family
    # imports a family (a consumer takes a producer's value through registry.DEFERRALS)
    crossing = {(a, b) for a in families for b in graph[a] & families} \
        - {("atomics", "memory"), ("matmul", "memory")}
    assert not crossing
