"""Redundant predicate removal on a kernel's PTX body (after lowering, before declarations).

Bounds checks reach the PTX more than once: a view load tests each index with `x >= 0 && x < N`
and again as `x <u N`, and several ops compare the same operands. Within a basic block (no label
in between, so the earlier instruction dominates the later) this pass
  - gives an identical `setp` (same comparison, type and operand values) the earlier result,
  - treats an `and.pred` chain as the set of its leaf predicates: one whose set a known predicate
    already has is that predicate, and leaves implied by others are dropped (`x <u N` by
    `x >=s 0 && x <s N` always; the reverse when N is a non-negative constant), the rest rebuilt
    from the largest known subsets (new conjunctions are shared by later taps),
  - drops `or.pred` of a predicate with one it already contains,
then removes the predicate instructions nobody reads. Only registers written once (PtxWriter never
reuses one, except the `mov`-written loop and branch results, which are left alone) and
unguarded definitions take part, so every rewrite is an identity of values. If the rebuilt body
would have more instructions than before, only the plain duplicate removal is kept.
"""
from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from itertools import chain, islice

from .ptx import REG_PREFIX

_REG = re.compile(r"%[a-z]+\d+")
_INSTR = re.compile(r"^\t(@!?%\w+\s+)?([a-z][\w.]*)\s*(.*);$")
_SETP = re.compile(r"^setp\.(eq|ne|lt|le|gt|ge)\.([su](?:16|32|64)|b(?:16|32|64))$")
_IMM = re.compile(r"^-?(?:0[xX][0-9a-fA-F]+|\d+)$")
_MOV_IMM = re.compile(r"^mov\.[bsu](?:16|32|64)$")
# the predicate instructions the pass rewrites or drops (with `setp.`)
_PREDICATE_LOGIC = ("and.pred", "or.pred")

Leaves = frozenset[str]
_RECENT = 64


@lru_cache(maxsize=1 << 16)  # every step of the pass reads the same lines
def _parse(line: str):
    """(guard, opcode, operands) of an instruction line, or None for labels and scoped blocks."""
    if "\n" in line or "{" in line or "}" in line:
        return None
    match = _INSTR.match(line)
    if match is None:
        return None
    guard, opcode, rest = match.groups()
    return guard, opcode, tuple(part.strip() for part in rest.split(",")) if rest else ()


def _written(body: list[str], preamble: list[str]) -> dict[str, int]:
    """How often each register is the destination (first operand) of a line; anything not
    parsed as a plain instruction counts every register in it as written (conservative)."""
    return Counter(chain.from_iterable(map(_writes, preamble + body)))


@lru_cache(maxsize=1 << 16)  # both passes and _written read the same lines
def _writes(line: str) -> tuple[str, ...]:
    """The registers a line counts as writing (see _written)."""
    parsed = _parse(line)
    if parsed is None:
        return tuple(_REG.findall(line))
    return tuple(_REG.findall(parsed[2][0])) if parsed[2] else ()


@lru_cache(maxsize=1 << 16)
def _registers(line: str) -> tuple[str, ...]:
    """Every register a line names."""
    return tuple(_REG.findall(line))


@lru_cache(maxsize=1 << 16)
def _reads(line: str) -> tuple[str, ...]:
    """The registers a line reads: its guard and every operand but the destination (a store's
    address too); every register of a line not parsed as a plain instruction."""
    parsed = _parse(line)
    if parsed is None:
        return tuple(_REG.findall(line))
    guard, _, operands = parsed
    names = _REG.findall(guard or "")
    for position, part in enumerate(operands):
        if position or part.startswith("["):  # a store's address is read
            names += _REG.findall(part)
    return tuple(names)


@lru_cache(maxsize=1 << 16)
def _immediate_move(line: str) -> tuple[str, int] | None:
    """(destination, value) of an unguarded `mov` of an immediate, else None."""
    if not line.startswith("\tmov."):
        return None
    parsed = _parse(line)
    if parsed and parsed[0] is None and _MOV_IMM.match(parsed[1]) and len(parsed[2]) == 2:
        dest, source = parsed[2]
        if _IMM.match(source):
            return dest, int(source, 0)
    return None


def _constants(lines: list[str], once) -> dict[str, int]:
    """Registers written once by a `mov` of an immediate: their value."""
    return {dest: value for dest, value in filter(None, map(_immediate_move, lines))
            if once(dest)}


def simplify_predicates(w) -> None:
    """Rewrite w.body / w.origin in place (w: the kernel's PtxWriter)."""
    if not any("setp." in line or ".pred" in line for line in w.body):
        return
    body, sources, predicates = _simplified(tuple(w.body), tuple(w.preamble),
                                            w.counts["pred"])
    w.body = list(body)
    w.origin = [w.origin[index] for index in sources]
    w.counts["pred"] = predicates


