"""The PTX syntax tree the parser builds and the emulator compiles: operands, instructions,
variables, kernels (and .func bodies) and the program."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple, Union

from .errors import PtxSyntaxError


# ------------------------------------------------------------------------------------ operands


@dataclass(frozen=True)
class Reg:
    name: str  # "%r3", "%p1", "%tid.x", "%laneid"


@dataclass(frozen=True)
class Imm:
    value: Union[int, float]
    bits: Optional[int] = None  # raw bit pattern for 0f/0d literals (exact, NaN payloads kept)
    width: Optional[int] = None  # 32 for 0f, 64 for 0d


@dataclass(frozen=True)
class Sym:
    name: str  # a variable, parameter, label or function name


@dataclass(frozen=True)
class Addr:
    base: Union[Reg, Sym, None]
    offset: int = 0


@dataclass(frozen=True)
class TensorRef:
    tensor: object  # [tensor map, {coordinates}] of cp.async.bulk.tensor
    coords: "Vec"


@dataclass(frozen=True)
class Vec:
    items: Tuple[object, ...]


@dataclass(frozen=True)
class PredPair:
    first: Reg
    second: Reg


@dataclass(frozen=True)
class Not:
    operand: Reg  # !%p as a source operand


Operand = Union[Reg, Imm, Sym, Addr, Vec, PredPair, Not, TensorRef]


def registers_of(operand) -> List[str]:
    """Names of the registers an operand reads or writes (a tensor copy's coordinates aside)."""
    if isinstance(operand, Reg):
        return [operand.name]
    if isinstance(operand, Not):
        return registers_of(operand.operand)
    if isinstance(operand, Addr):
        return registers_of(operand.base) if operand.base is not None else []
    if isinstance(operand, Vec):
        return [name for item in operand.items for name in registers_of(item)]
    if isinstance(operand, PredPair):
        return [operand.first.name, operand.second.name]
    return []


# -------------------------------------------------------------------------------- statements


@dataclass
class Instruction:
    opcode: str
    modifiers: Tuple[str, ...]
    operands: Tuple[Operand, ...]
    guard: Optional[Tuple[str, bool]]  # (predicate register, negated)
    line: int
    column: int
    text: str

    @property
    def full_opcode(self) -> str:
        return ".".join((self.opcode,) + self.modifiers)


@dataclass
class Variable:
    space: str  # "global" | "const" | "shared" | "local" | "param"
    name: str
    size: int  # bytes
    align: int
    init: Optional[bytes] = None
    type: str = "b8"
    hidden: bool = False  # a kernel parameter the launch fills, not the caller (tensor maps)


@dataclass
class Kernel:
    name: str
    params: List[Variable]
    registers: Dict[str, str]  # register name -> declared type ("b32", "f32", "pred", ...)
    variables: List[Variable]  # .shared / .local in the body
    instructions: List[Instruction]
    labels: Dict[str, int]  # label -> index of the next instruction
    directives: Dict[str, Tuple[int, ...]]  # .maxntid / .reqntid / .minnctapersm
    line: int
    returns: List[Variable] = field(default_factory=list)  # a .func's result parameters

    @property
    def block_size(self) -> Optional[int]:
        dims = self.directives.get("reqntid") or self.directives.get("maxntid")
        if not dims:
            return None
        size = 1
        for d in dims:
            size *= d
        return size


@dataclass
class Program:
    source: Optional[str]
    version: Optional[str]
    target: Optional[str]
    globals: List[Variable] = field(default_factory=list)  # .global / .const data
    kernels: Dict[str, Kernel] = field(default_factory=dict)
    functions: Dict[str, Kernel] = field(default_factory=dict)  # .func definitions (inlined)
    externs: List[str] = field(default_factory=list)
    # `.extern .shared` unsized arrays: all start at the kernel's dynamic shared memory
    dynamic_shared: List[Variable] = field(default_factory=list)

    def kernel(self, name: Optional[str]) -> Kernel:
        if name is None:
            if len(self.kernels) == 1:
                return next(iter(self.kernels.values()))
            raise PtxSyntaxError(f"the PTX has {len(self.kernels)} kernels; name one of "
                                 f"{', '.join(self.kernels)}", file=self.source)
        try:
            return self.kernels[name]
        except KeyError:
            raise PtxSyntaxError(f"no .entry {name!r} in the PTX (entries: "
                                 f"{', '.join(self.kernels) or 'none'})", file=self.source) from None
