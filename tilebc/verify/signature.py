"""Signature keys of the verifier's fast path, one specialised function per op kind.

An op's signature is its kind, its operand and result types and its attribute values, by object
identity: ops with the same signature get the same verdict from every check that reads nothing
but the op itself. Computing that key is most of the verifier's per-op cost, so each op kind gets
a function written out for its declared operand groups and attributes (as the reader does for
decoding), which also says whether every operand is in scope.

A key function returns None for an op whose operand groups or attributes are not shaped as its
spec declares (IR built by hand); the verifier checks such ops in full.
"""
from __future__ import annotations

from typing import Callable, Dict, Optional, Tuple

from ..ir.module import Op, Value
from ..ops.spec import Arity, OpSpec

KeyFunction = Callable[[Op, set], Optional[Tuple[tuple, bool]]]


def _source(spec: OpSpec, marker: str) -> str:
    """Python source of `key(op, visible) -> (key, in_scope) | None` for ops of `spec`."""
    lines = ["def key(op, visible):",
             "    operands = op.operands",
             "    attrs = op.attrs",
             "    results = op.results",
             f"    if len(operands) != {len(spec.operands)} or len(attrs) != {len(spec.attrs)}:",
             "        return None"]
    fetches = ([f"        g{i} = operands[{o.name!r}]" for i, o in enumerate(spec.operands)]
               + [f"        a{i} = attrs[{a.name!r}]" for i, a in enumerate(spec.attrs)])
    if fetches:
        lines += ["    try:", *fetches, "    except KeyError:", "        return None"]
    lines.append("    in_scope = True")
    parts = [marker]
    for i, operand in enumerate(spec.operands):
        g = f"g{i}"
        if operand.arity is Arity.ONE:
            lines += [f"    if {g}.__class__ is not Value:", "        return None",
                      f"    if {g} not in visible:", "        in_scope = False"]
            parts.append(f"id({g}.type)")
        elif operand.arity is Arity.OPTIONAL:
            lines += [f"    if {g} is None:", f"        t{i} = None",
                      f"    elif {g}.__class__ is Value:", f"        t{i} = id({g}.type)",
                      f"        if {g} not in visible:", "            in_scope = False",
                      "    else:", "        return None"]
            parts.append(f"t{i}")
        else:
            lines += [f"    if {g}.__class__ is not tuple:", "        return None",
                      f"    t{i} = []",
                      f"    for value in {g}:",
                      "        if value.__class__ is not Value:", "            return None",
                      f"        t{i}.append(id(value.type))",
                      f"    if not visible.issuperset({g}):", "        in_scope = False"]
            parts.append(f"tuple(t{i})")
    parts += [f"id(a{i})" for i in range(len(spec.attrs))]
    # Results last: their count varies with variadic results.
    if any(r.variadic for r in spec.results):
        parts.append("*[id(r.type) for r in results]")
    else:
        lines += [f"    if len(results) != {len(spec.results)}:", "        return None"]
        parts += [f"id(results[{i}].type)" for i in range(len(spec.results))]
    lines.append(f"    return ({', '.join(parts)},), in_scope")
    return "\n".join(lines) + "\n"


def key_function(spec: OpSpec) -> KeyFunction:
    marker = object()  # keys of different op kinds never compare equal
    namespace = {"Value": Value, "MARKER": marker}
    exec(compile(_source(spec, "MARKER"), f"<verify key {spec.mnemonic}>", "exec"), namespace)
    return namespace["key"]


_CACHE: Dict[int, KeyFunction] = {}


def key_function_for(spec: OpSpec) -> KeyFunction:
    found = _CACHE.get(id(spec))
    if found is None:
        found = _CACHE[id(spec)] = key_function(spec)
    return found
