"""The lenient default: what tileirdisasm accepts, tilebc loads, printing the same text, with a warning.

Each crafted file breaks one rule that NVIDIA's reader does not check (format_spec.md §16). The
default `tilebc.load` must accept it, record a DecodeWarning naming the strict rule's message and the
byte offset, and print exactly what tileirdisasm prints (plain and -g). `strict=True` refuses it
(tests/test_malformed.py pins those messages). Files tileirdisasm refuses stay refused by default.
"""
from __future__ import annotations

import functools
import re

import pytest

import tilebc
from tilebc import oracles
from tilebc.binary.container import first_misplaced_entry
from tilebc.binary.lenient import DecodeWarning
from tilebc.binary.primitives import Writer
from tilebc.binary.reader import ModuleReader
from tilebc.text import print_module

from conftest import needs_disasm
from test_malformed import (CASES, FUNC, NVIDIA_ACCEPTS, RETURN, STRING, TYPE, TYPES,
                             V13_1, V13_3, V13_5, S, _section, func_entry, module_bytes,
                             subprogram_debug)

pytestmark = needs_disasm


@functools.lru_cache(maxsize=None)
def nvidia(data: bytes, debug: bool = False) -> oracles.ToolResult:
    return oracles.tileirdisasm(data, debug_info=debug)


def raw_table(offsets, data: bytes, width: int = 4, align: int = 4) -> bytes:
    """An offset table with the offsets as given (in order or not)."""
    w = Writer()
    w.varint(len(offsets))
    w.align(align)
    for offset in offsets:
        w.fixed(offset, width)
    w.raw(data)
    return bytes(w.buf)


def load_all_ways(data: bytes):
    """The default load (locations decoded up front), checked against the lazy-debug load and the
    careful decoder: all three accept and record the same warnings."""
    module = tilebc.load(data, lazy_debug=False)
    lazy = tilebc.load(data)
    for function in lazy.functions:
        function.loc
        for op in function.walk():
            op.loc
    ModuleReader.use_fast_path = False
    try:
        careful = tilebc.load(data, lazy_debug=False)
    finally:
        ModuleReader.use_fast_path = True
    key = lambda m: sorted((w.message, w.offset) for w in m.decode_warnings)  # noqa: E731
    assert key(lazy) == key(module) == key(careful)
    return module


def assert_reads_like_nvidia(data: bytes, message: str = None) -> tilebc.Module:
    for debug in (False, True):
        theirs = nvidia(data, debug)
        assert theirs.ok, f"tileirdisasm refuses the file: {theirs.stderr[:300]}"
        module = load_all_ways(data)
        assert print_module(module, debug=debug) == theirs.stdout
    for warning in module.decode_warnings:
        assert isinstance(warning, DecodeWarning) and warning.category == "lenient"
        assert 0 <= warning.offset <= len(data)
    # Dumping writes canonical bytes: the strict reader takes them and they print the same.
    canonical = tilebc.load(tilebc.dump(module, module.version), lazy_debug=False, strict=True)
    assert canonical.decode_warnings == []
    for debug in (False, True):
        assert print_module(canonical, debug=debug) == nvidia(data, debug).stdout
    if message is not None:
        assert any(re.match(message, w.message) for w in module.decode_warnings), \
            [str(w) for w in module.decode_warnings]
        with pytest.raises(tilebc.DecodeError) as error:
            tilebc.load(data, lazy_debug=False, strict=True)
        assert re.match(message, error.value.message)
    return module


# ---- the documented cases of test_malformed: strict refuses, the default reads them as NVIDIA ----

@pytest.mark.parametrize("case", [c for c in CASES if c.name in NVIDIA_ACCEPTS], ids=lambda c: c.name)
def test_nvidia_accepted_case_loads_with_warning(case):
    assert_reads_like_nvidia(case.build(), case.message)


@pytest.mark.parametrize("case", [c for c in CASES if c.name not in NVIDIA_ACCEPTS],
                         ids=lambda c: c.name)
def test_nvidia_refused_case_stays_refused(case):
    with pytest.raises((tilebc.DecodeError, tilebc.VerificationError)):
        module = tilebc.load(case.build())
        for function in module.functions:  # a lazily decoded debug error counts too
            function.loc
            for op in function.walk():
                op.loc


