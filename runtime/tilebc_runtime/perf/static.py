"""Static facts of a PTX kernel from NVIDIA's assembler, without a GPU: registers, spills, shared
memory and barriers (`ptxas -v`), and the SASS each PTX line becomes.

    facts = sass_facts(ptx_text, entry, arch="sm_90")
    facts.registers, facts.spill_bytes, facts.shared_bytes, facts.sass_by_line

Registers, spills, stack and shared memory come from `ptxas -v` on the PTX as it is.
How PTX lines are mapped to SASS: a copy of the PTX gets `.file 1 "kernel.ptx"`, a module-scope
`.pragma "nounroll"` (so that every PTX loop stays rolled and a PTX line's SASS runs as often as the
line itself) and, before every
line that holds an instruction of the kernel, `.loc 1 <that line> 0`; `ptxas -lineinfo` keeps those
lines in the cubin's line table and `nvdisasm -g` prints them above the SASS they produced. So each
SASS instruction is attributed to the PTX line it came from (its class from the SASS opcode:
`sass_class`); SASS before the first line marker belongs to no line (`unmapped`, counted as executed
once per warp). SASS of subroutines ptxas places after the kernel's code (the slow paths of
`div.rn`, `sqrt.rn` and `rcp.rn`, reached by CALL only for operands outside the fast path's range)
carries the last marker before it but is not that line's code: it goes to `outlined` and is not
counted as executed. Multiplying by the emulator's dynamic count of each PTX line gives dynamic SASS
counts. Known limits: these are the SASS counts of the rolled loops (ptxas's own unrolling would
save some loop overhead: compare/branch/induction instructions); code that ptxas duplicates
without a loop (tail duplication) is attributed to one PTX line and counted on every path.
"""
from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, Optional, Tuple

from tilebc.oracles import require_tool

# SASS opcode (before the first '.') -> class; the rest are "other". NOPs are padding: "nop".
_SASS = {}
for _names, _cls in (
        ("FADD FMUL FFMA FSETP FMNMX FSEL FSET FCHK FSWZADD FADD32I FMUL32I FFMA32I FRND", "fp32"),
        ("HADD2 HMUL2 HFMA2 HSETP2 HMNMX2 HSET2 HADD2_32I HMUL2_32I HFMA2_32I", "fp16"),
        ("DADD DMUL DFMA DSETP DMNMX DSET", "fp64"),
        ("IADD3 IMAD IMADSP IMUL ISETP LOP3 LOP SHF SHL SHR LEA IABS IMNMX SEL PRMT BFE BFI "
         "POPC FLO BREV SGXT IDP VIADD VIMNMX VIADDMNMX IADD IADD32I IMAD32I ISCADD PLOP3 P2R "
         "R2P VABSDIFF VABSDIFF4 ICMP I2IP IMNMX3", "int"),
        ("MUFU", "sfu"),
        ("F2F F2I I2F F2FP I2I FRND2 I2FP F2IP", "conversion"),
        ("HMMA IMMA DMMA HGMMA IGMMA QGMMA BMMA QMMA OMMA", "tensor"),
        ("LDG LDGSTS LD", "global_ld"),
        ("STG ST", "global_st"),
        ("ATOM ATOMG RED REDG REDUX", "global_atom"),
        ("LDS LDSM", "shared_ld"),
        ("STS STSM", "shared_st"),
        ("ATOMS", "shared_atom"),
        ("LDL", "local_ld"),
        ("STL", "local_st"),
        ("LDC ULDC", "const_ld"),
        ("SHFL", "shuffle"),
        ("BAR MEMBAR DEPBAR LDGDEPBAR ERRBAR CCTL SYNCS ARRIVES", "barrier"),
        ("BRA BRX JMP JMX EXIT RET CALL BSSY BSYNC WARPSYNC BREAK KILL", "branch"),
        ("NOP", "nop")):
    for _name in _names.split():
        _SASS[_name] = _cls

_SUBROUTINE = re.compile(r'^\s*\.type\s+(\S+?)\s*,\s*@function')
_MARK = re.compile(r'//## File "[^"]*", line (\d+)')
_SASS_LINE = re.compile(r'^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)')
_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_PTXAS_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_STACK = re.compile(r"(\d+) bytes stack frame")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")
_PTXAS_BAR = re.compile(r"used (\d+) barriers")
_FUNCTION = re.compile(r"Function properties for (\S+)|Compiling entry function '([^']+)'")


