"""Text → Module. Reads tileirdisasm output and the `cuda_tile.`-prefixed MLIR form.

Per-op syntax is the op table's `syntax` declaration (the same elements the printer walks), read
by a function generated from it per op kind (tilebc/text/parsegen.py), so every op the printer can
print is parsed the same way back. Debug locations (`loc(...)`) and alias definitions are read
into op/entry locations (tilebc/text/locations.py).
"""
from __future__ import annotations

import re
from collections.abc import Callable

from ..errors import TextSyntaxError
from ..ir import attrs as A
from ..ir import types as T
from ..ir.location import CallSiteLoc, DILoc
from ..ir.module import Block, Function, Global, Module, Op, ParsedOp, Region, Value
from ..numeric.dense import storage_bytes
from ..numeric.ieee import float_to_bits
from ..ops.enums import MemoryScope, SymbolVisibility
from ..ops.spec import Arity, AttrKind, Family, unregistered_op
from ..ops.table import (ENTRY_OP, GLOBAL_OP, MNEMONIC_ALIASES, MODULE_OP, OPS_BY_MNEMONIC,
                         OWN_MEMORY_ATTRIBUTE_PARSER, ROUNDING_CHECKED_WHEN_PARSED,
                         ROUNDING_MODES_TAKEN, closing_terminator)
from ..speedups import CursorBase, parse_args, parse_ops
from ..version import MAX_VERSION
from ..gcpause import collection_paused
from .lexer import MAX_NESTING, Cursor, Token, nesting, shorten, unescape
from .debuginfo import attribute_text
from .locations import LocationTable
from .syntax import AttrDict, TypeRef
from .parsegen import fast_program, op_parser, view_memory_ordering
from .types import TypeParser

PREFIX = "cuda_tile."
# Most results one `%name:N` group may name (the format counts results in a varint, but a
# million results is a typo or an attack, and the parser builds a list of that length).
MAX_RESULTS = 1 << 16


def parse_module(text: str, filename: str = "<text>") -> Module:
    """Parse Tile IR text into a Module; raises TextSyntaxError with line:col on bad input."""
    with collection_paused():
        return _Parser(text, filename).module()


def parse_modules(text: str, filename: str = "<text>", *, testing_ops: bool = False,
                  defer_unwritable: bool = False,
                  allow_unregistered: bool = False) -> list[Module]:
    """Each top-level `cuda_tile.module` of the text as its own Module (items outside any module
    form one more, as MLIR's implicit module). `testing_ops` reads the test-only entry kind
    `testing$func` of NVIDIA's test builds (any parameter and result types); such modules are
    for the verifier only and are refused by the bytecode writer's callers. `defer_unwritable`
    reads a fused or named location as the di_loc inside it and returns, with the modules, the
    refusals it owes (callers verify first, as NVIDIA's tools do). `allow_unregistered` (needs
    `defer_unwritable`) reads ops of other dialects written in the generic form inside entries,
    each adding its refusal to those owed."""
    parser = _Parser(text, filename)
    parser.testing_ops = testing_ops
    parser.allow_unregistered = allow_unregistered and defer_unwritable
    parser.locations.defer_unwritable = defer_unwritable
    with collection_paused():
        modules = parser.modules()
    if defer_unwritable:
        return modules, parser.unregistered + parser.locations.unwritable
    return modules


_GENERIC_MODULES = ("cuda_tile.module", "builtin.module")
_NO_ATTRS = A.DictionaryAttr(())  # an argument's attributes where the text gives none
# The text of an assume predicate and of a dense constant with its tile type, where short enough
# to read again from a table (_Parser._shared): a large module repeats a few hundred of them.
_PREDICATE_TEXT = re.compile(r"(?:#cuda_tile\.)?(?:div_by|bounded|same_elements)<[^<>]{0,200}>")
_DENSE_TEXT = re.compile(r"<[^<>]{0,200}>[ ]?:[ ]?tile<[^<>]{0,40}>")
# The element types NVIDIA's constant parser names when a dense constant's type is not one.
_DENSE_ELEMENTS = ("i1 or i8 or i16 or i32 or i64 or f16 or bf16 or f32 or f64 or tf32 or "
                   "f8E4M3FN or f8E5M2 or f8E8M0FNU or f4E2M1FN")
_GENERIC_FUNCTIONS = ("cuda_tile.entry", "cuda_tile.testing$func")
# Enums NVIDIA's ops read with a custom parser: our name for the keyword, and its words when the
# keyword is missing or unknown.
_CUSTOM_ENUMS = {
    "Signedness": ("signedness", "expected signedness to be one of: {'signed', 'unsigned'}"),
    "ComparisonPredicate": ("comparison_predicate", "expected 'comparison_predicate' to be one "
                            "of: {'equal', 'not_equal', 'less_than', 'less_than_or_equal', "
                            "'greater_than', 'greater_than_or_equal'}"),
    "ComparisonOrdering": ("comparison_ordering", "expected 'comparison_ordering' to be one of: "
                           "{'ordered', 'unordered'}"),
}


def _element_end(text: str, pos: int) -> int:
    """Where the element type written at `pos` of a dense constant ends: the first `:` outside
    `<…>`, else the end of the line. Counted by str methods (a hostile line may be megabytes)."""
    line_end = text.find("\n", pos)
    if line_end < 0:
        line_end = len(text)
    depth, start = 0, pos
    colon = text.find(":", pos, line_end)
    while colon >= 0:
        depth += text.count("<", start, colon) - text.count(">", start, colon)
        if depth == 0:
            return colon
        start = colon
        colon = text.find(":", colon + 1, line_end)
    return line_end


# ---- ops -----------------------------------------------------------------------------------------

class _OpState:
    """What parsing one op has collected so far."""

    def __init__(self, spec, pos: int):
        self.spec = spec
        self.pos = pos
        self.generic = False  # MLIR's generic form: every type is written
        self.mismatch = None  # a written operand type its value does not have (raised later)
        self.operands: dict[str, object] = {}
        self.attrs: dict[str, object] = {}
        self.operand_types: dict[str, list] = {}
        self.result_types: dict[int, list] = {}   # spec result index -> types
        self.regions: dict[int, Region] = {}
        self.block_args: dict[int, list[tuple[str, Callable]]] = {}  # region -> (name, type thunk)
        self.result_count: int | None = None


class _BuildPlan:
    """What `_Parser._build` needs of an op kind, derived once per kind: its operand groups and
    attributes as flat tuples, and which of the per-op checks apply at all."""

    __slots__ = ("spec", "operands", "attrs", "swaps_padding", "elementwise", "types_match",
                 "matches_result", "one_result", "regions", "token_results")

    def __init__(self, spec):
        self.spec = spec  # held so the id keying _BUILD_PLANS is never reused
        self.operands = tuple((o.name, o.arity) for o in spec.operands)
        # (name, the attribute when absent needs a default, else its absent value)
        self.attrs = tuple((a.name, None, False) if a.kind is AttrKind.UNIT else
                           (a.name, None, None) if a.optional else (a.name, a, None)
                           for a in spec.attrs)
        self.swaps_padding = any(o.name == "paddingValue" for o in spec.operands)
        self.elementwise = spec.family is Family.ELEMENTWISE
        self.types_match = spec.types_match
        self.matches_result = "result" in spec.types_match
        # a single result that is not variadic: its type is the one the text wrote, when it did
        self.one_result = len(spec.results) == 1 and not spec.results[0].variadic
        self.regions = spec.regions
        # which results are the op's token, typed without being written
        self.token_results = tuple(r.name == "result_token" for r in spec.results)


# id(spec) -> its _BuildPlan; asked once per op, derived once per op kind (specs are immutable).
_BUILD_PLANS: dict[int, _BuildPlan] = {}


def _build_plan(spec) -> _BuildPlan:
    if spec.unregistered:  # a fresh spec per foreign op: kept, they would pile up without bound
        return _BuildPlan(spec)
    plan = _BUILD_PLANS.get(id(spec))
    if plan is None or plan.spec is not spec:
        plan = _BUILD_PLANS[id(spec)] = _BuildPlan(spec)
    return plan


def _named_kind(text: str):
    """The op kind an op name written in the custom form names (with or without the dialect's
    prefix, or by an alias), or None."""
    mnemonic = text[len(PREFIX):] if text.startswith(PREFIX) else text
    return OPS_BY_MNEMONIC.get(MNEMONIC_ALIASES.get(mnemonic, mnemonic))


def _op_parser(spec):
    """The generated function that reads an op of `spec` after its name (tilebc/text/parsegen.py)."""
    return op_parser(spec, _Parser, _CUSTOM_ENUMS, OWN_MEMORY_ATTRIBUTE_PARSER)


