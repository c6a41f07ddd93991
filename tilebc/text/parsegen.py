"""Per-op parse functions generated from the op table's syntax declarations.

Each op kind's `syntax` (tilebc/text/syntax.py) becomes the source of one function
`body(p, state)`, compiled once (and kept on disk by tilebc/codecache.py), that reads the op's
text after its name as straight code: literals are compared inline, operands read by `p._use()`,
optional groups decided by the test their anchor implies, and attributes, types, attr-dicts and
custom directives handed to the parser's methods for them. `p` is the text parser
(tilebc/text/parser.py) and `state` its `_OpState` for the op. Errors are the parser's own: the
same message at the same position as walking the elements would give.
"""
from __future__ import annotations


from ..codecache import compile_generated
from ..ir import types as T
from ..ir.module import Value
from ..ops.enums import MemoryScope
from ..ops.spec import ARITY_CODES, Arity, AttrKind
from .types import TYPE_SPAN
from .syntax import (AttrDict, AttrRef, Custom, Literal, OperandRef, OptionalGroup, Space, TypeRef,
                     compile_syntax)


def view_memory_ordering(spec, attr, own_memory_parser) -> bool:
    """Whether `attr` is the memory ordering a kind of `own_memory_parser` reads together with
    its scope (`_Parser._view_memory_attributes`) rather than as a keyword."""
    return attr.name == "memory_ordering_semantics" and spec.mnemonic in own_memory_parser


