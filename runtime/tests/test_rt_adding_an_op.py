"""The worked example of docs/adding-an-op.md: a new element-wise op takes a table entry, one
interpreter function, one lowering function and a kernel that uses it, and nothing else.

`copysignf` (magnitude of lhs, sign of rhs) is added to the op table for these tests only (the
fixture puts it in the table's lookups and takes it out again; it is never shipped). The same
checklist the coverage tests run passes with exactly those four pieces and names each one left out;
with all four, the builder infers its type, the verifier types it, the interpreter and the JIT's
PTX (on the emulator) compute it.
"""
import sys
from pathlib import Path

import numpy as np
import pytest

from tilebc.interp import Pointer, run as interp_run
from tilebc.interp.ops._common import result_dtype, tile
from tilebc.interp.registry import IMPLEMENTATIONS, LANEWISE, PURE, implements
from tilebc.ir import PartitionViewType, PointerType, TensorViewType, scalar
from tilebc.ir.builder import BuilderError, module_entry, new_module
from tilebc.ir.types import f32, i32
from tilebc.ops import table
from tilebc.ops.spec import Effects, Elements, Family
from tilebc.verify import diagnostics

from tilebc_runtime.lowering.elementwise import _float_math
from tilebc_runtime.lowering.families import load_all
from tilebc_runtime.lowering.registry import LOWERINGS, NOT_LOWERED, lowers
from tilebc_runtime.sim.runner import run as sim_run

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from op_checklist import (fixture_gap, gaps, interpreter_gap, lowering_gap,  # noqa: E402
                          typing_gap)

# 1. The table entry: an element-wise float binary op (opcode 0x7F is free; test-only).
# The family makes it element-wise: typing rule, result type, no memory effects.
EXAMPLE = table._binary("copysignf", 0x7F, Elements.FLOAT, "magnitude of lhs, sign of rhs")


# 2. One interpreter function.
def interpret_copysignf(tb, op, lhs, rhs):
    return [tile(np.copysign(lhs, rhs), result_dtype(op))]


# 3. One lowering function (PTX copysign takes the sign from its first operand).
def lower_copysignf(lw, op):
    def compute(w, cls, regs):
        out = w.reg(cls)
        w(f"copysign.{cls} {out}, {regs[1]}, {regs[0]}")
        return out
    _float_math(lw, op, compute, keep_f64=True)


# 4. A kernel that uses it: out[i] = copysignf(x[i], y[i]) over 16 elements.
def example_kernel():
    module = new_module("13.5")
    ptr = scalar(PointerType(f32))
    b = module_entry(module, "k", [ptr, ptr, ptr])
    token = b.make_token()
    tiles = []
    for base in b.args:
        view_type = TensorViewType(f32, (16,), (1,))
        view = b.op("make_tensor_view", [base, [], []], [view_type])
        tiles.append(b.op("make_partition_view", [view], [PartitionViewType((16,), view_type, (0,))]))
    zero = b.constant(0, i32)
    x, _ = b.load(tiles[0], [zero], token=token)
    y, _ = b.load(tiles[1], [zero], token=token)
    b.store(b.copysignf(x, y), tiles[2], [zero], token=token)
    b.return_()
    return module


PIECES = ("table", "interpreter", "lowering", "kernel")


def _install(monkeypatch, leave_out=()):
    """Put the example's pieces in place (all but `leave_out`) and return the checklist's checks."""
    spec = EXAMPLE if "table" not in leave_out else EXAMPLE.replace(family=Family.OTHER)
    monkeypatch.setitem(table.OPS_BY_MNEMONIC, spec.mnemonic, spec)
    monkeypatch.setitem(table.OPS_BY_OPCODE, spec.opcode, spec)
    if "interpreter" not in leave_out:
        implements(spec.mnemonic, lanewise=True)(interpret_copysignf)
    if "lowering" not in leave_out:
        load_all()
        lowers(spec.mnemonic)(lower_copysignf)
    seen = set()
    if "kernel" not in leave_out:
        seen.update(op.name for op in example_kernel().walk())
    return spec, [typing_gap, interpreter_gap,
                  lambda s: lowering_gap(s, LOWERINGS, NOT_LOWERED),
                  lambda s: fixture_gap(s, seen)]


@pytest.fixture
def extended(monkeypatch):
    yield monkeypatch
    for registry in (IMPLEMENTATIONS, LOWERINGS):
        registry.pop(EXAMPLE.mnemonic, None)
    PURE.discard(EXAMPLE.mnemonic)
    LANEWISE.discard(EXAMPLE.mnemonic)


def test_the_four_pieces_are_all_the_checklist_asks_for(extended):
    spec, checks = _install(extended)
    assert gaps([spec], checks) == []
    assert spec.effects is Effects.NONE and spec.mnemonic in PURE  # hoistable, removable when dead


@pytest.mark.parametrize("left_out, named", [
    ("table", "has no typing rule: give it a family and element class in tilebc/ops/table.py"),
    ("interpreter", 'has no interpreter implementation: add @implements("copysignf")'),
    ("lowering", 'has no lowering: add @lowers("copysignf")'),
    ("kernel", "is in no fixture or hand-built kernel"),
])
def test_the_checklist_names_the_missing_piece(extended, left_out, named):
    spec, checks = _install(extended, leave_out=(left_out,))
    missing = gaps([spec], checks)
    assert len(missing) == 1 and f"op copysignf {named}" in missing[0], missing


def test_the_new_op_is_typed_interpreted_and_lowered(extended):
    _install(extended)
    module = example_kernel()
    op = next(op for op in module.walk() if op.name == "copysignf")
    assert op.results[0].type == op.operands["lhs"].type  # the builder's inference: the family
    assert diagnostics(module) == []
    # The family's typing rule, through the verifier: integer operands are refused.
    bad = new_module("13.5")
    b = module_entry(bad, "k", [scalar(i32)])
    b.op("copysignf", [b.args[0], b.args[0]], [scalar(i32)])
    b.return_()
    assert [d.rule for d in diagnostics(bad)] == ["type.operand"]
    with pytest.raises(BuilderError, match="copysignf: operand rhs must be a Value"):
        b.copysignf(b.args[0], None)

    x = np.array([1.5, -2.0, 0.0, -0.0, 3.0, -np.inf, np.inf, 7.25] * 2, np.float32)
    y = np.array([-1.0, 1.0, -0.0, 5.0, -0.0, 2.0, -3.0, 1e-30] * 2, np.float32)
    expected = np.copysign(x, y)
    for runner in (interp_run, sim_run):
        out = np.full(16, np.nan, np.float32)
        runner(module, "k", (1, 1, 1), Pointer(x), Pointer(y), Pointer(out))
        assert out.tobytes() == expected.tobytes(), runner.__module__


def test_the_builder_stub_gains_the_method(extended):
    import importlib.util
    spec, _ = _install(extended)
    loader = importlib.util.spec_from_file_location("gen_builder_stub",
                                                    ROOT / "scripts" / "gen_builder_stub.py")
    generator = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(generator)
    extended.setattr(generator, "OPS", table.OPS + (spec,))
    assert "def copysignf(self, lhs: Value, rhs: Value, *" in generator.render()
