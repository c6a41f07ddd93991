"""The kernel ABI matches tileiras, errors name where they come from, the CLI writes its output."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tilebc
import tilebc.oracles
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from conftest import shared_path  # noqa: E402
from tilebc.errors import TilebcError, VerificationError

from tilebc_runtime import cli, targets
from tilebc_runtime.compiler import LinkError, compile, link_ptx, load_module, lower_module

ROOT = Path(__file__).resolve().parents[2]
BYTECODE = ROOT / "fixtures" / "bytecode"


def fixture(name, version="13.5"):
    return BYTECODE / name / f"{name}-{version}.tilebc"


def entry_params(ptx: str):
    """{kernel: [param type, ...]} from PTX text."""
    kernels = {}
    for match in re.finditer(r"\.entry\s+(\w+)\(\s*(.*?)\)", ptx, re.S):
        kernels[match.group(1)] = re.findall(r"\.param\s+\.(\w+)", match.group(2))
    return kernels


@pytest.mark.parametrize("name", ["scalar_params", "tuple_params", "elementwise_f32"])
def test_abi_matches_tileiras(name, tmp_path):
    import os
    import sys
    tileiras_ptx = shared_path("tools/tileiras-ptx")
    out = tmp_path / "nv.ptx"
    # the helper finds NVIDIA's wheel through `python3`: use this interpreter's environment
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    subprocess.run(["bash", str(tileiras_ptx), str(fixture(name)), "--gpu-name=sm_90", str(out)],
                   check=True, capture_output=True, timeout=300, env=env)
    theirs = entry_params(out.read_text())
    ours = entry_params(compile(fixture(name), emit="ptx").ptx)
    assert theirs and set(ours) == set(theirs)
    for kernel, params in theirs.items():
        assert ours[kernel] == params, kernel


def test_reqntid_and_smem_recorded():
    result = compile(fixture("reduce_all_keepdims"), emit="cubin")
    info = result.kernels[result.entry]
    assert info.threads_per_cta in (32, 64, 128, 256)
    assert f".maxntid {info.threads_per_cta}, 1, 1" in result.ptx
    # its whole-tile reduction combines the warps' partials in shared memory
    assert info.shared_memory_bytes >= (info.threads_per_cta // 32) * 4
    assert f"__tilebc_smem[{info.shared_memory_bytes}]" in result.ptx


def test_elementwise_add_lowers_to_masked_loads_and_add():
    ptx = compile(fixture("elementwise_f32"), emit="ptx").ptx
    assert re.search(r"@%p\d+ ld\.global\.f32", ptx), "partial tiles need masked loads"
    assert "add.rn.f32" in ptx and "fma.rn.f32" in ptx
    assert re.search(r"@%p\d+ st\.global\.f32", ptx), "stores are masked by bounds"


def test_ptx_version_follows_nvjitlink():
    assert targets.choose_ptx_version(90, (13, 5)) == (7, 8)
    assert targets.choose_ptx_version(120, (13, 0)) == (8, 7)
    with pytest.raises(TilebcError, match="newer than the installed nvJitLink"):
        targets.choose_ptx_version(100, (12, 4))
    with pytest.raises(TilebcError, match="driver"):
        targets.choose_ptx_version(120, (13, 5), driver=(12, 6))
    with pytest.raises(TilebcError, match="not supported"):
        targets.parse_arch("sm_70")


FP8_TO = "  cvt.rn.satfinite.e4m3x2.f32 %rs1, %f2, %f1;\n"
FP8_FROM = "  cvt.rn.f16x2.e5m2x2 %r1, %rs1;\n"


def test_ptx_version_follows_the_instructions_used():
    """ptxas 13.5: "Feature 'cvt.e4m3x2.f32 on sm_89' requires PTX ISA .version 8.1 or later";
    sm_90 has it from 7.8."""
    for text in (FP8_TO, FP8_FROM):
        assert targets.choose_ptx_version(89, (13, 5), ptx=text) == (8, 1)
        assert targets.choose_ptx_version(90, (13, 5), ptx=text) == (7, 8)
        assert targets.choose_ptx_version(100, (13, 5), ptx=text) == (8, 6)
    assert targets.choose_ptx_version(89, (13, 5), ptx="  add.rn.f32 %f1, %f2, %f3;\n") == (7, 8)
    assert targets.choose_ptx_version(89, (13, 5)) == (7, 8)
    with pytest.raises(TilebcError, match=r"e4m3x2/\.e5m2x2 instructions on sm_89 need PTX ISA "
                                          r"8\.1, newer than the installed nvJitLink 12\.0"):
        targets.choose_ptx_version(89, (12, 0), ptx=FP8_TO)


FP8_FIXTURES = ["cast_fp8", "dm_fp8_dequant", "dm_fp8_quant", "matmul_fp8", "mma_scaled_fp8",
                "la_gemm_fp8_scaled"]


FP8_MMA = "  mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32 {%f1, %f2, %f3, %f4}, " \
    "{%r1, %r2, %r3, %r4}, {%r5, %r6}, {%f1, %f2, %f3, %f4};\n"


def test_native_fp8_mma_needs_ptx_8_4_on_sm_89_and_sm_90():
    """ptxas 13.5: "Feature 'mma with FP8 floating point type' requires PTX ISA .version 8.4"."""
    assert targets.choose_ptx_version(89, (13, 5), ptx=FP8_MMA + FP8_FROM) == (8, 4)
    assert targets.choose_ptx_version(90, (13, 5), ptx=FP8_MMA) == (8, 4)
    assert targets.choose_ptx_version(120, (13, 5), ptx=FP8_MMA) == (8, 7)
    assert targets.choose_ptx_version(90, (13, 5), ptx=FP8_MMA.replace("e4m3.e5m2", "f16.f16")
                                      .replace("k32", "k16")) == (7, 8)


@pytest.mark.parametrize("name", FP8_FIXTURES)
def test_fp8_kernels_assemble_for_sm_89(name, tmp_path):
    """The JIT declared PTX ISA 7.8 for sm_89 while emitting fp8 cvt, which needs 8.1 there (and
    native fp8 mma, 8.4)."""
    result = compile(fixture(name), arch="sm_89", emit="cubin")
    version = "8.4" if name in ("matmul_fp8", "la_gemm_fp8_scaled") else "8.1"
    assert result.ptx_version == version and f"\n.version {version}\n" in result.ptx
    assert re.search(r"(cvt|mma)\S*\.e[45]m[23]", result.ptx) and result.cubin
    ptxas = tilebc.oracles.tool_path("ptxas")
    if ptxas is not None:  # NVIDIA's assembler runs without a GPU
        source = tmp_path / f"{name}.ptx"
        source.write_text(result.ptx)
        done = subprocess.run([ptxas, "-arch=sm_89", str(source), "-o", str(tmp_path / "k.cubin")],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr


def test_ptx_without_fp8_keeps_the_architecture_version():
    result = compile(fixture("elementwise_f32"), arch="sm_89", emit="ptx")
    assert result.ptx_version == "7.8" and "\n.version 7.8\n" in result.ptx


def test_link_error_names_ptx_line_and_op():
    module = load_module(fixture("elementwise_f32"))
    functions = module.functions
    ptx, origin, _, _ = lower_module(module, functions, 90, (7, 8))
    lines = ptx.splitlines()
    index = next(i for i, (text, op) in enumerate(zip(lines, origin))
                 if op is not None and op.name == "addf" and "add.rn.f32" in text)
    lines[index] = lines[index].replace("add.rn.f32", "add.rn.f33")
    with pytest.raises(LinkError) as info:
        link_ptx("\n".join(lines) + "\n", 90, origin=origin, module=module)
    error = info.value
    assert error.ptx_line == index + 1
    assert error.op is not None and error.op.name == "addf"
    assert "addf" in str(error) and "elementwise_f32-13.5.tilebc" in str(error)
    assert error.log


def test_bad_inputs_are_clear(tmp_path):
    with pytest.raises(VerificationError, match="no entry named 'nope'"):
        compile(fixture("elementwise_f32"), entry="nope", emit="ptx")
    bad = tmp_path / "bad.tilebc"
    bad.write_bytes(b"\x7fTileIR\x00garbage")
    with pytest.raises(TilebcError, match="bad.tilebc"):
        compile(bad, emit="ptx")
    with pytest.raises(TilebcError, match="emit"):
        compile(fixture("elementwise_f32"), emit="sass")


def test_cli_writes_ptx_and_cubin(tmp_path, capsys):
    out = tmp_path / "k.ptx"
    assert cli.main(["compile", str(fixture("loop_for_carried")), "--arch", "sm_80",
                     "--emit", "ptx", "-o", str(out)]) == 0
    assert out.read_text().startswith("//") and ".target sm_80" in out.read_text()
    cubin = tmp_path / "k.cubin"
    assert cli.main(["compile", str(fixture("loop_for_carried")), "--emit", "cubin",
                     "-o", str(cubin)]) == 0
    assert cubin.read_bytes()[:4] == b"\x7fELF"
    assert cli.main(["compile", str(fixture("loop_for_carried")), "--entry", "missing"]) == 1
    assert "no entry named" in capsys.readouterr().err


def test_import_does_not_touch_the_driver():
    code = ("import sys, tilebc_runtime, tilebc_runtime.compiler, tilebc_runtime.cli;"
            "assert 'cuda.bindings.driver' not in sys.modules, 'driver imported'")
    import os
    import sys
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)
