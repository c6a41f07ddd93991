"""One source file spells out the op mnemonics: tilebc/ops/table.py.

Rule. In the Python sources of tilebc/, runtime/tilebc_runtime/, scripts/ and fuzz/, a string
constant equal to an op mnemonic (or an alias of one) is an op reference where it can name an op:
  * compared: an operand of a comparison (==, !=, in, is, ...), or an element of a tuple, list or
    set literal that is one, or a `case` value;
  * a key: of a dict literal, a subscript, or `.get` / `.pop` / `.setdefault`;
  * passed: a call argument, positional or keyword, or a parameter's default;
  * named or chosen: the value assigned to a name, or returned by a function that also returns an
    op's `.name` / `.mnemonic`; through `x if c else y` and `or` / `and`, the position is theirs.
Not an op reference, so not counted:
  * a key of an op's operands or attributes (`<x>.operands[...]`, `<x>.attrs.get(...)`,
    `"..." in <x>.attrs`): operand and attribute names;
  * a key of a record: a dict literal, or a mapping subscripted in the same file, that also has a
    string key naming no op (fields of a cache entry, a location), not a registry keyed by op;
  * an argument in a slot of a word-taking function: the same position (or keyword) of a call to
    a function of that name is given, somewhere in the file, a string naming no op (operand names
    of the verifier's constraints, the parser's keywords), or the function is getattr / hasattr /
    setattr / delattr (Python attribute names) or a PTX writer's `label` (label prefixes);
  * anything else: an element of a word list that is not compared (`__slots__`, keyword
    vocabularies), text in a message, a function's only kind of return value.
References are allowed only in tilebc/ops/table.py, and where the table checks the name when the
module loads: a positional argument of a registration call (`implements`, `refuse`, `lowers`,
`defers`, `batched`) or a key of the dict given to `by_mnemonic` (tilebc/ops/table.py). The PTX emulator
(runtime/tilebc_runtime/sim/) and the model's readers of PTX text (perf/ptx_*.py) are outside the
rule: their strings are PTX instruction names and state spaces, some of which are also Tile IR op
names (sqrt, sin, global, ...).
"""
import ast
from collections import defaultdict
from pathlib import Path

from tilebc.ops.table import MNEMONIC_ALIASES, OPS_BY_MNEMONIC

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("tilebc", "runtime/tilebc_runtime", "scripts", "fuzz")
EXEMPT = ("tilebc/ops/table.py", "runtime/tilebc_runtime/sim/", "runtime/tilebc_runtime/perf/ptx_")
REGISTRATIONS = {"implements", "refuse", "lowers", "batched", "defers"}
NAMES = set(OPS_BY_MNEMONIC) | set(MNEMONIC_ALIASES)
SINKS = {"getattr", "hasattr", "setattr", "delattr", "label"}
KEY_METHODS = {"get", "pop", "setdefault"}
OP_NAME_ATTRS = {"name", "mnemonic"}
OPERAND_MAPS = {"operands", "attrs"}


def _callee(call: ast.Call):
    func = call.func
    return func.id if isinstance(func, ast.Name) else \
        func.attr if isinstance(func, ast.Attribute) else None


def _is_str(node) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


