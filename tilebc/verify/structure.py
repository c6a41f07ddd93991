"""Module well-formedness (spec 6.2.5): items, symbols, SSA scoping, regions, terminators, entries,
plus the per-op checks every op shares (arity, attribute values, version availability). Per-op
typing rules come from `optable.OP_CONSTRAINTS`."""
from __future__ import annotations


from ..codecache import compiles_at_once
from ..ir.attrs import DenseElementsAttr, DictionaryAttr
from ..ir.module import Block, Function, Module, Op, Value
from ..ir.types import ElementType, PointerType, TileType, Type
from ..ops.spec import Arity, AttrKind, Effects, Exit, OpSpec
from ..ops.table import ENTRY_OP, OPS, OPS_BY_MNEMONIC
from ..version import ALL_VERSIONS, Version
from ..ir.location import DILoc
from .debuginfo import LINE_LIMIT, DebugInfoChecker
from .diagnostics import Collector
from .hints import HINTS_FOR, check_hints
from .optable import constraints_for
from .signature import check_function
from ..speedups import verify_ops
from .typesys import type_problems, type_since

_TERMINATOR_SPECS = tuple(reversed([spec for spec in OPS if spec.terminator]))  # newest first


def _terminators() -> dict[str, tuple[str, ...]]:
    """Which terminators may end a region of each parent ("entry" is a kernel body), from the op
    table's `ends` / `through_if`."""
    by_parent: dict[str, list[str]] = {}
    for spec in _TERMINATOR_SPECS:
        for parent in spec.ends:
            by_parent.setdefault(parent, []).append(spec.mnemonic)
    for passing in (spec.mnemonic for spec in OPS if spec.exits_pass):
        names = by_parent.setdefault(passing, [])
        names.extend(spec.mnemonic for spec in _TERMINATOR_SPECS
                     if spec.through_if and spec.mnemonic not in names)
    return {parent: tuple(names) for parent, names in by_parent.items()}


TERMINATORS = _terminators()
# Early exits look through enclosing `if`s for the op they leave.
EXIT_TARGETS = {spec.mnemonic: spec.ends for spec in _TERMINATOR_SPECS if spec.through_if}


class _SpecFacts:
    """What the shared checks need of one op spec, computed once."""

    __slots__ = ("enum_attrs", "required_attrs", "newer_attrs", "newer_operands", "fixed_results",
                 "constraints", "tail", "context_checks", "memoizable", "hints", "operand_names",
                 "symbol_ref", "regions", "in_context", "check", "spec", "uses")

    def __init__(self, spec: OpSpec):
        self.enum_attrs = tuple(a for a in spec.attrs if a.kind is AttrKind.ENUM)
        self.required_attrs = tuple(a.name for a in spec.attrs
                                    if not a.optional and a.kind is not AttrKind.UNIT)
        self.newer_attrs = tuple(a for a in spec.attrs if a.since > spec.since)
        self.newer_operands = tuple(o for o in spec.operands if o.since > spec.since)
        self.fixed_results = (None if any(r.variadic for r in spec.results)
                              else len(spec.results))
        constraints = constraints_for(spec) or ()
        # Constraints whose last part reads the op's context (constraints.context_tail) end the
        # list; their context parts run on every op, also where the verdict is reused.
        signature = len(constraints)
        while signature and getattr(constraints[signature - 1], "context", None) is not None:
            signature -= 1
        self.constraints = constraints[:signature]
        self.tail = constraints[signature:]
        self.context_checks = tuple(c.context for c in self.tail)
        # Verdicts of the signature checks (see Verifier.value_key) may be reused only when
        # every other constraint reads nothing but the op's own types and attributes.
        self.memoizable = not any(getattr(c, "context", None) is not None
                                  for c in self.constraints)
        self.hints = spec.mnemonic in HINTS_FOR
        self.operand_names = tuple(o.name for o in spec.operands)
        # a body op naming a module symbol (get_global): resolved against the module's globals
        self.symbol_ref = any(a.kind is AttrKind.SYMBOL for a in spec.attrs) and not spec.structural
        self.regions = spec.regions
        self.in_context = spec.terminator or self.symbol_ref  # checks that read enclosing ops
        # The fast path for this op kind (signature.py), when its verdicts may be reused: written
        # out once the kind has been met COMPILE_AFTER times (compiling costs more than checking
        # a few ops in full).
        self.spec = spec
        self.check = None
        self.uses = 0

    def fast_check(self, compile_after: int | None = None):
        """The op kind's fast path, compiled on the use after `compile_after` (COMPILE_AFTER by
        default); None before that and for kinds whose verdicts may not be reused."""
        check = self.check
        if check is None and self.memoizable:
            self.uses += 1
            if self.uses > (COMPILE_AFTER if compile_after is None else compile_after):
                check = self.check = check_function(self.spec, self, check_hints)
                spec = self.spec
                if _TABLE_BODY_SPECS.get(id(spec)) is spec:
                    _FAST_CHECKS[id(spec)] = check
                    if not (self.context_checks or self.in_context or spec.regions):
                        _PLAIN_CHECKS[id(spec)] = check
        return check


