"""Instruction semantics, part 6: sm_90 (Hopper). mbarrier objects, asynchronous bulk copies
(cp.async.bulk, cp.async.mbarrier.arrive), TMA tensor copies (cp.async.bulk.tensor, tile mode,
through tensor maps bound to kernel parameters: sim/tensormap.py), prefetch, warpgroup MMA
(wgmma.*), elect.sync, setmaxnreg and stmatrix, per the PTX ISA.

Time. Bulk and tensor copies to shared memory read their source when they are issued and land
at the latest moment the ISA allows: when a thread next waits on their mbarrier, which then sees
their bytes completed (as cp.async lands at the wait that covers its group). A kernel that reads
the destination before its wait reads the old contents, as the hardware may.

wgmma.mma_async reads its operands when issued but its accumulators land only when
wgmma.wait_group retires the commit group holding it, while later wgmma's on the same
accumulators chain on the pending results, as the hardware pipeline does. Another
instruction that reads or writes an accumulator register of a wgmma still in flight first lands
the groups up to the one holding it (a profile counts these: `wgmma_serialized`): ptxas does the
same, serialising the pipeline there rather than letting the instruction see a stale value
(tileiras's sm_90 code copies accumulators with `mov` between a persistent loop's iterations).
For the JIT's own code (sim.run: KernelImage.serialize_wgmma False) such a touch is an error,
and so is a wgmma.mma_async reading an accumulator or A register that another instruction wrote
after the last wgmma.fence (the ISA's fence rule: undefined, which ptxas serialises), or any
instruction touching a wgmma's A registers before a wgmma.wait_group retires it (both checked in
straight-line code). A wgmma reads its shared-memory operands when issued; in the JIT's own code
a store to those bytes before its group lands is refused (the hardware may read them until then).
A CTA that ends with results not retired is an error.

mbarrier. The 8-byte object in shared memory is modelled beside the memory (Cta.mbarriers, keyed
by its shared address): the current phase number, the arrivals still expected in it, the
arrival count set by init, and the transaction count (bytes expected minus bytes completed). A
phase completes when both its pending arrivals and its transaction count reach zero; the next
phase then expects the init count again. Waits with .parity test whether the phase of that
parity before the current one completed; an arrive's state token is the phase it arrived in.
Completing a phase orders shared memory like bar.sync for the race checker (the threads that
wait on it acquire what the arrivers released). Divergent threads run lowest program counter
first; threads whose wait failed are passed over until the next arrival, so warp-specialised
producer/consumer code runs its producers while the consumers wait. A wait no thread can
complete is reported as a deadlock after STALL_LIMIT failed waits with no arrival.

Clusters have one CTA (a launch without cluster dimensions), so .shared::cluster addresses are
the CTA's own shared memory.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from .registry import KERNEL_PASSES, Mods, implements, operands, per_thread
from .isa_extra import build_cp as build_plain_cp, land_all_copies, matrix_form
from .isa_memory import Access, _lanes
from .isa_mma import _tf32_top_bits, a_coords
from .syntax import Addr, Imm, Not, PredPair, Reg, Sym, TensorRef, Vec, registers_of
from .state import PARAM_WINDOW, SHARED_BASE, UINT

STALL_LIMIT = 20_000
SEMANTICS = ("relaxed", "acquire", "release", "acq_rel", "sc", "cta", "cluster", "gpu", "sys")
SHARED = ("shared", "shared::cluster")


# ------------------------------------------------------------------------------------ mbarrier


@dataclass
class MBarrier:
    expected: int  # arrivals per phase (init count, less arrive_drop's)
    pending: int  # arrivals still missing in the current phase
    phase: int = 0
    tx: int = 0  # transaction bytes expected and not yet completed
    # bulk and tensor copies issued and not yet landed: each lands its bytes in shared memory and
    # completes them on this barrier when a thread next waits on it (_deliver)
    in_flight: list = field(default_factory=list)


def _deliver(bar: MBarrier) -> None:
    """Land the copies in flight on `bar`, in the order they were issued."""
    while bar.in_flight:
        bar.in_flight.pop(0)()


def _no_copies_in_flight(cta, ins, bar, thread: int) -> None:
    """mbarrier.init / inval over an object that copies still complete on is undefined."""
    if bar is not None and bar.in_flight:
        raise cta.launch.error(cta, ins, f"{len(bar.in_flight)} bulk or tensor copie(s) still "
                               "complete on this mbarrier (undefined): wait on it first",
                               thread=thread)


def _not_read_in_flight(cta, ins, offsets, thread: int) -> None:
    """A copy issued into shared bytes that a wgmma still in flight reads (the JIT's own code:
    _reading); checked at issue, since the copy may land at once on the hardware."""
    shared = cta.shared
    if not shared.async_live:
        return
    inside = offsets[(offsets >= 0) & (offsets < shared.size)]
    busy = shared.read_in_flight(inside)
    if busy is not None:
        raise cta.launch.error(cta, ins, "copies into shared memory that a wgmma.mma_async still "
                               "in flight reads (undefined: the hardware may read it until a "
                               "wgmma.wait_group retires the wgmma)", thread=thread,
                               address=int(inside[busy]) + SHARED_BASE)


def _barrier(cta, ins, address: int, thread: int) -> MBarrier:
    state = cta.mbarriers.get(address)
    if state is None:
        raise cta.launch.error(cta, ins, "mbarrier operation on an address that holds no "
                               "initialised mbarrier (mbarrier.init first)", thread=thread,
                               address=address)
    return state


def _check_address(cta, ins, address: int, thread: int) -> None:
    offset = address - SHARED_BASE
    if address % 8 or offset < 0 or offset + 8 > cta.shared.size:
        raise cta.launch.error(cta, ins, "mbarrier address is not an 8-byte aligned address "
                               "inside the CTA's shared memory", thread=thread, address=address)


def _progress(cta, ins, bar: MBarrier, thread: int) -> None:
    """Complete the current phase if nothing is outstanding."""
    cta.stalled_waits = 0
    if cta.any_blocked:  # the waiters may try again
        cta.blocked[:] = False
        cta.any_blocked = False
    if bar.pending < 0:
        raise cta.launch.error(cta, ins, "mbarrier: more arrivals than the phase expects",
                               thread=thread)
    if bar.pending == 0 and bar.tx == 0:
        bar.phase += 1
        bar.pending = bar.expected
        cta.shared.barrier()  # the waiters acquire what the arrivers released


def _shared_address(k, ins, operand):
    if not isinstance(operand, Addr):
        raise k.unsupported(ins, f"{ins.opcode} needs an [address] operand")
    return k.address(ins, operand)


def _per_lane(cta, value, lanes):
    return per_thread(np.asarray(value), cta.T)[lanes]


@implements("mbarrier", forms="mbarrier.init / inval / arrive{.expect_tx,.noComplete} / "
                              "arrive_drop / expect_tx / complete_tx / test_wait / try_wait "
                              "{.parity} on .shared{::cta,::cluster}.b64 (phase, "
                              "pending arrivals and transaction bytes per object; waits that can "
                              "never complete are reported)")
def build_mbarrier(ins, k):
    mods = Mods(ins, k, ("init", "inval", "arrive", "arrive_drop", "expect_tx", "complete_tx",
                         "noComplete", "test_wait", "try_wait", "parity", "pending_count")
                + SEMANTICS + SHARED)
    if mods.type != "b64":
        raise k.unsupported(ins, "mbarrier operations are .b64")
    verbs = [v for v in ("init", "inval", "arrive", "arrive_drop", "test_wait", "try_wait",
                         "pending_count", "expect_tx", "complete_tx") if mods.has(v)]
    if verbs[:1] == ["arrive"] and "expect_tx" in verbs or \
            verbs[:1] == ["arrive_drop"] and "expect_tx" in verbs:
        verbs = verbs[:1]
    if len(verbs) != 1:
        raise k.unsupported(ins, "mbarrier needs one operation")
    verb = verbs[0]
    ops = ins.operands
    if verb == "pending_count":
        raise k.unsupported(ins, "mbarrier.pending_count is not emulated")
    if verb in ("init", "expect_tx", "complete_tx", "inval"):
        count = 1 if verb == "inval" else 2
        if len(ops) != count:
            raise k.unsupported(ins, f"mbarrier.{verb} takes {count} operand(s)")
        get_address = _shared_address(k, ins, ops[0])
        read_value = k.reader(ins, ops[1], "u32") if count == 2 else None

        def simple(cta, mask):
            lanes = _lanes(cta, mask)
            addresses = _per_lane(cta, get_address(cta), lanes)
            values = _per_lane(cta, read_value(cta), lanes) if read_value else None
            for index, lane in enumerate(lanes):  # in thread order
                address, thread = int(addresses[index]), int(lane)
                _check_address(cta, ins, address, thread)
                if verb in ("init", "inval"):
                    _no_copies_in_flight(cta, ins, cta.mbarriers.get(address), thread)
                if verb == "init":
                    arrivals = int(values[index])
                    if not 1 <= arrivals < 2 ** 20:
                        raise cta.launch.error(cta, ins, f"mbarrier.init count {arrivals} is "
                                               "outside 1 .. 2^20-1", thread=thread)
                    cta.mbarriers[address] = MBarrier(arrivals, arrivals)
                    offset = address - SHARED_BASE  # the object's bytes now hold a value
                    cta.shared.written[offset:offset + 8] = True
                elif verb == "inval":
                    _barrier(cta, ins, address, thread)
                    del cta.mbarriers[address]
                else:
                    bar = _barrier(cta, ins, address, thread)
                    bar.tx += int(values[index]) if verb == "expect_tx" else -int(values[index])
                    _progress(cta, ins, bar, thread)
        return simple
    if verb in ("arrive", "arrive_drop"):
        expect = mods.has("expect_tx")
        no_complete = mods.has("noComplete")
        if len(ops) not in (2, 3) or (expect or no_complete) and len(ops) != 3:
            raise k.unsupported(ins, f"mbarrier.{verb} takes state, [address]{{, count}}")
        dst = ops[0]
        write = None if isinstance(dst, Sym) and dst.name == "_" else k.writer(ins, dst, "b64")
        get_address = _shared_address(k, ins, ops[1])
        read_count = k.reader(ins, ops[2], "u32") if len(ops) == 3 else None

        def arrive(cta, mask):
            lanes = _lanes(cta, mask)
            addresses = _per_lane(cta, get_address(cta), lanes)
            counts = _per_lane(cta, read_count(cta), lanes) if read_count else None
            tokens = np.zeros(cta.T, np.uint64)
            for index, lane in enumerate(lanes):
                address, thread = int(addresses[index]), int(lane)
                _check_address(cta, ins, address, thread)
                bar = _barrier(cta, ins, address, thread)
                tokens[lane] = bar.phase
                arrivals = 1
                if expect:
                    bar.tx += int(counts[index])
                elif counts is not None:
                    arrivals = int(counts[index])
                if verb == "arrive_drop":
                    bar.expected -= arrivals
                bar.pending -= arrivals
                if no_complete and bar.pending == 0 and bar.tx == 0:
                    raise cta.launch.error(cta, ins, "mbarrier.arrive.noComplete completes "
                                           "the phase (undefined)", thread=thread)
                _progress(cta, ins, bar, thread)
            if write is not None:
                write(cta, tokens, mask)
        return arrive
    # test_wait / try_wait {.parity}
    parity = mods.has("parity")
    if len(ops) not in (3, 4) or verb == "test_wait" and len(ops) != 3:
        raise k.unsupported(ins, f"mbarrier.{verb} takes p, [address], state{{, hint}}")
    write = k.writer(ins, ops[0], "pred")
    get_address = _shared_address(k, ins, ops[1])
    read_state = k.reader(ins, ops[2], "u32" if parity else "b64")

    def wait(cta, mask):
        lanes = _lanes(cta, mask)
        addresses = _per_lane(cta, get_address(cta), lanes)
        states = _per_lane(cta, read_state(cta), lanes)
        done = np.zeros(cta.T, np.bool_)
        for index, lane in enumerate(lanes):
            address, thread = int(addresses[index]), int(lane)
            _check_address(cta, ins, address, thread)
            bar = _barrier(cta, ins, address, thread)
            _deliver(bar)
            if parity:  # the phase of that parity before the current one is complete
                done[lane] = (bar.phase & 1) != (int(states[index]) & 1)
            else:
                done[lane] = bar.phase > int(states[index])
        cta.blocked[lanes] = ~done[lanes]
        cta.any_blocked = bool(cta.blocked.any())
        if cta.launch.profile is not None:
            cta.launch.profile.mbarrier_wait(lanes, done)
        if not done[lanes].all():
            cta.stalled_waits += 1
            if cta.stalled_waits > STALL_LIMIT:
                index = int(np.argmin(done[lanes]))
                thread = int(lanes[index])
                bar = _barrier(cta, ins, int(addresses[index]), thread)
                raise cta.launch.error(cta, ins, f"deadlock: mbarrier waits failed "
                                       f"{STALL_LIMIT} times with no arrival in between (no "
                                       "running thread completes the phase; it still expects "
                                       f"{bar.pending} arrival(s) and {bar.tx} transaction "
                                       "byte(s))", thread=thread)
        write(cta, done, mask)
    return wait


# ------------------------------------------------------------------------------- bulk copies


@implements("cp", forms="cp.async.{ca,cg}.shared.global (zero-filled past src-size, landing "
                        "at the wait that covers its group), cp.async.commit_group / wait_group "
                        "/ wait_all; "
                        "cp.async.mbarrier.arrive{.noinc}.shared.b64; cp.async.bulk "
                        "global<->shared with .mbarrier::complete_tx::bytes or .bulk_group, "
                        "cp.async.bulk.commit_group / wait_group{.read}, cp.async.bulk.prefetch; "
                        "cp.async.bulk.tensor.{1-5}d tile mode, global -> shared with "
                        ".mbarrier::complete_tx::bytes and shared -> global with .bulk_group, "
                        "through a tensor map bound to a kernel parameter (sim/tensormap.py)")
def build_cp(ins, k):
    mods = ins.modifiers
    if "bulk" in mods:
        return build_bulk(ins, k)
    if "mbarrier" in mods:
        return build_cp_async_arrive(ins, k)
    return build_plain_cp(ins, k)


def build_cp_async_arrive(ins, k):
    """cp.async.mbarrier.arrive: an arrival once the thread's earlier cp.async copies are done
    (they land here); without .noinc the pending count is raised first, so it nets out."""
    mods = Mods(ins, k, ("async", "mbarrier", "arrive", "noinc") + SHARED)
    if not (mods.has("async") and mods.has("arrive")) or mods.type != "b64":
        raise k.unsupported(ins, "cp.async.mbarrier.arrive{.noinc}.shared.b64 [address]")
    (address,) = operands(ins, k, 1)
    get_address = _shared_address(k, ins, address)
    noinc = mods.has("noinc")

    def fn(cta, mask):
        lanes = _lanes(cta, mask)
        land_all_copies(cta, lanes)
        addresses = _per_lane(cta, get_address(cta), lanes)
        for index, lane in enumerate(lanes):
            address, thread = int(addresses[index]), int(lane)
            _check_address(cta, ins, address, thread)
            bar = _barrier(cta, ins, address, thread)
            if noinc:
                bar.pending -= 1
                _progress(cta, ins, bar, thread)
    return fn


_BULK_FLAGS = ("async", "bulk", "shared", "shared::cluster", "global", "bulk_group",
               "mbarrier::complete_tx::bytes", "commit_group", "wait_group", "read", "prefetch",
               "L2", "L2::cache_hint")


def build_bulk(ins, k):
    if "tensor" in ins.modifiers:
        return build_bulk_tensor(ins, k)
    mods = Mods(ins, k, _BULK_FLAGS, types=(0,))
    if mods.has("commit_group") or mods.has("wait_group"):
        return lambda cta, mask: None  # every bulk copy has already landed
    if mods.has("prefetch"):
        return lambda cta, mask: None
    ops = ins.operands
    order = [m for m in ins.modifiers if m in ("shared", "shared::cluster", "global")]
    to_shared = order[:1] in (["shared"], ["shared::cluster"])
    if len(order) != 2 or order[0] == order[1] and order[0] == "global":
        raise k.unsupported(ins, "cp.async.bulk needs a destination and a source space")
    completes = mods.has("mbarrier::complete_tx::bytes")
    if to_shared and order[1] == "global" and not completes or \
            not to_shared and not mods.has("bulk_group"):
        raise k.unsupported(ins, "cp.async.bulk to shared memory completes an mbarrier; to "
                                 "global memory it is a .bulk_group copy")
    if len(ops) != (4 if completes else 3):
        raise k.unsupported(ins, "cp.async.bulk takes [dst], [src], size{, [mbarrier]}")
    get_dst, get_src = _shared_address(k, ins, ops[0]), _shared_address(k, ins, ops[1])
    read_size = k.reader(ins, ops[2], "u32")
    get_bar = _shared_address(k, ins, ops[3]) if completes else None
    source = Access(ins, "shared" if order[1] != "global" else "global")
    target = Access(ins, "shared" if to_shared else "global")

    def fn(cta, mask):
        lanes = _lanes(cta, mask)
        dsts = _per_lane(cta, get_dst(cta), lanes)
        srcs = _per_lane(cta, get_src(cta), lanes)
        sizes = _per_lane(cta, read_size(cta), lanes)
        bars = _per_lane(cta, get_bar(cta), lanes) if completes else None
        for index, lane in enumerate(lanes):  # each executing thread issues one copy
            size, thread = int(sizes[index]), int(lane)
            dst, src = int(dsts[index]), int(srcs[index])
            if size % 16 or dst % 16 or src % 16:
                raise cta.launch.error(cta, ins, "cp.async.bulk: addresses and size must be "
                                       "multiples of 16", thread=thread, address=dst)
            if completes:
                _check_address(cta, ins, int(bars[index]), thread)
                bar = _barrier(cta, ins, int(bars[index]), thread)
            offsets = np.arange(size, dtype=np.uint64)
            who = np.full(size, thread)
            data = source.load(cta, np.uint64(src) + offsets, who, np.dtype(np.uint8))
            if not completes:
                target.store(cta, np.uint64(dst) + offsets, who, data)
                continue
            _not_read_in_flight(cta, ins, (dst - SHARED_BASE) + offsets.astype(np.int64), thread)

            def land(bar=bar, where=np.uint64(dst) + offsets, who=who, data=data, size=size,
                     thread=thread):
                target.store(cta, where, who, data)
                bar.tx -= size
                _progress(cta, ins, bar, thread)
            bar.in_flight.append(land)
    return fn


_TENSOR_FLAGS = ("async", "bulk", "tensor", "shared::cluster", "shared", "global", "tile",
                 "mbarrier::complete_tx::bytes", "bulk_group", "L2::cache_hint") + \
    tuple(f"{n}d" for n in range(1, 6))


def tensor_map_reader(ins, k, operand):
    """cta -> per-lane callable: the TensorMap at the operand's address (a kernel parameter's
    .param address, or the generic address cvta.param makes of it)."""
    if isinstance(operand, Sym) and operand.name in k.param_offsets:
        offset = k.param_offsets[operand.name][0]
        read = None
    elif isinstance(operand, Reg):
        offset = None
        read = k.reader(ins, operand, "u64")
    else:
        raise k.unsupported(ins, "the tensor map is a kernel parameter or a register holding its "
                                 "address")

    param_size = np.uint64(k.param_size)  # not k itself: the image's code must not hold it

    def lookup(cta, lanes):
        if read is None:
            offsets = np.full(len(lanes), offset, np.int64)
        else:
            addresses = _per_lane(cta, read(cta), lanes).astype(np.uint64)
            offsets = addresses.astype(np.int64) - PARAM_WINDOW
            param_space = addresses < param_size  # a .param-space address
            offsets[param_space] = addresses[param_space].astype(np.int64)
        maps = []
        for index, lane in enumerate(lanes):
            tensor_map = cta.launch.tensor_maps.get(int(offsets[index]))
            if tensor_map is None:
                raise cta.launch.error(cta, ins, "no tensor map at this address: maps are modelled "
                                       "only as kernel parameters the launch binds one to "
                                       "(maps in global or constant memory, or built with "
                                       "tensormap.replace, are not)", thread=int(lane),
                                       address=int(offsets[index]))
            maps.append(tensor_map)
        return maps
    return lookup


def build_bulk_tensor(ins, k):
    """cp.async.bulk.tensor, tile mode: the box at the coordinates moves between the tensor in
    global memory and dense (swizzled) shared memory at once (see the module's notes on time);
    loads fill elements outside the tensor with zeros and complete the box's bytes on the
    mbarrier, stores write only the elements inside the tensor."""
    mods = Mods(ins, k, _TENSOR_FLAGS, types=(0,))
    order = [m for m in ins.modifiers if m in ("shared::cluster", "shared", "global")]
    dims = [int(m[0]) for m in ins.modifiers if re.fullmatch(r"[1-5]d", m)]
    if len(dims) != 1 or len(order) != 2:  # .tile is the default mode; others are refused
        raise k.unsupported(ins, "cp.async.bulk.tensor.Nd.<dst>.<src>{.tile} (im2col and "
                                 "multicast forms are not emulated)")
    rank = dims[0]
    to_shared = order[1] == "global"
    if to_shared and not mods.has("mbarrier::complete_tx::bytes") or \
            not to_shared and (order != ["global", "shared"] or not mods.has("bulk_group")):
        raise k.unsupported(ins, "cp.async.bulk.tensor loads .shared::{cta,cluster}.global "
                                 "with .mbarrier::complete_tx::bytes, stores "
                                 ".global.shared::cta with .bulk_group")
    ops = list(ins.operands)
    if mods.has("L2::cache_hint"):  # the cache policy operand changes no values
        ops = ops[:-1]
    if to_shared:
        if len(ops) != 3:
            raise k.unsupported(ins, "cp.async.bulk.tensor load takes [dst], [map, {coords}], "
                                     "[mbarrier]")
        shared_op, ref, bar_op = ops
    else:
        if len(ops) != 2:
            raise k.unsupported(ins, "cp.async.bulk.tensor store takes [map, {coords}], [src]")
        ref, shared_op = ops
    if not isinstance(ref, TensorRef) or not isinstance(ref.coords, Vec) or \
            len(ref.coords.items) != rank:
        raise k.unsupported(ins, f"the tensor operand is [map, {{{rank} coordinates}}]")
    get_maps = tensor_map_reader(ins, k, ref.tensor)
    read_coords = [k.reader(ins, item, "s32") for item in ref.coords.items]
    get_shared = _shared_address(k, ins, shared_op)
    get_bar = _shared_address(k, ins, bar_op) if to_shared else None
    shared = Access(ins, "shared")
    memory = Access(ins, "global")

    def fn(cta, mask):
        lanes = _lanes(cta, mask)
        maps = get_maps(cta, lanes)
        coords = [_per_lane(cta, read(cta), lanes).astype(np.int64) for read in read_coords]
        bases = _per_lane(cta, get_shared(cta), lanes)
        bars = _per_lane(cta, get_bar(cta), lanes) if to_shared else None
        profile = cta.launch.profile
        counted = set()
        boxes: dict = {}  # the lanes of a warp usually issue the same copy: its addresses once
        for index, lane in enumerate(lanes):  # each executing thread issues one copy
            thread, tensor_map, base = int(lane), maps[index], int(bases[index])
            if tensor_map.rank != rank:
                raise cta.launch.error(cta, ins, f"a {rank}d copy through a rank-"
                                       f"{tensor_map.rank} tensor map", thread=thread)
            if (base - SHARED_BASE) % tensor_map.shared_alignment():
                raise cta.launch.error(cta, ins, "the shared-memory box is not aligned to "
                                       f"{tensor_map.shared_alignment()} bytes", thread=thread,
                                       address=base)
            if to_shared:
                _check_address(cta, ins, int(bars[index]), thread)
                bar = _barrier(cta, ins, int(bars[index]), thread)
            where = [int(c[index]) for c in coords]
            box_key = (id(tensor_map), tuple(where), base)
            box = boxes.get(box_key)
            if box is None:
                addresses, inside, dense = tensor_map.box_elements(where)
                box = boxes[box_key] = (addresses, inside, dense, addresses[inside],
                                        int(inside.sum()),
                                        tensor_map.shared_addresses(base, dense))
            addresses, inside, dense, inside_addresses, inside_count, smem = box
            # TMA copies are warp-uniform in SASS (UTMALDG / UTMASTG): the lanes of a warp
            # issuing the same copy (tileiras's store warp) make one copy on the GPU
            key = (thread // 32, id(tensor_map), tuple(where), base)
            if profile is not None and key not in counted:
                counted.add(key)
                profile.tma(addresses[inside], tensor_map.element_size, tensor_map.box_bytes,
                            not to_shared)
            size = tensor_map.element_size
            element = UINT[size]
            if to_shared:
                values = np.zeros(len(dense), element)
                who = np.full(inside_count, thread)
                values[inside] = memory.load(cta, inside_addresses, who, element)
                _not_read_in_flight(cta, ins, _byte_offsets(np.asarray(smem, np.uint64), size),
                                    thread)

                def land(bar=bar, smem=smem, values=values, size=tensor_map.box_bytes,
                         thread=thread):
                    shared.store(cta, smem, np.full(len(smem), thread), values)
                    bar.tx -= size
                    _progress(cta, ins, bar, thread)
                bar.in_flight.append(land)
            else:
                values = shared.load(cta, smem, np.full(len(smem), thread), element)
                memory.store(cta, inside_addresses, np.full(inside_count, thread),
                             values[inside])
    return fn


@implements("prefetch", forms="prefetch{.global,.local}.{L1,L2} [a]: no-op; prefetch.tensormap "
                              "[a]: checks that a tensor map is bound there")
def build_prefetch(ins, k):
    mods = Mods(ins, k, ("global", "local", "L1", "L2", "tensormap", "param", "const"),
                types=(0,))
    (address,) = operands(ins, k, 1)
    if not isinstance(address, Addr):
        raise k.unsupported(ins, "prefetch takes an [address]")
    if not mods.has("tensormap"):
        if not (mods.has("L1") or mods.has("L2")) or mods.has("param") or mods.has("const"):
            raise k.unsupported(ins, "prefetch{.global,.local}.{L1,L2}")
        return lambda cta, mask: None
    if address.offset or mods.has("global") or mods.has("local"):
        raise k.unsupported(ins, "prefetch.tensormap [map] of a kernel parameter's map")
    get_maps = tensor_map_reader(ins, k, address.base)
    return lambda cta, mask: get_maps(cta, _lanes(cta, mask)) and None


@implements("tensormap", forms="refused: tensormap.replace / cp_fenceproxy rewrite or copy map "
                               "bytes, whose layout (CUtensorMap) is not modelled")
def build_tensormap(ins, k):
    raise k.unsupported(ins, "tensormap.* changes a tensor map's bytes: maps are modelled as "
                             "objects bound to kernel parameters, their encoding is not")


# -------------------------------------------------------------------------------- warp misc


@implements("elect", forms="elect.sync d|p, membermask: the lowest executing member lane of "
                           "each warp is the leader (d: its lane id, p: am I the leader)")
def build_elect(ins, k):
    mods = Mods(ins, k, ("sync",), types=(0,))
    if not mods.has("sync"):
        raise k.unsupported(ins, "elect.sync")
    dst, membermask = operands(ins, k, 2)
    if not isinstance(dst, PredPair):
        raise k.unsupported(ins, "elect.sync writes d|p")
    write_d = None if dst.first.name == "_" else k.writer(ins, dst.first, "b32")
    write_p = k.writer(ins, dst.second, "pred")
    read_mask = k.reader(ins, membermask, "b32")

    def fn(cta, mask):
        T = cta.T
        active = np.ones(T, np.bool_) if mask is None else mask
        lane = (cta.tids % 32).astype(np.uint32)
        members = (per_thread(np.asarray(read_mask(cta), np.uint32), T) >> lane) & 1
        if np.any(active & (members == 0)):
            t = int(np.argmax(active & (members == 0)))
            raise cta.launch.error(cta, ins, "elect.sync executed by a lane outside its "
                                   "membermask (undefined)", thread=t)
        warps = -(-T // 32)
        padded = np.zeros(warps * 32, np.bool_)
        padded[:T] = active
        leader = np.argmax(padded.reshape(warps, 32), axis=1).astype(np.uint32)
        leaders = np.repeat(leader, 32)[:T]
        if write_d is not None:
            write_d(cta, leaders, mask)
        write_p(cta, lane == leaders, mask)
    return fn


@implements("setmaxnreg", forms="setmaxnreg.{inc,dec}.sync.aligned.u32 N: no-op (registers "
                                "are not a limited resource here); N checked")
def build_setmaxnreg(ins, k):
    mods = Mods(ins, k, ("inc", "dec", "sync", "aligned"))
    (count,) = operands(ins, k, 1)
    if mods.type != "u32" or mods.has("inc") == mods.has("dec") or not isinstance(count, Imm) \
            or not (24 <= count.value <= 256 and count.value % 8 == 0):
        raise k.unsupported(ins, "setmaxnreg.{inc,dec}.sync.aligned.u32 N with N a multiple "
                                 "of 8 in 24..256")
    return lambda cta, mask: None


@implements("stmatrix", forms="stmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16: the "
                              "inverse of ldmatrix (lanes 8i..8i+7 give matrix i's row addresses)")
def build_stmatrix(ins, k):
    count, trans = matrix_form(ins, k, "stmatrix")
    addr, src = operands(ins, k, 2)
    if not isinstance(src, Vec) or len(src.items) != count or not isinstance(addr, Addr):
        raise k.unsupported(ins, f"stmatrix .x{count} needs {count} source registers")
    reads = [k.reader(ins, r, "b32") for r in src.items]
    get_address = k.address(ins, addr)
    shared = Access(ins, "shared")
    lane = np.arange(32)
    row, pair = lane >> 2, 2 * (lane & 3)

    def fn(cta, mask):
        T = cta.T
        active = np.ones(T, np.bool_) if mask is None else mask
        if T % 32 or not np.all(active.reshape(-1, 32).all(axis=1)
                                | ~active.reshape(-1, 32).any(axis=1)):
            raise cta.launch.error(cta, ins, "stmatrix.sync.aligned executed by part of a warp "
                                   "(undefined)")
        addresses = per_thread(np.asarray(get_address(cta), np.uint64), T)
        values = [per_thread(np.asarray(read(cta), np.uint32), T) for read in reads]
        for warp in np.nonzero(active.reshape(-1, 32).any(axis=1))[0]:
            base = 32 * warp
            for matrix in range(count):
                word = values[matrix][base:base + 32]
                tile = np.zeros((8, 8), np.uint16)
                tile[row, pair] = (word & 0xFFFF).astype(np.uint16)
                tile[row, pair + 1] = (word >> 16).astype(np.uint16)
                if trans:
                    tile = tile.T
                rows = addresses[base + 8 * matrix: base + 8 * matrix + 8]
                where = (rows[:, None] + np.arange(8, dtype=np.uint64) * np.uint64(2)).reshape(-1)
                who = np.repeat(np.arange(base + 8 * matrix, base + 8 * matrix + 8), 8)
                shared.store(cta, where, who, np.ascontiguousarray(tile).reshape(-1))
    return fn


# ------------------------------------------------------------------------------------- wgmma

# element type -> (bytes, K of one wgmma, accumulator types)
_WGMMA_TYPES = {"f16": (2, 16, ("f16", "f32")), "bf16": (2, 16, ("f32",)),
                "tf32": (4, 8, ("f32",)), "e4m3": (1, 32, ("f16", "f32")),
                "e5m2": (1, 32, ("f16", "f32")), "s8": (1, 32, ("s32",)),
                "u8": (1, 32, ("s32",))}
_INT_N = (8, 16, 24) + tuple(range(32, 257, 16))
_ELEMENT_VIEW = {"f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16),
                 "e4m3": np.dtype(ml_dtypes.float8_e4m3fn), "e5m2": np.dtype(ml_dtypes.float8_e5m2),
                 "s8": np.dtype(np.int8), "u8": np.dtype(np.uint8)}
SWIZZLE_BYTES = {0: 0, 1: 128, 2: 64, 3: 32}  # descriptor bits 62-63 -> swizzle width


@dataclass(frozen=True)
class Descriptor:
    """A wgmma shared-memory matrix descriptor (PTX ISA "Matrix Descriptor Format")."""

    start: int  # byte address in shared memory
    leading: int  # leading dimension byte offset
    stride: int  # stride dimension byte offset
    base_offset: int
    swizzle: int  # 0 (none), 32, 64 or 128 bytes

    @classmethod
    def decode(cls, value: int) -> "Descriptor":
        return cls(((value >> 0) & 0x3FFF) << 4, ((value >> 16) & 0x3FFF) << 4,
                   ((value >> 32) & 0x3FFF) << 4, (value >> 49) & 0x7,
                   SWIZZLE_BYTES[(value >> 62) & 0x3])

    def addresses(self, rows: int, cols: int, size: int, k_major: bool) -> np.ndarray:
        """Byte addresses [rows, cols] of a (M or N) x K operand of `size`-byte elements.
        A 16-byte unit holds T = 16 / size elements. K-major: 8 rows x one unit form a core
        matrix (rows 16 bytes apart; no swizzle: units along K `leading` apart, 8-row groups
        `stride` apart) or, swizzled, rows `swizzle` bytes long hold the units along K, 8-row
        groups `stride` apart. MN-major: runs of T elements along M/N, 8 K-rows 16 bytes apart
        (no swizzle: run groups `stride` apart, 8-K-row groups `leading` apart) or, swizzled,
        K-rows `swizzle` bytes long holding swizzle/16 runs, those blocks `leading` apart along
        M/N and 8-K-row groups `stride` apart. Swizzling then XORs address bits [4, 4+b) with
        bits [7, 7+b), b = log2(swizzle / 16)."""
        T = 16 // size
        mn = np.arange(rows, dtype=np.int64)[:, None]
        kk = np.arange(cols, dtype=np.int64)[None, :]
        width = self.swizzle
        if k_major:
            within = (kk % T) * size
            if width == 0:
                offset = (mn % 8) * 16 + (mn // 8) * self.stride + (kk // T) * self.leading
            else:
                offset = (mn % 8) * width + (mn // 8) * self.stride + (kk // T) * 16
        else:
            within = (mn % T) * size
            if width == 0:
                offset = (kk % 8) * 16 + (mn // T) * self.stride + (kk // 8) * self.leading
            else:
                units = width // 16
                offset = ((mn // T) % units) * 16 + (mn // (T * units)) * self.leading + \
                    (kk % 8) * width + (kk // 8) * self.stride
        address = self.start + offset + within
        if width:
            bits = {128: 7, 64: 3, 32: 1}[width]
            address = address ^ (((address >> 7) & bits) << 4)
        return address


def _wgmma_elements(bits: np.ndarray, ptype: str) -> np.ndarray:
    """Raw element bits -> float64 (int64 for integers) values."""
    if ptype == "tf32":
        return _tf32_top_bits(bits.astype(np.uint32))
    values = bits.astype(UINT[_WGMMA_TYPES[ptype][0]]).view(_ELEMENT_VIEW[ptype])
    return values.astype(np.int64 if ptype in ("s8", "u8") else np.float64)


def _immediate(ins, k, operand, allowed, what):
    if not isinstance(operand, Imm) or operand.value not in allowed:
        raise k.unsupported(ins, f"wgmma's {what} must be one of {allowed}")
    return operand.value


# accumulator element i of warpgroup thread (warp w, lane l): row 16w + g + 8((i >> 1) & 1),
# column 8(i >> 2) + 2t + (i & 1), with g = l >> 2, t = l & 3
_WG_THREAD = np.arange(128)
_WG_WARP, _WG_G, _WG_T = _WG_THREAD >> 5, (_WG_THREAD & 31) >> 2, _WG_THREAD & 3


def accumulator_coords(n: int):
    return [(16 * _WG_WARP + _WG_G + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * _WG_T + (i & 1))
            for i in range(n // 2)]


def a_register_coords(k: int, pack: int):
    """A from registers: each warp holds rows 16w..16w+15 in mma.m16n8kK's A fragment."""
    per_warp = a_coords(16, k, pack)  # lane-indexed (rows, cols) per element
    return [(16 * _WG_WARP + rows[_WG_THREAD & 31], cols[_WG_THREAD & 31])
            for rows, cols in per_warp]


_SHAPE = re.compile(r"^m64n(\d+)k(\d+)$")


_READS = "shared bytes read"  # a group's key for the shared memory its wgmma's read


def _land(cta, group) -> None:
    """Write one group's wgmma results to their registers; the shared memory its wgmma's read
    is free to be written again."""
    for name, entry in group.items():
        if name == _READS:
            for offsets in entry:  # each operand's bytes are distinct
                cta.shared.async_reads[offsets] -= 1
            cta.shared.async_live -= len(entry)
            continue
        write, value, where = entry
        write(cta, value, where)
        if cta.wgmma_pending.get(name, (None,))[0] is value:
            del cta.wgmma_pending[name]


def _byte_offsets(where, size: int) -> np.ndarray:
    """The shared-memory byte offsets of the `size`-byte elements at addresses `where` (which
    the load before has checked lie inside it)."""
    return ((where - np.uint64(SHARED_BASE)).astype(np.int64)[:, None]
            + np.arange(size, dtype=np.int64)).reshape(-1)


def _reading(cta, offsets) -> None:
    """Mark the shared bytes at `offsets` (distinct) as read by a wgmma of the open group until
    it lands (the JIT's own code: a store there meanwhile is refused)."""
    shared = cta.shared
    if shared.async_reads is None:
        shared.async_reads = np.zeros(shared.size, np.int32)
    shared.async_reads[offsets] += 1
    shared.async_live += 1
    cta.wgmma_open.setdefault(_READS, []).append(offsets)


def _serialize_accumulator_uses(code) -> None:
    """Wrap each non-wgmma instruction that names a wgmma accumulator register so that it first
    lands the in-flight results it would touch (see the module's docstring)."""
    accumulators = set()
    for entry in code:
        ins = entry[4]
        if ins is not None and ins.opcode == "wgmma" and "mma_async" in ins.modifiers:
            accumulators.update(registers_of(ins.operands[0]))
    if not accumulators:
        return
    for index, (kind, fn, guard, control, ins) in enumerate(code):
        if fn is None or ins is None or ins.opcode == "wgmma":
            continue
        touched = tuple(accumulators.intersection(
            name for operand in ins.operands for name in registers_of(operand)))
        if touched:
            code[index] = (kind, _landing_first(fn, touched, ins), guard, control, ins)


def _landing_first(fn, names, ins):
    def run(cta, mask):
        pending = cta.wgmma_pending
        if pending and any(name in pending for name in names):
            if not cta.launch.image.serialize_wgmma:
                raise cta.launch.error(cta, ins, "touches an accumulator of a wgmma.mma_async "
                                       "still in flight (ptxas would serialise the wgmma "
                                       "pipeline here): wait for its group first")
            while any(name in pending for name in names):
                if cta.wgmma_groups:
                    _land(cta, cta.wgmma_groups.pop(0))
                elif cta.wgmma_open:  # issued, not yet committed: it is waited for too
                    group, cta.wgmma_open = cta.wgmma_open, {}
                    _land(cta, group)
                else:
                    break
            if cta.launch.profile is not None:
                cta.launch.profile.wgmma_serialized += 1
        fn(cta, mask)
    return run


KERNEL_PASSES.append(_serialize_accumulator_uses)


def _is_mma_async(ins) -> bool:
    return ins is not None and ins.opcode == "wgmma" and "mma_async" in ins.modifiers


def _branch_targets(code) -> set:
    """The code indices a branch may jump to (where straight-line reasoning must stop)."""
    return {entry[3].target for entry in code
            if entry[3] is not None and getattr(entry[3], "target", None) is not None}


def _refused_in_our_code(fn, ins, message: str):
    """`fn`, refusing to run in the JIT's own code (KernelImage.serialize_wgmma False) with
    `message`; tileiras's code, which ptxas compiles to what the emulator runs, is not judged."""
    def run(cta, mask):
        if not cta.launch.image.serialize_wgmma:
            raise cta.launch.error(cta, ins, message)
        fn(cta, mask)
    return run


def _fenced_operands(code) -> None:
    """The PTX ISA's rule for wgmma.fence: a register that another instruction wrote may be read
    as a wgmma.mma_async accumulator or A fragment only after a wgmma.fence (chained
    wgmma.mma_async's on the same accumulators need none between them), and a warpgroup's first
    wgmma.mma_async needs one before it; otherwise the result is undefined (ptxas serialises the
    pipeline there, or the hardware reads the register's earlier value), while the emulator
    reads the latest, so it checks the rule instead. Looked for backwards
    from each wgmma.mma_async through straight-line code only: a branch target ends the search
    without a verdict, so writes on other paths (a loop's back edge, a branch around the fence)
    go unchecked. For the JIT's own code a breach is an error when the wgmma runs."""
    targets = _branch_targets(code)
    for index, (kind, fn, guard, control, ins) in enumerate(code):
        if fn is None or not _is_mma_async(ins):
            continue
        read = set(registers_of(ins.operands[0]))
        if isinstance(ins.operands[1], Vec):  # A from registers
            read.update(registers_of(ins.operands[1]))
        writer = _unfenced_writer(code, index, read, targets)
        if writer is None:
            continue
        why = ("the kernel issues it with no wgmma.fence before it" if writer == "start" else
               f"`{writer.text}` (line {writer.line}) writes one of its accumulator or A "
               "registers with no wgmma.fence between")
        code[index] = (kind, _refused_in_our_code(
            fn, ins, "wgmma.mma_async reads registers written since the last wgmma.fence, which "
            f"the PTX ISA leaves undefined (ptxas may serialise the wgmma pipeline there): {why}"),
            guard, control, ins)


def _shape_of(ins):
    return next((m for m in ins.modifiers if _SHAPE.match(m)), None)


def _unfenced_writer(code, index, read, targets):
    """The instruction before code[index] that wrote one of `read` with no wgmma.fence between
    (the kernel's start, for no fence at all); None when a fence comes first or a branch target
    leaves it open. Earlier wgmma.mma_async's of the same shape chain without one."""
    shape = _shape_of(code[index][4])
    for j in range(index - 1, -1, -1):
        if j + 1 in targets:
            return None
        guard, ins = code[j][2], code[j][4]
        if ins is None:
            continue
        if _is_mma_async(ins):
            if _shape_of(ins) != shape and read.intersection(registers_of(ins.operands[0])):
                return ins
            continue
        if ins.opcode == "wgmma":
            if "fence" in ins.modifiers and guard is None:  # a predicated fence may not run
                return None
            continue
        first = ins.operands[0] if ins.operands else None  # the destination, where there is one
        if isinstance(first, (Reg, Vec, PredPair)) and read.intersection(registers_of(first)):
            return ins
    return "start"


KERNEL_PASSES.append(_fenced_operands)


def _a_registers_left_alone(code) -> None:
    """The PTX ISA's rule for a wgmma.mma_async's A fragment in registers: no other instruction
    may read or write those registers until a wgmma.wait_group retires its group (the hardware
    may read them at any time before). The emulator reads them when the wgmma is issued, so it
    checks the rule instead: looked for forwards from each such wgmma through straight-line
    code up to the wgmma.wait_group N that retires its group (more than N groups committed since
    it); a branch, a barrier or a branch target ends the search without a verdict. For the
    JIT's own code a breach is an error when the offending instruction runs."""
    targets = _branch_targets(code)
    for index, (_, fn, _, _, ins) in enumerate(code):
        if fn is None or not _is_mma_async(ins) or not isinstance(ins.operands[1], Vec):
            continue
        registers = set(registers_of(ins.operands[1]))
        committed = 0  # groups committed since (and with) this wgmma's
        for j in range(index + 1, len(code)):
            if j in targets or code[j][3] is not None:  # control may come or go elsewhere
                break
            kind, other_fn, guard, control, other = code[j]
            if other is None or _is_mma_async(other):
                continue
            if other.opcode == "wgmma" and "commit_group" in other.modifiers:
                committed += 1
                continue
            if other.opcode == "wgmma" and "wait_group" in other.modifiers:
                keep = other.operands[0] if other.operands else None
                if isinstance(keep, Imm) and committed > int(keep.value):
                    break  # its group is retired
                continue
            if any(registers.intersection(registers_of(operand)) for operand in other.operands):
                code[j] = (kind, _refused_in_our_code(
                    other_fn, other, f"touches an A register of `{ins.text}` (line {ins.line}) "
                    "before a wgmma.wait_group retires it, which the PTX ISA leaves undefined "
                    "(the hardware may read the register then)"), guard, control, other)


KERNEL_PASSES.append(_a_registers_left_alone)


@implements("wgmma", forms="wgmma.fence (its rule checked before the run), commit_group, "
                           "wait_group N (the accumulators of retired groups land); "
                           "wgmma.mma_async.sync.aligned.m64nNkK "
                           "f16/bf16 (k16), tf32 (k8), e4m3/e5m2 (k32), s8/u8 (k32, .satfinite) "
                           "with A from a descriptor or registers and B from a descriptor "
                           "(K- or MN-major, no swizzle or 32/64/128-byte swizzle), scale-d, "
                           "imm-scale-a/b, imm-trans-a/b; exact sum rounded once")
def build_wgmma(ins, k):
    mods = ins.modifiers
    if "fence" in mods or "commit_group" in mods or "wait_group" in mods:
        flags = Mods(ins, k, ("fence", "commit_group", "wait_group", "sync", "aligned"),
                     types=(0,))
        if not flags.has("sync") or not flags.has("aligned"):
            raise k.unsupported(ins, f"{ins.text.split()[0]} needs .sync.aligned")
        expected = 1 if flags.has("wait_group") else 0
        ops = operands(ins, k, expected)
        if expected and not isinstance(ops[0], Imm):
            raise k.unsupported(ins, "wgmma.wait_group takes an immediate count")
        if flags.has("commit_group"):
            def commit(cta, mask):
                cta.wgmma_groups.append(cta.wgmma_open)
                cta.wgmma_open = {}
            return commit
        if flags.has("wait_group"):
            keep = int(ops[0].value)

            def wait(cta, mask):  # the results of all but the `keep` newest groups land
                while len(cta.wgmma_groups) > keep:
                    _land(cta, cta.wgmma_groups.pop(0))
            return wait
        return lambda cta, mask: None
    shapes = [m for m in mods if _SHAPE.match(m)]
    if len(shapes) != 1:
        raise k.unsupported(ins, "wgmma.mma_async needs one m64nNkK shape")
    n, kk = (int(x) for x in _SHAPE.match(shapes[0]).groups())
    type_set = set(_WGMMA_TYPES) | {"f32", "s32"}
    flags = Mods(ins, k, ("mma_async", "sync", "aligned", "satfinite", shapes[0]), types=(3,),
                 type_set=type_set)
    if not all(flags.has(f) for f in ("mma_async", "sync", "aligned")):
        raise k.unsupported(ins, "wgmma.mma_async.sync.aligned")
    dtype, atype, btype = flags.types
    if atype not in _WGMMA_TYPES or btype not in _WGMMA_TYPES:
        raise k.unsupported(ins, f"wgmma operand types .{atype}.{btype}")
    size, k_step, accumulators = _WGMMA_TYPES[atype]
    integer = atype in ("s8", "u8")
    same_kind = atype == btype or {atype, btype} <= {"e4m3", "e5m2"} or \
        {atype, btype} <= {"s8", "u8"}
    if not same_kind or dtype not in accumulators or kk != k_step:
        raise k.unsupported(ins, f"wgmma.{shapes[0]}.{dtype}.{atype}.{btype} is not a form of "
                                 "the ISA")
    if n % 8 or not 8 <= n <= 256 or integer and n not in _INT_N:
        raise k.unsupported(ins, f"wgmma N = {n} is not a shape of the ISA")
    if flags.has("satfinite") and not integer:
        raise k.unsupported(ins, ".satfinite is for integer wgmma")
    ops = ins.operands
    a_in_registers = isinstance(ops[1], Vec) if len(ops) > 1 else False
    sixteen = size == 2
    count = 4 if integer else 6 if not sixteen else 7 if a_in_registers else 8
    ops = operands(ins, k, count)
    d_regs = ops[0].items if isinstance(ops[0], Vec) else ()
    d_count = n // 4 if dtype == "f16" else n // 2
    if len(d_regs) != d_count:
        raise k.unsupported(ins, f"wgmma m64n{n} .{dtype} needs {d_count} accumulator registers")
    if a_in_registers and len(ops[1].items) != 4:
        raise k.unsupported(ins, "wgmma's A in registers takes 4 registers")
    negate_a = negate_b = False
    trans_a = trans_b = 0
    if not integer:
        negate_a = _immediate(ins, k, ops[4], (1, -1), "imm-scale-a") == -1
        negate_b = _immediate(ins, k, ops[5], (1, -1), "imm-scale-b") == -1
    if sixteen:
        if a_in_registers:
            trans_b = _immediate(ins, k, ops[6], (0, 1), "imm-trans-b")
        else:
            trans_a = _immediate(ins, k, ops[6], (0, 1), "imm-trans-a")
            trans_b = _immediate(ins, k, ops[7], (0, 1), "imm-trans-b")
    scale = ops[3]
    if isinstance(scale, Imm):
        keep_d = _immediate(ins, k, scale, (0, 1), "scale-d")
        read_scale = lambda cta: np.bool_(keep_d)  # noqa: E731
    elif isinstance(scale, (Reg, Not)):
        read_scale = k.reader(ins, scale, "pred")
    else:
        raise k.unsupported(ins, "wgmma's scale-d is a predicate or 0/1")
    acc_storage = "b32" if dtype == "f16" else dtype
    read_d = [k.reader(ins, r, acc_storage) for r in d_regs]
    d_names = [r.name for r in d_regs]
    if len(set(d_names)) != len(d_names) or not all(isinstance(r, Reg) for r in d_regs):
        raise k.unsupported(ins, "wgmma's accumulators must be distinct registers")
    write_d = [k.writer(ins, r, acc_storage) for r in d_regs]
    read_a = [k.reader(ins, r, "b32") for r in ops[1].items] if a_in_registers else \
        k.reader(ins, ops[1], "b64")
    read_b = k.reader(ins, ops[2], "b64")
    pack = 4 // size
    D_at = accumulator_coords(n)
    A_at = a_register_coords(kk, pack) if a_in_registers else None
    shared = Access(ins, "shared")
    work = np.int64 if integer else np.float64
    # every accumulator element's (row, column), one row per register: (registers, 128)
    D_rows = np.stack([rows for rows, _ in D_at])
    D_cols = np.stack([cols for _, cols in D_at])
    out_type = np.float32 if dtype == "f32" else np.int32
    operand_addresses: dict = {}  # (descriptor, rows, k_major) -> addresses (a k loop repeats)

    def operand_from_shared(cta, value, rows, k_major, ptype, thread):
        desc = Descriptor.decode(int(value))
        if desc.base_offset and desc.swizzle:  # (the field means nothing without a swizzle)
            raise cta.launch.error(cta, ins, "wgmma descriptor with a non-zero matrix base "
                                   "offset (a swizzle pattern not starting at its alignment) "
                                   "is not emulated", thread=thread)
        key = (int(value), rows, k_major)
        found = operand_addresses.get(key)
        if found is None:
            if len(operand_addresses) >= 256:
                operand_addresses.clear()
            where = desc.addresses(rows, kk, size, k_major).astype(np.uint64).reshape(-1)
            found = operand_addresses[key] = [where, None]  # the byte offsets when first asked
        where = found[0]
        bits = shared.load(cta, where, np.full(where.size, thread), UINT[size])
        if not cta.launch.image.serialize_wgmma:
            if found[1] is None:
                found[1] = _byte_offsets(where, size)
            _reading(cta, found[1])
        return _wgmma_elements(bits, ptype).reshape(rows, kk)

    def uniform(cta, values, base, what):
        group = per_thread(np.asarray(values), cta.T)[base:base + 128]
        if np.any(group != group[0]):
            raise cta.launch.error(cta, ins, f"wgmma: the {what} differs between the threads "
                                   "of a warpgroup", thread=base + int(np.argmax(group != group[0])))
        return group[0]

    def fn(cta, mask):
        T = cta.T
        active = np.ones(T, np.bool_) if mask is None else mask
        if T % 128:
            raise cta.launch.error(cta, ins, f"wgmma needs whole warpgroups (128 threads); the "
                                   f"CTA has {T}")
        groups = active.reshape(-1, 128)
        partial = groups.any(axis=1) & ~groups.all(axis=1)
        if np.any(partial):
            g = int(np.argmax(partial))
            raise cta.launch.error(cta, ins, f"wgmma.mma_async.aligned executed by part of "
                                   f"warpgroup {g} (undefined)",
                                   thread=128 * g + int(np.argmin(groups[g])))
        scales = per_thread(np.asarray(read_scale(cta)), T)
        b_desc = read_b(cta)
        a_desc = None if a_in_registers else read_a(cta)
        a_words = [per_thread(np.asarray(r(cta), np.uint32), T) for r in read_a] \
            if a_in_registers else None
        pending = cta.wgmma_pending  # accumulators of wgmma's still in flight chain on
        c_words = [pending[name][0] if name in pending else
                   per_thread(np.asarray(r(cta)), T) for name, r in zip(d_names, read_d)]
        stacked = dtype != "f16" and all(w.dtype == c_words[0].dtype for w in c_words)
        if stacked:  # the registers as rows of one array: each group reads and writes them at once
            words = np.stack(c_words)
            outputs = list(words)
        else:
            outputs = [np.array(w, copy=True) for w in c_words]
        for group in np.nonzero(groups.any(axis=1))[0]:
            base = 128 * int(group)
            if a_in_registers:
                A = np.zeros((64, kk), work)
                index = 0
                for word in a_words:
                    word = word[base:base + 128]
                    for j in range(pack):
                        bits = (word >> np.uint32(8 * size * j)) & np.uint32((1 << 8 * size) - 1)
                        rows, cols = A_at[index]
                        A[rows, cols] = _wgmma_elements(bits, atype)
                        index += 1
            else:
                A = operand_from_shared(cta, uniform(cta, a_desc, base, "A descriptor"), 64,
                                        not trans_a, atype, base)
            Bt = operand_from_shared(cta, uniform(cta, b_desc, base, "B descriptor"), n,
                                     not trans_b, btype, base)  # N x K
            keep = bool(uniform(cta, scales, base, "scale-d"))
            if negate_a:
                A = -A
            if negate_b:
                Bt = -Bt
            product = A @ Bt.T
            C = np.zeros((64, n), work)
            if keep and stacked:
                C[D_rows, D_cols] = words[:, base:base + 128].astype(work)
            elif keep:
                for index, word in enumerate(c_words):
                    word = word[base:base + 128]
                    if dtype == "f16":
                        halves = np.asarray(word, np.uint32)
                        for half in range(2):
                            rows, cols = D_at[2 * index + half]
                            C[rows, cols] = ((halves >> np.uint32(16 * half)) & 0xFFFF) \
                                .astype(np.uint16).view(np.float16).astype(np.float64)
                    else:
                        rows, cols = D_at[index]
                        C[rows, cols] = word.astype(work)
            D = product + C
            if integer:
                if flags.has("satfinite"):
                    D = np.clip(D, -2 ** 31, 2 ** 31 - 1)
                D = D.astype(np.uint64).astype(np.uint32).view(np.int32)
            if stacked:
                words[:, base:base + 128] = D[D_rows, D_cols].astype(out_type)
                continue
            for index in range(len(outputs)):
                if dtype == "f16":
                    (r0, c0), (r1, c1) = D_at[2 * index], D_at[2 * index + 1]
                    low = D[r0, c0].astype(np.float16).view(np.uint16).astype(np.uint32)
                    high = D[r1, c1].astype(np.float16).view(np.uint16).astype(np.uint32)
                    outputs[index][base:base + 128] = low | (high << np.uint32(16))
                else:
                    rows, cols = D_at[index]
                    outputs[index][base:base + 128] = D[rows, cols].astype(
                        np.float32 if dtype == "f32" else np.int32)
        for name, value, write in zip(d_names, outputs, write_d):
            pending[name] = (value, mask)
            cta.wgmma_open[name] = (write, value, mask)
    return fn
