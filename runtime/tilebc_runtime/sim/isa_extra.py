"""Instruction semantics, part 5: what NVIDIA's tileiras emits for sm_80 beyond our JIT's subset:
byte permute (prmt), funnel shift (shf), warp reduction (redux.sync), asynchronous copies
(cp.async + commit/wait groups), ldmatrix, and .f16/.bf16 scalar arithmetic (add/sub/mul/fma).

cp.async reads its source when it runs but lands in shared memory only when the issuing thread's
cp.async.wait_group / wait_all covers its group (the latest legal moment the ISA allows), so a
kernel that reads a destination before waiting for it reads the old bytes, and one that lets a
copy land while other threads still read the buffer is caught by the shared-memory race check.
Copies never waited for do not land.
"""
from __future__ import annotations

import numpy as np

from tilebc.numeric import convert

from . import fp
from .registry import Mods, implements, operands, per_thread
from .isa_control import _warp_active
from .isa_memory import Access, _lanes
from .dtypes import DTYPE
from .syntax import Addr, Imm, Reg, Vec
from .state import UINT

HALF = {"f16": np.dtype(np.float16)}


# ------------------------------------------------------------------------------ bit shuffles


@implements("prmt", forms="prmt.b32 d, a, b, c (default mode: selector nibbles, bit 3 "
                          "replicates the selected byte's sign)")
def build_prmt(ins, k):
    mods = Mods(ins, k, ())
    if mods.type != "b32":
        raise k.unsupported(ins, "only prmt.b32 (default mode) is emulated")
    d, a, b, c = operands(ins, k, 4)
    ra, rb, rc = (k.reader(ins, x, "b32") for x in (a, b, c))
    write = k.writer(ins, d, "b32")

    def fn(cta, mask):
        # the eight source bytes {b, a}: 0-3 from a, 4-7 from b
        a_v, b_v, sel = np.broadcast_arrays(np.asarray(ra(cta), np.uint64),
                                            np.asarray(rb(cta), np.uint64),
                                            np.asarray(rc(cta), np.uint64))
        source = a_v | (b_v << np.uint64(32))
        out = np.zeros(a_v.shape, np.uint64)
        for byte in range(4):
            nibble = (sel >> np.uint64(4 * byte)) & np.uint64(0xF)
            picked = (source >> ((nibble & np.uint64(7)) * np.uint64(8))) & np.uint64(0xFF)
            sign = np.where((picked & np.uint64(0x80)) != 0, np.uint64(0xFF), np.uint64(0))
            value = np.where((nibble & np.uint64(8)) != 0, sign, picked)
            out |= value << np.uint64(8 * byte)
        write(cta, out.astype(np.uint32), mask)
    return fn


@implements("shf", forms="shf.{l,r}.{wrap,clamp}.b32 d, a, b, c: funnel shift of the 64-bit b:a")
def build_shf(ins, k):
    mods = Mods(ins, k, ("l", "r", "wrap", "clamp"))
    left = mods.has("l")
    if mods.type != "b32" or mods.has("l") == mods.has("r") or \
            mods.has("wrap") == mods.has("clamp"):
        raise k.unsupported(ins, "shf needs .l or .r, .wrap or .clamp, and .b32")
    wrap = mods.has("wrap")
    d, a, b, c = operands(ins, k, 4)
    ra, rb, rc = (k.reader(ins, x, "b32") for x in (a, b, c))
    write = k.writer(ins, d, "b32")

    def fn(cta, mask):
        low, high, amount = np.broadcast_arrays(np.asarray(ra(cta), np.uint64),
                                                np.asarray(rb(cta), np.uint64),
                                                np.asarray(rc(cta), np.uint64))
        n = amount & np.uint64(31) if wrap else np.minimum(amount, np.uint64(32))
        joined = (high << np.uint64(32)) | low
        if left:  # upper 32 bits of (b:a << n)
            out = ((joined << n) >> np.uint64(32)) & np.uint64(0xFFFFFFFF)
            out = np.where(n == 32, low, out)
        else:  # lower 32 bits of (b:a >> n)
            out = (joined >> n) & np.uint64(0xFFFFFFFF)
            out = np.where(n == 32, high, out)
        write(cta, out.astype(np.uint32), mask)
    return fn


# ------------------------------------------------------------------------------ warp reduction


_REDUX = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
          "or": np.bitwise_or, "xor": np.bitwise_xor}


