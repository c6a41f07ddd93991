"""DecodeLimits: every limit is hit by a crafted file, refused with a "limit exceeded" DecodeError
naming the limit, and the same file decodes once the limit is raised (so the limit, and nothing
else, is what refused it). Also: no RecursionError however deep a file nests.
"""
from __future__ import annotations

import struct
import time

import pytest

import tilebc
from tilebc.binary import DecodeLimits
from test_malformed import (CONSTANTS, TYPES, V13_3, debug_section, fixture_bytes,  # noqa: F401
                            materialise_locations, module_bytes, varint)

RETURN = b"\x5c\x00\x00"
FOR_HEADER = b"\x29\x00\x00\x03\x01\x01\x01"   # for: 0 results, flags 0, operands %1 %1 %1
LOOP_REGION = b"\x01\x01\x01\x04"              # 1 region, 1 block, 1 argument of type[4] tile<i32>
CONTINUE = b"\x11\x00\x00"


def decode(*args, **kwargs):
    """The decoder alone: these files are crafted to hit limits, not to be valid IR."""
    return tilebc.load(*args, verify=False, **kwargs)


def nested_loops(depth: int) -> bytes:
    """`depth` for loops, each the body of the one outside it (regions nested `depth` deep)."""
    # Each outer block holds 2 ops (the next loop, continue); the innermost holds 1 (continue).
    opening = (b"\x02" + FOR_HEADER + LOOP_REGION) * (depth - 1)
    inner = opening + b"\x01" + CONTINUE + CONTINUE * (depth - 1)
    body = b"\x10\x04\x00" + FOR_HEADER + LOOP_REGION + inner + RETURN   # %1 = constant
    return module_bytes(V13_3, constants=CONSTANTS, body=body)


def nested_hint_arrays(depth: int) -> bytes:
    """Function hints {sm_90 = {sm_90 = [[...[true]...]]}} with `depth` nested arrays."""
    value = b"\x06\x01" * depth + b"\x03\x01"
    return module_bytes(V13_3, hints=b"\x0b\x01\x01\x0a\x01\x01" + value)


def type_chain(length: int) -> bytes:
    """The signature's input is a function type whose input is a function type ... `length` deep."""
    first = len(TYPES)
    chain = [b"\x10\x01" + varint(first + i + 1) + b"\x00" for i in range(length)] + [b"\x07"]
    signature = b"\x10\x01" + varint(first) + b"\x00"
    return module_bytes(V13_3, types=TYPES[:2] + (signature,) + TYPES[3:] + tuple(chain))


def scope_chain(blocks: int) -> bytes:
    """`return` located in a lexical block nested `blocks` deep in a subprogram."""
    attrs = [b"\x02\x00\x00",                       # 1: file "k" in "k"
             b"\x01\x01",                           # 2: compile unit (file 1)
             b"\x05\x01\x00\x00\x00\x02\x00"]       # 3: subprogram (file 1, line 0, k, k, unit 2)
    scope = 3
    for _ in range(blocks):
        attrs.append(b"\x03" + varint(scope) + b"\x01\x00\x00")   # lexical block in `scope`
        scope = len(attrs)
    attrs.append(b"\x04" + varint(scope) + b"\x00\x01\x00")       # loc in the innermost scope
    attrs.append(b"\x04\x03\x00\x01\x00")                          # the function's loc
    return module_bytes(V13_3, loc=1, debug=debug_section([len(attrs), len(attrs) - 1], attrs))


def big_tile(shape) -> bytes:
    """%1 = constant tile<shape x f32> (a splat); return."""
    tile = b"\x0d\x00" + varint(len(shape)) + struct.pack(f"<{len(shape)}q", *shape)
    return module_bytes(V13_3, types=TYPES[:5] + (tile,), constants=(b"\x04\x00\x00\x00\x00",),
                        body=b"\x10\x05\x00" + RETURN)


def assert_limit(data: bytes, limits: DecodeLimits, pattern: str, *, strict: bool = True):
    with pytest.raises(tilebc.DecodeError, match=pattern) as info:
        decode(data, limits=limits, lazy_debug=not strict)
    error = info.value
    assert error.message.startswith("limit exceeded:"), error.message
    assert error.category == "malformed"
    assert type(error.offset) is int and 0 <= error.offset <= len(data)
    return error


def test_limits_validate_themselves():
    with pytest.raises(ValueError, match="max_ops"):
        DecodeLimits(max_ops=0)
    with pytest.raises(ValueError, match="max_nesting"):
        DecodeLimits(max_nesting=True)


def test_max_input_bytes(tmp_path):
    data = fixture_bytes("13.3")
    assert_limit(data, DecodeLimits(max_input_bytes=len(data) - 1),
                 rf"input is {len(data)} bytes, more than max_input_bytes={len(data) - 1}")
    path = tmp_path / "k.tilebc"
    path.write_bytes(data)
    with pytest.raises(tilebc.DecodeError, match="max_input_bytes") as info:
        decode(path, limits=DecodeLimits(max_input_bytes=100))
    assert info.value.file == str(path)
    decode(data, limits=DecodeLimits(max_input_bytes=len(data)))


def test_region_nesting():
    assert_limit(nested_loops(6), DecodeLimits(max_nesting=5),
                 r"regions nested deeper than max_nesting=5")
    decode(nested_loops(5), limits=DecodeLimits(max_nesting=5))


