"""What NVIDIA's tools accept and refuse, pinned where tilebc used to disagree.

Each case is Tile IR text; the expected verdict is what tileirdisasm/tileiras 13.5 say about the
bytes our writer makes of it (checked again here when NVIDIA's tools are installed).
"""
import numpy as np
import pytest

import tilebc
from tilebc import oracles
from tilebc.interp import Pointer
from tilebc.ops.spec import Effects
from tilebc.ops.table import BODY_OPS
from tilebc.text import parse_module
from tilebc.verify import diagnostics, verify

from conftest import needs_disasm


def _combiner_kernel(body: str, op: str = "reduce") -> str:
    result = "tile<4xf32>" if op == "reduce" else "tile<8x4xf32>"
    reverse = " reverse=false" if op == "scan" else ""
    return f"""entry @k(%p: tile<ptr<f32>>, %n: tile<i32>) {{
  %c = constant <f32: 1.0> : tile<8x4xf32>
  %vec = constant <f32: 1.0> : tile<4xf32>
  %r = {op} %c dim=0{reverse} identities=[0.0 : f32] : tile<8x4xf32> -> {result}
  (%lhs: tile<f32>, %rhs: tile<f32>) {{
    {body}
    %y = addf %lhs, %rhs : tile<f32>
    yield %y : tile<f32>
  }}
  return
}}
"""


WITH_EFFECTS = {
    "print_tko": ('%t = print_tko "step" -> token', "print_tko"),
    "assume": ("%a = assume div_by<4>, %n : tile<i32>", "assume"),
    "assert": ('%b = cmpf equal ordered %lhs, %rhs : tile<f32> -> tile<i1>\n'
               '    assert %b, "m" : tile<i1>', "assert"),
    "load": ("%l, %lt = load_ptr_tko weak %p : tile<ptr<f32>> -> tile<f32>, token", "load_ptr_tko"),
    "for": ("%i1 = constant <i32: 1> : tile<i32>\n"
            "    for %i in (%i1 to %i1, step %i1) : tile<i32> {\n    }", "for"),
    "if holding print_tko": ('%b = cmpf equal ordered %lhs, %rhs : tile<f32> -> tile<i1>\n'
                             '    if %b {\n      %t = print_tko "x" -> token\n    }', "if"),
}
EFFECT_FREE = {
    "divi": "%d = divi %n, %n signed : tile<i32>",
    "if yielding": ('%b = cmpf equal ordered %lhs, %rhs : tile<f32> -> tile<i1>\n'
                    '    %q = if %b -> (tile<f32>) {\n      yield %lhs : tile<f32>\n'
                    '    } else {\n      yield %rhs : tile<f32>\n    }'),
    "nested reduce": ("%z = reduce %vec dim=0 identities=[0.0 : f32] : tile<4xf32> -> tile<f32>\n"
                      "    (%a: tile<f32>, %b: tile<f32>) {\n      %w = addf %a, %b : tile<f32>\n"
                      "      yield %w : tile<f32>\n    }"),
    "make_tensor_view": ("%v = make_tensor_view %p, shape = [8], strides = [1] "
                         ": tensor_view<8xf32, strides=[1]>"),
    "make_token": "%t = make_token : token",
}


def _errors(text: str):
    module = parse_module(text, "k.mlir")
    return module, [d for d in diagnostics(module, warnings=False)]


@pytest.mark.parametrize("op", ["reduce", "scan"])
@pytest.mark.parametrize("name", WITH_EFFECTS)
def test_combiner_body_refuses_ops_with_memory_effects(name, op):
    body, culprit = WITH_EFFECTS[name]
    module, errors = _errors(_combiner_kernel(body, op))
    assert [e.rule for e in errors] == ["region.effects"], errors
    assert errors[0].op == culprit
    # Reported at the body's own op (for an op with regions, not at what is inside it).
    lines = body.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split("=")[-1].split()[0] == culprit)
    assert errors[0].line == 6 + at
    assert f"only memory-effect-free operations are allowed inside 'cuda_tile.{op}'" in errors[0].message
    with pytest.raises(tilebc.VerificationError):
        verify(module)


@pytest.mark.parametrize("name", EFFECT_FREE)
def test_combiner_body_takes_effect_free_ops(name):
    _, errors = _errors(_combiner_kernel(EFFECT_FREE[name]))
    assert errors == []


@needs_disasm
@pytest.mark.parametrize("name", list(WITH_EFFECTS) + list(EFFECT_FREE))
def test_combiner_body_verdicts_match_tileirdisasm(name):
    body = WITH_EFFECTS[name][0] if name in WITH_EFFECTS else EFFECT_FREE[name]
    module = parse_module(_combiner_kernel(body), "k.mlir")
    listing = oracles.tileirdisasm(tilebc.dump(module, "13.5"))
    if name in WITH_EFFECTS:
        assert not listing.ok and "only memory-effect-free operations" in listing.stderr
    else:
        assert listing.ok, listing.stderr


