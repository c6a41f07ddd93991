"""The verifier's fast path, written out for each op kind from the op table.

An op's signature is its kind, its operand and result types and its attribute values, by object
identity: ops with the same signature get the same verdict from every check that reads nothing
but the op itself (Verifier.op). Computing that key and doing the few checks that depend on where
the op stands is the verifier's whole per-op cost on a clean module, so each op kind gets a
function written out for its declared operand groups and attributes (as the reader does for
decoding), in the order of checks of `Verifier.op_in_full`.

An op whose operand groups or attributes are not shaped as its spec declares (IR built by hand)
is checked in full. A key may hold an attribute value itself (integer and bool arrays), which may
be unhashable in hand-built IR: such an op is checked in full as well.
"""
from __future__ import annotations

from collections.abc import Callable

from ..codecache import compile_generated
from ..ir.attrs import DenseElementsAttr
from ..ir.module import Value
from ..ops.spec import Arity, AttrKind, OpSpec

# Integer and bool arrays: tuples of plain numbers, cheap to hash and compare by value. Attribute
# arrays (reduce identities) and hint dictionaries are new objects in every op as well; they enter
# by value too, as Verifier.value_key would compare them.
VALUE_ARRAYS = (AttrKind.I32_ARRAY, AttrKind.I64_ARRAY, AttrKind.BOOL_ARRAY, AttrKind.ATTR_ARRAY)

def _key_lines(spec: OpSpec, marker: str, bail: str) -> list[str]:
    """Statements computing `key` and `in_scope` for an op of `spec` (in `op`, with the
    in-scope values in `visible`); `bail` leaves when the op is not shaped as declared."""
    lines = ["    operands = op.operands",
             "    attrs = op.attrs",
             "    results = op.results",
             f"    if len(operands) != {len(spec.operands)} or len(attrs) != {len(spec.attrs)}:",
             "        BAIL"]
    fetches = ([f"        g{i} = operands[{o.name!r}]" for i, o in enumerate(spec.operands)]
               + [f"        a{i} = attrs[{a.name!r}]" for i, a in enumerate(spec.attrs)])
    if fetches:
        lines += ["    try:", *fetches, "    except KeyError:", "        BAIL"]
    lines.append("    in_scope = True")
    parts = [marker]
    for i, operand in enumerate(spec.operands):
        g = f"g{i}"
        if operand.arity is Arity.ONE:
            lines += [f"    if {g}.__class__ is not Value:", "        BAIL",
                      f"    if {g} not in visible:", "        in_scope = False"]
            parts.append(f"id({g}.type)")
        elif operand.arity is Arity.OPTIONAL:
            lines += [f"    if {g} is None:", f"        t{i} = None",
                      f"    elif {g}.__class__ is Value:", f"        t{i} = id({g}.type)",
                      f"        if {g} not in visible:", "            in_scope = False",
                      "    else:", "        BAIL"]
            parts.append(f"t{i}")
        else:
            lines += [f"    if {g}.__class__ is not tuple:", "        BAIL",
                      f"    t{i} = []",
                      f"    for value in {g}:",
                      "        if value.__class__ is not Value:", "            BAIL",
                      f"        t{i}.append(id(value.type))",
                      f"    if not visible.issuperset({g}):", "        in_scope = False"]
            parts.append(f"tuple(t{i})")
    for i, attr in enumerate(spec.attrs):
        a = f"a{i}"
        if attr.kind is AttrKind.DENSE:
            # No check reads the bytes of an op's own dense value (the reader checks their
            # length); its class and type decide, so constants of one type share a verdict.
            lines += [f"    if {a}.__class__ is DENSE:", f"        k{i} = DENSE",
                      f"        v{i} = id({a}.type)",
                      "    else:", f"        k{i} = None", f"        v{i} = id({a})"]
            parts += [f"k{i}", f"v{i}"]
        elif attr.kind in VALUE_ARRAYS:
            # Each op has its own tuple: compare by value, element classes included (True == 1).
            lines += [f"    if {a}.__class__ is tuple:", f"        k{i} = {a}",
                      f"        v{i} = tuple(map(type, {a}))",
                      "    else:", f"        k{i} = None", f"        v{i} = id({a})"]
            parts += [f"k{i}", f"v{i}"]
        elif attr.kind is AttrKind.HINTS:
            parts += [f"{a}.__class__", a]
        else:
            parts.append(f"id({a})")
    # Results last: their count varies with variadic results.
    if any(r.variadic for r in spec.results):
        parts.append("tuple([id(r.type) for r in results])")
    else:
        count = len(spec.results)
        lines += [f"    if len(results) != {count}:", "        BAIL"]
        if count:
            lines.append(f"    {', '.join(f'r{i}' for i in range(count))}{',' * (count == 1)} = "
                         f"results")
        parts += [f"id(r{i}.type)" for i in range(count)]
    lines.append(f"    key = ({', '.join(parts)},)")
    return [line.replace("BAIL", bail) for line in lines]


