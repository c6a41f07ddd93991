"""Run NVIDIA's code generation on the emulator: tileiras's PTX for a Tile IR module, launched with
the cuTile calling convention, so the emulator's reading of PTX is checked against NVIDIA's own
compiler rather than against our JIT (which shares our reading of the ISA).

    from tilebc_runtime.sim import nvidia
    ptx = nvidia.tileiras_ptx(module_or_path, arch="sm_80")   # the PTX tileiras hands to ptxas
    nvidia.run(module_or_path, entry, grid, *args)              # like tilebc.interp.run

`arch="sm_90"` gives tileiras's Hopper code (`.target sm_90a`: wgmma, mbarrier pipelines,
warp-specialised kernels with named barriers), which the emulator runs too (isa_sm90.py).

tileiras has no option to print its PTX: it lowers to PTX and runs the `ptxas` that sits beside it.
`tileiras_ptx` therefore runs tileiras from a mirror of its install (links to everything) whose
`ptxas` is a small script that copies its .ptx input out and then runs the real ptxas (so the PTX
is also checked by NVIDIA's assembler). The mirror is built once per process in a temp dir.

tileiras keeps the entry's name and its parameters one for one (pointers .u64, i32 shapes and
strides .u32, ...), so the parameter values are bound exactly as `sim.run` and the interpreter
bind them. The thread count comes from the kernel's .reqntid.

TMA. Where tileiras's sm_90 code moves tiles with cp.async.bulk.tensor it appends one hidden
128-byte parameter per tensor map, which the driver fills at launch by running host code tileiras
embeds in the cubin (sim/tensormap.py tells the finding). That code is not in the PTX, so
`tensor_maps` rebuilds the maps from the Tile IR module: one per partition view that tiles are
loaded from or stored through (a tensor loaded and stored has two), the loaded views first in the
order their tiles are first used, then the stored ones in the order they are made (the order
tileiras numbers its hidden parameters in; where that does not give each parameter the direction
and rank of the copies its PTX makes through it, the order the views are made is tried, and else
the launch is refused), over its tensor view's shape and strides at launch, with
the partition tile as the box, cut to 128-byte rows with the 128-byte swizzle (64 / 32 bytes: that
swizzle) when the tile has two or more dimensions and the kernel multiplies on wgmma (a kernel
without wgmma is taken to copy whole rows unswizzled: right for the rows of 128 bytes or less
seen, while tileiras sometimes cuts longer ones, which shows as an mbarrier waiting for
transaction bytes); the map's dimensions are the tiled ones innermost
first, then the tile's leading size-1 ones outermost first (a [batch, head, seq, d] tensor tiled
1x1x64x64 is copied at {d, seq, batch, head}); a store's box has as many rows as fit before the
source of the next store through the same map (`store_gaps`: tileiras stores a 128-row tile in two
64-row slices from buffers 64 rows apart, or whole from buffers a tile apart). This is inferred from
tileiras's PTX (its copies' coordinates, expect_tx byte counts, and the swizzle its wgmma
descriptors and epilogue stores assume), not read from the cubin; a module it does not fit (another
number of maps, one view both loaded and stored, a padding other than zero) is refused, and the
mbarrier byte counts of every copy are checked as the code runs.
"""
from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, Iterable, Optional, Tuple, Union

import numpy as np

import tilebc
from tilebc.interp.api import find_entry
from tilebc.interp.machine import flatten_grid
from tilebc.ir.module import Module
from tilebc.ir.types import PartitionViewType, TensorViewType
from tilebc.ops.enums import PaddingValue
from tilebc.ops.table import by_mnemonic
from tilebc.oracles import require_tool

from ..perf.ptx_classes import classify
from .errors import SimExecutionError
from .machine import KernelImage, emulate
from .parser import parse_ptx
from .syntax import Addr, Reg, Sym, TensorRef
from .runner import bind_arguments, load_any
from .tensormap import TensorMap

DEFAULT_ARCH = "sm_80"

_PTX: Dict[Tuple[str, str], str] = {}       # (bytecode sha256, arch) -> PTX text
_IMAGES: Dict[Tuple[str, str, str], KernelImage] = {}  # least recently used first
# The sim tests reuse an image within ten others of its last use; each image held is many
# thousand closures that every full garbage collection walks.
_IMAGES_KEPT = 16
_MIRROR: Optional[Path] = None

