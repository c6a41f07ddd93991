"""Atomics: atomic_rmw / atomic_cas through pointer tiles (atom), atomic_red_view into a view (red).
Each element's owner thread performs the atomic; results owned by fewer threads than hold them are
shared through shared memory."""
from __future__ import annotations

from tilebc.ops.enums import AtomicRMWMode, MemoryOrderingSemantics

from . import dtypes
from .common import SCOPE, Tile, and_predicates as _and, order_after_token, set_result_token
from .anchors import unused
from .memory import view_addresses
from .registry import lowers

SEMANTICS = {MemoryOrderingSemantics.WEAK: "relaxed", MemoryOrderingSemantics.RELAXED: "relaxed",
             MemoryOrderingSemantics.ACQUIRE: "acquire", MemoryOrderingSemantics.RELEASE: "release",
             MemoryOrderingSemantics.ACQ_REL: "acq_rel"}


def _type_suffix(lw, op, element, mode):
    name = dtypes.name_of(element)
    bits = {"i32": 32, "i64": 64, "f32": 32, "f64": 64, "f16": 16, "bf16": 16, "ptr": 64}.get(name)
    if bits is None:
        raise lw.error(op, f"atomics on {name} elements are not supported")
    if mode in (AtomicRMWMode.AND, AtomicRMWMode.OR, AtomicRMWMode.XOR, AtomicRMWMode.XCHG, None):
        return f"b{bits}"
    if mode is AtomicRMWMode.ADDF:
        if name in ("f16", "bf16"):
            return f"noftz.{name}"
        return name
    if mode is AtomicRMWMode.ADD:
        return f"u{bits}" if bits == 64 else f"s{bits}"
    if mode in (AtomicRMWMode.UMAX, AtomicRMWMode.UMIN):
        return f"u{bits}"
    return f"s{bits}"


OPERATION = {AtomicRMWMode.AND: "and", AtomicRMWMode.OR: "or", AtomicRMWMode.XOR: "xor",
             AtomicRMWMode.ADD: "add", AtomicRMWMode.ADDF: "add", AtomicRMWMode.MAX: "max",
             AtomicRMWMode.MIN: "min", AtomicRMWMode.UMAX: "max", AtomicRMWMode.UMIN: "min",
             AtomicRMWMode.XCHG: "exch"}


def _prefix(op):
    sem = SEMANTICS[op.attrs["memory_ordering_semantics"]]
    return f".{sem}.{SCOPE[op.attrs['memory_scope']]}"


def _share_results(lw, result_type, regs):
    """Make every holder of an element see the value its owner got from the atomic."""
    if result_type.num_elements % lw.T == 0:
        return regs
    tile = Tile(result_type, regs)
    [offset] = lw.reserve_smem([lw.smem_size_of(result_type)])
    for k in range(len(regs)):
        index = lw.elem_index(tile.count, k)
        address = lw.smem_address(offset, index, tile.element)
        lw.store("shared", address, tile.slot(k), tile.element,
                 predicate=lw.owner(tile.count, k))
    lw.barrier()
    shared = [lw.smem_read(offset, lw.elem_index(tile.count, k), tile.element)
              for k in range(len(regs))]
    lw.barrier()
    return shared


def _result_unused(lw, op) -> bool:
    """Nothing reads the old values, and the ordering is one `red` has (it has no acquire)."""
    if SEMANTICS[op.attrs["memory_ordering_semantics"]] not in ("relaxed", "release"):
        return False
    return unused(lw, op.results[0])


def _atomic(lw, op, build):
    w = lw.w
    order_after_token(lw, op)
    pointers: Tile = lw.get(op.operands["pointers"])
    mask = op.operands.get("mask")
    mask = lw.get(mask) if mask is not None else None
    result_type = op.results[0].type
    cls = dtypes.reg_class(result_type.element)
    regs = []
    # nothing reads the old values: a reduction (red) where PTX has one, no result to wait for
    reduce = _result_unused(lw, op)
    for k in range(lw.slots(result_type.num_elements)):
        guard = _and(lw, lw.owner(result_type.num_elements, k),
                     mask.slot(k) if mask is not None else None)
        prefix = f"@{guard} " if guard else ""
        own = lw.owner(result_type.num_elements, k)
        skip = None
        if own is not None and result_type.num_elements - k * lw.T <= lw.T - 32:
            # whole warps own nothing here: they branch around the atomic (and its latency)
            skip = w.label("atomic")
            w(f"@!{own} bra {skip}")
        text = build(k, None, pointers.slot(k)) if reduce else None
        if text is not None and text.startswith("red"):
            w(prefix + text)
        else:
            reduce = False
            out = w.reg(cls)
            zero = {"f32": "0f00000000", "f64": "0d0000000000000000"}.get(cls, "0")
            w(f"mov.{dtypes.mov_type(cls)} {out}, {zero}")
            w(prefix + build(k, out, pointers.slot(k)))
            regs.append(out)
        if skip is not None:
            w.place(skip)
    accessed = w.barriers  # the barriers sharing the old values below come after the access
    if reduce:  # never read: no registers
        lw.set(op.results[0], Tile(result_type, [w.reg(cls)] * lw.slots(result_type.num_elements)))
    elif unused(lw, op.results[0]):
        lw.set(op.results[0], Tile(result_type, regs))  # never read: no need to share it
    else:
        lw.set(op.results[0], Tile(result_type, _share_results(lw, result_type, regs)))
    set_result_token(lw, op, accessed)


@lowers("atomic_rmw_tko")
def lower_atomic_rmw(lw, op):
    arg: Tile = lw.get(op.operands["arg"])
    mode = op.attrs["mode"]
    suffix = _type_suffix(lw, op, arg.element, mode)
    space = lw.space_suffix()
    def build(k, out, ptr):
        if out is None and mode is not AtomicRMWMode.XCHG:  # result unused: red
            return f"red{_prefix(op)}{space}.{OPERATION[mode]}.{suffix} [{ptr}], {arg.slot(k)}"
        if out is None:
            return ""
        return f"atom{_prefix(op)}{space}.{OPERATION[mode]}.{suffix} {out}, [{ptr}], " \
            f"{arg.slot(k)}"
    _atomic(lw, op, build)


@lowers("atomic_cas_tko")
def lower_atomic_cas(lw, op):
    cmp: Tile = lw.get(op.operands["cmp"])
    val: Tile = lw.get(op.operands["val"])
    suffix = _type_suffix(lw, op, val.element, None)
    space = lw.space_suffix()
    _atomic(lw, op, lambda k, out, ptr: "" if out is None else
            f"atom{_prefix(op)}{space}.cas.{suffix} {out}, [{ptr}], {cmp.slot(k)}, {val.slot(k)}")


@lowers("atomic_red_view_tko")
def lower_atomic_red_view(lw, op):
    order_after_token(lw, op)
    tile: Tile = lw.get(op.operands["value"])
    view = lw.get(op.operands["view"])
    mode = op.attrs["mode"]
    suffix = _type_suffix(lw, op, tile.element, mode)
    if mode is AtomicRMWMode.XCHG:
        raise lw.error(op, "exchange is not a reduction")
    addresses = view_addresses(lw, op, view, op.operands["index"], tile.type.shape)
    for k, (address, ok) in enumerate(addresses):
        guard = _and(lw, lw.owner(tile.count, k), ok)
        prefix = f"@{guard} " if guard else ""
        lw.w(f"{prefix}red{_prefix(op)}{lw.space_suffix()}.{OPERATION[mode]}.{suffix} "
             f"[{address}], {tile.slot(k)}")
    set_result_token(lw, op)
