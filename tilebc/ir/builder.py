"""Build Tile IR from Python. Op shapes come from the op table, so every op is built the same way.

    module = new_module(Version(13, 5))
    b = module_entry(module, "add", [scalar(PointerType(f32)), scalar(i32)])
    x_ptr, n = b.args
    token = b.make_token()
    view = b.tensor_view(x_ptr, shape=[n], strides=[1])          # tensor_view<?xf32, strides=[1]>
    tiles = b.partition_view(view, (64,))
    bid, _, _ = b.get_tile_block_id()
    x, _ = b.load(tiles, [bid], token=token)
    y = b.addf(x, x)                                              # result type inferred
    b.store(y, tiles, [bid], token=token)
    b.return_()
    data = tilebc.dump(module)

Every op of the table is a method (`b.addf(lhs, rhs, rounding_mode="zero")`): positional operands in
declaration order (a list for a variadic group; optional groups may be left out or named), attributes
as keywords (enum members or their keywords). Python keywords take a trailing underscore (`b.if_`,
`b.for_`, `b.yield_`, `b.return_`, `b.continue_`, `b.break_`, `b.assert_`). Result types are inferred
where the op fixes them (see `infer_result_types`); otherwise pass `result_types=[...]`. Helpers build
what needs more than operands: constants, views, loads/stores, conversions, broadcast/reshape, and the
region ops (for/if/loop/reduce/scan) from Python callbacks that receive a builder and the block
arguments and return the values the region yields.

`make_op`, `Builder.op`, `Builder.region` and `new_function` are the low-level layer (explicit result
types and regions) that the rest is built on.
"""
from __future__ import annotations

import functools
import inspect
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..errors import TilebcError
from ..ops import enums as E
from ..ops.spec import Arity, AttrKind, Family, OpSpec
from ..ops.table import MNEMONIC_ALIASES, OPS_BY_MNEMONIC, by_mnemonic, closing_terminator
from ..version import MAX_VERSION, Version
from .attrs import (DenseElementsAttr, DictionaryAttr, FloatAttr, IntegerAttr,
                    OptimizationHintsAttr)
from .location import Location
from .module import Block, Function, Module, Op, Region, Value
from .types import (ELEMENT_TYPES, ElementType, FunctionType, GatherScatterViewType,
                    PartitionViewType, PointerType, StridedViewType, TensorViewType, TileType, Type,
                    i1, i32, token)


class BuilderError(TilebcError):
    """The builder cannot make the requested op (unknown op, wrong operands, types it cannot infer)."""


def _spec(mnemonic: str) -> OpSpec:
    spec = OPS_BY_MNEMONIC.get(MNEMONIC_ALIASES.get(mnemonic, mnemonic))
    if spec is None or spec.structural:
        raise BuilderError(f"unknown op {mnemonic!r}")
    return spec


def _builds(method):
    """`method` builds the op its name spells (a trailing `_` dropped: `for_`, `if_`), which the
    table checks on import; it gets that op's spec after `self`, hidden from its signature."""
    spec = _spec(method.__name__.rstrip("_"))

    @functools.wraps(method)
    def build(self, *args, **kwargs):
        return method(self, spec, *args, **kwargs)
    signature = inspect.signature(method)
    parameters = list(signature.parameters.values())
    build.__signature__ = signature.replace(parameters=parameters[:1] + parameters[2:])
    return build


def _attr_value(spec: OpSpec, name: str, value):
    """Enum attributes may be given as their keywords ("weak", "signed")."""
    attr = spec.attr(name)
    if attr.kind is AttrKind.ENUM and isinstance(value, str):
        try:
            return attr.enum.from_keyword(value)
        except KeyError:
            choices = ", ".join(m.keyword for m in attr.enum)
            raise BuilderError(f"{spec.mnemonic}: {name} must be one of {choices}; got {value!r}") \
                from None
    if attr.kind is AttrKind.ENUM and value is not None and not isinstance(value, attr.enum):
        return attr.enum(value)
    return value


