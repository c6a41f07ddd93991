"""The GPU-free parts of scripts/gpu_checks.py and benchmarks/bench_gpu.py: job lists, the two-pass
replay of the interpreter fixture cases (with launchers that stand in for the GPU), argument
flattening, result comparison, the ISA-suite plumbing, output capture, report rendering, and the
no-GPU exit."""
import argparse
import ctypes
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_gpu  # noqa: E402
import gpu_checks  # noqa: E402
from tilebc.interp import run as interp_run  # noqa: E402
from tilebc_runtime.args import LaunchError  # noqa: E402

FIXTURES_ROOT = ROOT / "fixtures" / "bytecode"
MANIFEST_NAMES = sorted(gpu_checks.fixture_cases().MANIFEST["fixtures"])


# -- the no-GPU path ----------------------------------------------------------------------------

def test_without_a_gpu_the_script_says_so_and_exits_zero():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "runtime")]))
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_checks.py")], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "no CUDA GPU" in done.stdout


def test_gpu_presence_reports_a_reason_when_there_is_none(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    code = ("import sys; sys.path.insert(0, %r); import gpu_checks; "
            "print(gpu_checks.gpu_presence())" % str(ROOT / "scripts"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                              [str(ROOT), str(ROOT / "runtime")])))
    count, reason = eval(done.stdout.strip())  # a (int, str) tuple literal
    assert count == 0 and reason


# -- jobs ---------------------------------------------------------------------------------------

def test_fixture_jobs_cover_every_fixture_at_its_newest_version():
    jobs = gpu_checks.fixture_jobs("latest")
    assert [name for name, _ in jobs] == MANIFEST_NAMES
    manifest = gpu_checks.fixture_cases().MANIFEST["fixtures"]
    for name, version in jobs:
        versions = [v for v, rec in manifest[name]["versions"].items() if "file" in rec]
        assert version == max(versions, key=lambda v: tuple(map(int, v.split("."))))


def test_fixture_jobs_all_versions_and_one_version_and_only():
    every = gpu_checks.fixture_jobs("all")
    assert len(every) > len(MANIFEST_NAMES) and len(set(every)) == len(every)
    assert all(v == "13.3" for _, v in gpu_checks.fixture_jobs("13.3"))
    assert gpu_checks.fixture_jobs("latest", ["printf", "bitcast"]) == [("bitcast", "13.5"),
                                                                         ("printf", "13.5")]


# -- comparison -----------------------------------------------------------------------------------

def test_compare_arrays_exact_tolerant_and_nan():
    a = np.array([1.0, np.nan, 3.0], np.float32)
    assert gpu_checks.compare_arrays(a, a.copy()) is None
    b = a.copy()
    b[2] = np.nextafter(b[2], np.float32(4))
    assert gpu_checks.compare_arrays(b, a) is not None  # one ulp off: exact comparison fails
    assert gpu_checks.compare_arrays(b, a, rtol=1e-6) is None
    assert gpu_checks.compare_arrays(a[:2], a) is not None  # shapes differ


# -- the fixture cases, replayed ------------------------------------------------------------------

def test_every_fixture_case_replays_identically_through_a_second_launcher():
    """With the interpreter itself as the 'device', every case must come out ok: the second pass
    sees the same inputs and makes the same checks as the first."""
    not_ok = []
    for name, version in gpu_checks.fixture_jobs("latest"):
        result = gpu_checks.run_fixture_case(name, version, {"same": interp_run})
        if result.interp.status != "ok" or result.backends["same"].status != "ok":
            not_ok.append((name, result.interp, result.backends["same"]))
    assert not not_ok


def _add_one_to_outputs(module, entry, grid, *args, **options):
    interp_run(module, entry, grid, *args, **options)
    for arg in args:
        if isinstance(arg, np.ndarray) and arg.dtype.kind in "fiu":
            arg.ravel()[-1] += 1


@pytest.mark.parametrize("name", ["elementwise_f32", "int_math_i32", "matmul_f16", "reduce_rows"])
def test_a_wrong_result_is_a_mismatch_naming_the_check(name):
    result = gpu_checks.run_fixture_case(name, "13.5", {"bad": _add_one_to_outputs})
    outcome = result.backends["bad"]
    assert result.interp.status == "ok"
    assert outcome.status == "mismatch" and "vs interpreter" in outcome.detail
    assert outcome.failed