def sass_class(opcode: str) -> str:
    """The class of a SASS opcode (its name before the first '.'); U* uniform-datapath
    instructions other than ULDC are "uniform"."""
    name = opcode.split(".")[0]
    if name in _SASS:
        return _SASS[name]
    if name.startswith("U") and name != "U":
        return "uniform"
    return "other"


@dataclass
class SassFacts:
    """What ptxas and nvdisasm say about one kernel."""

    entry: str
    arch: str
    registers: int = 0
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    stack_bytes: int = 0
    shared_bytes: int = 0
    barriers: int = 0
    sass_count: int = 0
    # PTX line -> {class: SASS instructions attributed to it}
    sass_by_line: Dict[int, Dict[str, int]] = field(default_factory=dict)
    unmapped: Dict[str, int] = field(default_factory=dict)
    # SASS of out-of-line subroutines (rare slow paths), counted statically only
    outlined: Dict[str, int] = field(default_factory=dict)
    static_by_class: Dict[str, int] = field(default_factory=dict)

    @property
    def spill_bytes(self) -> int:
        return self.spill_store_bytes + self.spill_load_bytes


_CACHE: Dict[Tuple[str, str, str], SassFacts] = {}
_VERSION = 3  # of the facts' format and of how they are made (part of the disk cache key)


def _annotate(ptx: str, lines, nounroll: bool = True) -> str:
    """The PTX with a .file directive and a .loc before each of `lines` (1-based); with
    `nounroll`, a module-scope `.pragma "nounroll"` so that ptxas keeps every PTX loop rolled."""
    out = []
    filed = False
    for number, text in enumerate(ptx.split("\n"), 1):
        if number in lines:
            out.append(f"\t.loc 1 {number} 0")
        out.append(text)
        if not filed and text.strip().startswith(".address_size"):
            out.append('.file 1 "kernel.ptx"')
            if nounroll:
                out.append('.pragma "nounroll";')
            filed = True
    return "\n".join(out)


def _tool(name: str) -> str:
    """ptxas / nvdisasm from the same install as tileiras (the nvidia wheels), else PATH."""
    try:
        here = Path(require_tool("tileiras")).resolve().parent / name
        if here.is_file():
            return str(here)
    except Exception:  # noqa: BLE001 - fall back to the tool on PATH
        pass
    return require_tool(name)


def sass_facts(ptx: str, entry: str, arch: str = "sm_90", instruction_lines=None,
               cache_dir=None) -> SassFacts:
    """Assemble `ptx` for `arch` and read back `entry`'s resources and SASS per PTX line.
    `instruction_lines`: the PTX lines that hold instructions (default: every line).
    Cached per process, and as JSON in `cache_dir` when given (keyed by the PTX's sha256)."""
    digest = hashlib.sha256(ptx.encode()).hexdigest()
    key = (digest, entry, arch)
    if key in _CACHE:
        return _CACHE[key]
    stored = None
    if cache_dir is not None:
        name = hashlib.sha256(f"{digest}/{entry}/{arch}/{_VERSION}".encode()).hexdigest()[:32]
        stored = Path(cache_dir) / f"{name}.sass.json"
        if stored.is_file():
            data = json.loads(stored.read_text())
            data["sass_by_line"] = {int(k): v for k, v in data["sass_by_line"].items()}
            _CACHE[key] = SassFacts(**data)
            return _CACHE[key]
    if instruction_lines is None:
        from ..sim.parser import parse_ptx
        program = parse_ptx(ptx)
        instruction_lines = {ins.line for kernel in program.kernels.values()
                             for ins in kernel.instructions}
    annotated = _annotate(ptx, set(instruction_lines))
    facts = SassFacts(entry, arch)
    with tempfile.TemporaryDirectory(prefix="tilebc-sass-") as work:
        # resources as ptxas builds the kernel (loops unrolled as it likes)
        plain = Path(work) / "plain.ptx"
        plain.write_text(ptx)
        _ptxas(arch, plain, Path(work) / "plain.cubin", facts, entry, lineinfo=False)
        # SASS per PTX line, every loop kept rolled (see the module docstring)
        source = Path(work) / "kernel.ptx"
        source.write_text(annotated)
        cubin = Path(work) / "kernel.cubin"
        _ptxas(arch, source, cubin, None, entry, lineinfo=True)
        dis = subprocess.run([_tool("nvdisasm"), "-g", "-c", "-fun", entry, str(cubin)],
                             capture_output=True, text=True, timeout=600)
        if dis.returncode != 0:
            dis = subprocess.run([_tool("nvdisasm"), "-g", "-c", str(cubin)],
                                 capture_output=True, text=True, timeout=600)
        _read_sass(dis.stdout, entry, facts)
    _CACHE[key] = facts
    if stored is not None:
        stored.parent.mkdir(parents=True, exist_ok=True)
        stored.write_text(json.dumps(asdict(facts)))
    return facts


