"""The fast op decoder: each op's plan (plans.py) compiled into one straight-line Python function
(or a C program).

The careful reader in `reader.py` interprets a plan field by field through small helper calls and
checks everything as it goes, with a precise message for each failure. Profiles showed those calls,
not the IR objects, dominate decoding. This module generates, once per (opcode, version), a function
that decodes the same bytes with local variables and inlined one-byte varint/type/value fast paths.

Where tilebc._speedups is built, the same plan becomes a program for its OpDecoder (c_decoder),
which decodes the op in C and calls back into Python for the rarer attribute kinds, regions and
defaults; the reader's loop over the ops is C there too (decode_ops). The generated Python stays
the pure path (TILEBC_PURE=1) and the definition both are tested against.

It only handles the expected case. Anything unusual (an index out of range, a bad flag, a count
larger than the bytes left, running off the end of the body, any exception at all) abandons the
whole function body with `Bail`, and the careful reader decodes that body again from its start and
raises its usual DecodeError. So error messages come from one place, and the fast path can only
be wrong by accepting something the careful reader rejects or building a different IR — which
`tests/test_fuzz.py` checks on every mutated input.
"""
from __future__ import annotations

from collections.abc import Callable

from ..codecache import compile_generated
from ..ir import attrs as A
from ..ir.module import Value
from ..ops.spec import ARITY_CODES, Arity, AttrKind
from ..version import Version
from .lazyloc import DecodedOp, store_loc_slot
from .plans import (ABSENT, FIXED, FLAT, OPERAND_MODE_CODES, OPTIONAL, READ, SEGMENTED, UNIT,
                    OpPlan)
from .tags import ATTR_BOUNDED, ATTR_DIV_BY


class Bail(Exception):
    """The fast path met something it does not handle; the careful reader takes over."""


# Raised as a fresh instance each time: a shared instance would keep every traceback (and through
# it every abandoned body's frames) alive, since re-raising an instance extends its traceback.


def varint_tail(data, pos: int, first: int) -> tuple[int, int]:
    """The rest of a varint whose first byte `first` (>= 0x80) was just read; same limits as Reader."""
    result = first & 0x7F
    shift = 7
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
        if shift > 63:
            raise Bail
    if result >> 64:
        raise Bail
    return result, pos




def _signed(data, pos: int) -> tuple[int, int]:
    """A zigzag varint (the careful reader's `zigzag`)."""
    value = data[pos]
    pos += 1
    if value >= 0x80:
        value, pos = varint_tail(data, pos, value)
    return (value >> 1) ^ -(value & 1), pos


def fast_tagged(mr, reader, data, pos: int):
    """A tagged attribute: div_by and bounded inline (equal ones shared: attributes are immutable),
    anything else through the careful reader. Returns (attribute, position after it)."""
    tag = data[pos]
    if tag == ATTR_BOUNDED:
        flags = data[pos + 1]
        pos += 2
        if flags >= 0x80:
            flags, pos = varint_tail(data, pos, flags)
        if flags & ~3:
            raise Bail
        lower = upper = None
        if flags & 1:
            lower, pos = _signed(data, pos)
        if flags & 2:
            upper, pos = _signed(data, pos)
        key = (ATTR_BOUNDED, lower, upper)
        attr = mr._attr_cache.get(key)
        if attr is None:
            attr = mr._attr_cache[key] = A.BoundedAttr(lower, upper)
        return attr, pos
    if tag == ATTR_DIV_BY:
        divisor = data[pos + 1]
        pos += 2
        if divisor >= 0x80:
            divisor, pos = varint_tail(data, pos, divisor)
        flags = data[pos]
        pos += 1
        if flags >= 0x80:
            flags, pos = varint_tail(data, pos, flags)
        if flags & ~3:
            raise Bail
        every = along = None
        if flags & 1:
            every, pos = _signed(data, pos)
        if flags & 2:
            along, pos = _signed(data, pos)
        key = (ATTR_DIV_BY, divisor, every, along)
        attr = mr._attr_cache.get(key)
        if attr is None:
            attr = mr._attr_cache[key] = A.DivByAttr(divisor, every, along)
        return attr, pos
    reader.pos = pos
    attr = mr.tagged_attr(reader)
    return attr, reader.pos


def _varint(var: str, indent: str) -> str:
    return (f"{indent}{var} = data[pos]\n{indent}pos += 1\n"
            f"{indent}if {var} >= 128:\n{indent}    {var}, pos = varint_tail(data, pos, {var})\n")


def _type_ref(var: str, indent: str) -> str:
    return (_varint("k", indent)
            + f"{indent}{var} = types_get(k)\n"
            + f"{indent}if {var} is None:\n{indent}    {var} = mr.type(k, 0)\n")


