"""The interpreter's speed paths (benchmarks/bench_interp.py): float32 math within the device's ulp
bound, pooled result buffers, a store fused with the element-wise op it stores, and their
guards. Kernels are exported by cuTile here (as the benchmark does); every result is checked
against numpy and, where the paths could differ, against the one-block-at-a-time run."""
import io

import numpy as np
import pytest

from tilebc.interp import arena, fastmath, run
from tilebc.interp.fusion import fusible_ops

ct = pytest.importorskip("cuda.tile")
compilation = pytest.importorskip("cuda.tile.compilation")


def _array(dtype, ndim):
    return compilation.ArrayConstraint(
        dtype, ndim, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
        may_alias_internally=False, shape_constant=(None,) * ndim, stride_constant=(None,) * ndim,
        shape_divisible_by=1, base_addr_divisible_by=1)


def export(kernel, params):
    import tilebc
    buffer = io.BytesIO()
    signature = compilation.KernelSignature(params, compilation.CallingConvention.cutile_python_v1())
    compilation.export_kernel(kernel, [signature], buffer, output_format="tileir_bytecode",
                              bytecode_version="13.4", gpu_code=None)
    return tilebc.load(buffer.getvalue())


@ct.kernel
def vadd(a, b, c, T: ct.Constant[int]):
    i = ct.bid(0)
    ct.store(c, index=(i,), tile=ct.load(a, index=(i,), shape=(T,)) +
             ct.load(b, index=(i,), shape=(T,)))


@ct.kernel
def swap_then_add(a, b, c, T: ct.Constant[int]):
    """Overwrites a before storing a + b: the fused add must read a's old contents."""
    i = ct.bid(0)
    ta = ct.load(a, index=(i,), shape=(T,))
    tb = ct.load(b, index=(i,), shape=(T,))
    ct.store(a, index=(i,), tile=tb)
    ct.store(c, index=(i,), tile=ta + tb)


@ct.kernel
def add_in_place(a, b, T: ct.Constant[int]):
    i = ct.bid(0)
    ct.store(a, index=(i,), tile=ct.load(a, index=(i,), shape=(T,)) *
             ct.load(b, index=(i,), shape=(T,)))


@ct.kernel
def exp_rows(x, y, TM: ct.Constant[int], N: ct.Constant[int]):
    i = ct.bid(0)
    ct.store(y, index=(i, 0), tile=ct.exp(ct.load(x, index=(i, 0), shape=(TM, N))))


F32 = ct.float32
TILE = 4096  # 16 KiB per block tile: whole-grid values are pooled (arena.MIN_BYTES)


def _vector(rng, n):
    return rng.standard_normal(n).astype(np.float32)


# ---------------------------------------------------------------------------------- fast math


@pytest.mark.parametrize("name", sorted(fastmath.FUNCTIONS))
def test_float32_math_within_device_bound(name):
    """Over ~1M float32 inputs of every magnitude (every 4099th bit pattern) plus the
    self-check's sample: if the self-check let numpy's float32 kernel in, it is within the
    device's bound everywhere we look."""
    if not fastmath.float32_ok(name):
        pytest.skip(f"numpy's float32 {name} is over the device bound here: the exact path runs")
    bits = np.arange(0, 1 << 32, 4099, dtype=np.uint64).astype(np.uint32).view(np.float32)
    inputs = np.concatenate([bits, fastmath.sample()])
    assert fastmath.max_ulps(name, inputs) <= fastmath.DEVICE_ULPS[name]


def test_self_check_refuses_an_inaccurate_float32_kernel(monkeypatch):
    def three_ulps_off(x, out=None):  # the float64 result, rounded, moved up 3 steps
        value = np.exp(x.astype(np.float64)).astype(np.float32)
        for _ in range(3):
            value = np.nextafter(value, np.float32(np.inf))
        return value
    monkeypatch.setitem(fastmath.FUNCTIONS, "exp", three_ulps_off)
    monkeypatch.setattr(fastmath, "_verdicts", {})
    assert fastmath.max_ulps("exp", fastmath.sample()) == 3
    assert not fastmath.float32_ok("exp")
    assert fastmath.float32_ok("tanh")


def test_ulp_distance_counts_float_steps():
    one = np.float32(1)
    values = np.array([one, np.nextafter(one, np.float32(2)), -0.0, 0.0,
                       np.float32(np.inf)], np.float32)
    want = np.array([one, one, 0.0, np.nextafter(np.float32(0), np.float32(1)),
                     np.finfo(np.float32).max], np.float32)
    assert fastmath.ulp_distance(values, want).tolist() == [0, 1, 0, 1, 1]