# ---- tables whose offsets are out of order: sliced as tileirdisasm slices them -----------------

STRING_DATA = b"abcdefgh"


@pytest.mark.parametrize("offsets,index", [
    ([0, 5, 2], 0), ([0, 5, 2], 1), ([0, 5, 2], 2), ([3, 5, 2], 0), ([0, 2, 9], 1),
    ([0, 9, 3], 0), ([6, 2, 4], 0), ([6, 9, 4], 0), ([1, 0, 8], 0), ([0, 2, 7], 2),
    ([0, 9, 3], 1), ([0, 2, 9], 2), ([5, 5, 5], 0),
])
def test_string_table_out_of_order(offsets, index):
    """Entry i runs to the next offset, or to the end when that is smaller or past the end."""
    data = module_bytes(sections=_section(STRING, raw_table(offsets, STRING_DATA), align=4),
                        name=index)
    misplaced = first_misplaced_entry(offsets, len(STRING_DATA)) is not None
    if nvidia(data).ok:
        module = assert_reads_like_nvidia(data, r"string table entry \d+ has offset" if misplaced
                                          else None)
        assert module.functions[0].name  # the verdicts below differ on empty names only
    else:  # an empty name: both refuse
        assert "is empty" in nvidia(data).stderr
        with pytest.raises(tilebc.DecodeError, match="function name is empty"):
            tilebc.load(data)


TYPE_OFFSETS = [0, 1, 4, 8, 9, 12]  # of TYPES, in order


@pytest.mark.parametrize("entry,offset", [(3, 6), (3, 1), (3, 50), (3, 31), (3, 32), (3, 4),
                                          (4, 2), (5, 40), (1, 3), (2, 100)])
def test_type_table_out_of_order(entry, offset):
    """A type entry is read when used; a used one that is reversed or past the data is refused."""
    offsets = list(TYPE_OFFSETS)
    offsets[entry] = offset
    table = raw_table(offsets, b"".join(TYPES))
    data = module_bytes(sections=lambda secs: [secs[FUNC], S(TYPE, table, 4), secs[STRING]])
    if nvidia(data).ok:
        assert_reads_like_nvidia(data, r"type table entry \d+ has offset")
    else:
        with pytest.raises((tilebc.DecodeError, tilebc.VerificationError)):
            tilebc.load(data)


DEBUG_ATTRS = [b"\x02\x00\x00", b"\x01\x01", b"\x05\x01\x0a\x00\x00\x02\x0a\x00", b"\x04\x03\x00\x0a\x01"]


def debug_raw(offsets, data: bytes) -> bytes:
    """subprogram_debug's section with the attribute offsets as given."""
    w = Writer()
    w.varint(1)
    w.align(4)
    w.fixed(0, 4)
    w.varint(2)
    w.align(8)
    w.fixed(4, 8)
    w.fixed(4, 8)
    w.varint(len(offsets))
    w.align(4)
    for offset in offsets:
        w.fixed(offset, 4)
    w.raw(data)
    return bytes(w.buf)


@pytest.mark.parametrize("offsets,extra", [
    ([0, 3, 5, 13], b""), ([0, 3, 5, 22], b"\x00" * 6), ([0, 3, 5, 8], b""), ([0, 3, 13, 13], b""),
    ([0, 1, 5, 13], b""), ([0, 4, 5, 13], b""), ([0, 3, 5, 40], b""), ([0, 3, 2, 13], b""),
    ([0, 3, 13, 5], b""), ([5, 3, 0, 13], b""), ([0, 3, 5, 13, 11], b""), ([0, 3, 5, 13, 2], b""),
])
def test_debug_table_out_of_order(offsets, extra):
    data = module_bytes(V13_5, loc=1, debug=debug_raw(offsets, b"".join(DEBUG_ATTRS) + extra))
    if nvidia(data, True).ok:
        assert_reads_like_nvidia(data)
    else:
        with pytest.raises(tilebc.DecodeError):
            tilebc.load(data, lazy_debug=False)


