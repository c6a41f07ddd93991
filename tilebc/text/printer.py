"""Module → text, byte-identical to NVIDIA's `tileirdisasm` (and `tileirdisasm -g` with debug=True).

Per-op syntax comes from the op table (`OpSpec.syntax`, compiled by tilebc/text/syntax.py); this
module walks those elements with MLIR's spacing rules. Only the module structure (globals, entry
signatures) and the `custom<…>` directives are written out here.
"""
from __future__ import annotations

import re
from collections.abc import Iterator

from ..codecache import compile_generated, compiles_at_once
from ..errors import TilebcError
from ..ir.module import Block, Function, Global, Module, Op, Region, Value
from ..ir import attrs as A
from ..ir.types import exact_type_text
from ..ops.spec import ARITY_CODES, Arity, AttrKind
from ..ops.table import ENTRY_OP, GLOBAL_OP
from ..gcpause import collection_paused
from .. import speedups
from . import values as V
from .names import FunctionNames
from .syntax import (AttrDict, AttrRef, Custom, Literal, OperandRef, OptionalGroup, Space, TypeRef,
                     after_literal, compile_syntax, space_before_literal)

TYPE_CHECKING = False
if TYPE_CHECKING:  # loaded for -g only (_aliases)
    from .debuginfo import LocationAliases

INDENT = "  "


def print_generic(module: Module, debug: bool = False) -> str:
    """MLIR's form with every op inside entries in MLIR's generic op form
    (`%r = "cuda_tile.addi"(%a, %b) {attrs} : (types) -> type`); the module, globals and entries
    keep their own syntax."""
    with exact_type_text():
        printer = _ModulePrinter(module, debug, True)
        printer.generic = True
        return "".join(printer.pieces())


def print_module(module: Module, debug: bool = False, mlir: bool = False) -> str:
    """Text of `module` exactly as `tileirdisasm` prints it (`-g` output when `debug`); with
    `mlir`, as MLIR's tools (cuda-tile-opt, cuda-tile-translate) print it: the body inside
    `cuda_tile.module @NAME { … }`. A type whose text exceeds TYPE_TEXT_LIMIT (a function type
    that repeats shared parts) is refused with a TilebcError rather than printed cut short."""
    with collection_paused(), exact_type_text():
        return "".join(_ModulePrinter(module, debug, mlir).pieces())


def module_text_pieces(module: Module, debug: bool = False, aliases=None) -> Iterator[str]:
    """print_module's text (without `mlir`) in pieces, one global or entry at a time (with -g,
    the location aliases last), for a writer that streams it: the whole text is never held.
    `aliases` (-g): the location texts come from it, as from a LocationAliases that visited
    the module's locations and finished (ref(loc) for each location printed, in print order;
    definitions() at the end), instead of the printer's own."""
    with collection_paused(), exact_type_text():
        printer = _ModulePrinter(module, debug or aliases is not None)
        printer.given_aliases = aliases
        yield from printer.pieces()


def module_items(module: Module) -> list:
    """Globals and entries in the order the text gave them (the parser records it); bytecode
    keeps globals in their own section, so a decoded module lists them first."""
    order = getattr(module, "item_order", None)
    items = list(module.globals) + list(module.functions)
    if order is not None and len(order) == len(items) \
            and {id(i) for i in order} == {id(i) for i in items}:
        return list(order)
    return items


def generic_attr_text(op: Op, attr, value) -> str:
    """An op attribute as the generic form writes it (what the parser's generic reader takes)."""
    kind = attr.kind
    if kind is AttrKind.ENUM:
        return f"#cuda_tile.{enum_attr_mnemonic(type(value))}<{value.keyword}>"
    if kind is AttrKind.INT:
        return f"{value} : i{attr.width}"
    if kind in (AttrKind.I32_ARRAY, AttrKind.I64_ARRAY, AttrKind.BOOL_ARRAY):
        width = {AttrKind.I32_ARRAY: "i32", AttrKind.I64_ARRAY: "i64"}.get(kind, "i1")
        items = [("true" if v else "false") if kind is AttrKind.BOOL_ARRAY else str(v)
                 for v in value]
        return f"array<{width}" + (": " + ", ".join(items) if items else "") + ">"
    if kind is AttrKind.DENSE:
        return V.dense_constant(value)
    if kind is AttrKind.TAGGED:  # assume's predicate, the one tagged attribute
        return V.predicate(value)
    return attr_text(attr, value)