def _value(var: str, indent: str) -> str:
    return _varint("k", indent) + f"{indent}{var} = values[k]\n"


class _Source:
    """Generated code plus the constants it refers to."""

    def __init__(self):
        self.lines = []
        self.env = {"varint_tail": varint_tail, "Bail": Bail, "new": object.__new__,
                    "fast_tagged": fast_tagged,
                    "DecodedOp": DecodedOp, "Value": Value, "set_loc": store_loc_slot}

    def const(self, name: str, value) -> str:
        self.env[name] = value
        return name

    def add(self, text: str) -> None:
        self.lines.append(text)


def _attr_code(src: _Source, index: int, attr, version: Version, indent: str) -> str:
    """Code that reads attribute `attr` (inline kinds here, the rest through the careful reader)."""
    var = f"a{index}"
    kind = attr.kind
    if kind is AttrKind.ENUM:
        members = {int(m): m for m in attr.enum if m.since <= version}
        table = src.const(f"ENUM{index}", members)
        return _varint("k", indent) + (f"{indent}{var} = {table}.get(k)\n"
                                       f"{indent}if {var} is None:\n{indent}    raise Bail\n")
    if kind is AttrKind.INT:
        width = attr.width
        code = _varint(var, indent) + f"{indent}if {var} >> {width}:\n{indent}    raise Bail\n"
        if width > 1:
            code += (f"{indent}if {var} >> {width - 1}:\n"
                     f"{indent}    {var} -= {1 << width}\n")
        return code
    if kind is AttrKind.BOOL:
        return (f"{indent}k = data[pos]\n{indent}pos += 1\n"
                f"{indent}if k > 1:\n{indent}    raise Bail\n{indent}{var} = k == 1\n")
    if kind is AttrKind.TYPE:
        return _type_ref(var, indent)
    if kind is AttrKind.STRING or kind is AttrKind.SYMBOL:
        code = _varint("k", indent) + (f"{indent}{var} = strings_get(k)\n"
                                       f"{indent}if {var} is None:\n"
                                       f"{indent}    {var} = mr.string(k, 0)\n")
        if kind is AttrKind.SYMBOL:
            code += f"{indent}if not {var}:\n{indent}    raise Bail\n"
        return code
    if kind is AttrKind.TAGGED:
        return f"{indent}{var}, pos = fast_tagged(mr, reader, data, pos)\n"
    if kind is AttrKind.DENSE:
        # The real offset: a lenient reader's warning about the constant must name the careful
        # reader's offset (the index's position), since the same warning is recorded once.
        return (f"{indent}if not rtypes:\n{indent}    raise Bail\n{indent}at = reader.base + pos\n"
                + _varint("k", indent) + f"{indent}{var} = mr.dense(rtypes[0], k, at)\n")
    # Arrays, hints: the careful reader's code, at our position.
    spec = src.const(f"ATTR{index}", attr)
    return (f"{indent}reader.pos = pos\n{indent}{var} = mr._op_attr(reader, {spec}, rtypes)\n"
            f"{indent}pos = reader.pos\n")