# How many ops of a kind are checked in full before its fast path is compiled (tests set 0).
COMPILE_AFTER = 8


# Body ops' facts by identity of their (immortal) table spec, built at first use: writing out and
# compiling every op kind's fast path up front costs more than verifying a small module.
_TABLE_BODY_SPECS = {id(spec): spec for spec in OPS_BY_MNEMONIC.values() if not spec.structural}
_BODY_FACTS: dict[int, _SpecFacts] = {}


# Facts of body ops added to the table after this module loaded (a test's extension of the table),
# keyed by the spec itself.
_LATE_FACTS: dict[OpSpec, _SpecFacts] = {}


def _facts(spec: OpSpec) -> _SpecFacts | None:
    """The facts of a body op's spec; None for a structural or unknown one."""
    key = id(spec)
    facts = _BODY_FACTS.get(key)
    if facts is not None:
        return facts
    if _TABLE_BODY_SPECS.get(key) is spec:
        facts = _BODY_FACTS[key] = _SpecFacts(spec)
        return facts
    return _late_facts(spec)


def _late_facts(spec: OpSpec) -> _SpecFacts | None:
    if spec.structural or OPS_BY_MNEMONIC.get(spec.mnemonic) is not spec:
        return None
    facts = _LATE_FACTS.get(spec)
    if facts is None:
        facts = _LATE_FACTS[spec] = _SpecFacts(spec)
    return facts


# id(spec) -> the compiled fast path of each table op kind (see _SpecFacts.fast_check)
_FAST_CHECKS: dict[int, object] = {}
# The same for kinds whose check reads only the op and its scope (no regions, context checks,
# symbols or terminators; hints depend on nothing but their value): the C loop
# (speedups.verify_ops) reuses their clean verdicts.
_PLAIN_CHECKS: dict[int, object] = {}


def _attr_token(value):
    """An attribute value as it enters a value-level signature key: its class rides along, so
    values that compare equal across classes (True == 1) never share a verdict."""
    if value.__class__ is tuple:
        return (tuple, tuple((item.__class__, item) for item in value))
    return (value.__class__, value)


_RESULTS = object()  # separates the attributes from the results in a signature key


def _type_list(types) -> str:
    return "(" + ", ".join(map(str, types)) + ")"


