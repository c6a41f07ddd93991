"""Debug locations decoded on first use.

Most consumers of a decoded module never look at `op.loc`, and decoding the debug section's
attributes costs about a quarter of a full load. So the reader checks the debug section's framing and
index ranges at load time, and each function's op locations are decoded the first time any of them is
read (or written). Decoding errors found then are the same DecodeErrors, with the same file and byte
offset, that `load(..., lazy_debug=False)` raises at load time.
"""
from __future__ import annotations

from collections.abc import Sequence

from ..ir.module import Function, Op, Value
from .. import speedups

_LOC_SLOT = Op.__dict__["loc"]  # Op's own storage for `loc`, under the property below


class LocatedOp(Op):
    """An Op read from bytecode whose location is decoded: otherwise a plain Op.

    With the compiled helpers, `operands` and `attrs` are FieldsSlots: the C decoder leaves them
    as compact tuples, which the C printer, verifier and encoder read as they are, and the first
    read from Python turns into the dict (two dicts per op were a third of a decoded module's
    memory and of its decoding time). Read past the FieldsSlot (Op's member descriptor, or an op
    made a plain Op), a slot may hold those tuples."""

    __slots__ = ()

    if speedups.FieldsSlot is not None:
        operands = speedups.FieldsSlot(Op.__dict__["operands"])
        attrs = speedups.FieldsSlot(Op.__dict__["attrs"])


class DecodedOp(LocatedOp):
    """An Op read from bytecode: `loc` is materialised on first access.

    Until then its `loc` slot holds the function's PendingLocations (shared by all its ops: no
    slot of its own per op); an unset slot means no location."""

    __slots__ = ()

    def __init__(self, spec, operands, attrs, result_types, regions=None, loc=None, offset=None):
        # Op.__init__ spelled out (the careful reader makes one per op): no argument packing, and
        # `loc` stored in the slot, not through the property below.
        self.spec = spec
        self.operands = operands
        self.attrs = attrs
        self.results = [Value(t, self, i) for i, t in enumerate(result_types)]
        self.regions = regions or ()
        _LOC_SLOT.__set__(self, loc)
        self.offset = offset

    @property
    def loc(self):
        try:
            value = _LOC_SLOT.__get__(self, DecodedOp)
        except AttributeError:  # the fast decoder leaves the slot unset for "no location"
            return None
        if value.__class__ is PendingLocations:
            value.materialise()
            value = _LOC_SLOT.__get__(self, DecodedOp)
            # an op given the pending locations after they materialised has none
            return None if value.__class__ is PendingLocations else value
        return value

    @loc.setter
    def loc(self, value) -> None:
        try:
            current = _LOC_SLOT.__get__(self, DecodedOp)
        except AttributeError:
            current = None
        if current.__class__ is PendingLocations:
            current.materialise()  # the other ops of the function keep their decoded locations
        _LOC_SLOT.__set__(self, value)


# Stores an op's `loc` slot, bypassing DecodedOp's property (the fast decoder's pending locations).
store_loc_slot = _LOC_SLOT.__set__


def defer_location(op: Op, pending: PendingLocations | None) -> None:
    """Let `op`'s location come from `pending` on first use (None: keep what it has)."""
    if pending is not None:
        store_loc_slot(op, pending)


class PendingLocations:
    """One function's op locations, still as debug-attribute indices (`indices[0]` is the function's
    own; `ops` is filled in pre-order while the body is decoded)."""

    __slots__ = ("reader", "ops", "indices", "offset")

    def __init__(self, reader, ops: list[DecodedOp], indices: Sequence[int], offset: int):
        self.reader = reader
        self.ops = ops
        self.indices = indices
        self.offset = offset

    def materialise(self) -> None:
        ops = self.ops
        if ops is None:
            return
        # Decode everything before assigning anything: on error the function stays pending and
        # every later access raises the same error again.
        try:
            locations = self.reader.op_locations(self.indices, 1, len(ops) + 1, self.offset)
        except RecursionError:  # only with an absurd max_nesting; never let it escape
            raise self.reader.error("limit exceeded: debug attributes nested too deeply for "
                                    "Python's stack (lower max_nesting)", self.offset) from None
        _store_locations(ops, locations)
        self.ops = None
        self.reader = None


def _store_locations(ops: list, locations: list) -> None:
    """Each op's `loc` set to its location (the reader gave every op one), each op a LocatedOp
    from now on (the same slots): `op.loc` reads the slot, not DecodedOp's property (the verifier
    and `dis -g` read every op's location)."""
    store_locations = speedups.store_locations
    if store_locations is not None and locations.__class__ is list:  # the loop in C
        store_locations(ops, locations, _LOC_SLOT, LocatedOp)
    else:
        for op, loc in zip(ops, locations):
            store_loc_slot(op, loc)
            op.__class__ = LocatedOp


def pending_indices(function: Function):
    """(reader, ops, indices) while the locations of `function`, read from bytecode, are still
    undecoded: its ops in pre-order and the debug-table indices of its own location and then
    theirs (0: none; a sequence of ints, not to be changed), the reader that decodes them. For an
    entry without debug info: (None, [], [0]). None once they were decoded, or for an entry not
    read from bytecode."""
    if function.__class__ is not DecodedFunction:
        return None
    pending = function.__dict__.get("_pending_loc")
    ops = function.body.ops
    try:
        locations = _LOC_SLOT.__get__(ops[0], DecodedOp) if ops else None
    except AttributeError:  # no location: the entry has no debug info
        locations = None
    if pending is None:
        # no debug info: neither the entry nor its ops have a location (one read already
        # was decoded: the objects tell)
        plain = function.__dict__.get("_loc") is None and locations is None
        return (None, [], [0]) if plain else None
    reader, index, _ = pending
    if not ops:
        return reader, [], [index]
    if locations is None:
        return None
    if locations.__class__ is not PendingLocations or locations.ops is None:
        return None
    count = len(locations.ops)
    indices = locations.indices[:count + 1]
    if len(indices) != count + 1 or indices[0] != index:
        return None
    return reader, locations.ops, indices


def locations_as_indices(function: Function, ops: list, indices: list) -> None:
    """Set the `loc` of `function` and of its `ops` to their debug-table `indices` (ints, 0 for
    none) as pending_indices gave them, instead of decoding them: for a printer whose location
    texts are made elsewhere (`tilebc dis -g`, tilebc/alias_aside.py)."""
    if ops:
        _store_locations(ops, list(indices[1:]))
    function.loc = indices[0]


class DecodedFunction(Function):
    """A Function read from bytecode whose `loc` is decoded on first access (see module docstring)."""

    # Set per instance while the location is still an index: (reader, index, file offset).
    _pending_loc = None

    @property
    def loc(self):
        pending = self._pending_loc
        if pending is not None:
            reader, index, offset = pending
            try:
                self.__dict__["_loc"] = reader.location(index, offset)
            except RecursionError:  # only with an absurd max_nesting; never let it escape
                raise reader.error("limit exceeded: debug attributes nested too deeply for "
                                   "Python's stack (lower max_nesting)", offset) from None
            self._pending_loc = None
        return self.__dict__.get("_loc")

    @loc.setter
    def loc(self, value) -> None:
        self._pending_loc = None
        self.__dict__["_loc"] = value

    def __eq__(self, other):
        # Equal to a plain Function with the same fields (Function's __eq__ wants one class).
        if not isinstance(other, Function):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in Function._fields)

    __hash__ = None
