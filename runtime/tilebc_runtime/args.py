"""Kernel signatures read from bytecode, and launch arguments checked and packed against them.

cuTile's calling conventions (cutile_python_v1/v2) pass an array as its base pointer, then one
shape value per dimension, then one stride value per dimension (in elements), all of the array's
index type (i32 or i64). The entry only shows flat parameters, so an array is recognised where a
`make_tensor_view` is built on a pointer parameter and the 2*rank parameters after it are integers
of one type (its tensor_view type gives static dims and strides), or, for arrays used only through
raw pointers, where the pointer is followed by an even run of integers assumed non-negative. Top-level `assume` ops on a
parameter are facts the kernel relies on (`bounded<0, ?>` strides, `div_by<16>` shapes or base
address), so they are checked here, before anything is launched.

Nothing in this module calls CUDA: device questions go through the callables the caller passes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from tilebc.ir.attrs import BoundedAttr, DivByAttr
from tilebc.ir.module import Function, Op, Value
from tilebc.ir.types import ElementType, PointerType, TensorViewType, TileType
from tilebc.ops.table import by_mnemonic

from .launch_errors import ArgumentError, LaunchError  # noqa: F401  (re-exported)

# Array element dtypes accepted for a pointee type. Tile IR integers are signless, so both
# signednesses of a width are accepted.
ARRAY_DTYPES: Dict[str, Tuple[str, ...]] = {
    "i1": ("bool",), "i8": ("int8", "uint8"), "i16": ("int16", "uint16"),
    "i32": ("int32", "uint32"), "i64": ("int64", "uint64"), "f16": ("float16",),
    "bf16": ("bfloat16",), "f32": ("float32",), "tf32": ("float32",), "f64": ("float64",),
    "f8E4M3FN": ("float8_e4m3fn",), "f8E5M2": ("float8_e5m2",), "f8E8M0FNU": ("float8_e8m0fnu",),
}

# Element types a CUDA Array Interface typestr cannot name (numpy has no such types). A CAI array
# of these arrives with a raw typestr of the same size; see `_raw_target`.
RAW_ONLY = ("bf16", "f8E4M3FN", "f8E5M2", "f8E8M0FNU")
RAW_KINDS = "Vui"  # typestr kinds that only say "so many bytes": void, unsigned, signed
# Ops that tell how a kernel reads its pointer parameters: views made over one, pointers made
# from integers.
_ROLES = by_mnemonic({"make_tensor_view": "view", "int_to_ptr": "pointer"}, "argument roles")

# How a scalar parameter is passed: the numpy type (by name) of its kernel-parameter bytes.
# numpy is imported by the functions that pack arguments, so a compile never loads it.
_INT_PARAM = {"i1": "bool_", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64"}
_FLOAT_PARAM = {"f16": "float16", "f32": "float32", "f64": "float64"}


@dataclass(frozen=True)
class Fact:
    """An `assume` predicate on a parameter: bounded<lower, upper> or div_by<divisor>."""

    lower: Optional[int] = None
    upper: Optional[int] = None
    divisor: Optional[int] = None

    def violated_by(self, value: int) -> Optional[str]:
        if self.divisor is not None and value % self.divisor:
            return f"must be divisible by {self.divisor} (the kernel assumes div_by<{self.divisor}>)"
        if (self.lower is not None and value < self.lower) or \
                (self.upper is not None and value > self.upper):
            bounds = f"bounded<{_bound(self.lower)}, {_bound(self.upper)}>"
            return f"must be within [{_bound(self.lower)}, {_bound(self.upper)}] (the kernel assumes {bounds})"
        return None


def _bound(value: Optional[int]) -> str:
    return "?" if value is None else str(value)


@dataclass(frozen=True)
class Slot:
    """One flat kernel parameter."""

    index: int
    element: Any  # ElementType, or PointerType for pointers
    facts: Tuple[Fact, ...] = ()

    @property
    def type_name(self) -> str:
        return str(self.element)


@dataclass(frozen=True)
class ScalarParam:
    slot: Slot

    @property
    def slots(self) -> Tuple[Slot, ...]:
        return (self.slot,)

    def describe(self) -> str:
        return self.slot.type_name


@dataclass(frozen=True)
class PointerParam:
    """A pointer parameter with no array metadata after it: an address or an array's data."""

    slot: Slot

    @property
    def slots(self) -> Tuple[Slot, ...]:
        return (self.slot,)

    @property
    def element(self) -> ElementType:
        return self.slot.element.pointee

    def describe(self) -> str:
        return self.slot.type_name