def enum_attr_mnemonic(enum_class) -> str:
    """`MultimemReductionKind` → `multimem_reduction_kind` (the attribute's text mnemonic)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", enum_class.__name__).lower()


# ---- anchors and plain elements ------------------------------------------------------------------

def _operand_group(op: Op, ref: OperandRef):
    return op.operands.get(ref.name)


def _attr_present(op: Op, attr) -> bool:
    value = op.attrs.get(attr.name)
    if attr.kind is AttrKind.UNIT:
        return bool(value)
    if attr.optional:
        return value is not None
    default = attr.default_for(op.operands)
    if default is not None:
        return value != default
    return True


def _types_of(op: Op, ref: TypeRef) -> list:
    if ref.operand is not None:
        group = op.operands.get(ref.name)
        if group is None:
            return []
        return [v.type for v in group] if isinstance(group, tuple) else [group.type]
    if ref.variadic:
        fixed_before = ref.result
        count = len(op.results) - (len(op.spec.results) - 1)
        return [r.type for r in op.results[fixed_before:fixed_before + count]]
    return [op.results[ref.result].type]


def present(op: Op, anchor) -> bool:
    """Whether an optional group anchored on `anchor` is printed for `op`."""
    if isinstance(anchor, OperandRef):
        group = _operand_group(op, anchor)
        return bool(group) if isinstance(group, tuple) else group is not None
    if isinstance(anchor, AttrRef):
        return _attr_present(op, anchor.spec)
    if isinstance(anchor, TypeRef):
        return bool(_types_of(op, anchor))
    if isinstance(anchor, Custom) and anchor.name == "Region":
        index = anchor.args[0]
        return index < len(op.regions) and bool(op.regions[index].blocks)
    raise TilebcError(f"{op.name}: unsupported optional-group anchor {anchor!r}")


def attr_text(attr, value) -> str:
    kind = attr.kind
    if kind is AttrKind.ENUM:
        return value.keyword
    if kind is AttrKind.BOOL:
        return "true" if value else "false"
    if kind is AttrKind.INT:
        return str(value)
    if kind is AttrKind.STRING:
        return V.escape_string(value)
    if kind is AttrKind.SYMBOL:
        return V.symbol(value)
    if kind in (AttrKind.I32_ARRAY, AttrKind.I64_ARRAY):
        return "[" + ", ".join(map(str, value)) + "]"
    if kind is AttrKind.BOOL_ARRAY:
        return "[" + ", ".join("true" if v else "false" for v in value) + "]"
    if kind is AttrKind.ATTR_ARRAY:
        return "[" + ", ".join(V.typed_attr(v) for v in value) + "]"
    if kind is AttrKind.TAGGED:
        return V.typed_attr(value)
    if kind is AttrKind.HINTS:
        return V.hints(value)
    if kind is AttrKind.TYPE:
        return str(value)
    raise TilebcError(f"attribute {attr.name} of kind {kind.value} has no inline text form")


# ---- custom directives ---------------------------------------------------------------------------

class _Context:
    """What directives need besides the op: value names, indentation, the module printer."""

    def __init__(self, printer: _ModulePrinter, names: FunctionNames, indent: str):
        self.printer = printer
        self.names = names
        self.indent = indent


def _rounding(op, ctx, attr):
    value = op.attrs[attr.name]
    return "" if value == attr.spec.default else f"rounding<{value.keyword}>"


def _region(op, ctx, index, implicit=None):
    region = op.regions[index]
    return ctx.printer.region(region, ctx, implicit_terminator=implicit)


def _argument_region(op, ctx, index):
    region = op.regions[index]
    block = region.blocks[0]
    tt = ctx.printer.type_text
    args = ", ".join(f"{ctx.names.ref(a)}: {tt(a.type)}" for a in block.args)
    return f"\n{ctx.indent}({args}) " + ctx.printer.region(region, ctx)


def _block_arg(op, ctx, region_index, arg_index):
    return ctx.names.ref(op.regions[region_index].blocks[0].args[arg_index])


def _iter_values(op, ctx, region_index, first_arg, init):
    args = op.regions[region_index].blocks[0].args[first_arg:]
    values = op.operands[init.name]
    return ", ".join(f"{ctx.names.ref(a)} = {ctx.names.ref(v)}" for a, v in zip(args, values))


def _loop_signature(op, ctx, region_index, init, results):
    inits = op.operands[init.name]
    result_types = [r.type for r in op.results]
    text = ""
    if inits:
        text += f"iter_values({_iter_values(op, ctx, region_index, 0, init)}) "
    if inits or result_types:
        text += ": "
    tt = ctx.printer.type_text
    if inits:
        text += ", ".join(tt(v.type) for v in inits) + " "
        if result_types:
            text += "-> "
    if result_types:
        text += ", ".join(map(tt, result_types)) + " "
    return text.rstrip(" ")


def _first_type(op, ctx, results):
    return str(_types_of(op, results)[0])


def _mixed_dims(op, ctx, dynamic, which):
    view_type = op.results[0].type
    dims = view_type.shape if which == "shape" else view_type.strides
    operands = op.operands[dynamic.name]
    dynamic_dims = dims.count(None)
    if dynamic_dims != len(operands):  # invalid IR: one operand per '?' needed
        raise ValueError(f"{len(operands)} {dynamic.name} operands for the '?' of {view_type}")
    ref = ctx.names.ref
    if dynamic_dims == len(dims):  # the usual view: every dimension an operand
        return ", ".join(map(ref, operands))
    values = iter(operands)
    return ", ".join(ref(next(values)) if d is None else str(d) for d in dims)


def _tensor_view_types(op, ctx, base, shape, strides):
    dynamic = op.operands[shape.name] + op.operands[strides.name]
    tt = ctx.printer.type_text
    prefix = ""
    if dynamic:
        prefix = f"{tt(dynamic[0].type)} -> "
    elif getattr(op.operands[base.name].type.element, "ptr_attr", 0):
        prefix = f"{tt(op.operands[base.name].type)} -> "
    return prefix + tt(op.results[0].type)


def _index_types(op, ctx, index):
    types = [v.type for v in op.operands[index.name]]
    if not types:
        return ""
    tt = ctx.printer.type_text
    first = types[0]
    if all(t is first or t == first for t in types):
        return ", " + tt(first)
    return "".join(", " + tt(t) for t in types)


def _inbounds(op, ctx, attr):
    value = op.attrs[attr.name]
    if not any(value):
        return ""
    return "inbounds = " + attr_text(attr.spec, value)


def _call_signature(op, ctx, callee, operands, *attrs_and_results):
    """`@f(%a, %b) {arg_attrs = [...]} : (!cuda_tile.tile<f32>, …) -> …` as MLIR prints a call:
    attributes other than the callee in name order (const_args only when non-empty), then the
    function type, whose types the generic printer writes dialect-qualified."""
    *attr_refs, results = attrs_and_results
    values = op.operands[operands.name]
    text = f"{V.symbol(op.attrs[callee.name])}({', '.join(ctx.names.ref(v) for v in values)})"
    shown = [(ref.name, op.attrs[ref.name]) for ref in sorted(attr_refs, key=lambda r: r.name)
             if op.attrs.get(ref.name)]
    if shown:
        text += " {" + ", ".join(f"{name} = {attr_text(AttrRef(name, op.spec.attr(name)).spec, value)}"
                                 for name, value in shown) + "}"
    inputs = ", ".join(V.qualified_type(v.type) for v in values)
    outputs = [V.qualified_type(t) for t in _types_of(op, results)]
    result_text = outputs[0] if len(outputs) == 1 else "(" + ", ".join(outputs) + ")"
    return f"{text} : ({inputs}) -> {result_text}"


def _attribute_text(render):
    """A directive printing one attribute with `render`, remembered by identity for the print (a
    decoded module shares its equal constants and predicates)."""
    def text(op, ctx, attr):
        value = op.attrs[attr.name]
        known = ctx.printer.attribute_texts
        found = known.get(id(value))
        if found is not None and found[0] is value:
            return found[1]
        made = render(value)
        known[id(value)] = (value, made)  # the value rides along: its id stays its own
        return made
    text.attribute_text = True  # a body program looks the text up first (STEP_ATTRIBUTE_TEXT)
    return text


# name -> (print function, whether an empty result also drops the space before it)
DIRECTIVES: dict[str, tuple] = {
    "Rounding": (_rounding, False),
    "DenseConstant": (_attribute_text(V.dense_constant), False),
    "AssumePredicate": (_attribute_text(V.predicate), False),
    "Region": (_region, False),
    "ArgumentRegion": (_argument_region, False),
    "BlockArg": (_block_arg, False),
    "IterValues": (_iter_values, False),
    "LoopSignature": (_loop_signature, True),
    "FirstType": (_first_type, False),
    "MixedDims": (_mixed_dims, False),
    "TensorViewTypes": (_tensor_view_types, False),
    "IndexTypes": (_index_types, False),
    "Inbounds": (_inbounds, False),
    "CallSignature": (_call_signature, False),
}


# ---- the element walker --------------------------------------------------------------------------

class _Out:
    """Op text under construction plus MLIR's two spacing flags."""

    def __init__(self):
        self.parts: list[str] = []
        self.should_space = True
        self.last_punct = False


