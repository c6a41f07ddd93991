"""PTX text -> the syntax tree of syntax.py: module-level data, kernels, their registers, shared/local
variables, labels and instructions (with operands already classified).

The grammar is the part of PTX a code generator writes: directives, `.reg` declarations (with the
`<N>` range form), `.shared`/`.local`/`.global`/`.const` variables with `.align` and byte-array
initialisers, labels, `{ }` scopes (call sequences), predicated instructions and the operand forms
register, special register, immediate (decimal, hex, 0f/0d float bits), symbol, address
`[base+offset]`, vector `{a, b}` and setp's `p|q`. Anything else is a PtxSyntaxError at line:col.
"""
from __future__ import annotations

import itertools
import re
from typing import Dict, List, Optional, Tuple

from tilebc.gcpause import collection_paused

from ..perf.ptx_classes import split_top as _split_top
from .errors import PtxSyntaxError
from .inline import inline_calls
from .syntax import (Addr, Imm, Instruction, Kernel, Not, Operand, PredPair, Program,  # noqa: F401
                     Reg, Sym, TensorRef, Variable, Vec)


# ----------------------------------------------------------------------------------- lexing

_TYPE_BYTES = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2,
               "b32": 4, "u32": 4, "s32": 4, "f32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8,
               "pred": 1, "f16x2": 4, "bf16x2": 4}

_REG_RANGE = re.compile(r"^(%[A-Za-z_$][\w$]*)<(\d+)>$")
_IDENT = re.compile(r"^[A-Za-z_$%][\w$.]*$")
_INT = re.compile(r"^[+-]?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9]\d*)U?$")
_FLOATBITS = re.compile(r"^0([fFdD])([0-9a-fA-F]+)$")
_DECIMAL_FLOAT = re.compile(r"^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")
_GUARD = re.compile(r"^@(!?)(%?[A-Za-z_$][\w$]*)\s+")
_OPCODE = re.compile(r"^([a-z][a-z0-9_]*)((?:\.[A-Za-z0-9_]+(?:::[A-Za-z0-9_]+)*)*)\s*(.*)$", re.S)
_ADDRESS = re.compile(r"^([%A-Za-z_$][\w$.]*)?\s*(?:([+-])\s*(-?\w+))?$")


def _strip_comments(text: str) -> str:
    """Remove // and /* */ comments, keeping newlines (so line numbers stay right)."""
    def blank(match):
        return re.sub(r"[^\n]", " ", match.group(0))
    text = re.sub(r"/\*.*?\*/", blank, text, flags=re.S)
    return re.sub(r"//[^\n]*", lambda m: " " * len(m.group(0)), text)


class _Statement:
    """One `;`-terminated statement (or label / brace) with its position."""

    __slots__ = ("text", "line", "column")

    def __init__(self, text, line, column):
        self.text = text
        self.line = line
        self.column = column


_SPECIAL = re.compile(r"[\n{};:]")
_LABEL = re.compile(r"\s*[A-Za-z_$][\w$]*\s*")