@dataclass(frozen=True)
class ArrayParam:
    """An array passed as base pointer, shape values and stride values (in elements)."""

    pointer: Slot
    shape: Tuple[Slot, ...]
    strides: Tuple[Slot, ...]
    static_shape: Tuple[Optional[int], ...]
    static_strides: Tuple[Optional[int], ...]

    @property
    def slots(self) -> Tuple[Slot, ...]:
        return (self.pointer,) + self.shape + self.strides

    @property
    def element(self) -> ElementType:
        return self.pointer.element.pointee

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def index_type(self) -> str:
        return str(self.shape[0].element) if self.shape else "i32"

    def describe(self) -> str:
        dims = "x".join("?" if d is None else str(d) for d in self.static_shape)
        return f"array<{dims + 'x' if dims else ''}{self.element}, index {self.index_type}>"


@dataclass(frozen=True)
class ListParam:
    """cuTile's list-of-arrays parameter: a pointer to an i64 table with one row per array
    (base address, shape..., strides... in elements) and the number of rows. `element` is the
    arrays' element type when the kernel shows it (its `int_to_ptr` ops), else None."""

    table: Slot
    count: Slot
    rank: int
    element: Optional[ElementType]

    @property
    def slots(self) -> Tuple[Slot, ...]:
        return (self.table, self.count)

    def describe(self) -> str:
        dims = "x".join("?" * self.rank)
        return f"list<array<{dims}x{self.element or '?'}>>"


Param = Any  # ScalarParam | PointerParam | ArrayParam | ListParam


@dataclass(frozen=True)
class Signature:
    entry: str
    params: Tuple[Param, ...]
    slot_count: int

    def __str__(self) -> str:
        inner = ", ".join(f"{i}: {p.describe()}" for i, p in enumerate(self.params))
        return f"{self.entry}({inner})"


def _param_index(function: Function, value: Value) -> Optional[int]:
    """The parameter a value is, looking through ops that forward an operand (assume)."""
    while isinstance(value.owner, Op) and value.owner.spec.forwards:
        value = value.owner.operands[value.owner.spec.forwards]
    if value.owner is function.body:
        return value.index
    return None


def infer_signature(function: Function) -> Signature:
    """The launch signature of an entry: arrays grouped as cuTile lays them out, facts attached."""
    types = [arg.type for arg in function.args]
    for index, kind in enumerate(types):
        if not (isinstance(kind, TileType) and kind.rank == 0):
            raise LaunchError(f"entry {function.name!r}: parameter {index} has type {kind}; only "
                              "scalar tiles (numbers and pointers) can be kernel parameters")
    facts: Dict[int, List[Fact]] = {}
    for op in function.body.ops:  # top level only: these assumes hold for the whole kernel
        if not op.spec.forwards:
            continue
        index = _param_index(function, op.operands[op.spec.forwards])
        predicate = op.attrs.get("predicate")
        if index is None:
            continue
        if isinstance(predicate, BoundedAttr):
            facts.setdefault(index, []).append(Fact(lower=predicate.lower, upper=predicate.upper))
        elif isinstance(predicate, DivByAttr) and predicate.every is None:
            facts.setdefault(index, []).append(Fact(divisor=predicate.divisor))
    slots = [Slot(i, t.element, tuple(facts.get(i, ()))) for i, t in enumerate(types)]

    views: Dict[int, TensorViewType] = {}
    for op in function.walk():
        if _ROLES.get(op.name) == "view":
            base = _param_index(function, op.operands["base"])
            if base is not None and base not in views and _is_array_layout(function, op, base, types):
                views[base] = op.results[0].type

    lists = _list_tables(function, types)
    params: List[Param] = []
    index = 0
    while index < len(slots):
        slot = slots[index]
        if index in lists:
            rank, element = lists[index]
            params.append(ListParam(slot, slots[index + 1], rank, element))
            index += 2
        elif isinstance(slot.element, PointerType) and index in views:
            view = views[index]
            rank = view.rank
            params.append(ArrayParam(slot, tuple(slots[index + 1:index + 1 + rank]),
                                     tuple(slots[index + 1 + rank:index + 1 + 2 * rank]),
                                     tuple(view.shape), tuple(view.strides)))
            index += 1 + 2 * rank
        elif isinstance(slot.element, PointerType) and (rank := _assumed_rank(slots, index)):
            params.append(ArrayParam(slot, tuple(slots[index + 1:index + 1 + rank]),
                                     tuple(slots[index + 1 + rank:index + 1 + 2 * rank]),
                                     (None,) * rank, (None,) * rank))
            index += 1 + 2 * rank
        elif isinstance(slot.element, PointerType):
            params.append(PointerParam(slot))
            index += 1
        else:
            params.append(ScalarParam(slot))
            index += 1
    return Signature(function.name, tuple(params), len(slots))


