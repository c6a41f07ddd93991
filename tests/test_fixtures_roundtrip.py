"""Every cuTile fixture decodes, re-encodes deterministically, and NVIDIA's disassembler prints the
same text for our bytes as for cuTile's — at the file's own version and at every version it fits."""
import re

import pytest

import tilebc
from tilebc import oracles
from tilebc.version import ALL_VERSIONS

from conftest import decoded, encoded, fixture_files, fixture_id

FILES = fixture_files()


def stored(path, suffix):
    return path.with_suffix(suffix).read_text()


@pytest.mark.parametrize("path", FILES, ids=fixture_id)
def test_reencode_same_version(path):
    ours = encoded(path)
    assert tilebc.dump(tilebc.load(ours)) == ours, "dump is not deterministic"
    plain = oracles.tileirdisasm(ours)
    assert plain.ok, plain.stderr
    assert plain.stdout == stored(path, ".dis")
    with_debug = oracles.tileirdisasm(ours, debug_info=True)
    assert with_debug.ok, with_debug.stderr
    assert with_debug.stdout == stored(path, ".dis-g")


@pytest.mark.parametrize("path", FILES, ids=fixture_id)
def test_convert_to_every_version(path):
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
        result = oracles.tileirdisasm(data)
        assert result.ok, f"{version}: {result.stderr}"
        assert oracles.without_hint_keys(result.stdout) == oracles.without_hint_keys(expected), \
            f"text differs at {version}"
        assert tilebc.load(data).version == version


NEWEST = {}
for _path in FILES:
    _name = _path.parent.name
    if _name not in NEWEST or _path.stem > NEWEST[_name].stem:
        NEWEST[_name] = _path


@pytest.mark.parametrize("path", sorted(NEWEST.values()), ids=fixture_id)
def test_tileiras_compiles_what_we_write(path):
    """sm_90 first; kernels using Blackwell-only types (fp4, e8m0, e5m3) go to sm_100 or sm_107 (e5m3)."""
    original = path.read_bytes()
    ours = encoded(path)
    for gpu_name in ("sm_90", "sm_100", "sm_107"):
        reference = oracles.tileiras(original, gpu_name)
        if reference.returncode == 5 and "Incompatibility with architecture" in reference.stderr:
            continue
        assert reference.ok, reference.stderr
        result = oracles.tileiras(ours, gpu_name)
        assert result.ok, result.stderr
        return
    pytest.fail("tileiras compiles the original for none of sm_90, sm_100, sm_107")
