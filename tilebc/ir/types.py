"""Tile IR types. All types are frozen records (tilebc/record.py), so equality is structural, as
the spec requires.

Function types refer to other types, so tables can share them: hashes are cached, equality and
`text_size` visit each distinct sub-type once, and the text of a function type is refused by the
printer (cut short elsewhere) past TYPE_TEXT_LIMIT characters (tilebc/ir/shared.py).
"""
from __future__ import annotations

from contextvars import ContextVar

from ..errors import TilebcError
from ..ops.enums import PaddingValue, PtrAttr
from ..record import Record
from ..version import V13_1, V13_2, V13_3, V13_4, Version
from .shared import BRIEF_LIMIT, brief, cached_hash, repr_pieces, shared_node

# Characters the text of one type may have. A function type's text spells out every type it
# refers to, so a type table whose entries refer to earlier ones twice describes text 2^n long;
# the reader refuses such types (DecodeLimits.max_type_text, same default), the printer refuses
# longer text and messages show it cut short.
TYPE_TEXT_LIMIT = 1 << 16
_EXACT_TEXT: ContextVar[bool] = ContextVar("tilebc_exact_type_text", default=False)


class exact_type_text:
    """Within this context, a type whose text exceeds TYPE_TEXT_LIMIT raises TilebcError when
    printed instead of printing cut short (the printer must not emit a shortened type). A class
    rather than a contextlib generator, as tilebc.gcpause.collection_paused."""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = _EXACT_TEXT.set(True)

    def __exit__(self, *exc_info) -> None:
        _EXACT_TEXT.reset(self._token)


class Type:
    """Base of every Tile IR type (each a frozen record, tilebc/record.py)."""

    __slots__ = ()


@cached_hash
class ElementType(Type, Record):
    """A scalar element type (`i32`, `f16`, `f8E4M3FN`, …). Use the module-level singletons."""

    _fields = ("name",)  # the name alone decides equality
    _shown = ("name", "bits", "kind")

    # kind: "int" | "float"
    def __init__(self, name: str, bits: int, kind: str, type_tag: int, since: Version = V13_1):
        _set = object.__setattr__
        _set(self, "name", name)
        _set(self, "bits", bits)
        _set(self, "kind", kind)
        _set(self, "type_tag", type_tag)
        _set(self, "since", since)

    def __str__(self) -> str:
        return self.name

    @property
    def class_name(self) -> str:
        """The name NVIDIA's bytecode reader gives the type in its errors (`Float4E2M1FN`, `Int4`)."""
        if self.kind == "int":
            return f"Int{self.bits}"
        if self.name[:1] == "f" and self.name[1:2].isdigit():
            return "Float" + self.name[1:]
        return self.name

    @property
    def is_integer(self) -> bool:
        return self.kind == "int"

    @property
    def is_float(self) -> bool:
        return self.kind == "float"


# name, storage bits, kind, wire type tag, first version
_ELEMENT_TABLE = (
    ("i1", 1, "int", 0, V13_1),
    ("i8", 8, "int", 1, V13_1),
    ("i16", 16, "int", 2, V13_1),
    ("i32", 32, "int", 3, V13_1),
    ("i64", 64, "int", 4, V13_1),
    ("f16", 16, "float", 5, V13_1),
    ("bf16", 16, "float", 6, V13_1),
    ("f32", 32, "float", 7, V13_1),
    ("tf32", 19, "float", 8, V13_1),
    ("f64", 64, "float", 9, V13_1),
    ("f8E4M3FN", 8, "float", 10, V13_1),
    ("f8E5M2", 8, "float", 11, V13_1),
    ("f8E8M0FNU", 8, "float", 18, V13_2),
    ("f4E2M1FN", 4, "float", 19, V13_3),
    ("i4", 4, "int", 22, V13_3),
    ("fnv8E5M3FNU", 8, "float", 130, V13_4),
)

ELEMENT_TYPES = {name: ElementType(name, bits, kind, tag, since)
                 for name, bits, kind, tag, since in _ELEMENT_TABLE}
ELEMENT_TYPES_BY_TAG = {t.type_tag: t for t in ELEMENT_TYPES.values()}

