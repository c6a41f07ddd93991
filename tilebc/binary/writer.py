"""Module → bytes for any supported version. Refuses, with the op/field and the version it needs,
anything the target version cannot represent; never drops information silently."""
from __future__ import annotations

import struct

from ..errors import EncodeError
from ..gcpause import collection_paused
from ..ir import attrs as A
from ..ir import location as L
from ..ir import types as T
from ..ir.module import Block, Function, Module, Op, Value
from ..numeric.dense import dense_size_ok
from ..ir.shared import brief
from ..ops.enums import PtrAttr, SymbolVisibility, WireEnum
from ..ops.spec import ARITY_CODES, Arity, AttrKind
from ..ops.table import ITEM_READ
from ..speedups import encode_ops
from ..version import (DISUBPROGRAM_FLAGS, ENTRY_ARG_ATTRS, GLOBAL_VISIBILITY_AND_CONSTANT,
                       POINTER_ATTR, PREVIEW_TAG, PRODUCER_SECTION, UNIFIED_OPTIONAL_BITFIELD,
                       Version, VersionLike, check_supported)
from .layout import FileLayout, LayoutMismatch
from .limits import DEFAULT_LIMITS
from .plans import FIXED, OPERAND_MODE_CODES, SEGMENTED, OpPlan, plan_for
from .container import MAGIC, PREVIEW_TAG_BIT, SECTION_ALIGNMENT, SectionId
from .primitives import INT64_MIN, Writer
from .tags import (ATTR_ARRAY, ATTR_BOOL, ATTR_BOUNDED, ATTR_DENSE, ATTR_DICTIONARY, ATTR_DIV_BY,
                   ATTR_FLOAT, ATTR_HINTS, ATTR_INTEGER, ATTR_SAME_ELEMENTS, ATTR_STRING,
                   ATTR_TYPE, COMPOSITE_TAG_SINCE, DEBUG_CALL_SITE, DEBUG_COMPILE_UNIT, DEBUG_FILE,
                   DEBUG_LEXICAL_BLOCK, DEBUG_LOC, DEBUG_SUBPROGRAM, DEBUG_UNKNOWN,
                   FUNCTION_FLAG_HINTS, FUNCTION_FLAG_KERNEL, TAG_FUNCTION,
                   TAG_GATHER_SCATTER_VIEW, TAG_PARTITION_VIEW, TAG_POINTER, TAG_STRIDED_VIEW,
                   TAG_TENSOR_VIEW, TAG_TILE, TAG_TOKEN)


def dump(module: Module, version: VersionLike | None = None) -> bytes:
    """Encode `module` as Tile IR bytecode for `version` (default: the module's own version).

    `version` is a `Version` or a string such as "13.1" .. "13.5". Raises VersionError for a version
    tilebc cannot write, and EncodeError naming the op or field when the module uses something the
    target version lacks (e.g. entry argument attributes before 13.5) or is not encodable. The
    module is not verified here: `tilebc.verify` first when it was built by hand.

    Tables and sections come in the order of the file the module was decoded from while it still
    fits that file's layout (so an unmodified module gives the file's bytes back), else in
    NVIDIA's cuTile order (format_spec.md §4.1)."""
    target = check_supported(Version.parse(version if version is not None else module.version))
    try:
        with collection_paused():
            layout = module.layout
            if layout is not None and layout.version == target \
                    and layout.preview == module.preview:
                try:
                    return ModuleWriter(module, target, layout).write()
                except LayoutMismatch:  # edited since it was read: canonical order
                    pass
            return ModuleWriter(module, target).write()
    except (ValueError, TypeError, OverflowError, struct.error) as error:
        # Malformed IR handed in by a caller (a negative count, a non-integer shape, …).
        raise EncodeError(f"cannot encode module: {error} (target version {target})") from error


class _Interner:
    """Assigns table indices in first-use order; equal keys share one index."""

    def __init__(self, first_index: int = 0):
        self.index: dict[object, int] = {}
        self.blobs: list[bytes] = []
        self.first = first_index

    def add(self, key, blob: bytes) -> int:
        found = self.index.get(key)
        if found is None:
            found = self.index[key] = len(self.blobs) + self.first
            self.blobs.append(blob)
        return found


class _SeededInterner(_Interner):
    """A file's table, in its order: an entry it lacks means the module no longer fits the file.
    Records which entries are used (blobs are the keys of every table the writer interns)."""

    def __init__(self, blobs: list[bytes], first_index: int = 0):
        super().__init__(first_index)
        self.blobs = blobs
        # Built from the end, so that of equal entries the first one keeps its index.
        self.index = dict(zip(reversed(blobs), range(first_index + len(blobs) - 1,
                                                     first_index - 1, -1)))
        self.used = bytearray(len(blobs))

    def add(self, key, blob: bytes) -> int:
        found = self.index.get(key)
        if found is None:
            raise LayoutMismatch()
        self.used[found - self.first] = 1
        return found