def _list_tables(function: Function, types) -> Dict[int, Tuple[int, Optional[ElementType]]]:
    """Parameters that are list-of-arrays tables -> (rank, element type or None).

    cuTile views such a table as `tensor_view<?xC x i64, strides=[C,1]>` with the row count taken
    from the next parameter and C = 1 + 2 * rank columns."""
    found: Dict[int, int] = {}
    for op in function.walk():
        if _ROLES.get(op.name) != "view":
            continue
        base = _param_index(function, op.operands["base"])
        view = op.results[0].type
        if base is None or base + 1 >= len(types) or view.rank != 2:
            continue
        pointer, count = types[base].element, types[base + 1].element
        columns = view.shape[1]
        if not (isinstance(pointer, PointerType) and pointer.pointee.name == "i64"
                and isinstance(count, ElementType) and count.is_integer
                and view.shape[0] is None and columns is not None and columns >= 3
                and columns % 2 == 1 and tuple(view.strides) == (columns, 1)):
            continue
        rows = op.operands.get("dynamicShape") or ()
        if len(rows) == 1 and _param_index(function, rows[0]) == base + 1:
            found[base] = (columns - 1) // 2
    pointees = {op.results[0].type.element.pointee for op in function.walk()
                if _ROLES.get(op.name) == "pointer"}
    element = next(iter(pointees)) if len(pointees) == 1 and len(found) == 1 else None
    return {base: (rank, element) for base, rank in found.items()}


def _assumed_rank(slots: List[Slot], base: int) -> int:
    """Rank of an array used only through raw pointers (no tensor view): cuTile still passes its
    shape and strides, and marks each non-negative with `assume bounded<0, ?>`; a run of such
    integers of one type right after the pointer, of even length, is taken as shape then strides."""
    run = 0
    for slot in slots[base + 1:]:
        if not (isinstance(slot.element, ElementType) and slot.element.is_integer
                and slot.element == slots[base + 1].element
                and any(f.lower is not None and f.lower >= 0 for f in slot.facts)):
            break
        run += 1
    return run // 2 if run % 2 == 0 else 0


def _is_array_layout(function: Function, op: Op, base: int, types) -> bool:
    """Whether the 2*rank parameters after `base` are this view's shape then strides."""
    view = op.results[0].type
    rank = view.rank
    trailing = types[base + 1:base + 1 + 2 * rank]
    if len(trailing) != 2 * rank or not all(isinstance(t.element, ElementType) and t.element.is_integer
                                            for t in trailing):
        return False
    if len({t.element for t in trailing}) > 1:
        return False
    # Dynamic dims must come from the matching parameter (static ones still get a slot).
    dynamic_shape = iter(op.operands.get("dynamicShape") or ())
    for dim, static in enumerate(view.shape):
        if static is None and _param_index(function, next(dynamic_shape)) != base + 1 + dim:
            return False
    dynamic_strides = iter(op.operands.get("dynamicStrides") or ())
    for dim, static in enumerate(view.strides):
        if static is None and _param_index(function, next(dynamic_strides)) != base + 1 + rank + dim:
            return False
    return True


# -- array views ----------------------------------------------------------------------------------

DLPACK_CPU, DLPACK_CUDA, DLPACK_CUDA_HOST, DLPACK_CUDA_MANAGED = 1, 2, 3, 13


@dataclass
class ArrayView:
    """What a launch needs to know about an array argument."""

    ptr: int
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]        # in elements
    dtype: np.dtype
    device_id: Optional[int]        # None: ask the driver (CUDA Array Interface pointers)
    readonly: bool
    owner: Any                      # kept alive until the stream has passed the kernel
    producer_stream: Optional[int] = None  # CAI `stream`: the consumer must wait on it
    raw_typestr: Optional[str] = None  # CAI typestr when it is all we know of the dtype

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    def byte_extent(self) -> Optional[Tuple[int, int]]:
        """[first byte, last byte + 1) touched by the array, or None when it is empty."""
        if any(dim == 0 for dim in self.shape):
            return None
        low = high = 0
        for dim, stride in zip(self.shape, self.strides):
            reach = (dim - 1) * stride
            low, high = low + min(0, reach), high + max(0, reach)
        return self.ptr + low * self.itemsize, self.ptr + (high + 1) * self.itemsize


