"""Strings that are not UTF-8: NVIDIA's tileirdisasm keeps a string-table entry's raw
bytes, so tilebc must too. The reader decodes with `surrogateescape`, the writer encodes back the
same way, the printer writes every byte as tileirdisasm does (`\\XX` outside printable ASCII, `"` as
`\\22`, `\\` as `\\\\`) and the parser reads that text back to the same bytes.

The inputs are real cuTile fixtures whose string table is rewritten byte-wise (independently of
tilebc's writer), then checked against NVIDIA's tileirdisasm, plain and -g.
"""
from __future__ import annotations

import functools
import struct
from pathlib import Path
from typing import Callable, List

import pytest

import tilebc
from tilebc.errors import EncodeError
from tilebc.oracles import tileiras, tileirdisasm
from tilebc.text import assemble, parse_module, print_module
from tilebc.text.values import escape_string

from conftest import needs_disasm, needs_tileiras
from test_malformed import STRING, S, make_file, read_varint, sections_of, table

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "bytecode"

# Kernels with every kind of string: entry name, DIFile name/directory, subprogram name,
# location file names, print / assert format strings, hint keys; one file per version family.
SAMPLES = ["print-13.3", "printf-13.1", "assert-13.5", "printf-13.4"]


def string_table(payload: bytes) -> List[bytes]:
    """The entries of a string section: count varint, pad to 4, u32 offsets, data."""
    count, pos = read_varint(payload, 0)
    pos += (-pos) % 4
    offsets = list(struct.unpack_from(f"<{count}I", payload, pos))
    data = payload[pos + 4 * count:]
    return [data[start:end] for start, end in zip(offsets, offsets[1:] + [len(data)])]


def rewrite_strings(data: bytes, change: Callable[[bytes], bytes]) -> bytes:
    """`data` with each string-table entry replaced by change(entry); every other section as is."""
    sections = []
    for sec in sections_of(data):
        if sec.id == 0:
            continue
        align = None
        if data[sec.start] & 0x80:
            _, pos = read_varint(data, sec.start + 1)
            align, _ = read_varint(data, pos)
        payload = data[sec.payload:sec.end]
        if sec.id == STRING:
            payload = table([change(entry) for entry in string_table(payload)], 4, 4)
        sections.append(S(sec.id, payload, align))
    tag = struct.unpack_from("<H", data, 10)[0]
    return make_file((data[8], data[9]), sections, tag=tag)


def garble(entry: bytes) -> bytes:
    """Put bytes that are not UTF-8 (a lone continuation byte, 0xFF, an overlong `/`), a valid
    two-byte sequence, a quote and a backslash into every string but the hint keys (arch names)."""
    if not entry or entry in (b"default",) or entry.startswith(b"sm_"):
        return entry
    return entry[:1] + b"\xff\x80\"\\\xc3\xa9\xc0\xaf" + entry[1:]


@functools.lru_cache(maxsize=None)
def garbled(sample: str) -> bytes:
    """The sample in tilebc's canonical layout with its strings garbled (so dump can match it)."""
    name = sample.rsplit("-", 1)[0]
    original = (FIXTURES / name / f"{sample}.tilebc").read_bytes()
    canonical = tilebc.dump(tilebc.load(original))
    data = rewrite_strings(canonical, garble)
    assert data != canonical
    return data


def test_rewrite_helper_is_faithful():
    data = tilebc.dump(tilebc.load((FIXTURES / "print" / "print-13.3.tilebc").read_bytes()))
    assert rewrite_strings(data, lambda entry: entry) == data


@pytest.mark.parametrize("sample", SAMPLES)
def test_bytes_ir_bytes_exact(sample):
    data = garbled(sample)
    module = tilebc.load(data)
    assert tilebc.dump(module, module.version) == data
    # The IR holds str: the raw bytes sit in it as lone surrogates.
    assert any("\udcff" in function.name for function in module.functions)


@needs_disasm
@pytest.mark.parametrize("debug", [False, True], ids=["plain", "g"])
@pytest.mark.parametrize("sample", SAMPLES)
def test_dis_matches_tileirdisasm(sample, debug):
    data = garbled(sample)
    theirs = tileirdisasm(data, debug_info=debug)
    assert theirs.ok, theirs.stderr
    ours = print_module(tilebc.load(data), debug=debug)
    assert ours == theirs.stdout
    assert "\\FF\\80\\22\\\\\\C3\\A9\\C0\\AF" in ours


@pytest.mark.parametrize("sample", SAMPLES)
def test_asm_of_dis_gives_original_bytes(sample):
    data = garbled(sample)
    module = tilebc.load(data)
    assert assemble(print_module(module, debug=True), module.version) == data
    # Without debug info the bytes differ (no locations), but the text survives.
    plain = print_module(module)
    assert print_module(tilebc.load(assemble(plain, module.version))) == plain


def test_escape_string_matches_llvm_printEscapedString():
    assert escape_string('a"b\\c\udcff\u00e9\x7f\t') == '"a\\22b\\\\c\\FF\\C3\\A9\\7F\\09"'


@pytest.mark.parametrize("text, value", [
    ('"\\22"', '"'),        # tileirdisasm's form
    ('"\\""', '"'),         # MLIR's parser also takes \"
    ('"\\FF\\C3\\A9"', "\udcff\u00e9"),
    ('"\\n\\t"', "\n\t"),
])
def test_parser_reads_escapes_back(text, value):
    listing = f"entry @{text}() {{\n  return\n}}\n"
    assert parse_module(listing).functions[0].name == value


def test_writer_refuses_a_surrogate_that_is_no_escaped_byte():
    module = tilebc.load((FIXTURES / "print" / "print-13.3.tilebc").read_bytes())
    module.functions[0].name = "k\ud800"
    with pytest.raises(EncodeError, match=r"lone surrogate U\+D800 that is not an escaped byte"):
        tilebc.dump(module, module.version)


@needs_tileiras
def test_tileiras_refuses_entry_names_that_are_not_identifiers():
    """Fact pinned for the compile path: tileirdisasm prints any entry name (checked above), but
    tileiras only compiles names like [A-Za-z_$][A-Za-z0-9_$]*: a non-UTF-8 byte, a valid UTF-8
    letter or a '.' all fail with a bare "failed to compile". tilebc's reader and printer accept such
    names like tileirdisasm; refusing them is for the compile path, not for decoding."""
    data = tilebc.dump(tilebc.load((FIXTURES / "print" / "print-13.3.tilebc").read_bytes()))
    entry = b"print_kernel_Kt1_A1f32_1l0_I16"
    assert tileiras(rewrite_strings(data, lambda s: b"k$_1" if s == entry else s)).ok
    for name in (b"k\xe9", b"k\xc3\xa9", b"k.x"):
        result = tileiras(rewrite_strings(data, lambda s: name if s == entry else s))
        assert not result.ok and "failed to compile" in result.stderr, name
