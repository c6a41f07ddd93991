"""What decides a view access's vector width (ld/st.v2/v4): the view's divisibility facts, read
from the IR, so that a value's producer can know, before the store's view is lowered, that the
store will take vectors (a permute then makes its result in Blocked)."""
from __future__ import annotations

from tilebc.ir.types import PartitionViewType, TensorViewType, TileType
from tilebc.ops.enums import MemoryOrderingSemantics
from tilebc.ops.table import by_mnemonic

from . import dtypes
from .anchors import BROADCASTS, KEEPS, LITERAL, OFFSETS, _ROLES, divisor, flow_is_layout_free
from .common import SCOPE, SubView, TensorView, most_elements


def qualifiers(op, *, store: bool) -> str:
    """ld/st memory-ordering qualifiers for the op's ordering and scope attributes."""
    ordering = op.attrs.get("memory_ordering_semantics")
    scope = SCOPE.get(op.attrs.get("memory_scope"), "gpu")
    if ordering in (None, MemoryOrderingSemantics.WEAK):
        return ""
    if ordering is MemoryOrderingSemantics.RELAXED:
        return f".relaxed.{scope}"
    if ordering is MemoryOrderingSemantics.ACQUIRE:
        return f".acquire.{scope}"
    if ordering is MemoryOrderingSemantics.RELEASE:
        return f".release.{scope}"
    return f".{'release' if store else 'acquire'}.{scope}"  # acq_rel on a plain load/store


def view_dims(view_type):
    """The tensor dim each tile dim of a view runs along."""
    return list(getattr(view_type, "dim_map", None) or range(len(view_type.tile_shape)))


def divisibility(lw, op) -> tuple[int, list[int], list[int]]:
    """A make_tensor_view's (base alignment, shape divisors, stride divisors): powers of two
    known from static sizes and `assume div_by` (the IR alone, so they are known before the view
    is lowered)."""
    view_type: TensorViewType = op.results[0].type

    def power(static, values):
        if static is not None:
            return static & -static if static else 1 << 30
        return divisor(lw, next(values))
    shape_values = iter(op.operands["dynamicShape"])
    stride_values = iter(op.operands["dynamicStrides"])
    shape_div = [power(d, shape_values) for d in view_type.shape]
    stride_div = [power(d, stride_values) for d in view_type.strides]
    return divisor(lw, op.operands["base"]), shape_div, stride_div


VECTOR_TYPES = ("f16", "bf16", "f32", "f64", "i32", "i64")


def vector_width(lw, op, view: SubView, tile_shape, element, quals: str) -> int:
    """Elements per vector access (ld/st.v2/v4, at most 16 bytes) that this view access is
    proven to allow: a partition view whose last tile dim runs along a stride-1 tensor dim, an
    aligned base, other strides multiples of the vector, and a blocked layout that fits the
    tile (1: scalar accesses)."""
    vt = view.type
    tensor = view.tensor
    if not isinstance(vt, PartitionViewType) or quals or tensor.stride_div is None:
        return 1
    if dtypes.name_of(element) not in VECTOR_TYPES or not tile_shape:
        return 1
    size = dtypes.byte_size(element)
    dims = view_dims(vt)
    last = dims[-1]
    if tensor.type.strides[last] != 1:
        return 1
    count = 1
    for d in tile_shape:
        count *= d
    vec = min(most_elements(element), tile_shape[-1])
    while vec > 1 and (count % (vec * lw.T) or tensor.base_align % (vec * size)
                       or any(tensor.stride_div[d] % vec for d in dims if d != last)):
        vec //= 2
    return vec


# how a view store's view is made, for planned_store_width
PARTITION_VIEW, TENSOR_VIEW = "partition view", "tensor view"
VIEW_MAKERS = by_mnemonic({"make_partition_view": PARTITION_VIEW, "make_tensor_view": TENSOR_VIEW},
                           "view makers of planned stores")


