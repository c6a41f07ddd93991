"""`tilebc compile --emit cubin` in a new process: a cubin-cache hit loads neither the verifier,
the lowering, numpy, the file lock nor argument packing, and gives the bytes the miss compiled;
invalid IR still fails with the verifier's message, hit or not."""
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
HEAVY = ("tilebc.verify", "tilebc_runtime.compiler", "tilebc_runtime.lowering.lowerer", "numpy",
         "filelock", "tilebc_runtime.args")

# Runs the compile command in this fresh interpreter, then lists what it imported.
PROGRAM = """import sys
from tilebc_runtime.cli import main
code = main(sys.argv[1:])
print("MODULES", " ".join(sorted(sys.modules)))
sys.exit(code)
"""


def compile_in_new_process(cache: Path, *argv):
    env = {**os.environ, "TILEBC_CACHE_DIR": str(cache),
           "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'runtime'}"}
    done = subprocess.run([sys.executable, "-c", PROGRAM, "compile", *map(str, argv)],
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
    assert [name for name in HEAVY if name in hit_modules] == []


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
