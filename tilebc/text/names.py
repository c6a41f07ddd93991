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
from typing import Dict, List, Optional, Tuple

from ..ir.module import Block, Function, Op, Value
from ..ir.types import ElementType
from ..numeric.dense import dense_is_splat, dense_is_uniform, storage_bytes
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


_CONSTANT_NAMES: Dict[tuple, str] = {}  # (type, data) -> name: constants repeat across kernels


def _constant_name(op: Op) -> str:
    dense = op.attrs["value"]
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


def suggested_names(op: Op, names: "FunctionNames") -> List[Optional[str]]:
    """The names op suggests for its results (None: no suggestion), as getAsmResultNames would."""
    spec = op.spec
    suggestion: List[Optional[str]] = [None] * len(op.results)
    if not op.results:
        return suggestion
    if _auto_named(op):
        return [r.name for r in spec.results]
    if spec.asm_name == "@constant":
        suggestion[0] = _constant_name(op)
    elif spec.asm_name == "@assume":
        producer = op.operands["value"].owner
        name = spec.asm_name[1:]  # "@assume": named after the op, or after what it assumes
        if isinstance(producer, Op) and _names_imply_interface(producer):
            name = f"{name}_" + (suggested_names(producer, names)[op.operands["value"].index] or "")
        suggestion[0] = name
    elif spec.asm_name:
        suggestion[0] = spec.asm_name
    return suggestion


def block_arg_names(op: Op, region_index: int, block: Block) -> List[Optional[str]]:
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


class _Scope:
    __slots__ = ("names", "parent")

    def __init__(self, parent: Optional["_Scope"]):
        self.names = set()
        self.parent = parent

    def __contains__(self, name: str) -> bool:
        scope = self
        while scope is not None:
            if name in scope.names:
                return True
            scope = scope.parent
        return False


class FunctionNames:
    """Text names of every value in one function: `names[id(value)]` is the text after `%`."""

    def __init__(self, function: Function):
        self.text: Dict[int, str] = {}          # id(value) -> "name" or "N" (result-group heads)
        self.groups: Dict[int, List[int]] = {}  # id(op) -> sorted result-group starts
        self.next_value = 0
        self.next_argument = 0
        self.next_conflict = 0
        self.refs: Dict[int, str] = {}  # id(value) -> its use text, built on first use
        top = _Scope(None)
        # The entry body is numbered like the region of a top-level op.
        pending: List[Tuple[List[Block], object, int, Tuple[int, int, int], _Scope]] = [
            ([function.body], None, 0, (0, 0, 0), top)]
        while pending:
            blocks, owner, region_index, counters, parent = pending.pop()
            self.next_value, self.next_argument, self.next_conflict = counters
            scope = _Scope(parent)
            for block_index, block in enumerate(blocks):
                self._number_block(block, owner, region_index, block_index == 0, scope)
            counters = (self.next_value, self.next_argument, self.next_conflict)
            for block in blocks:
                for op in block.ops:
                    for index, region in enumerate(op.regions):
                        pending.append((region.blocks, op, index, counters, scope))

    def _unique(self, name: str, scope: _Scope) -> str:
        name = _sanitize(name)
        if name in scope:
            while True:
                probe = f"{name}_{self.next_conflict}"
                self.next_conflict += 1
                if probe not in scope:
                    name = probe
                    break
        scope.names.add(name)
        return name

    def _set(self, value: Value, name: Optional[str], scope: _Scope) -> None:
        if not name:
            self.text[id(value)] = str(self.next_value)
            self.next_value += 1
        else:
            self.text[id(value)] = self._unique(name, scope)

    def _number_block(self, block: Block, owner, region_index: int, entry: bool,
                      scope: _Scope) -> None:
        given = block_arg_names(owner, region_index, block) if isinstance(owner, Op) \
            else [None] * len(block.args)
        for arg, name in zip(block.args, given):
            if name:
                self._set(arg, name, scope)
        for arg, name in zip(block.args, given):
            if name:
                continue
            if entry:
                self._set(arg, f"arg{self.next_argument}", scope)
                self.next_argument += 1
            else:
                self._set(arg, None, scope)
        for op in block.ops:
            self._number_op(op, scope)

    def _number_op(self, op: Op, scope: _Scope) -> None:
        results = op.results
        if not results:
            return
        spec = op.spec
        if spec.asm_name is None and (len(spec.results) < 2
                                      or any(r.variadic for r in spec.results)):
            # no suggested names (suggested_names gives only None): one numbered group
            self.text[id(results[0])] = str(self.next_value)
            self.next_value += 1
            return
        groups = [0]
        for index, name in enumerate(suggested_names(op, self)):
            if name is not None:
                self._set(op.results[index], name, scope)
                if index:
                    groups.append(index)
        if id(op.results[0]) not in self.text:
            self.text[id(op.results[0])] = str(self.next_value)
            self.next_value += 1
        if len(groups) > 1:
            self.groups[id(op)] = sorted(groups)

    # ---- printing ------------------------------------------------------------------------------

    def result_groups(self, op: Op) -> List[Tuple[int, int]]:
        """(first result, count) of each printed result group."""
        starts = self.groups.get(id(op), [0])
        ends = starts[1:] + [len(op.results)]
        return [(s, e - s) for s, e in zip(starts, ends)]

    def ref(self, value: Value) -> str:
        """`%name`, `%N` or `%name#k` for a use of `value`."""
        text = self.refs.get(id(value))
        if text is None:
            text = self.refs[id(value)] = self._ref(value)
        return text

    def _ref(self, value: Value) -> str:
        owner = value.owner
        if isinstance(owner, Op) and len(owner.results) > 1:
            start, count = 0, len(owner.results)
            for group_start, group_count in self.result_groups(owner):
                if group_start <= value.index < group_start + group_count:
                    start, count = group_start, group_count
            head = self.text[id(owner.results[start])]
            if count == 1:
                return "%" + head
            return f"%{head}#{value.index - start}"
        return "%" + self.text[id(value)]