i1 = ELEMENT_TYPES["i1"]
i4 = ELEMENT_TYPES["i4"]
i8 = ELEMENT_TYPES["i8"]
i16 = ELEMENT_TYPES["i16"]
i32 = ELEMENT_TYPES["i32"]
i64 = ELEMENT_TYPES["i64"]
f16 = ELEMENT_TYPES["f16"]
bf16 = ELEMENT_TYPES["bf16"]
f32 = ELEMENT_TYPES["f32"]
tf32 = ELEMENT_TYPES["tf32"]
f64 = ELEMENT_TYPES["f64"]
f8E4M3FN = ELEMENT_TYPES["f8E4M3FN"]
f8E5M2 = ELEMENT_TYPES["f8E5M2"]
f8E8M0FNU = ELEMENT_TYPES["f8E8M0FNU"]
f4E2M1FN = ELEMENT_TYPES["f4E2M1FN"]
fnv8E5M3FNU = ELEMENT_TYPES["fnv8E5M3FNU"]

# Dynamic dims and strides are `?` in text and INT64_MIN in bytes; in the IR they are None.
Dim = int | None


@cached_hash
class PointerType(Type, Record):
    _fields = ("pointee", "ptr_attr")

    def __init__(self, pointee: ElementType, ptr_attr: PtrAttr = PtrAttr.NONE):
        _set = object.__setattr__
        _set(self, "pointee", pointee)
        _set(self, "ptr_attr", ptr_attr)

    def __str__(self) -> str:
        if self.ptr_attr != PtrAttr.NONE:
            return f"ptr<{self.pointee}, <{self.ptr_attr.keyword}>>"
        return f"ptr<{self.pointee}>"