def test_every_body_op_declares_its_effects_consistently():
    """Ops with regions take their effects from them; terminators other than yield declare none
    in NVIDIA's dialect, so count as having effects."""
    for spec in BODY_OPS:
        if spec.regions:
            assert spec.effects is Effects.RECURSIVE, spec.mnemonic
        elif spec.terminator:
            assert spec.effects is (Effects.NONE if spec.mnemonic == "yield" else
                                    Effects.UNDECLARED), spec.mnemonic
        elif spec.mnemonic.endswith("_tko") and spec.mnemonic != "print_tko":
            assert spec.effects in (Effects.MEMORY, Effects.ATOMIC), spec.mnemonic
            assert (spec.effects is Effects.ATOMIC) == spec.mnemonic.startswith("atomic_")


LOOP_DIFFERENT_RESULT = """entry @k(%out: tile<ptr<f32>>) {
  %init = constant <i32: 0> : tile<i32>
  %r = loop iter_values(%v = %init) : tile<i32> -> tile<f32> {
    %three = constant <i32: 3> : tile<i32>
    %c = cmpi less_than %v, %three, signed : tile<i32> -> tile<i1>
    if %c {
      %one = constant <i32: 1> : tile<i32>
      %n = addi %v, %one : tile<i32>
      continue %n : tile<i32>
    }
    %f = itof %v signed : tile<i32> -> tile<f32>
    break %f : tile<f32>
  }
  %t = store_ptr_tko weak %out, %r : tile<ptr<f32>>, tile<f32> -> token
  return
}
"""
LOOP_NO_RESULT = """entry @k() {
  %init = constant <i32: 0> : tile<i32>
  loop iter_values(%v = %init) : tile<i32> {
    %c = constant <i1: true> : tile<i1>
    if %c {
      continue %v : tile<i32>
    }
    break
  }
  return
}
"""
LOOP_VIEW_RESULT = """entry @k(%p: tile<ptr<f32>>) {
  %r = loop : tensor_view<8xf32, strides=[1]> {
    %v = make_tensor_view %p, shape = [8], strides = [1] : tensor_view<8xf32, strides=[1]>
    break %v : tensor_view<8xf32, strides=[1]>
  }
  return
}
"""


def test_loop_results_need_not_match_its_iter_values():
    """NVIDIA's Ops.td shows a loop carrying i32 and returning f32; both tools accept it."""
    for text in (LOOP_DIFFERENT_RESULT, LOOP_NO_RESULT):
        _, errors = _errors(text)
        assert errors == []
    module = tilebc.parse_module(LOOP_DIFFERENT_RESULT)
    out = np.zeros(1, np.float32)
    tilebc.run(module, "k", (1,), Pointer(out))
    assert out[0] == 3.0


def test_loop_still_refuses_view_results():
    _, errors = _errors(LOOP_VIEW_RESULT)
    assert [e.rule for e in errors] == ["type.view_value"]
    assert "result 0 is a view" in errors[0].message


@needs_disasm
def test_loop_verdicts_match_tileirdisasm():
    for text, ok in ((LOOP_DIFFERENT_RESULT, True), (LOOP_NO_RESULT, True),
                     (LOOP_VIEW_RESULT, False)):
        listing = oracles.tileirdisasm(tilebc.dump(parse_module(text), "13.5"))
        assert listing.ok is ok, listing.stderr


REDUCE_BAD_DIM = """entry @k(%out: tile<ptr<f32>>) {
  %c = constant <f32: 1.0> : tile<8xf32>
  %r = reduce %c dim=1 identities=[0.0 : f32] : tile<8xf32> -> tile<f32>
  (%a: tile<f32>, %b: tile<f32>) {
    %s = addf %a, %b : tile<f32>
    yield %s : tile<f32>
  }
  %t = store_ptr_tko weak %out, %r : tile<ptr<f32>>, tile<f32> -> token
  return
}
"""


def test_run_verifies_paths_and_bytes_first(tmp_path):
    """tilebc.run on bytes or a path verifies as tilebc.load does, instead of failing inside
    numpy on invalid IR."""
    data = tilebc.dump(parse_module(REDUCE_BAD_DIM, "r.mlir"))
    path = tmp_path / "bad.tilebc"
    path.write_bytes(data)
    out = np.zeros(1, np.float32)
    for source, name in ((data, "<bytes>"), (path, str(path)), (str(path), str(path))):
        with pytest.raises(tilebc.VerificationError) as caught:
            tilebc.run(source, "k", (1,), Pointer(out))
        assert caught.value.rule == "attr.dim"
        assert str(caught.value).startswith(f"{name}: offset 0x"), str(caught.value)
    with pytest.raises(Exception) as caught:  # trusted input: no verifier, the interpreter fails
        tilebc.run(data, "k", (1,), Pointer(out), verify=False)
    assert not isinstance(caught.value, tilebc.VerificationError)