class ModuleWriter:
    """Writes `module` in NVIDIA's canonical order, or, given the `layout` of the file it was read
    from, in that file's order (LayoutMismatch when the module no longer fits it)."""

    def __init__(self, module: Module, version: Version, layout: FileLayout | None = None):
        self.module = module
        self.version = version
        self.layout = layout
        self.debug_roots: set = set()
        if layout is None:
            self.strings = _Interner()
            self.types = _Interner()
            self.constants = _Interner()
            self.debug = _Interner(first_index=1)
        else:
            self.strings = _SeededInterner(layout.table(SectionId.STRING))
            self.types = _SeededInterner(layout.table(SectionId.TYPE))
            self.constants = _SeededInterner(layout.table(SectionId.CONSTANT))
            debug, self.debug_roots = layout.debug()
            self.debug = _SeededInterner(debug, first_index=1)
        self.type_index: dict[T.Type, int] = {}
        self.debug_index: dict[object, int] = {}
        # id(value) -> (value, index) in front of type_index and debug_index: the same objects
        # recur op after op, and a structural hash is a Python call each time (the value is
        # kept, so its id cannot be reused by another object while the writer lives).
        self._type_ids: dict[int, tuple] = {}
        self._debug_ids: dict[int, tuple] = {}
        # How many table entries deep each entry reaches through its references: a reader refuses
        # chains longer than max_nesting, so the writer refuses to produce them.
        self.type_depth: dict[int, int] = {}
        self.debug_depth: dict[int, int] = {0: 0}
        # Globals whose table entries are not made yet, by name.
        self.unplaced_globals: dict[str, object] = {item.name: item for item in module.globals}
        self.global_entries: dict[int, tuple] = {}
        self._plans: dict[int, OpPlan] = {}  # id(spec) -> its plan (which keeps the spec)
        self._encoder_context: tuple | None = None  # what tilebc._speedups.encode_ops reads
        self._attr_blobs: dict[int, tuple] = {}  # id(value) -> (value, attr, bytes)
        self._encoder_programs: dict[int, tuple | None] = {}  # id(spec) -> its program

    def fail(self, message: str, op: Op | None = None) -> EncodeError:
        where = f"{op.name}: " if op is not None else ""
        return EncodeError(f"{where}{message} (target version {self.version})")

    def need(self, since: Version, what: str, op: Op | None = None) -> None:
        if since > self.version:
            raise self.fail(f"{what} needs bytecode version {since} or newer", op)

    # ---- tables ----------------------------------------------------------------------------------

    def string(self, text: str) -> int:
        try:
            data = text.encode("utf-8", "surrogateescape")  # the reader's escaped raw bytes
        except UnicodeEncodeError as error:
            raise self.fail(f"string {text!r} has a lone surrogate U+{ord(text[error.start]):04X} "
                            "that is not an escaped byte (U+DC80..U+DCFF)") from None
        return self.strings.add(data, data)

    def type(self, value: T.Type) -> int:
        seen = self._type_ids.get(id(value))
        if seen is not None and seen[0] is value:
            return seen[1]
        found = self.type_index.get(value)
        if found is not None:
            self._type_ids[id(value)] = (value, found)
            return found
        writer = Writer()
        self._encode_type(value, writer)
        if isinstance(value, T.FunctionType) and T.text_size(value) > DEFAULT_LIMITS.max_type_text:
            raise self.fail(f"function type {brief(value)} has a text of {T.text_size(value)} "
                            f"characters; readers refuse more than max_type_text="
                            f"{DEFAULT_LIMITS.max_type_text}")
        blob = bytes(writer.buf)
        found = self.types.add(blob, blob)
        self.type_depth[found] = self._depth(
            "type", value, self.type_depth, [self.type_index[part] for part in _type_parts(value)])
        self.type_index[value] = found
        self._type_ids[id(value)] = (value, found)
        return found

    def _depth(self, what: str, value, depths: dict[int, int], refs: list[int]) -> int:
        """1 + the deepest entry in `refs`; an EncodeError past the reader's max_nesting."""
        depth = 1 + max((depths[ref] for ref in refs), default=0)
        if depth > DEFAULT_LIMITS.max_nesting:
            text = brief(value) if what == "type" else brief(value, repr)
            raise self.fail(f"{what} {text} refers to other {what}s {depth} entries deep; "
                            f"readers refuse chains longer than max_nesting="
                            f"{DEFAULT_LIMITS.max_nesting}")
        return depth

    def _encode_type(self, value: T.Type, out: Writer) -> None:
        version = self.version
        if isinstance(value, T.ElementType):
            self.need(value.since, f"element type {value.name}")
            out.varint(value.type_tag)
            return
        kind_since = T.TYPE_KIND_SINCE.get(type(value))
        if kind_since is None:
            raise self.fail(f"cannot encode type {value!r}")
        self.need(kind_since, f"type {type(value).__name__}")
        if isinstance(value, T.TokenType):
            out.varint(TAG_TOKEN)
        elif isinstance(value, (T.PointerType, T.TensorViewType)):
            if value.ptr_attr != PtrAttr.NONE:
                self.need(POINTER_ATTR, f"ptr_attr {value.ptr_attr.keyword} on {value}")
            element = self.type(value.pointee if isinstance(value, T.PointerType) else value.element)
            out.varint(TAG_POINTER if isinstance(value, T.PointerType) else TAG_TENSOR_VIEW)
            if version >= POINTER_ATTR:
                out.varint(1 if value.ptr_attr != PtrAttr.NONE else 0)
            out.varint(element)
            if isinstance(value, T.TensorViewType):
                out.int_array([INT64_MIN if d is None else d for d in value.shape], 8)
                out.int_array([INT64_MIN if d is None else d for d in value.strides], 8)
            if value.ptr_attr != PtrAttr.NONE:
                out.varint(int(value.ptr_attr))
        elif isinstance(value, T.TileType):
            element = self.type(value.element)
            out.varint(TAG_TILE)
            out.varint(element)
            out.int_array(list(value.shape), 8)
        elif isinstance(value, T.PartitionViewType):
            view = self.type(value.tensor_view)
            has_padding = value.padding_value is not None
            out.varint(TAG_PARTITION_VIEW)
            unified = version >= UNIFIED_OPTIONAL_BITFIELD
            if unified:
                out.varint(int(has_padding))
            out.int_array(list(value.tile_shape), 4)
            out.varint(view)
            out.int_array(list(value.dim_map), 4)
            if not unified:
                out.u8(int(has_padding))
            if has_padding:
                out.varint(int(value.padding_value))
        elif isinstance(value, T.GatherScatterViewType):
            view = self.type(value.tensor_view)
            out.varint(TAG_GATHER_SCATTER_VIEW)
            out.varint(int(value.padding_value is not None))
            out.int_array(list(value.tile_shape), 4)
            out.varint(view)
            out.varint(value.sparse_dim)
            if value.padding_value is not None:
                out.varint(int(value.padding_value))
        elif isinstance(value, T.StridedViewType):
            view = self.type(value.tensor_view)
            out.varint(TAG_STRIDED_VIEW)
            out.varint(int(value.padding_value is not None))
            out.int_array(list(value.tile_shape), 4)
            out.int_array(list(value.traversal_strides), 4)
            out.varint(view)
            out.int_array(list(value.dim_map), 4)
            if value.padding_value is not None:
                out.varint(int(value.padding_value))
        elif isinstance(value, T.FunctionType):
            inputs = [self.type(t) for t in value.inputs]
            results = [self.type(t) for t in value.results]
            out.varint(TAG_FUNCTION)
            out.varint(len(inputs))
            for index in inputs:
                out.varint(index)
            out.varint(len(results))
            for index in results:
                out.varint(index)
        else:
            raise self.fail(f"cannot encode type {value!r}")

    def constant(self, dense: A.DenseElementsAttr) -> int:
        if not dense_size_ok(dense.type, dense.data):
            raise self.fail(f"dense value of {len(dense.data)} bytes does not fit {dense.type}")
        self.type(dense.type)
        writer = Writer()
        writer.varint(len(dense.data))
        writer.raw(dense.data)
        blob = bytes(writer.buf)
        return self.constants.add(blob, blob)

    def enum(self, value: WireEnum, what: str, op: Op | None, out: Writer) -> None:
        if not isinstance(value, WireEnum):
            raise self.fail(f"{what} must be an enum member, got {value!r}", op)
        self.need(value.since, f"{what} value {value.keyword}", op)
        out.varint(int(value))

    # ---- attributes ------------------------------------------------------------------------------

    def tagged_attr(self, value: A.Attribute, out: Writer, op: Op | None = None) -> None:
        if isinstance(value, A.IntegerAttr):
            element = self.type(value.type)
            out.varint(ATTR_INTEGER)
            out.varint(element)
            out.varint(self._int_bits(value.value, value.type.bits, "integer attribute", op))
        elif isinstance(value, A.FloatAttr):
            element = self.type(value.type)
            out.varint(ATTR_FLOAT)
            out.varint(element)
            if value.bits >> value.type.bits or value.bits < 0:
                raise self.fail(f"float bits 0x{value.bits:x} do not fit {value.type}", op)
            if value.type.bits <= 8:
                out.u8(value.bits)
            else:
                signed = value.bits - (1 << 64) if value.bits >> 63 else value.bits
                out.zigzag(signed)
        elif isinstance(value, A.BoolAttr):
            out.varint(ATTR_BOOL)
            out.u8(int(bool(value.value)))
        elif isinstance(value, A.TypeAttr):
            index = self.type(value.value)
            out.varint(ATTR_TYPE)
            out.varint(index)
        elif isinstance(value, A.StringAttr):
            out.varint(ATTR_STRING)
            out.varint(self.string(value.value))
        elif isinstance(value, A.ArrayAttr):
            out.varint(ATTR_ARRAY)
            out.varint(len(value.elements))
            for element in value.elements:
                self.tagged_attr(element, out, op)
        elif isinstance(value, A.DenseElementsAttr):
            index = self.type(value.type)
            out.varint(ATTR_DENSE)
            out.varint(index)
            out.varint(self.constant(value))
        elif isinstance(value, A.DivByAttr):
            out.varint(ATTR_DIV_BY)
            out.varint(value.divisor)
            out.u8((value.every is not None) | (value.along is not None) << 1)
            if value.every is not None:
                out.zigzag(value.every)
            if value.along is not None:
                out.zigzag(value.along)
        elif isinstance(value, A.SameElementsAttr):
            out.varint(ATTR_SAME_ELEMENTS)
            out.int_array(list(value.values), 8)
        elif isinstance(value, A.DictionaryAttr):
            out.varint(ATTR_DICTIONARY)
            self._dictionary_body(value.entries, out, op)
        elif isinstance(value, A.OptimizationHintsAttr):
            out.varint(ATTR_HINTS)
            self._dictionary_body(value.entries, out, op)
        elif isinstance(value, A.BoundedAttr):
            out.varint(ATTR_BOUNDED)
            out.u8((value.lower is not None) | (value.upper is not None) << 1)
            if value.lower is not None:
                out.zigzag(value.lower)
            if value.upper is not None:
                out.zigzag(value.upper)
        else:
            raise self.fail(f"cannot encode attribute {value!r}", op)

    def _dictionary_body(self, entries, out: Writer, op) -> None:
        out.varint(len(entries))
        for key, item in entries:
            if not key:
                raise self.fail("dictionary key is empty", op)
            out.varint(self.string(key))
            self.tagged_attr(item, out, op)

    def _int_bits(self, value: int, width: int, what: str, op) -> int:
        low = -(1 << (width - 1)) if width > 1 else 0
        if not low <= value < (1 << width):
            raise self.fail(f"{what} value {value} does not fit in {width} bits", op)
        return value & ((1 << width) - 1)

    # ---- ops -------------------------------------------------------------------------------------

    def _plan(self, spec) -> OpPlan:
        found = self._plans.get(id(spec))
        if found is None or found.spec is not spec:
            found = self._plans[id(spec)] = plan_for(spec, self.version)
        return found

    def op(self, op: Op, out: Writer, numbering: dict[int, int], locs: list) -> None:
        spec = op.spec
        version = self.version
        plan = self._plans.get(id(spec))
        if plan is None or plan.spec is not spec:
            plan = self._plan(spec)
        # The location is interned before anything of the op, as cuTile's writer does.
        loc = op.loc
        if loc is None:
            locs.append(0)
        else:
            seen = self._debug_ids.get(id(loc))
            locs.append(seen[1] if seen is not None and seen[0] is loc else self.debug_attr(loc))
        if spec.structural:
            raise self.fail("structural op cannot appear in a function body", op)
        if spec.preview and not self.module.preview:
            raise self.fail("preview op needs a module marked preview", op)
        if not plan.kind_current:
            self.need(spec.since, f"op {spec.mnemonic}", op)
        if self.unplaced_globals:
            # cuTile defines a global where the body first refers to it.
            for attr in spec.attrs:
                if attr.kind is AttrKind.SYMBOL:
                    item = self.unplaced_globals.pop(op.attrs.get(attr.name), None)
                    if item is not None:
                        self._global_entries(item)
        # varints below 0x80 (most opcodes, counts, table indices, value numbers) appended inline
        buf = out.buf
        varint = out.varint
        opcode = spec.opcode
        if 0 <= opcode < 0x80:
            buf.append(opcode)
        else:
            varint(opcode)

        # Results: those newer than the target are omitted (and must be unused).
        if plan.encode_results is not None and len(op.results) <= plan.encode_results:
            serialized = op.results
        else:
            serialized = [value for value, result in zip(op.results, self._result_specs(op))
                          if result.since <= version]
        if plan.counted_results:
            varint(len(serialized))
        type_ids = self._type_ids
        for value in serialized:
            value_type = value.type
            seen = type_ids.get(id(value_type))
            index = seen[1] if seen is not None and seen[0] is value_type else self.type(value_type)
            if index < 0x80:
                buf.append(index)
            else:
                varint(index)

        # Flags.
        flags = 0
        operands = op.operands
        attrs = op.attrs
        for bit, unit, current in plan.encode_flag_bits:
            if bit.is_operand:
                present = operands.get(bit.name) is not None
            else:
                attr_value = attrs.get(bit.name)
                present = bool(attr_value) if unit else attr_value is not None
            if present:
                if not current:
                    self.need(max(bit.since, spec.since), f"{bit.name}", op)
                flags |= 1 << bit.bit
        if plan.has_flags:
            if flags < 0x80:
                buf.append(flags)
            else:
                varint(flags)

        # Attributes (unit attributes are flags).
        for attr, current in plan.encode_attrs:
            value = attrs.get(attr.name)
            if value is None and attr.optional:
                continue
            if current and attr.kind is _ENUM and value.__class__ is attr.enum \
                    and value.since <= version:
                # _op_attr's enum case inline (most attributes are enums a version has)
                number = int(value)
                if 0 <= number < 0x80:
                    buf.append(number)
                else:
                    varint(number)
                continue
            if not current:
                default = attr.default_for(op.operands)
                if value is not None and value != default and not (
                        attr.kind is AttrKind.BOOL_ARRAY and not any(value)):
                    raise self.fail(f"attribute {attr.name}={_show(value)} needs bytecode version "
                                    f"{attr.since} or newer", op)
                continue
            if value is None:
                value = attr.default_for(op.operands)
                if value is None:
                    raise self.fail(f"required attribute {attr.name} is missing", op)
            self._op_attr(op, attr, value, out)

        # Operands.
        get = numbering.get
        mode = plan.operand_mode
        if mode is FIXED:
            for operand in spec.operands:
                group = operands.get(operand.name)
                if not isinstance(group, Value):
                    self._required(group, operand, op)
                index = get(id(group))
                if index is None:
                    varint(self._undefined(group, op))
                elif index < 0x80:
                    buf.append(index)
                else:
                    varint(index)
        elif mode is SEGMENTED:
            for operand in spec.operands:
                group = operands.get(operand.name)
                if operand.arity is Arity.ONE:
                    self._required(group, operand, op)
                    self._ref(group, out, numbering, op)
                elif operand.arity is Arity.OPTIONAL:
                    if group is not None:
                        self._ref(group, out, numbering, op)
                else:
                    group = group or ()
                    out.varint(len(group))
                    for value in group:
                        self._ref(value, out, numbering, op)
        else:
            flat = []
            for operand in spec.operands:
                group = operands.get(operand.name)
                if operand.arity is Arity.VARIADIC:
                    flat.extend(group or ())
                else:
                    self._required(group, operand, op)
                    flat.append(group)
            varint(len(flat))
            for value in flat:
                index = get(id(value))
                if index is None:
                    varint(self._undefined(value, op))
                elif index < 0x80:
                    buf.append(index)
                else:
                    varint(index)

        # Regions: block arguments take the indices the op's results get afterwards.
        if spec.regions:
            if len(op.regions) != spec.regions:
                raise self.fail(f"has {len(op.regions)} regions, expected {spec.regions}", op)
            out.varint(len(op.regions))
            for region in op.regions:
                out.varint(len(region.blocks))
                for block in region.blocks:
                    self.block(block, out, numbering, locs)

        for value in serialized:
            numbering[id(value)] = len(numbering)

    def _ref(self, value: Value, out: Writer, numbering: dict[int, int], op: Op) -> None:
        index = numbering.get(id(value))
        out.varint(self._undefined(value, op) if index is None else index)

    def _undefined(self, value: Value, op: Op):
        """The error for an operand not numbered (not defined before its use)."""
        owner = value.owner
        if isinstance(owner, Op) and value in owner.results:
            result = self._result_specs(owner)[owner.results.index(value)]
            if result.since > self.version:
                raise self.fail(f"uses {owner.name}'s {result.name}, which needs bytecode "
                                f"version {result.since} or newer", op)
        raise self.fail(f"operand {value!r} is not defined before its use in this region", op)

    def _result_specs(self, op: Op):
        specs = []
        for result in op.spec.results:
            if result.variadic:
                specs.extend([result] * (len(op.results) - len(op.spec.results) + 1))
            else:
                specs.append(result)
        return specs

    def _required(self, group, operand, op) -> None:
        if not isinstance(group, Value):
            raise self.fail(f"operand {operand.name} is missing", op)

    def block(self, block: Block, out: Writer, numbering: dict[int, int], locs: list) -> None:
        out.varint(len(block.args))
        for arg in block.args:
            out.varint(self.type(arg.type))
        # Values are numbered like a stack: a block's arguments and everything defined inside it
        # are popped at its end (dicts keep insertion order, so popitem() removes the newest).
        mark = len(numbering)
        for arg in block.args:
            numbering[id(arg)] = len(numbering)
        out.varint(len(block.ops))
        if not block.ops:
            raise self.fail("a block needs at least one op (its terminator)")
        self.ops(block.ops, out, numbering, locs, True)
        while len(numbering) > mark:
            numbering.popitem()

    def ops(self, ops: list[Op], out: Writer, numbering: dict[int, int], locs: list,
            item_read: bool) -> None:
        """Each op of a block (`item_read`: a nested block, where cuTile's item reads register
        their type early) or of an entry's body; the loop is C where tilebc._speedups is built."""
        if encode_ops is not None:
            if self._encoder_context is None:  # no bound methods: the writer holds no cycle
                self._encoder_context = (self._type_ids, self._debug_ids, self._encoder_programs,
                                         self.unplaced_globals, self._attr_blobs, Value)
            encode_ops(self, ops, out, numbering, locs, item_read)
            return
        for index in range(len(ops)):
            self.op_at(ops, index, out, numbering, locs, item_read)

    def op_at(self, ops: list[Op], index: int, out: Writer, numbering: dict[int, int],
              locs: list, item_read: bool) -> None:
        op = ops[index]
        following = ops[index + 1] if item_read and index + 1 < len(ops) else None
        if following is not None \
                and (op.spec.mnemonic, following.spec.mnemonic) == ITEM_READ \
                and following.operand_values[0] is op.results[0] \
                and getattr(following.results[0].type, "rank", None) == 0:
            # cuTile reads an item out of a tile: it registers the item's scalar type
            # before the 1x…x1 tile `extract` returns (its array_list kernels)
            self.type(following.results[0].type)
        self.op(op, out, numbering, locs)

    def _attr_bytes(self, op: Op, attr, value) -> bytes:
        """An attribute's bytes as `op` writes them (for encode_ops, which finds them again in
        _attr_blobs for the same value object: they depend on nothing else, and the table
        entries they name were made the first time)."""
        out = Writer()
        self._op_attr(op, attr, value, out)
        blob = bytes(out.buf)
        self._attr_blobs[id(value)] = (value, attr, blob)
        return blob

    def _encoder_program(self, spec):
        """`spec`'s program for tilebc._speedups.encode_ops (what `op` does for an op of it, when
        nothing unusual happens), or None for kinds always written by `op`: regions, structural
        and preview kinds, kinds or results the target version lacks."""
        plan = self._plan(spec)
        program = None
        if not (spec.regions or spec.structural or spec.preview or not plan.kind_current
                or plan.encode_results is None or spec.unregistered):
            opcode = Writer()
            opcode.varint(spec.opcode)
            flags = (plan.counted_results | plan.has_flags << 1
                     | (spec.mnemonic == ITEM_READ[0]) << 2
                     | any(a.kind is AttrKind.SYMBOL for a in spec.attrs) << 3)
            flag_steps = tuple((bit.name, bool(bit.is_operand), bool(unit),
                                bit.bit if current else -1)
                               for bit, unit, current in plan.encode_flag_bits)
            attr_steps = []
            for attr, current in plan.encode_attrs:
                if not current:
                    mode, members = _ATTR_NEWER, None
                elif attr.kind is _ENUM:
                    mode = _ATTR_ENUM
                    members = {m: int(m) for m in attr.enum if m.since <= self.version}
                else:
                    mode, members = _ATTR_BYTES, None
                attr_steps.append((attr.name, mode, attr.optional, attr,
                                   attr.enum if mode == _ATTR_ENUM else None, members))
            mode = OPERAND_MODE_CODES[plan.operand_mode]
            operand_steps = tuple((o.name, ARITY_CODES[o.arity]) for o in spec.operands)
            program = (spec, bytes(opcode.buf), flags, plan.encode_results, flag_steps,
                       tuple(attr_steps), mode, operand_steps)
        self._encoder_programs[id(spec)] = program
        return program

    def _op_attr(self, op: Op, attr, value, out: Writer) -> None:
        kind = attr.kind
        if kind is AttrKind.ENUM:
            if not isinstance(value, attr.enum):
                raise self.fail(f"attribute {attr.name} must be a {attr.enum.__name__}", op)
            self.enum(value, attr.name, op, out)
        elif kind is AttrKind.INT:
            out.varint(self._int_bits(int(value), attr.width, attr.name, op))
        elif kind is AttrKind.BOOL:
            out.u8(int(bool(value)))
        elif kind in (AttrKind.STRING, AttrKind.SYMBOL):
            if kind is AttrKind.SYMBOL and not value:
                raise self.fail(f"{attr.name} symbol is empty", op)
            out.varint(self.string(value))
        elif kind is AttrKind.TYPE:
            out.varint(self.type(value))
        elif kind is AttrKind.DENSE:
            out.varint(self.constant(value))
        elif kind is AttrKind.I32_ARRAY:
            out.int_array(list(value), 4)
        elif kind is AttrKind.I64_ARRAY:
            out.int_array(list(value), 8)
        elif kind is AttrKind.BOOL_ARRAY:
            out.varint(len(value))
            for item in value:
                out.u8(int(bool(item)))
        elif kind is AttrKind.ATTR_ARRAY:
            out.varint(len(value))
            for item in value:
                self.tagged_attr(item, out, op)
        elif kind is AttrKind.TAGGED:
            self.tagged_attr(value, out, op)
        elif kind is AttrKind.HINTS:
            self._dictionary_body(value.entries, out, op)
        else:
            raise self.fail(f"attribute kind {kind} cannot be encoded in an op", op)

    # ---- debug info ------------------------------------------------------------------------------

    def debug_attr(self, value) -> int:
        seen = self._debug_ids.get(id(value))
        if seen is not None and seen[0] is value:
            return seen[1]
        found = self.debug_index.get(value)
        if found is not None:
            self._debug_ids[id(value)] = (value, found)
            return found
        if isinstance(value, L.DILoc):  # one per op in most files: its own short path
            return self._di_loc(value)
        out = Writer()
        refs: list[int] = []
        if isinstance(value, L.UnknownDebugAttr):
            out.varint(DEBUG_UNKNOWN)
        elif isinstance(value, L.DIFile):
            out.varint(DEBUG_FILE)
            out.varint(self.string(value.name))
            out.varint(self.string(value.directory))
        elif isinstance(value, L.DICompileUnit):
            file = self.debug_attr(value.file)
            refs = [file]
            out.varint(DEBUG_COMPILE_UNIT)
            out.varint(file)
        elif isinstance(value, L.DILexicalBlock):
            scope, file = self.debug_attr(value.scope), self.debug_attr(value.file)
            refs = [scope, file]
            out.varint(DEBUG_LEXICAL_BLOCK)
            for item in (scope, file, value.line, value.column):
                out.varint(item)
        elif isinstance(value, L.DISubprogram):
            file, unit = self.debug_attr(value.file), self.debug_attr(value.compile_unit)
            refs = [file, unit]
            out.varint(DEBUG_SUBPROGRAM)
            out.varint(file)
            out.varint(value.line)
            out.varint(self.string(value.name))
            out.varint(self.string(value.linkage_name))
            out.varint(unit)
            out.varint(value.scope_line)
            if self.version >= DISUBPROGRAM_FLAGS:
                out.varint(value.flags)
            elif value.flags:
                self.need(DISUBPROGRAM_FLAGS, f"DISubprogram flags {value.flags}")
        elif isinstance(value, L.CallSiteLoc):
            # An unknown part (None) is debug index 0, as for any other location.
            callee, caller = (0 if part is None else self.debug_attr(part)
                              for part in (value.callee, value.caller))
            refs = [callee, caller]
            out.varint(DEBUG_CALL_SITE)
            out.varint(callee)
            out.varint(caller)
        else:
            raise self.fail(f"cannot encode debug attribute {value!r}")
        blob = bytes(out.buf)
        found = self.debug.add(blob, blob)
        self.debug_depth[found] = self._depth("debug attribute", value, self.debug_depth, refs)
        self.debug_index[value] = found
        self._debug_ids[id(value)] = (value, found)
        return found

    def _di_loc(self, value: L.DILoc) -> int:
        """debug_attr of a DILoc not interned yet: its scope, file name, line and column."""
        scope = self.debug_attr(value.scope)
        out = Writer()
        buf = out.buf
        buf.append(DEBUG_LOC)
        for item in (scope, self.string(value.filename), value.line, value.column):
            if item < 0x80 and item >= 0:  # varint's own test first: the same TypeError
                buf.append(item)
            else:
                out.varint(item)
        blob = bytes(buf)
        found = self.debug.add(blob, blob)
        depth = 1 + self.debug_depth[scope]
        if depth > DEFAULT_LIMITS.max_nesting:
            self._depth("debug attribute", value, self.debug_depth, [scope])  # raises
        self.debug_depth[found] = depth
        self.debug_index[value] = found
        self._debug_ids[id(value)] = (value, found)
        return found

    # ---- module ----------------------------------------------------------------------------------

    def write(self) -> bytes:
        module = self.module
        version = self.version
        if module.preview:
            self.need(PREVIEW_TAG, "public-preview bytecode")

        layout = self.layout
        if layout is None:
            # NVIDIA's cuTile writer registers i1 and i32 first, used or not.
            self.type(T.i1)
            self.type(T.i32)
        elif len(layout.function_slots) != len(module.functions):
            raise LayoutMismatch()
        func_section = Writer()
        func_section.varint(len(module.functions))
        debug_functions: list[list[int]] = []
        for position, function in enumerate(module.functions):
            self._function(function, func_section, debug_functions, position)

        global_section = None
        if module.globals:
            global_section = Writer()
            global_section.varint(len(module.globals))
            for item in module.globals:
                if item.visibility != SymbolVisibility.PUBLIC or item.constant:
                    self.need(GLOBAL_VISIBILITY_AND_CONSTANT,
                              f"global @{item.name} with private visibility or constant flag")
                entries = self.global_entries.get(id(item)) or self._global_entries(item)
                for index in entries:
                    global_section.varint(index)
                global_section.varint(item.alignment)
                if version >= GLOBAL_VISIBILITY_AND_CONSTANT:
                    global_section.varint(int(item.visibility))
                    global_section.varint(int(item.constant))

        producer_section = None
        if module.producer is not None:
            self.need(PRODUCER_SECTION, "the producer section")
            producer_section = Writer()
            producer_section.varint(self.string(module.producer))

        payloads = {SectionId.FUNC: func_section.buf, SectionId.GLOBAL: global_section,
                    SectionId.PRODUCER: producer_section,
                    SectionId.CONSTANT: encode_offset_table(self.constants.blobs, 8, 8),
                    SectionId.DEBUG: self._debug_section(debug_functions),
                    SectionId.TYPE: encode_offset_table(self.types.blobs, 4, 4),
                    SectionId.STRING: encode_offset_table(self.strings.blobs, 4, 4)}
        if layout is None:
            # cuTile's order; it writes the constant and debug sections even when they are empty.
            order = [(section_id, SECTION_ALIGNMENT[section_id]) for section_id in CANONICAL_ORDER
                     if payloads[section_id] is not None]
        else:
            order = self._file_order(payloads, debug_functions)

        out = Writer()
        out.raw(MAGIC)
        out.u8(version.major)
        out.u8(version.minor)
        out.fixed(PREVIEW_TAG_BIT if module.preview else 0, 2)
        for section_id, alignment in order:
            payload = payloads[section_id]
            if isinstance(payload, Writer):
                payload = payload.buf
            out.u8(int(section_id) | (0x80 if alignment else 0))
            out.varint(len(payload))
            if alignment:
                out.varint(alignment)
                out.align(alignment)
            out.raw(bytes(payload))
        out.u8(SectionId.END)
        return bytes(out.buf)

    def _file_order(self, payloads, debug_functions) -> list[tuple]:
        """The layout's sections, in its order, once the module is known to fit it: every entry it
        needs was in the file's tables, and every entry it used there it still uses."""
        layout = self.layout
        for table, section_id in ((self.strings, SectionId.STRING), (self.types, SectionId.TYPE),
                                  (self.constants, SectionId.CONSTANT)):
            was = int.from_bytes(layout.used[section_id], "little")
            if was & ~int.from_bytes(table.used, "little"):
                raise LayoutMismatch()
        # Every debug attribute the writer interned is in debug_index; 0 is no attribute.
        missing = self.debug_roots.difference(self.debug_index.values())
        missing.discard(0)
        if missing:
            raise LayoutMismatch()
        order = []
        present = set()
        for section_id, alignment, _, _ in layout.sections:
            present.add(section_id)
            if payloads[section_id] is None:
                raise LayoutMismatch()  # a global or producer section the module no longer has
            order.append((section_id, alignment))
        if (SectionId.DEBUG not in present and debug_functions) or any(
                payloads[s] is not None and s not in present
                for s in (SectionId.GLOBAL, SectionId.PRODUCER)):
            raise LayoutMismatch()
        payloads[SectionId.FUNC] += layout.func_tail
        return order

    def _global_entries(self, item) -> tuple:
        """The string, type and constant indices of a global, made on first need."""
        if not item.name:
            raise self.fail("global name is empty")
        entries = self.global_entries[id(item)] = (
            self.string(item.name), self.type(item.value.type), self.constant(item.value))
        return entries

    def _function(self, function: Function, out: Writer, debug_functions: list[list[int]],
                  position: int) -> None:
        version = self.version
        body = Writer()
        numbering: dict[int, int] = {}
        for arg in function.args:
            numbering[id(arg)] = len(numbering)
        if list(function.type.inputs) != [arg.type for arg in function.args]:
            raise self.fail(f"entry @{function.name}: argument types do not match its signature")
        # Table entries in the order cuTile creates them: the entry's location, its name and
        # signature, its hints, then the body op by op.
        locs: list[int] = [self._loc_index(function.loc)]
        out.varint(self.string(function.name))
        out.varint(self.type(function.type))
        hints = function.optimization_hints
        arg_attrs = function.arg_attrs
        if version >= ENTRY_ARG_ATTRS:
            out.u8(FUNCTION_FLAG_KERNEL)
        else:
            out.u8(FUNCTION_FLAG_KERNEL | (FUNCTION_FLAG_HINTS if hints is not None else 0))
            if arg_attrs is not None and arg_attrs.elements:
                self.need(ENTRY_ARG_ATTRS, f"argument attributes on entry @{function.name}")
        slot = position + 1 if self.layout is None else self.layout.function_slots[position]
        if slot:
            debug_functions.append(locs)
            if slot != len(debug_functions):
                raise LayoutMismatch()
        out.varint(slot)
        if version >= ENTRY_ARG_ATTRS:
            self.tagged_attr(hints or A.OptimizationHintsAttr(()), out)
            self.tagged_attr(arg_attrs or A.ArrayAttr(()), out)
        elif hints is not None:
            self.tagged_attr(hints, out)
        self.ops(function.body.ops, body, numbering, locs, False)
        if not slot and any(locs):
            raise LayoutMismatch()  # locations on an entry its file gave none
        out.varint(len(body.buf))
        out.raw(bytes(body.buf))

    def _loc_index(self, loc) -> int:
        return 0 if loc is None else self.debug_attr(loc)

    def _debug_section(self, debug_functions: list[list[int]]) -> bytearray:
        out = Writer()
        out.varint(len(debug_functions))
        out.align(4)
        first = 0
        for indices in debug_functions:
            out.fixed(first, 4)
            first += len(indices)
        out.varint(first)
        out.align(8)
        for indices in debug_functions:
            out.raw(struct.pack(f"<{len(indices)}Q", *indices))
        # NVIDIA's reader fails on an empty attribute table; cuTile then writes one `unknown` entry.
        blobs = self.debug.blobs or [bytes([DEBUG_UNKNOWN])]
        out.raw(bytes(encode_offset_table(blobs, 4, 4, base=len(out.buf))))
        return out.buf