# The pass is a function of the text alone, and a kernel lowered for several architectures (an AOT
# fatbin, the tests' lowering of every fixture for each) mostly gets the same text, one arch after
# another: the last few results are kept (a few, since each holds a whole kernel body twice).
@lru_cache(maxsize=4)
def _simplified(body: tuple[str, ...], preamble: tuple[str, ...],
                predicates: int) -> tuple[tuple[str, ...], tuple[int, ...], int]:
    """(new body, the index in `body` of the line each new line comes from, predicate registers
    then declared) of a body whose writer had declared `predicates` predicate registers."""
    text = _Text(body, preamble, predicates)
    full = _Pass(text, rebuild=True)
    lines, sources = full.run()
    # only instruction lines are added or removed, so this compares instruction counts
    if full.added > full.removed:
        lines, sources = _Pass(text, rebuild=False).run()
    return tuple(lines), tuple(sources), text.predicates


class _Text:
    """What the pass reads of a PtxWriter, with each body line's index as its origin, and the
    writer's numbering of new predicate registers."""

    def __init__(self, body, preamble, predicates: int):
        self.body = list(body)
        self.preamble = list(preamble)
        self.origin = range(len(body))
        self.predicates = predicates

    def reg(self, cls: str) -> str:  # the pass makes predicate registers only
        number = self.predicates
        self.predicates += 1
        return f"{REG_PREFIX[cls]}{number}"


