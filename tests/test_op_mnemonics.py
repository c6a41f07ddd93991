"""One source file spells out the op mnemonics: tilebc/ops/table.py.

Rule. In the Python sources of tilebc/, runtime/tilebc_runtime/, scripts/ and fuzz/, a string
constant equal to an op mnemonic (or an alias of one) is allowed only
  * in tilebc/ops/table.py, or
  * where the table checks the name when the module loads: a positional argument of a registration
    call (`implements`, `refuse`, `lowers`, `batched`) or a key of the dict given to
    `by_mnemonic` (tilebc/ops/table.py).
The PTX emulator (runtime/tilebc_runtime/sim/) is outside the rule: its strings are PTX instruction
names, some of which are also Tile IR op names (sqrt, sin, ...).

Spellings older than the rule are counted per file in BASELINE; a file may only go down. The test
names each spelling of a file that went up, and asks for the baseline to be lowered when one went
down, so the count only shrinks.
"""
import ast
from pathlib import Path

from tilebc.ops.table import MNEMONIC_ALIASES, OPS_BY_MNEMONIC

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("tilebc", "runtime/tilebc_runtime", "scripts", "fuzz")
EXEMPT = ("tilebc/ops/table.py", "runtime/tilebc_runtime/sim/")
REGISTRATIONS = {"implements", "refuse", "lowers", "batched"}
NAMES = set(OPS_BY_MNEMONIC) | set(MNEMONIC_ALIASES)

BASELINE = {
    "fuzz/jit.py": 1,
    "fuzz/run_shared.py": 1,
    "fuzz/text.py": 11,
    "runtime/tilebc_runtime/args.py": 3,
    "runtime/tilebc_runtime/cache.py": 1,
    "runtime/tilebc_runtime/cache_cli.py": 3,
    "runtime/tilebc_runtime/lowering/control_flow.py": 5,
    "runtime/tilebc_runtime/lowering/lowerer.py": 2,
    "runtime/tilebc_runtime/lowering/memory.py": 1,
    "runtime/tilebc_runtime/lowering/ptx.py": 7,
    "runtime/tilebc_runtime/lowering/reductions.py": 1,
    "runtime/tilebc_runtime/lowering/simplify.py": 1,
    "tilebc/binary/lazyloc.py": 1,
    "tilebc/cli.py": 1,
    "tilebc/errors.py": 2,
    "tilebc/interp/fusion.py": 1,
    "tilebc/ir/module.py": 1,
    "tilebc/text/names.py": 2,
    "tilebc/text/parser.py": 10,
    "tilebc/text/printer.py": 4,
    "tilebc/verify/diagnostics.py": 1,
    "tilebc/verify/opchecks.py": 2,
    "tilebc/verify/optable.py": 2,
    "tilebc/verify/structure.py": 6,
}


def spellings(path: Path):
    """(line, col, name) of each string constant in `path` that spells a mnemonic outside a
    registration."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    allowed = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else \
            func.attr if isinstance(func, ast.Attribute) else None
        if name in REGISTRATIONS:
            allowed.update(id(arg) for arg in node.args)
        elif name == "by_mnemonic" and node.args and isinstance(node.args[0], ast.Dict):
            allowed.update(id(key) for key in node.args[0].keys)
    return [(node.lineno, node.col_offset, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value in NAMES and id(node) not in allowed]


def scan():
    found = {}
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative == EXEMPT[0] or relative.startswith(EXEMPT[1:]):
                continue
            hits = spellings(path)
            if hits:
                found[relative] = hits
    return found


def test_mnemonics_are_spelled_only_in_the_table():
    found = scan()
    grown = [f"{path}:{line}:{col + 1}: {name!r}" for path, hits in found.items()
             if len(hits) > BASELINE.get(path, 0) for line, col, name in hits]
    assert not grown, ("op mnemonics spelled outside tilebc/ops/table.py (use an OpSpec fact, a "
                       "registration, or by_mnemonic):\n" + "\n".join(grown))
    shrunk = {path: len(found.get(path, ())) for path, count in BASELINE.items()
              if len(found.get(path, ())) < count}
    assert not shrunk, f"fewer spellings than BASELINE says; lower it to {shrunk}"


def test_the_scan_finds_a_spelling_and_honours_registrations(tmp_path):
    source = tmp_path / "example.py"
    source.write_text('@implements("addf")\ndef f(op):\n    return op.name == "mulf"\n'
                      'T = by_mnemonic({"subf": 1}, "t")\nU = {"divf": 2}\n', encoding="utf-8")
    assert sorted(spellings(source)) == [(3, 22, "mulf"), (5, 5, "divf")]
