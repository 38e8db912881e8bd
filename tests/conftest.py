"""Suite-wide: the shared template-driven stacks, and how tests are spread over xdist workers.

A stack takes seconds to start, so modules of one configuration share one (`SHARED_STACKS`): its
fixture starts it at first use, and it is stopped after the last test that uses it. With
`-n 4 --dist loadscope` (`make test`), tests are sent to workers in groups (`group_of`): the users
of one shared stack together, each other module that starts a stack of its own, the infra tier
(its synthesized apps are cached per process); any other test on its own. The groups that take
longest go first, so the last minutes are not one worker's.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from local_stack.synth import WARM_SWITCH, stop_warm
from testkit import RunningStack
from xdist.scheduler import LoadScopeScheduling

from tests.support import REPO, SHARED_STACKS, local_stack_process

# Modules here start stacks in module fixtures: a module's tests stay together.
STACK_TIERS = ("tests/e2e/", "tests/local_stack/", "tests/test_events.py", "tests/tools/", "tests/test_template.py")
# Modules whose tests each start stacks of their own (none in a module fixture): spread test by test.
PER_TEST = ("tests/local_stack/test_persistence.py",)
# The infra tier's synthesized apps are session fixtures: synthesized once if the tier stays together.
CACHED_TIERS = ("tests/infra/",)
# Groups sent first (by group name, then module path prefix), longest first: the rest fills in beside.
FIRST = (
    "tests/test_template.py",
    "conformance_stack",
    "tests/local_stack/test_persistence.py",
    "tests/local_stack/test_faults.py",
    "tests/infra",
    "tests/local_stack/test_long_work.py",
    "template_stack",
    "tests/e2e/",
    "tests/local_stack/",
    "developer_stack",
    "short_timeout_stack",
    "tests/integration/test_task_store.py",
)
SHARED_BY_MODULE = {module: name for name, shared in SHARED_STACKS.items() for module in shared.users}


# An example tool's own tests live in `test_example_<module>.py` (any tier): collected while
# functions/tools/<module>.py exists, so deleting an example's file takes its tests with it.
EXAMPLE_TESTS = "test_example_"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    name = collection_path.name
    if name.startswith(EXAMPLE_TESTS) and name.endswith(".py"):
        example = REPO / "functions" / "tools" / f"{name.removeprefix(EXAMPLE_TESTS).removesuffix('.py')}.py"
        if not example.is_file():
            return True
    return None


def group_of(nodeid: str) -> str:
    """The unit of work a test is sent to a worker in (a nodeid is all xdist's controller has)."""
    module = nodeid.split("::")[0]
    if module in SHARED_BY_MODULE:
        return SHARED_BY_MODULE[module]
    if module.startswith(CACHED_TIERS):
        return "tests/infra"
    if module.startswith(STACK_TIERS) and module not in PER_TEST:
        return module
    return nodeid


def _rank(nodeid: str) -> int:
    group = group_of(nodeid)
    return next((index for index, prefix in enumerate(FIRST) if group.startswith(prefix)), len(FIRST))


class GroupScheduling(LoadScopeScheduling):
    """xdist's loadscope, with the groups above as its scopes, in collection order."""

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid)


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadScopeScheduling | None:
    if config.getvalue("dist") != "loadscope":
        return None
    config.option.loadscopereorder = False  # the order is the collection's (below)
    return GroupScheduling(config, log)


class StackPool:
    """The shared stacks this process has running, by fixture name."""

    def __init__(self) -> None:
        self._running: dict[str, tuple[ExitStack, RunningStack]] = {}

    def get(self, name: str) -> RunningStack:
        if name not in self._running:
            exits = ExitStack()
            running = exits.enter_context(local_stack_process(**SHARED_STACKS[name].options))
            self._running[name] = (exits, running)
        return self._running[name][1]

    def stop(self, name: str) -> None:
        if name in self._running:
            exits, _ = self._running.pop(name)
            exits.close()

    def stop_all(self) -> None:
        for name in list(self._running):
            self.stop(name)


POOL = StackPool()


def _shared_stack_fixture(name: str) -> Any:
    @pytest.fixture(name=name, scope="module")
    def fixture() -> RunningStack:
        return POOL.get(name)

    fixture.__doc__ = f"The shared stack {name!r} (tests/support.py SHARED_STACKS)."
    return fixture


for _name in SHARED_STACKS:
    globals()[f"_{_name}"] = _shared_stack_fixture(_name)


def _stack_used(item: pytest.Item) -> str | None:
    names = [name for name in getattr(item, "fixturenames", ()) if name in SHARED_STACKS]
    return names[0] if names else None


def _group_stack(item: pytest.Item | None) -> str | None:
    """The shared stack of the item's module's group (its tests that use no stack included)."""
    return None if item is None else SHARED_BY_MODULE.get(item.nodeid.split("::")[0])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest groups first, each group's tests together; otherwise the order is unchanged."""
    for item in items:
        used, module = _stack_used(item), item.nodeid.split("::")[0]
        if used is not None and module not in SHARED_STACKS[used].users:
            raise pytest.UsageError(f"{module} uses {used}: add it to SHARED_STACKS[{used!r}].users (tests/support.py)")
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        first.setdefault(group_of(item.nodeid), index)
    items.sort(key=lambda item: (_rank(item.nodeid), first[group_of(item.nodeid)]))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After the last test of a shared stack's users (in this process) the stack is stopped."""
    try:
        return (yield)
    finally:
        used = _group_stack(item)
        if used is not None and _group_stack(nextitem) != used:
            POOL.stop(used)


def pytest_sessionfinish(session: pytest.Session) -> None:
    POOL.stop_all()
    if not hasattr(session.config, "workerinput") and os.environ.get(WARM_SWITCH) == "1":
        stop_warm()  # the run's warm synthesizer (`make test`): the workers are done with it