class _Writer:
    """Collects the lines of one generated function and the constants they name."""

    def __init__(self, spec, parser_class, custom_enums, own_memory_parser):
        self.spec = spec
        self.parser_class = parser_class  # whose `_custom_<name>` methods read directives
        self.custom_enums = custom_enums
        self.own_memory_parser = own_memory_parser
        self.lines: list[str] = []
        self.constants: dict[str, object] = {}
        self.indent = "    "
        self.temporaries = 0
        self.fresh = False  # whether `t` holds the next token (nothing read since it was peeked)

    def constant(self, value) -> str:
        name = f"K{len(self.constants)}"
        self.constants[name] = value
        return name

    def temporary(self) -> str:
        self.temporaries += 1
        return f"v{self.temporaries}"

    def code(self, *lines: str) -> None:
        self.lines += [self.indent + line for line in lines]
        self.fresh = False

    def peeked(self) -> None:
        """`t` = the next token, reusing the peeked one (as Cursor.accept does)."""
        if not self.fresh:
            self.code("t = c._peeked",
                      "if t is None or t.pos < c.pos:",
                      "    t = c.peek()")
            self.fresh = True

    def elements(self, elements) -> None:
        for element in elements:
            if isinstance(element, Literal):
                self.literal(element.text)
            elif isinstance(element, Space):
                continue
            elif isinstance(element, OperandRef):
                self.operand(element)
            elif isinstance(element, OptionalGroup):
                self.optional(element)
            elif isinstance(element, AttrRef):
                self.attr(element)
            elif isinstance(element, TypeRef):
                self.type_ref(element)
            elif isinstance(element, AttrDict):
                self.attr_dict(element)
            elif isinstance(element, Custom):
                self.custom(element)
            else:  # a new element kind the generator does not know: refused where it is met
                self.code(f"raise c.error({self.constant(f'cannot parse element {element!r}')})")

    def literal(self, text: str) -> None:
        self.peeked()
        self.code(f"if t.text == {text!r}:",
                  f"    c.pos = c.end = t.pos + {len(text)}",
                  "    c._peeked = None",
                  "else:",
                  f"    c.expect({text!r}, {('in ' + self.spec.mnemonic)!r})")

    def operand(self, element: OperandRef) -> None:
        if element.arity is not Arity.VARIADIC:
            self.code(f"operands[{element.name!r}] = use()")
            return
        # a comma-separated run of values; a comma not followed by a value is left for the
        # next element
        self.code("values = []",
                  "if c.peek().kind == 'value':",
                  "    values.append(use())",
                  "    while c.at(',') and p._next_is_value():",
                  "        c.next()",
                  "        values.append(use())",
                  f"operands[{element.name!r}] = tuple(values)")

    def attr(self, element: AttrRef) -> None:
        attr = element.spec
        target = f"attrs[{element.name!r}]"
        if attr.kind is AttrKind.ENUM:
            enum = self.constant(attr.enum)
            if attr.enum.__name__ in self.custom_enums:
                self.code(f"{target} = p._custom_enum({enum}, state)")
            elif view_memory_ordering(self.spec, attr, self.own_memory_parser):
                self.code(f"{target} = p._view_memory_attributes({enum})")
            else:
                self.code(f"{target} = p._enum_keyword({enum}, {attr.name!r})")
        else:
            self.code(f"{target} = p._attr_value({self.constant(attr)}, state)")

    def type_ref(self, element: TypeRef) -> None:
        spec = self.spec
        ref = self.constant(element)
        if element.operand is not None:
            # One value read before its type (the common case) inline; a group, an absent
            # optional operand or a type written before its operand by the parser's method.
            # table names reach the generated code as constants, never spliced into its text
            prefix = self.constant(f"{spec.mnemonic}: operand {element.name} has type ")
            self.code(f"g = operands.get({element.name!r})",
                      "if g.__class__ is Value:")
            self.indent += "    "
            self.read_type()
            self.indent = self.indent[:-4]
            self.code("    if g.type != found and state.mismatch is None:",
                      f"        state.mismatch = c.error({prefix} + f'{{g.type}}, but the text "
                      "says {found}', start)",
                      f"    state.operand_types[{element.name!r}] = [found]",
                      "else:",
                      f"    p._type_element({ref}, state)")
            return
        kind = spec.results[element.result].parsed_kind if element.result < len(spec.results) \
            else ""
        self.read_type()
        if kind:
            expected = self.constant(f"'cuda_tile.{spec.mnemonic}' expected '{kind}' type, but "
                                     "got '!cuda_tile.")
            self.code(f"if str(found).split('<', 1)[0] != {kind!r}:",
                      f"    raise c.error({expected} + str(found) + \"'\", start)")
        if element.variadic:
            self.code("types = [found]",
                      "while c.at(',') and not p._next_is_value():",
                      "    c.next()",
                      "    types.append(p.types.type())",
                      f"state.result_types[{element.result}] = types")
        else:
            self.code(f"state.result_types[{element.result}] = [found]")

    def read_type(self) -> None:
        """`found` = the type an op's custom form writes, `start` = where it starts. A type text
        read before is looked up without scanning its first word as a token (that word is an
        ident or bang token: every type text starts with a letter or `!cuda_tile.`)."""
        self.code("span = type_span(c.text, c.pos)",
                  "found = known_types.get(span.group(2)) if span is not None else None",
                  "if found is not None:",
                  "    start = span.start(2)",
                  "    c._peeked = None",
                  "    c.pos = c.end = span.end()",
                  "else:",
                  "    start = c.peek().pos",
                  "    found = custom_type(state)")

    def attr_dict(self, element: AttrDict) -> None:
        if element.keyword_attrs:  # the elided attributes take their keyword value: always called
            self.code(f"p._attr_dict({self.constant(element)}, state)")
            return
        self.peeked()
        self.code("if t.text == 'attributes' or t.text == '{':",
                  f"    p._attr_dict({self.constant(element)}, state)")

    def custom(self, element: Custom) -> None:
        name = "_custom_" + element.name
        if not hasattr(self.parser_class, name):
            self.code(f"raise c.error({self.constant(f'no parser for directive {element.name}')})")
            return
        args = "".join(", " + self.constant(arg) for arg in element.args)
        self.code(f"p.{name}(state{args})")

    def optional(self, group: OptionalGroup) -> None:
        anchor = group.anchor
        present = self.temporary()
        first = group.elements[0]
        settled = isinstance(anchor, TypeRef) and anchor.operand is not None
        if isinstance(first, Literal):
            if not settled:
                self.peeked()
            test = f"t.text == {first.text!r}"
        elif isinstance(first, OperandRef):
            test = "c.peek().kind == 'value'"
        elif isinstance(first, AttrRef) and first.spec.kind is AttrKind.ENUM:
            keywords = frozenset(m.keyword for m in first.spec.enum)
            test = f"c.peek().text in {self.constant(keywords)}"
        elif isinstance(first, TypeRef):
            test = "c.peek().kind in ('ident', 'bang')"
        else:
            test = None
        if test is None:  # no test for such a first element: refused where the group is met
            undecided = self.constant(f"cannot decide optional group starting with {first!r}")
            undecided = f"raise c.error({undecided})"
        if settled:
            # presence settled by the operand read before the types; else the token decides
            self.code(f"if {anchor.name!r} in operands:",
                      f"    g = operands[{anchor.name!r}]",
                      f"    {present} = bool(g) if isinstance(g, tuple) else g is not None",
                      "else:")
            if first.__class__ is Literal:
                self.code("    t = c._peeked",
                          "    if t is None or t.pos < c.pos:",
                          "        t = c.peek()")
            self.code(f"    {present} = {test}" if test else f"    {undecided}")
        elif test:
            self.code(f"{present} = {test}")
        else:
            self.code(undecided)
            return
        unit = isinstance(anchor, AttrRef) and anchor.spec.kind is AttrKind.UNIT
        literal_test = test is not None and test.startswith("t.text") and not settled
        self.code(f"if {present}:")
        outer = self.indent
        self.indent += "    "
        mark = len(self.lines)
        if unit:
            self.code(f"attrs[{anchor.name!r}] = True")
        self.fresh = literal_test  # the test only looked at `t`
        self.elements([child for child in group.elements if not (unit and child is anchor)])
        if len(self.lines) == mark:
            self.code("pass")
        self.indent = outer
        self.fresh = False