def _statements(text: str):
    """Split PTX into statements: text up to `;`, labels `name:`, and `{` / `}` braces that
    are not inside an instruction (initialisers `= {..}` and vector operands stay intact).
    Runs of ordinary characters are taken whole; only newlines, braces, `;` and `:` are looked
    at one by one."""
    out = []
    line, column = 1, 1
    start = None  # (line, column) of the current statement
    buf = []
    depth = 0  # braces inside the current statement (initialiser / vector operand)
    i = 0
    n = len(text)
    # each special character's position, then the end of the text (its last run of characters)
    for at in itertools.chain((match.start() for match in _SPECIAL.finditer(text)), (n,)):
        if at > i:  # ordinary characters: leading blanks before a statement are skipped
            run = text[i:at]
            if start is None:
                body = run.lstrip(" \t\r")
                column += len(run) - len(body)
                run = body
                if run:
                    start = (line, column)
            if run:
                buf.append(run)
                column += len(run)
        if at == n:
            break
        i = at + 1
        ch = text[at]
        if ch == "\n":
            line += 1
            column = 1
            if buf:
                buf.append(" ")
            continue
        if start is None:
            start = (line, column)
        if ch == "{":
            so_far = "".join(buf)
            if depth == 0 and (".entry" in so_far or ".func" in so_far):
                out.append(_Statement(so_far.strip(), *start))  # a kernel header has no ';'
                buf, start = [], (line, column)
                so_far = ""
            if not so_far.strip():
                out.append(_Statement("{", *start))
                buf, start = [], None
                column += 1
                continue
            depth += 1
        elif ch == "}":
            if depth == 0:
                if "".join(buf).strip():
                    raise PtxSyntaxError("missing ';' before '}'", line=start[0], column=start[1])
                out.append(_Statement("}", *start))
                buf, start = [], None
                column += 1
                continue
            depth -= 1
        elif ch == ";" and depth == 0:
            out.append(_Statement("".join(buf).strip(), *start))
            buf, start = [], None
            column += 1
            continue
        elif ch == ":" and depth == 0 and _LABEL.fullmatch("".join(buf)):
            out.append(_Statement("".join(buf).strip() + ":", *start))
            buf, start = [], None
            column += 1
            continue
        buf.append(ch)
        column += 1
    if "".join(buf).strip():
        raise PtxSyntaxError("statement without a terminating ';'", line=start[0],
                             column=start[1])
    return out


# ---------------------------------------------------------------------------------- parsing


