"""What one PTX instruction asks of the hardware, from its opcode and modifiers alone: its class
(the pipe or memory path it issues to), the flops of a tensor-core mma and the shared-memory
wavefronts of a wgmma. The emulator's profile (sim/profile.py) and the static counts the compiler
gives the model (ptx_counts.py) both classify with these, so the two agree by construction.
Instructions are duck-typed: anything with `opcode`, `modifiers` (and `operands`) will do."""
from __future__ import annotations

import re
from typing import List, Tuple

CLASSES = ("fp32", "fp16", "fp64", "int", "sfu", "conversion", "tensor", "global_ld",
           "global_st", "global_atom", "shared_ld", "shared_st", "shared_atom", "local_ld",
           "local_st", "const_ld", "shuffle", "barrier", "branch", "other")
CLASS_INDEX = {name: i for i, name in enumerate(CLASSES)}

_FLOAT_TYPES = {"f32": "fp32", "f64": "fp64", "f16": "fp16", "bf16": "fp16", "f16x2": "fp16",
                "bf16x2": "fp16"}
_TYPES = set(_FLOAT_TYPES) | {"b8", "u8", "s8", "b16", "u16", "s16", "b32", "u32", "s32", "b64",
                              "u64", "s64", "pred", "tf32", "e4m3x2", "e5m2x2"}
_SFU = {"sin", "cos", "ex2", "lg2", "tanh", "rsqrt"}
_INT_ONLY = {"and", "or", "xor", "not", "cnot", "shl", "shr", "popc", "clz", "brev", "prmt",
             "shf", "bfi", "bfe", "addc", "subc", "madc", "vote", "activemask", "redux",
             "lop3", "sad", "dp4a", "dp2a", "bmsk", "szext"}
SIZES = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2,
         "b64": 8, "u64": 8, "s64": 8, "f64": 8}
_SPACES = ("global", "shared", "local", "const", "param")
_SPLIT = re.compile(r"[\[\]{}(),]")
_BRACKET = re.compile(r"[\[\]{}()]")


def split_top(text: str, sep: str = ",") -> List[str]:
    """`text` split at each `sep` outside brackets, braces and parentheses, parts stripped (the
    operands of an instruction, the items of a parameter list or an initializer)."""
    if not _BRACKET.search(text):  # nothing nests: a plain split
        parts = [part.strip() for part in text.split(sep)]
        return parts if len(parts) > 1 or parts[0] else []
    parts, depth, begin = [], 0, 0
    if sep == ",":
        found = _SPLIT.finditer(text)
    else:
        found = re.finditer("[" + re.escape("[]{}()" + sep) + "]", text)
    for match in found:
        ch = match.group()
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        if ch == sep and depth == 0:
            at = match.start()
            parts.append(text[begin:at].strip())
            begin = at + 1
    tail = text[begin:].strip()
    if tail or parts:
        parts.append(tail)
    return parts


def types_of(ins) -> List[str]:
    return [m for m in ins.modifiers if m in _TYPES]


def space_of(ins) -> str:
    for space in _SPACES:
        if space in ins.modifiers:
            return space
    return "generic"