def op_parser_source(spec, parser_class, custom_enums, own_memory_parser) -> tuple:
    """(source of `body(p, state)` for ops of `spec`, the constants it names)."""
    writer = _Writer(spec, parser_class, custom_enums, own_memory_parser)
    writer.elements(compile_syntax(spec))
    head = ["def body(p, state):",
            "    c = p.c",
            "    use = p._use",
            "    custom_type = p._custom_type",
            "    known_types = p.types._known",
            "    type_span = TYPE_SPAN",
            "    operands = state.operands",
            "    attrs = state.attrs"]
    return "\n".join(head + writer.lines + ["    return None"]) + "\n", writer.constants


# ids of (spec, parser class, custom enums, memory parser) -> (spec, its compiled parse
# function); the spec rides along so an id is never reused
_OP_PARSERS: dict[tuple, tuple] = {}


def op_parser(spec, parser_class, custom_enums, own_memory_parser):
    """The compiled `body(p, state)` that reads ops of `spec` after their name."""
    key = (id(spec), id(parser_class), id(custom_enums), id(own_memory_parser))
    found = _OP_PARSERS.get(key)
    if found is not None and found[0] is spec:
        return found[1]
    source, constants = op_parser_source(spec, parser_class, custom_enums, own_memory_parser)
    namespace = {"Value": Value, "TYPE_SPAN": TYPE_SPAN, **constants}
    exec(compile_generated(source, f"<tilebc parser {spec.mnemonic}>"), namespace)
    _OP_PARSERS[key] = (spec, namespace["body"])
    return namespace["body"]


# ---- the same syntax as a program for tilebc._speedups.parse_ops --------------------------------

# Steps of a program (tilebc/_opparser.c reads them by these numbers).
(STEP_LITERAL, STEP_OPERAND, STEP_OPERANDS, STEP_ENUM, STEP_TYPE_OF, STEP_RESULT_TYPE,
 STEP_ATTR_DICT, STEP_PREDICATE, STEP_DENSE, STEP_ROUNDING, STEP_OPTIONAL, STEP_VIEW_ORDERING,
 STEP_INDEX_TYPES, STEP_MIXED_DIMS, STEP_TENSOR_VIEW_TYPES, STEP_INT) = range(16)
# How an optional group is found present: its first literal, a value next, an enum keyword next.
TEST_LITERAL, TEST_VALUE, TEST_KEYWORD, TEST_SETTLED = range(4)
# How an attribute the text did not give is filled in.
ATTR_ABSENT, ATTR_DEFAULT, ATTR_DEFAULT_FOR = range(3)
MAX_SLOTS = 16  # operands, attributes or results of a kind parse_ops reads (tilebc/_opparser.c)


class _Unsupported(Exception):
    """An element the C op parser does not read: the kind keeps its generated function only."""


