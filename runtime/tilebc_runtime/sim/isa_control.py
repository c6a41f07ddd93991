"""Instruction semantics, part 3: control flow, barriers, fences, vprintf calls and warp-level
instructions (shfl.sync, vote.sync, activemask).

Warp instructions work on the threads' warps (32 consecutive thread ids); a thread whose partner
lane is not executing the instruction (inactive or outside membermask) reads an undefined value on
the device, so the emulator reports it.
"""
from __future__ import annotations

import re

import numpy as np
from tilebc.interp.ops.debug import PRINT_MAX_WIDTH

from .registry import Mods, implements, operands, per_thread
from .machine import BARRIER, BRANCH, RETURN, TRAP, Control
from .syntax import Imm, PredPair, Sym, Vec
from .state import LOCAL_WINDOW, SHARED_WINDOW, WINDOW_SIZE


@implements("bra", forms="bra{.uni} label, predicated or not; divergence handled with per-thread "
                         "program counters, bra.uni checked to be uniform")
def build_bra(ins, k):
    Mods(ins, k, ("uni",), types=(0,))
    (target,) = operands(ins, k, 1)
    if not isinstance(target, Sym):
        raise k.unsupported(ins, "indirect branches are not emulated")
    return Control(BRANCH, k.label(ins, target.name), uniform="uni" in ins.modifiers)


@implements("ret", "exit", forms="ret / exit (a predicated one retires part of the CTA)")
def build_ret(ins, k):
    Mods(ins, k, ("uni",), types=(0,))
    operands(ins, k, 0)
    return Control(RETURN)


@implements("trap", forms="trap: raises SimTrap with what the CTA printed (the assert message)")
def build_trap(ins, k):
    Mods(ins, k, types=(0,))
    return Control(TRAP)


@implements("bar", "barrier", forms="bar.sync / barrier.sync{.aligned} id{, count}: the whole "
                                    "CTA, or `count` threads; bar.arrive / barrier.arrive id, "
                                    "count (arrive without waiting); bar.warp.sync (orders "
                                    "shared memory in a one-warp CTA)")
def build_bar(ins, k):
    mods = Mods(ins, k, ("sync", "aligned", "warp", "arrive"), types=(0,))
    if mods.has("warp"):
        operands(ins, k, 1)

        def warp_sync(cta, mask):
            # bar.warp.sync also orders memory among the warp's threads: in a one-warp CTA
            # reached by every live thread, that is a CTA barrier for the race checker
            if cta.T <= 32 and mask is None:
                cta.shared.barrier()
        return warp_sync
    if mods.has("sync") == mods.has("arrive"):
        raise k.unsupported(ins, "only bar.sync / barrier.sync and bar.arrive / barrier.arrive "
                                 "are emulated (no bar.red)")
    ops = ins.operands
    barrier = getattr(ops[0], "value", None) if ops else None
    if not 1 <= len(ops) <= 2 or not isinstance(barrier, int) or not 0 <= barrier < 16:
        raise k.unsupported(ins, "bar.sync needs an immediate barrier number 0..15")
    if mods.has("arrive") and len(ops) != 2:
        raise k.unsupported(ins, "bar.arrive needs a thread count")
    if len(ops) == 2:
        count = getattr(ops[1], "value", None)
        if not isinstance(count, int) or count <= 0 or count % 32:
            raise k.unsupported(ins, "a barrier's thread count must be an immediate multiple "
                                     "of 32")
        # (the race checker's ordering point is shared by the whole CTA)
        return Control(BARRIER, threads=count, barrier=barrier, arrive=mods.has("arrive"))
    return Control(BARRIER, barrier=barrier)


@implements("membar", "fence", forms="no-ops: the emulator executes memory operations in "
                                     "program order, one CTA at a time (asynchronous copies and "
                                     "wgmma included); fence.proxy.async{.shared/.global}, "
                                     "fence.mbarrier_init.release.cluster")
