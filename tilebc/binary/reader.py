"""Bytes → Module. Frames all sections in one pass, then decodes them in dependency order.

Function bodies go through the compiled fast decoder (`fastpath.py`) and fall back to the careful,
step-by-step decoder here, which is the one source of error messages. Op locations are decoded on
first use (`lazyloc.py`) unless `lazy_debug=False`. Limits on untrusted input are in `limits.py`.
"""
from __future__ import annotations

import io
import os
import struct
import sys
from array import array

from ..codecache import LARGE_INPUT_BYTES
from ..errors import DecodeError, TilebcError
from ..gcpause import collection_paused
from ..ir import attrs as A
from ..ir import location as L
from ..ir import types as T
from ..ir.module import Block, Function, Global, Module, Op, Region, Value
from ..numeric.dense import dense_expected_sizes, dense_is_splat, dense_size_ok
from ..ir.shared import brief
from ..ops.enums import PaddingValue, PtrAttr, SymbolVisibility
from ..ops.spec import Arity, AttrKind
from ..ops.table import OPS_BY_OPCODE, max_public_opcode
from ..version import (DISUBPROGRAM_FLAGS, ENTRY_ARG_ATTRS,
                       GLOBAL_VISIBILITY_AND_CONSTANT, MAX_VERSION, MIN_VERSION, POINTER_ATTR,
                       PREVIEW_TAG, UNIFIED_OPTIONAL_BITFIELD, Version)
from . import container
from .container import (CHECKED_ON_USE, CLAMPED, EXACT, MAGIC, PREVIEW_TAG_BIT, REQUIRED_SECTIONS,
                        SECTION_ALIGNMENT, BlobTable, SectionId, construct_detail, parse_construct,
                        plain_section, plain_table)
from .fastpath import VALUE_SLOTS, Bail, compiled_decoder, fast_decoder, varint_tail
from .. import speedups
from ..speedups import decode_ops, new_values, plain_locations
from .layout import FileLayout, used_bitmap
from .lazyloc import DecodedFunction, DecodedOp, PendingLocations, defer_location
from .lenient import WarningLog
from .limits import DEFAULT_LIMITS, DecodeLimits
from .plans import ABSENT, FLAT, OPTIONAL, READ, SEGMENTED, UNIT, OpPlan, plan_for
from .primitives import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, Reader
from .tags import (ATTR_ARRAY, ATTR_BOOL, ATTR_BOUNDED, ATTR_DENSE, ATTR_DICTIONARY, ATTR_DIV_BY,
                   ATTR_FLOAT, ATTR_HINTS, ATTR_INTEGER, ATTR_SAME_ELEMENTS, ATTR_STRING, ATTR_TYPE,
                   COMPOSITE_TAG_SINCE, DEBUG_CALL_SITE, DEBUG_COMPILE_UNIT, DEBUG_FILE,
                   DEBUG_LEXICAL_BLOCK, DEBUG_LOC, DEBUG_SUBPROGRAM, DEBUG_UNKNOWN,
                   DISUBPROGRAM_KNOWN_FLAGS, FUNCTION_FLAG_HINTS, FUNCTION_FLAG_KERNEL,
                   FUNCTION_FLAG_PRIVATE, TAG_FUNCTION, TAG_GATHER_SCATTER_VIEW, TAG_PARTITION_VIEW,
                   TAG_POINTER, TAG_STRIDED_VIEW, TAG_TENSOR_VIEW, TAG_TILE, TAG_TOKEN)

_DYNAMIC = INT64_MIN

_MISSING = object()
_SECTION_IDS = frozenset(SectionId.__members__.values())
_LOC_SCOPES = (L.DISubprogram, L.DILexicalBlock)  # what a DILoc's scope may be

UNKNOWN_FUNCTION_FLAGS_REFUSED = Version(13, 4)  # NVIDIA ignores unknown function flag bits before

def _arguments(types, block: Block) -> list[Value]:
    """A block's arguments of `types` (in C by new_values where tilebc._speedups is built)."""
    if new_values is not None:
        return new_values(tuple(types), block, Value, *VALUE_SLOTS)
    return [Value(t, block, i) for i, t in enumerate(types)]


# (version, preview) -> {opcode: compiled decoder} for the opcodes `_fast_decoder` let through in
# such a file. Bounded: five versions, two tags, one entry per opcode.
_FAST_READY: dict[tuple[Version, bool], dict[int, object]] = {}


def load(source: bytes | bytearray | memoryview | str | os.PathLike, *,
         limits: DecodeLimits | None = None, lazy_debug: bool = True,
         strict: bool = False) -> Module:
    """Decode a Tile IR bytecode file (bytes or a path) into a Module.

    Raises DecodeError (file, byte offset, what was expected; category "malformed") on malformed
    input, including versions outside 13.1–13.5 and input beyond `limits` (default DecodeLimits()).
    With `lazy_debug` (the default) the debug section's framing and index ranges are checked here and
    each function's op locations are decoded when one of them is first read: a broken debug
    attribute then raises its DecodeError from that `op.loc` access. `lazy_debug=False` decodes every
    location now, so all of those errors are raised by load. Any other exception is a tilebc bug.

    Deviations that NVIDIA's reader accepts (format_spec.md §16: padding bytes, table order,
    leftover bytes in an entry, unknown flag bits, ...) are read as tileirdisasm reads them and
    listed on `module.decode_warnings` (DecodeWarning: message, offset, category "lenient"); those
    found in debug attributes are added when the locations are decoded. `strict=True` raises the
    DecodeError each warning names instead.
    """
    limits = DEFAULT_LIMITS if limits is None else limits
    file = None
    if isinstance(source, (str, os.PathLike)):
        file = os.fspath(source)
        try:
            size = os.path.getsize(file)
            if size > limits.max_input_bytes:
                raise DecodeError(f"limit exceeded: input is {size} bytes, more than max_input_bytes="
                                  f"{limits.max_input_bytes}", file=file, offset=0)
            with open(file, "rb") as handle:
                data = handle.read()
        except OSError as error:
            raise TilebcError(f"cannot read bytecode: {error.strerror}", file=file) from None
    else:
        data = bytes(source)
    with collection_paused():
        return ModuleReader(data, file, limits=limits, lazy_debug=lazy_debug,
                            strict=strict).read()


def _unsigned_array(raw: bytes, code: str, size: int) -> array:
    """Little-endian unsigned numbers of `size` bytes as an array(`code`)."""
    numbers = array(code)
    if numbers.itemsize != size:  # not this width on this platform: a list of ints
        return list(struct.unpack(f"<{len(raw) // size}{code}", raw))  # type: ignore[return-value]
    numbers.frombytes(raw)
    if sys.byteorder != "little":
        numbers.byteswap()
    return numbers


def _decode_ops(mr, reader, data, pos: int, end: int, values, preorder, pending, depth: int,
                base: int, decoders: dict, count: int):
    """(ops, position after them): the ops of a body (`count` < 0: up to `end`) or of a block
    (`count` of them), each by its compiled decoder; tilebc._speedups.decode_ops where built."""
    ops = []
    while pos < end if count < 0 else len(ops) < count:
        start = pos
        opcode = data[pos]
        pos += 1
        if opcode >= 0x80:
            opcode, pos = varint_tail(data, pos, opcode)
        decode = decoders.get(opcode) or mr._fast_decoder(opcode)
        op, pos = decode(mr, reader, data, pos, end, values, preorder, pending, depth, base + start)
        ops.append(op)
    return ops, pos


# _header_attr keeps encodings up to this size, this many of them, of this many lengths for
# each first two bytes
_HEADER_BLOB_LIMIT = 1024
_HEADER_ATTRS_KEPT = 4096
_HEADER_LENGTHS_KEPT = 8