class _Parser:
    def __init__(self, text: str, filename: str):
        self.c = Cursor(text, filename)
        self.types = TypeParser(self.c)
        self.scopes: list[dict[str, Value]] = []
        self.locations = LocationTable(self.c)
        self._pending_locs: list[tuple[object, object]] = []  # (op or function, loc expression)
        self._implicit: set = set()  # ids of terminators the text left out
        self.preview = False  # a preview op makes the module public-preview bytecode
        self.testing_ops = False
        # -allow-unregistered-dialect: ops of other dialects in the generic form are read (for the
        # verifier only); `unregistered` holds the refusal each owes the printer and the writer
        self.allow_unregistered = False
        self.unregistered: list[TextSyntaxError] = []
        self._toplevel: dict[int, Function] = {}  # module id -> entry holding top-level ops
        self._toplevel_scopes: dict[int, dict[str, Value]] = {}
        self._separate: list[Module] | None = None  # top-level modules kept apart (modules())
        self._module_pos: list[int] = []  # where each enclosing `cuda_tile.module` starts
        self._defined_at: dict[Value, int] = {}  # value -> where its name is defined
        # value -> the token of its latest use, for the error naming an operand of the op being
        # built (its use is in that op; parse_ops records none, as it builds no op that fails)
        self._used_at: dict[Value, Token] = {}
        self._bodies: dict[str, tuple] = {}  # op name as written -> (spec, its op parser)
        self._shared_values: dict[str, object] = {}  # text read before -> the attribute it gave
        self._fast_programs: dict[str, tuple | None] = {}  # op name as written -> its program
        # what tilebc._speedups.parse_ops reads, where the cursor is the compiled one
        self._fast_context = (self.c, self._defined_at, self.types._known, self._shared_values,
                              self._fast_programs, Value, T.token, self.types) \
            if parse_ops is not None and parse_args is not None and isinstance(self.c, CursorBase) \
            else None

    # ---- module ----------------------------------------------------------------------------------

    def module(self) -> Module:
        module = Module(version=MAX_VERSION, source=self.c.filename)
        module.item_order = []
        self._items(module, closing=None)
        # Aliases may be defined after their uses: resolve every location now.
        for target, expr in self._pending_locs:
            target.loc = self.locations.location(expr)
        self.locations.check_definitions()
        module.preview = self.preview
        return module

    def modules(self) -> list[Module]:
        implicit = Module(version=MAX_VERSION, source=self.c.filename)
        implicit.item_order = []
        self._separate = []
        self._items(implicit, closing=None)
        self._close_toplevel()
        for target, expr in self._pending_locs:
            target.loc = self.locations.location(expr)
        self.locations.check_definitions()
        found = self._separate + ([implicit] if implicit.item_order else [])
        for module in found:
            module.preview = self.preview or any(op.spec.preview for op in module.walk())
        return found or [implicit]

    def _items(self, module: Module, closing: str | None) -> None:
        c = self.c
        while True:
            token = c.peek()
            if token.kind == "eof":
                if closing:
                    raise c.error(f"expected '{closing}' to close the module")
                return
            if closing and token.text == closing:
                c.next()
                self._loc()
                return
            word = token.text[len(PREFIX):] if token.text.startswith(PREFIX) else token.text
            if token.kind == "hash":
                self.locations.define()
            elif MODULE_OP.mnemonic in (word, token.text):
                c.next()
                target = module
                if self._separate is not None and closing is None:
                    target = Module(version=MAX_VERSION, source=self.c.filename)
                    target.item_order = []
                    target.text_pos = c.line_col(token.pos)
                    self._separate.append(target)
                if c.peek().kind == "symbol":
                    target.name = self._symbol_name(c.next())
                if c.accept("attributes"):
                    self._skip_balanced("{", "}")
                c.expect("{", "to open the module body")
                self._module_pos.append(token.pos)
                self._items(target, closing="}")
                self._module_pos.pop()
            elif word == ENTRY_OP.mnemonic or (word == "testing$func" and self.testing_ops):
                function = self._entry()
                function.testing = word == "testing$func"
                module.functions.append(function)
                module.item_order.append(function)
            elif word == GLOBAL_OP.mnemonic:
                module.globals.append(self._global())
                module.item_order.append(module.globals[-1])
            elif word == "testing$func":
                raise c.error("'testing$func' is the test-only entry of NVIDIA's test builds; "
                              "`tilebc opt --testing-ops` reads it (never into bytecode)")
            elif token.kind == "string" and unescape(token.text) in _GENERIC_MODULES:
                self._generic_module(module, closing)
            elif token.kind == "string" and unescape(token.text) in _GENERIC_FUNCTIONS:
                function = self._generic_function()
                module.functions.append(function)
                module.item_order.append(function)
            elif self.testing_ops and closing is None and (
                    token.kind in ("value", "string") or word in OPS_BY_MNEMONIC
                    or word in MNEMONIC_ALIASES):
                self._toplevel_op(module)
            elif closing is not None and self._module_pos and token.kind == "string":
                self._foreign_module_op(token)
            elif closing is not None and self._module_pos and (
                    word in OPS_BY_MNEMONIC or word in MNEMONIC_ALIASES):
                raise self._module_error("only function and global ops are allowed in the body",
                                         f"'{token.text}' is an op, not an entry or a global",
                                         token.pos)
            else:
                raise c.error(f"expected 'entry', 'global' or 'module', found '{token.text}'")

    def _foreign_module_op(self, token: Token) -> None:
        """An op of another dialect written in a module body (`"some.op"() : () -> () loc(...)`):
        refused at the module, except that one placed in a subprogram is refused at the op first,
        as NVIDIA's debug-info verifier does (a module-level op has no subprogram)."""
        c = self.c
        full = unescape(token.text)
        error = self._module_error("only ops from the 'cuda_tile' dialect are allowed",
                                   f"unknown operation '{full}'", token.pos)
        line = c.line_col(token.pos)[0]
        c.next()
        while c.peek().kind != "eof" and not c.at("loc") and c.line_col(c.peek().pos)[0] == line:
            c.next()
        try:
            loc = self.locations.location(self._loc())
        except TextSyntaxError:
            raise error from None
        di_loc = loc
        while isinstance(di_loc, CallSiteLoc):
            di_loc = di_loc.caller
        if isinstance(di_loc, DILoc):
            # in full (c.error cuts messages at 400 characters; the attribute alone may be longer)
            quote = c.error("", token.pos)
            raise TextSyntaxError(f"'{full}' op invalid operation debug info scope: "
                                  f"{attribute_text(di_loc)}. Global variables must not have "
                                  f"scope. (an op of another dialect in a module body, which has "
                                  f"no subprogram){quote.message}", location=quote.location)
        raise error

    def _module_error(self, message: str, detail: str, pos: int) -> TextSyntaxError:
        """An error NVIDIA reports at the enclosing module, with the remark `invalid op` at the
        op (the error says where the op is too, for callers that show one message)."""
        line, column = self.c.line_col(pos)
        error = self.c.error(f"{message} ({detail}, at {line}:{column})", self._module_pos[-1])
        error.related = [("remark", line, column, "invalid op")]
        return error

    # ---- the module and its entries in MLIR's generic form ---------------------------------

    def _generic_header(self) -> dict[str, object]:
        """`"name"()` then the attributes as `<{...}>` or `{...}`; only the ones a module or an
        entry needs are kept (sym_name, function_type)."""
        c = self.c
        c.next()
        c.expect("(")
        c.expect(")", "a module or entry takes no operands")
        found: dict[str, object] = {}
        properties = c.accept("<")
        if c.at("{"):
            c.expect("{")
            while not c.accept("}"):
                if found.get("_seen"):
                    c.expect(",")
                found["_seen"] = True
                key = c.next()
                name = unescape(key.text) if key.kind == "string" else key.text
                if not c.accept("="):
                    continue
                if name == "sym_name":
                    found[name] = self._string()
                elif name == "function_type":
                    found[name] = self._function_type()
                else:
                    self._skip_attribute_value()
        if properties:
            c.expect(">")
        return found

    def _skip_attribute_value(self) -> None:
        """An attribute value the module or entry does not keep (arg_attrs, visibility)."""
        c = self.c
        depth = 0
        while True:
            token = c.peek()
            if token.kind == "eof":
                raise c.error("unterminated attribute dictionary")
            if depth == 0 and token.text in (",", "}"):
                return
            if token.text in ("[", "{", "(", "<"):
                depth += 1
            elif token.text in ("]", "}", ")", ">"):
                depth -= 1
            c.next()

    def _function_type(self) -> T.FunctionType:
        c = self.c
        inputs, results = [], []
        c.expect("(")
        while not c.accept(")"):
            if inputs:
                c.expect(",")
            inputs.append(self.types.type())
        c.expect("->")
        if c.accept("("):
            while not c.accept(")"):
                if results:
                    c.expect(",")
                results.append(self.types.type())
        else:
            results.append(self.types.type())
        return T.FunctionType(tuple(inputs), tuple(results))

    def _generic_trailer(self) -> None:
        c = self.c
        c.expect(":")
        self._function_type()  # `() -> ()`
        self._loc()

    def _generic_module(self, module: Module, closing: str | None) -> None:
        c = self.c
        start = c.peek()
        attrs = self._generic_header()
        target = module
        if self._separate is not None and closing is None:
            target = Module(version=MAX_VERSION, source=c.filename)
            target.item_order = []
            target.text_pos = c.line_col(start.pos)
            self._separate.append(target)
        if "sym_name" in attrs:
            target.name = attrs["sym_name"]
        c.expect("(", "to open the module's region")
        c.expect("{")
        self._items(target, closing="}")
        c.expect(")")
        self._generic_trailer()

    def _generic_function(self) -> Function:
        c = self.c
        start = c.peek()
        kind = unescape(start.text)
        if kind.endswith("testing$func") and not self.testing_ops:
            raise c.error("'testing$func' is the test-only entry of NVIDIA's test builds; "
                          "`tilebc opt --testing-ops` reads it (never into bytecode)")
        attrs = self._generic_header()
        if "sym_name" not in attrs or "function_type" not in attrs:
            raise c.error(f"{kind} needs sym_name and function_type", start.pos)
        c.expect("(", "to open the entry's region")
        self.scopes = []
        region = self._generic_region()
        c.expect(")")
        block = region.blocks[0] if region.blocks else Block()
        if not region.blocks:
            region.blocks.append(block)
        if not block.ops or not block.ops[-1].spec.terminator:
            terminator = ParsedOp(closing_terminator(ENTRY_OP.mnemonic), {"operands": ()}, {}, [])
            self._implicit.add(id(terminator))
            block.ops.append(terminator)
        function = Function(attrs["sym_name"], attrs["function_type"], block)
        function.testing = kind.endswith("testing$func")
        function.text_pos = c.line_col(start.pos)
        self._generic_trailer()
        return function

    def _toplevel_op(self, module: Module) -> None:
        """An op outside any entry, as NVIDIA's verifier tests write them (MLIR's implicit
        module): kept in a nameless test-only entry of its own, checked like any other op."""
        holder = self._toplevel.get(id(module))
        if holder is None:
            block = Block()
            holder = Function("<top level>", T.FunctionType((), ()), block)
            holder.testing = True
            holder.text_pos = self.c.line_col(self.c.peek().pos)
            self._toplevel[id(module)] = holder
            self._toplevel_scopes[id(holder)] = {}
            module.functions.append(holder)
            module.item_order.append(holder)
        self.scopes = [self._toplevel_scopes[id(holder)]]
        holder.body.ops.append(self._op())
        self.scopes = []

    def _close_toplevel(self) -> None:
        for holder in self._toplevel.values():
            ops = holder.body.ops
            if not ops or not ops[-1].spec.terminator:
                terminator = ParsedOp(closing_terminator(ENTRY_OP.mnemonic), {"operands": ()}, {}, [])
                self._implicit.add(id(terminator))
                ops.append(terminator)

    def _skip_balanced(self, opening: str, closing: str) -> None:
        self.c.expect(opening)
        depth = 1
        while depth:
            token = self.c.next()
            if token.kind == "eof":
                raise self.c.error(f"unbalanced '{opening}'")
            if token.text == opening:
                depth += 1
            elif token.text == closing:
                depth -= 1

    def _loc(self, target=None):
        """An optional `loc(...)`; kept for `target` (resolved when the module is complete)."""
        expr = self.locations.trailer()
        if expr is not None and target is not None:
            self._pending_locs.append((target, expr))
        return expr

    def _symbol_name(self, token: Token) -> str:
        body = token.text[1:]
        return unescape(body) if body.startswith('"') else body

    def _global(self) -> Global:
        c = self.c
        start = c.next()
        visibility = SymbolVisibility.PUBLIC
        if c.at("private") or c.at("public"):
            visibility = SymbolVisibility.from_keyword(c.next().text)
        constant = c.accept("constant")
        name = self._symbol_name(c.expect_kind("symbol", "a global name (@name)"))
        alignment = 0
        if c.accept("alignment"):
            c.expect("=")
            alignment = self._int()
        dense = self._dense_constant()
        self._loc()
        item = Global(name, dense, alignment, visibility, constant)
        item.text_pos = c.line_col(start.pos)
        return item

    def _entry(self) -> Function:
        c = self.c
        start = c.next()
        name = self._symbol_name(c.expect_kind("symbol", "an entry name (@name)"))
        c.expect("(", "to open the argument list")
        block = Block()
        scope: dict[str, Value] = {}
        arg_attrs: list[A.DictionaryAttr] = []
        if self._fast_context is not None:  # the usual arguments in C (tilebc/_opparser.c)
            parse_args(self, block, block.args, scope, arg_attrs, _NO_ATTRS)
        while not c.at(")"):
            if block.args:
                c.expect(",")
            self._block_arg(c, block, scope, "an argument name (%name)")
            arg_attrs.append(A.DictionaryAttr(self._dictionary()) if c.at("{") else _NO_ATTRS)
            self._loc()
        c.expect(")")
        results = []
        if c.accept("->"):
            if c.accept("("):
                while not c.accept(")"):
                    if results:
                        c.expect(",")
                    results.append(self.types.type())
            else:
                results.append(self.types.type())
        hints = None
        if c.accept("optimization_hints"):
            c.expect("=")
            hints = self._hints()
        if c.accept("attributes"):
            self._skip_balanced("{", "}")
        self.scopes = [scope]
        self._block_ops(block, implicit=closing_terminator(ENTRY_OP.mnemonic).mnemonic)
        self.scopes = []
        function = Function(name, T.FunctionType(tuple(a.type for a in block.args), tuple(results)),
                            block, hints)
        if any(d.entries for d in arg_attrs):
            function.arg_attrs = A.ArrayAttr(tuple(arg_attrs))
        function.text_pos = c.line_col(start.pos)
        expr = self._loc(function)
        if expr is not None and id(block.ops[-1]) in self._implicit:
            self._pending_locs.append((block.ops[-1], expr))
        return function

    # ---- values ----------------------------------------------------------------------------------

    def _block_arg(self, c, block: Block, scope: dict[str, Value], what: str) -> None:
        """`%name : type`, appended to `block`'s arguments and defined in `scope`."""
        token = c.expect_kind("value", what)
        c.expect(":")
        arg = Value(self.types.type(), block, len(block.args))
        self._define(scope, token, arg)
        block.args.append(arg)

    def _define(self, scope: dict[str, Value], token: Token, value: Value) -> None:
        if token.text in scope:
            raise self.c.error(f"redefinition of SSA value {token.text}", token.pos)
        scope[token.text] = value
        if value.__class__ is list:
            for each in value:
                self._defined_at[each] = token.pos
        else:
            self._defined_at[value] = token.pos

    def _use(self) -> Value:
        c = self.c
        token = c._peeked  # Cursor.next inline, as the generated op parsers do
        if token is None or token.pos < c.pos:
            token = c.peek()
        text = token.text
        if token.kind != "value":  # MLIR's words, then ours
            raise c.error(f"expected SSA operand (expected an SSA value (%name), found "
                          f"'{text or 'end of input'}')", token.pos)
        c.pos = c.end = token.pos + len(text)
        c._peeked = None
        if "#" in text:
            name, _, index = text.partition("#")
        else:
            name = text
            index = ""
        scopes = self.scopes
        value = scopes[-1].get(name) if scopes else None  # the innermost scope first
        if value is None:
            for scope in reversed(scopes):
                if name in scope:
                    value = scope[name]
                    break
            else:
                raise c.error(f"use of undefined value {name}", token.pos)
        if value.__class__ is list:  # a result group
            position = int(index) if index.isdigit() and len(index) < 20 else -1
            if not 0 <= position < len(value):
                raise self.c.error(f"{name} has {len(value)} results; use {name}#0 … "
                                   f"{name}#{len(value) - 1}", token.pos)
            value = value[position]
        elif index:
            raise self.c.error(f"{name} is a single value and takes no #index", token.pos)
        self._used_at[value] = token
        return value

    def _prior_use_error(self, value: Value, wanted) -> TextSyntaxError:
        """MLIR's error for a value used at a type other than its own, with its note at the
        definition."""
        use = self._used_at.get(value)
        name, pos = (use.text, use.pos) if use is not None else ("%?", self.c.peek().pos)

        def quoted(t):
            return f"'{t}'" if isinstance(t, T.ElementType) else f"'!cuda_tile.{t}'"
        error = self.c.error(f"use of value '{name}' expects different type than prior uses: "
                             f"{quoted(wanted)} vs {quoted(value.type)}", pos)
        defined = self._defined_at.get(value)
        if defined is not None:
            line, column = self.c.line_col(defined)
            error.related = [("note", line, column, "prior use here")]
        return error

    # ---- blocks and ops --------------------------------------------------------------------------

    @nesting("regions")
    def _block_ops(self, block: Block, implicit: str | None = None) -> None:
        c = self.c
        c.expect("{", "to open a region")
        if self._fast_context is not None:
            parse_ops(self, block.ops)  # the same loop in C (tilebc/_opparser.c)
        else:
            while not c.accept("}"):
                block.ops.append(self._next_op())
        if implicit and (not block.ops or not block.ops[-1].spec.terminator):
            terminator = ParsedOp(OPS_BY_MNEMONIC[implicit], {"operands": ()}, {}, [])
            terminator.text_pos = c.line_col(c.pos - 1)
            self._implicit.add(id(terminator))
            block.ops.append(terminator)

    def _next_op(self) -> Op:
        """The next op of a region (whose `}` is not next)."""
        c = self.c
        if c.peek().kind == "eof":
            raise c.error("expected '}' to close the region")
        if c.at("^"):
            raise c.error("block labels are not allowed: a Tile IR region holds a single "
                          "block (NVIDIA's reader rejects regions with more than one)")
        return self._op()

    def _fast_program(self, name: str):
        """The program parse_ops reads ops named `name` (as written) with, or None: those are
        read by _next_op (kept in _fast_programs either way)."""
        spec = _named_kind(name)
        program = None
        if spec is not None and not spec.structural and spec.syntax:
            program = fast_program(spec, _build_plan(spec), ParsedOp, OWN_MEMORY_ATTRIBUTE_PARSER)
        self._fast_programs[name] = program
        return program

    def _op(self) -> Op:
        c = self.c
        start = c._peeked  # Cursor.peek inline (once or more per op)
        if start is None or start.pos < c.pos:
            start = c.peek()
        names: list[tuple[Token, int]] = []
        if start.kind == "value":
            while True:
                token = c.expect_kind("value", "a result name (%name)")
                count = 1
                if c.accept(":"):
                    count_token = c.peek()
                    count = self._int()
                    if not 1 <= count <= MAX_RESULTS:
                        raise c.error(f"a result group holds 1 to {MAX_RESULTS} results, "
                                      f"not {shorten(str(count))}", count_token.pos)
                names.append((token, count))
                if not c.accept(","):
                    break
            c.expect("=", "after the result names")
        name_token = c._peeked
        if name_token is None or name_token.pos < c.pos:
            name_token = c.peek()
        if name_token.kind == "string":
            state = self._generic_op(c.next(), names)
            state.generic = True
            spec = state.spec
            op = self._build(state, name_token)
            op.generic_form = True
            return self._finish_op(op, spec, state, start, names)
        if name_token.kind != "ident":
            raise c.error(f"expected an operation name, found '{name_token.text or 'end of input'}'")
        text = name_token.text
        c.pos = c.end = name_token.pos + len(text)  # Cursor.next inline
        c._peeked = None
        known = self._bodies.get(text)
        if known is None:
            spec = _named_kind(text)
            if spec is None or spec.structural or not spec.syntax:
                raise c.error(f"unknown operation '{text}'", name_token.pos)
            known = self._bodies[text] = (spec, _op_parser(spec))
        spec = known[0]
        state = _OpState(spec, name_token.pos)
        state.result_count = (names[0][1] if len(names) == 1 else sum(n for _, n in names)) \
            if names else 0
        known[1](self, state)
        if state.mismatch is not None:
            raise state.mismatch  # MLIR resolves operands once the whole form is read
        op = self._build(state, name_token)
        return self._finish_op(op, spec, state, start, names)

    def _finish_op(self, op: Op, spec, state: _OpState, start: Token, names) -> Op:
        c = self.c
        self.preview = self.preview or spec.preview
        op.text_pos = c.line_col(start.pos)
        token = c._peeked  # most ops have no loc(...): LocationTable.trailer's test inline
        if token is None or token.pos < c.pos:
            token = c.peek()
        expr = self._loc(op) if token.text == "loc" else None
        # A terminator the text left out carries its parent's location (as MLIR's builder does).
        if expr is not None:
            for region in op.regions:
                for block in region.blocks:
                    if block.ops and id(block.ops[-1]) in self._implicit:
                        self._pending_locs.append((block.ops[-1], expr))
        # Bind result names.
        if names:
            if state.result_count != len(op.results):
                raise c.error(f"{spec.mnemonic} defines {len(op.results)} results but "
                              f"{state.result_count} names were given", start.pos)
            scope = self.scopes[-1]
            index = 0
            for token, count in names:
                group = op.results[index:index + count]
                self._define(scope, token, group[0] if count == 1 else list(group))
                index += count
        return op

    # ---- MLIR's generic op form --------------------------------------------------------------

    def _generic_op(self, name_token: Token, names) -> _OpState:
        """`"cuda_tile.NAME"(operands) ({regions})? <{props}>? {attrs}? : (types) -> types`."""
        c = self.c
        full = unescape(name_token.text)
        mnemonic = full[len(PREFIX):] if full.startswith(PREFIX) else None
        spec = OPS_BY_MNEMONIC.get(MNEMONIC_ALIASES.get(mnemonic, mnemonic)) if mnemonic else None
        if spec is None and self.allow_unregistered and mnemonic is None:
            spec = unregistered_op(full)
            message, detail = ("only ops from the 'cuda_tile' dialect are allowed",
                               f"unknown operation '{full}'")
            refusal = self._module_error(message, detail, name_token.pos) if self._module_pos \
                else c.error(f"{message} ({detail})", name_token.pos)
            refusal.unregistered = True
            self.unregistered.append(refusal)
        if spec is None or spec.structural:
            if self._module_pos and not full.startswith(PREFIX):
                raise self._module_error("only ops from the 'cuda_tile' dialect are allowed",
                                         f"unknown operation '{full}'", name_token.pos)
            raise c.error(f"unknown operation '{full}' (only cuda_tile ops are allowed)",
                          name_token.pos)
        state = _OpState(spec, name_token.pos)
        state.result_count = sum(count for _, count in names) if names else 0
        c.expect("(", "to open the operand list")
        values: list[Value] = []
        while not c.accept(")"):
            if values:
                c.expect(",")
            values.append(self._use())
        if spec.unregistered and (c.at("(") or c.at("<") or c.at("{")):
            raise c.error(f"tilebc reads ops of other dialects ('{full}') without regions or "
                          "attributes (with -allow-unregistered-dialect)")
        if c.accept("("):
            index = 0
            while True:
                state.regions[index] = self._generic_region()
                index += 1
                if not c.accept(","):
                    break
            c.expect(")", "to close the region list")
        segments = None
        for opening, closing in (("<", ">"), ("{", "}")):
            if opening == "<" and not c.at("<"):
                continue
            if opening == "<":
                c.expect("<")
            if c.at("{"):
                segments = self._generic_attrs(state) or segments
            if opening == "<":
                c.expect(">")
        c.expect(":", "before the op's function type")
        c.expect("(")
        operand_types = []
        while not c.accept(")"):
            if operand_types:
                c.expect(",")
            operand_types.append(self.types.type())
        c.expect("->")
        result_types = []
        if c.accept("("):
            while not c.accept(")"):
                if result_types:
                    c.expect(",")
                result_types.append(self.types.type())
        else:
            result_types.append(self.types.type())
        if len(operand_types) != len(values):
            raise c.error(f"{len(values)} operands but {len(operand_types)} operand types",
                          name_token.pos)
        for value, declared in zip(values, operand_types):
            if value.type != declared:
                raise c.error(f"operand {len(state.operands)} has type {value.type}, declared "
                              f"{declared}", name_token.pos)
        self._generic_operands(state, values, segments, name_token)
        self._generic_results(state, result_types, name_token)
        return state

    def _generic_operands(self, state, values, segments, name_token) -> None:
        specs = state.spec.operands
        if segments is None:
            flexible = [o for o in specs if o.arity is not Arity.ONE]
            if len(flexible) > 1:
                raise self.c.error("operandSegmentSizes is needed for this op", name_token.pos)
            fixed = len(specs) - len(flexible)
            segments = [1 if o.arity is Arity.ONE else len(values) - fixed for o in specs]
        if len(segments) != len(specs) or sum(segments) != len(values) \
                or min(segments, default=0) < 0:
            raise self.c.error(f"operand segments {list(segments)} do not fit {len(values)} "
                               f"operands of {state.spec.mnemonic}", name_token.pos)
        position = 0
        for operand, size in zip(specs, segments):
            group = values[position:position + size]
            position += size
            if operand.arity is Arity.VARIADIC:
                state.operands[operand.name] = tuple(group)
            elif size > 1 or (operand.arity is Arity.ONE and size != 1):
                raise self.c.error(f"operand '{operand.name}' takes one value, got {size}",
                                   name_token.pos)
            else:
                state.operands[operand.name] = group[0] if group else None

    def _generic_results(self, state, types, name_token) -> None:
        specs = state.spec.results
        variadic = [i for i, r in enumerate(specs) if r.variadic]
        fixed = len(specs) - len(variadic)
        position = 0
        for index, result in enumerate(specs):
            size = max(len(types) - fixed, 0) if result.variadic else 1
            if not result.variadic and position >= len(types):
                break  # a result of a newer version left out
            state.result_types[index] = types[position:position + size]
            position += size
        if position != len(types):
            raise self.c.error(f"{len(types)} result types do not fit {state.spec.mnemonic}",
                               name_token.pos)

    def _generic_attrs(self, state):
        """`{name = value, unit_name, ...}`; returns operandSegmentSizes when given."""
        c = self.c
        c.expect("{")
        segments = None
        by_name = {a.name: a for a in state.spec.attrs}
        first = True
        while not c.accept("}"):
            if not first:
                c.expect(",")
            first = False
            token = c.next()
            if token.kind not in ("ident", "string"):
                raise c.error(f"expected an attribute name, found '{token.text}'", token.pos)
            name = token.text if token.kind == "ident" else unescape(token.text)
            if name in ("operandSegmentSizes", "operand_segment_sizes"):
                c.expect("=")
                c.expect("array")
                c.expect("<")
                self.types.type()
                segments = []
                if c.accept(":"):
                    segments.append(self._int())
                    while c.accept(","):
                        segments.append(self._int())
                c.expect(">")
                continue
            attr = by_name.get(name)
            if attr is None:
                raise c.error(f"{state.spec.mnemonic} has no attribute '{name}'", token.pos)
            if attr.kind is AttrKind.UNIT:
                state.attrs[name] = True
                if c.accept("="):
                    c.expect("unit")
                continue
            c.expect("=")
            state.attrs[name] = self._generic_attr_value(attr, state)
        return segments

    def _generic_attr_value(self, attr, state):
        c = self.c
        kind = attr.kind
        if kind is AttrKind.ENUM and c.peek().kind == "hash":
            c.next()  # #cuda_tile.<enum mnemonic>
            c.expect("<")
            value = self._enum_keyword(attr.enum, attr.name)
            c.expect(">")
            return value
        if kind is AttrKind.DENSE:
            return self._dense_constant()
        if kind is AttrKind.TAGGED:  # assume's predicate, the one tagged attribute
            return self._predicate()
        if kind is AttrKind.BOOL_ARRAY and c.accept("array"):
            return self._generic_array(self._bool)
        value = self._attr_value(attr, state)
        if kind in (AttrKind.INT, AttrKind.BOOL) and c.accept(":"):
            self.types.type()  # `5 : i32`: the width is the op's
        return value

    @nesting("regions")
    def _generic_region(self) -> Region:
        c = self.c
        c.expect("{", "to open a region")
        if c.accept("}"):
            return Region()
        block = Block()
        scope: dict[str, Value] = {}
        if c.accept("^"):
            c.expect_kind("ident", "a block label")
            if c.accept("("):
                while not c.accept(")"):
                    if block.args:
                        c.expect(",")
                    self._block_arg(c, block, scope, "a block argument (%name)")
            c.expect(":")
        self.scopes.append(scope)
        while not c.accept("}"):
            if c.peek().kind == "eof":
                raise c.error("expected '}' to close the region")
            if c.at("^"):
                raise c.error("a Tile IR region holds a single block")
            block.ops.append(self._op())
        self.scopes.pop()
        return Region([block])

    def _build(self, state: _OpState, name_token: Token) -> Op:
        spec = state.spec
        plan = _build_plan(spec)
        given = state.operands
        # `load_ptr_tko %p, %x`: the text alone cannot tell a mask from a padding value (both
        # optional, both after a comma); a mask is always a tile of i1, a padding value has the
        # result's type (anything else stays the mask, as MLIR reads it, and is refused as one).
        result_types = state.result_types
        result = (result_types.get(0) or (None,))[0] if result_types else None
        if plan.swaps_padding:
            mask = given.get("mask")
            if mask is not None and given.get("paddingValue") is None \
                    and getattr(getattr(mask.type, "element", None), "name", "") != "i1" \
                    and (result is None or mask.type == result):
                given["paddingValue"], given["mask"] = mask, None
        implied = not state.generic
        if implied:
            token_operand = given.get("token")
            if token_operand.__class__ is Value and token_operand.type != T.token:
                raise self._prior_use_error(token_operand, T.token)  # its type is implied
            if plan.elementwise and result is not None:
                # all of an element-wise op's values have one type: an operand whose type the
                # text does not write is read at the result's (MLIR resolves it so)
                for name, _ in plan.operands:
                    value = given.get(name)
                    if value.__class__ is Value and value.type != result \
                            and name not in state.operand_types:
                        raise self._prior_use_error(value, result)
            if plan.types_match:
                written = None
                read_types = state.operand_types
                for name in plan.types_match:
                    found = read_types.get(name)
                    if found:
                        written = found[0]
                        break
                if written is None and plan.matches_result:
                    written = result
                if written is not None:
                    for name in plan.types_match:
                        value = given.get(name)
                        if value.__class__ is Value and name not in read_types \
                                and value.type != written:
                            raise self._prior_use_error(value, written)
        operands = {}
        for name, arity in plan.operands:
            value = given.get(name)
            if arity is Arity.VARIADIC:
                value = tuple(value or ())
            elif arity is Arity.ONE and value is None:
                raise self.c.error(f"{spec.mnemonic} needs operand '{name}'", name_token.pos)
            operands[name] = value
        attrs = {}
        read = state.attrs
        for name, needs_default, absent in plan.attrs:
            value = read.get(name, read)
            if value is not read:
                attrs[name] = value
            elif needs_default is None:
                attrs[name] = absent
            else:
                default = needs_default.default_for(operands)
                if default is None:
                    raise self.c.error(f"{spec.mnemonic} needs attribute '{name}'",
                                       name_token.pos)
                attrs[name] = default
        if result is not None and plan.one_result:
            types = [result]
        else:
            types = self._result_types(state, operands, name_token, plan)
        if not plan.regions:
            return ParsedOp(spec, operands, attrs, types)
        regions = [state.regions[i] for i in range(spec.regions) if i in state.regions]
        if len(regions) != spec.regions:
            if spec.else_optional and len(regions) == spec.regions - 1:
                regions.append(Region())
            else:
                raise self.c.error(f"{spec.mnemonic} needs {spec.regions} region(s)", name_token.pos)
        return ParsedOp(spec, operands, attrs, types, regions)

    def _result_types(self, state: _OpState, operands, name_token, plan: _BuildPlan) -> list:
        spec = state.spec
        token_results = plan.token_results
        types: list = []
        first = None
        for index, result in enumerate(spec.results):
            given = state.result_types.get(index)
            if result.variadic:
                if given is None and spec.result_like:
                    given = [v.type for v in operands[spec.result_like]]
                if given is None:
                    count = state.result_count - (len(spec.results) - 1)
                    given = [first] * max(count, 0) if first is not None else []
                    if count > 0 and first is None:
                        raise self.c.error(f"{spec.mnemonic}: result types missing", name_token.pos)
                elif len(given) == 1 and state.result_count > 1 and len(spec.results) == 1:
                    given = given * state.result_count  # one type printed for all results
                types.extend(given)
                first = first or (given[0] if given else None)
                continue
            if given is None:
                if token_results[index]:
                    given = [T.token]
                elif index == 0 and spec.result_like:
                    source = operands[spec.result_like]
                    given = [source.type]
                elif first is not None:
                    given = [first]
                else:
                    raise self.c.error(f"{spec.mnemonic}: cannot tell the type of result "
                                       f"'{result.name}'", name_token.pos)
            types.append(given[0])
            first = first or given[0]
        return types

    # ---- syntax elements (called by the generated op parsers, tilebc/text/parsegen.py) ---------

    def _next_is_value(self) -> bool:
        saved_pos, saved_peek = self.c.pos, self.c._peeked
        self.c.next()
        result = self.c.peek().kind == "value"
        self.c.pos, self.c._peeked = saved_pos, saved_peek
        return result

    def _type_element(self, element: TypeRef, state: _OpState) -> None:
        c = self.c
        if element.operand is not None:
            group = state.operands.get(element.name)
            count = len(group) if isinstance(group, tuple) else (0 if group is None else 1)
            types, positions = [], []
            for i in range(count):
                if i:
                    c.expect(",")
                positions.append(c.peek().pos)
                types.append(self._custom_type(state))
            if isinstance(group, tuple) and not group:
                # MLIR reads a variadic group's type list whatever the operand count
                extra = self._optional_type()
                while extra is not None:
                    types.append(extra)
                    extra = self._optional_type() if c.accept(",") else None
                if types:
                    raise c.error(f"custom op 'cuda_tile.{state.spec.mnemonic}' number of "
                                  f"operands and types do not match: got 0 operands and "
                                  f"{len(types)} types", state.pos)
            values = group if isinstance(group, tuple) else ((group,) if group is not None else ())
            for value, found, pos in zip(values, types, positions):
                if value.type != found and state.mismatch is None:
                    state.mismatch = c.error(f"{state.spec.mnemonic}: operand {element.name} has "
                                             f"type {value.type}, but the text says {found}", pos)
            state.operand_types[element.name] = types
            return
        pos = c.peek().pos
        types = [self._custom_type(state)]
        kind = state.spec.results[element.result].parsed_kind \
            if element.result < len(state.spec.results) else ""
        if kind and str(types[0]).split("<", 1)[0] != kind:
            raise c.error(f"'cuda_tile.{state.spec.mnemonic}' expected '{kind}' type, but got "
                          f"'!cuda_tile.{types[0]}'", pos)
        if element.variadic:
            while c.at(",") and not self._next_is_value():
                c.next()
                types.append(self.types.type())
        state.result_types[element.result] = types

    def _custom_type(self, state: _OpState):
        """A type an op's custom form writes; none there is refused in MLIR's words."""
        token = self.c.peek()
        if token.kind not in ("ident", "bang"):
            raise self.c.error(f"custom op 'cuda_tile.{state.spec.mnemonic}' expected valid "
                               f"keyword (expected a type, found "
                               f"'{token.text or 'end of input'}')", token.pos)
        return self.types.type()

    def _optional_type(self):
        """A type if one follows, else None (the cursor left where it was)."""
        c = self.c
        if c.peek().kind not in ("ident", "bang"):
            return None
        saved_pos, saved_peek = c.pos, c._peeked
        try:
            return self.types.type()
        except TextSyntaxError:
            c.pos, c._peeked = saved_pos, saved_peek
            return None

    # ---- attributes ------------------------------------------------------------------------------

    def _int(self) -> int:
        return self.c.int_value(self.c.expect_kind("number", "an integer"))

    def _bool(self) -> bool:
        token = self.c.next()
        if token.text not in ("true", "false"):
            raise self.c.error(f"expected true or false, found '{token.text}'", token.pos)
        return token.text == "true"

    def _enum_keyword(self, enum, what: str):
        token = self.c.peek()
        try:
            member = enum.from_keyword(token.text)
        except KeyError:
            raise self.c.error(f"expected {what}, one of: "
                               f"{', '.join(m.keyword for m in enum)}; found '{token.text}'") from None
        self.c.next()
        return member

    def _view_memory_attributes(self, enum):
        """The ordering (and a scope after it) of load_view_tko/store_view_tko, refused in the
        words of NVIDIA's custom parser; a valid scope is left to the optional group."""
        c = self.c
        token = c.peek()
        try:
            order = self._enum_keyword(enum, "memory_ordering_semantics")
        except TextSyntaxError as ours:
            raise c.error(f"invalid memory_ordering_semantics attribute specification. Got "
                          f"\"{token.text}\" but expect one of: weak, relaxed, acquire, release, "
                          f"acq_rel ({ours.message.splitlines()[0]})", token.pos) from None
        scope = c.peek()
        if scope.kind == "ident":
            if order.keyword == "weak":
                raise c.error(f"operation specifies weak memory ordering semantics, but then "
                              f"provides \"{scope.text}\" scope, expected no memory scope.",
                              scope.pos)
            if scope.text not in MemoryScope.keywords():
                raise c.error(f"invalid memory_scope attribute specification. Got "
                              f"\"{scope.text}\" but expect one of: tl_blk, device, sys",
                              scope.pos)
        return order

    def _custom_enum(self, enum, state: _OpState):
        """A signedness, comparison predicate or ordering keyword, which NVIDIA's ops read with
        parsers of their own: refused in their words, prefixed as MLIR prefixes an op parser's
        errors (a missing keyword draws MLIR's own error too)."""
        token = self.c.peek()
        try:
            return self._enum_keyword(enum, _CUSTOM_ENUMS[enum.__name__][0])
        except TextSyntaxError as ours:
            op = f"custom op 'cuda_tile.{state.spec.mnemonic}' "
            words = op + _CUSTOM_ENUMS[enum.__name__][1]
            detail = ours.message.split("\n")[0]
            if token.kind == "ident":
                raise self.c.error(f"{words} ({detail})", token.pos) from None
            error = self.c.error(f"{op}expected valid keyword ({detail})", token.pos)
            line, column = self.c.line_col(token.pos)
            error.related = [("error", line, column, words)]
            raise error from None

    def _generic_array(self, item) -> tuple:
        """The rest of MLIR's `array<type: v, ...>` after `array`, each value read by `item`."""
        c = self.c
        c.expect("<")
        self.types.type()
        items = []
        if c.accept(":"):
            items.append(item())
            while c.accept(","):
                items.append(item())
        c.expect(">")
        return tuple(items)

    def _bracketed(self, parse_item) -> tuple:
        c = self.c
        c.expect("[")
        items = []
        while not c.accept("]"):
            if items:
                c.expect(",")
            items.append(parse_item())
        return tuple(items)

    def _attr_value(self, attr, state: _OpState):
        c = self.c
        kind = attr.kind
        if kind is AttrKind.ENUM:
            if attr.enum.__name__ in _CUSTOM_ENUMS:
                return self._custom_enum(attr.enum, state)
            if view_memory_ordering(state.spec, attr, OWN_MEMORY_ATTRIBUTE_PARSER):
                return self._view_memory_attributes(attr.enum)
            return self._enum_keyword(attr.enum, attr.name)
        if kind is AttrKind.BOOL:
            return self._bool()
        if kind is AttrKind.INT:
            token = c.expect_kind("number", "an integer")
            value = c.int_value(token)
            self._check_int_range(value, attr.width, f"{attr.name} (i{attr.width})", token)
            return value
        if kind is AttrKind.STRING:
            return self._string()
        if kind is AttrKind.SYMBOL:
            return self._symbol_name(c.expect_kind("symbol", "a symbol (@name)"))
        if kind in (AttrKind.I32_ARRAY, AttrKind.I64_ARRAY):
            if c.accept("array"):  # generic form: array<i32: 1, 0>
                return self._generic_array(self._int)
            return self._bracketed(self._int)
        if kind is AttrKind.BOOL_ARRAY:
            return self._bracketed(self._bool)
        if kind is AttrKind.ATTR_ARRAY:
            return self._bracketed(self._typed_attr)
        if kind is AttrKind.TAGGED:
            return self._typed_attr()
        if kind is AttrKind.HINTS:
            return self._hints(state.spec.mnemonic)
        if kind is AttrKind.TYPE:
            return self.types.type()
        raise c.error(f"attribute {attr.name} has no text form")

    def _string(self) -> str:
        token = self.c.expect_kind("string", "a string")
        try:
            return unescape(token.text)
        except (ValueError, IndexError, UnicodeDecodeError):
            raise self.c.error("malformed escape in string", token.pos) from None

    def _number_for(self, element, token: Token) -> int:
        """Raw bits of a literal for `element` (ints masked to width, floats rounded)."""
        text = token.text
        if isinstance(element, T.ElementType) and element.is_float:
            if text.lower().startswith("0x"):  # the bit pattern itself
                bits = self.c.int_value(token, f"{element} bits in hex")
                if bits >> element.bits:
                    raise self.c.error(f"float constant out of range for type (bit pattern "
                                       f"{shorten(text)} does not fit in {element} "
                                       f"({element.bits} bits))", token.pos)
                return bits
            if token.kind == "number" and re.fullmatch(r"[-+]?[0-9]+", text):
                # MLIR reads a float only with a '.' or an exponent; hex gives the bits
                error = self.c.error(f"unexpected decimal integer literal for a floating point "
                                     f"value ({element} element {shorten(text)} has no '.' or "
                                     f"exponent)", token.pos)
                line, column = self.c.line_col(token.pos)
                error.related = [("note", line, column,
                                  "add a trailing dot to make the literal a float")]
                raise error
            try:
                return float_to_bits(float(text), element)
            except ValueError:
                raise self.c.error(f"expected a {element} value, found '{shorten(text)}'",
                                   token.pos) from None
        if text in ("true", "false"):
            if getattr(element, "bits", None) != 1:  # as MLIR: a boolean is an i1 only
                raise self.c.error(f"expected integer value for {element}, found '{text}'",
                                   token.pos)
            return 1 if text == "true" else 0
        value = self.c.int_value(token, f"integer value for {element}")
        bits = 64 if isinstance(element, T.PointerType) else element.bits
        self._check_int_range(value, bits, str(element), token)
        return value & ((1 << bits) - 1)

    def _check_int_range(self, value: int, bits: int, what: str, token: Token) -> None:
        """A signless integer literal may be written signed or unsigned, as MLIR reads it: the
        union of both ranges, -2^(bits-1) to 2^bits - 1 (i1: -1 to 1)."""
        low, high = -(1 << (bits - 1)), (1 << bits) - 1
        if not low <= value <= high:
            raise self.c.error(f"integer constant out of range for type (integer "
                               f"{shorten(token.text)} is out of range for {what}, expected "
                               f"{low} to {high})", token.pos)

    @nesting("attribute values")
    def _typed_attr(self):
        c = self.c
        token = c.peek()
        if token.kind == "string":
            return A.StringAttr(self._string())
        if token.text == "[":
            return A.ArrayAttr(self._bracketed(self._typed_attr))
        if token.text == "{":
            return A.DictionaryAttr(self._dictionary())
        if token.text in ("true", "false"):
            c.next()
            return A.BoolAttr(token.text == "true") if not c.at(":") else self._typed_number(token)
        if token.kind == "number":
            c.next()
            return self._typed_number(token)
        if token.kind in ("ident", "hash") and token.text.split(".")[-1] in ("div_by", "same_elements",
                                                                             "bounded"):
            return self._predicate()
        raise c.error(f"expected an attribute value, found '{token.text or 'end of input'}'")

    def _typed_number(self, token: Token):
        c = self.c
        if not c.accept(":"):
            value = self.c.int_value(token) if token.kind == "number" else int(token.text == "true")
            return A.IntegerAttr(T.i64, value)
        element = self.types.element()
        bits = self._number_for(element, token)
        if element.is_float:
            return A.FloatAttr(element, bits)
        width = element.bits
        signed = bits - (1 << width) if width > 1 and bits >> (width - 1) else bits
        return A.IntegerAttr(element, signed)

    def _predicate(self):
        return self._shared(_PREDICATE_TEXT, self._read_predicate)

    def _read_predicate(self):
        c = self.c
        word = c.next().text.split(".")[-1]
        c.expect("<")
        if word == "div_by":
            divisor = self._int()
            every = along = None
            if c.accept(","):
                c.expect("every")
                every = self._int()
                c.expect("along")
                along = self._int()
            c.expect(">")
            return A.DivByAttr(divisor, every, along)
        if word == "same_elements":
            values = self._bracketed(self._int)
            c.expect(">")
            return A.SameElementsAttr(values)
        bounds = []
        for index in range(2):
            if index:
                c.expect(",")
            bounds.append(None if c.accept("?") else self._int())
        c.expect(">")
        return A.BoundedAttr(*bounds)

    def _hints(self, owner: str = ENTRY_OP.mnemonic) -> A.OptimizationHintsAttr:
        c = self.c
        c.accept("#cuda_tile.optimization_hints")
        c.expect("<")
        entries = []
        while not c.accept(">"):
            if entries:
                c.expect(",")
            arch = c.next()
            if arch.kind not in ("ident", "string"):
                # NVIDIA's words first (their tests check them)
                raise c.error(f"expected valid keyword or string: an architecture name, found "
                              f"'{arch.text}'", arch.pos)
            c.expect("=")
            name = arch.text if arch.kind == "ident" else unescape(arch.text)
            if not c.at("{"):
                value = c.peek()
                typed = " : i64" if value.kind == "number" and "." not in value.text else ""
                raise c.error(f"custom op '{PREFIX}{owner}' expected dictionary attribute for "
                              f"optimization_hints entry `{name}` got value={value.text}{typed}",
                              value.pos)
            entries.append((name, A.DictionaryAttr(self._dictionary(hint=True))))
        return A.OptimizationHintsAttr(tuple(entries))

    @nesting("dictionaries")
    def _dictionary(self, hint: bool = False):
        c = self.c
        c.expect("{")
        entries = []
        while not c.accept("}"):
            if entries:
                c.expect(",")
            key = c.next()
            if key.kind not in ("ident", "string"):
                raise c.error(f"expected a dictionary key, found '{key.text}'", key.pos)
            c.expect("=")
            token = c.peek()
            if hint and token.kind == "number" and not self._number_has_type():
                value = A.IntegerAttr(T.i32, self._int())
            else:
                value = self._typed_attr()
            entries.append((key.text if key.kind == "ident" else unescape(key.text), value))
        return tuple(entries)

    def _number_has_type(self) -> bool:
        saved_pos, saved_peek = self.c.pos, self.c._peeked
        self.c.next()
        result = self.c.at(":")
        self.c.pos, self.c._peeked = saved_pos, saved_peek
        return result

    def _attr_dict(self, element: AttrDict, state: _OpState) -> None:
        c = self.c
        # Attributes the printer elides at their keyword value take that value when absent.
        for ref, elided in element.keyword_attrs:
            state.attrs.setdefault(ref.name, ref.spec.enum.from_keyword(elided))
        keyword = c.accept("attributes")
        if not (keyword or c.at("{")):
            return
        c.expect("{")
        allowed = {ref.name: ref for ref, _ in element.keyword_attrs}
        first = True
        while not c.accept("}"):
            if not first:
                c.expect(",")
            first = False
            key = c.expect_kind("ident", "an attribute name")
            ref = allowed.get(key.text)
            if ref is None:
                raise c.error(f"{state.spec.mnemonic} has no attribute '{key.text}' to set here",
                              key.pos)
            c.expect("=")
            c.expect_kind("hash", "an enum attribute (#cuda_tile.kind<value>)")
            c.expect("<")
            state.attrs[ref.name] = self._enum_keyword(ref.spec.enum, ref.name)
            c.expect(">")

    def _dense_element(self):
        """The element type of a dense constant; anything else refused in NVIDIA's words."""
        c = self.c
        pos = c.peek().pos
        try:
            return self.types.element()
        except TextSyntaxError as error:
            ours = error.message.split("\n")[0]
            text = c.text[pos:_element_end(c.text, pos)].strip()
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", text):
                # NVIDIA reports the unknown name, then the element check on the null type
                unknown = c.error(f"'cuda_tile.constant' unknown type: {text} ({ours})", pos)
                line, column = c.line_col(pos)
                unknown.related = [("error", line, column, f"expect element type to be one of "
                                    f"{_DENSE_ELEMENTS} values, but got '<<NULL TYPE>>'")]
                raise unknown from None
            raise c.error(f"expect element type to be one of {_DENSE_ELEMENTS} values, but got "
                          f"'{text}' ({ours})", pos) from None

    def _dense_values(self, element, values: list[int], depth: int) -> tuple[int, ...]:
        """Read one value or nested list of a dense constant into `values` (raw bits); returns
        the shape it spells (a scalar: ()). A method, not a closure: a closure that calls itself
        is a reference cycle, which would keep the parser and its module for the collector."""
        c = self.c
        if not c.at("["):
            token = c.next()
            if token.kind not in ("number", "ident"):
                raise c.error(f"expected a {element} value, found '{token.text}'", token.pos)
            values.append(self._number_for(element, token))
            return ()
        if depth >= MAX_NESTING:
            raise c.error(f"dense constant nested more than {MAX_NESTING} levels deep")
        c.next()
        inner: tuple[int, ...] | None = None
        count = 0
        while not c.accept("]"):
            if count:
                c.expect(",")
            pos = c.peek().pos
            shape = self._dense_values(element, values, depth + 1)
            if inner is None:
                inner = shape
            elif shape != inner:
                raise c.error("tensor literal is invalid; ranks are not consistent between "
                              f"elements (dense constant is not rectangular: this element "
                              f"has shape {list(shape)}, the first one {list(inner)})", pos)
            count += 1
        if not count:
            raise c.error("a dense constant cannot be empty")
        return (count,) + inner

    def _shared(self, pattern: re.Pattern, parse: Callable):
        """What `parse()` reads at the cursor; the same object for the same text, where `pattern`
        spans it (attributes are immutable: equal ones shared, as the binary reader shares them,
        which the writer and verifier then meet by identity)."""
        c = self.c
        token = c._peeked
        if token is None or token.pos < c.pos:
            token = c.peek()
        match = pattern.match(c.text, token.pos)
        if match is None:
            return parse()
        text = match.group()
        found = self._shared_values.get(text)
        if found is not None:
            c.pos = c.end = match.end()
            c._peeked = None
            return found
        found = parse()
        if c.end == match.end():  # the text read is the text matched
            self._shared_values[text] = found
        return found

    def _dense_constant(self) -> A.DenseElementsAttr:
        return self._shared(_DENSE_TEXT, self._read_dense_constant)

    def _read_dense_constant(self) -> A.DenseElementsAttr:
        c = self.c
        c.expect("<", "to open a dense constant")
        element = self._dense_element()
        c.expect(":")
        values: list[int] = []  # raw bits, in row-major order
        literal_shape = self._dense_values(element, values, 0)
        c.expect(">")
        c.expect(":")
        type_pos = c.peek().pos
        tile_type = self.types.type()
        if not isinstance(tile_type, T.TileType):
            raise c.error(f"a dense constant needs a tile type, got {tile_type}", type_pos)
        if tile_type.element != element:
            raise c.error(f"mismatch between the element type: '{element}' and the tile element "
                          f"type '{tile_type.element}' (constant element type {element} does not "
                          f"match {tile_type})", type_pos)
        # A single value is a splat of any shape; a list must spell the type's shape exactly.
        if literal_shape and literal_shape != tuple(tile_type.shape):
            raise c.error(f"inferred shape of elements literal ({list(literal_shape)}) does not "
                          f"match type ({list(tile_type.shape)}) (constant literal has shape "
                          f"{list(literal_shape)} but {tile_type} has shape "
                          f"{list(tile_type.shape)})", type_pos)
        count = tile_type.num_elements
        if element.name == "i1":
            if len(values) == 1:
                data = b"\xff" if values[0] else b"\x00"
            else:
                packed = bytearray((count + 7) // 8)
                for i, bit in enumerate(values):
                    packed[i // 8] |= bit << (i % 8)
                data = bytes(packed)
        else:
            width = storage_bytes(element)
            data = b"".join(v.to_bytes(width, "little") for v in values)
        return A.DenseElementsAttr(tile_type, data)

    # ---- custom directives -----------------------------------------------------------------------

    def _custom_Rounding(self, state, attr):
        c = self.c
        if c.accept("rounding"):
            c.expect("<")
            token = c.peek()
            mnemonic = state.spec.mnemonic
            taken = ROUNDING_MODES_TAKEN.get(mnemonic)
            try:
                mode = self._enum_keyword(attr.spec.enum, "rounding mode")
            except TextSyntaxError as ours:
                if taken is None:
                    raise
                mode, detail = None, ours.message.splitlines()[0]
            if taken is not None and (mode is None or (
                    mode not in taken and mnemonic in ROUNDING_CHECKED_WHEN_PARSED)):
                # NVIDIA's custom parser lists what the op takes
                listing = ", ".join(f"'{m.keyword}'" for m in taken)
                raise c.error(f"custom op 'cuda_tile.{mnemonic}' expected rounding mode to be one "
                              f"of: {listing}, got: '{token.text}'"
                              + (f" ({detail})" if mode is None else ""), token.pos)
            state.attrs[attr.name] = mode
            c.expect(">")

    def _custom_DenseConstant(self, state, attr):
        dense = self._dense_constant()
        state.attrs[attr.name] = dense
        state.result_types[0] = [dense.type]

    def _custom_AssumePredicate(self, state, attr):
        state.attrs[attr.name] = self._predicate()

    def _custom_Inbounds(self, state, attr):
        if self.c.accept("inbounds"):
            self.c.expect("=")
            state.attrs[attr.name] = self._bracketed(self._bool)

    def _custom_IndexTypes(self, state, index):
        values = state.operands.get(index.name) or ()
        c = self.c
        if not values:
            return
        types = []
        pos = c.peek().pos
        while c.at(",") and not self._next_is_value():
            saved_pos, saved_peek = c.pos, c._peeked
            c.next()
            if c.peek().text == "token":  # the token operand's type follows the index types
                c.pos, c._peeked = saved_pos, saved_peek
                break
            types.append(self.types.type())
            if len(types) == len(values):
                break
        if len(types) == 1:
            types = types * len(values)
        if len(types) != len(values):
            raise c.error(f"expected {len(values)} index types, got {len(types)}", pos)

    def _custom_FirstType(self, state, results):
        state.result_types[results.result] = [self.types.type()]

    def _custom_MixedDims(self, state, dynamic, which):
        c = self.c
        dims, values = [], []
        while not c.at("]"):
            if dims:
                c.expect(",")
            if c.peek().kind == "value":
                values.append(self._use())
                dims.append(None)
            else:
                dims.append(self._int())
        state.operands[dynamic.name] = tuple(values)
        state.attrs.setdefault("__dims", {})[which] = tuple(dims)

    def _custom_TensorViewTypes(self, state, base, shape, strides):
        pos = self.c.peek().pos
        first = self.types.type()
        if self.c.accept("->"):
            pos = self.c.peek().pos
            first = self.types.type()
        if not isinstance(first, T.TensorViewType):
            raise self.c.error(f"make_tensor_view must produce a tensor_view, got {first}", pos)
        dims = state.attrs.pop("__dims", {})
        for which in ("shape", "strides"):
            written, typed = dims.get(which, getattr(first, which)), getattr(first, which)
            if written != typed:
                show = lambda dims: "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"
                raise self.c.error(f"make_tensor_view: {which} {show(written)} does not match "
                                   f"the result type {first} ({which} {show(typed)})", pos)
        state.result_types[0] = [first]

    def _custom_BlockArg(self, state, region, index):
        token = self.c.expect_kind("value", "a block argument name")
        lower = state.spec.operands[0].name
        state.block_args.setdefault(region, []).append(
            (token, lambda operands=state.operands: operands[lower].type))

    def _custom_IterValues(self, state, region, first, init):
        c = self.c
        values = []
        while c.peek().kind == "value":
            token = c.next()
            c.expect("=")
            value = self._use()
            values.append(value)
            state.block_args.setdefault(region, []).append((token, lambda v=value: v.type))
            if not c.accept(","):
                break
        state.operands[init.name] = tuple(values)

    def _custom_LoopSignature(self, state, region, init, results):
        c = self.c
        state.operands[init.name] = ()
        if c.accept("iter_values"):
            c.expect("(")
            self._custom_IterValues(state, region, 0, init)
            c.expect(")")
            c.expect(":")
            for i in range(len(state.operands[init.name])):
                if i:
                    c.expect(",")
                self.types.type()
            if c.accept("->"):
                self._result_list(state, results)
        elif c.accept(":"):
            self._result_list(state, results)

    def _result_list(self, state, results):
        types = [self.types.type()]
        while self.c.accept(","):
            types.append(self.types.type())
        state.result_types[results.result] = types

    def _custom_Region(self, state, index, implicit=None):
        block = Block()
        scope: dict[str, Value] = {}
        for position, (token, type_of) in enumerate(state.block_args.get(index, [])):
            arg = Value(type_of(), block, position)
            block.args.append(arg)
            self._define(scope, token, arg)
        self.scopes.append(scope)
        self._block_ops(block, implicit)
        self.scopes.pop()
        state.regions[index] = Region([block])

    def _custom_CallSignature(self, state, callee, operands, *attrs_and_results):
        """`@f(%a, …) {name = […], …} : (types) -> result type(s)`."""
        *attr_refs, results = attrs_and_results
        c = self.c
        state.attrs[callee.name] = self._symbol_name(c.expect_kind("symbol", "a callee (@name)"))
        c.expect("(", "to open the call arguments")
        values = []
        while not c.accept(")"):
            if values:
                c.expect(",", "between call arguments")
            values.append(self._use())
        state.operands[operands.name] = tuple(values)
        allowed = {ref.name: ref for ref in attr_refs}
        if c.accept("{"):
            first = True
            while not c.accept("}"):
                if not first:
                    c.expect(",")
                first = False
                key = c.expect_kind("ident", "an attribute name")
                if key.text not in allowed:
                    raise c.error(f"{state.spec.mnemonic} has no attribute '{key.text}' "
                                  f"(expected one of: {', '.join(sorted(allowed))})", key.pos)
                c.expect("=")
                state.attrs[key.text] = self._attr_value(allowed[key.text].spec, state)
        state.attrs.setdefault("const_args", ())
        c.expect(":", "before the call's function type")
        c.expect("(", "to open the argument types")
        for index, value in enumerate(values):
            if index:
                c.expect(",")
            pos = c.peek().pos
            found = self.types.type()
            if found != value.type:
                raise c.error(f"{state.spec.mnemonic}: argument {index} has type {value.type}, "
                              f"but the text says {found}", pos)
        c.expect(")", "to close the argument types")
        c.expect("->", "before the call's result types")
        if c.accept("("):
            types = []
            while not c.accept(")"):
                if types:
                    c.expect(",")
                types.append(self.types.type())
        else:
            types = [self.types.type()]
        state.result_types[results.result] = types

    def _custom_ArgumentRegion(self, state, index):
        c = self.c
        c.expect("(", "to open the region arguments")
        tokens = []
        while not c.accept(")"):
            if tokens:
                c.expect(",")
            token = c.expect_kind("value", "a region argument name")
            c.expect(":")
            tokens.append((token, self.types.type()))
        state.block_args[index] = [(t, lambda ty=ty: ty) for t, ty in tokens]
        self._custom_Region(state, index)
