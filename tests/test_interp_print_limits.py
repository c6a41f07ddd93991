"""print_tko widths and precisions are bounded (tilebc/interp/ops/debug.py, PRINT_MAX_WIDTH):
huge ones once raised a bare ValueError (`%99999999999999999999d`) or built a gigabyte of padding
per element (`%999999999d`)."""
import io
import subprocess
import sys
import time

import numpy as np
import pytest

import tilebc
from tilebc.interp import ExecutionError
from tilebc.interp.ops.debug import PRINT_MAX_WIDTH, format_print
from tilebc.text import parse_module
from tilebc.verify import WARNING, diagnostics


def _module(fmt: str, shape: str = ""):
    tile = f"tile<{shape}i32>"
    return parse_module("entry @k(%arg0: tile<i32>) {\n  %0 = make_token : token\n"
                        + (f"  %v = broadcast %arg0 : tile<i32> -> {tile}\n" if shape else "")
                        + f'  %1 = print_tko "{fmt}", {"%v" if shape else "%arg0"} token=%0 : '
                        f"{tile} -> token\n  return\n}}\n")


@pytest.mark.parametrize("fmt", ["%99999999999999999999d", "%999999999d", "%.999999999f",
                                 "%.99999999999999999999x", f"%{PRINT_MAX_WIDTH + 1}d"])
def test_huge_width_or_precision_is_an_execution_error(fmt):
    stream = io.StringIO()
    start = time.perf_counter()
    with pytest.raises(ExecutionError, match="limit of 4096") as caught:
        tilebc.run(_module(fmt), "k", (1,), 7, print_stream=stream)
    assert time.perf_counter() - start < 1
    assert "in print_tko" in str(caught.value)
    assert stream.getvalue() == ""


def test_width_at_the_limit_prints():
    stream = io.StringIO()
    tilebc.run(_module(f"%{PRINT_MAX_WIDTH}d|"), "k", (1,), 7, print_stream=stream)
    assert stream.getvalue() == " " * (PRINT_MAX_WIDTH - 1) + "7|"


def test_padding_of_a_whole_print_is_bounded():
    """A width within the limit on a large tile still pads every element: the sum is bounded."""
    stream = io.StringIO()
    with pytest.raises(ExecutionError, match="64 MiB"):
        tilebc.run(_module("%4000d", "32768x"), "k", (1,), 7, print_stream=stream)
    with pytest.raises(ValueError, match="limit of 4096"):
        format_print("%5000d", [np.array(1)])


def test_the_verifier_warns_about_widths_the_interpreter_refuses():
    found = [d for d in diagnostics(_module("%999999999d")) if d.rule == "print.format"]
    assert [d.severity for d in found] == [WARNING], found
    assert "4096" in found[0].message
    assert not [d for d in diagnostics(_module("%12.4d")) if d.rule == "print.format"]


def test_cli_run_reports_one_line(tmp_path):
    source = tmp_path / "k.tilebc"
    source.write_bytes(tilebc.dump(_module("%99999999999999999999d")))
    done = subprocess.run([sys.executable, "-m", "tilebc", "run", str(source), "--entry", "k",
                           "--arg", "3"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"tilebc run: error: {source}")
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_verifier_and_interpreter_share_the_bound():
    from tilebc.verify.opchecks import PRINT_MAX_WIDTH as verifier_bound
    assert verifier_bound == PRINT_MAX_WIDTH


def test_leading_zeros_in_a_precision_do_not_count():
    assert format_print("%.00005d", [np.array(7)]) == "00007"
