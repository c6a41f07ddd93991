"""The JIT pipeline in named stages: bytecode -> checked IR -> PTX -> cubin.

    load_module(source)            bytecode file / bytes / tilebc Module -> Module
    check_module(module, entries)  what the JIT needs of the IR (kernel ABI, element types)
    lower_module(...)              Module -> PTX text (+ per-kernel facts, line -> op map)
    link_ptx(...)                  PTX -> cubin through nvJitLink
"""
from __future__ import annotations

import os
import re
import time

import tilebc
from tilebc.errors import Location, TilebcError, VerificationError
from tilebc.gcpause import collection_paused
from tilebc.record import Struct  # not dataclasses: ~10 ms of a cold compile's start-up
from tilebc.ir.module import Function, Module, Op
from tilebc.ir.types import PointerType, TileType

from . import targets
from .lowering import chunks, dtypes
from .lowering.anchors import takes_two_warpgroups
from .lowering.lowerer import STATIC_SHARED_LIMIT, Lowerer, LoweringError, Tile
from .lowering.families import load_for
from .lowering.predicates import simplify_predicates
from .lowering.registry import EXPANDING

DEFAULT_THREADS = 128
PARAM_TYPE = {"ptr": "u64", "i1": "u8", "i8": "u8", "i16": "u16", "i32": "u32", "i64": "u64",
              "f16": "b16", "bf16": "b16", "f32": "f32", "f64": "f64"}
PARAM_LOAD = {"ptr": "u64", "i1": "u8", "i8": "s8", "i16": "s16", "i32": "u32", "i64": "u64",
              "f16": "b16", "bf16": "b16", "f32": "f32", "f64": "f64"}


class LinkError(TilebcError):
    """nvJitLink rejected our PTX. Carries the log, the failing PTX line and the op behind it."""

    def __init__(self, message, *, log="", ptx_line=None, ptx_text=None, op=None, **where):
        super().__init__(message, **where)
        self.log = log
        self.ptx_line = ptx_line
        self.ptx_text = ptx_text
        self.op = op


class KernelInfo(Struct):
    _fields = ("name", "threads_per_cta", "shared_memory_bytes", "local_memory_bytes",
               "min_ctas_per_sm", "dynamic_shared_bytes", "tensor_maps")

    # dynamic_shared_bytes: the launch must request this much dynamic shared memory (0:
    # everything is static); tensor_maps: TMA tensor maps the launcher builds and passes after
    # the kernel's own parameters, in order (lowering/tma.py: TensorMapPlan.record())
    def __init__(self, name: str, threads_per_cta: int, shared_memory_bytes: int,
                 local_memory_bytes: int, min_ctas_per_sm: int | None = None,
                 dynamic_shared_bytes: int = 0, tensor_maps: tuple[dict, ...] = ()):
        self.name = name
        self.threads_per_cta = threads_per_cta
        self.shared_memory_bytes = shared_memory_bytes
        self.local_memory_bytes = local_memory_bytes
        self.min_ctas_per_sm = min_ctas_per_sm
        self.dynamic_shared_bytes = dynamic_shared_bytes
        self.tensor_maps = tensor_maps


class CompileResult(Struct):
    _fields = ("arch", "ptx_version", "ptx", "cubin", "kernels", "log", "timings")

    def __init__(self, arch: str, ptx_version: str, ptx: str, cubin: bytes | None,
                 kernels: dict[str, KernelInfo], log: str = "",
                 timings: dict[str, float] | None = None):
        self.arch = arch
        self.ptx_version = ptx_version
        self.ptx = ptx
        self.cubin = cubin
        self.kernels = kernels
        self.log = log
        self.timings = {} if timings is None else timings

    def _only(self) -> KernelInfo:
        return next(iter(self.kernels.values()))

    @property
    def entry(self) -> str:
        return self._only().name

    @property
    def threads_per_cta(self) -> int:
        return self._only().threads_per_cta

    @property
    def shared_memory_bytes(self) -> int:
        """Static shared memory of the (only) kernel."""
        return self._only().shared_memory_bytes

    @property
    def dynamic_shared_bytes(self) -> int:
        """Dynamic shared memory a launch of the (only) kernel must request."""
        return self._only().dynamic_shared_bytes


