"""The instruction registry: `BUILDERS` maps an opcode to the builder that compiles one parsed
instruction into `fn(cta, mask)`, `IMPLEMENTED` documents the forms each opcode's builder accepts
(the coverage test compares it with the lowering's PTX_SUBSET). The semantics modules (isa.py,
isa_control.py, isa_memory.py, isa_mma.py, isa_extra.py, isa_sm90.py) register into it with
`@implements` and share the helpers below; the package imports them all, and nothing here
imports them back.
"""
from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Optional, Tuple

import numpy as np

from tilebc.ops.enums import RoundingMode as RM

from . import fp
from .dtypes import TYPES
from .syntax import Instruction


BUILDERS: Dict[str, Callable] = {}
IMPLEMENTED: Dict[str, str] = {}
# passes over a kernel's compiled code once every instruction is built: fn(code) -> None, free
# to replace an entry's action (isa_sm90: uses of in-flight wgmma accumulators)
KERNEL_PASSES: List[Callable] = []


def implements(*opcodes: str, forms: str = ""):
    def register(builder):
        for opcode in opcodes:
            BUILDERS[opcode] = builder
            IMPLEMENTED[opcode] = forms
        return builder
    return register


class Mods:
    """An instruction's modifiers split into types (in order) and flags; refuses the rest."""

    def __init__(self, ins: Instruction, k: "KernelImage", allowed: Iterable[str] = (),
                 types: Tuple[int, ...] = (1,), type_set: Optional[Iterable[str]] = None):
        self.ins = ins
        self.types: List[str] = []
        self.flags = set()
        allowed = set(allowed)
        type_set = set(type_set) if type_set is not None else TYPES
        for mod in ins.modifiers:
            if mod in type_set:
                self.types.append(mod)
            elif mod in allowed:
                self.flags.add(mod)
            else:
                raise k.unsupported(ins, f"modifier .{mod} of {ins.opcode} is not emulated")
        if len(self.types) not in types:
            raise k.unsupported(ins, f"{ins.opcode} needs {' or '.join(map(str, types))} type "
                                f"modifier(s), found {len(self.types)}")

    @property
    def type(self) -> str:
        return self.types[0]

    def has(self, flag: str) -> bool:
        return flag in self.flags

    def rounding(self, default=RM.NEAREST_EVEN):
        found = [fp.ROUNDING[f] for f in self.flags if f in fp.ROUNDING]
        return found[0] if found else default


def per_thread(value, T: int):
    """`value` (an array or a scalar) as an array of T values: the array itself when it is one
    already (np.broadcast_to costs several microseconds), else a read-only broadcast view.
    Callers only read it: the array may be a register's value, which other registers and CTAs
    share (registers are replaced, never written in place)."""
    if value.__class__ is np.ndarray and value.shape == (T,):
        return value
    return np.broadcast_to(value, (T,))


def operands(ins: Instruction, k: "KernelImage", count: int):
    if len(ins.operands) != count:
        raise k.unsupported(ins, f"{ins.opcode} takes {count} operands, found "
                            f"{len(ins.operands)}")
    return ins.operands


def is_float(ptype: str) -> bool:
    return ptype in ("f16", "bf16", "f32", "f64")


def signed_of(ptype: str) -> str:
    return "s" + ptype[1:] if ptype[0] in "ub" and ptype != "pred" else ptype


def unsigned_of(ptype: str) -> str:
    return "u" + ptype[1:] if ptype[0] in "sb" and ptype != "pred" else ptype


FLOAT_FLAGS = ("rn", "rz", "rm", "rp", "ftz", "sat")
HALF_TYPES = ("f16", "bf16", "f16x2", "bf16x2")  # arithmetic in isa_extra.half_arithmetic


def float_pipeline(mods: Mods, compute: Callable, n_inputs: int, readers, write):
    """Read floats (flushing subnormals under .ftz), compute, flush / saturate, write."""
    flush = mods.has("ftz")
    sat = mods.has("sat")

    def fn(cta, mask):
        values = [read(cta) for read in readers]
        if flush:
            values = [fp.ftz(v) for v in values]
        out = compute(*values)
        if flush:
            out = fp.ftz(out)
        if sat:
            out = fp.saturate(out)
        write(cta, out, mask)
    return fn
