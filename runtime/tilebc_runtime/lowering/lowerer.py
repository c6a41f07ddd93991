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

from contextlib import contextmanager
from typing import Callable, Dict, List, Optional

import numpy as np

from tilebc.errors import TilebcError
from tilebc.ir.module import Block, Function, Module, Op, Value
from tilebc.ir.types import ElementType, PointerType, TileType
from tilebc.ops.spec import Effects

from . import dtypes, intdiv
from .common import AFTER_MEMORY, FRESH, Frame, SubView, TensorView, Tile, Token  # noqa: F401
from .layout import UNIFORM, Cyclic, distinct_slots, register_map
from .ptx import PtxWriter


# static shared memory a CTA gets without opting in to more: the exchange area is declared
# statically when everything fits here, else as dynamic shared memory (see compiler.py)
from ..targets import STATIC_SHARED_LIMIT  # noqa: E402  (re-exported for the lowering modules)


class LoweringError(TilebcError):
    """A Tile IR construct the JIT cannot lower (names the op and where it came from)."""


class Lowerer:
    def __init__(self, module: Module, function: Function, *, threads: int, arch: int,
                 prefix: str = "__tilebc"):
        self.prefix = prefix  # per-kernel symbol prefix (strings, constants)
        self.module = module
        self.function = function
        self.T = threads
        self.arch = arch  # e.g. 90 for sm_90
        self.w = PtxWriter()
        self.w.arch = arch
        self.w.const_table = self.const_table
        self._tables: Dict[str, str] = {}
        self.values: Dict[Value, object] = {}
        self.frames: List[Frame] = []
        self.smem_size = 0
        self.smem_peak_op: Optional[Op] = None  # the op whose exchange set smem_size
        self.strings: List[bytes] = []  # .global byte strings (print formats, assert messages)
        self.const_arrays: List[tuple] = []  # (name, ptx type, values) for non-splat constants
        self.uses_vprintf = False
        self.globals_used = set()
        self.local_bytes = 0
        self.exit_label = self.w.label("exit")
        # alloca scratch lives in shared memory, so a kernel with an alloca addresses everything a
        # pointer can reach generically (no state space); other kernels use .global.
        self.generic_pointers = any(o.spec.effects is Effects.ALLOC for o in function.walk())
        self.allocas: List[tuple] = []  # (symbol, alignment, bytes) of .shared scratch buffers
        self._cache: Dict[tuple, object] = {}
        # lower_block invocations enclosing the op being lowered (each gets a fresh number), and
        # values shared between ops: (scope they were computed in, value), see `scoped`
        self._scope: List[int] = []
        self._blocks_lowered = 0
        self._scoped: Dict[tuple, tuple] = {}
        # results equal to an earlier value, and ops nothing needs: not lowered (simplify.py)
        from .simplify import dead_ops, forwarding
        self.forward: Dict[Value, Value] = forwarding(self, function)
        self.dead = dead_ops(function, self.forward)

    # -- diagnostics ---------------------------------------------------------------------------
    def error(self, op: Optional[Op], message: str) -> LoweringError:
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
        [offset] = self.reserve_smem([self.smem_size_of(tile.type)])
        for k in distinct_slots(source, self.T):
            if tile.layout is None:
                address = self.slot_address(offset, tile.count, k, tile.element)
            else:
                address = self.smem_address(offset, source.emit_index(self, k), tile.element)
            self.store("shared", address, tile.regs[k], tile.element)
        self.barrier()
        out = []
        for k in range(want.slots):
            if layout is None:
                out.append(self.smem_read_slot(offset, tile.count, k, tile.element))
            else:
                out.append(self.smem_read(offset, want.emit_index(self, k), tile.element))
        self.barrier()
        return Tile(tile.type, out, layout)

    def set(self, value: Value, lowered) -> None:
        self.values[value] = lowered

    def slots(self, count: int) -> int:
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

    def multi_index(self, shape, k: int, layout=None) -> List[str]:
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
            e = self.elem_index(count, k) if layout is None else layout.emit_index(self, k)
            result = []
            inner = count
            for dim in shape:
                inner //= dim
                if dim == 1:
                    result.append(self.const_u32(0))
                    continue
                # e < count, so the quotient is below count // inner (small magic numbers)
                reg = intdiv.udiv(w, e, inner, bound=count - 1)
                if dim * inner != count:  # not the outermost non-trivial dim: wrap
                    reg = intdiv.urem(w, reg, dim, bound=count // inner - 1)
                result.append(reg)
            return result
        with self.preamble():
            return self._cached(("mi", shape, k, None if layout is None else layout.key()), make)

    def slot_deltas(self, shape, layout=None) -> List[Optional[tuple]]:
        """Per slot k: multi_index(shape, k) - multi_index(shape, 0) when that difference is the
        same for every thread (so slot k's address is slot 0's plus a constant), else None.
        Holds e.g. for a [R, C] tile when C divides T (slot k is k*T/C rows further down)."""
        shape = tuple(shape)
        key = ("deltas", shape, None if layout is None else layout.key())
        if key not in self._cache:
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            slots = self.slots(count) if layout is None else layout.slots
            deltas: List[Optional[tuple]] = [None] * slots
            if layout is not None and count > 1:
                index = np.stack(np.unravel_index(layout.table(self.T), shape))
            elif count > 1 and count % self.T == 0:
                linear = np.arange(self.T)[None, :] + self.T * np.arange(slots)[:, None]
                index = np.stack(np.unravel_index(linear, shape))  # [rank, slots, T]
            else:
                index = None
            if index is not None:
                moved = index - index[:, :1, :]
                for k in range(slots):
                    if np.all(moved[:, k, :] == moved[:, k, :1]):
                        deltas[k] = tuple(int(v) for v in moved[:, k, 0])
            self._cache[key] = deltas
        return self._cache[key]

    def owner(self, count: int, k: int) -> Optional[str]:
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
             predicate: Optional[str] = None, default: Optional[str] = None) -> str:
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
              predicate: Optional[str] = None) -> None:
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

    def reserve_smem(self, sizes: List[int]) -> List[int]:
        """Offsets (16-byte aligned) for buffers of `sizes` bytes in the shared exchange area."""
        offsets, top = [], 0
        for size in sizes:
            offsets.append(top)
            top += -(-size // 16) * 16
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

    def smem_write(self, tile: Tile, offset: int) -> None:
        for k in range(self.slots(tile.count)):
            self.store("shared", self.slot_address(offset, tile.count, k, tile.element),
                       tile.slot(k), tile.element)

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

    def gather(self, sources: List[Tile], result_type: TileType,
               source_index: Callable[[int, List[str]], tuple], layout=None) -> Tile:
        """Build a tile whose elements come from other threads' slots of `sources`.
        `source_index(k, out_multi_index)` emits code and returns (which source, u32 linear index),
        or (which source, index, predicate-choosing-source-1-over-0 ...) via `select` tuples:
        a 2-tuple (i, idx) reads source i; a 4-tuple (pred, idx_a, idx_b, None) reads source 0 at
        idx_a where pred is true, else source 1 at idx_b.
        Sources of at most 32 elements (a divisor of 32) sit whole in every warp - lane e holds
        element e - so they are read with shfl.sync.idx: no shared memory, no barriers. The
        result is in `layout` (None: Cyclic); the sources are Cyclic."""
        if self.T % 32 == 0 and all(s.count <= 32 and 32 % s.count == 0 for s in sources):
            return self._gather_by_shuffle(sources, result_type, source_index, layout)
        offsets = self.reserve_smem([self.smem_size_of(s.type) for s in sources])
        for source, offset in zip(sources, offsets):
            self.smem_write(source, offset)
        self.barrier()
        out = self._gather_target(result_type, layout)
        for k in range(len(out.regs)):
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
            self.w(f"mov.{dtypes.mov_type(dtypes.reg_class(result_type.element))} "
                   f"{out.regs[k]}, {value}")
        self.barrier()
        return out

    def _gather_target(self, result_type: TileType, layout) -> Tile:
        if layout is None:
            return self.new_tile(result_type)
        cls = dtypes.reg_class(result_type.element)
        return Tile(result_type, [self.w.reg(cls) for _ in range(layout.slots)], layout)

    def _gather_by_shuffle(self, sources, result_type, source_index, layout=None) -> Tile:
        out = self._gather_target(result_type, layout)
        for k in range(len(out.regs)):
            choice = source_index(k, self.multi_index(result_type.shape, k, layout))
            if len(choice) == 2:
                which, index = choice
                value = self.shuffle(sources[which].scalar, sources[which].element, "idx", index)
            else:
                pred, index_a, index_b, _ = choice
                a = self.shuffle(sources[0].scalar, sources[0].element, "idx", index_a)
                b = self.shuffle(sources[1].scalar, sources[1].element, "idx", index_b)
                value = self.select(pred, a, b, result_type.element)
            self.w(f"mov.{dtypes.mov_type(dtypes.reg_class(result_type.element))} "
                   f"{out.regs[k]}, {value}")
        return out

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

    def linear_index(self, indices: List[str], shape) -> str:
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

    def copy_into(self, regs: List[str], tile: Tile) -> None:
        cls = dtypes.reg_class(tile.element)
        for k, reg in enumerate(regs):
            self.w(f"mov.{dtypes.mov_type(cls)} {reg}, {tile.slot(k)}")

    def parallel_copy(self, targets: List[List[str]], tiles: List[Tile]) -> None:
        """Copy tiles into register groups as one parallel assignment (sources may be targets)."""
        staged = []
        for regs, tile in zip(targets, tiles):  # as many registers as the target (its layout)
            cls = dtypes.reg_class(tile.element)
            temp = Tile(tile.type, [self.w.reg(cls) for _ in regs])
            self.copy_into(temp.regs, tile)
            staged.append(temp)
        for regs, temp in zip(targets, staged):
            self.copy_into(regs, temp)

    # -- walking -------------------------------------------------------------------------------
    def lower_block(self, block: Block) -> None:
        self._blocks_lowered += 1
        self._scope.append(self._blocks_lowered)
        try:
            for op in block.ops:
                self.lower_op(op)
        finally:
            self._scope.pop()

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
        from .registry import LOWERINGS, NOT_LOWERED
        if op in self.dead:
            return
        hook = LOWERINGS.get(op.name)
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

    def const_table(self, key: str, payload: bytes) -> str:
        """Symbol of a read-only .const byte table (emitted once per kernel per key)."""
        if key not in self._tables:
            name = f"{self.prefix}_const{len(self.const_arrays)}"
            self.const_arrays.append((name, payload))
            self._tables[key] = name
        return self._tables[key]

    def add_string(self, data: bytes) -> str:
        self.strings.append(data + b"\0")
        return f"{self.prefix}_str{len(self.strings) - 1}"