@implements("redux", forms="redux.sync.{add,min,max}.{s32,u32} and .{and,or,xor}.b32 d, a, "
                           "membermask (wrapping add)")
def build_redux(ins, k):
    mods = Mods(ins, k, ("sync",) + tuple(_REDUX))
    ops = [name for name in _REDUX if mods.has(name)]
    ptype = mods.type
    if not mods.has("sync") or len(ops) != 1 or ptype not in ("s32", "u32", "b32") or \
            (ops[0] in ("and", "or", "xor")) != (ptype == "b32"):
        raise k.unsupported(ins, "only redux.sync.{add,min,max}.{s32,u32} / {and,or,xor}.b32")
    combine = _REDUX[ops[0]]
    d, a, membermask = operands(ins, k, 3)
    ra, rm = k.reader(ins, a, ptype), k.reader(ins, membermask, "b32")
    write = k.writer(ins, d, ptype)
    wide = np.int64 if ptype == "s32" else np.uint64

    def fn(cta, mask):
        T = cta.T
        executing = _warp_active(cta, mask, rm(cta))
        me = np.ones(T, np.bool_) if mask is None else mask
        members = per_thread(np.asarray(rm(cta), np.uint32), T)
        lane = cta.tids % 32
        if np.any(me & ~executing) or np.any(me & ((members >> lane.astype(np.uint32)) & 1
                                                   == 0)):
            t = int(np.argmax(me & ~executing))
            raise cta.launch.error(cta, ins, "redux.sync: the membermask names lanes that do "
                                   "not execute it, or omits the executing lane (undefined)",
                                   thread=t)
        values = per_thread(np.asarray(ra(cta)), T).astype(wide)
        out = np.zeros(T, wide)
        for start in range(0, T, 32):
            part = slice(start, start + 32)
            mine = executing[part]
            if mine.any():
                out[part] = combine.reduce(values[part][mine])
        write(cta, out.astype(np.uint64).astype(np.uint32).view(np.dtype(
            np.int32 if ptype == "s32" else np.uint32)), mask)
    return fn


# ------------------------------------------------------------------------------ async copies


class AsyncCopies:
    """A CTA's cp.async copies in flight: each thread's committed group count (its open group's
    number) and the copies read but not landed, as (group per lane, lanes, shared addresses,
    bytes, the store that lands them)."""

    def __init__(self, threads: int):
        self.committed = np.zeros(threads, np.int64)
        self.pending: list = []

    def land(self, cta, lanes: np.ndarray, keep: np.ndarray) -> None:
        """Land the copies of `lanes` in groups below keep[lane] (committed groups only)."""
        limit = np.full(cta.T, -1, np.int64)
        limit[lanes] = keep[lanes]
        still = []
        for group, who, dst, data, store in self.pending:
            due = group < limit[who]
            if due.any():
                size = data.shape[1]
                store.store(cta, dst[due].reshape(-1), np.repeat(who[due], size),
                            data[due].reshape(-1))
            if not due.all():
                rest = ~due
                still.append((group[rest], who[rest], dst[rest], data[rest], store))
        self.pending = still


def _async_copies(cta) -> AsyncCopies:
    state = getattr(cta, "async_copies", None)
    if state is None:
        state = cta.async_copies = AsyncCopies(cta.T)
    return state


def land_all_copies(cta, lanes: np.ndarray) -> None:
    """Every copy `lanes` issued, committed or not (cp.async.mbarrier.arrive waits for them)."""
    state = getattr(cta, "async_copies", None)
    if state is not None:
        state.land(cta, lanes, np.full(cta.T, np.iinfo(np.int64).max, np.int64))


@implements("cp", forms="cp.async.{ca,cg}.shared.global [dst], [src], size{, src-size} (source "
                        "read at once, the rest zero-filled, landing at the wait that covers "
                        "its group); cp.async.commit_group / wait_group N / wait_all")