def make_op(mnemonic: str, operands: Union[Sequence, Dict[str, object]] = (),
            result_types: Sequence[Type] = (), attrs: Optional[Dict[str, object]] = None,
            regions: Sequence[Region] = (), loc: Location = None) -> Op:
    """Create an op by mnemonic. `operands` is a dict by operand name, or a list in declaration
    order (a list/tuple for a variadic group, None for an absent optional). Attributes left out take
    the table's default (unit attributes: False; optional ones: absent)."""
    spec = _spec(mnemonic)
    if not isinstance(operands, dict):
        operands = list(operands)
        if len(operands) != len(spec.operands):
            raise BuilderError(f"{spec.mnemonic} takes {len(spec.operands)} operand groups "
                               f"({', '.join(o.name for o in spec.operands)}), got {len(operands)}")
        operands = {o.name: value for o, value in zip(spec.operands, operands)}
    groups = {}
    for operand in spec.operands:
        value = operands.get(operand.name)
        if operand.arity is Arity.VARIADIC:
            value = tuple(value or ())
            if not all(isinstance(v, Value) for v in value):
                raise BuilderError(f"{spec.mnemonic}: operand group {operand.name} must hold Values")
        elif operand.arity is Arity.ONE and not isinstance(value, Value):
            raise BuilderError(f"{spec.mnemonic}: operand {operand.name} must be a Value")
        elif operand.arity is Arity.OPTIONAL and value is not None and not isinstance(value, Value):
            raise BuilderError(f"{spec.mnemonic}: operand {operand.name} must be a Value or None")
        groups[operand.name] = value
    unknown = set(operands) - set(groups)
    if unknown:
        raise BuilderError(f"{spec.mnemonic} has no operand(s) {sorted(unknown)}")
    given = dict(attrs or {})
    values = {}
    for attr in spec.attrs:
        if attr.name in given:
            values[attr.name] = _attr_value(spec, attr.name, given.pop(attr.name))
        elif attr.kind is AttrKind.UNIT:
            values[attr.name] = False
        elif attr.optional:
            values[attr.name] = None
        else:
            default = attr.default_for(groups)
            if default is None:
                raise BuilderError(f"{spec.mnemonic}: attribute {attr.name} is required")
            values[attr.name] = default
    if given:
        raise BuilderError(f"{spec.mnemonic} has no attribute(s) {sorted(given)}")
    return Op(spec, groups, values, list(result_types), list(regions), loc=loc)


# ---------------------------------------------------------------------------------------------------
# Result type inference


def _tile_type(value: Value, what: str) -> TileType:
    if not isinstance(value.type, TileType):
        raise BuilderError(f"{what} must be a tile, got {value.type}")
    return value.type


def _view_tile(view: Value, what: str) -> TileType:
    """The tile a load from `view` produces."""
    kind = view.type
    if isinstance(kind, (PartitionViewType, StridedViewType, GatherScatterViewType)):
        return TileType(tuple(kind.tile_shape), kind.tensor_view.element)
    raise BuilderError(f"{what}: expected a partition, strided or gather/scatter view, got {kind}")


# Ops whose result types follow from their operands by a rule of their own. Element-wise ops,
# comparisons and `result_like` ops take theirs from the op table, as the verifier does.
_SPECIAL_RESULTS: Dict[str, Callable[[OpSpec, dict, dict], List[Type]]] = by_mnemonic({
    "make_token": lambda s, g, a: [token],
    "join_tokens": lambda s, g, a: [token],
    "get_tile_block_id": lambda s, g, a: [TileType((), i32)] * 3,
    "get_num_tile_blocks": lambda s, g, a: [TileType((), i32)] * 3,
    "load_view_tko": lambda s, g, a: [_view_tile(g["view"], s.mnemonic), token],
    "load_ptr_tko": lambda s, g, a: [
        TileType(_tile_type(g["source"], f"{s.mnemonic} source").shape,
                 g["source"].type.element.pointee), token],
    "get_tensor_shape": lambda s, g, a: [TileType((), i32)] * g["src"].type.rank,
    "get_index_space_shape": lambda s, g, a: [TileType((), i32)] * len(_view_index_rank(g["src"])),
    "reduce": lambda s, g, a: [
        TileType(tuple(d for i, d in enumerate(v.type.shape) if i != a["dim"]), v.type.element)
        for v in g["operands"]],
    "scan": lambda s, g, a: [v.type for v in g["operands"]],
}, "builder result rules")


def _view_index_rank(view: Value) -> Tuple[int, ...]:
    kind = view.type
    if isinstance(kind, (PartitionViewType, StridedViewType)):
        return tuple(kind.tensor_view.shape)
    if isinstance(kind, GatherScatterViewType):
        return tuple(kind.tensor_view.shape)
    raise BuilderError(f"get_index_space_shape: expected a view, got {kind}")