@pytest.mark.parametrize("offsets,index,accepted", [
    ([0, 5], 1, True), ([0, 7], 0, True), ([0, 10], 0, True), ([0, 3], 0, False),
    ([5, 0], 0, False), ([5, 0], 1, False), ([0, 20], 1, False),
])
def test_constant_table(offsets, index, accepted):
    """NVIDIA checks the constant offsets up front (in order, inside the data), as strict tilebc
    does; only bytes left over after a constant's payload are read leniently."""
    constants = b"\x04\x07\x00\x00\x00\x04\x09\x00\x00\x00"
    table = raw_table(offsets, constants, 8, 8)
    data = module_bytes(V13_3, body=b"\x10\x04" + bytes([index]) + RETURN, sections=lambda secs: [
        secs[FUNC], S(4, table, 8), secs[TYPE], secs[STRING]])
    assert nvidia(data).ok == accepted
    if accepted:
        assert_reads_like_nvidia(data)
    else:
        with pytest.raises(tilebc.DecodeError):
            tilebc.load(data)


# ---- other classes -----------------------------------------------------------------------------

def test_repeated_section_keeps_the_last():
    first = S(STRING, raw_table([0, 5, 10], b"firstsm_90"), 4)
    last = S(STRING, raw_table([0, 4, 9], b"lastsm_90"), 4)
    data = module_bytes(sections=lambda secs: [secs[FUNC], first, secs[TYPE], last])
    module = assert_reads_like_nvidia(data, r"duplicate string section")
    assert module.functions[0].name == "last"


@pytest.mark.parametrize("tag", [7, 9, 100])
def test_unknown_debug_tag_is_unknown_location(tag):
    data = module_bytes(V13_5, loc=1, debug=subprogram_debug(0)[:-5] + bytes([tag]) + b"\x03\x00\x0a\x01")
    module = assert_reads_like_nvidia(data, r"unknown debug attribute tag")
    assert module.functions[0].loc is None


def test_bool_byte_reads_as_true():
    hints = b"\x0b\x01\x01\x0a\x01\x01\x03\x07"  # sm_90 = {sm_90 = <bool byte 7>}
    data = module_bytes(V13_3, hints=hints)
    assert_reads_like_nvidia(data, r"bool attribute byte is 7")


def test_entries_repeating_their_hints_share_them_and_each_is_warned_of():
    """Entries whose hints are the same bytes read as one attribute (decoded once); bytes that
    read with a warning are read for each entry, so each entry's offset is warned of."""
    good = b"\x0b\x01\x01\x0a\x01\x01\x03\x01"  # sm_90 = {sm_90 = true}
    bad = b"\x0b\x01\x01\x0a\x01\x01\x03\x07"   # sm_90 = {sm_90 = <bool byte 7>}
    entries = [func_entry(V13_3, hints=hints, name=name)
               for name, hints in ((0, good), (1, good), (3, bad), (4, bad))]
    data = module_bytes(V13_3, funcs=entries, strings=(b"k", b"sm_90", b"", b"k2", b"k3"))
    decoder = ModuleReader(data, "two.tilebc")
    module = decoder.read()
    hints = [function.optimization_hints for function in module.functions]
    assert hints[0] is hints[1] and hints[2] == hints[3] and hints[2] is not hints[3]
    warned = [w for w in decoder.log.warnings if "bool attribute byte is 7" in w.message]
    assert len(warned) == 2 and warned[0].offset != warned[1].offset


def test_entry_hints_of_many_lengths_keep_the_reader_cache_small():
    """Entry hints that begin alike and differ in length: the reader keeps a few lengths per
    first two bytes (a lookup slices once per length kept), and every entry still reads right."""
    from tilebc.binary import reader
    from test_malformed import varint

    def hints(count):  # sm_90 = {sm_90 = [count bools]}
        return b"\x0b\x01\x01\x0a\x01\x01\x06" + varint(count) + b"\x03\x01" * count
    entries = [func_entry(V13_3, hints=hints(count)) for count in range(1, 41)] * 2
    decoder = ModuleReader(module_bytes(V13_3, funcs=entries), "hints.tilebc")
    module = decoder.read()
    assert max(len(kept) for kept in decoder._header_attrs.values()) \
        <= reader._HEADER_LENGTHS_KEPT < 40
    values = [function.optimization_hints.entries[0][1].entries[0][1]
              for function in module.functions]
    assert [len(value.elements) for value in values] == list(range(1, 41)) * 2