class Verifier:
    """One pass over a module; `ctx` collects what it finds."""

    def __init__(self, module: Module, ctx: Collector, fast: bool = True):
        self.module = module
        self.version: Version = module.version
        self.ctx = ctx
        self.globals = {}
        self.visible = set()      # values in scope at the current point
        self.defined = set()      # every value defined so far (single assignment)
        self.parents: list[Op] = []  # ops whose regions enclose the current point
        self.function: Function | None = None
        self.debug = DebugInfoChecker(ctx, self.version)
        self.entry_subprogram = None  # the current entry's DISubprogram; False: not checked
        # Fast path: ops of one kind with the same operand/result types and attributes get the
        # same verdict from the signature checks (arity, availability, result types, attributes,
        # constraints), so a clean verdict is computed once and reused. `fast=False` checks every
        # op in full (the reference the fast path is tested against).
        self.fast = fast
        self._clean_by_id: dict[tuple, bool] = {}     # keyed by ids of live objects of this module
        self._clean_by_value: dict[tuple, bool] = {}  # keyed by the types and attribute values
        self._clean_keys: dict[int, bytes] = {}  # the C loop's keys of ops checked clean, by number
        self._clean_types = set()                     # ids of types that passed type_ok
        self._clean_signatures = set()  # ids of entry function types whose parameters passed
        self._canonical: dict[object, object] = {}    # value -> first equal object seen
        self._canonical_ids: dict[int, int] = {}      # id(object) -> id of its canonical one
        self._effects: dict[int, Op | None] = {}   # id(op) -> an op with effects in it, or None
        self.compile_after = None  # COMPILE_AFTER, or 0 for a large module (run)

    # ---- module level --------------------------------------------------------------------------

    def run(self, entries: range | None = None) -> None:
        """Check the module: everything, or with `entries` the module-level rules and only the
        entries at those positions (a module whose entries share no values, as the decoder and
        the parser make them, passes whole when it passes in parts)."""
        module, ctx = self.module, self.ctx
        if self.version not in ALL_VERSIONS:
            ctx.report("version.module", None, f"bytecode version {self.version} is outside the "
                                               f"supported {ALL_VERSIONS[0]}-{ALL_VERSIONS[-1]}")
        # A module with no items is fine: tileiras compiles it (to a cubin with no kernels).
        seen = {}
        for item in list(module.globals) + list(module.functions):
            if not item.name:
                ctx.report("symbol.name", item, "symbol name must not be empty")
            elif item.name in seen:
                ctx.report("symbol.duplicate", item, f"symbol @{item.name} is already defined")
            else:
                seen[item.name] = item
        self.globals = {g.name: g for g in module.globals}
        for item in module.globals:
            self.global_(item)
        functions = module.functions
        if compiles_at_once(module):
            self.compile_after = 0
        for function in functions if entries is None else functions[entries.start:entries.stop]:
            self.entry(function)

    def global_(self, item) -> None:
        value = item.value
        if not isinstance(value, DenseElementsAttr) or not isinstance(value.type, TileType):
            self.ctx.report("global.type", item, "global value must be a dense tile constant")
            return
        if value.type.rank != 1 or isinstance(value.type.element, PointerType):
            self.ctx.report("global.type", item, f"global value must be a rank-1 tile of numbers, "
                                                 f"got {value.type}")
        self.type_ok(item, value.type, "global value")

    def entry(self, function: Function) -> None:
        ctx = self.ctx
        self.function = function
        if getattr(function, "testing", False):
            # NVIDIA's test-only `testing$func` (read only on request): any parameters/results
            self.entry_body(function)
            return
        if function.type.results:
            ctx.report("entry.results", function, f"an entry returns nothing, but its type "
                                                  f"declares results {_type_list(function.type.results)}")
        inputs = function.type.inputs
        arg_types = [a.type for a in function.body.args]
        if list(inputs) != arg_types:
            ctx.report("entry.signature", function, f"body arguments {_type_list(arg_types)} do "
                       f"not match the declared parameters {_type_list(inputs)}")
        # entries share signatures: one whose parameters passed is not checked again
        if not (self.fast and id(function.type) in self._clean_signatures):
            reported = len(ctx.diagnostics)
            for index, param in enumerate(inputs):
                if not (isinstance(param, TileType) and param.rank == 0
                        and isinstance(param.element, (ElementType, PointerType))):
                    ctx.report("entry.params", function, f"parameter {index} must be a scalar "
                               f"tile (tile<E> or tile<ptr<E>>), got {param}")
                else:
                    self.type_ok(function, param, f"parameter {index}")
            if len(ctx.diagnostics) == reported:
                self._clean_signatures.add(id(function.type))
        check_hints(ctx, function, ENTRY_OP.mnemonic, function.optimization_hints, self.version)
        if function.arg_attrs is not None:
            self.arg_attrs(function)
        self.entry_body(function)

    def entry_body(self, function: Function) -> None:
        self.entry_subprogram = self.debug.entry(function)
        self.visible = set()
        self.parents = []
        self.block(function.body, None)

    def arg_attrs(self, function: Function) -> None:
        """13.5 entries carry one attribute dictionary per parameter, as MLIR's function interface
        checks them (NVIDIA's tileirdisasm and tileiras 13.5, probed): dictionaries only; names
        dialect-qualified; one per parameter unless all are empty (then MLIR drops the array)."""
        ctx = self.ctx
        elements = getattr(function.arg_attrs, "elements", None)
        if elements is None:
            ctx.report("entry.arg_attrs", function, f"argument attributes must be an array of "
                       f"dictionaries, got {type(function.arg_attrs).__name__}")
            return
        for index, entry in enumerate(elements):
            if not isinstance(entry, DictionaryAttr):
                ctx.report("entry.arg_attrs", function, f"argument attributes must be an array "
                           f"of dictionaries; entry {index} is a {type(entry).__name__}")
                return
            for name, _ in entry.entries:
                if "." not in name:
                    ctx.report("entry.arg_attrs", function, f"argument attribute {name!r} is not "
                               f"dialect-qualified; parameters take only dialect attributes "
                               f"(dialect.name)")
                    return
        count = len(function.type.inputs)
        if any(entry.entries for entry in elements) and len(elements) != count:
            ctx.report("entry.arg_attrs", function, f"expected {count} argument attribute "
                       f"dictionaries, one per parameter, got {len(elements)}")

    # ---- blocks and ops ------------------------------------------------------------------------

    def define(self, node, value: Value) -> None:
        if value in self.defined:
            self.ctx.report("ssa.redefined", node, f"value {value!r} is assigned more than once")
        self.defined.add(value)
        self.visible.add(value)

    def block(self, block: Block, parent: Op | None) -> None:
        owner = parent if parent is not None else self.function
        outer = self.visible
        if parent is not None:
            # A region sees what is visible where its op stands; what it defines stays inside.
            self.visible = set(outer)
        for arg in block.args:
            self.define(owner, arg)
            self.type_ok(owner, arg.type, "block argument")
        ops = block.ops
        if parent is not None and parent.spec.combiner:
            self.effect_free_body(ops, parent)
        if self.fast and verify_ops is not None:  # the same loop in C (tilebc/_verifier.c)
            verify_ops(self, ops, _PLAIN_CHECKS, self._clean_keys, self.op_at,
                       DenseElementsAttr, Value, DILoc, LINE_LIMIT)
        else:
            last = len(ops) - 1
            for position, op in enumerate(ops):
                self.op_at(op, position == last)
        self.block_end(block, parent)
        self.visible = outer

    def op_at(self, op: Op, last: bool) -> None:
        """One op of a block; `last`: whether it ends the block."""
        spec = op.spec
        # the op kind's fast path (see op), called directly
        check = _FAST_CHECKS.get(id(spec)) if self.fast else None
        if check is not None:
            check(self, op)
        else:
            self.op(op)
        if spec.terminator and not last:
            self.ctx.report("terminator.position", op, f"{op.name} must be the last op of its "
                                                       f"block")

    def effect_free_body(self, ops, parent: Op) -> None:
        """A reduce/scan body holds only memory-effect-free ops (NVIDIA's verifier, 13.5: "only
        memory-effect-free operations are allowed inside 'cuda_tile.reduce'"); an op with regions
        is free when everything in them is."""
        for op in ops:
            if op.spec.terminator:
                continue  # the terminator's own checks report a wrong one
            culprit = self.with_effects(op)
            if culprit is not None:
                inside = "" if culprit is op else f" ({culprit.name} inside)"
                # the released tools' words (the open repository says "only pure operations")
                self.ctx.report("region.effects", op, f"'cuda_tile.{op.name}' op only "
                                f"memory-effect-free operations are allowed inside "
                                f"'cuda_tile.{parent.name}' ({op.name} has memory "
                                f"effects{inside})")
                return  # NVIDIA stops at the first

    def with_effects(self, op: Op) -> Op | None:
        """`op` when it has memory effects of its own, the first nested op with some when its
        effects are those of its regions, else None. Memoised: each op is walked once."""
        key = id(op)
        if key in self._effects:
            return self._effects[key]
        effects = op.spec.effects
        found = op if effects.own else None
        if effects is Effects.RECURSIVE:
            for region in op.regions:
                for block in region.blocks:
                    for inner in block.ops:
                        found = self.with_effects(inner)
                        if found is not None:
                            break
                    if found is not None:
                        break
                if found is not None:
                    break
        self._effects[key] = found
        return found

    def block_end(self, block: Block, parent: Op | None) -> None:
        where = parent.name if parent is not None else ENTRY_OP.mnemonic
        allowed = TERMINATORS.get(where)
        if allowed is None:
            return
        last = block.ops[-1] if block.ops else None
        if parent is not None and parent.spec.combiner and not block.ops and not block.args:
            return  # `{}`: an empty region, which the combiner check reports
        if last is None or not last.spec.terminator:
            self.ctx.report("terminator.missing", parent if parent is not None else self.function,
                            f"{where} region must end with {' or '.join(allowed)}")
        elif last.name not in allowed:
            self.ctx.report("terminator.parent", last, f"{last.name} cannot end a {where} region; "
                                                       f"expected {' or '.join(allowed)}")

    def op(self, op: Op) -> None:
        spec = op.spec
        facts = _facts(spec)
        if facts is None and spec.unregistered:
            self.unregistered(op)
            return
        if facts is None:
            self.ctx.report("op.unknown", op, f"{spec.mnemonic} cannot appear in a function body")
            return
        check = facts.fast_check(self.compile_after) if self.fast else None
        if check is not None:
            check(self, op)  # signature.py: op_in_full's checks, verdicts reused
        else:
            self.op_in_full(op, spec, facts, None)

    def unregistered(self, op: Op) -> None:
        """An op of another dialect (-allow-unregistered-dialect): MLIR knows nothing of it but
        its values, so only their scoping is checked."""
        for value in op.operand_values:
            if value not in self.visible:
                self.ctx.report("ssa.dominance", op, self.dominance_message(value))
        for result in op.results:
            self.type_ok(op, result.type, "result")
            if result in self.defined:
                self.ctx.report("ssa.redefined", op, f"value {result!r} is assigned more than once")
            self.defined.add(result)
            self.visible.add(result)

    def recall(self, op: Op, key: tuple) -> bool | None:
        """The verdict for an op whose identity key is new: an earlier op's with an equal
        signature by value, else None once the op is checked in full (its verdict recorded)."""
        value_key = self.value_key(op)
        if value_key is not None:
            clean = self._clean_by_value.get(value_key)
            if clean is not None:
                self._clean_by_id[key] = clean
                return clean
        spec = op.spec
        self.op_in_full(op, spec, _facts(spec), (key, value_key))
        return None

    def dominance(self, op: Op, facts: _SpecFacts) -> None:
        """Operands not in scope, for an op whose operand groups are well formed."""
        operands, visible = op.operands, self.visible
        for name in facts.operand_names:
            group = operands.get(name)
            if group is None:
                continue
            for value in group if group.__class__ is tuple else (group,):
                if value not in visible:
                    self.ctx.report("ssa.dominance", op, self.dominance_message(value))

    # ---- signature keys (fast path) ------------------------------------------------------------

    def value_key(self, op: Op) -> tuple | None:
        """The same signature by value (types and attributes compared as values), or None when
        some type or attribute is not hashable. Only reached when the id key is new; each object
        is hashed once, then stands for the first equal one seen (its canonical id)."""
        # an object seen before is looked up here (ids are never 0); canonical_id places a new one
        seen, canonical = self._canonical_ids.get, self.canonical_id
        try:
            key = [id(op.spec), tuple(op.operands)]
            append = key.append
            for group in op.operands.values():
                if group is None:
                    append(None)
                elif group.__class__ is tuple:
                    append(tuple([seen(id(value.type)) or canonical(value.type, value.type)
                                  for value in group]))
                else:
                    type_ = group.type
                    append(seen(id(type_)) or canonical(type_, type_))
            attrs = op.attrs
            append(tuple(attrs))
            for attr in attrs.values():
                append(seen(id(attr)) or canonical(attr, None))
            append(_RESULTS)
            for result in op.results:
                type_ = result.type
                append(seen(id(type_)) or canonical(type_, type_))
        except TypeError:
            return None
        return tuple(key)

    def canonical_id(self, obj, token) -> int:
        """id of the first object seen equal to `obj` (by `token`, default: an attribute's class
        and value). `obj` is alive as long as the module, so its id stays its own."""
        found = self._canonical_ids.get(id(obj))
        if found is None:
            if token is None:
                token = _attr_token(obj)
            found = id(self._canonical.setdefault(token, token))
            self._canonical_ids[id(obj)] = found
        return found

    def op_in_full(self, op: Op, spec: OpSpec, facts: _SpecFacts, keys) -> None:
        """Every check, in the reference order. With `keys`, also record whether the signature
        checks reported anything, for later ops with the same signature."""
        ctx = self.ctx
        found = ctx.diagnostics
        before = len(found)
        # with keys, the fast path found the operand groups and result count as declared
        shaped = self.arity(op, spec, facts, keys is not None)
        clean = shaped and len(found) == before
        for value in op.operand_values if shaped else ():
            if value not in self.visible:
                ctx.report("ssa.dominance", op, self.dominance_message(value))
        before = len(found)
        self.availability(op, spec, facts)
        clean = clean and len(found) == before
        if facts.hints:
            check_hints(ctx, op, spec.mnemonic, op.attrs.get("optimization_hints"), self.version)
        if op.loc is not None and self.entry_subprogram is not False:
            self.debug.op(op, self.entry_subprogram)
        before = len(found)
        for result in op.results:
            self.type_ok(op, result.type, "result")
        clean = clean and len(found) == before
        if shaped:
            before = len(found)
            passed = attributes_ok = self.attributes(op, facts)
            if attributes_ok:
                for constraint in facts.constraints:
                    if not constraint(ctx, op):
                        passed = False
                        break
            clean = clean and passed and len(found) == before
            if passed:
                # what these report when they pass comes from their context parts alone
                for constraint in facts.tail:
                    if not constraint(ctx, op):
                        clean = False
                        break
            if attributes_ok:
                if spec.terminator:
                    self.terminator(op)
                if facts.symbol_ref:
                    self.get_global(op)
        self.regions(op, spec)
        for result in op.results:
            if result in self.defined:
                ctx.report("ssa.redefined", op, f"value {result!r} is assigned more than once")
            self.defined.add(result)
            self.visible.add(result)
        if keys is not None:
            id_key, value_key = keys
            self._clean_by_id[id_key] = clean
            if value_key is not None:
                self._clean_by_value[value_key] = clean

    def regions(self, op: Op, spec: OpSpec) -> None:
        if len(op.regions) != spec.regions:
            self.ctx.report("region.count", op, f"{op.name} has {len(op.regions)} regions, "
                                                f"expected {spec.regions}")
            return
        self.parents.append(op)
        for index, region in enumerate(op.regions):
            if not region.blocks and op.spec.else_optional and index == op.spec.regions - 1:
                if op.results:
                    self.ctx.report("region.blocks", op, "an if with results needs an else "
                                                         "region that yields them")
                continue  # an `if` without results may omit its else branch
            if len(region.blocks) != 1:
                self.ctx.report("region.blocks", op, f"region {index} has {len(region.blocks)} "
                                                     f"blocks, expected exactly one")
                continue
            if not op.spec.block_args and region.blocks[0].args:
                self.ctx.report("region.args", op, f"if region {index} takes no arguments")
            self.block(region.blocks[0], op)
        self.parents.pop()

    def dominance_message(self, value) -> str:
        if not isinstance(value, Value):
            return f"operand {value!r} is not a value"
        owner = value.owner
        if isinstance(owner, Op):
            where = (f" (defined by {owner.name} at offset 0x{owner.offset:x})"
                     if owner.offset is not None else f" (defined by {owner.name})")
        else:
            where = " (a block argument)"
        if value in self.defined:
            return (f"operand {value!r}{where} is not visible here; a value is only visible after "
                    f"its definition and inside that definition's region")
        return f"operand {value!r}{where} is used before it is defined"

    # ---- shared per-op checks ------------------------------------------------------------------

    def arity(self, op: Op, spec: OpSpec, facts: _SpecFacts, counted: bool = False) -> bool:
        """`counted`: the operand groups and the result count are known to be as declared."""
        for operand in () if counted else spec.operands:
            group = op.operands.get(operand.name, None)
            if operand.arity is Arity.VARIADIC:
                good = isinstance(group, tuple) and all(isinstance(v, Value) for v in group)
            elif operand.arity is Arity.OPTIONAL:
                good = group is None or isinstance(group, Value)
            else:
                good = isinstance(group, Value)
            if not good:
                return self.ctx.report("op.arity", op, f"operand group '{operand.name}' must be "
                                                       f"{operand.arity.value} value(s), got {group!r}")
        if (not counted and facts.fixed_results is not None
                and len(op.results) != facts.fixed_results):
            return self.ctx.report("op.arity", op, f"{op.name} has {len(op.results)} results, "
                                                   f"expected {facts.fixed_results}")
        for result in op.results:
            if not isinstance(result.type, Type):
                return self.ctx.report("op.arity", op, f"result type {result.type!r} is not a type")
        return True

    def attributes(self, op: Op, facts: _SpecFacts) -> bool:
        attrs = op.attrs
        for name in facts.required_attrs:
            if attrs.get(name) is None:
                return self.ctx.report("attr.missing", op, f"attribute {name} is required")
        for attr in facts.enum_attrs:
            got = attrs.get(attr.name)
            if got is not None and not isinstance(got, attr.enum):
                return self.ctx.report("attr.enum", op, f"attribute {attr.name} must be a "
                                                        f"{attr.enum.__name__}, got {got!r}")
        return True

    def availability(self, op: Op, spec: OpSpec, facts: _SpecFacts) -> None:
        """Version checks: the op, its newer operands/attributes, and enum values."""
        version, ctx = self.version, self.ctx
        if spec.since > version:
            ctx.report("version.op", op, f"{op.name} needs bytecode {spec.since}, module is "
                                         f"{version}")
            return
        if spec.preview and not self.module.preview:
            ctx.report("version.op", op, f"{op.name} is a preview op; the module is not marked "
                                         f"preview")
        for attr in facts.newer_attrs:
            if attr.since > version:
                got = op.attrs.get(attr.name)
                if got is not None and got != attr.default_for(op.operands) and got is not False:
                    ctx.report("version.attr", op, f"attribute {attr.name} needs bytecode "
                                                   f"{attr.since}, module is {version}")
        for operand in facts.newer_operands:
            if operand.since > version and op.operands.get(operand.name) not in (None, ()):
                ctx.report("version.operand", op, f"operand {operand.name} needs bytecode "
                                                  f"{operand.since}, module is {version}")
        for attr in facts.enum_attrs:
            got = op.attrs.get(attr.name)
            if got is not None and isinstance(got, attr.enum) and got.since > version:
                ctx.report("version.enum", op, f"{attr.name} {got.keyword} needs bytecode "
                                               f"{got.since}, module is {version}")

    def type_ok(self, node, type_, what: str) -> bool:
        if self.fast and id(type_) in self._clean_types:
            return True
        ok = True
        if not isinstance(type_, Type):
            return self.ctx.report("type.unknown", node, f"{what} type {type_!r} is not a type")
        for rule, message in type_problems(type_):
            ok = self.ctx.report(rule, node, f"{what} type {type_}: {message}")
        need, why = type_since(type_)
        if need > self.version:
            ok = self.ctx.report("version.type", node, f"{what} type {type_} uses {why}, which "
                                                       f"needs bytecode {need}; module is "
                                                       f"{self.version}")
        if ok:
            self._clean_types.add(id(type_))
        return ok

    # ---- symbols and terminators ---------------------------------------------------------------

    def get_global(self, op: Op) -> None:
        name = op.attrs.get("name")
        target = self.globals.get(name)
        if target is None:
            self.ctx.report("symbol.undefined", op, f"@{name} does not name a global of this module")
            return
        pointee = op.results[0].type.element.pointee
        if isinstance(target.value, DenseElementsAttr) and pointee != target.value.type.element:
            self.ctx.report("type.pointee", op, f"result points to {pointee} but global @{name} "
                                                f"holds {target.value.type.element}")

    def terminator(self, op: Op) -> None:
        ctx = self.ctx
        operands = list(op.operands["operands"])
        name = op.name
        if not op.spec.through_if:  # yield
            parent = self.parents[-1] if self.parents else None
            ends = op.spec.ends
            if parent is None or parent.name not in ends:
                where = parent.name if parent is not None else ENTRY_OP.mnemonic
                ctx.report("terminator.parent", op, f"{name} cannot end a {where} region; it ends "
                                                    f"{', '.join(ends[:-1])} and {ends[-1]} regions")
                return
            if parent.spec.combiner:
                return  # the combiner check compares them, in NVIDIA's words and order
            expected = [r.type for r in parent.results]
            # reported at the if/reduce/scan whose results disagree (where NVIDIA reports it)
            self.check_operands(op, operands, expected, parent.name, at=parent)
            return
        target = None
        for parent in reversed(self.parents):
            if not parent.spec.exits_pass:
                target = parent
                break
        target_name = target.name if target is not None else ENTRY_OP.mnemonic
        if target_name not in EXIT_TARGETS[name]:
            ctx.report("terminator.parent", op, f"{name} must be nested (through if only) in "
                       f"{' or '.join(EXIT_TARGETS[name])}, not in {target_name}")
            return
        if op.spec.exit is Exit.LEAVE_KERNEL:
            expected = list(self.function.type.results) if self.function is not None else []
        elif op.spec.exit is Exit.NEXT and target.spec.carried:
            expected = [v.type for v in target.operands[target.spec.carried]]
        else:
            expected = [r.type for r in target.results]
        self.check_operands(op, operands, expected, target_name)

    def check_operands(self, op: Op, operands, expected, target: str, at=None) -> None:
        got = [v.type for v in operands]
        if got != list(expected):
            self.ctx.report("terminator.types", at or op, f"{op.name} operands {_type_list(got)} "
                            f"do not match what {target} expects {_type_list(expected)}")
