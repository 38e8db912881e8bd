"""A deadline for work that runs inside one request: a task tool called by a client without tasks support.

Such a call runs inline, in the API function's invocation, and Lambda ends an invocation that outlives
the function's timeout (behind API Gateway, an HTTP 500). `ToolDeadline` ends the tool a little
before that instead, so the caller gets an answer: in the main thread (where Lambda runs a handler) a
timer signal (`SIGALRM`) raises `DeadlinePassed` wherever the tool is, a `time.sleep` or a socket
read included. An `async def` tool running on an event loop is cancelled first (every task of the
loop gets `CancelledError` at its next `await`, so its `finally` blocks and the loop stay sound), and
raised out of only if it has not unwound a moment later (a blocking call inside the coroutine).
Outside the main thread no signal can be used: the tool then runs to its end.

Imported on the API's cold start: nothing here imports more than the standard library's basics.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from types import FrameType, TracebackType
from typing import Any, Final

# After cancelling an event loop's tasks at the deadline, how long they may take to unwind before the
# deadline is raised in whatever runs then.
CANCEL_GRACE_SECONDS: Final = 0.5


class DeadlinePassed(BaseException):
    """The deadline of inline work passed. A BaseException, so a tool's `except Exception` cannot keep it."""


class ToolDeadline:
    """`with ToolDeadline(seconds):` runs the block until `seconds` from now (None: no deadline), then
    raises `DeadlinePassed` in it (see the module's docstring for how, and where it cannot)."""

    __slots__ = ("_cancelling", "_ends", "_previous", "passed", "seconds")

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.passed = False
        self._ends: float | None = None
        self._previous: Any = None
        self._cancelling = False

    def __enter__(self) -> ToolDeadline:
        if self.seconds is None:
            return self
        self._ends = time.monotonic() + self.seconds
        if threading.current_thread() is not threading.main_thread():
            return self
        self._previous = signal.signal(signal.SIGALRM, self._fire)
        signal.setitimer(signal.ITIMER_REAL, max(self.seconds, 0.001))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._previous is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous)
            self._previous = None
        if self.passed and exc_type is not None and _is_cancellation(exc_type):
            raise DeadlinePassed from None  # the cancel this deadline sent to an async tool came back

    def _fire(self, signum: int, frame: FrameType | None) -> None:
        self.passed = True
        loop = _running_loop()
        if loop is not None and not self._cancelling:
            self._cancelling = True
            loop.call_soon_threadsafe(_cancel_tasks, loop)  # wakes the loop from its wait for I/O
            signal.setitimer(signal.ITIMER_REAL, CANCEL_GRACE_SECONDS)
            return
        raise DeadlinePassed


def _running_loop() -> Any:
    asyncio = sys.modules.get("asyncio")  # not imported: no loop can be running
    if asyncio is None:
        return None
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _cancel_tasks(loop: Any) -> None:
    import asyncio

    for task in asyncio.all_tasks(loop):
        task.cancel("the inline deadline passed")


def _is_cancellation(exc_type: type[BaseException]) -> bool:
    asyncio = sys.modules.get("asyncio")
    return asyncio is not None and issubclass(exc_type, asyncio.CancelledError)
