"""Immutable value records without the import cost of dataclasses.

``@dataclass`` writes each class's methods as source and runs ``exec`` on it at import:
about half a millisecond a class, and `agentvisor exec` imports dozens of them on every
run. A `Record` subclass names its fields in ``__match_args__`` (in order, as a dataclass
would) and ``__slots__``, and sets them in its own ``__init__`` (with `init`): equality,
hashing, repr and immutability are exactly those of a frozen dataclass. A `Struct` is the
same with fields that can be reassigned (a plain ``@dataclass``: compared, not hashable).
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError  # loaded anyway: agentvisor.actions uses dataclasses

init = object.__setattr__  # how an __init__ sets a field of a frozen record


class Record:
    __slots__ = ()
    __match_args__: tuple[str, ...] = ()  # the fields in order (a subclass's __slots__ too)

    def _values(self) -> tuple[object, ...]:
        return tuple([getattr(self, name) for name in self.__match_args__])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._values() == other._values()  # type: ignore[attr-defined]
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__match_args__)
        return f"{self.__class__.__qualname__}({fields})"

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")


class Struct(Record):
    """A record whose fields can be reassigned: compared like a dataclass, never hashed."""

    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]
    __setattr__ = object.__setattr__
    __delattr__ = object.__delattr__
