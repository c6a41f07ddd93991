"""AOT fatbins (aot.py), `tilebc compile` options and files, and demo_compile.

The C++ loader reading these fatbins and cache entries is tested in tests/test_cpp_loader.py."""
import hashlib
import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

import tilebc
import tilebc_runtime
from tilebc.errors import TilebcError
from tilebc_runtime import aot, launch
from tilebc_runtime.cache import CubinCache

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
import conftest  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "bytecode"
SCALAR = FIXTURES / "scalar_params" / "scalar_params-13.5.tilebc"
HAVE_PACKER = launch.tool_path("fatbinary") is not None or aot._nvfatbin()[0] is not None


def run_cli(*argv, cache_dir="off"):
    """`tilebc compile ARGV` in this process (conftest.run_cli: no Python start per call), its
    output as text. The process-wide cache is made afresh from TILEBC_CACHE_DIR, as in a new
    process, and the test's own put back after."""
    saved, launch._default_cache = launch._default_cache, None
    try:
        done = conftest.run_cli("compile", *argv, env={"TILEBC_CACHE_DIR": str(cache_dir)})
    finally:
        launch._default_cache = saved
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(),
                                       done.stderr.decode())


def test_parse_archs_sorts_dedupes_and_names_the_bad_item():
    assert aot.parse_archs("sm_90, sm_80,sm_90") == ["sm_80", "sm_90"]
    assert aot.parse_archs(["sm_100", "sm_86"]) == ["sm_86", "sm_100"]
    for text, bad in (("sm_80,compute_90", "compute_90"), ("sm_80,", ""), ("90", "90")):
        with pytest.raises(TilebcError, match=f"cannot parse GPU architecture '{bad}'"):
            aot.parse_archs(text)


@pytest.mark.skipif(not HAVE_PACKER, reason="needs libnvfatbin or NVIDIA's fatbinary")
def test_fatbin_metadata_describes_the_module_and_its_images(tmp_path):
    out = tmp_path / "k.fatbin"
    result = aot.write_fatbin(SCALAR, "sm_90,sm_80", out)
    metadata = json.loads(Path(f"{out}.json").read_text())
    assert metadata == result.metadata
    data = out.read_bytes()
    assert data[:4] == bytes.fromhex("50ed55ba") and data == result.fatbin
    assert metadata["fatbin_sha256"] == hashlib.sha256(data).hexdigest()
    module = tilebc.load(SCALAR)
    assert metadata["bytecode"]["sha256"] == hashlib.sha256(SCALAR.read_bytes()).hexdigest()
    assert metadata["bytecode"]["version"] == str(module.version) == "13.5"
    assert metadata["toolchain"] == launch.JitBackend().identity()
    assert metadata["archs"] == ["sm_80", "sm_90"]
    assert metadata["ptx"]["arch"] == "sm_90"
    assert metadata["ptx"]["isa"] == tilebc_runtime.ptx_isa_for("sm_90")
    [entry] = metadata["entries"]
    [function] = module.functions
    assert entry["name"] == function.name
    assert entry["params"] == [str(t) for t in function.type.inputs]
    for arch in ("sm_80", "sm_90"):  # launch facts are the JIT's own for that arch
        direct = tilebc_runtime.compile(SCALAR, None, arch)
        assert entry["launch"][arch] == {"threads_per_cta": direct.threads_per_cta,
                                         "dynamic_shared_bytes": 0}
        assert direct.cubin in data and len(direct.cubin) == result.cubin_sizes[arch]
    ptx = tilebc_runtime.compile(SCALAR, None, "sm_90", emit="ptx").ptx.encode()
    assert result.ptx_size == len(ptx)
    # the packer normalises PTX whitespace; the directives that matter survive
    for line in (f".version {metadata['ptx']['isa']}", ".target sm_90",
                 f".visible .entry {function.name}("):
        assert line.encode() in data, line