class _Parser:
    def __init__(self, text: str, source: Optional[str]):
        self.source = source
        self.statements = _statements(text)
        self.pos = 0
        self.operands: Dict[str, Operand] = {}
        self.bodies: Dict[str, tuple] = {}

    def error(self, message: str, stmt: Optional[_Statement] = None) -> PtxSyntaxError:
        stmt = stmt or (self.statements[self.pos] if self.pos < len(self.statements) else None)
        if stmt is None:
            return PtxSyntaxError(message + " (at end of text)", file=self.source)
        return PtxSyntaxError(f"{message}: {stmt.text!r}", file=self.source, line=stmt.line,
                              column=stmt.column)

    def parse(self) -> Program:
        program = Program(self.source, None, None)
        while self.pos < len(self.statements):
            stmt = self.statements[self.pos]
            words = stmt.text.split()
            head = words[0] if words else ""
            if head == ".version":
                program.version = words[1] if len(words) > 1 else None
            elif head == ".target":
                program.target = " ".join(words[1:])
            elif head in (".address_size", ".file", ".loc", ".section", ".pragma"):
                pass
            elif head == ".extern" and ".shared" in words:
                # dynamic shared memory: an unsized array sized by the launch
                program.dynamic_shared.append(self.variable(stmt, words, unsized=True))
            elif head == ".extern":
                program.externs.append(stmt.text)
            elif ".func" in words and ".entry" not in words:
                following = self.statements[self.pos + 1].text \
                    if self.pos + 1 < len(self.statements) else ""
                if following != "{":  # a prototype: the definition follows later
                    self.pos += 1
                    continue
                function = self.kernel(stmt)
                program.functions[function.name] = function
                continue
            elif ".entry" in words:
                kernel = self.kernel(stmt)
                program.kernels[kernel.name] = kernel
                continue
            elif head in (".global", ".const", ".visible", ".weak", ".shared"):
                variable = self.variable(stmt, words)
                if variable.space not in ("global", "const"):
                    raise self.error("module-level .shared variables are not supported", stmt)
                program.globals.append(variable)
            else:
                raise self.error("unexpected module-level statement", stmt)
            self.pos += 1
        return program

    # -- variables ---------------------------------------------------------------------------
    _VAR = re.compile(r"^((?:\.\w+\s+(?:\d+\s+)?)*)([A-Za-z_$][\w$]*)(?:\[(\d*)\])?\s*(?:=\s*(.*))?$", re.S)

    def variable(self, stmt: _Statement, words=None, unsized: bool = False) -> Variable:
        text = stmt.text
        for prefix in (".visible ", ".weak ", ".extern "):
            if text.startswith(prefix):
                text = text[len(prefix):]
        match = self._VAR.match(text.strip())
        if not match:
            raise self.error("cannot read this variable declaration", stmt)
        qualifiers = match.group(1).split()
        name, count, init = match.group(2), match.group(3), match.group(4)
        space, align, vtype = None, None, None
        # a kernel parameter's `.ptr [.space] [.align N]` describes what it points to (a hint
        # for the compiler); it changes nothing in the parameter's own layout, so it is dropped
        if ".ptr" in qualifiers:
            at = qualifiers.index(".ptr")
            end = at + 1
            if end < len(qualifiers) and qualifiers[end] in (".global", ".const", ".shared",
                                                              ".local"):
                end += 1
            if end + 1 < len(qualifiers) and qualifiers[end] == ".align":
                end += 2
            qualifiers = qualifiers[:at] + qualifiers[end:]
        it = iter(qualifiers)
        for q in it:
            if q in (".global", ".const", ".shared", ".local", ".param"):
                space = q[1:]
            elif q == ".align":
                try:
                    align = int(next(it))
                except (StopIteration, ValueError):
                    raise self.error(".align needs an integer", stmt) from None
            elif q[1:] in _TYPE_BYTES:
                vtype = q[1:]
            elif q.startswith(".v") and q[2:].isdigit():
                raise self.error("vector-typed variables are not supported", stmt)
            else:
                raise self.error(f"unknown variable qualifier {q}", stmt)
        # `.align 8 .b8` splits the number onto its own token; re-read when .align was last
        if space is None or vtype is None:
            raise self.error("a variable needs a state space and a type", stmt)
        elem = _TYPE_BYTES[vtype]
        n = int(count) if count else 1
        if unsized:
            if count != "" or init is not None:
                raise self.error("an .extern .shared variable must be an unsized array "
                                 "(`name[]`, no initialiser)", stmt)
            return Variable(space, name, 0, align or elem, None, vtype)
        if count == "" and init is None:
            raise self.error("an unsized array needs an initialiser", stmt)
        data = None
        if init is not None:
            init = init.strip()
            values = _split_top(init.strip("{} \t"), ",") if init.startswith("{") else [init]
            if count == "":
                n = len(values)
            if len(values) > n:
                raise self.error(f"initialiser has {len(values)} values for {n}", stmt)
            raw = bytearray()
            for value in values:
                number = self.integer_or_bits(value, stmt)
                raw += (number & ((1 << (8 * elem)) - 1)).to_bytes(elem, "little")
            raw += bytes(n * elem - len(raw))
            data = bytes(raw)
        return Variable(space, name, n * elem, align or elem, data, vtype)

    def integer_or_bits(self, text: str, stmt) -> int:
        text = text.strip()
        m = _FLOATBITS.match(text)
        if m:
            return int(m.group(2), 16)
        if _INT.match(text):
            return _int(text)
        raise self.error(f"initialiser value {text!r} is not an integer", stmt)

    # -- kernels -----------------------------------------------------------------------------
    def kernel(self, stmt: _Statement) -> Kernel:
        # `.visible .entry name( .param ..., .param ... )` then directives, then `{`
        header = stmt.text
        # The parameter list ends at ")"; directives may follow before the body's "{".
        match = re.match(r"^(?:\.\w+\s+)*\.(entry|func)\s+(?:\(([^)]*)\)\s*)?"
                         r"([A-Za-z_$][\w$]*)\s*(?:\((.*)\))?\s*(.*)$", header, re.S)
        if not match or match.group(1) == "entry" and match.group(2) is not None:
            # A kernel header without `;` runs into the body's `{` statement.
            raise self.error("cannot read the .entry or .func header", stmt)
        _, return_text, name, param_text, rest = match.groups()
        returns = []
        for item in _split_top(return_text or ""):
            if not item.strip():
                continue
            sub = _Statement(item, stmt.line, stmt.column)
            variable = self.variable(sub)
            if variable.space != "param":
                raise self.error("function results must be .param", sub)
            returns.append(variable)
        params = []
        for item in _split_top(param_text or ""):
            if not item:
                continue
            # `.hidden .param`: a parameter the caller does not pass (tileiras's tensor maps,
            # which the launch fills in); it takes its place in the parameter buffer all the same
            hidden = item.strip().startswith(".hidden")
            sub = _Statement(item.strip()[len(".hidden"):] if hidden else item, stmt.line,
                             stmt.column)
            variable = self.variable(sub)
            if variable.space != "param":
                raise self.error("kernel parameters must be .param", sub)
            variable.hidden = hidden
            params.append(variable)
        directives = {}
        for found in re.finditer(r"\.(maxntid|reqntid|minnctapersm|maxnreg|reqnctapercluster|"
                                 r"maxclusterrank)\s+([\d,\s]+)", rest):
            directives[found.group(1)] = tuple(int(v) for v in found.group(2).replace(",", " ")
                                               .split())
        self.pos += 1
        if self.pos >= len(self.statements) or self.statements[self.pos].text != "{":
            raise self.error("expected '{' to open the kernel body")
        self.pos += 1
        registers: Dict[str, str] = {}
        variables: List[Variable] = []
        instructions: List[Instruction] = []
        labels: Dict[str, int] = {}
        depth = 1
        # `{ }` scopes (inline asm blocks) may declare registers and labels of their own that
        # shadow the kernel's: each scope renames them to `name$<scope number>`
        scopes: List[Dict[str, str]] = []
        scope_count = 0
        while depth:
            if self.pos >= len(self.statements):
                raise self.error(f"kernel {name}: missing closing '}}'")
            stmt = self.statements[self.pos]
            self.pos += 1
            text = stmt.text
            if text == "{":
                depth += 1
                scope_count += 1
                scopes.append(self.scope_names(scope_count))
                continue
            if text == "}":
                depth -= 1
                if scopes:
                    scopes.pop()
                continue
            if scopes and text.startswith(".reg"):
                declared: Dict[str, str] = {}
                self.registers(stmt, declared)
                registers.update((_lookup(reg, scopes), rtype) for reg, rtype in declared.items())
                continue
            if scopes:
                text = _rename_statement(text, scopes)
                stmt = _Statement(text, stmt.line, stmt.column)
            if text.endswith(":") and " " not in text:
                label = text[:-1]
                if label in labels:
                    raise self.error(f"label {label} defined twice", stmt)
                labels[label] = len(instructions)
                continue
            if text.startswith(".reg"):
                self.registers(stmt, registers)
                continue
            if text.startswith((".shared", ".local")):
                variables.append(self.variable(stmt))
                continue
            if text.startswith(".param"):
                # a call-sequence parameter (inside `{ }`): declared, stored with st.param
                variables.append(self.variable(stmt))
                continue
            if text.startswith((".loc", ".pragma", ".maxntid", ".reqntid")):
                continue
            if text.startswith("."):
                raise self.error("unsupported directive in a kernel body", stmt)
            instructions.append(self.instruction(stmt))
        bare = {name for name in registers if not name.startswith("%")}
        if bare:  # registers declared without % (inline asm) were read as symbols
            instructions = [_bare_registers(ins, bare) for ins in instructions]
        return Kernel(name, params, registers, variables, instructions, labels, directives,
                      stmt.line, returns)

    def scope_names(self, number: int) -> Dict[str, str]:
        """The renames of the `{` scope opening at self.pos: the registers it declares and the
        labels it defines at its own depth (looked up before the body, so forward branches
        resolve)."""
        renames: Dict[str, str] = {}
        depth, pos = 1, self.pos
        while pos < len(self.statements) and depth:
            text = self.statements[pos].text
            pos += 1
            if text == "{":
                depth += 1
            elif text == "}":
                depth -= 1
            elif depth == 1 and text.endswith(":") and " " not in text:
                renames[text[:-1]] = f"{text[:-1]}${number}"
            elif depth == 1 and text.startswith(".reg"):
                declared: Dict[str, str] = {}
                self.registers(self.statements[pos - 1], declared)
                for register in declared:
                    renames[register] = f"{register}${number}"
        return renames

    def registers(self, stmt: _Statement, registers: Dict[str, str]) -> None:
        parts = stmt.text.split(None, 2)
        if len(parts) < 3 or not parts[1].startswith("."):
            raise self.error("expected `.reg .type %name`", stmt)
        rtype = parts[1][1:]
        if rtype.startswith("v"):
            raise self.error("vector registers are not supported", stmt)
        if rtype not in _TYPE_BYTES:
            raise self.error(f"unknown register type .{rtype}", stmt)
        for item in _split_top(parts[2]):
            match = _REG_RANGE.match(item)
            if match:
                for k in range(int(match.group(2))):
                    registers[f"{match.group(1)}{k}"] = rtype
            elif re.fullmatch(r"%?[A-Za-z_$][\w$]*", item):  # inline asm may omit the %
                registers[item] = rtype
            else:
                raise self.error(f"bad register name {item!r}", stmt)

    def instruction(self, stmt: _Statement) -> Instruction:
        text = stmt.text
        guard = None
        if text.startswith("@"):
            match = _GUARD.match(text)
            if match:
                guard = (match.group(2), bool(match.group(1)))
                text = text[match.end():]
        # the same instruction text recurs (unrolled code): read it once per program
        body = self.bodies.get(text)
        if body is None:
            body = self.bodies[text] = self.instruction_body(text, stmt)
        return Instruction(body[0], body[1], body[2], guard, stmt.line, stmt.column, stmt.text)

    def instruction_body(self, text: str, stmt: _Statement):
        """(opcode, modifiers, operands) of an instruction's text after its guard."""
        match = _OPCODE.match(text)
        if not match:
            raise self.error("cannot read the instruction", stmt)
        opcode, mods, rest = match.groups()
        # `.shared::cta` is the CTA's own shared memory, i.e. plain `.shared` (no clusters here)
        modifiers = tuple("shared" if m == "shared::cta" else m for m in mods.split(".") if m)
        if opcode == "call":
            operands = self.call_operands(rest, stmt)
        else:
            operands = tuple(self.cached_operand(item, stmt) for item in _split_top(rest)) \
                if rest else ()
        return opcode, modifiers, operands

    def call_operands(self, rest: str, stmt) -> Tuple[Operand, ...]:
        # call{.uni} (ret), func, (a, b);   or   call func, (a, b);
        items = _split_top(rest)
        out = []
        for item in items:
            item = item.strip()
            if item.startswith("("):
                inner = item.strip("()")
                out.append(Vec(tuple(Sym(x.strip()) for x in _split_top(inner) if x.strip())))
            else:
                out.append(Sym(item))
        return tuple(out)

    def cached_operand(self, text: str, stmt) -> Operand:
        """operand(), remembered by text: operands are immutable, and kernels repeat a few
        registers and addresses over and over."""
        found = self.operands.get(text)
        if found is None:
            found = self.operands[text] = self.operand(text, stmt)
        return found

    def operand(self, text: str, stmt) -> Operand:
        text = text.strip()
        if not text:
            raise self.error("empty operand", stmt)
        if text.startswith("["):
            if not text.endswith("]"):
                raise self.error(f"bad address operand {text!r}", stmt)
            parts = _split_top(text[1:-1])
            if len(parts) == 2 and parts[1].startswith("{"):  # [tensor map, {coordinates}]
                return TensorRef(self.operand(parts[0], stmt), self.operand(parts[1], stmt))
            return self.address(text[1:-1].strip(), stmt)
        if text.startswith("{"):
            if not text.endswith("}"):
                raise self.error(f"bad vector operand {text!r}", stmt)
            return Vec(tuple(self.operand(item, stmt) for item in _split_top(text[1:-1])))
        if "|" in text:
            first, second = (t.strip() for t in text.split("|", 1))
            return PredPair(Reg(first), Reg(second))
        if text.startswith("!"):
            return Not(Reg(text[1:].strip()))
        if text.startswith("%"):
            return Reg(text)
        m = _FLOATBITS.match(text)
        if m:
            width = 32 if m.group(1) in "fF" else 64
            return Imm(None, int(m.group(2), 16), width)
        if _INT.match(text):
            return Imm(_int(text))
        if _DECIMAL_FLOAT.match(text):
            return Imm(float(text))
        if text == "_":
            return Sym("_")
        if _IDENT.match(text):
            return Sym(text)
        raise self.error(f"cannot read operand {text!r}", stmt)

    def address(self, text: str, stmt) -> Addr:
        match = _ADDRESS.match(text)
        if not match:
            if _INT.match(text):
                return Addr(None, _int(text))
            raise self.error(f"cannot read address [{text}]", stmt)
        base, sign, offset = match.groups()
        if base is None:
            raise self.error(f"cannot read address [{text}]", stmt)
        value = 0
        if offset is not None:
            if not _INT.match(offset):
                raise self.error(f"address offset {offset!r} is not an integer", stmt)
            value = _int(offset) * (-1 if sign == "-" else 1)
        if _INT.match(base):
            return Addr(None, _int(base) + value)
        return Addr(Reg(base) if base.startswith("%") else Sym(base), value)