def planned_store_width(lw, op) -> int:
    """vector_width of a view store (`op`) from the IR, before its view is lowered: a partition
    view of a make_tensor_view (1 for views made any other way)."""
    view = lw.forward.get(op.operands["view"], op.operands["view"])
    maker = view.owner
    if VIEW_MAKERS.get(getattr(maker, "name", None)) != PARTITION_VIEW:
        return 1
    tensor_value = lw.forward.get(maker.operands["tensor_view"], maker.operands["tensor_view"])
    if VIEW_MAKERS.get(getattr(tensor_value.owner, "name", None)) != TENSOR_VIEW:
        return 1
    base_align, shape_div, stride_div = divisibility(lw, tensor_value.owner)
    tensor = TensorView(tensor_value.type, None, [], [], None, base_align, shape_div, stride_div)
    tile = op.operands["tile"].type
    return vector_width(lw, op, SubView(view.type, tensor), tile.shape, tile.element,
                        qualifiers(op, store=True))


def flow_vector_width(lw, value) -> int:
    """The vector width (elements) with which every view store that `value`'s flow reaches can
    store it, where that flow handles any layout (anchors.flow_is_layout_free): `value` may then
    be made in Blocked(vec) and stored with st.v. 1 when there is no such store or width."""
    stores = []
    if not flow_is_layout_free(lw, value, stores=stores) or not stores:
        return 1
    return min(planned_store_width(lw, store) for store in stores)




# ---- vector accesses through pointer tiles (load_ptr_tko / store_ptr_tko) ---------------------
#
# A pointer tile made as base + row * stride + (k + iota) - a gather of whole rows - points at
# runs of consecutive elements along its last dimension. `run_facts` proves that from the IR
# (as Triton's axis analysis does), and `pointer_layout` then chooses Blocked(vec) for every
# tile of that shape in the function, so each access moves vec elements in one ld/st.v.

class RunFacts:
    """Along a tile's last dim, in aligned groups: `contig`, the largest power of two c with
    v[j + i] = v[j] + i inside every group of c (pointers: in elements); `const`, the same for
    v[j + i] = v[j]; `div`, a power of two dividing v[j] at the start of every group of `contig`
    (every element when contig is 1; pointers: in bytes)."""

    __slots__ = ("contig", "const", "div")

    def __init__(self, contig: int, const: int, div: int):
        self.contig, self.const, self.div = contig, const, div

    def runs_of(self, length: int) -> "RunFacts":
        """The facts with contig cut to `length`: group starts come `length` apart."""
        if length >= self.contig:
            return self
        return RunFacts(length, self.const, min(self.div, length))


_UNKNOWN_DIV = 1 << 30
# What the ops that run_facts and pointer_layout follow do, beside anchors' roles (splats,
# reshape/assume, broadcast, offset): index arithmetic, iota, and counted loops.
_ADD, _MUL, _EXTEND, _COMPARE, _LOGIC, _IOTA, _LOOP, _CARRY = (
    "add", "multiply", "extend", "compare", "logic", "index", "loop", "carry")
_INDEX_OPS = by_mnemonic({
    "addi": _ADD, "muli": _MUL, "exti": _EXTEND, "trunci": _EXTEND, "cmpi": _COMPARE,
    "andi": _LOGIC, "ori": _LOGIC, "iota": _IOTA, "for": _LOOP, "continue": _CARRY},
    "pointer run facts")


def _rule(op):
    """The op's kind for run_facts: an anchors role (LITERAL, KEEPS, BROADCASTS, OFFSETS) or an
    _INDEX_OPS kind."""
    return _ROLES.get(op.name) or _INDEX_OPS.get(op.name)


def _pow2(value: int) -> int:
    return value & -value if value else _UNKNOWN_DIV


def run_facts(lw, value, depth: int = 0) -> RunFacts:
    """The RunFacts of an integer, i1 or pointer tile (nothing known: 1, 1, 1)."""
    key = ("run facts", lw.forward.get(value, value))
    if key not in lw._cache:
        lw._cache[key] = _run_facts(lw, key[1], depth)
    return lw._cache[key]