def classify(ins) -> str:
    """The class of one PTX instruction (for generic memory accesses: its static guess, global;
    the profiler refines it per execution from the addresses)."""
    op, mods = ins.opcode, ins.modifiers
    if op in ("ld", "ldu"):
        space = space_of(ins)
        return {"shared": "shared_ld", "local": "local_ld", "const": "const_ld",
                "param": "const_ld"}.get(space, "global_ld")
    if op == "st":
        space = space_of(ins)
        return {"shared": "shared_st", "local": "local_st", "param": "other"}.get(space,
                                                                                    "global_st")
    if op in ("atom", "red"):
        return "shared_atom" if space_of(ins) == "shared" else "global_atom"
    if op == "cp" and "bulk" in mods and "tensor" in mods:  # TMA: global first when a store
        return "global_st" if [m for m in mods if m in ("global", "shared", "shared::cta",
                                                       "shared::cluster")][:1] == ["global"] \
            else "global_ld"
    if op == "cp":
        return "global_ld" if "async" in mods and ("ca" in mods or "cg" in mods) else "other"
    if op == "ldmatrix":
        return "shared_ld"
    if op == "stmatrix":
        return "shared_st"
    if op in ("mma", "wgmma"):
        return "tensor"
    if op in ("shfl",):
        return "shuffle"
    if op in ("bar", "barrier", "membar", "fence"):
        return "barrier"
    if op in ("bra", "ret", "exit", "call", "brx"):
        return "branch"
    if op == "cvt":
        return "conversion"
    if op in _SFU:
        return "sfu"
    types = types_of(ins)
    if op in ("rcp", "sqrt", "div"):
        if "approx" in mods and types and types[0] == "f32":
            return "sfu"
        if types and types[0] in _FLOAT_TYPES:
            return _FLOAT_TYPES[types[0]]
        return "int"
    if op in _INT_ONLY:
        return "int"
    if op in ("mov", "cvta", "trap", "griddepcontrol", "nanosleep", "pmevent"):
        return "other"
    if types:
        last = types[-1]  # setp.lt.f32: the compared type; cvt handled above
        if last in _FLOAT_TYPES:
            return _FLOAT_TYPES[last]
        if last == "pred" and op in ("selp",):
            return "int"
        return "int"
    return "other"


def access_width(ins) -> Tuple[int, int]:
    """(bytes of an element, elements) one thread moves in an ld / ldu / st (its vector width),
    an atom / red (one element), or (16, matrices) in an ldmatrix / stmatrix (16-byte rows, 8
    lanes' worth a matrix)."""
    op, mods = ins.opcode, ins.modifiers
    if op in ("ldmatrix", "stmatrix"):
        return 16, 4 if "x4" in mods else 2 if "x2" in mods else 1
    types = types_of(ins)
    if op in ("atom", "red"):
        return (8 if types and types[0] in ("b64", "u64", "s64", "f64") else
                2 if types and types[0] in ("f16", "bf16", "b16") else 4), 1
    size = SIZES.get(types[0], 4) if types else 4
    return size, 4 if "v4" in mods else 2 if "v2" in mods else 8 if "v8" in mods else 1


def mma_flops(ins) -> int:
    """Floating-point operations (2 per multiply-add) of one warp's mma.sync."""
    for mod in ins.modifiers:
        if mod.startswith("m") and "n" in mod and "k" in mod:
            try:
                m, rest = mod[1:].split("n")
                n, k = rest.split("k")
                return 2 * int(m) * int(n) * int(k)
            except ValueError:
                continue
    return 0


def wgmma_wavefronts(ins, a_in_registers: bool) -> int:
    """Shared-memory wavefronts of one warpgroup's wgmma.mma_async: its operands in shared
    memory (B, and A unless it comes from registers), 128 bytes a wavefront (the canonical
    layouts are read without bank conflicts)."""
    size = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "s8": 1, "u8": 1}
    types = [m for m in ins.modifiers if m in size]
    shape = [m for m in ins.modifiers if m.startswith("m64n")]
    if not types or not shape:
        return 0
    n, k = (int(x) for x in shape[0][4:].split("k"))
    bytes_ = n * k * size[types[-1]]
    if not a_in_registers:
        bytes_ += 64 * k * size[types[0]]
    return -(-bytes_ // 128)


def mma_kind(ins) -> str:
    types = types_of(ins)
    for t in ("f64", "tf32", "s8", "u8", "e4m3", "e5m2"):
        if t in ins.modifiers:
            return {"s8": "int8", "u8": "int8", "e4m3": "fp8", "e5m2": "fp8"}.get(t, t)
    if "bf16" in types:
        return "f16"
    return "f16"