def test_schedule_dependent_differences_are_reported_not_failed():
    result = gpu_checks.run_fixture_case("atomics_int", "13.5", {"bad": _add_one_to_outputs})
    assert result.backends["bad"].status == "order"
    assert "lane order" in result.backends["bad"].detail and not result.backends["bad"].failed


def _swap_first_two_rows_of_a_segment(module, entry, grid, ids, cursor, sorted_tok, x, x_sorted):
    """dm_moe_permute as a GPU may leave it: two tokens of expert 0 took each other's slots."""
    interp_run(module, entry, grid, ids, cursor, sorted_tok, x, x_sorted)
    sorted_tok[[0, 1]] = sorted_tok[[1, 0]]
    x_sorted[[0, 1]] = x_sorted[[1, 0]]


def test_an_atomic_order_difference_is_order_but_a_broken_case_check_is_a_mismatch():
    reordered = gpu_checks.run_fixture_case("dm_moe_permute", "13.5",
                                            {"gpu": _swap_first_two_rows_of_a_segment})
    assert reordered.interp.status == "ok"
    assert reordered.backends["gpu"].status == "order", reordered.backends["gpu"]
    # its case's own checks hold in any order, so breaking one of them is not excused as order
    broken = gpu_checks.run_fixture_case("dm_moe_permute", "13.5", {"bad": _add_one_to_outputs})
    assert broken.backends["bad"].status == "mismatch" and broken.backends["bad"].failed
    # a failing assert of such a case (stream compaction's untouched tail) likewise
    broken = gpu_checks.run_fixture_case("sci_stream_compact", "13.5",
                                         {"bad": _write_past_the_kept_elements})
    assert broken.backends["bad"].status == "mismatch", broken.backends["bad"]
    assert broken.backends["bad"].detail.startswith("case assertion")


def _write_past_the_kept_elements(module, entry, grid, x, out, out_idx, count, threshold):
    interp_run(module, entry, grid, x, out, out_idx, count, threshold)
    out[-1] = 0.0  # past the kept elements, which must stay as the case filled them


def test_launcher_errors_are_errors_and_tileiras_refusals_are_refusals():
    def broken(*args, **options):
        raise LaunchError("driver says no")

    def refused(*args, **options):
        raise LaunchError("tileiras failed for entry 'k' (sm_90), exit 1: unsupported")
    result = gpu_checks.run_fixture_case("bitcast", "13.5", {"jit": broken, "tileiras": refused})
    assert result.backends["jit"].status == "error" and "driver says no" in result.backends["jit"].detail
    assert result.backends["tileiras"].status == "refused"
    assert not result.backends["tileiras"].failed


def test_expected_kernel_errors_must_still_happen_on_the_device():
    # assert's case expects a KernelAssertionError on bad input: a device that carries on fails it
    def ignores_asserts(module, entry, grid, *args, **options):
        return None
    result = gpu_checks.run_fixture_case("assert", "13.5", {"lenient": ignores_asserts})
    assert result.backends["lenient"].status == "mismatch"
    assert "DID NOT RAISE" in result.backends["lenient"].detail


def test_launches_after_an_expected_device_assert_are_partial_not_failed():
    """ft_checked_scale launches again after its expected assert; on a GPU the trap ends the
    context (seen on an H100), so the device pass reports how far it matched."""
    from tilebc.interp import KernelAssertionError
    state = {"trapped": ""}

    def traps_like_a_gpu(module, entry, grid, *args, **options):
        if state["trapped"]:
            raise gpu_checks.ContextSpent(state["trapped"])
        if int(args[2]) <= 0:
            state["trapped"] = "tile assert: n must be positive"
            raise KernelAssertionError("cudaErrorLaunchFailure; device said: n must be positive")
        return interp_run(module, entry, grid, *args, **options)
    result = gpu_checks.run_fixture_case("ft_checked_scale", "13.5", {"gpu": traps_like_a_gpu})
    outcome = result.backends["gpu"]
    assert outcome.status == "partial" and "n must be positive" in outcome.detail
    assert not outcome.failed

    def wrong_then_traps(module, entry, grid, *args, **options):
        traps_like_a_gpu(module, entry, grid, *args, **options)
        args[1][:] += 1  # y: a wrong result before the assert is still a mismatch
    state["trapped"] = ""
    result = gpu_checks.run_fixture_case("ft_checked_scale", "13.5", {"gpu": wrong_then_traps})
    assert result.backends["gpu"].status == "mismatch"