def _walk(elements, op: Op, ctx: _Context, out: _Out, emit: bool, skip=None) -> None:
    for element in elements:
        if element is skip:
            continue
        if isinstance(element, Literal):
            if emit:
                if out.should_space and space_before_literal(element.text, out.last_punct):
                    out.parts.append(" ")
                out.parts.append(element.text)
            out.should_space, out.last_punct = after_literal(element.text)
        elif isinstance(element, Space):
            if emit and element.emit:
                out.parts.append(" ")
            out.last_punct = not element.emit
            out.should_space = False
        elif isinstance(element, OptionalGroup):
            shown = emit and present(op, element.anchor)
            unit_anchor = (isinstance(element.anchor, AttrRef)
                           and element.anchor.spec.kind is AttrKind.UNIT)
            _walk(element.elements, op, ctx, out, shown, element.anchor if unit_anchor else None)
        elif isinstance(element, AttrDict):
            if emit:
                extra = [(a.name, op.attrs[a.name]) for a, elided in element.keyword_attrs
                         if op.attrs[a.name].keyword != elided]
                if extra:
                    out.parts.append(" attributes {" + ", ".join(
                        f"{name} = #cuda_tile.{enum_attr_mnemonic(type(value))}<{value.keyword}>"
                        for name, value in extra) + "}")
            out.should_space, out.last_punct = True, False
        else:
            if emit:
                text, drop_space = _element_text(element, op, ctx)
                if out.should_space and not (drop_space and not text):
                    out.parts.append(" ")
                out.parts.append(text)
            out.should_space, out.last_punct = True, False


def _element_text(element, op: Op, ctx: _Context):
    if isinstance(element, OperandRef):
        group = op.operands.get(element.name)
        if group is None:
            return "", False
        if isinstance(group, tuple):
            return ", ".join(ctx.names.ref(v) for v in group), False
        return ctx.names.ref(group), False
    if isinstance(element, AttrRef):
        return attr_text(element.spec, op.attrs[element.name]), False
    if isinstance(element, TypeRef):
        return ", ".join(map(str, _types_of(op, element))), False
    if isinstance(element, Custom):
        function, drop_space = DIRECTIVES[element.name]
        return function(op, ctx, *element.args), drop_space
    raise TilebcError(f"{op.name}: cannot print syntax element {element!r}")


# ---- each op's printer, written out from its syntax -------------------------------------------
#
# `_walk` above interprets an op's elements for every op it prints. MLIR's spacing flags depend
# only on the elements, never on the op, so each op kind's body can be written out once as Python
# (spaces and literals folded into constants, optional groups as `if`s) and compiled at first use.
# `_walk` prints the first few ops of each kind (a small module is not worth compiling for).

def _attr_dict_text(op: Op, element: AttrDict) -> str:
    extra = [(a.name, op.attrs[a.name]) for a, elided in element.keyword_attrs
             if op.attrs[a.name].keyword != elided]
    if not extra:
        return ""
    return " attributes {" + ", ".join(
        f"{name} = #cuda_tile.{enum_attr_mnemonic(type(value))}<{value.keyword}>"
        for name, value in extra) + "}"