def _run_facts(lw, value, depth: int) -> RunFacts:
    from .folding import uniform_int
    nothing = RunFacts(1, 1, 1)
    if not isinstance(value.type, TileType):
        return nothing
    shape = tuple(value.type.shape)
    length = shape[-1] if shape else 1
    op = value.owner
    if not hasattr(op, "attrs"):  # a block argument: a loop's induction variable, or unknown
        return RunFacts(1, 1, _induction_div(lw, value) if length == 1 else 1)
    if depth > 24:
        return nothing
    rule = _rule(op)
    if rule == _IOTA:
        return RunFacts(length, 1, _UNKNOWN_DIV)
    if rule == LITERAL:
        if not op.attrs["value"].is_splat:
            return nothing
        integer = value.type.element.name != "i1" and not getattr(value.type.element,
                                                                  "is_float", False)
        constant = uniform_int(lw, value) if integer else None
        return RunFacts(1, length, _pow2(constant) if constant is not None else 1)
    if rule in (KEEPS, BROADCASTS):
        source = op.operand_values[0]
        facts = run_facts(lw, source, depth + 1)
        div = max(facts.div, divisor(lw, value)) if op.spec.forwards else facts.div
        if source.type.num_elements == 1 or (rule == BROADCASTS and source.type.shape[-1] == 1):
            return RunFacts(1, length, div)  # one value along the last dim
        if tuple(source.type.shape)[-1:] != shape[-1:]:
            return nothing
        return RunFacts(facts.contig, facts.const, div)
    if rule not in (_EXTEND, _ADD, OFFSETS, _MUL, _LOGIC, _COMPARE):
        return nothing
    operands = [run_facts(lw, v, depth + 1) for v in op.operand_values]
    if rule == _EXTEND:
        return operands[0]
    if rule in (_ADD, OFFSETS):
        a, b = operands
        scale = dtypes.byte_size(value.type.element.pointee) if rule == OFFSETS else 1
        contig = max(min(a.contig, b.const), min(b.contig, a.const))
        a, b = a.runs_of(contig), b.runs_of(contig)
        return RunFacts(contig, min(a.const, b.const), min(a.div, b.div * scale))
    if rule == _MUL:
        a, b = operands
        for facts, other in ((a, op.operand_values[1]), (b, op.operand_values[0])):
            if uniform_int(lw, other) == 1:
                return facts
        a, b = a.runs_of(1), b.runs_of(1)  # divisors of every element, not of run starts
        return RunFacts(1, min(a.const, b.const), min(a.div * b.div, _UNKNOWN_DIV))
    if rule == _LOGIC:
        a, b = operands
        return RunFacts(1, min(a.const, b.const), 1)
    if rule == _COMPARE:
        return RunFacts(1, _compare_const(op, *operands), 1)
    return nothing


def _induction_div(lw, value) -> int:
    """A power of two dividing a block argument: a `for` loop's induction variable whose lower
    bound and step are constants (lower + k * step), else what `assume` says (1)."""
    from .folding import uniform_int
    key = ("induction variables",)
    if key not in lw._cache:  # the first argument of each counted loop's body -> the loop
        lw._cache[key] = {id(o.regions[0].blocks[0].args[0]): o for o in lw.ops
                          if _INDEX_OPS.get(o.name) == _LOOP and o.regions
                          and o.regions[0].blocks and o.regions[0].blocks[0].args}
    loop = lw._cache[key].get(id(value))
    if loop is None:
        return divisor(lw, value)
    lower, step = (uniform_int(lw, loop.operands[name]) for name in ("lowerBound", "step"))
    if lower is None or step is None:
        return 1
    return min(_pow2(lower), _pow2(step))


