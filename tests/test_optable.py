"""The op table is complete (checked against NVIDIA's reader) and every op is exercised somewhere."""
import pytest

import tilebc
from tilebc import oracles
from tilebc.ir import Module
from tilebc.ir.builder import new_function
from tilebc.ops import BODY_OPS, OPS_BY_OPCODE, PUBLIC_OPS, max_public_opcode
from tilebc.version import ALL_VERSIONS, V13_3, V13_4, V13_5

from conftest import decoded, fixture_files
from handbuilt import KERNELS
from op_checklist import fixture_gap, gaps


def test_public_op_counts_per_version():
    assert len(PUBLIC_OPS) == 108
    assert len(BODY_OPS) == 105
    assert sum(op.since <= V13_3 for op in PUBLIC_OPS) == 100
    assert sum(op.since == V13_4 for op in PUBLIC_OPS) == 5
    assert sum(op.since == V13_5 for op in PUBLIC_OPS) == 3


def _probe_module(version):
    module = Module(version=version)
    new_function(module, "probe", []).op("return", [[]])
    return tilebc.dump(module)


@pytest.mark.parametrize("version", ALL_VERSIONS, ids=str)
def test_table_matches_nvidia_reader_opcodes(version):
    """Replace the body's `return` opcode by every opcode below 0x80 and ask tileirdisasm which ones
    it does not know: exactly the ones our table lacks (holes) or that are newer than the file."""
    base = _probe_module(version)
    at = base.index(b"\x5c\x00\x00")  # return: opcode, 0 results, 0 operands
    for opcode in range(0x80):
        result = oracles.tileirdisasm(base[:at] + bytes([opcode]) + base[at + 1:])
        spec = OPS_BY_OPCODE.get(opcode)
        if spec is None:
            assert "unknown or unimplemented opcode" in result.stderr or \
                "unsupported opcode" in result.stderr, hex(opcode)
        elif spec.since > version:
            assert "unsupported opcode" in result.stderr, hex(opcode)
        else:
            assert "unknown or unimplemented" not in result.stderr, hex(opcode)
            assert "unsupported opcode" not in result.stderr, hex(opcode)
    assert max_public_opcode(version) < 0x80


def test_every_body_op_is_exercised():
    seen = set()
    for path in fixture_files():
        seen.update(op.name for op in decoded(path).walk())
    for build in KERNELS.values():
        module, _ = build()
        seen.update(op.name for op in module.walk())
    missing = gaps(BODY_OPS, [lambda spec: fixture_gap(spec, seen)])
    assert not missing, "\n".join(missing)
