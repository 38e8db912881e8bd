"""The registry: each patch is a named unit that records what it replaces, so it can be undone."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import moto

MOTO_VERSION: Final = "5.2.5"
if moto.__version__ != MOTO_VERSION:
    raise ImportError(
        f"local_stack.moto_patches patches internals of moto {MOTO_VERSION}, found moto {moto.__version__}: "
        f"pin moto=={MOTO_VERSION} or port the patches (local_stack/moto_patches/README.md says how)"
    )

_MISSING: Final = object()


@dataclass
class Patcher:
    """Replaces attributes of moto's modules and classes for one patch, remembering what was there."""

    patch: str
    _undo: list[tuple[Any, str, Any]] = field(default_factory=list)

    def original(self, owner: Any, name: str) -> Any:
        """The attribute as it is now (moto's own unless another patch wrapped it); fails loudly when
        this moto has no such attribute, since the patch was written against moto's internals."""
        value = getattr(owner, name, _MISSING)
        if value is _MISSING:
            raise RuntimeError(
                f"moto patch {self.patch!r}: moto {moto.__version__} has no {owner!r}.{name}; "
                f"the patch is written against moto {MOTO_VERSION} internals"
            )
        return value

    def require(self, owner: Any, *names: str) -> None:
        """Fail loudly unless moto has these attributes (what a replacement relies on, unreplaced)."""
        for name in names:
            self.original(owner, name)

    def replace(self, owner: Any, name: str, value: Any) -> None:
        self._undo.append((owner, name, self.original(owner, name)))
        setattr(owner, name, value)

    def wrap(self, owner: Any, name: str, build: Callable[[Any], Any]) -> None:
        """Replace `owner.name` by `build(the current attribute)`."""
        self.replace(owner, name, build(self.original(owner, name)))

    def undo(self) -> None:
        while self._undo:
            owner, name, value = self._undo.pop()
            setattr(owner, name, value)


@dataclass(frozen=True)
class Patch:
    """One change to moto 5.2.5: what AWS does, what moto does instead, and how it is applied.

    `aws` and `moto` are one or two sentences each; `reference` is the AWS documentation page the
    AWS behaviour is taken from. `group` is who applies it: "emulation" (every embedded moto:
    `local_stack.aws`) or "iam" (enforcement: `local_stack.iam_enforcement`)."""

    name: str
    group: str
    aws: str
    moto: str
    reference: str
    install: Callable[[Patcher], None]


_lock = threading.RLock()
_registry: dict[str, Patch] = {}
_applied: dict[str, Patcher] = {}
_held_out: set[str] = set()  # by `without`: apply() leaves these out until the block ends


def register(patch: Patch) -> Patch:
    if patch.name in _registry:
        raise ValueError(f"moto patch {patch.name!r} is registered twice")
    _registry[patch.name] = patch
    return patch


def patches() -> tuple[Patch, ...]:
    """Every registered patch, in the order they are applied."""
    return tuple(_registry.values())


def applied() -> tuple[str, ...]:
    """The names of the patches in force now."""
    with _lock:
        return tuple(_applied)


def _install(names: list[str]) -> None:
    for name in names:
        if name not in _applied and name not in _held_out:
            patcher = Patcher(name)
            try:
                _registry[name].install(patcher)
            except BaseException:
                patcher.undo()
                raise
            _applied[name] = patcher


def _undo_all() -> None:
    for name in reversed(list(_applied)):
        _applied.pop(name).undo()


def apply(*groups: str) -> None:
    """Apply every patch of these groups (all when none are named) that is not in force yet."""
    with _lock:
        unknown = set(groups) - {patch.group for patch in _registry.values()}
        if unknown:
            raise ValueError(f"no moto patch group {sorted(unknown)}")
        _install([patch.name for patch in _registry.values() if not groups or patch.group in groups])


@contextmanager
def without(*names: str) -> Iterator[None]:
    """Inside the block, moto runs without these patches (`apply` leaves them out too), the others in
    force before still in force: for the patch tests, moto's own behaviour beside the AWS one.
    Afterwards the patches in force before are again, re-applied on moto's own attributes.
    Process-wide: for tests run one at a time."""
    unknown = set(names) - set(_registry)
    if unknown:
        raise ValueError(f"no moto patch {sorted(unknown)}")
    with _lock:
        before, held_before = list(_applied), set(_held_out)
        _undo_all()
        _held_out.update(names)
        try:
            _install([name for name in _registry if name in before])
            yield
        finally:
            _undo_all()
            _held_out.clear()
            _held_out.update(held_before)
            _install([name for name in _registry if name in before])