def build_fence(ins, k):
    Mods(ins, k, ("cta", "gl", "sys", "gpu", "cluster", "sc", "acq_rel", "acquire", "release",
                  "proxy", "async", "alias", "mbarrier_init", "shared", "global",
                  "shared::cluster"), types=(0,))
    return lambda cta, mask: None


@implements("griddepcontrol", forms="launch_dependents / wait: no-ops (one grid at a time)")
def build_griddepcontrol(ins, k):
    Mods(ins, k, ("launch_dependents", "wait"), types=(0,))
    return lambda cta, mask: None


# -------------------------------------------------------------------------------- vprintf

_FORMAT = re.compile(r"%([-+ #0]*)(\d+|\*)?(?:\.(\d+|\*))?(hh|h|ll|l|z|j|t|L)?([diouxXcsfFeEgGaAp%])")


def _read_c_string(memory, address: int, fault) -> bytes:
    buffer = memory.buffer_at(address)
    if buffer is None:
        fault("vprintf format string is not in global memory", address=address)
    start = address - buffer.base
    data = bytes(buffer.data[start:])
    end = data.find(b"\0")
    if end < 0:
        fault("vprintf format string has no terminating NUL", address=address)
    return data[:end]


def format_printf(fmt: str, read_arg) -> str:
    """C printf formatting for vprintf: `read_arg(kind, size)` returns the next argument
    ('i' signed int, 'u' unsigned, 'f' double, 'p' pointer) from the argument buffer."""
    out = []
    position = 0
    for match in _FORMAT.finditer(fmt):
        out.append(fmt[position:match.start()])
        position = match.end()
        flags, width, precision, length, conv = match.groups()
        if conv == "%":
            out.append("%")
            continue
        if width == "*" or precision == "*":
            raise ValueError("'*' widths are not supported")
        if any(len(number.lstrip("0")) > 10 or int(number) > PRINT_MAX_WIDTH
               for number in (width, precision) if number):
            # the interpreter's bound (tilebc/interp/ops/debug.py), so both refuse the same
            raise ValueError(f"conversion {match.group(0)[:40]!r} asks for a width or precision "
                             f"above {PRINT_MAX_WIDTH}")
        spec = "%" + (flags or "") + (width or "") + (f".{precision}" if precision else "")
        size = 8 if length in ("l", "ll", "z", "j", "t") else 4
        if conv in "di":
            out.append((spec + "d") % read_arg("i", size))
        elif conv in "ouxX":
            out.append((spec + conv) % read_arg("u", size))
        elif conv == "c":
            out.append((spec + "c") % chr(read_arg("u", 4) & 0xFF))
        elif conv in "fFeEgGaA":
            value = read_arg("f", 8)
            out.append(float(value).hex() if conv in "aA" else (spec + conv) % value)
        elif conv == "p":
            out.append(hex(read_arg("p", 8)))
        elif conv == "s":
            out.append((spec + "s") % read_arg("s", 8))
    out.append(fmt[position:])
    return "".join(out)


@implements("call", forms="call (ret), vprintf, (format, args): C formatting of the argument "
                          "buffer, in thread order, to print_stream")