def test_exp_kernel_fast_and_exact_paths():
    """A cuTile exp kernel: the default path is within 2 ulps of float64-rounded exp, the
    exact_math path equal to it; batched and one-block runs agree on each path."""
    module = export(exp_rows, [_array(F32, 2)] * 2 + [64, 256])
    x = np.random.default_rng(3).uniform(-80, 80, (512, 256)).astype(np.float32)
    want = np.exp(x.astype(np.float64)).astype(np.float32)
    for exact in (False, True):
        outputs = []
        for batch in ("auto", False):
            y = np.zeros_like(x)
            report = run(module, None, (8,), x, y, exact_math=exact, batch=batch)
            assert report.batched == (batch == "auto")
            outputs.append(y)
        np.testing.assert_array_equal(outputs[0], outputs[1])
        if exact:
            np.testing.assert_array_equal(outputs[0], want)
        else:
            bound = fastmath.DEVICE_ULPS["exp"] if fastmath.float32_ok("exp") else 0
            assert fastmath.ulp_distance(outputs[0], want).max() <= bound


# ------------------------------------------------------------------------------------ arena


def test_arena_reuses_buffers_and_caps_idle_memory(monkeypatch):
    monkeypatch.setattr(arena, "_free", type(arena._free)())
    monkeypatch.setattr(arena, "_idle_bytes", 0)
    scratch = arena.Scratch()
    assert scratch.output((4,), np.float32) is None  # small results: numpy allocates
    first = scratch.output((256, 256), np.float32)
    scratch.release()
    again = arena.Scratch()
    assert again.output((256, 256), np.float32) is first
    assert again.output((256, 256), np.float32) is not first  # taken: never handed out twice
    monkeypatch.setattr(arena, "LIMIT_BYTES", first.nbytes)
    again.release()  # two idle buffers over a one-buffer limit: the older goes
    assert arena._idle_bytes == first.nbytes


def test_pooled_results_do_not_leak_between_launches():
    module = export(vadd, [_array(F32, 1)] * 3 + [TILE])
    rng = np.random.default_rng(1)
    n = TILE * 16
    a, b, c, d, e, f = (_vector(rng, n) for _ in range(6))
    run(module, None, (16,), a, b, c)
    kept = c.copy()
    np.testing.assert_array_equal(c, a + b)
    run(module, None, (16,), d, e, f)  # reuses the first launch's buffers
    np.testing.assert_array_equal(f, d + e)
    np.testing.assert_array_equal(c, kept)


# ------------------------------------------------------------------------------- store fusion


def test_vadd_store_is_fused():
    module = export(vadd, [_array(F32, 1)] * 3 + [TILE])
    function = module.functions[0]
    fused = [op.name for op in function.body.ops if id(op) in fusible_ops(function)]
    assert fused == ["addf"]


@pytest.mark.parametrize("kernel, arrays", [(swap_then_add, 3), (add_in_place, 2)])
def test_fused_store_reads_operands_before_any_store(kernel, arrays):
    """Batched (the add fused into its store) and one block at a time give numpy's result."""
    module = export(kernel, [_array(F32, 1)] * arrays + [TILE])
    rng = np.random.default_rng(2)
    n = TILE * 8
    inputs = [_vector(rng, n) for _ in range(arrays)]
    results = []
    for batch in ("auto", False):
        data = [x.copy() for x in inputs]
        report = run(module, None, (8,), *data, batch=batch)
        assert report.batched == (batch == "auto"), report.reason
        results.append(data)
    a, b = inputs[:2]
    expected = [b, b, a + b] if kernel is swap_then_add else [a * b, b]
    for data in results:
        for got, want in zip(data, expected):
            np.testing.assert_array_equal(got, want)


def test_cli_exact_math_flag(tmp_path):
    """`tilebc run --exact-math` gives the float64-rounded exp bit for bit."""
    from tilebc.cli import main
    import tilebc
    module = export(exp_rows, [_array(F32, 2)] * 2 + [64, 256])
    path = tmp_path / "exp.tilebc"
    path.write_bytes(tilebc.dump(module, "13.4"))
    x = np.random.default_rng(4).uniform(-20, 20, (128, 256)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(path), "--grid", "2", "--arg", str(tmp_path / "x.npy"),
                 "--arg", "zeros:float32:128x256", "--exact-math",
                 "--out", str(tmp_path / "out.npz")]) == 0
    y = np.load(tmp_path / "out.npz")["arg1"]
    np.testing.assert_array_equal(y, np.exp(x.astype(np.float64)).astype(np.float32))