def build_cp(ins, k):
    mods = Mods(ins, k, ("async", "ca", "cg", "shared", "global", "commit_group", "wait_group",
                         "wait_all", "L2::128B", "L2::64B", "L2::256B"), types=(0,))
    if not mods.has("async"):
        raise k.unsupported(ins, "only cp.async is emulated")
    if mods.has("commit_group"):
        def commit(cta, mask):
            _async_copies(cta).committed[_lanes(cta, mask)] += 1
        return commit
    if mods.has("wait_group") or mods.has("wait_all"):
        if mods.has("wait_all"):  # commits the open group, then waits for every group
            newest = 0
        elif len(ins.operands) != 1 or not isinstance(ins.operands[0], Imm):
            raise k.unsupported(ins, "cp.async.wait_group takes an immediate group count")
        else:
            newest = int(ins.operands[0].value)

        def wait(cta, mask):
            state = _async_copies(cta)
            lanes = _lanes(cta, mask)
            if mods.has("wait_all"):
                state.committed[lanes] += 1
            state.land(cta, lanes, state.committed - newest)
        return wait
    if not (mods.has("shared") and mods.has("global")) or mods.has("ca") == mods.has("cg"):
        raise k.unsupported(ins, "cp.async needs .ca or .cg and .shared.global")
    if len(ins.operands) not in (3, 4):
        raise k.unsupported(ins, "cp.async takes [dst], [src], cp-size{, src-size}")
    dst, src, size = ins.operands[:3]
    if not isinstance(size, Imm) or size.value not in (4, 8, 16):
        raise k.unsupported(ins, "cp.async's cp-size must be 4, 8 or 16")
    size = int(size.value)
    read_src_size = k.reader(ins, ins.operands[3], "u32") if len(ins.operands) == 4 else None
    get_dst, get_src = k.address(ins, dst), k.address(ins, src)
    load, store = Access(ins, "global"), Access(ins, "shared")

    def fn(cta, mask):
        lanes = _lanes(cta, mask)
        count = np.full(len(lanes), size, np.int64)
        if read_src_size is not None:
            given = per_thread(np.asarray(read_src_size(cta), np.int64), cta.T)[lanes]
            count = np.minimum(given, size)
        offsets = np.arange(size, dtype=np.uint64)
        src_addr = per_thread(np.asarray(get_src(cta), np.uint64), cta.T)[lanes]
        dst_addr = per_thread(np.asarray(get_dst(cta), np.uint64), cta.T)[lanes]
        data = np.zeros((len(lanes), size), np.uint8)
        wanted = offsets[None, :] < count[:, None].astype(np.uint64)
        if wanted.any():  # only the src-size bytes are read (the rest may be out of bounds)
            rows, cols = np.nonzero(wanted)
            data[rows, cols] = load.load(cta, src_addr[rows] + offsets[cols], lanes[rows],
                                         np.dtype(np.uint8))
        state = _async_copies(cta)
        state.pending.append((state.committed[lanes].copy(), lanes.copy(),
                              dst_addr[:, None] + offsets[None, :], data, store))
    return fn


# ------------------------------------------------------------------------------ ldmatrix


def matrix_form(ins, k, name):
    """(matrix count, transposed) of an ldmatrix/stmatrix .sync.aligned.m8n8.{x1,x2,x4}{.trans}
    .shared.b16 instruction; any other form is refused."""
    mods = Mods(ins, k, ("sync", "aligned", "m8n8", "x1", "x2", "x4", "trans", "shared"))
    counts = [n for n, flag in ((1, "x1"), (2, "x2"), (4, "x4")) if mods.has(flag)]
    if not (mods.has("sync") and mods.has("aligned") and mods.has("m8n8")) or \
            len(counts) != 1 or mods.type != "b16":
        raise k.unsupported(ins, f"only {name}.sync.aligned.m8n8.{{x1,x2,x4}}{{.trans}}"
                                 "{.shared}.b16 is emulated")
    return counts[0], mods.has("trans")


@implements("ldmatrix", forms="ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16: lanes "
                              "8i..8i+7 give the row addresses of matrix i; lane l receives row "
                              "l/4, elements 2(l%4), 2(l%4)+1 (transposed: that column)")