def _check_source(spec: OpSpec, facts) -> str:
    """`check(verifier, op)`: the verifier's fast path for one op of `spec`, written out (see
    Verifier.op, whose order of checks it keeps)."""
    full = "return verifier.op_in_full(op, SPEC, FACTS, None)"
    lines = ["def check(verifier, op):", "    visible = verifier.visible",
             *_key_lines(spec, "MARKER", full),
             "    try:",
             "        clean = verifier._clean_by_id.get(key)",
             "    except TypeError:  # an unhashable attribute value in hand-built IR",
             f"        {full}",
             "    if clean is None:",
             "        clean = verifier.recall(op, key)",
             "        if clean is None:",
             "            return",
             "    if not clean:",
             f"        {full}",
             "    if not in_scope:",
             "        verifier.dominance(op, FACTS)"]
    if facts.hints:
        hints = f"a{[a.name for a in spec.attrs].index('optimization_hints')}"
        lines.append(f"    check_hints(verifier.ctx, op, {spec.mnemonic!r}, {hints}, "
                     f"verifier.version)")
    lines += ["    loc = op.loc",
              "    if loc is not None:",
              "        entry_subprogram = verifier.entry_subprogram",
              "        if entry_subprogram is not False:",
              "            debug = verifier.debug",
              "            found = debug.resolved.get(id(loc)) or debug.resolve(loc)",
              "            if found[2] is not None or (found[1] is not None",
              "                                        and found[1] is not entry_subprogram):",
              "                debug.op(op, entry_subprogram, loc)"]
    if facts.context_checks:
        # the context parts of the last constraints (constraints.context_tail), while they pass
        lines += ["    for context in CONTEXT:",
                  "        if not context(verifier.ctx, op):",
                  "            break"]
    if spec.terminator:
        lines.append("    verifier.terminator(op)")
    if facts.symbol_ref:
        lines.append("    verifier.get_global(op)")
    if spec.regions:
        lines.append("    verifier.regions(op, SPEC)")
    else:
        lines += ["    if op.regions:", "        verifier.regions(op, SPEC)"]
    # each result defined, in order (the same Value twice is a redefinition)
    if any(r.variadic for r in spec.results):
        names, indent = ["result"], "    "
        lines += ["    defined = verifier.defined", "    for result in results:"]
    else:
        names, indent = [f"r{i}" for i in range(len(spec.results))], ""
        lines += ["    defined = verifier.defined"] if names else []
    for name in names:
        lines += [f"{indent}    if {name} in defined:",
                  f"{indent}        verifier.ctx.report('ssa.redefined', op, f'value {{{name}!r}} is "
                  "assigned more than once')",
                  f"{indent}    defined.add({name})",
                  f"{indent}    visible.add({name})"]
    return "\n".join(lines) + "\n"


def _compile(source: str, name: str, spec: OpSpec, **extra):
    namespace = {"Value": Value, "MARKER": object(), "DENSE": DenseElementsAttr, "SPEC": spec,
                 **extra}  # MARKER: keys of different op kinds never compare equal
    exec(compile_generated(source, f"<verify {name} {spec.mnemonic}>"), namespace)
    return namespace[name]


def check_function(spec: OpSpec, facts, check_hints) -> Callable:
    """The verifier's fast path for ops of `spec`; `facts` are the verifier's facts of the spec."""
    return _compile(_check_source(spec, facts), "check", spec, FACTS=facts,
                    check_hints=check_hints, CONTEXT=facts.context_checks)
