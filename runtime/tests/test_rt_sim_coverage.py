"""What the emulator implements against what the lowering can emit (lowering/ptx.PTX_SUBSET), and
which lowering hooks the emulated fixture set exercises."""
import sys
from pathlib import Path

from tilebc_runtime.lowering.ptx import PTX_SUBSET, opcodes_used
from tilebc_runtime.lowering.families import load_all
from tilebc_runtime.lowering.registry import LOWERINGS
from tilebc_runtime.sim import BUILDERS, IMPLEMENTED

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_interp_fixtures as reference  # noqa: E402
from test_rt_sim_fixtures import DIFFERS, NOT_LOWERED  # noqa: E402
from test_rt_sim_handbuilt import HANDBUILT  # noqa: E402

# PTX_SUBSET entries the lowering reserves but does not emit yet (opcode -> reason). The emulator
# refuses them (UnsupportedInstruction) until they are implemented; the test below fails as soon
# as the lowering's documentation stops calling them unemitted. None at present.
PENDING: dict = {}

# Every lowering hook is run on the emulator by a fixture or by a hand-built kernel of
# test_rt_sim_handbuilt (for the ops cuTile never emits). Hooks left out need a reason here.
HOOKS_NOT_EXERCISED = {}


def test_every_opcode_the_lowering_can_emit_is_implemented():
    missing = sorted(set(PTX_SUBSET) - set(IMPLEMENTED) - set(PENDING))
    assert missing == [], f"PTX_SUBSET opcodes the emulator does not implement: {missing}"


def test_pending_opcodes_are_still_unemitted():
    for opcode in PENDING:
        assert opcode not in IMPLEMENTED
        assert "not emitted" in PTX_SUBSET.get(opcode, "not emitted"), \
            f"the lowering now emits {opcode}: implement it in the emulator"


def test_implemented_forms_are_documented():
    assert set(BUILDERS) == set(IMPLEMENTED)
    for opcode, forms in IMPLEMENTED.items():
        assert len(forms.split()) >= 2, f"{opcode}: describe the implemented forms"


def test_opcode_scanner_agrees_with_the_emulator():
    ptx = """.version 7.8
.target sm_90
.address_size 64
.visible .entry k()
{
\tmov.u32 %r1, 1;
\t@%p1 bra.uni $L;
$L:
\tret;
}"""
    assert opcodes_used(ptx) == {"mov", "bra", "ret"} <= set(IMPLEMENTED)


def test_lowering_hooks_reached_by_emulated_kernels():
    load_all()
    used = set()
    modules = [reference.module(name, reference.versions(name)[-1]) for name in reference.CASES
               if name not in NOT_LOWERED and name not in DIFFERS]
    modules += [build() for build in HANDBUILT.values()]
    for module in modules:
        for function in module.functions:
            used.update(op.name for op in function.walk())
    not_reached = set(LOWERINGS) - used
    assert not_reached == set(HOOKS_NOT_EXERCISED)