class _Writer:
    """Source of one op kind's `body(op, ctx)`: what `_walk` appends, as straight-line code."""

    def __init__(self):
        self.lines: list[str] = []
        self.constants: dict[str, object] = {}
        self.pending = ""    # literal text not yet appended
        self.indent = "    "
        self.should_space = True
        self.last_punct = False

    def constant(self, value) -> str:
        name = f"K{len(self.constants)}"
        self.constants[name] = value
        return name

    def text(self, value: str) -> None:
        self.pending += value

    def flush(self) -> None:
        if self.pending:
            self.lines.append(f"{self.indent}append({self.pending!r})")
            self.pending = ""

    def code(self, *lines: str) -> None:
        self.flush()
        self.lines += [self.indent + line for line in lines]

    def space(self) -> None:
        """The automatic space before a non-literal element."""
        if self.should_space:
            self.text(" ")

    def elements(self, elements, skip=None) -> None:
        for element in elements:
            if element is skip:
                continue
            if isinstance(element, Literal):
                if self.should_space and space_before_literal(element.text, self.last_punct):
                    self.text(" ")
                self.text(element.text)
                self.should_space, self.last_punct = after_literal(element.text)
                continue
            if isinstance(element, Space):
                if element.emit:
                    self.text(" ")
                self.last_punct = not element.emit
                self.should_space = False
                continue
            if isinstance(element, OptionalGroup):
                self.optional(element)
                continue
            if isinstance(element, AttrDict):
                if element.keyword_attrs:  # a plain attr-dict prints nothing (tilebc keeps none)
                    self.code(f"append(_attr_dict_text(op, {self.constant(element)}))")
            else:
                self.value(element)
            self.should_space, self.last_punct = True, False

    def attr_text(self, element: AttrRef) -> str:
        """The expression of an attribute's text."""
        kind = element.spec.kind
        value = f"attrs[{element.name!r}]"
        if kind is AttrKind.ENUM:
            return f"{value}.keyword"
        if kind is AttrKind.INT:
            return f"str({value})"
        return f"attr_text({self.constant(element.spec)}, {value})"

    def optional(self, group: OptionalGroup) -> None:
        anchor = group.anchor
        if isinstance(anchor, OperandRef):
            self.code(f"g = operands.get({anchor.name!r})",
                      "if (bool(g) if isinstance(g, tuple) else g is not None):")
        elif isinstance(anchor, AttrRef) and anchor.spec.kind is AttrKind.UNIT:
            self.code(f"if attrs.get({anchor.name!r}):")
        elif isinstance(anchor, AttrRef) and anchor.spec.optional:
            self.code(f"if attrs.get({anchor.name!r}) is not None:")
        elif isinstance(anchor, AttrRef):
            self.code(f"if _attr_present(op, {self.constant(anchor.spec)}):")
        else:
            self.code(f"if present(op, {self.constant(anchor)}):")
        unit_anchor = isinstance(anchor, AttrRef) and anchor.spec.kind is AttrKind.UNIT
        self.inside(group, anchor if unit_anchor else None)

    def inside(self, group: OptionalGroup, skip=None) -> None:
        """The group's elements, indented under the condition just written."""
        outer = self.indent
        self.indent += "    "
        mark = len(self.lines)
        self.elements(group.elements, skip)
        self.flush()
        if len(self.lines) == mark:
            self.lines.append(self.indent + "pass")
        self.indent = outer

    def value(self, element) -> None:
        if isinstance(element, OperandRef):
            self.space()
            self.code(f"g = operands.get({element.name!r})",
                      "if g is None:",
                      "    pass",
                      "elif isinstance(g, tuple):",
                      "    append(', '.join([ref(v) for v in g]))",
                      "else:",
                      "    append(ref(g))")
        elif isinstance(element, AttrRef):
            self.space()
            self.code(f"append({self.attr_text(element)})")
        elif isinstance(element, TypeRef):
            self.space()
            if element.operand is not None:
                self.code(f"g = operands.get({element.name!r})",
                          "if g is None:",
                          "    pass",
                          "elif isinstance(g, tuple):",
                          "    append(', '.join([tt(v.type) for v in g]))",
                          "else:",
                          "    append(tt(g.type))")
            elif not element.variadic:
                self.code(f"append(tt(op.results[{element.result}].type))")
            else:
                self.code(f"append(', '.join(map(str, _types_of(op, "
                          f"{self.constant(element)}))))")
        elif isinstance(element, Custom):
            function, drop_space = DIRECTIVES[element.name]
            call = f"{self.constant(function)}(op, ctx, *{self.constant(element.args)})"
            if drop_space and self.should_space:
                self.code(f"t = {call}", "if t:", "    append(' ')", "append(t)")
            else:
                self.space()
                self.code(f"append({call})")
        else:
            self.code(f"raise TilebcError(f'{{op.name}}: cannot print syntax element "
                      f"{{{self.constant(element)}!r}}')")


_PLAIN_LITERAL = re.compile(r"[A-Za-z0-9 _.,:;=<>()\[\]#%@!?+*/-]*\Z")


class _FastWriter(_Writer):
    """Source of `body(op, ctx)` for ops shaped as their spec declares (each single operand a
    Value, each optional one None or a Value, each variadic group a tuple): the operand groups
    are read once, and each run of elements outside an optional group is one f-string. An op
    shaped otherwise (IR built by hand) goes to GENERIC, _Writer's body for the kind."""

    def __init__(self, spec):
        super().__init__()
        self.spec = spec
        self.parts: list[str] = []  # f-string pieces not yet appended: text, or {expression}

    def text(self, value: str) -> None:
        if _PLAIN_LITERAL.match(value):
            self.parts.append(value)
        else:
            self.parts.append("{" + self.constant(value) + "}")

    def expression(self, source: str) -> None:
        self.parts.append("{" + source + "}")

    def flush(self) -> None:
        if self.parts:
            self.lines.append(f'{self.indent}append(f"{"".join(self.parts)}")')
            self.parts = []

    def prologue(self) -> list[str]:
        operands = self.spec.operands
        lines = ["def body(op, ctx):"]
        if operands:
            lines += ["    operands = op.operands", "    try:"]
            lines += [f"        g{i} = operands[{o.name!r}]" for i, o in enumerate(operands)]
            lines += ["    except KeyError:", "        return GENERIC(op, ctx)"]
            shaped = []
            for i, operand in enumerate(operands):
                if operand.arity is Arity.ONE:
                    shaped.append(f"g{i}.__class__ is Value")
                elif operand.arity is Arity.OPTIONAL:
                    shaped.append(f"(g{i} is None or g{i}.__class__ is Value)")
                else:
                    shaped.append(f"g{i}.__class__ is tuple")
            lines += [f"    if not ({' and '.join(shaped)}):", "        return GENERIC(op, ctx)"]
        return lines

    def source(self) -> str:
        self.flush()
        body = self.lines
        if len(body) == 1 and body[0].startswith("    append("):  # one f-string: returned
            body = ["    return " + body[0][len("    append("):-1]]
        else:
            body = ["    parts = []", "    append = parts.append", *body,
                    "    return ''.join(parts)"]
        text = "\n".join(body)
        names = [line for word, line in (("attrs", "    attrs = op.attrs"),
                                         ("ref(", "    ref = ctx.names.ref"),
                                         ("tt(", "    tt = ctx.printer.type_text"),
                                         ("known(", "    known = tt.known"))
                 if word in text]
        return "\n".join(self.prologue() + names + body)

    @staticmethod
    def type_text(value: str) -> str:
        """The text of the type `value` (an expression without side effects): looked up by
        identity here, type_text (a call) only for one not printed yet."""
        return f"(known(id({value})) or tt({value}))"

    def operand(self, index: int, each: str) -> str:
        """The text of operand group `index`, `each` (a template: "ref({0})") of each value."""
        group = f"g{index}"
        arity = self.spec.operands[index].arity
        if arity is Arity.ONE:
            return each.format(group)
        if arity is Arity.OPTIONAL:
            return f"({each.format(group)} if {group} is not None else '')"
        return f"', '.join([{each.format('v')} for v in {group}])"

    def optional(self, group: OptionalGroup) -> None:
        anchor = group.anchor
        if isinstance(anchor, OperandRef):
            arity = self.spec.operands[anchor.index].arity
            if arity is Arity.ONE:  # always present in a shaped op
                self.elements(group.elements)
                return
            self.code(f"if g{anchor.index}:" if arity is Arity.VARIADIC
                      else f"if g{anchor.index} is not None:")
            self.inside(group)
            return
        super().optional(group)

    def elements(self, elements, skip=None) -> None:
        for element in elements:
            if element is skip:
                continue
            if isinstance(element, AttrDict):
                if element.keyword_attrs:
                    self.expression(f"_attr_dict_text(op, {self.constant(element)})")
                self.should_space, self.last_punct = True, False
                continue
            super().elements((element,))

    def value(self, element) -> None:
        if isinstance(element, OperandRef):
            self.space()
            self.expression(self.operand(element.index, "ref({0})"))
        elif isinstance(element, AttrRef):
            self.space()
            self.expression(self.attr_text(element))
        elif isinstance(element, TypeRef):
            self.space()
            if element.operand is not None:
                self.expression(self.operand(element.operand, self.type_text("{0}.type")))
            elif not element.variadic:
                self.expression(self.type_text(f"op.results[{element.result}].type"))
            else:
                self.expression(f"', '.join([tt(t) for t in _types_of(op, "
                                f"{self.constant(element)})])")
        elif isinstance(element, Custom):
            function, drop_space = DIRECTIVES[element.name]
            if drop_space and self.should_space:
                super().value(element)  # statements: a space only before a non-empty text
            else:
                self.space()
                self.expression(f"{self.constant(function)}(op, ctx, "
                                f"*{self.constant(element.args)})")
        else:
            super().value(element)