def test_fixture_result_round_trips_through_json():
    result = gpu_checks.FixtureResult("x", "13.5", gpu_checks.Outcome("ok"),
                                      {"jit": gpu_checks.Outcome("ok", micros=2.5)})
    again = gpu_checks.FixtureResult.from_json(result.to_json())
    assert again == result


# -- launch arguments -----------------------------------------------------------------------------

class FakeDevice:
    def __init__(self):
        self.uploads = []

    def upload(self, host):
        self.uploads.append(host)
        return ("dev", len(self.uploads))

    def pointer(self, array):
        return 0x1000 * array[1]


def test_flatten_tuples_lists_and_aliases():
    device = FakeDevice()
    a = np.zeros((4, 6), np.float32)
    b = np.zeros(8, np.float32)
    c = np.zeros((2, 3), np.float32)[:, ::2]  # strided: its table row carries its strides
    flat, pairs = gpu_checks.flatten_launch_args(
        [(a, b), (np.float32(3), 2.0), [b, b], a, 7, c],
        device.upload, device.pointer)
    assert flat[0] == ("dev", 1) and flat[1] == ("dev", 2)
    assert flat[2] == np.float32(3) and flat[3] == 2.0
    assert flat[4] == [("dev", 2), ("dev", 2)]  # a list stays a list: Kernel.launch builds its table
    assert flat[5] == ("dev", 1)  # a again: uploaded once, so aliasing stays aliasing
    assert flat[6] == 7
    assert len(device.uploads) == 3
    assert [host is x for (_, host), x in zip(pairs, (a, b, c))] == [True, True, True]
    assert len(pairs) == 3  # the table is not copied back


def test_flatten_rejects_lists_of_non_arrays():
    device = FakeDevice()
    with pytest.raises(TypeError, match="arrays only"):
        gpu_checks.flatten_launch_args([[1, 2]], device.upload, device.pointer)


# -- the PTX instruction suite --------------------------------------------------------------------

def test_isa_cases_are_the_marked_hardware_cases_with_stable_ids():
    ids = [case_id for case_id, _, _ in gpu_checks.isa_cases()]
    assert len(ids) == len(set(ids)) >= 30
    assert "test_fma_rounds_once" in ids and "test_shfl_and_vote" in ids
    assert "test_add_rounding_modes[rz-1.0-positive1]" not in ids  # float32 values keep their text
    assert any(i.startswith("test_add_rounding_modes[rz-") for i in ids)
    # emulator diagnostics (races, refusals, its own fault messages) stay emulator-only
    assert not any(i.startswith(("test_shared_", "test_unimplemented", "test_syntax",
                                 "test_out_of_bounds", "test_vprintf_and_trap")) for i in ids)
    again = [case_id for case_id, _, _ in gpu_checks.isa_cases()]
    assert again == ids


def test_isa_cases_pass_with_the_emulator_and_fail_with_a_wrong_executor():
    suite = gpu_checks.isa_suite()
    cases = gpu_checks.isa_cases()
    outcomes = {c: gpu_checks.run_isa_case(c, t, k, suite.emulate_ptx) for c, t, k in cases}
    assert all(o.status == "ok" for o in outcomes.values()), outcomes
    assert suite.EXECUTE is suite.emulate_ptx  # restored

    def wrong(ptx, entry, grid, threads, arrays, print_stream=None):
        suite.emulate_ptx(ptx, entry, grid, threads, arrays, print_stream)
        arrays[-1].view(np.uint8)[0] ^= 0x10
    case_id, test, kwargs = next(c for c in cases if c[0] == "test_integer_conversions")
    outcome = gpu_checks.run_isa_case(case_id, test, kwargs, wrong)
    assert outcome.status == "mismatch" and "assertion" in outcome.detail


