"""Distributed layouts: where each element of a tile value lives among a CTA's threads.

A layout of an N-element tile (row-major linear index e) over T threads gives every thread the
same number of register slots; slot k of thread t holds element `table[k, t]`. Several (k, t) may
hold the same element (copies, e.g. a reduction's result in every thread that needs it); only
layouts whose copies carry equal values exist. Layouts depend on the linear index only, so a
reshape never moves data.

- Cyclic: the default every op lowering understands: e = (k*T + t) mod N (lowerer.py).
- Blocked(vec): each thread holds runs of `vec` consecutive elements, e = ((k // vec)*T + t)*vec
  + k % vec; with vec dividing the last dimension a run is a vector for ld/st.v2/v4.
- Uniform: a splat (one value for every element), usable as any layout.
- Rows(row, lanes): whole rows in one warp, `lanes` lanes per row on consecutive elements (for
  row reductions).
- MmaAcc: the mma.sync accumulator fragments tiled over warps (mmaf results on tensor cores).
- Lines(shape, dim, group): a scan's lines over `group` threads each, runs of positions in
  registers (for scans along any dimension).
- Sliced(parent, shape, dim): a reduction's result along `dim` of a tile of `shape` held in
  `parent`: slot k holds the output parent slot k's element reduces into, so broadcasting it
  back along `dim` into `parent` needs no data movement.

An op lowering that knows layouts asks for operands as they are (Lowerer.get(v, any_layout=True));
every other lowering gets its operands converted to Cyclic. `convert` moves data only where
producer and consumer disagree: registers alone when every thread already holds what it needs,
else one exchange through shared memory.
"""
from __future__ import annotations


from ..lazy_numpy import np


class Layout:
    """Base: subclasses give `slots`, `table(T)` and `emit_index(lw, k)`."""

    count: int
    slots: int

    def key(self) -> tuple:
        raise NotImplementedError

    def table(self, threads: int) -> np.ndarray:
        """int64 [slots, threads]: the linear element index each slot of each thread holds."""
        raise NotImplementedError

    def emit_index(self, lw, k: int) -> str:
        """u32 register: the linear element index slot k of this thread holds."""
        raise NotImplementedError

    def reshaped(self, count: int) -> Layout:
        """The same placement for a tile of the same count viewed with another shape."""
        return self

    def __eq__(self, other):
        return isinstance(other, Layout) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def __repr__(self):
        return f"{type(self).__name__}{self.key()[1:]}"


