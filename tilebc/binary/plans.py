"""Per-(op, version) plans: the op table's declaration of one op, specialised to one version.

Both decoders read their per-op facts from here: the careful reader in `reader.py` interprets a plan
step by step, and `fastpath.py` compiles the same plan into straight-line Python. The writer reads
the same plan for the target version (the `encode_*` facts).
"""
from __future__ import annotations

import sys

from ..ir import types as T
from ..ops.spec import Arity, AttrKind
from ..version import Version

# Attribute steps: read the bytes, take a unit flag bit, read when a flag bit says so, or absent
# (the attribute is newer than the file).
READ, UNIT, OPTIONAL, ABSENT = "read", "unit", "optional", "absent"
# Operand encodings: one count per group (AttrSizedOperandSegments), one shared count, or no count.
SEGMENTED, FLAT, FIXED = "segmented", "flat", "fixed"
# The number each operand mode is given in the programs of the C decoder and encoder.
OPERAND_MODE_CODES = {FIXED: 0, SEGMENTED: 1, FLAT: 2}


class OpPlan:
    """Everything about decoding or encoding `spec` that depends only on the version, computed
    once."""

    __slots__ = ("spec", "counted_results", "variadic_results", "num_serialized", "synthesized",
                 "has_flags", "known_flags", "attr_steps", "pending_defaults", "operand_mode",
                 "operand_steps", "num_fixed_operands", "kind_current", "encode_results",
                 "encode_flag_bits", "encode_attrs")

    def __init__(self, spec, version: Version):
        self.spec = spec
        self.counted_results = spec.counted_results
        self.variadic_results = any(r.variadic for r in spec.results)
        self.num_serialized = sum(1 for r in spec.results if r.since <= version)
        # Results newer than the file: the reader supplies them with their default type.
        self.synthesized = [T.token if r.default_type == "token" else r.default_type
                            for r in spec.results if r.since > version]
        self.has_flags = spec.flags_since is not None and version >= spec.flags_since
        self.known_flags = sum(1 << b.bit for b in spec.flag_bits if b.since <= version)
        steps, pending = [], []
        for attr in spec.attrs:
            bit = spec.flag_bit(attr.name)
            if max(attr.since, spec.since) > version:
                if attr.optional or attr.kind is AttrKind.UNIT:
                    steps.append((attr.name, ABSENT if attr.optional else UNIT, 63, attr))
                else:
                    pending.append(attr)
            elif attr.kind is AttrKind.UNIT:
                steps.append((attr.name, UNIT, bit.bit, attr))
            elif attr.optional:
                steps.append((attr.name, OPTIONAL, bit.bit, attr))
            else:
                steps.append((attr.name, READ, -1, attr))
        self.attr_steps = tuple(steps)
        self.pending_defaults = tuple(pending)
        operand_steps = []
        for operand in spec.operands:
            bit = -1
            if operand.arity is Arity.OPTIONAL:
                flag = spec.flag_bit(operand.name)
                if flag.since <= version:
                    bit = flag.bit
            operand_steps.append((operand.name, operand.arity, bit))
        self.operand_steps = tuple(operand_steps)
        self.num_fixed_operands = sum(1 for o in spec.operands if o.arity is Arity.ONE)
        if spec.segmented:
            self.operand_mode = SEGMENTED
        elif any(o.arity is Arity.VARIADIC for o in spec.operands):
            self.operand_mode = FLAT
        else:
            self.operand_mode = FIXED
        # Encoding: whether the op itself exists in the version; how many results are written
        # without asking each one's version (None: ask); per flag bit whether it is a unit
        # attribute's and needs no version check; the attributes written as values (not flags)
        # with whether each needs no version check.
        self.kind_current = spec.since <= version
        self.encode_results = None if self.synthesized else \
            sys.maxsize if self.variadic_results else len(spec.results)
        self.encode_flag_bits = tuple(
            (bit, not bit.is_operand and spec.attr(bit.name).kind is AttrKind.UNIT,
             max(bit.since, spec.since) <= version) for bit in spec.flag_bits)
        self.encode_attrs = tuple((attr, attr.since <= version) for attr in spec.attrs
                                  if attr.kind is not AttrKind.UNIT)


_PLANS = {}  # (id(spec), version) -> plan; a plan holds its spec, so the id stays its own
# The table has ~120 ops x 5 versions; specs made per op (another dialect's, read from text) would
# otherwise accumulate for the life of the process.
_MAX_PLANS = 4096


def plan_for(spec, version: Version) -> OpPlan:
    """The plan of `spec` at `version`, made once per process: every reader and writer of a file
    used to make its own (a fixture walk made ~90,000 for ~600 distinct ones). Specs are frozen
    records; a spec replaced in the table (a test adding an op) is a new object and gets its own."""
    key = (id(spec), version)
    plan = _PLANS.get(key)
    if plan is None or plan.spec is not spec:
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        plan = _PLANS[key] = OpPlan(spec, version)
    return plan