def test_retarget_ptx():
    ptx = ".version 7.8\n.target sm_90\n.address_size 64\n"
    assert gpu_checks.retarget_ptx(ptx, "sm_90") == ptx
    try:
        moved = gpu_checks.retarget_ptx(ptx, "sm_100")
    except Exception as error:  # no nvJitLink to say which PTX ISA sm_100 needs
        pytest.skip(f"nvJitLink unavailable: {error}")
    assert ".target sm_100\n" in moved and ".version 7.8" not in moved


# -- output capture -------------------------------------------------------------------------------

def test_captured_output_takes_fd_and_c_stdio_writes():
    libc = ctypes.CDLL(None)
    with gpu_checks.captured_output() as output:
        os.write(1, b"fd one\n")
        libc.printf(b"from C %d\n", ctypes.c_int(42))  # buffered in C stdio until the flush
        os.write(2, b"fd two\n")
    assert output["stdout"] == "fd one\nfrom C 42\n"
    assert output["stderr"] == "fd two\n"


# -- reports --------------------------------------------------------------------------------------

def _results():
    O = gpu_checks.Outcome
    return [gpu_checks.FixtureResult("bitcast", "13.5", O("ok"),
                                     {"jit": O("ok", micros=4.0), "tileiras": O("ok", micros=5.0)}),
            gpu_checks.FixtureResult("cast_fp4", "13.5", O("ok"),
                                     {"jit": O("mismatch", "check 1 vs interpreter: off"),
                                      "tileiras": O("refused", "tileiras failed")})]


def test_summary_lists_every_fixture_and_counts_failures():
    isa = [("test_a", gpu_checks.Outcome("ok")), ("test_b", gpu_checks.Outcome("error", "boom"))]
    text = gpu_checks.render_summary(_results(), isa, ["jit", "tileiras"], ["isa/test_c"])
    assert "| bitcast | 13.5 | ok | ok | ok |" in text
    assert "| cast_fp4 | 13.5 | ok | mismatch | refused |" in text
    assert "1/2 ok" in text and "| test_b | error | boom |" in text
    assert "2 fixture runs, 2 ISA cases, 0 f64 functions, 2 failing, 1 not run" in text
    assert gpu_checks.count_failures(_results(), isa) == 2


def test_markdown_has_times_ratio_and_bandwidth():
    bandwidth = {"rows": [{"copy": "device to device", "bytes": 256 << 20, "ms": 0.2,
                           "gb_per_s": 2684.4}]}
    text = bench_gpu.render_markdown(_results(), ["jit", "tileiras"], bandwidth, device="H200",
                                     command="scripts/gpu_checks.py", elapsed=12)
    assert "| bitcast | 13.5 | 4.0 | 5.0 | 0.80x |" in text
    assert "| cast_fp4 | 13.5 |  |  |  |" in text
    assert "Geometric mean jit / tileiras over 1 kernels: 0.80x" in text
    assert "| device to device | 256 | 0.200 | 2684.4 |" in text
    missing = bench_gpu.render_markdown([], ["jit"], {"rows": [], "error": "worker died"},
                                        device="H200", command="x", elapsed=1)
    assert "Not measured: worker died." in missing


def test_crash_records_name_the_job():
    jobs = [{"kind": "fixture", "name": "assert", "version": "13.5", "backend": "jit"},
            {"kind": "isa", "name": "t"}]
    record = gpu_checks._crash_record("fixture/assert/13.5/jit", jobs, "worker died", {})
    assert record["key"] == "fixture/assert/13.5/jit"
    assert gpu_checks.FixtureResult.from_json(record).backends["jit"].status == "error"
    assert gpu_checks._crash_record("isa/t", jobs, "gone", {})["outcome"]["status"] == "error"


def test_per_backend_job_records_merge_into_one_row_per_fixture():
    O = gpu_checks.Outcome
    jit = gpu_checks.FixtureResult("assert", "13.5", O("ok"), {"jit": O("ok", micros=1.0)})
    crashed = gpu_checks._crash_record(
        "fixture/assert/13.5/tileiras",
        [{"kind": "fixture", "name": "assert", "version": "13.5", "backend": "tileiras"}],
        "worker died", {})
    other = gpu_checks.FixtureResult("bitcast", "13.5", O("mismatch", "interp off"), {"jit": O("ok")})
    merged = gpu_checks.merge_fixture_records([crashed, jit.to_json(), other.to_json()])
    assert [(r.name, r.interp.status, sorted(r.backends)) for r in merged] == [
        ("assert", "ok", ["jit", "tileiras"]), ("bitcast", "mismatch", ["jit"])]
    assert merged[0].backends["tileiras"].status == "error"
    assert gpu_checks.job_key({"kind": "fixture", "name": "a", "version": "13.5",
                               "backend": "jit"}) == "fixture/a/13.5/jit"