class Cyclic(Layout):
    def __init__(self, count: int, threads: int):
        self.count = count
        self.threads = threads
        self.slots = 1 if count == 1 else -(-count // threads)

    def key(self):
        return ("cyclic", self.count, self.threads)

    def table(self, threads: int) -> np.ndarray:
        if self.count == 1:
            return np.zeros((1, threads), np.int64)
        linear = np.arange(threads)[None, :] + threads * np.arange(self.slots)[:, None]
        return linear % self.count

    def row(self, k: int, threads: int) -> list:
        """table(threads)[k] as plain ints: slot k of thread t holds (t + k*T) % count (the
        default layout's indices need no numpy on the compile path)."""
        if self.count == 1:
            return [0] * threads
        return [(t + k * threads) % self.count for t in range(threads)]

    def emit_index(self, lw, k: int) -> str:
        return lw.elem_index(self.count, k)


class Blocked(Layout):
    """Runs of `vec` consecutive elements per thread; only built where vec * T divides N, so every
    thread holds N / T elements and no element has copies."""

    def __init__(self, count: int, threads: int, vec: int):
        if count % (vec * threads):
            raise ValueError("a blocked layout needs vec * threads to divide the element count")
        self.count = count
        self.threads = threads
        self.vec = vec
        self.slots = count // threads

    def key(self):
        return ("blocked", self.count, self.threads, self.vec)

    def table(self, threads: int) -> np.ndarray:
        k = np.arange(self.slots)[:, None]
        t = np.arange(threads)[None, :]
        return ((k // self.vec) * threads + t) * self.vec + k % self.vec

    def emit_index(self, lw, k: int) -> str:
        def make():
            w = lw.w
            reg = w.reg("b32")
            run, within = divmod(k, self.vec)
            w(f"mad.lo.u32 {reg}, {lw.tid()}, {self.vec}, {run * lw.T * self.vec + within}")
            return reg
        return lw._cached(("blocked e", self.count, self.vec, k), make)


class Rows(Layout):
    """Whole rows (the last dimension, `row` elements) in one warp: `lanes` lanes (a power of two
    up to 32 dividing the row) on consecutive elements of a row, 32 / lanes rows side by side in
    a warp, the registers of a thread along the rest of its row (every `lanes`-th element), warps
    and then slots over further rows. Reductions along rows then need no shared memory, and fewer
    lanes per row leave more of a row's combines in-thread. Built where T is a power of two and
    the warps' rows divide the rows."""

    def __init__(self, count: int, threads: int, row: int, lanes: int = 32):
        warps = threads // 32
        if lanes < 1 or 32 % lanes or row % lanes or threads % 32 or warps & (warps - 1) \
                or (count // row) % (warps * (32 // lanes)):
            raise ValueError("a rows layout needs lanes | 32, lanes | row and a power-of-two warp "
                             "count whose rows divide the rows")
        self.count = count
        self.threads = threads
        self.row = row
        self.lanes = lanes
        self.slots = count // threads

    def key(self):
        return ("rows", self.count, self.threads, self.row, self.lanes)

    def table(self, threads: int) -> np.ndarray:
        k = np.arange(self.slots)[:, None]
        t = np.arange(threads)[None, :]
        per_row = self.row // self.lanes
        # thread t's first row is t // lanes of its block of T // lanes rows
        return ((k // per_row) * (threads // self.lanes) + t // self.lanes) * self.row \
            + (k % per_row) * self.lanes + t % self.lanes

    def emit_index(self, lw, k: int) -> str:
        per_row = self.row // self.lanes
        offset = (k // per_row) * (lw.T // self.lanes) * self.row + (k % per_row) * self.lanes
        shift = self.lanes.bit_length() - 1

        def base():
            w = lw.w
            first, lane, reg = w.reg("b32"), w.reg("b32"), w.reg("b32")
            w(f"shr.u32 {first}, {lw.tid()}, {shift}")
            w(f"and.b32 {lane}, {lw.tid()}, {self.lanes - 1}")
            w(f"mad.lo.u32 {reg}, {first}, {self.row}, {lane}")
            return reg

        def make():
            start = lw._cached(("rows e", self.row, self.lanes), base)
            if not offset:
                return start
            reg = lw.w.reg("b32")
            lw.w(f"add.u32 {reg}, {start}, {offset}")
            return reg
        return lw._cached(("rows e", self.row, self.lanes, k), make)


class Lines(Layout):
    """For a scan along `dim` of a `shape` tile: each line (the elements at one index of the other
    dimensions) is spread over `group` consecutive threads (a power of two: up to 32 lanes of a
    warp, or whole warps), thread q of a group holding the run of `run` = length / group
    consecutive positions q*run .. q*run + run - 1 in its slots; T / group lines side by side,
    then slots over further lines (wrapping round, as copies, when there are fewer lines). The
    scan is then serial in-thread, log-step shuffles across lanes and one pass across warps."""

    def __init__(self, shape: tuple[int, ...], dim: int, threads: int, group: int):
        length = shape[dim]
        warps = group // 32
        if group < 1 or group & (group - 1) or length % group or group > threads \
                or threads % group or (warps and threads % 32):
            raise ValueError("a lines layout needs a power-of-two group dividing the scanned "
                             "length and the threads")
        self.shape, self.dim, self.threads, self.group = tuple(shape), dim, threads, group
        self.count = int(np.prod(self.shape, dtype=np.int64))
        self.length = length
        self.inner = int(np.prod(self.shape[dim + 1:], dtype=np.int64))
        self.lines = self.count // length
        self.run = length // group
        self.side = threads // group  # lines side by side
        self.rounds = -(-self.lines // self.side)
        self.slots = self.rounds * self.run

    def key(self):
        return ("lines", self.shape, self.dim, self.threads, self.group)

    def line_table(self, threads: int) -> np.ndarray:
        """int64 [rounds, threads]: the line each round of slots of each thread holds."""
        j = np.arange(self.rounds)[:, None]
        t = np.arange(threads)[None, :]
        return (j * self.side + t // self.group) % self.lines

    def table(self, threads: int) -> np.ndarray:
        line = np.repeat(self.line_table(threads), self.run, axis=0)
        i = (np.arange(self.slots) % self.run)[:, None]
        position = (np.arange(threads) % self.group)[None, :] * self.run + i
        return (line // self.inner * self.length + position) * self.inner + line % self.inner

    def emit_line(self, lw, j: int) -> str:
        """u32 register: the line this thread's round j of slots holds."""
        def make():
            from . import intdiv
            w = lw.w
            reg = w.reg("b32")
            w(f"shr.u32 {reg}, {lw.tid()}, {self.group.bit_length() - 1}")
            if j:
                w(f"add.u32 {reg}, {reg}, {j * self.side}")
            if (j + 1) * self.side > self.lines:
                reg = intdiv.urem(w, reg, self.lines, bound=(j + 1) * self.side - 1)
            return reg
        return lw._cached(("lines line", self.key(), j), make)

    def emit_position(self, lw) -> str:
        """u32 register: this thread's index in its group (its run's first position / run)."""
        def make():
            reg = lw.w.reg("b32")
            lw.w(f"and.b32 {reg}, {lw.tid()}, {self.group - 1}")
            return reg
        return lw._cached(("lines q", self.group), make)

    def emit_index(self, lw, k: int) -> str:
        j, i = divmod(k, self.run)

        def base():
            from . import intdiv
            w = lw.w
            line = self.emit_line(lw, j)
            reg = w.reg("b32")
            start = w.reg("b32")
            w(f"mul.lo.u32 {start}, {self.emit_position(lw)}, {self.run * self.inner}")
            if self.inner == 1:
                w(f"mad.lo.u32 {reg}, {line}, {self.length}, {start}")
                return reg
            outer = intdiv.udiv(w, line, self.inner, bound=self.lines - 1)
            low = intdiv.urem(w, line, self.inner, bound=self.lines - 1, quotient=outer)
            w(f"mad.lo.u32 {reg}, {outer}, {self.length * self.inner}, {low}")
            w(f"add.u32 {reg}, {reg}, {start}")
            return reg

        def make():
            first = lw._cached(("lines e", self.key(), j), base)
            if not i:
                return first
            reg = lw.w.reg("b32")
            lw.w(f"add.u32 {reg}, {first}, {i * self.inner}")
            return reg
        # a slot whose indices are another's plus a constant in every thread: one add
        return lw.per_thread(self.table(lw.T)[k],
                             lambda: lw._cached(("lines e", self.key(), j, i), make))


class Sliced(Layout):
    """A reduction result along `dim` of a `shape` tile held in `parent` (see the module doc)."""

    def __init__(self, parent: Layout, shape: tuple[int, ...], dim: int):
        self.parent = parent
        self.shape = tuple(shape)
        self.dim = dim
        self.count = parent.count // self.shape[dim]
        self.slots = parent.slots

    def key(self):
        return ("sliced", self.parent.key(), self.shape, self.dim)

    def project(self, linear: np.ndarray) -> np.ndarray:
        """Parent linear indices -> result linear indices (the reduced dimension dropped)."""
        inner = int(np.prod(self.shape[self.dim + 1:], dtype=np.int64))
        length = self.shape[self.dim]
        return (linear // (inner * length)) * inner + linear % inner

    def table(self, threads: int) -> np.ndarray:
        return self.project(self.parent.table(threads))

    def emit_index(self, lw, k: int) -> str:
        inner = int(np.prod(self.shape[self.dim + 1:], dtype=np.int64))
        length = self.shape[self.dim]

        def make():
            from . import intdiv
            w = lw.w
            e = self.parent.emit_index(lw, k)
            if inner == 1:
                return intdiv.udiv(w, e, length, bound=self.parent.count - 1)
            outer = intdiv.udiv(w, e, inner * length, bound=self.parent.count - 1)
            low = intdiv.urem(w, e, inner, bound=self.parent.count - 1)
            reg = w.reg("b32")
            w(f"mad.lo.u32 {reg}, {outer}, {inner}, {low}")
            return reg
        if not isinstance(self.parent, Lines):
            return lw._cached(("sliced e", self.key(), k), make)
        # a slot whose indices are another's plus a constant in every thread: one add
        return lw.per_thread(self.table(lw.T)[k],
                             lambda: lw._cached(("sliced e", self.key(), k), make))


class MmaAcc(Layout):
    """The mma.sync m16n8 accumulator (C/D fragment) layout of a [B, m, n] (or [m, n]) tile: 16x8
    blocks, warps on a (wb, wm, wn) grid over (batches, block rows, block columns); warp w acts
    as grid warp w mod G (G = wb*wm*wn dividing the warp count: the others hold copies), and grid
    warp (pb, pm, pn) holds the blocks (jb*wb + pb, jm*wm + pm, jn*wn + pn), slot k = ((jb*RM +
    jm)*CN + jn)*4 + r; within a block lane l (g = l >> 2, t = l % 4) register r holds row g +
    8*(r >> 1), column 2t + (r & 1) (PTX ISA, mma.m16n8k16 C fragment). `height` 8: 8x8 blocks
    of 2 registers (mma.m8n8k4 .f64). Built where the grid divides the blocks exactly."""

    def __init__(self, batches: int, m: int, n: int, threads: int, grid: tuple[int, int, int],
                 height: int = 16):
        wb, wm, wn = grid
        size = wb * wm * wn
        if height not in (8, 16) or m % height or n % 8 or threads % 32 \
                or (threads // 32) % size or batches % wb or (m // height) % wm or (n // 8) % wn:
            raise ValueError("an mma accumulator layout needs its warp grid to divide the blocks "
                             "and the warps")
        self.batches, self.m, self.n, self.threads, self.grid = batches, m, n, threads, grid
        self.count = batches * m * n
        self.height = height
        self.copies = threads // 32 // size  # warps holding each block
        self.regs = height // 4  # C registers a lane holds per block
        self.per_warp = (batches // wb, m // height // wm, n // 8 // wn)  # (JB, RM, CN)
        self.slots = self.regs * self.per_warp[0] * self.per_warp[1] * self.per_warp[2]

    def key(self):
        return ("mma_acc", self.batches, self.m, self.n, self.threads, self.grid, self.height)

    def slot_offset(self, k: int) -> int:
        """Slot k's linear index minus the thread's base index (block origin + fragment spot)."""
        (wb, wm, wn), (_, rm, cn) = self.grid, self.per_warp
        block, r = divmod(k, self.regs)
        jb, rest = divmod(block, rm * cn)
        jm, jn = divmod(rest, cn)
        row = jm * wm * self.height + 8 * (r >> 1)
        return (jb * wb * self.m + row) * self.n + jn * wn * 8 + (r & 1)

    def table(self, threads: int) -> np.ndarray:
        t = np.arange(threads)
        wb, wm, wn = self.grid
        warp, lane = t // 32 % (wb * wm * wn), t % 32
        pb, pm, pn = warp // (wm * wn), (warp // wn) % wm, warp % wn
        base = (pb * self.m + pm * self.height + lane // 4) * self.n + pn * 8 + 2 * (lane % 4)
        offsets = np.array([self.slot_offset(k) for k in range(self.slots)], np.int64)
        return offsets[:, None] + base[None, :]

    def emit_base(self, lw) -> str:
        """u32 register: this thread's base linear index (see slot_offset)."""
        wb, wm, wn = self.grid

        def make():
            w = lw.w
            warp, lane = w.reg("b32"), w.reg("b32")
            w(f"shr.u32 {warp}, {lw.tid()}, 5")
            w(f"rem.u32 {warp}, {warp}, {wb * wm * wn}")
            w(f"and.b32 {lane}, {lw.tid()}, 31")
            pb, pm, pn = w.reg("b32"), w.reg("b32"), w.reg("b32")
            w(f"div.u32 {pb}, {warp}, {wm * wn}")
            w(f"rem.u32 {pm}, {warp}, {wm * wn}")
            w(f"div.u32 {pm}, {pm}, {wn}")
            w(f"rem.u32 {pn}, {warp}, {wn}")
            row, g, col, out = w.reg("b32"), w.reg("b32"), w.reg("b32"), w.reg("b32")
            w(f"shr.u32 {g}, {lane}, 2")
            w(f"mad.lo.u32 {row}, {pm}, {self.height}, {g}")
            w(f"mad.lo.u32 {row}, {pb}, {self.m}, {row}")
            w(f"and.b32 {col}, {lane}, 3")
            w(f"shl.b32 {col}, {col}, 1")
            w(f"mad.lo.u32 {col}, {pn}, 8, {col}")
            w(f"mad.lo.u32 {out}, {row}, {self.n}, {col}")
            return out
        return lw._cached(("mma acc base", self.key()), make)

    def emit_index(self, lw, k: int) -> str:
        offset = self.slot_offset(k)

        def make():
            base = self.emit_base(lw)
            if not offset:
                return base
            reg = lw.w.reg("b32")
            lw.w(f"add.u32 {reg}, {base}, {offset}")
            return reg
        return lw._cached(("mma acc e", self.key(), k), make)


class Uniform(Layout):
    """Every element has the same value, held in one register by every thread (a splat): fits
    any layout without data movement."""

    count = 0
    slots = 1

    def key(self):
        return ("uniform",)


UNIFORM = Uniform()


def register_map(source: Layout, target: Layout, threads: int,
                 target_to_source=None) -> list[int] | None:
    """Per target slot k, a source slot holding (in the same thread, for every thread) the
    element target slot k needs, or None when some element must come from another thread.
    `target_to_source` maps target linear indices to source linear indices (default: same)."""
    want = target.table(threads)
    if target_to_source is not None:
        want = target_to_source(want)
    have = source.table(threads)
    rows: dict[bytes, int] = {}
    for k in range(have.shape[0] - 1, -1, -1):  # the first slot wins
        rows[np.ascontiguousarray(have[k]).tobytes()] = k
    result = []
    for k in range(want.shape[0]):
        hit = rows.get(np.ascontiguousarray(want[k]).tobytes())
        if hit is None:
            return None
        result.append(hit)
    return result


def distinct_slots(layout: Layout, threads: int) -> list[int]:
    """Slots whose element differs from every earlier slot's in some thread (the others are
    copies of an earlier slot in every thread)."""
    table = layout.table(threads)
    seen, keep = set(), []
    for k in range(table.shape[0]):
        row = np.ascontiguousarray(table[k]).tobytes()
        if row not in seen:
            seen.add(row)
            keep.append(k)
    return keep
