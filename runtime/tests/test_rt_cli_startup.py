"""`tilebc compile --emit cubin` in a new process: a cubin-cache hit loads neither the decoder,
the verifier, the lowering, nvJitLink (cuda bindings, cuda.pathfinder), numpy, the interpreter,
entry-point metadata, the file lock nor argument packing, and gives the bytes the miss compiled;
invalid IR still fails with the verifier's message, hit or not."""
import json
import os
import subprocess
import sys
from pathlib import Path

import tilebc
from tilebc.ir import Module, i32, scalar
from tilebc.ir.builder import new_function

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "bytecode" / "nn_softmax_rows" / "nn_softmax_rows-13.5.tilebc"
ENTRY = "softmax_rows_Kt1_A2f32_3l0_A2f32_3l0_I2_I32"
SINGLE = ROOT / "fixtures" / "bytecode" / "atomics_raw" / "atomics_raw-13.5.tilebc"  # one entry
# Packages (and their submodules) a cubin-cache hit must not load: each is start-up time.
HEAVY = ("tilebc.verify", "tilebc_runtime.compiler", "tilebc_runtime.lowering", "numpy",
         "filelock", "tilebc_runtime.args", "tilebc.binary.reader", "tilebc.ir", "tilebc.ops",
         "tilebc.interp", "tilebc.text", "cuda", "importlib.metadata", "logging", "dataclasses",
         "subprocess")


def heavy_in(modules):
    return sorted(name for name in modules
                  if any(name == heavy or name.startswith(heavy + ".") for heavy in HEAVY))

# Runs the compile command in this fresh interpreter, then lists what it imported.
PROGRAM = """import sys
from tilebc_runtime.cli import main
code = main(sys.argv[1:])
print("MODULES", " ".join(sorted(sys.modules)))
sys.exit(code)
"""


# The same through tilebc's command line, which finds `compile` through its entry point.
DISPATCHED = PROGRAM.replace("tilebc_runtime.cli", "tilebc.cli")


def compile_in_new_process(cache: Path, *argv, program=PROGRAM):
    env = {**os.environ, "TILEBC_CACHE_DIR": str(cache),
           "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'runtime'}"}
    done = subprocess.run([sys.executable, "-c", program, "compile", *map(str, argv)],
                          capture_output=True, text=True, env=env)
    modules = set()
    for line in done.stdout.splitlines():
        if line.startswith("MODULES "):
            modules = set(line.split()[1:])
    return done, modules


def test_a_cache_hit_skips_verifier_and_lowering(tmp_path):
    cache, output = tmp_path / "cache", tmp_path / "k.cubin"
    miss, miss_modules = compile_in_new_process(cache, FIXTURE, "--entry", ENTRY, "-o", output)
    assert miss.returncode == 0, miss.stderr
    assert {"tilebc.verify", "tilebc_runtime.compiler"} <= miss_modules  # a miss verifies
    compiled = output.read_bytes()
    output.unlink()
    hit, hit_modules = compile_in_new_process(cache, FIXTURE, "--entry", ENTRY, "-o", output)
    assert hit.returncode == 0, hit.stderr
    assert output.read_bytes() == compiled and compiled[:4] == b"\x7fELF"
    assert Path(f"{output}.json").is_file()
    assert heavy_in(hit_modules) == []


# The same, counting the bytecode decodes (the binary reader's `load`).
COUNTING = PROGRAM.replace("import sys\n", """import sys
from tilebc.binary import reader
decodes, plain_load = [], reader.load
reader.load = lambda *args, **kwargs: decodes.append(1) or plain_load(*args, **kwargs)
""").replace("sys.exit(code)", "print('DECODES', len(decodes))\nsys.exit(code)")


def test_a_miss_decodes_the_input_once(tmp_path):
    """The command decodes the bytes up front (bad input reads as in every tilebc command); the
    JIT then compiles that module, verified, instead of decoding the bytes again."""
    done, _ = compile_in_new_process(tmp_path / "cache", SINGLE, "-o", tmp_path / "k.cubin",
                                     program=COUNTING)
    assert done.returncode == 0, done.stderr
    assert "DECODES 1" in done.stdout.splitlines()
    assert (tmp_path / "k.cubin").read_bytes()[:4] == b"\x7fELF"


