"""Text → Type: the type syntax of the text form (`tile<4xf32>`, `ptr<f16>`, `tensor_view<...>`,
the partition/strided/gather-scatter views), read from the op parser's cursor."""
from __future__ import annotations

import re
import sys

from ..ir import types as T
from ..ops.enums import PaddingValue, PtrAttr
from .lexer import SPACES, Cursor, shorten

_ELEMENT_NAMES = sorted(T.ELEMENT_TYPES, key=len, reverse=True)
_ELEMENT = re.compile(r"(?:!cuda_tile\.)?(" + "|".join(map(re.escape, _ELEMENT_NAMES)) + r")(?![A-Za-z0-9_])")
_KIND = re.compile(r"(?:!cuda_tile\.)?(tile|ptr|tensor_view|partition_view|strided_view|"
                   r"gather_scatter_view|token)(?![A-Za-z0-9_])")
_DIM = re.compile(r"(\?|[0-9]+)x")
_BUILTIN_TYPE = re.compile(r"(tensor|vector|memref|index|complex|tuple|none)(?![A-Za-z0-9_])")
_INT = re.compile(r"-?[0-9]+")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Where a type's text may end: a word and a <...> nesting up to three deep (a ptr_attr in a
# tensor_view in a partition_view). A type read once is looked up by this text after that.
# Spaces and comments before it are skipped by the same match (group 2: the type's text).
# Each character decides its branch, so nothing given back could match otherwise: where Python
# has possessive repeats (3.11), runs of plain characters are taken whole (a third faster).
if sys.version_info >= (3, 11):
    _SPAN = re.compile(SPACES + r"([A-Za-z_!][A-Za-z0-9_.!]*"
                       r"(?:<(?:[^<>\n]++|<(?:[^<>\n]++|<[^<>\n]*+>)*+>)*+>)?)")
else:
    _SPAN = re.compile(SPACES + r"([A-Za-z_!][A-Za-z0-9_.!]*"
                       r"(?:<(?:[^<>\n]|<(?:[^<>\n]|<[^<>\n]*>)*>)*>)?)")

TYPE_SPAN = _SPAN.match  # for the generated op parsers (tilebc/text/parsegen.py)