FAKE_WORKER = '''
import json, os, sys
out, request = sys.argv[2], json.loads(sys.stdin.read())
for job in request["jobs"]:
    key = "/".join(str(job[k]) for k in ("kind", "name"))
    with open(out, "a") as handle:
        handle.write(json.dumps({"start": key}) + "\\n")
    if job["name"] == "faulty":
        sys.stderr.write("device exploded")
        os._exit(7)
    with open(out, "a") as handle:
        handle.write(json.dumps({"kind": "isa", "name": job["name"], "key": key,
                                 "outcome": {"status": "ok", "detail": "", "micros": None}}) + "\\n")
'''


def test_workers_are_replaced_after_a_crash_and_the_crash_is_reported(tmp_path, monkeypatch):
    fake = tmp_path / "fake_worker.py"
    fake.write_text(FAKE_WORKER)
    monkeypatch.setattr(gpu_checks, "__file__", str(fake))
    jobs = [{"kind": "isa", "name": n} for n in ("a", "faulty", "b")]
    records, unrun = gpu_checks.run_workers(jobs, {}, deadline=gpu_checks.time.monotonic() + 60,
                                            log=lambda line: None)
    assert unrun == []
    by_name = {r["name"]: r["outcome"] for r in records}
    assert by_name["a"]["status"] == "ok" and by_name["b"]["status"] == "ok"
    assert by_name["faulty"]["status"] == "error"
    assert "exit 7" in by_name["faulty"]["detail"] and "device exploded" in by_name["faulty"]["detail"]


def test_scale_bench_reads_the_models_large_rows_and_renders_measurements():
    import bench_gpu_scale
    estimates = bench_gpu_scale.model_estimates()
    import bench_model
    assert set(estimates) == set(bench_model._large_cases())  # every GPU-filling launch has a model row
    label, ours, theirs = estimates["matmul_f16"][0]
    assert label.startswith("matmul_f16") and ours > 0 and theirs > 0
    row = {"entry": "k", "grid": (4, 2), "agreement": "identical", "jit": 5.0, "tileiras": 10.0,
           "jit_spread": (4.9, 5.1), "tileiras_spread": (9.9, 10.2)}
    text = bench_gpu_scale.render([(label, row, ours, theirs)], [("x", "ArgumentError: no")],
                                  "a GPU", "cmd", 1.0)
    assert "| 4×2 | 5.0 (4.9–5.1) | 10.0 (9.9–10.2) | 0.50 |" in text
    assert f"{ours / theirs:.2f}" in text and "- x: ArgumentError: no" in text



def test_scale_bench_variants_load_with_their_options_and_render_in_their_own_table():
    import bench_gpu_scale
    assert bench_gpu_scale.variant_load("tileiras") == ("tileiras", {})
    assert bench_gpu_scale.variant_load("jit+wgmma") == ("jit", {"wgmma": True})
    assert bench_gpu_scale.variant_load("jit-wgmma") == ("jit", {"wgmma": False})
    assert bench_gpu_scale.variant_load("jit@64") == ("jit", {"threads": 64})
    assert bench_gpu_scale.variant_load("jit-tma") == ("jit", {"tma": False})
    with pytest.raises(ValueError):
        bench_gpu_scale.variant_load("jit+nothing")
    row = {"entry": "k", "grid": (512,), "agreement": "identical", "jit": 53.0, "tileiras": 40.0,
           "jit@64": 80.0, "jit_spread": (52.9, 54.2), "tileiras_spread": (39.6, 40.3),
           "jit@64_spread": (79.0, 81.0), "jit@64_agreement": "max abs 0.001, max rel 0.002"}
    text = bench_gpu_scale.render([("gemm", row, None, None)], [], "a GPU", "cmd", 1.0,
                                  ("jit", "tileiras", "jit@64"))
    assert "| gemm | 512 | 53.0 (52.9–54.2) | 40.0 (39.6–40.3) | 1.32 |" in text
    assert "| gemm | 512 | 80.0 (79.0–81.0) | 2.00 | max abs 0.001, max rel 0.002 |" in text