def _contiguous_strides(shape: Sequence[int]) -> Tuple[int, ...]:
    strides, step = [], 1
    for dim in reversed(shape):
        strides.append(step)
        step *= max(dim, 1)
    return tuple(reversed(strides))


def is_array_like(obj: Any) -> bool:
    return hasattr(obj, "__cuda_array_interface__") or hasattr(obj, "__dlpack__")


def view_of(obj: Any, what: str, dlpack_stream: int) -> ArrayView:
    """An ArrayView of a DLPack or CUDA Array Interface object (DLPack preferred when both).

    `dlpack_stream` is the consumer stream in DLPack's convention (1: legacy default stream);
    the producer orders its work before that stream as the DLPack protocol requires.
    A cuda.core StridedMemoryView is read directly; a bare cuda.core Buffer is refused (it has no
    dtype or shape: wrap it with `StridedMemoryView.from_buffer(buffer, shape, dtype=...)`)."""
    kind = type(obj)
    if kind.__module__.startswith("cuda.core"):
        if kind.__name__ == "StridedMemoryView":
            return _view_from_strided(obj, what)
        if kind.__name__ == "Buffer":
            raise ArgumentError(f"{what}: a cuda.core Buffer is untyped bytes; give it a dtype and "
                                "shape with cuda.core.utils.StridedMemoryView.from_buffer(buffer, "
                                "shape, dtype=...) and pass that view")
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return _view_from_dlpack(obj, what, dlpack_stream)
    if hasattr(obj, "__cuda_array_interface__"):
        return _view_from_cai(obj, what)
    raise ArgumentError(f"{what}: expected an array with __dlpack__ or __cuda_array_interface__, "
                        f"got {type(obj).__name__}")


def _view_from_dlpack(obj: Any, what: str, dlpack_stream: int) -> ArrayView:
    import numpy as np
    device_type, device_id = obj.__dlpack_device__()
    if device_type == DLPACK_CPU:
        raise ArgumentError(f"{what}: {type(obj).__name__} is a host (CPU) array; copy it to the "
                            "GPU first")
    if device_type not in (DLPACK_CUDA, DLPACK_CUDA_HOST, DLPACK_CUDA_MANAGED):
        raise ArgumentError(f"{what}: DLPack device type {device_type} is not a CUDA device")
    from cuda.core.utils import StridedMemoryView
    try:
        view = StridedMemoryView.from_dlpack(obj, stream_ptr=dlpack_stream)
    except (TypeError, ValueError, BufferError, RuntimeError) as error:
        if type(obj).__module__ == "torch":  # torch exports no float8 / float4 through DLPack
            return _view_from_torch(obj, what, error)
        raise ArgumentError(f"{what}: cannot read its DLPack capsule ({error})") from error
    shape = tuple(int(d) for d in view.shape)
    strides = view.strides
    strides = _contiguous_strides(shape) if strides is None else tuple(int(s) for s in strides)
    owner_device = int(device_id) if device_type == DLPACK_CUDA else None
    return ArrayView(int(view.ptr), shape, strides, np.dtype(view.dtype), owner_device,
                     bool(view.readonly), (obj, view))


def _view_from_torch(tensor: Any, what: str, dlpack_error: Exception) -> ArrayView:
    """A torch CUDA tensor read from its own attributes, for the dtypes torch will not put in a
    DLPack capsule. The launch waits on torch's current stream, as DLPack's exchange would."""
    dtype = _declared_dtype(tensor)
    if dtype is None or not tensor.is_cuda:
        raise ArgumentError(f"{what}: cannot read its DLPack capsule ({dlpack_error})") from dlpack_error
    import sys
    torch = sys.modules["torch"]  # loaded: the tensor is one of its objects
    device_id = int(tensor.device.index if tensor.device.index is not None else torch.cuda.current_device())
    stream = int(torch.cuda.current_stream(device_id).cuda_stream)
    return ArrayView(int(tensor.data_ptr()), tuple(int(d) for d in tensor.shape),
                     tuple(int(s) for s in tensor.stride()), dtype, device_id, False, tensor,
                     producer_stream=stream or 1)  # 0 is torch's name for the legacy default stream


def _view_from_strided(view: Any, what: str) -> ArrayView:
    import numpy as np
    if not view.is_device_accessible:
        raise ArgumentError(f"{what}: the StridedMemoryView is host memory; copy it to the GPU first")
    shape = tuple(int(d) for d in view.shape)
    strides = view.strides  # in elements, None when C-contiguous
    strides = _contiguous_strides(shape) if strides is None else tuple(int(s) for s in strides)
    return ArrayView(int(view.ptr), shape, strides, np.dtype(view.dtype), int(view.device_id),
                     bool(view.readonly), view)