def build_ldmatrix(ins, k):
    count, trans = matrix_form(ins, k, "ldmatrix")
    dst, addr = operands(ins, k, 2)
    if not isinstance(dst, Vec) or len(dst.items) != count or not isinstance(addr, Addr):
        raise k.unsupported(ins, f"ldmatrix .x{count} needs {count} destination registers")
    writes = [k.writer(ins, r, "b32") for r in dst.items]
    get_address = k.address(ins, addr)
    shared = Access(ins, "shared")
    lane = np.arange(32)
    row, pair = lane >> 2, 2 * (lane & 3)

    def fn(cta, mask):
        T = cta.T
        if T % 32 or (mask is not None and not np.all(mask.reshape(-1, 32).all(axis=1)
                                                      | ~mask.reshape(-1, 32).any(axis=1))):
            raise cta.launch.error(cta, ins, "ldmatrix.sync.aligned executed by part of a warp "
                                   "(undefined)")
        addresses = per_thread(np.asarray(get_address(cta), np.uint64), T)
        active = np.ones(T, np.bool_) if mask is None else mask
        out = [np.zeros(T, np.uint32) for _ in range(count)]
        warps = np.nonzero(active.reshape(-1, 32).any(axis=1))[0]
        if len(warps):  # every active warp's matrices in one shared-memory read
            base = 32 * warps
            # lanes 8i..8i+7 of a warp give matrix i's 8 row starts: (warps, matrix, row)
            rows = addresses.reshape(-1, 32)[warps, :8 * count].reshape(len(warps), count, 8)
            where = (rows[..., None] + np.arange(8, dtype=np.uint64) * np.uint64(2)).reshape(-1)
            tile = shared.load(cta, where, np.repeat(base, 64 * count), np.dtype(np.uint16)) \
                .reshape(len(warps), count, 8, 8)
            if trans:
                tile = tile.swapaxes(2, 3)
            low = tile[:, :, row, pair].astype(np.uint32)
            high = tile[:, :, row, pair + 1].astype(np.uint32)
            values = low | (high << np.uint32(16))  # (warps, matrix, lane)
            lanes = (base[:, None] + lane).reshape(-1)
            for matrix in range(count):
                out[matrix][lanes] = values[:, matrix].reshape(-1)
        for value, write in zip(out, writes):
            write(cta, value, mask)
    return fn


# ------------------------------------------------------------------------------ half arithmetic


def half_arithmetic(ins, k, mods, ptype: str):
    """add/sub/mul/fma on .f16/.bf16 (and the packed .f16x2/.bf16x2, lane by lane): the exact
    result (f64 pair, rounded to odd at 53 bits) rounded once to the half type, so the result
    is correctly rounded in every mode."""
    if mods.flags - {"rn", "rz", "rm", "rp"}:
        raise k.unsupported(ins, f"{ins.opcode}.{ptype}: only the rounding modifiers are "
                                 "emulated (.ftz/.sat/.relu are not)")
    mode = mods.rounding()
    packed = ptype.endswith("x2")
    half = ptype[:-2] if packed else ptype
    count = 4 if ins.opcode == "fma" else 3
    d, *sources = operands(ins, k, count)
    width = "b32" if packed else "b16"
    reads = [k.reader(ins, s, width) for s in sources]
    write = k.writer(ins, d, width)
    element = np.dtype(np.float16) if half == "f16" else None

    def to_f64(bits):
        bits = np.asarray(bits, np.uint16)
        if element is not None:
            return bits.view(element).astype(np.float64)
        return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)

    def compute(x, y, z=None):
        if ins.opcode == "mul":
            hi, lo = x * y, np.zeros_like(x)  # exact: 22 (f16) or 16 (bf16) bit products
        elif ins.opcode == "fma":
            hi, lo = fp.two_sum(x * y, z)
        else:
            hi, lo = fp.two_sum(x, -y if ins.opcode == "sub" else y)
        exact = fp._round_to_odd(hi, lo)
        out = convert.float_to_float(np.atleast_1d(exact), "f64", half, mode)
        return np.asarray(out).view(np.uint16)

    def lanes_of(values, shift):
        return to_f64((np.asarray(values, np.uint32) >> np.uint32(shift)) & np.uint32(0xFFFF))

    def fn(cta, mask):
        values = np.broadcast_arrays(*[np.asarray(read(cta)) for read in reads])
        if not packed:
            write(cta, compute(*[to_f64(v) for v in values]).reshape(values[0].shape), mask)
            return
        low = compute(*[lanes_of(v, 0) for v in values]).astype(np.uint32)
        high = compute(*[lanes_of(v, 16) for v in values]).astype(np.uint32)
        write(cta, (low | (high << np.uint32(16))).reshape(values[0].shape), mask)
    return fn


