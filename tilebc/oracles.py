"""Locate NVIDIA's tools (tileirdisasm, tileiras) from the `nvidia-cuda-tileiras` wheel.

These are test, demo and benchmark oracles only; nothing in tilebc's library path needs them.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from .errors import TilebcError


def tool_path(name: str) -> Optional[str]:
    """Path of an NVIDIA tool: $TILEBC_<NAME>, the wheel's nvidia/cu13/bin, then $PATH."""
    override = os.environ.get(f"TILEBC_{name.upper()}")
    if override:
        return override
    for entry in sys.path:
        candidate = Path(entry) / "nvidia" / "cu13" / "bin" / name
        if candidate.is_file():
            return str(candidate)
    return shutil.which(name)


def require_tool(name: str) -> str:
    path = tool_path(name)
    if path is None:
        raise TilebcError(f"NVIDIA tool {name!r} not found; install it with "
                          "`pip install nvidia-cuda-tileiras` (a test/demo dependency)")
    return path


@dataclass
class ToolResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def _run_on_bytes(args: List[str], data: bytes, timeout: float = 120) -> ToolResult:
    with tempfile.TemporaryDirectory(prefix="tilebc-") as folder:
        path = os.path.join(folder, "input.tilebc")
        with open(path, "wb") as handle:
            handle.write(data)
        args = [a.replace("{input}", path).replace("{dir}", folder) for a in args]
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        return ToolResult(done.returncode, done.stdout, done.stderr)


def tileirdisasm(data: bytes, *, debug_info: bool = False) -> ToolResult:
    """Run NVIDIA's disassembler on bytecode; `debug_info` adds -g."""
    args = [require_tool("tileirdisasm")] + (["-g"] if debug_info else []) + ["{input}"]
    return _run_on_bytes(args, data)


def tileiras(data: bytes, gpu_name: str = "sm_90", *, opt_level: Optional[int] = None,
             executable: Optional[str] = None) -> ToolResult:
    """Compile bytecode to a cubin with NVIDIA's tileiras (the cubin is discarded); `opt_level`
    None keeps the tool's default (3); `executable` another tileiras than tool_path's."""
    args = [executable or require_tool("tileiras"), f"--gpu-name={gpu_name}", "-o",
            "{dir}/out.cubin", "{input}"]
    if opt_level is not None:
        args.insert(1, f"--opt-level={opt_level}")
    return _run_on_bytes(args, data, timeout=300)


def without_hint_keys(listing: str) -> str:
    """Disassembly with optimization hints blanked: cuTile keys them `sm_XX` in 13.1/13.2 files and
    `default` from 13.3 on, so the same kernel prints them differently per version."""
    return re.sub(r"optimization_hints=<[^>]*>", "optimization_hints=<…>", listing)
