"""Every construct schema both parses and builds: build(parse(b)) == b."""
import io
import struct

from hypothesis import given, settings, strategies as st

import tilebc
from tilebc.binary import container as C
from tilebc.binary.primitives import Reader, Writer, zigzag_decode, zigzag_encode
from tilebc.binary.writer import encode_offset_table

from conftest import decoded, fixture_files


@given(st.integers(min_value=13, max_value=13), st.integers(1, 5), st.integers(0, 1))
def test_header_round_trip(major, minor, tag):
    data = C.MAGIC + bytes([major, minor]) + tag.to_bytes(2, "little")
    parsed = C.Header.parse(data)
    assert (parsed.major, parsed.minor, parsed.tag) == (major, minor, tag)
    assert C.Header.build(parsed) == data


@settings(max_examples=200)
@given(st.sampled_from([1, 2, 3, 4, 5, 6, 7]), st.binary(max_size=64), st.integers(0, 20),
       st.sampled_from([None, 1, 4, 8, 16]))
def test_section_round_trip(section_id, payload, offset, alignment):
    """Padding is measured from the start of the file, so sections are framed at an offset."""
    prefix = b"\x00" * offset
    writer = Writer()
    writer.raw(prefix)
    writer.u8(section_id | (0x80 if alignment else 0))
    writer.varint(len(payload))
    if alignment:
        writer.varint(alignment)
        writer.align(alignment)
    writer.raw(payload)
    data = bytes(writer.buf)
    stream = io.BytesIO(data)
    stream.seek(offset)
    parsed = C.Section.parse_stream(stream)
    assert parsed.payload == payload and stream.tell() == len(data)
    out = io.BytesIO()
    out.write(prefix)
    C.Section.build_stream(parsed, out)
    assert out.getvalue() == data


@settings(max_examples=100)
@given(st.lists(st.binary(max_size=12), max_size=20))
def test_string_table_round_trip(strings):
    data = bytes(encode_offset_table(strings, 4, 4))
    parsed = C.StringTable.parse(data)
    offsets = list(struct.unpack(f"<{parsed.count}I", parsed.offsets))
    assert C.split_blobs(offsets, parsed.data, what="strings", base=0, file=None) == strings
    assert C.StringTable.build(parsed) == data


@given(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1))
def test_zigzag_and_varint(value):
    assert zigzag_decode(zigzag_encode(value)) == value
    writer = Writer()
    writer.zigzag(value)
    assert Reader(bytes(writer.buf)).zigzag() == value


def test_fixture_sections_rebuild_byte_for_byte():
    """Framing every section of real files and building them again gives the same bytes."""
    for path in fixture_files()[:40]:
        data = path.read_bytes()
        stream = io.BytesIO(data)
        stream.seek(12)
        out = io.BytesIO()
        out.write(data[:12])
        while True:
            section = C.Section.parse_stream(stream)
            C.Section.build_stream(section, out)
            if section.header.id == C.SectionId.END:
                break
        assert out.getvalue() == data, path.name
        assert tilebc.load(data).version.minor == data[9]


def test_entry_hint_agrees_with_the_decoder_on_every_fixture():
    """The runtime's cubin-cache lookup names the entry from the framing and string table alone:
    (entry count, the only entry's name) must be what the full decoder reads."""
    checked = 0
    for path in fixture_files():
        data = path.read_bytes()
        names = [function.name for function in decoded(path).functions]  # the shared decode
        assert C.entry_hint(data) == (len(names), names[0] if len(names) == 1 else None), path
        checked += 1
    assert checked > 100


def test_entry_hint_gives_up_on_damaged_input():
    """Anything unusual is None (the caller then decodes fully and reports the problem)."""
    data = next(path for path in fixture_files()).read_bytes()
    assert C.entry_hint(data) is not None
    for damaged in (b"", data[:11], b"\x00" + data[1:], data[:len(data) // 2], data[:20]):
        assert C.entry_hint(damaged) is None, damaged[:16]