@implements("bfi", forms="bfi.{b32,b64} d, f, b, pos, len: b with len bits at pos taken from f")
def build_bfi(ins, k):
    mods = Mods(ins, k, ())
    ptype = mods.type
    if ptype not in ("b32", "b64"):
        raise k.unsupported(ins, "only bfi.b32 / bfi.b64 are emulated")
    bits = 32 if ptype == "b32" else 64
    d, f, b, c, length = operands(ins, k, 5)
    rf, rb = k.reader(ins, f, ptype), k.reader(ins, b, ptype)
    rc, rl = k.reader(ins, c, "u32"), k.reader(ins, length, "u32")
    write = k.writer(ins, d, ptype)

    def fn(cta, mask):
        field, base, pos, size = np.broadcast_arrays(
            np.asarray(rf(cta)).astype(object), np.asarray(rb(cta)).astype(object),
            np.asarray(rc(cta), np.int64) & 0xFF, np.asarray(rl(cta), np.int64) & 0xFF)
        # the field is cut at the register's top; Python ints keep the 64-bit masks exact
        size = np.minimum(size, np.maximum(bits - pos, 0))
        ones = np.left_shift(np.ones(size.shape, object), size.astype(object)) - 1
        field_mask = np.left_shift(ones, pos.astype(object))
        out = (base & ~field_mask) | (np.left_shift(field, pos.astype(object)) & field_mask)
        write(cta, out.astype(np.uint64 if bits == 64 else np.uint32), mask)
    return fn


# ------------------------------------------------------------------------- carry chains

CARRY = "%cc.cf"  # the per-thread condition-code carry flag (a hidden predicate register)


@implements("addc", "subc", "madc",
            forms="add.cc, addc{.cc}, sub.cc, subc{.cc} (borrow), mad{c}.{lo,hi}{.cc} on "
                  ".u32/.s32/.u64/.s64: the carry flag CC.CF per thread")
def build_carry(ins, k):
    """Extended-precision integer arithmetic: .cc writes the carry-out (for sub: the borrow)
    to CC.CF; addc/subc/madc read it (d = a + b + CF, a - (b + CF), lo/hi(a*b) + c + CF)."""
    mods = Mods(ins, k, ("cc", "lo", "hi"))
    ptype = mods.type
    if ptype not in ("u32", "s32", "u64", "s64"):
        raise k.unsupported(ins, f"{ins.opcode}.{ptype}: carry arithmetic is on 32/64-bit ints")
    base = ins.opcode[:3]
    reads_carry = ins.opcode.endswith("c")
    k.registers.setdefault(CARRY, np.dtype(np.bool_))
    bits = 8 * DTYPE[ptype].itemsize
    unsigned = UINT[bits // 8]
    if base == "mad":
        if mods.has("lo") == mods.has("hi"):
            raise k.unsupported(ins, f"{ins.opcode} needs .lo or .hi")
        d, a, b, c = operands(ins, k, 4)
        readers = [k.reader(ins, x, ptype) for x in (a, b, c)]
    else:
        if mods.has("lo") or mods.has("hi"):
            raise k.unsupported(ins, f".lo/.hi on {ins.opcode}")
        d, a, b = operands(ins, k, 3)
        readers = [k.reader(ins, x, ptype) for x in (a, b)]
    write = k.writer(ins, d, ptype)
    write_carry = k.writer(ins, Reg(CARRY), "pred") if mods.has("cc") else None
    read_carry = k.reader(ins, Reg(CARRY), "pred") if reads_carry else None
    mask_all = (1 << bits) - 1

    def ints(values, T):  # exact Python integers: 64-bit products need 128 bits
        return [int(v) for v in per_thread(np.asarray(values), T)]

    def fn(cta, mask):
        T = cta.T
        args = [ints(read(cta), T) for read in readers]
        carry_in = ints(read_carry(cta), T) if read_carry else [0] * T
        out, carry = [], []
        for lane in range(T):
            x, y = args[0][lane], args[1][lane]
            if base == "mad":  # signed operands multiply as signed (the .hi of .s types)
                product = x * y
                part = product >> bits if mods.has("hi") else product
                total = (part & mask_all) + (args[2][lane] & mask_all) + carry_in[lane]
                borrow_or_carry = total >> bits
            elif base == "add":
                total = (x & mask_all) + (y & mask_all) + carry_in[lane]
                borrow_or_carry = total >> bits
            else:  # sub: d = a - (b + CF), CF = the borrow
                total = (x & mask_all) - ((y & mask_all) + carry_in[lane])
                borrow_or_carry = int(total < 0)
            out.append(total & mask_all)
            carry.append(borrow_or_carry != 0)
        write(cta, np.array(out, np.uint64).astype(unsigned).view(DTYPE[ptype]), mask)
        if write_carry is not None:
            write_carry(cta, np.array(carry, np.bool_), mask)
    return fn