def _bare_register(operand, names):
    """`operand` with each symbol in `names` read as a register."""
    if isinstance(operand, Sym) and operand.name in names:
        return Reg(operand.name)
    if isinstance(operand, Vec):
        return Vec(tuple(_bare_register(item, names) for item in operand.items))
    if isinstance(operand, Addr) and operand.base is not None:
        return Addr(_bare_register(operand.base, names), operand.offset)
    if isinstance(operand, PredPair):
        return PredPair(_bare_register(operand.first, names), _bare_register(operand.second, names))
    if isinstance(operand, Not):
        return Not(_bare_register(operand.operand, names))
    return operand


def _bare_registers(ins: Instruction, names) -> Instruction:
    operands = tuple(_bare_register(op, names) for op in ins.operands)
    return ins if operands == ins.operands else \
        Instruction(ins.opcode, ins.modifiers, operands, ins.guard, ins.line, ins.column,
                    ins.text)


def _rename_statement(text: str, scopes: List[Dict[str, str]]) -> str:
    """`text` with the names the enclosing scopes declare replaced (innermost scope first)."""
    return re.sub(r"%?[A-Za-z_$][\w$]*", lambda m: _lookup(m.group(0), scopes), text)


def _lookup(name: str, scopes: List[Dict[str, str]]) -> str:
    for scope in reversed(scopes):
        if name in scope:
            return scope[name]
    return name


def _int(text: str) -> int:
    text = text.rstrip("U")
    negative = text.startswith("-")
    body = text.lstrip("+-")
    if body.lower().startswith("0x"):
        value = int(body, 16)
    elif len(body) > 1 and body.startswith("0"):
        value = int(body, 8)
    else:
        value = int(body)
    return -value if negative else value


_LINE_DIRECTIVES = (".version", ".target", ".address_size", ".file", ".loc")


def _terminate_line_directives(text: str) -> str:
    """.version / .target / .address_size / .file / .loc end at the newline, not at ';'."""
    lines = text.split("\n")
    for k, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith(_LINE_DIRECTIVES) and not stripped.endswith(";"):
            lines[k] = line + ";"
    return "\n".join(lines)


def parse_ptx(text: str, source: Optional[str] = None) -> Program:
    """Parse PTX text (as the JIT writes it) into a Program."""
    with collection_paused():  # a program is many small objects and no garbage cycles
        return inline_calls(_Parser(_terminate_line_directives(_strip_comments(text)),
                                    source).parse())