@pytest.mark.parametrize("version,flags", [(V13_1, 0x42), (V13_1, 0x0a), (V13_3, 0x82)])
def test_function_flag_bits_ignored_before_13_4(version, flags):
    assert_reads_like_nvidia(module_bytes(version, flags=flags), r"function 'k' has unknown flags")


@pytest.mark.parametrize("version,flags", [((13, 4), 0x42), (V13_1, 0x03), (V13_3, 0x43)])
def test_function_flag_bits_refused(version, flags):
    """From 13.4 NVIDIA refuses unknown bits; bit 0 it reads as private visibility in every
    version, which an entry cannot have."""
    data = module_bytes(version, flags=flags)
    assert not nvidia(data).ok
    with pytest.raises(tilebc.DecodeError, match="has unknown flags"):
        tilebc.load(data)


def test_empty_module_loads_and_compiles():
    """tileiras compiles a module with no entry and no global, so the verifier accepts it."""
    for version in (V13_1, V13_5):
        data = module_bytes(version, funcs=[])
        assert nvidia(data).ok
        module = tilebc.load(data)  # verifies
        assert module.functions == [] and module.decode_warnings == []
        # tileirdisasm prints one empty line; tilebc's printer (not this task's) prints nothing.
        assert nvidia(data).stdout == "\n" and print_module(module) in ("", "\n")
    if oracles.tool_path("tileiras") is not None:
        assert oracles.tileiras(data).ok


def test_fixtures_have_no_warnings():
    from test_malformed import FIXTURES
    for path in sorted(FIXTURES.glob("*/*.tilebc"))[::7]:
        assert tilebc.load(path, lazy_debug=False).decode_warnings == [], path


def test_strict_load_of_fixtures_equals_default():
    from test_malformed import fixture_bytes
    data = fixture_bytes("13.5")
    from fuzz.harness import ir_signature
    strict, default = tilebc.load(data, strict=True), tilebc.load(data)
    assert ir_signature(strict) == ir_signature(default)
    assert print_module(strict, debug=True) == print_module(default, debug=True)


def test_cli_verify_and_info_show_warnings(tmp_path, capsys):
    from tilebc.cli import main
    path = tmp_path / "lenient.tilebc"
    path.write_bytes(module_bytes(sections=_section(STRING, raw_table([0, 5, 2], STRING_DATA),
                                                    align=4)))
    assert main(["verify", str(path)]) == 0
    err = capsys.readouterr().err
    assert f"{path}: offset 0x6c: warning: string table entry 1 has offset 5" in err
    assert "1 decode warning(s)" in err
    assert main(["verify", "--strict", str(path)]) == 1
    assert "string table entry 1 has offset 5" in capsys.readouterr().err
    assert main(["info", str(path)]) == 0
    assert "decode warnings: 1" in capsys.readouterr().out


@pytest.mark.parametrize("extra,indices", [
    ([b"\x06\x00\x04"], [4, 5]), ([b"\x06\x04\x00"], [4, 5]), ([b"\x06\x00\x00"], [4, 5]),
    ([b"\x00", b"\x06\x05\x04"], [4, 6]), ([b"\x00", b"\x06\x04\x05"], [4, 6]),
])
def test_call_site_with_unknown_part(extra, indices):
    """Debug index 0 (or an `unknown` entry) as a call site's callee or caller is an unknown
    location, as everywhere else: not a deviation, so no warning; it round-trips through dump."""
    from test_malformed import debug_section
    data = module_bytes(V13_5, loc=1, debug=debug_section(indices, DEBUG_ATTRS + extra))
    module = assert_reads_like_nvidia(data)
    assert module.decode_warnings == []
    again = tilebc.load(tilebc.dump(module, module.version), lazy_debug=False)
    assert print_module(again, debug=True) == nvidia(data, True).stdout


def test_call_site_part_must_be_a_location():
    from test_malformed import debug_section
    data = module_bytes(V13_5, loc=1, debug=debug_section([4, 5], DEBUG_ATTRS + [b"\x06\x01\x04"]))
    assert not nvidia(data, True).ok
    with pytest.raises(tilebc.DecodeError, match="call site callee must be DILoc/CallSiteLoc, got "
                                                 "DIFile"):
        tilebc.load(data, lazy_debug=False)


