"""Values that may share sub-values: linear-time hashing, equality and bounded renderings.

Tables in the bytecode (types, debug attributes) and aliases in the text refer to one another by
index, so a file of n entries can describe a value whose tree has 2^n nodes: a function type
`Tk = (Tk-1, Tk-1) -> ()`, a call site `callsite(#locN at #locN)`. The readers build such a value
once per entry, as a DAG. Every walk over it must therefore visit each distinct sub-value once:

* `cached_hash`: a frozen dataclass or record computes its hash once and keeps it, so hashing a
  DAG costs one step per distinct node (the dataclass default rehashes the whole tree on every call);
* `shared_node`: equality of two values of a class whose instances nest (function types, call
  sites) compares each pair of sub-values once, whatever the sharing (`dag_equal`);
* `brief`: a bounded rendering for messages and reprs, whatever the size of the tree.
"""
from __future__ import annotations

from collections.abc import Callable

from .. import speedups

# class -> names of the fields that take part in equality and hashing
_DAG_FIELDS: dict[type, tuple[str, ...]] = {}

BRIEF_LIMIT = 200  # characters of a value's text that messages show
REPR_LIMIT = 4000  # characters of a repr


def _compared_fields(cls) -> tuple[str, ...]:
    if "__dataclass_fields__" not in cls.__dict__:  # a Record (tilebc/record.py)
        return tuple(cls._fields)
    import dataclasses
    return tuple(f.name for f in dataclasses.fields(cls)
                 if (f.compare if f.hash is None else f.hash))


def _getstate(self):
    # str hashes differ between processes: a pickled or copied value recomputes its own.
    state = dict(self.__dict__)
    for key in ("_hash", "_text_size"):
        state.pop(key, None)
    return state


def cached_hash(cls):
    """Class decorator (after @dataclass(frozen=True), or on a Record): the structural hash,
    computed once."""
    names = _compared_fields(cls)

    def __hash__(self):
        own = self.__dict__
        try:
            return own["_hash"]
        except KeyError:
            pass
        value = hash(tuple([getattr(self, name) for name in names]))
        own["_hash"] = value
        return value

    cls.__hash__ = __hash__
    cls.__getstate__ = _getstate
    cls._hash_fields = names  # what __hash__ hashes, for the C slot (speedups.keep_hash)
    if speedups.keep_hash is not None and "__slots__" not in cls.__dict__:
        speedups.keep_hash(cls)  # the kept hash read in C: these are dict keys, hashed often
    return cls


def shared_node(cls):
    """Class decorator (after @dataclass(frozen=True)) for values that nest in one another and
    may be shared: cached hash, linear-time equality and a bounded repr."""
    _DAG_FIELDS[cls] = _compared_fields(cls)

    def __eq__(self, other):
        if self is other:
            return True
        if other.__class__ is not self.__class__:
            return NotImplemented
        return dag_equal(self, other)

    cls.__eq__ = __eq__
    cls.__repr__ = lambda self: brief(self, repr, REPR_LIMIT)
    if not hasattr(cls, "_text_pieces"):
        cls._text_pieces = repr_pieces
    return cached_hash(cls)


def repr_pieces(self, render):
    """The dataclass repr as pieces: strings, and the nested shared values in between."""
    yield self.__class__.__name__ + "("
    for index, name in enumerate(_DAG_FIELDS[self.__class__]):
        yield f"{', ' if index else ''}{name}="
        yield from _value_pieces(getattr(self, name))
    yield ")"


def _value_pieces(value):
    if value.__class__ is tuple:
        yield "("
        for index, item in enumerate(value):
            if index:
                yield ", "
            yield from _value_pieces(item)
        yield ",)" if len(value) == 1 else ")"
    elif value.__class__ in _DAG_FIELDS:
        yield value
    else:
        yield repr(value)


def dag_equal(left, right) -> bool:
    """Structural equality that compares each pair of sub-values once (pairs of distinct objects
    already found equal, or being compared, are not compared again), so two equal DAGs compare
    in time linear in their distinct nodes rather than in their unfolded size."""
    seen = set()
    stack = [(left, right)]
    while stack:
        a, b = stack.pop()
        if a is b:
            continue
        if a.__class__ is not b.__class__:
            return False
        names = _DAG_FIELDS.get(a.__class__)
        if names is None:
            if a.__class__ is tuple:
                if len(a) != len(b):
                    return False
                stack.extend(zip(a, b))
            elif a != b:
                return False
            continue
        key = (id(a), id(b))  # both stay alive while `left` and `right` do
        if key in seen:
            continue
        if hash(a) != hash(b):
            return False
        seen.add(key)
        stack.extend((getattr(a, name), getattr(b, name)) for name in names)
    return True


def brief(value, render: Callable[[object], str] = str, limit: int = BRIEF_LIMIT) -> str:
    """`value`'s text cut to about `limit` characters (then ending in `…`), built without
    unfolding more of a shared structure than it shows."""
    out: list[str] = []
    if _emit(value, render, out, limit) < 0:
        return "".join(out)[:limit] + "…"
    return "".join(out)


def _emit(value, render, out: list[str], budget: int) -> int:
    """Appends pieces of `value`'s text to `out`; returns the budget left (< 0: cut short)."""
    pieces = getattr(value, "_text_pieces", None)
    if pieces is None or value.__class__ not in _DAG_FIELDS:
        text = render(value)
        out.append(text)
        return budget - len(text)
    for piece in pieces(render):
        if budget < 0:
            return budget
        if isinstance(piece, str):
            out.append(piece)
            budget -= len(piece)
        else:
            budget = _emit(piece, render, out, budget)
    return budget