# Sections in the order NVIDIA's cuTile writer emits them (the producer section, which cuTile does
# not write, goes before the strings as NVIDIA's C++ writer puts it).
CANONICAL_ORDER = (SectionId.FUNC, SectionId.GLOBAL, SectionId.CONSTANT, SectionId.DEBUG,
                   SectionId.TYPE, SectionId.PRODUCER, SectionId.STRING)


def encode_offset_table(blobs: list[bytes], offset_width: int, alignment: int,
                        base: int = 0) -> bytearray:
    """count, padding to `alignment` (measured from `base`), offsets, then the concatenated blobs:
    the layout of the string, type and constant tables and of the debug attribute table."""
    out = Writer()
    out.varint(len(blobs))
    out.align(alignment, base)
    position = 0
    for blob in blobs:
        out.fixed(position, offset_width)
        position += len(blob)
    for blob in blobs:
        out.raw(blob)
    return out.buf


_ENUM = AttrKind.ENUM
# How encode_ops writes an attribute: an enum member from the program's table, any value through
# ModuleWriter._attr_bytes, or (one the target version lacks) only when absent.
_ATTR_ENUM, _ATTR_BYTES, _ATTR_NEWER = 0, 1, 2


def _show(value) -> str:
    return value.keyword if isinstance(value, WireEnum) else repr(value)


def _type_parts(value: T.Type) -> list[T.Type]:
    """The types a type's table entry refers to."""
    if isinstance(value, T.PointerType):
        return [value.pointee]
    if isinstance(value, (T.TileType, T.TensorViewType)):
        return [value.element]
    if isinstance(value, (T.PartitionViewType, T.StridedViewType, T.GatherScatterViewType)):
        return [value.tensor_view]
    if isinstance(value, T.FunctionType):
        return list(value.inputs + value.results)
    return []