def _declared_dtype(obj: Any) -> Optional[np.dtype]:
    """The dtype an array object states besides its typestr (cupy's and torch's `.dtype`), or
    None when it has none we can read. torch dtypes are named like ml_dtypes' ("torch.bfloat16")."""
    import numpy as np
    try:
        declared = getattr(obj, "dtype", None)
    except Exception:  # a property that fails is no statement
        return None
    if declared is None:
        return None
    try:
        return np.dtype(declared)
    except (TypeError, ValueError):
        pass
    import ml_dtypes
    name = str(declared).rsplit(".", 1)[-1]
    found = getattr(ml_dtypes, name, None)
    if found is None:
        try:
            return np.dtype(name)
        except TypeError:
            return None
    try:
        return np.dtype(found)
    except TypeError:
        return None


def _raw_target(element: ElementType) -> Optional[np.dtype]:
    """The numpy dtype of `element` when a CAI raw typestr may stand for it."""
    import numpy as np
    if element.name not in RAW_ONLY:
        return None
    import ml_dtypes
    return np.dtype(getattr(ml_dtypes, ARRAY_DTYPES[element.name][0]))


def _view_from_cai(obj: Any, what: str) -> ArrayView:
    import numpy as np
    interface = obj.__cuda_array_interface__
    try:
        shape = tuple(int(d) for d in interface["shape"])
        dtype = np.dtype(interface["typestr"])
        ptr, readonly = interface["data"]
        version = int(interface.get("version", 0))
    except (KeyError, TypeError, ValueError) as error:
        raise ArgumentError(f"{what}: malformed __cuda_array_interface__ ({error!r})") from error
    if version > 3:
        raise ArgumentError(f"{what}: __cuda_array_interface__ version {version} is newer than 3")
    if interface.get("mask") is not None:
        raise ArgumentError(f"{what}: masked arrays (__cuda_array_interface__ 'mask') are not "
                            "supported")
    byte_strides = interface.get("strides")
    if byte_strides is None:
        strides = _contiguous_strides(shape)
    else:
        if any(int(s) % dtype.itemsize for s in byte_strides):
            raise ArgumentError(f"{what}: byte strides {tuple(byte_strides)} are not multiples of "
                                f"the element size {dtype.itemsize}")
        strides = tuple(int(s) // dtype.itemsize for s in byte_strides)
    if len(strides) != len(shape):
        raise ArgumentError(f"{what}: __cuda_array_interface__ has {len(shape)} dims but "
                            f"{len(strides)} strides")
    stream = interface.get("stream")
    if stream == 0:
        raise ArgumentError(f"{what}: __cuda_array_interface__ stream 0 is not allowed "
                            "(use 1 for the legacy default stream, 2 for per-thread)")
    typestr, raw = str(interface["typestr"]), None
    if dtype.kind in RAW_KINDS:  # bytes of some size: the object's own dtype may say more
        declared = _declared_dtype(obj)
        if declared is not None and declared.itemsize == dtype.itemsize:
            dtype = declared
        else:
            raw = typestr
    return ArrayView(int(ptr or 0), shape, strides, dtype, None, bool(readonly), obj,
                     None if stream is None else int(stream), raw)


# -- packing --------------------------------------------------------------------------------------

@dataclass
class PackedArgs:
    """Flat kernel parameters, ready for the driver, and what must outlive the launch."""

    values: List[Any] = field(default_factory=list)
    keep_alive: List[Any] = field(default_factory=list)
    producer_streams: List[int] = field(default_factory=list)


Upload = Callable[["np.ndarray"], Tuple[int, Any]]  # host table -> (device address, owner)


def pack_arguments(signature: Signature, args: Sequence[Any], *, device_id: int,
                   dlpack_stream: int, pointer_device: Callable[[int], int],
                   allow_overlap: bool = False, upload: Optional[Upload] = None) -> PackedArgs:
    """Check every argument against the signature and flatten it; raise ArgumentError before
    anything reaches the driver. `pointer_device(ptr)` answers which device owns a pointer
    (-1: host memory), for CUDA Array Interface arrays that do not say. `upload(table)` copies a
    list argument's i64 table to the device and returns (address, owner to keep alive)."""
    import numpy as np
    if len(args) != len(signature.params):
        signature = _arrays_at_pointers(signature, args) or signature
    if len(args) != len(signature.params):
        raise ArgumentError(f"{signature.entry}: expected {len(signature.params)} arguments "
                            f"({signature}), got {len(args)}")
    packed = PackedArgs()
    arrays: List[Tuple[str, ArrayView]] = []  # (argument label, view) for the overlap check
    tables: List[Tuple[int, Slot, np.ndarray, str]] = []  # list tables still to upload

    def hold(view: ArrayView, label: str) -> None:
        arrays.append((label, view))
        packed.keep_alive.append(view.owner)
        if view.producer_stream is not None and view.producer_stream not in packed.producer_streams:
            packed.producer_streams.append(view.producer_stream)

    for position, (param, arg) in enumerate(zip(signature.params, args)):
        what = f"{signature.entry}: argument {position} ({param.describe()})"
        views: List[Tuple[str, ArrayView]] = []
        roles = slot_roles(param)
        if isinstance(param, ArrayParam):
            view = _checked_view(arg, what, param.element, param.rank, device_id, dlpack_stream,
                                 pointer_device)
            _check_static_layout(param, view, what)
            values = [view.ptr, *view.shape, *view.strides]
            views.append((str(position), view))
        elif isinstance(param, ListParam):
            table, views = _list_table(param, arg, what, position, device_id, dlpack_stream,
                                       pointer_device)
            if table is not None:  # uploaded once every argument has passed its checks
                if upload is None:
                    raise ArgumentError(f"{what}: a list argument needs a device to hold its "
                                        "table")
                tables.append((len(packed.values), param.table, table, f"{what} table address"))
            values = [0, len(views)]
        elif isinstance(param, PointerParam):
            if is_array_like(arg):
                view = _checked_view(arg, what, param.element, None, device_id, dlpack_stream,
                                     pointer_device)
                views.append((str(position), view))
                values = [view.ptr]
            elif isinstance(arg, (int, np.integer)) and not isinstance(arg, (bool, np.bool_)):
                values = [int(arg)]
            else:
                raise ArgumentError(f"{what}: expected an array or an integer address, got "
                                    f"{type(arg).__name__}")
        else:
            values = [arg]
        for slot, value, role in zip(param.slots, values, roles):
            # Shapes and strides are signed index values; a plain scalar parameter is signless.
            signed = role.startswith(("shape", "stride"))
            packed.values.append(_scalar(slot, value, _slot_label(what, role), signed=signed))
        for label, view in views:
            hold(view, label)
    if not allow_overlap:
        _check_no_overlap(signature, arrays)
    for index, slot, table, what in tables:
        address, owner = upload(table)
        packed.keep_alive.extend((table, owner))
        packed.values[index] = _scalar(slot, address, what)
    return packed


def slot_roles(param: Param) -> List[str]:
    """What each flat parameter of `param` holds, as the launch errors name it."""
    if isinstance(param, ArrayParam):
        return (["base address"] + [f"shape[{d}]" for d in range(param.rank)]
                + [f"stride[{d}]" for d in range(param.rank)])
    if isinstance(param, ListParam):
        return ["table address", "length"]
    if isinstance(param, PointerParam):
        return ["address"]
    return ["value"]


def check_host_arguments(signature: Signature, bound: Sequence[Tuple[int, Any]]) -> None:
    """What a launch checks of the arguments' values, for host (numpy) arguments that a launcher
    binds itself (the emulator), so that it refuses the launches the GPU launcher refuses, with
    the same words (ArgumentError): the `assume` facts on scalars and on arrays' base addresses,
    shapes and strides (in elements), as the caller's arrays have them, and the static shapes and
    strides a view was compiled for. `bound` pairs each argument with the first flat parameter it
    filled; one that does not fill exactly one parameter of the signature is not checked."""
    import numpy as np
    params = {param.slots[0].index: (position, param)
              for position, param in enumerate(signature.params)}
    for first, arg in bound:
        if first not in params:
            continue
        position, param = params[first]
        what = f"{signature.entry}: argument {position} ({param.describe()})"
        if isinstance(param, ArrayParam) and isinstance(arg, np.ndarray) and arg.ndim == param.rank:
            shape = [int(n) for n in arg.shape]
            strides = [int(step) // arg.itemsize for step in arg.strides]
            _check_static_layout(param, _HostLayout(shape, strides), what)
            numbers: List[Optional[int]] = [int(arg.ctypes.data), *shape, *strides]
        elif isinstance(param, ScalarParam) and isinstance(arg, (int, np.integer)) \
                and not isinstance(arg, (bool, np.bool_)):
            numbers = [int(arg)]
        else:
            continue
        for slot, role, number in zip(param.slots, slot_roles(param), numbers):
            _check_facts(slot, number, _slot_label(what, role))


@dataclass(frozen=True)
class _HostLayout:
    """The shape and strides (elements) of a host array, for _check_static_layout."""

    shape: List[int]
    strides: List[int]


def _array_rank(obj: Any) -> Optional[int]:
    """The number of dimensions of an array-like object, where it says so without a capsule."""
    interface = getattr(obj, "__cuda_array_interface__", None)
    shape = interface.get("shape") if isinstance(interface, dict) else getattr(obj, "shape", None)
    try:
        return len(tuple(shape))
    except TypeError:
        return None


def _arrays_at_pointers(signature: Signature, args: Sequence[Any]) -> Optional[Signature]:
    """The signature read with the interpreter's convention where the static one does not fit the
    arguments: an array given for a bare pointer parameter also fills the 2 * ndim integer
    parameters of one type after it (its shape, then its strides). cuTile leaves the `assume` off
    shape and stride parameters a kernel never reads, so those arrays are not found statically.
    None unless this reading takes exactly the arguments given."""
    params, regrouped, index = signature.params, [], 0
    for arg in args:
        if index >= len(params):
            return None
        param = params[index]
        rank = _array_rank(arg) if isinstance(param, PointerParam) and is_array_like(arg) else None
        following = params[index + 1:index + 1 + 2 * rank] if rank else ()
        if rank and len(following) == 2 * rank and all(
                isinstance(p, ScalarParam) and p.slot.element.is_integer
                and p.slot.element == following[0].slot.element for p in following):
            slots = [p.slot for p in following]
            regrouped.append(ArrayParam(param.slot, tuple(slots[:rank]), tuple(slots[rank:]),
                                        (None,) * rank, (None,) * rank))
            index += 1 + 2 * rank
        else:
            regrouped.append(param)
            index += 1
    if index != len(params):
        return None
    return Signature(signature.entry, tuple(regrouped), signature.slot_count)


def _list_table(param: ListParam, arg: Any, what: str, position: int, device_id: int,
                dlpack_stream: int, pointer_device
                ) -> Tuple[Optional[np.ndarray], List[Tuple[str, ArrayView]]]:
    """The i64 table of a list argument (None when the list is empty: the kernel reads no row,
    so address 0 is passed), and its arrays' views."""
    import numpy as np
    if not isinstance(arg, (list, tuple)):
        raise ArgumentError(f"{what}: expected a list of arrays, got {type(arg).__name__}")
    views, rows = [], []
    for k, item in enumerate(arg):
        view = _checked_view(item, f"{what} item {k}", param.element, param.rank, device_id,
                             dlpack_stream, pointer_device)
        views.append((f"{position}[{k}]", view))
        rows.append([view.ptr, *view.shape, *view.strides])
    if not rows:
        return None, views
    # Each entry as its 64-bit pattern: addresses are unsigned, strides may be negative.
    table = np.array([[v & (2 ** 64 - 1) for v in row] for row in rows],
                     dtype=np.uint64).view(np.int64)
    return table, views


def _checked_view(arg, what, element: Optional[ElementType], rank: Optional[int], device_id: int,
                  dlpack_stream: int, pointer_device) -> ArrayView:
    view = view_of(arg, what, dlpack_stream)
    if element is None:  # the kernel does not show the type (list items): any we know of
        accepted = tuple(name for names in ARRAY_DTYPES.values() for name in names)
        target = None
    else:
        accepted = ARRAY_DTYPES.get(element.name)
        if accepted is None:
            raise ArgumentError(f"{what}: arrays of {element} are not supported by the launcher")
        target = _raw_target(element)
    if view.raw_typestr is not None and target is not None and \
            view.dtype.itemsize == target.itemsize:
        view.dtype = target  # raw bytes of the right size: the kernel's type is the meaning
    if view.dtype.name not in accepted:
        message = (f"{what}: array dtype {view.dtype.name} does not match the kernel's "
                   f"{element} (expected {' or '.join(accepted)})")
        if target is not None and hasattr(arg, "__cuda_array_interface__") and \
                not hasattr(arg, "__dlpack__"):
            message += (f"; a CUDA Array Interface cannot name {element}: give typestr "
                        f"'<V{target.itemsize}', '<u{target.itemsize}' or '<i{target.itemsize}' "
                        f"(raw {target.itemsize}-byte elements, read as {element}) or an object "
                        f"whose .dtype is {target.name}, or pass the array through DLPack")
        raise ArgumentError(message)
    if rank is not None and len(view.shape) != rank:
        raise ArgumentError(f"{what}: array has rank {len(view.shape)}, the kernel expects {rank}")
    owner = view.device_id
    if owner is None and view.ptr:
        owner = pointer_device(view.ptr)
        if owner < 0:
            raise ArgumentError(f"{what}: pointer 0x{view.ptr:x} is host memory, not device memory")
    if owner is not None and owner != device_id:
        raise ArgumentError(f"{what}: array is on device {owner}, the kernel launches on device "
                            f"{device_id}")
    return view


def _check_static_layout(param: ArrayParam, view: ArrayView, what: str) -> None:
    for dim, (static, actual) in enumerate(zip(param.static_shape, view.shape)):
        if static is not None and static != actual:
            raise ArgumentError(f"{what}: shape[{dim}] is {actual}, the kernel was compiled for "
                                f"{static}")
    if 0 in view.shape:
        return  # no element: its strides address nothing (numpy may give such an array 0 strides)
    for dim, (static, actual) in enumerate(zip(param.static_strides, view.strides)):
        if static is not None and static != actual and view.shape[dim] > 1:
            raise ArgumentError(f"{what}: stride[{dim}] is {actual} elements, the kernel was "
                                f"compiled for {static}")


def _scalar(slot: Slot, value: Any, what: str, signed: bool = False):
    """The numpy scalar holding `value` as the parameter's bytes."""
    import numpy as np
    element = slot.element
    if isinstance(element, PointerType):
        number = _integer(value, what, 0, 2 ** 64 - 1)
        packed = np.uint64(number)
    elif element.name in _INT_PARAM:
        bits = 1 if element.name == "i1" else element.bits
        if element.name == "i1":
            if not isinstance(value, (bool, np.bool_, int, np.integer)) or int(value) not in (0, 1):
                raise ArgumentError(f"{what}: expected a bool, got {value!r}")
            number = int(value)
            packed = np.bool_(number)
        else:
            high = 2 ** (bits - 1) - 1 if signed else 2 ** bits - 1
            number = _integer(value, what, -(2 ** (bits - 1)), high)
            signed = number - 2 ** bits if number >= 2 ** (bits - 1) else number
            packed = getattr(np, _INT_PARAM[element.name])(signed)
    elif element.name in _FLOAT_PARAM or element.name == "bf16":
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer,
                                                                         np.floating)):
            raise ArgumentError(f"{what}: expected a number, got {type(value).__name__}")
        if element.name == "bf16":
            import ml_dtypes
            packed = np.array(value, dtype=ml_dtypes.bfloat16).view(np.uint16)[()]
        else:
            packed = getattr(np, _FLOAT_PARAM[element.name])(value)
        return packed
    else:
        raise ArgumentError(f"{what}: scalar parameters of type {element} are not supported")
    _check_facts(slot, number, what)
    return packed