def test_scale_bench_without_a_gpu_says_so_and_exits_zero():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "runtime")]))
    before = (ROOT / "benchmarks" / "results" / "gpu_scale.md").read_text()
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_gpu_scale.py")],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "no CUDA GPU" in done.stdout
    assert (ROOT / "benchmarks" / "results" / "gpu_scale.md").read_text() == before  # not overwritten


# -- our code for an older arch on the GPU at hand ---------------------------------------------

def test_jit_lowered_for_sm80_links_for_the_gpu_at_hand(tmp_path, monkeypatch):
    """`--backends jit@sm_80`: the aligned GEMM, which takes TMA and wgmma when lowered for sm_90,
    comes out as sm_80 code (no tensor maps) linked for sm_90, cached apart from the JIT's own."""
    import tilebc_runtime
    from tilebc_runtime import launch
    from tilebc_runtime.cache import CubinCache
    path = ROOT / "fixtures" / "bytecode" / "la_gemm_aligned_tile" / "la_gemm_aligned_tile-13.5.tilebc"
    monkeypatch.setattr(launch, "BACKENDS", dict(launch.BACKENDS))  # registered for this test only
    backend = gpu_checks.lowered_as_backend("jit@sm_80")
    assert gpu_checks.lowered_as_backend("jit") == "jit"
    older = tilebc_runtime.load(path, backend=backend, cache=CubinCache(tmp_path))
    native = tilebc_runtime.load(path, backend="jit", cache=CubinCache(tmp_path))
    entry = next(iter(older.entries))
    assert older[entry].key_fields("sm_90").key() != native[entry].key_fields("sm_90").key()
    assert older.backend.identity().endswith("+lowered-as-sm_80")
    compiled = older[entry].compile("sm_90")
    assert compiled.cubin[:4] == b"\x7fELF" and compiled.threads == 128
    assert not compiled.tensor_maps and native[entry].compile("sm_90").tensor_maps
    gpu_checks.lowered_as_backend("jit@sm_90")
    with pytest.raises(LaunchError, match="sm_90 code cannot run on sm_80"):
        launch.BACKENDS["jit@sm_90"]().compile(path.read_bytes(), entry, "sm_80", {})


# -- the f64 math sweep -------------------------------------------------------------------------

class _EmulatorLauncher:
    """Stands in for GpuLauncher: runs the kernel on the PTX emulator, then applies `damage`."""
    damage = staticmethod(lambda out: None)

    def __init__(self, backend, arrays):
        assert backend == "jit"

    def __call__(self, module, entry, grid, *args):
        from tilebc_runtime import sim
        sim.run(module, entry, grid, *args)
        self.damage(args[-1])


def test_math_sweep_bounds_the_error_and_compares_bits(monkeypatch):
    assert "tan" in gpu_checks.math_cases() and len(gpu_checks.math_cases()) == 12
    assert gpu_checks.math_cases(["tanh", "x"]) == ["tanh"]
    monkeypatch.setattr(gpu_checks, "GpuLauncher", _EmulatorLauncher)
    outcome = gpu_checks.run_math_case("tanh", None, 64, compared=128)
    assert outcome.status == "ok", outcome.detail
    assert "(CUDA's bound 1)" in outcome.detail and "GPU bits equal" in outcome.detail

    def one_ulp_off(out):  # the sweep must see both: the error and the differing bits
        out[5] = np.nextafter(np.nextafter(out[5], np.inf), np.inf)
    monkeypatch.setattr(_EmulatorLauncher, "damage", staticmethod(one_ulp_off))
    outcome = gpu_checks.run_math_case("tanh", None, 64, compared=128)
    assert outcome.status == "mismatch" and "DIFFER" in outcome.detail
    assert float(re.search(r"max ([\d.]+) ulp", outcome.detail).group(1)) > 1.5