def test_region_nesting_never_recursion_error():
    """100,000 nested loops with the default limits: a prompt DecodeError, not a RecursionError."""
    data = nested_loops(100_000)
    started = time.perf_counter()
    assert_limit(data, DecodeLimits(), r"regions nested deeper than max_nesting=64")
    assert time.perf_counter() - started < 2
    # Even a caller who sets an absurd limit gets a DecodeError, never a RecursionError.
    with pytest.raises(tilebc.DecodeError, match="limit exceeded"):
        decode(data, limits=DecodeLimits(max_nesting=10**6))


def test_attribute_nesting():
    assert_limit(nested_hint_arrays(12), DecodeLimits(max_nesting=10),
                 r"attributes nested deeper than max_nesting=10")
    decode(nested_hint_arrays(8), limits=DecodeLimits(max_nesting=10))


def test_type_reference_nesting():
    assert_limit(type_chain(20), DecodeLimits(max_nesting=10),
                 r"type \d+ is reached through more than max_nesting=10 nested type references")
    decode(type_chain(5), limits=DecodeLimits(max_nesting=10))
    assert_limit(type_chain(5000), DecodeLimits(), r"type \d+ is reached through more than")


def test_debug_reference_nesting():
    limits = DecodeLimits(max_nesting=10)
    data = scope_chain(20)
    assert_limit(data, limits, r"debug attribute \d+ is reached through more than max_nesting=10")
    # Lazily: the load succeeds, the first read of the location raises the same error.
    module = decode(data, limits=limits)
    with pytest.raises(tilebc.DecodeError, match="max_nesting=10 nested references"):
        materialise_locations(module)
    module = decode(scope_chain(5), limits=limits, lazy_debug=False)
    assert module.functions[0].body.ops[-1].loc.line == 1
    # A chain far beyond Python's recursion limit, default limits: DecodeError at first access.
    for limits in (DecodeLimits(), DecodeLimits(max_nesting=10**6)):
        module = decode(scope_chain(5000), limits=limits)
        with pytest.raises(tilebc.DecodeError, match="limit exceeded"):
            materialise_locations(module)


@pytest.mark.parametrize("name, data", [
    ("nested_loops(5)", nested_loops(5)), ("nested_hint_arrays(8)", nested_hint_arrays(8)),
    ("scope_chain(5)", scope_chain(5)), ("big_tile((4, 8))", big_tile((4, 8)))])
def test_crafted_baselines_valid_for_nvidia(name, data):
    """The crafted files below a limit are valid bytecode: tileirdisasm accepts them."""
    from test_malformed import _tileirdisasm, nvidia_run
    if _tileirdisasm() is None:
        pytest.skip("tileirdisasm is not installed")
    rc, err = nvidia_run(data)
    assert rc == 0, f"tileirdisasm rejects {name}: {err}"


def test_max_ops():
    data = fixture_bytes("13.3")
    ops = sum(1 for _ in decode(data).walk())
    assert_limit(data, DecodeLimits(max_ops=ops - 1),
                 rf"function '\w+' brings the module to {ops} ops, more than max_ops={ops - 1}")
    decode(data, limits=DecodeLimits(max_ops=ops))


def test_max_values():
    data = nested_loops(3)     # 1 argument + constant + 3 loop block arguments in scope
    assert_limit(data, DecodeLimits(max_values=4), r"more than max_values=4 values in scope")
    decode(data, limits=DecodeLimits(max_values=5))


def test_max_types():
    data = fixture_bytes("13.3")
    count = len(TYPES)
    crafted = module_bytes(V13_3)
    assert_limit(crafted, DecodeLimits(max_types=count - 1),
                 rf"type table has {count} entries, more than max_types={count - 1}")
    decode(crafted, limits=DecodeLimits(max_types=count))
    assert_limit(data, DecodeLimits(max_types=1), r"type table has \d+ entries")


def test_max_tile_elements():
    assert_limit(big_tile((4, 8)), DecodeLimits(max_tile_elements=31),
                 r"tile shape \[4, 8\] has more than max_tile_elements=31 elements")
    decode(big_tile((4, 8)), limits=DecodeLimits(max_tile_elements=32))
    # A shape whose element count overflows int64 is refused before anything is multiplied out.
    huge = (1 << 62, 1 << 62, 1 << 62)
    assert_limit(big_tile(huge), DecodeLimits(), r"tile shape .* has more than "
                 r"max_tile_elements=16777216 elements")


def test_overlapping_table_entries_are_bounded():
    """A string table with out-of-order offsets is read as NVIDIA slices it (each entry may run to
    the end of the data), so entries can overlap; the bytes they span beyond the table's size are
    bounded by max_overlap_bytes, so n entries of n bytes are never all copied."""
    import time
    from test_malformed import STRING, V13_3, _section, module_bytes, varint
    from tilebc.binary.primitives import Writer
    count = 2000
    data = b"k" + b"x" * (4 * count)
    table = Writer()
    table.varint(count)
    table.align(4)
    for index in range(count):  # even entries start at their index and run to the end
        table.fixed(index if index % 2 == 0 else 0, 4)
    table.raw(data)
    keys = list(range(2, count, 2))
    hints = (b"\x0b\x01\x01\x0a" + varint(len(keys))
             + b"".join(varint(key) + b"\x03\x01" for key in keys))
    bytecode = module_bytes(V13_3, hints=hints, name=2,
                            sections=_section(STRING, bytes(table.buf), align=4))
    started = time.process_time()
    with pytest.raises(tilebc.DecodeError, match="limit exceeded: .* max_overlap_bytes=100000"):
        tilebc.load(bytecode, verify=False, limits=DecodeLimits(max_overlap_bytes=100_000))
    assert time.process_time() - started < 0.5
    module = tilebc.load(bytecode, verify=False)  # the default bound lets this (8 MB) through
    assert len(module.functions[0].optimization_hints.entries[0][1].entries) == len(keys)