def test_without_nvfatbin_the_fatbinary_tool_is_used_with_a_note(monkeypatch, tmp_path):
    monkeypatch.setattr(aot, "_nvfatbin", lambda: (None, "DynamicLibNotFoundError: no lib"))
    if launch.tool_path("fatbinary") is None:
        pytest.skip("needs NVIDIA's fatbinary")
    result = aot.build_fatbin(SCALAR, ["sm_90"], ptx=False)
    assert result.packer.startswith("fatbinary (") and result.metadata["ptx"] is None
    assert any("libnvfatbin not found (DynamicLibNotFoundError: no lib); packed with NVIDIA's "
               "fatbinary tool" in note for note in result.notes)
    monkeypatch.setenv("TILEBC_FATBINARY", str(tmp_path / "missing-fatbinary"))
    with pytest.raises(TilebcError, match="missing-fatbinary"):
        aot.build_fatbin(SCALAR, ["sm_90"], ptx=False)


def test_fatbin_without_any_packer_names_both(monkeypatch):
    monkeypatch.setattr(aot, "_nvfatbin", lambda: (None, "ImportError: x"))
    monkeypatch.setattr(launch, "tool_path", lambda name: None)
    with pytest.raises(TilebcError, match="pip install nvidia-nvfatbin.*fatbinary tool was not found"):
        aot.build_fatbin(SCALAR, ["sm_90"], ptx=False)


def test_fatbin_entry_selection_and_unknown_entry():
    with pytest.raises(TilebcError, match="no entry named 'nope' \\(entries: scalar_params_"):
        aot.build_fatbin(SCALAR, ["sm_90"], entry="nope")


def test_compile_cubin_goes_through_the_cache_and_writes_its_metadata(tmp_path):
    """What the C++ loader's miss path runs: the cubin lands in the cache, OUT.json beside."""
    [entry] = tilebc.load(SCALAR).functions
    out = tmp_path / "out.cubin"
    done = run_cli(SCALAR, "--entry", entry.name, "--arch", "sm_86", "--emit", "cubin", "-o", out,
                   cache_dir=tmp_path / "cache")
    assert done.returncode == 0 and done.stdout.strip() == str(out), done.stderr
    metadata = json.loads(Path(f"{out}.json").read_text())
    cache = CubinCache(tmp_path / "cache")
    hit = cache.lookup(metadata["key"])
    assert hit is not None and hit.cubin == out.read_bytes()
    expected = launch.load(SCALAR, cache=CubinCache(None))[entry.name].key_fields("sm_86").key()
    assert metadata["key"] == expected
    assert metadata["threads_per_cta"] == tilebc_runtime.compile(SCALAR, None, "sm_86").threads_per_cta
    assert metadata["dynamic_shared_bytes"] == 0
    assert "tilebc-jit" in cache.toolchain()["backends"]


@pytest.mark.parametrize("argv, message", [
    (["--arch", "sm_80,sm_90"], "several architectures need --fatbin"),
    (["--emit", "ptx", "--backend", "tileiras"], "--emit ptx needs the JIT backend"),
    (["--fatbin", "--emit", "ptx"], "--fatbin holds cubins"),
    (["--threads", "64", "--backend", "tileiras"], "--threads applies to the JIT backend only"),
    (["--wgmma", "--backend", "tileiras"], "--wgmma applies to the JIT backend only"),
    (["--tma", "--backend", "tileiras"], "--tma applies to the JIT backend only"),
])
def test_compile_option_mistakes_are_usage_errors(argv, message, tmp_path):
    done = run_cli(SCALAR, *argv, "-o", tmp_path / "x")
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not (tmp_path / "x").exists()


def test_compile_wgmma_flags_force_or_refuse_warpgroup_mma(tmp_path):
    fixtures = SCALAR.parents[1]
    unaligned = fixtures / "la_gemm_large_tile" / "la_gemm_large_tile-13.5.tilebc"
    aligned = fixtures / "la_gemm_aligned_tile" / "la_gemm_aligned_tile-13.5.tilebc"
    for number, (gemm, flags, expected) in enumerate((
            (unaligned, [], False), (unaligned, ["--wgmma"], True),
            (aligned, [], True), (aligned, ["--no-wgmma"], False))):
        out = tmp_path / f"k{number}.ptx"
        done = run_cli(gemm, "--arch", "sm_90", "--emit", "ptx", *flags, "-o", out)
        assert done.returncode == 0, done.stderr
        assert ("wgmma.mma_async" in out.read_text()) == expected, (gemm.name, flags)