def _program_steps(spec, elements, own_memory_parser, steps: list) -> None:
    attr_index = {a.name: i for i, a in enumerate(spec.attrs)}
    for element in elements:
        if isinstance(element, Space):
            continue
        if isinstance(element, Literal):
            steps.append((STEP_LITERAL, element.text))
        elif isinstance(element, OperandRef):
            steps.append((STEP_OPERANDS if element.arity is Arity.VARIADIC else STEP_OPERAND,
                          element.index))
        elif isinstance(element, AttrRef):
            attr = element.spec
            if attr.kind is AttrKind.INT:  # a decimal literal of the attribute's range
                steps.append((STEP_INT, attr_index[attr.name], -(1 << (attr.width - 1)),
                              (1 << attr.width) - 1))
                continue
            if attr.kind is not AttrKind.ENUM:
                raise _Unsupported
            if view_memory_ordering(spec, attr, own_memory_parser):
                # the ordering, and no scope after a weak one or a word that is no scope
                steps.append((STEP_VIEW_ORDERING, attr_index[attr.name], attr.enum.keywords(),
                              attr.enum.from_keyword("weak"),
                              MemoryScope.keywords()))
                continue
            # custom enums are read as plain ones when the keyword is known (their errors
            # differ, and an unknown keyword goes to the generated function)
            steps.append((STEP_ENUM, attr_index[attr.name], attr.enum.keywords()))
        elif isinstance(element, TypeRef):
            if element.operand is not None:
                steps.append((STEP_TYPE_OF, element.operand))
            elif element.variadic or element.result >= len(spec.results) \
                    or spec.results[element.result].variadic:
                raise _Unsupported
            else:
                steps.append((STEP_RESULT_TYPE, element.result,
                              spec.results[element.result].parsed_kind or None))
        elif isinstance(element, AttrDict):
            if element.keyword_attrs:
                raise _Unsupported
            steps.append((STEP_ATTR_DICT,))
        elif isinstance(element, Custom):
            if element.name == "AssumePredicate":
                steps.append((STEP_PREDICATE, attr_index[element.args[0].name]))
            elif element.name == "DenseConstant":
                steps.append((STEP_DENSE, attr_index[element.args[0].name]))
            elif element.name == "Rounding":
                steps.append((STEP_ROUNDING,))
            elif element.name == "IndexTypes":
                steps.append((STEP_INDEX_TYPES, element.args[0].index))
            elif element.name == "MixedDims":
                steps.append((STEP_MIXED_DIMS, element.args[0].index,
                              ("shape", "strides").index(element.args[1])))
            elif element.name == "TensorViewTypes":
                steps.append((STEP_TENSOR_VIEW_TYPES, T.TensorViewType))
            else:
                raise _Unsupported
        elif isinstance(element, OptionalGroup):
            _optional_steps(spec, element, own_memory_parser, steps, attr_index)
        else:
            raise _Unsupported


def _optional_steps(spec, group, own_memory_parser, steps, attr_index) -> None:
    anchor, first = group.anchor, group.elements[0]
    settled = isinstance(anchor, TypeRef) and anchor.operand is not None
    if isinstance(first, Literal):
        test, argument = TEST_LITERAL, first.text
    elif isinstance(first, OperandRef):
        test, argument = TEST_VALUE, None
    elif isinstance(first, AttrRef) and first.spec.kind is AttrKind.ENUM:
        test, argument = TEST_KEYWORD, first.spec.enum.keywords()
    else:
        raise _Unsupported
    if settled:  # presence settled by the operand when it was read, else by the test
        test, argument = TEST_SETTLED, (anchor.operand, test, argument)
    unit = isinstance(anchor, AttrRef) and anchor.spec.kind is AttrKind.UNIT
    inner: list = []
    try:
        _program_steps(spec, [e for e in group.elements if not (unit and e is anchor)],
                       own_memory_parser, inner)
    except _Unsupported:  # the group present: the op is the generated function's
        steps.append((STEP_OPTIONAL, test, argument, -1, -1))
        return
    steps.append((STEP_OPTIONAL, test, argument, len(inner),
                  attr_index[anchor.name] if unit else -1))
    steps.extend(inner)


def fast_program(spec, plan, parsed_op, own_memory_parser):
    """`spec`'s syntax as a program for tilebc._speedups.parse_ops (the same reading as the
    generated function, for ops written the usual way: anything else, and every error, is left to
    the generated function), built as `plan` (the parser's _BuildPlan of the kind) says, or None
    for a kind it does not read: regions, preview kinds, variadic results, directives it does not
    know."""
    if plan.regions or spec.preview or spec.structural or spec.unregistered \
            or any(r.variadic for r in spec.results) \
            or max(len(spec.operands), len(spec.attrs), len(spec.results)) > MAX_SLOTS:
        return None
    steps: list = []
    try:
        _program_steps(spec, compile_syntax(spec), own_memory_parser, steps)
    except _Unsupported:
        return None
    operand_index = {name: i for i, (name, _) in enumerate(plan.operands)}
    operands = tuple((name, ARITY_CODES[arity]) for name, arity in plan.operands)
    attrs = []
    for (name, needs_default, absent), attr in zip(plan.attrs, spec.attrs):
        if needs_default is None:
            attrs.append((name, ATTR_ABSENT, absent))
        elif callable(attr.default):
            attrs.append((name, ATTR_DEFAULT_FOR, attr))
        else:  # None: the generated function's error for the missing attribute
            attrs.append((name, ATTR_DEFAULT, attr.default))
    # load_ptr_tko's `%p, %x`: a mask or a padding value, which _build tells apart by type (the
    # operand slots of the mask and the padding value)
    swaps = (operand_index["mask"], operand_index["paddingValue"]) \
        if plan.swaps_padding and "mask" in operand_index else None
    return (spec, tuple(steps), operands, tuple(attrs), plan.token_results, swaps,
            operand_index.get(spec.result_like, -1) if spec.result_like else -1,
            operand_index.get("token", -1), plan.elementwise,
            tuple(operand_index[n] for n in plan.types_match if n in operand_index),
            plan.matches_result, parsed_op)
