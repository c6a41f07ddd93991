"""Shared structure costs linear time and memory.

Tables and aliases let a few hundred bytes describe a tree of 2^n nodes: debug locations
`#locK = callsite(#locK-1 at #locK-1)` and function types `T_k = (T_k-1, T_k-1) -> ()`. Before
the fix, every command walked the unfolded tree (2^50 steps for the 50-level call-site file; the
40-level function type never finished). Now:

* the call-site file verifies, prints (`dis -g` names each call site once, as tileirdisasm does),
  converts and assembles back;
* the function-type file is refused by the reader with one line naming the file, the byte offset and
  the limit (`max_type_text`); a shallower one that decodes is refused by the verifier with a
  message that shows the type cut short;
* hand-built DAGs hash, compare, print and encode in linear time or raise a clear error.

Every command runs in a subprocess with a generous timeout (the exponential code exceeds it by
hours), so a regression fails instead of hanging; its peak memory must stay under 256 MiB. The
C++ reader's side is in tests/test_cpp_loader.py (test_shared_structure_*).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest

import tilebc

from fuzz.shared import (LEAF_TYPES, TILE_F32, callsite_chain, callsite_chain_text, func_entry,
                         function_type, function_type_chain, module_bytes, varint)
from tilebc.oracles import tool_path

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 60           # seconds for all commands together; the fixed code needs a few
MEMORY_LIMIT = 256 << 20
LOCATION_DEPTH = 50    # 2^50 steps for a walk that unfolds the call sites
TYPE_DEPTH = 40        # a parameter type of 2^40 tiles
SHALLOW_TYPE_DEPTH = 11  # decodes (text under max_type_text), refused by the verifier

# Runs each CLI command in-process (the code path of `tilebc …`), then the library calls, and
# prints one JSON object: {name: {rc, stdout, stderr, output}} plus the process's peak memory.
DRIVER = r"""
import contextlib, io, json, os, pickle, sys
import tilebc
from tilebc import cli

results = {}
for name, argv, output in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    text = open(output, encoding="utf-8", errors="replace").read() if output and os.path.exists(output) else ""
    results[name] = {"rc": rc, "stdout": out.getvalue()[-4000:], "stderr": err.getvalue()[-4000:],
                     "output_size": len(text), "output_tail": text[-400:]}

from tilebc.ir.builder import module_entry, new_module
from tilebc.ir.types import FunctionType, f32, tile
from tilebc.ir import location as L

api = results["api"] = {}
paths = json.loads(sys.argv[2])
data = open(paths["callsites"], "rb").read()
first, second = (tilebc.load(data, lazy_debug=False) for _ in range(2))
loc_a, loc_b = first.functions[0].body.ops[0].loc, second.functions[0].body.ops[0].loc
api["locations_equal"] = loc_a == loc_b and loc_a is not loc_b and hash(loc_a) == hash(loc_b)
api["location_repr"] = len(repr(loc_a))
api["dump_reloads"] = tilebc.load(tilebc.dump(first)).functions[0].body.ops[0].loc == loc_a
api["pickle"] = pickle.loads(pickle.dumps(loc_a)) == loc_a
try:
    tilebc.load(open(paths["functions"], "rb").read())
except tilebc.DecodeError as error:
    api["functions_load"] = str(error)

element = tile((), f32)
left = right = element
for _ in range(200):  # a hand-built DAG, deeper than any reader accepts
    left, right = FunctionType((left, left)), FunctionType((right, right))
api["types_equal"] = left == right and hash(left) == hash(right) and left != FunctionType((left,))
api["type_str"] = len(str(left))
api["type_repr"] = len(repr(left))
module = new_module(tilebc.Version(13, 5))
builder = module_entry(module, "k", [left])
builder.return_()
for what, call in (("dump", lambda: tilebc.dump(module)),
                   ("print", lambda: tilebc.print_module(module)),
                   ("verify", lambda: tilebc.verify.verify(module))):
    try:
        call()
        api[what] = "accepted"
    except tilebc.TilebcError as error:
        api[what] = f"{type(error).__name__}: {error}"[:1000]
