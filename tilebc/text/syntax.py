"""The per-op syntax declarations of the op table, compiled into element lists.

An op's `syntax` string is a small MLIR-assembly-format dialect; the printer and the parser both walk
the compiled elements, so one declaration fixes both directions.

    `kw`            literal (keyword or punctuation)
    ` `  / ``       force one space / suppress the next automatic space
    $name           an operand group or attribute of the op
    type($name)     the type(s) of an operand group or result
    custom<D>(...)  a directive from tilebc/text/directives.py; arguments are $names, integers or
                    bare words
    (...)?          optional group; the element marked `^` decides whether it is present
    attr-dict       where MLIR prints discardable attributes (spacing only: tilebc keeps none)
    attr-dict-with-keyword($a=v, ...)  prints `attributes {a = …}` for listed attributes whose
                    value is not the keyword v (MLIR prints these generically)

Spacing follows MLIR's generated printers: before a non-literal element a space is emitted unless
the previous element suppressed it; punctuation decides its own spacing (`shouldEmitSpaceBefore`).
"""
from __future__ import annotations

from ..ops.spec import Arity, AttrSpec, OpSpec
from ..record import Record


# Elements are frozen records (tilebc/record.py): equal and hashed by their fields, as frozen
# dataclasses would be, without generating methods at import (~10 ms of every `tilebc dis`).
def _set_fields(record, names, values) -> None:
    for name, value in zip(names, values):
        object.__setattr__(record, name, value)


class Literal(Record):
    __slots__ = ("text",)
    _fields = __slots__

    def __init__(self, text: str):
        object.__setattr__(self, "text", text)


class Space(Record):
    __slots__ = ("emit",)  # ` ` emits a space; `` suppresses the next one
    _fields = __slots__

    def __init__(self, emit: bool):
        object.__setattr__(self, "emit", emit)


class OperandRef(Record):
    __slots__ = ("name", "index", "arity")  # index: position in spec.operands
    _fields = __slots__

    def __init__(self, name: str, index: int, arity: Arity):
        _set_fields(self, self._fields, (name, index, arity))


class AttrRef(Record):
    __slots__ = ("name", "spec")
    _fields = __slots__

    def __init__(self, name: str, spec: AttrSpec):
        _set_fields(self, self._fields, (name, spec))


class TypeRef(Record):
    # operand: index in spec.operands; result: index in spec.results
    __slots__ = ("name", "operand", "result", "variadic")
    _fields = __slots__

    def __init__(self, name: str, operand: int | None = None, result: int | None = None,
                 variadic: bool = False):
        _set_fields(self, self._fields, (name, operand, result, variadic))


class Custom(Record):
    __slots__ = ("name", "args")  # args: OperandRef / AttrRef / TypeRef / ints / bare words
    _fields = __slots__

    def __init__(self, name: str, args: tuple[object, ...]):
        _set_fields(self, self._fields, (name, args))


class AttrDict(Record):
    # (attribute, text of the value elided in print) for attr-dict-with-keyword
    __slots__ = ("keyword_attrs",)
    _fields = __slots__

    def __init__(self, keyword_attrs: tuple[tuple[AttrRef, str], ...] = ()):
        object.__setattr__(self, "keyword_attrs", keyword_attrs)


class OptionalGroup(Record):
    __slots__ = ("elements", "anchor")
    _fields = __slots__

    def __init__(self, elements: tuple[object, ...], anchor: object):
        _set_fields(self, self._fields, (elements, anchor))


Element = Literal | Space | OperandRef | AttrRef | TypeRef | Custom | AttrDict | OptionalGroup

def _word_end(text: str, pos: int) -> int:
    """The end of the run of word characters (regex \\w: letters, digits, `_`) at `pos`."""
    end = pos
    while end < len(text) and (text[end].isalnum() or text[end] == "_"):
        end += 1
    return end


def _token(text: str, pos: int) -> tuple[str, str, str, int] | None:
    """The token at `pos` (not a space) as (kind, first part, second part, end), or None. Kinds:
    lit `...`, type type($name), custom custom<name>(args), attrkw attr-dict-with-keyword(args),
    attrdict attr-dict, var $name, open (, close )?, caret ^; tried in that order. Scanned with str
    methods: compiling the equivalent regex cost every `tilebc dis` ~0.5 ms."""
    if text.startswith("`", pos):
        end = text.find("`", pos + 1)
        return None if end < 0 else ("lit", text[pos:end + 1], "", end + 1)
    if text.startswith("type($", pos):
        end = _word_end(text, pos + 6)
        if end > pos + 6 and text.startswith(")", end):
            return "type", text[pos + 6:end], "", end + 1
    if text.startswith("custom<", pos):
        name_end = _word_end(text, pos + 7)
        close = text.find(")", name_end + 2)
        if name_end > pos + 7 and text.startswith(">(", name_end) and close >= 0:
            return "custom", text[pos + 7:name_end], text[name_end + 2:close], close + 1
    if text.startswith("attr-dict-with-keyword(", pos):
        close = text.find(")", pos + 23)
        if close >= 0:
            return "attrkw", text[pos + 23:close], "", close + 1
    if text.startswith("attr-dict", pos):
        return "attrdict", "", "", pos + 9
    if text.startswith("$", pos):
        end = _word_end(text, pos + 1)
        if end > pos + 1:
            return "var", text[pos + 1:end], "", end
    if text.startswith("(", pos):
        return "open", "", "", pos + 1
    if text.startswith(")?", pos):
        return "close", "", "", pos + 2
    if text.startswith("^", pos):
        return "caret", "", "", pos + 1
    return None


