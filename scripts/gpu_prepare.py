"""Prepare the GPU checks on a machine without a GPU, so that a lent GPU machine only runs them.

    .venv/bin/python scripts/gpu_prepare.py DIR [--cutile-python CHECKOUT] [--no-wheels]

DIR must lie inside the checkout and be ignored by git (e.g. `.gpu`, listed in .git/info/exclude):
the device tool carries it when asked to (`carry: [DIR]`). It receives:

- DIR/cache: tileiras's sm_90 cubins for every function of every fixture's newest file. The GPU
  machine has no tileiras (its libnvvm and ptxas do not fit the transfer); the checks find these
  cubins through TILEBC_CACHE_DIR.
- DIR/tileiras: a stand-in that prints this machine's `tileiras --version` (the cache key names
  tileiras's version) and fails for anything else, so a cubin missing from the cache is reported
  as tileiras failing instead of being built by something else.
- DIR/wheels: the runtime's dependencies that the GPU machine's image lacks (construct,
  platformdirs), for its Python 3.12 on x86-64.
- DIR/cases, with --cutile-python: NVIDIA's cutile-python kernels exported for the GPU step of
  conformance/run_cutile_python.py, with tileiras's cubins in DIR/cases/cache.
- DIR/run.sh: the checks in one command, each step time-limited, the log, the tables and the
  C++ build's log under $OUT, exit status 1 when a step failed: the C helpers built with that
  machine's Python and their tests, scripts/gpu_checks.py on our sm_90 and sm_80 code and tileiras's cubins, the two
  GPU-filling benchmarks, the cutile-python GPU step, and the C++ loader's build, tests and
  examples (a launch through a cache miss and a hit, the TMA GEMM from bytecode and from an AOT
  fatbin, each checked against its CPU reference).
  Run it from the checkout's root: `bash DIR/run.sh`.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT, ROOT / "runtime"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

# what the GPU image lacks of the runtime's dependencies (seen on its H100 and H200 machines; its
# CUDA toolkit brings nvJitLink and nvfatbin)
MISSING_ON_GPU_MACHINE = ("construct", "platformdirs")
WHEEL_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
                   "manylinux2014_x86_64", "manylinux1_x86_64")


def newest_fixture_files(root: Path = ROOT) -> list[Path]:
    """The newest bytecode file of every fixture, from fixtures/manifest.json."""
    manifest = json.loads((root / "fixtures" / "manifest.json").read_text())
    newest = []
    for name, record in sorted(manifest["fixtures"].items()):
        files = {version: entry["file"] for version, entry in record["versions"].items()
                 if "file" in entry}
        if files:
            latest = max(files, key=lambda version: tuple(map(int, version.split("."))))
            newest.append(root / "fixtures" / files[latest])
    return newest


def _compile_with_tileiras(path: Path) -> list[tuple[str, str, str]]:
    """(file, entry, 'ok' or why not) for every function of `path`, compiled for sm_90 into the
    cache TILEBC_CACHE_DIR names."""
    import tilebc
    import tilebc_runtime
    loaded = tilebc_runtime.load(str(path), backend="tileiras")  # keyed by the file's bytes, as the checks load it
    done = []
    for function in loaded.module.functions:
        try:
            loaded[function.name].compile("sm_90")
            done.append((path.name, function.name, "ok"))
        except tilebc.TilebcError as error:  # tileiras refuses some types on sm_90
            done.append((path.name, function.name, str(error).splitlines()[0][:160]))
    return done


def fill_tileiras_cache(cache: Path, workers: int = 2) -> tuple[int, list]:
    os.environ["TILEBC_CACHE_DIR"] = str(cache)
    results = []
    with ProcessPoolExecutor(workers) as pool:
        for rows in pool.map(_compile_with_tileiras, newest_fixture_files()):
            results += rows
    refused = [row for row in results if row[2] != "ok"]
    return len(results) - len(refused), refused


def write_tileiras_stand_in(path: Path) -> None:
    from tilebc_runtime.launch import tool_path
    tileiras = tool_path("tileiras")
    if tileiras is None:
        raise SystemExit("gpu_prepare: tileiras is not installed here (pip install nvidia-cuda-tileiras)")
    version = subprocess.run([tileiras, "--version"], capture_output=True, text=True,
                             check=True).stdout
    path.write_text("#!/bin/sh\n# prints the version of the tileiras that filled the cache; "
                    "compiles nothing\n"
                    f"[ \"$1\" = --version ] || exit 1\ncat <<'VERSION'\n{version.rstrip()}\n"
                    "VERSION\n")
    path.chmod(0o755)


def download_wheels(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
               "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
               "-d", str(folder)]
    for platform in WHEEL_PLATFORMS:
        command += ["--platform", platform]
    subprocess.run(command + list(MISSING_ON_GPU_MACHINE), check=True)


def run_script(folder: str) -> str:
    """The GPU machine's command: one step after another, each under `timeout` (about 6 minutes
    in all on an H100; first the C helpers, built with that machine's Python and tested there; the device tool allows 10 a command), all output teed to $OUT/log.txt, the
    tables and the C++ build's log written under $OUT. Exits 1 when any step failed."""
    d = shlex.quote(folder)
    return f"""#!/bin/bash
# Made by scripts/gpu_prepare.py. Run from the checkout's root on the GPU machine: bash {d}/run.sh
set -o pipefail
export PYTHONUNBUFFERED=1
OUT=${{OUT:-/tmp/gpu-out}}; mkdir -p "$OUT"
if compgen -G "{d}/wheels/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \\
        --target /tmp/tilebc-site {d}/wheels/*.whl || exit 3
fi
export PYTHONPATH=/tmp/tilebc-site:$PWD:$PWD/runtime
export TILEBC_TILEIRAS=$PWD/{d}/tileiras TILEBC_CACHE_DIR=$PWD/{d}/cache
failed=0
step() {{ echo "=== $1 $(date +%T)"; }}
check() {{ "$@" || {{ echo "FAILED ($?): $*"; failed=1; }}; }}
{{
step machine; timeout 20 nvidia-smi -L; timeout 20 nvidia-smi --query-gpu=driver_version --format=csv,noheader
step speedups  # the C helpers built with that machine's Python, checked, then used by every step
check timeout 120 bash -c "python3 setup.py -q build_ext --inplace && rm -rf build" \
    > "$OUT/speedups-build.log" 2>&1
check timeout 10 python3 -c "import sys; from tilebc._speedups import OpDecoder, scan_token; \
print('C helpers built for Python', sys.version.split()[0])"
check timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_speedups.py \
    tests/test_malformed.py tests/test_limits.py tests/test_shared_structure.py
step fixtures
check timeout 200 python3 scripts/gpu_checks.py --backends jit,jit@sm_80,tileiras --no-bench \\
    --arrays torch --math-inputs 131072 --budget 190
step gpu-filling
check timeout 80 python3 benchmarks/bench_gpu_scale.py --threads 32,64,128,256 --arrays torch \\
    --results "$OUT/gpu_scale.md"
check timeout 60 python3 benchmarks/bench_gpu_scale.py --gpu-only --tma --arrays torch \\
    --results "$OUT/gpu_only.md"
if [ -d {d}/cases ]; then
    step cutile-python
    check env TILEBC_CACHE_DIR=$PWD/{d}/cases/cache timeout 110 python3 conformance/run_cutile_python.py \\
        --gpu {d}/cases --rounds 3 --timed aligned --results "$OUT/cutile-python-gpu.md"
fi
step c++
export TILEBC_CACHE_DIR=/tmp/tilebc-cpp-cache TILEBC_PYTHON=python3
rm -rf "$TILEBC_CACHE_DIR"  # the first launch must be a miss, also on a machine still warm
B=/tmp/tilebc-cpp; G=fixtures/bytecode/la_gemm_aligned_tile/la_gemm_aligned_tile-13.5.tilebc
E=fixtures/bytecode/elementwise_f32/elementwise_f32-13.5.tilebc
check timeout 100 bash -c "cmake -S runtime/cpp -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release \\
    && cmake --build $B" > "$OUT/cmake.log" 2>&1 && echo built
check timeout 30 ctest --test-dir $B --output-on-failure
for pass in miss hit; do  # the loader runs `tilebc compile` on the miss
    check timeout 30 $B/launch_fixture $E float_math_Kt1_A1f32_1l0_A1f32_1l0_A1f32_1l0_I64 4096
done
for size in "512 512 512" "208 400 80" "2048 2048 2048" "128 256 0"; do
    check timeout 30 $B/gemm_fixture $G $size; done
check timeout 30 python3 -m tilebc_runtime.cli compile $G --fatbin --arch sm_80,sm_90 -o /tmp/gemm.fatbin
for size in "512 512 512" "2048 2048 2048" "208 400 80"; do
    check timeout 30 $B/gemm_fixture /tmp/gemm.fatbin $size; done
step end
exit $failed
}} 2>&1 | tee "$OUT/log.txt"
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="inside the checkout, ignored by git (e.g. .gpu)")
    parser.add_argument("--cutile-python", type=Path, metavar="CHECKOUT",
                        help="a clone of NVIDIA/cutile-python: export its cases too")
    parser.add_argument("--no-wheels", action="store_true", help="do not download the wheels")
    args = parser.parse_args(argv)
    folder = args.folder.resolve()
    try:
        relative = folder.relative_to(ROOT)
    except ValueError:
        parser.error(f"{args.folder} is not inside the checkout {ROOT}")
    existed = folder.exists()
    if not folder.parent.is_dir():
        parser.error(f"{folder.parent} does not exist")
    folder.mkdir(exist_ok=True)  # a pattern with a trailing / matches folders only
    ignored = subprocess.run(["git", "check-ignore", "-q", str(relative)], cwd=ROOT).returncode == 0
    if not ignored:
        if not existed:
            folder.rmdir()
        parser.error(f"{relative} is not ignored by git: add '/{relative}/' to .git/info/exclude")
    started = time.time()
    write_tileiras_stand_in(folder / "tileiras")
    compiled, refused = fill_tileiras_cache(folder / "cache")
    print(f"tileiras: {compiled} fixture kernels compiled for sm_90, {len(refused)} refused")
    for name, entry, why in refused:
        print(f"  {name} {entry[:60]}: {why}")
    if not args.no_wheels:
        download_wheels(folder / "wheels")
        print(f"wheels: {', '.join(sorted(p.name for p in (folder / 'wheels').glob('*.whl')))}")
    if args.cutile_python is not None:
        subprocess.run([sys.executable, str(ROOT / "conformance" / "run_cutile_python.py"),
                        str(args.cutile_python), "--export", str(folder / "cases")], check=True)
    (folder / "run.sh").write_text(run_script(str(relative)))
    print(f"ready in {time.time() - started:.0f} s: carry {relative} and run `bash {relative}/run.sh`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
