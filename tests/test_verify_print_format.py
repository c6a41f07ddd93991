"""print_tko format strings: tilebc.verify counts conversions as NVIDIA's reader does (oracle:
tileirdisasm's verdict on the printf fixture with its format replaced)."""
import dataclasses

import pytest

import tilebc
from conftest import ROOT
from tilebc import oracles

PRINTF = ROOT / "fixtures" / "bytecode" / "printf" / "printf-13.2.tilebc"

# (format, whether a print with the fixture's three arguments is valid)
FORMATS = [
    ("block %d n=%d first=%f\n", True),
    ("block %d n=%d first=%\x00\n", True),     # NUL ends a conversion (C string search)
    ("block %d n=%d first=%\x00", True),
    ("block %d n=%d first=%\x00x", True),
    ("block %d n=%d fi\x00rst=%d", True),
    ("block %d n=%d first=%", False),          # unterminated
    ("block %d n=%d first=%\x00%d", False),    # four conversions
    ("%d %d %\x01", False),                    # unterminated
    ("% %d %d", True),                         # a % inside an open conversion starts the next one
    ("%d %d %%", False),                       # %% is a literal percent: two conversions
]


def _with_format(fmt):
    module = tilebc.load(PRINTF, verify=False)
    prints = [op for f in module.functions for op in f.walk()
              if op.name == "print_tko" and len(op.operands["args"]) == 3]
    assert len(prints) == 1
    attr = prints[0].attrs["str"]
    prints[0].attrs["str"] = dataclasses.replace(attr, value=fmt) if dataclasses.is_dataclass(attr) \
        else fmt
    return tilebc.dump(module, "13.2")


@pytest.mark.parametrize("fmt,valid", FORMATS, ids=[repr(f) for f, _ in FORMATS])
def test_print_format_verdict_matches_nvidia(fmt, valid):
    data = _with_format(fmt)
    assert oracles.tileirdisasm(data).ok == valid
    if valid:
        tilebc.load(data)
    else:
        with pytest.raises(tilebc.VerificationError, match="print"):
            tilebc.load(data)


@pytest.mark.parametrize("version", ["13.1", "13.5"])
@pytest.mark.parametrize("debug", [False, True], ids=["plain", "g"])
def test_empty_module_prints_as_tileirdisasm(version, debug):
    # a module with no entry and no global is valid (tileiras compiles it to a cubin with no
    # kernels); tileirdisasm prints an empty line, with -g also the module's unknown location
    module = tilebc.load(PRINTF)
    module.functions.clear()
    module.globals.clear()
    data = tilebc.dump(module, version)
    expected = oracles.tileirdisasm(data, debug_info=debug)
    assert expected.ok
    text = tilebc.print_module(tilebc.load(data), debug=debug)
    assert text == expected.stdout
    assert tilebc.print_module(tilebc.load(tilebc.assemble(text, version)), debug=debug) == text