class ModuleReader:
    # Tests switch this off to compare the fast decoder with the careful one.
    use_fast_path = True
    # Uses of an opcode in a file before the fast path compiles its decoder (~0.5 ms each): until
    # then the careful reader decodes those ops inside the fast loop, so a small kernel compiles
    # nothing it reads a few times. Already compiled decoders (this process) are used at once. A
    # file of COMPILE_AT_ONCE bytes or more has many ops of most kinds it uses: it compiles each
    # decoder at the first op (the careful reads cost the 1.4 MB module's first decode ~6 ms).
    fast_compile_after = 4
    COMPILE_AT_ONCE = LARGE_INPUT_BYTES

    def __init__(self, data: bytes, file: str | None = None, *,
                 limits: DecodeLimits = DEFAULT_LIMITS, lazy_debug: bool = True,
                 strict: bool = False):
        self.data = data
        if len(data) >= self.COMPILE_AT_ONCE:
            self.fast_compile_after = 0
        self.strict = strict
        self.log = WarningLog(file)
        self.file = file
        self.limits = limits
        self.lazy_debug = lazy_debug
        self.version = MIN_VERSION
        self.strings: BlobTable = ()
        self._string_cache: dict[int, str] = {}
        self.type_blobs: BlobTable = ()
        self._types: dict[int, T.Type] = {}
        self._types_in_progress: set = set()
        self.constant_blobs: BlobTable = ()
        self._constants: dict[int, bytes] = {}
        # (constant index, tile type) -> its attribute, shared by the ops that use it (attributes
        # are frozen; a module reuses few constants across many ops). The C decoder looks it up
        # by the same key before it calls dense() (_opdecoder.c, K_DENSE).
        self._dense: dict[tuple, A.DenseElementsAttr] = {}
        self.debug_blobs: BlobTable = ()
        self._debug_attrs: dict[int, object] = {}
        self._debug_in_progress: set = set()
        self.debug_function_indices: list[list[int]] = []
        self._debug_indices: list[int] = []
        self._debug_firsts: tuple[int, ...] = ()
        self.preview = False
        self.max_opcode = 0
        self._plans: dict[int, OpPlan] = {}
        self._fast: dict[int, object] = {}
        self._fast_uses: dict[int, int] = {}  # opcode -> ops read carefully in the fast loop
        self._locations: dict[int, object] = {0: None}
        self._attr_cache: dict[tuple, A.Attribute] = {}  # fast path: equal attributes shared
        # entry header attributes: {first two bytes: {length: {encoding: attribute}}}
        self._header_attrs: dict[bytes, dict] = {}
        self._header_attr_count = 0
        self.num_ops = 0
        self.num_params = 0  # parameters of the entries read so far
        self.fast_fallbacks = 0  # function bodies the fast decoder handed back (tests watch this)
        # For the file's layout (layout.py): sections in file order, each entry's debug-function
        # index, the bytes after the last entry.
        self.section_spans: list[tuple] = []
        self.function_slots: list[int] = []
        self.func_tail = b""

    def error(self, message: str, offset: int) -> DecodeError:
        return DecodeError(message, file=self.file, offset=offset)

    def lenient(self, message: str, offset: int, action: str) -> None:
        """A deviation NVIDIA's reader accepts: an error when strict, else a warning, and the
        caller goes on reading the bytes as `action` says (tileirdisasm's reading)."""
        if self.strict:
            raise self.error(message, offset)
        self.log.add(message, offset, action)

    # ---- container -------------------------------------------------------------------------------

    def read(self) -> Module:
        try:
            return self._read()
        except TilebcError:
            raise
        except RecursionError:  # unreachable with sane limits; never let it escape as a crash
            raise self.error("limit exceeded: structures nested too deeply for Python's stack "
                             "(lower max_nesting)", 0) from None

    def _read(self) -> Module:
        data = self.data
        if len(data) > self.limits.max_input_bytes:
            raise self.error(f"limit exceeded: input is {len(data)} bytes, more than "
                             f"max_input_bytes={self.limits.max_input_bytes}", 0)
        if len(data) < 8 or data[:8] != MAGIC:
            raise self.error("invalid magic number: input does not start with the Tile IR magic "
                             "7f 54 69 6c 65 49 52 00", 0)
        if len(data) < 12:  # the schema says what is missing
            parse_construct(container.Header, data[:12], base=0, what="header", file=self.file)
        major, minor, tag = data[8], data[9], data[10] | data[11] << 8
        version = Version(major, minor)
        if not (MIN_VERSION <= version <= MAX_VERSION):
            raise self.error(f"unsupported Tile version {version}.{tag}, this reader supports "
                             f"versions [{MIN_VERSION} - {MAX_VERSION}]", 8)
        self.version = version
        self.max_opcode = max_public_opcode(version)
        if tag & ~PREVIEW_TAG_BIT:
            raise self.error(f"header has unrecognized version tag bits 0x{tag:04x}", 10)
        if tag & PREVIEW_TAG_BIT:
            if version < PREVIEW_TAG:
                raise self.error(f"public-preview tag bit set in a {version} file; preview "
                                 f"bytecode needs version {PREVIEW_TAG}", 10)
            self.preview = True
        # The compiled decoders of the opcodes that passed the checks above in a file of this
        # version and preview tag (the checks depend on nothing else): not looked up one by one.
        self._fast = dict(_FAST_READY.get((version, self.preview), ()))
        sections = self._frame_sections()
        for required in REQUIRED_SECTIONS:
            if required not in sections:
                raise self.error(f"{required.name.lower()} section is mandatory but missing",
                                 len(data))

        self._read_strings(*sections[SectionId.STRING])
        producer = None
        if SectionId.PRODUCER in sections:
            offset, payload = sections[SectionId.PRODUCER]
            reader = Reader(payload, base=offset, file=self.file)
            producer = self.string(reader.varint("producer string index"), offset)
            if not reader.at_end():
                raise reader.error(f"{reader.remaining} unexpected bytes after the producer")
        if SectionId.TYPE in sections:
            self.type_blobs = self._read_table("TypeTable", 4, *sections[SectionId.TYPE], "type table",
                                               CHECKED_ON_USE)
            if len(self.type_blobs) > self.limits.max_types:
                raise self.error(f"limit exceeded: type table has {len(self.type_blobs)} entries, "
                                 f"more than max_types={self.limits.max_types}",
                                 sections[SectionId.TYPE][0])
        if SectionId.CONSTANT in sections:
            self.constant_blobs = self._read_table("ConstantTable", 8, *sections[SectionId.CONSTANT],
                                                   "constant table")
        if SectionId.DEBUG in sections:
            # popped: the section's copy is not kept while the bodies decode (what the debug
            # table needs of it, _read_debug copies)
            self._read_debug(*sections.pop(SectionId.DEBUG))
        module = Module(version=version, producer=producer, preview=self.preview, source=self.file)
        # The same list the log fills: lazily decoded debug attributes add theirs when first read.
        module.decode_warnings = self.log.warnings
        if SectionId.GLOBAL in sections:
            module.globals = self._read_globals(*sections[SectionId.GLOBAL])
        module.functions = self._read_functions(*sections[SectionId.FUNC])
        if not self.log.warnings:  # a lenient reading is not re-created byte for byte
            module.layout = self._layout()
        return module

    def _layout(self) -> FileLayout:
        used = {SectionId.STRING: used_bitmap(len(self.strings), self._string_cache),
                SectionId.TYPE: used_bitmap(len(self.type_blobs), self._types),
                SectionId.CONSTANT: used_bitmap(len(self.constant_blobs), self._constants)}
        return FileLayout(self.version, self.preview, self.data, tuple(self.section_spans),
                          tuple(self.function_slots), self.func_tail, used)

    def _frame_sections(self) -> dict[SectionId, tuple[int, bytes]]:
        sections: dict[SectionId, tuple[int, bytes]] = {}
        start = 12
        while True:
            if start >= len(self.data):
                raise self.error("truncated input: missing end-of-bytecode section", start)
            id_byte = self.data[start]
            if id_byte == 0x80:
                raise self.error("end section must not have the alignment flag set", start)
            if (id_byte & 0x7F) not in _SECTION_IDS:
                raise self.error(f"unknown section ID: {id_byte & 0x7F}", start)
            found = plain_section(self.data, start)
            if found is None:  # something unusual: construct's schema reports it or reads on
                if id_byte & 0x7F:
                    # construct's VarInt accepts any length; like NVIDIA, refuse varints over 10
                    # bytes. (A header plain_section reads has varints of at most 10 bytes that
                    # fit in 64 bits: a larger length or alignment cannot fit the data.)
                    header = Reader(self.data, start + 1, file=self.file)
                    header.varint("section length")
                    if id_byte & 0x80:
                        header.varint("section alignment")
                found = self._construct_section(start)
            section_id, aligned, length, alignment, payload, end = found
            if section_id == SectionId.END:
                if aligned:
                    raise self.error("end section must not have the alignment flag set", start)
                if end != len(self.data):
                    raise self.error("end section is not the last section: "
                                     f"{len(self.data) - end} bytes follow it", end)
                return sections
            section_id = SectionId(section_id)
            required = SECTION_ALIGNMENT[section_id]
            if required is not None:
                if not aligned or alignment % required:
                    raise self.error(f"{section_id.name.lower()} section must be aligned to a "
                                     f"multiple of {required}", start)
            if section_id in sections:
                self.lenient(f"duplicate {section_id.name.lower()} section", start,
                             "the last one is read, as tileirdisasm does")
            sections[section_id] = (end - length, payload)
            self.section_spans.append((section_id, alignment or 0, end - length, length))
            start = end

    def _construct_section(self, start: int):
        """plain_section's tuple for a section it would not read, by the `Section` schema."""
        import construct as cs
        stream = io.BytesIO(self.data)
        stream.seek(start)
        padding = None if self.strict else []
        try:
            section = container.Section.parse_stream(stream, padding_sink=padding)
        except cs.ConstructError as error:
            detail = construct_detail(error, "file")
            raise self.error(f"malformed section header: {detail}", stream.tell()) from None
        for position, message in padding or ():
            self.lenient(f"malformed section header: {message}", position,
                         "padding is not read (tileirdisasm does not look at it)")
        return (section.header.id, section.header.aligned, section.length, section.alignment,
                section.payload, stream.tell())

    def _read_table(self, schema, offset_width: int, base: int, payload: bytes, what: str,
                    slicing: str = EXACT):
        Reader(payload, base=base, file=self.file).varint(f"{what} count")  # at most 10 bytes
        found = plain_table(payload, offset_width, offset_width)
        if found is None:  # something unusual: construct's schema reports it or reads on
            padding = None if self.strict else []
            table = parse_construct(getattr(container, schema), payload, base=base, what=what,
                                    file=self.file, padding_sink=padding)
            for position, message in padding or ():
                self.lenient(f"malformed {what}: {message}", base + position,
                             "padding is not read (tileirdisasm does not look at it)")
            found = table.count, table.offsets, table.data
        count, offset_bytes, blobs = found
        fmt = "<%d%s" % (count, "I" if offset_width == 4 else "Q")
        offsets = list(struct.unpack(fmt, offset_bytes))
        data_base = base + len(payload) - len(blobs)
        return BlobTable(offsets, blobs, what=what, base=data_base, file=self.file,
                         slicing=EXACT if self.strict else slicing, on_disorder=self._disorder(slicing),
                         max_overlap=self.limits.max_overlap_bytes)

    def _disorder(self, slicing: str):
        """The warning for a table whose offsets are out of order, read with `slicing`."""
        action = {CLAMPED: "each entry runs to the next offset, or to the end of the data when that "
                           "is smaller or past the end (tileirdisasm's slicing)",
                  CHECKED_ON_USE: "each entry runs to the next offset and is refused only if used "
                                  "while outside the data or reversed (as tileirdisasm reads it)"}
        return lambda message, offset: self.lenient(message, offset, action.get(slicing, ""))

    def _read_strings(self, base: int, payload: bytes) -> None:
        self.strings = self._read_table("StringTable", 4, base, payload, "string table", CLAMPED)

    def string(self, index: int, offset: int) -> str:
        cached = self._string_cache.get(index)
        if cached is not None:
            return cached
        if index >= len(self.strings):
            raise self.error(f"string index {index} out of range (table has {len(self.strings)})",
                             offset)
        # Bytes that are not UTF-8 (e.g. a file name from a non-UTF-8 path) become lone surrogates,
        # like tileirdisasm keeping the raw bytes; the writer turns them back into the same bytes.
        text = self.strings[index][1].decode("utf-8", "surrogateescape")
        self._string_cache[index] = text
        return text

    # ---- types -----------------------------------------------------------------------------------

    def type(self, index: int, offset: int) -> T.Type:
        cached = self._types.get(index)
        if cached is not None:
            return cached
        if index >= len(self.type_blobs):
            raise self.error(f"type index {index} out of range (table has {len(self.type_blobs)})",
                             offset)
        result = self._decode_entry(self._types_in_progress, index, offset, "type",
                                    "nested type references", self.type_blobs[index],
                                    self._decode_type)
        self._types[index] = result
        return result

    def _decode_entry(self, in_progress: set, index: int, offset: int, what: str, nesting: str,
                      entry: tuple[int, bytes], decode):
        """Decode one type or debug-attribute table entry, refusing reference cycles and chains
        deeper than max_nesting; bytes left over in the entry are a lenient reading."""
        if index in in_progress:
            raise self.error(f"{what} {index} refers to itself", offset)
        if len(in_progress) >= self.limits.max_nesting:
            raise self.error(f"limit exceeded: {what} {index} is reached through more than "
                             f"max_nesting={self.limits.max_nesting} {nesting}", offset)
        in_progress.add(index)
        try:
            blob_offset, blob = entry
            reader = Reader(blob, base=blob_offset, file=self.file)
            result = decode(reader)
            if not reader.at_end():
                self.lenient(f"{reader.remaining} unexpected bytes after {what} {index}",
                             reader.offset, "they are not read (tileirdisasm ignores them)")
        finally:
            in_progress.discard(index)
        return result

    def _type_ref(self, reader: Reader, what: str) -> T.Type:
        data, pos = reader.data, reader.pos
        if pos < reader.end and data[pos] < 0x80:  # one-byte index of an already decoded type
            cached = self._types.get(data[pos])
            if cached is not None:
                reader.pos = pos + 1
                return cached
        offset = reader.offset
        return self.type(reader.varint(what), offset)

    def _element(self, reader: Reader, what: str, allow_pointer: bool = False):
        offset = reader.offset
        result = self._type_ref(reader, what)
        if isinstance(result, T.ElementType) or (allow_pointer and isinstance(result, T.PointerType)):
            return result
        raise self.error(f"{what} must be an element type{' or pointer' if allow_pointer else ''}, "
                         f"got {brief(result)}", offset)

    def _enum(self, reader: Reader, enum, what: str):
        offset = reader.offset
        value = reader.varint(what)
        # the members by value first: what enum(value) looks in before anything else
        member = enum._value2member_map_.get(value)
        if member is None:
            try:
                member = enum(value)
            except ValueError:
                raise self.error(f"invalid {what} value {value}", offset) from None
        if member.since > self.version:
            raise self.error(f"enum value {value} of {enum.__name__} is not available in bytecode "
                             f"version {self.version} (needs {member.since})", offset)
        return member

    def _dims(self, reader: Reader, what: str):
        return tuple(None if v == _DYNAMIC else v for v in reader.int_array(8, what))

    def _decode_type(self, reader: Reader) -> T.Type:
        tag_offset = reader.offset
        tag = reader.varint("type tag")
        element = T.ELEMENT_TYPES_BY_TAG.get(tag)
        if element is not None:
            if element.since > self.version:
                raise self.error(f"type '{element.class_name}' requires bytecode version {element.since}+, "
                                 f"file version is {self.version}", tag_offset)
            return element
        since = COMPOSITE_TAG_SINCE.get(tag)
        if since is None:
            raise self.error(f"unknown type tag {tag}", tag_offset)
        if since > self.version:
            raise self.error(f"type tag {tag} requires bytecode version {since}+, file version is "
                             f"{self.version}", tag_offset)
        version = self.version
        if tag == TAG_TOKEN:
            return T.token
        if tag == TAG_POINTER:
            flags = reader.varint("pointer flags") if version >= POINTER_ATTR else 0
            pointee = self._element(reader, "pointee type")
            ptr_attr = self._enum(reader, PtrAttr, "ptr_attr") if flags & 1 else PtrAttr.NONE
            self._check_flags(flags, 1, "pointer", tag_offset)
            return T.PointerType(pointee, ptr_attr)
        if tag == TAG_TILE:
            element = self._element(reader, "tile element type", allow_pointer=True)
            shape = reader.int_array(8, "tile shape")
            if any(d <= 0 for d in shape):
                raise self.error(f"tile shape {shape} has a non-positive dimension", tag_offset)
            elements = 1
            for dim in shape:  # stops early: a hostile shape's product is never formed in full
                elements *= dim
                if elements > self.limits.max_tile_elements:
                    raise self.error(f"limit exceeded: tile shape {shape} has more than "
                                     f"max_tile_elements={self.limits.max_tile_elements} elements",
                                     tag_offset)
            return T.TileType(tuple(shape), element)
        if tag == TAG_TENSOR_VIEW:
            flags = reader.varint("tensor_view flags") if version >= POINTER_ATTR else 0
            element = self._element(reader, "tensor_view element type")
            shape = self._dims(reader, "tensor_view shape")
            strides = self._dims(reader, "tensor_view strides")
            if len(shape) != len(strides):
                raise self.error(f"tensor_view has {len(shape)} dims but {len(strides)} strides",
                                 tag_offset)
            ptr_attr = self._enum(reader, PtrAttr, "ptr_attr") if flags & 1 else PtrAttr.NONE
            self._check_flags(flags, 1, "tensor_view", tag_offset)
            return T.TensorViewType(element, shape, strides, ptr_attr)
        if tag == TAG_PARTITION_VIEW:
            unified = version >= UNIFIED_OPTIONAL_BITFIELD
            flags = reader.varint("partition_view flags") if unified else 0
            tile_shape = tuple(reader.int_array(4, "partition_view tile shape"))
            tensor_view = self._tensor_view(reader)
            dim_map = tuple(reader.int_array(4, "partition_view dim_map"))
            if not unified:
                presence_offset = reader.offset
                flags = reader.u8("partition_view padding presence byte")
                if flags > 1:  # before 13.3 a bool byte, which NVIDIA takes as true when non-zero
                    self.lenient(f"partition_view has unknown optional-parameter flags 0x{flags:x}",
                                 presence_offset, "the padding presence byte is read as true, as "
                                 "tileirdisasm takes any non-zero byte")
                    flags = 1
            padding = self._enum(reader, PaddingValue, "padding_value") if flags & 1 else None
            self._check_flags(flags, 1, "partition_view", tag_offset)
            return T.PartitionViewType(tile_shape, tensor_view, dim_map, padding)
        if tag == TAG_GATHER_SCATTER_VIEW:
            flags = reader.varint("gather_scatter_view flags")
            tile_shape = tuple(reader.int_array(4, "gather_scatter_view tile shape"))
            tensor_view = self._tensor_view(reader)
            sparse_dim = reader.varint("sparse_dim")
            padding = self._enum(reader, PaddingValue, "padding_value") if flags & 1 else None
            self._check_flags(flags, 1, "gather_scatter_view", tag_offset)
            return T.GatherScatterViewType(tile_shape, tensor_view, sparse_dim, padding)
        if tag == TAG_STRIDED_VIEW:
            flags = reader.varint("strided_view flags")
            tile_shape = tuple(reader.int_array(4, "strided_view tile shape"))
            strides = tuple(reader.int_array(4, "strided_view traversal strides"))
            tensor_view = self._tensor_view(reader)
            dim_map = tuple(reader.int_array(4, "strided_view dim_map"))
            padding = self._enum(reader, PaddingValue, "padding_value") if flags & 1 else None
            self._check_flags(flags, 1, "strided_view", tag_offset)
            return T.StridedViewType(tile_shape, strides, tensor_view, dim_map, padding)
        # TAG_FUNCTION
        inputs = [self._type_ref(reader, "function input type")
                  for _ in range(reader.count("function input count"))]
        results = [self._type_ref(reader, "function result type")
                   for _ in range(reader.count("function result count"))]
        result = T.FunctionType(tuple(inputs), tuple(results))
        # Entries refer to earlier entries, so n of them can spell out 2^n characters of text.
        size = T.text_size(result)
        if size > self.limits.max_type_text:
            raise self.error(f"limit exceeded: function type text would be {size} characters, "
                             f"more than max_type_text={self.limits.max_type_text}", tag_offset)
        return result

    def _tensor_view(self, reader: Reader) -> T.TensorViewType:
        offset = reader.offset
        result = self._type_ref(reader, "tensor_view type")
        if not isinstance(result, T.TensorViewType):
            raise self.error(f"expected a tensor_view type, got {brief(result)}", offset)
        return result

    def _check_flags(self, flags: int, known: int, what: str, offset: int) -> None:
        if flags & ~known:
            raise self.error(f"{what} has unknown optional-parameter flags 0x{flags:x}", offset)

    # ---- constants -------------------------------------------------------------------------------

    def constant(self, index: int, offset: int) -> bytes:
        cached = self._constants.get(index)
        if cached is not None:
            return cached
        if index >= len(self.constant_blobs):
            raise self.error(f"constant index {index} out of range (pool has "
                             f"{len(self.constant_blobs)})", offset)
        blob_offset, blob = self.constant_blobs[index]
        reader = Reader(blob, base=blob_offset, file=self.file)
        length = reader.count("constant byte length")
        value = reader.raw(length, "constant bytes")
        if not reader.at_end():
            self.lenient(f"{reader.remaining} unexpected bytes after constant {index}",
                         reader.offset, "they are not read (tileirdisasm ignores them)")
        self._constants[index] = value
        return value

    def dense(self, tile_type: T.Type, index: int, offset: int) -> A.DenseElementsAttr:
        key = (index, tile_type)
        found = self._dense.get(key)
        if found is not None:
            return found
        if not isinstance(tile_type, T.TileType):
            raise self.error(f"dense constant needs a tile type, got {brief(tile_type)}", offset)
        data = self.constant(index, offset)
        if not dense_size_ok(tile_type, data):
            raise self.error(f"constant {index} has {len(data)} bytes, which is neither a splat "
                             f"nor a full buffer for {tile_type}", offset)
        if not dense_is_splat(tile_type, data) and len(data) < dense_expected_sizes(tile_type)[1]:
            # Only an i1 tile gets here: MLIR's one-byte i1 splat is 0x00 or 0xFF, nothing else.
            self.lenient(f"constant {index} is a one-byte i1 splat of 0x{data[0]:02x}, expected "
                         f"0x00 or 0xFF", offset, "read as a splat of true (0xFF), as tileirdisasm "
                         "takes any non-zero byte")
            return A.DenseElementsAttr(tile_type, b"\xff")  # not shared: each use is warned of
        found = self._dense[key] = A.DenseElementsAttr(tile_type, data)
        return found

    # ---- attributes ------------------------------------------------------------------------------

    def tagged_attr(self, reader: Reader, depth: int = 0) -> A.Attribute:
        if depth > self.limits.max_nesting:
            raise reader.error(f"limit exceeded: attributes nested deeper than "
                               f"max_nesting={self.limits.max_nesting}")
        offset = reader.offset
        tag = reader.varint("attribute tag")
        if tag == ATTR_INTEGER:
            type_offset = reader.offset
            element = self._element(reader, "integer attribute type")
            if not element.is_integer:  # NVIDIA: "failed to read valid IntegerType for IntegerAttr"
                raise self.error(f"integer attribute type must be an integer type, got {element}",
                                 type_offset)
            return A.IntegerAttr(element, self._int_value(reader, element.bits, "integer attribute"))
        if tag == ATTR_FLOAT:
            type_offset = reader.offset
            element = self._element(reader, "float attribute type")
            if not element.is_float:  # NVIDIA: "failed to read valid FloatType for FloatAttr"
                raise self.error(f"float attribute type must be a float type, got {element}",
                                 type_offset)
            if element.bits <= 8:
                bits = reader.u8("float attribute byte")
            else:
                bits = reader.zigzag("float attribute bits") & ((1 << 64) - 1)
                if bits >> element.bits:
                    raise self.error(f"float attribute bits 0x{bits:x} do not fit {element}", offset)
            return A.FloatAttr(element, bits)
        if tag == ATTR_BOOL:
            return A.BoolAttr(self._bool(reader, "bool attribute"))
        if tag == ATTR_TYPE:
            return A.TypeAttr(self._type_ref(reader, "type attribute"))
        if tag == ATTR_STRING:
            return A.StringAttr(self.string(reader.varint("string index"), offset))
        if tag == ATTR_ARRAY:
            count = reader.count("array attribute length")
            return A.ArrayAttr(tuple(self.tagged_attr(reader, depth + 1) for _ in range(count)))
        if tag == ATTR_DENSE:
            type_offset = reader.offset
            tile_type = self._type_ref(reader, "dense attribute type")
            return self.dense(tile_type, reader.varint("constant index"), type_offset)
        if tag == ATTR_DIV_BY:
            divisor = reader.varint("div_by divisor")
            flags = reader.varint("div_by flags")  # a varint, as NVIDIA reads it
            if flags & ~3:
                raise self.error(f"div_by has unknown flags 0x{flags:x}", offset)
            every = reader.zigzag("div_by every") if flags & 1 else None
            along = reader.zigzag("div_by along") if flags & 2 else None
            return A.DivByAttr(divisor, every, along)
        if tag == ATTR_SAME_ELEMENTS:
            return A.SameElementsAttr(tuple(reader.int_array(8, "same_elements values")))
        if tag == ATTR_DICTIONARY:
            return A.DictionaryAttr(self._dictionary_body(reader, depth))
        if tag == ATTR_HINTS:
            return self._hints_body(reader, depth)
        if tag == ATTR_BOUNDED:
            flags = reader.varint("bounded flags")  # a varint, as NVIDIA reads it
            if flags & ~3:
                raise self.error(f"bounded has unknown flags 0x{flags:x}", offset)
            lower = reader.zigzag("bounded lower bound") if flags & 1 else None
            upper = reader.zigzag("bounded upper bound") if flags & 2 else None
            return A.BoundedAttr(lower, upper)
        raise self.error(f"unknown attribute tag {tag}", offset)

    def _int_value(self, reader: Reader, width: int, what: str) -> int:
        offset = reader.offset
        raw = reader.varint(what)
        if raw >> width:
            raise self.error(f"{what} value {raw} does not fit in {width} bits", offset)
        return raw - (1 << width) if width > 1 and raw >> (width - 1) else raw

    def _bool(self, reader: Reader, what: str) -> bool:
        offset = reader.offset
        value = reader.u8(what)
        if value > 1:
            self.lenient(f"{what} byte is {value}, expected 0 or 1", offset,
                         "read as true, as tileirdisasm takes any non-zero byte")
        return bool(value)

    def _dictionary_body(self, reader: Reader, depth: int):
        count = reader.count("dictionary length", 2)
        entries = []
        seen = set()
        for index in range(count):
            offset = reader.offset
            key = self.string(reader.varint("dictionary key"), offset)
            if not key:
                raise self.error(f"invalid empty attribute name for DictionaryAttr element {index}", offset)
            if key in seen:
                raise self.error(f"duplicate dictionary key {key!r}", offset)
            seen.add(key)
            entries.append((key, self.tagged_attr(reader, depth + 1)))
        return tuple(entries)

    def _hints_body(self, reader: Reader, depth: int = 0) -> A.OptimizationHintsAttr:
        entries = []
        for key, value in self._dictionary_body(reader, depth):
            if not isinstance(value, A.DictionaryAttr):
                raise reader.error(f"optimization hints for {key!r} must be a dictionary")
            entries.append((key, value))
        return A.OptimizationHintsAttr(tuple(entries))

    # ---- debug info ------------------------------------------------------------------------------

    def _read_debug(self, base: int, payload: bytes) -> None:
        # The section start is 8-aligned, so absolute alignment equals payload-relative alignment.
        reader = Reader(payload, base=base, file=self.file)
        padding = lambda message, offset: self.lenient(  # noqa: E731
            message, offset, "padding is not read (tileirdisasm does not look at it)")
        num_functions = reader.count("debug function count", 4)
        reader.align(4, "debug function offsets", padding)
        firsts = struct.unpack(f"<{num_functions}I", reader.raw(4 * num_functions,
                                                                 "debug function offsets"))
        num_indices = reader.count("debug index count", 8)
        reader.align(8, "debug indices", padding)
        # An array, not a list: a large module has an index per op (8 bytes each instead of
        # 40 for a list slot and its int)
        indices = _unsigned_array(reader.raw(8 * num_indices, "debug indices"), "Q", 8)
        num_attrs = reader.count("debug attribute count", 4)
        reader.align(4, "debug attribute offsets", padding)
        if num_attrs == 0 and reader.at_end():
            # NVIDIA's reader takes a pointer to the offset table even when it is empty, and that
            # fails at the section's end ("failed to read debug info offset pointer"); match it.
            raise reader.error("debug section ends at its empty attribute table: at least one byte "
                               "must follow the attribute count and its padding")
        offsets = _unsigned_array(reader.raw(4 * num_attrs, "debug attribute offsets"), "I", 4)
        data_start = reader.pos
        self.debug_blobs = BlobTable(offsets, payload[data_start:], what="debug attribute table",
                                     base=base + data_start, file=self.file,
                                     slicing=EXACT if self.strict else CHECKED_ON_USE,
                                     on_disorder=self._disorder(CHECKED_ON_USE),
                                     max_overlap=self.limits.max_overlap_bytes)
        # tileirdisasm reads a function's locations from its first index on, as many as it needs,
        # without looking where the next function's range starts; kept for that reading.
        self._debug_indices, self._debug_firsts = indices, firsts
        for position, first in enumerate(firsts):
            stop = firsts[position + 1] if position + 1 < num_functions else num_indices
            if not first <= stop <= num_indices:
                self.lenient(f"debug function {position} index range {first}..{stop} is outside "
                             f"0..{num_indices}", base, "its locations are read from index "
                             f"{first} on, as tileirdisasm reads them")
            self.debug_function_indices.append(indices[first:stop])

    def debug_attr(self, index: int, offset: int):
        """Debug attribute by 1-based index; 0 is `unknown` (None)."""
        if index == 0:
            return None
        cached = self._debug_attrs.get(index)
        if cached is not None:
            return cached
        if index > len(self.debug_blobs):
            raise self.error(f"debug attribute index {index} out of range (table has "
                             f"{len(self.debug_blobs)})", offset)
        result = self._decode_entry(self._debug_in_progress, index, offset, "debug attribute",
                                    "nested references", self.debug_blobs[index - 1],
                                    self._decode_debug)
        self._debug_attrs[index] = result
        return result

    def _debug_ref(self, reader: Reader, kind, what: str):
        offset = reader.offset
        value = self.debug_attr(reader.varint(what), offset)
        if not isinstance(value, kind):
            names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
            raise self.error(f"{what} must be {names}, got {type(value).__name__}", offset)
        return value

    def _call_site_part(self, reader: Reader, what: str):
        """A call site's callee or caller: a location, or unknown (None) for debug index 0 or an
        `unknown` entry, as everywhere else a location is read (tileirdisasm prints
        `callsite(unknown at ...)`)."""
        offset = reader.offset
        value = self.debug_attr(reader.varint(what), offset)
        if value is None or isinstance(value, L.UnknownDebugAttr):
            return None
        if not isinstance(value, (L.DILoc, L.CallSiteLoc)):
            raise self.error(f"{what} must be DILoc/CallSiteLoc, got {type(value).__name__}", offset)
        return value

    def _decode_debug(self, reader: Reader):
        offset = reader.offset
        tag = reader.varint("debug attribute tag")
        if tag > 0xFF:  # NVIDIA keeps the tag's low byte (it stores it in a uint8_t)
            self.lenient(f"unknown debug attribute tag {tag}", offset,
                         f"read as tag {tag & 0xFF} (its low byte), as tileirdisasm does")
            tag &= 0xFF
        string = lambda what: self.string(reader.varint(what), reader.offset)  # noqa: E731
        if tag == DEBUG_UNKNOWN:
            return L.UnknownDebugAttr()
        if tag == DEBUG_COMPILE_UNIT:
            return L.DICompileUnit(self._debug_ref(reader, L.DIFile, "compile unit file"))
        if tag == DEBUG_FILE:
            return L.DIFile(string("file name"), string("file directory"))
        if tag == DEBUG_LEXICAL_BLOCK:
            scope = self._debug_ref(reader, (L.DISubprogram, L.DILexicalBlock), "lexical block scope")
            file = self._debug_ref(reader, L.DIFile, "lexical block file")
            return L.DILexicalBlock(scope, file, reader.varint("line"), reader.varint("column"))
        if tag == DEBUG_LOC:
            scope = self._debug_ref(reader, _LOC_SCOPES, "location scope")
            return L.DILoc(scope, string("location file name"), reader.varint("line"),
                           reader.varint("column"))
        if tag == DEBUG_SUBPROGRAM:
            file = self._debug_ref(reader, L.DIFile, "subprogram file")
            line = reader.varint("line")
            name = string("subprogram name")
            linkage = string("subprogram linkage name")
            unit = self._debug_ref(reader, L.DICompileUnit, "subprogram compile unit")
            scope_line = reader.varint("scope line")
            flags_offset = reader.offset
            flags = reader.varint("subprogram flags") if self.version >= DISUBPROGRAM_FLAGS else 0
            if flags & ~DISUBPROGRAM_KNOWN_FLAGS:  # NVIDIA's reader knows only bit 0 as well
                raise self.error(f"subprogram has unknown flag bits 0x{flags:x}", flags_offset)
            return L.DISubprogram(file, line, name, linkage, unit, scope_line, flags)
        if tag == DEBUG_CALL_SITE:
            callee = self._call_site_part(reader, "call site callee")
            caller = self._call_site_part(reader, "call site caller")
            return L.CallSiteLoc(callee, caller)
        self.lenient(f"unknown debug attribute tag {tag}", offset,
                     "read as loc(unknown), as tileirdisasm does; the rest of the entry is not read")
        reader.pos = reader.end
        return L.UnknownDebugAttr()

    def location(self, index: int, offset: int):
        cached = self._locations.get(index, _MISSING)
        if cached is not _MISSING:
            return cached
        if plain_locations is not None:  # the C helper, a subprogram scoping it included
            made = self._plain_locations((index,), 0, 1)
            if made:
                return made[0]
        else:
            value = self._plain_loc(index)
            if value is not None:
                self._debug_attrs[index] = self._locations[index] = value
                return value
        return self._careful_location(index, offset)

    def _careful_location(self, index: int, offset: int):
        """location() of an entry no fast path makes: read by debug_attr, checked, kept."""
        value = self.debug_attr(index, offset)
        if value is None or isinstance(value, L.UnknownDebugAttr):
            return None
        if not isinstance(value, (L.DILoc, L.CallSiteLoc)):
            raise self.error(f"debug attribute {index} is a {type(value).__name__}, not a location",
                             offset)
        self._locations[index] = value
        return value

    def op_locations(self, indices, start: int, stop: int, offset: int) -> list:
        """[self.location(index, offset) for index in indices[start:stop]], the plain entries
        (see _plain_loc) made in C where tilebc._speedups is built."""
        location = self.location
        if plain_locations is None:
            return [location(index, offset) for index in indices[start:stop]]
        found = []
        while start < stop:
            made = self._plain_locations(indices, start, stop)
            found += made
            start += len(made)
            if start < stop:  # an entry the C helper leaves to the careful path: go on after it
                index = indices[start]
                known = self._locations
                found.append(known[index] if index in known
                             else self._careful_location(index, offset))
                start += 1
        return found

    def _plain_locations(self, indices, start: int, stop: int) -> list:
        """The locations of indices[start:stop] the C helper makes, up to the first it leaves to
        the careful path (none where the table is not exactly sliced, or an entry is being
        decoded)."""
        table = self.debug_blobs
        if not isinstance(table, container.BlobTable) or table.slicing is not EXACT \
                or self._debug_in_progress:
            return []
        # call sites and the subprograms scoping locations too, unless max_nesting forbids
        # decoding an entry from another
        nested = ()
        if self.limits.max_nesting > 1:
            nested = (L.CallSiteLoc, L.UnknownDebugAttr, DEBUG_CALL_SITE)
            if speedups.PLAIN_SUBPROGRAMS:  # an extension built before it: not made there
                nested += ((L.DISubprogram, L.DIFile, L.DICompileUnit, DEBUG_SUBPROGRAM,
                            self.version >= DISUBPROGRAM_FLAGS, DISUBPROGRAM_KNOWN_FLAGS),)
        return plain_locations(table.data, table.offsets, indices, start, stop, self._locations,
                               self._debug_attrs, self._string_cache, L.DILoc, _LOC_SCOPES,
                               DEBUG_LOC, *nested)

    def _plain_loc(self, index: int):
        """The DILoc of debug entry `index` read inline when it is the usual case: an exactly
        sliced entry of five short varints whose scope and file name are already decoded. None
        otherwise (the careful path then reads it). Most op locations are such entries, and the
        careful path's reader object and checks per entry cost a third of verifying."""
        table = self.debug_blobs
        if not isinstance(table, container.BlobTable) or table.slicing is not EXACT \
                or self._debug_in_progress:
            return None
        offsets = table.offsets
        if not 0 < index <= len(offsets):
            return None
        data = table.data
        pos = offsets[index - 1]
        stop = offsets[index] if index < len(offsets) else len(data)
        if stop - pos < 5 or data[pos] != DEBUG_LOC:
            return None
        pos += 1
        fields = []
        try:
            for _ in range(4):
                value = data[pos]
                pos += 1
                if value >= 0x80:
                    value, pos = varint_tail(data, pos, value)
                fields.append(value)
        except (Bail, IndexError):  # malformed: the careful path says what is wrong
            return None
        if pos != stop:  # a field ran into the next entry, or bytes are left over
            return None
        scope_index, name_index, line, column = fields
        scope = self._debug_attrs.get(scope_index)
        name = self._string_cache.get(name_index)
        if name is None or scope.__class__ not in _LOC_SCOPES:
            return None
        return L.DILoc(scope, name, line, column)

    # ---- globals ---------------------------------------------------------------------------------

    def _read_globals(self, base: int, payload: bytes) -> list[Global]:
        reader = Reader(payload, base=base, file=self.file)
        result = []
        for _ in range(reader.count("global count", 4)):
            offset = reader.offset
            name = self.string(reader.varint("global name"), offset)
            type_offset = reader.offset
            value_type = self._type_ref(reader, "global type")
            value = self.dense(value_type, reader.varint("global value"), type_offset)
            alignment = reader.varint("global alignment")
            visibility, constant = SymbolVisibility.PUBLIC, False
            if self.version >= GLOBAL_VISIBILITY_AND_CONSTANT:
                visibility = self._enum(reader, SymbolVisibility, "global visibility")
                constant = self._bool(reader, "global constant flag")
            result.append(Global(name, value, alignment, visibility, constant))
        if not reader.at_end():
            self.lenient(f"{reader.remaining} unexpected bytes after the globals", reader.offset,
                         "they are not read (tileirdisasm ignores them)")
        return result

    # ---- functions and ops -----------------------------------------------------------------------

    def _read_functions(self, base: int, payload: bytes) -> list[Function]:
        reader = Reader(payload, base=base, file=self.file)
        functions = []
        for _ in range(reader.count("function count", 5)):
            functions.append(self._read_function(reader))
        self.func_tail = payload[reader.pos:]
        # Writers may pad the end of the section; anything else there is ignored by NVIDIA's reader.
        return functions

    def _read_function(self, reader: Reader) -> Function:
        offset = reader.offset
        name = self.string(reader.varint("function name"), offset)
        sig_offset = reader.offset
        signature = self._type_ref(reader, "function signature")
        if not isinstance(signature, T.FunctionType):
            raise self.error(f"function signature must be a function type, got {brief(signature)}",
                             sig_offset)
        flags_offset = reader.offset
        flags = reader.u8("function flags")
        if not flags & FUNCTION_FLAG_KERNEL:
            raise self.error(f"function {name!r} is not marked as a kernel entry (flags "
                             f"0x{flags:02x})", flags_offset)
        if flags & ~(FUNCTION_FLAG_KERNEL | FUNCTION_FLAG_HINTS):
            message = f"function {name!r} has unknown flags 0x{flags:02x}"
            # NVIDIA refuses them from 13.4 ("unrecognized flag bits"), and reads bit 0 in every
            # version as private visibility, which an entry cannot have.
            if self.version >= UNKNOWN_FUNCTION_FLAGS_REFUSED or flags & FUNCTION_FLAG_PRIVATE:
                raise self.error(message, flags_offset)
            self.lenient(message, flags_offset, "the unknown bits are ignored, as tileirdisasm "
                                                "ignores them before 13.4")
            flags &= FUNCTION_FLAG_KERNEL | FUNCTION_FLAG_HINTS
        if self.version >= ENTRY_ARG_ATTRS and flags & FUNCTION_FLAG_HINTS:
            # From 13.5 hints always follow and bit 2 marks an extern implementation, which NVIDIA's
            # reader refuses on a kernel ("cannot be both kernel and extern impl").
            raise self.error(f"function {name!r} has flags 0x{flags:02x}: from 13.5 bit 0x04 marks "
                             f"an extern implementation, which a kernel entry cannot be",
                             flags_offset)
        loc_offset = reader.offset
        loc_index = reader.varint("function location")
        self.function_slots.append(loc_index)
        hints = None
        arg_attrs = None
        if self.version >= ENTRY_ARG_ATTRS or flags & FUNCTION_FLAG_HINTS:
            hints_offset = reader.offset
            hints = self._header_attr(reader)
            if not isinstance(hints, A.OptimizationHintsAttr):
                raise self.error("function hints must be an optimization_hints attribute",
                                 hints_offset)
        if self.version >= ENTRY_ARG_ATTRS:
            attrs_offset = reader.offset
            arg_attrs = self._header_attr(reader)
            if not isinstance(arg_attrs, A.ArrayAttr):
                raise self.error("function argument attributes must be an array", attrs_offset)
        # checked after the hints, as NVIDIA's reader reports a bad hint dictionary first
        if not name:
            raise self.error("function name is empty", offset)
        body_length = reader.varint("function body length")
        body_reader = reader.sub(body_length, "function body")

        # Entries may share one signature: their parameters count against max_values together.
        self.num_params += len(signature.inputs)
        if self.num_params > self.limits.max_values:
            raise self.error(f"limit exceeded: entries up to {name!r} take {self.num_params} "
                             f"parameters, more than max_values={self.limits.max_values}",
                             sig_offset)
        block = Block()
        block.args = args = _arguments(signature.inputs, block)
        indices = None
        if loc_index and loc_index <= len(self.debug_function_indices):
            indices = self.debug_function_indices[loc_index - 1]
        preorder: list[Op] = []
        pending = None if indices is None else PendingLocations(self, preorder, indices, loc_offset)
        block.ops = self._read_body(body_reader, args, preorder, pending)
        function = DecodedFunction(name, signature, block, hints, arg_attrs, offset=offset)
        self.num_ops += len(preorder)
        if self.num_ops > self.limits.max_ops:
            raise self.error(f"limit exceeded: function {name!r} brings the module to {self.num_ops} "
                             f"ops, more than max_ops={self.limits.max_ops}", offset)
        if loc_index:
            self._attach_locations(function, loc_index, loc_offset, preorder, pending)
        return function

    def _header_attr(self, reader: Reader) -> A.Attribute:
        """tagged_attr for an entry's hints and parameter attributes, decoded once per distinct
        encoding: the entries of a large module repeat theirs. Bytes that read with a warning
        are read each time (a warning names its own offset)."""
        data, pos = reader.data, reader.pos
        by_length = self._header_attrs.get(data[pos:pos + 2])  # the tag and what follows it
        if by_length is not None:
            for length, known in by_length.items():
                if pos + length <= reader.end:
                    value = known.get(data[pos:pos + length])
                    if value is not None:
                        reader.pos = pos + length
                        return value
        warned = len(self.log.warnings)
        value = self.tagged_attr(reader)
        length = reader.pos - pos
        if len(self.log.warnings) == warned and length <= _HEADER_BLOB_LIMIT \
                and self._header_attr_count < _HEADER_ATTRS_KEPT:
            by_length = self._header_attrs.setdefault(data[pos:pos + 2], {})
            # a lookup slices once per length kept: a few lengths per first two bytes, so
            # entries that all differ cost a few slices each, not one per entry seen
            if length in by_length or len(by_length) < _HEADER_LENGTHS_KEPT:
                by_length.setdefault(length, {})[data[pos:reader.pos]] = value
                self._header_attr_count += 1
        return value

    def _read_body(self, reader: Reader, args: list[Value], preorder: list[Op],
                   pending: PendingLocations | None) -> list[Op]:
        """The ops of a function body, by the fast decoder if it can, else by the careful one."""
        if self.use_fast_path:
            values = list(args)
            start = reader.pos
            try:
                return self._fast_ops(reader, start, reader.end, values, preorder, pending)
            except Exception:  # anything at all: the careful reader decides (and explains)
                self.fast_fallbacks += 1
                reader.pos = start
                self._types_in_progress.clear()
                self._debug_in_progress.clear()
                del preorder[:]
        values = list(args)
        ops = []
        while not reader.at_end():
            ops.append(self._read_op(reader, values, 0))
        self._check_values(values, reader.offset)
        for op in ops:
            preorder.extend(op.walk())
        for op in preorder:
            defer_location(op, pending)
        return ops

    def _fast_ops(self, reader: Reader, pos: int, end: int, values: list[Value],
                  preorder: list[Op], pending) -> list[Op]:
        ops, pos = (decode_ops or _decode_ops)(self, reader, reader.data, pos, end, values,
                                               preorder, pending, 0, reader.base, self._fast, -1)
        if pos > end or len(values) > self.limits.max_values:
            raise Bail()
        return ops

    def _fast_decoder(self, opcode: int):
        """The compiled decoder of `opcode` for this file, after the careful reader's opcode checks."""
        spec = OPS_BY_OPCODE.get(opcode)
        if spec is None or spec.structural:
            raise Bail()
        if spec.preview:
            if not self.preview:
                raise Bail()
        elif opcode > self.max_opcode or spec.since > self.version:
            raise Bail()
        decode = compiled_decoder(opcode, self.version)
        if decode is None:
            uses = self._fast_uses.get(opcode, 0) + 1
            if uses <= self.fast_compile_after:
                self._fast_uses[opcode] = uses
                return ModuleReader._careful_op  # not cached: counted on each use
            decode = fast_decoder(self._plan(spec), self.version)
        self._fast[opcode] = decode
        _FAST_READY.setdefault((self.version, self.preview), {})[opcode] = decode
        return decode

    def _careful_op(self, reader: Reader, data, pos: int, end: int, values: list[Value],
                    preorder: list[Op], pending, depth: int, offset: int):
        """A compiled decoder's stand-in: the careful reader's op (and its regions), read in the
        fast loop and recorded as the fast decoder records its ops."""
        reader.pos = offset - reader.base  # at the opcode
        op = self._read_op(reader, values, depth)
        for each in op.walk():
            preorder.append(each)
            defer_location(each, pending)
        return op, reader.pos

    def _fast_region(self, reader: Reader, data, pos: int, end: int, values: list[Value],
                     preorder: list[Op], pending, depth: int):
        """One region for the fast decoder: (Region, position after it)."""
        if depth > self.limits.max_nesting:
            raise Bail()
        decoders, base, types = self._fast, reader.base, self._types
        region = Region()
        num_blocks = data[pos]
        pos += 1
        if num_blocks >= 0x80:
            num_blocks, pos = varint_tail(data, pos, num_blocks)
        if num_blocks > end - pos:
            raise Bail()
        for _ in range(num_blocks):
            mark = len(values)
            num_args = data[pos]
            pos += 1
            if num_args >= 0x80:
                num_args, pos = varint_tail(data, pos, num_args)
            if num_args > end - pos:
                raise Bail()
            arg_types = []
            for _ in range(num_args):
                key = data[pos]
                pos += 1
                if key >= 0x80:
                    key, pos = varint_tail(data, pos, key)
                arg_type = types.get(key)
                if arg_type is None:
                    arg_type = self.type(key, 0)
                arg_types.append(arg_type)
            block = Block()
            block.args = args = _arguments(arg_types, block)
            values.extend(args)
            num_ops = data[pos]
            pos += 1
            if num_ops >= 0x80:
                num_ops, pos = varint_tail(data, pos, num_ops)
            if num_ops == 0 or num_ops > end - pos:
                raise Bail()
            block.ops, pos = (decode_ops or _decode_ops)(self, reader, data, pos, end, values,
                                                         preorder, pending, depth, base,
                                                         decoders, num_ops)
            ops = block.ops
            if not ops[-1].spec.terminator or len(values) > self.limits.max_values:
                raise Bail()
            del values[mark:]
            region.blocks.append(block)
        return region, pos

    def _check_values(self, values: list[Value], offset: int) -> None:
        if len(values) > self.limits.max_values:
            raise self.error(f"limit exceeded: more than max_values={self.limits.max_values} values "
                             "in scope", offset)

    def _attach_locations(self, function: Function, loc_index: int, offset: int,
                          preorder: list[Op], pending: PendingLocations | None) -> None:
        if loc_index > len(self.debug_function_indices):
            raise self.error(f"failed to read function location: debug function index {loc_index} "
                             f"out of range ({len(self.debug_function_indices)})", offset)
        indices = pending.indices
        needed = len(preorder) + 1
        if len(indices) < needed:
            message = (f"debug info for function {function.name!r} has {len(indices)} locations, "
                       f"expected {needed}")
            first = self._debug_firsts[loc_index - 1]
            extended = self._debug_indices[first:first + needed]
            if self.strict or len(extended) < needed:  # past the index table: NVIDIA fails too
                raise self.error(message, offset)
            self.lenient(message, offset, f"the locations are read on past the function's range "
                                          f"(indices {first}..{first + needed}), as tileirdisasm "
                                          f"reads them")
            pending.indices = indices = extended
        # Lazily only what cannot fail for a reason visible here: indices in range.
        if not self.lazy_debug or max(indices) > len(self.debug_blobs):
            function.loc = self.location(indices[0], offset)
            pending.materialise()
        else:
            function._pending_loc = (self, indices[0], offset)

    def _value(self, reader: Reader, values: list[Value]) -> Value:
        data, pos = reader.data, reader.pos
        if pos < reader.end and data[pos] < 0x80:  # one-byte index: the common case
            index = data[pos]
            reader.pos = pos + 1
        else:
            index = reader.varint("value index")
        if index >= len(values):
            raise self.error(f"value index {index} out of range ({len(values)} values defined)",
                             reader.offset - 1)
        return values[index]

    def _plan(self, spec) -> OpPlan:
        """Everything about decoding `spec` that depends only on the file's version. `_plans` holds
        the opcodes this file has passed the opcode checks for (so it is per reader); the plans
        themselves are shared by the process."""
        plan = self._plans.get(spec.opcode)
        if plan is None:
            plan = self._plans[spec.opcode] = plan_for(spec, self.version)
        return plan

    def _read_op(self, reader: Reader, values: list[Value], depth: int) -> Op:
        if depth > self.limits.max_nesting:
            raise reader.error(f"limit exceeded: regions nested deeper than "
                               f"max_nesting={self.limits.max_nesting}")
        data, pos = reader.data, reader.pos
        offset = reader.base + pos
        if pos < reader.end and data[pos] < 0x80:
            opcode = data[pos]
            reader.pos = pos + 1
        else:
            opcode = reader.varint("opcode")
        plan = self._plans.get(opcode)
        if plan is None:
            spec = OPS_BY_OPCODE.get(opcode)
            if spec is None or spec.structural:
                raise self.error(f"unknown or unimplemented opcode {opcode} (0x{opcode:x})", offset)
            if spec.preview:
                if not self.preview:
                    raise self.error(f"preview opcode 0x{opcode:x} ({spec.mnemonic}) in a file "
                                     "without the public-preview tag", offset)
            elif opcode > self.max_opcode or spec.since > self.version:
                raise self.error(f"unsupported opcode {opcode} ({spec.mnemonic}, needs {spec.since}) "
                                 f"for bytecode version {self.version}", offset)
            plan = self._plan(spec)
        spec = plan.spec
        type_ref = self._type_ref

        # Result types.
        if plan.counted_results:
            count_offset = reader.offset
            count = reader.count("result count")
            if not plan.variadic_results and count != plan.num_serialized:
                raise self.error(f"{spec.mnemonic} has {count} results, expected "
                                 f"{plan.num_serialized}", count_offset)
        else:
            count = plan.num_serialized
        result_types = [type_ref(reader, "result type") for _ in range(count)]

        # Flags.
        flags = 0
        if plan.has_flags:
            flags_offset = reader.offset
            flags = reader.varint("op flags")
            if flags & ~plan.known_flags:
                self.lenient(f"{spec.mnemonic} has unknown flag bits "
                             f"0x{flags & ~plan.known_flags:x}", flags_offset,
                             "the unknown bits are ignored, as tileirdisasm ignores them")
                flags &= plan.known_flags

        # Attributes.
        attrs = {}
        for name, action, bit, attr in plan.attr_steps:
            if action is READ:
                attrs[name] = self._op_attr(reader, attr, result_types)
            elif action is UNIT:
                attrs[name] = bool(flags >> bit & 1)
            elif action is OPTIONAL:
                attrs[name] = self._op_attr(reader, attr, result_types) if flags >> bit & 1 else None
            elif action is ABSENT:
                attrs[name] = None

        # Operands.
        operands = {}
        value = self._value
        if plan.operand_mode is SEGMENTED:
            for name, arity, bit in plan.operand_steps:
                if arity is Arity.ONE:
                    operands[name] = value(reader, values)
                elif arity is Arity.OPTIONAL:
                    operands[name] = value(reader, values) if bit >= 0 and flags >> bit & 1 else None
                else:
                    count = reader.count(f"{name} count")
                    operands[name] = tuple(value(reader, values) for _ in range(count))
        elif plan.operand_mode is FLAT:
            count_offset = reader.offset
            total = reader.count("operand count")
            fixed = plan.num_fixed_operands
            if total < fixed:
                raise self.error(f"{spec.mnemonic} has {total} operands, expected at least {fixed}",
                                 count_offset)
            for name, arity, _ in plan.operand_steps:
                if arity is Arity.ONE:
                    operands[name] = value(reader, values)
                else:
                    operands[name] = tuple(value(reader, values) for _ in range(total - fixed))
        else:
            for name, _, _ in plan.operand_steps:
                operands[name] = value(reader, values)
        for attr in plan.pending_defaults:
            attrs[attr.name] = attr.default_for(operands)

        # Regions.
        regions = []
        if spec.regions:
            count_offset = reader.offset
            count = reader.varint("region count")
            if count != spec.regions:
                raise self.error(f"{spec.mnemonic} has {count} regions, expected {spec.regions}",
                                 count_offset)
            for _ in range(count):
                regions.append(self._read_region(reader, values, depth + 1))

        if plan.synthesized:
            op = DecodedOp(spec, operands, attrs, result_types + plan.synthesized, regions,
                           offset=offset)
            values.extend(op.results[:len(result_types)])
        else:
            op = DecodedOp(spec, operands, attrs, result_types, regions, offset=offset)
            values.extend(op.results)
        return op

    def _read_region(self, reader: Reader, values: list[Value], depth: int) -> Region:
        region = Region()
        for _ in range(reader.count("block count")):
            mark = len(values)
            arg_types = [self._type_ref(reader, "block argument type")
                         for _ in range(reader.count("block argument count"))]
            block = Block()
            block.args = [Value(t, block, i) for i, t in enumerate(arg_types)]
            values.extend(block.args)
            count_offset = reader.offset
            num_ops = reader.count("block op count")
            if num_ops == 0:
                raise self.error("block has no operations (it needs a terminator)", count_offset)
            block.ops = [self._read_op(reader, values, depth) for _ in range(num_ops)]
            if not block.ops[-1].spec.terminator:
                raise self.error(f"block ends with {block.ops[-1].name}, not a terminator",
                                 block.ops[-1].offset)
            self._check_values(values, reader.offset)
            del values[mark:]
            region.blocks.append(block)
        return region

    def _op_attr(self, reader: Reader, attr, result_types):
        kind = attr.kind
        offset = reader.offset
        if kind is AttrKind.ENUM:
            return self._enum(reader, attr.enum, attr.name)
        if kind is AttrKind.INT:
            return self._int_value(reader, attr.width, attr.name)
        if kind is AttrKind.BOOL:
            return self._bool(reader, attr.name)
        if kind is AttrKind.STRING or kind is AttrKind.SYMBOL:
            text = self.string(reader.varint(attr.name), offset)
            if kind is AttrKind.SYMBOL and not text:
                raise self.error(f"{attr.name} symbol reference is empty", offset)
            return text
        if kind is AttrKind.TYPE:
            return self._type_ref(reader, attr.name)
        if kind is AttrKind.DENSE:
            if not result_types:
                raise self.error(f"{attr.name} needs a result type", offset)
            return self.dense(result_types[0], reader.varint("constant index"), offset)
        if kind is AttrKind.I32_ARRAY or kind is AttrKind.I64_ARRAY:
            width = 4 if kind is AttrKind.I32_ARRAY else 8
            values = reader.int_array(width, attr.name)
            low, high = (INT32_MIN, INT32_MAX) if width == 4 else (INT64_MIN, INT64_MAX)
            for value in values:
                if value in (low, high):
                    raise self.error(f"{attr.name} array contains unsupported value {value}", offset)
            return tuple(values)
        if kind is AttrKind.BOOL_ARRAY:
            count = reader.count(f"{attr.name} length")
            return tuple(self._bool(reader, attr.name) for _ in range(count))
        if kind is AttrKind.ATTR_ARRAY:
            count = reader.count(f"{attr.name} length")
            return tuple(self.tagged_attr(reader) for _ in range(count))
        if kind is AttrKind.TAGGED:
            return self.tagged_attr(reader)
        if kind is AttrKind.HINTS:
            return self._hints_body(reader)
        raise self.error(f"attribute kind {kind} cannot appear in an op", offset)