_SHIM = """#!/bin/sh
# ptxas stand-in: keep a copy of the PTX input where TILEBC_PTX_CAPTURE says, then run ptxas
for a in "$@"; do case "$a" in *.ptx) cp "$a" "$TILEBC_PTX_CAPTURE";; esac; done
exec "{real}" "$@"
"""


class TileirasError(SimExecutionError):
    """tileiras refused the module (e.g. a type the target architecture lacks)."""


def _mirror() -> Path:
    """tileiras's bin directory, mirrored with the capturing ptxas (built once per process)."""
    global _MIRROR
    if _MIRROR is not None and _MIRROR.exists():
        return _MIRROR
    tileiras = Path(require_tool("tileiras")).resolve()
    bin_dir = tileiras.parent
    root = Path(tempfile.mkdtemp(prefix="tilebc-tileiras-"))
    atexit.register(shutil.rmtree, root, True)
    # tileiras finds ptxas and libnvvm relative to its own (resolved) path: it must be a real
    # file in the mirror (hard link, or a copy across file systems); the rest can be links
    for entry in bin_dir.parent.iterdir():
        if entry.name != bin_dir.name:
            (root / entry.name).symlink_to(entry)
    mirror_bin = root / bin_dir.name
    mirror_bin.mkdir()
    for entry in bin_dir.iterdir():
        if entry.name in ("ptxas", tileiras.name):
            continue
        (mirror_bin / entry.name).symlink_to(entry)
    try:
        os.link(tileiras, mirror_bin / tileiras.name)
    except OSError:
        shutil.copy2(tileiras, mirror_bin / tileiras.name)
    shim = mirror_bin / "ptxas"
    shim.write_text(_SHIM.replace("{real}", str(bin_dir / "ptxas")))
    shim.chmod(0o755)
    _MIRROR = mirror_bin / tileiras.name
    return _MIRROR


def _bytecode(module_or_path) -> Tuple[bytes, str]:
    """The bytecode to give tileiras and a name for messages: a path or bytes as they are, a
    Module's source file when it has one, else the module written by tilebc.dump."""
    if isinstance(module_or_path, (bytes, bytearray)):
        return bytes(module_or_path), "<bytecode>"
    if isinstance(module_or_path, Module):
        source = module_or_path.source
        if source and os.path.isfile(source):
            return Path(source).read_bytes(), source
        return tilebc.dump(module_or_path), "<module>"
    path = os.fspath(module_or_path)
    return Path(path).read_bytes(), path


def tileiras_ptx(module_or_path: Union[Module, str, os.PathLike, bytes], arch: str = DEFAULT_ARCH,
                 cache_dir: Optional[Union[str, os.PathLike]] = None, timeout: float = 300) -> str:
    """The PTX NVIDIA's tileiras generates for a module (all its entries) on `arch`. Cached per
    process, and in `cache_dir` (files named by the bytecode's sha256) when one is given.
    Raises TileirasError with tileiras's message when it refuses the module."""
    data, name = _bytecode(module_or_path)
    digest = hashlib.sha256(data).hexdigest()
    key = (digest, arch)
    if key in _PTX:
        return _PTX[key]
    cached = Path(cache_dir) / f"{digest[:32]}.{arch}.ptx" if cache_dir is not None else None
    if cached is not None and cached.is_file():
        _PTX[key] = cached.read_text()
        return _PTX[key]
    tileiras = _mirror()
    with tempfile.TemporaryDirectory(prefix="tilebc-ptx-") as work:
        source = Path(work) / "module.tilebc"
        source.write_bytes(data)
        capture = Path(work) / "kernel.ptx"
        env = dict(os.environ, TILEBC_PTX_CAPTURE=str(capture))
        done = subprocess.run([str(tileiras), f"--gpu-name={arch}", str(source), "-o",
                               str(Path(work) / "out.cubin")], env=env, capture_output=True,
                              text=True, timeout=timeout)
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            # the diagnostic follows its long MLIR location: keep the text after "error:"
            errors = [line.split("error:", 1)[1].strip() for line in lines if "error:" in line]
            raise TileirasError(f"tileiras --gpu-name={arch} failed (exit {done.returncode}): "
                                + ("; ".join(errors) if errors else
                                   lines[0] if lines else "no message"), file=name)
        if not capture.is_file():
            raise TileirasError("tileiras did not call ptxas; no PTX was captured", file=name)
        ptx = capture.read_text()
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(ptx)
    _PTX[key] = ptx
    return ptx