# -- stage 1: load ---------------------------------------------------------------------------
def load_module(source: str | os.PathLike | bytes | Module) -> Module:
    if isinstance(source, Module):
        return source
    if isinstance(source, (bytes, bytearray)):
        return tilebc.load(bytes(source))
    path = os.fspath(source)
    module = tilebc.load(path)
    module.source = module.source or path
    return module


# -- stage 2: check --------------------------------------------------------------------------
def select_entries(module: Module, entry: str | None) -> list[Function]:
    if entry is None:
        if not module.functions:
            raise VerificationError("module has no entry to compile", file=module.source)
        return list(module.functions)
    try:
        return [module.function(entry)]
    except KeyError:
        names = ", ".join(f.name for f in module.functions) or "none"
        raise VerificationError(f"no entry named {entry!r} (entries: {names})", file=module.source)


def _where(module, function: Function):
    return {"location": Location.of(function, module.source)}


PTX_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


def check_module(module: Module, functions: list[Function]) -> None:
    """The checks the JIT relies on: kernel parameters are scalars of ABI-representable types."""
    for function in functions:
        if not PTX_IDENTIFIER.fullmatch(function.name):
            # The kernel symbol is the entry name (tileiras' ABI); PTX cannot spell anything else.
            raise VerificationError(
                f"entry name {function.name!r} is not a PTX identifier ([A-Za-z_$][A-Za-z0-9_$]*), "
                "so it cannot be a kernel symbol (tileiras refuses such names too)",
                **_where(module, function))
        for index, arg in enumerate(function.args):
            ok = (isinstance(arg.type, TileType) and arg.type.num_elements == 1
                  and dtypes.name_of(arg.type.element) in PARAM_TYPE)
            if not ok:
                raise VerificationError(
                    f"entry {function.name}: parameter {index} has type {arg.type}; kernel "
                    "parameters must be scalar tiles of pointer, integer or float type",
                    **_where(module, function))


# -- stage 3: lower --------------------------------------------------------------------------
def choose_threads(module: Module, function: Function, arch: int,
                   requested: int | None = None,
                   warpgroup_mma: bool = False) -> tuple[int, int | None, list[str]]:
    """Threads per CTA, min CTAs per SM (from the `occupancy` hint) and log notes.
    An explicit request wins, then the `num_worker_warps_per_cta` hint, then two warpgroups
    where `warpgroup_mma` (sm_90 code that may use wgmma) and a product takes them
    (anchors.takes_two_warpgroups), then a size rule: 128 threads, halved (down to one warp)
    while half of them still cover the largest tile."""
    notes = []
    hints = {}
    if function.optimization_hints is not None:
        for key, dictionary in function.optimization_hints.entries:
            if key in ("default", f"sm_{arch}"):
                hints.update({name: getattr(value, "value", value)
                              for name, value in dictionary.entries})
    if hints.get("num_cta_in_cga", 1) not in (1, None):
        notes.append(f"{function.name}: hint num_cta_in_cga={hints['num_cta_in_cga']} ignored "
                     "(the JIT launches one CTA per tile block, no clusters)")
    occupancy = hints.get("occupancy")
    workers = hints.get("num_worker_warps_per_cta")
    if requested is None and workers:
        if 1 <= workers <= 32:
            return 32 * workers, occupancy, notes
        notes.append(f"{function.name}: hint num_worker_warps_per_cta={workers} ignored (must be "
                     "1..32 warps)")
    if requested is not None:
        if requested % 32 or not 32 <= requested <= 1024:
            raise TilebcError(f"threads per CTA must be a multiple of 32 in [32, 1024], "
                              f"got {requested}")
        return requested, occupancy, notes
    ops = list(function.walk())
    if warpgroup_mma and any(takes_two_warpgroups(op) for op in ops):
        return 2 * DEFAULT_THREADS, occupancy, notes
    largest = 1
    for op in ops:
        for value in op.results:
            if isinstance(value.type, TileType):
                largest = max(largest, value.type.num_elements)
    threads = DEFAULT_THREADS
    while threads > 32 and threads // 2 >= largest:
        threads //= 2
    return threads, occupancy, notes


