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
from functools import lru_cache
from itertools import islice

_REG = re.compile(r"%[a-z]+\d+")
_INSTR = re.compile(r"^\t(@!?%\w+\s+)?([a-z][\w.]*)\s*(.*);$")
_SETP = re.compile(r"^setp\.(eq|ne|lt|le|gt|ge)\.([su](?:16|32|64)|b(?:16|32|64))$")
_IMM = re.compile(r"^-?(?:0[xX][0-9a-fA-F]+|\d+)$")
_MOV_IMM = re.compile(r"^mov\.[bsu](?:16|32|64)$")

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
    counts: dict[str, int] = {}
    for line in preamble + body:
        for name in _writes(line):
            counts[name] = counts.get(name, 0) + 1
    return counts


@lru_cache(maxsize=1 << 16)  # both passes and _written read the same lines
def _writes(line: str) -> tuple[str, ...]:
    """The registers a line counts as writing (see _written)."""
    parsed = _parse(line)
    if parsed is None:
        return tuple(_REG.findall(line))
    return tuple(_REG.findall(parsed[2][0])) if parsed[2] else ()


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


def _constants(lines: list[str], once) -> dict[str, int]:
    """Registers written once by a `mov` of an immediate: their value."""
    values = {}
    for line in lines:
        parsed = _parse(line)
        if parsed and parsed[0] is None and _MOV_IMM.match(parsed[1]) and len(parsed[2]) == 2:
            dest, source = parsed[2]
            if once(dest) and _IMM.match(source):
                values[dest] = int(source, 0)
    return values


def simplify_predicates(w) -> None:
    """Rewrite w.body / w.origin in place (w: the kernel's PtxWriter)."""
    if not any("setp." in line or ".pred" in line for line in w.body):
        return
    before = _count(w.body)
    full = _Pass(w, rebuild=True).run()
    if _count(full[0]) <= before:
        w.body, w.origin = full
        return
    w.body, w.origin = _Pass(w, rebuild=False).run()


def _count(body: list[str]) -> int:
    return len(body) - list(map(_parse, body)).count(None)


class _Pass:
    def __init__(self, w, rebuild: bool):
        self.w = w
        self.rebuild = rebuild
        self.counts = _written(w.body, w.preamble)
        self.constant = _constants(w.preamble + w.body, self._once)

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
        body, origin = list(self.w.body), list(self.w.origin)
        rename: dict[str, str] = {}
        out: list[str] = []
        out_origin: list[object] = []
        self._reset()
        for line, op in zip(body, origin):
            parsed = _parse(line)
            if parsed is None:
                self._reset()  # a label, or a scoped block: knowledge stops here
                out.append(line)
                out_origin.append(op)
                continue
            if rename:
                line = _REG.sub(lambda m: rename.get(m.group(0), m.group(0)), line)
                parsed = _parse(line)
            guard, opcode, operands = parsed
            dest = operands[0] if operands else None
            plain = guard is None and dest is not None and dest.startswith("%p") and self._once(dest)
            if plain and opcode.startswith("setp.") and len(operands) == 3:
                same = self._setp(dest, opcode, operands[1], operands[2])
                if same is not None:
                    rename[dest] = same
                    continue
            elif plain and opcode == "and.pred" and len(operands) == 3:
                replacement = self._and(dest, operands[1], operands[2], out, out_origin, op)
                if isinstance(replacement, str):
                    rename[dest] = replacement
                    continue
                if replacement is not None:
                    line = f"\tand.pred {dest}, {replacement[0]}, {replacement[1]};"
            elif plain and opcode == "or.pred" and len(operands) == 3:
                same = self._or(dest, operands[1], operands[2])
                if same is not None:
                    rename[dest] = same
                    continue
            out.append(line)
            out_origin.append(op)
        return _drop_unread(out, out_origin, self.w.preamble, self._once)

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


def _drop_unread(body, origin, preamble, once):
    """Remove unguarded setp/and.pred/or.pred whose single-written destination nobody reads;
    backwards, so a chain that only fed a removed line goes too."""
    reads: dict[str, int] = {}
    for line in preamble + body:
        for name in _reads(line):
            reads[name] = reads.get(name, 0) + 1
    keep = [True] * len(body)
    for index in range(len(body) - 1, -1, -1):
        parsed = _parse(body[index])
        if (parsed is not None and parsed[0] is None and parsed[2]
                and (parsed[1].startswith("setp.") or parsed[1] in ("and.pred", "or.pred"))
                and once(parsed[2][0]) and not reads.get(parsed[2][0])):
            keep[index] = False
            for name in _reads(body[index]):
                reads[name] -= 1
    return ([line for line, kept in zip(body, keep) if kept],
            [op for op, kept in zip(origin, keep) if kept])
