"""Resource limits for decoding untrusted bytecode.

Every count and length in a file is checked against the bytes that remain before anything is
allocated or looped over, so the work and memory of a decode are proportional to the file size.
These limits bound what is left: how large a file we take at all, how deep structures may nest (the
decoder recurses, so this also keeps it far from Python's recursion limit), how many ops, values and
types a module may declare, how many elements a tile type may have (consumers create arrays of
that size, so an absurd shape is refused when the type is read), how long the text of a function
type may be (table entries refer to one another, so a few hundred bytes can describe a type whose
text is exponentially long: the IR keeps it as a DAG, but printing unfolds it), and how far the
entries of a table with out-of-order offsets may overlap (read as NVIDIA reads them, each entry may run to the end of
the data; without a bound n entries of n bytes would be copied). Exceeding a limit raises a
DecodeError (category "malformed") whose message starts "limit exceeded:" and names the limit, so a
caller who trusts the input can raise it: `tilebc.load(data, limits=DecodeLimits(max_ops=10**8))`.
"""
from __future__ import annotations

from ..record import Record


class DecodeLimits(Record):
    max_input_bytes: int = 1 << 30      # size of the bytecode; every decoded blob is a slice of it
    max_nesting: int = 64               # regions in regions, attributes in attributes, and chains of
    #                                     type or debug-attribute references
    max_ops: int = 1 << 24              # ops in the module (checked after each function body)
    max_values: int = 1 << 22           # SSA values in scope at once in one function, and
    #                                     parameters of all entries together (entries may share
    #                                     one signature type)
    max_types: int = 1 << 20            # entries of the type table
    max_tile_elements: int = 1 << 24    # elements of one tile type (product of its shape)
    max_type_text: int = 1 << 16        # characters of one function type's text: entries of
    #                                     the type table refer to earlier entries, so n of them
    #                                     can describe a type whose text has 2^n characters,
    #                                     which printing or a message would spell out
    max_overlap_bytes: int = 1 << 26    # bytes by which the entries read from one table whose
    #                                     offsets are out of order (read leniently, as NVIDIA does)
    #                                     may exceed the table's size: overlapping entries

    # A frozen record (tilebc/record.py); the defaults above are the class's own attributes.
    _fields = ("max_input_bytes", "max_nesting", "max_ops", "max_values", "max_types",
               "max_tile_elements", "max_type_text", "max_overlap_bytes")

    def __init__(self, max_input_bytes: int = max_input_bytes, max_nesting: int = max_nesting,
                 max_ops: int = max_ops, max_values: int = max_values, max_types: int = max_types,
                 max_tile_elements: int = max_tile_elements, max_type_text: int = max_type_text,
                 max_overlap_bytes: int = max_overlap_bytes):
        values = (max_input_bytes, max_nesting, max_ops, max_values, max_types,
                  max_tile_elements, max_type_text, max_overlap_bytes)
        for name, value in zip(self._fields, values):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"DecodeLimits.{name} must be a positive int, got {value!r}")
            object.__setattr__(self, name, value)


DEFAULT_LIMITS = DecodeLimits()