def compile_plan(plan: OpPlan, version: Version) -> Callable:
    """decode(mr, reader, data, pos, end, values, preorder, depth, offset) -> (op, pos).

    `pos` is just past the opcode; `offset` is the op's absolute file offset.
    """
    spec = plan.spec
    src = _Source()
    src.const("SPEC", spec)
    src.add("def decode(mr, reader, data, pos, end, values, preorder, pending, depth, offset):\n"
            "    types_get = mr._types.get\n"
            "    op = new(DecodedOp)\n"
            "    preorder.append(op)\n")
    # Result types.
    n_results = plan.num_serialized
    if plan.counted_results:
        src.add(_varint("n", "    "))
        if plan.variadic_results:
            src.add("    if n > end - pos:\n        raise Bail\n")
        else:
            src.add(f"    if n != {n_results}:\n        raise Bail\n")
        src.add("    rtypes = []\n    for _ in range(n):\n" + _type_ref("t", "        ")
                + "        rtypes.append(t)\n")
    else:
        for i in range(n_results):
            src.add(_type_ref(f"t{i}", "    "))
        src.add("    rtypes = [" + ", ".join(f"t{i}" for i in range(n_results)) + "]\n")
    # Flags.
    if plan.has_flags:
        src.add(_varint("flags", "    ")
                + f"    if flags & {~plan.known_flags}:\n        raise Bail\n")
    else:
        src.add("    flags = 0\n")
    # Attributes, in plan order (the attrs dict keeps it).
    if any(attr.kind in (AttrKind.STRING, AttrKind.SYMBOL) for _, _, _, attr in plan.attr_steps):
        src.add("    strings_get = mr._string_cache.get\n")
    attr_names = []
    for index, (name, action, bit, attr) in enumerate(plan.attr_steps):
        attr_names.append((name, f"a{index}"))
        if action is READ:
            src.add(_attr_code(src, index, attr, version, "    "))
        elif action is UNIT:
            if plan.has_flags and bit < 63:
                src.add(f"    a{index} = (flags & {1 << bit}) != 0\n")
            else:
                src.add(f"    a{index} = False\n")
        elif action is OPTIONAL:
            src.add(f"    if flags & {1 << bit}:\n" + _attr_code(src, index, attr, version, "        ")
                    + f"    else:\n        a{index} = None\n")
        elif action is ABSENT:
            src.add(f"    a{index} = None\n")
    # Operands.
    operand_names = []
    mode = plan.operand_mode
    if mode is FLAT:
        fixed = plan.num_fixed_operands
        src.add(_varint("total", "    ") + "    if total > end - pos:\n        raise Bail\n"
                f"    if total < {fixed}:\n        raise Bail\n")
    for index, (name, arity, bit) in enumerate(plan.operand_steps):
        var = f"o{index}"
        operand_names.append((name, var))
        if arity is Arity.ONE or mode is FIXED:
            src.add(_value(var, "    "))
        elif arity is Arity.OPTIONAL and mode is SEGMENTED:
            if bit >= 0:
                src.add(f"    if flags & {1 << bit}:\n" + _value(var, "        ")
                        + f"    else:\n        {var} = None\n")
            else:
                src.add(f"    {var} = None\n")
        else:  # variadic (and, like the careful reader, any non-single group of a flat op)
            if mode is SEGMENTED:
                src.add(_varint("n", "    ") + "    if n > end - pos:\n        raise Bail\n")
            else:
                src.add(f"    n = total - {plan.num_fixed_operands}\n")
            src.add(f"    {var} = []\n    for _ in range(n):\n" + _value("v", "        ")
                    + f"        {var}.append(v)\n    {var} = tuple({var})\n")
    src.add("    operands = {" + ", ".join(f"{name!r}: {var}" for name, var in operand_names) + "}\n")
    entries = [f"{name!r}: {var}" for name, var in attr_names]
    for index, attr in enumerate(plan.pending_defaults):
        entries.append(f"{attr.name!r}: {src.const(f'PENDING{index}', attr)}.default_for(operands)")
    src.add("    attrs = {" + ", ".join(entries) + "}\n")
    # Regions.
    if spec.regions:
        src.add(_varint("n", "    ") + f"    if n != {spec.regions}:\n        raise Bail\n"
                "    regions = []\n    for _ in range(n):\n"
                "        region, pos = mr._fast_region(reader, data, pos, end, values, preorder, "
                "pending, depth + 1)\n        regions.append(region)\n")
    else:
        src.add("    regions = ()\n")
    # The op and its results.
    src.add("    op.spec = SPEC\n    op.operands = operands\n    op.attrs = attrs\n"
            "    op.regions = regions\n    op.offset = offset\n"
            "    if pending is not None:\n        set_loc(op, pending)\n")
    if plan.synthesized:
        synth = src.const("SYNTHESIZED", list(plan.synthesized))
        src.add(f"    results = [Value(t, op, i) for i, t in enumerate(rtypes + {synth})]\n"
                "    op.results = results\n    values.extend(results[:len(rtypes)])\n")
    elif not plan.counted_results and n_results == 1:
        src.add("    r = Value(t0, op, 0)\n    op.results = [r]\n    values.append(r)\n")
    elif not plan.counted_results and n_results == 0:
        src.add("    op.results = []\n")
    else:
        src.add("    results = [Value(t, op, i) for i, t in enumerate(rtypes)]\n"
                "    op.results = results\n    values.extend(results)\n")
    src.add("    return op, pos\n")
    code = "".join(src.lines)
    namespace = dict(src.env)
    exec(compile_generated(code, f"<tilebc fast decoder: {spec.mnemonic} @ {version}>"), namespace)
    decode = namespace["decode"]
    decode.source = code  # for debugging and tests
    return decode


# ---- the same plan as a program for tilebc._speedups.OpDecoder ------------------------------
# The codes _opdecoder.c reads: attribute actions and kinds, operand modes and arities.
_ACTIONS = {READ: 0, UNIT: 1, OPTIONAL: 2, ABSENT: 3}
_INLINE_KINDS = {AttrKind.ENUM: 0, AttrKind.INT: 1, AttrKind.BOOL: 2, AttrKind.TYPE: 3,
                 AttrKind.STRING: 4, AttrKind.SYMBOL: 5, AttrKind.I32_ARRAY: 7,
                 AttrKind.I64_ARRAY: 8}