class _File:
    """One parsed file: parents, registration-allowed constants, and which mappings are records."""

    def __init__(self, tree: ast.AST):
        self.parent = {}
        self.allowed = set()
        keys = defaultdict(set)  # mapping source text -> string keys it is indexed by
        slots = defaultdict(set)  # (callee, position or keyword) -> strings passed there
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parent[id(child)] = node
            mapping, key = self._keyed(node)
            if mapping is not None and _is_str(key):
                keys[ast.unparse(mapping)].add(key.value)
            if isinstance(node, ast.Call):
                name = _callee(node)
                for slot, arg in self._slots(node):
                    if _is_str(arg):
                        slots[slot].add(arg.value)
                if name in REGISTRATIONS:
                    self.allowed.update(id(arg) for arg in node.args)
                elif name == "by_mnemonic" and node.args and isinstance(node.args[0], ast.Dict):
                    self.allowed.update(id(key) for key in node.args[0].keys)
        self.records = {text for text, names in keys.items() if names - NAMES}
        self.word_slots = {slot for slot, names in slots.items() if names - NAMES}

    @staticmethod
    def _slots(call: ast.Call):
        name = _callee(call)
        yield from (((name, i), arg) for i, arg in enumerate(call.args))
        yield from (((name, kw.arg), kw.value) for kw in call.keywords)

    def _passed(self, call: ast.Call, node) -> bool:
        """Whether `node`, an argument of `call`, is passed where an op name may be expected."""
        if _callee(call) in SINKS:
            return False
        return not any(arg is node and slot in self.word_slots for slot, arg in self._slots(call))

    @staticmethod
    def _keyed(node):
        """(mapping, key) when `node` indexes a mapping by a key, else (None, None)."""
        if isinstance(node, ast.Subscript):
            return node.value, node.slice
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in KEY_METHODS and node.args):
            return node.func.value, node.args[0]
        return None, None

    def _names_operands(self, mapping) -> bool:
        return ((isinstance(mapping, ast.Attribute) and mapping.attr in OPERAND_MAPS)
                or ast.unparse(mapping) in self.records)

    def _returns_op_name(self, node) -> bool:
        while node is not None and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node = self.parent.get(id(node))
        return node is not None and any(
            isinstance(ret, ast.Return) and isinstance(ret.value, ast.Attribute)
            and ret.value.attr in OP_NAME_ATTRS for ret in ast.walk(node))

    def names_op(self, node) -> bool:
        """Whether the string constant `node` sits where it can name an op (module docstring)."""
        parent = self.parent.get(id(node))
        while (isinstance(parent, (ast.IfExp, ast.BoolOp))
               and node is not getattr(parent, "test", None)):
            node, parent = parent, self.parent.get(id(parent))
        if isinstance(parent, (ast.Tuple, ast.List, ast.Set)):
            outer = self.parent.get(id(parent))
            return isinstance(outer, ast.Compare) and not self._compares_operand_names(outer)
        if isinstance(parent, ast.Compare):
            return not self._compares_operand_names(parent)
        if isinstance(parent, ast.MatchValue):
            return True
        if isinstance(parent, ast.Dict):
            return node in parent.keys and not any(
                _is_str(key) and key.value not in NAMES for key in parent.keys)
        mapping, key = self._keyed(parent)
        if key is node:
            return not self._names_operands(mapping)
        if isinstance(parent, ast.Call):
            return self._passed(parent, node)
        if isinstance(parent, ast.keyword):
            return self._passed(self.parent.get(id(parent)), parent.value)
        if isinstance(parent, ast.arguments):
            return True
        if isinstance(parent, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
            return node is parent.value
        if isinstance(parent, ast.Return):
            return self._returns_op_name(parent)
        return False

    def _compares_operand_names(self, compare: ast.Compare) -> bool:
        """`"name" in <x>.operands`: a test for an operand or attribute name."""
        return any(isinstance(op, (ast.In, ast.NotIn)) and self._names_operands(right)
                   for op, right in zip(compare.ops, compare.comparators))


def spellings(path: Path):
    """(line, col, name) of each op reference in `path` outside a registration."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    scope = _File(tree)
    return [(node.lineno, node.col_offset, node.value) for node in ast.walk(tree)
            if _is_str(node) and node.value in NAMES and id(node) not in scope.allowed
            and scope.names_op(node)]


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
    found = [f"{path}:{line}:{col + 1}: {name!r}" for path, hits in scan().items()
             for line, col, name in hits]
    assert not found, ("op mnemonics spelled outside tilebc/ops/table.py (use an OpSpec fact, a "
                       "registration, or by_mnemonic):\n" + "\n".join(found))


def _scan_source(tmp_path, text: str):
    source = tmp_path / "example.py"
    source.write_text(text, encoding="utf-8")
    return sorted(spellings(source))


def test_the_scan_finds_a_spelling_and_honours_registrations(tmp_path):
    assert _scan_source(tmp_path, '@implements("addf")\ndef f(op):\n    return op.name == "mulf"\n'
                        'T = by_mnemonic({"subf": 1}, "t")\nU = {"divf": 2}\n') \
        == [(3, 22, "mulf"), (5, 5, "divf")]


def test_the_scan_finds_op_references_in_every_position(tmp_path):
    found = _scan_source(tmp_path, "\n".join([
        'if op.spec.mnemonic in ("for", "loop"):',                    # compared, in a tuple
        '    spec = OPS_BY_MNEMONIC["return"]',                       # key of an op registry
        'check_hints(ctx, function, "entry", hints)',                 # passed
        'def hints(owner="entry"): pass',                             # a default
        'where = parent.name if parent is not None else "module"',    # chosen for an op name
        'KIND = "cat"',                                               # a named constant
        'if (kind := "pack") is not None: pass',                      # named in an expression
        'def node_name(node):',
        '    if node is None:',
        '        return "global"',                                    # returned beside names
        '    return node.spec.mnemonic',
        'match op.name:',
        '    case "iota": pass',
    ]) + "\n")
    assert [name for _, _, name in found] == ["for", "loop", "return", "entry", "entry", "module",
                                              "cat", "pack", "global", "iota"]


def test_the_scan_ignores_operand_attribute_and_field_names(tmp_path):
    # shapes from the tree: operand/attribute names, record fields, Python attributes, words
    assert _scan_source(tmp_path, "\n".join([
        'offsets = lw.get(op.operands["offset"])',
        'dense = owner.attrs.get("constant")',
        'has = "offset" in op.operands',
        'row = {"entry": self.entry, "arch": self.arch}',
        'where["offset"] = op.offset',
        'where["line"] = op.line',
        '__slots__ = ("reader", "ops", "offset")',
        'offset = getattr(node, "offset", None)',
        'head, end = w.label("loop"), w.label("endloop")',
        'top = w.label("reduce")',
        'constraints = (tile_of("offset", elements=INT), same_shape("ptr", "offset"))',
        'more = (tile_of("source", "result"), same_shape("source", "exponent"))',
        'constant = c.accept("constant")',
        'attributes = c.accept("attributes")',
        'flags = ["constant"] if item.constant else []',
        'raise ValueError(f"bad {x} in entry")',
        'def space(self):',
        '    return "" if self.generic else "global"',
    ]) + "\n") == []