def test_compile_bad_entry_and_bad_file(tmp_path):
    done = run_cli(SCALAR, "--entry", "nope", "-o", tmp_path / "x.cubin")
    assert done.returncode == 1 and "no entry named 'nope'" in done.stderr
    bad = tmp_path / "bad.tilebc"
    bad.write_bytes(SCALAR.read_bytes()[:40])
    done = run_cli(bad, "--arch", "sm_80,sm_90", "--fatbin")
    assert done.returncode == 1 and str(bad) in done.stderr and "offset" in done.stderr


def test_demo_compile_summarises_the_embedded_kernel():
    data = resources.files("tilebc").joinpath("data/demo.tilebc").read_bytes()
    module = tilebc.load(data)
    line = tilebc_runtime.demo_compile(module)
    [function] = module.functions
    has_gpu = "no GPU" not in line
    arch = line.split(": ", 1)[1].split(",", 1)[0]
    direct = tilebc_runtime.compile(module, function.name, arch)
    assert "\n" not in line
    assert line.startswith(f"entry @{function.name}: {arch}, PTX {direct.ptx_version} "
                           f"{len(direct.ptx.encode())} B, cubin {len(direct.cubin)} B, "
                           f"{direct.threads_per_cta} threads/CTA; ")
    if has_gpu:
        assert "arrays match the CPU interpreter" in line, line
    else:
        assert arch == "sm_90" and line.endswith("launch and compare skipped"), line


def test_compile_every_entry_into_one_cubin(tmp_path):
    """Without --entry, a module with several entries becomes one cubin with facts per entry."""
    path = FIXTURES / "atan2_f32" / "atan2_f32-13.5.tilebc"
    names = [f.name for f in tilebc.load(path).functions]
    assert len(names) > 1
    out = tmp_path / "all.cubin"
    done = run_cli(path, "--arch", "sm_90", "-o", out)
    assert done.returncode == 0, done.stderr
    direct = tilebc_runtime.compile(path, None, "sm_90")
    assert out.read_bytes() == direct.cubin
    facts = json.loads(Path(f"{out}.json").read_text())["entries"]
    assert {name: item["threads_per_cta"] for name, item in facts.items()} == \
        {name: info.threads_per_cta for name, info in direct.kernels.items()}
    for name in names:
        assert launch.cubin_launch_facts(direct.cubin, name)[1] == direct.kernels[name].shared_memory_bytes


def test_compile_tma_flag_fills_wgmma_stages_with_tma_and_marks_the_fatbin_facts(tmp_path):
    aligned = SCALAR.parents[1] / "la_gemm_aligned_tile" / "la_gemm_aligned_tile-13.5.tilebc"
    for flags, expected in (([], True), (["--tma"], True), (["--no-tma"], False)):
        out = tmp_path / f"k{''.join(flags)}.ptx"
        done = run_cli(aligned, "--arch", "sm_90", "--emit", "ptx", *flags, "-o", out)
        assert done.returncode == 0, done.stderr
        assert ("cp.async.bulk.tensor" in out.read_text()) == expected, flags
    # the fatbin's launch facts carry the map records a host (the C++ loader) encodes at launch
    out = tmp_path / "k.fatbin"
    done = run_cli(aligned, "--arch", "sm_90", "--fatbin", "--no-ptx", "--tma", "-o", out)
    assert done.returncode == 0, done.stderr
    [entry] = json.loads((tmp_path / "k.fatbin.json").read_text())["entries"]
    maps = entry["launch"]["sm_90"]["tensor_maps"]
    assert [(m["array"], m["dims"], m["strides"], m["box"]) for m in maps] == [
        (0, [["param", 2], ["param", 1]], [["param", 3]], [64, 64]),
        (5, [["param", 7], ["param", 6]], [["param", 8]], [64, 64])]