@cached_hash
class TileType(Type, Record):
    _fields = ("shape", "element")

    def __init__(self, shape: tuple[int, ...], element: ElementType | PointerType):
        _set = object.__setattr__
        _set(self, "shape", shape)
        _set(self, "element", element)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def num_elements(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count

    def __str__(self) -> str:
        dims = "".join(f"{d}x" for d in self.shape)
        return f"tile<{dims}{self.element}>"


def _dims(values: tuple[Dim, ...], sep: str) -> str:
    return sep.join("?" if v is None else str(v) for v in values)


@cached_hash
class TensorViewType(Type, Record):
    _fields = ("element", "shape", "strides", "ptr_attr")

    def __init__(self, element: ElementType, shape: tuple[Dim, ...], strides: tuple[Dim, ...],
                 ptr_attr: PtrAttr = PtrAttr.NONE):
        _set = object.__setattr__
        _set(self, "element", element)
        _set(self, "shape", shape)
        _set(self, "strides", strides)
        _set(self, "ptr_attr", ptr_attr)

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        dims = "".join(f"{'?' if d is None else d}x" for d in self.shape)
        text = f"tensor_view<{dims}{self.element}"
        if self.shape:  # a 0-d view prints no (empty) stride list, as tileirdisasm does
            text += f", strides=[{_dims(self.strides, ',')}]"
        if self.ptr_attr != PtrAttr.NONE:
            text += f", #cuda_tile.ptr_attr<{self.ptr_attr.keyword}>"
        return text + ">"


@cached_hash
class PartitionViewType(Type, Record):
    _fields = ("tile_shape", "tensor_view", "dim_map", "padding_value")

    def __init__(self, tile_shape: tuple[int, ...], tensor_view: TensorViewType,
                 dim_map: tuple[int, ...], padding_value: PaddingValue | None = None):
        _set = object.__setattr__
        _set(self, "tile_shape", tile_shape)
        _set(self, "tensor_view", tensor_view)
        _set(self, "dim_map", dim_map)
        _set(self, "padding_value", padding_value)

    def __str__(self) -> str:
        text = f"partition_view<tile=({_dims(self.tile_shape, 'x')})"
        if self.padding_value is not None:
            text += f", padding_value = {self.padding_value.keyword}"
        text += f", {self.tensor_view}"
        if tuple(self.dim_map) != tuple(range(len(self.dim_map))):
            text += f", dim_map=[{', '.join(map(str, self.dim_map))}]"
        return text + ">"


@cached_hash
class StridedViewType(Type, Record):
    _fields = ("tile_shape", "traversal_strides", "tensor_view", "dim_map", "padding_value")

    def __init__(self, tile_shape: tuple[int, ...], traversal_strides: tuple[int, ...],
                 tensor_view: TensorViewType, dim_map: tuple[int, ...],
                       padding_value: PaddingValue | None = None):
        _set = object.__setattr__
        _set(self, "tile_shape", tile_shape)
        _set(self, "traversal_strides", traversal_strides)
        _set(self, "tensor_view", tensor_view)
        _set(self, "dim_map", dim_map)
        _set(self, "padding_value", padding_value)

    def __str__(self) -> str:
        text = (f"strided_view<tile=({_dims(self.tile_shape, 'x')}), "
                f"traversal_strides=[{','.join(map(str, self.traversal_strides))}]")
        if self.padding_value is not None:
            text += f", padding_value = {self.padding_value.keyword}"
        text += f", {self.tensor_view}"
        if tuple(self.dim_map) != tuple(range(len(self.dim_map))):
            text += f", dim_map=[{', '.join(map(str, self.dim_map))}]"
        return text + ">"


@cached_hash
class GatherScatterViewType(Type, Record):
    _fields = ("tile_shape", "tensor_view", "sparse_dim", "padding_value")

    def __init__(self, tile_shape: tuple[int, ...], tensor_view: TensorViewType, sparse_dim: int,
                 padding_value: PaddingValue | None = None):
        _set = object.__setattr__
        _set(self, "tile_shape", tile_shape)
        _set(self, "tensor_view", tensor_view)
        _set(self, "sparse_dim", sparse_dim)
        _set(self, "padding_value", padding_value)

    def __str__(self) -> str:
        text = f"gather_scatter_view<tile=({_dims(self.tile_shape, 'x')})"
        if self.padding_value is not None:
            text += f", padding_value = {self.padding_value.keyword}"
        return text + f", {self.tensor_view}, sparse_dim={self.sparse_dim}>"


@cached_hash
class TokenType(Type, Record):
    _fields = ()

    def __str__(self) -> str:
        return "token"


@shared_node
class FunctionType(Type, Record):
    _fields = ("inputs", "results")

    def __init__(self, inputs: tuple[Type, ...], results: tuple[Type, ...] = ()):
        _set = object.__setattr__
        _set(self, "inputs", inputs)
        _set(self, "results", results)

    def __str__(self) -> str:
        size = text_size(self)
        exact = _EXACT_TEXT.get()
        if size > TYPE_TEXT_LIMIT and exact:
            raise TilebcError(f"cannot print a function type of {size} characters (more than "
                              f"{TYPE_TEXT_LIMIT}): it refers to the same types over and over")
        # Outside the printer, a long function type that nests function types (valid nowhere, so
        # only messages about invalid IR show it) is cut short, as is any past the limit.
        if not exact and (size > TYPE_TEXT_LIMIT or size > BRIEF_LIMIT and any(
                isinstance(part, FunctionType) for part in self.inputs + self.results)):
            return f"{brief(self)} (a function type of {size} characters)"
        return f"({', '.join(map(str, self.inputs))}) -> ({', '.join(map(str, self.results))})"

    def _text_pieces(self, render):
        """The text as pieces: strings and the types to render in between (for `brief`)."""
        if render is not str:
            yield from repr_pieces(self, render)
            return
        yield "("
        for index, item in enumerate(self.inputs):
            if index:
                yield ", "
            yield item
        yield ") -> ("
        for index, item in enumerate(self.results):
            if index:
                yield ", "
            yield item
        yield ")"


def text_size(type_: Type) -> int:
    """len(str(type_)) without building the text: one step per distinct function type."""
    own = getattr(type_, "__dict__", None)
    cached = None if own is None else own.get("_text_size")
    if cached is not None:
        return cached
    if not isinstance(type_, FunctionType):  # kept: an entry's signature repeats its types
        size = len(str(type_))
        if own is not None:
            own["_text_size"] = size
        return size
    stack = [type_]
    while stack:  # post-order without recursion: nesting may be deep in a hand-built type
        node = stack[-1]
        pending = [t for t in node.inputs + node.results
                   if isinstance(t, FunctionType) and "_text_size" not in t.__dict__]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        parts = [text_size(t) for t in node.inputs], [text_size(t) for t in node.results]
        node.__dict__["_text_size"] = 8 + sum(  # "(" ins ") -> (" results ")"
            sum(sizes) + 2 * max(len(sizes) - 1, 0) for sizes in parts)
    return type_.__dict__["_text_size"]


token = TokenType()

ViewType = (PartitionViewType, StridedViewType, GatherScatterViewType)


def tile(shape, element) -> TileType:
    """Convenience constructor: tile((16, 8), f32)."""
    return TileType(tuple(int(d) for d in shape), element)


def scalar(element) -> TileType:
    """A 0-d tile: the spec's scalars."""
    return TileType((), element)


# Versions in which composite type kinds and optional parameters appeared.
TYPE_KIND_SINCE = {
    PointerType: V13_1, TileType: V13_1, TensorViewType: V13_1, PartitionViewType: V13_1,
    FunctionType: V13_1, TokenType: V13_1, GatherScatterViewType: V13_3, StridedViewType: V13_3,
}
PTR_ATTR_SINCE = V13_4