def nvidia_kernel(module: Module, entry: str, arch: str = DEFAULT_ARCH,
                  cache_dir=None) -> KernelImage:
    """The emulator image of tileiras's PTX for one entry (cached)."""
    ptx = tileiras_ptx(module, arch, cache_dir)
    digest = hashlib.sha256(ptx.encode()).hexdigest()
    key = (digest, entry, arch)
    image = _IMAGES.pop(key, None)
    if image is None:
        source = f"<tileiras {arch} PTX of {module.source or 'module'}>"
        program = parse_ptx(ptx, source)
        if entry not in program.kernels:
            raise SimExecutionError(f"tileiras's PTX has no kernel {entry} (it has "
                                    f"{', '.join(sorted(program.kernels))})", file=source)
        image = KernelImage(program, program.kernels[entry])
        while len(_IMAGES) >= _IMAGES_KEPT:
            del _IMAGES[next(iter(_IMAGES))]
    _IMAGES[key] = image  # now the most recently used
    return image


def run(module_or_path, entry: Optional[str], grid, *args, arch: str = DEFAULT_ARCH,
        cache_dir=None, check_memory: bool = True, allow_aliasing: bool = False,
        uninitialized: Iterable[int] = (), print_stream=None, max_steps: int = 200_000_000,
        profile=None, **interpreter_only) -> KernelImage:
    """Run `entry` over `grid` like `tilebc.interp.run`, through tileiras's PTX on the emulator.
    Numpy arrays are updated in place. Interpreter-only options are accepted and ignored."""
    unknown = set(interpreter_only) - {"check_assumptions", "shuffle", "seed", "progress"}
    if unknown:
        raise TypeError(f"run() got unexpected keyword arguments {sorted(unknown)}")
    module = load_any(module_or_path)
    function = find_entry(module, entry)
    image = nvidia_kernel(module, function.name, arch, cache_dir)
    machine, binder = bind_arguments(module, function, args, check_memory, allow_aliasing,
                                     uninitialized)
    visible = [param for param in image.kernel.params if not param.hidden]
    if len(visible) != len(binder.values):
        raise SimExecutionError(f"tileiras's kernel {function.name} takes "
                                f"{len(visible)} parameters, the entry "
                                f"{len(binder.values)}: the calling convention differs",
                                file=image.source)
    hidden = [param.name for param in image.kernel.params if param.hidden]
    gaps = store_gaps(image.kernel)
    copies = map_copies(image.kernel)
    swizzled = any(ins.opcode == "wgmma" for ins in image.kernel.instructions)
    maps = dict(zip(hidden, tensor_maps(function, binder.values, len(hidden), image.source,
                                        [gaps.get(name) for name in hidden],
                                        [copies.get(name) for name in hidden], swizzled)))
    if image.program.dynamic_shared:
        raise SimExecutionError("tileiras's PTX declares dynamic shared memory, whose launch "
                                "size is not known here", file=image.source)
    if not image.threads:
        raise SimExecutionError(f"tileiras's kernel {function.name} declares no .reqntid",
                                file=image.source)
    return emulate(image, function.name, flatten_grid(grid), binder.values,
                   memory=machine.memory, threads=image.threads, check=check_memory,
                   print_stream=print_stream, max_steps=max_steps, profile=profile,
                   tensor_maps=maps)


def _in_parameter_order(tiled, uses, first_use, copies, name: str, source: str):
    """The views in the order of tileiras's map parameters. tileiras numbers the loaded views
    first, in the order their tiles are first used (operand order within an op: A, then B of
    an mma), then the stored ones in the order they are made; where that gives a parameter
    copies (direction, rank) its PTX does not make, the order the views are made is tried.
    Neither fitting, which map is which is not known, and that is an error rather than a
    guess."""
    def fits(order):
        return all(seen is None or seen == {(direction, view.type.rank)
                                            for direction in uses[id(partition)]}
                   for (partition, view), seen in zip(order, copies))
    never = (float("inf"), 0)
    by_use = sorted(tiled, key=lambda item: ("load" not in uses[id(item[0])],
                                             first_use.get(id(item[0]), never)))
    for order in (by_use, tiled):
        if fits(order):
            return order
    wanted = ", ".join("?" if seen is None else "+".join(f"{d} {r}-d" for d, r in sorted(seen))
                       for seen in copies)
    raise SimExecutionError(f"tileiras's kernel {name}: its tensor-map parameters copy "
                            f"({wanted}), which no known order of the kernel's views gives: "
                            "which map describes which tensor is not known", file=source)


