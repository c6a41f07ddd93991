"""Value forwarding and dead-op removal before lowering.

Shape ops that only move elements cost a shuffle or a shared-memory round trip each, and cuTile
code often undoes them: permute(permute(x)) with inverse permutations, or an extract that takes
back one operand of a cat. `forwarding` maps such results to the value they equal, and `dead_ops`
finds the side-effect-free ops no live op needs once uses are forwarded; the Lowerer skips both.
"""
from __future__ import annotations


from tilebc.ir.module import Op, Value
from tilebc.ir.types import TileType, TokenType
from tilebc.ops.enums import MemoryOrderingSemantics, Signedness
from tilebc.ops.spec import Effects
from tilebc.ops.table import by_mnemonic

from .folding import constant_array, uniform_int


def forwarding(lw, ops: list[Op]) -> dict[Value, Value]:
    """result -> the earlier value it is equal to (element for element, same type); `ops`: the
    function's ops in pre-order."""
    forward: dict[Value, Value] = {}

    def resolve(value: Value) -> Value:
        while value in forward:
            value = forward[value]
        return value

    for op in ops:
        if not op.results or not isinstance(op.results[0].type, TileType):
            continue
        result = op.results[0]
        forwarder = _FORWARDERS.get(op.name)
        target = forwarder(lw, op, resolve) if forwarder is not None else None
        if target is not None and target.type == result.type:
            forward[result] = target
    return {value: resolve(value) for value in forward}


def _undone_permute(lw, op: Op, resolve):
    """The source when permute(...) composes to the identity (possibly through a permute)."""
    source = resolve(op.operand_values[0])
    perm = list(op.attrs["permutation"])
    if perm == list(range(len(perm))):
        return source
    inner = source.owner
    if isinstance(inner, Op) and inner.spec is op.spec:  # a permute too
        first = list(inner.attrs["permutation"])
        # result dim d is source dim perm[d], which is the inner source's dim first[perm[d]]
        if [first[p] for p in perm] == list(range(len(perm))):
            return resolve(inner.operand_values[0])
    return None


def _extracted_operand(lw, op: Op, resolve):
    """For extract: the whole source where the window is the whole source (whatever the
    indices say: only 0 is in bounds), or, with compile-time indices, the cat operand that
    exactly fills the window."""
    source = resolve(op.operands["source"])
    if list(source.type.shape) == list(op.results[0].type.shape):
        return source
    indices = []
    for value in op.operands["indices"]:
        array = constant_array(lw, value)
        if array is None or array.size != 1:
            return None
        indices.append(int(array.flat[0]))
    shape = list(op.results[0].type.shape)
    starts = [i * s for i, s in zip(indices, shape)]
    if list(source.type.shape) == shape and not any(starts):
        return source
    cat = source.owner
    if not (isinstance(cat, Op) and _FORWARD_ROLES.get(cat.name) == "join"):
        return None
    dim = cat.attrs["dim"]
    lhs, rhs = cat.operand_values
    split = lhs.type.shape[dim]
    for operand, begin in ((lhs, 0), (rhs, split)):
        expected = [0] * len(shape)
        expected[dim] = begin
        if list(operand.type.shape) == shape and starts == expected:
            return resolve(operand)
    return None


# The orders between two integers a comparison holds for: "<", "=", ">" of (lhs, rhs).
_ORDERS = {"equal": {"="}, "not_equal": {"<", ">"}, "less_than": {"<"},
           "less_than_or_equal": {"<", "="}, "greater_than": {">"},
           "greater_than_or_equal": {">", "="}}
_SWAPPED = {"<": ">", ">": "<", "=": "="}


def _comparison(op, resolve):
    """(lhs, rhs, orders, signed) of an integer comparison, or None."""
    if not isinstance(op, Op) or _FORWARD_ROLES.get(op.name) != "compare":
        return None
    lhs, rhs = (resolve(v) for v in op.operand_values)
    predicate = op.attrs["comparison_predicate"]
    orders = _ORDERS[predicate.name.lower()]
    signed = op.attrs["signedness"] is not Signedness.UNSIGNED
    return lhs, rhs, set(orders), signed


def _implies(known, other):
    """True when `known` (a comparison, or its negation) makes `other` true, False when it makes
    it false, None when it does not tell. Both are (lhs, rhs, orders, signed)."""
    lhs, rhs, orders, signed = known
    o_lhs, o_rhs, o_orders, o_signed = other
    if (o_lhs, o_rhs) == (rhs, lhs) and (o_lhs, o_rhs) != (lhs, rhs):
        o_orders = {_SWAPPED[o] for o in o_orders}
    elif (o_lhs, o_rhs) != (lhs, rhs):
        return None
    if signed != o_signed:  # only equality means the same in both orders
        if orders == {"="}:
            return "=" in o_orders
        if o_orders == {"="} and "=" not in orders:
            return False
        if o_orders == {"<", ">"} and "=" not in orders:
            return True
        return None
    if orders <= o_orders:
        return True
    if not orders & o_orders:
        return False
    return None


def _chosen_select(lw, op: Op, resolve):
    """What select(c, x, y) equals: x and y followed through selects whose condition c (or its
    negation) decides, then x when both are the same value, or the one of the compared values
    that both sides equal (select(a != b, a, b) is a; select(a == b, a, b) is b)."""
    condition, on_true, on_false = (resolve(v) for v in op.operand_values)
    known = _comparison(condition.owner, resolve)
    if known is None:
        return on_true if on_true is on_false else None
    lhs, rhs, orders, signed = known
    negated = (lhs, rhs, {"<", "=", ">"} - orders, signed)

    def follow(value, fact):
        for _ in range(32):
            inner = value.owner
            if not isinstance(inner, Op) or inner.spec is not op.spec:
                return value
            decided = None
            inner_known = _comparison(resolve(inner.operand_values[0]).owner, resolve)
            if inner_known is not None:
                decided = _implies(fact, inner_known)
            if decided is None:
                return value
            value = resolve(inner.operand_values[1 if decided else 2])
        return value
    on_true, on_false = follow(on_true, known), follow(on_false, negated)
    if on_true is on_false:
        return on_true
    if {on_true, on_false} == {lhs, rhs}:
        if orders == {"="}:
            return on_false
        if orders == {"<", ">"}:
            return on_true
    return None