_CALLED = 6  # read by a Python function f(mr, reader, data, pos, rtypes) -> (value, pos)
_DENSE = 9  # mr._dense looked up in C, _read_dense called for a constant not there yet
_TAGGED = 10  # mr._attr_cache looked up in C for div_by and bounded, else _read_tagged called
_BOOL_ARRAY = 11  # read in C (an extension built before it calls the careful reader)


def _read_tagged(mr, reader, data, pos, rtypes):
    return fast_tagged(mr, reader, data, pos)


def _read_dense(mr, reader, data, pos, rtypes):
    if not rtypes:
        raise Bail
    at = reader.base + pos  # the careful reader's offset, for its warnings (see _attr_code)
    index = data[pos]
    pos += 1
    if index >= 128:
        index, pos = varint_tail(data, pos, index)
    return mr.dense(rtypes[0], index, at), pos


def _careful_attr(attr):
    def read(mr, reader, data, pos, rtypes):
        reader.pos = pos
        value = mr._op_attr(reader, attr, rtypes)
        return value, reader.pos
    return read


def _attr_program(name, action, bit, attr, version: Version) -> tuple:
    kind, width, extra = _CALLED, 64, None
    if action in (READ, OPTIONAL):
        kind = _INLINE_KINDS.get(attr.kind, _CALLED)
        if attr.kind is AttrKind.ENUM:
            extra = {int(m): m for m in attr.enum if m.since <= version}
        elif attr.kind is AttrKind.INT:
            width = attr.width
        elif attr.kind is AttrKind.TAGGED:
            from .. import speedups  # an extension built before _TAGGED calls _read_tagged
            extra = _read_tagged
            if speedups.DECODER_KINDS > _TAGGED:  # the predicates fast_tagged keys by these tags
                kind, extra = _TAGGED, (_read_tagged, ATTR_DIV_BY, ATTR_BOUNDED)
        elif attr.kind is AttrKind.DENSE:
            kind, extra = _DENSE, _read_dense
        elif attr.kind is AttrKind.BOOL_ARRAY:
            from .. import speedups
            if speedups.DECODER_KINDS > _BOOL_ARRAY:
                kind = _BOOL_ARRAY
            else:
                extra = _careful_attr(attr)
        elif kind == _CALLED:
            extra = _careful_attr(attr)
    return (name, _ACTIONS[action], bit, kind, width, extra)


# Value's slots, which the C decoder stores through (a value's type, owner and index)
VALUE_SLOTS = tuple(Value.__dict__[name] for name in ("type", "_owner", "index"))


def _helpers() -> tuple:
    from ..ir.module import Op
    slots = [Op.__dict__[name] for name in ("spec", "operands", "attrs", "results", "regions",
                                            "offset", "loc")]
    return (DecodedOp, Value, Bail, *slots, *VALUE_SLOTS)


def c_decoder(plan: OpPlan, version: Version) -> Callable | None:
    """The plan as a tilebc._speedups.OpDecoder (the same decoding as compile_plan's function,
    in C), or None where the extension is not built."""
    from ..speedups import OpDecoder
    if OpDecoder is None:
        return None
    return OpDecoder(decoder_program(plan, version))


def decoder_program(plan: OpPlan, version: Version, attr_steps=None) -> tuple:
    """The program OpDecoder runs for `plan` (`attr_steps`: other attribute steps, for tests)."""
    if attr_steps is None:
        attr_steps = tuple(_attr_program(*step, version) for step in plan.attr_steps)
    return (plan.spec, plan.counted_results, plan.variadic_results, plan.num_serialized,
            tuple(plan.synthesized), plan.has_flags, plan.known_flags & ((1 << 64) - 1),
            attr_steps, plan.pending_defaults, OPERAND_MODE_CODES[plan.operand_mode],
            plan.num_fixed_operands,
            tuple((name, ARITY_CODES[arity], bit) for name, arity, bit in plan.operand_steps),
            plan.spec.regions, _helpers())


_COMPILED: dict[tuple[int, Version], Callable] = {}


def compiled_decoder(opcode: int, version: Version) -> Callable | None:
    """The decoder of `opcode` if this process has compiled it already."""
    return _COMPILED.get((opcode, version))


def fast_decoder(plan: OpPlan, version: Version) -> Callable:
    """The compiled decoder of `plan` (cached per opcode and version for the process)."""
    key = (plan.spec.opcode, version)
    decode = _COMPILED.get(key)
    if decode is None:
        decode = _COMPILED[key] = c_decoder(plan, version) or compile_plan(plan, version)
    return decode
