"""Device functions (.func) by inlining: every `call (ret), f, (args)` to a function defined in the
module is replaced by f's body, so the executor only ever runs one flat kernel.

The PTX call sequence passes values through .param variables: the caller declares `param0`,
`retval0`, ... in a `{ }` scope, stores the arguments with st.param, calls, and loads the results
with ld.param; the callee loads its formal parameters and stores `func_retval0` the same way.
Inlined, each of those variables becomes a per-thread .local variable (ld/st.param on them become
ld/st.local), the callee's formal names are renamed to the caller's actual ones, and the callee's
registers, labels and local variables get a suffix unique to the call site. `ret` in the callee
becomes a branch to the end of its inlined body. Recursion is refused (the PTX is then not
supported); calls to vprintf (declared .extern) are left to the executor.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, List

from .errors import PtxSyntaxError
from .syntax import Addr, Instruction, Kernel, Not, PredPair, Program, Reg, Sym, Variable, Vec


def _rename(operand, registers: Dict[str, str], symbols: Dict[str, str]):
    if isinstance(operand, Reg):
        return Reg(registers.get(operand.name, operand.name))
    if isinstance(operand, Sym):
        return Sym(symbols.get(operand.name, operand.name))
    if isinstance(operand, Addr):
        return Addr(_rename(operand.base, registers, symbols) if operand.base is not None
                    else None, operand.offset)
    if isinstance(operand, Vec):
        return Vec(tuple(_rename(item, registers, symbols) for item in operand.items))
    if isinstance(operand, PredPair):
        return PredPair(_rename(operand.first, registers, symbols),
                        _rename(operand.second, registers, symbols))
    if isinstance(operand, Not):
        return Not(_rename(operand.operand, registers, symbols))
    return operand


def _param_to_local(ins: Instruction, names) -> Instruction:
    """ld/st.param on one of `names` -> ld/st.local."""
    if ins.opcode in ("ld", "st") and "param" in ins.modifiers:
        address = next((op for op in ins.operands if isinstance(op, Addr)), None)
        if address is not None and isinstance(address.base, Sym) and address.base.name in names:
            modifiers = tuple("local" if m == "param" else m for m in ins.modifiers)
            return dataclasses.replace(ins, modifiers=modifiers)
    return ins


def _call_target(ins: Instruction, functions) -> str:
    """The defined function a `call` instruction calls, or '' (e.g. the extern vprintf)."""
    if ins.opcode != "call":
        return ""
    names = [op.name for op in ins.operands if isinstance(op, Sym)]
    return names[0] if names and names[0] in functions else ""


def _flatten(body: Kernel, functions: Dict[str, Kernel], program: Program, stack, counter
             ) -> Kernel:
    """`body` with each call to a defined function replaced by that function's body."""
    if not any(_call_target(ins, functions) for ins in body.instructions):
        return body
    registers = dict(body.registers)
    variables = list(body.variables)
    instructions: List[Instruction] = []
    at_index: Dict[int, int] = {}  # old instruction index -> new
    labels_at: Dict[int, List[str]] = {}
    for label, index in body.labels.items():
        labels_at.setdefault(index, []).append(label)
    labels: Dict[str, int] = {}
    passed_names = set()  # the caller's call-sequence variables bound to callees
    for index, ins in enumerate(body.instructions):
        at_index[index] = len(instructions)
        target = _call_target(ins, functions)
        if not target:
            instructions.append(ins)
            continue
        if target in stack:
            raise PtxSyntaxError(f"recursive call to {target} (through "
                                 f"{' -> '.join(stack)}) is not supported", file=program.source,
                                 line=ins.line, column=ins.column)
        if ins.guard is not None:
            raise PtxSyntaxError("a predicated call is not supported", file=program.source,
                                 line=ins.line, column=ins.column)
        callee = _flatten(functions[target], functions, program, stack + (target,), counter)
        vectors = [op for op in ins.operands if isinstance(op, Vec)]
        returns, arguments = (vectors[0], vectors[1]) if len(vectors) == 2 else \
            ((Vec(()), vectors[0]) if len(vectors) == 1 and ins.operands[-1] is vectors[0]
             else (vectors[0] if vectors else Vec(()), Vec(())))
        if len(arguments.items) != len(callee.params) or \
                len(returns.items) != len(callee.returns):
            raise PtxSyntaxError(f"call to {target} passes {len(arguments.items)} arguments and "
                                 f"{len(returns.items)} results; it takes {len(callee.params)} "
                                 f"and {len(callee.returns)}", file=program.source,
                                 line=ins.line, column=ins.column)
        counter[0] += 1
        tag = f"$call{counter[0]}"
        symbols = {formal.name: actual.name for formal, actual in
                   zip(callee.params + callee.returns, arguments.items + returns.items)}
        passed_names.update(symbols.values())
        end = f"$ret{tag}"
        symbols.update({label: label + tag for label in callee.labels})
        for var in callee.variables:
            symbols[var.name] = var.name + tag
            variables.append(dataclasses.replace(var, name=var.name + tag))
        renamed = {name: name + tag for name in callee.registers}
        registers.update((renamed[name], rtype) for name, rtype in callee.registers.items())
        start = len(instructions)
        for label, where in callee.labels.items():
            labels[label + tag] = start + where
        for inner in callee.instructions:
            operands = tuple(_rename(op, renamed, symbols) for op in inner.operands)
            guard = None if inner.guard is None else \
                (renamed.get(inner.guard[0], inner.guard[0]), inner.guard[1])
            inner = dataclasses.replace(inner, operands=operands, guard=guard)
            if inner.opcode == "ret":  # leave the inlined body
                inner = dataclasses.replace(inner, opcode="bra", modifiers=("uni",),
                                            operands=(Sym(end),))
            instructions.append(_param_to_local(inner, set(symbols.values())))
        labels[end] = len(instructions)
    at_index[len(body.instructions)] = len(instructions)
    for index, names in labels_at.items():
        for label in names:
            labels[label] = at_index[index]
    # the caller's call-sequence variables that callees read or write: per-thread .local
    variables = [dataclasses.replace(var, space="local") if var.space == "param" and
                 var.name in passed_names else var for var in variables]
    instructions = [_param_to_local(ins, passed_names) for ins in instructions]
    return dataclasses.replace(body, registers=registers, variables=variables,
                               instructions=instructions, labels=labels)


def inline_calls(program: Program) -> Program:
    """The program with every kernel's calls to its defined .func functions inlined."""
    if not program.functions:
        return program
    # a function's own formal parameters and results are .local once inlined
    functions = {}
    for name, function in program.functions.items():
        # (each call site then renames them to the caller's actual variables)
        formals = {var.name for var in function.params + function.returns}
        functions[name] = dataclasses.replace(
            function, instructions=[_param_to_local(ins, formals)
                                    for ins in function.instructions])
    counter = [0]
    for name, kernel in list(program.kernels.items()):
        program.kernels[name] = _flatten(kernel, functions, program, (name,), counter)
    return program