def _slot_label(what: str, role: str) -> str:
    return what if role == "value" else f"{what} {role}"


def _check_facts(slot: Slot, number: int, label: str) -> None:
    """ArgumentError where `number` breaks one of the `assume` facts on its parameter."""
    for fact in slot.facts:
        problem = fact.violated_by(number)
        if problem:
            raise ArgumentError(f"{label} = {number} {problem}")


def _integer(value: Any, what: str, low: int, high: int) -> int:
    import numpy as np
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ArgumentError(f"{what}: expected an integer, got {type(value).__name__}")
    number = int(value)
    if not low <= number <= high:
        raise ArgumentError(f"{what}: {number} does not fit in [{low}, {high}]")
    return number


def _check_no_overlap(signature: Signature, arrays: List[Tuple[str, ArrayView]]) -> None:
    extents = [(label, view, view.byte_extent()) for label, view in arrays]
    extents = [item for item in extents if item[2] is not None]
    spans = sorted(extent for _, _, extent in extents)
    if all(first[1] <= second[0] for first, second in zip(spans, spans[1:])):
        return  # disjoint byte ranges: nothing more to look at
    from tilebc.interp.memory import overlapping_pairs
    pairs = overlapping_pairs([(view.ptr, view.shape, [s * view.itemsize for s in view.strides],
                                view.itemsize) for _, view, _ in extents])
    if pairs:
        (one, _, first), (other, _, second) = (extents[index] for index in pairs[0])
        raise ArgumentError(
            f"{signature.entry}: arrays for arguments {one} and {other} overlap in memory (bytes "
            f"0x{max(first[0], second[0]):x}-0x{min(first[1], second[1]):x}); pass "
            "allow_overlap=True if the kernel was compiled for aliasing arrays")