class _Pass:
    def __init__(self, w, rebuild: bool):
        self.w = w
        self.rebuild = rebuild
        self.counts = _written(w.body, w.preamble)
        self.constant = _constants(w.preamble + w.body, self._once)
        self.added = self.removed = 0  # instruction lines
        # indices in the output of unguarded predicate instructions (what _drop_unread may drop)
        self.droppable: list[int] = []

    def _once(self, name: str) -> bool:
        return self.counts.get(name, 0) == 1

    def _value(self, operand: str):
        """A canonical form of a setp operand, or None when its value may change."""
        if _IMM.match(operand):
            return int(operand, 0)
        if operand in self.constant:
            return self.constant[operand]
        if _REG.fullmatch(operand) and (self._once(operand) or operand.startswith("%tid")):
            return operand
        return None

    def run(self) -> tuple[list[str], list[object]]:
        rename: dict[str, str] = {}
        out: list[str] = []
        out_origin: list[object] = []
        droppable = self.droppable
        self._reset()
        for line, op in zip(self.w.body, self.w.origin):
            parsed = _parse(line)
            if parsed is None:
                self._reset()  # a label, or a scoped block: knowledge stops here
                out.append(line)
                out_origin.append(op)
                continue
            # renamed registers are predicates: a line without one needs no substitution
            if rename and "%p" in line and any(name in rename for name in _registers(line)):
                line = _REG.sub(lambda m: rename.get(m.group(0), m.group(0)), line)
                parsed = _parse(line)
            guard, opcode, operands = parsed
            if guard is not None or not operands:
                out.append(line)
                out_origin.append(op)
                continue
            is_setp = opcode.startswith("setp.")
            if not is_setp and opcode not in _PREDICATE_LOGIC:
                out.append(line)
                out_origin.append(op)
                continue
            dest = operands[0]
            if len(operands) == 3 and dest.startswith("%p") and self._once(dest):
                if is_setp:
                    same = self._setp(dest, opcode, operands[1], operands[2])
                elif opcode == "and.pred":
                    same = self._and(dest, operands[1], operands[2], out, out_origin, op)
                    if same is not None and not isinstance(same, str):
                        line = f"\tand.pred {dest}, {same[0]}, {same[1]};"
                        same = None
                else:
                    same = self._or(dest, operands[1], operands[2])
                if same is not None:
                    rename[dest] = same
                    self.removed += 1
                    continue
            droppable.append(len(out))
            out.append(line)
            out_origin.append(op)
        return self._drop_unread(out, out_origin)

    def _reset(self) -> None:
        self.setps: dict[tuple, str] = {}
        self.atoms: dict[str, tuple] = {}  # predicate -> (cmp, type, a, b) of its setp
        self.ands: dict[str, Leaves] = {}  # predicate -> its leaves, for conjunctions here
        self.by_leaves: dict[Leaves, str] = {}
        self.ors: dict[str, Leaves] = {}

    # ---------------------------------------------------------------- setp
    def _setp(self, dest, opcode, a, b) -> str | None:
        match = _SETP.match(opcode)
        va, vb = self._value(a), self._value(b)
        if match is None or va is None or vb is None:
            return None
        key = (match.group(1), match.group(2), va, vb)
        if key in self.setps:
            return self.setps[key]
        self.setps[key] = dest
        self.atoms[dest] = key
        return None

    # ---------------------------------------------------------------- and / or
    def _leaves(self, pred: str) -> Leaves | None:
        if pred in self.ands:
            return self.ands[pred]
        if _REG.fullmatch(pred) and pred.startswith("%p") and self._once(pred):
            return frozenset([pred])
        return None

    def _and(self, dest, a, b, out, out_origin, op):
        """A register equal to dest, a new operand pair for it, or None (unchanged)."""
        la, lb = self._leaves(a), self._leaves(b)
        if la is None or lb is None:
            return None
        leaves = la | lb
        if la >= lb:
            return a
        if lb >= la:
            return b
        reduced = self._reduce(leaves)
        known = self.by_leaves.get(reduced)
        if known is not None:
            return known
        if len(reduced) == 1:
            return next(iter(reduced))
        self._record(dest, reduced)
        if not self.rebuild or reduced == leaves:
            return None
        x = self._largest(reduced)
        y = self._build(reduced - self.ands.get(x, frozenset([x])), out, out_origin, op)
        return x, y

    def _record(self, dest: str, leaves: Leaves) -> None:
        self.ands[dest] = leaves
        self.by_leaves.setdefault(leaves, dest)

    def _largest(self, leaves: Leaves) -> str:
        """The known predicate whose leaves are the largest proper subset of `leaves`."""
        best, size = None, 0
        # the recent conjunctions only: a tap reuses its neighbours', and the scan stays linear
        for have in islice(reversed(self.by_leaves), _RECENT):
            if have < leaves and len(have) > size:
                best, size = have, len(have)
        return self.by_leaves[best] if best is not None else sorted(leaves)[0]

    def _build(self, leaves: Leaves, out, out_origin, op) -> str:
        """A predicate equal to the conjunction of `leaves`, emitting and.pred where needed."""
        if len(leaves) == 1:
            return next(iter(leaves))
        if leaves in self.by_leaves:
            return self.by_leaves[leaves]
        x = self._largest(leaves)
        y = self._build(leaves - self.ands.get(x, frozenset([x])), out, out_origin, op)
        dest = self.w.reg("pred")
        self.counts[dest] = 1
        self.droppable.append(len(out))
        self.added += 1
        out.append(f"\tand.pred {dest}, {x}, {y};")
        out_origin.append(op)
        self._record(dest, leaves)
        return dest

    def _reduce(self, leaves: Leaves) -> Leaves:
        """`leaves` less those the others imply, unsigned bounds first."""
        current = set(leaves)
        for leaf in sorted(leaves, key=lambda p: self.atoms.get(p, ("",) * 2)[1][:1] != "u"):
            rest = current - {leaf}
            if leaf in self.atoms and self._implied(self.atoms[leaf], rest):
                current = rest
        return frozenset(current)

    def _implied(self, atom, others) -> bool:
        cmp, kind, x, n = atom
        if cmp not in ("lt", "le") or kind[0] not in "su":
            return False
        width = kind[1:]
        facts = {self.atoms[p] for p in others if p in self.atoms}
        nonneg = {("ge", "s" + width, x, 0), ("gt", "s" + width, x, -1)}
        if kind[0] == "u":  # 0 <= x <s N  =>  x <u N
            return bool(nonneg & facts) and (cmp, "s" + width, x, n) in facts
        # x <u N with N a constant in [0, 2^(w-1)): x >=s 0 and x <s N
        if not (isinstance(n, int) and 0 <= n < 1 << (int(width) - 1)):
            return False
        return (cmp, "u" + width, x, n) in facts

    def _or(self, dest, a, b) -> str | None:
        if self._leaves(a) is None or self._leaves(b) is None:
            return None
        la = self.ors.get(a, frozenset([a]))
        lb = self.ors.get(b, frozenset([b]))
        if la >= lb:
            return a
        if lb >= la:
            return b
        self.ors[dest] = la | lb
        return None

    def _drop_unread(self, body, origin):
        """Remove unguarded setp/and.pred/or.pred whose single-written destination nobody
        reads; backwards, so a chain that only fed a removed line goes too. Only the lines
        run() recorded in self.droppable can go, so only they are visited."""
        lines = self.w.preamble + body
        if all(_parse(body[index])[2][0].startswith("%p") for index in self.droppable):
            # only the reads of the droppable lines' destinations matter: when those are all
            # %p registers, the lines without "%p" add nothing to them
            lines = [line for line in lines if "%p" in line]
        reads = Counter(chain.from_iterable(map(_reads, lines)))
        dropped = set()
        for index in reversed(self.droppable):
            dest = _parse(body[index])[2][0]
            if self._once(dest) and not reads.get(dest):
                dropped.add(index)
                for name in _reads(body[index]):
                    reads[name] -= 1
        if not dropped:
            return body, origin
        self.removed += len(dropped)
        return ([line for index, line in enumerate(body) if index not in dropped],
                [op for index, op in enumerate(origin) if index not in dropped])