# VmHWM is this process image's own peak; ru_maxrss would also count the (pytest) parent's size at
# fork, which the child inherits across exec.
with open("/proc/self/status") as status:
    results["maxrss"] = next(int(line.split()[1]) * 1024 for line in status
                             if line.startswith("VmHWM:"))
print(json.dumps(results))
"""


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), str(ROOT / "runtime"), os.environ.get("PYTHONPATH", "")]), "TILEBC_CACHE_DIR": "off"}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Dict[str, Path]:
    folder = tmp_path_factory.mktemp("shared")
    paths = {"callsites": folder / "callsites.tilebc", "callsites_text": folder / "callsites.mlir",
             "functions": folder / "functions.tilebc", "shallow": folder / "shallow.tilebc"}
    paths["callsites"].write_bytes(callsite_chain(LOCATION_DEPTH))
    paths["callsites_text"].write_text(callsite_chain_text(LOCATION_DEPTH))
    paths["functions"].write_bytes(function_type_chain(TYPE_DEPTH))
    paths["shallow"].write_bytes(function_type_chain(SHALLOW_TYPE_DEPTH))
    return paths


@pytest.fixture(scope="module")
def results(files, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("out")
    commands = []
    for key in ("callsites", "functions", "shallow"):
        path = str(files[key])
        commands += [
            (f"{key} verify", ["verify", path], None),
            (f"{key} dis", ["dis", path, "-o", str(out / f"{key}.mlir")], str(out / f"{key}.mlir")),
            (f"{key} dis -g", ["dis", "-g", path, "-o", str(out / f"{key}-g.mlir")],
             str(out / f"{key}-g.mlir")),
            (f"{key} info", ["info", path], None),
            (f"{key} convert", ["convert", path, "--target-version", "13.5", "-o",
                                str(out / f"{key}-13.5.tilebc")], None),
            (f"{key} translate", ["translate", "-cudatilebc-to-mlir", "-mlir-print-debuginfo", path,
                                  "-o", str(out / f"{key}-t.mlir")], str(out / f"{key}-t.mlir")),
        ]
    text = str(files["callsites_text"])
    commands += [("callsites_text asm", ["asm", text, "-o", str(out / "asm.tilebc")], None),
                 ("callsites_text verify", ["verify", text], None),
                 ("callsites_text translate", ["translate", "-mlir-to-cudatilebc", text, "-o",
                                               str(out / "t.tilebc")], None)]
    paths = {key: str(value) for key, value in files.items()}
    try:
        proc = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(commands), json.dumps(paths)],
                              capture_output=True, text=True, timeout=TIMEOUT, env=_env())
    except subprocess.TimeoutExpired:
        pytest.fail(f"the commands on shared structure took more than {TIMEOUT} s (exponential walk?)",
                    pytrace=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.splitlines()[-1])


def _one_line_error(result: dict, file: Path, message: str) -> None:
    lines = result["stderr"].strip().splitlines()
    assert result["rc"] == 1 and len(lines) == 1, result
    assert str(file) in lines[0] and "offset 0x" in lines[0] and message in lines[0], lines[0]
    assert "Traceback" not in result["stderr"]


def test_memory_stays_bounded(results):
    assert results["maxrss"] < MEMORY_LIMIT, results["maxrss"]


@pytest.mark.parametrize("command", ["verify", "dis", "dis -g", "info", "convert", "translate"])
def test_shared_call_sites_are_read_in_linear_time(results, command):
    result = results[f"callsites {command}"]
    assert result["rc"] == 0, result
    assert "Traceback" not in result["stderr"]


def test_dis_g_names_each_call_site_once(results):
    """50 aliases, each `callsite(#locN at #locN)`: the output grows with the file, not the tree."""
    result = results["callsites dis -g"]
    assert result["output_size"] < 8000, result["output_size"]
    last = LOCATION_DEPTH + 1
    assert f"#loc{last} = loc(callsite(#loc{last - 1} at #loc{last - 1}))" in result["output_tail"]


def test_dis_g_matches_tileirdisasm(files, tmp_path):
    tool = tool_path("tileirdisasm")
    if tool is None:
        pytest.skip("tileirdisasm is not installed")
    expected = subprocess.run([tool, "-g", str(files["callsites"])], capture_output=True, text=True,
                              timeout=TIMEOUT, check=True).stdout
    proc = subprocess.run([sys.executable, "-m", "tilebc", "dis", "-g", str(files["callsites"])],
                          capture_output=True, text=True, timeout=TIMEOUT, env=_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected


@pytest.mark.parametrize("command", ["asm", "verify", "translate"])
def test_call_site_aliases_assemble_in_linear_time(results, command):
    result = results[f"callsites_text {command}"]
    assert result["rc"] == 0, result


@pytest.mark.parametrize("command", ["verify", "dis", "dis -g", "info", "convert", "translate"])
def test_function_type_dag_is_refused_by_the_reader(results, files, command):
    _one_line_error(results[f"functions {command}"], files["functions"],
                    "limit exceeded: function type text would be 77814 characters, more than "
                    "max_type_text=65536")


@pytest.mark.parametrize("command", ["verify", "dis", "dis -g", "info"])
def test_nested_function_type_is_refused_by_the_verifier(results, files, command):
    result = results[f"shallow {command}"]
    assert result["rc"] == 1, result
    stderr = result["stderr"]
    assert "parameter 0 must be a scalar tile" in stderr and "(a function type of 38902 characters)" in stderr
    assert len(stderr) < 1000, len(stderr)  # the type is shown cut short


def test_library_calls_on_shared_structure(results):
    api = results["api"]
    assert api["locations_equal"] and api["dump_reloads"] and api["pickle"]
    assert api["location_repr"] < 5000
    assert api["functions_load"].startswith("<bytes>: offset 0x")
    assert "limit exceeded: function type text would be 77814 characters" in api["functions_load"]
    assert api["types_equal"]
    assert api["type_str"] < 400 and api["type_repr"] < 5000
    assert api["dump"].startswith("EncodeError: function type ((((") and "max_type_text=65536" in api["dump"]
    assert re.fullmatch(r"TilebcError: cannot print a function type of \d{60,} characters \(more "
                        r"than 65536\): it refers to the same types over and over", api["print"])
    assert api["verify"].startswith("VerificationError: ") and "parameter 0 must be" in api["verify"]


def test_the_command_line_itself(files):
    """One end-to-end run of the real command: no traceback, one line."""
    proc = subprocess.run([sys.executable, "-m", "tilebc", "verify", str(files["functions"])],
                          capture_output=True, text=True, timeout=TIMEOUT, env=_env())
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "limit exceeded: function type text" in proc.stderr


def test_shared_structure_fuzz_pass():
    """A short pass of the shared-structure fuzzer (fuzz/shared.py; the long pass is in
    fuzz/results/): every generator, every command, nothing but TilebcError, no broken
    invariant, no input anywhere near the exponential regime."""
    import random

    from fuzz.shared import GENERATORS, check
    rng = random.Random(20261125)
    for index in range(150):
        name = sorted(GENERATORS)[index % len(GENERATORS)]
        outcome = check(GENERATORS[name](rng))
        assert outcome.foreign is None, f"input {index} ({name}):\n{outcome.foreign}"
        assert outcome.problem is None, f"input {index} ({name}): {outcome.problem}"
        assert outcome.cpu_seconds < 5, f"input {index} ({name}): {outcome.cpu_seconds:.1f} s CPU"


def wide_pointee() -> bytes:
    """`tile<ptr<T>>` where T is a function type of 300 parameters: the reader refuses the
    pointee, and its message shows T cut to 200 characters."""
    types = list(LEAF_TYPES) + [function_type([TILE_F32] * 300)]
    types.append(b"\x0c" + varint(len(types) - 1))          # ptr<T> (13.3: no flags)
    types.append(b"\x0d" + varint(len(types) - 1) + b"\x00")  # tile<ptr<T>>
    types.append(function_type([len(types) - 1]))
    return module_bytes((13, 3), types, [func_entry((13, 3), len(types) - 1)])


def test_messages_show_long_types_cut_short():
    with pytest.raises(tilebc.DecodeError) as caught:
        tilebc.load(wide_pointee())
    message = caught.value.message
    assert message.startswith("pointee type must be an element type, got (tile<f32>, tile<f32>, ")
    assert message.endswith("…") and len(message) == len("pointee type must be an element type, got ") + 201
