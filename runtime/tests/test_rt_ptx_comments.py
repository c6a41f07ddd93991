"""The generated PTX names the Tile IR op (and its source line) above each op's code."""
import re
from pathlib import Path

import tilebc
from tilebc_runtime.compiler import compile

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = ROOT / "fixtures" / "bytecode" / "nn_softmax_rows" / "nn_softmax_rows-13.5.tilebc"
COMMENT = re.compile(r"^\t// (\w+) offset 0x([0-9a-f]+)(?: (\S+:\d+:\d+))?$")


def _comments(ptx: str):
    return [COMMENT.match(line) for line in ptx.splitlines() if COMMENT.match(line)]


def test_each_lowered_op_is_named_once_with_its_offset_and_source_line():
    module = tilebc.load(SOFTMAX.read_bytes())
    ops = {op.offset: op for function in module.functions for op in function.walk()}
    found = _comments(compile(SOFTMAX, emit="ptx").ptx)
    offsets = [int(m.group(2), 16) for m in found]
    assert len(offsets) == len(set(offsets))
    for match, offset in zip(found, offsets):
        op = ops[offset]
        assert match.group(1) == op.name
        if op.loc is None:  # cuTile gives the implicit return no source line
            assert match.group(3) is None
        else:
            assert match.group(3).startswith("fixtures/kernels/nn.py:")
    named = {ops[offset].name for offset in offsets}
    assert {"load_view_tko", "reduce", "exp", "divf", "store_view_tko", "for"} <= named


def test_comments_do_not_depend_on_where_the_module_was_read_from(tmp_path):
    copy = tmp_path / "elsewhere.tilebc"
    copy.write_bytes(SOFTMAX.read_bytes())
    assert compile(copy, emit="ptx").ptx == compile(SOFTMAX, emit="ptx").ptx


def test_a_file_name_that_is_not_printable_is_escaped_in_the_comments():
    # debug info may name any file: a newline would end the comment and put the rest of the name
    # into the PTX; a byte that is not UTF-8 (kept as a surrogate) cannot be passed to nvJitLink
    from tilebc.ir.location import DILoc
    from tilebc_runtime.compiler import link_ptx
    module = tilebc.load(SOFTMAX.read_bytes())
    for function in module.functions:
        for op in function.walk():
            if isinstance(op.loc, DILoc):
                op.loc = DILoc(op.loc.scope, "k\nret;\udc80.py", op.loc.line, op.loc.column)
    ptx = compile(module, emit="ptx").ptx
    assert "k\\x0aret;\\x80.py:" in ptx and "\nret;\udc80" not in ptx
    assert all(line.isascii() for line in ptx.splitlines())
    cubin, _ = link_ptx(ptx, 90, module=module)
    assert cubin[:4] == b"\x7fELF"