def _argument_value(value, function, values, what: str, source: str) -> int:
    """The launch value of an IR value that is an entry argument, possibly through assumes."""
    while value.owner is not function.body:
        op = value.owner
        if not hasattr(op, "spec") or op.name != "assume":
            raise SimExecutionError(f"tensor map {what}: computed in the kernel, not "
                                    "an argument; the map tileiras builds is not known",
                                    file=source)
        value = op.operand_values[0]
    return int(values[value.index])


def _address_holders(kernel):
    """Yield (instruction, holds) over the kernel, `holds` mapping each register that holds a
    kernel parameter's address (through mov / cvta) to that parameter, as of the instruction."""
    params = {param.name for param in kernel.params}
    holds: Dict[str, str] = {}
    for ins in kernel.instructions:
        ops = ins.operands
        if ins.opcode in ("mov", "cvta") and len(ops) == 2 and isinstance(ops[0], Reg):
            source = ops[1]
            if isinstance(source, Sym) and source.name in params:
                holds[ops[0].name] = source.name
            elif isinstance(source, Reg) and source.name in holds:
                holds[ops[0].name] = holds[source.name]
        yield ins, holds


def map_copies(kernel) -> Dict[str, set]:
    """For each parameter that cp.async.bulk.tensor copies go through: the set of (direction,
    rank) of those copies, direction "load" (global to shared) or "store"."""
    found: Dict[str, set] = {}
    for ins, holds in _address_holders(kernel):
        if ins.opcode != "cp" or "tensor" not in ins.modifiers:
            continue
        refs = [op for op in ins.operands if isinstance(op, TensorRef)]
        if len(refs) != 1 or not isinstance(refs[0].tensor, Reg):
            continue
        param = holds.get(refs[0].tensor.name)
        ranks = [int(m[:-1]) for m in ins.modifiers if m[:-1].isdigit() and m.endswith("d")]
        if param is not None and ranks:
            direction = "store" if classify(ins) == "global_st" else "load"
            found.setdefault(param, set()).add((direction, ranks[0]))
    return found


def store_gaps(kernel) -> Dict[str, int]:
    """For each kernel parameter that TMA stores go through with shared sources at two or more
    constant offsets: the least distance between those offsets (bytes), a bound on the box."""
    offsets: Dict[str, set] = {}
    for ins, holds in _address_holders(kernel):
        ops = ins.operands
        if ins.opcode == "cp" and "tensor" in ins.modifiers and ops and \
                isinstance(ops[0], TensorRef) and isinstance(ops[0].tensor, Reg):
            param = holds.get(ops[0].tensor.name)
            if param is not None and len(ops) > 1 and isinstance(ops[1], Addr) and \
                    isinstance(ops[1].base, Sym):
                offsets.setdefault(param, set()).add((ops[1].base.name, ops[1].offset))
    gaps = {}
    for param, places in offsets.items():
        if len({name for name, _ in places}) == 1 and len(places) > 1:
            ordered = sorted(offset for _, offset in places)
            gaps[param] = min(b - a for a, b in zip(ordered, ordered[1:]))
    return gaps


# The ops that copy a tile through a partition view, which tileiras makes with TMA on sm_90.
_VIEW_COPIES = by_mnemonic({"load_view_tko": "load", "store_view_tko": "store"},
                           "tileiras's tensor-map copies")