def test_a_hit_through_tilebc_without_entry_decodes_nothing(tmp_path):
    """`tilebc compile FILE` (no --entry) of a one-entry module: the entry's name comes from the
    string table, and a hit loads nothing heavy, not even through tilebc's command dispatcher."""
    cache, output = tmp_path / "cache", tmp_path / "k.cubin"
    miss, miss_modules = compile_in_new_process(cache, SINGLE, "-o", output, program=DISPATCHED)
    assert miss.returncode == 0, miss.stderr
    assert {"tilebc.verify", "tilebc_runtime.compiler", "tilebc_runtime.linker"} <= miss_modules
    compiled, facts = output.read_bytes(), Path(f"{output}.json").read_text()
    output.unlink()
    hit, hit_modules = compile_in_new_process(cache, SINGLE, "-o", output, program=DISPATCHED)
    assert hit.returncode == 0, hit.stderr
    assert output.read_bytes() == compiled and Path(f"{output}.json").read_text() == facts
    assert "tilebc_runtime.launch" in hit_modules  # the probe ran the runtime's command
    assert heavy_in(hit_modules) == []


def test_a_miss_of_a_kernel_without_array_math_skips_numpy(tmp_path):
    """numpy (about a third of a cold compile) is imported only by lowerings that fold or lay out
    arrays: the atomics kernel compiles without it, and gives the same cubin as with it loaded."""
    cache, output = tmp_path / "cache", tmp_path / "k.cubin"
    miss, modules = compile_in_new_process(cache, SINGLE, "-o", output, program=DISPATCHED)
    assert miss.returncode == 0, miss.stderr
    assert "tilebc_runtime.compiler" in modules and "tilebc_runtime.linker" in modules
    assert "numpy" not in modules
    preloaded = DISPATCHED.replace("import sys\n", "import sys\nimport numpy\n", 1)
    again, modules = compile_in_new_process(tmp_path / "other", SINGLE, "-o", tmp_path / "n.cubin",
                                            program=preloaded)
    assert again.returncode == 0 and "numpy" in modules, again.stderr
    assert (tmp_path / "n.cubin").read_bytes() == output.read_bytes()


def test_a_miss_of_a_view_kernel_in_the_default_layout_skips_numpy(tmp_path):
    """Loads and stores through views in the default (cyclic) layout index threads without numpy
    (lowerer._unravel), so early_return compiles without importing it."""
    views = ROOT / "fixtures" / "bytecode" / "early_return" / "early_return-13.5.tilebc"
    miss, modules = compile_in_new_process(tmp_path / "cache", views, "-o", tmp_path / "k.cubin",
                                           program=DISPATCHED)
    assert miss.returncode == 0, miss.stderr
    assert "tilebc_runtime.lowering.memory" in modules and "numpy" not in modules
    assert "dataclasses" not in modules  # value classes are tilebc.record's
    assert "pathlib" not in modules  # the cache's paths are strings (cache._as_path)
    assert "tilebc_runtime.lowering.f64math" not in modules  # f64 math only
    assert (tmp_path / "k.cubin").read_bytes()[:4] == b"\x7fELF"


def test_a_stale_memo_is_recomputed_not_trusted(tmp_path):
    """The memo gives nvJitLink's version and the lowering hash only while their fingerprints hold:
    with fingerprints that no longer match (and wrong values), the next run loads nvJitLink and
    takes the hash again (from the sources, or from its record beside them), computes the true
    key (a hit) and records the true values."""
    cache, output = tmp_path / "cache", tmp_path / "k.cubin"
    assert compile_in_new_process(cache, SINGLE, "-o", output)[0].returncode == 0
    memo_path = cache / "v1" / "memo.json"
    memo = json.loads(memo_path.read_text())
    (linker,) = [name for name in memo if name.startswith("nvjitlink ")]
    (sources,) = [name for name in memo if name.startswith("lowering_hash ")]
    true_version, true_hash = memo[linker]["value"]["version"], memo[sources]["value"]
    memo[linker]["fingerprint"] = memo[sources]["fingerprint"] = "stale"
    memo[linker]["value"]["version"], memo[sources]["value"] = [12, 0], "0" * 64
    memo_path.write_text(json.dumps(memo))
    compiled = output.read_bytes()
    output.unlink()
    again, modules = compile_in_new_process(cache, SINGLE, "-o", output, "-v")
    assert again.returncode == 0, again.stderr
    assert output.read_bytes() == compiled  # the same key: a hit
    assert "tilebc_runtime.compiler" not in modules and "tilebc_runtime.linker" in modules
    memo = json.loads(memo_path.read_text())
    assert memo[linker]["value"]["version"] == true_version
    assert memo[sources]["value"] == true_hash != "0" * 64


