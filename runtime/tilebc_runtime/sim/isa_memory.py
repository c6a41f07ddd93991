"""Instruction semantics, part 2: memory. ld / st on .global, .shared, .local, .const, .param and
generic addresses (scalar and .v2/.v4), atom / red (sequentially consistent: threads apply their
operations one after another in thread order, which is one legal order for every .sem/.scope), and
cvta. Memory-ordering qualifiers (.relaxed/.acquire/.release/.acq_rel/.volatile with a scope) are
accepted: the emulator executes every access immediately in program order, one CTA at a time.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from . import fp
from .registry import Mods, implements, is_float, operands, per_thread
from .dtypes import DTYPE
from .syntax import Addr, Sym, Vec
from .state import LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW, SINT, UINT, WINDOW_SIZE

SPACES = ("global", "shared", "local", "const", "param")
ORDERING = ("weak", "volatile", "relaxed", "acquire", "release", "acq_rel", "sc",
            "cta", "gpu", "sys", "cluster")
CACHE = ("ca", "cg", "cs", "lu", "cv", "wb", "wt", "nc", "L1::no_allocate", "L1::evict_last",
         "L1::evict_first", "L1::evict_normal", "L1::evict_unchanged", "L2::64B", "L2::128B",
         "L2::256B", "shared::cta", "shared::cluster")
VECTORS = ("v2", "v4")


def _space(mods: Mods) -> str:
    found = [s for s in SPACES if mods.has(s)]
    return found[0] if found else "generic"


def _lanes(cta, mask) -> np.ndarray:
    return cta.tids if mask is None else np.nonzero(mask)[0]


class Access:
    """Reads and writes of one state space for a set of lanes (addresses already computed)."""

    # No reference to the KernelImage: its code holds the accesses, and a cycle back to it would
    # leave every image to the full garbage collections (refcounting frees it otherwise).
    def __init__(self, ins, space: str):
        self.ins = ins
        self.space = space

    def _global_fault(self, cta, addresses, lanes):
        fault = cta.launch.fault_for(cta, self.ins)

        def global_fault(message, address):
            hit = np.nonzero(addresses == np.uint64(address))[0]
            thread = int(lanes[hit[0] % len(lanes)]) if len(hit) else None
            fault(message, address=address, thread=thread)
        return global_fault

    def load(self, cta, addresses: np.ndarray, lanes: np.ndarray, dtype) -> np.ndarray:
        space = self.space
        if space == "generic":
            return self._generic(cta, addresses, lanes, dtype, None)
        if space in ("global", "const"):
            return cta.launch.memory.load(addresses, dtype, None,
                                          self._global_fault(cta, addresses, lanes))
        fault = cta.launch.fault_for(cta, self.ins)
        if space == "shared":
            return cta.shared.load(addresses, lanes, dtype, fault)
        if space == "local":
            return cta.local.load(addresses, lanes, dtype, fault)
        if space == "param":
            params = cta.launch.params
            offsets = addresses.astype(np.int64)
            bad = (offsets < 0) | (offsets + dtype.itemsize > len(params))
            if np.count_nonzero(bad):
                fault("parameter-space load outside the kernel's parameters",
                      address=int(addresses[np.argmax(bad)]))
            for start in cta.launch.tensor_maps:  # their bytes are the driver's encoding
                inside = (offsets + dtype.itemsize > start) & (offsets < start + 128)
                if inside.any():
                    fault("load from a tensor-map parameter: the bytes of a CUtensorMap are "
                          "not modelled", address=int(addresses[np.argmax(inside)]))
            first = int(offsets[0]) if len(offsets) else 0
            if len(offsets) and not np.count_nonzero(offsets != first):
                # one parameter for every lane (the usual ld.param): its value, repeated
                value = np.frombuffer(params, dtype, 1, first)
                return value.repeat(len(offsets))
            raw = np.frombuffer(params, np.uint8)
            idx = offsets[:, None] + np.arange(dtype.itemsize)
            return raw[idx].reshape(-1).view(dtype).copy()
        raise AssertionError(space)

    def store(self, cta, addresses, lanes, values) -> None:
        space = self.space
        if space == "generic":
            self._generic(cta, addresses, lanes, values.dtype, values)
            return
        if space == "global":
            cta.launch.memory.store(addresses, values, values.dtype, None,
                                    self._global_fault(cta, addresses, lanes))
            return
        fault = cta.launch.fault_for(cta, self.ins)
        if space == "shared":
            cta.shared.store(addresses, lanes, values, fault)
        elif space == "local":
            cta.local.store(addresses, lanes, values, fault)
        else:
            fault(f"stores to .{space} are not allowed")

    def _generic(self, cta, addresses, lanes, dtype, values):
        """Split generic addresses by window and access each part in its own space."""
        window = np.full(addresses.shape, 0, np.int8)
        window[(addresses >= SHARED_WINDOW) & (addresses < SHARED_WINDOW + WINDOW_SIZE)] = 1
        window[(addresses >= LOCAL_WINDOW) & (addresses < LOCAL_WINDOW + WINDOW_SIZE)] = 2
        window[(addresses >= PARAM_WINDOW) & (addresses < PARAM_WINDOW + WINDOW_SIZE)] = 3
        out = None if values is not None else np.zeros(addresses.shape, dtype)
        for code, space, base in ((0, "global", 0), (1, "shared", SHARED_WINDOW),
                                  (2, "local", LOCAL_WINDOW), (3, "param", PARAM_WINDOW)):
            part = window == code
            if not part.any():
                continue
            access = Access(self.ins, space)
            local = addresses[part] - np.uint64(base)
            if values is None:
                out[part] = access.load(cta, local, lanes[part], dtype)
            else:
                access.store(cta, local, lanes[part], values[part])
        return out


def _element_addresses(address, lanes, count, size, T):
    """[lanes, count] addresses of a vector access (count 1: scalar)."""
    base = np.asarray(address, np.uint64)
    if base.ndim == 0:
        base = np.full(len(lanes), base, np.uint64)
    elif len(lanes) != T:  # every lane: the addresses as they are (read only)
        base = base[lanes]
    if count == 1:
        return base
    return (base[:, None] + np.arange(count, dtype=np.uint64) * np.uint64(size)).reshape(-1)


@implements("ld", forms="ld{.ordering.scope}{.space}{.cache}{.v2/.v4}.T on .global/.shared/"
                        ".local/.const/.param and generic addresses")
def build_ld(ins, k):
    mods = Mods(ins, k, SPACES + ORDERING + CACHE + VECTORS)
    ptype = mods.type
    dst, addr = operands(ins, k, 2)
    space = _space(mods)
    count = 4 if mods.has("v4") else 2 if mods.has("v2") else 1
    targets = dst.items if isinstance(dst, Vec) else (dst,)
    if len(targets) != count:
        raise k.unsupported(ins, f"{count} destination(s) expected")
    if space == "param" and isinstance(addr, Addr) and isinstance(addr.base, Sym) and \
            addr.base.name in k.call_params:
        raise k.unsupported(ins, "reading call-sequence parameters (return values) is not "
                                 "emulated")
    get_address = k.address(ins, addr)
    writes = [k.writer(ins, t, ptype) for t in targets]
    dtype = DTYPE[ptype]
    access = Access(ins, space)
    def fn(cta, mask):
        lanes = _lanes(cta, mask)
        addresses = _element_addresses(get_address(cta), lanes, count, dtype.itemsize, cta.T)
        loaded = access.load(cta, addresses, np.repeat(lanes, count) if count > 1 else lanes,
                             dtype).reshape(-1, count)
        for index, write in enumerate(writes):
            if mask is None:
                write(cta, loaded[:, index], None)
            else:
                full = np.zeros(cta.T, dtype)
                full[lanes] = loaded[:, index]
                write(cta, full, mask)
    return fn


@implements("st", forms="st{.ordering.scope}{.space}{.cache}{.v2/.v4}.T on .global/.shared/"
                        ".local and generic addresses; st.param to a call-sequence parameter")
def build_st(ins, k):
    mods = Mods(ins, k, SPACES + ORDERING + CACHE + VECTORS)
    ptype = mods.type
    addr, src = operands(ins, k, 2)
    space = _space(mods)
    dtype = DTYPE[ptype]
    if space == "param":
        if not (isinstance(addr, Addr) and isinstance(addr.base, Sym)
                and addr.base.name in k.call_params and addr.offset == 0):
            raise k.unsupported(ins, "st.param only to a declared call-sequence parameter")
        name = addr.base.name
        read = k.reader(ins, src, ptype)

        def store_param(cta, mask):
            value = np.asarray(read(cta), dtype)
            cta.call_params[name] = np.full(cta.T, value, dtype) if value.ndim == 0 else value
        return store_param
    count = 4 if mods.has("v4") else 2 if mods.has("v2") else 1
    sources = src.items if isinstance(src, Vec) else (src,)
    if len(sources) != count:
        raise k.unsupported(ins, f"{count} source(s) expected")
    reads = [k.reader(ins, s, ptype) for s in sources]
    get_address = k.address(ins, addr)
    access = Access(ins, space)

    def fn(cta, mask):
        lanes = _lanes(cta, mask)
        addresses = _element_addresses(get_address(cta), lanes, count, dtype.itemsize, cta.T)
        columns = []
        for read in reads:
            value = np.asarray(read(cta), dtype)
            columns.append(np.full(len(lanes), value, dtype) if value.ndim == 0
                           else value[lanes])
        values = np.stack(columns, axis=1).reshape(-1) if count > 1 else columns[0]
        access.store(cta, addresses, np.repeat(lanes, count) if count > 1 else lanes, values)
    return fn


@implements("cvta", forms="cvta{.to}.{global,shared,local,const,param} on .u32/.u64 addresses")
def build_cvta(ins, k):
    mods = Mods(ins, k, SPACES + ("to",))
    ptype = mods.type
    d, a = operands(ins, k, 2)
    space = _space(mods)
    read = k.reader(ins, a, ptype)
    write = k.writer(ins, d, ptype)
    base = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW, "param": PARAM_WINDOW}.get(space, 0)
    to = mods.has("to")
    if ptype not in ("u32", "u64"):
        raise k.unsupported(ins, "cvta is .u32 or .u64")

    def fn(cta, mask):
        x = np.asarray(read(cta)).astype(np.uint64)
        out = x - np.uint64(base) if to else x + np.uint64(base)
        write(cta, out.astype(DTYPE[ptype]), mask)
    return fn


# ------------------------------------------------------------------------------------ atomics

_ATOMIC_OPS = ("add", "inc", "dec", "min", "max", "and", "or", "xor", "exch", "cas")


def _apply(op, old, value, compare, dtype):
    """One atomic update on numpy scalars: returns the new value."""
    if op == "add":
        if dtype == np.float32:  # atom.add.f32 flushes subnormals (PTX)
            return fp.ftz(np.asarray(fp.ftz(np.asarray(old)) + fp.ftz(np.asarray(value))))[()]
        return (np.asarray(old, dtype) + np.asarray(value, dtype)).astype(dtype)[()]
    if op == "inc":
        return dtype.type(0) if old >= value else dtype.type(old + dtype.type(1))
    if op == "dec":
        return value if (old == 0 or old > value) else dtype.type(old - dtype.type(1))
    if op == "min":
        return fp.fmin(np.asarray([old]), np.asarray([value], dtype))[0] if dtype.kind == "f" \
            else min(old, value)
    if op == "max":
        return fp.fmax(np.asarray([old]), np.asarray([value], dtype))[0] if dtype.kind == "f" \
            else max(old, value)
    if op == "and":
        return old & value
    if op == "or":
        return old | value
    if op == "xor":
        return old ^ value
    if op == "exch":
        return value
    if op == "cas":
        return value if old == compare else old
    raise AssertionError(op)


def _build_atomic(ins, k, returns: bool):
    mods = Mods(ins, k, SPACES + ORDERING + CACHE + _ATOMIC_OPS + ("noftz",))
    ptype = mods.type
    ops_found = [o for o in _ATOMIC_OPS if mods.has(o)]
    if len(ops_found) != 1:
        raise k.unsupported(ins, f"{ins.opcode} needs exactly one operation")
    op = ops_found[0]
    if op in ("and", "or", "xor", "exch", "cas") and is_float(ptype):
        raise k.unsupported(ins, f"{ins.opcode}.{op} on floats")
    if op in ("inc", "dec") and ptype != "u32":
        raise k.unsupported(ins, f"{ins.opcode}.{op} is .u32 only")
    if op == "cas" and not returns:
        raise k.unsupported(ins, "red has no cas")
    space = _space(mods)
    if space in ("local", "const", "param"):
        raise k.unsupported(ins, f"atomics on .{space}")
    expected = (3 if returns else 2) + (1 if op == "cas" else 0)
    ops = operands(ins, k, expected)
    if returns:
        dst, addr, *values = ops
        write = k.writer(ins, dst, ptype)
    else:
        addr, *values = ops
        write = None
    # integer ops read as the type's signedness (min/max); bitwise types as unsigned
    dtype = DTYPE[ptype]
    reads = [k.reader(ins, v, ptype) for v in values]
    get_address = k.address(ins, addr)
    access = Access(ins, space)

    def updated(operand, i, current):
        """Lane i's new value from the element's current one (cas: operand 0 is the compare)."""
        if op == "cas":
            return _apply(op, current, operand[1][i], operand[0][i], dtype)
        return _apply(op, current, operand[0][i], None, dtype)

    def fn(cta, mask):
        lanes = _lanes(cta, mask)
        addresses = _element_addresses(get_address(cta), lanes, 1, dtype.itemsize, cta.T)
        operand = [per_thread(np.asarray(r(cta), dtype), cta.T)[lanes] for r in reads]
        # validate every address (bounds, alignment) before changing anything
        access.load(cta, addresses, lanes, dtype)
        old = np.empty(len(lanes), dtype)
        direct = _global_elements(cta, space, addresses, dtype)
        if direct is not None:  # one writable global buffer: update its elements in place
            typed, index, initialised, offsets = direct
            for i, at in enumerate(index.tolist()):  # thread order: one legal serialisation
                current = typed[at]
                typed[at] = updated(operand, i, current)
                old[i] = current
            if initialised is not None:
                initialised[(offsets[:, None] + np.arange(dtype.itemsize)).reshape(-1)] = True
        else:
            for i in range(len(lanes)):  # thread order: one legal serialisation
                single = addresses[i:i + 1]
                current = _raw_load(cta, access, single, lanes[i:i + 1], dtype)
                new = updated(operand, i, current)
                _raw_store(cta, access, single, lanes[i:i + 1], np.asarray([new], dtype))
                old[i] = current
        if write is not None:
            full = np.zeros(cta.T, dtype)
            full[lanes] = old
            write(cta, full, mask)
    return fn


def _global_elements(cta, space, addresses, dtype):
    """(typed view, element indices, initialised bytes or None, byte offsets) when every
    address (already validated) is global and in one writable buffer; else None."""
    if space == "generic":
        if ((addresses >= SHARED_WINDOW) & (addresses < PARAM_WINDOW + WINDOW_SIZE)).any():
            return None
    elif space != "global":
        return None
    memory = cta.launch.memory
    buffer = memory.buffer_at(int(addresses.min()))
    if buffer is None or buffer.readonly or \
            int(addresses.max()) + dtype.itemsize > buffer.end:
        return None
    offsets = (addresses - np.uint64(buffer.base)).astype(np.intp)
    return buffer.typed(dtype), offsets // dtype.itemsize, buffer.initialised, offsets


def _raw_load(cta, access, address, lane, dtype):
    if access.space == "shared":
        offsets = address.astype(np.int64) - 0x400
        return cta.shared.data[offsets[0]:offsets[0] + dtype.itemsize].view(dtype)[0]
    return access.load(cta, address, lane, dtype)[0]


def _raw_store(cta, access, address, lane, values):
    if access.space == "shared":  # atomics are not races: bypass the race tracker
        offset = int(address[0]) - 0x400
        raw = values.view(np.uint8)
        cta.shared.data[offset:offset + len(raw)] = raw
        cta.shared.written[offset:offset + len(raw)] = True
        return
    access.store(cta, address, lane, values)


@implements("atom", forms="atom{.sem}{.scope}{.global/.shared}.{add,inc,dec,min,max,and,or,xor,"
                          "exch,cas}.T, applied thread by thread in thread order")
def build_atom(ins, k):
    return _build_atomic(ins, k, True)


@implements("red", forms="red{.sem}{.scope}{.global/.shared}.{add,inc,dec,min,max,and,or,xor}.T in thread order")
def build_red(ins, k):
    return _build_atomic(ins, k, False)
