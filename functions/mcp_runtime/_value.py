"""Value objects for the modules a cold start imports: equality, hash and repr from declarations.

A `@dataclass` writes and compiles its methods when its class is created, so each one costs a cold
start about 2.6 M instructions (bench/README.md, "Plain records on the cold path"). The modules on
the path of a first request declare their records as plain slotted classes with their own
`__init__`, and the values among them take equality, hash and repr from `ValueObject` (a base of
such classes; a task item is `tasks.models.TaskRecord`, unrelated); `tests/unit/test_cold_path.py`
keeps dataclasses off that path. Modules imported later (the task side, handles, the legacy leg) keep dataclasses.

A value object is not frozen: nothing in the runtime changes one after it is made.
"""

from __future__ import annotations

import inspect
from typing import Any, ClassVar


class ValueObject:
    """Equal when of the same class with equal compared attributes; hashed and shown by them.

    The compared attributes are the public attributes the class and its bases declare (annotate), in
    that order, or the names given as `class X(ValueObject, compare=(...))`.
    """

    __slots__ = ()
    _compared: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, compare: tuple[str, ...] | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if compare is None:
            declared: list[str] = []
            for klass in reversed(cls.__mro__):
                declared.extend(inspect.get_annotations(klass))
            compare = tuple(name for name in declared if not name.startswith("_"))
        cls._compared = compare

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._compared)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ValueObject) or other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._compared)
        return f"{type(self).__name__}({shown})"