class TypeParser:
    def __init__(self, cursor: Cursor):
        self.c = cursor
        # text -> the type read from it: a module names few distinct types many times, and one
        # object per distinct type lets the verifier and writer key them by identity (as the
        # bytecode reader's type table does)
        self._known = {}

    def fail(self, what: str):
        return self.c.error(f"expected {what}", self._pos())

    def _pos(self):
        self.c.skip_space()
        return self.c.pos

    def lit(self, text: str) -> None:
        if not self.c.match_text(text):
            raise self.fail(f"'{text}' in type")

    def opt(self, text: str) -> bool:
        return self.c.match_text(text)

    def ints(self, sep: str, allow_dynamic=False) -> tuple:
        values = []
        pattern = re.compile(r"\?|-?[0-9]+" if allow_dynamic else r"-?[0-9]+")
        first = True
        while True:
            if not first and not self.opt(sep):
                break
            match = self.c.match_raw(pattern)
            if not match:
                if first:
                    break
                raise self.fail("an integer")
            values.append(None if match.group() == "?" else self._number(match))
            first = False
        return tuple(values)

    def element(self):
        match = self.c.match_raw(_ELEMENT)
        if match:
            return T.ELEMENT_TYPES[match.group(1)]
        start = self._pos()
        kind = self.c.match_raw(_KIND)
        if kind and kind.group(1) == "ptr":
            return self._ptr()
        self.c.pos = start
        raise self.fail("an element type")

    def _ptr(self):
        self.lit("<")
        pointee = self.element()
        attr = PtrAttr.NONE
        if self.opt(","):
            self.opt("#cuda_tile.ptr_attr")
            self.lit("<")
            attr = self._enum(PtrAttr)
            self.lit(">")
        self.lit(">")
        return T.PointerType(pointee, attr)

    def _enum(self, enum):
        match = self.c.match_raw(_WORD)
        try:
            return enum.from_keyword(match.group() if match else "")
        except KeyError:
            raise self.fail(f"one of {', '.join(m.keyword for m in enum)}") from None

    def _number(self, match, group: int = 0) -> int:
        """An integer matched in a type; a dimension needs at most 20 digits (2**64)."""
        text = match.group(group)
        if len(text.lstrip("-0")) > 20:
            raise self.c.error(f"number '{shorten(text)}' in a type is too large", match.start())
        return int(text)

    def type(self):
        c = self.c
        span = _SPAN.match(c.text, c.pos)
        if span is not None:
            text = span.group(2)
            known = self._known.get(text)
            if known is not None:
                c._peeked = None
                c.pos = c.end = span.end()
                return known
            c.pos = span.start(2)
            found = self._type()
            if c.pos == span.end():
                self._known[text] = found
            return found
        return self._type()

    def _type(self):
        start = self._pos()
        match = self.c.match_raw(_ELEMENT)
        if match:  # a bare element type stands for a 0-d tile only where MLIR allows it
            return T.ELEMENT_TYPES[match.group(1)]
        kind = self.c.match_raw(_KIND)
        if not kind:
            self.c.pos = start
            builtin = self.c.match_raw(_BUILTIN_TYPE)
            if builtin:  # NVIDIA's parser takes these; its bytecode writer then refuses them
                raise self.c.error(f"unsupported type in bytecode writer: '{builtin.group(1)}' "
                                   "is an MLIR builtin type, not a Tile IR type", start)
            raise self.fail("a type")
        name = kind.group(1)
        if name == "token":
            return T.token
        if name == "ptr":
            return self._ptr()
        self.lit("<")
        if name == "tile":
            shape = []
            while True:
                dim = self.c.match_raw(_DIM)
                if not dim:
                    break
                if dim.group(1) == "?":
                    raise self.c.error("a tile's dimensions are static: expected an integer, "
                                       "found '?'", dim.start())
                shape.append(self._number(dim, 1))
            element = self.element()
            self.lit(">")
            if any(d <= 0 for d in shape):  # NVIDIA's parser refuses these in its words
                raise self.c.error(f"all dimensions must be positive constants, got "
                                   f"{', '.join(map(str, shape))}", start)
            return T.TileType(tuple(shape), element)
        if name == "tensor_view":
            return self._tensor_view_body()
        self.lit("tile")
        self.lit("=")
        self.lit("(")
        tile_shape = self.ints("x")
        self.lit(")")
        strides = None
        if name == "strided_view":
            self.lit(",")
            self.lit("traversal_strides")
            self.lit("=")
            self.lit("[")
            strides = self.ints(",")
            self.lit("]")
        self.lit(",")
        padding = None
        if self.opt("padding_value"):
            self.lit("=")
            padding = self._enum(PaddingValue)
            self.lit(",")
        self.opt("!cuda_tile.")
        self.lit("tensor_view")
        self.lit("<")
        view = self._tensor_view_body()
        if name == "gather_scatter_view":
            self.lit(",")
            self.lit("sparse_dim")
            self.lit("=")
            sparse = self.c.match_raw(_INT)
            if sparse is None:
                raise self.fail("an integer (sparse_dim)")
            sparse = self._number(sparse)
            self.lit(">")
            return T.GatherScatterViewType(tile_shape, view, sparse, padding)
        dim_map = tuple(range(len(view.shape)))
        if self.opt(","):
            self.lit("dim_map")
            self.lit("=")
            self.lit("[")
            dim_map = self.ints(",")
            self.lit("]")
        self.lit(">")
        if name == "strided_view":
            return T.StridedViewType(tile_shape, strides, view, dim_map, padding)
        return T.PartitionViewType(tile_shape, view, dim_map, padding)

    def _tensor_view_body(self):
        shape = []
        while True:
            dim = self.c.match_raw(_DIM)
            if not dim:
                break
            shape.append(None if dim.group(1) == "?" else self._number(dim, 1))
        element = self.element()
        if not shape and self.opt(">"):  # a 0-d view may leave out `, strides=[]`
            return T.TensorViewType(element, (), (), PtrAttr.NONE)
        self.lit(",")
        if not shape:
            # NVIDIA's type parser words it so; a 0-d view has no strides to give
            raise self.c.error("strides must not be provided for 0-d tiles (a 0-d tensor_view "
                               "is written without `, strides=[]`)")
        self.lit("strides")
        self.lit("=")
        self.lit("[")
        strides_pos = self._pos()
        strides = self.ints(",", allow_dynamic=True)
        self.lit("]")
        attr = PtrAttr.NONE
        if self.opt(","):
            self.lit("#cuda_tile.ptr_attr")
            self.lit("<")
            attr = self._enum(PtrAttr)
            self.lit(">")
        self.lit(">")
        if len(strides) != len(shape):
            raise self.c.error(f"tensor_view has {len(shape)} dimensions but {len(strides)} "
                               f"strides", strides_pos)
        return T.TensorViewType(element, tuple(shape), tuple(strides), attr)