def test_scale_bench_variant_flag_names_jit_compile_options(capsys):
    import bench_gpu_scale
    assert bench_gpu_scale.parse_variant("cpasync:tma=false") == ("cpasync", {"tma": False})
    assert bench_gpu_scale.parse_variant(" big : threads=256, tma=false ,wgmma=True") == \
        ("big", {"threads": 256, "tma": False, "wgmma": True})
    for bad in ("cpasync", "cpasync:", ":tma=false", "x:tma", "jit:tma=false",
                "jit-tma:tma=false", "jit@64:threads=64"):
        with pytest.raises(ValueError):
            bench_gpu_scale.parse_variant(bad)
    custom = {"cpasync": {"tma": False}}
    assert bench_gpu_scale.variant_load("cpasync", custom) == ("jit", {"tma": False})
    assert bench_gpu_scale.variant_load("jit-tma", custom) == ("jit", {"tma": False})
    with pytest.raises(ValueError):
        bench_gpu_scale.variant_load("cpasync")
    # the columns: built-in variants first, then --variant's in the order given
    parser = argparse.Namespace(wgmma=False, tma=True, threads="64",
                                variant=["cpasync:tma=false", "mma:wgmma=false"])
    assert bench_gpu_scale.variant_columns(parser) == (
        ("jit", "tileiras", "jit-tma", "jit@64", "cpasync", "mma"),
        {"cpasync": {"tma": False}, "mma": {"wgmma": False}})
    parser.variant.append("cpasync:threads=64")
    with pytest.raises(ValueError, match="given twice"):
        bench_gpu_scale.variant_columns(parser)
    with pytest.raises(SystemExit):  # refused before looking for a GPU
        bench_gpu_scale.main(["--variant", "nothing"])
    assert "expected LABEL:option=value" in capsys.readouterr().err
    row = {"entry": "k", "grid": (512,), "agreement": "identical", "jit": 53.0, "tileiras": 40.0,
           "empty": 48.0, "jit_spread": (52.9, 54.2), "tileiras_spread": (39.6, 40.3),
           "empty_spread": (47.0, 49.0), "empty_agreement": "identical"}
    text = bench_gpu_scale.render([("gemm", row, None, None)], [], "a GPU", "cmd", 1.0,
                                  ("jit", "tileiras", "empty"))
    assert "| empty µs | empty / tileiras | empty agreement |" in text
    assert "| gemm | 512 | 48.0 (47.0–49.0) | 1.20 | identical |" in text


# -- scripts/gpu_prepare.py --------------------------------------------------------------------

import gpu_prepare  # noqa: E402


def test_gpu_prepare_lists_the_newest_file_of_every_fixture():
    files = gpu_prepare.newest_fixture_files()
    assert len(files) == len({f.parent for f in files}) == len(MANIFEST_NAMES)
    for path in files:
        versions = [p.stem.rsplit("-", 1)[1] for p in path.parent.glob("*.tilebc")]
        newest = max(versions, key=lambda v: tuple(map(int, v.split("."))))
        assert path.stem.endswith(f"-{newest}")