def _compare_const(op, a: RunFacts, b: RunFacts) -> int:
    """Groups over which lhs `predicate` rhs is constant: both sides constant; or a run of
    consecutive values starting at a multiple of g against a constant multiple of g, where the
    predicate cannot flip inside the run (x + i < c iff x < c; c > x + i iff c > x; and the
    negations)."""
    from tilebc.ops.enums import ComparisonPredicate as P
    best = min(a.const, b.const)
    predicate = op.attrs.get("comparison_predicate")
    if predicate in (P.LESS_THAN, P.GREATER_THAN_OR_EQUAL):
        run, other = a, b
    elif predicate in (P.GREATER_THAN, P.LESS_THAN_OR_EQUAL):
        run, other = b, a
    else:
        return best
    group = min(run.contig, run.div, other.const, other.div)
    return max(best, group if group > 1 else 1)


def pointer_layout(lw, shape):
    """Blocked(vec) for every tile of `shape` in the function, when every load_ptr_tko and
    store_ptr_tko of that shape moves runs of vec elements (run_facts: consecutive, aligned,
    masked as a whole) and every op that touches such a tile takes any layout; else None."""
    key = ("pointer layouts",)
    if key not in lw._cache:
        lw._cache[key] = _pointer_layouts(lw)
    return lw._cache[key].get(tuple(shape))


def pointer_access_width(lw, op) -> int:
    """Elements per ld/st.v that a load_ptr_tko / store_ptr_tko may use (1: scalar)."""
    from .anchors import POINTER_LOADS, _ROLES
    loads = _ROLES.get(op.name) == POINTER_LOADS
    pointers = op.operands["source" if loads else "destination"]
    element = pointers.type.element.pointee
    if dtypes.name_of(element) not in VECTOR_TYPES or qualifiers(op, store=not loads):
        return 1
    size = dtypes.byte_size(element)
    facts = run_facts(lw, pointers)
    vec = min(most_elements(element), facts.contig, max(1, facts.div // size))
    mask = op.operands.get("mask")
    if mask is not None:
        vec = min(vec, run_facts(lw, mask).const)
    return vec if vec >= 2 else 1


def _pointer_layouts(lw) -> dict:
    from .anchors import POINTER_LOADS, POINTER_STORES, _ROLES
    from .layout import Blocked
    if lw.T % 32:
        return {}
    widths: dict[tuple, list[int]] = {}
    for op in lw.ops:
        if op in lw.dead or _ROLES.get(op.name) not in (POINTER_LOADS, POINTER_STORES):
            continue
        shape = tuple(op.operands["source" if _ROLES.get(op.name) == POINTER_LOADS
                                  else "destination"].type.shape)
        if shape:
            widths.setdefault(shape, []).append(pointer_access_width(lw, op))
    chosen = {}
    for shape, found in widths.items():
        vec, count = min(found), 1
        for extent in shape:
            count *= extent
        while vec > 1 and (count % (vec * lw.T) or shape[-1] % vec):
            vec //= 2
        if vec < 2 or not _closed(lw, shape):
            continue
        chosen[shape] = Blocked(count, lw.T, vec)
    return chosen


def _closed(lw, shape) -> bool:
    """Every live op that reads or makes a tile of `shape` takes it in any layout."""
    from .anchors import (BROADCASTS, KEEPS, LITERAL, OFFSETS, POINTER_LOADS, POINTER_STORES,
                          REDUCES, _ROLES, _layout_free)

    def ours(value):
        return isinstance(value.type, TileType) and tuple(value.type.shape) == shape

    for op in lw.ops:
        if op in lw.dead:
            continue
        results = [v for v in op.results if ours(v)]
        operands = [v for v in op.operand_values if ours(v)]
        if not results and not operands:
            continue
        role, kind = _ROLES.get(op.name), _INDEX_OPS.get(op.name)
        if role in (OFFSETS, POINTER_LOADS, POINTER_STORES) or kind in (_LOOP, _CARRY) \
                or (role == REDUCES and not results):
            continue
        if kind == _IOTA or _layout_free(op):
            continue
        if role == LITERAL and op.attrs["value"].is_splat:
            continue
        source = op.operand_values[0] if op.operand_values else None
        if role in (KEEPS, BROADCASTS) and results and source is not None \
                and (source.type.num_elements == 1 or (role == KEEPS and ours(source))):
            continue  # a scalar spread over the shape (one register), or an assume
        return False
    return True
