"""Debug locations in text: `loc(...)` trailers and `#alias = …` definitions, read back into
tilebc.ir.location objects so `asm(dis -g x)` re-encodes the debug section.

Aliases are usually defined after their uses (tileirdisasm prints them at the end), so the
parser records each location as an unresolved expression and resolves them all once the whole
text has been read. Expressions are tuples:

    ("alias", name, pos)            a `#name` reference
    ("unknown",)                    loc(unknown)
    ("file", filename, line, col)   loc("f.py":3:7)
    ("callsite", callee, caller)    loc(callsite(a at b))
    ("attr", mnemonic, fields, pos) #cuda_tile.di_*<…>; fields: positional list + keyword dict

Only what the bytecode can hold becomes a location: a di_loc (or a call site of them). A bare
file location has no debug scope in the format and is written as unknown, as NVIDIA's own writer
does. Named and fused locations are refused where they are used, as NVIDIA's writer refuses them
(its verifier looks through them for debug scopes, so dropping them would hide scope errors):

    ("unsupported", what, pos, parts)  loc(fused[…]) or loc("name"(…)) / loc("name")

The MLIR-like commands defer that refusal until the module verifies (`defer_unwritable`), so a
scope error inside such a location is reported first, in NVIDIA's words.
"""
from __future__ import annotations


from ..errors import TextSyntaxError
from ..ir import location as L
from .debuginfo import SUBPROGRAM_FLAGS
from .lexer import MAX_NESTING, Cursor, nesting, unescape

DIALECT = "#cuda_tile."


# debug attributes MLIR reads as structs (`key = value` parameters)
_STRUCTS = ("di_compile_unit", "di_subprogram", "di_lexical_block")