# The steps of a body program (print_ops runs them in C, tilebc/_printer.c): each a tuple, its
# first item one of these.
STEP_TEXT = 0         # (STEP_TEXT, text)
STEP_REF = 1          # (STEP_REF, operand name): the use of a single operand
STEP_REFS = 2         # (STEP_REFS, operand name): the uses of a variadic group, ", " between
STEP_TYPE = 3         # (STEP_TYPE, operand name): a single operand's type
STEP_TYPES = 4        # (STEP_TYPES, operand name): a variadic group's types, ", " between
STEP_RESULT_TYPE = 5  # (STEP_RESULT_TYPE, index): a result's type
STEP_KEYWORD = 6      # (STEP_KEYWORD, attribute name): an enum attribute's keyword
STEP_CALL = 7         # (STEP_CALL, directive, args): directive(op, ctx, *args)
STEP_GROUP = 8        # (STEP_GROUP, test, argument, steps): an optional group, printed when
#                       the test passes (PRINT_PROGRAMS 2 on)
STEP_ATTRIBUTE_TEXT = 9  # (STEP_ATTRIBUTE_TEXT, directive, args, attribute name): the text the
#                       print keeps for that attribute object, else the directive's (3 on)
# The tests of a group: its anchor operand present (a Value, or a non-empty variadic group); the
# anchor attribute true, or not None; test(op, *args) true for any other anchor (argument:
# (test, args)); the anchor attribute (None when absent) unequal to its fixed default (argument:
# (name, default); PRINT_PROGRAMS 3 on).
GROUP_OPERAND, GROUP_ATTR_TRUE, GROUP_ATTR_SET, GROUP_CALL, GROUP_NOT_DEFAULT = range(5)


def _attribute_step(op: Op, ctx, spec) -> str:
    """An attribute's text, as a call step (directive(op, ctx, *args))."""
    return attr_text(spec, op.attrs[spec.name])


def _attr_dict_step(op: Op, ctx, element: AttrDict) -> str:
    return _attr_dict_text(op, element)


class _NoProgram(Exception):
    """The op kind's syntax needs more than a body program has."""