def test_gpu_prepare_run_script_is_valid_bash_naming_every_step(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text(gpu_prepare.run_script(".gpu"))
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    text = script.read_text()
    for step in ("build_ext --inplace", "tests/test_speedups.py",
                 "scripts/gpu_checks.py --backends jit,jit@sm_80,tileiras",
                 "bench_gpu_scale.py --threads", "bench_gpu_scale.py --gpu-only --tma",
                 "run_cutile_python.py", "ctest", "launch_fixture", "gemm_fixture", "--fatbin"):
        assert step in text, step
    assert "TILEBC_TILEIRAS=$PWD/.gpu/tileiras" in text and "$OUT/log.txt" in text


def test_gpu_prepare_tileiras_stand_in_prints_the_version_and_compiles_nothing(tmp_path):
    from tilebc_runtime.launch import _tileiras_version, tool_path
    if tool_path("tileiras") is None:
        pytest.skip("tileiras is not installed")
    stand_in = tmp_path / "tileiras"
    gpu_prepare.write_tileiras_stand_in(stand_in)
    assert _tileiras_version(str(stand_in)) == _tileiras_version(tool_path("tileiras"))
    done = subprocess.run([str(stand_in), "--gpu-name=sm_90", "-o", "x.cubin", "x.tilebc"],
                          capture_output=True, text=True)
    assert done.returncode != 0


def test_gpu_prepare_without_wheels_writes_a_run_script_that_installs_none(monkeypatch, capsys):
    """main's whole path with the slow parts stood in for: an ignored folder of the checkout gets
    the tileiras stand-in and run.sh; without --no-wheels it would also get the wheels."""
    from tilebc_runtime.launch import tool_path
    if tool_path("tileiras") is None:
        pytest.skip("tileiras is not installed")
    if subprocess.run(["git", "rev-parse"], cwd=ROOT, capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    build = ROOT / "build"  # ignored by the checkout's .gitignore
    made_build = not build.exists()
    folder = build / f"gpu-prepare-test-{os.getpid()}"
    build.mkdir(exist_ok=True)
    filled = []
    monkeypatch.setattr(gpu_prepare, "fill_tileiras_cache",
                        lambda cache, workers=2: filled.append(cache) or (0, []))
    monkeypatch.setattr(gpu_prepare, "download_wheels", lambda folder: pytest.fail("downloaded"))
    try:
        assert gpu_prepare.main([str(folder), "--no-wheels"]) == 0
        assert filled == [folder / "cache"]
        assert "ready in" in capsys.readouterr().out
        assert (folder / "tileiras").stat().st_mode & 0o111
        done = subprocess.run(["bash", "-n", str(folder / "run.sh")], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        relative = folder.relative_to(ROOT)
        script = (folder / "run.sh").read_text()
        assert f'compgen -G "{relative}/wheels/*.whl"' in script  # installs only wheels it has
        assert f"TILEBC_TILEIRAS=$PWD/{relative}/tileiras" in script
    finally:
        import shutil
        shutil.rmtree(build if made_build else folder, ignore_errors=True)


def test_gpu_prepare_refuses_a_folder_outside_the_checkout_or_not_ignored(tmp_path, capsys):
    with pytest.raises(SystemExit):
        gpu_prepare.main([str(tmp_path / "out")])
    assert "not inside the checkout" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        gpu_prepare.main([str(ROOT / "runtime")])
    assert "is not ignored by git" in capsys.readouterr().err


# -- scripts/gpu_verified.py -------------------------------------------------------------------

import gpu_verified  # noqa: E402


def test_gpu_verified_digest_ignores_comments_and_sees_code():
    ptx = "// a note\n.version 8.0\n  // kernel.py:3:1\n  add.s32 %r1, %r2, %r3;\n"
    same = ".version 8.0\n  // kernel.py:9:9\n  add.s32 %r1, %r2, %r3;\n// other\n"
    assert gpu_verified.ptx_digest(ptx) == gpu_verified.ptx_digest(same)
    assert gpu_verified.ptx_digest(ptx) != gpu_verified.ptx_digest(ptx.replace("%r3", "%r4"))
    assert gpu_verified.changed({"a": "1", "b": "2"}, {"a": "1", "b": "3", "c": "4"}) == ["b", "c"]


def test_gpu_verified_digests_every_entry_for_both_archs_the_same_way_twice():
    import tilebc
    path = FIXTURES_ROOT / "nn_attention_gqa" / "nn_attention_gqa-13.5.tilebc"
    first = gpu_verified._digests_of(path)
    entries = [f.name for f in tilebc.load(path).functions]
    assert sorted(first) == sorted(f"nn_attention_gqa:{e}@{a}" for e in entries
                                   for a in gpu_verified.ARCHS)
    assert all(len(d) == 16 and not d.startswith("refused") for d in first.values())
    assert gpu_verified._digests_of(path) == first


def test_gpu_verified_record_names_what_checked_it_and_only_fixture_kernels():
    import json
    record = json.loads(gpu_verified.RECORD.read_text())
    assert record["checked"] and record["date"] and record["archs"] == list(gpu_verified.ARCHS)
    fixtures = {p.name for p in FIXTURES_ROOT.iterdir() if p.is_dir()}
    for key, digest in record["digests"].items():
        name, rest = key.split(":", 1)
        assert name in fixtures and rest.rsplit("@", 1)[1] in gpu_verified.ARCHS, key
        assert len(digest) == 16 or digest.startswith("refused: "), key
