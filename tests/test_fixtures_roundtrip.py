"""Every cuTile fixture decodes and re-encodes to its own bytes; written in our canonical order (as
if built from scratch) it is cuTile's bytes up to entries cuTile registers out of use order, and
NVIDIA's disassembler prints the same text for it — at the file's own version and at every version
it fits."""
import re

import pytest

import tilebc
from tilebc import cli, oracles
from tilebc.binary.reader import ModuleReader
from tilebc.version import ALL_VERSIONS

from conftest import (CaseFailures, decoded, encoded, fixture_files, fixture_id, fixture_kernels,
                      shared_path, tileiras_accepts, verified_version)

FILES = fixture_files()
FIXTURE_KERNELS = fixture_kernels()
# Kernels whose files hold debug attributes of cuTile operations that emit no bytecode op (folded
# or no-op ones): nothing in the module refers to them, so only the recorded layout writes them.
# Every other fixture comes out of the canonical writer as cuTile's bytes (format_spec.md §4.1).
FOLDED_LOCATIONS = {"foreign_pointer", "dm_bfs_expand", "dm_hash_partition",
                    "dm_philox_dropout", "dm_radix_digits"}


def stored(path, suffix):
    return path.with_suffix(suffix).read_text()


def table_entries(data):
    """The decoded entries of each table of a file: strings, types, constants, debug attributes."""
    reader = ModuleReader(data, lazy_debug=False)
    reader.read()
    return {"string": [reader.string(i, 0) for i in range(len(reader.strings))],
            "type": [reader.type(i, 0) for i in range(len(reader.type_blobs))],
            "constant": [reader.constant(i, 0) for i in range(len(reader.constant_blobs))],
            "debug": [reader.debug_attr(i, 0) for i in range(1, len(reader.debug_blobs) + 1)]}


@pytest.mark.parametrize("fixture_kernel", sorted(FIXTURE_KERNELS))
def test_reencode_same_version(fixture_kernel, capsysbinary):
    failures = CaseFailures()
    for path in FIXTURE_KERNELS[fixture_kernel]:
        with failures.case(path.name):
            capsysbinary.readouterr()  # nothing a failed case left unread
            _check_reencode_same_version(path, capsysbinary)
    failures.raise_any()


def _check_reencode_same_version(path, capsysbinary):
    original = path.read_bytes()
    # not verified here: test_verify.py verifies these bytes (and `ours` where they are the same);
    # the session's decoding of the file, shared with the other fixture walks
    module = decoded(path)
    assert tilebc.dump(module) == original, "an unmodified file does not re-encode to its bytes"
    # To stdout: the same code path as to a file, without a file system sync per fixture.
    assert cli.main(["convert", str(path), "--target-version", str(module.version),
                     "-o", "-", "-f"]) == 0
    assert capsysbinary.readouterr().out == original, \
        "convert to the file's own version is not the identity"

    # The canonical writer: the module as if built from scratch (the session's encoding).
    ours = encoded(path)
    again = tilebc.load(ours, verify=ours != original)
    again.layout = None
    assert tilebc.dump(again) == ours, "dump is not deterministic"
    if ours != original:
        # Only where cuTile registers debug attributes no op uses (locations of ops it folded
        # away): the same strings, types and constants in the same order, less those entries.
        assert path.parent.name in FOLDED_LOCATIONS, "the canonical writer is not cuTile's order"
        theirs, mine = table_entries(original), table_entries(ours)
        for table in ("string", "type", "constant"):
            assert list(map(repr, mine[table])) == list(map(repr, theirs[table])), table
        assert set(mine["debug"]) < set(theirs["debug"])
    plain = oracles.tileirdisasm(ours)
    assert plain.ok, plain.stderr
    assert plain.stdout == stored(path, ".dis")
    with_debug = oracles.tileirdisasm(ours, debug_info=True)
    assert with_debug.ok, with_debug.stderr
    assert with_debug.stdout == stored(path, ".dis-g")


def test_cpp_writer_files_reencode_to_their_bytes():
    """NVIDIA's C++ writer orders sections and types its own way, pads the function section and
    omits empty sections; a decoded file keeps all of that."""
    files = sorted(shared_path("reference/cuda-tile-valid-13.1").glob("*.tileirbc"))
    assert files
    for path in files:
        original = path.read_bytes()
        module = tilebc.load(original)
        assert tilebc.dump(module) == original, path.name
        module.layout = None
        assert tilebc.dump(module) != original, f"{path.name}: written in cuTile's order already"


@pytest.mark.parametrize("fixture_kernel", sorted(FIXTURE_KERNELS))
def test_convert_to_every_version(fixture_kernel):
    failures = CaseFailures()
    for path in FIXTURE_KERNELS[fixture_kernel]:
        with failures.case(path.name):
            _check_convert_to_every_version(path)
    failures.raise_any()


def _check_convert_to_every_version(path):
    module = decoded(path)
    expected = stored(path, ".dis")
    converted = 0
    for version in ALL_VERSIONS:
        if version == module.version:
            continue
        try:
            data = tilebc.dump(module, version)
        except tilebc.EncodeError as error:
            # Refusals must name what needs a newer version, and that version must exceed the target.
            match = re.search(r"needs bytecode version (\d+\.\d+)", str(error))
            assert match, str(error)
            assert tilebc.Version.parse(match.group(1)) > version
            continue
        converted += 1
        assert data[8:10] == bytes([version.major, version.minor])
        sibling = path.parent / f"{path.parent.name}-{version}.tilebc"
        if path.parent.name not in FOLDED_LOCATIONS and sibling.is_file() \
                and data == sibling.read_bytes():
            # cuTile's own file at that version (4 conversions in 10): test_reencode_same_version
            # shows tileirdisasm prints its stored listing, test_verify decodes and verifies it
            listing = stored(sibling, ".dis")
        else:
            result = oracles.tileirdisasm(data)
            assert result.ok, f"{version}: {result.stderr}"
            listing = result.stdout
            assert verified_version(data) == version
        assert oracles.without_hint_keys(listing) == oracles.without_hint_keys(expected), \
            f"text differs at {version}"


NEWEST = {}
for _path in FILES:
    _name = _path.parent.name
    if _name not in NEWEST or _path.stem > NEWEST[_name].stem:
        NEWEST[_name] = _path


@pytest.mark.parametrize("path", sorted(NEWEST.values()), ids=fixture_id)
def test_tileiras_compiles_what_we_write(path):
    """Our canonical bytes compile where they are not cuTile's: tileiras on bytes identical to the
    file would judge cuTile's output, not ours, so those are asserted identical instead.
    sm_90 first; kernels using Blackwell-only types (fp4, e8m0, e5m3) go to sm_100 or sm_107 (e5m3)."""
    original = path.read_bytes()
    ours = encoded(path)
    if path.parent.name not in FOLDED_LOCATIONS:
        assert ours == original, "the canonical writer is not cuTile's order"
        return
    assert ours != original, f"{path.parent.name} is written as cuTile wrote it: drop it from " \
        "FOLDED_LOCATIONS"
    for gpu_name in ("sm_90", "sm_100", "sm_107"):
        reference = tileiras_accepts(original, gpu_name)
        if reference.returncode == 5 and "Incompatibility with architecture" in reference.stderr:
            continue
        assert reference.ok, reference.stderr
        result = tileiras_accepts(ours, gpu_name)
        assert result.ok, result.stderr
        return
    pytest.fail("tileiras compiles the original for none of sm_90, sm_100, sm_107")
