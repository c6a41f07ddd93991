"""Text of attribute values: strings, symbols, typed attributes, dense elements, hints, predicates."""
from __future__ import annotations

import re

from ..ir import attrs as A
from ..ir.types import ElementType, PointerType, TileType
from ..numeric.dense import dense_is_splat, dense_is_uniform, storage_bytes
from .floats import format_float

# A name printed bare: [A-Za-z_][A-Za-z0-9_$.]* (tested with str methods: compiling the regex
# cost every `tilebc dis` ~0.1 ms).
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_"
_IDENTIFIER_START = frozenset(_LETTERS)
_IDENTIFIER_CHARS = _LETTERS + "0123456789$."


def _is_bare(name: str) -> bool:
    return name[:1] in _IDENTIFIER_START and not name.strip(_IDENTIFIER_CHARS)


class _RunEscapes(dict):
    """A run of bytes printEscapedString writes as `\\XX` each -> its escapes, by one hex() call.
    Runs of one or two bytes (a control byte, a two-byte UTF-8 letter) are kept once seen:
    filling the table ahead cost every start of the printer a millisecond."""

    def __missing__(self, run: bytes) -> bytes:
        escaped = b"\\" + run.hex("\\").upper().encode("ascii")
        if len(run) <= 2:
            self[run] = escaped
        return escaped


_ESCAPES = _RunEscapes()
# Runs of bytes outside printable ASCII, and `"` (the backslash is doubled beforehand); compiled
# on first use, by re's cache: most strings have none.
_ESCAPED_RUN = rb'([^\x20\x21\x23-\x7e]+)'
_PLAIN_BYTES = bytes([0x20, 0x21, *range(0x23, 0x7f)])


def escape_string(text: str) -> str:
    """llvm::printEscapedString inside double quotes, as tileirdisasm prints every string: `\\` as
    `\\\\`, and `"` and every byte outside printable ASCII as `\\XX` (upper-case hex of each byte:
    UTF-8, or the raw byte a lone surrogate from the reader escapes). Works on runs (split, map,
    join) so a long string costs no Python step per byte."""
    data = text.encode("utf-8", "surrogateescape").replace(b"\\", b"\\\\")
    if data.translate(None, _PLAIN_BYTES):  # a byte to escape
        pieces = re.split(_ESCAPED_RUN, data)  # plain, escaped run, plain, ..., plain
        pieces[1::2] = map(_ESCAPES.__getitem__, pieces[1::2])
        data = b"".join(pieces)
    return '"' + data.decode("ascii") + '"'


def symbol(name: str) -> str:
    return "@" + (name if _is_bare(name) else escape_string(name))


def keyword_or_string(name: str) -> str:
    return name if _is_bare(name) else escape_string(name)


def _int_text(raw: int, bits: int) -> str:
    raw &= (1 << bits) - 1
    if bits == 1:
        return "true" if raw else "false"
    return str(raw - (1 << bits) if raw >> (bits - 1) else raw)


def element_text(raw: int, element) -> str:
    if isinstance(element, ElementType) and element.is_float:
        return format_float(raw, element)
    bits = 64 if isinstance(element, PointerType) else element.bits
    return _int_text(raw, bits)