class _ProgramWriter(_Writer):
    """The body of an op kind as steps for print_ops' C loop: literals, operands and their
    types, result types, attributes, directives and optional groups (syntax holding a region
    has none). The kind's fast printer (_FastWriter) prints the same text; an op the steps
    cannot print (shaped otherwise than declared, a name or type missing, a directive failing)
    is printed by it."""

    def __init__(self, spec):
        super().__init__()
        self.spec = spec
        self.steps: list[tuple] = []
        # the optional operands and attributes the enclosing groups are anchored on: present
        self.present: frozenset = frozenset()

    def text(self, value: str) -> None:
        if self.steps and self.steps[-1][0] == STEP_TEXT:
            self.steps[-1] = (STEP_TEXT, self.steps[-1][1] + value)
        else:
            self.steps.append((STEP_TEXT, value))

    def flush(self) -> None:
        pass

    def code(self, *lines: str) -> None:
        raise _NoProgram()

    def optional(self, group: OptionalGroup) -> None:
        if speedups.PRINT_PROGRAMS < 2:  # an older extension runs no group
            raise _NoProgram()
        anchor, skip = group.anchor, None
        operand = anchor.operand if isinstance(anchor, TypeRef) else \
            anchor.index if isinstance(anchor, OperandRef) else None
        if operand is not None:
            spec = self.spec.operands[operand]
            if spec.arity is Arity.ONE:  # always present in a shaped op
                self.elements(group.elements)
                return
            test, argument, anchored = GROUP_OPERAND, spec.name, spec.name
        elif isinstance(anchor, AttrRef) and anchor.spec.kind is AttrKind.UNIT:
            test, argument, anchored, skip = GROUP_ATTR_TRUE, anchor.name, None, anchor
        elif isinstance(anchor, AttrRef) and anchor.spec.optional:
            test, argument, anchored = GROUP_ATTR_SET, anchor.name, anchor.name
        elif isinstance(anchor, AttrRef) and anchor.spec.default is not None \
                and not callable(anchor.spec.default) and speedups.PRINT_PROGRAMS >= 3:
            # _attr_present of a fixed default
            test, argument = GROUP_NOT_DEFAULT, (anchor.name, anchor.spec.default)
            anchored = anchor.name
        elif isinstance(anchor, AttrRef):
            test, argument, anchored = GROUP_CALL, (_attr_present, (anchor.spec,)), anchor.name
        else:
            test, argument, anchored = GROUP_CALL, (present, (anchor,)), None
        outer, outer_present = self.steps, self.present
        self.steps = []
        if anchored is not None:
            self.present = outer_present | {anchored}
        try:
            self.elements(group.elements, skip)
            inner = tuple(self.steps)
        finally:
            self.steps, self.present = outer, outer_present
        self.steps.append((STEP_GROUP, test, argument, inner))

    def elements(self, elements, skip=None) -> None:
        for element in elements:
            if element is skip:
                continue
            if isinstance(element, AttrDict):  # as _Writer writes it, a step
                if element.keyword_attrs:
                    self.steps.append((STEP_CALL, _attr_dict_step, (element,)))
                self.should_space, self.last_punct = True, False
                continue
            super().elements((element,))

    def _arity(self, index: int):
        arity = self.spec.operands[index].arity
        if arity is Arity.OPTIONAL and self.spec.operands[index].name in self.present:
            return Arity.ONE  # inside a group anchored on it
        return arity

    def value(self, element) -> None:
        if isinstance(element, OperandRef):
            arity = self._arity(element.index)
            step = STEP_REF if arity is Arity.ONE else STEP_REFS if arity is Arity.VARIADIC \
                else None
            if step is None:
                raise _NoProgram()
            self.space()
            self.steps.append((step, element.name))
        elif isinstance(element, AttrRef):
            optional = element.spec.optional and element.name not in self.present
            if optional or element.spec.kind is AttrKind.UNIT:
                raise _NoProgram()
            self.space()
            if element.spec.kind is AttrKind.ENUM:
                self.steps.append((STEP_KEYWORD, element.name))
            else:
                self.steps.append((STEP_CALL, _attribute_step, (element.spec,)))
        elif isinstance(element, TypeRef):
            if element.operand is not None:
                arity = self._arity(element.operand)
                step = STEP_TYPE if arity is Arity.ONE else STEP_TYPES \
                    if arity is Arity.VARIADIC else None
                if step is None:
                    raise _NoProgram()
                self.space()
                self.steps.append((step, self.spec.operands[element.operand].name))
            elif not element.variadic and element.result is not None:
                self.space()
                self.steps.append((STEP_RESULT_TYPE, element.result))
            else:
                raise _NoProgram()
        elif isinstance(element, Custom):
            function, drop_space = DIRECTIVES[element.name]
            if drop_space and self.should_space:
                raise _NoProgram()  # a space only before a non-empty text
            if function in (_region, _argument_region):
                # a region's text is printed once: a failing step would print it again
                raise _NoProgram()
            self.space()
            if getattr(function, "attribute_text", False) and speedups.PRINT_PROGRAMS >= 3:
                self.steps.append((STEP_ATTRIBUTE_TEXT, function, tuple(element.args),
                                   element.args[0].name))
            else:
                self.steps.append((STEP_CALL, function, tuple(element.args)))
        else:
            raise _NoProgram()


def body_program(spec) -> tuple | None:
    """(shapes, steps) of `spec`'s op body for print_ops' C loop, or None where its syntax needs
    the fast printer. `shapes` has each operand group's (name, 0 one / 1 optional / 2 variadic):
    an op shaped otherwise goes to the fast printer, as that printer sends it to the generic."""
    writer = _ProgramWriter(spec)
    try:
        writer.elements(compile_syntax(spec))
    except _NoProgram:
        return None
    shapes = tuple((operand.name, ARITY_CODES[operand.arity]) for operand in spec.operands)
    return shapes, tuple(writer.steps)


def _type_texts():
    """str(type), remembered by identity for one print (a module shares its type objects)."""
    cache: dict[int, str] = {}
    keep = []  # the types whose ids key the cache stay alive while it does

    def type_text(value) -> str:
        text = cache.get(id(value))
        if text is None:
            text = cache[id(value)] = str(value)
            keep.append(value)
        return text
    type_text.known = cache.get  # id(type) -> its text once made: the fast printers' first try
    type_text.texts = cache  # the same, for print_ops' body programs
    return type_text


def _op_printer_source(spec) -> tuple:
    """(source of `body(op, ctx)` for ops of `spec`, the constants it names)."""
    writer = _Writer()
    writer.elements(compile_syntax(spec))
    writer.flush()
    head = ["def body(op, ctx):",
            "    operands = op.operands",
            "    attrs = op.attrs",
            "    ref = ctx.names.ref",
            "    tt = ctx.printer.type_text",
            "    parts = []",
            "    append = parts.append"]
    return "\n".join(head + writer.lines + ["    return ''.join(parts)"]) + "\n", writer.constants


def _fast_printer_source(spec) -> tuple:
    """(source of the fast `body(op, ctx)` for ops of `spec` shaped as declared, its constants)."""
    writer = _FastWriter(spec)
    writer.elements(compile_syntax(spec))
    return writer.source() + "\n", writer.constants


def _generic_printer(spec):
    """`body(op, ctx)` for every op of `spec` (_Writer's), compiled on the first op that needs it."""
    compiled = []

    def generic(op, ctx):
        if not compiled:
            source, constants = _op_printer_source(spec)
            namespace = {**_PRINTER_NAMES, **constants}
            exec(compile_generated(source, f"<tilebc printer {spec.mnemonic}>"), namespace)
            compiled.append(namespace["body"])
        return compiled[0](op, ctx)
    return generic


# id(spec) -> (spec, its compiled body printer); the spec rides along so an id is never reused
_OP_PRINTERS: dict[int, tuple] = {}
_USES: dict[int, int] = {}  # id(spec) -> ops of the kind printed by the walker so far
# How many ops of a kind `_walk` prints before the kind's printer is compiled: compiling costs
# more than walking the elements of a few ops (tests set 0 to print everything compiled).
COMPILE_AFTER = 8


# what the generated body printers name
_PRINTER_NAMES = {"_attr_dict_text": _attr_dict_text, "_attr_present": _attr_present,
                  "_types_of": _types_of, "present": present, "attr_text": attr_text,
                  "TilebcError": TilebcError, "Value": Value}


