"""The wheelhouse (build/wheelhouse/<target>/) is shared by every process that builds an asset: the synth, each
local stack's start, `make add-dependency`. Filling it is one process at a time: two `pip download`s into one
folder delete each other's half-written wheels (a fresh clone's `make test` once failed a stack's start so:
`FileNotFoundError: .../typing_inspection-0.4.5-py3-none-any.whl`)."""

from __future__ import annotations

import fcntl
import threading
from pathlib import Path

import pytest

from infra import packaging

pytestmark = pytest.mark.infra


def test_a_process_filling_the_wheelhouse_holds_it_until_its_install_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheelhouse = tmp_path / "wheelhouse" / packaging.LAMBDA_TARGET.slug
    calls: list[tuple[str, str]] = []

    def pip(*args: str) -> object:
        calls.append((threading.current_thread().name, args[0]))
        filled = any(call == "download" for _, call in calls)
        return type("Ran", (), {"returncode": 0 if args[0] == "download" or filled else 1, "stderr": ""})()

    monkeypatch.setattr(packaging, "_pip", pip)
    wheelhouse.mkdir(parents=True)

    def build(name: str) -> threading.Thread:
        target = tmp_path / name
        thread = threading.Thread(
            target=packaging.install_dependencies,
            args=(target, packaging.LAMBDA_TARGET, ["pydantic==2.14.3"], wheelhouse),
            name=name,
        )
        thread.start()
        return thread

    with open(wheelhouse.parent / f"{wheelhouse.name}.lock", "w") as held:  # another process filling it
        fcntl.flock(held, fcntl.LOCK_EX)
        first = build("first")
        first.join(timeout=0.5)  # it waits for the lock: nothing to await but the time it is given
        assert first.is_alive() and calls == []

    first.join(timeout=30)
    second = build("second")
    second.join(timeout=30)

    assert calls == [("first", "install"), ("first", "download"), ("first", "install"), ("second", "install")]