# -- code size bound -------------------------------------------------------------------------
# The lowering gives each thread ceil(N/T) slots of an N-element tile over T threads and unrolls
# every op over those slots, one register and one instruction sequence per slot (lowering/
# lowerer.py). ptxas, inside nvJitLink, takes time superlinear in that code: a load -> exp -> addf ->
# store kernel links in 0.2 s at 32 elements per thread, 8 s at 256, ~110 s (672 MB) at 512, and
# never finishes at 8192. A kernel over either bound below is refused before any PTX is generated.
# Ops of chunked regions (lowering/chunks.py) are charged one chunk: their code is a loop body.
MAX_ELEMENTS_PER_THREAD = 256      # slots of one tile: a thread has at most 255 registers
MAX_ESTIMATED_INSTRUCTIONS = 1 << 16
# Estimated PTX instructions per slot of an op: ops whose lowering expands into long polynomial or
# softfloat sequences (registered with `lowers(..., expands=True)`), and the rest (address
# arithmetic, one or two ALU instructions, moves).
_EXPANDED_COST = 32
_PLAIN_COST = 4


def _largest_tile(op: Op) -> int:
    """Elements of the largest tile an op reads or writes (1 when it has none)."""
    largest = 1
    for values in (op.results, op.operand_values):
        for value in values:
            if isinstance(value.type, TileType):
                elements = value.type.num_elements
                if elements > largest:
                    largest = elements
    return largest