def op_printer(spec):
    """The compiled `body(op, ctx)` of ops of `spec`: their text after the op name, without
    the location (what `_walk` produces for the op)."""
    found = _OP_PRINTERS.get(id(spec))
    if found is not None and found[0] is spec:
        return found[1]
    source, constants = _fast_printer_source(spec)
    namespace = {**_PRINTER_NAMES, "GENERIC": _generic_printer(spec), **constants}
    exec(compile_generated(source, f"<tilebc fast printer {spec.mnemonic}>"), namespace)
    # the spec, its fast printer, and its body program for print_ops (None: the printer's)
    _OP_PRINTERS[id(spec)] = (spec, namespace["body"], body_program(spec))
    return namespace["body"]


def op_body(op: Op, ctx: _Context, compile_after: int | None = None) -> str:
    """The op's text after its name, without the location: walked for the first ops of a kind
    (COMPILE_AFTER, or `compile_after`), then by the kind's compiled printer."""
    spec = op.spec
    found = _OP_PRINTERS.get(id(spec))
    if found is not None and found[0] is spec:
        return found[1](op, ctx)
    uses = _USES.get(id(spec), 0)
    if uses >= (COMPILE_AFTER if compile_after is None else compile_after):
        return op_printer(spec)(op, ctx)
    _USES[id(spec)] = uses + 1
    out = _Out()
    _walk(compile_syntax(spec), op, ctx, out, True)
    return "".join(out.parts)


# ---- module structure ----------------------------------------------------------------------------

def _visit_locations(ops, aliases) -> None:
    """aliases.visit(op.loc) for `ops` and the ops nested in them, in pre-order (Function.walk's
    order); in C where tilebc._speedups is built (visit_locations, alias_visit)."""
    if speedups.visit_locations is not None:
        aliases.visit_ops_in_c(ops)
        return
    visit = aliases.visit
    for op in ops:
        visit(op.loc)
        for region in op.regions:
            for block in region.blocks:
                _visit_locations(block.ops, aliases)


def _aliases() -> LocationAliases:
    from .debuginfo import LocationAliases  # only -g prints locations
    return LocationAliases()


