"""Value records: the one way agentvisor declares a value type.

``@dataclass`` writes each class's methods as source and runs ``exec`` on it at import
(about half a millisecond a class), and importing ``dataclasses`` itself pulls in
``inspect`` (another 10 ms and more on a slow machine); `agentvisor exec` pays both on
every run. `Declared` gives the same behaviour without either:

- a record is declared like a dataclass, by annotated fields with class level defaults
  (`Default(factory=list)` for a fresh list or record per instance); frozen unless the class
  says ``frozen=False``; type checkers see it as a dataclass (`typing.dataclass_transform`);
- equality, hashing, repr and immutability are those of a (frozen) dataclass;
  ``_uncompared`` names fields left out of equality and hashing;
- its ``__init__`` is compiled from the fields when the first instance is made, so a class
  that is never used costs nothing;
- `replace(record, **changes)` and `asdict(record)` are `dataclasses.replace` and
  `dataclasses.asdict`.
"""

from __future__ import annotations

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, ClassVar, TypeVar, dataclass_transform

    _T = TypeVar("_T")
else:

    def dataclass_transform(**kwargs: object) -> Callable[[type], type]:
        """At run time a no-op: only type checkers read the decorator."""
        return lambda cls: cls


class FrozenInstanceError(AttributeError):
    """Assigning to a field of a frozen record (as `dataclasses.FrozenInstanceError`)."""


class _Record:
    __slots__ = ()
    __match_args__: tuple[str, ...] = ()  # the fields in order (a subclass's __slots__ too)

    def _values(self) -> tuple[object, ...]:
        return tuple([getattr(self, name) for name in self.__match_args__])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._values() == other._values()
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


class _Factory:
    __slots__ = ("factory",)

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.factory = factory


def Default(*, factory: Callable[[], _T]) -> _T:
    """A field default made afresh for each instance (``field(default_factory=...)``):
    write ``Default(factory=list)`` (the keyword is what type checkers read)."""
    return _Factory(factory)  # type: ignore[return-value]


@dataclass_transform(frozen_default=True, field_specifiers=(Default,))
class Declared(_Record):
    """A record whose fields are its annotations, in order; a class attribute of the same
    name is the field's default. ``_uncompared`` names fields left out of equality and
    hashing (``field(compare=False)``). ``class X(Declared, frozen=False)`` makes a record
    whose fields can be reassigned (a plain ``@dataclass``: compared, never hashed)."""

    __slots__ = ()
    _defaults: ClassVar[dict[str, Any]] = {}
    _uncompared: ClassVar[tuple[str, ...]] = ()
    _compared: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def _declare(cls, frozen: bool) -> None:
        if not frozen:
            cls.__setattr__ = object.__setattr__  # type: ignore[method-assign,assignment]
            cls.__delattr__ = object.__delattr__  # type: ignore[method-assign]
            cls.__hash__ = None  # type: ignore[assignment]
        # Not inspect.get_annotations: importing inspect is what this module avoids.
        names = tuple(cls.__dict__.get("__annotations__", {}))  # noqa: RUF063
        cls.__match_args__ = names  # type: ignore[misc]
        cls._defaults = {name: cls.__dict__[name] for name in names if name in cls.__dict__}
        for name in cls._defaults:
            delattr(cls, name)
        cls._compared = tuple(name for name in names if name not in cls._uncompared)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # The first instance of a class compiles its own __init__ (as dataclasses does at
        # class creation, but only for classes that are used): the policy builds dozens of
        # records per decision, and a generic __init__ costs three times as much.
        cls = type(self)
        cls.__init__ = _compile_init(cls)  # type: ignore[method-assign]
        cls.__init__(self, *args, **kwargs)

    def __init_subclass__(cls, frozen: bool = True, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" not in cls.__dict__:
            # Each class compiles its own (a subclass must not inherit its parent's).
            cls.__init__ = Declared.__init__  # type: ignore[method-assign]
        cls._declare(frozen)

    def _values(self) -> tuple[object, ...]:
        return tuple([getattr(self, name) for name in self._compared])


_MISSING = object()


def _compile_init(cls: type[Declared]) -> Callable[..., None]:
    """An ``__init__`` for ``cls`` with its fields as parameters, in order, their defaults as
    parameter defaults; a field without a default after one with a default is checked at
    run time (a declaration dataclasses would refuse)."""
    names = cls.__match_args__
    params, body = [], []
    scope: dict[str, Any] = {"_MISSING": _MISSING}
    seen_default = False
    for name in names:
        default = cls._defaults.get(name, _MISSING)
        if isinstance(default, _Factory):
            scope[f"_f_{name}"] = default.factory
            params.append(f"{name}=_MISSING")
            body.append(f"  if {name} is _MISSING: {name} = _f_{name}()")
        elif default is not _MISSING:
            scope[f"_d_{name}"] = default
            params.append(f"{name}=_d_{name}")
        elif seen_default:
            params.append(f"{name}=_MISSING")
            body.append(
                f"  if {name} is _MISSING: "
                f"raise TypeError('{cls.__name__}() needs a value for {name!r}')"
            )
        else:
            params.append(name)
        seen_default = seen_default or default is not _MISSING
    fields = ", ".join(f"{name!r}: {name}" for name in names)
    body.append(f"  self.__dict__.update({{{fields}}})")
    source = f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body) + "\n"
    exec(source, scope)  # the source is made from the class's own field names only
    init_fn: Callable[..., None] = scope["__init__"]
    init_fn.__qualname__ = f"{cls.__qualname__}.__init__"
    return init_fn


def replace(record: Any, **changes: Any) -> Any:
    """A copy of ``record`` with some fields changed (`dataclasses.replace`)."""
    names = record.__match_args__
    unknown = set(changes) - set(names)
    if unknown:
        raise TypeError(f"{type(record).__name__} has no field {sorted(unknown)[0]!r}")
    return type(record)(**{name: changes.get(name, getattr(record, name)) for name in names})


def asdict(record: Any) -> dict[str, Any]:
    """The fields of ``record`` as a dict, records within as dicts too (`dataclasses.asdict`)."""
    return {name: _plain(getattr(record, name)) for name in record.__match_args__}


def _plain(value: Any) -> Any:
    if isinstance(value, _Record):
        return asdict(value)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_plain(item) for item in value)
    if isinstance(value, dict):
        return {_plain(key): _plain(item) for key, item in value.items()}
    return value
