"""The C++ host loader (runtime/cpp): built once per session with CMake under AddressSanitizer and
UBSan, then compared with the Python reader and driven through its cache, compile and AOT paths.

Needs cmake and a C++17 compiler (skipped otherwise); needs no GPU. The build (cpp_builds.py) lives
in runtime/cpp/build/pytest-asan and is reused (incremental) by later test runs. The library is
built as one translation unit there (a quarter less CPU under the sanitizers); test_cpp_package.py
builds its sources one by one, so each still compiles on its own.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import random
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest

import cpp_builds
from conftest import shared_path

import tilebc
from tilebc.oracles import tool_path

ROOT = Path(__file__).resolve().parent.parent
CPP = ROOT / "runtime" / "cpp"
FIXTURES = ROOT / "fixtures" / "bytecode"
SANITIZER_ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:exitcode=97",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1:exitcode=98",
}


# ---- build ---------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def cpp_build() -> Path:
    missing = cpp_builds.missing_tools()
    if missing:
        pytest.skip(f"building runtime/cpp needs {' and '.join(missing)}")
    try:
        return cpp_builds.asan_build()
    except cpp_builds.BuildError as error:
        pytest.fail(str(error), pytrace=False)


def run_tool(build: Path, *args: str, env: Optional[Dict[str, str]] = None, timeout: int = 300) -> List[dict]:
    """Run tilebc-inspect; fail on any sanitizer report; return its JSON lines."""
    full_env = {**os.environ, **SANITIZER_ENV, **(env or {})}
    proc = subprocess.run([str(build / "tilebc-inspect"), *args], capture_output=True, text=True,
                          timeout=timeout, env=full_env)
    assert "Sanitizer" not in proc.stderr and "runtime error" not in proc.stderr, proc.stderr[-6000:]
    assert proc.returncode == 0, proc.stderr[-4000:]
    return [json.loads(line) for line in proc.stdout.splitlines()]


def fixture_files() -> List[Path]:
    files = sorted(FIXTURES.glob("*/*.tilebc"))
    assert files, f"no fixtures under {FIXTURES}"
    return files


def smallest_fixture(version: str) -> Path:
    return min(FIXTURES.glob(f"*/*-{version}.tilebc"), key=lambda p: (p.stat().st_size, p.name))


def python_view(data: bytes, strict: bool = False) -> dict:
    """What the C++ reader must report, computed with tilebc.load in the same mode."""
    module = tilebc.load(data, verify=False, lazy_debug=False, strict=strict)
    return {
        "version": str(module.version),
        "producer": module.producer,
        "preview": module.preview,
        "entries": [{"name": f.name, "signature": str(f.type),
                     "params": [str(t) for t in f.type.inputs],
                     "results": [str(t) for t in f.type.results]} for f in module.functions],
    }


def cpp_view(record: dict) -> dict:
    return {
        "version": record["version"],
        "producer": record["producer"],
        "preview": record["preview"],
        "entries": [{"name": e["name"], "signature": e["signature"],
                     "params": [p["type"] for p in e["params"]], "results": e["results"]}
                    for e in record["entries"]],
    }


def in_undecoded(record: dict, offset: int) -> bool:
    # inclusive: a body cut short is reported at its end
    return any(begin <= offset <= end for begin, end in record["undecoded"])


def python_warnings(data: bytes) -> set:
    """(message, offset) of the default load's decode warnings, debug attributes included."""
    module = tilebc.load(data, verify=False, lazy_debug=False)
    return {(w.message, w.offset) for w in module.decode_warnings}


def assert_warnings_agree(record: dict, expected: set, name: str) -> None:
    """Every C++ warning is one Python records; Python's others lie in bytes C++ only frames
    (function bodies, constant payloads, globals, debug attributes, types only bodies may use)
    or concern op locations, which C++ does not resolve."""
    ours = {(w["message"], w["offset"]) for w in record["warnings"]}
    assert ours <= expected, f"{name}: C++ warns {sorted(ours - expected)}, Python {sorted(expected)}"
    missing = [w for w in expected - ours
               if not in_undecoded(record, w[1]) and not w[0].startswith(DEBUG_LOCATION_FAULTS)]
    assert not missing, f"{name}: Python warns {missing}, C++ does not"


# ---- build products ------------------------------------------------------------------------------

def test_generated_tables_are_current():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(CPP / "tools" / "gen_tables.py"), "--check"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr


def test_cpp_unit_tests(cpp_build, tmp_path):
    """Argument checking, launch refusing before the driver, no-driver message, SHA-256 vectors;
    and TMA launches against a fake driver table: la_gemm_aligned_tile compiled with tma=True,
    its maps read from a real AOT fatbin and a real cache entry."""
    def run(*extra: str) -> str:
        proc = subprocess.run([str(cpp_build / "tilebc_cpp_tests"), str(ROOT / "fixtures"), *extra],
                              capture_output=True, text=True, timeout=120, env={**os.environ, **SANITIZER_ENV})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert " 0 failures" in proc.stdout and "Sanitizer" not in proc.stderr, proc.stdout + proc.stderr
        return proc.stdout

    base = run()  # first without the TMA inputs, which need the Python runtime and a fatbin packer
    fixture = FIXTURES / "la_gemm_aligned_tile" / "la_gemm_aligned_tile-13.5.tilebc"
    fatbin = _aot(tmp_path, fixture, ["sm_90"], "--no-ptx", "--tma")
    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    out = tmp_path / "gemm.cubin"
    proc = subprocess.run([sys.executable, "-m", "tilebc.cli", "compile", str(fixture), "--arch", "sm_90",
                           "--emit", "cubin", "--tma", "-o", str(out)], capture_output=True, text=True,
                          timeout=600, env=_tool_env(TILEBC_CACHE_DIR=str(root)))
    assert proc.returncode == 0, proc.stderr
    key = json.loads(Path(f"{out}.json").read_text())["key"]
    with_tma = run(str(fatbin), str(root), key)
    assert int(with_tma.split()[0]) > int(base.split()[0]), (base, with_tma)  # the TMA checks ran


def test_example_lists_a_fixture(cpp_build):
    fixture = FIXTURES / "scalar_params" / "scalar_params-13.5.tilebc"
    proc = subprocess.run([str(cpp_build / "launch_fixture"), str(fixture)], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **SANITIZER_ENV})
    assert proc.returncode == 0, proc.stderr
    name = tilebc.load(fixture, verify=False, lazy_debug=False).functions[0].name
    assert f"  {name} (tile<ptr<f32>>, tile<i32>" in proc.stdout
    assert "tile<i1>: integer, 1 bytes" in proc.stdout


def _gemm_fixture(build: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(build / "gemm_fixture"), *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **SANITIZER_ENV, **env})
    assert "Sanitizer" not in proc.stderr and "runtime error" not in proc.stderr, proc.stderr[-6000:]
    return proc


def test_gemm_example_without_a_driver_fails_with_the_loaders_error(cpp_build, tmp_path):
    """gemm_fixture (GPU validation of la_gemm_aligned_tile's TMA launch) loads the module, then
    stops at its first device allocation with the loader's driver error, exit 1, nothing on stdout."""
    fixture = FIXTURES / "la_gemm_aligned_tile" / "la_gemm_aligned_tile-13.5.tilebc"
    missing = tmp_path / "no-such-libcuda.so.1"
    proc = _gemm_fixture(cpp_build, str(fixture), "512", "512", "512", TILEBC_LIBCUDA=str(missing))
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"error: cannot open the CUDA driver library {missing}"), proc.stderr
    # K = 0 (empty A and B; the launch encodes their maps over zeros) passes the argument checks
    proc = _gemm_fixture(cpp_build, str(fixture), "64", "128", "0", TILEBC_LIBCUDA=str(missing))
    assert proc.returncode == 1 and proc.stderr.startswith("error: cannot open the CUDA driver"), proc.stderr
    # a file that is not bytecode fails earlier, at load, with the reader's error
    bogus = tmp_path / "not.tilebc"
    bogus.write_bytes(b"not bytecode at all")
    proc = _gemm_fixture(cpp_build, str(bogus), "64", "128", "64", TILEBC_LIBCUDA=str(missing))
    assert proc.returncode == 1 and proc.stderr.startswith(f"error: {bogus}"), proc.stderr
    assert "CUDA driver" not in proc.stderr
    # another kernel's parameter list is refused before the driver is opened
    other = FIXTURES / "la_bmm_aligned_tile" / "la_bmm_aligned_tile-13.5.tilebc"
    proc = _gemm_fixture(cpp_build, str(other), "64", "128", "64", TILEBC_LIBCUDA=str(missing))
    assert proc.returncode == 1 and proc.stderr.startswith("error: 'bmm_transposed_b_"), proc.stderr
    assert "takes 21 arguments" in proc.stderr and proc.stderr.rstrip().endswith("got 18"), proc.stderr