def _ptxas(arch, source, cubin, facts, entry, lineinfo):
    if arch == "sm_90" and re.search(r"^\.target sm_90a\s*$", Path(source).read_text(), re.M):
        arch = "sm_90a"  # wgmma: arch-specific PTX assembles for sm_90a only
    command = [_tool("ptxas"), f"-arch={arch}", "-v", "-o", str(cubin), str(source)]
    if lineinfo:
        command.insert(2, "-lineinfo")
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 and "too much shared data" in done.stderr + done.stdout:
        # static shared memory over 48 KiB (tileiras's multi-stage pipelines): tileiras passes
        # ptxas this switch for it, so assemble its PTX the same way
        command.insert(2, "--enable-extended-smem=true")
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"ptxas failed: {(done.stderr or done.stdout).strip()[:400]}")
    if facts is not None:
        _read_ptxas(done.stdout + done.stderr, entry, facts)


def _read_ptxas(text: str, entry: str, facts: SassFacts) -> None:
    """The `ptxas -v` lines of `entry` (they follow its 'Compiling entry function' line)."""
    current = None
    for line in text.splitlines():
        found = _FUNCTION.search(line)
        if found:
            current = found.group(1) or found.group(2)
            continue
        if current != entry:
            continue
        if (m := _PTXAS_STACK.search(line)):
            facts.stack_bytes = int(m.group(1))
        if (m := _PTXAS_SPILL.search(line)):
            facts.spill_store_bytes, facts.spill_load_bytes = int(m.group(1)), int(m.group(2))
        if (m := _PTXAS_REGS.search(line)):
            facts.registers = int(m.group(1))
            if (b := _PTXAS_BAR.search(line)):
                facts.barriers = int(b.group(1))
            if (s := _PTXAS_SMEM.search(line)):
                facts.shared_bytes = int(s.group(1))


def _read_sass(text: str, entry: str, facts: SassFacts) -> None:
    """SASS of `entry`'s .text section, attributed to the PTX line of the last marker."""
    in_entry = False
    outlined = False
    line = None
    for row in text.splitlines():
        if row.lstrip().startswith(".section") or row.startswith("//----"):
            in_entry = f".text.{entry}" in row and not row.lstrip().startswith(".section.nv")
            line = None
            outlined = False
            continue
        if not in_entry:
            continue
        sub = _SUBROUTINE.match(row)
        if sub:  # a function other than the entry: the subroutines after the kernel's code
            outlined = outlined or sub.group(1) != entry
            continue
        mark = _MARK.search(row)
        if mark:
            line = int(mark.group(1))
            continue
        match = _SASS_LINE.match(row)
        if not match:
            continue
        cls = sass_class(match.group(1))
        if cls == "nop":
            continue
        facts.sass_count += 1
        facts.static_by_class[cls] = facts.static_by_class.get(cls, 0) + 1
        if outlined:
            bucket = facts.outlined
        else:
            bucket = facts.unmapped if line is None else facts.sass_by_line.setdefault(line, {})
        bucket[cls] = bucket.get(cls, 0) + 1


def dynamic_sass(profile, facts: SassFacts) -> Dict[str, int]:
    """Dynamic SASS instructions per class: every SASS instruction of a PTX line times the
    warp-level executions of that line in `profile` (counts unscaled; the caller scales).
    Unmapped SASS counts once per warp of every CTA run."""
    image = profile.image
    executed: Dict[int, int] = {}
    for index, entry in enumerate(image.code):
        ins = entry[4]
        if ins is None:
            continue
        executed[ins.line] = max(executed.get(ins.line, 0), int(profile.per_line[index]))
    out: Dict[str, int] = {}
    for line, classes in facts.sass_by_line.items():
        times = executed.get(line, 0)
        for cls, n in classes.items():
            out[cls] = out.get(cls, 0) + n * times
    once = profile.ctas_run * profile.warps
    for cls, n in facts.unmapped.items():
        out[cls] = out.get(cls, 0) + n * once
    return out


def environment_note() -> str:
    """Which ptxas is used (for reports)."""
    try:
        done = subprocess.run([_tool("ptxas"), "--version"], capture_output=True, text=True)
        return done.stdout.strip().splitlines()[-1]
    except Exception:  # noqa: BLE001
        return "ptxas: unknown"


__all__ = ["SassFacts", "sass_facts", "sass_class", "dynamic_sass",
           "environment_note"]
