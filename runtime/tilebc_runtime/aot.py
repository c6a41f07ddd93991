"""Ahead-of-time kernels: `tilebc compile FILE --arch sm_80,sm_90 --fatbin -o kernels.fatbin`.

For each requested arch the whole module (or one entry) is compiled to a cubin, by our JIT or by
NVIDIA's tileiras; our JIT's PTX for the newest arch is added so that newer GPUs can run the
kernels through the driver's PTX JIT. The images are combined into an NVIDIA fatbinary with
nvFatbin (`cuda.bindings.nvfatbin`), or with NVIDIA's `fatbinary` tool when libnvfatbin is not
installed, and `<output>.json` beside it holds what a host needs to launch without Python or
bytecode (entry signatures, threads per CTA per arch). Layout: runtime/CACHE.md, "AOT fatbin".
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import tilebc
from tilebc.errors import TilebcError

FORMAT = "tilebc-fatbin"
SCHEMA = 1
_ARCH = re.compile(r"sm_(\d+)")

# Per-entry launch facts: entry name -> {"threads_per_cta": n, "dynamic_shared_bytes": 0}.
Facts = Dict[str, Dict[str, int]]


@dataclass
class FatbinResult:
    fatbin: bytes
    metadata: Dict[str, Any]
    packer: str                                   # "nvfatbin x.y" or "fatbinary (…)"
    cubin_sizes: Dict[str, int] = field(default_factory=dict)
    ptx_size: int = 0
    notes: List[str] = field(default_factory=list)


def parse_archs(text: str | Sequence[str]) -> List[str]:
    """'sm_80,sm_90' (or a list) -> ['sm_80', 'sm_90']: checked, deduplicated, oldest first."""
    items = text.split(",") if isinstance(text, str) else list(text)
    numbers = set()
    for item in items:
        item = item.strip()
        match = _ARCH.fullmatch(item)
        if match is None:
            raise TilebcError(f"cannot parse GPU architecture {item!r} in --arch; expected a "
                              "comma-separated list such as sm_80,sm_90")
        numbers.add(int(match.group(1)))
    if not numbers:
        raise TilebcError("--arch names no architecture")
    return [f"sm_{number}" for number in sorted(numbers)]


def _arch_number(arch: str) -> int:
    return int(arch[3:])


# -- compiling ------------------------------------------------------------------------------------

def _jit_module(bytecode: bytes, entry: Optional[str], arch: str, options: Mapping[str, Any],
                emit: str):
    from .compiler import compile as jit_compile
    return jit_compile(bytecode, entry, arch, emit, **dict(options))


def _jit_facts(result) -> Facts:
    facts = {}
    for name, info in result.kernels.items():
        facts[name] = {"threads_per_cta": info.threads_per_cta,
                       "dynamic_shared_bytes": info.dynamic_shared_bytes}
        if info.tensor_maps:  # a TMA kernel (sm_90 default, lowering/tma.py): hosts encode these
            facts[name]["tensor_maps"] = [dict(record) for record in info.tensor_maps]
    return facts


def compile_cubin(backend, bytecode: bytes, names: List[str], entry: Optional[str], arch: str,
                   options: Mapping[str, Any]) -> Tuple[bytes, Facts]:
    """One cubin holding the selected entries (a fatbin has one ELF image per arch)."""
    if backend.name == "tilebc-jit":
        result = _jit_module(bytecode, entry, arch, options, "cubin")
        return bytes(result.cubin), _jit_facts(result)
    from .launch import cubin_launch_facts
    cubin, _ = backend.compile(bytecode, names[0], arch, options)  # tileiras builds every entry
    facts = {}
    for name in names:
        threads, _static = cubin_launch_facts(cubin, name)
        if not threads:
            raise TilebcError(f"{backend.name} cubin for {arch} does not state the block size of "
                              f"entry {name!r}")
        facts[name] = {"threads_per_cta": threads, "dynamic_shared_bytes": 0}
    return cubin, facts


# -- packing --------------------------------------------------------------------------------------

def _nvfatbin():
    """The nvFatbin binding when its library loads, else (None, why)."""
    try:
        from cuda.bindings import nvfatbin
        version = nvfatbin.version()
    except Exception as error:  # ImportError, or pathfinder's DynamicLibNotFoundError
        return None, f"{type(error).__name__}: {str(error).splitlines()[0]}"
    return (nvfatbin, version), None


def _pack_nvfatbin(binding, cubins: Dict[str, bytes], ptx: Optional[Tuple[str, bytes]]) -> bytes:
    # Uncompressed, so the PTX stays readable in the file (the C++ loader and tests inspect it).
    handle = binding.create(["-compress=false"], 1)
    try:
        for arch, cubin in cubins.items():
            binding.add_cubin(handle, cubin, len(cubin), arch[3:], f"tilebc_{arch}")
        if ptx is not None:
            arch, text = ptx
            data = text + b"\0"  # nvFatbin reads PTX as a C string
            binding.add_ptx(handle, data, len(data), arch[3:], f"tilebc_{arch}_ptx", "")
        out = bytearray(binding.size(handle))
        binding.get(handle, out)
        return bytes(out)
    finally:
        binding.destroy(handle)


def _pack_fatbinary(tool: str, cubins: Dict[str, bytes], ptx: Optional[Tuple[str, bytes]]) -> bytes:
    with tempfile.TemporaryDirectory(prefix="tilebc-fatbin-") as folder:
        images = []
        for arch, cubin in cubins.items():
            path = Path(folder, f"{arch}.cubin")
            path.write_bytes(cubin)
            images.append(f"--image3=kind=elf,sm={arch[3:]},file={path}")
        if ptx is not None:
            path = Path(folder, f"{ptx[0]}.ptx")
            path.write_bytes(ptx[1])
            images.append(f"--image3=kind=ptx,sm={ptx[0][3:]},file={path}")
        output = Path(folder, "out.fatbin")
        try:
            done = subprocess.run([tool, f"--create={output}", "-64", "--compress=false", *images],
                                  capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise TilebcError(f"cannot run NVIDIA's fatbinary tool {tool}: "
                              f"{getattr(error, 'strerror', None) or error}") from None
        if done.returncode != 0 or not output.exists():
            raise TilebcError(f"{tool} failed (exit {done.returncode}): "
                              f"{done.stderr.strip() or done.stdout.strip()}")
        return output.read_bytes()


def pack(cubins: Dict[str, bytes], ptx: Optional[Tuple[str, bytes]]) -> Tuple[bytes, str, List[str]]:
    """(fatbin, packer, notes) from {arch: cubin} and an optional (arch, PTX text)."""
    nvfatbin, why = _nvfatbin()
    if nvfatbin is not None:
        binding, version = nvfatbin
        return _pack_nvfatbin(binding, cubins, ptx), "nvfatbin %d.%d" % tuple(version), []
    from .launch import tool_path
    tool = tool_path("fatbinary")
    if tool is None:
        raise TilebcError("cannot build a fatbin: libnvfatbin is not installed (pip install "
                          f"nvidia-nvfatbin; {why}) and NVIDIA's fatbinary tool was not found "
                          "(pip install nvidia-cuda-nvcc, or set TILEBC_FATBINARY)")
    note = (f"libnvfatbin not found ({why}); packed with NVIDIA's fatbinary tool instead "
            "(pip install nvidia-nvfatbin to use nvFatbin)")
    return _pack_fatbinary(tool, cubins, ptx), f"fatbinary ({tool})", [note]


# -- the whole step ---------------------------------------------------------------------------

def build_fatbin(source, archs, *, backend: str = "jit", entry: Optional[str] = None,
                 options: Optional[Mapping[str, Any]] = None, ptx: bool = True) -> FatbinResult:
    """Compile `source` (a path, bytes or a tilebc Module) for every arch in `archs` and pack
    the cubins, plus our JIT's PTX for the newest arch when `ptx`, into a fatbin."""
    from .launch import BACKENDS, LaunchError
    if isinstance(source, tilebc.Module):
        module, bytecode = source, tilebc.dump(source, source.version)
    elif isinstance(source, (bytes, bytearray, memoryview)):
        bytecode = bytes(source)
        module = tilebc.load(bytecode)
    else:
        bytecode = Path(os.fspath(source)).read_bytes()
        module = tilebc.load(os.fspath(source))
    archs = parse_archs(archs)
    if backend not in BACKENDS:
        raise LaunchError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    compiler = BACKENDS[backend]()
    functions = module.functions
    if entry is not None:
        functions = [f for f in functions if f.name == entry]
        if not functions:
            names = ", ".join(f.name for f in module.functions) or "none"
            raise TilebcError(f"no entry named {entry!r} (entries: {names})", file=module.source)
    if not functions:
        raise TilebcError("module has no entry to compile", file=module.source)
    names = [f.name for f in functions]
    options = dict(options or {})

    cubins: Dict[str, bytes] = {}
    facts: Dict[str, Facts] = {}
    for arch in archs:
        cubins[arch], facts[arch] = compile_cubin(compiler, bytecode, names, entry, arch, options)
    notes: List[str] = []
    ptx_image, ptx_facts, ptx_record = None, None, None
    if ptx:
        newest = archs[-1]
        # PTX that newer GPUs can JIT: nothing arch-specific (sm_90a wgmma)
        jit_options = {**(options if backend == "jit" else {}), "portable": True}
        try:
            result = _jit_module(bytecode, entry, newest, jit_options, "ptx")
        except TilebcError as error:
            if backend == "jit":
                raise
            notes.append(f"no PTX image: our JIT cannot lower this module ({error.message}); "
                         "the fatbin runs only on the listed archs' families")
        else:
            ptx_image = (newest, result.ptx.encode())
            ptx_facts = _jit_facts(result)
            jit = compiler if backend == "jit" else BACKENDS["jit"]()
            ptx_record = {"arch": newest, "isa": result.ptx_version, "toolchain": jit.identity()}

    fatbin, packer, more = pack(cubins, ptx_image)
    notes += more
    entries = []
    for function in functions:
        item = {"name": function.name, "params": [str(t) for t in function.type.inputs],
                "launch": {arch: facts[arch][function.name] for arch in archs}}
        if ptx_facts is not None:
            item["ptx_launch"] = ptx_facts[function.name]
        entries.append(item)
    metadata = {
        "format": FORMAT, "schema": SCHEMA,
        "fatbin_sha256": hashlib.sha256(fatbin).hexdigest(),
        "bytecode": {"sha256": hashlib.sha256(bytecode).hexdigest(),
                     "version": str(module.version), "producer": module.producer},
        "toolchain": compiler.identity(), "options": options, "packer": packer,
        "archs": archs, "ptx": ptx_record, "entries": entries,
    }
    return FatbinResult(fatbin, metadata, packer, {a: len(c) for a, c in cubins.items()},
                        len(ptx_image[1]) if ptx_image else 0, notes)


def metadata_path(output) -> Path:
    """Where the metadata of fatbin `output` lives: the same name with `.json` appended."""
    return Path(f"{os.fspath(output)}.json")


def write_fatbin(source, archs, output, **kwargs) -> FatbinResult:
    """build_fatbin, then write `output` and `output.json` (fatbin first, each replaced atomically)."""
    result = build_fatbin(source, archs, **kwargs)
    output = Path(os.fspath(output))
    _write(output, result.fatbin)
    _write(metadata_path(output), (json.dumps(result.metadata, indent=1) + "\n").encode())
    return result


def _write(path: Path, data: bytes) -> None:
    """Replaced atomically (symlinks and special files written through); a failure is a
    TilebcError naming `path` (tilebc/outputs.py)."""
    from tilebc.outputs import write_output
    write_output(path, data)
