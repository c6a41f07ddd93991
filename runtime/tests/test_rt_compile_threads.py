"""Threads per CTA: explicit request, the num_worker_warps_per_cta hint, then the tile-size rule."""
import pytest

from tilebc.text import parse_module

from tilebc_runtime.compiler import compile

KERNEL = """
entry @k(%arg0: tile<ptr<f32>>) {hints} {{
  %0 = make_token : token
  %i = iota : tile<{n}xi32>
  %v = itof %i signed : tile<{n}xi32> -> tile<{n}xf32>
  %r = reshape %arg0 : tile<ptr<f32>> -> tile<1xptr<f32>>
  %b = broadcast %r : tile<1xptr<f32>> -> tile<{n}xptr<f32>>
  %p = offset %b, %i : tile<{n}xptr<f32>>, tile<{n}xi32> -> tile<{n}xptr<f32>>
  %t = store_ptr_tko weak %p, %v token=%0 : tile<{n}xptr<f32>>, tile<{n}xf32> -> token
  return
}}
"""


def _kernel(n, hints=""):
    return parse_module(KERNEL.format(n=n, hints=hints), "k.mlir")


@pytest.mark.parametrize("n,threads", [(1024, 128), (128, 128), (64, 64), (16, 32)])
def test_size_rule(n, threads):
    assert compile(_kernel(n), arch="sm_90", emit="ptx").threads_per_cta == threads


def test_worker_warps_hint_for_the_target_wins_over_the_size_rule():
    hinted = _kernel(1024, "optimization_hints=<sm_90 = {num_worker_warps_per_cta = 8}>")
    result = compile(hinted, arch="sm_90", emit="ptx")
    assert result.threads_per_cta == 256 and ".maxntid 256, 1, 1" in result.ptx
    # a hint for another architecture does not apply
    assert compile(hinted, arch="sm_80", emit="ptx").threads_per_cta == 128
    # an explicit request beats the hint
    assert compile(hinted, arch="sm_90", emit="ptx", threads=64).threads_per_cta == 64


def test_out_of_range_hint_is_reported_and_ignored():
    hinted = _kernel(1024, "optimization_hints=<sm_90 = {num_worker_warps_per_cta = 64}>")
    result = compile(hinted, arch="sm_90", emit="ptx")
    assert result.threads_per_cta == 128 and "num_worker_warps_per_cta=64 ignored" in result.log
