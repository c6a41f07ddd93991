"""Lowering state for one entry: where every Tile IR value lives, the thread distribution of tiles,
shared-memory exchanges between distributions, and the walk over regions.

Default distribution (the Cyclic layout; values may hold other layouts, see layout.py and
runtime/LAYOUTS.md, and are converted to this one for the lowerings that do not handle them):
  a tile of N elements (row-major linear index e) over a CTA of T threads gives thread t the slots
  k = 0 .. S-1, S = ceil(N/T), holding element e = (k*T + t) mod N. A 1-element tile (scalar) is held
  by every thread. When N < T several threads hold copies of an element; only its owner (k*T+t < N)
  performs side effects (stores, atomics, prints). Anything that moves elements between threads goes
  through shared memory: every thread writes its slots at their linear index, bar.sync, every thread
  reads what it needs, bar.sync. Tiles of at most 32 elements (dividing 32) are whole in every
  warp, so gathers from them use shfl.sync.idx instead.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from functools import partial
from collections.abc import Callable

from ..lazy_numpy import np

from tilebc.errors import TilebcError
from tilebc.ir.module import Block, Function, Module, Op, Value
from tilebc.ir.types import ElementType, PointerType, TileType
from tilebc.ops.spec import Effects

from . import dtypes, intdiv, staging
from .common import AFTER_MEMORY, FRESH, Frame, SubView, TensorView, Tile, Token  # noqa: F401
from .common import most_elements, vector_access
from .layout import UNIFORM, Blocked, Cyclic, distinct_slots, register_map
from .ptx import PtxWriter
from .registry import LOWERINGS, NOT_LOWERED


# static shared memory a CTA gets without opting in to more: the exchange area is declared
# statically when everything fits here, else as dynamic shared memory (see compiler.py)
from ..targets import STATIC_SHARED_LIMIT  # noqa: E402  (re-exported for the lowering modules)


def _unravel(linear, shape) -> list[list[int]]:
    """np.unravel_index of in-range row-major indices, as lists of ints: the default layout's
    per-thread indices need no numpy (~60 ms of a cold `tilebc compile` of a small kernel)."""
    result, inner = [], math.prod(shape)
    for dim in shape:
        inner //= dim
        result.append([(value // inner) % dim for value in linear])
    return result


class LoweringError(TilebcError):
    """A Tile IR construct the JIT cannot lower (names the op and where it came from)."""


class Lowerer:
    def __init__(self, module: Module, function: Function, *, threads: int, arch: int,
                 prefix: str = "__tilebc"):
        self.prefix = prefix  # per-kernel symbol prefix (strings, constants)
        self.module = module
        self.function = function
        # every op of the function in pre-order (function.walk()), walked once for all the
        # analyses of this lowering
        self.ops: list[Op] = list(function.walk())
        self.T = threads
        self.arch = arch  # e.g. 90 for sm_90
        self.portable = False  # True: no arch-specific (sm_90a) instructions
        self.wgmma = False  # True: warpgroup MMA where anchors.wgmma_fits (opt-in, see compile)
        self.tma = False  # True: TMA fills wgmma K-loop stages where it can (sm_90 default, see compile)
        self.tensor_maps: list[object] = []  # tma.TensorMapPlan per map parameter
        self.w = PtxWriter()
        self.w.arch = arch
        self._tables: dict[str, str] = {}
        self.values: dict[Value, object] = {}
        self.frames: list[Frame] = []
        self.smem_size = 0
        # exchange buffers start here: below it lies what outlives single ops (a pipelined
        # loop's cp.async stages, in flight across the loop's iterations)
        self.smem_floor = 0
        self.smem_align = 16  # the exchange area's base alignment (swizzled wgmma operands: 1024)
        self.smem_peak_op: Op | None = None  # the op whose exchange set smem_size
        self.strings: list[bytes] = []  # .global byte strings (print formats, assert messages)
        self.const_arrays: list[tuple] = []  # (name, ptx type, values) for non-splat constants
        # The writer's table registry: a function, not this Lowerer's bound method, which would
        # make a reference cycle (Lowerer -> writer -> method -> Lowerer) that keeps the module
        # being compiled alive until the garbage collector runs.
        self.w.const_table = partial(_const_table, prefix, self.const_arrays, self._tables)
        self.uses_vprintf = False
        self.globals_used = set()
        self.local_bytes = 0
        self.exit_label = self.w.label("exit")
        # alloca scratch lives in shared memory, so a kernel with an alloca addresses everything a
        # pointer can reach generically (no state space); other kernels use .global.
        self.generic_pointers = any(o.spec.effects is Effects.ALLOC for o in self.ops)
        self.allocas: list[tuple] = []  # (symbol, alignment, bytes) of .shared scratch buffers
        self._cache: dict[tuple, object] = {}
        # .b64 register -> ("s" or "u", the .b32 register it was sign/zero-extended from): its
        # value for as long as it exists (both are written once), for widening multiplies
        self.widened: dict[str, tuple] = {}
        # broadcast results a load's layout choice wants in its layout (anchors.rows_layout)
        self.wanted: dict[Value, object] = {}
        # lower_block invocations enclosing the op being lowered (each gets a fresh number), and
        # values shared between ops: (scope they were computed in, value), see `scoped`
        self._scope: list[int] = []
        self._blocks_lowered = 0
        self._scoped: dict[tuple, tuple] = {}
        # results equal to an earlier value, and ops nothing needs: not lowered (simplify.py)
        from .simplify import dead_ops, floor_mods, forwarding
        self.forward: dict[Value, Value] = forwarding(self, self.ops)
        # selects that compute x mod 2^k (floor): lowered as x & (2^k - 1) from x alone
        self.floor_mods = floor_mods(self, self.ops, self.forward)
        self.dead = dead_ops(self.ops, self.forward,
                             {op: [x] for op, (x, _) in self.floor_mods.items()})
        # large per-element regions lowered as loops over register chunks (chunks.py); `chunk` is
        # the chunk being lowered, during which a tile of chunk.count elements has chunk.slots slots
        from .chunks import plan
        self.chunked = plan(function, threads, self.forward, self.dead, self.ops)
        self.chunk = None

    # -- diagnostics ---------------------------------------------------------------------------
    def error(self, op: Op | None, message: str) -> LoweringError:
        where = {}
        if op is not None:
            if op.offset is not None:
                where["offset"] = op.offset
            elif op.text_pos is not None:
                where["line"], where["column"] = op.text_pos
            message = f"{op.name}: {message}"
        return LoweringError(message, file=self.module.source, **where)

    # -- values --------------------------------------------------------------------------------
    def get(self, value: Value, any_layout: bool = False):
        """The lowered value; a tile in another layout than Cyclic is converted to it unless the
        caller handles any layout (`any_layout`)."""
        key = self.forward.get(value, value)
        try:
            lowered = self.values[key]
        except KeyError:
            raise self.error(self.w.current_op, f"value {value} used before the JIT defined it")
        if any_layout or not isinstance(lowered, Tile) or lowered.layout is None \
                or lowered.layout is UNIFORM:  # a splat reads the same everywhere
            return lowered
        return self.scoped(("cyclic of", key), lambda: self.convert(lowered, None))

    def layout_of(self, tile: Tile):
        """The tile's layout object (Cyclic for the default distribution)."""
        return tile.layout if tile.layout is not None else Cyclic(tile.count, self.T)

    def convert(self, tile: Tile, target) -> Tile:
        """`tile` in layout `target` (None: Cyclic): register moves when every thread already
        holds what it needs, else one exchange through shared memory."""
        source = self.layout_of(tile)
        want = target if target is not None else Cyclic(tile.count, self.T)
        if source is UNIFORM:
            return Tile(tile.type, tile.regs[:1] * (1 if target is None else want.slots), target)
        if tile.count == 1 or source == want:
            regs = tile.regs if tile.count > 1 else tile.regs[:1]
            return Tile(tile.type, regs, None if isinstance(want, Cyclic) else want)
        layout = None if isinstance(want, Cyclic) else want
        mapping = register_map(source, want, self.T)
        if mapping is not None:
            return Tile(tile.type, [tile.regs[k] for k in mapping], layout)
        staged = self._convert_staged(tile, source, want)
        if staged is not None:
            return Tile(tile.type, staged, layout)
        [offset] = self.reserve_smem([self.smem_size_of(tile.type)])
        for k in distinct_slots(source, self.T):
            if tile.layout is None:
                address = self.slot_address(offset, tile.count, k, tile.element)
            else:
                address = self.layout_address(offset, source, k, tile.element)
            self.store("shared", address, tile.regs[k], tile.element)
        self.barrier()
        out = []
        for k in range(want.slots):
            if layout is None:
                out.append(self.smem_read_slot(offset, tile.count, k, tile.element))
            else:
                out.append(self.load("shared", self.layout_address(offset, want, k, tile.element),
                                     tile.element))
        self.barrier()
        return Tile(tile.type, out, layout)

    def set(self, value: Value, lowered) -> None:
        self.values[value] = lowered

    def slots(self, count: int) -> int:
        if self.chunk is not None and count == self.chunk.count:
            return self.chunk.slots
        return 1 if count == 1 else -(-count // self.T)

    def new_tile(self, type: TileType) -> Tile:
        cls = dtypes.reg_class(type.element)
        return Tile(type, [self.w.reg(cls) for _ in range(self.slots(type.num_elements))])

    def splat(self, type: TileType, reg: str) -> Tile:
        return Tile(type, [reg])

    # -- per-thread constants, computed once in the preamble ------------------------------------
    @contextmanager
    def preamble(self):
        saved = self.w.in_preamble
        self.w.in_preamble = True
        try:
            yield
        finally:
            self.w.in_preamble = saved

    def _cached(self, key, make):
        if key not in self._cache:
            with self.preamble():
                self._cache[key] = make()
        return self._cache[key]

    def tid(self) -> str:
        def make():
            reg = self.w.reg("b32")
            self.w(f"mov.u32 {reg}, %tid.x")
            return reg
        return self._cached(("tid",), make)

    def elem_index(self, count: int, k: int) -> str:
        """u32 register: the linear element index slot k of this thread holds in a tile of `count`."""
        if count == 1:
            return self.const_u32(0)

        def make():
            w = self.w
            reg = w.reg("b32")
            w(f"add.u32 {reg}, {self.tid()}, {k * self.T}")
            if (k + 1) * self.T > count:
                reg = intdiv.urem(w, reg, count, bound=(k + 1) * self.T - 1)
            return reg
        return self._cached(("e", count, k), make)

    def multi_index(self, shape, k: int, layout=None) -> list[str]:
        """u32 registers: the multi-index (row-major) of slot k in a tile of `shape` (held in
        `layout`, default Cyclic)."""
        shape = tuple(shape)
        count = 1
        for dim in shape:
            count *= dim
        if count == 1:
            return [self.const_u32(0)] * len(shape)

        def make():
            w = self.w
            if layout is None:
                known = _unravel(Cyclic(count, self.T).row(k, self.T), shape)
            else:
                known = np.unravel_index(layout.table(self.T)[k], shape)
            result = []
            inner = count
            for d, dim in enumerate(shape):
                inner //= dim
                if dim == 1:
                    result.append(self.const_u32(0))
                    continue

                def compute(inner=inner, dim=dim):
                    e = self.elem_index(count, k) if layout is None else \
                        layout.emit_index(self, k)
                    # e < count, so the quotient is below count // inner (small magic numbers)
                    reg = intdiv.udiv(w, e, inner, bound=count - 1)
                    if dim * inner != count:  # not the outermost non-trivial dim: wrap
                        reg = intdiv.urem(w, reg, dim, bound=count // inner - 1)
                    return reg
                result.append(self.per_thread(known[d], compute))
            return result
        with self.preamble():
            return self._cached(("mi", shape, k, None if layout is None else layout.key()), make)

    def per_thread(self, values: np.ndarray, compute: Callable[[], str],
                   wide: bool = False) -> str:
        """Register (.b32, or .b64 when `wide`) holding values[t] in thread t, a per-thread value
        known at compile time; made in the preamble once per distinct row of values: a constant
        when every thread has the same, an add to an earlier row that differs from it by a
        constant in every thread, else `compute()` (which emits code giving these values)."""
        bits = 64 if wide else 32
        # plain ints: the cyclic layout's rows come without numpy (see _unravel)
        row = tuple(values) if isinstance(values, (list, tuple)) else \
            tuple(np.asarray(values, np.int64).reshape(-1).tolist())
        key = ("row", bits, row)
        if key in self._cache:
            return self._cache[key]
        first = row[0]
        shapes = self._cache.setdefault(("row shapes", bits), {})
        shape_key = tuple(value - first for value in row)
        with self.preamble():
            if not any(shape_key):
                reg = self.const_b64(first & (2**64 - 1)) if wide else \
                    self.const_u32(first & 0xFFFFFFFF)
            elif shape_key in shapes:
                base, base_first = shapes[shape_key]
                reg = self.w.reg(f"b{bits}")
                self.w(f"add.u{bits} {reg}, {base}, {(first - base_first) % 2**bits}")
            else:
                reg = compute()
                shapes[shape_key] = (reg, first)
        self._cache[key] = reg
        return reg

    def slot_deltas(self, shape, layout=None) -> list[tuple | None]:
        """Per slot k: multi_index(shape, k) - multi_index(shape, 0) when that difference is the
        same for every thread (so slot k's address is slot 0's plus a constant), else None.
        Holds e.g. for a [R, C] tile when C divides T (slot k is k*T/C rows further down)."""
        shape = tuple(shape)
        count = math.prod(shape)  # ints: numpy is imported only when there are slots to compare
        # inside a chunk: its slots, the first of the whole tile's
        slots = self.slots(count) if layout is None else layout.slots
        key = ("deltas", shape, None if layout is None else layout.key(), slots)
        if key not in self._cache:
            deltas: list[tuple | None] = [None] * slots
            if layout is not None and count > 1:
                index = np.stack(np.unravel_index(layout.table(self.T), shape))
            elif count > 1 and count % self.T == 0:
                # cyclic, whole rows (no numpy: Cyclic.row)
                cyclic = Cyclic(count, self.T)
                first = _unravel(cyclic.row(0, self.T), shape)
                for k in range(slots):
                    moved = [[a - b for a, b in zip(now, then)]
                             for now, then in zip(_unravel(cyclic.row(k, self.T), shape), first)]
                    if all(len(set(dim)) == 1 for dim in moved):
                        deltas[k] = tuple(dim[0] for dim in moved)
                index = None
            else:
                index = None
            if index is not None:
                moved = index - index[:, :1, :]
                for k in range(slots):
                    if np.all(moved[:, k, :] == moved[:, k, :1]):
                        deltas[k] = tuple(int(v) for v in moved[:, k, 0])
            self._cache[key] = deltas
        return self._cache[key]

    def owner(self, count: int, k: int) -> str | None:
        """Predicate: this thread owns slot k (None: always). Side effects are guarded by it."""
        if count % self.T == 0:
            return None

        def make():
            reg = self.w.reg("pred")
            self.w(f"setp.lt.u32 {reg}, {self.tid()}, {count - k * self.T}")
            return reg
        return self._cached(("own", count, k), make)

    def const_u32(self, value: int) -> str:
        def make():
            reg = self.w.reg("b32")
            self.w(f"mov.u32 {reg}, {value}")
            return reg
        return self._cached(("u32", value), make)

    def const_b64(self, value: int) -> str:
        def make():
            reg = self.w.reg("b64")
            self.w(f"mov.b64 {reg}, {value}")
            return reg
        return self._cached(("b64", value), make)

    def smem_base(self) -> str:
        def make():
            reg = self.w.reg("b32")
            self.w(f"mov.u32 {reg}, __tilebc_smem")
            return reg
        return self._cached(("smem",), make)

    # -- scalars -------------------------------------------------------------------------------
    def scalar_s64(self, tile: Tile, unsigned: bool = False) -> str:
        """A .b64 register with the value of an integer scalar (sign- or zero-extended)."""
        element = tile.element
        reg = tile.scalar
        if isinstance(element, PointerType) or element.name == "i64":
            return reg
        out = self.w.reg("b64")
        if element.name == "i1":
            self.w(f"selp.b64 {out}, 1, 0, {reg}")
        elif unsigned:
            narrow = self.zero_extended(reg, element)
            self.w(f"cvt.u64.u32 {out}, {narrow}")
        else:
            self.w(f"cvt.s64.s32 {out}, {reg}")
        return out

    def zero_extended(self, reg: str, element: ElementType) -> str:
        """A b32 register holding the unsigned value of a sign-extended i8/i16/i32 register."""
        bits = dtypes.int_bits(element)
        if bits >= 32:
            return reg
        out = self.w.reg("b32")
        self.w(f"and.b32 {out}, {reg}, {(1 << bits) - 1}")
        return out

    def normalize_int(self, reg: str, element: ElementType) -> str:
        """Re-establish the sign-extended form after 32-bit arithmetic on i8/i16."""
        bits = dtypes.int_bits(element)
        if bits not in (8, 16):
            return reg
        out = self.w.reg("b32")
        self.w(f"cvt.s32.s{bits} {out}, {reg}")
        return out

    # -- memory --------------------------------------------------------------------------------
    @property
    def pointer_space(self) -> str:
        """State space for loads/stores/atomics through Tile IR pointers: "global" or "" (generic)."""
        return "" if self.generic_pointers else "global"

    @staticmethod
    def _space(space: str) -> str:
        return f".{space}" if space else ""

    def space_suffix(self) -> str:
        """".global" or "" (generic) for instructions through Tile IR pointers."""
        return self._space(self.pointer_space)

    def load(self, space: str, address: str, element, qualifiers: str = "",
             predicate: str | None = None, default: str | None = None) -> str:
        """Load one element; with `predicate`, lanes where it is false get `default`."""
        w = self.w
        name = dtypes.name_of(element)
        cls = dtypes.reg_class(element)
        out = w.reg(cls)
        guard = f"@{predicate} " if predicate else ""
        if predicate and default is not None:
            w(f"mov.{dtypes.mov_type(cls)} {out}, {default}")
        if name == "i1":
            byte = w.reg("b16")
            if predicate:
                w(f"mov.b16 {byte}, 0")
            w(f"{guard}ld{qualifiers}{self._space(space)}.u8 {byte}, [{address}]")
            if predicate and default is not None:
                loaded = w.reg("pred")
                w(f"setp.ne.u16 {loaded}, {byte}, 0")
                w(f"@{predicate} mov.pred {out}, {loaded}")
            else:
                w(f"setp.ne.u16 {out}, {byte}, 0")
            return out
        memtype = dtypes.mem_type(element)
        if name in dtypes.BYTE_FLOATS:
            memtype = "u8"
        w(f"{guard}ld{qualifiers}{self._space(space)}.{memtype} {out}, [{address}]")
        return out

    def store(self, space: str, address: str, reg: str, element, qualifiers: str = "",
              predicate: str | None = None) -> None:
        w = self.w
        name = dtypes.name_of(element)
        guard = f"@{predicate} " if predicate else ""
        if name == "i1":
            byte = w.reg("b16")
            w(f"selp.u16 {byte}, 1, 0, {reg}")
            w(f"{guard}st{qualifiers}{self._space(space)}.u8 [{address}], {byte}")
            return
        memtype = {"s8": "u8", "s16": "u16", "b8": "u8"}.get(dtypes.mem_type(element),
                                                            dtypes.mem_type(element))
        w(f"{guard}st{qualifiers}{self._space(space)}.{memtype} [{address}], {reg}")

    def reserve_smem(self, sizes: list[int], align: int = 16) -> list[int]:
        """Offsets (`align`-byte aligned, the area's base too) for buffers of `sizes` bytes in
        the shared exchange area."""
        self.smem_align = max(self.smem_align, align)
        offsets, top = [], -(-self.smem_floor // align) * align
        for size in sizes:
            offsets.append(top)
            top += -(-size // align) * align
        if top > self.smem_size:
            self.smem_size, self.smem_peak_op = top, self.w.current_op
        return offsets

    def smem_size_of(self, tile_type: TileType) -> int:
        return tile_type.num_elements * dtypes.byte_size(tile_type.element)

    def smem_address(self, offset: int, index: str, element) -> str:
        """u32 shared address of element `index` (u32 register) of a buffer at `offset`."""
        w = self.w
        addr = w.reg("b32")
        w(f"mad.lo.u32 {addr}, {index}, {dtypes.byte_size(element)}, {self.smem_base()}")
        if offset:
            w(f"add.u32 {addr}, {addr}, {offset}")
        return addr

    def slot_address(self, offset: int, count: int, k: int, element) -> str:
        """Shared address (`reg+imm` operand text) of this thread's slot k of a `count`-element
        buffer at `offset`. When the tile fills whole rounds of threads, slot k sits k*T elements
        after slot 0, so one per-thread base register serves every slot and buffer."""
        size = dtypes.byte_size(element)
        if count == 1 or count % self.T:
            return self.smem_address(offset, self.elem_index(count, k), element)

        def make():
            reg = self.w.reg("b32")
            self.w(f"mad.lo.u32 {reg}, {self.tid()}, {size}, {self.smem_base()}")
            return reg
        return f"{self._cached(('slot_base', size), make)}+{offset + k * self.T * size}"

    def layout_address(self, offset: int, layout, k: int, element) -> str:
        """Shared address (`reg+imm` operand text) of slot k of `layout` in a buffer at `offset`.
        Layouts whose slots sit at fixed distances from a per-thread base (MmaAcc) share one
        base register and take the rest as immediates: no address register per slot stays live
        (across a K loop, say) until the exchange."""
        if not hasattr(layout, "slot_offset"):
            return self.smem_address(offset, layout.emit_index(self, k), element)
        size = dtypes.byte_size(element)

        def make():
            reg = self.w.reg("b32")
            self.w(f"mad.lo.u32 {reg}, {layout.emit_base(self)}, {size}, {self.smem_base()}")
            return reg
        base = self._cached(("layout base", layout.key(), size), make)
        return f"{base}+{offset + size * layout.slot_offset(k)}"

    def smem_write(self, tile: Tile, offset: int) -> None:
        """Every element of `tile` at its linear index (from its own layout: no conversion)."""
        if tile.layout is not None and tile.layout is not UNIFORM:
            for k in distinct_slots(tile.layout, self.T):
                self.store("shared", self.layout_address(offset, tile.layout, k, tile.element),
                           tile.regs[k], tile.element)
            return
        for k in range(self.slots(tile.count)):
            self.store("shared", self.slot_address(offset, tile.count, k, tile.element),
                       tile.slot(k), tile.element)

    def _write_staged(self, tile: Tile, offset: int, place, table, vector: int,
                      slots=None) -> None:
        """The tile's `slots` (default: all; `table`: its layout's table) into a buffer at
        `offset` placed by `place` (staging.Padded, None: unpadded). Slots at a constant
        distance from slot 0 in every thread share one base register; runs of `vector` slots
        that land whole and aligned are one st.shared.v."""
        size = dtypes.byte_size(tile.element)
        positions = staging.position(place, table)
        address = self._staged_addresses(offset, place, self.layout_of(tile), positions,
                                          tile.element)
        slots = list(range(table.shape[0])) if slots is None else list(slots)
        i = 0
        while i < len(slots):
            k = slots[i]
            if slots[i:i + vector] == list(range(k, k + vector)) \
                    and self._vector_run(positions, k, vector, size):
                vector_access(self.w, "st", ".shared", dtypes.mem_type(tile.element),
                              tile.regs[k:k + vector], address(k))
                i += vector
                continue
            self.store("shared", address(k), tile.slot(k), tile.element)
            i += 1

    def smem_read_slot(self, offset: int, count: int, k: int, element) -> str:
        """This thread's slot k of a `count`-element buffer written by smem_write."""
        return self.load("shared", self.slot_address(offset, count, k, element), element)

    def smem_read(self, offset: int, index: str, element) -> str:
        return self.load("shared", self.smem_address(offset, index, element), element)

    def barrier(self) -> None:
        self.w("bar.sync 0")

    def shuffle(self, reg: str, element, mode: str, source) -> str:
        """shfl.sync.`mode` of `reg` (any register class): mode "bfly" reads lane
        (laneid ^ source), "idx" lane `source` (immediate or u32 register), "up" lane
        laneid - source and "down" lane laneid + source (lanes past the warp's end keep their
        own value). All 32 lanes of the warp must execute it, as they do everywhere the
        lowering emits it (uniform control)."""
        w = self.w
        cls = dtypes.reg_class(element)
        clamp = 0 if mode == "up" else 31

        def shfl32(value):
            out = w.reg("b32")
            w(f"shfl.sync.{mode}.b32 {out}, {value}, {source}, {clamp}, -1")
            return out
        if cls == "b32":
            return shfl32(reg)
        if cls == "f32":
            bits, out = w.reg("b32"), w.reg("f32")
            w(f"mov.b32 {bits}, {reg}")
            w(f"mov.b32 {out}, {shfl32(bits)}")
            return out
        if cls == "b16":
            wide, out = w.reg("b32"), w.reg("b16")
            w(f"cvt.u32.u16 {wide}, {reg}")
            w(f"cvt.u16.u32 {out}, {shfl32(wide)}")
            return out
        if cls == "pred":
            wide, out = w.reg("b32"), w.reg("pred")
            w(f"selp.u32 {wide}, 1, 0, {reg}")
            w(f"setp.ne.u32 {out}, {shfl32(wide)}, 0")
            return out
        low, high, out = w.reg("b32"), w.reg("b32"), w.reg(cls)
        w(f"mov.b64 {{{low}, {high}}}, {reg}")
        low2, high2 = shfl32(low), shfl32(high)
        w(f"mov.b64 {out}, {{{low2}, {high2}}}")
        return out

    def gather(self, sources: list[Tile], result_type: TileType,
               source_index: Callable[[int, list[str]], tuple],
               static: Callable[[np.ndarray], tuple] | None = None, layout=None) -> Tile:
        """Build a tile (in `layout`, default Cyclic) whose elements come from other threads'
        slots of `sources`.
        `source_index(k, out_multi_index)` emits code and returns (which source, u32 linear index),
        or (which source, index, predicate-choosing-source-1-over-0 ...) via `select` tuples:
        a 2-tuple (i, idx) reads source i; a 4-tuple (pred, idx_a, idx_b, None) reads source 0 at
        idx_a where pred is true, else source 1 at idx_b.
        `static`, when the op's element movement is known at compile time, maps an array of
        result linear indices to (which source, source linear index) arrays: see _gather_static.
        Sources of at most 32 elements (a divisor of 32) sit whole in every warp - lane e holds
        element e - so they are read with shfl.sync.idx: no shared memory, no barriers.
        A static gather takes sources in any layout that holds each element once (a vector
        load's Blocked) as they are; other layouts are converted to Cyclic first."""
        def whole_in_warps():
            return self.T % 32 == 0 and all(s.count <= 32 and 32 % s.count == 0
                                            and s.layout is None for s in sources)
        if static is not None and all(s.layout is None or self.held_once(s) for s in sources):
            return self._gather_static(sources, result_type, source_index, static,
                                       whole_in_warps(), layout)
        sources = [self.convert(s, None) if s.layout is not None else s for s in sources]
        small = whole_in_warps()
        if small:
            return self._gather_by_shuffle(sources, result_type, source_index, layout=layout)
        offsets = self.reserve_smem([self.smem_size_of(s.type) for s in sources])
        for source, offset in zip(sources, offsets):
            self.smem_write(source, offset)
        self.barrier()
        regs = []  # the loaded registers themselves: no copy waits on each load
        for k in range(self._slots_in(result_type, layout)):
            mi = self.multi_index(result_type.shape, k, layout)
            choice = source_index(k, mi)
            if len(choice) == 2:
                which, index = choice
                value = self.smem_read(offsets[which], index, sources[which].element)
            else:
                pred, index_a, index_b, _ = choice
                a = self.smem_read(offsets[0], index_a, sources[0].element)
                b = self.smem_read(offsets[1], index_b, sources[1].element)
                value = self.select(pred, a, b, result_type.element)
            regs.append(value)
        self.barrier()
        return Tile(result_type, regs, layout)

    def _convert_staged(self, tile: Tile, source, want) -> list[str] | None:
        """The registers of `want`'s slots through a padded buffer (staging.py) and vector
        accesses of Blocked sides, where either cuts the exchange's wavefronts; None to keep the
        plain exchange."""
        size = dtypes.byte_size(tile.element)
        slots = distinct_slots(source, self.T)
        vectors = [self.shared_vector(side, tile.element) for side in (source, want)]
        writes, reads = source.table(self.T)[slots], want.table(self.T)
        place = staging.choose_placement(tile.count, size, writes[::vectors[0]],
                                         reads[::vectors[1]], *vectors)
        if place is None and vectors == [1, 1]:
            return None
        if place is not None and self._crosses_a_limit([tile.count * size],
                                                       [place.buffer_elements(tile.count) * size]):
            place = None
        [offset] = self.reserve_smem([staging.buffer_bytes(place, tile.count, size)])
        self._write_staged(tile, offset, place, source.table(self.T), vectors[0], slots)
        self.barrier()
        out = self._read_staged(offset, place, want, tile.element, vectors[1])
        self.barrier()
        return out

    def _read_staged(self, offset: int, place, layout, element, vector: int) -> list[str]:
        """Every slot of `layout` from a buffer at `offset` placed by `place`: slots at a constant
        distance from slot 0 in every thread share one base register; runs of `vector` slots
        that lie whole and aligned are one ld.shared.v."""
        size = dtypes.byte_size(element)
        table = layout.table(self.T)
        positions = staging.position(place, table)
        address = self._staged_addresses(offset, place, layout, positions, element)
        cls = dtypes.reg_class(element)
        out, k = [], 0
        while k < table.shape[0]:
            if self._vector_run(positions, k, vector, size):
                run = [self.w.reg(cls) for _ in range(vector)]
                vector_access(self.w, "ld", ".shared", dtypes.mem_type(element), run, address(k))
                out += run
                k += vector
                continue
            out.append(self.load("shared", address(k), element))
            k += 1
        return out

    def _staged_addresses(self, offset: int, place, layout, positions, element):
        """k -> the shared address operand of slot k of `layout` in a placed buffer."""
        size = dtypes.byte_size(element)
        deltas = positions - positions[0]

        def make():
            index = layout.emit_index(self, 0)
            if place is not None:
                index = place.emit(self.w, index)
            return self.smem_address(0, index, element)
        base = self._cached(("staged base", layout.key(), place, size), make)

        def address(k):
            if np.all(deltas[k] == deltas[k, 0]):
                return f"{base}+{offset + int(deltas[k, 0]) * size}"
            index = layout.emit_index(self, k)
            if place is not None:
                index = place.emit(self.w, index)
            return self.smem_address(offset, index, element)
        return address

    @staticmethod
    def shared_vector(layout, element) -> int:
        """Elements per ld/st.shared.v of a layout's runs: a Blocked layout's run, halved down to
        at most 16 bytes (8 2-byte elements go as 4 pairs; common.vector_access) (1: scalar
        accesses)."""
        vec = layout.vec if isinstance(layout, Blocked) else 1
        while vec > 1 and vec > most_elements(element):
            vec //= 2
        return vec

    @staticmethod
    def _vector_run(positions, k: int, vector: int, size: int) -> bool:
        """Slots k .. k+vector-1 sit at consecutive positions, aligned to the vector, in every
        thread."""
        run = positions[k:k + vector]
        return vector > 1 and len(run) == vector \
            and bool(np.all(run - run[0] == np.arange(vector)[:, None])) \
            and bool(np.all((run[0] * size) % (vector * size) == 0))

    def alloca_bytes(self) -> int:
        """The .shared scratch buffers' bytes, each rounded up to 16."""
        return sum(-(-size // 16) * 16 for _, _, size in self.allocas)

    def _crosses_a_limit(self, plain: list[int], padded: list[int]) -> bool:
        """Whether exchange buffers of `padded` bytes would pass a shared-memory limit (the 48 KiB
        a CTA has without opting in, the arch's maximum) that buffers of `plain` bytes keep
        under: padding is worth neither a launch attribute nor a failed compile."""
        from ..targets import max_shared_per_block
        floor = self.alloca_bytes() + -(-self.smem_floor // 16) * 16

        def top(sizes):
            return floor + sum(-(-size // 16) * 16 for size in sizes)
        return any(top(plain) <= limit < top(padded)
                   for limit in (STATIC_SHARED_LIMIT, max_shared_per_block(self.arch)))

    def held_once(self, tile: Tile) -> bool:
        """Whether the tile's layout holds each element in exactly one (slot, thread)."""
        layout = tile.layout
        if layout is None or layout is UNIFORM or layout.slots * self.T != tile.count:
            return False
        table = layout.table(self.T)
        return len(np.unique(table)) == tile.count

    def _slots_in(self, type: TileType, layout) -> int:
        return self.slots(type.num_elements) if layout is None else layout.slots

    def _gather_static(self, sources, result_type, source_index, static, small,
                       layout=None) -> Tile:
        """`gather` with the source of every (slot, thread) known at compile time. A slot whose
        element this thread already holds in some source slot is a register move. A slot that
        reads the same source element in every thread reads it at a constant shared address
        (consecutive ones as one ld.shared.v2/v4) or, from a small source, with an immediate
        shuffle lane; equal reads are made once. Slots whose reads differ by the same constant in
        every thread share one address register. Only what no register holds goes through
        shared memory, and all loads are issued before any of their values is used."""
        T = self.T
        count = result_type.num_elements
        linear = (layout or Cyclic(count, T)).table(T)
        which, index = static(linear)
        which = np.broadcast_to(np.asarray(which, np.int64), linear.shape)
        index = np.asarray(index, np.int64)
        element = result_type.element
        tables = [self.layout_of(s).table(T) for s in sources]
        held = []  # per source: row bytes -> slot holding that row in every thread
        for table in tables:
            rows: dict[bytes, int] = {}
            for j in range(table.shape[0] - 1, -1, -1):
                rows[np.ascontiguousarray(table[j]).tobytes()] = j
            held.append(rows)
        regs: list[str | None] = [None] * linear.shape[0]
        remote = []
        for k in range(linear.shape[0]):
            w0 = int(which[k, 0])
            if np.all(which[k] == w0):
                hit = held[w0].get(np.ascontiguousarray(index[k]).tobytes())
                if hit is not None:
                    regs[k] = sources[w0].regs[hit] if sources[w0].count > 1 \
                        else sources[w0].scalar
                    continue
            remote.append(k)
        if not remote:
            return Tile(result_type, regs, layout)
        if small:  # every warp holds the sources whole: lane e holds element e
            dynamic, lanes = [], {}
            for k in remote:
                w0 = int(which[k, 0])
                if np.all(which[k] == w0) and np.all(index[k] == index[k, 0]):
                    key = (w0, int(index[k, 0]))
                    if key not in lanes:
                        lanes[key] = self.shuffle(sources[w0].scalar, sources[w0].element,
                                                  "idx", key[1])
                    regs[k] = lanes[key]
                else:
                    dynamic.append(k)
            if dynamic:  # slots reading the same elements in every thread share one shuffle
                first_of: dict[tuple, int] = {}
                for k in dynamic:
                    first_of.setdefault((np.ascontiguousarray(which[k]).tobytes(),
                                         np.ascontiguousarray(index[k]).tobytes()), k)
                unique = sorted(set(first_of.values()))
                rest = self._gather_by_shuffle(sources, result_type, source_index, unique, layout)
                for k in dynamic:
                    regs[k] = rest.regs[first_of[(np.ascontiguousarray(which[k]).tobytes(),
                                                  np.ascontiguousarray(index[k]).tobytes())]]
            return Tile(result_type, regs, layout)
        needed = sorted({int(which[k, 0]) if np.all(which[k] == which[k, 0]) else -1
                         for k in remote})
        used = range(len(sources)) if -1 in needed else needed
        size = dtypes.byte_size(element)
        places = [None] * len(sources)
        vectors = [self.shared_vector(s.layout, element) for s in sources]
        if -1 not in needed:  # every read names its source at compile time: stage each padded
            for i in used:    # where that cuts bank conflicts (staging.py)
                if len(sources[i].regs) != tables[i].shape[0]:
                    continue
                reads = [index[k] for k in remote if int(which[k, 0]) == i
                         and not np.all(index[k] == index[k, 0])]
                places[i] = staging.choose_placement(
                    sources[i].count, size, tables[i][::vectors[i]],
                    np.array(reads).reshape(-1, T), vectors[i])
        if any(places) and self._crosses_a_limit(
                [s.count * size if i in used else 0 for i, s in enumerate(sources)],
                [staging.buffer_bytes(places[i], s.count, size) if i in used else 0
                 for i, s in enumerate(sources)]):
            places = [None] * len(sources)
        sizes = [staging.buffer_bytes(places[i], s.count, size) if i in used else 0
                 for i, s in enumerate(sources)]
        offsets = self.reserve_smem(sizes)
        for i in used:
            if places[i] is None and sources[i].layout is None:
                self.smem_write(sources[i], offsets[i])
            else:
                self._write_staged(sources[i], offsets[i], places[i], tables[i], vectors[i])
        self.barrier()
        cls = dtypes.reg_class(element)
        uniform: dict[tuple, list[int]] = {}   # (source, element index) -> slots reading it
        patterns: dict[tuple, str] = {}        # (source, index[k] - index[k, 0]) -> address reg
        loads = []  # (slot, address operand) read one element each, after the vector reads
        for k in remote:
            w0 = int(which[k, 0])
            if not np.all(which[k] == w0):
                choice = source_index(k, self.multi_index(result_type.shape, k, layout))
                if len(choice) == 2:
                    regs[k] = self.smem_read(offsets[choice[0]], choice[1],
                                             sources[choice[0]].element)
                    continue
                pred, index_a, index_b, _ = choice
                a = self.smem_read(offsets[0], index_a, sources[0].element)
                b = self.smem_read(offsets[1], index_b, sources[1].element)
                regs[k] = self.select(pred, a, b, element)
                continue
            first = int(index[k, 0])
            if np.all(index[k] == first):
                uniform.setdefault((w0, first), []).append(k)
                continue
            placed = staging.position(places[w0], index[k])
            first = int(placed[0])
            key = (w0, np.ascontiguousarray(placed - first).tobytes())
            if key not in patterns:
                choice = source_index(k, self.multi_index(result_type.shape, k, layout))
                reg = choice[1] if len(choice) == 2 else choice[1 + w0]
                if places[w0] is not None:
                    reg = places[w0].emit(self.w, reg)
                address = self.smem_address(offsets[w0], reg, element)
                patterns[key] = (address, first)
            address, base = patterns[key]
            delta = (first - base) * size
            loads.append((k, f"{address}+{delta}" if delta else address))
        # uniform reads: runs of consecutive elements as vector loads where aligned
        vector_ok = cls in ("b32", "f32", "b64", "f64") and dtypes.name_of(element) != "i1"
        wide = {4: 4, 8: 2}.get(size, 1) if vector_ok else 1
        done = set()
        for (w0, first), slots in sorted(uniform.items()):
            if (w0, first) in done:
                continue
            address = offsets[w0] + int(staging.position(places[w0], first)) * size
            run = 1
            for vec in (wide, 2) if vector_ok else ():
                if vec > 1 and address % (vec * size) == 0 and \
                        all((w0, first + j) in uniform and staging.position(
                            places[w0], first + j) == staging.position(places[w0], first) + j
                            for j in range(vec)):
                    run = vec
                    break
            if run == 1:
                out = self.w.reg(cls)
                loads.append((None, f"{self.smem_base()}+{address}", out))
                targets = [out]
            else:
                targets = [self.w.reg(cls) for _ in range(run)]
                vector_access(self.w, "ld", ".shared", dtypes.mem_type(element), targets,
                              f"{self.smem_base()}+{address}")
            for j, reg in enumerate(targets):
                done.add((w0, first + j))
                for k in uniform.get((w0, first + j), []):
                    regs[k] = reg
        # scalar reads: loads first, then any conversion (i1), so loads overlap
        pending = []
        for entry in loads:
            if len(entry) == 3:
                _, operand, out = entry
                self._raw_shared_load(operand, element, out, pending)
            else:
                k, operand = entry
                out = self.w.reg(cls)
                self._raw_shared_load(operand, element, out, pending)
                regs[k] = out
        for byte, out in pending:
            self.w(f"setp.ne.u16 {out}, {byte}, 0")
        self.barrier()
        return Tile(result_type, regs, layout)

    def _raw_shared_load(self, operand: str, element, out: str, pending: list) -> None:
        """ld.shared of one element into `out`; an i1 is loaded as a byte whose test is left in
        `pending` (emitted after the other loads)."""
        name = dtypes.name_of(element)
        if name == "i1":
            byte = self.w.reg("b16")
            self.w(f"ld.shared.u8 {byte}, [{operand}]")
            pending.append((byte, out))
            return
        memtype = "u8" if name in dtypes.BYTE_FLOATS else dtypes.mem_type(element)
        self.w(f"ld.shared.{memtype} {out}, [{operand}]")

    def _gather_by_shuffle(self, sources, result_type, source_index, slots=None,
                           layout=None) -> Tile:
        count = self._slots_in(result_type, layout)
        regs: list[str | None] = [None] * count  # the shuffled registers themselves
        for k in range(count) if slots is None else slots:
            choice = source_index(k, self.multi_index(result_type.shape, k, layout))
            if len(choice) == 2:
                which, index = choice
                value = self.shuffle(sources[which].scalar, sources[which].element, "idx", index)
            else:
                pred, index_a, index_b, _ = choice
                a = self.shuffle(sources[0].scalar, sources[0].element, "idx", index_a)
                b = self.shuffle(sources[1].scalar, sources[1].element, "idx", index_b)
                value = self.select(pred, a, b, result_type.element)
            regs[k] = value
        return Tile(result_type, regs, layout)

    def select(self, pred: str, a: str, b: str, element) -> str:
        cls = dtypes.reg_class(element)
        out = self.w.reg(cls)
        if cls == "pred":
            t1, t2 = self.w.reg("pred"), self.w.reg("pred")
            self.w(f"and.pred {t1}, {pred}, {a}")
            self.w(f"not.pred {t2}, {pred}")
            self.w(f"and.pred {t2}, {t2}, {b}")
            self.w(f"or.pred {out}, {t1}, {t2}")
        else:
            self.w(f"selp.{dtypes.mov_type(cls)} {out}, {a}, {b}, {pred}")
        return out

    def linear_index(self, indices: list[str], shape) -> str:
        """u32 register: row-major linear index of u32 `indices` in `shape`."""
        w = self.w
        acc = None
        for index, dim in zip(indices, shape):
            if acc is None:
                acc = index
                continue
            nxt = w.reg("b32")
            w(f"mad.lo.u32 {nxt}, {acc}, {dim}, {index}")
            acc = nxt
        return acc if acc is not None else self.const_u32(0)

    def copy_into(self, regs: list[str], tile: Tile) -> None:
        cls = dtypes.reg_class(tile.element)
        for k, reg in enumerate(regs):
            self.w(f"mov.{dtypes.mov_type(cls)} {reg}, {tile.slot(k)}")

    def parallel_copy(self, targets: list[list[str]], tiles: list[Tile]) -> None:
        """Copy tiles into register groups as one parallel assignment (sources may be targets).

        A move goes out once no other pending move reads its target; only a cycle (targets that
        read each other, as in a swap) goes through a temporary register. Staging every value
        instead doubled the moves at each loop latch and left ptxas copies it kept in SASS."""
        moves = {}  # target register -> (source, register class); one in place stays
        for regs, tile in zip(targets, tiles):
            cls = dtypes.reg_class(tile.element)
            for k, reg in enumerate(regs):
                source = tile.slot(k)
                if source != reg:
                    moves[reg] = (source, cls)
        readers = {}  # source register -> how many pending moves read it
        for source, _ in moves.values():
            readers[source] = readers.get(source, 0) + 1
        while moves:
            ready = [target for target in moves if not readers.get(target)]
            if not ready:  # every pending target is read by another move: break one cycle
                target = next(iter(moves))
                cls = moves[target][1]
                temp = self.w.reg(cls)
                self.w(f"mov.{dtypes.mov_type(cls)} {temp}, {target}")
                for other, (source, other_cls) in list(moves.items()):
                    if source == target:
                        moves[other] = (temp, other_cls)
                readers[temp] = readers.pop(target)
                continue
            for target in ready:
                source, cls = moves.pop(target)
                self.w(f"mov.{dtypes.mov_type(cls)} {target}, {source}")
                readers[source] -= 1

    # -- walking -------------------------------------------------------------------------------
    def lower_block(self, block: Block) -> None:
        self._blocks_lowered += 1
        self._scope.append(self._blocks_lowered)
        try:
            for op in block.ops:
                self.lower_op(op)
        finally:
            self._scope.pop()

    @contextmanager
    def fresh_scope(self):
        """Code lowered inside is a block of its own for `scoped` (a loop body: what it computes
        is not reused after it)."""
        self._blocks_lowered += 1
        self._scope.append(self._blocks_lowered)
        try:
            yield
        finally:
            self._scope.pop()

    def scoped_hit(self, key):
        """What scoped(key, ...) would reuse here, or None (nothing is computed)."""
        hit = self._scoped.get(key)
        scope = tuple(self._scope)
        return hit[1] if hit is not None and scope[:len(hit[0])] == hit[0] else None

    def scoped(self, key, make):
        """make()'s registers, reused by a later op asking for the same key when that op is
        lowered in the same block invocation or one nested inside it: the registers were then
        written on every path to it (code is emitted in order and nested blocks are structured).
        A sibling block, or another lowering of the same block, computes its own."""
        scope = tuple(self._scope)
        hit = self._scoped.get(key)
        if hit is not None and scope[:len(hit[0])] == hit[0]:
            return hit[1]
        value = make()
        self._scoped[key] = (scope, value)
        return value

    def lower_op(self, op: Op) -> None:
        if op in self.dead:
            return
        region = self.chunked.get(op)
        hook = LOWERINGS.get(op.name)
        if region is not None and self.chunk is None:
            if op is not region.ops[-1]:
                return  # lowered in the region's loop, where its last op stands
            from .chunks import emit
            hook = lambda lw, _op: emit(lw, region)  # noqa: E731
        elif region is not None:
            from .chunks import HOOKS, role
            hook = HOOKS.get(role(op), hook)
        if hook is None:
            reason = NOT_LOWERED.get(op.name, "no lowering registered")
            raise self.error(op, f"not supported by the JIT: {reason}")
        saved = self.w.current_op
        self.w.current_op = op
        try:
            hook(self, op)
        except LoweringError:
            raise
        except TilebcError as exc:
            raise self.error(op, exc.message) from exc
        finally:
            self.w.current_op = saved

    def module_global(self, name: str):
        for item in self.module.globals:
            if item.name == name:
                return item
        raise KeyError(name)

    def global_symbol(self, name: str) -> str:
        self.globals_used.add(name)
        return f"__tilebc_global_{name}"

    def add_string(self, data: bytes) -> str:
        self.strings.append(data + b"\0")
        return f"{self.prefix}_str{len(self.strings) - 1}"


def _const_table(prefix: str, arrays: list[tuple], tables: dict[str, str], key: str,
                 payload: bytes) -> str:
    """Symbol of a read-only .const byte table (emitted once per kernel per key)."""
    if key not in tables:
        name = f"{prefix}_const{len(arrays)}"
        arrays.append((name, payload))
        tables[key] = name
    return tables[key]