# Effects (op table) of ops that may go when nothing uses their results: none, or none on memory
# (assume), or a scratch allocation nobody reads.
_DROPPABLE = (Effects.NONE, Effects.UNDECLARED, Effects.ALLOC)


def _removable(op: Op) -> bool:
    """No effect besides its results, which are tiles (tokens and views are kept for the
    lowering's bookkeeping); no regions, not a terminator. A weak load is removable too: it
    only reads, and an op ordered after it uses its token (which keeps it)."""
    if _FORWARD_ROLES.get(op.name) == "read" and not op.regions and op.attrs.get(
            "memory_ordering_semantics") in (None, MemoryOrderingSemantics.WEAK):
        return True
    if not op.results or op.regions or op.spec.terminator or op.spec.effects not in _DROPPABLE:
        return False
    for result in op.results:  # tiles only (a token is no tile)
        if not isinstance(result.type, TileType) or isinstance(result.type, TokenType):
            return False
    return True


def dead_ops(ops: list[Op], forward: dict[Value, Value], reads=None) -> set[Op]:
    """Of a function's `ops`, the removable ones whose results no live op uses (uses read
    through `forward`), plus every forwarded op (its uses read the forwarded value). `reads`:
    op -> the values it reads instead of its operands (an op lowered from other values, see
    floor_mods)."""
    reads = reads or {}
    forwarded = {op for op in ops if op.results and all(r in forward for r in op.results)} \
        if forward else set()
    live: set[Op] = set()
    work = [op for op in ops if not _removable(op) and op not in forwarded]
    while work:
        op = work.pop()
        if op in live:
            continue
        live.add(op)
        for value in reads.get(op, op.operand_values):
            owner = forward.get(value, value).owner
            if isinstance(owner, Op) and owner not in live:
                work.append(owner)
    return {op for op in ops if op not in live}


# Ops whose result may be forwarded to a value computed already: op -> that value or None.
_FORWARDERS = by_mnemonic({"permute": _undone_permute, "extract": _extracted_operand,
                           "select": _chosen_select}, "value forwarding")
_FORWARD_ROLES = by_mnemonic({"cmpi": "compare", "load_view_tko": "read",
                              "load_ptr_tko": "read", "cat": "join"}, "value forwarding")


# -- floor modulo by a power of two --------------------------------------------------------------
# cuTile lowers Python's x % d on integers to the truncating remainder and a sign fix-up:
#   r = remi(x, d) signed; select(((r < 0) xor (d < 0)) and (r != 0), r + d, r)
# For a constant d = 2^k > 0 that is x & (d - 1) in two's complement: one instruction instead of
# a dependent chain of about ten.
_FLOOR_MOD_ROLES = by_mnemonic({"remi": "rem", "addi": "add", "andi": "and", "xori": "xor",
                                "cmpi": "compare", "select": "choose"}, "floor-modulo rewrite")


def floor_mods(lw, ops: list[Op], forward: dict[Value, Value]) -> dict[Op, tuple]:
    """select op -> (x, d - 1) for every select computing x mod d (floor) as above, with d a
    constant power of two; tiles the chunked lowering may take (chunks.py) are left alone."""
    def resolve(value):
        return forward.get(value, value)

    def role(value, name):
        owner = resolve(value).owner
        return owner if isinstance(owner, Op) and _FLOOR_MOD_ROLES.get(owner.name) == name \
            else None

    def constant(value):
        return uniform_int(lw, resolve(value))

    def compares(value, lhs, rhs, orders):
        """The comparison `value` is lhs <orders> rhs (signed); a constant side given as int."""
        known = _comparison(role(value, "compare"), resolve)
        if known is None or not known[3] or known[2] != orders:
            return False
        return all(side == want if not isinstance(want, int) else constant(side) == want
                   for side, want in zip(known[:2], (lhs, rhs)))

    found = {}
    for op in ops:
        if _FLOOR_MOD_ROLES.get(op.name) != "choose":
            continue
        condition, on_true, on_false = (resolve(v) for v in op.operand_values)
        rem = role(on_false, "rem")
        result_type = op.results[0].type
        if rem is None or rem.attrs.get("signedness") is Signedness.UNSIGNED or \
                -(-result_type.num_elements // lw.T) > 32:
            continue
        x, divisor = rem.operand_values
        d = constant(divisor)
        add = role(on_true, "add")
        both = role(condition, "and")
        if d is None or d <= 0 or d & (d - 1) or add is None or both is None:
            continue
        r = resolve(on_false)
        if not any(resolve(a) is r and constant(b) == d
                   for a, b in (add.operand_values, add.operand_values[::-1])):
            continue

        def sign_fix(p, q):  # p: (r < 0) xor (d < 0), with d < 0 false; q: r != 0
            xor = role(p, "xor")
            if xor is None or not compares(q, r, 0, {"<", ">"}):
                return False
            a, b = xor.operand_values
            return any(compares(u, r, 0, {"<"}) and compares(v, d, 0, {"<"})
                       for u, v in ((a, b), (b, a)))
        p, q = both.operand_values
        if sign_fix(p, q) or sign_fix(q, p):
            found[op] = (x, d - 1)
    return found
