"""SSA value names as MLIR's AsmPrinter assigns them (SSANameState), per function.

Rules reproduced here:
- a region is numbered completely (block arguments, then each op's results) before any region
  nested in it; nested regions start from the counters their parent region ended with, so sibling
  regions reuse the same numbers, and see the names of all enclosing regions;
- entry-block arguments without an op-given name are `argN` (a counter of its own);
- a suggested name already in use gets `_K` appended, K from one conflict counter shared by all
  names of the function;
- unnamed results take the next number; results an op leaves unnamed after a named one form a
  group printed `%name:count` and used as `%name#k`.
"""
from __future__ import annotations

from functools import lru_cache

from ..ir.module import Block, Function, Op, Value
from ..ir.attrs import DenseElementsAttr
from ..ir.types import ElementType, TileType
from ..numeric.dense import dense_is_splat, dense_is_uniform, storage_bytes
from .. import speedups
from .floats import constant_name_part


@lru_cache(maxsize=1 << 16)  # names repeat (cst_0_i32, loopIdx): each is worked out once
def _sanitize(name: str) -> str:
    out = []
    for ch in name:
        if ch.isalnum() or ch in "$._-":
            out.append(ch)
        elif ch == " ":
            out.append("_")
        else:
            out.append("%X" % ord(ch))
    text = "".join(out)
    return "_" + text if text[:1].isdigit() else text


def _names_imply_interface(op: Op) -> bool:
    """Whether the op offers names through MLIR's OpAsmOpInterface (matters for `assume_…`)."""
    return op.spec.asm_name is not None or _auto_named(op)


def _auto_named(op: Op) -> bool:
    results = op.spec.results
    return op.spec.asm_name is None and len(results) >= 2 and not any(r.variadic for r in results)


_CONSTANT_NAMES: dict[tuple, str] = {}  # (type, data) -> name: constants repeat across kernels


# id(attribute) -> (attribute, name): a decoded module shares one attribute among its equal
# constants, so most are found without hashing the type
_CONSTANT_BY_ID: dict[int, tuple] = {}


def _constant_name(op: Op) -> str:
    dense = op.attrs["value"]
    found = _CONSTANT_BY_ID.get(id(dense))
    if found is not None and found[0] is dense:
        return found[1]
    name = _constant_name_by_value(dense)
    if len(dense.data) <= 64:  # large ones are not kept alive
        if len(_CONSTANT_BY_ID) > 1 << 14:
            _CONSTANT_BY_ID.clear()
        _CONSTANT_BY_ID[id(dense)] = (dense, name)
    return name


def _constant_name_by_value(dense) -> str:
    data = dense.data
    if len(data) > 64:
        return _constant_name_of(dense)
    key = (dense.type, data)
    name = _CONSTANT_NAMES.get(key)
    if name is None:
        if len(_CONSTANT_NAMES) > 1 << 14:
            _CONSTANT_NAMES.clear()
        name = _CONSTANT_NAMES[key] = _constant_name_of(dense)
    return name