def dense_elements(dense: A.DenseElementsAttr) -> list[int]:
    """The raw element values of a dense buffer (a splat, or elements all equal, give one)."""
    element = dense.type.element
    data = dense.data
    if isinstance(element, ElementType) and element.name == "i1":
        if dense_is_splat(dense.type, data):
            return [1 if data[0] else 0]
        if dense_is_uniform(dense.type, data):
            return [data[0] & 1]
        return [data[i // 8] >> (i % 8) & 1 for i in range(dense.type.num_elements)]
    width = storage_bytes(element)
    if dense_is_uniform(dense.type, data):
        return [int.from_bytes(data[:width], "little")]
    return [int.from_bytes(data[i:i + width], "little") for i in range(0, len(data), width)]


def dense_body(dense: A.DenseElementsAttr) -> str:
    """What MLIR prints inside `dense<…>`: one value for a splat, nested lists otherwise."""
    values = dense_elements(dense)
    element = dense.type.element
    if len(values) == 1:
        return element_text(values[0], element)
    texts = [element_text(v, element) for v in values]
    return _nested(texts, dense.type.shape, 0, 0)[0]


def _nested(texts: list[str], shape, offset: int, dim: int) -> tuple[str, int]:
    """(the nested list of `texts` from `offset` along dims `dim`..., the offset after it). A
    function, not a closure: one that calls itself is a reference cycle, left to the collector."""
    if dim == len(shape):
        return texts[offset], offset + 1
    parts = []
    for _ in range(shape[dim]):
        text, offset = _nested(texts, shape, offset, dim + 1)
        parts.append(text)
    return "[" + ", ".join(parts) + "]", offset


_DENSE_TEXT: dict = {}  # (type, data) -> text: replicated kernels repeat the same constants


def dense_constant(dense: A.DenseElementsAttr) -> str:
    """`<f32: 1.000000e+00> : tile<f32>` as constant and global print it."""
    data = dense.data
    key = (dense.type, data) if len(data) <= 64 else None  # big buffers are rarely repeated
    if key is not None:
        text = _DENSE_TEXT.get(key)
        if text is not None:
            return text
    text = f"<{dense.type.element}: {dense_body(dense)}> : {dense.type}"
    if key is not None:
        if len(_DENSE_TEXT) > 1 << 14:
            _DENSE_TEXT.clear()
        _DENSE_TEXT[key] = text
    return text


def typed_attr(value: A.Attribute) -> str:
    """A self-describing attribute as MLIR prints it (`0 : i32`, `1.0 : f32`, `"s"`, `[…]`)."""
    if isinstance(value, A.IntegerAttr):
        if value.type.bits == 1:
            return "true" if value.value else "false"
        return f"{value.value} : {value.type}" if value.type.name != "i64" else str(value.value)
    if isinstance(value, A.FloatAttr):
        return f"{format_float(value.bits, value.type)} : {value.type}"
    if isinstance(value, A.BoolAttr):
        return "true" if value.value else "false"
    if isinstance(value, A.StringAttr):
        return escape_string(value.value)
    if isinstance(value, A.TypeAttr):
        return str(value.value)
    if isinstance(value, A.ArrayAttr):
        return "[" + ", ".join(typed_attr(v) for v in value.elements) + "]"
    if isinstance(value, A.DenseElementsAttr):
        return f"dense<{dense_body(value)}> : {value.type}"
    if isinstance(value, A.DictionaryAttr):
        return dictionary(value)
    if isinstance(value, A.OptimizationHintsAttr):
        return "#cuda_tile.optimization_hints" + hints(value)
    if isinstance(value, (A.DivByAttr, A.SameElementsAttr, A.BoundedAttr)):
        return "#cuda_tile." + predicate(value)
    raise TypeError(f"cannot print attribute {value!r}")


def qualified_type(type_) -> str:
    """A type as MLIR's generic printer writes it inside a function type: `!cuda_tile.tile<f32>`."""
    return "!cuda_tile." + str(type_)


def _hint_value(value: A.Attribute) -> str:
    if isinstance(value, A.IntegerAttr) and value.type.bits > 1:
        return str(value.value)
    return typed_attr(value)


def _sorted(entries):
    """MLIR keeps a dictionary's entries sorted by the bytes of their names, whatever the file's order."""
    return sorted(entries, key=lambda entry: entry[0].encode("utf-8", "surrogateescape"))


def dictionary(value: A.DictionaryAttr, entry=typed_attr, key=keyword_or_string) -> str:
    if not value.entries:
        return "{}"
    return "{" + ", ".join(f"{key(k)} = {entry(v)}" for k, v in _sorted(value.entries)) + "}"


def _raw_key(name: str) -> str:
    return name


def hints(value: A.OptimizationHintsAttr) -> str:
    """`<sm_90 = {latency = 3}>`: tileirdisasm writes hint names as they are, never quoted."""
    return "<" + ", ".join(f"{arch} = {dictionary(d, _hint_value, _raw_key)}"
                           for arch, d in _sorted(value.entries)) + ">"


def predicate(value: A.Attribute) -> str:
    """An assume predicate without its `#cuda_tile.` prefix."""
    if isinstance(value, A.DivByAttr):
        text = f"div_by<{value.divisor}"
        if value.every is not None:
            text += f", every {value.every} along {value.along}"
        return text + ">"
    if isinstance(value, A.SameElementsAttr):
        return f"same_elements<[{', '.join(map(str, value.values))}]>"
    if isinstance(value, A.BoundedAttr):
        low = "?" if value.lower is None else str(value.lower)
        high = "?" if value.upper is None else str(value.upper)
        return f"bounded<{low}, {high}>"
    raise TypeError(f"{value!r} is not an assume predicate")


def is_tile(value) -> bool:
    return isinstance(value, TileType)