def test_gemm_example_reads_an_aot_fatbin_up_to_the_driver(cpp_build, tmp_path):
    """The GPU run's second form, an sm_90 AOT fatbin: it loads (one entry, the GEMM's signature)
    and stops at the driver like the bytecode does."""
    fatbin = _aot(tmp_path, FIXTURES / "la_gemm_aligned_tile" / "la_gemm_aligned_tile-13.5.tilebc", ["sm_90"])
    missing = tmp_path / "no-such-libcuda.so.1"
    proc = _gemm_fixture(cpp_build, str(fatbin), "208", "400", "80", TILEBC_LIBCUDA=str(missing))
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith(f"error: cannot open the CUDA driver library {missing}"), proc.stderr


@pytest.mark.parametrize("args", [(), ("k.tilebc",), ("k.tilebc", "64", "64"), ("k.tilebc", "64", "64", "64", "1"),
                                  ("k.tilebc", "200", "384", "208"), ("k.tilebc", "0", "64", "64"),
                                  ("k.tilebc", "64", "64x", "64")])
def test_gemm_example_refuses_bad_usage_with_exit_2(cpp_build, args):
    """Wrong arity prints the usage; sizes the kernel's div_by<16> facts would not hold for are
    refused before anything is loaded (the file named does not exist)."""
    proc = _gemm_fixture(cpp_build, *args)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stdout == ""
    expected = "usage: gemm_fixture" if len(args) != 4 else "error: M, N and K must be multiples of 16"
    assert proc.stderr.startswith(expected), proc.stderr


# ---- the reader against the Python reader --------------------------------------------------------

@pytest.mark.parametrize("strict", [False, True], ids=["default", "strict"])
def test_every_fixture_lists_what_python_lists(cpp_build, strict):
    files = fixture_files()
    records = run_tool(cpp_build, "list", *(["--strict"] if strict else []), *map(str, files))
    assert len(records) == len(files)
    for path, record in zip(files, records):
        assert record["ok"], f"{path.name}: {record.get('what')}"
        assert cpp_view(record) == python_view(path.read_bytes(), strict), path.name
        assert record["warnings"] == [], path.name  # writers never deviate


def test_param_layout_matches_tileiras_abi(cpp_build):
    """Pointers take 8 bytes, scalars their natural width, i1/i8 one byte (tileiras' .param list)."""
    record = run_tool(cpp_build, "list", str(FIXTURES / "scalar_params" / "scalar_params-13.5.tilebc"))[0]
    layout = [(p["type"], p["kind"], p["size"]) for p in record["entries"][0]["params"]]
    assert layout == [("tile<ptr<f32>>", "pointer", 8), ("tile<i32>", "integer", 4), ("tile<i32>", "integer", 4),
                      ("tile<f32>", "float", 4), ("tile<f64>", "float", 8), ("tile<i64>", "integer", 8),
                      ("tile<i16>", "integer", 2), ("tile<i8>", "integer", 1), ("tile<i1>", "integer", 1)]


@pytest.mark.parametrize("version", ["13.1", "13.3", "13.5"])
def test_truncated_at_every_byte(cpp_build, version):
    fixture = smallest_fixture(version)
    [report] = run_tool(cpp_build, "truncations", str(fixture))
    assert report["size"] == fixture.stat().st_size
    assert report["accepted"] == [], f"prefixes accepted: {report['accepted'][:10]}"
    assert report["bad_offsets"] == [], f"errors without an offset inside the prefix: {report['bad_offsets'][:10]}"
    assert report["rejected"] == report["size"]


def test_nvidia_invalid_reference_files(cpp_build):
    folder = shared_path("reference/cuda-tile-invalid")
    files = sorted(p for p in folder.glob("*") if p.suffix in (".bc", ".tileirbc"))
    assert len(files) >= 7, files
    for strict in (False, True):
        records = run_tool(cpp_build, "list", *(["--strict"] if strict else []), *map(str, files))
        for path, record in zip(files, records):
            compare_with_python(record, path.read_bytes(), strict, path.name)
            if not record["ok"]:
                assert record["code"] in ("malformed input", "unsupported bytecode version"), record


# Debug locations are decoded when Python attaches them to a function's ops, and the fault is
# reported at the function record; the C++ reader frames the debug section but, not decoding
# bodies, cannot count ops or resolve location attributes.
DEBUG_LOCATION_FAULTS = ("debug info for function", "debug attribute ", "unknown debug attribute tag")


def python_fault_is_undecoded(record: dict, error: tilebc.DecodeError) -> bool:
    """The Python reader's fault lies in what the C++ reader frames but does not decode."""
    return in_undecoded(record, error.offset) or error.message.startswith(DEBUG_LOCATION_FAULTS)


