"""Entry names become kernel symbols, so the JIT refuses names PTX cannot spell, before lowering."""
import pytest

import tilebc
import tilebc_runtime
from tilebc.ir.builder import new_function
from tilebc.ir.types import i32, scalar


def _module(name: str) -> tilebc.Module:
    module = tilebc.Module()
    b = new_function(module, name, [scalar(i32)])
    b.op("return", [[]])
    return module


@pytest.mark.parametrize("name", ["k.x", "9lives", "print_\udce9kernel", "caf\u00e9"])
def test_non_identifier_entry_names_are_refused(name):
    with pytest.raises(tilebc.VerificationError, match="is not a PTX identifier"):
        tilebc_runtime.compile(_module(name), arch="sm_90", emit="ptx")


@pytest.mark.parametrize("name", ["k", "_k$1", "$x"])
def test_identifier_entry_names_compile(name):
    result = tilebc_runtime.compile(_module(name), arch="sm_90", emit="ptx")
    assert f".entry {name}(" in result.ptx
