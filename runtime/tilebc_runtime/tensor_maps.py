"""Host side of the JIT's TMA tensor maps (sm_90 default, lowering/tma.py): from a kernel's
metadata record and the flat parameter values of one launch, the tiled map to encode. The
CUDA launcher encodes it with cuTensorMapEncodeTiled (`encode`); the emulator's runner turns it
into a sim.tensormap.TensorMap (`for_emulator`). Nothing here imports CUDA at module level."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence, Tuple

from .launch_errors import LaunchError

ELEMENT_BYTES = {"f16": 2, "bf16": 2}

# Bytes of the zeroed per-device buffer that maps over empty arrays are encoded over (`over_zeros`):
# their one in-bounds element lies at its start; a little more than 16 for TMA's fetch granules.
ZERO_SCRATCH_BYTES = 256


@dataclass(frozen=True)
class TiledMap:
    """One map as cuTensorMapEncodeTiled takes it: dimension 0 (contiguous) first, strides in
    bytes of dims 1.., box in elements."""

    param: str
    element: str
    address: int
    dims: Tuple[int, ...]
    strides: Tuple[int, ...]
    box: Tuple[int, ...]
    swizzle: int

    @property
    def empty(self) -> bool:
        """The array has a zero extent: every element a copy asks for lies out of bounds."""
        return 0 in self.dims


def _value(source, values: Sequence, what: str) -> int:
    kind, number = source
    if kind == "const":
        return int(number)
    if kind == "param":
        return int(values[number])
    raise LaunchError(f"tensor map metadata: unknown {what} source {source!r}")


def resolve(record: dict, values: Sequence) -> TiledMap:
    """The map `record` (KernelInfo.tensor_maps / cache metadata) describes for a launch whose
    flat kernel parameters are `values`; LaunchError where TMA cannot encode it (the kernel's
    facts, checked at launch, make base and strides valid; an oversized dim is not). A map over
    an empty array (`empty`) is returned with its zero extent, its base and strides unchecked
    (nothing is read through them): the launcher encodes it `over_zeros` instead."""
    try:
        return _resolve(record, values)
    except (KeyError, IndexError, TypeError, ValueError) as error:  # metadata a cache handed over
        raise LaunchError(f"tensor map metadata {str(record)[:200]} is malformed "
                          f"({type(error).__name__}: {error})") from None


def _resolve(record: dict, values: Sequence) -> TiledMap:
    element = record["element"]
    if element not in ELEMENT_BYTES or record.get("interleave", "none") != "none" \
            or record.get("oob_fill", "zero") != "zero":
        raise LaunchError(f"tensor map {record['param']}: {element}, interleave "
                          f"{record.get('interleave')}, oob fill {record.get('oob_fill')} is "
                          "not a map this launcher builds")
    size = ELEMENT_BYTES[element]
    address = int(values[record["array"]])
    dims = tuple(_value(d, values, "dim") for d in record["dims"])
    strides = tuple(_value(s, values, "stride") * size for s in record["strides"])
    box = tuple(int(b) for b in record["box"])
    found = TiledMap(record["param"], element, address, dims, strides, box,
                     int(record["swizzle"]))
    problem = None
    if len(dims) != record["rank"] or len(strides) != len(dims) - 1 or len(box) != len(dims):
        problem = "rank, dims, strides and box disagree"
    elif any(not 0 <= d < 2 ** 32 for d in dims):
        problem = f"extents {dims}: TMA needs every extent in 1 .. 2^32-1 (0: an empty array)"
    elif found.empty:
        pass
    elif address % 16:
        problem = f"base address 0x{address:x} is not 16-byte aligned"
    elif any(s % 16 or not 0 < s < 2 ** 40 for s in strides):
        problem = f"byte strides {strides}: TMA needs positive multiples of 16 below 2^40"
    if problem:
        raise LaunchError(f"tensor map {record['param']} (argument at flat parameter "
                          f"{record['array']}): {problem}")
    return found


def resolve_all(records: Sequence[dict], values: Sequence) -> Tuple[TiledMap, ...]:
    return tuple(resolve(record, values) for record in records or ())


def over_zeros(found: TiledMap, scratch: int) -> TiledMap:
    """The map to encode for `found`: itself, or for an empty one the same element type, box
    and swizzle over the zeroed buffer at `scratch` (16-byte aligned, ZERO_SCRATCH_BYTES), every
    extent 1 and every stride 16 bytes. TMA cannot encode a zero extent, and a copy through
    this map reads element 0 (zero) or zero-fills the rest: the padding the empty array gives."""
    if not found.empty:
        return found
    if scratch % 16:
        raise LaunchError(f"tensor map {found.param}: zero scratch 0x{scratch:x} is not 16-byte "
                          "aligned")
    rank = len(found.dims)
    return replace(found, address=scratch, dims=(1,) * rank, strides=(16,) * (rank - 1))


def for_emulator(found: TiledMap):
    from .sim.tensormap import TensorMap
    return TensorMap(found.address, ELEMENT_BYTES[found.element], found.dims, found.strides,
                     found.box, found.swizzle)


_SWIZZLE_NAMES = {0: "CU_TENSOR_MAP_SWIZZLE_NONE", 32: "CU_TENSOR_MAP_SWIZZLE_32B",
                  64: "CU_TENSOR_MAP_SWIZZLE_64B", 128: "CU_TENSOR_MAP_SWIZZLE_128B"}
_TYPE_NAMES = {"f16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16", "bf16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16"}


def encode(found: TiledMap):
    """The CUtensorMap (cuda.bindings) for `found`, through cuTensorMapEncodeTiled: interleave
    none, zero fill outside the tensor (OOB fill NONE is the zero fill), L2 promotion 128 B,
    element strides 1."""
    from cuda.bindings import driver as cu
    from . import driver
    rank = len(found.dims)
    mapped = driver.check("cuTensorMapEncodeTiled", cu.cuTensorMapEncodeTiled(
        getattr(cu.CUtensorMapDataType, _TYPE_NAMES[found.element]), rank, found.address,
        [cu.cuuint64_t(d) for d in found.dims], [cu.cuuint64_t(s) for s in found.strides],
        [cu.cuuint32_t(b) for b in found.box], [cu.cuuint32_t(1)] * rank,
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(cu.CUtensorMapSwizzle, _SWIZZLE_NAMES[found.swizzle]),
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE))
    return mapped


def kernel_argument(mapped):
    """A CUtensorMap as a by-value kernel argument for cuda.core's launch: its 128 bytes in a
    ctypes array (the driver copies it into the 64-byte-aligned parameter)."""
    import ctypes
    words = [int(word) for word in mapped.opaque]
    return (ctypes.c_uint64 * len(words))(*words)