def test_a_damaged_memo_is_ignored(tmp_path):
    """Records of the wrong shape (the cache never breaks a compile) are recomputed."""
    cache, output = tmp_path / "cache", tmp_path / "k.cubin"
    assert compile_in_new_process(cache, SINGLE, "-o", output)[0].returncode == 0
    memo_path = cache / "v1" / "memo.json"
    memo = json.loads(memo_path.read_text())
    for name in memo:
        memo[name]["value"] = {"path": None, "version": "x"} if "nvjitlink" in name else 7
    memo_path.write_text(json.dumps(memo))
    again, modules = compile_in_new_process(cache, SINGLE, "-o", output)
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr
    assert "tilebc_runtime.compiler" not in modules  # still a hit
    memo_path.write_text("{not json")
    assert compile_in_new_process(cache, SINGLE, "-o", output)[0].returncode == 0


def _invalid_module() -> bytes:
    """Decodes, but `addf` of i32 operands breaks a verifier rule."""
    module = Module(version=tilebc.Version(13, 5))
    builder = new_function(module, "k", [scalar(i32), scalar(i32)])
    builder.op("addf", list(builder.block.args), [scalar(i32)])
    builder.op("return", [[]])
    return tilebc.dump(module)


def test_invalid_ir_is_refused_by_the_verifier_every_time(tmp_path):
    source = tmp_path / "bad.tilebc"
    source.write_bytes(_invalid_module())
    for _ in range(2):  # the second run cannot hit: nothing was stored
        done, _ = compile_in_new_process(tmp_path / "cache", source, "-o", tmp_path / "k.cubin")
        assert done.returncode == 1
        assert done.stderr.startswith(f"tilebc compile: error: {source}: offset 0x"), done.stderr
        assert "addf: 'cuda_tile.addf' op operand #0 must be tile of f16" in done.stderr
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "k.cubin").exists()


def test_emit_ptx_needs_no_nvjitlink_once_its_version_is_recorded(tmp_path):
    """PTX names the ISA version the installed nvJitLink accepts; with that version recorded in
    the cache's memo (by an earlier compile), `--emit ptx` declares the same version without
    loading the library."""
    import tilebc_runtime
    cache = tmp_path / "cache"
    assert compile_in_new_process(cache, SINGLE, "-o", tmp_path / "k.cubin")[0].returncode == 0
    done, modules = compile_in_new_process(cache, SINGLE, "--emit", "ptx", "-o", tmp_path / "k.ptx")
    assert done.returncode == 0, done.stderr
    assert "tilebc_runtime.compiler" in modules  # the probe lowered the kernel
    assert [name for name in modules if name == "cuda" or name.startswith("cuda.")] == []
    ptx = (tmp_path / "k.ptx").read_text()
    assert f".version {tilebc_runtime.ptx_isa_for('sm_90')}\n" in ptx


# Looks `SINGLE` up in a cache as `tilebc compile` does first, without compiling.
LOOKUP = """import sys
from tilebc_runtime import launch
from tilebc_runtime.cache import CubinCache
data = open(sys.argv[2], "rb").read()
found = launch.cached_entry(launch.JitBackend(), CubinCache(sys.argv[1]), data,
                            "atomics_raw_Kt1_A1i32_1l0_I32", "sm_90", {})
print("FOUND", found is not None, "HASHED", launch.lowering_sources_hash.cache_info().currsize)
"""


def test_a_cache_without_the_memo_is_not_looked_in_before_decoding(tmp_path):
    """The first compile in a cache neither hashes the sources nor waits for nvJitLink before it
    decodes (nothing of this toolchain can be there yet; nvJitLink opens meanwhile); once a compile
    has left the memo, the early lookup needs neither and hits."""
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'runtime'}"}

    def lookup():
        done = subprocess.run([sys.executable, "-c", LOOKUP, str(cache), str(SINGLE)],
                              capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert lookup() == ["FOUND", "False", "HASHED", "0"]
    done, _ = compile_in_new_process(cache, SINGLE, "-o", tmp_path / "k.cubin")
    assert done.returncode == 0, done.stderr
    memo = json.loads((cache / "v1" / "memo.json").read_text())
    assert any(name.startswith("lowering_hash ") for name in memo)
    assert any(name.startswith("nvjitlink ") for name in memo)
    assert lookup() == ["FOUND", "True", "HASHED", "0"]