class _ModulePrinter:
    def __init__(self, module: Module, debug: bool, mlir: bool = False):
        self.module = module
        self.debug = debug
        self.mlir = mlir
        self.generic = False
        self.aliases: LocationAliases | None = None
        self.given_aliases = None  # module_text_pieces(aliases=...)
        # id(entry signature) -> (signature, parameter types, their text): see function()
        self._entry_args: dict[int, tuple] = {}
        self.type_text = _type_texts()
        self.attribute_texts: dict[int, tuple] = {}  # id(attribute) -> (attribute, its text)
        self.compile_after = 0 if compiles_at_once(module) else None  # op_body's

    def pieces(self) -> Iterator[str]:
        """The text: each global and entry a piece, then (-g) the aliases' definitions."""
        module = self.module
        if self.mlir:
            yield self._run_mlir()
            return
        if not module.globals and not module.functions:
            # MLIR prints an empty module as an empty line; with -g its own (unknown) location
            # still gets an alias
            yield "\n#loc = loc(unknown)\n" if self.debug else "\n"
            return
        if self.given_aliases is not None:
            self.aliases = self.given_aliases
        elif self.debug:  # aliases are numbered in order of first use, before any is printed
            self.aliases = _aliases()
            for _ in module.globals:
                self.aliases.visit(None)
            for function in module.functions:
                self.aliases.visit(function.loc)
                _visit_locations(function.body.ops, self.aliases)
            self.aliases.finish()
        for value in module.globals:
            yield self.global_(value) + "\n"
        for function in module.functions:
            yield self.function(function) + "\n"
        if self.debug:
            yield self.aliases.definitions_text()

    def _run_mlir(self) -> str:
        module = self.module
        if self.debug:
            self.aliases = _aliases()
            for item in module_items(module):
                self.aliases.visit(getattr(item, "loc", None))
                for op in (item.walk() if isinstance(item, Function) else ()):
                    self.aliases.visit(op.loc)
            self.aliases.visit(None)
            self.aliases.finish()
        lines = [f"cuda_tile.module {V.symbol(module.name)} {{"]
        for item in module_items(module):
            text = self.global_(item) if isinstance(item, Global) else self.function(item)
            lines += [INDENT + line if line else line for line in text.split("\n")]
        lines.append("}" + self.loc(None))
        if self.debug:
            lines += self.aliases.definitions()
        return "".join(line + "\n" for line in lines)

    def loc(self, loc) -> str:
        return " " + self.aliases.ref(loc) if self.debug else ""

    def global_(self, value: Global) -> str:
        if self.mlir:  # MLIR's own spacing (tileirdisasm doubles a space)
            words = [GLOBAL_OP.mnemonic] + ([value.visibility.keyword]
                                 if value.visibility.keyword != "public" else [])
            text = " ".join(words + (["constant"] if value.constant else [])
                            + [V.symbol(value.name)])
            if value.alignment:
                text += f" alignment = {value.alignment}"
            return text + " " + V.dense_constant(value.value) + self.loc(None)
        text = "global "
        if value.visibility.keyword != "public":
            text += value.visibility.keyword + " "
        if value.constant:
            text += " constant"
        text += " " + V.symbol(value.name)
        if value.alignment:
            text += f" alignment = {value.alignment}"
        return text + " " + V.dense_constant(value.value) + self.loc(None)

    def function(self, function: Function) -> str:
        names = FunctionNames(function)
        tt = self.type_text
        attrs = function.arg_attrs
        if attrs is None or not any(isinstance(e, A.DictionaryAttr) and e.entries
                                    for e in attrs.elements):  # no parameter shows attributes
            # `%arg0: type, …`: the same text for the entries of one signature (they share it)
            types = [a.type for a in function.args]
            found = self._entry_args.get(id(function.type)) if names.plain_arguments else None
            if found is not None and found[0] is function.type and found[1] == types:
                args = found[2]
            else:
                ref = names.ref
                args = ", ".join([f"{ref(a)}: {tt(a.type)}" for a in function.args])
                if names.plain_arguments:
                    self._entry_args[id(function.type)] = (function.type, types, args)
        else:
            args = ", ".join(f"{names.ref(a)}: {tt(a.type)}{self.arg_attrs(function, i)}"
                             for i, a in enumerate(function.args))
        keyword = "testing$func" if getattr(function, "testing", False) else ENTRY_OP.mnemonic
        text = f"{keyword} {V.symbol(function.name)}({args})"
        results = function.type.results
        if results:
            text += " -> " + (str(results[0]) if len(results) == 1
                              else "(" + ", ".join(map(str, results)) + ")")
        hints = function.optimization_hints
        if hints is not None and hints.entries:
            text += " optimization_hints=" + V.hints(hints)
        ctx = _Context(self, names, "")
        text += " " + self.block_body(function.body, ctx, implicit_terminator=None)
        # reading a location decodes debug info: a plain print never asks
        return text + self.loc(function.loc) if self.debug else text

    @staticmethod
    def arg_attrs(function: Function, index: int) -> str:
        """` {cuda_tile.x = 1 : i32}` after a parameter's type; empty dictionaries print nothing."""
        elements = function.arg_attrs.elements if function.arg_attrs is not None else ()
        if index >= len(elements) or not isinstance(elements[index], A.DictionaryAttr) \
                or not elements[index].entries:
            return ""
        return " " + V.dictionary(elements[index])

    def region(self, region: Region, ctx: _Context, implicit_terminator=None) -> str:
        if len(region.blocks) != 1:
            raise TilebcError(f"cannot print a region with {len(region.blocks)} blocks")
        return self.block_body(region.blocks[0], ctx, implicit_terminator)

    def block_body(self, block: Block, ctx: _Context, implicit_terminator) -> str:
        inner = _Context(self, ctx.names, ctx.indent + INDENT)
        ops = block.ops
        if (implicit_terminator and ops and ops[-1].name == implicit_terminator
                and not ops[-1].operand_values):
            ops = ops[:-1]
        indent = inner.indent
        op_text = self.op
        print_ops = speedups.print_ops
        if print_ops is not None and not self.generic:  # the same loop in C (tilebc/_printer.c)
            body = print_ops(op_text, ops, inner, indent, _OP_PRINTERS, ctx.names.refs,
                             self.aliases if self.debug else None, self._cannot_print,
                             *((Value,) if speedups.PRINT_PROGRAMS else ()))
        else:
            body = "".join([indent + op_text(op, inner) + "\n" for op in ops])
        return "{\n" + body + ctx.indent + "}"

    def generic_op(self, op: Op, ctx: _Context) -> str:
        spec = op.spec
        values = op.operand_values
        text = f'"cuda_tile.{op.name}"(' + ", ".join(ctx.names.ref(v) for v in values) + ")"
        if op.regions:
            text += " (" + ", ".join(self.generic_region(r, ctx) for r in op.regions) + ")"
        attrs = []
        for attr in spec.attrs:
            value = op.attrs.get(attr.name)
            if attr.kind is AttrKind.UNIT:
                if value:
                    attrs.append(attr.name)
            elif value is not None:
                attrs.append(f"{attr.name} = {generic_attr_text(op, attr, value)}")
        if len(spec.operands) > 1 and any(o.arity.name != "ONE" for o in spec.operands):
            sizes = []
            for operand in spec.operands:
                group = op.operands.get(operand.name)
                sizes.append(len(group) if isinstance(group, tuple) else int(group is not None))
            attrs.append("operandSegmentSizes = array<i32: " + ", ".join(map(str, sizes)) + ">")
        if attrs:
            text += " {" + ", ".join(attrs) + "}"
        results = [str(r.type) for r in op.results]
        text += " : (" + ", ".join(str(v.type) for v in values) + ") -> " + (
            results[0] if len(results) == 1 else "(" + ", ".join(results) + ")")
        prefix = ""
        if op.results:
            heads = []
            for start, count in ctx.names.result_groups(op):
                heads.append("%" + ctx.names.text[op.results[start]]
                             + (f":{count}" if count > 1 else ""))
            prefix = ", ".join(heads) + " = "
        return prefix + text + self.loc(op.loc) if self.debug else prefix + text

    def generic_region(self, region: Region, ctx: _Context) -> str:
        if not region.blocks:
            return "{\n" + ctx.indent + "}"
        block = region.blocks[0]
        inner = _Context(self, ctx.names, ctx.indent + INDENT)
        head = ""
        if block.args:
            head = inner.indent + "^bb0(" + ", ".join(
                f"{ctx.names.ref(a)}: {a.type}" for a in block.args) + "):\n"
        lines = [inner.indent + self.generic_op(op, inner) for op in block.ops]
        return "{\n" + head + "".join(line + "\n" for line in lines) + ctx.indent + "}"

    def _cannot_print(self, op: Op, error: Exception) -> TilebcError:
        """The error for an op whose printer failed with `error` (print_ops raises it too)."""
        return TilebcError(f"cannot print {op.name}: its operands, attributes or types do not "
                           f"have the shapes the op's syntax needs ({type(error).__name__}: "
                           f"{error}); `tilebc verify` names the rule", file=self.module.source,
                           offset=op.offset)

    def op(self, op: Op, ctx: _Context) -> str:
        if self.generic:
            return self.generic_op(op, ctx)
        try:
            spec = op.spec
            found = _OP_PRINTERS.get(id(spec))
            body = found[1](op, ctx) if found is not None and found[0] is spec \
                else op_body(op, ctx, self.compile_after)
        except (AttributeError, TypeError, KeyError, IndexError, ValueError) as error:
            # Only IR that breaks the op's typing rules gets here (the verifier would refuse it).
            raise self._cannot_print(op, error) from None
        results = op.results
        loc = " " + self.aliases.ref(op.loc) if self.debug else ""
        if not results:
            return spec.mnemonic + body + loc
        names = ctx.names
        if len(results) == 1:
            return names.refs[results[0]] + " = " + spec.mnemonic + body + loc
        if id(op) not in names.groups:  # one result group
            return (f"%{names.text[results[0]]}:{len(results)} = " + spec.mnemonic + body
                    + loc)
        heads = []
        for start, count in names.result_groups(op):
            head = "%" + names.text[results[start]]
            heads.append(head + (f":{count}" if count > 1 else ""))
        return ", ".join(heads) + " = " + op.name + body + loc