def infer_result_types(mnemonic: str, groups: dict, attrs: dict) -> List[Type]:
    """Result types an op's operands and attributes determine, or BuilderError."""
    spec = _spec(mnemonic)
    special = _SPECIAL_RESULTS.get(spec.mnemonic)
    if special is not None:
        return list(special(spec, groups, attrs))
    if not spec.results:
        return []
    if all(r.name == "result_token" for r in spec.results):
        return [token] * len(spec.results)
    first = groups.get(spec.operands[0].name) if spec.operands else None
    if spec.family is Family.COMPARE and isinstance(first, Value):
        return [TileType(_tile_type(first, f"{spec.mnemonic} {spec.operands[0].name}").shape, i1)]
    if spec.result_like:
        like = groups.get(spec.result_like)
        if isinstance(like, tuple):  # for: results have the carried values' types
            return [v.type for v in like]
        if isinstance(like, Value):
            return [like.type] + [token for r in spec.results[1:] if r.name == "result_token"]
    raise BuilderError(f"{spec.mnemonic}: cannot infer the result type(s); pass result_types=[...]")


# ---------------------------------------------------------------------------------------------------
# Constants


def dense_attr(values, tile_type: TileType) -> DenseElementsAttr:
    """A dense buffer holding `values` (a scalar, or nested sequences / array of the tile's shape)
    for `tile_type`; equal values are stored as a splat, as MLIR stores them."""
    from ..numeric.convert import float_to_bits
    from ..numeric.numerics import storage_bytes
    element = tile_type.element
    array = np.asarray(values)
    count = tile_type.num_elements
    if array.size not in (1, count) or (array.size == count and array.ndim
                                        and tuple(array.shape) != tuple(tile_type.shape)):
        raise BuilderError(f"constant of shape {array.shape} does not fit {tile_type}")
    flat = array.reshape(-1).tolist()
    if len(set(map(repr, flat))) == 1:
        flat = flat[:1]
    if isinstance(element, ElementType) and element.is_float:
        raws = [float_to_bits(float(v), element) for v in flat]
    else:
        width = 64 if isinstance(element, PointerType) else element.bits
        raws = []
        for v in flat:
            v = int(v)
            if not -(1 << (width - 1)) <= v < (1 << width) and width > 1:
                raise BuilderError(f"constant {v} does not fit {element}")
            raws.append(v & ((1 << width) - 1))
    if isinstance(element, ElementType) and element.name == "i1":
        if len(raws) == 1:
            return DenseElementsAttr(tile_type, b"\xff" if raws[0] else b"\x00")
        packed = bytearray((count + 7) // 8)
        for i, bit in enumerate(raws):
            packed[i // 8] |= bit << (i % 8)
        return DenseElementsAttr(tile_type, bytes(packed))
    width = storage_bytes(element)
    return DenseElementsAttr(tile_type, b"".join(r.to_bytes(width, "little") for r in raws))


def typed_attr(value, element: ElementType):
    """An IntegerAttr / FloatAttr of a Python number (identities of reduce and scan)."""
    from ..numeric.convert import float_to_bits
    if isinstance(value, (IntegerAttr, FloatAttr)):
        return value
    if element.is_float:
        return FloatAttr(element, float_to_bits(float(value), element))
    value = int(value)
    width = element.bits
    if width > 1 and value >= 1 << (width - 1):
        value -= 1 << width  # IntegerAttr holds the signed reading
    return IntegerAttr(element, value)


def _element(element) -> Union[ElementType, PointerType]:
    if isinstance(element, (ElementType, PointerType)):
        return element
    try:
        return ELEMENT_TYPES[element]
    except KeyError:
        raise BuilderError(f"unknown element type {element!r}") from None


# ---------------------------------------------------------------------------------------------------
# The builder

RegionBody = Callable[..., Optional[Iterable[Value]]]


class Builder:
    """Appends ops to a block. `b.op("addf", [x, y])` returns the op's result (a tuple when it has
    several, None when it has none); `b.addf(x, y)` is the same through the op's method."""

    def __init__(self, block: Block, version: Version = MAX_VERSION):
        self.block = block
        self.version = version

    @property
    def args(self) -> List[Value]:
        return list(self.block.args)

    # ---- the low-level layer -------------------------------------------------------------------

    def op(self, mnemonic: str, operands=(), result_types=None, attrs=None, regions=(),
           loc: Location = None):
        """Append an op. `result_types=None` infers them (`infer_result_types`)."""
        if result_types is None:
            probe = make_op(mnemonic, operands, (), attrs, regions, loc)
            result_types = infer_result_types(mnemonic, probe.operands, probe.attrs)
            op = probe
            op.results = [Value(t, op, i) for i, t in enumerate(result_types)]
        else:
            op = make_op(mnemonic, operands, result_types, attrs, regions, loc)
        self.block.ops.append(op)
        if not op.results:
            return None
        if len(op.results) == 1:
            return op.results[0]
        return tuple(op.results)

    def region(self, arg_types: Sequence[Type] = ()):
        """A new single-block region and a builder for it."""
        block = Block()
        block.args = [Value(t, block, i) for i, t in enumerate(arg_types)]
        return Region([block]), Builder(block, self.version)

    def __getattr__(self, name: str):
        mnemonic = name[:-1] if name.endswith("_") else name
        try:
            spec = _spec(mnemonic)
        except BuilderError:
            raise AttributeError(f"Builder has no attribute or op {name!r}") from None

        def emit(*operands, result_types=None, regions=(), loc: Location = None, **keywords):
            return self.op(spec.mnemonic, _groups(spec, operands, keywords), result_types,
                           keywords, regions, loc)
        emit.__name__ = name
        emit.__doc__ = spec.summary
        return emit

    def _region_from(self, arg_types: Sequence[Type], body: RegionBody, owner: OpSpec) -> Region:
        """A region of an `owner` op; a body that does not end in a terminator gets the one the
        op's regions close with, carrying the values `body` returned."""
        region, inner = self.region(arg_types)
        yielded = body(inner, *inner.block.args)
        ops = inner.block.ops
        if not ops or not ops[-1].spec.terminator:
            inner.op(closing_terminator(owner.mnemonic).mnemonic, [list(yielded or ())])
        return region

    # ---- constants and scalars -----------------------------------------------------------------

    @_builds
    def constant(self, spec: OpSpec, value, element, shape: Sequence[int] = ()) -> Value:
        """A constant tile: `b.constant(0.5, "f32")`, `b.constant(0, i32, (32,))`,
        `b.constant(np.arange(4, dtype=np.int32), "i32", (4,))`."""
        tile_type = TileType(tuple(int(d) for d in shape), _element(element))
        return self.op(spec.mnemonic, [], [tile_type], {"value": dense_attr(value, tile_type)})

    # ---- shapes --------------------------------------------------------------------------------

    @_builds
    def reshape(self, spec: OpSpec, source: Value, shape: Sequence[int]) -> Value:
        tile_type = _tile_type(source, f"{spec.mnemonic} source")
        return self.op(spec.mnemonic, [source], [TileType(tuple(shape), tile_type.element)])

    @_builds
    def broadcast(self, spec: OpSpec, source: Value, shape: Sequence[int]) -> Value:
        tile_type = _tile_type(source, f"{spec.mnemonic} source")
        return self.op(spec.mnemonic, [source], [TileType(tuple(shape), tile_type.element)])

    def splat(self, source: Value, shape: Sequence[int]) -> Value:
        """A 0-d tile broadcast to `shape` the way cuTile writes it: reshape to 1x..x1, then
        broadcast."""
        ones = self.reshape(source, (1,) * len(shape))
        return self.broadcast(ones, shape)

    @_builds
    def permute(self, spec: OpSpec, source: Value, permutation: Sequence[int]) -> Value:
        tile_type = _tile_type(source, f"{spec.mnemonic} source")
        shape = tuple(tile_type.shape[p] for p in permutation)
        return self.op(spec.mnemonic, [source], [TileType(shape, tile_type.element)],
                       {"permutation": tuple(permutation)})

    # ---- conversions ---------------------------------------------------------------------------

    def _convert(self, spec: OpSpec, source: Value, element, attrs) -> Value:
        tile_type = _tile_type(source, f"{spec.mnemonic} source")
        return self.op(spec.mnemonic, [source], [TileType(tile_type.shape, _element(element))], attrs)

    @_builds
    def exti(self, spec: OpSpec, source: Value, element, signedness="signed") -> Value:
        return self._convert(spec, source, element, {"signedness": signedness})

    @_builds
    def trunci(self, spec: OpSpec, source: Value, element, overflow="none") -> Value:
        return self._convert(spec, source, element, {"overflow": overflow})

    @_builds
    def itof(self, spec: OpSpec, source: Value, element, signedness="signed", **attrs) -> Value:
        return self._convert(spec, source, element, {"signedness": signedness, **attrs})

    @_builds
    def ftoi(self, spec: OpSpec, source: Value, element, signedness="signed", **attrs) -> Value:
        return self._convert(spec, source, element, {"signedness": signedness, **attrs})

    @_builds
    def ftof(self, spec: OpSpec, source: Value, element, **attrs) -> Value:
        return self._convert(spec, source, element, attrs)

    @_builds
    def bitcast(self, spec: OpSpec, source: Value, element) -> Value:
        return self._convert(spec, source, element, {})

    # ---- views and memory ----------------------------------------------------------------------

    def tensor_view(self, base: Value, shape: Sequence[Union[int, Value]],
                    strides: Sequence[Union[int, Value]]) -> Value:
        """make_tensor_view: each dim/stride is an int (static) or a scalar integer Value (dynamic,
        `?` in the type)."""
        pointer = _tile_type(base, "tensor view base").element
        if not isinstance(pointer, PointerType):
            raise BuilderError(f"a tensor view needs a pointer base, got {base.type}")
        if len(shape) != len(strides):
            raise BuilderError(f"tensor view shape {len(shape)}-d but strides {len(strides)}-d")
        view_type = TensorViewType(pointer.pointee,
                                   tuple(None if isinstance(d, Value) else int(d) for d in shape),
                                   tuple(None if isinstance(s, Value) else int(s) for s in strides),
                                   pointer.ptr_attr)
        dynamic_shape = [d for d in shape if isinstance(d, Value)]
        dynamic_strides = [s for s in strides if isinstance(s, Value)]
        return self.make_tensor_view(base, dynamic_shape, dynamic_strides, result_types=[view_type])

    def partition_view(self, view: Value, tile_shape: Sequence[int], padding_value=None,
                       dim_map: Optional[Sequence[int]] = None) -> Value:
        """make_partition_view with tiles of `tile_shape` (dim_map defaults to the identity)."""
        if not isinstance(view.type, TensorViewType):
            raise BuilderError(f"a partition view needs a tensor view, got {view.type}")
        if isinstance(padding_value, str):
            padding_value = E.PaddingValue.from_keyword(padding_value)
        dim_map = tuple(range(len(tile_shape))) if dim_map is None else tuple(dim_map)
        view_type = PartitionViewType(tuple(tile_shape), view.type, dim_map, padding_value)
        return self.make_partition_view(view, result_types=[view_type])

    def load(self, view: Value, index: Sequence[Value], token: Optional[Value] = None,
             ordering="weak", **attrs) -> Tuple[Value, Value]:
        """load_view_tko: (tile, result token)."""
        return self.load_view_tko(view, list(index), token, memory_ordering_semantics=ordering,
                                  **attrs)

    def store(self, tile: Value, view: Value, index: Sequence[Value],
              token: Optional[Value] = None, ordering="weak", **attrs) -> Value:
        """store_view_tko: the result token."""
        return self.store_view_tko(tile, view, list(index), token,
                                   memory_ordering_semantics=ordering, **attrs)

    # ---- regions -------------------------------------------------------------------------------

    @_builds
    def for_(self, spec: OpSpec, lower: Value, upper: Value, step: Value, init_values: Sequence[Value] = (),
             body: RegionBody = None, **attrs):
        """A counted loop. `body(builder, index, *carried)` returns the next carried values (the
        `continue` is added). Returns the loop's results (a Value, a tuple, or None)."""
        if body is None:
            raise BuilderError("for_ needs a body callback")
        arg_types = [lower.type] + [v.type for v in init_values]
        region = self._region_from(arg_types, body, spec)
        return self.op(spec.mnemonic, [lower, upper, step, list(init_values)], None, attrs, [region])

    @_builds
    def loop(self, spec: OpSpec, init_values: Sequence[Value] = (), body: RegionBody = None,
             result_types: Optional[Sequence[Type]] = None):
        """An unbounded loop: `body(builder, *carried)` must end in break/continue itself (it may
        return the next carried values for an implicit `continue`). Results default to the carried
        types."""
        region = self._region_from([v.type for v in init_values], body, spec)
        types = [v.type for v in init_values] if result_types is None else list(result_types)
        return self.op(spec.mnemonic, [list(init_values)], types, {}, [region])

    @_builds
    def if_(self, spec: OpSpec, condition: Value, then: RegionBody, else_: Optional[RegionBody] = None,
            result_types: Optional[Sequence[Type]] = None):
        """Two-way branch. `then(builder)` / `else_(builder)` return the values they yield; the
        results take the then-branch's types unless `result_types` is given."""
        then_region, then_builder = self.region()
        yielded = list(then(then_builder) or ())
        if not then_builder.block.ops or not then_builder.block.ops[-1].spec.terminator:
            then_builder.op(closing_terminator(spec.mnemonic).mnemonic, [yielded])
        regions = [then_region]
        if else_ is not None:
            regions.append(self._region_from((), else_, spec))
        types = [v.type for v in yielded] if result_types is None else list(result_types)
        return self.op(spec.mnemonic, [condition], types, {}, regions)

    def _combiner(self, spec: OpSpec, operands: Sequence[Value], dim: int, identities,
                  combine: RegionBody, **attrs):
        elements = [_tile_type(v, f"{spec.mnemonic} operand").element for v in operands]
        if len(identities) != len(operands):
            raise BuilderError(f"{spec.mnemonic}: {len(operands)} operands but {len(identities)} "
                               f"identities")
        arg_types = []
        for element in elements:
            arg_types += [TileType((), element)] * 2  # (lhs, rhs) per operand
        region = self._region_from(arg_types, combine, spec)
        identities = tuple(typed_attr(v, e) for v, e in zip(identities, elements))
        return self.op(spec.mnemonic, [list(operands)], None,
                       {"dim": dim, "identities": identities, **attrs}, [region])

    @_builds
    def reduce(self, spec: OpSpec, operands: Sequence[Value], dim: int, identities: Sequence,
               combine: RegionBody):
        """Reduce along `dim`. `combine(builder, lhs0, rhs0, lhs1, rhs1, ...)` returns one value per
        operand; identities are numbers (or typed attributes)."""
        return self._combiner(spec, operands, dim, identities, combine)

    @_builds
    def scan(self, spec: OpSpec, operands: Sequence[Value], dim: int, identities: Sequence,
             combine: RegionBody, reverse: bool = False):
        return self._combiner(spec, operands, dim, identities, combine, reverse=reverse)


def _groups(spec: OpSpec, positional: Sequence, keywords: dict) -> dict:
    """Operand groups from positional operands (declaration order) and operand-named keywords
    (removed from `keywords`, which keeps the attributes)."""
    if len(positional) > len(spec.operands):
        raise BuilderError(f"{spec.mnemonic} takes at most {len(spec.operands)} operand groups "
                           f"({', '.join(o.name for o in spec.operands)}), got {len(positional)}")
    groups = {o.name: value for o, value in zip(spec.operands, positional)}
    for operand in spec.operands:
        if operand.name in keywords:
            if operand.name in groups:
                raise BuilderError(f"{spec.mnemonic}: operand {operand.name} given twice")
            groups[operand.name] = keywords.pop(operand.name)
    for operand in spec.operands:
        if operand.name not in groups and operand.arity is Arity.ONE:
            raise BuilderError(f"{spec.mnemonic}: missing operand {operand.name}")
    return groups


# ---------------------------------------------------------------------------------------------------
# Modules and entries

DEFAULT_HINTS = OptimizationHintsAttr((("default", DictionaryAttr(())),))


def new_module(version=MAX_VERSION, producer: Optional[str] = None) -> Module:
    """An empty module for `version` (a Version or \"13.4\"); `tilebc.dump(module)` writes it."""
    return Module(version=Version.parse(version), producer=producer)


def new_function(module: Module, name: str, arg_types: Sequence[Type],
                 hints: Optional[OptimizationHintsAttr] = None) -> Builder:
    """Add an entry to `module` and return a builder for its body."""
    block = Block()
    block.args = [Value(t, block, i) for i, t in enumerate(arg_types)]
    module.functions.append(Function(name, FunctionType(tuple(arg_types)), block, hints))
    return Builder(block, module.version)


def module_entry(module: Module, name: str, arg_types: Sequence[Type],
                 hints: Optional[OptimizationHintsAttr] = DEFAULT_HINTS) -> Builder:
    """`new_function` with cuTile's default hints (`optimization_hints=<default = {}>`)."""
    return new_function(module, name, arg_types, hints)
