"""Value classes without dataclass generation at import.

`@dataclass` writes and compiles several methods per class when its module is imported (~0.6 ms
a class): most of `tilebc dis`'s start-up. A `Record` (frozen) or `Struct` (mutable) subclass
writes its own `__init__` and lists its fields in `_fields`; equality, hashing, repr and `replace`
come from here, with the meaning a dataclass gives them.
"""
from __future__ import annotations

from operator import attrgetter


class FrozenError(AttributeError):
    """Assignment to a field of a frozen record."""


def _no_values(record) -> tuple:
    return ()


class Struct:
    """A mutable value class: equality and repr over `_fields`, unhashable (a dataclass with
    eq=True)."""

    __slots__ = ()
    # Fields in declaration order: compared (and, for a Record, hashed); `_shown` (default: the
    # same) are the fields repr shows (a dataclass field with compare=False may still be shown).
    _fields: tuple[str, ...] = ()
    _shown: tuple[str, ...] = ()
    _values = staticmethod(_no_values)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        own = cls.__dict__
        if "_fields" in own:
            fields = own["_fields"]
            # One C call collects the compared fields (a tuple even for one field).
            getter = attrgetter(*fields) if len(fields) > 1 else \
                (lambda record, name=fields[0]: (getattr(record, name),)) if fields else _no_values
            cls._values = staticmethod(getter)  # called as self._values(self)
            if "_shown" not in own:
                cls._shown = fields

    def __eq__(self, other):
        if self is other:  # what comparing the fields finds (tuples check identity first)
            return True
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values(self) == other._values(other)

    __hash__ = None

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._shown)
        return f"{self.__class__.__qualname__}({shown})"


class Record(Struct):
    """A frozen value class (a dataclass with frozen=True): also hashable, and `replace` makes a
    changed copy."""

    __slots__ = ()

    def __setattr__(self, name, value):
        raise FrozenError(f"cannot assign to field {name!r}")

    def __delattr__(self, name):
        raise FrozenError(f"cannot delete field {name!r}")

    def __hash__(self):
        return hash(self._values(self))

    def replace(self, **changes):
        """A copy with `changes` applied (dataclasses.replace)."""
        return self.__class__(**{name: changes.pop(name, getattr(self, name))
                                 for name in self._init_fields()}, **changes)

    @classmethod
    def _init_fields(cls) -> tuple[str, ...]:
        code = cls.__init__.__code__
        return code.co_varnames[1:code.co_argcount + code.co_kwonlyargcount]
