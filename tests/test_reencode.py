"""When a decoded module keeps its file's layout (format_spec.md §4.1): while it still fits the file,
which edits drop it for the canonical order, and what the canonical order is for a module built
from scratch. Every fixture's identity is checked in test_fixtures_roundtrip.py."""
from collections import Counter

import tilebc
from tilebc.binary.reader import ModuleReader
from tilebc.ir import types as T
from tilebc.ir.builder import module_entry, new_module
from tilebc.oracles import tileirdisasm, tool_path

from conftest import FIXTURE_DIR

# cuTile left an unused location in this file: only the layout gives its bytes back.
FOLDED = FIXTURE_DIR / "foreign_pointer" / "foreign_pointer-13.3.tilebc"
PRINT_13_1 = FIXTURE_DIR / "print" / "print-13.1.tilebc"


def canonical(module):
    module.layout = None
    return tilebc.dump(module)


def table(data, what):
    reader = ModuleReader(data, lazy_debug=False)
    reader.read()
    if what == "type":
        return [reader.type(i, 0) for i in range(len(reader.type_blobs))]
    if what == "string":
        return [reader.string(i, 0) for i in range(len(reader.strings))]
    return [reader.debug_attr(i, 0) for i in range(1, len(reader.debug_blobs) + 1)]


def test_layout_gives_back_what_the_canonical_order_drops():
    original = FOLDED.read_bytes()
    assert tilebc.dump(tilebc.load(original)) == original
    ours = canonical(tilebc.load(original))
    assert len(table(ours, "debug")) == len(table(original, "debug")) - 1


def test_a_new_entry_drops_the_layout():
    module = tilebc.load(FOLDED.read_bytes())
    module.functions[0].name = "renamed"
    assert tilebc.dump(module) == canonical(module)
    assert "renamed" in table(tilebc.dump(module), "string")


def test_an_entry_no_longer_used_drops_the_layout():
    original = FOLDED.read_bytes()
    module = tilebc.load(original)
    ops = list(module.functions[0].walk())
    shared = Counter(id(op.loc) for op in ops)
    alone = next(op for op in ops if op.loc is not None and shared[id(op.loc)] == 1)
    alone.loc = None
    written = tilebc.dump(module)
    assert written == canonical(module)
    assert len(table(written, "debug")) < len(table(original, "debug"))


def test_an_edit_that_keeps_every_table_keeps_the_file_order():
    """Moving a location to another op's: every entry is still used, none is new."""
    original = FOLDED.read_bytes()
    module = tilebc.load(original)
    ops = list(module.functions[0].walk())
    shared = Counter(id(op.loc) for op in ops)
    donor = next(op for op in ops if op.loc is not None and shared[id(op.loc)] > 1)
    taker = next(op for op in ops if op.loc is not None and shared[id(op.loc)] > 1
                 and op.loc is not donor.loc)
    taker.loc = donor.loc
    written = tilebc.dump(module)
    assert written != original
    assert table(written, "debug") == table(original, "debug")  # the unused entry is still there
    again = tilebc.load(written)
    assert list(again.functions[0].walk())[ops.index(taker)].loc == donor.loc


def test_another_version_is_written_in_canonical_order_and_keeps_its_own_layout():
    original = PRINT_13_1.read_bytes()
    module = tilebc.load(original)
    newer = tilebc.dump(module, "13.3")
    assert newer == canonical(tilebc.load(newer))
    assert tilebc.dump(tilebc.load(newer)) == newer
    assert tilebc.dump(tilebc.load(newer), "13.1") == original


def test_globals_are_placed_where_the_body_first_refers_to_them():
    """cuTile defines print's mutex at the first get_global: its type comes after the body's
    earlier types, and its value is the first constant."""
    original = PRINT_13_1.read_bytes()
    assert canonical(tilebc.load(original)) == original


def test_a_lenient_file_has_no_layout():
    data = bytearray(FOLDED.read_bytes())
    padding = data.index(b"\xcb")
    data[padding] = 0
    module = tilebc.load(bytes(data))
    assert module.decode_warnings and module.layout is None
    # Written in canonical order, which for this file is not cuTile's.
    assert tilebc.dump(module) != FOLDED.read_bytes()


def test_a_module_built_from_scratch_is_written_as_cutile_writes_it():
    """i1 and i32 first, the constant and debug sections even when empty (the debug table then
    holds one `unknown` entry), one debug run per entry; NVIDIA's disassembler reads it."""
    module = new_module("13.3")
    builder = module_entry(module, "k", [T.TileType((), T.f32)])
    builder.return_()
    data = tilebc.dump(module)
    assert table(data, "type") == [T.i1, T.i32, T.f32, T.TileType((), T.f32),
                                   T.FunctionType((T.TileType((), T.f32),), ())]
    reader = ModuleReader(data)
    reader.read()
    assert [span[0].name for span in reader.section_spans] == [
        "FUNC", "CONSTANT", "DEBUG", "TYPE", "STRING"]
    assert len(reader.constant_blobs) == 0
    assert len(reader.debug_blobs) == 1 and [list(indices) for indices in reader.debug_function_indices] == [[0, 0]]
    if tool_path("tileirdisasm") is not None:
        result = tileirdisasm(data)
        assert result.ok, result.stderr


def test_an_item_read_out_of_a_tile_registers_its_scalar_type_first():
    """cuTile's list items: `extract` of a 1x1 tile then `reshape` to a scalar registers the
    scalar type before the 1x1 tile type, which is how every array_list file is written."""
    files = sorted((FIXTURE_DIR / "array_list").glob("*.tilebc"))
    assert len(files) == 5
    for path in files:
        original = path.read_bytes()
        types = table(original, "type")
        assert types.index(T.TileType((), T.i64)) < types.index(T.TileType((1, 1), T.i64))
        assert canonical(tilebc.load(original)) == original, path.name
