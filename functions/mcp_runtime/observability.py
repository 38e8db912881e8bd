"""The telemetry seam: counters, timings, spans and correlation keys, with nothing imported behind it.

The runtime (transport, server, task service, worker, stores, executor) records what happened
through a `Telemetry` it is given; the default records nothing. The app's composition root injects
the Powertools implementation (`app.telemetry`): EMF metrics, JSON logs, X-Ray subsegments. So no
module here imports Powertools, and the cold start of a `server/discover` pays for none of it.

Metric names live here, in one place: the code emits them and the CDK dashboard graphs them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Concatenate, Final, ParamSpec, Protocol, TypeVar

# ---- metric names and their dimensions ------------------------------------------------------------
# Counts of task transitions, dimension `tool`.
TASKS_CREATED: Final = "TasksCreated"
TASKS_COMPLETED: Final = "TasksCompleted"
TASKS_FAILED: Final = "TasksFailed"
TASKS_CANCELLED: Final = "TasksCancelled"
# Milliseconds from a task's createdAt to its terminal write, dimensions `tool` and `status`.
TIME_TO_TERMINAL: Final = "TimeToTerminal"
# One per `input_required` answer (an MRTR round), dimension `tool` (or `prompt`, `resource`).
MRTR_ROUNDS: Final = "MrtrRounds"
# One per error answer, dimension `code`: the JSON-RPC error code, or the HTTP status for requests
# refused before any JSON-RPC was read (401 without credentials, 403 Origin/Host, 405, 413).
REJECTED_REQUESTS: Final = "RejectedRequests"
# Tasks the sweeper repaired (their status event or their start was lost), dimension `repair`:
# "settled" (failed with the lost-execution error) or "restarted" (a start that never happened).
TASKS_REPAIRED: Final = "TasksRepaired"
# One per sweep that left stale leases for the next run, dimension `cause`: "cap" (more than the
# run's checks) or "unavailable" (Step Functions or the table throttled it). Run after run, the
# sweeper's bound no longer holds.
SWEEP_BEHIND: Final = "SweepBehind"
# Working tasks whose execution still runs although nothing was written for a whole lease (a tool
# that hangs without reporting), one per task each sweep that finds it, dimension `status`: "working".
TASKS_STALE: Final = "TasksStale"
# One per task whose tool raised (a bug in the tool: the task fails with -32603 and the traceback is
# logged), dimension `tool`. Not an execution failure: the execution ends as the task does.
TOOL_EXCEPTIONS: Final = "ToolExceptions"
# One per task write the table refused for good (validation, access) where the writer can do no more
# than report it, dimension `by`: "sweeper", "supervisor" or "worker". The task's other writes and every
# other task go on; the sweeper looks at the task again an hour later.
TASK_WRITES_REFUSED: Final = "TaskWritesRefused"
# One per tool, prompt or resource that could not be described when its module loaded (a parameter no
# JSON schema describes, a name taken twice), left out of the catalog while the others serve, dimension
# `component`: "tool:<name>", "prompt:<name>" or "resource:<uri>". The start-up check and the asset
# build refuse such a module; this counts one that reached an environment anyway.
COMPONENTS_LEFT_OUT: Final = "ComponentsLeftOut"

# Terminal task status -> its counter.
TERMINAL_METRICS: Final[dict[str, str]] = {
    "completed": TASKS_COMPLETED,
    "failed": TASKS_FAILED,
    "cancelled": TASKS_CANCELLED,
}
# Every metric with the dimension sets it is emitted with (sorted names): the contract between the
# code, its tests and the dashboard, whose SEARCH expressions match exact dimension sets.
METRIC_DIMENSIONS: Final[dict[str, tuple[tuple[str, ...], ...]]] = {
    TASKS_CREATED: (("tool",),),
    TASKS_COMPLETED: (("tool",),),
    TASKS_FAILED: (("tool",),),
    TASKS_CANCELLED: (("tool",),),
    TIME_TO_TERMINAL: (("status", "tool"),),
    MRTR_ROUNDS: (("tool",), ("prompt",), ("resource",)),
    REJECTED_REQUESTS: (("code",),),
    TASKS_REPAIRED: (("repair",),),
    SWEEP_BEHIND: (("cause",),),
    TASKS_STALE: (("status",),),
    TASK_WRITES_REFUSED: (("by",),),
    TOOL_EXCEPTIONS: (("tool",),),
    COMPONENTS_LEFT_OUT: (("component",),),
}
ALL_METRICS: Final[tuple[str, ...]] = tuple(METRIC_DIMENSIONS)


class Telemetry(Protocol):
    """What the runtime reports. Implementations must never raise into the request path."""

    def count(self, metric: str, value: float = 1, **dimensions: str) -> None:
        """Add `value` to a counter (unit Count)."""

    def timing(self, metric: str, milliseconds: float, **dimensions: str) -> None:
        """Record one duration (unit Milliseconds)."""

    def span(self, name: str) -> AbstractContextManager[object]:
        """A trace span (an X-Ray subsegment) around a call to a store or an executor."""

    def correlate(self, **keys: str) -> None:
        """Keys that identify the work in hand (task_id, execution_name): added to every log line
        (and span) for the rest of this invocation."""


class NoTelemetry:
    """The default: records nothing, costs nothing."""

    def count(self, metric: str, value: float = 1, **dimensions: str) -> None:
        return None

    def timing(self, metric: str, milliseconds: float, **dimensions: str) -> None:
        return None

    def span(self, name: str) -> AbstractContextManager[object]:
        return nullcontext()

    def correlate(self, **keys: str) -> None:
        return None


NO_TELEMETRY: Final[Telemetry] = NoTelemetry()


class _Instrumented(Protocol):
    telemetry: Telemetry


S = TypeVar("S", bound=_Instrumented)
P = ParamSpec("P")
R = TypeVar("R")


def traced(name: str) -> Callable[[Callable[Concatenate[S, P], R]], Callable[Concatenate[S, P], R]]:
    """Method decorator: run the method inside `self.telemetry.span(name)`."""

    def decorate(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
        @functools.wraps(method)
        def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
            with self.telemetry.span(name):
                return method(self, *args, **kwargs)

        return wrapper

    return decorate