def build_call(ins, k):
    Mods(ins, k, ("uni",), types=(0,))
    ops = list(ins.operands)
    if ops and isinstance(ops[0], Vec):
        ops = ops[1:]
    if len(ops) != 2 or not isinstance(ops[0], Sym) or ops[0].name != "vprintf" \
            or not isinstance(ops[1], Vec) or len(ops[1].items) != 2:
        raise k.unsupported(ins, "only `call (r), vprintf, (fmt, args)` is emulated")
    fmt_param, args_param = (item.name for item in ops[1].items)
    from .isa_memory import Access

    def fn(cta, mask):
        import sys
        stream = cta.launch.print_stream or sys.stdout
        fault = cta.launch.fault_for(cta, ins)
        lanes = cta.tids if mask is None else np.nonzero(mask)[0]
        memory = cta.launch.memory
        for lane in lanes:
            fmt_address = int(cta.call_params[fmt_param][lane])
            cursor = [int(cta.call_params[args_param][lane])]
            fmt = _read_c_string(memory, fmt_address, fault).decode("utf-8", "replace")

            def read_arg(kind, size, lane=lane):
                address = -(-cursor[0] // size) * size
                cursor[0] = address + size
                dtype = {("i", 4): np.int32, ("i", 8): np.int64, ("u", 4): np.uint32,
                         ("u", 8): np.uint64, ("f", 8): np.float64, ("p", 8): np.uint64,
                         ("s", 8): np.uint64}[(kind, size)]
                value = Access(ins, "generic").load(
                    cta, np.asarray([address], np.uint64), np.asarray([lane]),
                    np.dtype(dtype))[0]
                if kind == "s":
                    return _read_c_string(memory, int(value), fault).decode("utf-8", "replace")
                return float(value) if kind == "f" else int(value)
            try:
                text = format_printf(fmt, read_arg)
            except ValueError as error:
                raise cta.launch.error(cta, ins, f"vprintf: {error}", thread=int(lane)) from None
            cta.printed.append(text)
            stream.write(text)
    return fn


# ---------------------------------------------------------------------------------- warps

def _warp_active(cta, mask, membermask):
    """Per thread: is it executing, and in its warp's membermask."""
    active = np.ones(cta.T, np.bool_) if mask is None else mask.copy()
    lane = cta.tids % 32
    members = (per_thread(np.asarray(membermask, np.uint32), cta.T)
               >> lane.astype(np.uint32)) & 1
    return active & (members == 1)


@implements("shfl", forms="shfl.sync.{up,down,bfly,idx}.b32 d[|p], a, b, c, membermask")
def build_shfl(ins, k):
    mods = Mods(ins, k, ("sync", "up", "down", "bfly", "idx"))
    modes = [m for m in ("up", "down", "bfly", "idx") if mods.has(m)]
    if not mods.has("sync") or len(modes) != 1 or mods.type != "b32":
        raise k.unsupported(ins, "only shfl.sync.{up,down,bfly,idx}.b32 is emulated")
    mode = modes[0]
    dst, a, b, c, membermask = operands(ins, k, 5)
    ra, rb, rc = (k.reader(ins, x, "b32") for x in (a, b, c))
    rm = k.reader(ins, membermask, "b32")
    if isinstance(dst, PredPair):
        write_d, write_p = k.writer(ins, dst.first, "b32"), k.writer(ins, dst.second, "pred")
    else:
        write_d, write_p = k.writer(ins, dst, "b32"), None
    # lane, mask and clamp operands that are immediates (the usual shuffle) make the source
    # lanes of a whole-CTA shuffle the same at every execution: T -> (source, valid), or False
    # when the exact path must run (it reports the undefined reads)
    constant = all(isinstance(x, Imm) for x in (b, c, membermask))
    whole_cta: dict = {}

    def fn(cta, mask):
        if constant and mask is None:
            known = whole_cta.get(cta.T)
            if known is None:
                known = whole_cta[cta.T] = plan(cta, None)
                if known is not False:  # kept for every later CTA and launch: read-only
                    for array in known:
                        array.setflags(write=False)
            if known is not False:
                source, valid = known
                write_d(cta, per_thread(np.asarray(ra(cta)), cta.T)[source], None)
                if write_p is not None:
                    write_p(cta, valid, None)
                return
        plan(cta, mask, run=True)

    def plan(cta, mask, run=False):
        """The shuffle's (source lanes, valid); run: also write the results (and report an
        undefined read); without run, False where a read is undefined."""
        T = cta.T
        lane = (cta.tids % 32).astype(np.int64)
        base = cta.tids - lane
        bval = per_thread(np.asarray(rb(cta)).astype(np.int64), T)
        cval = per_thread(np.asarray(rc(cta)).astype(np.int64), T)
        clamp, segmask = cval & 0x1F, (cval >> 8) & 0x1F
        max_lane = (lane & segmask) | (clamp & ~segmask)
        min_lane = lane & segmask
        if mode == "up":
            j = lane - bval
            valid = j >= max_lane
        elif mode == "down":
            j = lane + bval
            valid = j <= max_lane
        elif mode == "bfly":
            j = lane ^ bval
            valid = j <= max_lane
        else:
            j = min_lane | (bval & ~segmask & 0x1F)
            valid = j <= max_lane
        j = np.where(valid, j, lane) & 0x1F
        source = base + j
        executing = _warp_active(cta, mask, rm(cta))
        me = np.ones(T, np.bool_) if mask is None else mask
        bad = me & valid & ~executing[np.minimum(source, T - 1)] | me & (source >= T)
        if not run:
            return False if np.count_nonzero(bad) else (source, valid)
        if bad.any():
            t = int(np.argmax(bad))
            raise cta.launch.error(cta, ins, f"shfl.sync: thread {t} reads lane {int(j[t])}, "
                                   f"which is not executing the shuffle (undefined)",
                                   thread=t)
        values = per_thread(np.asarray(ra(cta)), T)
        write_d(cta, values[source], mask)
        if write_p is not None:
            write_p(cta, valid, mask)
    return fn


@implements("vote", forms="vote.sync.{all,any,uni}.pred and vote.sync.ballot.b32")
def build_vote(ins, k):
    mods = Mods(ins, k, ("sync", "all", "any", "uni", "ballot"))
    modes = [m for m in ("all", "any", "uni", "ballot") if mods.has(m)]
    if not mods.has("sync") or len(modes) != 1:
        raise k.unsupported(ins, "only vote.sync.{all,any,uni,ballot} is emulated")
    mode = modes[0]
    if (mode == "ballot") != (mods.type == "b32") or (mode != "ballot" and mods.type != "pred"):
        raise k.unsupported(ins, "vote.ballot is .b32, the others .pred")
    dst, a, membermask = operands(ins, k, 3)
    ra = k.reader(ins, a, "pred")
    rm = k.reader(ins, membermask, "b32")
    write = k.writer(ins, dst, mods.type)

    def fn(cta, mask):
        T = cta.T
        pred = per_thread(np.asarray(ra(cta)), T)
        members = _warp_active(cta, mask, rm(cta))
        warps = -(-T // 32)
        padded = np.zeros(warps * 32, np.bool_)
        padded[:T] = pred & members
        taking = np.zeros(warps * 32, np.bool_)
        taking[:T] = members
        per_warp = padded.reshape(warps, 32)
        member_warp = taking.reshape(warps, 32)
        if mode == "ballot":
            weights = (np.uint64(1) << np.arange(32, dtype=np.uint64))
            bits = (per_warp.astype(np.uint64) * weights).sum(axis=1).astype(np.uint32)
            out = np.repeat(bits, 32)[:T]
        else:
            ones = per_warp.sum(axis=1)
            count = member_warp.sum(axis=1)
            result = {"all": ones == count, "any": ones > 0,
                      "uni": (ones == count) | (ones == 0)}[mode]
            out = np.repeat(result, 32)[:T]
        write(cta, out, mask)
    return fn


@implements("activemask", forms="activemask.b32: the executing threads of the warp")
def build_activemask(ins, k):
    mods = Mods(ins, k)
    if mods.type != "b32":
        raise k.unsupported(ins, "activemask is .b32")
    (dst,) = operands(ins, k, 1)
    write = k.writer(ins, dst, "b32")

    def fn(cta, mask):
        T = cta.T
        active = np.ones(T, np.bool_) if mask is None else mask
        warps = -(-T // 32)
        padded = np.zeros(warps * 32, np.bool_)
        padded[:T] = active
        weights = (np.uint64(1) << np.arange(32, dtype=np.uint64))
        bits = (padded.reshape(warps, 32).astype(np.uint64) * weights).sum(axis=1)
        write(cta, np.repeat(bits.astype(np.uint32), 32)[:T], mask)
    return fn