def estimate_code_size(function: Function, threads: int) -> tuple[int, Op | None, int]:
    """(estimated PTX instructions, op with the largest tile, that tile's elements) of a kernel.

    Each op costs its slots per thread (of its largest tile) times a per-op weight; a reduce or
    scan inlines its combiner region once per slot, other regions (if, for, loop) are lowered
    once."""
    load_for(function)  # the registrations say which ops expand
    chunked = chunks.plan(function, threads)
    total, widest, widest_elements = 0, None, 0
    pending: list[tuple[list[Op], int]] = [(function.body.ops, 1)]  # (ops, times lowered)
    while pending:
        ops, times = pending.pop()
        for op in ops:
            elements = _largest_tile(op)
            slots = 1 if elements == 1 else -(-elements // threads)
            region = chunked.get(op)
            if region is not None:
                slots = region.slots  # its code is one chunk's, looped over
            elif elements > widest_elements:
                widest, widest_elements = op, elements
            weight = _EXPANDED_COST if op.name in EXPANDING else _PLAIN_COST
            total += times * slots * weight
            inner = times * slots if op.spec.combiner else times
            for region in op.regions:
                for block in region.blocks:
                    pending.append((block.ops, inner))
    return total, widest, widest_elements


def check_code_size(module: Module, function: Function, threads: int) -> None:
    """Refuse a kernel whose unrolled code would be too large to link in reasonable time
    (MAX_ELEMENTS_PER_THREAD, MAX_ESTIMATED_INSTRUCTIONS), naming the entry and the op."""
    total, widest, elements = estimate_code_size(function, threads)
    if widest is None:
        return
    per_thread = -(-elements // threads)
    where = {"location": Location.of(widest, module.source)}
    if per_thread > MAX_ELEMENTS_PER_THREAD:
        raise LoweringError(
            f"{widest.name}: entry {function.name}: a tile of {elements} elements is "
            f"{per_thread} elements per thread over {threads} threads, over the JIT's bound of "
            f"{MAX_ELEMENTS_PER_THREAD} elements per thread; use smaller tiles or more threads "
            f"(hint num_worker_warps_per_cta){_not_chunked(function, threads, widest)}", **where)
    if total > MAX_ESTIMATED_INSTRUCTIONS:
        raise LoweringError(
            f"{widest.name}: entry {function.name}: the kernel would unroll to about {total} PTX "
            f"instructions over {threads} threads (its largest tile, here, has {elements} "
            f"elements), over the JIT's bound of {MAX_ESTIMATED_INSTRUCTIONS}; use smaller tiles "
            "or split the kernel", **where)


def _not_chunked(function: Function, threads: int, op: Op) -> str:
    """Why the tile is unrolled rather than lowered as a loop over chunks (lowering/chunks.py)."""
    other = chunks.obstacle(function, threads, op)
    if other is None:
        return ("; it is not lowered as a loop over register chunks (its shape or its memory "
                "order rule that out)")
    where = f" at offset 0x{other.offset:x}" if other.offset is not None else ""
    return (f"; it is not lowered as a loop over register chunks: {other.name}{where} needs the "
            "whole tile")


def _byte_list(data: bytes) -> str:
    return ", ".join(str(b) for b in data)


def lower_function(module: Module, function: Function, arch: int, threads: int,
                   occupancy: int | None, index: int, portable: bool = False,
                   wgmma: bool = False, tma: bool | None = None):
    """One kernel at `threads`: (PTX lines, origin op per line, KernelInfo, lowerer). `wgmma`:
    warpgroup MMA wherever it fits (lower_kernel makes the default choice). `tma` (None or True;
    False turns it off): wgmma K-loop stages filled by TMA where the views allow
    (lowering/tma.py)."""
    load_for(function)
    lw = Lowerer(module, function, threads=threads, arch=arch, prefix=f"__tilebc_k{index}")
    lw.portable = portable
    lw.wgmma = wgmma
    lw.tma = tma is not False and arch == 90 and not portable
    w = lw.w
    params = []
    with lw.preamble():
        for position, arg in enumerate(function.args):
            name = dtypes.name_of(arg.type.element)
            param = f"{function.name}_param_{position}"
            params.append(f"\t.param .{PARAM_TYPE[name]} {param}")
            cls = dtypes.reg_class(arg.type.element)
            if name == "i1":
                byte, reg = w.reg("b16"), w.reg("pred")
                w(f"ld.param.u8 {byte}, [{param}]")
                w(f"setp.ne.u16 {reg}, {byte}, 0")
            else:
                reg = w.reg(cls)
                w(f"ld.param.{PARAM_LOAD[name]} {reg}, [{param}]")
            lw.set(arg, Tile(arg.type, [reg]))
    lw.lower_block(function.body)
    simplify_predicates(w)
    static_bytes, dynamic_bytes = shared_layout(lw, arch)
    if dynamic_bytes and lw.smem_align > 16:
        _align_dynamic_base(lw)
        static_bytes, dynamic_bytes = shared_layout(lw, arch)
    lines: list[str] = []
    origin: list[Op | None] = []

    def put(text, op=None):
        lines.append(text)
        origin.append(op)
    # tensor maps by value after the kernel's own parameters (the launcher encodes them)
    params += [f"\t.param .align 64 .b8 {plan.param}[128]" for plan in lw.tensor_maps]
    put(f".visible .entry {function.name}(")
    for i, param in enumerate(params):
        put(param + ("," if i + 1 < len(params) else ""))
    put(")")
    put(f".maxntid {threads}, 1, 1")
    if occupancy:
        put(f".minnctapersm {occupancy}")
    put("{")
    for decl in w.declarations():
        put(decl)
    # a kernel with dynamic shared memory uses the module-scope `.extern .shared` __tilebc_smem
    # (see lower_module); a static declaration here shadows it for this kernel
    if lw.smem_size and not dynamic_bytes:
        put(f"\t.shared .align {lw.smem_align} .b8 __tilebc_smem[{lw.smem_size}];")
    for symbol, alignment, size in lw.allocas:
        put(f"\t.shared .align {alignment} .b8 {symbol}[{size}];")
    if lw.local_bytes:
        put(f"\t.local .align 8 .b8 __tilebc_printbuf[{lw.local_bytes}];")
    for text, op in zip(w.preamble, w.preamble_origin):
        put(text, op)
    # a comment where each op's code starts; where a region op (for, if, reduce...) resumes
    # after a long stretch of its body's code, a shorter one, so its tail is not misread
    previous, since, commented = None, 0, set()
    add_line, add_origin = lines.append, origin.append
    for text, op in zip(w.body, w.origin):
        if op is not None and op is not previous:
            if id(op) not in commented:
                commented.add(id(op))
                put(_ptx_comment(op), op)
            elif op.regions and since >= 8:
                put(f"\t// {op.name} (continued)", op)
            since = 0
        previous, since = op, since + 1
        add_line(text)
        add_origin(op)
    put(f"{lw.exit_label}:")
    put("\tret;")
    put("}")
    info = KernelInfo(function.name, threads, static_bytes, lw.local_bytes, occupancy,
                      dynamic_bytes, tuple(plan.record() for plan in lw.tensor_maps))
    return lines, origin, info, lw


def _align_dynamic_base(lw: Lowerer) -> None:
    """Round the exchange area's base register up to lw.smem_align (swizzled wgmma operands
    need 1024-byte-aligned atoms): the `.extern` declaration asks for that alignment, but where
    the launch places dynamic shared memory is the driver's, so the kernel does not rely on it
    (one add and one and, and at most smem_align - 16 more bytes)."""
    w = lw.w
    reg = lw.smem_base()
    at = next(i for i, text in enumerate(w.preamble)
              if text.strip() == f"mov.u32 {reg}, __tilebc_smem;")
    extra = [f"\tadd.u32 {reg}, {reg}, {lw.smem_align - 1};",
             f"\tand.b32 {reg}, {reg}, {-lw.smem_align};"]
    w.preamble[at + 1:at + 1] = extra
    w.preamble_origin[at + 1:at + 1] = [w.preamble_origin[at]] * len(extra)
    lw.smem_size += lw.smem_align - 16


def shared_layout(lw: Lowerer, arch: int) -> tuple[int, int]:
    """(static, dynamic) shared bytes of a lowered kernel. Allocas are always static; the
    exchange area joins them while the sum fits the 48 KiB a CTA gets without opting in (no
    launch attribute needed), else it becomes dynamic shared memory, which the launcher opts in
    to up to the architecture's per-CTA maximum."""
    allocas = lw.alloca_bytes()
    if allocas and lw.smem_size:  # the exchange area's alignment may pad it after them
        allocas += lw.smem_align - 16
    if allocas + lw.smem_size <= STATIC_SHARED_LIMIT:
        return allocas + lw.smem_size, 0
    limit = targets.max_shared_per_block(arch)
    if allocas + lw.smem_size > limit:
        # nvJitLink cannot check dynamic sizes and the launch would fail; name the op instead
        with_allocas = f" beside {allocas} bytes of allocas" if allocas else ""
        raise lw.error(lw.smem_peak_op,
                       f"its tiles need {lw.smem_size} bytes of shared memory to exchange"
                       f"{with_allocas}, over the {limit} bytes a CTA can have on sm_{arch} "
                       f"(smaller tiles fit)")
    return allocas, lw.smem_size


def _on_wgmma(lines: list[str]) -> bool:
    if "wgmma." not in "\n".join(lines):  # the usual case, without a Python loop over lines
        return False
    return any(line.lstrip().startswith("wgmma.") for line in lines)


def lower_kernel(module: Module, function: Function, arch: int, threads: int | None,
                 index: int, portable: bool = False, wgmma: bool | None = None,
                 tma: bool | None = None):
    """((PTX lines, origin op per line, KernelInfo, lowerer), log notes) of one kernel, with its
    thread count (choose_threads). On sm_90 (not portable) a product that fits a warpgroup may
    run on wgmma (with two warpgroups where it takes them) or on mma.sync (at the size rule's
    count): `wgmma` True or False forces one; None (the default) lowers the kernel both ways and
    takes the one the performance model estimates faster from the PTX (perf/ptx_counts.py)."""
    warpgroups = arch == 90 and not portable and wgmma is not False
    count, occupancy, notes = choose_threads(module, function, arch, threads, warpgroups)
    plain = choose_threads(module, function, arch, threads)[0] if warpgroups else count

    def lower(at: int, on_wgmma: bool):
        check_code_size(module, function, at)
        return lower_function(module, function, arch, at, occupancy, index, portable, on_wgmma,
                              tma)

    try:
        first = lower(count, warpgroups)
    except TilebcError:  # LoweringError, a code-size refusal
        if plain == count:
            raise
        first = None
    if first is None or (plain != count and not _on_wgmma(first[0])):
        # two warpgroups were for wgmma: a kernel that has none there, or that the lowering
        # refuses at 256 threads, takes the size rule's count
        count = plain
        first = lower(count, warpgroups)
    if wgmma or not _on_wgmma(first[0]):
        return first, notes
    try:
        second = lower(plain, False)
    except TilebcError as error:
        notes.append(f"{function.name}: wgmma, as the mma.sync lowering was refused: {error}")
        return first, notes
    from .perf.ptx_counts import cheaper  # only kernels with a choice pay for the model
    pick, times = cheaper([(lowered[0], at, lowered[2].shared_memory_bytes +
                            lowered[2].dynamic_shared_bytes)
                           for lowered, at in ((first, count), (second, plain))])
    notes.append(f"{function.name}: wgmma ({count} threads) {times[0]:.0f} us, mma.sync "
                 f"({plain} threads) {times[1]:.0f} us at scale by the performance model's "
                 f"estimate: {('wgmma', 'mma.sync')[pick]}")
    return (first, second)[pick], notes


def lower_module(module: Module, functions: list[Function], arch: int, ptx_version,
                 threads: int | None = None, portable: bool = False,
                 wgmma: bool | None = None, tma: bool | None = None):
    """PTX text for the kernels, origin op per PTX line (1-based index - 1), KernelInfos, notes."""
    header = ["//", f"// Generated by tilebc_runtime (Tile IR {module.version} -> PTX)", "//",
              f".version {ptx_version[0]}.{ptx_version[1]}", f".target sm_{arch}",
              ".address_size 64", ""]
    data_lines: list[str] = []
    kernel_lines: list[str] = []
    kernel_origin: list[Op | None] = []
    infos: dict[str, KernelInfo] = {}
    notes: list[str] = []
    uses_vprintf = uses_dynamic_shared = False
    dynamic_align = 16
    globals_used = set()
    for index, function in enumerate(functions):
        (lines, origin, info, lw), more = lower_kernel(module, function, arch, threads, index,
                                                       portable, wgmma, tma)
        notes += more
        uses_vprintf |= lw.uses_vprintf
        uses_dynamic_shared |= info.dynamic_shared_bytes > 0
        if info.dynamic_shared_bytes:
            dynamic_align = max(dynamic_align, lw.smem_align)
        globals_used |= lw.globals_used
        for n, data in enumerate(lw.strings):
            data_lines.append(f".global .align 1 .b8 {lw.prefix}_str{n}[{len(data)}] = "
                              f"{{{_byte_list(data)}}};")
        for name, payload in lw.const_arrays:
            data_lines.append(f".const .align 8 .b8 {name}[{len(payload)}] = "
                              f"{{{_byte_list(payload)}}};")
        kernel_lines += lines + [""]
        kernel_origin += origin + [None]
        infos[function.name] = info
    for item in module.globals:
        if item.name in globals_used:
            from .lowering.common import element_bytes
            payload = element_bytes(item.value)
            align = max(item.alignment or 0, dtypes.byte_size(item.value.type.element), 1)
            data_lines.append(f".global .align {align} .b8 __tilebc_global_{item.name}"
                              f"[{len(payload)}] = {{{_byte_list(payload)}}};")
    if uses_vprintf:
        data_lines.insert(0, ".extern .func (.param .b32 func_retval0) vprintf "
                             "(.param .b64 vprintf_param_0, .param .b64 vprintf_param_1);")
    if uses_dynamic_shared:
        # PTX declares dynamic shared memory only at module scope; its size comes with the launch
        # (LaunchConfig shmem_size / cuLaunchKernel sharedMemBytes)
        data_lines.insert(0, f".extern .shared .align {dynamic_align} .b8 __tilebc_smem[];")
    prefix = header + data_lines + [""]
    lines = prefix + kernel_lines
    origin = [None] * len(prefix) + kernel_origin
    return "\n".join(lines) + "\n", origin, infos, notes


def set_ptx_version(ptx: str, version) -> str:
    """`ptx` with its `.version` directive (the first one, in the header) set to `version`; the
    line count, and so the PTX line -> op map, is unchanged."""
    return re.sub(r"^\.version \d+\.\d+$", f".version {version[0]}.{version[1]}", ptx, count=1,
                  flags=re.M)


# -- stage 4: link ---------------------------------------------------------------------------
_PTX_LINE = re.compile(r"line (\d+)")


def describe_op(op: Op, module: Module) -> str:
    parts = [f"Tile IR op `{op.name}`"]
    location = Location.of(op, module.source)
    if location.offset is not None or location.line is not None:
        parts.append(f"at {location}")
    source = _source_place(op)
    if source:
        parts.append(f"(source {source})")
    return " ".join(parts)


def _source_place(op: Op) -> str | None:
    """file:line:col of the op's debug location (an inlined call's callee), if it has one."""
    loc = op.loc
    while loc is not None and hasattr(loc, "callee"):
        loc = loc.callee
    if loc is not None and hasattr(loc, "filename"):
        return f"{_printable(loc.filename)}:{loc.line}:{loc.column}"
    return None


def _printable(text: str) -> str:
    """`text` with everything outside printable ASCII escaped (\\xNN; an undecodable byte kept
    as a surrogate, as \\xNN of the byte): a file name from a module's debug info may hold a
    newline, which would end the PTX comment, or bytes that are not UTF-8, which nvJitLink's
    input cannot carry."""
    if text.isascii() and text.isprintable():
        return text
    out = []
    for ch in text:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:  # a byte that did not decode (surrogateescape)
            code -= 0xDC00
        out.append(ch if " " <= ch <= "~" else
                   f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000
                   else f"\\U{code:08x}")
    return "".join(out)


def _ptx_comment(op: Op) -> str:
    """The comment above an op's PTX: mnemonic, place in the module (no file name, so the PTX
    does not depend on where the module was read from) and source line."""
    parts = [op.name]
    place = Location.of(op).place
    if place:
        parts.append(place)
    source = _source_place(op)
    if source:
        parts.append(source)
    return "\t// " + " ".join(parts)


def link_ptx(ptx: str, arch: int | str, *, origin=None, module: Module | None = None,
             extra_options: tuple[str, ...] = ()) -> tuple[bytes, str]:
    """PTX -> cubin with nvJitLink; returns (cubin, info log). `arch`: 90, or "90a" for
    arch-specific PTX (wgmma); 90 with PTX that targets sm_90a links it for sm_90a."""
    if str(arch) == "90" and re.search(r"^\.target sm_90a\s*$", ptx, re.M):
        arch = "90a"
    from .linker import LinkFailure
    try:
        return targets.nvjitlink_module().link_ptx(ptx.encode(), [f"-arch=sm_{arch}",
                                                                  *extra_options])
    except LinkFailure as failure:
        raise _link_error(failure, failure.log, ptx, arch, origin, module) from None


def _link_error(exc, log, ptx, arch, origin, module) -> LinkError:
    lines = ptx.splitlines()
    match = _PTX_LINE.search(log)
    ptx_line = int(match.group(1)) if match else None
    text = lines[ptx_line - 1].strip() if ptx_line and ptx_line <= len(lines) else None
    op = origin[ptx_line - 1] if origin and ptx_line and ptx_line <= len(origin) else None
    message = f"nvJitLink could not build sm_{arch} code ({exc}):\n{log.strip()}"
    if ptx_line:
        message += f"\n  at PTX line {ptx_line}: {text}"
    if op is not None and module is not None:
        message += f"\n  produced by {describe_op(op, module)}"
    location = Location.of(op, module.source if module else None)
    return LinkError(message, log=log, ptx_line=ptx_line, ptx_text=text, op=op, location=location)


# -- the whole pipeline ----------------------------------------------------------------------
def compile(source, entry: str | None = None, arch="sm_90", emit: str = "cubin", *,
            threads: int | None = None, driver_version: tuple[int, int] | None = None,
            verbose: bool = False, portable: bool = False,
            wgmma: bool | None = None, tma: bool | None = None) -> CompileResult:
    """Compile Tile IR bytecode (a path, bytes or a Module) for one GPU architecture.
    emit="ptx" stops after lowering; emit="cubin" also links with nvJitLink. `portable`: no
    arch-specific instructions (sm_90a's wgmma), so newer GPUs can JIT the PTX. `wgmma`, on
    sm_90, for the f16/bf16 products that fit a warpgroup: None (default) lowers such a kernel
    both ways and keeps the one the performance model estimates faster (lower_kernel; the
    reasons are in the log); True runs them on wgmma.mma_async wherever they fit; False never.
    `tma`, on sm_90: None (default) fills the stages of a wgmma GEMM K loop whose staged
    operands are 128-byte swizzled with TMA (cp.async.bulk.tensor into mbarrier-tracked stages)
    where the views' facts allow (timed on an H100: 0.94x tileiras's time on a 4096^3 GEMM
    where cp.async stages gave 1.11x; benchmarks/results/gpu_only.md); False never. The kernel
    then takes tensor map parameters after its own, which KernelInfo.tensor_maps describes and
    the launcher builds (lowering/tma.py)."""
    if emit not in ("ptx", "cubin"):
        raise TilebcError(f"emit must be 'ptx' or 'cubin', not {emit!r}")
    if emit == "cubin":
        targets.start_loading_nvjitlink()
    timings = {}
    start = time.perf_counter()
    module = load_module(source)
    timings["load"] = time.perf_counter() - start
    arch_number = targets.parse_arch(arch)
    functions = select_entries(module, entry)
    check_module(module, functions)
    nvjitlink = targets.nvjitlink_version()
    # The architecture's version first (an nvJitLink too old for the target fails before any
    # lowering), then the version the generated instructions need on it.
    ptx_version = targets.choose_ptx_version(arch_number, nvjitlink, driver_version)
    mark = time.perf_counter()
    with collection_paused():  # lowering builds many objects and leaves few cycles
        ptx, origin, infos, notes = lower_module(module, functions, arch_number, ptx_version,
                                                 threads, portable, wgmma, tma)
    needed = targets.choose_ptx_version(arch_number, nvjitlink, driver_version, ptx=ptx)
    if needed != ptx_version:
        ptx = set_ptx_version(ptx, needed)
        ptx_version = needed
    link_arch = arch_number
    if arch_number == 90 and re.search(r"^\s*wgmma\.", ptx, re.M):
        # wgmma exists only in sm_90a code; such a cubin runs on sm_90 devices alone
        ptx = re.sub(r"^\.target sm_90$", ".target sm_90a", ptx, count=1, flags=re.M)
        link_arch = "90a"
    timings["lower"] = time.perf_counter() - mark
    cubin, log = None, ""
    if emit == "cubin":
        mark = time.perf_counter()
        cubin, log = link_ptx(ptx, link_arch, origin=origin, module=module,
                              extra_options=("-verbose",) if verbose else ())
        timings["link"] = time.perf_counter() - mark
    log = "\n".join(notes + ([log] if log else []))
    return CompileResult(f"sm_{arch_number}", f"{ptx_version[0]}.{ptx_version[1]}", ptx, cubin,
                         infos, log, timings)