class SyntaxDeclarationError(ValueError):
    """A malformed `syntax` string in the op table (a tilebc bug, caught by the table tests)."""


def _resolve(spec: OpSpec, name: str):
    for index, operand in enumerate(spec.operands):
        if operand.name == name:
            return OperandRef(name, index, operand.arity)
    for attr in spec.attrs:
        if attr.name == name:
            return AttrRef(name, attr)
    raise SyntaxDeclarationError(f"{spec.mnemonic}: syntax names unknown operand/attribute ${name}")


def _type_ref(spec: OpSpec, name: str) -> TypeRef:
    for index, operand in enumerate(spec.operands):
        if operand.name == name:
            return TypeRef(name, operand=index, variadic=operand.arity is Arity.VARIADIC)
    for index, result in enumerate(spec.results):
        if result.name == name:
            return TypeRef(name, result=index, variadic=result.variadic)
    raise SyntaxDeclarationError(f"{spec.mnemonic}: type(${name}) names no operand or result")


def _custom_arg(spec: OpSpec, text: str):
    text = text.strip()
    if text.startswith("$"):
        name = text[1:]
        try:
            return _resolve(spec, name)
        except SyntaxDeclarationError:
            return _type_ref(spec, name)  # a result group
    if text.lstrip("-").isdigit():
        return int(text)
    return text


# id(spec) -> (spec, its elements); the spec is kept so its id stays its own. Keyed by identity:
# an OpSpec's hash walks all its fields, and the parser asks once per op.
_COMPILED: dict[int, tuple[OpSpec, tuple[Element, ...]]] = {}


def compile_syntax(spec: OpSpec) -> tuple[Element, ...]:
    """The op's syntax declaration as a tuple of elements (cached per op)."""
    found = _COMPILED.get(id(spec))
    if found is None:
        found = _COMPILED[id(spec)] = (spec, _compile_syntax(spec))
    return found[1]


def _compile_syntax(spec: OpSpec) -> tuple[Element, ...]:
    text = spec.syntax
    pos = 0
    stack: list[list] = [[]]
    anchors: list[object | None] = [None]
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        token = _token(text, pos)
        if token is None:
            raise SyntaxDeclarationError(f"{spec.mnemonic}: bad syntax near {text[pos:pos + 20]!r}")
        kind, first, second, pos = token
        if kind == "lit":
            body = first[1:-1]
            element = Space(body == " ") if body in ("", " ") else Literal(body)
        elif kind == "type":
            element = _type_ref(spec, first)
        elif kind == "custom":
            args = tuple(_custom_arg(spec, a) for a in second.split(",") if a.strip())
            element = Custom(first, args)
        elif kind == "attrkw":
            entries = []
            for item in first.split(","):
                name, _, elided = item.strip()[1:].partition("=")
                entries.append((_resolve(spec, name), elided))
            element = AttrDict(tuple(entries))
        elif kind == "attrdict":
            element = AttrDict()
        elif kind == "var":
            element = _resolve(spec, first)
        elif kind == "open":
            stack.append([])
            anchors.append(None)
            continue
        elif kind == "close":
            elements = stack.pop()
            anchor = anchors.pop()
            if anchor is None:
                raise SyntaxDeclarationError(f"{spec.mnemonic}: optional group without ^ anchor")
            stack[-1].append(OptionalGroup(tuple(elements), anchor))
            continue
        else:  # caret: marks the previous element as the group's anchor
            if len(stack) == 1 or not stack[-1]:
                raise SyntaxDeclarationError(f"{spec.mnemonic}: misplaced ^")
            anchors[-1] = stack[-1][-1]
            continue
        stack[-1].append(element)
    if len(stack) != 1:
        raise SyntaxDeclarationError(f"{spec.mnemonic}: unbalanced optional group")
    return tuple(stack[0])


def space_before_literal(value: str, last_was_punctuation: bool) -> bool:
    """MLIR's `shouldEmitSpaceBefore` for a literal."""
    if len(value) != 1 and value != "->":
        return True
    if last_was_punctuation:
        return value[0] not in ">)}],"
    return value[0] not in "<>(){}[],"


def after_literal(value: str) -> tuple[bool, bool]:
    """(should_emit_space, last_was_punctuation) after printing a literal."""
    return (len(value) != 1 or value[0] not in "<({["), (value[0] != "_" and not value[0].isalpha())