class LocationTable:
    def __init__(self, cursor: Cursor):
        self.c = cursor
        self.definitions: dict[str, tuple[object, int]] = {}  # alias -> (expression, position)
        self._resolved: dict[str, object] = {}
        self._resolving: set = set()
        self._alias_chain: list[tuple[str, int]] = []  # aliases being resolved (name, position)
        # With `defer_unwritable`, a fused or named location stands for the di_loc inside it (as
        # NVIDIA's debug-info verifier sees it) and its refusal waits in `unwritable`.
        self.defer_unwritable = False
        self.unwritable: list[TextSyntaxError] = []

    # ---- reading ---------------------------------------------------------------------------------

    def define(self) -> None:
        """`#name = value` (the cursor is at the alias name)."""
        c = self.c
        token = c.next()
        name = token.text[1:]
        if name in self.definitions:
            raise c.error(f"redefinition of alias #{name}", token.pos)
        c.expect("=", "in an alias definition")
        self.definitions[name] = (self._value(), token.pos)

    def trailer(self):
        """An optional `loc(...)` after an op, argument or entry; None when there is none."""
        if not self.c.at("loc"):
            return None
        return self._loc()

    def _loc(self):
        c = self.c
        c.expect("loc")
        c.expect("(", "after loc")
        inner = self._loc_body()
        c.expect(")", "to close loc(...)")
        return inner

    @nesting("locations")
    def _loc_body(self):
        c = self.c
        token = c.peek()
        if token.kind == "hash":
            return self._value()
        if token.text == "unknown":
            c.next()
            return ("unknown",)
        if token.text == "callsite":
            c.next()
            c.expect("(", "after callsite")
            callee = self._loc_body()
            c.expect("at", "between a call site's callee and caller")
            caller = self._loc_body()
            c.expect(")", "to close callsite(...)")
            return ("callsite", callee, caller)
        if token.text == "fused":
            c.next()
            if c.at("<"):
                self._skip_balanced("<", ">")
            c.expect("[", "after fused")
            parts = []
            while not c.accept("]"):
                parts.append(self._loc_body())
                c.accept(",")
            return ("unsupported", "a fused location (loc(fused[...]))", token.pos, parts)
        if token.kind == "string":
            c.next()
            text = unescape(token.text)
            if c.accept(":"):
                line = self._int()
                column = self._int() if c.accept(":") else 0
                return ("file", text, line, column)
            parts = []
            if c.accept("("):  # a named location wraps a child location
                parts.append(self._loc_body())
                c.expect(")", "to close a named location")
            return ("unsupported", "a named location (loc(\"name\"(...)))", token.pos, parts)
        raise c.error(f"expected a location, found '{token.text or 'end of input'}'")

    @nesting("attribute values")
    def _value(self):
        """An attribute value: an alias reference, an inline #cuda_tile.x<…>, a loc, a literal."""
        c = self.c
        token = c.peek()
        if token.text == "loc":
            return self._loc()
        if token.kind == "hash":
            c.next()
            if not c.at("<"):
                return ("alias", token.text[1:], token.pos)
            if not token.text.startswith(DIALECT):
                raise c.error(f"unknown attribute {token.text}", token.pos)
            return self._attribute(token.text[len(DIALECT):], token.pos)
        if token.kind == "string":
            c.next()
            return unescape(token.text)
        if token.kind == "number":
            return self._int()
        if token.kind == "ident":  # an enum keyword (`flags = declaration`)
            c.next()
            return ("word", token.text, token.pos)
        raise c.error(f"expected an attribute value, found '{token.text or 'end of input'}'")

    def _attribute(self, mnemonic: str, pos: int):
        c = self.c
        c.expect("<")
        positional: list[object] = []
        fields: dict[str, object] = {}
        while not c.accept(">"):
            if positional or fields:
                if not c.accept("in"):
                    c.expect(",", f"between {mnemonic} parameters")
            token = c.peek()
            if token.kind == "ident" and token.text != "loc":
                c.next()
                c.expect("=", f"after {mnemonic} parameter '{token.text}'")
                fields[token.text] = (self._value(), token.pos)
            else:
                positional.append(self._value())
        return ("attr", mnemonic, (positional, fields), pos)

    def _int(self) -> int:
        return self.c.int_value(self.c.expect_kind("number", "an integer"))

    def _skip_balanced(self, opening: str, closing: str) -> None:
        depth = 0
        while True:
            token = self.c.next()
            if token.kind == "eof":
                raise self.c.error(f"unbalanced '{opening}'")
            depth += (token.text == opening) - (token.text == closing)
            if depth == 0:
                return

    # ---- resolving -------------------------------------------------------------------------------

    def check_definitions(self) -> None:
        """Resolve every alias, used or not, so that a malformed one is refused as MLIR's eager
        attribute parser refuses it (an unused fused or named location is not: nothing writes
        it)."""
        defer, found = self.defer_unwritable, list(self.unwritable)
        self.defer_unwritable = True
        try:
            for name in self.definitions:
                self._resolve(("alias", name, self.definitions[name][1]))
        finally:
            self.defer_unwritable, self.unwritable = defer, found

    def location(self, expr) -> L.Location:
        """The location an op/entry carries (None: unknown or not representable)."""
        if expr is None:
            return None
        value = self._resolve(expr)
        return value if isinstance(value, (L.DILoc, L.CallSiteLoc)) else None

    def _call_site_part(self, expr):
        value = self._resolve(expr)
        if isinstance(value, (L.DILoc, L.CallSiteLoc)):
            return value
        return L.UnknownDebugAttr()

    def _resolve(self, expr):
        if not isinstance(expr, tuple):
            return expr  # a literal
        kind = expr[0]
        if kind == "alias":
            _, name, pos = expr
            if name in self._resolved:
                return self._resolved[name]
            if name not in self.definitions:
                raise self.c.error(f"use of undefined alias #{name}", pos)
            if name in self._resolving:
                raise self.c.error(f"alias #{name} refers to itself", pos)
            if len(self._alias_chain) >= MAX_NESTING:
                raise self.c.error(f"location aliases refer to each other more than "
                                   f"{MAX_NESTING} levels deep (through #{name})", pos)
            self._resolving.add(name)
            self._alias_chain.append((name, pos))
            try:
                value = self._resolve(self.definitions[name][0])
            finally:
                self._alias_chain.pop()
                self._resolving.discard(name)
            self._resolved[name] = value
            return value
        if kind == "unknown":
            return None
        if kind == "unsupported":
            # NVIDIA's bytecode writer refuses these ("unsupported location, expected DILocAttr
            # or CallSiteLoc"); its verifier also looks through them for debug scopes. Dropping
            # them would hide both, so they are refused where they are used.
            kind_name = "FusedLoc" if "fused" in expr[1] else "NameLoc"
            error = self.c.error(f"unsupported location, got {kind_name}, expected DILocAttr or "
                               f"CallSiteLoc: {expr[1]} cannot be written to Tile IR bytecode "
                               f"(expected a #cuda_tile.di_loc, callsite, file or unknown "
                               f"location)", expr[2])
            if not self.defer_unwritable:
                raise error
            self.unwritable.append(error)
            # the first part that holds a di_loc (a name's child, a fused list's first such)
            for part in expr[3]:
                value = self._resolve(part)
                if isinstance(value, (L.DILoc, L.CallSiteLoc)):
                    return value
            return None
        if kind in ("file", "word"):
            return expr
        if kind == "callsite":
            return L.CallSiteLoc(self._call_site_part(expr[1]), self._call_site_part(expr[2]))
        return self._debug_attr(expr)

    def _debug_attr(self, expr):
        _, mnemonic, (positional, fields), pos = expr
        used = set()

        if mnemonic in _STRUCTS and not fields and not positional:
            raise self.c.error(f"expected a parameter name in struct (#cuda_tile.{mnemonic} "
                               f"has no parameters)", pos)

        def field(key, kind, default=None):
            if key not in fields:
                if default is not None:
                    return default
                raise self.c.error(f"struct is missing required parameter: {key} "
                                   f"(#cuda_tile.{mnemonic} needs '{key}')", pos)
            used.add(key)
            value_expr, key_pos = fields[key]
            return self._typed(self._resolve(value_expr), kind, f"{mnemonic} {key}", key_pos)

        def positional_at(index, kind, what):
            if index >= len(positional):
                raise self.c.error(f"#cuda_tile.{mnemonic} needs {what}", pos)
            return self._typed(self._resolve(positional[index]), kind, f"{mnemonic} {what}", pos)

        if mnemonic == "di_file":
            value = L.DIFile(positional_at(0, str, "a file name"),
                             positional_at(1, str, "a directory"))
        elif mnemonic == "di_compile_unit":
            value = L.DICompileUnit(field("file", L.DIFile))
        elif mnemonic == "di_subprogram":
            value = L.DISubprogram(field("file", L.DIFile), field("line", int),
                                   field("name", str), field("linkageName", str),
                                   field("compileUnit", L.DICompileUnit),
                                   field("scopeLine", int, 0), self._subprogram_flags(fields, used))
        elif mnemonic == "di_lexical_block":
            value = L.DILexicalBlock(field("scope", (L.DISubprogram, L.DILexicalBlock)),
                                     field("file", L.DIFile), field("line", int),
                                     field("column", int, 0))
        elif mnemonic == "di_loc":
            place = self._resolve(positional[0]) if positional else None
            if not (isinstance(place, tuple) and place[0] == "file"):
                raise self.c.error("#cuda_tile.di_loc needs a file location "
                                   "(loc(\"file\":line:col)) before 'in'", pos)
            scope = positional_at(1, (L.DISubprogram, L.DILexicalBlock), "a scope after 'in'")
            value = L.DILoc(scope, place[1], place[2], place[3])
        else:
            raise self.c.error(f"unknown debug attribute #cuda_tile.{mnemonic}", pos)
        unknown = set(fields) - used
        if unknown:
            key = sorted(unknown)[0]
            raise self.c.error(f"#cuda_tile.{mnemonic} has no parameter '{key}'", fields[key][1])
        return value

    def _subprogram_flags(self, fields, used) -> int:
        if "flags" not in fields:
            return 0
        used.add("flags")
        value_expr, pos = fields["flags"]
        if not (isinstance(value_expr, tuple) and value_expr[0] == "word"
                and value_expr[1] in SUBPROGRAM_FLAGS):
            raise self.c.error(f"di_subprogram flags: expected one of "
                               f"{', '.join(SUBPROGRAM_FLAGS)}", pos)
        return SUBPROGRAM_FLAGS[value_expr[1]]

    def _typed(self, value, kind, what: str, pos: int):
        if kind is int and isinstance(value, bool):
            value = None
        if not isinstance(value, kind):
            names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise self.c.error(f"{what}: expected {names.replace('str', 'a string')}", pos)
        return value