def _constant_name_of(dense) -> str:
    element = dense.type.element
    if isinstance(element, ElementType) and element.name == "i1":
        data = dense.data
        count = dense.type.num_elements
        bits = [(data[0] != 0) for _ in range(count)] if dense_is_splat(dense.type, data) \
            else [bool(data[i // 8] >> (i % 8) & 1) for i in range(count)]
        if all(bits):
            return "true"
        if not any(bits):
            return "false"
        return "cst_i1"
    name = "cst"
    if dense_is_uniform(dense.type, dense.data):  # tileirdisasm names equal elements as a splat
        raw = int.from_bytes(dense.data[:storage_bytes(element)], "little")
        if isinstance(element, ElementType) and element.is_float:
            part = constant_name_part(raw & ((1 << element.bits) - 1), element)
            if part is not None:
                name += "_" + part
        elif isinstance(element, ElementType):
            bits = element.bits
            raw &= (1 << bits) - 1
            name += "_" + str(raw - (1 << bits) if raw >> (bits - 1) else raw)
    return f"{name}_{element}"


def suggested_names(op: Op, names: FunctionNames) -> list[str | None]:
    """The names op suggests for its results (None: no suggestion), as getAsmResultNames would."""
    spec = op.spec
    suggestion: list[str | None] = [None] * len(op.results)
    if not op.results:
        return suggestion
    if _auto_named(op):
        return [r.name for r in spec.results]
    # IR the verifier refuses (a constant without its dense value, an `assume` of no single
    # value) gets no name from it: printing the op then says what is wrong
    if spec.asm_name == "@constant":
        dense = op.attrs.get("value")
        if isinstance(dense, DenseElementsAttr) and isinstance(dense.type, TileType):
            suggestion[0] = _constant_name(op)
    elif spec.asm_name == "@assume":
        value = op.operands.get("value")
        producer = value.owner if isinstance(value, Value) else None
        name = spec.asm_name[1:]  # "@assume": named after the op, or after what it assumes
        if isinstance(producer, Op) and _names_imply_interface(producer):
            given = names.suggestion(producer)
            part = given[value.index] if 0 <= value.index < len(given) else None
            name = f"{name}_" + (part or "")
        suggestion[0] = name
    elif spec.asm_name:
        suggestion[0] = spec.asm_name
    return suggestion


def block_arg_names(op: Op, region_index: int, block: Block) -> list[str | None]:
    rule = op.spec.asm_block_args
    args = block.args
    if rule == "induction":
        return ["loopIdx"] + [f"iterArg{i}" for i in range(len(args) - 1)]
    if rule == "pairs":
        names = []
        for i in range(len(args)):
            name = "reduce_lhs" if i % 2 == 0 else "reduce_rhs"
            if len(args) > 2:
                name += str(i // 2)
            names.append(name)
        return names
    return [None] * len(args)


_ARGUMENT_NAMES = tuple(f"arg{number}" for number in range(64))


class _Scope:
    __slots__ = ("names", "parent")

    def __init__(self, parent: _Scope | None):
        self.names = set()
        self.parent = parent

    def __contains__(self, name: str) -> bool:
        scope = self
        while scope is not None:
            if name in scope.names:
                return True
            scope = scope.parent
        return False


# result-naming rule of each op kind: id(spec) -> (spec, rule); the spec rides along so an id is
# never reused. Rules: None (no suggestion: one numbered group), "auto", "@constant", "@assume",
# or the fixed name
_RULES: dict[int, tuple] = {}


def _rule(spec):
    found = _RULES.get(id(spec))
    if found is not None and found[0] is spec:
        return found[1]
    if spec.asm_name is not None:
        rule = spec.asm_name
    elif len(spec.results) >= 2 and not any(r.variadic for r in spec.results):
        rule = "auto"
    else:
        rule = None
    _RULES[id(spec)] = (spec, rule)
    return rule


class FunctionNames:
    """Text names of every value in one function: `text[value]` is the text after `%` of each
    result-group head and argument, `refs[value]` the use text of every value (`%name#k`)."""

    def __init__(self, function: Function):
        self.text: dict[Value, str] = {}        # "name" or "N" (result-group heads, arguments)
        self.groups: dict[int, list[int]] = {}  # id(op) -> sorted result-group starts
        self.refs: dict[Value, str] = {}        # every value's use text
        self.ref = self.refs.__getitem__        # `%name`, `%N` or `%name#k` for a use of a value
        self._suggested: dict[int, list[str | None]] = {}  # id(op) -> suggested_names(op)
        self.next_value = 0
        self.next_argument = 0
        self.next_conflict = 0
        self.plain_arguments = False  # the entry's parameters named %arg0, %arg1, … in order
        top = _Scope(None)
        # The entry body is numbered like the region of a top-level op.
        pending: list[tuple[list[Block], object, int, tuple[int, int, int], _Scope]] = [
            ([function.body], None, 0, (0, 0, 0), top)]
        while pending:
            blocks, owner, region_index, counters, parent = pending.pop()
            self.next_value, self.next_argument, self.next_conflict = counters
            scope = _Scope(parent)
            nested: list[Op] = []
            for block_index, block in enumerate(blocks):
                self._number_block(block, owner, region_index, block_index == 0, scope, nested)
            counters = (self.next_value, self.next_argument, self.next_conflict)
            for op in nested:
                for index, region in enumerate(op.regions):
                    pending.append((region.blocks, op, index, counters, scope))

    def suggestion(self, op: Op) -> list[str | None]:
        """suggested_names(op), remembered for the ops numbered so far (`assume` asks again)."""
        found = self._suggested.get(id(op))
        return found if found is not None else suggested_names(op, self)

    def _unique(self, name: str, scope: _Scope) -> str:
        name = _sanitize(name)
        if name in scope:  # in use in this scope or an enclosing one
            name = self._renamed(name, scope)
        scope.names.add(name)
        return name

    def _renamed(self, name: str, scope: _Scope) -> str:
        """`name_K` for a name in use, K the function's next conflict number not in use either."""
        while True:
            probe = f"{name}_{self.next_conflict}"
            self.next_conflict += 1
            if probe not in scope:
                return probe

    def _set(self, value: Value, name: str | None, scope: _Scope) -> None:
        if not name:
            text = str(self.next_value)
            self.next_value += 1
        else:
            text = self._unique(name, scope)
        self.text[value] = text
        self.refs[value] = "%" + text

    def _number_block(self, block: Block, owner, region_index: int, entry: bool,
                      scope: _Scope, nested: list[Op]) -> None:
        args = block.args
        if args and owner is None and entry and not self.text:
            # a function's parameters, named first: `argN`, nothing in scope to clash with
            text, refs, names = self.text, self.refs, scope.names
            for number, arg in enumerate(args, self.next_argument):
                name = text[arg] = _ARGUMENT_NAMES[number] if number < len(_ARGUMENT_NAMES) \
                    else f"arg{number}"
                refs[arg] = "%" + name
                names.add(name)
            self.next_argument += len(args)
            self.plain_arguments = len(text) == len(args)  # no parameter listed twice
        elif args:
            given = block_arg_names(owner, region_index, block) if isinstance(owner, Op) \
                else [None] * len(args)
            for arg, name in zip(args, given):
                if name:
                    self._set(arg, name, scope)
            for arg, name in zip(args, given):
                if name:
                    continue
                if entry:
                    self._set(arg, f"arg{self.next_argument}", scope)
                    self.next_argument += 1
                else:
                    self._set(arg, None, scope)
        number_ops = speedups.number_ops
        if number_ops is not None:  # the same loop in C (tilebc/_printer.c)
            number_ops(self, block.ops, scope, nested, _RULES, _rule, _sanitize, suggested_names,
                       _CONSTANT_BY_ID, Op, Value)
            return
        text = self.text
        refs = self.refs
        rules = _RULES
        for op in block.ops:
            if op.regions:
                nested.append(op)
            results = op.results
            if not results:
                continue
            spec = op.spec
            found = rules.get(id(spec))
            rule = found[1] if found is not None and found[0] is spec else _rule(spec)
            if rule is None:  # no suggested names: one numbered group
                head = str(self.next_value)
                self.next_value += 1
                first = results[0]
                text[first] = head
                if len(results) == 1:
                    refs[first] = "%" + head
                else:
                    for result in results:
                        refs[result] = f"%{head}#{result.index}"
            elif rule and rule[0] != "@" and len(results) == 1:  # the op's one fixed name
                name = self._unique(rule, scope)
                first = results[0]
                text[first] = name
                refs[first] = "%" + name
            else:
                self._number_named(op, scope)

    def _number_named(self, op: Op, scope: _Scope) -> None:
        results = op.results
        groups = [0]
        suggestion = self._suggested[id(op)] = suggested_names(op, self)
        for index, name in enumerate(suggestion):
            if name is not None:
                self._set(results[index], name, scope)
                if index:
                    groups.append(index)
        if results[0] not in self.text:
            self._set(results[0], None, scope)
        if len(groups) > 1:
            self.groups[id(op)] = groups
        if len(results) > 1:
            self._group_refs(op, groups)

    def _group_refs(self, op: Op, starts: list[int]) -> None:
        """Use texts of a multi-result op's results: `%head` alone in its group, else `%head#k`."""
        results = op.results
        ends = starts[1:] + [len(results)]
        for start, end in zip(starts, ends):
            head = self.text[results[start]]
            if end - start == 1:
                self.refs[results[start]] = "%" + head
            else:
                for k in range(end - start):
                    self.refs[results[start + k]] = f"%{head}#{k}"

    # ---- printing ------------------------------------------------------------------------------

    def result_groups(self, op: Op) -> list[tuple[int, int]]:
        """(first result, count) of each printed result group."""
        starts = self.groups.get(id(op), [0])
        ends = starts[1:] + [len(op.results)]
        return [(s, e - s) for s, e in zip(starts, ends)]