def test_malformed_cases_from_the_python_suite(cpp_build, tmp_path):
    """Every case of tests/test_malformed.py, strict: rejected with the same message, or (when
    accepted) the Python reader's fault lies in bytes the C++ reader only frames (function bodies,
    ...). Default: the same verdict as tilebc.load's default."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        import test_malformed  # noqa: WPS433 - the suite's inline case builders
    finally:
        sys.path.remove(str(ROOT / "tests"))
    cases = test_malformed.CASES
    paths = []
    for index, case in enumerate(cases):
        path = tmp_path / f"{index:03d}-{case.name}.tilebc"
        path.write_bytes(case.build())
        paths.append(path)
    records = run_tool(cpp_build, "list", "--strict", *map(str, paths))
    rejected = 0
    for case, path, record in zip(cases, paths, records):
        data = path.read_bytes()
        with pytest.raises(tilebc.DecodeError) as caught:
            tilebc.load(data, verify=False, lazy_debug=False, strict=True)
        if record["ok"]:
            assert python_fault_is_undecoded(record, caught.value), \
                f"{case.name}: C++ accepts; Python: {caught.value}"
            continue
        rejected += 1
        import re
        assert re.match(case.message, record["message"], re.IGNORECASE), \
            f"{case.name}: C++ says {record['message']!r}, expected /{case.message}/"
        assert 0 <= record["offset"] <= len(data), (case.name, record)
    assert rejected >= len(cases) // 2, f"only {rejected} of {len(cases)} rejected"
    # By default both read the cases NVIDIA accepts and keep refusing the others.
    records = run_tool(cpp_build, "list", *map(str, paths))
    for case, path, record in zip(cases, paths, records):
        compare_with_python(record, path.read_bytes(), False, case.name)


@pytest.mark.parametrize("shape, refused", [
    ((1 << 62, 1 << 62, 4), True),      # the product overflows 64 bits: never formed
    ((4096, 4097), True),
    (((1 << 63) - 1,), True),          # the largest dimension the format holds
    ((4096, 4096), False),              # exactly max_tile_elements
])
def test_tile_types_over_max_tile_elements_are_refused_like_python(cpp_build, tmp_path, shape, refused):
    """A signature's tile type with more elements than DecodeLimits.max_tile_elements: both readers
    refuse it with the same message at the same offset (before, C++ accepted any shape)."""
    M = _tests_module("test_malformed")
    big = b"\x0d\x03" + bytes([len(shape)]) + struct.pack(f"<{len(shape)}q", *shape)  # tile<...xi32>
    types = list(M.TYPES)
    types[1] = big  # the parameter type of the signature, types[2]
    path = tmp_path / "big-tile.tilebc"
    path.write_bytes(M.module_bytes(M.V13_5, types=tuple(types)))
    [record] = run_tool(cpp_build, "list", str(path))
    if not refused:
        tilebc.load(path.read_bytes(), verify=False)
        assert record["ok"], record
        assert record["entries"][0]["params"][0]["type"] == "tile<4096x4096xi32>"
        return
    with pytest.raises(tilebc.DecodeError) as caught:
        tilebc.load(path.read_bytes(), verify=False)
    expected = (f"limit exceeded: tile shape {list(shape)} has more than "
                f"max_tile_elements={tilebc.DecodeLimits().max_tile_elements} elements")
    assert caught.value.message == expected
    assert not record["ok"], record
    assert record["message"] == expected and record["offset"] == caught.value.offset, record


def _tests_module(name: str):
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(ROOT / "tests"))


def _params(function) -> list:
    """The parameter sets of a test_lenient test, read from its parametrize mark (so this list
    follows that suite's)."""
    [mark] = [m for m in function.pytestmark if m.name == "parametrize"]
    return [p if isinstance(p, tuple) else (p,) for p in mark.args[1]]


def lenient_files() -> Dict[str, bytes]:
    """The crafted files of tests/test_lenient.py, each breaking one rule NVIDIA's reader does not
    check (or one it does, kept refused), built with that suite's own helpers."""
    L = _tests_module("test_lenient")
    M = _tests_module("test_malformed")
    files: Dict[str, bytes] = {}
    for case in M.CASES:
        if case.name in M.NVIDIA_ACCEPTS:
            files[f"case-{case.name}"] = case.build()
    for offsets, index in _params(L.test_string_table_out_of_order):
        files[f"strings-{offsets}-{index}"] = M.module_bytes(
            sections=M._section(M.STRING, L.raw_table(offsets, L.STRING_DATA), align=4), name=index)
    for entry, offset in _params(L.test_type_table_out_of_order):
        offsets = list(L.TYPE_OFFSETS)
        offsets[entry] = offset
        table = L.raw_table(offsets, b"".join(M.TYPES))
        files[f"types-{entry}-{offset}"] = M.module_bytes(
            sections=lambda secs, t=table: [secs[M.FUNC], M.S(M.TYPE, t, 4), secs[M.STRING]])
    for offsets, extra in _params(L.test_debug_table_out_of_order):
        files[f"debug-{offsets}-{len(extra)}"] = M.module_bytes(
            M.V13_5, loc=1, debug=L.debug_raw(offsets, b"".join(L.DEBUG_ATTRS) + extra))
    constants = b"\x04\x07\x00\x00\x00\x04\x09\x00\x00\x00"
    for offsets, index, _ in _params(L.test_constant_table):
        table = L.raw_table(offsets, constants, 8, 8)
        files[f"constants-{offsets}-{index}"] = M.module_bytes(
            M.V13_3, body=b"\x10\x04" + bytes([index]) + M.RETURN,
            sections=lambda secs, t=table: [secs[M.FUNC], M.S(4, t, 8), secs[M.TYPE], secs[M.STRING]])
    first = M.S(M.STRING, L.raw_table([0, 5, 10], b"firstsm_90"), 4)
    last = M.S(M.STRING, L.raw_table([0, 4, 9], b"lastsm_90"), 4)
    files["repeated-section"] = M.module_bytes(sections=lambda secs: [secs[M.FUNC], first, secs[M.TYPE], last])
    for (tag,) in _params(L.test_unknown_debug_tag_is_unknown_location):
        files[f"debug-tag-{tag}"] = M.module_bytes(
            M.V13_5, loc=1, debug=M.subprogram_debug(0)[:-5] + bytes([tag]) + b"\x03\x00\x0a\x01")
    files["bool-byte"] = M.module_bytes(M.V13_3, hints=b"\x0b\x01\x01\x0a\x01\x01\x03\x07")
    for version, flags in _params(L.test_function_flag_bits_ignored_before_13_4) + \
            _params(L.test_function_flag_bits_refused):
        files[f"flags-{version}-{flags:#x}"] = M.module_bytes(version, flags=flags)
    for version in (M.V13_1, M.V13_5):
        files[f"empty-{version}"] = M.module_bytes(version, funcs=[])
    for firsts, indices, loc in _params(L.test_debug_function_ranges):
        files[f"debug-ranges-{firsts}-{indices}-{loc}"] = M.module_bytes(
            M.V13_5, loc=loc, debug=L.debug_functions(firsts, indices))
    for (tag,) in _params(L.test_debug_tag_keeps_its_low_byte):
        attrs = L.DEBUG_ATTRS[:3] + [bytes.fromhex(tag) + b"\x03\x00\x0a\x01"]
        files[f"debug-tag-{tag}"] = M.module_bytes(M.V13_5, loc=1, debug=M.debug_section([4, 4], attrs))
    from tilebc.binary.reader import ModuleReader
    original = (FIXTURES / "matmul_fp8" / "matmul_fp8-13.2.tilebc").read_bytes()
    reader = ModuleReader(original)
    reader.read()
    present = [offset + len(blob) - 2 for offset, blob in
               (reader.type_blobs[i] for i in range(len(reader.type_blobs))) if blob[0] == 15 and blob[-2] == 1]
    for (value,) in _params(L.test_partition_view_presence_byte_before_13_3):
        data = bytearray(original)
        data[present[0]] = value
        files[f"partition-presence-{value}"] = bytes(data)
    for (tail,) in _params(L.test_unknown_attribute_tag_13_stays_refused):
        entry = b"\x00\x02\x02\x00\x0b\x00" + bytes.fromhex(tail)
        files[f"tag13-{tail}"] = M.module_bytes(M.V13_5, funcs=[entry + bytes([len(M.RETURN)]) + M.RETURN])
    return files


def test_lenient_files_read_as_python_reads_them(cpp_build, tmp_path):
    """The crafted files of tests/test_lenient.py (NVIDIA's reader checked on each there): C++
    and Python agree in the default mode (verdict, entries, warnings where C++ reads) and in the
    strict mode (verdict, entries; the same message and offset when both refuse)."""
    files = lenient_files()
    paths = []
    for index, (name, data) in enumerate(files.items()):
        path = tmp_path / f"{index:03d}.tilebc"
        path.write_bytes(data)
        paths.append(path)
    outcomes = {}
    for strict in (False, True):
        records = run_tool(cpp_build, "list", *(["--strict"] if strict else []), *map(str, paths))
        for (name, data), record in zip(files.items(), records):
            outcome = compare_with_python(record, data, strict, name)
            outcomes[strict, outcome] = outcomes.get((strict, outcome), 0) + 1
            if strict and outcome == "both-reject":
                with pytest.raises(tilebc.DecodeError) as caught:
                    tilebc.load(data, verify=False, lazy_debug=False, strict=True)
                assert (record["message"], record["offset"]) == (caught.value.message, caught.value.offset), name
    # Most files are deviations Python reads by default with a warning; C++ reads them too.
    warned = sum(1 for (name, data), record in zip(files.items(), run_tool(cpp_build, "list", *map(str, paths)))
                 if record.get("warnings"))
    assert outcomes.get((False, "both-accept"), 0) >= outcomes.get((True, "both-accept"), 0) + 30, outcomes
    assert warned >= 30, (warned, outcomes)


def _corrupt(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        kind = rng.choice(("flip", "set", "insert", "delete", "truncate"))
        position = rng.randrange(len(out) + 1) if out else 0
        if kind == "flip" and position < len(out):
            out[position] ^= 1 << rng.randrange(8)
        elif kind == "set" and position < len(out):
            out[position] = rng.randrange(256)
        elif kind == "insert":
            out[position:position] = bytes([rng.randrange(256)])
        elif kind == "delete" and position < len(out):
            del out[position]
        elif kind == "truncate":
            del out[position:]
    return bytes(out)


def test_random_corruption_agrees_with_python(cpp_build, tmp_path):
    """Seeded corruptions of real fixtures, read under ASan/UBSan: never a crash; acceptance
    agrees with Python wherever the fault lies in bytes the C++ reader decodes."""
    rng = random.Random(20240613)
    sources = [smallest_fixture(v) for v in ("13.1", "13.3", "13.5")] + [
        FIXTURES / "matmul_f16" / "matmul_f16-13.5.tilebc", FIXTURES / "scalar_params" / "scalar_params-13.4.tilebc"]
    paths = []
    for index in range(400):
        source = sources[index % len(sources)]
        path = tmp_path / f"corrupt-{index:04d}.tilebc"
        path.write_bytes(_corrupt(source.read_bytes(), rng))
        paths.append(path)
    for strict in (True, False):
        records = run_tool(cpp_build, "list", *(["--strict"] if strict else []), *map(str, paths))
        outcomes = {"both-accept": 0, "both-reject": 0, "body-only": 0, "warned": 0}
        for path, record in zip(paths, records):
            data = path.read_bytes()
            outcome = compare_with_python(record, data, strict, path.name)
            outcomes[outcome] += 1
            outcomes["warned"] += bool(record.get("warnings"))
        assert outcomes["both-reject"] > 100, outcomes
        assert strict or outcomes["warned"] > 10, outcomes  # the lenient classes are met


def compare_with_python(record: dict, data: bytes, strict: bool, name: str) -> str:
    """Check a C++ record against tilebc.load in the same mode; say how they agreed."""
    try:
        expected = python_view(data, strict)
        python_error = None
    except tilebc.DecodeError as error:
        expected, python_error = None, error
    if python_error is None:
        assert record["ok"], f"{name}: Python accepts, C++ says {record['what']}"
        assert cpp_view(record) == expected, name
        if strict:
            assert record["warnings"] == [], name
        else:
            assert_warnings_agree(record, python_warnings(data), name)
        return "both-accept"
    if record["ok"]:
        assert python_fault_is_undecoded(record, python_error), f"{name}: C++ accepts; Python: {python_error}"
        return "body-only"
    assert 0 <= record["offset"] <= len(data), record
    return "both-reject"


# ---- cache key and lookup ------------------------------------------------------------------------

def reference_cache_key(bytecode: bytes, toolchain: str, entry: str, arch: str, ptx_isa: str, nvjitlink: str,
                        options: dict) -> str:
    """runtime/CACHE.md: sha256 over (8-byte LE length || bytes) of the nine fields, in order."""
    fields = [b"tilebc-cubin-cache", b"1", toolchain.encode(), bytecode, entry.encode(), arch.encode(),
              ptx_isa.encode(), nvjitlink.encode(),
              json.dumps(options, sort_keys=True, separators=(",", ":")).encode()]
    digest = hashlib.sha256()
    for field in fields:
        digest.update(struct.pack("<Q", len(field)) + field)
    return digest.hexdigest()


KEY_FIELDS = dict(toolchain="tilebc-jit/0.1.0+3f2a9c0d1e2b4a5c", arch="sm_90", ptx_isa="8.8", nvjitlink="13.5",
                  options={"opt_level": 3, "fast_math": False, "name": "ünï"})


def test_cache_key_matches_python_reference_on_every_fixture(cpp_build):
    files = fixture_files()
    records = run_tool(cpp_build, "key", "--toolchain", KEY_FIELDS["toolchain"], "--arch", KEY_FIELDS["arch"],
                       "--ptx-isa", KEY_FIELDS["ptx_isa"], "--nvjitlink", KEY_FIELDS["nvjitlink"],
                       "--options", json.dumps(KEY_FIELDS["options"]), *map(str, files))
    count = 0
    for path, record in zip(files, records):
        data = path.read_bytes()
        fields = {k: v for k, v in KEY_FIELDS.items()}
        for name, key in record["keys"].items():
            assert key == reference_cache_key(data, entry=name, **fields), (path.name, name)
            count += 1
    assert count >= len(files)


def test_cache_key_changes_with_each_field(cpp_build):
    fixture = str(FIXTURES / "scalar_params" / "scalar_params-13.5.tilebc")
    base = ["--toolchain", "t/1", "--arch", "sm_90", "--ptx-isa", "8.8", "--nvjitlink", "13.5", "--options", "{}"]
    keys = {tuple(base): run_tool(cpp_build, "key", *base, fixture)[0]["keys"]}
    for index in range(1, len(base), 2):
        changed = list(base)
        changed[index] = changed[index] + "x" if base[index] != "{}" else '{"a":1}'
        keys[tuple(changed)] = run_tool(cpp_build, "key", *changed, fixture)[0]["keys"]
    values = [tuple(k.values()) for k in keys.values()]
    assert len(set(values)) == len(values)


def test_canonical_json_matches_python(cpp_build):
    documents = [{"b": 1, "a": [1, 2.5, None, True, False]}, {"opt_level": 3}, {},
                 {"s": "quote\" back\\ nl\n tab\t ctl\x01 é 😀"}, {"f": [0.1, 1e-05, 1e16, 123456789.125, -0.0, 2.0, 1e300]},
                 {"nested": {"z": {"y": [], "x": {}}}}, [1, -7, 10000000000000000000000]]
    texts = [json.dumps(d) for d in documents]
    records = subprocess.run([str(cpp_build / "tilebc-inspect"), "canon", *texts], capture_output=True,
                             text=True, check=True, env={**os.environ, **SANITIZER_ENV}).stdout.splitlines()
    assert records == [json.dumps(d, sort_keys=True, separators=(",", ":")) for d in documents]


@functools.lru_cache(maxsize=None)
def tileiras_cubin(fixture: str, arch: str, directory: str) -> Path:
    tool = tool_path("tileiras")
    if tool is None:
        pytest.skip("tileiras (nvidia-cuda-tileiras) is not installed")
    out = Path(directory) / f"{Path(fixture).stem}-{arch}.cubin"
    subprocess.run([tool, f"--gpu-name={arch}", fixture, "-o", str(out)], check=True, capture_output=True,
                   timeout=120)
    return out


def _runtime():
    """tilebc_runtime (runtime/ on PYTHONPATH); the cross-language tests need it."""
    return pytest.importorskip("tilebc_runtime.launch")


def _tool_env(**extra: str) -> Dict[str, str]:
    """Environment for a child Python that imports this checkout's tilebc and tilebc_runtime."""
    path = os.pathsep.join([str(ROOT), str(ROOT / "runtime"), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, **extra}


def _python_compile(fixture: Path, backend: str, arch: str, root: Path):
    """Compile every entry of `fixture` into the cache at `root` with the Python runtime."""
    launch = _runtime()
    from tilebc_runtime.cache import CubinCache
    if backend == "tileiras" and tool_path("tileiras") is None:
        pytest.skip("tileiras (nvidia-cuda-tileiras) is not installed")
    module = launch.load(fixture, backend=backend, cache=CubinCache(root))
    return {name: module[name].compile(arch) for name in module.entries}


NO_PYTHON = {"PATH": "/nonexistent", "TILEBC_PYTHON": "", "TILEBC_COMPILER": ""}


@pytest.mark.parametrize("backend", ["jit", "tileiras"])
def test_python_cache_is_a_warm_hit_for_cpp_without_python(cpp_build, tmp_path, backend):
    """The Python runtime compiles into a cache; the C++ loader, with no Python reachable, finds
    each cubin there (same key, same bytes, same launch facts)."""
    fixture = FIXTURES / "scalar_params" / "scalar_params-13.5.tilebc"
    root = tmp_path / "cache"
    compiled = _python_compile(fixture, backend, "sm_90", root)
    [hit] = run_tool(cpp_build, "module", str(fixture), "--arch", "sm_90", "--cache", str(root), "--no-compile",
                     env=NO_PYTHON)
    for name, entry in compiled.items():
        image = hit["images"][name]
        assert image["source"] == "cache", image
        assert image["detail"] == str(root / "v1" / entry.key[:2] / f"{entry.key}.cubin")
        assert image["size"] == len(entry.cubin) and image["threads_per_cta"] == entry.threads

    # A damaged cubin is a miss, and a miss without Python says what to install or build.
    key = next(iter(compiled.values())).key
    name = next(iter(compiled))
    path = root / "v1" / key[:2] / f"{key}.cubin"
    damaged = bytearray(path.read_bytes())
    damaged[100] ^= 0xFF
    path.write_bytes(bytes(damaged))
    env = {k: v for k, v in os.environ.items() if k not in ("TILEBC_PYTHON", "TILEBC_COMPILER")}
    env["PATH"] = "/nonexistent"
    proc = subprocess.run([str(cpp_build / "tilebc-inspect"), "module", str(fixture), "--arch", "sm_90", "--cache",
                           str(root)], capture_output=True, text=True, env={**env, **SANITIZER_ENV})
    miss = json.loads(proc.stdout)["images"][name]
    assert miss["code"] == "no cubin cached and the Python runtime is unavailable", miss
    assert miss["message"].startswith(f"no cubin for '{name}' on sm_90 in the cache (key {key})")
    assert "pip install tilebc tilebc-runtime" in miss["message"]
    assert f"tilebc compile {fixture} --arch sm_90 --fatbin -o kernels.fatbin" in miss["message"]


def test_metadata_the_python_reader_refuses_is_a_miss_in_cpp(cpp_build, tmp_path):
    """Both readers trust an entry on the same terms: schema 1 and the entry's own key."""
    fixture = FIXTURES / "scalar_params" / "scalar_params-13.5.tilebc"
    root = tmp_path / "cache"
    [entry] = _python_compile(fixture, "jit", "sm_90", root).values()
    meta_path = root / "v1" / entry.key[:2] / f"{entry.key}.json"
    original = json.loads(meta_path.read_text())
    from tilebc_runtime.cache import CubinCache
    for change in ({"key": "0" * 64}, {"schema": 2}, {"cubin_size": None}, {"threads_per_cta": "128"}):
        meta_path.write_text(json.dumps({**original, **change}))
        python_hit = CubinCache(root).lookup(entry.key)
        [record] = run_tool(cpp_build, "module", str(fixture), "--arch", "sm_90", "--cache", str(root),
                            "--no-compile", env=NO_PYTHON)
        cpp_hit = record["images"][entry.metadata["fields"]["entry"]].get("source") == "cache"
        if "threads_per_cta" in change:  # C++ then asks the driver; Python recompiles
            assert python_hit is None and cpp_hit, change
        else:
            assert python_hit is None and not cpp_hit, change
    meta_path.write_text(json.dumps(original))
    assert CubinCache(root).lookup(entry.key) is not None


def _plant(path: Path, how: str) -> None:
    """Make `path` look as if another local user could have written it."""
    if how == "group-writable":
        path.chmod(path.stat().st_mode | 0o020)
    elif how == "world-writable":
        path.chmod(path.stat().st_mode | 0o002)
    elif how == "other-owner":
        os.chown(path, 4242, -1)
    elif how == "fifo":  # must be refused, not waited on
        path.unlink()
        os.mkfifo(path, 0o600)
    else:  # "symlink": the file is elsewhere, reached through a link
        target = path.with_name("planted" + path.suffix)
        path.rename(target)
        path.symlink_to(target.name)


def test_neither_host_loads_a_cubin_another_user_could_have_planted(cpp_build, tmp_path):
    """Both hosts trust an entry only when the root, v1/, the shard folder and both files are this
    user's and not writable by group or others (files: not symlinks either), with the root given
    explicitly (Options::cache_dir) or by TILEBC_CACHE_DIR. Before, C++ checked nothing below an
    explicit root and not v1/ below the default one."""
    fixture = FIXTURES / "scalar_params" / "scalar_params-13.5.tilebc"
    pristine = tmp_path / "pristine"
    [entry] = _python_compile(fixture, "jit", "sm_90", pristine).values()
    from tilebc_runtime.cache import CubinCache
    name = entry.metadata["fields"]["entry"]
    hows = ["group-writable", "world-writable", "symlink"] + (["other-owner"] if os.geteuid() == 0 else [])
    cases = [(level, how) for level in ("root", "v1", "shard", "cubin", "metadata") for how in hows
             if not (how == "symlink" and level in ("root", "v1", "shard"))]
    cases += [("cubin", "fifo"), ("metadata", "fifo")]
    for index, (level, how) in enumerate([(None, None)] + cases):
        root = tmp_path / f"case{index}"
        shutil.copytree(pristine, root, symlinks=True)
        shard = root / "v1" / entry.key[:2]
        if level is not None:
            _plant({"root": root, "v1": root / "v1", "shard": shard, "cubin": shard / f"{entry.key}.cubin",
                    "metadata": shard / f"{entry.key}.json"}[level], how)
        expect_hit = level is None
        assert (CubinCache(root).lookup(entry.key) is not None) == expect_hit, (level, how)
        for flags, env in ((["--cache", str(root)], NO_PYTHON),
                           ([], {**NO_PYTHON, "TILEBC_CACHE_DIR": str(root)})):
            [record] = run_tool(cpp_build, "module", str(fixture), "--arch", "sm_90", *flags, "--no-compile",
                                env=env)
            image = record["images"][name]
            assert (image.get("source") == "cache") == expect_hit, (level, how, flags, image)
            if level in ("root", "v1") and flags:
                assert "(not used: " in image["message"] and "by other users" in image["message"] \
                    or "owned by uid 4242" in image["message"], image


def test_cpp_keys_equal_python_keys_for_every_fixture(cpp_build, tmp_path):
    """toolchain.json written by the Python runtime lets the C++ loader compute, for every fixture,
    entry, backend and two archs, exactly the key the Python runtime uses."""
    launch = _runtime()
    from tilebc_runtime.cache import CubinCache
    backends = ["jit"] + (["tileiras"] if tool_path("tileiras") else [])
    root = tmp_path / "cache"
    cache = CubinCache(root)
    for name in backends:
        backend = launch.BACKENDS[name]()
        cache.record_toolchain(backend.name, backend.toolchain_record())
    files = fixture_files()
    ordered = sorted(backends, key=lambda b: launch.BACKENDS[b].name)
    # each file decoded and verified once (the first backend loads the path, the others the
    # module carrying its file's bytes: the keys hash the bytes; a (module, bytes) pair would
    # decode the bytes again to check they match); the arch only enters the key fields
    modules = {}
    for path in files:
        first = launch.load(path, backend=ordered[0], cache=cache)
        first.module.source_bytes = first.bytecode
        modules[path] = [first] + [launch.load(first.module, backend=backend, cache=cache)
                                   for backend in ordered[1:]]
        assert all(loaded.bytecode == first.bytecode for loaded in modules[path])  # not re-encoded
    for arch in ("sm_80", "sm_100"):
        records = run_tool(cpp_build, "keys", "--arch", arch, "--cache", str(root), *map(str, files))
        assert len(records) == len(files)
        checked = 0
        for path, record in zip(files, records):
            assert record["ok"], record
            assert record["backends"] == sorted(launch.BACKENDS[b].name for b in backends)
            expected: Dict[str, List[str]] = {}
            for module in modules[path]:
                for entry in module.entries:
                    expected.setdefault(entry, []).append(module[entry].key_fields(arch).key())
                    checked += 1
            assert record["keys"] == expected, path.name
        assert checked >= len(files) * len(backends)


def _shim(directory: Path, body: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    shim = directory / "tilebc"
    shim.write_text("#!/bin/sh\n" + body)
    shim.chmod(0o755)
    return directory


def test_cache_miss_compiles_through_tilebc_compile(cpp_build, tmp_path):
    """A miss runs `tilebc compile FILE --entry E --arch A --emit cubin -o OUT` (here a shim that
    runs tileiras) and loads its output."""
    fixture = FIXTURES / "scalar_params" / "scalar_params-13.5.tilebc"
    tileiras_cubin(str(fixture), "sm_80", str(tmp_path))  # skips when tileiras is absent
    bin_dir = _shim(tmp_path / "bin", f"""
[ "$1" = compile ] || exit 9
file=$2; shift 2
while [ $# -gt 0 ]; do case $1 in --arch) arch=$2; shift 2;; -o) out=$2; shift 2;; *) shift;; esac; done
echo "shim compiling $file for $arch" >&2
exec {tool_path('tileiras')} --gpu-name=$arch "$file" -o "$out"
""")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "TILEBC_PYTHON": "", "TILEBC_COMPILER": ""}
    [record] = run_tool(cpp_build, "module", str(fixture), "--arch", "sm_80", "--cache", str(tmp_path / "empty"),
                        env=env)
    image = next(iter(record["images"].values()))
    assert image["source"] == "compiled", image
    assert image["detail"].startswith(f"{bin_dir}/tilebc compile {fixture} --entry ") and "--arch sm_80" in image["detail"]
    assert image["size"] == tileiras_cubin(str(fixture), "sm_80", str(tmp_path)).stat().st_size

    failing = _shim(tmp_path / "bad", "echo 'tilebc: lowering failed for op foo' >&2; exit 3\n")
    [record] = run_tool(cpp_build, "module", str(fixture), "--arch", "sm_80", "--cache", str(tmp_path / "empty"),
                        env={"PATH": f"{failing}:/usr/bin:/bin", "TILEBC_PYTHON": "", "TILEBC_COMPILER": ""})
    error = next(iter(record["images"].values()))
    assert error["code"] == "the Python runtime failed to compile"
    assert "exited with status 3" in error["message"] and "lowering failed for op foo" in error["message"]


def test_cache_miss_runs_the_python_runtime_which_fills_the_cache(cpp_build, tmp_path):
    """A miss with TILEBC_PYTHON set runs `python -m tilebc_runtime.cli compile ... --emit cubin
    -o OUT` for real; the runtime stores the cubin in the loader's cache (TILEBC_CACHE_DIR is passed on),
    so the loader returns the cache entry, and the next process hits without Python."""
    _runtime()
    fixture = FIXTURES / "scalar_params" / "scalar_params-13.5.tilebc"
    root = tmp_path / "cache"
    env = _tool_env(TILEBC_PYTHON=sys.executable, TILEBC_COMPILER="", PATH="/usr/bin:/bin",
                    TILEBC_CACHE_DIR=str(tmp_path / "elsewhere"))
    [record] = run_tool(cpp_build, "module", str(fixture), "--arch", "sm_86", "--cache", str(root), env=env)
    [(name, image)] = record["images"].items()
    assert image["source"] == "cache", image
    from tilebc_runtime.cache import CubinCache
    [info] = CubinCache(root).disk_entries()
    assert image["detail"].endswith(f"{info.key}.cubin") and info.metadata["fields"]["arch"] == "sm_86"
    assert image["threads_per_cta"] == info.metadata["threads_per_cta"]
    assert not (tmp_path / "elsewhere").exists()
    [again] = run_tool(cpp_build, "module", str(fixture), "--arch", "sm_86", "--cache", str(root), "--no-compile",
                       env=NO_PYTHON)
    assert again["images"][name]["source"] == "cache"


def test_cache_miss_compiles_with_a_runtime_that_is_not_installed(cpp_build, tmp_path):
    """TILEBC_PYTHON naming an interpreter that imports tilebc and the runtime as plain folders,
    without their package metadata (a vendored copy, or a GPU machine given only the source
    tree): no entry point registers the runtime's commands with `tilebc`, and the loader's
    compile still runs."""
    _runtime()
    import sysconfig
    import venv
    # A new venv holding, through links, this venv's packages minus tilebc's and tilebc-runtime's
    # installs (their metadata and .pth files), plus the two packages' source folders.
    venv.EnvBuilder(with_pip=False, symlinks=True).create(tmp_path / "venv")
    ours = Path(sysconfig.get_paths()["purelib"])
    [theirs] = (tmp_path / "venv" / "lib").glob("python*/site-packages")
    for entry in ours.iterdir():
        if not entry.name.lower().startswith(("tilebc", "__editable__")) and entry.suffix != ".pth":
            (theirs / entry.name).symlink_to(entry)
    (theirs / "tilebc").symlink_to(ROOT / "tilebc")
    (theirs / "tilebc_runtime").symlink_to(ROOT / "runtime" / "tilebc_runtime")
    python = tmp_path / "venv" / "bin" / "python"
    env = {**os.environ, "PYTHONPATH": ""}  # (run_tool starts from os.environ)
    probe = subprocess.run([str(python), "-m", "tilebc.cli", "compile", "--help"], capture_output=True,
                           text=True, env=env, timeout=120)
    assert probe.returncode != 0 and "invalid choice: 'compile'" in probe.stderr, \
        "the stand-in interpreter still sees the runtime's entry points"
    fixture = FIXTURES / "scalar_params" / "scalar_params-13.5.tilebc"
    env.update(TILEBC_PYTHON=str(python), TILEBC_COMPILER="", PATH="/usr/bin:/bin")
    [record] = run_tool(cpp_build, "module", str(fixture), "--arch", "sm_86", "--cache",
                        str(tmp_path / "cache"), env=env)
    assert [image.get("source") for image in record["images"].values()] == ["cache"], record


# ---- AOT fatbin ----------------------------------------------------------------------------------

# (fixture, archs, extra) -> the files an identical `tilebc compile` wrote (tests edit their copies)
_AOT_OUTPUTS: Dict[tuple, Dict[str, bytes]] = {}


def _aot(tmp_path: Path, fixture: Path, archs: List[str], *extra: str) -> Path:
    """`tilebc compile FILE --arch A,B --fatbin -o kernels.fatbin [extra]`, run as a process
    (once per worker for the same arguments: a repeat gets a copy of what that run wrote)."""
    _runtime()
    out = tmp_path / "kernels.fatbin"
    request = (str(fixture), tuple(archs), extra)
    if request in _AOT_OUTPUTS:
        for name, data in _AOT_OUTPUTS[request].items():
            (tmp_path / name).write_bytes(data)
        return out
    if tool_path("fatbinary") is None:
        try:
            from cuda.bindings import nvfatbin
            nvfatbin.version()
        except Exception:
            pytest.skip("neither libnvfatbin nor NVIDIA's fatbinary is installed")
    before = set(tmp_path.iterdir())
    proc = subprocess.run([sys.executable, "-m", "tilebc.cli", "compile", str(fixture), "--arch", ",".join(archs),
                           "--fatbin", "-o", str(out), *extra], capture_output=True, text=True, timeout=600,
                          env=_tool_env(TILEBC_CACHE_DIR="off"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"{out}: "), proc.stdout
    _AOT_OUTPUTS[request] = {path.name: path.read_bytes() for path in set(tmp_path.iterdir()) - before}
    return out


@pytest.mark.parametrize("backend", ["jit", "tileiras"])
def test_aot_fatbin_contains_requested_archs_and_loads(cpp_build, tmp_path, backend):
    fixture = FIXTURES / "scalar_params" / "scalar_params-13.5.tilebc"
    if backend == "tileiras" and tool_path("tileiras") is None:
        pytest.skip("tileiras (nvidia-cuda-tileiras) is not installed")
    fatbin = _aot(tmp_path, fixture, ["sm_90", "sm_80"], "--backend", backend)
    metadata = json.loads(Path(f"{fatbin}.json").read_text())
    assert metadata["archs"] == ["sm_80", "sm_90"] and metadata["ptx"]["arch"] == "sm_90"
    [listing] = run_tool(cpp_build, "fatbin", str(fatbin))
    assert sorted((i["kind"], i["arch"]) for i in listing["images"]) == [
        ("elf", "sm_80"), ("elf", "sm_90"), ("ptx", "sm_90")]
    data = fatbin.read_bytes()
    launch = _runtime()
    for image in listing["images"]:
        payload = data[image["offset"]:image["offset"] + image["size"]]
        if image["kind"] == "ptx":  # our JIT's PTX for the newest arch, uncompressed
            text = payload.rstrip(b"\0").decode()
            assert ".target sm_90" in text and f".version {metadata['ptx']['isa']}" in text
            continue
        if backend == "tileiras":  # the cubin tileiras writes for that arch
            cubin = tileiras_cubin(str(fixture), image["arch"], str(tmp_path)).read_bytes()
        else:  # the cubin our JIT writes for that arch
            import tilebc_runtime
            cubin = tilebc_runtime.compile(fixture, None, image["arch"]).cubin
        # the image is the cubin, zero-padded to the container's alignment
        assert payload[:len(cubin)] == cubin and not payload[len(cubin):].strip(b"\0"), image
        for entry in metadata["entries"]:  # launch facts read back from that very cubin
            threads, _ = launch.cubin_launch_facts(payload, entry["name"])
            if backend == "tileiras":
                assert entry["launch"][image["arch"]]["threads_per_cta"] == threads

    expected = python_view(fixture.read_bytes())["entries"]
    for device, chosen in (("sm_90", "sm_90"), ("sm_86", "sm_80"), ("sm_80", "sm_80"), ("sm_100", "sm_90")):
        [record] = run_tool(cpp_build, "module", str(fatbin), "--arch", device, env=NO_PYTHON)
        assert record["fatbin"] and [e["name"] for e in record["entries"]] == [e["name"] for e in expected]
        assert [[p["type"] for p in e["params"]] for e in record["entries"]] == [e["params"] for e in expected]
        [(name, image)] = record["images"].items()
        [entry] = metadata["entries"]
        facts = entry["ptx_launch"] if device == "sm_100" else entry["launch"][chosen]
        assert image["source"] == "fatbin" and image["arch"] == chosen, image
        assert image["threads_per_cta"] == facts["threads_per_cta"]
        assert ("(PTX sm_90, JIT-compiled by the driver for sm_100)" in image["detail"]) == (device == "sm_100")
    [record] = run_tool(cpp_build, "module", str(fatbin), "--arch", "sm_89", env=NO_PYTHON)  # sm_80 SASS fits
    assert next(iter(record["images"].values()))["arch"] == "sm_80"


def test_aot_without_ptx_refuses_newer_devices(cpp_build, tmp_path):
    fixture = FIXTURES / "scalar_params" / "scalar_params-13.5.tilebc"
    fatbin = _aot(tmp_path, fixture, ["sm_80", "sm_90"], "--no-ptx")
    [listing] = run_tool(cpp_build, "fatbin", str(fatbin))
    assert sorted(i["kind"] for i in listing["images"]) == ["elf", "elf"]
    [record] = run_tool(cpp_build, "module", str(fatbin), "--arch", "sm_100")
    error = next(iter(record["images"].values()))
    assert error["message"].startswith("the fatbin has code for sm_80, sm_90 and no PTX, none of which runs on "
                                       "sm_100"), error


def test_aot_multi_entry_module_and_bad_arch(cpp_build, tmp_path):
    """A module with several entries: one image per arch holds them all, each entry is listed."""
    multi = next((p for p in fixture_files() if len(tilebc.load(p, verify=False, lazy_debug=False).functions) > 1), None)
    if multi is None:
        pytest.skip("no fixture has several entries")
    fatbin = _aot(tmp_path, multi, ["sm_90"])
    names = [f.name for f in tilebc.load(multi, verify=False, lazy_debug=False).functions]
    metadata = json.loads(Path(f"{fatbin}.json").read_text())
    assert [e["name"] for e in metadata["entries"]] == names
    [record] = run_tool(cpp_build, "module", str(fatbin), "--arch", "sm_90")
    assert sorted(record["images"]) == sorted(names)
    assert all(image["source"] == "fatbin" for image in record["images"].values())
    proc = subprocess.run([sys.executable, "-m", "tilebc.cli", "compile", str(multi), "--arch", "sm_90,gfx90",
                           "--fatbin"], capture_output=True, text=True, env=_tool_env())
    assert proc.returncode == 1 and "cannot parse GPU architecture 'gfx90'" in proc.stderr


def test_aot_metadata_must_match_its_fatbin(cpp_build, tmp_path):
    fixture = FIXTURES / "scalar_params" / "scalar_params-13.5.tilebc"
    fatbin = _aot(tmp_path, fixture, ["sm_90"])
    meta_path = Path(f"{fatbin}.json")
    metadata = json.loads(meta_path.read_text())
    metadata["archs"] = ["sm_90", "sm_100"]
    for entry in metadata["entries"]:
        entry["launch"]["sm_100"] = {"threads_per_cta": 128}
    meta_path.write_text(json.dumps(metadata))
    [record] = run_tool(cpp_build, "module", str(fatbin))
    assert record["message"] == "fatbin metadata lists sm_100 but the fatbin has no cubin for it", record
    metadata["archs"] = ["sm_90"]
    metadata["ptx"]["arch"] = "sm_100"
    meta_path.write_text(json.dumps(metadata))
    [record] = run_tool(cpp_build, "module", str(fatbin))
    assert record["message"] == "fatbin metadata lists PTX for sm_100 but the fatbin has no PTX image for it"
    metadata["ptx"]["arch"] = "sm_90"
    metadata["fatbin_sha256"] = "0" * 64
    meta_path.write_text(json.dumps(metadata))
    [record] = run_tool(cpp_build, "module", str(fatbin))
    assert record["message"].startswith("fatbin metadata does not describe this fatbin"), record


def test_truncated_fatbins_are_rejected(cpp_build, tmp_path):
    fatbin = _aot(tmp_path, FIXTURES / "scalar_params" / "scalar_params-13.5.tilebc", ["sm_80", "sm_90"])
    data = fatbin.read_bytes()
    lengths = sorted(set(range(0, 200)) | set(range(200, len(data), 53)))
    paths = []
    for length in lengths:
        path = tmp_path / f"cut-{length}.fatbin"
        path.write_bytes(data[:length])
        paths.append(path)
    records = run_tool(cpp_build, "fatbin", *map(str, paths))
    for length, record in zip(lengths, records):
        assert not record["ok"], f"prefix of {length} bytes accepted"
        assert 0 <= record["offset"] <= length


def test_cpp_and_python_choose_the_same_cache_root(cpp_build, tmp_path):
    """default_cache_root() in C++ and resolve_root() in Python agree: explicit dir, `~`, `off`,
    XDG, and the per-user fallback when the chosen folder is writable by others."""
    _runtime()
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)  # refused by both: group/other-writable
    (tmp_path / "tmp").mkdir()
    home = tmp_path / "home"
    cases = [{"TILEBC_CACHE_DIR": str(tmp_path / "mine")}, {"TILEBC_CACHE_DIR": "~/c"},
             {"TILEBC_CACHE_DIR": " Off "}, {"XDG_CACHE_HOME": str(tmp_path / "xdg")}, {},
             {"TILEBC_CACHE_DIR": str(shared)}]
    fixture = str(FIXTURES / "scalar_params" / "scalar_params-13.5.tilebc")
    for case in cases:
        env = {k: v for k, v in _tool_env().items() if k not in ("TILEBC_CACHE_DIR", "XDG_CACHE_HOME")}
        env.update(HOME=str(home), TMPDIR=str(tmp_path / "tmp"), **case)
        python = subprocess.run([sys.executable, "-c", "from tilebc_runtime.cache import resolve_root; "
                                 "print(resolve_root()[0] or '')"], capture_output=True, text=True, env=env,
                                check=True).stdout.strip()
        [record] = run_tool(cpp_build, "keys", "--arch", "sm_90", fixture, env=env)
        assert record["root"] == python, case
    assert python == str(tmp_path / "tmp" / f"tilebc-cache-{os.getuid()}")


def test_shared_structure_is_read_in_linear_time(cpp_build, tmp_path):
    """Type-table entries that each refer to the previous one twice (T_k = (T_k-1, T_k-1) -> ())
    describe text 2^k characters long, which this reader used to build until std::bad_alloc. It
    now keeps each entry's own part and refuses a type past max_type_text with Python's message
    and offset; a shallower one and a chain of shared call sites read as Python reads them."""
    from fuzz.shared import callsite_chain, function_type_chain
    from tilebc.ir.types import exact_type_text
    files = {"functions": function_type_chain(40), "shallow": function_type_chain(11),
             "callsites": callsite_chain(50)}
    paths = []
    for name, data in files.items():
        paths.append(tmp_path / f"{name}.tilebc")
        paths[-1].write_bytes(data)
    for strict in (False, True):
        functions, shallow, callsites = run_tool(cpp_build, "list", *(["--strict"] if strict else []),
                                                 *map(str, paths), timeout=60)
        assert not functions["ok"], functions
        assert functions["message"] == ("limit exceeded: function type text would be 77814 characters, "
                                        "more than max_type_text=65536")
        with pytest.raises(tilebc.DecodeError) as caught:
            tilebc.load(files["functions"], verify=False, strict=strict)
        assert (functions["offset"], functions["message"]) == (caught.value.offset, caught.value.message)
        # Python's str() cuts a nested function type short for messages; the text itself is exact.
        [entry] = shallow["entries"]
        assert len(entry["params"][0]["type"]) == 38902 and entry["params"][0]["kind"] == "unsupported"
        with exact_type_text():
            assert entry["params"][0]["type"] == str(tilebc.load(files["shallow"], verify=False).functions[0]
                                                     .type.inputs[0])
        assert compare_with_python(callsites, files["callsites"], strict, "callsites") == "both-accept"
    # A long type in a message is cut to 200 characters, as Python's reader cuts it.
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from test_shared_structure import wide_pointee
    finally:
        sys.path.remove(str(ROOT / "tests"))
    path = tmp_path / "wide-pointee.tilebc"
    path.write_bytes(wide_pointee())
    [record] = run_tool(cpp_build, "list", str(path))
    with pytest.raises(tilebc.DecodeError) as caught:
        tilebc.load(path.read_bytes(), verify=False)
    assert (record["offset"], record["message"]) == (caught.value.offset, caught.value.message)


def test_strings_that_are_not_utf8_list_like_python(cpp_build, tmp_path):
    """Strings are raw bytes on both sides (entry names included); the tool's JSON carries a byte
    that starts no UTF-8 sequence as U+DC00+byte, which is Python's surrogateescape."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from test_strings_bytes import SAMPLES, garbled
    finally:
        sys.path.remove(str(ROOT / "tests"))
    paths = []
    for sample in SAMPLES:
        path = tmp_path / f"{sample}.tilebc"
        path.write_bytes(garbled(sample))
        paths.append(path)
    for path, record in zip(paths, run_tool(cpp_build, "list", *map(str, paths))):
        assert record["ok"], record
        assert "\udcff\udc80" in record["entries"][0]["name"]
        assert cpp_view(record) == python_view(path.read_bytes()), path.name


# ---- dynamic shared memory -------------------------------------------------------------------------



def test_dynamic_shared_bytes_reach_cpp_from_cache_and_fatbin(cpp_build, tmp_path):
    """A 64x256 i32 transpose's JIT kernel stages 65536 bytes in dynamic shared memory (see
    runtime/tests/large_exchange.py): C++ learns the
    size (which it passes to cuLaunchKernel and cuFuncSetAttribute) from the cache metadata and
    from the AOT fatbin's metadata, without Python."""
    sys.path.insert(0, str(ROOT / "runtime" / "tests"))
    from large_exchange import EXCHANGE_BYTES, TRANSPOSE as LARGE_EXCHANGE
    root = tmp_path / "cache"
    compiled = _python_compile(LARGE_EXCHANGE, "jit", "sm_90", root)
    [(name, entry)] = compiled.items()
    assert entry.dynamic_shared_bytes == EXCHANGE_BYTES
    [hit] = run_tool(cpp_build, "module", str(LARGE_EXCHANGE), "--arch", "sm_90", "--cache", str(root),
                     "--no-compile", env=NO_PYTHON)
    image = hit["images"][name]
    assert image["source"] == "cache" and image["dynamic_shared_bytes"] == EXCHANGE_BYTES, image

    fatbin = _aot(tmp_path, LARGE_EXCHANGE, ["sm_80", "sm_90"])
    metadata = json.loads(Path(f"{fatbin}.json").read_text())
    [meta_entry] = metadata["entries"]
    assert {arch: facts["dynamic_shared_bytes"] for arch, facts in meta_entry["launch"].items()} == {
        "sm_80": EXCHANGE_BYTES, "sm_90": EXCHANGE_BYTES}
    assert meta_entry["ptx_launch"]["dynamic_shared_bytes"] == EXCHANGE_BYTES
    for device in ("sm_80", "sm_90", "sm_100"):  # sm_100: the driver JIT-compiles the PTX
        [record] = run_tool(cpp_build, "module", str(fatbin), "--arch", device, env=NO_PYTHON)
        assert record["images"][name]["dynamic_shared_bytes"] == EXCHANGE_BYTES, (device, record)
    # a kernel that fits statically still asks for nothing
    scalar = FIXTURES / "scalar_params" / "scalar_params-13.5.tilebc"
    _python_compile(scalar, "jit", "sm_90", root)
    [small] = run_tool(cpp_build, "module", str(scalar), "--arch", "sm_90", "--cache", str(root), "--no-compile",
                       env=NO_PYTHON)
    assert [(i["source"], i["dynamic_shared_bytes"]) for i in small["images"].values()] == [("cache", 0)]


def test_aot_tma_entries_load_with_their_tensor_maps(cpp_build, tmp_path):
    """compile --tma: the fatbin's launch facts carry the map records, which the loader reads (and
    launches with, tests/cpp_tests.cpp); records it could not encode from are refused by name."""
    fixture = FIXTURES / "la_gemm_aligned_tile" / "la_gemm_aligned_tile-13.5.tilebc"
    fatbin = _aot(tmp_path, fixture, ["sm_90"], "--no-ptx", "--tma")
    [record] = run_tool(cpp_build, "module", str(fatbin), "--arch", "sm_90")
    [image] = record["images"].values()
    assert (image["source"], image["tensor_map_arrays"]) == ("fatbin", [0, 5]), record
    metadata = json.loads(Path(f"{fatbin}.json").read_text())
    [entry] = metadata["entries"]
    name = entry["name"]
    cases = [
        (lambda m: m.update(swizzle=48), "swizzle must be 0, 32, 64 or 128"),
        (lambda m: m.update(box=[257, 64]), "box dims must be 1..256"),
        (lambda m: m.update(box=[64]), "'box' must list rank values"),
        (lambda m: m.update(rank=6), "rank must be 1..5"),
        (lambda m: m.update(element="f32"), "element must be f16 or bf16"),
        (lambda m: m.update(interleave="16b"), "interleave must be \"none\""),
        (lambda m: m.update(oob_fill="nan"), "oob_fill must be \"zero\""),
        (lambda m: m.update(dims=[["param", 2]]), "'dims' must list 2 values for rank 2"),
        (lambda m: m.update(dims=[["const", -1], ["param", 1]]), "each of 'dims' must be"),
        (lambda m: m.update(strides=[["const", 0]]), "each of 'strides' must be"),
        (lambda m: m.update(strides=[["size", 3]]), "each of 'strides' must be"),
        (lambda m: m.update(array=18), f"entry '{name}' tensor map {name}_tmap_0: 'array' 18 is not a pointer"),
        (lambda m: m.update(array=1), "'array' 1 is not a pointer parameter"),
        (lambda m: m.update(dims=[["param", 0], ["param", 1]]), "parameter 0 is not an integer parameter"),
        (lambda m: m.pop("param"), "has no 'param' name"),
    ]
    for change, expected in cases:
        broken = json.loads(json.dumps(metadata))
        change(broken["entries"][0]["launch"]["sm_90"]["tensor_maps"][0])
        Path(f"{fatbin}.json").write_text(json.dumps(broken))
        [record] = run_tool(cpp_build, "module", str(fatbin))
        assert expected in record.get("message", ""), (expected, record)
    # a constant zero extent is an empty array (its map goes over the zero scratch), not an error
    broken = json.loads(json.dumps(metadata))
    broken["entries"][0]["launch"]["sm_90"]["tensor_maps"][0]["dims"][1] = ["const", 0]
    Path(f"{fatbin}.json").write_text(json.dumps(broken))
    [record] = run_tool(cpp_build, "module", str(fatbin), "--arch", "sm_90")
    assert "message" not in record and record["images"], record


def test_compile_output_tensor_maps_reach_the_loader(cpp_build, tmp_path):
    """A miss compiled through `tilebc compile` (here with --tma added) takes the maps from the
    OUT.cubin.json beside the cubin."""
    _runtime()
    fixture = FIXTURES / "la_gemm_aligned_tile" / "la_gemm_aligned_tile-13.5.tilebc"
    bin_dir = _shim(tmp_path / "bin", f'exec {sys.executable} -m tilebc.cli "$@" --tma\n')
    env = {**_tool_env(), "TILEBC_COMPILER": str(bin_dir / "tilebc"), "TILEBC_CACHE_DIR": "off"}
    [record] = run_tool(cpp_build, "module", str(fixture), "--arch", "sm_90", env=env)
    [image] = record["images"].values()
    assert (image["source"], image["tensor_map_arrays"]) == ("compiled", [0, 5]), record


def test_unreadable_compile_facts_are_an_error_not_a_launch_without_maps(cpp_build, tmp_path):
    """The facts beside a compiled cubin say whether it takes tensor maps: where they exist but
    cannot be read, the loader refuses the image rather than launch a TMA kernel without them."""
    _runtime()
    fixture = FIXTURES / "la_gemm_aligned_tile" / "la_gemm_aligned_tile-13.5.tilebc"
    bin_dir = _shim(tmp_path / "bin", f'{sys.executable} -m tilebc.cli "$@" || exit $?\n'
                    'for a in "$@"; do out=$a; done\necho "{{" > "$out.json"\n')
    env = {**_tool_env(), "TILEBC_COMPILER": str(bin_dir / "tilebc"), "TILEBC_CACHE_DIR": "off"}
    [record] = run_tool(cpp_build, "module", str(fixture), "--arch", "sm_90", env=env)
    [image] = record["images"].values()
    assert "source" not in image and "launch facts are unreadable" in json.dumps(image), record


def test_default_sm90_cache_entry_hands_its_tensor_maps_to_cpp(cpp_build, tmp_path):
    """TMA is the sm_90 default: the Python runtime's cache entry for the aligned GEMM is a hit for
    the C++ loader's own keys, and its image carries the entry's tensor maps."""
    fixture = FIXTURES / "la_gemm_aligned_tile" / "la_gemm_aligned_tile-13.5.tilebc"
    root = tmp_path / "cache"
    [entry] = _python_compile(fixture, "jit", "sm_90", root).values()
    assert [m["array"] for m in entry.tensor_maps] == [0, 5]
    [record] = run_tool(cpp_build, "module", str(fixture), "--arch", "sm_90", "--cache", str(root), "--no-compile",
                        env=NO_PYTHON)
    [image] = record["images"].values()
    assert (image["source"], image["tensor_map_arrays"]) == ("cache", [0, 5]), record