def tensor_maps(function, values, count: int, source: str = "<tileiras PTX>", gaps=None,
                copies=None, swizzled: bool = True):
    """The `count` tensor maps tileiras's hidden parameters hold for a launch of `function` with
    parameter `values` (see the module's notes): a list of TensorMap, in parameter order.
    `gaps`: per map, the store_gaps bound on its box (None: none known); `copies`: per map, the
    map_copies of its parameter in the PTX (None: not known), which the views must match;
    `swizzled`: the kernel's tiles feed wgmma (128-byte rows, swizzled), else tileiras copies
    whole tile rows unswizzled."""
    gaps = gaps or [None] * count
    if not count:
        return []
    views = {}  # tensor view -> the op making it
    partitions = []  # (partition view, its tensor view) in the order they are made
    uses = {}  # partition view -> the kinds of op ("load" / "store") that copy through it
    loaded = {}  # id of a tile loaded through a partition view -> that view's id
    first_use = {}  # partition view -> (op number, operand number) of its first loaded tile's use
    for number, op in enumerate(function.walk()):
        for position, value in enumerate(op.operand_values):
            if id(value) in loaded:
                first_use.setdefault(loaded[id(value)], (number, position))
            copy = _VIEW_COPIES.get(op.name) if id(value) in uses else None
            if copy is not None:
                uses[id(value)].add(copy)
                if copy == "load":
                    loaded[id(op.results[0])] = id(value)
        for result in op.results:
            if isinstance(result.type, TensorViewType):
                views[id(result)] = op
            elif isinstance(result.type, PartitionViewType):
                (view,) = op.operand_values
                partitions.append((result, view))
                uses[id(result)] = set()
    tiled = [(partition, view) for partition, view in partitions if uses[id(partition)]]
    if len(tiled) != count:
        raise SimExecutionError(f"tileiras's kernel {function.name} declares {count} tensor-map "
                                f"parameters and copies through {len(tiled)} partition views: "
                                "which map describes which tensor is not known", file=source)
    tiled = _in_parameter_order(tiled, uses, first_use, copies or [None] * count, function.name,
                                source)
    maps = []
    for number, (partition, view) in enumerate(tiled):
        vtype, ptype = view.type, partition.type
        what = f"{number} ({function.name}, view of rank {vtype.rank})"
        if id(view) not in views:
            raise SimExecutionError(f"tensor map {what}: the tensor view is not made in the "
                                    "kernel", file=source)
        base, *dynamic = views[id(view)].operand_values
        dynamic = iter(dynamic)

        def launch_value(value):
            return _argument_value(value, function, values, what, source)
        shape = [launch_value(next(dynamic)) if d is None else d for d in vtype.shape]
        strides = [launch_value(next(dynamic)) if d is None else d for d in vtype.strides]
        if ptype.padding_value not in (None, PaddingValue.ZERO):
            raise SimExecutionError(f"tensor map {what}: padding {ptype.padding_value.name} "
                                    "(only zero fill is modelled)", file=source)
        if strides[-1] != 1 or len(uses[id(partition)]) != 1:
            raise SimExecutionError(f"tensor map {what}: a non-unit innermost stride, or tiles "
                                    "both loaded and stored; tileiras's map is not known",
                                    file=source)
        box = [1] * vtype.rank
        for k, dim in enumerate(ptype.dim_map):
            box[dim] = ptype.tile_shape[k]
        tile = tuple(box)
        units = [d for d in range(vtype.rank) if tile[d] == 1]
        if units != list(range(len(units))) or len(units) == vtype.rank:
            raise SimExecutionError(f"tensor map {what}: tile {tile} has size-1 dimensions "
                                    "inside; the dimension order of tileiras's map is known "
                                    "only for leading ones", file=source)
        # the tiled dimensions innermost first, then the size-1 ones outermost first (seen in
        # tileiras 13.5's 4-d copies: {d, seq, batch, head} of [batch, head, seq, d] tensors)
        order = [d for d in reversed(range(vtype.rank)) if tile[d] > 1] + units
        size = vtype.element.bits // 8
        box = [tile[d] for d in order]
        swizzle = 0
        if vtype.rank >= 2 and swizzled:
            row = min(box[0] * size, 128)
            box[0] = row // size
            swizzle = row if row in (32, 64, 128) else 0
            gap = gaps[number]
            if uses[id(partition)] == {"store"} and gap is not None:
                # the box ends before the next store's source: tileiras stores big tiles in
                # slices (64 rows: one warpgroup's) from buffers packed one after another
                rows = gap // (box[0] * size * int(np.prod(box[2:])))
                if rows < 1:
                    raise SimExecutionError(f"tensor map {what}: store sources {gap} bytes "
                                            "apart, less than a box row", file=source)
                box[1] = min(box[1], rows)
        maps.append(TensorMap(launch_value(base), size, tuple(shape[d] for d in order),
                              tuple(strides[d] * size for d in order[1:]), tuple(box),
                              swizzle))
    return maps