def debug_functions(firsts, indices) -> bytes:
    """A debug section with the given per-function first indices and index table."""
    from tilebc.binary.writer import encode_offset_table
    w = Writer()
    w.varint(len(firsts))
    w.align(4)
    for first in firsts:
        w.fixed(first, 4)
    w.varint(len(indices))
    w.align(8)
    for index in indices:
        w.fixed(index, 8)
    w.raw(bytes(encode_offset_table(list(DEBUG_ATTRS), 4, 4, base=len(w.buf))))
    return bytes(w.buf)


@pytest.mark.parametrize("firsts,indices,loc", [
    ([0], [4, 4], 1), ([1], [4, 4, 4], 1), ([3], [4, 4], 1), ([5], [4, 4], 1), ([0, 1], [4, 4], 1),
    ([0, 1], [4, 4], 2), ([0, 5], [4, 4], 1), ([2, 0], [4, 4, 4, 4], 1), ([1, 0], [0, 4, 4], 1),
])
def test_debug_function_ranges(firsts, indices, loc):
    """tileirdisasm reads a function's locations from its first index on, as many as it needs,
    whatever the next function's first index; it fails only past the end of the index table."""
    data = module_bytes(V13_5, loc=loc, debug=debug_functions(firsts, indices))
    if nvidia(data, True).ok:
        assert_reads_like_nvidia(data)
    else:
        with pytest.raises(tilebc.DecodeError, match="debug info for function 'k' has"):
            tilebc.load(data, lazy_debug=False)


@pytest.mark.parametrize("tag", ["8402", "8401", "8400", "8700", "8001", "8602", "ff01", "848200",
                                 "84808080808080808000", "8502"])
def test_debug_tag_keeps_its_low_byte(tag):
    from tilebc.binary.primitives import Reader
    above_a_byte = Reader(bytes.fromhex(tag)).varint() > 0xFF
    """tileirdisasm reads a debug tag varint and keeps its low byte: 0x84 0x02 (260) is a loc."""
    from test_malformed import debug_section
    attrs = DEBUG_ATTRS[:3] + [bytes.fromhex(tag) + b"\x03\x00\x0a\x01"]
    data = module_bytes(V13_5, loc=1, debug=debug_section([4, 4], attrs))
    if nvidia(data, True).ok:
        assert_reads_like_nvidia(data, r"unknown debug attribute tag \d+" if above_a_byte
                                 else None)
    else:
        with pytest.raises(tilebc.DecodeError, match=r"call site callee|subprogram file"):
            tilebc.load(data, lazy_debug=False)


@pytest.mark.parametrize("value", [0, 1, 2, 3, 0x80, 0xFF])
def test_partition_view_presence_byte_before_13_3(value):
    """Before 13.3 a partition_view's padding presence is a byte NVIDIA takes as a bool."""
    from test_malformed import FIXTURES
    from tilebc.binary.reader import ModuleReader
    original = (FIXTURES / "matmul_fp8" / "matmul_fp8-13.2.tilebc").read_bytes()
    reader = ModuleReader(original)
    reader.read()
    # A partition_view entry (tag 15) with padding ends in presence byte 1 and the padding enum.
    present = [offset + len(blob) - 2 for offset, blob in
               (reader.type_blobs[i] for i in range(len(reader.type_blobs)))
               if blob[0] == 15 and blob[-2] == 1]
    assert present
    data = bytearray(original)
    data[present[0]] = value
    data = bytes(data)
    assert_reads_like_nvidia(data, r"partition_view has unknown optional-parameter flags"
                             if value > 1 else None)


@pytest.mark.parametrize("tail", ["0d00", "0d0100", "0d0101"])
def test_unknown_attribute_tag_13_stays_refused(tail):
    """Tag 13 as a 13.5 entry's argument attributes: tileirdisasm crashes (SIGSEGV) on it or on
    files like it, so tilebc keeps refusing it."""
    entry = b"\x00\x02\x02\x00\x0b\x00" + bytes.fromhex(tail)
    data = module_bytes(V13_5, funcs=[entry + bytes([len(RETURN)]) + RETURN])
    assert nvidia(data).returncode < 0
    with pytest.raises(tilebc.DecodeError, match="unknown attribute tag 13"):
        tilebc.load(data)
